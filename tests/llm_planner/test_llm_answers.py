"""Answer schemas, parsing, grounding and route checks of the LLM planners (no model needed)."""

import json
import re

import pytest

from llm_planner.llm.answers import (
    TAGS,
    GoalsAnswer,
    RouteAnswer,
    answer_schema,
    match_phrase,
    parse_answer,
    parse_spans,
    parse_tagged,
    phrases,
    route_plan,
    route_rooms_and_targets,
    span_schema,
    tagged_goals,
    tagged_schema,
)
from llm_planner.llm.prompts import oracle_route
from llm_planner.plan import PlanError, ground
from sim.navigation.world import load_world


@pytest.fixture(scope="module")
def apartment():
    return load_world("apartment")


@pytest.fixture(scope="module")
def house():
    return load_world("house")


def test_schemas_enumerate_the_scene_names_in_a_fixed_key_order(apartment):
    goals = answer_schema("llm_goals", apartment)
    assert list(goals["properties"]) == ["targets", "avoid"]  # targets first: the grammar keeps this order
    assert "fridge" in goals["properties"]["targets"]["items"]["enum"]
    assert "kitchen" in goals["properties"]["targets"]["items"]["enum"]
    assert goals["properties"]["avoid"]["items"]["enum"] == [r.name for r in apartment.rooms]
    route = answer_schema("llm_route", apartment)["properties"]["route"]["items"]["enum"]
    assert "kitchen_door" in route and "sofa" in route
    with pytest.raises(ValueError, match="unknown LLM planner mode"):
        answer_schema("llm_dance", apartment)


def test_parse_makes_names_canonical_and_collapses_repeats(apartment):
    a = parse_answer("llm_goals", '{"targets": ["Refrigerator", "fridge", "charging dock"], "avoid": []}', apartment)
    assert a.targets == ["fridge", "charging_dock"]
    r = parse_answer("llm_route", '{"route": ["KITCHEN_DOOR", "couch"]}', apartment)
    assert r.route == ["kitchen_door", "sofa"]


@pytest.mark.parametrize(
    "text, match",
    [
        ("not json at all", "not valid JSON"),
        ('{"targets": []}', "targets"),
        ('{"targets": ["fridge"], "avoid": [], "run": "rm -rf /"}', "Extra inputs"),
        ('{"targets": ["../../etc/passwd"], "avoid": []}', "not a landmark or room"),
        ('{"targets": ["__import__(\'os\')"], "avoid": []}', "not a landmark or room"),
        ('{"targets": ["fridge"], "avoid": ["fridge"]}', "not a room"),
        ('{"targets": ["fridge"], "avoid": ["kitchen"]}', "also says to avoid"),
    ],
)
def test_bad_answers_are_rejected_with_a_reason(apartment, text, match):
    with pytest.raises(PlanError, match=match):
        parse_answer("llm_goals", text, apartment)


def mentions(*pairs):
    return json.dumps({"mentions": [{"place": p, "as": t} for p, t in pairs]})


def test_tagged_mentions_are_ordered_by_their_tags_then_by_the_sentence(apartment):
    # "The study first, the living room last, the fridge in between."
    a = parse_tagged(mentions(("office", "first"), ("living_room", "last"), ("fridge", "then")), apartment)
    assert (a.targets, a.avoid) == (["office", "fridge", "living_room"], [])
    # "Save the laundry... the bed for last; begin with the sofa, then the desk."
    a = parse_tagged(mentions(("bed", "last"), ("sofa", "first"), ("desk", "then")), apartment)
    assert a.targets == ["sofa", "desk", "bed"]
    # a correction's first place is dropped; an avoided room is avoided; names made canonical
    a = parse_tagged(mentions(("Refrigerator", "not"), ("couch", "then"), ("Bathroom", "avoid")), apartment)
    assert (a.targets, a.avoid) == (["sofa"], ["bathroom"])
    assert tagged_goals([("a", "then"), ("b", "then"), ("c", "first")]) == {"targets": ["c", "a", "b"], "avoid": []}


@pytest.mark.parametrize(
    "text, match",
    [
        ("not json", "not valid JSON"),
        ('{"mentions": []}', "mentions"),
        (mentions(("fridge", "maybe")), "tagged 'maybe'; tags: first, then, last, avoid, not"),
        (mentions(("kitchen", "avoid")), "tags no place first, then or last"),
        (mentions(("fridge", "then"), ("kitchen", "avoid")), "also says to avoid"),
        (mentions(("fridge", "then"), ("sofa", "avoid")), "not a room"),
        (mentions(*[(p, "then") for p in ("fridge", "sofa", "bed", "desk", "sink")]), "5 targets"),
        (mentions(("attic", "then")), "not a landmark or room"),
    ],
)
def test_bad_tagged_answers_are_rejected_with_a_reason(apartment, text, match):
    with pytest.raises(PlanError, match=re.escape(match) if "'" in match else match):
        parse_tagged(text, apartment)


def test_the_tagged_schema_enumerates_places_and_tags(apartment):
    item = tagged_schema(apartment)["properties"]["mentions"]["items"]
    assert list(item["properties"]) == ["place", "as"] and item["required"] == ["place", "as"]
    assert {"fridge", "kitchen"} <= set(item["properties"]["place"]["enum"])
    assert item["properties"]["as"]["enum"] == list(TAGS)


def test_unknown_name_error_lists_the_known_names(apartment):
    with pytest.raises(PlanError, match=r"known: .*fridge"):
        parse_answer("llm_goals", '{"targets": ["jacuzzi"], "avoid": []}', apartment)


def test_a_valid_route_expands_doors_into_approach_points(apartment):
    start = apartment.room("hallway").center
    answer = RouteAnswer(route=["living_room_door", "kitchen_door", "fridge"])
    plan = route_plan(answer, apartment, start)
    points = ground(plan, apartment)
    assert plan.subgoals[-1].target.kind == "landmark" and plan.subgoals[-1].target.name == "fridge"
    assert len(points) >= 7  # 3 points per door + the fridge
    assert [p.xy for p in points if p.xy in ((7.5, 4.5), (4.0, 6.5))] == [(7.5, 4.5), (4.0, 6.5)]
    rooms, targets = route_rooms_and_targets(answer, apartment, start)
    assert rooms == ["hallway", "living_room", "kitchen"] and targets == ["fridge"]


@pytest.mark.parametrize(
    "route, match",
    [
        (["kitchen_door"], "does not leave 'hallway'"),
        (["fridge"], "'fridge' is in 'kitchen' but the route is in 'hallway'"),
        (["kitchen"], "reach 'kitchen' through a door first"),
    ],
)
def test_invalid_routes_say_what_is_wrong(apartment, route, match):
    with pytest.raises(PlanError, match=match):
        route_plan(RouteAnswer(route=route), apartment, apartment.room("hallway").center)
    assert route_rooms_and_targets(RouteAnswer(route=route), apartment, apartment.room("hallway").center) is None


def test_oracle_route_avoids_rooms_and_is_valid(house):
    route = oracle_route(house, "kitchen", ("living_room",), avoid=("dining_room",))
    rooms, targets = route_rooms_and_targets(RouteAnswer(route=route), house, house.room("kitchen").center)
    assert "dining_room" not in rooms and targets == ["living_room"]
    assert oracle_route(house, "kitchen", ("living_room",)) == [
        "kitchen_dining_door",
        "dining_living_door",
        "living_room",
    ]


def test_phrases_and_span_schema():
    text = "Go check the fridge, then park at the charging dock."
    ps = phrases(text)
    assert "the fridge" in ps and "the charging dock" in ps and "fridge then" in ps
    assert all(len(p.split()) <= 6 for p in ps)
    enum = span_schema(text)["properties"]["targets"]["items"]["enum"]
    assert enum == ps
    ok = parse_spans('{"targets": ["the fridge", "the charging dock"], "avoid": []}', text)
    assert ok.targets == ["the fridge", "the charging dock"]
    with pytest.raises(PlanError, match="not a phrase of the instruction"):
        parse_spans('{"targets": ["the sofa"], "avoid": []}', text)


def test_match_phrase_prefers_the_longest_name_or_alias(apartment):
    assert match_phrase("the charging dock", apartment) == "charging_dock"
    assert match_phrase("the living room", apartment) == "living_room"
    assert match_phrase("refrigerator", apartment) == "fridge"
    assert match_phrase("where the food is", apartment) is None
    assert match_phrase("the kitchen", apartment, ("landmark",)) is None


def test_goals_answer_vote_key_ignores_avoid_order():
    a = GoalsAnswer(targets=["fridge"], avoid=["kitchen", "hallway"])
    b = GoalsAnswer(targets=["fridge"], avoid=["hallway", "kitchen"])
    assert a.key() == b.key()
    assert json.loads(a.model_dump_json())["targets"] == ["fridge"]


def test_follow_up_choices_start_after_the_last_phrase_and_skip_avoided_rooms():
    from llm_planner.llm.answers import next_schema, phrase_end

    text = "Go to the couch, after that the closet, and finally the charger, avoiding the office."
    cursor = phrase_end(text, "the couch")
    enum = next_schema(text, cursor, ["the office"])["properties"]["next"]["enum"]
    assert enum[0] == "none" and "the closet" in enum and "the couch" not in enum
    assert not any("office" in p for p in enum)
    cursor = phrase_end(text, "the charger", phrase_end(text, "the closet", cursor))
    assert "the closet" not in next_schema(text, cursor, [])["properties"]["next"]["enum"]
    assert next_schema("Go to the bed.", phrase_end("Go to the bed.", "the bed"), []) is None
