"""The ROS nodes' pure-Python cores: scan adaptation (frames, malformed scans), safety filter (limits,
acceleration, proximity stop), subgoal tracking, parameters."""

import math
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hrl.ros.core import (
    LatencyLog,
    SafetyConfig,
    SafetyFilter,
    ScanAdapter,
    SubgoalTracker,
    adapt_scan,
    parse_pose2d,
    scan_problem,
    to_frame,
    yaw_from_quaternion,
)
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
    assert (v, w) == (0.0, 0.0) and why == "/odom is stale (none for 0.5 s)"
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


# -- frames: the laser's mounting pose -------------------------------------------------------------------
ROOM = 6.0  # a square room, walls at 0 and ROOM


def room_ray(x: float, y: float, angle: float) -> float:
    """Distance from (x, y) along ``angle`` to the room's walls."""
    c, s = math.cos(angle), math.sin(angle)
    ts = [t for t in ((ROOM - x) / c if c > 1e-12 else math.inf, -x / c if c < -1e-12 else math.inf) if t >= 0]
    ts += [t for t in ((ROOM - y) / s if s > 1e-12 else math.inf, -y / s if s < -1e-12 else math.inf) if t >= 0]
    return min(ts)


def scan_from(robot, laser_pose, n=720):
    """A full-circle scan of the room from a laser mounted at ``laser_pose`` (base frame) on ``robot``."""
    rx, ry, ryaw = robot
    lx, ly, lyaw = laser_pose
    ox = rx + lx * math.cos(ryaw) - ly * math.sin(ryaw)
    oy = ry + lx * math.sin(ryaw) + ly * math.cos(ryaw)
    inc = 2 * math.pi / n
    ranges = np.array([room_ray(ox, oy, ryaw + lyaw - math.pi + k * inc) for k in range(n)], dtype=np.float32)
    return ranges, -math.pi, math.pi - inc, inc


@pytest.mark.parametrize("laser_pose", [(0.0, 0.0, math.pi / 2), (0.15, -0.05, 0.0), (0.15, -0.05, math.pi / 2)])
def test_a_rotated_or_offset_laser_gives_the_same_policy_rays_as_a_centred_one(laser_pose):
    robot = (2.0, 2.5, 0.3)
    centred = ScanAdapter(POLICY, 4.0)
    assert centred.adapt(*scan_from(robot, (0.0, 0.0, 0.0)), 0.05, 8.0) is None
    mounted = ScanAdapter(POLICY, 4.0, laser_pose=laser_pose)
    scan = scan_from(robot, laser_pose)
    assert mounted.adapt(*scan, 0.05, 8.0) is None
    np.testing.assert_allclose(mounted.ranges, centred.ranges, atol=0.03)
    half = math.pi / 36  # each policy ray reads the nearest wall within its sector
    truth = [min(room_ray(*robot[:2], robot[2] + a + d) for d in np.linspace(-half, half, 41)) for a in POLICY]
    truth = np.minimum(truth, 4.0)
    np.testing.assert_allclose(centred.ranges, truth, atol=0.03)
    ignoring_the_mount = ScanAdapter(POLICY, 4.0)
    assert ignoring_the_mount.adapt(*scan, 0.05, 8.0) is None
    assert np.max(np.abs(ignoring_the_mount.ranges - centred.ranges)) > 0.1  # what the pose corrects


def test_a_clockwise_scan_negative_increment_reads_like_its_counter_clockwise_twin():
    n = 181
    ranges = np.linspace(1.0, 3.0, n)
    ccw = adapt_scan(ranges, -math.pi / 2, math.pi / (n - 1), 0.1, 10.0, POLICY, 4.0)
    adapter = ScanAdapter(POLICY, 4.0)
    assert adapter.adapt(ranges[::-1].copy(), math.pi / 2, -math.pi / 2, -math.pi / (n - 1), 0.1, 10.0) is None
    np.testing.assert_allclose(adapter.ranges, ccw, atol=1e-6)


def test_pose_parameters_and_the_map_to_odom_transform():
    assert parse_pose2d("0.1, -0.2, 1.5") == (0.1, -0.2, 1.5)
    for bad in ("0,0", "a,b,c", "0,0,nan", ""):
        with pytest.raises(ValueError, match="is not a pose 'x,y,yaw'"):
            parse_pose2d(bad)
    # odom's origin sits at (1, 2) in the map, turned by 90 degrees: map (1, 3) is 1 m ahead of it, i.e. odom (1, 0)
    assert to_frame((1.0, 2.0, math.pi / 2), 1.0, 3.0) == pytest.approx((1.0, 0.0))
    assert to_frame((0.0, 0.0, 0.0), 3.0, -1.0) == (3.0, -1.0)


# -- malformed scans -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("n", "geometry", "problem"),
    [
        (100, (-1.0, 1.0, 0.01, 0.1, 5.0), "100 ranges, but angle_min -1.0000 to angle_max 1.0000"),
        (201, (-1.0, 1.0, 0.0, 0.1, 5.0), "angle_increment is 0"),
        (201, (-1.0, 1.0, -0.01, 0.1, 5.0), "a negative increment needs angle_max < angle_min"),
        (201, (-1.0, 1.0, 0.01, 5.0, 0.1), "need 0 <= range_min < range_max"),
        (201, (-1.0, 1.0, 0.01, -1.0, 5.0), "need 0 <= range_min < range_max"),
        (201, (-1.0, 1.0, math.nan, 0.1, 5.0), "non-finite scan geometry"),
        (201, (-1.0, math.inf, 0.01, 0.1, 5.0), "non-finite scan geometry"),
        (0, (-1.0, 1.0, 0.01, 0.1, 5.0), "no ranges"),
    ],
)
def test_a_malformed_scan_is_refused_with_its_reason(n, geometry, problem):
    assert problem in scan_problem(n, *geometry)
    adapter = ScanAdapter(POLICY, 4.0)
    before = adapter.ranges.copy()
    assert problem in adapter.adapt(np.full(n, 1.0), *geometry)
    np.testing.assert_array_equal(adapter.ranges, before)  # a refused scan changes nothing


def test_scan_geometry_tolerates_drivers_that_count_the_end_beam_differently():
    assert scan_problem(200, -1.0, 1.0, 0.01, 0.1, 5.0) is None  # 201 expected
    assert scan_problem(201, -1.0, 1.0, 0.01, 0.1, 5.0) is None
    assert scan_problem(202, -1.0, 1.0, 0.01, 0.1, 5.0) is None
    assert scan_problem(203, -1.0, 1.0, 0.01, 0.1, 5.0) is not None


def test_a_million_beam_scan_is_adapted_in_bounded_time():
    n = 1_000_000
    inc = 2 * math.pi / n
    ranges = np.full(n, 3.0, dtype=np.float32)
    ranges[n // 2] = 0.5  # straight ahead
    adapter = ScanAdapter(POLICY, 4.0)
    t0 = time.perf_counter()
    assert adapter.adapt(ranges, -math.pi, math.pi - inc, inc, 0.05, 8.0) is None
    assert time.perf_counter() - t0 < 5.0
    ahead = int(np.argmin(np.abs(POLICY)))
    assert adapter.ranges[ahead] == pytest.approx(0.5) and np.all(np.delete(adapter.ranges, ahead) == 3.0)
    assert "1000000 ranges" in adapter.adapt(ranges, -1.0, 1.0, 0.01, 0.05, 8.0)


floats = st.floats(allow_nan=True, allow_infinity=True, width=32)


@settings(max_examples=300, deadline=None)
@given(
    ranges=st.lists(floats, max_size=400),
    angle_min=floats,
    angle_max=floats,
    angle_increment=floats,
    range_min=floats,
    range_max=floats,
    laser_pose=st.tuples(st.floats(-1, 1), st.floats(-1, 1), st.floats(-4, 4)),
)
def test_any_scan_is_adapted_or_refused_never_a_crash(
    ranges, angle_min, angle_max, angle_increment, range_min, range_max, laser_pose
):
    adapter = ScanAdapter(POLICY, 4.0, footprint_radius=0.2, laser_pose=laser_pose)
    problem = adapter.adapt(ranges, angle_min, angle_max, angle_increment, range_min, range_max)
    if problem is None:
        assert np.all(np.isfinite(adapter.ranges)) and np.all((adapter.ranges >= 0) & (adapter.ranges <= 4.0))
        assert adapter.clearance_ahead >= -0.2 and adapter.clearance_behind >= -0.2
    else:
        assert isinstance(problem, str) and problem


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 2000), start=st.floats(-4, 4), span=st.floats(0.01, 2 * math.pi), data=st.data())
def test_any_consistent_scan_geometry_is_accepted(n, start, span, data):
    inc = span / n
    clockwise = data.draw(st.booleans())
    geometry = (start + span - inc, start, -inc) if clockwise else (start, start + (n - 1) * inc, inc)
    assert scan_problem(n, *geometry, 0.05, 8.0) is None


# -- proximity stop and acceleration limits --------------------------------------------------------------
def test_clearance_is_measured_from_the_footprint_along_its_path():
    adapter = ScanAdapter(POLICY, 4.0, footprint_radius=0.2)
    n = 360
    inc = 2 * math.pi / n
    ranges = np.full(n, np.inf, dtype=np.float32)
    ranges[180] = 0.5  # straight ahead, 0.3 m in front of the footprint
    ranges[90] = 0.3  # to the right (-90 degrees): beside the path, not in it
    assert adapter.adapt(ranges, -math.pi, math.pi - inc, inc, 0.05, 8.0) is None
    assert adapter.clearance_ahead == pytest.approx(0.3, abs=1e-6) and adapter.clearance_behind == math.inf
    ranges[0] = -np.inf  # too close to measure, behind: an obstacle at the robot
    ranges[181] = 0.1  # inside the footprint: the robot's own body, ignored
    assert adapter.adapt(ranges, -math.pi, math.pi - inc, inc, 0.05, 8.0) is None
    assert adapter.clearance_ahead == pytest.approx(0.3, abs=1e-6) and adapter.clearance_behind == 0.0


def test_proximity_stop_cuts_motion_toward_a_close_obstacle_only():
    f = SafetyFilter(SafetyConfig(0.5, 1.5, stop_distance=0.2))
    f.clearance_ahead, f.clearance_behind = 0.1, 2.0
    v, w, why = f.command(0.4, 0.8, now=10.0, odom_time=9.9, scan_time=9.9)
    assert (v, w) == (0.0, 0.8) and why == "obstacle ahead within stop_distance 0.2 m"  # it may turn away
    assert f.command(-0.3, 0.0, 10.0, 9.9, 9.9) == (-0.3, 0.0, None)  # and back off
    f.clearance_ahead, f.clearance_behind = 0.5, 0.05
    assert f.command(-0.3, 0.0, 10.0, 9.9, 9.9)[:2] == (0.0, 0.0)
    assert f.command(0.4, 0.0, 10.0, 9.9, 9.9) == (0.4, 0.0, None)
    off = SafetyFilter(SafetyConfig(0.5, 1.5, stop_distance=0.0))
    off.clearance_ahead = 0.0
    assert off.command(0.4, 0.0, 10.0, 9.9, 9.9) == (0.4, 0.0, None)


def test_acceleration_limits_ramp_commands_but_stops_are_immediate():
    f = SafetyFilter(SafetyConfig(0.5, 1.5, max_linear_accel=1.0, max_angular_accel=2.0))
    t = 10.0
    f.command(0.0, 0.0, t, t, t)
    outs = []
    for _ in range(12):
        t += 0.05
        outs.append(f.command(0.5, -1.5, t, t, t)[:2])
    assert [round(v, 6) for v, _ in outs[:4]] == [0.05, 0.1, 0.15, 0.2]  # 1 m/s^2 x 50 ms
    assert [round(w, 6) for _, w in outs[:3]] == [-0.1, -0.2, -0.3]
    assert outs[-1][0] == pytest.approx(0.5)  # reaches the target, clamped to max_linear
    t += 0.05
    assert f.command(-0.5, 0.0, t, t, t)[0] == pytest.approx(0.45)  # slowing down is limited too
    t += 0.05
    assert f.command(0.5, 0.0, t, t - 1.0, t) == (0.0, 0.0, "/odom is stale (none for 0.5 s)")  # at once
    t += 0.05
    assert f.command(0.5, 0.0, t, t, t)[0] == pytest.approx(0.05)  # and ramps up again from the stop
    with pytest.raises(ValueError, match="max_linear_accel must be a number > 0"):
        SafetyConfig(0.5, 1.5, max_linear_accel=0.0)
    with pytest.raises(ValueError, match="stop_distance must be a finite number >= 0"):
        SafetyConfig(0.5, 1.5, stop_distance=-0.1)


def test_the_latency_log_keeps_a_bounded_window_oldest_first():
    log = LatencyLog(("latency_s", "policy_s"), capacity=5)
    for k in range(12):
        log.add(float(k), k / 10)
    assert log.count == 12
    assert log.values() == {"latency_s": [7.0, 8.0, 9.0, 10.0, 11.0], "policy_s": [0.7, 0.8, 0.9, 1.0, 1.1]}
    short = LatencyLog(("latency_s",), capacity=5)
    short.add(1.0)
    assert short.values() == {"latency_s": [1.0]}


def test_the_controllers_numpy_inference_gives_sb3_predicts_commands():
    from hrl import DEFAULT_POLICY
    from hrl.policy import GoalPolicy
    from hrl.ros.core import PolicyController

    policy = GoalPolicy.load(DEFAULT_POLICY)
    ctrl = PolicyController(policy, 0.5, 1.5)
    assert ctrl.inference == "numpy"
    rng = np.random.default_rng(0)
    for _ in range(20):
        pose = (*rng.uniform(-5, 5, 2), rng.uniform(-math.pi, math.pi))
        velocity, goal = tuple(rng.uniform(-1, 1, 2)), tuple(rng.uniform(-5, 5, 2))
        ranges = rng.uniform(0, 4.0, len(ctrl.angles))
        v, w = ctrl.command(pose, velocity, ranges, goal)
        expected = policy({k: a.copy() for k, a in ctrl.observation(pose, velocity, ranges, goal).items()})
        assert (v / 0.5, w / 1.5) == pytest.approx(tuple(expected), abs=1e-5)  # float32 rounding


def test_the_nodes_observation_is_the_simulators_on_the_same_state():
    """The policy node assembles the observation itself (no simulator on a robot): on the same pose, velocity,
    ranges and goal it must equal the simulator task's (sim.navigation.task.NavTask.observe), entry by entry, with the
    layout the task names (``observation_labels``), velocities clipped alike."""
    from hrl import DEFAULT_POLICY
    from hrl.policy import GoalPolicy
    from hrl.ros.core import PolicyController
    from sim.navigation.world import Pose2D

    policy = GoalPolicy.load(DEFAULT_POLICY)
    env = policy.make_env()  # the simulator the policy was trained in
    task = env.unwrapped.task
    limits = task.robot.limits
    ctrl = PolicyController(policy, limits.max_linear_velocity, limits.max_angular_velocity)
    labels = task.observation_labels()
    assert labels[:6] == ["x", "y", "cos_yaw", "sin_yaw", "v_norm", "w_norm"]
    assert len(labels) == 6 + len(ctrl.angles) == task.observation_space()["observation"].shape[0]
    assert ctrl.max_range == task.robot.lidar.max_range
    rng = np.random.default_rng(0)
    for _ in range(200):
        x, y, yaw = *rng.uniform(-20, 20, 2), rng.uniform(-math.pi, math.pi)
        # beyond the limits too: both clip the normalised velocity at the same bound
        velocity = (rng.uniform(-2, 2) * limits.max_linear_velocity, rng.uniform(-2, 2) * limits.max_angular_velocity)
        ranges = rng.uniform(0, task.robot.lidar.max_range, len(ctrl.angles))
        goal = rng.uniform(-20, 20, 2)
        sim_obs = task.observe(Pose2D(x, y, yaw), velocity, ranges, goal)
        node_obs = ctrl.observation((x, y, yaw), velocity, ranges, tuple(goal))
        for key in ("observation", "achieved_goal", "desired_goal"):
            assert node_obs[key].dtype == sim_obs[key].dtype == np.float32
            np.testing.assert_allclose(node_obs[key], sim_obs[key], rtol=0, atol=1e-6, err_msg=key)
    env.close()
