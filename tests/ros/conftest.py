"""ROS 2 tests: nodes in separate processes over real DDS, each test on its own ROS domain."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hrl.ros.runner import spin_until  # noqa: F401  (the tests import it from here)

ROOT = Path(__file__).resolve().parents[2]
_domains = itertools.count(100 + os.getpid() % 50)


@pytest.fixture
def ros_domain(monkeypatch):
    """A ROS domain of its own, so tests (and other runs on the machine) never hear each other."""
    domain = str(next(_domains))
    monkeypatch.setenv("ROS_DOMAIN_ID", domain)
    monkeypatch.setenv("ROS_LOCALHOST_ONLY", "1")
    return domain


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
