"""Evaluate a planner + the low-level policy on a task suite: per-episode rows, a summary, a video.

Used by ``hrl-eval planner=<name> task=<suite>`` and ``benchmarks/hierarchy.py``.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from tqdm.auto import tqdm

from hrl.executor import EpisodeRecord, ExecutorConfig, HierarchicalAgent
from hrl.overlay import draw_plan
from hrl.policy import GoalPolicy
from hrl.tasks import TaskSuiteConfig, doors_between, seeded_start
from hrl.video import write_video
from llm_planner.planners.common import goal_point


@dataclass
class SuiteResult:
    rows: list[dict[str, Any]]
    summary: dict[str, Any]
    episodes: list[EpisodeRecord]
    #: LLM planners: the model calls of this run, each tagged with its seed and episode (llm_calls.jsonl).
    llm_calls: list[dict[str, Any]] = field(default_factory=list)


def make_suite_env(
    policy: GoalPolicy,
    suite: TaskSuiteConfig,
    render: bool,
    backend: str | None = None,
    wrappers: list[Any] | None = None,
) -> gym.Env:
    """The env of a task suite: the policy's env settings on the suite's map, on ``backend`` (default: the
    one the policy was trained on) with ``wrappers`` (default none: training-time randomization is not
    carried into evaluation)."""
    import sim  # noqa: F401

    kwargs = policy.env_config.make_kwargs(policy.robot_config)
    kwargs.update(map=suite.map, goal_mode="anywhere", max_steps=suite.max_episode_steps + 1)
    kwargs.pop("wrappers", None)
    if wrappers:
        kwargs["wrappers"] = wrappers
    if backend is not None:
        kwargs["backend"] = backend
    return gym.make(policy.env_config.id, render_mode="rgb_array" if render else None, render_height=320, **kwargs)


def build_planner(name: str, params: dict[str, Any], policy: GoalPolicy) -> Any:
    from llm_planner.base import planner_class

    cls = planner_class(name)
    params = dict(params)
    if name in ("sorb", "sorb_safe"):  # they read the policy's own critic
        params.setdefault("policy", policy)
    try:
        return cls(**params)
    except TypeError as err:
        import inspect

        allowed = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
        raise ValueError(f"planner {name!r} does not accept {sorted(params)}: {err}; it takes {allowed}") from None


def run_suite(
    planner_name: str | Any,
    suite: TaskSuiteConfig,
    policy: GoalPolicy,
    *,
    planner_params: dict | None = None,
    seeds: tuple[int, ...] = (0,),
    executor: ExecutorConfig | None = None,
    out_dir: Path | None = None,
    video_episode: int | Collection[int] | None = 0,
    progress: bool = True,
    limit: int | None = None,
    backend: str | None = None,
    wrappers: list[Any] | None = None,
    skip: Collection[tuple[int, int]] = (),
    on_episode: Callable[[dict[str, Any], EpisodeRecord], None] | None = None,
    label: str | None = None,
) -> SuiteResult:
    """Run every task of ``suite`` (per seed) with the planner (a registered name, or a planner object),
    in the physics ``backend`` (default: the one the policy was trained in), with the sim-to-real
    ``wrappers`` (sim/wrappers.py; default none).

    ``video_episode``: the episode (or episodes) of the first seed recorded on video, with ``out_dir``.
    ``skip``: (seed, episode) pairs already done elsewhere (a resumed sweep); ``on_episode(row, record)`` is
    called after each episode (to write results as they come, so an interrupted run loses nothing).
    ``label`` names the planner in the rows, summary and video (default: its registered name; a config such as
    ``llm_goals_untrained`` runs the registered ``llm_goals`` with settings of its own).
    """
    tasks = suite.tasks()[:limit]
    if isinstance(planner_name, str):
        planner = build_planner(planner_name, planner_params or {}, policy)
    else:
        planner, planner_name = planner_name, planner_name.name
    planner_name = label or planner_name
    executor = executor or ExecutorConfig(max_episode_steps=suite.max_episode_steps)
    agent = HierarchicalAgent(planner, policy, executor, goal_tolerance=suite.goal_tolerance)
    on_video = {video_episode} if isinstance(video_episode, int) else set(video_episode or ())
    record_video = out_dir is not None and bool(on_video)
    env = make_suite_env(policy, suite, render=record_video, backend=backend, wrappers=wrappers)
    world = env.unwrapped.world
    rows: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    episodes: list[EpisodeRecord] = []
    # LLM planners keep their recent model calls (LLMPlanner.calls_since); this run's are collected per episode.
    calls_since = getattr(planner, "calls_since", None)
    calls_seen = int(planner.totals["calls"]) if calls_since is not None else 0
    llm_calls: list[dict[str, Any]] = []
    total = len(seeds) * len(tasks)
    categories = [ep.category for ep in suite.episodes]
    bar = tqdm(total=total, desc=f"{planner_name} on {suite.name}", unit="ep", disable=not progress, leave=False)
    skip = set(skip)
    bar.update(sum(1 for seed in seeds for i in range(len(tasks)) if (seed, i) in skip))
    for seed in seeds:
        for i, (start, task) in enumerate(tasks):
            if (seed, i) in skip:
                continue
            episode_start = seeded_start(env, start, seed, i, suite.start_jitter)
            obs, _ = env.reset(seed=seed * 1000 + i, options={"start": episode_start})
            start_xy = (float(obs["achieved_goal"][0]), float(obs["achieved_goal"][1]))
            first_goal = goal_point(task.goals[0], world)
            record_this = record_video and seed == seeds[0] and i in on_video
            episode, ex = agent.run(env, task, obs, record=record_this)
            rows.append(
                {
                    "suite": suite.name,
                    "planner": planner_name,
                    "seed": seed,
                    "episode": i,
                    "task": task.text,
                    "category": categories[i],
                    "doors": doors_between(world, start_xy, first_goal),
                    "start_xy": [round(v, 3) for v in start_xy],
                    "goals_xy": [[round(float(v), 3) for v in goal_point(g, world)] for g in task.goals],
                    **episode.row(),
                }
            )
            events += [{"seed": seed, "episode": i, **asdict(e)} for e in episode.events]
            if calls_since is not None:
                llm_calls += [dict(call, seed=seed, episode=i) for call in calls_since(calls_seen)]
                calls_seen = int(planner.totals["calls"])
            episodes.append(episode)
            if on_episode is not None:
                on_episode(rows[-1], episode)
            if record_this and ex.frames:
                video = out_dir / f"{planner_name}_{suite.name}_ep{i}.mp4"
                _write_plan_video(ex.frames, episode, env, ex.record_every, video)
            bar.update(1)
    bar.close()
    env.close()
    summary = summarise(rows)
    summary.update(planner=planner_name, suite=suite.name, seeds=list(seeds))
    if out_dir is not None and rows:
        write_results(rows, summary, out_dir)
        write_jsonl(events, out_dir / "events.jsonl")  # the executor's structured event log
        if llm_calls:  # LLM planners: every model call (prompt tokens, answer, latency, cache hit, error)
            write_jsonl(llm_calls, out_dir / "llm_calls.jsonl")
    return SuiteResult(rows, summary, episodes, llm_calls)


def write_jsonl(items: list[dict[str, Any]], path: Path) -> None:
    """One JSON object per line."""
    with open(path, "w") as f:
        f.writelines(json.dumps(item) + "\n" for item in items)


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    if n == 0:
        return {"episodes": 0}
    succ = [r for r in rows if r["success"]]
    lat = [r["planner_latency_mean_s"] for r in rows]
    return {
        "episodes": n,
        "success_rate": len(succ) / n,
        "success_ci95": wilson(len(succ), n),
        "mean_steps": float(np.mean([r["steps"] for r in rows])),
        "mean_steps_successful": float(np.mean([r["steps"] for r in succ])) if succ else None,
        "mean_path_length": float(np.mean([r["path_length"] for r in rows])),
        "mean_collisions": float(np.mean([r["collisions"] for r in rows])),
        "mean_replans": float(np.mean([r["replans"] for r in rows])),
        "mean_planner_latency_s": float(np.mean(lat)),
        "failure_reasons": _count(r["reason"].split(" at ")[0] for r in rows if not r["success"]),
    }


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson score interval of a success rate."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4))


def write_results(rows: list[dict[str, Any]], summary: dict[str, Any], out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / "episodes.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (out_dir / "episodes.json").write_text(json.dumps(rows, indent=2))
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    (out_dir / "summary.md").write_text(markdown_table([summary]))


def markdown_table(summaries: list[dict[str, Any]]) -> str:
    head = (
        "| planner | suite | episodes | success (95 % CI) | mean steps | path (m) | collisions | replans "
        "| planner latency (ms) |"
    )
    lines = [head, "|" + "---|" * 9]
    for s in summaries:
        lo, hi = s["success_ci95"]
        lines.append(
            f"| {s['planner']} | {s['suite']} | {s['episodes']} | {s['success_rate']:.0%} ({lo:.0%}–{hi:.0%}) | "
            f"{s['mean_steps']:.0f} | {s['mean_path_length']:.1f} | {s['mean_collisions']:.1f} | "
            f"{s['mean_replans']:.2f} | {1000 * s['mean_planner_latency_s']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def _write_plan_video(frames: list[np.ndarray], episode: EpisodeRecord, env: gym.Env, every: int, path: Path) -> None:
    """Frames (one per ``every`` control steps) with the active plan and the path so far drawn on them."""
    to_pixel = env.unwrapped.physics.world_to_pixel
    plan_starts = [e.step for e in episode.events if e.kind == "plan"]
    out = []
    for k, frame in enumerate(frames):
        step = k * every
        idx = max(0, sum(1 for s in plan_starts if s <= step) - 1)
        plan = episode.plans[idx] if episode.plans else []
        out.append(draw_plan(frame, to_pixel, plan, episode.trajectory[: step + 1]))
    write_video(out, path, fps=env.unwrapped.control_hz / every)


def _count(items: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in items:
        counts[item] = counts.get(item, 0) + 1
    return counts
