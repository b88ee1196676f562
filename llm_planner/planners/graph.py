"""``graph``: shortest route over the map's rooms-and-doors graph (networkx), as door and room waypoints.

For each task goal, the robot's position and the goal are joined to the doors of their rooms and the
shortest metric path through door nodes is taken. Every door becomes three waypoints (in front of it,
in it, behind it) so the low-level policy passes straight through the gap, and long legs are split so
consecutive waypoints stay within the policy's reliable range. After a failure (feedback) the route is
planned again from where the robot stands, with the failed door made costlier. Rooms in the task's
``avoid`` are taken out of the graph; a goal that cannot be reached without them is a PlanError.
"""

from __future__ import annotations

import math

import networkx as nx

from llm_planner.base import Feedback, Scene, Task
from llm_planner.plan import Plan, PlanError, Subgoal
from llm_planner.planners.common import (
    MAX_SPACING,
    densify,
    door_approach,
    goal_point,
    goal_target,
    step_budget,
    waypoint,
)
from sim.navigation.world import World

Point = tuple[float, float]


class GraphPlanner:
    name = "graph"

    def __init__(
        self, spacing: float = MAX_SPACING, goal_tolerance: float = 0.3, failed_door_penalty: float = 5.0
    ) -> None:
        if spacing <= 0:
            raise ValueError(f"spacing must be > 0 m, got {spacing}")
        self.spacing = spacing
        self.goal_tolerance = goal_tolerance
        self.failed_door_penalty = failed_door_penalty
        self._penalties: dict[str, float] = {}

    def plan(self, task: Task, scene: Scene, feedback: Feedback | None = None) -> Plan:
        world = scene.world
        if feedback is None:
            self._penalties = {}
        elif feedback.failed_point is not None:
            door = _nearest_door(world, feedback.failed_point)
            if door is not None:
                self._penalties[door] = self._penalties.get(door, 0.0) + self.failed_door_penalty
        subgoals: list[Subgoal] = []
        position = scene.robot_xy
        for goal in task.goals:
            target = goal_point(goal, world)
            route = self.route(world, position, target, avoid=task.avoid)
            for p, _inserted in densify(route, position, self.spacing)[:-1]:
                subgoals.append(waypoint(p, self.spacing))
            # densify keeps the last leg within `spacing` too
            subgoals.append(
                Subgoal(
                    target=goal_target(goal, world),
                    tolerance=self.goal_tolerance,
                    step_budget=step_budget(self.spacing),
                )
            )
            position = target
        return Plan(subgoals=subgoals, rationale="graph: shortest route through rooms and doors")

    def route(self, world: World, start: Point, goal: Point, avoid: tuple[str, ...] = ()) -> list[Point]:
        """Door approach points and the goal, in order, never through a room in ``avoid``."""
        start_room = room_name(world, start)
        goal_room = room_name(world, goal)
        for name in avoid:
            world.room(name)  # raises with the known rooms
        if goal_room in avoid:
            raise PlanError(f"goal at {list(goal)} lies in {goal_room!r}, a room to avoid")
        if start_room == goal_room:
            return [goal]
        graph = world.graph()
        for u, v, data in graph.edges(data=True):
            door = u if graph.nodes[u]["kind"] == "door" else v
            data["weight"] += self._penalties.get(door, 0.0)
        graph.add_node("_start", kind="start", position=start)
        graph.add_node("_goal", kind="goal", position=goal)
        for name, room in (("_start", start_room), ("_goal", goal_room)):
            for door in list(graph.neighbors(room)):
                graph.add_edge(
                    name, door, weight=math.dist(graph.nodes[name]["position"], graph.nodes[door]["position"])
                )
        # a robot starting in an avoided room leaves it by its doors (joined to _start above), never returns
        graph.remove_nodes_from(avoid)
        try:
            path = nx.shortest_path(graph, "_start", "_goal", weight="weight")
        except nx.NetworkXNoPath:
            raise PlanError(f"no route from {start_room!r} to {goal_room!r} that avoids {', '.join(avoid)}") from None
        points: list[Point] = []
        current_room = start_room
        for node in path[1:-1]:
            if graph.nodes[node]["kind"] != "door":
                continue
            door = next(d for d in world.doors if d.name == node)
            before, after = door_approach(door, world, current_room)
            points += [before, door.waypoint, after]
            current_room = door.rooms[1] if door.rooms[0] == current_room else door.rooms[0]
        return [*points, goal]


def room_name(world: World, p: Point) -> str:
    room = world.room_at(p)
    if room is not None:
        return room.name
    # on a wall line or just outside a room: the nearest room
    from shapely.geometry import Point as ShapelyPoint

    return min(world.rooms, key=lambda r: r.shape.distance(ShapelyPoint(p))).name


def _nearest_door(world: World, p: Point, within: float = 1.5) -> str | None:
    best = min(world.doors, key=lambda d: math.dist(d.waypoint, p), default=None)
    return best.name if best is not None and math.dist(best.waypoint, p) <= within else None
