"""The small physics interface each simulator backend implements for the rover tasks.

The task logic (goal sampling, reward, success, observation assembly) lives in ``sim.nav_task`` and
the Gymnasium env in ``sim.nav_env``; a backend only moves the robot and reads its sensors. Backends
are registered by name in :data:`BACKENDS` and chosen with ``gym.make(..., backend=NAME)``.
"""

from __future__ import annotations

import importlib
from typing import Protocol

import numpy as np

from robots.spec import RobotSpec
from sim.world import Pose2D, World

#: Backend name -> "module:Class" implementing :class:`RoverPhysics` (imported on first use).
BACKENDS: dict[str, str] = {
    "mujoco": "sim.mujoco.physics:MujocoRoverPhysics",
}


class RoverPhysics(Protocol):
    """A simulated differential-drive robot in a world."""

    def __init__(
        self,
        world: World,
        robot: RobotSpec,
        *,
        physics_dt: float,
        substeps: int,
        goal_radius: float,
        render_height: int,
    ) -> None: ...

    def reset(self, pose: Pose2D) -> None:
        """Place the robot at rest at ``pose``."""

    def step(self, linear: float, angular: float) -> bool:
        """Command (m/s, rad/s) for one control period; True if the robot touched a wall."""

    def pose(self) -> Pose2D: ...

    def velocity(self) -> tuple[float, float]:
        """Forward speed (m/s) and yaw rate (rad/s) in the robot frame."""

    def lidar(self) -> np.ndarray:
        """Ranges (m) of the lidar rays, ``max_range`` where nothing was hit."""

    def set_goal_marker(self, goal: tuple[float, float]) -> None: ...

    def render(self) -> np.ndarray:
        """A top-down RGB image (H, W, 3) uint8."""

    def world_to_pixel(self, x: float, y: float) -> tuple[float, float]:
        """(column, row) of a map point in the rendered image."""

    def close(self) -> None: ...


def physics_class(backend: str) -> type[RoverPhysics]:
    if backend not in BACKENDS:
        raise ValueError(f"unknown physics backend {backend!r}; available: {', '.join(sorted(BACKENDS))}")
    module_name, _, class_name = BACKENDS[backend].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ImportError(
            f"physics backend {backend!r} needs an optional dependency ({err.name}); "
            f"install it with: pip install 'hrl-stack[{backend}]'"
        ) from err
    return getattr(module, class_name)
