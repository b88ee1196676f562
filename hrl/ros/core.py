"""What the ROS nodes do, without ROS: adapt a real laser scan to the policy's rays, build the policy's
observation from odometry, keep the robot safe whatever the policy outputs, and track a subgoal.

Everything here is plain Python and NumPy, tested without a ROS installation; the rclpy nodes in
``hrl.ros`` only move messages in and out of these objects.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def adapt_scan(
    ranges: np.ndarray,
    angle_min: float,
    angle_increment: float,
    range_min: float,
    range_max: float,
    policy_angles: np.ndarray,
    policy_max_range: float,
) -> np.ndarray:
    """A real ``sensor_msgs/LaserScan`` as the policy's lidar: one range per policy ray.

    Each policy ray takes the minimum (the nearest obstacle: the safe choice) of the real beams within
    its sector, i.e. within half the policy's ray spacing on either side. Readings follow REP 117:
    ``+inf`` (no return) and readings beyond ``range_max`` count as the policy's maximum range, ``-inf``
    (too close to measure) as 0, ``nan`` and readings below ``range_min`` are ignored. A sector with no
    usable beam (a sensor with a narrower field of view, or all beams invalid) reads as maximum range.
    Results are clipped to [0, ``policy_max_range``].
    """
    r = np.asarray(ranges, dtype=np.float64).reshape(-1)
    n = r.shape[0]
    out = np.full(policy_angles.shape[0], policy_max_range, dtype=np.float64)
    if n == 0:
        return out
    values = r.copy()
    values[np.isposinf(values) | (values > range_max)] = policy_max_range
    values[np.isneginf(values)] = 0.0
    valid = ~np.isnan(values) & ((values >= range_min) | (values == 0.0) | (values == policy_max_range))
    sector = _sectors(n, float(angle_min), float(angle_increment), policy_angles)
    use = valid & (sector >= 0)
    np.minimum.at(out, sector[use], values[use])
    return np.clip(out, 0.0, policy_max_range)


_SECTOR_CACHE: dict[tuple, np.ndarray] = {}


def _sectors(n: int, angle_min: float, angle_increment: float, policy_angles: np.ndarray) -> np.ndarray:
    """For each beam, the policy ray whose sector (half a ray spacing on either side) holds it, or -1.
    Cached per scan geometry: a lidar's geometry does not change between messages."""
    key = (n, angle_min, angle_increment, policy_angles.tobytes())
    cached = _SECTOR_CACHE.get(key)
    if cached is not None:
        return cached
    beams = angle_min + angle_increment * np.arange(n)
    diff = np.abs((beams[:, None] - policy_angles[None, :] + math.pi) % (2 * math.pi) - math.pi)
    m = policy_angles.shape[0]
    half = abs(float(policy_angles[1] - policy_angles[0])) / 2 if m > 1 else math.pi  # evenly spaced rays
    nearest = np.argmin(diff, axis=1)
    sector = np.where(diff[np.arange(n), nearest] <= half + 1e-9, nearest, -1)
    if len(_SECTOR_CACHE) > 16:
        _SECTOR_CACHE.clear()
    _SECTOR_CACHE[key] = sector
    return sector


def yaw_from_quaternion(x: float, y: float, z: float, w: float) -> float:
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def finite(*values: float) -> bool:
    return all(math.isfinite(v) for v in values)


@dataclass
class SafetyConfig:
    max_linear: float  # m/s
    max_angular: float  # rad/s
    stale_timeout_s: float = 0.5

    def __post_init__(self) -> None:
        for name in ("max_linear", "max_angular", "stale_timeout_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {value}")


class SafetyFilter:
    """The last word before ``/cmd_vel``: clamp to the limits; stop on stale sensor data, on a
    non-finite value in an incoming message (until that topic sends a finite one again), on a
    non-finite command, and while the e-stop is latched (until released)."""

    def __init__(self, config: SafetyConfig) -> None:
        self.config = config
        self.estop = False
        self.bad_input: dict[str, str] = {}  # topic -> what was wrong with its last message

    def input(self, topic: str, problem: str | None) -> None:
        """Record whether ``topic``'s last message was usable (``problem`` None) or why not."""
        if problem is None:
            self.bad_input.pop(topic, None)
        else:
            self.bad_input[topic] = problem

    def command(
        self, v: float, w: float, now: float, odom_time: float | None, scan_time: float | None
    ) -> tuple[float, float, str | None]:
        """(v, w) to publish and, when it is a stop, why."""
        cfg = self.config
        reason = None
        if self.estop:
            reason = "e-stop latched"
        elif self.bad_input:
            reason = "; ".join(f"{t}: {p}" for t, p in sorted(self.bad_input.items()))
        elif odom_time is None or scan_time is None:
            reason = "waiting for /odom and /scan"
        elif now - odom_time > cfg.stale_timeout_s:
            reason = f"/odom is stale ({now - odom_time:.2f} s > {cfg.stale_timeout_s} s)"
        elif now - scan_time > cfg.stale_timeout_s:
            reason = f"/scan is stale ({now - scan_time:.2f} s > {cfg.stale_timeout_s} s)"
        elif not finite(v, w):
            reason = f"non-finite command ({v}, {w})"
        if reason is not None:
            return 0.0, 0.0, reason
        return (
            min(max(v, -cfg.max_linear), cfg.max_linear),
            min(max(w, -cfg.max_angular), cfg.max_angular),
            None,
        )


@dataclass
class SubgoalTracker:
    """The current subgoal (odom frame) and whether it is reached, or failed (over budget, no progress)."""

    tolerance: float = 0.3
    budget_s: float = 30.0
    stuck_s: float = 8.0
    stuck_progress: float = 0.15
    goal: tuple[float, float] | None = None
    started: float = 0.0
    best: float = math.inf
    best_at: float = 0.0

    def set(self, goal: tuple[float, float], now: float) -> None:
        self.goal, self.started, self.best, self.best_at = goal, now, math.inf, now

    def update(self, position: tuple[float, float], now: float) -> str | None:
        """ "reached", "failed: ..." (and the subgoal is cleared), or None while driving."""
        if self.goal is None:
            return None
        d = math.dist(position, self.goal)
        if d <= self.tolerance:
            self.goal = None
            return "reached"
        if d < self.best - self.stuck_progress:
            self.best, self.best_at = d, now
        if now - self.started > self.budget_s:
            self.goal = None
            return f"failed: over the {self.budget_s:.0f} s budget"
        if now - self.best_at > self.stuck_s:
            self.goal = None
            return f"failed: no progress for {self.stuck_s:.0f} s"
        return None


class PolicyController:
    """The low-level policy as a ROS base's controller: (odometry, scan, goal) -> (v m/s, w rad/s).

    The observation is assembled exactly as the simulator's task does (``sim.nav_task.NavTask.observe``):
    pose, velocities normalised by the robot's limits, lidar ranges normalised by the policy's maximum
    range, the goal in the same (odom) frame as the pose.
    """

    def __init__(self, policy: object, max_linear: float, max_angular: float) -> None:
        from sim.nav_task import VELOCITY_OBS_LIMIT

        lidar = policy.lidar()  # type: ignore[attr-defined]
        self.policy = policy
        self.angles = np.asarray(lidar.angles(), dtype=np.float64)
        self.max_range = float(lidar.max_range)
        self.max_linear = max_linear
        self.max_angular = max_angular
        self._lim = VELOCITY_OBS_LIMIT

    def observation(
        self, pose: tuple[float, float, float], velocity: tuple[float, float], ranges: np.ndarray, goal: tuple
    ) -> dict[str, np.ndarray]:
        x, y, yaw = pose
        lim = self._lim
        obs = np.empty(6 + self.angles.shape[0], dtype=np.float32)
        obs[:6] = (
            x,
            y,
            math.cos(yaw),
            math.sin(yaw),
            min(max(velocity[0] / self.max_linear, -lim), lim),
            min(max(velocity[1] / self.max_angular, -lim), lim),
        )
        obs[6:] = np.asarray(ranges, dtype=np.float64) / self.max_range
        return {"observation": obs, "achieved_goal": obs[:2].copy(), "desired_goal": np.asarray(goal, np.float32)}

    def command(
        self, pose: tuple[float, float, float], velocity: tuple[float, float], ranges: np.ndarray, goal: tuple
    ) -> tuple[float, float]:
        action = np.asarray(self.policy(self.observation(pose, velocity, ranges, goal)), dtype=np.float64)  # type: ignore[operator]
        v, w = (float(a) for a in action.reshape(-1)[:2])
        return v * self.max_linear, w * self.max_angular


@dataclass
class PlanProgress:
    """Where the robot is in a grounded plan: which subgoal is current, and how many replans are spent."""

    points: list[tuple[float, float]]
    labels: list[str]
    index: int = 0
    replans: int = 0

    @property
    def current(self) -> tuple[float, float] | None:
        return self.points[self.index] if self.index < len(self.points) else None

    def matches(self, x: float, y: float, tol: float = 1e-3) -> bool:
        cur = self.current
        return cur is not None and abs(cur[0] - x) <= tol and abs(cur[1] - y) <= tol

    def advance(self) -> tuple[float, float] | None:
        self.index += 1
        return self.current


def parse_status(text: str) -> tuple[str, float, float, str] | None:
    """``'reached x y'`` / ``'failed x y: why'`` -> (outcome, x, y, why); None if malformed."""
    head, _, why = text.partition(": ")
    parts = head.split()
    if len(parts) != 3 or parts[0] not in ("reached", "failed"):
        return None
    try:
        return parts[0], float(parts[1]), float(parts[2]), why
    except ValueError:
        return None
