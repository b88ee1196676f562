"""``hrl/RoverNav-v0``: goal-conditioned rover navigation, as a Gymnasium environment.

Observation: ``Dict(observation, achieved_goal, desired_goal)`` (layout in :class:`sim.navigation.task.NavTask`).
Action: ``(v, w)`` in [-1, 1], scaled to the robot's velocity limits; values outside [-1, 1] are
clipped (a policy's Gaussian can overshoot), NaN or inf raises ``ValueError``.
One ``step`` is one control period (``1 / control_hz`` s) made of ``substeps`` physics steps.

The high level sets goals with ``reset(options={"goal": (x, y)})`` or ``env.unwrapped.set_goal((x, y))``;
``reset(options={"start": "dock" | (x, y, yaw)})`` chooses the start pose.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from robots.spec import RobotSpec, load_robot
from sim.navigation.physics import physics_class
from sim.navigation.task import NavTask, NavTaskConfig
from sim.navigation.world import Pose2D, World, load_world


class RoverNavEnv(gym.Env[dict[str, np.ndarray], np.ndarray]):
    """A differential-drive rover with a planar lidar reaching (x, y) goals in a map."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(
        self,
        map: str | Path | World = "open",
        robot: str | Path | RobotSpec = "rover",
        backend: str = "mujoco",
        *,
        control_hz: float = 10.0,
        physics_dt: float = 0.01,
        lidar_rays: int | None = None,
        lidar_fov_deg: float | None = None,
        lidar_max_range: float | None = None,
        max_steps: int = 100,
        goal_mode: str = "local",
        local_goal_radius: float = 2.0,
        success_radius: float = 0.25,
        reward_type: str = "sparse",
        collision_penalty: float = 0.0,
        terminate_on_success: bool = False,
        terminate_on_collision: bool = False,
        start: str | tuple[float, ...] | None = None,
        render_mode: str | None = None,
        render_height: int = 480,
    ) -> None:
        self.world = map if isinstance(map, World) else load_world(map)
        spec = robot if isinstance(robot, RobotSpec) else load_robot(robot)
        if lidar_rays is not None or lidar_fov_deg is not None or lidar_max_range is not None:
            spec = spec.with_lidar(spec.lidar.with_overrides(lidar_rays, lidar_fov_deg, lidar_max_range))
        self.robot = spec
        self.substeps = _substeps(control_hz, physics_dt)
        self.control_hz = float(control_hz)
        self.task = NavTask(
            self.world,
            spec,
            NavTaskConfig(
                goal_mode=goal_mode,
                local_goal_radius=local_goal_radius,
                success_radius=success_radius,
                reward_type=reward_type,
                collision_penalty=collision_penalty,
                terminate_on_success=terminate_on_success,
                terminate_on_collision=terminate_on_collision,
                max_steps=max_steps,
            ),
        )
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or one of {self.metadata['render_modes']}, got {render_mode!r}")
        if isinstance(render_height, bool) or not isinstance(render_height, int) or render_height < 16:
            raise ValueError(f"render_height must be an integer >= 16 (pixels), got {render_height!r}")
        self.render_mode = render_mode
        self.metadata = {**self.metadata, "render_fps": self.control_hz}
        self._fixed_start = None if start is None else self.task.check_start(start)
        self.backend = backend
        self.physics = physics_class(backend)(
            self.world,
            spec,
            physics_dt=physics_dt,
            substeps=self.substeps,
            goal_radius=success_radius,
            render_height=render_height,
        )
        self.observation_space = self.task.observation_space()
        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
        self._max_linear = spec.limits.max_linear_velocity
        self._max_angular = spec.limits.max_angular_velocity
        self._goal = np.zeros(2)
        self._obs: dict[str, np.ndarray] | None = None
        self._steps = 0

    # ------------------------------------------------------------------ Gymnasium API

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        options = dict(options or {})
        unknown = set(options) - {"goal", "start"}
        if unknown:
            raise ValueError(f"unknown reset option(s) {sorted(unknown)}; allowed: 'goal', 'start'")
        if options.get("start") is not None:
            start = self.task.check_start(options["start"])
        elif self._fixed_start is not None:
            start = self._fixed_start
        else:
            start = self.task.sample_start(self.np_random)
        goal = (
            self.task.check_goal(options["goal"])
            if options.get("goal") is not None
            else self.task.sample_goal(self.np_random, start)
        )
        self.physics.reset(start)
        self._steps = 0
        self._set_goal(goal)
        self._obs = self._observe()
        return self._obs, self._info(collision=False)

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        if self._obs is None:
            raise RuntimeError("call reset() before step()")
        a = np.asarray(action, dtype=np.float64)
        if a.shape != (2,):
            raise ValueError(f"action must have shape (2,) = (v, w) in [-1, 1], got shape {a.shape}")
        v, w = float(a[0]), float(a[1])
        if not (math.isfinite(v) and math.isfinite(w)):
            raise ValueError(f"action contains NaN or inf: {a.tolist()}; the policy output is broken")
        collision = self.physics.step(
            min(max(v, -1.0), 1.0) * self._max_linear, min(max(w, -1.0), 1.0) * self._max_angular
        )
        self._steps += 1
        self._obs = obs = self._observe()
        info = self._info(collision)
        reward = self.task.reward(info["distance"], collision)
        cfg = self.task.config
        terminated = bool(
            (cfg.terminate_on_success and info["is_success"]) or (cfg.terminate_on_collision and collision)
        )
        truncated = self._steps >= cfg.max_steps
        return obs, reward, terminated, truncated, info

    def render(self) -> np.ndarray | None:
        if self.render_mode is None:
            gym.logger.warn("render() called with render_mode=None; pass render_mode='rgb_array' to make()")
            return None
        return self.physics.render()

    def close(self) -> None:
        self.physics.close()

    # ------------------------------------------------------------------ goal-conditioned API

    def compute_reward(self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any) -> Any:
        """Vectorised reward (see :meth:`sim.navigation.task.NavTask.compute_reward`); used by HER."""
        return self.task.compute_reward(achieved_goal, desired_goal, info)

    def set_goal(self, goal: Any) -> dict[str, np.ndarray]:
        """Change the goal mid-episode (the hierarchy's subgoals); returns the updated observation."""
        if self._obs is None:
            raise RuntimeError("call reset() before set_goal()")
        self._set_goal(self.task.check_goal(goal))
        self._obs = self._observe()
        return self._obs

    def observation_at(self, pose: Pose2D) -> dict[str, np.ndarray]:
        """Place the robot at rest at ``pose`` and return what it observes there.

        For planners that reason over states (SoRB) in their own copy of the world; unlike
        ``reset(options={"start": ...})`` it samples no goal and accepts poses touching a wall.
        """
        if not all(math.isfinite(v) for v in (pose.x, pose.y, pose.yaw)) or not self.world.in_bounds((pose.x, pose.y)):
            raise ValueError(f"pose {pose} is not a finite pose inside map {self.world.name!r}")
        self.physics.reset(pose)
        self._obs = self._observe()
        return self._obs

    def set_local_goal_radius(self, radius: float) -> None:
        """Change the radius of ``local`` goals from the next reset on (goal curricula use this)."""
        config = replace(self.task.config, local_goal_radius=radius)
        config.validate()
        self.task.config = config

    @property
    def goal(self) -> np.ndarray:
        return self._goal.copy()

    @property
    def pose(self) -> Pose2D:
        return self.physics.pose()

    # ------------------------------------------------------------------ internals

    def _set_goal(self, goal: np.ndarray) -> None:
        self._goal = np.asarray(goal, dtype=np.float64).copy()
        self.physics.set_goal_marker((float(self._goal[0]), float(self._goal[1])))

    def _observe(self) -> dict[str, np.ndarray]:
        return self.task.observe(self.physics.pose(), self.physics.velocity(), self.physics.lidar(), self._goal)

    def _info(self, collision: bool) -> dict[str, Any]:
        assert self._obs is not None  # internal invariant: _observe() ran first
        ag = self._obs["achieved_goal"]
        distance = math.hypot(float(ag[0]) - self._goal[0], float(ag[1]) - self._goal[1])
        return {
            "is_success": distance <= self.task.config.success_radius,
            "collision": collision,
            "distance": distance,
        }


def _substeps(control_hz: float, physics_dt: float) -> int:
    for name, value in (("control_hz", control_hz), ("physics_dt", physics_dt)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"{name} must be a positive number, got {value!r}")
    ratio = 1.0 / (control_hz * physics_dt)
    substeps = round(ratio)
    if substeps < 1 or abs(ratio - substeps) > 1e-6:
        raise ValueError(
            f"the control period 1/control_hz = {1.0 / control_hz:g} s must be a whole multiple of "
            f"physics_dt = {physics_dt:g} s (got {ratio:.4g} physics steps per control step)"
        )
    return substeps
