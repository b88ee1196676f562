"""``sim_arm_node``: the simulated tabletop arm as a ROS 2 robot behind ros2_control's standard interfaces.

It stands in for a Panda with a joint trajectory controller, a servo node and a gripper forward command
controller (docs/ros.md, "The arm"):

* in: ``trajectory_msgs/JointTrajectory`` (``/panda_arm_controller/joint_trajectory``), tracked as a joint
  trajectory controller does: the target at each control period is the trajectory linearly interpolated at
  (now - its start; start = ``header.stamp``, or the time it was received if the stamp is zero), from the
  commanded position to its first point, then its last point held; a new trajectory replaces the old one.
  Refused (logged with the value and the rule; the arm keeps holding): unknown, missing or repeated joint
  names, non-finite values, points whose sizes do not match the names, ``time_from_start`` that does not
  increase, a stamped trajectory that ended before it arrived.
* in: ``geometry_msgs/TwistStamped`` (``/servo_node/delta_twist_cmds``, MoveIt Servo style): the TCP's linear
  velocity in the arm's base frame (parallel to the world frame), applied as one TCP displacement per control
  period through the controller the skills were trained with (``PandaTabletopEnv.step``'s: the table and
  height clamp, the shared IK ``robots.kinematics.solve_ik``, the joint speed cap), integrated from the
  commanded joints as a servo node does; a twist older than ``cmd_timeout_s`` stops the motion (the arm holds
  its last command).
* in: ``std_msgs/Float64MultiArray`` (``/panda_hand_controller/commands``): the two finger positions
  ``[w/2, w/2]`` (m); the fingers close to their sum.
* out: ``/joint_states`` (the 7 arm joints and the 2 fingers, position and velocity) and one
  ``geometry_msgs/PoseStamped`` per scene object (``/objects/<name>/pose``, world frame) every control period;
  per camera ``sensor_msgs/Image`` rgb8 and 32FC1 depth (m) and ``CameraInfo`` at ``camera_hz``.

Like the simulated rover (``hrl.ros.sim_robot_node``) it keeps wall-clock time like hardware: each timer tick
steps every control period that has ended since the node started (more than ``max_catch_up_steps`` at once
are dropped with a warning), each command takes effect from the time DDS received it (plus ``latency_s``),
and commands still waiting in DDS when a tick comes are taken first. ``object_mass_scale``,
``object_friction`` and ``latency_s`` make it a different robot than the one the skills were trained on.
"""

from __future__ import annotations

import array
import heapq
import itertools
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from geometry_msgs.msg import PoseStamped, TwistStamped
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

from hrl.base_drive import WallClock
from hrl.ros import qos
from hrl.ros.control_actions import (
    INVALID_JOINTS,
    OLD_HEADER_TIMESTAMP,
    GoalError,
    action_interfaces_setting,
    resolve_action_interfaces,
)
from hrl.ros.params import Param, ParameterError, declare, non_empty, positive, topic, whole_number
from hrl.ros.runner import thread_priority
from hrl.ros.sim_clock import received_at, take_pending
from robots.kinematics import solve_ik

#: Largest camera image (pixels a side): MuJoCo's offscreen buffer of the tabletop (sim/tabletop/mujoco.py).
MAX_IMAGE_SIZE = 256


def _at_least_one(value: Any) -> str | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
    return None if ok else "must be an integer >= 1"


def _zero_or_more(value: Any) -> str | None:
    ok = isinstance(value, (int, float)) and math.isfinite(value) and value >= 0
    return None if ok else "must be a finite number >= 0"


def _image_size(value: Any) -> str | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and 16 <= value <= MAX_IMAGE_SIZE
    return None if ok else f"must be an integer from 16 to {MAX_IMAGE_SIZE} (pixels a side)"


PARAMS = [
    Param("scene", "blocks", "tabletop scene: a name in sim/scenes or a path of a scene .yaml", non_empty),
    Param("backend", "mujoco", "physics backend: mujoco | pybullet", non_empty),
    Param(
        "control_hz",
        100.0,
        "control periods per second (a divisor of the 500 Hz physics rate); "
        "/joint_states and object poses are published once per period",
        positive,
    ),
    Param(
        "thread_priority",
        0,
        "0: normal scheduling; 1..98: the node's threads under SCHED_FIFO at this priority (hardware keeps its "
        "clock whatever else runs; needs CAP_SYS_NICE or an rtprio limit, else a warning)",
        thread_priority,
    ),
    Param("layout_seed", 0, "seed of the scene's object layout (scene.sample_layout)", whole_number),
    Param(
        "max_catch_up_steps",
        100,
        "most control periods stepped at once to keep up with wall-clock time (more: dropped, warned); 1 s at "
        "100 Hz, as a real arm keeps moving while its computer stalls",
        _at_least_one,
    ),
    Param(
        "cmd_timeout_s", 0.2, "a twist older than this stops the TCP (s); trajectories hold their last point", positive
    ),
    Param("object_mass_scale", 1.0, "every object's mass (and inertia) x this (a different robot)", positive),
    Param(
        "object_friction", 0.0, "sliding friction of every object; 0: each object's own (the scene's)", _zero_or_more
    ),
    Param("latency_s", 0.0, "every command takes effect this much after it arrived (s)", _zero_or_more),
    Param(
        "camera_hz",
        5.0,
        "camera images per second (each camera: rgb, depth, camera info); 0: no cameras",
        _zero_or_more,
    ),
    Param("image_size", 128, "width and height of the camera images (pixels)", _image_size),
    Param("cameras", "front,wrist", "comma-separated cameras (sim.tabletop.physics.CAMERAS)", non_empty),
    Param("joint_prefix", "", "prefix of every joint name (the robot spec's names otherwise)"),
    Param("world_frame", "world", "frame of the object poses (the scene's world: table top at z = 0)", non_empty),
    Param("base_frame", "panda_link0", "the arm's base frame (parallel to world_frame): frame of twists", non_empty),
    Param("joint_states_topic", "/joint_states", "sensor_msgs/JointState out", topic),
    Param("object_topic_prefix", "/objects", "geometry_msgs/PoseStamped out on <prefix>/<object>/pose", topic),
    Param(
        "camera_topic_prefix",
        "/camera",
        "camera topics out: <prefix>/<camera>/image_raw, "
        "<prefix>/<camera>/depth/image_raw, <prefix>/<camera>/camera_info",
        topic,
    ),
    Param("trajectory_topic", "/panda_arm_controller/joint_trajectory", "trajectory_msgs/JointTrajectory in", topic),
    Param("twist_topic", "/servo_node/delta_twist_cmds", "geometry_msgs/TwistStamped in (TCP velocity)", topic),
    Param("gripper_topic", "/panda_hand_controller/commands", "std_msgs/Float64MultiArray in: finger positions", topic),
    # REP 2003: a driver publishes reliably, so that reliable and best-effort (sensor_data) subscribers both hear it
    qos.qos_param("joint_states_qos", "reliable", "/joint_states out"),
    qos.qos_param("object_pose_qos", "reliable", "the object poses out"),
    qos.qos_param("camera_qos", "reliable", "the camera topics out"),
    qos.qos_param("trajectory_qos", "reliable", "the joint trajectory in"),
    qos.qos_param("twist_qos", "reliable", "the TCP twist in"),
    qos.qos_param("gripper_qos", "reliable", "the gripper command in"),
    Param(
        "action_interfaces",
        "auto",
        "serve control_msgs' FollowJointTrajectory and GripperCommand actions: auto (when control_msgs imports) | "
        "always (stop if it does not) | never",
        action_interfaces_setting,
    ),
    Param(
        "follow_joint_trajectory_action",
        "/panda_arm_controller/follow_joint_trajectory",
        "control_msgs/action/FollowJointTrajectory served (the joint trajectory controller's)",
        topic,
    ),
    Param(
        "gripper_action",
        "/panda_hand_controller/gripper_cmd",
        "control_msgs/action/GripperCommand served: position = the gap between the fingers (m)",
        topic,
    ),
    Param("goal_tolerance", 0.02, "a trajectory goal's default goal tolerance of every joint (rad)", positive),
    Param(
        "goal_time_s",
        1.0,
        "a trajectory goal's default time after its end to settle within goal tolerance (s)",
        positive,
    ),
    Param("gripper_tolerance", 0.002, "a GripperCommand goal is reached within this gap (m)", positive),
    Param(
        "gripper_stall_s",
        0.5,
        "a GripperCommand goal ends stalled when the fingers stop this long short of it",
        positive,
    ),
]


class CommandError(GoalError):
    """A command the arm refuses (it keeps holding); ``code``: the FollowJointTrajectory error code of such a goal."""


class JointNamesError(CommandError):
    """A trajectory that does not name each of the arm's joints once."""

    code = INVALID_JOINTS


class LateTrajectoryError(CommandError):
    """A stamped trajectory that ended before it arrived."""

    code = OLD_HEADER_TIMESTAMP


def _seconds(duration: Any) -> float:
    return duration.sec + duration.nanosec * 1e-9


def parse_trajectory(
    joint_names: Sequence[str], points: Sequence[tuple[Sequence[float], Sequence[float], float]], arm: Sequence[str]
) -> tuple[np.ndarray, np.ndarray]:
    """The times (n,) and positions (n, len(arm)) in ``arm``'s joint order of a trajectory given as its joint
    names and points (positions, velocities, time_from_start in s); :class:`CommandError` naming the value and
    the rule if the arm cannot follow it."""
    names = list(joint_names)
    unknown = [n for n in names if n not in arm]
    if unknown:
        raise JointNamesError(f"unknown joint name(s) {unknown}; this arm's joints: {', '.join(arm)}")
    if len(set(names)) != len(names) or set(names) != set(arm):
        raise JointNamesError(f"joint_names {names} must name each of the arm's joints once: {', '.join(arm)}")
    if not points:
        raise CommandError("the trajectory has no points")
    order = [names.index(n) for n in arm]
    times, positions = [], []
    for i, (pos, vel, t) in enumerate(points):
        if len(pos) != len(names) or len(vel) not in (0, len(names)):
            raise CommandError(
                f"point {i} has {len(pos)} positions and {len(vel)} velocities for {len(names)} joints "
                "(velocities may also be empty)"
            )
        if not all(map(math.isfinite, [*pos, *vel, t])):
            raise CommandError(f"point {i} is not finite: positions {list(pos)}, velocities {list(vel)}, time {t}")
        if t < 0 or (times and t <= times[-1]):
            before = f" after {times[-1]:.6f} s" if times else ""
            raise CommandError(f"point {i}: time_from_start {t:.6f} s must be >= 0 and increase{before}")
        times.append(t)
        positions.append([pos[j] for j in order])
    return np.array(times), np.array(positions, dtype=float)


@dataclass(frozen=True)
class TrackedTrajectory:
    """A trajectory being followed: ``start`` on the node's monotonic clock, ``times`` from it, ``positions``
    in the arm's joint order, ``hold`` the commanded position it starts from."""

    start: float
    times: np.ndarray
    positions: np.ndarray
    hold: np.ndarray

    def at(self, t: float) -> np.ndarray:
        """The joint target at time ``t``: ``hold`` before the start, then linear from ``hold`` to the first
        point at its time_from_start and between points, then the last point."""
        s = t - self.start
        if s < 0:
            return self.hold.copy()
        times, points = self.times, self.positions
        if times[0] > 0:
            times, points = np.concatenate([[0.0], times]), np.vstack([self.hold, points])
        return np.array([np.interp(s, times, points[:, j]) for j in range(points.shape[1])])


def camera_info(name: str, size: int) -> tuple[list[float], list[float]]:
    """K (3 x 3, row-major) and P (3 x 4) of ``name`` rendered at ``size`` x ``size`` pixels: square pixels,
    the principal point at the image centre, the focal length from the camera's vertical field of view."""
    from sim.tabletop.physics import CAMERAS

    f = (size / 2) / math.tan(math.radians(CAMERAS[name].fovy) / 2)
    c = size / 2
    return [f, 0.0, c, 0.0, f, c, 0.0, 0.0, 1.0], [f, 0.0, c, 0.0, 0.0, f, c, 0.0, 0.0, 0.0, 1.0, 0.0]


def parse_cameras(value: str) -> list[str]:
    """The camera names of the ``cameras`` parameter, each one of :data:`sim.tabletop.physics.CAMERAS`."""
    from sim.tabletop.physics import CAMERAS

    names = [c.strip() for c in value.split(",") if c.strip()]
    unknown = [c for c in names if c not in CAMERAS]
    if unknown or not names or len(set(names)) != len(names):
        raise ParameterError(
            f"parameter 'cameras' = {value!r}: name distinct cameras of {', '.join(CAMERAS)}, comma-separated"
        )
    return names


class SimArmNode(Node):
    """The simulated tabletop arm behind a joint trajectory controller, a servo node and a gripper controller;
    ``overrides`` are parameter values."""

    def __init__(self, **overrides: Any) -> None:
        super().__init__("sim_arm_node", parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()])
        from sim.tabletop.env import PandaTabletopEnv

        p = self.p = declare(self, PARAMS)
        self.thread_priority = p["thread_priority"]  # hrl.ros.runner.run_node sets its threads' scheduling
        cameras = parse_cameras(p["cameras"])
        self.cameras = cameras if p["camera_hz"] > 0 else []
        try:
            # the env builds the physics, the kinematic chain and the reset exactly as for the skills
            self.env = PandaTabletopEnv(
                p["scene"], backend=p["backend"], goal_mode="reach", block_gripper=False,
                control_hz=p["control_hz"], max_steps=2**31 - 1,
            )  # fmt: skip
        except (ValueError, FileNotFoundError) as err:
            raise ParameterError(f"cannot build the simulated arm (scene, backend, control_hz): {err}") from None
        scene, arm, physics = self.env.scene, self.env.arm, self.env.physics
        self.physics = physics
        for o in scene.objects:
            physics.set_object_dynamics(o.name, o.mass * p["object_mass_scale"], p["object_friction"] or o.friction)
        layout = scene.sample_layout(np.random.default_rng(p["layout_seed"]))
        self.env.reset(seed=p["layout_seed"], options={"layout": layout})  # the home pose, the fingers open
        physics.set_goal_marker(None)  # no goal sphere in the camera images
        self.period = 1.0 / p["control_hz"]
        self.base = np.asarray(scene.robot_base, dtype=float)
        self.lower, self.upper = (np.array([getattr(j, side) for j in arm.joints]) for side in ("lower", "upper"))
        self.max_joint_step = np.array([j.velocity for j in arm.joints]) * self.period
        self.table = (scene.table.low, scene.table.high)  # the TCP stays above it
        self.arm_joints = [p["joint_prefix"] + n for n in arm.joint_names]
        self.joint_names = self.arm_joints + [p["joint_prefix"] + n for n in arm.gripper.joints]
        self.max_finger = arm.gripper.max_width / 2
        self.objects = [o.name for o in scene.objects]
        # what the arm is commanded to do: joint targets, finger width, and a trajectory or a twist in force
        self.q_target, _ = physics.joints()
        self.width_target = physics.finger_width()
        self.trajectory: TrackedTrajectory | None = None
        self.twist: tuple[float, np.ndarray] | None = None  # (in force since, TCP velocity m/s)
        # the action goals (hrl.ros.sim_arm_actions) whose trajectory / width is in force; None: a topic's
        self.trajectory_goal: Any = None
        self.gripper_goal: Any = None
        # (takes effect at, order, kind, payload, the action goal it came from or None), a heap
        self.pending: list[tuple[float, int, str, Any, Any]] = []
        self._order = itertools.count()
        self._last_width = (time.monotonic(), self.width_target)
        sub = qos.subscribe
        self.subs = [
            (sub(self, JointTrajectory, p["trajectory_topic"], self.on_trajectory, p["trajectory_qos"],
                 "trajectory_qos"), self.on_trajectory),
            (sub(self, TwistStamped, p["twist_topic"], self.on_twist, p["twist_qos"], "twist_qos"), self.on_twist),
            (sub(self, Float64MultiArray, p["gripper_topic"], self.on_gripper, p["gripper_qos"], "gripper_qos"),
             self.on_gripper),
        ]  # fmt: skip
        self.joint_pub = qos.advertise(self, JointState, p["joint_states_topic"], p["joint_states_qos"],
                                       "joint_states_qos")  # fmt: skip
        self.object_pubs = {
            name: qos.advertise(self, PoseStamped, f"{p['object_topic_prefix']}/{name}/pose", p["object_pose_qos"],
                                "object_pose_qos")
            for name in self.objects
        }  # fmt: skip
        self.camera_pubs = {
            c: tuple(
                qos.advertise(self, t, f"{p['camera_topic_prefix']}/{c}/{suffix}", p["camera_qos"], "camera_qos")
                for t, suffix in ((Image, "image_raw"), (Image, "depth/image_raw"), (CameraInfo, "camera_info"))
            )
            for c in self.cameras
        }
        if self.cameras:
            self.publish_images()  # the first render makes the renderers (~1 s of EGL set-up), not a late tick
        self.camera_timer = self.create_timer(1.0 / p["camera_hz"], self.publish_images) if self.cameras else None
        try:
            serve_actions, actions_said = resolve_action_interfaces(p["action_interfaces"])
        except ValueError as err:
            raise ParameterError(str(err)) from None
        self.actions = None
        if serve_actions:
            from hrl.ros.sim_arm_actions import SimArmActions

            self.actions = SimArmActions(
                self, p["follow_joint_trajectory_action"], p["gripper_action"], p["goal_tolerance"],
                p["goal_time_s"], p["gripper_tolerance"], p["gripper_stall_s"],
            )  # fmt: skip
            actions_said += f": FollowJointTrajectory on {p['follow_joint_trajectory_action']}, GripperCommand on "
            actions_said += p["gripper_action"]
        self.timer = self.create_timer(self.period, self.on_tick)
        # simulated time starts with the first tick (on_tick), not at start-up
        self.clock = WallClock(self.period, time.monotonic(), p["max_catch_up_steps"])
        self.started = False
        self.simulated_until = self.clock.t0  # the end of the last simulated control period
        self.publish_state()
        self.get_logger().info(
            f"simulated {arm.name} in scene {scene.name!r} ({p['backend']}, layout seed {p['layout_seed']}) at "
            f"{p['control_hz']:g} Hz; cameras: {', '.join(self.cameras) or 'off'}; {actions_said}"
        )

    # ---- commands in ----------------------------------------------------------------------------------
    def command(self, received: float, kind: str, payload: Any, goal: Any = None) -> None:
        """Put a command received at ``received`` in force ``latency_s`` later; ``goal``: the action goal it came
        from (:mod:`hrl.ros.sim_arm_actions`), None for a topic's."""
        heapq.heappush(self.pending, (received + self.p["latency_s"], next(self._order), kind, payload, goal))

    def refuse(self, what: str, why: str) -> None:
        """Log a refused command: every trajectory (each one a plan), refused twists and gripper commands (streams)
        at most one every 5 s between them."""
        text = f"refused {what}: {why}; the arm keeps its current command"
        if what == "joint trajectory":
            self.get_logger().error(text)
        else:
            self.get_logger().error(text, throttle_duration_sec=5.0)

    def on_trajectory(self, msg: JointTrajectory, info: Any) -> None:
        received = received_at(info)
        try:
            planned = self.plan_trajectory(msg, received)
        except CommandError as err:
            return self.refuse("joint trajectory", str(err))
        self.command(received, "trajectory", planned)

    def plan_trajectory(self, msg: JointTrajectory, received: float) -> tuple[float, np.ndarray, np.ndarray]:
        """(start on the monotonic clock, times, positions in the arm's order) of a trajectory received at
        ``received``; :class:`CommandError` (:class:`JointNamesError`, :class:`LateTrajectoryError`) naming what
        the arm cannot follow."""
        points = [(list(pt.positions), list(pt.velocities), _seconds(pt.time_from_start)) for pt in msg.points]
        times, positions = parse_trajectory(msg.joint_names, points, self.arm_joints)
        stamp = _seconds(msg.header.stamp)
        start = received if stamp == 0 else stamp - time.time() + time.monotonic()
        if start + times[-1] < received:
            raise LateTrajectoryError(
                f"header.stamp {stamp:.3f} + its last time_from_start {times[-1]:.3f} s ended "
                f"{received - start - times[-1]:.3f} s before it arrived (stamp 0: start on receipt)"
            )
        return start + self.p["latency_s"], times, positions

    def on_twist(self, msg: TwistStamped, info: Any) -> None:
        received = received_at(info)
        frame = msg.header.frame_id
        if frame not in ("", self.p["base_frame"], self.p["world_frame"]):
            return self.refuse(
                "twist", f"frame {frame!r} is neither base_frame {self.p['base_frame']!r} nor world_frame "
                f"{self.p['world_frame']!r} (or empty)"
            )  # fmt: skip
        v, w = msg.twist.linear, msg.twist.angular
        values = [v.x, v.y, v.z, w.x, w.y, w.z]
        if not all(map(math.isfinite, values)):
            return self.refuse("twist", f"not finite: {values}")
        if any(values[3:]):
            self.get_logger().warning(
                f"twist angular velocity {values[3:]} ignored: the TCP keeps pointing down (the skills' controller)",
                throttle_duration_sec=5.0,
            )
        self.command(received, "twist", np.array(values[:3]))

    def on_gripper(self, msg: Float64MultiArray, info: Any) -> None:
        received = received_at(info)
        data = list(msg.data)
        if len(data) != 2 or not all(map(math.isfinite, data)):
            return self.refuse("gripper command", f"data {data} must be 2 finite finger positions [w/2, w/2] (m)")
        clamped = [min(max(f, 0.0), self.max_finger) for f in data]
        if clamped != data:
            self.get_logger().warning(
                f"gripper command {data} beyond the fingers' range 0..{self.max_finger} m: clamped to {clamped}",
                throttle_duration_sec=5.0,
            )
        self.command(received, "gripper", sum(clamped))

    def take_pending_commands(self) -> None:
        """Hand the callbacks every message DDS holds for this node but the executor has not called back yet
        (:func:`hrl.ros.sim_clock.take_pending`)."""
        for sub, callback in self.subs:
            take_pending(sub, callback)

    # ---- simulation -----------------------------------------------------------------------------------
    def apply_commands(self, t: float) -> None:
        """Put the commands that have taken effect by ``t`` in force, oldest first (the command of an action goal
        that ended before, cancelled, is skipped)."""
        while self.pending and self.pending[0][0] <= t:
            since, _, kind, payload, goal = heapq.heappop(self.pending)
            if goal is not None and goal.done:
                continue
            if kind == "gripper":
                self.width_target, self.gripper_goal = payload, goal
            elif kind == "trajectory":
                start, times, positions = payload
                self.trajectory = TrackedTrajectory(start, times, positions, self.q_target.copy())
                self.twist, self.trajectory_goal = None, goal
            else:
                self.trajectory, self.twist, self.trajectory_goal = None, (since, payload), None

    def step_period(self, t: float) -> None:
        """Simulate the control period that ends at ``t`` (monotonic clock) with the commands in force."""
        self.apply_commands(t)
        if self.twist is not None and t - self.twist[0] > self.p["cmd_timeout_s"]:
            self.twist = None  # stale: hold where the arm is
        if self.trajectory is not None:
            self.q_target = self.trajectory.at(t)
        elif self.twist is not None:
            self.q_target = self.servo(self.q_target, self.twist[1])
        self.physics.step(self.q_target, self.width_target)
        self.simulated_until = t

    def servo(self, q: np.ndarray, velocity: np.ndarray) -> np.ndarray:
        """The joint target one period of TCP ``velocity`` beyond the commanded joints ``q``: the skills'
        controller (``PandaTabletopEnv.step``: the TCP target clamped to the table and 0..MAX_TCP_HEIGHT, the
        shared IK, every joint within its rated speed), integrated from the commanded joints as a servo node
        does. From the measured joints, the servos' lag within a 10 ms period halved the TCP's speed."""
        from sim.tabletop.env import MAX_TCP_HEIGHT

        q = np.clip(q, self.lower, self.upper)
        fk = self.env.chain.forward(q, self.base)
        (lx, ly), (hx, hy) = self.table
        x, y, z = (fk[0] + velocity * self.period).tolist()
        target = (min(max(x, lx), hx), min(max(y, ly), hy), min(max(z, 0.0), MAX_TCP_HEIGHT))
        q_new = solve_ik(self.env.chain, q, np.array(target), self.lower, self.upper, base=self.base, iterations=2,
                         first=fk)  # fmt: skip
        over = float((np.abs(q_new - q) / self.max_joint_step).max())
        return q + (q_new - q) / over if over > 1.0 else q_new

    @property
    def t0(self) -> float:
        """When simulated time started (monotonic clock)."""
        return self.clock.t0

    def on_tick(self) -> None:
        now = time.monotonic()
        if not self.started:  # the executor's start-up is not a stalled driver
            self.clock.t0, self.started = now - self.period, True
        if self.clock.periods_due(now) <= 0:
            return
        self.take_pending_commands()
        periods, due, dropped = self.clock.catch_up(now)
        for k in periods:
            self.step_period(self.clock.t0 + (k + 1) * self.period)
        if dropped:
            self.get_logger().warning(self.clock.lag_warning(due, dropped), throttle_duration_sec=5.0)
        if self.actions is not None:
            self.actions.update(self.simulated_until)
        self.publish_state()

    # ---- state out ------------------------------------------------------------------------------------
    def publish_state(self) -> None:
        stamp = self.get_clock().now().to_msg()
        q, dq = self.physics.joints()
        now, width = time.monotonic(), self.physics.finger_width()
        finger_speed = (width - self._last_width[1]) / 2 / max(now - self._last_width[0], 1e-6)
        self._last_width = (now, width)
        js = JointState()
        js.header.stamp = stamp
        js.name = self.joint_names
        js.position = [*q.tolist(), width / 2, width / 2]
        js.velocity = [*dq.tolist(), finger_speed, finger_speed]
        self.joint_pub.publish(js)
        for name, pub in self.object_pubs.items():
            s = self.physics.object_state(name)
            msg = PoseStamped()
            msg.header.stamp, msg.header.frame_id = stamp, self.p["world_frame"]
            pos, ori = msg.pose.position, msg.pose.orientation
            pos.x, pos.y, pos.z = s.position.tolist()
            ori.w, ori.x, ori.y, ori.z = s.quaternion.tolist()
            pub.publish(msg)

    def publish_images(self) -> None:
        size = self.p["image_size"]
        stamp = self.get_clock().now().to_msg()
        for name, (rgb_pub, depth_pub, info_pub) in self.camera_pubs.items():
            frame = f"{name}_camera_optical_frame"
            rgb = self.physics.render(name, size, size).astype(np.uint8)
            depth = self.physics.render(name, size, size, depth=True).astype("<f4")  # metres, little-endian
            for pub, pixels, encoding in ((rgb_pub, rgb, "rgb8"), (depth_pub, depth, "32FC1")):
                image = Image()
                image.header.stamp, image.header.frame_id = stamp, frame
                image.height, image.width, image.encoding, image.is_bigendian = size, size, encoding, 0
                image.step = pixels.nbytes // size
                image.data = array.array("B", pixels.tobytes())
                pub.publish(image)
            info = CameraInfo()
            info.header.stamp, info.header.frame_id = stamp, frame
            info.height, info.width, info.distortion_model = size, size, "plumb_bob"
            info.d = [0.0] * 5
            info.k, info.p = camera_info(name, size)
            info.r = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
            info_pub.publish(info)

    def stop(self) -> None:
        """Forget every command: the arm holds where it is commanded to be."""
        self.pending.clear()
        self.trajectory = self.twist = self.trajectory_goal = None

    def hold_here(self) -> None:
        """Stop the arm where it is measured to be (a cancelled or failed trajectory goal, as ros2_controllers'
        joint trajectory controller does): the target becomes the measured joints."""
        self.q_target, _ = self.physics.joints()
        self.trajectory = self.twist = self.trajectory_goal = None

    def hold_fingers_here(self) -> None:
        """Stop the fingers where they are measured to be (a cancelled gripper goal)."""
        self.width_target, self.gripper_goal = self.physics.finger_width(), None

    def destroy_node(self) -> None:
        self.env.close()
        super().destroy_node()


def main(argv: list[str] | None = None) -> int:
    from hrl.ros.runner import run_node

    return run_node(SimArmNode, argv)


if __name__ == "__main__":
    sys.exit(main())
