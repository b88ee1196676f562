"""``policy_node``: the shipped (or any) goal-conditioned policy as a ROS 2 base controller.

Subscribes ``/odom`` (nav_msgs/Odometry), ``/scan`` (sensor_msgs/LaserScan), ``/subgoal``
(geometry_msgs/PoseStamped, in the odom frame, or the map frame through the ``map`` -> ``odom`` transform)
and ``/estop`` (std_msgs/Bool); publishes ``/cmd_vel`` (geometry_msgs/Twist) at ``control_hz`` and the
subgoal's outcome on ``/subgoal_status`` (std_msgs/String: ``reached x y`` or ``failed x y: why``).

Any lidar works: its returns are placed in the base frame through the laser's mounting pose and
min-pooled into the policy's sectors (``hrl.ros.core.ScanAdapter``). Sensor topics are subscribed with
the sensor-data QoS (best effort: hears best-effort and reliable drivers alike); every topic's QoS is a
parameter (``hrl.ros.qos``). Safety lives here, whatever the policy outputs (``hrl.ros.core.SafetyFilter``):
speed and acceleration limits, a proximity stop from the raw scan, a stop on stale data, on a message
that cannot be used (non-finite values, bad scan geometry, an unknown frame) and on a latched ``/estop``;
shutdown publishes a final zero.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from geometry_msgs.msg import PoseStamped, Twist
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import LaserScan
from std_msgs.msg import Bool, String

from hrl import DEFAULT_POLICY
from hrl.ros.core import (
    LatencyLog,
    PolicyController,
    Pose2D,
    SafetyConfig,
    SafetyFilter,
    ScanAdapter,
    SubgoalTracker,
    finite,
    parse_pose2d,
    to_frame,
)
from hrl.ros.core import yaw_from_quaternion as _yaw
from hrl.ros.params import Param, ParameterError, declare, non_empty, non_negative, positive, topic
from hrl.ros.qos import advertise, qos_param, subscribe
from hrl.ros.runner import thread_priority


def _control_mode(value: Any) -> str | None:
    return None if value in ("timer", "odom") else "must be 'timer' or 'odom'"


def _pose_or_tf(value: Any) -> str | None:
    if value == "tf":
        return None
    try:
        parse_pose2d(value)
    except ValueError:
        return "must be 'x,y,yaw' (metres, metres, radians) or 'tf' (looked up with tf2_ros)"
    return None


PARAMS = [
    Param("policy", DEFAULT_POLICY, "low-level policy: shipped:<name>, a .zip or a run directory", non_empty),
    Param("control_hz", 20.0, "rate of /cmd_vel (Hz)", positive),
    Param("max_linear", 0.0, "linear speed limit (m/s); 0: the robot spec's", non_negative),
    Param("max_angular", 0.0, "angular speed limit (rad/s); 0: the robot spec's", non_negative),
    Param("max_linear_accel", 0.0, "linear acceleration limit (m/s^2); 0: the robot spec's", non_negative),
    Param("max_angular_accel", 0.0, "angular acceleration limit (rad/s^2); 0: the robot spec's", non_negative),
    Param(
        "stop_distance",
        0.1,
        "proximity stop: no motion toward a scan return closer than this to the footprint, in its path (m; 0: off)",
        non_negative,
    ),
    Param("stale_timeout_s", 0.5, "stop when /odom or /scan is older than this (s)", positive),
    Param("stamp_tolerance_s", 5.0, "warn when a header stamp is this far from the node's clock (s)", positive),
    Param("goal_tolerance", 0.3, "a subgoal is reached within this distance (m)", positive),
    Param("subgoal_budget_s", 60.0, "a subgoal not reached in this time fails (s)", positive),
    Param("stuck_s", 10.0, "a subgoal fails when the distance has not shrunk by 0.15 m for this long (s)", positive),
    Param("odom_frame", "odom", "frame of /odom poses (header.frame_id) and of subgoals", non_empty),
    Param("base_frame", "base_link", "the robot's frame, where laser_pose is given", non_empty),
    Param("laser_pose", "0,0,0", "the scan frame's pose in base_frame: 'x,y,yaw' (m, m, rad) or 'tf'", _pose_or_tf),
    Param("map_frame", "map", "subgoals in this frame are converted with map_to_odom", non_empty),
    Param("map_to_odom", "0,0,0", "odom's pose in map_frame: 'x,y,yaw' (0,0,0: map = odom) or 'tf'", _pose_or_tf),
    Param("odom_topic", "/odom", "nav_msgs/Odometry in", topic),
    Param("scan_topic", "/scan", "sensor_msgs/LaserScan in", topic),
    Param("subgoal_topic", "/subgoal", "geometry_msgs/PoseStamped in (odom or map frame)", topic),
    Param("estop_topic", "/estop", "std_msgs/Bool in: true latches a stop, false releases it", topic),
    Param("cmd_vel_topic", "/cmd_vel", "geometry_msgs/Twist out", topic),
    Param("status_topic", "/subgoal_status", "std_msgs/String out: 'reached x y' | 'failed x y: why'", topic),
    qos_param("odom_qos", "sensor_data", "/odom in"),
    qos_param("scan_qos", "sensor_data", "/scan in"),
    qos_param("subgoal_qos", "reliable", "/subgoal in"),
    qos_param("estop_qos", "reliable", "/estop in"),
    qos_param("cmd_vel_qos", "reliable", "/cmd_vel out"),
    qos_param("status_qos", "reliable", "/subgoal_status out"),
    Param(
        "control_mode",
        "timer",
        "timer: a command every 1/control_hz s; odom: a command per /odom message "
        "(lowest latency; the timer then only watches for stale data)",
        _control_mode,
    ),
    Param(
        "thread_priority",
        0,
        "0: normal scheduling; 1..98: every thread of the node under SCHED_FIFO at this priority (as ros2_control's "
        "thread_priority; needs CAP_SYS_NICE or an rtprio limit, else a warning): other processes no longer preempt "
        "the control loop",
        thread_priority,
    ),
    Param(
        "latency_log",
        "",
        "file to write each cycle's /odom-arrival-to-/cmd_vel latency, policy and publish times to at exit "
        "(JSON; the last 200000 cycles)",
        lambda v: None,
    ),
]


class PolicyNode(Node):
    """The policy as a base controller; ``overrides`` are parameter values (as ``--ros-args -p``)."""

    def __init__(self, **overrides: Any) -> None:
        super().__init__("policy_node", parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()])
        from hrl.policy import GoalPolicy
        from robots.spec import load_robot

        p = declare(self, PARAMS)
        self.p = p
        try:
            policy = GoalPolicy.load(p["policy"])
            spec = load_robot(policy.robot_config.name)
        except (FileNotFoundError, ValueError) as err:
            raise ParameterError(f"parameter 'policy' = {p['policy']!r}: {err}") from None
        limits = spec.limits
        max_linear = p["max_linear"] or limits.max_linear_velocity
        max_angular = p["max_angular"] or limits.max_angular_velocity
        self.controller = PolicyController(policy, max_linear, max_angular)
        self.thread_priority = p["thread_priority"]  # hrl.ros.runner.run_node sets its threads' scheduling
        self.safety = SafetyFilter(
            SafetyConfig(
                max_linear,
                max_angular,
                p["stale_timeout_s"],
                max_linear_accel=p["max_linear_accel"] or limits.max_linear_acceleration,
                max_angular_accel=p["max_angular_accel"] or limits.max_angular_acceleration,
                stop_distance=p["stop_distance"],
            )
        )
        self.tracker = SubgoalTracker(p["goal_tolerance"], p["subgoal_budget_s"], p["stuck_s"])
        self.tf_buffer = self._tf_buffer() if "tf" in (p["laser_pose"], p["map_to_odom"]) else None
        # with 'tf', the pose is looked up when the first scan names its frame
        laser_pose = (0.0, 0.0, 0.0) if p["laser_pose"] == "tf" else parse_pose2d(p["laser_pose"])
        self.scan = ScanAdapter(self.controller.angles, self.controller.max_range, spec.radius, laser_pose)
        self.laser_frame: str | None = None  # the scan frame whose mounting pose self.scan uses
        self.pose: tuple[float, float, float] | None = None
        self.velocity = (0.0, 0.0)
        self.ranges: Any = None  # the policy's rays (self.scan.ranges) once a usable scan came in
        self.odom_time: float | None = None
        self.scan_time: float | None = None
        self.goal_label: tuple[float, float] = (0.0, 0.0)  # the subgoal as received (for the status)
        self.last_reason: str | None = None
        self.skewed: set[str] = set()  # topics whose stamps are off the clock (warned once per episode)
        self._odom_topic = p["odom_topic"]  # read per message: plain attributes, not dict lookups
        self._scan_topic = p["scan_topic"]
        self._odom_mode = p["control_mode"] == "odom"
        self._twist = Twist()  # reused: publishing serialises it at once
        self.cmd_pub = advertise(self, Twist, p["cmd_vel_topic"], p["cmd_vel_qos"], "cmd_vel_qos")
        self.status_pub = advertise(self, String, p["status_topic"], p["status_qos"], "status_qos")
        subscribe(self, Odometry, p["odom_topic"], self.on_odom, p["odom_qos"], "odom_qos")
        subscribe(self, LaserScan, p["scan_topic"], self.on_scan, p["scan_qos"], "scan_qos")
        subscribe(self, PoseStamped, p["subgoal_topic"], self.on_subgoal, p["subgoal_qos"], "subgoal_qos")
        subscribe(self, Bool, p["estop_topic"], self.on_estop, p["estop_qos"], "estop_qos")
        self.timer = self.create_timer(1.0 / p["control_hz"], self.on_timer)
        self.stopped = False
        # s from the arrival of the /odom message a command is based on to its publish (bounded)
        self.latencies = LatencyLog(("latency_s", "policy_s", "publish_s")) if p["latency_log"] else None
        self.odom_arrival = 0.0
        log = self.get_logger()
        cfg = self.safety.config
        log.info(
            f"policy {policy.path.name}: {len(self.controller.angles)} lidar sectors, limits {max_linear} m/s, "
            f"{max_angular} rad/s, {cfg.max_linear_accel} m/s^2, {cfg.max_angular_accel} rad/s^2, proximity stop "
            f"{cfg.stop_distance} m, {p['control_hz']} Hz, inference {self.controller.inference}; "
            f"QoS /odom {p['odom_qos']}, /scan {p['scan_qos']}"
        )
        log.info(self._frames_summary())

    def _frames_summary(self) -> str:
        p = self.p
        m, o = p["map_frame"], p["odom_frame"]
        laser = "from tf2" if p["laser_pose"] == "tf" else f"{p['laser_pose']} (parameter laser_pose)"
        if p["map_to_odom"] == "tf":
            mapping = f"subgoals in {m!r} are converted with the {m} -> {o} transform from tf2"
        elif parse_pose2d(p["map_to_odom"]) == (0.0, 0.0, 0.0):
            mapping = (
                f"assuming {m!r} = {o!r} (no localisation: odometry drift is not corrected; set map_to_odom "
                f"to a pose, or to 'tf' where a localiser publishes {m} -> {o})"
            )
        else:
            mapping = f"subgoals in {m!r} are converted with map_to_odom {p['map_to_odom']}"
        return f"frames: laser pose in {p['base_frame']!r} {laser}; {mapping}"

    def _tf_buffer(self) -> Any:
        try:
            from tf2_ros import Buffer, TransformListener
        except ImportError:
            raise ParameterError(
                "laser_pose or map_to_odom = 'tf' needs tf2_ros, which comes with a ROS 2 install (it is not on "
                "PyPI): give the pose as 'x,y,yaw' instead"
            ) from None
        buffer = Buffer()
        self.tf_listener = TransformListener(buffer, self)
        return buffer

    def _lookup(self, target: str, source: str) -> tuple[Pose2D | None, str | None]:
        """``source``'s planar pose in ``target`` from tf2, or why not."""
        from rclpy.time import Time
        from tf2_ros import TransformException

        try:
            t = self.tf_buffer.lookup_transform(target, source, Time()).transform  # type: ignore[union-attr]
        except TransformException as err:
            return None, f"no transform {target} <- {source}: {err}"
        q = t.rotation
        tilt = math.hypot(2 * (q.w * q.x + q.y * q.z), 2 * (q.w * q.y - q.z * q.x))
        if tilt > 0.1:  # roll/pitch away from level: a planar pose would misplace the returns
            return None, f"transform {target} <- {source} is tilted or upside down: this node handles level mounts"
        return (t.translation.x, t.translation.y, _yaw(q.x, q.y, q.z, q.w)), None

    # -- inputs ------------------------------------------------------------------------------------
    def on_odom(self, msg: Any) -> None:
        arrival = time.monotonic()
        if msg.header.frame_id != self.p["odom_frame"]:
            self._bad(
                self._odom_topic, f"pose in frame {msg.header.frame_id!r}, not odom_frame {self.p['odom_frame']!r}"
            )
            return
        pose, t = msg.pose.pose, msg.twist.twist
        q = pose.orientation
        values = (pose.position.x, pose.position.y, q.x, q.y, q.z, q.w, t.linear.x, t.angular.z)
        if not finite(*values):
            self._bad(self._odom_topic, f"non-finite value in the pose or twist {values}")
            return
        self._check_stamp(self._odom_topic, msg.header.stamp)
        self.safety.input(self._odom_topic, None)
        self.pose = (values[0], values[1], _yaw(values[2], values[3], values[4], values[5]))
        self.velocity = (values[6], values[7])
        self.odom_time = self.odom_arrival = arrival
        if self._odom_mode:
            self.on_tick()

    def on_scan(self, msg: Any) -> None:
        frame = msg.header.frame_id
        if frame != self.laser_frame and not self._use_laser_frame(frame):
            return
        problem = self.scan.adapt(
            msg.ranges, msg.angle_min, msg.angle_max, msg.angle_increment, msg.range_min, msg.range_max
        )
        if problem is not None:
            self._bad(self._scan_topic, problem)
            return
        self._check_stamp(self._scan_topic, msg.header.stamp)
        self.safety.input(self._scan_topic, None)
        self.safety.clearance_ahead, self.safety.clearance_behind = (
            self.scan.clearance_ahead,
            self.scan.clearance_behind,
        )
        self.ranges = self.scan.ranges
        self.scan_time = time.monotonic()

    def _use_laser_frame(self, frame: str) -> bool:
        """Take the mounting pose for a scan frame seen for the first time; False (and a stop) if unknown."""
        if self.p["laser_pose"] == "tf":
            pose, problem = self._lookup(self.p["base_frame"], frame)
            if pose is None:
                self._bad(self._scan_topic, problem)  # type: ignore[arg-type]
                return False
            self.scan.laser_pose = pose
        elif self.laser_frame is not None:
            self._bad(self._scan_topic, f"scan in frame {frame!r}; laser_pose was taken for {self.laser_frame!r}")
            return False
        self.laser_frame = frame
        x, y, yaw = self.scan.laser_pose
        self.get_logger().info(f"scans in frame {frame!r}: laser at x {x:.3f} m, y {y:.3f} m, yaw {yaw:.3f} rad")
        return True

    def on_subgoal(self, msg: Any) -> None:
        x, y = msg.pose.position.x, msg.pose.position.y
        frame = msg.header.frame_id
        if not finite(x, y):
            self._bad(self.p["subgoal_topic"], f"non-finite subgoal ({x}, {y})")
            self.tracker.goal = None
            return
        self.safety.input(self.p["subgoal_topic"], None)
        goal, problem = self._to_odom(frame, x, y)
        if goal is None:
            self.tracker.goal = None  # nothing to drive to: the robot stops
            self.get_logger().error(f"subgoal ({x:.2f}, {y:.2f}) refused: {problem}")
            self.status_pub.publish(String(data=f"failed {x:.3f} {y:.3f}: {problem}"))
            return
        self.goal_label = (x, y)
        self.tracker.set(goal, time.monotonic())
        self.get_logger().info(f"subgoal ({x:.2f}, {y:.2f}) in {frame!r}")

    def _to_odom(self, frame: str, x: float, y: float) -> tuple[tuple[float, float] | None, str | None]:
        p = self.p
        if frame == p["odom_frame"]:
            return (x, y), None
        if frame != p["map_frame"]:
            return None, f"frame {frame!r} is neither odom_frame {p['odom_frame']!r} nor map_frame {p['map_frame']!r}"
        if p["map_to_odom"] != "tf":
            return to_frame(parse_pose2d(p["map_to_odom"]), x, y), None
        pose, problem = self._lookup(p["map_frame"], p["odom_frame"])
        return (None, problem) if pose is None else (to_frame(pose, x, y), None)

    def on_estop(self, msg: Any) -> None:
        if msg.data != self.safety.estop:
            self.get_logger().warning("e-stop latched" if msg.data else "e-stop released")
        self.safety.estop = bool(msg.data)

    def _bad(self, topic_name: str, problem: str) -> None:
        if self.safety.bad_input.get(topic_name) != problem:  # once per fault, not once per message
            self.get_logger().error(f"{topic_name}: {problem}; stopping")
        self.safety.input(topic_name, problem)

    def _check_stamp(self, topic_name: str, stamp: Any) -> None:
        """Warn (once while it lasts) when stamps are far off this node's clock. Staleness is judged by
        receive time, so a base whose clock is not synchronised still drives; the warning says why its
        stamps cannot be compared."""
        skew = time.time() - (stamp.sec + 1e-9 * stamp.nanosec)
        if abs(skew) <= self.p["stamp_tolerance_s"]:
            self.skewed.discard(topic_name)
        elif topic_name not in self.skewed:
            self.skewed.add(topic_name)
            when = "in the past" if skew > 0 else "in the future"
            self.get_logger().warning(
                f"{topic_name}: header stamps are {abs(skew):.1f} s {when} (clocks not synchronised?); "
                "staleness is judged by receive time"
            )

    # -- control loop ------------------------------------------------------------------------------
    def on_timer(self) -> None:
        if not self._odom_mode:
            self.on_tick()
        elif self.odom_time is None or time.monotonic() - self.odom_time > self.p["stale_timeout_s"]:
            self.on_tick()  # odom mode: no /odom, no commands; keep publishing the stop

    def on_tick(self) -> None:
        if self.stopped:
            return
        now = time.monotonic()
        v = w = 0.0
        policy_s = 0.0
        goal = self.tracker.goal
        if goal is not None and self.pose is not None and self.ranges is not None:
            status = self.tracker.update((self.pose[0], self.pose[1]), now)
            if status is not None:
                outcome, _, why = status.partition(": ")
                gx, gy = self.goal_label
                self.status_pub.publish(String(data=f"{outcome} {gx:.3f} {gy:.3f}" + (f": {why}" if why else "")))
                self.get_logger().info(f"subgoal ({gx:.2f}, {gy:.2f}) {status}")
            else:
                v, w = self.controller.command(self.pose, self.velocity, self.ranges, goal)
                policy_s = time.monotonic() - now
        v, w, reason = self.safety.command(v, w, now, self.odom_time, self.scan_time)
        if reason != self.last_reason and reason is not None and goal is not None:
            self.get_logger().warning(f"stopped: {reason}")
        self.last_reason = reason
        before_publish = time.monotonic()
        self.publish(v, w)
        if self.latencies is not None and self.odom_time is not None:
            done = time.monotonic()
            self.latencies.add(done - self.odom_arrival, policy_s, done - before_publish)

    def publish(self, v: float, w: float) -> None:
        if self.stopped and (v, w) != (0.0, 0.0):
            return
        msg = self._twist
        msg.linear.x, msg.angular.z = float(v), float(w)
        self.cmd_pub.publish(msg)

    def stop(self) -> None:
        self.stopped = True  # no command after the final zero, whatever callback is still queued
        self.timer.cancel()
        for _ in range(3):  # the last words of the node: say them more than once
            self.publish(0.0, 0.0)
            time.sleep(0.02)
        if self.latencies is not None:
            Path(self.p["latency_log"]).write_text(json.dumps(self.latencies.values()))


def main(argv: list[str] | None = None) -> int:
    """Console entry: run the node until Ctrl-C / SIGTERM, then publish the final zero."""
    from hrl.ros.runner import run_node

    return run_node(PolicyNode, argv, freeze_gc=True)


if __name__ == "__main__":
    sys.exit(main())
