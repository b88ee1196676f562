"""Task suites (configs/task/) and the hierarchical evaluation (hrl-eval planner=... task=...)."""

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from hierarchy.suites import suite_domain
from hrl.hierarchy_eval import run_suite, wilson
from hrl.policy import GoalPolicy
from hrl.tasks import TASKS_DIR, doors_between, load_suite
from sim.navigation.world import load_world

ROOT = Path(__file__).resolve().parents[2]
#: The navigation suites (the tabletop ones: tests/hierarchy/test_tabletop_suites.py).
SUITES = sorted(p.stem for p in TASKS_DIR.glob("*.yaml") if suite_domain(p) == "navigation")


@pytest.mark.parametrize("name", SUITES)
def test_suites_are_valid_and_long_enough(name):
    suite = load_suite(name)
    world = load_world(suite.map)
    tasks = suite.tasks()
    assert len(tasks) >= 6
    for start, task in tasks:
        start_xy = world.starts[start] if isinstance(start, str) else start
        start_xy = (start_xy.x, start_xy.y) if hasattr(start_xy, "x") else start_xy[:2]
        assert world.is_free(start_xy, 0.2)
        if suite.min_doors_apart:
            goal = world.resolve(task.goals[0]).position
            assert doors_between(world, start_xy, goal) >= suite.min_doors_apart, (start, task.goals)
    assert {"apartment_long", "maze_long", "apartment_multi"} <= set(SUITES)
    if name == "apartment_multi":
        assert all(len(task.goals) >= 3 for _, task in tasks)


def test_unknown_suite_and_bad_goal():
    with pytest.raises(ValueError, match="unknown task suite 'kitchen_tour'; known: apartment_language, apartment_l"):
        load_suite("kitchen_tour")
    suite = load_suite("apartment_long")
    suite.episodes[0].goals = ["jacuzzi"]
    with pytest.raises(ValueError, match="unknown place 'jacuzzi'"):
        suite.tasks()


def test_wilson_interval():
    lo, hi = wilson(9, 10)
    assert 0.55 < lo < 0.6 and hi > 0.98
    assert wilson(0, 10)[0] == 0.0


def test_run_suite_writes_rows_summary_and_plan_video(tmp_path):
    suite = load_suite("apartment_long")
    suite = replace(suite, episodes=suite.episodes[2:4])
    result = run_suite(
        "graph", suite, GoalPolicy.load("shipped:rover_local"), out_dir=tmp_path, video_episode=[1], progress=False
    )
    assert len(result.rows) == 2
    assert set(result.rows[0]) >= {
        "success",
        "steps",
        "path_length",
        "collisions",
        "replans",
        "planner_calls",
        "planner_latency_mean_s",
        "doors",
    }
    for name in ("episodes.csv", "episodes.json", "summary.json", "summary.md", "events.jsonl"):
        assert (tmp_path / name).is_file()
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    kinds = {e["kind"] for e in events}
    assert {"plan", "subgoal_started", "subgoal_reached", "done"} <= kinds
    assert {e["episode"] for e in events} == {0, 1}
    assert json.loads((tmp_path / "summary.json").read_text())["episodes"] == 2
    assert (tmp_path / "graph_apartment_long_ep1.mp4").stat().st_size > 0  # the episodes asked for, only
    assert not (tmp_path / "graph_apartment_long_ep0.mp4").exists()


def test_run_suite_names_the_planner_by_its_label(tmp_path):
    """A config that runs a registered planner under its own name (llm_goals_untrained runs llm_goals) is named
    by that name in the rows, summary and videos."""
    suite = load_suite("apartment_long")
    suite = replace(suite, episodes=suite.episodes[2:3])
    policy = GoalPolicy.load("shipped:rover_local")
    result = run_suite("graph", suite, policy, out_dir=tmp_path, video_episode=[0], progress=False, label="my_graph")
    assert [r["planner"] for r in result.rows] == ["my_graph"] and result.summary["planner"] == "my_graph"
    assert (tmp_path / "my_graph_apartment_long_ep0.mp4").stat().st_size > 0


def test_hrl_eval_hierarchical_cli(tmp_path):
    out = tmp_path / "ev"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "hrl.eval",
            "planner=flat",
            "task=apartment_multi",
            "video_episodes=0",
            "progress_bar=false",
            "executor.max_replans=0",
            f"hydra.run.dir={out}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert "| flat | apartment_multi |" in done.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["planner"] == "flat" and summary["episodes"] == 6


def test_hrl_eval_task_without_planner(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "hrl.eval", "task=maze_long", f"hydra.run.dir={tmp_path / 'x'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2 and "needs a planner" in done.stderr


def test_hrl_eval_rejects_bad_executor_setting(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "hrl.eval",
            "planner=graph",
            "task=maze_long",
            "executor.stuck_window=0",
            f"hydra.run.dir={tmp_path / 'x'}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2 and "executor stuck_window must be >= 1, got 0" in done.stderr


def test_hrl_eval_runs_a_suite_in_the_chosen_backend(tmp_path, monkeypatch):
    """hrl-eval planner=... task=... env.backend=pybullet runs the hierarchy in PyBullet."""
    import hrl.hierarchy_eval as hierarchy_eval
    from hrl.eval import main

    used = []
    original = hierarchy_eval.make_suite_env

    def spy(*args, **kwargs):
        env = original(*args, **kwargs)
        used.append(type(env.unwrapped.physics).__module__)
        return env

    monkeypatch.setattr(hierarchy_eval, "make_suite_env", spy)
    overrides = ["planner=graph", "task=apartment_long", "tasks=1", "video_episodes=0", "progress_bar=false"]
    main([*overrides, "env.backend=pybullet", f"hydra.run.dir={tmp_path / 'pb'}"])
    assert used == ["sim.navigation.pybullet.physics"]
    summary = json.loads((tmp_path / "pb" / "summary.json").read_text())
    assert summary["success_rate"] == 1.0


def test_hrl_eval_runs_a_suite_through_the_sim_to_real_wrappers(tmp_path, monkeypatch):
    """env/wrappers=... applies to the hierarchy too (it was silently ignored): the env the suite runs in
    carries them, and the executor decides on what they let it see. Nominal, the pose it observes is the
    true pose; through noise_latency's odometry drift it is not."""
    import math

    import gymnasium as gym

    import hrl.hierarchy_eval as hierarchy_eval
    from hrl.eval import main

    class ObservedVsTruePose(gym.Wrapper):
        """Records, every step, how far the pose the executor observes is from the simulator's true pose."""

        def __init__(self, env):
            super().__init__(env)
            self.gaps = []

        def step(self, action):
            obs, *rest = self.env.step(action)
            true = self.env.unwrapped.pose
            self.gaps.append(math.hypot(obs["observation"][0] - true.x, obs["observation"][1] - true.y))
            return obs, *rest

    stacks, recorders = [], []
    original = hierarchy_eval.make_suite_env

    def spy(*args, **kwargs):
        env = original(*args, **kwargs)
        stack, e = [], env
        while e is not e.unwrapped:
            stack.append(type(e).__name__)
            e = e.env
        stacks.append(stack)
        recorders.append(ObservedVsTruePose(env))
        return recorders[-1]

    monkeypatch.setattr(hierarchy_eval, "make_suite_env", spy)
    overrides = ["planner=graph", "task=apartment_long", "tasks=1", "video_episodes=0", "progress_bar=false"]
    main([*overrides, f"hydra.run.dir={tmp_path / 'clean'}"])
    main([*overrides, "env/wrappers=noise_latency", f"hydra.run.dir={tmp_path / 'noisy'}"])
    assert "SensorNoise" not in stacks[0]
    assert {"SensorNoise", "ActionLatency"} <= set(stacks[1])
    clean, noisy = recorders
    assert clean.gaps and max(clean.gaps) < 1e-5  # float32 observations of the true pose
    assert noisy.gaps and max(noisy.gaps) > 0.02  # odometry drift: 2 cm per metre over a multi-metre route
