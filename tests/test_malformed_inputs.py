"""Malformed map, robot and task-suite YAML: mutations of the shipped files (a string where a number is
expected, a list where a mapping is, null, negative, NaN, huge values, unknown keys, missing keys) load or
fail with a ConfigFileError (a ValueError) that names the file and the field, never another exception."""

import copy
import math
import os
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hrl.tasks import TASKS_DIR, load_suite
from robots._fields import ConfigFileError
from robots.spec import ROBOTS_DIR, RobotSpec
from sim.navigation.world import MAPS_DIR, World

#: What a hand-edited YAML value can turn into.
ODD_VALUES = [None, "", "text", "3.0", [], {}, [[1, 2], "x"], {"x": 1}, True, 0, -1, -0.5, 1e-12, 1e9, -1e9,
              1e308, -1e308, 10**30, math.nan, math.inf, -math.inf]  # fmt: skip
#: 60 mutations per file kind by default (about 3 s each); FUZZ_EXAMPLES=2000 for a longer hunt.
FUZZ = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def _paths(doc, prefix=()):
    if prefix:
        yield prefix
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        yield from _paths(value, (*prefix, key))


@st.composite
def mutations(draw, doc):
    """``doc`` with one to three values replaced, deleted or scaled, or unknown keys added."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(list(_paths(doc))))
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        key, value = path[-1], parent[path[-1]]
        op = draw(st.sampled_from(["replace", "replace", "number", "delete", "unknown_key", "scale"]))
        if op == "replace":
            parent[key] = copy.deepcopy(draw(st.sampled_from(ODD_VALUES)))  # later mutations may edit it
        elif op == "number":
            parent[key] = draw(st.floats() | st.integers(-(10**20), 10**20))
        elif op == "delete":
            del parent[key]
        elif op == "unknown_key" and isinstance(value, dict):
            value[draw(st.sampled_from(["colour", "nmae", "x", "rooms"]))] = copy.deepcopy(
                draw(st.sampled_from(ODD_VALUES))
            )
        elif op == "scale" and isinstance(value, (int, float)) and not isinstance(value, bool):
            parent[key] = value * draw(st.sampled_from([-1, 0, 1e6, 1e300]))
    return doc


def write(directory: Path, doc) -> Path:
    path = directory / "mutated.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def assert_named(err: ConfigFileError, path) -> None:
    assert str(err).startswith(f"{path}: ") and err.field, str(err)  # names the file and the field


def shipped(directory: Path) -> list[dict]:
    return [yaml.safe_load(p.read_text()) for p in sorted(directory.glob("*.yaml"))]


@FUZZ
@given(data=st.data())
def test_mutated_maps_load_or_name_file_and_field(tmp_path, data):
    doc = data.draw(st.sampled_from(shipped(MAPS_DIR)).flatmap(mutations))
    path = write(tmp_path, doc)
    try:
        world = World.from_file(path)
    except ConfigFileError as err:
        assert_named(err, path)
        return
    assert world.graph().number_of_nodes() == len(world.rooms) + len(world.doors)
    assert world.scene_text()


@FUZZ
@given(data=st.data())
def test_mutated_robot_specs_load_or_name_file_and_field(tmp_path, data):
    doc = yaml.safe_load((ROBOTS_DIR / "rover" / "rover.yaml").read_text())
    for key in ("mjcf", "urdf"):  # absolute: the mutated copy lives elsewhere
        doc[key] = str(ROBOTS_DIR / "rover" / doc[key])
    path = write(tmp_path, data.draw(mutations(doc)))
    try:
        robot = RobotSpec.from_yaml(path)
    except ConfigFileError as err:
        assert_named(err, path.resolve())
        return
    assert all(math.isfinite(a) for a in robot.lidar.angles())


@FUZZ
@given(data=st.data())
def test_mutated_task_suites_load_or_name_file_and_field(tmp_path, data):
    # three episodes keep it fast; the tabletop suites have their own loader (tests/hierarchy/test_tabletop_suites.py)
    navigation = [d for d in shipped(TASKS_DIR) if d.get("domain", "navigation") == "navigation"]
    docs = [d | {"episodes": d["episodes"][:3]} for d in navigation]
    path = write(tmp_path, data.draw(st.sampled_from(docs).flatmap(mutations)))
    try:
        load_suite(path).tasks()
    except ConfigFileError as err:
        assert_named(err, path)


@pytest.mark.parametrize(
    ("kind", "change", "message"),
    [
        ("map", {"bounds": [0, 0, "ten", 8]}, r"bounds: must be a number, got 'ten' \(str\)"),
        ("map", {"bounds": [0, 0, math.nan, 8]}, "bounds: must be finite, got nan"),
        ("map", {"wall_thickness": -0.1}, r"wall_thickness: must be > 0, got -0.1"),
        ("map", {"rooms": {"name": "kitchen"}}, r"rooms: must be a list, got \{'name'"),
        ("map", {"bounds": [0, 0, 1e300, 8]}, r"bounds: must be within \+-100000"),
        ("map", {"colour": "red"}, r"colour: unknown field; allowed: name"),
        ("robot", {"radius": "wide"}, r"radius: must be a number, got 'wide'"),
        ("robot", {"mass": -3}, r"mass: must be > 0, got -3"),
        ("robot", {"lidar": [1, 2]}, r"lidar: must be a mapping, got \[1, 2\]"),
        ("robot", {"radius": 1e12}, r"radius: must be <= "),
        ("robot", {"limits": None}, "limits: missing required field"),
        ("task", {"goal_tolerance": "close"}, r"goal_tolerance: must be a number, got 'close'"),
        ("task", {"max_episode_steps": 2.5}, r"max_episode_steps: must be an integer, got 2.5"),
        ("task", {"episodes": {"start": "dock"}}, r"episodes: must be a list"),
        ("task", {"map": "atlantis"}, r"map: unknown map 'atlantis'"),
        ("task", {"episodes": [{"start": "dock", "goals": "fridge"}]}, r"episodes\[0\].goals: must be a list"),
        ("task", {"episodes": [{"start": "dok", "goals": ["fridge"]}]}, r"episodes\[0\].start: 'dok' is not a named"),
        ("task", {"episodes": [{"start": [1, 1, 0], "goals": [[99.0, 1.0]]}]}, r"goals\[0\]: \[99.0, 1.0\] lies out"),
        ("task", {"episodes": [{"start": "dock", "goals": ["fridge"], "avoid": "kitchen"}]}, r"avoid: must be a list"),
        ("task", {"episodes": [{"start": "dock", "goals": ["fridge"], "speed": 2}]}, r"episodes\[0\].speed: unknown"),
    ],
)  # fmt: skip
def test_each_kind_of_mistake_is_named(tmp_path, kind, change, message):
    source = {"map": MAPS_DIR / "apartment.yaml", "robot": ROBOTS_DIR / "rover" / "rover.yaml",
              "task": TASKS_DIR / "apartment_long.yaml"}[kind]  # fmt: skip
    doc = yaml.safe_load(source.read_text()) | change
    if kind == "robot":
        doc |= {k: str(source.parent / doc[k]) for k in ("mjcf", "urdf")}
    path = write(tmp_path, doc)
    load = {"map": World.from_file, "robot": RobotSpec.from_yaml, "task": lambda p: load_suite(p).tasks()}[kind]
    with pytest.raises(ConfigFileError, match=message) as err:
        load(path)
    assert str(err.value).startswith(str(path.resolve() if kind == "robot" else path))
