"""Sim-to-real wrappers on hrl/PandaTabletop-v0 (sim/wrappers.py): each changes what it should, in both engines,
is seeded, refuses bad values by name, and the rover's wrappers are refused here (and the tabletop's there)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pybullet as pb
import pytest

import sim  # noqa: F401  (registers the env ids)
from sim.wrappers import _tabletop_layout, set_goal

BACKENDS = ["mujoco", "pybullet"]
CAMERA_KEYS = ["front_rgb", "front_depth", "wrist_rgb", "wrist_depth"]


def make(wrappers=None, backend="mujoco", **kwargs):
    kwargs.setdefault("goal_mode", "push")
    return gym.make("hrl/PandaTabletop-v0", backend=backend, wrappers=wrappers, **kwargs)


def spy_on_actions(env) -> list[np.ndarray]:
    """The actions the env itself receives (after the wrappers), recorded."""
    applied, inner = [], env.unwrapped
    original = inner.step

    def spy(action):
        applied.append(np.array(action, dtype=float))
        return original(action)

    inner.step = spy
    return applied


def simulated_dynamics(env, name: str) -> tuple[float, float]:
    """Mass and sliding friction of an object as the engine holds them."""
    physics = env.unwrapped.physics
    if env.unwrapped.backend == "mujoco":
        _, _, geom, body = physics._obj[name]
        return float(physics.model.body_mass[body]), float(physics.model.geom_friction[geom][0])
    info = pb.getDynamicsInfo(physics._obj[name], -1, physicsClientId=physics._c)
    return info[0], info[1]


def push_cube(env, speed: float) -> float:
    """How far (m, along x) the same scripted push moves the cube: the closed fingers behind it at its mid
    height, ten steps forward at ``speed``, back off, let it coast."""
    u = env.unwrapped
    env.reset(seed=0, options={"layout": {"cube": (0.0, 0.0, 0.0)}})
    for _ in range(20):
        env.step(np.clip((np.array([-0.07, 0.0, 0.025]) - u.tcp()[0]) / 0.05, -1, 1))
    start = u.physics.object_state("cube").position.copy()
    for action in [[speed, 0, 0]] * 10 + [[-1.0, 0, 0]] * 3 + [[0.0, 0, 0]] * 10:
        env.step(np.array(action))
    return float(u.physics.object_state("cube").position[0] - start[0])


# ---- generic wrappers ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("mode", "steps"), [("push", 1), ("pick_place", 3)])
def test_action_latency_delays_tabletop_commands_by_k_steps(mode, steps):
    env = make([{"name": "action_latency", "steps": steps}], goal_mode=mode)
    applied = spy_on_actions(env)
    env.reset(seed=0)
    sent = [env.action_space.sample() for _ in range(6)]
    for action in sent:
        env.step(action)
    n = env.action_space.shape[0]
    np.testing.assert_array_equal(applied[:steps], np.zeros((steps, n)))  # the arm holds, the gripper too
    np.testing.assert_allclose(applied[steps:], sent[: 6 - steps], atol=1e-7)


def test_action_latency_range_draws_each_episodes_delay_seeded():
    """steps=[0, 2]: every episode's commands arrive late by the delay its reset drew and reported."""
    env = make([{"name": "action_latency", "steps": [0, 2]}], goal_mode="pick_place")
    applied = spy_on_actions(env)
    n = env.action_space.shape[0]
    drawn = {}
    for seed in range(12):
        _, info = env.reset(seed=seed)
        k = drawn[seed] = info["latency_steps"]
        applied.clear()
        sent = [env.action_space.sample() for _ in range(5)]
        for action in sent:
            env.step(action)
        np.testing.assert_array_equal(np.reshape(applied[:k], (k, n)), np.zeros((k, n)))
        np.testing.assert_allclose(applied[k:], sent[: 5 - k], atol=1e-7)
    assert set(drawn.values()) == {0, 1, 2}  # the whole range, not one value
    for seed in (3, 7):
        assert env.reset(seed=seed)[1]["latency_steps"] == drawn[seed]  # seeded
    fixed = make([{"name": "action_latency", "steps": 2}])
    assert {fixed.reset(seed=s)[1]["latency_steps"] for s in range(5)} == {2}


def test_action_rate_limit_bounds_the_tcp_acceleration_not_the_gripper():
    env = make([{"name": "action_rate_limit", "max_linear_acceleration": 5.0}], goal_mode="pick_place")
    applied = spy_on_actions(env)
    env.reset(seed=0)
    for action in [[1.0, -1.0, 1.0, -1.0]] * 8 + [[-1.0, 1.0, 0.0, 1.0]] * 3:
        env.step(np.array(action))
    applied = np.array(applied)
    # 5 m/s^2 x (0.04 s)^2 / 0.05 m per full action = 0.16 of a full action per control period.
    steps = np.abs(np.diff(applied, axis=0, prepend=0.0))
    np.testing.assert_allclose(steps[:, :3].max(axis=0), [0.16, 0.16, 0.16])
    np.testing.assert_allclose(applied[4, :3], [0.8, -0.8, 0.8])
    assert applied[0, 3] == -1.0 and applied[8, 3] == 1.0  # the gripper command passes at once


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("action_rate_limit", r"max_linear_acceleration \(m/s\^2, the TCP's\) must be given on the tabletop"),
        ({"name": "action_rate_limit", "max_linear_acceleration": 5.0, "max_angular_acceleration": 1.0},
         r"max_angular_acceleration=1.0 does not apply on the tabletop"),
        ({"name": "action_rate_limit", "max_linear_acceleration": -2.0},
         r"max_linear_acceleration must be a number > 0.0, got -2.0"),
    ],
)  # fmt: skip
def test_action_rate_limit_on_the_tabletop_needs_its_units(spec, message):
    with pytest.raises(ValueError, match=message):
        make([spec])


# ---- object dynamics ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_object_dynamics_samples_every_object_applies_and_reports(backend):
    env = make(["object_dynamics"], backend=backend, scene="sort")
    nominal = {o.name: (o.mass, o.friction) for o in env.unwrapped.scene.objects}
    draws = []
    for seed in range(4):
        _, info = env.reset(seed=seed)
        d = info["object_dynamics"]
        assert set(d) == set(nominal)
        for name, (mass, friction) in nominal.items():
            assert (
                0.5 * mass <= d[name]["mass"] <= 2.0 * mass and 0.5 * friction <= d[name]["friction"] <= 1.5 * friction
            )
            # what the engine simulates is what info reports
            assert simulated_dynamics(env, name) == pytest.approx((d[name]["mass"], d[name]["friction"]))
        assert len({round(v["mass"] / nominal[k][0], 9) for k, v in d.items()}) == len(d)  # one draw per object
        assert env.get_wrapper_attr("dynamics") == d  # kept for the episode (not copied into every step's info)
        draws.append(d)
    assert draws[0] != draws[1]  # a new draw per episode
    _, again = env.reset(seed=1)
    assert again["object_dynamics"] == draws[1]  # seeded
    env.close()


def test_object_dynamics_does_not_change_the_envs_sampling():
    plain, randomized = make(), make(["object_dynamics"])
    a, _ = plain.reset(seed=4)
    b, _ = randomized.reset(seed=4)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])  # same layout and goal: only the physics differs


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cube_heavier_than_the_grip_holds_slips_out_of_the_same_grasp(backend):
    """Two fingers of 20 N with friction 1 hold up to 2 x 20 N / g = 4.1 kg: the 45 g cube and one 20 times
    heavier (0.9 kg) are lifted 13 cm, one 100 times heavier (4.5 kg) stays on the table."""

    def lift(mass_scale: float) -> float:
        env = make([{"name": "object_dynamics", "mass_scale": mass_scale, "friction_scale": 1.0}], backend,
                   goal_mode="pick_place")  # fmt: skip
        env.reset(seed=0, options={"layout": {"cube": (0.0, 0.0, 0.0)}})
        for target, grip, steps in [(0.1, 1, 12), (0.02, 1, 15), (0.02, -1, 10), (0.15, -1, 15)]:
            for _ in range(steps):  # open above the cube, descend around it, close, lift
                move = np.clip((np.array([0.0, 0.0, target]) - env.unwrapped.tcp()[0]) / 0.05, -1, 1)
                env.step(np.append(move, grip))
        return float(env.unwrapped.physics.object_state("cube").position[2])

    assert lift(1.0) > 0.14 and lift(20.0) > 0.14
    assert lift(100.0) < 0.03  # measured 0.02: it never left the table


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_more_slippery_cube_slides_further_after_the_same_push(backend):
    grippy = push_cube(make([{"name": "object_dynamics", "mass_scale": 1.0, "friction_scale": 2.0}], backend), 0.6)
    slippery = push_cube(make([{"name": "object_dynamics", "mass_scale": 1.0, "friction_scale": 0.3}], backend), 0.6)
    assert slippery > 0.1 and slippery > 5 * grippy  # measured 20 cm vs 0.5 cm in both engines


def test_nominal_scales_simulate_the_scene_as_it_is():
    """mass_scale = friction_scale = 1 sets the scene's own values: the same episode as without the wrapper."""
    plain = make()
    same = make([{"name": "object_dynamics", "mass_scale": 1.0, "friction_scale": 1.0}])
    assert push_cube(plain, 0.2) == push_cube(same, 0.2)


# ---- observation noise --------------------------------------------------------------------------------------
@pytest.mark.parametrize(("mode", "block_gripper"), [("reach", True), ("push", True), ("pick_place", False)])
def test_tabletop_layout_matches_the_state(mode, block_gripper):
    env = make(goal_mode=mode, block_gripper=block_gripper)
    obs, _ = env.reset(seed=0)
    u, layout = env.unwrapped, _tabletop_layout(env.unwrapped)
    np.testing.assert_allclose(obs["observation"][layout["tcp"]], u.tcp()[0], atol=1e-6)
    if mode != "reach":
        position = u.physics.object_state(u.object).position
        np.testing.assert_allclose(obs["observation"][layout["object"]], position, atol=1e-6)
        np.testing.assert_allclose(obs["observation"][layout["relative"]], position - u.tcp()[0], atol=1e-6)


def test_observation_noise_perturbs_positions_only_and_leaves_the_goal_true():
    env = make([{"name": "observation_noise", "tcp_std": 0.004, "object_std": 0.02}], block_gripper=False)
    layout = _tabletop_layout(env.unwrapped)
    tcp_errors, object_errors = [], []
    obs, info = env.reset(seed=0)
    for step in range(60):
        clean = env.unwrapped._observe()
        vec = obs["observation"]
        tcp_errors.append(vec[layout["tcp"]] - clean["observation"][layout["tcp"]])
        object_errors.append(vec[layout["object"]] - clean["observation"][layout["object"]])
        np.testing.assert_allclose(vec[layout["relative"]], vec[layout["object"]] - vec[layout["tcp"]], atol=1e-6)
        untouched = np.ones(vec.shape, bool)
        untouched[[*range(0, 3), *range(7, 13)]] = False
        np.testing.assert_array_equal(vec[untouched], clean["observation"][untouched])  # velocities, rotation
        np.testing.assert_array_equal(obs["achieved_goal"], clean["achieved_goal"])  # the success check's truth
        np.testing.assert_array_equal(obs["desired_goal"], clean["desired_goal"])
        assert info["is_success"] == bool(np.linalg.norm(clean["achieved_goal"] - clean["desired_goal"]) < 0.05)
        obs, _, _, _, info = env.step(np.array([0.3, 0.0, 0.0, 0.0]) if step < 10 else np.zeros(4))
    assert np.std(tcp_errors) == pytest.approx(0.004, rel=0.2)
    assert np.std(object_errors) == pytest.approx(0.02, rel=0.2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_image_noise_has_the_configured_spread(backend):
    spec = {"name": "observation_noise", "tcp_std": 0.0, "object_std": 0.0, "rgb_std": 8.0, "depth_std": 0.01}
    clean, noisy = make(None, backend, cameras=CAMERA_KEYS, image_size=32), make([spec], backend, cameras=CAMERA_KEYS,
                                                                                     image_size=32)  # fmt: skip
    a, _ = clean.reset(seed=0)
    b, _ = noisy.reset(seed=0)
    np.testing.assert_array_equal(a["observation"], b["observation"])  # zero std: the vector is untouched
    rgb = b["front_rgb"].astype(float) - a["front_rgb"]
    inside = (a["front_rgb"] > 30) & (a["front_rgb"] < 225)  # away from clipping at 0 and 255
    assert b["front_rgb"].dtype == np.uint8 and rgb[inside].std() == pytest.approx(8.0, rel=0.15)
    assert (b["wrist_depth"] - a["wrist_depth"]).std() == pytest.approx(0.01, rel=0.15)
    assert noisy.observation_space.contains(b)


def test_observation_noise_is_seeded_and_reaches_set_goal():
    spec = [{"name": "observation_noise", "object_std": 0.02}, "action_latency"]
    a, b = make(spec, scene="blocks"), make(spec, scene="blocks")
    oa, _ = a.reset(seed=3)
    ob, _ = b.reset(seed=3)
    np.testing.assert_array_equal(oa["observation"], ob["observation"])
    assert not np.array_equal(a.reset(seed=4)[0]["observation"], oa["observation"])
    # A new goal mid-episode (the hierarchy's set_goal) is observed through the noise, for the object named.
    obs = set_goal(a, [0.1, 0.1, 0.02], object="red_block")
    clean = a.unwrapped._observe()
    layout = _tabletop_layout(a.unwrapped)
    assert a.unwrapped.object == "red_block"
    np.testing.assert_array_equal(obs["desired_goal"], np.float32([0.1, 0.1, 0.02]))
    np.testing.assert_array_equal(obs["achieved_goal"], clean["achieved_goal"])
    assert not np.array_equal(obs["observation"][layout["object"]], clean["observation"][layout["object"]])


# ---- camera jitter and lighting -------------------------------------------------------------------------------
def images(env, seed=0):
    obs, info = env.reset(seed=seed)
    return {k: obs[k] for k in CAMERA_KEYS}, info


@pytest.mark.parametrize("backend", BACKENDS)
def test_visual_randomization_changes_images_per_episode_and_is_seeded(backend):
    kw = {"cameras": CAMERA_KEYS, "image_size": 48}
    plain, plain2 = make(None, backend, **kw), make(None, backend, **kw)
    jittered, jittered2 = make(["visual_randomization"], backend, **kw), make(["visual_randomization"], backend, **kw)
    nominal, _ = images(plain)
    for key, image in images(plain2)[0].items():
        np.testing.assert_array_equal(image, nominal[key])  # no wrapper: identical images
    first, info = images(jittered)
    for key in CAMERA_KEYS:
        assert not np.array_equal(first[key], nominal[key]), key
    again, info2 = images(jittered2)
    assert info2["visual"] == info["visual"]
    for key in CAMERA_KEYS:
        np.testing.assert_array_equal(again[key], first[key])  # same seed, same perturbation
    other, info3 = images(jittered, seed=1)
    assert info3["visual"] != info["visual"] and not np.array_equal(other["front_rgb"], first["front_rgb"])
    v = info["visual"]
    assert 0.6 <= v["light_intensity"] <= 1.4 and 0.0 <= v["light_tilt"] <= 20.0
    assert all(np.abs(c["position"]).max() <= 0.01 and abs(c["angle"]) <= 2.0 for c in v["cameras"].values())


@pytest.mark.parametrize("backend", BACKENDS)
def test_lighting_changes_colour_not_depth_and_jitter_moves_the_view(backend):
    kw = {"cameras": CAMERA_KEYS, "image_size": 48}
    nominal, _ = images(make(None, backend, **kw))
    light_only = {"name": "visual_randomization", "camera_position": 0.0, "camera_angle": 0.0}
    lit, _ = images(make([light_only], backend, **kw))
    np.testing.assert_array_equal(lit["front_depth"], nominal["front_depth"])
    assert np.abs(lit["front_rgb"].astype(float) - nominal["front_rgb"]).mean() > 2.0
    dim = {**light_only, "light_intensity": 0.3, "light_direction": 0.0}
    assert images(make([dim], backend, **kw))[0]["front_rgb"].mean() < nominal["front_rgb"].mean() - 5
    camera_only = {"name": "visual_randomization", "camera_position": 0.03, "camera_angle": 3.0,
                   "light_intensity": 1.0, "light_direction": 0.0}  # fmt: skip
    moved, _ = images(make([camera_only], backend, **kw))
    for key in ("front_depth", "wrist_depth"):
        assert np.abs(moved[key] - nominal[key]).mean() > 0.002, key
    nothing = {"name": "visual_randomization", "camera_position": 0.0, "camera_angle": 0.0,
               "light_intensity": 1.0, "light_direction": 0.0}  # fmt: skip
    same, _ = images(make([nothing], backend, **kw))
    for key in CAMERA_KEYS:
        np.testing.assert_array_equal(same[key], nominal[key])  # zero perturbation is the nominal rendering


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_camera_shift_moves_the_image_the_same_way_in_both_engines(backend):
    """Shifting the front camera to its right (its own x axis) moves the scene left in the image."""
    from sim.tabletop.env import PandaTabletopEnv

    env = PandaTabletopEnv(backend=backend, goal_mode="push", cameras=["front_depth"], image_size=48)
    env.reset(seed=0, options={"layout": {"cube": (0.0, 0.1, 0.0)}})
    before = env._observe()["front_depth"][:, :, 0]
    env.physics.set_camera_offset("front", np.array([0.05, 0.0, 0.0]), np.eye(3))
    after = env._observe()["front_depth"][:, :, 0]
    near = before < np.percentile(before, 5)  # the cube and the arm, nearest the camera
    columns = np.nonzero(near)[1].mean(), np.nonzero(after < np.percentile(after, 5))[1].mean()
    assert columns[1] < columns[0] - 1
    env.physics.set_camera_offset("front", np.zeros(3), np.eye(3))
    np.testing.assert_array_equal(env._observe()["front_depth"][:, :, 0], before)
    env.close()


# ---- errors ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("domain_randomization", r"domain_randomization is for the rover \(hrl/RoverNav-\*\), and this env is the "
                                 r"tabletop's PandaTabletopEnv: use object_dynamics"),
        ("sensor_noise", r"sensor_noise is for the rover .*use observation_noise"),
    ],
)  # fmt: skip
def test_a_rover_wrapper_on_the_tabletop_names_what_applies(name, message):
    with pytest.raises(ValueError, match=message) as err:
        make([name])
    assert "wrappers that apply to it: action_latency, action_rate_limit, object_dynamics" in str(err.value)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("object_dynamics", r"object_dynamics is for the tabletop \(hrl/PandaTabletop-\*\), and this env is the "
                            r"rover's RoverNavEnv: use domain_randomization"),
        ("observation_noise", r"use sensor_noise \(lidar, odometry\) instead"),
        ("visual_randomization", r"visual_randomization is for the tabletop .*: wrappers that apply to it: "
                                 r"domain_randomization, sensor_noise, action_latency, action_rate_limit$"),
    ],
)  # fmt: skip
def test_a_tabletop_wrapper_on_the_rover_names_what_applies(name, message):
    with pytest.raises(ValueError, match=message):
        gym.make("hrl/RoverNav-v0", wrappers=[name])


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"name": "object_dynamics", "mass_scale": [2.0, 1.0]}, r"mass_scale range \[2.0, 1.0\] has low > high"),
        ({"name": "object_dynamics", "friction_scale": 0.0}, r"friction_scale must be a number > 0.0, got 0.0"),
        ({"name": "object_dynamics", "mass_scale": "heavy"}, r"mass_scale must be a number or a \[low, high\] range"),
        ({"name": "object_dynamics", "mass": 2.0}, r"unknown parameter\(s\) \['mass'\]; object_dynamics takes "
                                                   r"\['mass_scale', 'friction_scale'\]"),
        ({"name": "observation_noise", "tcp_std": -0.01}, r"wrappers\[0\] \(observation_noise\): tcp_std must be a "
                                                          r"number >= 0.0, got -0.01"),
        ({"name": "observation_noise", "rgb_std": float("nan")}, r"rgb_std must be a number >= 0.0, got nan"),
        ({"name": "visual_randomization", "camera_angle": 45}, r"camera_angle must be a number >= 0.0 and <= 30.0, "
                                                               r"got 45"),
        ({"name": "visual_randomization", "camera_position": 0.5}, r"camera_position .* <= 0.1, got 0.5"),
        ({"name": "visual_randomization", "light_intensity": [1.5, 0.5]}, r"light_intensity range \[1.5, 0.5\]"),
        ({"name": "action_latency", "steps": -1}, r"steps must be an integer >= 0"),
    ],
)  # fmt: skip
def test_bad_tabletop_wrapper_values_are_named(spec, message):
    with pytest.raises(ValueError, match=message):
        make([spec])


def test_fully_wrapped_tabletop_passes_gymnasiums_checker():
    from gymnasium.utils.env_checker import check_env

    spec = ["object_dynamics", "observation_noise", "visual_randomization", {"name": "action_latency", "steps": 1},
            {"name": "action_rate_limit", "max_linear_acceleration": 10.0}]  # fmt: skip
    env = make(spec, goal_mode="pick_place", cameras=["front_rgb"], image_size=32)
    with pytest.warns(UserWarning, match="different from the unwrapped"):
        check_env(env, skip_render_check=True)
    env.close()


def test_an_env_not_ours_gets_only_the_generic_wrappers():
    from sim.wrappers import apply_wrappers

    env = apply_wrappers(gym.make("Pendulum-v1"), [{"name": "action_latency", "steps": 2}])
    env.reset(seed=0)
    env.step(np.ones(1))  # delayed like ours (zeros of its own action shape first)
    with pytest.raises(ValueError, match=r"sensor_noise is for the rover .* this env is PendulumEnv, not ours: "
                                         r"wrappers that apply to it: action_latency$"):  # fmt: skip
        apply_wrappers(gym.make("Pendulum-v1"), ["sensor_noise"])
    with pytest.raises(ValueError, match=r"action_rate_limit knows the action units of rover, tabletop"):
        apply_wrappers(gym.make("Pendulum-v1"), ["action_rate_limit"])
