"""A mobile base that is not this project's: nothing but rclpy and standard messages, its own unicycle
kinematics and its own lidar (270 rays over 270 degrees, 5 m, ``inf`` when nothing is hit) in a 6 x 6 m
room. ``/base_mode`` (std_msgs/String) switches faults on: ``stale`` stops /odom and /scan, ``nan``
publishes NaN poses, ``bad_scan`` scans with a zero angle increment, ``normal`` restores.
Run: python tests/ros/independent_base.py x y yaw
"""

import contextlib
import math
import sys

import rclpy
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from rclpy.node import Node
from sensor_msgs.msg import LaserScan
from std_msgs.msg import String

ROOM = 6.0
RAYS, FOV, RANGE_MAX = 270, math.radians(270), 5.0


class Base(Node):
    def __init__(self, x, y, yaw):
        super().__init__("independent_base")
        self.x, self.y, self.yaw, self.v, self.w = x, y, yaw, 0.0, 0.0
        self.mode = "normal"
        self.create_subscription(Twist, "/cmd_vel", self.on_cmd, 10)
        self.create_subscription(String, "/base_mode", lambda m: setattr(self, "mode", m.data), 10)
        self.odom = self.create_publisher(Odometry, "/odom", 10)
        self.scan = self.create_publisher(LaserScan, "/scan", 10)
        self.create_timer(0.02, self.integrate)
        self.create_timer(0.05, self.publish)

    def on_cmd(self, msg):
        self.v, self.w = msg.linear.x, msg.angular.z

    def integrate(self):
        dt = 0.02
        self.x += self.v * math.cos(self.yaw) * dt
        self.y += self.v * math.sin(self.yaw) * dt
        self.yaw = math.atan2(math.sin(self.yaw + self.w * dt), math.cos(self.yaw + self.w * dt))
        self.x, self.y = min(max(self.x, 0.25), ROOM - 0.25), min(max(self.y, 0.25), ROOM - 0.25)

    def ray(self, a):
        dx, dy = math.cos(a), math.sin(a)
        ts = [
            t
            for t in (
                (ROOM - self.x) / dx if dx > 1e-9 else math.inf,
                -self.x / dx if dx < -1e-9 else math.inf,
                (ROOM - self.y) / dy if dy > 1e-9 else math.inf,
                -self.y / dy if dy < -1e-9 else math.inf,
            )
        ]
        d = min(ts)
        return d if d <= RANGE_MAX else math.inf

    def publish(self):
        if self.mode == "stale":
            return
        odom = Odometry()
        odom.header.frame_id = "odom"
        bad = self.mode == "nan"
        odom.pose.pose.position.x = math.nan if bad else self.x
        odom.pose.pose.position.y = self.y
        odom.pose.pose.orientation.z, odom.pose.pose.orientation.w = math.sin(self.yaw / 2), math.cos(self.yaw / 2)
        odom.twist.twist.linear.x, odom.twist.twist.angular.z = self.v, self.w
        self.odom.publish(odom)
        scan = LaserScan()
        scan.header.frame_id = "laser"
        scan.angle_min, scan.angle_max = -FOV / 2, FOV / 2
        inc = FOV / (RAYS - 1)
        scan.angle_increment = 0.0 if self.mode == "bad_scan" else inc
        scan.range_min, scan.range_max = 0.1, RANGE_MAX
        scan.ranges = [self.ray(self.yaw - FOV / 2 + k * inc) for k in range(RAYS)]
        self.scan.publish(scan)


def main():
    rclpy.init()
    node = Base(*(float(v) for v in sys.argv[1:4]))
    with contextlib.suppress(KeyboardInterrupt):
        rclpy.spin(node)
    node.destroy_node()
    rclpy.try_shutdown()


if __name__ == "__main__":
    main()
