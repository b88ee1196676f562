"""SB3 callbacks of ``hrl-train``: periodic evaluation (metrics.csv, best model), checkpoints, goal curriculum.

They share one :class:`RunState` (the counters a checkpoint must carry) instead of reaching into each other.
"""

from __future__ import annotations

import csv
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
from stable_baselines3.common.callbacks import BaseCallback

from hrl.checkpoint import save_checkpoint
from hrl.config import CurriculumConfig
from hrl.evaluation import evaluate

METRICS_FIELDS = [
    "step",
    "wall_time_s",
    "success_rate",
    "mean_return",
    "mean_episode_length",
    "collision_rate",
    "goal_radius",
]


@dataclass
class RunState:
    """Counters that survive a resume (stored in each checkpoint's state.json)."""

    wall_time_offset_s: float = 0.0
    best_success: float = -1.0
    #: The mean return of the best model's evaluation: among evaluations of equal success the better return wins
    #: (a skill at 100 % from early on keeps improving how fast and how close it gets).
    best_return: float | None = None
    goal_radius: float | None = None
    next_eval: int = 0
    next_checkpoint: int = 0
    fingerprint: dict[str, Any] | None = None

    def to_json(self, num_timesteps: int, wall_time_s: float) -> dict[str, Any]:
        return asdict(self) | {"num_timesteps": num_timesteps, "wall_time_offset_s": wall_time_s}


class Clock:
    """Wall time of the whole run, across resumes."""

    def __init__(self, offset_s: float) -> None:
        self.offset_s = offset_s
        self.start = time.perf_counter()

    def __call__(self) -> float:
        return self.offset_s + time.perf_counter() - self.start


class PeriodicEvaluation(BaseCallback):
    """Every ``every_steps``: evaluate on fixed goals, append a metrics.csv row, keep the best model."""

    def __init__(
        self,
        eval_env: gym.Env,
        state: RunState,
        clock: Clock,
        *,
        every_steps: int,
        episodes: int,
        seed: int,
        metrics_path: Path,
        save_best: Callable[[Any], None],
    ) -> None:
        super().__init__()
        self.eval_env = eval_env
        self.state = state
        self.clock = clock
        self.every_steps = every_steps
        self.episodes = episodes
        self.seed = seed
        self.metrics_path = metrics_path
        self.save_best = save_best

    def _on_step(self) -> bool:
        if self.num_timesteps >= self.state.next_eval:
            self.evaluate_now()
            self.state.next_eval = (self.num_timesteps // self.every_steps + 1) * self.every_steps
        return True

    def evaluate_now(self) -> dict[str, float]:
        summary, _ = evaluate(
            lambda obs: self.model.predict(obs, deterministic=True)[0],
            self.eval_env,
            self.episodes,
            seed=self.seed,
            progress=False,
        )
        row = {
            "step": self.num_timesteps,
            "wall_time_s": round(self.clock(), 2),
            "success_rate": summary.success_rate,
            "mean_return": summary.mean_return,
            "mean_episode_length": summary.mean_steps,
            "collision_rate": (
                summary.episodes_with_collision / summary.episodes
                if summary.episodes_with_collision is not None
                else ""
            ),  # empty: the env does not report collisions
            "goal_radius": self.state.goal_radius if self.state.goal_radius is not None else "",
        }
        append_metrics(self.metrics_path, row)
        self.logger.record("eval/success_rate", summary.success_rate)
        self.logger.record("eval/mean_return", summary.mean_return)
        best, best_return = self.state.best_success, self.state.best_return
        if summary.success_rate > best or (
            summary.success_rate == best and (best_return is None or summary.mean_return > best_return)
        ):
            self.state.best_success, self.state.best_return = summary.success_rate, summary.mean_return
            self.save_best(self.model)
        return row


class PeriodicCheckpoint(BaseCallback):
    def __init__(
        self, run_dir: Path, state: RunState, clock: Clock, *, every_steps: int, keep: int, replay_buffer: bool
    ) -> None:
        super().__init__()
        self.run_dir = run_dir
        self.state = state
        self.clock = clock
        self.every_steps = every_steps
        self.keep = keep
        self.replay_buffer = replay_buffer

    def _on_step(self) -> bool:
        if self.num_timesteps >= self.state.next_checkpoint:
            self.state.next_checkpoint = (self.num_timesteps // self.every_steps + 1) * self.every_steps
            self.save()
        return True

    def save(self) -> Path:
        return save_checkpoint(
            self.run_dir,
            self.model,
            self.state.to_json(self.num_timesteps, self.clock()),
            replay_buffer=self.replay_buffer,
            keep=self.keep,
        )


class GoalCurriculum(BaseCallback):
    """Grow the training envs' local goal radius when recent training episodes mostly succeed."""

    def __init__(self, config: CurriculumConfig, state: RunState, final_radius: float) -> None:
        super().__init__()
        self.config = config
        self.state = state
        self.final_radius = final_radius

    def _on_training_start(self) -> None:
        if self.state.goal_radius is None:
            self.state.goal_radius = self.config.start_radius
        self.training_env.env_method("set_local_goal_radius", self.state.goal_radius)

    def _on_step(self) -> bool:
        buffer = list(self.model.ep_success_buffer or ())
        radius = self.state.goal_radius
        if radius is None or radius >= self.final_radius or len(buffer) < self.config.window:
            return True
        recent = buffer[-self.config.window :]
        if sum(recent) / len(recent) >= self.config.threshold:
            radius = min(self.final_radius, radius * self.config.growth)
            self.state.goal_radius = radius
            self.training_env.env_method("set_local_goal_radius", radius)
            self.model.ep_success_buffer.clear()
            self.logger.record("curriculum/goal_radius", radius)
            if self.verbose:
                print(f"[curriculum] step {self.num_timesteps}: local goal radius -> {radius:.2f} m")
        return True


def append_metrics(path: Path, row: dict[str, Any]) -> None:
    new = not path.exists()
    with open(path, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=METRICS_FIELDS)
        if new:
            writer.writeheader()
        writer.writerow(row)
        f.flush()


def truncate_metrics(path: Path, last_step: int) -> None:
    """Drop rows logged after ``last_step`` (a resume replays from the checkpoint at that step)."""
    if not path.exists():
        return
    with open(path, newline="") as f:
        rows = [r for r in csv.DictReader(f) if int(float(r["step"])) <= last_step]
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=METRICS_FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    tmp.replace(path)
