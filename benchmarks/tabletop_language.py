"""Language instructions on the tabletop, end to end: ``llm_goals`` (as configured: Gemma 3 270M with the SFT adapter
trained on navigation instructions; ``llm_goals_untrained``: the untrained SmolLM2-135M) against the ``symbolic``
oracle, on the tabletop_language suites (blocks, sort and clear scenes; 66 instructions in six categories), with the
shipped Panda skills. Planners are planner configs (configs/planner/), built as ``hrl-eval planner=<name>`` builds
them.

Per planner and category: success on the final state (95 % Wilson interval), the planner's mean latency per call,
and ``plan_exact``: the planner's first plan for the task is exactly the task's goals, one place per goal in order
(acceptance alone cannot fail a plan that also moves a block the instruction excluded). ``plan_exact`` re-asks the
planner on the episode's first scene, which the LLM planner answers from its cache.

    python benchmarks/tabletop_language.py [--quick] [--no-record] [--seed 0] [--llm-threads N]
        [--planners llm_goals llm_goals_untrained symbolic] [--adapter FILE.gguf]

``--adapter`` scores a candidate LoRA adapter (``hrl-posttrain``'s adapter.gguf) in place of the shipped one, for
every planner whose backend loads an adapter (``llm_goals``); the RESULTS row names it.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import emit, record
from hierarchy.evaluate import layout_seed, run_tabletop_suite, summarise
from hierarchy.suites import TabletopSuite, load_tabletop_suite
from hierarchy.tabletop import TabletopDomain, make_env
from hrl.eval import configured_planner
from llm_planner.base import make_planner
from llm_planner.tabletop import PlaceSubgoal

PLANNERS = ["llm_goals", "symbolic"]
SUITES = ["tabletop_language", "tabletop_language_sort", "tabletop_language_clear"]


def first_of_each_category(suite: TabletopSuite) -> TabletopSuite:
    firsts: dict[str, Any] = {}
    for task in suite.tasks:
        firsts.setdefault(task.category, task)
    return replace(suite, tasks=tuple(firsts.values()))


def plan_exact(planner: Any, suite: TabletopSuite, domain: TabletopDomain, backend: str, seed: int) -> list[bool]:
    """Per task: whether the planner's plan on the episode's first scene is one place per goal, in order."""
    env = make_env(suite.scene, backend)
    out = []
    for i, task in enumerate(suite.tasks):
        env.reset(seed=layout_seed(seed, i, 0))
        try:
            plan = planner.plan(task, domain.observe(env))
        except ValueError:  # PlanError: no valid plan, as the episode found
            out.append(False)
            continue
        got = [(s.object, s.on) if isinstance(s, PlaceSubgoal) else None for s in plan.subgoals]
        out.append(got == [(g.object, g.on) for g in task.goals])
    env.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the first instruction of each category in each suite")
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument("--planners", nargs="+", default=PLANNERS)
    parser.add_argument("--suites", nargs="+", default=SUITES)
    parser.add_argument("--backend", default="mujoco", choices=["mujoco", "pybullet"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/bench/tabletop_language"))
    parser.add_argument(
        "--llm-threads",
        type=int,
        default=None,
        help="llama.cpp threads (default: all cores; on a machine loaded by other work 1 can be several times faster)",
    )
    parser.add_argument(
        "--adapter",
        type=Path,
        default=None,
        help="a GGUF LoRA adapter scored instead of the shipped one by planners whose backend loads one (llm_goals)",
    )
    args = parser.parse_args()
    if args.adapter is not None and not args.adapter.is_file():
        parser.error(f"--adapter {args.adapter}: no such file (give an hrl-posttrain run's adapter.gguf)")
    from hrl.hierarchy_eval import wilson

    domain = TabletopDomain.with_skills()
    suites = [load_tabletop_suite(s) for s in args.suites]
    if args.quick:
        suites = [first_of_each_category(s) for s in suites]
    cells: dict[str, Any] = {}
    t0 = time.perf_counter()
    for name in args.planners:
        registered, params = configured_planner(name)  # as planner=<name> is configured (configs/planner/)
        if args.llm_threads and "backend_params" in params:
            params["backend_params"]["n_threads"] = args.llm_threads
        if args.adapter is not None and params.get("backend_params", {}).get("lora_path"):
            params["backend_params"]["lora_path"] = str(args.adapter)
        planner = make_planner(registered, **params)
        rows: list[dict[str, Any]] = []
        for suite in suites:
            suite_rows, _ = run_tabletop_suite(
                planner,
                suite,
                domain,
                backend=args.backend,
                seeds=(args.seed,),
                layouts=1,
                out_dir=args.out / f"{name}_{suite.name}",
                progress=False,
            )
            exact = plan_exact(planner, suite, domain, args.backend, args.seed)
            for row, ok in zip(suite_rows, exact, strict=True):
                row["plan_exact"] = ok
            rows += suite_rows
        summary = summarise(rows, wilson)
        groups = {"all": rows} | {c: [r for r in rows if r["category"] == c] for c in summary["categories"]}
        for category, rs in groups.items():
            c = summary if category == "all" else summary["categories"][category]
            cells[f"{name}/{category}"] = {
                "episodes": c["episodes"],
                "success_rate": c["success_rate"],
                "success_ci95": c["success_ci95"],
                "plan_exact": sum(r["plan_exact"] for r in rs) / len(rs),
                "mean_planner_latency_s": c["mean_planner_latency_s"],
                "failure_reasons": c["failure_reasons"],
            }
            lo, hi = c["success_ci95"]
            print(
                f"{name:>9} {category:>10}: success {c['success_rate']:.0%} [{lo:.0%}, {hi:.0%}] of {c['episodes']}, "
                f"plan exact {cells[f'{name}/{category}']['plan_exact']:.0%}, "
                f"latency {c['mean_planner_latency_s']:.2f} s",
                flush=True,
            )
    figures = {
        "quick": args.quick,
        "seed": args.seed,
        "backend": args.backend,
        "llm_threads": args.llm_threads,
        "adapter": str(args.adapter) if args.adapter else None,
        "episodes": sum(len(s.tasks) for s in suites),
        "wall_time_s": round(time.perf_counter() - t0, 1),
        "cells": cells,
    }
    if not args.no_record:

        def show(key: str) -> str:
            c = cells[key]
            lo, hi = c["success_ci95"]
            return (
                f"{key}: {c['success_rate']:.0%} [{lo:.0%}, {hi:.0%}] n={c['episodes']}, exact {c['plan_exact']:.0%}, "
                f"{c['mean_planner_latency_s']:.2f} s"
            )

        record(
            "tabletop_language",
            figures,
            ["<br>".join(show(k) for k in cells), f"{figures['wall_time_s']:.0f} s"],
            ["planner/category: success (95 % Wilson), plan exact, mean planner latency", "wall time"],
        )
    emit(figures)


if __name__ == "__main__":
    main()
