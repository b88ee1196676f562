"""Tabletop task suites (``configs/task/tabletop_*.yaml``, ``domain: tabletop``): instructions and their goals.

A suite names a scene (sim/scenes/) and its episodes. Each episode has an instruction (``text``), a
``category`` and its goals, as ``object on target`` in the order they are to be achieved, written either out::

    goals: [red_block on blue_block, yellow_block on red_block]

or with a shorthand: ``stack: [bottom, ..., top]`` (each on the one before), ``sort: by_color`` (every block
into the place of its colour), ``clear: <place>`` (every object into that place). Every seed is a new random
layout of the scene (``env.reset(seed=...)``), so seeds are distinct episodes. Errors name the file and field.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hrl.tasks import TASKS_DIR, suite_path
from llm_planner.tabletop import Relation, TabletopTask
from robots._fields import ConfigFileError, Fields, did_you_mean, load_yaml_mapping

SUITE_KEYS = ("name", "domain", "scene", "description", "max_episode_steps", "episodes")
EPISODE_KEYS = ("text", "category", "goals", "stack", "sort", "clear")
GOAL_FORMS = ("goals", "stack", "sort", "clear")


@dataclass(frozen=True)
class TabletopSuite:
    name: str
    scene: str
    description: str
    max_episode_steps: int
    tasks: tuple[TabletopTask, ...]
    source: str


def suite_domain(name_or_path: str | Path) -> str:
    """The ``domain`` a suite file declares (``navigation`` when it declares none)."""
    data = load_yaml_mapping(suite_path(name_or_path))
    return str(data.get("domain", "navigation"))


def tabletop_suites() -> list[str]:
    """The names of the shipped tabletop suites."""
    return sorted(p.stem for p in TASKS_DIR.glob("*.yaml") if suite_domain(p) == "tabletop")


def load_tabletop_suite(name_or_path: str | Path) -> TabletopSuite:
    """A shipped tabletop suite by name or a suite YAML by path; ConfigFileError names file and field."""
    path = suite_path(name_or_path)
    return tabletop_suite_from_dict(load_yaml_mapping(path), source=str(path), default_name=path.stem)


def tabletop_suite_from_dict(data: Any, source: str = "tabletop suite", default_name: str = "") -> TabletopSuite:
    """A suite from a mapping (a YAML document, a Hydra ``task`` config), checked against its scene."""
    from sim.tabletop.scene import load_scene

    root = Fields(source, "", data)
    root.reject_unknown(SUITE_KEYS)
    domain = root.text("domain", "tabletop")
    if domain != "tabletop":
        raise root.error("domain", f"must be 'tabletop' for a tabletop suite, got {domain!r}")
    try:
        scene = load_scene(root.text("scene"))
    except ConfigFileError:
        raise
    except (ValueError, OSError) as err:
        raise root.error("scene", str(err)) from None
    tasks = tuple(_task(Fields(source, f"episodes[{i}]", e), scene) for i, e in enumerate(root.items("episodes")))
    if not tasks:
        raise root.error("episodes", "the suite has no episodes")
    return TabletopSuite(
        name=root.text("name", default_name) if default_name else root.text("name"),
        scene=scene.name,
        description=root.string("description"),
        max_episode_steps=root.integer("max_episode_steps", 1500, minimum=1),
        tasks=tasks,
        source=source,
    )


def _task(f: Fields, scene: Any) -> TabletopTask:
    f.reject_unknown(EPISODE_KEYS)
    forms = [k for k in GOAL_FORMS if f.has(k)]
    if len(forms) != 1:
        raise f.error(None, f"give the goals in exactly one of {', '.join(GOAL_FORMS)}, got {forms or 'none'}")
    objects = [o.name for o in scene.objects]
    places = [p.name for p in scene.places]

    def name(key: str, value: Any, allowed: list[str], what: str) -> str:
        if not isinstance(value, str) or value not in allowed:
            hint = did_you_mean(str(value), allowed) if isinstance(value, str) else ""
            raise f.error(key, f"{value!r} is not {what} of scene {scene.name!r}{hint}; it has {', '.join(allowed)}")
        return value

    form = forms[0]
    if form == "goals":
        goals = []
        for j, g in enumerate(f.items("goals")):
            parts = g.split(" on ") if isinstance(g, str) else []
            if len(parts) != 2:
                raise f.error(f"goals[{j}]", f"must read '<object> on <object or place>', got {g!r}")
            goals.append(
                Relation(
                    name(f"goals[{j}]", parts[0].strip(), objects, "an object"),
                    name(f"goals[{j}]", parts[1].strip(), objects + places, "an object or place"),
                )
            )
        if not goals:
            raise f.error("goals", "must list at least one '<object> on <object or place>'")
    elif form == "stack":
        tower = [name(f"stack[{j}]", o, objects, "an object") for j, o in enumerate(f.items("stack"))]
        if len(tower) < 2 or len(set(tower)) != len(tower):
            raise f.error("stack", f"must list two or more distinct objects, bottom first, got {tower}")
        goals = [Relation(top, below) for below, top in itertools.pairwise(tower)]
    elif form == "sort":
        if f.raw("sort") != "by_color":
            raise f.error("sort", f"the only sorting is 'by_color', got {f.raw('sort')!r}")
        by_color = {p.color: p.name for p in scene.places}
        goals = []
        for o in scene.objects:
            if o.color not in by_color:
                raise f.error("sort", f"object {o.name!r} is {o.color}, and no place of scene {scene.name!r} is")
            goals.append(Relation(o.name, by_color[o.color]))
    else:
        place = name("clear", f.raw("clear"), places, "a place")
        goals = [Relation(o, place) for o in objects]
    moved = [g.object for g in goals]
    if len(set(moved)) != len(moved):
        raise f.error(form, f"an object can be put in one place only, got {[g.text() for g in goals]}")
    for g in goals:
        if g.object == g.on:
            raise f.error(form, f"{g.object!r} cannot go on itself")
    text = f.string("text") or "; ".join(g.text() for g in goals)
    return TabletopTask(text, tuple(goals), f.string("category") or form)
