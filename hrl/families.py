"""The env families of the two embodiments (:class:`hrl.config.EnvFamily`): what of the shared config reaches
each, and what training may assume of it. Imported by :mod:`hrl.config`, which registers nothing of its own.

* the rover, ``hrl/RoverNav-*`` (sim/navigation/env.py): its arguments are ``env.kwargs`` (map, goal mode, step
  budget, ...), plus ``env.backend``, ``env.wrappers``, the robot's name and its lidar overrides; goal-frame
  features and the goal-radius curriculum apply;
* the tabletop, ``hrl/PandaTabletop-*`` (sim/tabletop/env.py): ``env.kwargs`` (scene, goal mode, ...), plus
  ``env.backend`` and ``env.wrappers``.
"""

from __future__ import annotations

from typing import Any

from hrl.config import EnvConfig, EnvFamily, RobotConfig, plain_wrapper_specs, register_env_family


def shared_arguments(env: EnvConfig) -> dict[str, Any]:
    """``env.backend`` (when set) and ``env.wrappers`` (when any), as ``gym.make`` arguments."""
    kwargs: dict[str, Any] = {}
    if env.backend is not None:
        kwargs["backend"] = env.backend
    if env.wrappers:
        kwargs["wrappers"] = plain_wrapper_specs(env.wrappers)
    return kwargs


def rover_arguments(env: EnvConfig, robot: RobotConfig) -> dict[str, Any]:
    """``hrl/RoverNav-*``'s arguments besides ``env.kwargs``: the robot's name and lidar overrides, the shared
    fields."""
    kwargs: dict[str, Any] = {"robot": robot.name, **shared_arguments(env)}
    for name in ("lidar_rays", "lidar_fov_deg", "lidar_max_range"):
        if getattr(robot, name) is not None:
            kwargs[name] = getattr(robot, name)
    return kwargs


register_env_family(
    EnvFamily(
        pattern="hrl/RoverNav-*",
        env_class="sim.navigation.env:RoverNavEnv",
        arguments=rover_arguments,
        reads=("backend", "wrappers", "robot"),
        features=("goal_frame",),
        curriculum=True,
        describe=lambda env: str(env.argument("map")),
        legacy_fields=True,
    )
)

register_env_family(
    EnvFamily(
        pattern="hrl/PandaTabletop-*",
        env_class="sim.tabletop.env:PandaTabletopEnv",
        arguments=lambda env, robot: shared_arguments(env),
        reads=("backend", "wrappers"),
    )
)
