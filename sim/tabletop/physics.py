"""The small physics interface each simulator backend implements for the tabletop, and what they share.

The controller (TCP displacement → joint targets through ``robots.kinematics``), the goals, the reward and
the observation live in ``sim.tabletop.env``; a backend only builds the scene, tracks joint targets with the
arm's position servos over ``substeps`` physics steps, and reads states and cameras. Backends are registered
by name in :data:`BACKENDS` and chosen with ``gym.make("hrl/PandaTabletop-v0", backend=NAME)``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from robots.arm import ArmSpec
from sim.tabletop.scene import BIN_WALL_THICKNESS, PLATE_THICKNESS, Place

#: Backend name -> "module:Class" implementing :class:`TabletopPhysics` (imported on first use).
BACKENDS: dict[str, str] = {
    "mujoco": "sim.tabletop.mujoco:MujocoTabletopPhysics",
    "pybullet": "sim.tabletop.pybullet:PybulletTabletopPhysics",
}

#: Physics step (s) of both engines: 20 substeps make panda-gym's 25 Hz control step.
PHYSICS_DT = 0.002
GRAVITY = 9.81
#: Collision-free rendering of the goal: a translucent sphere of the success threshold's radius.
GOAL_RGBA = (0.1, 0.9, 0.1, 0.3)


@dataclass(frozen=True)
class CameraSpec:
    """A camera both engines render identically: fixed (``eye`` → ``target`` in the world) or on the wrist
    (``eye`` and ``target`` in the TCP frame, whose z axis points out of the gripper)."""

    name: str
    eye: tuple[float, float, float]
    target: tuple[float, float, float]
    up: tuple[float, float, float]
    fovy: float  # degrees, vertical
    near: float = 0.01
    far: float = 3.0
    on_wrist: bool = False


#: The scene's directional light, the same in both engines (each adds its own ambient term): the way it shines
#: (world frame, unit: from above, towards the robot and a little to its right). ``set_lighting`` turns and dims it.
LIGHT_DIRECTION = tuple((np.array([-0.4, -0.2, -1.0]) / np.linalg.norm([-0.4, -0.2, -1.0])).tolist())

#: The cameras of the tabletop: facing the robot across the table (the arm never hides the objects from
#: it), and on the wrist looking along the fingers (the vision planner trains on both).
CAMERAS: dict[str, CameraSpec] = {
    "front": CameraSpec("front", eye=(0.55, 0.0, 0.5), target=(-0.1, 0.0, 0.0), up=(0.0, 0.0, 1.0), fovy=50.0),
    "wrist": CameraSpec(
        "wrist", eye=(0.06, 0.0, -0.06), target=(0.0, 0.0, 0.25), up=(-1.0, 0.0, 0.0), fovy=70.0, on_wrist=True
    ),
}


def look_at(eye: np.ndarray, target: np.ndarray, up: np.ndarray) -> np.ndarray:
    """Rotation (3, 3) of a camera at ``eye`` looking at ``target``: columns x right, y up, z backwards
    (the OpenGL / MuJoCo camera convention)."""
    z = eye - target
    z = z / np.linalg.norm(z)
    x = np.cross(up, z)
    x = x / np.linalg.norm(x)
    return np.stack([x, np.cross(z, x), z], axis=1)


def moved_camera(spec: CameraSpec, position: np.ndarray, rotation: np.ndarray) -> CameraSpec:
    """``spec`` moved by ``position`` and turned by ``rotation`` in its own frame, as ``set_camera_offset`` moves a
    backend's camera: the pose a render after that offset was taken from."""
    from dataclasses import replace

    eye, target = np.asarray(spec.eye, dtype=float), np.asarray(spec.target, dtype=float)
    r = look_at(eye, target, np.asarray(spec.up, dtype=float))
    new_eye = eye + r @ np.asarray(position, dtype=float)
    turned = r @ np.asarray(rotation, dtype=float)
    new_target = new_eye - turned[:, 2] * np.linalg.norm(target - eye)
    return replace(
        spec, eye=tuple(new_eye.tolist()), target=tuple(new_target.tolist()), up=tuple(turned[:, 1].tolist())
    )


def depth_from_buffer(buffer: np.ndarray, near: float, far: float) -> np.ndarray:
    """Metric depth (m) from an OpenGL depth buffer in [0, 1] (PyBullet's)."""
    return (far * near / (far - (far - near) * buffer)).astype(np.float32)


@dataclass(frozen=True)
class CameraImage:
    """One camera's picture and the pinhole model to go between its pixels and the world: ``rgb`` (h, w, 3)
    uint8, ``depth`` (h, w) metres along the optical axis (None when not rendered), and the camera's *nominal*
    pose (``spec``; what a calibrated robot believes, so camera jitter shows up as an error, as on a robot).
    Pixels are (u, v) = (column, row) from the top left; fixed cameras only (a wrist camera moves with the TCP)."""

    rgb: np.ndarray
    depth: np.ndarray | None
    spec: CameraSpec

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) in pixels."""
        return int(self.rgb.shape[1]), int(self.rgb.shape[0])

    def _frame(self) -> tuple[np.ndarray, np.ndarray, float]:
        if self.spec.on_wrist:
            raise ValueError(f"camera {self.spec.name!r} moves with the wrist; project with a fixed camera (front)")
        eye = np.asarray(self.spec.eye, dtype=float)
        rotation = look_at(eye, np.asarray(self.spec.target, dtype=float), np.asarray(self.spec.up, dtype=float))
        focal = (self.size[1] / 2) / np.tan(np.radians(self.spec.fovy) / 2)
        return eye, rotation, float(focal)

    def project(self, points: np.ndarray) -> np.ndarray:
        """World points (..., 3) -> continuous pixel coordinates (..., 2) as (u, v); pixel (i, j) spans [i, i+1)."""
        eye, rotation, focal = self._frame()
        pc = (np.asarray(points, dtype=float) - eye) @ rotation  # camera frame: x right, y up, z backwards
        w, h = self.size
        ahead = np.maximum(-pc[..., 2], 1e-9)
        return np.stack([w / 2 + focal * pc[..., 0] / ahead, h / 2 - focal * pc[..., 1] / ahead], axis=-1)

    def lift(self, u: float, v: float) -> np.ndarray:
        """The world point (3,) seen at pixel (u, v) (continuous, or an index: its centre is used), from depth."""
        if self.depth is None:
            raise ValueError("this camera image has no depth; render it with depth to lift pixels to 3-D")
        w, h = self.size
        if not (0 <= u < w and 0 <= v < h):
            raise ValueError(f"pixel ({u}, {v}) is outside the {w}x{h} image")
        eye, rotation, focal = self._frame()
        uc, vc = (u + 0.5, v + 0.5) if isinstance(u, (int, np.integer)) else (u, v)
        d = float(self.depth[min(int(vc), h - 1), min(int(uc), w - 1)])
        ray = np.array([(uc - w / 2) / focal, (h / 2 - vc) / focal, -1.0])
        return eye + rotation @ (ray * d)


#: Thickness (m) of a painted zone: visible from above (1 mm z-fights with the table in MuJoCo), no contacts.
ZONE_THICKNESS = 0.002


@dataclass(frozen=True)
class Box:
    """One static box of a place: half extents and centre (m), and whether it takes part in contacts."""

    name: str
    half: tuple[float, float, float]
    center: tuple[float, float, float]
    solid: bool = True


def place_boxes(place: Place) -> list[Box]:
    """The boxes both engines build for a place: a bin is a floor and four walls inside its footprint, a plate a
    slab, a zone a painted mark without contacts (the scene's ``contains`` and overlap checks assume this)."""
    (cx, cy), (sx, sy) = place.center, place.size
    if place.kind == "zone":
        return [Box(place.name, (sx / 2, sy / 2, ZONE_THICKNESS / 2), (cx, cy, ZONE_THICKNESS / 2), solid=False)]
    if place.kind == "plate":
        return [Box(place.name, (sx / 2, sy / 2, PLATE_THICKNESS / 2), (cx, cy, PLATE_THICKNESS / 2))]
    t, h = BIN_WALL_THICKNESS, place.wall_height
    walls = [((sx - t) / 2, 0, t / 2, sy / 2), (-(sx - t) / 2, 0, t / 2, sy / 2),
             (0, (sy - t) / 2, sx / 2, t / 2), (0, -(sy - t) / 2, sx / 2, t / 2)]  # fmt: skip
    return [Box(place.name, (sx / 2, sy / 2, t / 2), (cx, cy, t / 2))] + [
        Box(f"{place.name}_wall{i}", (hx, hy, h / 2), (cx + dx, cy + dy, h / 2))
        for i, (dx, dy, hx, hy) in enumerate(walls)
    ]


@dataclass(frozen=True)
class ObjectState:
    position: np.ndarray  # (3,) m
    quaternion: np.ndarray  # (4,) w, x, y, z
    linear_velocity: np.ndarray  # (3,) m/s
    angular_velocity: np.ndarray  # (3,) rad/s


class TabletopPhysics(Protocol):
    """What the tabletop env needs from a simulator. Arm joints are the spec's 7; the gripper is one width."""

    arm: ArmSpec
    substeps: int

    def reset(self, q: np.ndarray, width: float, objects: dict[str, tuple[float, float, float]]) -> None:
        """Joints to ``q`` at rest, fingers ``width`` apart, each object at (x, y, yaw) resting on the table."""

    def step(self, q_target: np.ndarray, width_target: float) -> None:
        """``substeps`` physics steps with the arm servos tracking ``q_target`` and the fingers ``width_target``."""

    def joints(self) -> tuple[np.ndarray, np.ndarray]:
        """Arm joint positions and velocities (7,), (7,)."""

    def finger_width(self) -> float:
        """Distance between the fingertips (m)."""

    def tcp(self) -> tuple[np.ndarray, np.ndarray]:
        """The engine's own TCP position (3,) and rotation (3, 3) (the env uses the shared FK; this is for checks)."""

    def object_state(self, name: str) -> ObjectState: ...

    def set_object_pose(self, name: str, position: np.ndarray) -> None:
        """Teleport an object (at rest, upright) — tests and scripted scenes."""

    def set_object_dynamics(self, name: str, mass: float, friction: float) -> None: ...

    def set_goal_marker(self, position: np.ndarray | None) -> None: ...

    def set_camera_offset(self, camera: str, position: np.ndarray, rotation: np.ndarray) -> None:
        """Move ``camera`` by ``position`` (3,) m and turn it by ``rotation`` (3, 3), both in its own frame (x right,
        y up, z backwards); zeros and the identity give its nominal pose back (camera jitter, sim.wrappers)."""

    def set_lighting(self, intensity: float, direction: np.ndarray) -> None:
        """Scale the scene light by ``intensity`` (diffuse and specular; not the ambient) and make it shine along
        ``direction`` (world frame, unit); ``1.0`` and :data:`LIGHT_DIRECTION` are the nominal light."""

    def render(self, camera: str, width: int, height: int, depth: bool = False) -> np.ndarray:
        """RGB (h, w, 3) uint8, or metric depth (h, w) float32 with ``depth=True``."""

    def close(self) -> None: ...


def make_physics(name: str, **kwargs) -> TabletopPhysics:
    """Build the backend registered as ``name`` (the engine is imported only then)."""
    if name not in BACKENDS:
        raise ValueError(f"unknown tabletop backend {name!r}; available: {', '.join(sorted(BACKENDS))}")
    module, cls = BACKENDS[name].split(":")
    return getattr(importlib.import_module(module), cls)(**kwargs)
