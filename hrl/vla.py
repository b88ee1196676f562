"""``hrl-vla``: demonstrations and imitation training of the VLA planner (Hydra config: configs/vla.yaml).

    hrl-vla stage=data split=train episodes=300            # oracle demonstrations -> <run dir>/train_mujoco.hdf5
    hrl-vla stage=data split=val episodes=40 seed=1        # unseen phrasings and layouts, for validation
    hrl-vla -m stage=data seed=0,1,2,3 hydra/launcher=joblib   # fan out over the Hydra launchers (joblib, Ray, Slurm)
    hrl-vla stage=bc 'train_data=[a.hdf5,b.hdf5]' 'val_data=[v.hdf5]' steps=3000
    hrl-vla stage=rl init_model=runs/vla/<bc time>/model.pt rl_steps=60   # RL from execution (hierarchy/vla/rl.py)
    hrl-vla stage=val init_model=runs/vla/<time>/model.pt episodes=60     # end-to-end success on unseen phrasings
    hrl-vla resume=runs/vla/<time>                          # continue a killed training run from its checkpoint
    hrl-vla stage=bc ... hydra.run.dir=runs/vla/mine        # name the run directory (out= is stage=data's file)
    accelerate launch --multi_gpu --num_processes 4 -m hrl.vla stage=bc ... device=auto hydra.run.dir=...
                                                            # data parallel on several GPUs (docs/vla.md)

``stage=bc`` writes ``runs/vla/<time>/``: ``model.pt`` (``planner=vla planner.params.model=<it>``),
``checkpoints/last.pt``, ``train_log.csv``, ``val_log.csv``, ``curves.png``, ``result.json``. The library is
:mod:`hierarchy.vla` (docs/vla.md).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, NoReturn

from hrl.cli import (
    check_launched_run_dir,
    launched_processes,
    resume_values,
    run_hydra_app,
    sigterm_as_keyboard_interrupt,
    typed_config,
)
from hrl.cli import fail as cli_fail

INTERRUPTED = 130


@dataclass
class VLAConfig:
    stage: str = "bc"  # data | bc | rl | val
    # stage=data
    scenes: list[str] = field(default_factory=lambda: ["blocks", "sort", "clear"])
    backend: str = "mujoco"
    episodes: int = 300
    split: str = "train"
    seed: int = 0
    image_size: int = 96
    out: str | None = None
    split_seed: int = 0  # the generator's split (stage=data, rl and val): which templates and words are val's
    # stage=bc
    train_data: list[str] = field(default_factory=list)
    val_data: list[str] = field(default_factory=list)
    steps: int = 3000
    batch_size: int = 32
    learning_rate: float = 1e-3
    eval_every: int = 250
    save_every: int = 250
    shift: int = 4
    augment: str = "strong"
    width: int = 16
    attention: bool = True
    text_encoder: str = "smollm2_embeddings"
    text_dropout: float = 0.0
    device: str = "cpu"
    threads: int | None = None
    # stage=rl
    init_model: str | None = None
    rl_steps: int = 60
    rl_learning_rate: float = 1e-4
    tasks_per_step: int = 4
    group: int = 8
    temperature: float = 1.0
    executor: str = "kinematic"
    early_end_penalty: float = 0.5
    rl_categories: list[str] | None = None
    rl_augment: str = "none"
    rl_backends: list[str] | None = None
    kl_coef: float = 0.0
    # stage=val
    planner_params: dict[str, Any] = field(default_factory=dict)  # VLAPlanner's (decode, done_threshold, consult...)
    resume: bool = False

    def check(self) -> None:
        if self.stage not in ("data", "bc", "rl", "val"):
            raise ValueError(f"stage must be 'data', 'bc', 'rl' or 'val', got {self.stage!r}")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads must be >= 1 or null, got {self.threads}")
        if self.out is not None and self.stage != "data":
            raise ValueError(
                f"out={self.out} names stage=data's .hdf5 file; stage={self.stage} writes a run directory: "
                f"hydra.run.dir={self.out} to choose it (default runs/vla/<time>)"
            )
        if self.stage == "data":
            self.data_config().check()
        elif self.stage == "bc":
            self.bc_config().check()
        elif self.stage == "val":
            if not self.init_model:
                raise ValueError("stage=val needs init_model=<model.pt> (or shipped:<name>): the model to validate")
            if self.episodes < 1:
                raise ValueError(f"episodes must be >= 1, got {self.episodes}")
            if "model" in self.planner_params:
                raise ValueError("planner_params.model: stage=val scores init_model=<model.pt>; give the model there")
            if self.planner_params:
                import inspect

                from hierarchy.vla.planner import VLAPlanner

                known = [k for k in inspect.signature(VLAPlanner).parameters if k != "model"]
                unknown = sorted(set(self.planner_params) - set(known))
                if unknown:
                    raise ValueError(f"planner_params: unknown {unknown}; the VLA planner takes {', '.join(known)}")
        if self.planner_params and self.stage != "val":
            raise ValueError(
                f"planner_params is stage=val's (the VLA planner's settings to validate); stage={self.stage} ignores it"
            )
        if self.stage not in ("data", "bc", "val"):
            self.rl_config().check()

    def data_config(self):
        from hierarchy.vla.data import DataConfig

        return DataConfig(
            scenes=tuple(self.scenes),
            backend=self.backend,
            episodes=self.episodes,
            split=self.split,
            seed=self.seed,
            split_seed=self.split_seed,
            image_size=self.image_size,
        )

    def rl_config(self):
        from hierarchy.vla.rl import RLConfig

        return RLConfig(
            init_model=self.init_model or "",
            scenes=tuple(self.scenes),
            backend=self.backend,
            steps=self.rl_steps,
            tasks_per_step=self.tasks_per_step,
            group=self.group,
            temperature=self.temperature,
            learning_rate=self.rl_learning_rate,
            executor=self.executor,
            early_end_penalty=self.early_end_penalty,
            categories=tuple(self.rl_categories) if self.rl_categories is not None else None,
            seed=self.seed,
            save_every=max(1, min(10, self.rl_steps)),
            resume=self.resume,
            augment=self.rl_augment,
            backends=tuple(self.rl_backends) if self.rl_backends is not None else None,
            kl_coef=self.kl_coef,
            split_seed=self.split_seed,
        )

    def bc_config(self):
        from hierarchy.vla.train import BCConfig

        return BCConfig(
            train_data=list(self.train_data),
            val_data=list(self.val_data),
            steps=self.steps,
            batch_size=self.batch_size,
            learning_rate=self.learning_rate,
            eval_every=self.eval_every,
            save_every=self.save_every,
            shift=self.shift,
            augment=self.augment,
            seed=self.seed,
            width=self.width,
            attention=self.attention,
            text_encoder=self.text_encoder,
            text_dropout=self.text_dropout,
            device=self.device,
            resume=self.resume,
        )


def fail(message: str) -> NoReturn:
    cli_fail("hrl-vla", message)


def register_schema() -> None:
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="vla_schema", node=VLAConfig)


def _run(config: VLAConfig, run_dir: Path) -> int:
    import torch

    try:
        config.check()
    except (ValueError, FileNotFoundError) as err:
        fail(str(err))
    if config.threads:
        torch.set_num_threads(config.threads)
    from hierarchy.vla.train import make_accelerator, shared_run_dir

    accelerator, main = None, True
    if launched_processes() > 1:  # accelerate launch / torchrun: data-parallel imitation (docs/vla.md)
        if config.stage != "bc":
            fail(
                f"stage={config.stage} runs in one process, but a launcher started {launched_processes()}; run it "
                "without accelerate launch or torchrun (data generation fans out with -m ... hydra/launcher=joblib)"
            )
        try:
            accelerator = make_accelerator(config.device)
        except ValueError as err:
            fail(str(err))
        run_dir, main = shared_run_dir(accelerator, run_dir), accelerator.is_main_process
    run_dir.mkdir(parents=True, exist_ok=True)
    if main:
        (run_dir / "config.json").write_text(json.dumps(config.__dict__, indent=2))
    try:
        with sigterm_as_keyboard_interrupt():
            if config.stage == "data":
                from tqdm import tqdm

                from hierarchy.vla.data import write_dataset

                out = Path(config.out) if config.out else run_dir / f"{config.split}_{config.backend}.hdf5"
                total = config.episodes * len(config.scenes)
                with tqdm(total=total, desc=f"vla data ({config.split}, {config.backend})") as bar:
                    summary = write_dataset(out, config.data_config(), progress=lambda n, _: bar.update(1))
                print(
                    f"[hrl-vla] data: {summary['samples']} samples in {summary['episodes']} episodes, "
                    f"{summary['seconds']:.0f} s -> {out}"
                )
                return 0
            if config.stage == "val":
                from hierarchy.vla.rl import validate_episodes

                val = validate_episodes(
                    config.init_model,
                    tuple(config.scenes),
                    config.episodes,
                    config.seed,
                    config.backend,
                    split_seed=config.split_seed,
                    **dict(config.planner_params),
                )
                (run_dir / "val_episodes.json").write_text(json.dumps(val, indent=2))
                scores = ", ".join(f"{s} {val[s]:.0%}" for s in config.scenes)
                scores += "; " + ", ".join(f"{c} {v:.0%}" for c, v in val["by_category"].items())
                print(f"[hrl-vla] val: {val['all']:.0%} end to end ({scores}) -> {run_dir / 'val_episodes.json'}")
                return 0
            if config.stage == "rl":
                from hierarchy.vla.rl import train_rl

                rl = train_rl(config.rl_config(), run_dir)
                print(
                    f"[hrl-vla] rl done: {rl['steps']} updates in {rl['wall_time_s'] / 60:.1f} min, mean reward "
                    f"{rl['first_reward']} -> {rl['last_reward']} -> {rl['model']}"
                )
                return 0
            from hierarchy.vla.train import train

            result = train(config.bc_config(), run_dir, accelerator=accelerator)
    except KeyboardInterrupt:
        if config.stage in ("bc", "rl") and main:
            again = "hrl-vla"
            if accelerator is not None:
                again = f"accelerate launch --multi_gpu --num_processes {accelerator.num_processes} -m hrl.vla"
            print(f"[hrl-vla] interrupted; continue with: {again} resume={run_dir}", file=sys.stderr)
        raise SystemExit(INTERRUPTED) from None
    except (ValueError, FileNotFoundError) as err:
        fail(str(err))
    if not main:
        return 0
    val = result.get("val") or {}
    print(
        f"[hrl-vla] bc done: {result['steps']} steps in {result['wall_time_s'] / 60:.1f} min, val step accuracy "
        f"{float(val.get('step_accuracy', 'nan')):.0%} -> {result['model']}"
    )
    return 0


def _task(cfg) -> None:
    from hydra.core.hydra_config import HydraConfig

    check_launched_run_dir("hrl-vla")
    _run(typed_config(cfg, "hrl-vla"), Path(HydraConfig.get().runtime.output_dir))


def resume(run_dir: Path, overrides: list[str]) -> int:
    """Continue a training run (stage=bc or rl) with its own saved config; only ``steps`` (bc) or ``rl_steps``
    (rl) may change."""
    known = {f.name for f in fields(VLAConfig)}
    values = resume_values(
        run_dir, "hrl-vla", known, overrides, lambda v: "rl_steps" if v.get("stage") == "rl" else "steps"
    )
    if values.get("stage") not in ("bc", "rl"):
        fail(
            f"resume={run_dir}: only a training run (stage=bc or rl) can be resumed; "
            f"this one is stage={values.get('stage')}"
        )
    values["out"] = None  # runs started before out= was refused outside stage=data recorded it unused
    return _run(VLAConfig(**values), run_dir)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    resumes = [a for a in args if a.startswith("resume=")]
    if resumes:
        return resume(Path(resumes[0].split("=", 1)[1]), [a for a in args if not a.startswith("resume=")])
    register_schema()
    run_hydra_app(_task, "vla", args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
