"""Train a low-level goal-conditioned policy: the library behind ``hrl-train`` (no Hydra in here).

``train(config, run_dir)`` builds the vector env, the algorithm (with HER for off-policy algorithms)
and the callbacks, learns, and leaves in ``run_dir``: ``checkpoints/``, ``metrics.csv``,
``best_model.zip`` and ``final_model.zip`` (each with its ``.policy.yaml``), ``learning_curve.png``,
``eval.mp4`` and ``summary.json``. ``train(config, run_dir, resume=True)`` continues an interrupted run
from its last checkpoint and ends at the configured total.

A library call changes nothing process-wide: no signal handler, no torch thread count (``hrl-train`` sets
both; a caller who wants ``config.torch_threads`` calls ``torch.set_num_threads`` itself), so ``train`` runs
from any thread. Ctrl-C (KeyboardInterrupt) still stops it cleanly with a checkpoint.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from stable_baselines3.common.callbacks import CallbackList
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.noise import NormalActionNoise
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv

from hrl.algorithms import AlgorithmSpec, algorithm, features_class
from hrl.callbacks import (
    Clock,
    GoalCurriculum,
    PeriodicCheckpoint,
    PeriodicEvaluation,
    RunState,
    truncate_metrics,
)
from hrl.checkpoint import latest_checkpoint, load_rng, read_state, restore_rng
from hrl.config import AlgoConfig, TrainConfig, fingerprint_env
from hrl.evaluation import evaluate, video_fps
from hrl.plots import plot_learning_curve
from hrl.policy import write_sidecar
from hrl.video import write_video

METRICS = "metrics.csv"


class RunDirectoryError(ValueError):
    """A run directory cannot be used as asked (would overwrite a run, or has nothing to resume)."""


@dataclass
class TrainResult:
    run_dir: Path
    num_timesteps: int
    wall_time_s: float
    best_success: float
    final_success: float
    interrupted: bool


def make_training_env(config: TrainConfig, seed: int) -> VecEnv:
    vec_cls = DummyVecEnv if config.vec_env == "dummy" else SubprocVecEnv
    # A callable, not the id: each (sub)process imports env.packages before gym.make.
    return make_vec_env(
        partial(config.env.make_env, config.robot), n_envs=config.n_envs, seed=seed, vec_env_cls=vec_cls
    )


def algorithm_kwargs(
    algo: AlgoConfig, spec: AlgorithmSpec, n_actions: int, total_steps: int | None = None
) -> dict[str, Any]:
    """SB3 constructor arguments from the config; ``None`` fields are left to SB3's defaults."""
    policy_kwargs: dict[str, Any] = {"net_arch": list(algo.net_arch)}
    extractor = features_class(algo.features)
    if extractor is not None:
        policy_kwargs["features_extractor_class"] = extractor
    kwargs: dict[str, Any] = {"policy_kwargs": policy_kwargs}
    common = ["learning_rate", "batch_size", "gamma"]
    specific = (
        ["buffer_size", "learning_starts", "tau", "train_freq", "gradient_steps"]
        if spec.off_policy
        else ["n_steps", "n_epochs", "clip_range"]
    )
    for name in common + specific:
        if getattr(algo, name) is not None:
            kwargs[name] = getattr(algo, name)
    if total_steps is not None and "buffer_size" in kwargs:
        # SB3 allocates (and checkpoints) the whole buffer: never larger than the run can fill.
        kwargs["buffer_size"] = min(kwargs["buffer_size"], total_steps)
    if spec.off_policy:
        if algo.her:
            from stable_baselines3 import HerReplayBuffer

            kwargs["replay_buffer_class"] = HerReplayBuffer
            kwargs["replay_buffer_kwargs"] = {
                "n_sampled_goal": algo.n_sampled_goal,
                "goal_selection_strategy": algo.goal_selection_strategy,
            }
        if algo.ent_coef is not None and spec.name in ("sac_her", "tqc_her"):
            kwargs["ent_coef"] = algo.ent_coef if algo.ent_coef.startswith("auto") else float(algo.ent_coef)
        if algo.action_noise_std is not None:
            kwargs["action_noise"] = NormalActionNoise(np.zeros(n_actions), algo.action_noise_std * np.ones(n_actions))
        if algo.top_quantiles_to_drop_per_net is not None and spec.name == "tqc_her":
            kwargs["top_quantiles_to_drop_per_net"] = algo.top_quantiles_to_drop_per_net
    return kwargs


def build_model(config: TrainConfig, venv: VecEnv, tensorboard_log: str | None) -> Any:
    spec = algorithm(config.algo.name)
    cls = spec.load_class()
    algo = config.algo
    if algo.features == "auto":  # a config not validated (validate resolves it)
        algo = replace(algo, features=config.env.default_features())
    kwargs = algorithm_kwargs(algo, spec, venv.action_space.shape[0], config.total_steps)
    return cls(
        "MultiInputPolicy",
        venv,
        seed=config.seed,
        device=config.device,
        verbose=0,
        tensorboard_log=tensorboard_log,
        **kwargs,
    )


def check_fresh_run_dir(run_dir: Path) -> None:
    """Refuse to start a new run where one already is (nothing is ever silently overwritten)."""
    existing = [name for name in ("checkpoints", METRICS, "final_model.zip") if (run_dir / name).exists()]
    if existing:
        raise RunDirectoryError(
            f"run directory {run_dir} already holds a training run ({', '.join(existing)}); "
            f"continue it with resume={run_dir} or choose a new directory"
        )


def train(config: TrainConfig, run_dir: Path, *, resume: bool = False, command: str | None = None) -> TrainResult:
    """Train (or with ``resume``, continue) the run in ``run_dir``; KeyboardInterrupt stops it with a
    checkpoint (``TrainResult.interrupted``). ``command``: what started it, recorded in ``run_info.json``
    (``hrl-train`` passes its command line; None records a library call)."""
    config.validate()
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    spec = algorithm(config.algo.name)
    state, checkpoint = _open_run(config, run_dir, resume)
    _append_run_info(run_dir, resumed=checkpoint is not None, command=command)

    venv = make_training_env(config, seed=config.seed)
    eval_env = config.env.make_env(config.robot)
    try:
        tb_log = str(run_dir / "tensorboard") if config.tensorboard else None
        if checkpoint is None:
            model = build_model(config, venv, tb_log)
            state.next_checkpoint = config.checkpoint.every_steps
            if config.demos.episodes:
                _prefill(model, config, run_dir)
        else:
            model = _load_checkpoint(config, spec, checkpoint, venv, tb_log, run_dir)
        clock = Clock(state.wall_time_offset_s)
        evaluation = PeriodicEvaluation(
            eval_env,
            state,
            clock,
            every_steps=config.eval.every_steps,
            episodes=config.eval.episodes,
            seed=config.eval.seed,
            metrics_path=run_dir / METRICS,
            save_best=lambda m: _save_model(m, run_dir / "best_model.zip", config, steps=m.num_timesteps),
        )
        checkpointing = PeriodicCheckpoint(
            run_dir,
            state,
            clock,
            every_steps=config.checkpoint.every_steps,
            keep=config.checkpoint.keep,
            replay_buffer=spec.off_policy,
        )
        callbacks = [evaluation, checkpointing]
        if config.curriculum.enabled:
            callbacks.append(GoalCurriculum(config.curriculum, state, config.env.argument("local_goal_radius")))

        if not _learn(model, config, callbacks, fresh=checkpoint is None):
            return _finish_run(config, run_dir, model, state, clock, evaluation, checkpointing)
        path = checkpointing.save()
        print(
            f"[hrl-train] interrupted at step {model.num_timesteps}; checkpoint {path.name} written. "
            f"Continue with: hrl-train resume={run_dir}"
        )
        return TrainResult(run_dir, model.num_timesteps, clock(), state.best_success, float("nan"), True)
    finally:
        venv.close()
        eval_env.close()


def _prefill(model: Any, config: TrainConfig, run_dir: Path) -> None:
    """The expert's demonstrations into the replay buffer (a fresh run only: a resumed one restores its
    buffer), recorded in ``demos.json`` since their env steps are not in ``total_steps``."""
    from hrl.demos import prefill_demonstrations

    stats = prefill_demonstrations(model, config.demos.episodes, config.demos.noise)
    (run_dir / "demos.json").write_text(json.dumps(stats | {"noise": config.demos.noise}, indent=2))
    print(
        f"[hrl-train] {stats['episodes']} expert demonstrations in the replay buffer "
        f"({stats['steps']} env steps, {stats['success']:.0%} successful, noise {config.demos.noise})"
    )


def _open_run(config: TrainConfig, run_dir: Path, resume: bool) -> tuple[RunState, Path | None]:
    """The run's counters: fresh (refusing a directory that holds a run) or from its last checkpoint."""
    if not resume:
        check_fresh_run_dir(run_dir)
        return RunState(fingerprint=_jsonable(config.fingerprint())), None
    checkpoint = latest_checkpoint(run_dir)
    if checkpoint is None:
        raise RunDirectoryError(f"cannot resume {run_dir}: it has no checkpoint (checkpoints/latest missing)")
    saved = read_state(checkpoint)
    fingerprint = saved.get("fingerprint")
    if isinstance(fingerprint, dict) and isinstance(fingerprint.get("env"), dict):
        # written before the rover's arguments moved into env.kwargs: compare in the current layout
        fingerprint = fingerprint | {"env": _jsonable(fingerprint_env(fingerprint["env"]))}
    if fingerprint != _jsonable(config.fingerprint()):
        raise RunDirectoryError(
            f"cannot resume {run_dir}: checkpoint {checkpoint.name} was written with a different env, robot or "
            "algorithm config than this run's; nothing was changed"
        )
    return RunState(**{k: v for k, v in saved.items() if k in RunState.__dataclass_fields__}), checkpoint


def _load_checkpoint(
    config: TrainConfig, spec: AlgorithmSpec, checkpoint: Path, venv: VecEnv, tb_log: str | None, run_dir: Path
) -> Any:
    model = spec.load_class().load(checkpoint / "model.zip", env=venv, device=config.device, tensorboard_log=tb_log)
    if spec.off_policy and (checkpoint / "replay_buffer.pkl").exists():
        model.load_replay_buffer(checkpoint / "replay_buffer.pkl")
        if config.algo.her:
            model.replay_buffer.truncate_last_trajectory()  # the interrupted episode does not continue
    restore_rng(venv, load_rng(checkpoint))
    truncate_metrics(run_dir / METRICS, model.num_timesteps)
    print(f"[hrl-train] resuming {run_dir} from {checkpoint.name} (step {model.num_timesteps})")
    return model


def _learn(model: Any, config: TrainConfig, callbacks: list, fresh: bool) -> bool:
    """Train up to ``config.total_steps``; True if interrupted (KeyboardInterrupt: Ctrl-C, or SIGTERM where
    the caller turns it into one, as ``hrl-train`` does)."""
    remaining = config.total_steps - model.num_timesteps
    if remaining <= 0:
        return False
    if model.tensorboard_log is None:
        # SB3's default logger would create an empty /tmp/SB3-<date> directory for every run without TensorBoard
        from stable_baselines3.common.logger import Logger

        model.set_logger(Logger(folder=None, output_formats=[]))
    try:
        model.learn(
            total_timesteps=remaining,
            callback=CallbackList(callbacks),
            reset_num_timesteps=fresh,
            progress_bar=config.progress_bar,
            tb_log_name=config.algo.name,
        )
    except KeyboardInterrupt:
        return True
    return False


def _finish_run(
    config: TrainConfig,
    run_dir: Path,
    model: Any,
    state: RunState,
    clock: Clock,
    evaluation: PeriodicEvaluation,
    checkpointing: PeriodicCheckpoint,
) -> TrainResult:
    """Final evaluation, checkpoint and model, learning curve, video and summary."""
    final = evaluation.evaluate_now() if _last_eval_step(run_dir) != model.num_timesteps else None
    checkpointing.save()
    _save_model(model, run_dir / "final_model.zip", config, steps=model.num_timesteps)
    final_success = final["success_rate"] if final else _last_eval_success(run_dir)
    plot_learning_curve(
        run_dir / METRICS,
        run_dir / "learning_curve.png",
        title=f"{config.experiment_name}: {config.algo.name} on {config.env.describe()}",
    )
    video = _record_video(config, model, run_dir / "eval.mp4", evaluation.eval_env.metadata)
    result = TrainResult(run_dir, model.num_timesteps, clock(), state.best_success, final_success, False)
    summary = asdict(result) | {"run_dir": str(run_dir), "video": video}
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return result


def _record_video(config: TrainConfig, model: Any, path: Path, metadata: dict[str, Any]) -> str | None:
    """``eval.video_episodes`` evaluation episodes to ``path``; what was written, or why not (summary.json)."""
    if config.eval.video_episodes == 0:
        return None
    if "rgb_array" not in metadata.get("render_modes", ()):
        note = (
            f"no video: env.id={config.env.id} does not render rgb_array (render_modes {metadata.get('render_modes')})"
        )
        warnings.warn(note, stacklevel=2)
        return note
    video_env = config.env.make_env(config.robot, render_mode="rgb_array")
    try:
        _, frames = evaluate(
            lambda obs: model.predict(obs, deterministic=True)[0],
            video_env,
            config.eval.video_episodes,
            seed=config.eval.seed,
            record_episodes=config.eval.video_episodes,
            progress=False,
        )
        fps = video_fps(video_env)
    finally:
        video_env.close()
    note = ""
    if fps is None:
        fps, note = 30.0, f" (env.id={config.env.id} declares no render_fps: 30 assumed)"
        warnings.warn(f"eval.mp4{note}", stacklevel=2)
    write_video(frames, path, fps=fps)
    return f"{path.name}: {config.eval.video_episodes} episodes at {fps:g} fps{note}"


def _save_model(model: Any, path: Path, config: TrainConfig, steps: int) -> None:
    tmp = path.with_name(f".{path.stem}.tmp.zip")
    model.save(tmp)
    tmp.replace(path)
    write_sidecar(
        path,
        config.env,
        config.robot,
        config.algo,
        trained_steps=int(steps),
        experiment=config.experiment_name,
        seed=config.seed,
    )


def _append_run_info(run_dir: Path, resumed: bool, command: str | None) -> None:
    """Record what produced this run (command, commit, versions, torch threads); one entry per start or resume."""
    import platform
    import subprocess
    from importlib.metadata import PackageNotFoundError, version

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(
                ["git", *args], cwd=Path(__file__).resolve().parent, capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    import torch

    versions = {}
    for pkg in ("stable-baselines3", "sb3-contrib", "torch", "mujoco", "gymnasium", "hydra-core"):
        try:
            versions[pkg] = version(pkg)
        except PackageNotFoundError:
            versions[pkg] = None
    entry = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "resumed": resumed,
        "command": command or "hrl.training.train (a library call)",
        "commit": git("rev-parse", "HEAD"),
        "uncommitted_changes": bool(git("status", "--porcelain", "--untracked-files=no")),
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "versions": versions,
        "torch_threads": torch.get_num_threads(),  # process-wide: hrl-train sets it from config.torch_threads
    }
    path = run_dir / "run_info.json"
    history = json.loads(path.read_text()) if path.exists() else []
    history.append(entry)
    path.write_text(json.dumps(history, indent=2))


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value))


def _last_eval_step(run_dir: Path) -> int | None:
    from hrl.plots import read_metrics

    path = run_dir / METRICS
    rows = read_metrics(path) if path.exists() else []
    return int(rows[-1]["step"]) if rows else None


def _last_eval_success(run_dir: Path) -> float:
    from hrl.plots import read_metrics

    return float(read_metrics(run_dir / METRICS)[-1]["success_rate"])


__all__ = ["RunDirectoryError", "TrainResult", "build_model", "check_fresh_run_dir", "train"]
