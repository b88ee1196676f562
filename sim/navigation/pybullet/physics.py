"""PyBullet implementation of :class:`sim.navigation.physics.RoverPhysics`.

The rover is its URDF (a planar base: prismatic x, prismatic y, continuous yaw), walls are static boxes
built from the map exactly as in MuJoCo (``Wall.footprint``), and the lidar is one ``rayTestBatch`` per
control step with the robot's ray layout, cast into a scene of its own that holds the same walls as one
triangle mesh (:class:`_LidarScene`: three times cheaper than casting among the physics scene's bodies).
The drive is the model of :mod:`sim.navigation.physics` applied as joint forces at every substep: forward and yaw
velocity servos clamped to the motors' force limits, and a lateral tyre grip. The servo gains are the
implicit-Euler equivalents of MuJoCo's (``implicitfast`` integrates velocity servos implicitly), so both
engines follow the same velocity response; contacts with walls are each engine's own.

Each instance owns two ``DIRECT`` (headless) clients, physics and lidar, so several envs coexist in a process.
``close()`` disconnects them; an instance dropped without it is disconnected when it is garbage-collected
(a ``weakref.finalize`` per client, registered as soon as it connects: it holds the client id, not the
object, runs exactly once, and also runs at interpreter exit, where ``__del__`` is not guaranteed to).
"""

from __future__ import annotations

import math
import weakref

import numpy as np
import pybullet as pb

from robots.spec import RobotSpec
from sim.navigation.physics import (
    DRIVE_TIME_CONSTANT,
    GRAVITY,
    Dynamics,
    RenderSize,
    TopView,
    render_size_for,
)
from sim.navigation.world import Pose2D, World

#: Collision groups. Rays belong to Bullet's default group (1) and test only bodies in ``_WALLS``, so the
#: lidar never sees the robot's own chassis; walls accept both rays and the robot.
_WALLS, _ROBOT = 1, 2
#: Joints of the URDF's planar base, in chain order.
_JOINTS = ("base_x", "base_y", "base_yaw")


class PybulletRoverPhysics:
    """The rover in a PyBullet world (one DIRECT client per instance)."""

    def __init__(
        self,
        world: World,
        robot: RobotSpec,
        *,
        physics_dt: float,
        substeps: int,
        goal_radius: float,
        render_height: int = 480,
    ) -> None:
        if robot.urdf is None:
            raise ValueError(
                f"robot {robot.name!r} has no URDF (robot spec field 'urdf'); the pybullet backend needs one"
            )
        self.world = world
        self.robot = robot
        self.substeps = substeps
        self.dt = physics_dt
        self.render_size: RenderSize = render_size_for(world, render_height)
        self._view = TopView.of(world, self.render_size)
        self.client = pb.connect(pb.DIRECT)
        self._disconnect = weakref.finalize(self, _disconnect, self.client)
        c = self.client
        pb.setPhysicsEngineParameter(
            fixedTimeStep=physics_dt, numSubSteps=0, deterministicOverlappingPairs=1, physicsClientId=c
        )
        pb.setGravity(0.0, 0.0, -GRAVITY, physicsClientId=c)

        self.body = pb.loadURDF(
            str(robot.urdf), useFixedBase=True, flags=pb.URDF_USE_INERTIA_FROM_FILE, physicsClientId=c
        )
        names = {pb.getJointInfo(self.body, j, physicsClientId=c)[1].decode(): j for j in range(self._num_joints())}
        missing = [n for n in _JOINTS if n not in names]
        if missing:
            raise ValueError(f"{robot.urdf}: needs joints {list(_JOINTS)} (a planar base); missing {missing}")
        self._joints = [names[n] for n in _JOINTS]
        self._chassis = self._joints[2]  # the yaw joint's child link is the chassis
        for j in range(-1, self._num_joints()):
            pb.changeDynamics(self.body, j, linearDamping=0.0, angularDamping=0.0, physicsClientId=c)
        # Joint motors off: the drive applies forces itself (TORQUE_CONTROL needs the default motors disabled).
        pb.setJointMotorControlArray(
            self.body, self._joints, pb.VELOCITY_CONTROL, forces=[0.0, 0.0, 0.0], physicsClientId=c
        )
        pb.setCollisionFilterGroupMask(self.body, self._chassis, _ROBOT, _WALLS, physicsClientId=c)
        self._base_z = float(pb.getLinkState(self.body, self._chassis, physicsClientId=c)[4][2])

        self._walls = [self._add_wall(wall) for wall in world.walls]
        self._add_floor_and_markers(goal_radius)

        info = pb.getDynamicsInfo(self.body, self._chassis, physicsClientId=c)
        self._nominal_mass = float(info[0])
        self._nominal_inertia = tuple(float(v) for v in info[2])
        self.dynamics = Dynamics()
        self._set_drive(self.dynamics)

        self._lidar = _LidarScene(world, robot, self._base_z)
        self._ranges = np.full(robot.lidar.num_rays, robot.lidar.max_range)
        self._near_walls = world.distance_field()
        self._state = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)  # x, y, yaw, vx, vy, wz (world frame), plain floats

    # ------------------------------------------------------------------ construction

    def _num_joints(self) -> int:
        return pb.getNumJoints(self.body, physicsClientId=self.client)

    def _add_wall(self, wall) -> int:
        c, h = self.client, self.world.wall_height
        half = [wall.length / 2.0 + wall.thickness / 2.0, wall.thickness / 2.0, h / 2.0]
        col = pb.createCollisionShape(pb.GEOM_BOX, halfExtents=half, physicsClientId=c)
        vis = pb.createVisualShape(pb.GEOM_BOX, halfExtents=half, rgbaColor=[0.35, 0.35, 0.4, 1.0], physicsClientId=c)
        body = pb.createMultiBody(0.0, col, vis, [*wall.center, h / 2.0], _yaw_quat(wall.yaw), physicsClientId=c)
        pb.setCollisionFilterGroupMask(body, -1, _WALLS, _WALLS | _ROBOT, physicsClientId=c)
        return body

    def _add_floor_and_markers(self, goal_radius: float) -> None:
        # Visual only (no collision shape): neither contacts nor lidar rays see them.
        c = self.client
        xmin, ymin, xmax, ymax = self.world.bounds
        floor = pb.createVisualShape(
            pb.GEOM_BOX,
            halfExtents=[(xmax - xmin) / 2.0 + 0.5, (ymax - ymin) / 2.0 + 0.5, 0.001],
            rgbaColor=[0.92, 0.92, 0.88, 1.0],
            physicsClientId=c,
        )
        pb.createMultiBody(0.0, -1, floor, [*self._view.center, -0.001], physicsClientId=c)
        goal = pb.createVisualShape(
            pb.GEOM_CYLINDER, radius=goal_radius, length=0.01, rgbaColor=[0.1, 0.8, 0.2, 1.0], physicsClientId=c
        )
        self._goal_marker = pb.createMultiBody(0.0, -1, goal, [*self._view.center, 0.005], physicsClientId=c)
        for lm in self.world.landmarks:
            vis = pb.createVisualShape(
                pb.GEOM_CYLINDER, radius=0.08, length=0.006, rgbaColor=[0.2, 0.4, 0.9, 0.8], physicsClientId=c
            )
            pb.createMultiBody(0.0, -1, vis, [lm.position[0], lm.position[1], 0.003], physicsClientId=c)

    def _set_drive(self, dynamics: Dynamics) -> None:
        """Servo gains and force limits of the drive model (see sim.navigation.physics) for these dynamics."""
        lim, dt = self.robot.limits, self.dt
        mass = self._nominal_mass * dynamics.mass_scale
        inertia = self._nominal_inertia[2] * dynamics.mass_scale
        nominal_inertia = self._nominal_inertia[2]

        def implicit(kv: float, m: float) -> float:
            # The force an implicit Euler step applies for F = kv (target - v): kv / (1 + dt kv / m).
            return kv / (1.0 + dt * kv / m)

        # Motors are sized for the nominal robot (their force limits do not change with the load).
        kv_lin = self._nominal_mass / DRIVE_TIME_CONSTANT
        kv_ang = nominal_inertia / DRIVE_TIME_CONSTANT
        kv_lat = self._nominal_mass / (2.0 * dt)
        # Plain float tuples (forward, lateral, yaw): step() reads them at every substep.
        self._kv = (implicit(kv_lin, mass), implicit(kv_lat, mass), implicit(kv_ang, inertia))
        self._force_max = (
            self._nominal_mass * lim.max_linear_acceleration,
            dynamics.friction * mass * GRAVITY,
            nominal_inertia * lim.max_angular_acceleration,
        )
        self._cmd_max = (lim.max_linear_velocity, lim.max_angular_velocity)
        # Farther than this from every wall, the chassis cannot touch one within a control period.
        self._contact_margin = self.robot.radius + 2.0 * lim.max_linear_velocity * self.substeps * dt + 0.05

    # ------------------------------------------------------------------ RoverPhysics

    def reset(self, pose: Pose2D) -> None:
        c = self.client
        for joint, value in zip(self._joints, (pose.x, pose.y, pose.yaw), strict=True):
            pb.resetJointState(self.body, joint, value, 0.0, physicsClientId=c)
        self._read_state()
        self._cast_lidar()

    def step(self, linear: float, angular: float) -> bool:
        # The drive runs in Python at every substep, so this loop is written for speed: plain floats,
        # local names, positional arguments (pybullet parses keywords slowly).
        c, body, joints, chassis = self.client, self.body, self._joints, self._chassis
        # A controller clamps its command to the limits; the motor gain scales what the wheels then do.
        gain = self.dynamics.motor_gain
        v_max, w_max = self._cmd_max
        v_cmd = (v_max if linear > v_max else -v_max if linear < -v_max else linear) * gain
        w_cmd = (w_max if angular > w_max else -w_max if angular < -w_max else angular) * gain
        k_fwd, k_lat, k_yaw = self._kv
        f_max, lat_max, t_max = self._force_max
        torque_control, step, states, control, contacts = (
            pb.TORQUE_CONTROL,
            pb.stepSimulation,
            pb.getJointStates,
            pb.setJointMotorControlArray,
            pb.getContactPoints,
        )
        cos_, sin_ = math.cos, math.sin
        x, y, yaw, vx, vy, wz = self._state
        # Contacts are only possible near a wall: far from every wall (more than a control period's
        # travel), the per-substep contact query is skipped.
        check = self._near_walls.lower_bound(x, y) < self._contact_margin
        touched = False
        for _ in range(self.substeps):
            cos, sin = cos_(yaw), sin_(yaw)
            f = k_fwd * (v_cmd - (cos * vx + sin * vy))
            f = f_max if f > f_max else -f_max if f < -f_max else f
            lat = -k_lat * (cos * vy - sin * vx)
            lat = lat_max if lat > lat_max else -lat_max if lat < -lat_max else lat
            t = k_yaw * (w_cmd - wz)
            t = t_max if t > t_max else -t_max if t < -t_max else t
            forces = [cos * f - sin * lat, sin * f + cos * lat, t]
            control(body, joints, torque_control, forces=forces, physicsClientId=c)
            step(c)
            (x, vx, _, _), (y, vy, _, _), (yaw, wz, _, _) = states(body, joints, c)
            if check and not touched and contacts(body, -1, chassis, -1, c):
                touched = True
        self._state = (x, y, yaw, vx, vy, wz)
        self._cast_lidar()
        return touched

    def pose(self) -> Pose2D:
        x, y, yaw = self._state[:3]
        return Pose2D(x, y, _wrap(yaw))

    def velocity(self) -> tuple[float, float]:
        _, _, yaw, vx, vy, wz = self._state
        return math.cos(yaw) * vx + math.sin(yaw) * vy, wz

    def lidar(self) -> np.ndarray:
        return self._ranges.copy()

    def set_goal_marker(self, goal: tuple[float, float]) -> None:
        pb.resetBasePositionAndOrientation(
            self._goal_marker, [goal[0], goal[1], 0.005], [0, 0, 0, 1], physicsClientId=self.client
        )

    def set_dynamics(self, dynamics: Dynamics) -> None:
        c = self.client
        scale = dynamics.mass_scale
        pb.changeDynamics(
            self.body,
            self._chassis,
            mass=self._nominal_mass * scale,
            localInertiaDiagonal=[v * scale for v in self._nominal_inertia],
            lateralFriction=dynamics.friction,
            physicsClientId=c,
        )
        for wall in self._walls:
            pb.changeDynamics(wall, -1, lateralFriction=dynamics.friction, physicsClientId=c)
        self.dynamics = dynamics
        self._set_drive(dynamics)

    def render(self) -> np.ndarray:
        # TinyRenderer (CPU, headless) draws perspective only: a 1 degree lens from far above is
        # orthographic to within 0.2 % (wall tops vs. floor), matching MuJoCo's orthographic camera.
        view = self._view
        cx, cy = view.center
        w, h = self.render_size.width, self.render_size.height
        fov = 1.0
        distance = view.extent / 2.0 / math.tan(math.radians(fov) / 2.0)
        c = self.client
        view_matrix = pb.computeViewMatrix([cx, cy, distance], [cx, cy, 0.0], [0.0, 1.0, 0.0], physicsClientId=c)
        projection = pb.computeProjectionMatrixFOV(fov, w / h, distance - 2.0, distance + 2.0, physicsClientId=c)
        _, _, rgba, _, _ = pb.getCameraImage(
            w,
            h,
            view_matrix,
            projection,
            shadow=0,
            lightDirection=[0.0, 0.0, 1.0],
            lightAmbientCoeff=0.6,
            lightDiffuseCoeff=0.45,
            lightSpecularCoeff=0.0,
            renderer=pb.ER_TINY_RENDERER,
            physicsClientId=c,
        )
        return np.asarray(rgba, dtype=np.uint8).reshape(h, w, 4)[:, :, :3].copy()

    def world_to_pixel(self, x: float, y: float) -> tuple[float, float]:
        return self._view.world_to_pixel(x, y)

    def close(self) -> None:
        """Disconnect both Bullet clients (~50 MB); a second call does nothing."""
        self._disconnect()  # a finalizer runs once: later calls, and garbage collection, do nothing
        self.client = None
        if getattr(self, "_lidar", None) is not None:
            self._lidar.close()

    # ------------------------------------------------------------------ internals

    def _read_state(self) -> None:
        (x, vx, _, _), (y, vy, _, _), (yaw, wz, _, _) = pb.getJointStates(
            self.body, self._joints, physicsClientId=self.client
        )
        self._state = (x, y, yaw, vx, vy, wz)

    def _cast_lidar(self) -> None:
        s = self._state
        self._ranges = self._lidar.cast(s[0], s[1], s[2])


class _LidarScene:
    """The map's walls as one static triangle mesh in a DIRECT client of their own, for the lidar.

    Bullet's per-ray cost grows with every broadphase body a ray passes, hit or filtered out: among the
    physics scene's bodies (one box per wall, the robot's links, markers) a 36-ray ``rayTestBatch`` costs
    ~3x as much as against this single mesh, about as much as a whole control step's physics. The mesh
    is the walls' footprints (``Wall.footprint``, as the boxes) extruded to the wall height, so the rays
    hit the same surfaces (tests/sim/test_parity.py checks the readings against rays cast among the boxes).
    The rays are fixed in the frame of a collision-free marker body placed at the robot's pose before each
    cast, so no ray endpoints are recomputed in Python.
    """

    def __init__(self, world: World, robot: RobotSpec, base_z: float) -> None:
        lidar = robot.lidar
        self.max_range = lidar.max_range
        self.client = pb.connect(pb.DIRECT)
        self._disconnect = weakref.finalize(self, _disconnect, self.client)
        c = self.client
        vertices, indices = _wall_mesh(world)
        if indices:
            shape = pb.createCollisionShape(pb.GEOM_MESH, vertices=vertices, indices=indices, physicsClientId=c)
            pb.createMultiBody(0.0, shape, -1, [0.0, 0.0, 0.0], physicsClientId=c)
        self._frame = pb.createMultiBody(0.0, -1, -1, [0.0, 0.0, 0.0], physicsClientId=c)
        z = base_z + lidar.height
        angles = lidar.angles()
        self._from = [[0.0, 0.0, z] for _ in angles]
        self._to = [[self.max_range * math.cos(a), self.max_range * math.sin(a), z] for a in angles]

    def cast(self, x: float, y: float, yaw: float) -> np.ndarray:
        """Ranges (m) from the robot at (x, y, yaw); ``max_range`` where a ray hits nothing."""
        c = self.client
        half = yaw / 2.0
        pb.resetBasePositionAndOrientation(self._frame, (x, y, 0.0), (0.0, 0.0, math.sin(half), math.cos(half)), c)
        hits = pb.rayTestBatch(self._from, self._to, parentObjectUniqueId=self._frame, physicsClientId=c)
        # A miss reports hit fraction 1.0 (object id -1): max range, as in MuJoCo.
        return np.fromiter((h[2] for h in hits), dtype=np.float64, count=len(hits)) * self.max_range

    def close(self) -> None:
        self._disconnect()
        self.client = None


def _disconnect(client: int) -> None:
    """Disconnect a Bullet client (the finalizer of the object that owns it: it must not reference the object)."""
    if pb.isConnected(client):
        pb.disconnect(client)


def _wall_mesh(world: World) -> tuple[list[list[float]], list[int]]:
    """Vertices and triangle indices of the walls' footprints extruded from the floor to the wall height."""
    vertices: list[list[float]] = []
    indices: list[int] = []
    for wall in world.walls:
        ring = list(wall.footprint().simplify(0.0).exterior.coords)[:-1]  # the 4 corners (no collinear points)
        n, base = len(ring), len(vertices)
        vertices += [[x, y, 0.0] for x, y in ring] + [[x, y, world.wall_height] for x, y in ring]
        for i in range(n):  # the sides, two triangles per edge
            j = (i + 1) % n
            indices += [base + i, base + j, base + n + j, base + i, base + n + j, base + n + i]
        for k in range(1, n - 1):  # the top (a fan; the footprint is convex)
            indices += [base + n, base + n + k, base + n + k + 1]
    return vertices, indices


def _yaw_quat(yaw: float) -> list[float]:
    """PyBullet quaternions are (x, y, z, w)."""
    return [0.0, 0.0, math.sin(yaw / 2.0), math.cos(yaw / 2.0)]


def _wrap(angle: float) -> float:
    return (angle + math.pi) % (2.0 * math.pi) - math.pi
