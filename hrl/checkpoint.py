"""Atomic training checkpoints: model, replay buffer, RNG states and counters.

Layout under ``<run_dir>/checkpoints/``::

    step_0005000/   model.zip  replay_buffer.pkl  rng.pkl  state.json
    latest          name of the newest complete checkpoint directory

A checkpoint is written into a temporary directory and renamed into place, and ``latest`` is replaced
atomically after that, so a kill at any moment leaves the previous checkpoint intact and readable.
"""

from __future__ import annotations

import json
import os
import pickle
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

CHECKPOINTS = "checkpoints"


def write_text_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def capture_rng(venv: Any) -> dict[str, Any]:
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "envs": [g.bit_generator.state for g in venv.get_attr("np_random")],
    }


def restore_rng(venv: Any, states: dict[str, Any]) -> None:
    random.setstate(states["python"])
    np.random.set_state(states["numpy"])
    torch.set_rng_state(states["torch"])
    generators = venv.get_attr("np_random")
    if len(generators) != len(states["envs"]):
        raise ValueError(
            f"checkpoint was written with {len(states['envs'])} envs, this run has {len(generators)} "
            "(n_envs must match)"
        )
    for i, (gen, state) in enumerate(zip(generators, states["envs"], strict=True)):
        gen.bit_generator.state = state
        venv.set_attr("np_random", gen, indices=[i])


def save_checkpoint(run_dir: Path, model: Any, state: dict[str, Any], *, replay_buffer: bool, keep: int) -> Path:
    """Write a complete checkpoint for ``model.num_timesteps`` and point ``latest`` at it."""
    root = run_dir / CHECKPOINTS
    root.mkdir(parents=True, exist_ok=True)
    name = f"step_{model.num_timesteps:07d}"
    tmp = root / f".tmp-{name}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    model.save(tmp / "model.zip")
    if replay_buffer:
        model.save_replay_buffer(tmp / "replay_buffer.pkl")
    with open(tmp / "rng.pkl", "wb") as f:
        pickle.dump(capture_rng(model.get_env()), f)
    (tmp / "state.json").write_text(json.dumps(state, indent=2))
    final = root / name
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    write_text_atomic(root / "latest", name)
    for old in sorted(p for p in root.glob("step_*") if p.is_dir())[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The newest complete checkpoint of a run, or None if it has none."""
    pointer = run_dir / CHECKPOINTS / "latest"
    if not pointer.is_file():
        return None
    path = run_dir / CHECKPOINTS / pointer.read_text().strip()
    if not (path / "model.zip").is_file() or not (path / "state.json").is_file():
        raise FileNotFoundError(f"checkpoint {path} named by {pointer} is incomplete (model.zip or state.json missing)")
    return path


def read_state(checkpoint: Path) -> dict[str, Any]:
    return json.loads((checkpoint / "state.json").read_text())


def load_rng(checkpoint: Path) -> dict[str, Any]:
    with open(checkpoint / "rng.pkl", "rb") as f:
        return pickle.load(f)
