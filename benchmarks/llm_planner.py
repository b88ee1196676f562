"""The LLM planners on the language instruction suites (apartment_language + house_language, 64 tasks).

1. Plan accuracy (no execution): the embedded model (SmolLM2-135M, llama.cpp, 2 cores) reads every
   instruction; an answer is correct when its ordered targets and its rooms to avoid equal the ground
   truth (llm_goals), or when its route is valid on the map, visits the goals in order and enters no
   forbidden room (llm_route). Measured as a ladder, one engineering step at a time:
     plain      names, the bank's first 4 examples, free decoding (parsed, re-asked when invalid)
     +grammar   decoding constrained to the answer's JSON schema (scene names as enums)
     +retrieval the 4 most similar worked examples (TF-IDF), as LLM-Planner
     +spans     the model copies the instruction's phrases (enum of its n-grams); names and aliases
                ground them, the model is asked which place a phrase means only when none is named
     +vote      self-consistency: 5 samples (greedy + 4 at T=0.7), the most frequent valid answer
   plus llm_route (grammar + retrieval). Latency and tokens per plan for each (cache off).
2. End to end with the shipped low-level policy in MuJoCo: oracle (ground-truth targets + graph),
   llm_goals and llm_route (default settings): success, steps, planning latency, tokens.
Target (issue 5): median planning latency of the embedded model <= 1.5 s on 2 cores.

    python benchmarks/llm_planner.py [--quick] [--no-record] [--out runs/bench/llm_planner]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import emit, record
from hrl import DEFAULT_POLICY
from hrl.hierarchy_eval import markdown_table, run_suite
from hrl.policy import GoalPolicy
from hrl.tasks import load_suite
from llm_planner.llm.answers import GoalsAnswer, route_rooms_and_targets
from llm_planner.llm.backend import make_backend
from llm_planner.plan import PlanError
from llm_planner.planners.graph import room_name
from llm_planner.planners.llm import LLMPlanner
from sim.navigation.world import load_world

SUITES = ["apartment_language", "house_language"]
LADDER: dict[str, dict[str, Any]] = {
    "plain": {"mode": "llm_goals", "reading": "names", "retrieval": False, "constrained": False},
    "+grammar": {"mode": "llm_goals", "reading": "names", "retrieval": False},
    "+retrieval": {"mode": "llm_goals", "reading": "names"},
    "+spans": {"mode": "llm_goals", "reading": "spans"},
    "+vote": {"mode": "llm_goals", "reading": "spans", "self_consistency": 5},
    "llm_route": {"mode": "llm_route"},
}
DEFAULTS = {"llm_goals": "+spans", "llm_route": "llm_route"}


def is_subsequence(needle: list[str], hay: list[str]) -> bool:
    it = iter(hay)
    return all(any(h == n for h in it) for n in needle)


def correct(answer: Any, world: Any, start_xy: tuple[float, float], goals: tuple, avoid: tuple) -> bool:
    if isinstance(answer, GoalsAnswer):
        return tuple(answer.targets) == tuple(goals) and set(answer.avoid) == set(avoid)
    walked = route_rooms_and_targets(answer, world, start_xy)
    if walked is None:
        return False
    rooms, targets = walked
    return is_subsequence(list(goals), targets) and not set(rooms) & set(avoid)


def accuracy(config: dict[str, Any], backend: Any, cases: list[tuple]) -> dict[str, Any]:
    planner = LLMPlanner(backend=backend, cache=False, **config)
    rows = []
    for suite, category, world, start_xy, task in cases:
        t0 = time.perf_counter()
        try:
            answer = planner.interpret(task.text, world, room_name(world, start_xy))
            ok = correct(answer, world, start_xy, task.goals, task.avoid)
        except PlanError:
            ok = False
        rows.append(
            {"suite": suite, "category": category, "ok": ok, "latency_s": time.perf_counter() - t0,
             "tokens": planner.last_usage.get("tokens", 0)}
        )  # fmt: skip
    lat = sorted(r["latency_s"] for r in rows)
    cats = sorted({r["category"] for r in rows})
    return {
        "accuracy": sum(r["ok"] for r in rows) / len(rows),
        "correct": sum(r["ok"] for r in rows),
        "n": len(rows),
        "by_category": {c: _mean([r["ok"] for r in rows if r["category"] == c]) for c in cats},
        "latency_median_s": statistics.median(lat),
        "latency_p95_s": lat[min(len(lat) - 1, round(0.95 * (len(lat) - 1)))],
        "tokens_per_plan": _mean([r["tokens"] for r in rows]),
    }


def _mean(xs: list[float]) -> float:
    return float(sum(xs) / len(xs)) if xs else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every 4th instruction; ladder ends and end to end")
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument("--out", type=Path, default=Path("runs/bench/llm_planner"))
    args = parser.parse_args()
    t0 = time.perf_counter()
    suites = {name: load_suite(name) for name in SUITES}
    if args.quick:
        suites = {n: replace(s, episodes=s.episodes[::4]) for n, s in suites.items()}
    cases = []
    for name, suite in suites.items():
        world = load_world(suite.map)
        for (start, task), ep in zip(suite.tasks(), suite.episodes, strict=True):
            xy = (world.starts[start].x, world.starts[start].y) if isinstance(start, str) else tuple(start[:2])
            cases.append((name, ep.category, world, xy, task))
    backend = make_backend("llama_cpp")
    ladder = {k: v for k, v in LADDER.items() if not args.quick or k in ("plain", "+spans", "llm_route")}
    acc: dict[str, Any] = {}
    for step, config in ladder.items():
        acc[step] = accuracy(config, backend, cases)
        a = acc[step]
        print(
            f"{step:>11}: {a['correct']}/{a['n']} correct ({a['accuracy']:.0%}), latency median "
            f"{a['latency_median_s']:.2f} s p95 {a['latency_p95_s']:.2f} s, {a['tokens_per_plan']:.0f} tokens/plan",
            flush=True,
        )

    policy = GoalPolicy.load(DEFAULT_POLICY)
    e2e = []
    for planner, params in (("graph", {}), ("llm_goals", {}), ("llm_route", {})):
        for name, suite in suites.items():
            res = run_suite(
                planner, suite, policy, planner_params=params, out_dir=args.out / f"{planner}_{name}",
                video_episode=0, progress=False,
            )  # fmt: skip
            s = res.summary
            s["mean_tokens"] = _mean([r["planner_tokens"] for r in res.rows])
            s["planner"] = "oracle (graph)" if planner == "graph" else planner
            e2e.append(s)
            print(f"{s['planner']:>15} {name:>18}: success {s['success_rate']:.0%} of {s['episodes']}", flush=True)
    table = markdown_table(e2e)
    print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "table.md").write_text(table)

    def e2e_rate(planner: str) -> float:
        cells = [s for s in e2e if s["planner"] == planner]
        return sum(c["success_rate"] * c["episodes"] for c in cells) / sum(c["episodes"] for c in cells)

    default = acc["+spans"]
    figures = {
        "quick": args.quick,
        "instructions": len(cases),
        "wall_time_s": round(time.perf_counter() - t0, 1),
        "plan_accuracy": {k: round(v["accuracy"], 3) for k, v in acc.items()},
        "plan_accuracy_by_category": {k: v["by_category"] for k, v in acc.items()},
        "latency_median_s": {k: round(v["latency_median_s"], 3) for k, v in acc.items()},
        "latency_p95_s": {k: round(v["latency_p95_s"], 3) for k, v in acc.items()},
        "tokens_per_plan": {k: round(v["tokens_per_plan"], 1) for k, v in acc.items()},
        "e2e_success": {p: round(e2e_rate(p), 3) for p in ("oracle (graph)", "llm_goals", "llm_route")},
        "targets_met": {"embedded median latency <= 1.5 s": default["latency_median_s"] <= 1.5},
    }
    if not args.no_record:
        record(
            "llm_planner",
            figures,
            [
                "<br>".join(f"{k}: {v['correct']}/{v['n']} ({v['accuracy']:.0%})" for k, v in acc.items()),
                "<br>".join(
                    f"{k}: {v['latency_median_s']:.2f} / {v['latency_p95_s']:.2f} s, {v['tokens_per_plan']:.0f} tok"
                    for k, v in acc.items()
                ),
                "<br>".join(f"{p}: {r:.0%}" for p, r in figures["e2e_success"].items()),
                ", ".join(f"{k}: {'yes' if v else '**no**'}" for k, v in figures["targets_met"].items()),
            ],
            ["plan accuracy (ladder)", "latency median / p95, tokens per plan", "end-to-end success", "target"],
        )
    emit(figures)


if __name__ == "__main__":
    main()
