"""``random``: random free waypoints before each goal (a lower bound for any planner)."""

from __future__ import annotations

import numpy as np

from llm_planner.base import Feedback, Scene, Task
from llm_planner.plan import Plan, Subgoal
from llm_planner.planners.common import MAX_SPACING, goal_target, step_budget, waypoint


class RandomPlanner:
    name = "random"

    def __init__(self, waypoints_per_goal: int = 3, seed: int = 0, goal_tolerance: float = 0.3) -> None:
        if waypoints_per_goal < 0:
            raise ValueError(f"waypoints_per_goal must be >= 0, got {waypoints_per_goal}")
        self.waypoints_per_goal = waypoints_per_goal
        self.rng = np.random.default_rng(seed)
        self.goal_tolerance = goal_tolerance

    def plan(self, task: Task, scene: Scene, feedback: Feedback | None = None) -> Plan:
        subgoals: list[Subgoal] = []
        for goal in task.goals:
            for _ in range(self.waypoints_per_goal):
                subgoals.append(waypoint(scene.world.sample_free(self.rng, clearance=0.35), MAX_SPACING * 2))
            subgoals.append(
                Subgoal(
                    target=goal_target(goal, scene.world),
                    tolerance=self.goal_tolerance,
                    step_budget=step_budget(MAX_SPACING * 2),
                )
            )
        return Plan(subgoals=subgoals, rationale="random free waypoints")
