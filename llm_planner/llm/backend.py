"""The backend contract: ``complete(messages, schema) -> Completion``, and the registry of backends.

A backend turns chat messages into one answer. When ``schema`` (a JSON schema) is given, the backend
constrains decoding to it where it can (llama.cpp compiles it into a grammar; OpenAI-compatible servers
get it as ``response_format``), so the answer parses. Backends are chosen by name in Hydra
(``planner/backend=llama_cpp|openai``); they raise :class:`LLMError` (never anything else) when no
answer can be had, after their own bounded retries.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

Message = dict[str, str]  # {"role": "system"|"user"|"assistant", "content": "..."}


class LLMError(RuntimeError):
    """The backend could not produce an answer (server down, HTTP error, timeout, model failed to load)."""


def check_messages(messages: list[Message]) -> None:
    """LLMError unless every message's content is text that UTF-8 can carry: a lone surrogate (bytes decoded
    with ``surrogateescape``) would fail deep in the tokenizer or the HTTP client with an unrelated error."""
    for i, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            raise LLMError(f"message {i} must be a mapping with text 'content', got {message!r:.80}")
        check_text(content, f"message {i} ({message.get('role')})")


def check_text(text: str, where: str) -> None:
    """LLMError unless UTF-8 can carry ``text`` (``where``: which message or part, for the error)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise LLMError(
            f"{where} is not valid text: U+{ord(text[err.start]):04X} at "
            f"character {err.start} cannot be encoded as UTF-8 (was the input decoded as UTF-8?)"
        ) from None


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    model: str

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class LLMBackend(Protocol):
    name: str

    @property
    def model_id(self) -> str:
        """What identifies the model's answers (file name + size, or server URL + model); the plan cache
        key includes it."""
        ...

    def complete(
        self,
        messages: list[Message],
        schema: dict[str, Any] | None = None,
        *,
        temperature: float = 0.0,
        max_tokens: int = 128,
        seed: int = 0,
    ) -> Completion: ...


#: Backend name -> "module:Class" (imported on first use: llama.cpp loads only when chosen).
BACKENDS: dict[str, str] = {
    "llama_cpp": "llm_planner.llm.llama_cpp_backend:LlamaCppBackend",
    "openai": "llm_planner.llm.openai_backend:OpenAIBackend",
}


def backend_class(name: str) -> Callable[..., LLMBackend]:
    if name not in BACKENDS:
        raise ValueError(f"unknown LLM backend {name!r}; available: {', '.join(sorted(BACKENDS))}")
    module_name, _, class_name = BACKENDS[name].partition(":")
    return getattr(importlib.import_module(module_name), class_name)


def make_backend(name: str, **params: Any) -> LLMBackend:
    cls = backend_class(name)
    try:
        return cls(**params)
    except TypeError as err:
        import inspect

        allowed = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
        raise ValueError(f"LLM backend {name!r} does not accept {sorted(params)}: {err}; it takes {allowed}") from None
