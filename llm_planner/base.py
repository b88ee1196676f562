"""The planner contract: ``plan(task, scene, feedback=None) -> Plan``, and the registry of planners.

Planners are looked up by name (``make_planner("graph")``) and chosen in Hydra with ``planner=<name>``.
Adding one is one module with a ``@register_planner("name")`` class and one ``configs/planner/<name>.yaml``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from llm_planner.plan import Plan
from sim.navigation.world import Pose2D, Room, World

Goal = str | tuple[float, float]


@dataclass(frozen=True)
class Task:
    """What to do: ``goals`` are visited in order (place names, or (x, y) in metres), never entering the
    rooms in ``avoid``; ``text`` is the instruction as a person would say it. LLM planners read only
    ``text`` (and the scene); the others use ``goals`` and ``avoid``."""

    text: str
    goals: tuple[Goal, ...]
    avoid: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.goals:
            raise ValueError(f"task {self.text!r} has no goals")

    def remaining(self, done: int) -> Task:
        return Task(self.text, self.goals[done:], self.avoid)


@dataclass(frozen=True)
class Scene:
    """What the planner may know: the map, where the robot is, and (optionally) its current observation."""

    world: World
    robot_pose: Pose2D
    observation: Any = None  # the policy's observation vector at robot_pose, when available

    @property
    def robot_xy(self) -> tuple[float, float]:
        return (self.robot_pose.x, self.robot_pose.y)

    def robot_room(self) -> Room | None:
        return self.world.room_at(self.robot_xy)


@dataclass(frozen=True)
class Feedback:
    """Why the last plan failed, for the next call of ``plan``."""

    failed_subgoal: str
    reason: str
    robot_pose: Pose2D
    attempt: int
    failed_point: tuple[float, float] | None = None
    history: tuple[str, ...] = field(default_factory=tuple)
    reached: tuple[str, ...] = field(default_factory=tuple)  # labels of the subgoals reached so far, in order

    def text(self) -> str:
        return (
            f"attempt {self.attempt} failed at {self.failed_subgoal}: {self.reason}; robot at "
            f"({self.robot_pose.x:.2f}, {self.robot_pose.y:.2f})"
        )


class Planner(Protocol):
    name: str

    def plan(self, task: Task, scene: Scene, feedback: Feedback | None = None) -> Plan: ...


#: Planner name -> "module:Class" (imported on first use, so heavy backends load only when chosen).
PLANNERS: dict[str, str] = {
    "flat": "llm_planner.planners.flat:FlatPlanner",
    "graph": "llm_planner.planners.graph:GraphPlanner",
    "random": "llm_planner.planners.random_waypoints:RandomPlanner",
    "sorb": "llm_planner.planners.sorb:SoRBPlanner",
    "sorb_safe": "llm_planner.planners.sorb_safe:SafeSoRBPlanner",
    "symbolic": "llm_planner.planners.symbolic:SymbolicPlanner",
    "saycan": "llm_planner.planners.saycan:SayCanPlanner",
    "vla": "hierarchy.vla.planner:VLAPlanner",
    "llm_goals": "llm_planner.planners.llm:LLMGoalsPlanner",
    "llm_route": "llm_planner.planners.llm:LLMRoutePlanner",
    "vlm_http": "llm_planner.planners.vlm_http:VLMHttpPlanner",
}


def register_planner(name: str, class_path: str | None = None) -> Any:
    """Register a planner by name: ``register_planner("mine", "my_pkg.planners:Mine")`` (imported on first use),
    or as a class decorator, ``@register_planner("mine")`` (registered when its module is imported)."""
    if not name or not isinstance(name, str):
        raise ValueError(f"a planner name must be a non-empty string, got {name!r}")
    if class_path is not None:
        if ":" not in class_path:
            raise ValueError(f"class_path must read 'module:Class', got {class_path!r}")
        PLANNERS[name] = class_path
        return None

    def decorate(cls: type) -> type:
        PLANNERS[name] = f"{cls.__module__}:{cls.__qualname__}"
        return cls

    return decorate


def planner_class(name: str) -> Callable[..., Planner]:
    if name not in PLANNERS:
        raise ValueError(f"unknown planner {name!r}; available: {', '.join(sorted(PLANNERS))}")
    module_name, _, class_name = PLANNERS[name].partition(":")
    return getattr(importlib.import_module(module_name), class_name)


def make_planner(name: str, **kwargs: Any) -> Planner:
    return planner_class(name)(**kwargs)
