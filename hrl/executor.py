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

from llm_planner.base import Feedback, Planner, Scene, Task
from llm_planner.plan import GroundedSubgoal, Plan, PlanError, ground
from sim.world import Pose2D

PolicyFn = Callable[[dict[str, np.ndarray]], np.ndarray]


@dataclass(frozen=True)
class ExecutorConfig:
    stuck_window: int = 40
    stuck_progress: float = 0.15
    max_collision_steps: int = 20
    max_replans: int = 3
    max_episode_steps: int = 3000

    def __post_init__(self) -> None:
        for name in ("stuck_window", "max_collision_steps", "max_episode_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"executor {name} must be >= 1, got {getattr(self, name)}")
        if self.max_replans < 0:
            raise ValueError(f"executor max_replans must be >= 0, got {self.max_replans}")


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
    reason: str  # reached | budget | stuck | collisions | episode_limit
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

    def start(self, obs: dict[str, np.ndarray], record: bool = False) -> None:
        self.obs = obs
        self.trajectory = [self.position]
        self.frames = [self.env.render()] if record else None

    @property
    def position(self) -> tuple[float, float]:
        assert self.obs is not None  # internal: start() ran
        return (float(self.obs["achieved_goal"][0]), float(self.obs["achieved_goal"][1]))

    @property
    def pose(self) -> Pose2D:
        return self.unwrapped.pose

    def event(self, kind: str, detail: str) -> None:
        x, y = self.position
        self.events.append(Event(self.steps, kind, detail, x, y))

    def run_subgoal(self, sub: GroundedSubgoal) -> SubgoalOutcome:
        cfg = self.config
        self.obs = self.unwrapped.set_goal(sub.xy)
        self.event("subgoal_started", sub.label)
        best = math.dist(self.position, sub.xy)
        best_at = 0
        in_contact = 0
        for k in range(1, sub.step_budget + 1):
            if self.steps >= cfg.max_episode_steps:
                return self._fail(sub, "episode_limit", k - 1)
            self.obs, _, _, _, info = self.env.step(self.policy(self.obs))
            self.steps += 1
            here = self.position
            self.path_length += math.dist(here, self.trajectory[-1])
            self.trajectory.append(here)
            if self.frames is not None:
                self.frames.append(self.env.render())
            self.collisions += int(info["collision"])
            in_contact = in_contact + 1 if info["collision"] else 0
            d = math.dist(here, sub.xy)
            if d <= sub.tolerance:
                self.event("subgoal_reached", sub.label)
                return SubgoalOutcome(True, "reached", k)
            if d < best - cfg.stuck_progress:
                best, best_at = d, k
            if in_contact >= cfg.max_collision_steps:
                return self._fail(sub, "collisions", k)
            if k - best_at >= cfg.stuck_window:
                return self._fail(sub, "stuck", k)
        return self._fail(sub, "budget", sub.step_budget)

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
    goals_reached: int
    goals_total: int
    events: list[Event] = field(default_factory=list)
    plans: list[list[tuple[float, float]]] = field(default_factory=list)
    trajectory: list[tuple[float, float]] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        """The per-episode figures (no event log, no trajectory)."""
        d = asdict(self)
        for key in ("events", "plans", "trajectory", "planner_latency_s"):
            d.pop(key)
        d["planner_latency_mean_s"] = float(np.mean(self.planner_latency_s)) if self.planner_latency_s else 0.0
        return d


class HierarchicalAgent:
    """Planner + executor + policy. ``run(env, task, obs)`` executes one task from the current state."""

    def __init__(self, planner: Planner, policy: PolicyFn, config: ExecutorConfig | None = None,
                 goal_tolerance: float = 0.3) -> None:  # fmt: skip
        self.planner = planner
        self.policy = policy
        self.config = config or ExecutorConfig()
        self.goal_tolerance = goal_tolerance

    def run(
        self, env: Any, task: Task, obs: dict[str, np.ndarray], record: bool = False
    ) -> tuple[EpisodeRecord, SubgoalExecutor]:
        world = env.unwrapped.world
        goal_points = [_goal_xy(g, world) for g in task.goals]
        ex = SubgoalExecutor(env, self.policy, self.config)
        ex.start(obs, record=record)
        latencies: list[float] = []
        plans: list[list[tuple[float, float]]] = []
        feedback: Feedback | None = None
        done_goals = 0
        replans = 0
        reason = "unknown"
        while True:
            remaining = task.remaining(done_goals)
            t0 = time.perf_counter()
            try:
                plan: Plan = self.planner.plan(remaining, Scene(world, ex.pose), feedback)
            except Exception as err:
                latencies.append(time.perf_counter() - t0)
                ex.event("planner_error", f"{type(err).__name__}: {err}")
                reason = f"planner_error: {type(err).__name__}: {err}"
                break
            latencies.append(time.perf_counter() - t0)
            try:
                subgoals = ground(plan, world)
            except PlanError as err:
                ex.event("plan_rejected", str(err))
                reason = f"plan_rejected: {err}"
                break
            plans.append([s.xy for s in subgoals])
            ex.event("plan", f"{len(subgoals)} subgoals")
            failed = None
            for sub in subgoals:
                outcome = ex.run_subgoal(sub)
                done_goals = visited_in_order(ex.trajectory, goal_points, self.goal_tolerance)
                if not outcome.reached:
                    failed = (sub, outcome)
                    break
            if done_goals == len(goal_points):
                reason = "success"
                break
            if failed is None:  # plan finished but a goal was not visited in order
                failed = (subgoals[-1], SubgoalOutcome(False, "plan_ended_short_of_goal", 0))
            if failed[1].reason == "episode_limit" or replans >= self.config.max_replans:
                reason = f"{failed[1].reason} at {failed[0].label}" + (
                    " (replans exhausted)" if replans >= self.config.max_replans else ""
                )
                break
            replans += 1
            feedback = Feedback(
                failed[0].label,
                failed[1].reason,
                ex.pose,
                attempt=replans,
                failed_point=failed[0].xy,
                history=tuple(e.detail for e in ex.events if e.kind == "subgoal_failed"),
            )
            ex.event("replan", feedback.text())
        ex.event("done", reason)
        record_ = EpisodeRecord(
            success=reason == "success",
            reason=reason,
            steps=ex.steps,
            path_length=ex.path_length,
            collisions=ex.collisions,
            replans=replans,
            planner_calls=len(latencies),
            planner_latency_s=latencies,
            goals_reached=done_goals,
            goals_total=len(goal_points),
            events=ex.events,
            plans=plans,
            trajectory=ex.trajectory,
        )
        return record_, ex


def _goal_xy(goal: Any, world: Any) -> tuple[float, float]:
    from llm_planner.planners.common import goal_point

    return goal_point(goal, world)


def visited_in_order(trajectory: list[tuple[float, float]], goals: list[tuple[float, float]], tolerance: float) -> int:
    """How many goals the trajectory has visited, in order (the task's programmatic success check)."""
    done = 0
    for p in trajectory:
        if done < len(goals) and math.dist(p, goals[done]) <= tolerance:
            done += 1
    return done
