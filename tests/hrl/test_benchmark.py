"""hrl-benchmark: a real (small) sweep on the joblib launcher, resumption, aggregation and the report."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hrl.benchmark import EPISODES_DIR, count_episodes, read_rows, sweep_size
from hrl.benchmark_report import aggregate, bootstrap_ci, write_report

ROOT = Path(__file__).resolve().parents[2]
GRID = ["planner=graph,flat", "task=apartment_long", "backend=mujoco,pybullet", "seed=0", "episodes=2"]


def hrl_benchmark(sweep_dir: Path, *overrides: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hrl.benchmark", f"hydra.sweep.dir={sweep_dir}", *overrides],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        check=check,
    )


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    sweep_dir = tmp_path_factory.mktemp("bench") / "sweep"
    out = hrl_benchmark(sweep_dir, "name=test_sweep", *GRID)
    return sweep_dir, out


def test_sweep_writes_episodes_tables_plots_and_report(sweep):
    sweep_dir, out = sweep
    files = sorted(p.name for p in (sweep_dir / EPISODES_DIR).glob("*.jsonl"))
    assert files == [
        "flat__apartment_long__mujoco__s0.jsonl",
        "flat__apartment_long__pybullet__s0.jsonl",
        "graph__apartment_long__mujoco__s0.jsonl",
        "graph__apartment_long__pybullet__s0.jsonl",
    ]
    for name in ("results.csv", "results.md", "results.json", "report.md"):
        assert (sweep_dir / name).is_file(), name
    for name in ("success_vs_length.png", "latency.png", "trajectories.png"):
        assert (sweep_dir / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    results = {(r["planner"], r["backend"]): r for r in json.loads((sweep_dir / "results.json").read_text())}
    assert set(results) == {("graph", "mujoco"), ("graph", "pybullet"), ("flat", "mujoco"), ("flat", "pybullet")}
    for r in results.values():
        assert r["episodes"] == 2
        lo, hi = r["success_ci95"]
        assert lo <= r["success_rate"] <= hi
        assert r["steps_ci95"][0] <= r["steps"] <= r["steps_ci95"][1]
    assert results[("graph", "mujoco")]["success_rate"] == 1.0  # the graph planner crosses the apartment
    assert results[("graph", "pybullet")]["success_rate"] == 1.0  # ... in both simulators
    assert results[("flat", "mujoco")]["success_rate"] == 0.0  # a straight line through walls does not
    report = (sweep_dir / "report.md").read_text()
    assert "hrl-benchmark name=test_sweep planner=graph,flat" in report  # the exact command to reproduce
    assert "![trajectories](trajectories.png)" in report and "| graph | apartment_long | pybullet | 2 |" in report
    rows = read_rows(sweep_dir / EPISODES_DIR / "graph__apartment_long__pybullet__s0.jsonl")
    assert all(r["backend"] == "pybullet" and len(r["trajectory"]) > 10 for r in rows)
    assert "hrl-benchmark: 100%" in out.stderr  # one progress bar for the whole sweep


def test_every_episode_records_the_conditions_it_ran_under(sweep):
    """Policy (and its file's hash), executor settings, wrappers and the planner's parameters, per episode;
    the report states them."""
    import hashlib

    from hrl.policy import resolve_policy_path

    sweep_dir, _ = sweep
    policy_hash = hashlib.sha256(resolve_policy_path("shipped:rover_local").read_bytes()).hexdigest()
    rows = [r for path in sorted((sweep_dir / EPISODES_DIR).glob("*.jsonl")) for r in read_rows(path)]
    assert len(rows) == 8
    for row in rows:
        conditions = row["conditions"]
        assert conditions["policy"] == "shipped:rover_local" and conditions["policy_sha256"] == policy_hash
        assert conditions["executor"]["max_replans"] == 3 and "max_episode_steps" not in conditions["executor"]
        assert conditions["wrappers"] == [] and isinstance(conditions["planner_params"], dict)
        assert len(conditions["task_sha256"]) == 64
    report = (sweep_dir / "report.md").read_text()
    assert f"Policy: `shipped:rover_local` (sha256 `{policy_hash[:12]}`)" in report and "| graph | `" in report


def test_a_sweep_directory_refuses_episodes_run_under_other_executor_settings(sweep):
    """One more job with other executor settings in the same sweep name would mix conditions silently:
    refused before it runs, naming what differs and the fix."""
    sweep_dir, _ = sweep
    before = {p.name: p.read_text() for p in (sweep_dir / EPISODES_DIR).glob("*.jsonl")}
    cell = ["planner=graph", "task=apartment_long", "backend=mujoco", "seed=1", "episodes=1"]
    mixed = hrl_benchmark(sweep_dir, "name=test_sweep", *cell, "executor.max_replans=0", check=False)
    assert mixed.returncode != 0
    err = mixed.stderr + mixed.stdout
    assert '"max_replans": 3' in err and '"max_replans": 0' in err and "give this condition its own name=" in err
    assert {p.name: p.read_text() for p in (sweep_dir / EPISODES_DIR).glob("*.jsonl")} == before


def test_restarted_sweep_skips_done_episodes_and_redoes_a_cut_one(sweep):
    sweep_dir, _ = sweep
    path = sweep_dir / EPISODES_DIR / "graph__apartment_long__mujoco__s0.jsonl"
    before = {p.name: p.read_text() for p in (sweep_dir / EPISODES_DIR).glob("*.jsonl")}
    again = hrl_benchmark(sweep_dir, "name=test_sweep", *GRID)
    assert again.stdout.count("0 new episode(s)") == 4
    assert {p.name: p.read_text() for p in (sweep_dir / EPISODES_DIR).glob("*.jsonl")} == before
    # A job killed while writing its second episode: the last line is cut short.
    lines = before[path.name].splitlines(keepends=True)
    path.write_text(lines[0] + lines[1][: len(lines[1]) // 2])
    hrl_benchmark(sweep_dir, "name=test_sweep", *GRID)
    rows = read_rows(path)
    assert sorted((r["seed"], r["episode"]) for r in rows) == [(0, 0), (0, 1)]  # redone once, no duplicate
    assert rows[0] == json.loads(lines[0])  # what was there is kept
    cut = json.loads(lines[1])
    assert (rows[1]["trajectory"], rows[1]["steps"]) == (cut["trajectory"], cut["steps"])  # the same episode again
    assert count_episodes(sweep_dir) == 8


def test_sweep_size_counts_the_grid_times_suite_sizes():
    from hydra import compose, initialize_config_dir

    from hrl.benchmark import register_schemas
    from hrl.train import CONFIG_DIR

    register_schemas()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        default = compose("benchmark", return_hydra_config=True)
        small = compose("benchmark", overrides=["episodes=2"], return_hydra_config=True)
    # compose() takes no sweeps; a launch records the command line's overrides here
    small.hydra.overrides.task = GRID
    assert sweep_size(small) == 2 * 2 * 1 * 2
    # the default grid: 6 planners x 2 backends x 3 seeds x (12 apartment_long + 8 maze_long tasks)
    assert sweep_size(default) == 6 * 2 * 3 * (12 + 8)


def test_bootstrap_and_aggregate():
    lo, hi = bootstrap_ci([1.0, 2.0, 3.0, 4.0, 5.0])
    assert lo < 3.0 < hi and lo >= 1.0 and hi <= 5.0
    rows = [
        {"planner": "graph", "suite": "s", "backend": "mujoco", "seed": 0, "episode": i, "success": i < 3,
         "steps": 10 * (i + 1), "path_length": 1.0, "collisions": 0, "replans": 0, "planner_calls": 1,
         "planner_latencies_s": [0.001 * (i + 1)], "planner_tokens": 0}
        for i in range(4)
    ]  # fmt: skip
    (r,) = aggregate(rows)
    assert r["episodes"] == 4 and r["success_rate"] == 0.75 and r["steps"] == 25.0
    assert r["latency_p50_ms"] == pytest.approx(2.5)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["backend=gazebo", "planner=graph", "task=apartment_long", "seed=0"], "backend must be one of"),
        (["seed=-1", "planner=graph", "task=apartment_long", "backend=mujoco"], "seed must be an integer >= 0"),
    ],
)
def test_bad_values_fail_with_the_key(tmp_path, overrides, message):
    out = hrl_benchmark(tmp_path / "bad", "hydra/launcher=basic", *overrides, check=False)
    assert out.returncode != 0
    assert message in out.stderr


def test_report_of_an_empty_directory_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="no episodes in"):
        write_report(tmp_path)
    out = subprocess.run(
        [sys.executable, "-m", "hrl.benchmark_report", str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert out.returncode == 2 and "hrl-benchmark-report: error: no episodes" in out.stderr


def test_a_sweep_runs_through_wrappers_and_never_mixes_conditions(sweep, tmp_path):
    """wrappers=[...] applies to every job (the episode plays out differently from the nominal sweep's), is
    recorded with every episode and in the report, and a sweep directory refuses episodes of another
    condition."""
    nominal_dir, _ = sweep
    noisy_dir = tmp_path / "noisy"
    cell = ["planner=graph", "task=apartment_long", "backend=mujoco", "seed=0", "episodes=1"]
    wrappers = "wrappers=[{name: sensor_noise, lidar_std: 0.03}, {name: action_latency, steps: 2}]"
    hrl_benchmark(noisy_dir, "name=noisy", *cell, wrappers)
    (row,) = read_rows(noisy_dir / EPISODES_DIR / "graph__apartment_long__mujoco__s0.jsonl")
    assert row["wrappers"] == [{"name": "sensor_noise", "lidar_std": 0.03}, {"name": "action_latency", "steps": 2}]
    nominal = read_rows(nominal_dir / EPISODES_DIR / "graph__apartment_long__mujoco__s0.jsonl")[0]
    assert nominal["wrappers"] == [] and (row["seed"], row["episode"]) == (nominal["seed"], nominal["episode"])
    # The same episode (the restart test shows a nominal episode replays exactly) drives another path.
    assert row["trajectory"][0] == nominal["trajectory"][0] and row["trajectory"] != nominal["trajectory"]
    assert "Sim-to-real wrappers: `[{" in (noisy_dir / "report.md").read_text()
    mixed = hrl_benchmark(noisy_dir, "name=noisy", *cell[:-1], "episodes=2", check=False)
    assert mixed.returncode != 0
    assert "give this condition its own name" in mixed.stderr + mixed.stdout
