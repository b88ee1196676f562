"""ROS domain ids for tests and benchmarks: one allocator, so runs on one machine never hear each other.

Each caller takes a domain with :func:`acquire_domain` and holds it until ``release()`` (or until its
process ends). A domain is held by an exclusive ``flock`` on a file in the temporary directory, so two
pytest processes (or a test run and a benchmark) never get the same id, and a crashed process frees its
domains at once (the kernel drops its locks). Within a process the ids are handed out in order from
:data:`FIRST` and reused only after all have been used, so one test's late DDS traffic cannot reach the next.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO

#: ids tried (ROS allows 0-232 with the default port mapping; 0-99 are left to people's own graphs)
FIRST, LAST = 100, 232
LOCK_DIR = Path(tempfile.gettempdir()) / "hrl_ros_domains"


_held: dict[int, IO[str]] = {}  # id -> its locked file (kept here, so dropping a Domain does not release it)
_next = FIRST  # this process's next id to try


@dataclass(frozen=True)
class Domain:
    """A ROS domain id held by this process until :meth:`release` or the process's end."""

    id: int

    def release(self) -> None:
        lock = _held.pop(self.id, None)
        if lock is not None:
            lock.close()  # closing the file drops the flock


def acquire_domain() -> Domain:
    """The next domain id no other process on this machine holds; RuntimeError when all are taken."""
    global _next
    LOCK_DIR.mkdir(exist_ok=True)
    span = LAST - FIRST + 1
    for k in range(span):
        candidate = FIRST + (_next - FIRST + k) % span
        lock = open(LOCK_DIR / f"{candidate}.lock", "a+")  # noqa: SIM115 (held as long as the domain)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        lock.truncate(0)
        lock.write(f"{os.getpid()}\n")  # who holds it, for a person looking
        lock.flush()
        _next = candidate + 1
        _held[candidate] = lock
        return Domain(candidate)
    raise RuntimeError(
        f"all ROS domain ids {FIRST}-{LAST} are held by other processes on this machine "
        f"(lock files in {LOCK_DIR}); wait for those runs to end"
    )
