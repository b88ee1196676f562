"""PyBullet implementation of :class:`sim.tabletop.physics.TabletopPhysics`.

The arm's URDF is loaded as is (fixed base, no self-collision, as panda-gym loads it); the joints track
their targets with PyBullet's position motors clamped to the spec's efforts, the fingers likewise. Each
engine runs its own DIRECT client, so several envs live in one process.
"""

from __future__ import annotations

import numpy as np
import pybullet as pb

from robots.arm import ArmSpec
from sim.tabletop.physics import (
    CAMERAS,
    GOAL_RGBA,
    GRAVITY,
    LIGHT_DIRECTION,
    PHYSICS_DT,
    ObjectState,
    depth_from_buffer,
    look_at,
    place_boxes,
)
from sim.tabletop.scene import TabletopScene

#: Position-motor gains (PyBullet's defaults are 0.1 / 1.0 of the error per step): these track a 5 cm TCP
#: step within one 40 ms control period, like the MuJoCo servos.
POSITION_GAIN, VELOCITY_GAIN = 0.1, 1.0
#: Torsional friction of grasp contacts (MuJoCo: condim 4).
SPINNING_FRICTION = 0.01
#: Friction of the table and places: MuJoCo's default (1.0). Bullet multiplies the two bodies' frictions where
#: MuJoCo takes the larger, so at 1.0 an object slides on them with its own friction in both engines (at
#: Bullet's default 0.5 a pushed cube slid twice as far and off the table: tests/sim/tabletop/test_parity.py).
SCENE_FRICTION = 1.0
#: Force (N) of the constraint that keeps the fingers symmetric: above the 2 x 20 N the finger motors push with.
FINGER_COUPLING_FORCE = 100.0
#: Bullet's solver stops iterating once an iteration's squared residual falls below this (PyBullet's default,
#: 1e-7, runs nearly all 50 iterations every substep; panda-gym keeps it). At 1e-3 the physics runs ~1.4x
#: faster on the push env's recorded joint targets, and the parity, friction and grasp tests, the skills'
#: MuJoCo -> PyBullet transfer and the symbolic planner's stacks are unchanged within their intervals
#: (benchmarks/RESULTS.md, env_throughput); at 1e-2 the TCP no longer tracks MuJoCo's (test_parity.py).
SOLVER_RESIDUAL_THRESHOLD = 1e-3


class PybulletTabletopPhysics:
    """The arm and the scene in PyBullet; ``substeps`` ``stepSimulation`` calls per control step."""

    def __init__(self, scene: TabletopScene, arm: ArmSpec, *, substeps: int) -> None:
        self.scene, self.arm, self.substeps = scene, arm, substeps
        c = self._c = pb.connect(pb.DIRECT)
        pb.setTimeStep(PHYSICS_DT, physicsClientId=c)
        pb.setGravity(0, 0, -GRAVITY, physicsClientId=c)
        pb.setPhysicsEngineParameter(solverResidualThreshold=SOLVER_RESIDUAL_THRESHOLD, physicsClientId=c)
        self.robot = pb.loadURDF(
            str(arm.urdf),
            basePosition=list(scene.robot_base),
            useFixedBase=True,
            flags=pb.URDF_ENABLE_CACHED_GRAPHICS_SHAPES,
            physicsClientId=c,
        )
        index = {
            pb.getJointInfo(self.robot, i, physicsClientId=c)[1].decode(): i
            for i in range(pb.getNumJoints(self.robot, physicsClientId=c))
        }
        links = {pb.getJointInfo(self.robot, i, physicsClientId=c)[12].decode(): i for i in index.values()}
        self._arm = [index[n] for n in arm.joint_names]
        self._fingers = [index[n] for n in arm.gripper.joints]
        self._tcp = links[arm.tcp_link]
        self._forces = [j.effort for j in arm.joints]
        for i in self._fingers:
            pb.changeDynamics(self.robot, i, lateralFriction=1.0, spinningFriction=SPINNING_FRICTION, physicsClientId=c)
        # The fingers move together, as the URDF's <mimic> says and MuJoCo's importer builds (an equality
        # constraint); PyBullet ignores <mimic>, and with both finger motors at their force limit a held cube
        # slid 2 cm towards one finger when carried sideways. (PyBullet's own Panda example does the same.)
        gear = pb.createConstraint(self.robot, self._fingers[0], self.robot, self._fingers[1], pb.JOINT_GEAR,
                                   [1, 0, 0], [0, 0, 0], [0, 0, 0], physicsClientId=c)  # fmt: skip
        pb.changeConstraint(gear, gearRatio=-1, erp=0.1, maxForce=FINGER_COUPLING_FORCE, physicsClientId=c)
        cx, cy = scene.table.center
        lx, wy = scene.table.size
        h = scene.table.height
        self._box([lx / 2, wy / 2, h / 2], [cx, cy, -h / 2], (0.85, 0.8, 0.7, 1), mass=0)
        for place in scene.places:
            self._add_place(place)
        self._obj: dict[str, int] = {}
        for obj in scene.objects:
            body = self._box(np.asarray(obj.size) / 2, [0, 0, obj.size[2] / 2], obj.rgba, mass=obj.mass)
            pb.changeDynamics(
                body, -1, lateralFriction=obj.friction, spinningFriction=SPINNING_FRICTION, physicsClientId=c
            )
            self._obj[obj.name] = body
        shape = pb.createVisualShape(pb.GEOM_SPHERE, radius=0.05, rgbaColor=GOAL_RGBA, physicsClientId=c)
        self._goal = pb.createMultiBody(0, -1, shape, [0, 0, -1], physicsClientId=c)
        self._initial = pb.saveState(physicsClientId=c)
        #: Per camera: position offset and rotation in its own frame (set_camera_offset); the light's scale and
        #: the way it shines (set_lighting).
        self._camera_offsets: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._light = (1.0, np.array(LIGHT_DIRECTION))

    def _box(self, half, pos, rgba, *, mass: float, collide: bool = True) -> int:
        c = self._c
        vis = pb.createVisualShape(pb.GEOM_BOX, halfExtents=list(half), rgbaColor=list(rgba), physicsClientId=c)
        col = pb.createCollisionShape(pb.GEOM_BOX, halfExtents=list(half), physicsClientId=c) if collide else -1
        body = pb.createMultiBody(mass, col, vis, list(pos), physicsClientId=c)
        pb.changeDynamics(body, -1, lateralFriction=SCENE_FRICTION, physicsClientId=c)  # objects: their own, later
        return body

    def _add_place(self, place) -> None:
        for box in place_boxes(place):
            self._box(box.half, box.center, place.rgba, mass=0, collide=box.solid)

    def reset(self, q: np.ndarray, width: float, objects: dict[str, tuple[float, float, float]]) -> None:
        c = self._c
        # Same seed, same episode: contact points (the solver's warm start) outlive pose resets and even
        # restoreState, so first every moving body goes far apart for one step, which drops them all.
        # (This suffices; Bullet's deterministicOverlappingPairs, which cost 25 % of the physics, is not needed.)
        for k, body in enumerate([self.robot, *self._obj.values()]):
            pb.resetBasePositionAndOrientation(body, [10.0 * (k + 1), 0, -100.0], [0, 0, 0, 1], physicsClientId=c)
        pb.stepSimulation(physicsClientId=c)
        pb.restoreState(self._initial, physicsClientId=c)
        for i, value in zip(self._arm, q, strict=True):
            pb.resetJointState(self.robot, i, float(value), 0.0, physicsClientId=c)
        for i in self._fingers:
            pb.resetJointState(self.robot, i, width / 2, 0.0, physicsClientId=c)
        self._command(np.asarray(q), width)
        for name, body in self._obj.items():
            if name in objects:
                x, y, yaw = objects[name]
                z = self.scene.object(name).size[2] / 2
                pb.resetBasePositionAndOrientation(
                    body, [x, y, z], pb.getQuaternionFromEuler([0, 0, yaw]), physicsClientId=c
                )
                pb.resetBaseVelocity(body, [0, 0, 0], [0, 0, 0], physicsClientId=c)

    def _command(self, q_target: np.ndarray, width_target: float) -> None:
        c, n = self._c, len(self._arm)
        pb.setJointMotorControlArray(
            self.robot,
            self._arm,
            pb.POSITION_CONTROL,
            targetPositions=np.asarray(q_target, dtype=float).tolist(),
            forces=self._forces,
            positionGains=[POSITION_GAIN] * n,
            velocityGains=[VELOCITY_GAIN] * n,
            physicsClientId=c,
        )
        f = self.arm.gripper.force
        pb.setJointMotorControlArray(
            self.robot,
            self._fingers,
            pb.POSITION_CONTROL,
            targetPositions=[width_target / 2] * 2,
            forces=[f, f],
            positionGains=[POSITION_GAIN] * 2,
            velocityGains=[VELOCITY_GAIN] * 2,
            physicsClientId=c,
        )

    def step(self, q_target: np.ndarray, width_target: float) -> None:
        self._command(q_target, width_target)
        for _ in range(self.substeps):
            pb.stepSimulation(physicsClientId=self._c)

    def joints(self) -> tuple[np.ndarray, np.ndarray]:
        states = pb.getJointStates(self.robot, self._arm, physicsClientId=self._c)
        positions, velocities, *_ = zip(*states, strict=True)
        return np.array(positions), np.array(velocities)

    def finger_width(self) -> float:
        return float(sum(s[0] for s in pb.getJointStates(self.robot, self._fingers, physicsClientId=self._c)))

    def tcp(self) -> tuple[np.ndarray, np.ndarray]:
        state = pb.getLinkState(self.robot, self._tcp, computeForwardKinematics=True, physicsClientId=self._c)
        R = np.array(pb.getMatrixFromQuaternion(state[5])).reshape(3, 3)
        return np.array(state[4]), R

    def object_state(self, name: str) -> ObjectState:
        body = self._obj[name]
        pos, (x, y, z, w) = pb.getBasePositionAndOrientation(body, physicsClientId=self._c)
        lin, ang = pb.getBaseVelocity(body, physicsClientId=self._c)
        return ObjectState(np.array(pos), np.array([w, x, y, z]), np.array(lin), np.array(ang))

    def set_object_pose(self, name: str, position: np.ndarray) -> None:
        body = self._obj[name]
        pb.resetBasePositionAndOrientation(body, list(position), [0, 0, 0, 1], physicsClientId=self._c)
        pb.resetBaseVelocity(body, [0, 0, 0], [0, 0, 0], physicsClientId=self._c)

    def set_object_dynamics(self, name: str, mass: float, friction: float) -> None:
        pb.changeDynamics(self._obj[name], -1, mass=mass, lateralFriction=friction, physicsClientId=self._c)

    def set_goal_marker(self, position: np.ndarray | None) -> None:
        pos = list(position) if position is not None else [0, 0, -1]
        pb.resetBasePositionAndOrientation(self._goal, pos, [0, 0, 0, 1], physicsClientId=self._c)

    def set_camera_offset(self, camera: str, position: np.ndarray, rotation: np.ndarray) -> None:
        position, rotation = np.asarray(position, dtype=float), np.asarray(rotation, dtype=float)
        if np.any(position) or not np.array_equal(rotation, np.eye(3)):
            self._camera_offsets[camera] = (position, rotation)
        else:  # the nominal view matrix exactly, not one recomputed through look_at
            self._camera_offsets.pop(camera, None)

    def set_lighting(self, intensity: float, direction: np.ndarray) -> None:
        self._light = (float(intensity), np.asarray(direction, dtype=float))

    def render(self, camera: str, width: int, height: int, depth: bool = False) -> np.ndarray:
        cam = CAMERAS[camera]
        eye, target, up = (np.asarray(v, dtype=float) for v in (cam.eye, cam.target, cam.up))
        if cam.on_wrist:
            p, R = self.tcp()
            eye, target, up = p + R @ eye, p + R @ target, R @ up
        if camera in self._camera_offsets:
            offset, turn = self._camera_offsets[camera]
            R = look_at(eye, target, up)
            distance = np.linalg.norm(target - eye)
            eye, R = eye + R @ offset, R @ turn
            target, up = eye - distance * R[:, 2], R[:, 1]
        intensity, shine = self._light
        view = pb.computeViewMatrix(eye.tolist(), target.tolist(), up.tolist(), physicsClientId=self._c)
        proj = pb.computeProjectionMatrixFOV(cam.fovy, width / height, cam.near, cam.far, physicsClientId=self._c)
        _, _, rgba, buffer, _ = pb.getCameraImage(
            width,
            height,
            view,
            proj,
            renderer=pb.ER_TINY_RENDERER,
            lightDirection=(-shine).tolist(),  # PyBullet's points from the scene towards the light
            lightColor=[intensity] * 3,
            physicsClientId=self._c,
        )
        if depth:
            return depth_from_buffer(np.reshape(buffer, (height, width)), cam.near, cam.far)
        return np.reshape(rgba, (height, width, 4))[:, :, :3].astype(np.uint8)

    def close(self) -> None:
        if self._c >= 0:
            pb.disconnect(physicsClientId=self._c)
            self._c = -1
