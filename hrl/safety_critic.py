"""A safety critic for a goal-conditioned policy: the wall contact it is expected to make on the way to a goal.

``SafetyCritic.cost(observations, goals)`` predicts, for the low-level policy driving from the state
``observation`` towards the point ``goal``, the number of control steps it will spend in contact with a
wall before it gets there (or gives up, ``horizon`` steps). It is the policy's cost value function
``V_c(s, g) = E[sum_t c_t]`` of safe RL, with ``c_t = 1`` on a step in contact, learnt by regression on
Monte-Carlo returns of the policy's own rollouts (on-policy: the policy is deterministic, so the return of
a rollout is a sample of exactly this value).

It reads only what the robot senses: the goal in the robot's frame, its velocities and its lidar scan —
never map coordinates — so a critic trained in some maps is used in others (the shipped one was trained
in ``open``, ``two_rooms`` and ``house`` and is measured on held-out maps, see its manifest). The SoRB
planner with safety (``llm_planner/planners/sorb_safe.py``) uses it to prune and weight graph edges.

    critic = SafetyCritic.load("shipped:rover_local_safety", policy)
    contact_steps = critic.cost(observations, goals)        # (n, D) states, (n, 2) goals -> (n,)

Training, about 10 minutes on 2 cores (the defaults are the shipped critic's; its manifest has the command):
``python -m hrl.safety_critic --out hrl/policies/rover_local_safety``.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hrl.policy import SHIPPED_DIR, GoalPolicy
from sim.navigation.world import Pose2D, World, load_world

CRITIC_FILE = "critic.pt"
#: Goal distances are divided by this (the policy's local goal range) before entering the network.
GOAL_SCALE = 2.5


def nominal_env(policy: GoalPolicy, world: World | str) -> Any:
    """The policy's env in ``world`` as it was trained (observation layout, robot, lidar), without its
    training-time randomization or noise wrappers, with local goals and no episode limit."""
    import gymnasium as gym

    import sim  # noqa: F401  (registers the envs)

    kwargs = policy.env_config.make_kwargs(policy.robot_config)
    kwargs.update(map=world, goal_mode="local", max_steps=10**9)
    kwargs.pop("wrappers", None)
    return gym.make(kwargs.pop("id", policy.env_config.id), **kwargs)


def randomized_env(policy: GoalPolicy, world: World | str) -> Any:
    """:func:`nominal_env` with the domain randomization preset the project trains with
    (``configs/env/wrappers/randomize.yaml``): a robot drawn anew at every reset (mass, friction, motor gain,
    lidar noise, command latency). Reset once here, so it can be placed at once."""
    from hrl.cli import wrapper_preset
    from sim.wrappers import apply_wrappers

    env = apply_wrappers(nominal_env(policy, world), wrapper_preset("randomize"))
    env.reset(seed=0)
    return env


def file_digest(path: Path) -> str:
    """sha256 of a file (ties a critic or a cached graph to the exact policy it was made for)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# ---------------------------------------------------------------------------------------------- data


@dataclass(frozen=True)
class RolloutConfig:
    """How the training rollouts are drawn: from a random free pose (random heading, at rest) towards
    a random goal ``min_goal_distance``-``goal_radius`` m away, in sight (with the robot's clearance) for
    a ``line_of_sight_fraction`` of them; at most ``horizon`` steps or until the goal is reached."""

    rollouts_per_map: int = 800
    horizon: int = 100
    goal_radius: float = 2.5
    min_goal_distance: float = 0.3
    line_of_sight_fraction: float = 0.7
    start_clearance: float = 0.25
    seed: int = 0
    #: Fraction of rollouts driven as a planner's waypoints are: towards a first goal until within
    #: ``switch_tolerance`` of it, then, at speed and with the heading of that first leg, on to a second goal
    #: (both legs recorded, each with its own goal): the turn at a waypoint, which rollouts from rest never
    #: show. Tried against sorb_safe's door-frame contact it did not lower it (the shipped critic has none;
    #: docs/hierarchy.md, "Practice"), so it stays an option, 0 by default.
    switch_fraction: float = 0.0
    switch_tolerance: float = 0.35  # the planners' waypoint tolerance (llm_planner.planners.common)

    def __post_init__(self) -> None:
        if self.rollouts_per_map < 1 or self.horizon < 2:
            raise ValueError(
                f"rollouts_per_map must be >= 1 and horizon >= 2, got {self.rollouts_per_map}, {self.horizon}"
            )
        for name in ("line_of_sight_fraction", "switch_fraction"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if not self.switch_tolerance > 0.0:
            raise ValueError(f"switch_tolerance must be > 0 m, got {self.switch_tolerance}")
        if not 0.0 < self.min_goal_distance < self.goal_radius:
            raise ValueError(
                f"need 0 < min_goal_distance < goal_radius, got {self.min_goal_distance}, {self.goal_radius}"
            )


@dataclass
class CostData:
    """States, their goal and the wall-contact steps the policy made from there on (its cost-to-go)."""

    observations: np.ndarray  # (n, D)
    goals: np.ndarray  # (n, 2)
    cost_to_go: np.ndarray  # (n,)
    rollout: np.ndarray  # (n,) index of the rollout (splits must not cut rollouts)
    map_names: list[str]
    map_of_rollout: np.ndarray  # (rollouts,) index into map_names

    def select(self, rollouts: np.ndarray) -> CostData:
        keep = np.isin(self.rollout, rollouts)
        return CostData(
            self.observations[keep],
            self.goals[keep],
            self.cost_to_go[keep],
            self.rollout[keep],
            self.map_names,
            self.map_of_rollout,
        )

    def in_maps(self, names: list[str]) -> CostData:
        ids = [self.map_names.index(n) for n in names]
        return self.select(np.nonzero(np.isin(self.map_of_rollout, ids))[0])


def walls_world(seed: int, size: float = 10.0) -> World:
    """A generated training map: ``size`` m square, 2-4 vertical and 2-4 horizontal partial walls at random
    places, each with one or two door gaps of 0.9-1.3 m, so it has corridors 1.1-3 m wide, doors, dead ends
    and corners like the hand-made maps, but none of their layouts."""
    rng = np.random.default_rng(seed)
    walls: list[list[list[float]]] = []
    for vertical in (True, False):
        cuts = np.sort(rng.choice(np.arange(1.2, size - 1.1, 0.1), size=int(rng.integers(2, 5)), replace=False))
        cuts = cuts[np.r_[True, np.diff(cuts) >= 1.1]]  # corridors at least 1.1 m wide
        for c in cuts.tolist():
            lo = 0.0 if rng.random() < 0.5 else float(rng.uniform(1.0, 4.0))
            hi = size if rng.random() < 0.5 else float(rng.uniform(lo + 3.0, size))
            pieces, at = [], lo
            for gap in np.sort(rng.uniform(lo + 0.3, hi - 1.6, size=int(rng.integers(1, 3)))).tolist():
                if gap - at >= 0.2:
                    pieces.append((at, gap))
                    at = gap + float(rng.uniform(0.9, 1.3))
            if hi - at >= 0.2:
                pieces.append((at, hi))
            for a, b in pieces:
                ends = [[c, a], [c, b]] if vertical else [[a, c], [b, c]]
                walls.append([[round(v, 2) for v in e] for e in ends])
    return World.from_dict({"name": f"walls_{seed}", "bounds": [0.0, 0.0, size, size], "walls": walls})


def _goal_near(env: Any, world: World, rng: np.random.Generator, config: RolloutConfig, here: Any) -> Any:
    """A rollout's goal: free, ``min_goal_distance``-``goal_radius`` m from ``here``, in sight or not."""
    return world.sample_free(
        rng,
        env.unwrapped.task.goal_clearance,
        near=here,
        radius=config.goal_radius,
        min_distance=config.min_goal_distance,
        line_of_sight=bool(rng.random() < config.line_of_sight_fraction),
        max_tries=500,
    )


def _drive(
    env: Any, policy: GoalPolicy, goal: Any, config: RolloutConfig, *, switch: bool
) -> tuple[Any, list[np.ndarray], list[float], bool]:
    """Drive from the env's state towards ``goal`` for at most ``horizon`` steps: (last observation, states,
    contact per step, reached). With ``switch`` it counts as reached within ``switch_tolerance``, as a waypoint."""
    obs = env.unwrapped.set_goal(goal)
    states, contact = [], []
    for _ in range(config.horizon):
        states.append(obs["observation"].copy())
        obs, _, _, _, info = env.step(policy(obs))
        contact.append(float(info["collision"]))
        if info["is_success"] or (switch and math.dist(obs["achieved_goal"][:2], goal[:2]) <= config.switch_tolerance):
            return obs, states, contact, True
    return obs, states, contact, False


def collect_cost_rollouts(policy: GoalPolicy, maps: list[str | World], config: RolloutConfig) -> CostData:
    """Roll the policy out in each map and record every state with its Monte-Carlo cost-to-go.

    A rollout that does not reach its goal is cut short of its end by ``horizon // 2`` steps in the
    samples, so no sample's return is truncated by more than the horizon it was drawn for. A switching
    rollout (``switch_fraction``) is recorded as two: its first leg up to the switch, then its second leg.
    """
    rng = np.random.default_rng(config.seed)
    obs_rows, goal_rows, costs, rollout_ids, map_of_rollout = [], [], [], [], []

    def record(states: list[np.ndarray], contact: list[float], goal: np.ndarray, reached: bool, m: int) -> None:
        to_go = np.cumsum(contact[::-1])[::-1]
        keep = len(states) if reached else max(1, len(states) - config.horizon // 2)
        obs_rows.append(np.asarray(states[:keep]))
        goal_rows.append(np.tile(np.asarray(goal, np.float32), (keep, 1)))
        costs.append(to_go[:keep])
        rollout_ids.append(np.full(keep, len(map_of_rollout)))
        map_of_rollout.append(m)

    for m, name in enumerate(maps):
        world = load_world(name) if isinstance(name, str) else name
        env = nominal_env(policy, world)
        env.reset(seed=config.seed)
        u = env.unwrapped

        for _ in range(config.rollouts_per_map):
            start = world.sample_free(rng, config.start_clearance)
            obs = u.observation_at(Pose2D(start[0], start[1], float(rng.uniform(-math.pi, math.pi))))
            switching = config.switch_fraction > 0.0 and bool(rng.random() < config.switch_fraction)
            try:
                goal = _goal_near(env, world, rng, config, start)
            except RuntimeError:  # nothing suitable around this start: draw another rollout
                continue
            obs, states, contact, reached = _drive(env, policy, goal, config, switch=switching)
            record(states, contact, goal, reached, m)
            if not (switching and reached):
                continue
            here = (float(obs["achieved_goal"][0]), float(obs["achieved_goal"][1]))
            try:
                second = _goal_near(env, world, rng, config, here)
            except RuntimeError:
                continue
            obs, states, contact, reached = _drive(env, policy, second, config, switch=False)
            record(states, contact, second, reached, m)
        env.close()
    return CostData(
        np.concatenate(obs_rows).astype(np.float32),
        np.concatenate(goal_rows).astype(np.float32),
        np.concatenate(costs).astype(np.float32),
        np.concatenate(rollout_ids),
        [m if isinstance(m, str) else m.name for m in maps],
        np.asarray(map_of_rollout),
    )


# ---------------------------------------------------------------------------------------------- model


def critic_features(observations: np.ndarray, goals: np.ndarray) -> np.ndarray:
    """What the critic reads: the goal in the robot's frame (x, y, distance; over GOAL_SCALE), the
    normalised velocities and the normalised lidar ranges. No map coordinates, so it transfers between maps."""
    obs = np.asarray(observations, np.float32)
    g = np.asarray(goals, np.float32)
    dx, dy = g[:, 0] - obs[:, 0], g[:, 1] - obs[:, 1]
    c, s = obs[:, 2], obs[:, 3]
    tx, ty = c * dx + s * dy, -s * dx + c * dy
    rel = np.stack([tx, ty, np.hypot(tx, ty)], axis=1) / GOAL_SCALE
    return np.concatenate([rel, obs[:, 4:]], axis=1).astype(np.float32)


def rotated(observations: np.ndarray, rays: int) -> np.ndarray:
    """The same states with the robot turned in place by ``rays`` lidar rays (360-degree lidar): the scan
    rolls and the heading turns, nothing else changes. Used to ask about headings the robot may arrive with."""
    obs = np.array(observations, np.float32, copy=True)
    n = obs.shape[1] - 6
    yaw = np.arctan2(obs[:, 3], obs[:, 2]) + rays * 2.0 * math.pi / n
    obs[:, 2], obs[:, 3] = np.cos(yaw), np.sin(yaw)
    obs[:, 6:] = np.roll(obs[:, 6:], -rays, axis=1)
    return obs


def _network(inputs: int, hidden: list[int]) -> Any:
    import torch

    layers: list[Any] = []
    for width in hidden:
        layers += [torch.nn.Linear(inputs, width), torch.nn.ReLU()]
        inputs = width
    layers += [torch.nn.Linear(inputs, 1), torch.nn.Softplus()]  # a cost is never negative
    return torch.nn.Sequential(*layers)


class SafetyCritic:
    """Predicted wall-contact steps of a policy from a state to a goal (see the module docstring)."""

    def __init__(self, network: Any, config: dict[str, Any], policy_sha256: str, path: Path | None = None) -> None:
        self.network = network.eval()
        self.config = config
        self.policy_sha256 = policy_sha256
        self.path = path

    @property
    def num_rays(self) -> int:
        return int(self.config["num_rays"])

    def digest(self) -> str:
        """sha256 of the weights (keys caches of what was computed with this critic)."""
        h = hashlib.sha256()
        for name, tensor in sorted(self.network.state_dict().items()):
            h.update(name.encode())
            h.update(tensor.detach().cpu().numpy().tobytes())
        return h.hexdigest()

    def cost(self, observations: np.ndarray, goals: np.ndarray, headings: int = 1) -> np.ndarray:
        """Expected wall-contact steps from each state (row) to its goal (same row).

        With ``headings`` > 1 the answer is the mean over that many headings evenly spread around the
        circle (the state's own first): for graph nodes, whose arrival heading is not known in advance.
        """
        import torch

        obs = np.asarray(observations, np.float32)
        if obs.ndim != 2 or obs.shape[1] != 6 + self.num_rays or np.shape(goals) != (len(obs), 2):
            raise ValueError(
                f"cost() needs observations of shape (n, {6 + self.num_rays}) and goals (n, 2), got "
                f"{obs.shape} and {np.shape(goals)}"
            )
        if not (isinstance(headings, int) and 1 <= headings <= self.num_rays and self.num_rays % headings == 0):
            raise ValueError(f"headings must divide the {self.num_rays} lidar rays (1, 2, 4, ...), got {headings!r}")
        if headings > 1 and not self.config["full_circle"]:
            raise ValueError("headings > 1 needs a 360-degree lidar (turning the robot rolls the scan)")
        total = np.zeros(len(obs), np.float64)
        for k in range(headings):
            x = critic_features(rotated(obs, k * self.num_rays // headings), goals)
            with torch.no_grad():
                total += self.network(torch.as_tensor(x)).numpy()[:, 0]
        return total / headings

    # ------------------------------------------------------------------ files

    def save(self, directory: Path) -> Path:
        import torch

        directory.mkdir(parents=True, exist_ok=True)
        path = directory / CRITIC_FILE
        torch.save(
            {"state_dict": self.network.state_dict(), "config": self.config, "policy_sha256": self.policy_sha256},
            path,
        )
        return path

    @classmethod
    def load(cls, spec: str | Path, policy: GoalPolicy) -> SafetyCritic:
        """``shipped:<name>`` (hrl/policies/<name>/critic.pt) or a directory / file; it must have been
        trained for ``policy`` (same model file), since it predicts that policy's behaviour."""
        import torch

        text = str(spec)
        path = SHIPPED_DIR / text.split(":", 1)[1] if text.startswith("shipped:") else Path(text)
        if path.is_dir():
            path = path / CRITIC_FILE
        if not path.is_file():
            known = sorted(p.parent.name for p in SHIPPED_DIR.glob(f"*/{CRITIC_FILE}"))
            raise FileNotFoundError(
                f"no safety critic at {path} (give shipped:<name>, a directory or a {CRITIC_FILE}); "
                f"shipped critics: {', '.join(known) or 'none'}"
            )
        doc = torch.load(path, map_location="cpu", weights_only=True)
        digest = file_digest(policy.path)
        if doc["policy_sha256"] != digest:
            raise ValueError(
                f"safety critic {path} was trained for another policy (sha256 {doc['policy_sha256'][:12]}), "
                f"not {policy.path} ({digest[:12]}); train one for it: python -m hrl.safety_critic --policy ..."
            )
        config = doc["config"]
        network = _network(int(config["inputs"]), list(config["hidden"]))
        network.load_state_dict(doc["state_dict"])
        return cls(network, config, doc["policy_sha256"], path)


@dataclass(frozen=True)
class TrainConfig:
    hidden: tuple[int, ...] = (128, 128)
    epochs: int = 40
    batch_size: int = 512
    learning_rate: float = 1e-3
    seed: int = 0


def train_safety_critic(
    policy: GoalPolicy, data: CostData, config: TrainConfig = TrainConfig()
) -> tuple[SafetyCritic, list[float]]:
    """Fit the critic to the Monte-Carlo cost-to-go (mean squared error: its minimiser is the expected
    cost). Returns the critic and the training loss per epoch."""
    import torch

    torch.manual_seed(config.seed)
    x = torch.as_tensor(critic_features(data.observations, data.goals))
    y = torch.as_tensor(data.cost_to_go)[:, None]
    network = _network(x.shape[1], list(config.hidden))
    optim = torch.optim.Adam(network.parameters(), lr=config.learning_rate)
    generator = torch.Generator().manual_seed(config.seed)
    losses = []
    for _ in range(config.epochs):
        order = torch.randperm(len(x), generator=generator)
        total = 0.0
        for lo in range(0, len(x), config.batch_size):
            idx = order[lo : lo + config.batch_size]
            loss = torch.nn.functional.mse_loss(network(x[idx]), y[idx])
            optim.zero_grad()
            loss.backward()
            optim.step()
            total += loss.item() * len(idx)
        losses.append(total / len(x))
    lidar = policy.lidar()
    critic_config = {
        "inputs": int(x.shape[1]),
        "hidden": list(config.hidden),
        "num_rays": int(lidar.num_rays),
        "full_circle": bool(math.isclose(lidar.fov_deg, 360.0)),
        "goal_scale": GOAL_SCALE,
        "train": asdict(config),
    }
    return SafetyCritic(network, critic_config, file_digest(policy.path)), losses


def evaluate(critic: SafetyCritic, data: CostData) -> dict[str, float]:
    """How well the critic ranks and sizes the cost: error, and how it separates rollouts that touched a
    wall from clean ones (mean prediction on each, and the probability that a touching start state is
    predicted above a clean one: ROC AUC)."""
    starts = np.nonzero(np.r_[True, data.rollout[1:] != data.rollout[:-1]])[0]
    pred_all = critic.cost(data.observations, data.goals)
    pred, true = pred_all[starts], data.cost_to_go[starts]
    touched, clean = pred[true > 0], pred[true == 0]
    auc = float("nan")
    if len(touched) and len(clean):
        auc = float((touched[:, None] > clean[None, :]).mean() + 0.5 * (touched[:, None] == clean[None, :]).mean())
    return {
        "samples": len(data.cost_to_go),
        "rollouts": len(starts),
        "mae_contact_steps": round(float(np.mean(np.abs(pred_all - data.cost_to_go))), 3),
        "mean_true_cost_per_rollout": round(float(true.mean()), 3),
        "mean_pred_cost_per_rollout": round(float(pred.mean()), 3),
        "rollouts_touching_wall": round(float((true > 0).mean()), 3),
        "pred_touching": round(float(touched.mean()) if len(touched) else float("nan"), 3),
        "pred_clean": round(float(clean.mean()) if len(clean) else float("nan"), 3),
        "auc_touching_vs_clean": round(auc, 3),
    }


def concatenate(parts: list[CostData]) -> CostData:
    """One data set from several (rollout and map indices renumbered)."""
    rollouts = maps = 0
    fields: dict[str, list[np.ndarray]] = {"observations": [], "goals": [], "cost_to_go": [], "rollout": []}
    names, map_of_rollout = [], []
    for d in parts:
        for k in ("observations", "goals", "cost_to_go"):
            fields[k].append(getattr(d, k))
        fields["rollout"].append(d.rollout + rollouts)
        map_of_rollout.append(d.map_of_rollout + maps)
        names += d.map_names
        rollouts += len(d.map_of_rollout)
        maps += len(d.map_names)
    return CostData(
        **{k: np.concatenate(v) for k, v in fields.items()},
        map_names=names,
        map_of_rollout=np.concatenate(map_of_rollout),
    )


def _collected(path: Path | None, collect: Any) -> CostData:
    """Rollouts from ``path`` if it exists, else collected (and kept there when a path is given)."""
    if path is not None and path.is_file():
        with np.load(path) as f:
            return CostData(**{k: f[k] for k in f.files if k != "map_names"}, map_names=list(f["map_names"]))
    data = collect()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fields = {k: v for k, v in vars(data).items() if k != "map_names"}
        np.savez_compressed(path, map_names=np.asarray(data.map_names), **fields)
    return data


def main(argv: list[str] | None = None) -> None:
    """Collect rollouts, train on the training maps, measure on the held-out maps, write critic + manifest."""
    import argparse
    import os
    import platform
    import subprocess
    import sys
    import time

    import torch
    import yaml

    from hrl import DEFAULT_POLICY

    parser = argparse.ArgumentParser(description="train a safety critic for a goal-conditioned policy")
    parser.add_argument("--policy", default=DEFAULT_POLICY)
    parser.add_argument("--out", type=Path, default=SHIPPED_DIR / "rover_local_safety")
    parser.add_argument("--train-maps", nargs="+", default=["open", "two_rooms", "house"])
    parser.add_argument("--test-maps", nargs="+", default=["apartment", "maze"])
    parser.add_argument("--generated", type=int, default=40, help="also train in this many walls_world maps")
    parser.add_argument("--rollouts-per-generated-map", type=int, default=60)
    parser.add_argument("--rollouts-per-map", type=int, default=RolloutConfig.rollouts_per_map)
    parser.add_argument("--test-rollouts-per-map", type=int, default=200)
    parser.add_argument("--epochs", type=int, default=TrainConfig.epochs)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--switch-fraction",
        type=float,
        default=RolloutConfig.switch_fraction,
        help="fraction of rollouts that switch goals at a waypoint, as a plan's are driven (both legs recorded)",
    )
    parser.add_argument(
        "--data", type=Path, default=None, help="directory to keep the rollouts in (reused if there: retrain only)"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # the process's own choice (CLI entry point): 2 shared cores
    policy = GoalPolicy.load(args.policy)
    t0 = time.perf_counter()
    generated = [walls_world(1000 + k) for k in range(args.generated)]  # seeds apart from any test use
    splits = {
        "train": (args.train_maps, args.rollouts_per_map, args.seed),
        "generated": (generated, args.rollouts_per_generated_map, args.seed + 2),
        "test": (args.test_maps, args.test_rollouts_per_map, args.seed + 1),
    }
    data = {
        split: _collected(
            args.data / f"{split}.npz" if args.data else None,
            lambda maps=maps, n=n, seed=seed: collect_cost_rollouts(
                policy, maps, RolloutConfig(rollouts_per_map=n, seed=seed, switch_fraction=args.switch_fraction)
            ),
        )
        for split, (maps, n, seed) in splits.items()
        if maps
    }
    train = concatenate([data[k] for k in ("train", "generated") if k in data])
    test = data["test"]
    t_collect = time.perf_counter() - t0
    critic, losses = train_safety_critic(policy, train, TrainConfig(epochs=args.epochs, seed=args.seed))
    wall = time.perf_counter() - t0
    critic.save(args.out)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", __file__], capture_output=True, text=True).stdout.strip()
    manifest = {
        "name": args.out.name,
        "file": CRITIC_FILE,
        "what": "expected wall-contact steps of the policy from a state to a goal (Monte-Carlo cost value)",
        "policy": args.policy,
        "policy_sha256": critic.policy_sha256,
        "command": "python -m hrl.safety_critic " + " ".join(argv if argv is not None else sys.argv[1:]),
        "commit": commit,
        "uncommitted_changes": bool(dirty),
        "seed": args.seed,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "wall_time_s": round(wall, 1),
        "collect_time_s": round(t_collect, 1),
        "rollouts": asdict(
            RolloutConfig(rollouts_per_map=args.rollouts_per_map, seed=args.seed, switch_fraction=args.switch_fraction)
        ),
        "train_maps": args.train_maps,
        "generated_train_maps": f"{args.generated} walls_world maps (seeds 1000-{999 + args.generated}), "
        f"{args.rollouts_per_generated_map} rollouts each",
        "test_maps (held out)": args.test_maps,
        "final_train_mse": round(losses[-1], 4),
        "evaluation": {
            "train": evaluate(critic, train),
            **{f"held_out_{m}": evaluate(critic, test.in_maps([m])) for m in args.test_maps},
        },
        "versions": {"torch": str(torch.__version__)},
    }
    (args.out / "manifest.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    print(yaml.safe_dump(manifest, sort_keys=False))


if __name__ == "__main__":
    main()
