"""SoRB with and without the safety critic: success and wall contact on the maze and apartment suites.

Plain ``sorb`` and ``sorb_safe`` (same graph parameters; the safe one prunes and weights edges by the
safety critic's predicted wall contact) with the shipped low-level policy, on maze_long, apartment_long
and apartment_multi, distinct seeds (jittered starts). Targets (issue 19): sorb_safe >= 90 % on
maze_long, >= 95 % on the apartment suites, and wall-contact steps per episode cut by >= 5x against sorb.

    python benchmarks/sorb_safety.py [--seeds 0 1 2] [--planners sorb sorb_safe] [--suites ...]
        [--set safety_weight=20 ...] [--episodes N] [--backend mujoco|pybullet] [--effects none|noise|perturbed]
        [--no-record] [--out runs/bench/sorb_safety]

``--backend`` / ``--effects`` execute the plans on another robot than the one the graph was built and practised
on (both planners build, and sorb_safe practises, in the nominal MuJoCo simulator): PyBullet, and the sim2sim
benchmark's "noise + latency" preset or its perturbed robot (heavy, slippery, weak motors, noisy, late). So the
contact cut is measured where the planner's knowledge of the robot is off, as it would be on hardware.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import emit, parse_sets, record
from benchmarks.sim2sim import PERTURBED, noise_latency_wrappers
from hrl import DEFAULT_POLICY
from hrl.hierarchy_eval import markdown_table, run_suite
from hrl.policy import GoalPolicy
from hrl.tasks import load_suite

SUITES = ["maze_long", "apartment_long", "apartment_multi"]
TARGETS = {"maze_long": 0.90, "apartment_long": 0.95, "apartment_multi": 0.95}
CONTACT_CUT = 5.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--planners", nargs="+", default=["sorb", "sorb_safe"])
    parser.add_argument("--suites", nargs="+", default=SUITES)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--episodes", type=int, default=None, help="only the first N tasks of each suite")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="sorb_safe parameters (YAML values)")
    parser.add_argument("--backend", choices=["mujoco", "pybullet"], default=None, help="execution physics")
    parser.add_argument(
        "--effects",
        choices=["none", "noise", "perturbed"],
        default="none",
        help="sim-to-real wrappers on the executing robot (benchmarks/sim2sim.py's presets)",
    )
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument("--out", type=Path, default=Path("runs/bench/sorb_safety"))
    args = parser.parse_args()
    overrides = parse_sets(parser, args.set)
    import torch

    torch.set_num_threads(1)  # shared 2-core machine: one thread per process
    policy = GoalPolicy.load(DEFAULT_POLICY)
    noise = noise_latency_wrappers()
    wrappers = {"none": None, "noise": noise, "perturbed": [PERTURBED, *noise]}
    summaries = []
    t0 = time.perf_counter()
    for planner in args.planners:
        params = overrides if planner == "sorb_safe" else {}
        for suite_name in args.suites:
            suite = load_suite(suite_name)
            if args.episodes is not None:
                suite = replace(suite, episodes=suite.episodes[: args.episodes])
            res = run_suite(
                planner,
                suite,
                policy,
                planner_params=params,
                seeds=tuple(args.seeds),
                out_dir=args.out / f"{planner}_{suite_name}",
                video_episode=None,
                progress=False,
                backend=args.backend,
                wrappers=wrappers[args.effects],
            )
            s = res.summary
            summaries.append(s)
            print(
                f"{planner:>9} {suite_name:>16}: success {s['success_rate']:.0%} over {s['episodes']} episodes, "
                f"contact steps {s['mean_collisions']:.1f}, replans {s['mean_replans']:.2f}, "
                f"failures {s.get('failure_reasons', {})}",
                flush=True,
            )
    execution = f"{args.backend or policy.env_config.engine()}, effects {args.effects}"
    table = markdown_table(summaries)
    print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "table.md").write_text(table)
    by = {(s["planner"], s["suite"]): s for s in summaries}
    cut = {
        suite: by[("sorb", suite)]["mean_collisions"] / max(by[("sorb_safe", suite)]["mean_collisions"], 1e-9)
        for suite in args.suites
        if ("sorb", suite) in by and ("sorb_safe", suite) in by
    }
    targets = {
        f"sorb_safe {suite}>={TARGETS[suite]:.0%}": by[("sorb_safe", suite)]["success_rate"] >= TARGETS[suite]
        for suite in args.suites
        if ("sorb_safe", suite) in by and suite in TARGETS
    }
    targets.update({f"contact cut {suite}>={CONTACT_CUT:g}x": c >= CONTACT_CUT for suite, c in cut.items()})
    figures = {
        "seeds": args.seeds,
        "execution": execution,
        "episodes_per_suite": args.episodes,
        "sorb_safe_params": overrides,
        "wall_time_s": round(time.perf_counter() - t0, 1),
        "cells": {
            f"{s['planner']}/{s['suite']}": {
                k: s[k] for k in ("episodes", "success_rate", "success_ci95", "mean_collisions", "mean_replans")
            }
            for s in summaries
        },
        "contact_cut": {k: round(v, 1) for k, v in cut.items()},
        "targets_met": targets,
    }
    if not args.no_record:
        cells = [
            f"{s['planner']} {s['suite']}: {s['success_rate']:.0%} ({s['success_ci95'][0]:.0%}–"
            f"{s['success_ci95'][1]:.0%}), {s['mean_collisions']:.1f} contact steps"
            for s in summaries
        ]
        record(
            "sorb_safety",
            figures,
            [
                "<br>".join(cells),
                ", ".join(f"{k}: {v:.1f}x" for k, v in cut.items()) or "n/a",
                ", ".join(f"{k}: {'yes' if v else '**no**'}" for k, v in targets.items()),
            ],
            ["success (95 % CI), wall-contact steps per episode", "contact cut", "targets"],
        )
    emit(figures)


if __name__ == "__main__":
    main()
