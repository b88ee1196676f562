"""Instructions no model should be asked about (empty, blank, 100 kB, control characters, text decoded from
bytes that were not UTF-8) are refused by name before any call, in bounded time; odd but valid text is
planned as usual. The backends themselves refuse what UTF-8 cannot carry and prompts beyond their context."""

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_planner.base import Scene, Task
from llm_planner.llm.backend import LLMError, check_messages, make_backend
from llm_planner.llm.prompts import MAX_INSTRUCTION_CHARS, ExampleBank, PromptBuilder, load_examples
from llm_planner.plan import PlanError
from llm_planner.planners.llm import LLMPlanner
from sim.navigation.world import load_world
from tests.llm_planner.servers import ScriptedServer

GOOD = '{"targets": ["fridge"], "avoid": []}'
HUGE = "Go to the fridge, then the sofa. " * 3200  # 102 kB

REFUSED = [
    ("", "is empty"),
    ("  \n\t ", "is empty"),
    (HUGE, rf"is {len(HUGE)} characters long .*at most {MAX_INSTRUCTION_CHARS} characters"),
    ("Go to the\x00 fridge.", r"U\+0000 at character 9: a control character"),
    ("Go to the \x1b[31mfridge", r"U\+001B at character 10: a control character"),
    ("Go to the K\udcfchlschrank", r"U\+DCFC at character 11: not valid Unicode text"),
    ("Go to the K\ufffdhlschrank", r"U\+FFFD at character 11: not valid Unicode text"),
]
SETUPS = [("llm_goals", "names"), ("llm_goals", "spans"), ("llm_route", "names")]


@pytest.fixture(scope="module")
def world():
    return load_world("apartment")


def planner(url, mode, reading):
    params = {"base_url": url, "model": "scripted", "max_retries": 0}
    return LLMPlanner(mode=mode, reading=reading, backend="openai", backend_params=params)


@pytest.mark.parametrize(("mode", "reading"), SETUPS)
@pytest.mark.parametrize(
    ("text", "message"), REFUSED, ids=["empty", "blank", "100kB", "nul", "escape", "surrogate", "fffd"]
)
def test_bad_instructions_are_refused_by_name_before_any_model_call(world, mode, reading, text, message):
    with ScriptedServer([("answer", GOOD)]) as server:
        p = planner(server.url, mode, reading)
        t0 = time.perf_counter()
        with pytest.raises(PlanError, match=message):
            p.plan(Task(text, ("fridge",)), Scene(world, world.starts["dock"]))
        with pytest.raises(PlanError, match=message):
            p.interpret(text, world, "hallway")
        assert time.perf_counter() - t0 < 2.0
    assert server.requests == [] and len(p.calls) == 0


@pytest.mark.parametrize(
    "text",
    ["Go to the fridge.\n", "Go\tto the fridge, please!", "Gehe zum Kühlschrank (fridge) ✓", "Go to the fridge Ã©",
     "x" * MAX_INSTRUCTION_CHARS],
)  # fmt: skip
def test_odd_but_valid_instructions_are_planned(world, text):
    with ScriptedServer([("answer", GOOD)]) as server:
        plan = planner(server.url, "llm_goals", "names").plan(
            Task(text, ("fridge",)), Scene(world, world.starts["dock"])
        )
    assert plan.subgoals[-1].target.name == "fridge"
    assert text.strip() in server.requests[0]["body"]["messages"][-1]["content"]


@pytest.fixture(scope="module")
def prompts(world):
    return ExampleBank(load_examples(), world), [PromptBuilder("llm_goals"), PromptBuilder("llm_route")]


@settings(max_examples=100, deadline=None)
@given(
    text=st.text(max_size=MAX_INSTRUCTION_CHARS + 50)
    | st.binary(max_size=200).map(lambda b: b.decode("utf-8", "surrogateescape"))  # bytes as a CLI reads them
)
def test_any_text_is_refused_by_name_or_becomes_messages_every_backend_accepts(world, prompts, text):
    bank, builders = prompts
    for builder in builders:
        try:
            messages = builder.messages(world, text, "hallway", bank.first(2))
            spans = builder.span_messages(text, bank, bank.first(2))
        except PlanError as err:
            assert str(err).startswith("the instruction ")
            continue
        check_messages(messages)  # raises LLMError if any backend would choke on it
        check_messages(spans)


def test_openai_backend_refuses_text_utf8_cannot_carry_without_sending_it():
    with ScriptedServer([("answer", GOOD)]) as server:
        backend = make_backend("openai", base_url=server.url, max_retries=0)
        with pytest.raises(LLMError, match=r"message 1 \(user\) is not valid text: U\+DCFF at character 3"):
            backend.complete([{"role": "system", "content": "s"}, {"role": "user", "content": "abc\udcff"}])
    assert server.requests == []


def test_llama_cpp_backend_refuses_a_prompt_beyond_its_context_in_bounded_time():
    backend = make_backend("llama_cpp")
    t0 = time.perf_counter()
    with pytest.raises(LLMError, match=r"Requested tokens \(\d+\) exceed context window of 2048"):
        backend.complete([{"role": "user", "content": HUGE}], max_tokens=8)
    assert time.perf_counter() - t0 < 20.0  # ~0.3 s: tokenised, refused, nothing evaluated
    with pytest.raises(LLMError, match=r"U\+DCFF"):
        backend.complete([{"role": "user", "content": "fridge\udcff"}], max_tokens=8)
    assert backend.complete([{"role": "user", "content": "Say hi."}], max_tokens=4).completion_tokens > 0  # still works
