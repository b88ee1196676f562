"""``llm_goals`` on the tabletop: a language model reads the instruction against the scene and answers a
:class:`~llm_planner.tabletop.TabletopPlan`.

One call: a system prompt (the task, the scene's blocks with colour and size, its places), all the scene's worked
examples (``llm_planner/prompts/tabletop_examples.yaml``) as earlier turns, then the scene now (``scene.text()``:
where each block is and what it rests on) and the instruction. The answer is decoded under
``TabletopPlan.json_schema(scene.names())`` (names as enums; every subgoal's ``kind`` made required, so the grammar
writes it and the subgoal union parses), then parsed and checked against the scene; an invalid answer is sent
back with the error. Attempts, votes, the cache and the accounting are the planner's own (``LLMPlanner.ask``), as
for the rover. The system prompt and the examples depend on the scene, not on its layout, so llama.cpp evaluates
them once per scene and reuses them.

After a failure the reading is kept, as on the rover: the same plan is issued again without the subgoals whose
effect already holds in the scene; with ``reprompt_on_failure`` the model is asked again, told the failure and
shown the scene.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from llm_planner.llm.backend import Message
from llm_planner.llm.prompts import PROMPTS_DIR, check_instruction
from llm_planner.plan import PlanError, _unknown
from llm_planner.tabletop import (
    PickSubgoal,
    PlaceSubgoal,
    PushSubgoal,
    Relation,
    TabletopPlan,
    TabletopTask,
    TabletopView,
)

if TYPE_CHECKING:
    from llm_planner.planners.llm import LLMPlanner

TABLETOP_EXAMPLES = PROMPTS_DIR / "tabletop_examples.yaml"
#: Tokens per answer when ``max_tokens`` is not set: a place subgoal is ~25 tokens, and "put every block away"
#: in the sort scene is five of them.
TABLETOP_MAX_TOKENS = 256


@dataclass(frozen=True)
class TabletopExample:
    scene: str
    text: str
    goals: tuple[Relation, ...]


def load_tabletop_examples(path: str | Path = TABLETOP_EXAMPLES) -> list[TabletopExample]:
    """The worked examples of a YAML bank (``examples: [{scene, text, goals: ["a on b", ...]}]``)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"tabletop example bank {str(path)!r} not found; give a YAML file of examples or leave null")
    data = yaml.safe_load(path.read_text()) or {}
    out = []
    for i, e in enumerate(data.get("examples", [])):
        try:
            goals = []
            for g in e["goals"]:
                obj, on = g.split(" on ")  # ValueError unless exactly one " on "
                goals.append(Relation(obj.strip(), on.strip()))
            out.append(TabletopExample(str(e["scene"]), str(e["text"]), tuple(goals)))
        except (KeyError, TypeError, AttributeError, ValueError) as err:
            raise ValueError(
                f"{path}: examples[{i}] needs scene, text and goals as '<object> on <object or place>': {err!r}"
            ) from None
    return out


def example_answer(goals: tuple[Relation, ...]) -> str:
    """The right answer to a worked example: one place per goal, in order."""
    return json.dumps({"subgoals": [{"kind": "place", "object": g.object, "on": g.on} for g in goals]})


def decoding_schema(names: dict[str, list[str]]) -> dict[str, Any]:
    """The schema answers are decoded under: ``TabletopPlan.json_schema(names)`` (kinds required, no push in a
    scene without places)."""
    return TabletopPlan.json_schema(names)


class TabletopAnswer(TabletopPlan):
    """A model's plan, with the key votes are counted by (``self_consistency``)."""

    def key(self) -> str:
        return self.to_json()


def check_plan(plan: TabletopPlan, names: dict[str, list[str]]) -> None:
    """PlanError unless every name is the scene's and nothing is put on itself (an unconstrained answer can
    name anything; the grounding would refuse it after the call, this lets the model try again)."""
    targets = names["object"] + names["place"]
    for i, sub in enumerate(plan.subgoals, start=1):
        fields = {"object": names["object"], "on": targets, "to": names["place"]}
        for key, known in fields.items():
            value = getattr(sub, key, None)
            if value is not None and value not in known:
                raise PlanError(f"subgoal {i}: {_unknown('object' if key == 'object' else 'place', value, known)}")
        if isinstance(sub, PlaceSubgoal) and sub.on == sub.object:
            raise PlanError(f"subgoal {i}: cannot place {sub.object!r} on itself")


def holds_in(sub: Any, scene: TabletopView) -> bool:
    """Whether a subgoal's effect already holds in the scene (the block rests there, or is held)."""
    if isinstance(sub, PickSubgoal):
        where = "gripper"
    elif isinstance(sub, PlaceSubgoal):
        where = sub.on
    elif isinstance(sub, PushSubgoal):
        where = sub.to
    else:
        return False
    return scene.object(sub.object).on == where


class TabletopReader:
    """The tabletop half of ``llm_goals``: prompt, constrained answer, checks, and keeping the reading."""

    def __init__(self, planner: LLMPlanner, examples: str | Path | None, max_tokens: int) -> None:
        self.planner = planner
        self.examples = load_tabletop_examples(examples or TABLETOP_EXAMPLES)
        self.max_tokens = max_tokens
        self._interpretation: tuple[str, str, TabletopPlan] | None = None  # (scene, text, plan) being executed

    def plan(self, task: TabletopTask, scene: TabletopView, feedback: Any = None) -> TabletopPlan:
        current = self._interpretation
        same_task = current is not None and current[:2] == (scene.scene, task.text)
        if feedback is not None and same_task and not self.planner.reprompt_on_failure:
            plan = current[2]  # type: ignore[index]
        else:
            messages = self.messages(task.text, scene)
            if feedback is not None and same_task:
                messages += [
                    {"role": "assistant", "content": current[2].to_json()},  # type: ignore[index]
                    {
                        "role": "user",
                        "content": self.planner.prompts.render(
                            "tabletop_feedback.j2", feedback=feedback, scene_text=scene.text(), instruction=task.text
                        ),
                    },
                ]
            plan = self.ask(messages, scene)
            self._interpretation = (scene.scene, task.text, plan)
        if feedback is None:
            return plan
        left = [s for s in plan.subgoals if not holds_in(s, scene)]
        if not left:
            raise PlanError("every subgoal the model planned holds now, but the task is not done")
        return TabletopPlan(subgoals=left, rationale=plan.rationale)

    def ask(self, messages: list[Message], scene: TabletopView) -> TabletopPlan:
        names = scene.names()

        def parse(raw: str) -> TabletopAnswer:
            answer = TabletopAnswer.from_json(raw)
            check_plan(answer, names)
            return answer

        schema = decoding_schema(names) if self.planner.constrained else None
        answer = self.planner.ask(messages, None, parse=parse, schema=schema, max_tokens=self.max_tokens)
        return TabletopPlan(subgoals=list(answer.subgoals), rationale=answer.rationale)  # type: ignore[union-attr]

    def messages(self, instruction: str, scene: TabletopView) -> list[Message]:
        """System prompt (the scene's blocks and places), the scene's worked examples, then the scene now and
        the instruction."""
        return tabletop_messages(self.planner.prompts.render, self.shots(scene.scene), instruction, scene)

    def shots(self, scene: str) -> list[TabletopExample]:
        """Every worked example of the scene, in the bank's order: a prompt prefix that is the same for every
        instruction in a scene is evaluated once by llama.cpp. (Retrieving the most similar ones, as for the rover,
        made the 135M model copy the nearest example's answer: 1 of 13 plans right against 3, at 14 s per call
        against 4.4 s; ``n_examples`` and ``retrieval`` are the rover's.)"""
        return [e for e in self.examples if e.scene == scene]


def tabletop_messages(
    render: Any, shots: list[TabletopExample], instruction: str, scene: TabletopView
) -> list[Message]:
    """The tabletop prompt: system (``render``: :meth:`PromptBuilder.render`), the worked examples ``shots`` as
    earlier turns, then the scene now and the instruction; what the planner asks and post-training trains on
    (llm_planner/posttrain/tabletop_sft.py)."""
    check_instruction(instruction)
    msgs: list[Message] = [
        {"role": "system", "content": render("tabletop_system.j2", scene=scene, objects=_described(scene))}
    ]
    names = scene.names()
    for ex in shots:
        for g in ex.goals:
            if g.object not in names["object"] or g.on not in names["object"] + names["place"]:
                raise ValueError(
                    f"tabletop example {ex.text!r} names {g.text()!r}, not in scene {scene.scene!r}: "
                    f"objects {names['object']}, places {names['place']}"
                )
        msgs.append({"role": "user", "content": render("tabletop_user.j2", instruction=ex.text, scene_text="")})
        msgs.append({"role": "assistant", "content": example_answer(ex.goals)})
    user = render("tabletop_user.j2", instruction=instruction, scene_text=scene.text())
    msgs.append({"role": "user", "content": user})
    return msgs


def _described(scene: TabletopView) -> list[dict[str, str]]:
    """Each object's name, colour and size, with "big"/"small" where the scene's sizes differ."""
    sizes = [o.size for o in scene.objects]
    lo, hi = min(sizes), max(sizes)
    words = {hi: "big", lo: "small"} if hi > lo else {}
    return [
        {"name": o.name, "color": o.color, "size_cm": f"{o.size * 100:g}", "size_word": words.get(o.size, "")}
        for o in scene.objects
    ]
