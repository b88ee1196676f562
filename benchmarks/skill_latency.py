"""The tabletop reach skill against command latency, as the hierarchy and the arm policy node run it.

A skill trained in simulation meets a robot whose commands land a control period or two late (the ROS arm loop:
a trajectory goes out, DDS delivers it, the controller follows it over the next period; more under load). This
runs each skill the way ``hierarchy.tabletop.LearnedSkill`` runs it (its stuck rule: no 5 mm of progress over 25
steps), to random TCP goals at the hierarchy's and the ROS ``/tcp_goal``'s tolerance (2 cm), in MuJoCo with the
``action_latency`` wrapper at 0, 1, 2 ... control periods, and reports per skill and latency: reached, stuck or out
of budget (Wilson intervals), and the mean steps. Every skill sees the same goals and starts (seeded).

    python benchmarks/skill_latency.py [--skills shipped:panda_reach runs/train/.../final_model.zip]
        [--goals 400] [--latencies 0 1 2] [--quick] [--no-record]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import emit, record
from hrl.hierarchy_eval import wilson

#: Goals: x, y in the workspace around the table's centre, z above the table (m); the first start seed (disjoint
#: from hrl-train's evaluations at 10000+ and the ship script's at 20000+).
GOAL_XY, GOAL_Z, SEED = 0.15, (0.05, 0.3), 30_000


def run_skill(spec: str, latency: int, goals: int, tolerance: float, budget: int) -> dict[str, object]:
    from hierarchy.domain import Step
    from hierarchy.tabletop import LearnedSkill, make_env
    from hrl.policy import GoalPolicy
    from sim.wrappers import ActionLatency

    skill = LearnedSkill.from_policy(GoalPolicy.load(spec))
    if skill.goal_mode != "reach":
        raise SystemExit(f"--skills: {spec} is a {skill.goal_mode} skill; this benchmark drives the TCP (reach)")
    base = make_env("single_cube", "mujoco")
    env = ActionLatency(base, steps=latency) if latency else base
    rng = np.random.default_rng(SEED)
    outcomes: Counter[str] = Counter()
    steps, start = [], time.perf_counter()
    for i in range(goals):
        env.reset(seed=SEED + i)
        goal = np.array([*rng.uniform(-GOAL_XY, GOAL_XY, size=2), rng.uniform(*GOAL_Z)])
        step = Step("reach", lambda e, g=goal: g, tolerance=tolerance, budget=budget)
        result = skill.run(env, step, 10**9, lambda: None)
        outcomes[str(result.outcome)] += 1
        steps.append(result.steps)
    env.close()
    reached = outcomes["reached"]
    return {
        "goals": goals,
        "reached": reached / goals,
        "reached_ci95": [round(v, 4) for v in wilson(reached, goals)],
        "outcomes": dict(outcomes),
        "mean_steps": round(float(np.mean(steps)), 2),
        "seconds": round(time.perf_counter() - start, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skills", nargs="+", default=["shipped:panda_reach"])
    parser.add_argument("--goals", type=int, default=400)
    parser.add_argument("--latencies", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--tolerance", type=float, default=0.02)
    parser.add_argument("--budget", type=int, default=100, help="steps a reach may take (the ROS /tcp_goal's)")
    parser.add_argument("--quick", action="store_true", help="40 goals, latencies 0 and 1")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.goals, args.latencies = 40, [0, 1]
    if args.goals < 1:
        parser.error(f"--goals must be >= 1, got {args.goals}")
    if any(k < 0 for k in args.latencies):
        parser.error(f"--latencies must be control periods >= 0, got {args.latencies}")
    if not 0 < args.tolerance < 0.2:
        parser.error(f"--tolerance must be in (0, 0.2) m, got {args.tolerance}")

    cells: dict[str, dict[str, object]] = {}
    for spec in args.skills:
        for k in args.latencies:
            cell = cells[f"{spec}/latency{k}"] = run_skill(spec, k, args.goals, args.tolerance, args.budget)
            lo, hi = cell["reached_ci95"]
            print(
                f"{spec:50s} latency {k}: reached {cell['reached']:.1%} [{lo:.1%}, {hi:.1%}] {cell['outcomes']} "
                f"mean steps {cell['mean_steps']} ({cell['seconds']} s)",
                flush=True,
            )
    figures = {"quick": args.quick, "tolerance": args.tolerance, "budget": args.budget, "cells": cells}
    if not args.no_record:
        text = "<br>".join(
            f"{name}: {c['reached']:.1%} [{c['reached_ci95'][0]:.1%}, {c['reached_ci95'][1]:.1%}], "
            f"{c['outcomes'].get('stuck', 0)} stuck, {c['mean_steps']} steps"
            for name, c in cells.items()
        )
        record(
            "skill_latency",
            figures,
            [f"{args.goals} goals, tolerance {args.tolerance} m, budget {args.budget}", text, ""],
            ["goals", "reached [95 % CI], stuck, mean steps, per skill and latency (control periods)", "notes"],
        )
    emit(figures)


if __name__ == "__main__":
    main()
