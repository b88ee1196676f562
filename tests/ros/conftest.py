"""ROS 2 tests: nodes in separate processes over real DDS, each test on its own ROS domain."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hrl.ros.domains import acquire_domain
from hrl.ros.runner import NodeProcesses, spin_until

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def own_domain() -> Iterator[str]:
    """A ROS domain of its own (``hrl.ros.domains``: never shared with another test of this run or with
    another process on the machine) in ``ROS_DOMAIN_ID``, localhost only; the environment restored after."""
    domain = acquire_domain()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ROS_DOMAIN_ID", str(domain.id))
        mp.setenv("ROS_LOCALHOST_ONLY", "1")
        try:
            yield str(domain.id)
        finally:
            domain.release()


@pytest.fixture
def ros_domain():
    """A ROS domain of its own, so tests (and other runs on the machine) never hear each other."""
    with own_domain() as domain:
        yield domain


class Processes(NodeProcesses):
    """Node processes logging to the test's ``tmp`` directory."""

    def __init__(self, tmp_path: Path) -> None:
        super().__init__(tmp_path)
        self.tmp = tmp_path


@pytest.fixture
def processes(tmp_path, ros_domain):
    procs = Processes(tmp_path)
    yield procs
    procs.stop_all()


@pytest.fixture
def rclpy_node(ros_domain):
    """An rclpy node in the test process (for publishing and listening)."""
    import rclpy

    rclpy.init()
    node = rclpy.create_node(f"test_{os.getpid()}")
    yield node
    node.destroy_node()
    rclpy.shutdown()


def sched_fifo_allowed() -> bool:
    """Whether this process may put threads under SCHED_FIFO (root, or an rtprio limit)."""
    import os
    import resource

    return os.geteuid() == 0 or resource.getrlimit(resource.RLIMIT_RTPRIO)[0] >= 1


def status_handshake(node, goal_writer, status, timeout_s=30.0):
    """Wait until a /task_status of the planner node has reached this test; False if none does in ``timeout_s``.
    A reader that counts the node's writer as matched may not yet be matched by it, and a volatile status sent
    before that is lost: a third fresh-clone CI run (2026-12-07, after 6456b3c) lost the first "planning: ..." so.
    A goal in a frame the node refuses is answered at once with a failure and starts nothing; it is sent each
    second until an answer comes back, then the answers still in flight are let arrive and ``status`` is
    emptied."""
    from geometry_msgs.msg import PoseStamped

    refused = PoseStamped()
    refused.header.frame_id = "handshake"
    refused.pose.orientation.w = 1.0
    answered = lambda: any("in frame 'handshake'" in s for s in status)  # noqa: E731
    deadline = time.monotonic() + timeout_s
    while not answered():
        if time.monotonic() > deadline:
            return False
        goal_writer.publish(refused)
        spin_until(node, answered, 1.0)
    spin_until(node, lambda: False, 1.5)
    status.clear()
    return True
