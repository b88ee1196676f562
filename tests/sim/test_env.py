import math

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

from sim.navigation.physics import BACKENDS as PHYSICS_BACKENDS
from sim.navigation.world import World, available_maps
from sim.registration import ENV_IDS

#: The rover's ids (every version of hrl/RoverNav); the tabletop's are tested in tests/sim/tabletop/.
ALL_IDS = sorted(i for i in ENV_IDS if i.startswith("hrl/RoverNav-"))
BACKENDS = sorted(PHYSICS_BACKENDS)


@pytest.fixture(params=BACKENDS)
def backend(request):
    """Tests taking this fixture run on every physics backend: the task contract is the same."""
    return request.param


def make(**kwargs):
    return gym.make("hrl/RoverNav-v0", **kwargs)


@pytest.mark.parametrize("env_id", ALL_IDS)
@pytest.mark.parametrize("map_name", ["open", "apartment"])
def test_env_checkers(env_id, map_name, backend):
    env = gym.make(env_id, backend=backend, map=map_name)
    gym_check_env(env.unwrapped, skip_render_check=True)
    sb3_check_env(env.unwrapped, warn=True)
    env.close()


@pytest.mark.parametrize("env_id", ALL_IDS)
@pytest.mark.parametrize("map_name", available_maps())
@pytest.mark.parametrize("goal_mode", ["local", "anywhere", "landmark"])
def test_random_rollout_conformance(env_id, map_name, goal_mode, backend):
    env = gym.make(env_id, backend=backend, map=map_name, goal_mode=goal_mode, max_steps=30)
    obs, info = env.reset(seed=3)
    for _ in range(40):
        assert env.observation_space.contains(obs), obs
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert np.isfinite(obs["observation"]).all()
        assert reward in (-1.0, 0.0)
        assert set(info) >= {"is_success", "collision", "distance"}
        if terminated or truncated:
            assert truncated and not terminated  # no termination by default, truncation at max_steps
            obs, info = env.reset()
    env.close()


def test_determinism(backend):
    def rollout():
        env = make(backend=backend, map="apartment", goal_mode="anywhere")
        obs, _ = env.reset(seed=42)
        rng = np.random.default_rng(7)
        trace = [obs["observation"].copy(), obs["desired_goal"].copy()]
        for _ in range(50):
            obs, _r, *_ = env.step(rng.uniform(-1, 1, 2))
            trace.append(obs["observation"].copy())
        env.close()
        return np.concatenate(trace)

    np.testing.assert_array_equal(rollout(), rollout())


def test_different_seeds_differ():
    env = make()
    a, _ = env.reset(seed=1)
    b, _ = env.reset(seed=2)
    assert not np.allclose(a["desired_goal"], b["desired_goal"])


def wall_world(wall_x: float) -> World:
    """An 8 m square with one extra wall across it at x = wall_x (a known obstacle)."""
    return World.from_dict(
        {"name": "lidar_test", "bounds": [0, 0, 8, 8], "walls": [[[wall_x, 0.0], [wall_x, 8.0]]]},
        source="<lidar_test>",
    )


def ray_index(env, angle):
    angles = env.unwrapped.robot.lidar.angles()
    return int(np.argmin([abs(math.remainder(a - angle, 2 * math.pi)) for a in angles]))


@pytest.mark.parametrize("yaw", [0.0, math.pi / 2, -2.0])
def test_lidar_reads_distance_to_known_wall(yaw, backend):
    wall_x, thickness = 5.0, 0.1
    env = make(backend=backend, map=wall_world(wall_x), lidar_max_range=6.0)
    obs, _ = env.reset(seed=0, options={"start": (2.0, 4.0, yaw)})
    ranges = obs["observation"][6:] * 6.0
    angles = env.unwrapped.robot.lidar.angles()
    # the ray closest to world +x hits the wall's near face, at d / cos(angle off the x axis)
    i = ray_index(env, -yaw)
    off = yaw + angles[i]
    assert ranges[i] == pytest.approx((wall_x - thickness / 2 - 2.0) / math.cos(off), abs=1e-3)
    # the ray closest to world -x hits the outer wall at x=0
    j = ray_index(env, math.pi - yaw)
    off = yaw + angles[j] - math.pi
    assert ranges[j] == pytest.approx((2.0 - thickness / 2) / math.cos(off), abs=1e-3)
    env.close()


def test_lidar_reports_max_range_without_return(backend):
    env = make(backend=backend, map="open", lidar_max_range=1.0, lidar_rays=8)
    obs, _ = env.reset(seed=0, options={"start": (3.0, 3.0, 0.0)})
    np.testing.assert_allclose(obs["observation"][6:], 1.0)
    assert obs["observation"].shape == (6 + 8,)


def test_collision_is_reported_and_wall_holds(backend):
    env = make(backend=backend, map=wall_world(5.0), max_steps=200)
    env.reset(seed=0, options={"start": (4.0, 4.0, 0.0), "goal": (1.0, 1.0)})
    collided = False
    for _ in range(40):
        obs, _, _, _, info = env.step(np.array([1.0, 0.0]))
        collided |= info["collision"]
        assert obs["achieved_goal"][0] < 5.0 - 0.05 - 0.2 + 0.02  # never through the wall
    assert collided
    # driving away clears the contact
    for _ in range(5):
        _, _, _, _, info = env.step(np.array([-1.0, 0.0]))
    assert not info["collision"]


def test_no_collision_in_free_space(backend):
    env = make(backend=backend, map="open")
    env.reset(seed=0, options={"start": (3.0, 3.0, 0.0), "goal": (1.0, 1.0)})
    for _ in range(10):
        _, _, _, _, info = env.step(np.array([0.5, 0.5]))
        assert not info["collision"]


def test_goal_from_reset_options_and_set_goal():
    env = make(map="apartment")
    obs, info = env.reset(seed=0, options={"start": "kitchen", "goal": (8.0, 7.0)})
    np.testing.assert_allclose(obs["desired_goal"], [8.0, 7.0])
    assert info["distance"] == pytest.approx(math.dist((2.0, 6.0), (8.0, 7.0)), abs=1e-5)
    obs, reward, *_ = env.step(np.zeros(2))
    np.testing.assert_allclose(obs["desired_goal"], [8.0, 7.0])
    assert reward == -1.0
    # a goal at the robot's own position is reached immediately
    here = tuple(float(v) for v in obs["achieved_goal"])
    obs = env.unwrapped.set_goal(here)
    np.testing.assert_allclose(obs["desired_goal"], here, atol=1e-6)
    obs, reward, _, _, info = env.step(np.zeros(2))
    assert reward == 0.0 and info["is_success"]
    # the goal marker in the simulator moved too
    model = env.unwrapped.physics.model
    np.testing.assert_allclose(model.site("goal").pos[:2], here, atol=1e-6)


def test_named_start_used():
    env = make(map="apartment", start="dock")
    obs, _ = env.reset(seed=0)
    np.testing.assert_allclose(obs["achieved_goal"], [0.7, 3.75], atol=1e-5)


def test_local_goals_within_radius():
    env = make(map="open", goal_mode="local", local_goal_radius=1.0)
    for seed in range(20):
        _obs, info = env.reset(seed=seed)
        assert 0.5 <= info["distance"] <= 1.0 + 1e-6


def test_landmark_goals_are_landmarks():
    env = make(map="apartment", goal_mode="landmark")
    positions = {lm.position for lm in env.unwrapped.world.landmarks}
    for seed in range(10):
        obs, _ = env.reset(seed=seed)
        assert tuple(round(float(v), 4) for v in obs["desired_goal"]) in {
            (round(x, 4), round(y, 4)) for x, y in positions
        }


def test_dynamics_respect_limits(backend):
    env = make(backend=backend, map="open")
    env.reset(seed=0, options={"start": (1.0, 3.0, 0.0), "goal": (5.0, 3.0)})
    spec = env.unwrapped.robot
    v_max, a_max = spec.limits.max_linear_velocity, spec.limits.max_linear_acceleration
    obs, *_ = env.step(np.array([1.0, 0.0]))
    v = obs["observation"][4] * v_max
    assert 0.0 < v <= a_max * 0.1 + 1e-6  # acceleration-limited over one 0.1 s step
    for _ in range(15):
        obs, *_ = env.step(np.array([1.0, 0.0]))
    assert obs["observation"][4] * v_max == pytest.approx(v_max, rel=0.02)
    assert obs["achieved_goal"][1] == pytest.approx(3.0, abs=1e-3)  # no sideways slip
    for _ in range(15):
        obs, *_ = env.step(np.array([0.0, 1.0]))
    assert obs["observation"][5] == pytest.approx(1.0, rel=0.02)  # yaw rate at its limit


def test_out_of_range_actions_are_clipped(backend):
    def final(action):
        env = make(backend=backend, map="open")
        env.reset(seed=0, options={"start": (3.0, 3.0, 0.0), "goal": (1.0, 1.0)})
        for _ in range(5):
            obs, *_ = env.step(action)
        return obs["observation"]

    np.testing.assert_array_equal(final(np.array([5.0, -7.0])), final(np.array([1.0, -1.0])))


@pytest.mark.parametrize("bad", [[np.nan, 0.0], [0.0, np.inf], [-np.inf, 1.0]])
def test_nan_or_inf_action_raises(bad):
    env = make()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="NaN or inf"):
        env.step(np.array(bad))


def test_wrong_action_shape_raises():
    env = make()
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"shape \(2,\)"):
        env.step(np.zeros(3))


@pytest.mark.parametrize(
    ("goal", "message"),
    [((5.0, 1.0), "inside a wall"), ((20.0, 1.0), "outside map"), ((np.nan, 1.0), "finite"), ((1.0,), "two finite")],
)
def test_bad_goals_raise(goal, message):
    env = make(map="two_rooms")
    with pytest.raises(ValueError, match=message):
        env.reset(seed=0, options={"goal": goal})
    env.reset(seed=0)
    with pytest.raises(ValueError, match=message):
        env.unwrapped.set_goal(goal)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"map": "kitchenette"}, r"unknown map 'kitchenette'.*known maps: apartment, house, maze, open, two_rooms"),
        ({"control_hz": 7.0}, "whole multiple of physics_dt"),
        ({"control_hz": -1.0}, "control_hz must be a positive number"),
        ({"lidar_rays": 0}, "num_rays"),
        ({"goal_mode": "room"}, "goal_mode must be one of"),
        ({"reward_type": "shaped"}, "reward_type must be one of"),
        ({"max_steps": 0}, "max_steps must be a positive integer"),
        ({"success_radius": -0.1}, "success_radius must be a positive number"),
        ({"start": "garage"}, r"unknown start 'garage'.*named starts"),
        ({"start": (5.0, 1.0, 0.0), "map": "two_rooms"}, "not free space"),
        ({"render_mode": "ansi"}, "render_mode must be None or one of"),
        ({"robot": "tank"}, "unknown robot 'tank'"),
        ({"backend": "gazebo"}, "unknown physics backend 'gazebo'; available: mujoco, pybullet"),
    ],
)
def test_bad_constructor_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make(**kwargs)


def test_unknown_reset_option():
    env = make()
    with pytest.raises(ValueError, match="unknown reset option"):
        env.reset(options={"gaol": (1, 1)})


def test_compute_reward_vectorised_matches_step():
    env = make(map="open", collision_penalty=0.5)
    u = env.unwrapped
    achieved = np.array([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])
    desired = np.array([[1.1, 1.0], [4.0, 2.0], [3.0, 3.0]])
    infos = np.array([{"collision": False}, {"collision": True}, {"collision": True}])
    rewards = u.compute_reward(achieved, desired, infos)
    assert rewards.shape == (3,)
    np.testing.assert_allclose(rewards, [0.0, -1.5, -0.5])
    for k in range(3):
        assert u.compute_reward(achieved[k], desired[k], infos[k]) == pytest.approx(rewards[k])
    dense = make(map="open", reward_type="dense").unwrapped
    np.testing.assert_allclose(dense.compute_reward(achieved, desired, None), [-0.1, -2.0, 0.0], atol=1e-6)


def test_terminate_on_success_option():
    env = make(map="open", terminate_on_success=True)
    obs, _ = env.reset(seed=0)
    here = tuple(float(v) for v in obs["achieved_goal"])
    env.unwrapped.set_goal(here)
    _, _, terminated, truncated, info = env.step(np.zeros(2))
    assert terminated and info["is_success"] and not truncated


def robot_pixel(env, x, y):
    col, row = env.unwrapped.physics.world_to_pixel(x, y)
    return round(row), round(col)


def is_robot_orange(pixel):
    r, g, b = (int(c) for c in pixel)
    return r > 180 and 60 < g < 170 and b < 80


def test_render_shows_robot(backend):
    env = make(backend=backend, map="apartment", render_mode="rgb_array", render_height=240)
    images = []
    for start in [(2.0, 6.0, 0.0), (10.0, 1.5, 0.0)]:
        env.reset(seed=0, options={"start": start, "goal": (8.0, 7.0)})
        img = env.render()
        assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3
        assert img.shape[0] == 240
        # the rover's orange chassis is where the rover is (a few pixels behind its centre,
        # because the black heading marker covers the front)
        row, col = robot_pixel(env, start[0] - 0.1, start[1])
        assert is_robot_orange(img[row, col]), img[row, col]
        images.append(img)
    # ... and not where it was before
    row, col = robot_pixel(env, 2.0 - 0.1, 6.0)
    assert not is_robot_orange(images[1][row, col])
    # the goal marker is green
    row, col = robot_pixel(env, 8.0, 7.0)
    r, g, b = (int(c) for c in images[1][row, col])
    assert g > 120 and g > 2 * max(r, b)  # shading differs between the engines' renderers
    env.close()


def test_sb3_her_learns_a_few_steps(backend):
    """SAC + HER runs against the env through a VecEnv (compute_reward is reached for relabelling)."""
    from stable_baselines3 import SAC, HerReplayBuffer

    env = make(backend=backend, map="open", max_steps=20)
    model = SAC(
        "MultiInputPolicy",
        env,
        replay_buffer_class=HerReplayBuffer,
        learning_starts=40,
        batch_size=32,
        policy_kwargs={"net_arch": [16]},
        seed=0,
        device="cpu",
    )
    model.learn(120)
    assert model.replay_buffer.size() > 0
    action, _ = model.predict(env.reset(seed=0)[0], deterministic=True)
    assert action.shape == (2,)


def test_pybullet_env_collected_after_close_leaves_a_newer_envs_bullet_worlds_alone():
    """Bullet reuses client ids: an env closed, then garbage-collected while a newer env holds the same ids,
    must not disconnect them (cleanup runs once, at close() or at collection, whichever comes first)."""
    import gc

    import pybullet as pb

    old = make(map="open", backend="pybullet")
    old_clients = [old.unwrapped.physics.client, old.unwrapped.physics._lidar.client]
    old.close()
    new = make(map="open", backend="pybullet")
    physics = new.unwrapped.physics
    clients = [physics.client, physics._lidar.client]
    del old
    gc.collect()
    assert all(pb.isConnected(c) for c in clients), (old_clients, clients)
    new.close()
    assert not any(pb.isConnected(c) for c in clients)


def test_pybullet_env_left_open_is_disconnected_at_interpreter_exit():
    """An env still referenced when the interpreter exits is cleaned up too (weakref.finalize runs at exit)."""
    import subprocess
    import sys

    script = """
import gymnasium as gym
import pybullet as pb
import sim

real = pb.disconnect
def disconnect(client, *args, **kwargs):
    print("disconnected", client, flush=True)
    return real(client, *args, **kwargs)
pb.disconnect = disconnect
env = gym.make("hrl/RoverNav-v0", map="open", backend="pybullet")
physics = env.unwrapped.physics
print("clients", physics.client, physics._lidar.client, flush=True)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    clients = lines[0].split()[1:]
    assert sorted(line.split()[1] for line in lines[1:] if line.startswith("disconnected")) == sorted(clients)
