"""``hrl/PandaTabletop-v0``: goal-conditioned manipulation with a Franka Panda, as a Gymnasium environment.

The contract is panda-gym's and Gymnasium-Robotics Fetch's, so SB3's HER and published settings apply
unchanged: ``Dict(observation, achieved_goal, desired_goal)``; actions are TCP displacements in [-1, 1]
scaled by 0.05 m (plus a gripper command that opens or closes the fingers by up to 0.2 × its value per
step, unless the gripper is blocked); 25 Hz control; sparse reward -1 / 0 with success at 0.05 m
(vectorised ``compute_reward``), ``info["is_success"]`` from the same threshold.

Goal modes: ``reach`` (TCP to a point), ``push`` (an object to a point on the table), ``pick_place`` (an
object to a 3-D point, half of them in the air), ``place_on`` (an object on top of another). Goals are
set with ``reset(options={"goal": ...})`` or ``set_goal(goal, object=...)``; the goal object is the scene's
first object unless ``object=`` names another. An object that leaves the table (the goal object or any other)
ends the episode with ``info["failure"] = "object_left_table"`` and ``info["object"]`` its name.

The observation holds the robot and the goal object only (not the other objects), so a skill learned on
``single_cube`` runs unchanged in a scene with more objects.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from robots.arm import ArmSpec, load_arm
from robots.kinematics import KinematicChain, solve_ik
from sim.tabletop.physics import CAMERAS, PHYSICS_DT, CameraImage, TabletopPhysics, make_physics
from sim.tabletop.scene import TabletopScene, load_scene

GOAL_MODES = ("reach", "push", "pick_place", "place_on")
#: TCP displacement (m) of a full action, and the finger width change (m) of a full gripper command.
TCP_STEP, GRIPPER_STEP = 0.05, 0.2
#: Highest TCP target (m above the table) and of pick-and-place goals.
MAX_TCP_HEIGHT, MAX_GOAL_HEIGHT = 0.5, 0.2
#: An object this far below the table top, or beyond its edge, has left the table.
FALLEN_BELOW = 0.05
IMAGE_KINDS = ("rgb", "depth")


class PandaTabletopEnv(gym.Env[dict[str, np.ndarray], np.ndarray]):
    """A Panda arm over a table with the objects and places of a scene (sim/scenes/).

    ``backend`` names a registered simulator (``mujoco``, ``pybullet``), or is a :class:`TabletopPhysics` instance
    built by the caller for this scene and arm at this control rate (``hrl.ros.arm_physics.RosArmPhysics``: the same
    env on a ROS 2 arm).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"], "render_fps": 25}

    def __init__(
        self,
        scene: str | Path | TabletopScene = "single_cube",
        arm: str | Path | ArmSpec = "panda",
        backend: str | TabletopPhysics = "mujoco",
        *,
        goal_mode: str = "reach",
        object: str | None = None,
        block_gripper: bool | None = None,
        control_hz: float = 25.0,
        max_steps: int = 50,
        distance_threshold: float = 0.05,
        reward_type: str = "sparse",
        cameras: list[str] | tuple[str, ...] = (),
        image_size: int = 84,
        render_mode: str | None = None,
        render_size: int = 240,
    ) -> None:
        self.scene = scene if isinstance(scene, TabletopScene) else load_scene(scene)
        self.arm = arm if isinstance(arm, ArmSpec) else load_arm(arm)
        if goal_mode not in GOAL_MODES:
            raise ValueError(f"goal_mode must be one of {', '.join(GOAL_MODES)}, got {goal_mode!r}")
        if goal_mode != "reach" and not self.scene.objects:
            raise ValueError(f"goal_mode={goal_mode!r} needs an object, but scene {self.scene.name!r} has none")
        if reward_type not in ("sparse", "dense"):
            raise ValueError(f"reward_type must be 'sparse' or 'dense', got {reward_type!r}")
        for name, value in (("control_hz", control_hz), ("distance_threshold", distance_threshold)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        for name, value, low in (
            ("max_steps", max_steps, 1),
            ("image_size", image_size, 16),
            ("render_size", render_size, 16),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        substeps = round(1.0 / (control_hz * PHYSICS_DT))
        if substeps < 1 or not math.isclose(substeps * PHYSICS_DT * control_hz, 1.0, rel_tol=1e-6):
            raise ValueError(
                f"control_hz must divide {1 / PHYSICS_DT:.0f} Hz (physics step {PHYSICS_DT} s), got {control_hz}"
            )
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or one of {self.metadata['render_modes']}, got {render_mode!r}")
        self.camera_keys = [self._check_camera_key(k) for k in cameras]
        self.goal_mode = goal_mode
        self.object = (
            self._check_object(object)
            if object is not None
            else (self.scene.objects[0].name if self.scene.objects else None)
        )
        self.block_gripper = goal_mode in ("reach", "push") if block_gripper is None else bool(block_gripper)
        self.control_hz, self.max_steps = float(control_hz), max_steps
        self.distance_threshold, self.reward_type = float(distance_threshold), reward_type
        self.image_size, self.render_mode, self.render_size = image_size, render_mode, render_size
        if isinstance(backend, str):
            self.backend = backend
            self.physics = make_physics(backend, scene=self.scene, arm=self.arm, substeps=substeps)
        else:
            self.backend = type(backend).__name__
            self.physics = self._check_physics(backend, substeps)
        self.chain = KinematicChain(self.arm.urdf, self.arm.base_link, self.arm.tcp_link)
        if self.chain.joint_names != self.arm.joint_names:
            raise ValueError(
                f"{self.arm.urdf}: chain joints {self.chain.joint_names} differ from the spec's {self.arm.joint_names}"
            )
        self._base = np.asarray(self.scene.robot_base, dtype=float)
        self._lower = np.array([j.lower for j in self.arm.joints])
        self._upper = np.array([j.upper for j in self.arm.joints])
        self._max_joint_step = np.array([j.velocity for j in self.arm.joints]) / self.control_hz
        t = self.scene.table
        self._table_lo = np.array(t.center) - np.array(t.size) / 2
        self._table_hi = np.array(t.center) + np.array(t.size) / 2
        n_act = 3 if self.block_gripper else 4
        self.action_space = gym.spaces.Box(-1.0, 1.0, (n_act,), np.float32)
        self._goal = np.zeros(3)
        # Cubes: a quarter turn about any axis gives the same cube, so the observation shows the rotation nearest
        # to upright (a cube tipped over by a grasp then looks like the cubes a skill learned on).
        self._cubes = {o.name for o in self.scene.objects if o.shape == "box" and len(set(o.size)) == 1}
        self._object_names = tuple(o.name for o in self.scene.objects)
        self._steps = 0
        self._fk: tuple[np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None
        obs = self._observe()
        spaces = {
            k: gym.spaces.Box(-np.inf, np.inf, v.shape, np.float32) for k, v in obs.items() if v.dtype != np.uint8
        }
        spaces.update({k: gym.spaces.Box(0, 255, v.shape, np.uint8) for k, v in obs.items() if v.dtype == np.uint8})
        self.observation_space = gym.spaces.Dict({k: spaces[k] for k in obs})

    # ---- validation helpers -------------------------------------------------------------------------
    def _check_camera_key(self, key: Any) -> str:
        parts = str(key).rsplit("_", 1)
        if len(parts) != 2 or parts[0] not in CAMERAS or parts[1] not in IMAGE_KINDS:
            options = [f"{c}_{k}" for c in CAMERAS for k in IMAGE_KINDS]
            raise ValueError(f"unknown camera observation {key!r}; available: {', '.join(options)}")
        return str(key)

    def _check_physics(self, physics: Any, substeps: int) -> TabletopPhysics:
        """A caller's physics instance: it implements the interface, for this arm, at this control rate."""
        needed = ("reset", "step", "joints", "finger_width", "object_state", "set_goal_marker", "render", "close")
        missing = [m for m in needed if not callable(getattr(physics, m, None))]
        if missing:
            raise TypeError(
                f"backend must be a backend name or a TabletopPhysics instance; {type(physics).__name__} lacks "
                f"{', '.join(missing)}"
            )
        arm = getattr(physics, "arm", None)
        if arm is None or list(arm.joint_names) != self.arm.joint_names:
            raise ValueError(f"the physics instance is not built for arm {self.arm.name!r} (its joints differ)")
        if getattr(physics, "substeps", None) != substeps:
            raise ValueError(
                f"the physics instance's control step is {getattr(physics, 'substeps', None)} substeps of "
                f"{PHYSICS_DT} s, the env's {substeps} (control_hz {self.control_hz}): build it for 1 / control_hz s"
            )
        return physics

    def _check_object(self, name: Any) -> str:
        names = [o.name for o in self.scene.objects]
        if name not in names:
            raise ValueError(
                f"scene {self.scene.name!r} has no object {name!r}; its objects: {', '.join(names) or 'none'}"
            )
        return str(name)

    # ---- state ----------------------------------------------------------------------------------------
    def tcp(self) -> tuple[np.ndarray, np.ndarray]:
        """TCP position (3,) and velocity (3,) from the joint state through the shared kinematics."""
        q, dq = self.physics.joints()
        _, (p, _, J) = self._forward(q)
        return p, J[:3] @ dq

    def _forward(self, q: np.ndarray) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """``chain.forward`` of the current joints, computed once per control step (observation and IK share it)."""
        if self._fk is None or not (self._fk[0] == q).all():  # both (n,): np.array_equal's checks cost more
            self._fk = (q, self.chain.forward(q, self._base))
        return self._fk

    @property
    def goal(self) -> np.ndarray:
        """The desired goal (a copy): the TCP target in ``reach`` mode, the goal object's target otherwise."""
        return self._goal.copy()

    def observation_as(
        self, goal_mode: str, block_gripper: bool, object: str | None = None, goal: Any = None
    ) -> dict[str, np.ndarray]:
        """The observation an env of ``goal_mode`` (with or without a blocked gripper) would give in the current
        state: how the hierarchy runs a skill trained in another mode (a push skill in a pick-and-place scene).
        ``object`` and ``goal`` ask what it would be for another goal object and goal (a planner weighing
        candidate subgoals with the skill's critic), without changing the env's own."""
        if goal_mode not in GOAL_MODES:
            raise ValueError(f"goal_mode must be one of {', '.join(GOAL_MODES)}, got {goal_mode!r}")
        kept = self.object, self._goal
        try:
            if object is not None:
                self.object = self._check_object(object)
            if goal is not None:
                self._goal = np.asarray(goal, dtype=float)
            return self._observe(goal_mode, block_gripper, images=False)
        finally:
            self.object, self._goal = kept

    def _observe(
        self, goal_mode: str | None = None, block_gripper: bool | None = None, images: bool = True
    ) -> dict[str, np.ndarray]:
        goal_mode = self.goal_mode if goal_mode is None else goal_mode
        block_gripper = self.block_gripper if block_gripper is None else block_gripper
        p, v = self.tcp()
        parts = [p, v]
        achieved = p
        if not block_gripper:
            parts.append([self.physics.finger_width()])
        if goal_mode != "reach":
            s = self.physics.object_state(self.object)
            achieved = s.position
            w, x, y, z = s.quaternion
            # The object's rotation as its x and z axes (continuous, unlike Euler angles), and where it is
            # from the TCP (what a push or a grasp must close).
            rx = [1 - 2 * (y * y + z * z), 2 * (x * y + w * z), 2 * (x * z - w * y)]
            rz = [2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y)]
            if self.object in self._cubes:
                rx, rz = _canonical_cube_axes(rx, rz)
            parts += [s.position, s.position - p, rx, rz, s.linear_velocity, s.angular_velocity]
        obs = {
            "observation": np.concatenate([np.asarray(a, dtype=np.float32).ravel() for a in parts]),
            "achieved_goal": achieved.astype(np.float32),
            "desired_goal": self._goal.astype(np.float32),
        }
        for key in self.camera_keys if images else ():
            camera, kind = key.rsplit("_", 1)
            image = self.physics.render(camera, self.image_size, self.image_size, depth=kind == "depth")
            obs[key] = image if kind == "rgb" else image[:, :, None].astype(np.float32)
        return obs

    # ---- goals ----------------------------------------------------------------------------------------
    def sample_goal(self) -> np.ndarray:
        """A goal of the current mode, from the env's generator (the scene's workspace; heights by mode)."""
        rng = self.np_random
        x, y, _ = self.scene.sample_point(rng)
        if self.goal_mode == "reach":
            return np.array([x, y, rng.uniform(0.0, 0.3)])
        half = self.scene.object(self.object).size[2] / 2
        if self.goal_mode == "pick_place" and rng.random() < 0.5:
            return np.array([x, y, half + rng.uniform(0.0, MAX_GOAL_HEIGHT)])
        if self.goal_mode == "place_on":
            others = [o.name for o in self.scene.objects if o.name != self.object]
            if not others:
                raise ValueError(f"goal_mode='place_on' needs a second object, scene {self.scene.name!r} has one")
            other = others[int(rng.integers(len(others)))]
            below = self.physics.object_state(other).position
            return np.array([below[0], below[1], below[2] + self.scene.object(other).size[2] / 2 + half])
        return np.array([x, y, half])

    def set_goal(self, goal: Any, object: str | None = None) -> dict[str, np.ndarray]:
        """Set the desired goal (a 3-D point; with ``object=`` also the object it is for) mid-episode."""
        g = np.asarray(goal, dtype=float)
        if g.shape != (3,) or not np.all(np.isfinite(g)):
            raise ValueError(f"goal must be 3 finite numbers (x, y, z in metres), got {goal!r}")
        if object is not None:
            if self.goal_mode == "reach":
                raise ValueError("goal_mode='reach' moves the TCP; object= applies to the object modes")
            self.object = self._check_object(object)
        self._goal = g
        self.physics.set_goal_marker(g)
        return self._observe()

    # ---- Gymnasium API --------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = dict(options or {})
        unknown = set(options) - {"goal", "object", "layout"}
        if unknown:
            raise ValueError(f"unknown reset options {sorted(unknown)}; allowed: goal, object, layout")
        if options.get("object") is not None:
            self.object = self._check_object(options["object"])
        layout = options.get("layout") or self.scene.sample_layout(self.np_random)
        width = 0.0 if self.block_gripper else self.arm.gripper.max_width
        self.physics.reset(np.array(self.arm.home), width, layout)
        self._steps = 0
        goal = options.get("goal")
        obs = self.set_goal(self.sample_goal() if goal is None else goal)
        return obs, {"is_success": self._success(obs)}

    def step(self, action: Any):
        a = np.asarray(action, dtype=float).ravel()
        if a.shape != self.action_space.shape:
            raise ValueError(f"action must have shape {self.action_space.shape}, got {a.shape}")
        # Python floats from here on: a few scalars check and clamp faster than NumPy calls (this runs every step).
        a = a.tolist()
        if not all(map(math.isfinite, a)):
            raise ValueError(f"action must be finite, got {a}")
        a = [min(max(v, -1.0), 1.0) for v in a]
        q, _ = self.physics.joints()
        q, fk = self._forward(q)
        (x, y, z), (ax, ay, az) = fk[0].tolist(), a[:3]
        x, y, z = x + ax * TCP_STEP, y + ay * TCP_STEP, z + az * TCP_STEP
        (lx, ly), (hx, hy) = self._table_lo.tolist(), self._table_hi.tolist()
        target = np.array((min(max(x, lx), hx), min(max(y, ly), hy), min(max(z, 0.0), MAX_TCP_HEIGHT)))
        # Two iterations leave at most ~1 mm of a 5 cm step; the next step starts from the measured TCP, so the
        # error does not add up (and the servo's own lag is larger).
        q_target = solve_ik(
            self.chain,
            q,
            target,
            self._lower,
            self._upper,
            base=self._base,
            iterations=2,
            first=fk if ((q >= self._lower) & (q <= self._upper)).all() else None,
        )
        # No joint is asked to move faster than its rated speed (the spec's, as a real Panda's controller
        # limits it): the servos then track instead of saturating and overshooting, alike in both engines.
        # The whole joint step is scaled down, so the TCP still moves in the commanded direction.
        dq = q_target - q
        over = float((np.abs(dq) / self._max_joint_step).max())
        if over > 1.0:
            q_target = q + dq / over
        if self.block_gripper:
            width = 0.0
        else:
            width = min(max(self.physics.finger_width() + a[3] * GRIPPER_STEP, 0.0), self.arm.gripper.max_width)
        self.physics.step(q_target, width)
        self._steps += 1
        obs = self._observe()
        info: dict[str, Any] = {"is_success": self._success(obs)}
        gone = self._object_off_table(obs)
        if gone is not None:
            info["failure"], info["object"] = "object_left_table", gone
        terminated = gone is not None
        reward = float(self.compute_reward(obs["achieved_goal"], obs["desired_goal"], info))
        return obs, reward, terminated, self._steps >= self.max_steps, info

    def expert_action(self, rng: np.random.Generator | None = None, noise: float = 0.0) -> np.ndarray:
        """The scripted expert's action for the current state (sim/tabletop/expert.py): demonstrations for
        ``hrl-train``'s ``demos``, and a yardstick for learned skills."""
        from sim.tabletop.expert import expert_action

        return expert_action(self, rng, noise)

    def _object_off_table(self, obs: dict[str, np.ndarray]) -> str | None:
        """The first object (the goal object first) that has left the table, if any: a distractor knocked off
        ends the episode as the goal object does."""
        seen = None if self.goal_mode == "reach" else self.object  # its position is the observation's
        if seen is not None and self._left_table(obs["achieved_goal"]):
            return seen
        for name in self._object_names:
            if name != seen and self._left_table(self.physics.object_state(name).position):
                return name
        return None

    def _left_table(self, position: np.ndarray) -> bool:
        return bool(
            position[2] < -FALLEN_BELOW
            or np.any(position[:2] < self._table_lo)
            or np.any(position[:2] > self._table_hi)
        )

    def _success(self, obs: dict[str, np.ndarray]) -> bool:
        return bool(np.linalg.norm(obs["achieved_goal"] - obs["desired_goal"]) < self.distance_threshold)

    def compute_reward(self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any) -> np.ndarray:
        """-1 / 0 (sparse) or minus the distance (dense), for one goal or a batch (HER relabels with it)."""
        d = np.linalg.norm(np.asarray(achieved_goal) - np.asarray(desired_goal), axis=-1)
        if self.reward_type == "sparse":
            return -(d >= self.distance_threshold).astype(np.float32)
        return -d.astype(np.float32)

    def camera_image(self, camera: str = "front", size: int = 128, depth: bool = True) -> CameraImage:
        """What ``camera`` sees now, without the goal marker (a robot has none), with the pinhole model to project
        world points and lift pixels (:class:`sim.tabletop.physics.CameraImage`): the vision planners' input."""
        if camera not in CAMERAS:
            raise ValueError(f"unknown camera {camera!r}; available: {', '.join(CAMERAS)}")
        if not isinstance(size, int) or size < 16:
            raise ValueError(f"camera image size must be an integer >= 16 pixels, got {size!r}")
        self.physics.set_goal_marker(None)
        try:
            rgb = self.physics.render(camera, size, size)
            metres = self.physics.render(camera, size, size, depth=True) if depth else None
        finally:
            self.physics.set_goal_marker(self._goal)
        return CameraImage(rgb, metres, CAMERAS[camera])

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array":
            return None
        return self.physics.render("front", self.render_size, self.render_size)

    def close(self) -> None:
        self.physics.close()


def _cube_symmetries() -> np.ndarray:
    """The 24 rotations that map a cube onto itself (signed permutation matrices of determinant +1)."""
    import itertools

    out = []
    for perm in itertools.permutations(range(3)):
        for signs in itertools.product((1, -1), repeat=3):
            m = np.zeros((3, 3))
            for row, (col, sign) in enumerate(zip(perm, signs, strict=True)):
                m[row, col] = sign
            if np.linalg.det(m) > 0:
                out.append(m)
    return np.array(out)


_CUBE_SYMMETRIES = _cube_symmetries()
#: Row k: symmetry k transposed and flattened, so that ``_SYMMETRY_TRACES @ r.ravel()`` is trace(r S_k) for every k.
_SYMMETRY_TRACES = np.ascontiguousarray(_CUBE_SYMMETRIES.transpose(0, 2, 1).reshape(len(_CUBE_SYMMETRIES), 9))


def _canonical_cube_axes(rx: Sequence[float], rz: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """The x and z axes of the cube's rotation composed with the symmetry that brings it nearest to upright
    (the largest trace of the product). On Python floats and one matrix-vector product: it runs every step of a
    cube task, and np.cross and einsum cost 8 % of a PyBullet push step."""
    x0, x1, x2 = (float(v) for v in rx)
    z0, z1, z2 = (float(v) for v in rz)
    r = np.array([[x0, z1 * x2 - z2 * x1, z0], [x1, z2 * x0 - z0 * x2, z1], [x2, z0 * x1 - z1 * x0, z2]])
    c = r @ _CUBE_SYMMETRIES[int(np.argmax(_SYMMETRY_TRACES @ r.ravel()))]
    return c[:, 0], c[:, 2]
