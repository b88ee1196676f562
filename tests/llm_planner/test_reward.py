"""The execution reward of planner answers, and its TRL reward-function form."""

import itertools
import json

import pytest

from llm_planner.posttrain.instructions import InstructionGenerator
from llm_planner.posttrain.reward import (
    FORMAT_PENALTY,
    Gold,
    Outcome,
    RewardError,
    execution_reward,
    make_reward_function,
    planned_route,
    read_answer,
)
from sim.navigation.world import load_world


@pytest.fixture(scope="module")
def worlds():
    return {m: load_world(m) for m in ("apartment", "house")}


def answer(targets, avoid=()):
    return json.dumps({"targets": list(targets), "avoid": list(avoid)})


def tagged(*pairs):
    return json.dumps({"mentions": [{"place": p, "as": t} for p, t in pairs]})


MULTI = Gold("apartment", "dock", ("stove", "sofa"))
DETOUR = Gold("house", "kitchen", ("living_room",), ("dining_room",))  # the shortest route crosses the dining room


@pytest.mark.parametrize(
    ("gold", "text", "outcome", "value", "exact"),
    [
        (MULTI, answer(["stove", "sofa"]), Outcome.SUCCESS, 1.0, True),
        (MULTI, answer(["oven", "couch"]), Outcome.SUCCESS, 1.0, True),  # aliases are the same places
        (MULTI, answer(["sofa", "stove"]), Outcome.MISSED_TARGET, 0.0, False),  # wrong order
        (MULTI, answer(["stove"]), Outcome.MISSED_TARGET, 0.0, False),  # the second target dropped
        (MULTI, answer(["stove"], ["kitchen"]), Outcome.CONTRADICTORY, 0.0, False),  # the target put into avoid
        (MULTI, answer(["stove", "sofa"], ["living_room"]), Outcome.CONTRADICTORY, 0.0, False),
        (MULTI, answer(["stove"], ["living_room"]), Outcome.NO_ROUTE, 0.0, False),  # apartment: a tree of rooms
        (MULTI, answer(["kichen"]), Outcome.UNKNOWN_PLACE, FORMAT_PENALTY, False),
        (MULTI, answer(["stove"], ["stove"]), Outcome.UNKNOWN_PLACE, FORMAT_PENALTY, False),  # a landmark to avoid
        (MULTI, '{"targets": ["stove", "sofa"]', Outcome.MALFORMED, FORMAT_PENALTY, False),  # truncated JSON
        (MULTI, "", Outcome.MALFORMED, FORMAT_PENALTY, False),
        (MULTI, '{"route": ["stove"]}', Outcome.MALFORMED, FORMAT_PENALTY, False),  # another mode's answer
        (MULTI, answer([]), Outcome.MALFORMED, FORMAT_PENALTY, False),
        (DETOUR, answer(["living_room"], ["dining_room"]), Outcome.SUCCESS, 1.0, True),
        (DETOUR, answer(["lounge"], ["dining room"]), Outcome.SUCCESS, 1.0, True),
        (DETOUR, answer(["living_room"]), Outcome.ENTERED_AVOIDED_ROOM, 0.0, False),  # the constraint ignored
        (DETOUR, answer(["living_room"], ["living_room"]), Outcome.CONTRADICTORY, 0.0, False),
        # the room the robot starts in put into avoid: the executor stops it there at once (as a driven run ends)
        (
            Gold("house", "dock", ("washing_machine",)),
            answer(["washing_machine"], ["hallway"]),
            Outcome.MISSED_TARGET,
            0.0,
            False,
        ),
        # reading=tagged: the mentions are ordered by their tags, then judged as the names answer
        (MULTI, tagged(("sofa", "last"), ("stove", "first")), Outcome.SUCCESS, 1.0, True),
        (MULTI, tagged(("sofa", "then"), ("stove", "then")), Outcome.MISSED_TARGET, 0.0, False),  # order missed
        (MULTI, tagged(("bed", "not"), ("stove", "then"), ("couch", "then")), Outcome.SUCCESS, 1.0, True),
        (DETOUR, tagged(("dining_room", "avoid"), ("living_room", "then")), Outcome.SUCCESS, 1.0, True),
        (DETOUR, tagged(("dining_room", "not"), ("living_room", "then")), Outcome.ENTERED_AVOIDED_ROOM, 0.0, False),
        (DETOUR, tagged(("living_room", "avoid"), ("living_room", "then")), Outcome.CONTRADICTORY, 0.0, False),
        (MULTI, tagged(("stove", "avoid")), Outcome.MALFORMED, FORMAT_PENALTY, False),  # nowhere to go
        (MULTI, tagged(("stove", "soon")), Outcome.MALFORMED, FORMAT_PENALTY, False),
        (MULTI, tagged(("stove", "then"), ("stove", "avoid")), Outcome.UNKNOWN_PLACE, FORMAT_PENALTY, False),
        (MULTI, tagged(("attic", "then")), Outcome.UNKNOWN_PLACE, FORMAT_PENALTY, False),
    ],
)
def test_hand_made_answers_get_the_reward_of_their_outcome(worlds, gold, text, outcome, value, exact):
    reward = execution_reward(text, gold, worlds[gold.map])
    assert (reward.outcome, reward.value, reward.exact) == (outcome, value, exact), reward.detail
    assert reward.detail


def test_extra_targets_pass_the_tasks_check_but_are_not_exact(worlds):
    # the executor's check: every gold goal visited in order; a detour through another place still succeeds
    reward = execution_reward(answer(["stove", "bed", "sofa"]), MULTI, worlds["apartment"])
    assert reward.outcome == Outcome.SUCCESS and reward.value == 1.0 and not reward.exact
    # a correction read as both places: the check passes, the optional cost takes the detour off
    correction = Gold("apartment", "kitchen", ("office",))
    costly = execution_reward(answer(["office", "bed"]), correction, worlds["apartment"], extra_target_cost=0.25)
    assert (costly.outcome, costly.value) == (Outcome.SUCCESS, 0.75)
    fn = make_reward_function(extra_target_cost=0.5)
    cols = {"map": ["apartment"] * 2, "start": ["kitchen"] * 2, "goals": [["office"]] * 2, "avoid": [[], []]}
    assert fn(["p"] * 2, [answer(["office"]), answer(["tv", "bed", "office"])], **cols) == [1.0, 0.0]


def test_the_planned_route_starts_at_the_start_and_ends_at_the_last_target(worlds):
    world = worlds["house"]
    parsed = read_answer(answer(["tv", "fridge"]), world)
    route = planned_route(parsed, world.starts["study"], world)
    assert route[0] == (world.starts["study"].x, world.starts["study"].y)
    assert max(abs(a - b) for a, b in zip(route[-1], world.resolve("fridge").position, strict=True)) < 1e-6
    assert max(abs(p[0] - q[0]) + abs(p[1] - q[1]) for p, q in itertools.pairwise(route)) <= 0.1


def test_gold_answers_of_generated_instructions_all_get_full_reward(worlds):
    for _name, world in worlds.items():
        items, _ = InstructionGenerator(world, seed=0).generate("val", 45)
        for item in items:
            gold = Gold.from_columns(item.map, item.start, item.goals, item.avoid)
            reward = execution_reward(json.dumps(item.answer()), gold, world)
            assert reward.value == 1.0 and reward.exact, (item, reward.detail)


def test_trl_reward_function_scores_a_batch_from_dataset_columns():
    fn = make_reward_function()
    completions = [
        answer(["stove", "sofa"]),  # standard format: a string
        [{"role": "assistant", "content": answer(["sofa", "stove"])}],  # conversational format
        "not json",
        answer(["living_room"]),
    ]
    columns = {
        "map": ["apartment", "apartment", "apartment", "house"],
        "start": ["dock", "dock", [0.7, 3.75, 0.0], "kitchen"],
        "goals": [["stove", "sofa"]] * 3 + [["living_room"]],
        "avoid": [[], [], [], ["dining_room"]],
        "category": ["multi"] * 3 + ["avoid"],  # other columns pass through unused
    }
    rewards = fn(prompts=["p"] * 4, completions=completions, **columns)
    assert rewards == [1.0, 0.0, FORMAT_PENALTY, 0.0]
    assert [r.outcome for r in fn.last_rewards] == [
        Outcome.SUCCESS, Outcome.MISSED_TARGET, Outcome.MALFORMED, Outcome.ENTERED_AVOIDED_ROOM,
    ]  # fmt: skip


def test_reward_function_errors_name_the_missing_column_or_the_bad_row():
    fn = make_reward_function()
    with pytest.raises(ValueError, match="missing: start, avoid"):
        fn(prompts=["p"], completions=[answer(["sofa"])], map=["apartment"], goals=[["sofa"]])
    with pytest.raises(ValueError, match="column 'goals' has 2 values for 1 completions"):
        fn(prompts=["p"], completions=["x"], map=["apartment"], start=["dock"], goals=[["sofa"]] * 2, avoid=[[]])
    with pytest.raises(RewardError, match=r"completion 1 .*'goals': \['sofaa'\].*did you mean 'sofa'"):
        fn(
            prompts=["p", "p"],
            completions=[answer(["sofa"])] * 2,
            map=["apartment"] * 2,
            start=["dock"] * 2,
            goals=[["sofa"], ["sofaa"]],
            avoid=[[], []],
        )
    with pytest.raises(RewardError, match=r"completion 0 .*unknown map 'flat'"):
        fn(prompts=["p"], completions=["x"], map=["flat"], start=["dock"], goals=[["sofa"]], avoid=[[]])
    with pytest.raises(RewardError, match="'garage' is not a named start"):
        fn(prompts=["p"], completions=["x"], map=["apartment"], start=["garage"], goals=[["sofa"]], avoid=[[]])
    with pytest.raises(RewardError, match="must be a str or a list of chat messages"):
        fn(prompts=["p"], completions=[{"text": "x"}], map=["apartment"], start=["dock"], goals=[["sofa"]], avoid=[[]])


def test_bad_reward_settings_are_refused_by_name():
    with pytest.raises(ValueError, match="unknown execution 'physics'; executions: route, mujoco"):
        make_reward_function(execution="physics")
    with pytest.raises(ValueError, match="tolerance must be in"):
        make_reward_function(tolerance=0)
    with pytest.raises(ValueError, match="extra_target_cost must be in"):
        make_reward_function(extra_target_cost=2)


@pytest.mark.slow
def test_mujoco_execution_drives_the_plan_with_the_shipped_policy(worlds):
    pytest.importorskip("mujoco")
    fn = make_reward_function(execution="mujoco")
    rewards = fn(
        prompts=["p"] * 2,
        completions=[answer(["living_room"], ["dining_room"]), answer(["living_room"])],
        map=["house"] * 2,
        start=["kitchen"] * 2,
        goals=[["living_room"]] * 2,
        avoid=[["dining_room"]] * 2,
    )
    assert rewards == [1.0, 0.0], [r.detail for r in fn.last_rewards]
    assert "driven" in fn.last_rewards[0].detail
