"""The policy node's NumPy inference (``hrl.ros.inference``): the same actions as SB3's
``predict(deterministic=True)`` for the shipped policy and for freshly built models of every registered
algorithm, and a warned, recorded fallback to ``predict`` for what it does not cover."""

from pathlib import Path

import numpy as np
import pytest
import torch
from stable_baselines3 import SAC
from stable_baselines3.sac.policies import MultiInputPolicy as SACMultiInputPolicy

from hrl import DEFAULT_POLICY
from hrl.config import AlgoConfig, EnvConfig, RobotConfig, TrainConfig
from hrl.policy import GoalPolicy
from hrl.ros.core import PolicyController
from hrl.ros.inference import NumpyPolicy, UnsupportedPolicyError, checked_numpy_policy
from hrl.training import build_model, make_training_env

# float32 rounding: torch's own actions differ from exact (float64) arithmetic by ~3e-6 on the policy's
# observation space, and NumPy's sums in another order by as much again.
ATOL = 1e-5


@pytest.fixture(scope="module")
def venv():
    env = make_training_env(TrainConfig(total_steps=100), seed=0)
    yield env
    env.close()


def fresh_model(venv, name: str, features: str = "goal_frame"):
    """An untrained model as ``hrl-train`` builds it (random weights), small."""
    config = TrainConfig(algo=AlgoConfig(name=name, features=features, net_arch=[32, 32]), total_steps=100)
    return build_model(config, venv, tensorboard_log=None)


def max_error(fast: NumpyPolicy, model, observations) -> float:
    return max(float(np.max(np.abs(fast(o) - model.predict(o, deterministic=True)[0]))) for o in observations)


def space_samples(model, n: int, seed: int = 1) -> list[dict[str, np.ndarray]]:
    space = model.observation_space
    space.seed(seed)
    return [space.sample() for _ in range(n)]


def test_numpy_inference_gives_the_shipped_policys_predict_actions():
    policy = GoalPolicy.load(DEFAULT_POLICY)
    fast = NumpyPolicy(policy.model)
    assert max_error(fast, policy.model, space_samples(policy.model, 1000)) <= ATOL
    # as the node builds them: odometry far from the origin, subgoals a few metres away
    ctrl = PolicyController(policy, 0.5, 1.5)
    rng = np.random.default_rng(0)
    node_obs = []
    for _ in range(300):
        x, y = rng.uniform(-100, 100, 2)
        pose, goal = (x, y, rng.uniform(-np.pi, np.pi)), (x + rng.uniform(-3, 3), y + rng.uniform(-3, 3))
        obs = ctrl.observation(pose, tuple(rng.uniform(-1, 1, 2)), rng.uniform(0, 5, len(ctrl.angles)), goal)
        node_obs.append({k: a.copy() for k, a in obs.items()})
    assert max_error(fast, policy.model, node_obs) <= ATOL


@pytest.mark.parametrize(
    ("name", "features"),
    [("sac_her", "goal_frame"), ("sac_her", "flat"), ("tqc_her", "goal_frame"), ("td3_her", "flat"), ("ppo", "flat")],
)
def test_numpy_inference_gives_predicts_actions_for_each_registered_algorithm(venv, name, features):
    model = fresh_model(venv, name, features)
    assert max_error(NumpyPolicy(model), model, space_samples(model, 300)) <= ATOL


@pytest.mark.parametrize(
    ("activation", "use_sde"), [(torch.nn.Tanh, False), (torch.nn.ELU, False), (torch.nn.LeakyReLU, True)]
)
def test_numpy_inference_covers_sb3s_activations_and_gsde(venv, activation, use_sde):
    model = SAC(
        "MultiInputPolicy", venv, buffer_size=100, use_sde=use_sde, seed=0,
        policy_kwargs={"net_arch": [16, 16], "activation_fn": activation},
    )  # fmt: skip
    with torch.no_grad():  # larger weights than the default init, so the activations' negative sides are used
        for p in model.policy.actor.parameters():
            p.mul_(3.0)
    assert max_error(NumpyPolicy(model), model, space_samples(model, 300)) <= ATOL


def goal_policy(model) -> GoalPolicy:
    return GoalPolicy(model, EnvConfig(), RobotConfig(), AlgoConfig(), Path("fresh.zip"))


def test_an_uncovered_layer_falls_back_to_predict_with_a_warning_that_names_it(venv):
    model = SAC("MultiInputPolicy", venv, buffer_size=100, seed=0, policy_kwargs={"activation_fn": torch.nn.SiLU})
    policy = goal_policy(model)
    with pytest.warns(UserWarning, match="NumPy inference unavailable, using SB3 predict.*layer SiLU"):
        ctrl = PolicyController(policy, 0.5, 1.5)
    assert ctrl.inference.startswith("predict (layer SiLU has no NumPy equivalent")
    ranges = np.full(len(ctrl.angles), 2.0)
    v, w = ctrl.command((1.0, 2.0, 0.3), (0.1, 0.0), ranges, (2.0, 2.5))
    expected = policy(
        {k: a.copy() for k, a in ctrl.observation((1.0, 2.0, 0.3), (0.1, 0.0), ranges, (2.0, 2.5)).items()}
    )
    assert (v / 0.5, w / 1.5) == pytest.approx(tuple(expected), abs=1e-7)  # predict's own actions


class HalvedActionsPolicy(SACMultiInputPolicy):
    """A policy class that changes ``_predict``: what the weights alone do not say."""

    def _predict(self, observation, deterministic=False):
        return 0.5 * super()._predict(observation, deterministic)


def test_a_policy_whose_predict_the_numpy_pass_does_not_reproduce_is_refused(venv):
    policy = goal_policy(SAC(HalvedActionsPolicy, venv, buffer_size=100, seed=0))
    with pytest.raises(UnsupportedPolicyError, match="actions differ from predict's by"):
        checked_numpy_policy(policy)
    with pytest.warns(UserWarning, match="NumPy inference unavailable"):
        assert PolicyController(policy, 0.5, 1.5).inference.startswith("predict (its actions differ")


def test_a_policy_without_an_sb3_model_is_refused_by_name():
    with pytest.raises(UnsupportedPolicyError, match="object has no SB3 model"):
        checked_numpy_policy(object())
