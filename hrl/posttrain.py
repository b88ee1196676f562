"""``hrl-posttrain``: post-train the planner's language model (Hydra config: configs/posttrain.yaml).

    hrl-posttrain                                              # stage=sft on generated instructions
    hrl-posttrain stage=grpo init_adapter=runs/posttrain/<sft run>/adapter max_steps=30
    hrl-posttrain resume=runs/posttrain/<time>                 # continue from the last checkpoint
    hrl-posttrain resume=runs/posttrain/<time> max_steps=200   # ... and train longer
    accelerate launch --multi_gpu --num_processes 4 -m hrl.posttrain engine=trl hydra.run.dir=...   # on GPUs

Writes ``runs/posttrain/<time>/``: ``adapter/`` (the LoRA adapter), ``checkpoints/``, ``train_log.csv``,
``val_log.csv``, ``curves.png``, ``result.json``. The library part is :mod:`llm_planner.posttrain.train`.
"""

from __future__ import annotations

import sys
from dataclasses import fields
from pathlib import Path
from typing import NoReturn

from hrl.cli import (
    check_launched_run_dir,
    launched_processes,
    process_rank,
    resume_values,
    run_hydra_app,
    sigterm_as_keyboard_interrupt,
    typed_config,
)
from hrl.cli import fail as cli_fail

#: Exit status of a run stopped by Ctrl-C or SIGTERM (its last checkpoint stays; resume= continues).
INTERRUPTED = 130


def fail(message: str) -> NoReturn:
    cli_fail("hrl-posttrain", message)


def register_schema() -> None:
    from hydra.core.config_store import ConfigStore

    from llm_planner.posttrain.train import PosttrainConfig

    ConfigStore.instance().store(name="posttrain_schema", node=PosttrainConfig)


def _run(config, run_dir: Path) -> int:
    """One stage in this process, with what only a command-line process may set (torch threads, SIGTERM as
    Ctrl-C)."""
    import torch

    from llm_planner.posttrain.train import run

    try:
        config.check()
    except ValueError as err:
        fail(str(err))
    if config.threads:
        torch.set_num_threads(config.threads)
    try:
        processes, main = launched_processes(), process_rank() == 0  # accelerate launch / torchrun
    except ValueError as err:
        fail(str(err))
    try:
        with sigterm_as_keyboard_interrupt():
            result = run(config, run_dir)
    except KeyboardInterrupt:
        if main:
            again = "hrl-posttrain"
            if processes > 1:
                again = f"accelerate launch --multi_gpu --num_processes {processes} -m hrl.posttrain"
            print(f"[hrl-posttrain] interrupted; continue with: {again} resume={run_dir}", file=sys.stderr)
        raise SystemExit(INTERRUPTED) from None
    except ValueError as err:
        fail(str(err))
    if not main:
        return 0
    val = result.val or {}
    said = f"val success {float(val['success']):.0%}" if "success" in val else "no validation (eval_n=0)"
    print(
        f"[hrl-posttrain] {config.stage} done: {result.steps} steps in {result.wall_time_s / 60:.1f} min, "
        f"{said} -> {result.adapter}"
    )
    return 0


def _task(cfg) -> None:
    from hydra.core.hydra_config import HydraConfig

    check_launched_run_dir("hrl-posttrain")
    _run(typed_config(cfg, "hrl-posttrain"), Path(HydraConfig.get().runtime.output_dir))


def resume(run_dir: Path, overrides: list[str]) -> int:
    """Continue a run with its own saved config (config.json); only ``max_steps`` may change."""
    from llm_planner.posttrain.train import PosttrainConfig

    known = {f.name for f in fields(PosttrainConfig)}
    return _run(
        PosttrainConfig(**resume_values(run_dir, "hrl-posttrain", known, overrides, lambda v: "max_steps")), run_dir
    )


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    resumes = [a for a in args if a.startswith("resume=")]
    if resumes:
        return resume(Path(resumes[0].split("=", 1)[1]), [a for a in args if not a.startswith("resume=")])
    register_schema()
    run_hydra_app(_task, "posttrain", args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
