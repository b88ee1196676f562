"""``hrl-train``: train a low-level goal-conditioned policy, configured with Hydra (configs/config.yaml).

    hrl-train                                      # defaults: SAC + HER, local goals in the open map
    hrl-train experiment=rover_local               # the recipe of the shipped policy
    hrl-train algo=tqc_her env=two_rooms_local total_steps=50000 n_envs=2
    hrl-train -m seed=0,1 hydra/launcher=joblib    # local parallel sweep
    hrl-train resume=runs/train/rover_local/2026-12-02_11-00-00   # continue an interrupted run
    hrl-train env.id=PandaReach-v3 env.packages=[panda_gym]   # any registered goal env

The Hydra-specific part lives here only; :func:`hrl.training.train` takes a typed ``TrainConfig``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from hrl.cli import CONFIG_DIR, overridden_keys, run_hydra_app, sigterm_as_keyboard_interrupt, typed_config
from hrl.cli import fail as cli_fail
from hrl.config import TrainConfig, migrate_env_dict, moved_env_keys

if TYPE_CHECKING:
    from hrl.training import TrainResult

__all__ = ["CONFIG_DIR", "INTERRUPTED", "main", "open_env_kwargs", "register_schemas", "resume"]

#: Exit status of a run stopped by Ctrl-C or SIGTERM (after writing its checkpoint), as shells report Ctrl-C.
INTERRUPTED = 130


def register_schemas() -> None:
    """Typed schemas: unknown keys and wrongly typed values fail at composition."""
    from hydra.core.config_store import ConfigStore

    from hrl.config import EvalRunConfig

    cs = ConfigStore.instance()
    cs.store(name="train_schema", node=TrainConfig)
    cs.store(name="eval_schema", node=EvalRunConfig)


def fail(message: str) -> NoReturn:
    cli_fail("hrl-train", message)


def _task(cfg) -> float:  # type: ignore[no-untyped-def]
    from hydra.core.hydra_config import HydraConfig

    from hrl.training import RunDirectoryError

    config: TrainConfig = typed_config(cfg, "hrl-train")
    hydra_config = HydraConfig.get()
    run_dir = Path(hydra_config.runtime.output_dir)
    command = " ".join(["hrl-train", *(str(o) for o in hydra_config.overrides.task)])
    unused = unused_overrides(config, overridden_keys(hydra_config.overrides.task))
    if unused:
        fail(
            f"{', '.join(unused)}: env.id={config.env.id} does not read them, so it would not get them; "
            "give its own arguments as env.kwargs={name:value,...}"
        )
    try:
        result = _train_in_this_process(config, run_dir, command=command)
    except (ValueError, RunDirectoryError, FileNotFoundError) as err:
        fail(str(err))
    if result.interrupted:
        raise SystemExit(INTERRUPTED)
    print(
        f"[hrl-train] done: {result.num_timesteps} steps in {result.wall_time_s / 60:.1f} min, final success "
        f"{result.final_success:.0%} (best {result.best_success:.0%}) -> {run_dir}"
    )
    return result.final_success


def unused_overrides(config: TrainConfig, keys: list[str]) -> list[str]:
    """The overridden ``keys`` the env would not get: ``env.*`` keys (and ``robot.*``) its family does not read
    (EnvFamily.reads; an env of no family reads only ``env.id``, ``env.packages`` and ``env.kwargs``)."""
    family = config.env.family()
    reads = family.reads if family is not None else ()
    own = ("env.id", "env.packages", "env.kwargs", *(f"env.{name}" for name in reads if name != "robot"))
    if "robot" in reads:
        own = (*own, "robot")
    if "wrappers" in reads:
        own = (*own, "env/wrappers")
    return [
        k
        for k in keys
        if k.startswith(("env.", "env/", "robot.")) or k == "robot"
        if not any(k == o or k.startswith((f"{o}.", f"{o}/")) for o in own)
    ]


def resume(run_dir: Path, overrides: list[str]) -> int:
    """Continue a run with its own saved config; only ``total_steps`` may be changed."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from hrl.training import RunDirectoryError

    allowed = {"total_steps"}
    extra: dict[str, str] = {}
    for item in overrides:
        key, _, value = item.partition("=")
        if key not in allowed:
            fail(f"resume continues a run with its own config; only {sorted(allowed)} may be overridden, got {item!r}")
        extra[key] = value
    saved = run_dir / ".hydra" / "config.yaml"
    if not run_dir.is_dir():
        fail(f"resume={run_dir}: no such directory")
    if not saved.is_file():
        fail(f"resume={run_dir}: {saved} is missing; not a hrl-train run directory")
    try:
        base = OmegaConf.structured(TrainConfig)
        saved_config = OmegaConf.to_container(OmegaConf.load(saved))
        if isinstance(saved_config, dict) and isinstance(saved_config.get("env"), dict):
            saved_config["env"] = migrate_env_dict(saved_config["env"])  # saved before env.kwargs held the rover's
        cfg = OmegaConf.merge(
            base, OmegaConf.create(saved_config), OmegaConf.from_dotlist([f"{k}={v}" for k, v in extra.items()])
        )
        config: TrainConfig = OmegaConf.to_object(cfg)  # type: ignore[assignment]
    except OmegaConfBaseException as err:
        fail(f"resume={run_dir}: its saved config does not match this version's schema: {err}")
    try:
        result = _train_in_this_process(
            config, run_dir, command=" ".join(["hrl-train", f"resume={run_dir}", *overrides]), resume=True
        )
    except (ValueError, RunDirectoryError, FileNotFoundError) as err:
        fail(str(err))
    if result.interrupted:
        raise SystemExit(INTERRUPTED)
    print(f"[hrl-train] done: {result.num_timesteps} steps, final success {result.final_success:.0%} -> {run_dir}")
    return 0


def _train_in_this_process(config: TrainConfig, run_dir: Path, *, command: str, resume: bool = False) -> TrainResult:
    """:func:`hrl.training.train` with what only a command-line process may set: torch's thread count
    (process-wide) and SIGTERM stopping training like Ctrl-C (a checkpoint, then exit)."""
    import torch

    from hrl.training import train

    config.validate()
    torch.set_num_threads(config.torch_threads)
    with sigterm_as_keyboard_interrupt():
        return train(config, run_dir, resume=resume, command=command)


def open_env_kwargs(args: list[str], prog: str = "hrl-train") -> list[str]:
    """The command line's env overrides as Hydra needs them:

    * ``env.kwargs={...}`` and ``env.kwargs.<name>=...`` as ``++`` overrides: the keys of ``env.kwargs`` are the
      env's arguments, not the schema's, so assigning them adds keys (plain Hydra would ask for a ``+`` prefix);
    * ``env.id=<id>`` with no ``env=<preset>`` starts from the empty preset ``env=gym``: a preset's ``kwargs``
      are its own env's arguments (``open_local``'s are the rover's map, goal mode, ...), not another env's;
    * a key that moved into ``env.kwargs`` (``env.map=...``, before 2026-12-08) is refused, naming the new one.
    """
    moved = moved_env_keys(args)
    if moved:
        cli_fail(prog, "; ".join(moved))
    out = [f"++{a}" if a.startswith(("env.kwargs=", "env.kwargs.")) else a for a in args]
    chooses_preset = any(a.split("=", 1)[0].lstrip("+~") == "env" for a in args)
    if any(a.startswith("env.id=") for a in args) and not chooses_preset:
        out.insert(0, "env=gym")
    return out


def main(argv: list[str] | None = None) -> int:
    """``hrl-train``: ``argv`` (default: the command line) as Hydra overrides, or ``resume=<run dir>``.
    ``sys.argv`` is left as it was."""
    args = open_env_kwargs(list(sys.argv[1:] if argv is None else argv))
    resumes = [a for a in args if a.startswith("resume=")]
    if resumes:
        rest = [a for a in args if not a.startswith("resume=")]
        return resume(Path(resumes[0].split("=", 1)[1]), rest)
    for arg in args:
        if arg.startswith("hydra.run.dir="):
            from hrl.training import RunDirectoryError, check_fresh_run_dir

            try:
                check_fresh_run_dir(Path(arg.split("=", 1)[1]))
            except RunDirectoryError as err:
                fail(str(err))
    register_schemas()
    run_hydra_app(_task, "config", args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
