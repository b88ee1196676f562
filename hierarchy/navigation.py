"""The navigation domain: the rover's world for the domain-free hierarchy (:class:`hierarchy.agent.Agent`).

- **Scene**: :class:`~llm_planner.base.Scene` (the map, the robot's pose, its current observation).
- **Subgoals**: :class:`~llm_planner.plan.Plan` (go to a landmark, a room, a door, a point), grounded by
  :func:`llm_planner.plan.ground` to free points of the map before anything moves.
- **Skill**: ``drive``, the goal-conditioned policy driven to a point (through the env's ``set_goal``, so the
  sim-to-real wrappers' noise and drift stay) until it is within the subgoal's tolerance, its step budget is
  spent, or it is stuck (no progress over ``stuck_window`` steps, or ``max_collision_steps`` steps in contact
  with walls in a row). Stuck or pressed against a wall, it first **backs off** (reverses straight, a ROS
  navigation stack's back-up recovery; the policy never learnt to) and tries again, ``recoveries`` times.
- **Acceptance**: the task's goals visited in order by the robot's *true* trajectory (within the suite's
  goal tolerance, :func:`visited_in_order`), and no avoided room ever entered (:func:`entered_room`): entering
  one ends the episode (``broken``), whatever was visited before.
- **Feedback** to the planner after a failure: :class:`~llm_planner.base.Feedback` (the failed subgoal and
  why, the robot's pose, the failed point, the failures and reached subgoals so far).

The executor decides on what the robot *observes* (drifting odometry under sensor-noise wrappers, as a robot
would); the trajectory, path length and avoided rooms, which judge the episode, use the true pose.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import shapely

from hierarchy.domain import Event, EventKind, GroundedSubgoal, Outcome, SkillResult, Step
from llm_planner.base import Feedback, Scene, Task
from llm_planner.plan import GroundedSubgoal as NavSubgoal
from llm_planner.plan import Plan
from llm_planner.plan import ground as ground_plan
from sim.navigation.world import Pose2D
from sim.wrappers import set_goal

PolicyFn = Callable[[dict[str, np.ndarray]], np.ndarray]


@dataclass
class ExecutorConfig:
    """Limits of the navigation loop (the ``executor.*`` keys of ``hrl-eval``)."""

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
class NavEvent:
    """An event of a rover episode, with where the robot believed it was (x, y)."""

    step: int
    # plan | subgoal_started | subgoal_reached | subgoal_failed | recovery | replan | planner_error | plan_rejected
    # | done
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
    """Drives ``policy`` in ``env`` towards one point at a time and records the trajectory: the navigation
    domain's state during an episode (its ``drive`` skill runs through it), and usable on its own
    (:meth:`run_subgoal`, which records its own events)."""

    record_every = 2  # render every other control step (rendering costs more than stepping)

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
        self.events: list[NavEvent] = []
        self.frames: list[np.ndarray] | None = None
        self.avoid: list[tuple[str, Any]] = []  # (room name, shrunk polygon) the robot must not enter
        self.violation: str | None = None  # the avoided room the robot entered
        #: Where recovery events go: this executor's own list, or (in an episode) the agent's record.
        self.emit: Callable[[str, str], None] = self.event
        self.on_step: Callable[[], None] | None = None

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
        if self.obs is None:
            raise RuntimeError("SubgoalExecutor.start(obs) was not called")
        return (float(self.obs["achieved_goal"][0]), float(self.obs["achieved_goal"][1]))

    @property
    def true_position(self) -> tuple[float, float]:
        """Where the robot really is. ``position`` is what it observes: the same in the nominal simulator,
        its drifting odometry under sensor-noise wrappers."""
        pose = self.unwrapped.pose
        return (pose.x, pose.y)

    @property
    def pose(self) -> Pose2D:
        return self.unwrapped.pose

    def event(self, kind: str, detail: str) -> None:
        x, y = self.position
        self.events.append(NavEvent(self.steps, kind, detail, x, y))

    def run_subgoal(self, sub: NavSubgoal) -> SubgoalOutcome:
        """Drive to ``sub`` (within this executor's episode step limit), recording its own events."""
        self.event("subgoal_started", sub.label)
        reason, used = self.drive(sub.xy, sub.tolerance, sub.step_budget, sub.label, self.config.max_episode_steps)
        if reason == "reached":
            self.event("subgoal_reached", sub.label)
        else:
            self.event("subgoal_failed", f"{sub.label}: {reason}")
        return SubgoalOutcome(reason == "reached", reason, used)

    def drive(self, xy: tuple[float, float], tolerance: float, budget: int, label: str, limit: int) -> tuple[str, int]:
        """Drive to ``xy``; when stuck or pressed against a wall, back off (a recovery behaviour) and try again
        within the same step ``budget``. ``limit``: the episode's step count at which it must stop. Returns
        (reason, steps used)."""
        cfg = self.config
        self.obs = set_goal(self.env, xy)  # through the env's wrappers: noise and drift stay
        used = 0
        recoveries = 0
        while True:
            reason, steps = self._drive(xy, tolerance, budget - used, limit)
            used += steps
            if reason == "reached":
                return reason, used
            if reason not in ("stuck", "collisions") or recoveries >= cfg.recoveries or used >= budget:
                return reason, used
            recoveries += 1
            self.emit("recovery", f"{label}: {reason}, backing off")
            used += self._back_off(min(cfg.backoff_steps, budget - used), limit)

    def _drive(self, xy: tuple[float, float], tolerance: float, budget: int, limit: int) -> tuple[str, int]:
        cfg = self.config
        best = math.dist(self.position, xy)
        best_at = 0
        in_contact = 0
        for k in range(1, budget + 1):
            if self.steps >= limit:
                return "episode_limit", k - 1
            info = self._step(self.policy(self.obs))
            in_contact = in_contact + 1 if info["collision"] else 0
            d = math.dist(self.position, xy)
            if self.avoid and self._entered_avoided():
                return "entered_avoided_room", k
            if d <= tolerance:
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

    def _back_off(self, steps: int, limit: int) -> int:
        """Reverse straight away from what the robot pressed into (the policy never learnt to)."""
        for k in range(steps):
            if self.steps >= limit:
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
        if self.on_step is not None:
            self.on_step()
        return info


class DriveSkill:
    """The navigation domain's one skill: the goal-conditioned policy driven to the step's point, with the
    back-off recovery (:meth:`SubgoalExecutor.drive`)."""

    def __init__(self, domain: NavigationDomain) -> None:
        self.domain = domain

    def run(self, env: Any, step: Step, max_steps: int, on_step: Callable[[], None]) -> SkillResult:
        ex = self.domain.executor
        xy = tuple(float(v) for v in step.goal(env))
        ex.on_step = on_step
        try:
            reason, used = ex.drive(xy, step.tolerance, step.budget, step.label, ex.steps + max_steps)
        finally:
            ex.on_step = None
        return SkillResult(Outcome(reason), used, math.dist(ex.position, xy))


class NavigationDomain:
    """The rover's domain for :class:`hierarchy.agent.Agent` (see the module's docstring)."""

    name = "navigation"
    plan_model = Plan

    def __init__(self, policy: PolicyFn, config: ExecutorConfig | None = None, goal_tolerance: float = 0.3) -> None:
        self.policy = policy
        self.config = config or ExecutorConfig()
        self.goal_tolerance = goal_tolerance
        self.skills = {"drive": DriveSkill(self)}
        self._executor: SubgoalExecutor | None = None
        self.goals: list[tuple[float, float]] = []
        self.plans: list[list[tuple[float, float]]] = []  # every grounded plan's points, in order
        self._last: list[NavSubgoal] = []

    @property
    def executor(self) -> SubgoalExecutor:
        if self._executor is None:
            raise RuntimeError("the navigation domain has no episode: Agent.run(env, task, obs=...) starts one")
        return self._executor

    def start(self, env: Any, task: Task, event: Callable[[EventKind, str], None], obs: Any) -> None:
        """A new episode from ``obs`` (what the env's reset returned, through its wrappers)."""
        if obs is None:
            raise ValueError("the navigation domain needs the observation reset returned: Agent.run(..., obs=obs)")
        from llm_planner.planners.common import goal_point

        world = env.unwrapped.world
        ex = SubgoalExecutor(env, self.policy, self.config)
        ex.set_avoid(world, task.avoid)
        ex.start(obs)
        ex.emit = lambda kind, detail: event(EventKind(kind), detail)
        self._executor = ex
        self.goals = [goal_point(g, world) for g in task.goals]
        self.plans, self._last = [], []

    def observe(self, env: Any) -> Scene:
        ex = self.executor
        return Scene(env.unwrapped.world, ex.pose, ex.obs["observation"].copy() if ex.obs is not None else None)

    def ground(self, plan: Plan, scene: Scene) -> list[GroundedSubgoal]:
        subgoals = ground_plan(plan, scene.world)
        self._last = subgoals
        self.plans.append([s.xy for s in subgoals])
        return [
            GroundedSubgoal(
                s.label, (Step("drive", _const(s.xy), tolerance=s.tolerance, budget=s.step_budget, label=s.label),)
            )
            for s in subgoals
        ]

    def progress(self, task: Task, env: Any) -> int:
        return visited_in_order(self.executor.trajectory, self.goals, self.goal_tolerance)

    def broken(self, env: Any) -> str | None:
        """The task's constraint broken for good: an avoided room entered."""
        room = self.executor.violation
        return f"entered avoided room {room}" if room is not None else None

    def finish(self, env: Any, max_steps: int, on_step: Callable[[], None]) -> None:
        """Nothing to let go of: the episode is judged on the trajectory."""

    def where(self, env: Any) -> tuple[float, float]:
        """Where the robot believes it is (events are stamped with it)."""
        return self.executor.position

    def feedback(
        self, failed: str, outcome: Outcome | str, attempt: int, reached: tuple[str, ...], events: list[Event]
    ) -> Feedback:
        """The rover planners' feedback: the failed subgoal and why, where the robot is, the failed point, the
        failures so far."""
        point = next((s.xy for s in self._last if s.label == failed), None)
        history = tuple(f"{e.subgoal}: {e.outcome}" for e in events if e.kind == EventKind.SUBGOAL_FAILED)
        return Feedback(
            failed,
            str(outcome),
            self.executor.pose,
            attempt=attempt,
            failed_point=point,
            history=history,
            reached=reached,
        )


def _const(xy: tuple[float, float]) -> Callable[[Any], tuple[float, float]]:
    return lambda env: xy


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
