"""A trained LoRA adapter (peft) as a GGUF LoRA adapter that the embedded llama.cpp backend applies at load.

The adapter stays a small file beside the shipped base model (about 10 MB at f16 for r=16 on every linear
layer of SmolLM2-135M, against the base's 98 MB): ``LlamaCppBackend(lora_path=...)`` /
``planner.backend.params.lora_path=...`` loads it, and the answers keep the planner's grammar-constrained
decoding.

The conversion is llama.cpp's own ``convert_lora_to_gguf.py``, of the llama.cpp that the installed
llama-cpp-python runs (so the file is in the format its loader reads). The script is in llama-cpp-python's
source archive (``vendor/llama.cpp/``), not in its wheel: ``scripts/cache_llama_wheel.sh`` (``make setup``)
keeps that archive in ``~/.cache/hrl-stack/wheels/sdist/``, and :func:`llama_cpp_converter` extracts the
script (with its ``conversion/`` and ``gguf-py/`` packages) beside it once. Where the archive is missing it is
downloaded with pip from PyPI once, or the export fails saying how to provide it.

The converter needs the base model's ``config.json``: it is written from the GGUF the adapter was trained
on (``transformers``' ``gguf_file=``), and the adapter's tensors are checked against that base first, so an
adapter of another model is refused with its name and shapes rather than failing inside llama.cpp.

    python -m llm_planner.posttrain.export runs/posttrain/<time>/adapter runs/posttrain/<time>/adapter.gguf
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

WHEEL_CACHE = Path("~/.cache/hrl-stack/wheels")  # the Makefile's WHEEL_CACHE (scripts/cache_llama_wheel.sh)
OUTTYPES = ("f16", "f32", "bf16", "q8_0")  # convert_lora_to_gguf.py --outtype (its "auto" is left out: f16/f32)
CONVERTER = "convert_lora_to_gguf.py"
CONVERTER_PARTS = (CONVERTER, "conversion/", "gguf-py/")  # the script imports both packages from its folder
# peft options the converter cannot carry: llama.cpp scales every LoRA product by lora_alpha / r
UNSUPPORTED = {
    "use_rslora": "rank-stabilised scaling (alpha/sqrt(r))",
    "use_dora": "DoRA magnitudes",
    "alpha_pattern": "per-module alphas",
    "rank_pattern": "per-module ranks",
    "modules_to_save": "fully trained modules",
    "trainable_token_indices": "trained token embeddings",
}


def export_adapter(
    adapter_dir: str | Path,
    out_path: str | Path,
    base_gguf: str | Path | None = None,
    outtype: str = "f16",
    cache_dir: str | Path = WHEEL_CACHE,
) -> Path:
    """Convert a peft LoRA adapter into a GGUF LoRA adapter for llama.cpp.

    Args:
        adapter_dir: the folder ``save_pretrained`` wrote (``adapter_config.json``, ``adapter_model.safetensors``).
        out_path: the ``.gguf`` file to write (folders are created).
        base_gguf: the GGUF model the adapter was trained on and that llama.cpp will run it with
            (None: the backend's default, SmolLM2-135M-Instruct Q4_1).
        outtype: the adapter's tensor type, one of :data:`OUTTYPES` (f16: half of f32's size, same answers).
        cache_dir: where the llama-cpp-python source archive is kept (the Makefile's ``WHEEL_CACHE``).

    Returns:
        ``out_path``.

    Raises:
        ValueError: the adapter folder, its config or its tensors do not fit (naming the path and the fix).
        RuntimeError: the converter cannot be obtained or fails (with its last output lines).
    """
    from llm_planner.llm.llama_cpp_backend import default_model_path

    adapter_dir = Path(adapter_dir).expanduser()
    out_path = Path(out_path).expanduser()
    base = Path(base_gguf).expanduser() if base_gguf else default_model_path()
    if outtype not in OUTTYPES:
        raise ValueError(f"outtype={outtype!r} is not one of {', '.join(OUTTYPES)}")
    if out_path.suffix.lower() != ".gguf":
        raise ValueError(f"out_path {str(out_path)!r} must end in .gguf (the llama_cpp backend loads only .gguf files)")
    if not base.is_file():
        raise ValueError(f"base_gguf {str(base)!r} is not a file; give the GGUF model the adapter was trained on")
    lora = check_adapter_dir(adapter_dir)
    with tempfile.TemporaryDirectory(prefix="hrl-lora-base-") as base_dir:
        write_base_config(base, Path(base_dir), adapter_dir, lora)  # checks the adapter against the base first
        script = llama_cpp_converter(cache_dir)
        out_path.parent.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, str(script), str(adapter_dir), "--base", base_dir, "--outfile", str(out_path)]
        # the base config is local: the converter must never look for it on the Hugging Face Hub
        env = {**os.environ, "HF_HUB_OFFLINE": "1"}
        done = subprocess.run([*cmd, "--outtype", outtype], capture_output=True, text=True, env=env)
    if done.returncode != 0 or not out_path.is_file():
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-8:])
        raise RuntimeError(f"llama.cpp's {CONVERTER} failed on {adapter_dir} (exit {done.returncode}):\n{tail}")
    log.info("exported %s -> %s (%.1f MB, %s)", adapter_dir, out_path, out_path.stat().st_size / 1e6, outtype)
    return out_path


def check_adapter_dir(adapter_dir: Path) -> dict:
    """The adapter's ``adapter_config.json`` as a dict; ValueError naming the path unless it is a peft LoRA
    adapter folder the converter can carry."""
    hint = "give the adapter/ folder of an hrl-posttrain run (runs/posttrain/<time>/adapter)"
    if not adapter_dir.is_dir():
        raise ValueError(f"adapter_dir {str(adapter_dir)!r} is not a folder; {hint}")
    config_path = adapter_dir / "adapter_config.json"
    if not config_path.is_file():
        raise ValueError(
            f"adapter_dir {str(adapter_dir)!r} holds no adapter_config.json, so it is no peft adapter; {hint}"
        )
    if not (adapter_dir / "adapter_model.safetensors").is_file():
        raise ValueError(
            f"adapter_dir {str(adapter_dir)!r} holds no adapter_model.safetensors; save the adapter with "
            "model.save_pretrained(dir) (peft writes safetensors by default)"
        )
    try:
        config = json.loads(config_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{config_path} is not valid JSON ({err}); save the adapter again") from None
    if config.get("peft_type") != "LORA":
        raise ValueError(f"{config_path}: peft_type is {config.get('peft_type')!r}; only LoRA adapters convert to GGUF")
    used = [what for key, what in UNSUPPORTED.items() if config.get(key)]
    if used:
        raise ValueError(
            f"{config_path} uses {', '.join(used)}, which llama.cpp's LoRA format cannot carry (it applies "
            "lora_alpha/r to every layer); train the adapter with a plain LoraConfig(r, lora_alpha, target_modules)"
        )
    return config


def write_base_config(base: Path, out_dir: Path, adapter_dir: Path, lora: dict) -> None:
    """Write the base model's ``config.json`` (from its GGUF) into ``out_dir`` for the converter, after
    checking that every adapter tensor fits a layer of that model (ValueError naming both otherwise)."""
    import torch
    from safetensors import safe_open
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    config = AutoConfig.from_pretrained(str(base.parent), gguf_file=base.name)
    # a config read from GGUF names no class; the converter picks its model definition by this name
    config.architectures = [MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[config.model_type]]
    with torch.device("meta"):  # the layer shapes only: no weights are allocated
        model = AutoModelForCausalLM.from_config(config)
    trained_on = lora.get("base_model_name_or_path")
    fix = f"export it with the GGUF it was trained on (base_gguf=...; its adapter_config.json says {trained_on!r})"
    with safe_open(str(adapter_dir / "adapter_model.safetensors"), framework="pt") as tensors:
        for key in tensors.keys():  # noqa: SIM118 (safe_open is not a mapping)
            name = key.removeprefix("base_model.model.")
            module_name, _, kind = name.rpartition(".lora_")
            try:
                module = model.get_submodule(module_name)
            except AttributeError:
                raise ValueError(
                    f"adapter tensor {key!r} of {adapter_dir} targets {module_name!r}, which the base model "
                    f"{base.name} ({config.model_type}) does not have: the adapter belongs to another model; {fix}"
                ) from None
            if isinstance(module, torch.nn.Linear):
                shape = tuple(tensors.get_slice(key).get_shape())
                fits = shape[1] == module.in_features if kind.startswith("A") else shape[0] == module.out_features
                if not fits:
                    raise ValueError(
                        f"adapter tensor {key!r} of {adapter_dir} has shape {shape}, but {module_name} of "
                        f"{base.name} maps {module.in_features} -> {module.out_features} features: the adapter "
                        f"belongs to another model size; {fix}"
                    )
    config.save_pretrained(out_dir)


def llama_cpp_converter(cache_dir: str | Path = WHEEL_CACHE) -> Path:
    """The path of ``convert_lora_to_gguf.py`` from the installed llama-cpp-python's source archive, extracted
    once into ``<cache_dir>/sdist/llama.cpp-<version>/`` (the archive is downloaded with pip if missing)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        llama_version = version("llama-cpp-python")
    except PackageNotFoundError:
        raise RuntimeError(
            "exporting an adapter needs llama-cpp-python: pip install -e '.[llm]' (or make setup)"
        ) from None
    src = Path(cache_dir).expanduser() / "sdist"
    tree = src / f"llama.cpp-{llama_version}"
    if (tree / CONVERTER).is_file():
        return tree / CONVERTER
    sdist = src / f"llama_cpp_python-{llama_version}.tar.gz"
    if not sdist.is_file():
        _download_sdist(llama_version, src)
    _extract_converter(sdist, tree, prefix=f"llama_cpp_python-{llama_version}/vendor/llama.cpp/")
    return tree / CONVERTER


def _download_sdist(llama_version: str, src: Path) -> None:
    """pip download llama-cpp-python's source archive into ``src`` (PyPI, once per machine)."""
    log.warning(
        "llama-cpp-python %s source archive not in %s: downloading it from PyPI (76 MB, once)", llama_version, src
    )
    src.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", ":all:", "--no-deps"]
    done = subprocess.run([*cmd, f"llama-cpp-python=={llama_version}", "-d", str(src)], capture_output=True, text=True)
    if done.returncode != 0 or not (src / f"llama_cpp_python-{llama_version}.tar.gz").is_file():
        reason = (done.stderr.strip().splitlines() or ["no archive written"])[-1]
        raise RuntimeError(
            f"llama.cpp's {CONVERTER} is in llama-cpp-python's source archive, which is not in {src} and could "
            f"not be downloaded ({reason}); run `make setup` where PyPI is reachable (it keeps the archive), or "
            f"copy llama_cpp_python-{llama_version}.tar.gz (pip download --no-binary :all: --no-deps "
            f"llama-cpp-python=={llama_version}) into {src}"
        )


def _extract_converter(sdist: Path, tree: Path, prefix: str) -> None:
    """Extract the converter's parts from ``sdist`` into ``tree`` (via a temporary folder, so a killed
    extraction never leaves a half tree that looks complete)."""
    tmp = Path(tempfile.mkdtemp(prefix=f"{tree.name}.", dir=tree.parent))
    try:
        with tarfile.open(sdist) as archive:
            members = []
            for member in archive:
                rel = member.name.removeprefix(prefix)
                if rel != member.name and rel.startswith(CONVERTER_PARTS):
                    member.name = rel
                    members.append(member)
            if not any(m.name == CONVERTER for m in members):
                raise RuntimeError(f"{sdist} holds no {prefix}{CONVERTER}; delete it so that it is downloaded again")
            archive.extractall(tmp, members=members, filter="data")
        tmp.rename(tree)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


#: GGUF tensor names of the linear layers a LoRA adapter targets -> the Hugging Face module in each block
GGUF_MODULES = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
#: architectures whose converter reorders the rows of q and k for llama.cpp's rotary layout (undone on import)
PERMUTED_QK = ("llama",)


def import_adapter(gguf_path: str | Path, out_dir: str | Path, base_gguf: str | Path, dropout: float = 0.05) -> Path:
    """The inverse of :func:`export_adapter`: a GGUF LoRA adapter (a shipped one, or any that
    ``convert_lora_to_gguf.py`` wrote) as a peft adapter folder that training starts from
    (``hrl-posttrain init_adapter=...``), so a shipped adapter can be trained further without the run that made
    it. The tensors are the file's (f16 in the shipped ones: peft's fp32 rounded to half precision, which changes
    no greedy answer of the tests); ``lora_alpha`` is the file's; ``lora_dropout`` (not in the file) is
    ``dropout``. The adapter is checked against ``base_gguf`` (architecture, layer shapes) as an export is.

    Returns ``out_dir`` (with ``adapter_config.json`` and ``adapter_model.safetensors``). Raises ValueError naming
    the file and the fix for a file that is no LoRA adapter, of another architecture, or has tensors this
    mapping does not know (:data:`GGUF_MODULES`)."""
    import gguf
    import numpy as np
    import torch
    from peft import LoraConfig
    from safetensors.torch import save_file

    gguf_path, out_dir, base = Path(gguf_path).expanduser(), Path(out_dir).expanduser(), Path(base_gguf).expanduser()
    if not gguf_path.is_file():
        raise ValueError(f"adapter {str(gguf_path)!r} is not a file; give a GGUF LoRA adapter or shipped:<name>")
    try:
        reader = gguf.GGUFReader(str(gguf_path))
    except (ValueError, OSError) as err:
        raise ValueError(f"adapter {str(gguf_path)!r} cannot be read as GGUF ({err})") from None

    def field(r: Any, key: str) -> Any:
        return r.fields[key].contents() if key in r.fields else None

    if field(reader, "general.type") != "adapter" or field(reader, "adapter.type") != "lora":
        raise ValueError(
            f"{gguf_path} is not a GGUF LoRA adapter (general.type {field(reader, 'general.type')!r}, adapter.type "
            f"{field(reader, 'adapter.type')!r}); a model file is given as base, an adapter as init_adapter"
        )
    arch = field(reader, "general.architecture")
    base_reader = gguf.GGUFReader(str(base))
    base_arch = field(base_reader, "general.architecture")
    if arch != base_arch:
        raise ValueError(
            f"{gguf_path} is an adapter of a {arch!r} model, but the base {base.name} is {base_arch!r}: "
            "give the base it was trained on"
        )
    heads = (field(base_reader, f"{arch}.attention.head_count"), field(base_reader, f"{arch}.attention.head_count_kv"))
    alpha = float(field(reader, "adapter.lora.alpha"))
    tensors: dict[str, Any] = {}
    modules, ranks = set(), set()
    for t in reader.tensors:
        stem, _, kind = t.name.rpartition(".weight.lora_")
        block, _, layer = stem.partition(".")[2].partition(".")
        if not stem.startswith("blk.") or layer not in GGUF_MODULES or kind not in ("a", "b") or not block.isdigit():
            raise ValueError(
                f"{gguf_path}: tensor {t.name!r} is not a LoRA tensor of a linear layer this importer knows "
                f"(blk.<n>.<{'|'.join(GGUF_MODULES)}>.weight.lora_<a|b>)"
            )
        w = np.array(t.data, dtype=np.float32).reshape(tuple(reversed([int(d) for d in t.shape])))
        if kind == "b" and arch in PERMUTED_QK and layer in ("attn_q", "attn_k"):
            n_head = heads[0] if layer == "attn_q" else heads[1]  # undo the converter's rotary row order
            w = w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
        module = f"base_model.model.model.layers.{block}.{GGUF_MODULES[layer]}"
        tensors[f"{module}.lora_{kind.upper()}.weight"] = torch.from_numpy(np.ascontiguousarray(w))
        modules.add(GGUF_MODULES[layer].rpartition(".")[2])
        ranks.add(w.shape[0] if kind == "a" else w.shape[1])
    if len(ranks) != 1:
        raise ValueError(f"{gguf_path}: LoRA ranks {sorted(ranks)} differ between layers; peft needs one rank here")
    out_dir.mkdir(parents=True, exist_ok=True)
    config = LoraConfig(
        r=ranks.pop(),
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules=sorted(modules),
        task_type="CAUSAL_LM",
        base_model_name_or_path=str(base),
    )
    config.save_pretrained(str(out_dir))
    save_file(tensors, str(out_dir / "adapter_model.safetensors"))
    with tempfile.TemporaryDirectory(prefix="hrl-lora-base-") as base_dir:  # shapes against the base model
        write_base_config(base, Path(base_dir), out_dir, json.loads((out_dir / "adapter_config.json").read_text()))
    log.info("imported %s -> %s (r=%d, alpha %g, %d tensors)", gguf_path, out_dir, config.r, alpha, len(tensors))
    return out_dir


def main(argv: list[str] | None = None) -> None:
    """``python -m llm_planner.posttrain.export ADAPTER_DIR OUT.gguf``: the CLI of :func:`export_adapter`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("adapter_dir", help="the peft adapter folder (adapter_config.json, adapter_model.safetensors)")
    parser.add_argument("out_path", help="the GGUF LoRA adapter to write (.gguf)")
    parser.add_argument("--base-gguf", default=None, help="the GGUF the adapter was trained on (default: SmolLM2)")
    parser.add_argument("--outtype", default="f16", choices=OUTTYPES)
    parser.add_argument("--cache-dir", default=str(WHEEL_CACHE), help="where llama-cpp-python's source archive is kept")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    out = export_adapter(args.adapter_dir, args.out_path, args.base_gguf, args.outtype, args.cache_dir)
    print(f"{out} ({out.stat().st_size / 1e6:.1f} MB): planner.backend.params.lora_path={out}")


if __name__ == "__main__":
    main()
