import json

from hrl.demo import main


def test_demo_runs_end_to_end(tmp_path):
    """A tiny demo run writes the model, the summary and the video."""
    out = tmp_path / "demo"
    assert main(["--steps", "300", "--eval-episodes", "2", "--video-episodes", "1", "--out", str(out)]) == 0
    # the shipped policy is evaluated too, with a video in the apartment
    summary = json.loads((out / "summary.json").read_text())
    assert summary["train_steps"] == 300
    assert summary["policy"]["episodes"] == 2 and summary["random_policy"]["episodes"] == 2
    assert (out / "train" / "final_model.zip").stat().st_size > 0
    assert (out / "train" / "learning_curve.png").is_file()
    assert (out / "eval.mp4").stat().st_size > 0
    assert set(summary["shipped_policy"]) == {"open_local", "apartment_local"}
    assert (out / "shipped_apartment.mp4").stat().st_size > 0
    assert summary["hierarchy"]["goals_total"] == 3
    assert (out / "hierarchy" / "graph_apartment_multi_ep0.mp4").stat().st_size > 0


def test_demo_rejects_bad_arguments(capsys):
    import pytest

    with pytest.raises(SystemExit, match="--steps must be >= 1"):
        main(["--steps", "0"])
