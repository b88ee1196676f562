"""MuJoCo implementation of :class:`sim.navigation.physics.RoverPhysics`."""

from __future__ import annotations

import math

import mujoco
import numpy as np

from robots.spec import RobotSpec
from sim.navigation.mujoco.builder import GOAL_SITE, LIDAR_PREFIX, TOP_CAMERA, build_model
from sim.navigation.physics import GRAVITY, Dynamics, TopView, render_size_for
from sim.navigation.world import Pose2D, World

_SENSOR_BIT = int(mujoco.mjtDisableBit.mjDSBL_SENSOR)


class MujocoRoverPhysics:
    """The rover in a MuJoCo world. One ``mj_step`` per substep; the lidar is cast once per control step.

    Rangefinders would otherwise be evaluated at every substep although the policy only sees the
    last reading, so sensors are disabled during the substeps and computed once on the final state.
    """

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
        self.world = world
        self.robot = robot
        self.substeps = substeps
        self.render_size = render_size_for(world, render_height)
        self.model = build_model(world, robot, physics_dt=physics_dt, goal_radius=goal_radius, render=self.render_size)
        self.data = mujoco.MjData(self.model)
        m = self.model
        self._qx = m.joint("base_x").qposadr[0]
        self._qy = m.joint("base_y").qposadr[0]
        self._qyaw = m.joint("base_yaw").qposadr[0]
        self._vx = m.joint("base_x").dofadr[0]
        self._vy = m.joint("base_y").dofadr[0]
        self._vyaw = m.joint("base_yaw").dofadr[0]
        self._act_lin = m.actuator("drive_linear").id
        self._act_ang = m.actuator("drive_angular").id
        self._chassis = m.geom(robot.chassis_geom).id
        first = m.sensor(f"{LIDAR_PREFIX}0")
        self._lidar_slice = slice(first.adr[0], first.adr[0] + robot.lidar.num_rays)
        self._goal_site = m.site(GOAL_SITE).id
        self._max_range = robot.lidar.max_range
        self._renderer: mujoco.Renderer | None = None
        self._view = TopView.of(world, self.render_size)
        base = m.body(robot.base_body).id
        self._base = base
        self._walls = [m.geom(f"wall_{i}").id for i in range(len(world.walls))]
        self._act_grip = m.actuator("drive_lateral_grip").id
        self._nominal = {
            "mass": float(m.body_mass[base]),
            "inertia": m.body_inertia[base].copy(),
            "gain_lin": float(m.actuator_gainprm[self._act_lin, 0]),
            "gain_ang": float(m.actuator_gainprm[self._act_ang, 0]),
        }
        self.dynamics = Dynamics()

    def reset(self, pose: Pose2D) -> None:
        mujoco.mj_resetData(self.model, self.data)
        self.data.qpos[self._qx] = pose.x
        self.data.qpos[self._qy] = pose.y
        self.data.qpos[self._qyaw] = pose.yaw
        mujoco.mj_forward(self.model, self.data)

    def step(self, linear: float, angular: float) -> bool:
        m, d = self.model, self.data
        d.ctrl[self._act_lin] = linear
        d.ctrl[self._act_ang] = angular
        touched = False
        m.opt.disableflags |= _SENSOR_BIT
        try:
            for _ in range(self.substeps):
                mujoco.mj_step(m, d)
                if d.ncon and not touched:
                    touched = bool(np.any(d.contact.geom[: d.ncon] == self._chassis))
        finally:
            m.opt.disableflags &= ~_SENSOR_BIT
        mujoco.mj_kinematics(m, d)
        mujoco.mj_sensorPos(m, d)
        return touched

    def pose(self) -> Pose2D:
        q = self.data.qpos
        return Pose2D(float(q[self._qx]), float(q[self._qy]), _wrap(float(q[self._qyaw])))

    def velocity(self) -> tuple[float, float]:
        v = self.data.qvel
        yaw = float(self.data.qpos[self._qyaw])
        forward = math.cos(yaw) * float(v[self._vx]) + math.sin(yaw) * float(v[self._vy])
        return forward, float(v[self._vyaw])

    def lidar(self) -> np.ndarray:
        ranges = self.data.sensordata[self._lidar_slice]
        # -1 means no hit; cutoff already caps readings at max_range.
        return np.where(ranges < 0.0, self._max_range, ranges)

    def set_goal_marker(self, goal: tuple[float, float]) -> None:
        self.model.site_pos[self._goal_site, :2] = goal
        mujoco.mj_kinematics(self.model, self.data)

    def set_dynamics(self, dynamics: Dynamics) -> None:
        m, nominal = self.model, self._nominal
        mass = nominal["mass"] * dynamics.mass_scale
        m.body_mass[self._base] = mass
        m.body_inertia[self._base] = nominal["inertia"] * dynamics.mass_scale
        # Contact friction is the larger of the two geoms' (MuJoCo's rule): set both sides.
        m.geom_friction[[self._chassis, *self._walls], 0] = dynamics.friction
        grip = dynamics.friction * mass * GRAVITY
        m.actuator_forcerange[self._act_grip] = [-grip, grip]
        # force = gain * ctrl - kv * v: scaling the gain makes the servo settle at motor_gain * ctrl.
        m.actuator_gainprm[self._act_lin, 0] = nominal["gain_lin"] * dynamics.motor_gain
        m.actuator_gainprm[self._act_ang, 0] = nominal["gain_ang"] * dynamics.motor_gain
        # MuJoCo 4 derives constants from masses at compile time: recompute them (mj_setConst works on
        # qpos0 in the data, so the current state is kept aside and restored).
        d = self.data
        qpos, qvel = d.qpos.copy(), d.qvel.copy()
        mujoco.mj_setConst(m, d)
        d.qpos[:], d.qvel[:] = qpos, qvel
        mujoco.mj_forward(m, d)
        self.dynamics = dynamics

    def render(self) -> np.ndarray:
        if self._renderer is None:
            self._renderer = mujoco.Renderer(self.model, self.render_size.height, self.render_size.width)
        self._renderer.update_scene(self.data, camera=TOP_CAMERA)
        return self._renderer.render()

    def world_to_pixel(self, x: float, y: float) -> tuple[float, float]:
        """(column, row) of a map point in :meth:`render` images (top-down orthographic camera)."""
        return self._view.world_to_pixel(x, y)

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None


def _wrap(angle: float) -> float:
    return (angle + math.pi) % (2.0 * math.pi) - math.pi
