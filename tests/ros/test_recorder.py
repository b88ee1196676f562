"""The rosbag2 recorder (no ROS install): a run of the simulated rover and the policy node, recorded and
read back with rosbags."""

import signal

from geometry_msgs.msg import PoseStamped
from nav_msgs.msg import Odometry
from rosbags.highlevel import AnyReader
from sensor_msgs.msg import LaserScan
from std_msgs.msg import String

from hrl.ros.qos import profile
from tests.ros.conftest import spin_until


def test_recorder_writes_a_bag_that_rosbags_reads(processes, rclpy_node, tmp_path):
    bag = tmp_path / "run_bag"
    processes.start("hrl.ros.sim_robot_node", "map:=open", "start:=2.0,2.0,0.0")
    policy = processes.start("hrl.ros.policy_node")
    recorder = processes.start("hrl.ros.recorder", f"output:={bag}")
    node = rclpy_node
    status = []
    node.create_subscription(String, "/subgoal_status", lambda m: status.append(m.data), 10)
    pub = node.create_publisher(PoseStamped, "/subgoal", 10)
    assert spin_until(node, lambda: pub.get_subscription_count() >= 2, 90)  # matched the policy node and recorder
    goal = PoseStamped()
    goal.header.frame_id = "odom"
    goal.pose.position.x, goal.pose.position.y = 3.0, 2.5
    pub.publish(goal)
    assert spin_until(node, lambda: status, 40), processes.log(policy)
    spin_until(node, lambda: False, 1.0)  # the recorder hears it too
    recorder.send_signal(signal.SIGINT)
    recorder.wait(timeout=20)
    assert recorder.returncode == 0, processes.log(recorder)
    assert (bag / "metadata.yaml").is_file()
    with AnyReader([bag]) as reader:
        counts = {c.topic: c.msgcount for c in reader.connections}
        assert counts["/odom"] > 10 and counts["/scan"] > 10 and counts["/cmd_vel"] > 10
        assert counts["/subgoal"] == 1 and counts["/subgoal_status"] == 1
        conn = next(c for c in reader.connections if c.topic == "/subgoal_status")
        msgs = [reader.deserialize(raw, conn.msgtype) for conn_, _, raw in reader.messages([conn])]
    assert msgs[0].data == "reached 3.000 2.500"


def test_recorder_hears_best_effort_sensor_publishers(processes, rclpy_node, tmp_path):
    """A lidar or odometry driver publishing best effort (sensor-data QoS) is recorded: the recorder
    subscribes to sensor streams with sensor-data QoS, which hears both kinds of publisher."""
    bag = tmp_path / "best_effort_bag"
    recorder = processes.start("hrl.ros.recorder", f"output:={bag}", "topics:=/odom,/scan,/task")
    node = rclpy_node
    odom_pub = node.create_publisher(Odometry, "/odom", profile("sensor_data"))
    scan_pub = node.create_publisher(LaserScan, "/scan", profile("sensor_data"))
    task_pub = node.create_publisher(String, "/task", profile("sensor_data"))  # not a sensor: not heard
    assert spin_until(node, lambda: scan_pub.get_subscription_count() and odom_pub.get_subscription_count(), 60)
    scan = LaserScan()
    scan.angle_min, scan.angle_max, scan.angle_increment, scan.range_max = -1.0, 1.0, 0.5, 5.0
    scan.ranges = [1.0] * 5
    for _ in range(20):
        odom_pub.publish(Odometry())
        scan_pub.publish(scan)
        task_pub.publish(String(data="fridge"))
        spin_until(node, lambda: False, 0.05)
    spin_until(node, lambda: False, 0.5)
    recorder.send_signal(signal.SIGINT)
    recorder.wait(timeout=20)
    log = processes.log(recorder)
    assert recorder.returncode == 0, log
    with AnyReader([bag]) as reader:
        counts = {c.topic: c.msgcount for c in reader.connections}
    assert counts["/odom"] >= 10 and counts["/scan"] >= 10, counts
    # /task is reliable (qos), so a best-effort publisher is not heard, and the recorder says why
    assert counts["/task"] == 0 and "/task: a publisher's QoS is incompatible" in log
