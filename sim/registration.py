"""Gymnasium registration of the project's environments (the rover's and the tabletop's).

Env ids are versioned: a change of behaviour (reward, observation layout, dynamics) bumps the version.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym

#: Env id -> (entry point, default kwargs). Each id accepts all its env's keyword arguments (``RoverNavEnv``,
#: ``PandaTabletopEnv``), plus ``wrappers`` (sim-to-real wrappers by name, see sim.wrappers).
ENV_IDS: dict[str, tuple[str, dict]] = {
    "hrl/RoverNav-v0": ("sim.registration:make_rover_nav", {}),
    "hrl/PandaTabletop-v0": ("sim.registration:make_panda_tabletop", {}),
}


def make_rover_nav(wrappers: Sequence[Mapping[str, Any] | str] | None = None, **kwargs: Any) -> gym.Env:
    """``RoverNavEnv(**kwargs)`` wrapped in ``wrappers`` (e.g. ``[{"name": "sensor_noise", "lidar_std": 0.02}]``)."""
    from sim.navigation.env import RoverNavEnv
    from sim.wrappers import apply_wrappers

    return apply_wrappers(RoverNavEnv(**kwargs), wrappers)


def make_panda_tabletop(wrappers: Sequence[Mapping[str, Any] | str] | None = None, **kwargs: Any) -> gym.Env:
    """``PandaTabletopEnv(**kwargs)`` wrapped in ``wrappers``."""
    from sim.tabletop.env import PandaTabletopEnv
    from sim.wrappers import apply_wrappers

    return apply_wrappers(PandaTabletopEnv(**kwargs), wrappers)


# gym.make reads the creator's metadata to check render_mode.
make_rover_nav.metadata = {"render_modes": ["rgb_array"], "render_fps": 10}  # type: ignore[attr-defined]
make_panda_tabletop.metadata = {"render_modes": ["rgb_array"], "render_fps": 25}  # type: ignore[attr-defined]


def register_envs() -> None:
    """Register every id in :data:`ENV_IDS` (idempotent)."""
    for env_id, (entry_point, kwargs) in ENV_IDS.items():
        if env_id not in gym.registry:
            # No TimeLimit wrapper: episodes are truncated by the env itself (its max_steps argument).
            gym.register(id=env_id, entry_point=entry_point, kwargs=kwargs, disable_env_checker=False)
