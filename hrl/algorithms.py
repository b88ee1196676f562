"""Registry of the RL algorithms ``hrl-train`` can use, and of policy feature extractors.

Adding an algorithm is one ``register_algorithm`` call and one ``configs/algo/<name>.yaml``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class AlgorithmSpec:
    name: str
    class_path: str  # "module:Class", imported on first use
    off_policy: bool
    extra: str = "rl"

    def load_class(self) -> Any:
        module_name, _, class_name = self.class_path.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as err:
            raise ImportError(
                f"algorithm {self.name!r} needs {module_name.split('.')[0]}; install it with: "
                f"pip install 'hrl-stack[{self.extra}]'"
            ) from err
        return getattr(module, class_name)


ALGORITHMS: dict[str, AlgorithmSpec] = {}

#: Policy input features: name -> "module:Class" of an SB3 features extractor (None: SB3's default).
FEATURES: dict[str, str | None] = {
    "goal_frame": "hrl.features:GoalFrameExtractor",
    "flat": None,
}
#: The features any Dict(observation, achieved_goal, desired_goal) env can use; the others read one env
#: family's observation layout and are allowed for it only (hrl.config.EnvFamily.features).
GENERIC_FEATURES = frozenset({"flat"})


def register_algorithm(spec: AlgorithmSpec) -> None:
    ALGORITHMS[spec.name] = spec


register_algorithm(AlgorithmSpec("sac_her", "stable_baselines3:SAC", off_policy=True))
register_algorithm(AlgorithmSpec("td3_her", "stable_baselines3:TD3", off_policy=True))
register_algorithm(AlgorithmSpec("tqc_her", "sb3_contrib:TQC", off_policy=True))
register_algorithm(AlgorithmSpec("ppo", "stable_baselines3:PPO", off_policy=False))


def algorithm(name: str) -> AlgorithmSpec:
    if name not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {name!r}; available: {', '.join(sorted(ALGORITHMS))}")
    return ALGORITHMS[name]


def features_class(name: str) -> Any:
    if name not in FEATURES:
        raise ValueError(f"unknown features {name!r}; available: {', '.join(sorted(FEATURES))}")
    path = FEATURES[name]
    if path is None:
        return None
    module_name, _, class_name = path.partition(":")
    return getattr(importlib.import_module(module_name), class_name)
