"""The main job on embedded defaults: a language instruction, planned by the embedded LLM, executed
by the shipped low-level policy in MuJoCo.

``make demo`` (or ``hrl-demo`` / ``python -m hrl.demo``)::

    hrl-demo                                           # "Go check the fridge, then park at the charging dock."
    hrl-demo "Go to the couch without going through the hallway" --start kitchen
    hrl-demo "Go to the desk" --map house --start laundry --expect desk
    hrl-demo "Go to the bed." --start dock --planner llm_route --model path/to/model.gguf

1. the planner (``llm_goals`` by default, as ``planner=llm_goals`` is configured: Gemma 3 270M with the shipped
   SFT adapter in llama.cpp reads the targets and the rooms to avoid; the graph planner routes) turns the
   instruction into a plan over the map. ``--model smollm2`` runs the untrained SmolLM2-135M, the default
   before the adapter (``planner=llm_goals_untrained``), ``--model FILE.gguf`` any GGUF the same way;
2. the shipped goal-conditioned policy (``hrl/policies/rover_local``) drives the MuJoCo rover through
   the plan's subgoals; the executor replans when a subgoal fails;
3. the run directory ``runs/demo/<time>/`` gets ``plan.json`` (what the model read, every plan),
   ``events.jsonl`` (executor events), ``llm_calls.jsonl`` (every model call: tokens, latency),
   ``episodes.json`` / ``summary.json`` and a top-down video with the plan drawn on it.

Success is judged against what the instruction asks where the demo knows it: its built-in instruction
(the fridge, then the charging dock), or the places you give with ``--expect`` (and ``--expect-avoid``) for
your own. Then the robot must visit those places in order without entering a forbidden room, whatever the
model read, and the summary says whether the reading matched. Without an expectation the demo can only
check that the robot executed what the model read: it prints and records "executed as read; reading not
checked" (``judged_against: "reading"`` in summary.json), never "success".

    hrl-demo "Go to the couch without going through the hallway" --start kitchen --expect sofa --expect-avoid hallway

Exit status: 0 done (without an expectation: executed as read), 2 not done, 1 no usable reading. With the
embedded 135M model ``--planner llm_route`` rarely writes a valid door route (docs/llm_planner.md); give a
bigger GGUF with ``--model``.

The tabletop (``--domain tabletop``): the Panda and the shipped skills (:mod:`hierarchy.tabletop`) carry out an
instruction whose goals you give as ``--goals 'red_block on blue_block'`` (comma-separated, in order) or
``--stack blue_block,red_block`` (bottom first). The planner plans from those goals (``symbolic``, the default,
or ``flat``) or reads the instruction itself (``llm_goals``, ``saycan``: the embedded model, or ``--model``),
and the final state, after the arm has let go, is judged against the goals given, as with ``--expect``::

    hrl-demo "Stack the red block on the blue one." --domain tabletop --goals "red_block on blue_block"
    hrl-demo "Build a tower: blue, red, yellow." --domain tabletop --stack blue_block,red_block,yellow_block \\
        --backend pybullet --seed 3
    hrl-demo "Stack the red block on the blue one." --domain tabletop --goals "red_block on blue_block" \\
        --planner llm_goals

It writes ``plan.json`` (the goals, every plan), ``events.jsonl``, ``summary.json``, ``llm_calls.jsonl`` (a
language model's calls) and the video ``<planner>_tabletop.mp4``; exit status 0 done, 2 not done.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from hrl import DEFAULT_POLICY
from llm_planner.planners.llm import MODES as LLM_MODES

#: The planners that plan from the goals given (on the tabletop; a language model reads the instruction).
TABLETOP_PLANNERS = ("symbolic", "flat")

DEFAULT_INSTRUCTION = "Go check the fridge, then park at the charging dock."
#: What the built-in instruction asks on its map: the places in order, the rooms to avoid.
DEFAULT_EXPECTED = ("apartment", ["fridge", "charging_dock"], [])
UNCHECKED = "executed as read; reading not checked"
#: The rover's options (their dest) that the tabletop does not read, and the tabletop's that the rover does not.
ROVER_ONLY = ("map", "start", "model", "expect", "expect_avoid", "policy")
TABLETOP_ONLY = ("scene", "backend", "goals", "stack", "seed")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hrl-demo", description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("instruction", nargs="?", default=DEFAULT_INSTRUCTION, help=f"default: {DEFAULT_INSTRUCTION!r}")
    p.add_argument("--map", default="apartment", help="map name or path of a map .yaml (default: apartment)")
    p.add_argument("--start", default="bedroom", help="a named start of the map, or x,y,yaw (default: bedroom)")
    p.add_argument(
        "--planner",
        default=None,
        choices=[*LLM_MODES, *TABLETOP_PLANNERS, "saycan"],
        help="the rover: llm_goals (default) | llm_route; the tabletop: symbolic (default), flat, llm_goals, saycan",
    )
    p.add_argument(
        "--model",
        default=None,
        help="run this model untrained: a GGUF file or a shipped one (smollm2, gemma3); default: the planner's "
        "configured model (llm_goals: Gemma 3 270M + the shipped SFT adapter)",
    )
    p.add_argument(
        "--expect",
        metavar="PLACES",
        help="what your instruction asks: places in order, comma-separated names or aliases (e.g. fridge,dock); "
        "success is judged against them instead of against the model's reading",
    )
    p.add_argument(
        "--expect-avoid", metavar="ROOMS", help="with --expect: rooms the instruction forbids (e.g. hallway)"
    )
    p.add_argument("--policy", default=DEFAULT_POLICY, help=f"low-level policy (default: {DEFAULT_POLICY})")
    p.add_argument(
        "--max-steps", type=int, default=None, help="control steps for the whole task (default: 3000; tabletop 1500)"
    )
    p.add_argument("--no-video", action="store_true", help="skip the video (faster)")
    p.add_argument("--out", type=Path, default=None, help="output directory (default: runs/demo/<time>)")
    t = p.add_argument_group("the tabletop (--domain tabletop)")
    t.add_argument("--domain", default="navigation", choices=["navigation", "tabletop"], help="default: navigation")
    t.add_argument(
        "--goals", metavar="GOALS", help="what the instruction asks, in order: 'red_block on blue_block, ...'"
    )
    t.add_argument("--stack", metavar="OBJECTS", help="or a tower, bottom first: blue_block,red_block")
    t.add_argument("--scene", default=None, help="a scene of sim/scenes/ (default: blocks)")
    t.add_argument("--backend", default=None, choices=["mujoco", "pybullet"], help="default: mujoco")
    t.add_argument("--seed", type=int, default=None, help="the layout of the scene (env.reset seed; default: 0)")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.max_steps is not None and args.max_steps < 1:
        raise SystemExit(f"--max-steps must be >= 1, got {args.max_steps}")
    if not args.instruction.strip():
        raise SystemExit("the instruction is empty; say where the robot should go, e.g. 'Go to the fridge.'")
    if args.domain == "tabletop":
        return run_tabletop(args, parser)
    _refuse(parser, args, TABLETOP_ONLY, "only with --domain tabletop")
    if args.planner not in (None, *LLM_MODES):
        raise SystemExit(f"--planner {args.planner}: the rover's demo reads the instruction with a language model, "
                         f"--planner {' | '.join(LLM_MODES)} ({args.planner} runs with --domain tabletop)")  # fmt: skip
    args.planner = args.planner or "llm_goals"
    args.max_steps = args.max_steps or 3000

    import sim  # noqa: F401  (registers hrl/RoverNav-v0)
    from hrl.hierarchy_eval import run_suite, write_jsonl
    from hrl.policy import GoalPolicy
    from hrl.tasks import suite_from_dict
    from llm_planner.base import make_planner
    from llm_planner.llm.backend import LLMError
    from llm_planner.plan import PlanError
    from llm_planner.planners.graph import room_name
    from sim.navigation.world import load_world

    world = load_world(args.map)
    try:
        start = world.parse_start(args.start)
    except ValueError as err:
        raise SystemExit(f"--start {err}") from None
    expected = expected_reading(args, world)
    out = args.out or Path("runs") / "demo" / time.strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)

    name, params, model = reading_planner(args.planner, args.model)
    print(f"[demo] loading the planner ({args.planner}, llama.cpp, {model})")
    try:
        planner = make_planner(name, **params)
    except LLMError as err:
        raise SystemExit(f"--model: {err}" if args.model else str(err)) from None
    xy = (world.starts[start].x, world.starts[start].y) if isinstance(start, str) else start[:2]
    t0 = time.perf_counter()
    try:
        reading = planner.interpret(args.instruction, world, room_name(world, xy))
    except PlanError as err:
        failed = {
            "instruction": args.instruction,
            "planner": args.planner,
            "model": planner.backend.model_id,
            "judged_against": "reading" if expected is None else "expected",
            "success": None if expected is None else False,
            "executed_as_read": False if expected is None else None,
            "verdict": "no usable reading",
            "error": str(err),
        }
        (out / "summary.json").write_text(json.dumps(failed, indent=2))
        print(f"[demo] the model gave no usable plan: {err}")
        return 1
    read_s = time.perf_counter() - t0
    read_tokens = planner.last_usage.get("tokens", 0)  # executing the task re-uses this answer (plan cache)
    reading_calls = [dict(call, phase="reading") for call in planner.calls]
    if args.planner == "llm_goals":
        read_goals, read_avoid = list(reading.targets), list(reading.avoid)
        print(f"[demo] {args.instruction!r} -> targets {read_goals}, avoid {read_avoid} ({read_s:.2f} s)")
    else:
        read_goals = [n for n in reading.route if not any(d.name == n for d in world.doors)]
        read_avoid = []
        print(f"[demo] {args.instruction!r} -> route {reading.route} ({read_s:.2f} s)")
    if expected is None:
        goals, avoid, as_expected = read_goals, read_avoid, None
        print("[demo] reading not checked: the demo does not know what this instruction asks (say it with --expect)")
    else:
        goals, avoid = expected
        as_expected = reads_as_expected(args.planner, reading, expected)
        print(
            f"[demo] the instruction asks: {' > '.join(goals)}" + (f", avoiding {', '.join(avoid)}" if avoid else "")
            + ("; the model read it so" if as_expected else "; the model read it differently")
        )  # fmt: skip

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
        # "expected": success is judged against what the instruction asks; "reading": only against what the
        # model read (success is then null, executed_as_read says whether the robot did that).
        "judged_against": "reading" if expected is None else "expected",
        "expected": None if expected is None else {"targets": expected[0], "avoid": expected[1]},
        "reading_as_expected": as_expected,
        "success": None if expected is None else row["success"],
        "executed_as_read": row["success"] if expected is None else None,
        "verdict": verdict(row, expected is not None),
        **{k: row[k] for k in ("reason", "steps", "path_length", "collisions", "replans", "planner_calls")},
        "planner_tokens": read_tokens + row["planner_tokens"],
        "reading_latency_s": round(read_s, 3),
        "video": next((str(p) for p in out.glob("*.mp4")), None),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    write_jsonl(reading_calls + result.llm_calls, out / "llm_calls.jsonl")
    first = plan_doc["plans"][0] if plan_doc["plans"] else []
    print(f"[demo] plan: {len(first)} subgoals: " + " > ".join(s["label"] for s in first if "(" not in s["label"]))
    print(
        f"[demo] {summary['verdict']} in {row['steps']} steps ({row['path_length']:.1f} m, {row['replans']} replans, "
        f"{row['collisions']} wall-contact steps)"
    )
    print(f"[demo] wrote {out}/: plan.json, events.jsonl, llm_calls.jsonl, summary.json" + (
        f", {Path(summary['video']).name}" if summary["video"] else ""))  # fmt: skip
    return 0 if row["success"] else 2


def reading_planner(planner: str, model: str | None) -> tuple[str, dict[str, Any], str]:
    """A planner that reads the instruction (the rover's, and the tabletop's ``llm_goals`` / ``saycan``):
    ``planner=<planner>`` as configured (configs/planner/; ``llm_goals``: Gemma 3 270M with the shipped SFT
    adapter). ``--model`` runs that model untrained, ``llm_goals`` with the prompts made for an untrained model
    (``llm_goals_untrained``: worked examples, the spans reading): a GGUF file, or a shipped model by name
    (``smollm2``, the default before the adapter; ``gemma3``). Returns (registered name, constructor arguments,
    the model as printed)."""
    from hrl.eval import configured_planner
    from llm_planner.llm.llama_cpp_backend import SHIPPED_MODELS

    name, params = configured_planner("llm_goals_untrained" if model and planner == "llm_goals" else planner)
    backend = dict(params["backend_params"])
    if model:
        backend.update(lora_path=None, model_path=None)
        backend.pop("model", None)
        backend["model" if model in SHIPPED_MODELS else "model_path"] = model
    params["backend_params"] = backend
    lora = backend.get("lora_path")
    shown = backend.get("model_path") or backend.get("model") or "smollm2"
    return name, params, shown + (f" + adapter {lora}" if lora else "")


def run_tabletop(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """``--domain tabletop``: the instruction's goals (``--goals`` / ``--stack``) planned by ``--planner`` and
    carried out by the shipped Panda skills in ``--backend``; writes plan.json, events.jsonl, summary.json and
    the video into ``--out``. Returns the exit status: 0 done, 2 not done."""
    from dataclasses import asdict

    from hierarchy.agent import Agent, AgentConfig
    from hierarchy.tabletop import TabletopDomain, make_env
    from hrl.config import planners_for
    from hrl.hierarchy_eval import write_jsonl
    from hrl.video import write_video
    from llm_planner.base import make_planner
    from llm_planner.llm.backend import LLMError

    planner_name = args.planner or "symbolic"
    reads = planner_name not in TABLETOP_PLANNERS  # a language model reads the instruction (its --model applies)
    _refuse(parser, args, tuple(d for d in ROVER_ONLY if not (reads and d == "model")),
            "is the rover's (the tabletop runs the shipped Panda skills in its scene)")  # fmt: skip
    if planner_name not in planners_for("tabletop"):
        raise SystemExit(f"--planner {planner_name} does not plan for the tabletop; use one of: "
                         f"{' | '.join(planners_for('tabletop'))}")  # fmt: skip
    task = tabletop_task(args)
    if reads:
        registered, params, model = reading_planner(planner_name, args.model)
        print(f"[demo] loading the planner ({planner_name}, llama.cpp, {model})")
        try:
            planner = make_planner(registered, **params)
        except LLMError as err:
            raise SystemExit(f"--model: {err}" if args.model else str(err)) from None
    else:
        planner = make_planner(planner_name)

    out = args.out or Path("runs") / "demo" / time.strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    scene, backend, seed = args.scene or "blocks", args.backend or "mujoco", args.seed or 0
    goals = [g.text() for g in task.goals]
    how = "the model reads the instruction" if reads else "it plans from the goals"
    print(f"[demo] {args.instruction!r} asks: {' > '.join(goals)} ({planner_name} planner: {how})")
    print(f"[demo] executing with the shipped Panda skills in {backend} (scene {scene}, layout seed {seed})")
    env = make_env(scene, backend, render_mode=None if args.no_video else "rgb_array")
    env.reset(seed=seed)
    frames: list[Any] | None = None if args.no_video else []
    agent = Agent(TabletopDomain.with_skills(), planner, AgentConfig(max_episode_steps=args.max_steps or 1500))
    episode = agent.run(env, task, record=frames)
    video = None
    if frames:  # the agent records every other control step
        video = write_video(frames, out / f"{planner_name}_tabletop.mp4", fps=env.metadata["render_fps"] / 2)
    env.close()
    model = planner.backend.model_id if reads else None  # (llm_goals, saycan: the backend they read with)
    plan_doc = {"instruction": args.instruction, "planner": planner_name, "model": model, "goals": goals,
                "plans": episode.plans}  # fmt: skip
    (out / "plan.json").write_text(json.dumps(plan_doc, indent=2))
    with open(out / "events.jsonl", "w") as f:
        f.writelines(json.dumps(asdict(e)) + "\n" for e in episode.events)
    verdict = "done" if episode.success else f"not done: {episode.reason}"
    summary = {
        "instruction": args.instruction,
        "domain": "tabletop",
        "scene": scene,
        "backend": backend,
        "seed": seed,
        "planner": planner_name,
        "judged_against": "expected",  # the goals given, checked on the final state
        "expected": goals,
        "success": episode.success,
        "verdict": verdict,
        **episode.row(),
        "video": None if video is None else str(video),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    calls = list(getattr(planner, "calls", []))  # the model calls a planner keeps (llm_goals; saycan keeps none)
    if calls:
        write_jsonl(calls, out / "llm_calls.jsonl")
    for k, plan in enumerate(episode.plans):
        print(f"[demo] plan{f' {k + 1}' if len(episode.plans) > 1 else ''}: " + " > ".join(plan))
    print(f"[demo] {verdict} ({episode.steps} steps, {episode.replans} replans; "
          f"{episode.goals_reached} of {episode.goals_total} goals hold)")  # fmt: skip
    written = ["plan.json", "events.jsonl", "summary.json", *(["llm_calls.jsonl"] if calls else [])]
    print(f"[demo] wrote {out}/: {', '.join(written)}" + (f", {video.name}" if video else ""))
    return 0 if episode.success else 2


def tabletop_task(args: argparse.Namespace) -> Any:
    """The instruction and its goals (``--goals`` or ``--stack``) as a task of ``--scene``, names checked."""
    from hierarchy.suites import tabletop_suite_from_dict
    from robots._fields import ConfigFileError

    given = [o for o in ("goals", "stack") if getattr(args, o) is not None]
    if len(given) != 1:
        raise SystemExit(
            "--domain tabletop needs what the instruction asks, in exactly one of --goals 'red_block on blue_block' "
            f"(in order, comma-separated) or --stack blue_block,red_block (bottom first); got {given or 'neither'}"
        )
    option = given[0]
    items = [g.strip() for g in getattr(args, option).split(",") if g.strip()]
    episode = {"text": args.instruction, "category": "demo", option: items}
    try:
        suite = tabletop_suite_from_dict(
            {"name": "demo", "scene": args.scene or "blocks", "episodes": [episode]}, source="hrl-demo"
        )
    except ConfigFileError as err:
        where = "--scene" if err.field == "scene" else f"--{option}"
        raise SystemExit(f"{where}: {err.problem}") from None
    return suite.tasks[0]


def _refuse(parser: argparse.ArgumentParser, args: argparse.Namespace, dests: tuple[str, ...], why: str) -> None:
    """Options of the other domain, given: an error naming them (they would be ignored)."""
    given = [d for d in dests if getattr(args, d) != parser.get_default(d)]
    if given:
        names = ", ".join("--" + d.replace("_", "-") for d in given)
        raise SystemExit(f"{names}: {why}")


def expected_reading(args: argparse.Namespace, world: Any) -> tuple[list[str], list[str]] | None:
    """What the instruction asks (places in order, rooms to avoid, as the map's names), where the demo knows
    it: ``--expect``/``--expect-avoid``, or the built-in instruction on its map; None otherwise."""
    if args.expect is None:
        if args.expect_avoid is not None:
            raise SystemExit("--expect-avoid needs --expect (the places the instruction asks for, in order)")
        mapname, targets, avoid = DEFAULT_EXPECTED
        known = args.instruction == DEFAULT_INSTRUCTION and world.name == mapname
        return (list(targets), list(avoid)) if known else None
    targets = [_resolve(world, name, "--expect") for name in _names(args.expect, "--expect")]
    avoid = [_resolve(world, name, "--expect-avoid", rooms_only=True) for name in _names(args.expect_avoid or "", "")]
    return targets, avoid


def _names(text: str, option: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if option and not names:
        raise SystemExit(f"{option} is empty; give places in order, comma-separated, e.g. {option} fridge,dock")
    return names


def _resolve(world: Any, name: str, option: str, rooms_only: bool = False) -> str:
    from sim.navigation.world import Room

    try:
        place = world.resolve(name)
    except ValueError as err:
        raise SystemExit(f"{option}: {err}") from None
    if rooms_only and not isinstance(place, Room):
        rooms = ", ".join(r.name for r in world.rooms)
        raise SystemExit(f"{option}: {name!r} is not a room; the robot avoids rooms: {rooms}")
    return place.name


def reads_as_expected(mode: str, reading: Any, expected: tuple[list[str], list[str]]) -> bool:
    """Whether the model's reading asks what the instruction asks: ``llm_goals``, the same targets in order
    and the same rooms to avoid; ``llm_route``, a route through the targets in order that enters no room to
    avoid."""
    targets, avoid = expected
    if mode == "llm_goals":
        return list(reading.targets) == targets and sorted(reading.avoid) == sorted(avoid)
    route = iter(reading.route)
    return all(t in route for t in targets) and not set(avoid) & set(reading.route)


def verdict(row: dict[str, Any], checked: bool) -> str:
    if checked:
        return "done" if row["success"] else f"not done: {row['reason']}"
    return UNCHECKED if row["success"] else f"not even executed as read: {row['reason']}"


if __name__ == "__main__":
    sys.exit(main())
