"""The rover's hierarchy: the domain-free loop (:class:`hierarchy.agent.Agent`) with the navigation domain
(:mod:`hierarchy.navigation`: the drive skill with its back-off recovery, the avoided-rooms check, the
visited-in-order acceptance), and the rover's per-episode record.

:class:`HierarchicalAgent` is the rover's entry point (``hrl-eval``, the benchmarks, ``hrl-demo``, the
post-training reward): ``run(env, task, obs)`` runs one task with the planner and the goal-conditioned policy
and returns an :class:`EpisodeRecord` (the trajectory, path length and wall contacts beside the figures every
domain has) and the :class:`~hierarchy.navigation.SubgoalExecutor` that drove it (frames for the video).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from hierarchy.agent import Agent, AgentConfig
from hierarchy.navigation import (
    ExecutorConfig,
    NavEvent,
    NavigationDomain,
    PolicyFn,
    SubgoalExecutor,
    SubgoalOutcome,
    avoid_regions,
    entered_room,
    visited_in_order,
)
from llm_planner.base import Planner, Task

#: The rover's event (step, kind, detail, x, y).
Event = NavEvent

__all__ = [
    "EpisodeRecord",
    "Event",
    "ExecutorConfig",
    "HierarchicalAgent",
    "SubgoalExecutor",
    "SubgoalOutcome",
    "avoid_regions",
    "entered_room",
    "visited_in_order",
]


@dataclass
class EpisodeRecord:
    success: bool
    reason: str
    steps: int
    path_length: float
    collisions: int
    replans: int
    planner_calls: int
    planner_latency_s: list[float]
    planner_tokens: int
    goals_reached: int
    goals_total: int
    events: list[NavEvent] = field(default_factory=list)
    plans: list[list[tuple[float, float]]] = field(default_factory=list)
    plan_labels: list[list[str]] = field(default_factory=list)
    trajectory: list[tuple[float, float]] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        """The per-episode figures (no event log, no trajectory)."""
        d = asdict(self)
        for key in ("events", "plans", "plan_labels", "trajectory", "planner_latency_s"):
            d.pop(key)
        d["planner_latency_mean_s"] = float(np.mean(self.planner_latency_s)) if self.planner_latency_s else 0.0
        return d


class HierarchicalAgent:
    """Planner + policy on the navigation domain. ``run(env, task, obs)`` executes one task from the current
    state (``obs``: what the env's reset returned)."""

    def __init__(
        self, planner: Planner, policy: PolicyFn, config: ExecutorConfig | None = None, goal_tolerance: float = 0.3
    ) -> None:
        self.planner = planner
        self.policy = policy
        self.config = config or ExecutorConfig()
        self.goal_tolerance = goal_tolerance

    def run(
        self, env: Any, task: Task, obs: dict[str, np.ndarray], record: bool = False
    ) -> tuple[EpisodeRecord, SubgoalExecutor]:
        cfg = self.config
        domain = NavigationDomain(self.policy, cfg, self.goal_tolerance)
        agent = Agent(
            domain, self.planner, AgentConfig(max_replans=cfg.max_replans, max_episode_steps=cfg.max_episode_steps)
        )
        frames: list[np.ndarray] | None = [] if record else None
        episode = agent.run(env, task, record=frames, obs=obs)
        ex = domain.executor
        ex.frames = frames
        ex.events = [NavEvent(e.step, str(e.kind), e.detail, *e.where) for e in episode.events]
        record_ = EpisodeRecord(
            success=episode.success,
            reason=episode.reason,
            steps=episode.steps,
            path_length=ex.path_length,
            collisions=ex.collisions,
            replans=episode.replans,
            planner_calls=episode.planner_calls,
            planner_latency_s=episode.planner_latency_s,
            planner_tokens=episode.planner_tokens,
            goals_reached=episode.goals_reached,
            goals_total=episode.goals_total,
            events=ex.events,
            plans=domain.plans,
            plan_labels=episode.plans,
            trajectory=ex.trajectory,
        )
        return record_, ex
