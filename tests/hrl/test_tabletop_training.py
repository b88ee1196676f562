"""hrl-train on the Panda tabletop: the experiment configs compose and validate, and demonstrations from the
env's scripted expert fill the replay buffer of a real training run."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import yaml

from hrl.config import DemoConfig, EvalConfig
from hrl.training import train
from tests.hrl.test_config import compose_train, to_train_config


@pytest.mark.parametrize("skill", ["panda_reach", "panda_push", "panda_pick_place"])
def test_tabletop_experiments_compose_to_the_tabletop_env(skill):
    config = to_train_config(compose_train([f"experiment={skill}"]))
    config.validate()
    kwargs = config.env.make_kwargs(config.robot)
    assert config.env.id == "hrl/PandaTabletop-v0" and config.algo.features == "flat"
    assert kwargs["goal_mode"] == skill.removeprefix("panda_") and "map" not in kwargs
    assert config.env.episode_steps(config.robot) == 50
    assert (config.demos.episodes > 0) == (skill != "panda_reach")


def test_demonstrations_fill_the_replay_buffer(tmp_path):
    config = to_train_config(compose_train(["experiment=panda_pick_place"]))
    config = replace(
        config,
        total_steps=120,
        demos=DemoConfig(episodes=3, noise=0.1),
        eval=EvalConfig(every_steps=1000, episodes=1, video_episodes=0),
        progress_bar=False,
        tensorboard=False,
    )
    config.algo.buffer_size, config.algo.learning_starts, config.algo.net_arch = 2000, 60, [16, 16]
    result = train(config, tmp_path / "run")
    demos = json.loads((tmp_path / "run" / "demos.json").read_text())
    assert demos["episodes"] == 3 and demos["steps"] == 150 and demos["noise"] == 0.1
    assert demos["success"] >= 2 / 3  # the expert picks and places in most episodes
    assert result.num_timesteps == 120  # demonstration steps are not training steps
    # hrl-eval's default env is the rover's: a tabletop policy is evaluated on its own env, with env.kwargs
    # (here the other engine) on top.
    from hrl.config import EnvConfig, EvalRunConfig
    from hrl.eval import run_evaluation

    doc = run_evaluation(
        EvalRunConfig(
            policy=str(tmp_path / "run"),
            env=EnvConfig(kwargs={"backend": "pybullet"}),
            episodes=2,
            video_episodes=0,
            progress_bar=False,
        ),
        tmp_path / "eval",
    )
    assert doc["env_id"] == "hrl/PandaTabletop-v0" and doc["env"]["backend"] == "pybullet"
    assert doc["env"]["goal_mode"] == "pick_place" and doc["episodes"] == 2
    # hrl-eval policy=<run> env.backend=pybullet: the default preset's kwargs (the rover's map, ...) are not the
    # command line's, so they stay out; env.backend goes over the engine the policy's kwargs name.
    trained = yaml.safe_load((tmp_path / "run" / "final_model.policy.yaml").read_text())["env"]
    trained["kwargs"]["backend"] = "mujoco"
    (tmp_path / "run" / "final_model.policy.yaml").write_text(yaml.safe_dump({**yaml.safe_load(
        (tmp_path / "run" / "final_model.policy.yaml").read_text()), "env": trained}))  # fmt: skip
    rover_preset = EnvConfig(kwargs={"map": "open", "goal_mode": "local"}, backend="pybullet")
    doc = run_evaluation(
        EvalRunConfig(policy=str(tmp_path / "run" / "final_model.zip"), env=rover_preset, episodes=1,
                      video_episodes=0, progress_bar=False),
        tmp_path / "eval2",
        given_kwargs=set(),
    )  # fmt: skip
    assert doc["env"]["backend"] == "pybullet" and "map" not in doc["env"]


def test_demonstrations_need_an_expert_and_a_replay_buffer(tmp_path):
    rover = to_train_config(compose_train(["total_steps=200", "algo.learning_starts=101"]))
    rover = replace(rover, demos=DemoConfig(episodes=1), progress_bar=False, tensorboard=False)
    with pytest.raises(ValueError, match="scripted expert"):
        train(rover, tmp_path / "rover")
    ppo = to_train_config(compose_train(["experiment=panda_reach", "algo=ppo", "demos.episodes=2"]))
    with pytest.raises(ValueError, match=r"demos\.episodes fill a replay buffer"):
        ppo.validate()
    with pytest.raises(ValueError, match=r"demos\.episodes must be"):
        DemoConfig(episodes=-1).validate()
