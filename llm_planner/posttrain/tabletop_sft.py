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
  asks for exactly the gold relations in the gold order.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from llm_planner.planners.llm_tabletop import TABLETOP_EXAMPLES, example_answer, load_tabletop_examples
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


def score_tabletop(items: list[TabletopItem], answers: list[str]) -> list[bool]:
    """Per item: the answer places exactly the gold relations, in the gold order."""
    return [read_answer(a) == [(g.object, g.on) for g in it.goals] for it, a in zip(items, answers, strict=True)]
