"""``llm_goals`` on the tabletop: the prompt and the constrained schema sent, answers checked and re-asked, the
reading kept on replanning, the planner/domain pairing, and one real instruction with the embedded model."""

import json

import pytest

from hierarchy.agent import Agent
from hierarchy.domain import Feedback, Outcome
from hierarchy.tabletop import TabletopDomain
from llm_planner.plan import PlanError
from llm_planner.planners.llm import LLMGoalsPlanner, LLMRoutePlanner
from llm_planner.tabletop import ObjectView, PlaceSubgoal, Relation, TabletopPlan, TabletopTask, TabletopView
from tests.llm_planner.servers import ScriptedServer

BLOCKS = TabletopView(
    "blocks",
    (
        ObjectView("blue_block", "blue", 0.05, (0.0, 0.05, 0.025), None),
        ObjectView("red_block", "red", 0.04, (0.1, -0.05, 0.02), None),
        ObjectView("yellow_block", "yellow", 0.04, (-0.1, 0.0, 0.02), None),
    ),
    (),
    (0.0, 0.0, 0.2),
)
TASK = TabletopTask("Stack red on blue and yellow on red.", (Relation("red_block", "blue_block"),))


def answer(*goals: tuple[str, str]) -> str:
    return json.dumps({"subgoals": [{"kind": "place", "object": o, "on": on} for o, on in goals]})


def scripted(url: str, **kw) -> LLMGoalsPlanner:
    backend = {"base_url": url, "model": "scripted", "timeout_s": 5.0, "max_retries": 0}
    return LLMGoalsPlanner(backend="openai", backend_params=backend, **kw)


def test_the_prompt_shows_the_scene_and_the_schema_names_its_blocks_with_kind_required():
    with ScriptedServer([("answer", answer(("red_block", "blue_block")))]) as server:
        plan = scripted(server.url).plan(TASK, BLOCKS)
    assert [(s.object, s.on) for s in plan.subgoals] == [("red_block", "blue_block")]
    body = server.requests[0]["body"]
    schema = body["response_format"]["json_schema"]["schema"]
    place = schema["$defs"]["PlaceSubgoal"]
    assert place["properties"]["object"]["enum"] == ["blue_block", "red_block", "yellow_block"]
    assert place["required"][0] == "kind"
    assert "PushSubgoal" not in schema["$defs"]  # the blocks scene has no place to push to
    system, last = body["messages"][0]["content"], body["messages"][-1]["content"]
    assert "blue_block: blue, 5 cm (big)" in system and "red_block: red, 4 cm (small)" in system
    assert BLOCKS.text() in last and last.endswith("Instruction: Stack red on blue and yellow on red.")
    shots = [m["content"] for m in body["messages"][1:-1:2]]
    assert len(shots) == 6 and all("Scene now" not in s for s in shots)  # the examples show the instruction only


def test_an_answer_naming_what_the_scene_lacks_is_sent_back_with_the_error():
    script = [("answer", answer(("green_block", "blue_block"))), ("answer", answer(("red_block", "red_block")))]
    script.append(("answer", answer(("red_block", "blue_block"))))
    with ScriptedServer(script) as server:
        planner = scripted(server.url, constrained=False)
        plan = planner.plan(TASK, BLOCKS)
    assert [(s.object, s.on) for s in plan.subgoals] == [("red_block", "blue_block")]
    retries = [r["body"]["messages"][-1]["content"] for r in server.requests[1:]]
    assert "unknown object 'green_block'" in retries[0] and "on itself" in retries[1]
    assert "response_format" not in server.requests[0]["body"]
    with (
        ScriptedServer([("answer", answer(("green_block", "blue_block")))]) as server,
        pytest.raises(PlanError, match=r"no valid answer .* in 3 attempts"),
    ):
        scripted(server.url, constrained=False).plan(TASK, BLOCKS)


def test_replanning_keeps_the_reading_and_drops_what_already_holds():
    two = answer(("red_block", "blue_block"), ("yellow_block", "red_block"))
    with ScriptedServer([("answer", two)]) as server:
        planner = scripted(server.url)
        planner.plan(TASK, BLOCKS)
        red_on_blue = ObjectView("red_block", "red", 0.04, (0.0, 0.05, 0.07), "blue_block")
        after = TabletopView("blocks", (BLOCKS.objects[0], red_on_blue, BLOCKS.objects[2]), (), BLOCKS.tcp)
        feedback = Feedback("place yellow_block on red_block", Outcome.STUCK, 1, ("place red_block on blue_block",))
        plan = planner.plan(TASK, after, feedback)
        assert [(s.object, s.on) for s in plan.subgoals] == [("yellow_block", "red_block")]
        assert len(server.requests) == 1  # not asked again
        done = ObjectView("yellow_block", "yellow", 0.04, (0.0, 0.05, 0.11), "red_block")
        finished = TabletopView("blocks", (BLOCKS.objects[0], red_on_blue, done), (), BLOCKS.tcp)
        with pytest.raises(PlanError, match="holds now"):
            planner.plan(TASK, finished, feedback)


def test_agent_takes_llm_goals_on_the_tabletop_and_refuses_llm_route():
    backend = {"base_url": "http://127.0.0.1:9/v1", "model": "none"}
    Agent(TabletopDomain(), LLMGoalsPlanner(backend="openai", backend_params=backend))
    with pytest.raises(ValueError, match="plans for navigation, not for the 'tabletop' domain"):
        Agent(TabletopDomain(), LLMRoutePlanner(backend="openai", backend_params=backend))


def test_a_bad_tabletop_example_bank_fails_loudly(tmp_path):
    bad = tmp_path / "bank.yaml"
    bad.write_text("examples:\n  - {scene: blocks, text: go, goals: [green_block on blue_block]}\n")
    with (
        ScriptedServer([("answer", answer(("red_block", "blue_block")))]) as server,
        pytest.raises(ValueError, match=r"green_block.*not in scene 'blocks'"),
    ):
        scripted(server.url, tabletop_examples=str(bad)).plan(TASK, BLOCKS)
    bad.write_text("examples:\n  - {scene: blocks, text: go, goals: [green_block]}\n")
    with pytest.raises(ValueError, match="needs scene, text and goals"):
        scripted("http://127.0.0.1:9/v1", tabletop_examples=str(bad))


def test_embedded_model_plans_a_groundable_tabletop_plan(domain, env_factory):
    """One instruction with the default embedded SmolLM2 (llama.cpp, CPU): a valid plan that the tabletop grounds."""
    from hierarchy.evaluate import layout_seed

    env = env_factory("blocks")
    env.reset(seed=layout_seed(0, 0, 0))
    scene = domain.observe(env)
    planner = LLMGoalsPlanner(backend_params={"n_threads": 1})
    task = TabletopTask("Put the red block on the blue block.", (Relation("red_block", "blue_block"),))
    plan = planner.plan(task, scene)
    assert isinstance(plan, TabletopPlan) and plan.subgoals
    assert TabletopPlan.from_json(plan.to_json()) == plan
    assert all(isinstance(s, PlaceSubgoal) for s in plan.subgoals)
    grounded = domain.ground(plan, scene)
    assert [g.label for g in grounded] == [s.label() for s in plan.subgoals]
    assert all(g.steps for g in grounded)
    assert planner.last_usage["llm_calls"] >= 1 and planner.calls[-1]["valid"]
