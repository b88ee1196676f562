"""RL from execution for the VLA (``hrl-vla stage=rl``): group-relative policy gradient on the task's own check.

Start from an imitation model. Each update draws ``tasks_per_step`` instructions from the generator's train split,
each in a fresh layout, and runs ``group`` episodes of the same (task, layout) with the model *sampling*: done from
its done probability, the pick and the place cells from the heatmaps' softmax (``temperature``). Each sampled
step is carried out by the executor and the episode is rewarded by what the task's acceptance check says of the
final state: the fraction of the task's goals that hold, in order (``TabletopDomain.progress``), plus 1 when all
hold and the model itself said done, minus ``early_end_penalty`` when the model ended the episode with goals left
(said done, or pointed at nothing, which ends the episode where it is); an episode that runs out of steps is paid
its fraction. Without the penalty a premature done is paid exactly what carrying on would earn at best so far, and
sampled carrying-on risks a wrong step: RL then learns to stop early (measured: stopped-early failures doubled on
the test). ``categories`` restricts the instructions RL draws (the generator's, e.g. the harder negation,
relational, indirect, multi); by default every category the scene can express. Advantages are
the reward minus the group's mean (Dr. GRPO: no division by the standard deviation); groups whose rewards are all
equal teach nothing and are skipped (DAPO). One on-policy gradient step per update on -A * log pi(step) summed
over each episode's steps (no ratio clipping is needed for a single step on fresh samples; no KL term).

Executors: ``kinematic`` (default: the block is set down where the grounding would put it, as the
demonstrations were made, ~0.1 s per step) or ``skills`` (the shipped learned skills through the hierarchy's
grounding, ~3 s per step: the real thing, for a final few updates). The gain is measured end to end with the
skills on the test instructions and held-out layouts (``benchmarks/vla.py``), not on what RL trained on.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from llm_planner.plan import PlanError


@dataclass
class RLConfig:
    init_model: str = ""
    scenes: tuple[str, ...] = ("blocks", "sort", "clear")
    backend: str = "mujoco"
    steps: int = 60
    tasks_per_step: int = 4
    group: int = 8
    temperature: float = 1.0
    learning_rate: float = 1e-4
    executor: str = "kinematic"
    early_end_penalty: float = 0.5
    categories: tuple[str, ...] | None = None
    seed: int = 0
    save_every: int = 10
    resume: bool = False
    #: "strong": each sampled step sees its camera image with imitation's ``augment=strong`` change of look (the
    #: gradient step sees the same image); "none": the renderer's own look, as RL ran before 2026-12-06.
    augment: str = "none"
    #: The simulators whose renders RL samples in, each task's drawn at random (None: ``backend`` alone). RL in
    #: one simulator moves the model's reading towards that renderer's look (measured 2026-12-06: +5 points in
    #: MuJoCo, -3.5 in PyBullet); in both, neither renderer is the only one rewarded.
    backends: tuple[str, ...] | None = None
    #: Weight of the KL anchor: the mean per-decision KL(pi || pi_init) of the sampled steps (done, and pick and
    #: place where the step was not done) to the model the run started from (0: none, the runs before 2026-12-06).
    kl_coef: float = 0.0
    #: The generator's split seed RL draws its train-split instructions from (hierarchy.vla.data.DataConfig's).
    split_seed: int = 0

    def sims(self) -> tuple[str, ...]:
        return tuple(self.backends) if self.backends else (self.backend,)

    def check(self) -> None:
        if not self.init_model:
            raise ValueError("init_model is empty; give the imitation model (model.pt of hrl-vla stage=bc)")
        from sim.tabletop.physics import BACKENDS

        for b in self.sims():
            if b not in BACKENDS:
                raise ValueError(f"unknown backend {b!r} in rl_backends; choose from {', '.join(BACKENDS)}")
        if self.backends is not None and (not self.backends or len(set(self.backends)) != len(self.backends)):
            raise ValueError(f"rl_backends must be distinct simulators (or null for backend), got {self.backends}")
        if not 0.0 <= self.kl_coef <= 10.0:
            raise ValueError(f"kl_coef must be in [0, 10] (0: no anchor), got {self.kl_coef}")
        if self.augment not in ("none", "strong"):
            raise ValueError(f"augment must be 'none' or 'strong', got {self.augment!r}")
        if self.executor not in ("kinematic", "skills"):
            raise ValueError(f"executor must be 'kinematic' or 'skills', got {self.executor!r}")
        if self.group < 2:
            raise ValueError(f"group must be >= 2 (advantages are relative to the group), got {self.group}")
        for key in ("steps", "tasks_per_step", "save_every"):
            if getattr(self, key) < 1:
                raise ValueError(f"{key} must be >= 1, got {getattr(self, key)}")
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if not 0.0 <= self.early_end_penalty <= 2.0:
            raise ValueError(
                f"early_end_penalty must be in [0, 2] (0: an early done is paid its goals' fraction), "
                f"got {self.early_end_penalty}"
            )
        if self.categories is not None:
            from llm_planner.posttrain.tabletop_instructions import CATEGORIES

            if not self.categories:
                raise ValueError("categories is empty; give some (e.g. [negation, relational]) or null for all")
            unknown = [c for c in self.categories if c not in CATEGORIES]
            if unknown:
                raise ValueError(f"unknown categories {unknown}; the generator's are: {', '.join(CATEGORIES)}")


@dataclass
class Step:
    rgb: np.ndarray
    depth: np.ndarray
    proprio: np.ndarray
    done: bool
    pick: int  # flat heatmap cell
    place: int


def sample_step(
    planner: Any,
    text: str,
    image: Any,
    proprio: np.ndarray,
    rng: np.random.Generator | None,
    temperature: float,
    done_bonus: float = 0.0,
):
    """One decision: (done, pick cell, place cell), sampled, or with ``rng=None`` the planner's own (the best
    cells, done at its threshold, its done logit plus ``done_bonus``: a consulted planner's say); then the pick
    and place heatmaps it came from."""
    import torch

    pl, ql, dl = planner.forward(text, image.rgb, image.depth, proprio)
    if rng is None:
        done = float(torch.sigmoid(dl + done_bonus)[0]) >= planner.done_threshold
        return done, int(pl[0].flatten().argmax()), int(ql[0].flatten().argmax()), pl, ql
    done = bool(rng.random() < float(torch.sigmoid(dl)[0]))

    def draw(logits: Any) -> int:
        p = torch.softmax(logits.flatten() / temperature, 0).double().numpy()
        return int(rng.choice(len(p), p=p / p.sum()))

    return done, draw(pl[0]), draw(ql[0]), pl, ql


#: The layouts of RL's tasks and of the val stage's episodes: the demonstrations' draw (``data.layout_seed``), from
#: seed ranges of their own, so neither is a demonstration's (benchmarks/vla.py recomputes RL's to keep them out of
#: the test).
STAGE_SEEDS = {"rl": ("train", 10_000), "val": ("val", 20_000)}


def stage_layout_seed(stage: str, seed: int, scene_index: int, n: int) -> int:
    """The layout of the n-th task of ``stage`` ("rl" or "val") in scene ``scene_index``."""
    from hierarchy.vla.data import layout_seed

    split, offset = STAGE_SEEDS[stage]
    return layout_seed(split, offset + seed, scene_index, n)


def cell_pixel(cell: int, half: int) -> tuple[float, float]:
    return (cell % half) * 2 + 1.0, (cell // half) * 2 + 1.0


def run_episode(
    planner: Any, env: Any, task: Any, seed: int, rng: np.random.Generator, cfg: RLConfig, domain: Any, sample=True
):
    """One episode, sampled (or, ``sample=False``, the planner's own decisions); returns (steps, reward, success)."""
    from hierarchy.vla.data import observe, place_kinematically

    env.reset(seed=seed)
    steps: list[Step] = []
    said_done = ended = False
    half = planner.size // 2
    consult = not sample and getattr(planner, "consult", None) is not None
    if consult:
        planner.reset()
    for _ in range(len(task.goals) + 2):
        view = domain.observe(env) if consult else None  # the scene the hint is read against, and named in
        hint = planner.hint(task, view) if consult else (None, None)
        image, proprio = observe(env, planner.size)
        if sample and cfg.augment == "strong":
            from hierarchy.vla.train import strong_look

            look = image.rgb.astype(np.float32)
            strong_look(look, image.depth, rng)
            image = replace(image, rgb=np.clip(look, 0, 255).astype(np.uint8))
        done, pick, place, pl, ql = sample_step(
            planner, task.text, image, proprio, rng if sample else None, cfg.temperature, planner.done_bonus(hint[1])
        )
        steps.append(Step(image.rgb, image.depth, proprio, done, pick, place))
        if done:
            said_done = ended = True
            break
        if view is None:
            view = domain.observe(env)
        try:
            if sample or planner.decode == "cell":
                obj = planner._pick_name(image.lift(*cell_pixel(pick, half)), view)
                on = planner._place_name(image.lift(*cell_pixel(place, half)), view, obj)
            else:  # the planner's own naming of the same heatmaps (val: a planner setting to choose by)
                obj, on = planner.name_step(pl[0].numpy(), ql[0].numpy(), image, view, hint[0])
        except PlanError:
            ended = True
            break
        if cfg.executor == "kinematic":
            place_kinematically(env, obj, on, rng)
        else:
            from hierarchy.agent import Agent, AgentConfig
            from llm_planner.tabletop import PlaceSubgoal, TabletopPlan

            # the hierarchy's own execution of one grounded step (skills, budgets, stuck checks), no planning
            agent = Agent(domain, planner, AgentConfig(max_episode_steps=600))
            agent.execute(env, domain.ground(TabletopPlan(subgoals=[PlaceSubgoal(object=obj, on=on)]), view))
    if cfg.executor == "skills":
        domain.finish(env, 200, lambda: None)
    progress = domain.progress(task, env) / len(task.goals)
    success = progress == 1.0
    return steps, episode_reward(progress, said_done, ended, cfg.early_end_penalty), success


def episode_reward(progress: float, said_done: bool, ended: bool, early_end_penalty: float) -> float:
    """The reward of one episode: ``progress`` (the fraction of the task's goals that hold, in order), +1 when all
    hold and the model said done, -``early_end_penalty`` when the model ``ended`` the episode (done, or a step
    pointing at nothing) with goals left. Running out of steps is paid the fraction alone."""
    if progress >= 1.0:
        return progress + (1.0 if said_done else 0.0)
    return progress - (early_end_penalty if ended else 0.0)


def validate_episodes(
    model: str,
    scenes: tuple[str, ...] = ("blocks", "sort", "clear"),
    episodes: int = 60,
    seed: int = 0,
    backend: str = "mujoco",
    progress: bool = True,
    split_seed: int = 0,
    **planner_params: Any,
) -> dict[str, Any]:
    """End-to-end success on the generator's val split (unseen templates and words), each task in a fresh layout
    (none a demonstration's, RL's or the test's), with the planner's own decisions and the kinematic executor:
    what to choose a model (and ``planner_params``, VLAPlanner's) by before the test (``hrl-vla stage=val``).
    Returns success per scene, per category (``by_category``), overall, and per episode (``episodes``)."""
    from tqdm import tqdm

    from hierarchy.tabletop import TabletopDomain, make_env
    from hierarchy.vla.planner import VLAPlanner
    from llm_planner.posttrain.tabletop_instructions import generate_tabletop

    planner = VLAPlanner(model=model, **planner_params)
    domain, cfg, rng = TabletopDomain(), RLConfig(init_model=model), np.random.default_rng(seed)
    seen = training_split_seeds(planner.meta)
    unseen = None if seen is None else seen <= {split_seed}
    out: dict[str, Any] = {
        "model": str(planner.path),
        "episodes_per_scene": episodes,
        "seed": seed,
        "split_seed": split_seed,
        # whether the val templates and words are unseen by the model: its demonstrations and RL drew train
        # splits of this split seed only (None: its demonstration files are not on this machine)
        "unseen_phrasings": unseen,
        "training_split_seeds": None if seen is None else sorted(seen),
        "planner_params": planner_params,
    }
    if not unseen:
        import sys

        why = (
            f"its training drew the train splits of split seeds {sorted(seen)}"
            if seen is not None
            else "its demonstration files are not on this machine, so their split seeds are unknown"
        )
        print(
            f"warning: val split seed {split_seed} may not be unseen by {planner.path}: {why}; this val measures "
            "new combinations, not phrasings and words training never saw",
            file=sys.stderr,
        )
    wins, by_category, rows = [], {}, []
    with tqdm(total=episodes * len(scenes), desc="vla val", disable=not progress) as bar:
        for si, scene in enumerate(scenes):
            env = make_env(scene, backend=backend)
            try:
                tasks = generate_tabletop(scene, episodes, split="val", seed=seed + 11, split_seed=split_seed)
                ok = []
                for i, task in enumerate(tasks):
                    layout = stage_layout_seed("val", seed, si, i)
                    won = bool(run_episode(planner, env, task, layout, rng, cfg, domain, sample=False)[2])
                    ok.append(won)
                    by_category.setdefault(task.category, []).append(won)
                    rows.append(
                        {"scene": scene, "index": i, "category": task.category, "text": task.text, "success": won}
                    )
                    bar.update(1)
            finally:
                env.close()
            out[scene] = round(float(np.mean(ok)), 4)
            wins += ok
    out["all"] = round(float(np.mean(wins)), 4)
    out["by_category"] = {c: round(float(np.mean(v)), 4) for c, v in sorted(by_category.items())}
    out["episodes"] = rows  # one row per episode (scene, index in its scene's task list, category, text, success)
    return out


def _forward(net: Any, text: Any, steps: list[Step], texts: list[str]):
    import torch

    from hierarchy.vla.model import pad_tokens

    tokens, mask = pad_tokens([text(t) for t in texts])
    return net(
        torch.from_numpy(np.stack([s.rgb for s in steps])),
        torch.from_numpy(np.stack([np.asarray(s.depth, dtype=np.float32) for s in steps])),
        torch.from_numpy(np.stack([s.proprio for s in steps])),
        tokens,
        mask,
    )


def log_probs(planner: Any, text: Any, steps: list[Step], texts: list[str], ref: Any = None):
    """Sum of log pi over the sampled decisions, per step (with gradients). With ``ref`` (a network of the same
    shape, e.g. the model the run started from) also KL(pi || ref) per step: the done decision's, plus the pick
    and place heatmaps' where the sampled step was not done (what that step's decision consisted of)."""
    import torch
    from torch.nn import functional as F  # noqa: N812

    pl, ql, dl = _forward(planner.net, text, steps, texts)
    done = torch.tensor([s.done for s in steps], dtype=torch.float32)
    lp = -F.binary_cross_entropy_with_logits(dl, done, reduction="none")
    pick = torch.tensor([s.pick for s in steps])
    place = torch.tensor([s.place for s in steps])
    lp_pick = torch.log_softmax(pl.flatten(1), 1).gather(1, pick[:, None]).squeeze(1)
    lp_place = torch.log_softmax(ql.flatten(1), 1).gather(1, place[:, None]).squeeze(1)
    out = lp + (1 - done) * (lp_pick + lp_place)
    if ref is None:
        return out
    with torch.no_grad():
        rpl, rql, rdl = _forward(ref, text, steps, texts)

    def categorical_kl(logits: Any, ref_logits: Any) -> Any:
        logp, ref_logp = torch.log_softmax(logits.flatten(1), 1), torch.log_softmax(ref_logits.flatten(1), 1)
        return (logp.exp() * (logp - ref_logp)).sum(1)

    p, rp = torch.sigmoid(dl), torch.sigmoid(rdl)
    eps = 1e-6
    kl_done = p * (torch.log(p + eps) - torch.log(rp + eps)) + (1 - p) * (
        torch.log(1 - p + eps) - torch.log(1 - rp + eps)
    )
    kl = kl_done + (1 - done) * (categorical_kl(pl, rpl) + categorical_kl(ql, rql))
    return out, kl


def train_rl(cfg: RLConfig, run_dir: str | Path, progress: bool = True) -> dict[str, Any]:
    import torch
    from tqdm import tqdm

    from hierarchy.tabletop import TabletopDomain, make_env
    from hierarchy.vla.planner import VLAPlanner
    from hierarchy.vla.train import TextCache, _save
    from llm_planner.posttrain.tabletop_instructions import generate_tabletop

    cfg.check()
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "rl_config.json").write_text(json.dumps(asdict(cfg), indent=2, default=list))
    planner = VLAPlanner(model=cfg.init_model)
    import copy

    # the model the run started from, frozen (also on resume): the KL anchor, and the KL logged either way
    ref = copy.deepcopy(planner.net).eval().requires_grad_(False)
    planner.net.train()
    opt = torch.optim.AdamW(planner.net.parameters(), lr=cfg.learning_rate, weight_decay=0.0)
    text = TextCache(planner.embeddings)
    domain = TabletopDomain.with_skills() if cfg.executor == "skills" else TabletopDomain()
    sims = cfg.sims()
    envs = {(s, b): make_env(s, backend=b) for s in cfg.scenes for b in sims}
    tasks = {
        s: generate_tabletop(
            s, 400, split="train", seed=cfg.seed + 7, categories=cfg.categories, split_seed=cfg.split_seed
        )
        for s in cfg.scenes
    }
    rng = np.random.default_rng(cfg.seed)
    log = run_dir / "rl_log.csv"
    start = 0
    ckpt = run_dir / "checkpoints" / "rl_last.pt"
    if cfg.resume:
        if not ckpt.is_file():
            raise ValueError(f"resume: {ckpt} is missing; nothing to continue")
        state = torch.load(ckpt, weights_only=False)
        planner.net.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        rng.bit_generator.state = state["rng"]
        start = int(state["step"])
        lines = log.read_text().splitlines()
        if lines and ",kl," not in lines[0]:  # a log from before the kl column: its rows get an empty one
            log.write_text(
                "\n".join(
                    ["step,reward,success,groups_used,kl,seconds"]
                    + [r.rsplit(",", 1)[0] + ",," + r.rsplit(",", 1)[1] for r in lines[1:]]
                )
                + "\n"
            )
    else:
        log.write_text("step,reward,success,groups_used,kl,seconds\n")
    started = time.perf_counter()
    try:
        for step in tqdm(range(start, cfg.steps), initial=start, total=cfg.steps, disable=not progress, desc="vla rl"):
            t0 = time.perf_counter()
            batch_steps, batch_texts, batch_adv, episode_index = [], [], [], []
            rewards, successes, used = [], [], 0
            for k in range(cfg.tasks_per_step):
                si = int(rng.integers(len(cfg.scenes)))
                scene = cfg.scenes[si]
                task = tasks[scene][int(rng.integers(len(tasks[scene])))]
                seed = stage_layout_seed("rl", cfg.seed, si, step * cfg.tasks_per_step + k)
                # one simulator per task (drawn only when there are several: one-simulator runs draw as before)
                sim = sims[int(rng.integers(len(sims)))] if len(sims) > 1 else sims[0]
                planner.net.eval()
                env = envs[(scene, sim)]
                group = [run_episode(planner, env, task, seed, rng, cfg, domain) for _ in range(cfg.group)]
                planner.net.train()
                r = np.array([g[1] for g in group])
                rewards += list(r)
                successes += [g[2] for g in group]
                if np.allclose(r, r[0]):
                    continue
                used += 1
                adv = r - r.mean()
                for (steps, _, _), a in zip(group, adv, strict=True):
                    episode_index += [len(batch_adv)] * len(steps)
                    batch_adv.append(float(a))
                    batch_steps += steps
                    batch_texts += [task.text] * len(steps)
            kl_mean = 0.0
            if batch_steps:
                lp, kl = log_probs(planner, text, batch_steps, batch_texts, ref=ref)
                per_episode = torch.zeros(len(batch_adv)).index_add(0, torch.tensor(episode_index), lp)
                loss = -(torch.tensor(batch_adv) * per_episode).sum() / max(1, cfg.tasks_per_step * cfg.group)
                kl_mean = float(kl.detach().mean())
                if cfg.kl_coef > 0:
                    loss = loss + cfg.kl_coef * kl.mean()
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(planner.net.parameters(), 1.0)
                opt.step()
            with log.open("a") as f:
                f.write(
                    f"{step + 1},{np.mean(rewards):.4f},{np.mean(successes):.4f},{used},{kl_mean:.5f},"
                    f"{time.perf_counter() - t0:.1f}\n"
                )
            if (step + 1) % cfg.save_every == 0 or step + 1 == cfg.steps:
                _save(
                    ckpt,
                    {
                        "model": planner.net.state_dict(),
                        "optimizer": opt.state_dict(),
                        "rng": rng.bit_generator.state,
                        "step": step + 1,
                    },
                )
    finally:
        for env in envs.values():
            env.close()
    model_path = run_dir / "model.pt"
    _save(
        model_path,
        {
            **planner.meta,
            "state_dict": planner.net.state_dict(),
            "rl": {**asdict(cfg), "from": str(planner.path)},
            # every RL stage of the chain (a model RL'd again keeps its earlier stages' layouts out of the test)
            "rl_stages": [*rl_stages(planner.meta), {**asdict(cfg), "from": str(planner.path)}],
        },
    )
    rows = log.read_text().splitlines()[1:]
    result = {
        "model": str(model_path),
        "steps": cfg.steps,
        "first_reward": float(rows[0].split(",")[1]) if rows else None,
        "last_reward": float(rows[-1].split(",")[1]) if rows else None,
        "wall_time_s": round(time.perf_counter() - started, 1),
    }
    (run_dir / "rl_result.json").write_text(json.dumps(result, indent=2))
    plot_rl_curve(run_dir)
    return result


def training_split_seeds(meta: dict[str, Any]) -> set[int] | None:
    """The generator split seeds whose train splits a model learned from: its demonstrations' (``split_seeds`` in
    model.pt, or read from the files it names) and its RL stages' (before 2026-12-06 RL drew with split seed
    ``seed + 7``); None when a demonstration file is neither recorded nor on this machine."""
    seeds: set[int] = set()
    if meta.get("split_seeds") is not None:
        seeds |= set(meta["split_seeds"])
    else:
        from hierarchy.vla.data import file_split

        for f in meta.get("trained_on", []):
            if not Path(f).is_file():
                return None
            s = file_split(f)[1]
            if s is not None:
                seeds.add(s)
    for stage in rl_stages(meta):
        seeds.add(int(stage["split_seed"]) if "split_seed" in stage else int(stage["seed"]) + 7)
    return seeds


def rl_stages(meta: dict[str, Any]) -> list[dict[str, Any]]:
    """The RL stages a model went through, oldest first: ``rl_stages``, or for models written before it was kept
    (2026-12-06) the one ``rl`` stage they record."""
    if meta.get("rl_stages"):
        return list(meta["rl_stages"])
    return [meta["rl"]] if meta.get("rl") else []


def plot_rl_curve(run_dir: str | Path, window: int = 10) -> Path | None:
    """``rl_curve.png``: mean reward and success of the sampled episodes per update (and their running mean over
    ``window`` updates) from ``rl_log.csv``; None when the log has no rows."""
    import csv

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hierarchy.vla.train import save_figure

    run_dir = Path(run_dir)
    with (run_dir / "rl_log.csv").open() as f:
        rows = list(csv.DictReader(f))
    if not rows:
        return None
    steps = np.array([int(r["step"]) for r in rows])
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    for ax, key, top in zip(axes, ("reward", "success"), (2.0, 1.0), strict=True):
        y = np.array([float(r[key]) for r in rows])
        k = min(window, len(y))
        ax.plot(steps, y, alpha=0.35, label="per update")
        ax.plot(steps[k - 1 :], np.convolve(y, np.ones(k) / k, mode="valid"), label=f"mean of {k}")
        ax.set(xlabel="update", ylabel=key, ylim=(min(0.0, float(y.min())), top), title=f"sampled episodes: {key}")
        ax.legend()
    return save_figure(fig, run_dir / "rl_curve.png")
