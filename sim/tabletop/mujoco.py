"""MuJoCo implementation of :class:`sim.tabletop.physics.TabletopPhysics`.

The scene is built around the arm's URDF with ``MjSpec`` (the robot file is the base document, as for the
rover): the table, objects, places, goal marker and cameras are added to it, and the actuators come from the
arm's spec. The arm links get gravity compensation (``gravcomp``), as a real Panda's controller provides, so
the position servos only track; it is applied through the joints' actuators and counts against the same
effort limits as the servo (``actgravcomp``), as PyBullet's constraint motors hold the arm against gravity.
"""

from __future__ import annotations

import mujoco
import numpy as np

from robots.arm import ArmSpec
from sim.tabletop.physics import (
    CAMERAS,
    GOAL_RGBA,
    LIGHT_DIRECTION,
    PHYSICS_DT,
    ObjectState,
    look_at,
    place_boxes,
)
from sim.tabletop.scene import TabletopScene

#: Servo gains of the arm (N m / rad, N m s / rad) and the fingers (N / m, N s / m); the torque is clamped
#: to the spec's effort. Stiff enough that the TCP follows a 5 cm step within one 40 ms control period.
ARM_KP, ARM_KV = 20000.0, 400.0
FINGER_KP, FINGER_KV = 2000.0, 50.0
#: Collision classes: the robot touches the scene but not itself (as PyBullet loads a URDF by default).
ROBOT_BITS = (1, 2)  # contype, conaffinity
SCENE_BITS = (3, 3)
#: A painted mark (a zone): a bit nothing else has, so it touches nothing. Not (0, 0): the compiler drops geoms
#: that take no part in contacts as visual-only (discardvisual, on for the Panda's URDF), and the zone vanished
#: from every MuJoCo render while PyBullet drew it.
PAINT_BITS = (4, 4)
#: Sliding, torsional and rolling friction of grasp contacts (condim 4 adds torsional friction, so a
#: cube held between two pads does not spin out).
TORSION = 0.01
#: Contact stiffness (time constant 4 ms = 2 physics steps, critically damped): MuJoCo's default (20 ms) lets
#: a 20 N grip sink 3 mm into a cube, where PyBullet's rigid contacts do not.
SOLREF = [0.004, 1.0]
TCP_SITE = "tcp"
GOAL_SITE = "goal"
LIGHT = "light"
#: Friction of the table and the places: MuJoCo gives a contact the larger of its two geoms' coefficients, so
#: with none here an object's own friction (set_object_dynamics) is what it slides on; everything else in
#: contact with the table has friction 1 (MuJoCo's default, which the table had) and slides as before.
STATIC_FRICTION = [0.0, 0.0, 0.0]


def _build(scene: TabletopScene, arm: ArmSpec) -> mujoco.MjModel:
    spec = mujoco.MjSpec.from_file(str(arm.urdf))
    spec.meshdir = str(arm.urdf.parent)  # URDF mesh paths are relative to the URDF's folder
    spec.option.timestep = PHYSICS_DT
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    spec.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    spec.option.impratio = 10.0  # stiffer friction: grasped objects slip less
    spec.visual.global_.offwidth = spec.visual.global_.offheight = 256
    base = np.asarray(scene.robot_base, dtype=float)
    world = spec.worldbody
    for geom in world.geoms:  # the base link is fused into the world: move it with the rest
        geom.pos = np.asarray(geom.pos) + base
    for body in world.bodies:
        body.pos = np.asarray(body.pos) + base
    for body in spec.bodies[1:]:
        body.gravcomp = 1.0
    for geom in spec.geoms:
        geom.contype, geom.conaffinity = ROBOT_BITS
        geom.condim = 4
        geom.solref = SOLREF
        geom.friction = [1.0, TORSION, 0.0001]
    tcp_parent = spec.body(arm.tcp_link)
    tcp_parent.add_site(name=TCP_SITE, size=[0.005, 0, 0], rgba=[1, 0, 0, 0])
    hand = spec.body(arm.tcp_link)
    for cam in CAMERAS.values():
        eye, target, up = (np.asarray(v, dtype=float) for v in (cam.eye, cam.target, cam.up))
        R = look_at(eye, target, up)
        parent = hand if cam.on_wrist else world
        parent.add_camera(name=cam.name, pos=eye, xyaxes=np.concatenate([R[:, 0], R[:, 1]]), fovy=cam.fovy)
    # A directional light, shared with PyBullet, that set_lighting can turn and dim (the headlight follows
    # each camera and cannot be turned); the headlight is dimmed to keep images about as bright as before.
    spec.visual.headlight.diffuse = [0.1] * 3
    world.add_light(name=LIGHT, type=mujoco.mjtLightType.mjLIGHT_DIRECTIONAL, pos=[0, 0, 2], dir=LIGHT_DIRECTION,
                    diffuse=[0.3] * 3, specular=[0.1] * 3, castshadow=False)  # fmt: skip
    for name, jnt in zip(arm.joint_names, arm.joints, strict=True):
        spec.add_actuator(
            name=name,
            target=name,
            trntype=mujoco.mjtTrn.mjTRN_JOINT,
            forcelimited=True,
            forcerange=[-jnt.effort, jnt.effort],
        ).set_to_position(kp=ARM_KP, kv=ARM_KV)
        joint = spec.joint(name)
        joint.armature = 0.1  # reflected rotor inertia: stabilises the stiff servo at 2 ms
        # Gravity compensation counts against the joint's effort, as in PyBullet (whose motors hold the arm
        # up within their force limits) and on the real arm: outside it, a full-speed move had up to 87 N m
        # more to brake with and the two engines' TCPs drifted apart by 20 cm in 32 steps (test_parity.py).
        joint.actgravcomp = True
        joint.actfrclimited = True
        joint.actfrcrange = [-jnt.effort, jnt.effort]
    for name in arm.gripper.joints:
        f = arm.gripper.force
        spec.add_actuator(
            name=name, target=name, trntype=mujoco.mjtTrn.mjTRN_JOINT, forcelimited=True, forcerange=[-f, f]
        ).set_to_position(kp=FINGER_KP, kv=FINGER_KV)
    cx, cy = scene.table.center
    lx, wy = scene.table.size
    h = scene.table.height
    world.add_geom(
        name="table",
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=[lx / 2, wy / 2, h / 2],
        pos=[cx, cy, -h / 2],
        rgba=[0.85, 0.8, 0.7, 1],
        friction=STATIC_FRICTION,
        contype=SCENE_BITS[0],
        conaffinity=SCENE_BITS[1],
    )
    for place in scene.places:
        _add_place(world, place)
    for obj in scene.objects:
        half = np.asarray(obj.size, dtype=float) / 2
        body = world.add_body(name=obj.name, pos=[0, 0, half[2]])
        body.add_freejoint(name=obj.name)
        body.add_geom(
            name=obj.name,
            type=mujoco.mjtGeom.mjGEOM_BOX,
            size=half,
            rgba=list(obj.rgba),
            mass=obj.mass,
            friction=[obj.friction, TORSION, 0.0001],
            condim=4,
            solref=SOLREF,
            contype=SCENE_BITS[0],
            conaffinity=SCENE_BITS[1],
        )
    world.add_site(name=GOAL_SITE, size=[0.05, 0, 0], rgba=list(GOAL_RGBA), pos=[0, 0, -1])
    return spec.compile()


def _add_place(world, place) -> None:
    for box in place_boxes(place):
        bits = SCENE_BITS if box.solid else PAINT_BITS
        world.add_geom(name=box.name, type=mujoco.mjtGeom.mjGEOM_BOX, size=box.half, pos=box.center,
                       rgba=list(place.rgba), friction=STATIC_FRICTION,
                       contype=bits[0], conaffinity=bits[1])  # fmt: skip


def _index(addresses: list[int]) -> slice | np.ndarray:
    """A slice where the addresses are consecutive (the arm's usually are: a slice reads and writes faster than an
    index array, and this runs several times per control step), else the index array."""
    if addresses == list(range(addresses[0], addresses[0] + len(addresses))):
        return slice(addresses[0], addresses[0] + len(addresses))
    return np.array(addresses)


class MujocoTabletopPhysics:
    """The arm and the scene in MuJoCo; ``substeps`` ``mj_step`` calls per control step."""

    def __init__(self, scene: TabletopScene, arm: ArmSpec, *, substeps: int) -> None:
        self.scene, self.arm, self.substeps = scene, arm, substeps
        self.model = _build(scene, arm)
        self.data = mujoco.MjData(self.model)
        m = self.model
        self._q = _index([m.joint(n).qposadr[0] for n in arm.joint_names])
        self._dq = _index([m.joint(n).dofadr[0] for n in arm.joint_names])
        self._fq = _index([m.joint(n).qposadr[0] for n in arm.gripper.joints])
        self._act = _index([m.actuator(n).id for n in arm.joint_names])
        self._fact = _index([m.actuator(n).id for n in arm.gripper.joints])
        self._obj = {
            o.name: (m.joint(o.name).qposadr[0], m.joint(o.name).dofadr[0], m.geom(o.name).id, m.body(o.name).id)
            for o in scene.objects
        }
        self._tcp = m.site(TCP_SITE).id
        self._goal = m.site(GOAL_SITE).id
        self._renderers: dict[tuple[int, int], mujoco.Renderer] = {}
        self._cameras = {c: (m.camera(c).id, m.cam_pos[m.camera(c).id].copy(), m.cam_quat[m.camera(c).id].copy())
                         for c in CAMERAS}  # fmt: skip
        self._light = m.light(LIGHT).id
        self._light_nominal = (m.light_diffuse[self._light].copy(), m.light_specular[self._light].copy())
        self._scratch: mujoco.MjData | None = None
        self._nominal_inertia = {n: (float(m.body_mass[b]), m.body_inertia[b].copy())
                                 for n, (*_, b) in self._obj.items()}  # fmt: skip

    def reset(self, q: np.ndarray, width: float, objects: dict[str, tuple[float, float, float]]) -> None:
        d = self.data
        mujoco.mj_resetData(self.model, d)
        d.qpos[self._q] = q
        d.qpos[self._fq] = width / 2
        d.ctrl[self._act] = q
        d.ctrl[self._fact] = width / 2
        for name, (x, y, yaw) in objects.items():
            adr = self._obj[name][0]
            half_h = self.model.geom_size[self._obj[name][2]][2]
            d.qpos[adr : adr + 7] = [x, y, half_h, np.cos(yaw / 2), 0, 0, np.sin(yaw / 2)]
        mujoco.mj_forward(self.model, d)

    def step(self, q_target: np.ndarray, width_target: float) -> None:
        self.data.ctrl[self._act] = q_target
        self.data.ctrl[self._fact] = width_target / 2
        mujoco.mj_step(self.model, self.data, nstep=self.substeps)

    def joints(self) -> tuple[np.ndarray, np.ndarray]:
        return self.data.qpos[self._q].copy(), self.data.qvel[self._dq].copy()  # copies, not views of the state

    def finger_width(self) -> float:
        return float(self.data.qpos[self._fq].sum())

    def tcp(self) -> tuple[np.ndarray, np.ndarray]:
        return self.data.site_xpos[self._tcp].copy(), self.data.site_xmat[self._tcp].reshape(3, 3).copy()

    def object_state(self, name: str) -> ObjectState:
        qa, va, _, _ = self._obj[name]
        d = self.data
        # A free joint's qvel is the linear velocity in the world frame and the angular one in the body frame.
        quat = d.qpos[qa + 3 : qa + 7].copy()
        R = np.empty(9)
        mujoco.mju_quat2Mat(R, quat)
        return ObjectState(
            d.qpos[qa : qa + 3].copy(), quat, d.qvel[va : va + 3].copy(), R.reshape(3, 3) @ d.qvel[va + 3 : va + 6]
        )

    def set_object_pose(self, name: str, position: np.ndarray) -> None:
        qa, va, _, _ = self._obj[name]
        self.data.qpos[qa : qa + 7] = [*position, 1, 0, 0, 0]
        self.data.qvel[va : va + 6] = 0
        mujoco.mj_forward(self.model, self.data)

    def set_object_dynamics(self, name: str, mass: float, friction: float) -> None:
        _, _, geom, body = self._obj[name]
        m = self.model
        nominal_mass, nominal_inertia = self._nominal_inertia[name]
        m.body_mass[body] = mass
        m.body_inertia[body] = nominal_inertia * (mass / nominal_mass)  # from the nominal: no drift over episodes
        m.geom_friction[geom][0] = friction
        # The solver's per-body constants (inverse weights, subtree masses) follow the mass only through
        # mj_setConst; without it a 10x heavier cube made the simulation blow up. It works on the model's
        # reference pose, in its own MjData, so the episode's state is untouched.
        if self._scratch is None:
            self._scratch = mujoco.MjData(m)
        mujoco.mj_setConst(m, self._scratch)

    def set_goal_marker(self, position: np.ndarray | None) -> None:
        self.model.site_pos[self._goal] = position if position is not None else (0, 0, -1)

    def set_camera_offset(self, camera: str, position: np.ndarray, rotation: np.ndarray) -> None:
        i, pos, quat = self._cameras[camera]
        R = np.empty(9)
        mujoco.mju_quat2Mat(R, quat)
        self.model.cam_pos[i] = pos + R.reshape(3, 3) @ np.asarray(position, dtype=float)
        turn = np.empty(4)
        mujoco.mju_mat2Quat(turn, np.asarray(rotation, dtype=float).ravel())
        mujoco.mju_mulQuat(self.model.cam_quat[i], quat, turn)

    def set_lighting(self, intensity: float, direction: np.ndarray) -> None:
        diffuse, specular = self._light_nominal
        self.model.light_diffuse[self._light] = diffuse * intensity
        self.model.light_specular[self._light] = specular * intensity
        self.model.light_dir[self._light] = direction

    def render(self, camera: str, width: int, height: int, depth: bool = False) -> np.ndarray:
        key = (width, height)
        if key not in self._renderers:
            self._renderers[key] = mujoco.Renderer(self.model, height, width)
        r = self._renderers[key]
        mujoco.mj_kinematics(self.model, self.data)  # the goal site moves only in the model
        mujoco.mj_camlight(self.model, self.data)  # so do the cameras and the light (set_camera_offset, set_lighting)
        if depth:
            r.enable_depth_rendering()
        r.update_scene(self.data, camera=camera)
        image = r.render()
        if depth:
            r.disable_depth_rendering()
            # Nothing hit reads as the camera's far plane, as in PyBullet (MuJoCo gives its own, model-scaled one).
            return np.minimum(image, CAMERAS[camera].far).astype(np.float32)
        return image.copy()

    def close(self) -> None:
        for r in self._renderers.values():
            r.close()
        self._renderers.clear()
