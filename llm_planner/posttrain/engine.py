"""The shared-prefix engine: SFT and GRPO loops that evaluate a prompt prefix once for a whole batch.

Why a loop of our own beside TRL's trainers (``engine=trl``): every prompt of a map starts with the same
~330-token system message (the scene), and a GRPO group is eight answers to one ~370-token prompt. TRL
evaluates the whole prompt again for every sequence of a batch; on 2 CPU cores that made an SFT step of
8 instructions ~26 s (quiet machine) and a GRPO step of 8 samples several times that. Here the prefix is
evaluated once with gradients, its KV cache repeated over the batch, and only the differing tokens are run:
the same loss and the same gradients (a test checks them against the plain forward pass to 1e-4), ~4x fewer
tokens for SFT and ~8x for GRPO. On GPUs use ``engine=trl`` (TRL + accelerate), where the saving matters less.

* :func:`sft_loss`: the prompt-completion cross-entropy over the assistant's tokens, the system message shared.
* :func:`sample`: ``n`` answers to one prompt (temperature sampling, KV cache of the prompt shared).
* :func:`completion_logprobs`: the log-probabilities of given completions of one prompt (prompt shared).
* :func:`grpo_loss`: Dr. GRPO's loss for one group: advantages ``r - mean(r)`` (no std scaling), a constant
  normaliser (``max_completion_length`` x group), no KL. One gradient step per group, so the policy ratio
  is 1 and PPO's clip (and DAPO's asymmetric ``epsilon_high``) never binds; both matter only with several
  updates per group (``engine=trl`` with ``num_iterations`` > 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.nn import functional


def chat_ids(tokenizer: Any, messages: list[dict[str, str]], generation_prompt: bool = False) -> list[int]:
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


@dataclass
class SFTExample:
    """One training sequence split as the engine runs it: ``prefix`` (every message before the question: the
    system message, and the tabletop's worked examples; shared by a map's or a scene's examples), ``rest`` (the
    question and the answer) and ``n_answer`` (the last tokens of ``rest``: the loss)."""

    prefix: tuple[int, ...]
    rest: list[int]
    n_answer: int


def sft_example(tokenizer: Any, prompt: list[dict[str, str]], answer: str) -> SFTExample:
    """Tokenise a prompt-completion pair; ValueError if the chat template does not split cleanly before the
    question and at the answer (the shared prefix would then not be the sequence's real prefix)."""
    full = chat_ids(tokenizer, [*prompt, {"role": "assistant", "content": answer}])
    shared = chat_ids(tokenizer, prompt[:-1])  # the system message and any worked examples before the question
    asked = chat_ids(tokenizer, prompt, generation_prompt=True)
    if full[: len(shared)] != shared or full[: len(asked)] != asked:
        raise ValueError("the chat template's tokens do not split at the question / answer; use engine=trl")
    return SFTExample(tuple(shared), full[len(shared) :], len(full) - len(asked))


def _batched_rest(
    model: Any, prefix: list[int], rests: list[list[int]], start: list[int], pad: int, grad: bool
) -> list[Any]:
    """The logits predicting ``rests[i][start[i]:]`` after the shared ``prefix``, one [len - start, V] tensor a
    rest; the prefix is evaluated once, its KV cache repeated over the batch."""
    context = torch.enable_grad() if grad else torch.no_grad()
    with context:
        # logits only where a target is predicted: the prefix's last position (logits_to_keep=1) and, in the rests,
        # the positions before each scored token (a boolean mask). All of them cost Gemma 3 (262k-token vocabulary)
        # most of an SFT step, whose loss is the answer's ~20 tokens of ~60 (2 cores, a step of 8: 26-28 s with
        # every position, 19-20 s with the prefix's last only)
        out = model(input_ids=torch.tensor([prefix]), use_cache=True, logits_to_keep=1)
        cache = out.past_key_values
        cache.batch_repeat_interleave(len(rests))
        width = max(map(len, rests))
        ids = torch.full((len(rests), width), pad, dtype=torch.long)
        mask = torch.zeros(len(rests), len(prefix) + width, dtype=torch.long)
        mask[:, : len(prefix)] = 1
        keep = torch.zeros(len(rests), width, dtype=torch.bool)
        for i, (r, s) in enumerate(zip(rests, start, strict=True)):
            ids[i, : len(r)] = torch.tensor(r)
            mask[i, len(prefix) : len(prefix) + len(r)] = 1
            keep[i, max(s - 1, 0) : len(r) - 1] = True  # position p predicts token p + 1
        pos = (len(prefix) + torch.arange(width)).expand(len(rests), width)
        rest = model(input_ids=ids, attention_mask=mask, past_key_values=cache, position_ids=pos, logits_to_keep=keep)
        kept = rest.logits.reshape(-1, rest.logits.shape[-1])  # [kept positions, V], row by row
        first = out.logits[0, -1]
        preds, at = [], 0
        for r, s in zip(rests, start, strict=True):
            n = len(r) - 1 - max(s - 1, 0)
            chunk = kept[at : at + n]
            at += n
            preds.append(torch.cat([first[None], chunk]) if s == 0 else chunk)
    return preds


def _token_logprobs(preds: list[Any], rests: list[list[int]], start: list[int]) -> list[Any]:
    """log p of rests[i][start[i]:] given everything before (``preds``: :func:`_batched_rest`'s logits)."""
    return [
        -functional.cross_entropy(pred.float(), torch.tensor(r[s:]), reduction="none")
        for pred, r, s in zip(preds, rests, start, strict=True)
    ]


def sft_loss(model: Any, examples: list[SFTExample], pad: int) -> tuple[Any, dict[str, float]]:
    """Mean cross-entropy over the answers' tokens of ``examples`` (all with the same prefix), and stats."""
    prefixes = {e.prefix for e in examples}
    if len(prefixes) != 1:
        raise ValueError("sft_loss needs examples with one shared prefix (batch them by map)")
    rests = [e.rest for e in examples]
    start = [len(r) - e.n_answer for r, e in zip(rests, examples, strict=True)]
    preds = _batched_rest(model, list(examples[0].prefix), rests, start, pad, grad=True)
    logps = _token_logprobs(preds, rests, start)
    tokens = torch.cat(logps)
    loss = -tokens.mean()
    with torch.no_grad():  # the greedy token equals the target: TRL's mean_token_accuracy
        hits = sum(
            int((pred.argmax(-1) == torch.tensor(r[s:])).sum()) for pred, r, s in zip(preds, rests, start, strict=True)
        )
    return loss, {"loss": loss.item(), "mean_token_accuracy": hits / len(tokens), "tokens": len(tokens)}


@torch.no_grad()
def sample(
    model: Any,
    prompt: list[int],
    n: int,
    max_new: int,
    temperature: float,
    stop: set[int],
    generator: torch.Generator | None = None,
) -> list[list[int]]:
    """``n`` completions of ``prompt`` (temperature 0: greedy), each ending at its first ``stop`` token
    (kept) or after ``max_new`` tokens (truncated)."""
    out = model(input_ids=torch.tensor([prompt]), use_cache=True)
    cache = out.past_key_values
    cache.batch_repeat_interleave(n)
    logits = out.logits[:, -1].expand(n, -1)
    seqs: list[list[int]] = [[] for _ in range(n)]
    done = [False] * n
    for t in range(max_new):
        if temperature > 0:
            probs = torch.softmax(logits.float() / temperature, -1)
            nxt = torch.multinomial(probs, 1, generator=generator)[:, 0]
        else:
            nxt = logits.argmax(-1)
        for i in range(n):
            if not done[i]:
                seqs[i].append(int(nxt[i]))
                done[i] = int(nxt[i]) in stop
        if all(done) or t == max_new - 1:
            break
        pos = torch.full((n, 1), len(prompt) + t)
        out = model(input_ids=nxt[:, None], past_key_values=cache, position_ids=pos, use_cache=True)
        cache = out.past_key_values
        logits = out.logits[:, -1]
    return seqs


def completion_logprobs(model: Any, prompt: list[int], completions: list[list[int]], pad: int) -> list[Any]:
    """Per-token log-probabilities (with gradients) of each completion of ``prompt``; the prompt is run once."""
    start = [0] * len(completions)
    return _token_logprobs(_batched_rest(model, prompt, completions, start, pad, grad=True), completions, start)


def grpo_loss(
    logps: list[Any], rewards: list[float], max_len: int, ref_logps: list[Any] | None = None, beta: float = 0.0
) -> tuple[Any, dict[str, float]]:
    """Dr. GRPO's policy-gradient loss of one group (advantage ``r - mean(r)``, constant normaliser), plus
    ``beta`` x the per-token KL to a reference policy (``ref_logps``: the same completions' log-probabilities
    under it, no gradient), by the k3 estimator ``exp(q - p) - (q - p) - 1`` that GRPO's paper uses: >= 0, and
    0 where the policy equals the reference."""
    mean = sum(rewards) / len(rewards)
    adv = [r - mean for r in rewards]
    loss = -sum(a * lp.sum() for a, lp in zip(adv, logps, strict=True)) / (len(rewards) * max_len)
    stats: dict[str, float] = {}
    if ref_logps is not None:
        diff = [q.detach() - p for p, q in zip(logps, ref_logps, strict=True)]
        kl = [torch.exp(d) - d - 1 for d in diff]
        kl_term = sum(k.sum() for k in kl) / (len(rewards) * max_len)
        if beta:
            loss = loss + beta * kl_term
        stats["kl"] = float(torch.cat(kl).mean())  # per token
    with torch.no_grad():
        entropy = float(-torch.cat(logps).mean())  # per-token surprisal of the samples: an entropy estimate
    std = (sum((r - mean) ** 2 for r in rewards) / len(rewards)) ** 0.5
    return loss, {"loss": loss.item(), "reward": mean, "reward_std": std, "entropy": entropy, **stats}
