import json

import gymnasium as gym
import imageio.v3 as iio
import numpy as np
import pytest
import torch

from hrl.evaluation import evaluate
from hrl.features import GoalFrameExtractor
from hrl.video import write_video


def go_to_goal(obs):
    """A hand-written controller: turn towards the goal, drive when facing it."""
    x, y, c, s = obs["observation"][:4]
    gx, gy = obs["desired_goal"]
    heading_error = np.arctan2(gy - y, gx - x) - np.arctan2(s, c)
    heading_error = (heading_error + np.pi) % (2 * np.pi) - np.pi
    return np.array([1.0 if abs(heading_error) < 0.5 else 0.0, np.clip(2.0 * heading_error, -1, 1)])


def test_evaluate_counts_successes_and_records_frames():
    env = gym.make(
        "hrl/RoverNav-v0", map="open", local_goal_radius=1.5, max_steps=80, render_mode="rgb_array", render_height=64
    )
    summary, frames = evaluate(go_to_goal, env, episodes=4, record_episodes=1, progress=False)
    assert summary.success_rate == 1.0  # open room, local goals: the controller always arrives
    assert summary.mean_steps_successful is not None and summary.mean_steps < 80
    assert len(frames) == summary.per_episode[0].steps + 1
    idle, _ = evaluate(lambda obs: np.zeros(2), env, episodes=4, progress=False)
    assert idle.success_rate == 0.0 and idle.mean_steps == 80


def test_summary_saves_json(tmp_path):
    env = gym.make("hrl/RoverNav-v0", map="open", max_steps=10)
    summary, _ = evaluate(lambda obs: np.zeros(2), env, episodes=2, progress=False)
    path = summary.save(tmp_path / "summary.json")
    data = json.loads(path.read_text())
    assert data["episodes"] == 2 and len(data["per_episode"]) == 2


def test_evaluate_rejects_zero_episodes():
    env = gym.make("hrl/RoverNav-v0", map="open")
    with pytest.raises(ValueError, match="episodes must be >= 1"):
        evaluate(go_to_goal, env, episodes=0)


@pytest.mark.parametrize("suffix", [".mp4", ".gif"])
def test_write_video(tmp_path, suffix):
    frames = [np.full((32, 48, 3), i * 20, dtype=np.uint8) for i in range(5)]
    path = write_video(frames, tmp_path / f"v{suffix}", fps=10)
    assert path.exists() and not list(tmp_path.glob("*.part*"))
    read = iio.imread(path, index=None)
    assert read.shape[0] == 5


def test_write_video_rejects_bad_input(tmp_path):
    with pytest.raises(ValueError, match="no frames"):
        write_video([], tmp_path / "a.mp4", fps=10)
    with pytest.raises(ValueError, match=r"\.mp4 or \.gif"):
        write_video([np.zeros((8, 8, 3), np.uint8)], tmp_path / "a.avi", fps=10)


def test_goal_frame_features_are_invariant_to_translation_and_rotation():
    env = gym.make("hrl/RoverNav-v0", map="open")
    extractor = GoalFrameExtractor(env.observation_space)
    n = env.observation_space["observation"].shape[0]

    def features(x, y, yaw, gx, gy):
        obs = np.zeros((1, n), dtype=np.float32)
        obs[0, :4] = [x, y, np.cos(yaw), np.sin(yaw)]
        obs[0, 6:] = 0.5
        return extractor({"observation": torch.tensor(obs), "desired_goal": torch.tensor([[gx, gy]])})[0]

    a = features(1.0, 1.0, 0.0, 2.0, 1.0)  # goal 1 m straight ahead
    b = features(4.0, 2.0, np.pi / 2, 4.0, 3.0)  # moved and rotated, goal still 1 m ahead
    torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
    torch.testing.assert_close(a[:3], torch.tensor([1.0, 0.0, 1.0]), atol=1e-4, rtol=0)
    left = features(0.0, 0.0, 0.0, 0.0, 2.0)
    torch.testing.assert_close(left[:3], torch.tensor([0.0, 2.0, 2.0]), atol=1e-4, rtol=0)
    assert extractor.features_dim == a.shape[0]
