"""Procedurally generated instructions with their gold tasks, for post-training the LLM planner.

Every :class:`Instruction` is a sentence a person could say ("Take me to the cold box with the leftovers,
keeping out of the hallway") and the task it means, in the structure of the project's language suites
(``configs/task/*_language.yaml``): a start, the ``goals`` to visit in order and the rooms to ``avoid``;
``answer()`` is the same gold as the ``llm_goals`` answer (``{"targets": [...], "avoid": [...]}``).

Places are referred to by their name ("the charging dock"), a map alias ("the charger"), or a phrase of
the map's vocabulary (llm_planner/posttrain/vocab.py: "your home base"). Categories (:data:`CATEGORIES`):

========== ==================================================================================
single     one place by its name
alias      one place by one of the map's aliases
indirect   one place by what it is for (a vocabulary phrase)
multi      two or three places in order ("X first, Z last, Y in between")
avoid      one place and a room not to enter (in the house, often a room on the shortest route)
correction a place, then a correction ("... - no wait, the living room"): only the last one counts
return     one or two places "and back": the gold ends at the start place (the landmark the robot
           starts at, e.g. the charging dock, else the room it starts in)
filler     a single or multi instruction wrapped in filler and politeness ("Hey robot, ... Thanks!")
typo       a single or alias instruction with one or two typing errors in the place's words
========== ==================================================================================

**Splits** (:data:`SPLITS`) hold out templates *and* vocabulary. Per seed, each template family is
shuffled and cut into train / val / test_gen (60/20/20 %, at least one each), and so are the filler
phrases (templates appended to a family later are cut among themselves, :data:`DEALT`, so earlier ones keep
their split); per place, the map's aliases and the vocabulary's phrases are each shuffled and one is held out
for val and, where there are three or more, one for test_gen. An instruction of a split uses only that
split's templates and phrases, so val and test_gen read sentences and words that training never saw.
Names ("the kitchen") are shared by all splits: they are what the model must always read.

**Test set**: the 64 instructions of ``apartment_language`` and ``house_language`` are the test set. No
template is one of them with its place names swapped, and none of them is ever generated
(tests/llm_planner/test_instructions.py checks many seeds); :func:`generate` also drops any
instruction whose normalised text equals a test instruction (counted in the dataset card).

**Composed instructions** (:func:`generate_composed`, :data:`COMPOSED`) are a train-only family: a train goal
sentence joined with a piece ("Don't roll through the office.", "But first, ...", "Then come home to me.") that
shares no three words in a row with any template, so val and test_gen are untouched by them.

Dataset on disk (JSONL per split + ``card.json`` + ``README.md``)::

    python -m llm_planner.posttrain.instructions --map apartment --map house --n 2000 --seed 0 --out DIR
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import re
import shlex
import sys
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from llm_planner.base import Task
from llm_planner.llm.answers import tagged_goals
from llm_planner.plan import PlanError
from llm_planner.planners.graph import GraphPlanner, room_name
from llm_planner.posttrain.vocab import Vocabulary, load_vocabulary, maps_with_vocabulary
from sim.navigation.world import Landmark, World, load_world

CATEGORIES = ("single", "alias", "indirect", "multi", "avoid", "correction", "return", "filler", "typo")
SPLITS = ("train", "val", "test_gen")
#: Share of each template family (and of the filler phrases) per split, in SPLITS order.
SPLIT_FRACTIONS = (0.6, 0.2, 0.2)
#: The suites whose instructions are the test set: never generated, never a template.
TEST_SUITES = ("apartment_language", "house_language")
#: A landmark within this distance of the start pose is the start place of a "return" instruction.
START_PLACE_RADIUS = 0.3
#: Draws in a row that give nothing new before a category counts as exhausted for a split (its templates and
#: phrases are all used); the split goes on with the other categories and the card records it.
MAX_MISSES = 300

# Templates: {a}, {b}, {c} the places in order, {x} a room to avoid, {w} the place a correction takes back.
# None may be a test instruction with other names (a test checks): no "Go to the {a}.", "Head to ...".
TEMPLATES: dict[str, tuple[str, ...]] = {
    "one": (
        "Take me to {a}.",
        "Navigate to {a}.",
        "Could you head over to {a}?",
        "I need you at {a}.",
        "Make your way to {a}.",
        "Roll over to {a}.",
        "Head for {a} now.",
        "Proceed to {a}.",
        "Get yourself over to {a}.",
        "Travel to {a}.",
        "Can you get to {a}?",
        "Your next stop is {a}.",
        "I'd like you to be at {a}.",
        "Wheel over to {a}.",
        "Off you go to {a}.",
        "Please make it to {a} as soon as you can.",
        "Would you drive yourself to {a}?",
        "Show me {a}.",
        "Bring yourself to {a}.",
        "I want you over at {a}.",
        "Scoot over to {a}.",
        "Find your way to {a}.",
        "Be at {a} in a minute.",
        "Your destination: {a}.",
    ),
    "multi": (
        "Take me to {a} and afterwards to {b}.",
        "Stop by {a}, then swing by {b}.",
        "Visit {a}; once done, continue to {b}.",
        "Head for {a}, followed by {b}.",
        "Begin with {a} and finish at {b}.",
        "Before going to {b}, stop at {a}.",
        "Go on to {b} after you have been to {a}.",
        "Make a stop at {a} on the way to {b}.",
        "Navigate to {a}, next {b}, and last of all {c}.",
        "{a} first, {c} last, {b} in between.",
        "Start at {a}, continue to {b}, and end at {c}.",
        "Your route today: {a}, then {b}, then {c}.",
        "Hit {a}, {b} and {c}, in that order.",
        "Check on {a}, after it {b}, and then {c}.",
        "First stop {a}, second stop {b}.",
        "Drop by {a} and, after that, {b}.",
        "Pass by {a} before you reach {b}.",
        "Visit {a}, {b} and {c}, one after another.",
        "Route: {a}, {b}, {c}.",
        "{a} comes first; head on to {b} after.",
        # 2026-12-06, version 4 (multi read 67 % on val with version 3): dealt among themselves (DEALT)
        "First {a}, and once you're done there, {b}.",
        "I need you at {a} and then at {b}.",
        "Call at {a}, then carry on to {b}.",
        "Three stops: {a}, {b}, and finally {c}.",
        "Head to {a}. When that's done, move on to {b}. End at {c}.",
        "Start with {a}; {b} comes next.",
        "After visiting {a}, make your way over to {b}.",
        "Go to {a} first and {b} second.",
        # 2026-12-06, version 5: the order is not the order of mention (val's multi failures were all such)
        "End at {c}, but visit {a} and then {b} before that.",
        "{c} is the last stop; start at {a} and pass {b} on the way.",
        "Go to {b} second, {a} first, and {c} third.",
        "Save {c} for last; begin with {a}, then {b}.",
        "Before {c}, see {a} and then {b}.",
        "Your final stop is {c}. Your first is {a}, and {b} comes in the middle.",
        "{b} should come after {a}; finish with {c}.",
        "Visit {c} at the end, {a} at the start, and {b} somewhere in the middle.",
    ),
    "avoid": (
        "Take me to {a}, keeping out of {x}.",
        "Navigate to {a} but don't set foot in {x}.",
        "Reach {a} while avoiding {x}.",
        "Head for {a}; {x} is off limits.",
        "Make your way to {a} and stay clear of {x}.",
        "Without entering {x}, get to {a}.",
        "Get to {a}. Do not pass through {x}.",
        "Stay away from {x} on your way to {a}.",
        "{x} is being cleaned, so reach {a} another way.",
        "Travel to {a} and keep away from {x}.",
        "Get to {a}, but {x} is a no-go zone.",
        "Steer clear of {x} and reach {a}.",
        "Reach {a}, and whatever you do, skip {x}.",
        "Route to {a}, bypassing {x}.",
        "Head for {a} and give {x} a wide berth.",
        "Do not drive into {x}; just get to {a}.",
        "{a}, please - but not through {x}.",
        "Find a way to {a} that avoids {x}.",
        "Keep {x} out of your route to {a}.",
        "Make it to {a} without crossing {x}.",
        "Avoid {x} entirely and travel to {a}.",
        "Nobody may enter {x} right now; head for {a}.",
        # 2026-12-06, version 4 (avoid read 67 % on val with version 3): dealt among themselves (DEALT)
        "{x} is closed right now. Please get to {a}.",
        "Under no circumstances enter {x}; your destination is {a}.",
        "The floor in {x} is wet, so keep out of it while you go to {a}.",
        "{x} must not be entered. Destination: {a}.",
        "Don't cut through {x}. I need you at {a}.",
        "Skip {x} completely and end up at {a}.",
        "With {x} out of bounds, make your way to {a}.",
        "Someone is asleep in {x}, so don't go in there; drive to {a}.",
        "Leave {x} alone and proceed to {a}.",
        "No entering {x} this time. Target: {a}.",
        # 2026-12-06, version 5: the room to avoid named first, with its reason
        "{x} has a wet floor, so find another way to {a}.",
        "Because {x} is closed, take a route to {a} that skips it.",
        "There's a party in {x}; go to {a} without passing through it.",
        "{x} is full of boxes. Get to {a} some other way.",
    ),
    "correction": (
        "Take me to {w} - no wait, {a}.",
        "Head for {w}... actually, make that {a}.",
        "Navigate to {w}. Sorry, I meant {a}.",
        "Get to {w}, no, scratch that, {a}.",
        "Proceed to {w} - correction: {a}.",
        "Not {w}, I mean {a}: go there.",
        "Make your way to {w}, or rather {a}.",
        "{a}, not {w}, is where I want you.",
        "Travel to {w}... wait, no, {a} instead.",
        "Roll over to {w}. Hmm, on second thought, {a}.",
        "Drive over to {w}... oops, I mean {a}.",
        "{w}. No, hold on, {a}.",
        "Head for {w} - my mistake, {a}.",
        "Take me to {w}; sorry, make it {a}.",
        "Get to {w} - I misspoke, {a}.",
    ),
    "return": (
        "Pop over to {a} and come back.",
        "Visit {a} and return here afterwards.",
        "Check on {a}, then come back to where you are now.",
        "Make a round trip to {a}.",
        "Swing by {a} and head back.",
        "Run to {a} and back.",
        "Take a look at {a}, then come right back.",
        "Visit {a} and {b}, then return to your starting point.",
        "Patrol {a} and {b}, and come back here.",
        "Stop by {a}, then {b}, then back to where you started.",
        "See {a}, then return.",
        "Drive out to {a} and back again.",
        "Visit {a}, then come back to me.",
        "Check {a} and report back here.",
        "Head out to {a}, then return to where you began.",
        "Go round {a} and {b}, ending where you started.",
        "Visit {a}, then {b}, and finally come back here.",
        "Do a loop: {a}, {b}, and back to the start.",
    ),
}
FILLERS: dict[str, tuple[str, ...]] = {
    "prefix": (
        "Hey robot, ",
        "Um, ",
        "Okay so, ",
        "If you don't mind, ",
        "When you get a chance, ",
        "Robot, ",
        "Alright, ",
        "Hi there! ",
        "Listen, ",
        "Quick favour: ",
    ),
    "suffix": (
        " Thanks!",
        " Thank you so much.",
        " No rush.",
        " Cheers.",
        " That would be great.",
        " Much appreciated.",
        " Take your time.",
        " Thanks a lot, robot.",
        " I'd appreciate it.",
        " Be careful.",
    ),
}
#: Pieces of *composed* training instructions (:func:`generate_composed`, ``hrl-posttrain composed_train=N``):
#: a goal sentence of the seed's train split (family "one") joined with one of these, in either order. They are
#: train-only (val and test_gen never draw them, so those splits and their figures are unchanged), and share no
#: three words in a row with any template of any split (a test checks), so they hold no held-out phrasing. Written
#: 2026-12-07 from the categories version 6 reads worst on unseen phrasings (avoid, return, multi order), without
#: the wording of any held-out template. {x} the room to avoid, {c} the last place.
COMPOSED: dict[str, tuple[str, ...]] = {
    "avoid": (
        "Keep your wheels out of {x}.",
        "{x} is out of the question.",
        "Don't roll through {x}.",
        "Do not use {x} as a shortcut.",
        "Stay outside {x} the whole time.",
        "{x} is blocked today.",
        "Treat {x} as a wall.",
        "You may not go through {x}.",
        "{x} is forbidden for now.",
        "I don't want you in {x}.",
        "Route around {x}.",
        "The dog is sleeping in {x}, so stay out of there.",
        "We're mopping {x}; don't drive in there.",
        "{x} is being renovated, keep clear.",
        "Please don't enter {x}.",
        "There's broken glass all over {x}, so keep your distance.",
        "No driving through {x}.",
        "Pretend {x} doesn't exist.",
        "{x} is not part of this trip.",
        "Whatever route you take must not include {x}.",
        "{x} has fresh paint on the floor; avoid it.",
        "Kids are playing in {x}, so go around it.",
    ),
    "return": (
        "Then come home to me.",
        "After that, drive back to this spot.",
        "Once that's done, head home to this very spot.",
        "When you're finished, roll back here.",
        "Come straight back afterwards.",
        "Afterwards, drive back to your current position.",
        "Then roll yourself back over here.",
        "End the trip back at your current spot.",
        "I'll be waiting here for you to return.",
        "Remember to head home to me after.",
        "Finish back at your starting spot.",
    ),
    # joins the next goal sentence, in the order of the trip
    "then": ("After that, ", "Next, ", "When you're done, ", "Once you get there, ", "Later, ", "Following that, "),
    # joins the earlier goal told after the later one ("<b>. But first, <a>.")
    "before": ("Before you do that, ", "But first, ", "Ahead of that, ", "Prior to that, ", "First, though, "),
    # the last place told first ("<c last>. <a>. After that, <b>.")
    "last": (
        "Make {c} your final destination.",
        "You should finish the trip at {c}.",
        "The trip ends at {c}.",
        "{c} will be the last place you visit.",
    ),
}
#: The categories composed instructions are made of.
COMPOSED_CATEGORIES = ("avoid", "return", "multi")

#: Which template family each category draws from.
FAMILIES = {
    "single": "one",
    "alias": "one",
    "indirect": "one",
    "typo": "one",
    "multi": "multi",
    "avoid": "avoid",
    "correction": "correction",
    "return": "return",
}


@dataclass(frozen=True)
class Instruction:
    """One generated instruction and its gold task (the structure of a language suite's episode)."""

    id: str
    map: str
    split: str
    category: str
    template: str  # "<family>/<index>" (+ "+prefix/<i>" / "+suffix/<i>" for filler): what the split holds out
    text: str
    start: str | list[float]  # a named start of the map, or [x, y, yaw]
    start_room: str
    goals: tuple[str, ...]
    avoid: tuple[str, ...] = ()
    phrases: tuple[str, ...] = ()  # the aliases / vocabulary phrases it uses (what the split holds out)
    wrong: str = ""  # correction: the place the instruction takes back

    def task(self) -> Task:
        return Task(self.text, self.goals, self.avoid)

    def answer(self) -> dict[str, list[str]]:
        """The gold answer in the ``llm_goals`` schema (llm_planner/llm/answers.py)."""
        return {"targets": list(self.goals), "avoid": list(self.avoid)}

    def tagged_answer(self) -> dict[str, list[dict[str, str]]]:
        """The gold answer of ``reading=tagged`` (llm_planner/llm/answers.py): the places in the order the
        instruction mentions them, tagged. Derived from the template: when it mentions the targets out of
        order, the first target is ``first`` and the last one ``last``; every other target is ``then``; the
        room to avoid ``avoid``, the place a correction takes back ``not``; "and back" adds the start place,
        ``then``, at the end. ValueError when the tags do not give back the gold order (a template the rule
        cannot tag)."""
        order = self._slots()
        if "w" in order and not self.wrong:
            raise ValueError(
                f"instruction {self.id!r} ({self.category}) does not say which place its correction takes back "
                "(a dataset written before the tagged reading): regenerate it with python -m "
                "llm_planner.posttrain.instructions"
            )
        slots = [s for s in order if s in "abc"]
        places = {s: self.goals[i] for i, s in enumerate("abc"[: len(slots)])}
        # out of order: the first and the last target say so; every other mention keeps the sentence's order
        tags = {"a": "first", "abc"[len(slots) - 1]: "last"} if slots != sorted(slots) else {}
        mentions: list[dict[str, str]] = []
        for s in order:
            if s == "x":
                mentions.append({"place": self.avoid[0], "as": "avoid"})
            elif s == "w":
                mentions.append({"place": self.wrong, "as": "not"})
            else:
                mentions.append({"place": places[s], "as": tags.get(s, "then")})
        if self.category == "return":
            mentions.append({"place": self.goals[-1], "as": "then"})
        pairs = [(m["place"], m["as"]) for m in mentions]
        if tagged_goals(pairs) != self.answer():
            raise ValueError(f"template {self.template!r}: tags {pairs} do not give the gold answer {self.answer()}")
        return {"mentions": mentions}

    def _slots(self) -> list[str]:
        """The template's slots in the order the sentence has them."""
        family, index = self.template.split("+")[0].split("/")
        return list(dict.fromkeys(re.findall(r"{(\w)}", TEMPLATES[family][int(index)])))

    def row(self) -> dict[str, Any]:
        """A JSON-safe row (a dataset line): the fields, plus ``answer`` as the JSON the model should write."""
        row = asdict(self)
        row["goals"], row["avoid"], row["phrases"] = list(self.goals), list(self.avoid), list(self.phrases)
        row["answer"] = json.dumps(self.answer())
        return row

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Instruction:
        fields = {k: row[k] for k in cls.__dataclass_fields__ if k in row}
        for key in ("goals", "avoid", "phrases"):
            fields[key] = tuple(fields.get(key, ()))
        return cls(**fields)


@dataclass(frozen=True)
class SplitPlan:
    """What each split may use, for one seed and map: template ids, filler ids, and per place the aliases
    and vocabulary phrases (canonical place name -> phrases)."""

    templates: dict[str, tuple[str, ...]]
    fillers: dict[str, tuple[str, ...]]
    aliases: dict[str, dict[str, tuple[str, ...]]]
    descriptions: dict[str, dict[str, tuple[str, ...]]]

    def card(self) -> dict[str, Any]:
        return asdict(self)


#: How many templates of each family (and filler phrases of each kind) were dealt together, batch by batch. The
#: first batch is shuffled and cut as one; a template appended later is dealt with the others appended after the
#: last recorded batch, never with the earlier ones. So appending templates leaves every existing template in its
#: split: no adapter trained before the change finds a template of its training in the new val / test_gen. Before
#: appending to a family a second time, record the length it has now (the batch already dealt): ``"avoid": (22,
#: 30)``. The first batches are the 99-template generator that adapter versions 2 and 3 trained on.
DEALT: dict[str, tuple[int, ...]] = {
    "one": (24,),
    "multi": (20, 28, 36),
    "avoid": (22, 32, 36),
    "correction": (15,),
    "return": (18,),
    "prefix": (10,),
    "suffix": (10,),
}


def split_templates(seed: int) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]]]:
    """(template ids, filler ids) per split for ``seed``; the same for every map. Each family is dealt in the
    batches of :data:`DEALT`."""
    templates = {s: [] for s in SPLITS}
    fillers = {s: [] for s in SPLITS}
    for out, kind, families in ((templates, "templates", TEMPLATES), (fillers, "fillers", FILLERS)):
        for family, items in families.items():
            for split, ids in _deal(family, len(items), f"{seed}:{kind}:{family}").items():
                out[split] += ids
    return {s: tuple(v) for s, v in templates.items()}, {s: tuple(v) for s, v in fillers.items()}


def _deal(family: str, n: int, key: str) -> dict[str, list[str]]:
    """The ids ``family/0 .. family/n-1`` per split, each batch of :data:`DEALT` cut on its own (the first with
    ``key``, later ones with ``key:start``), the templates past the last batch as one more."""
    ends = list(DEALT.get(family, ()))
    if any(b <= a for a, b in itertools.pairwise([0, *ends])) or (ends and ends[-1] > n):
        raise ValueError(
            f"DEALT[{family!r}] = {DEALT[family]} must increase from 1 and end at most at the family's {n} templates"
        )
    ends += [n] if not ends or ends[-1] < n else []
    dealt = {s: [] for s in SPLITS}
    start = 0
    for end in ends:
        batch = [f"{family}/{i}" for i in range(start, end)]
        for split, ids in _cut(batch, key if start == 0 else f"{key}:{start}").items():
            dealt[split] += ids
        start = end
    return dealt


def _cut(items: list[str], key: str) -> dict[str, list[str]]:
    """Shuffle ``items`` (seeded by ``key``) and cut them by SPLIT_FRACTIONS, at least one per split."""
    items = list(items)
    random.Random(key).shuffle(items)
    n_val = max(1, round(len(items) * SPLIT_FRACTIONS[1]))
    n_test = max(1, round(len(items) * SPLIT_FRACTIONS[2]))
    if len(items) < n_val + n_test + 1:
        raise ValueError(f"{key}: {len(items)} items cannot be split into train, val and test_gen")
    return {"val": items[:n_val], "test_gen": items[n_val : n_val + n_test], "train": items[n_val + n_test :]}


def _hold_out(phrases: list[str], key: str) -> dict[str, list[str]]:
    """Three or more phrases: one for val, one for test_gen, the rest for train. Two: one for train, the
    other for val or test_gen (a seeded coin). One: train (a place must stay nameable in training)."""
    phrases = list(phrases)
    rng = random.Random(key)
    rng.shuffle(phrases)
    if len(phrases) >= 3:
        return {"val": phrases[:1], "test_gen": phrases[1:2], "train": phrases[2:]}
    held = {"val": [], "test_gen": [], "train": phrases[1:] if len(phrases) == 2 else phrases}
    if len(phrases) == 2:
        held[rng.choice(["val", "test_gen"])] = phrases[:1]
    return held


def spoken(name: str) -> str:
    """A place name as said aloud: ``living_room`` -> ``living room``."""
    return name.replace("_", " ")


class InstructionGenerator:
    """Generates :class:`Instruction` s for one map and seed; ``generate(split, n)`` is deterministic."""

    def __init__(self, world: World, vocabulary: Vocabulary | None = None, seed: int = 0) -> None:
        self.world = world
        self.vocabulary = vocabulary if vocabulary is not None else load_vocabulary(world)
        if self.vocabulary.map != world.name:
            raise ValueError(f"vocabulary of map {self.vocabulary.map!r} given for map {world.name!r}")
        if not world.rooms or not world.landmarks:
            raise ValueError(f"map {world.name!r} needs rooms and landmarks to generate instructions")
        self.seed = seed
        self.router = GraphPlanner()
        self.places = [p.name for p in (*world.landmarks, *world.rooms)]
        self.rooms = [r.name for r in world.rooms]
        self.starts: dict[str, tuple[Any, tuple[float, float]]] = {
            k: (k, (p.x, p.y)) for k, p in world.starts.items()
        } or {r.name: ([*r.center, 0.0], r.center) for r in world.rooms}
        templates, fillers = split_templates(seed)
        aliases = {s: {} for s in SPLITS}
        descriptions = {s: {} for s in SPLITS}
        for place in (*world.landmarks, *world.rooms):
            own = [a for a in place.aliases if a.lower() != spoken(place.name)]
            for split, held in _hold_out(own, f"{seed}:{world.name}:aliases:{place.name}").items():
                if held:
                    aliases[split][place.name] = tuple(held)
            phrases = list(self.vocabulary.descriptions.get(place.name, ()))
            for split, held in _hold_out(phrases, f"{seed}:{world.name}:descriptions:{place.name}").items():
                if held:
                    descriptions[split][place.name] = tuple(held)
        self.plan = SplitPlan(templates, fillers, aliases, descriptions)
        self._test_texts = test_texts()

    # -- public ----------------------------------------------------------------------------------------
    def generate(self, split: str, n: int) -> tuple[list[Instruction], Counter]:
        """``n`` distinct instructions of ``split``, categories in turn; and a Counter of what was dropped
        (``test_like``: equal to a test instruction; ``duplicate``; ``unusable``: no place fits) and of the
        categories exhausted (``exhausted:<category>``: how many it made before every new draw was a
        duplicate). Raises ValueError when every category is exhausted before ``n``."""
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; splits: {', '.join(SPLITS)}")
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        rng = random.Random(f"{self.seed}:{self.world.name}:{split}")
        categories = list(self.categories(split))
        out: list[Instruction] = []
        seen: set[str] = set()
        dropped: Counter = Counter()
        misses = Counter()  # draws in a row that gave nothing new, per category
        turn = 0
        while len(out) < n:
            if not categories:
                raise ValueError(
                    f"map {self.world.name!r}, split {split!r}: only {len(out)} distinct instructions of {n} "
                    f"(dropped: {dict(dropped)}); add vocabulary phrases or ask for fewer"
                )
            category = categories[turn % len(categories)]
            made = self._make(category, split, rng)
            key = normalise(made.text) if made is not None else ""
            reason = "unusable" if made is None else "test_like" if key in self._test_texts else ""
            reason = reason or ("duplicate" if key in seen else "")
            if reason:
                dropped[reason] += 1
                misses[category] += 1
                if misses[category] >= MAX_MISSES:  # every sentence of this category is made: the others go on
                    dropped[f"exhausted:{category}"] = len([i for i in out if i.category == category])
                    categories.remove(category)
                continue
            misses[category] = 0
            turn += 1
            seen.add(key)
            out.append(replace(made, id=f"{self.world.name}-{split}-{len(out):06d}"))
        return out, dropped

    def generate_composed(self, n: int) -> list[Instruction]:
        """``n`` distinct *composed* train instructions (:data:`COMPOSED`), categories avoid, return and multi
        in turn: goal sentences of the train split's "one" templates joined with the composed pieces, places
        named as train names them. Deterministic in the seed; ValueError when fewer than ``n`` can be made."""
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        rng = random.Random(f"{self.seed}:{self.world.name}:composed")
        out: list[Instruction] = []
        seen: set[str] = set()
        misses = 0
        while len(out) < n:
            made = self._compose(COMPOSED_CATEGORIES[len(out) % len(COMPOSED_CATEGORIES)], rng)
            key = normalise(made.text) if made is not None else ""
            if made is None or key in seen or key in self._test_texts:
                misses += 1
                if misses >= MAX_MISSES:
                    raise ValueError(
                        f"map {self.world.name!r}: only {len(out)} distinct composed instructions of {n}; ask for fewer"
                    )
                continue
            misses = 0
            seen.add(key)
            out.append(replace(made, id=f"{self.world.name}-composed-{len(out):06d}"))
        return out

    def categories(self, split: str) -> tuple[str, ...]:
        """The categories ``split`` can make on this map: alias and indirect need the split's own aliases and
        vocabulary phrases (a map with few aliases may hold none out for a split)."""
        missing = {"alias": not self.plan.aliases[split], "indirect": not self.plan.descriptions[split]}
        return tuple(c for c in CATEGORIES if not missing.get(c, False))

    # -- one instruction ----------------------------------------------------------------------------
    def _make(self, category: str, split: str, rng: random.Random) -> Instruction | None:
        start, start_xy, start_room, candidates = self._draw_start(rng)
        family = "multi" if category in ("filler", "typo") and rng.random() < 0.4 else FAMILIES.get(category, "one")
        if category == "typo" and family == "multi":
            family = "one"
        template_id = rng.choice([t for t in self.plan.templates[split] if t.startswith(family + "/")])
        template = TEMPLATES[family][int(template_id.split("/")[1])]
        slots = set(re.findall(r"{(\w)}", template))
        n_targets = len(slots & {"a", "b", "c"})
        if category == "alias":
            candidates = [p for p in candidates if p in self.plan.aliases[split]]
        elif category == "indirect":
            candidates = [p for p in candidates if p in self.plan.descriptions[split]]
        if len(candidates) < n_targets + (category == "correction"):
            return None
        targets = rng.sample(candidates, n_targets)
        phrases: list[str] = []
        forced = {"single": "name", "alias": "alias", "indirect": "description", "typo": rng.choice(["name", "alias"])}
        style = forced.get(category)
        refs = {slot: self._ref(t, split, rng, style, phrases) for slot, t in zip("abc", targets, strict=False)}
        goals = list(targets)
        avoid: list[str] = []
        wrong = ""
        if category == "avoid":
            room = self._avoid_room(targets[0], start_xy, start_room, rng)
            if room is None:
                return None
            avoid = [room]
            refs["x"] = self._ref(room, split, rng, None, phrases)
        elif category == "correction":
            wrong = rng.choice([p for p in candidates if p not in targets])
            refs["w"] = self._ref(wrong, split, rng, None, phrases)
        elif category == "return":
            goals.append(self._start_place(start_xy, start_room))
            if goals[-1] in targets:
                return None
        if category == "typo":
            refs["a"] = typo(refs["a"], rng, self._labels())
            if refs["a"] is None:
                return None
        text = template.format(**refs)
        text = text[0].upper() + text[1:]
        if category == "filler":
            text, filler_ids = self._fill(text, split, rng)
            template_id += "".join(f"+{f}" for f in filler_ids)
        return Instruction(
            id="",
            map=self.world.name,
            split=split,
            category=category,
            template=template_id,
            text=text,
            start=start,
            start_room=start_room,
            goals=tuple(goals),
            avoid=tuple(avoid),
            phrases=tuple(phrases),
            wrong=wrong,
        )

    def _draw_start(self, rng: random.Random) -> tuple[Any, tuple[float, float], str, list[str]]:
        """A start of the map (its pose, point and room) and the places an instruction from there may name."""
        start, start_xy = self.starts[rng.choice(sorted(self.starts))]
        start_room = room_name(self.world, start_xy)
        candidates = [p for p in self.places if p != start_room and not self._is_start_place(p, start_xy)]
        return start, start_xy, start_room, candidates

    def _compose(self, category: str, rng: random.Random) -> Instruction | None:
        """One composed train instruction of ``category`` (avoid, return or multi), or None when the drawn
        start leaves too few places."""
        start, start_xy, start_room, candidates = self._draw_start(rng)
        n_targets = {"avoid": 1, "return": rng.choice([1, 1, 2]), "multi": rng.choice([2, 2, 3])}[category]
        if len(candidates) < n_targets:
            return None
        targets = rng.sample(candidates, n_targets)
        phrases: list[str] = []
        ones = [t for t in self.plan.templates["train"] if t.startswith("one/")]
        used: list[str] = []

        def goal(place: str) -> str:  # a train "one" sentence naming ``place``
            used.append(rng.choice(ones))
            return TEMPLATES["one"][int(used[-1].split("/")[1])].format(a=self._ref(place, "train", rng, None, phrases))

        def piece(kind: str, **refs: str) -> str:
            i = rng.randrange(len(COMPOSED[kind]))
            used.append(f"{kind}:{i}")
            return COMPOSED[kind][i].format(**refs)

        goals, avoid = list(targets), []
        if category == "avoid":
            room = self._avoid_room(targets[0], start_xy, start_room, rng)
            if room is None:
                return None
            avoid = [room]
            parts = [goal(targets[0]), piece("avoid", x=self._ref(room, "train", rng, None, phrases))]
            if rng.random() < 0.5:
                parts.reverse()
        elif category == "return":
            parts = [goal(targets[0])] + [piece("then") + _lower(goal(t)) for t in targets[1:]] + [piece("return")]
            goals.append(self._start_place(start_xy, start_room))
            if goals[-1] in targets:
                return None
        elif len(targets) == 2 and rng.random() < 0.5:  # the later place first: "<b>. But first, <a>."
            parts = [goal(targets[1]), piece("before") + _lower(goal(targets[0]))]
        elif len(targets) == 3 and rng.random() < 0.5:  # the last place first
            parts = [piece("last", c=self._ref(targets[2], "train", rng, None, phrases)), goal(targets[0])]
            parts.append(piece("then") + _lower(goal(targets[1])))
        else:
            parts = [goal(targets[0])] + [piece("then") + _lower(goal(t)) for t in targets[1:]]
        text = " ".join(p[0].upper() + p[1:] for p in parts)
        return Instruction(
            id="",
            map=self.world.name,
            split="train",
            category=category,
            template="composed/" + ",".join(used),
            text=text,
            start=start,
            start_room=start_room,
            goals=tuple(goals),
            avoid=tuple(avoid),
            phrases=tuple(phrases),
        )

    def _ref(self, place: str, split: str, rng: random.Random, style: str | None, used: list[str]) -> str:
        """How the instruction names ``place``: its name, one of the split's aliases or vocabulary phrases
        (``style`` forces one; None: the name, an alias one time in four)."""
        aliases = self.plan.aliases[split].get(place, ())
        descriptions = self.plan.descriptions[split].get(place, ())
        if style is None:
            style = "alias" if aliases and rng.random() < 0.25 else "name"
        if style == "alias" and aliases:
            phrase = rng.choice(aliases)
            used.append(phrase)
            return "the " + phrase
        if style == "description" and descriptions:
            phrase = rng.choice(descriptions)
            used.append(phrase)
            return phrase
        return "the " + spoken(place)

    def _avoid_room(
        self, target: str, start_xy: tuple[float, float], start_room: str, rng: random.Random
    ) -> str | None:
        """A room to avoid that leaves the target reachable: a room on the shortest route when one can be
        avoided (the constraint changes the route), else any other room (the constraint tests the reading)."""
        goal_room = self._room_of(target)
        options = [r for r in self.rooms if r not in (start_room, goal_room)]
        target_xy = self._point(target)
        shortest = self._rooms_on(self.router.route(self.world, start_xy, target_xy), start_xy)
        feasible = []
        for room in options:
            try:
                self.router.route(self.world, start_xy, target_xy, avoid=(room,))
            except PlanError:
                continue
            feasible.append(room)
        on_route = [r for r in feasible if r in shortest]
        pool = on_route if on_route and rng.random() < 0.7 else feasible
        return rng.choice(pool) if pool else None

    def _rooms_on(self, points: list[tuple[float, float]], start: tuple[float, float]) -> set[str]:
        return {room_name(self.world, p) for p in [start, *points]}

    def _fill(self, text: str, split: str, rng: random.Random) -> tuple[str, list[str]]:
        ids = list(self.plan.fillers[split])
        prefixes = [i for i in ids if i.startswith("prefix/")]
        suffixes = [i for i in ids if i.startswith("suffix/")]
        which = rng.choice(["prefix", "suffix", "both"])
        used = []
        if which in ("prefix", "both"):
            used.append(rng.choice(prefixes))
            text = FILLERS["prefix"][int(used[-1].split("/")[1])] + text[0].lower() + text[1:]
        if which in ("suffix", "both"):
            used.append(rng.choice(suffixes))
            text = text + FILLERS["suffix"][int(used[-1].split("/")[1])]
        return text, used

    def _room_of(self, place: str) -> str:
        p = self.world.resolve(place)
        return p.room if isinstance(p, Landmark) else p.name

    def _point(self, place: str) -> tuple[float, float]:
        from llm_planner.planners.common import goal_point

        return goal_point(place, self.world)

    def _is_start_place(self, place: str, start_xy: tuple[float, float]) -> bool:
        p = self.world.resolve(place)
        return isinstance(p, Landmark) and _dist(p.position, start_xy) <= START_PLACE_RADIUS

    def _start_place(self, start_xy: tuple[float, float], start_room: str) -> str:
        """Where "come back" leads: the landmark the robot starts at (within START_PLACE_RADIUS), else its room."""
        for lm in self.world.landmarks:
            if _dist(lm.position, start_xy) <= START_PLACE_RADIUS:
                return lm.name
        return start_room

    def _labels(self) -> set[str]:
        return {lab.lower() for p in (*self.world.landmarks, *self.world.rooms) for lab in (p.name, *p.aliases)}


def _dist(a: tuple[float, float], b: tuple[float, float]) -> float:
    return ((a[0] - b[0]) ** 2 + (a[1] - b[1]) ** 2) ** 0.5


_ARTICLES = {"the", "a", "an", "my", "your", "our"}


def typo(ref: str, rng: random.Random, labels: set[str], max_errors: int = 2) -> str | None:
    """``ref`` with typing errors (swap, drop, double or replace a letter; two only in words of six letters or
    more) in its longest word; None when it has no word of four letters or more, or every try names a place
    outright or changes nothing (a swap of equal letters)."""
    words = ref.split()
    content = [i for i, w in enumerate(words) if w.lower() not in _ARTICLES and len(w) >= 4]
    if not content:
        return None
    i = max(content, key=lambda k: len(words[k]))
    for _ in range(10):
        word = list(words[i])
        for _ in range(rng.randint(1, max_errors if len(word) >= 6 else 1)):  # a short word with two errors is noise
            k = rng.randrange(1, len(word) - 1)  # keep the first letter: people rarely mistype it
            kind = rng.choice(["swap", "drop", "double", "replace"])
            if kind == "swap":
                word[k], word[k + 1] = word[k + 1], word[k]
            elif kind == "drop":
                del word[k]
            elif kind == "double":
                word.insert(k, word[k])
            else:
                word[k] = rng.choice("abcdefghijklmnopqrstuvwxyz".replace(word[k], ""))
        misspelt = "".join(word)
        if misspelt != words[i] and misspelt.lower() not in labels:
            return " ".join([*words[:i], misspelt, *words[i + 1 :]])
    return None


_WORD = re.compile(r"[a-z0-9']+")
#: Words that do not change what an instruction asks: dropped before comparing instructions.
FILLER_WORDS = {"the", "a", "an", "please", "now", "to", "hey", "robot", "um", "okay", "so"}


def normalise(text: str) -> str:
    """Lower case, words only, filler words dropped: two instructions that differ only in those are the same."""
    return " ".join(w for w in _WORD.findall(text.lower()) if w not in FILLER_WORDS)


def test_texts() -> set[str]:
    """The normalised instructions of the test suites (:data:`TEST_SUITES`)."""
    from hrl.tasks import load_suite

    return {normalise(ep.text) for name in TEST_SUITES for ep in load_suite(name).episodes}


# -- datasets --------------------------------------------------------------------------------------


@dataclass
class Dataset:
    """Instructions per split for several maps, and how they were made (the dataset card)."""

    splits: dict[str, list[Instruction]]
    card: dict[str, Any] = field(default_factory=dict)

    def write(self, out: str | Path) -> Path:
        """``<out>/<split>.jsonl`` per split, ``card.json`` and a human ``README.md``; returns ``out``."""
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        for split, items in self.splits.items():
            with open(out / f"{split}.jsonl", "w", encoding="utf-8") as f:
                for item in items:
                    f.write(json.dumps(item.row()) + "\n")
        (out / "card.json").write_text(json.dumps(self.card, indent=2) + "\n")
        (out / "README.md").write_text(card_markdown(self.card))
        return out


def read_jsonl(path: str | Path) -> list[Instruction]:
    """The instructions of one ``<split>.jsonl`` written by :meth:`Dataset.write`."""
    with open(path, encoding="utf-8") as f:
        return [Instruction.from_row(json.loads(line)) for line in f if line.strip()]


def generate(
    maps: list[str] | None = None, n: int = 2000, n_val: int | None = None, n_test_gen: int | None = None, seed: int = 0
) -> Dataset:
    """A dataset over ``maps`` (default: every shipped map with a vocabulary): ``n`` train instructions,
    ``n_val`` and ``n_test_gen`` (default ``max(50, n // 10)``) for the held-out splits, shared equally
    between the maps; deterministic in ``seed``."""
    maps = maps or maps_with_vocabulary()
    sizes = {"train": n, "val": max(50, n // 10) if n_val is None else n_val}
    sizes["test_gen"] = sizes["val"] if n_test_gen is None else n_test_gen
    splits: dict[str, list[Instruction]] = {s: [] for s in SPLITS}
    card: dict[str, Any] = {"seed": seed, "maps": maps, "sizes": sizes, "split_fractions": SPLIT_FRACTIONS,
                            "test_suites": list(TEST_SUITES), "dropped": {}, "held_out": {}}  # fmt: skip
    for m, name in enumerate(maps):
        world = load_world(name)
        gen = InstructionGenerator(world, seed=seed)
        card["held_out"][world.name] = gen.plan.card()
        for split in SPLITS:
            share = sizes[split] // len(maps) + (m < sizes[split] % len(maps))
            items, dropped = gen.generate(split, share)
            splits[split] += items
            card["dropped"][f"{world.name}/{split}"] = dict(dropped)
    card["counts"] = {s: dict(Counter(i.category for i in items)) for s, items in splits.items()}
    card["templates"] = {s: sorted({i.template for i in items}) for s, items in splits.items()}
    return Dataset(splits, card)


def generate_composed(maps: list[str] | None = None, n: int = 600, seed: int = 0) -> list[Instruction]:
    """``n`` composed train instructions (:data:`COMPOSED`) over ``maps`` (default: every map with a
    vocabulary), shared equally; deterministic in ``seed``. They use only the seed's train templates and words."""
    maps = maps or maps_with_vocabulary()
    out: list[Instruction] = []
    for m, name in enumerate(maps):
        share = n // len(maps) + (m < n % len(maps))
        out += InstructionGenerator(load_world(name), seed=seed).generate_composed(share)
    return out


def _lower(sentence: str) -> str:
    """``sentence`` to follow a connective: its first letter lower-cased, unless it is "I" or "I'd"."""
    first = sentence.split(" ", 1)[0]
    return sentence if first in ("I", "I'd", "I'm") else sentence[0].lower() + sentence[1:]


def card_markdown(card: dict[str, Any]) -> str:
    lines = [
        "# Generated instructions (llm_planner/posttrain/instructions.py)",
        "",
        f"Seed {card['seed']}, maps {', '.join(card['maps'])}. Command: `{card.get('command', '')}`",
        "",
        "Test set (never generated, no template is one of them with names swapped): " + ", ".join(card["test_suites"]),
        "",
        "| category | " + " | ".join(SPLITS) + " |",
        "|---|" + "---|" * len(SPLITS),
    ]
    for c in CATEGORIES:
        lines.append(f"| {c} | " + " | ".join(str(card["counts"].get(s, {}).get(c, 0)) for s in SPLITS) + " |")
    totals = [str(sum(card["counts"].get(s, {}).values())) for s in SPLITS]
    lines.append("| **total** | " + " | ".join(totals) + " |")
    lines += [
        "",
        "Held out (per seed): templates and filler phrases of val / test_gen, and per map the aliases and",
        "vocabulary phrases only val / test_gen use (train never sees them); all of it is in card.json.",
        "",
    ]
    first = next(iter(card["held_out"].values()), None)
    if first:
        for split in ("val", "test_gen"):
            lines.append(f"- {split} templates: " + ", ".join(f"`{t}`" for t in first["templates"][split]))
    for m, plan in card["held_out"].items():
        for split in ("val", "test_gen"):
            words = sorted(
                {w for d in (plan["aliases"][split], plan["descriptions"][split]) for v in d.values() for w in v}
            )
            lines.append(f"- {m} {split} phrases: " + "; ".join(words))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="Write a dataset of generated instructions (train/val/test_gen JSONL)."
    )
    parser.add_argument("--map", action="append", dest="maps", help="a map with a vocabulary (repeatable; default all)")
    parser.add_argument("--n", type=int, default=2000, help="train instructions (all maps together)")
    parser.add_argument("--n-val", type=int, default=None, help="val instructions (default max(50, n/10))")
    parser.add_argument("--n-test-gen", type=int, default=None, help="test_gen instructions (default: as val)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error(f"--n must be >= 1, got {args.n}")
    try:
        dataset = generate(args.maps, args.n, args.n_val, args.n_test_gen, args.seed)
    except ValueError as err:
        parser.error(str(err))
    argv_used = sys.argv[1:] if argv is None else argv
    dataset.card["command"] = "python -m llm_planner.posttrain.instructions " + shlex.join(argv_used)
    out = dataset.write(args.out)
    counts = {s: len(v) for s, v in dataset.splits.items()}
    print(f"wrote {out}: {counts}")


if __name__ == "__main__":
    main()
