"""The wheel carries every data file the code loads: robot models and meshes, maps, scenes, shipped policies,
prompts, the Hydra configs. (The Panda's meshes were once left out: an installed hrl-stack could not build the arm.
The configs lived only at the repository's top level, found from ``__file__``: a wheel had none and every Hydra
command failed outside the checkout; they now live in ``hrl/configs``, the top-level ``configs`` a link to it.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA_DIRS = ["robots", "sim/maps", "sim/scenes", "hrl/policies", "hrl/configs", "llm_planner/prompts"]
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


SKIP = (".venv", ".git", "runs", "build", "dist", "tests", "benchmarks", "docs", "outputs", "multirun")


def test_the_wheel_carries_the_configs_and_an_installed_copy_runs_hrl_eval(tmp_path):
    src = tmp_path / "src"
    ignore = shutil.ignore_patterns(*SKIP, "*.egg-info", "__pycache__", ".pytest_cache", ".ruff_cache")
    shutil.copytree(ROOT, src, symlinks=True, ignore=ignore)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    wheels = tmp_path / "wheels"
    subprocess.run([*pip, "wheel", str(src), "--no-deps", "--no-build-isolation", "-w", str(wheels)], check=True)
    (wheel,) = wheels.glob("hrl_stack-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for config in ("config.yaml", "eval.yaml", "planner/llm_goals.yaml", "planner/backend/llama_cpp.yaml",
                   "task/apartment_long.yaml", "task/tabletop_stack.yaml", "algo/sac_her.yaml"):  # fmt: skip
        assert f"hrl/configs/{config}" in names, config
    site = tmp_path / "site"
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)], check=True)
    # outside the checkout, the installed copy first on the path: one episode of a suite through hrl-eval
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}
    code = "import hrl, sys; from hrl.eval import main; print('from', hrl.__file__); sys.argv[0] = 'hrl-eval'; main()"
    args = ["planner=graph", "task=apartment_long", "tasks=1", "video_episodes=0"]
    run = subprocess.run([sys.executable, "-c", code, *args], cwd=outside, env=env, capture_output=True, text=True,
                         timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert f"from {site / 'hrl' / '__init__.py'}" in run.stdout
    assert "graph on apartment_long: success 100% over 1 episodes" in run.stdout
    assert list((outside / "runs" / "eval").iterdir())  # its run folder where it was started
