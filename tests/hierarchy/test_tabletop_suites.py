"""Tabletop task suites (configs/task/tabletop_*.yaml): loading, errors that name the file and the field, the
layout seeds, and run_tabletop_suite's outputs (one quick episode with the shipped skills in MuJoCo)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from hierarchy.evaluate import layout_seed, run_tabletop_suite, summarise
from hierarchy.suites import (
    TASKS_DIR,
    load_tabletop_suite,
    suite_domain,
    tabletop_suite_from_dict,
    tabletop_suites,
)
from hrl.hierarchy_eval import wilson
from llm_planner.base import make_planner
from llm_planner.tabletop import Relation
from robots._fields import ConfigFileError
from sim.tabletop.scene import load_scene
from tests.test_malformed_inputs import FUZZ, mutations

#: The shipped tabletop suites (read once: the fuzz test draws from them 60 times).
SUITES = tabletop_suites()
SHIPPED_DOCS = [yaml.safe_load((TASKS_DIR / f"{name}.yaml").read_text()) for name in SUITES]


def write(tmp_path, doc) -> str:
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def suite_doc(*episodes, scene: str = "blocks") -> dict:
    return {"name": "mine", "domain": "tabletop", "scene": scene, "episodes": list(episodes)}


# ---- the shipped suites -------------------------------------------------------------------------------------
def test_the_task_directory_holds_both_domains():
    assert {"tabletop_clear", "tabletop_sort", "tabletop_stack"} <= set(SUITES)
    assert suite_domain("apartment_long") == "navigation"  # declares none: the rover's
    assert suite_domain(TASKS_DIR / "tabletop_stack.yaml") == "tabletop"
    with pytest.raises(ValueError, match=r"unknown task suite 'tabletop_stak'; known: .*tabletop_stack"):
        load_tabletop_suite("tabletop_stak")


@pytest.mark.parametrize("name", SUITES)
def test_every_shipped_tabletop_suite_loads_against_its_scene(name):
    suite = load_tabletop_suite(name)
    assert suite.name == name and suite.tasks and suite.max_episode_steps >= 1000
    scene = load_scene(suite.scene)
    objects = {o.name: o for o in scene.objects}
    places = {p.name: p for p in scene.places}
    for task in suite.tasks:
        assert task.text and task.category
        moved = [g.object for g in task.goals]
        assert len(set(moved)) == len(moved)
        assert all(g.object in objects and g.on in {*objects, *places} - {g.object} for g in task.goals)


def test_stack_suite_has_towers_of_two_and_three_built_from_the_bottom():
    suite = load_tabletop_suite("tabletop_stack")
    by_category = {c: [t for t in suite.tasks if t.category == c] for c in ("stack2", "stack3")}
    assert all(len(t.goals) == 1 for t in by_category["stack2"]) and len(by_category["stack2"]) >= 3
    assert all(len(t.goals) == 2 for t in by_category["stack3"]) and len(by_category["stack3"]) >= 3
    for task in by_category["stack3"]:
        first, second = task.goals
        assert second.on == first.object  # the second block goes on the one just placed


def test_sort_and_clear_shorthands_expand_to_one_goal_per_object():
    sort = load_tabletop_suite("tabletop_sort").tasks[0]
    scene = load_scene("sort")
    colour = {p.name: p.color for p in scene.places}
    assert [g.object for g in sort.goals] == [o.name for o in scene.objects]
    assert all(colour[g.on] == scene.object(g.object).color for g in sort.goals)
    clear = load_tabletop_suite("tabletop_clear").tasks[0]
    assert set(clear.goals) == {Relation(o.name, "bin") for o in load_scene("clear").objects}


def test_goals_written_out_keep_their_order_and_the_text_defaults_to_them(tmp_path):
    suite = load_tabletop_suite(
        write(tmp_path, suite_doc({"goals": ["red_block on blue_block", "yellow_block on red_block"]}))
    )
    (task,) = suite.tasks
    assert task.goals == (Relation("red_block", "blue_block"), Relation("yellow_block", "red_block"))
    assert task.text == "red_block on blue_block; yellow_block on red_block" and task.category == "goals"


# ---- malformed suites ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("doc", "field", "message"),
    [
        (suite_doc({"stack": ["blue_block", "red_block"]}) | {"seeds": 3}, "seeds", "unknown field"),
        (suite_doc({"stack": ["blue_block", "red_block"], "colour": "red"}), "episodes[0].colour", "unknown field"),
        (suite_doc({"stack": ["blue_block", "red_blok"]}), "episodes[0].stack[1]",
         "'red_blok' is not an object of scene 'blocks' (did you mean 'red_block'?)"),
        (suite_doc({"goals": ["red_block on blu_block"]}), "episodes[0].goals[0]", "(did you mean 'blue_block'?)"),
        (suite_doc({"goals": ["red_block onto blue_block"]}), "episodes[0].goals[0]", "must read '<object> on"),
        (suite_doc({"goals": []}), "episodes[0].goals", "must list at least one"),
        (suite_doc({"stack": ["blue_block", "red_block"], "clear": "bin"}, scene="clear"), "episodes[0]",
         "give the goals in exactly one of goals, stack, sort, clear, got ['stack', 'clear']"),
        (suite_doc({"text": "do something"}), "episodes[0]", "exactly one of goals, stack, sort, clear, got none"),
        (suite_doc({"stack": ["blue_block"]}), "episodes[0].stack", "must list two or more distinct objects"),
        (suite_doc({"stack": ["red_block", "red_block"]}), "episodes[0].stack", "two or more distinct objects"),
        (suite_doc({"sort": "by_color"}), "episodes[0].sort", "object 'blue_block' is blue, and no place of scene"),
        (suite_doc({"sort": "by_size"}), "episodes[0].sort", "the only sorting is 'by_color'"),
        (suite_doc({"clear": "bim"}, scene="clear"), "episodes[0].clear", "(did you mean 'bin'?)"),
        (suite_doc({"goals": ["red_block on blue_block", "red_block on yellow_block"]}), "episodes[0].goals",
         "an object can be put in one place only"),
        (suite_doc({"goals": ["red_block on red_block"]}), "episodes[0].goals", "'red_block' cannot go on itself"),
        (suite_doc({"stack": ["blue_block", "red_block"]}) | {"domain": "navigation"}, "domain", "must be 'tabletop'"),
        (suite_doc({"stack": ["blue_block", "red_block"]}, scene="kitchen"), "scene", "kitchen"),
        (suite_doc(), "episodes", "the suite has no episodes"),
        (suite_doc("red on blue"), "episodes[0]", "must be a mapping"),
        (suite_doc({"stack": ["blue_block", "red_block"]}) | {"max_episode_steps": 0}, "max_episode_steps", ">= 1"),
    ],
)  # fmt: skip
def test_each_kind_of_suite_mistake_names_the_file_and_the_field(tmp_path, doc, field, message):
    path = write(tmp_path, doc)
    with pytest.raises(ConfigFileError) as err:
        load_tabletop_suite(path)
    assert str(err.value).startswith(f"{path}: {field}: "), str(err.value)
    assert message in err.value.problem


def test_sort_needs_a_place_of_every_object_colour(tmp_path):
    """The ``clear`` scene has one grey bin: sorting its red, green, blue and yellow blocks is impossible."""
    with pytest.raises(ConfigFileError, match=r"episodes\[0\]\.sort: object 'red_block' is red, and no place"):
        load_tabletop_suite(write(tmp_path, suite_doc({"sort": "by_color"}, scene="clear")))


def test_a_suite_from_a_mapping_names_its_source():
    with pytest.raises(ConfigFileError, match=r"^task: name: missing required field"):
        tabletop_suite_from_dict({"scene": "blocks", "episodes": [{"stack": ["blue_block", "red_block"]}]}, "task")


@FUZZ
@given(data=st.data())
def test_mutated_tabletop_suites_load_or_name_file_and_field(tmp_path, data):
    docs = [d | {"episodes": d["episodes"][:3]} for d in SHIPPED_DOCS]  # three episodes keep it fast
    path = write(tmp_path, data.draw(st.sampled_from(docs).flatmap(mutations)))
    try:
        suite = load_tabletop_suite(path)
    except ConfigFileError as err:
        assert str(err).startswith(f"{path}: ") and err.field, str(err)
        return
    assert suite.tasks and all(task.goals for task in suite.tasks)


# ---- layouts and the suite runner ------------------------------------------------------------------------------
def test_layout_seeds_are_distinct_for_distinct_triples_and_repeatable():
    triples = [(s, e, j) for s in range(3) for e in range(10) for j in range(10)]
    seeds = [layout_seed(*t) for t in triples]
    assert len(set(seeds)) == len(triples)
    assert seeds == [layout_seed(*t) for t in triples]
    assert all(isinstance(s, int) and 0 <= s < 2**32 for s in seeds)
    assert layout_seed(0, 1, 2) != layout_seed(0, 2, 1) != layout_seed(1, 0, 2)


def test_summarise_counts_per_category_with_wilson_intervals_and_failure_kinds():
    def row(category, success, reason, steps):
        return {"category": category, "success": success, "reason": reason, "steps": steps, "replans": 1,
                "planner_latency_mean_s": 0.5}  # fmt: skip

    rows = [
        row("stack2", True, "success", 40),
        row("stack2", False, "stuck at place red_block on blue_block (replans exhausted)", 300),
        row("stack3", False, "planner_error: RuntimeError: down", 0),
        row("stack3", True, "success", 100),
        row("stack3", True, "success", 120),
    ]
    s = summarise(rows, wilson)
    assert (s["episodes"], s["success_rate"], s["success_ci95"]) == (5, 0.6, wilson(3, 5))
    assert s["failure_reasons"] == {"stuck": 1, "planner_error": 1}
    stack2, stack3 = s["categories"]["stack2"], s["categories"]["stack3"]
    assert (stack2["episodes"], stack2["success_rate"], stack2["mean_steps"]) == (2, 0.5, 170.0)
    assert stack3["success_ci95"] == wilson(2, 3) and stack3["failure_reasons"] == {"planner_error": 1}
    assert summarise([], wilson) == {"episodes": 0}


def test_run_tabletop_suite_writes_episodes_events_and_summary(domain, tmp_path):
    suite = load_tabletop_suite("tabletop_stack")
    suite = replace(suite, tasks=suite.tasks[:1])  # stack2: red on blue
    out = tmp_path / "run"
    rows, summary = run_tabletop_suite(
        make_planner("symbolic"), suite, domain, seeds=(0,), layouts=1, out_dir=out, progress=False
    )
    (row,) = rows
    assert (row["suite"], row["planner"], row["backend"], row["category"]) == (
        "tabletop_stack",
        "symbolic",
        "mujoco",
        "stack2",
    )
    assert (row["seed"], row["episode"], row["layout"], row["goals_total"]) == (0, 0, 0, 1)
    assert row["task"] == "Put the red block on the blue one."
    assert [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()] == [
        json.loads(json.dumps(row))
    ]
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    assert events[0]["kind"] == "plan" and events[-1]["kind"] == "done"
    assert all((e["seed"], e["episode"], e["layout"]) == (0, 0, 0) for e in events)
    written = json.loads((out / "summary.json").read_text())
    assert written == json.loads(json.dumps(summary))
    assert (written["planner"], written["suite"], written["backend"], written["seeds"]) == (
        "symbolic",
        "tabletop_stack",
        "mujoco",
        [0],
    )
    k = int(row["success"])
    assert written["episodes"] == 1 and written["success_rate"] == k
    assert list(written["categories"]) == ["stack2"]
    assert written["categories"]["stack2"]["success_ci95"] == list(wilson(k, 1))
