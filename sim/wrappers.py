"""Sim-to-real wrappers for the rover envs (every backend): randomized dynamics, sensor noise, delays.

A policy trained on a perfect simulator meets a robot whose mass, tyres and motors differ, whose lidar
is noisy and drops returns, whose odometry drifts, and whose commands arrive late and are smoothed.
These wrappers put those effects into simulation, for training (robustness) and for evaluation
(how much does a policy lose?):

* :class:`DomainRandomization`: per-episode mass, friction, motor gain, lidar noise and control latency,
  sampled from ranges, reported in ``info["domain"]``;
* :class:`SensorNoise`: Gaussian lidar noise, ray dropout, odometry drift;
* :class:`ActionLatency`: commands applied ``steps`` control periods late;
* :class:`ActionRateLimit`: commands limited in how fast they change (a velocity smoother).

They are chosen by name (``gym.make("hrl/RoverNav-v0", wrappers=[{"name": "sensor_noise",
"lidar_std": 0.02}])``; Hydra: ``env.wrappers=[...]`` or ``env/wrappers=<preset>``). Wrappers draw from
their own random generator, seeded from ``reset(seed=...)``: the same seed gives the same noise, and
adding a wrapper does not change the goals and starts the env samples.
"""

from __future__ import annotations

import inspect
import math
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from robots._fields import did_you_mean
from sim.physics import Dynamics

#: Index of the first lidar value in ``obs["observation"]`` (layout: sim.nav_task.NavTask).
LIDAR_START = 6


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

    def set_goal(self, goal: Any) -> dict[str, np.ndarray]:
        """The env's ``set_goal`` (a new subgoal mid-episode), observed through this wrapper's noise."""
        return self.noise.apply(set_goal(self.env, goal), self.rng)  # type: ignore[attr-defined]


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

    def __init__(self, steps: int) -> None:
        _check_integer("steps", steps)
        self.steps = steps
        self.queue: deque[np.ndarray] = deque()
        self.reset()

    def reset(self, steps: int | None = None) -> None:
        if steps is not None:
            self.steps = steps
        self.queue = deque(np.zeros(2) for _ in range(self.steps))

    def __call__(self, action: np.ndarray) -> np.ndarray:
        self.queue.append(np.asarray(action, dtype=np.float64).copy())
        return self.queue.popleft()


class SensorNoise(_Noisy, gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Gaussian lidar noise (``lidar_std``, m), ray dropout (probability per ray and step; a dropped ray
    reads max range), and odometry drift: a random-walk error on the observed pose; each step adds Gaussian
    error of std ``odom_xy_std`` x the distance moved in that step (m) and ``odom_yaw_std`` x (angle turned +
    distance moved) (rad), like ROS amcl's odometry model. Over a distance D in steps of length s the position
    error's std is ``odom_xy_std * sqrt(D * s)`` per axis (so it depends on the step length: 0.02 gives 4.5 mm
    after 1 m at 0.05 m per step), not ``odom_xy_std`` per metre.

    The observed pose (``observation[:4]``, ``achieved_goal``) drifts; ``info["is_success"]`` stays ground
    truth, and ``info["odometry_error"]`` is the current (x, y, yaw) error.
    """

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


class ActionLatency(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Each command takes effect ``steps`` control periods after the policy sent it (zeros before)."""

    def __init__(self, env: gym.Env, steps: int = 1) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, steps=steps)
        gym.Wrapper.__init__(self, env)
        self.delay = _DelayLine(steps)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        self.delay.reset()
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        return self.env.step(self.delay(action))


class ActionRateLimit(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Limits how fast the command changes, like a velocity smoother in front of a base: at most
    ``max_linear_acceleration`` (m/s^2) and ``max_angular_acceleration`` (rad/s^2) between control periods.
    ``None`` takes the robot spec's limits."""

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
        u = env.unwrapped
        lim = u.robot.limits
        lin = lim.max_linear_acceleration if max_linear_acceleration is None else max_linear_acceleration
        ang = lim.max_angular_acceleration if max_angular_acceleration is None else max_angular_acceleration
        _check_number("max_linear_acceleration", lin, minimum=0.0, strict=True)
        _check_number("max_angular_acceleration", ang, minimum=0.0, strict=True)
        # Limits in the action's normalised units per control period.
        dt = 1.0 / u.control_hz
        self.max_delta = np.array([lin * dt / lim.max_linear_velocity, ang * dt / lim.max_angular_velocity])
        self.previous = np.zeros(2)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        self.previous = np.zeros(2)
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        target = np.clip(np.asarray(action, dtype=np.float64), -1.0, 1.0)
        self.previous = self.previous + np.clip(target - self.previous, -self.max_delta, self.max_delta)
        return self.env.step(self.previous.copy())


class DomainRandomization(_Noisy, gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Per-episode physical and sensor parameters, each drawn uniformly from ``[low, high]`` (or fixed
    when given one number) at every reset:

    * ``mass_scale``: chassis mass and inertia (x nominal); ``friction``: tyre grip and wall friction;
      ``motor_gain``: achieved / commanded velocity (wheel radius error), applied by the physics backend;
    * ``lidar_std``: Gaussian lidar noise (m); ``latency_steps``: command delay (integer control periods).

    The episode's values are in ``info["domain"]`` at reset and at every step.
    """

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
        gym.Wrapper.__init__(self, env)
        self.ranges = {
            "mass_scale": _range("mass_scale", mass_scale, positive=True),
            "friction": _range("friction", friction, positive=True),
            "motor_gain": _range("motor_gain", motor_gain, positive=True),
            "lidar_std": _range("lidar_std", lidar_std),
            "latency_steps": _range("latency_steps", latency_steps, integer=True),
        }
        if not hasattr(env.unwrapped, "physics") or not hasattr(env.unwrapped.physics, "set_dynamics"):
            raise TypeError(f"DomainRandomization needs a rover env with a physics backend, got {env.unwrapped!r}")
        self.noise = _Noise(env, 0.0, 0.0, 0.0, 0.0)
        self.delay = _DelayLine(0)
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


def set_goal(env: gym.Env, goal: Any) -> dict[str, np.ndarray]:
    """Change the goal of a (wrapped) rover env mid-episode and return the observation as the outermost
    wrapper that changes observations sees it: ``env.unwrapped.set_goal`` would bypass their noise and drift.
    """
    return env.get_wrapper_attr("set_goal")(goal)


#: Wrapper name (as written in configs) -> class.
WRAPPERS: dict[str, type[gym.Wrapper]] = {
    "domain_randomization": DomainRandomization,
    "sensor_noise": SensorNoise,
    "action_latency": ActionLatency,
    "action_rate_limit": ActionRateLimit,
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
