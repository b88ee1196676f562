"""What the arm's planner node and policy node say to each other on ``/arm_subgoal`` and
``/arm_subgoal_status`` (std_msgs/String, JSON), without ROS.

The planner grounds a plan into :class:`~hierarchy.domain.Step` s whose goals are computed when a step starts
(from the objects where they are then); it evaluates the goal on its view of the robot and sends the step as a
:class:`SkillCall` with the goal as numbers. The policy node runs the call with the domain's skill of that name
(the same code as in simulation) and answers with a :class:`SkillStatus`. A :class:`SkillCancel` on the same topic
(``{"cancel": "<call id>"}``; ``"*"``: whatever call is running or waiting) ends a call: it answers ``aborted`` and
the arm stops where it stands. It travels on the calls' own topic so that it can never overtake the call it
cancels (DDS keeps one writer's order on a reliable topic; two topics have no order between them).
Malformed messages raise :class:`MessageError` naming the field, the value and what is allowed.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from hierarchy.domain import Outcome, Step


class MessageError(ValueError):
    """A /arm_subgoal or /arm_subgoal_status message that cannot be used."""


def _load(text: str, what: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise MessageError(f"{what} is not JSON ({err.msg} at position {err.pos}): {text[:120]!r}") from None
    if not isinstance(data, dict):
        raise MessageError(f"{what} must be a JSON object, got {type(data).__name__}: {text[:120]!r}")
    return data


def _number(data: dict[str, Any], key: str, what: str, *, low: float | None = None, default: Any = ...) -> float:
    if key not in data:
        if default is ...:
            raise MessageError(f"{what}: field {key!r} is missing")
        return default
    value = data[key]
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or (low is not None and value <= low):
        bound = f" > {low}" if low is not None else ""
        raise MessageError(f"{what}: field {key!r} = {value!r} must be a finite number{bound}")
    return float(value)


def _text(data: dict[str, Any], key: str, what: str, *, optional: bool = False) -> str | None:
    value = data.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip():
        raise MessageError(f"{what}: field {key!r} = {value!r} must be a non-empty string")
    return value


@dataclass(frozen=True)
class SkillCall:
    """One skill call for the arm: ``skill`` (a name in the domain's skills) drives ``object`` (or the TCP, when
    None) to ``goal`` (x, y, z in the world frame, metres) until within ``tolerance`` (m) or ``budget`` skill
    steps are spent; ``gripper`` is the command a skill trained with a blocked gripper holds (None: its own)."""

    id: str
    skill: str
    goal: tuple[float, float, float]
    object: str | None = None
    tolerance: float = 0.02
    budget: int = 60
    gripper: float | None = None
    label: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str, skills: list[str] | None = None, objects: list[str] | None = None) -> SkillCall:
        """Parse and check a call; ``skills`` / ``objects``, when given, are the names the receiver knows."""
        what = "skill call"
        data = _load(text, what)
        unknown = sorted(set(data) - {f for f in cls.__dataclass_fields__})
        if unknown:
            raise MessageError(f"{what}: unknown field(s) {unknown}; allowed: {', '.join(cls.__dataclass_fields__)}")
        call_id = data.get("id")
        if not isinstance(call_id, (str, int)) or isinstance(call_id, bool) or str(call_id) == "":
            raise MessageError(f"{what}: field 'id' = {call_id!r} must be a non-empty string or an integer")
        what = f"skill call {call_id}"
        skill = _text(data, "skill", what)
        if skills is not None and skill not in skills:
            raise MessageError(f"{what}: unknown skill {skill!r}; this arm has {', '.join(sorted(skills))}")
        goal = data.get("goal")
        if (
            not isinstance(goal, list)
            or len(goal) != 3
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in goal)
        ):
            raise MessageError(f"{what}: field 'goal' = {goal!r} must be [x, y, z]: three finite numbers (m)")
        obj = _text(data, "object", what, optional=True)
        if obj is not None and objects is not None and obj not in objects:
            raise MessageError(f"{what}: unknown object {obj!r}; the scene has {', '.join(objects)}")
        budget = data.get("budget", 60)
        if not isinstance(budget, int) or isinstance(budget, bool) or budget < 1:
            raise MessageError(f"{what}: field 'budget' = {budget!r} must be an integer >= 1 (skill steps)")
        gripper = data.get("gripper")
        if gripper is not None:
            gripper = _number(data, "gripper", what)
            if not -1.0 <= gripper <= 1.0:
                raise MessageError(f"{what}: field 'gripper' = {gripper!r} must be in [-1, 1] (close .. open)")
        label = data.get("label", "")
        if not isinstance(label, str):
            raise MessageError(f"{what}: field 'label' = {label!r} must be a string")
        return cls(
            str(call_id),
            skill,  # type: ignore[arg-type]
            (float(goal[0]), float(goal[1]), float(goal[2])),
            obj,
            _number(data, "tolerance", what, low=0.0, default=0.02),
            budget,
            gripper,
            label,
        )

    @classmethod
    def from_step(cls, step: Step, env: Any, call_id: str) -> SkillCall:
        """The call for ``step`` with its goal computed now, on ``env`` (the planner's view of the robot)."""
        goal = np.asarray(step.goal(env), dtype=float)
        return cls(
            call_id,
            step.skill,
            (float(goal[0]), float(goal[1]), float(goal[2])),
            step.object,
            float(step.tolerance),
            int(step.budget),
            None if step.gripper is None else float(step.gripper),
            step.label,
        )

    def step(self) -> Step:
        """The :class:`~hierarchy.domain.Step` the receiving skill runs (its goal fixed: it was computed when
        the planner started the step)."""
        goal = np.array(self.goal, dtype=float)
        return Step(
            self.skill,
            lambda env: goal.copy(),
            self.object,
            self.tolerance,
            self.budget,
            self.label,
            gripper=self.gripper,
        )


@dataclass(frozen=True)
class SkillCancel:
    """End call ``id`` (``"*"``: the call running or waiting, whichever it is): it answers ``aborted`` with
    ``why`` and the arm stops where it stands. A cancel of a call that has ended already changes nothing."""

    id: str
    why: str = ""

    ANY = "*"

    def to_json(self) -> str:
        return json.dumps({"cancel": self.id, "why": self.why})

    def matches(self, call_id: str) -> bool:
        return self.id in (self.ANY, call_id)

    @property
    def reason(self) -> str:
        """What the cancelled call's status says: ``cancelled`` and the why, if any."""
        return f"cancelled: {self.why}" if self.why else "cancelled"


def read_subgoal_message(
    text: str, skills: list[str] | None = None, objects: list[str] | None = None
) -> SkillCall | SkillCancel:
    """A message on the calls' topic: a :class:`SkillCancel` (it has a ``cancel`` field) or a :class:`SkillCall`."""
    data = _load(text, "skill call")
    if "cancel" not in data:
        return SkillCall.from_json(text, skills, objects)
    unknown = sorted(set(data) - {"cancel", "why"})
    if unknown:
        raise MessageError(f"skill cancel: unknown field(s) {unknown}; allowed: cancel, why")
    call_id, why = data["cancel"], data.get("why", "")
    if not isinstance(call_id, (str, int)) or isinstance(call_id, bool) or str(call_id) == "":
        raise MessageError(
            f"skill cancel: field 'cancel' = {call_id!r} must be the id of the call to end (or '*': whichever runs)"
        )
    if not isinstance(why, str):
        raise MessageError(f"skill cancel {call_id}: field 'why' = {why!r} must be a string")
    return SkillCancel(str(call_id), why)


@dataclass(frozen=True)
class SkillStatus:
    """How a :class:`SkillCall` ended: an :class:`~hierarchy.domain.Outcome` value, the skill steps it took, the
    distance to the goal at the end (m; NaN when it never started) and, for ``aborted``, why."""

    id: str
    outcome: str
    steps: int = 0
    distance: float = math.nan
    why: str = ""

    def __post_init__(self) -> None:
        if self.outcome not in set(Outcome):
            raise MessageError(
                f"skill status {self.id}: outcome {self.outcome!r} is not one of {', '.join(o.value for o in Outcome)}"
            )

    def to_json(self) -> str:
        data = asdict(self)
        data["distance"] = None if math.isnan(self.distance) else self.distance  # JSON has no NaN
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> SkillStatus:
        data = _load(text, "skill status")
        call_id = data.get("id")
        if not isinstance(call_id, (str, int)) or isinstance(call_id, bool):
            raise MessageError(f"skill status: field 'id' = {call_id!r} must be a string or an integer")
        what = f"skill status {call_id}"
        outcome = _text(data, "outcome", what)
        steps = data.get("steps", 0)
        if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
            raise MessageError(f"{what}: field 'steps' = {steps!r} must be an integer >= 0")
        distance = math.nan if data.get("distance") is None else _number(data, "distance", what)
        why = data.get("why", "")
        if not isinstance(why, str):
            raise MessageError(f"{what}: field 'why' = {why!r} must be a string")
        return cls(str(call_id), outcome, steps, distance, why)  # type: ignore[arg-type]

    @property
    def result(self) -> Outcome:
        return Outcome(self.outcome)
