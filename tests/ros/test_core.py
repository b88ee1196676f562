"""The ROS nodes' pure-Python cores: scan adaptation, safety filter, subgoal tracking, parameters."""

import math

import numpy as np
import pytest

from hrl.ros.core import SafetyConfig, SafetyFilter, SubgoalTracker, adapt_scan, yaw_from_quaternion
from hrl.ros.params import Param, ParameterError, positive, topic, validate

POLICY = np.array([-math.pi + k * 2 * math.pi / 36 for k in range(36)])


def test_a_denser_scan_is_min_pooled_into_the_policy_sectors():
    n = 720  # a 0.5 degree lidar
    ranges = np.full(n, 3.0)
    ranges[360] = 0.8  # one close return straight ahead (angle 0)
    out = adapt_scan(ranges, -math.pi, 2 * math.pi / n, 0.1, 12.0, POLICY, 4.0)
    assert out.shape == (36,)
    ahead = int(np.argmin(np.abs(POLICY)))
    assert out[ahead] == pytest.approx(0.8) and np.all(np.delete(out, ahead) == 3.0)


def test_rep117_readings_and_out_of_range_values():
    ranges = np.array([np.inf, -np.inf, np.nan, 0.05, 20.0, 1.0])
    angles = np.linspace(-0.5, 0.5, 6)
    out = adapt_scan(ranges, -0.5, 0.2, 0.1, 12.0, angles, 4.0)
    assert out[0] == 4.0  # +inf: no return -> max range
    assert out[1] == 0.0  # -inf: too close to measure -> obstacle at 0
    assert out[4] == 4.0  # beyond range_max -> max range, and clipped to the policy's max
    assert out[5] == pytest.approx(1.0)
    # nan and below-range_min readings are ignored: with no other beam in their sectors, those read as free
    assert out[2] == 4.0 and out[3] == 4.0


def test_a_narrow_front_lidar_leaves_the_back_at_max_range():
    n = 181  # 180 degrees in front
    out = adapt_scan(np.full(n, 2.0), -math.pi / 2, math.pi / (n - 1), 0.1, 10.0, POLICY, 4.0)
    front = np.abs(POLICY) <= math.pi / 2
    assert np.all(out[front] == 2.0) and np.all(out[~front] == 4.0)


def test_safety_filter_clamps_and_stops():
    f = SafetyFilter(SafetyConfig(0.5, 1.5, stale_timeout_s=0.5))
    assert f.command(2.0, -9.0, now=10.0, odom_time=9.9, scan_time=9.9) == (0.5, -1.5, None)
    assert f.command(0.2, 0.0, 10.0, None, 9.9)[2] == "waiting for /odom and /scan"
    v, w, why = f.command(0.2, 0.3, now=10.0, odom_time=9.0, scan_time=9.9)
    assert (v, w) == (0.0, 0.0) and why.startswith("/odom is stale (1.00 s")
    assert f.command(0.2, 0.3, 10.0, 9.9, 8.0)[2].startswith("/scan is stale")
    assert f.command(math.nan, 0.3, 10.0, 9.9, 9.9)[:2] == (0.0, 0.0)
    f.input("/odom", "non-finite value in the pose")
    assert f.command(0.2, 0.3, 10.0, 9.9, 9.9) == (0.0, 0.0, "/odom: non-finite value in the pose")
    f.input("/odom", None)  # a finite message again
    assert f.command(0.2, 0.3, 10.0, 9.9, 9.9) == (0.2, 0.3, None)
    f.estop = True
    assert f.command(0.2, 0.3, 10.0, 9.9, 9.9) == (0.0, 0.0, "e-stop latched")
    with pytest.raises(ValueError, match="max_linear must be a finite number > 0"):
        SafetyConfig(0.0, 1.0)


def test_subgoal_tracker_reached_budget_and_stuck():
    t = SubgoalTracker(tolerance=0.3, budget_s=10.0, stuck_s=2.0)
    t.set((1.0, 0.0), now=0.0)
    assert t.update((0.0, 0.0), 0.1) is None
    assert t.update((0.8, 0.0), 0.5) == "reached" and t.goal is None
    t.set((5.0, 0.0), now=0.0)
    assert t.update((0.0, 0.0), 0.1) is None
    assert t.update((0.05, 0.0), 2.5).startswith("failed: no progress")
    t.set((5.0, 0.0), now=0.0)
    for k in range(1, 10):
        assert t.update((0.4 * k, 0.0), float(k)) is None
    assert t.update((3.9, 0.0), 10.5).startswith("failed: over the 10 s budget")


def test_yaw_from_quaternion():
    assert yaw_from_quaternion(0, 0, math.sin(0.6), math.cos(0.6)) == pytest.approx(1.2)


def test_parameters_are_validated_with_their_description():
    params = [Param("control_hz", 20.0, "rate of /cmd_vel (Hz)", positive), Param("cmd", "/cmd_vel", "out", topic)]
    assert validate(params, {"control_hz": 50}) == {"control_hz": 50.0, "cmd": "/cmd_vel"}
    with pytest.raises(ParameterError, match=r"'control_hz' = -1.0 must be a finite number > 0 \(rate of /cmd_vel"):
        validate(params, {"control_hz": -1.0})
    with pytest.raises(ParameterError, match="'cmd' = 'cmd_vel' must be a topic name"):
        validate(params, {"cmd": "cmd_vel"})
    with pytest.raises(ParameterError, match="must be a float"):
        validate(params, {"control_hz": "fast"})
    with pytest.raises(ParameterError, match=r"unknown parameter\(s\) \['rate'\]; this node takes: control_hz, cmd"):
        validate(params, {"rate": 5.0})
