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

The tabletop (``--suites tabletop``): skills trained in MuJoCo on ``hrl/PandaTabletop-v0`` (default: every
shipped one; ``--skills`` takes ``shipped:<name>`` or run directories), each evaluated in its own training env
(no training-time wrappers) in MuJoCo and in PyBullet on the same seeds (same goals and layouts: checked),
next to the env's scripted expert (``env.unwrapped.expert_action()``) in both engines as the reference.
Success with its 95 % Wilson interval; target (issue 15): a skill loses <= 10 points from MuJoCo to PyBullet.

    python benchmarks/sim2sim.py [--quick] [--no-record] [--episodes 200] [--suites rover tabletop]
        [--maps open apartment] [--policies shipped:rover_local shipped:rover_local_dr]
        [--skills shipped:panda_reach runs/skills/panda_push]
"""

from __future__ import annotations

import argparse
import fnmatch
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
from hrl.cli import wrapper_preset
from hrl.evaluation import evaluate
from hrl.hierarchy_eval import wilson
from hrl.policy import SHIPPED_DIR, GoalPolicy, sidecar_path

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
TABLETOP = "hrl/PandaTabletop-*"
#: The two engines' episodes of one seed start with goal distances this close (m), else they differ.
SAME_EPISODE_TOLERANCE = 0.005


def noise_latency_wrappers() -> list[Any]:
    """The evaluation preset, read from its Hydra file (one definition for the CLI and this benchmark)."""
    return wrapper_preset("noise_latency")


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
    radius = policy.env_config.argument("success_radius")
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


def rover(args: argparse.Namespace, figures: dict[str, Any]) -> None:
    """The rover's transfer matrix into ``figures`` (and its rows into RESULTS.md)."""
    episodes, maps = (20, ["open"]) if args.quick else (args.episodes, args.maps)
    figures.update({"episodes_per_cell": episodes, "maps": maps, "matrix": {}})
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


def shipped_tabletop_skills() -> list[str]:
    """``shipped:<name>`` of every shipped policy trained on the tabletop, by name."""
    skills = []
    for sidecar in sorted(SHIPPED_DIR.glob("*/model.policy.yaml")):
        if fnmatch.fnmatchcase(yaml.safe_load(sidecar.read_text())["env"]["id"], TABLETOP):
            skills.append(f"shipped:{sidecar.parent.name}")
    return skills


def tabletop_cell(env: gym.Env, actor: Any, episodes: int, seed: int) -> tuple[dict[str, Any], list[float]]:
    """``actor`` (a policy on observations) on ``episodes`` episodes from ``seed``: the cell, and each episode's
    distance from the achieved to the desired goal at its start (the same episodes give the same distances)."""
    t0 = time.perf_counter()
    summary, _ = evaluate(actor, env, episodes, seed=seed, progress=False)
    k = sum(e.success for e in summary.per_episode)
    return {
        "episodes": episodes,
        "success_rate": round(k / episodes, 4),
        "success_ci95": [round(v, 4) for v in wilson(k, episodes)],
        "mean_steps": round(summary.mean_steps, 1),
        "mean_final_distance": round(summary.mean_final_distance, 4),
        "seconds": round(time.perf_counter() - t0, 1),
    }, [e.initial_distance for e in summary.per_episode]


def tabletop_skill(spec: str, episodes: int, seed: int) -> dict[str, Any]:
    """One skill and the scripted expert in its goal mode, in MuJoCo and PyBullet on the same seeds.

    Raises RuntimeError if the two engines' episodes start apart (then they are not the same episodes).
    """
    policy = GoalPolicy.load(spec)
    if not fnmatch.fnmatchcase(policy.env_config.id, TABLETOP):
        raise ValueError(f"--skills takes tabletop skills ({TABLETOP}); {spec} was trained on {policy.env_config.id}")
    cells: dict[str, Any] = {}
    starts: dict[str, list[float]] = {}
    for backend in ("mujoco", "pybullet"):
        env = policy.make_env(backend=backend, wrappers=[])  # training-time randomization is not evaluated
        policy.check_compatible(env.observation_space)
        cells[backend], starts[backend] = tabletop_cell(env, policy, episodes, seed)
        expert = env.unwrapped.expert_action  # the scripted expert reads the sim, not the observation
        cells[f"expert/{backend}"], _ = tabletop_cell(env, lambda obs, act=expert: act(), episodes, seed)
        env.close()
    apart = float(np.max(np.abs(np.subtract(starts["mujoco"], starts["pybullet"]))))
    if apart > SAME_EPISODE_TOLERANCE:
        raise RuntimeError(
            f"{spec}: episodes of the same seed start {apart * 1000:.1f} mm apart in MuJoCo and PyBullet "
            f"(goal distance at reset; tolerance {SAME_EPISODE_TOLERANCE * 1000:.0f} mm): not the same episodes"
        )

    def drop(prefix: str) -> float:
        return round(cells[f"{prefix}mujoco"]["success_rate"] - cells[f"{prefix}pybullet"]["success_rate"], 4)

    return {
        "goal_mode": policy.env_config.kwargs.get("goal_mode", "reach"),
        "trained_steps": yaml.safe_load(sidecar_path(policy.path).read_text()).get("trained_steps"),
        "trained_in": policy.env_config.kwargs.get("backend", "mujoco"),
        "cells": cells,
        "start_distance_max_difference_m": round(apart, 5),
        "mujoco_to_pybullet_drop": drop(""),
        "expert_mujoco_to_pybullet_drop": drop("expert/"),
    }


def tabletop(args: argparse.Namespace) -> dict[str, Any]:
    """The tabletop skills' rows (and RESULTS.md's)."""
    episodes = 20 if args.quick else args.episodes
    skills = shipped_tabletop_skills() if args.skills is None else args.skills
    figures: dict[str, Any] = {"episodes_per_cell": episodes, "skills": {}}
    if not skills:
        figures["skipped"] = "no tabletop skill shipped (hrl/policies/*/model.policy.yaml); give --skills"
        print(f"tabletop: {figures['skipped']}")
        return figures
    for spec in skills:
        name = spec.removeprefix("shipped:")
        row = figures["skills"][name] = tabletop_skill(spec, episodes, args.seed)
        for label, c in row["cells"].items():
            print(f"{name:>24} {label:>16}: {fmt_tabletop(c)}  ({c['seconds']} s)", flush=True)
        print(f"{name}: MuJoCo -> PyBullet success drop {row['mujoco_to_pybullet_drop']:+.2f} "
              f"(expert {row['expert_mujoco_to_pybullet_drop']:+.2f})")  # fmt: skip
    figures["target_met"] = all(r["mujoco_to_pybullet_drop"] <= 0.10 for r in figures["skills"].values())
    if not args.no_record:
        for name, row in figures["skills"].items():
            c = row["cells"]
            record(
                "sim2sim_tabletop",
                figures,
                [
                    name,
                    row["goal_mode"],
                    str(row["trained_steps"]),
                    str(episodes),
                    fmt_tabletop(c["mujoco"]),
                    fmt_tabletop(c["pybullet"]),
                    f"{row['mujoco_to_pybullet_drop'] * 100:+.1f}",
                    f"{fmt_tabletop(c['expert/mujoco'])} / {fmt_tabletop(c['expert/pybullet'])}",
                    f"{row['expert_mujoco_to_pybullet_drop'] * 100:+.1f}",
                    "yes" if row["mujoco_to_pybullet_drop"] <= 0.10 else "**no**",
                    "—",
                ],
                [
                    "skill",
                    "goal mode",
                    "trained steps",
                    "episodes",
                    "MuJoCo",
                    "PyBullet",
                    "MuJoCo → PyBullet drop (points)",
                    "expert MuJoCo / PyBullet",
                    "expert drop (points)",
                    "target drop <= 10 points",
                    "notes",
                ],
            )
    return figures


def fmt_tabletop(c: dict[str, Any]) -> str:
    lo, hi = c["success_ci95"]
    return f"{c['success_rate']:.0%} [{lo:.0%}, {hi:.0%}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 episodes a cell, the rover on the open map (< 1 min)")
    parser.add_argument("--no-record", action="store_true", help="do not append to benchmarks/RESULTS.md")
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--suites", nargs="+", default=["rover", "tabletop"], choices=["rover", "tabletop"])
    parser.add_argument("--maps", nargs="+", default=["open", "apartment"], help="the rover's maps")
    parser.add_argument("--policies", nargs="+", default=DEFAULT_POLICIES, help="the rover's policies")
    parser.add_argument(
        "--skills", nargs="+", default=None, help="tabletop skills (default: every shipped one on the tabletop)"
    )
    parser.add_argument("--seed", type=int, default=30000, help="first episode seed (disjoint from training evals)")
    args = parser.parse_args()
    if args.episodes < 1:
        parser.error(f"--episodes must be >= 1, got {args.episodes}")

    figures: dict[str, Any] = {"quick": args.quick}
    if "rover" in args.suites:
        rover(args, figures)
    if "tabletop" in args.suites:
        figures["tabletop"] = tabletop(args)
    emit(figures)


if __name__ == "__main__":
    main()
