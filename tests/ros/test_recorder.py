"""The rosbag2 recorder (no ROS install): a run of the simulated rover and the policy node, recorded and
read back with rosbags."""

import signal

from geometry_msgs.msg import PoseStamped
from rosbags.highlevel import AnyReader
from std_msgs.msg import String

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
    assert spin_until(node, lambda: node.count_subscribers("/subgoal") >= 2, 90)  # policy node and recorder
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
