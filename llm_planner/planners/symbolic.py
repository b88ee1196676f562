"""``symbolic``: the tabletop's oracle planner, from the task's goal spec (as ``graph`` is for the rover).

Each goal ``object on target`` becomes ``place(object, on=target)``, in the task's order (a tower is built from
the bottom up because its goals are listed so). After a failure it plans again for the goals still open: the
agent hands it the task's remaining goals, counted on the current state.
"""

from __future__ import annotations

from typing import Any

from llm_planner.tabletop import PlaceSubgoal, TabletopPlan, TabletopTask


class SymbolicPlanner:
    name = "symbolic"
    domains = ("tabletop",)

    def plan(self, task: TabletopTask, scene: Any, feedback: Any = None) -> TabletopPlan:
        return TabletopPlan(
            subgoals=[PlaceSubgoal(object=g.object, on=g.on) for g in task.goals],
            rationale="symbolic: one place per goal, in the task's order",
        )
