"""The vision planners' camera input: ``env.camera_image`` (no goal marker) and its pinhole model."""

import numpy as np
import pytest

from hierarchy.tabletop import TabletopDomain, make_env


@pytest.mark.parametrize("backend", ["mujoco", "pybullet"])
def test_pixels_of_objects_lift_back_onto_them(backend):
    env = make_env("sort", backend=backend)
    try:
        env.reset(seed=5)
        image = TabletopDomain().observe(env).camera("front", 128)
        assert image.rgb.shape == (128, 128, 3) and image.depth.shape == (128, 128)
        for o in env.scene.objects:
            top = env.physics.object_state(o.name).position + np.array([0, 0, 0.45 * o.size[2]])
            u, v = image.project(top)
            assert 0 <= u < 128 and 0 <= v < 128
            assert np.linalg.norm(image.lift(float(u), float(v)) - top) < 0.015, o.name
    finally:
        env.close()


@pytest.mark.parametrize("backend", ["mujoco", "pybullet"])
def test_every_place_is_in_the_picture_in_its_colour(backend):
    """Both engines draw every place, the painted zone too (MuJoCo once dropped it as visual-only), and the
    zone takes part in no contact."""
    env = make_env("sort", backend=backend)
    try:
        env.reset(seed=0)
        image = env.unwrapped.camera_image("front", 96, depth=False)
        for place in env.unwrapped.scene.places:
            u, v = image.project(np.array([*place.center, 0.002]))
            r, g, b = image.rgb[int(v), int(u)].astype(int)
            want = {"yellow": r > 2 * b and g > 2 * b, "white": min(r, g, b) > 80, "red": r > 2 * max(g, b),
                    "green": g > 2 * max(r, b), "blue": b > 2 * max(r, g)}[place.color]  # fmt: skip
            assert want, (place.name, place.color, (r, g, b))
        if backend == "mujoco":  # the zone pairs with no geom for contacts
            m = env.unwrapped.physics.model
            zone = m.geom("zone")
            others = [m.geom(i) for i in range(m.ngeom) if i != zone.id]
            assert not any(zone.contype & g.conaffinity or g.contype & zone.conaffinity for g in others)
    finally:
        env.close()


def test_goal_marker_is_not_in_the_picture_and_comes_back():
    env = make_env("blocks", backend="mujoco")
    try:
        env.reset(seed=0)
        env.set_goal([0.0, 0.0, 0.15])  # a marker in front of the camera, above the table's centre
        with_marker = env.physics.render("front", 64, 64)
        image = env.camera_image("front", 64)
        assert np.abs(with_marker.astype(int) - image.rgb.astype(int)).sum() > 0
        assert np.array_equal(env.physics.render("front", 64, 64), with_marker)
    finally:
        env.close()


def test_bad_camera_requests_are_refused():
    env = make_env("blocks", backend="pybullet")
    try:
        env.reset(seed=0)
        with pytest.raises(ValueError, match="unknown camera 'top'"):
            env.camera_image("top")
        with pytest.raises(ValueError, match="size"):
            env.camera_image("front", 8)
        image = env.camera_image("front", 32, depth=False)
        with pytest.raises(ValueError, match="no depth"):
            image.lift(3, 3)
        with pytest.raises(ValueError, match="wrist"):
            env.camera_image("wrist", 32).project(np.zeros(3))
        with pytest.raises(ValueError, match="outside"):
            env.camera_image("front", 32).lift(40, 3)
    finally:
        env.close()
