"""No hidden global state: the CLIs' main(argv) leave sys.argv as it was; library train() sets no signal handler
and no torch thread count (so it runs from any thread); hrl-eval refuses overrides its mode would ignore; every
Hydra CLI refuses a config's unset mandatory value (``???``) in one line naming the key."""

import signal
import sys
import threading

import pytest
import torch

from hrl.cli import command_line, overridden_keys
from hrl.training import train
from tests.hrl.test_benchmark import hrl_benchmark
from tests.hrl.test_train import tiny_config


def test_command_line_sets_and_always_restores_sys_argv(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["prog", "--original"])
    with command_line(["a=1", "b=2"]) as args:
        assert sys.argv == ["prog", "a=1", "b=2"] and args == ["a=1", "b=2"]
    assert sys.argv == ["prog", "--original"]
    with pytest.raises(SystemExit), command_line(["x=1"]):
        raise SystemExit(2)
    assert sys.argv == ["prog", "--original"]
    with command_line(None):  # None: the process's own command line
        assert sys.argv == ["prog", "--original"]


@pytest.mark.parametrize(
    ("module", "argv", "code"),
    [
        ("hrl.eval", ["task=maze_long"], 2),  # reaches the task function, which fails: needs a planner
        ("hrl.train", ["algo.lerning_rate=0.1"], 1),  # Hydra's composition fails on the typo
        ("hrl.benchmark", ["hydra/launcher=basic", "~hydra.callbacks.sweep_report", "planner=graph",
                           "task=apartment_long", "backend=gazebo", "seed=0"], 2),
    ],
)  # fmt: skip
def test_cli_main_leaves_sys_argv_unchanged(tmp_path, monkeypatch, module, argv, code):
    import importlib

    main = importlib.import_module(module).main
    monkeypatch.setattr(sys, "argv", ["pytest", "--untouched"])
    dirs = [f"hydra.run.dir={tmp_path / 'run'}", f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    with pytest.raises(SystemExit) as exit_:
        main([*argv, *dirs])
    assert exit_.value.code == code
    assert sys.argv == ["pytest", "--untouched"]


def test_library_train_runs_off_the_main_thread_and_changes_nothing_process_wide(tmp_path):
    """A SIGTERM handler can only be installed from the main thread; train() installed one and failed in any
    other. It also set torch's (process-wide) thread count: both belong to hrl-train now."""
    handler_before, threads_before = signal.getsignal(signal.SIGTERM), torch.get_num_threads()
    config = tiny_config(total_steps=250, torch_threads=threads_before + 1, tensorboard=False)
    config.eval.video_episodes = 0
    results, errors = [], []

    def run() -> None:
        try:
            results.append(train(config, tmp_path / "run"))
        except BaseException as err:  # reported to the main thread below
            errors.append(err)

    worker = threading.Thread(target=run)
    worker.start()
    worker.join(timeout=300)
    assert not worker.is_alive() and not errors, errors
    assert results[0].num_timesteps == 250 and not results[0].interrupted
    assert signal.getsignal(signal.SIGTERM) is handler_before
    assert torch.get_num_threads() == threads_before


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        (["planner=graph", "task=apartment_long", "env.kwargs.map=house"],
         ["env.kwargs.map: the map is the task suite's"]),
        (["planner=graph", "task=apartment_long", "env.kwargs.max_steps=10"], ["task.max_episode_steps=N"]),
        (["planner=graph", "task=apartment_long", "env.kwargs.control_hz=5", "env=apartment_local"],
         ["env.kwargs.control_hz: a suite runs in the policy's own training env", "env: a suite runs"]),
        (["planner=graph", "task=apartment_long", "+robot=rover"], ["robot: the robot is the policy's own"]),
        (["planner=graph", "task=apartment_long", "robot.lidar_rays=12"], ["robot.lidar_rays: the robot is the"]),
        (["planner=graph", "task=apartment_long", "seed=3"], ["seed: use seeds=[...]"]),
        (["planner=graph", "task=apartment_long", "episodes=2"], ["episodes: use tasks=N"]),
        (["seeds=[1,2]"], ["seeds: goal reaching uses seed=N"]),
        (["tasks=2"], ["tasks: goal reaching counts episodes=N"]),
        (["executor.max_replans=0"], ["executor.max_replans: the subgoal executor runs only with planner"]),
    ],
)  # fmt: skip
def test_hrl_eval_refuses_by_name_an_override_its_mode_would_ignore(tmp_path, capsys, overrides, named):
    from hrl.eval import main

    with pytest.raises(SystemExit) as exit_:
        main([*overrides, f"hydra.run.dir={tmp_path / 'run'}"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "these overrides would be ignored" in err
    for text in named:
        assert text in err
    assert not (tmp_path / "run" / "summary.json").exists()


def test_hrl_eval_tasks_beyond_the_suite_is_an_error(tmp_path, capsys):
    from hrl.eval import main

    with pytest.raises(SystemExit):
        main(["planner=graph", "task=apartment_long", "tasks=13", f"hydra.run.dir={tmp_path / 'run'}"])
    assert "tasks=13, but task suite 'apartment_long' has 12 tasks" in capsys.readouterr().err


def test_overridden_keys():
    assert overridden_keys(["+robot=rover", "~hydra.callbacks", "env/wrappers=noise", "env.map=a=b"]) == [
        "robot",
        "hydra.callbacks",
        "env/wrappers",
        "env.map",
    ]


def test_error_messages_list_every_registered_planner_and_suite():
    from hrl.config import EvalRunConfig, PlannerConfig
    from hrl.tasks import TASKS_DIR
    from llm_planner.base import PLANNERS

    with pytest.raises(ValueError, match="needs a planner") as err:
        EvalRunConfig(task={"name": "x"}).validate()
    assert all(name in str(err.value) for name in PLANNERS)
    with pytest.raises(ValueError, match="needs a task suite") as err:
        EvalRunConfig(planner=PlannerConfig()).validate()
    assert all(path.stem in str(err.value) for path in TASKS_DIR.glob("*.yaml"))


def unset_value_error(program: str, key: str) -> str:
    """The line every Hydra CLI prints for a ``???`` left unset (hrl.cli.typed_config)."""
    return f"{program}: error: {key} has no value and this config needs one"


@pytest.mark.parametrize(
    ("module", "argv", "key"),
    [
        ("hrl.eval", ["planner=llm_goals_trained", "task=apartment_multi"], "planner.backend.params.lora_path"),
        # No shipped train, posttrain or deploy config has a ??? (and one in an experiment file merged over a
        # default keeps the default: OmegaConf's merge), so the command line sets one.
        ("hrl.train", ["env.id=???"], "env.id"),
        ("hrl.posttrain", ["max_steps=???"], "max_steps"),
        ("hrl.deploy", ["map=???"], "map"),
    ],
)
def test_cli_refuses_an_unset_mandatory_value_in_one_line_naming_the_key(tmp_path, capsys, module, argv, key):
    import importlib

    program = "hrl-" + module.split(".")[1]
    with pytest.raises(SystemExit) as exit_:
        importlib.import_module(module).main([*argv, f"hydra.run.dir={tmp_path / 'run'}"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert unset_value_error(program, key) in err
    assert f"give it on the command line, {program} ... {key}=<value>" in err
    assert "Traceback" not in err and "MissingMandatoryValue" not in err
    assert len(err.strip().splitlines()) == 1


def test_hrl_benchmark_job_with_an_unset_value_says_so_in_the_launching_process(tmp_path):
    """On the default joblib launcher the job runs in a worker process: its one-line error reaches the
    launching process's stderr (workers share it) and the sweep exits with the job's status."""
    out = hrl_benchmark(
        tmp_path / "sweep", "planner=llm_goals_trained", "task=apartment_long", "backend=mujoco", "seed=0",
        "episodes=1", check=False,
    )  # fmt: skip
    assert out.returncode == 2
    assert unset_value_error("hrl-benchmark", "planner.backend.params.lora_path") in out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "sweep" / "episodes").exists()


def test_launcher_environment_is_read_once_with_clear_errors(monkeypatch):
    """accelerate launch / torchrun say how many processes there are (WORLD_SIZE) and which this one is (RANK);
    without a launcher, one process of index 0. Nonsense in either is refused naming the variable."""
    from hrl.cli import launched_processes, process_rank

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    assert (launched_processes(), process_rank()) == (1, 0)
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "3")
    assert (launched_processes(), process_rank()) == (4, 3)
    monkeypatch.setenv("RANK", "4")
    with pytest.raises(ValueError, match=r"RANK=4 is not one of the 4 processes"):
        process_rank()
    monkeypatch.setenv("RANK", "first")
    with pytest.raises(ValueError, match=r"RANK='first' is not a process index"):
        process_rank()
    monkeypatch.setenv("WORLD_SIZE", "two")
    with pytest.raises(ValueError, match=r"WORLD_SIZE='two' is not a number of processes"):
        launched_processes()
