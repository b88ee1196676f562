"""``openai``: any OpenAI-compatible chat-completions server (vLLM, Ollama, llama.cpp's server, hosted APIs).

Uses the official ``openai`` client, whose retries (connection errors, timeouts, HTTP 408/409/429/5xx)
back off exponentially and are bounded by ``max_retries``. The API key is read from the environment
variable named by ``api_key_env`` when the backend is built; the key itself never enters a config, a
log, an error message or a run directory. ``response_format`` picks how the answer's JSON schema is sent:

* ``json_schema``: OpenAI structured outputs (``{"type": "json_schema", "json_schema": {...}}``); vLLM,
  Ollama, hosted APIs and llama.cpp's own ``llama-server``. llama-cpp-python's server
  (``python -m llama_cpp.server``) refuses it (its request model allows only ``text`` and ``json_object``):
  that refusal is an LLMError that says to use ``json_object``; the backend never switches by itself;
* ``json_object``: ``{"type": "json_object", "schema": ...}``, llama-cpp-python's server (grammar from the
  schema);
* ``none``: no constraint; the answer is still parsed and validated, and re-asked when invalid.
"""

from __future__ import annotations

import os
import time
from typing import Any

from llm_planner.llm.backend import Completion, LLMError, Message, check_messages

RESPONSE_FORMATS = ("json_schema", "json_object", "none")


class OpenAIBackend:
    name = "openai"
    #: What a message list must be before it is sent (text content; the vision backend also takes image parts).
    check = staticmethod(check_messages)

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000/v1",
        model: str = "default",
        api_key_env: str | None = "OPENAI_API_KEY",
        timeout_s: float = 30.0,
        max_retries: int = 2,
        response_format: str = "json_schema",
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(
                f"base_url {base_url!r} must start with http:// or https:// (e.g. http://127.0.0.1:8000/v1)"
            )
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0 s, got {timeout_s}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        if response_format not in RESPONSE_FORMATS:
            raise ValueError(f"response_format {response_format!r} is not one of {', '.join(RESPONSE_FORMATS)}")
        try:
            import openai
        except ImportError as err:
            raise LLMError(f"the openai backend needs the openai package ({err}); pip install -e '.[llm]'") from None
        key = os.environ.get(api_key_env, "") if api_key_env else ""
        self.base_url = base_url
        self.model = model
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.response_format = response_format
        self._openai = openai
        # local servers take any key; the client insists on a non-empty one
        self._client = openai.OpenAI(
            base_url=base_url, api_key=key or "no-key", timeout=timeout_s, max_retries=max_retries
        )
        self._secret = key

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAIBackend(base_url={self.base_url!r}, model={self.model!r})"

    @property
    def model_id(self) -> str:
        return f"openai:{self.base_url}:{self.model}"

    def complete(
        self,
        messages: list[Message],
        schema: dict[str, Any] | None = None,
        *,
        temperature: float = 0.0,
        max_tokens: int = 128,
        seed: int = 0,
    ) -> Completion:
        self.check(messages)
        kwargs: dict[str, Any] = {}
        if schema is not None and self.response_format == "json_schema":
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": schema, "strict": True},
            }
        elif schema is not None and self.response_format == "json_object":
            kwargs["response_format"] = {"type": "json_object", "schema": schema}
        t0 = time.perf_counter()
        try:
            out = self._client.chat.completions.create(
                model=self.model,
                messages=messages,  # type: ignore[arg-type]
                temperature=temperature,
                max_tokens=max_tokens,
                seed=seed,
                **kwargs,
            )
            text = out.choices[0].message.content or ""
        except self._openai.OpenAIError as err:
            raise LLMError(self._describe(err)) from None
        except (AttributeError, IndexError, TypeError, ValueError) as err:  # a 200 that is not a chat completion
            raise LLMError(f"{self.base_url} answered with something that is not a chat completion: {err}") from None
        usage = out.usage
        return Completion(
            text=text,
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            latency_s=time.perf_counter() - t0,
            model=str(out.model or self.model),
        )

    def score(self, prompt: str, continuations: list[str]) -> list[float]:
        """The mean log-probability per token of each continuation after ``prompt``, from the server's echoed
        prompt logprobs (``/v1/completions`` with ``echo``; llama.cpp's server needs ``--logits_all true``)."""
        out = []
        for text in continuations:
            try:
                r = self._client.completions.create(
                    model=self.model, prompt=prompt + text, max_tokens=1, temperature=0.0, echo=True, logprobs=0
                )
                lp = r.choices[0].logprobs
            except self._openai.OpenAIError as err:
                raise LLMError(self._describe(err)) from None
            except (AttributeError, IndexError, TypeError) as err:
                raise LLMError(f"{self.base_url} answered with something that is not a completion: {err}") from None
            end = len(prompt) + len(text)
            values = (
                [
                    v
                    for offset, v in zip(lp.text_offset or [], lp.token_logprobs or [], strict=False)
                    if len(prompt) <= offset < end and v is not None
                ]
                if lp is not None
                else []
            )
            if not values:
                raise LLMError(
                    f"{self.base_url} returned no logprobs of the echoed prompt, which scoring text needs: serve a "
                    "model with prompt logprobs (llama.cpp's server: --logits_all true; vLLM does by default)"
                )
            out.append(sum(values) / len(values))
        return out

    def _describe(self, err: Exception) -> str:
        o = self._openai
        tries = f"after {self.max_retries + 1} attempt(s)"
        if isinstance(err, o.APITimeoutError):
            what = f"no answer within timeout_s={self.timeout_s} s"
        elif isinstance(err, o.APIConnectionError):
            what = "cannot connect (is the server running? check base_url)"
        elif isinstance(err, o.APIStatusError) and self._refuses_json_schema(str(err)):
            what = (
                f"the server does not accept response_format json_schema (HTTP {err.status_code}: "
                f"{_short(str(err))}); llama-cpp-python's server takes only json_object: set "
                "response_format: json_object (planner.backend.params.response_format=json_object)"
            )
        elif isinstance(err, o.APIStatusError):
            what = f"HTTP {err.status_code}: {_short(str(err))}"
        else:
            what = f"{type(err).__name__}: {_short(str(err))}"
        message = f"OpenAI-compatible server {self.base_url} (model {self.model!r}): {what} {tries}"
        return message.replace(self._secret, "***") if self._secret else message

    def _refuses_json_schema(self, error: str) -> bool:
        """A server that validates ``response_format.type`` against an older list (llama-cpp-python's answers
        HTTP 500 "Input should be 'text' or 'json_object'") rejects every request in json_schema mode."""
        return self.response_format == "json_schema" and all(
            k in error for k in ("response_format", "json_object", "json_schema")
        )


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())  # one line: servers put tracebacks in their error bodies
    return text if len(text) <= limit else text[:limit] + "..."
