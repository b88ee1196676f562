"""Run grounded subgoals with a goal-conditioned policy, and tie planner + executor into an agent.

:class:`SubgoalExecutor` drives the low-level policy towards each subgoal (through the env's
``set_goal``) until it is reached (within its tolerance), its step budget is spent, or the robot is
stuck (no progress over ``stuck_window`` steps, or ``max_collision_steps`` steps in contact with walls
in a row). It emits structured :class:`Event` s.

:class:`HierarchicalAgent` asks the planner for a plan, grounds and validates it, executes it, and on
failure asks again with :class:`~llm_planner.base.Feedback` a bounded number of times. It works on any
env with the rover's goal-conditioned interface; the ROS 2 node drives the same core later.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import shapely

from llm_planner.base import Feedback, Planner, Scene, Task
from llm_planner.plan import GroundedSubgoal, Plan, PlanError, ground
from sim.world import Pose2D
from sim.wrappers import set_goal

PolicyFn = Callable[[dict[str, np.ndarray]], np.ndarray]


@dataclass
class ExecutorConfig:
    """Limits of the subgoal executor (also the ``executor.*`` keys of ``hrl-eval``)."""

    stuck_window: int = 40
    stuck_progress: float = 0.15
    max_collision_steps: int = 20
    max_replans: int = 3
    max_episode_steps: int = 3000
    recoveries: int = 2
    backoff_steps: int = 8

    def __post_init__(self) -> None:
        for name in ("stuck_window", "max_collision_steps", "max_episode_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"executor {name} must be >= 1, got {getattr(self, name)}")
        for name in ("max_replans", "recoveries", "backoff_steps"):
            if getattr(self, name) < 0:
                raise ValueError(f"executor {name} must be >= 0, got {getattr(self, name)}")


@dataclass
class Event:
    step: int
    # plan | subgoal_started | subgoal_reached | subgoal_failed | replan | planner_error | plan_rejected | done
    kind: str
    detail: str
    x: float
    y: float


@dataclass
class SubgoalOutcome:
    reached: bool
    reason: str  # reached | budget | stuck | collisions | episode_limit | entered_avoided_room
    steps: int


class SubgoalExecutor:
    """Drives ``policy`` in ``env`` towards one subgoal at a time and records the trajectory."""

    def __init__(self, env: Any, policy: PolicyFn, config: ExecutorConfig | None = None) -> None:
        self.env = env
        self.unwrapped = env.unwrapped
        self.policy = policy
        self.config = config or ExecutorConfig()
        self.obs: dict[str, np.ndarray] | None = None
        self.steps = 0
        self.collisions = 0
        self.path_length = 0.0
        self.trajectory: list[tuple[float, float]] = []
        self.events: list[Event] = []
        self.frames: list[np.ndarray] | None = None
        self.record_every = 2  # render every other control step (rendering costs more than stepping)
        self.avoid: list[tuple[str, Any]] = []  # (room name, shrunk polygon) the robot must not enter
        self.violation: str | None = None  # the avoided room the robot entered

    def set_avoid(self, world: Any, rooms: tuple[str, ...], margin: float = 0.1) -> None:
        """Rooms the robot must not enter: entering one (its centre ``margin`` inside the room's walls)
        ends the subgoal with reason ``entered_avoided_room``."""
        self.avoid = avoid_regions(world, rooms, margin)

    def start(self, obs: dict[str, np.ndarray], record: bool = False) -> None:
        self.obs = obs
        self.trajectory = [self.true_position]
        self.frames = [self.env.render()] if record else None

    @property
    def position(self) -> tuple[float, float]:
        assert self.obs is not None  # internal: start() ran
        return (float(self.obs["achieved_goal"][0]), float(self.obs["achieved_goal"][1]))

    @property
    def true_position(self) -> tuple[float, float]:
        """Where the robot really is. ``position`` is what it observes: the same in the nominal simulator,
        its drifting odometry under sensor-noise wrappers. The executor decides on ``position`` (as a robot
        would); the trajectory, path length and avoided rooms, which judge the episode, use this."""
        pose = self.unwrapped.pose
        return (pose.x, pose.y)

    @property
    def pose(self) -> Pose2D:
        return self.unwrapped.pose

    def event(self, kind: str, detail: str) -> None:
        x, y = self.position
        self.events.append(Event(self.steps, kind, detail, x, y))

    def run_subgoal(self, sub: GroundedSubgoal) -> SubgoalOutcome:
        """Drive to ``sub``; when stuck or pressed against a wall, back off once (a recovery behaviour,
        like a ROS navigation stack's back-up) and try again within the same step budget."""
        cfg = self.config
        self.obs = set_goal(self.env, sub.xy)  # through the env's wrappers: noise and drift stay
        self.event("subgoal_started", sub.label)
        used = 0
        recoveries = 0
        while True:
            reason, steps = self._drive(sub, sub.step_budget - used)
            used += steps
            if reason == "reached":
                self.event("subgoal_reached", sub.label)
                return SubgoalOutcome(True, "reached", used)
            if reason not in ("stuck", "collisions") or recoveries >= cfg.recoveries or used >= sub.step_budget:
                return self._fail(sub, reason, used)
            recoveries += 1
            self.event("recovery", f"{sub.label}: {reason}, backing off")
            used += self._back_off(min(cfg.backoff_steps, sub.step_budget - used))

    def _drive(self, sub: GroundedSubgoal, budget: int) -> tuple[str, int]:
        cfg = self.config
        best = math.dist(self.position, sub.xy)
        best_at = 0
        in_contact = 0
        for k in range(1, budget + 1):
            if self.steps >= cfg.max_episode_steps:
                return "episode_limit", k - 1
            info = self._step(self.policy(self.obs))
            in_contact = in_contact + 1 if info["collision"] else 0
            d = math.dist(self.position, sub.xy)
            if self.avoid and self._entered_avoided():
                return "entered_avoided_room", k
            if d <= sub.tolerance:
                return "reached", k
            if d < best - cfg.stuck_progress:
                best, best_at = d, k
            if in_contact >= cfg.max_collision_steps:
                return "collisions", k
            if k - best_at >= cfg.stuck_window:
                return "stuck", k
        return "budget", budget

    def _entered_avoided(self) -> bool:
        room = entered_room(self.avoid, self.true_position)
        if room is not None:
            self.violation = room
        return room is not None

    def _back_off(self, steps: int) -> int:
        """Reverse straight away from what the robot pressed into (the policy never learnt to)."""
        for k in range(steps):
            if self.steps >= self.config.max_episode_steps:
                return k
            self._step(np.array([-1.0, 0.0], dtype=np.float32))
        return steps

    def _step(self, action: np.ndarray) -> dict[str, Any]:
        self.obs, _, _, _, info = self.env.step(action)
        self.steps += 1
        here = self.true_position
        self.path_length += math.dist(here, self.trajectory[-1])
        self.trajectory.append(here)
        if self.frames is not None and self.steps % self.record_every == 0:
            self.frames.append(self.env.render())
        self.collisions += int(info["collision"])
        return info

    def _fail(self, sub: GroundedSubgoal, reason: str, steps: int) -> SubgoalOutcome:
        self.event("subgoal_failed", f"{sub.label}: {reason}")
        return SubgoalOutcome(False, reason, steps)


@dataclass
class EpisodeRecord:
    success: bool
    reason: str
    steps: int
    path_length: float
    collisions: int
    replans: int
    planner_calls: int
    planner_latency_s: list[float]
    planner_tokens: int
    goals_reached: int
    goals_total: int
    events: list[Event] = field(default_factory=list)
    plans: list[list[tuple[float, float]]] = field(default_factory=list)
    plan_labels: list[list[str]] = field(default_factory=list)
    trajectory: list[tuple[float, float]] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        """The per-episode figures (no event log, no trajectory)."""
        d = asdict(self)
        for key in ("events", "plans", "plan_labels", "trajectory", "planner_latency_s"):
            d.pop(key)
        d["planner_latency_mean_s"] = float(np.mean(self.planner_latency_s)) if self.planner_latency_s else 0.0
        return d


class HierarchicalAgent:
    """Planner + executor + policy. ``run(env, task, obs)`` executes one task from the current state."""

    def __init__(
        self, planner: Planner, policy: PolicyFn, config: ExecutorConfig | None = None, goal_tolerance: float = 0.3
    ) -> None:
        self.planner = planner
        self.policy = policy
        self.config = config or ExecutorConfig()
        self.goal_tolerance = goal_tolerance
        self._tokens = 0

    def run(
        self, env: Any, task: Task, obs: dict[str, np.ndarray], record: bool = False
    ) -> tuple[EpisodeRecord, SubgoalExecutor]:
        world = env.unwrapped.world
        goals = [_goal_xy(g, world) for g in task.goals]
        ex = SubgoalExecutor(env, self.policy, self.config)
        ex.set_avoid(world, task.avoid)
        ex.start(obs, record=record)
        self._tokens = 0
        latencies: list[float] = []
        plans: list[list[tuple[float, float]]] = []
        labels: list[list[str]] = []
        feedback: Feedback | None = None
        done, replans = 0, 0
        while True:
            scene = Scene(world, ex.pose, ex.obs["observation"].copy() if ex.obs is not None else None)
            subgoals, reason = self._plan(task.remaining(done), scene, feedback, ex, latencies)
            if subgoals is None:
                break
            plans.append([s.xy for s in subgoals])
            labels.append([s.label for s in subgoals])
            done, failed = self._execute(ex, subgoals, goals)
            if done == len(goals):
                reason = "success"
                break
            if failed.reason == "entered_avoided_room":  # the task's constraint is broken for good
                reason = f"entered avoided room {ex.violation}"
                break
            exhausted = replans >= self.config.max_replans
            if failed.reason == "episode_limit" or exhausted:
                reason = f"{failed.reason} at {failed.label}" + (" (replans exhausted)" if exhausted else "")
                break
            replans += 1
            feedback = Feedback(
                failed.label,
                failed.reason,
                ex.pose,
                attempt=replans,
                failed_point=failed.point,
                history=tuple(e.detail for e in ex.events if e.kind == "subgoal_failed"),
                reached=tuple(e.detail for e in ex.events if e.kind == "subgoal_reached"),
            )
            ex.event("replan", feedback.text())
        ex.event("done", reason)
        episode = EpisodeRecord(
            success=reason == "success",
            reason=reason,
            steps=ex.steps,
            path_length=ex.path_length,
            collisions=ex.collisions,
            replans=replans,
            planner_calls=len(latencies),
            planner_latency_s=latencies,
            planner_tokens=self._tokens,
            goals_reached=done,
            goals_total=len(goals),
            events=ex.events,
            plans=plans,
            plan_labels=labels,
            trajectory=ex.trajectory,
        )
        return episode, ex

    def _plan(
        self, task: Task, scene: Scene, feedback: Feedback | None, ex: SubgoalExecutor, latencies: list[float]
    ) -> tuple[list[GroundedSubgoal] | None, str]:
        """A grounded plan, or None and why not (the planner raised, or its plan does not ground)."""
        t0 = time.perf_counter()
        try:
            plan: Plan = self.planner.plan(task, scene, feedback)
        except Exception as err:  # a planner fault ends the episode cleanly, with its cause recorded
            latencies.append(time.perf_counter() - t0)
            self._tokens += _usage(self.planner).get("tokens", 0)
            ex.event("planner_error", f"{type(err).__name__}: {err}")
            return None, f"planner_error: {type(err).__name__}: {err}"
        latencies.append(time.perf_counter() - t0)
        usage = _usage(self.planner)
        self._tokens += usage.get("tokens", 0)
        try:
            subgoals = ground(plan, scene.world)
        except PlanError as err:
            ex.event("plan_rejected", str(err))
            return None, f"plan_rejected: {err}"
        ex.event("plan", f"{len(subgoals)} subgoals" + "".join(f"; {k} {v}" for k, v in usage.items()))
        return subgoals, ""

    def _execute(
        self, ex: SubgoalExecutor, subgoals: list[GroundedSubgoal], goals: list[tuple[float, float]]
    ) -> tuple[int, _Failure]:
        """Run the plan; returns how many task goals are visited and, if it stopped short, where and why."""
        done = 0
        for sub in subgoals:
            outcome = ex.run_subgoal(sub)
            done = visited_in_order(ex.trajectory, goals, self.goal_tolerance)
            if not outcome.reached:
                return done, _Failure(sub.label, outcome.reason, sub.xy)
        last = subgoals[-1]
        return done, _Failure(last.label, "plan_ended_short_of_goal", last.xy)


@dataclass(frozen=True)
class _Failure:
    label: str
    reason: str
    point: tuple[float, float]


def _usage(planner: Any) -> dict[str, Any]:
    """What the planner's last call cost (LLM planners report tokens, model calls, cache hits)."""
    usage = getattr(planner, "last_usage", None)
    return dict(usage) if usage else {}


def _goal_xy(goal: Any, world: Any) -> tuple[float, float]:
    from llm_planner.planners.common import goal_point

    return goal_point(goal, world)


def avoid_regions(world: Any, rooms: tuple[str, ...], margin: float = 0.1) -> list[tuple[str, Any]]:
    """(room name, room polygon shrunk by ``margin``) per room to avoid: the robot has entered a room when
    its centre is inside that polygon (part of the task's success check, with :func:`visited_in_order`)."""
    regions = []
    for name in rooms:
        shape = world.room(name).shape.buffer(-margin)
        shapely.prepare(shape)
        regions.append((name, shape))
    return regions


def entered_room(regions: list[tuple[str, Any]], xy: tuple[float, float]) -> str | None:
    """The avoided room (of :func:`avoid_regions`) that the point ``xy`` is in, or None."""
    for name, shape in regions:
        if shapely.contains_xy(shape, xy[0], xy[1]):
            return name
    return None


def visited_in_order(trajectory: list[tuple[float, float]], goals: list[tuple[float, float]], tolerance: float) -> int:
    """How many goals the trajectory has visited, in order (the task's programmatic success check)."""
    done = 0
    for p in trajectory:
        if done < len(goals) and math.dist(p, goals[done]) <= tolerance:
            done += 1
    return done
