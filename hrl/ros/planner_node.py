"""``planner_node``: any registered planner (graph, sorb, llm_goals, llm_route, ...) on a ROS 2 robot.

Takes a task on ``/task`` (std_msgs/String: an instruction for LLM planners, place names separated by
commas for the others, e.g. ``fridge, charging_dock``) or a goal on ``/goal_pose``
(geometry_msgs/PoseStamped, what RViz sends). It runs the same loop as the simulator, the domain-free
:class:`hierarchy.agent.Agent` with the navigation domain (:mod:`hierarchy.navigation`): the planner plans from
the robot's pose (``/odom``), the plan is grounded before anything moves and published on ``/plan``
(nav_msgs/Path), each subgoal goes to the policy node on ``/subgoal`` and its outcome comes back on
``/subgoal_status``; a failed subgoal, or a plan that ends with a goal not visited, makes it replan from where
the robot is (at most ``max_replans`` times). The task is judged as in simulation, on the odometry's trajectory:
its goals visited in order (within ``goal_tolerance``) and no avoided room entered (entering one stops the robot
and fails the task). An instruction's goals and avoided rooms are the planner's reading of it (``llm_goals``);
a planner that reads no goals (``llm_route``) is judged on reaching its plan's last point. The map's frame is
the odom frame (the robot starts at a known pose of the map).

Planning runs on a worker thread, never in a callback: an LLM over HTTP with retries can take a minute,
and meanwhile the node keeps hearing ``/odom`` and new tasks and keeps reporting. ``/task_status``
(std_msgs/String) says ``planning: <task>`` when a plan starts and every second while it runs
(``planning: <task> (12 s)``), ``cancelled: <task>: superseded by <new task>`` when a new task replaces one
(a plan still being computed for the old one is discarded when it arrives), and ends each task with
``done`` or ``failed: why`` (:func:`is_final`). A message on ``/task_cancel`` (std_msgs/Empty) ends the running
task without a new one: the robot is stopped where it stands (a subgoal at its pose, which the policy node
holds) and the status says ``cancelled: <task>: by /task_cancel``.
"""

from __future__ import annotations

import math
import queue
import sys
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from geometry_msgs.msg import PoseStamped
from nav_msgs.msg import Odometry
from nav_msgs.msg import Path as PathMsg
from rclpy.node import Node
from rclpy.parameter import Parameter
from std_msgs.msg import Empty, String

from hrl import DEFAULT_POLICY
from hrl.ros import qos
from hrl.ros.core import finite, parse_status
from hrl.ros.core import yaw_from_quaternion as _yaw
from hrl.ros.params import Param, ParameterError, declare, non_empty, topic


def _non_negative_int(value: Any) -> str | None:
    return None if isinstance(value, int) and value >= 0 else "must be an integer >= 0"


def _positive(value: Any) -> str | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    return None if ok else "must be a number > 0"


def _file_or_empty(value: Any) -> str | None:
    ok = isinstance(value, str) and (not value or Path(value).is_file())
    return None if ok else "must be an existing YAML file, or empty for the planner's defaults"


ODOM_WAIT_S = 10.0  # how long a task waits for the first /odom
REACH_CONFIRM_S = 1.0  # how long a reported 'reached' waits for this node's odometry to show it
STATUS_PERIOD_S = 1.0  # a 'planning' report this often while a plan is being computed

PARAMS = [
    Param("map", "apartment", "map the robot runs in (its frame is the odom frame)", non_empty),
    Param(
        "planner",
        "graph",
        "a planner config, as planner=<name> (configs/planner/<name>.yaml: graph, sorb, llm_goals, "
        "llm_goals_untrained...), or a registered planner (llm_planner.base.PLANNERS)",
        non_empty,
    ),
    Param(
        "planner_params_file",
        "",
        "YAML of planner parameters, over configs/planner/<name>.yaml's (a backend given: its own backend_params)",
        _file_or_empty,
    ),
    Param("policy", DEFAULT_POLICY, "policy for planners that need its critic (sorb)", non_empty),
    Param("max_replans", 3, "replans per task after failed subgoals", _non_negative_int),
    Param("goal_tolerance", 0.3, "a goal is visited when the odometry comes this close (m)", _positive),
    Param(
        "subgoal_timeout_s",
        300.0,
        "how long a subgoal waits for the policy node's status before the task fails (the policy node's own "
        "budget ends a subgoal first)",
        _positive,
    ),
    Param("odom_frame", "odom", "frame of /plan and /subgoal", non_empty),
    Param(
        "map_frame",
        "map",
        "/goal_pose may also come in this frame (RViz's goal tool sends 'map'); the node assumes it equals the "
        "odom frame (no localisation; the robot starts at a known pose of the map)",
        non_empty,
    ),
    Param("task_topic", "/task", "std_msgs/String in: instruction or place names", topic),
    Param("goal_pose_topic", "/goal_pose", "geometry_msgs/PoseStamped in (odom or map frame)", topic),
    Param("cancel_topic", "/task_cancel", "std_msgs/Empty in: end the running task, stop the robot where it is", topic),
    Param(
        "stop_on_supersede",
        True,
        "a new task or goal pose stops the robot where it stands while it is planned, as /task_cancel does and as "
        "the arm's planner node cancels its running call (false: it keeps driving to the old task's subgoal until "
        "the new plan's first one goes out)",
    ),
    Param("odom_topic", "/odom", "nav_msgs/Odometry in", topic),
    Param("status_topic", "/subgoal_status", "std_msgs/String in, from the policy node", topic),
    Param("plan_topic", "/plan", "nav_msgs/Path out", topic),
    Param("subgoal_topic", "/subgoal", "geometry_msgs/PoseStamped out", topic),
    Param("task_status_topic", "/task_status", "std_msgs/String out: planning | cancelled | done | failed", topic),
    qos.qos_param("odom_qos", "sensor_data", "/odom in"),
    qos.qos_param("task_qos", "reliable", "/task, /goal_pose and /task_cancel in"),
    qos.qos_param("status_qos", "reliable", "/subgoal_status in"),
    qos.qos_param("plan_qos", "latched", "/plan out"),
    qos.qos_param("subgoal_qos", "reliable", "/subgoal out"),
    qos.qos_param("task_status_qos", "reliable", "/task_status out"),
]


def is_final(status: str) -> bool:
    """Whether a ``/task_status`` message ends a task (``done``, ``failed: ...``, ``cancelled: ...``)."""
    return status == "done" or status.startswith(("failed:", "cancelled:"))


class PlanWorker:
    """Planner calls on a thread of their own, one at a time (planners keep state and are not
    thread-safe), so a slow planner never blocks the node's callbacks. A daemon thread: a call still
    running when the node stops (an HTTP request) does not hold the process."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[tuple[Future, Callable[[], Any]] | None] = queue.SimpleQueue()
        threading.Thread(target=self._run, name="planner", daemon=True).start()

    def submit(self, fn: Callable[[], Any]) -> Future:
        """``fn()`` in the worker; the future holds its result or exception (``cancel()`` skips it while
        queued; a running call cannot be interrupted: its result is the caller's to ignore)."""
        future: Future = Future()
        self.jobs.put((future, fn))
        return future

    def _run(self) -> None:
        while (job := self.jobs.get()) is not None:
            future, fn = job
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn())
                except Exception as err:  # the node reports it: a planner bug must not end the worker
                    future.set_exception(err)

    def close(self) -> None:
        self.jobs.put(None)


class CancelledError(Exception):
    """The task was superseded or the node is stopping: the agent's loop ends here."""


class _RosView:
    """What the agent and the navigation domain see of the robot: the map (``unwrapped.world``); the pose,
    trajectory and avoided rooms come from ``/odom`` (:class:`_OdomTrack`)."""

    def __init__(self, world: Any) -> None:
        self.world = world
        self.unwrapped = self


class _OdomTrack:
    """The navigation domain's episode state on a robot: the trajectory of ``/odom`` since the task started and
    the avoided room entered, if any (what :class:`~hierarchy.navigation.SubgoalExecutor` keeps in simulation)."""

    def __init__(self, pose: Any, avoid: list[tuple[str, Any]]) -> None:
        from hierarchy.navigation import entered_room

        self._entered = entered_room  # resolved once: add() runs on every /odom message
        self.pose = pose
        self.trajectory: list[tuple[float, float]] = [(pose.x, pose.y)]
        self.avoid = avoid
        self.violation: str | None = None
        self.obs = None  # the planner sees the map and the pose only

    @property
    def position(self) -> tuple[float, float]:
        return (self.pose.x, self.pose.y)

    def add(self, pose: Any) -> None:
        self.pose = pose
        self.trajectory.append((pose.x, pose.y))
        if self.violation is None and self.avoid:
            self.violation = self._entered(self.avoid, (pose.x, pose.y))


class RemoteDrive:
    """The navigation domain's ``drive`` skill run by the policy node: the subgoal goes out on ``/subgoal``,
    its outcome comes back on ``/subgoal_status``; entering an avoided room stops the robot (a subgoal where it
    stands) and ends the call."""

    def __init__(self, node: PlannerNode) -> None:
        self.node = node

    def run(self, env: Any, step: Any, max_steps: int, on_step: Any) -> Any:
        from hierarchy.domain import Outcome, SkillResult

        node = self.node
        x, y = (float(v) for v in step.goal(env))
        status = node.drive(x, y)
        track = node.track
        distance = math.dist(track.position, (x, y)) if track is not None else math.inf
        if status is None:  # an avoided room entered
            return SkillResult(Outcome.ENTERED_AVOIDED_ROOM, 0, distance)
        outcome, why = status
        if outcome == "reached":
            return SkillResult(Outcome.REACHED, 0, distance)
        node.get_logger().warning(f"subgoal {step.label} ({x:.2f}, {y:.2f}) failed: {why}")
        if why.startswith("over the"):
            return SkillResult(Outcome.BUDGET, 0, distance)
        if why.startswith("no progress"):
            return SkillResult(Outcome.STUCK, 0, distance)
        return SkillResult(Outcome.ABORTED, 0, distance)  # refused by the policy node, or no answer: not for a replan


def _ros_domain(node: PlannerNode) -> Any:
    from hierarchy.navigation import NavigationDomain, avoid_regions, visited_in_order
    from llm_planner.planners.common import goal_point

    class RosNavigationDomain(NavigationDomain):
        """The navigation domain on the robot: odometry instead of a simulator, the policy node as the skill,
        and an instruction judged by the planner's own reading of it."""

        def start(self, env: Any, task: Any, event: Any, obs: Any) -> None:
            world = env.unwrapped.world
            self.task = task
            self.read = not node.names_task  # the goals are the planner's reading of the instruction
            self.goals = [] if self.read else [goal_point(g, world) for g in task.goals]
            node.track = self._executor = _OdomTrack(node.pose, avoid_regions(world, task.avoid))  # type: ignore[assignment]
            self.plans, self._last = [], []

        def observe(self, env: Any) -> Any:
            from llm_planner.base import Scene

            return Scene(env.unwrapped.world, node.pose)

        def ground(self, plan: Any, scene: Any) -> Any:
            grounded = super().ground(plan, scene)
            if self.read:
                self._adopt_reading(scene.world)
            node.publish_plan(self._last)
            return grounded

        def _adopt_reading(self, world: Any) -> None:
            reading_of = getattr(node.planner, "reading_of", None)
            reading = reading_of(self.task.text, world.name) if reading_of is not None else None
            if reading is None:  # a planner that reads no goals: its plan's destination
                self.goals = [self._last[-1].xy]
                return
            self.goals = [goal_point(t, world) for t in reading.targets]
            track = self.executor
            track.avoid = avoid_regions(world, tuple(reading.avoid))  # type: ignore[attr-defined]

        def progress(self, task: Any, env: Any) -> int:
            visited = visited_in_order(self.executor.trajectory, self.goals, self.goal_tolerance)
            if self.read:  # the instruction is one goal: all its reading's targets, in order
                return int(bool(self.goals) and visited == len(self.goals))
            return visited

        def feedback(self, *args: Any) -> Any:
            fb = super().feedback(*args)
            node.get_logger().warning(f"replanning: {fb.text()}")
            return fb

    return RosNavigationDomain


class _Reporting:
    """The planner, with ``/task_status`` kept informed: ``planning: <task>`` when a replan starts (the first
    plan's is said when the task arrives), every second while a call runs, and a plan for a task superseded
    meanwhile discarded."""

    def __init__(self, planner: Any, node: PlannerNode) -> None:
        self._planner, self._node = planner, node

    def plan(self, task: Any, scene: Any, feedback: Any = None) -> Any:
        node = self._node
        if feedback is not None:
            node.status(f"planning: {task.text}")
        node.planning = [task.text, time.monotonic(), time.monotonic()]
        try:
            plan = self._planner.plan(task, scene, feedback)
        except Exception:
            self._discard_if_superseded(task.text)
            raise
        finally:
            node.planning = None
        self._discard_if_superseded(task.text)
        return plan

    def _discard_if_superseded(self, text: str) -> None:
        node = self._node
        if node.cancelled.is_set() or node.task_text != text:
            node.get_logger().info(f"plan for the superseded task {text!r} discarded")
            raise CancelledError()

    def __getattr__(self, name: str) -> Any:  # name, domains, last_usage, reading_of, ...: the planner's own
        return getattr(self._planner, name)


class PlannerNode(Node):
    """The planner between ``/task``, ``/goal_pose`` and the policy node; ``overrides`` are parameter values."""

    def __init__(self, **overrides: Any) -> None:
        super().__init__("planner_node", parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()])
        import inspect

        from hierarchy.agent import Agent, AgentConfig
        from hierarchy.navigation import ExecutorConfig
        from hrl.eval import planner_from_file
        from hrl.hierarchy_eval import build_planner
        from llm_planner.base import planner_class
        from sim.navigation.world import load_world

        p = self.p = declare(self, PARAMS)
        try:
            self.world = load_world(p["map"])
            # planner=<name> as configured (configs/planner/<name>.yaml, as hrl-eval runs it), the file's keys over it
            name, params = planner_from_file(p["planner"], p["planner_params_file"])
            cls = planner_class(name)  # unknown names fail here, with the list
            if "policy" in inspect.signature(cls).parameters:  # planners that read the policy's critic (sorb)
                params.setdefault("policy", p["policy"])
            self.planner = build_planner(name, params, None)  # type: ignore[arg-type]
        except (ValueError, FileNotFoundError) as err:
            raise ParameterError(str(err)) from None
        self.is_llm = p["planner"].startswith("llm_")
        domain = _ros_domain(self)(None, ExecutorConfig(max_replans=p["max_replans"]), p["goal_tolerance"])  # type: ignore[arg-type]
        domain.skills = {"drive": RemoteDrive(self)}
        # steps are not counted on a robot (the policy node's budget in seconds bounds each subgoal)
        config = AgentConfig(max_replans=p["max_replans"], max_episode_steps=10**9)
        self.agent = Agent(domain, _Reporting(self.planner, self), config)
        self.view = _RosView(self.world)
        self.worker = PlanWorker()
        self._lock = threading.Lock()
        self.pose: Any = None  # sim.navigation.world.Pose2D from /odom
        self.track: _OdomTrack | None = None  # the running task's trajectory
        self.task_text: str | None = None  # the task being carried out
        self.names_task = True  # whether its goals are place names (else an instruction the planner reads)
        self.cancelled = threading.Event()  # set to end the running task (superseded, stopping)
        self.planning: list[Any] | None = None  # [task text, since, last reported] while a planner call runs
        self.pending: tuple[float, float] | None = None  # the subgoal sent, awaiting its status
        self.answer: tuple[str, str] | None = None  # (reached | failed, why) for it
        self.plan_pub = qos.advertise(self, PathMsg, p["plan_topic"], p["plan_qos"], "plan_qos")
        self.subgoal_pub = qos.advertise(self, PoseStamped, p["subgoal_topic"], p["subgoal_qos"], "subgoal_qos")
        self.task_status_pub = qos.advertise(
            self, String, p["task_status_topic"], p["task_status_qos"], "task_status_qos"
        )
        qos.subscribe(self, Odometry, p["odom_topic"], self.on_odom, p["odom_qos"], "odom_qos")
        qos.subscribe(self, String, p["task_topic"], self.on_task, p["task_qos"], "task_qos")
        qos.subscribe(self, PoseStamped, p["goal_pose_topic"], self.on_goal_pose, p["task_qos"], "task_qos")
        qos.subscribe(self, Empty, p["cancel_topic"], self.on_cancel, p["task_qos"], "task_qos")
        qos.subscribe(self, String, p["status_topic"], self.on_status, p["status_qos"], "status_qos")
        self.create_timer(0.1, self.on_timer)
        self.get_logger().info(
            f"planner {p['planner']!r} on map {p['map']!r}; assuming the map frame {p['map_frame']!r} is the odom "
            f"frame {p['odom_frame']!r} (the robot starts at a known pose of the map)"
        )

    # -- inputs --------------------------------------------------------------------------------------
    def on_odom(self, msg: Any) -> None:
        from sim.navigation.world import Pose2D

        q = msg.pose.pose.orientation
        x, y = msg.pose.pose.position.x, msg.pose.pose.position.y
        if finite(x, y, q.x, q.y, q.z, q.w):
            self.pose = Pose2D(x, y, _yaw(q.x, q.y, q.z, q.w))
            track = self.track
            if track is not None:
                track.add(self.pose)

    def on_task(self, msg: Any) -> None:
        from llm_planner.base import Task

        text = msg.data.strip()
        names = [n.strip() for n in text.replace(" then ", ",").split(",") if n.strip()]
        try:
            goals = tuple(self.world.resolve(n).name for n in names) if names else ()
        except ValueError as err:
            if not self.is_llm:
                self.supersede(text)
                self.finish(f"failed: planner {self.p['planner']!r} needs place names ({err})")
                return
            goals = ()
        # an instruction's goals are what the planner reads (the task carries its text as its one goal)
        self.start(Task(text, goals or (text,)), names_task=bool(goals))

    def on_goal_pose(self, msg: Any) -> None:
        from llm_planner.base import Task

        x, y = msg.pose.position.x, msg.pose.position.y
        text = f"go to ({x:.2f}, {y:.2f})"
        frames = (self.p["odom_frame"], self.p["map_frame"])
        if not finite(x, y) or (msg.header.frame_id and msg.header.frame_id not in frames):
            self.supersede(text)
            self.finish(
                f"failed: goal ({x}, {y}) in frame {msg.header.frame_id!r} not usable: send a finite goal in "
                f"{frames[0]!r} or {frames[1]!r}"
            )
            return
        self.start(Task(text, ((x, y),)), names_task=True)

    def on_cancel(self, msg: Any) -> None:
        """End the running task (its agent stops at its next wait, a plan in flight is discarded) and stop the
        robot where it stands."""
        text = self.task_text
        if text is None:
            self.get_logger().info(f"{self.p['cancel_topic']}: no task is running, nothing to cancel")
            return
        with self._lock:  # after any subgoal the agent is sending (drive), so the stop is the last one out
            self.cancelled.set()
            self.task_text = None
            if self.pose is not None:
                self.stop_here(f"task {text!r} cancelled")
        self.status(f"cancelled: {text}: by {self.p['cancel_topic']}")
        self.get_logger().info(f"task {text!r} cancelled by {self.p['cancel_topic']}")

    def on_status(self, msg: Any) -> None:
        parsed = parse_status(msg.data)
        with self._lock:
            pending = self.pending
            if parsed is None or pending is None or self.answer is not None:
                return
            outcome, x, y, why = parsed
            if abs(pending[0] - x) <= 1e-3 and abs(pending[1] - y) <= 1e-3:  # about our current subgoal
                self.answer = (outcome, why or outcome)

    # -- a task's life -------------------------------------------------------------------------------
    def supersede(self, new_text: str) -> None:
        """End the current task, if any, because ``new_text`` replaces it (its agent stops at its next wait; a
        plan still computing for it is discarded when it arrives)."""
        self.cancelled.set()
        old = self.task_text
        if old is None:
            return
        with self._lock:  # after any subgoal the old task's agent is sending (drive): the stop is the last one out
            self.task_text = None
            if self.p["stop_on_supersede"] and self.pose is not None:
                self.stop_here(f"task {old!r} superseded")
        self.status(f"cancelled: {old}: superseded by {new_text}")
        self.get_logger().info(f"task {old!r} cancelled: superseded by {new_text!r}")

    def start(self, task: Any, names_task: bool) -> None:
        self.supersede(task.text)
        self.task_text = task.text
        if self.pose is not None:
            self.status(f"planning: {task.text}")
        self.worker.submit(lambda: self.execute(task, names_task))

    def execute(self, task: Any, names_task: bool) -> None:
        """On the worker thread: one task, from waiting for odometry to its verdict."""
        self.cancelled.clear()  # the previous agent has ended: jobs run one at a time
        if self.task_text != task.text:
            return  # superseded while queued
        if self.pose is None:  # a task can arrive before the first /odom: plan when it comes
            self.get_logger().info("task received, waiting for /odom to plan")
            deadline = time.monotonic() + ODOM_WAIT_S
            while self.pose is None:
                if self.cancelled.is_set():
                    return
                if time.monotonic() > deadline:
                    self.finish(f"failed: no {self.p['odom_topic']} within {ODOM_WAIT_S:.0f} s, cannot plan")
                    return
                time.sleep(0.05)
            self.status(f"planning: {task.text}")
        self.names_task = names_task
        try:
            episode = self.agent.run(self.view, task)
        except CancelledError:
            return  # the task that superseded it has said so
        except Exception as err:  # a bug: reported, never the end of the node
            self.get_logger().error("the task failed unexpectedly:\n" + "".join(traceback.format_exception(err)))
            self.finish(f"failed: {type(err).__name__}: {err}")
            return
        finally:
            self.track = None
        if self.task_text != task.text:
            return  # superseded: its plan was discarded
        if episode.success:
            self.finish("done")
            return
        reason = episode.reason
        if reason.startswith("planner_error: "):
            err = reason.removeprefix("planner_error: ")
            self.finish(f"failed: planner error: {err}")
            return
        self.finish(f"failed: {reason}")

    def drive(self, x: float, y: float) -> tuple[str, str] | None:
        """On the agent's thread: send the subgoal (x, y), wait for its status; None when an avoided room was
        entered meanwhile (the robot is stopped where it stands)."""
        with self._lock:  # a cancel is either before this subgoal goes out, or after (and stops the robot)
            if self.cancelled.is_set():
                raise CancelledError()
            self.pending, self.answer = (x, y), None
            self.subgoal_pub.publish(self.pose_msg((x, y)))
        deadline = time.monotonic() + self.p["subgoal_timeout_s"]
        try:
            while True:
                with self._lock:
                    answer = self.answer
                if answer is not None:
                    if answer[0] == "reached":
                        self.confirm(x, y)
                    return answer
                if self.cancelled.is_set():
                    raise CancelledError()
                track = self.track
                if track is not None and track.violation is not None:
                    self.stop_here(f"entered avoided room {track.violation}")
                    return None
                if time.monotonic() > deadline:
                    timeout = self.p["subgoal_timeout_s"]
                    return "failed", (f"no status on {self.p['status_topic']} within {timeout:.0f} s "
                                      f"(is the policy node running on {self.p['subgoal_topic']}?)")  # fmt: skip
                time.sleep(0.02)
        finally:
            with self._lock:
                self.pending = None

    def confirm(self, x: float, y: float) -> None:
        """Wait (at most ``REACH_CONFIRM_S``) for this node's own odometry to show the robot at a subgoal the
        policy node reports reached: the two nodes hear ``/odom`` separately, and the task is judged on this
        node's trajectory."""
        deadline = time.monotonic() + REACH_CONFIRM_S
        while time.monotonic() < deadline and not self.cancelled.is_set():
            track = self.track
            if track is None or math.dist(track.position, (x, y)) <= self.p["goal_tolerance"]:
                return
            time.sleep(0.02)

    def stop_here(self, why: str) -> None:
        """Stop the robot: a subgoal where it stands (the policy node reaches it at once and holds)."""
        pose = self.pose
        self.subgoal_pub.publish(self.pose_msg((pose.x, pose.y)))
        self.get_logger().warning(f"{why}: stopping at ({pose.x:.2f}, {pose.y:.2f})")

    def publish_plan(self, subgoals: list[Any]) -> None:
        path = PathMsg()
        path.header.frame_id = self.p["odom_frame"]
        path.header.stamp = self.get_clock().now().to_msg()
        path.poses = [self.pose_msg(s.xy) for s in subgoals]
        self.plan_pub.publish(path)
        labels = " > ".join(s.label for s in subgoals)
        self.get_logger().info(f"plan: {len(subgoals)} subgoals: {labels}")

    def on_timer(self) -> None:
        planning = self.planning
        if planning is None:
            return
        text, since, reported = planning
        now = time.monotonic()
        if now - reported >= STATUS_PERIOD_S and text == self.task_text:
            planning[2] = now
            self.status(f"planning: {text} ({now - since:.0f} s)")

    def status(self, text: str) -> None:
        self.task_status_pub.publish(String(data=text))

    def finish(self, status: str) -> None:
        self.task_text = None
        self.status(status)
        self.get_logger().info(f"task {status}")

    def pose_msg(self, pt: Any) -> Any:
        msg = PoseStamped()
        msg.header.frame_id = self.p["odom_frame"]
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.pose.position.x, msg.pose.position.y = float(pt[0]), float(pt[1])
        msg.pose.orientation.w = 1.0
        return msg

    def stop(self) -> None:
        self.cancelled.set()
        self.worker.close()  # a plan still running is abandoned with the process


def main(argv: list[str] | None = None) -> int:
    from hrl.ros.runner import run_node

    return run_node(PlannerNode, argv)


if __name__ == "__main__":
    sys.exit(main())
