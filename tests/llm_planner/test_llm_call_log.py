"""LLMPlanner keeps a bounded log of its model calls (a planner node runs for days) and exact running totals."""

from llm_planner.planners import llm
from llm_planner.planners.llm import LLMPlanner
from sim.navigation.world import load_world
from tests.llm_planner.servers import ScriptedServer

GOOD = '{"targets": ["fridge"], "avoid": []}'


def scripted_planner(url: str, **kw) -> LLMPlanner:
    backend = {"base_url": url, "model": "scripted", "timeout_s": 5.0, "max_retries": 0}
    return LLMPlanner(mode="llm_goals", reading="names", backend="openai", backend_params=backend, **kw)


def test_calls_keep_the_most_recent_while_totals_count_every_call(monkeypatch):
    monkeypatch.setattr(llm, "CALLS_KEPT", 5)
    world = load_world("apartment")
    with ScriptedServer([("answer", GOOD)]) as server:
        planner = scripted_planner(server.url, cache=False)
        for i in range(12):
            planner.interpret(f"Go to the fridge, please ({i}).", world, "kitchen")
        assert len(server.requests) == 12
    assert len(planner.calls) == 5  # bounded: the oldest left
    assert planner.totals == {
        "calls": 12,
        "llm_calls": 12,
        "cache_hits": 0,
        "prompt_tokens": 12 * 100,  # the scripted server's usage per call
        "completion_tokens": 12 * 10,
        "latency_s": planner.totals["latency_s"],
    }
    assert planner.totals["latency_s"] >= sum(c["latency_s"] for c in planner.calls) > 0
    assert planner.last_usage == {"tokens": 110, "llm_calls": 1, "cache_hits": 0}
    assert planner.calls_since(10) == list(planner.calls)[-2:]  # the calls after the 10th
    assert planner.calls_since(0) == list(planner.calls)  # as far as the log still holds them
    assert planner.calls_since(12) == []


def test_cache_hits_are_counted_apart_from_model_calls():
    world = load_world("apartment")
    with ScriptedServer([("answer", GOOD)]) as server:
        planner = scripted_planner(server.url)
        for _ in range(3):
            planner.interpret("Go to the fridge.", world, "kitchen")
        assert len(server.requests) == 1
    assert (planner.totals["llm_calls"], planner.totals["cache_hits"], planner.totals["prompt_tokens"]) == (1, 2, 100)
    assert [c["cached"] for c in planner.calls] == [False, True, True]


def test_memory_cache_keeps_the_most_recently_used_answers(monkeypatch):
    """The in-memory answer cache is bounded too: the least recently used answer is asked again."""
    monkeypatch.setattr(llm, "MEMORY_CACHE_KEPT", 2)
    world = load_world("apartment")
    with ScriptedServer([("answer", GOOD)]) as server:
        planner = scripted_planner(server.url)
        for text in (
            "Go to the fridge (a).",
            "Go to the fridge (b).",
            "Go to the fridge (a).",
            "Go to the fridge (c).",
        ):
            planner.interpret(text, world, "kitchen")
        assert len(server.requests) == 3  # (a) again was a hit; (c) dropped (b), the least recently used
        assert len(planner._memory) == 2
        planner.interpret("Go to the fridge (a).", world, "kitchen")
        assert len(server.requests) == 3  # (a) was kept: it was used more recently than (b)
        planner.interpret("Go to the fridge (b).", world, "kitchen")
        assert len(server.requests) == 4
