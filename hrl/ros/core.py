"""What the ROS nodes do, without ROS: adapt a real laser scan to the policy's rays, build the policy's
observation from odometry, keep the robot safe whatever the policy outputs, and track a subgoal.

Everything here is plain Python and NumPy, tested without a ROS installation; the rclpy nodes in
``hrl.ros`` only move messages in and out of these objects.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from hrl.ros.inference import NumpyPolicy, UnsupportedPolicyError, checked_numpy_policy

Pose2D = tuple[float, float, float]  # x (m), y (m), yaw (rad) of one frame in another


def parse_pose2d(text: str) -> Pose2D:
    """``"x,y,yaw"`` (metres, radians) -> (x, y, yaw); ValueError naming the text otherwise."""
    parts = text.split(",")
    try:
        values = tuple(float(p) for p in parts)
    except ValueError:
        values = ()
    if len(values) != 3 or not finite(*values):
        raise ValueError(f"{text!r} is not a pose 'x,y,yaw' (three finite numbers: metres, metres, radians)")
    return values  # type: ignore[return-value]


def scan_problem(
    n: int, angle_min: float, angle_max: float, angle_increment: float, range_min: float, range_max: float
) -> str | None:
    """Why a ``LaserScan`` with ``n`` ranges and this geometry cannot be used, or None.

    Beam ``i`` points at ``angle_min + i * angle_increment``. A negative increment with
    ``angle_max < angle_min`` is a clockwise scan and valid; the number of ranges must match the angle
    range (``(angle_max - angle_min) / angle_increment + 1``, one either way for drivers that count the
    end points differently).
    """
    geometry = (angle_min, angle_max, angle_increment, range_min, range_max)
    if not finite(*geometry):
        return f"non-finite scan geometry (angle_min, angle_max, angle_increment, range_min, range_max) = {geometry}"
    if angle_increment == 0:
        return "angle_increment is 0: the beams have no directions"
    if not 0 <= range_min < range_max:
        return f"range_min {range_min}, range_max {range_max}: need 0 <= range_min < range_max"
    if n == 0:
        return "no ranges: an empty scan says nothing about obstacles"
    expected = (angle_max - angle_min) / angle_increment + 1
    if abs(n - expected) > 1.0 + 1e-6:
        return (
            f"{n} ranges, but angle_min {angle_min:.4f} to angle_max {angle_max:.4f} at angle_increment "
            f"{angle_increment:.6f} makes {expected:.1f} beams"
            + (" (a negative increment needs angle_max < angle_min)" if expected < 0 else "")
        )
    return None


class ScanAdapter:
    """A real ``sensor_msgs/LaserScan`` as the policy's lidar, in the base frame, and the free distance
    ahead of and behind the robot's footprint (for the proximity stop).

    Each policy ray takes the minimum (the nearest obstacle: the safe choice) of the real returns whose
    direction *from the base origin* lies within its sector (half the policy's ray spacing on either
    side), so a laser mounted off-centre or rotated (``laser_pose``: its x, y, yaw in the base frame)
    fills the same sectors as a centred one would. Readings follow REP 117: ``+inf`` (no return) and
    readings beyond ``range_max`` are free space (the policy's maximum range), ``-inf`` (too close to
    measure) is an obstacle at 0 in the beam's direction, ``nan`` and readings below ``range_min`` are
    ignored. A sector with no usable return (a sensor with a narrower field of view) reads as maximum
    range. Returns inside the footprint (the robot's own body) are ignored for the clearance.

    The beam directions are cached per scan geometry (a lidar's geometry does not change between
    messages) and the outputs are preallocated: :meth:`adapt` allocates only a few small temporaries.
    """

    def __init__(
        self,
        policy_angles: np.ndarray,
        policy_max_range: float,
        footprint_radius: float = 0.0,
        laser_pose: Pose2D = (0.0, 0.0, 0.0),
    ) -> None:
        a = np.asarray(policy_angles, dtype=np.float64)
        m = a.shape[0]
        self.max_range = float(policy_max_range)
        self.radius = float(footprint_radius)
        self._a0 = float(a[0])
        self._spacing = abs(float(a[1] - a[0])) if m > 1 else 2 * math.pi  # evenly spaced rays
        self._full_circle = m * self._spacing >= 2 * math.pi - 1e-6
        self._m = m
        self.ranges = np.full(m, self.max_range, dtype=np.float32)  # the policy's rays, in metres
        self._work = np.empty(m, dtype=np.float64)
        self.clearance_ahead = math.inf  # m from the footprint's front to the nearest return in its path
        self.clearance_behind = math.inf
        self.laser_pose = laser_pose
        self._key: tuple | None = None

    @property
    def laser_pose(self) -> Pose2D:
        return self._pose

    @laser_pose.setter
    def laser_pose(self, pose: Pose2D) -> None:
        self._pose = tuple(float(v) for v in pose)  # type: ignore[assignment]
        self._offset = (self._pose[0], self._pose[1]) != (0.0, 0.0)
        self._key = None

    def sector_of(self, angles: np.ndarray) -> np.ndarray:
        """The policy ray whose sector holds each direction (radians, base frame), or -1."""
        d = np.mod(angles - self._a0 + self._spacing / 2, 2 * math.pi)
        k = np.floor(d / self._spacing).astype(np.intp)
        if self._full_circle:
            return np.minimum(k, self._m - 1)
        return np.where(k < self._m, k, -1)

    def _geometry(self, n: int, angle_min: float, angle_increment: float) -> None:
        key = (n, angle_min, angle_increment)
        if key == self._key:
            return
        directions = angle_min + angle_increment * np.arange(n, dtype=np.float64) + self._pose[2]
        self._cos, self._sin = np.cos(directions), np.sin(directions)
        self._sector = self.sector_of(directions)  # of each beam's direction (exact for a centred laser)
        self._ahead = self._cos > 0
        self._key = key

    def adapt(
        self,
        ranges: Any,
        angle_min: float,
        angle_max: float,
        angle_increment: float,
        range_min: float,
        range_max: float,
    ) -> str | None:
        """Fill :attr:`ranges`, :attr:`clearance_ahead` and :attr:`clearance_behind` from one scan, or
        return why the scan cannot be used (:func:`scan_problem`; the outputs are then left as they were)."""
        r = np.asarray(ranges, dtype=np.float32).reshape(-1)  # a view of an rclpy message's array.array
        n = r.shape[0]
        problem = scan_problem(n, angle_min, angle_max, angle_increment, range_min, range_max)
        if problem is not None:
            return problem
        self._geometry(n, float(angle_min), float(angle_increment))
        hit = (r >= range_min) & (r <= range_max)  # a return: an obstacle at r (nan compares False)
        touching = np.isneginf(r)  # too close to measure: an obstacle at 0
        touching = touching if touching.any() else None
        out = self._work  # float64 like the distances: ufunc.at is ~20x slower on mixed dtypes
        out.fill(self.max_range)
        idx = np.flatnonzero(hit)
        dist = r[idx].astype(np.float64)
        x = dist * self._cos[idx]
        y = dist * self._sin[idx]
        if self._offset:
            x += self._pose[0]
            y += self._pose[1]
            dist = np.hypot(x, y)
            sector = self.sector_of(np.arctan2(y, x))
        else:
            sector = self._sector[idx]
        if self._full_circle:  # every direction has a sector
            np.minimum.at(out, sector, dist)
        else:
            use = sector >= 0
            np.minimum.at(out, sector[use], dist[use])
        if touching is not None:
            close = self._sector[touching]
            np.minimum.at(out, close[close >= 0], 0.0)
        np.minimum(out, self.max_range, out=self.ranges)
        self.clearance_ahead, self.clearance_behind = self._clearances(x, y, dist, touching)
        return None

    def _clearances(
        self, x: np.ndarray, y: np.ndarray, dist: np.ndarray, touching: np.ndarray | None
    ) -> tuple[float, float]:
        """Free distance along the heading, forwards and backwards, for the footprint (a disc of
        ``radius``) moving straight: to the nearest return within its width, outside the footprint."""
        big = self.radius
        lane = np.flatnonzero((np.abs(y) <= big) & (dist > big))
        x, y = x[lane], y[lane]
        along = np.abs(x) - np.sqrt(np.maximum(big * big - y * y, 0.0))  # from the footprint's edge
        front = x > 0
        ahead = float(along[front].min()) if front.any() else math.inf
        behind = float(along[~front].min()) if (~front).any() else math.inf
        if touching is not None:
            ahead = 0.0 if (touching & self._ahead).any() else ahead
            behind = 0.0 if (touching & ~self._ahead).any() else behind
        return ahead, behind


def adapt_scan(
    ranges: np.ndarray,
    angle_min: float,
    angle_increment: float,
    range_min: float,
    range_max: float,
    policy_angles: np.ndarray,
    policy_max_range: float,
    laser_pose: Pose2D = (0.0, 0.0, 0.0),
) -> np.ndarray:
    """One scan as the policy's rays (:class:`ScanAdapter`, for one-off use: a node keeps an adapter).

    ``angle_max`` is taken as the last beam's angle. Raises ValueError for a scan that cannot be used.
    """
    r = np.asarray(ranges, dtype=np.float32).reshape(-1)
    adapter = ScanAdapter(policy_angles, policy_max_range, laser_pose=laser_pose)
    angle_max = angle_min + angle_increment * (r.shape[0] - 1)
    problem = adapter.adapt(r, angle_min, angle_max, angle_increment, range_min, range_max)
    if problem is not None:
        raise ValueError(problem)
    return adapter.ranges.astype(np.float64)


def yaw_from_quaternion(x: float, y: float, z: float, w: float) -> float:
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def finite(*values: float) -> bool:
    return all(math.isfinite(v) for v in values)


@dataclass
class SafetyConfig:
    """Limits of the safety filter. Accelerations bound how fast a command may change (m/s^2, rad/s^2);
    ``stop_distance`` is the free distance (m) the footprint keeps to a return in its path (0: off)."""

    max_linear: float  # m/s
    max_angular: float  # rad/s
    stale_timeout_s: float = 0.5
    max_linear_accel: float = math.inf
    max_angular_accel: float = math.inf
    stop_distance: float = 0.0

    def __post_init__(self) -> None:
        for name in ("max_linear", "max_angular", "stale_timeout_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {value}")
        for name in ("max_linear_accel", "max_angular_accel"):
            value = getattr(self, name)
            if not value > 0:  # also refuses nan; inf: no limit
                raise ValueError(f"{name} must be a number > 0 (inf: no limit), got {value}")
        if not (math.isfinite(self.stop_distance) and self.stop_distance >= 0):
            raise ValueError(f"stop_distance must be a finite number >= 0 (0: off), got {self.stop_distance}")


class SafetyFilter:
    """The last word before ``/cmd_vel``.

    A full stop (zero at once, not ramped: the base brakes) while the e-stop is latched (until released),
    on a non-finite value in an incoming message (until that topic sends a usable one again), on stale
    or missing sensor data, and on a non-finite command. Otherwise the command is clamped to the speed
    limits, its change since the last command to the acceleration limits, and motion toward a return
    closer than ``stop_distance`` in the footprint's path is cut (turning in place stays allowed, so the
    policy can turn away).
    """

    def __init__(self, config: SafetyConfig) -> None:
        self.config = config
        self.estop = False
        self.bad_input: dict[str, str] = {}  # topic -> what was wrong with its last message
        self.clearance_ahead = math.inf  # m, from the latest scan (ScanAdapter)
        self.clearance_behind = math.inf
        self.last = (0.0, 0.0)  # the last command sent
        self.last_time: float | None = None

    def input(self, topic: str, problem: str | None) -> None:
        """Record whether ``topic``'s last message was usable (``problem`` None) or why not."""
        if problem is None:
            self.bad_input.pop(topic, None)
        else:
            self.bad_input[topic] = problem

    def command(
        self, v: float, w: float, now: float, odom_time: float | None, scan_time: float | None
    ) -> tuple[float, float, str | None]:
        """(v, w) to publish and, when the filter stopped or cut it, why."""
        reason = self._stop_reason(v, w, now, odom_time, scan_time)
        if reason is None:
            v, w, reason = self._limit(v, w, now)
        else:
            v = w = 0.0
        self.last, self.last_time = (v, w), now
        return v, w, reason

    def _stop_reason(
        self, v: float, w: float, now: float, odom_time: float | None, scan_time: float | None
    ) -> str | None:
        cfg = self.config
        if self.estop:
            return "e-stop latched"
        if self.bad_input:
            return "; ".join(f"{t}: {p}" for t, p in sorted(self.bad_input.items()))
        if odom_time is None or scan_time is None:
            return "waiting for /odom and /scan"
        if now - odom_time > cfg.stale_timeout_s:
            return f"/odom is stale (none for {cfg.stale_timeout_s} s)"  # fixed text: logged on change
        if now - scan_time > cfg.stale_timeout_s:
            return f"/scan is stale (none for {cfg.stale_timeout_s} s)"
        if not finite(v, w):
            return f"non-finite command ({v}, {w})"
        return None

    def _limit(self, v: float, w: float, now: float) -> tuple[float, float, str | None]:
        cfg = self.config
        v = min(max(v, -cfg.max_linear), cfg.max_linear)
        w = min(max(w, -cfg.max_angular), cfg.max_angular)
        dt = 0.0 if self.last_time is None else max(now - self.last_time, 0.0)
        if math.isfinite(cfg.max_linear_accel):
            v = min(max(v, self.last[0] - cfg.max_linear_accel * dt), self.last[0] + cfg.max_linear_accel * dt)
        if math.isfinite(cfg.max_angular_accel):
            w = min(max(w, self.last[1] - cfg.max_angular_accel * dt), self.last[1] + cfg.max_angular_accel * dt)
        reason = None  # fixed texts: the node logs a reason when it changes, not every cycle
        if v > 0 and self.clearance_ahead < cfg.stop_distance:
            v, reason = 0.0, f"obstacle ahead within stop_distance {cfg.stop_distance} m"
        elif v < 0 and self.clearance_behind < cfg.stop_distance:
            v, reason = 0.0, f"obstacle behind within stop_distance {cfg.stop_distance} m"
        return v, w, reason


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

    The observation is assembled exactly as the simulator's task does (``sim.navigation.task.NavTask.observe``):
    pose, velocities normalised by the robot's limits, lidar ranges normalised by the policy's maximum
    range, the goal in the same (odom) frame as the pose.
    """

    def __init__(self, policy: object, max_linear: float, max_angular: float) -> None:
        from sim.navigation.task import VELOCITY_OBS_LIMIT

        lidar = policy.lidar()  # type: ignore[attr-defined]
        self.policy = policy
        self.angles = np.asarray(lidar.angles(), dtype=np.float64)
        self.max_range = float(lidar.max_range)
        self.max_linear = max_linear
        self.max_angular = max_angular
        self._lim = VELOCITY_OBS_LIMIT
        self._inv_range = 1.0 / self.max_range
        self._obs = np.zeros(6 + self.angles.shape[0], dtype=np.float32)
        self._achieved = np.zeros(2, dtype=np.float32)
        self._desired = np.zeros(2, dtype=np.float32)
        self._dict = {"observation": self._obs, "achieved_goal": self._achieved, "desired_goal": self._desired}
        self._numpy: NumpyPolicy | None = None
        try:
            self._numpy = checked_numpy_policy(policy)
            self.inference = "numpy"  # which path command() takes, for the node's log
        except UnsupportedPolicyError as err:
            warnings.warn(f"NumPy inference unavailable, using SB3 predict (slower): {err}", stacklevel=2)
            self.inference = f"predict ({err})"

    def observation(
        self, pose: tuple[float, float, float], velocity: tuple[float, float], ranges: np.ndarray, goal: tuple
    ) -> dict[str, np.ndarray]:
        """The policy's observation. Its arrays are reused by the next call (no allocation per cycle):
        copy them to keep them."""
        x, y, yaw = pose
        lim = self._lim
        obs = self._obs
        obs[:6] = (
            x,
            y,
            math.cos(yaw),
            math.sin(yaw),
            min(max(velocity[0] / self.max_linear, -lim), lim),
            min(max(velocity[1] / self.max_angular, -lim), lim),
        )
        np.multiply(ranges, self._inv_range, out=obs[6:], casting="unsafe")
        self._achieved[:] = obs[:2]
        self._desired[:] = goal
        return self._dict

    def command(
        self, pose: tuple[float, float, float], velocity: tuple[float, float], ranges: np.ndarray, goal: tuple
    ) -> tuple[float, float]:
        obs = self.observation(pose, velocity, ranges, goal)
        a = self._numpy(obs) if self._numpy is not None else np.asarray(self.policy(obs)).reshape(-1)  # type: ignore[operator]
        return float(a[0]) * self.max_linear, float(a[1]) * self.max_angular


class LatencyLog:
    """The last ``capacity`` cycles' timings (s), one column each, in a fixed array: a long-running node
    keeps no more."""

    def __init__(self, columns: tuple[str, ...], capacity: int = 200_000) -> None:
        self.columns = columns
        self._values = np.zeros((capacity, len(columns)), dtype=np.float64)
        self.count = 0  # cycles logged in all

    def add(self, *seconds: float) -> None:
        self._values[self.count % self._values.shape[0]] = seconds
        self.count += 1

    def values(self) -> dict[str, list[float]]:
        """Each column's kept timings, oldest first."""
        cap = self._values.shape[0]
        k = self.count % cap
        kept = self._values[: self.count] if self.count <= cap else np.concatenate((self._values[k:], self._values[:k]))
        return {name: kept[:, i].tolist() for i, name in enumerate(self.columns)}


def to_frame(pose: Pose2D, x: float, y: float) -> tuple[float, float]:
    """A point given in frame A as coordinates in frame B, where ``pose`` is B's pose in A (for a
    ``map`` -> ``odom`` transform: the odom frame's pose in the map)."""
    px, py, yaw = pose
    dx, dy = x - px, y - py
    c, s = math.cos(yaw), math.sin(yaw)
    return c * dx + s * dy, -s * dx + c * dy


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
