"""``arm_policy_node``: the tabletop skills as a ROS 2 arm controller (ros2_control's standard interfaces).

Takes one skill call at a time on ``/arm_subgoal`` (std_msgs/String, JSON :class:`hrl.ros.arm_messages.SkillCall`,
from the arm planner node) or a TCP goal on ``/tcp_goal`` (geometry_msgs/PoseStamped in ``world_frame``: the reach
skill, what a person sends by hand), runs the skill (:mod:`hierarchy.tabletop`: the learned ``reach`` / ``push`` /
``pick_place`` and the scripted ``open`` / ``close`` / ``release``, the very code the simulators run) in a
:class:`~sim.tabletop.env.PandaTabletopEnv` whose physics is :class:`hrl.ros.arm_physics.RosArmPhysics`, and answers
each call with a :class:`~hrl.ros.arm_messages.SkillStatus` on ``/arm_subgoal_status``.

Every skill step's joint target goes through the safety filter (:mod:`hrl.ros.arm_core`) and out as a
``trajectory_msgs/JointTrajectory`` to ``/<controller>/joint_trajectory`` (or a ``geometry_msgs/TwistStamped`` to a
servo node with ``command_interface:=twist``) plus the fingers on ``/<gripper_controller>/commands``; with
``command_interface:=action`` the same trajectory is a control_msgs ``FollowJointTrajectory`` goal to
``/<controller>/follow_joint_trajectory`` and the fingers a ``GripperCommand`` goal to
``/<gripper_controller>/gripper_cmd`` (control_msgs from a ROS 2 install or ``scripts/build_control_msgs.sh``). The
arm is held
(its measured position published once, then nothing new) on a latched ``/estop`` (std_msgs/Bool), on stale or
non-finite joint states and on non-finite object poses; the skill call then ends ``aborted`` with the reason, as it
does when a goal is non-finite or outside the workspace (refused before anything moves), when a newer call preempts
it, when a cancel names it (:class:`~hrl.ros.arm_messages.SkillCancel` on ``/arm_subgoal``: the arm stops where it
stands) and on shutdown, which publishes a final hold. Skills run on a worker thread; the node's executor keeps hearing
the robot meanwhile.
"""

from __future__ import annotations

import itertools
import json
import math
import sys
import threading
import time
from typing import Any

import numpy as np
from geometry_msgs.msg import PoseStamped
from rclpy.node import Node
from rclpy.parameter import Parameter
from std_msgs.msg import Bool, String

from hierarchy.domain import Outcome
from hrl.ros import qos
from hrl.ros.arm_core import Workspace, workspace_text
from hrl.ros.arm_messages import MessageError, SkillCall, SkillCancel, SkillStatus, read_subgoal_message
from hrl.ros.arm_physics import COMMAND_INTERFACES
from hrl.ros.control_actions import import_actions
from hrl.ros.params import Param, ParameterError, declare, non_empty, non_negative, positive, topic
from hrl.ros.runner import thread_priority
from sim.tabletop.physics import PHYSICS_DT

#: ``max_steps`` a skill call runs with: its own ``budget`` bounds it (the planner keeps the episode's count; a
#: budget that runs out must read ``budget``, not ``episode_limit``, which would end the planner's episode).
NO_EPISODE_LIMIT = 10**9


def _skill_rate(value: Any) -> str | None:
    if not isinstance(value, float) or not math.isfinite(value) or value <= 0:
        return "must be a finite number > 0 (Hz)"
    substeps = round(1.0 / (value * PHYSICS_DT))
    if substeps < 1 or not math.isclose(substeps * PHYSICS_DT * value, 1.0, rel_tol=1e-6):
        return (
            f"must divide {1 / PHYSICS_DT:.0f} Hz (the tabletop's physics step {PHYSICS_DT} s; the skills train at 25)"
        )
    return None


def _skill_specs(value: Any) -> str | None:
    try:
        parse_skills(value)
    except ValueError as err:
        return str(err)
    return None


def parse_skills(text: str) -> dict[str, str]:
    """``"name=spec,name=spec"`` (learned skills over the defaults, :data:`hierarchy.tabletop.SKILLS`) → a dict."""
    out = {}
    for item in (s.strip() for s in text.split(",")):
        if not item:
            continue
        name, sep, spec = item.partition("=")
        if not sep or not name.strip() or not spec.strip():
            raise ValueError(
                f"must be 'name=policy,...' (e.g. 'reach=shipped:panda_reach'; empty: the defaults), got item {item!r}"
            )
        out[name.strip()] = spec.strip()
    return out


def _command_interface(value: Any) -> str | None:
    return None if value in COMMAND_INTERFACES else f"must be one of {', '.join(COMMAND_INTERFACES)}"


def _executor(value: Any) -> str | None:
    from hrl.ros.runner import EXECUTORS

    return None if value in EXECUTORS else f"must be one of {', '.join(EXECUTORS)}"


def _controller(value: Any) -> str | None:
    ok = isinstance(value, str) and value.strip("/") and " " not in value
    return None if ok else "must be a controller name (its topics are /<name>/...)"


def _positive_int(value: Any) -> str | None:
    return None if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else "must be an integer >= 1"


PARAMS = [
    Param(
        "scene",
        "blocks",
        "tabletop scene (sim/scenes name or a .yaml path): its objects, table and robot base",
        non_empty,
    ),
    Param(
        "skills",
        "",
        "learned skills over the defaults (hierarchy.tabletop.SKILLS): 'name=policy,...' "
        "(shipped:<name>, a .zip or a run directory); empty: the defaults",
        _skill_specs,
    ),
    Param("device", "cpu", "torch device of the learned skills", non_empty),
    Param(
        "skill_hz",
        25.0,
        "skill steps per second (the rate the skills were trained at; must divide 500 Hz)",
        _skill_rate,
    ),
    Param("trajectory_hz", 100.0, "points per second of each published trajectory (the controller's rate)", positive),
    Param(
        "executor",
        "events",
        "events: rclpy's EventsExecutor (experimental in rclpy; less Python per message, so the skill loop waits "
        "less for the GIL: at 100 Hz about a third lower latency); single: SingleThreadedExecutor",
        _executor,
    ),
    Param(
        "thread_priority",
        0,
        "0: normal scheduling; 1..98: every thread of the node under SCHED_FIFO at this priority (as ros2_control's "
        "thread_priority; needs CAP_SYS_NICE or an rtprio limit, else a warning): other processes no longer preempt "
        "the loop (at 100 Hz on 2 shared cores p99 19 -> 4 ms)",
        thread_priority,
    ),
    Param(
        "command_interface",
        "trajectory",
        "trajectory: JointTrajectory to /<controller>/joint_trajectory; twist: TwistStamped to twist_topic (a servo "
        "node); action: FollowJointTrajectory goals to /<controller>/follow_joint_trajectory and GripperCommand goals "
        "to /<gripper_controller>/gripper_cmd (needs control_msgs)",
        _command_interface,
    ),
    Param(
        "controller",
        "panda_arm_controller",
        "joint trajectory controller: trajectories go to /<controller>/joint_trajectory (or its "
        "follow_joint_trajectory action)",
        _controller,
    ),
    Param(
        "gripper_controller",
        "panda_hand_controller",
        "controller of the fingers: /<gripper_controller>/commands, std_msgs/Float64MultiArray [width/2, width/2] "
        "(a forward command controller), or its gripper_cmd action with command_interface action",
        _controller,
    ),
    Param(
        "twist_topic", "/servo_node/delta_twist_cmds", "geometry_msgs/TwistStamped out (command_interface twist)", topic
    ),
    Param("twist_frame", "panda_link0", "frame of the twists (the arm's base frame)", non_empty),
    Param(
        "joint_prefix",
        "",
        "prepended to the spec's joint names (panda_joint1..7, panda_finger_joint1/2) on the wire",
        lambda v: None,
    ),
    Param("world_frame", "world", "frame of object poses and goals (the scene's: table top at z = 0)", non_empty),
    Param(
        "workspace",
        "",
        "TCP box 'xmin,ymin,zmin,xmax,ymax,zmax' (m, world frame); empty: the scene's table, z 0..0.5",
        workspace_text,
    ),
    Param(
        "workspace_tolerance",
        0.01,
        "targets and goals this far (m) outside the workspace box still pass (the IK's residual at its faces)",
        non_negative,
    ),
    Param("stale_timeout_s", 0.2, "hold the arm when the last joint state is older than this (s)", positive),
    Param(
        "state_timeout_s", 5.0, "a skill call waits this long (s) for fresh joint states before it is aborted", positive
    ),
    Param("tcp_goal_tolerance", 0.02, "a /tcp_goal is reached within this distance (m)", positive),
    Param("tcp_goal_budget", 100, "skill steps a /tcp_goal may take", _positive_int),
    Param("joint_states_topic", "/joint_states", "sensor_msgs/JointState in", topic),
    Param(
        "object_topic_prefix", "/objects", "object poses in: <prefix>/<name>/pose (geometry_msgs/PoseStamped)", topic
    ),
    Param("estop_topic", "/estop", "std_msgs/Bool in: true latches a hold, false releases it", topic),
    Param(
        "subgoal_topic",
        "/arm_subgoal",
        "std_msgs/String in: one skill call, or a cancel of one (JSON, hrl.ros.arm_messages)",
        topic,
    ),
    Param("status_topic", "/arm_subgoal_status", "std_msgs/String out: each call's outcome (JSON SkillStatus)", topic),
    Param("tcp_goal_topic", "/tcp_goal", "geometry_msgs/PoseStamped in (world_frame): the reach skill to it", topic),
    qos.qos_param("joint_states_qos", "sensor_data", "/joint_states in"),
    qos.qos_param("object_qos", "sensor_data", "object poses in"),
    qos.qos_param("estop_qos", "reliable", "/estop in"),
    qos.qos_param("subgoal_qos", "reliable", "/arm_subgoal in"),
    qos.qos_param("status_qos", "reliable", "/arm_subgoal_status out"),
    qos.qos_param("tcp_goal_qos", "reliable", "/tcp_goal in"),
    qos.qos_param("trajectory_qos", "reliable", "the joint trajectory out"),
    qos.qos_param("twist_qos", "reliable", "the twist out"),
    qos.qos_param("gripper_qos", "reliable", "the gripper command out"),
]


class AbortedError(Exception):
    """A skill call stopped from outside the skill (e-stop, unusable state, a newer call, shutdown)."""


class CallCancelledError(AbortedError):
    """A skill call ended by a :class:`SkillCancel`: nothing follows it, so the arm stops where it stands."""


class ArmPolicyNode(Node):
    """The tabletop skills as an arm controller; ``overrides`` are parameter values (as ``--ros-args -p``)."""

    def __init__(self, **overrides: Any) -> None:
        super().__init__("arm_policy_node", parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()])
        from hierarchy.tabletop import TabletopDomain, make_env
        from hrl.ros.arm_physics import RosArmPhysics
        from robots.arm import load_arm
        from sim.tabletop.scene import load_scene

        p = self.p = declare(self, PARAMS)
        self.executor_kind = p["executor"]  # hrl.ros.runner.run_node spins the node on it
        self.thread_priority = p["thread_priority"]  # and sets its threads' scheduling
        if p["command_interface"] == "action":
            try:
                import_actions()
            except ImportError as err:
                raise ParameterError(f"parameter 'command_interface' = 'action': {err}") from None
        # Subscribed before the skills load (seconds): a call or an e-stop sent meanwhile waits in DDS (reliable)
        # and is taken when the node spins, instead of being lost to a subscriber that did not exist yet. The
        # status topic is advertised last (below): arm_planner_node sends no call before it appears.
        qos.subscribe(self, String, p["subgoal_topic"], self.on_call, p["subgoal_qos"], "subgoal_qos")
        qos.subscribe(self, PoseStamped, p["tcp_goal_topic"], self.on_tcp_goal, p["tcp_goal_qos"], "tcp_goal_qos")
        qos.subscribe(self, Bool, p["estop_topic"], self.on_estop, p["estop_qos"], "estop_qos")
        try:
            self.scene = load_scene(p["scene"])
            workspace = Workspace.parse(p["workspace"], self.scene, p["workspace_tolerance"])
            skills = TabletopDomain.with_skills(parse_skills(p["skills"]), device=p["device"]).skills
        except (ValueError, FileNotFoundError) as err:
            raise ParameterError(str(err)) from None
        self.skills, self.inference = numpy_skills(skills)
        for name, path in self.inference.items():
            if path != "numpy":
                self.get_logger().warning(f"skill {name!r}: NumPy inference unavailable, using SB3 predict: {path}")
        self.period = 1.0 / p["skill_hz"]
        self.physics = RosArmPhysics(
            self,
            self.scene,
            load_arm("panda"),
            self.period,
            joint_prefix=p["joint_prefix"],
            world_frame=p["world_frame"],
            joint_states_topic=p["joint_states_topic"],
            joint_states_qos=p["joint_states_qos"],
            object_topic_prefix=p["object_topic_prefix"],
            object_qos=p["object_qos"],
            workspace=workspace,
            stale_timeout_s=p["stale_timeout_s"],
            command_interface=p["command_interface"],
            trajectory_topic=f"/{p['controller'].strip('/')}/joint_trajectory",
            trajectory_qos=p["trajectory_qos"],
            trajectory_hz=p["trajectory_hz"],
            twist_topic=p["twist_topic"],
            twist_qos=p["twist_qos"],
            twist_frame=p["twist_frame"],
            gripper_topic=f"/{p['gripper_controller'].strip('/')}/commands",
            gripper_qos=p["gripper_qos"],
            follow_joint_trajectory_action=f"/{p['controller'].strip('/')}/follow_joint_trajectory",
            gripper_action=f"/{p['gripper_controller'].strip('/')}/gripper_cmd",
        )
        self.env = make_env(self.scene, backend=self.physics, control_hz=p["skill_hz"])
        self.status_pub = qos.advertise(self, String, p["status_topic"], p["status_qos"], "status_qos")
        # -- the worker: one call at a time, the newest wins --
        self._calls = threading.Condition()
        self._pending: SkillCall | None = None
        self._generation = 0  # bumped by every new call and by shutdown: the running call sees it and stops
        self._latest_id = ""
        self._running: SkillCall | None = None  # the call the worker runs
        self._cancelled: SkillCancel | None = None  # a cancel of the running call, seen at its next step
        self._stopping = False
        self._tcp_goal_ids = itertools.count(1)
        self._worker = threading.Thread(target=self._work, name="arm_skills", daemon=True)
        self._worker.start()
        self.get_logger().info(
            f"skills {', '.join(sorted(self.skills))} on scene {self.scene.name!r} at {p['skill_hz']} Hz; commands "
            f"{p['command_interface']} ({self.physics.command_interface}), workspace {workspace.describe()}; "
            f"calls on {p['subgoal_topic']}, TCP goals on {p['tcp_goal_topic']}; inference "
            + ", ".join(f"{name} {path.split(' ')[0]}" for name, path in sorted(self.inference.items()))
        )

    # -- inputs (the executor's thread) ----------------------------------------------------------------
    def on_call(self, msg: Any) -> None:
        try:
            objects = [o.name for o in self.scene.objects]
            call = read_subgoal_message(msg.data, skills=list(self.skills), objects=objects)
        except MessageError as err:
            self.refuse(_call_id(msg.data), str(err))
            return
        if isinstance(call, SkillCancel):
            self.cancel(call)
        else:
            self.submit(call)

    def on_tcp_goal(self, msg: Any) -> None:
        call_id = f"tcp_goal-{next(self._tcp_goal_ids)}"
        frame, p = msg.header.frame_id, msg.pose.position
        if frame != self.p["world_frame"]:
            self.refuse(call_id, f"TCP goal in frame {frame!r}: send it in world_frame {self.p['world_frame']!r}")
            return
        goal = (p.x, p.y, p.z)
        if not all(math.isfinite(v) for v in goal):
            self.refuse(call_id, f"TCP goal {goal} is not finite")
            return
        self.submit(
            SkillCall(
                call_id, "reach", goal, None, self.p["tcp_goal_tolerance"], self.p["tcp_goal_budget"], label="tcp goal"
            )
        )

    def on_estop(self, msg: Any) -> None:
        latched = bool(msg.data)
        if latched != self.physics.safety.estop:
            self.get_logger().warning("e-stop latched: holding the arm" if latched else "e-stop released")
        self.physics.set_estop(latched)

    def submit(self, call: SkillCall) -> None:
        """Run ``call`` next; a call still running is preempted (it ends ``aborted``)."""
        with self._calls:
            if self._stopping:
                return
            if self._pending is not None:  # never started: superseded before the worker took it
                self.publish_status(SkillStatus(self._pending.id, Outcome.ABORTED, why=f"preempted by call {call.id}"))
            self._pending, self._latest_id = call, call.id
            self._generation += 1
            self._calls.notify_all()
        self.get_logger().info(f"skill call {call.id}: {call.skill} to {_fmt(call.goal)} ({call.label or 'no label'})")

    def cancel(self, cancel: SkillCancel) -> None:
        """End the call ``cancel`` names: one still waiting answers ``aborted`` now; the running one at its next
        step, and the arm stops where it stands. Anything else is logged and left alone."""
        why = cancel.reason
        ended = []
        with self._calls:
            if self._pending is not None and cancel.matches(self._pending.id):
                self.publish_status(SkillStatus(self._pending.id, Outcome.ABORTED, why=f"{why} (before it started)"))
                ended.append(self._pending.id)
                self._pending = None
            if self._running is not None and cancel.matches(self._running.id):
                self._cancelled = cancel
                ended.append(self._running.id)
        if ended:
            self.get_logger().info(f"skill call {' and '.join(ended)} {why}")
        else:
            self.get_logger().info(f"cancel of skill call {cancel.id}: no such call is running or waiting")

    def refuse(self, call_id: str, why: str) -> None:
        self.get_logger().error(f"skill call {call_id} refused: {why}")
        self.publish_status(SkillStatus(call_id, Outcome.ABORTED, why=f"refused: {why}"))

    def publish_status(self, status: SkillStatus) -> None:
        self.status_pub.publish(String(data=status.to_json()))

    # -- the worker thread -----------------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            with self._calls:
                while self._pending is None and not self._stopping:
                    self._calls.wait()
                if self._stopping or self._pending is None:
                    return
                call, generation, self._pending = self._pending, self._generation, None
                self._running, self._cancelled = call, None
            try:
                status = self.execute(call, generation)
            except Exception as err:  # a skill's or the env's error ends the call, never the node
                self.get_logger().error(f"skill call {call.id} ({call.skill}) failed: {type(err).__name__}: {err}")
                status = SkillStatus(call.id, Outcome.ABORTED, why=f"{type(err).__name__}: {err}")
            with self._calls:
                self._running = self._cancelled = None
            self.publish_status(status)
            said = (
                f"skill call {status.id}: {status.outcome} after {status.steps} steps, distance {status.distance:.3f} m"
                + (f": {status.why}" if status.why else "")
            )
            if status.outcome == Outcome.REACHED:  # two call sites: rclpy fixes a call site's severity
                self.get_logger().info(said)
            else:
                self.get_logger().warning(said)

    def execute(self, call: SkillCall, generation: int) -> SkillStatus:
        """Run one call to its end (on the worker thread)."""
        physics = self.physics
        refused = self.check(call)
        cancelled = self._cancelled
        if refused is None and cancelled is not None:  # while it waited for a fresh state: it never moved
            refused = f"{cancelled.reason} (before it started)"
        if refused is not None:
            return SkillStatus(call.id, Outcome.ABORTED, why=refused)
        steps = 0

        def on_step() -> None:
            nonlocal steps
            steps += 1
            if self._stopping:
                raise AbortedError("shutdown (final hold published)")
            if self._generation != generation:
                raise AbortedError(f"preempted by call {self._latest_id}")
            cancelled = self._cancelled
            if cancelled is not None:
                raise CallCancelledError(cancelled.reason)
            fault = physics.fault()
            if fault is not None:
                raise AbortedError(f"arm held: {fault[1]} [rule: {fault[0]}]")

        try:
            result = self.skills[call.skill].run(self.env, call.step(), NO_EPISODE_LIMIT, on_step)
        except AbortedError as why:
            if isinstance(why, CallCancelledError):
                physics.stop_here()  # nothing follows a cancelled call: the arm stops where it stands
            return SkillStatus(call.id, Outcome.ABORTED, steps, self.distance(call), str(why))
        physics.stop_here()
        return SkillStatus(call.id, str(result.outcome), result.steps, float(result.distance))

    def check(self, call: SkillCall) -> str | None:
        """Why ``call`` cannot start now (None: it can): e-stop, no fresh state, a bad goal, an unseen object."""
        physics = self.physics
        if physics.safety.estop:
            return "refused: e-stop latched (publish false on the e-stop topic to release it)"
        if not physics.wait_for_state(self.p["state_timeout_s"], objects=False):
            return (
                f"no fresh joint state within state_timeout_s {self.p['state_timeout_s']} s: {physics.missing(False)}"
            )
        fault = physics.state_fault()
        if fault is not None:
            return f"arm held: {fault[1]} [rule: {fault[0]}]"
        problem = physics.safety.goal_fault(call.goal)
        if problem is not None:
            return f"refused: {problem}"
        if call.object is not None and not np.all(np.isfinite(physics.object_state(call.object).position)):
            return f"no pose of {call.object} on {physics.object_topics[call.object]}"
        return None

    def distance(self, call: SkillCall) -> float:
        """From the TCP (or the call's object) to the call's goal now (m)."""
        here = self.physics.object_state(call.object).position if call.object else self.physics.tcp()[0]
        return float(np.linalg.norm(here - np.asarray(call.goal)))

    # -- shutdown --------------------------------------------------------------------------------------
    def stop(self) -> None:
        """End the running call (it reports ``aborted``), then publish the final hold."""
        with self._calls:
            self._stopping = True
            self._generation += 1
            if self._pending is not None:
                self.publish_status(SkillStatus(self._pending.id, Outcome.ABORTED, why="shutdown before it started"))
                self._pending = None
            self._calls.notify_all()
        self._worker.join(timeout=2.0 + 2 * self.period)
        self.physics.final_hold("shutdown")
        self.get_logger().info("final hold published")
        time.sleep(0.05)


def numpy_skills(skills: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """``skills`` with each learned skill's policy run as a NumPy forward pass (:mod:`hrl.ros.inference`, checked
    against SB3's ``predict``; 0.05 ms a step instead of 0.9-1.3 ms, quiet, more on a busy machine), and for each
    learned skill the path it takes: ``numpy``, or ``predict (why not numpy)``. Scripted skills are unchanged."""
    import dataclasses

    from hierarchy.tabletop import LearnedSkill
    from hrl.ros.inference import UnsupportedPolicyError, checked_numpy_policy

    fast, paths = dict(skills), {}
    for name, skill in skills.items():
        if not isinstance(skill, LearnedSkill):
            continue
        try:
            fast[name] = dataclasses.replace(skill, policy=checked_numpy_policy(skill.policy))
            paths[name] = "numpy"
        except UnsupportedPolicyError as err:
            paths[name] = f"predict ({err})"
    return fast, paths


def _call_id(text: str) -> str:
    """The id of a call that could not be parsed, if it has one (for its status)."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return ""
    return str(data.get("id", "")) if isinstance(data, dict) else ""


def _fmt(v: Any) -> str:
    return "(" + ", ".join(f"{float(x):.3f}" for x in v) + ")"


def main(argv: list[str] | None = None) -> int:
    """Console entry: run the node until Ctrl-C / SIGTERM, then publish the final hold."""
    from hrl.ros.runner import run_node

    return run_node(ArmPolicyNode, argv, freeze_gc=True)


if __name__ == "__main__":
    sys.exit(main())
