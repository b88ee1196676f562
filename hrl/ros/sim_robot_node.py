"""``sim_robot_node``: the simulated rover as a ROS 2 robot that speaks the standard topics.

Subscribes ``/cmd_vel`` (geometry_msgs/Twist); publishes ``/odom`` (nav_msgs/Odometry) and ``/scan``
(sensor_msgs/LaserScan) at ``control_hz``, keeping wall-clock time like hardware: each timer tick simulates
every control period that has ended since the node started, so a late tick (a loaded machine) does not slow
simulated time down; more than ``max_catch_up_steps`` at once are dropped with a warning (the simulation
then falls behind, as a stalled robot driver would). Like a real base it applies each command from the time
DDS received it (at the simulator's 10 ms physics-step resolution, ``hrl.base_drive``: the same rule the
sim-to-real replay uses), stops when ``/cmd_vel`` goes quiet for ``cmd_timeout_s``, and like a real lidar it
reports "no return" as ``+inf`` (REP 117). The odom frame is the map's frame (the robot starts at its start pose).

``mass_scale``, ``friction``, ``motor_gain`` and ``latency_steps`` make it a different robot than the one the
policies were trained on (the physics backend's ``set_dynamics`` and a command delay): a stand-in for
hardware when testing the sim-to-real tools (``hrl-sim2real``).
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any

import numpy as np
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import LaserScan

from hrl.base_drive import SimulatedBase, make_base_env
from hrl.ros import qos
from hrl.ros.params import Param, ParameterError, declare, non_empty, positive, topic, whole_number
from hrl.ros.sim_clock import received_at, take_pending


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
        from robots.spec import load_robot
        from sim.navigation.physics import Dynamics

        p = self.p = declare(self, PARAMS)
        try:
            spec = load_robot(p["robot"])
        except (FileNotFoundError, ValueError) as err:
            raise ParameterError(f"parameter 'robot' = {p['robot']!r}: {err}") from None
        try:
            self.env = make_base_env(p["map"], p["robot"], p["backend"])
            self.env.unwrapped.physics.set_dynamics(
                Dynamics(mass_scale=p["mass_scale"], friction=p["friction"], motor_gain=p["motor_gain"])
            )
            self.env.reset(seed=0, options={"start": self.env.unwrapped.world.parse_start(p["start"])})
            self.base = SimulatedBase(
                self.env, control_hz=p["control_hz"], t0=time.monotonic(), cmd_timeout_s=p["cmd_timeout_s"],
                latency_s=p["latency_steps"] / p["control_hz"], max_catch_up_steps=p["max_catch_up_steps"],
            )  # fmt: skip
        except (ValueError, KeyError) as err:
            raise ParameterError(f"cannot build the simulated robot: {err}") from None
        self.physics = self.env.unwrapped.physics
        self.angles = spec.lidar.angles()
        self.range_min, self.range_max = spec.lidar.min_range, spec.lidar.max_range
        self.cmd_sub = qos.subscribe(self, Twist, p["cmd_vel_topic"], self.on_cmd, p["cmd_vel_qos"], "cmd_vel_qos")
        self.odom_pub = qos.advertise(self, Odometry, p["odom_topic"], p["odom_qos"], "odom_qos")
        self.scan_pub = qos.advertise(self, LaserScan, p["scan_topic"], p["scan_qos"], "scan_qos")
        self.timer = self.create_timer(self.base.period, self.on_tick)
        self.base.t0 = time.monotonic()  # simulated time starts with the timer
        self.publish_state()
        self.get_logger().info(f"simulated {p['robot']} in {p['map']!r} at {p['control_hz']} Hz")

    def on_cmd(self, msg: Any, info: Any) -> None:
        self.base.command(received_at(info), float(msg.linear.x), float(msg.angular.z))

    def take_pending_commands(self) -> None:
        """Hand the base every /cmd_vel DDS holds for this node but the executor has not called back yet
        (:func:`hrl.ros.sim_clock.take_pending`)."""
        take_pending(self.cmd_sub, self.on_cmd)

    def on_tick(self) -> None:
        now = time.monotonic()
        if self.base.periods_due(now) <= 0:
            return
        self.take_pending_commands()
        due, dropped = self.base.advance(now)
        if dropped:
            self.get_logger().warning(self.base.lag_warning(due, dropped), throttle_duration_sec=5.0)
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
        self.base.commands.clear()


def main(argv: list[str] | None = None) -> int:
    from hrl.ros.runner import run_node

    return run_node(SimRobotNode, argv)


if __name__ == "__main__":
    sys.exit(main())
