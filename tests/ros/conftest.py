"""ROS 2 tests: nodes in separate processes over real DDS, each test on its own ROS domain."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hrl.ros.domains import acquire_domain
from hrl.ros.runner import spin_until  # noqa: F401  (the tests import it from here)

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


class Processes:
    def __init__(self, tmp_path: Path) -> None:
        self.procs: list[tuple[subprocess.Popen, Path]] = []
        self.tmp = tmp_path

    def start(self, module: str, *params: str) -> subprocess.Popen:
        log = self.tmp / f"{module.rsplit('.', 1)[-1]}_{len(self.procs)}.log"
        args = [sys.executable, "-m", module, "--ros-args", *itertools.chain(*(("-p", p) for p in params))]
        proc = subprocess.Popen(args, cwd=ROOT, stdout=open(log, "w"), stderr=subprocess.STDOUT)  # noqa: SIM115
        self.procs.append((proc, log))
        return proc

    def log(self, proc: subprocess.Popen) -> str:
        return next(log.read_text() for p, log in self.procs if p is proc)

    def stop_all(self) -> None:
        for proc, _ in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc, _ in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


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
