from pathlib import Path

import mujoco
import pytest

from robots import available_robots, load_robot
from robots._fields import ConfigFileError
from robots.spec import ROBOTS_DIR
from sim.navigation.mujoco.builder import build_model
from sim.navigation.world import load_world


def test_rover_spec_values():
    spec = load_robot("rover")
    assert "rover" in available_robots()
    assert spec.limits.max_linear_velocity > 0 and spec.limits.max_angular_velocity > 0
    assert spec.ros.cmd_vel_topic == "/cmd_vel"
    assert spec.ros.odom_topic == "/odom"
    assert spec.ros.scan_topic == "/scan"
    assert spec.ros.base_frame == "base_link" and spec.ros.odom_frame == "odom"
    angles = spec.lidar.angles()
    assert len(angles) == spec.lidar.num_rays


def test_spec_agrees_with_mjcf():
    """The YAML (used for clearance, limits) and the MJCF (used by physics) describe one rover."""
    spec = load_robot("rover")
    model = build_model(load_world("open"), spec)
    chassis = model.geom(spec.chassis_geom)
    assert chassis.size[0] == pytest.approx(spec.radius)
    assert model.body(spec.base_body).subtreemass[0] == pytest.approx(spec.mass)
    lin = model.actuator("drive_linear")
    assert lin.ctrlrange[1] == pytest.approx(spec.limits.max_linear_velocity)
    assert lin.forcerange[1] == pytest.approx(spec.mass * spec.limits.max_linear_acceleration)
    assert model.actuator("drive_angular").ctrlrange[1] == pytest.approx(spec.limits.max_angular_velocity)
    n_rangefinders = sum(model.sensor(i).type[0] == mujoco.mjtSensor.mjSENS_RANGEFINDER for i in range(model.nsensor))
    assert n_rangefinders == spec.lidar.num_rays


def test_urdf_agrees_with_mjcf_and_spec():
    """PyBullet's URDF and MuJoCo's MJCF are one rover: size, mass, inertia, joints, limits, lidar height."""
    import xml.etree.ElementTree as ET

    spec = load_robot("rover")
    model = build_model(load_world("open"), spec)
    root = ET.parse(spec.urdf).getroot()
    links = {link.get("name"): link for link in root.iter("link")}
    joints = {joint.get("name"): joint for joint in root.iter("joint")}

    chassis = model.geom(spec.chassis_geom)
    cylinder = links[spec.base_body].find("collision/geometry/cylinder")
    assert float(cylinder.get("radius")) == pytest.approx(chassis.size[0]) == pytest.approx(spec.radius)
    assert float(cylinder.get("length")) == pytest.approx(2 * chassis.size[1])
    moving_mass = sum(float(m.get("value")) for m in root.iter("mass"))
    assert moving_mass == pytest.approx(model.body(spec.base_body).subtreemass[0], abs=0.01)
    assert moving_mass == pytest.approx(spec.mass, abs=0.01)
    inertia = links[spec.base_body].find("inertial/inertia")
    for axis, k in (("ixx", 0), ("iyy", 1), ("izz", 2)):
        assert float(inertia.get(axis)) == pytest.approx(model.body(spec.base_body).inertia[k], rel=1e-4)

    # the same planar joints, and the base at the same height
    for name in ("base_x", "base_y", "base_yaw"):
        assert name in joints and model.joint(name) is not None
    assert float(joints["base_yaw"].find("origin").get("xyz").split()[2]) == pytest.approx(
        model.body(spec.base_body).pos[2]
    )
    lim = spec.limits
    for name in ("base_x", "base_y"):
        limit = joints[name].find("limit")
        assert float(limit.get("velocity")) == pytest.approx(lim.max_linear_velocity)
        assert float(limit.get("effort")) == pytest.approx(spec.mass * lim.max_linear_acceleration)
    yaw_limit = joints["base_yaw"].find("limit")
    assert float(yaw_limit.get("velocity")) == pytest.approx(lim.max_angular_velocity)
    assert float(yaw_limit.get("effort")) == pytest.approx(float(inertia.get("izz")) * lim.max_angular_acceleration)
    assert float(joints["laser_joint"].find("origin").get("xyz").split()[2]) == pytest.approx(spec.lidar.height)


def test_lidar_layouts():
    lidar = load_robot("rover").lidar
    full = lidar.with_overrides(num_rays=4, fov_deg=360)
    assert full.angles() == pytest.approx([-3.14159265, -1.5707963, 0.0, 1.5707963])
    partial = lidar.with_overrides(num_rays=3, fov_deg=180)
    assert partial.angles() == pytest.approx([-1.5707963, 0.0, 1.5707963])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_rays": 0}, "num_rays"),
        ({"fov_deg": 400.0}, "fov_deg"),
        ({"max_range": -1.0}, "max_range"),
        ({"max_range": 0.01}, "min_range"),
    ],
)
def test_lidar_override_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        load_robot("rover").lidar.with_overrides(**kwargs)


def test_unknown_robot_suggests():
    with pytest.raises(ValueError, match=r"did you mean 'rover'.*known robots: rover"):
        load_robot("rovr")


def _write_spec(tmp_path: Path, text_edit) -> Path:
    text = (ROBOTS_DIR / "rover" / "rover.yaml").read_text()
    path = tmp_path / "bot.yaml"
    for name in ("rover.xml", "rover.urdf"):
        (tmp_path / name).write_text((ROBOTS_DIR / "rover" / name).read_text())
    path.write_text(text_edit(text))
    return path


def test_bad_spec_field_is_named(tmp_path):
    path = _write_spec(tmp_path, lambda t: t.replace("max_linear_velocity: 0.5", "max_linear_velocity: -2"))
    with pytest.raises(ConfigFileError, match=r"bot.yaml: limits.max_linear_velocity: must be > 0"):
        load_robot(path)


def test_unknown_spec_field_is_named(tmp_path):
    path = _write_spec(tmp_path, lambda t: t.replace("num_rays: 36", "num_rayz: 36"))
    with pytest.raises(ConfigFileError, match=r"lidar.num_rayz: unknown field \(did you mean 'num_rays'\?\)"):
        load_robot(path)


def test_relative_topic_rejected(tmp_path):
    path = _write_spec(tmp_path, lambda t: t.replace("cmd_vel_topic: /cmd_vel", "cmd_vel_topic: cmd_vel"))
    with pytest.raises(ConfigFileError, match=r"ros.cmd_vel_topic: topic must be absolute"):
        load_robot(path)
