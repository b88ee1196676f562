"""What a domain supplies to the domain-free hierarchy, and the typed records the hierarchy keeps.

A **domain** (navigation for the rover, tabletop for the Panda; a user adds a third the same way) knows its
world; the agent (:mod:`hierarchy.agent`) knows only this contract:

- ``observe(env) -> scene``: what a planner may know of the scene now (``scene.text()`` for language models,
  structured fields for the others);
- ``plan_model``: the pydantic :class:`~llm_planner.plan.PlanModel` whose subgoal kinds are the domain's
  vocabulary (``plan_model.json_schema(names)`` restricts names for constrained decoding);
- ``ground(plan, scene) -> list[GroundedSubgoal]``: every subgoal resolved into skill calls (:class:`Step`)
  *before anything moves*, raising :class:`~llm_planner.plan.PlanError` with "did you mean" otherwise;
- ``skills``: name -> :class:`Skill`, the learned policies and scripted primitives a step may call;
- ``progress(task, env)``: how many of the task's goals hold now, in order (its acceptance check: all of them);
- ``finish(env)``: what ends an episode before the check (the tabletop lets go of what it holds).

Optional, where a domain needs them (navigation does, :mod:`hierarchy.navigation`):

- ``start(env, task, event, obs)``: a new episode (``obs``: what the env's reset returned; ``event(kind,
  detail)`` records a domain's own events, e.g. a recovery);
- ``broken(env) -> str | None``: a constraint of the task broken for good (navigation: an avoided room
  entered): the episode ends with that reason and fails, whatever goals hold;
- ``feedback(failed, outcome, attempt, reached, events)``: the domain's planners' feedback after a failure
  (default: :class:`Feedback`);
- ``where(env) -> tuple``: where the robot is, stamped on every event.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

import numpy as np


class Outcome(StrEnum):
    """How a skill call (and so a subgoal) ended."""

    REACHED = "reached"
    BUDGET = "budget"  # its step budget ran out
    STUCK = "stuck"  # no progress over the skill's window
    OBJECT_LEFT_TABLE = "object_left_table"
    COLLISIONS = "collisions"  # pressed against walls too many steps in a row (navigation)
    ENTERED_AVOIDED_ROOM = "entered_avoided_room"  # the task's constraint broken (navigation)
    EPISODE_LIMIT = "episode_limit"
    #: Stopped from outside the skill: a robot's e-stop, stale or unusable sensor data, a refused goal, a newer
    #: call, shutdown (hrl.ros.arm_policy_node says why).
    ABORTED = "aborted"


class EventKind(StrEnum):
    PLAN = "plan"
    SUBGOAL_STARTED = "subgoal_started"
    SUBGOAL_REACHED = "subgoal_reached"
    SUBGOAL_FAILED = "subgoal_failed"
    RECOVERY = "recovery"  # a skill's recovery behaviour (navigation: backing off a wall)
    REPLAN = "replan"
    PLANNER_ERROR = "planner_error"
    PLAN_REJECTED = "plan_rejected"
    DONE = "done"


@dataclass(frozen=True)
class Event:
    step: int
    kind: EventKind
    detail: str
    subgoal: str = ""  # the subgoal's label, for the subgoal_* kinds
    outcome: Outcome | None = None  # for subgoal_reached / subgoal_failed
    where: tuple[float, ...] = ()  # where the robot was (the domain's ``where``, when it has one)


@dataclass(frozen=True)
class Step:
    """One skill call: ``skill`` (a name in the domain's ``skills``) drives ``object`` (or the robot) to the goal
    that ``goal(env)`` computes when the step starts (objects may have moved since grounding), until within
    ``tolerance`` or ``budget`` control steps are spent."""

    skill: str
    goal: Callable[[Any], np.ndarray]
    object: str | None = None
    tolerance: float = 0.02
    budget: int = 60
    label: str = ""
    #: The gripper command (-1 close .. 1 open) a skill trained with a blocked gripper holds; None: its own.
    gripper: float | None = None
    #: When this says the step's effect already holds (e.g. the object is already in the gripper), it is skipped.
    skip: Callable[[Any], bool] | None = None


@dataclass(frozen=True)
class GroundedSubgoal:
    """A subgoal of the plan (``label`` as a person would read it) and the skill calls that carry it out."""

    label: str
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class SkillResult:
    outcome: Outcome
    steps: int
    distance: float  # to the goal at the end (m)


class Skill(Protocol):
    """A learned policy or a scripted primitive: runs one :class:`Step` in ``env`` within ``max_steps``."""

    def run(self, env: Any, step: Step, max_steps: int, on_step: Callable[[], None]) -> SkillResult: ...


@dataclass(frozen=True)
class Feedback:
    """Why the last plan stopped short, for the planner's next call (typed: nothing is split out of strings)."""

    failed_subgoal: str
    outcome: Outcome | str  # a skill's Outcome, or "plan_ended_short_of_goal"
    attempt: int
    reached: tuple[str, ...] = field(default_factory=tuple)  # labels of the subgoals reached so far, in order

    def text(self) -> str:
        return f"attempt {self.attempt} failed at {self.failed_subgoal}: {self.outcome}"


class Domain(Protocol):
    name: str
    plan_model: Any
    skills: dict[str, Skill]

    def observe(self, env: Any) -> Any: ...

    def ground(self, plan: Any, scene: Any) -> list[GroundedSubgoal]: ...

    def progress(self, task: Any, env: Any) -> int: ...

    def finish(self, env: Any, max_steps: int, on_step: Callable[[], None]) -> None: ...


#: The domains there are, by name (see docs/architecture.md, "Adding a domain").
DOMAINS = ("navigation", "tabletop")


def check_domain(name: str) -> str:
    if name not in DOMAINS:
        raise ValueError(f"unknown domain {name!r}; available: {', '.join(DOMAINS)}")
    return name
