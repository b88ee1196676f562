"""Arm specifications: joint names, limits, home pose, tool frame and gripper range, loaded from YAML.

An ``ArmSpec`` is to an arm what ``RobotSpec`` is to the rover: the simulators build actuators from it, the
tabletop env scales gripper commands with it, and the ROS 2 nodes take joint names and frames from it. The
kinematics (link lengths, axes) stay in the URDF the spec names; ``robots.kinematics`` reads them from there.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from robots._fields import Fields, load_yaml_mapping, resolve_yaml

ROBOTS_DIR = Path(__file__).resolve().parent

#: Bounds beyond which a number is a unit mistake (degrees for radians, millimetres for metres).
MAX_ANGLE = 7.0  # rad
MAX_SPEED = 50.0  # rad/s or m/s
MAX_EFFORT = 10_000.0  # N m or N
MAX_WIDTH = 0.5  # m


@dataclass(frozen=True)
class JointSpec:
    name: str
    lower: float
    upper: float
    velocity: float
    effort: float


@dataclass(frozen=True)
class GripperSpec:
    """A parallel gripper: two prismatic fingers, each opening ``0 .. max_width / 2``."""

    joints: tuple[str, str]
    max_width: float
    velocity: float
    force: float


@dataclass(frozen=True)
class ArmRosInterface:
    joint_state_topic: str
    base_frame: str
    tcp_frame: str


@dataclass(frozen=True)
class ArmSpec:
    name: str
    urdf: Path
    base_link: str
    tcp_link: str
    joints: tuple[JointSpec, ...]
    home: tuple[float, ...]
    gripper: GripperSpec
    ros: ArmRosInterface

    @property
    def joint_names(self) -> list[str]:
        return [j.name for j in self.joints]

    @classmethod
    def from_yaml(cls, path: str | Path) -> ArmSpec:
        path = Path(path)
        f = Fields(path, "", load_yaml_mapping(path))
        f.reject_unknown(["name", "kind", "urdf", "base_link", "tcp_link", "joints", "home", "gripper", "ros"])
        if f.text("kind") != "arm":
            raise f.error("kind", f"must be 'arm' for an arm spec, got {f.raw('kind')!r}")
        urdf = path.parent / f.text("urdf")
        if not urdf.is_file():
            raise f.error("urdf", f"file {str(urdf)!r} does not exist")
        joints = []
        for i, item in enumerate(f.items("joints")):
            j = Fields(path, f"joints[{i}]", item)
            j.reject_unknown(["name", "lower", "upper", "velocity", "effort"])
            lower, upper = j.number("lower", maximum=MAX_ANGLE), j.number("upper", maximum=MAX_ANGLE)
            if not -MAX_ANGLE <= lower < upper:
                raise j.error("upper", f"must exceed lower ({lower}) and both lie in ±{MAX_ANGLE} rad, got {upper}")
            joints.append(
                JointSpec(
                    j.text("name"),
                    lower,
                    upper,
                    j.number("velocity", positive=True, maximum=MAX_SPEED),
                    j.number("effort", positive=True, maximum=MAX_EFFORT),
                )
            )
        if not joints:
            raise f.error("joints", "must list at least one joint")
        names = [j.name for j in joints]
        if len(set(names)) != len(names):
            raise f.error("joints", f"joint names must be unique, got {names}")
        home = f.vector("home", len(joints))
        for value, joint in zip(home, joints, strict=True):
            if not joint.lower <= value <= joint.upper:
                raise f.error("home", f"{joint.name} = {value} lies outside [{joint.lower}, {joint.upper}]")
        g = f.sub("gripper")
        g.reject_unknown(["joints", "max_width", "velocity", "force"])
        fingers = g.string_list("joints")
        if len(fingers) != 2:
            raise g.error("joints", f"must name the two finger joints, got {list(fingers)}")
        gripper = GripperSpec(
            (fingers[0], fingers[1]),
            g.number("max_width", positive=True, maximum=MAX_WIDTH),
            g.number("velocity", positive=True, maximum=MAX_SPEED),
            g.number("force", positive=True, maximum=MAX_EFFORT),
        )
        r = f.sub("ros")
        r.reject_unknown(["joint_state_topic", "base_frame", "tcp_frame"])
        return cls(
            name=f.text("name"),
            urdf=urdf,
            base_link=f.text("base_link"),
            tcp_link=f.text("tcp_link"),
            joints=tuple(joints),
            home=home,
            gripper=gripper,
            ros=ArmRosInterface(r.text("joint_state_topic"), r.text("base_frame"), r.text("tcp_frame")),
        )


def available_arms() -> list[str]:
    """Names of the arms shipped in this package (folders under robots/ whose <name>.yaml says ``kind: arm``)."""
    return sorted(p.stem for p in ROBOTS_DIR.glob("*/*.yaml") if p.stem == p.parent.name and _is_arm(p))


def _is_arm(path: Path) -> bool:
    return load_yaml_mapping(path).get("kind") == "arm"


def load_arm(name_or_path: str | Path) -> ArmSpec:
    """Load a shipped arm by name (``"panda"``) or an arm spec YAML by path."""
    path = resolve_yaml(name_or_path, what="arm", known=available_arms(),
                        path_of=lambda name: ROBOTS_DIR / name / f"{name}.yaml", file_label="arm spec")  # fmt: skip
    return ArmSpec.from_yaml(path)
