"""The rover on the domain-free hierarchy: hierarchy.agent.Agent with the navigation domain."""

import math

import gymnasium as gym
import pytest

from hierarchy.agent import Agent, AgentConfig
from hierarchy.domain import EventKind, Outcome
from hierarchy.navigation import ExecutorConfig, NavigationDomain
from hrl.policy import GoalPolicy
from llm_planner.base import Task, make_planner
from llm_planner.plan import Plan, PointTarget, Subgoal
from llm_planner.planners.common import goal_point


@pytest.fixture(scope="module")
def policy():
    return GoalPolicy.load("shipped:rover_local")


def apartment(start="kitchen", seed=0):
    env = gym.make("hrl/RoverNav-v0", map="apartment", goal_mode="anywhere", max_steps=10_000)
    obs, _ = env.reset(seed=seed, options={"start": start})
    return env, obs


def test_the_rover_runs_on_the_domain_free_agent(policy):
    env, obs = apartment()
    domain = NavigationDomain(policy, ExecutorConfig(max_episode_steps=2000))
    episode = Agent(domain, make_planner("graph")).run(env, Task("go to the bed", ("bed",)), obs=obs)
    assert episode.success and episode.reason == "success" and episode.goals_reached == episode.goals_total == 1
    kinds = [e.kind for e in episode.events]
    assert kinds[0] == EventKind.PLAN and kinds[-1] == EventKind.DONE
    assert kinds.count(EventKind.SUBGOAL_STARTED) == kinds.count(EventKind.SUBGOAL_REACHED) == len(episode.plans[0])
    # every event is stamped with where the robot believed it was; the last is at the bed
    assert all(len(e.where) == 2 for e in episode.events)
    bed = goal_point("bed", env.unwrapped.world)
    assert math.dist(episode.events[-1].where, bed) <= 0.3
    assert domain.executor.steps == episode.steps == len(domain.executor.trajectory) - 1


def test_the_navigation_domain_needs_the_reset_observation(policy):
    env, _ = apartment()
    with pytest.raises(ValueError, match="obs=obs"):
        Agent(NavigationDomain(policy), make_planner("graph")).run(env, Task("go to the bed", ("bed",)))


def test_a_tabletop_planner_is_refused_on_the_navigation_domain(policy):
    with pytest.raises(ValueError, match="plans for tabletop, not for the 'navigation' domain"):
        Agent(NavigationDomain(policy), make_planner("symbolic"))


class GoalThenForbidden:
    """Routes to the task's goal, then on into the room the task forbids (the graph's route, no constraint)."""

    name = "goal_then_forbidden"

    def plan(self, task, scene, feedback=None):
        from llm_planner.planners.graph import GraphPlanner

        return GraphPlanner().plan(Task(task.text, task.goals + task.avoid), scene, feedback)


def test_entering_an_avoided_room_fails_the_task_even_after_its_goals(policy):
    """The acceptance check is "goals visited in order and no avoided room entered": the old rover loop
    called this a success because the goal had been visited before the room was entered."""
    env, obs = apartment("kitchen")
    task = Task("go to the fridge, and keep out of the living room", ("fridge",), avoid=("living_room",))
    episode = Agent(NavigationDomain(policy), GoalThenForbidden()).run(env, task, obs=obs)
    assert episode.goals_reached == 1  # the fridge was visited...
    assert not episode.success and episode.reason == "entered avoided room living_room"  # ...and that is not enough
    failed = [e for e in episode.events if e.kind == EventKind.SUBGOAL_FAILED]
    assert [e.outcome for e in failed] == [Outcome.ENTERED_AVOIDED_ROOM]
    assert EventKind.REPLAN not in [e.kind for e in episode.events]  # nothing mends it


def test_recovery_is_a_typed_event_and_feedback_is_the_rovers(policy):
    """Pressed into a wall the drive skill backs off (typed recovery events) before failing; the planner's
    feedback is the rover's (pose, failed point, failures so far)."""
    seen = []

    class BehindTheWall:
        name = "behind_the_wall"

        def plan(self, task, scene, feedback=None):
            seen.append(feedback)
            return Plan(subgoals=[Subgoal(target=PointTarget(x=6.5, y=1.0), step_budget=300)])

    env = gym.make("hrl/RoverNav-v0", map="two_rooms", goal_mode="anywhere", max_steps=10_000)
    obs, _ = env.reset(seed=0, options={"start": (4.0, 1.0, 0.0)})
    config = ExecutorConfig(stuck_window=15, recoveries=1, backoff_steps=6, max_replans=1)
    episode = Agent(NavigationDomain(policy, config), BehindTheWall(), AgentConfig(max_replans=1)).run(
        env, Task("go behind the wall", ((6.5, 1.0),)), obs=obs
    )
    assert not episode.success and episode.replans == 1
    assert [e.kind for e in episode.events].count(EventKind.RECOVERY) == 2  # one per attempt
    fb = seen[1]
    assert fb.failed_point == (6.5, 1.0) and fb.reason in ("stuck", "collisions") and fb.attempt == 1
    assert fb.history == (f"{fb.failed_subgoal}: {fb.reason}",) and fb.robot_pose.x > 4.0
