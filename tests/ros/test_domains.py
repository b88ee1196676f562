"""ROS domain ids: one allocator for every test module and benchmark, exclusive across processes."""

import subprocess
import sys

from hrl.ros.domains import FIRST, LAST, acquire_domain
from tests.ros.conftest import ROOT


def acquire_elsewhere(start: int) -> tuple[subprocess.Popen, int]:
    """Another process that asks for a domain starting its search at ``start``, and holds what it gets."""
    code = f"import hrl.ros.domains as d; d._next = {start}; print(d.acquire_domain().id, flush=True); input()"
    proc = subprocess.Popen(
        [sys.executable, "-c", code], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    return proc, int(proc.stdout.readline())


def test_each_call_gets_a_new_id_and_another_process_never_gets_a_held_one():
    a, b = acquire_domain(), acquire_domain()
    assert a.id != b.id and FIRST <= a.id <= LAST and FIRST <= b.id <= LAST
    other, held_there = acquire_elsewhere(start=a.id)  # it would take a.id first, were it free
    try:
        assert held_there not in (a.id, b.id)
    finally:
        other.communicate("\n", timeout=30)
    a.release()
    other, held_there = acquire_elsewhere(start=a.id)
    other.communicate("\n", timeout=30)
    assert held_there == a.id  # released: free for others
    c = acquire_domain()
    assert c.id != a.id  # but this process moves on (no late traffic of one test reaches the next)
    b.release()
    c.release()
