"""hrl/PandaTabletop-v0: the panda-gym contract, goals, seeds, cameras, errors, in both engines."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import sim  # noqa: F401  (registers the env ids)
from sim.tabletop.env import PandaTabletopEnv

BACKENDS = ["mujoco", "pybullet"]


def make(backend: str = "mujoco", **kwargs) -> PandaTabletopEnv:
    return gym.make("hrl/PandaTabletop-v0", backend=backend, **kwargs).unwrapped


def drive_to(env: PandaTabletopEnv, target, grip: float | None = None, steps: int = 30) -> dict:
    """A proportional controller on the TCP (what a scripted expert does): returns the last info."""
    info = {}
    for _ in range(steps):
        a = np.clip((np.asarray(target) - env.tcp()[0]) / 0.05, -1, 1)
        _, _, _, _, info = env.step(a if grip is None else np.append(a, grip))
    return info


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["reach", "push", "pick_place"])
def test_env_passes_gymnasiums_checker(backend, mode):
    env = make(backend, goal_mode=mode)
    check_env(env, skip_render_check=True)
    env.close()


@pytest.mark.parametrize("mode", ["reach", "push", "pick_place"])
def test_contract_is_panda_gyms(mode):
    env = make(goal_mode=mode)
    obs, info = env.reset(seed=0)
    assert set(obs) == {"observation", "achieved_goal", "desired_goal"}
    assert env.action_space.shape == (
        (3,) if mode in ("reach", "push") else (4,)
    )  # panda-gym blocks Reach/Push grippers
    assert env.control_hz == 25.0 and env.physics.substeps == 20
    # Sparse -1 / 0 at 0.05 m, vectorised over a batch (HER relabels with it), and is_success agrees.
    goal = np.zeros((4, 3))
    achieved = np.array([[0.0, 0.0, 0.049], [0.0, 0.0, 0.051], [0.1, 0, 0], [0, 0, 0]])
    assert env.compute_reward(achieved, goal, {}).tolist() == [0.0, -1.0, -1.0, 0.0]
    obs, reward, _, _, info = env.step(np.zeros(env.action_space.shape))
    assert reward == (0.0 if info["is_success"] else -1.0)
    env.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_scripted_reach_succeeds(backend):
    env = make(backend, goal_mode="reach")
    obs, _ = env.reset(seed=1, options={"goal": [0.1, -0.1, 0.15]})
    info = drive_to(env, obs["desired_goal"], steps=20)
    assert info["is_success"]
    assert np.linalg.norm(env.tcp()[0] - [0.1, -0.1, 0.15]) < 0.01
    env.close()


def test_goals_follow_the_seed_and_the_mode():
    env = make(goal_mode="pick_place")
    goals = [env.reset(seed=s)[0]["desired_goal"] for s in range(40)]
    assert len({tuple(np.round(g, 6)) for g in goals}) == 40  # distinct seeds, distinct episodes
    assert env.reset(seed=3)[0]["desired_goal"] == pytest.approx(env.reset(seed=3)[0]["desired_goal"])
    heights = np.array([g[2] for g in goals])
    on_table = np.isclose(heights, env.scene.object("cube").size[2] / 2)
    assert 0.2 < on_table.mean() < 0.8  # about half of pick-and-place goals are in the air
    push = make(goal_mode="push")
    for s in range(10):
        g = push.reset(seed=s)[0]["desired_goal"]
        assert g[2] == pytest.approx(push.scene.object("cube").size[2] / 2)
        (x0, x1), (y0, y1) = push.scene.workspace
        assert x0 <= g[0] <= x1 and y0 <= g[1] <= y1


def test_set_goal_and_reset_options():
    env = make(scene="blocks", goal_mode="push")
    obs, _ = env.reset(seed=0, options={"goal": [0.05, 0.05, 0.02], "object": "red_block"})
    assert obs["desired_goal"] == pytest.approx([0.05, 0.05, 0.02])
    assert obs["achieved_goal"] == pytest.approx(env.physics.object_state("red_block").position, abs=1e-6)
    obs = env.set_goal([0.0, 0.1, 0.025], object="blue_block")
    assert obs["achieved_goal"] == pytest.approx(env.physics.object_state("blue_block").position, abs=1e-6)
    with pytest.raises(ValueError, match="3 finite numbers"):
        env.set_goal([0.0, float("nan"), 0.0])
    with pytest.raises(ValueError, match=r"has no object 'green'.*blue_block"):
        env.set_goal([0.0, 0.0, 0.0], object="green")
    with pytest.raises(ValueError, match="unknown reset options"):
        env.reset(options={"gaol": [0, 0, 0]})


def test_place_on_goals_sit_on_another_object():
    env = make(scene="blocks", goal_mode="place_on", object="red_block")
    obs, _ = env.reset(seed=0)
    others = {n: env.physics.object_state(n).position for n in ("blue_block", "yellow_block")}
    below = min(others, key=lambda n: np.linalg.norm(others[n][:2] - obs["desired_goal"][:2]))
    assert obs["desired_goal"][:2] == pytest.approx(others[below][:2])
    top = others[below][2] + env.scene.object(below).size[2] / 2
    assert obs["desired_goal"][2] == pytest.approx(top + env.scene.object("red_block").size[2] / 2, abs=1e-3)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"goal_mode": "stack"}, "goal_mode must be one of"),
        ({"cameras": ["top_rgb"]}, r"unknown camera observation 'top_rgb'; available: front_rgb"),
        ({"control_hz": 30.0}, "control_hz must divide 500 Hz"),
        ({"max_steps": 0}, "max_steps must be an integer >= 1"),
        ({"reward_type": "shaped"}, "reward_type must be"),
        ({"object": "ball", "goal_mode": "push"}, "has no object 'ball'"),
        ({"backend": "gazebo"}, "unknown tabletop backend 'gazebo'"),
        ({"scene": "single_cub"}, "single_cube"),
    ],
)
def test_bad_arguments_are_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make(**kwargs)


def test_bad_actions_are_refused_and_large_ones_clipped():
    env = make(goal_mode="reach")
    env.reset(seed=0)
    with pytest.raises(ValueError, match="finite"):
        env.step([0.0, np.inf, 0.0])
    with pytest.raises(ValueError, match="shape"):
        env.step([0.0, 0.0])
    start = env.tcp()[0]
    env.step([10.0, 0.0, 0.0])  # clipped to 1: at most 5 cm (less where a joint would pass its rated speed)
    assert 0.005 < env.tcp()[0][0] - start[0] <= 0.051


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_object_leaving_the_table_ends_the_episode(backend):
    env = make(backend, goal_mode="push")
    env.reset(seed=0)
    env.physics.set_object_pose("cube", np.array([0.4, 0.0, 0.02]))  # past the table's far edge (x = 0.25)
    *_, terminated, truncated, info = env.step(np.zeros(3))
    assert terminated and not truncated and info["failure"] == "object_left_table" and info["object"] == "cube"


@pytest.mark.parametrize("backend", BACKENDS)
def test_any_object_leaving_the_table_ends_the_episode_and_is_named(backend):
    """Not only the goal object: a distractor knocked off the table ends the episode too, in every goal mode."""
    env = make(backend, scene="blocks", goal_mode="push")
    env.reset(seed=0, options={"object": "red_block"})
    *_, terminated, _, info = env.step(np.zeros(3))
    assert not terminated and "failure" not in info  # every block on the table
    env.physics.set_object_pose("yellow_block", np.array([-0.3, -0.6, 0.02]))  # past the near edge (y = -0.35)
    *_, terminated, _, info = env.step(np.zeros(3))
    assert terminated and info["failure"] == "object_left_table" and info["object"] == "yellow_block"
    reach = make(backend, goal_mode="reach")
    reach.reset(seed=0)
    reach.physics.set_object_pose("cube", np.array([0.0, 0.0, -0.5]))  # fallen below the table top
    *_, terminated, _, info = reach.step(np.zeros(3))
    assert terminated and info["object"] == "cube"


@pytest.mark.parametrize("backend", BACKENDS)
def test_cameras_are_observation_keys_with_metric_depth(backend):
    env = make(backend, goal_mode="push", cameras=["front_rgb", "front_depth", "wrist_rgb", "wrist_depth"],
               image_size=64)  # fmt: skip
    obs, _ = env.reset(seed=0)
    assert obs["front_rgb"].shape == (64, 64, 3) and obs["front_rgb"].dtype == np.uint8
    assert obs["front_depth"].shape == (64, 64, 1) and obs["front_depth"].dtype == np.float32
    assert env.observation_space.contains(obs)
    # The front camera is 0.74 m from the point it looks at on the table; the wrist camera sees the table
    # ~0.25 m below the fingertips (TCP 0.2 m above the table).
    centre = obs["front_depth"][28:36, 28:36, 0]
    assert 0.5 < float(np.median(centre)) < 0.9
    assert float(obs["wrist_depth"].max()) < 0.6
    assert obs["front_rgb"].std() > 10  # an image, not a blank
    env.close()


def test_the_skill_sees_only_its_object_so_it_transfers_to_bigger_scenes():
    single = make(goal_mode="push")
    sort = make(scene="sort", goal_mode="push")
    assert single.observation_space["observation"].shape == sort.observation_space["observation"].shape


@pytest.mark.parametrize("mode", ["reach", "push"])
def test_observation_as_another_mode_equals_that_modes_env(mode):
    """The hierarchy runs a push or reach skill inside a pick-and-place scene through ``observation_as``: it
    must be exactly what an env of that mode shows in the same state."""
    full, other = make(goal_mode="pick_place"), make(goal_mode=mode)
    full.reset(seed=3)
    other.reset(seed=3)
    layout = {o.name: full.physics.object_state(o.name) for o in full.scene.objects}
    assert all(np.allclose(layout[n].position, other.physics.object_state(n).position) for n in layout)
    goal = np.array([0.05, -0.05, 0.02])
    expected = other.set_goal(goal)
    full.set_goal(goal)
    got = full.observation_as(mode, block_gripper=True)
    # The pick-and-place env's fingers start open, the other's closed: the observation must not show them.
    assert got["observation"].shape == other.observation_space["observation"].shape
    np.testing.assert_allclose(got["observation"], expected["observation"], atol=1e-5)
    np.testing.assert_allclose(got["achieved_goal"], expected["achieved_goal"], atol=1e-6)
    np.testing.assert_allclose(got["desired_goal"], goal, atol=1e-6)
    with pytest.raises(ValueError, match="goal_mode must be one of"):
        full.observation_as("stack", block_gripper=True)


def test_a_cube_turned_a_quarter_turn_is_observed_as_the_same_cube():
    """A grasp that tips a cube over leaves the same cube: the observation shows the rotation nearest upright
    (so the skill, which learned on upright cubes, can grasp it again); a small yaw is kept as it is."""
    from scipy.spatial.transform import Rotation

    from sim.tabletop.env import _CUBE_SYMMETRIES, _canonical_cube_axes

    assert len(_CUBE_SYMMETRIES) == 24
    yaw = Rotation.from_euler("z", 12, degrees=True).as_matrix()
    for sym in _CUBE_SYMMETRIES:
        r = yaw @ sym
        rx, rz = _canonical_cube_axes(r[:, 0], r[:, 2])
        np.testing.assert_allclose(rx, yaw[:, 0], atol=1e-9)
        np.testing.assert_allclose(rz, yaw[:, 2], atol=1e-9)
    env = make(scene="blocks", goal_mode="pick_place")
    assert env._cubes == {"blue_block", "red_block", "yellow_block"}
