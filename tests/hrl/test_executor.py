"""SubgoalExecutor and HierarchicalAgent against the real env and the shipped policy."""

import math

import gymnasium as gym
import numpy as np
import pytest

from hrl.executor import ExecutorConfig, HierarchicalAgent, SubgoalExecutor, visited_in_order
from hrl.policy import GoalPolicy
from llm_planner.base import Task, make_planner
from llm_planner.plan import GroundedSubgoal, Plan, PointTarget, Subgoal


@pytest.fixture(scope="module")
def policy():
    return GoalPolicy.load("shipped:rover_local")


def make_env(map_name="two_rooms"):
    return gym.make("hrl/RoverNav-v0", map=map_name, goal_mode="anywhere", max_steps=10_000)


def test_executor_reaches_a_subgoal_and_records_events(policy):
    env = make_env()
    obs, _ = env.reset(seed=0, options={"start": (1.0, 1.0, 0.0)})
    ex = SubgoalExecutor(env, policy)
    ex.start(obs)
    outcome = ex.run_subgoal(GroundedSubgoal(2.5, 2.0, 0.3, 100, "point"))
    assert outcome.reached and outcome.reason == "reached"
    assert math.dist(ex.position, (2.5, 2.0)) <= 0.3
    assert [e.kind for e in ex.events] == ["subgoal_started", "subgoal_reached"]
    assert ex.steps == outcome.steps == len(ex.trajectory) - 1


def test_executor_budget_and_stuck(policy):
    env = make_env()
    obs, _ = env.reset(seed=0, options={"start": (1.0, 1.0, 0.0)})
    ex = SubgoalExecutor(env, policy, ExecutorConfig(stuck_window=15))
    ex.start(obs)
    assert ex.run_subgoal(GroundedSubgoal(4.0, 4.0, 0.3, 3, "far")).reason == "budget"
    # behind the wall, no line of sight: the straight-line policy presses into the wall and stops progressing
    obs = env.unwrapped.set_goal((6.0, 1.0))
    outcome = ex.run_subgoal(GroundedSubgoal(6.5, 1.0, 0.3, 400, "behind the wall"))
    assert not outcome.reached and outcome.reason in ("stuck", "collisions")
    assert ex.events[-1].kind == "subgoal_failed"


def test_agent_completes_a_multi_room_task_with_graph(policy):
    env = make_env("apartment")
    obs, _ = env.reset(seed=0, options={"start": "kitchen"})
    agent = HierarchicalAgent(make_planner("graph"), policy, ExecutorConfig(max_episode_steps=2000))
    record, _ = agent.run(env, Task("go to the bed", ("bed",)), obs)
    assert record.success, record.reason
    assert record.goals_reached == 1 and record.planner_calls >= 1
    assert visited_in_order(record.trajectory, [(1.5, 1.0)], 0.3) == 1


class UnreachableFirst:
    """Plans an unreachable subgoal first (inside a closed-off corner); a correct plan after feedback."""

    name = "unreachable_first"

    def __init__(self):
        self.calls = []

    def plan(self, task, scene, feedback=None):
        self.calls.append(feedback)
        graph = make_planner("graph").plan(task, scene, feedback)
        if feedback is None:
            trap = Subgoal(target=PointTarget(x=6.5, y=1.0), tolerance=0.2, step_budget=150)  # behind the wall
            return Plan(subgoals=[trap, *graph.subgoals])
        return graph


def test_failure_triggers_replan_with_feedback(policy):
    env = make_env()
    obs, _ = env.reset(seed=0, options={"start": (1.0, 1.0, 0.0)})
    planner = UnreachableFirst()
    agent = HierarchicalAgent(planner, policy, ExecutorConfig(stuck_window=25))
    record, ex = agent.run(env, Task("dock", ("charging_dock",)), obs)
    assert record.success and record.replans == 1, record.reason
    assert planner.calls[0] is None and planner.calls[1] is not None
    fb = planner.calls[1]
    assert fb.reason in ("stuck", "collisions") and fb.failed_point == (6.5, 1.0)
    kinds = [e.kind for e in ex.events]
    assert "subgoal_failed" in kinds and "replan" in kinds


def test_replans_are_bounded(policy):
    class AlwaysTrap:
        name = "trap"

        def plan(self, task, scene, feedback=None):
            return Plan(subgoals=[Subgoal(target=PointTarget(x=6.5, y=1.0), tolerance=0.2, step_budget=60)])

    env = make_env()
    obs, _ = env.reset(seed=0, options={"start": (1.0, 1.0, 0.0)})
    record, _ = HierarchicalAgent(AlwaysTrap(), policy, ExecutorConfig(stuck_window=20, max_replans=2)).run(
        env, Task("dock", ("charging_dock",)), obs
    )
    assert not record.success and record.replans == 2 and record.planner_calls == 3
    assert "replans exhausted" in record.reason


def test_planner_that_raises_stops_the_episode_cleanly(policy):
    class Broken:
        name = "broken"

        def plan(self, task, scene, feedback=None):
            raise RuntimeError("model server unreachable")

    env = make_env()
    obs, _ = env.reset(seed=0, options={"start": (1.0, 1.0, 0.0)})
    record, ex = HierarchicalAgent(Broken(), policy).run(env, Task("dock", ("charging_dock",)), obs)
    assert not record.success and record.steps == 0
    assert record.reason == "planner_error: RuntimeError: model server unreachable"
    assert ex.events[-2].kind == "planner_error"


def test_ungroundable_plan_is_rejected_before_moving(policy):
    class Hallucinating:
        name = "hallucinating"

        def plan(self, task, scene, feedback=None):
            return Plan.from_data({"subgoals": [{"target": {"kind": "landmark", "name": "jacuzzi"}}]})

    env = make_env()
    obs, _ = env.reset(seed=0, options={"start": (1.0, 1.0, 0.0)})
    record, _ = HierarchicalAgent(Hallucinating(), policy).run(env, Task("dock", ("charging_dock",)), obs)
    assert not record.success and record.steps == 0
    assert record.reason.startswith("plan_rejected: subgoal 1 (landmark jacuzzi): unknown landmark 'jacuzzi'")


def test_executor_config_rejects_bad_values():
    with pytest.raises(ValueError, match="stuck_window must be >= 1"):
        ExecutorConfig(stuck_window=0)
    with pytest.raises(ValueError, match="max_replans must be >= 0"):
        ExecutorConfig(max_replans=-1)


def test_visited_in_order():
    traj = [(0, 0), (1, 0), (2, 0), (1, 0), (0, 0)]
    assert visited_in_order(traj, [(2, 0), (0, 0)], 0.1) == 2
    assert visited_in_order(traj[:3], [(2, 0), (0, 0)], 0.1) == 1
    assert visited_in_order(traj, [(0, 5)], 0.1) == 0


def test_recovery_backs_off_and_retries(policy):
    """Pressed against a wall with the goal beyond it, the executor backs off before giving up."""
    env = make_env()
    obs, _ = env.reset(seed=0, options={"start": (4.0, 1.0, 0.0)})
    ex = SubgoalExecutor(env, policy, ExecutorConfig(stuck_window=15, recoveries=2, backoff_steps=6))
    ex.start(obs)
    outcome = ex.run_subgoal(GroundedSubgoal(6.5, 1.0, 0.3, 300, "behind the wall"))
    assert not outcome.reached
    recoveries = [e for e in ex.events if e.kind == "recovery"]
    assert len(recoveries) == 2
    # backing off moved the robot away from the wall it pressed into (its face at x = 4.95)
    xs = [x for x, _ in ex.trajectory]
    pressed = next(i for i, x in enumerate(xs) if x > 4.7)
    assert min(xs[pressed:]) < 4.6


def test_subgoals_are_driven_on_the_noisy_observation(policy):
    """With sensor-noise wrappers the executor sees odometry, as a robot would, from the first step of
    every subgoal (it used to get the clean observation back from env.unwrapped.set_goal)."""
    noisy = [{"name": "sensor_noise", "lidar_std": 0.02, "odom_xy_std": 0.05, "odom_yaw_std": 0.02}]
    env = gym.make("hrl/RoverNav-v0", map="two_rooms", goal_mode="anywhere", max_steps=10_000, wrappers=noisy)
    obs, _ = env.reset(seed=0, options={"start": (1.0, 1.0, 0.0)})
    seen = []  # (what the policy got, the clean observation at that moment)

    def recording(o):
        seen.append((o["observation"].copy(), env.unwrapped._observe()["observation"]))
        return policy(o)

    ex = SubgoalExecutor(env, recording)
    ex.start(obs)
    assert ex.run_subgoal(GroundedSubgoal(2.5, 2.0, 0.3, 150, "first")).reached
    switch = len(seen)
    ex.run_subgoal(GroundedSubgoal(1.5, 3.5, 0.3, 5, "second"))
    got, clean = seen[switch]
    assert not np.allclose(got[6:], clean[6:])  # noisy lidar at the subgoal switch
    assert not np.allclose(got[:2], clean[:2])  # and the drifted odometry pose
    # The episode is judged on where the robot really went, not on where it believes it is.
    true = env.unwrapped.pose
    assert ex.trajectory[-1] == (true.x, true.y)
    assert math.dist(ex.position, ex.trajectory[-1]) > 1e-3
