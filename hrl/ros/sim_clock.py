"""What the simulated robots (``sim_robot_node``, ``sim_arm_node``) share to keep time like hardware, besides the
wall-clock control periods (:class:`hrl.base_drive.WallClock`): a command's time is when DDS received it, and
commands DDS already holds are taken before a period is simulated."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def received_at(info: Any) -> float:
    """When DDS received a message (its message info), on this process's monotonic clock: as a driver would take
    it, not when the executor got round to the callback (late on a loaded machine). rmw implementations without a
    receive time report 0: now."""
    now = time.monotonic()
    received_ns = info["received_timestamp"]
    return now - max(0.0, time.time() - received_ns * 1e-9) if received_ns else now


def take_pending(subscription: Any, callback: Callable[..., Any]) -> None:
    """Hand ``callback`` (message, info) every message DDS holds for ``subscription`` that the executor has not
    called back yet.

    The executor runs a ready timer before a ready subscription, so on a loaded machine a command received inside
    the period about to be simulated can still be waiting: simulated without it, the robot would apply it up to a
    period late while a recording says it arrived in time. rclpy has no public 'take', so this does what the
    executor does with a ready subscription.
    """
    while True:
        with subscription.handle:
            taken = subscription.handle.take_message(subscription.msg_type, subscription.raw)
        if taken is None:
            return
        callback(*taken)
