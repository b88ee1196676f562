"""Goal-conditioned policies loaded from a checkpoint with their config beside it.

Every model ``hrl-train`` writes (``final_model.zip``, ``best_model.zip``, shipped policies) has a
``<name>.policy.yaml`` beside it naming the algorithm and the env/robot configuration it was trained
with, so ``GoalPolicy.load(path)`` needs nothing else.

    policy = GoalPolicy.load("shipped:rover_local")
    action = policy.act(observation, goal)      # observation vector + (x, y) goal -> (v, w) in [-1, 1]
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from hrl.algorithms import algorithm
from hrl.config import AlgoConfig, EnvConfig, RobotConfig, migrate_env_dict

SHIPPED_DIR = Path(__file__).resolve().parent / "policies"


def sidecar_path(model_path: Path) -> Path:
    return model_path.with_name(model_path.name.removesuffix(".zip") + ".policy.yaml")


def write_sidecar(model_path: Path, env: EnvConfig, robot: RobotConfig, algo: AlgoConfig, **extra: Any) -> Path:
    """``<model>.policy.yaml``: the algorithm, env and (for an env whose family reads it: the rover's) robot
    config the model was trained with, and ``extra``."""
    path = sidecar_path(model_path)
    family = env.family()
    reads_robot = family is not None and "robot" in family.reads
    doc = {"algo": asdict(algo), "env": asdict(env), **({"robot": asdict(robot)} if reads_robot else {}), **extra}
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(yaml.safe_dump(doc, sort_keys=False))
    tmp.replace(path)
    return path


def shipped_file(spec: str, filename: str, what: str) -> Path:
    """``shipped:<name>`` -> hrl/policies/<name>/<filename>; an unknown name names the shipped ones."""
    name = spec.split(":", 1)[1]
    path = SHIPPED_DIR / name / filename
    if not path.is_file():
        known = sorted(p.parent.name for p in SHIPPED_DIR.glob(f"*/{filename}"))
        raise ValueError(f"unknown shipped {what} {name!r}; shipped: {', '.join(known) or 'none'}")
    return path


def resolve_policy_path(spec: str | Path) -> Path:
    """``shipped:<name>`` (a policy shipped in hrl/policies/), a model ``.zip``, or a run directory."""
    text = str(spec)
    if text.startswith("shipped:"):
        return shipped_file(text, "model.zip", "policy")
    path = Path(text)
    if path.is_dir():
        for candidate in ("best_model.zip", "final_model.zip"):
            if (path / candidate).is_file():
                return path / candidate
        raise FileNotFoundError(f"no best_model.zip or final_model.zip in run directory {path}")
    if not path.is_file():
        raise FileNotFoundError(
            f"policy file {path} does not exist (give a model .zip, a run directory or shipped:<name>)"
        )
    return path


class GoalPolicy:
    """A trained low-level policy: ``act(observation, goal) -> action``."""

    def __init__(self, model: Any, env: EnvConfig, robot: RobotConfig, algo: AlgoConfig, path: Path) -> None:
        self.model = model
        self.env_config = env
        self.robot_config = robot
        self.algo_config = algo
        self.path = path

    @classmethod
    def load(cls, spec: str | Path, device: str = "cpu") -> GoalPolicy:
        path = resolve_policy_path(spec)
        meta_path = sidecar_path(path)
        if not meta_path.is_file():
            raise FileNotFoundError(f"{path} has no {meta_path.name} beside it (the config it was trained with)")
        meta = yaml.safe_load(meta_path.read_text())
        algo = AlgoConfig(**meta["algo"])
        env = EnvConfig(**migrate_env_dict(meta["env"]))
        robot = RobotConfig(**(meta.get("robot") or {}))  # none for an env that reads no robot config
        spec = algorithm(algo.name)
        custom: dict[str, Any] = {}
        if spec.off_policy:
            from stable_baselines3.common.buffers import DictReplayBuffer

            # Inference only: no HER buffer (it would need a live env) and no big allocation.
            custom = {"replay_buffer_class": DictReplayBuffer, "replay_buffer_kwargs": {}, "buffer_size": 1}
        model = spec.load_class().load(path, device=device, custom_objects=custom)
        return cls(model, env, robot, algo, path)

    def make_env(self, **extra: Any) -> Any:
        """The env the policy was trained on, rebuilt from its ``.policy.yaml`` (id, packages, arguments);
        ``extra`` go to ``gym.make`` too (e.g. ``render_mode="rgb_array"``)."""
        return self.env_config.make_env(self.robot_config, **extra)

    def lidar(self) -> Any:
        """The lidar layout the policy was trained with (robot spec plus the run's overrides)."""
        from robots.spec import load_robot

        r = self.robot_config
        return load_robot(r.name).lidar.with_overrides(r.lidar_rays, r.lidar_fov_deg, r.lidar_max_range)

    def check_compatible(self, observation_space: Any) -> None:
        """Raise if an env's observations differ from those the policy was trained on."""
        expected = self.model.observation_space["observation"].shape
        got = observation_space["observation"].shape
        if expected != got:
            family = self.env_config.family()
            if family is not None and "robot" in family.reads:
                lidar = self.robot_config.lidar_rays or "robot default"
                fix = f" (lidar rays {lidar}), the env gives {got}; use the same robot and lidar"
            else:
                fix = f" ({self.env_config.id}), the env gives {got}; use the env it was trained on"
            raise ValueError(f"policy {self.path} expects observations of shape {expected}{fix}")

    def act(self, observation: np.ndarray, goal: Any) -> np.ndarray:
        """The rover's interface: its observation vector (pose first) and an (x, y) goal; other envs' policies
        take their whole observation dict through ``__call__``."""
        obs = np.asarray(observation, dtype=np.float32)
        return self({"observation": obs, "achieved_goal": obs[:2], "desired_goal": np.asarray(goal, np.float32)})

    def __call__(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        action, _ = self.model.predict(obs, deterministic=True)
        return action
