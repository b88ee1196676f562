"""Typed configuration of low-level training and evaluation (plain dataclasses, no Hydra here).

The Hydra CLIs (``hrl.train``, ``hrl.eval``) register these dataclasses as schemas in Hydra's
ConfigStore, so a misspelt key (``algo.lerning_rate=...``) fails at composition; the ``validate``
methods then check values. Library code receives these objects, never a DictConfig.
"""

from __future__ import annotations

import fnmatch
import importlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hrl import DEFAULT_POLICY
from hrl.algorithms import ALGORITHMS, FEATURES, GENERIC_FEATURES
from hrl.executor import ExecutorConfig


def _positive(owner: str, name: str, value: Any, integer: bool = False) -> None:
    ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok or not math.isfinite(value) or value <= 0:
        kind = "a positive integer" if integer else "a positive number"
        raise ValueError(f"{_key(owner, name)} must be {kind}, got {value!r}")


def _choice(owner: str, name: str, value: Any, options: Any) -> None:
    if value not in options:
        raise ValueError(f"{_key(owner, name)} must be one of {sorted(options)}, got {value!r}")


def _key(owner: str, name: str) -> str:
    return f"{owner}.{name}" if owner else name


def planner_options() -> str:
    """``graph | sorb | ...``: the registered planners (llm_planner.base.PLANNERS), for error messages."""
    from llm_planner.base import PLANNERS

    return " | ".join(sorted(PLANNERS))


def suite_domain_of(task: Any) -> str:
    """The domain a composed task suite (a ``task=...`` mapping) declares: ``navigation`` when it declares none."""
    return str(task.get("domain", "navigation")) if isinstance(task, Mapping) else "navigation"


def planners_for(domain: str) -> list[str]:
    """The registered planners that plan for ``domain`` (a planner class's ``domains``; the rover's by default)."""
    from llm_planner.base import PLANNERS, planner_class

    return [n for n in sorted(PLANNERS) if domain in getattr(planner_class(n), "domains", ("navigation",))]


def check_planner_domain(planner: str, task: Any) -> None:
    """Refuse a planner on a task suite of a domain it does not plan for, naming the planners that do."""
    from llm_planner.base import planner_class

    domain = suite_domain_of(task)
    supported = getattr(planner_class(planner), "domains", ("navigation",))
    if domain not in supported:
        name = task.get("name", "?") if isinstance(task, Mapping) else "?"
        raise ValueError(
            f"planner={planner} plans for {' and '.join(supported)} only, not for task suite {name!r} (domain "
            f"{domain}); use a planner of the {domain} domain: planner={' | '.join(planners_for(domain))}"
        )


def task_options() -> str:
    """``apartment_long | maze_long | ...``: the task suites in configs/task/, for error messages."""
    from hrl.tasks import TASKS_DIR

    return " | ".join(sorted(p.stem for p in TASKS_DIR.glob("*.yaml")))


@dataclass
class EnvConfig:
    """The env to train or evaluate on: any registered Gymnasium goal env (see docs/training.md).

    ``id`` names it; ``packages`` are imported first (they register their envs, as RL Zoo's
    ``--gym-packages``); ``kwargs`` are its ``gym.make`` arguments: for our envs too (the rover's map, goal mode,
    step budget, ...: docs/environment.md; the tabletop's scene, goal mode, ...: docs/tabletop.md), checked
    against the env's own signature. ``backend`` and ``wrappers`` are what both our embodiments share (the
    physics engine; the sim-to-real wrappers): they reach only the ids of an :class:`EnvFamily` that reads
    them, never another env.
    """

    id: str = "hrl/RoverNav-v0"
    packages: list[str] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    #: The physics engine (``mujoco`` | ``pybullet``) of a family that has one; None: the env's default.
    backend: str | None = None
    #: Sim-to-real wrappers, innermost first: names or {name: ..., <param>: ...} (sim/wrappers.py).
    wrappers: list[Any] = field(default_factory=list)

    def validate(self) -> None:
        from sim.wrappers import parse_wrapper_specs

        try:
            parse_wrapper_specs(self.wrappers)
        except ValueError as err:
            raise ValueError(f"env.{err}") from None
        if not isinstance(self.kwargs, dict) or not all(isinstance(k, str) for k in self.kwargs):
            raise ValueError(f"env.kwargs must map argument names to values, got {self.kwargs!r}")
        family = self.family()
        for name in ("backend", "wrappers"):
            if getattr(self, name) and (family is None or name not in family.reads):
                takes = " | ".join(f.pattern for f in ENV_FAMILIES if name in f.reads)
                raise ValueError(
                    f"env.{name} is an argument of {takes}, not of env.id={self.id}; "
                    f"give its own {name} in env.kwargs, if it takes any"
                )
        if self.backend is not None and "backend" in self.kwargs and self.kwargs["backend"] != self.backend:
            raise ValueError(
                f"env.backend={self.backend} and env.kwargs.backend={self.kwargs['backend']} disagree: give one of them"
            )
        if family is not None:
            family.check_kwargs(self)
            if family.episode_steps is None:  # the length HER and the checks below read: an integer, now
                _positive("env.kwargs", "max_steps", self.argument("max_steps"), integer=True)
        self.import_packages()
        import gymnasium as gym

        if self.id not in gym.registry:
            import difflib

            close = difflib.get_close_matches(self.id, list(gym.registry), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            where = (
                f"after importing env.packages={self.packages}"
                if self.packages
                else "name the package that registers it in env.packages=[...]"
            )
            raise ValueError(f"env.id={self.id!r} is not a registered Gymnasium env ({where}){hint}")
        # The env validates the values (map name, goal mode, ...) with messages that list the options.

    def family(self) -> EnvFamily | None:
        """The :class:`EnvFamily` of ``id``; None for an env that gets ``kwargs`` only."""
        return env_family(self.id)

    def import_packages(self) -> None:
        """Import ``packages`` (registering their envs) and ``sim`` (ours); a missing one is a ValueError
        naming it and what to install."""
        import sim  # noqa: F401  (registers hrl/RoverNav-*)

        for package in self.packages:
            if not isinstance(package, str) or not all(part.isidentifier() for part in package.split(".")):
                raise ValueError(f"env.packages must list importable module names, got {package!r}")
            try:
                importlib.import_module(package)
            except ImportError as err:
                extra = PACKAGE_EXTRAS.get(package)
                fix = f"pip install 'hrl-stack[{extra}]'" if extra else "install the distribution that provides it"
                raise ValueError(
                    f"env.packages: cannot import {package!r} ({err}), which env.id={self.id} needs; {fix}"
                ) from None

    def make_kwargs(self, robot: RobotConfig) -> dict[str, Any]:
        """Keyword arguments for ``gym.make(self.id, ...)``: the family's (none for a foreign env), then ``kwargs``."""
        family = self.family()
        kwargs = family.arguments(self, robot) if family is not None else {}
        return kwargs | dict(self.kwargs)

    def argument(self, name: str, robot: RobotConfig | None = None) -> Any:
        """The value the env gets for its argument ``name``: given (``make_kwargs``) or its signature's default
        (a family env only; a KeyError for an argument neither gives)."""
        family = self.family()
        arguments = (family.defaults() if family is not None else {}) | self.make_kwargs(robot or RobotConfig())
        if name not in arguments:
            raise KeyError(f"env.id={self.id} has no argument {name!r}")
        return arguments[name]

    def make_env(self, robot: RobotConfig, **extra: Any) -> Any:
        """``gym.make(self.id, **self.make_kwargs(robot), **extra)`` after importing ``packages``
        (``extra``: e.g. ``render_mode``). Picklable as a bound method, so subprocess vector envs use it."""
        import gymnasium as gym

        self.import_packages()
        return gym.make(self.id, **(self.make_kwargs(robot) | extra))

    def episode_steps(self, robot: RobotConfig) -> int | None:
        """The episode length: a family env's own (its ``max_steps`` argument, given or its default), else the
        ``max_episode_steps`` given in ``kwargs`` or registered with the id (its TimeLimit); None if neither
        sets one."""
        family = self.family()
        if family is not None and family.episode_steps is not None:
            return int(family.episode_steps(family.defaults() | self.make_kwargs(robot)))
        if family is not None:
            return int(self.argument("max_steps", robot))
        if self.kwargs.get("max_episode_steps") is not None:
            return int(self.kwargs["max_episode_steps"])
        import gymnasium as gym

        self.import_packages()
        return gym.spec(self.id).max_episode_steps

    def describe(self) -> str:
        """A short name of the env for titles and logs (the rover: its map)."""
        family = self.family()
        return family.describe(self) if family is not None else self.id

    def default_features(self) -> str:
        """The feature extractor ``algo.features=auto`` means for this env: its family's first, else ``flat``."""
        family = self.family()
        return family.features[0] if family is not None and family.features else "flat"

    def engine(self) -> str:
        """The physics engine a family env runs in: ``backend`` (which ``make_kwargs`` passes on), else
        ``kwargs.backend``, else the env's default."""
        return str(self.argument("backend"))


#: The rover's arguments that were fields of :class:`EnvConfig` until 2026-12-08 (they are ``env.kwargs`` now).
#: A config saved before (a ``.policy.yaml``, a run's ``.hydra/config.yaml``, a checkpoint's fingerprint) is read
#: through :func:`migrate_env_dict`; a command line that still names one gets the new key (``moved_env_keys``).
LEGACY_ENV_FIELDS = (
    *("map", "goal_mode", "local_goal_radius", "success_radius", "control_hz", "physics_dt", "max_steps"),
    *("reward_type", "collision_penalty"),
)


def migrate_env_dict(env: Mapping[str, Any]) -> dict[str, Any]:
    """A saved ``env`` config in the current layout. One saved before 2026-12-08 carried the rover's arguments
    as fields (:data:`LEGACY_ENV_FIELDS`) and ``backend`` for every env: for the rover they become its
    ``kwargs`` (the old ``kwargs`` still over them, as they were merged); for any other env they never reached
    it (nor did ``backend``), so they are dropped. A config in the current layout comes back unchanged."""
    out = dict(env)
    legacy = {name: out.pop(name) for name in LEGACY_ENV_FIELDS if name in out}
    if not legacy:
        return out
    family = env_family(str(out.get("id", EnvConfig.id)))
    if family is not None and family.legacy_fields:
        out["kwargs"] = legacy | dict(out.get("kwargs") or {})
    else:
        out.pop("backend", None)
    return out


def moved_env_keys(args: list[str]) -> list[str]:
    """For each command-line override of a key that moved into ``env.kwargs`` (``env.map=apartment``), the
    message naming the new one (``env.kwargs.map=apartment``)."""
    moved = []
    for arg in args:
        key, sep, value = arg.lstrip("+~").partition("=")
        if key.startswith("env.") and key[4:] in LEGACY_ENV_FIELDS:
            name = key[4:]
            moved.append(f"{key} is env.kwargs.{name} now (the env's own argument): env.kwargs.{name}{sep}{value}")
    return moved


@dataclass(frozen=True)
class EnvFamily:
    """Env ids of ours that take arguments from :class:`EnvConfig`'s shared fields, and what training may
    assume of them.

    Any other registered Gymnasium env gets exactly ``env.kwargs``, plain features (``flat``), no curriculum,
    and its registered ``max_episode_steps``. A new env of ours either takes its arguments from ``env.kwargs``
    (nothing to register, if it is registered with ``max_episode_steps``) or registers a family, as the rover's
    and the tabletop's in :mod:`hrl.families`: its ``kwargs`` are then checked against its class's signature, and
    its episode length is its own ``max_steps`` argument.
    """

    #: fnmatch pattern of the env ids, e.g. ``"hrl/RoverNav-*"``.
    pattern: str
    #: ``gym.make`` keyword arguments from the shared fields and the robot config (``env.kwargs`` go over them).
    arguments: Callable[[EnvConfig, RobotConfig], dict[str, Any]]
    #: ``module:Class`` of the env: its ``__init__`` signature gives the arguments ``env.kwargs`` may give (an
    #: unknown one is refused) and their defaults (:meth:`EnvConfig.argument`); None: neither is checked.
    env_class: str | None = None
    #: The episode length from the env's arguments (given or default); None: its ``max_steps`` argument (the
    #: env truncates episodes itself, no TimeLimit).
    episode_steps: Callable[[dict[str, Any]], int] | None = None
    #: The config key of that length, named by errors.
    episode_steps_key: str = "env.kwargs.max_steps"
    #: The shared EnvConfig fields ``arguments`` reads (``backend``, ``wrappers``), and ``"robot"`` if it reads
    #: the robot config: ``hrl-train`` refuses an override of any other (it would be silently ignored).
    reads: tuple[str, ...] = ()
    #: Feature extractors (algorithms.FEATURES) that read its observation layout, besides the generic ones.
    features: tuple[str, ...] = ()
    #: Whether its envs have ``set_local_goal_radius`` (the goal curriculum).
    curriculum: bool = False
    #: A short name of a config's env for titles and logs.
    describe: Callable[[EnvConfig], str] = lambda env: env.id
    #: Whether a config saved before 2026-12-08 gave it :data:`LEGACY_ENV_FIELDS` (the rover's did).
    legacy_fields: bool = False
    #: Arguments ``arguments`` gives besides the env class's own (e.g. ``wrappers``, taken by the entry point).
    extra_arguments: tuple[str, ...] = ("wrappers",)

    def signature(self) -> Any:
        import inspect

        module, _, name = str(self.env_class).partition(":")
        return inspect.signature(getattr(importlib.import_module(module), name))

    def defaults(self) -> dict[str, Any]:
        """The env class's keyword arguments and their defaults (none without ``env_class``)."""
        if self.env_class is None:
            return {}
        return {
            n: p.default for n, p in self.signature().parameters.items() if p.default is not p.empty and n != "self"
        }

    def check_kwargs(self, env: EnvConfig) -> None:
        """Refuse an ``env.kwargs`` key the env does not take (it would be a TypeError deep in ``gym.make``),
        naming the ones it does."""
        if self.env_class is None:
            return
        accepted = set(self.signature().parameters) - {"self"} | set(self.extra_arguments)
        unknown = sorted(set(env.kwargs) - accepted)
        if unknown:
            import difflib

            hints = []
            for name in unknown:
                close = difflib.get_close_matches(name, sorted(accepted), n=1)
                hints.append(f"{name} (did you mean {close[0]}?)" if close else name)
            raise ValueError(
                f"env.kwargs: {', '.join(hints)} not an argument of env.id={env.id}; it takes "
                f"{', '.join(sorted(accepted - {'render_mode'}))}"
            )


ENV_FAMILIES: list[EnvFamily] = []

#: Module of env.packages -> the hrl-stack extra that installs it (named by the missing-package error).
PACKAGE_EXTRAS = {"panda_gym": "panda"}


def register_env_family(family: EnvFamily) -> None:
    """Add ``family`` (a later registration with the same pattern replaces the earlier one)."""
    ENV_FAMILIES[:] = [f for f in ENV_FAMILIES if f.pattern != family.pattern] + [family]


def env_family(env_id: str) -> EnvFamily | None:
    """The registered family whose pattern matches ``env_id``; None for a foreign env."""
    return next((f for f in ENV_FAMILIES if fnmatch.fnmatchcase(env_id, f.pattern)), None)


def _family_ids() -> str:
    return " | ".join(f.pattern for f in ENV_FAMILIES)


def plain_wrapper_specs(wrappers: list[Any]) -> list[Any]:
    """Wrapper specs as plain names and dicts (Hydra gives config nodes)."""
    return [w if isinstance(w, str) else dict(w) for w in wrappers]


@dataclass
class RobotConfig:
    name: str = "rover"
    lidar_rays: int | None = None
    lidar_fov_deg: float | None = None
    lidar_max_range: float | None = None


@dataclass
class RobotOverrides:
    """``hrl-eval``'s ``robot.*``: each field set replaces the evaluated policy's own robot setting; None keeps
    it (the default: the robot the policy was trained with)."""

    name: str | None = None
    lidar_rays: int | None = None
    lidar_fov_deg: float | None = None
    lidar_max_range: float | None = None

    def apply(self, robot: RobotConfig) -> RobotConfig:
        from dataclasses import asdict, replace

        return replace(robot, **{k: v for k, v in asdict(self).items() if v is not None})


@dataclass
class AlgoConfig:
    """Hyper-parameters; ``None`` means "the stable-baselines3 default". Fields of other algorithms
    are ignored (off-policy: buffer / tau / train_freq / HER; on-policy: n_steps / n_epochs / clip)."""

    name: str = "sac_her"
    #: A feature extractor (algorithms.FEATURES), or ``auto``: the env's own (its family's first: the rover's
    #: ``goal_frame``), else ``flat``. ``TrainConfig.validate`` resolves it, so runs and policies record the name.
    features: str = "auto"
    net_arch: list[int] = field(default_factory=lambda: [64, 64])
    learning_rate: float | None = 1e-3
    batch_size: int | None = 256
    gamma: float | None = 0.95
    # off-policy (SAC, TD3, TQC)
    buffer_size: int | None = 200_000
    learning_starts: int | None = 1000
    tau: float | None = 0.05
    train_freq: int | None = 1
    gradient_steps: int | None = 1
    ent_coef: str | None = None
    action_noise_std: float | None = None
    her: bool = True
    n_sampled_goal: int = 4
    goal_selection_strategy: str = "future"
    top_quantiles_to_drop_per_net: int | None = None
    # on-policy (PPO)
    n_steps: int | None = None
    n_epochs: int | None = None
    clip_range: float | None = None

    def validate(self) -> None:
        _choice("algo", "name", self.name, ALGORITHMS)
        _choice("algo", "features", self.features, {*FEATURES, "auto"})
        _choice("algo", "goal_selection_strategy", self.goal_selection_strategy, {"future", "final", "episode"})
        if not self.net_arch or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in self.net_arch):
            raise ValueError(f"algo.net_arch must be a non-empty list of positive layer sizes, got {self.net_arch!r}")
        for name in ("learning_rate", "gamma", "tau", "action_noise_std", "clip_range"):
            if getattr(self, name) is not None:
                _positive("algo", name, getattr(self, name))
        for name in ("batch_size", "buffer_size", "train_freq", "n_steps", "n_epochs"):
            if getattr(self, name) is not None:
                _positive("algo", name, getattr(self, name), integer=True)
        if self.gradient_steps is not None and (self.gradient_steps == 0 or self.gradient_steps < -1):
            raise ValueError(
                f"algo.gradient_steps must be >= 1 or -1 (as many as env steps), got {self.gradient_steps}"
            )
        if self.gamma is not None and self.gamma > 1:
            raise ValueError(f"algo.gamma must be in (0, 1], got {self.gamma}")
        _positive("algo", "n_sampled_goal", self.n_sampled_goal, integer=True)


@dataclass
class EvalConfig:
    every_steps: int = 2000
    episodes: int = 30
    video_episodes: int = 3
    seed: int = 10_000

    def validate(self) -> None:
        _positive("eval", "every_steps", self.every_steps, integer=True)
        _positive("eval", "episodes", self.episodes, integer=True)
        if self.video_episodes < 0:
            raise ValueError(f"eval.video_episodes must be >= 0, got {self.video_episodes}")


@dataclass
class CheckpointConfig:
    every_steps: int = 5000
    keep: int = 2

    def validate(self) -> None:
        _positive("checkpoint", "every_steps", self.every_steps, integer=True)
        _positive("checkpoint", "keep", self.keep, integer=True)


@dataclass
class CurriculumConfig:
    """Grow the local goal radius from ``start_radius`` to ``env.kwargs.local_goal_radius`` by ``growth``
    whenever the success rate of the last ``window`` training episodes reaches ``threshold``."""

    enabled: bool = False
    start_radius: float = 0.75
    growth: float = 1.5
    threshold: float = 0.8
    window: int = 50

    def validate(self, env: EnvConfig) -> None:
        if not self.enabled:
            return
        family = env.family()
        if family is None or not family.curriculum:
            raise ValueError(
                f"curriculum grows the local goal radius of {_family_ids()}; env.id={env.id} has none: "
                "set curriculum.enabled=false"
            )
        goal_mode, radius = env.argument("goal_mode"), env.argument("local_goal_radius")
        success_radius = env.argument("success_radius")
        if goal_mode != "local":
            raise ValueError(f"curriculum needs env.kwargs.goal_mode=local, got {goal_mode!r}")
        _positive("curriculum", "start_radius", self.start_radius)
        _positive("curriculum", "window", self.window, integer=True)
        if self.growth <= 1.0:
            raise ValueError(f"curriculum.growth must be > 1, got {self.growth}")
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"curriculum.threshold must be in (0, 1], got {self.threshold}")
        if self.start_radius > radius:
            raise ValueError(
                f"curriculum.start_radius ({self.start_radius}) exceeds env.kwargs.local_goal_radius ({radius})"
            )
        if self.start_radius <= 2 * success_radius:
            raise ValueError(
                f"curriculum.start_radius ({self.start_radius}) must exceed twice "
                f"env.kwargs.success_radius ({success_radius})"
            )


@dataclass
class DemoConfig:
    """Demonstrations in the replay buffer before training: ``episodes`` episodes of the env's own scripted
    expert (``env.unwrapped.expert_action(rng, noise)``, e.g. the tabletop's), with Gaussian ``noise`` on
    its actions so the buffer holds more than one path. Off-policy algorithms only; HER relabels them like
    any episode. Their env steps are counted in the run's summary (``demo_steps``), not in ``total_steps``."""

    episodes: int = 0
    noise: float = 0.2

    def validate(self) -> None:
        if isinstance(self.episodes, bool) or not isinstance(self.episodes, int) or self.episodes < 0:
            raise ValueError(f"demos.episodes must be an integer >= 0, got {self.episodes!r}")
        if isinstance(self.noise, bool) or not isinstance(self.noise, (int, float)) or not 0 <= self.noise < 10:
            raise ValueError(f"demos.noise must be a number in [0, 10) (action units), got {self.noise!r}")


@dataclass
class TrainConfig:
    env: EnvConfig = field(default_factory=EnvConfig)
    robot: RobotConfig = field(default_factory=RobotConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    demos: DemoConfig = field(default_factory=DemoConfig)
    experiment_name: str = "default"
    seed: int = 0
    total_steps: int = 30_000
    n_envs: int = 1
    vec_env: str = "dummy"
    #: torch's thread count, set by ``hrl-train`` (process-wide, so never by the library's ``train()``).
    torch_threads: int = 1
    device: str = "cpu"
    tensorboard: bool = True
    progress_bar: bool = True
    resume: str | None = None

    def validate(self) -> None:
        """Check every value; ``algo.features=auto`` becomes the env's own extractor here (see AlgoConfig)."""
        self.env.validate()
        self.algo.validate()
        if self.algo.features == "auto":
            self.algo.features = self.env.default_features()
        self.eval.validate()
        self.checkpoint.validate()
        self.curriculum.validate(self.env)
        self.demos.validate()
        if self.resume is not None:
            # kept in the schema so run directories saved with `resume: null` still load; never read
            raise ValueError(
                f"resume={self.resume!r} is not a config setting: continue a run with `hrl-train resume=<run dir>` "
                "(alone on the command line) or train(config, run_dir, resume=True)"
            )
        if self.demos.episodes and not ALGORITHMS[self.algo.name].off_policy:
            raise ValueError(f"demos.episodes fill a replay buffer; algo.name={self.algo.name} has none (use 0)")
        _positive("", "total_steps", self.total_steps, integer=True)
        _positive("", "n_envs", self.n_envs, integer=True)
        _positive("", "torch_threads", self.torch_threads, integer=True)
        _choice("", "vec_env", self.vec_env, {"dummy", "subproc"})
        _choice("", "device", self.device, {"cpu", "cuda", "auto"})
        family = self.env.family()
        readable = GENERIC_FEATURES | set(family.features if family is not None else ())
        if self.algo.features not in readable:
            raise ValueError(
                f"algo.features={self.algo.features} reads the observation layout of "
                f"{' | '.join(f.pattern for f in ENV_FAMILIES if self.algo.features in f.features)}, not that of "
                f"env.id={self.env.id}: use algo.features={' | '.join(sorted(readable))}"
            )
        spec = ALGORITHMS[self.algo.name]
        starts = self.algo.learning_starts
        if spec.off_policy and self.algo.her and starts is not None:
            self._check_her_episode_length(starts, family)

    def _check_her_episode_length(self, starts: int, family: EnvFamily | None) -> None:
        steps = self.env.episode_steps(self.robot)
        if steps is None:
            raise ValueError(
                f"env.id={self.env.id} has no episode limit (no max_episode_steps registered) and HER samples goals "
                "from complete episodes: set env.kwargs.max_episode_steps=N"
            )
        if starts <= steps:
            what = family.episode_steps_key if family is not None else f"the episode length of {self.env.id}"
            raise ValueError(
                f"algo.learning_starts ({starts}) must exceed {what} ({steps}): "
                "HER samples goals from complete episodes"
            )

    def fingerprint(self) -> dict[str, Any]:
        """What a checkpoint must agree with to be resumed: the env, robot and algorithm."""
        from dataclasses import asdict

        return {"env": fingerprint_env(asdict(self.env)), "robot": asdict(self.robot), "algo": asdict(self.algo)}


def fingerprint_env(env: Mapping[str, Any]) -> dict[str, Any]:
    """An env config as a checkpoint's fingerprint holds it, whenever it was saved: in the current layout
    (:func:`migrate_env_dict`), without the empty fields older checkpoints did not have (``packages``,
    ``kwargs``; an unset ``backend``)."""
    out = migrate_env_dict(env)
    for name in ("packages", "kwargs", "backend"):
        if name in out and not out[name]:
            del out[name]
    return out


@dataclass
class BackendConfig:
    """An LLM backend (llm_planner.llm.backend.BACKENDS) and its constructor arguments."""

    name: str = "llama_cpp"
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class PlannerConfig:
    """A registered planner (llm_planner.base.PLANNERS) and its constructor arguments."""

    name: str = "graph"
    params: dict[str, Any] = field(default_factory=dict)
    backend: BackendConfig | None = None  # LLM planners: planner/backend=llama_cpp|openai


@dataclass
class EvalRunConfig:
    """``hrl-eval``: a policy evaluated on an env (goal reaching), or with a planner on a task suite.

    Goal reaching reads ``env``, ``robot``, ``seed`` and ``episodes``; a planner on a task suite reads
    ``planner``, ``task``, ``tasks``, ``seeds``, ``executor`` and, of ``env``, only ``backend`` and
    ``wrappers`` (the rest is the policy's training env on the suite's map). Both read ``policy``,
    ``video_episodes`` and ``progress_bar``.
    """

    policy: str = DEFAULT_POLICY
    env: EnvConfig = field(default_factory=EnvConfig)
    robot: RobotOverrides = field(default_factory=RobotOverrides)  # goal reaching: robot.* replace the policy's
    episodes: int = 50  # goal reaching: the number of episodes
    video_episodes: int = 3  # the first n episodes (with a task suite: of the first seed) on video
    seed: int = 20_000  # goal reaching: the seed of the first episode
    progress_bar: bool = True
    planner: PlannerConfig | None = None
    task: Any = None  # a task suite from configs/task/ (hrl.tasks.TaskSuiteConfig fields)
    tasks: int | None = None  # with a task suite: its first n tasks (None: all), run once per seed
    seeds: list[int] = field(default_factory=lambda: [0])
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)

    def validate(self) -> None:
        self.env.validate()
        _positive("", "episodes", self.episodes, integer=True)
        if self.video_episodes < 0:
            raise ValueError(f"video_episodes must be >= 0, got {self.video_episodes}")
        if self.task is not None and self.planner is None:
            raise ValueError(f"task=... needs a planner: planner={planner_options()}")
        if self.planner is not None and self.task is None:
            raise ValueError(f"planner=... needs a task suite: task={task_options()}")
        if self.tasks is not None:
            if self.task is None:
                raise ValueError("tasks=... counts the tasks of a task suite; goal reaching counts episodes=...")
            _positive("", "tasks", self.tasks, integer=True)
        if not self.seeds:
            raise ValueError("seeds must name at least one seed")


@dataclass
class BenchmarkConfig:
    """``hrl-benchmark``: one job = one planner on one task suite in one backend with one seed.

    The sweep (``hydra.sweeper.params`` in configs/benchmark.yaml, or ``planner=a,b seed=0,1`` on the
    command line) multiplies them; every job appends its episodes to ``<sweep dir>/episodes/``.
    """

    name: str = "default"
    policy: str = DEFAULT_POLICY
    planner: PlannerConfig = field(default_factory=PlannerConfig)
    task: Any = None  # a task suite from configs/task/
    backend: str = "mujoco"
    seed: int = 0
    episodes: int | None = None  # at most this many tasks of each suite (None: all)
    layouts: int = 1  # tabletop suites: random layouts per task and seed (the rover's tasks have one start each)
    trajectory_every: int = 5  # keep every n-th pose of each episode for the thumbnails
    progress_bar: bool = False  # the job's own bar (the sweep's bar runs in the launching process)
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)
    #: Sim-to-real wrappers for every job of the sweep (sim/wrappers.py; as env.wrappers). One condition per
    #: sweep name: a sweep directory never mixes episodes run with different wrappers.
    wrappers: list[Any] = field(default_factory=list)

    def validate(self) -> None:
        from sim.navigation.physics import BACKENDS
        from sim.wrappers import parse_wrapper_specs

        try:
            parse_wrapper_specs(plain_wrapper_specs(self.wrappers))
        except ValueError as err:
            raise ValueError(f"wrappers: {err}") from None

        if not self.name or "/" in self.name:
            raise ValueError(f"name must be a non-empty directory name, got {self.name!r}")
        if self.task is None:
            raise ValueError(f"task must name a task suite: task={task_options()}")
        _choice("", "backend", self.backend, BACKENDS)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be an integer >= 0, got {self.seed!r}")
        if self.episodes is not None:
            _positive("", "episodes", self.episodes, integer=True)
        _positive("", "trajectory_every", self.trajectory_every, integer=True)
        _positive("", "layouts", self.layouts, integer=True)
        if self.layouts != 1 and suite_domain_of(self.task) != "tabletop":
            raise ValueError(
                f"layouts={self.layouts} applies to tabletop suites; a rover task has one start: layouts=1"
            )


from hrl import families as _families  # noqa: E402, F401  (registers the rover's and the tabletop's env families)
