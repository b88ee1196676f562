"""Planners over the shipped Panda skills on the tabletop suites, in MuJoCo and PyBullet.

For each planner (symbolic, flat), suite (tabletop_stack: stack2 / stack3, tabletop_sort, tabletop_clear) and
physics backend: success with a 95 % Wilson interval, steps, replans and planner latency. Every seed is a set of
random layouts distinct from those the grounding was tuned on. Targets (issue 16): symbolic + learned skills on
stack-2 >= 90 %, stack-3 >= 80 %, sort >= 85 %; flat reported (RL Zoo's flat TQC+HER leaves PandaStack
essentially unsolved after 1 M steps).

    python benchmarks/tabletop_hierarchy.py [--quick] [--no-record] [--seeds 0 1 2] [--layouts 10]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import emit, record
from hierarchy.evaluate import run_tabletop_suite
from hierarchy.suites import load_tabletop_suite
from hierarchy.tabletop import TabletopDomain
from llm_planner.base import make_planner

PLANNERS = ["symbolic", "flat"]
SUITES = ["tabletop_stack", "tabletop_sort", "tabletop_clear"]
BACKENDS = ["mujoco", "pybullet"]
TARGETS = {"stack2": 0.9, "stack3": 0.8, "sort": 0.85}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one seed, 2 layouts per task (about a minute)")
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--layouts", type=int, default=10, help="random layouts per task and seed")
    parser.add_argument("--planners", nargs="+", default=PLANNERS)
    parser.add_argument("--suites", nargs="+", default=SUITES)
    parser.add_argument("--backends", nargs="+", default=BACKENDS)
    parser.add_argument("--out", type=Path, default=Path("runs/bench/tabletop_hierarchy"))
    args = parser.parse_args()
    seeds = (args.seeds[0],) if args.quick else tuple(args.seeds)
    layouts = 2 if args.quick else args.layouts
    domain = TabletopDomain.with_skills()
    cells: dict[str, dict] = {}
    t0 = time.perf_counter()
    for planner_name in args.planners:
        planner = make_planner(planner_name)
        for suite_name in args.suites:
            suite = load_tabletop_suite(suite_name)
            if args.quick:
                suite = replace(suite, tasks=suite.tasks[:2])
            for backend in args.backends:
                _, s = run_tabletop_suite(
                    planner,
                    suite,
                    domain,
                    backend=backend,
                    seeds=seeds,
                    layouts=layouts,
                    out_dir=args.out / f"{planner_name}_{suite_name}_{backend}",
                    video=True,
                    progress=False,
                )
                for category, c in s["categories"].items():
                    key = f"{planner_name}/{category}/{backend}"
                    cells[key] = {
                        k: c[k]
                        for k in (
                            "episodes",
                            "success_rate",
                            "success_ci95",
                            "mean_steps",
                            "mean_replans",
                            "mean_planner_latency_s",
                            "failure_reasons",
                        )
                    }
                    print(
                        f"{planner_name:>9} {category:>7} {backend:>8}: {c['success_rate']:.0%} "
                        f"[{c['success_ci95'][0]:.0%}, {c['success_ci95'][1]:.0%}] of {c['episodes']}, "
                        f"steps {c['mean_steps']:.0f}, replans {c['mean_replans']:.2f}",
                        flush=True,
                    )
    met = {
        f"symbolic/{cat}/{b}>={t}": cells[f"symbolic/{cat}/{b}"]["success_rate"] >= t
        for cat, t in TARGETS.items()
        for b in args.backends
        if f"symbolic/{cat}/{b}" in cells
    }
    figures = {
        "quick": args.quick,
        "seeds": list(seeds),
        "layouts": layouts,
        "wall_time_s": round(time.perf_counter() - t0, 1),
        "cells": cells,
        "targets_met": met,
    }
    if not args.no_record:

        def show(key: str) -> str:
            c = cells[key]
            lo, hi = c["success_ci95"]
            return f"{key}: {c['success_rate']:.0%} [{lo:.0%}, {hi:.0%}] n={c['episodes']}"

        record(
            "tabletop_hierarchy",
            figures,
            [
                "<br>".join(show(k) for k in cells),
                ", ".join(f"{k}: {'yes' if v else '**no**'}" for k, v in met.items()),
                f"{figures['wall_time_s']:.0f} s",
            ],
            ["success (95 % Wilson interval), planner/category/backend", "targets", "wall time"],
        )
    emit(figures)


if __name__ == "__main__":
    main()
