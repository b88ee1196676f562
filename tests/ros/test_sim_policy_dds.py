"""The simulated rover and the policy node, each in its own process, over real DDS."""

import math
import signal

from geometry_msgs.msg import PoseStamped, Twist
from nav_msgs.msg import Odometry, Path
from std_msgs.msg import String

from tests.ros.conftest import spin_until


def test_policy_node_drives_the_simulated_rover_to_a_subgoal(processes, rclpy_node):
    robot = processes.start("hrl.ros.sim_robot_node", "map:=open", "start:=2.0,2.0,0.0")
    policy = processes.start("hrl.ros.policy_node", "control_hz:=20.0")
    node = rclpy_node
    status, odom, cmds = [], [], []
    node.create_subscription(String, "/subgoal_status", lambda m: status.append(m.data), 10)
    node.create_subscription(Odometry, "/odom", lambda m: odom.append(m), 10)
    node.create_subscription(Twist, "/cmd_vel", lambda m: cmds.append((m.linear.x, m.angular.z)), 10)
    pub = node.create_publisher(PoseStamped, "/subgoal", 10)
    # both nodes up: odometry flows and the policy node publishes (zero) commands
    assert spin_until(node, lambda: odom and cmds, 60), processes.log(robot) + processes.log(policy)
    goal = PoseStamped()
    goal.header.frame_id = "odom"
    goal.pose.position.x, goal.pose.position.y = 3.5, 3.0
    pub.publish(goal)
    assert spin_until(node, lambda: status, 40), processes.log(policy)
    assert status[0] == "reached 3.500 3.000"
    p = odom[-1].pose.pose.position
    assert math.dist((p.x, p.y), (3.5, 3.0)) <= 0.35
    assert all(abs(v) <= 0.5 + 1e-6 and abs(w) <= 1.5 + 1e-6 for v, w in cmds)  # the rover's limits
    assert any(abs(v) > 0.1 for v, _ in cmds)
    goal.pose.position.x, goal.pose.position.y = 7.0, 7.0  # drive again, then Ctrl-C while moving
    pub.publish(goal)
    assert spin_until(node, lambda: abs(cmds[-1][0]) > 0.1, 10)
    policy.send_signal(signal.SIGINT)  # Ctrl-C: the node's own stop publishes a final zero
    assert policy.wait(timeout=10) == 0
    n = len(cmds)
    spin_until(node, lambda: False, 0.5)
    assert len(cmds) >= n and cmds[-1] == (0.0, 0.0)


def test_task_through_planner_policy_and_simulated_robot(processes, rclpy_node):
    """Three nodes, three processes: a task on /task ends with the simulated rover at the goal."""

    processes.start("hrl.ros.sim_robot_node", "map:=apartment", "start:=kitchen")
    policy = processes.start("hrl.ros.policy_node", "control_hz:=20.0")
    planner = processes.start("hrl.ros.planner_node", "map:=apartment", "planner:=graph")
    node = rclpy_node
    task_status, plans, odom = [], [], []
    node.create_subscription(String, "/task_status", lambda m: task_status.append(m.data), 10)
    node.create_subscription(Path, "/plan", lambda m: plans.append(m), 10)
    node.create_subscription(Odometry, "/odom", lambda m: odom.append(m), 10)
    pub = node.create_publisher(String, "/task", 10)
    assert spin_until(node, lambda: odom and node.count_subscribers("/task") > 0, 90)
    assert spin_until(node, lambda: node.count_subscribers("/subgoal") > 0, 30)
    pub.publish(String(data="sofa"))
    assert spin_until(node, lambda: task_status, 120), processes.log(planner) + processes.log(policy)
    assert task_status[0] == "done", processes.log(planner)
    assert plans and plans[0].header.frame_id == "odom" and len(plans[0].poses) >= 3
    p = odom[-1].pose.pose.position
    assert math.dist((p.x, p.y), (8.0, 7.2)) <= 0.4  # the sofa


def test_planner_node_reports_unusable_tasks(processes, rclpy_node):
    processes.start("hrl.ros.sim_robot_node", "map:=apartment", "start:=kitchen")
    processes.start("hrl.ros.planner_node", "map:=apartment", "planner:=graph")
    node = rclpy_node
    task_status, odom = [], []
    node.create_subscription(String, "/task_status", lambda m: task_status.append(m.data), 10)
    node.create_subscription(Odometry, "/odom", lambda m: odom.append(m), 10)
    pub = node.create_publisher(String, "/task", 10)
    assert spin_until(node, lambda: odom and node.count_subscribers("/task") > 0, 90)
    pub.publish(String(data="the jacuzzi"))
    assert spin_until(node, lambda: task_status, 20)
    assert task_status[0].startswith("failed: planner 'graph' needs place names (unknown place 'the jacuzzi'")


def test_planner_node_replans_when_subgoals_fail_then_gives_up(processes, rclpy_node):
    """Subgoals that cannot be reached in time fail; the planner replans from where the robot is, at most
    max_replans times, then reports the failure."""
    processes.start("hrl.ros.sim_robot_node", "map:=apartment", "start:=kitchen")
    processes.start("hrl.ros.policy_node", "subgoal_budget_s:=0.3")
    planner = processes.start("hrl.ros.planner_node", "map:=apartment", "max_replans:=1")
    node = rclpy_node
    task_status, plans, odom = [], [], []
    node.create_subscription(String, "/task_status", lambda m: task_status.append(m.data), 10)
    node.create_subscription(Path, "/plan", lambda m: plans.append(m), 10)
    node.create_subscription(Odometry, "/odom", lambda m: odom.append(m), 10)
    pub = node.create_publisher(String, "/task", 10)
    assert spin_until(node, lambda: odom and node.count_subscribers("/task") > 0, 90)
    assert spin_until(node, lambda: node.count_subscribers("/subgoal") > 0, 30)
    pub.publish(String(data="bed"))
    assert spin_until(node, lambda: task_status, 60), processes.log(planner)
    assert task_status[0].startswith("failed: ") and task_status[0].endswith("(replans exhausted)")
    assert len(plans) == 2  # the first plan and one replan
    assert "replanning: attempt 1 failed" in processes.log(planner)


def test_planner_node_with_the_embedded_llm(processes, rclpy_node):
    processes.start("hrl.ros.sim_robot_node", "map:=apartment", "start:=kitchen")
    processes.start("hrl.ros.policy_node")
    planner = processes.start("hrl.ros.planner_node", "map:=apartment", "planner:=llm_goals")
    node = rclpy_node
    task_status, odom = [], []
    node.create_subscription(String, "/task_status", lambda m: task_status.append(m.data), 10)
    node.create_subscription(Odometry, "/odom", lambda m: odom.append(m), 10)
    pub = node.create_publisher(String, "/task", 10)
    assert spin_until(node, lambda: odom and node.count_subscribers("/task") > 0, 120)
    assert spin_until(node, lambda: node.count_subscribers("/subgoal") > 0, 30)
    pub.publish(String(data="Head over to the sofa, please."))
    assert spin_until(node, lambda: task_status, 120), processes.log(planner)
    assert task_status[0] == "done", processes.log(planner)
    p = odom[-1].pose.pose.position
    assert math.dist((p.x, p.y), (8.0, 7.2)) <= 0.4
