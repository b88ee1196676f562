"""Helpers shared by the map-based planners: task goals as targets, door approach points, spacing."""

from __future__ import annotations

import math

from llm_planner.plan import GOAL_CLEARANCE, LandmarkTarget, PointTarget, RoomTarget, Subgoal, resolve_target
from sim.navigation.world import Door, Landmark, World

Point = tuple[float, float]

#: Waypoints are spaced within the low-level policy's reliable range (trained on goals <= 2.5 m).
MAX_SPACING = 2.0
#: Distance of the approach points before and after a door, along the door's normal.
DOOR_OFFSET = 0.6
WAYPOINT_TOLERANCE = 0.35


def goal_target(goal: str | tuple[float, float], world: World) -> LandmarkTarget | RoomTarget | PointTarget:
    if isinstance(goal, str):
        place = world.resolve(goal)
        return LandmarkTarget(name=place.name) if isinstance(place, Landmark) else RoomTarget(name=place.name)
    return PointTarget(x=float(goal[0]), y=float(goal[1]))


def goal_point(goal: str | tuple[float, float], world: World, clearance: float = GOAL_CLEARANCE) -> Point:
    return resolve_target(goal_target(goal, world), world, clearance)


def door_approach(door: Door, world: World, from_room: str) -> tuple[Point, Point]:
    """Points ``DOOR_OFFSET`` before (in ``from_room``) and after the door, along its normal."""
    a = world.room(door.rooms[0]).shape
    b = world.room(door.rooms[1]).shape
    shared = a.boundary.intersection(b.boundary)
    coords = [c for geom in getattr(shared, "geoms", [shared]) for c in getattr(geom, "coords", [])]
    if len(coords) >= 2:
        (x0, y0), (x1, y1) = coords[0], coords[-1]
        length = math.hypot(x1 - x0, y1 - y0) or 1.0
        nx, ny = -(y1 - y0) / length, (x1 - x0) / length
    else:  # rooms touch at a point only: go straight through from room centre to room centre
        (ax, ay), (bx, by) = world.room(door.rooms[0]).center, world.room(door.rooms[1]).center
        length = math.hypot(bx - ax, by - ay) or 1.0
        nx, ny = (bx - ax) / length, (by - ay) / length
    wx, wy = door.waypoint
    cx, cy = world.room(from_room).center
    if (cx - wx) * nx + (cy - wy) * ny < 0:  # make the normal point into from_room
        nx, ny = -nx, -ny
    before = (wx + DOOR_OFFSET * nx, wy + DOOR_OFFSET * ny)
    after = (wx - DOOR_OFFSET * nx, wy - DOOR_OFFSET * ny)
    return before, after


def densify(points: list[Point], start: Point, spacing: float = MAX_SPACING) -> list[tuple[Point, bool]]:
    """Insert evenly spaced points wherever two consecutive points are farther apart than ``spacing``.

    Returns (point, inserted) pairs; the inserted ones are intermediate waypoints.
    """
    out: list[tuple[Point, bool]] = []
    prev = start
    for p in points:
        gap = math.dist(prev, p)
        n = math.ceil(gap / spacing) if gap > spacing else 1
        for k in range(1, n):
            out.append(((prev[0] + (p[0] - prev[0]) * k / n, prev[1] + (p[1] - prev[1]) * k / n), True))
        out.append((p, False))
        prev = p
    return out


def step_budget(distance: float, slack: float = 2.5) -> int:
    """Control steps to allow for a straight leg of ``distance`` metres (0.5 m/s at 10 Hz, plus turning)."""
    return int(30 + slack * 20 * distance)


def waypoint(p: Point, distance: float, tolerance: float = WAYPOINT_TOLERANCE) -> Subgoal:
    return Subgoal(
        target=PointTarget(x=round(p[0], 3), y=round(p[1], 3)), tolerance=tolerance, step_budget=step_budget(distance)
    )
