"""``planner_node``: any registered planner (graph, sorb, llm_goals, llm_route, ...) on a ROS 2 robot.

Takes a task on ``/task`` (std_msgs/String: an instruction for LLM planners, place names separated by
commas for the others, e.g. ``fridge, charging_dock``) or a goal on ``/goal_pose``
(geometry_msgs/PoseStamped, what RViz sends); plans from the robot's pose (``/odom``); publishes the plan
on ``/plan`` (nav_msgs/Path) and the current subgoal on ``/subgoal``; advances when the policy node
reports it reached on ``/subgoal_status``; replans from where the robot is when one fails (at most
``max_replans`` times). The map's frame is the odom frame (the robot starts at a known pose of the map).

Planning runs on a worker thread, never in a callback: an LLM over HTTP with retries can take a minute,
and meanwhile the node keeps hearing ``/odom`` and new tasks and keeps reporting. ``/task_status``
(std_msgs/String) says ``planning: <task>`` when a plan starts and every second while it runs
(``planning: <task> (12 s)``), ``cancelled: <task>: superseded by <new task>`` when a new task replaces one
(a plan still being computed for the old one is discarded when it arrives), and ends each task with
``done`` or ``failed: why`` (:func:`is_final`).
"""

from __future__ import annotations

import queue
import sys
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from geometry_msgs.msg import PoseStamped
from nav_msgs.msg import Odometry
from nav_msgs.msg import Path as PathMsg
from rclpy.node import Node
from rclpy.parameter import Parameter
from std_msgs.msg import String

from hrl import DEFAULT_POLICY
from hrl.ros import qos
from hrl.ros.core import PlanProgress, finite, parse_status
from hrl.ros.core import yaw_from_quaternion as _yaw
from hrl.ros.params import Param, ParameterError, declare, non_empty, topic


def _non_negative_int(value: Any) -> str | None:
    return None if isinstance(value, int) and value >= 0 else "must be an integer >= 0"


def _file_or_empty(value: Any) -> str | None:
    ok = isinstance(value, str) and (not value or Path(value).is_file())
    return None if ok else "must be an existing YAML file, or empty for the planner's defaults"


ODOM_WAIT_S = 10.0  # how long a task waits for the first /odom
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
    Param("odom_topic", "/odom", "nav_msgs/Odometry in", topic),
    Param("status_topic", "/subgoal_status", "std_msgs/String in, from the policy node", topic),
    Param("plan_topic", "/plan", "nav_msgs/Path out", topic),
    Param("subgoal_topic", "/subgoal", "geometry_msgs/PoseStamped out", topic),
    Param("task_status_topic", "/task_status", "std_msgs/String out: planning | cancelled | done | failed", topic),
    qos.qos_param("odom_qos", "sensor_data", "/odom in"),
    qos.qos_param("task_qos", "reliable", "/task and /goal_pose in"),
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


@dataclass
class PlanJob:
    """A plan being computed: for which task, after how many replans, since when."""

    task: Any
    future: Future
    replans: int
    since: float
    reported: float


class PlannerNode(Node):
    """The planner between ``/task``, ``/goal_pose`` and the policy node; ``overrides`` are parameter values."""

    def __init__(self, **overrides: Any) -> None:
        super().__init__("planner_node", parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()])
        import inspect

        from hrl.eval import planner_from_file
        from hrl.hierarchy_eval import build_planner
        from llm_planner.base import planner_class
        from sim.world import load_world

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
        self.worker = PlanWorker()
        self.pose: Any = None  # sim.world.Pose2D from /odom
        self.task: Any = None  # the current llm_planner.base.Task, until it ends
        self.job: PlanJob | None = None
        self.progress: PlanProgress | None = None
        self.reached: list[str] = []  # labels reached in the current task (bounded by its plan)
        self.pending_since: float | None = None  # a task waiting for the first /odom
        self.plan_pub = qos.advertise(self, PathMsg, p["plan_topic"], p["plan_qos"], "plan_qos")
        self.subgoal_pub = qos.advertise(self, PoseStamped, p["subgoal_topic"], p["subgoal_qos"], "subgoal_qos")
        self.task_status_pub = qos.advertise(
            self, String, p["task_status_topic"], p["task_status_qos"], "task_status_qos"
        )
        qos.subscribe(self, Odometry, p["odom_topic"], self.on_odom, p["odom_qos"], "odom_qos")
        qos.subscribe(self, String, p["task_topic"], self.on_task, p["task_qos"], "task_qos")
        qos.subscribe(self, PoseStamped, p["goal_pose_topic"], self.on_goal_pose, p["task_qos"], "task_qos")
        qos.subscribe(self, String, p["status_topic"], self.on_status, p["status_qos"], "status_qos")
        self.create_timer(0.1, self.on_timer)
        self.get_logger().info(
            f"planner {p['planner']!r} on map {p['map']!r}; assuming the map frame {p['map_frame']!r} is the odom "
            f"frame {p['odom_frame']!r} (the robot starts at a known pose of the map)"
        )

    # -- inputs --------------------------------------------------------------------------------------
    def on_odom(self, msg: Any) -> None:
        from sim.world import Pose2D

        q = msg.pose.pose.orientation
        x, y = msg.pose.pose.position.x, msg.pose.pose.position.y
        if finite(x, y, q.x, q.y, q.z, q.w):
            self.pose = Pose2D(x, y, _yaw(q.x, q.y, q.z, q.w))

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
        self.start(Task(text, goals or (text,)))

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
        self.start(Task(text, ((x, y),)))

    def on_status(self, msg: Any) -> None:
        parsed = parse_status(msg.data)
        prog = self.progress
        if parsed is None or prog is None or not prog.matches(parsed[1], parsed[2]):
            return  # not about our current subgoal
        outcome, x, y, why = parsed
        if outcome == "reached":
            self.reached.append(prog.labels[prog.index])
            nxt = prog.advance()
            if nxt is None:
                self.finish("done")
            else:
                self.subgoal_pub.publish(self.pose_msg(nxt))
            return
        if prog.replans >= self.p["max_replans"]:
            self.finish(f"failed: {prog.labels[prog.index]}: {why} (replans exhausted)")
            return
        from llm_planner.base import Feedback

        fb = Feedback(prog.labels[prog.index], why or "failed", self.pose, attempt=prog.replans + 1,
                      failed_point=(x, y), reached=tuple(self.reached))  # fmt: skip
        self.get_logger().warning(f"replanning: {fb.text()}")
        self.progress = None  # statuses about the failed plan's subgoals no longer matter
        self.plan(fb, prog.replans + 1)

    # -- a task's life -------------------------------------------------------------------------------
    def supersede(self, new_text: str) -> None:
        """End the current task, if any, because ``new_text`` replaces it (a plan still computing for it
        is discarded when it arrives)."""
        if self.task is None:
            return
        if self.job is not None:
            job, self.job = self.job, None
            job.future.cancel()  # skipped if still queued; if running, its result is ignored
            job.future.add_done_callback(self._discarded(job.task.text))
        self.progress, self.pending_since = None, None
        self.task_status_pub.publish(String(data=f"cancelled: {self.task.text}: superseded by {new_text}"))
        self.get_logger().info(f"task {self.task.text!r} cancelled: superseded by {new_text!r}")
        self.task = None

    def _discarded(self, text: str) -> Callable[[Future], None]:
        def log(future: Future) -> None:  # on the worker thread, when the abandoned call returns
            if not future.cancelled():
                self.get_logger().info(f"plan for the superseded task {text!r} discarded")

        return log

    def start(self, task: Any) -> None:
        self.supersede(task.text)
        self.task, self.reached = task, []
        if self.pose is None:  # a task can arrive before the first /odom: plan when it comes
            self.pending_since = time.monotonic()
            self.get_logger().info("task received, waiting for /odom to plan")
            return
        self.plan(None, replans=0)

    def plan(self, feedback: Any, replans: int) -> None:
        """Start computing a plan for the current task from the current pose, on the worker."""
        from llm_planner.base import Scene
        from llm_planner.plan import ground

        task, scene, world = self.task, Scene(self.world, self.pose), self.world
        now = time.monotonic()
        future = self.worker.submit(lambda: ground(self.planner.plan(task, scene, feedback), world))
        self.job = PlanJob(task, future, replans, since=now, reported=now)
        self.task_status_pub.publish(String(data=f"planning: {task.text}"))

    def on_timer(self) -> None:
        now = time.monotonic()
        if self.pending_since is not None:
            if self.pose is not None:
                self.pending_since = None
                self.plan(None, replans=0)
            elif now - self.pending_since > ODOM_WAIT_S:
                self.finish(f"failed: no {self.p['odom_topic']} within {ODOM_WAIT_S:.0f} s, cannot plan")
            return
        job = self.job
        if job is None:
            return
        if job.future.done():
            self.job = None
            self.planned(job)
        elif now - job.reported >= STATUS_PERIOD_S:
            job.reported = now
            self.task_status_pub.publish(String(data=f"planning: {job.task.text} ({now - job.since:.0f} s)"))

    def planned(self, job: PlanJob) -> None:
        """A plan (or the planner's error) for the current task arrived from the worker."""
        from llm_planner.plan import PlanError

        try:
            grounded = job.future.result()
        except Exception as err:  # the planner's own error (PlanError, an LLM backend's) or a bug: reported
            if not isinstance(err, (PlanError, ValueError, RuntimeError)):
                self.get_logger().error("the planner failed unexpectedly:\n" + "".join(traceback.format_exception(err)))
            self.finish(f"failed: planner error: {type(err).__name__}: {err}")
            return
        self.progress = PlanProgress([g.xy for g in grounded], [g.label for g in grounded], replans=job.replans)
        path = PathMsg()
        path.header.frame_id = self.p["odom_frame"]
        path.header.stamp = self.get_clock().now().to_msg()
        path.poses = [self.pose_msg(pt) for pt in self.progress.points]
        self.plan_pub.publish(path)
        labels = " > ".join(self.progress.labels)
        self.get_logger().info(f"plan in {time.monotonic() - job.since:.1f} s: {len(grounded)} subgoals: {labels}")
        self.subgoal_pub.publish(self.pose_msg(self.progress.current))

    def finish(self, status: str) -> None:
        self.progress, self.job, self.task, self.pending_since = None, None, None, None
        self.task_status_pub.publish(String(data=status))
        self.get_logger().info(f"task {status}")

    def pose_msg(self, pt: Any) -> Any:
        msg = PoseStamped()
        msg.header.frame_id = self.p["odom_frame"]
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.pose.position.x, msg.pose.position.y = float(pt[0]), float(pt[1])
        msg.pose.orientation.w = 1.0
        return msg

    def stop(self) -> None:
        self.worker.close()  # a plan still running is abandoned with the process


def main(argv: list[str] | None = None) -> int:
    from hrl.ros.runner import run_node

    return run_node(PlannerNode, argv)


if __name__ == "__main__":
    sys.exit(main())
