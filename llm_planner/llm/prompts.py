"""Prompts: Jinja2 templates (``llm_planner/prompts/*.j2`` or a directory of your own) rendering the scene
and the instruction, and few-shot examples retrieved from a bank of worked examples.

Retrieval follows LLM-Planner (Song et al., 2023): the examples whose instructions are most similar to
the new one (TF-IDF cosine over words, same map only) are shown, most similar last (closest to the
question). Example answers are not written by hand: they are derived from each example's targets with
the map (the ``graph`` route, for ``llm_route``), so they are always correct and consistent.

The message order keeps llama.cpp's KV cache useful: the system prompt (instructions + scene) is the
same for every call in a map; only the examples and the question change.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import yaml

from llm_planner.llm.backend import Message
from llm_planner.plan import PlanError
from sim.navigation.world import World

PROMPTS_DIR = Path(__file__).resolve().parents[1] / "prompts"
DEFAULT_EXAMPLES = PROMPTS_DIR / "examples.yaml"
_WORD = re.compile(r"[a-z]+")
# not ignored: "then", "and", "without"... carry the instruction's structure
_STOP = frozenset({"a", "an", "the", "to", "of", "please", "go"})
#: Instructions are a sentence or a few; a longer text is refused before any prompt is built: it would not
#: fit a small model's context, and reading=spans offers the instruction's phrases as an enum that grows with
#: its length (100 kB of text: 69 000 phrases, a 4 MB schema sent with every request, ~1 s to compile).
MAX_INSTRUCTION_CHARS = 1000
#: A robot within this distance of a landmark is "at" it (the post-training generator's start place, where
#: "come back" leads, uses the same radius).
AT_LANDMARK_RADIUS = 0.3


def robot_whereabouts(world: World, xy: tuple[float, float]) -> str:
    """Where the robot is, as the prompt says it: "at the charging_dock, in the hallway" (a landmark within
    :data:`AT_LANDMARK_RADIUS`) or "in the kitchen"; names are the scene's, so the model can answer with them
    ("come back" needs it)."""
    from llm_planner.planners.graph import room_name  # the planner package imports this module

    room = room_name(world, xy)
    for lm in world.landmarks:
        if math.dist(lm.position, xy) <= AT_LANDMARK_RADIUS:
            return f"at the {lm.name}, in the {room}"
    return f"in the {room}"


def check_instruction(text: object) -> str:
    """The instruction, if a model can be asked about it; PlanError (a ValueError) saying what is wrong
    otherwise: not text, empty or blank, longer than :data:`MAX_INSTRUCTION_CHARS`, or holding control
    characters (other than tab and newlines), lone surrogates or U+FFFD (text decoded from bytes that were
    not UTF-8)."""
    if not isinstance(text, str):
        raise PlanError(f"the instruction must be text, got {type(text).__name__}")
    if not text.strip():
        raise PlanError(f"the instruction {text!r} is empty; say where the robot should go, e.g. 'Go to the fridge.'")
    if len(text) > MAX_INSTRUCTION_CHARS:
        raise PlanError(
            f"the instruction is {len(text)} characters long (it starts {text[:40]!r}); instructions of at most "
            f"{MAX_INSTRUCTION_CHARS} characters are read: say where the robot should go in a sentence or two"
        )
    for i, c in enumerate(text):
        kind = unicodedata.category(c)
        if (kind == "Cc" and c not in "\t\n\r") or kind == "Cs" or c == "\ufffd":
            what = "a control character" if kind == "Cc" else "not valid Unicode text (was it decoded as UTF-8?)"
            raise PlanError(
                f"the instruction holds U+{ord(c):04X} at character {i}: {what}; near {text[max(0, i - 20) : i]!r}"
            )
    return text


@dataclass(frozen=True)
class Example:
    map: str
    start: str  # the room the robot is in
    text: str
    targets: tuple[str, ...]
    avoid: tuple[str, ...] = ()
    phrases: dict[str, list[str]] | None = None  # reading=spans: the words naming each target / avoided room


def load_examples(path: str | Path = DEFAULT_EXAMPLES) -> list[Example]:
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"example bank {str(path)!r} not found; give a YAML file of examples or leave the default")
    data = yaml.safe_load(path.read_text()) or {}
    out = []
    for i, e in enumerate(data.get("examples", [])):
        try:
            out.append(
                Example(
                    e["map"], e["start"], e["text"], tuple(e["targets"]), tuple(e.get("avoid", ())), e.get("phrases")
                )
            )
        except (KeyError, TypeError) as err:
            raise ValueError(
                f"{path}: examples[{i}] needs map, start, text, targets (and optional avoid): {err}"
            ) from None
    return out


def words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


class ExampleBank:
    """Worked examples of one map, and TF-IDF retrieval over their instructions."""

    def __init__(self, examples: list[Example], world: World) -> None:
        self.world = world
        self.examples = [e for e in examples if e.map == world.name]
        for e in self.examples:
            for name in (*e.targets, *e.avoid):
                world.resolve(name)  # a broken bank fails loudly, with the known names
        docs = [Counter(words(e.text)) for e in self.examples]
        n = len(docs)
        df = Counter(w for d in docs for w in d)
        self._idf = {w: math.log((1 + n) / (1 + c)) + 1 for w, c in df.items()}
        self._vectors = [self._vector(d) for d in docs]
        self._spans: dict[str, tuple[list[str], list[str]] | None] = {}  # example text -> its phrases

    def _vector(self, counts: Counter[str]) -> dict[str, float]:
        v = {w: c * self._idf.get(w, 1.0) for w, c in counts.items()}
        norm = math.sqrt(sum(x * x for x in v.values())) or 1.0
        return {w: x / norm for w, x in v.items()}

    def nearest(self, text: str, k: int) -> list[Example]:
        """The ``k`` most similar examples, least similar first (the nearest ends up next to the question)."""
        q = self._vector(Counter(words(text)))
        scored = [(sum(q.get(w, 0.0) * x for w, x in v.items()), i) for i, v in enumerate(self._vectors)]
        best = sorted(scored, key=lambda s: (-s[0], s[1]))[:k]
        return [self.examples[i] for _, i in reversed(best)]

    def spans(self, ex: Example) -> tuple[list[str], list[str]] | None:
        """The phrases of an example's instruction that name its targets and avoided rooms (given in the
        bank, or found by name/alias), or None when they cannot be found."""
        from llm_planner.llm.answers import example_phrases

        if ex.text in self._spans:
            return self._spans[ex.text]
        given = ex.phrases or {}
        targets = given.get("targets") or example_phrases(ex.text, ex.targets, self.world, ("landmark", "room"))
        avoid = given.get("avoid") or example_phrases(ex.text, ex.avoid, self.world, ("room",))
        found = None if targets is None or avoid is None else (list(targets), list(avoid))
        self._spans[ex.text] = found
        return found

    def first(self, k: int) -> list[Example]:
        return self.examples[:k]


class PromptBuilder:
    """Renders the chat messages of one planning call."""

    def __init__(self, mode: str, template_dir: str | Path | None = None, tagged: bool = False) -> None:
        """``tagged``: ask for the tagged answer (llm_goals, ``reading=tagged``: llm_planner/llm/answers.py)."""
        directory = Path(template_dir) if template_dir else PROMPTS_DIR
        if not directory.is_dir():
            raise ValueError(f"template_dir {str(directory)!r} is not a directory of .j2 prompt templates")
        self.mode = mode
        self.tagged = tagged
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader([str(directory), str(PROMPTS_DIR)]),
            undefined=jinja2.StrictUndefined,
            keep_trailing_newline=False,
            autoescape=False,  # plain text for a model, not HTML
        )
        self._system = {"llm_goals": "system_goals.j2", "llm_route": "system_route.j2"}[mode]

    def render(self, name: str, **context: Any) -> str:
        try:
            return self.env.get_template(name).render(**context).strip()
        except jinja2.TemplateError as err:
            raise ValueError(f"prompt template {name!r}: {type(err).__name__}: {err}") from None

    def system(self, world: World) -> str:
        return self.render(self._system, world=world, tagged=self.tagged)

    def messages(
        self,
        world: World,
        instruction: str,
        robot_room: str | None,
        examples: list[Example],
        robot_at: str | None = None,
    ) -> list[Message]:
        """System prompt (scene), worked examples, then the instruction. ``robot_at`` (llm_goals): where the
        robot is (:func:`robot_whereabouts`), said before the instruction; the post-trained planner is
        trained with it, so "come back" has a place to name."""
        check_instruction(instruction)
        msgs: list[Message] = [{"role": "system", "content": self.system(world)}]
        for ex in examples:
            room = ex.start if self.mode == "llm_route" else None
            msgs.append({"role": "user", "content": self.render("user.j2", instruction=ex.text, robot_room=room)})
            msgs.append({"role": "assistant", "content": example_answer(self.mode, ex, world)})
        room = robot_room if self.mode == "llm_route" else None
        msgs.append(
            {
                "role": "user",
                "content": self.render("user.j2", instruction=instruction, robot_room=room, robot_at=robot_at),
            }
        )
        return msgs

    def span_messages(self, instruction: str, bank: ExampleBank, examples: list[Example]) -> list[Message]:
        """reading=spans, step 1: copy the phrases naming the targets and the rooms to avoid."""
        check_instruction(instruction)
        msgs: list[Message] = [{"role": "system", "content": self.render("system_spans.j2")}]
        for ex in examples:
            spans = bank.spans(ex)
            if spans is None:
                continue
            msgs.append({"role": "user", "content": self.render("user.j2", instruction=ex.text, robot_room=None)})
            msgs.append({"role": "assistant", "content": json.dumps({"targets": spans[0], "avoid": spans[1]})})
        msgs.append({"role": "user", "content": self.render("user.j2", instruction=instruction, robot_room=None)})
        return msgs

    def next_messages(self, span_messages: list[Message], found: list[str], avoid: list[str]) -> list[Message]:
        """reading=spans, follow-up: the same conversation, continued with "is there another place after
        the last one found?" (it shares its whole prefix with the first call, so llama.cpp only evaluates
        the new tokens)."""
        answer = json.dumps({"targets": found, "avoid": avoid})
        return [
            *span_messages,
            {"role": "assistant", "content": answer},
            {"role": "user", "content": self.render("next.j2", so_far=found)},
        ]

    def place_messages(self, world: World, phrase: str, bank: ExampleBank) -> list[Message]:
        """reading=spans, step 2: which place a phrase that names none outright means."""
        from llm_planner.llm.answers import strip_article

        msgs: list[Message] = [{"role": "system", "content": self.render("system_place.j2", world=world)}]
        pairs: dict[str, str] = {}  # phrase -> place: the bank's descriptions first, then its aliases
        for ex in bank.examples:
            pairs.update(zip((ex.phrases or {}).get("targets", []), ex.targets, strict=False))
        for ex in bank.examples:
            spans = bank.spans(ex)
            if spans is not None:
                pairs.update((strip_article(p), t) for p, t in zip(spans[0], ex.targets, strict=True))
        for p, name in list(pairs.items())[:12]:
            msgs.append({"role": "user", "content": self.render("phrase.j2", phrase=p)})
            msgs.append({"role": "assistant", "content": json.dumps({"place": name})})
        msgs.append({"role": "user", "content": self.render("phrase.j2", phrase=phrase)})
        return msgs


def example_answer(mode: str, ex: Example, world: World) -> str:
    """The correct answer to a worked example, as the model should write it."""
    if mode == "llm_goals":
        return json.dumps({"targets": list(ex.targets), "avoid": list(ex.avoid)})
    return json.dumps({"route": oracle_route(world, ex.start, ex.targets, ex.avoid)})


def oracle_route(world: World, start_room: str, targets: tuple[str, ...], avoid: tuple[str, ...] = ()) -> list[str]:
    """The shortest valid route (door names and the targets) from ``start_room`` through ``targets``."""
    import networkx as nx

    graph = world.graph()
    graph.remove_nodes_from([r for r in avoid if r != start_room])
    route: list[str] = []
    room = start_room
    for t in targets:
        place = world.resolve(t)
        goal_room = getattr(place, "room", None) or place.name
        path = nx.shortest_path(graph, room, goal_room)
        route += [n for n in path if graph.nodes[n]["kind"] == "door"]
        route.append(place.name)
        room = goal_room
    return route
