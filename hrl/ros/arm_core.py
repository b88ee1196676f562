"""The arm's safety filter and command shaping, without ROS (the arm policy node and ``RosArmPhysics`` wrap it).

Every joint target a skill asks for passes :class:`ArmSafetyFilter` before it is published:

- **holds** (the measured position published as the target once, then nothing new until the fault clears):
  a latched e-stop, no joint state yet, joint states older than ``stale_timeout_s``, a non-finite joint state
  or object pose, a non-finite target, a target whose TCP leaves the workspace box;
- **limits** (the target changed, the motion goes on): joint position limits (the arm spec's), joint speed
  (the spec's velocity × the control period: the whole step is scaled, so the TCP keeps its direction, as the
  tabletop env does), the gripper range ``0 .. max_width``.

Each decision says why (:class:`Command`: ``rule`` names the rule, ``reason`` the value and the rule), so the
node logs every refusal once per fault. :func:`interpolate` turns one skill period's target into the points of a
``JointTrajectory`` for a joint trajectory controller; :func:`tcp_velocity` into a servo node's Cartesian twist.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from robots.arm import ArmSpec
from robots.kinematics import KinematicChain

#: Highest TCP position (m above the table) the default workspace allows (the tabletop env's ``MAX_TCP_HEIGHT``).
DEFAULT_WORKSPACE_TOP = 0.5
#: A joint step at most this much over its speed limit is not scaled (the env scales to exactly the limit).
SPEED_SLACK = 1e-6

# Rule names, as ``Command.rule`` reports them (and the node's log and status repeat them).
ESTOP, NO_STATE, STALE, NONFINITE_STATE, OBJECT, NONFINITE_TARGET, WORKSPACE = (
    "e-stop",
    "no joint state",
    "stale joint state",
    "unusable joint state",
    "unusable object pose",
    "non-finite target",
    "workspace",
)
POSITION_LIMIT, SPEED_LIMIT, GRIPPER_RANGE = "joint position limit", "joint speed limit", "gripper range"
HOLD_RULES = (ESTOP, NO_STATE, STALE, NONFINITE_STATE, OBJECT, NONFINITE_TARGET, WORKSPACE)


def _fmt(v: Sequence[float]) -> str:
    return "(" + ", ".join(f"{float(x):.3f}" for x in v) + ")"


@dataclass(frozen=True)
class Workspace:
    """The box (world frame, m) the TCP must stay in; ``tolerance`` (m) admits the IK's residual at its faces."""

    low: tuple[float, float, float]
    high: tuple[float, float, float]
    tolerance: float = 0.0

    def __post_init__(self) -> None:
        values = [*self.low, *self.high, self.tolerance]
        if len(self.low) != 3 or len(self.high) != 3 or not all(math.isfinite(v) for v in values):
            raise ValueError(f"workspace needs 3 finite low and 3 finite high bounds, got {self.low}, {self.high}")
        if not all(lo < hi for lo, hi in zip(self.low, self.high, strict=True)):
            raise ValueError(f"workspace low {_fmt(self.low)} must lie below high {_fmt(self.high)} on every axis")
        if self.tolerance < 0:
            raise ValueError(f"workspace tolerance must be >= 0 m, got {self.tolerance}")

    @classmethod
    def parse(cls, text: str, scene: Any, tolerance: float = 0.0) -> Workspace:
        """``"xmin,ymin,zmin,xmax,ymax,zmax"`` (m, world frame), or ``""``: the scene table's top, z 0 .. 0.5 m."""
        if not text.strip():
            (x0, y0), (x1, y1) = scene.table.low, scene.table.high
            return cls((x0, y0, 0.0), (x1, y1, DEFAULT_WORKSPACE_TOP), tolerance)
        problem = workspace_text(text)
        if problem:
            raise ValueError(f"workspace {text!r} {problem}")
        v = [float(s) for s in text.split(",")]
        return cls((v[0], v[1], v[2]), (v[3], v[4], v[5]), tolerance)

    def describe(self) -> str:
        axes = zip("xyz", self.low, self.high, strict=True)
        return "box " + ", ".join(f"{a} {lo:.3f}..{hi:.3f}" for a, lo, hi in axes) + " m"

    def outside(self, p: np.ndarray) -> float:
        """How far (m) ``p`` lies outside the box (0 inside; the tolerance not applied)."""
        gap = np.maximum(np.maximum(np.asarray(self.low) - p, p - np.asarray(self.high)), 0.0)
        return float(np.linalg.norm(gap))


def workspace_text(value: Any) -> str | None:
    """``Param`` check of the ``workspace`` parameter: empty, or six numbers with each min below its max."""
    if not isinstance(value, str):
        return "must be a string"
    if not value.strip():
        return None
    parts = value.split(",")
    try:
        v = [float(s) for s in parts]
    except ValueError:
        v = []
    if len(parts) != 6 or len(v) != 6 or not all(math.isfinite(x) for x in v):
        return "must be 'xmin,ymin,zmin,xmax,ymax,zmax' (six numbers, m, world frame) or '' (the table, z 0..0.5)"
    if not all(v[i] < v[i + 3] for i in range(3)):
        return "must have each min below its max ('xmin,ymin,zmin,xmax,ymax,zmax')"
    return None


@dataclass(frozen=True)
class ArmLimits:
    """The spec's joint names, position limits (rad), speeds (rad/s) and the gripper's opening (m)."""

    names: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray
    velocity: np.ndarray
    max_width: float

    @classmethod
    def from_arm(cls, arm: ArmSpec) -> ArmLimits:
        return cls(
            tuple(arm.joint_names),
            np.array([j.lower for j in arm.joints]),
            np.array([j.upper for j in arm.joints]),
            np.array([j.velocity for j in arm.joints]),
            arm.gripper.max_width,
        )


@dataclass(frozen=True)
class Command:
    """What to publish: joint positions ``q`` and finger ``width``, or nothing (``q is None``).

    ``hold``: the target is the measured position (a fault: ``rule``/``reason`` say which); otherwise ``rule`` and
    ``reason`` say which limits changed the target (``"; "``-joined), None when it passed unchanged.
    """

    q: np.ndarray | None
    width: float | None
    hold: bool = False
    rule: str | None = None
    reason: str | None = None


@dataclass
class ArmSafetyFilter:
    """Joint targets → what may be published (see the module docstring). Not thread-safe: one caller at a time
    (``RosArmPhysics`` holds a lock around it)."""

    limits: ArmLimits
    workspace: Workspace
    chain: KinematicChain
    base: np.ndarray
    period: float
    stale_timeout_s: float
    #: A latched e-stop: every target is held until released.
    estop: bool = False
    #: True after a hold was returned (the next holds publish nothing new).
    holding: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        for name in ("period", "stale_timeout_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0 (s), got {value}")
        self.base = np.asarray(self.base, dtype=float)
        self._max_step = self.limits.velocity * self.period

    # -- the inputs ---------------------------------------------------------------------------------------
    def state_fault(
        self, q: np.ndarray | None, state_time: float | None, now: float, problem: str | None = None
    ) -> tuple[str, str] | None:
        """``(rule, reason)`` when the measured state cannot be used: e-stop, none yet, stale, non-finite
        (``problem``: what the state's reader found wrong, e.g. a NaN), else None."""
        if self.estop:
            return ESTOP, "e-stop latched (std_msgs/Bool true on the e-stop topic; false releases it)"
        if problem is not None:
            rule = OBJECT if problem.startswith("object") else NONFINITE_STATE
            return rule, problem
        if q is None or state_time is None:
            return NO_STATE, "no joint state received yet"
        age = now - state_time
        if age > self.stale_timeout_s:
            return STALE, f"last joint state {age:.3f} s old > stale_timeout_s {self.stale_timeout_s} s"
        return None

    def goal_fault(self, goal: Any) -> str | None:
        """Why a TCP goal (world frame, m) is refused: not 3 finite numbers, or outside the workspace box."""
        g = np.asarray(goal, dtype=float).ravel()
        if g.shape != (3,) or not np.all(np.isfinite(g)):
            return f"goal {goal!r} is not 3 finite numbers (x, y, z in m, world frame)"
        gap = self.workspace.outside(g)
        if gap > self.workspace.tolerance:
            return f"goal {_fmt(g)} lies {gap:.3f} m outside the workspace {self.workspace.describe()}"
        return None

    # -- the decision -------------------------------------------------------------------------------------
    def filter(
        self,
        q_measured: np.ndarray | None,
        width_measured: float | None,
        q_target: Any,
        width_target: float,
        state_time: float | None,
        now: float,
        state_problem: str | None = None,
    ) -> Command:
        """The command for one control period. ``q_measured``: the last finite joint positions (None: none yet);
        ``state_time``: when they arrived; ``state_problem``: why the latest state or an object pose is unusable."""
        fault = self.state_fault(q_measured, state_time, now, state_problem)
        if fault is not None:
            return self.hold(q_measured, width_measured, *fault)
        assert q_measured is not None  # state_fault checked it
        q = np.asarray(q_target, dtype=float).ravel()
        if q.shape != self.limits.lower.shape or not np.all(np.isfinite(q)) or not math.isfinite(width_target):
            reason = f"target {np.asarray(q_target).tolist()!r}, width {width_target!r}: not {q.size} finite numbers"
            return self.hold(q_measured, width_measured, NONFINITE_TARGET, reason)
        rules, reasons = [], []
        clamped = np.minimum(np.maximum(q, self.limits.lower), self.limits.upper)
        if not np.array_equal(clamped, q):
            i = int(np.argmax(np.abs(clamped - q)))
            rules.append(POSITION_LIMIT)
            reasons.append(
                f"{self.limits.names[i]} target {q[i]:.4f} rad beyond [{self.limits.lower[i]}, "
                f"{self.limits.upper[i]}] (joint position limits of the arm spec): clamped"
            )
            q = clamped
        step = q - q_measured
        ratio = np.abs(step) / self._max_step
        over = float(ratio.max())
        if over > 1.0 + SPEED_SLACK:
            i = int(np.argmax(ratio))
            rules.append(SPEED_LIMIT)
            reasons.append(
                f"{self.limits.names[i]} step {step[i]:.4f} rad in {self.period:.3f} s = "
                f"{abs(step[i]) / self.period:.3f} rad/s > {self.limits.velocity[i]} rad/s (joint speed limit of the "
                f"arm spec): step scaled by {1 / over:.3f}"
            )
            q = np.minimum(np.maximum(q_measured + step / over, self.limits.lower), self.limits.upper)
        width = min(max(float(width_target), 0.0), self.limits.max_width)
        if width != width_target:
            rules.append(GRIPPER_RANGE)
            reasons.append(f"finger width {width_target:.4f} m outside 0..{self.limits.max_width} m: clamped")
        tcp = self.chain.forward(q, self.base)[0]
        gap = self.workspace.outside(tcp)
        if gap > self.workspace.tolerance:
            # Moving back towards the box from outside it is allowed; anything else is refused.
            here = self.workspace.outside(self.chain.forward(q_measured, self.base)[0])
            if gap >= here:
                reason = (
                    f"target TCP {_fmt(tcp)} lies {gap:.3f} m outside the workspace {self.workspace.describe()} "
                    f"(tolerance {self.workspace.tolerance} m)"
                )
                return self.hold(q_measured, width_measured, WORKSPACE, reason)
        self.holding = False
        return Command(q, width, False, "; ".join(rules) or None, "; ".join(reasons) or None)

    def hold(self, q_measured: np.ndarray | None, width: float | None, rule: str, reason: str) -> Command:
        """Hold at the measured position: published once (the first hold of a fault), then nothing new."""
        first = not self.holding
        self.holding = True
        if not first or q_measured is None:
            return Command(None, None, True, rule, reason)
        w = None if width is None else min(max(float(width), 0.0), self.limits.max_width)
        return Command(np.asarray(q_measured, dtype=float).copy(), w, True, rule, reason)


def interpolate(
    q_from: np.ndarray, q_to: np.ndarray, period: float, rate_hz: float
) -> tuple[list[float], np.ndarray, np.ndarray]:
    """Points of one period's trajectory: times from the start (s), positions (n, joints), velocities (n, joints).

    ``n = round(period × rate_hz)`` points (at least one), evenly spaced, the last at ``period``; positions linear
    from ``q_from`` (excluded: where the arm is) to ``q_to``; velocities the constant ``(q_to - q_from) / period``
    except at the last point, where the arm comes to rest: a stream that stops (a fault, the end of a skill)
    leaves the arm still instead of asking the controller to be moving at the end of the trajectory.
    """
    if not (math.isfinite(period) and period > 0 and math.isfinite(rate_hz) and rate_hz > 0):
        raise ValueError(f"period and rate_hz must be finite numbers > 0, got {period}, {rate_hz}")
    q0, q1 = np.asarray(q_from, dtype=float), np.asarray(q_to, dtype=float)
    n = max(1, round(period * rate_hz))
    fractions = np.arange(1, n + 1) / n
    positions = q0 + fractions[:, None] * (q1 - q0)
    velocities = np.repeat(((q1 - q0) / period)[None], n, axis=0)
    velocities[-1] = 0.0
    return [float(f * period) for f in fractions], positions, velocities


def tcp_velocity(chain: KinematicChain, q_from: np.ndarray, q_to: np.ndarray, period: float) -> np.ndarray:
    """The TCP's linear velocity (m/s, base frame) that covers the displacement from ``q_from`` to ``q_to`` in
    ``period`` s: what a servo node (MoveIt Servo style) takes instead of joint targets."""
    return (chain.forward(q_to)[0] - chain.forward(q_from)[0]) / period
