"""hrl-train end to end on tiny budgets: outputs, safety of run directories, kill + resume."""

import csv
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from hrl.checkpoint import capture_rng, latest_checkpoint, read_state, restore_rng
from hrl.config import AlgoConfig, CheckpointConfig, EnvConfig, EvalConfig, TrainConfig
from hrl.training import RunDirectoryError, make_training_env, train

ROOT = Path(__file__).resolve().parents[2]

TINY = [
    "total_steps=900",
    "checkpoint.every_steps=300",
    "eval.every_steps=300",
    "eval.episodes=3",
    "eval.video_episodes=0",
    "algo.learning_starts=150",
    "env.kwargs.max_steps=50",
    "algo.net_arch=[16]",
    "algo.batch_size=32",
    "progress_bar=false",
    "tensorboard=false",
]


def tiny_config(**changes) -> TrainConfig:
    config = TrainConfig(
        env=EnvConfig(kwargs={"max_steps": 50, "local_goal_radius": 1.5}),
        algo=AlgoConfig(learning_starts=150, net_arch=[16], batch_size=32),
        eval=EvalConfig(every_steps=200, episodes=3, video_episodes=1),
        checkpoint=CheckpointConfig(every_steps=200, keep=2),
        total_steps=600,
        progress_bar=False,
    )
    for key, value in changes.items():
        setattr(config, key, value)
    return config


def metrics_steps(run_dir: Path) -> list[int]:
    with open(run_dir / "metrics.csv") as f:
        return [int(r["step"]) for r in csv.DictReader(f)]


def test_train_writes_run_directory(tmp_path):
    run = tmp_path / "run"
    result = train(tiny_config(), run)
    assert result.num_timesteps == 600 and not result.interrupted
    for name in (
        "metrics.csv",
        "best_model.zip",
        "best_model.policy.yaml",
        "final_model.zip",
        "final_model.policy.yaml",
        "learning_curve.png",
        "eval.mp4",
        "summary.json",
    ):
        assert (run / name).is_file(), name
    assert list((run / "tensorboard").rglob("events.out.tfevents.*"))
    steps = metrics_steps(run)
    assert steps[0] <= 1 and steps[-1] == 600 and steps == sorted(set(steps))
    ckpt = latest_checkpoint(run)
    assert ckpt is not None and ckpt.name == "step_0000600"
    assert {p.name for p in ckpt.iterdir()} == {"model.zip", "replay_buffer.pkl", "rng.pkl", "state.json"}
    assert len(list((run / "checkpoints").glob("step_*"))) == 2  # keep=2
    assert json.loads((run / "summary.json").read_text())["num_timesteps"] == 600


def test_existing_run_is_never_overwritten(tmp_path):
    run = tmp_path / "run"
    train(tiny_config(total_steps=250, eval=EvalConfig(every_steps=200, episodes=2, video_episodes=0)), run)
    before = {p: p.stat().st_mtime_ns for p in run.rglob("*") if p.is_file()}
    with pytest.raises(RunDirectoryError, match="already holds a training run"):
        train(tiny_config(), run)
    assert before == {p: p.stat().st_mtime_ns for p in run.rglob("*") if p.is_file()}


def test_a_resume_set_in_the_config_is_refused_not_ignored():
    tiny_config().validate()  # null, as every saved run has it
    with pytest.raises(ValueError, match=r"resume='runs/x' is not a config setting.*hrl-train resume=<run dir>"):
        tiny_config(resume="runs/x").validate()


def test_resume_needs_a_checkpoint(tmp_path):
    with pytest.raises(RunDirectoryError, match="has no checkpoint"):
        train(tiny_config(), tmp_path, resume=True)


def test_resume_rejects_incompatible_checkpoint(tmp_path):
    run = tmp_path / "run"
    train(tiny_config(total_steps=250, eval=EvalConfig(every_steps=200, episodes=2, video_episodes=0)), run)
    before = {p: p.stat().st_mtime_ns for p in run.rglob("*") if p.is_file()}
    other = tiny_config(total_steps=400)
    other.algo.net_arch = [32, 32]
    with pytest.raises(RunDirectoryError, match="different env, robot or algorithm config"):
        train(other, run, resume=True)
    assert before == {p: p.stat().st_mtime_ns for p in run.rglob("*") if p.is_file()}


def test_rng_state_roundtrip():
    venv = make_training_env(tiny_config(), seed=3)
    states = capture_rng(venv)
    first = [np.random.rand(), venv.get_attr("np_random")[0].random()]
    restore_rng(venv, states)
    assert [np.random.rand(), venv.get_attr("np_random")[0].random()] == first
    venv.close()


def start_training(run: Path, extra=()) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "hrl.train", *TINY, *extra, f"hydra.run.dir={run}"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_for_checkpoint(run: Path, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not (run / "checkpoints" / "latest").exists():
        if proc.poll() is not None:
            raise AssertionError(f"training ended before its first checkpoint:\n{proc.stdout.read()}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("no checkpoint within the timeout")
        time.sleep(0.05)


def resume_to_end(run: Path, *overrides: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "hrl.train", f"resume={run}", *overrides],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_interrupted_run_resumes_to_the_configured_total(tmp_path, sig):
    """Killed (SIGKILL) or stopped (SIGTERM) after its first checkpoint, a run resumes from its latest
    checkpoint to the total configured at resume. Deterministic: the signal is sent once a checkpoint
    exists, and the first run's total (10^6 steps) cannot be reached before it arrives, however loaded
    the machine; the resumed total is set relative to where the run stopped."""
    run = tmp_path / "run"
    proc = start_training(run, ["total_steps=1000000", "algo.buffer_size=2000"])
    wait_for_checkpoint(run, proc)
    proc.send_signal(sig)
    out = proc.communicate(timeout=120)[0]
    if sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
    else:  # stopped like Ctrl-C: a checkpoint where it stopped, the command to continue, exit status 130
        assert proc.returncode == 130, out
        assert "interrupted at step" in out and f"resume={run}" in out
    stopped_at = read_state(latest_checkpoint(run))["num_timesteps"]
    assert stopped_at >= 300, out  # at least the first periodic checkpoint
    total = stopped_at + 300
    out = resume_to_end(run, f"total_steps={total}")
    assert f"resuming {run} from step_{stopped_at:07d}" in out
    summary = json.loads((run / "summary.json").read_text())
    assert summary["num_timesteps"] == total
    steps = metrics_steps(run)
    assert steps == sorted(set(steps)) and steps[-1] == total  # no duplicated or lost evaluation rows
    assert read_state(latest_checkpoint(run))["num_timesteps"] == total
    info = json.loads((run / "run_info.json").read_text())
    assert [entry["resumed"] for entry in info] == [False, True]
    assert info[1]["command"] == f"hrl-train resume={run} total_steps={total}"


def test_cli_refuses_existing_run_dir_and_bad_resume(tmp_path):
    run = tmp_path / "run"
    train(tiny_config(total_steps=250, eval=EvalConfig(every_steps=200, episodes=2, video_episodes=0)), run)
    done = subprocess.run(
        [sys.executable, "-m", "hrl.train", *TINY, f"hydra.run.dir={run}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "already holds a training run" in done.stderr
    done = subprocess.run(
        [sys.executable, "-m", "hrl.train", f"resume={tmp_path / 'nothing'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "no such directory" in done.stderr
    done = subprocess.run(
        [sys.executable, "-m", "hrl.train", f"resume={run}", "algo.learning_rate=0.1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "only ['total_steps'] may be overridden" in done.stderr


def test_cli_typo_fails_before_training(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "hrl.train", "algo.lerning_rate=0.1", f"hydra.run.dir={tmp_path / 'r'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0 and "lerning_rate" in done.stderr
    assert not (tmp_path / "r" / "metrics.csv").exists()


def test_curriculum_grows_goal_radius():
    from hrl.callbacks import GoalCurriculum, RunState
    from hrl.config import CurriculumConfig
    from hrl.training import build_model

    config = tiny_config()
    venv = make_training_env(config, seed=0)
    model = build_model(config, venv, tensorboard_log=None)
    state = RunState()
    callback = GoalCurriculum(
        CurriculumConfig(enabled=True, start_radius=0.6, growth=2.0, threshold=0.8, window=5), state, final_radius=1.5
    )
    from collections import deque

    from stable_baselines3.common.logger import Logger

    model.ep_success_buffer = deque(maxlen=100)  # as SB3's learn() sets them up
    model.set_logger(Logger(folder=None, output_formats=[]))  # configure(None, ...) would make a /tmp dir
    callback.init_callback(model)
    callback.on_training_start({}, {})
    assert venv.env_method("get_wrapper_attr", "task")[0].config.local_goal_radius == 0.6
    model.ep_success_buffer.extend([1.0, 1.0, 0.0, 1.0])
    callback.on_step()
    assert state.goal_radius == 0.6  # not enough episodes yet
    model.ep_success_buffer.extend([1.0, 1.0])
    callback.on_step()
    assert state.goal_radius == 1.2
    assert venv.env_method("get_wrapper_attr", "task")[0].config.local_goal_radius == 1.2
    model.ep_success_buffer.extend([1.0] * 5)
    callback.on_step()
    assert state.goal_radius == 1.5  # capped at the configured radius
    venv.close()


def run_sweep(sweep: Path, *launcher: str) -> list[Path]:
    """A real two-seed multirun through a Hydra launcher; the summaries of its runs."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "hrl.train",
            "-m",
            "seed=0,1",
            *launcher,
            *[o for o in TINY if not o.startswith("total_steps")],
            "total_steps=300",
            f"hydra.sweep.dir={sweep}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summaries = sorted(sweep.glob("*/summary.json"))
    seeds = {yaml.safe_load((s.parent / "final_model.policy.yaml").read_text())["seed"] for s in summaries}
    assert len(summaries) == 2 and seeds == {0, 1}
    return summaries


def test_joblib_multirun_trains_each_job(tmp_path):
    """A real local parallel sweep through Hydra's joblib launcher plugin: one run directory per job."""
    run_sweep(tmp_path / "sweep", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2")


def test_ray_multirun_in_local_mode(tmp_path):
    """The Ray launcher preset in local mode (runs where the `cluster` extra is installed)."""
    pytest.importorskip("hydra_plugins.hydra_ray_launcher")
    run_sweep(tmp_path / "sweep", "hydra/launcher=ray")


def test_training_without_tensorboard_leaves_nothing_in_tmp(tmp_path, monkeypatch):
    """SB3's default logger makes a folder in the temporary directory; this test gives the run a temporary
    directory of its own (other processes write to the shared one) and checks no SB3 folder appears there."""
    import tempfile

    isolated = tmp_path / "tmp"
    isolated.mkdir()
    monkeypatch.delenv("SB3_LOGDIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(isolated))
    monkeypatch.setattr(tempfile, "tempdir", str(isolated))
    result = train(tiny_config(tensorboard=False, total_steps=300), tmp_path / "run")
    assert result.num_timesteps == 300
    assert list(isolated.glob("SB3-*")) == []
    assert (tmp_path / "run" / "metrics.csv").is_file()


def old_layout(env: dict) -> dict:
    """An env config as runs saved it before 2026-12-08: the rover's arguments as fields, backend always set."""
    kwargs = env.get("kwargs") or {}
    legacy = {"map": "open", "backend": env.get("backend") or "mujoco", "goal_mode": "local"} | {
        "local_goal_radius": 2.0, "success_radius": 0.25, "control_hz": 10.0, "physics_dt": 0.01, "max_steps": 100,
        "reward_type": "sparse", "collision_penalty": 0.0,
    }  # fmt: skip
    return {"id": env["id"], **(legacy | kwargs), "wrappers": env.get("wrappers", [])}


def test_a_run_saved_in_the_old_env_layout_resumes_and_its_policy_loads(tmp_path):
    """Runs and policies saved while the rover's arguments were EnvConfig fields (map, goal_mode, max_steps, ...)
    still resume and load: their .hydra/config.yaml, checkpoint fingerprint and .policy.yaml are read in the
    current layout (hrl.config.migrate_env_dict), with the same values."""
    import yaml

    from hrl.policy import GoalPolicy

    run = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "hrl.train", *TINY[1:], "total_steps=300", "env.kwargs.map=two_rooms",
         f"hydra.run.dir={run}"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    saved = run / ".hydra" / "config.yaml"
    config = yaml.safe_load(saved.read_text())
    assert config["env"]["kwargs"]["map"] == "two_rooms" and "map" not in config["env"]
    config["env"] = old_layout(config["env"])
    saved.write_text(yaml.safe_dump(config))
    state_path = latest_checkpoint(run) / "state.json"
    state = json.loads(state_path.read_text())
    state["fingerprint"]["env"] = old_layout(state["fingerprint"]["env"])
    state_path.write_text(json.dumps(state))
    sidecar = run / "final_model.policy.yaml"
    meta = yaml.safe_load(sidecar.read_text())
    meta["env"] = old_layout(meta["env"])
    assert meta["env"]["map"] == "two_rooms" and meta["env"]["max_steps"] == 50
    sidecar.write_text(yaml.safe_dump(meta))

    out = resume_to_end(run, "total_steps=600")
    assert "resuming" in out and json.loads((run / "summary.json").read_text())["num_timesteps"] == 600
    policy = GoalPolicy.load(run / "best_model.zip")  # written by the resumed run: the current layout
    assert policy.env_config.kwargs["map"] == "two_rooms"
    sidecar.write_text(yaml.safe_dump(meta))  # the old layout again (the resumed run rewrote it)
    policy = GoalPolicy.load(run / "final_model.zip")
    assert policy.env_config.kwargs["map"] == "two_rooms" and policy.env_config.kwargs["max_steps"] == 50
    assert policy.env_config.backend == "mujoco" and policy.env_config.episode_steps(policy.robot_config) == 50
    env = policy.make_env()
    assert env.unwrapped.world.name == "two_rooms"
    env.close()


def test_old_layouts_of_other_envs_drop_the_rover_fields_they_never_got():
    from hrl.config import migrate_env_dict

    tabletop = {"id": "hrl/PandaTabletop-v0", "packages": [], "kwargs": {"goal_mode": "push", "backend": "pybullet"},
                "map": "open", "backend": "mujoco", "goal_mode": "local", "max_steps": 100, "wrappers": []}  # fmt: skip
    assert migrate_env_dict(tabletop) == {
        "id": "hrl/PandaTabletop-v0", "packages": [], "kwargs": {"goal_mode": "push", "backend": "pybullet"},
        "wrappers": [],
    }  # fmt: skip
    foreign = {"id": "PandaReach-v3", "packages": ["panda_gym"], "map": "open", "backend": "mujoco"}
    assert migrate_env_dict(foreign) == {"id": "PandaReach-v3", "packages": ["panda_gym"]}
    rover = {"id": "hrl/RoverNav-v0", "map": "maze", "max_steps": 80, "kwargs": {"max_steps": 7}, "backend": "pybullet"}
    assert migrate_env_dict(rover) == {
        "id": "hrl/RoverNav-v0", "kwargs": {"map": "maze", "max_steps": 7}, "backend": "pybullet"
    }  # fmt: skip
    current = {"id": "hrl/RoverNav-v0", "kwargs": {"map": "maze"}, "backend": None}
    assert migrate_env_dict(current) == current
