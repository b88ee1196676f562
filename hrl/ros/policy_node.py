"""``policy_node``: the shipped (or any) goal-conditioned policy as a ROS 2 base controller.

Subscribes ``/odom`` (nav_msgs/Odometry), ``/scan`` (sensor_msgs/LaserScan), ``/subgoal``
(geometry_msgs/PoseStamped, in the odom frame) and ``/estop`` (std_msgs/Bool); publishes ``/cmd_vel``
(geometry_msgs/Twist) at ``control_hz`` and the subgoal's outcome on ``/subgoal_status`` (std_msgs/String:
``reached x y`` or ``failed x y: why``). Any lidar works: its rays are min-pooled into the policy's
sectors (``hrl.ros.core.adapt_scan``). Safety lives here, whatever the policy outputs: commands are
clamped to the limits; stale ``/odom`` or ``/scan``, a non-finite value in a pose, a twist, a scan's
geometry or a subgoal, or a latched ``/estop`` publish zero velocity; shutdown publishes a final zero.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from hrl import DEFAULT_POLICY
from hrl.ros.core import PolicyController, SafetyConfig, SafetyFilter, SubgoalTracker, adapt_scan, finite
from hrl.ros.core import yaw_from_quaternion as _yaw
from hrl.ros.params import Param, non_empty, non_negative, positive, topic


def _control_mode(value: Any) -> str | None:
    return None if value in ("timer", "odom") else "must be 'timer' or 'odom'"


PARAMS = [
    Param("policy", DEFAULT_POLICY, "low-level policy: shipped:<name>, a .zip or a run directory", non_empty),
    Param("control_hz", 20.0, "rate of /cmd_vel (Hz)", positive),
    Param("max_linear", 0.0, "linear speed limit (m/s); 0: the robot spec's", non_negative),
    Param("max_angular", 0.0, "angular speed limit (rad/s); 0: the robot spec's", non_negative),
    Param("stale_timeout_s", 0.5, "stop when /odom or /scan is older than this (s)", positive),
    Param("goal_tolerance", 0.3, "a subgoal is reached within this distance (m)", positive),
    Param("subgoal_budget_s", 60.0, "a subgoal not reached in this time fails (s)", positive),
    Param("stuck_s", 10.0, "a subgoal fails when the distance has not shrunk by 0.15 m for this long (s)", positive),
    Param("odom_frame", "odom", "frame of /odom poses and of accepted subgoals", non_empty),
    Param("odom_topic", "/odom", "nav_msgs/Odometry in", topic),
    Param("scan_topic", "/scan", "sensor_msgs/LaserScan in", topic),
    Param("subgoal_topic", "/subgoal", "geometry_msgs/PoseStamped in (odom frame)", topic),
    Param("estop_topic", "/estop", "std_msgs/Bool in: true latches a stop, false releases it", topic),
    Param("cmd_vel_topic", "/cmd_vel", "geometry_msgs/Twist out", topic),
    Param("status_topic", "/subgoal_status", "std_msgs/String out: 'reached x y' | 'failed x y: why'", topic),
    Param(
        "control_mode",
        "timer",
        "timer: a command every 1/control_hz s; odom: a command per /odom message "
        "(lowest latency; the timer then only watches for stale data)",
        _control_mode,
    ),
    Param(
        "latency_log",
        "",
        "file to write each cycle's /odom-arrival-to-/cmd_vel latency to at exit (JSON)",
        lambda v: None,
    ),
]


def make_node(**overrides: Any) -> Any:
    import rclpy  # noqa: F401  (imported for its side effects on message types)
    from geometry_msgs.msg import PoseStamped, Twist
    from nav_msgs.msg import Odometry
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import LaserScan
    from std_msgs.msg import Bool, String

    from hrl.policy import GoalPolicy
    from hrl.ros.params import ParameterError, declare
    from robots.spec import load_robot

    class PolicyNode(Node):
        def __init__(self) -> None:
            super().__init__("policy_node", parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()])
            p = declare(self, PARAMS)
            self.p = p
            try:
                policy = GoalPolicy.load(p["policy"])
                spec = load_robot(policy.robot_config.name)
            except (FileNotFoundError, ValueError) as err:
                raise ParameterError(f"parameter 'policy' = {p['policy']!r}: {err}") from None
            max_linear = p["max_linear"] or spec.limits.max_linear_velocity
            max_angular = p["max_angular"] or spec.limits.max_angular_velocity
            self.controller = PolicyController(policy, max_linear, max_angular)
            self.safety = SafetyFilter(SafetyConfig(max_linear, max_angular, p["stale_timeout_s"]))
            self.tracker = SubgoalTracker(p["goal_tolerance"], p["subgoal_budget_s"], p["stuck_s"])
            self.pose: tuple[float, float, float] | None = None
            self.velocity = (0.0, 0.0)
            self.ranges: np.ndarray | None = None
            self.odom_time: float | None = None
            self.scan_time: float | None = None
            self.last_reason: str | None = None
            self.cmd_pub = self.create_publisher(Twist, p["cmd_vel_topic"], 10)
            self.status_pub = self.create_publisher(String, p["status_topic"], 10)
            self.create_subscription(Odometry, p["odom_topic"], self.on_odom, 10)
            self.create_subscription(LaserScan, p["scan_topic"], self.on_scan, 10)
            self.create_subscription(PoseStamped, p["subgoal_topic"], self.on_subgoal, 10)
            self.create_subscription(Bool, p["estop_topic"], self.on_estop, 10)
            self.timer = self.create_timer(1.0 / p["control_hz"], self.on_timer)
            self.stopped = False
            self.latencies: list[float] = []  # s from the /odom message a command is based on to its publish
            self.odom_arrival = 0.0
            import gc

            gc.collect()
            gc.freeze()  # the model and libraries never become garbage: keep them out of collections (tail latency)
            self.get_logger().info(
                f"policy {policy.path.name}: {len(self.controller.angles)} lidar sectors, limits "
                f"{max_linear} m/s, {max_angular} rad/s, {p['control_hz']} Hz"
            )

        # -- inputs --------------------------------------------------------------------------------
        def on_odom(self, msg: Any) -> None:
            q, t = msg.pose.pose.orientation, msg.twist.twist
            values = (msg.pose.pose.position.x, msg.pose.pose.position.y, q.x, q.y, q.z, q.w, t.linear.x, t.angular.z)
            if not finite(*values):
                self._bad(self.p["odom_topic"], f"non-finite value in the pose or twist {values}")
                return
            self.safety.input(self.p["odom_topic"], None)
            self.pose = (values[0], values[1], _yaw(*values[2:6]))
            self.velocity = (values[6], values[7])
            self.odom_time = self.odom_arrival = time.monotonic()
            if self.p["control_mode"] == "odom":
                self.on_tick()

        def on_scan(self, msg: Any) -> None:
            geometry = (msg.angle_min, msg.angle_increment, msg.range_min, msg.range_max)
            if not finite(*geometry) or msg.angle_increment == 0 or msg.range_max <= 0:
                self._bad(self.p["scan_topic"], f"unusable scan geometry {geometry}")
                return
            self.safety.input(self.p["scan_topic"], None)
            self.ranges = adapt_scan(
                np.asarray(msg.ranges), *geometry, self.controller.angles, self.controller.max_range
            )
            self.scan_time = time.monotonic()

        def on_subgoal(self, msg: Any) -> None:
            x, y = msg.pose.position.x, msg.pose.position.y
            frame = msg.header.frame_id
            if not finite(x, y):
                self._bad(self.p["subgoal_topic"], f"non-finite subgoal ({x}, {y})")
                self.tracker.goal = None
                return
            if frame and frame != self.p["odom_frame"]:
                self.get_logger().error(f"subgoal in frame {frame!r} ignored: send it in {self.p['odom_frame']!r}")
                return
            self.safety.input(self.p["subgoal_topic"], None)
            self.tracker.set((x, y), time.monotonic())
            self.get_logger().info(f"subgoal ({x:.2f}, {y:.2f})")

        def on_estop(self, msg: Any) -> None:
            if msg.data != self.safety.estop:
                self.get_logger().warn("e-stop latched" if msg.data else "e-stop released")
            self.safety.estop = bool(msg.data)

        def _bad(self, topic_name: str, problem: str) -> None:
            self.safety.input(topic_name, problem)
            self.get_logger().error(f"{topic_name}: {problem}; stopping")

        # -- control loop --------------------------------------------------------------------------
        def on_timer(self) -> None:
            if self.p["control_mode"] == "timer":
                self.on_tick()
            elif self.odom_time is None or time.monotonic() - self.odom_time > self.p["stale_timeout_s"]:
                self.on_tick()  # odom mode: no /odom, no commands; keep publishing the stop

        def on_tick(self) -> None:
            if self.stopped:
                return
            now = time.monotonic()
            v = w = 0.0
            goal = self.tracker.goal
            if goal is not None and self.pose is not None and self.ranges is not None:
                status = self.tracker.update(self.pose[:2], now)
                if status is not None:
                    outcome, _, why = status.partition(": ")
                    text = f"{outcome} {goal[0]:.3f} {goal[1]:.3f}" + (f": {why}" if why else "")
                    self.status_pub.publish(String(data=text))
                    self.get_logger().info(f"subgoal ({goal[0]:.2f}, {goal[1]:.2f}) {status}")
                else:
                    v, w = self.controller.command(self.pose, self.velocity, self.ranges, goal)
            v, w, reason = self.safety.command(v, w, now, self.odom_time, self.scan_time)
            if reason != self.last_reason and reason is not None and goal is not None:
                self.get_logger().warn(f"stopped: {reason}")
            self.last_reason = reason
            self.publish(v, w)
            if self.odom_time is not None and self.p["latency_log"]:
                self.latencies.append(time.monotonic() - self.odom_arrival)

        def publish(self, v: float, w: float) -> None:
            if self.stopped and (v, w) != (0.0, 0.0):
                return
            msg = Twist()
            msg.linear.x, msg.angular.z = float(v), float(w)
            self.cmd_pub.publish(msg)

        def stop(self) -> None:
            self.stopped = True  # no command after the final zero, whatever callback is still queued
            self.timer.cancel()
            for _ in range(3):  # the last words of the node: say them more than once
                self.publish(0.0, 0.0)
                time.sleep(0.02)
            if self.p["latency_log"]:
                import json

                Path(self.p["latency_log"]).write_text(json.dumps(self.latencies))

    return PolicyNode()


def main(argv: list[str] | None = None) -> int:
    from hrl.ros.runner import run_node

    return run_node(make_node, argv)


if __name__ == "__main__":
    sys.exit(main())
