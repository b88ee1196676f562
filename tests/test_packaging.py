"""The wheel carries every data file the code loads: robot models and meshes, maps, scenes, shipped policies,
prompts. (The Panda's meshes were once left out: an installed hrl-stack could not build the arm.)"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA_DIRS = ["robots", "sim/maps", "sim/scenes", "hrl/policies", "llm_planner/prompts"]
#: What the repository holds there that is not for the installed package.
NOT_SHIPPED = {".py", ".pyc", ".md"}


def test_the_wheel_holds_every_data_file(tmp_path):
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(ROOT),
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    tracked = subprocess.run(
        ["git", "ls-files", *DATA_DIRS], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.split()
    missing = [p for p in tracked if Path(p).suffix not in NOT_SHIPPED and p not in shipped]
    assert not missing, f"tracked data files missing from the wheel (pyproject.toml package-data): {missing}"
    assert any(p.startswith("robots/panda/meshes/") for p in shipped)
