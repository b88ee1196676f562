"""The safety critic's data, training and files (its use in planning: tests/llm_planner/test_sorb_safe.py)."""

import numpy as np
import pytest

from hrl.policy import GoalPolicy
from hrl.safety_critic import (
    CostData,
    RolloutConfig,
    SafetyCritic,
    TrainConfig,
    collect_cost_rollouts,
    concatenate,
    evaluate,
    train_safety_critic,
    walls_world,
)


@pytest.fixture(scope="module")
def policy():
    return GoalPolicy.load("shipped:rover_local")


@pytest.fixture(scope="module")
def data(policy):
    return collect_cost_rollouts(policy, ["two_rooms", walls_world(7)], RolloutConfig(rollouts_per_map=15, seed=3))


def test_cost_to_go_counts_the_contact_left_in_each_rollout(data):
    assert data.map_names == ["two_rooms", "walls_7"]
    assert len(data.observations) == len(data.goals) == len(data.cost_to_go) == len(data.rollout)
    for r in np.unique(data.rollout):
        costs = data.cost_to_go[data.rollout == r]
        assert (costs >= 0).all() and (np.diff(costs) <= 0).all()  # what is left can only shrink
        assert (np.diff(costs) >= -1).all()  # by at most one contact step per control step
        assert len(np.unique(data.goals[data.rollout == r], axis=0)) == 1  # one goal per rollout


def test_switching_rollouts_go_on_at_speed_from_a_waypoint_as_a_plan_is_driven(policy, data):
    """A plan's waypoint is left while the robot still moves with the last leg's heading; rollouts from rest
    never show the critic that turn (the contact of sorb_safe's apartment routes was at such turns)."""
    config = RolloutConfig(rollouts_per_map=15, seed=3, switch_fraction=1.0)
    switching = collect_cost_rollouts(policy, ["two_rooms"], config)
    rest = data.in_maps(["two_rooms"])

    def first_states(d):
        starts = np.nonzero(np.r_[True, d.rollout[1:] != d.rollout[:-1]])[0]
        return starts, d.observations[starts]

    _, at_rest = first_states(rest)
    assert np.allclose(at_rest[:, 4:6], 0.0)  # plain rollouts start at rest
    starts, first = first_states(switching)
    moving = np.abs(first[:, 4]) > 0.1
    assert moving.sum() >= 5  # second legs, started at speed
    for k in np.nonzero(moving)[0]:
        previous_goal = switching.goals[starts[k] - 1]  # the first leg's goal: the waypoint just reached
        assert np.linalg.norm(first[k, :2] - previous_goal) <= config.switch_tolerance
        assert not np.allclose(switching.goals[starts[k]], previous_goal)  # on to another goal
    with pytest.raises(ValueError, match="switch_fraction must be in"):
        RolloutConfig(switch_fraction=-0.1)


def test_generated_maps_are_valid_distinct_and_reproducible():
    a, b = walls_world(1000), walls_world(1001)
    assert a.walls == walls_world(1000).walls and a.walls != b.walls
    assert a.free_space(0.25).area > 40  # mostly free: corridors and rooms, not a solid block


def test_trained_critic_survives_saving_and_refuses_bad_settings(policy, data, tmp_path):
    critic, losses = train_safety_critic(policy, data, TrainConfig(hidden=(16,), epochs=3))
    assert len(losses) == 3 and losses[-1] < losses[0]
    critic.save(tmp_path)
    loaded = SafetyCritic.load(tmp_path, policy)
    x, g = data.observations[:50], data.goals[:50]
    assert np.allclose(loaded.cost(x, g), critic.cost(x, g)) and (critic.cost(x, g) >= 0).all()
    assert loaded.digest() == critic.digest()
    report = evaluate(critic, data)
    assert report["rollouts"] == len(np.unique(data.rollout)) and report["samples"] == len(data.cost_to_go)
    with pytest.raises(ValueError, match="rollouts_per_map must be >= 1"):
        RolloutConfig(rollouts_per_map=0)
    with pytest.raises(ValueError, match="line_of_sight_fraction must be in"):
        RolloutConfig(line_of_sight_fraction=1.5)


def test_concatenate_renumbers_rollouts_and_maps(data):
    both = concatenate([data, data])
    assert len(both.cost_to_go) == 2 * len(data.cost_to_go)
    assert both.map_names == data.map_names * 2
    assert len(np.unique(both.rollout)) == 2 * len(np.unique(data.rollout))
    walls = data.in_maps(["walls_7"])
    assert isinstance(walls, CostData) and 0 < len(walls.cost_to_go) < len(data.cost_to_go)
    assert set(data.map_of_rollout[np.unique(walls.rollout)].tolist()) == {1}
