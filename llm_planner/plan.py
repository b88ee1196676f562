"""Plans: the contract between any high-level planner and the low-level executor.

A :class:`Plan` is an ordered list of :class:`Subgoal`; each names a target (a landmark, a room, a door,
or coordinates), a tolerance (m) and a step budget (control steps). Plans serialise to JSON and export
a JSON schema (LLM backends use it for constrained decoding). Anything that comes from a model is
untrusted: :func:`ground` resolves names through the map, checks coordinates, and returns plain
:class:`GroundedSubgoal` points the executor can drive to; it raises :class:`PlanError` with the names
that exist (and a "did you mean") before anything moves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from robots._fields import did_you_mean
from sim.navigation.world import Landmark, Room, World

DEFAULT_TOLERANCE = 0.3
DEFAULT_STEP_BUDGET = 150


class PlanError(ValueError):
    """A plan that cannot be executed: malformed, empty, or not grounded in the map."""


class PlanDone(Exception):  # noqa: N818 (an answer, not an error)
    """A step-wise planner's answer that nothing is left to do (SayCan's "done")."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LandmarkTarget(_Strict):
    kind: Literal["landmark"] = "landmark"
    name: str = Field(min_length=1)


class RoomTarget(_Strict):
    kind: Literal["room"] = "room"
    name: str = Field(min_length=1)


class DoorTarget(_Strict):
    kind: Literal["door"] = "door"
    name: str = Field(min_length=1)


class PointTarget(_Strict):
    kind: Literal["point"] = "point"
    x: float = Field(allow_inf_nan=False)
    y: float = Field(allow_inf_nan=False)


Target = Annotated[LandmarkTarget | RoomTarget | DoorTarget | PointTarget, Field(discriminator="kind")]


class Subgoal(_Strict):
    target: Target
    tolerance: float = Field(default=DEFAULT_TOLERANCE, gt=0, le=5.0, description="metres")
    step_budget: int = Field(default=DEFAULT_STEP_BUDGET, gt=0, description="control steps")
    rationale: str | None = None

    def label(self) -> str:
        t = self.target
        return f"({t.x:.2f}, {t.y:.2f})" if isinstance(t, PointTarget) else f"{t.kind} {t.name}"


class PlanModel(_Strict):
    """What every domain's plan shares: JSON in and out, untrusted input refused with :class:`PlanError`."""

    def to_json(self) -> str:
        return self.model_dump_json(exclude_none=True)

    @classmethod
    def from_json(cls, text: str) -> Self:
        """Parse untrusted JSON (e.g. model output); raises PlanError with the validation problems."""
        return _validated(cls.model_validate_json, text)

    @classmethod
    def from_data(cls, data: Any) -> Self:
        """Validate untrusted data (dicts and lists); raises PlanError like :meth:`from_json`."""
        return _validated(cls.model_validate, data)


class Plan(PlanModel):
    """The navigation domain's plan: places (or points) to drive to, in order."""

    subgoals: list[Subgoal] = Field(min_length=1)
    rationale: str | None = None

    @classmethod
    def json_schema(cls, names: dict[str, list[str]] | None = None) -> dict[str, Any]:
        """The JSON schema; with ``names`` ({"landmark": [...], "room": [...], "door": [...]}) the target
        names are restricted to those enums, so constrained decoding can only produce grounded names."""
        schema = cls.model_json_schema()
        if names:
            defs = schema["$defs"]
            for kind, key in (("landmark", "LandmarkTarget"), ("room", "RoomTarget"), ("door", "DoorTarget")):
                if names.get(kind):
                    defs[key]["properties"]["name"] = {"type": "string", "enum": sorted(names[kind])}
        return schema


@dataclass(frozen=True)
class GroundedSubgoal:
    """A subgoal resolved to a free point of the map."""

    x: float
    y: float
    tolerance: float
    step_budget: int
    label: str

    @property
    def xy(self) -> tuple[float, float]:
        return (self.x, self.y)


#: Free space (m) kept around the point a room resolves to: the same for grounding a plan and for judging a task
#: (``llm_planner.planners.common.goal_point``), so the robot is sent where it will be judged.
GOAL_CLEARANCE = 0.3


def ground(plan: Plan, world: World, clearance: float = GOAL_CLEARANCE) -> list[GroundedSubgoal]:
    """Resolve every target of ``plan`` to coordinates in ``world``; PlanError on the first bad one."""
    grounded = []
    for i, sub in enumerate(plan.subgoals):
        try:
            x, y = resolve_target(sub.target, world, clearance)
        except PlanError as err:
            raise PlanError(f"subgoal {i + 1} ({sub.label()}): {err}") from None
        grounded.append(GroundedSubgoal(x, y, sub.tolerance, sub.step_budget, sub.label()))
    return grounded


def resolve_target(target: Any, world: World, clearance: float = GOAL_CLEARANCE) -> tuple[float, float]:
    if isinstance(target, PointTarget):
        p = (target.x, target.y)
        if not world.in_bounds(p):
            raise PlanError(f"point {list(p)} lies outside map {world.name!r} (bounds {list(world.bounds)})")
        if world.in_wall(p):
            raise PlanError(f"point {list(p)} lies inside a wall of map {world.name!r}")
        return p
    if isinstance(target, DoorTarget):
        doors = {d.name.lower(): d for d in world.doors}
        door = doors.get(target.name.strip().lower())
        if door is None:
            raise PlanError(_unknown("door", target.name, [d.name for d in world.doors]))
        return door.waypoint
    try:
        place = world.resolve(target.name)
    except ValueError:
        names = [r.name for r in world.rooms] if isinstance(target, RoomTarget) else [lm.name for lm in world.landmarks]
        raise PlanError(_unknown(target.kind, target.name, names)) from None
    if isinstance(target, RoomTarget):
        if not isinstance(place, Room):
            raise PlanError(f"{target.name!r} is a landmark, not a room; use kind 'landmark'")
        return room_point(place, world, clearance)
    if not isinstance(place, Landmark):
        raise PlanError(f"{target.name!r} is a room, not a landmark; use kind 'room'")
    return place.position


def room_point(room: Room, world: World, clearance: float) -> tuple[float, float]:
    """The room's centre, or the free point of the room nearest to it when the centre is not free."""
    centre = room.center
    if world.is_free(centre, clearance):
        return centre
    from shapely.geometry import Point
    from shapely.ops import nearest_points

    free = room.shape.intersection(world.free_space(max(clearance, 0.01)))
    if free.is_empty:
        raise PlanError(f"room {room.name!r} has no free space with {clearance} m clearance")
    p = nearest_points(free, Point(centre))[0]
    return (float(p.x), float(p.y))


def _unknown(kind: str, name: str, known: list[str]) -> str:
    return f"unknown {kind} {name!r}{did_you_mean(name.lower(), [k.lower() for k in known])}; known: {', '.join(known)}"


def _validated(validate: Any, value: Any) -> Any:
    try:
        return validate(value)
    except ValidationError as err:
        raise PlanError(f"invalid plan: {_summarise(err)}") from err


def _summarise(err: ValidationError) -> str:
    parts = []
    for e in err.errors()[:5]:
        loc = ".".join(str(p) for p in e["loc"])
        parts.append(f"{loc}: {e['msg']}" if loc else e["msg"])
    return "; ".join(parts)


__all__ = [
    "DoorTarget",
    "GroundedSubgoal",
    "LandmarkTarget",
    "Plan",
    "PlanDone",
    "PlanError",
    "PlanModel",
    "PointTarget",
    "RoomTarget",
    "Subgoal",
    "ground",
    "resolve_target",
]
