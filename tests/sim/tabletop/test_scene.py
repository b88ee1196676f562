import copy
import math

import numpy as np
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from robots._fields import ConfigFileError
from sim.tabletop.scene import PALETTE, SCENES_DIR, TabletopScene, load_scene, scene_names
from tests.test_malformed_inputs import FUZZ, assert_named, mutations, shipped, write


def base_scene() -> dict:
    """Two cubes, a bin and a plate; each validation test breaks one thing."""
    return {
        "name": "t",
        "objects": [
            {"name": "red_block", "size": 0.04, "color": "red"},
            {"name": "tall", "size": [0.04, 0.04, 0.08], "color": [0.2, 0.2, 0.2, 1.0], "mass": 0.2},
        ],
        "places": [
            {"name": "bin", "kind": "bin", "center": [0.0, 0.25], "size": [0.12, 0.12]},
            {"name": "plate", "kind": "plate", "center": [0.0, -0.25], "size": [0.1, 0.1], "color": "white"},
        ],
    }


def load_dict(tmp_path, data) -> TabletopScene:
    path = tmp_path / "sort.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_scene(path)


def assert_valid_layout(scene: TabletopScene, layout: dict) -> None:
    """Centres in the workspace, footprint circles min_gap apart and min_gap from every place."""
    (x0, x1), (y0, y1) = scene.workspace
    for name, (x, y, yaw) in layout.items():
        assert x0 <= x <= x1 and y0 <= y <= y1 and -math.pi <= yaw <= math.pi
        r = scene.object(name).footprint_radius
        for place in scene.places:
            assert place.distance(np.array([[x, y]]))[0] >= r + scene.min_gap
        for other, (ox, oy, _) in layout.items():
            if other != name:
                assert math.dist((x, y), (ox, oy)) >= r + scene.object(other).footprint_radius + scene.min_gap


def test_the_three_scenes_are_shipped():
    assert {"single_cube", "blocks", "sort"} <= set(scene_names())


@pytest.mark.parametrize("name", scene_names())
def test_shipped_scenes_load_with_a_valid_layout(name):
    scene = load_scene(name)
    assert scene.name == name and scene.objects
    assert_valid_layout(scene, scene.sample_layout(np.random.default_rng(3)))
    for obj in scene.objects:
        assert obj.name in scene.describe() and obj.color in PALETTE


def test_single_cube_matches_panda_gym_frames():
    scene = load_scene("single_cube")
    assert scene.robot_base == (-0.6, 0.0, 0.0)
    assert scene.workspace == ((-0.15, 0.15), (-0.15, 0.15))
    assert (*scene.table.low, *scene.table.high) == pytest.approx((-0.85, -0.35, 0.25, 0.35))
    (cube,) = scene.objects
    assert cube.size == (0.04, 0.04, 0.04) and cube.rest_z == 0.02
    assert cube.mass == pytest.approx(700 * 0.04**3)  # the default density, a wooden block


def test_sort_has_a_bin_per_block_colour_a_plate_and_a_zone():
    scene = load_scene("sort")
    bins = {p.color for p in scene.places if p.kind == "bin"}
    assert {o.color for o in scene.objects} == bins and len(scene.objects) >= 4
    assert {p.kind for p in scene.places} == {"bin", "plate", "zone"}
    assert len({o.size for o in load_scene("blocks").objects}) == 2


def test_places_contain_their_centre_but_not_their_walls():
    scene = load_scene("sort")
    red_bin = scene.place("red_bin")
    assert scene.place_contains("red_bin", red_bin.center)
    assert scene.place_contains("red_bin", (red_bin.center[0] + 0.054, red_bin.center[1]))  # just inside the wall
    assert not scene.place_contains("red_bin", (red_bin.center[0] + 0.058, red_bin.center[1]))  # in the wall
    assert not scene.place_contains("red_bin", (0.0, 0.0))
    assert scene.place_at("plate") == (0.06, -0.26, 0.01)  # on top of the plate
    assert scene.place_at("red_bin")[2] == 0.005  # on its floor


def test_layouts_are_seeded_and_differ_across_seeds():
    scene = load_scene("sort")
    layouts = [scene.sample_layout(np.random.default_rng(seed)) for seed in range(20)]
    assert scene.sample_layout(np.random.default_rng(7)) == layouts[7]
    assert len({tuple(sorted(layout.items())) for layout in layouts}) == 20
    for layout in layouts:
        assert_valid_layout(scene, layout)


def test_layout_of_a_subset_and_random_yaw(tmp_path):
    scene = load_dict(tmp_path, base_scene() | {"random_yaw": True})
    layout = scene.sample_layout(np.random.default_rng(0), objects=["tall"])
    assert list(layout) == ["tall"] and layout["tall"][2] != 0.0
    with pytest.raises(ValueError, match=r"unknown object 'tal' in scene 't' \(did you mean 'tall'\?\)"):
        scene.sample_layout(np.random.default_rng(0), objects=["tal"])
    with pytest.raises(TypeError, match="list of object names"):
        scene.sample_layout(np.random.default_rng(0), objects="tall")


def test_sample_point_is_in_the_workspace_on_the_table_or_in_the_air():
    scene, rng = load_scene("single_cube"), np.random.default_rng(0)
    table = np.array([scene.sample_point(rng) for _ in range(200)])
    air = np.array([scene.sample_point(rng, z_range=(0.0, 0.2)) for _ in range(200)])
    for points in (table, air):
        assert np.all(np.abs(points[:, :2]) <= 0.15)
    assert np.all(table[:, 2] == 0.0) and np.all((air[:, 2] >= 0.0) & (air[:, 2] <= 0.2)) and air[:, 2].std() > 0.03
    with pytest.raises(ValueError, match="z_range must be"):
        scene.sample_point(rng, z_range=(0.2, 0.1))


def test_impossible_layout_names_the_scene_and_objects(tmp_path):
    data = base_scene()
    data["objects"] = [{"name": f"big_{i}", "size": 0.12, "color": "blue"} for i in range(6)]
    with pytest.raises(ConfigFileError, match=r"sort.yaml: objects: scene 't': found no layout of \['big_0', ") as e:
        load_dict(tmp_path, data)
    assert "enlarge the workspace" in str(e.value)


def _mutate(fn):
    data = base_scene()
    fn(data)
    return data


CASES = [
    ("size in millimetres", lambda d: d["objects"][1].update(size=[40, 40, 80]), r"objects\[1\].size: must be 3 sizes"),
    ("negative edge", lambda d: d["objects"][0].update(size=-0.04), r"objects\[0\].size: must be > 0"),
    ("mass in grams", lambda d: d["objects"][1].update(mass=200), r"objects\[1\].mass: must be <= 20"),
    (
        "colour typo",
        lambda d: d["objects"][0].update(color="rde"),
        r"objects\[0\].color: unknown color 'rde' \(did you mean 'red'\?\)",
    ),
    (
        "rgba out of range",
        lambda d: d["objects"][1].update(color=[255, 0, 0, 1]),
        r"objects\[1\].color: must be a palette name or \[r, g, b, a\]",
    ),
    (
        "unknown shape",
        lambda d: d["objects"][0].update(shape="sphere"),
        r"objects\[0\].shape: unknown shape 'sphere'; shapes: box",
    ),
    (
        "unknown object key",
        lambda d: d["objects"][0].update(colour="red"),
        r"objects\[0\].colour: unknown field \(did you mean 'color'\?\)",
    ),
    ("missing colour", lambda d: d["objects"][0].pop("color"), r"objects\[0\].color: missing required field"),
    ("no objects", lambda d: d.update(objects=[]), r"objects: a scene needs at least one object"),
    (
        "duplicate name across objects and places",
        lambda d: d["places"][1].update(name="Red_Block"),
        r"places\[1\].name: duplicate name 'Red_Block' \(already used by objects\[0\]\)",
    ),
    (
        "place kind typo",
        lambda d: d["places"][0].update(kind="bim"),
        r"places\[0\].kind: unknown kind 'bim' \(did you mean 'bin'\?\)",
    ),
    (
        "walls on a plate",
        lambda d: d["places"][1].update(wall_height=0.03),
        r"places\[1\].wall_height: only bins have walls",
    ),
    (
        "place off the table",
        lambda d: d["places"][0].update(center=[0.0, 0.33]),
        r"places\[0\].center: bin 'bin' \(x -0.060..0.060, y 0.270..0.390\) is not on the table",
    ),
    (
        "place out of reach",
        lambda d: d["places"][0].update(center=[0.18, 0.28]),
        r"places\[0\].center: bin 'bin' reaches 0.9\d\d m from the robot base",
    ),
    (
        "place on the robot base",
        lambda d: d["places"][1].update(center=[-0.55, 0.1]),
        r"places\[1\].center: plate 'plate' comes within 0.050 m of the robot base at \[-0.6, 0.0\]",
    ),
    (
        "overlapping places",
        lambda d: d["places"][1].update(center=[0.05, 0.22]),
        r"places\[1\].center: plate 'plate' overlaps bin 'bin' \(places\[0\]\)",
    ),
    (
        "place size in millimetres",
        lambda d: d["places"][1].update(size=[100, 100]),
        r"places\[1\].size: must be 2 sizes in metres",
    ),
    (
        "workspace off the table",
        lambda d: d.update(workspace={"x": [-0.15, 0.15], "y": [-0.34, 0.34]}),
        r"workspace: the workspace plus the largest object.s footprint radius 0.028 m "
        r"\(x -0.178..0.178, y -0.368..0.368\) is not on the table",
    ),
    (
        "workspace reversed",
        lambda d: d.update(workspace={"x": [0.1, -0.1]}),
        r"workspace.x: must be \[lo, hi\] with hi > lo",
    ),
    (
        "table height typo",
        lambda d: d.update(table={"heigth": 0.4}),
        r"table.heigth: unknown field \(did you mean 'height'\?\)",
    ),
    ("robot base far away", lambda d: d.update(robot={"base": [-600, 0, 0]}), r"robot.base: must be within \+-10 m"),
    ("negative gap", lambda d: d.update(min_gap=-0.01), r"min_gap: must be >= 0"),
]


@pytest.mark.parametrize(("what", "mutation", "message"), CASES, ids=[c[0] for c in CASES])
def test_validation_errors_name_file_and_field(tmp_path, what, mutation, message):
    with pytest.raises(ConfigFileError, match=r"sort.yaml: " + message):
        load_dict(tmp_path, _mutate(mutation))


def test_base_scene_is_valid(tmp_path):
    """The fixture the error cases mutate is itself valid, so each case fails for its own reason."""
    scene = load_dict(tmp_path, base_scene())
    assert [o.name for o in scene.objects] == ["red_block", "tall"]
    assert scene.object("tall").color == "" and scene.object("tall").mass == 0.2
    assert scene.place("bin").color == "grey" and scene.place("bin").wall_height == 0.03


def test_unknown_scene_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown scene 'sortt' \(did you mean 'sort'\?\); known scenes: blocks,"):
        load_scene("sortt")
    with pytest.raises(FileNotFoundError, match=r"missing\.yaml"):
        load_scene("missing.yaml")


@FUZZ
@given(data=st.data())
def test_mutated_scenes_load_or_name_file_and_field(tmp_path, data):
    doc = data.draw(
        st.sampled_from([copy.deepcopy(d) for d in shipped(SCENES_DIR)] + [base_scene()]).flatmap(mutations)
    )
    path = write(tmp_path, doc)
    try:
        scene = load_scene(path)
    except ConfigFileError as err:
        assert_named(err, path)
        return
    assert_valid_layout(scene, scene.sample_layout(np.random.default_rng(0)))
    assert scene.describe()
