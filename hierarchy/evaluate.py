"""Run a planner on a tabletop suite in MuJoCo or PyBullet: per-episode rows, a summary per category, videos.

Every (seed, episode, layout) triple is its own random layout of the scene (the reset seed is drawn from all
three by ``numpy.random.SeedSequence``), so distinct seeds are distinct episodes, and none of them is one of
the layouts the grounding's constants were tuned on (reset seeds 1000–1029 of the ``blocks`` scene).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from hierarchy.agent import Agent, AgentConfig
from hierarchy.suites import TabletopSuite
from hierarchy.tabletop import TabletopDomain, make_env


def layout_seed(seed: int, episode: int, layout: int) -> int:
    """The env's reset seed for one (seed, episode, layout): distinct triples give distinct layouts."""
    return int(np.random.SeedSequence([seed, episode, layout]).generate_state(1)[0])


def run_tabletop_suite(
    planner: Any,
    suite: TabletopSuite,
    domain: TabletopDomain,
    *,
    backend: str = "mujoco",
    seeds: tuple[int, ...] = (0,),
    layouts: int = 1,
    out_dir: Path | None = None,
    video: bool = False,
    progress: bool = True,
    label: str | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every task of ``suite`` for each seed and ``layouts`` layouts; returns (rows, summary). With ``out_dir``:
    episodes.jsonl, events.jsonl, summary.json and (``video``) the first episode's video are written there.
    ``label`` names the planner in them (default: its registered name; a config such as ``vla_llm`` runs the
    registered ``vla`` with settings of its own)."""
    from hrl.hierarchy_eval import wilson

    name = label or planner.name
    agent = Agent(domain, planner, AgentConfig(max_episode_steps=suite.max_episode_steps))
    env = make_env(suite.scene, backend, render_mode="rgb_array" if video else None)
    rows: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    total = len(seeds) * len(suite.tasks) * layouts
    bar = tqdm(total=total, desc=f"{name} on {suite.name} ({backend})", unit="ep", disable=not progress)
    for seed in seeds:
        for i, task in enumerate(suite.tasks):
            for j in range(layouts):
                env.reset(seed=layout_seed(seed, i, j))
                frames: list[Any] | None = [] if (video and out_dir is not None and not rows) else None
                episode = agent.run(env, task, record=frames)
                row = {
                    "suite": suite.name,
                    "planner": name,
                    "backend": backend,
                    "seed": seed,
                    "episode": i,
                    "layout": j,
                    "category": task.category,
                    "task": task.text,
                    **episode.row(),
                }
                rows.append(row)
                events += [{"seed": seed, "episode": i, "layout": j, **asdict(e)} for e in episode.events]
                if frames:
                    from hrl.video import write_video

                    out_dir.mkdir(parents=True, exist_ok=True)  # type: ignore[union-attr]
                    write_video(frames, out_dir / f"{name}_{suite.name}_{backend}.mp4", fps=12.5)  # type: ignore[operator]
                bar.update(1)
    bar.close()
    env.close()
    summary = summarise(rows, wilson)
    summary.update(planner=name, suite=suite.name, backend=backend, seeds=list(seeds), layouts=layouts)
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, items in (("episodes", rows), ("events", events)):
            with open(out_dir / f"{name}.jsonl", "w") as f:
                f.writelines(json.dumps(item, default=str) + "\n" for item in items)
        (out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return rows, summary


def summarise(rows: list[dict[str, Any]], wilson: Any) -> dict[str, Any]:
    """Success (95 % Wilson interval), steps, replans and planner latency, overall and per category."""

    def cell(rs: list[dict[str, Any]]) -> dict[str, Any]:
        k = sum(r["success"] for r in rs)
        return {
            "episodes": len(rs),
            "success_rate": k / len(rs),
            "success_ci95": wilson(k, len(rs)),
            "mean_steps": float(np.mean([r["steps"] for r in rs])),
            "mean_replans": float(np.mean([r["replans"] for r in rs])),
            "mean_planner_latency_s": float(np.mean([r["planner_latency_mean_s"] for r in rs])),
            "failure_reasons": dict(
                Counter(r["reason"].split(" at ")[0].split(":")[0] for r in rs if not r["success"])
            ),
        }

    if not rows:
        return {"episodes": 0}
    categories = sorted({r["category"] for r in rows})
    return {**cell(rows), "categories": {c: cell([r for r in rows if r["category"] == c]) for c in categories}}
