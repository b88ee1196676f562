"""Tabletop instructions as post-training data: the arm's ``llm_goals`` prompt and its gold answer.

The rover's SFT teaches the model its navigation answer; on the tabletop the same planner asks another question
(:func:`llm_planner.planners.llm_tabletop.tabletop_messages`: the scene's blocks and places, its worked examples,
the scene now, the instruction) and wants ``{"subgoals": [{"kind": "place", "object": ..., "on": ...}, ...]}``.
An adapter trained on navigation alone answers it badly (docs/hierarchy.md: most tabletop failures are answers
that name a block twice or put one on itself). This module turns generated tabletop instructions
(:mod:`llm_planner.posttrain.tabletop_instructions`, split by template and word, the 66 hand-written tabletop
instructions never generated) into items ``hrl-posttrain tabletop_train=N`` mixes into the SFT data:

* each instruction is shown in a random layout of its scene (seeded per item: the "Scene now" lines change, the
  answer does not; blocks start on the table, as the suites' episodes do);
* the gold answer is the worked examples' form (:func:`~llm_planner.planners.llm_tabletop.example_answer`), one
  place per goal, in order;
* :func:`score_tabletop` reads an answer as the planner does (JSON, place subgoals) and counts it right when it
  asks for exactly the gold relations in the gold order (validation's ``tabletop`` figure);
* :func:`tabletop_reward` is GRPO's reward (``hrl-posttrain stage=grpo tabletop_train=N``): the suites' acceptance
  (every gold relation holds at the end) applied to the plan run on a symbolic table, valued as navigation's
  rewards are (:data:`~llm_planner.posttrain.reward.REWARDS`).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from llm_planner.plan import PlanError
from llm_planner.planners.llm_tabletop import TABLETOP_EXAMPLES, check_plan, example_answer, load_tabletop_examples
from llm_planner.posttrain.reward import Outcome, Reward, _reward
from llm_planner.tabletop import ObjectView, PlaceSubgoal, PlaceView, Relation, TabletopPlan, TabletopView

#: The shipped scenes with a vocabulary (sim/scenes/vocab/): the default mix.
TABLETOP_SCENES = ("blocks", "sort", "clear")
#: Tokens a tabletop answer may take in validation (a place subgoal is ~25; "sort" asks for five).
TABLETOP_MAX_NEW = 160


@dataclass(frozen=True)
class TabletopItem:
    """One generated tabletop instruction with what its prompt needs: the scene, a layout seed, the gold."""

    scene: str
    text: str
    goals: tuple[Relation, ...]
    category: str
    layout_seed: int

    def answer_text(self) -> str:
        return example_answer(self.goals)

    def to_row(self) -> dict[str, Any]:
        return {"scene": self.scene, "text": self.text, "goals": [g.text() for g in self.goals],
                "category": self.category, "layout_seed": self.layout_seed}  # fmt: skip


def tabletop_items(
    n: int, split: str, seed: int = 0, scenes: tuple[str, ...] | list[str] = TABLETOP_SCENES
) -> list[TabletopItem]:
    """``n`` generated instructions of ``split`` ("train" or "val"), shared by ``scenes`` as equally as they
    allow, interleaved scene by scene; deterministic for a seed."""
    from llm_planner.posttrain.tabletop_instructions import generate_tabletop

    if n < 0:
        raise ValueError(f"n must be >= 0 tabletop instructions, got {n}")
    if not scenes:
        raise ValueError("scenes must name at least one tabletop scene (blocks, sort, clear or a scene path)")
    per = [n // len(scenes) + (k < n % len(scenes)) for k in range(len(scenes))]
    by_scene = []
    for scene, count in zip(scenes, per, strict=True):
        tasks = generate_tabletop(scene, count, split=split, seed=seed) if count else []
        name = str(scene)
        by_scene.append(
            [
                TabletopItem(name, t.text, t.goals, t.category, zlib.crc32(f"{seed}:{name}:{split}:{i}".encode()))
                for i, t in enumerate(tasks)
            ]
        )
    out = []
    for k in range(max(map(len, by_scene), default=0)):
        out += [items[k] for items in by_scene if k < len(items)]
    return out


@cache
def _scene(scene: str) -> Any:
    from sim.tabletop.scene import load_scene

    return load_scene(scene)  # parsed once a process: every item of a scene asks for it


def scene_view(scene: str, layout_seed: int) -> TabletopView:
    """The scene as the planner sees it at an episode's start: every block on the table where
    :meth:`TabletopScene.sample_layout` puts it for ``layout_seed``."""
    spec = _scene(scene)
    layout = spec.sample_layout(np.random.default_rng(layout_seed))
    objects = tuple(
        ObjectView(
            o.name,
            o.color,
            max(o.size),
            (layout[o.name][0], layout[o.name][1], spec.table.height + o.rest_z),
            None,
        )
        for o in spec.objects
    )
    places = tuple(PlaceView(p.name, p.kind, p.color, p.center) for p in spec.places)
    return TabletopView(spec.name, objects, places, (0.0, 0.0, spec.table.height + 0.3))


class TabletopPrompts:
    """The arm planner's prompt for a :class:`TabletopItem` (``render``: a PromptBuilder's; the worked examples
    of ``examples``, the planner's default bank unless given)."""

    def __init__(self, render: Any, examples: str | None = None) -> None:
        self.render = render
        self.examples = load_tabletop_examples(examples or TABLETOP_EXAMPLES)

    def messages(self, item: TabletopItem) -> list[dict[str, str]]:
        from llm_planner.planners.llm_tabletop import tabletop_messages

        view = scene_view(item.scene, item.layout_seed)
        shots = [e for e in self.examples if e.scene == view.scene]
        return tabletop_messages(self.render, shots, item.text, view)


def read_answer(text: str) -> list[tuple[str, str]] | None:
    """The (object, on) pairs an answer places, in order; None for an answer the planner could not read (the
    planner's own :class:`TabletopPlan`; a ValidationError is a ValueError)."""
    try:
        plan = TabletopPlan.model_validate_json(text)
    except ValueError:
        return None
    return [(s.object, s.on) for s in plan.subgoals if isinstance(s, PlaceSubgoal)]


def tabletop_reward(text: str, item: TabletopItem, partial: float = 0.0) -> Reward:
    """The reward of one tabletop answer: the suites' acceptance on the final state of the plan run symbolically.

    The answer is read as the planner reads it (:class:`TabletopPlan`; else ``malformed``, -0.1) and its names
    checked against the scene as the planner checks them (:func:`check_plan`; else ``unknown_place``, -0.1). Its
    place steps then run in order on a table where every block starts on the table (the episodes' start): a step
    is ``infeasible`` (0) when its block has another on top of it or is put on a block that is covered, as the
    learned skills cannot do either. ``success`` (1) when at the end every gold relation holds and no block the
    task does not move was moved (acceptance alone cannot see "all but the red one" answered with the red one
    too); otherwise ``missed_target`` (0). Order matters only where the table makes it matter (a stack). A pick,
    push, TCP or gripper step makes the answer ``missed_target``: the tabletop answer is place steps only, and
    judging the place steps alone would reward a plan that leaves a block in the gripper.

    ``partial`` > 0 (GRPO's ``tabletop_partial``) pays a ``missed_target`` plan that moves no block the task leaves
    alone ``partial`` x the fraction of the gold relations that hold at its end: a plan that stops after the first
    of two places earns something, less than the whole (with 0/1 alone, GRPO on version 4 learnt to answer one place
    whatever was asked: docs/posttrain.md)."""
    try:
        plan = TabletopPlan.model_validate_json(text)
    except ValueError as err:  # a pydantic ValidationError: not JSON, or not the plan's shape
        return _reward(Outcome.MALFORMED, f"not a tabletop plan: {str(err).splitlines()[0]}")
    view = scene_view(item.scene, item.layout_seed)
    try:
        check_plan(plan, view.names())
    except PlanError as err:
        return _reward(Outcome.UNKNOWN_PLACE, str(err))
    gold = [(g.object, g.on) for g in item.goals]
    steps = [(s.object, s.on) if isinstance(s, PlaceSubgoal) else None for s in plan.subgoals]
    exact = steps == gold
    if None in steps:
        kind = plan.subgoals[steps.index(None)].kind
        return _reward(Outcome.MISSED_TARGET, f"a {kind} step: the answer is place steps only", exact=exact)
    blocks = {o.name for o in view.objects}
    on = dict.fromkeys(blocks, "table")
    for i, (obj, target) in enumerate(steps, start=1):
        above = sorted(b for b in blocks if on[b] == obj)
        if above:
            return _reward(Outcome.INFEASIBLE, f"step {i} moves {obj}, which has {above[0]} on top", exact=exact)
        covered = sorted(b for b in blocks if on[b] == target and b != obj) if target in blocks else []
        if covered:
            return _reward(Outcome.INFEASIBLE, f"step {i} puts {obj} on {target}, which has {covered[0]} on it",
                           exact=exact)  # fmt: skip
        on[obj] = target
    missing = [f"{o} on {t}" for o, t in gold if on[o] != t]
    extra = sorted({o for o, _ in steps} - {o for o, _ in gold})
    if missing:
        miss = _reward(Outcome.MISSED_TARGET, f"at the end not {', '.join(missing)}", exact=exact)
        if partial and not extra:
            return Reward(partial * (1 - len(missing) / len(gold)), miss.outcome, miss.detail, exact)
        return miss
    if extra:
        return _reward(Outcome.MISSED_TARGET, f"moves {', '.join(extra)}, which the task leaves alone", exact=exact)
    return _reward(Outcome.SUCCESS, "every gold relation holds at the end", exact=exact)


def score_tabletop(items: list[TabletopItem], answers: list[str]) -> list[bool]:
    """Per item: the answer places exactly the gold relations, in the gold order."""
    return [read_answer(a) == [(g.object, g.on) for g in it.goals] for it, a in zip(items, answers, strict=True)]
