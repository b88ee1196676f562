"""The small physics interface each simulator backend implements for the rover tasks.

The task logic (goal sampling, reward, success, observation assembly) lives in ``sim.navigation.task`` and
the Gymnasium env in ``sim.navigation.env``; a backend only moves the robot and reads its sensors. Backends
are registered by name in :data:`BACKENDS` and chosen with ``gym.make(..., backend=NAME)``.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from robots.spec import RobotSpec
from sim.navigation.world import Pose2D, World

#: Backend name -> "module:Class" implementing :class:`RoverPhysics` (imported on first use).
BACKENDS: dict[str, str] = {
    "mujoco": "sim.navigation.mujoco.physics:MujocoRoverPhysics",
    "pybullet": "sim.navigation.pybullet.physics:PybulletRoverPhysics",
}

# The drive model every backend implements (the rover is a planar base driven like a ROS base taking
# /cmd_vel): a forward velocity servo ``F = kv (v_cmd - v)`` with ``kv = m / DRIVE_TIME_CONSTANT``,
# clamped to ``m * max_linear_acceleration``; a lateral tyre grip that holds the sideways velocity at 0
# with at most ``friction * m * g``; a yaw servo like the forward one with the chassis' inertia.

#: Time constant (s) with which the drive tracks a commanded velocity when below its force limit.
DRIVE_TIME_CONSTANT = 0.05
#: Tyre-floor friction coefficient (lateral grip) of the nominal robot.
LATERAL_FRICTION = 0.8
GRAVITY = 9.81


@dataclass(frozen=True)
class Dynamics:
    """Physical parameters a backend can change between episodes (domain randomization).

    ``mass_scale`` scales the chassis mass and inertia (the motors' force limits stay: a heavier robot
    accelerates more slowly); ``friction`` is the tyre grip coefficient (lateral slip limit) and the
    chassis-wall friction; ``motor_gain`` scales the velocity the drive achieves for a command (a wheel
    radius or encoder calibration error: 1.05 drives 5 % faster than commanded).
    """

    mass_scale: float = 1.0
    friction: float = LATERAL_FRICTION
    motor_gain: float = 1.0

    def __post_init__(self) -> None:
        for name in ("mass_scale", "friction", "motor_gain"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"Dynamics.{name} must be a positive number, got {value!r}")


@dataclass(frozen=True)
class RenderSize:
    width: int
    height: int


def render_size_for(world: World, height: int) -> RenderSize:
    """An image size with the map's aspect ratio (width rounded to a multiple of 16 for video codecs)."""
    w, h = world.size
    width = max(16, round(height * w / h / 16.0) * 16)
    return RenderSize(width=width, height=height)


@dataclass(frozen=True)
class TopView:
    """The top-down orthographic view both backends render: centre and vertical extent (m)."""

    center: tuple[float, float]
    extent: float
    size: RenderSize

    @classmethod
    def of(cls, world: World, size: RenderSize, margin: float = 0.4) -> TopView:
        xmin, ymin, xmax, ymax = world.bounds
        extent = max(ymax - ymin, (xmax - xmin) * size.height / size.width) + margin
        return cls(((xmin + xmax) / 2.0, (ymin + ymax) / 2.0), extent, size)

    def world_to_pixel(self, x: float, y: float) -> tuple[float, float]:
        scale = self.size.height / self.extent
        cx, cy = self.center
        return (self.size.width / 2 + (x - cx) * scale, self.size.height / 2 - (y - cy) * scale)


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

    def set_dynamics(self, dynamics: Dynamics) -> None:
        """Change mass, friction and motor gain; takes effect at the next step and lasts until changed."""

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
