"""Goal-conditioned navigation task logic, independent of the physics engine.

Everything a backend must not re-implement lives here: goal and start sampling, goal validation,
the observation layout, the reward (vectorised for HER relabelling) and success.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from robots.spec import RobotSpec
from sim.navigation.world import Pose2D, World

GOAL_MODES = ("local", "anywhere", "landmark")
REWARD_TYPES = ("sparse", "dense")
#: Normalised velocities are clipped to this magnitude in the observation (bumps can exceed 1).
VELOCITY_OBS_LIMIT = 2.0


@dataclass(frozen=True)
class NavTaskConfig:
    """Parameters of the navigation task; every value is checked by :meth:`validate`."""

    goal_mode: str = "local"
    local_goal_radius: float = 2.0
    success_radius: float = 0.25
    reward_type: str = "sparse"
    collision_penalty: float = 0.0
    terminate_on_success: bool = False
    terminate_on_collision: bool = False
    max_steps: int = 100

    def validate(self) -> None:
        if self.goal_mode not in GOAL_MODES:
            raise ValueError(f"goal_mode must be one of {GOAL_MODES}, got {self.goal_mode!r}")
        if self.reward_type not in REWARD_TYPES:
            raise ValueError(f"reward_type must be one of {REWARD_TYPES}, got {self.reward_type!r}")
        for name in ("local_goal_radius", "success_radius"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number of metres, got {value!r}")
        if not (
            isinstance(self.collision_penalty, (int, float))
            and math.isfinite(self.collision_penalty)
            and self.collision_penalty >= 0
        ):
            raise ValueError(f"collision_penalty must be a number >= 0, got {self.collision_penalty!r}")
        if isinstance(self.max_steps, bool) or not isinstance(self.max_steps, int) or self.max_steps < 1:
            raise ValueError(f"max_steps must be a positive integer, got {self.max_steps!r}")
        if self.goal_mode == "local" and self.local_goal_radius <= 2 * self.success_radius:
            raise ValueError(
                f"local_goal_radius ({self.local_goal_radius}) must exceed twice the success_radius "
                f"({self.success_radius}), otherwise every local goal is reached at the start"
            )


class NavTask:
    """Goal-reaching for a planar robot with a lidar in a :class:`~sim.navigation.world.World`.

    Observation layout (``observation`` entry, float32):
    ``[x, y, cos(yaw), sin(yaw), v / v_max, w / w_max, range_1 / max_range, ..., range_n / max_range]``;
    ``achieved_goal`` is the robot's (x, y), ``desired_goal`` the goal's (x, y), in metres in the map frame.
    """

    def __init__(self, world: World, robot: RobotSpec, config: NavTaskConfig) -> None:
        config.validate()
        if config.goal_mode == "landmark" and not world.landmarks:
            raise ValueError(f"goal_mode='landmark' needs landmarks, but map {world.name!r} has none")
        self.world = world
        self.robot = robot
        self.config = config
        self.start_clearance = robot.radius + 0.1
        self.goal_clearance = robot.radius + 0.05
        self._inv_limits = (1.0 / robot.limits.max_linear_velocity, 1.0 / robot.limits.max_angular_velocity)
        self._inv_range = 1.0 / robot.lidar.max_range

    # ------------------------------------------------------------------ spaces

    def observation_space(self) -> spaces.Dict:
        xmin, ymin, xmax, ymax = self.world.bounds
        n = self.robot.lidar.num_rays
        low = np.array([xmin, ymin, -1, -1, -VELOCITY_OBS_LIMIT, -VELOCITY_OBS_LIMIT] + [0.0] * n, dtype=np.float32)
        high = np.array([xmax, ymax, 1, 1, VELOCITY_OBS_LIMIT, VELOCITY_OBS_LIMIT] + [1.0] * n, dtype=np.float32)
        goal = spaces.Box(np.array([xmin, ymin], np.float32), np.array([xmax, ymax], np.float32), dtype=np.float32)
        return spaces.Dict(
            {"observation": spaces.Box(low, high, dtype=np.float32), "achieved_goal": goal, "desired_goal": goal}
        )

    def observation_labels(self) -> list[str]:
        n = self.robot.lidar.num_rays
        return ["x", "y", "cos_yaw", "sin_yaw", "v_norm", "w_norm"] + [f"range_{k}" for k in range(n)]

    def observe(
        self, pose: Pose2D, velocity: tuple[float, float], ranges: np.ndarray, goal: np.ndarray
    ) -> dict[str, np.ndarray]:
        obs = np.empty(6 + ranges.shape[0], dtype=np.float32)
        lim = VELOCITY_OBS_LIMIT
        obs[:6] = (
            pose.x,
            pose.y,
            math.cos(pose.yaw),
            math.sin(pose.yaw),
            min(max(velocity[0] * self._inv_limits[0], -lim), lim),
            min(max(velocity[1] * self._inv_limits[1], -lim), lim),
        )
        np.multiply(ranges, self._inv_range, out=obs[6:], casting="unsafe")
        return {
            "observation": obs,
            "achieved_goal": obs[:2].copy(),
            "desired_goal": goal.astype(np.float32, copy=True),
        }

    # ------------------------------------------------------------------ goals and starts

    def check_goal(self, goal: Any) -> np.ndarray:
        """A goal set from outside as an (x, y) array; ValueError if it is not reachable ground."""
        try:
            arr = np.asarray(goal, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError) as err:
            raise ValueError(f"goal must be (x, y) in metres, got {goal!r}") from err
        if arr.shape != (2,) or not np.all(np.isfinite(arr)):
            raise ValueError(f"goal must be two finite numbers (x, y) in metres, got {goal!r}")
        if not self.world.in_bounds(arr):
            raise ValueError(
                f"goal {arr.tolist()} lies outside map {self.world.name!r} (bounds {list(self.world.bounds)})"
            )
        if self.world.in_wall(arr):
            raise ValueError(f"goal {arr.tolist()} lies inside a wall of map {self.world.name!r}")
        return arr

    def check_start(self, start: Any) -> Pose2D:
        """A start given by name (a map start pose) or as (x, y[, yaw])."""
        if isinstance(start, str):
            if start not in self.world.starts:
                raise ValueError(
                    f"unknown start {start!r} in map {self.world.name!r}; named starts: "
                    f"{sorted(self.world.starts) or 'none'} (or pass (x, y, yaw))"
                )
            return self.world.starts[start]
        if isinstance(start, Pose2D):
            values = [start.x, start.y, start.yaw]
        elif isinstance(start, (Sequence, np.ndarray)):
            values = [float(v) for v in start]
        else:
            raise ValueError(f"start must be a start name or (x, y[, yaw]), got {start!r}")
        if len(values) not in (2, 3) or not all(math.isfinite(v) for v in values):
            raise ValueError(f"start must be a start name or finite (x, y[, yaw]), got {start!r}")
        pose = Pose2D(*values)
        if not self.world.is_free((pose.x, pose.y), clearance=self.robot.radius):
            raise ValueError(
                f"start {values} in map {self.world.name!r} is not free space: the rover (radius "
                f"{self.robot.radius} m) would overlap a wall or stand outside every room"
            )
        return pose

    def sample_start(self, rng: np.random.Generator) -> Pose2D:
        x, y = self.world.sample_free(rng, self.start_clearance)
        return Pose2D(x, y, float(rng.uniform(-math.pi, math.pi)))

    def sample_goal(self, rng: np.random.Generator, start: Pose2D) -> np.ndarray:
        cfg = self.config
        min_distance = 2.0 * cfg.success_radius
        if cfg.goal_mode == "local":
            xy = self.world.sample_free(
                rng,
                self.goal_clearance,
                near=(start.x, start.y),
                radius=cfg.local_goal_radius,
                min_distance=min_distance,
                line_of_sight=True,
            )
        elif cfg.goal_mode == "anywhere":
            xy = self.world.sample_free(
                rng,
                self.goal_clearance,
                near=(start.x, start.y),
                radius=math.hypot(*self.world.size),
                min_distance=min_distance,
            )
        else:
            landmarks = [lm for lm in self.world.landmarks if math.dist(lm.position, (start.x, start.y)) > min_distance]
            pool = landmarks or list(self.world.landmarks)
            xy = pool[int(rng.integers(len(pool)))].position
        return np.asarray(xy, dtype=np.float64)

    # ------------------------------------------------------------------ reward

    def compute_reward(self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any) -> Any:
        """Reward for (batches of) achieved and desired goals; HER calls this to relabel.

        ``sparse``: -1 until within ``success_radius``, then 0. ``dense``: minus the distance (m).
        ``collision_penalty`` is subtracted where ``info["collision"]`` is true.
        """
        achieved = np.asarray(achieved_goal, dtype=np.float64)
        desired = np.asarray(desired_goal, dtype=np.float64)
        distance = np.linalg.norm(achieved - desired, axis=-1)
        if distance.ndim == 0:
            return self.reward(float(distance), bool(_collisions(info, ())))
        if self.config.reward_type == "sparse":
            reward = -(distance > self.config.success_radius).astype(np.float64)
        else:
            reward = -distance
        if self.config.collision_penalty:
            reward = reward - self.config.collision_penalty * _collisions(info, distance.shape)
        return reward.astype(np.float32)

    def reward(self, distance: float, collision: bool) -> float:
        """The same reward as :meth:`compute_reward` for one transition, without array overhead."""
        if self.config.reward_type == "sparse":
            reward = -1.0 if distance > self.config.success_radius else 0.0
        else:
            reward = -distance
        if collision:
            reward -= self.config.collision_penalty
        return reward


def _collisions(info: Any, shape: tuple[int, ...]) -> np.ndarray:
    if info is None:
        return np.zeros(shape)
    if isinstance(info, Mapping):
        return np.full(shape, float(bool(info.get("collision", False))))
    flat = np.asarray([float(bool(i.get("collision", False))) for i in np.ravel(info)])
    return flat.reshape(shape)
