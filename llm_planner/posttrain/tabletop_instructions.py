"""Generated tabletop instructions with their gold goals: the tabletop sibling of :mod:`.instructions`.

``generate_tabletop(scene, n, split="train", seed=0)`` gives ``n`` distinct :class:`~llm_planner.tabletop.TabletopTask`
s (``text``, ``goals`` in the order they are to be achieved, ``category``) for a scene of ``sim/scenes/`` that has a
vocabulary (``sim/scenes/vocab/<scene>.yaml``: the words for its colours, sizes, objects and places), or for any scene
a user adds with one. The gold follows the rules of the tabletop suites (hierarchy/suites.py): every object is an
object of the scene, every target an object or a place, an object is moved once and never onto itself; and what
the physics needs besides: a block carries at most one block, a block that something was put on is not moved
afterwards, a place holds no more blocks than fit (:func:`goal_problem`).

Categories (:data:`CATEGORIES`), those of the tabletop language suites plus the task suites':

========== ==================================================================================================
single     one placement, plainly ("Pick up the red block and set it down on the blue block.")
multi      two or three, in order ("..., then ...", "First ..., and then ...", "X first, Y last")
stack      a tower of two or three, bottom first
relational "on top of", "beneath", "the block you just moved"; places by their fixed positions ("the bin
           between the red bin and the green bin", "the bin closest to the robot")
attribute  blocks by size ("the big block", "the small red cube")
indirect   colours by what has them ("the block the colour of egg yolk")
negation   "every block except the red one", "the block that is neither red nor blue", "leave X alone"
sort       every block (or the blocks of some colours) into the place of its colour
clear      every block into one place (or, where they do not all fit, a group of them)
filler     a single, multi or stack instruction wrapped in politeness ("Hey robot, ... Thanks!")
typo       a single instruction with a typing error in a word that names a block or a place
========== ==================================================================================================

A category a scene cannot express is skipped (``blocks`` has no places: no sort or clear).

**Splits by template and by vocabulary** (train / val). Per *split seed* (``split_seed``, default 0, apart from the
``seed`` that draws the instructions), each template family (the sentence frames, the
clause verbs, the connectors, the forms of indirect, negated and relational references, the fillers) is shuffled
and cut 70 / 30 %; and every synonym (colour words beyond the plain one, size words, object and place nouns, the
``like`` phrases of indirect colours) is held out for val by a seeded hash of the word itself, so a word has the
same split in every scene. The plain words (red, big, block, bin) are in both: they are what a model must always
read. A val instruction uses only val templates and plain or val words: it reads phrasings and words training
never saw -- as long as training and val share the split seed. Until 2026-12-06 the split followed ``seed``, so
train sets drawn with several seeds (the VLA's demonstrations: seeds 0, 2, 3 and 4) held every template and word
of a val drawn with another seed; the split seed is now fixed unless given.

**The test set**: the instructions of ``tabletop_language``, ``tabletop_language_sort`` and
``tabletop_language_clear`` are never generated (an instruction whose normalised text equals one is dropped, and
tests/llm_planner/test_tabletop_instructions.py checks that no generated text of either split has the skeleton of
a test instruction), and no vocabulary phrase is one of theirs.

Dataset on disk (``train.jsonl``, ``val.jsonl``, ``card.json``)::

    python -m llm_planner.posttrain.tabletop_instructions --scene blocks --scene sort --n 1000 --seed 0 --out DIR
"""

from __future__ import annotations

import argparse
import difflib
import functools
import hashlib
import itertools
import json
import math
import random
import re
import shlex
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from llm_planner.posttrain.instructions import normalise, typo
from llm_planner.tabletop import Relation, TabletopTask
from robots._fields import Fields, did_you_mean, load_yaml_mapping
from sim.tabletop.scene import BIN_WALL_THICKNESS, PALETTE, SCENES_DIR, TabletopScene, load_scene

CATEGORIES = (
    "single", "multi", "stack", "relational", "attribute", "indirect", "negation", "sort", "clear", "filler", "typo",
)  # fmt: skip
SPLITS = ("train", "val")
#: Share of each template family, and of the synonyms, held out for val.
VAL_FRACTION = 0.3
#: The suites whose instructions are the test set: never generated, never a template.
TEST_SUITES = ("tabletop_language", "tabletop_language_sort", "tabletop_language_clear")
#: A generated instruction this similar to a test instruction (difflib ratio of the normalised texts) is dropped:
#: "Set the yellow block on top of the red block." is the test's "Put ..." with another verb.
TEST_SIMILARITY = 0.9
#: Draws in a row that give nothing new before a category counts as exhausted for a split.
MAX_MISSES = 300
#: A place holds as many blocks as cells of this edge (m) fit inside it (inside the walls, for a bin).
CELL = 0.05
#: Where the vocabulary of ``DIR/<scene>.yaml`` lives: ``DIR/vocab/<scene>.yaml`` (every ``*.yaml`` in
#: sim/scenes/ is a scene, so not beside it).
VOCAB_DIR_NAME = "vocab"
VOCAB_KEYS = ("scene", "description", "objects", "sizes", "colors", "places")
SIZE_CLASSES = ("big", "small")
#: "in" / "into" for a target of each kind (an object is a target too).
PREPOSITIONS = {"object": ("on", "onto"), "bin": ("in", "into"), "plate": ("on", "onto"), "zone": ("in", "into")}

# -- templates ------------------------------------------------------------------------------------------------
# Slots: {x} the block(s) moved, {y} the target, {it} "it"/"them", {on}/{into} the preposition of the target;
# {c}, {c1}.. clauses; {n1}.. goals as noun phrases ("the red block on the blue block"); {b}, {m}, {t} a tower's
# blocks bottom up; {noun}/{nouns} the word for block(s), {pnoun}/{pnouns} for the places; {p} a place; {g} a group
# of blocks; {e} the blocks left out. None is a test instruction with other words (a test checks the skeletons).
TEMPLATES: dict[str, tuple[str, ...]] = {
    "clause": (
        "pick up {x} and set {it} down {on} {y}",
        "grab {x} and leave {it} {on} {y}",
        "take {x} and lay {it} {on} {y}",
        "transfer {x} {into} {y}",
        "carry {x} over {into} {y}",
        "get {x} {into} {y}",
        "position {x} {on} {y}",
        "relocate {x} {into} {y}",
        "lift {x} {into} {y}",
        "pop {x} {into} {y}",
        "rest {x} {on} {y}",
        "shift {x} {into} {y}",
        "pick {x} up and drop {it} {into} {y}",
        "have {x} end up {on} {y}",
        "lower {x} {into} {y}",
        "deposit {x} {on} {y}",
        "place {x} carefully {on} {y}",
        "bring {x} across {into} {y}",
        "load {x} {into} {y}",
        "park {x} {on} {y}",
        "stash {x} {into} {y}",
        "hoist {x} {into} {y}",
        "tuck {x} {into} {y}",
        "get {x} and stand {it} {on} {y}",
        "lift {x} and lower {it} {into} {y}",
        "take {x} and put {it} {on} {y}",
    ),
    "frame": (
        "{c}.",
        "Could you {c}?",
        "I'd like you to {c}.",
        "Your job: {c}.",
        "Can you {c}?",
        "Go ahead and {c}.",
        "Time to {c}.",
        "I need you to {c}.",
        "{c}, if you can.",
        "Would you {c}?",
        "Next task: {c}.",
        "Please {c}.",
        "Kindly {c}.",
        "Let's {c}.",
        "Try to {c}.",
        "Could you please {c}?",
        "Do me a favour and {c}.",
        "Here's what I need: {c}.",
        "Task: {c}.",
        "I'd appreciate it if you could {c}.",
    ),
    "statement": (
        "{x} should end up {on} {y}.",
        "I want {x} sitting {on} {y}.",
        "The goal: {x} {on} {y}.",
        "{x} ought to be {on} {y} when you are done.",
        "When you finish, {x} should be {on} {y}.",
        "I'd like to see {x} {on} {y}.",
        "Let's have {x} {on} {y}.",
        "What I want: {x} {on} {y}.",
        "{x} must end up {on} {y}.",
        "I'd like {x} to finish {on} {y}.",
        "The plan: {x} {on} {y}.",
        "By the end, {x} should sit {on} {y}.",
        "End state: {x} {on} {y}.",
        "{x} belongs {on} {y} now.",
    ),
    "then2": (
        "{c1}, then {c2}.",
        "First {c1}, and then {c2}.",
        "{c1}; after that, {c2}.",
        "{c1}, and once that's done, {c2}.",
        "{c1}. Next, {c2}.",
        "{c1} and afterwards {c2}.",
        "Step one: {c1}. Step two: {c2}.",
        "Before anything else, {c1}; then {c2}.",
        "{c1}. When that is done, {c2}.",
        "{c1}. Once finished, {c2}.",
        "Once you {c1}, {c2}.",
        "After you {c1}, {c2}.",
        "{c2}, but only after you {c1}.",
        "Before you {c2}, {c1}.",
        "First, {c1}. Second, {c2}.",
        "{c1} and then {c2}.",
        "{c1}, and {c2} after that.",
    ),
    "then3": (
        "{c1}, then {c2}, and finally {c3}.",
        "First {c1}, next {c2}, and last {c3}.",
        "{c1}; after that, {c2}; then {c3}.",
        "Step one: {c1}. Step two: {c2}. Step three: {c3}.",
        "{c1}. Next, {c2}. Finally, {c3}.",
        "Start off: {c1}, then {c2}, and to finish, {c3}.",
        "First {c1}, second {c2}, third {c3}.",
        "{c1}. After that, {c2}. Last of all, {c3}.",
        "{c1}, {c2}, and then {c3}.",
        "Once you {c1}, {c2}, and after that {c3}.",
    ),
    "order": (
        "{n1} first, {n2} last.",
        "{n1} first, {n3} last, {n2} in between.",
        "In this order: {n1}, {n2}.",
        "In this order: {n1}, {n2}, {n3}.",
        "{n1} comes first and {n2} second.",
        "Two moves: {n1}, then {n2}.",
        "Three moves, in order: {n1}, {n2}, {n3}.",
        "{n1} first, {n2} next, {n3} last.",
        "{n2}, but only after {n1}.",
        "Order matters: {n1} before {n2}.",
        "{n2} comes after {n1}.",
        "Start with {n1} and finish with {n2}.",
        "Start with {n1}, end with {n3}, and do {n2} in between.",
        "Begin with {n1}, then {n2}, then {n3}.",
    ),
    "stack2": (
        "Build a two-block tower with {b} at the bottom and {t} on top.",
        "Make a tower of two: {b} below, {t} above.",
        "I want a small tower: {t} resting on {b}.",
        "Pile {t} onto {b} to make a tower.",
        "Form a stack of two, {b} underneath and {t} up top.",
        "Create a tower where {t} sits on {b}.",
        "A tower of two, please: {b} at the base, {t} on it.",
        "Two-storey tower: {b} down low, {t} up high.",
        "Rest {t} on {b} so the two form a tower.",
    ),
    "stack3": (
        "Build a tower with {b} at the bottom, {m} in the middle and {t} on top.",
        "Make a three-block tower, from the bottom up: {b}, {m}, {t}.",
        "Stack up a tower: {b} first, then {m} on it, then {t} on top.",
        "Pile {m} onto {b} and then {t} onto {m}.",
        "I want a tower of three with {t} at the top, {m} below it and {b} at the base.",
        "Form a stack: {b} as the base, {m} next, {t} last.",
        "Three {nouns}, one tower: {t} over {m} over {b}.",
        "Build it up from {b}: {m} on that, and {t} to finish.",
        "Tower time: {b} at the bottom, {t} at the very top, {m} sandwiched between.",
        "Three high: {t} on top, {b} at the bottom, {m} in between.",
    ),
    "sort": (
        "Every {noun} goes into the {pnoun} of the same colour.",
        "Match each {noun} to the {pnoun} of its colour.",
        "Tidy up by colour: each {noun} into the {pnoun} that matches it.",
        "Group the {nouns} by colour, each in the {pnoun} with the same colour.",
        "Drop every {noun} into the {pnoun} whose colour it shares.",
        "Colour-sort the {nouns} into the {pnouns}.",
        "Put each {noun} where its colour belongs: the matching {pnoun}.",
        "Sort by colour: every {noun} in its matching {pnoun}.",
        "Arrange the {nouns} so each sits in the {pnoun} of its own colour.",
        "Separate the {nouns} into the {pnouns} by colour.",
        "Each {noun} belongs in the {pnoun} of its colour.",
        "Colour-match the {nouns} to the {pnouns}.",
        "Return each {noun} to the {pnoun} that shares its colour.",
    ),
    "sort_some": (
        "Sort {g} into the {pnouns} of their colours.",
        "Only {g}: each into the {pnoun} matching its colour.",
        "Take {g} and drop each in the {pnoun} of its colour.",
        "{g} go into the {pnouns} that match their colours.",
        "Just {g} this time, each into the {pnoun} of the same colour.",
        "Deal with {g} only: each into the {pnoun} of its colour.",
        "{g} each belong in the {pnoun} of their colour.",
    ),
    "clear": (
        "Everything on the table goes {into} {p}.",
        "Tidy the table: every {noun} {into} {p}.",
        "Empty the table {into} {p}.",
        "Gather up all the {nouns} and drop them {into} {p}.",
        "Collect every {noun} {into} {p}.",
        "Get all the {nouns} off the table and {into} {p}.",
        "Leave no {noun} on the table: they all go {into} {p}.",
        "Move the whole lot {into} {p}.",
        "Pack every {noun} away {into} {p}.",
        "Round up the {nouns} and leave them {in} {p}.",
        "Clear the table {into} {p}.",
        "Sweep every {noun} {into} {p}.",
        "All of the {nouns} belong {in} {p}.",
    ),
    "clear_group": (
        "Gather {g} {into} {p}.",
        "Collect {g} together {in} {p}.",
        "Clear {g} off the table {into} {p}.",
        "{g} should end up together {in} {p}.",
        "Bring {g} over {into} {p}.",
        "Round up {g} {into} {p}.",
        "{g} all belong {in} {p}.",
    ),
    "ontop": (
        "Set {x} on top of {y}.",
        "{x} should end up on top of {y}.",
        "Pick up {x} and stand {it} on top of {y}.",
        "Balance {x} on top of {y}.",
        "I want {x} on top of {y}.",
        "Lift {x} up on top of {y}.",
        "Could you get {x} on top of {y}?",
        "Perch {x} on top of {y}.",
        "Crown {y} with {x}.",
        "Top {y} off with {x}.",
        "{y} gets {x} on top of it.",
    ),
    "beneath": (
        "Leave {y} in place and make it the {noun} beneath {x}.",
        "Without moving {y}, arrange things so that {y} is beneath {x}.",
        "I want {y} underneath {x}; {y} itself must not move.",
        "Keep {y} where it is and bring {x} over so that {y} is right beneath it.",
        "{y} stays put, and {x} should end up with {y} underneath it.",
        "Don't move {y}; just get {x} sitting above it.",
        "{y} is staying where it is: give it {x} on top.",
    ),
    "justmoved": (
        "the {noun} you just moved",
        "the one you just placed",
        "the {noun} you moved a moment ago",
        "the {noun} you just put down",
        "the {noun} you handled last",
        "the {noun} you just set down",
        "the {noun} you last moved",
        "the {noun} you moved just now",
    ),
    "placerel": (
        "the {pnoun} between {p1} and {p2}",
        "the {pnoun} in the middle",
        "the {pnoun} next to {p1}",
        "the {pnoun} closest to the robot",
        "the {pnoun} farthest from the robot",
        "the {pnoun} beside {p1}",
        "the {pnoun} nearest the robot's base",
        "the spot closest to {p1}",
        "the {pnoun} nearest to {p1}",
        "the {pnoun} furthest from the robot",
        "the {pnoun} sitting between {p1} and {p2}",
        "the {pnoun} right by {p1}",
        "the {pnoun} nearest to you",
    ),
    "indref": (
        "the {noun} the colour of {like}",
        "the {noun} coloured like {like}",
        "the {noun} with the colour of {like}",
        "the {noun} that has the colour of {like}",
        "the {noun} matching the colour of {like}",
        "the {noun} whose colour is that of {like}",
        "the {noun} that is the colour of {like}",
        "the {noun} in the shade of {like}",
        "the {noun} painted the colour of {like}",
        "the {noun} sharing a colour with {like}",
        "the {noun} of the same colour as {like}",
        "the {noun} tinted like {like}",
    ),
    "negref": (
        "the {noun} that is not {c1}",
        "the only {noun} that isn't {c1}",
        "the {noun} that is neither {c1} nor {c2}",
        "the {noun} that isn't {c1} or {c2}",
        "the {noun} other than the {c1} and {c2} ones",
        "the {size} {noun} that is not {c1}",
        "the {size} {noun} that is neither {c1} nor {c2}",
        "the {color} {noun} that is not the {size} one",
        "the {color} {noun} that isn't the {size} one",
        "the {size} {noun} that isn't {c1} or {c2}",
        "the {noun} that's not {c1}",
        "the non-{c1} {noun}",
        "whichever {noun} isn't {c1}",
        "the {noun} which is neither {c1} nor {c2}",
        "the {size} {noun} which isn't {c1}",
    ),
    "negall": (
        "Move every {noun} except {e} {into} {p}.",
        "All the {nouns} but {e} go {into} {p}.",
        "Apart from {e}, every {noun} goes {into} {p}.",
        "Transfer the {nouns} {into} {p}, leaving out {e}.",
        "Everything except {e} should end up {in} {p}.",
        "Leave {e} on the table and gather the other {nouns} {into} {p}.",
        "With the exception of {e}, get every {noun} {into} {p}.",
        "Everything but {e} goes {into} {p}.",
        "Fill {p} with every {noun} except {e}.",
        "Keep {e} out of it; the rest go {into} {p}.",
    ),
    "negsort": (
        "Leave {e} out and sort the rest into the {pnouns} by colour.",
        "Except for {e}, every {noun} goes into the {pnoun} of its colour.",
        "Colour-sort all the {nouns} but {e}.",
        "Match every {noun} other than {e} to the {pnoun} of the same colour.",
        "Skip {e}; the other {nouns} go into the {pnouns} of their colours.",
        "Sort everything but {e} into the {pnouns} by colour.",
        "Apart from {e}, each {noun} goes into the {pnoun} of its colour.",
    ),
    "leave": (
        "Don't touch {e}; just {c}.",
        "Without touching {e}, {c}.",
        "{c}, and keep your hands off {e}.",
        "Ignore {e} and {c}.",
        "{c}, but leave {e} exactly where it is.",
        "{c}; {e} stays where it is.",
        "Leave {e} alone and {c}.",
        "{c} without disturbing {e}.",
    ),
    "group": (
        "both {c} {nouns}",
        "the two {c} {nouns}",
        "all the {c} {nouns}",
        "the {c} {nouns}",
        "each of the {c} {nouns}",
    ),
    "prefix": (
        "Hey robot, ",
        "Okay, ",
        "If it's not too much trouble, ",
        "Whenever you're ready, ",
        "Alright arm, ",
        "Hi! ",
        "Right, ",
        "One more thing: ",
        "So, ",
        "Listen up, ",
        "Please, ",
        "Excuse me, ",
        "Quick one: ",
        "Robot, ",
    ),
    "suffix": (
        " Thanks!",
        " Thank you.",
        " No hurry.",
        " Cheers.",
        " That would help a lot.",
        " Much obliged.",
        " Carefully, please.",
        " Thanks a bunch.",
        " Appreciate it.",
        " Go slowly.",
        " Please.",
        " When you can.",
        " Take your time.",
        " Ta.",
    ),
}


# -- vocabulary -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SceneVocabulary:
    """The words of one scene: nouns for its blocks, size words, per colour its words and the things that have it
    (``like``: "egg yolk" -> yellow), per place its nouns. In every list but ``like`` the first is the plain word."""

    scene: str
    source: str
    objects: tuple[str, ...]
    sizes: dict[str, tuple[str, ...]]
    colors: dict[str, tuple[str, ...]]
    like: dict[str, tuple[str, ...]]
    places: dict[str, tuple[str, ...]]


def tabletop_vocabulary_path(scene: TabletopScene) -> Path:
    """``vocab/<scene file stem>.yaml`` beside the scene's file."""
    source = Path(scene.source)
    return source.parent / VOCAB_DIR_NAME / f"{source.stem}.yaml"


def scenes_with_vocabulary() -> list[str]:
    """The shipped scenes (sim/scenes/) that have a vocabulary file."""
    return sorted(p.stem for p in (SCENES_DIR / VOCAB_DIR_NAME).glob("*.yaml") if (SCENES_DIR / p.name).is_file())


def load_tabletop_vocabulary(scene: TabletopScene | str, path: str | Path | None = None) -> SceneVocabulary:
    """The vocabulary of ``scene`` (a scene, a shipped scene's name or a scene path), from ``path`` or from
    :func:`tabletop_vocabulary_path`, checked against the scene.

    Raises:
        ValueError: the scene has no vocabulary file (says where it was looked for).
        ConfigFileError: (a ValueError) ``<file>: <field>: <problem>`` for anything malformed.
    """
    if not isinstance(scene, TabletopScene):
        scene = load_scene(scene)
    path = Path(path) if path is not None else tabletop_vocabulary_path(scene)
    if not path.is_file():
        raise ValueError(
            f"scene {scene.name!r} has no vocabulary: {str(path)!r} does not exist; write one (see "
            "sim/scenes/vocab/sort.yaml) or generate for the scenes that have one: "
            + ", ".join(scenes_with_vocabulary())
        )
    return tabletop_vocabulary_from_dict(load_yaml_mapping(path), scene, source=str(path))


def tabletop_vocabulary_from_dict(data: object, scene: TabletopScene, source: str = "<vocabulary>") -> SceneVocabulary:
    """A vocabulary from a mapping (a YAML document), checked against ``scene``
    (see :func:`load_tabletop_vocabulary`)."""
    root = Fields(source, "", data)
    root.reject_unknown(VOCAB_KEYS)
    name = root.text("scene")
    if name != scene.name:
        raise root.error("scene", f"this vocabulary is for scene {name!r}, but it was loaded for scene {scene.name!r}")
    root.string("description")
    owner: dict[str, str] = {}  # word (lower case) -> the field that claimed it: a word means one thing

    def claim(f: Fields, key: str, words: tuple[str, ...]) -> tuple[str, ...]:
        if not words:
            raise f.error(key, "needs at least one word (the plain word first)")
        for i, word in enumerate(words):
            text = " ".join(word.lower().split())
            if text in owner:
                raise f.error(f"{key}[{i}]", f"{word!r} is already {owner[text]}: a word means one thing")
            owner[text] = f"a word of {f.child_path(key)}"
        return tuple(" ".join(w.split()) for w in words)

    objects = claim(root, "objects", root.string_list("objects"))
    sizes: dict[str, tuple[str, ...]] = {}
    if root.has("sizes"):
        f = root.sub("sizes")
        f.reject_unknown(SIZE_CLASSES)
        sizes = {k: claim(f, k, f.string_list(k)) for k in SIZE_CLASSES if f.has(k)}
    colors_f = _colors_fields(root)
    for key in colors_f.data:
        if str(key) not in PALETTE:
            raise colors_f.error(
                str(key), f"unknown colour{did_you_mean(str(key), list(PALETTE))}; colours: {', '.join(PALETTE)}"
            )
    for o in scene.objects:
        if not o.color:
            raise root.error("colors", f"object {o.name!r} of scene {scene.name!r} has a custom rgba colour; "
                             "instructions name blocks by colour: give it a palette colour in the scene")  # fmt: skip
        if o.color not in colors_f.data:
            raise colors_f.error(None, f"missing colour {o.color!r} (the colour of {o.name!r}); every colour of a "
                                 "block needs its words")  # fmt: skip
    colors: dict[str, tuple[str, ...]] = {}
    like: dict[str, tuple[str, ...]] = {}
    for key in colors_f.data:
        c = Fields(colors_f.source, colors_f.child_path(str(key)), colors_f.data[key])
        c.reject_unknown(("words", "like"))
        colors[str(key)] = claim(c, "words", c.string_list("words") if c.has("words") else (str(key),))
        like[str(key)] = claim(c, "like", c.string_list("like")) if c.has("like") else ()
    color_words = {w.lower(): c for c, ws in colors.items() for w in ws} | {c: c for c in PALETTE}
    for c, phrases in like.items():
        for i, phrase in enumerate(phrases):
            named = [w for w in re.findall(r"[a-z][a-z'-]*", phrase.lower()) if w in color_words]
            if named:
                raise colors_f.error(f"{c}.like[{i}]", f"{phrase!r} contains the colour word {named[0]!r}; a like "
                                     "phrase names a thing of that colour, not the colour")  # fmt: skip
    places_f = root.sub("places", {})
    known = [p.name for p in scene.places]
    for key in places_f.data:
        if str(key) not in known:
            raise places_f.error(str(key), f"unknown place {str(key)!r} in scene {scene.name!r}"
                                 f"{did_you_mean(str(key), known)}; places: {', '.join(known) or 'none'}")  # fmt: skip
    missing = [p for p in known if p not in places_f.data]
    if missing:
        raise root.error("places", f"missing place {missing[0]!r} of scene {scene.name!r}: give its nouns")
    places: dict[str, tuple[str, ...]] = {}
    for p in known:
        nouns = places_f.string_list(p)
        if not nouns:
            raise places_f.error(p, "needs at least one noun (the plain word first)")
        for i, noun in enumerate(nouns):
            words = re.findall(r"[a-z][a-z'-]*", noun.lower())
            bad = [w for w in words if w in color_words] + [w for w in words if w in {o.lower() for o in objects}]
            if bad:
                raise places_f.error(f"{p}[{i}]", f"{noun!r} contains {bad[0]!r}, a colour or block word; a place's "
                                     "nouns name the kind of place (the generator adds its colour)")  # fmt: skip
        places[p] = tuple(" ".join(n.split()) for n in nouns)  # a noun may be shared by places: "bin" for every bin
    return SceneVocabulary(scene.name, source, objects, sizes, colors, like, places)


def _colors_fields(root: Fields) -> Fields:
    """The ``colors`` mapping: in the file itself, or (a string) in a file beside it that scenes share
    (``colors: colors.yaml``, whose top level is that mapping); errors then name the shared file."""
    value = root.raw("colors")
    if not isinstance(value, str):
        return root.sub("colors")
    path = Path(root.source).parent / value
    if not path.is_file():
        raise root.error("colors", f"{value!r} is not a file beside this one ({str(path)!r} does not exist); give the "
                         "colours here as a mapping or name a colours file in the same folder")  # fmt: skip
    return Fields(str(path), "", load_yaml_mapping(path))


# -- gold rules -----------------------------------------------------------------------------------------------
def capacity(scene: TabletopScene, place: str) -> int:
    """How many blocks a place holds: cells of :data:`CELL` inside it (inside the walls, for a bin)."""
    p = scene.place(place)
    inset = 2 * BIN_WALL_THICKNESS if p.kind == "bin" else 0.0
    return int((p.size[0] - inset) / CELL + 1e-9) * int((p.size[1] - inset) / CELL + 1e-9)


def goal_problem(scene: TabletopScene, goals: Sequence[Relation]) -> str | None:
    """What is wrong with ``goals`` in ``scene`` (None: nothing): the suites' rules (hierarchy/suites.py: known
    names, an object moved once and never onto itself) and the physics' (a block carries at most one block, a
    block something was put on is not moved afterwards, a place holds at most :func:`capacity` blocks)."""
    objects = [o.name for o in scene.objects]
    places = [p.name for p in scene.places]
    moved = [g.object for g in goals]
    if not goals:
        return "no goals"
    if len(set(moved)) != len(moved):
        return f"an object is moved twice: {[g.text() for g in goals]}"
    for i, g in enumerate(goals):
        if g.object not in objects:
            return f"{g.object!r} is not an object of scene {scene.name!r}"
        if g.on not in objects + places:
            return f"{g.on!r} is not an object or place of scene {scene.name!r}"
        if g.on == g.object:
            return f"{g.object!r} cannot go on itself"
        if g.on in objects and g.on in moved[i + 1 :]:
            return f"{g.on!r} is moved after {g.object!r} was put on it"
    load = Counter(g.on for g in goals)
    for target, count in load.items():
        if target in objects and count > 1:
            return f"{count} objects on {target!r}: a block carries one"
        if target in places and count > capacity(scene, target):
            return f"{count} objects in {target!r}, which holds {capacity(scene, target)}"
    return None


# -- splits ---------------------------------------------------------------------------------------------------
def split_templates(seed: int) -> dict[str, dict[str, tuple[int, ...]]]:
    """split -> family -> the template indices it may use, for ``seed``: each family shuffled and cut, val
    :data:`VAL_FRACTION` of it (at least one), train the rest (at least one)."""
    out: dict[str, dict[str, tuple[int, ...]]] = {s: {} for s in SPLITS}
    for family, items in TEMPLATES.items():
        ids = list(range(len(items)))
        random.Random(f"{seed}:templates:{family}").shuffle(ids)
        n_val = min(len(ids) - 1, max(1, round(len(ids) * VAL_FRACTION)))
        out["val"][family], out["train"][family] = tuple(sorted(ids[:n_val])), tuple(sorted(ids[n_val:]))
    return out


def word_split(seed: int, kind: str, word: str) -> str:
    """The split of a synonym (never of a plain word): val for :data:`VAL_FRACTION` of them, by a seeded hash of the
    word itself, so a word has the same split in every scene and list."""
    digest = hashlib.sha256(f"{seed}:{kind}:{word.lower()}".encode()).digest()
    return "val" if int.from_bytes(digest[:8], "big") / 2**64 < VAL_FRACTION else "train"


# -- instructions ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TabletopInstruction:
    """One generated instruction, its gold goals, and what it was made of (what the splits hold apart)."""

    id: str
    scene: str
    split: str
    category: str
    text: str
    goals: tuple[Relation, ...]
    templates: tuple[str, ...] = ()  # "<family>/<index>" of every template used
    words: tuple[str, ...] = ()  # "<kind>:<word>" of every synonym used (plain words are in every split)

    def task(self) -> TabletopTask:
        return TabletopTask(self.text, self.goals, self.category)

    def row(self) -> dict[str, Any]:
        """A JSON-safe dataset line; ``goals`` as "a on b", in order."""
        return {"id": self.id, "scene": self.scene, "split": self.split, "category": self.category,
                "text": self.text, "goals": [g.text() for g in self.goals], "templates": list(self.templates),
                "words": list(self.words)}  # fmt: skip

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> TabletopInstruction:
        goals = tuple(Relation(*(s.strip() for s in g.split(" on "))) for g in row["goals"])
        return cls(row["id"], row["scene"], row["split"], row["category"], row["text"], goals,
                   tuple(row.get("templates", ())), tuple(row.get("words", ())))  # fmt: skip


@dataclass
class _Draft:
    """What one instruction is being made of: the templates and synonyms it used."""

    rng: random.Random
    split: str
    templates: list[str]
    words: list[str]

    def template(self, family: str, allowed: Sequence[int], fits: Any = None) -> str | None:
        options = [i for i in allowed if fits is None or fits(TEMPLATES[family][i])]
        if not options:
            return None
        i = self.rng.choice(options)
        self.templates.append(f"{family}/{i}")
        return TEMPLATES[family][i]


def _fill(template: str, **slots: str) -> str:
    return template.format(**{k: v for k, v in slots.items() if "{" + k + "}" in template})


def _sentence(text: str) -> str:
    text = " ".join(text.split())
    return text[0].upper() + text[1:]


def _slots(template: str) -> set[str]:
    return set(re.findall(r"{(\w+)}", template))


class TabletopInstructionGenerator:
    """Generates :class:`TabletopInstruction` s for one scene and seed; ``generate(split, n)`` is deterministic."""

    def __init__(
        self,
        scene: TabletopScene | str | Path,
        vocabulary: SceneVocabulary | None = None,
        seed: int = 0,
        split_seed: int = 0,
    ):
        self.scene = scene if isinstance(scene, TabletopScene) else load_scene(scene)
        self.vocab = vocabulary if vocabulary is not None else load_tabletop_vocabulary(self.scene)
        if self.vocab.scene != self.scene.name:
            raise ValueError(f"vocabulary of scene {self.vocab.scene!r} given for scene {self.scene.name!r}")
        if not isinstance(split_seed, int) or isinstance(split_seed, bool):
            raise ValueError(f"split_seed must be an integer, got {split_seed!r}")
        self.seed = seed  # what is drawn
        self.split_seed = split_seed  # which templates and words are train's and val's
        self.allowed = split_templates(split_seed)
        s = self.scene
        self.objects = [o.name for o in s.objects]
        self.places = [p.name for p in s.places]
        self.color = {o.name: o.color for o in s.objects} | {p.name: p.color for p in s.places}
        edges = {o.name: max(o.size) for o in s.objects}
        varied = len(set(edges.values())) > 1 and bool(self.vocab.sizes)
        biggest = max(edges.values())
        self.size = {o: ("big" if e == biggest else "small") if varied else None for o, e in edges.items()}
        self.kind = {p.name: p.kind for p in s.places} | dict.fromkeys(self.objects, "object")
        self.place_relations = place_relations(s)

    # -- public ------------------------------------------------------------------------------------------------
    def categories(self, split: str | None = None) -> tuple[str, ...]:
        """The categories this scene can express (in ``split``: indirect needs like phrases of that split)."""
        out = ["single", "multi", "stack", "relational", "negation", "filler", "typo"]
        if any(self.size[o] and self._matching(size=self.size[o]) != list(self.objects) for o in self.objects):
            out.append("attribute")
        likes = [w for c in {self.color[o] for o in self.objects} for w in self.vocab.like.get(c, ())]
        if any(split is None or word_split(self.split_seed, "like", w) == split for w in likes):
            out.append("indirect")
        if self._sort_map():
            out.append("sort")
        if self.places:
            out.append("clear")
        return tuple(c for c in CATEGORIES if c in out)

    def generate(
        self, split: str, n: int, categories: Sequence[str] | None = None
    ) -> tuple[list[TabletopInstruction], Counter]:
        """``n`` distinct instructions of ``split``, categories (all the scene can express, or ``categories``) in
        turn; and a Counter of what was dropped (``test_like``: equal to a test instruction; ``duplicate``;
        ``unusable``: the draw found no valid task) and of the categories exhausted (``exhausted:<category>``: how
        many it made). Raises ValueError when every category is exhausted before ``n``."""
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; splits: {', '.join(SPLITS)}")
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"n must be a whole number >= 0, got {n!r}")
        rng = random.Random(f"{self.seed}:{self.scene.name}:{split}")
        possible = self.categories(split)
        for c in categories or ():
            if c not in possible:
                why = "unknown category" if c not in CATEGORIES else f"scene {self.scene.name!r} cannot express"
                raise ValueError(f"{why} {c!r}{did_you_mean(c, CATEGORIES)}; in split {split!r} it has: "
                                 f"{', '.join(possible)}")  # fmt: skip
        categories = [c for c in possible if c in categories] if categories else list(possible)
        out: list[TabletopInstruction] = []
        seen: set[str] = set()
        dropped: Counter = Counter()
        misses: Counter = Counter()
        turn = 0
        while len(out) < n:
            if not categories:
                raise ValueError(
                    f"scene {self.scene.name!r}, split {split!r}: only {len(out)} distinct instructions of {n} "
                    f"(dropped: {dict(dropped)}); add words to its vocabulary or ask for fewer"
                )
            category = categories[turn % len(categories)]
            made = self.make(category, split, rng)
            key = normalise(made.text) if made is not None else ""
            reason = "unusable" if made is None else "test_like" if like_a_test_instruction(key) else ""
            reason = reason or ("duplicate" if key in seen else "")
            if reason:
                dropped[reason] += 1
                misses[category] += 1
                if misses[category] >= MAX_MISSES:
                    dropped[f"exhausted:{category}"] = sum(i.category == category for i in out)
                    categories.remove(category)
                continue
            misses[category] = 0
            turn += 1
            seen.add(key)
            out.append(replace(made, id=f"{self.scene.name}-{split}-{len(out):06d}"))
        return out, dropped

    def make(self, category: str, split: str, rng: random.Random) -> TabletopInstruction | None:
        """One instruction of ``category`` (None when this draw found no valid task); its gold is checked."""
        d = _Draft(rng, split, [], [])
        made = getattr(self, f"_{category}")(d)
        if made is None:
            return None
        text, goals = made
        problem = goal_problem(self.scene, goals)
        if problem:  # a bug in the generator, not in its input: never hand out a wrong gold
            raise RuntimeError(f"generated {text!r} with bad goals {[g.text() for g in goals]}: {problem}")
        return TabletopInstruction("", self.scene.name, split, category, text, tuple(goals),
                                   tuple(d.templates), tuple(dict.fromkeys(d.words)))  # fmt: skip

    # -- words ---------------------------------------------------------------------------------------------------
    def _word(self, d: _Draft, kind: str, words: Sequence[str], plain: float = 0.6) -> str:
        """The plain word (``words[0]``) with probability ``plain``, else a synonym of the draft's split."""
        synonyms = [w for w in words[1:] if word_split(self.split_seed, kind, w) == d.split]
        if not synonyms or d.rng.random() < plain:
            return words[0]
        w = d.rng.choice(synonyms)
        d.words.append(f"{kind}:{w}")
        return w

    def _noun(self, d: _Draft, plural: bool = False) -> str:
        w = self._word(d, "object", self.vocab.objects)
        return w + "s" if plural else w

    def _color_word(self, d: _Draft, color: str) -> str:
        return self._word(d, "color", self.vocab.colors[color], plain=0.7)

    def _size_word(self, d: _Draft, size: str) -> str:
        return self._word(d, "size", self.vocab.sizes[size], plain=0.5)

    # -- references ----------------------------------------------------------------------------------------------
    def _matching(self, color: str | None = None, size: str | None = None) -> list[str]:
        return [o for o in self.objects if color in (None, self.color[o]) and size in (None, self.size[o])]

    def _nameable(self) -> list[str]:
        """The blocks a plain reference names alone (by colour, else by size and colour)."""
        return [o for o in self.objects if self._plain_features(o) is not None]

    def _plain_features(self, obj: str) -> tuple[bool, bool] | None:
        """(size, colour) features that name ``obj`` alone: colour if unique, else size and colour; None if neither."""
        if self._matching(self.color[obj]) == [obj]:
            return (False, True)
        if self.size[obj] and self._matching(self.color[obj], self.size[obj]) == [obj]:
            return (True, True)
        return None

    def _obj(self, d: _Draft, obj: str) -> str:
        """A plain reference to one block: "the red block", "the big blue cube"."""
        features = self._plain_features(obj)
        if features is None:
            raise RuntimeError(f"{obj!r} cannot be named alone in scene {self.scene.name!r}")
        size = self._size_word(d, self.size[obj]) + " " if features[0] else ""
        return f"the {size}{self._color_word(d, self.color[obj])} {self._noun(d)}"

    def _place(self, d: _Draft, place: str) -> str | None:
        """A plain reference to a place: its noun alone where no other place shares it ("the plate"), else with its
        colour ("the red bin"); None when neither names it alone."""
        noun = self._word(d, "place", self.vocab.places[place], plain=0.6)
        sharing = [p for p in self.places if noun in self.vocab.places[p]]
        color = self.color[place]
        if len(sharing) == 1 and (not color or color not in self.vocab.colors or d.rng.random() < 0.7):
            return f"the {noun}"
        if color in self.vocab.colors and [p for p in sharing if self.color[p] == color] == [place]:
            return f"the {self._color_word(d, color)} {noun}"
        return None

    def _target(self, d: _Draft, target: str) -> str | None:
        return self._obj(d, target) if target in self.objects else self._place(d, target)

    def _group(self, d: _Draft, color: str) -> str | None:
        """The blocks of one colour, two or more of them: "both red blocks"."""
        members = self._matching(color)
        if len(members) < 2:
            return None
        fits = None if len(members) == 2 else (lambda t: "both" not in t and "two" not in t)
        form = d.template("group", self.allowed[d.split]["group"], fits)
        return form and _fill(form, c=self._color_word(d, color), nouns=self._noun(d, plural=True))

    # -- sentences -----------------------------------------------------------------------------------------------
    def _clause(self, d: _Draft, x: str, y: str, target: str, plural: bool = False) -> str | None:
        on, into = PREPOSITIONS[self.kind[target]]
        form = d.template("clause", self.allowed[d.split]["clause"])
        return form and _fill(form, x=x, y=y, it="them" if plural else "it", on=on, into=into)

    def _one(self, d: _Draft, x: str, y: str, target: str, plural: bool = False) -> str | None:
        """A sentence for one goal: a frame around a clause, or a statement."""
        allowed = self.allowed[d.split]
        if d.rng.random() < 0.3:
            form = d.template("statement", allowed["statement"])
            return form and _sentence(_fill(form, x=x, y=y, on=PREPOSITIONS[self.kind[target]][0]))
        clause = self._clause(d, x, y, target, plural)
        form = clause and d.template("frame", allowed["frame"])
        return form and _sentence(_fill(form, c=clause))

    def _pick_goals(self, d: _Draft, k: int, movers: Sequence[str] | None = None) -> list[Relation] | None:
        """``k`` random valid goals moving nameable blocks onto blocks or places."""
        movers = list(movers if movers is not None else self._nameable())
        for _ in range(20):
            if len(movers) < k:
                return None
            moved = d.rng.sample(movers, k)
            goals = []
            for x in moved:
                targets = [
                    t for t in self.objects + self.places if t != x and (t in self.places or t in self._nameable())
                ]
                goals.append(Relation(x, d.rng.choice(targets)))
            if goal_problem(self.scene, goals) is None:
                return goals
        return None

    # -- categories ----------------------------------------------------------------------------------------------
    def _single(self, d: _Draft) -> tuple[str, list[Relation]] | None:
        groups = [c for c in dict.fromkeys(self.color[o] for o in self.objects) if len(self._matching(c)) >= 2]
        if self.places and groups and d.rng.random() < 0.2:  # "both red blocks into the red bin"
            color = d.rng.choice(groups)
            place = d.rng.choice(self.places)
            goals = [Relation(o, place) for o in self._matching(color)]
            x, y = self._group(d, color), self._place(d, place)
            text = x and y and self._one(d, x, y, place, plural=True)
            return (text, goals) if text and goal_problem(self.scene, goals) is None else None
        goals = self._pick_goals(d, 1)
        if not goals:
            return None
        g = goals[0]
        x, y = self._obj(d, g.object), self._target(d, g.on)
        text = y and self._one(d, x, y, g.on)
        return (text, goals) if text else None

    def _multi(self, d: _Draft) -> tuple[str, list[Relation]] | None:
        goals = self._pick_goals(d, d.rng.choice([2, 2, 3]))
        if not goals:
            return None
        refs = [(self._obj(d, g.object), self._target(d, g.on)) for g in goals]
        text = self._compose(d, goals, refs)
        return (text, goals) if text else None

    def _compose(self, d: _Draft, goals: Sequence[Relation], refs: Sequence[tuple[str, str | None]]) -> str | None:
        """One sentence for ``goals`` (one, two or three) with their references ``(x, y)``: a frame or statement for
        one; for more, clauses joined in order ("..., then ...") or goals listed ("X first, Y last")."""
        if any(y is None for _, y in refs):
            return None
        if len(goals) == 1:
            return self._one(d, refs[0][0], refs[0][1], goals[0].on)  # type: ignore[arg-type]
        k = len(goals)
        allowed = self.allowed[d.split]
        if d.rng.random() < 0.3:
            form = d.template("order", allowed["order"], lambda t: _slots(t) == {f"n{i + 1}" for i in range(k)})
            nps = {
                f"n{i + 1}": f"{x} {PREPOSITIONS[self.kind[g.on]][0]} {y}"
                for i, ((x, y), g) in enumerate(zip(refs, goals, strict=True))
            }
            return form and _sentence(_fill(form, **nps))
        clauses = [self._clause(d, x, y, g.on) for (x, y), g in zip(refs, goals, strict=True)]  # type: ignore[arg-type]
        form = d.template(f"then{k}", allowed[f"then{k}"])
        if form is None or None in clauses:
            return None
        return _sentence(_fill(form, **{f"c{i + 1}": c for i, c in enumerate(clauses)}))

    def _stack(self, d: _Draft) -> tuple[str, list[Relation]] | None:
        nameable = self._nameable()
        k = d.rng.choice([2, 3]) if len(nameable) >= 3 else 2
        if len(nameable) < k:
            return None
        tower = d.rng.sample(nameable, k)
        goals = [Relation(top, below) for below, top in itertools.pairwise(tower)]
        form = d.template(f"stack{k}", self.allowed[d.split][f"stack{k}"])
        if form is None:
            return None
        refs = dict(zip("bmt" if k == 3 else "bt", (self._obj(d, o) for o in tower), strict=True))
        return _sentence(_fill(form, nouns=self._noun(d, plural=True), **refs)), goals

    def _sort_map(self) -> dict[str, str]:
        """block -> the one place of its colour, when every block has one (else {}: the scene cannot sort)."""
        out = {}
        for o in self.objects:
            same = [p for p in self.places if self.color[p] == self.color[o]]
            if len(same) != 1:
                return {}
            out[o] = same[0]
        return out

    def _place_nouns(self, d: _Draft, places: Sequence[str]) -> str:
        """A noun every one of ``places`` answers to ("bin"), else "place"."""
        common = [n for n in self.vocab.places[places[0]] if all(n in self.vocab.places[p] for p in places)]
        return self._word(d, "place", common) if common else "place"

    def _sort(self, d: _Draft) -> tuple[str, list[Relation]] | None:
        sort = self._sort_map()
        colors = list(dict.fromkeys(self.color[o] for o in self.objects))
        allowed = self.allowed[d.split]
        if d.rng.random() < 0.4 and len(colors) > 1:  # the blocks of some colours
            chosen = d.rng.sample(colors, d.rng.randint(1, len(colors) - 1))
            moved = [o for o in self.objects if self.color[o] in chosen]
            if len(moved) < 2:
                return None
            words = [self._color_word(d, c) for c in chosen]
            listed = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
            group = f"the {listed} {self._noun(d, plural=True)}"
            form = d.template("sort_some", allowed["sort_some"])
        else:
            moved, group = list(self.objects), ""
            form = d.template("sort", allowed["sort"])
        goals = [Relation(o, sort[o]) for o in moved]
        if form is None or goal_problem(self.scene, goals):
            return None
        pnoun = self._place_nouns(d, [sort[o] for o in moved])
        text = _fill(
            form, g=group, noun=self._noun(d), nouns=self._noun(d, plural=True), pnoun=pnoun, pnouns=pnoun + "s"
        )
        return _sentence(text), goals

    def _clear(self, d: _Draft) -> tuple[str, list[Relation]] | None:
        allowed = self.allowed[d.split]
        place = d.rng.choice(self.places)
        everything = [Relation(o, place) for o in self.objects]
        if goal_problem(self.scene, everything) is None and d.rng.random() < 0.8:
            goals, form = everything, d.template("clear", allowed["clear"])
            group = ""
        else:  # not all of them fit (or for variety): the blocks of one colour
            colors = [c for c in dict.fromkeys(self.color[o] for o in self.objects) if len(self._matching(c)) >= 2]
            if not colors:
                return None
            color = d.rng.choice(colors)
            goals = [Relation(o, place) for o in self._matching(color)]
            group = self._group(d, color)
            form = d.template("clear_group", allowed["clear_group"])
        p = self._place(d, place)
        if form is None or p is None or group is None or goal_problem(self.scene, goals):
            return None
        on, into = PREPOSITIONS[self.kind[place]]
        text = _fill(
            form, p=p, g=group, noun=self._noun(d), nouns=self._noun(d, plural=True), on=on, into=into, **{"in": on}
        )
        return _sentence(text), goals

    def _filler(self, d: _Draft) -> tuple[str, list[Relation]] | None:
        base = d.rng.choice([self._single, self._single, self._multi, self._stack])(d)
        if base is None:
            return None
        text, goals = base
        allowed = self.allowed[d.split]
        which = d.rng.choice(["prefix", "suffix", "both"])
        if which in ("prefix", "both"):
            prefix = d.template("prefix", allowed["prefix"])
            keep = prefix.rstrip().endswith(("!", ".")) or re.match(r"I\b", text)  # "I'd like ..." stays upper case
            text = prefix + (text if keep else text[0].lower() + text[1:])
        if which in ("suffix", "both"):
            text = text + d.template("suffix", allowed["suffix"])
        return _sentence(text), goals

    def _typo(self, d: _Draft) -> tuple[str, list[Relation]] | None:
        goals = self._pick_goals(d, 1)
        if not goals:
            return None
        g = goals[0]
        x, y = self._obj(d, g.object), self._target(d, g.on)
        if y is None:
            return None
        labels = self._labels()
        if d.rng.random() < 0.5:
            x = typo(x, d.rng, labels)
        else:
            y = typo(y, d.rng, labels)
        text = x and y and self._one(d, x, y, g.on)
        return (text, goals) if text else None

    def _relational(self, d: _Draft) -> tuple[str, list[Relation]] | None:
        nameable = self._nameable()
        kinds = ["ontop", "beneath", "justmoved"] + (["place", "place"] if self.place_relations else [])
        kind = d.rng.choice(kinds)
        if len(nameable) < 2:
            return None
        if kind in ("ontop", "beneath"):  # "X on top of Y", "Y beneath X": X on Y
            x, y = d.rng.sample(nameable, 2)
            form = d.template(kind, self.allowed[d.split][kind])
            text = form and _fill(form, x=self._obj(d, x), y=self._obj(d, y), it="it", noun=self._noun(d))
            return (_sentence(text), [Relation(x, y)]) if text else None
        if kind == "justmoved":  # A on T, then C on "the block you just moved" (A)
            a = d.rng.choice(nameable)
            t = d.rng.choice([o for o in nameable if o != a] + self.places)
            rest = [o for o in nameable if o not in (a, t)]
            if not rest:
                return None
            c = d.rng.choice(rest)
            goals = [Relation(a, t), Relation(c, a)]
            moved = d.template("justmoved", self.allowed[d.split]["justmoved"])
            first = self._clause(d, self._obj(d, a), self._target(d, t), t)  # type: ignore[arg-type]
            second = moved and self._clause(d, self._obj(d, c), _fill(moved, noun=self._noun(d)), a)
            form = d.template("then2", self.allowed[d.split]["then2"])
            if not (first and second and form) or goal_problem(self.scene, goals):
                return None
            return _sentence(_fill(form, c1=first, c2=second)), goals
        x = d.rng.choice(nameable)
        described = self._place_by_position(d)
        if described is None:
            return None
        place, ref = described
        text = self._one(d, self._obj(d, x), ref, place)
        return (text, [Relation(x, place)]) if text else None

    def _attribute(self, d: _Draft) -> tuple[str, list[Relation]] | None:
        goals = self._pick_goals(d, 1 if d.rng.random() < 0.7 else 2)
        text = goals and self._described(d, goals, self._by_size, None)
        return (text, goals) if text else None

    def _indirect(self, d: _Draft) -> tuple[str, list[Relation]] | None:
        goals = self._pick_goals(d, 1 if d.rng.random() < 0.75 else 2)
        text = goals and self._described(d, goals, self._by_like, self._place_by_like)
        return (text, goals) if text else None

    def _negation(self, d: _Draft) -> tuple[str, list[Relation]] | None:
        kinds = ["ref", "ref", "leave"] + (["all"] if self.places else []) + (["sort"] if self._sort_map() else [])
        kind = d.rng.choice(kinds)
        allowed = self.allowed[d.split]
        if kind == "ref":  # "the block that is neither red nor blue"
            x = d.rng.choice(self.objects)
            ref = self._by_negation(d, x)
            targets = [t for t in self.objects + self.places if t != x and (t in self.places or t in self._nameable())]
            if ref is None or not targets:
                return None
            target = d.rng.choice(targets)
            text = self._one(d, ref, self._target(d, target), target)  # type: ignore[arg-type]
            return (text, [Relation(x, target)]) if text else None
        if kind == "leave":  # "Don't touch the blue block; just ..."
            goals = self._pick_goals(d, 1)
            if not goals:
                return None
            g = goals[0]
            spare = [o for o in self._nameable() if o not in (g.object, g.on)]
            y = self._target(d, g.on)
            clause = y and self._clause(d, self._obj(d, g.object), y, g.on)
            form = clause and spare and d.template("leave", allowed["leave"])
            return (_sentence(_fill(form, e=self._obj(d, d.rng.choice(spare)), c=clause)), goals) if form else None
        left_out = d.rng.choice(self._exclusions())
        rest = [o for o in self.objects if o not in left_out]
        e = self._excluded(d, left_out)
        if len(rest) < 2 or e is None:
            return None
        nouns = {"noun": self._noun(d), "nouns": self._noun(d, plural=True)}
        if kind == "all":  # "every block except the red one into the bin"
            place = d.rng.choice(self.places)
            goals = [Relation(o, place) for o in rest]
            on, into = PREPOSITIONS[self.kind[place]]
            p = self._place(d, place)
            form = p and d.template("negall", allowed["negall"])
            text = form and _fill(form, e=e, p=p, on=on, into=into, **{"in": on}, **nouns)
        else:  # "sort all the blocks but the red ones"
            sort = self._sort_map()
            goals = [Relation(o, sort[o]) for o in rest]
            pnoun = self._place_nouns(d, [sort[o] for o in rest])
            form = d.template("negsort", allowed["negsort"])
            text = form and _fill(form, e=e, pnoun=pnoun, pnouns=pnoun + "s", **nouns)
        return (_sentence(text), goals) if text and goal_problem(self.scene, goals) is None else None

    # -- references beyond the plain ones ---------------------------------------------------------------------------
    def _described(self, d: _Draft, goals: Sequence[Relation], by: Any, place_by: Any) -> str | None:
        """A sentence for ``goals`` whose blocks (and places, with ``place_by``) are named by ``by`` where it can,
        at least once; the others plainly."""
        refs, special = [], 0
        for g in goals:
            x = by(d, g.object) if d.rng.random() < 0.7 else None
            special += x is not None
            if g.on in self.objects:
                y = by(d, g.on) if d.rng.random() < 0.5 else None
            else:
                y = place_by(d, g.on) if place_by and d.rng.random() < 0.5 else None
            special += y is not None
            refs.append((x or self._obj(d, g.object), y or self._target(d, g.on)))
        return self._compose(d, goals, refs) if special else None

    def _by_size(self, d: _Draft, obj: str) -> str | None:
        """By size: "the big block" where its size alone names it, else "the small red cube"; None if neither does."""
        size = self.size[obj]
        if size is None or self._matching(self.color[obj], size) != [obj]:
            return None
        alone = self._matching(size=size) == [obj]
        color = "" if alone and d.rng.random() < 0.6 else self._color_word(d, self.color[obj]) + " "
        return f"the {self._size_word(d, size)} {color}{self._noun(d)}"

    def _like(self, d: _Draft, color: str) -> str | None:
        """A thing of ``color`` from the split's like phrases ("egg yolk")."""
        likes = [w for w in self.vocab.like.get(color, ()) if word_split(self.split_seed, "like", w) == d.split]
        if not likes:
            return None
        like = d.rng.choice(likes)
        d.words.append(f"like:{like}")
        return like

    def _by_like(self, d: _Draft, obj: str) -> str | None:
        """The colour said by what has it: "the block the colour of egg yolk" (and its size where needed)."""
        color, size = self.color[obj], self.size[obj]
        if self._matching(color) == [obj]:
            noun = self._noun(d)
        elif size and self._matching(color, size) == [obj]:
            noun = f"{self._size_word(d, size)} {self._noun(d)}"
        else:
            return None
        like = self._like(d, color)
        form = like and d.template("indref", self.allowed[d.split]["indref"])
        return form and _fill(form, noun=noun, like=like)

    def _place_by_like(self, d: _Draft, place: str) -> str | None:
        """A place by what has its colour: "the bin the colour of blueberries"."""
        noun = self._word(d, "place", self.vocab.places[place])
        color = self.color[place]
        if [p for p in self.places if noun in self.vocab.places[p] and self.color[p] == color] != [place]:
            return None
        like = self._like(d, color)
        form = like and d.template("indref", self.allowed[d.split]["indref"])
        return form and _fill(form, noun=noun, like=like)

    def _by_negation(self, d: _Draft, obj: str) -> str | None:
        """By what it is not: "the block that is neither red nor blue", "the small block that is not red", "the blue
        block that isn't the big one"; None when no form of the split names it alone."""
        color, size = self.color[obj], self.size[obj]
        others = [c for c in dict.fromkeys(self.color[o] for o in self.objects) if c != color]
        options: list[tuple[int, dict[str, str]]] = []
        for i in self.allowed[d.split]["negref"]:
            slots = _slots(TEMPLATES["negref"][i])
            if "size" in slots and size is None:
                continue
            if "color" in slots:  # its colour, but not the other size
                other = "small" if size == "big" else "big"
                same = self._matching(color)
                if self._matching(color, other) and [o for o in same if self.size[o] != other] == [obj]:
                    options.append((i, {"color": color, "size": other}))
                continue
            pool = self._matching(size=size) if "size" in slots else list(self.objects)
            for left_out in itertools.combinations(others, 2 if "c2" in slots else 1):
                rest = [o for o in pool if self.color[o] not in left_out]
                if rest == [obj] and all(any(self.color[o] == c for o in pool) for c in left_out):
                    options.append((i, {"c1": left_out[0], "c2": left_out[-1], "size": size or ""}))
        if not options:
            return None
        i, values = d.rng.choice(options)
        form = TEMPLATES["negref"][i]
        d.templates.append(f"negref/{i}")
        words = {k: self._size_word(d, v) if k == "size" else self._color_word(d, v) for k, v in values.items()
                 if k in _slots(form)}  # fmt: skip
        return _fill(form, noun=self._noun(d), **words)

    def _exclusions(self) -> list[list[str]]:
        """What "all but ..." may leave out: one block, the blocks of one colour, of two colours (scene order)."""
        colors = list(dict.fromkeys(self.color[o] for o in self.objects))
        out = [[o] for o in self.objects] + [self._matching(c) for c in colors if len(self._matching(c)) > 1]
        out += [[o for o in self.objects if self.color[o] in pair] for pair in itertools.combinations(colors, 2)]
        return out

    def _excluded(self, d: _Draft, left_out: list[str]) -> str | None:
        """How "all but" names what it leaves out: "the red one", "the big one", "the blue ones", "the red and
        yellow blocks"; None when that is not a whole colour (or the one big block)."""
        if len(left_out) == 1:
            o = left_out[0]
            if self.size[o] and self._matching(size=self.size[o]) == [o] and d.rng.random() < 0.3:
                return f"the {self._size_word(d, self.size[o])} one"
            if self._matching(self.color[o]) == [o]:
                return f"the {self._color_word(d, self.color[o])} {'one' if d.rng.random() < 0.5 else self._noun(d)}"
            return None
        colors = list(dict.fromkeys(self.color[o] for o in left_out))
        if sorted(o for c in colors for o in self._matching(c)) != sorted(left_out):
            return None
        listed = " and ".join(self._color_word(d, c) for c in colors)
        return f"the {listed} {'ones' if d.rng.random() < 0.5 else self._noun(d, plural=True)}"

    def _place_by_position(self, d: _Draft) -> tuple[str, str] | None:
        """(place, "the bin between the red bin and the green bin"): a place named by where it stands, by a form of
        the split; None when none applies."""
        allowed = set(self.allowed[d.split]["placerel"])
        options = [r for r in self.place_relations if set(PLACE_RELATION_FORMS[r[0]]) & allowed]
        if not options:
            return None
        relation, place, *others = d.rng.choice(options)
        i = d.rng.choice(sorted(set(PLACE_RELATION_FORMS[relation]) & allowed))
        d.templates.append(f"placerel/{i}")
        kin = [p.name for p in self.scene.places if p.kind == self.kind[place]]
        refs = [self._place(d, o) for o in others]
        if None in refs:
            return None
        if len(refs) == 2 and d.rng.random() < 0.5:
            refs.reverse()
        slots = {"pnoun": self._place_nouns(d, kin), **{f"p{k + 1}": r for k, r in enumerate(refs)}}
        return place, _fill(TEMPLATES["placerel"][i], **slots)

    def _labels(self) -> set[str]:
        """Every word of the vocabulary: a typo never lands on one."""
        v = self.vocab
        words = [*v.objects, *(w for ws in (*v.sizes.values(), *v.colors.values(), *v.places.values()) for w in ws)]
        return {w.lower() for w in words} | {w.lower() + "s" for w in words} | set(PALETTE)


#: The forms of TEMPLATES["placerel"] that say each relation.
PLACE_RELATION_FORMS = {"between": (0, 10), "middle": (1,), "next": (2, 5, 8, 11), "closest": (3, 6, 12),
                        "farthest": (4, 9), "spot": (7,)}  # fmt: skip
#: "Next to" a place: the nearest within this distance (m), at least this factor nearer than the second nearest;
#: "closest to the robot": at most this factor of the second closest's distance (and "farthest" the reverse).
NEXT_TO = 0.3
CLEAR_MARGIN = 1.5


def place_relations(scene: TabletopScene) -> list[tuple[str, ...]]:
    """Every way the scene's fixed layout names one place alone: ``(relation, place, *other places)`` with relation
    ``between`` (a place of a kind between two others of that kind, and the only one), ``middle`` (of exactly three
    in a row), ``next`` (the clearly nearest of a kind to another place), ``closest`` / ``farthest`` (to the robot's
    base, clearly, among two or more of a kind) and ``spot`` (the clearly nearest place of any kind)."""
    centers = {p.name: (p.center[0], p.center[1]) for p in scene.places}
    kinds: dict[str, list[str]] = {}
    for p in scene.places:
        kinds.setdefault(p.kind, []).append(p.name)
    out: list[tuple[str, ...]] = []

    def between(p: str, a: str, b: str) -> bool:
        (ax, ay), (bx, by), (px, py) = centers[a], centers[b], centers[p]
        dx, dy = bx - ax, by - ay
        length2 = dx * dx + dy * dy
        t = ((px - ax) * dx + (py - ay) * dy) / length2
        off = abs((px - ax) * dy - (py - ay) * dx) / length2**0.5
        return 0.25 < t < 0.75 and off < 0.25 * length2**0.5

    def clearly_nearest(q: str, pool: list[str]) -> str | None:
        ranked = sorted((_dist(centers[p], centers[q]), p) for p in pool if p != q)
        if not ranked or ranked[0][0] > NEXT_TO or (len(ranked) > 1 and ranked[1][0] < CLEAR_MARGIN * ranked[0][0]):
            return None
        return ranked[0][1]

    base = (scene.robot_base[0], scene.robot_base[1])
    for names in kinds.values():
        for a, b in itertools.combinations(names, 2):
            inside = [p for p in names if p not in (a, b) and between(p, a, b)]
            if len(inside) == 1:
                out.append(("between", inside[0], a, b))
                if len(names) == 3:
                    out.append(("middle", inside[0]))
        if len(names) >= 2:
            ranked = sorted((_dist(centers[p], base), p) for p in names)
            if ranked[1][0] * 0.85 >= ranked[0][0]:
                out.append(("closest", ranked[0][1]))
            if ranked[-1][0] * 0.85 >= ranked[-2][0]:
                out.append(("farthest", ranked[-1][1]))
        for q in centers:
            near = clearly_nearest(q, names)
            if near:
                out.append(("next", near, q))
    for q in centers:
        near = clearly_nearest(q, list(centers))
        if near:
            out.append(("spot", near, q))
    return out


def _dist(a: Sequence[float], b: Sequence[float]) -> float:
    return math.hypot(a[0] - b[0], a[1] - b[1])


# -- the test set -----------------------------------------------------------------------------------------------
@functools.cache
def test_texts() -> frozenset[str]:
    """The normalised instructions of the test suites (:data:`TEST_SUITES`)."""
    from hierarchy.suites import load_tabletop_suite

    return frozenset(normalise(t.text) for name in TEST_SUITES for t in load_tabletop_suite(name).tasks)


def like_a_test_instruction(normalised: str) -> bool:
    """Whether a normalised instruction equals a test instruction or comes within :data:`TEST_SIMILARITY` of one."""
    tests = test_texts()
    matchers = (difflib.SequenceMatcher(None, normalised, t) for t in tests)
    return normalised in tests or any(
        m.real_quick_ratio() >= TEST_SIMILARITY and m.quick_ratio() >= TEST_SIMILARITY and m.ratio() >= TEST_SIMILARITY
        for m in matchers
    )


# -- the public function and the dataset ------------------------------------------------------------------------
def generate_tabletop(
    scene: str | Path | TabletopScene,
    n: int,
    split: str = "train",
    seed: int = 0,
    categories: Sequence[str] | None = None,
    split_seed: int = 0,
) -> list[TabletopTask]:
    """``n`` distinct generated tasks of ``split`` ("train" or "val") in ``scene`` (a scene with a vocabulary:
    a shipped name, a scene path or a :class:`TabletopScene`), categories (all the scene can express, or
    ``categories``) in turn; deterministic for a seed, other seeds give other sets. ``split_seed`` fixes which
    templates and words are val's, whatever ``seed``: train sets drawn with several seeds never hold a val
    template or word of the same ``split_seed``."""
    items, _ = TabletopInstructionGenerator(scene, seed=seed, split_seed=split_seed).generate(split, n, categories)
    return [i.task() for i in items]


def write_dataset(
    scenes: Sequence[str], n: int, n_val: int, seed: int, out: str | Path, split_seed: int = 0
) -> dict[str, Any]:
    """``<out>/train.jsonl`` and ``val.jsonl`` (``n`` and ``n_val`` instructions shared equally by ``scenes``) and
    ``card.json`` (seed, sizes, counts per category, what was dropped); returns the card."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    sizes = {"train": n, "val": n_val}
    card: dict[str, Any] = {
        "seed": seed,
        "split_seed": split_seed,
        "scenes": list(scenes),
        "sizes": sizes,
        "val_fraction": VAL_FRACTION,
        "test_suites": list(TEST_SUITES),
        "counts": {},
        "dropped": {},
        "templates": {},
    }
    generators = [TabletopInstructionGenerator(s, seed=seed, split_seed=split_seed) for s in scenes]
    for split in SPLITS:
        rows = []
        for k, gen in enumerate(generators):
            share = sizes[split] // len(scenes) + (k < sizes[split] % len(scenes))
            items, dropped = gen.generate(split, share)
            rows += [i.row() for i in items]
            card["dropped"][f"{gen.scene.name}/{split}"] = dict(dropped)
        with open(out / f"{split}.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
        card["counts"][split] = dict(Counter(r["category"] for r in rows))
        card["templates"][split] = sorted({t for r in rows for t in r["templates"]})
    (out / "card.json").write_text(json.dumps(card, indent=2) + "\n")
    return card


def read_tabletop_jsonl(path: str | Path) -> list[TabletopInstruction]:
    """The instructions of one ``<split>.jsonl`` written by :func:`write_dataset`."""
    with open(path, encoding="utf-8") as f:
        return [TabletopInstruction.from_row(json.loads(line)) for line in f if line.strip()]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write generated tabletop instructions (train/val JSONL + card).")
    parser.add_argument(
        "--scene", action="append", dest="scenes", help="a scene with a vocabulary (repeatable; default all)"
    )
    parser.add_argument("--n", type=int, default=1000, help="train instructions (all scenes together)")
    parser.add_argument("--n-val", type=int, default=None, help="val instructions (default max(50, n/10))")
    parser.add_argument("--seed", type=int, default=0, help="draws the instructions")
    parser.add_argument("--split-seed", type=int, default=0, help="which templates and words are val's")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error(f"--n must be >= 1, got {args.n}")
    n_val = max(50, args.n // 10) if args.n_val is None else args.n_val
    try:
        card = write_dataset(
            args.scenes or scenes_with_vocabulary(), args.n, n_val, args.seed, args.out, split_seed=args.split_seed
        )
    except ValueError as err:
        parser.error(str(err))
    argv_used = sys.argv[1:] if argv is None else argv
    card["command"] = "python -m llm_planner.posttrain.tabletop_instructions " + shlex.join(argv_used)
    (args.out / "card.json").write_text(json.dumps(card, indent=2) + "\n")
    print(f"wrote {args.out}: {card['counts']}")


if __name__ == "__main__":
    main()
