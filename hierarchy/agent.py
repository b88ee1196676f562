"""The domain-free hierarchical loop: plan, ground, run each subgoal's skill calls, replan with feedback.

:class:`Agent` asks the planner for a plan of the domain's subgoals, grounds it before anything moves (a plan
that does not ground ends the episode with the reason), runs every subgoal's :class:`~hierarchy.domain.Step`
with the domain's skills until the step is reached, its budget is spent, the skill is stuck or the episode's
step limit is hit, and after a failure (or a plan that ends with goals still open) asks again with typed
:class:`~hierarchy.domain.Feedback`, at most ``max_replans`` times. The episode ends with the domain's
``finish`` and is judged by its ``progress``: every goal of the task holding in the final state.

A step-wise planner (``planner.stepwise = True``: SayCan) returns one subgoal per call and is asked again after
each, until it raises :class:`~llm_planner.plan.PlanDone` (the final state then decides) or
``max_planner_calls`` is reached; ``planner.reset()``, when it exists, starts each episode.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from hierarchy.domain import Domain, Event, EventKind, Feedback, GroundedSubgoal, Outcome
from llm_planner.plan import PlanDone, PlanError


@dataclass
class AgentConfig:
    """Limits of the loop (the ``executor.*`` keys of the tabletop's commands)."""

    max_replans: int = 3
    max_episode_steps: int = 1500
    #: A step-wise planner (``planner.stepwise``, e.g. saycan) is asked again after each subgoal; this bounds it.
    max_planner_calls: int = 40

    def __post_init__(self) -> None:
        if self.max_replans < 0:
            raise ValueError(f"max_replans must be >= 0, got {self.max_replans}")
        if self.max_episode_steps < 1:
            raise ValueError(f"max_episode_steps must be >= 1, got {self.max_episode_steps}")
        if self.max_planner_calls < 1:
            raise ValueError(f"max_planner_calls must be >= 1, got {self.max_planner_calls}")


@dataclass
class Episode:
    """One task's record: the figures per episode and the event log."""

    success: bool
    reason: str
    steps: int
    replans: int
    planner_calls: int
    planner_latency_s: list[float]
    planner_tokens: int
    goals_reached: int
    goals_total: int
    events: list[Event] = field(default_factory=list)
    plans: list[list[str]] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        """The per-episode figures (no event log)."""
        d = asdict(self)
        for key in ("events", "plans", "planner_latency_s"):
            d.pop(key)
        lat = self.planner_latency_s
        d["planner_latency_mean_s"] = sum(lat) / len(lat) if lat else 0.0
        return d


class Agent:
    """Planner + domain (its grounding and skills). ``run(env, task)`` executes one task from the current state."""

    def __init__(self, domain: Domain, planner: Any, config: AgentConfig | None = None) -> None:
        supported = getattr(planner, "domains", ("navigation",))
        if domain.name not in supported:
            raise ValueError(
                f"planner {getattr(planner, 'name', type(planner).__name__)!r} plans for {', '.join(supported)}, "
                f"not for the {domain.name!r} domain; pick a planner that supports it"
            )
        self.domain = domain
        self.planner = planner
        self.config = config or AgentConfig()

    def execute(self, env: Any, subgoals: list[GroundedSubgoal]) -> tuple[str | None, Outcome | None]:
        """Carry out grounded subgoals in ``env`` with the domain's skills and this agent's budgets, no planning
        (what an episode does between two plans; RL from execution uses it for a sampled step): the first that
        fails ends it, returned as (its label, its outcome); (None, None) when all were reached."""
        return _Run(self, env, None).execute(subgoals)

    def run(self, env: Any, task: Any, record: list[Any] | None = None, obs: Any = None) -> Episode:
        """Execute ``task`` in ``env`` (already reset; ``obs``: what its reset returned, for a domain that needs
        it); ``record``, when a list, gets ``env.render()`` frames (the first now, then every other step)."""
        run = _Run(self, env, record)
        domain = self.domain
        if hasattr(domain, "start"):
            domain.start(env, task, run.event, obs)
        if record is not None:
            record.append(env.render())
        total = len(task.goals)
        done, replans, feedback = 0, 0, None
        reason = ""
        broken: str | None = None
        stepwise = bool(getattr(self.planner, "stepwise", False))
        if hasattr(self.planner, "reset"):
            self.planner.reset()  # a step-wise planner's history of this episode
        while True:
            if len(run.latencies) >= self.config.max_planner_calls:
                reason = f"planner_calls: {len(run.latencies)} calls without finishing the task"
                break
            # a step-wise planner reads the whole task and says when it is done; the others plan what is left
            subgoals = run.plan(task if stepwise else task.remaining(done), feedback)
            if subgoals is None:
                reason = run.stop_reason
                break
            failed, outcome = run.execute(subgoals)
            done = domain.progress(task, env)
            broken = domain.broken(env) if hasattr(domain, "broken") else None
            if broken is not None:  # e.g. an avoided room entered: nothing done afterwards mends it
                reason = broken
                break
            if done == total and not stepwise:
                reason = "success"
                break
            if failed is None and stepwise:
                feedback = None  # the step went as planned: ask for the next one
                continue
            if failed is None:
                failed, outcome = subgoals[-1].label, "plan_ended_short_of_goal"
            exhausted = replans >= self.config.max_replans
            if outcome in _TERMINAL or exhausted:
                reason = f"{outcome} at {failed}" + (" (replans exhausted)" if exhausted else "")
                break
            replans += 1
            reached = tuple(e.subgoal for e in run.events if e.kind == EventKind.SUBGOAL_REACHED)
            if hasattr(domain, "feedback"):
                feedback = domain.feedback(failed, outcome, replans, reached, run.events)
            else:
                feedback = Feedback(failed, outcome, attempt=replans, reached=reached)
            run.event(EventKind.REPLAN, feedback.text())
        domain.finish(env, max(0, self.config.max_episode_steps - run.steps), run.count)
        done = domain.progress(task, env)  # judged on the final state, after letting go
        if reason == "success" and done < total:
            reason = f"goal undone when letting go ({done} of {total} hold)"
        elif reason != "success" and done == total and broken is None:
            reason = "success"
        run.event(EventKind.DONE, reason)
        return Episode(
            success=done == total and broken is None,
            reason=reason,
            steps=run.steps,
            replans=replans,
            planner_calls=len(run.latencies),
            planner_latency_s=run.latencies,
            planner_tokens=run.tokens,
            goals_reached=done,
            goals_total=total,
            events=run.events,
            plans=run.plans,
        )


#: Outcomes after which replanning would not help: the episode's steps are spent, an object is gone, the
#: robot was stopped from outside (e-stop, unusable sensor data), or the task's constraint is broken.
_TERMINAL = (Outcome.EPISODE_LIMIT, Outcome.OBJECT_LEFT_TABLE, Outcome.ABORTED, Outcome.ENTERED_AVOIDED_ROOM)


class _Run:
    """The state of one episode: steps, events, planner calls."""

    def __init__(self, agent: Agent, env: Any, record: list[Any] | None) -> None:
        self.agent, self.env, self.frames = agent, env, record
        self.steps, self.tokens = 0, 0
        self.events: list[Event] = []
        self.latencies: list[float] = []
        self.plans: list[list[str]] = []
        self.stop_reason = ""

    def count(self) -> None:
        """Called by the skills after every control step."""
        self.steps += 1
        if self.frames is not None and self.steps % 2 == 0:  # every other step: rendering costs more than stepping
            self.frames.append(self.env.render())

    def event(self, kind: EventKind, detail: str, subgoal: str = "", outcome: Outcome | None = None) -> None:
        where = self.agent.domain.where(self.env) if hasattr(self.agent.domain, "where") else ()
        self.events.append(Event(self.steps, kind, detail, subgoal, outcome, tuple(where)))

    def count_call(self, planner: Any, t0: float) -> dict[str, Any]:
        """Record a finished planner call (its latency, its tokens); returns what it cost (``last_usage``: LLM
        planners report tokens, model calls, cache hits)."""
        self.latencies.append(time.perf_counter() - t0)
        usage = dict(getattr(planner, "last_usage", None) or {})
        self.tokens += int(usage.get("tokens", 0))
        return usage

    def plan(self, task: Any, feedback: Feedback | None) -> list[GroundedSubgoal] | None:
        domain, planner = self.agent.domain, self.agent.planner
        scene = domain.observe(self.env)
        t0 = time.perf_counter()
        try:
            plan = planner.plan(task, scene, feedback)
        except PlanDone as done:  # a step-wise planner judges the task done: the final state decides
            self.latencies.append(time.perf_counter() - t0)
            self.stop_reason = f"planner_done: {done}"
            self.event(EventKind.PLAN, self.stop_reason)
            return None
        except Exception as err:  # a planner fault ends the episode cleanly, with its cause recorded
            self.count_call(planner, t0)
            self.stop_reason = f"planner_error: {type(err).__name__}: {err}"
            self.event(EventKind.PLANNER_ERROR, self.stop_reason)
            return None
        usage = self.count_call(planner, t0)
        try:
            subgoals = domain.ground(plan, scene)
        except PlanError as err:
            self.stop_reason = f"plan_rejected: {err}"
            self.event(EventKind.PLAN_REJECTED, str(err))
            return None
        self.plans.append([s.label for s in subgoals])
        cost = "".join(f"; {k} {v}" for k, v in usage.items())  # LLM planners: tokens, model calls, cache hits
        self.event(EventKind.PLAN, f"{len(subgoals)} subgoals: " + ", ".join(s.label for s in subgoals) + cost)
        return subgoals

    def execute(self, subgoals: list[GroundedSubgoal]) -> tuple[str | None, Outcome | None]:
        """Run the subgoals in order; the first that fails ends the plan: (its label, its outcome)."""
        limit = self.agent.config.max_episode_steps
        for sub in subgoals:
            self.event(EventKind.SUBGOAL_STARTED, sub.label, sub.label)
            for step in sub.steps:
                if step.skip is not None and step.skip(self.env):
                    continue
                if self.steps >= limit:
                    outcome = Outcome.EPISODE_LIMIT
                else:
                    outcome = (
                        self.agent.domain.skills[step.skill].run(self.env, step, limit - self.steps, self.count).outcome
                    )
                if outcome != Outcome.REACHED:
                    what = (
                        f"{sub.label}: {outcome}"
                        if len(sub.steps) == 1
                        else f"{sub.label} ({step.label or step.skill}): {outcome}"
                    )
                    self.event(EventKind.SUBGOAL_FAILED, what, sub.label, outcome)
                    return sub.label, outcome
            self.event(EventKind.SUBGOAL_REACHED, sub.label, sub.label, Outcome.REACHED)
        return None, None
