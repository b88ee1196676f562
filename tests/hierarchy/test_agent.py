"""The domain-free Agent loop on the tabletop domain: plan -> ground -> skills -> progress -> replan -> finish.

Real MuJoCo/PyBullet envs and the shipped skills. The planners that script a fault, an ungroundable plan or a
plan that never reaches the goal are tiny classes here; everything they plan runs for real.
"""

from __future__ import annotations

import numpy as np
import pytest

from hierarchy.agent import Agent, AgentConfig
from hierarchy.domain import Event, EventKind, Feedback, Outcome
from hierarchy.tabletop import holding, holds
from llm_planner.base import make_planner
from llm_planner.tabletop import GripperSubgoal, PickSubgoal, PlaceSubgoal, Relation, TabletopPlan, TabletopTask

RED_ON_BLUE = TabletopTask("Put the red block on the blue one.", (Relation("red_block", "blue_block"),), "stack2")
#: A reset seed of the ``blocks`` scene where the symbolic planner and the shipped skills stack red on blue in
#: both engines (in about 40 control steps).
LAYOUT = 0


class ScriptedPlanner:
    """Returns ``plans`` in turn (the last one again once they run out) and keeps the feedback it was given;
    a plan that is an exception is raised instead."""

    name = "scripted"
    domains = ("tabletop",)

    def __init__(self, *plans) -> None:
        self.plans = list(plans)
        self.feedback: list[Feedback | None] = []

    def plan(self, task, scene, feedback=None):
        self.feedback.append(feedback)
        plan = self.plans[min(len(self.feedback), len(self.plans)) - 1]
        if isinstance(plan, Exception):
            raise plan
        return plan


class RoverOnlyPlanner(ScriptedPlanner):
    name = "rover_only"
    domains = ("navigation",)


def kinds(events: list[Event]) -> list[str]:
    return [e.kind.value for e in events]


def snapshot(env) -> np.ndarray:
    """The TCP and every object's position: what any motion would change."""
    e = env.unwrapped
    return np.concatenate([e.tcp()[0], *(e.physics.object_state(o.name).position for o in e.scene.objects)])


@pytest.mark.parametrize("backend", ["mujoco", "pybullet"])
def test_symbolic_planner_stacks_red_on_blue(domain, env_factory, backend):
    env = env_factory("blocks", backend, render_mode="rgb_array", render_size=32)
    env.reset(seed=LAYOUT)
    assert not holds(env, RED_ON_BLUE.goals[0])
    frames: list[np.ndarray] = []
    episode = Agent(domain, make_planner("symbolic")).run(env, RED_ON_BLUE, record=frames)
    assert episode.success and episode.reason == "success", episode.reason
    assert (episode.goals_reached, episode.goals_total, episode.replans, episode.planner_calls) == (1, 1, 0, 1)
    assert kinds(episode.events) == ["plan", "subgoal_started", "subgoal_reached", "done"]
    assert all(isinstance(e.kind, EventKind) for e in episode.events)
    reached = episode.events[2]
    assert (reached.subgoal, reached.outcome) == ("place red_block on blue_block", Outcome.REACHED)
    assert [e.step for e in episode.events] == sorted(e.step for e in episode.events)
    assert episode.events[-1].step == episode.steps and 0 < episode.steps < 300
    assert episode.plans == [["place red_block on blue_block"]]
    # Judged on the final state, after letting go: the block rests on the other and the gripper is empty.
    assert holds(env, RED_ON_BLUE.goals[0]) and holding(env) is None
    assert len(frames) == 1 + episode.steps // 2 and frames[0].shape == (32, 32, 3)  # the start, then every other step
    row = episode.row()
    assert "events" not in row and "plans" not in row and row["planner_latency_mean_s"] >= 0.0
    assert row["success"] is True and row["goals_reached"] == 1


def test_a_planner_fault_ends_the_episode_with_its_cause_and_nothing_moves(domain, env_factory):
    env = env_factory("blocks")
    env.reset(seed=LAYOUT)
    before = snapshot(env)
    planner = ScriptedPlanner(RuntimeError("backend unreachable"))
    episode = Agent(domain, planner).run(env, RED_ON_BLUE)
    assert not episode.success
    assert episode.reason == "planner_error: RuntimeError: backend unreachable"
    assert kinds(episode.events) == ["planner_error", "done"]
    assert (episode.steps, episode.replans, episode.planner_calls, episode.goals_reached) == (0, 0, 1, 0)
    np.testing.assert_array_equal(snapshot(env), before)


def test_an_ungroundable_plan_is_rejected_before_any_step(domain, env_factory):
    env = env_factory("blocks")
    env.reset(seed=LAYOUT)
    before = snapshot(env)
    planner = ScriptedPlanner(
        TabletopPlan(
            subgoals=[PickSubgoal(object="red_block"), PlaceSubgoal(object="red_block", on="blue_blokc")],
        )
    )
    episode = Agent(domain, planner).run(env, RED_ON_BLUE)
    assert not episode.success and episode.steps == 0 and episode.plans == []
    assert kinds(episode.events) == ["plan_rejected", "done"]
    assert episode.reason.startswith("plan_rejected: subgoal 2 (place red_block on blue_blokc): unknown")
    assert "did you mean 'blue_block'?" in episode.events[0].detail
    np.testing.assert_array_equal(snapshot(env), before)


def test_a_planner_for_another_domain_is_refused_naming_both(domain):
    with pytest.raises(ValueError, match="planner 'rover_only' plans for navigation, not for the 'tabletop' domain"):
        Agent(domain, RoverOnlyPlanner())
    with pytest.raises(ValueError, match="planner 'graph' plans for navigation, not for the 'tabletop' domain"):
        Agent(domain, make_planner("graph"))  # declares no domains: a navigation planner
    assert Agent(domain, make_planner("flat")).planner.name == "flat"  # flat plans for both


@pytest.mark.parametrize("max_replans", [0, 2])
def test_replanning_is_bounded_and_each_call_gets_typed_feedback(domain, env_factory, max_replans):
    env = env_factory("blocks")
    env.reset(seed=LAYOUT)
    # Opening the open gripper is reached every time, and never puts red on blue: the plan ends short.
    planner = ScriptedPlanner(TabletopPlan(subgoals=[GripperSubgoal(command="open")]))
    episode = Agent(domain, planner, AgentConfig(max_replans=max_replans)).run(env, RED_ON_BLUE)
    assert not episode.success
    assert episode.reason == "plan_ended_short_of_goal at open the gripper (replans exhausted)"
    assert episode.replans == max_replans and episode.planner_calls == max_replans + 1
    attempt = ["plan", "subgoal_started", "subgoal_reached"]
    assert kinds(episode.events) == [*attempt, "replan"] * max_replans + [*attempt, "done"]
    assert planner.feedback[0] is None
    for n, feedback in enumerate(planner.feedback[1:], start=1):
        assert feedback == Feedback(
            "open the gripper", "plan_ended_short_of_goal", attempt=n, reached=("open the gripper",) * n
        )


def test_a_budget_of_one_step_ends_with_episode_limit_and_no_replan(domain, env_factory):
    env = env_factory("blocks")
    env.reset(seed=LAYOUT)
    config = AgentConfig(max_replans=3, max_episode_steps=1)
    episode = Agent(domain, make_planner("symbolic"), config).run(env, RED_ON_BLUE)
    assert not episode.success
    assert episode.reason == "episode_limit at place red_block on blue_block"
    assert episode.steps == 1 and episode.replans == 0 and episode.planner_calls == 1
    assert kinds(episode.events) == ["plan", "subgoal_started", "subgoal_failed", "done"]
    failed = episode.events[2]
    assert failed.outcome == Outcome.EPISODE_LIMIT and failed.subgoal == "place red_block on blue_block"


def test_a_skill_stopped_from_outside_ends_the_episode_without_replanning(domain, env_factory):
    """An aborted skill call (a robot's e-stop, unusable sensor data) is not the plan's fault: no replan; and the
    release at the end of the episode goes through the domain's own skills (on a robot, forwarded to the arm)."""
    from dataclasses import replace

    from hierarchy.domain import SkillResult

    calls = []

    class Stopped:
        def run(self, env, step, max_steps, on_step):
            calls.append(step.skill)
            return SkillResult(Outcome.ABORTED, 0, 0.0)

    env = env_factory("blocks")
    env.reset(seed=LAYOUT)
    for _ in range(8):  # fingers closed on nothing: the episode's end lets go
        env.step(np.array([0.0, 0.0, 0.0, -1.0]))
    assert env.unwrapped.physics.finger_width() < 0.01
    stopped = replace(domain, skills={name: Stopped() for name in domain.skills})
    episode = Agent(stopped, make_planner("symbolic"), AgentConfig(max_replans=3)).run(env, RED_ON_BLUE)
    assert not episode.success and episode.replans == 0 and episode.planner_calls == 1
    assert episode.reason == "aborted at place red_block on blue_block"
    assert calls[0] == "reach" and calls[-1] == "release"


def test_a_step_whose_effect_already_holds_is_skipped(domain, env_factory):
    env = env_factory("blocks")
    env.reset(seed=LAYOUT)
    # The second pick's approach (reach over the block, fingers open) is skipped, as the block is already held;
    # its lift is reached where it stands: the subgoal takes no step. Run, the approach would open the fingers.
    planner = ScriptedPlanner(TabletopPlan(subgoals=[PickSubgoal(object="red_block")] * 2))
    episode = Agent(domain, planner, AgentConfig(max_replans=0)).run(env, RED_ON_BLUE)
    assert kinds(episode.events) == [
        "plan",
        "subgoal_started",
        "subgoal_reached",
        "subgoal_started",
        "subgoal_reached",
        "done",
    ]
    second_started, second_reached = episode.events[3], episode.events[4]
    assert (second_started.kind, second_reached.kind) == (EventKind.SUBGOAL_STARTED, EventKind.SUBGOAL_REACHED)
    assert second_started.step == second_reached.step > 0
    assert episode.reason == "plan_ended_short_of_goal at pick red_block (replans exhausted)"
    # The episode's end let go of the block it still held.
    assert holding(env) is None and episode.steps > second_reached.step


def test_agent_config_refuses_negative_limits():
    with pytest.raises(ValueError, match="max_replans must be >= 0, got -1"):
        AgentConfig(max_replans=-1)
    with pytest.raises(ValueError, match="max_episode_steps must be >= 1, got 0"):
        AgentConfig(max_episode_steps=0)


def test_execute_carries_out_grounded_steps_without_planning(domain, env_factory):
    """``Agent.execute``: the skills and budgets of an episode for given grounded steps (what RL from execution
    runs for a sampled step); the planner is never asked."""
    env = env_factory("blocks")
    env.reset(seed=LAYOUT)
    planner = ScriptedPlanner(RuntimeError("execute must not plan"))
    agent = Agent(domain, planner, AgentConfig(max_episode_steps=1))
    plan = TabletopPlan(subgoals=[PlaceSubgoal(object="red_block", on="blue_block")])
    assert agent.execute(env, domain.ground(plan, domain.observe(env))) == (
        "place red_block on blue_block",
        Outcome.EPISODE_LIMIT,
    )
    env.reset(seed=LAYOUT)
    agent = Agent(domain, planner, AgentConfig(max_episode_steps=600))
    assert agent.execute(env, domain.ground(plan, domain.observe(env))) == (None, None)
    domain.finish(env, 200, lambda: None)
    assert holds(env, RED_ON_BLUE.goals[0]) and planner.feedback == []
