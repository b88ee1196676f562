"""The main job on embedded defaults: train a goal-reaching policy briefly, evaluate it and the shipped one.

``make demo`` (or ``hrl-demo`` / ``python -m hrl.demo``):

1. trains SAC + HER (the project's recipe, through ``hrl.training.train``) on the ``open`` map with local
   goals for a few thousand steps on the CPU (run directory ``train/``: metrics, learning curve, model)
   and evaluates it against a random policy on the same goals (``eval.mp4``);
2. loads the shipped low-level policy (``hrl/policies/rover_local``) and evaluates it on local goals
   in ``open`` and in the ``apartment`` (``shipped_apartment.mp4``);
3. runs the hierarchy: the ``graph`` planner with the shipped policy on a multi-goal apartment task
   ("check the fridge, then the sofa, then the desk"), with the plan drawn on the video
   (``hierarchy/graph_apartment_multi_ep0.mp4``).

Everything lands in ``runs/demo/<time>/`` with a ``summary.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hrl-demo", description=__doc__.splitlines()[0])
    p.add_argument("--map", default="open", help="map name or path of a map .yaml (default: open)")
    p.add_argument("--steps", type=int, default=6000, help="training env steps (default: 6000)")
    p.add_argument("--eval-episodes", type=int, default=20, help="evaluation episodes (default: 20)")
    p.add_argument("--video-episodes", type=int, default=3, help="episodes recorded in eval.mp4 (default: 3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="output directory (default: runs/demo/<time>)")
    p.add_argument("--skip-shipped", action="store_true", help="skip the shipped policy and the hierarchy")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    for name in ("steps", "eval_episodes"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.video_episodes < 0:
        raise SystemExit(f"--video-episodes must be >= 0, got {args.video_episodes}")

    import gymnasium as gym

    import sim  # noqa: F401  (registers hrl/RoverNav-v0)
    from hrl.config import AlgoConfig, CheckpointConfig, EnvConfig, EvalConfig, TrainConfig
    from hrl.evaluation import evaluate
    from hrl.policy import GoalPolicy
    from hrl.training import train
    from hrl.video import write_video

    out = args.out or Path("runs") / "demo" / time.strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    # the project's recipe (configs/algo/sac_her.yaml) on short local goals, for a short run
    config = TrainConfig(
        env=EnvConfig(map=args.map, goal_mode="local", local_goal_radius=1.5, max_steps=60),
        algo=AlgoConfig(learning_starts=200),
        eval=EvalConfig(every_steps=max(args.steps // 3, 1), episodes=10, video_episodes=0),
        checkpoint=CheckpointConfig(every_steps=args.steps, keep=1),
        experiment_name="demo",
        seed=args.seed,
        total_steps=args.steps,
        tensorboard=False,
    )
    print(f"[demo] training SAC+HER on map {args.map!r} for {args.steps} steps -> {out / 'train'}")
    t0 = time.perf_counter()
    train(config, out / "train")
    train_s = time.perf_counter() - t0
    policy = GoalPolicy.load(out / "train" / "final_model.zip")

    eval_env = gym.make(config.env.id, render_mode="rgb_array", **config.env.make_kwargs(config.robot))
    trained, frames = evaluate(policy, eval_env, args.eval_episodes, seed=10_000, record_episodes=args.video_episodes)
    rng = np.random.default_rng(args.seed)
    baseline, _ = evaluate(lambda obs: rng.uniform(-1, 1, 2), eval_env, args.eval_episodes, seed=10_000)
    if frames:
        write_video(frames, out / "eval.mp4", fps=eval_env.unwrapped.control_hz)
    eval_env.close()

    shipped = None if args.skip_shipped else evaluate_shipped(out, args.eval_episodes, args.video_episodes)
    hierarchy = None if args.skip_shipped else run_hierarchy(out, args.video_episodes > 0)

    summary = {
        "map": args.map,
        "train_steps": args.steps,
        "train_seconds": round(train_s, 1),
        "train_steps_per_second": round(args.steps / train_s, 1),
        "train_run": str(out / "train"),
        "policy": trained.to_dict() | {"per_episode": None},
        "random_policy": baseline.to_dict() | {"per_episode": None},
        "video": str(out / "eval.mp4") if frames else None,
        "shipped_policy": shipped,
        "hierarchy": hierarchy,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(
        f"[demo] trained policy: success {trained.success_rate:.0%} over {trained.episodes} local goals "
        f"(random policy: {baseline.success_rate:.0%}); {summary['train_steps_per_second']} train steps/s"
    )
    if shipped:
        for label, res in shipped.items():
            print(
                f"[demo] shipped policy, {label}: success {res['success_rate']:.0%}, "
                f"episodes with a wall contact {res['episodes_with_collision']}/{res['episodes']}"
            )
    if hierarchy:
        print(
            f"[demo] hierarchy (graph planner + shipped policy): {hierarchy['task']!r}: "
            f"{'success' if hierarchy['success'] else 'failed: ' + hierarchy['reason']} in {hierarchy['steps']} steps"
        )
    print(
        f"[demo] wrote {out / 'summary.json'}, the training run in {out / 'train'}"
        + (f", {out / 'eval.mp4'}" if frames else "")
    )
    return 0


def evaluate_shipped(out: Path, episodes: int, video_episodes: int) -> dict[str, dict]:
    """The shipped low-level policy on local goals (<= 2.5 m) in the open room and in the apartment."""
    from hrl.config import EnvConfig, EvalRunConfig
    from hrl.eval import run_evaluation

    results = {}
    for map_name in ("open", "apartment"):
        print(f"[demo] evaluating the shipped policy on local goals in {map_name!r}")
        doc = run_evaluation(
            EvalRunConfig(
                policy="shipped:rover_local",
                env=EnvConfig(map=map_name, local_goal_radius=2.5),
                episodes=episodes,
                video_episodes=video_episodes if map_name == "apartment" else 0,
            ),
            out / f"shipped_{map_name}",
        )
        results[f"{map_name}_local"] = {
            k: doc[k] for k in ("episodes", "success_rate", "episodes_with_collision", "mean_steps")
        }
    video = out / "shipped_apartment" / "eval.mp4"
    if video.exists():
        video.replace(out / "shipped_apartment.mp4")
    return results


def run_hierarchy(out: Path, video: bool) -> dict:
    """The graph planner and the shipped policy on the first multi-goal apartment task."""
    from dataclasses import replace

    from hrl.hierarchy_eval import run_suite
    from hrl.policy import GoalPolicy
    from hrl.tasks import load_suite

    suite = load_suite("apartment_multi")
    suite = replace(suite, episodes=suite.episodes[:1])
    print(f"[demo] hierarchy: graph planner + shipped policy: {suite.episodes[0].text!r}")
    result = run_suite(
        "graph",
        suite,
        GoalPolicy.load("shipped:rover_local"),
        out_dir=out / "hierarchy",
        video_episode=0 if video else None,
        progress=False,
    )
    row = result.rows[0]
    return {k: row[k] for k in ("task", "success", "reason", "steps", "replans", "goals_reached", "goals_total")}


if __name__ == "__main__":
    sys.exit(main())
