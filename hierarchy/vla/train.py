"""Imitation (behaviour cloning) of the oracle's steps: the library behind ``hrl-vla stage=bc``.

Reads the demonstrations (:mod:`.data`), trains :class:`.model.VLANet` with cross-entropy on the pick and place
heatmaps (the demonstrated pixel's cell is the class) and a binary loss on ``done``, with the images shifted by a
few pixels and their brightness scaled at random (the demonstrations' labels move with them). Every
``eval_every`` steps it scores the validation file (unseen phrasings and layouts): a step is right when the pick
and the place cells are within ``tolerance_cells`` of the demonstrated ones (or ``done`` is right). Writes
``model.pt`` (what the planner loads), ``checkpoints/last.pt`` (every ``save_every`` steps, atomically; ``resume``
continues from it), ``train_log.csv``, ``val_log.csv``, ``curves.png`` and ``result.json``.
"""

from __future__ import annotations

import csv
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hrl.cli import launched_processes

#: Bump when model.pt's contents change meaning.
MODEL_FORMAT = 1


@dataclass
class BCConfig:
    train_data: list[str] = field(default_factory=list)
    val_data: list[str] = field(default_factory=list)
    steps: int = 3000
    batch_size: int = 32
    learning_rate: float = 1e-3
    weight_decay: float = 1e-4
    eval_every: int = 250
    save_every: int = 250
    shift: int = 4  # pixels of random image shift
    augment: str = "strong"  # strong (domain randomisation of the look: AUGMENTS) | light
    tolerance_cells: float = 1.5  # a pick/place is right within this many heatmap cells (~2 cm each at 96 px)
    seed: int = 0
    width: int = 16
    attention: bool = True  # the bottleneck transformer block (hierarchy/vla/model.py)
    text_encoder: str = "smollm2_embeddings"  # hierarchy.vla.text.ENCODERS
    text_dropout: float = 0.0  # each instruction token left out of a training sample with this probability
    device: str = "cpu"  # cpu | cuda | cuda:<i> | auto (cuda when torch sees a GPU)
    resume: bool = False

    def check(self) -> None:
        if not self.train_data:
            raise ValueError("train_data is empty; give the demonstration files (hrl-vla stage=data writes them)")
        for key in ("steps", "batch_size", "eval_every", "save_every"):
            value = getattr(self, key)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{key} must be a positive integer, got {value!r}")
        if self.augment not in AUGMENTS:
            raise ValueError(f"augment must be one of {', '.join(AUGMENTS)}, got {self.augment!r}")
        if not 0.0 <= self.text_dropout < 1.0:
            raise ValueError(f"text_dropout must be in [0, 1), got {self.text_dropout!r}")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate!r}")
        resolve_device(self.device)
        from hierarchy.vla.text import check_text_encoder

        check_text_encoder(self.text_encoder)


def resolve_device(device: str) -> str:
    """``auto`` -> cuda when torch sees a GPU, else cpu; a CUDA device torch cannot see is an error."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        return device
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ValueError(f"device={device!r}, but torch sees no GPU here; use device=cpu (or auto)")
        return device
    raise ValueError(f"device must be cpu, cuda, cuda:<i> or auto, got {device!r}")


class TextCache:
    """Frozen token embeddings per instruction, computed once (as torch tensors)."""

    def __init__(self, embeddings: Any) -> None:
        self.embeddings, self._cache = embeddings, {}

    def __call__(self, text: str) -> Any:
        import torch

        if text not in self._cache:
            self._cache[text] = torch.from_numpy(self.embeddings.encode(text))
        return self._cache[text]


#: ``augment`` choices: ``light`` scales the brightness by 0.8-1.2; ``strong`` is domain randomisation of the
#: look: brightness x0.3-2 (log-uniform), contrast x0.7-1.3, each colour channel x0.9-1.1 (a light's tint, small
#: enough that red stays red), and the background (where the camera hits nothing, depth at the far plane) a
#: random colour, since one simulator renders it black and the other white.
AUGMENTS = ("light", "strong")
FAR = 2.9  # m: depth at or beyond this is "nothing hit" (both simulators write the far plane, 3 m)


def strong_look(rgb: np.ndarray, depth: np.ndarray, rng: np.random.Generator) -> None:
    """``augment=strong``'s change of look, in place on a float (H, W, 3) image: the background (where the camera
    hits nothing) a random colour, contrast x0.7-1.3, brightness x0.3-2 and a tint x0.9-1.1 per channel."""
    rgb[~(depth < FAR)] = rng.uniform(0, 255, 3)
    mean = rgb.mean()
    rgb[:] = (rgb - mean) * rng.uniform(0.7, 1.3) + mean
    rgb *= np.exp(rng.uniform(np.log(0.3), np.log(2.0))) * rng.uniform(0.9, 1.1, 3)


def drop_words(tokens: Any, p: float, rng: np.random.Generator) -> Any:
    """``text_dropout``: each of an instruction's (L, dim) tokens left out with probability ``p``, at least one
    kept (the sequence shortens: the GRU reads what is left, in order)."""
    keep = rng.random(len(tokens)) >= p
    if not keep.any():
        keep[rng.integers(len(tokens))] = True
    return tokens[np.flatnonzero(keep)]


def batch_tensors(
    samples: Any,
    index: np.ndarray,
    text: TextCache,
    rng: np.random.Generator | None,
    shift: int,
    augment="strong",
    text_dropout: float = 0.0,
):
    """The network's inputs and targets for ``index``; with ``rng`` augmented (shift, ``augment``'s look, and
    ``text_dropout``'s words left out)."""
    import torch

    from hierarchy.vla.model import pad_tokens

    rgb = samples.rgb[index].astype(np.float32)
    depth = samples.depth[index].astype(np.float32)
    actions = samples.actions[index].copy()
    if rng is not None:
        for i in range(len(index)):
            dx, dy = rng.integers(-shift, shift + 1, 2) if shift else (0, 0)
            rgb[i] = np.roll(rgb[i], (dy, dx), axis=(0, 1))
            depth[i] = np.roll(depth[i], (dy, dx), axis=(0, 1))
            actions[i, [0, 2]] += dx
            actions[i, [1, 3]] += dy
            if augment == "strong":
                strong_look(rgb[i], depth[i], rng)
            else:
                rgb[i] *= rng.uniform(0.8, 1.2)
        rgb = np.clip(rgb, 0, 255)
    words = [text(samples.instruction[i]) for i in index]
    if rng is not None and text_dropout > 0:
        words = [drop_words(w, text_dropout, rng) for w in words]
    tokens, mask = pad_tokens(words)
    return (
        torch.from_numpy(rgb.astype(np.uint8)),
        torch.from_numpy(depth),
        torch.from_numpy(samples.proprio[index]),
        tokens,
        mask,
        torch.from_numpy(actions),
    )


def schedule(step: int, steps: int, warmup: int = 50) -> float:
    """The learning rate's factor: a linear warm-up, then a cosine down to 5 % at ``steps`` (a resumed run with
    more steps continues on the longer curve)."""
    warm = min(1.0, (step + 1) / warmup)
    return warm * max(0.05, 0.5 * (1.0 + np.cos(np.pi * min(step, steps) / steps)))


def cell_targets(actions: Any, size: int) -> tuple[Any, Any, Any]:
    """Flat heatmap cell index of the pick and the place pixels (heatmaps at half resolution), and done."""
    import torch

    half = size // 2
    uv = torch.nan_to_num(actions[:, :4], nan=0.0).clamp(0, size - 1e-3) / 2
    pick = uv[:, 1].long() * half + uv[:, 0].long()
    place = uv[:, 3].long() * half + uv[:, 2].long()
    return pick, place, actions[:, 4]


def losses(net: Any, batch: tuple) -> tuple[Any, dict[str, float]]:
    from torch.nn import functional as F  # noqa: N812

    rgb, depth, proprio, tokens, mask, actions = batch
    pick_logits, place_logits, done_logit = net(rgb, depth, proprio, tokens, mask)
    pick, place, done = cell_targets(actions, rgb.shape[1])
    step = done < 0.5
    loss_done = F.binary_cross_entropy_with_logits(done_logit, done)
    if step.any():
        loss_pick = F.cross_entropy(pick_logits[step].flatten(1), pick[step])
        loss_place = F.cross_entropy(place_logits[step].flatten(1), place[step])
    else:  # no step sample in the batch: zero, but through both heads, so that every process of a data-parallel
        # run (accelerate launch) reduces the same parameters' gradients
        loss_pick = loss_place = 0.0 * (pick_logits.sum() + place_logits.sum())
    loss = loss_pick + loss_place + loss_done
    parts = {"loss": loss, "pick": loss_pick, "place": loss_place, "done": loss_done}
    return loss, {k: float(v.detach()) for k, v in parts.items()}


def decode_cells(logits: Any) -> np.ndarray:
    """(B, H, W) logits -> (B, 2) continuous pixel (u, v) of the best cell's centre at full resolution."""
    _b, _h, w = logits.shape
    best = logits.flatten(1).argmax(1).cpu().numpy()
    return np.stack([(best % w) * 2 + 1.0, (best // w) * 2 + 1.0], axis=1)


def evaluate(
    net: Any, samples: Any, text: TextCache, tolerance_cells: float, batch_size: int = 64, device: str = "cpu"
) -> dict[str, Any]:
    """Per-sample correctness on ``samples`` (no augmentation), overall and by scene."""
    import torch

    net.eval()
    right, pick_ok, place_ok, done_ok = [], [], [], []
    with torch.no_grad():
        for start in range(0, len(samples), batch_size):
            index = np.arange(start, min(start + batch_size, len(samples)))
            *inputs, actions = batch_tensors(samples, index, text, None, 0)
            pl, ql, dl = net(*(t.to(device) for t in inputs))
            a = actions.numpy()
            is_done = a[:, 4] > 0.5
            said_done = dl.cpu().numpy() > 0
            tol = 2.0 * tolerance_cells
            p = np.linalg.norm(decode_cells(pl) - a[:, :2], axis=1) <= tol
            q = np.linalg.norm(decode_cells(ql) - a[:, 2:4], axis=1) <= tol
            right += list(np.where(is_done, said_done, ~said_done & p & q))
            pick_ok += list(p[~is_done])
            place_ok += list(q[~is_done])
            done_ok += list(said_done == is_done)
    net.train()
    right = np.asarray(right)
    by_scene = {}
    for scene in sorted(set(samples.scene)):
        m = np.array([s == scene for s in samples.scene])
        by_scene[scene] = round(float(right[m].mean()), 4)
    return {
        "step_accuracy": round(float(right.mean()), 4),
        "pick": round(float(np.mean(pick_ok)), 4) if pick_ok else float("nan"),
        "place": round(float(np.mean(place_ok)), 4) if place_ok else float("nan"),
        "done": round(float(np.mean(done_ok)), 4),
        "by_scene": by_scene,
        "samples": len(samples),
    }


def _save(path: Path, payload: dict) -> None:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(payload, tmp)
    os.replace(tmp, path)


def check_splits(train_data: list[str], val_data: list[str]) -> list[int]:
    """The split seeds of the training files (sorted); refuses val files whose phrasings training may have seen:
    a val file must be of split ``val`` and of the one split seed every training file shares."""
    from hierarchy.vla.data import file_split

    train = {str(p): file_split(p) for p in train_data}
    seeds = sorted({s for _, s in train.values() if s is not None})
    for p, (split, seed) in {str(p): file_split(p) for p in val_data}.items():
        if split != "val":
            raise ValueError(f"val_data {p} is of split {split!r}; give files of `hrl-vla stage=data split=val`")
        if seed is not None and seeds != [seed]:
            raise ValueError(
                f"val_data {p} holds out the templates and words of split seed {seed}, but train_data was drawn "
                f"with split seeds {seeds} ({', '.join(f'{k}: {v[1]}' for k, v in train.items())}): another split "
                f"seed's train split holds what that val holds out. Draw every file with the same split_seed "
                f"(hrl-vla stage=data split_seed={seed} ...)"
            )
    return seeds


def make_accelerator(device: str) -> Any:
    """accelerate's ``Accelerator`` when a launcher started several processes (data parallel: each process
    samples its own ``batch_size`` and the gradients are averaged), else None (one process, plain torch)."""
    if launched_processes() == 1:
        return None
    if device.startswith("cuda:"):
        raise ValueError(
            f"device={device!r} names one GPU, but a launcher started {launched_processes()} processes, one per "
            "device; use device=auto (or cuda)"
        )
    from accelerate import Accelerator

    return Accelerator(cpu=resolve_device(device) == "cpu")


def shared_run_dir(accelerator: Any, run_dir: str | Path) -> Path:
    """The first process's run directory, for every process (each one's Hydra may have named its own)."""
    if accelerator is None:
        return Path(run_dir)
    from accelerate.utils import broadcast_object_list

    return Path(broadcast_object_list([str(run_dir)], from_process=0)[0])


def train(cfg: BCConfig, run_dir: str | Path, progress: bool = True, accelerator: Any = None) -> dict[str, Any]:
    """Train (or continue, with ``cfg.resume``) and write the run directory; returns result.json's content.

    Under a launcher (``accelerate launch -m hrl.vla ...`` or ``torchrun``) each process runs this with its own
    stream of samples and accelerate's data-parallel wrapper averages the gradients: the batch is
    ``batch_size`` per process, the learning rate unchanged; the first process validates and writes the run
    directory (``accelerator``: one made by :func:`make_accelerator`, else made here)."""
    import torch
    from tqdm import tqdm

    from hierarchy.vla.data import file_generator, read_dataset
    from hierarchy.vla.model import NetConfig, VLANet
    from hierarchy.vla.text import text_encoder

    cfg.check()
    if accelerator is None:
        accelerator = make_accelerator(cfg.device)
    run_dir = shared_run_dir(accelerator, run_dir)
    processes = 1 if accelerator is None else accelerator.num_processes
    rank = 0 if accelerator is None else accelerator.process_index
    main = rank == 0
    run_dir.mkdir(parents=True, exist_ok=True)
    train_set = read_dataset(cfg.train_data)
    val_set = read_dataset(cfg.val_data) if cfg.val_data else None
    split_seeds = check_splits(cfg.train_data, cfg.val_data)
    size = int(train_set.rgb.shape[1])
    embeddings = text_encoder(cfg.text_encoder)
    text = TextCache(embeddings)
    torch.manual_seed(cfg.seed)  # every process starts from the same weights
    if accelerator is None:
        device = resolve_device(cfg.device)
    else:  # the process's own device; on CPUs plain "cpu" (tensors saved from "cpu:0" would not load elsewhere)
        device = "cpu" if accelerator.device.type == "cpu" else str(accelerator.device)
    net_cfg = NetConfig(image_size=size, text_dim=embeddings.dim, width=cfg.width, attention=cfg.attention)
    ckpt = run_dir / "checkpoints" / "last.pt"
    state = None
    if cfg.resume:
        if not ckpt.is_file():
            raise ValueError(f"resume: {ckpt} is missing; nothing to continue")
        state = torch.load(ckpt, map_location=device, weights_only=False)
        # the network the run was started with (checkpoints from before `net` was saved had no attention block)
        net_cfg = NetConfig(**state.get("net", {**net_cfg.to_dict(), "attention": False}))
        started_with = state.get("text_encoder", "smollm2_embeddings")
        if started_with != cfg.text_encoder:
            raise ValueError(
                f"resume: {ckpt} was trained with text_encoder={started_with}, not {cfg.text_encoder}; "
                f"resume with text_encoder={started_with}"
            )
        if state.get("processes", 1) != processes:
            raise ValueError(
                f"resume: {ckpt} was trained by {state.get('processes', 1)} process(es), this run has {processes}; "
                f"resume with {state.get('processes', 1)} (accelerate launch --num_processes N, or torchrun "
                "--nproc_per_node N; none for 1), so that each process continues its own stream of samples"
            )
    net = VLANet(net_cfg).to(device)
    opt = torch.optim.AdamW(net.parameters(), lr=cfg.learning_rate, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: schedule(s, cfg.steps))
    # the first process draws the stream a one-process run draws; the others their own
    rng = np.random.default_rng(cfg.seed if rank == 0 else [cfg.seed, rank])
    start, started = 0, time.perf_counter()
    if state is not None:
        net.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        rng_state, torch_rng = (state["rng"], state["torch_rng"]) if rank == 0 else state["process_rngs"][rank]
        rng.bit_generator.state = rng_state
        torch.set_rng_state(torch_rng.cpu())
        start = int(state["step"])
    # what the steps run: accelerate's data-parallel wrapper under a launcher (gradients averaged in backward)
    stepped = net if accelerator is None else accelerator.prepare(net)
    train_log = run_dir / "train_log.csv"
    val_log = run_dir / "val_log.csv"
    if main:
        (run_dir / "bc_config.json").write_text(json.dumps(asdict(cfg) | {"processes": processes}, indent=2))
        if not cfg.resume:
            train_log.write_text("step,loss,pick,place,done,lr\n")
            val_log.write_text("step,step_accuracy,pick,place,done\n")
    last_val: dict[str, Any] = {}
    bar = tqdm(range(start, cfg.steps), initial=start, total=cfg.steps, disable=not (progress and main), desc="vla bc")
    running: list[dict[str, float]] = []
    for step in bar:
        index = rng.integers(0, len(train_set), cfg.batch_size)
        batch = tuple(
            t.to(device) for t in batch_tensors(train_set, index, text, rng, cfg.shift, cfg.augment, cfg.text_dropout)
        )
        loss, parts = losses(stepped, batch)
        opt.zero_grad()
        if accelerator is None:
            loss.backward()
        else:
            accelerator.backward(loss)
        torch.nn.utils.clip_grad_norm_(net.parameters(), 5.0)
        opt.step()
        sched.step()
        running.append(parts)
        done_steps = step + 1
        if done_steps % 25 == 0 or done_steps == cfg.steps:
            mean = {k: float(np.mean([r[k] for r in running])) for k in running[0]}
            running = []
            if accelerator is not None:  # the mean over every process's batches
                keys = sorted(mean)
                reduced = accelerator.reduce(torch.tensor([mean[k] for k in keys], device=device), "mean")
                mean = dict(zip(keys, reduced.tolist(), strict=True))
            bar.set_postfix(loss=f"{mean['loss']:.3f}")
            if main:
                with train_log.open("a") as f:
                    f.write(
                        f"{done_steps},{mean['loss']:.4f},{mean['pick']:.4f},{mean['place']:.4f},{mean['done']:.4f},"
                        f"{sched.get_last_lr()[0]:.6f}\n"
                    )
        if main and val_set is not None and (done_steps % cfg.eval_every == 0 or done_steps == cfg.steps):
            last_val = evaluate(net, val_set, text, cfg.tolerance_cells, device=device)
            with val_log.open("a") as f:
                f.write(
                    f"{done_steps},{last_val['step_accuracy']},{last_val['pick']},{last_val['place']},"
                    f"{last_val['done']}\n"
                )
            bar.write(f"[vla bc] step {done_steps}: val {json.dumps(last_val)}")
        if done_steps % cfg.save_every == 0 or done_steps == cfg.steps:
            process_rngs = [(rng.bit_generator.state, torch.get_rng_state())]
            if accelerator is not None:  # every process's streams, so that each continues its own on resume
                from accelerate.utils import gather_object

                process_rngs = gather_object(process_rngs)
            if main:
                _save(
                    ckpt,
                    {
                        "model": net.state_dict(),
                        "net": net.cfg.to_dict(),
                        "text_encoder": cfg.text_encoder,
                        "optimizer": opt.state_dict(),
                        "scheduler": sched.state_dict(),
                        "rng": rng.bit_generator.state,
                        "torch_rng": torch.get_rng_state(),
                        "processes": processes,
                        "process_rngs": process_rngs,
                        "step": done_steps,
                    },
                )
    model_path = run_dir / "model.pt"
    if not main:
        accelerator.wait_for_everyone()  # until the first process has written the run directory
        return json.loads((run_dir / "result.json").read_text())
    _save(
        model_path,
        {
            "format": MODEL_FORMAT,
            "net": net.cfg.to_dict(),
            "state_dict": {k: v.cpu() for k, v in net.state_dict().items()},
            "text": {"kind": embeddings.kind, "source": embeddings.source, "fingerprint": embeddings.fingerprint},
            "trained_on": [str(p) for p in cfg.train_data],
            # what made each file: benchmarks/vla.py recomputes their layouts when the files are not on the machine
            "demo_generators": [file_generator(p) for p in cfg.train_data],
            "split_seeds": split_seeds,  # the generator split seeds of its demonstrations (hierarchy.vla.data)
            "steps": cfg.steps,
        },
    )
    train_score = evaluate(net, _subset(train_set, 2000, cfg.seed), text, cfg.tolerance_cells, device=device)
    result = {
        "model": str(model_path),
        "steps": cfg.steps,
        "train_samples": len(train_set),
        "processes": processes,
        "batch_size_total": cfg.batch_size * processes,
        "val": last_val,
        "train": train_score,
        "wall_time_s": round(time.perf_counter() - started, 1),
    }
    (run_dir / "result.json").write_text(json.dumps(result, indent=2))
    plot_curves(run_dir)
    if accelerator is not None:
        accelerator.wait_for_everyone()
    return result


def _subset(samples: Any, n: int, seed: int) -> Any:
    from hierarchy.vla.data import Samples

    if len(samples) <= n:
        return samples
    index = np.sort(np.random.default_rng(seed).choice(len(samples), n, replace=False))
    return Samples(
        samples.rgb[index],
        samples.depth[index],
        samples.proprio[index],
        samples.actions[index],
        [samples.instruction[i] for i in index],
        samples.episode[index],
        [samples.scene[i] for i in index],
    )


def plot_curves(run_dir: Path) -> Path | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with (run_dir / "train_log.csv").open() as f:
        rows = list(csv.DictReader(f))
    if not rows:
        return None
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.5))
    steps = [int(r["step"]) for r in rows]
    for key in ("loss", "pick", "place", "done"):
        a.plot(steps, [float(r[key]) for r in rows], label=key)
    a.set(xlabel="step", ylabel="loss", yscale="log", title="training loss")
    a.legend()
    with (run_dir / "val_log.csv").open() as f:
        val = list(csv.DictReader(f))
    if val:
        vs = [int(r["step"]) for r in val]
        for key in ("step_accuracy", "pick", "place", "done"):
            b.plot(vs, [float(r[key]) for r in val], marker="o", label=key)
        b.set(xlabel="step", ylabel="accuracy", ylim=(0, 1), title="validation (unseen phrasings, layouts)")
        b.legend()
    return save_figure(fig, run_dir / "curves.png")


def save_figure(fig, out: Path) -> Path:
    """Lay out, write (PNG, 100 dpi) and close a run's matplotlib figure; returns ``out``."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
