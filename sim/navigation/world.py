"""World maps: rooms, doors, landmarks and walls, loaded from YAML and checked.

One map file yields everything the stack needs about a place:

* geometry for the simulators (``World.walls``, ``World.bounds``),
* a topological graph of rooms and doors (``World.graph()``, a ``networkx.Graph``),
* collision-free pose and goal sampling (``World.sample_free``),
* a scene description for planners (``World.scene()`` as JSON-able dict, ``World.scene_text()``).

The format is documented in docs/worlds.md. Every validation error names the file and the field.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import shapely
from shapely.geometry import LineString, Point, Polygon, box
from shapely.ops import unary_union

from robots._fields import ConfigFileError, Fields, as_vector, did_you_mean, load_yaml_mapping, resolve_yaml

MAPS_DIR = Path(__file__).resolve().parents[1] / "maps"

Vec2 = tuple[float, float]

#: Half the diagonal of a unit grid cell: the farthest a point lies from its nearest grid node, per metre of
#: resolution.
_HALF_DIAGONAL = math.sqrt(2.0) / 2.0
#: Overlap between rooms below this area (m^2) is treated as a shared edge, not an overlap.
_AREA_TOLERANCE = 1e-6
#: A door waypoint must lie within this distance (m) of both rooms it connects.
_DOOR_TOLERANCE = 0.3
#: Map coordinates beyond this (m) are a typo, not a building: float32 observations keep centimetres to ~1e5 m.
MAX_COORDINATE = 1e5
#: A distance field of more grid nodes than this (~400 MB of float64) is refused with the fix.
_MAX_FIELD_NODES = 5 * 10**7


@dataclass(frozen=True)
class Wall:
    """A straight wall segment with a thickness; its ends are squared off (extended by thickness/2)."""

    start: Vec2
    end: Vec2
    thickness: float

    @property
    def length(self) -> float:
        return math.dist(self.start, self.end)

    @property
    def center(self) -> Vec2:
        return ((self.start[0] + self.end[0]) / 2.0, (self.start[1] + self.end[1]) / 2.0)

    @property
    def yaw(self) -> float:
        return math.atan2(self.end[1] - self.start[1], self.end[0] - self.start[0])

    def footprint(self) -> Polygon:
        """The wall's solid area; simulators build exactly this box."""
        return LineString([self.start, self.end]).buffer(self.thickness / 2.0, cap_style="square")


@dataclass(frozen=True, eq=False)
class DistanceField:
    """Distance (m) to the nearest wall at the nodes of a grid (``values[i, j]`` at ``origin + (i, j) *
    resolution``); see :meth:`World.distance_field`."""

    origin: Vec2
    resolution: float
    values: np.ndarray

    def lower_bound(self, x: float, y: float) -> float:
        """A distance to the nearest wall that is never more than the true one: the value at the nearest node
        minus that node's distance bound (the distance is 1-Lipschitz). 0 outside the grid."""
        i = math.floor((x - self.origin[0]) / self.resolution + 0.5)
        j = math.floor((y - self.origin[1]) / self.resolution + 0.5)
        if not (0 <= i < self.values.shape[0] and 0 <= j < self.values.shape[1]):
            return 0.0
        return float(self.values[i, j]) - self.resolution * _HALF_DIAGONAL


@dataclass(frozen=True)
class Room:
    name: str
    polygon: tuple[Vec2, ...]
    aliases: tuple[str, ...] = ()

    @cached_property
    def shape(self) -> Polygon:
        return Polygon(self.polygon)

    @property
    def center(self) -> Vec2:
        c = self.shape.centroid
        return (float(c.x), float(c.y))


@dataclass(frozen=True)
class Door:
    name: str
    rooms: tuple[str, str]
    waypoint: Vec2


@dataclass(frozen=True)
class Landmark:
    """A named place the robot can be sent to; ``position`` is the approach point in free space."""

    name: str
    position: Vec2
    room: str
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Pose2D:
    x: float
    y: float
    yaw: float = 0.0


@dataclass(frozen=True)
class World:
    """A validated map. Build it with :func:`load_world` or :meth:`World.from_dict`."""

    name: str
    source: str
    bounds: tuple[float, float, float, float]
    walls: tuple[Wall, ...]
    rooms: tuple[Room, ...]
    doors: tuple[Door, ...]
    landmarks: tuple[Landmark, ...]
    starts: dict[str, Pose2D] = field(default_factory=dict)
    wall_height: float = 0.5
    description: str = ""

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_file(cls, path: str | Path) -> World:
        path = Path(path)
        return cls.from_dict(load_yaml_mapping(path), source=str(path), default_name=path.stem)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "<dict>", default_name: str = "map") -> World:
        return _parse_world(Fields(source, "", data), default_name)

    # ------------------------------------------------------------------ geometry

    @property
    def size(self) -> Vec2:
        return (self.bounds[2] - self.bounds[0], self.bounds[3] - self.bounds[1])

    @cached_property
    def _walls_area(self) -> Any:
        area = unary_union([w.footprint() for w in self.walls])
        shapely.prepare(area)
        return area

    @cached_property
    def _inside(self) -> Polygon:
        """The map's bounding box: nothing of the world lies outside it."""
        return box(*self.bounds)

    def free_space(self, clearance: float) -> Any:
        """Free space (shapely geometry): inside the rooms (or bounds) and ``clearance`` from walls."""
        cache = self.__dict__.setdefault("_free_cache", {})
        key = round(float(clearance), 6)
        if key not in cache:
            region = unary_union([r.shape for r in self.rooms]) if self.rooms else self._inside
            free = region.intersection(self._inside).difference(self._walls_area.buffer(clearance))
            shapely.prepare(free)
            cache[key] = free
        return cache[key]

    def in_bounds(self, point: Iterable[float]) -> bool:
        x, y = point
        return self.bounds[0] <= x <= self.bounds[2] and self.bounds[1] <= y <= self.bounds[3]

    def in_wall(self, point: Iterable[float]) -> bool:
        return bool(self._walls_area.intersects(Point(*point)))

    def wall_distance(self, point: Iterable[float]) -> float:
        """Distance (m) from a point to the nearest wall surface (0 inside a wall)."""
        return float(self._walls_area.distance(Point(*point)))

    def distance_field(self, resolution: float = 0.05) -> DistanceField:
        """:meth:`wall_distance` sampled on a grid over the bounds (cached per resolution): an O(1) lower
        bound on the distance for per-step checks, where one shapely query (~20 us) is too slow."""
        if not (isinstance(resolution, (int, float)) and math.isfinite(resolution) and resolution > 0):
            raise ValueError(f"resolution must be a positive number of metres, got {resolution!r}")
        cache = self.__dict__.setdefault("_distance_fields", {})
        key = round(float(resolution), 6)
        if key not in cache:
            xmin, ymin, xmax, ymax = self.bounds
            nx_, ny_ = math.ceil((xmax - xmin) / key) + 1, math.ceil((ymax - ymin) / key) + 1
            if nx_ * ny_ > _MAX_FIELD_NODES:
                raise ValueError(
                    f"map {self.name!r} ({self.size[0]:g} x {self.size[1]:g} m) needs {nx_ * ny_:.2g} grid nodes at "
                    f"resolution {key} m (at most {_MAX_FIELD_NODES:.0g}); use a coarser resolution or a smaller map"
                )
            xs = xmin + key * np.arange(nx_)
            ys = ymin + key * np.arange(ny_)
            gx, gy = np.meshgrid(xs, ys, indexing="ij")
            values = shapely.distance(self._walls_area, shapely.points(gx.ravel(), gy.ravel())).reshape(gx.shape)
            cache[key] = DistanceField((xmin, ymin), key, values)
        return cache[key]

    def is_free(self, point: Iterable[float], clearance: float = 0.0) -> bool:
        """Inside a room (or the bounds for room-less maps) and at least ``clearance`` from walls."""
        return bool(self.free_space(clearance).contains(Point(*point)))

    def line_of_sight(self, a: Iterable[float], b: Iterable[float], clearance: float = 0.0) -> bool:
        """True when a disc of radius ``clearance`` can slide from a to b without touching a wall."""
        path = LineString([tuple(a), tuple(b)])
        if clearance > 0:
            path = path.buffer(clearance)
        return not bool(self._walls_area.intersects(path))

    def room_at(self, point: Iterable[float]) -> Room | None:
        p = Point(*point)
        for room in self.rooms:
            if room.shape.covers(p):
                return room
        return None

    def sample_free(
        self,
        rng: np.random.Generator,
        clearance: float,
        *,
        near: Iterable[float] | None = None,
        radius: float | None = None,
        min_distance: float = 0.0,
        line_of_sight: bool = False,
        max_tries: int = 10_000,
    ) -> Vec2:
        """Sample a point uniformly in free space with ``clearance`` from every wall.

        With ``near`` and ``radius`` the point lies in the disc around ``near`` (and at least
        ``min_distance`` from it); with ``line_of_sight`` it is reachable from ``near`` in a straight
        line by a disc of radius ``clearance``.

        Raises:
            RuntimeError: when no such point is found in ``max_tries`` draws (the region is empty or
                tiny); the message says which constraint to relax.
        """
        free = self.free_space(clearance)
        if near is not None:
            cx, cy = near
            if radius is None:
                raise ValueError("sample_free: 'near' needs a 'radius'")
            lo = (max(self.bounds[0], cx - radius), max(self.bounds[1], cy - radius))
            hi = (min(self.bounds[2], cx + radius), min(self.bounds[3], cy + radius))
        else:
            lo, hi = (self.bounds[0], self.bounds[1]), (self.bounds[2], self.bounds[3])
        for _ in range(max_tries):
            x = float(rng.uniform(lo[0], hi[0]))
            y = float(rng.uniform(lo[1], hi[1]))
            if near is not None:
                d = math.hypot(x - cx, y - cy)
                if d > radius or d < min_distance:
                    continue
            if not free.contains(Point(x, y)):
                continue
            if near is not None and line_of_sight and not self.line_of_sight(near, (x, y), clearance):
                continue
            return (x, y)
        raise RuntimeError(
            f"map {self.name!r}: no free point found in {max_tries} draws (clearance={clearance}, "
            f"near={near}, radius={radius}, min_distance={min_distance}, line_of_sight={line_of_sight}); "
            "reduce the clearance or the minimum distance, or enlarge the radius"
        )

    # ------------------------------------------------------------------ names and topology

    def named_places(self) -> dict[str, Room | Landmark]:
        """Every name and alias (lower case) mapped to the room or landmark it denotes."""
        names: dict[str, Room | Landmark] = {}
        for entity in (*self.rooms, *self.landmarks):
            for name in (entity.name, *entity.aliases):
                names[name.lower()] = entity
        return names

    def resolve(self, name: str) -> Room | Landmark:
        """Find a room or landmark by name or alias (case-insensitive)."""
        places = self.named_places()
        key = name.strip().lower()
        if key in places:
            return places[key]
        raise ValueError(
            f"unknown place {name!r} in map {self.name!r}{did_you_mean(key, list(places))}; "
            f"known: {', '.join(sorted(places))}"
        )

    def parse_start(self, text: str) -> str | tuple[float, float, float]:
        """A start given as text (command line, ROS parameter): a named start of this map or "x,y,yaw"."""
        if "," not in text:
            if text not in self.starts:
                known = ", ".join(self.starts)
                raise ValueError(f"{text!r} is not a named start of map {self.name!r}; use one of {known} or x,y,yaw")
            return text
        try:
            x, y, yaw = (float(v) for v in text.split(","))
        except ValueError:
            raise ValueError(f"{text!r}: give a named start or x,y,yaw in metres and radians") from None
        return (x, y, yaw)

    def room(self, name: str) -> Room:
        for room in self.rooms:
            if room.name == name:
                return room
        raise ValueError(f"unknown room {name!r} in map {self.name!r}; rooms: {[r.name for r in self.rooms]}")

    def graph(self) -> nx.Graph:
        """Topological graph: a node per room and per door, an edge room-door for every door.

        Node attributes: ``kind`` ("room" | "door") and ``position`` (room centre or door waypoint).
        Edge weight: straight-line distance between the two positions (m).
        """
        cached = self.__dict__.get("_graph")
        if cached is None:
            cached = nx.Graph(name=self.name)
            for room in self.rooms:
                cached.add_node(room.name, kind="room", position=room.center)
            for door in self.doors:
                cached.add_node(door.name, kind="door", position=door.waypoint, rooms=door.rooms)
                for room_name in door.rooms:
                    room_pos = cached.nodes[room_name]["position"]
                    cached.add_edge(room_name, door.name, weight=math.dist(room_pos, door.waypoint))
            self.__dict__["_graph"] = cached
        return cached.copy()

    def scene(self) -> dict[str, Any]:
        """A JSON-serialisable description of the map for planners."""
        return {
            "map": self.name,
            "description": self.description,
            "bounds": list(self.bounds),
            "rooms": [{"name": r.name, "aliases": list(r.aliases), "center": _round(r.center)} for r in self.rooms],
            "doors": [{"name": d.name, "connects": list(d.rooms), "waypoint": _round(d.waypoint)} for d in self.doors],
            "landmarks": [
                {"name": lm.name, "aliases": list(lm.aliases), "room": lm.room, "position": _round(lm.position)}
                for lm in self.landmarks
            ],
            "starts": {k: [p.x, p.y, p.yaw] for k, p in self.starts.items()},
        }

    def scene_text(self) -> str:
        """A compact text form of :meth:`scene`, short enough for a small LLM's prompt."""
        lines = [f"Map {self.name}: {self.description}".rstrip(": ")]
        lines.append("Rooms:")
        for r in self.rooms:
            alias = f" (also: {', '.join(r.aliases)})" if r.aliases else ""
            lines.append(f"- {r.name}{alias} at {_fmt(r.center)}")
        lines.append("Doors:")
        for d in self.doors:
            lines.append(f"- {d.name}: {d.rooms[0]} <-> {d.rooms[1]} at {_fmt(d.waypoint)}")
        lines.append("Landmarks:")
        for lm in self.landmarks:
            alias = f" (also: {', '.join(lm.aliases)})" if lm.aliases else ""
            lines.append(f"- {lm.name}{alias} in {lm.room} at {_fmt(lm.position)}")
        return "\n".join(lines)


# ---------------------------------------------------------------------- loading


def available_maps() -> list[str]:
    """Names of the maps shipped in sim/maps/."""
    return sorted(p.stem for p in MAPS_DIR.glob("*.yaml"))


def load_world(name_or_path: str | Path) -> World:
    """Load a shipped map by name (``"apartment"``) or any map YAML by path."""
    path = resolve_yaml(name_or_path, what="map", known=available_maps(),
                        path_of=lambda name: MAPS_DIR / f"{name}.yaml", file_label="map")  # fmt: skip
    return World.from_file(path)


def _parse_world(root: Fields, default_name: str) -> World:
    root.reject_unknown(
        [
            "name",
            "description",
            "bounds",
            "wall_thickness",
            "wall_height",
            "outer_walls",
            "walls",
            "rooms",
            "doors",
            "landmarks",
            "starts",
        ]
    )
    src = root.source
    name = root.text("name", default_name)
    xmin, ymin, xmax, ymax = root.vector("bounds", 4)
    if max(abs(v) for v in (xmin, ymin, xmax, ymax)) > MAX_COORDINATE:
        raise root.error("bounds", f"must be within +-{MAX_COORDINATE:g} m, got {[xmin, ymin, xmax, ymax]}")
    if xmax <= xmin or ymax <= ymin:
        raise root.error("bounds", f"must be [xmin, ymin, xmax, ymax] with max > min, got {[xmin, ymin, xmax, ymax]}")
    bounds = (xmin, ymin, xmax, ymax)
    thickness = root.number("wall_thickness", 0.1, positive=True)
    height = root.number("wall_height", 0.5, positive=True)

    walls: list[Wall] = []
    if root.flag("outer_walls", True):
        corners = [(xmin, ymin), (xmax, ymin), (xmax, ymax), (xmin, ymax)]
        walls += [Wall(corners[i], corners[(i + 1) % 4], thickness) for i in range(4)]
    for i, item in enumerate(root.items("walls")):
        walls.append(_parse_wall(root, f"walls[{i}]", item, thickness))
    for i, wall in enumerate(walls):
        for end in (wall.start, wall.end):
            if not _in_box(end, bounds, slack=1e-9):
                raise ConfigFileError(
                    src, _wall_path(root, i, walls), f"end point {list(end)} lies outside bounds {list(bounds)}"
                )

    rooms: list[Room] = []
    for i, item in enumerate(root.items("rooms")):
        rooms.append(_parse_room(Fields(src, f"rooms[{i}]", item), bounds))
    _check_rooms_disjoint(root, rooms)

    names: dict[str, str] = {}

    def claim(label: str, path: str) -> None:
        key = label.lower()
        if key in names:
            raise ConfigFileError(src, path, f"duplicate name {label!r} (already used by {names[key]})")
        names[key] = path

    for i, room in enumerate(rooms):
        for label in (room.name, *room.aliases):
            claim(label, f"rooms[{i}] ({room.name})")

    room_names = [r.name for r in rooms]
    walls_area = unary_union([w.footprint() for w in walls])

    doors: list[Door] = []
    for i, item in enumerate(root.items("doors")):
        f = Fields(src, f"doors[{i}]", item)
        f.reject_unknown(["name", "rooms", "waypoint"])
        pair = f.raw("rooms")
        if not isinstance(pair, list) or len(pair) != 2 or not all(isinstance(p, str) for p in pair):
            raise f.error("rooms", f"must name exactly two rooms, got {pair!r}")
        for r in pair:
            if r not in room_names:
                raise f.error(
                    "rooms", f"unknown room {r!r}{did_you_mean(r, room_names)}; rooms: {', '.join(room_names)}"
                )
        if pair[0] == pair[1]:
            raise f.error("rooms", f"a door must connect two different rooms, got {pair!r}")
        waypoint = f.vector("waypoint", 2)
        if walls_area.intersects(Point(waypoint)):
            raise f.error("waypoint", f"{list(waypoint)} lies inside a wall; leave a gap in the wall for the door")
        for r in pair:
            if rooms[room_names.index(r)].shape.distance(Point(waypoint)) > _DOOR_TOLERANCE:
                raise f.error("waypoint", f"{list(waypoint)} is not on the boundary of room {r!r}")
        door_name = f.text("name", f"door_{pair[0]}_{pair[1]}")
        claim(door_name, f"doors[{i}]")
        doors.append(Door(door_name, (pair[0], pair[1]), waypoint))

    landmarks: list[Landmark] = []
    for i, item in enumerate(root.items("landmarks")):
        f = Fields(src, f"landmarks[{i}]", item)
        f.reject_unknown(["name", "position", "room", "aliases"])
        lm_name = f.text("name")
        pos = f.vector("position", 2)
        if walls_area.intersects(Point(pos)):
            raise f.error("position", f"landmark {lm_name!r} at {list(pos)} lies inside a wall")
        inside = [r.name for r in rooms if r.shape.covers(Point(pos))]
        if rooms and not inside:
            raise f.error("position", f"landmark {lm_name!r} at {list(pos)} lies outside every room")
        room_name = f.text("room", inside[0] if inside else "")
        if room_name not in room_names:
            raise f.error(
                "room",
                f"unknown room {room_name!r}{did_you_mean(room_name, room_names)}; rooms: {', '.join(room_names)}",
            )
        if room_name not in inside:
            raise f.error("room", f"landmark {lm_name!r} at {list(pos)} is not in room {room_name!r} but in {inside}")
        landmark = Landmark(lm_name, pos, room_name, f.string_list("aliases"))
        for label in (landmark.name, *landmark.aliases):
            claim(label, f"landmarks[{i}] ({lm_name})")
        landmarks.append(landmark)

    starts: dict[str, Pose2D] = {}
    start_fields = root.sub("starts", {})
    for key, value in start_fields.data.items():
        pose = as_vector(value, 3, lambda p, k=key: start_fields.error(str(k), p))
        if walls_area.intersects(Point(pose[:2])) or not _in_box(pose[:2], bounds):
            raise start_fields.error(str(key), f"start pose {list(pose)} lies inside a wall or outside the map")
        starts[str(key)] = Pose2D(*pose)

    world = World(
        name=name,
        source=str(src),
        bounds=bounds,
        walls=tuple(walls),
        rooms=tuple(rooms),
        doors=tuple(doors),
        landmarks=tuple(landmarks),
        starts=starts,
        wall_height=height,
        description=root.string("description"),
    )
    if len(rooms) > 1:
        graph = world.graph()
        if not nx.is_connected(graph):
            parts = [sorted(n for n in c if graph.nodes[n]["kind"] == "room") for c in nx.connected_components(graph)]
            raise root.error("doors", f"rooms are not all connected by doors; separate groups: {parts}")
    return world


def _parse_wall(root: Fields, path: str, item: Any, default_thickness: float) -> Wall:
    if isinstance(item, list):
        if len(item) != 2:
            raise ConfigFileError(root.source, path, f"must be [[x1, y1], [x2, y2]] or a mapping, got {item!r}")
        start = as_vector(item[0], 2, lambda p: ConfigFileError(root.source, path, p))
        end = as_vector(item[1], 2, lambda p: ConfigFileError(root.source, path, p))
        thickness = default_thickness
    else:
        f = Fields(root.source, path, item)
        f.reject_unknown(["start", "end", "thickness"])
        start, end = f.vector("start", 2), f.vector("end", 2)
        thickness = f.number("thickness", default_thickness, positive=True)
    if math.dist(start, end) < 1e-9:
        raise ConfigFileError(root.source, path, f"wall has zero length (start == end == {list(start)})")
    return Wall(start, end, thickness)  # type: ignore[arg-type]


def _wall_path(root: Fields, index: int, walls: list[Wall]) -> str:
    n_outer = 4 if root.flag("outer_walls", True) else 0
    return f"walls[{index - n_outer}]" if index >= n_outer else "bounds (outer walls)"


def _parse_room(f: Fields, bounds: tuple[float, float, float, float]) -> Room:
    f.reject_unknown(["name", "rect", "polygon", "aliases"])
    name = f.text("name")
    if f.has("rect") == f.has("polygon"):
        raise f.error(None, f"room {name!r} needs exactly one of 'rect' or 'polygon'")
    if f.has("rect"):
        x0, y0, x1, y1 = f.vector("rect", 4)
        if x1 <= x0 or y1 <= y0:
            raise f.error("rect", f"must be [xmin, ymin, xmax, ymax] with max > min, got {[x0, y0, x1, y1]}")
        ring: tuple[Vec2, ...] = ((x0, y0), (x1, y0), (x1, y1), (x0, y1))
    else:
        raw = f.items("polygon")
        points = [as_vector(p, 2, lambda prob, j=j: f.error(f"polygon[{j}]", prob)) for j, p in enumerate(raw)]
        if len(points) < 4:
            raise f.error("polygon", f"needs at least 3 corners plus the closing point, got {len(points)} points")
        if points[0] != points[-1]:
            raise f.error(
                "polygon",
                f"ring does not close: first point {list(points[0])} != last point {list(points[-1])}; "
                "repeat the first point at the end",
            )
        ring = tuple(points[:-1])  # type: ignore[assignment]
    shape = Polygon(ring)
    if not shape.is_valid or shape.area <= _AREA_TOLERANCE:
        raise f.error(
            "polygon" if f.has("polygon") else "rect",
            f"room {name!r} is not a simple polygon with positive area ({shapely.is_valid_reason(shape)})",
        )
    if not shape.difference(box(*bounds)).area <= _AREA_TOLERANCE:
        raise f.error("polygon" if f.has("polygon") else "rect", f"room {name!r} extends outside bounds {list(bounds)}")
    return Room(name, ring, f.string_list("aliases"))


def _check_rooms_disjoint(root: Fields, rooms: list[Room]) -> None:
    for i, a in enumerate(rooms):
        for j in range(i + 1, len(rooms)):
            b = rooms[j]
            overlap = a.shape.intersection(b.shape).area
            if overlap > _AREA_TOLERANCE:
                raise ConfigFileError(
                    root.source,
                    f"rooms[{j}]",
                    f"room {b.name!r} overlaps room {a.name!r} (rooms[{i}]) by {overlap:.3f} m^2",
                )


def _in_box(p: Iterable[float], bounds: tuple[float, float, float, float], slack: float = 0.0) -> bool:
    x, y = p
    return bounds[0] - slack <= x <= bounds[2] + slack and bounds[1] - slack <= y <= bounds[3] + slack


def _round(v: Iterable[float]) -> list[float]:
    return [round(float(c), 2) for c in v]


def _fmt(v: Iterable[float]) -> str:
    x, y = v
    return f"({x:.1f}, {y:.1f})"
