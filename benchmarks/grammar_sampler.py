"""Grammar-constrained greedy decoding: the backend's grammar-first sampler against llama-cpp-python's chain.

The llama_cpp backend decodes greedily under the answer's grammar by checking the grammar on the best token first
(``llm_planner.llm.llama_cpp_backend.GrammarFirstGreedy``); llama-cpp-python's own sampler chain filters the whole
vocabulary at every step. Both planners are loaded side by side (same model, adapter and settings as
benchmarks/posttrain.py) and read the same instructions (the 64 hand-written ``apartment_language`` and
``house_language`` ones, the test split), alternating which goes first per instruction, so the machine's drift
falls on both. Reports each one's latency median / p95, the paired ratio (chain / grammar-first, per
instruction) and how many answers are identical (all of them, if the sampler is right).

    python benchmarks/grammar_sampler.py [--model gemma3|smollm2] [--adapter A.gguf | --no-adapter] [--threads 2]
                                         [--quick] [--no-record]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import types
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import emit, machine, record
from benchmarks.posttrain import MODEL_NAMES, test_instructions
from llm_planner.planners.llm import LLMPlanner
from llm_planner.posttrain.reward import Gold
from llm_planner.posttrain.train import PLANNER_PARAMS
from sim.navigation.world import load_world

DEFAULT_ADAPTER = "llm_planner/adapters/gemma3_sft/adapter.gguf"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=sorted(MODEL_NAMES), default="gemma3")
    parser.add_argument("--adapter", default=DEFAULT_ADAPTER, help="a GGUF LoRA adapter of --model")
    parser.add_argument("--no-adapter", action="store_true", help="the base model with the default planner")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="8 instructions")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    from llama_cpp import Llama

    def planner() -> LLMPlanner:
        backend = {"n_threads": args.threads, "model": args.model}
        if args.no_adapter:
            return LLMPlanner(cache=False, backend_params=backend)
        if not Path(args.adapter).is_file():
            parser.error(f"--adapter {args.adapter}: no such file (or --no-adapter)")
        return LLMPlanner(cache=False, backend_params={**backend, "lora_path": args.adapter}, **PLANNER_PARAMS)

    planners = {"grammar_first": planner(), "chain": planner()}
    llm = planners["chain"].backend._llm
    llm._init_sampler = types.MethodType(Llama._init_sampler, llm)  # llama-cpp-python's own sampler chain
    items = test_instructions()
    if args.quick:
        items = items[:: len(items) // 8][:8]
    worlds: dict[str, object] = {}
    latency: dict[str, list[float]] = {name: [] for name in planners}
    same = 0
    for k, item in enumerate(items):
        world = worlds.setdefault(item.map, load_world(item.map))
        xy = Gold.from_columns(item.map, item.start, item.goals, item.avoid).start_pose(world)
        answers = {}
        for name in sorted(planners, reverse=k % 2 == 1):
            t0 = time.perf_counter()
            answer = planners[name].interpret(item.text, world, item.start_room, robot_xy=(xy.x, xy.y))
            latency[name].append(time.perf_counter() - t0)
            answers[name] = answer.model_dump_json()
        same += answers["grammar_first"] == answers["chain"]
        fast, chain = latency["grammar_first"][-1], latency["chain"][-1]
        print(f"[{k + 1}/{len(items)}] {fast:.2f} s vs {chain:.2f} s  {item.text}", flush=True)
    ratios = [c / f for f, c in zip(latency["grammar_first"], latency["chain"], strict=True)]
    figures = {
        "model": args.model,
        "adapter": None if args.no_adapter else args.adapter,
        "threads": args.threads,
        "instructions": len(items),
        "identical_answers": same,
        "machine": machine(),
        "quick": args.quick,
        **{f"{n}_median_s": round(statistics.median(v), 3) for n, v in latency.items()},
        **{f"{n}_p95_s": round(float(np.percentile(v, 95)), 3) for n, v in latency.items()},
        "paired_ratio_median": round(statistics.median(ratios), 2),
    }
    if not (args.quick or args.no_record):
        planner_name = f"{MODEL_NAMES[args.model]}" + ("" if args.no_adapter else f" + {Path(args.adapter).name}")
        record(
            "grammar_sampler",
            figures,
            [
                planner_name,
                f"{args.threads}",
                f"{len(items)}",
                f"{figures['grammar_first_median_s']} / {figures['grammar_first_p95_s']} s",
                f"{figures['chain_median_s']} / {figures['chain_p95_s']} s",
                f"**{figures['paired_ratio_median']}x**",
                f"{same} of {len(items)}",
            ],
            ["planner", "threads", "instructions", "grammar-first median / p95", "chain median / p95",
             "paired ratio (chain / grammar-first)", "identical answers"],
        )  # fmt: skip
    emit(figures)


if __name__ == "__main__":
    main()
