"""Evaluate a goal-conditioned policy on a rover env: success rate, steps, collisions, and a video."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from tqdm.auto import tqdm

Policy = Callable[[dict[str, np.ndarray]], np.ndarray]


@dataclass
class EpisodeResult:
    success: bool
    steps: int
    collisions: int
    final_distance: float
    path_length: float
    episode_return: float
    #: Straight-line distance from the start to the goal (m): path_length / initial_distance >= 1.
    initial_distance: float = float("nan")


@dataclass
class EvaluationSummary:
    episodes: int
    success_rate: float
    mean_steps: float
    mean_steps_successful: float | None
    collisions: int
    episodes_with_collision: int
    mean_final_distance: float
    mean_return: float
    per_episode: list[EpisodeResult] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".part")
        tmp.write_text(json.dumps(self.to_dict(), indent=2))
        tmp.replace(path)
        return path


def evaluate(
    policy: Policy,
    env: gym.Env,
    episodes: int,
    *,
    seed: int = 0,
    stop_on_success: bool = True,
    record_episodes: int = 0,
    progress: bool = True,
) -> tuple[EvaluationSummary, list[np.ndarray]]:
    """Run ``episodes`` episodes; an episode succeeds when the goal is reached before truncation.

    Returns the summary and the rendered frames of the first ``record_episodes`` episodes (the env
    needs ``render_mode="rgb_array"`` for those).
    """
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    results: list[EpisodeResult] = []
    frames: list[np.ndarray] = []
    for ep in tqdm(range(episodes), desc="evaluating", unit="ep", disable=not progress, leave=False):
        obs, info = env.reset(seed=seed + ep)
        record = ep < record_episodes
        if record:
            frames.append(env.render())
        steps = collisions = 0
        ret = path = 0.0
        success = False
        initial_distance = float(info["distance"])
        prev = _true_position(env, obs)
        while True:
            obs, reward, terminated, truncated, info = env.step(policy(obs))
            steps += 1
            ret += float(reward)
            collisions += int(info["collision"])
            position = _true_position(env, obs)
            path += float(np.linalg.norm(position - prev))
            prev = position
            if record:
                frames.append(env.render())
            if info["is_success"]:
                success = True
            if terminated or truncated or (success and stop_on_success):
                break
        results.append(EpisodeResult(success, steps, collisions, float(info["distance"]), path, ret, initial_distance))
    successes = [r for r in results if r.success]
    summary = EvaluationSummary(
        episodes=episodes,
        success_rate=len(successes) / episodes,
        mean_steps=float(np.mean([r.steps for r in results])),
        mean_steps_successful=float(np.mean([r.steps for r in successes])) if successes else None,
        collisions=sum(r.collisions for r in results),
        episodes_with_collision=sum(r.collisions > 0 for r in results),
        mean_final_distance=float(np.mean([r.final_distance for r in results])),
        mean_return=float(np.mean([r.episode_return for r in results])),
        per_episode=results,
    )
    return summary, frames


def _true_position(env: gym.Env, obs: dict[str, np.ndarray]) -> np.ndarray:
    """Where the robot really is (the observation may carry odometry drift from a SensorNoise wrapper)."""
    pose = getattr(env.unwrapped, "pose", None)
    return np.array([pose.x, pose.y]) if pose is not None else obs["achieved_goal"].astype(np.float64)
