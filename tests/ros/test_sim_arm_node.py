"""The simulated arm (``hrl.ros.sim_arm_node``) behind ros2_control's standard interfaces: in its own process
over real DDS it publishes joint states, object poses and camera images, follows joint trajectories, TCP
twists and gripper commands, and refuses trajectories it cannot follow (holding where it is)."""

import math
import time

import numpy as np
import pytest
import rclpy
from builtin_interfaces.msg import Duration
from geometry_msgs.msg import PoseStamped, TwistStamped
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from hrl.ros.params import ParameterError
from hrl.ros.sim_arm_node import CommandError, SimArmNode, TrackedTrajectory, parse_trajectory
from robots.arm import load_arm
from robots.kinematics import KinematicChain
from sim.tabletop.scene import load_scene
from tests.ros.conftest import spin_until

ARM = load_arm("panda")
JOINTS = ARM.joint_names
FINGERS = list(ARM.gripper.joints)
BLOCKS = load_scene("blocks")
TRAJECTORY = "/panda_arm_controller/joint_trajectory"
#: How close (rad) the joints come to a trajectory's last point, and how still (rad) a holding arm stays.
JOINT_TOLERANCE, HOLD_TOLERANCE = 0.01, 0.005


class ArmView:
    """This test's view of the simulated arm: the latest joint state, object poses and camera messages."""

    def __init__(self, node, cameras=()):
        self.node = node
        self.joint_states: list[JointState] = []
        self.poses: dict[str, PoseStamped] = {}
        self.images: dict[str, object] = {}
        node.create_subscription(JointState, "/joint_states", self.joint_states.append, 10)
        for o in BLOCKS.objects:
            node.create_subscription(
                PoseStamped, f"/objects/{o.name}/pose", lambda m, n=o.name: self.poses.__setitem__(n, m), 10
            )
        for c in cameras:
            for suffix, kind in (("image_raw", Image), ("depth/image_raw", Image), ("camera_info", CameraInfo)):
                topic = f"/camera/{c}/{suffix}"
                node.create_subscription(kind, topic, lambda m, t=topic: self.images.__setitem__(t, m), 10)

    def joints(self) -> dict[str, float]:
        js = self.joint_states[-1]
        return dict(zip(js.name, js.position, strict=True))

    def arm(self) -> np.ndarray:
        j = self.joints()
        return np.array([j[n] for n in JOINTS])

    def wait_until_up(self, processes, proc):
        assert spin_until(self.node, lambda: self.joint_states, 90), processes.log(proc)

    def settle(self, seconds):
        spin_until(self.node, lambda: False, seconds)


def trajectory(names, points, stamp_zero=True):
    msg = JointTrajectory()
    msg.joint_names = list(names)
    for positions, t in points:
        pt = JointTrajectoryPoint()
        pt.positions = [float(v) for v in positions]
        pt.time_from_start = Duration(sec=int(t), nanosec=round((t - int(t)) * 1e9))
        msg.points.append(pt)
    return msg


def test_it_publishes_joint_states_object_poses_and_cameras(processes, rclpy_node):
    arm = processes.start("hrl.ros.sim_arm_node", "camera_hz:=2.0", "image_size:=64")
    view = ArmView(rclpy_node, cameras=("front", "wrist"))
    view.wait_until_up(processes, arm)
    assert spin_until(rclpy_node, lambda: len(view.poses) == 3 and len(view.images) == 6, 60), processes.log(arm)
    js = view.joint_states[-1]
    assert list(js.name) == JOINTS + FINGERS and len(js.position) == len(js.velocity) == 9
    assert all(map(math.isfinite, [*js.position, *js.velocity]))
    assert np.allclose(view.arm(), ARM.home, atol=0.05)  # it starts at home, the fingers open
    assert view.joints()[FINGERS[0]] == pytest.approx(ARM.gripper.max_width / 2, abs=0.003)
    for o in BLOCKS.objects:
        pose = view.poses[o.name]
        q = pose.pose.orientation
        assert pose.header.frame_id == "world"
        assert pose.pose.position.z == pytest.approx(o.size[2] / 2, abs=0.005)  # resting on the table
        assert math.hypot(q.w, q.x, q.y, q.z) == pytest.approx(1.0, abs=1e-6)
    for c in ("front", "wrist"):
        rgb, depth = view.images[f"/camera/{c}/image_raw"], view.images[f"/camera/{c}/depth/image_raw"]
        info = view.images[f"/camera/{c}/camera_info"]
        assert (rgb.height, rgb.width, rgb.encoding, rgb.step, len(rgb.data)) == (64, 64, "rgb8", 192, 64 * 64 * 3)
        assert (depth.encoding, depth.step, len(depth.data)) == ("32FC1", 256, 64 * 64 * 4)
        pixels = np.frombuffer(bytes(rgb.data), np.uint8).reshape(64, 64, 3)
        metres = np.frombuffer(bytes(depth.data), "<f4").reshape(64, 64)
        assert pixels.std() > 5  # a scene, not a blank image
        assert np.isfinite(metres).all() and metres.min() > 0.01 and metres.max() <= 3.0 + 1e-6
        fovy = {"front": 50.0, "wrist": 70.0}[c]
        assert info.k[0] == pytest.approx(32 / math.tan(math.radians(fovy) / 2)) and info.k[2] == 32
        assert info.header.frame_id == rgb.header.frame_id == f"{c}_camera_optical_frame"
    # the front camera sees the table 0.5 m below it and ~0.7 m away: the centre pixel is about that far
    front = np.frombuffer(bytes(view.images["/camera/front/depth/image_raw"].data), "<f4").reshape(64, 64)
    assert 0.4 < front[32, 32] < 1.2


@pytest.mark.parametrize("backend", ["mujoco", "pybullet"])
def test_a_trajectory_moves_the_joints_to_its_end_and_bad_ones_are_refused(processes, rclpy_node, backend):
    arm = processes.start("hrl.ros.sim_arm_node", f"backend:={backend}", "camera_hz:=0.0")
    view = ArmView(rclpy_node)
    view.wait_until_up(processes, arm)
    pub = rclpy_node.create_publisher(JointTrajectory, TRAJECTORY, 10)
    assert spin_until(rclpy_node, lambda: pub.get_subscription_count() > 0, 30)
    q0 = view.arm()
    target = q0 + np.array([0.3, -0.2, 0.25, 0.3, -0.3, 0.2, 0.4])
    # bad: an unknown joint, NaN, time going back, and a joint missing; the arm holds
    renamed = ["panda_joint0", *JOINTS[1:]]
    bad = [
        trajectory(renamed, [(target, 1.0)]),
        trajectory(JOINTS, [([math.nan, *target[1:]], 1.0)]),
        trajectory(JOINTS, [(q0, 0.5), (target, 0.5)]),
        trajectory(JOINTS[:6], [(target[:6], 1.0)]),
    ]
    for msg in bad:
        pub.publish(msg)
    view.settle(1.5)
    refusals = [line for line in processes.log(arm).splitlines() if "refused joint trajectory: " in line]
    reasons = [
        "unknown joint name(s) ['panda_joint0']",
        "point 0 is not finite",
        "point 1: time_from_start 0.500000 s must be >= 0 and increase",
        "must name each of the arm's joints once",
    ]
    assert len(refusals) == 4 and all(why in line for why, line in zip(reasons, refusals, strict=True)), refusals
    assert np.abs(view.arm() - q0).max() < HOLD_TOLERANCE
    # good: 10 points over 1 s, the joints in another order than the spec's (as a controller allows)
    order = JOINTS[::-1]
    points = [((q0 + (target - q0) * k / 10)[::-1], 0.1 * k) for k in range(1, 11)]
    pub.publish(trajectory(order, points))
    assert spin_until(rclpy_node, lambda: np.abs(view.arm() - target).max() < JOINT_TOLERANCE, 30), (
        view.arm() - target,
        processes.log(arm),
    )
    view.settle(1.0)  # then it holds the last point
    assert np.abs(view.arm() - target).max() < JOINT_TOLERANCE


def tcp(view) -> np.ndarray:
    chain = KinematicChain(ARM.urdf, ARM.base_link, ARM.tcp_link)
    return chain.forward(view.arm(), np.array(BLOCKS.robot_base))[0]


def test_a_twist_moves_the_tcp_its_way_and_the_gripper_command_closes_the_fingers(processes, rclpy_node):
    arm = processes.start("hrl.ros.sim_arm_node", "camera_hz:=0.0", "cmd_timeout_s:=0.2")
    view = ArmView(rclpy_node)
    view.wait_until_up(processes, arm)
    twist_pub = rclpy_node.create_publisher(TwistStamped, "/servo_node/delta_twist_cmds", 10)
    grip_pub = rclpy_node.create_publisher(Float64MultiArray, "/panda_hand_controller/commands", 10)
    assert spin_until(rclpy_node, lambda: twist_pub.get_subscription_count() and grip_pub.get_subscription_count(), 30)
    p0 = tcp(view)
    msg = TwistStamped()
    msg.header.frame_id = "panda_link0"
    msg.twist.linear.y = 0.1  # m/s, to the robot's left
    end = time.monotonic() + 1.0
    while time.monotonic() < end:  # a servo's input stream at ~25 Hz
        msg.header.stamp = rclpy_node.get_clock().now().to_msg()
        twist_pub.publish(msg)
        spin_until(rclpy_node, lambda: False, 0.04)
    view.settle(0.5)  # the stream stopped: after cmd_timeout_s the arm stops
    p1 = tcp(view)
    moved = p1 - p0
    assert 0.05 < moved[1] < 0.15, moved  # ~0.1 m in ~1 s (a loaded machine delivers some twists late)
    assert abs(moved[0]) < 0.3 * moved[1] and abs(moved[2]) < 0.3 * moved[1], moved
    view.settle(0.5)
    assert np.linalg.norm(tcp(view) - p1) < 0.002  # stopped: no twist for longer than cmd_timeout_s
    # a twist in a frame the arm does not know is refused
    msg.header.frame_id = "camera"
    twist_pub.publish(msg)
    view.settle(0.5)
    assert np.linalg.norm(tcp(view) - p1) < 0.002
    assert "refused twist: frame 'camera' is neither base_frame" in processes.log(arm)
    # the gripper: both fingers to 1 cm
    grip_pub.publish(Float64MultiArray(data=[0.01, 0.01]))
    assert spin_until(rclpy_node, lambda: all(abs(view.joints()[f] - 0.01) < 0.002 for f in FINGERS), 20), view.joints()


# ---- without DDS: the trajectory rules, latency, parameters ----------------------------------------------


def test_parse_trajectory_reorders_joints_and_names_what_it_refuses():
    times, positions = parse_trajectory(["b", "a"], [([2.0, 1.0], [], 0.5), ([4.0, 3.0], [0.0, 0.0], 1.0)], ["a", "b"])
    assert times.tolist() == [0.5, 1.0] and positions.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    cases = [
        (["a", "c"], [([1, 2], [], 1.0)], r"unknown joint name\(s\) \['c'\]"),
        (["a", "a"], [([1, 2], [], 1.0)], "must name each of the arm's joints once"),
        (["a", "b"], [], "no points"),
        (["a", "b"], [([1], [], 1.0)], "point 0 has 1 positions"),
        (["a", "b"], [([1, math.inf], [], 1.0)], "point 0 is not finite"),
        (["a", "b"], [([1, 2], [], 1.0), ([1, 2], [], 1.0)], r"point 1: time_from_start 1\.000000 s must be >= 0"),
    ]
    for names, points, why in cases:
        with pytest.raises(CommandError, match=why):
            parse_trajectory(names, points, ["a", "b"])


def test_a_tracked_trajectory_holds_then_interpolates_then_holds_its_last_point():
    track = TrackedTrajectory(10.0, np.array([1.0, 2.0]), np.array([[2.0], [4.0]]), hold=np.array([0.0]))
    assert [track.at(t)[0] for t in (9.0, 10.0, 10.5, 11.0, 11.5, 12.0, 20.0)] == [0.0, 0.0, 1.0, 2.0, 3.0, 4.0, 4.0]
    at_zero = TrackedTrajectory(0.0, np.array([0.0, 1.0]), np.array([[2.0], [4.0]]), hold=np.array([0.0]))
    assert at_zero.at(0.0)[0] == 2.0 and at_zero.at(0.5)[0] == 3.0


def test_commands_take_effect_latency_s_after_they_arrive(ros_domain):
    rclpy.init()
    try:
        arm = SimArmNode(latency_s=0.5, camera_hz=0.0)
        t = arm.t0
        arm.command(t, "gripper", 0.02)
        arm.step_period(t + 0.4)
        assert arm.width_target == pytest.approx(ARM.gripper.max_width)
        arm.step_period(t + 0.6)
        assert arm.width_target == 0.02
        arm.destroy_node()
    finally:
        rclpy.try_shutdown()


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"control_hz": 30.0}, "control_hz must divide 500 Hz"),
        ({"cameras": "front,top"}, "parameter 'cameras' = 'front,top'"),
        ({"scene": "kitchen_counter"}, "kitchen_counter"),
        ({"image_size": 1024}, "'image_size' = 1024 must be an integer from 16 to 256"),
        ({"latency_s": -0.1}, "'latency_s' = -0.1 must be a finite number >= 0"),
    ],
)
def test_bad_parameters_stop_the_node_naming_the_value(ros_domain, params, message):
    rclpy.init()
    try:
        with pytest.raises(ParameterError, match=message):
            SimArmNode(**params)
    finally:
        rclpy.try_shutdown()


def test_a_stamped_trajectory_starts_at_its_stamp_and_one_that_ended_before_it_arrived_is_refused(ros_domain):
    rclpy.init()
    try:
        arm = SimArmNode(camera_hz=0.0)
        q0 = arm.q_target.copy()
        msg = trajectory(JOINTS, [(q0 + 0.1, 1.0)])
        in_two_seconds = time.time() + 2.0
        msg.header.stamp.sec, msg.header.stamp.nanosec = int(in_two_seconds), int(in_two_seconds % 1 * 1e9)
        arm.on_trajectory(msg, {"received_timestamp": 0})
        now = time.monotonic()
        arm.step_period(now + 1.0)  # in force, not started: the arm holds
        assert np.allclose(arm.q_target, q0)
        arm.step_period(now + 2.5)  # half way
        assert np.allclose(arm.q_target, q0 + 0.05, atol=0.005)
        an_hour_ago = time.time() - 3600
        msg.header.stamp.sec = int(an_hour_ago)
        arm.on_trajectory(msg, {"received_timestamp": 0})
        assert not arm.pending  # refused: it ended before it arrived
        arm.destroy_node()
    finally:
        rclpy.try_shutdown()
