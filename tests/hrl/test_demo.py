"""The main job: a language instruction, the embedded LLM, the shipped policy, MuJoCo."""

import json

import pytest

from hrl.demo import main


def test_demo_runs_the_language_task_end_to_end(tmp_path):
    out = tmp_path / "demo"
    assert main(["--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["instruction"] == "Go check the fridge, then park at the charging dock."
    assert summary["reading"] == {"targets": ["fridge", "charging_dock"], "avoid": []}
    assert summary["success"] and summary["planner_tokens"] > 0
    plan = json.loads((out / "plan.json").read_text())
    labels = [s["label"] for s in plan["plans"][0]]
    assert labels.index("landmark fridge") < labels.index("landmark charging_dock") == len(labels) - 1
    assert plan["model"].startswith("llama_cpp:SmolLM2-135M-Instruct")
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    assert events[0]["kind"] == "plan" and events[-1] == {**events[-1], "kind": "done", "detail": "success"}
    calls = [json.loads(line) for line in (out / "llm_calls.jsonl").read_text().splitlines()]
    assert calls[0]["phase"] == "reading" and not calls[0]["cached"] and calls[0]["prompt_tokens"] > 0
    assert all(c.get("phase") == "reading" or (c["seed"], c["episode"]) == (0, 0) for c in calls)
    assert (out / "llm_goals_demo_ep0.mp4").stat().st_size > 0


def test_demo_rejects_bad_arguments():
    with pytest.raises(SystemExit, match="--max-steps must be >= 1"):
        main(["--max-steps", "0"])
    with pytest.raises(SystemExit, match="the instruction is empty"):
        main(["  "])
    with pytest.raises(SystemExit, match=r"--start 'garage' is not a named start of map 'apartment'; use one of"):
        main(["Go to the bed.", "--start", "garage"])
    with pytest.raises(SystemExit, match="x,y,yaw"):
        main(["Go to the bed.", "--start", "1,two,3"])
