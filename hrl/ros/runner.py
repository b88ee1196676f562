"""Run one node until Ctrl-C or SIGTERM, then stop it safely (a final zero command) and shut down; start
nodes as processes of their own (:class:`NodeProcesses`) and spin until a condition holds."""

from __future__ import annotations

import contextlib
import gc
import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hrl.ros.params import ParameterError

#: Highest SCHED_FIFO priority a node may ask for (Linux allows 1..99; 99 is the kernel's own watchdogs' level).
MAX_THREAD_PRIORITY = 98


def thread_priority(value: Any) -> str | None:
    """Check of a ``thread_priority`` parameter (0: normal scheduling; 1..98: SCHED_FIFO at that priority)."""
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_THREAD_PRIORITY
    return None if ok else f"must be an integer from 0 (normal scheduling) to {MAX_THREAD_PRIORITY} (SCHED_FIFO)"


def set_thread_priority(priority: int) -> str | None:
    """Put every thread of this process (the executor's, DDS's, a node's workers; threads started later inherit
    it) under SCHED_FIFO at ``priority``, as ros2_control's controller manager does with its ``thread_priority``:
    a control loop is then not preempted by ordinary processes. Returns None when done, else why not (the
    process keeps normal scheduling: the caller logs it). 0: nothing to do."""
    if priority == 0:
        return None
    if not hasattr(os, "sched_setscheduler") or not os.path.isdir("/proc/self/task"):
        return f"thread_priority {priority}: SCHED_FIFO needs Linux (this is {sys.platform}); normal scheduling"
    done = []
    try:
        for tid in sorted(int(t) for t in os.listdir("/proc/self/task")):
            try:
                os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(priority))
                done.append(tid)
            except ProcessLookupError:  # a thread that ended meanwhile
                continue
    except PermissionError as err:
        normal_scheduling(done)  # all or nothing: a half real-time process would only move the waits around
        return (
            f"thread_priority {priority}: SCHED_FIFO refused ({err.strerror}); the node runs with normal scheduling. "
            "Allow it with CAP_SYS_NICE or a real-time priority limit (ulimit -r 99; /etc/security/limits.conf: "
            "'<user> - rtprio 99', as for ros2_control), or set thread_priority 0 to silence this"
        )
    return None


def normal_scheduling(tids: list[int] | None = None) -> None:
    """Put threads ``tids`` (None: every thread of this process) back under normal scheduling (SCHED_OTHER)."""
    for tid in map(int, os.listdir("/proc/self/task")) if tids is None else tids:
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))


#: The executors a node can spin on (a node's ``executor_kind`` attribute picks one; ``single`` without it).
EXECUTORS = ("single", "events")


def make_executor(kind: str) -> Any:
    """``single``: rclpy's ``SingleThreadedExecutor``; ``events``: its ``EventsExecutor`` (rclpy.experimental),
    which dispatches each message from C++ with far less Python per callback: the arm policy node hears a
    hundred joint states and several hundred object poses a second while its skill loop needs the GIL."""
    if kind == "events":
        from rclpy.experimental import EventsExecutor

        return EventsExecutor()
    if kind == "single":
        from rclpy.executors import SingleThreadedExecutor

        return SingleThreadedExecutor()
    raise ValueError(f"executor {kind!r}: must be one of {', '.join(EXECUTORS)}")


def run_node(
    make: Callable[..., Any], argv: list[str] | None = None, *, freeze_gc: bool = False, **overrides: Any
) -> int:
    """Run the node ``make(**overrides)`` builds. ``freeze_gc``: after start-up, move everything alive into
    Python's permanent generation (``gc.freeze()``): a control node's model and libraries never become garbage,
    and a full collection walking them was the control loop's tail. Process-wide, so here and not in a node; so is
    scheduling: a node with a ``thread_priority`` attribute > 0 runs its threads under SCHED_FIFO
    (:func:`set_thread_priority`; a warning when the system refuses)."""
    import rclpy
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
    if freeze_gc:
        gc.collect()
        gc.freeze()
    priority = getattr(node, "thread_priority", 0)
    refused = set_thread_priority(priority)
    if refused is not None:
        node.get_logger().warning(refused)
    elif priority:
        node.get_logger().info(f"threads under SCHED_FIFO, priority {priority}")
    executor = make_executor(getattr(node, "executor_kind", "single"))
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


class NodeProcesses:
    """Nodes in processes of their own (``python -m <module> --ros-args -p name:=value ...``), as ``ros2
    launch`` would start them, each logging to a file in ``log_dir``; on the caller's ``ROS_DOMAIN_ID``."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.procs: list[tuple[subprocess.Popen, Path]] = []

    def start(self, module: str, *params: str) -> subprocess.Popen:
        """Start ``module``'s node with parameters ``name:=value``."""
        log = self.log_dir / f"{module.rsplit('.', 1)[-1]}_{len(self.procs)}.log"
        args = [sys.executable, "-m", module, "--ros-args", *itertools.chain(*(("-p", p) for p in params))]
        root = Path(__file__).resolve().parents[2]
        proc = subprocess.Popen(args, cwd=root, stdout=open(log, "w"), stderr=subprocess.STDOUT)  # noqa: SIM115
        self.procs.append((proc, log))
        return proc

    def log(self, proc: subprocess.Popen) -> str:
        """What ``proc`` has written so far."""
        return next(log.read_text() for p, log in self.procs if p is proc)

    def report(self) -> str:
        """Every node: its log's name, whether it still runs (or how it ended), and what it has written."""
        parts = []
        for proc, log in self.procs:
            state = "running" if proc.poll() is None else f"exited with code {proc.returncode}"
            parts.append(f"--- {log.stem} ({state}) ---\n{log.read_text()}")
        return "\n".join(parts)

    def all_logs(self) -> str:
        """What every node has written so far, one after another."""
        return "".join(log.read_text() for _, log in self.procs)

    def stop_all(self, timeout_s: float = 10.0) -> None:
        """Ctrl-C to every node still running (their own clean stop), then kill what has not ended."""
        for proc, _ in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc, _ in self.procs:
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
