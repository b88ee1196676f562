import json
import math

import networkx as nx
import numpy as np
import pytest
import yaml

from robots._fields import ConfigFileError
from sim.navigation.world import World, available_maps, load_world


def base_map() -> dict:
    """Two rooms with a door; each validation test breaks one thing."""
    return {
        "name": "t",
        "bounds": [0, 0, 10, 5],
        "walls": [[[5, 0], [5, 2]], [[5, 3], [5, 5]]],
        "rooms": [
            {"name": "west", "rect": [0, 0, 5, 5], "aliases": ["left"]},
            {"name": "east", "rect": [5, 0, 10, 5]},
        ],
        "doors": [{"name": "gap", "rooms": ["west", "east"], "waypoint": [5, 2.5]}],
        "landmarks": [{"name": "lamp", "position": [2, 2], "room": "west"}],
        "starts": {"home": [1, 1, 0]},
    }


def load_dict(tmp_path, data) -> World:
    path = tmp_path / "bad_map.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_world(path)


def test_shipped_maps_load():
    assert {"open", "two_rooms", "apartment", "maze"} <= set(available_maps())
    for name in available_maps():
        world = load_world(name)
        assert world.name == name
        assert nx.is_connected(world.graph())


def test_apartment_rooms_and_landmarks():
    world = load_world("apartment")
    rooms = {r.name for r in world.rooms}
    assert {"kitchen", "bedroom", "bathroom", "living_room", "office", "hallway"} <= rooms
    assert len(rooms) >= 6
    assert world.resolve("refrigerator").name == "fridge"
    assert world.resolve("Charging Dock").name == "charging_dock"
    # some rooms are at least 3 doors apart (long-horizon tasks need them)
    graph = world.graph()
    path = nx.shortest_path(graph, "kitchen", "bathroom")
    assert sum(graph.nodes[n]["kind"] == "door" for n in path) >= 3


def test_maze_has_long_route_and_dead_end():
    world = load_world("maze")
    graph = world.graph()
    path = nx.shortest_path(graph, "start_hall", "goal_room")
    assert sum(graph.nodes[n]["kind"] == "door" for n in path) >= 5
    room_degree = {n: graph.degree(n) for n, d in graph.nodes(data=True) if d["kind"] == "room"}
    assert room_degree["storage"] == 1  # a dead end


def test_graph_structure():
    world = World.from_dict(base_map())
    g = world.graph()
    assert g.nodes["west"]["kind"] == "room" and g.nodes["gap"]["kind"] == "door"
    assert g.nodes["gap"]["position"] == (5.0, 2.5)
    assert nx.shortest_path(g, "west", "east") == ["west", "gap", "east"]
    assert g["west"]["gap"]["weight"] == pytest.approx(math.dist((2.5, 2.5), (5, 2.5)))


def test_scene_description():
    world = load_world("apartment")
    scene = world.scene()
    json.dumps(scene)  # serialisable
    assert {r["name"] for r in scene["rooms"]} >= {"kitchen", "office"}
    assert any(d["connects"] == ["kitchen", "living_room"] for d in scene["doors"])
    fridge = next(lm for lm in scene["landmarks"] if lm["name"] == "fridge")
    assert fridge["room"] == "kitchen" and "refrigerator" in fridge["aliases"]
    text = world.scene_text()
    assert "fridge (also: refrigerator) in kitchen" in text
    assert "kitchen_door: kitchen <-> living_room" in text


@pytest.mark.parametrize("map_name", ["apartment", "maze"])
def test_distance_field_is_a_tight_lower_bound_of_the_wall_distance(map_name):
    world = load_world(map_name)
    field = world.distance_field(0.05)
    assert world.distance_field(0.05) is field  # cached
    xmin, ymin, xmax, ymax = world.bounds
    rng = np.random.default_rng(0)
    slack = []
    for x, y in rng.uniform([xmin, ymin], [xmax, ymax], (2000, 2)):
        bound, true = field.lower_bound(x, y), world.wall_distance((x, y))
        assert bound <= true + 1e-9
        slack.append(true - bound)
    assert max(slack) <= 2 * 0.05 * math.sqrt(2) / 2 + 1e-9  # never looser than the grid allows
    assert field.lower_bound(xmax + 1.0, ymin) == 0.0  # outside the grid: no claim
    with pytest.raises(ValueError, match="resolution must be a positive number"):
        world.distance_field(0.0)


def test_sample_free_respects_clearance_and_radius():
    world = load_world("apartment")
    rng = np.random.default_rng(0)
    for _ in range(200):
        p = world.sample_free(rng, 0.3)
        assert world.wall_distance(p) >= 0.3
        assert world.room_at(p) is not None
    centre = (2.0, 6.0)
    for _ in range(100):
        p = world.sample_free(rng, 0.25, near=centre, radius=1.5, min_distance=0.5, line_of_sight=True)
        assert 0.5 <= math.dist(p, centre) <= 1.5
        assert world.line_of_sight(centre, p, 0.25)


def test_sample_free_impossible_says_what_to_relax():
    world = load_world("open")
    with pytest.raises(RuntimeError, match="reduce the clearance"):
        world.sample_free(np.random.default_rng(0), clearance=10.0, max_tries=50)


def test_resolve_unknown_suggests():
    with pytest.raises(ValueError, match=r"unknown place 'kichen'.*did you mean 'kitchen'"):
        load_world("apartment").resolve("kichen")


def test_unknown_map_lists_known():
    with pytest.raises(
        ValueError, match=r"unknown map 'apartmnt' \(did you mean 'apartment'\?\); known maps: apartment"
    ):
        load_world("apartmnt")


def test_missing_map_file():
    with pytest.raises(FileNotFoundError, match=r"nope\.yaml"):
        load_world("/tmp/nope.yaml")


def test_malformed_yaml_names_file_and_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("name: x\nbounds: [0, 0, 1\nrooms: []\n")
    with pytest.raises(ConfigFileError, match=r"broken.yaml: invalid YAML: line \d+"):
        load_world(path)


def _mutate(fn):
    data = base_map()
    fn(data)
    return data


CASES = [
    (
        "door naming an unknown room",
        lambda d: d["doors"][0].update(rooms=["west", "easst"]),
        r"bad_map.yaml: doors\[0\].rooms: unknown room 'easst' \(did you mean 'east'\?\)",
    ),
    (
        "landmark inside a wall",
        lambda d: d["landmarks"][0].update(position=[5.0, 1.0]),
        r"bad_map.yaml: landmarks\[0\].position: landmark 'lamp' at \[5.0, 1.0\] lies inside a wall",
    ),
    (
        "landmark outside every room",
        lambda d: (
            d["rooms"].__setitem__(0, {"name": "west", "rect": [0, 0, 4.8, 5]}),
            d["landmarks"][0].update(position=[4.9, 4.0], room="west"),
        ),
        r"bad_map.yaml: landmarks\[0\].position: landmark 'lamp' at \[4.9, 4.0\] lies outside every room",
    ),
    (
        "room polygon that does not close",
        lambda d: d["rooms"].__setitem__(0, {"name": "west", "polygon": [[0, 0], [5, 0], [5, 5], [0, 5]]}),
        r"bad_map.yaml: rooms\[0\].polygon: ring does not close",
    ),
    (
        "overlapping rooms",
        lambda d: d["rooms"][1].update(rect=[4, 0, 10, 5]),
        r"bad_map.yaml: rooms\[1\]: room 'east' overlaps room 'west' \(rooms\[0\]\)",
    ),
    (
        "duplicate room names",
        lambda d: d["rooms"][1].update(name="west"),
        r"bad_map.yaml: rooms\[1\] \(west\): duplicate name 'west'",
    ),
    (
        "alias colliding with a landmark",
        lambda d: d["landmarks"][0].update(aliases=["left"]),
        r"bad_map.yaml: landmarks\[0\] \(lamp\): duplicate name 'left' \(already used by rooms\[0\] \(west\)\)",
    ),
    (
        "non-numeric field",
        lambda d: d.update(bounds=[0, 0, "ten", 5]),
        r"bad_map.yaml: bounds: must be a number, got 'ten'",
    ),
    (
        "unknown field",
        lambda d: d["rooms"][0].update(aliasses=["x"]),
        r"bad_map.yaml: rooms\[0\].aliasses: unknown field \(did you mean 'aliases'\?\)",
    ),
    (
        "door waypoint in a wall",
        lambda d: d["doors"][0].update(waypoint=[5.0, 1.0]),
        r"bad_map.yaml: doors\[0\].waypoint: \[5.0, 1.0\] lies inside a wall",
    ),
    ("rooms not connected", lambda d: d.update(doors=[]), r"bad_map.yaml: doors: rooms are not all connected"),
    (
        "landmark in the wrong room",
        lambda d: d["landmarks"][0].update(room="east"),
        r"bad_map.yaml: landmarks\[0\].room: landmark 'lamp' at \[2.0, 2.0\] is not in room 'east'",
    ),
    (
        "start inside a wall",
        lambda d: d["starts"].update(home=[5.0, 1.0, 0.0]),
        r"bad_map.yaml: starts.home: start pose",
    ),
    (
        "wall outside bounds",
        lambda d: d["walls"].append([[1, 1], [12, 1]]),
        r"bad_map.yaml: walls\[2\]: end point \[12.0, 1.0\] lies outside bounds",
    ),
]


@pytest.mark.parametrize(("what", "mutation", "message"), CASES, ids=[c[0] for c in CASES])
def test_validation_errors_name_file_and_field(tmp_path, what, mutation, message):
    with pytest.raises(ConfigFileError, match=message):
        load_dict(tmp_path, _mutate(mutation))


def test_base_map_is_valid(tmp_path):
    """The fixture the error cases mutate is itself valid, so each case fails for its own reason."""
    world = load_dict(tmp_path, base_map())
    assert [r.name for r in world.rooms] == ["west", "east"]
    assert world.starts["home"].x == 1.0


def test_polygon_rooms(tmp_path):
    data = base_map()
    data["rooms"][0] = {"name": "west", "polygon": [[0, 0], [5, 0], [5, 5], [0, 5], [0, 0]]}
    world = load_dict(tmp_path, data)
    assert world.room("west").shape.area == pytest.approx(25.0)
