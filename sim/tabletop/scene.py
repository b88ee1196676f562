"""Tabletop scenes: a table, named objects and named places, loaded from YAML and checked.

Frames are panda-gym's, so results compare: world z = 0 is the table top, the robot base stands at
``robot.base`` (default [-0.6, 0, 0]), objects are placed at random in ``workspace`` and table goals are
drawn there. The format is documented in docs/tabletop.md; every validation error names file and field.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from robots._fields import Fields, as_vector, did_you_mean, load_yaml_mapping, resolve_yaml

SCENES_DIR = Path(__file__).resolve().parent.parent / "scenes"

Vec2 = tuple[float, float]
Vec3 = tuple[float, float, float]
RGBA = tuple[float, float, float, float]

#: Colours a scene (and an instruction: "the red block") may name.
PALETTE: dict[str, RGBA] = {
    "red": (0.85, 0.1, 0.1, 1.0), "green": (0.1, 0.7, 0.2, 1.0), "blue": (0.1, 0.3, 0.9, 1.0),
    "yellow": (0.95, 0.85, 0.1, 1.0), "orange": (1.0, 0.5, 0.0, 1.0), "purple": (0.55, 0.2, 0.75, 1.0),
    "white": (0.95, 0.95, 0.95, 1.0), "black": (0.1, 0.1, 0.1, 1.0), "grey": (0.5, 0.5, 0.5, 1.0),
    "cyan": (0.1, 0.8, 0.85, 1.0),
}  # fmt: skip
#: Upper bounds (SI units): beyond them a value is a typo (millimetres, grams), refused by name.
MAXIMA = {"object_size": 0.3, "place_size": 1.0, "mass": 20.0, "friction": 10.0, "wall_height": 0.3,
          "table_size": 5.0, "table_height": 2.0, "coordinate": 10.0, "min_gap": 0.1, "reach": 2.0}  # fmt: skip
#: Default density (kg/m^3) when an object gives no mass: a wooden toy block (a 4 cm cube weighs 45 g).
DEFAULT_DENSITY = 700.0
PLACE_KINDS = ("bin", "plate", "zone")
#: A bin is a floor and four walls of this thickness inside its footprint; a plate is a box this thick; a zone is a
#: flat mark. The physics backends build exactly these.
BIN_WALL_THICKNESS = 0.005
PLATE_THICKNESS = 0.01
#: Horizontal distance (m) places and the workspace keep from the robot's base (the Panda's link0 is ~11 cm wide).
BASE_CLEARANCE = 0.15
_PLACE_COLORS = {"bin": "grey", "plate": "white", "zone": "yellow"}
#: Layout sampling: whole-layout restarts, and candidate positions drawn per object per restart.
_LAYOUT_RESTARTS = 50
_CANDIDATES = 64


@dataclass(frozen=True)
class Table:
    """A box whose top is at z = 0: ``center`` and ``size`` (x length, y width) of the top, ``height`` below."""

    center: Vec2
    size: Vec2
    height: float

    @property
    def low(self) -> Vec2:
        return (self.center[0] - self.size[0] / 2, self.center[1] - self.size[1] / 2)

    @property
    def high(self) -> Vec2:
        return (self.center[0] + self.size[0] / 2, self.center[1] + self.size[1] / 2)

    def covers(self, lo: Vec2, hi: Vec2) -> bool:
        """Whether the rectangle [lo, hi] lies on the table top."""
        return all(self.low[i] - 1e-9 <= lo[i] <= hi[i] <= self.high[i] + 1e-9 for i in (0, 1))


@dataclass(frozen=True)
class TabletopObject:
    name: str
    shape: str
    size: Vec3  # full extents (m)
    color: str  # palette name, or "" for a custom rgba
    rgba: RGBA
    mass: float
    friction: float

    @property
    def rest_z(self) -> float:
        """Height of the centre when the object rests on the table."""
        return self.size[2] / 2

    @property
    def footprint_radius(self) -> float:
        """Radius of the circle that holds the footprint at any yaw (used for non-overlap)."""
        return math.hypot(self.size[0], self.size[1]) / 2


@dataclass(frozen=True)
class Place:
    name: str
    kind: str  # bin | plate | zone
    center: Vec2
    size: Vec2
    color: str
    rgba: RGBA
    wall_height: float  # bins only; 0 otherwise

    @property
    def surface_z(self) -> float:
        """Height of what an object put here rests on: the bin's floor, the plate's top, the table in a zone."""
        return {"bin": BIN_WALL_THICKNESS, "plate": PLATE_THICKNESS}.get(self.kind, 0.0)

    def contains(self, xy: Sequence[float]) -> bool:
        """Whether a point lies inside the place (inside the walls, for a bin)."""
        inset = BIN_WALL_THICKNESS if self.kind == "bin" else 0.0
        return all(abs(xy[i] - self.center[i]) <= self.size[i] / 2 - inset for i in (0, 1))

    def distance(self, xy: np.ndarray) -> np.ndarray:
        """Distance from points ``xy`` (n, 2) to the footprint rectangle (0 inside)."""
        gap = np.maximum(np.abs(xy - np.asarray(self.center)) - np.asarray(self.size) / 2, 0.0)
        return np.hypot(gap[:, 0], gap[:, 1])


@dataclass(frozen=True)
class TabletopScene:
    """A validated scene. Build it with :func:`load_scene`."""

    name: str
    source: str
    description: str
    robot_base: Vec3
    reach: float
    table: Table
    workspace: tuple[Vec2, Vec2]  # (x_lo, x_hi), (y_lo, y_hi)
    objects: tuple[TabletopObject, ...]
    places: tuple[Place, ...]
    min_gap: float
    random_yaw: bool

    def object(self, name: str) -> TabletopObject:
        return _lookup(self.objects, name, "object", self.name)

    def place(self, name: str) -> Place:
        return _lookup(self.places, name, "place", self.name)

    def place_at(self, name: str) -> Vec3:
        """The point on which to put something in/on a place: its centre at its surface height."""
        p = self.place(name)
        return (p.center[0], p.center[1], p.surface_z)

    def place_contains(self, place_name: str, xy: Sequence[float]) -> bool:
        return self.place(place_name).contains(xy)

    def sample_point(self, rng: np.random.Generator, z_range: Sequence[float] | None = None) -> np.ndarray:
        """A point uniform in the workspace: z = 0 (the table top), or uniform in ``z_range`` (m)."""
        (x0, x1), (y0, y1) = self.workspace
        x, y = rng.uniform((x0, y0), (x1, y1))
        if z_range is None:
            return np.array([x, y, 0.0])
        lo, hi = as_vector(z_range, 2, lambda p: ValueError(f"z_range {p}"))
        if not 0.0 <= lo <= hi:
            raise ValueError(f"z_range must be [lo, hi] with 0 <= lo <= hi (m above the table), got {[lo, hi]}")
        return np.array([x, y, rng.uniform(lo, hi)])

    def sample_layout(
        self, rng: np.random.Generator, objects: Sequence[str] | None = None
    ) -> dict[str, tuple[float, float, float]]:
        """(x, y, yaw) of each object (all by default), resting on the table, centres uniform in the workspace,
        footprint circles ``min_gap`` apart from each other and from every place's rectangle."""
        if isinstance(objects, str):
            raise TypeError(f"objects must be a list of object names, got the string {objects!r}")
        chosen = self.objects if objects is None else tuple(self.object(n) for n in objects)
        if len({o.name for o in chosen}) != len(chosen):
            raise ValueError(f"objects to place must be distinct, got {list(objects or [])}")
        (x0, x1), (y0, y1) = self.workspace
        for _ in range(_LAYOUT_RESTARTS):
            layout: dict[str, tuple[float, float, float]] = {}
            circles: list[tuple[float, float, float]] = []  # x, y, radius of the objects placed so far
            for obj in chosen:
                xy = rng.uniform((x0, y0), (x1, y1), size=(_CANDIDATES, 2))
                clear = np.ones(_CANDIDATES, dtype=bool)
                for ox, oy, radius in circles:
                    clear &= np.hypot(xy[:, 0] - ox, xy[:, 1] - oy) >= obj.footprint_radius + radius + self.min_gap
                for place in self.places:
                    clear &= place.distance(xy) >= obj.footprint_radius + self.min_gap
                if not clear.any():
                    break
                x, y = xy[np.argmax(clear)]
                yaw = rng.uniform(-math.pi, math.pi) if self.random_yaw else 0.0
                layout[obj.name] = (float(x), float(y), float(yaw))
                circles.append((float(x), float(y), obj.footprint_radius))
            else:
                return layout
        avoiding = f", clear of places {[p.name for p in self.places]}" if self.places else ""
        raise ValueError(
            f"scene {self.name!r}: found no layout of {[o.name for o in chosen]} without overlaps in the workspace "
            f"x {list(self.workspace[0])}, y {list(self.workspace[1])} (min_gap {self.min_gap} m{avoiding}) after "
            f"{_LAYOUT_RESTARTS} tries; enlarge the workspace, move the places out of it, lower min_gap, or use fewer "
            "or smaller objects"
        )

    def describe(self) -> str:
        """A short text of the scene a planner can read."""
        lines = [f"Tabletop scene {self.name}: {self.description}".rstrip(": "), "Objects:"]
        for o in self.objects:
            w, d, h = (round(s * 100, 1) for s in o.size)
            size = f"{w:g} cm cube" if w == d == h else f"{w:g} x {d:g} x {h:g} cm box"
            lines.append(f"- {o.name}: {o.color or 'custom-coloured'} {size}")
        lines.append("Places:" if self.places else "Places: none")
        for p in self.places:
            lines.append(
                f"- {p.name}: {p.color or 'custom-coloured'} {p.kind} at ({p.center[0]:.2f}, {p.center[1]:.2f}), "
                f"{p.size[0] * 100:g} x {p.size[1] * 100:g} cm"
            )
        return "\n".join(lines)


def scene_names() -> list[str]:
    """Names of the scenes shipped in sim/scenes/."""
    return sorted(p.stem for p in SCENES_DIR.glob("*.yaml"))


def load_scene(name_or_path: str | Path) -> TabletopScene:
    """Load a shipped scene by name (``"sort"``) or any scene YAML by path."""
    path = resolve_yaml(name_or_path, what="scene", known=scene_names(),
                        path_of=lambda name: SCENES_DIR / f"{name}.yaml", file_label="scene")  # fmt: skip
    return _parse_scene(Fields(str(path), "", load_yaml_mapping(path)), path.stem)


def _parse_scene(root: Fields, default_name: str) -> TabletopScene:
    root.reject_unknown(
        ["name", "description", "robot", "table", "workspace", "min_gap", "random_yaw", "objects", "places"]
    )
    robot = root.sub("robot", {})
    robot.reject_unknown(["base", "reach"])
    base = _coordinates(robot, "base", 3, [-0.6, 0.0, 0.0])
    reach = robot.number("reach", 0.85, positive=True, maximum=MAXIMA["reach"])
    tab = root.sub("table", {})
    tab.reject_unknown(["center", "size", "height"])
    table = Table(
        _coordinates(tab, "center", 2, [-0.3, 0.0]),  # type: ignore[arg-type]
        _sizes(tab, "size", 2, MAXIMA["table_size"], [1.1, 0.7]),  # type: ignore[arg-type]
        tab.number("height", 0.4, positive=True, maximum=MAXIMA["table_height"]),
    )

    def check_area(f: Fields, key: str | None, center: Vec2, size: Vec2, what: str, margin: float = 0.0) -> None:
        """Within the arm's reach of the base but clear of it (horizontally), on the table with ``margin`` to spare."""
        lo, hi = (center[0] - size[0] / 2, center[1] - size[1] / 2), (center[0] + size[0] / 2, center[1] + size[1] / 2)
        far = max(math.hypot(x - base[0], y - base[1]) for x in (lo[0], hi[0]) for y in (lo[1], hi[1]))
        if far > reach:
            raise f.error(key, f"{what} reaches {far:.3f} m from the robot base at {list(base[:2])}; "
                          f"the arm reaches {reach} m (robot.reach)")  # fmt: skip
        near = math.hypot(max(lo[0] - base[0], 0.0, base[0] - hi[0]), max(lo[1] - base[1], 0.0, base[1] - hi[1]))
        if near < BASE_CLEARANCE:
            raise f.error(key, f"{what} comes within {near:.3f} m of the robot base at {list(base[:2])}; "
                          f"keep {BASE_CLEARANCE} m clear of it")  # fmt: skip
        lo, hi = (lo[0] - margin, lo[1] - margin), (hi[0] + margin, hi[1] + margin)
        if not table.covers(lo, hi):
            raise f.error(key, f"{what} ({_span(lo, hi)}) is not on the table ({_span(table.low, table.high)})")

    names: dict[str, str] = {}

    def claim(f: Fields) -> str:
        name = f.text("name")
        if name.lower() in names:
            raise f.error("name", f"duplicate name {name!r} (already used by {names[name.lower()]})")
        names[name.lower()] = f.path
        return name

    objects = []
    for i, item in enumerate(root.items("objects")):
        f = Fields(root.source, f"objects[{i}]", item)
        f.reject_unknown(["name", "shape", "size", "color", "mass", "friction"])
        name = claim(f)
        shape = _choice(f, "shape", "box", ("box",))
        limit = MAXIMA["object_size"]
        edge = f.raw("size")  # one edge for a cube, or [sx, sy, sz]
        size = (
            _sizes(f, "size", 3, limit)
            if isinstance(edge, list)
            else (f.number("size", positive=True, maximum=limit),) * 3
        )
        color, rgba = _color(f, None)
        mass = f.number("mass", DEFAULT_DENSITY * math.prod(size), positive=True, maximum=MAXIMA["mass"])
        friction = f.number("friction", 1.0, positive=True, maximum=MAXIMA["friction"])
        objects.append(TabletopObject(name, shape, size, color, rgba, mass, friction))  # type: ignore[arg-type]
    if not objects:
        raise root.error("objects", "a scene needs at least one object")

    ws = root.sub("workspace", {})
    ws.reject_unknown(["x", "y"])
    workspace = (_interval(ws, "x", [-0.15, 0.15]), _interval(ws, "y", [-0.15, 0.15]))
    radius = max(o.footprint_radius for o in objects)  # an object at the workspace's edge still stands on the table
    (x0, x1), (y0, y1) = workspace
    what = f"the workspace plus the largest object's footprint radius {radius:.3f} m"
    check_area(ws, None, ((x0 + x1) / 2, (y0 + y1) / 2), (x1 - x0, y1 - y0), what, radius)

    places: list[Place] = []
    for i, item in enumerate(root.items("places")):
        f = Fields(root.source, f"places[{i}]", item)
        f.reject_unknown(["name", "kind", "center", "size", "color", "wall_height"])
        name = claim(f)
        kind = _choice(f, "kind", ..., PLACE_KINDS)
        if kind != "bin" and f.has("wall_height"):
            raise f.error("wall_height", f"only bins have walls; {name!r} is a {kind}")
        center, size = _coordinates(f, "center", 2), _sizes(f, "size", 2, MAXIMA["place_size"])
        if kind == "bin" and min(size) <= 3 * BIN_WALL_THICKNESS:
            raise f.error("size", f"a bin must be wider than {3 * BIN_WALL_THICKNESS} m, got {list(size)}")
        wall = f.number("wall_height", 0.03, positive=True, maximum=MAXIMA["wall_height"]) if kind == "bin" else 0.0
        check_area(f, "center", center, size, f"{kind} {name!r}")  # type: ignore[arg-type]
        for j, other in enumerate(places):
            if all(abs(center[k] - other.center[k]) < (size[k] + other.size[k]) / 2 for k in (0, 1)):
                raise f.error("center", f"{kind} {name!r} overlaps {other.kind} {other.name!r} (places[{j}])")
        places.append(Place(name, kind, center, size, *_color(f, _PLACE_COLORS[kind]), wall))  # type: ignore[arg-type]

    scene = TabletopScene(
        name=root.text("name", default_name),
        source=str(root.source),
        description=root.string("description"),
        robot_base=base,  # type: ignore[arg-type]
        reach=reach,
        table=table,
        workspace=workspace,
        objects=tuple(objects),
        places=tuple(places),
        min_gap=root.number("min_gap", 0.01, non_negative=True, maximum=MAXIMA["min_gap"]),
        random_yaw=root.flag("random_yaw", False),
    )
    try:  # objects that never fit are a mistake in the file, not a surprise at the first reset
        scene.sample_layout(np.random.default_rng(0))
    except ValueError as err:
        raise root.error("objects", str(err)) from None
    return scene


def _choice(f: Fields, key: str, default: Any, options: Sequence[str]) -> str:
    value = f.text(key, default)
    if value not in options:
        raise f.error(key, f"unknown {key} {value!r}{did_you_mean(value, options)}; {key}s: {', '.join(options)}")
    return value


def _coordinates(f: Fields, key: str, n: int, default: Any = ...) -> tuple[float, ...]:
    value = f.vector(key, n, default)
    if max(abs(v) for v in value) > MAXIMA["coordinate"]:
        raise f.error(key, f"must be within +-{MAXIMA['coordinate']:g} m of the origin, got {list(value)}")
    return value


def _sizes(f: Fields, key: str, n: int, maximum: float, default: Any = ...) -> tuple[float, ...]:
    value = f.vector(key, n, default)
    if not all(0 < v <= maximum for v in value):
        raise f.error(key, f"must be {n} sizes in metres, each > 0 and <= {maximum:g}, got {list(value)}")
    return value


def _interval(f: Fields, key: str, default: list[float]) -> Vec2:
    lo, hi = _coordinates(f, key, 2, default)
    if hi <= lo:
        raise f.error(key, f"must be [lo, hi] with hi > lo, got {[lo, hi]}")
    return (lo, hi)


def _color(f: Fields, default: str | None) -> tuple[str, RGBA]:
    """A palette name (kept, for language) or a custom [r, g, b, a] (name "")."""
    value = f.raw("color", ... if default is None else default)
    if isinstance(value, str):
        return _choice(f, "color", default, list(PALETTE)), PALETTE[value]
    rgba = f.vector("color", 4)
    if not all(0.0 <= c <= 1.0 for c in rgba):
        raise f.error("color", f"must be a palette name or [r, g, b, a] each in [0, 1], got {list(rgba)}")
    return "", rgba  # type: ignore[return-value]


def _span(lo: Vec2, hi: Vec2) -> str:
    return f"x {lo[0]:.3f}..{hi[0]:.3f}, y {lo[1]:.3f}..{hi[1]:.3f}"


def _lookup(items: Sequence[Any], name: str, kind: str, scene: str) -> Any:
    for item in items:
        if item.name == name:
            return item
    known = [i.name for i in items]
    hint = did_you_mean(str(name), known)
    raise ValueError(f"unknown {kind} {name!r} in scene {scene!r}{hint}; {kind}s: {', '.join(known) or 'none'}")
