"""The low-level policy's deterministic action as a NumPy forward pass, for the policy node's control loop.

SB3's ``predict`` costs ~1 ms per call in a node that sleeps between control cycles, and even a traced
TorchScript call ~0.7 ms: for a 41-64-64-2 network nearly all of it is torch's per-operation dispatch run
with cold caches, not arithmetic. :class:`NumpyPolicy` copies the actor's weights once and runs the same
float32 arithmetic as a handful of NumPy calls into reused buffers.

Covered, on a ``Box`` action space: SAC and TQC actors (``latent_pi`` -> ``mu`` -> tanh, with or without
gSDE), TD3/DDPG actors (``mu``), and PPO/A2C actor-critic policies (``mlp_extractor.policy_net`` ->
``action_net``, the Gaussian's mean); inputs through SB3's ``FlattenExtractor`` or ``CombinedExtractor``
of non-image ``Box`` spaces, or any features extractor with a ``forward_numpy`` method (as
:class:`hrl.features.GoalFrameExtractor` has); layers ``Linear``, ``Flatten``, ``Identity`` and the
activations in ``_ACTIVATIONS``. Anything else raises :class:`UnsupportedPolicyError` saying what, and the
caller uses ``predict`` instead (``hrl.ros.core.PolicyController`` warns and records it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

Step = Callable[[np.ndarray], np.ndarray]


class UnsupportedPolicyError(ValueError):
    """A policy :class:`NumpyPolicy` cannot reproduce; the message says which part and why."""


def _relu(module: Any) -> Step:
    return lambda x: np.maximum(x, 0.0, out=x)


def _tanh(module: Any) -> Step:
    return lambda x: np.tanh(x, out=x)


def _hardtanh(module: Any) -> Step:
    lo, hi = np.float32(module.min_val), np.float32(module.max_val)
    return lambda x: np.clip(x, lo, hi, out=x)


def _leaky_relu(module: Any) -> Step:
    slope = np.float32(module.negative_slope)
    return lambda x: np.multiply(x, np.where(x >= 0, np.float32(1.0), slope), out=x)


def _elu(module: Any) -> Step:
    alpha = np.float32(module.alpha)
    return lambda x: np.where(x > 0, x, alpha * np.expm1(x)).astype(np.float32, copy=False)


def _identity(module: Any) -> Step:
    return lambda x: x


#: torch module class name -> a builder of its NumPy step (in place where NumPy allows).
_ACTIVATIONS: dict[str, Callable[[Any], Step]] = {
    "ReLU": _relu,
    "Tanh": _tanh,
    "Hardtanh": _hardtanh,
    "LeakyReLU": _leaky_relu,
    "ELU": _elu,
    "Identity": _identity,
    "Flatten": _identity,  # of an unbatched 1-D vector
}


def _linear(layer: Any) -> Step:
    w = layer.weight.detach().cpu().numpy().astype(np.float32)  # a copy: later training does not change it
    b = np.zeros(w.shape[0], np.float32) if layer.bias is None else layer.bias.detach().cpu().numpy().astype(np.float32)
    out = np.empty(w.shape[0], np.float32)

    def step(x: np.ndarray) -> np.ndarray:
        np.dot(w, x, out=out)
        return np.add(out, b, out=out)

    return step


def _steps(module: Any) -> list[Step]:
    """NumPy steps for a torch ``Linear``, activation, or ``Sequential`` of them."""
    import torch

    if isinstance(module, torch.nn.Sequential):
        return [step for child in module for step in _steps(child)]
    if isinstance(module, torch.nn.Linear):
        return [_linear(module)]
    name = type(module).__name__
    if name not in _ACTIVATIONS or type(module).__module__.split(".")[0] != "torch":
        raise UnsupportedPolicyError(
            f"layer {name} has no NumPy equivalent (covered: Linear, {', '.join(_ACTIVATIONS)})"
        )
    return [_ACTIVATIONS[name](module)]


def _features(extractor: Any, observation_space: Any, normalize_images: bool) -> Callable[[Any], np.ndarray]:
    """The features extractor, after SB3's ``preprocess_obs``, on one unbatched float32 observation."""
    from gymnasium import spaces
    from stable_baselines3.common.preprocessing import is_image_space
    from stable_baselines3.common.torch_layers import CombinedExtractor, FlattenExtractor

    subspaces = observation_space.spaces if isinstance(observation_space, spaces.Dict) else {"": observation_space}
    for key, space in subspaces.items():
        if not isinstance(space, spaces.Box):
            raise UnsupportedPolicyError(f"observation {key!r} is a {type(space).__name__} space (covered: Box)")
        if normalize_images and is_image_space(space):
            raise UnsupportedPolicyError(f"observation {key!r} is an image (covered: vectors)")
    # Each result is an array the extractor owns, never a view of the caller's observation: the steps
    # after it work in place.
    if hasattr(extractor, "forward_numpy"):
        return extractor.forward_numpy
    if isinstance(extractor, FlattenExtractor):
        flat = np.empty(extractor.features_dim, np.float32)

        def flatten(obs: np.ndarray) -> np.ndarray:
            flat[:] = obs.reshape(-1)
            return flat

        return flatten
    if isinstance(extractor, CombinedExtractor):
        for key, part in extractor.extractors.items():
            if type(part).__name__ != "Flatten":
                raise UnsupportedPolicyError(f"CombinedExtractor encodes {key!r} with {type(part).__name__}")
        keys = tuple(extractor.extractors)
        out = np.empty(extractor.features_dim, np.float32)
        bounds = np.cumsum([0] + [int(np.prod(observation_space[k].shape)) for k in keys])

        def combined(obs: dict[str, np.ndarray]) -> np.ndarray:
            for key, lo, hi in zip(keys, bounds[:-1], bounds[1:], strict=True):
                out[lo:hi] = obs[key].reshape(-1)
            return out

        return combined
    raise UnsupportedPolicyError(
        f"features extractor {type(extractor).__name__} has no forward_numpy method "
        "(covered: FlattenExtractor, CombinedExtractor of vectors, extractors with forward_numpy)"
    )


def _mode(distribution: Any) -> list[Step]:
    """The deterministic action of SB3's distribution from its mean: tanh when squashed, else the mean."""
    name = type(distribution).__name__
    if name == "SquashedDiagGaussianDistribution":
        return [_tanh(None)]
    if name == "DiagGaussianDistribution":
        return []
    if name == "StateDependentNoiseDistribution":
        return [_tanh(None)] if distribution.bijector is not None else []
    raise UnsupportedPolicyError(f"action distribution {name} (covered: Gaussian, squashed Gaussian, gSDE)")


class NumpyPolicy:
    """SB3's ``policy.predict(obs, deterministic=True)`` for one observation, in NumPy.

    Built once from a model (weights copied, so training the model afterwards does not change it);
    outputs agree with ``predict`` to float32 rounding (a few 1e-6 on the policy's observation space:
    both sum in float32, in different orders). The returned action is a buffer that the next call
    overwrites: copy it to keep it.
    """

    def __init__(self, model: Any) -> None:
        """Copies ``model``'s actor (an SB3 model's ``policy``) into NumPy steps.

        Raises:
            UnsupportedPolicyError: an architecture not covered (see the module docstring), naming the part.
        """
        policy = getattr(model, "policy", None)
        if policy is None:
            raise UnsupportedPolicyError(f"{type(model).__name__} is not an SB3 model (no .policy)")
        from gymnasium import spaces

        space = policy.action_space
        if not isinstance(space, spaces.Box):
            raise UnsupportedPolicyError(f"action space {space} (covered: Box)")
        actor = getattr(policy, "actor", None)
        if actor is not None and hasattr(actor, "latent_pi"):  # SAC, TQC
            extractor = actor.features_extractor
            steps = _steps(actor.latent_pi) + _steps(actor.mu) + _mode(actor.action_dist)
        elif actor is not None and hasattr(actor, "mu"):  # TD3, DDPG: mu ends in tanh
            extractor = actor.features_extractor
            steps = _steps(actor.mu)
        elif hasattr(policy, "mlp_extractor") and hasattr(policy, "action_net"):  # PPO, A2C
            extractor = policy.pi_features_extractor
            steps = _steps(policy.mlp_extractor.policy_net) + _steps(policy.action_net) + _mode(policy.action_dist)
        else:
            raise UnsupportedPolicyError(
                f"policy class {type(policy).__name__} (covered: SAC, TQC, TD3, DDPG, PPO, A2C)"
            )
        self._features = _features(extractor, policy.observation_space, policy.normalize_images)
        self._steps = steps
        self._keys = tuple(policy.observation_space.spaces) if isinstance(policy.observation_space, spaces.Dict) else ()
        self._shape = space.shape
        self._squash = bool(policy.squash_output)
        self._low = space.low.astype(np.float32)
        self._high = space.high.astype(np.float32)
        self._span = self._high - self._low
        self._action = np.empty(int(np.prod(space.shape)), np.float32)

    def __call__(self, observation: dict[str, np.ndarray] | np.ndarray) -> np.ndarray:
        """The deterministic action for one (unbatched) observation, as ``predict`` returns it."""
        if self._keys:
            obs: Any = {k: np.asarray(observation[k], dtype=np.float32) for k in self._keys}  # type: ignore[index]
        else:
            obs = np.asarray(observation, dtype=np.float32)
        x = self._features(obs)
        for step in self._steps:
            x = step(x)
        a = self._action
        if self._squash:  # predict's unscale_action: low + 0.5 * (a + 1) * (high - low), same float32 steps
            np.add(x, 1.0, out=a)
            a *= 0.5
            a *= self._span
            a += self._low
        else:
            np.clip(x, self._low, self._high, out=a)
        return a.reshape(self._shape)


def checked_numpy_policy(policy: Any, probes: int = 8, atol: float = 1e-5) -> NumpyPolicy:
    """A :class:`NumpyPolicy` for ``policy`` (a ``GoalPolicy``: ``policy.model`` is the SB3 model), checked
    against ``policy``'s own actions (SB3's ``predict``) on ``probes`` observations drawn from its
    observation space.

    Raises:
        UnsupportedPolicyError: the architecture is not covered, or the actions differ by more than ``atol``.
    """
    model = getattr(policy, "model", None)
    if model is None:
        raise UnsupportedPolicyError(f"{type(policy).__name__} has no SB3 model (.model)")
    fast = NumpyPolicy(model)
    space = model.observation_space
    space.seed(0)
    for _ in range(probes):
        obs = space.sample()
        expected = np.asarray(policy(obs), dtype=np.float32).reshape(-1)
        error = float(np.max(np.abs(fast(obs).reshape(-1) - expected)))
        if not error <= atol:
            raise UnsupportedPolicyError(
                f"its actions differ from predict's by {error:.2g} on a probe (allowed {atol})"
            )
    return fast
