"""The instruction generator for post-training: per-map vocabulary, categories, splits, the test set kept out."""

import difflib
import json
import random
import re
from dataclasses import replace

import pytest

from hrl.tasks import load_suite, suite_from_dict
from llm_planner.llm.answers import parse_tagged
from llm_planner.planners.common import goal_point
from llm_planner.planners.graph import GraphPlanner, room_name
from llm_planner.posttrain import instructions
from llm_planner.posttrain.instructions import (
    CATEGORIES,
    COMPOSED,
    COMPOSED_CATEGORIES,
    DEALT,
    FILLERS,
    SPLITS,
    TEMPLATES,
    TEST_SUITES,
    InstructionGenerator,
    generate,
    generate_composed,
    main,
    normalise,
    read_jsonl,
    split_templates,
    typo,
)
from llm_planner.posttrain.reward import make_reward_function
from llm_planner.posttrain.vocab import load_vocabulary, maps_with_vocabulary, vocabulary_from_dict
from robots._fields import ConfigFileError
from sim.navigation.world import MAPS_DIR, load_world

SEEDS = (0, 1, 2, 3)


@pytest.fixture(scope="module")
def worlds():
    return {m: load_world(m) for m in ("apartment", "house")}


@pytest.fixture(scope="module")
def generated(worlds):
    """(seed, map, split) -> instructions, 180 per split (20 per category)."""
    out = {}
    for seed in SEEDS:
        for name, world in worlds.items():
            gen = InstructionGenerator(world, seed=seed)
            for split in SPLITS:
                out[seed, name, split] = gen.generate(split, 180)[0]
    return out


@pytest.fixture(scope="module")
def test_instructions():
    return [ep.text for name in TEST_SUITES for ep in load_suite(name).episodes]


def _labels(worlds):
    """Every place label of both maps, longest first (so 'charging dock' is replaced before 'dock')."""
    labels = set()
    for world in worlds.values():
        for place in (*world.landmarks, *world.rooms):
            labels |= {place.name.lower(), place.name.replace("_", " ").lower(), *(a.lower() for a in place.aliases)}
    return sorted(labels, key=len, reverse=True)


def skeleton(text, labels):
    """The instruction with every place name replaced by a placeholder, normalised."""
    text = " " + " ".join(re.findall(r"[a-z0-9']+", text.lower())) + " "
    for label in labels:
        text = text.replace(f" {label} ", " PLACE ")
    return normalise(text.replace("PLACE", "place_slot"))


def test_shipped_maps_with_rooms_and_landmarks_have_a_valid_vocabulary():
    assert {"apartment", "house"} <= set(maps_with_vocabulary())
    for name in maps_with_vocabulary():
        vocab = load_vocabulary(name)
        assert vocab.map == name and len(vocab.descriptions) >= 10


def test_generation_is_deterministic_per_seed(worlds):
    a = InstructionGenerator(worlds["house"], seed=5).generate("val", 60)[0]
    b = InstructionGenerator(worlds["house"], seed=5).generate("val", 60)[0]
    c = InstructionGenerator(worlds["house"], seed=6).generate("val", 60)[0]
    assert a == b
    assert [i.text for i in a] != [i.text for i in c]


def test_every_category_is_generated_in_every_split(generated):
    for (seed, name, split), items in generated.items():
        assert {i.category for i in items} == set(CATEGORIES), (seed, name, split)
        assert len({normalise(i.text) for i in items}) == len(items)  # no duplicates within a split


def test_splits_are_disjoint_by_template_and_by_vocabulary(generated):
    for seed in SEEDS:
        for name in ("apartment", "house"):
            used = {s: generated[seed, name, s] for s in SPLITS}
            templates = {s: {part for i in items for part in i.template.split("+")} for s, items in used.items()}
            phrases = {s: {p for i in items for p in i.phrases} for s, items in used.items()}
            for a, b in (("train", "val"), ("train", "test_gen"), ("val", "test_gen")):
                assert not templates[a] & templates[b], (seed, name, a, b, templates[a] & templates[b])
                assert not phrases[a] & phrases[b], (seed, name, a, b, phrases[a] & phrases[b])
            assert phrases["val"] and phrases["test_gen"]  # the held-out splits do read unseen words
            for i in used["val"]:
                if i.category != "typo":  # a typo misspells the phrase it records
                    assert all(p in i.text for p in i.phrases), i


def test_templates_appended_later_leave_the_dealt_ones_in_their_splits(monkeypatch):
    """DEALT records what was dealt; templates appended to a family are cut among themselves, so every template
    dealt before keeps its split (figures stay comparable), and the new ones reach all three splits."""
    assert set(DEALT) == set(TEMPLATES) | set(FILLERS)
    assert all(DEALT[f][-1] == len(items) for f, items in (TEMPLATES | FILLERS).items())  # nothing undealt today

    def where(seed):
        return {t: s for s, ids in split_templates(seed)[0].items() for t in ids}

    before = {seed: where(seed) for seed in range(3)}
    grown = {
        **TEMPLATES,
        "avoid": TEMPLATES["avoid"] + tuple(f"Reach the {{a}} without the {{x}} ({k})." for k in range(7)),
    }
    monkeypatch.setattr(instructions, "TEMPLATES", grown)
    for seed in range(3):
        after = where(seed)
        assert {t: after[t] for t in before[seed]} == before[seed]
        new = {after[f"avoid/{i}"] for i in range(len(TEMPLATES["avoid"]), len(grown["avoid"]))}
        assert new == set(SPLITS)
    monkeypatch.setitem(DEALT, "avoid", (22, 20))
    with pytest.raises(ValueError, match=r"DEALT\['avoid'\] = \(22, 20\) must increase"):
        split_templates(0)
    monkeypatch.setitem(DEALT, "avoid", (22, 32, 36, 50))
    with pytest.raises(ValueError, match=f"end at most at the family's {len(grown['avoid'])} templates"):
        split_templates(0)


def test_no_generated_instruction_is_or_nearly_is_a_test_instruction(generated, test_instructions):
    tests = [normalise(t) for t in test_instructions]
    for items in generated.values():
        for item in items:
            text = normalise(item.text)
            assert text not in tests, item
            for t in tests:
                m = difflib.SequenceMatcher(None, text, t)
                if m.real_quick_ratio() >= 0.9 and m.quick_ratio() >= 0.9:
                    assert m.ratio() < 0.9, (item.text, t)


def test_no_template_is_a_test_instruction_with_other_names(worlds, test_instructions):
    labels = _labels(worlds)
    tests = {skeleton(t, labels) for t in test_instructions}
    slots = dict.fromkeys("abcxw", "the kitchen")
    for family, templates in TEMPLATES.items():
        for template in templates:
            core = template.format(**slots)
            variants = [core] + [p + core for p in FILLERS["prefix"]] + [core + s for s in FILLERS["suffix"]]
            for text in variants:
                assert skeleton(text, labels) not in tests, (family, template, text)
    # the check can fail: a test instruction is caught with its names swapped
    assert skeleton("Go to the bedroom.", labels) in tests


def test_vocabulary_phrases_are_not_phrasings_of_the_test_set(test_instructions):
    tests = [" " + normalise(t) + " " for t in test_instructions]
    for name in maps_with_vocabulary():
        for place, phrases in load_vocabulary(name).descriptions.items():
            for phrase in phrases:
                assert not any(f" {normalise(phrase)} " in t for t in tests), (name, place, phrase)


def test_gold_tasks_are_valid_language_suite_episodes(generated):
    for (seed, name, split), items in generated.items():
        if seed:
            continue
        suite = {
            "name": f"generated_{name}_{split}",
            "map": name,
            "episodes": [
                {"start": i.start, "goals": list(i.goals), "avoid": list(i.avoid), "text": i.text,
                 "category": i.category}
                for i in items
            ],
        }  # fmt: skip
        tasks = suite_from_dict(suite).tasks()  # the suites' own checks: places exist, nothing in an avoided room
        assert [t.goals for _, t in tasks] == [i.goals for i in items]


def test_category_golds_mean_what_the_sentences_say(generated, worlds):
    items = [i for (seed, _, _), v in generated.items() if seed == 0 for i in v]
    for i in items:
        world = worlds[i.map]
        if i.category == "return":
            start = world.starts[i.start]
            last = world.resolve(i.goals[-1])
            at_start = getattr(last, "position", None)
            assert last.name == room_name(world, (start.x, start.y)) or (
                at_start is not None and abs(at_start[0] - start.x) + abs(at_start[1] - start.y) < 0.5
            ), i
        if i.category in ("single", "alias", "indirect", "typo", "correction", "avoid"):
            assert len(i.goals) == 1, i
        if i.category == "multi":
            assert 2 <= len(i.goals) <= 3 and len(set(i.goals)) == len(i.goals), i
        assert bool(i.avoid) == (i.category == "avoid"), i
    # in the house some avoided rooms lie on the shortest route: the constraint changes the route
    router = GraphPlanner()
    house = worlds["house"]
    changed = 0
    for i in items:
        if i.map == "house" and i.category == "avoid":
            s = house.starts[i.start]
            route = router.route(house, (s.x, s.y), goal_point(i.goals[0], house))
            changed += i.avoid[0] in {room_name(house, p) for p in route}
    assert changed > 0


def test_every_instruction_has_a_tagged_gold_that_gives_back_its_answer(generated, worlds):
    """reading=tagged: the mentions in the sentence's order, tagged; tagged_answer raises when the tags do not
    give back the gold targets and avoid, so generating them for every instruction checks every template."""
    tags = set()
    for items in generated.values():
        for i in items:
            mentions = i.tagged_answer()["mentions"]
            tags.add(tuple(m["as"] for m in mentions))
            assert parse_tagged(json.dumps({"mentions": mentions}), worlds[i.map]).targets == list(i.goals), i
            if i.category == "correction":
                assert [m["place"] for m in mentions if m["as"] == "not"] == [i.wrong], i
    old = next(i for i in items if i.category == "correction")
    with pytest.raises(ValueError, match="does not say which place its correction takes back"):
        replace(old, wrong="").tagged_answer()  # a row written before the field: regenerate, never a silent gold
    # the out-of-order templates tag the first and the last target; in-order ones say "then" throughout
    assert ("last", "first", "then") in tags and ("then", "then", "then") in tags and ("not", "then") in tags


def test_a_typo_changes_a_word_and_never_names_another_place():
    labels = {"sofa", "couch", "stove", "oven"}
    rng = random.Random(0)
    results = [typo("the charging dock", rng, labels) for _ in range(50)]
    assert all(r is not None and r != "the charging dock" and r.startswith("the ") for r in results)
    assert typo("the tv", rng, labels) is None  # nothing long enough to misspell


def test_vocabulary_errors_name_the_file_the_field_and_the_fix(worlds):
    apartment = worlds["apartment"]

    def check(doc, *parts):
        with pytest.raises(ConfigFileError) as err:
            vocabulary_from_dict(doc, apartment, source="v.yaml")
        for part in parts:
            assert part in str(err.value), str(err.value)

    check({"map": "apartment", "places": {"fridj": ["the cold box"]}}, "v.yaml: places.fridj", "did you mean 'fridge'")
    check({"map": "apartment", "places": {"couch": ["a seat"]}}, "alias", "'sofa'")
    check({"map": "apartment", "places": {"fridge": ["the cold box"], "stove": ["The cold  box"]}},
          "places.stove[0]", "already describes 'fridge'")  # fmt: skip
    check({"map": "apartment", "places": {"sink": ["the basin in the bathroom"]}}, "places.sink[0]", "'bathroom'")
    check({"map": "house", "places": {"fridge": ["x"]}}, "v.yaml: map", "loaded for map 'apartment'")
    check({"map": "apartment", "places": {"fridge": "the cold box"}}, "places.fridge", "list of non-empty strings")
    check({"map": "apartment", "placse": {}}, "placse", "did you mean 'places'")
    with pytest.raises(ValueError, match="has no vocabulary"):
        load_vocabulary(load_world("maze"))


def test_a_map_a_user_adds_gets_instructions_from_its_own_vocabulary(tmp_path):
    (tmp_path / "flat.yaml").write_text(
        (MAPS_DIR / "apartment.yaml").read_text().replace("name: apartment", "name: flat")
    )
    (tmp_path / "vocab").mkdir()
    vocab = {"map": "flat", "places": {"fridge": ["the cold box", "the chiller", "the ice chest"],
                                       "bed": ["the place I dream", "the comfy mattress"]}}  # fmt: skip
    (tmp_path / "vocab" / "flat.yaml").write_text(json.dumps(vocab))
    world = load_world(tmp_path / "flat.yaml")
    items, _ = InstructionGenerator(world, seed=0).generate("train", 45)
    assert {i.map for i in items} == {"flat"}
    indirect = [i for i in items if i.category == "indirect"]
    assert indirect and all(i.goals[0] in ("fridge", "bed") for i in indirect)
    # its gold answers score 1 with the reward function told where the map is
    reward_fn = make_reward_function(maps={"flat": str(tmp_path / "flat.yaml")})
    columns = {c: [r[c] for r in (i.row() for i in items)] for c in ("map", "start", "goals", "avoid")}
    assert reward_fn(["p"] * len(items), [i.row()["answer"] for i in items], **columns) == [1.0] * len(items)
    # a broken vocabulary names its own file
    (tmp_path / "vocab" / "flat.yaml").write_text(json.dumps({"map": "flat", "places": {"fridje": ["x"]}}))
    with pytest.raises(ConfigFileError, match=r"vocab/flat.yaml: places.fridje: .*did you mean 'fridge'"):
        InstructionGenerator(world, seed=0)


def test_cli_writes_jsonl_splits_and_a_dataset_card(tmp_path, capsys):
    main(["--map", "apartment", "--n", "40", "--n-val", "18", "--seed", "3", "--out", str(tmp_path)])
    card = json.loads((tmp_path / "card.json").read_text())
    assert card["seed"] == 3 and card["maps"] == ["apartment"]
    assert card["command"].endswith("--seed 3 --out " + str(tmp_path))
    for split, n in (("train", 40), ("val", 18), ("test_gen", 18)):
        items = read_jsonl(tmp_path / f"{split}.jsonl")
        assert len(items) == n and {i.split for i in items} == {split}
        assert sum(card["counts"][split].values()) == n
        row = json.loads((tmp_path / f"{split}.jsonl").read_text().splitlines()[0])
        assert json.loads(row["answer"]) == {"targets": row["goals"], "avoid": row["avoid"]}
    assert "| single |" in (tmp_path / "README.md").read_text()
    assert generate(["apartment"], 40, 18, 18, seed=3).splits["val"] == read_jsonl(tmp_path / "val.jsonl")
    with pytest.raises(SystemExit):
        main(["--map", "maze", "--n", "10", "--out", str(tmp_path / "x")])
    assert "has no vocabulary" in capsys.readouterr().err


def _trigrams(template: str) -> set[tuple[str, ...]]:
    words = re.findall(r"[a-z']+", re.sub(r"{\w}", " SLOT ", template.lower()))
    return {tuple(words[i : i + 3]) for i in range(len(words) - 2)}


def test_composed_pieces_share_no_three_words_in_a_row_with_any_template():
    """Composed instructions are train data: their pieces may not carry a held-out template's wording."""
    held = set().union(*(_trigrams(t) for family in TEMPLATES.values() for t in family))
    for kind, pieces in COMPOSED.items():
        for piece in pieces:
            assert not _trigrams(piece) & held, (kind, piece, _trigrams(piece) & held)
    # the check can fail: a template's own wording is caught
    assert _trigrams("Then stay clear of {x} please.") & held


def test_composed_instructions_use_the_train_split_only_and_their_golds_check(worlds, generated, test_instructions):
    tests = {normalise(t) for t in test_instructions}
    reward_fn = make_reward_function()
    for seed in (0, 1):
        items = generate_composed(n=90, seed=seed)
        assert [i.row() for i in items] == [i.row() for i in generate_composed(n=90, seed=seed)]  # deterministic
        assert len({i.text for i in items}) == 90 and {i.category for i in items} == set(COMPOSED_CATEGORIES)
        for name in ("apartment", "house"):
            gen = InstructionGenerator(worlds[name], seed=seed)
            train_ones = {t for t in gen.plan.templates["train"] if t.startswith("one/")}
            train_words = {p for d in (gen.plan.aliases["train"], gen.plan.descriptions["train"])
                           for v in d.values() for p in v}  # fmt: skip
            held_words = {p for s in ("val", "test_gen") for d in (gen.plan.aliases[s], gen.plan.descriptions[s])
                          for v in d.values() for p in v} - train_words  # fmt: skip
            for i in (i for i in items if i.map == name):
                assert i.split == "train" and normalise(i.text) not in tests, i
                ones = {p for p in i.template.removeprefix("composed/").split(",") if p.startswith("one/")}
                assert ones and ones <= train_ones, (i.template, ones - train_ones)
                assert set(i.phrases) <= train_words and not set(i.phrases) & held_words, i
        columns = {c: [r[c] for r in (i.row() for i in items)] for c in ("map", "start", "goals", "avoid")}
        assert reward_fn(["p"] * len(items), [i.row()["answer"] for i in items], **columns) == [1.0] * len(items)
    # what they teach: the room to avoid named first, "and back" after two places, an order unlike the mention
    avoid_piece = re.compile("|".join(re.escape(p).replace(re.escape("{x}"), ".+") for p in COMPOSED["avoid"]))
    avoid_first = [i for i in items if i.category == "avoid" and avoid_piece.match(i.text.split(". ")[0] + ".")]
    back = [i for i in items if i.category == "return" and len(i.goals) == 3]
    told_later = [i for i in items if i.category == "multi" and re.search(r"(before|last):", i.template)]
    assert avoid_first and back and told_later
    with pytest.raises(ValueError, match="n must be >= 0"):
        InstructionGenerator(worlds["apartment"], seed=0).generate_composed(-1)
