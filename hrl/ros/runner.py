"""Run one node until Ctrl-C or SIGTERM, then stop it safely (a final zero command) and shut down."""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from typing import Any

from hrl.ros.params import ParameterError


def run_node(make: Callable[..., Any], argv: list[str] | None = None, **overrides: Any) -> int:
    import rclpy
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor

    rclpy.init(args=sys.argv if argv is None else ["node", *argv])
    # SIGTERM takes the same path as Ctrl-C: leave spin, publish the final stop, shut down
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        node = make(**overrides)
    except ParameterError as err:
        print(f"[hrl.ros] {err}", file=sys.stderr)
        rclpy.try_shutdown()
        return 2
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        stop = getattr(node, "stop", None)
        if stop is not None and rclpy.ok():
            stop()  # e.g. the policy node's final zero Twist
            executor.spin_once(timeout_sec=0.05)
        node.destroy_node()
        rclpy.try_shutdown()
    return 0
