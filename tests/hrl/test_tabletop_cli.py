"""The command lines on the tabletop (issue 16): hrl-eval and hrl-benchmark on tabletop suites, hrl-demo with a
tabletop instruction. Real envs and the shipped Panda skills; bad pairings are one-line errors with the fix."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hrl.benchmark import EPISODES_DIR, read_rows, run_job, sweep_size
from hrl.benchmark_report import write_report
from hrl.config import BenchmarkConfig, PlannerConfig, planners_for
from hrl.demo import main as demo
from hrl.eval import main as hrl_eval
from robots._fields import load_yaml_mapping

ROOT = Path(__file__).resolve().parents[2]
STACK = load_yaml_mapping(ROOT / "configs" / "task" / "tabletop_stack.yaml")


def jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def refused(capsys, run) -> str:
    """Run a CLI that must refuse its command line: exit status 2 and one line on stderr, which is returned."""
    with pytest.raises(SystemExit) as exit_:
        run()
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    return err


# ---- hrl-eval ----------------------------------------------------------------------------------------------
def test_hrl_eval_runs_a_tabletop_suite_and_writes_rows_summary_table_and_video(tmp_path, capsys):
    out = tmp_path / "run"
    hrl_eval(["planner=symbolic", "task=tabletop_stack", "tasks=1", "video_episodes=1", "progress_bar=false",
              f"hydra.run.dir={out}"])  # fmt: skip
    rows = jsonl(out / "episodes.jsonl")
    assert [(r["planner"], r["backend"], r["category"], r["seed"]) for r in rows] == [
        ("symbolic", "mujoco", "stack2", 0)
    ]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["suite"] == "tabletop_stack" and summary["episodes"] == 1
    assert summary["categories"]["stack2"]["success_rate"] == summary["success_rate"] == float(rows[0]["success"])
    assert rows[0]["success"], rows[0]["reason"]  # the hierarchy stacks the red block on the blue one
    events = jsonl(out / "events.jsonl")
    assert events[0]["kind"] == "plan" and events[-1]["kind"] == "done"
    stdout = capsys.readouterr().out
    assert "| symbolic | tabletop_stack | mujoco | stack2 | 1 | 100% " in stdout
    assert (out / "summary.md").read_text() in stdout
    assert "[hrl-eval] symbolic on tabletop_stack (mujoco): success 100% over 1 episodes" in stdout
    assert (out / "symbolic_tabletop_stack_mujoco.mp4").stat().st_size > 1000


def test_hrl_eval_names_a_run_by_its_planner_config_not_the_registered_planner_it_runs(tmp_path, capsys):
    """planner=vla_llm runs the registered vla with a consulted language model: its rows, summary and line say
    vla_llm (they said vla, the same as the VLA alone)."""
    out = tmp_path / "run"
    hrl_eval(["planner=vla_llm", "task=tabletop_stack", "tasks=1", "video_episodes=0", "progress_bar=false",
              f"hydra.run.dir={out}"])  # fmt: skip
    assert [r["planner"] for r in jsonl(out / "episodes.jsonl")] == ["vla_llm"]
    assert json.loads((out / "summary.json").read_text())["planner"] == "vla_llm"
    assert "[hrl-eval] vla_llm on tabletop_stack (mujoco): success" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        (["planner=graph", "task=tabletop_stack"], "planner=graph plans for navigation only, not for task suite "
         "'tabletop_stack' (domain tabletop); use a planner of the tabletop domain: planner=" + " | ".join(
             planners_for("tabletop"))),
        (["planner=symbolic", "task=apartment_long"], "planner=symbolic plans for tabletop only, not for task "
         "suite 'apartment_long' (domain navigation); use a planner of the navigation domain: planner="
         + " | ".join(planners_for("navigation"))),
        (["planner=symbolic", "task=tabletop_stack", "tasks=8"], "tasks=8, but task suite 'tabletop_stack' has 7 "
         "tasks; use tasks<=7"),
    ],
)  # fmt: skip
def test_hrl_eval_refuses_a_planner_of_another_domain_in_one_line(tmp_path, capsys, overrides, named):
    assert {"flat", "symbolic"} <= set(planners_for("tabletop")) and "graph" not in planners_for("tabletop")
    err = refused(capsys, lambda: hrl_eval([*overrides, f"hydra.run.dir={tmp_path / 'run'}"]))
    assert err == f"hrl-eval: error: {named}"
    assert not (tmp_path / "run" / "summary.json").exists()


def test_hrl_eval_refuses_the_rovers_options_with_a_tabletop_suite(tmp_path, capsys):
    overrides = ["planner=symbolic", "task=tabletop_stack", "env/wrappers=randomize", "policy=shipped:panda_push",
                 "executor.max_replans=1", "env.kwargs.map=house", "video_episodes=2"]  # fmt: skip
    err = refused(capsys, lambda: hrl_eval([*overrides, f"hydra.run.dir={tmp_path / 'run'}"]))
    assert "with a tabletop task suite, these overrides would be ignored" in err
    for text in (
        "env/wrappers: the sim-to-real wrappers are the rover's",
        "policy: a tabletop suite runs the shipped Panda skills",
        "executor.max_replans: the tabletop's loop has its own limits",
        "env.kwargs.map: a tabletop suite runs in its own scene (task.scene)",
        "video_episodes=2: a tabletop suite records its first episode only; use video_episodes=1",
    ):
        assert text in err
    assert not (tmp_path / "run" / "summary.json").exists()


# ---- hrl-benchmark -----------------------------------------------------------------------------------------
def test_the_tabletop_grid_is_an_option_and_the_rovers_stays_the_default():
    from hydra import compose, initialize_config_dir

    from hrl.benchmark import register_schemas
    from hrl.cli import CONFIG_DIR

    register_schemas()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        default = compose("benchmark", return_hydra_config=True)
        tabletop = compose("benchmark", overrides=["grid=tabletop"], return_hydra_config=True)
        small = compose("benchmark", overrides=["grid=tabletop", "layouts=2", "episodes=3"], return_hydra_config=True)
    assert default.name == "default" and default.hydra.sweeper.params.task == "apartment_long,maze_long"
    assert sweep_size(default) == 6 * 2 * 3 * (12 + 8)
    assert tabletop.name == "tabletop" and tabletop.hydra.sweeper.params.planner == "symbolic,flat"
    # 2 planners x 2 backends x 3 seeds x (7 stack + 1 sort + 1 clear tasks) x layouts
    assert sweep_size(tabletop) == 2 * 2 * 3 * (7 + 1 + 1) * 5
    small.hydra.overrides.task = ["planner=symbolic", "task=tabletop_stack", "backend=pybullet", "seed=0,1",
                                  "layouts=2", "episodes=3"]  # fmt: skip
    assert sweep_size(small) == 2 * 3 * 2


def test_a_tabletop_job_refuses_the_rovers_settings_and_a_rover_planner(tmp_path):
    with pytest.raises(ValueError, match=r"planner=graph plans for navigation only, .* planner=flat \| .*symbolic"):
        run_job(BenchmarkConfig(task=STACK, planner=PlannerConfig(name="graph")), tmp_path)
    bad = BenchmarkConfig(task=STACK, planner=PlannerConfig(name="symbolic"), policy="shipped:panda_push")
    with pytest.raises(ValueError, match="policy: the rover's settings, which a tabletop suite does not read"):
        run_job(bad, tmp_path)
    rover = load_yaml_mapping(ROOT / "configs" / "task" / "apartment_long.yaml")
    with pytest.raises(ValueError, match="layouts=3 applies to tabletop suites; a rover task has one start"):
        run_job(BenchmarkConfig(task=rover, layouts=3), tmp_path)
    assert not (tmp_path / EPISODES_DIR).exists()


def test_the_report_refuses_a_sweep_that_mixes_domains(tmp_path):
    (tmp_path / EPISODES_DIR).mkdir()
    rover = {"planner": "graph", "suite": "apartment_long", "backend": "mujoco", "seed": 0, "success": True}
    (tmp_path / EPISODES_DIR / "a.jsonl").write_text(json.dumps(rover) + "\n")
    (tmp_path / EPISODES_DIR / "b.jsonl").write_text(json.dumps({**rover, "domain": "tabletop"}) + "\n")
    with pytest.raises(ValueError, match=r"the sweep mixes domains \(navigation, tabletop\); .* own name="):
        write_report(tmp_path)


@pytest.mark.slow
def test_hrl_benchmark_sweeps_a_tabletop_suite_resumes_and_reports_per_category(tmp_path):
    sweep_dir = tmp_path / "sweep"
    grid = ["grid=tabletop", "name=tt", "planner=symbolic,flat", "task=tabletop_stack", "backend=mujoco", "seed=0",
            "episodes=1", "layouts=2", f"hydra.sweep.dir={sweep_dir}"]  # fmt: skip

    def sweep() -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "hrl.benchmark", *grid]
        return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, check=True)

    out = sweep()
    assert "hrl-benchmark: 100%" in out.stderr and "[hrl-benchmark] report:" in out.stdout
    files = sorted(p.name for p in (sweep_dir / EPISODES_DIR).glob("*.jsonl"))
    assert files == ["flat__tabletop_stack__mujoco__s0.jsonl", "symbolic__tabletop_stack__mujoco__s0.jsonl"]
    rows = read_rows(sweep_dir / EPISODES_DIR / files[1])
    assert [(r["domain"], r["episode"], r["layout"], r["category"]) for r in rows] == [
        ("tabletop", 0, 0, "stack2"),
        ("tabletop", 0, 1, "stack2"),
    ]
    assert all(r["planner_latencies_s"] and r["conditions"]["policy"].startswith("tabletop skills") for r in rows)
    results = {(r["planner"], r["category"]): r for r in json.loads((sweep_dir / "results.json").read_text())}
    assert set(results) == {("symbolic", "stack2"), ("flat", "stack2")}
    for planner, r in results.items():
        k = sum(row["success"] for row in read_rows(sweep_dir / EPISODES_DIR / f"{planner[0]}__tabletop_stack__"
                                                                          "mujoco__s0.jsonl"))  # fmt: skip
        assert r["episodes"] == 2 and r["success_rate"] == k / 2
    report = (sweep_dir / "report.md").read_text()
    assert (
        "# Planner benchmark on the tabletop" in report
        and "| symbolic | tabletop_stack | stack2 | mujoco | 2 |" in report
    )
    assert "hrl-benchmark grid=tabletop name=tt planner=symbolic,flat" in report  # the command to reproduce
    assert (sweep_dir / "success_by_category.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    before = {p.name: p.read_text() for p in (sweep_dir / EPISODES_DIR).glob("*.jsonl")}
    again = sweep()  # the same name: every episode is there, none is run again
    assert again.stdout.count("0 new episode(s) of 2") == 2
    assert {p.name: p.read_text() for p in (sweep_dir / EPISODES_DIR).glob("*.jsonl")} == before


# ---- hrl-demo ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["mujoco", "pybullet"])
def test_hrl_demo_runs_the_readmes_tabletop_instruction_with_its_video(tmp_path, capsys, backend):
    """The README's command: the red block stacked on the blue one, in either simulator."""
    out = tmp_path / "demo"
    code = demo(["Stack the red block on the blue one.", "--domain", "tabletop", "--goals", "red_block on blue_block",
                 "--backend", backend, "--out", str(out)])  # fmt: skip
    summary = json.loads((out / "summary.json").read_text())
    assert code == 0 and summary["success"] is True and summary["verdict"] == "done", summary["reason"]
    assert (summary["backend"], summary["goals_reached"], summary["goals_total"]) == (backend, 1, 1)
    plan = json.loads((out / "plan.json").read_text())
    assert plan["goals"] == ["red_block on blue_block"] and plan["plans"][0] == ["place red_block on blue_block"]
    assert jsonl(out / "events.jsonl")[-1]["kind"] == "done"
    assert (out / "symbolic_tabletop.mp4").stat().st_size > 1000 and summary["video"].endswith(".mp4")
    stdout = capsys.readouterr().out
    assert "[demo] plan: place red_block on blue_block" in stdout and "[demo] done (" in stdout


@pytest.mark.slow
def test_hrl_demo_lets_the_embedded_model_read_a_tabletop_instruction_and_judges_it_on_the_goals(tmp_path):
    """--planner llm_goals: the model reads the text; success is judged on the goals given, not on its reading."""
    out = tmp_path / "demo"
    code = demo(["Stack the red block on the blue one.", "--domain", "tabletop", "--goals", "red_block on blue_block",
                 "--planner", "llm_goals", "--no-video", "--out", str(out)])  # fmt: skip
    summary, plan = json.loads((out / "summary.json").read_text()), json.loads((out / "plan.json").read_text())
    # planner=llm_goals as configured: Gemma 3 + the shipped adapter (trained on navigation instructions)
    assert plan["model"].startswith("llama_cpp:gemma-3-270m") and plan["plans"] and plan["plans"][0]
    assert summary["judged_against"] == "expected" and summary["expected"] == ["red_block on blue_block"]
    assert summary["success"] == (summary["goals_reached"] == summary["goals_total"] == 1) == (code == 0)
    calls = jsonl(out / "llm_calls.jsonl")
    assert calls and calls[0]["prompt_tokens"] > 0 and summary["planner_tokens"] > 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--domain", "tabletop"], "--domain tabletop needs what the instruction asks, in exactly one of --goals"),
        (["--domain", "tabletop", "--goals", "red_blok on blue_block"],
         "--goals: 'red_blok' is not an object of scene 'blocks' (did you mean 'red_block'?)"),
        (["--domain", "tabletop", "--stack", "blue_block,red_block", "--start", "kitchen"], "--start: is the rover's"),
        (["--domain", "tabletop", "--stack", "a,b", "--scene", "nope"], "--scene: unknown scene 'nope'"),
        (["--planner", "symbolic"], "--planner symbolic: the rover's demo reads the instruction with a language "
         "model, --planner llm_goals | llm_route (symbolic runs with --domain tabletop)"),
        (["--domain", "tabletop", "--stack", "a,b", "--planner", "llm_route"],
         "--planner llm_route does not plan for the tabletop; use one of: " + " | ".join(planners_for("tabletop"))),
        (["--stack", "blue_block,red_block"], "--stack: only with --domain tabletop"),
    ],
)  # fmt: skip
def test_hrl_demo_refuses_a_tabletop_instruction_without_goals_and_options_of_the_other_domain(argv, message):
    with pytest.raises(SystemExit, match=re.escape(message)):
        demo(["Stack the red block on the blue one.", *argv])
