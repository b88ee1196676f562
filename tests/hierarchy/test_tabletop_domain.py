"""The tabletop domain: its plan schema, grounding ("did you mean"), state predicates, slots in places, and
skills of another goal mode run in the hierarchy's pick-and-place env. Real MuJoCo/PyBullet envs and the
shipped skills; states are set up by teleporting objects (``env.physics.set_object_pose``)."""

from __future__ import annotations

import functools
import itertools
import json

import numpy as np
import pytest

from hierarchy.domain import Outcome, Step
from hierarchy.tabletop import (
    FINGER_REACH,
    SCRIPTED,
    TabletopDomain,
    _slot,
    holding,
    holds,
    resting_on,
)
from llm_planner.base import make_planner
from llm_planner.plan import PlanError
from llm_planner.tabletop import (
    GripperSubgoal,
    MoveTcpSubgoal,
    PickSubgoal,
    PlaceSubgoal,
    PushSubgoal,
    Relation,
    TabletopPlan,
    TabletopTask,
)
from sim.tabletop.scene import BIN_WALL_THICKNESS

BACKENDS = ["mujoco", "pybullet"]


def plan_of(*subgoals) -> TabletopPlan:
    return TabletopPlan(subgoals=list(subgoals))


def rest(env, name: str, x: float, y: float, on_z: float = 0.0) -> None:
    """Teleport ``name`` upright to (x, y), resting on a surface at height ``on_z``."""
    env.physics.set_object_pose(name, np.array([x, y, on_z + env.scene.object(name).size[2] / 2]))


# ---- the plan schema ----------------------------------------------------------------------------------------
def test_tabletop_plan_round_trips_through_json():
    plan = plan_of(
        PickSubgoal(object="red_block"),
        PlaceSubgoal(object="red_block", on="blue_block"),
        PushSubgoal(object="yellow_block", to="zone"),
        MoveTcpSubgoal(x=0.1, y=-0.1, z=0.2),
        GripperSubgoal(command="open"),
    )
    assert TabletopPlan.from_json(plan.to_json()) == plan
    assert json.loads(plan.to_json())["subgoals"][1] == {
        "kind": "place",
        "object": "red_block",
        "on": "blue_block",
        "via": "waypoints",
    }


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"subgoals": [{"kind": "throw", "object": "red_block"}]}, "throw"),
        ({"subgoals": [{"kind": "pick", "object": "red_block", "force": 3}]}, "force"),
        ({"subgoals": [{"kind": "place", "object": "red_block", "on": "blue_block", "via": "teleport"}]}, "via"),
        ({"subgoals": [{"kind": "gripper", "command": "squeeze"}]}, "command"),
        ({"subgoals": [{"kind": "move_tcp", "x": 0.1, "y": 0.0, "z": 0.9}]}, "z"),
        ({"subgoals": [{"kind": "pick", "object": ""}]}, "object"),
        ({"subgoals": []}, "subgoals"),
        ({"subgoals": [{"kind": "pick", "object": "red_block"}], "confidence": 0.9}, "confidence"),
    ],
)
def test_tabletop_plan_refuses_bad_kinds_fields_and_values_with_plan_error(data, problem):
    with pytest.raises(PlanError, match="invalid plan") as err:
        TabletopPlan.from_data(data)
    assert problem in str(err.value)
    with pytest.raises(PlanError, match="invalid plan"):
        TabletopPlan.from_json(json.dumps(data))


def test_tabletop_plan_from_json_refuses_text_that_is_not_json():
    with pytest.raises(PlanError, match="invalid plan"):
        TabletopPlan.from_json("pick up the red block, then put it on the blue one")


def test_json_schema_restricts_objects_and_places_to_the_scene_names():
    names = {"object": ["red_block", "blue_block"], "place": ["zone", "bin"]}
    defs = TabletopPlan.json_schema(names)["$defs"]
    for kind in ("PickSubgoal", "PlaceSubgoal", "PushSubgoal"):
        assert defs[kind]["properties"]["object"]["enum"] == ["blue_block", "red_block"]
    assert defs["PlaceSubgoal"]["properties"]["on"]["enum"] == ["bin", "blue_block", "red_block", "zone"]
    assert defs["PushSubgoal"]["properties"]["to"]["enum"] == ["bin", "zone"]
    unrestricted = TabletopPlan.json_schema()["$defs"]
    assert "enum" not in unrestricted["PickSubgoal"]["properties"]["object"]
    assert "enum" not in unrestricted["PushSubgoal"]["properties"]["to"]


# ---- grounding ----------------------------------------------------------------------------------------------
@pytest.fixture
def blocks(env_factory):
    env = env_factory("blocks")
    env.reset(seed=0)
    return env


@pytest.fixture
def sort_scene(env_factory):
    env = env_factory("sort")
    env.reset(seed=0)
    return env


def test_grounding_a_misspelt_object_says_which_subgoal_and_did_you_mean(domain, blocks):
    plan = plan_of(PickSubgoal(object="red_block"), PlaceSubgoal(object="red_blok", on="blue_block"))
    with pytest.raises(PlanError) as err:
        domain.ground(plan, domain.observe(blocks))
    message = str(err.value)
    assert message.startswith("subgoal 2 (place red_blok on blue_block): unknown object 'red_blok'")
    assert "did you mean 'red_block'?" in message
    assert "known: blue_block, red_block, yellow_block" in message


@pytest.mark.parametrize(
    ("subgoal", "expected"),
    [
        (PlaceSubgoal(object="red_block_1", on="red_bim"), "object or place 'red_bim' (did you mean 'red_bin'?)"),
        (PushSubgoal(object="green_block", to="zome"), "unknown place 'zome' (did you mean 'zone'?)"),
        (PushSubgoal(object="green_block", to="red_block_1"), "unknown place 'red_block_1'"),
    ],
)  # fmt: skip
def test_grounding_a_misspelt_or_wrong_kind_of_place_is_refused(domain, sort_scene, subgoal, expected):
    with pytest.raises(PlanError) as err:
        domain.ground(plan_of(subgoal), domain.observe(sort_scene))
    assert expected in str(err.value)


def test_grounding_refuses_placing_an_object_on_itself(domain, blocks):
    with pytest.raises(PlanError, match="cannot place 'red_block' on itself"):
        domain.ground(plan_of(PlaceSubgoal(object="red_block", on="Red_Block")), domain.observe(blocks))


def test_grounding_accepts_names_in_any_case(domain, blocks):
    scene = domain.observe(blocks)
    (grounded,) = domain.ground(plan_of(PlaceSubgoal(object="RED_Block", on=" Blue_block")), scene)
    assert {s.object for s in grounded.steps if s.object is not None} == {"red_block"}
    onto = [s for s in grounded.steps if s.label == "onto blue_block"]
    assert len(onto) == 1
    blue = blocks.physics.object_state("blue_block").position
    target = onto[0].goal(blocks)
    np.testing.assert_allclose(target[:2], blue[:2])
    assert target[2] == pytest.approx(blue[2] + 0.025 + 0.02)  # on the 5 cm block's top, half the 4 cm block up


def test_grounding_refuses_a_skill_the_domain_has_not_loaded(blocks):
    scripted_only = TabletopDomain(skills=dict(SCRIPTED))
    scene = scripted_only.observe(blocks)
    assert scripted_only.ground(plan_of(GripperSubgoal(command="close")), scene)[0].steps[0].skill == "close"
    with pytest.raises(PlanError, match="no 'pick_place' skill is loaded; the domain has close, open, release"):
        scripted_only.ground(plan_of(PickSubgoal(object="red_block")), scene)


def test_place_on_an_object_lowers_with_the_skill_and_into_a_place_with_the_release(domain, sort_scene):
    scene = domain.observe(sort_scene)
    on_block, in_bin = domain.ground(
        plan_of(PlaceSubgoal(object="green_block", on="red_block_1"), PlaceSubgoal(object="red_block_2", on="red_bin")),
        scene,
    )
    assert [s.skill for s in on_block.steps] == ["reach", "pick_place", "pick_place", "pick_place", "release"]
    assert [s.skill for s in in_bin.steps] == ["reach", "pick_place", "pick_place", "release"]
    # Carried over the target at HOVER before lowering: the hover point lies above the final one.
    hover, final = in_bin.steps[2].goal(sort_scene), in_bin.steps[3].goal(sort_scene)
    np.testing.assert_allclose(hover[:2], final[:2])
    assert hover[2] > final[2]
    assert sort_scene.scene.place("red_bin").contains(final[:2])


def test_flat_planner_places_each_goal_directly(domain, blocks):
    task = TabletopTask("tower", (Relation("red_block", "blue_block"), Relation("yellow_block", "red_block")))
    plan = make_planner("flat").plan(task, domain.observe(blocks))
    assert [(s.kind, s.object, s.on, s.via) for s in plan.subgoals] == [
        ("place", "red_block", "blue_block", "direct"),
        ("place", "yellow_block", "red_block", "direct"),
    ]
    grounded = domain.ground(plan, domain.observe(blocks))
    assert [[s.skill for s in g.steps] for g in grounded] == [["pick_place", "release"]] * 2


def test_symbolic_planner_places_each_goal_in_the_task_order(domain, blocks):
    task = TabletopTask("tower", (Relation("red_block", "blue_block"), Relation("yellow_block", "red_block")))
    plan = make_planner("symbolic").plan(task, domain.observe(blocks))
    assert [s.label() for s in plan.subgoals] == ["place red_block on blue_block", "place yellow_block on red_block"]
    assert all(s.via == "waypoints" for s in plan.subgoals)


# ---- state predicates ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_holds_on_an_object_needs_it_centred_within_2cm_at_resting_height(env_factory, backend):
    env = env_factory("blocks", backend)
    env.reset(seed=0)
    rest(env, "blue_block", 0.0, 0.0)
    top = 0.05
    on_blue = Relation("red_block", "blue_block")
    for dx, dz, expected in [
        (0.0, 0.0, True),
        (0.015, 0.0, True),  # off-centre but within 2 cm
        (0.03, 0.0, False),  # beyond 2 cm: it would tip off
        (0.0, 0.03, False),  # in the air above it
    ]:
        rest(env, "red_block", dx, 0.0, top + dz)
        assert holds(env, on_blue) is expected, (dx, dz)
        assert resting_on(env, "red_block") == ("blue_block" if expected else None)
    rest(env, "red_block", 0.0, 0.0, top)
    assert not holds(env, Relation("blue_block", "red_block"))  # the relation is not symmetric
    assert not holds(env, Relation("red_block", "yellow_block"))
    assert resting_on(env, "blue_block") is None  # the bare table


@pytest.mark.parametrize("backend", BACKENDS)
def test_holds_in_a_place_needs_it_inside_and_down(env_factory, backend):
    env = env_factory("sort", backend)
    env.reset(seed=0)
    red_bin = env.scene.place("red_bin")
    cx, cy = red_bin.center
    rest(env, "red_block_1", cx, cy, red_bin.surface_z)
    assert holds(env, Relation("red_block_1", "red_bin"))
    assert not holds(env, Relation("red_block_1", "blue_bin"))
    assert resting_on(env, "red_block_1") == "red_bin"
    rest(env, "red_block_1", cx, cy, red_bin.surface_z + 0.1)  # above the bin, not in it
    assert not holds(env, Relation("red_block_1", "red_bin"))
    rest(env, "red_block_1", cx + red_bin.size[0], cy)  # beside the bin
    assert not holds(env, Relation("red_block_1", "red_bin"))
    plate = env.scene.place("plate")
    rest(env, "green_block", *plate.center, plate.surface_z)
    assert resting_on(env, "green_block") == "plate"


def test_an_object_in_the_gripper_holds_nowhere_and_the_scene_says_so(domain, blocks):
    (pick,) = domain.ground(plan_of(PickSubgoal(object="red_block")), domain.observe(blocks))
    for step in pick.steps:
        assert domain.skills[step.skill].run(blocks, step, 200, lambda: None).outcome == Outcome.REACHED
    assert holding(blocks) == "red_block"
    view = domain.observe(blocks)
    assert view.holding == "red_block" and view.object("red_block").on == "gripper"
    assert "red_block: red 4 cm block at" in view.text() and "in the gripper" in view.text()
    # Held right over the blue block at resting height, it is still not "on" it: it has not been let go.
    blue = blocks.physics.object_state("blue_block").position
    blocks.physics.set_object_pose("blue_block", blocks.physics.object_state("red_block").position - [0, 0, 0.045])
    assert not holds(blocks, Relation("red_block", "blue_block"))
    blocks.physics.set_object_pose("blue_block", blue)


def test_scene_text_lists_objects_where_they_rest_and_places(domain, sort_scene, blocks):
    red_bin = sort_scene.scene.place("red_bin")
    rest(sort_scene, "red_block_1", *red_bin.center, red_bin.surface_z)
    text = domain.observe(sort_scene).text()
    lines = text.splitlines()
    assert lines[0] == "Objects:"
    for o in sort_scene.scene.objects:
        assert sum(line.startswith(f"- {o.name}: {o.color} ") for line in lines) == 1
    assert "- red_block_1: red 4 cm block at (-0.20, 0.26), on red_bin" in lines
    assert "- blue_block_2: blue 5 cm block at" in text
    assert "- green_bin: green bin at (0.10, 0.26)" in lines
    assert "- zone: yellow zone at (-0.16, -0.26)" in lines
    assert domain.observe(blocks).text().endswith("Places: none")


# ---- slots in places ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("scene", "place"), [("sort", "red_bin"), ("sort", "plate"), ("clear", "bin")])
def test_slots_lie_inside_the_place_and_keep_the_fingers_off_bin_walls(env_factory, scene, place):
    env = env_factory(scene)
    env.reset(seed=3)
    p = env.scene.place(place)
    for o in env.scene.objects:
        spot = _slot(env, o.name, place)
        assert p.contains(spot[:2]), (o.name, spot)
        assert spot[2] == pytest.approx(p.surface_z + o.size[2] / 2)
        if p.kind == "bin":
            assert abs(spot[1] - p.center[1]) <= p.size[1] / 2 - BIN_WALL_THICKNESS - FINGER_REACH + 1e-9
        half_x = p.size[0] / 2 - (BIN_WALL_THICKNESS if p.kind == "bin" else 0.0)
        assert abs(spot[0] - p.center[0]) + o.size[0] / 2 <= half_x + 1e-9  # the whole block inside, along x


@pytest.mark.parametrize(("scene", "place"), [("sort", "red_bin"), ("clear", "bin")])
def test_objects_put_in_the_same_place_one_after_another_get_spots_that_do_not_overlap(env_factory, scene, place):
    env = env_factory(scene)
    env.reset(seed=0)
    objects = [o for o in env.scene.objects if scene == "clear" or o.color == "red"]
    assert len(objects) >= 2
    spots = {}
    for o in objects:
        spots[o.name] = _slot(env, o.name, place)
        env.physics.set_object_pose(o.name, spots[o.name])  # put there, as the release would
    for a, b in itertools.combinations(objects, 2):
        gap = np.abs(spots[a.name][:2] - spots[b.name][:2])
        assert gap.max() >= (a.size[0] + b.size[0]) / 2, (a.name, b.name, spots[a.name], spots[b.name])
    assert all(resting_on(env, o.name) == place for o in objects)


# ---- skills of another goal mode -----------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_push_skill_runs_in_the_pick_and_place_env_with_the_gripper_closed(domain, env_factory, backend):
    """Four pushes of 6 cm (one per direction) from the same layout. A learned skill's single push is not a
    certainty (the shipped push reaches 2 cm in ~90 % of its own episodes, fewer from the hierarchy's layouts), and
    which ones miss depends on the CPU's float path (2026-12-08, an Intel Xeon: the +x push that an AMD EPYC
    finished in PyBullet stopped 3.5 cm short). So: every push counts its steps, closes the gripper and brings the
    block nearer its goal; most reach it."""
    push = domain.skills["push"]
    assert (push.goal_mode, push.block_gripper, push.gripper) == ("push", True, -1.0)
    assert push.policy.env_config.kwargs["goal_mode"] == "push"
    reached = 0
    for direction in ((0.06, 0.0), (0.0, 0.06), (-0.06, 0.0), (0.0, -0.06)):
        env = env_factory("blocks", backend)
        env.reset(seed=0)
        assert env.action_space.shape == (4,)  # the hierarchy's env: the gripper is free
        opened = env.physics.finger_width()
        start = env.physics.object_state("red_block").position.copy()
        goal = start + np.array([*direction, 0.0])
        count: list[int] = []
        step = Step("push", lambda e, goal=goal: goal, "red_block", 0.02, 80)
        result = push.run(env, step, 80, functools.partial(count.append, 1))
        assert result.steps == len(count) > 0
        assert result.outcome in (Outcome.REACHED, Outcome.STUCK), result
        reached += result.outcome == Outcome.REACHED
        moved = env.physics.object_state("red_block").position
        left = np.linalg.norm(moved[:2] - goal[:2])
        assert left < 0.045 < np.linalg.norm(start[:2] - goal[:2]), (direction, left)
        # Each action had a fourth entry, the gripper: -1 closed it over the push (it started wide open).
        assert opened > 0.07 and env.physics.finger_width() < 0.005
    assert reached >= 2, reached


def test_reach_skill_holds_the_gripper_command_its_step_asks_for(domain, blocks):
    reach = domain.skills["reach"]
    assert reach.block_gripper and reach.goal_mode == "reach"
    here = blocks.tcp()[0].copy()
    goal = here + np.array([0.0, 0.0, 0.05])
    closing = Step("reach", lambda e: goal, None, 0.02, 40, gripper=-1.0)
    assert reach.run(blocks, closing, 40, lambda: None).outcome == Outcome.REACHED
    assert blocks.physics.finger_width() < 0.07


def test_a_scene_without_places_has_no_push_in_its_schema():
    """An empty enum of places would be an empty grammar rule in llama.cpp: the schema drops push instead."""
    import json

    from llama_cpp.llama_grammar import json_schema_to_gbnf

    from llm_planner.tabletop import TabletopPlan

    schema = TabletopPlan.json_schema({"object": ["red_block", "blue_block"], "place": []})
    assert "PushSubgoal" not in schema["$defs"]
    assert "push" not in json.dumps(schema["properties"]["subgoals"])
    assert "PushSubgoal" not in json_schema_to_gbnf(json.dumps(schema))
    with_places = TabletopPlan.json_schema({"object": ["red_block"], "place": ["bin"]})
    assert with_places["$defs"]["PushSubgoal"]["properties"]["to"]["enum"] == ["bin"]


def test_every_subgoal_kind_is_required_in_the_schema():
    """kind has a default, which pydantic's schema leaves optional; a grammar that may skip it lets a model write a
    subgoal no parser can tell apart."""
    from llm_planner.tabletop import TabletopPlan

    for names in (None, {"object": ["red_block"], "place": ["bin"]}):
        defs = TabletopPlan.json_schema(names)["$defs"]
        subgoals = [d for k, d in defs.items() if k.endswith("Subgoal")]
        assert len(subgoals) == 5 and all(d["required"][0] == "kind" for d in subgoals)
