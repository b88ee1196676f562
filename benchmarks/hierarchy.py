"""Planners on the long-horizon task suites, with the shipped low-level policy.

For each planner (graph, sorb, flat, random) and suite (apartment_long, maze_long, apartment_multi):
success rate with a 95 % Wilson interval, steps, path length, collisions, replans and planning latency.
Targets (issue 4): graph >= 90 %, sorb >= 80 % on the long-horizon suites; flat and random reported.

    python benchmarks/hierarchy.py [--quick] [--no-record] [--seeds 0 1 2] [--out runs/bench/hierarchy]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import emit, record
from hrl import DEFAULT_POLICY
from hrl.hierarchy_eval import markdown_table, run_suite
from hrl.policy import GoalPolicy
from hrl.tasks import load_suite

PLANNERS = ["graph", "sorb", "flat", "random"]
SUITES = ["apartment_long", "maze_long", "apartment_multi"]
LONG = {"apartment_long", "maze_long"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 episodes per suite, one seed (< 1 min without sorb)")
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--planners", nargs="+", default=PLANNERS)
    parser.add_argument("--suites", nargs="+", default=SUITES)
    parser.add_argument("--out", type=Path, default=Path("runs/bench/hierarchy"))
    args = parser.parse_args()
    seeds = (args.seeds[0],) if args.quick else tuple(args.seeds)
    policy = GoalPolicy.load(DEFAULT_POLICY)
    summaries = []
    t0 = time.perf_counter()
    for planner in args.planners:
        for suite_name in args.suites:
            suite = load_suite(suite_name)
            if args.quick:
                suite = replace(suite, episodes=suite.episodes[:2])
            params = {"n_nodes": 150, "collect_steps": 1500} if (planner == "sorb" and args.quick) else {}
            res = run_suite(
                planner,
                suite,
                policy,
                planner_params=params,
                seeds=seeds,
                out_dir=args.out / f"{planner}_{suite_name}",
                video_episode=0,
                progress=False,
            )
            s = res.summary
            summaries.append(s)
            print(
                f"{planner:>7} {suite_name:>16}: success {s['success_rate']:.0%} over {s['episodes']} episodes, "
                f"steps {s['mean_steps']:.0f}, replans {s['mean_replans']:.2f}",
                flush=True,
            )
    table = markdown_table(summaries)
    print(table)
    (args.out / "table.md").write_text(table)
    by = {(s["planner"], s["suite"]): s for s in summaries}

    def long_rate(planner: str) -> float | None:
        cells = [by[(planner, s)] for s in LONG if (planner, s) in by]
        if not cells:
            return None
        return sum(c["success_rate"] * c["episodes"] for c in cells) / sum(c["episodes"] for c in cells)

    figures = {
        "quick": args.quick,
        "seeds": list(seeds),
        "wall_time_s": round(time.perf_counter() - t0, 1),
        "long_horizon_success": {p: long_rate(p) for p in args.planners},
        "cells": {
            f"{s['planner']}/{s['suite']}": {
                k: s[k]
                for k in (
                    "episodes",
                    "success_rate",
                    "success_ci95",
                    "mean_steps",
                    "mean_replans",
                    "mean_planner_latency_s",
                )
            }
            for s in summaries
        },
    }
    lr = figures["long_horizon_success"]
    figures["targets_met"] = {"graph>=0.9": (lr.get("graph") or 0) >= 0.9, "sorb>=0.8": (lr.get("sorb") or 0) >= 0.8}
    if not args.no_record:
        cells = [f"{p}: {lr[p]:.0%}" for p in args.planners if lr.get(p) is not None]
        record(
            "hierarchy",
            figures,
            [
                "<br>".join(cells),
                f"see table below ({len(summaries)} cells)",
                ", ".join(f"{k}: {'yes' if v else '**no**'}" for k, v in figures["targets_met"].items()),
            ],
            ["long-horizon success (apartment_long + maze_long)", "details", "targets"],
        )
    emit(figures)


if __name__ == "__main__":
    main()
