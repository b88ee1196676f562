"""``planner_node``: any registered planner (graph, sorb, llm_goals, llm_route, ...) on a ROS 2 robot.

Takes a task on ``/task`` (std_msgs/String: an instruction for LLM planners, place names separated by
commas for the others, e.g. ``fridge, charging_dock``) or a goal on ``/goal_pose``
(geometry_msgs/PoseStamped, what RViz sends); plans from the robot's pose (``/odom``); publishes the plan
on ``/plan`` (nav_msgs/Path) and the current subgoal on ``/subgoal``; advances when the policy node
reports it reached on ``/subgoal_status``; replans from where the robot is when one fails (at most
``max_replans`` times); reports ``done`` or ``failed: why`` on ``/task_status``. The map's frame is the
odom frame (the robot starts at a known pose of the map).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from hrl import DEFAULT_POLICY
from hrl.ros.core import PlanProgress, finite, parse_status
from hrl.ros.core import yaw_from_quaternion as _yaw
from hrl.ros.params import Param, non_empty, topic


def _non_negative_int(value: Any) -> str | None:
    return None if isinstance(value, int) and value >= 0 else "must be an integer >= 0"


def _file_or_empty(value: Any) -> str | None:
    ok = isinstance(value, str) and (not value or Path(value).is_file())
    return None if ok else "must be an existing YAML file, or empty for the planner's defaults"


ODOM_WAIT_S = 10.0  # how long a task waits for the first /odom

PARAMS = [
    Param("map", "apartment", "map the robot runs in (its frame is the odom frame)", non_empty),
    Param("planner", "graph", "registered planner: graph, sorb, llm_goals, llm_route, flat, random", non_empty),
    Param(
        "planner_params_file",
        "",
        "YAML of planner parameters (keys of configs/planner/<name>.yaml params)",
        _file_or_empty,
    ),
    Param("policy", DEFAULT_POLICY, "policy for planners that need its critic (sorb)", non_empty),
    Param("max_replans", 3, "replans per task after failed subgoals", _non_negative_int),
    Param("odom_frame", "odom", "frame of /plan and /subgoal", non_empty),
    Param("task_topic", "/task", "std_msgs/String in: instruction or place names", topic),
    Param("goal_pose_topic", "/goal_pose", "geometry_msgs/PoseStamped in (odom frame)", topic),
    Param("odom_topic", "/odom", "nav_msgs/Odometry in", topic),
    Param("status_topic", "/subgoal_status", "std_msgs/String in, from the policy node", topic),
    Param("plan_topic", "/plan", "nav_msgs/Path out", topic),
    Param("subgoal_topic", "/subgoal", "geometry_msgs/PoseStamped out", topic),
    Param("task_status_topic", "/task_status", "std_msgs/String out: 'done' | 'failed: why'", topic),
]


def make_node(**overrides: Any) -> Any:
    import yaml
    from geometry_msgs.msg import PoseStamped
    from nav_msgs.msg import Odometry
    from nav_msgs.msg import Path as PathMsg
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from std_msgs.msg import String

    from hrl.ros.params import ParameterError, declare
    from llm_planner.base import Feedback, Scene, Task, planner_class
    from llm_planner.plan import PlanError, ground
    from sim.world import Pose2D, load_world

    class PlannerNode(Node):
        def __init__(self) -> None:
            super().__init__("planner_node", parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()])
            p = declare(self, PARAMS)
            self.p = p
            try:
                self.world = load_world(p["map"])
                params = yaml.safe_load(Path(p["planner_params_file"]).read_text()) if p["planner_params_file"] else {}
                planner_class(p["planner"])  # unknown names fail here, with the list
            except ValueError as err:
                raise ParameterError(str(err)) from None
            from hrl.hierarchy_eval import build_planner

            policy = None
            if p["planner"] == "sorb":
                from hrl.policy import GoalPolicy

                policy = GoalPolicy.load(p["policy"])
            self.planner = build_planner(p["planner"], params or {}, policy)  # type: ignore[arg-type]
            self.is_llm = p["planner"].startswith("llm_")
            self.pose: Pose2D | None = None
            self.task: Any = None
            self.progress: PlanProgress | None = None
            self.reached: list[str] = []
            self.pending_since: float | None = None
            self.create_timer(0.1, self.on_wait)
            self.plan_pub = self.create_publisher(PathMsg, p["plan_topic"], 10)
            self.subgoal_pub = self.create_publisher(PoseStamped, p["subgoal_topic"], 10)
            self.task_status_pub = self.create_publisher(String, p["task_status_topic"], 10)
            self.create_subscription(Odometry, p["odom_topic"], self.on_odom, 10)
            self.create_subscription(String, p["task_topic"], self.on_task, 10)
            self.create_subscription(PoseStamped, p["goal_pose_topic"], self.on_goal_pose, 10)
            self.create_subscription(String, p["status_topic"], self.on_status, 10)
            self.get_logger().info(f"planner {p['planner']!r} on map {p['map']!r}")

        def on_odom(self, msg: Any) -> None:
            q = msg.pose.pose.orientation
            x, y = msg.pose.pose.position.x, msg.pose.pose.position.y
            if finite(x, y, q.x, q.y, q.z, q.w):
                self.pose = Pose2D(x, y, _yaw(q.x, q.y, q.z, q.w))

        def on_task(self, msg: Any) -> None:
            text = msg.data.strip()
            names = [n.strip() for n in text.replace(" then ", ",").split(",") if n.strip()]
            try:
                goals = tuple(self.world.resolve(n).name for n in names) if names else ()
            except ValueError as err:
                if not self.is_llm:
                    self.finish(f"failed: planner {self.p['planner']!r} needs place names ({err})")
                    return
                goals = ()
            self.start(Task(text, goals or (text,)))

        def on_goal_pose(self, msg: Any) -> None:
            x, y = msg.pose.position.x, msg.pose.position.y
            if not finite(x, y) or (msg.header.frame_id and msg.header.frame_id != self.p["odom_frame"]):
                self.finish(f"failed: goal ({x}, {y}) in frame {msg.header.frame_id!r} not usable")
                return
            self.start(Task(f"go to ({x:.2f}, {y:.2f})", ((x, y),)))

        def start(self, task: Any) -> None:
            self.task, self.reached = task, []
            if self.pose is None:  # a task can arrive before the first /odom: plan when it comes
                self.pending_since = time.monotonic()
                self.get_logger().info("task received, waiting for /odom to plan")
                return
            self.plan(None, replans=0)

        def on_wait(self) -> None:
            if self.pending_since is None:
                return
            if self.pose is not None:
                self.pending_since = None
                self.plan(None, replans=0)
            elif time.monotonic() - self.pending_since > ODOM_WAIT_S:
                self.pending_since = None
                self.finish(f"failed: no {self.p['odom_topic']} within {ODOM_WAIT_S:.0f} s, cannot plan")

        def plan(self, feedback: Any, replans: int) -> None:
            assert self.pose is not None  # start() waits for it
            try:
                plan = self.planner.plan(self.task, Scene(self.world, self.pose), feedback)
                grounded = ground(plan, self.world)
            except (PlanError, ValueError, RuntimeError) as err:
                self.finish(f"failed: planner error: {err}")
                return
            self.progress = PlanProgress([g.xy for g in grounded], [g.label for g in grounded], replans=replans)
            path = PathMsg()
            path.header.frame_id = self.p["odom_frame"]
            path.poses = [self.pose_msg(pt) for pt in self.progress.points]
            self.plan_pub.publish(path)
            self.get_logger().info(f"plan: {len(grounded)} subgoals: " + " > ".join(self.progress.labels))
            self.subgoal_pub.publish(self.pose_msg(self.progress.current))

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
            assert self.pose is not None
            fb = Feedback(prog.labels[prog.index], why or "failed", self.pose, attempt=prog.replans + 1,
                                failed_point=(x, y), reached=tuple(self.reached))  # fmt: skip
            self.get_logger().warn(f"replanning: {fb.text()}")
            self.plan(fb, prog.replans + 1)

        def finish(self, status: str) -> None:
            self.progress = None
            self.task_status_pub.publish(String(data=status))
            self.get_logger().info(f"task {status}")

        def pose_msg(self, pt: Any) -> Any:
            msg = PoseStamped()
            msg.header.frame_id = self.p["odom_frame"]
            msg.pose.position.x, msg.pose.position.y = float(pt[0]), float(pt[1])
            msg.pose.orientation.w = 1.0
            return msg

    return PlannerNode()


def main(argv: list[str] | None = None) -> int:
    from hrl.ros.runner import run_node

    return run_node(make_node, argv)


if __name__ == "__main__":
    sys.exit(main())
