"""Demonstrations from an env's scripted expert, stored in an off-policy model's replay buffer before training.

Sparse-reward manipulation is an exploration problem: a random arm almost never moves the object, so HER has
nothing to relabel into success for a long time (RL Zoo budgets ~1 M steps for Push and PickAndPlace). A few
hundred noisy expert episodes in the buffer give it object motion from the first update (Nair et al. 2018,
"Overcoming Exploration in Reinforcement Learning with Demonstrations"). The expert is the env's own
(``env.unwrapped.expert_action(rng, noise)``); the algorithm and its losses are unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def prefill_demonstrations(model: Any, episodes: int, noise: float) -> dict[str, float]:
    """Run ``episodes`` expert episodes in ``model``'s own vector env and store every transition in its replay
    buffer (HER relabels them like any other). Returns ``{"episodes", "steps", "success"}``.

    Raises ValueError if the env has no scripted expert.
    """
    venv = model.env
    try:
        venv.env_method("expert_action", None, noise, indices=[0])
    except AttributeError:
        raise ValueError(
            "demos.episodes needs an env with a scripted expert (env.unwrapped.expert_action(rng, noise)), "
            f"which {venv.get_attr('spec', indices=[0])[0].id} does not have; use demos.episodes=0"
        ) from None
    model._setup_learn(total_timesteps=1, callback=None, reset_num_timesteps=True, progress_bar=False)
    done, steps, wins = 0, 0, 0
    while done < episodes:
        actions = np.stack(venv.env_method("expert_action", None, noise)).astype(np.float32)
        new_obs, rewards, dones, infos = venv.step(actions)
        model._store_transition(model.replay_buffer, actions, new_obs, rewards, dones, infos)
        steps += venv.num_envs
        for finished, info in zip(dones, infos, strict=True):
            if finished:
                done += 1
                wins += bool(info.get("is_success", False))
    if hasattr(model.replay_buffer, "truncate_last_trajectory"):
        # With several envs some episodes are cut short here; HER must not join them to the next ones.
        model.replay_buffer.truncate_last_trajectory()
    return {"episodes": done, "steps": steps, "success": wins / done if done else 0.0}
