"""The arm's safety filter and command shaping without ROS (hrl/ros/arm_core.py), and the tabletop env built on a
physics instance (how RosArmPhysics plugs in)."""

import math

import numpy as np
import pytest

from hrl.ros.arm_core import (
    ESTOP,
    GRIPPER_RANGE,
    NO_STATE,
    NONFINITE_TARGET,
    POSITION_LIMIT,
    SPEED_LIMIT,
    STALE,
    WORKSPACE,
    ArmLimits,
    ArmSafetyFilter,
    Workspace,
    interpolate,
    tcp_velocity,
    workspace_text,
)
from robots.arm import load_arm
from robots.kinematics import KinematicChain
from sim.tabletop.scene import load_scene

ARM = load_arm("panda")
SCENE = load_scene("single_cube")
CHAIN = KinematicChain(ARM.urdf, ARM.base_link, ARM.tcp_link)
HOME = np.array(ARM.home)
PERIOD = 0.04


def make_filter(workspace=""):
    return ArmSafetyFilter(
        ArmLimits.from_arm(ARM),
        Workspace.parse(workspace, SCENE, 0.005),
        CHAIN,
        np.array(SCENE.robot_base),
        PERIOD,
        0.2,
    )


def test_a_small_step_passes_unchanged():
    f = make_filter()
    c = f.filter(HOME, 0.04, HOME + 0.01, 0.03, state_time=10.0, now=10.05)
    assert not c.hold and c.rule is None and c.reason is None
    assert np.allclose(c.q, HOME + 0.01) and c.width == 0.03


def test_limits_clamp_the_target_and_say_which_rule_and_value():
    f = make_filter("-2,-2,-2,2,2,2")  # joint 4 near 0 stretches the arm out of the table's box
    q = HOME.copy()
    q[3] = -0.01  # near joint 4's upper limit 0.0
    target = q.copy()
    target[3] = 0.05
    c = f.filter(q, 0.04, target, 0.2, 10.0, 10.01)
    assert not c.hold and c.q[3] == 0.0
    assert POSITION_LIMIT in c.rule and "panda_joint4 target 0.0500 rad beyond [-3.1416, 0.0]" in c.reason
    assert GRIPPER_RANGE in c.rule and c.width == ARM.gripper.max_width and "0.2000 m outside 0..0.08" in c.reason

    fast = HOME + np.array([0.5, 0, 0, 0, 0, 0, 0])  # 0.5 rad in 0.04 s: 12.5 rad/s > 2.175
    c = f.filter(HOME, 0.04, fast, 0.04, 10.0, 10.01)
    assert c.rule == SPEED_LIMIT and "panda_joint1 step 0.5000 rad" in c.reason and "2.175 rad/s" in c.reason
    step = c.q - HOME
    assert np.all(np.abs(step) <= ArmLimits.from_arm(ARM).velocity * PERIOD + 1e-12)
    assert step[0] > 0 and np.allclose(step[1:], 0.0)  # the direction kept


def test_faults_hold_once_at_the_measured_position_then_publish_nothing():
    f = make_filter()
    c = f.filter(HOME, 0.04, HOME + 0.01, 0.04, state_time=10.0, now=10.5)
    assert c.hold and c.rule == STALE and "0.500 s old > stale_timeout_s 0.2 s" in c.reason
    assert np.array_equal(c.q, HOME) and c.width == 0.04  # the hold: where the arm is
    again = f.filter(HOME, 0.04, HOME + 0.01, 0.04, state_time=10.0, now=10.6)
    assert again.hold and again.q is None  # once per fault: nothing new
    assert not f.filter(HOME, 0.04, HOME + 0.01, 0.04, 10.6, 10.61).hold  # fresh state: it moves again

    c = f.filter(HOME, 0.04, HOME, 0.04, 10.0, 10.01, state_problem="/joint_states: panda_joint2 = nan is not finite")
    assert c.hold and "nan" in c.reason and np.array_equal(c.q, HOME)
    c = f.filter(HOME, 0.04, HOME, 0.04, 10.0, 10.01, state_problem="object cube: pose [nan, 0, 0] is not finite")
    assert c.hold and c.rule == "unusable object pose"

    f = make_filter()
    c = f.filter(None, None, HOME, 0.04, None, 10.0)
    assert c.hold and c.rule == NO_STATE and c.q is None  # nothing to hold at: nothing published

    f = make_filter()
    c = f.filter(HOME, 0.04, np.full(7, math.nan), 0.04, 10.0, 10.01)
    assert c.hold and c.rule == NONFINITE_TARGET and np.array_equal(c.q, HOME)


def test_the_estop_latches_until_released():
    f = make_filter()
    f.estop = True
    c = f.filter(HOME, 0.04, HOME + 0.01, 0.04, 10.0, 10.01)
    assert c.hold and c.rule == ESTOP and np.array_equal(c.q, HOME)
    for _ in range(3):
        assert f.filter(HOME, 0.04, HOME + 0.01, 0.04, 10.0, 10.01).q is None
    f.estop = False
    assert not f.filter(HOME, 0.04, HOME + 0.01, 0.04, 10.0, 10.01).hold


def test_the_workspace_refuses_targets_and_goals_outside_it_and_lets_the_arm_come_back():
    here = CHAIN.forward(HOME, np.array(SCENE.robot_base))[0]
    f = make_filter(f"-1,-1,0,1,1,{here[2] + 0.01:.4f}")  # a ceiling 1 cm above the TCP
    jac = CHAIN.forward(HOME)[2][:3]
    up = HOME + np.linalg.pinv(jac) @ np.array([0.0, 0.0, 0.03])  # 3 cm up
    c = f.filter(HOME, 0.04, up, 0.04, 10.0, 10.01)
    assert c.hold and c.rule == WORKSPACE and "outside the workspace box" in c.reason and "z 0.000.." in c.reason
    assert not f.filter(HOME, 0.04, 2 * HOME - up, 0.04, 10.0, 10.01).hold  # down is fine

    f = make_filter(f"-1,-1,0,1,1,{here[2] - 0.02:.4f}")  # the arm is above the ceiling already
    assert not f.filter(HOME, 0.04, 2 * HOME - up, 0.04, 10.0, 10.01).hold  # coming back in is allowed
    assert f.filter(HOME, 0.04, up, 0.04, 10.0, 10.01).hold  # further out is not

    f = make_filter()
    assert f.goal_fault([0.0, 0.0, 0.1]) is None
    assert "outside the workspace box x -0.850..0.250, y -0.350..0.350, z 0.000..0.500" in f.goal_fault([0, 0, 0.9])
    assert "not 3 finite numbers" in f.goal_fault([0, math.nan, 0.1])


def test_workspace_parameter():
    assert workspace_text("") is None and workspace_text("-1,-1,0,1,1,0.5") is None
    assert "six numbers" in workspace_text("1,2,3")
    assert "min below its max" in workspace_text("1,-1,0,-1,1,0.5")
    w = Workspace.parse("", SCENE)
    assert w.low == pytest.approx((-0.85, -0.35, 0.0)) and w.high == pytest.approx((0.25, 0.35, 0.5))
    with pytest.raises(ValueError, match="six numbers"):
        Workspace.parse("a,b", SCENE)


def test_trajectory_points_and_twist():
    q1 = HOME + 0.04
    times, positions, velocities = interpolate(HOME, q1, PERIOD, 100.0)
    assert times == pytest.approx([0.01, 0.02, 0.03, 0.04])
    assert np.allclose(positions[0], HOME + 0.01) and np.allclose(positions[-1], q1)
    assert np.allclose(velocities[:-1], 1.0) and np.all(velocities[-1] == 0.0)  # at rest at the end
    times, positions, _ = interpolate(HOME, q1, PERIOD, 10.0)  # slower than the period: one point
    assert times == [PERIOD] and np.allclose(positions, [q1])
    with pytest.raises(ValueError, match="rate_hz"):
        interpolate(HOME, q1, PERIOD, 0.0)
    jac = CHAIN.forward(HOME)[2][:3]
    v = tcp_velocity(CHAIN, HOME, HOME + 1e-4 * np.ones(7), PERIOD)
    assert np.allclose(v, jac @ (1e-4 * np.ones(7)) / PERIOD, atol=1e-6)


def test_the_tabletop_env_takes_a_physics_instance():
    from sim.tabletop.env import PandaTabletopEnv
    from sim.tabletop.physics import make_physics

    physics = make_physics("mujoco", scene=SCENE, arm=ARM, substeps=20)
    env = PandaTabletopEnv(SCENE, backend=physics, goal_mode="reach")
    try:
        assert env.physics is physics and env.backend == type(physics).__name__
        env.reset(seed=0)
        env.step(np.zeros(3))
        with pytest.raises(ValueError, match="control step is 20 substeps"):
            PandaTabletopEnv(SCENE, backend=physics, control_hz=50.0)
        with pytest.raises(TypeError, match="lacks reset, step"):
            PandaTabletopEnv(SCENE, backend=object())
    finally:
        env.close()


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("skill_hz", 30.0, "must divide 500 Hz"),
        ("workspace", "0,0,0,1,1", "xmin,ymin,zmin,xmax,ymax,zmax"),
        ("skills", "reach", "name=policy"),
        ("command_interface", "effort", "must be one of trajectory, twist, action"),
        ("stale_timeout_s", 0.0, "must be a finite number > 0"),
        ("thread_priority", 99, "must be an integer from 0 .normal scheduling. to 98"),
    ],
)
def test_bad_node_parameters_name_the_value_and_what_is_allowed(name, value, says):
    from hrl.ros.arm_policy_node import PARAMS
    from hrl.ros.params import ParameterError, validate

    with pytest.raises(ParameterError, match=f"'{name}' = {value!r}.*{says}"):
        validate(PARAMS, {name: value})


def test_ros_physics_reads_joint_states_and_poses_by_name(ros_domain):
    """RosArmPhysics's readers on real messages (handed to its callbacks: no other node needed)."""
    import rclpy
    from geometry_msgs.msg import PoseStamped
    from sensor_msgs.msg import JointState

    from hrl.ros.arm_physics import RosArmPhysics
    from sim.tabletop.env import PandaTabletopEnv

    rclpy.init()
    node = rclpy.create_node("physics_readers")
    try:
        # readers by name, not staleness (the safety filter's tests): a machine that stalls 0.2 s between two
        # lines must not make the finger state "stale" before missing() is asked (seen once under load)
        physics = RosArmPhysics(node, SCENE, ARM, PERIOD, read_only=True, stale_timeout_s=60.0)
        env = PandaTabletopEnv(SCENE, backend=physics, goal_mode="pick_place")  # spaces built on NaN states
        assert np.all(np.isnan(physics.joints()[0])) and "no arm joints" in physics.missing()
        assert "no poses (two are needed) of cube on /objects/cube/pose" in physics.missing()

        fingers = JointState(name=["panda_finger_joint2", "panda_finger_joint1"], position=[0.01, 0.02])
        physics._on_joint_state(fingers)  # a gripper driver of its own
        arm = JointState(name=list(reversed(ARM.joint_names)), position=list(reversed(ARM.home)))
        physics._on_joint_state(arm)  # no velocities: differences
        q, dq = physics.joints()
        assert np.allclose(q, HOME) and np.allclose(dq, 0.0) and physics.finger_width() == pytest.approx(0.03)
        assert np.allclose(env.tcp()[0], CHAIN.forward(HOME, np.array(SCENE.robot_base))[0])

        bad = JointState(name=ARM.joint_names, position=[math.nan, *ARM.home[1:]])
        physics._on_joint_state(bad)
        assert np.allclose(physics.joints()[0], HOME)  # the last finite state is kept
        assert physics.state_fault()[0] == "unusable joint state" and "panda_joint1 = nan" in physics.state_fault()[1]
        physics._on_joint_state(JointState(name=ARM.joint_names[:3], position=[0.0] * 3))
        assert "names some arm joints but not" in physics.state_fault()[1]
        physics._on_joint_state(arm)
        assert physics.state_fault() is None

        def pose(t, x, yaw, frame="world"):
            msg = PoseStamped()
            msg.header.frame_id = frame
            msg.header.stamp.sec, msg.header.stamp.nanosec = int(t), int((t % 1) * 1e9)
            msg.pose.position.x, msg.pose.position.z = x, 0.02
            msg.pose.orientation.w, msg.pose.orientation.z = math.cos(yaw / 2), math.sin(yaw / 2)
            return msg

        physics._on_object_pose("cube", pose(100.0, 0.0, 0.0))
        physics._on_object_pose("cube", pose(100.02, 0.002, 0.004))
        physics._on_object_pose("cube", pose(100.04, 0.004, 0.008))
        s = physics.object_state("cube")
        assert np.allclose(s.position, [0.004, 0, 0.02]) and np.allclose(s.linear_velocity, [0.1, 0, 0])
        assert np.allclose(s.angular_velocity, [0, 0, 0.2])
        assert physics.missing() == ""
        physics._on_object_pose("cube", pose(100.06, 0.006, 0.0, frame="camera"))
        assert "not world_frame 'world'" in physics.state_fault()[1]
        with pytest.raises(ValueError, match="no object 'ball'"):
            physics.object_state("ball")
        with pytest.raises(RuntimeError, match="read-only"):
            physics.step(HOME, 0.04)
        with pytest.raises(RuntimeError, match="does not subscribe camera images"):
            physics.render("front", 64, 64)
        physics.close()
    finally:
        node.destroy_node()
        rclpy.shutdown()


def test_the_skill_loop_locks_to_the_joint_state_stream_and_keeps_its_rate_without_it(ros_domain):
    """A step starts when a joint state arrives (computed from it at once), not on a clock grid up to a state
    interval later; with no states coming, the loop keeps its period instead of spinning."""
    import threading
    import time

    import rclpy
    from sensor_msgs.msg import JointState

    from hrl.ros.arm_physics import RosArmPhysics

    rclpy.init()
    node = rclpy.create_node("physics_loop")
    feeding = threading.Event()
    try:
        physics = RosArmPhysics(node, SCENE, ARM, PERIOD)
        state = JointState(name=list(ARM.joint_names), position=list(ARM.home), velocity=[0.0] * 7)

        def feed(first: float) -> None:  # a state every 20 ms (50 Hz, twice the skill's 25 Hz), from ``first``
            k = 0
            while feeding.is_set():
                due = first + 0.02 * k
                time.sleep(max(0.0, due - time.monotonic()))
                physics._on_joint_state(state)
                k += 1

        physics._on_joint_state(state)
        feeding.set()
        # half a state interval out of phase with the first step's clock grid: on the grid every step would
        # wait ~10 ms for nothing
        feeder = threading.Thread(target=feed, args=(time.monotonic() + 0.01,), daemon=True)
        feeder.start()
        ages, starts = [], []
        for _ in range(30):
            physics.step(HOME, 0.04)
            now = time.monotonic()
            starts.append(now)
            ages.append(now - physics._q_time)
        feeding.clear()
        feeder.join()
        ages_ms = np.array(ages[5:]) * 1e3
        intervals_ms = np.diff(starts[5:]) * 1e3
        assert np.median(ages_ms) < 4.0, ages_ms  # on the clock grid: ~10 ms
        assert abs(np.median(intervals_ms) - PERIOD * 1e3) < 4.0, intervals_ms  # the skill's rate kept

        starts = []
        for _ in range(8):  # no state arrives any more: the clock's deadline, one period apart
            physics.step(HOME, 0.04)
            starts.append(time.monotonic())
        assert abs(np.median(np.diff(starts)) * 1e3 - PERIOD * 1e3) < 8.0, np.diff(starts)
        physics.close()
    finally:
        feeding.clear()
        node.destroy_node()
        rclpy.shutdown()


def test_a_new_start_is_in_phase_with_the_state_it_was_computed_from(ros_domain):
    """The first step of a call (or after a pause) counts its period from the arrival of the state it used when that
    is fresh, so the next state is expected mid-window; counted from the step's own start, the next state could
    fall just outside the window and the second step wait out the window (a missed controller cycle)."""
    import time

    import rclpy
    from sensor_msgs.msg import JointState

    from hrl.ros.arm_physics import RosArmPhysics

    rclpy.init()
    node = rclpy.create_node("physics_phase")
    try:
        physics = RosArmPhysics(node, SCENE, ARM, PERIOD)
        state = JointState(name=list(ARM.joint_names), position=list(ARM.home), velocity=[0.0] * 7)
        physics._on_joint_state(state)
        arrived = physics._q_time
        time.sleep(0.3 * PERIOD)  # the skill computes from it meanwhile
        physics.step(HOME, 0.04)  # no state comes after it: returns at the end of the window
        assert physics._deadline == pytest.approx(arrived + PERIOD, abs=1e-9)

        time.sleep(2.5 * PERIOD)  # a pause (between calls): the state is now older than a period
        started = time.monotonic()
        physics.step(HOME, 0.04)
        assert started <= physics._deadline - PERIOD <= started + 0.5 * PERIOD  # counted from the step itself
        physics.close()
    finally:
        node.destroy_node()
        rclpy.shutdown()


def test_thread_priority_is_all_or_nothing_and_says_how_to_allow_it(monkeypatch):
    """A refusal (no CAP_SYS_NICE, no rtprio limit) puts the threads already switched back and says how to allow
    it; 0 touches nothing. (The real switch is checked on a node process in test_arm_policy_node.py.)"""
    import os

    from hrl.ros import runner

    calls = []

    def sched_setscheduler(tid, policy, param):
        calls.append((tid, policy, param.sched_priority))
        if policy == os.SCHED_FIFO and sum(c[1] == os.SCHED_FIFO for c in calls) == 2:
            raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_setscheduler", sched_setscheduler)
    monkeypatch.setattr(os, "listdir", lambda path: ["11", "12", "13"] if path == "/proc/self/task" else [])
    assert runner.set_thread_priority(0) is None and calls == []
    why = runner.set_thread_priority(40)
    assert "SCHED_FIFO refused (Operation not permitted)" in why and "rtprio" in why and "thread_priority 0" in why
    assert calls == [(11, os.SCHED_FIFO, 40), (12, os.SCHED_FIFO, 40), (11, os.SCHED_OTHER, 0)]


def test_the_policy_node_runs_the_learned_skills_in_numpy_with_predicts_actions():
    from hierarchy.tabletop import LearnedSkill, TabletopDomain, make_env
    from hrl.ros.arm_policy_node import numpy_skills

    skills = TabletopDomain.with_skills().skills
    fast, paths = numpy_skills(skills)
    learned = {n for n, s in skills.items() if isinstance(s, LearnedSkill)}
    assert learned and paths == {n: "numpy" for n in learned}
    assert all(fast[n] is skills[n] for n in skills if n not in learned)  # scripted skills as they were
    env = make_env("blocks")
    try:
        env.reset(seed=3)
        rng = np.random.default_rng(0)
        for name in sorted(learned):
            slow, quick = skills[name], fast[name]
            for _ in range(5):
                obs = env.unwrapped.observation_as(slow.goal_mode, slow.block_gripper)
                expected = np.asarray(slow.policy(obs), dtype=float)
                assert np.allclose(np.asarray(quick.policy(obs), dtype=float), expected, atol=1e-5), name
                env.step(rng.uniform(-1, 1, env.action_space.shape))
    finally:
        env.close()
    # a policy NumPy cannot reproduce keeps predict, and says why
    odd = LearnedSkill(lambda obs: np.zeros(3), "reach", True)
    kept, said = numpy_skills({"odd": odd})
    assert kept["odd"] is odd and said["odd"].startswith("predict (") and "no SB3 model" in said["odd"]
