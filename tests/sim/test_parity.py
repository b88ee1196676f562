"""MuJoCo and PyBullet simulate the same rover: same commands from the same pose -> the same motion,
the same lidar readings at the same pose, the same wall contacts (docs/environment.md, "Backends")."""

import math

import gymnasium as gym
import numpy as np
import pytest

from sim.navigation.physics import Dynamics
from sim.navigation.world import World, load_world

pytest.importorskip("pybullet")

BACKENDS = ("mujoco", "pybullet")
#: Stated tolerances (docs/environment.md): straight driving agrees to a millimetre; 10 s of random
#: turning commands to 5 cm and 0.05 rad (MuJoCo integrates the drive's damping implicitly while turning).
STRAIGHT_TOL_M = 0.002
TURNING_TOL_M, TURNING_TOL_RAD = 0.05, 0.05


def rollout(backend, commands, start, map_name="open", dynamics=None):
    env = gym.make("hrl/RoverNav-v0", map=map_name, backend=backend, max_steps=len(commands) + 1)
    env.reset(seed=0, options={"start": start, "goal": (1.0, 1.0)})
    if dynamics is not None:
        env.unwrapped.physics.set_dynamics(dynamics)
    collisions, speeds = [], []
    for command in commands:
        obs, _, _, _, info = env.step(command)
        collisions.append(info["collision"])
        speeds.append(float(obs["observation"][4]))
    pose = env.unwrapped.pose
    env.close()
    return np.array([pose.x, pose.y, pose.yaw]), np.array(collisions), np.array(speeds)


def smooth_commands(seed, n=100):
    """Random (v, w) commands, low-pass filtered like a policy's, forwards and backwards, turning."""
    raw = np.random.default_rng(seed).uniform(-1, 1, (n, 2))
    out, a = np.zeros_like(raw), np.zeros(2)
    for i in range(n):
        a = 0.8 * a + 0.4 * raw[i]
        out[i] = np.clip(a, -1, 1)
    return out


def test_straight_driving_agrees_to_a_millimetre():
    commands = [[1.0, 0.0]] * 15 + [[-0.5, 0.0]] * 10 + [[0.0, 0.0]] * 5
    (a, _, va), (b, _, vb) = (rollout(k, commands, (2.0, 3.0, 0.0)) for k in BACKENDS)
    assert np.linalg.norm(a[:2] - b[:2]) < STRAIGHT_TOL_M
    np.testing.assert_allclose(va, vb, atol=0.01)  # same acceleration-limited speed profile


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_turning_commands_end_at_the_same_pose(seed):
    commands = smooth_commands(seed)
    (a, ca, _), (b, cb, _) = (rollout(k, commands, (3.0, 3.0, 0.5)) for k in BACKENDS)
    assert not ca.any() and not cb.any(), "the sequence should stay in free space"
    assert np.linalg.norm(a[:2] - b[:2]) < TURNING_TOL_M, (a, b)
    assert abs(math.remainder(a[2] - b[2], 2 * math.pi)) < TURNING_TOL_RAD, (a, b)
    moved = np.linalg.norm(a[:2] - [3.0, 3.0]) + abs(a[2] - 0.5)
    assert moved > 0.2  # the robot did move: the agreement is not trivial


def near_corner(world, pose, lidar, within):
    """Per ray: True where the ray passes within ``within`` of a wall's corner. Grazing a corner, a ray hits
    or misses by a hair, so engines may differ there by the full range (real lidars are erratic there too)."""
    corners = np.array([c for wall in world.walls for c in wall.footprint().exterior.coords])
    x, y, yaw = pose
    out = []
    for a in lidar.angles():
        d = np.array([math.cos(yaw + a), math.sin(yaw + a)])
        rel = corners - [x, y]
        t = np.clip(rel @ d, 0.0, lidar.max_range)
        out.append(bool((np.linalg.norm(rel - t[:, None] * d, axis=1) < within).any()))
    return np.array(out)


@pytest.mark.parametrize("map_name", ["apartment", "maze", "house"])
def test_lidar_agrees_at_the_same_pose(map_name):
    """Both engines cast the same rays at the same wall surfaces: equal readings (to float32), except rays
    grazing a corner within a millimetre."""
    world = load_world(map_name)
    envs = [gym.make("hrl/RoverNav-v0", map=map_name, backend=k) for k in BACKENDS]
    lidar = envs[0].unwrapped.robot.lidar
    rng = np.random.default_rng(0)
    compared = 0
    for _ in range(20):
        x, y = world.sample_free(rng, 0.3)
        start = (x, y, float(rng.uniform(-math.pi, math.pi)))
        a, b = (env.reset(seed=0, options={"start": start})[0]["observation"][6:] for env in envs)
        keep = ~near_corner(world, start, lidar, 1e-3)
        np.testing.assert_allclose(a[keep] * lidar.max_range, b[keep] * lidar.max_range, atol=1e-5)
        assert (a < 1.0).any()  # walls within range were seen
        compared += keep.sum()
    assert compared > 0.95 * 20 * lidar.num_rays
    for env in envs:
        env.close()


@pytest.mark.parametrize("map_name", ["apartment", "maze"])
def test_pybullet_lidar_scene_sees_the_physics_scene_walls(map_name):
    """The lidar casts into a scene of its own (the walls as one mesh): the same readings as rays cast among
    the physics scene's wall boxes, which are what the robot collides with, except near the corners, which
    Bullet rounds by the boxes' collision margin (4 cm)."""
    import pybullet as pb

    world = load_world(map_name)
    env = gym.make("hrl/RoverNav-v0", map=map_name, backend="pybullet")
    physics = env.unwrapped.physics
    lidar = env.unwrapped.robot.lidar
    rng = np.random.default_rng(1)
    compared = 0
    for _ in range(30):
        x, y = world.sample_free(rng, 0.3)
        yaw = float(rng.uniform(-math.pi, math.pi))
        env.reset(seed=0, options={"start": (x, y, yaw)})
        z = physics._base_z + lidar.height
        ends = [
            [x + lidar.max_range * math.cos(yaw + a), y + lidar.max_range * math.sin(yaw + a), z]
            for a in lidar.angles()
        ]
        hits = pb.rayTestBatch([[x, y, z]] * len(ends), ends, collisionFilterMask=1, physicsClientId=physics.client)
        assert {h[0] for h in hits if h[0] >= 0} <= set(physics._walls)  # rays among the boxes hit only walls
        among_boxes = np.array([h[2] for h in hits]) * lidar.max_range
        keep = ~near_corner(world, (x, y, yaw), lidar, 0.05)
        np.testing.assert_allclose(physics.lidar()[keep], among_boxes[keep], atol=1e-6)
        compared += keep.sum()
    assert compared > 0.8 * 30 * lidar.num_rays
    env.close()


def test_wall_contact_reported_by_both_at_the_same_step():
    world = World.from_dict({"name": "wall", "bounds": [0, 0, 8, 8], "walls": [[[5.0, 0.0], [5.0, 8.0]]]})
    commands = [[1.0, 0.0]] * 50 + [[-1.0, 0.0]] * 10
    (a, ca, _), (b, cb, _) = (rollout(k, commands, (3.5, 4.0, 0.3), map_name=world) for k in BACKENDS)
    assert ca.any() and cb.any()
    first_a, first_b = np.argmax(ca), np.argmax(cb)
    assert abs(int(first_a) - int(first_b)) <= 1
    assert not ca[-1] and not cb[-1]  # backing off clears the contact in both
    assert np.linalg.norm(a[:2] - b[:2]) < TURNING_TOL_M


@pytest.mark.parametrize(
    "dynamics", [Dynamics(mass_scale=1.5, friction=0.5, motor_gain=1.1), Dynamics(mass_scale=0.7, motor_gain=0.9)]
)
def test_changed_dynamics_agree(dynamics):
    """Domain randomization changes both engines alike: a heavier robot accelerates more slowly, a motor
    gain of 1.1 drives 10 % faster than commanded."""
    commands = [[1.0, 0.0]] * 20
    nominal = rollout("mujoco", commands, (1.0, 3.0, 0.0))[2]
    (_, _, va), (_, _, vb) = (rollout(k, commands, (1.0, 3.0, 0.0), dynamics=dynamics) for k in BACKENDS)
    np.testing.assert_allclose(va, vb, atol=0.01)
    assert va[-1] == pytest.approx(dynamics.motor_gain, abs=0.01)  # steady speed, normalised by v_max
    if dynamics.mass_scale > 1:
        assert va[1] < nominal[1] - 0.05  # slower to accelerate


def test_pybullet_reset_is_deterministic_within_one_env():
    """Bullet caches contacts between steps: a reset with the same seed must still replay exactly."""
    env = gym.make("hrl/RoverNav-v0", map="apartment", backend="pybullet", max_steps=200)
    commands = np.random.default_rng(5).uniform(-1, 1, (60, 2))
    traces = []
    for _ in range(2):
        obs, _ = env.reset(seed=11)
        trace = [obs["observation"]]
        for command in commands:
            trace.append(env.step(command)[0]["observation"])
        traces.append(np.concatenate(trace))
    np.testing.assert_array_equal(traces[0], traces[1])
    env.close()


def test_pybullet_without_urdf_is_a_clear_error():
    from dataclasses import replace

    from robots.spec import load_robot

    robot = replace(load_robot("rover"), urdf=None)
    with pytest.raises(ValueError, match="has no URDF"):
        gym.make("hrl/RoverNav-v0", robot=robot, backend="pybullet")


def test_bad_dynamics_named():
    with pytest.raises(ValueError, match=r"Dynamics.mass_scale must be a positive number, got -1"):
        Dynamics(mass_scale=-1)


def test_pybullet_env_dropped_without_close_frees_its_bullet_worlds():
    """Each PyBullet env holds two Bullet clients (~50 MB): garbage collection disconnects them, like
    close() does (MuJoCo's models are freed with the env too)."""
    import gc

    import pybullet as pb

    env = gym.make("hrl/RoverNav-v0", map="open", backend="pybullet")
    physics = env.unwrapped.physics
    clients = [physics.client, physics._lidar.client]
    assert all(pb.isConnected(c) for c in clients)
    del env, physics
    gc.collect()
    assert not any(pb.isConnected(c) for c in clients)
    closed = gym.make("hrl/RoverNav-v0", map="open", backend="pybullet")
    closed.close()
    closed.close()  # twice is harmless
