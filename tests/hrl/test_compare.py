"""python -m hrl.compare: two evaluation runs paired episode by episode (exact McNemar)."""

import json

import pytest

from hrl.compare import compare, main, mcnemar, paired_difference_ci


def write_run(path, successes, backend="mujoco", category="clear"):
    path.mkdir(parents=True)
    rows = [
        {"suite": "tabletop_clear", "planner": "symbolic", "backend": backend, "seed": 0, "episode": 0,
         "layout": i, "category": category, "success": s}
        for i, s in enumerate(successes)
    ]  # fmt: skip
    (path / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_mcnemar_counts_the_discordant_pairs_and_gives_the_exact_p():
    a = {i: True for i in range(10)}
    b = dict(a) | {0: False, 1: False}
    assert mcnemar(a, b) == {"episodes": 10, "success_a": 10, "success_b": 8, "only_a": 2, "only_b": 0,
                             "mcnemar_p": 0.5, "diff_ci95_points": [-43.3, 10.0]}  # fmt: skip
    c = {i: i >= 6 for i in range(10)}  # six only a solved: p = 2 / 2**6
    assert mcnemar(a, c)["mcnemar_p"] == pytest.approx(2 / 64, abs=1e-4)
    assert mcnemar({}, {})["mcnemar_p"] == 1.0
    # only the keys both have are paired
    assert mcnemar({1: True, 2: True}, {2: False, 3: True})["episodes"] == 1


def test_the_paired_difference_interval_tells_noise_from_a_gain():
    # 2026-12-07's ship decision: 2 episodes fewer of 198 (14 against 12) is -1 point, inside -6.1 to +4.1
    lo, hi = paired_difference_ci(14, 12, 198)
    assert (round(100 * lo, 1), round(100 * hi, 1)) == (-6.1, 4.1)
    # RL over imitation on the clean model, 27 against 7 (McNemar p < 0.001): the interval excludes 0
    assert paired_difference_ci(7, 27, 198)[0] > 0
    # no discordant pair: a narrow interval around 0, never a point; more episodes, narrower
    lo, hi = paired_difference_ci(0, 0, 198)
    assert lo < 0 < hi and hi - lo < 0.025
    width = [hi - lo for lo, hi in (paired_difference_ci(14, 12, 198), paired_difference_ci(28, 24, 396))]
    assert width[1] < 0.75 * width[0]  # twice the episodes, the same rates: ~1/sqrt(2) as wide
    with pytest.raises(ValueError, match="only_a=5, only_b=6, n=10"):
        paired_difference_ci(5, 6, 10)


def test_two_runs_are_compared_per_cell_and_overall(tmp_path, capsys):
    a = write_run(tmp_path / "a" / "cell", [True] * 8 + [False, True])
    write_run(tmp_path / "a" / "other", [True, True], backend="pybullet")
    b = write_run(tmp_path / "b" / "cell", [True] * 6 + [False, False, True, True])
    figures = compare(tmp_path / "a", tmp_path / "b")
    cell = figures["cells"]["tabletop_clear/symbolic/mujoco/clear"]
    assert (cell["only_a"], cell["only_b"], cell["episodes"]) == (2, 1, 10)
    assert figures["all"]["episodes"] == 10 and figures["only_in_one_run"] == ["tabletop_clear/symbolic/pybullet/clear"]
    main([str(a.parent), str(b.parent)])
    out = capsys.readouterr().out
    assert "| tabletop_clear/symbolic/mujoco/clear | 10 | 90% | 80% | -10.0 | -40.7 to +24.0 | 2 | 1 |" in out
    assert json.loads(out.strip().splitlines()[-1])["all"]["only_a"] == 2


def test_runs_that_cannot_be_paired_are_refused_by_name(tmp_path, capsys):
    write_run(tmp_path / "a", [True])
    write_run(tmp_path / "b", [True], backend="pybullet")
    with pytest.raises(SystemExit):
        main([str(tmp_path / "a"), str(tmp_path / "b")])
    assert "share no episode" in capsys.readouterr().err
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "episodes.jsonl").write_text(json.dumps({"suite": "s", "success": True}) + "\n")
    with pytest.raises(ValueError, match=r"episodes.jsonl:1: row lacks planner, backend, seed"):
        compare(tmp_path / "a", tmp_path / "c")
    with pytest.raises(ValueError, match="no such run directory"):
        compare(tmp_path / "nowhere", tmp_path / "a")


def write_plan_rows(path, outcomes, text="Go to the {}."):
    """A run of benchmarks/posttrain.py: rows.jsonl, one instruction a row."""
    path.mkdir(parents=True)
    rows = [{"id": f"apartment-val-{i:06d}", "category": "avoid" if i % 2 else "single", "text": text.format(i),
             "outcome": o, "reward": float(o == "success")} for i, o in enumerate(outcomes)]  # fmt: skip
    (path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_posttrain_runs_are_paired_by_instruction_per_category(tmp_path, capsys):
    a = write_plan_rows(tmp_path / "a", ["success", "success", "success", "missed_target"])
    b = write_plan_rows(tmp_path / "b", ["success", "entered_avoided_room", "planner_error", "success"])
    figures = compare(a, b)
    assert figures["cells"]["plan/avoid"] == {"episodes": 2, "success_a": 1, "success_b": 1, "only_a": 1,
                                                   "only_b": 1, "mcnemar_p": 1.0, "diff_ci95_points": [-84.9, 84.9],
                                                   "unpaired": 0}  # fmt: skip
    assert (figures["cells"]["plan/single"]["only_a"], figures["all"]["only_a"], figures["all"]["only_b"]) == (1, 2, 1)
    main([str(a), str(b)])
    assert "| plan/single | 2 | 100% | 50% | -50.0 | -89.8 to +39.8 | 1 | 0 |" in capsys.readouterr().out
    # the same ids with other sentences (another generator or seed) are other instructions: nothing pairs
    other = write_plan_rows(tmp_path / "other", ["success"] * 4, text="Head for place {}.")
    with pytest.raises(ValueError, match="share no episode"):
        compare(a, other)
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "rows.jsonl").write_text(json.dumps({"id": "x", "text": "t"}) + "\n")
    with pytest.raises(ValueError, match=r"rows.jsonl:1: row lacks category, outcome; not benchmarks/posttrain.py"):
        compare(a, tmp_path / "bad")
