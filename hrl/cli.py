"""What the Hydra command-line entry points share: the config tree, running an app on an argument list without
leaving ``sys.argv`` changed, turning a composed config into its dataclasses with a one-line error (not a
traceback) for a bad or missing value, and the process-wide settings that belong to a CLI and never to
library code.

    run_hydra_app(_task, "eval", argv)    # hrl-eval's main(argv): sys.argv is the caller's again afterwards
    config = typed_config(cfg, "hrl-eval")   # in the task: EvalRunConfig, or "hrl-eval: error: ..." and exit 2
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

#: The Hydra configs, inside the package so that an installed (not editable) hrl-stack has them; the repository's
#: top-level ``configs`` is a link to this folder.
CONFIG_DIR = Path(__file__).resolve().parent / "configs"


def launched_processes() -> int:
    """The number of processes a launcher (``accelerate launch``, ``torchrun``) started for this run (its
    ``WORLD_SIZE``); 1 without one."""
    value = os.environ.get("WORLD_SIZE", "1")
    try:
        return max(1, int(value))
    except ValueError:
        raise ValueError(f"WORLD_SIZE={value!r} is not a number of processes; unset it to run in one") from None


def process_rank() -> int:
    """This process's index among those a launcher started (its ``RANK``: 0 writes the run directory); 0 without
    one."""
    value = os.environ.get("RANK", "0")
    try:
        rank = int(value)
    except ValueError:
        raise ValueError(f"RANK={value!r} is not a process index; unset it to run in one process") from None
    if not 0 <= rank < launched_processes():
        raise ValueError(f"RANK={rank} is not one of the {launched_processes()} processes (WORLD_SIZE); unset both")
    return rank


def check_launched_run_dir(program: str) -> None:
    """Under a launcher, refuse a run whose directory Hydra would name by the time: each process names its own,
    and they may differ by a second (call from the Hydra task)."""
    if launched_processes() == 1:
        return
    from hydra.core.hydra_config import HydraConfig

    if not any(o.startswith("hydra.run.dir=") for o in HydraConfig.get().overrides.hydra):
        fail(
            program,
            f"a launcher started {launched_processes()} processes: name the run directory with "
            "hydra.run.dir=runs/<name> so that every process writes the same one",
        )


def wrapper_preset(name: str) -> list[Any]:
    """The wrapper specs of ``configs/env/wrappers/<name>.yaml`` (``env/wrappers=<name>``), for code outside Hydra."""
    import yaml

    path = CONFIG_DIR / "env" / "wrappers" / f"{name}.yaml"
    if not path.is_file():
        known = sorted(f.stem for f in path.parent.glob("*.yaml"))
        raise ValueError(f"no wrapper preset {name!r}; presets: {', '.join(known)}")
    return yaml.safe_load(path.read_text())["wrappers"]


@contextmanager
def command_line(argv: list[str] | None) -> Iterator[list[str]]:
    """``sys.argv`` set to ``[program, *argv]`` inside the block (unchanged when ``argv`` is None), and
    restored on the way out, whatever happens inside (an error, ``SystemExit``).

    Hydra's ``@hydra.main`` reads its overrides from ``sys.argv`` only; this lets a ``main(argv)`` hand it a
    list without rewriting the caller's command line for good.
    """
    saved = sys.argv
    sys.argv = [saved[0] if saved else "", *(saved[1:] if argv is None else argv)]
    try:
        yield sys.argv[1:]
    finally:
        sys.argv = saved


def run_hydra_app(task: Callable[[Any], Any], config_name: str, argv: list[str] | None) -> None:
    """Run ``task`` as a Hydra app on ``configs/<config_name>.yaml`` with ``argv`` as its command line (None:
    the process's own), with the full CLI (``-m``, launchers, ``--help``), and ``sys.argv`` restored after."""
    import hydra

    with command_line(argv):
        hydra.main(version_base=None, config_path=str(CONFIG_DIR), config_name=config_name)(task)()


def fail(program: str, message: str) -> NoReturn:
    """Refuse the command line: ``<program>: error: <message>`` on stderr and exit status 2 (argparse's)."""
    print(f"{program}: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def resume_values(
    run_dir: Path, program: str, known: set[str], overrides: list[str], steps_key: Callable[[dict], str]
) -> dict[str, Any]:
    """The saved config (``config.json``) of a run to continue, with ``resume`` set and only its step budget
    (``steps_key(values)``: the key that counts the steps) overridable; anything else is ``program``'s error."""
    import json

    saved = run_dir / "config.json"
    if not saved.is_file():
        fail(program, f"resume={run_dir}: {saved} is missing; not an {program} run directory")
    values = json.loads(saved.read_text())
    unknown = sorted(set(values) - known)
    if unknown:
        fail(program, f"resume={run_dir}: its config has keys this version does not know: {unknown}")
    key_name = steps_key(values)
    for item in overrides:
        key, _, value = item.partition("=")
        if key != key_name:
            fail(
                program, f"resume continues a run with its own config; only {key_name} may be overridden, got {item!r}"
            )
        try:
            values[key_name] = int(value)
        except ValueError:
            fail(program, f"{key_name} must be an integer, got {value!r}")
    values["resume"] = True
    return values


def typed_config(cfg: Any, program: str) -> Any:
    """``cfg``, a config Hydra composed, as its schema's dataclasses; a value they cannot take is a one-line
    error of ``program`` (:func:`fail`), not a traceback.

    A mandatory value left unset (``???`` in a config file: ``planner=llm_goals_trained`` needs
    ``planner.backend.params.lora_path``) names its key and how to give it on the command line; a value a
    dataclass rejects (``executor.stuck_window=0``) gives the dataclass's message.
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import MissingMandatoryValue

    try:
        return OmegaConf.to_object(cfg)
    except MissingMandatoryValue as err:
        key = err.full_key
        fail(
            program,
            f"{key} has no value and this config needs one (its config file says what it is): "
            f"give it on the command line, {program} ... {key}=<value>",
        )
    except ValueError as err:  # a dataclass's __post_init__ refused a value
        fail(program, str(err))


def overridden_keys(overrides: list[str]) -> list[str]:
    """The config keys a list of Hydra overrides sets (``+a.b=1`` -> ``a.b``; ``env/wrappers=x`` ->
    ``env/wrappers``), in order."""
    return [str(o).partition("=")[0].lstrip("+~") for o in overrides]


@contextmanager
def sigterm_as_keyboard_interrupt() -> Iterator[None]:
    """SIGTERM (a scheduler stopping a job, ``kill``) raised as KeyboardInterrupt inside the block, so the
    code inside stops as on Ctrl-C (training checkpoints and exits). Signal handlers are process-wide and
    can only be installed from the main thread: elsewhere (a launcher's worker thread) this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
