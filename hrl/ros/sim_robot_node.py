"""``sim_robot_node``: the simulated rover as a ROS 2 robot that speaks the standard topics.

Subscribes ``/cmd_vel`` (geometry_msgs/Twist); publishes ``/odom`` (nav_msgs/Odometry) and ``/scan``
(sensor_msgs/LaserScan) at ``control_hz``, stepping the simulator (MuJoCo) in wall-clock time. Like a real
base it stops when ``/cmd_vel`` goes quiet for ``cmd_timeout_s``, and like a real lidar it reports "no
return" as ``+inf`` (REP 117). The odom frame is the map's frame (the robot starts at its start pose).

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

from hrl.ros.params import Param, non_empty, positive, topic, whole_number

PARAMS = [
    Param("map", "apartment", "map name or path of a map .yaml", non_empty),
    Param("start", "dock", "a named start of the map, or 'x,y,yaw'", non_empty),
    Param("backend", "mujoco", "physics backend", non_empty),
    Param("robot", "rover", "robot name (robots/<name>/)", non_empty),
    Param("control_hz", 10.0, "simulation steps and /odom, /scan messages per second", positive),
    Param("cmd_timeout_s", 0.5, "stop when /cmd_vel is older than this (s)", positive),
    Param("mass_scale", 1.0, "chassis mass and inertia x this (a different robot than the nominal one)", positive),
    Param("friction", 0.8, "tyre grip and wall friction coefficient (nominal 0.8)", positive),
    Param("motor_gain", 1.0, "velocity achieved per velocity commanded (wheel radius error)", positive),
    Param("latency_steps", 0, "commands take effect this many control periods late", whole_number),
    Param("odom_frame", "odom", "frame of /odom", non_empty),
    Param("base_frame", "base_link", "child frame of /odom", non_empty),
    Param("laser_frame", "laser", "frame of /scan", non_empty),
    Param("cmd_vel_topic", "/cmd_vel", "geometry_msgs/Twist in", topic),
    Param("odom_topic", "/odom", "nav_msgs/Odometry out", topic),
    Param("scan_topic", "/scan", "sensor_msgs/LaserScan out", topic),
]


def make_node(**overrides: Any) -> Any:
    import gymnasium as gym
    from geometry_msgs.msg import Twist
    from nav_msgs.msg import Odometry
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import LaserScan

    import sim  # noqa: F401  (registers the env)
    from hrl.ros.params import ParameterError, declare
    from robots.spec import load_robot

    class SimRobotNode(Node):
        def __init__(self) -> None:
            super().__init__(
                "sim_robot_node", parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()]
            )
            p = declare(self, PARAMS)
            self.p = p
            try:
                spec = load_robot(p["robot"])
            except (FileNotFoundError, ValueError) as err:
                raise ParameterError(f"parameter 'robot' = {p['robot']!r}: {err}") from None
            latency = p["latency_steps"]
            try:
                from sim.physics import Dynamics

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
            lidar = spec.lidar
            self.angles = lidar.angles()
            self.range_min, self.range_max = lidar.min_range, lidar.max_range
            self.cmd = (0.0, 0.0)
            self.cmd_time = -math.inf
            self.create_subscription(Twist, p["cmd_vel_topic"], self.on_cmd, 10)
            self.odom_pub = self.create_publisher(Odometry, p["odom_topic"], 10)
            self.scan_pub = self.create_publisher(LaserScan, p["scan_topic"], 10)
            self.timer = self.create_timer(1.0 / p["control_hz"], self.on_tick)
            self.publish_state()
            self.get_logger().info(f"simulated {p['robot']} in {p['map']!r} at {p['control_hz']} Hz")

        def on_cmd(self, msg: Any) -> None:
            self.cmd = (float(msg.linear.x), float(msg.angular.z))
            self.cmd_time = time.monotonic()

        def on_tick(self) -> None:
            v, w = self.cmd if time.monotonic() - self.cmd_time <= self.p["cmd_timeout_s"] else (0.0, 0.0)
            if not (math.isfinite(v) and math.isfinite(w)):
                v = w = 0.0
            action = np.clip([v / self.max_linear, w / self.max_angular], -1.0, 1.0)
            self.env.step(action)
            self.publish_state()

        def publish_state(self) -> None:
            stamp = self.get_clock().now().to_msg()
            pose, (v, w) = self.physics.pose(), self.physics.velocity()
            odom = Odometry()
            odom.header.stamp, odom.header.frame_id, odom.child_frame_id = (
                stamp,
                self.p["odom_frame"],
                self.p["base_frame"],
            )
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
            self.cmd = (0.0, 0.0)

    return SimRobotNode()


def main(argv: list[str] | None = None) -> int:
    from hrl.ros.runner import run_node

    return run_node(make_node, argv)


if __name__ == "__main__":
    sys.exit(main())
