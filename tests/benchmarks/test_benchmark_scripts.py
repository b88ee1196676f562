"""The benchmark scripts keep working (figures are measured by running them, not asserted here)."""

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from benchmarks import env_throughput, ros_loop, soak
from benchmarks._common import record

ROOT = Path(__file__).resolve().parents[2]


def run_benchmark(name: str, *args: str, timeout: int) -> dict:
    """Run benchmarks/<name>.py as a user would; its last line of output is one JSON object."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / f"{name}.py"), *args],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        timeout=timeout,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_env_throughput_same_workload():
    res = env_throughput.single_env("two_rooms", n=20, rounds=2)
    assert res["env_step"] > 0 and res["raw_physics"] > 0 and res["raw_mj_step"] > 0
    assert res["substeps"] == 10 and res["lidar_rays"] == 36


def test_pybullet_throughput_replays_the_same_trajectory():
    """The raw stepSimulation reference replays the env's recorded joint forces (it raises if they diverge)."""
    res = env_throughput.pybullet_env("two_rooms", n=20, rounds=2)
    assert res["env_step"] > 0 and res["raw_step_simulation"] > 0
    assert res["substeps"] == 10 and res["lidar_rays"] == 36


def test_env_throughput_cli_prints_json_last(tmp_path):
    figures = run_benchmark("env_throughput", "--quick", "--no-record", "--maps", "open", timeout=300)
    assert set(figures) >= {"open", "dummy_vec_env_steps_per_s", "subproc_vec_env_steps_per_s", "target_met"}
    assert figures["open"]["ratio_vs_raw_physics"] > 0
    assert figures["pybullet"]["open"]["ratio_vs_raw_step_simulation"] > 0
    tabletop = figures["tabletop"]
    assert tabletop["mujoco"]["ratio_vs_raw_physics"] > 0 and tabletop["pybullet"]["ratio_vs_raw_physics"] > 0
    assert "ours_pybullet_vs_panda_gym" in tabletop["versus_panda_gym"] or "skipped" in tabletop["versus_panda_gym"]


def test_env_throughput_runs_one_suite_alone():
    figures = run_benchmark("env_throughput", "--quick", "--no-record", "--suites", "tabletop", timeout=300)
    assert set(figures) == {"quick", "tabletop"}  # nothing of the rover's


@pytest.mark.parametrize("backend", ["mujoco", "pybullet"])
def test_tabletop_throughput_replays_the_same_trajectory(backend):
    """The raw reference replays the joint targets the env commanded (it raises if the copies diverge)."""
    res = env_throughput.tabletop_env(backend, n=10, rounds=2)
    assert res["env_step"] > 0 and res["raw_physics"] > 0
    assert res["substeps"] == 20


def test_tabletop_versus_panda_gym():
    pytest.importorskip("panda_gym")
    res = env_throughput.versus_panda_gym(["mujoco", "pybullet"], n=5, rounds=2)
    assert res["ours_mujoco_vs_panda_gym"] > 0 and res["ours_pybullet_vs_panda_gym"] > 0
    for name in ("ours_mujoco", "ours_pybullet", "panda_gym"):  # the physics is part of each env.step
        assert 0 < res[f"{name}_physics_share"] < 1
    assert res["ours_pybullet_physics_only_vs_panda_gym"] > res["ours_pybullet_vs_panda_gym"]
    assert (res["panda_gym_substeps"], res["panda_gym_timestep"]) == (20, 0.002)  # the same control step as ours


def test_tabletop_without_panda_gym_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "panda_gym", None)  # what `import panda_gym` sees when it is not installed
    res = env_throughput.versus_panda_gym(["pybullet"], n=5, rounds=2)
    assert res == {"skipped": "panda-gym is not installed: pip install -e '.[panda]'"}


def test_record_appends_rows(tmp_path, monkeypatch):
    import benchmarks._common as common

    results = tmp_path / "RESULTS.md"
    monkeypatch.setattr(common, "RESULTS", results)
    record("demo_bench", {}, ["1", "2"], ["a", "b"])
    record("demo_bench", {}, ["3", "4"], ["a", "b"])
    text = results.read_text()
    assert text.count("## demo_bench") == 1
    assert "| 1 | 2 |" in text and "| 3 | 4 |" in text
    assert text.index("| 1 | 2 |") < text.index("| 3 | 4 |")


def test_hierarchy_quick_prints_json_last(tmp_path):
    figures = run_benchmark(
        "hierarchy",
        "--quick",
        "--no-record",
        "--planners",
        "graph",
        "flat",
        "--suites",
        "apartment_long",
        "--out",
        str(tmp_path),
        timeout=600,
    )
    assert figures["long_horizon_success"]["graph"] == 1.0
    assert set(figures["cells"]) == {"graph/apartment_long", "flat/apartment_long"}
    assert (tmp_path / "table.md").is_file()


@pytest.mark.slow
def test_train_lowlevel_quick_prints_json_last():
    figures = run_benchmark("train_lowlevel", "--quick", "--no-record", timeout=900)
    assert {"project", "sb3_defaults", "throughput_steps_per_s", "time_ratio"} <= set(figures)


def test_llm_planner_accuracy_check_scores_answers_against_the_truth():
    from benchmarks.llm_planner import correct, is_subsequence
    from llm_planner.llm.answers import GoalsAnswer, RouteAnswer
    from sim.navigation.world import load_world

    house = load_world("house")
    start = house.room("kitchen").center
    goals, avoid = ("living_room",), ("dining_room",)
    assert correct(GoalsAnswer(targets=["living_room"], avoid=["dining_room"]), house, start, goals, avoid)
    assert not correct(GoalsAnswer(targets=["living_room"], avoid=[]), house, start, goals, avoid)
    doors = ["kitchen_laundry_door", "laundry_door", "study_door", "living_study_door"]
    around = RouteAnswer(route=[*doors, "living_room"])
    through = RouteAnswer(route=["kitchen_dining_door", "dining_living_door", "living_room"])
    assert correct(around, house, start, goals, avoid)
    assert not correct(through, house, start, goals, avoid)  # enters the dining room
    assert not correct(RouteAnswer(route=["living_room"]), house, start, goals, avoid)  # not a valid route
    assert is_subsequence(["a", "c"], ["a", "b", "c"]) and not is_subsequence(["c", "a"], ["a", "b", "c"])


@pytest.mark.slow
def test_llm_planner_quick_prints_json_last(tmp_path):
    figures = run_benchmark("llm_planner", "--quick", "--no-record", "--out", str(tmp_path), timeout=900)
    assert set(figures["plan_accuracy"]) == {"plain", "+spans", "llm_route"}
    assert figures["e2e_success"]["oracle (graph)"] == 1.0
    assert (tmp_path / "table.md").is_file()


@pytest.mark.slow
def test_ros_loop_quick_prints_json_last():
    figures = run_benchmark("ros_loop", "--quick", "--no-record", timeout=600)
    assert figures["50hz"]["odom_sent"] > 0 and figures["50hz"]["latency_p99_ms"] > 0
    arm = figures["arm_100hz"]
    assert arm["commands"] > 0.5 * arm["rate_hz"] * arm["seconds"] and arm["latency_p99_ms"] > 0
    assert arm["unmatched_commands"] <= 0.01 * arm["commands"]  # each command traced to the state it came from
    assert set(figures["targets_met"]) == {
        "p99<=2ms@50Hz", "no_missed@50Hz", "arm_p99<=5ms@100Hz", "arm_no_missed@100Hz"
    }  # fmt: skip
    # the arm with SCHED_FIFO 50 (the targets' run), after the same loop with normal scheduling (the reference)
    assert arm["thread_priority"] == 50 and figures["arm_100hz_reference"]["thread_priority"] == 0
    assert figures["arm_p99_over_reference_p99"] > 0


def test_ros_loop_load_runs_busy_processes_only_inside_its_block():
    import os

    with ros_loop.busy_processes(2):
        children = [int(p) for p in os.listdir("/proc") if p.isdigit() and _parent(int(p)) == os.getpid()]
        assert len(children) == 2
        time.sleep(0.3)
        assert all(_cpu_ticks(c) > 0 for c in children)  # spinning, not waiting
    assert all(not Path(f"/proc/{c}").exists() or _state(c) == "Z" for c in children)


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _parent(pid: int) -> int:
    try:
        return int(_stat(pid)[1])
    except (OSError, IndexError):
        return -1


def _state(pid: int) -> str:
    return _stat(pid)[0]


def _cpu_ticks(pid: int) -> int:
    return int(_stat(pid)[11]) + int(_stat(pid)[12])  # utime + stime


def test_ros_loop_arm_figures_trace_each_command_to_its_state():
    """Latency from the newest /joint_states with the command's start position; periods without a command within a
    call are missed, the gap between calls is not."""
    q = lambda k: np.full(7, 0.1 * k)  # noqa: E731
    states = [(0.010 * k, q(k)) for k in range(10)]
    # commands from states 1, 2 and (after a 30 ms gap: two periods missed) 5; a new call starts after its status
    commands = [(0.013, q(1)), (0.024, q(2)), (0.054, q(5)), (0.095, q(9)), (0.0955, np.full(7, 9.0))]
    f = ros_loop.arm_loop_figures(states, commands, call_ends=[0.06], period=0.010)
    assert f["latency_p50_ms"] == pytest.approx(4.0) and f["latency_max_ms"] == pytest.approx(5.0)
    assert f["missed_cycles"] == 2 and f["skill_calls"] == 2 and f["unmatched_commands"] == 1


@pytest.mark.slow
def test_soak_quick_prints_json_last():
    figures = run_benchmark("soak", "--quick", "--no-record", timeout=600)
    assert figures["tasks_done"] >= 1 and figures["cmd_received"] > 0.9 * figures["cmd_expected"]
    assert len(figures["missed_per_minute"]) == 6
    assert set(figures["rss_growth_pct"]) == {"sim_robot_node", "policy_node", "planner_node"}
    assert set(figures["targets_met"]) == {"no_upward_trend", "rss_growth<5%", "no_node_exited"}


def test_soak_trend_tells_a_rising_count_from_noise():
    slope, se = soak.trend([0, 2, 4, 6, 8, 10])
    assert slope == pytest.approx(2.0) and se == pytest.approx(0.0, abs=1e-9)
    slope, se = soak.trend([3, 0, 4, 1, 3, 0, 4, 1])  # noise around a flat line
    assert not (slope > 2 * se)


def test_sim2sim_quick_prints_the_transfer_matrix_last():
    figures = run_benchmark("sim2sim", "--quick", "--no-record", timeout=600)
    matrix = figures["matrix"]
    assert set(matrix) == {"rover_local", "rover_local_dr"}
    assert (
        matrix["rover_local_dr"]["trained_with_randomization"]
        and not matrix["rover_local"]["trained_with_randomization"]
    )
    for row in matrix.values():
        assert set(row["cells"]) == {
            "open/mujoco",
            "open/mujoco+noise+latency",
            "open/pybullet+perturbed",
            "open/pybullet",
            "open/pybullet+noise+latency",
        }
        for cell in row["cells"].values():
            lo, hi = cell["success_ci95"]
            assert cell["episodes"] == 20 and lo <= cell["success_rate"] <= hi
            assert cell["path_length_ratio"] is None or cell["path_length_ratio"] >= 0.9
    assert isinstance(figures["target_met"], bool)


def test_sim2sim_quick_tabletop_runs_the_skill_and_the_expert_on_the_same_episodes_in_both_engines():
    figures = run_benchmark(
        "sim2sim", "--quick", "--no-record", "--suites", "tabletop", "--skills", "shipped:panda_reach", timeout=300
    )
    assert set(figures) == {"quick", "tabletop"}  # nothing of the rover's
    row = figures["tabletop"]["skills"]["panda_reach"]
    cells = row["cells"]
    assert set(cells) == {"mujoco", "pybullet", "expert/mujoco", "expert/pybullet"}
    for cell in cells.values():
        lo, hi = cell["success_ci95"]
        assert cell["episodes"] == 20 and lo <= cell["success_rate"] <= hi
    assert row["goal_mode"] == "reach" and row["trained_in"] == "mujoco"
    assert row["start_distance_max_difference_m"] <= 0.005  # the same goals in both engines
    assert row["mujoco_to_pybullet_drop"] == pytest.approx(
        cells["mujoco"]["success_rate"] - cells["pybullet"]["success_rate"]
    )
    assert cells["expert/mujoco"]["success_rate"] >= 0.9  # reaching is geometry: the expert solves it
    assert figures["tabletop"]["target_met"] == (row["mujoco_to_pybullet_drop"] <= 0.10)


def test_planners_quick_prints_json_last(tmp_path):
    figures = run_benchmark("planners", "--quick", "--no-record", "--out", str(tmp_path / "sweep"), timeout=600)
    assert figures["episodes"] == 8
    assert figures["success"]["graph/apartment_long/mujoco"] == 1.0
    assert figures["success"]["graph/apartment_long/pybullet"] == 1.0
    assert (tmp_path / "sweep" / "report.md").is_file()


@pytest.mark.slow
def test_sim2real_quick_prints_json_last(tmp_path):
    figures = run_benchmark("sim2real", "--quick", "--no-record", "--out", str(tmp_path), timeout=600)
    runs = figures["runs"]
    assert runs["nominal"]["task_status"] == "done"
    assert runs["nominal"]["backends"]["mujoco"]["ate_m"] < runs["perturbed"]["backends"]["mujoco"]["ate_m"]
    assert (tmp_path / "perturbed" / "report.md").is_file()


def test_vla_failures_are_told_apart_from_the_episodes_events():
    from benchmarks.vla import failure_kind
    from llm_planner.tabletop import Relation, TabletopTask

    task = TabletopTask("Red on blue, then yellow on red.", (Relation("red", "blue"), Relation("yellow", "red")), "m")

    def kind(reason, *steps, failed=False):
        events = [{"kind": "subgoal_started", "subgoal": f"place {s}"} for s in steps]
        events += [{"kind": "subgoal_failed", "subgoal": f"place {steps[-1]}"}] if failed else []
        return failure_kind(task, {"reason": reason}, events)

    assert kind("planner_done: vla: done (p = 0.9)", "red on blue", "blue on yellow") == "wrong step"
    assert kind("planner_error: PlanError: pointed at", "red on blue") == "pointed at nothing"
    assert kind("planner_done: vla: done (p = 0.7)", "red on blue") == "stopped early"
    assert kind("planner_done: vla: done (p = 0.7)", "red on blue", "yellow on red", failed=True) == "execution"
    assert kind("episode_limit at place red on blue", "red on blue") == "episode_limit at place red on blue"


def test_vla_pairs_a_candidate_model_under_its_own_name():
    """--candidate: another model against --model, named as such in the paired counts and the RESULTS cell (the
    2026-12-07 ship row had to be relabelled by hand when only --rl-model could pair two models)."""
    from benchmarks.vla import paired, paired_cell

    a = {(0, i): i < 6 for i in range(10)}  # --model solves episodes 0-5
    b = {(0, i): 3 <= i < 8 for i in range(10)}  # the candidate 3-7
    pair = paired(a, b, ("model", "candidate"))
    assert (pair["only_model"], pair["only_candidate"], pair["episodes"]) == (3, 2, 10)
    cell = paired_cell({"candidate_gain_points_mujoco": -10.0, "candidate_paired_mujoco": pair}, "mujoco")
    # with the 95 % interval of the paired difference: 5 discordant of 10 episodes cannot tell -10 from 0
    lo, hi = pair["diff_ci95_points"]
    assert lo < -10.0 < 0 < hi
    assert cell.startswith(f"candidate - model, mujoco: -10.0 [{lo:+.1f}, {hi:+.1f}] (only the candidate 2, only ")
    rl = paired_cell({"rl_gain_points_mujoco": -10.0, "rl_paired_mujoco": paired(a, b)}, "mujoco")
    assert rl.startswith(f"mujoco: -10.0 [{lo:+.1f}, {hi:+.1f}] (only RL 2, only imitation 3, p ")
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "vla.py"), "--rl-model", "a.pt", "--candidate", "b.pt"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "not allowed with argument" in r.stderr, r.stderr


def test_tabletop_language_names_a_missing_adapter(tmp_path):
    """--adapter scores a candidate adapter; a path that is not a file stops before anything runs, naming it."""
    missing = tmp_path / "none.gguf"
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "tabletop_language.py"), "--adapter", str(missing), "--no-record"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 2 and f"--adapter {missing}: no such file" in out.stderr


def test_text_probe_scores_a_separable_feature_and_not_noise_and_reads_no_test_phrase():
    from benchmarks import text_probe
    from hierarchy.suites import load_tabletop_suite

    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(5), 20)
    train = rng.random(len(y)) < 0.6
    separable = np.eye(5)[y] * 3 + rng.normal(0, 0.3, (len(y), 5))
    assert text_probe.probe(separable, y, train) == int((~train).sum())
    noise = rng.normal(0, 1, (len(y), 50))
    assert text_probe.probe(noise, y, train) < 0.5 * int((~train).sum())
    phrases = text_probe.like_phrases()
    assert len(phrases) >= 40 and len(set(phrases.values())) >= 8
    tests = " ".join(
        t.text.lower() for s in ("", "_sort", "_clear") for t in load_tabletop_suite(f"tabletop_language{s}").tasks
    )
    assert not [p for p in phrases if f"colour of {p.lower()}" in tests]


@pytest.mark.slow
def test_text_probe_quick_prints_json_last():
    figures = run_benchmark("text_probe", "--quick", "--no-record", "--threads", "2", timeout=600)
    assert figures["split_seeds"] == 1 and figures["things"] >= 40
    assert all(0.0 <= r["val_accuracy"] <= 1.0 for r in figures["probe"].values())


def test_skill_latency_quick_runs_the_reach_as_the_hierarchy_does_and_prints_json_last():
    figures = run_benchmark("skill_latency", "--quick", "--no-record", timeout=300)
    cells = figures["cells"]
    assert list(cells) == ["shipped:panda_reach/latency0", "shipped:panda_reach/latency1"]
    for cell in cells.values():
        assert cell["goals"] == 40 and sum(cell["outcomes"].values()) == 40
        assert cell["reached_ci95"][0] <= cell["reached"] <= cell["reached_ci95"][1]
    assert cells["shipped:panda_reach/latency0"]["reached"] >= 0.9
    # a late command takes the reach more steps (the same goals and starts in both cells)
    assert cells["shipped:panda_reach/latency1"]["mean_steps"] > cells["shipped:panda_reach/latency0"]["mean_steps"]


def test_vla_benchmark_builds_other_planners_as_configured():
    """--planners vla llm_goals compares the shipped planners: llm_goals with the shipped adapter (as
    planner=llm_goals), not the registry's untrained defaults; the VLA with its model and settings."""
    from benchmarks.vla import planner_arguments

    name, params = planner_arguments("llm_goals", "shipped:vla_tabletop", 2, None, {})
    assert name == "llm_goals" and params["backend_params"]["lora_path"] == "shipped:gemma3_sft", params
    assert params["backend_params"]["n_threads"] == 2
    assert planner_arguments("symbolic", "m.pt", None, None, {}) == ("symbolic", {})
    assert planner_arguments("vla", "m.pt", 1, "cell", {"done_threshold": 0.6}) == (
        "vla", {"model": "m.pt", "threads": 1, "decode": "cell", "done_threshold": 0.6}
    )  # fmt: skip


def test_vla_benchmark_runs_a_planner_other_than_the_vla(tmp_path):
    """The script end to end with the oracle alone (the quick set of one suite, MuJoCo): the path every non-VLA
    planner takes, which once passed its arguments to make_planner wrongly (a510f3e, found by a --quick run)."""
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "vla.py"), "--quick", "--no-record", "--planners", "symbolic",
         "--suites", "tabletop_language", "--backends", "mujoco", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    figures = json.loads(r.stdout.strip().splitlines()[-1])
    assert figures["cells"]["symbolic/mujoco/all"]["episodes"] == 6
    assert figures["cells"]["symbolic/mujoco/all"]["success_rate"] * 6 >= 5 - 1e-3  # 5 of 6 (the rate is rounded)


def test_vla_benchmark_pairs_the_vla_with_a_consulting_candidate(tmp_path):
    """--candidate-set: the same model with settings of its own, paired with the VLA alone on the same episodes.
    Consulting the oracle (symbolic) with an overwhelming weight makes the candidate follow the task's own goals,
    so it solves what the skills allow, whatever the network reads."""
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "vla.py"), "--quick", "--no-record", "--planners", "vla",
         "--candidate-set", "consult=symbolic", "consult_weight=10000", "--suites", "tabletop_language",
         "--backends", "mujoco", "--latency-n", "3", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    figures = json.loads(r.stdout.strip().splitlines()[-1])
    assert figures["candidate_params"] == {"consult": "symbolic", "consult_weight": 10000}
    assert figures["cells"]["vla_candidate/mujoco/all"]["episodes"] == 6
    assert figures["cells"]["vla_candidate/mujoco/all"]["success_rate"] * 6 >= 5 - 1e-3  # 5 of 6 (rate rounded)
    pair = figures["candidate_paired_mujoco"]
    assert pair["episodes"] == 6 and pair["only_model"] + pair["only_candidate"] <= 6
