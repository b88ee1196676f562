"""The tabletop domain's language: tasks, the scene as a planner may know it, and the subgoal vocabulary.

Tasks are ordered goals ``object on target`` (a target is another object or a place: a bin, a plate, a
zone). Subgoals: ``pick(object)``, ``place(object, on)`` (``via="direct"``: the skill straight at the final
position, the ``flat`` baseline), ``push(object, to)``, ``move_tcp(x, y, z)``, ``gripper(open | close)``.
Planners speak this; :mod:`hierarchy.tabletop` grounds it into skill calls and judges the state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import Field

from llm_planner.plan import PlanModel, _Strict


# ---- tasks -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Relation:
    """``object`` rests on ``on`` (another object, or inside/on a place)."""

    object: str
    on: str

    def text(self) -> str:
        return f"{self.object} on {self.on}"


@dataclass(frozen=True)
class TabletopTask:
    """What to do: ``goals`` hold in the final state, achieved in order; ``text`` is the instruction."""

    text: str
    goals: tuple[Relation, ...]
    category: str = ""

    def __post_init__(self) -> None:
        if not self.goals:
            raise ValueError(f"task {self.text!r} has no goals")

    def remaining(self, done: int) -> TabletopTask:
        return TabletopTask(self.text, self.goals[done:], self.category)


# ---- what a planner may know --------------------------------------------------------------------------------
@dataclass(frozen=True)
class ObjectView:
    name: str
    color: str
    size: float  # edge (m), the largest extent
    position: tuple[float, float, float]
    on: str | None  # the object or place it rests on, None on the bare table, "gripper" when held


@dataclass(frozen=True)
class PlaceView:
    name: str
    kind: str
    color: str
    center: tuple[float, float]


@dataclass(frozen=True)
class TabletopView:
    """The scene as a planner may know it: objects (where, on what), places, and the TCP."""

    scene: str
    objects: tuple[ObjectView, ...]
    places: tuple[PlaceView, ...]
    tcp: tuple[float, float, float]
    holding: str | None = None
    finger_width: float | None = None  # m between the fingers; None where unknown
    #: ``(goal_mode, block_gripper, object, goal) -> observation``: what a skill would observe now for a candidate
    #: goal (SayCan's affordances: the skill's critic on it); None where the robot offers none.
    skill_observation: Callable[..., Any] | None = field(default=None, compare=False, repr=False)
    #: ``(camera="front", size=128, depth=True) -> sim.tabletop.physics.CameraImage``: what a camera sees now (RGB,
    #: depth, its pinhole model), for the vision planners; None where the robot has no camera.
    camera: Callable[..., Any] | None = field(default=None, compare=False, repr=False)

    def names(self) -> dict[str, list[str]]:
        return {"object": [o.name for o in self.objects], "place": [p.name for p in self.places]}

    def object(self, name: str) -> ObjectView:
        for o in self.objects:
            if o.name == name:
                return o
        raise KeyError(name)

    def text(self) -> str:
        """The scene in words, for language models."""
        lines = ["Objects:"]
        for o in self.objects:
            where = {None: "on the table", "gripper": "in the gripper"}.get(o.on, f"on {o.on}")
            x, y, _ = o.position
            lines.append(f"- {o.name}: {o.color} {o.size * 100:g} cm block at ({x:.2f}, {y:.2f}), {where}")
        lines.append("Places:" if self.places else "Places: none")
        for p in self.places:
            lines.append(f"- {p.name}: {p.color} {p.kind} at ({p.center[0]:.2f}, {p.center[1]:.2f})")
        return "\n".join(lines)


# ---- the subgoal vocabulary ----------------------------------------------------------------------------------
class PickSubgoal(_Strict):
    kind: Literal["pick"] = "pick"
    object: str = Field(min_length=1)

    def label(self) -> str:
        return f"pick {self.object}"


class PlaceSubgoal(_Strict):
    kind: Literal["place"] = "place"
    object: str = Field(min_length=1)
    on: str = Field(min_length=1, description="an object or a place")
    via: Literal["waypoints", "direct"] = Field(
        default="waypoints", description="lift, carry over the target and lower (default), or straight at it"
    )

    def label(self) -> str:
        return f"place {self.object} on {self.on}"


class PushSubgoal(_Strict):
    kind: Literal["push"] = "push"
    object: str = Field(min_length=1)
    to: str = Field(min_length=1, description="a place")

    def label(self) -> str:
        return f"push {self.object} to {self.to}"


class MoveTcpSubgoal(_Strict):
    kind: Literal["move_tcp"] = "move_tcp"
    x: float = Field(allow_inf_nan=False)
    y: float = Field(allow_inf_nan=False)
    z: float = Field(ge=0.0, le=0.5, description="m above the table")

    def label(self) -> str:
        return f"move the gripper to ({self.x:.2f}, {self.y:.2f}, {self.z:.2f})"


class GripperSubgoal(_Strict):
    kind: Literal["gripper"] = "gripper"
    command: Literal["open", "close"]

    def label(self) -> str:
        return f"{self.command} the gripper"


TabletopSubgoal = Annotated[
    PickSubgoal | PlaceSubgoal | PushSubgoal | MoveTcpSubgoal | GripperSubgoal, Field(discriminator="kind")
]


class TabletopPlan(PlanModel):
    subgoals: list[TabletopSubgoal] = Field(min_length=1)
    rationale: str | None = None

    @classmethod
    def json_schema(cls, names: dict[str, list[str]] | None = None) -> dict[str, Any]:
        """The JSON schema, every subgoal's ``kind`` required (a decoder may not skip it); with ``names``
        ({"object": [...], "place": [...]}) names are restricted to those, and push is left out of a scene
        without places."""
        schema = cls.model_json_schema()
        for key, definition in schema["$defs"].items():
            if key.endswith("Subgoal"):  # kind has a default, so pydantic leaves it optional: a grammar must not
                required = definition.get("required", [])
                definition["required"] = ["kind", *(r for r in required if r != "kind")]
        if names:
            objects = {"type": "string", "enum": sorted(names.get("object", []))}
            targets = {"type": "string", "enum": sorted(names.get("object", []) + names.get("place", []))}
            places = {"type": "string", "enum": sorted(names.get("place", []))}
            defs = schema["$defs"]
            for key in ("PickSubgoal", "PlaceSubgoal", "PushSubgoal"):
                defs[key]["properties"]["object"] = objects
            defs["PlaceSubgoal"]["properties"]["on"] = targets
            defs["PushSubgoal"]["properties"]["to"] = places
            if not places["enum"]:  # a scene without places: no push (an empty enum is an empty grammar rule)
                items = schema["properties"]["subgoals"]["items"]
                items["oneOf"] = [r for r in items["oneOf"] if r["$ref"] != "#/$defs/PushSubgoal"]
                items["discriminator"]["mapping"].pop("push", None)
                del defs["PushSubgoal"]
        return schema
