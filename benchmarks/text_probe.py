"""Do the embedded language models know what colour things are? (the VLA's indirect instructions, issue 17)

The test's indirect instructions name colours by things ("the block the colour of the ocean"), and the VLA reads
words through SmolLM2's frozen input embeddings (hierarchy/vla/text.py). A contextual encoder (the embedded
model's hidden states, cached per instruction) was the noted lever for them. This measures, before building it,
whether the features carry the colour of a thing the training never named:

- **probe**: "Put the block the colour of {thing} on the plate." encoded by each feature (SmolLM2's input
  embeddings, mean over the instruction's tokens: what the VLA reads today; SmolLM2-135M's and Gemma 3 270M's
  last-layer hidden states, mean over tokens and at the thing's last token), a logistic regression fitted on the
  things of the vocabularies' train split (``word_split``, as the generator splits them) and scored on the val
  split's, over ``--splits`` split seeds;
- **zero-shot**: each model's likelihood of each colour word after "Q: What colour is {thing}?\\nA: It is",
  over every thing; the likeliest colour must be the vocabulary's.

The things are the tabletop vocabularies' ``like`` phrases (sim/scenes/vocab/*.yaml), none a test phrase.

    python benchmarks/text_probe.py [--splits 5] [--threads 2] [--quick] [--no-record]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import emit, record
from hrl.hierarchy_eval import wilson


def like_phrases() -> dict[str, str]:
    """Every ``like`` phrase of the tabletop vocabularies -> its colour."""
    from llm_planner.posttrain.tabletop_instructions import load_tabletop_vocabulary, scenes_with_vocabulary

    out: dict[str, str] = {}
    for scene in scenes_with_vocabulary():
        for colour, phrases in load_tabletop_vocabulary(scene).like.items():
            for p in phrases:
                out[p] = colour
    return dict(sorted(out.items()))


def sentence(thing: str) -> str:
    return f"Put the block the colour of {thing} on the plate."


def hidden_features(path: Path, things: list[str], threads: int) -> dict[str, np.ndarray]:
    """Last-layer hidden states of each sentence (llama.cpp, no pooling): mean over tokens, and at the thing's
    last token."""
    import llama_cpp

    llm = llama_cpp.Llama(str(path), embedding=True, pooling_type=0, n_ctx=256, n_threads=threads, verbose=False)
    mean, at = [], []
    for t in things:
        states = np.asarray(llm.embed(sentence(t)), dtype=np.float32)
        upto = len(llm.tokenize(f"Put the block the colour of {t}".encode(), add_bos=True))
        mean.append(states.mean(0))
        at.append(states[min(upto, len(states)) - 1])
    return {"mean": np.stack(mean), "thing": np.stack(at)}


def static_features(things: list[str]) -> np.ndarray:
    from hierarchy.vla.text import token_embeddings

    table = token_embeddings()
    return np.stack([table.encode(sentence(t)).mean(0) for t in things])


def probe(x: np.ndarray, y: np.ndarray, train: np.ndarray, c: float = 0.1) -> int:
    """Correct val predictions of an L2-regularised logistic regression fitted on ``train`` (standardised)."""
    import torch

    mu, sd = x[train].mean(0), x[train].std(0) + 1e-6
    xt = torch.tensor((x - mu) / sd, dtype=torch.float32)
    yt = torch.tensor(y)
    w = torch.zeros(x.shape[1], int(y.max()) + 1, requires_grad=True)
    b = torch.zeros(int(y.max()) + 1, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], max_iter=500)
    tr = torch.tensor(train)

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(xt[tr] @ w + b, yt[tr]) + (w**2).sum() / (2 * c * int(tr.sum()))
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        return int(((xt[~tr] @ w + b).argmax(1) == yt[~tr]).sum())


def zero_shot(path: Path, phrases: dict[str, str], threads: int) -> int:
    """Things whose likeliest colour word (of the vocabularies' colours) is their own."""
    import llama_cpp

    llm = llama_cpp.Llama(str(path), n_ctx=256, n_threads=threads, verbose=False, logits_all=True)
    colours = sorted(set(phrases.values()))
    ids = {c: llm.tokenize(f" {c}".encode(), add_bos=False) for c in colours}
    right = 0
    for thing, colour in phrases.items():
        prompt = llm.tokenize(f"Q: What colour is {thing}?\nA: It is".encode(), add_bos=True)
        score = {}
        for c, tokens in ids.items():
            llm.reset()
            llm.eval(prompt + tokens)
            lp = 0.0
            for i, tok in enumerate(tokens):
                logits = np.asarray(llm.scores[len(prompt) - 1 + i], dtype=np.float64)
                lp += logits[tok] - (np.log(np.exp(logits - logits.max()).sum()) + logits.max())
            score[c] = lp
        right += max(score, key=score.get) == colour
    return right


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--splits", type=int, default=5, help="word-split seeds the probe is averaged over")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="one split seed, no zero-shot")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    if args.splits < 1:
        parser.error(f"--splits must be >= 1, got {args.splits}")
    from llm_planner.llm.llama_cpp_backend import default_model_path, gemma3_model_path
    from llm_planner.posttrain.tabletop_instructions import word_split

    started = time.perf_counter()
    phrases = like_phrases()
    things = list(phrases)
    colours = sorted(set(phrases.values()))
    y = np.array([colours.index(phrases[t]) for t in things])
    models = {"smollm2": default_model_path(), "gemma3": gemma3_model_path()}
    features = {"smollm2 input embeddings (the VLA's), mean": static_features(things)}
    for name, path in models.items():
        for kind, x in hidden_features(path, things, args.threads).items():
            features[f"{name} last layer, {kind}"] = x
    seeds = range(1 if args.quick else args.splits)
    result: dict[str, dict[str, float]] = {}
    for name, x in features.items():
        right = total = 0
        for seed in seeds:
            train = np.array([word_split(seed, "like", t) == "train" for t in things])
            right += probe(x, y, train)
            total += int((~train).sum())
        lo, hi = wilson(right, total)
        result[name] = {"val_accuracy": round(right / total, 3), "ci95": [round(lo, 3), round(hi, 3)], "n": total}
    zs = {}
    if not args.quick:
        for name, path in models.items():
            right = zero_shot(path, phrases, args.threads)
            lo, hi = wilson(right, len(things))
            zs[name] = {"accuracy": round(right / len(things), 3), "ci95": [round(lo, 3), round(hi, 3)]}
    figures = {
        "things": len(things),
        "colours": len(colours),
        "chance": round(1 / len(colours), 3),
        "split_seeds": len(seeds),
        "probe": result,
        "zero_shot": zs,
        "wall_time_s": round(time.perf_counter() - started, 1),
    }
    for name, r in result.items():
        print(f"probe  {name:45s} {r['val_accuracy']:.0%} [{r['ci95'][0]:.0%}, {r['ci95'][1]:.0%}] n={r['n']}")
    for name, r in zs.items():
        print(f"zero-shot {name:42s} {r['accuracy']:.0%} [{r['ci95'][0]:.0%}, {r['ci95'][1]:.0%}] n={len(things)}")
    if not args.no_record and not args.quick:
        cell = "<br>".join(
            f"{n}: {r['val_accuracy']:.0%} [{r['ci95'][0]:.0%}, {r['ci95'][1]:.0%}] n={r['n']}"
            for n, r in result.items()
        )
        zcell = "<br>".join(f"{n}: {r['accuracy']:.0%} [{r['ci95'][0]:.0%}, {r['ci95'][1]:.0%}]" for n, r in zs.items())
        record(
            "text_probe",
            figures,
            [f"{len(things)} things, {len(colours)} colours (chance {1 / len(colours):.0%})", cell, zcell],
            ["things", "probe: val accuracy on unseen things", "zero-shot accuracy"],
        )
    emit(figures)


if __name__ == "__main__":
    main()
