"""What a GGUF LoRA adapter costs the embedded planner: llama.cpp time with and without it (docs/posttrain.md).

The same work for both: a ~350-token chat prompt evaluated in full (no KV prefix reused) and then 20
answer tokens decoded one by one (a fixed text, so that an adapter that stops early is not faster for it).
The two models alternate run by run so that both see the same machine load; the paired ratios say what the
adapter adds even on a loaded machine.

    python benchmarks/lora_latency.py runs/posttrain/<time>/adapter.gguf [--runs 9] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from llm_planner.llm.llama_cpp_backend import default_model_path
from sim.navigation.world import load_world


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("adapter", help="a GGUF LoRA adapter (python -m llm_planner.posttrain.export)")
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    from llama_cpp import Llama

    world = load_world("apartment")
    places = ", ".join([r.name for r in world.rooms] + [lm.name for lm in world.landmarks])
    system = (
        "You are the planner of a home robot. Read the user's instruction and answer with the places to visit, "
        f"in order, and the rooms to avoid. The places are: {places}. "
    ) * 4
    prompt = (
        f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\nTake me to the fridge, then the sofa, "
        "but stay out of the bedroom.<|im_end|>\n<|im_start|>assistant\n"
    )
    answer = ' {"targets": ["fridge", "sofa"], "avoid": ["bedroom"]} and then I wait there.'
    common = {"n_ctx": 1024, "n_threads": args.threads, "n_threads_batch": args.threads, "verbose": False}
    models = {"base": Llama(str(default_model_path()), **common)}
    models["adapter"] = Llama(str(default_model_path()), lora_path=args.adapter, **common)
    prompt_ids = models["base"].tokenize(prompt.encode(), add_bos=False, special=True)
    answer_ids = models["base"].tokenize(answer.encode(), add_bos=False)[:20]
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in models}
    for _ in range(args.runs):
        for name, llm in models.items():
            llm.reset()
            t0 = time.perf_counter()
            llm.eval(prompt_ids)
            t1 = time.perf_counter()
            for token in answer_ids:
                llm.eval([token])
            times[name].append((t1 - t0, time.perf_counter() - t1))
    size = Path(args.adapter).stat().st_size / 1e6
    print(f"adapter {args.adapter} ({size:.1f} MB); {len(prompt_ids)} prompt + {len(answer_ids)} answer tokens, ")
    print(f"{args.threads} threads, {args.runs} runs each (median; min)")
    for name, runs in times.items():
        prompt_s, answer_s = zip(*runs, strict=True)
        total = [p + a for p, a in runs]
        print(
            f"{name:8s} prompt {statistics.median(prompt_s):.3f} s; answer {statistics.median(answer_s):.3f} s; "
            f"total {statistics.median(total):.3f} s (min {min(total):.3f})"
        )
    ratios = [sum(a) / sum(b) for a, b in zip(times["adapter"], times["base"], strict=True)]
    print(f"adapter / base, paired by run: median {statistics.median(ratios):.2f} (min {min(ratios):.2f})")


if __name__ == "__main__":
    main()
