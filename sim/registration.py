"""Gymnasium registration of the rover environments.

Env ids are versioned: a change of behaviour (reward, observation layout, dynamics) bumps the version.
"""

from __future__ import annotations

import gymnasium as gym

#: Env id -> (entry point, default kwargs). Each id accepts all ``RoverNavEnv`` keyword arguments.
ENV_IDS: dict[str, tuple[str, dict]] = {
    "hrl/RoverNav-v0": ("sim.nav_env:RoverNavEnv", {}),
}


def register_envs() -> None:
    """Register every id in :data:`ENV_IDS` (idempotent)."""
    for env_id, (entry_point, kwargs) in ENV_IDS.items():
        if env_id not in gym.registry:
            # No TimeLimit wrapper: episodes are truncated by the env itself (its max_steps argument).
            gym.register(id=env_id, entry_point=entry_point, kwargs=kwargs, disable_env_checker=False)
