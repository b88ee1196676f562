"""Robot specifications: size, limits, lidar layout and ROS interface, loaded from YAML.

A ``RobotSpec`` is what every other part of the stack asks about the robot: the simulators build
actuators and the lidar from it, the environment scales actions with its limits, and the ROS 2 nodes
take topic names and frames from it. Robots are looked up by name (``load_robot("rover")``), or a
path to a spec YAML can be given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

from robots._fields import ConfigFileError, Fields, load_yaml_mapping, resolve_yaml

ROBOTS_DIR = Path(__file__).resolve().parent

#: Upper bounds of a spec's numbers (SI units), generous for a mobile base: beyond them a value is a typo
#: (a mass in grams, a range in millimetres), and refused by name rather than simulated.
MAXIMA = {"radius": 10.0, "mass": 10_000.0, "wheel_base": 20.0, "wheel_radius": 5.0,
          "max_linear_velocity": 100.0, "max_angular_velocity": 100.0,
          "max_linear_acceleration": 1_000.0, "max_angular_acceleration": 1_000.0,
          "max_range": 1_000.0, "height": 10.0}  # fmt: skip
#: Rays per scan: 2D lidars give a few thousand at most.
MAX_RAYS = 10_000


@dataclass(frozen=True)
class VelocityLimits:
    max_linear_velocity: float
    max_angular_velocity: float
    max_linear_acceleration: float
    max_angular_acceleration: float


@dataclass(frozen=True)
class LidarSpec:
    """A planar lidar: ``num_rays`` rays spread over ``fov_deg`` degrees, centred on the heading.

    With a 360 degree field of view the rays are ``-pi + k * 2pi / n`` (no duplicate at +pi);
    otherwise they run from ``-fov/2`` to ``+fov/2`` inclusive, like ROS ``LaserScan``'s
    ``angle_min`` .. ``angle_max``.
    """

    num_rays: int
    fov_deg: float
    max_range: float
    min_range: float
    height: float

    def angles(self) -> list[float]:
        """Ray angles in radians in the robot frame, counter-clockwise from the heading."""
        n = self.num_rays
        fov = math.radians(self.fov_deg)
        if math.isclose(self.fov_deg, 360.0):
            return [-math.pi + k * 2.0 * math.pi / n for k in range(n)]
        if n == 1:
            return [0.0]
        return [-fov / 2.0 + k * fov / (n - 1) for k in range(n)]

    def with_overrides(
        self,
        num_rays: int | None = None,
        fov_deg: float | None = None,
        max_range: float | None = None,
    ) -> LidarSpec:
        """A copy with some parameters replaced; values are validated like those from YAML."""
        updated = replace(
            self,
            num_rays=self.num_rays if num_rays is None else num_rays,
            fov_deg=self.fov_deg if fov_deg is None else fov_deg,
            max_range=self.max_range if max_range is None else max_range,
        )
        _validate_lidar(updated)
        return updated


@dataclass(frozen=True)
class RosInterface:
    cmd_vel_topic: str
    odom_topic: str
    scan_topic: str
    base_frame: str
    odom_frame: str
    laser_frame: str


@dataclass(frozen=True)
class RobotSpec:
    name: str
    source: Path
    mjcf: Path
    #: URDF of the same robot (PyBullet backend, robot_state_publisher); None if the robot has none.
    urdf: Path | None
    base_body: str
    chassis_geom: str
    radius: float
    mass: float
    wheel_base: float
    wheel_radius: float
    limits: VelocityLimits
    lidar: LidarSpec
    ros: RosInterface

    @classmethod
    def from_yaml(cls, path: str | Path) -> RobotSpec:
        path = Path(path).resolve()
        root = Fields(path, "", load_yaml_mapping(path))
        root.reject_unknown(
            [
                "name",
                "mjcf",
                "urdf",
                "base_body",
                "chassis_geom",
                "radius",
                "mass",
                "wheel_base",
                "wheel_radius",
                "limits",
                "lidar",
                "ros",
            ]
        )
        mjcf = path.parent / root.text("mjcf")
        if not mjcf.is_file():
            raise root.error("mjcf", f"model file {str(mjcf)!r} does not exist")
        urdf = None
        if root.has("urdf"):
            urdf = path.parent / root.text("urdf")
            if not urdf.is_file():
                raise root.error("urdf", f"URDF file {str(urdf)!r} does not exist")

        lim = root.sub("limits")
        lim.reject_unknown(list(VelocityLimits.__dataclass_fields__))
        limits = VelocityLimits(
            **{k: lim.number(k, positive=True, maximum=MAXIMA[k]) for k in VelocityLimits.__dataclass_fields__}
        )

        lid = root.sub("lidar")
        lid.reject_unknown(list(LidarSpec.__dataclass_fields__))
        lidar = LidarSpec(
            num_rays=lid.integer("num_rays"),
            fov_deg=lid.number("fov_deg", positive=True, maximum=360.0),
            max_range=lid.number("max_range", positive=True, maximum=MAXIMA["max_range"]),
            min_range=lid.number("min_range", non_negative=True),
            height=lid.number("height", non_negative=True, maximum=MAXIMA["height"]),
        )
        try:
            _validate_lidar(lidar)
        except ValueError as err:
            raise lid.error(None, str(err)) from err

        ros_fields = root.sub("ros")
        ros_fields.reject_unknown(list(RosInterface.__dataclass_fields__))
        ros = RosInterface(**{k: ros_fields.text(k) for k in RosInterface.__dataclass_fields__})
        for key in ("cmd_vel_topic", "odom_topic", "scan_topic"):
            if not getattr(ros, key).startswith("/"):
                raise ros_fields.error(key, f"topic must be absolute (start with '/'), got {getattr(ros, key)!r}")

        return cls(
            name=root.text("name"),
            source=path,
            mjcf=mjcf,
            urdf=urdf,
            base_body=root.text("base_body"),
            chassis_geom=root.text("chassis_geom"),
            **{
                k: root.number(k, positive=True, maximum=MAXIMA[k])
                for k in ("radius", "mass", "wheel_base", "wheel_radius")
            },
            limits=limits,
            lidar=lidar,
            ros=ros,
        )

    def with_lidar(self, lidar: LidarSpec) -> RobotSpec:
        return replace(self, lidar=lidar)


def _validate_lidar(lidar: LidarSpec) -> None:
    if isinstance(lidar.num_rays, bool) or not isinstance(lidar.num_rays, int) or not 1 <= lidar.num_rays <= MAX_RAYS:
        raise ValueError(f"lidar num_rays must be an integer from 1 to {MAX_RAYS}, got {lidar.num_rays!r}")
    if not 0.0 < lidar.fov_deg <= 360.0:
        raise ValueError(f"lidar fov_deg must be in (0, 360], got {lidar.fov_deg!r}")
    if not (math.isfinite(lidar.max_range) and lidar.max_range > 0):
        raise ValueError(f"lidar max_range must be a positive number of metres, got {lidar.max_range!r}")
    if lidar.min_range >= lidar.max_range:
        raise ValueError(f"lidar min_range ({lidar.min_range}) must be below max_range ({lidar.max_range})")


def available_robots() -> list[str]:
    """Names of the mobile bases shipped in this package (folders under robots/ with a <name>.yaml); arms
    (``kind: arm``) are ``robots.arm.available_arms()``."""
    return sorted(
        p.parent.name
        for p in ROBOTS_DIR.glob("*/*.yaml")
        if p.stem == p.parent.name and load_yaml_mapping(p).get("kind") != "arm"
    )


def load_robot(name_or_path: str | Path) -> RobotSpec:
    """Load a shipped robot by name (``"rover"``) or a robot spec YAML by path."""
    path = resolve_yaml(name_or_path, what="robot", known=available_robots(),
                        path_of=lambda name: ROBOTS_DIR / name / f"{name}.yaml", file_label="robot spec")  # fmt: skip
    return RobotSpec.from_yaml(path)


__all__ = [
    "ConfigFileError",
    "LidarSpec",
    "RobotSpec",
    "RosInterface",
    "VelocityLimits",
    "available_robots",
    "load_robot",
]
