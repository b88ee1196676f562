"""benchmarks/posttrain.py scores a real planner's answers with the execution reward (here the LLM planner
talks to a scripted OpenAI-compatible server, so the figures are known in advance)."""

import json

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
