"""A scripted expert for the tabletop's goal modes: what a few lines of geometry can do without learning.

It reads the simulator's state (not the observation), so it is a teacher and a yardstick, not a policy:
demonstrations for the replay buffer (``hrl-train``'s ``demo_episodes``), a check that every goal mode is
solvable in both engines (tests/sim/tabletop/test_expert.py), and the reference a learned skill is compared
with. Stateless: each call decides from the current state alone, so it recovers from any disturbance.
"""

from __future__ import annotations

import numpy as np

from sim.tabletop.env import TCP_STEP, PandaTabletopEnv

#: How close (m) the TCP must be to a waypoint before the next phase starts.
NEAR = 0.01
#: Clearance (m) above an object when moving over it.
HOVER = 0.08
#: Pushing speed (action units: 0.2 = at most 1 cm per step, 0.25 m/s): faster pushes tip the object in
#: MuJoCo (tests/sim/tabletop/test_parity.py).
PUSH_SPEED = 0.2
#: The TCP pushes this far (m) above the object's centre: the fingertips reach ~7 mm below the TCP.
PUSH_ABOVE = 0.002


def _toward(env: PandaTabletopEnv, target: np.ndarray) -> np.ndarray:
    """The action moving the TCP straight at ``target`` (full speed until within one step)."""
    return np.clip((np.asarray(target) - env.tcp()[0]) / TCP_STEP, -1.0, 1.0)


def expert_action(env: PandaTabletopEnv, rng: np.random.Generator | None = None, noise: float = 0.0) -> np.ndarray:
    """The expert's action for the env's current state and goal, plus Gaussian ``noise`` (action units)."""
    env = env.unwrapped  # type: ignore[assignment]
    goal = env.goal
    tcp = env.tcp()[0]
    if env.goal_mode == "reach":
        action = _toward(env, goal)
    else:
        obj = env.physics.object_state(env.object).position
        half = env.scene.object(env.object).size[2] / 2
        script = _push if env.goal_mode == "push" else _pick_place
        action = script(env, tcp, obj, goal, half)
    if noise > 0:
        action = action + (rng or env.np_random).normal(0.0, noise, action.shape)
    return np.clip(action, -1.0, 1.0).astype(np.float32)


def _push(env: PandaTabletopEnv, tcp: np.ndarray, obj: np.ndarray, goal: np.ndarray, half: float) -> np.ndarray:
    """Behind the object (seen from the goal), down to its centre height, then through it toward the goal."""
    d = goal[:2] - obj[:2]
    dist = float(np.linalg.norm(d))
    if dist < NEAR:
        return np.zeros(3)
    u = d / dist
    rel = tcp[:2] - obj[:2]
    along, across = float(rel @ u), float(rel[0] * u[1] - rel[1] * u[0])
    behind = obj[:2] - u * (half + 0.03)
    if along < -half and abs(across) < half and tcp[2] < obj[2] + half:
        # In line behind the object and low: push, aiming the TCP at where the object's back should end up.
        return PUSH_SPEED * _toward(env, np.array([*(goal[:2] - u * (half + 0.01)), obj[2] + PUSH_ABOVE]))
    if np.linalg.norm(tcp[:2] - behind) < NEAR:
        return _toward(env, np.array([*behind, obj[2] + PUSH_ABOVE]))
    # Go round: up over the object's height first, then across to the point behind it.
    if tcp[2] < obj[2] + half + 0.02 and np.linalg.norm(rel) < 2 * half + 0.04:
        return _toward(env, np.array([*tcp[:2], obj[2] + HOVER]))
    return _toward(env, np.array([*behind, max(tcp[2], obj[2] + half + 0.03)]))


def _pick_place(env: PandaTabletopEnv, tcp: np.ndarray, obj: np.ndarray, goal: np.ndarray, half: float) -> np.ndarray:
    """Over the object with the gripper open, down, close, then carry to the goal."""
    width = env.physics.finger_width()
    # Close only with the fingertips level with the object's centre: pinching an edge squeezes it out.
    at_object = np.linalg.norm(tcp[:2] - obj[:2]) < 1.5 * NEAR and abs(tcp[2] - obj[2]) < 0.006
    held = at_object and width < 2 * half + 0.005
    if held:
        # Lift straight up first, then carry at half speed: a sideways yank at full speed (~2 m/s with the
        # servos' overshoot) drags the object along the table and out of the fingers.
        if tcp[2] < min(goal[2], obj[2] + 0.03) and np.linalg.norm(goal[:2] - tcp[:2]) > 2 * NEAR:
            return np.append(0.5 * _toward(env, np.array([*tcp[:2], obj[2] + 0.04])), -1.0)
        return np.append(0.5 * _toward(env, goal), -1.0)
    if at_object:
        return np.append(np.zeros(3), -1.0)  # close on it
    low = tcp[2] < obj[2] + HOVER - 0.02
    if np.linalg.norm(tcp[:2] - obj[:2]) < (2 * NEAR if low else NEAR):
        # Open before the fingers reach the object's top, then descend at half speed (the servos overshoot a
        # full-speed stop by ~1 cm, enough to pinch the object's lower edge against the table).
        opened = width > 2 * half + 0.02
        return np.append(0.5 * _toward(env, obj) if opened else np.zeros(3), 1.0)
    return np.append(_toward(env, np.array([*obj[:2], obj[2] + HOVER])), 1.0)
