"""``planner=vlm_http`` against a real OpenAI-compatible HTTP server on 127.0.0.1 (``ScriptedServer``): the request
carries the camera's picture as a decodable base64 PNG of the configured size, the scene's names and the plan's
schema; a good answer is grounded and executed by the hierarchy's Agent with the shipped skills in MuJoCo; the
server's faults (HTTP 500, a timeout, a body that is not JSON, an answer that is not JSON, an unknown object) end
the episode with the cause and nothing moves; bad views, instructions, images and settings are refused naming
the value and the fix, before any request."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from hierarchy.agent import Agent, AgentConfig
from hierarchy.domain import Feedback, Outcome
from hierarchy.tabletop import TabletopDomain, holding, holds, make_env
from llm_planner.base import make_planner
from llm_planner.llm.backend import LLMError, check_messages
from llm_planner.llm.vision import OpenAIVisionBackend, decode_image_part, image_part, text_part
from llm_planner.plan import PlanError
from llm_planner.planners.vlm_http import VLMHttpPlanner
from llm_planner.tabletop import ObjectView, Relation, TabletopPlan, TabletopTask, TabletopView
from sim.tabletop.physics import CAMERAS, CameraImage
from tests.llm_planner.servers import ScriptedServer

RED_ON_BLUE = TabletopTask("Put the red block on the blue one.", (Relation("red_block", "blue_block"),))
#: The ``blocks`` layout (reset seed) where the shipped skills stack red on blue in ~40 steps (tests/hierarchy).
LAYOUT = 0


def answer(*goals: tuple[str, str]) -> str:
    return json.dumps({"subgoals": [{"kind": "place", "object": o, "on": on} for o, on in goals]})


def vlm(url: str, **kw) -> VLMHttpPlanner:
    kw = {"model": "scripted-vl", "timeout_s": 5.0, "max_retries": 0, "image_size": 64, **kw}
    return make_planner("vlm_http", base_url=url, **kw)  # type: ignore[return-value]


def images(request: dict) -> list[np.ndarray]:
    """The pictures of a recorded request, decoded from its image_url parts, in order."""
    parts = [p for m in request["body"]["messages"] if isinstance(m["content"], list) for p in m["content"]]
    return [decode_image_part(p) for p in parts if p["type"] == "image_url"]


def texts(request: dict) -> str:
    out = []
    for m in request["body"]["messages"]:
        content = m["content"] if isinstance(m["content"], list) else [text_part(m["content"])]
        out += [p["text"] for p in content if p["type"] == "text"]
    return "\n".join(out)


def snapshot(env) -> np.ndarray:
    e = env.unwrapped
    return np.concatenate([e.tcp()[0], *(e.physics.object_state(o.name).position for o in e.scene.objects)])


@pytest.fixture(scope="module")
def domain() -> TabletopDomain:
    return TabletopDomain.with_skills()


@pytest.fixture
def env():
    e = make_env("blocks", "mujoco")
    e.reset(seed=LAYOUT)
    yield e
    e.close()


def picture_view(rgb: np.ndarray) -> TabletopView:
    """The blocks scene with a camera that returns ``rgb`` (whatever it is), for the checks before a request."""
    blocks = tuple(
        ObjectView(f"{c}_block", c, 0.04, (0.1 * i, 0.0, 0.02), None) for i, c in enumerate(("blue", "red", "yellow"))
    )
    return TabletopView(
        "blocks",
        blocks,
        (),
        (0.0, 0.0, 0.2),
        camera=lambda camera, size, depth: CameraImage(rgb, None, CAMERAS[camera]),
    )


# ---- the request ---------------------------------------------------------------------------------------------
def test_the_request_carries_the_camera_pictures_as_png_the_names_only_and_the_schema(env):
    scene = TabletopDomain().observe(env)
    with ScriptedServer([("answer", answer(("red_block", "blue_block")))]) as server:
        planner = vlm(server.url, image_size=96, cameras=["front", "wrist"])
        plan = planner.plan(RED_ON_BLUE, scene)
    assert [(s.object, s.on) for s in plan.subgoals] == [("red_block", "blue_block")]
    (request,) = server.requests
    body = request["body"]
    assert request["path"] == "/v1/chat/completions" and body["model"] == "scripted-vl"
    front, wrist = images(request)
    # PNG is lossless: the model gets exactly what the camera renders now, at the size configured
    np.testing.assert_array_equal(front, env.camera_image("front", 96, depth=False).rgb)
    np.testing.assert_array_equal(wrist, env.camera_image("wrist", 96, depth=False).rgb)
    assert front.shape == (96, 96, 3) and front.dtype == np.uint8 and front.std() > 10  # a picture, not a blank
    user = body["messages"][-1]["content"]
    assert [p["type"] for p in user] == ["text", "image_url", "text", "image_url", "text"]
    assert user[1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert user[-1]["text"] == "Instruction: Put the red block on the blue one."
    said = texts(request)
    assert "blue_block, red_block, yellow_block" in said and "Places: none" in said
    for o in scene.objects:  # names only: no positions, no sizes, nothing on what rests where
        assert f"{o.position[0]:.2f}" not in said and "cm" not in said and scene.text() not in said
    schema = body["response_format"]["json_schema"]["schema"]
    place = schema["$defs"]["PlaceSubgoal"]
    assert place["properties"]["object"]["enum"] == ["blue_block", "red_block", "yellow_block"]
    assert place["required"][0] == "kind" and "PushSubgoal" not in schema["$defs"]
    assert planner.last_usage == {"tokens": 110, "llm_calls": 1, "cache_hits": 0}


def test_a_good_answer_is_grounded_and_the_agent_stacks_red_on_blue(domain, env):
    with ScriptedServer([("answer", answer(("red_block", "blue_block")))]) as server:
        episode = Agent(domain, vlm(server.url)).run(env, RED_ON_BLUE)
    assert episode.success and episode.reason == "success", episode.reason
    assert episode.plans == [["place red_block on blue_block"]]
    assert (episode.planner_calls, episode.replans, episode.planner_tokens) == (1, 0, 110)
    assert 0 < episode.steps < 300 and len(server.requests) == 1
    assert holds(env, RED_ON_BLUE.goals[0]) and holding(env) is None


# ---- faults end the episode with the cause, before anything moves -----------------------------------------------
@pytest.mark.parametrize(
    ("script", "kw", "cause", "requests"),
    [
        ([("status", 500)], {"max_retries": 1}, r"planner_error: LLMError: .*HTTP 500: .*after 2 attempt", 2),
        ([("hang", 3.0)], {"timeout_s": 0.5}, r"planner_error: LLMError: .*no answer within timeout_s=0.5 s", 1),
        ([("garbage",)], {}, r"planner_error: LLMError: .*not a chat completion", 1),
        (
            [("answer", "I would put the red block on the blue one.")],
            {},
            r"planner_error: PlanError: vlm_http: no valid answer from openai:.* in 3 attempts; last: invalid plan: "
            r"Invalid JSON",
            3,
        ),
        (
            [("answer", answer(("green_block", "blue_block")))],
            {},
            r"planner_error: PlanError: vlm_http: no valid answer .* in 3 attempts; last: subgoal 1: unknown object "
            r"'green_block'",
            3,
        ),
    ],
    ids=["http_500", "timeout", "body_not_json", "answer_not_json", "unknown_object"],
)
def test_a_server_fault_ends_the_episode_with_its_cause_and_nothing_moves(domain, env, script, kw, cause, requests):
    before = snapshot(env)
    with ScriptedServer(script) as server:
        planner = vlm(server.url, **kw)
        episode = Agent(domain, planner, AgentConfig(max_replans=2)).run(env, RED_ON_BLUE)
    assert not episode.success and episode.steps == 0 and episode.plans == []
    assert episode.reason == episode.events[0].detail
    assert [e.kind.value for e in episode.events] == ["planner_error", "done"]
    assert re.match(cause, episode.reason), episode.reason
    assert len(server.requests) == requests
    np.testing.assert_array_equal(snapshot(env), before)
    assert planner.calls[-1]["error"]  # recorded with the call, for llm_calls.jsonl
    if script[0][0] == "answer" and requests == 3:  # each invalid answer went back with the error
        retry = server.requests[-1]["body"]["messages"]
        assert retry[-2]["role"] == "assistant" and "cannot be used" in retry[-1]["content"]


# ---- replanning --------------------------------------------------------------------------------------------------
def test_after_a_failure_the_model_looks_again_and_is_told_what_failed(env):
    scene = TabletopDomain().observe(env)
    two = answer(("red_block", "blue_block"), ("yellow_block", "red_block"))
    task = TabletopTask("Stack red on blue, then yellow on red.", (Relation("red_block", "blue_block"),))
    feedback = Feedback("place yellow_block on red_block", Outcome.STUCK, 1, ("place red_block on blue_block",))
    with ScriptedServer([("answer", two), ("answer", answer(("yellow_block", "red_block")))]) as server:
        planner = vlm(server.url)
        planner.plan(task, scene)
        plan = planner.plan(task, scene, feedback)
    assert [(s.object, s.on) for s in plan.subgoals] == [("yellow_block", "red_block")]
    second = server.requests[1]
    messages = second["body"]["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[2]["content"] == TabletopPlan.from_json(two).to_json()
    assert "failed: attempt 1 failed at place yellow_block on red_block: stuck" in texts(second)
    assert "Done so far: place red_block on blue_block." in texts(second)
    assert len(images(second)) == 1  # the camera now, once


def test_without_reprompting_the_reading_is_kept_and_what_was_reached_dropped(env):
    scene = TabletopDomain().observe(env)
    two = answer(("red_block", "blue_block"), ("yellow_block", "red_block"))
    with ScriptedServer([("answer", two)]) as server:
        planner = vlm(server.url, reprompt_on_failure=False)
        planner.plan(RED_ON_BLUE, scene)
        reached = ("place red_block on blue_block",)
        plan = planner.plan(RED_ON_BLUE, scene, Feedback("place yellow_block on red_block", Outcome.STUCK, 1, reached))
        assert [(s.object, s.on) for s in plan.subgoals] == [("yellow_block", "red_block")]
        all_done = (*reached, "place yellow_block on red_block")
        with pytest.raises(PlanError, match="every subgoal the model planned was reached"):
            planner.plan(RED_ON_BLUE, scene, Feedback("place yellow_block on red_block", "plan_ended", 2, all_done))
    assert len(server.requests) == 1


# ---- refused before any request -----------------------------------------------------------------------------
GOOD_RGB = np.zeros((64, 64, 3), np.uint8)


@pytest.mark.parametrize(
    ("rgb", "error", "match"),
    [
        (GOOD_RGB.astype(np.float32) / 255, ValueError, r"camera 'front' image has dtype float32, not uint8.*\* 255"),
        (np.zeros((64, 64, 4), np.uint8), ValueError, r"has shape \(64, 64, 4\), not \(h, w, 3\).*image\[\.\.\., :3\]"),
        (np.zeros((64, 64), np.uint8), ValueError, r"has shape \(64, 64\), not \(h, w, 3\) RGB; give an"),
        (
            np.zeros((48, 64, 3), np.uint8),
            ValueError,
            r"is 64x48 pixels, not the 64x64 asked for; render it at size=64",
        ),
        ([[0, 0, 0]], TypeError, r"must be a numpy array \(h, w, 3\) of uint8, got list"),
    ],
    ids=["float", "rgba", "grey", "wrong_size", "not_an_array"],
)
def test_an_image_of_the_wrong_shape_or_dtype_is_refused_naming_it_and_the_fix(rgb, error, match):
    with ScriptedServer([("answer", answer(("red_block", "blue_block")))]) as server:
        with pytest.raises(error, match=match):
            vlm(server.url).plan(RED_ON_BLUE, picture_view(rgb))
        assert server.requests == []
        assert vlm(server.url).plan(RED_ON_BLUE, picture_view(GOOD_RGB)).subgoals  # the same view, a good picture


def test_a_view_without_a_camera_or_an_empty_instruction_is_refused_before_asking(env):
    scene = TabletopDomain().observe(env)
    blind = TabletopView(scene.scene, scene.objects, scene.places, scene.tcp)
    with ScriptedServer([("answer", answer(("red_block", "blue_block")))]) as server:
        with pytest.raises(
            ValueError, match=r"scene 'blocks' has no camera \(TabletopView.camera is None\).*llm_goals"
        ):
            vlm(server.url).plan(RED_ON_BLUE, blind)
        for text in ("", "   "):
            with pytest.raises(PlanError, match=r"the instruction .* is empty"):
                vlm(server.url).plan(TabletopTask(text, RED_ON_BLUE.goals), scene)
        assert server.requests == []


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"cameras": ["top"]}, r"unknown camera 'top' in cameras; available: front, wrist"),
        ({"cameras": "front"}, r"cameras must be a non-empty list of camera names"),
        ({"cameras": []}, r"cameras must be a non-empty list"),
        ({"cameras": ["front", "front"]}, r"names one twice"),
        ({"image_size": 8}, r"image_size must be a whole number of pixels in \[16, 1024\], got 8"),
        ({"image_size": 64.0}, r"image_size must be a whole number"),
        ({"max_tokens": 0}, r"max_tokens must be a whole number >= 1, got 0"),
        ({"base_url": "127.0.0.1:8000"}, r"must start with http"),
        ({"response_format": "xml"}, r"response_format 'xml'"),
        ({"max_attempts": 0}, r"max_attempts must be >= 1"),
    ],
)
def test_bad_settings_are_refused_naming_the_value(params, match):
    with pytest.raises(ValueError, match=match):
        make_planner("vlm_http", **params)


def test_the_agent_takes_vlm_http_on_the_tabletop_only():
    planner = make_planner("vlm_http")
    assert planner.domains == ("tabletop",) and planner.name == "vlm_http"
    Agent(TabletopDomain(), planner)
    with pytest.raises(TypeError, match="vlm_http plans for the tabletop from its camera"):
        planner.plan(RED_ON_BLUE, object())


def test_the_hydra_config_builds_the_planner_it_declares():
    from hrl.eval import planner_params
    from hrl.train import CONFIG_DIR, register_schemas

    register_schemas()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = compose(config_name="eval", overrides=["planner=vlm_http", "task=tabletop_language",
                                                     "planner.params.cameras=[front,wrist]",
                                                     "planner.params.image_size=128"])  # fmt: skip
    params = planner_params(OmegaConf.to_object(cfg).planner)
    planner = make_planner(cfg.planner.name, **params)
    assert planner.cameras == ("front", "wrist") and planner.image_size == 128
    assert planner.backend.timeout_s == 60.0 and planner.backend.model_id.endswith(":default")
    assert params["api_key_env"] == "OPENAI_API_KEY"  # the variable's name, never a key


# ---- the message helper ----------------------------------------------------------------------------------------
def test_image_messages_go_to_the_vision_backend_only():
    message = {"role": "user", "content": [text_part("Look:"), image_part(GOOD_RGB)]}
    OpenAIVisionBackend.check([message])  # accepted
    with pytest.raises(LLMError, match="must be a mapping with text 'content'"):
        check_messages([message])  # the text backends' check is unchanged
    bad = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://example.com/a.png"}}]}
    with pytest.raises(LLMError, match=r"part 0: an image must be a data:image/png;base64,"):
        OpenAIVisionBackend.check([bad])
    jpeg = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,/9j/4AAQ"}}]}
    with pytest.raises(LLMError, match="does not hold a PNG"):
        OpenAIVisionBackend.check([jpeg])
    with pytest.raises(LLMError, match="U\\+D800"):
        OpenAIVisionBackend.check([{"role": "user", "content": [text_part("bad \ud800")]}])
