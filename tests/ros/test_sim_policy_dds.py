"""The simulated rover and the policy node, each in its own process, over real DDS."""

import math
import os
import signal

from geometry_msgs.msg import PoseStamped, Twist
from nav_msgs.msg import Odometry, Path
from std_msgs.msg import String

from hrl.ros.planner_node import is_final
from tests.ros.conftest import sched_fifo_allowed, spin_until


def test_policy_node_drives_the_simulated_rover_to_a_subgoal(processes, rclpy_node):
    robot = processes.start("hrl.ros.sim_robot_node", "map:=open", "start:=2.0,2.0,0.0")
    # the lowest real-time priority (nothing else starves): every thread of the node under SCHED_FIFO
    policy = processes.start("hrl.ros.policy_node", "control_hz:=20.0", "thread_priority:=1")
    node = rclpy_node
    said = lambda: "threads under SCHED_FIFO" in processes.log(policy) or "SCHED_FIFO refused" in processes.log(policy)  # noqa: E731
    assert spin_until(node, said, 60), processes.log(policy)
    threads = [int(t) for t in os.listdir(f"/proc/{policy.pid}/task")]
    if sched_fifo_allowed():
        assert len(threads) > 2 and {os.sched_getscheduler(t) for t in threads} == {os.SCHED_FIFO}
        assert {os.sched_getparam(t).sched_priority for t in threads} == {1}
    else:  # refused by the system: said, and the node runs as before
        assert os.SCHED_FIFO not in {os.sched_getscheduler(t) for t in threads}
    status, odom, cmds = [], [], []
    said = node.create_subscription(String, "/subgoal_status", lambda m: status.append(m.data), 10)
    node.create_subscription(Odometry, "/odom", lambda m: odom.append(m), 10)
    node.create_subscription(Twist, "/cmd_vel", lambda m: cmds.append((m.linear.x, m.angular.z)), 10)
    pub = node.create_publisher(PoseStamped, "/subgoal", 10)
    # both nodes up: odometry flows, the policy node publishes (zero) commands, and our subgoal writer and its
    # status writer have matched (a volatile message sent before matching is lost)
    matched = lambda: pub.get_subscription_count() > 0 and said.get_publisher_count() > 0  # noqa: E731
    assert spin_until(node, lambda: odom and cmds and matched(), 60), processes.log(robot) + processes.log(policy)
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
    assert spin_until(node, lambda: cmds[-1] == (0.0, 0.0), 10)  # the final zero, however slow the delivery


class Graph:
    """The simulated rover in the apartment's kitchen, a policy node and a planner node, each in its own
    process, and this test's view of /task_status, /plan and /odom."""

    def __init__(self, processes, node, planner=(), policy=(), with_policy=True):
        processes.start("hrl.ros.sim_robot_node", "map:=apartment", "start:=kitchen")
        self.policy = processes.start("hrl.ros.policy_node", *policy) if with_policy else None
        self.planner = processes.start("hrl.ros.planner_node", "map:=apartment", *planner)
        self.processes, self.node = processes, node
        self.status, self.plans, self.odom = [], [], []
        said = node.create_subscription(String, "/task_status", lambda m: self.status.append(m.data), 10)
        plans = node.create_subscription(Path, "/plan", lambda m: self.plans.append(m), 10)
        node.create_subscription(Odometry, "/odom", lambda m: self.odom.append(m), 10)
        self.task = node.create_publisher(String, "/task", 10)
        # matched, not only discovered: a volatile first status or plan sent before matching is lost
        matched = lambda: self.task.get_subscription_count() > 0 and said.get_publisher_count() > 0  # noqa: E731
        assert spin_until(node, lambda: self.odom and matched() and plans.get_publisher_count() > 0, 120)
        if with_policy:
            assert spin_until(node, lambda: node.count_subscribers("/subgoal") > 0, 30)

    def run(self, text, timeout_s):
        """Send a task; its final /task_status (after the 'planning' reports)."""
        self.task.publish(String(data=text))
        assert spin_until(self.node, self.final, timeout_s), self.processes.log(self.planner)
        return self.final()[0]

    def final(self):
        return [s for s in self.status if is_final(s)]

    def at(self, xy, within):
        p = self.odom[-1].pose.pose.position
        return math.dist((p.x, p.y), xy) <= within


def test_task_through_planner_policy_and_simulated_robot(processes, rclpy_node):
    """Three nodes, three processes: a task on /task ends with the simulated rover at the goal."""
    graph = Graph(processes, rclpy_node, planner=("planner:=graph",), policy=("control_hz:=20.0",))
    assert graph.run("sofa", 120) == "done", processes.log(graph.planner)
    plan = graph.plans[0]
    assert plan.header.frame_id == "odom" and len(plan.poses) >= 3
    assert graph.at((8.0, 7.2), 0.4)  # the sofa


def test_planner_node_reports_unusable_tasks(processes, rclpy_node):
    graph = Graph(processes, rclpy_node, planner=("planner:=graph",), with_policy=False)
    status = graph.run("the jacuzzi", 20)
    assert status.startswith("failed: planner 'graph' needs place names (unknown place 'the jacuzzi'")


def test_planner_node_replans_when_subgoals_fail_then_gives_up(processes, rclpy_node):
    """Subgoals that cannot be reached in time fail; the planner replans from where the robot is, at most
    max_replans times, then reports the failure."""
    graph = Graph(processes, rclpy_node, planner=("max_replans:=1",), policy=("subgoal_budget_s:=0.3",))
    status = graph.run("bed", 60)
    assert status.startswith("failed: ") and status.endswith("(replans exhausted)")
    assert len(graph.plans) == 2  # the first plan and one replan
    assert "replanning: attempt 1 failed" in processes.log(graph.planner)


def test_planner_node_with_the_embedded_llm(processes, rclpy_node):
    graph = Graph(processes, rclpy_node, planner=("planner:=llm_goals",))
    assert graph.run("Head over to the sofa, please.", 120) == "done", processes.log(graph.planner)
    assert graph.at((8.0, 7.2), 0.4)
