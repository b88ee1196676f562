"""arm_policy_node driving an arm it was never built with (tests/ros/independent_arm.py: rclpy and standard
messages only, the Panda's published DH kinematics), over DDS in separate processes: the reach skill brings the
TCP to a goal (measured with the arm's own kinematics) with every commanded point and every joint state inside the
datasheet's limits; a goal outside the workspace is refused; stale and NaN joint states and a latched e-stop hold
the arm (one hold trajectory, then nothing new, the arm still) and abort the call with the rule; shutdown
publishes a final hold. With command_interface:=twist the simulated arm (sim_arm_node) reaches a goal too."""

import json
import math
import os
import signal
import subprocess
import sys
import time

from geometry_msgs.msg import PointStamped, PoseStamped
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, String
from trajectory_msgs.msg import JointTrajectory

from tests.ros.conftest import ROOT, sched_fifo_allowed, spin_until
from tests.ros.independent_arm import DQ_MAX, Q_MAX, Q_MIN

START = ["0.1", "0.3", "-0.1", "-2.0", "0.0", "2.3", "0.8"]  # TCP near (0.0, 0.0, 0.21) in the world
TOLERANCE = 0.02  # the reach's tolerance (tcp_goal_tolerance); the arm's own kinematics may differ by a few mm
SLACK = 0.01


class Arm:
    """The independent arm in its process, and what the test hears of it and of the policy node."""

    def __init__(self, processes, node, *params):
        log = processes.tmp / "arm.log"
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "tests/ros/independent_arm.py"), *START],
            stdout=open(log, "w"),  # noqa: SIM115
            stderr=subprocess.STDOUT,
        )
        processes.procs.append((proc, log))
        self.policy = processes.start(
            "hrl.ros.arm_policy_node", "scene:=single_cube", "stale_timeout_s:=0.3", "state_timeout_s:=1.0",
            f"tcp_goal_tolerance:={TOLERANCE}", *params,
        )  # fmt: skip
        self.processes, self.node = processes, node
        self.status, self.trajectories, self.states, self.tcp = [], [], [], None
        self.on_moving = None  # called once at the first trajectory that moves the arm (to inject a fault then)
        node.create_subscription(String, "/arm_subgoal_status", lambda m: self.status.append(json.loads(m.data)), 10)
        node.create_subscription(JointTrajectory, "/panda_arm_controller/joint_trajectory", self.on_trajectory, 50)
        node.create_subscription(JointState, "/joint_states", lambda m: self.states.append(list(m.position)[:7]), 50)
        node.create_subscription(PointStamped, "/arm_tcp", self.on_tcp, 10)
        self.goal_pub = node.create_publisher(PoseStamped, "/tcp_goal", 10)
        self.mode = node.create_publisher(String, "/arm_mode", 10)
        self.estop = node.create_publisher(Bool, "/estop", 10)

    def on_trajectory(self, msg):
        points = [list(p.positions) for p in msg.points]
        self.trajectories.append((time.monotonic(), points, [list(p.velocities) for p in msg.points]))
        if self.on_moving is not None and not is_hold(points):
            self.on_moving()
            self.on_moving = None

    def on_tcp(self, msg):
        self.tcp = (msg.point.x, msg.point.y, msg.point.z)

    def log(self):
        return self.processes.log(self.policy)

    def ready(self):
        """The policy node is up (it subscribes /tcp_goal once its skills are loaded) and the arm publishes."""
        up = lambda: self.goal_pub.get_subscription_count() > 0 and self.tcp is not None  # noqa: E731
        assert spin_until(self.node, up, 90), self.log()

    def send(self, x, y, z):
        g = PoseStamped()
        g.header.frame_id = "world"
        g.pose.position.x, g.pose.position.y, g.pose.position.z = x, y, z
        self.goal_pub.publish(g)

    def next_status(self, timeout_s=30):
        n = len(self.status)
        assert spin_until(self.node, lambda: len(self.status) > n, timeout_s), self.log()
        return self.status[n]

    def still(self, seconds=1.0):
        """No new trajectory and no TCP motion (1 mm) for ``seconds``."""
        n, before = len(self.trajectories), self.tcp
        spin_until(self.node, lambda: False, seconds)
        return len(self.trajectories) == n and math.dist(before, self.tcp) < 1e-3


def is_hold(points):
    return all(p == points[0] for p in points)


def within_limits(arm):
    for _, points, velocities in arm.trajectories:
        for p, v in zip(points, velocities, strict=True):
            assert all(lo <= x <= hi for lo, x, hi in zip(Q_MIN, p, Q_MAX, strict=True)), p
            assert all(abs(x) <= m + 1e-9 for x, m in zip(v, DQ_MAX, strict=True)), v
    for q in arm.states:
        if all(math.isfinite(x) for x in q):
            assert all(lo - 1e-9 <= x <= hi + 1e-9 for lo, x, hi in zip(Q_MIN, q, Q_MAX, strict=True)), q


def reach(arm, goal):
    """Send ``goal``; its status, which must be ``reached``, after at most one ``stuck`` near the goal and a second
    call from there. The shipped reach stalls short of 2 cm now and then when its commands come late (a loaded
    machine: benchmarks/skill_latency.py, 2.5 % of goals one control period late), and two fresh-clone CI runs saw
    a reach end stuck (this test's second, 2.6 cm short, in the last). The node saying so is what a planner acts on:
    it calls again, and that call must reach."""
    arm.send(*goal)
    status = arm.next_status()
    if status["outcome"] == "stuck":
        assert status["distance"] < 0.05, (status, arm.log())
        arm.send(*goal)
        status = arm.next_status()
    assert status["outcome"] == "reached", (status, arm.log())
    return status


def test_reach_on_an_independent_arm_within_limits_and_workspace(processes, rclpy_node):
    arm = Arm(processes, rclpy_node, "thread_priority:=1")  # the lowest real-time priority: nothing else starves
    arm.ready()
    said = lambda: "threads under SCHED_FIFO" in arm.log() or "SCHED_FIFO refused" in arm.log()  # noqa: E731
    assert spin_until(rclpy_node, said, 60), arm.log()  # set once the node is built, before it spins
    threads = [int(t) for t in os.listdir(f"/proc/{arm.policy.pid}/task")]
    if sched_fifo_allowed():  # every thread of the node (executor, DDS, the skill worker) under SCHED_FIFO
        assert len(threads) > 2 and {os.sched_getscheduler(t) for t in threads} == {os.SCHED_FIFO}
        assert {os.sched_getparam(t).sched_priority for t in threads} == {1}
        assert "threads under SCHED_FIFO, priority 1" in arm.log()
    else:  # refused by the system: said, and the node runs as before
        assert os.SCHED_FIFO not in {os.sched_getscheduler(t) for t in threads}
        assert "SCHED_FIFO refused" in arm.log() and "rtprio" in arm.log()
    goal = (0.1, 0.1, 0.1)
    status = reach(arm, goal)
    spin_until(rclpy_node, lambda: False, 0.3)  # the last trajectory runs out
    assert math.dist(arm.tcp, goal) < TOLERANCE + SLACK, (arm.tcp, status)
    reach(arm, (-0.1, -0.1, 0.25))
    within_limits(arm)
    spin_until(rclpy_node, lambda: False, 0.3)

    arm.send(0.0, 0.0, 0.9)  # above the workspace (the table, z 0..0.5)
    status = arm.next_status(10)
    assert status["outcome"] == "aborted" and "outside the workspace" in status["why"], status
    assert status["steps"] == 0 and arm.still(0.5)

    arm.policy.send_signal(signal.SIGINT)
    n = len(arm.trajectories)
    arm.policy.wait(timeout=20)
    assert spin_until(rclpy_node, lambda: len(arm.trajectories) > n, 5), "no final hold"
    assert is_hold(arm.trajectories[-1][1])
    assert "final hold published" in arm.log()


def test_faults_hold_an_independent_arm(processes, rclpy_node):
    arm = Arm(processes, rclpy_node)
    arm.ready()
    # Each fault strikes on the way to a goal at the far end of the workspace; once it clears, the same goal is
    # reached (the arm was held near where it started); the next fault strikes on the way back.
    ends = [(0.12, 0.12, 0.05), (-0.12, -0.12, 0.35)]
    faults = [("stale", "stale joint state"), ("nan", "is not finite"), ("estop", "e-stop latched")]
    for k, (fault, rule) in enumerate(faults):
        goal = ends[k % 2]
        if fault == "estop":
            arm.on_moving = lambda: arm.estop.publish(Bool(data=True))
        else:
            arm.on_moving = lambda f=fault: arm.mode.publish(String(data=f))
        arm.send(*goal)
        status = arm.next_status()
        assert status["outcome"] == "aborted" and rule in status["why"], (fault, status)
        assert is_hold(arm.trajectories[-1][1]), f"{fault}: the last trajectory is not a hold"
        spin_until(rclpy_node, lambda: False, 0.2)
        assert arm.still(1.0), f"{fault}: the arm moved while held"
        if fault == "estop":
            arm.send(*goal)  # refused while latched
            status = arm.next_status(10)
            assert status["outcome"] == "aborted" and "e-stop latched" in status["why"], status
            assert arm.still(0.5), "moved while the e-stop was latched"
            arm.estop.publish(Bool(data=False))
        else:
            arm.mode.publish(String(data="normal"))
        spin_until(rclpy_node, lambda: False, 0.5)
        arm.send(*goal)
        status = arm.next_status()
        assert status["outcome"] == "reached" and status["steps"] > 0, (f"after {fault}", status)
    within_limits(arm)


def test_the_twist_interface_drives_the_simulated_arm(processes, rclpy_node):
    """command_interface:=twist against sim_arm_node (MuJoCo): the TCP reaches a goal through servo twists in the
    base frame, and the e-stop's hold is a zero twist."""
    from geometry_msgs.msg import TwistStamped

    processes.start("hrl.ros.sim_arm_node", "scene:=single_cube", "camera_hz:=0.0")
    policy = processes.start("hrl.ros.arm_policy_node", "scene:=single_cube", "command_interface:=twist")
    node = rclpy_node
    status, twists, trajectories = [], [], []
    node.create_subscription(String, "/arm_subgoal_status", lambda m: status.append(json.loads(m.data)), 10)
    node.create_subscription(TwistStamped, "/servo_node/delta_twist_cmds", twists.append, 50)
    node.create_subscription(JointTrajectory, "/panda_arm_controller/joint_trajectory", trajectories.append, 10)
    goal_pub = node.create_publisher(PoseStamped, "/tcp_goal", 10)
    estop = node.create_publisher(Bool, "/estop", 10)
    assert spin_until(node, lambda: goal_pub.get_subscription_count() > 0, 90), processes.log(policy)
    goal = PoseStamped()
    goal.header.frame_id = "world"
    goal.pose.position.x, goal.pose.position.y, goal.pose.position.z = 0.1, -0.1, 0.1
    goal_pub.publish(goal)
    assert spin_until(node, lambda: status, 30), processes.log(policy)
    assert status[0]["outcome"] == "reached", status
    assert twists and not trajectories
    assert all(t.header.frame_id == "panda_link0" for t in twists)
    assert max(math.hypot(t.twist.linear.x, t.twist.linear.y, t.twist.linear.z) for t in twists) > 0.05

    goal.pose.position.x, goal.pose.position.y, goal.pose.position.z = -0.1, 0.1, 0.3
    n = len(twists)
    goal_pub.publish(goal)
    assert spin_until(node, lambda: len(twists) > n + 2, 10)
    estop.publish(Bool(data=True))
    assert spin_until(node, lambda: len(status) > 1, 10)
    assert status[1]["outcome"] == "aborted" and "e-stop" in status[1]["why"], status
    last = twists[-1].twist.linear
    assert (last.x, last.y, last.z) == (0.0, 0.0, 0.0)


def test_a_cancelled_call_stops_the_arm_where_it_stands(processes, rclpy_node):
    """A cancel on the calls' topic (hrl.ros.arm_messages.SkillCancel) ends the running call ``aborted`` and the
    arm stops short of its goal: a hold, then nothing new; a cancel of a call that has ended changes nothing."""
    arm = Arm(processes, rclpy_node)
    arm.ready()
    calls = rclpy_node.create_publisher(String, "/arm_subgoal", 10)
    goal = (0.12, 0.12, 0.05)
    call = {"id": "far-1", "skill": "reach", "goal": list(goal), "tolerance": TOLERANCE, "budget": 100}
    arm.on_moving = lambda: calls.publish(String(data=json.dumps({"cancel": "far-1", "why": "by the test"})))
    calls.publish(String(data=json.dumps(call)))
    status = arm.next_status()
    assert status["id"] == "far-1" and status["outcome"] == "aborted", status
    assert status["why"] == "cancelled: by the test" and status["steps"] >= 1, status
    # the hold goes out before the status, on another topic: it may reach us after it
    assert spin_until(rclpy_node, lambda: is_hold(arm.trajectories[-1][1]), 5), "the last trajectory is not a hold"
    spin_until(rclpy_node, lambda: False, 0.2)
    assert arm.still(1.0), "the arm moved after its call was cancelled"
    assert math.dist(arm.tcp, goal) > 2 * TOLERANCE, "the cancel came after the goal was reached"
    calls.publish(String(data=json.dumps({"cancel": "far-1"})))
    assert spin_until(rclpy_node, lambda: "cancel of skill call far-1: no such call" in arm.log(), 10), arm.log()
    arm.send(*goal)  # the arm takes the next call as before
    assert arm.next_status()["outcome"] == "reached"
    within_limits(arm)
