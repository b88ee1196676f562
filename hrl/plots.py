"""Learning-curve plot from a run's metrics.csv."""

from __future__ import annotations

import csv
from pathlib import Path


def read_metrics(path: Path) -> list[dict[str, float]]:
    with open(path, newline="") as f:
        return [{k: float(v) for k, v in row.items() if v not in ("", None)} for row in csv.DictReader(f)]


def plot_learning_curve(metrics_csv: Path, out_png: Path, title: str = "") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_metrics(metrics_csv)
    if not rows:
        raise ValueError(f"{metrics_csv} has no rows to plot")
    steps = [r["step"] for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    axes[0].plot(steps, [100 * r["success_rate"] for r in rows], marker="o")
    axes[0].set(xlabel="env steps", ylabel="eval success (%)", ylim=(-2, 102), title="success vs steps")
    axes[1].plot([r["wall_time_s"] / 60 for r in rows], [100 * r["success_rate"] for r in rows], marker="o")
    axes[1].set(xlabel="wall time (min)", ylabel="eval success (%)", ylim=(-2, 102), title="success vs time")
    axes[2].plot(steps, [r["mean_return"] for r in rows], marker="o", color="tab:orange")
    axes[2].set(xlabel="env steps", ylabel="mean eval return", title="return")
    for ax in axes:
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    tmp = out_png.with_name(f".{out_png.stem}.tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(out_png)
    return out_png
