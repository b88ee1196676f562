"""Prompt templates, the example bank and retrieval, and the language task suites."""

import networkx as nx
import pytest

from hrl.tasks import load_suite, suite_from_dict
from llm_planner.base import Scene, Task
from llm_planner.llm.prompts import ExampleBank, PromptBuilder, load_examples, words
from llm_planner.plan import PlanError, ground
from llm_planner.planners.graph import GraphPlanner
from sim.navigation.world import load_world

LANGUAGE_SUITES = ("apartment_language", "house_language")


@pytest.fixture(scope="module")
def apartment():
    return load_world("apartment")


def test_system_prompt_renders_the_scene(apartment):
    text = PromptBuilder("llm_goals").system(apartment)
    for name in ("kitchen", "living_room", "fridge", "refrigerator", "charging_dock", "in the hallway"):
        assert name in text
    route = PromptBuilder("llm_route").system(apartment)
    assert "kitchen_door joins kitchen and living_room" in route


def test_messages_put_the_retrieved_examples_between_system_and_question(apartment):
    bank = ExampleBank(load_examples(), apartment)
    shots = bank.nearest("Check on the stove and then come back to the dock", 3)
    assert shots[-1].text.startswith("Could you check on the oven")  # the nearest is last, next to the question
    msgs = PromptBuilder("llm_route").messages(apartment, "Go to the bed.", "kitchen", shots)
    assert [m["role"] for m in msgs] == ["system"] + ["user", "assistant"] * 3 + ["user"]
    assert msgs[-1]["content"] == "The robot is in the kitchen.\nInstruction: Go to the bed."
    assert '"route": [' in msgs[2]["content"]


def test_custom_template_directory_overrides_and_errors_are_clear(tmp_path, apartment):
    (tmp_path / "user.j2").write_text("TASK >> {{ instruction }}")
    msgs = PromptBuilder("llm_goals", tmp_path).messages(apartment, "Go to the bed.", None, [])
    assert msgs[-1]["content"] == "TASK >> Go to the bed."
    assert "fridge" in msgs[0]["content"]  # the system template still comes from the defaults
    (tmp_path / "user.j2").write_text("{{ no_such_variable }}")
    with pytest.raises(ValueError, match=r"user.j2.*no_such_variable"):
        PromptBuilder("llm_goals", tmp_path).messages(apartment, "x", None, [])
    with pytest.raises(ValueError, match="not a directory"):
        PromptBuilder("llm_goals", tmp_path / "missing")


def test_example_bank_names_exist_and_bad_banks_fail_loudly(tmp_path, apartment):
    examples = load_examples()
    assert {e.map for e in examples} >= {"apartment", "house", "maze", "two_rooms"}
    for name in ("apartment", "house", "maze", "two_rooms"):
        ExampleBank(examples, load_world(name))  # resolves every target and avoided room
    bad = tmp_path / "bank.yaml"
    bad.write_text("examples:\n  - {map: apartment, start: hallway, text: go, targets: [jacuzzi]}\n")
    with pytest.raises(ValueError, match="jacuzzi"):
        ExampleBank(load_examples(bad), apartment)
    bad.write_text("examples:\n  - {map: apartment, text: go}\n")
    with pytest.raises(ValueError, match="needs map, start, text, targets"):
        load_examples(bad)


def test_language_suites_cover_the_categories_with_60_plus_instructions():
    episodes = [ep for s in LANGUAGE_SUITES for ep in load_suite(s).episodes]
    assert len(episodes) >= 60
    counts = {c: sum(ep.category == c for ep in episodes) for c in ("single", "alias", "indirect", "multi", "avoid")}
    assert all(n >= 6 for n in counts.values()), counts
    for s in LANGUAGE_SUITES:
        assert len(load_suite(s).tasks()) == len(load_suite(s).episodes)  # all validate against their map


def test_no_benchmark_instruction_is_a_worked_example():
    bank = {(e.map, " ".join(words(e.text))) for e in load_examples()}
    for s in LANGUAGE_SUITES:
        suite = load_suite(s)
        for ep in suite.episodes:
            assert (suite.map, " ".join(words(ep.text))) not in bank, ep.text


def test_house_avoid_tasks_forbid_a_room_on_the_shortest_route():
    """Each avoid task in the house needs the constraint: the unconstrained graph route enters the room."""
    suite = load_suite("house_language")
    world = load_world("house")
    planner = GraphPlanner()
    for start, task in suite.tasks():
        if not task.avoid:
            continue
        scene = Scene(world, world.starts[start])
        free = ground(planner.plan(Task(task.text, task.goals), scene), world)
        kept = ground(planner.plan(task, scene), world)
        rooms = lambda pts: {world.room_at(p.xy).name for p in pts if world.room_at(p.xy)}  # noqa: E731
        assert rooms(free) & set(task.avoid), task.text
        assert not rooms(kept) & set(task.avoid), task.text


def test_graph_planner_refuses_an_impossible_avoid():
    world = load_world("apartment")  # a tree: the living room is the only way from the hallway to the kitchen
    scene = Scene(world, world.starts["dock"])
    with pytest.raises(PlanError, match=r"no route .* avoids living_room"):
        GraphPlanner().plan(Task("x", ("fridge",), ("living_room",)), scene)
    with pytest.raises(PlanError, match="a room to avoid"):
        GraphPlanner().plan(Task("x", ("fridge",), ("kitchen",)), scene)
    assert nx.is_tree(world.graph())


@pytest.mark.parametrize(
    "episode, match",
    [
        ({"start": "dock", "goals": ["fridge"], "avoid": ["kitchen"]}, "lies in 'kitchen'"),
        ({"start": "kitchen", "goals": ["sofa"], "avoid": ["kitchen"]}, "starts in 'kitchen'"),
        ({"start": "dock", "goals": ["fridge"], "avoid": ["attic"]}, "unknown room 'attic'"),
    ],
)
def test_suite_validation_of_avoid(episode, match):
    suite = suite_from_dict({"name": "t", "map": "apartment", "episodes": [episode]})
    with pytest.raises(ValueError, match=match):
        suite.tasks()
