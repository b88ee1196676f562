"""Planner comparison: ``hrl-benchmark``'s full grid, recorded in RESULTS.md with its plots.

Runs ``hrl-benchmark`` (planners graph, sorb, llm_goals, llm_route, flat, random x suites apartment_long,
maze_long x backends mujoco, pybullet x seeds 0, 1, 2, with the shipped low-level policy) into
``runs/benchmark/<name>``, copies its plots to ``benchmarks/planners_*.png`` and appends the table to
``benchmarks/RESULTS.md``. Interrupted, it resumes where it stopped (same ``--name``).

    python benchmarks/planners.py [--quick] [--no-record] [--name planners]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import RESULTS, emit, record

ROOT = Path(__file__).resolve().parents[1]
QUICK = ["planner=graph,flat", "task=apartment_long", "backend=mujoco,pybullet", "seed=0", "episodes=2"]
PLOTS = ("success_vs_length.png", "latency.png", "trajectories.png")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="graph and flat, 2 tasks, one seed (< 1 min)")
    parser.add_argument("--no-record", action="store_true", help="do not append to benchmarks/RESULTS.md")
    parser.add_argument("--name", default=None, help="sweep name (runs/benchmark/<name>); default planners[_quick]")
    parser.add_argument("--out", type=Path, default=None, help="sweep directory (default runs/benchmark/<name>)")
    parser.add_argument("overrides", nargs="*", help="more hrl-benchmark overrides (e.g. seed=0,1)")
    args = parser.parse_args()
    name = args.name or ("planners_quick" if args.quick else "planners")
    overrides = [f"name={name}", *(QUICK if args.quick else []), *args.overrides]
    sweep_dir = (args.out or ROOT / "runs" / "benchmark" / name).resolve()
    if args.out is not None:
        overrides.append(f"hydra.sweep.dir={sweep_dir}")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "hrl.benchmark", *overrides], cwd=ROOT, check=True)
    elapsed = time.perf_counter() - t0
    results = json.loads((sweep_dir / "results.json").read_text())

    figures = {
        "quick": args.quick,
        "sweep_dir": _shown(sweep_dir),
        "wall_time_s": round(elapsed, 1),
        "episodes": sum(r["episodes"] for r in results),
        "success": {f"{r['planner']}/{r['suite']}/{r['backend']}": r["success_rate"] for r in results},
    }
    if not args.no_record:
        for plot in PLOTS:
            shutil.copyfile(sweep_dir / plot, RESULTS.parent / f"planners_{plot}")
        by_planner: dict[str, list[str]] = {}
        for r in results:
            lo, hi = r["success_ci95"]
            by_planner.setdefault(r["planner"], []).append(
                f"{r['suite']}/{r['backend']}: {r['success_rate']:.0%} ({lo:.0%}–{hi:.0%})"
            )
        record(
            "planners",
            figures,
            [
                f"{figures['episodes']} episodes, {elapsed / 60:.0f} min",
                "<br>".join(f"**{p}**: " + ", ".join(cells) for p, cells in by_planner.items()),
                f"`{_shown(sweep_dir)}/report.md`",
            ],
            ["sweep", "success per planner (suite/backend, 95 % CI)", "full table"],
        )
        if not args.quick:
            write_latest(sweep_dir, overrides, elapsed)
    emit(figures)


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def write_latest(sweep_dir: Path, overrides: list[str], elapsed: float) -> None:
    """Replace the "latest full run" block of RESULTS.md: command, full table, plots."""
    import re

    from benchmarks._common import machine

    start, end = "<!-- planners:latest:start -->", "<!-- planners:latest:end -->"
    block = "\n".join(
        [
            start,
            f"Latest full run: {time.strftime('%Y-%m-%d')}, {machine()}, {elapsed / 60:.0f} min "
            f"(`python benchmarks/planners.py`, i.e. `hrl-benchmark {' '.join(overrides)}`):",
            "",
            (sweep_dir / "results.md").read_text().rstrip(),
            "",
            "![success vs task length](planners_success_vs_length.png)",
            "",
            "![planning latency](planners_latency.png)",
            "",
            "![paths of every planner on one task](planners_trajectories.png)",
            end,
        ]
    )
    text = RESULTS.read_text()
    if start in text:
        text = re.sub(re.escape(start) + ".*?" + re.escape(end), lambda _: block, text, flags=re.S)
    else:
        text = text.replace("<!-- planners:end -->", "<!-- planners:end -->\n\n" + block, 1)
    RESULTS.write_text(text)


if __name__ == "__main__":
    main()
