"""The LLM planner over the openai backend against a scripted OpenAI-compatible server on 127.0.0.1:
re-prompts, bounded retries, timeouts, malformed answers, a server that is down, the cache, voting,
and the executor stopping an episode safely when the planner fails."""

import json
import re

import gymnasium as gym
import pytest

from hrl.executor import HierarchicalAgent
from hrl.policy import GoalPolicy
from llm_planner.base import Scene, Task
from llm_planner.llm.backend import LLMError, make_backend
from llm_planner.plan import PlanError
from llm_planner.planners.llm import LLMPlanner
from sim.navigation.world import load_world
from tests.llm_planner.servers import ScriptedServer, free_port

GOOD = '{"targets": ["fridge"], "avoid": []}'


def planner(url, **kw):
    backend = {
        "base_url": url,
        "model": "scripted",
        "timeout_s": kw.pop("timeout_s", 5.0),
        "max_retries": kw.pop("max_retries", 2),
        "response_format": kw.pop("response_format", "json_schema"),
    }
    return LLMPlanner(mode=kw.pop("mode", "llm_goals"), reading="names", backend="openai", backend_params=backend, **kw)


@pytest.fixture(scope="module")
def world():
    return load_world("apartment")


def scene(world, start="dock"):
    return Scene(world, world.starts[start])


def test_a_valid_answer_becomes_a_routed_plan_and_the_schema_is_sent(world):
    with ScriptedServer([("answer", GOOD)]) as server:
        p = planner(server.url)
        plan = p.plan(Task("Go to the fridge.", ("fridge",)), scene(world))
    assert plan.subgoals[-1].target.name == "fridge" and len(plan.subgoals) > 3  # routed through doors
    body = server.requests[0]["body"]
    schema = body["response_format"]["json_schema"]["schema"]
    assert "fridge" in schema["properties"]["targets"]["items"]["enum"]
    assert (
        body["messages"][0]["role"] == "system" and "Instruction: Go to the fridge." in body["messages"][-1]["content"]
    )
    assert p.last_usage == {"tokens": 110, "llm_calls": 1, "cache_hits": 0}
    assert p.calls[0]["prompt_tokens"] == 100 and p.calls[0]["valid"]


def test_invalid_answer_is_sent_back_with_the_error_then_accepted(world):
    with ScriptedServer([("answer", '{"targets": ["jacuzzi"], "avoid": []}'), ("answer", GOOD)]) as server:
        plan = planner(server.url).plan(Task("Go to the fridge.", ("fridge",)), scene(world))
    assert plan.subgoals[-1].target.name == "fridge"
    retry = server.requests[1]["body"]["messages"]
    assert retry[-2] == {"role": "assistant", "content": '{"targets": ["jacuzzi"], "avoid": []}'}
    assert "jacuzzi" in retry[-1]["content"] and "not a landmark or room" in retry[-1]["content"]


def test_a_path_as_an_answer_is_refused_as_an_unknown_name_after_bounded_attempts(world, tmp_path, monkeypatch):
    """A model that answers with a path gets it back as "not a landmark or room", three times, then a clear
    error: the answer is looked up in the map, never on disk (the file it names exists here, so a planner that
    opened it would not refuse it)."""
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "passwd").write_text("fridge\n")
    monkeypatch.chdir(tmp_path / "etc")
    refusal = "'../etc/passwd' is not a landmark or room of map 'apartment'"
    with ScriptedServer([("answer", '{"targets": ["../etc/passwd"], "avoid": []}')]) as server:
        p = planner(server.url, max_attempts=3, cache_dir=str(tmp_path / "cache"))
        with pytest.raises(PlanError, match=rf"no valid answer .* in 3 attempts; last: {re.escape(refusal)}"):
            p.plan(Task("Go to the fridge.", ("fridge",)), scene(world))
    assert len(server.requests) == 3
    assert all(refusal in r["body"]["messages"][-1]["content"] for r in server.requests[1:])  # sent back each time
    assert [c["valid"] for c in p.calls] == [False] * 3 and all(refusal in c["error"] for c in p.calls)
    assert all(len(f.stem) == 64 for f in (tmp_path / "cache").iterdir())  # cache files are named by a hash


@pytest.mark.parametrize(
    "script, match", [([("status", 500)], "HTTP 500"), ([("garbage",)], "not a chat completion|Expecting value|JSON")]
)
def test_server_errors_are_retried_a_bounded_number_of_times(world, script, match):
    with ScriptedServer(script) as server:
        p = planner(server.url, max_retries=2)
        with pytest.raises(LLMError, match=match):
            p.plan(Task("Go to the fridge.", ("fridge",)), scene(world))
    expected = 3 if script[0][0] == "status" else 1  # 5xx: 1 + max_retries; a 200 with garbage is not retried
    assert len(server.requests) == expected
    assert p.calls[-1]["error"]


def test_a_hanging_server_times_out(world):
    with ScriptedServer([("hang", 3.0)]) as server:
        p = planner(server.url, timeout_s=0.5, max_retries=1)
        with pytest.raises(LLMError, match=r"no answer within timeout_s=0.5 s after 2 attempt"):
            p.plan(Task("Go to the fridge.", ("fridge",)), scene(world))
    assert len(server.requests) == 2


def test_a_server_that_is_down_is_a_clear_error(world):
    p = planner(f"http://127.0.0.1:{free_port()}/v1", max_retries=1)
    with pytest.raises(LLMError, match=r"cannot connect .*is the server running"):
        p.plan(Task("Go to the fridge.", ("fridge",)), scene(world))


def test_api_key_comes_from_the_environment_and_never_shows(world, monkeypatch):
    monkeypatch.setenv("HRL_TEST_KEY", "sk-secret-123")
    with ScriptedServer([("status", 401)]) as server:
        backend = make_backend("openai", base_url=server.url, api_key_env="HRL_TEST_KEY", max_retries=0)
        with pytest.raises(LLMError) as err:
            backend.complete([{"role": "user", "content": "hi"}])
    assert server.requests[0]["auth"] == "Bearer sk-secret-123"
    assert "sk-secret" not in str(err.value) and "sk-secret" not in repr(backend)


def test_bad_backend_settings_are_rejected():
    with pytest.raises(ValueError, match="must start with http"):
        make_backend("openai", base_url="127.0.0.1:8000")
    with pytest.raises(ValueError, match="response_format 'xml'"):
        make_backend("openai", response_format="xml")
    with pytest.raises(ValueError, match="does not accept"):
        make_backend("openai", temperature=3)
    with pytest.raises(ValueError, match="unknown LLM backend 'gpt5'"):
        make_backend("gpt5")
    with pytest.raises(ValueError, match="self_consistency must be >= 1"):
        LLMPlanner(backend="openai", self_consistency=0)


def test_cache_answers_repeated_prompts_without_asking_again(world, tmp_path):
    with ScriptedServer([("answer", GOOD)]) as server:
        p = planner(server.url, cache_dir=str(tmp_path))
        p.plan(Task("Go to the fridge.", ("fridge",)), scene(world))
        p.plan(Task("Go to the fridge.", ("fridge",)), scene(world))
        assert len(server.requests) == 1 and p.last_usage["cache_hits"] == 1 and p.last_usage["tokens"] == 0
        fresh = planner(server.url, cache_dir=str(tmp_path))  # a new process reads the disk cache
        fresh.plan(Task("Go to the fridge.", ("fridge",)), scene(world))
        assert len(server.requests) == 1
    files = list(tmp_path.iterdir())
    assert len(files) == 1 and len(files[0].stem) == 64  # named by the key's hash, never by model output


def test_self_consistency_keeps_the_most_frequent_valid_answer(world):
    sofa = '{"targets": ["sofa"], "avoid": []}'
    script = [("answer", GOOD), ("answer", sofa), ("answer", "junk"), ("answer", sofa), ("answer", sofa)]
    with ScriptedServer(script) as server:
        p = planner(server.url, self_consistency=5, cache=False)
        answer = p.interpret("Go to the couch.", world, "hallway")
        temps = [r["body"]["temperature"] for r in server.requests]
    assert answer.targets == ["sofa"] and len(temps) == 5
    assert temps[0] == 0.0 and all(t == 0.7 for t in temps[1:])


def test_route_mode_reasks_with_the_map_error(world):
    bad = '{"route": ["kitchen_door", "fridge"]}'  # the kitchen door does not leave the hallway
    good = '{"route": ["living_room_door", "kitchen_door", "fridge"]}'
    with ScriptedServer([("answer", bad), ("answer", good)]) as server:
        plan = planner(server.url, mode="llm_route").plan(Task("Go to the fridge.", ("fridge",)), scene(world))
        assert "does not leave 'hallway'" in server.requests[1]["body"]["messages"][-1]["content"]
        assert "The robot is in the hallway." in server.requests[0]["body"]["messages"][-1]["content"]
    assert plan.subgoals[-1].target.name == "fridge"


@pytest.fixture(scope="module")
def policy():
    return GoalPolicy.load("shipped:rover_local")


def test_executor_stops_the_episode_safely_when_the_planner_fails(policy):
    env = gym.make("hrl/RoverNav-v0", map="apartment", goal_mode="anywhere", max_steps=5000)
    obs, _ = env.reset(seed=0, options={"start": "dock"})
    with ScriptedServer([("status", 503)]) as server:
        agent = HierarchicalAgent(planner(server.url, max_retries=1), policy)
        episode, ex = agent.run(env, Task("Go to the fridge.", ("fridge",)), obs)
    assert not episode.success and episode.steps == 0  # nothing moved
    assert episode.reason.startswith("planner_error: LLMError") and "HTTP 503" in episode.reason
    assert [e.kind for e in ex.events] == ["planner_error", "done"]


def test_llm_goals_replans_around_a_failure_without_rereading(policy, world):
    """After a navigation failure llm_goals keeps the model's reading and re-routes (one model call)."""
    from llm_planner.base import Feedback

    with ScriptedServer([("answer", '{"targets": ["fridge", "sofa"], "avoid": []}')]) as server:
        p = planner(server.url)
        task = Task("Go to the fridge, then the sofa.", ("fridge", "sofa"))
        p.plan(task, scene(world))
        fb = Feedback("point", "stuck", world.starts["kitchen"], attempt=1, reached=("landmark fridge",))
        plan = p.plan(task, Scene(world, world.starts["kitchen"]), fb)
    assert len(server.requests) == 1
    assert [s.target.name for s in plan.subgoals if s.target.kind == "landmark"] == ["sofa"]


def test_agent_fails_a_task_that_enters_an_avoided_room(policy):
    """The task's acceptance check: entering a forbidden room ends the episode, whatever the plan."""
    from llm_planner.planners.graph import GraphPlanner

    class IgnoresAvoid:  # routes as if the task had no constraint
        name = "ignores_avoid"

        def plan(self, task, scene, feedback=None):
            return GraphPlanner().plan(Task(task.text, task.goals), scene, feedback)

    env = gym.make("hrl/RoverNav-v0", map="apartment", goal_mode="anywhere", max_steps=5000)
    obs, _ = env.reset(seed=0, options={"start": "dock"})
    task = Task("Go to the fridge, avoiding the living room", ("fridge",), avoid=("living_room",))
    episode, _ = HierarchicalAgent(IgnoresAvoid(), policy).run(env, task, obs)
    assert not episode.success and episode.reason == "entered avoided room living_room"
    assert json.dumps(episode.row())  # serialisable
