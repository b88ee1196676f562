"""The LLM planner scored with the post-training reward on generated instructions (issue 14's "before").

Generates the val split (seed 0; templates and vocabulary that a training split never sees) with
llm_planner/posttrain/instructions.py, has the planner read each instruction through the planner API
(``LLMPlanner.interpret``, as benchmarks/llm_planner.py; cache off) and scores the answer with
llm_planner/posttrain/reward.py (the planned route judged by the task's own check). A planner that raises
(no valid answer after its re-asks) scores 0. Reports per category: success rate (Wilson 95 % interval),
mean reward, exact-match rate, latency median / p95, and the wall time. Rows are written as they come
(``rows.jsonl``), so an interrupted run keeps what it measured.

    python benchmarks/posttrain.py [--n 100] [--seed 0] [--split val] [--out runs/bench/posttrain]
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

from benchmarks._common import emit, machine
from hrl.hierarchy_eval import wilson
from llm_planner.plan import PlanError
from llm_planner.planners.llm import LLMPlanner
from llm_planner.posttrain.instructions import CATEGORIES, generate
from llm_planner.posttrain.reward import Gold, execution_reward
from sim.world import load_world


def score(planner: LLMPlanner, items: list[Any], rows_path: Path) -> list[dict[str, Any]]:
    worlds = {m: load_world(m) for m in {i.map for i in items}}
    rows = []
    with open(rows_path, "w", encoding="utf-8") as f:
        for k, item in enumerate(items):
            world = worlds[item.map]
            gold = Gold.from_columns(item.map, item.start, item.goals, item.avoid)
            t0 = time.perf_counter()
            try:
                answer = planner.interpret(item.text, world, item.start_room)
                text, error = answer.model_dump_json(), ""
            except PlanError as err:
                text, error = "", str(err)
            latency = time.perf_counter() - t0
            if error:
                value, outcome, detail, exact = 0.0, "planner_error", error, False
            else:
                r = execution_reward(text, gold, world)
                value, outcome, detail, exact = r.value, r.outcome.value, r.detail, r.exact
            row = {"id": item.id, "category": item.category, "text": item.text, "gold": item.answer(),
                   "answer": text, "reward": value, "outcome": outcome, "exact": exact, "detail": detail,
                   "latency_s": round(latency, 3), "tokens": planner.last_usage.get("tokens", 0)}  # fmt: skip
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
    for c in CATEGORIES:
        rs = [r for r in rows if r["category"] == c]
        if rs:
            out[c] = block(rs)
    out["outcomes"] = {o: sum(r["outcome"] == o for r in rows) for o in sorted({r["outcome"] for r in rows})}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100, help="instructions (shared equally by the maps)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--split", default="val", choices=["val", "test_gen"])
    parser.add_argument("--out", type=Path, default=Path("runs/bench/posttrain"))
    args = parser.parse_args()
    t0 = time.perf_counter()
    dataset = generate(n=args.n, n_val=args.n, n_test_gen=args.n, seed=args.seed)
    items = dataset.splits[args.split]
    args.out.mkdir(parents=True, exist_ok=True)
    planner = LLMPlanner(cache=False)  # the default llm_goals planner: embedded model, greedy, reading=spans
    rows = score(planner, items, args.out / "rows.jsonl")
    summary = summarise(rows)
    figures = {
        "planner": "llm_goals (default: llama_cpp SmolLM2-135M, reading=spans, greedy, grammar)",
        "split": args.split,
        "seed": args.seed,
        "instructions": len(rows),
        "wall_time_s": round(time.perf_counter() - t0, 1),
        "machine": machine(),
        "summary": summary,
    }
    (args.out / "summary.json").write_text(json.dumps(figures, indent=2) + "\n")
    emit(figures)


if __name__ == "__main__":
    main()
