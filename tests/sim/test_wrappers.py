"""Sim-to-real wrappers (sim/wrappers.py): each effect is measurable, seeded, and configurable by name."""

import math

import gymnasium as gym
import numpy as np
import pytest

from sim.wrappers import LIDAR_START, WRAPPERS, apply_wrappers

START = (3.0, 3.0, 0.0)  # open map: 6 x 6 m room, walls within the 4 m lidar range


def make(wrappers, backend="mujoco", **kwargs):
    kwargs.setdefault("map", "open")
    kwargs.setdefault("max_steps", 500)
    return gym.make("hrl/RoverNav-v0", backend=backend, wrappers=wrappers, **kwargs)


def ranges(obs, env):
    return obs["observation"][LIDAR_START:] * env.unwrapped.robot.lidar.max_range


def test_lidar_noise_has_the_configured_spread():
    clean, noisy = make(None), make([{"name": "sensor_noise", "lidar_std": 0.05}])
    ref, _ = clean.reset(seed=0, options={"start": START})
    obs, _ = noisy.reset(seed=0, options={"start": START})
    errors = [ranges(obs, noisy) - ranges(ref, clean)]
    for _ in range(40):  # standing still: the only change is noise
        obs, *_ = noisy.step(np.zeros(2))
        errors.append(ranges(obs, noisy) - ranges(ref, clean))
    errors = np.concatenate(errors)
    assert abs(errors.mean()) < 0.01
    assert errors.std() == pytest.approx(0.05, rel=0.15)


def test_dropout_reads_max_range_at_the_configured_rate():
    env = make([{"name": "sensor_noise", "lidar_std": 0.0, "dropout": 0.3}])
    obs, _ = env.reset(seed=0, options={"start": START})
    clean = make(None).reset(seed=0, options={"start": START})[0]["observation"][LIDAR_START:]
    assert (clean < 0.99).all()  # every ray has a wall within range here
    dropped = []
    for _ in range(30):
        obs, *_ = env.step(np.zeros(2))
        lidar = obs["observation"][LIDAR_START:]
        assert set(np.round(lidar[lidar != clean], 6)) <= {1.0}  # a dropped ray reads max range, nothing else
        dropped.append(lidar == 1.0)
    assert np.mean(dropped) == pytest.approx(0.3, abs=0.05)


def test_odometry_drifts_only_while_moving_and_success_stays_ground_truth():
    env = make([{"name": "sensor_noise", "lidar_std": 0.0, "odom_xy_std": 0.1, "odom_yaw_std": 0.05}])
    obs, info = env.reset(seed=3, options={"start": (1.0, 3.0, 0.0), "goal": (4.0, 3.0)})
    assert info["odometry_error"] == [0.0, 0.0, 0.0]
    for _ in range(5):  # standing still: no drift
        obs, _, _, _, info = env.step(np.zeros(2))
    assert info["odometry_error"] == [0.0, 0.0, 0.0]
    for _ in range(60):
        obs, _, _, _, info = env.step(np.array([1.0, 0.0]))
        if info["is_success"]:
            break
    error = np.array(info["odometry_error"])
    assert np.linalg.norm(error[:2]) > 0.005 and error[2] != 0.0
    true = env.unwrapped.pose
    np.testing.assert_allclose(obs["achieved_goal"], [true.x + error[0], true.y + error[1]], atol=1e-5)
    assert obs["observation"][2] == pytest.approx(math.cos(true.yaw + error[2]), abs=1e-5)
    # is_success is judged on the true pose, not on the drifting estimate
    assert info["is_success"] == (math.dist((true.x, true.y), (4.0, 3.0)) <= 0.25)


def test_odometry_drift_is_a_random_walk_scaled_by_each_steps_distance():
    """The drift's model: per step, a Gaussian error of std odom_xy_std x the distance moved in that step (as
    ROS amcl's odometry alphas), summed; so after steps of lengths m_i its std per axis is
    odom_xy_std * sqrt(sum m_i^2), which grows with the distance driven. Checked over 50 seeded episodes."""
    sigma = 0.1
    env = make([{"name": "sensor_noise", "lidar_std": 0.0, "odom_xy_std": sigma, "odom_yaw_std": 0.0}])
    errors, predicted = {20: [], 60: []}, {}
    for seed in range(50):
        env.reset(seed=seed, options={"start": (0.6, 3.0, 0.0), "goal": (5.6, 3.0)})
        last, squares = env.unwrapped.pose, 0.0
        for k in range(1, 61):
            _, _, _, _, info = env.step(np.array([1.0, 0.0]))
            pose = env.unwrapped.pose
            squares += (pose.x - last.x) ** 2 + (pose.y - last.y) ** 2
            last = pose
            if k in errors:
                errors[k].append(info["odometry_error"][:2])
                predicted[k] = sigma * math.sqrt(squares)
    spread = {k: np.std(errors[k]) for k in errors}  # both axes together: 100 samples each
    assert spread[20] == pytest.approx(predicted[20], rel=0.25)
    assert spread[60] == pytest.approx(predicted[60], rel=0.25)
    assert spread[60] > 1.5 * spread[20]  # ~3x the distance, ~2.5x the squared steps


def test_noise_is_seeded_and_does_not_change_the_envs_sampling():
    spec = [{"name": "sensor_noise", "lidar_std": 0.05, "dropout": 0.1}]
    a, b, plain = make(spec), make(spec), make(None)
    oa, _ = a.reset(seed=5)
    ob, _ = b.reset(seed=5)
    op, _ = plain.reset(seed=5)
    np.testing.assert_array_equal(oa["observation"], ob["observation"])
    np.testing.assert_array_equal(oa["desired_goal"], op["desired_goal"])  # same goal as without noise
    np.testing.assert_array_equal(oa["observation"][:6], op["observation"][:6])
    oc, _ = b.reset(seed=6)
    od, _ = a.reset(seed=5)
    np.testing.assert_array_equal(od["observation"], oa["observation"])
    assert not np.array_equal(oc["observation"][LIDAR_START:], od["observation"][LIDAR_START:])


@pytest.mark.parametrize("steps", [1, 3])
def test_action_latency_delays_commands_by_k_steps(steps):
    def speeds(wrappers):
        env = make(wrappers)
        env.reset(seed=0, options={"start": (1.0, 3.0, 0.0)})
        return [float(env.step(np.array([1.0, 0.0]))[0]["observation"][4]) for _ in range(10)]

    base, late = speeds(None), speeds([{"name": "action_latency", "steps": steps}])
    assert late[:steps] == [0.0] * steps
    np.testing.assert_allclose(late[steps:], base[: 10 - steps], atol=1e-9)


def test_action_rate_limit_bounds_command_changes():
    env = make([{"name": "action_rate_limit", "max_linear_acceleration": 0.25, "max_angular_acceleration": 1.5}])
    env.reset(seed=0, options={"start": (1.0, 3.0, 0.0)})
    applied = []
    inner = env.unwrapped
    original = inner.step

    def spy(action):
        applied.append(np.array(action))
        return original(action)

    inner.step = spy
    for action in [[1.0, 1.0]] * 6 + [[-1.0, -1.0]] * 3:
        env.step(np.array(action))
    applied = np.array(applied)
    # 0.25 m/s^2 * 0.1 s / 0.5 m/s = 0.05 per step; 1.5 rad/s^2 * 0.1 s / 1.5 rad/s = 0.1 per step
    np.testing.assert_allclose(np.abs(np.diff(applied, axis=0, prepend=0.0)).max(axis=0), [0.05, 0.1])
    np.testing.assert_allclose(applied[5], [0.3, 0.6])


@pytest.mark.parametrize("backend", ["mujoco", "pybullet"])
def test_domain_randomization_samples_applies_and_reports(backend):
    pytest.importorskip(backend)
    env = make([{"name": "domain_randomization"}], backend=backend)
    seen = []
    for seed in range(6):
        _, info = env.reset(seed=seed)
        d = info["domain"]
        assert 0.8 <= d["mass_scale"] <= 1.25 and 0.5 <= d["friction"] <= 1.0 and 0.9 <= d["motor_gain"] <= 1.1
        assert 0.0 <= d["lidar_std"] <= 0.03 and d["latency_steps"] in (0, 1, 2)
        dyn = env.unwrapped.physics.dynamics  # what the backend simulates is what info reports
        assert (dyn.mass_scale, dyn.friction, dyn.motor_gain) == (d["mass_scale"], d["friction"], d["motor_gain"])
        _, _, _, _, step_info = env.step(np.zeros(2))
        assert step_info["domain"] == d
        seen.append(d["mass_scale"])
    assert len(set(seen)) == 6  # a new draw per episode
    _, again = env.reset(seed=2)
    assert again["domain"]["mass_scale"] == seen[2]  # seeded


def test_domain_randomization_changes_the_motion():
    """A fixed motor gain of 1.1 and two periods of latency show in the speed profile."""
    env = make([{"name": "domain_randomization", "mass_scale": 1.0, "friction": 0.8, "motor_gain": 1.1,
                 "lidar_std": 0.0, "latency_steps": 2}])  # fmt: skip
    env.reset(seed=0, options={"start": (1.0, 3.0, 0.0)})
    speeds = [float(env.step(np.array([1.0, 0.0]))[0]["observation"][4]) for _ in range(20)]
    assert speeds[:2] == [0.0, 0.0]
    assert speeds[-1] == pytest.approx(1.1, abs=0.01)


def test_wrapped_env_passes_checkers_and_trains_with_her():
    from gymnasium.utils.env_checker import check_env
    from stable_baselines3 import SAC, HerReplayBuffer

    spec = [{"name": "domain_randomization"}, {"name": "sensor_noise", "dropout": 0.05, "odom_xy_std": 0.02},
            "action_latency", "action_rate_limit"]  # fmt: skip
    env = make(spec, max_steps=20)
    with pytest.warns(UserWarning, match="different from the unwrapped"):
        check_env(env, skip_render_check=True)  # the wrappers keep the spaces and the API contract
    model = SAC("MultiInputPolicy", env, replay_buffer_class=HerReplayBuffer, learning_starts=40, batch_size=16,
                policy_kwargs={"net_arch": [16]}, seed=0, device="cpu")  # fmt: skip
    model.learn(80)
    assert model.replay_buffer.size() > 0


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (["sensor_nois"], r"unknown wrapper 'sensor_nois' \(did you mean 'sensor_noise'\?\); available: domain_r"),
        ([{"name": "action_latency", "delay": 2}], r"parameter\(s\) \['delay'\]; action_latency takes \['steps'\]"),
        ([{"name": "sensor_noise", "lidar_std": -0.1}], r"wrappers\[0\] \(sensor_noise\): lidar_std must be a number"),
        ([{"name": "sensor_noise", "dropout": 1.5}], r"dropout must be a number >= 0.0 and <= 1.0, got 1.5"),
        ([{"name": "action_latency", "steps": 0.5}], r"steps must be an integer >= 0"),
        ([{"name": "action_latency", "steps": [2, 1]}], r"steps range \[2, 1\] has low > high"),
        ([{"name": "action_latency", "steps": [0, 1.5]}], r"steps must be an integer >= 0 \(control periods\)"),
        ([{"name": "domain_randomization", "mass_scale": [1.2, 0.8]}], r"mass_scale range \[1.2, 0.8\] has low > high"),
        ([{"name": "domain_randomization", "friction": [0.0, 1.0]}], r"friction must be a number > 0.0"),
        ([{"lidar_std": 0.1}], r"wrappers\[0\] must be a wrapper name or a mapping with a 'name' key"),
        ("sensor_noise", r"wrappers must be a list of wrapper specs"),
    ],
)  # fmt: skip
def test_bad_wrapper_specs_are_named(spec, message):
    env = gym.make("hrl/RoverNav-v0").unwrapped
    with pytest.raises(ValueError, match=message):
        apply_wrappers(env, spec)


def test_env_config_carries_and_checks_wrappers():
    from hrl.config import EnvConfig, RobotConfig

    cfg = EnvConfig(wrappers=[{"name": "sensor_noise", "lidar_std": 0.01}, "action_latency"])
    cfg.validate()
    kwargs = cfg.make_kwargs(RobotConfig())
    env = gym.make(kwargs.pop("id", "hrl/RoverNav-v0"), **kwargs)
    assert [type(w).__name__ for w in _chain(env)][:2] == ["ActionLatency", "SensorNoise"]
    with pytest.raises(ValueError, match=r"env.wrappers\[0\]: unknown wrapper 'noise'"):
        EnvConfig(wrappers=["noise"]).validate()
    assert {"domain_randomization", "sensor_noise", "action_latency", "action_rate_limit"} <= set(WRAPPERS)


def _chain(env):
    out = []
    while isinstance(env, gym.Wrapper):
        if type(env).__module__ == "sim.wrappers":
            out.append(env)
        env = env.env
    return out


@pytest.mark.parametrize(
    "wrapper",
    [
        {"name": "sensor_noise", "lidar_std": 0.05, "odom_xy_std": 0.1, "odom_yaw_std": 0.05},
        {"name": "domain_randomization", "lidar_std": 0.05, "latency_steps": 0},
    ],
)
def test_set_goal_mid_episode_is_observed_through_the_wrappers(wrapper):
    """A new subgoal (the hierarchy's set_goal) returns the observation the policy would get from a step:
    still noisy, still drifted; env.unwrapped.set_goal would hand it the clean truth."""
    from sim.wrappers import set_goal

    env = make([wrapper, "action_latency"])  # set_goal is found through wrappers that do not define it
    env.reset(seed=2, options={"start": (1.0, 3.0, 0.0), "goal": (4.0, 3.0)})
    for _ in range(30):
        obs, _, _, _, info = env.step(np.array([1.0, 0.2]))
    obs = set_goal(env, (2.0, 4.0))
    clean = env.unwrapped._observe()
    np.testing.assert_array_equal(obs["desired_goal"], np.float32([2.0, 4.0]))
    assert env.unwrapped.goal.tolist() == [2.0, 4.0]
    noise = ranges(obs, env) - ranges(clean, env)
    assert 0.02 < noise.std() < 0.1  # the lidar noise is there
    if "odometry_error" in info:
        error = np.array(info["odometry_error"])
        assert np.linalg.norm(error[:2]) > 0.005  # drifted by now, and the drift carries over
        np.testing.assert_allclose(obs["achieved_goal"], clean["achieved_goal"] + error[:2], atol=1e-5)
    plain = make(None)
    plain.reset(seed=0, options={"start": START})
    np.testing.assert_array_equal(set_goal(plain, (2.0, 4.0))["observation"], plain.unwrapped._observe()["observation"])
