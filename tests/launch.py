"""``accelerate launch`` for the tests of the training commands' data-parallel path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def accelerate_launch(
    module: str, *args: str, processes: int = 2, timeout: float = 300, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    """``accelerate launch --multi_gpu --num_processes N -m MODULE ARGS``: the command a user runs on GPUs; on a
    machine without them accelerate runs the processes on the CPU (gloo), as on GPUs but slower."""
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", f"--num_processes={processes}"]
    return subprocess.run(
        [*launch, "--num_machines=1", "--mixed_precision=no", "--dynamo_backend=no", "-m", module, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )
