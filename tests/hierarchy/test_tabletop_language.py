"""The tabletop language suites: they load against their scenes, hold >= 60 distinct instructions in every
category, and none of them is a worked example of the LLM planner's prompt (that would leak the test set)."""

from collections import Counter

import pytest

from hierarchy.suites import load_tabletop_suite, tabletop_suites
from llm_planner.llm.prompts import words
from llm_planner.planners.llm_tabletop import load_tabletop_examples

CATEGORIES = ("single", "multi", "relational", "attribute", "indirect", "negation")


@pytest.fixture(scope="module")
def suites():
    names = [s for s in tabletop_suites() if s.startswith("tabletop_language")]
    return [load_tabletop_suite(s) for s in names]


def test_language_suites_hold_60_plus_unique_instructions_in_every_category(suites):
    assert {s.scene for s in suites} == {"blocks", "sort", "clear"}
    tasks = [t for s in suites for t in s.tasks]
    assert len(tasks) >= 60
    texts = [t.text for t in tasks]
    assert len(set(texts)) == len(texts), [t for t, n in Counter(texts).items() if n > 1]
    counts = Counter(t.category for t in tasks)
    assert set(counts) == set(CATEGORIES), counts
    assert min(counts.values()) >= 8, counts


def test_no_language_instruction_is_a_worked_example(suites):
    examples = {(e.scene, " ".join(words(e.text))) for e in load_tabletop_examples()}
    for suite in suites:
        for task in suite.tasks:
            assert (suite.scene, " ".join(words(task.text))) not in examples, task.text
