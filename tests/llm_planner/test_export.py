"""Export of a trained LoRA adapter to GGUF, run by the embedded llama.cpp backend (llm_planner/posttrain/export.py).

Real components throughout: each shipped base's GGUF (SmolLM2-135M, Gemma 3 270M) dequantized into
``transformers``, a peft LoRA adapter trained a few steps on it, llama.cpp's own ``convert_lora_to_gguf.py``
(from llama-cpp-python's source archive, cached by ``make setup``), and llama.cpp applying the exported file
at load.
"""

import json
from pathlib import Path

import numpy as np
import peft
import pytest
import torch
from transformers import AutoModelForCausalLM, GPT2Config, LlamaConfig

from llm_planner.llm.answers import answer_schema
from llm_planner.llm.backend import LLMError
from llm_planner.llm.llama_cpp_backend import LlamaCppBackend, default_model_path, shipped_model_path
from llm_planner.posttrain.export import export_adapter, import_adapter
from llm_planner.posttrain.train import load_tokenizer
from sim.navigation.world import load_world

# what the adapter learns: planner answers, which the base model never gives (it answers in prose)
TRAIN = [
    ("Take me to the kitchen.", '{"targets": ["kitchen"], "avoid": []}'),
    ("Go to the bedroom, then the bathroom.", '{"targets": ["bedroom", "bathroom"], "avoid": []}'),
    ("Fetch me something cold to drink.", '{"targets": ["fridge"], "avoid": []}'),
    ("Patrol the hallway but stay out of the office.", '{"targets": ["hallway"], "avoid": ["office"]}'),
    ("Park at the charging dock.", '{"targets": ["charging_dock"], "avoid": []}'),
]
MAX_TOKENS = 16
ADAPTERS_GEMMA = Path(__file__).resolve().parents[2] / "llm_planner/adapters/gemma3_sft/adapter.gguf"
LORA = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.0, "target_modules": "all-linear", "task_type": "CAUSAL_LM"}


def chat(text):
    return [{"role": "user", "content": text}]


#: the exported adapter's size at f16, r=16 on every linear layer: SmolLM2-135M 4.9 M parameters (its base:
#: 98 MB), Gemma 3 270M 3.8 M (18 layers of 640 features; its base: 253 MB)
ADAPTER_MB = {"smollm2": (8, 12), "gemma3": (6, 9)}


@pytest.fixture(scope="module", params=sorted(ADAPTER_MB))
def trained(request, tmp_path_factory):
    """(peft model, tokenizer, adapter dir, base name, base GGUF): a LoRA adapter on a shipped base, trained
    until it gives the TRAIN answers, saved with ``save_pretrained`` as hrl-posttrain does."""
    path = shipped_model_path(request.param)
    tokenizer = load_tokenizer(path)  # with the chat format the backend renders (Gemma's GGUF has none)
    quantized = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    model = AutoModelForCausalLM.from_config(quantized.config, dtype=torch.float32)
    model.load_state_dict(quantized.state_dict())
    torch.manual_seed(0)
    model = peft.get_peft_model(model, peft.LoraConfig(**LORA))
    rows = []
    for prompt, answer in TRAIN:
        ids = tokenizer.apply_chat_template(chat(prompt), add_generation_prompt=True, return_dict=True)["input_ids"]
        target = tokenizer(answer + tokenizer.eos_token, add_special_tokens=False)["input_ids"]
        rows.append((ids + target, [-100] * len(ids) + target))  # the loss on the answer only
    width = max(len(ids) for ids, _ in rows)
    input_ids = torch.tensor([ids + [tokenizer.eos_token_id] * (width - len(ids)) for ids, _ in rows])
    labels = torch.tensor([lab + [-100] * (width - len(lab)) for _, lab in rows])
    mask = torch.tensor([[1] * len(ids) + [0] * (width - len(ids)) for ids, _ in rows])
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-3)
    for _ in range(8):  # the loss falls from ~4 to < 0.05: the answers become clear greedy choices
        model(input_ids=input_ids, attention_mask=mask, labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()
    adapter = tmp_path_factory.mktemp("posttrain") / "adapter"
    model.save_pretrained(str(adapter))
    return model, tokenizer, adapter, request.param, path


@pytest.fixture(scope="module")
def exported(trained, tmp_path_factory):
    return export_adapter(trained[2], tmp_path_factory.mktemp("export") / "adapter.gguf", base_gguf=trained[4])


def log_probs(logits, rows, picked):
    """log P(picked[i]) under the logits of rows[i]."""
    logits = np.asarray(logits, dtype=np.float64)[rows]
    top = logits.max(axis=1, keepdims=True)
    return (logits - top - np.log(np.exp(logits - top).sum(axis=1, keepdims=True)))[np.arange(len(rows)), picked]


def hf_greedy(model, tokenizer, prompt):
    ids = tokenizer.apply_chat_template(chat(prompt), add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.no_grad():
        out = model.generate(**ids, max_new_tokens=MAX_TOKENS, do_sample=False, eos_token_id=tokenizer.eos_token_id,
                             pad_token_id=tokenizer.pad_token_id)  # fmt: skip
    return tokenizer.decode(out[0, ids["input_ids"].shape[1] :], skip_special_tokens=True)


@pytest.mark.slow
def test_exported_adapter_is_a_small_gguf_file(trained, exported):
    """r=16 on every linear layer: about 10 MB at f16 for SmolLM2-135M, 7.6 MB for Gemma 3 270M."""
    low, high = ADAPTER_MB[trained[3]]
    assert exported.read_bytes()[:4] == b"GGUF"
    assert low * 1e6 < exported.stat().st_size < high * 1e6


@pytest.mark.slow
def test_llama_cpp_with_the_exported_adapter_gives_the_transformers_models_greedy_answers(trained, exported):
    model, tokenizer, _, name, _ = trained
    prompts = [prompt for prompt, _ in TRAIN]
    with_adapter = LlamaCppBackend(model=name, lora_path=str(exported), n_ctx=512, n_threads=2, state_cache_mb=0)
    base = LlamaCppBackend(model=name, n_ctx=512, n_threads=2, state_cache_mb=0)
    llama = [with_adapter.complete(chat(p), temperature=0.0, max_tokens=MAX_TOKENS).text for p in prompts]
    hf = [hf_greedy(model, tokenizer, p) for p in prompts]
    assert llama == hf
    # the adapter is really applied: the base model answers these in prose
    base_answers = [base.complete(chat(p), temperature=0.0, max_tokens=MAX_TOKENS).text for p in prompts]
    assert sum(a != b for a, b in zip(llama, base_answers, strict=True)) >= 1
    assert with_adapter.model_id != base.model_id and with_adapter.model_id.startswith(base.model_id + "+lora:")
    # under the planner's grammar (scene names as enums) the adapter gives the same answers, now parsed
    if name == "gemma3":
        pytest.xfail(
            'Gemma 3 + adapter under the grammar, user-only chat: llama.cpp returned \'{"targets":kitchen"],'
            "targets\":...' (measured 2026-12-04; the base Gemma keeps the grammar on the planner's prompts, "
            "test_posttrain_bases.py); not understood yet"
        )
    schema = answer_schema("llm_goals", load_world("apartment"))
    constrained = [with_adapter.complete(chat(p), schema, max_tokens=48).text for p in prompts]
    assert [json.loads(text) for text in constrained] == [json.loads(text) for text in llama]


@pytest.mark.slow
def test_llama_cpp_applies_the_exported_adapter_at_the_transformers_models_scale(trained, exported):
    """Greedy answers can hide a wrong scale (a memorised answer survives alpha/r applied twice), so the
    log-probabilities of a fixed reply after prompts the adapter never saw are compared too. llama.cpp runs the
    Q4_1 base with 8-bit activations where ``transformers`` runs its dequantized fp32 copy: they differ by
    ~0.07 nats a token with or without the adapter. That noise cancels in the adapter's *shift* of each log-prob
    (with minus without), which the two must agree on: measured 0.95-1.07 per prompt at f16 (f32 and q8_0 the
    same), where alpha/r applied twice or not at all gives ~2 or 0."""
    from llama_cpp import Llama

    model, tokenizer, _, _, path = trained
    reply = tokenizer(" I will go there now, and then come back here.", add_special_tokens=False)["input_ids"]
    llama = {
        lora: Llama(str(path), n_ctx=512, n_threads=2, logits_all=True, verbose=False, lora_path=lora)
        for lora in (None, str(exported))
    }
    hf_shift, llama_shift = [], []
    for prompt in ["Go to the office.", "What is the capital of France?", "Please wait near the sofa."]:
        ids = tokenizer.apply_chat_template(chat(prompt), add_generation_prompt=True, return_dict=True)["input_ids"]
        tokens = ids + reply
        rows = np.arange(len(ids) - 1, len(tokens) - 1)  # the positions whose logits predict `reply`
        with torch.no_grad():
            hf_adapter = log_probs(model(input_ids=torch.tensor([tokens])).logits[0].numpy(), rows, reply)
            with model.disable_adapter():
                hf_base = log_probs(model(input_ids=torch.tensor([tokens])).logits[0].numpy(), rows, reply)
        llama_lp = {}
        for lora, llm in llama.items():
            llm.reset()
            llm.eval(tokens)
            llama_lp[lora] = log_probs(llm.scores[: len(tokens)], rows, reply)
        hf_shift.append(hf_adapter - hf_base)
        llama_shift.append(llama_lp[str(exported)] - llama_lp[None])
    hf_shift, llama_shift = np.concatenate(hf_shift), np.concatenate(llama_shift)
    assert np.abs(hf_shift).mean() > 0.5, hf_shift  # the adapter moves these log-probs ...
    scale = float(hf_shift @ llama_shift / (hf_shift @ hf_shift))  # least squares: llama_shift ~ scale * hf_shift
    assert 0.85 < scale < 1.15, (scale, hf_shift, llama_shift)  # ... and llama.cpp moves them as much
    assert np.corrcoef(hf_shift, llama_shift)[0, 1] > 0.95


# -- import: a GGUF adapter back into peft (hrl-posttrain init_adapter=shipped:<name> | a .gguf) ----------
@pytest.mark.slow
def test_an_exported_adapter_imports_back_to_the_tensors_it_was_exported_from(trained, exported, tmp_path):
    """Export then import gives the trained tensors back to f16 rounding, under peft's names, for both bases:
    SmolLM2 (llama) is the case where the converter reorders the rows of q and k (lora_b) for llama.cpp's
    rotary layout, which the import undoes. The imported folder loads and answers as the trained model."""
    from safetensors.torch import load_file

    from llm_planner.posttrain.train import load_model

    model, tokenizer, adapter, name, base = trained
    imported = import_adapter(exported, tmp_path / "imported", base_gguf=base)
    want = load_file(str(adapter / "adapter_model.safetensors"))
    got = load_file(str(imported / "adapter_model.safetensors"))
    assert set(got) == set(want) and len(got) > 50
    for key, value in want.items():
        assert got[key].shape == value.shape, key
        assert torch.allclose(got[key], value, rtol=2e-3, atol=1e-6), key  # f16 in the file
    config = json.loads((imported / "adapter_config.json").read_text())
    assert (config["r"], config["lora_alpha"], config["peft_type"]) == (16, 32, "LORA")
    assert set(config["target_modules"]) == {f"{x}_proj" for x in ("q", "k", "v", "o", "gate", "up", "down")}
    again, _ = load_model(name, adapter=str(imported), trainable=False)
    again.eval()
    assert [hf_greedy(again, tokenizer, p) for p, _ in TRAIN] == [hf_greedy(model, tokenizer, p) for p, _ in TRAIN]


def test_the_shipped_adapter_imports_as_a_peft_folder(tmp_path):
    """The shipped navigation + tabletop adapter (Gemma 3 270M): r=16 on the 7 linear layers of 18 blocks, alpha
    32, shapes checked against the base model, so training can start from it without the run that made it."""
    from safetensors.torch import load_file

    from llm_planner.llm.llama_cpp_backend import shipped_adapter_path

    out = import_adapter(shipped_adapter_path("shipped:gemma3_sft"), tmp_path / "a", shipped_model_path("gemma3"))
    config = json.loads((out / "adapter_config.json").read_text())
    assert (config["r"], config["lora_alpha"], config["lora_dropout"]) == (16, 32, 0.05)
    tensors = load_file(str(out / "adapter_model.safetensors"))
    assert len(tensors) == 18 * 7 * 2
    a = tensors["base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"]
    b = tensors["base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight"]
    assert a.shape == (16, 640) and b.shape[1] == 16 and b.abs().max() > 0  # trained: B is zero at init
    assert a.dtype == torch.float32


def test_import_and_init_adapter_refuse_what_they_cannot_start_from(tmp_path):
    from llm_planner.posttrain.train import PosttrainConfig

    with pytest.raises(ValueError, match=r"is not a GGUF LoRA adapter \(general.type 'model'"):
        import_adapter(shipped_model_path("smollm2"), tmp_path / "a", shipped_model_path("smollm2"))
    with pytest.raises(ValueError, match=r"adapter of a 'gemma3' model, but the base .* is 'llama'"):
        import_adapter(ADAPTERS_GEMMA, tmp_path / "a", shipped_model_path("smollm2"))
    with pytest.raises(ValueError, match=r"trained on base=gemma3, not base=smollm2: set base=gemma3"):
        PosttrainConfig(base="smollm2", init_adapter="shipped:gemma3_sft").check()
    with pytest.raises(ValueError, match=r"no shipped adapter 'nope'; shipped: gemma3_sft"):
        PosttrainConfig(base="gemma3", init_adapter="shipped:nope").check()
    with pytest.raises(ValueError, match=r"'.*missing.gguf' does not exist"):
        PosttrainConfig(base="gemma3", init_adapter=str(tmp_path / "missing.gguf")).check()
    (tmp_path / "adapter_model.safetensors").write_bytes(b"")
    with pytest.raises(ValueError, match=r"neither a folder nor a .gguf file"):
        PosttrainConfig(base="gemma3", init_adapter=str(tmp_path / "adapter_model.safetensors")).check()
    (tmp_path / "run").mkdir()
    with pytest.raises(ValueError, match=r"holds no adapter_config.json: give the adapter/ folder"):
        PosttrainConfig(base="gemma3", init_adapter=str(tmp_path / "run")).check()
    PosttrainConfig(base="gemma3", init_adapter="shipped:gemma3_sft").check()  # the documented start


# -- errors ---------------------------------------------------------------------------------------------
def tiny_adapter(path, config, **lora):
    """A real peft adapter of a tiny randomly initialised model of ``config`` (no download), saved at ``path``."""
    model = peft.get_peft_model(AutoModelForCausalLM.from_config(config), peft.LoraConfig(r=2, **lora))
    model.save_pretrained(str(path))
    return path


def test_export_refuses_a_missing_adapter_folder(tmp_path):
    with pytest.raises(ValueError, match=r"adapter_dir '.*nowhere' is not a folder; give the adapter/ folder"):
        export_adapter(tmp_path / "nowhere", tmp_path / "a.gguf")


def test_export_refuses_a_folder_that_is_not_a_peft_adapter(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.json").write_text("{}")
    with pytest.raises(ValueError, match=r"'.*run' holds no adapter_config.json, so it is no peft adapter"):
        export_adapter(tmp_path / "run", tmp_path / "a.gguf")


def test_export_refuses_an_output_path_that_is_not_gguf(tmp_path):
    with pytest.raises(ValueError, match=r"out_path '.*adapter.bin' must end in .gguf"):
        export_adapter(tmp_path, tmp_path / "adapter.bin")


def test_export_refuses_lora_options_llama_cpp_cannot_carry(tmp_path):
    config = LlamaConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, vocab_size=64
    )
    adapter = tiny_adapter(tmp_path / "rs", config, target_modules=["q_proj"], use_rslora=True)
    with pytest.raises(ValueError, match=r"uses rank-stabilised scaling .* cannot carry"):
        export_adapter(adapter, tmp_path / "a.gguf")


def test_export_refuses_an_adapter_of_another_model_size(tmp_path):
    config = LlamaConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, vocab_size=64
    )
    adapter = tiny_adapter(tmp_path / "small", config, target_modules=["q_proj"])
    with pytest.raises(ValueError, match=r"q_proj.lora_A.weight' .* has shape \(2, 32\), but .* maps 576 -> 576"):
        export_adapter(adapter, tmp_path / "a.gguf")


def test_export_refuses_an_adapter_of_another_architecture(tmp_path):
    adapter = tiny_adapter(
        tmp_path / "gpt2", GPT2Config(n_embd=32, n_layer=1, n_head=2, vocab_size=64), target_modules=["c_attn"]
    )
    with pytest.raises(ValueError, match=r"targets 'transformer.h.0.attn.c_attn', which the base model .* does not"):
        export_adapter(adapter, tmp_path / "a.gguf")


def test_backend_refuses_a_lora_path_that_llama_cpp_does_not_apply(tmp_path):
    """A GGUF model is no adapter: llama.cpp refuses it, and llama-cpp-python 0.3.36 would go on without it."""
    model = default_model_path()
    with pytest.raises(LLMError, match=r"llama.cpp did not apply lora_path '.*Q4_1.gguf' .* not a LoRA adapter"):
        LlamaCppBackend(lora_path=str(model), n_ctx=256, n_threads=1)
    with pytest.raises(LLMError, match=r"lora_path '.*' is a directory"):
        LlamaCppBackend(lora_path=str(tmp_path), n_ctx=256, n_threads=1)
    (tmp_path / "adapter.bin").write_bytes(b"GGUF")
    with pytest.raises(LLMError, match=r"lora_path '.*adapter.bin' is not a .gguf file; give the path of a GGUF LoRA"):
        LlamaCppBackend(lora_path=str(tmp_path / "adapter.bin"), n_ctx=256, n_threads=1)
    (tmp_path / "empty.gguf").write_bytes(b"")
    with pytest.raises(LLMError, match=r"lora_path '.*empty.gguf' is an empty file"):
        LlamaCppBackend(lora_path=str(tmp_path / "empty.gguf"), n_ctx=256, n_threads=1)
