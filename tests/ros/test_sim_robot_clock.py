"""The simulated robot keeps wall-clock time like hardware: when its timer ticks come late (a busy
executor, a loaded machine) it steps the control periods that are due, so the robot still moves at the
commanded speed in wall-clock time; beyond ``max_catch_up_steps`` it drops periods and says so."""

import math
import time

import pytest
import rclpy
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from rclpy.executors import SingleThreadedExecutor

from hrl.ros.sim_robot_node import SimRobotNode

SPEED = 0.3  # m/s, commanded straight ahead in the open room


def drive_under_load(busy_s: float, every_s: float, seconds: float, **params):
    """Drive the simulated robot at SPEED for ``seconds`` while another callback of the same executor
    blocks it for ``busy_s`` every ``every_s``; returns (robot, odometry (stamp s, x, y) received)."""
    rclpy.init()
    try:
        robot = SimRobotNode(map="open", start="2.0,2.0,0.0", control_hz=20.0, cmd_timeout_s=60.0, **params)
        other = rclpy.create_node("busy_neighbour")
        odom: list[tuple[float, float, float]] = []
        other.create_subscription(
            Odometry,
            "/odom",
            lambda m: odom.append(
                (m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec, m.pose.pose.position.x, m.pose.pose.position.y)
            ),
            100,
        )
        cmd = other.create_publisher(Twist, "/cmd_vel", 10)
        executor = SingleThreadedExecutor()
        executor.add_node(robot)
        executor.add_node(other)
        deadline = time.monotonic() + 10
        msg = Twist()
        msg.linear.x = SPEED
        while robot.base.commands.last is None and time.monotonic() < deadline:  # DDS delivers the command
            cmd.publish(msg)
            executor.spin_once(timeout_sec=0.05)
        assert robot.base.commands.last is not None and robot.base.commands.last[1:] == (SPEED, 0.0)
        other.create_timer(every_s, lambda: time.sleep(busy_s))
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            executor.spin_once(timeout_sec=0.05)
        executor.shutdown()
        other.destroy_node()
        robot.destroy_node()
        return robot, odom
    finally:
        rclpy.try_shutdown()


def speed_after(odom, settle_s=1.0):
    """Mean speed in wall-clock time over the odometry after the first ``settle_s`` (acceleration)."""
    t_first = odom[0][0] + settle_s
    window = [o for o in odom if o[0] >= t_first]
    assert len(window) >= 5, odom
    (t0, x0, y0), (t1, x1, y1) = window[0], window[-1]
    return math.dist((x0, y0), (x1, y1)) / (t1 - t0)


def test_late_ticks_are_caught_up_and_the_robot_moves_at_the_commanded_speed(ros_domain):
    # blocked 0.2 s of every 0.3 s: 4 of every 6 periods come late; rcl would skip them
    robot, odom = drive_under_load(busy_s=0.2, every_s=0.3, seconds=4.0)
    assert robot.base.dropped == 0
    assert speed_after(odom) == pytest.approx(SPEED, rel=0.1)


def test_beyond_max_catch_up_steps_periods_are_dropped_and_counted(ros_domain):
    # blocked 0.5 s at a time = 10 periods at 20 Hz, of which at most 2 are caught up
    robot, odom = drive_under_load(busy_s=0.5, every_s=0.6, seconds=4.0, max_catch_up_steps=2)
    assert robot.base.dropped >= 3 * 7  # ~6 stalls of ~10 periods in 4 s, each dropping all but 2: at least 3 x 7
    assert speed_after(odom) < 0.7 * SPEED  # simulated time fell behind wall-clock time, as announced
