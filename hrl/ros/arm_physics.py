"""``RosArmPhysics``: the tabletop env's physics interface (:class:`sim.tabletop.physics.TabletopPhysics`) over ROS 2.

The whole tabletop hierarchy runs on :class:`~sim.tabletop.env.PandaTabletopEnv`; with this backend
(``PandaTabletopEnv(scene, backend=RosArmPhysics(...))``) the same skills, IK and clamping drive a real arm (or the
simulated one behind the same topics):

- state: ``/joint_states`` (sensor_msgs/JointState, the spec's arm and finger joints by name; a message may carry
  the arm, the fingers or both, as separate drivers publish them) and ``<object_topic_prefix>/<name>/pose``
  (geometry_msgs/PoseStamped in ``world_frame``, one per scene object; velocities by finite differences over about
  one control period), both with the sensor-data QoS by default. Before the first message joints, width and object
  states are NaN (the env's spaces can be built; :meth:`RosArmPhysics.wait_for_state` before using them).
- ``step(q_target, width)``: the joint target through the safety filter (:mod:`hrl.ros.arm_core`), published as a
  ``trajectory_msgs/JointTrajectory`` for a joint trajectory controller (``command_interface="trajectory"``:
  points at ``trajectory_hz`` from the measured position to the target over one period) or a
  ``geometry_msgs/TwistStamped`` for a servo node (``"twist"``), and the fingers as ``std_msgs/Float64MultiArray``
  ``[width / 2, width / 2]``; or (``"action"``) the same trajectory as a control_msgs ``FollowJointTrajectory`` goal
  and the finger gap as a ``GripperCommand`` goal (:class:`hrl.ros.control_actions.ArmActionClients`); then it
  waits until the period's deadline (deadlines advance by one period each step, so the time the skill spends
  computing is taken out of the wait and the loop keeps its rate). The deadline locks to the state stream (the
  first step's is the arrival of the state it was computed from, when fresh): the next step starts when the
  first arm state within half a state interval of the deadline arrives (the deadline moves to it), so a step is
  computed from a state the moment it arrives instead of up to a period later; with no state in that window, it
  starts at the deadline.
- ``reset()`` does not move a robot (nothing can place the objects of a real table): it waits for fresh state.
- ``read_only=True``: a mirror of the robot (the planner's view), whose ``step()`` raises.
- cameras (``cameras={"front": (image_topic, depth_topic)}``; none by default): ``sensor_msgs/Image`` with the
  sensor-data QoS by default; ``render(camera, width, height, depth)`` answers from the latest message of the
  camera's image topic (rgb8, bgr8) or depth topic (32FC1 in metres, 16UC1 in millimetres; REP 118's invalid
  readings, 0 mm or NaN / inf, stay NaN / inf), resized to the asked size: RGB by area averaging (each output pixel
  the mean of the input pixels it covers, as ``cv2.INTER_AREA``), depth by the nearest pixel (averaging would
  invent depths between an edge's near and far sides). So ``env.camera_image``, and the planners that look
  (``vla``, ``vlm_http``), work on the robot unchanged. A camera image says nothing of where the camera is: the
  planners lift pixels through the camera's *nominal* model (``sim.tabletop.physics.CAMERAS``), so the robot's
  camera must be mounted and calibrated to it. No image yet, one older than ``image_timeout_s``, an unsupported
  encoding or a picture of another aspect ratio than the one asked: :class:`CameraError` naming the topic.

Threads: the node's executor spins on one thread (the subscriptions update the state under a lock) while the skill
loop calls ``step()`` on another; publishing is serialised with the e-stop's immediate hold and the final hold.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from geometry_msgs.msg import PoseStamped, TwistStamped
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from hrl.ros import qos
from hrl.ros.arm_core import (
    ESTOP,
    ArmLimits,
    ArmSafetyFilter,
    Command,
    Workspace,
    interpolate,
    tcp_velocity,
)
from hrl.ros.control_actions import ArmActionClients
from robots.arm import ArmSpec
from robots.kinematics import KinematicChain
from sim.tabletop.physics import PHYSICS_DT, ObjectState

COMMAND_INTERFACES = ("trajectory", "twist", "action")
#: Object poses kept per object (for the finite-difference velocities).
POSE_HISTORY = 32
_NAN3 = np.full(3, math.nan)
#: Encodings ``render`` decodes: colour (channels in the order of the name) and depth (to metres).
RGB_ENCODINGS = {"rgb8": (0, 1, 2), "bgr8": (2, 1, 0)}
DEPTH_ENCODINGS = {"32FC1": ("f4", 1.0), "16UC1": ("u2", 1e-3)}


class CameraError(RuntimeError):
    """A camera image that cannot be served (none yet, stale, an unsupported encoding or shape): names the topic."""


class RosArmPhysics:
    """Joint states and object poses from ROS, joint targets to ROS (see the module docstring).

    Args:
        node: the rclpy node whose subscriptions and publishers these are (spun by someone else).
        scene: the tabletop scene (its objects name the pose topics; its table is the default workspace).
        arm: the arm spec (joint names, limits, gripper range).
        period: the control period (s): one ``step()``.
        read_only: a mirror: no publishers, ``step()`` raises.
        joint_prefix: prepended to every joint name of the spec on the wire.
        workspace: the TCP box of the safety filter (default: the scene's table, z 0..0.5 m).
        stale_timeout_s: joint states older than this hold the arm.
        command_interface: ``trajectory`` (JointTrajectory), ``twist`` (TwistStamped to a servo node) or ``action``
            (FollowJointTrajectory and GripperCommand goals; needs control_msgs).
        trajectory_hz: points per second of a published trajectory.
        twist_frame: ``header.frame_id`` of the twists (the arm's base frame).
        cameras: camera name (of ``sim.tabletop.physics.CAMERAS``) -> (image topic, depth topic or "" for none),
            the cameras ``render`` serves; none by default.
        camera_qos: QoS profile name of the image subscriptions.
        image_timeout_s: an image older than this (s since it arrived) is refused as stale.
    """

    def __init__(
        self,
        node: Any,
        scene: Any,
        arm: ArmSpec,
        period: float,
        *,
        read_only: bool = False,
        joint_prefix: str = "",
        world_frame: str = "world",
        joint_states_topic: str = "/joint_states",
        joint_states_qos: str = "sensor_data",
        object_topic_prefix: str = "/objects",
        object_qos: str = "sensor_data",
        workspace: Workspace | None = None,
        stale_timeout_s: float = 0.2,
        command_interface: str = "trajectory",
        trajectory_topic: str = "/panda_arm_controller/joint_trajectory",
        trajectory_qos: str = "reliable",
        trajectory_hz: float = 100.0,
        twist_topic: str = "/servo_node/delta_twist_cmds",
        twist_qos: str = "reliable",
        twist_frame: str = "panda_link0",
        gripper_topic: str = "/panda_hand_controller/commands",
        gripper_qos: str = "reliable",
        follow_joint_trajectory_action: str = "/panda_arm_controller/follow_joint_trajectory",
        gripper_action: str = "/panda_hand_controller/gripper_cmd",
        cameras: Mapping[str, tuple[str, str]] | None = None,
        camera_qos: str = "sensor_data",
        image_timeout_s: float = 1.0,
    ) -> None:
        if not (isinstance(period, (int, float)) and math.isfinite(period) and period > 0):
            raise ValueError(f"period must be a finite number of seconds > 0, got {period!r}")
        if command_interface not in COMMAND_INTERFACES:
            raise ValueError(
                f"command_interface must be one of {', '.join(COMMAND_INTERFACES)}, got {command_interface!r}"
            )
        if not (math.isfinite(trajectory_hz) and trajectory_hz > 0):
            raise ValueError(f"trajectory_hz must be a finite number > 0, got {trajectory_hz!r}")
        if not (isinstance(image_timeout_s, (int, float)) and math.isfinite(image_timeout_s) and image_timeout_s > 0):
            raise ValueError(f"image_timeout_s must be a finite number of seconds > 0, got {image_timeout_s!r}")
        self.cameras = _check_cameras(cameras or {})
        self.image_timeout_s = float(image_timeout_s)
        self.node, self.scene, self.arm = node, scene, arm
        self.period, self.read_only = float(period), read_only
        self.substeps = max(1, round(self.period / PHYSICS_DT))  # the protocol's; the env checks it against its rate
        self.world_frame, self.stale_timeout_s = world_frame, float(stale_timeout_s)
        self.command_interface, self.trajectory_hz, self.twist_frame = (
            command_interface,
            float(trajectory_hz),
            twist_frame,
        )
        self.chain = KinematicChain(arm.urdf, arm.base_link, arm.tcp_link)
        self.base = np.asarray(scene.robot_base, dtype=float)
        self.arm_names = [joint_prefix + n for n in arm.joint_names]
        self.finger_names = [joint_prefix + n for n in arm.gripper.joints]
        self.joint_states_topic = joint_states_topic
        self.safety = ArmSafetyFilter(
            ArmLimits.from_arm(arm),
            workspace or Workspace.parse("", scene),
            self.chain,
            self.base,
            self.period,
            self.stale_timeout_s,
        )
        # -- state (written by the executor's thread, read by the skill's) --
        self._state = threading.Condition()
        self._q = np.full(len(self.arm_names), math.nan)
        self._dq = np.zeros(len(self.arm_names))
        self._width = math.nan
        self._q_time: float | None = None  # time.monotonic() of the last usable arm state
        self._state_interval: float | None = None  # running mean of the time between arm states (s)
        self._width_time: float | None = None
        self._joint_problem: str | None = None
        self._object_problems: dict[str, str] = {}
        self._poses: dict[str, deque[tuple[float, np.ndarray, np.ndarray]]] = {
            o.name: deque(maxlen=POSE_HISTORY) for o in scene.objects
        }
        self._indices: dict[tuple[str, ...], tuple[list[int] | None, list[int] | None, str | None]] = {}
        self._velocity_from_differences = False
        self._images: dict[str, tuple[float, Any]] = {}  # topic -> (time.monotonic() it arrived, the Image)
        self.object_topics = {o.name: f"{object_topic_prefix.rstrip('/')}/{o.name}/pose" for o in scene.objects}
        # -- commands (the skill's thread, the e-stop callback and shutdown) --
        self._command_lock = threading.Lock()
        self._deadline: float | None = None
        self._stopped = False
        self._reset_warned = False
        self.last_command: Command | None = None
        self._last_hold_rule: str | None = None
        self._subscriptions = [
            qos.subscribe(
                node, JointState, joint_states_topic, self._on_joint_state, joint_states_qos, "joint_states_qos"
            ),
            *(
                qos.subscribe(
                    node, PoseStamped, t, lambda m, n=name: self._on_object_pose(n, m), object_qos, "object_qos"
                )
                for name, t in self.object_topics.items()
            ),
            *(
                qos.subscribe(node, Image, t, lambda m, t=t: self._on_image(t, m), camera_qos, "camera_qos")
                for t in dict.fromkeys(t for pair in self.cameras.values() for t in pair if t)
            ),
        ]
        self._publishers: list[Any] = []
        self._actions: ArmActionClients | None = None
        if read_only:
            pass
        elif command_interface == "action":
            try:
                self._actions = ArmActionClients(node, follow_joint_trajectory_action, gripper_action)
            except ImportError as err:
                raise ValueError(f"command_interface 'action': {err}") from None
        else:
            if command_interface == "trajectory":
                self._arm_pub = qos.advertise(node, JointTrajectory, trajectory_topic, trajectory_qos, "trajectory_qos")
            else:
                self._arm_pub = qos.advertise(node, TwistStamped, twist_topic, twist_qos, "twist_qos")
            self._gripper_pub = qos.advertise(node, Float64MultiArray, gripper_topic, gripper_qos, "gripper_qos")
            self._publishers = [self._arm_pub, self._gripper_pub]

    # ---- state in ---------------------------------------------------------------------------------------
    def _lookup(self, names: tuple[str, ...]) -> tuple[list[int] | None, list[int] | None, str | None]:
        """Where the arm's and the fingers' joints are in a message naming ``names`` (None: absent), or why the
        message cannot be used (some arm joints but not all)."""
        if names not in self._indices:
            where = {n: i for i, n in enumerate(names)}
            arm = [where.get(n) for n in self.arm_names]
            fingers = [where.get(n) for n in self.finger_names]
            problem = None
            if any(i is not None for i in arm) and any(i is None for i in arm):
                missing = [n for n, i in zip(self.arm_names, arm, strict=True) if i is None]
                problem = f"{self.joint_states_topic} names some arm joints but not {missing} (joint_prefix?)"
            self._indices[names] = (
                None if None in arm else arm,  # type: ignore[misc]
                None if None in fingers else fingers,  # type: ignore[misc]
                problem,
            )
            if len(self._indices) > 16:  # a publisher that renames its joints every message: keep a few
                self._indices.pop(next(iter(self._indices)))
        return self._indices[names]

    def _on_joint_state(self, msg: Any) -> None:
        now = time.monotonic()
        arm, fingers, problem = self._lookup(tuple(msg.name))
        position, velocity = msg.position, msg.velocity
        with self._state:
            if problem is not None:
                self._joint_problem = problem
                return
            if arm is not None:
                if len(position) != len(msg.name):
                    self._joint_problem = (
                        f"{self.joint_states_topic}: {len(msg.name)} names but {len(position)} positions"
                    )
                    return
                q = np.array([position[i] for i in arm], dtype=float)
                has_velocity = len(velocity) == len(msg.name)
                dq = np.array([velocity[i] for i in arm], dtype=float) if has_velocity else None
                bad = ~np.isfinite(q) if dq is None else ~(np.isfinite(q) & np.isfinite(dq))
                if bad.any():
                    i = int(np.argmax(bad))
                    value = q[i] if not math.isfinite(q[i]) or dq is None else dq[i]
                    self._joint_problem = (
                        f"{self.joint_states_topic}: {self.arm_names[i]} = {value} is not finite (joint states must be "
                        "finite numbers)"
                    )
                    return
                if dq is None:  # a driver without velocities: differences of successive positions
                    if not self._velocity_from_differences:
                        self._velocity_from_differences = True
                        self.node.get_logger().info(
                            f"{self.joint_states_topic} carries no velocities: joint velocities by finite differences"
                        )
                    dt = None if self._q_time is None else now - self._q_time
                    dq = (q - self._q) / dt if dt and dt > 1e-4 and np.all(np.isfinite(self._q)) else np.zeros_like(q)
                if self._q_time is not None and now > self._q_time:
                    dt = now - self._q_time
                    self._state_interval = dt if self._state_interval is None else 0.8 * self._state_interval + 0.2 * dt
                self._q, self._dq, self._q_time = q, dq, now
            if fingers is not None:
                w = float(position[fingers[0]] + position[fingers[1]])
                if not math.isfinite(w):
                    self._joint_problem = f"{self.joint_states_topic}: finger width {w} is not finite"
                    return
                self._width, self._width_time = w, now
            if arm is not None or fingers is not None:
                self._joint_problem = None
            self._state.notify_all()

    def _on_object_pose(self, name: str, msg: Any) -> None:
        p, o = msg.pose.position, msg.pose.orientation
        position = np.array([p.x, p.y, p.z], dtype=float)
        quaternion = np.array([o.w, o.x, o.y, o.z], dtype=float)
        stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        t = stamp if stamp > 0 else time.time()  # a stamp of 0: "now"
        with self._state:
            if msg.header.frame_id != self.world_frame:
                self._object_problems[name] = (
                    f"object {name}: pose in frame {msg.header.frame_id!r}, not world_frame {self.world_frame!r}"
                )
                return
            norm = float(np.linalg.norm(quaternion))
            if not (np.all(np.isfinite(position)) and math.isfinite(norm) and norm > 1e-6):
                self._object_problems[name] = (
                    f"object {name}: pose {position.tolist()} / quaternion {quaternion.tolist()} on "
                    f"{self.object_topics[name]} is not finite (or a zero quaternion)"
                )
                return
            self._object_problems.pop(name, None)
            history = self._poses[name]
            if history and t <= history[-1][0]:
                history.clear()  # time went back (a restarted publisher, a replayed bag): start over
            history.append((t, position, quaternion / norm))
            self._state.notify_all()

    def _on_image(self, topic: str, msg: Any) -> None:
        with self._state:
            self._images[topic] = (time.monotonic(), msg)  # decoded when rendered: most images are never used
            self._state.notify_all()

    # ---- TabletopPhysics: reading ---------------------------------------------------------------------
    def joints(self) -> tuple[np.ndarray, np.ndarray]:
        """The last usable arm joint positions and velocities (7,), (7,) (NaN before the first)."""
        with self._state:
            return self._q.copy(), self._dq.copy()

    def finger_width(self) -> float:
        with self._state:
            return self._width

    def tcp(self) -> tuple[np.ndarray, np.ndarray]:
        """TCP position (3,) in the world and rotation (3, 3), from the measured joints through the arm's URDF."""
        p, rotation, _ = self.chain.forward(self.joints()[0], self.base)
        return p, rotation

    def object_state(self, name: str) -> ObjectState:
        """The object's last pose, and velocities from the pose about one period earlier (zero while it has one
        pose; NaN before the first)."""
        if name not in self._poses:
            raise ValueError(f"scene {self.scene.name!r} has no object {name!r}; its objects: {', '.join(self._poses)}")
        with self._state:
            history = list(self._poses[name])
        if not history:
            return ObjectState(_NAN3.copy(), np.full(4, math.nan), _NAN3.copy(), _NAN3.copy())
        t1, p1, q1 = history[-1]
        older = [h for h in history[:-1] if t1 - h[0] >= 0.75 * self.period]
        if not older and len(history) == 1:
            return ObjectState(p1.copy(), q1.copy(), np.zeros(3), np.zeros(3))
        t0, p0, q0 = older[-1] if older else history[0]
        dt = t1 - t0
        return ObjectState(p1.copy(), q1.copy(), (p1 - p0) / dt, _angular_velocity(q0, q1, dt))

    def state_fault(self, objects: bool = True) -> tuple[str, str] | None:
        """``(rule, reason)`` when the state cannot be used now (e-stop, none, stale, non-finite; with ``objects``,
        an unusable object pose), else None."""
        with self._state:
            problem = self._joint_problem or (next(iter(self._object_problems.values()), None) if objects else None)
            q = None if self._q_time is None else self._q
            return self.safety.state_fault(q, self._q_time, time.monotonic(), problem)

    def missing(self, objects: bool = True) -> str:
        """What :meth:`wait_for_state` still waits for ("" when nothing)."""
        now = time.monotonic()
        out = []
        with self._state:
            for what, t in (("arm joints", self._q_time), ("finger joints", self._width_time)):
                if t is None:
                    names = self.arm_names if what == "arm joints" else self.finger_names
                    out.append(f"no {what} ({', '.join(names)}) on {self.joint_states_topic}")
                elif now - t > self.stale_timeout_s:
                    out.append(f"{what} on {self.joint_states_topic} {now - t:.2f} s old")
            if self._joint_problem:
                out.append(self._joint_problem)
            if objects:
                for name, history in self._poses.items():
                    if name in self._object_problems:
                        out.append(self._object_problems[name])
                    elif len(history) < 2:
                        out.append(f"no poses (two are needed) of {name} on {self.object_topics[name]}")
        return "; ".join(out)

    def wait_for_state(self, timeout_s: float, objects: bool = True) -> bool:
        """Wait until fresh, usable joint states (and, with ``objects``, two poses of every scene object) are in;
        False after ``timeout_s``. Needs the node spun by another thread."""
        return self._wait(lambda: self.missing(objects), timeout_s)

    def missing_images(self, cameras: Sequence[str], depth: bool = True) -> str:
        """Which images of ``cameras`` (with ``depth``, their depth images too) :meth:`render` would refuse now,
        and why ("" when none)."""
        out = []
        for camera in cameras:
            for d in (False, True) if depth else (False,):
                try:
                    self._latest(camera, d)
                except CameraError as err:
                    out.append(str(err))
        return "; ".join(out)

    def wait_for_images(self, cameras: Sequence[str], timeout_s: float, depth: bool = True) -> bool:
        """Wait until :meth:`missing_images` is empty; False after ``timeout_s``. Needs the node spun elsewhere."""
        return self._wait(lambda: self.missing_images(cameras, depth), timeout_s)

    def _wait(self, missing: Callable[[], str], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while missing():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            with self._state:
                self._state.wait(min(left, 0.05))
        return True

    # ---- TabletopPhysics: acting ----------------------------------------------------------------------
    def reset(self, q: np.ndarray, width: float, objects: dict[str, tuple[float, float, float]]) -> None:
        """A robot is not moved to ``q`` nor its objects to a layout: this waits for fresh state (a 2 s grace, or
        ``stale_timeout_s`` if longer) and raises RuntimeError, saying what is missing, without it."""
        if not self._reset_warned:
            self._reset_warned = True
            self.node.get_logger().warning(
                "reset: the ROS physics does not move the arm to the home pose nor place objects (a real table's "
                "state is what it is); it waits for fresh joint states and object poses"
            )
        if not self.wait_for_state(max(2.0, self.stale_timeout_s)):
            raise RuntimeError(f"reset: no fresh state from the robot: {self.missing()}")
        self._deadline = None

    def step(self, q_target: np.ndarray, width_target: float) -> None:
        """Publish ``q_target`` / ``width_target`` through the safety filter, then wait out the period."""
        if self.read_only:
            raise RuntimeError(
                "this RosArmPhysics is read-only (the planner's mirror of the robot): the arm policy node moves the arm"
            )
        now = time.monotonic()
        restart = self._deadline is None or now > self._deadline + self.period  # the first step, or after a pause
        with self._command_lock:
            if self._stopped:
                raise RuntimeError("the arm was stopped (final hold published): no more commands")
            with self._state:
                q = None if self._q_time is None else self._q.copy()
                width = None if self._width_time is None else self._width
                q_time = self._q_time
                problem = self._joint_problem or next(iter(self._object_problems.values()), None)
            command = self.safety.filter(q, width, q_target, width_target, q_time, now, problem)
            self._publish(command, q)
        self._report(command)
        if restart:  # a new start: in phase with the state this step was computed from, when that one is fresh
            # (from ``now`` instead, the next state could fall just outside the window of _wait_for_next_state, and
            # the second step would wait out the window: one missed controller cycle at the start of a call)
            fresh = q_time is not None and 0.0 <= now - q_time < min(self._state_interval or self.period, self.period)
            self._deadline = q_time if fresh else now
        self._deadline += self.period
        self._wait_for_next_state(q_time)

    def _wait_for_next_state(self, used: float | None) -> None:
        """Return when the next step is due: at the first arm state newer than ``used`` (the arrival of the state
        this step was computed from) that arrives within half a state interval of the deadline (at most half a
        period), and the deadline moves to that arrival, so the loop runs in phase with the robot's state stream
        (a step computed on arrival, not up to a period later); with no such state, at the deadline (or at once,
        when it is past)."""
        tol = 0.5 * min(self._state_interval or self.period, self.period)
        start, end = self._deadline - tol, self._deadline + tol
        early = start - time.monotonic()
        if early > 0:
            time.sleep(early)
        with self._state:
            while True:
                arrived = self._q_time
                if arrived is not None and arrived >= start and (used is None or arrived > used):
                    self._deadline = arrived
                    return
                left = end - time.monotonic()
                if left <= 0:
                    return
                self._state.wait(left)

    def fault(self) -> tuple[str, str] | None:
        """``(rule, reason)`` of the hold the last step published or kept, None when it moved."""
        c = self.last_command
        return (c.rule, c.reason) if c is not None and c.hold else None  # type: ignore[return-value]

    def set_estop(self, latched: bool) -> None:
        """Latch (publishing a hold at once) or release the e-stop."""
        with self._command_lock:
            was = self.safety.estop
            self.safety.estop = latched
            if latched and not was and not self.read_only and not self._stopped:
                self._hold(ESTOP, "e-stop latched")

    def final_hold(self, why: str = "shutdown") -> None:
        """Publish a hold (the measured position) whatever was published before, and nothing after it."""
        with self._command_lock:
            if self.read_only or self._stopped:
                return
            self.safety.holding = False  # published even while another hold is in force: the last word
            self._hold("shutdown", why)
            self._stopped = True

    def stop_here(self) -> None:
        """End a skill where it was judged: the arm's target becomes its measured position (the fingers keep their
        command, so a grasp keeps squeezing). In simulation nothing moves between skill calls; on a robot the last
        trajectory would carry the arm on past the state the skill judged (the measured state lags the motion)."""
        with self._command_lock:
            if self.read_only or self._stopped or self.safety.holding:
                return
            with self._state:
                q = None if self._q_time is None else self._q.copy()
            if q is not None:
                self._publish(Command(q, None), q)
        self._deadline = None

    def _hold(self, rule: str, reason: str) -> None:
        with self._state:
            q = None if self._q_time is None else self._q.copy()
            width = None if self._width_time is None else self._width
        command = self.safety.hold(q, width, rule, reason)
        self._publish(command, q)
        self._report(command)

    def _publish(self, command: Command, q_from: np.ndarray | None) -> None:
        self.last_command = command
        if command.q is None or q_from is None:
            return
        if self._actions is not None:
            self._actions.send_trajectory(self._trajectory(q_from, command.q))
            if command.width is not None:
                self._actions.send_gripper(command.width)
            return
        if self.command_interface == "trajectory":
            msg = self._trajectory(q_from, command.q)
        else:
            msg = TwistStamped()
            msg.header.frame_id = self.twist_frame
            msg.header.stamp = self.node.get_clock().now().to_msg()
            if not command.hold:
                v = tcp_velocity(self.chain, q_from, command.q, self.period)
                msg.twist.linear.x, msg.twist.linear.y, msg.twist.linear.z = (float(x) for x in v)
        self._arm_pub.publish(msg)
        if command.width is not None:
            self._gripper_pub.publish(Float64MultiArray(data=[command.width / 2, command.width / 2]))

    def _trajectory(self, q_from: np.ndarray, q_to: np.ndarray) -> JointTrajectory:
        """One period's trajectory from the measured ``q_from`` to ``q_to`` (header.stamp 0: start on receipt)."""
        msg = JointTrajectory()
        msg.joint_names = list(self.arm_names)
        times, positions, velocities = interpolate(q_from, q_to, self.period, self.trajectory_hz)
        for t, p, v in zip(times, positions, velocities, strict=True):
            point = JointTrajectoryPoint()
            point.positions, point.velocities = p.tolist(), v.tolist()
            point.time_from_start.sec = int(t)
            point.time_from_start.nanosec = round((t - int(t)) * 1e9)
            msg.points.append(point)
        return msg

    def _report(self, command: Command) -> None:
        """Log a hold once per fault (the value and the rule), a limit at most every few seconds."""
        log = self.node.get_logger()
        if command.hold:
            if command.rule != self._last_hold_rule:
                log.warning(f"holding the arm: {command.reason} [rule: {command.rule}]")
            self._last_hold_rule = command.rule
            return
        if self._last_hold_rule is not None:
            log.info(f"the arm moves again ({self._last_hold_rule} cleared)")
            self._last_hold_rule = None
        if command.reason:
            log.warning(f"target limited: {command.reason}", throttle_duration_sec=5.0)

    # ---- the rest of the interface -------------------------------------------------------------------
    def set_goal_marker(self, position: np.ndarray | None) -> None:
        """Nothing to draw on a robot."""

    def _unsupported(self, what: str) -> RuntimeError:
        return RuntimeError(f"{what} is not possible through ROS (a real scene): only the simulators do it")

    def set_object_pose(self, name: str, position: np.ndarray) -> None:
        raise self._unsupported("teleporting an object")

    def set_object_dynamics(self, name: str, mass: float, friction: float) -> None:
        raise self._unsupported("changing an object's mass or friction")

    def set_camera_offset(self, camera: str, position: np.ndarray, rotation: np.ndarray) -> None:
        raise self._unsupported("moving a camera")

    def set_lighting(self, intensity: float, direction: np.ndarray) -> None:
        raise self._unsupported("changing the light")

    def render(self, camera: str, width: int, height: int, depth: bool = False) -> np.ndarray:
        """The camera's latest image at ``width`` x ``height``: RGB (h, w, 3) uint8, or with ``depth`` metres
        (h, w) float32 (see the module docstring); :class:`CameraError` naming the topic when it cannot."""
        for what, n in (("width", width), ("height", height)):
            if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
                raise ValueError(f"render: {what} must be a whole number of pixels >= 1, got {n!r}")
        topic, msg = self._latest(camera, depth)
        pixels = decode_image(msg, topic, depth)
        h, w = pixels.shape[:2]
        if abs(w * height - h * width) > 0.01 * h * width:
            raise CameraError(
                f"{topic}: a {w}x{h} image cannot be served at {width}x{height} without distorting it (aspect ratio "
                f"{w / h:.3f}, asked {width / height:.3f}); crop it to that aspect before this node (image_proc's "
                "crop_decimate), keeping the optical centre in the middle"
            )
        if depth:
            return pixels[_nearest_rows(h, height)][:, _nearest_rows(w, width)]
        return np.clip(np.rint(resize_area(pixels.astype(np.float32), height, width)), 0, 255).astype(np.uint8)

    def _latest(self, camera: str, depth: bool) -> tuple[str, Any]:
        """The topic and the latest usable message of ``camera``'s image (``depth``: its depth image)."""
        if camera not in self.cameras:
            subscribed = ", ".join(self.cameras) or "none"
            raise CameraError(
                f"this RosArmPhysics does not subscribe camera images of {camera!r} (cameras subscribed: {subscribed});"
                " give it cameras={camera: (image topic, depth topic)}: arm_planner_node subscribes the cameras its "
                "planner looks through"
            )
        topic = self.cameras[camera][1 if depth else 0]
        if not topic:
            raise CameraError(f"camera {camera!r} has no depth topic (cameras={{{camera!r}: (image, '')}})")
        with self._state:
            arrived = self._images.get(topic)
        if arrived is None:
            raise CameraError(f"no image on {topic} yet (is the camera driver publishing there? camera {camera!r})")
        age = time.monotonic() - arrived[0]
        if age > self.image_timeout_s:
            raise CameraError(
                f"the last image on {topic} arrived {age:.2f} s ago (image_timeout_s = {self.image_timeout_s:g} s): "
                "the camera stalled or stopped"
            )
        return topic, arrived[1]

    def close(self) -> None:
        for sub in self._subscriptions:
            self.node.destroy_subscription(sub)
        for pub in self._publishers:
            self.node.destroy_publisher(pub)
        if self._actions is not None:
            self._actions.close()
            self._actions = None
        self._subscriptions, self._publishers = [], []


def _check_cameras(cameras: Mapping[str, tuple[str, str]]) -> dict[str, tuple[str, str]]:
    from sim.tabletop.physics import CAMERAS

    out = {}
    for camera, pair in cameras.items():
        if camera not in CAMERAS:
            raise ValueError(f"unknown camera {camera!r}; the tabletop's cameras: {', '.join(CAMERAS)}")
        if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str) and pair[0].startswith("/")
                and isinstance(pair[1], str) and (pair[1] == "" or pair[1].startswith("/"))):  # fmt: skip
            raise ValueError(
                f"camera {camera!r}: {pair!r} must be (image topic, depth topic or ''), topics starting with '/'"
            )
        out[camera] = pair
    return out


def decode_image(msg: Any, topic: str, depth: bool) -> np.ndarray:
    """A ``sensor_msgs/Image`` as RGB (h, w, 3) uint8 or, with ``depth``, metres (h, w) float32 (16UC1: mm, 0 = no
    reading -> NaN); :class:`CameraError` naming the topic for an unsupported encoding or inconsistent sizes."""
    encodings = DEPTH_ENCODINGS if depth else RGB_ENCODINGS
    if msg.encoding not in encodings:
        kind = "depth" if depth else "colour"
        raise CameraError(
            f"{topic}: encoding {msg.encoding!r} is not a supported {kind} encoding; publish one of "
            f"{', '.join(encodings)}"
        )
    h, w, step = int(msg.height), int(msg.width), int(msg.step)
    if depth:
        code, scale = DEPTH_ENCODINGS[msg.encoding]
        dtype, channels = np.dtype(code).newbyteorder(">" if msg.is_bigendian else "<"), 1
    else:
        dtype, channels = np.dtype(np.uint8), 3
    row = w * channels * dtype.itemsize
    data = bytes(msg.data)
    if h < 1 or w < 1 or step < row or len(data) < step * h:
        raise CameraError(
            f"{topic}: a {w}x{h} {msg.encoding} image needs step >= {row} and {row}*{h} bytes; got step {step} and "
            f"{len(data)} bytes"
        )
    rows = np.frombuffer(data, np.uint8, count=step * h).reshape(h, step)[:, :row]
    pixels = np.ascontiguousarray(rows).view(dtype).reshape(h, w, channels)
    if not depth:
        return pixels[:, :, list(RGB_ENCODINGS[msg.encoding])]
    metres = pixels[:, :, 0].astype(np.float32)
    if msg.encoding == "16UC1":
        metres[metres == 0] = np.nan
        metres *= scale
    return metres


def _nearest_rows(n_in: int, n_out: int) -> np.ndarray:
    """The input index of each output pixel's centre (nearest-pixel resizing of ``n_in`` to ``n_out``)."""
    return np.minimum(((np.arange(n_out) + 0.5) * n_in / n_out).astype(int), n_in - 1)


def _area_weights(n_in: int, n_out: int) -> np.ndarray:
    """(n_out, n_in): how much of each input pixel each output pixel covers, rows summing to 1."""
    edges = np.arange(n_out + 1) * n_in / n_out
    lo, hi = edges[:-1, None], edges[1:, None]
    cells = np.arange(n_in)[None, :]
    overlap = np.clip(np.minimum(hi, cells + 1) - np.maximum(lo, cells), 0.0, None)
    return overlap / overlap.sum(axis=1, keepdims=True)


def resize_area(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """``image`` (h, w, c) resized by area averaging (equal sizes: unchanged)."""
    h, w = image.shape[:2]
    if (h, w) == (height, width):
        return image
    return np.einsum("ih,hwc,jw->ijc", _area_weights(h, height), image, _area_weights(w, width), optimize=True)


def _angular_velocity(q0: np.ndarray, q1: np.ndarray, dt: float) -> np.ndarray:
    """The world-frame angular velocity (rad/s) that turns quaternion ``q0`` into ``q1`` (w, x, y, z) in ``dt`` s."""
    w0, x0, y0, z0 = q0
    w1, x1, y1, z1 = q1
    # q1 * conj(q0): the rotation between them, in the world frame
    w = w1 * w0 + x1 * x0 + y1 * y0 + z1 * z0
    v = np.array(
        [
            -w1 * x0 + x1 * w0 - y1 * z0 + z1 * y0,
            -w1 * y0 + y1 * w0 - z1 * x0 + x1 * z0,
            -w1 * z0 + z1 * w0 - x1 * y0 + y1 * x0,
        ]
    )
    if w < 0:
        w, v = -w, -v  # the short way round
    s = float(np.linalg.norm(v))
    if s < 1e-12:
        return np.zeros(3)
    return v / s * (2.0 * math.atan2(s, w)) / dt
