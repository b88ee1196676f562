"""Tabletop instructions as post-training data (llm_planner/posttrain/tabletop_sft.py): what is trained is what the
arm planner asks, the gold answers are plans the scene accepts, and the scoring reads answers as the planner does."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from llm_planner.planners.llm_tabletop import check_plan
from llm_planner.posttrain.tabletop_sft import (
    TABLETOP_SCENES,
    read_answer,
    scene_view,
    score_tabletop,
    tabletop_items,
)
from llm_planner.posttrain.train import PosttrainConfig, answer_text, prompt_messages
from llm_planner.tabletop import TabletopPlan
from sim.tabletop.scene import load_scene


def test_tabletop_items_are_deterministic_per_seed_and_shared_by_the_scenes():
    items = tabletop_items(30, "train", seed=0)
    assert items == tabletop_items(30, "train", seed=0)
    assert [it.text for it in items] != [it.text for it in tabletop_items(30, "train", seed=1)]
    assert [it.scene for it in items[:3]] == list(TABLETOP_SCENES)
    assert Counter(it.scene for it in items) == dict.fromkeys(TABLETOP_SCENES, 10)
    assert len({it.text for it in items}) == 30 and len({it.layout_seed for it in items}) == 30
    val = tabletop_items(12, "val", seed=0)
    assert not {it.text for it in val} & {it.text for it in items}
    assert tabletop_items(0, "train") == []
    with pytest.raises(ValueError, match="n must be >= 0"):
        tabletop_items(-1, "train")


def test_the_view_puts_every_block_on_the_table_in_a_seeded_layout():
    scene = load_scene("sort")
    view = scene_view("sort", 7)
    assert view == scene_view("sort", 7) and view != scene_view("sort", 8)
    (x0, x1), (y0, y1) = scene.workspace
    for o in view.objects:
        assert o.on is None and x0 <= o.position[0] <= x1 and y0 <= o.position[1] <= y1
    assert [p.name for p in view.places] == [p.name for p in scene.places]


def test_the_training_prompt_is_the_one_the_default_arm_planner_asks():
    """planner=llm_goals (the shipped default) on the tabletop asks exactly what post-training trains on."""
    from hrl.eval import configured_planner
    from hrl.hierarchy_eval import build_planner

    planner = build_planner(*configured_planner("llm_goals"), None)
    for item in tabletop_items(6, "train", seed=0):
        asked = planner.tabletop.messages(item.text, scene_view(item.scene, item.layout_seed))
        assert prompt_messages(item) == asked
        assert asked[-1]["content"].endswith(f"Instruction: {item.text}")
        assert sum(m["role"] == "assistant" for m in asked) >= 1  # the scene's worked examples come first


def test_gold_answers_are_plans_the_scene_accepts_and_scoring_reads_them():
    items = tabletop_items(24, "train", seed=0)
    for it in items:
        plan = TabletopPlan.model_validate_json(answer_text(it))
        check_plan(plan, scene_view(it.scene, it.layout_seed).names())
        assert read_answer(answer_text(it)) == [(g.object, g.on) for g in it.goals]
    multi = next(it for it in items if len(it.goals) > 1)
    swapped = json.loads(answer_text(multi))
    swapped["subgoals"].reverse()
    answers = [answer_text(multi), json.dumps(swapped), '{"subgoals": [', "{}", '{"subgoals": 3}']
    assert score_tabletop([multi] * 5, answers) == [True, False, False, False, False]


def test_tabletop_data_is_refused_where_it_cannot_be_used():
    with pytest.raises(ValueError, match="tabletop_train must be >= 0"):
        PosttrainConfig(tabletop_train=-2).check()
    with pytest.raises(ValueError, match="tabletop_train=10 is for stage=sft"):
        PosttrainConfig(stage="grpo", tabletop_train=10).check()
