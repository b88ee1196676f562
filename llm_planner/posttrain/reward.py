"""The reward of a planner answer: the task's own acceptance check applied to the plan the answer produces.

:func:`execution_reward` takes the model's text (the ``llm_goals`` answer, ``{"targets": [...], "avoid":
[...]}``, llm_planner/llm/answers.py) and the gold task, and:

1. parses and grounds it with :func:`~llm_planner.llm.answers.parse_answer` (the planner's own parser:
   names made canonical through the map, aliases accepted, a target inside an avoided room refused);
2. routes it with the ``graph`` planner from the gold start, around the answer's avoided rooms, exactly as
   the ``llm_goals`` planner does, and grounds the plan (:func:`~llm_planner.plan.ground`);
3. follows the planned route (straight legs between the grounded subgoals, sampled every
   :data:`ROUTE_STEP` m) and applies the task's success check to it: the executor's
   :func:`~hierarchy.navigation.visited_in_order` on the gold goals (within the suite's goal tolerance) and its
   :func:`~hierarchy.navigation.entered_room` on the gold's avoided rooms: the same predicate that judges an
   episode in ``hrl-eval`` and the benchmarks.

Rewards (:data:`REWARDS`): 1 for success; 0 for a well-formed answer whose plan fails (a target missed or
visited out of order, an avoided room entered, no route around the rooms it avoids, a target inside a room
it avoids); :data:`FORMAT_PENALTY` (-0.1) for an answer that is not the answer's JSON or names a place the
map does not have (constrained decoding makes these impossible at inference; during RL sampling without
a grammar they are the format term). The :class:`Outcome` says which, ``detail`` says why in words.
The task's check allows detours (an extra target on the way still succeeds); ``extra_target_cost`` takes a
cost off a success per target beyond the gold's, so RL does not learn to list extra places for free.

The route is the plan as drawn, not as driven: the shipped policy reaches each subgoal within its tolerance,
and ``benchmarks/RESULTS.md`` found that execution loses nothing once the reading is right. With
``execution="mujoco"`` (:class:`MujocoExecution`) the plan is driven by the shipped policy in MuJoCo
instead (seconds per answer: for evaluation and a final short RL phase).

For TRL, :func:`make_reward_function` returns a plain ``fn(prompts, completions, **columns) -> list[float]``
whose gold comes from the dataset columns ``map``, ``start``, ``goals``, ``avoid`` (the rows of
llm_planner/posttrain/instructions.py).
"""

from __future__ import annotations

import functools
import itertools
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from pydantic import ValidationError

from hierarchy.navigation import avoid_regions, entered_room, visited_in_order
from llm_planner.base import Scene, Task
from llm_planner.llm.answers import GoalsAnswer, TaggedAnswer, parse_answer, tagged_goals
from llm_planner.plan import PlanError, ground
from llm_planner.planners.common import goal_point
from llm_planner.planners.graph import GraphPlanner
from sim.navigation.world import Pose2D, World, load_world

#: Samples along the planned route (m): finer than any room margin or goal tolerance.
ROUTE_STEP = 0.05
#: The reward of an answer that is not the answer's JSON, or names a place the map does not have.
FORMAT_PENALTY = -0.1
#: The columns a dataset row must carry for :func:`make_reward_function`.
GOLD_COLUMNS = ("map", "start", "goals", "avoid")
EXECUTIONS = ("route", "mujoco")


class Outcome(StrEnum):
    """Why an answer got its reward."""

    SUCCESS = "success"  # the plan visits every gold target in order and enters no avoided room
    MISSED_TARGET = "missed_target"  # a gold target not visited, or not in order
    ENTERED_AVOIDED_ROOM = "entered_avoided_room"  # the plan enters a room the task forbids
    NO_ROUTE = "no_route"  # the answer's targets cannot be reached around the rooms it avoids
    CONTRADICTORY = "contradictory"  # the answer puts a target inside a room it also avoids
    UNKNOWN_PLACE = "unknown_place"  # a name the map does not have (or a landmark where a room must be)
    MALFORMED = "malformed"  # not JSON of the answer's schema (empty, truncated, wrong keys)
    INFEASIBLE = "infeasible"  # tabletop: a step cannot run in order (a block under another, onto a covered one)


REWARDS: dict[Outcome, float] = {
    Outcome.SUCCESS: 1.0,
    Outcome.MISSED_TARGET: 0.0,
    Outcome.ENTERED_AVOIDED_ROOM: 0.0,
    Outcome.NO_ROUTE: 0.0,
    Outcome.CONTRADICTORY: 0.0,
    Outcome.INFEASIBLE: 0.0,
    Outcome.UNKNOWN_PLACE: FORMAT_PENALTY,
    Outcome.MALFORMED: FORMAT_PENALTY,
}


@dataclass(frozen=True)
class Gold:
    """The task an instruction means: start (a named start of the map or [x, y, yaw]), goals in order,
    rooms to avoid; the fields of a language suite's episode and of a generated dataset row."""

    map: str
    start: str | tuple[float, ...]
    goals: tuple[str, ...]
    avoid: tuple[str, ...] = ()

    @classmethod
    def from_columns(cls, map: str, start: Any, goals: Sequence[str], avoid: Sequence[str] | None) -> Gold:
        if not isinstance(map, str) or not map:
            raise ValueError(f"gold map must be a map name, got {map!r}")
        if isinstance(goals, str) or not goals or not all(isinstance(g, str) for g in goals):
            raise ValueError(f"gold goals must be a non-empty list of place names, got {goals!r}")
        if isinstance(start, str) and start.lstrip().startswith("["):  # [x, y, yaw] as JSON (an Arrow column
            start = json.loads(start)  # cannot mix names and lists)
        if not isinstance(start, str):
            start = tuple(float(v) for v in start)
        return cls(map, start, tuple(goals), tuple(avoid or ()))

    def start_pose(self, world: World) -> Pose2D:
        if isinstance(self.start, str):
            if self.start not in world.starts:
                raise ValueError(f"gold start {self.start!r} is not a named start of map {world.name!r}: "
                                 f"{', '.join(world.starts)} (or give [x, y, yaw])")  # fmt: skip
            return world.starts[self.start]
        if len(self.start) != 3:
            raise ValueError(f"gold start must be a named start or [x, y, yaw], got {list(self.start)}")
        return Pose2D(*self.start)


@dataclass(frozen=True)
class Reward:
    """The reward of one answer: ``value`` (see :data:`REWARDS`), ``outcome``, ``detail`` (why, in words),
    ``exact`` (targets in order and avoided rooms equal the gold: the benchmark's plan accuracy)."""

    value: float
    outcome: Outcome
    detail: str = ""
    exact: bool = False
    answer: GoalsAnswer | None = None


def _reward(outcome: Outcome, detail: str, answer: GoalsAnswer | None = None, exact: bool = False) -> Reward:
    return Reward(REWARDS[outcome], outcome, detail, exact, answer)


def read_answer(text: str, world: World) -> GoalsAnswer | Reward:
    """The parsed, canonical answer, or the (format or contradiction) Reward that ends its scoring. Reads the
    names answer and the tagged one (``reading=tagged``: its mentions ordered by their tags)."""
    try:
        tagged = TaggedAnswer.model_validate_json(text)
    except ValidationError:
        tagged = None
    if tagged is not None:  # the same answer in names, then judged as one
        try:
            text = json.dumps(tagged_goals([(m.place, m.as_) for m in tagged.mentions]))
        except PlanError as err:
            return _reward(Outcome.MALFORMED, str(err))
    try:
        GoalsAnswer.model_validate_json(text)
    except ValidationError as err:  # not JSON, or not the answer's shape
        first = err.errors()[0]
        where = ".".join(map(str, first["loc"]))
        return _reward(Outcome.MALFORMED, f"not the answer's JSON: {where + ': ' if where else ''}{first['msg']}")
    try:
        answer = parse_answer("llm_goals", text, world)
    except PlanError as err:
        # the shape is right, so the answer names something the map lacks, or a target in an avoided room
        raw = GoalsAnswer.model_validate_json(text)
        known = world.named_places()
        rooms = {r.name.lower() for r in world.rooms} | {a.lower() for r in world.rooms for a in r.aliases}
        bad = [n for n in raw.targets if n.strip().lower() not in known]
        bad += [n for n in raw.avoid if n.strip().lower() not in rooms]
        if bad:
            return _reward(Outcome.UNKNOWN_PLACE, str(err))
        return _reward(Outcome.CONTRADICTORY, str(err))
    assert isinstance(answer, GoalsAnswer)  # internal: parse_answer's llm_goals branch
    return answer


def planned_route(
    answer: GoalsAnswer, start: Pose2D, world: World, tolerance: float = 0.3
) -> list[tuple[float, float]]:
    """The route the ``llm_goals`` planner would hand the executor for ``answer``: the graph planner's
    subgoals from ``start``, grounded, as points every :data:`ROUTE_STEP` m. PlanError when there is none."""
    task = Task("answer", tuple(answer.targets), tuple(answer.avoid))
    plan = GraphPlanner(goal_tolerance=tolerance).plan(task, Scene(world, start))
    points = [(start.x, start.y)] + [s.xy for s in ground(plan, world)]
    route = [points[0]]
    for a, b in itertools.pairwise(points):
        n = max(1, math.ceil(math.dist(a, b) / ROUTE_STEP))
        route += [(a[0] + (b[0] - a[0]) * k / n, a[1] + (b[1] - a[1]) * k / n) for k in range(1, n + 1)]
    return route


def stopped_by_own_avoid(
    route: list[tuple[float, float]], answer: GoalsAnswer, world: World
) -> tuple[list[tuple[float, float]], str | None]:
    """The part of ``route`` the executor drives: it stops the robot in the first room the answer avoids that
    the route is in (the room it starts in, when the answer avoids that one), as a driven run ends. Returns
    the route up to there and that room (None: the whole route)."""
    regions = avoid_regions(world, answer.avoid)
    for i, p in enumerate(route):
        room = entered_room(regions, p)
        if room is not None:
            return route[: i + 1], room
    return route, None


def judge(trajectory: list[tuple[float, float]], gold: Gold, world: World, tolerance: float) -> tuple[Outcome, str]:
    """The task's success check on a path (planned or driven): gold goals visited in order, no gold
    avoided room entered (the executor's predicates)."""
    regions = avoid_regions(world, gold.avoid)
    for p in trajectory:
        room = entered_room(regions, p)
        if room is not None:
            return Outcome.ENTERED_AVOIDED_ROOM, f"enters {room!r} at ({p[0]:.2f}, {p[1]:.2f})"
    goals = [goal_point(g, world) for g in gold.goals]
    done = visited_in_order(trajectory, goals, tolerance)
    if done < len(goals):
        return Outcome.MISSED_TARGET, f"visits {done} of the {len(goals)} targets in order; next: {gold.goals[done]!r}"
    return Outcome.SUCCESS, f"visits {', '.join(gold.goals)} in order" + (
        f" and stays out of {', '.join(gold.avoid)}" if gold.avoid else ""
    )


def execution_reward(
    answer_text: str,
    gold: Gold,
    world: World,
    tolerance: float = 0.3,
    execution: MujocoExecution | None = None,
    extra_target_cost: float = 0.0,
) -> Reward:
    """The reward of one answer (module docstring). ``execution``: drive the plan in MuJoCo instead of
    judging the planned route. ``extra_target_cost``: taken off a success per target the answer names
    beyond the gold's (the task's check accepts detours: "Not the tv, I mean the office" answered
    ``[office, bed]`` succeeds; 0, the default, is the check as the suites apply it). Raises ValueError
    only for a bad ``gold`` (never for a bad answer)."""
    if world.name != gold.map:
        raise ValueError(f"gold is for map {gold.map!r} but the world is {world.name!r}")
    for g in gold.goals:
        world.resolve(g)  # a gold naming no place is a dataset bug: raises with the known names
    for r in gold.avoid:
        world.room(r)
    start = gold.start_pose(world)
    if not isinstance(answer_text, str):
        raise TypeError(f"answer_text must be a str (the model's completion), got {type(answer_text).__name__}")
    answer = read_answer(answer_text, world)
    if isinstance(answer, Reward):
        return answer
    exact = tuple(answer.targets) == gold.goals and set(answer.avoid) == set(gold.avoid)
    if execution is not None:
        outcome, detail = execution.run(answer, gold, world, tolerance)
    else:
        try:
            route = planned_route(answer, start, world, tolerance)
        except PlanError as err:
            return _reward(Outcome.NO_ROUTE, str(err), answer, exact)
        route, stopped = stopped_by_own_avoid(route, answer, world)
        outcome, detail = judge(route, gold, world, tolerance)
        if stopped is not None:
            detail += f" (the executor stops in {stopped!r}, which the answer avoids)"
    reward = _reward(outcome, detail, answer, exact)
    extra = len(answer.targets) - len(gold.goals)
    if outcome is Outcome.SUCCESS and extra > 0 and extra_target_cost > 0:
        value = max(0.0, reward.value - extra_target_cost * extra)
        reward = replace(reward, value=value, detail=f"{detail}; {extra} target(s) more than asked: {value:g}")
    return reward


class MujocoExecution:
    """Drives the answer's plan with a goal-conditioned policy (default: the shipped one) in MuJoCo through
    :class:`~hrl.executor.HierarchicalAgent` with the ``graph`` router, then applies :func:`judge` to the
    driven trajectory. Seconds per answer; one env per map, kept."""

    def __init__(self, policy: str | None = None, max_episode_steps: int = 3000) -> None:
        from hrl import DEFAULT_POLICY
        from hrl.policy import GoalPolicy

        self.policy = GoalPolicy.load(policy or DEFAULT_POLICY)
        self.max_episode_steps = max_episode_steps
        self._envs: dict[str, Any] = {}

    def run(self, answer: GoalsAnswer, gold: Gold, world: World, tolerance: float) -> tuple[Outcome, str]:
        from hrl.executor import ExecutorConfig, HierarchicalAgent
        from hrl.hierarchy_eval import make_suite_env
        from hrl.tasks import TaskSuiteConfig

        if world.name not in self._envs:
            suite = TaskSuiteConfig(name="reward", map=world.source, max_episode_steps=self.max_episode_steps)
            self._envs[world.name] = make_suite_env(self.policy, suite, render=False)
        env = self._envs[world.name]
        start = gold.start if isinstance(gold.start, str) else list(gold.start)
        obs, _ = env.reset(seed=0, options={"start": start})
        config = ExecutorConfig(max_episode_steps=self.max_episode_steps)
        agent = HierarchicalAgent(GraphPlanner(goal_tolerance=tolerance), self.policy, config, tolerance)
        record, _ = agent.run(env, Task("answer", tuple(answer.targets), tuple(answer.avoid)), obs)
        if record.reason.startswith("plan_rejected") or record.reason.startswith("planner_error"):
            return Outcome.NO_ROUTE, record.reason
        outcome, detail = judge(record.trajectory, gold, world, tolerance)
        return outcome, f"{detail} (driven: {record.reason}, {record.steps} steps)"


class RewardError(RuntimeError):
    """Computing a reward failed on the gold data (not on the answer): names the row and the cause."""


@functools.lru_cache(maxsize=32)
def _world(name: str) -> World:
    return load_world(name)


def completion_text(completion: Any) -> str:
    """The answer text of a TRL completion: a string (standard format) or a list of chat messages
    (conversational format: the last message's ``content``)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    raise TypeError(f"a completion must be a str or a list of chat messages, got {type(completion).__name__}")


def make_reward_function(
    tolerance: float = 0.3,
    execution: str = "route",
    policy: str | None = None,
    extra_target_cost: float = 0.0,
    maps: dict[str, str | World] | None = None,
) -> Callable[..., list[float]]:
    """A TRL reward function ``fn(prompts, completions, **columns) -> list[float]`` (``reward_funcs=[fn]``)
    reading the gold of each completion from the dataset columns :data:`GOLD_COLUMNS`. After each call
    ``fn.last_rewards`` holds the :class:`Reward` s (outcome, detail) for logging.

    Args:
        tolerance: goal tolerance (m), as a task suite's ``goal_tolerance``.
        extra_target_cost: taken off a success per target beyond the gold's (see :func:`execution_reward`).
        maps: maps that are not shipped in ``sim/maps/``: the name in the ``map`` column -> a map path or World.
        execution: ``"route"`` (the planned route; fast) or ``"mujoco"`` (drive it with ``policy``).
        policy: the policy for ``execution="mujoco"`` (default: the shipped one).

    Raises (when called):
        ValueError: a gold column is missing or has another length than ``completions``.
        RewardError: the gold of a row is bad (unknown map or place); names the row.
    """
    if execution not in EXECUTIONS:
        raise ValueError(f"unknown execution {execution!r}; executions: {', '.join(EXECUTIONS)}")
    if not (isinstance(tolerance, (int, float)) and 0 < tolerance <= 5):
        raise ValueError(f"tolerance must be in (0, 5] m, got {tolerance!r}")
    if not (isinstance(extra_target_cost, (int, float)) and 0 <= extra_target_cost <= 1):
        raise ValueError(f"extra_target_cost must be in [0, 1], got {extra_target_cost!r}")
    runner = MujocoExecution(policy) if execution == "mujoco" else None
    own = {name: w if isinstance(w, World) else load_world(w) for name, w in (maps or {}).items()}
    for name, w in own.items():
        if w.name != name:
            raise ValueError(f"maps[{name!r}] is map {w.name!r}; key each map by its own name")

    def execution_reward_fn(prompts: list[Any], completions: list[Any], **columns: Any) -> list[float]:
        missing = [c for c in GOLD_COLUMNS if c not in columns]
        if missing:
            raise ValueError(
                f"the reward needs the dataset columns {', '.join(GOLD_COLUMNS)}; missing: {', '.join(missing)} "
                "(rows of llm_planner/posttrain/instructions.py carry them)"
            )
        for c in GOLD_COLUMNS:
            if len(columns[c]) != len(completions):
                raise ValueError(f"column {c!r} has {len(columns[c])} values for {len(completions)} completions")
        rewards = []
        for i, completion in enumerate(completions):
            try:
                gold = Gold.from_columns(*(columns[c][i] for c in GOLD_COLUMNS))
                rewards.append(
                    execution_reward(
                        completion_text(completion),
                        gold,
                        own.get(gold.map) or _world(gold.map),
                        tolerance,
                        runner,
                        extra_target_cost,
                    )
                )
            except Exception as err:
                row = {c: columns[c][i] for c in GOLD_COLUMNS}
                raise RewardError(f"reward of completion {i} (gold {row}) failed: {type(err).__name__}: {err}") from err
        execution_reward_fn.last_rewards = rewards  # type: ignore[attr-defined]
        return [r.value for r in rewards]

    execution_reward_fn.last_rewards = []  # type: ignore[attr-defined]
    return execution_reward_fn


__all__ = [
    "EXECUTIONS",
    "FORMAT_PENALTY",
    "GOLD_COLUMNS",
    "REWARDS",
    "Gold",
    "MujocoExecution",
    "Outcome",
    "Reward",
    "RewardError",
    "completion_text",
    "execution_reward",
    "judge",
    "make_reward_function",
    "planned_route",
    "read_answer",
]
