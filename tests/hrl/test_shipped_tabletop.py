"""The shipped tabletop skill panda_reach, and how scripts/ship_policy.py evaluates a policy that is not the rover's."""

import importlib.util
from pathlib import Path

import pytest
import yaml

from hrl.config import EnvConfig
from hrl.evaluation import evaluate
from hrl.policy import SHIPPED_DIR, GoalPolicy

ROOT = Path(__file__).resolve().parents[2]


def ship_policy_module():
    spec = importlib.util.spec_from_file_location("ship_policy", ROOT / "scripts" / "ship_policy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def panda_reach():
    return GoalPolicy.load("shipped:panda_reach")


@pytest.mark.parametrize("backend", ["mujoco", "pybullet"])
def test_shipped_panda_reach_reaches_goals_in_both_engines(panda_reach, backend):
    """Trained in MuJoCo; on goals it never saw (seeds 777+), in its own env and in PyBullet's."""
    env = panda_reach.make_env(backend=backend)
    assert env.unwrapped.backend == backend
    panda_reach.check_compatible(env.observation_space)
    summary, _ = evaluate(panda_reach, env, episodes=10, seed=777, progress=False)
    env.close()
    assert summary.success_rate >= 0.9, summary.success_rate
    assert summary.mean_final_distance < 0.05  # the env's success threshold


def test_shipped_panda_reach_manifest_records_both_engines():
    manifest = yaml.safe_load((SHIPPED_DIR / "panda_reach" / "manifest.yaml").read_text())
    assert manifest["command"].startswith("hrl-train experiment=panda_reach")
    assert manifest["config"]["env"]["id"] == "hrl/PandaTabletop-v0"
    evaluation = manifest["evaluation"]
    assert list(evaluation) == ["mujoco", "pybullet"]  # its own engine first
    for backend, entry in evaluation.items():
        assert entry["env"]["backend"] == backend and entry["env"]["goal_mode"] == "reach"
        assert entry["episodes"] == 100 and entry["seed"] == 20_000
    assert evaluation["mujoco"]["success_rate"] >= 0.95  # issue 15's target for panda_reach
    assert (SHIPPED_DIR / "panda_reach" / "learning_curve.png").stat().st_size > 0


def test_ship_policy_evaluates_each_env_family_where_it_belongs():
    ship = ship_policy_module()
    rover = ship.evaluation_envs(EnvConfig())
    assert list(rover) == ["open_local_2.5m", "apartment_local_2.5m"]
    assert rover["apartment_local_2.5m"].kwargs["map"] == "apartment"

    trained = EnvConfig(
        id="hrl/PandaTabletop-v0",
        kwargs={"backend": "pybullet", "goal_mode": "push"},
        wrappers=["object_dynamics"],
    )
    tabletop = ship.evaluation_envs(trained)
    assert list(tabletop) == ["pybullet", "mujoco"]  # its own engine first, then the other
    assert tabletop["mujoco"].kwargs == {"goal_mode": "push"} and tabletop["mujoco"].backend == "mujoco"
    assert all(env.wrappers == [] for env in tabletop.values())  # training-time randomization is not evaluated

    foreign = ship.evaluation_envs(EnvConfig(id="PandaReach-v3", packages=["panda_gym"]))
    assert list(foreign) == ["PandaReach-v3"] and foreign["PandaReach-v3"].packages == ["panda_gym"]

    with pytest.raises(ValueError, match=r"env\.backend must be one of mujoco, pybullet, got 'isaac'"):
        ship.evaluation_envs(EnvConfig(id="hrl/PandaTabletop-v0", kwargs={"backend": "isaac"}))


def test_ship_policy_reads_a_run_stopped_early_from_its_metrics(tmp_path):
    (tmp_path / "metrics.csv").write_text(
        "step,wall_time_s,success_rate,mean_return,mean_episode_length,collision_rate,goal_radius\n"
        "5000,150.0,0.2,-40.0,45.0,,\n10000,300.5,0.6,-20.0,30.0,,\n15000,451.3,0.5,-25.0,33.0,,\n"
    )
    figures = ship_policy_module().training_figures(tmp_path, incomplete=True)
    assert figures == {
        "complete_run": False,
        "training_wall_time_s": 451.3,
        "training_total_steps": 15000,
        "best_eval_success_during_training": 0.6,
    }


def test_ship_policy_final_model_needs_a_complete_run_and_its_file(tmp_path):
    import subprocess
    import sys

    script = str(ROOT / "scripts" / "ship_policy.py")
    run = [sys.executable, script, str(tmp_path), "--name", "x", "--model", "final"]
    both = subprocess.run([*run, "--incomplete"], capture_output=True, text=True, timeout=120)
    assert both.returncode != 0 and "--model final needs a complete run" in both.stderr
    missing = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert missing.returncode != 0 and f"{tmp_path / 'final_model.zip'} is missing" in missing.stderr
    assert not (SHIPPED_DIR / "x").exists()  # nothing shipped
