"""policy_node driving a base it was never trained on (tests/ros/independent_base.py), over DDS:
reaches a subgoal; stale sensors, a NaN pose, bad scan geometry, a NaN subgoal and the e-stop stop it (zero
commands, not silence); commands never exceed the limits;
shutdown publishes a final zero; bad parameters stop the node with a clear message."""

import importlib.util
import math
import signal
import subprocess
import sys
import time

import pytest
from geometry_msgs.msg import PoseStamped, Twist
from std_msgs.msg import Bool, String

from tests.ros.conftest import ROOT, spin_until


def recent(cmds, seconds):
    now = time.monotonic()
    return [c for t, *c in cmds if now - t <= seconds]


def stopped(cmds, seconds=0.5):
    """A stop is commands that are zero, not silence: at least 5 in the window, every one of them zero."""
    window = recent(cmds, seconds)
    return len(window) >= 5 and all(c == [0.0, 0.0] for c in window)


def moving(cmds):
    return any(abs(v) > 0.05 for v, _ in recent(cmds, 0.2))


def test_policy_node_on_an_independent_base(processes, rclpy_node):
    base = subprocess.Popen([sys.executable, str(ROOT / "tests/ros/independent_base.py"), "2.0", "2.0", "0.0"])
    processes.procs.append((base, processes.tmp / "base.log"))
    (processes.tmp / "base.log").write_text("")
    policy = processes.start("hrl.ros.policy_node", "control_hz:=20.0", "stale_timeout_s:=0.4")
    node = rclpy_node
    status, cmds = [], []
    node.create_subscription(String, "/subgoal_status", lambda m: status.append(m.data), 10)
    node.create_subscription(Twist, "/cmd_vel", lambda m: cmds.append((time.monotonic(), m.linear.x, m.angular.z)), 50)
    goal_pub = node.create_publisher(PoseStamped, "/subgoal", 10)
    mode = node.create_publisher(String, "/base_mode", 10)
    estop = node.create_publisher(Bool, "/estop", 10)

    def send_goal(x, y):
        g = PoseStamped()
        g.header.frame_id = "odom"
        g.pose.position.x, g.pose.position.y = x, y
        goal_pub.publish(g)

    assert spin_until(node, lambda: len(cmds) > 5, 60), processes.log(policy)
    send_goal(4.0, 3.5)
    assert spin_until(node, lambda: status, 40), processes.log(policy)
    assert status[0] == "reached 4.000 3.500"

    send_goal(1.5, 4.5)  # a long way: the faults below happen while it drives
    assert spin_until(node, lambda: moving(cmds), 10)
    for fault in ("stale", "nan", "bad_scan"):
        mode.publish(String(data=fault))
        assert spin_until(node, lambda: stopped(cmds), 5), fault
        mode.publish(String(data="normal"))
        assert spin_until(node, lambda: moving(cmds), 5), fault
    bad = PoseStamped()
    bad.header.frame_id = "odom"
    bad.pose.position.x = math.nan
    goal_pub.publish(bad)  # a NaN subgoal: stop until a usable one arrives
    assert spin_until(node, lambda: stopped(cmds), 5), "NaN subgoal"
    send_goal(1.5, 4.5)
    assert spin_until(node, lambda: moving(cmds), 5), "a usable subgoal again"
    estop.publish(Bool(data=True))
    assert spin_until(node, lambda: stopped(cmds), 5), "e-stop"
    spin_until(node, lambda: False, 1.0)
    assert stopped(cmds, 1.0), "the e-stop stays latched"
    estop.publish(Bool(data=False))
    assert spin_until(node, lambda: moving(cmds), 5), "released"
    assert all(abs(v) <= 0.5 + 1e-9 and abs(w) <= 1.5 + 1e-9 for _, v, w in cmds)

    policy.send_signal(signal.SIGTERM)
    policy.wait(timeout=10)
    spin_until(node, lambda: False, 0.5)
    assert cmds[-1][1:] == (0.0, 0.0), "shutdown publishes a final zero"
    text = processes.log(policy)
    assert "e-stop latched" in text and "/odom: non-finite value" in text and "non-finite subgoal (nan" in text
    assert "/scan: angle_increment is 0" in text


@pytest.mark.parametrize(
    ("module", "param", "message"),
    [
        ("hrl.ros.policy_node", "control_hz:=-5.0",
         "parameter 'control_hz' = -5.0 must be a finite number > 0 (rate of /cmd_vel (Hz))"),
        ("hrl.ros.policy_node", "policy:=/no/such/model.zip", "parameter 'policy' = '/no/such/model.zip'"),
        ("hrl.ros.policy_node", "laser_pose:=0.1,0.0", "parameter 'laser_pose' = '0.1,0.0' must be 'x,y,yaw'"),
        ("hrl.ros.policy_node", "scan_qos:=best_effort", "must be one of sensor_data, reliable, latched"),
        ("hrl.ros.planner_node", "planner:=astar", "unknown planner 'astar'; available:"),
        ("hrl.ros.planner_node", "planner_params_file:=/no/such.yaml", "must be an existing YAML file"),
        ("hrl.ros.sim_robot_node", "map:=kitchenette", "cannot build the simulated robot: unknown map 'kitchenette'"),
    ],
)  # fmt: skip
def test_bad_parameter_stops_the_node_with_a_clear_message(ros_domain, module, param, message):
    done = subprocess.run(
        [sys.executable, "-m", module, "--ros-args", "-p", param],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert message in done.stderr


@pytest.mark.skipif(importlib.util.find_spec("tf2_ros") is not None, reason="tf2_ros is installed here")
def test_laser_pose_from_tf_without_tf2_says_what_to_do_instead(ros_domain):
    done = subprocess.run(
        [sys.executable, "-m", "hrl.ros.policy_node", "--ros-args", "-p", "laser_pose:=tf"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert "needs tf2_ros" in done.stderr and "give the pose as 'x,y,yaw' instead" in done.stderr
