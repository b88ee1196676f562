"""``sim_robot_node``: the simulated rover as a ROS 2 robot that speaks the standard topics.

Subscribes ``/cmd_vel`` (geometry_msgs/Twist); publishes ``/odom`` (nav_msgs/Odometry) and ``/scan``
(sensor_msgs/LaserScan) at ``control_hz``, keeping wall-clock time like hardware: each timer tick steps the
simulator (MuJoCo) as many control periods as are due since the node started, so a late tick (a loaded
machine) does not slow simulated time down; more than ``max_catch_up_steps`` at once are dropped with a
warning (the simulation then falls behind, as a stalled robot driver would). Like a real base it stops
when ``/cmd_vel`` goes quiet for ``cmd_timeout_s``, and like a real lidar it reports "no return" as
``+inf`` (REP 117). The odom frame is the map's frame (the robot starts at its start pose).

``mass_scale``, ``friction``, ``motor_gain`` and ``latency_steps`` make it a different robot than the one the
policies were trained on (the physics backend's ``set_dynamics`` and a command delay): a stand-in for
hardware when testing the sim-to-real tools (``hrl-sim2real``).
"""

from __future__ import annotations

import math
import sys
import time
from collections import deque
from typing import Any

import numpy as np
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import LaserScan

from hrl.ros import qos
from hrl.ros.params import Param, ParameterError, declare, non_empty, positive, topic, whole_number


def _at_least_one(value: Any) -> str | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
    return None if ok else "must be an integer >= 1"


PARAMS = [
    Param("map", "apartment", "map name or path of a map .yaml", non_empty),
    Param("start", "dock", "a named start of the map, or 'x,y,yaw'", non_empty),
    Param("backend", "mujoco", "physics backend", non_empty),
    Param("robot", "rover", "robot name (robots/<name>/)", non_empty),
    Param("control_hz", 10.0, "simulation steps and /odom, /scan messages per second", positive),
    Param(
        "max_catch_up_steps",
        10,
        "most control periods stepped at once to keep up with wall-clock time (more: dropped, warned)",
        _at_least_one,
    ),
    Param("cmd_timeout_s", 0.5, "stop when /cmd_vel is older than this (s)", positive),
    Param("mass_scale", 1.0, "chassis mass and inertia x this (a different robot)", positive),
    Param("friction", 0.8, "tyre grip and wall friction coefficient (nominal 0.8)", positive),
    Param("motor_gain", 1.0, "velocity achieved per velocity commanded (wheel radius error)", positive),
    Param("latency_steps", 0, "commands take effect this many control periods late", whole_number),
    Param("odom_frame", "odom", "frame of /odom", non_empty),
    Param("base_frame", "base_link", "child frame of /odom", non_empty),
    Param("laser_frame", "laser", "frame of /scan", non_empty),
    Param("cmd_vel_topic", "/cmd_vel", "geometry_msgs/Twist in", topic),
    Param("odom_topic", "/odom", "nav_msgs/Odometry out", topic),
    Param("scan_topic", "/scan", "sensor_msgs/LaserScan out", topic),
    # REP 2003: a sensor driver publishes reliably (the system default), so that reliable and best-effort
    # (sensor_data) subscribers both hear it; consumers choose best effort
    qos.qos_param("odom_qos", "reliable", "/odom out"),
    qos.qos_param("scan_qos", "reliable", "/scan out"),
    qos.qos_param("cmd_vel_qos", "reliable", "/cmd_vel in"),
]


class SimRobotNode(Node):
    """The simulated rover behind ``/cmd_vel``, ``/odom`` and ``/scan``; ``overrides`` are parameter values."""

    def __init__(self, **overrides: Any) -> None:
        super().__init__("sim_robot_node", parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()])
        import gymnasium as gym

        import sim  # noqa: F401  (registers the env)
        from robots.spec import load_robot
        from sim.physics import Dynamics

        p = self.p = declare(self, PARAMS)
        try:
            spec = load_robot(p["robot"])
        except (FileNotFoundError, ValueError) as err:
            raise ParameterError(f"parameter 'robot' = {p['robot']!r}: {err}") from None
        latency = p["latency_steps"]
        try:
            self.env = gym.make(
                "hrl/RoverNav-v0", map=p["map"], robot=p["robot"], backend=p["backend"], goal_mode="anywhere",
                control_hz=p["control_hz"], max_steps=10**9,
                wrappers=[{"name": "action_latency", "steps": latency}] if latency else None,
            )  # fmt: skip
            self.env.unwrapped.physics.set_dynamics(
                Dynamics(mass_scale=p["mass_scale"], friction=p["friction"], motor_gain=p["motor_gain"])
            )
            self.env.reset(seed=0, options={"start": self.env.unwrapped.world.parse_start(p["start"])})
        except (ValueError, KeyError) as err:
            raise ParameterError(f"cannot build the simulated robot: {err}") from None
        self.physics = self.env.unwrapped.physics
        self.max_linear, self.max_angular = spec.limits.max_linear_velocity, spec.limits.max_angular_velocity
        self.angles = spec.lidar.angles()
        self.range_min, self.range_max = spec.lidar.min_range, spec.lidar.max_range
        # commands as they arrived, (monotonic time, v, w), oldest first; each step takes the one it is due
        self.cmds: deque[tuple[float, float, float]] = deque(maxlen=256)
        self.held = (-math.inf, 0.0, 0.0)  # the latest command already in force
        qos.subscribe(self, Twist, p["cmd_vel_topic"], self.on_cmd, p["cmd_vel_qos"], "cmd_vel_qos")
        self.odom_pub = qos.advertise(self, Odometry, p["odom_topic"], p["odom_qos"], "odom_qos")
        self.scan_pub = qos.advertise(self, LaserScan, p["scan_topic"], p["scan_qos"], "scan_qos")
        self.period = 1.0 / p["control_hz"]
        self.steps = 0  # control periods simulated (stepped or dropped) since t0
        self.dropped = 0  # periods dropped because more than max_catch_up_steps were due at once
        self.timer = self.create_timer(self.period, self.on_tick)
        self.t0 = time.monotonic()
        self.publish_state()
        self.get_logger().info(f"simulated {p['robot']} in {p['map']!r} at {p['control_hz']} Hz")

    def on_cmd(self, msg: Any, info: Any) -> None:
        now = time.monotonic()
        # when DDS received it (system clock), as a base would, not when the executor got round to this
        # callback (late on a loaded machine); rmw implementations without it report 0
        received_ns = info["received_timestamp"]
        t = now - max(0.0, time.time() - received_ns * 1e-9) if received_ns else now
        self.cmds.append((t, float(msg.linear.x), float(msg.angular.z)))

    def command_at(self, t: float) -> tuple[float, float]:
        """The command the base holds at monotonic time ``t`` (not before an earlier call's): the latest
        received by then; zero once it is older than ``cmd_timeout_s`` or not finite."""
        while self.cmds and self.cmds[0][0] <= t:
            self.held = self.cmds.popleft()
        t_cmd, v, w = self.held
        if t - t_cmd > self.p["cmd_timeout_s"] or not (math.isfinite(v) and math.isfinite(w)):
            return 0.0, 0.0
        return v, w

    def periods_due(self, now: float) -> int:
        """Control periods due at ``now`` and not simulated yet (rounded: a tick a little early or late
        still counts as its own period)."""
        return round((now - self.t0) / self.period) - self.steps

    def on_tick(self) -> None:
        now = time.monotonic()
        due = self.periods_due(now)
        if due <= 0:
            return
        cap = self.p["max_catch_up_steps"]
        if due > cap:
            self.dropped += due - cap
            self.get_logger().warning(
                f"{due} control periods due at once (the machine is too slow for {self.p['control_hz']} Hz): "
                f"stepped {cap} (max_catch_up_steps), dropped {due - cap}; simulated time is now "
                f"{self.dropped * self.period:.2f} s behind wall-clock time",
                throttle_duration_sec=5.0,
            )
        # each period stepped ends at t0 + k * period and runs on the command held then (like the replay
        # in hrl-sim2real); dropped periods are the oldest ones
        for k in range(self.steps + due - min(due, cap) + 1, self.steps + due + 1):
            v, w = self.command_at(self.t0 + k * self.period)
            self.env.step(np.clip([v / self.max_linear, w / self.max_angular], -1.0, 1.0))
        self.steps += due
        self.publish_state()

    def publish_state(self) -> None:
        stamp = self.get_clock().now().to_msg()
        pose, (v, w) = self.physics.pose(), self.physics.velocity()
        odom = Odometry()
        odom.header.stamp, odom.header.frame_id, odom.child_frame_id = stamp, self.p["odom_frame"], self.p["base_frame"]
        odom.pose.pose.position.x, odom.pose.pose.position.y = pose.x, pose.y
        odom.pose.pose.orientation.z, odom.pose.pose.orientation.w = math.sin(pose.yaw / 2), math.cos(pose.yaw / 2)
        odom.twist.twist.linear.x, odom.twist.twist.angular.z = v, w
        self.odom_pub.publish(odom)
        ranges = np.asarray(self.physics.lidar(), dtype=np.float64)
        scan = LaserScan()
        scan.header.stamp, scan.header.frame_id = stamp, self.p["laser_frame"]
        n = len(self.angles)
        scan.angle_min = float(self.angles[0])
        scan.angle_increment = float((self.angles[-1] - self.angles[0]) / (n - 1)) if n > 1 else 0.0
        scan.angle_max = float(self.angles[-1])
        scan.range_min, scan.range_max = float(self.range_min), float(self.range_max)
        scan.ranges = [math.inf if r >= self.range_max - 1e-6 else float(r) for r in ranges]
        self.scan_pub.publish(scan)

    def stop(self) -> None:
        self.cmds.clear()
        self.held = (-math.inf, 0.0, 0.0)


def main(argv: list[str] | None = None) -> int:
    from hrl.ros.runner import run_node

    return run_node(SimRobotNode, argv)


if __name__ == "__main__":
    sys.exit(main())
