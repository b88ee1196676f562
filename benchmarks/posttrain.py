"""The LLM planner scored with the post-training reward: before and after post-training (issue 14).

Instructions: the generated val or test_gen split (seed 0; templates and vocabulary that a training split
never sees; llm_planner/posttrain/instructions.py), or ``--split test``: the 64 hand-written instructions of
the ``apartment_language`` and ``house_language`` suites (never in training data). The planner is the untrained
``llm_goals`` (``planner=llm_goals_untrained``: reading=spans, retrieved examples), or with ``--adapter FILE.gguf``
the post-trained one (the shipped default ``planner=llm_goals``: ``--model gemma3 --adapter
llm_planner/adapters/gemma3_sft/adapter.gguf``): the
same embedded model with the GGUF LoRA adapter, in the settings it was trained for (names reading, no worked
examples, the robot's place said; ``llm_planner.posttrain.train.PLANNER_PARAMS``). It reads each instruction
through the planner API (``LLMPlanner.interpret``, as benchmarks/llm_planner.py; cache off) and scores the answer with
llm_planner/posttrain/reward.py (the planned route judged by the task's own check). A planner that raises
(no valid answer after its re-asks) scores 0. Reports per category: success rate (Wilson 95 % interval),
mean reward, exact-match rate, latency median / p95, and the wall time. Rows are written as they come
(``rows.jsonl``), so an interrupted run keeps what it measured.

``--model gemma3`` runs the second shipped base (Gemma 3 270M; an ``--adapter`` must be one trained on it:
``hrl-posttrain base=gemma3``).

``--domain tabletop`` asks the same planner the tabletop generator's val split (templates and words its train split
never has; scenes blocks, sort and clear, each instruction in a seeded layout) as the arm planner asks it (the
scene, its worked examples, the grammar), and scores the plan with post-training's tabletop reward: the suites'
acceptance run on a symbolic table (every gold relation holds at the end, nothing else moved). No simulator and
no skills: the reading alone (the 66 hand-written tabletop instructions, end to end: benchmarks/tabletop_language.py).

``--execution both`` also drives each navigation answer in MuJoCo with the shipped policy (the reward's
``execution="mujoco"``: the plan through the hierarchy, the same check on the driven trajectory; seconds an
answer) and reports how the two rewards agree, answer by answer (``summary["agreement"]``: the four cells, the
share that agree, Cohen's kappa).

    python benchmarks/posttrain.py [--n 100] [--seed 0] [--split val|test_gen|test] [--model smollm2|gemma3]
                                   [--adapter A.gguf] [--domain navigation|tabletop] [--execution route|both]
                                   [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import emit, machine, parse_sets, record
from hrl.hierarchy_eval import wilson
from hrl.tasks import load_suite
from llm_planner.llm.llama_cpp_backend import SHIPPED_MODELS
from llm_planner.plan import PlanError
from llm_planner.planners.graph import room_name
from llm_planner.planners.llm import LLMGoalsPlanner
from llm_planner.posttrain.instructions import CATEGORIES, TEST_SUITES, Instruction, generate, generate_composed
from llm_planner.posttrain.reward import Gold, MujocoExecution, execution_reward
from llm_planner.posttrain.tabletop_sft import TabletopItem, scene_view, tabletop_items, tabletop_reward
from llm_planner.posttrain.train import TRAIN_READINGS, planner_params
from sim.navigation.world import load_world

MODEL_NAMES = {"smollm2": "SmolLM2-135M", "gemma3": "Gemma 3 270M"}


def test_instructions() -> list[Instruction]:
    """The 64 instructions of the language suites (the test set) as generator items (start, goals, avoid)."""
    items = []
    for suite_name in TEST_SUITES:
        suite = load_suite(suite_name)
        world = load_world(suite.map)
        for k, ep in enumerate(suite.episodes):
            start = ep.start if isinstance(ep.start, str) else [float(v) for v in ep.start]
            pose = world.starts[start] if isinstance(start, str) else start
            room = room_name(world, (pose.x, pose.y) if isinstance(start, str) else (pose[0], pose[1]))
            items.append(Instruction(f"{suite_name}-{k}", suite.map, "test", ep.category, suite_name, ep.text, start,
                                     room, tuple(ep.goals), tuple(ep.avoid)))  # fmt: skip
    return items


def score(
    planner: LLMGoalsPlanner, items: list[Any], rows_path: Path, driven: MujocoExecution | None = None
) -> list[dict[str, Any]]:
    """Navigation: each instruction through ``planner.interpret``, the answer judged by the route reward; with
    ``driven`` (``--execution both``) also by driving it in MuJoCo (``mujoco_reward``, ``mujoco_outcome``)."""
    worlds = {m: load_world(m) for m in {i.map for i in items}}

    def gold(item: Instruction) -> Gold:
        return Gold.from_columns(item.map, item.start, item.goals, item.avoid)

    def ask(item: Instruction) -> str:
        xy = gold(item).start_pose(worlds[item.map])
        return planner.interpret(item.text, worlds[item.map], item.start_room, robot_xy=(xy.x, xy.y)).model_dump_json()

    second = None
    if driven is not None:
        second = lambda item, text: execution_reward(text, gold(item), worlds[item.map], execution=driven)  # noqa: E731
    return _scored(planner, items, rows_path, ask,
                   judge=lambda item, text: execution_reward(text, gold(item), worlds[item.map]),
                   ident=lambda k, item: item.id, gold=lambda item: item.answer(), second=second)  # fmt: skip


def score_tabletop_plans(planner: LLMGoalsPlanner, items: list[Any], rows_path: Path) -> list[dict[str, Any]]:
    """``--domain tabletop``: each generated tabletop instruction asked as the arm planner asks it (its scene in
    the item's layout, the worked examples, the grammar), the plan scored by ``tabletop_reward`` (the suites'
    acceptance run on a symbolic table; no simulator, no skills)."""

    def ask(item: TabletopItem) -> str:
        view = scene_view(item.scene, item.layout_seed)
        return planner.tabletop.ask(planner.tabletop.messages(item.text, view), view).to_json()

    return _scored(planner, items, rows_path, ask, judge=lambda item, text: tabletop_reward(text, item),
                   ident=lambda k, item: f"{item.scene}-{k}",
                   gold=lambda item: [g.text() for g in item.goals])  # fmt: skip


def _scored(planner: LLMGoalsPlanner, items: list[Any], rows_path: Path, ask: Any, judge: Any, ident: Any,
            gold: Any, second: Any = None) -> list[dict[str, Any]]:  # fmt: skip
    """One row per item: ``ask(item)`` (the answer's JSON; a PlanError scores 0) judged by ``judge(item, text)``
    (and ``second(item, text)``, as ``mujoco_*``), written to ``rows_path`` as it comes."""
    rows = []
    with open(rows_path, "w", encoding="utf-8") as f:
        for k, item in enumerate(items):
            t0 = time.perf_counter()
            try:
                text, error = ask(item), ""
            except PlanError as err:
                text, error = "", str(err)
            latency = time.perf_counter() - t0
            if error:
                value, outcome, detail, exact = 0.0, "planner_error", error, False
            else:
                r = judge(item, text)
                value, outcome, detail, exact = r.value, r.outcome.value, r.detail, r.exact
            row = {"id": ident(k, item), "category": item.category, "text": item.text, "gold": gold(item),
                   "answer": text, "reward": value, "outcome": outcome, "exact": exact, "detail": detail,
                   "latency_s": round(latency, 3), "tokens": planner.last_usage.get("tokens", 0)}  # fmt: skip
            if second is not None:
                driven = second(item, text) if not error else None
                row["mujoco_reward"] = driven.value if driven else 0.0
                row["mujoco_outcome"] = driven.outcome.value if driven else "planner_error"
                row["mujoco_detail"] = driven.detail if driven else error
            rows.append(row)
            f.write(json.dumps(row) + "\n")
            f.flush()
            print(f"[{k + 1}/{len(items)}] {item.category:>10} {value:+.1f} {outcome:<20} {item.text}", flush=True)
    return rows


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def block(rs: list[dict[str, Any]]) -> dict[str, Any]:
        k = sum(r["reward"] == 1.0 for r in rs)
        lat = sorted(r["latency_s"] for r in rs)
        return {
            "n": len(rs),
            "success": k,
            "success_rate": round(k / len(rs), 3),
            "wilson95": [round(v, 3) for v in wilson(k, len(rs))],
            "mean_reward": round(statistics.mean(r["reward"] for r in rs), 3),
            "exact_rate": round(sum(r["exact"] for r in rs) / len(rs), 3),
            "latency_median_s": round(statistics.median(lat), 2),
            "latency_p95_s": round(lat[min(len(lat) - 1, round(0.95 * (len(lat) - 1)))], 2),
        }

    out = {"all": block(rows)}
    for c in [*CATEGORIES, *sorted({r["category"] for r in rows} - set(CATEGORIES))]:
        rs = [r for r in rows if r["category"] == c]
        if rs:
            out[c] = block(rs)
    out["outcomes"] = {o: sum(r["outcome"] == o for r in rows) for o in sorted({r["outcome"] for r in rows})}
    if rows and "mujoco_reward" in rows[0]:
        out["agreement"] = agreement(rows)
    return out


def agreement(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """How the route reward (the planned route judged) and the MuJoCo reward (the plan driven by the shipped
    policy, the same check on the driven trajectory) agree on success, answer by answer: the four cells, the
    share that agree (Wilson 95 %) and Cohen's kappa."""
    cells = {"both": 0, "route_only": 0, "mujoco_only": 0, "neither": 0}
    for r in rows:
        route, driven = r["reward"] == 1.0, r["mujoco_reward"] == 1.0
        cells["both" if route and driven else "route_only" if route else "mujoco_only" if driven else "neither"] += 1
    n = len(rows)
    agree = cells["both"] + cells["neither"]
    p_route = (cells["both"] + cells["route_only"]) / n
    p_driven = (cells["both"] + cells["mujoco_only"]) / n
    chance = p_route * p_driven + (1 - p_route) * (1 - p_driven)
    kappa = (agree / n - chance) / (1 - chance) if chance < 1 else 1.0
    return cells | {
        "agree_rate": round(agree / n, 3),
        "wilson95": [round(v, 3) for v in wilson(agree, n)],
        "cohen_kappa": round(kappa, 3),
        "route_success_rate": round(p_route, 3),
        "mujoco_success_rate": round(p_driven, 3),
    }


def split_label(split: str, n: int) -> str:
    """The split as RESULTS.md names it; a generated one with its generator's template count, since adding
    templates changes the drawn instructions (val of 62 templates and val of 99 are different sets; since
    ``instructions.DEALT`` old templates keep their split, but new ones join the pool)."""
    if split == "test":
        return f"test ({n})"
    if split == "tabletop_val":
        return f"tabletop val ({n}; generated, plan level)"
    if split == "composed":
        return f"composed ({n}; train family, not held out)"
    from llm_planner.posttrain.instructions import TEMPLATES

    return f"{split} ({n}; {sum(map(len, TEMPLATES.values()))}-template generator)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100, help="instructions (shared equally by the maps)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--split",
        default="val",
        choices=["val", "test_gen", "test", "composed"],
        help="composed: the generator's composed *train* instructions (hrl-posttrain composed_train=N): what a "
        "model fails on there is what SFT or GRPO on them can teach; not a held-out figure",
    )
    parser.add_argument(
        "--domain",
        default="navigation",
        choices=["navigation", "tabletop"],
        help="tabletop: the tabletop generator's val split (scenes blocks, sort, clear), asked as the arm planner "
        "asks, scored at plan level (the 66 hand-written tabletop instructions: benchmarks/tabletop_language.py)",
    )
    parser.add_argument("--adapter", type=Path, default=None, help="a GGUF LoRA adapter: the post-trained planner")
    parser.add_argument(
        "--model",
        default="smollm2",
        choices=list(SHIPPED_MODELS),
        help="the shipped base model llama.cpp runs (the adapter's base)",
    )
    parser.add_argument(
        "--reading",
        default="names",
        choices=list(TRAIN_READINGS),
        help="the answer the adapter was trained to write (its run's result.json, planner_params)",
    )
    parser.add_argument(
        "--set",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="other llm_goals planner parameters with --adapter, e.g. self_consistency=5 (YAML values)",
    )
    parser.add_argument(
        "--execution",
        default="route",
        choices=["route", "both"],
        help="both: also drive each answer in MuJoCo with the shipped policy (seconds an answer) and report how "
        "the two rewards agree (navigation only)",
    )
    parser.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: all cores)")
    parser.add_argument("--quick", action="store_true", help="10 instructions (a smoke run)")
    parser.add_argument("--no-record", action="store_true", help="do not append the run to benchmarks/RESULTS.md")
    parser.add_argument("--out", type=Path, default=Path("runs/bench/posttrain"))
    args = parser.parse_args()
    if args.set and not args.adapter:
        parser.error("--set sets the trained planner's parameters: give --adapter too")
    if args.domain == "tabletop" and args.execution != "route":
        parser.error("--execution both drives navigation answers; tabletop plans are scored on the symbolic table")
    if args.domain == "tabletop" and args.split != "val":
        parser.error(
            f"--domain tabletop --split {args.split}: the tabletop generator has train and val only; its test is the "
            "66 hand-written instructions, run end to end by benchmarks/tabletop_language.py"
        )
    t0 = time.perf_counter()
    if args.domain == "tabletop":
        items = tabletop_items(args.n, "val", args.seed)
    elif args.split == "test":
        items = test_instructions()
    elif args.split == "composed":
        items = generate_composed(n=args.n, seed=args.seed)
    else:
        items = generate(n=args.n, n_val=args.n, n_test_gen=args.n, seed=args.seed).splits[args.split]
    if args.quick:
        items = items[:: max(1, len(items) // 10)][:10]
    args.out.mkdir(parents=True, exist_ok=True)
    if args.adapter:
        if not args.adapter.is_file():
            parser.error(f"--adapter {args.adapter}: no such file (export one: python -m llm_planner.posttrain.export)")
        backend = {"lora_path": str(args.adapter), "n_threads": args.threads, "model": args.model}
        params = {**planner_params(args.reading), **parse_sets(parser, args.set)}
        try:
            planner = LLMGoalsPlanner(cache=False, backend_params=backend, **params)
        except (TypeError, ValueError) as err:
            parser.error(f"--set {' '.join(args.set)}: {err}")
        settings = ", ".join(f"{k}={v}" for k, v in params.items())
        name = f"llm_goals {MODEL_NAMES[args.model]} + adapter {args.adapter.name} ({settings})"
    else:
        # the untrained llm_goals planner (planner=llm_goals_untrained): embedded model, greedy, reading=spans
        planner = LLMGoalsPlanner(cache=False, backend_params={"n_threads": args.threads, "model": args.model})
        name = f"llm_goals (untrained: llama_cpp {MODEL_NAMES[args.model]}, reading=spans, greedy, grammar)"
    if args.domain == "tabletop":
        rows = score_tabletop_plans(planner, items, args.out / "rows.jsonl")
    else:
        driven = MujocoExecution() if args.execution == "both" else None
        rows = score(planner, items, args.out / "rows.jsonl", driven)
    split = "tabletop_val" if args.domain == "tabletop" else args.split
    summary = summarise(rows)
    figures = {
        "planner": name,
        "split": split,
        "model": args.model,
        "threads": args.threads,
        "seed": args.seed,
        "execution": args.execution,
        "instructions": len(rows),
        "wall_time_s": round(time.perf_counter() - t0, 1),
        "machine": machine(),
        "summary": summary,
    }
    (args.out / "summary.json").write_text(json.dumps(figures, indent=2) + "\n")
    if not (args.quick or args.no_record):
        a = summary["all"]
        cats = ", ".join(
            f"{c} {v['success_rate']:.0%}" for c, v in summary.items() if c not in ("all", "outcomes", "agreement")
        )
        if "agreement" in summary:
            g = summary["agreement"]
            cats += (
                f"; driven in MuJoCo: {g['mujoco_success_rate']:.0%}, the rewards agree on {g['agree_rate']:.0%} "
                f"(both {g['both']}, route only {g['route_only']}, MuJoCo only {g['mujoco_only']}, neither "
                f"{g['neither']}; kappa {g['cohen_kappa']})"
            )
        record(
            "posttrain",
            figures,
            [name, split_label(split, len(rows)), f"**{a['success_rate']:.0%}** ({a['wilson95'][0]:.0%}-"
             f"{a['wilson95'][1]:.0%})", f"{a['exact_rate']:.0%}", cats,
             f"{a['latency_median_s']} / {a['latency_p95_s']} s"],
            ["planner", "split (n)", "success (Wilson 95 %)", "exact", "by category", "latency median / p95"],
        )  # fmt: skip
    emit(figures)


if __name__ == "__main__":
    main()
