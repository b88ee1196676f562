"""``flat``: no high level. Each task goal goes straight to the low-level policy (the baseline).

On the tabletop each goal ``object on target`` is one ``place`` with ``via="direct"``: the pick-and-place skill
straight at the final position (no lift, no carry over the target, no lowering), then let go.
"""

from __future__ import annotations

from typing import Any

from llm_planner.base import Feedback, Scene, Task
from llm_planner.plan import Plan, Subgoal
from llm_planner.planners.common import goal_target


class FlatPlanner:
    name = "flat"
    domains = ("navigation", "tabletop")

    def __init__(self, step_budget: int = 400, goal_tolerance: float = 0.3) -> None:
        if step_budget < 1:
            raise ValueError(f"step_budget must be >= 1, got {step_budget}")
        self.step_budget = step_budget
        self.goal_tolerance = goal_tolerance

    def plan(self, task: Task, scene: Scene, feedback: Feedback | None = None) -> Any:
        from llm_planner.tabletop import PlaceSubgoal, TabletopPlan, TabletopTask

        if isinstance(task, TabletopTask):
            return TabletopPlan(
                subgoals=[PlaceSubgoal(object=g.object, on=g.on, via="direct") for g in task.goals],
                rationale="flat: every goal handed directly to the pick-and-place skill",
            )
        return Plan(
            subgoals=[
                Subgoal(target=goal_target(g, scene.world), tolerance=self.goal_tolerance, step_budget=self.step_budget)
                for g in task.goals
            ],
            rationale="flat: every goal handed directly to the low-level policy",
        )
