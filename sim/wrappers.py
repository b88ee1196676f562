"""Sim-to-real wrappers for the rover and the tabletop (every backend): randomized dynamics, noise, delays.

A policy trained on a perfect simulator meets a robot whose mass, tyres and motors differ, whose lidar
is noisy and drops returns, whose odometry drifts, and whose commands arrive late and are smoothed; an arm
meets objects heavier or more slippery than modelled, a vision system's errors, and cameras and lights that
are not where they were. These wrappers put those effects into simulation, for training (robustness) and
for evaluation (how much does a policy lose?).

For any env with a Box action (``embodiment = None``):

* :class:`ActionLatency`: commands applied ``steps`` control periods late;
* :class:`ActionRateLimit`: commands limited in how fast they change (a velocity smoother), in the units of
  the env's action (the rover's and the tabletop's are known).

For the rover (``hrl/RoverNav-*``):

* :class:`DomainRandomization`: per-episode mass, friction, motor gain, lidar noise and control latency,
  sampled from ranges, reported in ``info["domain"]``;
* :class:`SensorNoise`: Gaussian lidar noise, ray dropout, odometry drift.

For the tabletop (``hrl/PandaTabletop-*``):

* :class:`ObjectDynamics`: per-episode mass and friction of every object, reported in ``info["object_dynamics"]``;
* :class:`ObservationNoise`: Gaussian noise on the observed TCP and object positions and on images;
* :class:`VisualRandomization`: per-episode camera pose jitter and light intensity and direction.

A wrapper made for one embodiment refuses the other's env, naming the wrapper that applies there
(``sensor_noise`` on the tabletop: use ``observation_noise``).

They are chosen by name (``gym.make("hrl/RoverNav-v0", wrappers=[{"name": "sensor_noise", "lidar_std":
0.02}])``; Hydra: ``env.wrappers=[...]`` or ``env/wrappers=<preset>``). Wrappers draw from their own random
generator, seeded from ``reset(seed=...)``: the same seed gives the same noise, and adding a wrapper does not
change the goals and starts the env samples.
"""

from __future__ import annotations

import inspect
import math
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from robots._fields import did_you_mean
from sim.navigation.physics import Dynamics

#: Index of the first lidar value in ``obs["observation"]`` (layout: sim.navigation.task.NavTask).
LIDAR_START = 6

#: Embodiment -> its env classes ("module:Class"; subclasses count), what the wrappers made for one embodiment
#: check an env against (by name, so neither env module is imported here).
EMBODIMENTS: dict[str, tuple[str, ...]] = {
    "rover": ("sim.navigation.env:RoverNavEnv",),
    "tabletop": ("sim.tabletop.env:PandaTabletopEnv",),
}
#: How users meet each embodiment: its env ids.
EMBODIMENT_ENVS = {"rover": "hrl/RoverNav-*", "tabletop": "hrl/PandaTabletop-*"}


def embodiment_of(env: gym.Env) -> str | None:
    """The embodiment (a key of :data:`EMBODIMENTS`) of a possibly wrapped env; None for an env not ours."""
    classes = {f"{c.__module__}:{c.__qualname__}" for c in type(env.unwrapped).__mro__}
    return next((kind for kind, names in EMBODIMENTS.items() if classes.intersection(names)), None)


class _ForEmbodiment:
    """A wrapper for one embodiment (``None``: any env with a Box action); ``instead`` names, per other
    embodiment, the wrapper that does the same job there (for the error)."""

    embodiment: ClassVar[str | None] = None
    instead: ClassVar[dict[str, str]] = {}

    @classmethod
    def applies_to(cls, kind: str | None) -> bool:
        """Whether this wrapper works on an env of embodiment ``kind`` (None: an env not ours)."""
        return cls.embodiment in (None, kind)

    @classmethod
    def _check_embodiment(cls, env: gym.Env) -> None:
        kind = embodiment_of(env)
        if cls.applies_to(kind):
            return
        name = next(n for n, w in WRAPPERS.items() if w is cls)
        what = f"the {kind}'s {type(env.unwrapped).__name__}" if kind else f"{type(env.unwrapped).__name__}, not ours"
        usable = [n for n, w in WRAPPERS.items() if w.applies_to(kind)]
        hint = f"use {cls.instead[kind]} instead; " if kind in cls.instead else ""
        raise TypeError(
            f"{name} is for the {cls.embodiment} ({EMBODIMENT_ENVS[cls.embodiment]}), and this env is {what}: "
            f"{hint}wrappers that apply to it: {', '.join(usable)}"
        )


class _Seeded:
    """A wrapper-owned generator, reseeded by ``reset(seed=...)`` (salted so wrappers draw differently)."""

    salt = 0

    def _reseed(self, seed: int | None) -> None:
        if seed is not None:
            self.rng = np.random.default_rng([seed, self.salt])
        elif not hasattr(self, "rng"):
            self.rng = np.random.default_rng()


class _Noisy(_Seeded):
    """Wrappers that pass observations through a :class:`_Noise` (``self.noise``): a new goal set mid-episode
    is observed through it too."""

    noise: _Noise

    def set_goal(self, goal: Any, **kwargs: Any) -> dict[str, np.ndarray]:
        """The env's ``set_goal`` (a new subgoal mid-episode), observed through this wrapper's noise."""
        return self.noise.apply(set_goal(self.env, goal, **kwargs), self.rng)  # type: ignore[attr-defined]


class _Noise:
    """Lidar noise, dropout and odometry drift applied to one observation dict (shared by the wrappers)."""

    def __init__(self, env: gym.Env, lidar_std: float, dropout: float, odom_xy_std: float, odom_yaw_std: float):
        for name, value in (("lidar_std", lidar_std), ("odom_xy_std", odom_xy_std), ("odom_yaw_std", odom_yaw_std)):
            _check_number(name, value, minimum=0.0)
        _check_number("dropout", dropout, minimum=0.0, maximum=1.0)
        u = env.unwrapped
        self.max_range = u.robot.lidar.max_range
        self.bounds = u.world.bounds
        self.lidar_std, self.dropout = float(lidar_std), float(dropout)
        self.odom_xy_std, self.odom_yaw_std = float(odom_xy_std), float(odom_yaw_std)
        self.error = np.zeros(3)  # odometry error: x, y (m), yaw (rad)
        self._last: np.ndarray | None = None

    def reset(self) -> None:
        self.error[:] = 0.0
        self._last = None

    def apply(self, obs: dict[str, np.ndarray], rng: np.random.Generator) -> dict[str, np.ndarray]:
        vec = obs["observation"].copy()
        ranges = vec[LIDAR_START:]
        if self.lidar_std > 0:
            ranges += rng.normal(0.0, self.lidar_std / self.max_range, ranges.shape).astype(np.float32)
        if self.dropout > 0:
            # A dropped return reads as no return: max range (what hrl.ros.core.adapt_scan makes of inf).
            ranges[rng.random(ranges.shape) < self.dropout] = 1.0
        np.clip(ranges, 0.0, 1.0, out=ranges)
        if self.odom_xy_std > 0 or self.odom_yaw_std > 0:
            self._drift(vec, rng)
        out = dict(obs)
        out["observation"] = vec
        out["achieved_goal"] = vec[:2].copy()
        return out

    def _drift(self, vec: np.ndarray, rng: np.random.Generator) -> None:
        """Random-walk odometry error that grows with the distance driven and the angle turned."""
        true = np.array([vec[0], vec[1], math.atan2(vec[3], vec[2])], dtype=np.float64)
        if self._last is not None:
            moved = math.dist(true[:2], self._last[:2])
            turned = abs(math.remainder(true[2] - self._last[2], 2 * math.pi))
            self.error[:2] += rng.normal(0.0, self.odom_xy_std * moved, 2)
            self.error[2] += rng.normal(0.0, self.odom_yaw_std * (turned + moved))
        self._last = true
        xmin, ymin, xmax, ymax = self.bounds
        vec[0] = min(max(true[0] + self.error[0], xmin), xmax)
        vec[1] = min(max(true[1] + self.error[1], ymin), ymax)
        yaw = true[2] + self.error[2]
        vec[2], vec[3] = math.cos(yaw), math.sin(yaw)


class _DelayLine:
    """Commands out ``steps`` control periods after they went in (zeros at first, like a robot at rest)."""

    def __init__(self, steps: int, shape: tuple[int, ...]) -> None:
        _check_integer("steps", steps)
        self.steps, self.shape = steps, shape
        self.queue: deque[np.ndarray] = deque()
        self.reset()

    def reset(self, steps: int | None = None) -> None:
        if steps is not None:
            self.steps = steps
        self.queue = deque(np.zeros(self.shape) for _ in range(self.steps))

    def __call__(self, action: np.ndarray) -> np.ndarray:
        self.queue.append(np.asarray(action, dtype=np.float64).copy())
        return self.queue.popleft()


class SensorNoise(_ForEmbodiment, _Noisy, gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Gaussian lidar noise (``lidar_std``, m), ray dropout (probability per ray and step; a dropped ray
    reads max range), and odometry drift: a random-walk error on the observed pose; each step adds Gaussian
    error of std ``odom_xy_std`` x the distance moved in that step (m) and ``odom_yaw_std`` x (angle turned +
    distance moved) (rad), like ROS amcl's odometry model. Over a distance D in steps of length s the position
    error's std is ``odom_xy_std * sqrt(D * s)`` per axis (so it depends on the step length: 0.02 gives 4.5 mm
    after 1 m at 0.05 m per step), not ``odom_xy_std`` per metre.

    The observed pose (``observation[:4]``, ``achieved_goal``) drifts; ``info["is_success"]`` stays ground
    truth, and ``info["odometry_error"]`` is the current (x, y, yaw) error. The rover's; the tabletop's is
    :class:`ObservationNoise`.
    """

    embodiment = "rover"
    instead: ClassVar[dict[str, str]] = {"tabletop": "observation_noise (TCP, object positions, images)"}
    salt = 1

    def __init__(
        self,
        env: gym.Env,
        lidar_std: float = 0.02,
        dropout: float = 0.0,
        odom_xy_std: float = 0.0,
        odom_yaw_std: float = 0.0,
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(
            self, lidar_std=lidar_std, dropout=dropout, odom_xy_std=odom_xy_std, odom_yaw_std=odom_yaw_std
        )
        self._check_embodiment(env)
        gym.Wrapper.__init__(self, env)
        self.noise = _Noise(env, lidar_std, dropout, odom_xy_std, odom_yaw_std)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        obs, info = self.env.reset(seed=seed, options=options)
        self._reseed(seed)
        self.noise.reset()
        return self.noise.apply(obs, self.rng), info | {"odometry_error": self.noise.error.tolist()}

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        obs = self.noise.apply(obs, self.rng)
        return obs, reward, terminated, truncated, info | {"odometry_error": self.noise.error.tolist()}


class ActionLatency(_ForEmbodiment, _Seeded, gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Each command takes effect ``steps`` control periods after the policy sent it (zeros before: the rover
    stands, the arm holds its pose and its gripper). Any env with a Box action. ``steps`` as ``[low, high]``
    draws the delay per episode (uniform integers, seeded by ``reset(seed=...)``), for training a policy that
    copes with a loop whose latency varies; the episode's delay is ``info["latency_steps"]`` at reset."""

    salt = 6

    def __init__(self, env: gym.Env, steps: Any = 1) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, steps=steps)
        gym.Wrapper.__init__(self, env)
        self.range = _range("steps", steps, integer=True)
        self.delay = _DelayLine(self.range[0], _box_shape(env, "action_latency"))

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        low, high = self.range
        if low == high:  # a fixed delay draws nothing
            self.delay.reset()
        else:
            self._reseed(seed)
            self.delay.reset(int(self.rng.integers(low, high + 1)))
        obs, info = self.env.reset(seed=seed, options=options)
        return obs, info | {"latency_steps": self.delay.steps}

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        return self.env.step(self.delay(action))


class ActionRateLimit(_ForEmbodiment, gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Limits how fast the command changes, like a velocity smoother in front of a base: at most
    ``max_linear_acceleration`` (m/s^2) and ``max_angular_acceleration`` (rad/s^2) between control periods.

    On the rover, ``None`` takes the robot spec's limits. On the tabletop the action is a TCP velocity (a
    displacement per control period): ``max_linear_acceleration`` limits each axis of it and must be given (the
    arm spec has no Cartesian limit); there is no angular part, and the gripper command is not limited.
    """

    def __init__(
        self,
        env: gym.Env,
        max_linear_acceleration: float | None = None,
        max_angular_acceleration: float | None = None,
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(
            self, max_linear_acceleration=max_linear_acceleration, max_angular_acceleration=max_angular_acceleration
        )
        gym.Wrapper.__init__(self, env)
        kind = embodiment_of(env)
        if not self.applies_to(kind):
            raise TypeError(
                f"action_rate_limit knows the action units of {', '.join(_RATE_LIMITS)} "
                f"({', '.join(EMBODIMENT_ENVS[k] for k in _RATE_LIMITS)}), not those of {type(env.unwrapped).__name__}"
            )
        #: Largest change of each action component per control period, in the action's normalised units.
        self.max_delta = _RATE_LIMITS[kind](env.unwrapped, max_linear_acceleration, max_angular_acceleration)
        self.previous = np.zeros(self.max_delta.shape)

    @classmethod
    def applies_to(cls, kind: str | None) -> bool:
        """Only where the action's units are known (:data:`_RATE_LIMITS`)."""
        return kind in _RATE_LIMITS

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        self.previous = np.zeros(self.max_delta.shape)
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        target = np.clip(np.asarray(action, dtype=np.float64), -1.0, 1.0)
        self.previous = self.previous + np.clip(target - self.previous, -self.max_delta, self.max_delta)
        return self.env.step(self.previous.copy())


def _rover_rate_limits(u: Any, linear: float | None, angular: float | None) -> np.ndarray:
    """(v, w) per control period: accelerations over the robot spec's velocity limits (None: the spec's)."""
    lim = u.robot.limits
    lin = lim.max_linear_acceleration if linear is None else linear
    ang = lim.max_angular_acceleration if angular is None else angular
    _check_number("max_linear_acceleration", lin, minimum=0.0, strict=True)
    _check_number("max_angular_acceleration", ang, minimum=0.0, strict=True)
    dt = 1.0 / u.control_hz
    return np.array([lin * dt / lim.max_linear_velocity, ang * dt / lim.max_angular_velocity])


def _tabletop_rate_limits(u: Any, linear: float | None, angular: float | None) -> np.ndarray:
    """(dx, dy, dz[, gripper]): a full action moves the TCP by TCP_STEP per period, a velocity of
    TCP_STEP * control_hz, so an acceleration A changes it by A * dt^2 / TCP_STEP per period."""
    from sim.tabletop.env import TCP_STEP

    if linear is None:
        raise ValueError(
            "max_linear_acceleration (m/s^2, the TCP's) must be given on the tabletop: the arm spec has no "
            "Cartesian limit (libfranka documents 13 m/s^2 for a Panda)"
        )
    if angular is not None:
        raise ValueError(
            f"max_angular_acceleration={angular!r} does not apply on the tabletop: its actions move the TCP "
            "without turning it (and open or close the gripper); leave it unset"
        )
    _check_number("max_linear_acceleration", linear, minimum=0.0, strict=True)
    dt = 1.0 / u.control_hz
    limits = np.full(u.action_space.shape, np.inf)  # the gripper's own rate is GRIPPER_STEP per period
    limits[:3] = linear * dt * dt / TCP_STEP
    return limits


#: Embodiment -> the rate limits of its action (ActionRateLimit).
_RATE_LIMITS = {"rover": _rover_rate_limits, "tabletop": _tabletop_rate_limits}


class DomainRandomization(_ForEmbodiment, _Noisy, gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Per-episode physical and sensor parameters, each drawn uniformly from ``[low, high]`` (or fixed
    when given one number) at every reset:

    * ``mass_scale``: chassis mass and inertia (x nominal); ``friction``: tyre grip and wall friction;
      ``motor_gain``: achieved / commanded velocity (wheel radius error), applied by the physics backend;
    * ``lidar_std``: Gaussian lidar noise (m); ``latency_steps``: command delay (integer control periods).

    The episode's values are in ``info["domain"]`` at reset and at every step. The rover's; the tabletop's
    objects are randomised by :class:`ObjectDynamics`.
    """

    embodiment = "rover"
    instead: ClassVar[dict[str, str]] = {"tabletop": "object_dynamics (object mass and friction)"}
    salt = 2

    def __init__(
        self,
        env: gym.Env,
        mass_scale: Any = (0.8, 1.25),
        friction: Any = (0.5, 1.0),
        motor_gain: Any = (0.9, 1.1),
        lidar_std: Any = (0.0, 0.03),
        latency_steps: Any = (0, 2),
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(
            self,
            mass_scale=mass_scale,
            friction=friction,
            motor_gain=motor_gain,
            lidar_std=lidar_std,
            latency_steps=latency_steps,
        )
        self._check_embodiment(env)
        gym.Wrapper.__init__(self, env)
        self.ranges = {
            "mass_scale": _range("mass_scale", mass_scale, positive=True),
            "friction": _range("friction", friction, positive=True),
            "motor_gain": _range("motor_gain", motor_gain, positive=True),
            "lidar_std": _range("lidar_std", lidar_std),
            "latency_steps": _range("latency_steps", latency_steps, integer=True),
        }
        self.noise = _Noise(env, 0.0, 0.0, 0.0, 0.0)
        self.delay = _DelayLine(0, _box_shape(env, "domain_randomization"))
        self.domain: dict[str, float | int] = {}

    def sample(self) -> dict[str, float | int]:
        domain: dict[str, float | int] = {}
        for name, (low, high) in self.ranges.items():
            if name == "latency_steps":
                domain[name] = int(self.rng.integers(low, high + 1))
            else:
                domain[name] = float(self.rng.uniform(low, high))
        return domain

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        self._reseed(seed)
        self.domain = d = self.sample()
        self.env.unwrapped.physics.set_dynamics(
            Dynamics(mass_scale=d["mass_scale"], friction=d["friction"], motor_gain=d["motor_gain"])
        )
        self.noise.lidar_std = float(d["lidar_std"])
        self.noise.reset()
        self.delay.reset(int(d["latency_steps"]))
        obs, info = self.env.reset(seed=seed, options=options)
        return self.noise.apply(obs, self.rng), info | {"domain": dict(d)}

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(self.delay(action))
        return self.noise.apply(obs, self.rng), reward, terminated, truncated, info | {"domain": dict(self.domain)}


class ObjectDynamics(_ForEmbodiment, _Seeded, gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Per-episode mass and friction of every object of a tabletop scene: at every reset each object's nominal
    mass and sliding friction (the scene's) are multiplied by scales drawn uniformly from ``mass_scale`` and
    ``friction_scale`` (``[low, high]``, or one number to fix it), independently per object. The backend
    simulates them (``set_object_dynamics``: inertia scales with the mass); the episode's values are in
    ``info["object_dynamics"]`` (``{object: {"mass": kg, "friction": coefficient}}``) at reset, and in the
    wrapper's ``dynamics`` (not in every step's info: HER's replay buffer keeps each step's). The tabletop's;
    the rover's is :class:`DomainRandomization`.
    """

    embodiment = "tabletop"
    instead: ClassVar[dict[str, str]] = {"rover": "domain_randomization (chassis mass, tyre friction, motors)"}
    salt = 3

    def __init__(self, env: gym.Env, mass_scale: Any = (0.5, 2.0), friction_scale: Any = (0.5, 1.5)) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, mass_scale=mass_scale, friction_scale=friction_scale)
        self._check_embodiment(env)
        gym.Wrapper.__init__(self, env)
        self.ranges = {
            "mass_scale": _range("mass_scale", mass_scale, positive=True),
            "friction_scale": _range("friction_scale", friction_scale, positive=True),
        }
        self.objects = env.unwrapped.scene.objects
        self.dynamics: dict[str, dict[str, float]] = {}

    def sample(self) -> dict[str, dict[str, float]]:
        """One episode's ``{object: {"mass", "friction"}}`` from this wrapper's generator."""
        (m_lo, m_hi), (f_lo, f_hi) = self.ranges["mass_scale"], self.ranges["friction_scale"]
        return {
            o.name: {"mass": o.mass * float(self.rng.uniform(m_lo, m_hi)),
                     "friction": o.friction * float(self.rng.uniform(f_lo, f_hi))}
            for o in self.objects
        }  # fmt: skip

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        self._reseed(seed)
        self.dynamics = self.sample()
        physics = self.env.unwrapped.physics
        for name, d in self.dynamics.items():
            physics.set_object_dynamics(name, d["mass"], d["friction"])
        obs, info = self.env.reset(seed=seed, options=options)
        return obs, info | {"object_dynamics": {name: dict(d) for name, d in self.dynamics.items()}}


class _TabletopNoise:
    """Gaussian noise on the tabletop's observed TCP and goal-object positions and on its images."""

    def __init__(self, env: gym.Env, tcp_std: float, object_std: float, rgb_std: float, depth_std: float) -> None:
        for name, value in (("tcp_std", tcp_std), ("object_std", object_std), ("rgb_std", rgb_std),
                            ("depth_std", depth_std)):  # fmt: skip
            _check_number(name, value, minimum=0.0)
        self.tcp_std, self.object_std = float(tcp_std), float(object_std)
        self.rgb_std, self.depth_std = float(rgb_std), float(depth_std)
        self.slices = _tabletop_layout(env.unwrapped)

    def apply(self, obs: dict[str, np.ndarray], rng: np.random.Generator) -> dict[str, np.ndarray]:
        out = dict(obs)
        if self.tcp_std > 0 or self.object_std > 0:
            vec = obs["observation"].copy()
            tcp = self.slices["tcp"]
            vec[tcp] += rng.normal(0.0, self.tcp_std, 3).astype(np.float32)
            if "object" in self.slices:
                obj = self.slices["object"]
                vec[obj] += rng.normal(0.0, self.object_std, 3).astype(np.float32)
                vec[self.slices["relative"]] = vec[obj] - vec[tcp]  # what the policy reads stays consistent
            out["observation"] = vec
        for key, image in obs.items():
            if key.endswith("_rgb") and self.rgb_std > 0:
                noisy = image + rng.normal(0.0, self.rgb_std, image.shape)
                out[key] = np.clip(np.rint(noisy), 0, 255).astype(np.uint8)
            elif key.endswith("_depth") and self.depth_std > 0:
                noisy = image + rng.normal(0.0, self.depth_std, image.shape).astype(np.float32)
                out[key] = np.maximum(noisy, 0.0)
        return out


def _tabletop_layout(u: Any) -> dict[str, slice]:
    """Where the TCP position, the goal object's position and the object-from-TCP vector lie in the tabletop's
    ``observation`` (layout: sim.tabletop.env.PandaTabletopEnv._observe; tests/sim/tabletop/test_wrappers.py
    checks it against the state)."""
    layout = {"tcp": slice(0, 3)}
    if u.goal_mode != "reach":
        start = 6 if u.block_gripper else 7  # after TCP position and velocity, and the finger width
        layout |= {"object": slice(start, start + 3), "relative": slice(start + 3, start + 6)}
    return layout


class ObservationNoise(_ForEmbodiment, _Noisy, gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Gaussian noise on what the tabletop's policy observes, drawn anew every step: the TCP position
    (``tcp_std``, m: joint encoders and a calibration error), the goal object's position (``object_std``, m: a
    pose estimator; the object-from-TCP part follows both), RGB images (``rgb_std``, intensity levels of 255)
    and depth images (``depth_std``, m; kept >= 0).

    ``achieved_goal`` is left true, so the reward, ``info["is_success"]`` and HER's relabelling stay true to
    the state: the noise models what the robot perceives, not whether a task is done. Velocities, the
    object's rotation and ``desired_goal`` are not touched. The tabletop's; the rover's is :class:`SensorNoise`.
    """

    embodiment = "tabletop"
    instead: ClassVar[dict[str, str]] = {"rover": "sensor_noise (lidar, odometry)"}
    salt = 4

    def __init__(
        self, env: gym.Env, tcp_std: float = 0.002, object_std: float = 0.01, rgb_std: float = 0.0,
        depth_std: float = 0.0,
    ) -> None:  # fmt: skip
        gym.utils.RecordConstructorArgs.__init__(
            self, tcp_std=tcp_std, object_std=object_std, rgb_std=rgb_std, depth_std=depth_std
        )
        self._check_embodiment(env)
        gym.Wrapper.__init__(self, env)
        self.noise = _TabletopNoise(env, tcp_std, object_std, rgb_std, depth_std)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        obs, info = self.env.reset(seed=seed, options=options)
        self._reseed(seed)
        return self.noise.apply(obs, self.rng), info

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self.noise.apply(obs, self.rng), reward, terminated, truncated, info


class VisualRandomization(_ForEmbodiment, _Seeded, gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Per-episode camera pose jitter and lighting, for policies that see images (both engines). At every
    reset, each camera (``front``, ``wrist``) is moved by up to ``camera_position`` m along each of its axes
    and turned by up to ``camera_angle`` degrees about a random axis; the scene's directional light is scaled
    by a factor from ``light_intensity`` (``[low, high]`` or one number) and tilted by up to
    ``light_direction`` degrees from its nominal direction (all uniform). The env's ``render()`` sees them too.
    The episode's values are in ``info["visual"]`` at reset and in the wrapper's ``visual`` (as
    :class:`ObjectDynamics`). Tabletop only (the rover has no cameras).
    """

    embodiment = "tabletop"
    salt = 5

    def __init__(
        self,
        env: gym.Env,
        camera_position: float = 0.01,
        camera_angle: float = 2.0,
        light_intensity: Any = (0.6, 1.4),
        light_direction: float = 20.0,
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(
            self, camera_position=camera_position, camera_angle=camera_angle, light_intensity=light_intensity,
            light_direction=light_direction,
        )  # fmt: skip
        self._check_embodiment(env)
        gym.Wrapper.__init__(self, env)
        _check_number("camera_position", camera_position, minimum=0.0, maximum=0.1)
        _check_number("camera_angle", camera_angle, minimum=0.0, maximum=30.0)
        _check_number("light_direction", light_direction, minimum=0.0, maximum=90.0)
        self.camera_position, self.camera_angle = float(camera_position), float(camera_angle)
        self.light_intensity = _range("light_intensity", light_intensity)
        self.light_direction = float(light_direction)
        self.visual: dict[str, Any] = {}

    def sample(self) -> dict[str, Any]:
        """One episode's camera offsets (m, their own frames), turns (deg, about their own axes) and light."""
        from sim.tabletop.physics import CAMERAS, LIGHT_DIRECTION

        cameras = {}
        for name in CAMERAS:
            offset = self.rng.uniform(-self.camera_position, self.camera_position, 3)
            axis, angle = _random_axis(self.rng), float(self.rng.uniform(-self.camera_angle, self.camera_angle))
            cameras[name] = {"position": offset.tolist(), "axis": axis.tolist(), "angle": angle}
        nominal = np.asarray(LIGHT_DIRECTION)
        tilt_axis = np.cross(nominal, _random_axis(self.rng))  # perpendicular to the light: a pure tilt
        tilt = float(self.rng.uniform(0.0, self.light_direction))
        direction = _rotation(tilt_axis / np.linalg.norm(tilt_axis), tilt) @ nominal
        intensity = float(self.rng.uniform(*self.light_intensity))
        return {"cameras": cameras, "light_intensity": intensity, "light_direction": direction.tolist(),
                "light_tilt": tilt}  # fmt: skip

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        self._reseed(seed)
        self.visual = v = self.sample()
        physics = self.env.unwrapped.physics
        for name, cam in v["cameras"].items():
            physics.set_camera_offset(name, np.array(cam["position"]), _rotation(np.array(cam["axis"]), cam["angle"]))
        physics.set_lighting(v["light_intensity"], np.array(v["light_direction"]))
        obs, info = self.env.reset(seed=seed, options=options)  # after: the first images show this episode's
        return obs, info | {"visual": {**v, "cameras": {name: dict(c) for name, c in v["cameras"].items()}}}


def _random_axis(rng: np.random.Generator) -> np.ndarray:
    """A unit vector uniform on the sphere."""
    v = rng.normal(size=3)
    return v / np.linalg.norm(v)


def _rotation(axis: np.ndarray, degrees: float) -> np.ndarray:
    """Rotation matrix (3, 3) of ``degrees`` about the unit ``axis`` (Rodrigues)."""
    x, y, z = axis
    cross = np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])
    a = math.radians(degrees)
    return np.eye(3) + math.sin(a) * cross + (1.0 - math.cos(a)) * cross @ cross


def set_goal(env: gym.Env, goal: Any, **kwargs: Any) -> dict[str, np.ndarray]:
    """Change the goal of a (wrapped) env mid-episode and return the observation as the outermost wrapper
    that changes observations sees it: ``env.unwrapped.set_goal`` would bypass their noise and drift.
    ``kwargs`` go to the env's ``set_goal`` (the tabletop's ``object=``)."""
    return env.get_wrapper_attr("set_goal")(goal, **kwargs)


#: Wrapper name (as written in configs) -> class.
WRAPPERS: dict[str, type[gym.Wrapper]] = {
    "domain_randomization": DomainRandomization,
    "sensor_noise": SensorNoise,
    "action_latency": ActionLatency,
    "action_rate_limit": ActionRateLimit,
    "object_dynamics": ObjectDynamics,
    "observation_noise": ObservationNoise,
    "visual_randomization": VisualRandomization,
}


def parse_wrapper_specs(specs: Sequence[Mapping[str, Any] | str] | None) -> list[tuple[str, dict[str, Any]]]:
    """Check wrapper specs (names and parameter names) without building anything: ``[(name, params)]``."""
    if specs is None:
        return []
    if isinstance(specs, (str, Mapping)) or not isinstance(specs, Sequence):
        raise ValueError(f"wrappers must be a list of wrapper specs, got {specs!r}")
    parsed = []
    for i, spec in enumerate(specs):
        if isinstance(spec, str):
            name, params = spec, {}
        elif isinstance(spec, Mapping) and "name" in spec:
            params = {str(k): v for k, v in spec.items() if k != "name"}
            name = spec["name"]
        else:
            raise ValueError(
                f"wrappers[{i}] must be a wrapper name or a mapping with a 'name' key, got {spec!r} "
                f"(e.g. {{name: sensor_noise, lidar_std: 0.02}})"
            )
        if name not in WRAPPERS:
            hint = did_you_mean(str(name), list(WRAPPERS))
            raise ValueError(f"wrappers[{i}]: unknown wrapper {name!r}{hint}; available: {', '.join(WRAPPERS)}")
        allowed = [p for p in inspect.signature(WRAPPERS[name].__init__).parameters if p not in ("self", "env")]
        unknown = sorted(set(params) - set(allowed))
        if unknown:
            raise ValueError(f"wrappers[{i}] ({name}): unknown parameter(s) {unknown}; {name} takes {allowed}")
        parsed.append((name, params))
    return parsed


def apply_wrappers(env: gym.Env, specs: Sequence[Mapping[str, Any] | str] | None) -> gym.Env:
    """Wrap ``env`` in the wrappers named by ``specs``, innermost first.

    Each spec is a wrapper name or a mapping ``{"name": <name>, <parameter>: <value>, ...}``.
    """
    for i, (name, params) in enumerate(parse_wrapper_specs(specs)):
        try:
            env = WRAPPERS[name](env, **params)
        except (TypeError, ValueError) as err:
            raise ValueError(f"wrappers[{i}] ({name}): {err}") from err
    return env


def _check_number(name: str, value: Any, *, minimum: float, maximum: float | None = None, strict: bool = False) -> None:
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    ok = ok and (value > minimum if strict else value >= minimum) and (maximum is None or value <= maximum)
    if not ok:
        bound = f"> {minimum}" if strict else f">= {minimum}"
        if maximum is not None:
            bound += f" and <= {maximum}"
        raise ValueError(f"{name} must be a number {bound}, got {value!r}")


def _box_shape(env: gym.Env, name: str) -> tuple[int, ...]:
    if not isinstance(env.action_space, gym.spaces.Box):
        raise TypeError(
            f"{name} delays or limits Box actions; {type(env.unwrapped).__name__} acts in {env.action_space}"
        )
    return env.action_space.shape


def _check_integer(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be an integer >= 0 (control periods), got {value!r}")


def _range(name: str, value: Any, *, positive: bool = False, integer: bool = False) -> tuple[Any, Any]:
    """``x`` or ``[low, high]`` -> (low, high), checked."""
    values = list(value) if isinstance(value, (list, tuple)) or hasattr(value, "__iter__") else [value, value]
    if isinstance(value, str) or len(values) != 2:
        raise ValueError(f"{name} must be a number or a [low, high] range, got {value!r}")
    for v in values:
        if integer:
            _check_integer(name, v)
        else:
            _check_number(name, v, minimum=0.0, strict=positive)
    low, high = values
    if low > high:
        raise ValueError(f"{name} range [{low}, {high}] has low > high; write it as [low, high]")
    return low, high
