"""Paired comparison of two evaluation runs, episode by episode: did B solve the episodes A solved?

Two runs of ``benchmarks/tabletop_hierarchy.py`` (or any command that writes ``episodes.jsonl`` with ``suite``,
``planner``, ``backend``, ``seed``, ``episode``, ``layout`` and ``success``), made with the same seeds and layouts
but one thing changed (a skill, a planner parameter), see the same episodes. Comparing their success rates cell
by cell throws that pairing away: with 30 episodes a cell, one episode is 3.3 points. This pairs the episodes,
counts those only A solved and only B solved, and gives the exact two-sided McNemar p-value, per cell
(suite, planner, backend, and the task's category where the rows have one) and over all cells together::

    python -m hrl.compare runs/bench/th_shipped runs/bench/th_candidate [--json]

Runs of ``benchmarks/posttrain.py`` (its ``rows.jsonl``: one instruction a row) pair the same way, instruction by
instruction (its ``id`` and ``text``), a cell per category; a row succeeds when its ``outcome`` is ``success``::

    python -m hrl.compare runs/bench/pt_v6_val400 runs/bench/pt_candidate_val400

The last line is one JSON object (the figures); episodes that only one run has are counted, not paired.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from math import comb
from pathlib import Path
from typing import Any

#: What names a cell (and ``category`` too where rows have one), and what names an episode within it.
CELL = ("suite", "planner", "backend")
EPISODE = ("seed", "episode", "layout")
#: A row of ``benchmarks/posttrain.py``'s rows.jsonl: an instruction (``id`` and ``text``) of a ``category``.
PLAN_ROW = ("id", "text", "category", "outcome")


def mcnemar(a: dict[Any, bool], b: dict[Any, bool]) -> dict[str, Any]:
    """Over the keys both have: their number, the successes of each, how many only ``a`` / only ``b``
    solved, the exact two-sided McNemar p-value (the binomial test on those discordant pairs), and the 95 %
    interval of B's success rate minus A's in points (:func:`paired_difference_ci`)."""
    keys = set(a) & set(b)
    only_a = sum(bool(a[k]) and not b[k] for k in keys)
    only_b = sum(bool(b[k]) and not a[k] for k in keys)
    n = only_a + only_b
    p = min(1.0, 2 * sum(comb(n, i) for i in range(min(only_a, only_b) + 1)) / 2**n) if n else 1.0
    lo, hi = paired_difference_ci(only_a, only_b, len(keys))
    return {
        "episodes": len(keys),
        "success_a": sum(bool(a[k]) for k in keys),
        "success_b": sum(bool(b[k]) for k in keys),
        "only_a": only_a,
        "only_b": only_b,
        "mcnemar_p": round(p, 4),
        "diff_ci95_points": [round(100 * lo, 1), round(100 * hi, 1)],
    }


def paired_difference_ci(only_a: int, only_b: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The ~95 % interval of B's success rate minus A's over ``n`` paired episodes, from the discordant counts:
    Agresti and Min's (2005) Wald interval with half an episode added to each cell of the 2x2 table, which keeps
    its coverage near nominal for small counts and never collapses to a point. A non-inferiority reading ("B is at
    most D points worse") needs the lower end above -D: a rule with a fixed margin on the rates alone cannot tell
    one episode of noise from a regression."""
    if n < 0 or only_a < 0 or only_b < 0 or only_a + only_b > n:
        raise ValueError(f"need 0 <= only_a + only_b <= n, got only_a={only_a}, only_b={only_b}, n={n}")
    m, b, c = n + 2, only_b + 0.5, only_a + 0.5
    d = (b - c) / m
    half = z * (((b + c) - (b - c) ** 2 / m) / m**2) ** 0.5
    return max(-1.0, d - half), min(1.0, d + half)


def load_episodes(run: Path) -> dict[tuple, dict[tuple, bool]]:
    """Every ``episodes.jsonl`` (and ``benchmarks/posttrain.py`` ``rows.jsonl``) under ``run``: cell -> episode ->
    success. ValueError naming the file and the field for a row without the fields that pair it, or a run with no
    episodes."""
    if not run.exists():
        raise ValueError(f"{run}: no such run directory")
    cells: dict[tuple, dict[tuple, bool]] = defaultdict(dict)
    files = sorted([*run.rglob("episodes.jsonl"), *run.rglob("rows.jsonl")]) if run.is_dir() else [run]
    for path in files:
        plans = path.name == "rows.jsonl"
        fields = PLAN_ROW if plans else (*CELL, *EPISODE, "success")
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            row = json.loads(line)
            missing = [k for k in fields if k not in row]
            if missing:
                what = "benchmarks/posttrain.py's rows.jsonl" if plans else "an evaluation's episodes.jsonl"
                raise ValueError(f"{path}:{i}: row lacks {', '.join(missing)}; not {what}")
            if plans:
                cells[("plan", row["category"])][(row["id"], row["text"])] = row["outcome"] == "success"
                continue
            cell = tuple(row[k] for k in CELL) + ((row["category"],) if "category" in row else ())
            cells[cell][tuple(row[k] for k in EPISODE)] = bool(row["success"])
    if not cells:
        raise ValueError(
            f"{run}: no episodes.jsonl or rows.jsonl with episodes under it (run an evaluation with --out {run})"
        )
    return dict(cells)


def compare(a: Path, b: Path) -> dict[str, Any]:
    """Per cell both runs have, and over all of them: :func:`mcnemar` of A against B, and the episodes only
    one run has (``unpaired``). ValueError when the runs share no episode."""
    runs = load_episodes(a), load_episodes(b)
    out: dict[str, Any] = {"a": str(a), "b": str(b), "cells": {}}
    all_a: dict[tuple, bool] = {}
    all_b: dict[tuple, bool] = {}
    for cell in sorted(set(runs[0]) & set(runs[1]), key=str):
        ea, eb = runs[0][cell], runs[1][cell]
        figures = mcnemar(ea, eb)
        figures["unpaired"] = len(set(ea) ^ set(eb))
        out["cells"]["/".join(map(str, cell))] = figures
        all_a |= {(*cell, *k): v for k, v in ea.items()}
        all_b |= {(*cell, *k): v for k, v in eb.items()}
    out["all"] = mcnemar(all_a, all_b)
    if not out["all"]["episodes"]:
        raise ValueError(
            f"{a} and {b} share no episode (cells {sorted(map(str, runs[0]))} and {sorted(map(str, runs[1]))}): "
            "run both with the same suites, seeds and layouts"
        )
    out["only_in_one_run"] = sorted("/".join(map(str, c)) for c in set(runs[0]) ^ set(runs[1]))
    return out


def table(figures: dict[str, Any]) -> str:
    lines = [
        "| cell | paired | A | B | B - A (points) | 95 % interval | only A | only B | McNemar p |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, f in [*figures["cells"].items(), ("**all**", figures["all"])]:
        n = f["episodes"]
        ra, rb = f["success_a"] / n, f["success_b"] / n
        lo, hi = f["diff_ci95_points"]
        lines.append(
            f"| {name} | {n} | {ra:.0%} | {rb:.0%} | {100 * (rb - ra):+.1f} | {lo:+.1f} to {hi:+.1f} "
            f"| {f['only_a']} | {f['only_b']} "
            f"| {f['mcnemar_p']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "a", type=Path, help="the reference run's output directory (or one episodes.jsonl or posttrain rows.jsonl)"
    )
    parser.add_argument("b", type=Path, help="the run to compare with it")
    args = parser.parse_args(argv)
    try:
        figures = compare(args.a, args.b)
    except (ValueError, json.JSONDecodeError) as err:
        parser.error(str(err))
    print(f"A = {args.a}\nB = {args.b}\n")
    print(table(figures))
    if figures["only_in_one_run"]:
        print("\ncells in one run only (not compared): " + ", ".join(figures["only_in_one_run"]))
    print(json.dumps(figures, sort_keys=True))


if __name__ == "__main__":
    main()
