"""The VLA planner end to end on held-out tabletop instructions and layouts, against the oracle, in both simulators.

The tasks are the shipped tabletop_language suites (66 instructions, six categories over the blocks, sort and
clear scenes): the test set, whose phrasings the instruction generator never produces and the demonstrations never
hold. Layouts are ``hierarchy.evaluate.layout_seed(seed, episode, 0)``; the script checks that none of them is a
layout a demonstration file of the model recorded. Skills are the shipped learned Panda skills, so a step the
planner gets right can still fail in execution: ``symbolic`` (the oracle reading of the same tasks, same layouts)
is the ceiling the skills allow.

Visual sim-to-sim: the model named by ``--model`` is run in every ``--backends`` simulator; the drop is the
difference between the simulator its demonstrations were rendered in and the other.

Also measured: the network's time per plan (``plan_image`` on a camera image: encoding the instruction, the
network, lifting and naming; p50 / p95 over ``--latency-n`` calls, the instruction's embedding cached as in an
episode), and separately the camera render.

    python benchmarks/vla.py [--quick] [--no-record] [--model runs/vla/<time>/model.pt] [--seeds 0 1 2]
        [--rl-model runs/vla/<rl time>/model.pt | --candidate runs/vla/<time>/model.pt]
        [--backends mujoco pybullet] [--planners vla symbolic llm_goals]
        [--candidate-set consult=llm_goals consult_weight=2] [--llm-cache DIR]

Planners other than ``vla`` are built as ``planner=<name>`` configures them (``llm_goals``: Gemma 3 with the shipped
adapter, reading the scene as symbols; ``--threads`` also sets its llama.cpp threads), on the same layouts.

With ``--rl-model`` the VLA after RL runs on the same tasks and layouts: ``rl_gain_points_<simulator>`` and the
paired counts (episodes only one of them solved, exact McNemar p). ``--candidate`` does the same for any other
model (``vla_candidate``, ``candidate_gain_points_<simulator>``): a model to ship against ``--model``, the shipped one.
``--candidate-set KEY=VALUE ...`` gives the candidate planner settings of its own (without ``--candidate``, the
same model with them): ``--candidate-set consult=llm_goals`` is the VLA consulting the language model, paired
with the VLA alone. Each VLA is also paired with every other planner run (``<vla>_vs_<planner>_paired_<sim>``).
``--llm-cache DIR`` keeps llm_goals' answers on disk; a consulting candidate given the same directory
(``consult_params={cache_dir: DIR}``) reuses the answers for the same scenes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import emit, parse_sets, record
from benchmarks.tabletop_language import SUITES, first_of_each_category
from hierarchy.evaluate import layout_seed, run_tabletop_suite, summarise
from hierarchy.suites import load_tabletop_suite
from hierarchy.tabletop import TabletopDomain, make_env
from hrl.eval import configured_planner
from llm_planner.base import make_planner


def planner_arguments(
    kind: str, model: str, threads: int | None, decode: str | None, overrides: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """The registered planner and its arguments: the VLA with ``model`` (and ``decode``, ``--set``), any other
    planner as ``planner=<kind>`` configures it (``llm_goals``: the shipped adapter; ``threads`` for its llama.cpp
    backend), so that ``--planners vla llm_goals`` compares the shipped planners."""
    if kind == "vla":
        params = {"model": model, "threads": threads, **({"decode": decode} if decode else {}), **overrides}
        return "vla", params
    registered, params = configured_planner(kind)
    if threads and "backend_params" in params:
        params["backend_params"]["n_threads"] = threads
    return registered, params


def demo_seeds(model_path: Path) -> tuple[set[int], list[str], set[str]]:
    """The layout seeds of the demonstrations the model was trained on (the files model.pt names, or, for a file not
    on this machine, recomputed from the generator settings model.pt records), the files whose layouts cannot be
    checked (neither here nor recorded; the output says so), and the simulators those demonstrations were
    rendered in."""
    import h5py
    import torch

    from hierarchy.vla.data import generator_layouts

    state = torch.load(model_path, map_location="cpu", weights_only=False)
    seeds: set[int] = set()
    missing = []
    rendered: set[str] = set()
    files = state.get("trained_on", [])
    generators = state.get("demo_generators") or [None] * len(files)  # models since 2026-12-07 record them
    for f, generator in zip(files, generators, strict=True):
        if Path(f).is_file():
            with h5py.File(f, "r") as h:
                seeds |= {int(g.attrs["seed"]) for g in h["data"].values()}
                rendered.add(json.loads(h["data"].attrs["generator"])["backend"])
        elif generator is not None:  # not here, but what made it is known: the same layouts, recomputed
            seeds |= generator_layouts(generator)
            rendered.add(generator["backend"])
        else:
            missing.append(str(f))
    from hierarchy.vla.rl import rl_stages, stage_layout_seed

    for rl in rl_stages(state):  # the layouts each RL stage drew (hierarchy/vla/rl.py: one per task of every update)
        n = int(rl["steps"]) * int(rl["tasks_per_step"])
        seeds |= {stage_layout_seed("rl", int(rl["seed"]), si, i) for si in range(len(rl["scenes"])) for i in range(n)}
    return seeds, missing, rendered


def failure_kind(task: Any, row: dict[str, Any], events: list[dict[str, Any]]) -> str:
    """Why a failed episode failed, from its events: ``wrong step`` (a step placed something the task does not
    ask for: the instruction or the scene misread), ``pointed at nothing`` (a step the grounding refused),
    ``execution`` (only the task's own steps, one of which the skills did not complete), ``stopped early`` (only
    the task's own steps, all completed, and then done or the step budget with goals left), or the reason."""
    asked = {f"place {g.text()}" for g in task.goals}
    started = [e["subgoal"] for e in events if e["kind"] == "subgoal_started"]
    if any(s not in asked for s in started):
        return "wrong step"
    if row["reason"].startswith("planner_error"):
        return "pointed at nothing"
    if any(e["kind"] == "subgoal_failed" for e in events):
        return "execution"
    if row["reason"].startswith(("planner_done", "planner_calls")):
        return "stopped early"
    return row["reason"].split(":")[0]


def failure_kinds(out_dir: Path, suite: Any) -> Counter:
    """``failure_kind`` of every failed episode a run of ``suite`` wrote to ``out_dir``."""
    rows = [json.loads(line) for line in (out_dir / "episodes.jsonl").read_text().splitlines()]
    events: dict[tuple, list] = {}
    for line in (out_dir / "events.jsonl").read_text().splitlines():
        e = json.loads(line)
        events.setdefault((e["seed"], e["episode"], e["layout"]), []).append(e)
    return Counter(
        failure_kind(suite.tasks[r["episode"]], r, events.get((r["seed"], r["episode"], r["layout"]), []))
        for r in rows
        if not r["success"]
    )


def latency(planner: Any, n: int, backend: str) -> dict[str, float]:
    """Per plan: the network path (plan_image) and the camera render, on the sort scene's layouts; and, once per
    instruction (the planner caches it), encoding the instruction's words."""
    from llm_planner.plan import PlanDone, PlanError

    domain = TabletopDomain()
    env = make_env("sort", backend)
    suite = load_tabletop_suite("tabletop_language_sort")
    model, camera, words, seen = [], [], [], set()
    try:
        for i in range(n):
            env.reset(seed=layout_seed(99, i, 0))
            view = domain.observe(env)
            t0 = time.perf_counter()
            image = view.camera("front", planner.size, depth=True)
            t1 = time.perf_counter()
            task = suite.tasks[i % len(suite.tasks)]
            proprio = np.array([*view.tcp, view.finger_width], dtype=np.float32)
            if task.text not in seen:  # the planner encodes an instruction once and caches it; timed here, so
                seen.add(task.text)  # a plan below is timed as an episode's later calls are
                t = time.perf_counter()
                planner.text(task.text)
                words.append((time.perf_counter() - t) * 1000)
            if i == 0:  # the first call of an instruction embeds it; an episode's later calls reuse it
                with contextlib.suppress(PlanDone, PlanError):
                    planner.plan_image(task.text, image, proprio, view)
            t2 = time.perf_counter()
            with contextlib.suppress(PlanDone, PlanError):
                planner.plan_image(task.text, image, proprio, view)
            model.append((time.perf_counter() - t2) * 1000)
            camera.append((t1 - t0) * 1000)
    finally:
        env.close()
    return {
        "plan_ms_p50": round(float(np.percentile(model, 50)), 2),
        "plan_ms_p95": round(float(np.percentile(model, 95)), 2),
        "camera_ms_p50": round(float(np.percentile(camera, 50)), 2),
        "text_ms_p50": round(float(np.percentile(words, 50)), 2),
    }


def paired(a: dict[tuple, bool], b: dict[tuple, bool], names: tuple[str, str] = ("imitation", "rl")) -> dict:
    """Episodes only the first / only the second planner solved (``only_<name>``), the exact two-sided McNemar
    p-value, and the 95 % interval of the second's success rate minus the first's in points
    (``hrl.compare.paired_difference_ci``)."""
    from hrl.compare import mcnemar

    m = mcnemar(a, b)
    return {
        "episodes": m["episodes"],
        f"only_{names[0]}": m["only_a"],
        f"only_{names[1]}": m["only_b"],
        "mcnemar_p": m["mcnemar_p"],
        "diff_ci95_points": m["diff_ci95_points"],
    }


def paired_cell(figures: dict[str, Any], backend: str) -> str:
    """The RESULTS cell of the second model against --model on ``backend``: RL's gain, or a --candidate's."""
    if f"candidate_paired_{backend}" in figures:  # --candidate: another model against --model, not RL on it
        pair = figures[f"candidate_paired_{backend}"]
        return (
            f"candidate - model, {backend}: {figures[f'candidate_gain_points_{backend}']:+}{_interval(pair)} (only "
            f"the candidate {pair['only_candidate']}, only the model {pair['only_model']}, p {pair['mcnemar_p']})"
        )
    pair = figures[f"rl_paired_{backend}"]
    return (
        f"{backend}: {figures[f'rl_gain_points_{backend}']:+}{_interval(pair)} (only RL {pair['only_rl']}, only "
        f"imitation {pair['only_imitation']}, p {pair['mcnemar_p']})"
    )


def _interval(pair: dict[str, Any]) -> str:
    lo, hi = pair["diff_ci95_points"]
    return f" [{lo:+.1f}, {hi:+.1f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="seed 0, the first instruction of each category")
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument("--model", default="shipped:vla_tabletop")
    second = parser.add_mutually_exclusive_group()
    second.add_argument("--rl-model", default=None, help="also the VLA after RL (paired with --model's episodes)")
    second.add_argument(
        "--candidate", default=None, help="also another VLA model, paired with --model's episodes (e.g. to ship)"
    )
    parser.add_argument("--planners", nargs="+", default=["vla", "symbolic"])
    parser.add_argument("--suites", nargs="+", default=SUITES)
    parser.add_argument("--backends", nargs="+", default=["mujoco", "pybullet"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--latency-n", type=int, default=50)
    parser.add_argument(
        "--threads", type=int, default=None, help="torch threads for the VLA, llama.cpp's for llm_goals (default: own)"
    )
    parser.add_argument(
        "--decode", choices=["cell", "things"], default=None, help="how the VLA names its heatmaps (default: its own)"
    )
    parser.add_argument(
        "--set", nargs="*", default=[], metavar="KEY=VALUE", help="other VLA planner parameters (YAML values)"
    )
    parser.add_argument(
        "--candidate-set",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="the candidate's own planner parameters over --set (without --candidate: --model with these), e.g. "
        "consult=llm_goals consult_weight=2",
    )
    parser.add_argument(
        "--llm-cache", default=None, help="a directory where llm_goals keeps its answers (reused by a later run)"
    )
    parser.add_argument("--out", type=Path, default=Path("runs/bench/vla"))
    args = parser.parse_args()
    overrides = parse_sets(parser, args.set)
    candidate_overrides = {**overrides, **parse_sets(parser, args.candidate_set)}
    if args.candidate_set and args.rl_model:
        parser.error("--candidate-set sets the candidate's parameters; it does not go with --rl-model")
    if args.candidate_set and not args.candidate:
        args.candidate = args.model
    from hierarchy.vla.planner import resolve_model
    from hrl.hierarchy_eval import wilson

    seeds = [0] if args.quick else args.seeds
    suites = [load_tabletop_suite(s) for s in args.suites]
    if args.quick:
        suites = [first_of_each_category(s) for s in suites]
    model_path = resolve_model(args.model)
    trained, missing, rendered = demo_seeds(model_path)
    other = args.rl_model or args.candidate  # the second model, run as vla_rl or vla_candidate
    other_name = "vla_rl" if args.rl_model else "vla_candidate"
    if other:
        other_seeds, other_missing, _ = demo_seeds(resolve_model(other))
        trained, missing = trained | other_seeds, sorted(set(missing) | set(other_missing))
    if missing:
        print(f"warning: demonstration files not here, their layouts are not checked: {missing}", file=sys.stderr)
    used = {layout_seed(seed, i, 0) for seed in seeds for s in suites for i in range(len(s.tasks))}
    overlap = len(trained & used)
    if overlap:
        raise SystemExit(f"{overlap} evaluation layouts are demonstration layouts of the models; pick other seeds")
    domain = TabletopDomain.with_skills()
    cells: dict[str, Any] = {}
    figures: dict[str, Any] = {
        "quick": args.quick,
        "seeds": seeds,
        "model": str(model_path),
        **({"candidate": str(resolve_model(args.candidate))} if args.candidate else {}),
        **({"candidate_params": candidate_overrides} if args.candidate_set else {}),
        "decode": args.decode,
        "vla_params": overrides,
    }
    t0 = time.perf_counter()
    runs = [(name, name) for name in args.planners]
    if other:  # the same planner with the second model, on the same tasks and layouts: a paired comparison
        runs.insert(runs.index(("vla", "vla")) + 1 if ("vla", "vla") in runs else 0, (other_name, "vla"))
    successes: dict[str, dict[tuple, bool]] = {}
    for name, kind in runs:
        model = other if name == other_name else args.model
        given = candidate_overrides if name == "vla_candidate" else overrides
        registered, params = planner_arguments(kind, model, args.threads, args.decode, given)
        if args.llm_cache and kind == "llm_goals":
            params["cache_dir"] = args.llm_cache
        planner = make_planner(registered, **params)
        if name == "vla":
            figures["latency"] = latency(planner, 5 if args.quick else args.latency_n, args.backends[0])
            print(f"vla latency: {json.dumps(figures['latency'])}", flush=True)
        for backend in args.backends:
            rows: list[dict[str, Any]] = []
            kinds: Counter = Counter()
            for suite in suites:
                suite_rows, _ = run_tabletop_suite(
                    planner,
                    suite,
                    domain,
                    backend=backend,
                    seeds=tuple(seeds),
                    layouts=1,
                    out_dir=args.out / f"{name}_{suite.name}_{backend}",
                    progress=False,
                )
                rows += suite_rows
                kinds += failure_kinds(args.out / f"{name}_{suite.name}_{backend}", suite)
            figures[f"failures/{name}/{backend}"] = dict(kinds.most_common())
            print(f"{name:>8} {backend:>8} failures: {json.dumps(dict(kinds.most_common()))}", flush=True)
            successes[f"{name}/{backend}"] = {(r["suite"], r["seed"], r["episode"]): r["success"] for r in rows}
            summary = summarise(rows, wilson)
            for category in ["all", *summary["categories"]]:
                c = summary if category == "all" else summary["categories"][category]
                cells[f"{name}/{backend}/{category}"] = {
                    "episodes": c["episodes"],
                    "success_rate": round(c["success_rate"], 4),
                    "success_ci95": [round(v, 4) for v in c["success_ci95"]],
                    "failure_reasons": c["failure_reasons"],
                }
                lo, hi = c["success_ci95"]
                print(
                    f"{name:>8} {backend:>8} {category:>10}: {c['success_rate']:.0%} [{lo:.0%}, {hi:.0%}] "
                    f"of {c['episodes']}  {c['failure_reasons']}",
                    flush=True,
                )
    if other and "vla" in args.planners:
        key, names = ("rl", ("imitation", "rl")) if args.rl_model else ("candidate", ("model", "candidate"))
        for be in args.backends:
            a, b = successes[f"vla/{be}"], successes[f"{other_name}/{be}"]
            gain = cells[f"{other_name}/{be}/all"]["success_rate"] - cells[f"vla/{be}/all"]["success_rate"]
            figures[f"{key}_gain_points_{be}"] = round(100 * gain, 1)
            figures[f"{key}_paired_{be}"] = paired(a, b, names)
    for ours in [n for n, _ in runs if n in ("vla", other_name)]:  # each VLA against each other planner, paired
        for theirs in [p for p in args.planners if p not in ("vla", "symbolic")]:
            for be in args.backends:
                a, b = successes[f"{theirs}/{be}"], successes[f"{ours}/{be}"]
                figures[f"{ours}_vs_{theirs}_paired_{be}"] = paired(a, b, (theirs, ours))
    if "vla" in args.planners and len(args.backends) > 1:
        # from the simulator the demonstrations were rendered in to the other (the first two --backends when the
        # files are not here to say; the figures name which way it was taken)
        seen = [be for be in args.backends if be in rendered]
        source = seen[0] if len(rendered) == 1 and seen else args.backends[0]
        target = next(be for be in args.backends if be != source)
        a, b = (cells[f"vla/{be}/all"]["success_rate"] for be in (source, target))
        figures["sim2sim_drop_points"] = round(100 * (a - b), 1)
        figures["sim2sim"] = f"{source} -> {target}" + ("" if seen else " (the demonstrations' simulator unknown)")
    if "vla" in args.planners and "symbolic" in args.planners:
        be = args.backends[0]
        figures["vla_over_oracle"] = round(
            cells[f"vla/{be}/all"]["success_rate"] / max(1e-9, cells[f"symbolic/{be}/all"]["success_rate"]), 3
        )
    figures.update(
        layouts_overlapping_demos=overlap,
        demo_files_not_checked=missing,
        wall_time_s=round(time.perf_counter() - t0, 1),
        cells=cells,
    )
    if not args.no_record:
        keys = [k for k in cells if k.endswith("/all")]
        show = []
        for k in keys:
            lo, hi = cells[k]["success_ci95"]
            show.append(f"{k}: {cells[k]['success_rate']:.0%} [{lo:.0%}, {hi:.0%}] n={cells[k]['episodes']}")
        lat = figures.get("latency", {})
        record(
            "vla",
            figures,
            [
                "<br>".join(show),
                f"{lat.get('plan_ms_p50')} / {lat.get('plan_ms_p95')} ms (camera {lat.get('camera_ms_p50')} ms; "
                f"words {lat.get('text_ms_p50')} ms once per instruction)",
                f"{figures['sim2sim_drop_points']} ({figures['sim2sim']})" if "sim2sim" in figures else "",
                "<br>".join(
                    paired_cell(figures, be)
                    for be in args.backends
                    if f"rl_gain_points_{be}" in figures or f"candidate_gain_points_{be}" in figures
                ),
                f"{figures['wall_time_s']:.0f} s",
            ],
            [
                "planner/simulator: success on the 66 test instructions (95 % Wilson)",
                "VLA plan p50 / p95",
                "sim-to-sim drop (points)",
                "RL gain (points; paired episodes)",
                "wall time",
            ],
        )
    emit(figures)


if __name__ == "__main__":
    main()
