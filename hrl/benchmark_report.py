"""Tables, plots and ``report.md`` from an ``hrl-benchmark`` sweep directory.

    hrl-benchmark-report runs/benchmark/default      # (hrl-benchmark writes it itself when a sweep ends)

Per planner x suite x backend, over all seeds and tasks: success rate with its 95 % Wilson interval;
steps, path length, collisions and replans with 95 % bootstrap intervals of the mean; planning latency
(median and 95th percentile of every planner call) and tokens per episode. Written as ``results.csv``,
``results.md`` and ``results.json``; plots ``success_vs_length.png`` (success vs doors between start and
goal, per planner), ``latency.png`` (planning latency distribution per planner) and ``trajectories.png``
(top-down paths of every planner on one task).

A tabletop sweep (``hrl-benchmark grid=tabletop``) is tabulated per planner x suite x category (stack2, stack3,
sort, clear) x backend: success with its Wilson interval, the share of the tasks' goals that hold, steps and
replans with bootstrap intervals, latency and tokens; its plots are ``success_by_category.png`` and
``latency.png``. A sweep directory holds one domain.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import platform
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from hrl.benchmark import EPISODES_DIR, read_rows
from hrl.hierarchy_eval import wilson

#: Planners in the order tables and plots show them (others follow alphabetically).
ORDER = ["graph", "symbolic", "sorb", "llm_goals", "llm_route", "flat", "random"]
GROUP = ("planner", "suite", "backend")
#: A tabletop sweep's cells: per category of its suites (stack2, stack3, sort, clear).
TABLETOP_GROUP = ("planner", "suite", "category", "backend")
ROVER_METRICS = ("steps", "path_length", "collisions", "replans")
TABLETOP_METRICS = ("steps", "replans")


def load_rows(sweep_dir: Path) -> list[dict[str, Any]]:
    files = sorted((sweep_dir / EPISODES_DIR).glob("*.jsonl"))
    rows = [row for path in files for row in read_rows(path)]
    if not rows:
        raise ValueError(f"no episodes in {sweep_dir / EPISODES_DIR} (has the sweep run?)")
    return rows


def bootstrap_ci(values: list[float], n: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95 % percentile bootstrap interval of the mean."""
    if len(values) < 2:
        v = float(values[0]) if values else float("nan")
        return (v, v)
    arr = np.asarray(values, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = arr[rng.integers(0, len(arr), size=(n, len(arr)))].mean(axis=1)
    return (float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5)))


def domain_of(rows: list[dict[str, Any]]) -> str:
    """The one domain of a sweep's episodes (rover rows carry none: navigation); a mix is an error."""
    domains = {r.get("domain", "navigation") for r in rows}
    if len(domains) > 1:
        raise ValueError(
            f"the sweep mixes domains ({', '.join(sorted(domains))}); a sweep directory holds one: "
            "run each domain's suites under its own name=..."
        )
    return domains.pop()


def aggregate(
    rows: list[dict[str, Any]], group: tuple[str, ...] = GROUP, metrics: tuple[str, ...] = ROVER_METRICS
) -> list[dict[str, Any]]:
    """Per ``group`` cell: episodes, seeds, success (Wilson), ``metrics`` with bootstrap intervals, latency,
    tokens; tabletop cells (rows with ``goals_total``) also the share of their goals that hold."""
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[tuple(row[k] for k in group)].append(row)
    out = []
    for key in sorted(groups, key=_sort_key):
        g = groups[key]
        n = len(g)
        k = sum(bool(r["success"]) for r in g)
        latencies = [v for r in g for v in r.get("planner_latencies_s", [])]
        entry: dict[str, Any] = dict(zip(group, key, strict=True))
        entry.update(
            episodes=n,
            seeds=sorted({r["seed"] for r in g}),
            success_rate=round(k / n, 4),
            success_ci95=list(wilson(k, n)),
        )
        if all("goals_total" in r for r in g):
            entry["goals_held"] = round(sum(r["goals_reached"] for r in g) / sum(r["goals_total"] for r in g), 4)
        for metric in metrics:
            values = [float(r[metric]) for r in g]
            lo, hi = bootstrap_ci(values)
            entry[metric] = round(float(np.mean(values)), 3)
            entry[f"{metric}_ci95"] = [round(lo, 3), round(hi, 3)]
        entry["planner_calls"] = round(float(np.mean([r["planner_calls"] for r in g])), 2)
        entry["latency_p50_ms"] = round(1000 * float(np.median(latencies)), 2) if latencies else None
        entry["latency_p95_ms"] = round(1000 * float(np.percentile(latencies, 95)), 2) if latencies else None
        entry["tokens"] = round(float(np.mean([r.get("planner_tokens", 0) for r in g])), 1)
        out.append(entry)
    return out


def markdown(results: list[dict[str, Any]]) -> str:
    head = (
        "| planner | suite | backend | episodes | success (95 % CI) | steps (95 % CI) | path m (95 % CI) "
        "| collisions | replans | latency p50 / p95 ms | tokens |"
    )
    lines = [head, "|" + "---|" * 11]
    for r in results:
        lo, hi = r["success_ci95"]
        p50 = "–" if r["latency_p50_ms"] is None else f"{r['latency_p50_ms']:.1f} / {r['latency_p95_ms']:.1f}"
        lines.append(
            f"| {r['planner']} | {r['suite']} | {r['backend']} | {r['episodes']} "
            f"| {r['success_rate']:.0%} ({lo:.0%}–{hi:.0%}) "
            f"| {r['steps']:.0f} ({r['steps_ci95'][0]:.0f}–{r['steps_ci95'][1]:.0f}) "
            f"| {r['path_length']:.1f} ({r['path_length_ci95'][0]:.1f}–{r['path_length_ci95'][1]:.1f}) "
            f"| {r['collisions']:.2f} | {r['replans']:.2f} | {p50} | {r['tokens']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def tabletop_markdown(results: list[dict[str, Any]]) -> str:
    """The tabletop's cells (planner x suite x category x backend) as a markdown table."""
    head = (
        "| planner | suite | category | backend | episodes | success (95 % CI) | goals held | steps (95 % CI) "
        "| replans (95 % CI) | latency p50 / p95 ms | tokens |"
    )
    lines = [head, "|" + "---|" * 11]
    for r in results:
        lo, hi = r["success_ci95"]
        p50 = "–" if r["latency_p50_ms"] is None else f"{r['latency_p50_ms']:.2f} / {r['latency_p95_ms']:.2f}"
        lines.append(
            f"| {r['planner']} | {r['suite']} | {r['category']} | {r['backend']} | {r['episodes']} "
            f"| {r['success_rate']:.0%} ({lo:.0%}–{hi:.0%}) | {r['goals_held']:.0%} "
            f"| {r['steps']:.0f} ({r['steps_ci95'][0]:.0f}–{r['steps_ci95'][1]:.0f}) "
            f"| {r['replans']:.2f} ({r['replans_ci95'][0]:.2f}–{r['replans_ci95'][1]:.2f}) "
            f"| {p50} | {r['tokens']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def write_tables(results: list[dict[str, Any]], out_dir: Path, table: str | None = None) -> None:
    with open(out_dir / "results.csv", "w", newline="") as f:
        flat = [{k: (json.dumps(v) if isinstance(v, list) else v) for k, v in r.items()} for r in results]
        writer = csv.DictWriter(f, fieldnames=list(flat[0]))
        writer.writeheader()
        writer.writerows(flat)
    (out_dir / "results.md").write_text(markdown(results) if table is None else table)
    (out_dir / "results.json").write_text(json.dumps(results, indent=2))


# ---------------------------------------------------------------------------------------------- plots


def plot_success_vs_length(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    backends = sorted({r["backend"] for r in rows})
    planners = _planners(rows)
    fig, axes = plt.subplots(1, len(backends), figsize=(5.5 * len(backends), 4), squeeze=False, sharey=True)
    for ax, backend in zip(axes[0], backends, strict=True):
        for rank, planner in enumerate(planners):
            by_doors: dict[int, list[bool]] = defaultdict(list)
            for r in rows:
                if r["planner"] == planner and r["backend"] == backend:
                    by_doors[int(r["doors"])].append(bool(r["success"]))
            if not by_doors:
                continue
            xs = sorted(by_doors)
            ys = [np.mean(by_doors[x]) for x in xs]
            lo = [y - wilson(sum(by_doors[x]), len(by_doors[x]))[0] for x, y in zip(xs, ys, strict=True)]
            hi = [wilson(sum(by_doors[x]), len(by_doors[x]))[1] - y for x, y in zip(xs, ys, strict=True)]
            dodge = (rank - (len(planners) - 1) / 2) * 0.06  # side by side, so the intervals stay readable
            ax.errorbar([x + dodge for x in xs], ys, yerr=[lo, hi], marker="o", capsize=3, label=planner)
        doors = [int(r["doors"]) for r in rows]
        ax.set_xlim(min(doors) - 0.5, max(doors) + 0.5)
        ax.set_xticks(range(min(doors), max(doors) + 1))
        ax.set_title(backend)
        ax.set_xlabel("doors between start and goal")
        ax.set_ylim(-0.05, 1.05)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("success rate (95 % Wilson)")
    axes[0][-1].legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_success_by_category(results: list[dict[str, Any]], path: Path) -> None:
    """Tabletop: success (95 % Wilson) per category, one bar per planner and suite, one panel per backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    backends = sorted({r["backend"] for r in results})
    categories = sorted({r["category"] for r in results})
    planners = _planners(results)
    width = 0.8 / len(planners)
    fig, axes = plt.subplots(1, len(backends), figsize=(1.2 * len(categories) + 3, 4), squeeze=False, sharey=True)
    for ax, backend in zip(axes[0], backends, strict=True):
        for rank, planner in enumerate(planners):
            cells = {r["category"]: r for r in results if r["planner"] == planner and r["backend"] == backend}
            xs = [i + (rank - (len(planners) - 1) / 2) * width for i, c in enumerate(categories) if c in cells]
            ys = [cells[c]["success_rate"] for c in categories if c in cells]
            lo = [cells[c]["success_rate"] - cells[c]["success_ci95"][0] for c in categories if c in cells]
            hi = [cells[c]["success_ci95"][1] - cells[c]["success_rate"] for c in categories if c in cells]
            ax.bar(xs, ys, width, yerr=[lo, hi], capsize=3, label=planner)
        ax.set_xticks(range(len(categories)), categories)
        ax.set_title(backend)
        ax.set_ylim(0, 1.05)
        ax.grid(alpha=0.3, axis="y")
    axes[0][0].set_ylabel("success rate (95 % Wilson)")
    axes[0][-1].legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_latency(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    planners = [p for p in _planners(rows) if any(r["planner"] == p and r.get("planner_latencies_s") for r in rows)]
    data = [
        [1000 * max(v, 1e-6) for r in rows if r["planner"] == p for v in r.get("planner_latencies_s", [])]
        for p in planners
    ]
    fig, ax = plt.subplots(figsize=(1.3 * max(4, len(planners)) + 2, 4))
    if data:
        ax.boxplot(data, whis=(5, 95), showfliers=True)
        ax.set_xticks(range(1, len(planners) + 1), planners)
    ax.set_yscale("log")
    ax.set_ylabel("planning latency per call (ms, log)")
    ax.set_title("planner latency (box: quartiles, whiskers: 5th-95th percentile)")
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_trajectories(rows: list[dict[str, Any]], path: Path) -> dict[str, Any]:
    """One thumbnail per planner: every planner's path on the same task (first suite, task 0, lowest
    seed, first backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hrl.tasks import load_suite
    from sim.navigation.world import load_world

    suite_name = sorted({r["suite"] for r in rows})[0]
    backend = sorted({r["backend"] for r in rows})[0]
    candidates = [r for r in rows if r["suite"] == suite_name and r["backend"] == backend and r["episode"] == 0]
    seed = min(r["seed"] for r in candidates)
    chosen = {r["planner"]: r for r in candidates if r["seed"] == seed}
    world = load_world(load_suite(suite_name).map)
    planners = [p for p in _planners(rows) if p in chosen]
    cols = min(3, len(planners))
    nrows = (len(planners) + cols - 1) // cols
    w, h = world.size
    fig, axes = plt.subplots(nrows, cols, figsize=(3.6 * cols, 3.6 * nrows * h / w + 0.4), squeeze=False)
    for ax in axes.ravel():
        ax.axis("off")
    for ax, planner in zip(axes.ravel(), planners, strict=False):
        r = chosen[planner]
        for wall in world.walls:
            xs, ys = wall.footprint().exterior.xy
            ax.fill(xs, ys, color="0.35", lw=0)
        traj = np.asarray(r.get("trajectory") or [r["start_xy"]])
        ax.plot(traj[:, 0], traj[:, 1], color="tab:orange" if r["success"] else "tab:red", lw=1.5)
        ax.plot(*r["start_xy"], "o", color="tab:blue", ms=5)
        for gx, gy in r["goals_xy"]:
            ax.plot(gx, gy, "*", color="tab:green", ms=11)
        ax.set_title(f"{planner}: {'success' if r['success'] else 'failed'}, {r['steps']} steps", fontsize=9)
        ax.set_aspect("equal")
        xmin, ymin, xmax, ymax = world.bounds
        ax.set_xlim(xmin - 0.2, xmax + 0.2)
        ax.set_ylim(ymin - 0.2, ymax + 0.2)
    task = candidates[0]["task"] if candidates else ""
    fig.suptitle(f'{suite_name} task 0 ("{task}"), seed {seed}, {backend}', fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return {"suite": suite_name, "task": task, "seed": seed, "backend": backend}


# ---------------------------------------------------------------------------------------------- report


def write_report(sweep_dir: Path, command: str | None = None) -> Path:
    """Aggregate a sweep directory into tables, plots and report.md; returns the report's path."""
    sweep_dir = Path(sweep_dir)
    rows = load_rows(sweep_dir)
    if domain_of(rows) == "tabletop":
        return write_tabletop_report(sweep_dir, rows, command)
    results = aggregate(rows)
    write_tables(results, sweep_dir)
    plot_success_vs_length(rows, sweep_dir / "success_vs_length.png")
    plot_latency(rows, sweep_dir / "latency.png")
    thumbs = plot_trajectories(rows, sweep_dir / "trajectories.png")
    config = _job_config(sweep_dir)
    lines = [
        f"# Planner benchmark: `{sweep_dir.name}`",
        "",
        f"{dt.datetime.now().strftime('%Y-%m-%d %H:%M')}, {platform.node() or 'this machine'} "
        f"({platform.machine()}, Python {platform.python_version()}); {len(rows)} episodes.",
        "",
        f"Sim-to-real wrappers: {_wrappers(rows)}.",
        "",
        *_conditions(rows),
        "## Reproduce",
        "",
        "```bash",
        command or "hrl-benchmark name=" + sweep_dir.name,
        "```",
        "",
        "Running it again with the same `name` resumes: episodes already in `episodes/` are skipped.",
        "",
        "## Results",
        "",
        "Success: 95 % Wilson interval; steps and path length: 95 % bootstrap interval of the mean; latency:",
        "median and 95th percentile over every planner call; tokens: per episode (LLM planners).",
        "",
        markdown(results),
        "## Success vs task length",
        "",
        "![success vs doors](success_vs_length.png)",
        "",
        "## Planning latency",
        "",
        "![latency](latency.png)",
        "",
        f'## Paths on one task ({thumbs["suite"]}, task 0: "{thumbs["task"]}", seed {thumbs["seed"]}, '
        f"{thumbs['backend']})",
        "",
        "![trajectories](trajectories.png)",
        "",
        "## Failure reasons",
        "",
        _failures(rows),
    ]
    if config:
        lines += ["## Configuration (one job)", "", "```yaml", config.rstrip(), "```", ""]
    report = sweep_dir / "report.md"
    report.write_text("\n".join(lines))
    return report


def write_tabletop_report(sweep_dir: Path, rows: list[dict[str, Any]], command: str | None) -> Path:
    """A tabletop sweep's tables, plots and report.md (its cells per category; no top-down paths)."""
    results = aggregate(rows, TABLETOP_GROUP, TABLETOP_METRICS)
    table = tabletop_markdown(results)
    write_tables(results, sweep_dir, table)
    plot_success_by_category(results, sweep_dir / "success_by_category.png")
    plot_latency(rows, sweep_dir / "latency.png")
    config = _job_config(sweep_dir)
    layouts = sorted({r["layout"] for r in rows})
    lines = [
        f"# Planner benchmark on the tabletop: `{sweep_dir.name}`",
        "",
        f"{dt.datetime.now().strftime('%Y-%m-%d %H:%M')}, {platform.node() or 'this machine'} "
        f"({platform.machine()}, Python {platform.python_version()}); {len(rows)} episodes "
        f"({len(layouts)} random layout{'s' if len(layouts) > 1 else ''} of every task per seed).",
        "",
        *_conditions(rows),
        "## Reproduce",
        "",
        "```bash",
        command or "hrl-benchmark grid=tabletop name=" + sweep_dir.name,
        "```",
        "",
        "Running it again with the same `name` resumes: episodes already in `episodes/` are skipped.",
        "",
        "## Results",
        "",
        "Success: 95 % Wilson interval, judged on the final state after the arm let go; goals held: the share of",
        "the tasks' goals (`object on target`) that hold at the end; steps and replans: 95 % bootstrap interval of",
        "the mean; latency: median and 95th percentile over every planner call.",
        "",
        table,
        "## Success per category",
        "",
        "![success by category](success_by_category.png)",
        "",
        "## Planning latency",
        "",
        "![latency](latency.png)",
        "",
        "## Failure reasons",
        "",
        _failures(rows),
    ]
    if config:
        lines += ["## Configuration (one job)", "", "```yaml", config.rstrip(), "```", ""]
    report = sweep_dir / "report.md"
    report.write_text("\n".join(lines))
    return report


def _failures(rows: list[dict[str, Any]]) -> str:
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for r in rows:
        if not r["success"]:
            counts[(r["planner"], failure_kind(str(r["reason"])))] += 1
    if not counts:
        return "None.\n"
    lines = ["| planner | reason | episodes |", "|---|---|---|"]
    for (planner, reason), n in sorted(counts.items(), key=lambda kv: (_rank(kv[0][0]), -kv[1])):
        lines.append(f"| {planner} | {reason} | {n} |")
    return "\n".join(lines) + "\n"


def failure_kind(reason: str) -> str:
    """A failure reason without its episode-specific details (where, which answer), for counting."""
    kind = reason.split(" at ")[0].split("; last:")[0].split(" (replans")[0]
    return kind.removeprefix("planner_error: ")


def _wrappers(rows: list[dict[str, Any]]) -> str:
    specs = {json.dumps(r.get("wrappers", [])) for r in rows}
    return "; ".join("none (the nominal simulator)" if spec == "[]" else f"`{spec}`" for spec in sorted(specs))


def _conditions(rows: list[dict[str, Any]]) -> list[str]:
    """The recorded conditions (hrl.benchmark.job_conditions) as report lines: the shared ones once, the
    planners' parameters per planner."""
    recorded = [r["conditions"] for r in rows if "conditions" in r]
    if not recorded:
        return ["Conditions: not recorded (episodes written before conditions were recorded).", ""]
    first = recorded[0]
    params = {r["planner"]: r["conditions"]["planner_params"] for r in rows if "conditions" in r}
    executor = json.dumps(first["executor"])
    lines = [
        f"Policy: `{first['policy']}` (sha256 `{first['policy_sha256'][:12]}`); executor: `{executor}`.",
        "",
        "| planner | parameters |",
        "|---|---|",
        *(f"| {name} | `{json.dumps(value)}` |" for name, value in sorted(params.items(), key=lambda kv: _rank(kv[0]))),
        "",
    ]
    return lines


def _job_config(sweep_dir: Path) -> str:
    for cfg in sorted((sweep_dir / "jobs").glob("*/.hydra/config.yaml")):
        return cfg.read_text()
    return ""


def _rank(planner: str) -> tuple[int, str]:
    return (ORDER.index(planner), "") if planner in ORDER else (len(ORDER), planner)


def _sort_key(key: tuple) -> tuple:
    return (_rank(key[0]), *key[1:])


def _planners(rows: list[dict[str, Any]]) -> list[str]:
    return sorted({r["planner"] for r in rows}, key=_rank)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hrl-benchmark-report", description=__doc__.splitlines()[0])
    parser.add_argument("sweep_dir", type=Path, help="an hrl-benchmark sweep directory (runs/benchmark/<name>)")
    args = parser.parse_args(argv)
    try:
        report = write_report(args.sweep_dir)
    except ValueError as err:
        print(f"hrl-benchmark-report: error: {err}", file=sys.stderr)
        return 2
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
