"""Task suites for hierarchical evaluation (configs/task/*.yaml): episodes of ordered goals in a map.

Each episode names a start (a named start pose of the map or [x, y, yaw]), the goals to visit in
order (landmark or room names, or [x, y]), optionally rooms to ``avoid``, the instruction text and a
``category`` (language suites: single, multi, alias, indirect, avoid). Success is checked on the
executed trajectory: every goal visited within ``goal_tolerance``, in order
(:func:`hierarchy.navigation.visited_in_order`), and no avoided room ever entered.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from llm_planner.base import Task
from robots._fields import ConfigFileError, Fields, as_vector, load_yaml_mapping

TASKS_DIR = Path(__file__).resolve().parent / "configs" / "task"  # inside the package (hrl.cli.CONFIG_DIR)


@dataclass
class TaskEpisodeConfig:
    start: Any = None
    goals: list[Any] = field(default_factory=list)
    text: str = ""
    avoid: list[str] = field(default_factory=list)
    category: str = ""


#: Keys of a suite and of an episode; anything else is a typo, refused by name.
SUITE_KEYS = (
    "name",
    "map",
    "description",
    "goal_tolerance",
    "max_episode_steps",
    "min_doors_apart",
    "start_jitter",
    "episodes",
)
EPISODE_KEYS = ("start", "goals", "text", "avoid", "category")
#: start_jitter is a nudge within a room, not a relocation; a goal tolerance beyond a subgoal's (5 m) means nothing.
MAX_START_JITTER = 5.0
MAX_GOAL_TOLERANCE = 5.0


@dataclass
class TaskSuiteConfig:
    name: str = ""
    map: str = "apartment"
    description: str = ""
    goal_tolerance: float = 0.3
    max_episode_steps: int = 3000
    min_doors_apart: int | None = None
    #: Each seed starts every task from the given pose moved by up to this many metres (in the same room,
    #: in free space) with a random heading, so seeds are different episodes. 0: every seed identical.
    start_jitter: float = 0.3
    episodes: list[TaskEpisodeConfig] = field(default_factory=list)
    #: Where the suite came from (its file, or "task suite <name>"), for error messages; not a YAML key.
    source: str = ""

    def tasks(self) -> list[tuple[Any, Task]]:
        """(start, Task) per episode, validated against the map; errors name the source and the field."""
        from sim.navigation.world import load_world

        source = self.source or f"task suite {self.name!r}"
        if not self.episodes:
            raise ConfigFileError(source, "episodes", "the suite has no episodes")
        try:
            world = load_world(self.map)
        except ConfigFileError:
            raise  # the map file itself is broken: its own file and field
        except (ValueError, OSError) as err:
            raise ConfigFileError(source, "map", str(err)) from None
        out = []
        for i, ep in enumerate(self.episodes):
            f = Fields(source, f"episodes[{i}]", vars(ep))
            goals = tuple(g if isinstance(g, str) else (float(g[0]), float(g[1])) for g in ep.goals)
            for j, g in enumerate(goals):
                _check_place(world, g, f, f"goals[{j}]")
            start = ep.start if isinstance(ep.start, str) else tuple(float(v) for v in ep.start)
            if isinstance(start, str) and start not in world.starts:
                known = ", ".join(world.starts)
                raise f.error("start", f"{start!r} is not a named start of map {world.name!r} ({known}) or [x, y, yaw]")
            start_xy = (world.starts[start].x, world.starts[start].y) if isinstance(start, str) else start[:2]
            _check_place(world, start_xy, f, "start")
            avoid = tuple(ep.avoid)
            for k, room in enumerate(avoid):
                try:
                    world.room(room)
                except ValueError as err:
                    raise f.error(f"avoid[{k}]", str(err)) from None
                if _room_of(world, start_xy) == room:
                    raise f.error("start", f"starts in {room!r}, a room it must avoid")
                for g in goals:
                    if _room_of(world, g) == room:
                        raise f.error("goals", f"goal {g!r} lies in {room!r}, a room it must avoid")
            out.append((start, Task(ep.text or "visit " + " then ".join(map(str, goals)), goals, avoid)))
        return out


def _check_place(world: Any, place: Any, f: Fields, key: str) -> None:
    """A goal or start must exist in the map: a known name, or a point inside the map and not in a wall."""
    if isinstance(place, str):
        try:
            world.resolve(place)
        except ValueError as err:
            raise f.error(key, str(err)) from None
    elif not world.in_bounds(place) or world.in_wall(place):
        raise f.error(key, f"{list(place)} lies outside map {world.name!r} or inside a wall")


def _room_of(world: Any, place: Any) -> str | None:
    from llm_planner.planners.common import goal_point

    xy = place if isinstance(place, tuple) else goal_point(place, world)
    room = world.room_at(xy)
    return room.name if room is not None else None


def load_suite(name_or_path: str | Path) -> TaskSuiteConfig:
    """A shipped suite by name (``"apartment_long"``) or a suite YAML by path; ConfigFileError (a
    ValueError) names the file and the field of anything malformed."""
    path = suite_path(name_or_path)
    return suite_from_dict(load_yaml_mapping(path), source=str(path), default_name=path.stem)


def suite_path(name_or_path: str | Path) -> Path:
    """The file of a shipped suite by name (any domain) or of a suite YAML by path; ValueError lists the known."""
    path = Path(name_or_path)
    if not path.suffix:
        path = TASKS_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in TASKS_DIR.glob("*.yaml"))
        raise ValueError(f"unknown task suite {str(name_or_path)!r}; known: {', '.join(known)}")
    return path


def suite_from_dict(data: Any, source: str | None = None, default_name: str = "") -> TaskSuiteConfig:
    """A suite from a mapping (a YAML document, a Hydra ``task`` config), its types checked; the map-dependent
    checks run in :meth:`TaskSuiteConfig.tasks`. ``source`` (default ``task suite <name>``) starts every error.

    Raises:
        ConfigFileError: (a ValueError) ``<source>: <field>: <problem>`` for a wrong type, a missing or
            unknown key, a non-finite or out-of-range number.
    """
    if source is None:
        name = data.get("name") if isinstance(data, dict) else None
        source = f"task suite {name!r}" if isinstance(name, str) else "task suite"
    root = Fields(source, "", data)
    root.reject_unknown(SUITE_KEYS)
    episodes = []
    for i, item in enumerate(root.items("episodes")):
        episodes.append(_episode(Fields(source, f"episodes[{i}]", item)))
    if not episodes:
        raise root.error("episodes", "the suite has no episodes")
    return TaskSuiteConfig(
        name=root.text("name", default_name) if default_name else root.text("name"),
        map=root.text("map", "apartment"),
        description=root.string("description"),
        goal_tolerance=root.number("goal_tolerance", 0.3, positive=True, maximum=MAX_GOAL_TOLERANCE),
        max_episode_steps=root.integer("max_episode_steps", 3000, minimum=1),
        min_doors_apart=root.integer("min_doors_apart", minimum=0) if root.has("min_doors_apart") else None,
        start_jitter=root.number("start_jitter", 0.3, non_negative=True, maximum=MAX_START_JITTER),
        episodes=episodes,
        source=source,
    )


def _episode(f: Fields) -> TaskEpisodeConfig:
    f.reject_unknown(EPISODE_KEYS)
    start = f.raw("start")
    if not isinstance(start, str):
        start = list(f.vector("start", 3))
    elif not start.strip():
        raise f.error("start", "must be a named start of the map or [x, y, yaw], got ''")
    goals = f.items("goals")
    if not goals:
        raise f.error("goals", "an episode needs at least one goal (a place name or [x, y])")
    checked: list[Any] = []
    for j, g in enumerate(goals):
        if isinstance(g, str) and g.strip():
            checked.append(g)
        else:
            where = f"goals[{j}]"
            checked.append(
                list(as_vector(g, 2, lambda p, k=where: f.error(k, f"must be a place name or [x, y] ({p})")))
            )
    avoid = list(f.string_list("avoid"))
    return TaskEpisodeConfig(start, checked, text=f.string("text"), avoid=avoid, category=f.string("category"))


def doors_between(world: Any, a: tuple[float, float], b: tuple[float, float]) -> int:
    """Number of doors on the shortest room-graph route between the rooms of two points."""
    graph = world.graph()
    ra, rb = world.room_at(a), world.room_at(b)
    if ra is None or rb is None:
        raise ValueError(f"point {a if ra is None else b} is in no room")
    path = nx.shortest_path(graph, ra.name, rb.name)
    return sum(graph.nodes[n]["kind"] == "door" for n in path)


def seeded_start(env: Any, start: Any, seed: int, episode: int, jitter: float) -> Any:
    """The start of ``episode`` for ``seed``: ``start`` moved by up to ``jitter`` m within its room and free
    space, with a random heading (drawn from ``(seed, episode)``); ``start`` itself when ``jitter`` is 0."""

    if jitter <= 0:
        return start
    u = env.unwrapped
    pose = u.task.check_start(start)
    rng = np.random.default_rng([seed, episode])
    room = u.world.room_at((pose.x, pose.y))
    yaw = float(rng.uniform(-np.pi, np.pi))
    for _ in range(50):
        r, a = jitter * math.sqrt(rng.random()), rng.uniform(-np.pi, np.pi)
        xy = (pose.x + r * math.cos(a), pose.y + r * math.sin(a))
        if u.world.is_free(xy, clearance=u.task.start_clearance) and u.world.room_at(xy) == room:
            return (xy[0], xy[1], yaw)
    return (pose.x, pose.y, yaw)  # no free spot nearby: the given position, the random heading
