import json

import pytest

from llm_planner.plan import (
    DoorTarget,
    LandmarkTarget,
    Plan,
    PlanError,
    PointTarget,
    RoomTarget,
    Subgoal,
    ground,
)
from sim.navigation.world import load_world


@pytest.fixture(scope="module")
def world():
    return load_world("apartment")


def test_plan_roundtrip_json():
    plan = Plan(
        subgoals=[
            Subgoal(target=LandmarkTarget(name="fridge"), tolerance=0.3, step_budget=100, rationale="hungry"),
            Subgoal(target=PointTarget(x=2.0, y=3.5)),
            Subgoal(target=RoomTarget(name="office")),
            Subgoal(target=DoorTarget(name="office_door")),
        ]
    )
    again = Plan.from_json(plan.to_json())
    assert again == plan
    assert json.loads(plan.to_json())["subgoals"][0]["target"] == {"kind": "landmark", "name": "fridge"}


def test_json_schema_restricts_names():
    schema = Plan.json_schema({"landmark": ["sink", "fridge"], "room": ["kitchen"]})
    assert schema["$defs"]["LandmarkTarget"]["properties"]["name"]["enum"] == ["fridge", "sink"]
    assert schema["$defs"]["RoomTarget"]["properties"]["name"]["enum"] == ["kitchen"]
    assert "enum" not in schema["$defs"]["DoorTarget"]["properties"]["name"]
    json.dumps(schema)


def test_ground_resolves_names_aliases_and_points(world):
    plan = Plan(
        subgoals=[
            Subgoal(target=LandmarkTarget(name="Refrigerator")),
            Subgoal(target=RoomTarget(name="office")),
            Subgoal(target=DoorTarget(name="kitchen_door")),
            Subgoal(target=PointTarget(x=6.0, y=3.75)),
        ]
    )
    g = ground(plan, world)
    assert g[0].xy == (0.7, 7.2)
    assert g[1].xy == pytest.approx(world.room("office").center)
    assert g[2].xy == (4.0, 6.5)
    assert g[3].xy == (6.0, 3.75)
    assert all(s.step_budget > 0 and s.tolerance > 0 for s in g)


def test_a_room_is_grounded_where_its_task_is_judged():
    """A room whose centre is close to a wall: the plan sends the robot to the free point the task's check uses
    (goal_point), not to the centre against the wall (grounding used 0 m clearance, judging 0.3 m)."""
    from llm_planner.planners.common import goal_point
    from sim.navigation.world import World

    world = World.from_dict(
        {
            "name": "pillar",
            "bounds": [0.0, 0.0, 6.0, 4.0],
            "walls": [[[3.1, 1.5], [3.1, 2.5]]],  # a short wall 0.1 m beside the room's centre (3, 2)
            "rooms": [{"name": "hall", "rect": [0.0, 0.0, 6.0, 4.0]}],
        }
    )
    (point,) = [s.xy for s in ground(Plan(subgoals=[Subgoal(target=RoomTarget(name="hall"))]), world)]
    assert point == pytest.approx(goal_point("hall", world))
    assert point != pytest.approx((3.0, 2.0))  # not the centre, 0.1 m from the wall
    assert world.is_free(point, 0.29)


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (LandmarkTarget(name="fridg"), r"unknown landmark 'fridg' \(did you mean 'fridge'\?\); known: fridge"),
        (RoomTarget(name="garage"), r"unknown room 'garage'; known: kitchen, living_room"),
        (DoorTarget(name="back_door"), r"unknown door 'back_door'"),
        (PointTarget(x=50.0, y=1.0), r"point \[50.0, 1.0\] lies outside map 'apartment'"),
        (PointTarget(x=4.0, y=4.5), r"point \[4.0, 4.5\] lies inside a wall"),
        (RoomTarget(name="fridge"), "is a landmark, not a room"),
    ],
)
def test_ground_rejects_bad_targets(world, target, message):
    with pytest.raises(PlanError, match=message):
        ground(Plan(subgoals=[Subgoal(target=target)]), world)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"subgoals": []}, "subgoals: List should have at least 1 item"),
        ({"subgoals": [{"target": {"kind": "landmark", "name": "sink"}, "step_budget": 0}]}, "step_budget"),
        ({"subgoals": [{"target": {"kind": "landmark", "name": "sink"}, "step_budget": -5}]}, "greater than 0"),
        ({"subgoals": [{"target": {"kind": "teleport", "name": "sink"}}]}, "kind"),
        ({"subgoals": [{"target": {"kind": "point", "x": "nan", "y": 1}}]}, "finite"),
        ({"subgoals": [{"target": {"kind": "landmark", "name": "sink"}, "speed": 9}]}, "speed"),
    ],
)
def test_malformed_plans_rejected(data, message):
    with pytest.raises(PlanError, match=message):
        Plan.from_data(data)


def test_untrusted_json_is_parsed_never_run():
    with pytest.raises(PlanError, match="invalid plan"):
        Plan.from_json('__import__("os").system("echo pwned")')
