"""Task suites for hierarchical evaluation (configs/task/*.yaml): episodes of ordered goals in a map.

Each episode names a start (a named start pose of the map or [x, y, yaw]), the goals to visit in
order (landmark or room names, or [x, y]), optionally rooms to ``avoid``, the instruction text and a
``category`` (language suites: single, multi, alias, indirect, avoid). Success is checked on the
executed trajectory: every goal visited within ``goal_tolerance``, in order
(:func:`hrl.executor.visited_in_order`), and no avoided room ever entered.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from llm_planner.base import Task

TASKS_DIR = Path(__file__).resolve().parents[1] / "configs" / "task"


@dataclass
class TaskEpisodeConfig:
    start: Any = None
    goals: list[Any] = field(default_factory=list)
    text: str = ""
    avoid: list[str] = field(default_factory=list)
    category: str = ""


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

    def tasks(self) -> list[tuple[Any, Task]]:
        """(start, Task) per episode, validated against the map."""
        from sim.world import load_world

        if not self.episodes:
            raise ValueError(f"task suite {self.name!r} has no episodes")
        if self.goal_tolerance <= 0 or self.max_episode_steps < 1:
            raise ValueError(f"task suite {self.name!r}: goal_tolerance must be > 0 and max_episode_steps >= 1")
        if not (isinstance(self.start_jitter, (int, float)) and 0 <= self.start_jitter < 5):
            raise ValueError(f"task suite {self.name!r}: start_jitter must be in [0, 5) m, got {self.start_jitter!r}")
        world = load_world(self.map)
        out = []
        for i, ep in enumerate(self.episodes):
            goals = tuple(g if isinstance(g, str) else (float(g[0]), float(g[1])) for g in ep.goals)
            if not goals:
                raise ValueError(f"task suite {self.name!r}: episodes[{i}] has no goals")
            where = f"task suite {self.name!r}: episodes[{i}]"
            for g in goals:
                if isinstance(g, str):
                    world.resolve(g)  # raises with the known names
            start = ep.start if isinstance(ep.start, str) else tuple(float(v) for v in ep.start)
            avoid = tuple(ep.avoid)
            for room in avoid:
                world.room(room)  # raises with the known rooms
                start_xy = (world.starts[start].x, world.starts[start].y) if isinstance(start, str) else start[:2]
                if _room_of(world, start_xy) == room:
                    raise ValueError(f"{where} starts in {room!r}, a room it must avoid")
                for g in goals:
                    if _room_of(world, g) == room:
                        raise ValueError(f"{where}: goal {g!r} lies in {room!r}, a room it must avoid")
            out.append((start, Task(ep.text or "visit " + " then ".join(map(str, goals)), goals, avoid)))
        return out


def _room_of(world: Any, place: Any) -> str | None:
    from llm_planner.planners.common import goal_point

    xy = place if isinstance(place, tuple) else goal_point(place, world)
    room = world.room_at(xy)
    return room.name if room is not None else None


def load_suite(name_or_path: str | Path) -> TaskSuiteConfig:
    import yaml

    path = Path(name_or_path)
    if not path.suffix:
        path = TASKS_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in TASKS_DIR.glob("*.yaml"))
        raise ValueError(f"unknown task suite {str(name_or_path)!r}; known: {', '.join(known)}")
    return suite_from_dict(yaml.safe_load(path.read_text()), source=str(path))


def suite_from_dict(data: dict[str, Any], source: str = "<task suite>") -> TaskSuiteConfig:
    data = dict(data)
    try:
        episodes = [TaskEpisodeConfig(**e) for e in data.pop("episodes", [])]
        return TaskSuiteConfig(**data, episodes=episodes)
    except TypeError as err:
        raise ValueError(f"{source}: {err}") from None


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
