"""Tabletop instructions as post-training data (llm_planner/posttrain/tabletop_sft.py): what is trained is what the
arm planner asks, the gold answers are plans the scene accepts, and the scoring reads answers as the planner does."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from llm_planner.planners.llm_tabletop import check_plan
from llm_planner.posttrain.reward import FORMAT_PENALTY, Outcome
from llm_planner.posttrain.tabletop_sft import (
    TABLETOP_SCENES,
    read_answer,
    scene_view,
    score_tabletop,
    tabletop_items,
    tabletop_reward,
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
    with pytest.raises(ValueError, match="tabletop_train=10 with stage=grpo needs engine=shared_prefix"):
        PosttrainConfig(stage="grpo", tabletop_train=10, engine="trl").check()
    PosttrainConfig(stage="grpo", tabletop_train=10).check()  # the shared-prefix engine rewards tabletop answers
    with pytest.raises(ValueError, match="tabletop_partial must be in"):
        PosttrainConfig(stage="grpo", tabletop_partial=1.0).check()


def _plan(*steps, kind="place"):
    return json.dumps({"subgoals": [{"kind": kind, "object": o, "on": t} for o, t in steps]})


def test_the_tabletop_reward_is_acceptance_on_a_symbolic_table():
    """GRPO's tabletop reward: every gold relation at the end, nothing else moved, steps the table allows."""
    items = tabletop_items(300, "train", seed=0)
    for it in items[:30]:  # every gold answer succeeds, and is exact
        r = tabletop_reward(answer_text(it), it)
        assert (r.outcome, r.value, r.exact) == (Outcome.SUCCESS, 1.0, True), (it, r)
    stack = next(
        it for it in items if it.scene == "blocks" and len(it.goals) == 2 and it.goals[1].on == it.goals[0].object
    )
    (a, b), (c, _) = [(g.object, g.on) for g in stack.goals]  # a on b, then c on a
    top_first = tabletop_reward(_plan((c, a), (a, b)), stack)
    assert top_first.outcome == Outcome.INFEASIBLE and f"moves {a}, which has {c} on top" in top_first.detail
    onto_covered = tabletop_reward(_plan((a, b), (c, b)), stack)
    assert onto_covered.outcome == Outcome.INFEASIBLE and f"{b}, which has {a} on it" in onto_covered.detail
    half = tabletop_reward(_plan((a, b)), stack)
    assert (half.outcome, half.value) == (Outcome.MISSED_TARGET, 0.0) and f"not {c} on {a}" in half.detail
    # partial credit (GRPO's tabletop_partial): half the goals hold -> 0.5 x 0.5; success and refusals unchanged
    assert tabletop_reward(_plan((a, b)), stack, partial=0.5).value == pytest.approx(0.25)
    assert tabletop_reward(_plan((a, b), (c, a)), stack, partial=0.5).value == 1.0
    assert tabletop_reward(_plan((c, a), (a, b)), stack, partial=0.5).value == 0.0  # infeasible earns nothing
    assert tabletop_reward(_plan((c, b)), stack, partial=0.5).value == 0.0  # no gold relation holds

    sort = next(it for it in items if it.scene == "sort" and len({g.object for g in it.goals}) >= 2)
    pairs = [(g.object, g.on) for g in sort.goals]
    reordered = tabletop_reward(_plan(*reversed(pairs)), sort)  # bins take any order: accepted, not exact
    assert (reordered.outcome, reordered.exact) == (Outcome.SUCCESS, False)
    others = sorted({o.name for o in scene_view(sort.scene, sort.layout_seed).objects} - {o for o, _ in pairs})
    extra = tabletop_reward(_plan(*pairs, (others[0], pairs[0][1])), sort)
    assert extra.outcome == Outcome.MISSED_TARGET and f"moves {others[0]}, which the task leaves alone" in extra.detail
    # a plan short of its goals that also moves a block the task leaves alone earns nothing, partial or not
    short_and_extra = tabletop_reward(_plan(pairs[0], (others[0], pairs[0][1])), sort, partial=0.5)
    assert (short_and_extra.outcome, short_and_extra.value) == (Outcome.MISSED_TARGET, 0.0)

    assert tabletop_reward(_plan((a, a)), stack).outcome == Outcome.UNKNOWN_PLACE
    unknown = tabletop_reward(_plan(("purple_block", b)), stack)
    assert (unknown.outcome, unknown.value) == (Outcome.UNKNOWN_PLACE, FORMAT_PENALTY)
    for bad in ('{"subgoals": [', "{}", '{"subgoals": []}', "put it there"):
        assert tabletop_reward(bad, stack).outcome == Outcome.MALFORMED
    picked = json.dumps({"subgoals": [{"kind": "place", "object": a, "on": b}, {"kind": "pick", "object": c}]})
    assert tabletop_reward(picked, stack).outcome == Outcome.MISSED_TARGET
