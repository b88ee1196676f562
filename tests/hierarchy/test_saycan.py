"""saycan: feasible candidates, the language score from llama.cpp, the critic's affordance, and the step-wise loop."""

from __future__ import annotations

import numpy as np
import pytest

from hierarchy.agent import Agent, AgentConfig
from hierarchy.domain import EventKind
from llm_planner.plan import PlanDone
from llm_planner.planners.saycan import (
    SayCanPlanner,
    candidates,
    critic_value,
    discounted_success,
    placement_goal,
)
from llm_planner.tabletop import PlaceSubgoal, Relation, TabletopTask


@pytest.fixture(scope="module")
def embedded():
    from llm_planner.llm.backend import make_backend

    return make_backend("llama_cpp", n_threads=1)


def test_the_embedded_model_scores_a_likely_continuation_above_an_unlikely_one(embedded):
    likely, unlikely, again = embedded.score("The capital of France is", [" Paris", " a banana", " Paris"])
    assert likely > unlikely + 3.0  # mean log-probability per token
    assert likely == pytest.approx(again)  # each continuation starts from the prompt's state, not the last one's
    assert likely < 0.0


def test_candidates_are_the_feasible_placements_only(domain, env_factory):
    env = env_factory("blocks")
    env.reset(seed=0)
    blue, red = (env.physics.object_state(n).position for n in ("blue_block", "red_block"))
    env.physics.set_object_pose("red_block", np.array([blue[0], blue[1], 0.05 + 0.02]))  # red rests on blue
    for _ in range(5):
        env.step(np.zeros(4))
    scene = domain.observe(env)
    assert scene.object("red_block").on == "blue_block"
    texts = {text for text, _ in candidates(scene)}
    assert "place the yellow block on the red block" in texts
    assert not any(t.startswith("place the blue block") for t in texts)  # red is on it: it cannot be picked
    assert "place the yellow block on the blue block" not in texts  # blue is covered
    assert "place the red block on the blue block" not in texts  # already there
    assert all(isinstance(sub, PlaceSubgoal) for _, sub in candidates(scene))
    goal = placement_goal(scene, PlaceSubgoal(object="yellow_block", on="red_block"))
    np.testing.assert_allclose(goal[2], scene.object("red_block").position[2] + 0.04, atol=1e-6)
    del red


def test_the_critic_prefers_a_goal_the_skill_reaches_soon(domain, env_factory):
    """The affordance is the skill's own value: lifting the block a little is nearer than carrying it across
    the table and up, and both are chances in (0, 1]."""
    env = env_factory("blocks")
    env.reset(seed=1)
    own_object, own_goal = env.object, env.goal
    model = domain.skills["pick_place"].policy.model
    p = env.physics.object_state("red_block").position
    near = env.observation_as("pick_place", False, "red_block", p + np.array([0.0, 0.0, 0.02]))
    far = env.observation_as("pick_place", False, "red_block", np.array([-p[0], -p[1], 0.2]))
    q_near, q_far = critic_value(model, near), critic_value(model, far)
    assert q_near > q_far
    gamma = float(model.gamma)
    assert 0.0 < discounted_success(q_far, gamma) < discounted_success(q_near, gamma) <= 1.0
    assert discounted_success(float("nan"), gamma) == pytest.approx(1e-3)
    assert env.object == own_object and np.array_equal(env.goal, own_goal)  # the env's own goal is left alone


def test_saycan_plans_one_feasible_step_at_a_time_and_says_done(domain, env_factory, embedded):
    env = env_factory("blocks")
    env.reset(seed=2)
    planner = SayCanPlanner(backend=embedded, max_steps=1)
    planner.reset()
    task = TabletopTask("Put the red block on the blue one.", (Relation("red_block", "blue_block"),))
    plan = planner.plan(task, domain.observe(env))
    assert len(plan.subgoals) == 1 and plan.subgoals[0].kind == "place"
    scores = planner.last_scores
    assert scores[-1]["skill"] == "done" and scores[-1]["can"] == 1.0
    assert sum(s["say"] for s in scores) == pytest.approx(1.0, abs=1e-3)
    assert all(0.0 < s["can"] <= 1.0 for s in scores)
    chosen = max(scores, key=lambda s: s["say"] * s["can"])
    assert plan.rationale.startswith(f"saycan: {chosen['skill']}")
    with pytest.raises(PlanDone, match="max_steps"):
        planner.plan(task, domain.observe(env))


def test_saycan_needs_one_score_at_least():
    with pytest.raises(ValueError, match="both are off"):
        SayCanPlanner(language=False, affordance=False)


def test_a_step_wise_planner_is_asked_again_after_each_step_until_done(domain, env_factory):
    """The loop with the affordance-only SayCan (no language model, so it cannot read the task): it keeps
    choosing steps, each a new planner call that is not a replan, until max_steps says done; the final state
    is judged."""
    env = env_factory("blocks")
    env.reset(seed=3)
    planner = SayCanPlanner(language=False, max_steps=2)
    task = TabletopTask("stack", (Relation("red_block", "blue_block"),))
    episode = Agent(domain, planner, AgentConfig(max_replans=0)).run(env, task)
    assert not any(e.kind == EventKind.SUBGOAL_FAILED for e in episode.events)
    assert episode.planner_calls == 3 and len(episode.plans) == 2  # two steps, then done
    assert episode.replans == 0
    assert episode.reason.startswith("planner_done: 2 steps taken") or episode.reason == "success"
    assert episode.success == (domain.progress(task, env) == 1)
