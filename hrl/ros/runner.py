"""Run one node until Ctrl-C or SIGTERM, then stop it safely (a final zero command) and shut down."""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from hrl.ros.params import ParameterError


def run_node(make: Callable[..., Any], argv: list[str] | None = None, **overrides: Any) -> int:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions

    # Our handlers, not rclpy's (which would shut the context down before the node's final stop), and
    # no exception from a handler (it could land inside rclpy's C++ code): a flag ends the spin loop.
    rclpy.init(args=sys.argv if argv is None else ["node", *argv], signal_handler_options=SignalHandlerOptions.NO)
    stopping = {"now": False}

    def on_signal(*_: Any) -> None:
        stopping["now"] = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        node = make(**overrides)
    except ParameterError as err:
        print(f"[hrl.ros] {err}", file=sys.stderr)
        rclpy.try_shutdown()
        return 2
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        while not stopping["now"] and rclpy.ok():
            executor.spin_once(timeout_sec=0.1)
    finally:
        stop = getattr(node, "stop", None)
        if stop is not None:
            stop()  # the policy node's final zero Twist, the recorder's bag metadata
            if rclpy.ok():  # let DDS deliver it before the participant goes away
                executor.spin_once(timeout_sec=0.05)
                time.sleep(0.2)
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


def spin_until(node: Any, done: Callable[[], bool], timeout_s: float) -> bool:
    """Spin ``node`` until ``done()`` is true (True) or ``timeout_s`` passes (False)."""
    import rclpy

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.05)
        if done():
            return True
    return False
