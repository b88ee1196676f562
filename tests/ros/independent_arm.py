"""An arm that is not this project's: nothing but rclpy and standard messages, and its own kinematics (the
Franka Panda's published modified-DH parameters and flange-to-TCP offset, not robots/kinematics.py or the URDF).

It listens like ros2_control's controllers: a ``trajectory_msgs/JointTrajectory`` on
``/panda_arm_controller/joint_trajectory`` replaces the one it follows (time_from_start counted from receipt;
positions linearly interpolated from where the arm is; after the last point it holds it), no joint faster than the
datasheet's speed limits; the fingers take ``std_msgs/Float64MultiArray`` on ``/panda_hand_controller/commands``.
It publishes ``/joint_states`` (9 joints) at 100 Hz, a fixed pose of ``cube`` on ``/objects/cube/pose`` (frame
world) and, for the test, its own TCP (its DH forward kinematics, world frame) on ``/arm_tcp``
(geometry_msgs/PointStamped). ``/arm_mode`` (std_msgs/String) switches faults on: ``stale`` stops /joint_states,
``nan`` publishes a NaN joint position, ``normal`` restores.
Run: python tests/ros/independent_arm.py q1 ... q7
"""

import contextlib
import math
import sys
import time

import rclpy
from geometry_msgs.msg import PointStamped, PoseStamped
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from trajectory_msgs.msg import JointTrajectory

# Franka Emika Panda, modified DH (Craig): a_{i-1} (m), d_i (m), alpha_{i-1} (rad), per joint; then the flange.
DH = [
    (0.0, 0.333, 0.0),
    (0.0, 0.0, -math.pi / 2),
    (0.0, 0.316, math.pi / 2),
    (0.0825, 0.0, math.pi / 2),
    (-0.0825, 0.384, -math.pi / 2),
    (0.0, 0.0, math.pi / 2),
    (0.088, 0.0, math.pi / 2),
]
FLANGE_D = 0.107
TCP_OFFSET = 0.1034  # Franka Hand: the TCP between the fingertips, 0.1034 m beyond the flange along its z
BASE = (-0.6, 0.0, 0.0)  # where this arm stands in the test's world (the scenes' robot base)
# Datasheet limits (rad, rad/s): the real robot's, somewhat tighter than many URDFs'.
Q_MIN = [-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973]
Q_MAX = [2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973]
DQ_MAX = [2.1750, 2.1750, 2.1750, 2.1750, 2.6100, 2.6100, 2.6100]
NAMES = [f"panda_joint{i}" for i in range(1, 8)] + ["panda_finger_joint1", "panda_finger_joint2"]
CUBE = (0.05, -0.05, 0.02)
DT = 0.01


def _matmul(a, b):
    return [[sum(a[i][k] * b[k][j] for k in range(4)) for j in range(4)] for i in range(4)]


def _link(a, d, alpha, theta):
    ca, sa, ct, st = math.cos(alpha), math.sin(alpha), math.cos(theta), math.sin(theta)
    return [
        [ct, -st, 0.0, a],
        [st * ca, ct * ca, -sa, -d * sa],
        [st * sa, ct * sa, ca, d * ca],
        [0.0, 0.0, 0.0, 1.0],
    ]


def tcp(q):
    """The TCP in the world frame (m) for joint positions ``q`` (7)."""
    t = [[1.0 if i == j else 0.0 for j in range(4)] for i in range(4)]
    for (a, d, alpha), theta in zip(DH, q, strict=True):
        t = _matmul(t, _link(a, d, alpha, theta))
    t = _matmul(t, _link(0.0, FLANGE_D + TCP_OFFSET, 0.0, 0.0))
    return tuple(t[i][3] + BASE[i] for i in range(3))


class Arm(Node):
    def __init__(self, q):
        super().__init__("independent_arm")
        self.q, self.dq, self.finger = list(q), [0.0] * 7, 0.02
        self.mode = "normal"
        self.start, self.points, self.received = list(q), [], 0.0  # the trajectory being followed
        self.create_subscription(JointTrajectory, "/panda_arm_controller/joint_trajectory", self.on_trajectory, 10)
        self.create_subscription(Float64MultiArray, "/panda_hand_controller/commands", self.on_gripper, 10)
        self.create_subscription(String, "/arm_mode", lambda m: setattr(self, "mode", m.data), 10)
        self.states = self.create_publisher(JointState, "/joint_states", 10)
        self.cube = self.create_publisher(PoseStamped, "/objects/cube/pose", 10)
        self.tcp = self.create_publisher(PointStamped, "/arm_tcp", 10)
        self.create_timer(DT, self.tick)

    def on_trajectory(self, msg):
        order = [msg.joint_names.index(n) for n in NAMES[:7]]
        self.start, self.received = list(self.q), time.monotonic()
        self.points = [
            (p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec, [p.positions[i] for i in order])
            for p in msg.points
        ]

    def on_gripper(self, msg):
        self.finger = min(max(msg.data[0], 0.0), 0.04)

    def wanted(self, t):
        """Where the trajectory puts the arm ``t`` s after receipt (linear between points, held after the last)."""
        before_t, before = 0.0, self.start
        for pt, positions in self.points:
            if t <= pt:
                f = (t - before_t) / (pt - before_t) if pt > before_t else 1.0
                return [b + f * (p - b) for b, p in zip(before, positions, strict=True)]
            before_t, before = pt, positions
        return before

    def tick(self):
        target = self.wanted(time.monotonic() - self.received) if self.points else self.q
        for i in range(7):
            step = min(max(target[i] - self.q[i], -DQ_MAX[i] * DT), DQ_MAX[i] * DT)
            self.q[i] = min(max(self.q[i] + step, Q_MIN[i]), Q_MAX[i])
            self.dq[i] = step / DT
        now = self.get_clock().now().to_msg()
        x, y, z = tcp(self.q)
        point = PointStamped()
        point.header.stamp, point.header.frame_id = now, "world"
        point.point.x, point.point.y, point.point.z = x, y, z
        self.tcp.publish(point)
        cube = PoseStamped()
        cube.header.stamp, cube.header.frame_id = now, "world"
        cube.pose.position.x, cube.pose.position.y, cube.pose.position.z = CUBE
        cube.pose.orientation.w = 1.0
        self.cube.publish(cube)
        if self.mode == "stale":
            return
        state = JointState()
        state.header.stamp = now
        state.name = NAMES
        state.position = [*self.q, self.finger, self.finger]
        state.velocity = [*self.dq, 0.0, 0.0]
        if self.mode == "nan":
            state.position[1] = math.nan
        self.states.publish(state)


def main():
    rclpy.init()
    node = Arm([float(v) for v in sys.argv[1:8]])
    with contextlib.suppress(KeyboardInterrupt):
        rclpy.spin(node)
    node.destroy_node()
    rclpy.try_shutdown()


if __name__ == "__main__":
    main()
