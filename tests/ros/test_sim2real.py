"""hrl-sim2real on runs recorded over DDS from the project's simulated robot: a nominal robot and a
perturbed one (lower friction, weaker motors, heavier, two periods of command latency) standing in for
hardware. The replay in simulation must match the nominal run closely and the perturbed one less well."""

import json

import pytest

from hrl.ros.recorded_run import record_sim_run
from hrl.sim2real import compare, main, read_bag
from sim.world import load_world
from tests.ros.conftest import own_domain

PERTURBED = ("friction:=0.5", "motor_gain:=0.85", "mass_scale:=1.3", "latency_steps:=2")


@pytest.fixture(scope="module")
def bags(tmp_path_factory):
    root = tmp_path_factory.mktemp("sim2real")
    status = {}
    for name, params in (("nominal", ()), ("perturbed", PERTURBED)):
        with own_domain():  # each run on a domain of its own: no late message of one reaches the other
            status[name] = record_sim_run(root / name, sim_params=params)
    return root, status


def test_nominal_run_replays_closely_in_both_simulators(bags):
    root, status = bags
    assert status["nominal"] == "done"
    rec = read_bag(root / "nominal")
    assert not [w for w in rec.warnings if "/scan" in w or "/subgoal" in w]
    summary = compare(rec, load_world("apartment"), ["mujoco", "pybullet"])
    summary.pop("_replays")
    assert summary["robot"]["success"] and None not in summary["robot"]["time_to_subgoal_s"]
    for backend, b in summary["backends"].items():
        # The same robot: the replay follows the recorded path (typically 1-3 mm ATE). The bound leaves room for
        # what open-loop replay cannot know: a /cmd_vel that reaches the robot and the recorder on either side
        # of a control-period boundary (their DDS receive times differ by up to a few ms under load) is replayed
        # one period off, and open loop never recovers from it (measured under a loaded CI run: 0.06 m, once).
        assert b["ate_m"] < 0.15, (backend, b)
        assert b["success"], (backend, b)
        assert b["lidar_mae_m"] < 0.05, (backend, b)  # the same walls
        for real, simulated in zip(summary["robot"]["time_to_subgoal_s"], b["time_to_subgoal_s"], strict=True):
            assert abs(real - simulated) < 0.5


def test_perturbed_robot_shows_a_larger_gap(bags):
    root, status = bags
    assert status["perturbed"] == "done"  # the policy copes with the perturbed robot in closed loop
    world = load_world("apartment")
    gap = {}
    for name in ("nominal", "perturbed"):
        summary = compare(read_bag(root / name), world, ["mujoco"])
        summary.pop("_replays")
        gap[name] = summary["backends"]["mujoco"]
    assert gap["perturbed"]["ate_m"] > 0.2 and gap["perturbed"]["ate_m"] > 5 * gap["nominal"]["ate_m"]
    assert gap["perturbed"]["rpe_translation_m"] > gap["nominal"]["rpe_translation_m"]


def test_cli_writes_report_plots_and_summary(bags, tmp_path, capsys):
    root, _ = bags
    out = tmp_path / "out"
    assert main([str(root / "perturbed"), "--map", "apartment", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["backends"]) == {"mujoco", "pybullet"}
    for name in ("paths.png", "errors.png"):
        assert (out / name).read_bytes()[:4] == b"\x89PNG"
    report = (out / "report.md").read_text()
    assert "hrl-sim2real" in report and "| mujoco |" in report and "| pybullet |" in report
    assert "ATE" in capsys.readouterr().out
