"""Demonstrations for the VLA planner: the oracle's next step, seen through the front camera, in robomimic-style HDF5.

One episode: a tabletop scene in a fresh random layout (``env.reset(seed=...)``; every seed a new layout), a task
from the tabletop instruction generator (:mod:`llm_planner.posttrain.tabletop_instructions`, split ``train`` or
``val``), the light turned and dimmed and the front camera nudged at random (the planner is told neither). For
each of the task's goals in order, one sample: the camera image (RGB and depth), the TCP and the finger width,
and the oracle's step -- pick ``object`` and place it on ``target`` -- as the pixels of the object's top and of the
target (another block's top, or a place's centre), plus their 3-D points. The step is then carried out
*kinematically*: the block is set down where the hierarchy would put it (the grounding's own ``_on_top`` /
``_slot``), the physics settles it, and the arm is driven to hover somewhere over it, as after a real place. A
last sample per episode is the finished scene, labelled ``done``. Kinematic execution is ~50x faster than
running the learned skills and leaves the blocks where the skills aim them; the planner is measured end to end
with the real skills on scenes and phrasings it never saw (``benchmarks/vla.py``).

File layout (``FORMAT`` 1; robomimic's: its ``SequenceDataset`` reads it; one ``demo_<i>`` per episode, T samples)::

    data/                    attrs: format, total, env_args (JSON), generator (JSON: what made the file)
      demo_<i>/              attrs: num_samples, instruction, category, scene, backend, seed, split,
                                    goals (JSON ["a on b", ...]), light (JSON), camera_offset (JSON)
        obs/front_rgb        (T, S, S, 3) uint8
        obs/front_depth      (T, S, S) float16, metres
        obs/proprio          (T, 4) float32: TCP x, y, z (m, world), finger width (m)
        actions              (T, 5) float32: pick u, v, place u, v (pixels, continuous), done (0 / 1)
        pick_xyz, place_xyz  (T, 3) float32, world metres (NaN where done)
        subgoal              (T,) str: "place <object> on <target>" or "done"
    mask/<split>             names of the demos of that split (robomimic's filter keys)

A dataset card (``<name>.README.md``) is written beside the file.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from llm_planner.tabletop import Relation, TabletopTask

FORMAT = 1
#: Mixed into the demonstrations' layout seeds (``layout_seed``): "VLA".
DEMO_TAG = 0x564C41
SCENES = ("blocks", "sort", "clear")
#: Proprioception: TCP (3) and finger width.
PROPRIO = 4


@dataclass(frozen=True)
class DataConfig:
    scenes: tuple[str, ...] = SCENES
    backend: str = "mujoco"
    episodes: int = 300  # per scene
    split: str = "train"
    seed: int = 0
    #: Which templates and words are val's (the generator's ``split_seed``); the same for every ``seed``, so train
    #: files drawn with several seeds hold none of a val file's phrasings. Until 2026-12-06 the split was ``seed``.
    split_seed: int = 0
    image_size: int = 96
    light: tuple[float, float] = (0.6, 1.3)  # intensity range
    light_turn: float = 0.25  # std of the direction's perturbation
    camera_shift: float = 0.01  # m, std of the front camera's offset
    camera_turn: float = 1.0  # degrees, std of its rotation about each axis
    tasks: Sequence[TabletopTask] | None = field(default=None, compare=False)  # fixed tasks instead of generated

    def check(self) -> None:
        from sim.tabletop.physics import BACKENDS
        from sim.tabletop.scene import load_scene

        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(sorted(BACKENDS))}, got {self.backend!r}")
        if self.split not in ("train", "val"):
            raise ValueError(f"split must be 'train' or 'val' (the test set is the shipped suites), got {self.split!r}")
        if not isinstance(self.episodes, int) or self.episodes < 1:
            raise ValueError(f"episodes must be a positive integer (per scene), got {self.episodes!r}")
        if not isinstance(self.image_size, int) or not 32 <= self.image_size <= 512 or self.image_size % 16:
            raise ValueError(f"image_size must be a multiple of 16 in [32, 512], got {self.image_size!r}")
        if not self.scenes:
            raise ValueError("scenes is empty; give at least one tabletop scene (blocks, sort, clear)")
        for scene in self.scenes:
            load_scene(scene)  # names the scene and what there is when it is unknown


def layout_seed(split: str, seed: int, scene_index: int, episode: int) -> int:
    """The reset seed of one demonstration: distinct (split, seed, scene, episode) give distinct layouts. Drawn
    through ``numpy.random.SeedSequence`` from a tag of its own, so it is not one of the evaluation's layouts
    (``hierarchy.evaluate.layout_seed``: the same draw from (seed, episode, layout)) but by a 2^-32 chance, which
    ``benchmarks/vla.py`` checks against the seeds the files record."""
    return int(np.random.SeedSequence([DEMO_TAG, split == "val", seed, scene_index, episode]).generate_state(1)[0])


# ---- recording one episode ----------------------------------------------------------------------------------
def target_point(env: Any, relation: Relation) -> np.ndarray:
    """Where a planner points to place ``relation.object``: the top of the block below, or the place's centre."""
    e = env.unwrapped
    names = [o.name for o in e.scene.objects]
    if relation.on in names:
        p = e.physics.object_state(relation.on).position
        return np.array([p[0], p[1], p[2] + e.scene.object(relation.on).size[2] / 2])
    place = e.scene.place(relation.on)
    return np.array([place.center[0], place.center[1], 0.0])


def pick_point(env: Any, name: str) -> np.ndarray:
    """The top of a block's face that the camera sees (its centre, just under the top)."""
    e = env.unwrapped
    p = e.physics.object_state(name).position
    return np.array([p[0], p[1], p[2] + 0.45 * e.scene.object(name).size[2]])


def randomise_view(env: Any, rng: np.random.Generator, cfg: DataConfig) -> dict[str, Any]:
    """Turn and dim the light and nudge the front camera; returns what was done (stored with the episode) and
    the camera's pose now (``spec``)."""
    from sim.tabletop.physics import CAMERAS, LIGHT_DIRECTION, moved_camera

    physics = env.unwrapped.physics
    intensity = float(rng.uniform(*cfg.light))
    direction = np.asarray(LIGHT_DIRECTION) + rng.normal(0.0, cfg.light_turn, 3)
    direction[2] = -abs(direction[2]) - 0.3  # always from above
    direction /= np.linalg.norm(direction)
    physics.set_lighting(intensity, direction)
    shift = rng.normal(0.0, cfg.camera_shift, 3)
    angles = np.radians(rng.normal(0.0, cfg.camera_turn, 3))
    turn = rotation_xyz(angles)
    physics.set_camera_offset("front", shift, turn)
    return {
        "spec": moved_camera(CAMERAS["front"], shift, turn),
        "light": {"intensity": round(intensity, 4), "direction": np.round(direction, 4).tolist()},
        "camera_offset": {"shift_m": np.round(shift, 4).tolist(), "turn_deg": np.round(np.degrees(angles), 3).tolist()},
    }


def rotation_xyz(angles: np.ndarray) -> np.ndarray:
    (a, b, c), out = angles, np.eye(3)
    for axis, t in zip(range(3), (a, b, c), strict=True):
        r = np.eye(3)
        i, j = [k for k in range(3) if k != axis]
        r[i, i], r[i, j], r[j, i], r[j, j] = np.cos(t), -np.sin(t), np.sin(t), np.cos(t)
        out = out @ r
    return out


def hover_arm(env: Any, rng: np.random.Generator, over: np.ndarray, steps: int = 12) -> None:
    """Drive the TCP (gripper open) to a random point 8-20 cm over ``over``, as the arm is after a place."""
    goal = np.asarray(over, dtype=float) + np.array([*rng.normal(0.0, 0.03, 2), rng.uniform(0.08, 0.2)])
    e = env.unwrapped
    for _ in range(steps):
        d = (goal - e.tcp()[0]) / 0.05
        if np.linalg.norm(d) < 0.1:
            break
        env.step(np.array([*np.clip(d, -1.0, 1.0), 1.0], dtype=np.float32))


def settle(env: Any, steps: int = 10) -> None:
    e = env.unwrapped
    q, _ = e.physics.joints()
    for _ in range(steps):
        e.physics.step(q, e.physics.finger_width())


def place_kinematically(env: Any, obj: str, on: str, rng: np.random.Generator) -> None:
    """Carry out ``place obj on on`` without the skills: set the block down where the hierarchy's grounding would
    put it (on a block's top, or the freest spot of a place), let the physics settle it, and drive the arm to
    hover over it as after a real place (the demonstrations' and RL's kinematic executor)."""
    from hierarchy.tabletop import _on_top, _slot

    names = [o.name for o in env.unwrapped.scene.objects]
    rest = _on_top(env, obj, on) if on in names else _slot(env, obj, on)
    env.unwrapped.physics.set_object_pose(obj, rest + np.array([0.0, 0.0, 0.002]))
    settle(env)
    hover_arm(env, rng, rest)


def observe(env: Any, size: int) -> tuple[Any, np.ndarray]:
    """The camera image and the proprioception a planner gets."""
    e = env.unwrapped
    image = e.camera_image("front", size, depth=True)
    proprio = np.array([*e.tcp()[0], e.physics.finger_width()], dtype=np.float32)
    return image, proprio


def record_episode(env: Any, task: TabletopTask, seed: int, rng: np.random.Generator, cfg: DataConfig) -> dict:
    """Reset to layout ``seed``, randomise the view, and record the oracle's steps through ``task``."""
    env.reset(seed=seed)
    view = randomise_view(env, rng, cfg)
    hover_arm(env, rng, np.array([rng.uniform(-0.15, 0.15), rng.uniform(-0.15, 0.15), 0.05]))
    rgb, depth, proprio, actions, picks, places, subgoals = [], [], [], [], [], [], []
    for goal in (*task.goals, None):
        image, p = observe(env, cfg.image_size)
        rgb.append(image.rgb)
        depth.append(image.depth.astype(np.float16))
        proprio.append(p)
        if goal is None:
            actions.append([np.nan, np.nan, np.nan, np.nan, 1.0])
            picks.append([np.nan] * 3)
            places.append([np.nan] * 3)
            subgoals.append("done")
            break
        pick, place = pick_point(env, goal.object), target_point(env, goal)
        # the pixels where they are in this picture: projected from the pose the camera was really at
        (pu, pv), (qu, qv) = replace(image, spec=view["spec"]).project(np.stack([pick, place]))
        actions.append([pu, pv, qu, qv, 0.0])
        picks.append(pick)
        places.append(place)
        subgoals.append(f"place {goal.object} on {goal.on}")
        place_kinematically(env, goal.object, goal.on, rng)
    return {
        "obs": {
            "front_rgb": np.stack(rgb),
            "front_depth": np.stack(depth),
            "proprio": np.stack(proprio).astype(np.float32),
        },
        "actions": np.asarray(actions, dtype=np.float32),
        "pick_xyz": np.asarray(picks, dtype=np.float32),
        "place_xyz": np.asarray(places, dtype=np.float32),
        "subgoal": subgoals,
        "attrs": {
            "instruction": task.text,
            "category": task.category,
            "goals": json.dumps([g.text() for g in task.goals]),
            "light": json.dumps(view["light"]),
            "camera_offset": json.dumps(view["camera_offset"]),
        },
    }


def episodes(cfg: DataConfig) -> Iterator[tuple[str, int, TabletopTask, dict]]:
    """(scene, seed, task, recorded episode) for every episode of the configuration."""
    from hierarchy.tabletop import make_env

    cfg.check()
    for si, scene in enumerate(cfg.scenes):
        if cfg.tasks is not None:
            tasks = list(cfg.tasks)
        else:
            from llm_planner.posttrain.tabletop_instructions import generate_tabletop

            tasks = generate_tabletop(scene, cfg.episodes, split=cfg.split, seed=cfg.seed, split_seed=cfg.split_seed)
        if not tasks:
            raise ValueError(f"no tasks for scene {scene!r} (split {cfg.split!r})")
        env = make_env(scene, backend=cfg.backend)
        try:
            rng = np.random.default_rng([cfg.seed, si, cfg.split == "val"])
            for i in range(cfg.episodes):
                task = tasks[i % len(tasks)]
                seed = layout_seed(cfg.split, cfg.seed, si, i)
                yield scene, seed, task, record_episode(env, task, seed, rng, cfg)
        finally:
            env.close()


def generator_layouts(generator: dict[str, Any]) -> set[int]:
    """The layout seed of every episode a file's generator settings (``data.attrs['generator']``, also recorded in
    ``model.pt`` as ``demo_generators``) made, as :func:`episodes` draws them: checkable without the file."""
    n, split, seed = int(generator["episodes"]), str(generator["split"]), int(generator["seed"])
    return {layout_seed(split, seed, si, i) for si in range(len(generator["scenes"])) for i in range(n)}


def file_generator(path: str | Path) -> dict[str, Any]:
    """A demonstration file's generator settings (what made it)."""
    import h5py

    with h5py.File(path, "r") as h:
        return json.loads(h["data"].attrs["generator"])


# ---- HDF5 ---------------------------------------------------------------------------------------------------
def write_dataset(
    path: str | Path, cfg: DataConfig, progress: Callable[[int, int], None] | None = None
) -> dict[str, Any]:
    """Record ``cfg``'s episodes into ``path`` (robomimic-style HDF5, written to a temporary file and renamed, so
    an interrupted run leaves no half file) and a dataset card beside it; returns the summary."""
    import h5py

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".part")
    total, n, started = 0, 0, time.perf_counter()
    per_scene: dict[str, int] = {}
    categories: dict[str, int] = {}
    with h5py.File(tmp, "w") as f:
        data = f.create_group("data")
        names = []
        for scene, seed, task, ep in episodes(cfg):
            g = data.create_group(f"demo_{n}")
            obs = g.create_group("obs")
            for key, value in ep["obs"].items():
                chunks = (1, *value.shape[1:])
                obs.create_dataset(key, data=value, compression="gzip", compression_opts=4, chunks=chunks)
            g.create_dataset("actions", data=ep["actions"])
            g.create_dataset("pick_xyz", data=ep["pick_xyz"])
            g.create_dataset("place_xyz", data=ep["place_xyz"])
            g.create_dataset("subgoal", data=np.array(ep["subgoal"], dtype=h5py.string_dtype()))
            t = len(ep["actions"])
            g.attrs.update(ep["attrs"])
            g.attrs.update(num_samples=t, scene=scene, backend=cfg.backend, seed=seed, split=cfg.split)
            names.append(f"demo_{n}")
            total, n = total + t, n + 1
            per_scene[scene] = per_scene.get(scene, 0) + 1
            categories[task.category] = categories.get(task.category, 0) + 1
            if progress is not None:
                progress(n, cfg.episodes * len(cfg.scenes))
        f.create_group("mask").create_dataset(cfg.split, data=np.array(names, dtype=h5py.string_dtype()))
        generator = {k: v for k, v in asdict(cfg).items() if k != "tasks"}
        generator["tasks"] = "fixed list" if cfg.tasks is not None else "llm_planner.posttrain.tabletop_instructions"
        data.attrs.update(
            format=FORMAT,
            total=total,
            env_args=json.dumps({"env_name": "hrl/PandaTabletop-v0", "type": "hrl", "camera": "front"}),
            generator=json.dumps(generator),
        )
    tmp.replace(path)
    summary = {
        "path": str(path),
        "episodes": n,
        "samples": total,
        "per_scene": per_scene,
        "categories": categories,
        "seconds": round(time.perf_counter() - started, 1),
        "config": generator,
    }
    write_card(path, summary)
    return summary


def write_card(path: Path, summary: dict[str, Any]) -> Path:
    card = path.with_name(path.stem + ".README.md")
    cfg = summary["config"]
    card.write_text(
        f"# Dataset card: {path.name}\n\n"
        f"- Format: robomimic-style HDF5, `hierarchy.vla.data` format {FORMAT} (layout in that module's docstring)\n"
        f"- What: the oracle's next pick-and-place step for tabletop instructions, seen through the front camera "
        f"({cfg['image_size']} px RGB + depth), with the TCP and finger width\n"
        f"- Split: {cfg['split']} (instructions from `llm_planner.posttrain.tabletop_instructions`, templates and "
        f"words of this split of split seed {cfg.get('split_seed', cfg['seed'])} only; the shipped "
        "`tabletop_language*` suites are the test set and never appear)\n"
        f"- Scenes: {', '.join(f'{k} ({v} episodes)' for k, v in summary['per_scene'].items())}; "
        f"simulator {cfg['backend']}; layout seeds in each demo's `seed` attribute (the benchmark checks that no "
        "evaluation layout is among them)\n"
        f"- Samples: {summary['samples']} in {summary['episodes']} episodes; categories: "
        f"{', '.join(f'{k} {v}' for k, v in sorted(summary['categories'].items()))}\n"
        f"- Randomised: layouts, light intensity {cfg['light']} and direction (std {cfg['light_turn']}), front "
        f"camera offset (std {cfg['camera_shift']} m, {cfg['camera_turn']} deg), the arm's pose\n"
        "- Steps are carried out kinematically (blocks set down where the hierarchy puts them), not by the skills\n"
        f"- Made by: `hrl-vla stage=data` in {summary['seconds']} s; generator settings in `data.attrs['generator']`\n"
        "- Licence: as the repository\n"
    )
    return card


@dataclass
class Samples:
    """Every sample of one or more files, in memory: what training reads."""

    rgb: np.ndarray  # (N, S, S, 3) uint8
    depth: np.ndarray  # (N, S, S) float16
    proprio: np.ndarray  # (N, 4)
    actions: np.ndarray  # (N, 5)
    instruction: list[str]
    episode: np.ndarray  # (N,) index of the episode
    scene: list[str]

    def __len__(self) -> int:
        return len(self.actions)


def file_split(path: str | Path) -> tuple[str, int | None]:
    """(split, split seed) of a demonstration file: its generator's ``split_seed``, or for files written before it
    was kept (2026-12-06) its ``seed`` (the generator's split followed the seed then); None for fixed tasks."""
    import h5py

    with h5py.File(path, "r") as f:
        gen = json.loads(f["data"].attrs["generator"])
    if gen.get("tasks") == "fixed list":
        return gen["split"], None
    return gen["split"], int(gen.get("split_seed", gen["seed"]))


def read_dataset(paths: str | Path | Sequence[str | Path], split: str | None = None) -> Samples:
    """Load the samples of one or more files (only the demos in ``mask/<split>`` when given)."""
    import h5py

    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    parts: dict[str, list] = {k: [] for k in ("rgb", "depth", "proprio", "actions", "instruction", "episode", "scene")}
    e = 0
    for p in paths:
        if not Path(p).is_file():
            raise FileNotFoundError(f"VLA dataset {str(p)!r} not found; make one with `hrl-vla stage=data`")
        with h5py.File(p, "r") as f:
            if "data" not in f or f["data"].attrs.get("format") != FORMAT:
                raise ValueError(f"{p} is not a VLA dataset of format {FORMAT} (no data group or another format)")
            names = sorted(f["data"].keys(), key=lambda s: int(s.split("_")[1]))
            if split is not None:
                if f"mask/{split}" not in f:
                    raise ValueError(f"{p} has no split {split!r}; it has {', '.join(f['mask'].keys())}")
                keep = {s.decode() if isinstance(s, bytes) else s for s in f[f"mask/{split}"][()]}
                names = [n for n in names if n in keep]
            for name in names:
                g = f["data"][name]
                t = int(g.attrs["num_samples"])
                parts["rgb"].append(g["obs/front_rgb"][()])
                parts["depth"].append(g["obs/front_depth"][()])
                parts["proprio"].append(g["obs/proprio"][()])
                parts["actions"].append(g["actions"][()])
                parts["instruction"] += [str(g.attrs["instruction"])] * t
                parts["scene"] += [str(g.attrs["scene"])] * t
                parts["episode"].append(np.full(t, e))
                e += 1
    if e == 0:
        raise ValueError(f"no episodes in {[str(p) for p in paths]} (split {split!r})")
    return Samples(
        np.concatenate(parts["rgb"]),
        np.concatenate(parts["depth"]),
        np.concatenate(parts["proprio"]),
        np.concatenate(parts["actions"]),
        parts["instruction"],
        np.concatenate(parts["episode"]),
        parts["scene"],
    )
