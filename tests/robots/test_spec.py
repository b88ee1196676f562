from pathlib import Path

import mujoco
import pytest

from robots import available_robots, load_robot
from robots._fields import ConfigFileError
from robots.spec import ROBOTS_DIR
from sim.mujoco.builder import build_model
from sim.world import load_world


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
    (tmp_path / "rover.xml").write_text((ROBOTS_DIR / "rover" / "rover.xml").read_text())
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
