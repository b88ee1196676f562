"""Sim-to-sim transfer matrix: policies trained in MuJoCo, evaluated in MuJoCo and PyBullet, clean and noisy.

Rows: low-level policies (default: the shipped ``rover_local``, trained without randomization, and
``rover_local_dr``, trained with ``env/wrappers=randomize``). Columns: MuJoCo, MuJoCo + noise + latency,
PyBullet, PyBullet + noise + latency, where "noise + latency" is ``configs/env/wrappers/noise_latency.yaml``
(2 cm lidar noise, 2 % dropped returns, odometry drift, one period of command latency, a rate limit), and
PyBullet + perturbed: a robot at the edges of the randomization ranges (x1.25 mass, friction 0.5, motor
gain 0.9, 3 cm lidar noise, 2 more periods of latency) on top of noise + latency.
Every cell runs the same episodes (same seeds: same starts and local goals) and reports the success rate
with its 95 % Wilson interval and the path-length ratio (path driven / straight-line distance from the
start to the success circle, successful episodes; 1.0 is a straight drive). Target (issue 7): the
randomization-trained policy loses <= 10 points of success from MuJoCo to PyBullet.

    python benchmarks/sim2sim.py [--quick] [--no-record] [--episodes 200] [--maps open apartment]
        [--policies shipped:rover_local shipped:rover_local_dr]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gymnasium as gym
import numpy as np
import yaml

import sim  # noqa: F401
from benchmarks._common import emit, record
from hrl.evaluation import evaluate
from hrl.hierarchy_eval import wilson
from hrl.policy import GoalPolicy

ROOT = Path(__file__).resolve().parents[1]
NOISE_LATENCY = ROOT / "configs" / "env" / "wrappers" / "noise_latency.yaml"
CONDITIONS = {
    "mujoco": ("mujoco", ""),
    "mujoco+noise+latency": ("mujoco", "noise"),
    "pybullet": ("pybullet", ""),
    "pybullet+noise+latency": ("pybullet", "noise"),
    "pybullet+perturbed": ("pybullet", "perturbed"),
}
#: A robot at the edges of the randomization ranges (heavy, slippery, weak motors, noisy, late), with the
#: noise + latency preset on top (3 periods of latency in all): how much margin a policy has.
PERTURBED = {
    "name": "domain_randomization",
    "mass_scale": 1.25,
    "friction": 0.5,
    "motor_gain": 0.9,
    "lidar_std": 0.03,
    "latency_steps": 2,
}
DEFAULT_POLICIES = ["shipped:rover_local", "shipped:rover_local_dr"]


def noise_latency_wrappers() -> list[Any]:
    """The evaluation preset, read from its Hydra file (one definition for the CLI and this benchmark)."""
    return yaml.safe_load(NOISE_LATENCY.read_text())["wrappers"]


def cell(policy: GoalPolicy, map_name: str, backend: str, effects: str, episodes: int, seed: int) -> dict[str, Any]:
    kwargs = policy.env_config.make_kwargs(policy.robot_config)
    kwargs.pop("wrappers", None)  # training-time randomization is not part of the evaluation
    kwargs.update(map=map_name, backend=backend, goal_mode="local")
    if effects == "noise":
        kwargs["wrappers"] = noise_latency_wrappers()
    elif effects == "perturbed":
        kwargs["wrappers"] = [PERTURBED, *noise_latency_wrappers()]
    env = gym.make(policy.env_config.id, **kwargs)
    t0 = time.perf_counter()
    summary, _ = evaluate(policy, env, episodes, seed=seed, progress=False)
    elapsed = time.perf_counter() - t0
    env.close()
    successes = [e for e in summary.per_episode if e.success]
    # The shortest path to success ends on the success circle: ratio 1.0 is a straight drive to it.
    radius = policy.env_config.success_radius
    ratios = [e.path_length / (e.initial_distance - radius) for e in successes if e.initial_distance > radius]
    k = len(successes)
    return {
        "episodes": episodes,
        "success_rate": round(k / episodes, 4),
        "success_ci95": [round(v, 4) for v in wilson(k, episodes)],
        "path_length_ratio": round(float(np.mean(ratios)), 3) if ratios else None,
        "collision_free_rate": round(1.0 - summary.episodes_with_collision / episodes, 4),
        "mean_steps": round(summary.mean_steps, 1),
        "seconds": round(elapsed, 1),
    }


def fmt(c: dict[str, Any]) -> str:
    lo, hi = c["success_ci95"]
    ratio = "–" if c["path_length_ratio"] is None else f"{c['path_length_ratio']:.2f}"
    return f"{c['success_rate']:.0%} [{lo:.0%}, {hi:.0%}], ×{ratio}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 episodes on the open map (< 1 minute)")
    parser.add_argument("--no-record", action="store_true", help="do not append to benchmarks/RESULTS.md")
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--maps", nargs="+", default=["open", "apartment"])
    parser.add_argument("--policies", nargs="+", default=DEFAULT_POLICIES)
    parser.add_argument("--seed", type=int, default=30000, help="first episode seed (disjoint from training evals)")
    args = parser.parse_args()
    episodes, maps = (20, ["open"]) if args.quick else (args.episodes, args.maps)
    if episodes < 1:
        parser.error(f"--episodes must be >= 1, got {episodes}")

    figures: dict[str, Any] = {"quick": args.quick, "episodes_per_cell": episodes, "maps": maps, "matrix": {}}
    for spec in args.policies:
        policy = GoalPolicy.load(spec)
        name = spec.removeprefix("shipped:")
        rows: dict[str, Any] = {}
        for map_name in maps:
            for label, (backend, effects) in CONDITIONS.items():
                c = cell(policy, map_name, backend, effects, episodes, args.seed)
                rows[f"{map_name}/{label}"] = c
                print(f"{name:>16} {map_name:>10} {label:>24}: {fmt(c)}  ({c['seconds']} s)", flush=True)
        drops = {m: round(rows[f"{m}/mujoco"]["success_rate"] - rows[f"{m}/pybullet"]["success_rate"], 4) for m in maps}
        drops_noisy = {
            m: round(
                rows[f"{m}/mujoco+noise+latency"]["success_rate"] - rows[f"{m}/pybullet+noise+latency"]["success_rate"],
                4,
            )
            for m in maps
        }
        figures["matrix"][name] = {
            "cells": rows,
            "mujoco_to_pybullet_drop": drops,
            "mujoco_to_pybullet_drop_noisy": drops_noisy,
            "trained_with_randomization": any(
                (w if isinstance(w, str) else w.get("name")) == "domain_randomization"
                for w in policy.env_config.wrappers
            ),
        }
    randomized = [n for n, m in figures["matrix"].items() if m["trained_with_randomization"]]
    figures["target_met"] = (
        bool(randomized)
        and all(max(figures["matrix"][n]["mujoco_to_pybullet_drop"].values()) <= 0.10 for n in randomized)
        if randomized
        else None
    )
    for name, m in figures["matrix"].items():
        drop, noisy = m["mujoco_to_pybullet_drop"], m["mujoco_to_pybullet_drop_noisy"]
        print(f"{name}: MuJoCo -> PyBullet success drop {drop} (with noise + latency {noisy})")
    if not args.no_record:
        for name, m in figures["matrix"].items():
            record(
                "sim2sim",
                figures,
                [
                    name,
                    ", ".join(maps),
                    *("<br>".join(f"{mp}: {fmt(m['cells'][f'{mp}/{label}'])}" for mp in maps) for label in CONDITIONS),
                    ", ".join(f"{mp}: {d * 100:+.1f}" for mp, d in m["mujoco_to_pybullet_drop"].items()),
                ],
                [
                    "policy",
                    "maps",
                    *CONDITIONS,
                    "MuJoCo → PyBullet drop (points)",
                ],
            )
    emit(figures)


if __name__ == "__main__":
    main()
