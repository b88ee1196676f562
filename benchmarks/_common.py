"""Helpers shared by the benchmark scripts: machine description, JSON output, RESULTS.md records."""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def rate(fn: Callable[[], Any], n: int) -> float:
    """Calls per second of ``fn`` over ``n`` calls."""
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return n / (time.perf_counter() - t0)


def interleaved_rates(cases: dict[str, Callable[[], Any]], n: int, rounds: int) -> dict[str, list[float]]:
    """The rate of each case in each of ``rounds`` rounds, the cases alternating within each round.

    Alternating puts every case under the same background load (these machines are shared and noisy), so
    ratios between cases are trustworthy even when absolute rates drift: compare them round by round
    (:func:`paired_ratio`) and quote medians.
    """
    samples: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(rounds):
        for name, fn in cases.items():
            samples[name].append(rate(fn, n))
    return samples


def paired_ratio(samples: dict[str, list[float]], case: str, reference: str) -> float:
    """Median over rounds of ``case``'s rate divided by ``reference``'s in the same round (same load, and
    in the throughput benchmarks the same stretch of trajectory)."""
    return statistics.median(a / b for a, b in zip(samples[case], samples[reference], strict=True))


def record(benchmark: str, figures: dict[str, Any], table_row: list[str], header: list[str]) -> None:
    """Append one run (date, machine, command, figures) to the benchmark's table in RESULTS.md."""
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    start, end = f"<!-- {benchmark}:start -->", f"<!-- {benchmark}:end -->"
    row = "| " + " | ".join([_dt.date.today().isoformat(), machine(), "`" + command() + "`", *table_row]) + " |"
    if start not in text:
        head = "| " + " | ".join(["date", "machine", "command", *header]) + " |"
        rule = "|" + "---|" * (3 + len(header))
        text = text.rstrip() + f"\n\n## {benchmark}\n\n{start}\n{head}\n{rule}\n{end}\n"
    text = re.sub(re.escape(end), row + "\n" + end, text, count=1)
    RESULTS.write_text(text)


def command() -> str:
    return " ".join(["python", os.path.relpath(sys.argv[0]), *sys.argv[1:]])


def emit(figures: dict[str, Any]) -> None:
    """The last line of every benchmark's output: one JSON object."""
    print(json.dumps(figures, sort_keys=True))


def parse_sets(parser: Any, items: list[str]) -> dict[str, Any]:
    """``--set KEY=VALUE ...`` as a dict of planner parameters (values read as YAML); a bad item is the
    parser's error, naming it."""
    import yaml

    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--set takes KEY=VALUE, got {item!r}")
        out[key] = yaml.safe_load(value)
    return out
