"""Wall time and env steps until >= 95 % evaluation success on local goals in ``open``.

Compares, in the same run on the same machine:

* ``project``: the project's default recipe (``hrl-train experiment=rover_local``);
* ``sb3_defaults``: SAC + HER with stable-baselines3's default hyper-parameters (one env, [256, 256]
  networks, flat observation, torch's default thread count); only ``learning_starts`` is raised above
  the episode length, which SB3's HER requires;
* ``project_flat_obs`` (ablation, full runs only): the project's recipe with SB3's flat observation
  instead of the goal in the robot frame.

Each run stops at 95 % success or at its time budget. Training wall time excludes the evaluations.
A second table measures raw training throughput (env steps/s) of single changes: network size, torch
threads, gradient steps per env step, number of envs.

    python benchmarks/train_lowlevel.py [--quick] [--no-record]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gymnasium as gym
import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from stable_baselines3 import SAC, HerReplayBuffer
from stable_baselines3.common.callbacks import BaseCallback

import sim  # noqa: F401
from benchmarks._common import emit, record
from hrl.config import TrainConfig
from hrl.evaluation import evaluate
from hrl.train import CONFIG_DIR, register_schemas
from hrl.training import build_model, make_training_env

TARGET = 0.95
TORCH_DEFAULT_THREADS = torch.get_num_threads()


def project_config(*overrides: str) -> TrainConfig:
    register_schemas()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = compose(config_name="config", overrides=["experiment=rover_local", *overrides])
    config: TrainConfig = OmegaConf.to_object(cfg)  # type: ignore[assignment]
    config.validate()
    return config


class StopAtTarget(BaseCallback):
    """Evaluate every ``every`` steps; stop at the target success or when the time budget is spent."""

    def __init__(self, eval_env: gym.Env, every: int, episodes: int, budget_s: float) -> None:
        super().__init__()
        self.eval_env, self.every, self.episodes, self.budget_s = eval_env, every, episodes, budget_s
        self.curve: list[dict[str, float]] = []
        self.eval_s = 0.0
        self.next_eval = every

    def _on_training_start(self) -> None:
        self.t0 = time.perf_counter()

    def train_time(self) -> float:
        return time.perf_counter() - self.t0 - self.eval_s

    def _on_step(self) -> bool:
        if self.num_timesteps < self.next_eval:
            return True
        self.next_eval += self.every
        t = time.perf_counter()
        summary, _ = evaluate(
            lambda o: self.model.predict(o, deterministic=True)[0],
            self.eval_env,
            self.episodes,
            seed=10_000,
            progress=False,
        )
        self.eval_s += time.perf_counter() - t
        self.curve.append(
            {"step": self.num_timesteps, "train_s": round(self.train_time(), 1), "success": summary.success_rate}
        )
        print(
            f"    step {self.num_timesteps:6d}  train {self.train_time():6.0f} s  success {summary.success_rate:.0%}",
            flush=True,
        )
        return summary.success_rate < TARGET and self.train_time() < self.budget_s


def run(
    name: str, model: Any, env_kwargs: dict, every: int, episodes: int, budget_s: float, threads: int
) -> dict[str, Any]:
    torch.set_num_threads(threads)
    print(f"[{name}] budget {budget_s:.0f} s, torch threads {threads}", flush=True)
    eval_env = gym.make("hrl/RoverNav-v0", **env_kwargs)
    cb = StopAtTarget(eval_env, every, episodes, budget_s)
    model.learn(total_timesteps=10**8, callback=cb)
    reached = next((p for p in cb.curve if p["success"] >= TARGET), None)
    return {
        "reached_target": reached is not None,
        "steps_to_target": reached["step"] if reached else None,
        "train_s_to_target": reached["train_s"] if reached else None,
        "best_success": max((p["success"] for p in cb.curve), default=0.0),
        "steps": model.num_timesteps,
        "train_s": round(cb.train_time(), 1),
        "steps_per_s": round(model.num_timesteps / max(cb.train_time(), 1e-9), 1),
        "curve": cb.curve,
    }


def sb3_defaults_model(config: TrainConfig) -> Any:
    env = make_training_env(replace(config, n_envs=1), seed=config.seed)
    return SAC(
        "MultiInputPolicy",
        env,
        replay_buffer_class=HerReplayBuffer,
        learning_starts=config.env.argument("max_steps") + 1,
        seed=config.seed,
        device="cpu",
        verbose=0,
    )


def throughput(config: TrainConfig, steps: int, threads: int) -> float:
    """Training env steps/s after learning starts (updates included)."""
    torch.set_num_threads(threads)
    config = replace(config, total_steps=10**6)
    model = build_model(config, make_training_env(config, seed=0), tensorboard_log=None)
    warmup = config.algo.learning_starts or 100
    model.learn(warmup + 50)
    t = time.perf_counter()
    model.learn(steps, reset_num_timesteps=False)
    return steps / (time.perf_counter() - t)


def plot_curves(figures: dict[str, Any], path: Path) -> None:
    """Success vs training time and vs env steps for every run (benchmarks/train_lowlevel.png)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    labels = {
        "project": "project recipe (rover_local)",
        "sb3_defaults": "SB3 defaults (SAC+HER)",
        "project_flat_obs": "project recipe, flat observation",
    }
    for key, label in labels.items():
        curve = figures.get(key, {}).get("curve", [])
        axes[0].plot([p["train_s"] / 60 for p in curve], [100 * p["success"] for p in curve], marker="o", label=label)
        axes[1].plot([p["step"] for p in curve], [100 * p["success"] for p in curve], marker="o", label=label)
    for ax, xlabel in zip(axes, ["training wall time (min, evaluations excluded)", "env steps"], strict=True):
        ax.axhline(100 * TARGET, color="grey", ls="--", lw=1)
        ax.set(xlabel=xlabel, ylabel="eval success (%)")
        ax.grid(alpha=0.3)
    axes[0].legend(loc="lower right")
    fig.suptitle(f"{figures['env']}: time to {TARGET:.0%} success")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short budgets (< 1 minute in all); no ablation")
    parser.add_argument("--no-record", action="store_true", help="do not append to benchmarks/RESULTS.md")
    parser.add_argument("--budget-min", type=float, default=15.0, help="time budget per full run (minutes)")
    args = parser.parse_args()

    config = project_config()
    env_kwargs = config.env.make_kwargs(config.robot)
    if args.quick:
        budget, every, episodes, tp_steps = 12.0, 500, 10, 200
    else:
        budget, every, episodes, tp_steps = args.budget_min * 60.0, 2500, 50, 1500

    figures: dict[str, Any] = {
        "quick": args.quick,
        "target_success": TARGET,
        "env": f"{config.env.argument('map')}, local goals <= {config.env.argument('local_goal_radius')} m",
    }
    proj_model = build_model(config, make_training_env(config, seed=config.seed), tensorboard_log=None)
    figures["project"] = run("project", proj_model, env_kwargs, every, episodes, budget, config.torch_threads)
    figures["sb3_defaults"] = run(
        "sb3_defaults", sb3_defaults_model(config), env_kwargs, every, episodes, budget, TORCH_DEFAULT_THREADS
    )
    if not args.quick:
        flat = project_config("algo.features=flat")
        flat_model = build_model(flat, make_training_env(flat, seed=flat.seed), tensorboard_log=None)
        figures["project_flat_obs"] = run(
            "project_flat_obs", flat_model, env_kwargs, every, episodes, budget / 3, flat.torch_threads
        )

    print("[throughput] env steps/s while learning, one change at a time from the project recipe", flush=True)
    base = config
    variants = {
        "project ([64,64], 1 thread, 1 grad step/step, 1 env)": (base, 1),
        "net [256,256]": (replace(base, algo=replace(base.algo, net_arch=[256, 256])), 1),
        f"torch threads {TORCH_DEFAULT_THREADS}": (base, TORCH_DEFAULT_THREADS),
        "2 envs (DummyVecEnv), 1 grad step per vec step": (replace(base, n_envs=2), 1),
        "batch 512": (replace(base, algo=replace(base.algo, batch_size=512)), 1),
    }
    figures["throughput_steps_per_s"] = {}
    for name, (cfg, threads) in variants.items():
        sps = throughput(cfg, tp_steps, threads)
        figures["throughput_steps_per_s"][name] = round(sps, 1)
        print(f"    {name:55s} {sps:7.1f} steps/s", flush=True)

    p, d = figures["project"], figures["sb3_defaults"]
    if p["reached_target"] and d["reached_target"]:
        ratio = p["train_s_to_target"] / d["train_s_to_target"]
        verdict = f"{ratio:.2f} of SB3 defaults' wall time"
        met = ratio <= 1 / 3
    elif p["reached_target"]:
        ratio = None
        verdict = f"SB3 defaults never reached {TARGET:.0%} in {d['train_s']:.0f} s (best {d['best_success']:.0%})"
        met = p["train_s_to_target"] <= 15 * 60
    else:
        ratio, verdict, met = None, f"project recipe did not reach {TARGET:.0%}", False
    figures["time_ratio"] = ratio
    figures["verdict"] = verdict
    figures["target_met"] = met
    print(
        f"[result] project: {p['train_s_to_target']} s / {p['steps_to_target']} steps to {TARGET:.0%}; "
        f"SB3 defaults: {d['train_s_to_target']} s / {d['steps_to_target']} steps (best {d['best_success']:.0%}, "
        f"{d['steps_per_s']} steps/s) -> {verdict}"
    )
    if not args.no_record:

        def cell(r: dict) -> str:
            if r["reached_target"]:
                return f"{r['train_s_to_target']:.0f} s, {r['steps_to_target']} steps ({r['steps_per_s']} steps/s)"
            return f"not reached in {r['train_s']:.0f} s / {r['steps']} steps (best {r['best_success']:.0%})"

        record(
            "train_lowlevel",
            figures,
            [cell(p), cell(d), verdict, "yes" if met else "**no**"],
            ["project recipe to 95 %", "SB3 defaults to 95 %", "ratio", "target (<= 1/3)"],
        )
    emit({k: v for k, v in figures.items()})


if __name__ == "__main__":
    main()
