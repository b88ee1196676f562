"""Evaluate a goal-conditioned policy on a goal env: success rate, steps, collisions, and a video.

Any Gymnasium goal env works: ``info["is_success"]`` decides success; the distance to the goal is the env's
``info["distance"]`` where it reports one (the rover), else that of ``achieved_goal`` to ``desired_goal``;
collisions are counted where the env reports ``info["collision"]`` and are None where it does not.
"""

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
    collisions: int | None  # None: the env does not report collisions
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
    collisions: int | None  # None: the env does not report collisions
    episodes_with_collision: int | None
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
        steps = 0
        collisions: int | None = None
        ret = path = 0.0
        success = False
        initial_distance = _goal_distance(obs, info)
        prev = _true_position(env, obs)
        while True:
            obs, reward, terminated, truncated, info = env.step(policy(obs))
            steps += 1
            ret += float(reward)
            if "collision" in info:
                collisions = (collisions or 0) + int(info["collision"])
            position = _true_position(env, obs)
            path += float(np.linalg.norm(position - prev))
            prev = position
            if record:
                frames.append(env.render())
            if info["is_success"]:
                success = True
            if terminated or truncated or (success and stop_on_success):
                break
        results.append(
            EpisodeResult(success, steps, collisions, _goal_distance(obs, info), path, ret, initial_distance)
        )
    successes = [r for r in results if r.success]
    reported = [r.collisions for r in results if r.collisions is not None]
    summary = EvaluationSummary(
        episodes=episodes,
        success_rate=len(successes) / episodes,
        mean_steps=float(np.mean([r.steps for r in results])),
        mean_steps_successful=float(np.mean([r.steps for r in successes])) if successes else None,
        collisions=sum(reported) if reported else None,
        episodes_with_collision=sum(c > 0 for c in reported) if reported else None,
        mean_final_distance=float(np.mean([r.final_distance for r in results])),
        mean_return=float(np.mean([r.episode_return for r in results])),
        per_episode=results,
    )
    return summary, frames


def video_fps(env: gym.Env) -> float | None:
    """The frame rate of ``env``'s rendered frames (its ``render_fps``: the rover's control rate); None if unset."""
    fps = env.metadata.get("render_fps")
    return float(fps) if fps else None


def _goal_distance(obs: dict[str, np.ndarray], info: dict[str, Any]) -> float:
    """The env's own distance to the goal where it reports one, else that of the achieved to the desired goal."""
    if "distance" in info:
        return float(info["distance"])
    return float(np.linalg.norm(np.asarray(obs["achieved_goal"]) - np.asarray(obs["desired_goal"])))


def _true_position(env: gym.Env, obs: dict[str, np.ndarray]) -> np.ndarray:
    """Where the robot really is (the observation may carry odometry drift from a SensorNoise wrapper)."""
    pose = getattr(env.unwrapped, "pose", None)
    return np.array([pose.x, pose.y]) if pose is not None else obs["achieved_goal"].astype(np.float64)
