"""What the model answers, and how an answer becomes a plan.

Two answer shapes, each a JSON schema whose names are the scene's own (enums), so constrained decoding
can only produce names that exist:

* ``llm_goals``: ``{"targets": [...], "avoid": [...]}``: the places the instruction asks for, in order,
  and the rooms it forbids. The ``graph`` planner routes between them.
* ``llm_goals`` with ``reading=tagged``: ``{"mentions": [{"place": ..., "as": ...}, ...]}``: every place the
  instruction mentions, in the order it mentions them, tagged with what it is to the task (:data:`TAGS`).
  A fixed rule (:func:`tagged_goals`) turns the tags into the ``llm_goals`` answer: the targets are the
  ``first`` / ``then`` / ``last`` mentions, stably sorted in that order; the ``avoid`` mentions are the rooms
  to avoid; a ``not`` mention (a place a correction takes back) is dropped. So "the study first, the living
  room last, the fridge in between" is three tags in the sentence's order, not an order the model must work
  out while it writes.
* ``llm_route``: ``{"route": [...]}``: the whole route, as door, room and landmark names from the
  robot's room onwards. It is checked against the map (each door must leave the room the route is
  in, each landmark must be in it) and every door becomes approach points on either side.

Answers are untrusted data: they are parsed with pydantic, names are looked up in the map, and nothing
from them is ever executed, imported or used as a path.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from llm_planner.plan import LandmarkTarget, Plan, PlanError, RoomTarget, Subgoal
from llm_planner.planners.common import MAX_SPACING, densify, door_approach, step_budget, waypoint
from sim.navigation.world import Landmark, World

MAX_TARGETS = 4
MAX_ROUTE = 14
#: The tags of the tagged reading, and the order the target tags put their places in (the others are no target).
TAGS = ("first", "then", "last", "avoid", "not")
TAG_RANK = {"first": 0, "then": 1, "last": 2}
#: Mentions in a tagged answer: the targets, two rooms to avoid and one place taken back.
MAX_MENTIONS = MAX_TARGETS + 3


class GoalsAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    targets: list[str] = Field(min_length=1, max_length=MAX_TARGETS)
    avoid: list[str] = Field(default_factory=list, max_length=2)

    def key(self) -> tuple[tuple[str, ...], frozenset[str]]:
        """What two answers must share to count as the same vote."""
        return (tuple(self.targets), frozenset(self.avoid))


class RouteAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    route: list[str] = Field(min_length=1, max_length=MAX_ROUTE)

    def key(self) -> tuple[str, ...]:
        return tuple(self.route)


class Mention(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    place: str
    as_: str = Field(alias="as")


class TaggedAnswer(BaseModel):
    """``reading=tagged``: the places in the order the instruction mentions them, each with its tag."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    mentions: list[Mention] = Field(min_length=1, max_length=MAX_MENTIONS)


ANSWERS: dict[str, type[BaseModel]] = {"llm_goals": GoalsAnswer, "llm_route": RouteAnswer}


def _validated(model: type[BaseModel], text: str) -> Any:
    """``text`` parsed as ``model``; PlanError naming the first problems when it is not."""
    try:
        return model.model_validate_json(text)
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors()[:3])
        raise PlanError(f"the answer is not valid JSON of the required shape ({problems})") from None


def tagged_schema(world: World) -> dict[str, Any]:
    """The JSON schema of a tagged answer, the map's rooms and landmarks and :data:`TAGS` as enums."""
    places = [lm.name for lm in world.landmarks] + [r.name for r in world.rooms]
    mention = {
        "type": "object",
        "properties": {"place": {"type": "string", "enum": places}, "as": {"type": "string", "enum": list(TAGS)}},
        "required": ["place", "as"],
        "additionalProperties": False,
    }
    items = {"type": "array", "items": mention, "minItems": 1, "maxItems": MAX_MENTIONS}
    props = {"mentions": items}
    return {"type": "object", "properties": props, "required": ["mentions"], "additionalProperties": False}


def tagged_goals(mentions: list[tuple[str, str]]) -> dict[str, list[str]]:
    """The ``llm_goals`` answer of tagged mentions ``(place, tag)`` in the instruction's order: targets are the
    ``first`` / ``then`` / ``last`` mentions stably sorted by tag, ``avoid`` the ``avoid`` ones; ``not`` dropped.
    PlanError on an unknown tag."""
    for place, tag in mentions:
        if tag not in TAGS:
            raise PlanError(f"mention {place!r} is tagged {tag!r}; tags: {', '.join(TAGS)}")
    ranked = sorted(((TAG_RANK[t], i, p) for i, (p, t) in enumerate(mentions) if t in TAG_RANK))
    return {"targets": [p for _, _, p in ranked], "avoid": [p for p, t in mentions if t == "avoid"]}


def parse_tagged(text: str, world: World) -> GoalsAnswer:
    """Parse a tagged answer (PlanError on anything wrong) into the canonical ``llm_goals`` answer."""
    answer = _validated(TaggedAnswer, text)
    goals = tagged_goals([(m.place, m.as_) for m in answer.mentions])
    if not goals["targets"]:
        raise PlanError("the answer tags no place first, then or last: it names nowhere to go")
    if len(goals["targets"]) > MAX_TARGETS or len(goals["avoid"]) > 2:
        raise PlanError(
            f"the answer has {len(goals['targets'])} targets and {len(goals['avoid'])} rooms to avoid; "
            f"at most {MAX_TARGETS} and 2"
        )
    return parse_answer("llm_goals", json.dumps(goals), world)


def answer_schema(mode: str, world: World) -> dict[str, Any]:
    """The JSON schema of ``mode``'s answer with the scene's names as enums (keys in a fixed order)."""
    rooms = [r.name for r in world.rooms]
    landmarks = [lm.name for lm in world.landmarks]
    doors = [d.name for d in world.doors]
    if mode == "llm_goals":
        props = {
            "targets": _names(landmarks + rooms, 1, MAX_TARGETS),
            "avoid": _names(rooms, 0, 2),
        }
    elif mode == "llm_route":
        props = {"route": _names(doors + rooms + landmarks, 1, MAX_ROUTE)}
    else:
        raise ValueError(f"unknown LLM planner mode {mode!r}; modes: {', '.join(ANSWERS)}")
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def _names(enum: list[str], lo: int, hi: int) -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string", "enum": enum}, "minItems": lo, "maxItems": hi}


def parse_answer(mode: str, text: str, world: World) -> Any:
    """Parse and validate an answer (PlanError on anything wrong), with names made canonical."""
    if mode not in ANSWERS:
        raise ValueError(f"unknown LLM planner mode {mode!r}; modes: {', '.join(ANSWERS)}")
    answer = _validated(ANSWERS[mode], text)
    if isinstance(answer, GoalsAnswer):
        targets = [_canonical(world, n, kinds=("landmark", "room")) for n in answer.targets]
        # a place named twice in a row is one visit (small models repeat the last name until maxItems)
        targets = [t for i, t in enumerate(targets) if i == 0 or t != targets[i - 1]]
        avoid = [_canonical(world, n, kinds=("room",)) for n in answer.avoid]
        for t in targets:
            room = _room_of(world, t)
            if room in avoid:
                raise PlanError(f"target {t!r} is in room {room!r}, which the answer also says to avoid")
        return GoalsAnswer(targets=targets, avoid=list(dict.fromkeys(avoid)))
    return RouteAnswer(route=[_canonical(world, n, kinds=("door", "room", "landmark")) for n in answer.route])


def _canonical(world: World, name: str, kinds: tuple[str, ...]) -> str:
    key = name.strip().lower()
    if "door" in kinds:
        for d in world.doors:
            if d.name.lower() == key:
                return d.name
    try:
        place = world.resolve(key)
    except ValueError:
        place = None
    kind = "landmark" if isinstance(place, Landmark) else "room"
    if place is None or kind not in kinds:
        known = _known(world, kinds)
        raise PlanError(f"{name[:60]!r} is not a {' or '.join(kinds)} of map {world.name!r}; known: {known}")
    return place.name


def _known(world: World, kinds: tuple[str, ...]) -> str:
    names = {
        "door": [d.name for d in world.doors],
        "room": [r.name for r in world.rooms],
        "landmark": [lm.name for lm in world.landmarks],
    }
    return ", ".join(n for k in kinds for n in names[k])


def _room_of(world: World, name: str) -> str:
    place = world.resolve(name)
    return place.room if isinstance(place, Landmark) else place.name


def route_plan(answer: RouteAnswer, world: World, start: tuple[float, float], spacing: float = MAX_SPACING) -> Plan:
    """Check a route against the map from ``start`` and expand it into a plan; PlanError says what is wrong
    (the planner re-asks the model with that message)."""
    from llm_planner.planners.graph import room_name

    room = room_name(world, start)
    position = start
    subgoals: list[Subgoal] = []
    doors = {d.name: d for d in world.doors}
    for i, name in enumerate(answer.route):
        where = f"route step {i + 1} ({name})"
        if name in doors:
            door = doors[name]
            if room not in door.rooms:
                exits = ", ".join(d.name for d in world.doors if room in d.rooms)
                raise PlanError(f"{where}: that door does not leave {room!r}; the doors of {room!r} are: {exits}")
            before, after = door_approach(door, world, room)
            points = [before, door.waypoint, after]
            room = door.rooms[1] if door.rooms[0] == room else door.rooms[0]
            for p, _ in densify(points, position, spacing):
                subgoals.append(waypoint(p, spacing))
            position = after
            continue
        place = world.resolve(name)
        if isinstance(place, Landmark):
            if place.room != room:
                raise PlanError(f"{where}: {name!r} is in {place.room!r} but the route is in {room!r} at that step")
            target: Any = LandmarkTarget(name=name)
            point = place.position
        else:
            if place.name != room:
                exits = ", ".join(d.name for d in world.doors if room in d.rooms)
                raise PlanError(f"{where}: the route is in {room!r}; reach {name!r} through a door first ({exits})")
            target = RoomTarget(name=name)
            point = place.center
        for p, inserted in densify([point], position, spacing):
            if inserted:
                subgoals.append(waypoint(p, spacing))
        subgoals.append(Subgoal(target=target, step_budget=step_budget(min(spacing, math.dist(position, point)))))
        position = point
    return Plan(subgoals=subgoals, rationale="llm_route: " + " > ".join(answer.route))


def route_rooms_and_targets(
    answer: RouteAnswer, world: World, start: tuple[float, float]
) -> tuple[list[str], list[str]] | None:
    """(rooms entered, named targets visited) along a valid route, or None when the route is invalid."""
    from llm_planner.planners.graph import room_name

    try:
        route_plan(answer, world, start)
    except PlanError:
        return None
    room = room_name(world, start)
    rooms, targets = [room], []
    doors = {d.name: d for d in world.doors}
    for name in answer.route:
        if name in doors:
            d = doors[name]
            room = d.rooms[1] if d.rooms[0] == room else d.rooms[0]
            rooms.append(room)
        else:
            targets.append(name)
    return rooms, targets


# -- reading="spans": the model copies phrases of the instruction; the map grounds them --------------------
MAX_PHRASE_WORDS = 6
_PHRASE_WORD = re.compile(r"[a-z0-9']+")
_ARTICLES = ("the ", "a ", "an ", "my ", "your ", "our ")


def instruction_words(text: str) -> list[str]:
    return _PHRASE_WORD.findall(text.lower())


def phrases(text: str, max_words: int = MAX_PHRASE_WORDS) -> list[str]:
    """Every run of up to ``max_words`` consecutive words of the instruction, in order of appearance."""
    w = instruction_words(text)
    runs = (" ".join(w[i : i + n]) for i in range(len(w)) for n in range(1, max_words + 1) if i + n <= len(w))
    return list(dict.fromkeys(runs))


def span_schema(text: str) -> dict[str, Any]:
    """Targets and rooms to avoid as phrases copied from the instruction (an enum of its word n-grams)."""
    enum = phrases(text)
    props = {"targets": _names(enum, 1, MAX_TARGETS), "avoid": _names(enum, 0, 2)}
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def parse_spans(text: str, instruction: str) -> GoalsAnswer:
    """The model's phrases (validated to be phrases of the instruction), not yet grounded."""
    answer = _validated(GoalsAnswer, text)
    allowed = set(phrases(instruction))
    for p in (*answer.targets, *answer.avoid):
        if p not in allowed:
            raise PlanError(f"{p[:60]!r} is not a phrase of the instruction; copy the words of the instruction")
    return answer


def _labels(world: World) -> dict[str, tuple[str, str]]:
    """Every way the map names a place (name, name with spaces, aliases; lower case) -> (kind, name).
    Built once per map: the planner looks phrases up many times per instruction."""
    cached = world.__dict__.get("_phrase_labels")
    if cached is None:
        cached = {}
        for kind, places in (("landmark", world.landmarks), ("room", world.rooms)):
            for place in places:
                for label in (place.name, place.name.replace("_", " "), *place.aliases):
                    cached[label.lower()] = (kind, place.name)
        world.__dict__["_phrase_labels"] = cached
    return cached


def match_phrase(phrase: str, world: World, kinds: tuple[str, ...] = ("landmark", "room")) -> str | None:
    """The scene name a phrase names outright (a name or alias in it, the longest one), or None."""
    padded = f" {phrase.lower()} "
    found = [
        (len(label), name) for label, (kind, name) in _labels(world).items() if kind in kinds and f" {label} " in padded
    ]
    if not found:
        return None
    best = max(n for n, _ in found)
    names = {name for n, name in found if n == best}
    return names.pop() if len(names) == 1 else None


def _is_label(phrase: str, world: World) -> bool:
    return phrase in _labels(world)


def strip_article(phrase: str) -> str:
    for a in _ARTICLES:
        if phrase.startswith(a):
            return phrase[len(a) :]
    return phrase


def example_phrases(text: str, names: tuple[str, ...], world: World, kinds: tuple[str, ...]) -> list[str] | None:
    """The shortest phrase of ``text`` that names each of ``names`` outright (None if one has none)."""
    out = []
    for name in names:
        hits = [p for p in phrases(text) if match_phrase(p, world, kinds) == name]
        if not hits:
            return None
        # the whole name as written ("the charging dock", not "dock"): longest without leading/trailing filler
        exact = [p for p in hits if match_phrase(p, world, kinds) and _is_label(strip_article(p), world)]
        out.append(max(exact or hits, key=lambda p: (len(p.split()) if exact else -len(p.split()), -text.find(p))))
    return out


def place_schema(world: World, kinds: tuple[str, ...] = ("landmark", "room")) -> dict[str, Any]:
    enum = [lm.name for lm in world.landmarks] * ("landmark" in kinds) + [r.name for r in world.rooms] * (
        "room" in kinds
    )
    return {
        "type": "object",
        "properties": {"place": {"type": "string", "enum": enum}},
        "required": ["place"],
        "additionalProperties": False,
    }


def next_schema(text: str, after: int, avoid: list[str]) -> dict[str, Any] | None:
    """The follow-up's choices: phrases starting after word ``after`` of the instruction (never a room to
    avoid), or "none"; None when nothing follows."""
    tail = " ".join(instruction_words(text)[after:])
    banned = set(avoid)
    enum = [p for p in phrases(tail) if not any(p in b or b in p for b in banned)]
    if not enum:
        return None
    return {
        "type": "object",
        "properties": {"next": {"type": "string", "enum": ["none", *enum]}},
        "required": ["next"],
        "additionalProperties": False,
    }


def phrase_end(text: str, phrase: str, after: int = 0) -> int:
    """The index of the word after the first occurrence of ``phrase`` at or after word ``after`` (or after)."""
    w, p = instruction_words(text), phrase.split()
    for i in range(after, len(w) - len(p) + 1):
        if w[i : i + len(p)] == p:
            return i + len(p)
    return after
