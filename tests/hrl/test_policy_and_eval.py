"""The shipped policy, GoalPolicy loading, and hrl-eval."""

import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import yaml

from hrl.config import EnvConfig, EvalRunConfig
from hrl.eval import run_evaluation
from hrl.evaluation import evaluate
from hrl.policy import SHIPPED_DIR, GoalPolicy
from llm_planner.llm.llama_cpp_backend import ADAPTERS_DIR

ROOT = Path(__file__).resolve().parents[2]


def test_shipped_policy_reaches_local_goals():
    """>= 90 % success on local goals (<= 2.5 m) in `open` over 50 episodes."""
    policy = GoalPolicy.load("shipped:rover_local")
    env = gym.make("hrl/RoverNav-v0", map="open", goal_mode="local", local_goal_radius=2.5)
    policy.check_compatible(env.observation_space)
    summary, _ = evaluate(policy, env, episodes=50, seed=777, progress=False)
    assert summary.success_rate >= 0.9, summary.success_rate


def test_shipped_policy_mostly_avoids_walls_in_apartment():
    """Local goals among the apartment's walls: the rate is reported in the manifest; it must stay high."""
    policy = GoalPolicy.load("shipped:rover_local")
    env = gym.make("hrl/RoverNav-v0", map="apartment", goal_mode="local", local_goal_radius=2.5)
    summary, _ = evaluate(policy, env, episodes=30, seed=555, progress=False)
    collision_free = 1 - summary.episodes_with_collision / summary.episodes
    assert collision_free >= 0.8, collision_free
    assert summary.success_rate >= 0.8, summary.success_rate


def test_shipped_manifest_is_complete():
    manifest = yaml.safe_load((SHIPPED_DIR / "rover_local" / "manifest.yaml").read_text())
    assert manifest["command"].startswith("hrl-train experiment=rover_local")
    assert len(manifest["commit"]) == 40
    assert manifest["seed"] == 0 and manifest["training_wall_time_s"] > 0
    assert manifest["evaluation"]["open_local_2.5m"]["episodes"] >= 50
    assert manifest["evaluation"]["open_local_2.5m"]["success_rate"] >= 0.9
    assert "collision_free_rate" in manifest["evaluation"]["apartment_local_2.5m"]
    assert manifest["config"]["algo"]["name"] == manifest["algorithm"]


def test_policy_act_matches_dict_interface():
    policy = GoalPolicy.load("shipped:rover_local")
    env = gym.make("hrl/RoverNav-v0", map="open")
    obs, _ = env.reset(seed=0)
    a = policy.act(obs["observation"], obs["desired_goal"])
    b = policy(obs)
    np.testing.assert_allclose(a, b)
    assert a.shape == (2,) and np.all(np.abs(a) <= 1)


def test_policy_rejects_incompatible_env():
    policy = GoalPolicy.load("shipped:rover_local")
    env = gym.make("hrl/RoverNav-v0", map="open", lidar_rays=12)
    with pytest.raises(ValueError, match="expects observations of shape"):
        policy.check_compatible(env.observation_space)


@pytest.mark.parametrize(
    ("spec", "error", "message"),
    [
        ("shipped:nope", ValueError, "unknown shipped policy 'nope'; shipped: (.*, )?rover_local"),
        ("/tmp/definitely/missing.zip", FileNotFoundError, "does not exist"),
    ],
)
def test_bad_policy_paths(spec, error, message):
    with pytest.raises(error, match=message):
        GoalPolicy.load(spec)


def test_run_evaluation_writes_summary_and_video(tmp_path):
    doc = run_evaluation(
        EvalRunConfig(env=EnvConfig(kwargs={"map": "two_rooms"}), episodes=3, video_episodes=1, progress_bar=False),
        tmp_path,
    )
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert saved["episodes"] == 3 and set(saved) >= {"success_rate", "mean_steps", "collisions", "episodes"}
    assert saved["success_rate"] == doc["success_rate"]
    assert (tmp_path / "eval.mp4").stat().st_size > 0


def test_hrl_eval_cli(tmp_path):
    out = tmp_path / "ev"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "hrl.eval",
            "env=apartment_local",
            "episodes=3",
            "video_episodes=0",
            "progress_bar=false",
            f"hydra.run.dir={out}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "[hrl-eval]" in done.stdout and "on apartment (local goals, mujoco)" in done.stdout
    assert json.loads((out / "summary.json").read_text())["episodes"] == 3


def run_module(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_hrl_eval_cli_bad_map(tmp_path):
    done = run_module("hrl.eval", "env.kwargs.map=attic", "episodes=1", f"hydra.run.dir={tmp_path / 'x'}")
    assert done.returncode == 2 and "unknown map 'attic'" in done.stderr


def test_a_rover_key_of_the_old_layout_names_its_new_place(tmp_path):
    """env.map=... (the rover's arguments were EnvConfig fields until 2026-12-08) is refused before Hydra
    composes anything, naming env.kwargs.map, in both CLIs; a misspelt argument is refused naming the close one."""
    for module in ("hrl.eval", "hrl.train"):
        done = run_module(module, "env.map=maze", "env.max_steps=9", f"hydra.run.dir={tmp_path / module}")
        assert done.returncode == 2, done.stderr
        assert "env.map is env.kwargs.map now (the env's own argument): env.kwargs.map=maze" in done.stderr
        assert "env.kwargs.max_steps=9" in done.stderr
        assert not (tmp_path / module).exists()
    done = run_module("hrl.eval", "env.kwargs.mapp=maze", "episodes=1", f"hydra.run.dir={tmp_path / 'y'}")
    assert done.returncode == 2
    assert "env.kwargs: mapp (did you mean map?) not an argument of env.id=hrl/RoverNav-v0" in done.stderr


def test_hrl_eval_robot_overrides_replace_the_policys_own_settings(tmp_path, capsys):
    """robot.* in goal reaching: each key set replaces the policy's robot setting (it crashed on composition);
    one the policy cannot run with is refused with the two observation shapes."""
    from hrl.eval import main

    common = ["episodes=1", "video_episodes=0", "progress_bar=false"]
    main([*common, "robot.lidar_max_range=3.0", f"hydra.run.dir={tmp_path / 'short'}"])
    env = json.loads((tmp_path / "short" / "summary.json").read_text())["env"]
    assert env["lidar_max_range"] == 3.0 and env["robot"] == "rover"
    with pytest.raises(SystemExit):
        main([*common, "robot.lidar_rays=12", f"hydra.run.dir={tmp_path / 'few'}"])
    assert "expects observations of shape (42,)" in capsys.readouterr().err


@pytest.mark.parametrize(
    "manifest",
    sorted([*SHIPPED_DIR.glob("*/manifest.yaml"), *ADAPTERS_DIR.glob("*/manifest.yaml")]),
    ids=lambda p: p.parent.name,
)
def test_every_shipped_manifest_is_yaml_naming_its_file(manifest):
    """A manifest is read by people and by tools: it must parse (an unquoted ': ' inside a value once broke one)
    and name the file it describes, which must be beside it."""
    data = yaml.safe_load(manifest.read_text())
    assert isinstance(data, dict) and data["name"] == manifest.parent.name, data
    assert (manifest.parent / data["file"]).is_file(), data["file"]


def test_hrl_eval_passes_on_only_the_env_kwargs_its_command_line_gave():
    """For a policy of another kind (a tabletop skill under the default rover preset), hrl-eval adds the env.kwargs
    the command line named, not the preset's rover arguments; a preset chosen or the whole dict given counts as
    all of them."""
    from hrl.eval import given_env_kwargs

    env = EnvConfig(kwargs={"map": "open", "goal_mode": "reach"})
    assert given_env_kwargs(["policy", "env.backend"], env) == set()
    assert given_env_kwargs(["env.kwargs.goal_mode", "episodes"], env) == {"goal_mode"}
    assert given_env_kwargs(["env", "env.kwargs.goal_mode"], env) == {"map", "goal_mode"}
    assert given_env_kwargs(["env.kwargs"], env) == {"map", "goal_mode"}
