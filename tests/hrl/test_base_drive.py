"""How the simulated base (and the sim-to-real replay) apply velocity commands in time: each from its
arrival, averaged over a physics step, stopped by the watchdog; and the base keeps wall-clock time."""

import math

import pytest

from hrl.base_drive import CommandTimeline, SimulatedBase, make_base_env, physics_steps_per_period


def test_a_command_drives_the_part_of_a_step_after_its_arrival():
    commands = CommandTimeline(timeout_s=0.5)
    commands.add(0.003, 1.0, -2.0)
    assert commands.mean(0.0, 0.01) == pytest.approx((0.7, -1.4))  # 3 ms at rest, then 7 ms of the command
    assert commands.mean(0.01, 0.02) == pytest.approx((1.0, -2.0))


def test_moving_a_command_across_a_step_boundary_moves_the_result_by_as_much_and_no_more():
    # the property the sim-to-real replay relies on: no jump when a command crosses a step boundary
    def two_steps(arrival):
        commands = CommandTimeline(timeout_s=0.5)
        commands.add(arrival, 1.0, 0.0)
        return commands.mean(0.0, 0.01)[0] + commands.mean(0.01, 0.02)[0]  # in units of 10 ms at 1 m/s

    for arrival in (0.0099, 0.01, 0.0101):
        assert two_steps(arrival) == pytest.approx((0.02 - arrival) / 0.01)


def test_the_watchdog_stops_the_base_mid_step_and_bad_values_read_as_a_stop():
    commands = CommandTimeline(timeout_s=0.5)
    commands.add(0.0, 1.0, 1.0)
    assert commands.mean(0.495, 0.505) == pytest.approx((0.5, 0.5))  # older than 0.5 s half-way through
    assert commands.mean(0.6, 0.61) == (0.0, 0.0)
    commands.add(0.7, math.nan, 1.0)
    assert commands.mean(0.7, 0.71) == (0.0, 0.0)


def test_latency_delays_every_command_and_out_of_order_arrivals_are_sorted():
    commands = CommandTimeline(timeout_s=0.5, delay_s=0.2)
    commands.add(0.02, 2.0, 0.0)
    commands.add(0.01, 1.0, 0.0)  # arrived first: receive times of close messages can swap by microseconds
    assert commands.mean(0.0, 0.21) == (0.0, 0.0)
    assert commands.mean(0.21, 0.22) == pytest.approx((1.0, 0.0))
    assert commands.mean(0.22, 0.23) == pytest.approx((2.0, 0.0))


def test_control_rates_that_are_not_whole_physics_steps_are_refused():
    assert physics_steps_per_period(10.0) == 10 and physics_steps_per_period(50) == 2
    with pytest.raises(ValueError, match="control_hz = 30: the control period must be a whole number"):
        physics_steps_per_period(30.0)
    with pytest.raises(ValueError, match="control_hz must be a positive number, got 0"):
        physics_steps_per_period(0)


def test_a_late_call_steps_every_period_due_and_beyond_the_cap_drops_the_oldest():
    env = make_base_env("open", "rover", "mujoco")
    env.reset(seed=0, options={"start": (3.0, 3.0, 0.0)})
    base = SimulatedBase(env, control_hz=10.0, t0=100.0, cmd_timeout_s=60.0, max_catch_up_steps=3)
    base.command(100.0, 0.4, 0.0)
    assert base.advance(100.04) == (0, 0)  # the first period has not ended
    assert base.advance(100.21) == (2, 0)  # a late call: both periods due are simulated
    x_after_two = base.physics.pose().x
    assert base.advance(100.71) == (5, 2) and base.dropped == 2  # 5 due, at most 3 at once
    moved = base.physics.pose().x - x_after_two
    # 3 periods from 0.2 m/s: up to 0.4 m/s at 1 m/s^2 (0.06 m), then 0.1 s at 0.4 (0.04 m); 5 would be 0.18 m
    assert moved == pytest.approx(0.10, abs=0.01)
    env.close()


def test_a_recorded_run_recognises_the_simulated_robots_own_lag_warning():
    """hrl.ros.recorded_run refuses an arm recording whose simulator dropped periods by finding this warning in its
    log: reworded, the refusal would go quiet (a CI failure once came from such a lag, read as a tracking error)."""
    from hrl.base_drive import WallClock
    from hrl.ros.recorded_run import lag_in

    clock = WallClock(period=0.04, t0=0.0, max_catch_up_steps=10)
    assert clock.catch_up(0.2)[1:] == (5, 0)  # kept up: nothing to say
    _, due, dropped = clock.catch_up(1.5)  # a 1.3 s stall: 33 periods due, 23 dropped
    assert (due, dropped) == (33, 23)
    line = f"[WARN] [1733480000.1] [sim_arm_node]: {clock.lag_warning(due, dropped)}"
    assert lag_in(f"[INFO] [sim_arm_node]: up\n{line}\n[INFO] [sim_arm_node]: more") == line
    assert "dropped 23" in line and "0.92 s behind" in line
    assert lag_in("[INFO] [sim_arm_node]: up\n[INFO] [sim_arm_node]: stopping") is None
