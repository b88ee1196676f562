"""Policy input features for the rover's goal-conditioned policies (other goal envs use ``flat``).

The env's observation carries the absolute pose and the goal in the map frame (HER needs absolute
goals to relabel). A goal-reaching skill, however, should not depend on *where* in a map it runs:
:class:`GoalFrameExtractor` turns (pose, goal) into the goal's position in the robot frame and drops
the absolute coordinates, so a policy trained on the ``open`` map transfers to any map, and learns
with far fewer samples.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor


class GoalFrameExtractor(BaseFeaturesExtractor):
    """Features ``[goal_x_robot, goal_y_robot, goal_distance, v, w, ranges...]`` (translation/rotation invariant)."""

    def __init__(self, observation_space: gym.spaces.Dict) -> None:
        n_obs = observation_space["observation"].shape[0]
        goal_shape = observation_space["desired_goal"].shape
        if goal_shape != (2,) or n_obs < 4:
            # Another env's observation would be read as a pose without any error: refuse it by its shapes.
            raise ValueError(
                "algo.features=goal_frame reads the rover's observation (x, y, cos, sin, ...) and an (x, y) goal; "
                f"this env has observation {observation_space['observation'].shape} and goal {goal_shape}: "
                "use algo.features=flat"
            )
        super().__init__(observation_space, features_dim=3 + (n_obs - 4))

    def forward(self, observations: dict[str, torch.Tensor]) -> torch.Tensor:
        obs = observations["observation"]
        goal = observations["desired_goal"]
        dx = goal[:, 0] - obs[:, 0]
        dy = goal[:, 1] - obs[:, 1]
        cos, sin = obs[:, 2], obs[:, 3]
        local_x = cos * dx + sin * dy
        local_y = -sin * dx + cos * dy
        distance = torch.sqrt(local_x**2 + local_y**2 + 1e-9)
        return torch.cat([local_x[:, None], local_y[:, None], distance[:, None], obs[:, 4:]], dim=1)

    def forward_numpy(self, observations: dict[str, np.ndarray]) -> np.ndarray:
        """:meth:`forward` for one unbatched float32 observation in NumPy, the same float32 operations in
        the same order (the policy node's inference, ``hrl.ros.inference``); a new array."""
        obs = observations["observation"]
        goal = observations["desired_goal"]
        dx = goal[0] - obs[0]
        dy = goal[1] - obs[1]
        cos, sin = obs[2], obs[3]
        local_x = cos * dx + sin * dy
        local_y = -sin * dx + cos * dy
        distance = np.sqrt(local_x**2 + local_y**2 + 1e-9)
        return np.concatenate(((local_x, local_y, distance), obs[4:]), dtype=np.float32)
