"""Compose a MuJoCo model from a world map and a robot spec with ``mujoco.MjSpec``.

The robot's MJCF (``robots/<name>/``) is the base document; the world (floor, walls, goal and
landmark markers, a top-down camera) is generated from the map around it. Its actuators and lidar are added here
from the ``RobotSpec`` so that velocity and acceleration limits, and the lidar layout, have exactly one
source (the robot's YAML). Joints, sites and sensors are later found by name, never by index.
"""

from __future__ import annotations

import math

import mujoco
import numpy as np

from robots.spec import RobotSpec
from sim.navigation.physics import DRIVE_TIME_CONSTANT, GRAVITY, LATERAL_FRICTION, RenderSize, TopView, render_size_for
from sim.navigation.world import World

GOAL_SITE = "goal"
TOP_CAMERA = "top"
LIDAR_PREFIX = "lidar_"


def build_spec(
    world: World,
    robot: RobotSpec,
    *,
    physics_dt: float,
    goal_radius: float,
    render: RenderSize,
) -> mujoco.MjSpec:
    """The world + robot as an (uncompiled) ``MjSpec``; see :func:`build_model`."""
    # The robot's MJCF is the base document and the world is added around it (no attach, so joint,
    # site and sensor names stay exactly as in the robot file).
    spec = _load_robot_spec(robot)
    spec.modelname = f"{world.name}_{robot.name}"
    spec.option.timestep = physics_dt
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    spec.option.gravity = [0.0, 0.0, -GRAVITY]
    spec.visual.global_.offwidth = max(640, render.width)
    spec.visual.global_.offheight = max(480, render.height)
    spec.visual.headlight.ambient = [0.6, 0.6, 0.6]
    spec.visual.headlight.diffuse = [0.4, 0.4, 0.4]

    xmin, ymin, xmax, ymax = world.bounds
    cx, cy = (xmin + xmax) / 2.0, (ymin + ymax) / 2.0
    wb = spec.worldbody

    # Floor is visual only: the base moves on planar joints, and horizontal lidar rays never hit it.
    wb.add_geom(
        name="floor",
        type=mujoco.mjtGeom.mjGEOM_PLANE,
        pos=[cx, cy, 0.0],
        size=[(xmax - xmin) / 2.0 + 0.5, (ymax - ymin) / 2.0 + 0.5, 0.1],
        rgba=[0.92, 0.92, 0.88, 1.0],
        contype=0,
        conaffinity=0,
    )
    for i, wall in enumerate(world.walls):
        wx, wy = wall.center
        wb.add_geom(
            name=f"wall_{i}",
            type=mujoco.mjtGeom.mjGEOM_BOX,
            pos=[wx, wy, world.wall_height / 2.0],
            quat=_yaw_quat(wall.yaw),
            size=[wall.length / 2.0 + wall.thickness / 2.0, wall.thickness / 2.0, world.wall_height / 2.0],
            rgba=[0.35, 0.35, 0.4, 1.0],
            contype=1,
            conaffinity=1,
        )
    # Markers are sites, not geoms: sites take part in neither contacts nor lidar rays.
    wb.add_site(
        name=GOAL_SITE,
        type=mujoco.mjtGeom.mjGEOM_CYLINDER,
        pos=[cx, cy, 0.005],
        size=[goal_radius, 0.005, 0.0],
        rgba=[0.1, 0.8, 0.2, 0.8],
    )
    for lm in world.landmarks:
        wb.add_site(
            name=f"landmark_{lm.name}",
            type=mujoco.mjtGeom.mjGEOM_CYLINDER,
            pos=[lm.position[0], lm.position[1], 0.003],
            size=[0.08, 0.003, 0.0],
            rgba=[0.2, 0.4, 0.9, 0.8],
        )
    view = TopView.of(world, render)
    wb.add_camera(
        name=TOP_CAMERA,
        pos=[*view.center, 10.0],
        proj=mujoco.mjtProjection.mjPROJ_ORTHOGRAPHIC,
        fovy=view.extent,
    )
    wb.add_light(name="sun", pos=[cx, cy, 8.0], dir=[0.0, 0.0, -1.0], diffuse=[0.5, 0.5, 0.5])

    _add_drive_and_lidar(spec, robot)
    return spec


def build_model(
    world: World,
    robot: RobotSpec,
    *,
    physics_dt: float = 0.01,
    goal_radius: float = 0.25,
    render: RenderSize | None = None,
) -> mujoco.MjModel:
    """Compile the world + robot into an ``MjModel``."""
    spec = build_spec(
        world,
        robot,
        physics_dt=physics_dt,
        goal_radius=goal_radius,
        render=render or render_size_for(world, 480),
    )
    return spec.compile()


def _load_robot_spec(robot: RobotSpec) -> mujoco.MjSpec:
    spec = mujoco.MjSpec.from_file(str(robot.mjcf))
    if spec.body(robot.base_body) is None:
        raise ValueError(f"{robot.mjcf}: no body named {robot.base_body!r} (robot spec base_body)")
    if spec.geom(robot.chassis_geom) is None:
        raise ValueError(f"{robot.mjcf}: no geom named {robot.chassis_geom!r} (robot spec chassis_geom)")
    if spec.site("base_link") is None:
        raise ValueError(f"{robot.mjcf}: needs a site named 'base_link' at the base origin (drive transmission)")
    return spec


def _add_drive_and_lidar(spec: mujoco.MjSpec, robot: RobotSpec) -> None:
    body = spec.body(robot.base_body)

    lidar = robot.lidar
    for k, angle in enumerate(lidar.angles()):
        # A rangefinder measures along its site's +z axis: tilt z onto the horizontal ray direction.
        quat = np.zeros(4)
        mujoco.mju_mulQuat(quat, _yaw_quat(angle), np.array([math.cos(math.pi / 4), 0.0, math.sin(math.pi / 4), 0.0]))
        body.add_site(
            name=f"{LIDAR_PREFIX}{k}", pos=[0.0, 0.0, lidar.height], quat=quat, size=[0.005, 0.0, 0.0], group=4
        )
        spec.add_sensor(
            name=f"{LIDAR_PREFIX}{k}",
            type=mujoco.mjtSensor.mjSENS_RANGEFINDER,
            objtype=mujoco.mjtObj.mjOBJ_SITE,
            objname=f"{LIDAR_PREFIX}{k}",
            intprm=[1, 0, 0],  # report distance
            cutoff=lidar.max_range,
        )

    lim = robot.limits
    inertia_z = 0.5 * robot.mass * robot.radius**2
    base_site = "base_link"
    spec.add_actuator(
        name="drive_linear",
        trntype=mujoco.mjtTrn.mjTRN_SITE,
        target=base_site,
        gear=[1, 0, 0, 0, 0, 0],
        **_velocity_servo(
            robot.mass / DRIVE_TIME_CONSTANT, lim.max_linear_velocity, robot.mass * lim.max_linear_acceleration
        ),
    )
    spec.add_actuator(
        name="drive_lateral_grip",
        trntype=mujoco.mjtTrn.mjTRN_SITE,
        target=base_site,
        gear=[0, 1, 0, 0, 0, 0],
        **_velocity_servo(robot.mass / (2 * spec.option.timestep), None, LATERAL_FRICTION * robot.mass * GRAVITY),
    )
    spec.add_actuator(
        name="drive_angular",
        trntype=mujoco.mjtTrn.mjTRN_JOINT,
        target="base_yaw",
        gear=[1, 0, 0, 0, 0, 0],
        **_velocity_servo(
            inertia_z / DRIVE_TIME_CONSTANT, lim.max_angular_velocity, inertia_z * lim.max_angular_acceleration
        ),
    )


def _velocity_servo(kv: float, max_speed: float | None, max_force: float) -> dict[str, object]:
    """Parameters of a velocity servo ``force = kv * (ctrl - velocity)`` clamped to +-max_force.

    With ``max_speed=None`` the servo ignores its control and holds velocity 0 (a damper): that is the
    lateral grip of the wheels, which slides only once the sideways force exceeds ``max_force``.
    """
    params: dict[str, object] = {
        "dyntype": mujoco.mjtDyn.mjDYN_NONE,
        "gaintype": mujoco.mjtGain.mjGAIN_FIXED,
        "biastype": mujoco.mjtBias.mjBIAS_AFFINE,
        "gainprm": [kv if max_speed is not None else 0.0] + [0.0] * 9,
        "biasprm": [0.0, 0.0, -kv] + [0.0] * 7,
        "forcelimited": 1,
        "forcerange": [-max_force, max_force],
    }
    if max_speed is not None:
        params.update(ctrllimited=1, ctrlrange=[-max_speed, max_speed])
    else:
        params.update(ctrllimited=0)
    return params


def _yaw_quat(yaw: float) -> list[float]:
    return [math.cos(yaw / 2.0), 0.0, 0.0, math.sin(yaw / 2.0)]
