"""hrl-sim2real on runs recorded over DDS from the project's simulated robot: a nominal robot and a
perturbed one (lower friction, weaker motors, heavier, two periods of command latency) standing in for
hardware. The replay in simulation must match the nominal run closely and the perturbed one less well."""

import json
from pathlib import Path

import numpy as np
import pytest

from hrl.base_drive import SimulatedBase, make_base_env
from hrl.ros.recorded_run import record_sim_run
from hrl.sim2real import Recording, ate, compare, main, read_bag, replay
from sim.navigation.world import load_world
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
        # The same robot: the replay follows the recorded path (2-9 mm ATE measured, also under load). The robot and the
        # recorder receive each /cmd_vel up to a few ms apart under load; both apply a command from its arrival
        # time (hrl.base_drive), so that costs a few ms' worth of motion, not a control period
        # (test_replay_follows_the_robot_when_commands_straddle_period_boundaries).
        assert b["ate_m"] < 0.05, (backend, b)
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


def recording_at_period_boundaries(seed: int, jitter_s: float) -> tuple[Recording, int]:
    """A 15 s run of the simulated base (``SimulatedBase``: the robot node's stepping, without ROS) under a
    policy's commands that arrive right at control-period boundaries, up to ``jitter_s`` either side, recorded
    by a recorder that receives each one up to ``jitter_s`` apart from the robot, so that many land on one
    side of a boundary at the robot and on the other in the bag. Every ninth tick comes 0.1-0.3 s late (the
    robot catches up). Returns (the recording, how many commands straddle a boundary)."""
    rng = np.random.default_rng(seed)
    world = load_world("open")
    env = make_base_env(world, "rover", "mujoco")
    env.reset(seed=0, options={"start": (3.0, 1.8, 0.0)})
    base = SimulatedBase(env, control_hz=10.0, t0=0.0, cmd_timeout_s=0.5)
    odom_t, odom, cmd_t, cmd = [], [], [], []

    def publish(t):  # /odom as the recorder stamps it: 0.2-2 ms after the robot published it
        pose, (v, w) = base.physics.pose(), base.physics.velocity()
        odom_t.append(t + rng.uniform(2e-4, 2e-3))
        odom.append((pose.x, pose.y, pose.yaw, v, w))

    publish(0.0)
    events, straddling = [], 0  # (time at the robot, command or None for a timer tick)
    v, w = 0.25, 0.3
    for k in range(1, 151):
        boundary = k * base.period
        # a policy's commands: each a small change from the last (the shipped policy's: < 0.05 m/s, 0.17 rad/s)
        v = float(np.clip(v + rng.uniform(-0.05, 0.05), 0.1, 0.4))
        w = float(np.clip(w + rng.uniform(-0.2, 0.2), -0.2, 0.8))
        at_robot = boundary + rng.uniform(-jitter_s, jitter_s)
        in_bag = at_robot + rng.uniform(-jitter_s, jitter_s)
        straddling += (at_robot < boundary) != (in_bag < boundary)
        events.append((at_robot, (in_bag, v, w)))
        events.append((boundary + (rng.uniform(0.1, 0.3) if k % 9 == 0 else rng.uniform(0.0, 5e-4)), None))
    for t, command in sorted(events, key=lambda e: e[0]):  # the robot takes every command received before a tick
        if command is not None:
            base.command(t, *command[1:])
            cmd_t.append(command[0])
            cmd.append(command[1:])
        elif base.advance(t)[0]:
            publish(t)
    env.close()
    rec = Recording(path=Path("boundaries"), odom_t=np.array(odom_t), odom=np.array(odom), cmd_t=np.array(cmd_t),
                    cmd=np.array(cmd))  # fmt: skip
    return rec, straddling


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_replay_follows_the_robot_when_commands_straddle_period_boundaries(seed):
    # What made the nominal replay fail now and then under load: commands replayed one per control period, so
    # one received a millisecond before a boundary by the robot and a millisecond after it by the recorder was
    # replayed a whole period late (the per-period replay measured 0.018-0.069 m ATE on these seeds). Applied
    # over time (hrl.base_drive), a millisecond apart costs a millisecond's worth of motion.
    rec, straddling = recording_at_period_boundaries(seed, jitter_s=2e-3)
    assert straddling >= 20  # the case in question, many times over
    rep = replay(rec, load_world("open"), "mujoco")
    assert rep.collisions == 0
    assert ate(rep) < 0.01, ate(rep)
