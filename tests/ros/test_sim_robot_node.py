"""The simulated robot node takes every /cmd_vel DDS holds for it before it simulates a period, so a command
received inside the period is applied from its arrival even when the executor would call back the timer
first (rclpy runs a ready timer before a ready subscription)."""

import time

import rclpy
from geometry_msgs.msg import Twist

from hrl.ros.sim_robot_node import SimRobotNode


def test_commands_waiting_in_dds_are_taken_with_their_receive_time(ros_domain):
    rclpy.init()
    try:
        robot = SimRobotNode(map="open", start="2.0,2.0,0.0")
        commander = rclpy.create_node("commander")
        pub = commander.create_publisher(Twist, "/cmd_vel", 10)
        msg = Twist()
        msg.linear.x, msg.angular.z = 0.3, -0.2
        # nobody spins the robot node, so its subscription callback never runs: what it holds it took itself
        deadline = time.monotonic() + 20
        while robot.base.commands.last is None and time.monotonic() < deadline:
            pub.publish(msg)  # again until discovery has matched publisher and subscription
            time.sleep(0.05)
            robot.take_pending_commands()
        taken_at = time.monotonic()
        assert robot.base.commands.last is not None, "no /cmd_vel taken within 20 s"
        t, v, w = robot.base.commands.last
        assert (v, w) == (0.3, -0.2)
        assert t <= taken_at  # stamped when DDS received it, not later
        commander.destroy_node()
        robot.destroy_node()
    finally:
        rclpy.try_shutdown()
