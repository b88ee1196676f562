"""How a mobile base applies velocity commands in time. The simulated robot (``hrl.ros.sim_robot_node``) and
the sim-to-real replay (``hrl.sim2real``) both drive through this module, so a recorded command is replayed
at the moment the robot applied it.

A base takes a command when it arrives, holds it until the next one, and stops once the latest is older
than its timeout (:class:`CommandTimeline`). The simulator integrates in physics steps of
:data:`PHYSICS_DT`, each on the command in force averaged over the step (:func:`drive`): a command that
arrives 3 ms into a step drives 7/10 of it. The control period (``control_hz``) only says when odometry is
published.

Why: with one command per control period, a command that reaches the robot and the recorder a millisecond
apart, on either side of a period boundary, was replayed a whole period (100 ms at 10 Hz) off, and an
open-loop replay never recovers from the heading error (the same holds, 10x smaller, for one command per
physics step). Averaged over time, what the base does is a continuous function of when each command
arrived: a millisecond of difference between the robot's and the recorder's receive times moves the replay
by a millisecond's worth of motion, wherever the boundaries fall.

No ROS here: the replay runs from a bag without a ROS installation.
"""

from __future__ import annotations

import bisect
import math
from typing import Any

#: Seconds per physics step of the simulated base: the resolution at which a command takes effect.
PHYSICS_DT = 0.01


def physics_steps_per_period(control_hz: float) -> int:
    """Physics steps of :data:`PHYSICS_DT` in one control period; ``ValueError`` if not a whole number."""
    if isinstance(control_hz, bool) or not isinstance(control_hz, (int, float)) or not control_hz > 0:
        raise ValueError(f"control_hz must be a positive number, got {control_hz!r}")
    ratio = 1.0 / (control_hz * PHYSICS_DT)
    steps = round(ratio)
    if steps < 1 or abs(ratio - steps) > 1e-6:
        raise ValueError(
            f"control_hz = {control_hz:g}: the control period must be a whole number of {PHYSICS_DT:g} s physics "
            "steps (e.g. 10, 20, 25, 50 or 100 Hz)"
        )
    return steps


def make_base_env(world: Any, robot: Any, backend: str) -> Any:
    """``hrl/RoverNav-v0`` stepped one physics step at a time (drive it with :func:`drive`, not ``env.step``)."""
    import gymnasium as gym

    import sim  # noqa: F401  (registers the env)

    return gym.make(
        "hrl/RoverNav-v0", map=world, robot=robot, backend=backend, goal_mode="anywhere",
        control_hz=1.0 / PHYSICS_DT, physics_dt=PHYSICS_DT, max_steps=10**9,
    )  # fmt: skip


class CommandTimeline:
    """Velocity commands in arrival order, and what a base does with them over time.

    Args:
        timeout_s: a command older than this reads as a stop (as a base's command watchdog does).
        delay_s: every command takes effect this much after it arrived (a slow drive chain).
    """

    def __init__(self, timeout_s: float, delay_s: float = 0.0) -> None:
        self.timeout_s = timeout_s
        self.delay_s = delay_s
        self.pending: list[tuple[float, float, float]] = []  # (effective time, v, w) not in force yet, oldest first
        self.held = (-math.inf, 0.0, 0.0)  # the latest command in force
        self.last: tuple[float, float, float] | None = None  # the latest command added (arrival time, v, w)

    def add(self, t: float, v: float, w: float) -> None:
        """A command (m/s, rad/s) that arrived at ``t`` (s, on the clock :meth:`mean` is asked on)."""
        bisect.insort(self.pending, (t + self.delay_s, float(v), float(w)))  # receive times can tie or swap by µs
        self.last = (t, float(v), float(w))

    def mean(self, a: float, b: float) -> tuple[float, float]:
        """The command in force averaged over the time from ``a`` to ``b``: each command from when it took
        effect until the next one, zero while the latest is older than the timeout or not finite.
        Intervals asked must not go back in time (commands no longer in force are let go).

        An average, not the command at ``a``: a command moved by a millisecond then moves the result by a
        millisecond's worth, where taking the one at ``a`` would move it by a whole step or none.
        """
        v_sum = w_sum = 0.0
        t = a
        while True:
            while self.pending and self.pending[0][0] <= t:
                self.held = self.pending.pop(0)
            end = min(b, self.pending[0][0]) if self.pending else b
            t_cmd, v, w = self.held
            active = min(end, t_cmd + self.timeout_s) - t  # the watchdog stops the base at t_cmd + timeout
            if active > 0 and math.isfinite(v) and math.isfinite(w):
                v_sum, w_sum = v_sum + v * active, w_sum + w * active
            if end >= b:
                return v_sum / (b - a), w_sum / (b - a)
            t = end

    def clear(self) -> None:
        """Forget every command (the base stops)."""
        self.pending.clear()
        self.held = (-math.inf, 0.0, 0.0)


def drive(env: Any, commands: CommandTimeline, start: float, steps: int) -> bool:
    """Integrate ``steps`` physics steps from time ``start``, each on the command in force during it
    (:meth:`CommandTimeline.mean`) clipped to the robot's velocity limits; True if the chassis touched a wall.

    ``env`` comes from :func:`make_base_env` (one physics step per ``physics.step``).
    """
    u = env.unwrapped
    lim = u.robot.limits
    v_max, w_max = lim.max_linear_velocity, lim.max_angular_velocity
    touched = False
    for j in range(steps):
        t = start + j * PHYSICS_DT
        v, w = commands.mean(t, t + PHYSICS_DT)
        touched |= u.physics.step(min(max(v, -v_max), v_max), min(max(w, -w_max), w_max))
    return touched


#: What :meth:`WallClock.lag_warning` says, and what a recorded run looks for in a simulated robot's log.
LAG_MARK = "control periods due at once"


class WallClock:
    """Control periods kept in wall-clock time, as hardware keeps them (the simulated base here and the simulated
    arm, ``hrl.ros.sim_arm_node``): every period that has ended since ``t0`` is due (:meth:`catch_up`), so a late
    call (a loaded machine) does not slow simulated time down. More than ``max_catch_up_steps`` periods due at once:
    the oldest are dropped (simulated time falls behind, as a stalled driver would) and counted in :attr:`dropped`.
    """

    def __init__(self, period: float, t0: float, max_catch_up_steps: int) -> None:
        self.period, self.t0, self.max_catch_up_steps = period, t0, max_catch_up_steps
        self.steps = 0  # control periods simulated (stepped or dropped) since t0
        self.dropped = 0  # periods dropped because more than max_catch_up_steps were due at once

    def periods_due(self, now: float) -> int:
        """Control periods due at ``now`` and not simulated yet (rounded: a call a little early or late
        still counts as its own period)."""
        return round((now - self.t0) / self.period) - self.steps

    def catch_up(self, now: float) -> tuple[list[int], int, int]:
        """The periods to simulate at ``now`` (their numbers k: period k starts at ``t0 + k * period``), and how
        many were due and dropped; they count as simulated from here on."""
        due = self.periods_due(now)
        if due <= 0:
            return [], 0, 0
        dropped = max(0, due - self.max_catch_up_steps)
        periods = list(range(self.steps + dropped, self.steps + due))
        self.steps += due
        self.dropped += dropped
        return periods, due, dropped

    def lag_warning(self, due: int, dropped: int) -> str:
        """What to log when :meth:`catch_up` dropped periods."""
        return (
            f"{due} {LAG_MARK} (the machine is too slow for {1 / self.period:g} Hz): stepped "
            f"{due - dropped} (max_catch_up_steps), dropped {dropped}; simulated time is now "
            f"{self.dropped * self.period:.2f} s behind wall-clock time"
        )


class SimulatedBase(WallClock):
    """A simulated base keeping wall-clock time like hardware, without ROS: commands go in with their
    arrival times (:meth:`command`), and :meth:`advance` simulates every control period that has ended
    since ``t0``, so a late call (a loaded machine) does not slow simulated time down. More than
    ``max_catch_up_steps`` periods due at once: the oldest are dropped (simulated time falls behind, as a
    stalled driver would) and counted in :attr:`dropped`.

    Args:
        env: from :func:`make_base_env`, reset at the start pose.
        control_hz: periods per second (odometry rate); a whole number of physics steps each.
        t0: the time (s, any monotonic clock) simulated time starts at.
        cmd_timeout_s: a command older than this reads as a stop.
        latency_s: every command takes effect this much after it arrived.
        max_catch_up_steps: most periods simulated in one :meth:`advance`.
    """

    def __init__(
        self,
        env: Any,
        *,
        control_hz: float,
        t0: float,
        cmd_timeout_s: float,
        latency_s: float = 0.0,
        max_catch_up_steps: int = 10,
    ) -> None:
        self.env = env
        self.physics = env.unwrapped.physics
        self.physics_steps = physics_steps_per_period(control_hz)
        super().__init__(self.physics_steps * PHYSICS_DT, t0, max_catch_up_steps)
        self.commands = CommandTimeline(cmd_timeout_s, latency_s)

    def command(self, t: float, v: float, w: float) -> None:
        """A command that arrived at ``t`` (the clock of ``t0``)."""
        self.commands.add(t, v, w)

    def advance(self, now: float) -> tuple[int, int]:
        """Simulate the periods due at ``now``; returns (periods due, of them dropped)."""
        periods, due, dropped = self.catch_up(now)
        for k in periods:
            drive(self.env, self.commands, self.t0 + k * self.period, self.physics_steps)
        return due, dropped
