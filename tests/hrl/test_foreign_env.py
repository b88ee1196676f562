"""hrl-train on any registered Gymnasium goal env (panda-gym's PandaReach-v3, the `panda` extra): env.packages,
env.kwargs, and the rover's options kept to the rover's envs."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from hrl.cli import CONFIG_DIR
from hrl.config import (
    ENV_FAMILIES,
    AlgoConfig,
    CurriculumConfig,
    EnvConfig,
    EnvFamily,
    EvalRunConfig,
    RobotConfig,
    TrainConfig,
    register_env_family,
)
from hrl.evaluation import evaluate
from hrl.policy import GoalPolicy

ROOT = Path(__file__).resolve().parents[2]
REACH = ["env.id=PandaReach-v3", "env.packages=[panda_gym]", "algo.features=flat"]
TINY = [
    "total_steps=300",
    "algo.learning_starts=100",
    "algo.net_arch=[16]",
    "algo.batch_size=32",
    "eval.every_steps=150",
    "eval.episodes=2",
    "eval.video_episodes=1",
    "checkpoint.every_steps=150",
    "progress_bar=false",
    "tensorboard=false",
]


def reach(**changes) -> EnvConfig:
    return EnvConfig(id="PandaReach-v3", packages=["panda_gym"], **changes)


def hrl_train(*overrides: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hrl.train", *overrides], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def test_hrl_train_on_panda_reach_leaves_a_policy_whose_manifest_rebuilds_the_env(tmp_path):
    run = tmp_path / "run"
    done = hrl_train(*REACH, "env.kwargs={control_type:ee}", *TINY, f"hydra.run.dir={run}")
    assert done.returncode == 0, done.stdout + done.stderr
    sidecar = yaml.safe_load((run / "final_model.policy.yaml").read_text())
    assert "robot" not in sidecar  # the rover's robot config (name, lidar) is not recorded for an env that reads none
    manifest = sidecar["env"]
    assert manifest["id"] == "PandaReach-v3" and manifest["packages"] == ["panda_gym"]
    assert manifest["kwargs"] == {"control_type": "ee"}
    summary = json.loads((run / "summary.json").read_text())
    assert summary["num_timesteps"] == 300 and summary["video"] == "eval.mp4: 1 episodes at 25 fps"
    assert (run / "eval.mp4").stat().st_size > 0
    with open(run / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["step"]) for r in rows] == [1, 150, 300]
    assert {r["collision_rate"] for r in rows} == {""}  # PandaReach reports no collisions: none are invented

    policy = GoalPolicy.load(run / "final_model.zip")
    env = policy.make_env()  # from the manifest alone: imports panda_gym, makes PandaReach-v3
    assert env.spec.id == "PandaReach-v3"
    policy.check_compatible(env.observation_space)
    result, _ = evaluate(policy, env, episodes=2, seed=5, progress=False)
    assert result.episodes == 2 and result.collisions is None
    assert all(0 < r.steps <= 50 and np.isfinite(r.final_distance) for r in result.per_episode)
    env.close()


def test_hrl_eval_evaluates_a_foreign_policy_on_its_own_env(tmp_path):
    from hrl.eval import run_evaluation
    from hrl.training import train

    config = TrainConfig(
        env=reach(),
        algo=AlgoConfig(features="flat", learning_starts=60, net_arch=[8], batch_size=16),
        total_steps=120,
        progress_bar=False,
        tensorboard=False,
    )
    config.eval.every_steps, config.eval.episodes, config.eval.video_episodes = 120, 1, 0
    train(config, tmp_path / "run")
    # The eval config's env is the rover's default: the policy's manifest decides, env.kwargs are added.
    doc = run_evaluation(
        EvalRunConfig(
            policy=str(tmp_path / "run"),
            env=EnvConfig(kwargs={"reward_type": "dense"}),
            episodes=2,
            video_episodes=0,
            progress_bar=False,
        ),
        tmp_path / "eval",
    )
    assert doc["env_id"] == "PandaReach-v3" and doc["env"] == {"reward_type": "dense"}
    assert doc["episodes"] == 2 and doc["collisions"] is None and doc["collision_free_rate"] is None
    assert json.loads((tmp_path / "eval" / "summary.json").read_text())["env_id"] == "PandaReach-v3"


def test_missing_package_names_the_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "panda_gym", None)  # as if panda-gym were not installed
    with pytest.raises(ValueError, match=r"cannot import 'panda_gym'.*pip install 'hrl-stack\[panda\]'"):
        reach().validate()
    with pytest.raises(ValueError, match=r"cannot import 'no_such_gym_package'.*install the distribution"):
        EnvConfig(id="PandaReach-v3", packages=["no_such_gym_package"]).validate()


def test_cli_missing_package_is_a_one_line_error(tmp_path):
    done = hrl_train("env.id=NoSuch-v0", "env.packages=[no_such_gym_package]", f"hydra.run.dir={tmp_path / 'r'}")
    assert done.returncode == 2
    assert "hrl-train: error: env.packages: cannot import 'no_such_gym_package'" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "r" / "metrics.csv").exists()


def test_unregistered_id_names_env_packages():
    with pytest.raises(ValueError, match=r"env.id='NoSuchGoalEnv-v0' is not a registered Gymnasium env.*env.packages"):
        EnvConfig(id="NoSuchGoalEnv-v0").validate()


def test_rover_options_are_not_passed_to_foreign_envs():
    """Neither the robot's lidar overrides nor a rover preset's kwargs reach a foreign env: env.id=... on the
    command line starts from the empty preset env=gym (PandaReachEnv takes no map or lidar argument: gym.make
    would raise TypeError)."""
    from hrl.train import open_env_kwargs

    assert open_env_kwargs(["env.id=PandaReach-v3", "env.kwargs.reward_type=dense"]) == [
        "env=gym",
        "env.id=PandaReach-v3",
        "++env.kwargs.reward_type=dense",
    ]
    assert open_env_kwargs(["env=open_local", "env.id=hrl/RoverNav-v0"]) == ["env=open_local", "env.id=hrl/RoverNav-v0"]
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = compose(config_name="config", overrides=open_env_kwargs([*REACH, "env.kwargs.reward_type=dense"]))
    config = OmegaConf.to_object(cfg).env
    assert config.kwargs == {"reward_type": "dense"} and config.backend is None
    robot = RobotConfig(lidar_rays=8)
    assert config.make_kwargs(robot) == {"reward_type": "dense"}
    env = config.make_env(robot)
    env.reset(seed=0)
    _, reward, *_ = env.step(env.action_space.sample())
    assert reward < 0 and reward != -1.0  # dense: minus the distance, not the sparse -1/0
    assert config.episode_steps(robot) == 50  # its TimeLimit, not the rover's max_steps
    env.close()


def test_the_rovers_max_steps_argument_is_its_episode_length():
    assert EnvConfig().episode_steps(RobotConfig()) == 100  # RoverNavEnv's default
    config = EnvConfig(kwargs={"max_steps": 7})
    assert config.make_kwargs(RobotConfig())["max_steps"] == 7 and config.episode_steps(RobotConfig()) == 7
    env = config.make_env(RobotConfig(), local_goal_radius=1.0)
    env.reset(seed=0)
    steps = 1
    while not any(env.step(np.zeros(2))[2:4]):
        steps += 1
    assert steps == 7
    env.close()


def test_cli_refuses_rover_keys_for_a_foreign_env(tmp_path):
    done = hrl_train(*REACH, "env.backend=pybullet", "robot.lidar_rays=8", f"hydra.run.dir={tmp_path / 'r'}")
    assert done.returncode == 2
    assert "env.backend, robot.lidar_rays: env.id=PandaReach-v3 does not read them" in done.stderr
    assert "env.kwargs={name:value,...}" in done.stderr


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"algo": AlgoConfig(features="goal_frame")},
            r"algo.features=goal_frame reads the observation layout of hrl/RoverNav-\*.*flat",
        ),
        (
            {"curriculum": CurriculumConfig(enabled=True)},
            "curriculum grows the local goal radius of .*PandaReach-v3 has none",
        ),
        ({"algo": AlgoConfig(features="flat", learning_starts=50)}, r"episode length of PandaReach-v3 \(50\)"),
        ({"env": reach(wrappers=["action_latency"])}, "env.wrappers is an argument of"),
        ({"env": reach(backend="pybullet")}, r"env.backend is an argument of hrl/RoverNav-\* \| hrl/PandaTabletop-\*"),
    ],
)
def test_rover_only_training_options_are_refused_for_a_foreign_env(changes, message):
    config = TrainConfig(env=reach(), algo=AlgoConfig(features="flat"))
    for key, value in changes.items():
        setattr(config, key, value)
    with pytest.raises(ValueError, match=message):
        config.validate()


def test_her_episode_length_follows_env_kwargs_max_episode_steps():
    config = TrainConfig(
        env=reach(kwargs={"max_episode_steps": 20}), algo=AlgoConfig(features="flat", learning_starts=40)
    )
    config.validate()
    assert config.env.episode_steps(config.robot) == 20


def test_goal_frame_extractor_refuses_another_envs_observation():
    from hrl.features import GoalFrameExtractor

    env = reach().make_env(RobotConfig())
    with pytest.raises(ValueError, match=r"goal_frame reads the rover's observation.*goal \(3,\).*algo.features=flat"):
        GoalFrameExtractor(env.observation_space)
    env.close()


def test_a_registered_env_family_gets_its_own_arguments_only():
    """The hook an env of ours uses (hrl/PandaTabletop-v0 may): a family with its own arguments and episode
    length; the rover's fields do not reach it."""
    gym.register("hrl_test/FamilyReach-v0", entry_point="panda_gym.envs:PandaReachEnv")  # no TimeLimit
    family = EnvFamily(
        pattern="hrl_test/FamilyReach-*",
        arguments=lambda env, robot: {"reward_type": "dense"},
        episode_steps=lambda kwargs: 30,
        episode_steps_key="its fixed episode length",
    )
    register_env_family(family)
    try:
        import panda_gym  # noqa: F401  (the entry point's module)

        config = EnvConfig(id="hrl_test/FamilyReach-v0", kwargs={"control_type": "ee"})
        assert config.family() is family
        assert config.make_kwargs(RobotConfig(lidar_rays=8)) == {"reward_type": "dense", "control_type": "ee"}
        with pytest.raises(ValueError, match=r"must exceed its fixed episode length \(30\)"):
            TrainConfig(env=config, algo=AlgoConfig(features="flat", learning_starts=30)).validate()
        config.make_env(RobotConfig()).close()
    finally:
        ENV_FAMILIES.remove(family)
        gym.registry.pop("hrl_test/FamilyReach-v0")


def test_tabletop_gets_env_kwargs_and_truncates_at_its_own_max_steps():
    """hrl/PandaTabletop-v0 (ours, not the rover's): its arguments are env.kwargs, its episode length for HER
    is its max_steps argument (or that argument's default), the rover's fields never reach it."""
    config = EnvConfig(id="hrl/PandaTabletop-v0", kwargs={"goal_mode": "reach", "max_steps": 30})
    assert config.make_kwargs(RobotConfig(lidar_rays=8)) == {"goal_mode": "reach", "max_steps": 30}
    assert config.episode_steps(RobotConfig()) == 30
    env = config.make_env(RobotConfig())
    env.reset(seed=0)
    steps = 1
    while not any(env.step(np.zeros(env.action_space.shape, np.float32))[2:4]):
        steps += 1
    assert steps == 30
    env.close()
    default = EnvConfig(id="hrl/PandaTabletop-v0")
    with pytest.raises(ValueError, match=r"must exceed env.kwargs.max_steps \(50\)"):
        TrainConfig(env=default, algo=AlgoConfig(features="flat", learning_starts=50)).validate()


def test_env_backend_reaches_both_embodiments_and_disagreeing_with_kwargs_is_refused():
    """env.backend is the one field both our families read; left unset the env's own default holds."""
    tabletop = EnvConfig(id="hrl/PandaTabletop-v0", backend="pybullet", kwargs={"goal_mode": "reach"})
    assert tabletop.make_kwargs(RobotConfig())["backend"] == "pybullet" and tabletop.engine() == "pybullet"
    assert EnvConfig(id="hrl/PandaTabletop-v0").engine() == "mujoco"  # PandaTabletopEnv's default
    rover = EnvConfig(backend="pybullet", kwargs={"map": "maze"})
    assert rover.make_kwargs(RobotConfig()) == {"robot": "rover", "backend": "pybullet", "map": "maze"}
    with pytest.raises(ValueError, match=r"env\.backend=pybullet and env\.kwargs\.backend=mujoco disagree"):
        EnvConfig(id="hrl/PandaTabletop-v0", backend="pybullet", kwargs={"backend": "mujoco"}).validate()
    EnvConfig(id="hrl/PandaTabletop-v0", backend="pybullet", kwargs={"backend": "pybullet"}).validate()
    with pytest.raises(ValueError, match=r"env.kwargs: secne \(did you mean scene\?\) not an argument of"):
        EnvConfig(id="hrl/PandaTabletop-v0", kwargs={"secne": "single_cube"}).validate()


def test_features_auto_is_the_envs_own():
    """algo.features=auto (the default): goal_frame for the rover, flat for the tabletop and any other env; validate
    resolves it, so the run's policy records the name it trained with."""
    tabletop = EnvConfig(id="hrl/PandaTabletop-v0")
    for env, features in ((EnvConfig(), "goal_frame"), (tabletop, "flat"), (reach(), "flat")):
        config = TrainConfig(env=env, algo=AlgoConfig(learning_starts=200))
        assert config.algo.features == "auto"
        config.validate()
        assert config.algo.features == features
