"""``arm_planner_node``: the tabletop hierarchy (any planner that plans for the tabletop) on a ROS 2 arm.

Takes a task on ``/task`` (std_msgs/String): the goals in order, ``red_block on blue_block, yellow_block on
red_block``, or a JSON object in the form of a tabletop suite's episode, ``{"text": "stack the red block on the
blue one", "goals": ["red_block on blue_block"]}`` (or ``"stack": [bottom, ..., top]``, ``"sort"``, ``"clear"``:
hierarchy/suites.py). It runs the domain-free :class:`hierarchy.agent.Agent` with the tabletop domain
(:mod:`hierarchy.tabletop`): the planner plans, the plan is grounded into skill calls before anything moves, and
each skill call is sent to the arm's policy node on ``/arm_subgoal`` (JSON, :class:`hrl.ros.arm_messages.SkillCall`,
its goal computed from where the objects are when the call starts) and answered on ``/arm_subgoal_status``; a
failed call makes the agent replan with feedback (at most ``max_replans`` times), as in simulation. What the agent
knows of the scene comes from ``/joint_states`` and the object poses (``/objects/<name>/pose``) through a
read-only :class:`hrl.ros.arm_physics.RosArmPhysics`.

Planners that look (:data:`VISION_PLANNERS`: ``vla``, ``vlm_http``) see the camera through the same mirror: it
subscribes ``sensor_msgs/Image`` on ``<camera>_image_topic`` (and, for ``vla``, ``<camera>_depth_topic``) of the
cameras the planner looks through, and ``env.camera_image`` serves the latest images at the size the planner asks
(``RosArmPhysics.render``). A task waits for them as for the joint states; a missing or stale image
(``image_timeout_s``) or an unsupported encoding fails the task naming the topic.

A message on ``/task_cancel`` (std_msgs/Empty) ends the running task without a new one. A cancelled or superseded
task's skill call in flight is cancelled on the policy node (:class:`hrl.ros.arm_messages.SkillCancel`, on the calls'
own topic): the arm stops where it stands instead of finishing a motion nobody wants while the next task is planned.

``/task_status`` (std_msgs/String) says ``planning: <task>``, ``executing: <subgoal> (<skill call>)`` for every
skill call, ``cancelled: <task>: superseded by <new task>`` or ``cancelled: <task>: by /task_cancel``, and ends
each task with ``done`` or ``failed: why``
(as the rover's planner node, :func:`hrl.ros.planner_node.is_final`); ``/plan`` (latched) holds the labels of the
latest plan as JSON. The agent runs on a worker thread: the node keeps hearing the robot and new tasks.
"""

from __future__ import annotations

import itertools
import json
import sys
import threading
import time
from typing import Any

from rclpy.node import Node
from rclpy.parameter import Parameter
from std_msgs.msg import Empty, String

from hierarchy.domain import Outcome, SkillResult, Step
from hrl.ros import qos
from hrl.ros.arm_messages import MessageError, SkillCall, SkillCancel, SkillStatus
from hrl.ros.params import Param, ParameterError, declare, non_empty, positive, topic, whole_number
from hrl.ros.planner_node import PlanWorker, _file_or_empty
from sim.tabletop.physics import CAMERAS


def _positive_int(value: Any) -> str | None:
    return None if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else "must be an integer >= 1"


#: How long a task waits for the first joint states and object poses (and camera images) (s).
STATE_WAIT_S = 10.0
#: The planners that look through cameras (their ``camera`` or ``cameras``), and whether they need depth images.
VISION_PLANNERS = {"vla": True, "vlm_http": False}

PARAMS = [
    Param("scene", "blocks", "tabletop scene (sim/scenes name or a .yaml path): its objects and places", non_empty),
    Param(
        "planner",
        "symbolic",
        "a planner config that plans for the tabletop, as planner=<name> (configs/planner/<name>.yaml: symbolic, "
        "flat, llm_goals, llm_goals_untrained, saycan; vla and vlm_http look through the camera topics)",
        non_empty,
    ),
    Param(
        "planner_params_file",
        "",
        "YAML of planner parameters, over configs/planner/<name>.yaml's (vla: model: <model.pt>)",
        _file_or_empty,
    ),
    Param("max_replans", 3, "replans per task after failed subgoals", whole_number),
    Param("max_episode_steps", 1500, "skill steps per task, all calls together", _positive_int),
    Param("skill_hz", 25.0, "the arm's skill rate (Hz): a call of budget B steps lasts about B / skill_hz s", positive),
    Param("call_slack", 3.0, "a skill call not answered within slack x its budget's time (+ 5 s) fails", positive),
    Param(
        "arm_wait_s",
        120.0,
        "a skill call waits this long (s) for the arm policy node to be up (its status publisher appears once its "
        "skills are loaded) before it is sent; none by then: the call is aborted",
        positive,
    ),
    Param("world_frame", "world", "frame of object poses and goals", non_empty),
    Param("task_topic", "/task", "std_msgs/String in: goals or a JSON episode", topic),
    Param(
        "cancel_topic",
        "/task_cancel",
        "std_msgs/Empty in: end the running task; its skill call is cancelled and the arm stops where it stands",
        topic,
    ),
    Param(
        "task_status_topic",
        "/task_status",
        "std_msgs/String out: planning | executing | cancelled | done | failed",
        topic,
    ),
    Param("plan_topic", "/plan", "std_msgs/String out: the latest plan's subgoal labels (JSON)", topic),
    Param(
        "subgoal_topic",
        "/arm_subgoal",
        "std_msgs/String out: one skill call (JSON) for the arm policy node, or the cancel of one",
        topic,
    ),
    Param("subgoal_status_topic", "/arm_subgoal_status", "std_msgs/String in: the skill call's outcome (JSON)", topic),
    Param("joint_states_topic", "/joint_states", "sensor_msgs/JointState in", topic),
    Param(
        "object_topic_prefix", "/objects", "object poses in: <prefix>/<name>/pose (geometry_msgs/PoseStamped)", topic
    ),
    *(
        Param(
            f"{camera}_{kind}_topic",
            f"/camera/{camera}/{suffix}",
            f"sensor_msgs/Image in: the {camera} camera's {what}; subscribed only for a planner that looks "
            f"through it ({', '.join(VISION_PLANNERS)})",
            topic,
        )
        for camera in CAMERAS
        for kind, suffix, what in (
            ("image", "image_raw", "colour image (rgb8 | bgr8)"),
            ("depth", "depth/image_raw", "depth image registered to it (32FC1 m | 16UC1 mm; vla)"),
        )
    ),
    Param(
        "image_timeout_s", 1.0, "a camera image older than this (s since it arrived) is stale: not planned on", positive
    ),
    qos.qos_param("task_qos", "reliable", "/task and /task_cancel in"),
    qos.qos_param("task_status_qos", "reliable", "/task_status out"),
    qos.qos_param("plan_qos", "latched", "/plan out"),
    qos.qos_param("subgoal_qos", "reliable", "/arm_subgoal out"),
    qos.qos_param("subgoal_status_qos", "reliable", "/arm_subgoal_status in"),
    qos.qos_param("joint_states_qos", "sensor_data", "/joint_states in"),
    qos.qos_param("object_qos", "sensor_data", "object poses in"),
    qos.qos_param("camera_qos", "sensor_data", "camera images in"),
]


class CancelledError(Exception):
    """The task was superseded or the node is stopping: the agent's loop ends here."""


class RemoteSkill:
    """A domain skill run by the arm's policy node: each :class:`~hierarchy.domain.Step` goes out as a
    :class:`SkillCall` (its goal computed now, on the planner's view of the robot) and its status comes back."""

    def __init__(self, node: ArmPlannerNode, name: str) -> None:
        self.node, self.name = node, name

    def run(self, env: Any, step: Step, max_steps: int, on_step: Any) -> SkillResult:
        node = self.node
        budget = max(1, min(step.budget, max_steps))
        call = SkillCall.from_step(step, env, node.next_call_id())
        call = SkillCall(call.id, call.skill, call.goal, call.object, call.tolerance, budget, call.gripper, call.label)
        status = node.call(call, timeout_s=budget / node.p["skill_hz"] * node.p["call_slack"] + 5.0)
        for _ in range(min(status.steps, max_steps)):
            on_step()  # the agent counts the steps the arm took
        if status.outcome == Outcome.ABORTED:
            node.get_logger().warning(f"skill call {call.id} ({call.label or call.skill}) aborted: {status.why}")
        return SkillResult(status.result, status.steps, status.distance)


class _Announcing:
    """The planner, with every plan it makes announced (``/plan``) before it is grounded and run."""

    def __init__(self, planner: Any, announce: Any) -> None:
        self._planner, self._announce = planner, announce

    def plan(self, *args: Any, **kwargs: Any) -> Any:
        plan = self._planner.plan(*args, **kwargs)
        self._announce([s.label() for s in getattr(plan, "subgoals", ())])
        return plan

    def __getattr__(self, name: str) -> Any:  # stepwise, domains, reset, backend, ...: the planner's own
        return getattr(self._planner, name)


class ArmPlannerNode(Node):
    """The tabletop hierarchy between ``/task`` and the arm's policy node; ``overrides`` are parameter values."""

    def __init__(self, **overrides: Any) -> None:
        super().__init__("arm_planner_node", parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()])
        from hierarchy.agent import Agent, AgentConfig
        from hierarchy.tabletop import SCRIPTED, SKILLS, TabletopDomain
        from hrl.config import planners_for
        from hrl.eval import planner_from_file
        from hrl.hierarchy_eval import build_planner
        from sim.tabletop.scene import load_scene

        p = self.p = declare(self, PARAMS)
        try:
            self.scene = load_scene(p["scene"])
            # planner=<name> as configured (configs/planner/<name>.yaml, as hrl-eval runs it), the file's keys over it
            registered, params = planner_from_file(p["planner"], p["planner_params_file"])
            if registered not in planners_for("tabletop"):
                raise ValueError(
                    f"parameter 'planner' = {p['planner']!r} does not plan for the tabletop; use one of: "
                    f"{', '.join(planners_for('tabletop'))}"
                )
            self.planner = build_planner(registered, params, None)  # type: ignore[arg-type]
        except (ValueError, FileNotFoundError) as err:
            raise ParameterError(str(err)) from None
        # the cameras the planner looks through (none for those that read the scene's symbols)
        looks = registered in VISION_PLANNERS
        self.cameras: tuple[str, ...] = (
            tuple(getattr(self.planner, "cameras", None) or (self.planner.camera,)) if looks else ()
        )
        self.needs_depth = looks and VISION_PLANNERS[registered]
        skills = {name: RemoteSkill(self, name) for name in [*SKILLS, *SCRIPTED]}
        self.agent = Agent(
            TabletopDomain(skills=skills),  # type: ignore[arg-type]
            _Announcing(self.planner, self.announce),
            AgentConfig(max_replans=p["max_replans"], max_episode_steps=p["max_episode_steps"]),
        )
        self.env = self._mirror_env()
        self.worker = PlanWorker()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._pending: dict[str, tuple[threading.Event, list[SkillStatus]]] = {}
        self._in_flight: str | None = None  # the id of the skill call the arm runs for us
        self.task_text: str | None = None  # the task being carried out
        self.cancelled = threading.Event()  # set to end the running task (superseded, stopping)
        self.running = threading.Event()  # an agent is running on the worker
        self.status_pub = qos.advertise(self, String, p["task_status_topic"], p["task_status_qos"], "task_status_qos")
        self.plan_pub = qos.advertise(self, String, p["plan_topic"], p["plan_qos"], "plan_qos")
        self.call_pub = qos.advertise(self, String, p["subgoal_topic"], p["subgoal_qos"], "subgoal_qos")
        qos.subscribe(self, String, p["task_topic"], self.on_task, p["task_qos"], "task_qos")
        qos.subscribe(self, Empty, p["cancel_topic"], self.on_cancel, p["task_qos"], "task_qos")
        qos.subscribe(self, String, p["subgoal_status_topic"], self.on_status, p["subgoal_status_qos"],
                      "subgoal_status_qos")  # fmt: skip
        self.get_logger().info(
            f"planner {p['planner']!r} on scene {self.scene.name!r} ({', '.join(o.name for o in self.scene.objects)}); "
            f"skill calls on {p['subgoal_topic']}"
        )
        physics = self.env.unwrapped.physics
        for camera in self.cameras:
            image, depth = physics.cameras[camera]
            also = f" and {depth}" if depth else ""
            self.get_logger().info(f"it looks through the {camera} camera: {image}{also}")

    def _mirror_env(self) -> Any:
        """The agent's view of the robot: the tabletop env over a read-only ROS physics (nothing moves through
        it; the skills are the policy node's)."""
        from hierarchy.tabletop import make_env
        from hrl.ros.arm_physics import RosArmPhysics
        from robots.arm import load_arm

        p = self.p
        physics = RosArmPhysics(
            self,
            self.scene,
            load_arm("panda"),
            period=1.0 / p["skill_hz"],
            read_only=True,
            joint_states_topic=p["joint_states_topic"],
            joint_states_qos=p["joint_states_qos"],
            object_topic_prefix=p["object_topic_prefix"],
            object_qos=p["object_qos"],
            world_frame=p["world_frame"],
            cameras={
                c: (p[f"{c}_image_topic"], p[f"{c}_depth_topic"] if self.needs_depth else "") for c in self.cameras
            },
            camera_qos=p["camera_qos"],
            image_timeout_s=p["image_timeout_s"],
        )
        return make_env(self.scene, backend=physics)

    # -- skill calls ---------------------------------------------------------------------------------
    def next_call_id(self) -> str:
        return f"{self.get_name()}-{next(self._ids)}"

    def call(self, call: SkillCall, timeout_s: float) -> SkillStatus:
        """Send ``call`` to the policy node and wait for its status (on the agent's thread)."""
        if self.cancelled.is_set():
            raise CancelledError()
        done: tuple[threading.Event, list[SkillStatus]] = (threading.Event(), [])
        with self._lock:
            self._pending[call.id] = done
        self.status_pub.publish(String(data=f"executing: {call.label or call.skill} ({call.skill} call {call.id})"))
        try:
            missing = self.wait_for_arm(self.p["arm_wait_s"])
            if missing:
                why = f"no arm policy node within arm_wait_s {self.p['arm_wait_s']:.0f} s: {missing}"
                return SkillStatus(call.id, Outcome.ABORTED, why=f"{why} (start hrl.ros.arm_policy_node)")
            with self._lock:  # a cancel is either seen here, or sent after the call (same topic: in that order)
                if self.cancelled.is_set():
                    raise CancelledError()
                self.call_pub.publish(String(data=call.to_json()))
                self._in_flight = call.id
            deadline = time.monotonic() + timeout_s
            while not done[0].wait(0.05):
                if self.cancelled.is_set():
                    raise CancelledError()
                if time.monotonic() > deadline:
                    return SkillStatus(call.id, Outcome.ABORTED, why=f"no status from the arm within {timeout_s:.0f} s "
                                       f"(is the arm policy node running on {self.p['subgoal_topic']}?)")  # fmt: skip
        finally:
            with self._lock:
                self._pending.pop(call.id, None)
                if self._in_flight == call.id:
                    self._in_flight = None
        return done[1][0]

    def end_running(self, why: str) -> None:
        """End the running agent at its next skill call or wait, and cancel the call the arm is running for it."""
        with self._lock:
            self.cancelled.set()
            call_id, self._in_flight = self._in_flight, None
            if call_id is not None:
                self.call_pub.publish(String(data=SkillCancel(call_id, why).to_json()))
        if call_id is not None:
            self.get_logger().info(f"skill call {call_id} cancelled: {why}")

    def wait_for_arm(self, timeout_s: float) -> str:
        """Wait until a policy node takes calls and answers them; what is still missing after ``timeout_s`` ("": up).

        The policy node subscribes to calls at once but advertises its status topic only once its skills are
        loaded (tens of seconds on a busy machine), so a call's own timeout starts when the arm can run it."""
        calls, answers = self.p["subgoal_topic"], self.p["subgoal_status_topic"]

        def missing() -> str:
            gaps = []
            if self.call_pub.get_subscription_count() == 0:
                gaps.append(f"nothing subscribes to {calls}")
            if self.count_publishers(answers) == 0:
                gaps.append(f"nothing publishes {answers}")
            return " and ".join(gaps)

        deadline, said = time.monotonic() + timeout_s, False
        while (gap := missing()) and time.monotonic() < deadline:
            if self.cancelled.is_set():
                raise CancelledError()
            if not said:
                self.get_logger().info(f"waiting for the arm policy node: {gap}")
                said = True
            time.sleep(0.05)
        return gap

    def on_status(self, msg: Any) -> None:
        try:
            status = SkillStatus.from_json(msg.data)
        except MessageError as err:
            self.get_logger().error(f"{self.p['subgoal_status_topic']}: {err}")
            return
        with self._lock:
            waiting = self._pending.get(status.id)
        if waiting is not None:  # statuses of other planners' calls, or of calls given up on, are not ours
            waiting[1].append(status)
            waiting[0].set()

    # -- tasks ---------------------------------------------------------------------------------------
    def parse_task(self, text: str) -> Any:
        """A :class:`~llm_planner.tabletop.TabletopTask` from ``/task``'s text; ValueError saying what to send."""
        from hierarchy.suites import tabletop_suite_from_dict
        from robots._fields import ConfigFileError

        stripped = text.strip()
        if stripped.startswith("{"):
            try:
                episode = json.loads(stripped)
            except json.JSONDecodeError as err:
                raise ValueError(f"the task is not valid JSON ({err.msg} at position {err.pos})") from None
            if not isinstance(episode, dict):
                raise ValueError('a JSON task must be an object like {"text": ..., "goals": [...]}')
            episode.setdefault("text", stripped)
        else:
            goals = [g.strip() for g in stripped.split(",") if g.strip()]
            episode = {"text": stripped, "goals": goals}
        try:
            suite = tabletop_suite_from_dict(
                {"name": "ros", "scene": self.p["scene"], "episodes": [episode]}, source="/task"
            )
        except ConfigFileError as err:
            raise ValueError(
                f"{err.problem}; send the goals in order ('red_block on blue_block, yellow_block on red_block') or "
                'a JSON episode ({"text": ..., "goals" | "stack" | "sort" | "clear": ...})'
            ) from None
        return suite.tasks[0]

    def on_task(self, msg: Any) -> None:
        text = msg.data.strip()
        if self.task_text is not None:
            self.status_pub.publish(String(data=f"cancelled: {self.task_text}: superseded by {text}"))
            self.get_logger().info(f"task {self.task_text!r} cancelled: superseded by {text!r}")
        self.end_running(f"task superseded by {text}")  # the running agent (if any) ends at its next call or wait
        try:
            task = self.parse_task(text)
        except ValueError as err:
            self.task_text = None
            self.finish(f"failed: {err}")
            return
        self.task_text = text
        self.worker.submit(lambda: self.execute(task, text))

    def on_cancel(self, msg: Any) -> None:
        """End the running task without a new one: its skill call is cancelled, the arm stops where it stands."""
        text = self.task_text
        if text is None:
            self.get_logger().info(f"{self.p['cancel_topic']}: no task is running, nothing to cancel")
            return
        self.task_text = None
        self.end_running(f"task {text!r} cancelled by {self.p['cancel_topic']}")
        self.status_pub.publish(String(data=f"cancelled: {text}: by {self.p['cancel_topic']}"))
        self.get_logger().info(f"task {text!r} cancelled by {self.p['cancel_topic']}")

    def execute(self, task: Any, text: str) -> None:
        """On the worker thread: one task, from waiting for the robot's state to its verdict."""
        self.cancelled.clear()  # the previous agent has ended: jobs run one at a time
        if self.task_text != text:
            return  # superseded while queued
        physics = self.env.unwrapped.physics
        problem = None
        if not physics.wait_for_state(STATE_WAIT_S):
            problem = f"no joint states and object poses within {STATE_WAIT_S:.0f} s: {physics.missing()}"
        elif self.cameras and not physics.wait_for_images(self.cameras, STATE_WAIT_S, depth=self.needs_depth):
            missing = physics.missing_images(self.cameras, depth=self.needs_depth)
            problem = f"no fresh camera images within {STATE_WAIT_S:.0f} s for planner {self.p['planner']!r}: {missing}"
        if self.cancelled.is_set() or self.task_text != text:
            return  # cancelled or superseded while it waited for the robot: on_task / on_cancel said so
        if problem is not None:
            self.finish(f"failed: {problem}")
            return
        self.status_pub.publish(String(data=f"planning: {text}"))
        try:
            episode = self.agent.run(self.env, task)
        except CancelledError:
            return  # on_task has said so
        except Exception as err:  # the planner's or the arm's failure, reported, never the end of the node
            self.get_logger().error(f"task {text!r}: {type(err).__name__}: {err}")
            self.finish(f"failed: {type(err).__name__}: {err}")
            return
        if self.task_text != text:
            return
        if episode.success:
            self.finish("done")
        else:
            self.finish(f"failed: {episode.reason} ({episode.goals_reached} of {episode.goals_total} goals hold)")

    def announce(self, labels: list[str]) -> None:
        self.plan_pub.publish(String(data=json.dumps(labels)))
        self.get_logger().info(f"plan: {' > '.join(labels)}")

    def finish(self, status: str) -> None:
        self.task_text = None
        self.status_pub.publish(String(data=status))
        self.get_logger().info(f"task {status}")

    def stop(self) -> None:
        self.cancelled.set()
        self.worker.close()


def main(argv: list[str] | None = None) -> int:
    from hrl.ros.runner import run_node

    return run_node(ArmPlannerNode, argv)


if __name__ == "__main__":
    sys.exit(main())
