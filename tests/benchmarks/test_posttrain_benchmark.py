"""benchmarks/posttrain.py scores a real planner's answers with the execution reward (here the LLM planner
talks to a scripted OpenAI-compatible server, so the figures are known in advance)."""

import json

import pytest

from benchmarks import posttrain
from llm_planner.planners.llm import LLMPlanner
from llm_planner.posttrain.instructions import Instruction
from tests.llm_planner.servers import ScriptedServer


def item(i, category, goals, avoid=()):
    return Instruction(f"apartment-val-{i:06d}", "apartment", "val", category, "one/0", f"Take me to {goals[0]}.",
                       "kitchen", "kitchen", tuple(goals), tuple(avoid))  # fmt: skip


def test_score_and_summarise_a_planner_on_instructions(tmp_path):
    items = [item(0, "single", ["fridge"]), item(1, "alias", ["sofa"]), item(2, "single", ["fridge"])]
    script = [("answer", '{"targets": ["fridge"], "avoid": []}')] * 2 + [("answer", "not json")]
    with ScriptedServer(script) as server:
        backend = {"base_url": server.url, "model": "scripted", "timeout_s": 5.0, "max_retries": 0}
        planner = LLMPlanner(reading="names", backend="openai", backend_params=backend, cache=False, max_attempts=1)
        rows = posttrain.score(planner, items, tmp_path / "rows.jsonl")
    assert [(r["reward"], r["outcome"]) for r in rows] == [(1.0, "success"), (0.0, "missed_target"),
                                                          (0.0, "planner_error")]  # fmt: skip
    assert [json.loads(line)["id"] for line in (tmp_path / "rows.jsonl").read_text().splitlines()] == [
        i.id for i in items
    ]
    summary = posttrain.summarise(rows)
    assert summary["all"]["success"] == 1 and summary["all"]["n"] == 3
    assert summary["single"]["success_rate"] == 0.5 and summary["alias"]["success_rate"] == 0.0
    assert summary["outcomes"] == {"missed_target": 1, "planner_error": 1, "success": 1}


def test_a_generated_split_is_recorded_with_its_generator_size():
    """Adding templates changes the drawn generated splits: RESULTS.md rows must say which val they scored."""
    from llm_planner.posttrain.instructions import TEMPLATES

    templates = sum(len(t) for t in TEMPLATES.values())
    assert posttrain.split_label("val", 100) == f"val (100; {templates}-template generator)"
    assert posttrain.split_label("test", 64) == "test (64)"
    assert posttrain.split_label("composed", 60) == "composed (60; train family, not held out)"


def test_tabletop_plans_are_asked_as_the_arm_planner_asks_and_scored_on_the_symbolic_table(tmp_path):
    from llm_planner.planners.llm import LLMGoalsPlanner
    from llm_planner.posttrain.tabletop_sft import tabletop_items

    items = tabletop_items(3, "val", seed=0)  # one each of blocks, sort and clear: unseen templates and words
    first = [(g.object, g.on) for g in items[0].goals]
    wrong = json.dumps({"subgoals": [{"kind": "place", "object": first[0][1], "on": first[0][0]}]})  # upside down
    script = [("answer", items[0].answer_text()), ("answer", wrong), ("answer", "not json")]
    with ScriptedServer(script) as server:
        backend = {"base_url": server.url, "model": "scripted", "timeout_s": 5.0, "max_retries": 0}
        planner = LLMGoalsPlanner(backend="openai", backend_params=backend, cache=False, max_attempts=1)
        rows = posttrain.score_tabletop_plans(planner, [items[0], items[0], items[1]], tmp_path / "rows.jsonl")
        asked = server.requests[0]["body"]["messages"]
    assert [r["outcome"] for r in rows] == ["success", "missed_target", "planner_error"], rows
    assert rows[0]["gold"] == [g.text() for g in items[0].goals] and rows[0]["exact"]
    assert items[0].text in asked[-1]["content"] and asked[0]["role"] == "system"  # the arm planner's prompt
    assert posttrain.split_label("tabletop_val", 99) == "tabletop val (99; generated, plan level)"


def test_agreement_of_the_route_and_the_driven_rewards_counts_cells_and_kappa():
    rows = [{"reward": a, "mujoco_reward": b} for a, b in [(1, 1)] * 6 + [(0, 0)] * 2 + [(1, 0), (0, 1)]]
    g = posttrain.agreement(rows)
    assert (g["both"], g["neither"], g["route_only"], g["mujoco_only"]) == (6, 2, 1, 1)
    assert g["agree_rate"] == 0.8 and g["route_success_rate"] == g["mujoco_success_rate"] == 0.7
    assert g["cohen_kappa"] == round((0.8 - (0.49 + 0.09)) / (1 - 0.58), 3)  # chance agreement 0.58
    assert posttrain.summarise([{**r, "category": "single", "outcome": "x", "exact": False, "latency_s": 0.1}
                                for r in rows])["agreement"] == g  # fmt: skip


@pytest.mark.slow
def test_answers_are_also_driven_in_mujoco_with_the_shipped_policy(tmp_path):
    """--execution both: the right answer reaches the fridge when driven, the wrong one does not."""
    from llm_planner.posttrain.reward import MujocoExecution

    items = [item(0, "single", ["fridge"]), item(1, "single", ["fridge"])]
    script = [("answer", '{"targets": ["fridge"], "avoid": []}'), ("answer", '{"targets": ["sink"], "avoid": []}')]
    with ScriptedServer(script) as server:
        backend = {"base_url": server.url, "model": "scripted", "timeout_s": 5.0, "max_retries": 0}
        planner = LLMPlanner(reading="names", backend="openai", backend_params=backend, cache=False, max_attempts=1)
        rows = posttrain.score(planner, items, tmp_path / "rows.jsonl", MujocoExecution())
    assert [(r["reward"], r["mujoco_reward"]) for r in rows] == [(1.0, 1.0), (0.0, 0.0)], rows
    assert "driven:" in rows[0]["mujoco_detail"]
    assert posttrain.summarise(rows)["agreement"]["agree_rate"] == 1.0
