"""``hrl-eval``: evaluate a policy checkpoint on a map and goal mode, or a planner with it on a task suite
(Hydra config: configs/eval.yaml).

Prints a summary and writes ``summary.json`` (success rate, mean steps, collisions, episodes) and
``eval.mp4`` into the run directory (``runs/eval/<time>/``).

    hrl-eval                                               # shipped policy, local goals, open map
    hrl-eval policy=runs/train/rover_local/<time> env=apartment_local episodes=100
    hrl-eval planner=graph task=apartment_long tasks=4 seeds=[0,1]   # the first 4 tasks, twice
    hrl-eval planner=symbolic task=tabletop_stack env.backend=pybullet seeds=[0,1,2]   # the Panda's suites

A task suite that declares ``domain: tabletop`` (configs/task/tabletop_*.yaml) runs the tabletop hierarchy
(:func:`hierarchy.evaluate.run_tabletop_suite`: the planner over the shipped Panda skills, each seed a new random
layout), writing ``episodes.jsonl``, ``events.jsonl``, ``summary.json`` (per category), ``summary.md`` and a
video of the first episode; of the rover's keys it reads only ``env.backend``, ``tasks`` and ``seeds``.

Each mode reads only some keys (goal reaching: ``env``, ``robot``, ``seed``, ``episodes``; a task suite:
``planner``, ``task``, ``tasks``, ``seeds``, ``executor``, ``env.backend``, ``env.wrappers``); an override
of a key the chosen mode would ignore is an error that names the key and the one to use instead.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NoReturn

from hrl.cli import fail as cli_fail
from hrl.cli import overridden_keys, run_hydra_app, typed_config
from hrl.config import (
    EnvConfig,
    EvalRunConfig,
    check_planner_domain,
    env_family,
    plain_wrapper_specs,
    suite_domain_of,
)
from hrl.train import open_env_kwargs, register_schemas

#: Keys a mode does not read -> why, and what to use instead. ``hrl-eval`` refuses an override of one
#: (it would otherwise be dropped silently). The most specific key matches first.
IGNORED_WITH_A_TASK = {
    "env": "a suite runs in the policy's own training env on the suite's map; of env, only env.backend and "
    "env.wrappers (env/wrappers=...) apply",
    "env.kwargs.map": "the map is the task suite's (task.map); choose a suite on that map or write one in "
    "configs/task/",
    "env.kwargs.max_steps": "the step budget is the suite's: set task.max_episode_steps=N",
    "robot": "the robot is the policy's own (its .policy.yaml)",
    "seed": "use seeds=[...] (the suite is run once per seed)",
    "episodes": "use tasks=N (the first N tasks of the suite, run once per seed)",
}
IGNORED_WITHOUT_A_TASK = {
    "seeds": "goal reaching uses seed=N",
    "tasks": "goal reaching counts episodes=N",
    "executor": "the subgoal executor runs only with planner=... task=...",
}
READ_WITH_A_TASK = ("env.backend", "env.wrappers", "env/wrappers")
#: With a tabletop suite (``domain: tabletop``), of the keys a rover suite reads.
IGNORED_WITH_A_TABLETOP_TASK = {
    **IGNORED_WITH_A_TASK,
    "env": "a tabletop suite runs in its own scene (task.scene); of env, only env.backend applies",
    "env.kwargs.map": "a tabletop suite runs in its own scene (task.scene), not on a map",
    "env.wrappers": "the sim-to-real wrappers are the rover's; a tabletop suite runs without them",
    "env/wrappers": "the sim-to-real wrappers are the rover's; a tabletop suite runs without them",
    "policy": "a tabletop suite runs the shipped Panda skills (hierarchy/tabletop.py, SKILLS), not one policy",
    "robot": "the tabletop's robot is the Panda of its scene",
    "executor": "the tabletop's loop has its own limits (hierarchy.agent.AgentConfig); the step budget is the "
    "suite's: set task.max_episode_steps=N",
}
READ_WITH_A_TABLETOP_TASK = ("env.backend",)


def fail(message: str) -> NoReturn:
    cli_fail("hrl-eval", message)


def run_evaluation(config: EvalRunConfig, out_dir: Path, given_kwargs: set[str] | None = None) -> dict:
    """Evaluate ``config.policy`` on ``config.env`` (a policy trained on a foreign env such as PandaReach-v3:
    on its own env from its .policy.yaml with the ``env.kwargs`` named in ``given_kwargs``, None: all, unless
    env.id names another foreign one); returns the summary written to summary.json."""
    from hrl.evaluation import evaluate, video_fps
    from hrl.policy import GoalPolicy
    from hrl.video import write_video

    config.validate()
    policy = GoalPolicy.load(config.policy)
    robot = config.robot.apply(policy.robot_config)
    env_config = eval_env_config(config.env, policy.env_config, given_kwargs)
    kwargs = env_config.make_kwargs(robot)
    # render_mode only when recording: some envs refuse render_mode=None (panda-gym renders rgb_array by default)
    env = env_config.make_env(robot, **({"render_mode": "rgb_array"} if config.video_episodes else {}))
    policy.check_compatible(env.observation_space)
    summary, frames = evaluate(
        policy,
        env,
        config.episodes,
        seed=config.seed,
        record_episodes=config.video_episodes,
        progress=config.progress_bar,
    )
    fps = video_fps(env) or 30.0
    env.close()
    out_dir.mkdir(parents=True, exist_ok=True)
    doc = {
        "policy": str(policy.path),
        "env_id": env_config.id,
        "env": kwargs,
        "episodes": summary.episodes,
        "success_rate": summary.success_rate,
        "mean_steps": summary.mean_steps,
        "mean_steps_successful": summary.mean_steps_successful,
        "collisions": summary.collisions,
        "episodes_with_collision": summary.episodes_with_collision,
        "collision_free_rate": (
            round(1.0 - summary.episodes_with_collision / summary.episodes, 4)
            if summary.episodes_with_collision is not None
            else None  # the env does not report collisions
        ),
        "mean_final_distance": summary.mean_final_distance,
        "per_episode": summary.to_dict()["per_episode"],
    }
    tmp = out_dir / ".summary.json.tmp"
    tmp.write_text(json.dumps(doc, indent=2))
    tmp.replace(out_dir / "summary.json")
    if frames:
        write_video(frames, out_dir / "eval.mp4", fps=fps)
    return doc


def eval_env_config(env: EnvConfig, trained_on: EnvConfig, given: set[str] | None = None) -> EnvConfig:
    """The env of goal reaching: ``env``, except for a policy trained on another kind of env (a foreign one,
    or another family's, e.g. the tabletop's) while ``env.id`` is the default (the rover's): then its own
    training env, with ``env.backend``, ``env.wrappers`` and the ``env.kwargs`` named in ``given`` (the
    command line's: ``env.kwargs.goal_mode=reach``; the default preset's are the rover's) added; None: all."""
    other_kind = trained_on.family() is not env.family()
    if other_kind and env.id == EnvConfig.id and env.family() is not None:
        kwargs = {k: v for k, v in env.kwargs.items() if given is None or k in given}
        own = {k: v for k, v in trained_on.kwargs.items() if not (k == "backend" and env.backend)}
        return replace(
            trained_on,
            kwargs=own | kwargs,
            backend=env.backend or trained_on.backend,
            wrappers=env.wrappers or trained_on.wrappers,
        )
    return env


def given_env_kwargs(keys: list[str], env: EnvConfig) -> set[str]:
    """The ``env.kwargs`` the command line gave (``keys``: its overridden keys): all of them when it chose a
    preset (``env=...``) or set the whole dict, else those it named (``env.kwargs.<name>``)."""
    if any(k in ("env", "env.kwargs") for k in keys):
        return set(env.kwargs)
    return {k.split(".")[2] for k in keys if k.startswith("env.kwargs.")}


def ignored_overrides(keys: list[str], with_task: bool, tabletop: bool = False) -> list[str]:
    """The overridden ``keys`` the mode (``with_task``: a planner on a task suite; ``tabletop``: on a tabletop
    suite) would ignore, each with why and what to use instead."""
    if tabletop:
        table, read = IGNORED_WITH_A_TABLETOP_TASK, READ_WITH_A_TABLETOP_TASK
    else:
        table = IGNORED_WITH_A_TASK if with_task else IGNORED_WITHOUT_A_TASK
        read = READ_WITH_A_TASK if with_task else ()
    problems = []
    for key in keys:
        if any(key == k or key.startswith((f"{k}.", f"{k}/")) for k in read):
            continue
        match = next(
            (k for k in sorted(table, key=len, reverse=True) if key == k or key.startswith((f"{k}.", f"{k}/"))), None
        )
        if match is not None:
            problems.append(f"{key}: {table[match]}")
    return problems


def run_hierarchical(config: EvalRunConfig, out_dir: Path) -> dict:
    """``planner=<name> task=<suite>``: the planner with the policy on the suite's first ``config.tasks``
    tasks (all when None), once per seed in ``config.seeds``, in the policy's training env on the suite's map
    with ``config.env.backend`` and ``config.env.wrappers``; a video of the first ``config.video_episodes``
    episodes of the first seed."""
    from omegaconf import OmegaConf

    from hrl.hierarchy_eval import markdown_table, run_suite
    from hrl.policy import GoalPolicy
    from hrl.tasks import suite_from_dict

    config.validate()
    task = config.task if isinstance(config.task, dict) else OmegaConf.to_container(config.task)
    suite = suite_from_dict(task)
    n_tasks = len(suite.episodes)
    if config.tasks is not None and config.tasks > n_tasks:
        raise ValueError(
            f"tasks={config.tasks}, but task suite {suite.name!r} has {n_tasks} tasks; use tasks<={n_tasks}"
        )
    policy = GoalPolicy.load(config.policy)
    result = run_suite(
        config.planner.name,
        suite,
        policy,
        planner_params=planner_params(config.planner),
        seeds=tuple(config.seeds),
        executor=replace(config.executor, max_episode_steps=suite.max_episode_steps),
        out_dir=out_dir,
        video_episode=range(config.video_episodes),
        progress=config.progress_bar,
        limit=config.tasks,
        backend=config.env.backend,
        wrappers=plain_wrapper_specs(config.env.wrappers),
        label=planner_label(config),
    )
    print(markdown_table([result.summary]), end="")
    return result.summary


def run_tabletop(config: EvalRunConfig, out_dir: Path) -> dict:
    """``planner=<name> task=<tabletop suite>``: the planner over the shipped Panda skills on the suite's first
    ``config.tasks`` tasks (all when None), once per seed (each a new random layout), in ``config.env.backend``;
    a video of the first episode unless ``video_episodes=0`` (a tabletop suite records that one only)."""
    from omegaconf import OmegaConf

    from hierarchy.evaluate import run_tabletop_suite
    from hierarchy.suites import tabletop_suite_from_dict
    from hierarchy.tabletop import TabletopDomain
    from llm_planner.base import make_planner

    config.validate()
    task = config.task if isinstance(config.task, dict) else OmegaConf.to_container(config.task)
    suite = tabletop_suite_from_dict(task, source=f"task={task.get('name', 'tabletop suite')}")
    if config.tasks is not None:
        if config.tasks > len(suite.tasks):
            raise ValueError(
                f"tasks={config.tasks}, but task suite {suite.name!r} has {len(suite.tasks)} tasks; "
                f"use tasks<={len(suite.tasks)}"
            )
        suite = replace(suite, tasks=suite.tasks[: config.tasks])
    planner = make_planner(config.planner.name, **planner_params(config.planner))
    _, summary = run_tabletop_suite(
        planner,
        suite,
        TabletopDomain.with_skills(),
        **({"backend": config.env.backend} if config.env.backend is not None else {}),
        seeds=tuple(config.seeds),
        out_dir=out_dir,
        video=config.video_episodes > 0,
        progress=config.progress_bar,
        label=planner_label(config),
    )
    table = tabletop_markdown(summary)
    (out_dir / "summary.md").write_text(table)
    print(table, end="")
    return summary


def tabletop_markdown(summary: dict[str, Any]) -> str:
    """A tabletop suite's summary as a markdown table: one row per category, then all of them."""
    head = (
        "| planner | suite | backend | category | episodes | success (95 % CI) | mean steps | replans "
        "| planner latency (ms) |"
    )
    lines = [head, "|" + "---|" * 9]
    cells = [*summary["categories"].items()] + ([("all", summary)] if len(summary["categories"]) > 1 else [])
    for category, c in cells:
        lo, hi = c["success_ci95"]
        lines.append(
            f"| {summary['planner']} | {summary['suite']} | {summary['backend']} | {category} | {c['episodes']} "
            f"| {c['success_rate']:.0%} ({lo:.0%}–{hi:.0%}) | {c['mean_steps']:.0f} | {c['mean_replans']:.2f} "
            f"| {1000 * c['mean_planner_latency_s']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def configured_planner(name: str) -> tuple[str, dict[str, Any]]:
    """What ``planner=<name>`` gives the Hydra CLIs (configs/planner/<name>.yaml with its backend group), for
    the callers that are not Hydra apps (the demo, the ROS planner node): the registered planner's name and its
    constructor arguments. A registered planner without a config file: ``(name, {})``, its own defaults."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.initialize import get_gh_backup, restore_gh_from_backup

    from hrl.cli import CONFIG_DIR

    if not (CONFIG_DIR / "planner" / f"{name}.yaml").is_file():
        return name, {}
    running = get_gh_backup()  # inside a Hydra app (hrl-deploy processes=one builds the nodes in its job): set aside
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
            planner = compose(config_name=None, overrides=[f"+planner={name}"]).planner
    finally:
        restore_gh_from_backup(running)
    return str(planner.name), planner_params(SimpleNamespace(params=planner.params, backend=planner.get("backend")))


def planner_arguments(name: str, given: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """:func:`configured_planner` with ``given`` over it, key by key (a ROS node's planner_params_file); a given
    ``backend`` comes with its own ``backend_params`` (none given: that backend's defaults), never another
    backend's; ``backend_params`` given without a ``backend`` go over the configured backend's key by key (say
    ``n_threads`` and keep its model and adapter)."""
    registered, params = configured_planner(name)
    if "backend" in given:
        params.pop("backend_params", None)
    elif isinstance(given.get("backend_params"), dict) and isinstance(params.get("backend_params"), dict):
        given = {**given, "backend_params": {**params["backend_params"], **given["backend_params"]}}
    return registered, {**params, **given}


def planner_from_file(name: str, params_file: str) -> tuple[str, dict[str, Any]]:
    """:func:`planner_arguments` with the keys of the YAML mapping in ``params_file`` (empty: none): the ROS planner
    nodes' ``planner`` and ``planner_params_file``. A file that is not YAML or not a mapping is a ValueError naming
    it; a missing one is a FileNotFoundError."""
    import yaml

    given: Any = {}
    if params_file:
        path = Path(params_file)
        try:
            given = yaml.safe_load(path.read_text())
        except yaml.YAMLError as err:
            raise ValueError(f"planner_params_file {params_file!r} is not valid YAML: {err}") from None
        if given is not None and not isinstance(given, dict):
            raise ValueError(
                f"planner_params_file {params_file!r} must hold a mapping of parameters (key: value), "
                f"not a {type(given).__name__}"
            )
    return planner_arguments(name, dict(given or {}))


def planner_label(config: EvalRunConfig) -> str:
    """The planner's name in results: the config chosen (``planner=vla_llm``) inside the Hydra app, where it may
    differ from the registered planner it runs (``vla``); else the registered name."""
    from hydra.core.hydra_config import HydraConfig

    choice = HydraConfig.get().runtime.choices.get("planner") if HydraConfig.initialized() else None
    return str(choice or config.planner.name)


def planner_params(planner: Any) -> dict[str, Any]:
    """The planner's constructor arguments; an LLM backend group (planner/backend=...) joins them."""
    from omegaconf import OmegaConf

    params = dict(OmegaConf.to_container(planner.params) if OmegaConf.is_config(planner.params) else planner.params)
    if planner.backend is not None:
        backend = planner.backend
        raw = backend.params
        params["backend"] = backend.name
        params["backend_params"] = dict(OmegaConf.to_container(raw) if OmegaConf.is_config(raw) else raw)
    return params


def _task(cfg) -> float:  # type: ignore[no-untyped-def]
    from hydra.core.hydra_config import HydraConfig

    config: EvalRunConfig = typed_config(cfg, "hrl-eval")
    out_dir = Path(HydraConfig.get().runtime.output_dir)
    with_task = config.task is not None or config.planner is not None
    tabletop = with_task and suite_domain_of(config.task) == "tabletop"
    keys = overridden_keys(HydraConfig.get().overrides.task)
    ignored = ignored_overrides(keys, with_task, tabletop)
    if tabletop and "video_episodes" in keys and config.video_episodes > 1:
        ignored.append(f"video_episodes={config.video_episodes}: a tabletop suite records its first episode only; "
                       "use video_episodes=1 (or 0 for none)")  # fmt: skip
    if ignored:
        mode = "with planner=... task=..." if with_task else "without planner=... task=... (goal reaching)"
        mode = "with a tabletop task suite" if tabletop else mode
        fail(f"{mode}, these overrides would be ignored:\n  " + "\n  ".join(ignored))
    if with_task and config.task is not None and config.planner is not None:
        try:
            check_planner_domain(config.planner.name, config.task)
        except ValueError as err:
            fail(str(err))
    if tabletop:
        try:
            summary = run_tabletop(config, out_dir)
        except (ValueError, FileNotFoundError) as err:
            fail(str(err))
        print(
            f"[hrl-eval] {summary['planner']} on {summary['suite']} ({summary['backend']}): success "
            f"{summary['success_rate']:.0%} over {summary['episodes']} episodes -> {out_dir}"
        )
        return summary["success_rate"]
    if with_task:
        try:
            summary = run_hierarchical(config, out_dir)
        except (ValueError, FileNotFoundError) as err:
            fail(str(err))
        print(
            f"[hrl-eval] {summary['planner']} on {summary['suite']}: success {summary['success_rate']:.0%} "
            f"over {summary['episodes']} episodes -> {out_dir}"
        )
        return summary["success_rate"]
    try:
        doc = run_evaluation(replace(config), out_dir, given_env_kwargs(keys, config.env))
    except (ValueError, FileNotFoundError) as err:
        fail(str(err))
    wrappers = [w if isinstance(w, str) else w["name"] for w in config.env.wrappers]
    if env_family(doc["env_id"]) is not None and env_family(doc["env_id"]) is env_family(EnvConfig.id):
        env = config.env  # the rover's: its map, goals and backend
        where = f"{env.argument('goal_mode')} goals, {env.engine()}" + (f" + {', '.join(wrappers)}" if wrappers else "")
        where = f"{env.argument('map')} ({where})"
    else:  # another env: its id and the arguments it was made with
        where = doc["env_id"] + (f" ({', '.join(f'{k}={v}' for k, v in doc['env'].items())})" if doc.get("env") else "")
    contacts = doc["episodes_with_collision"]
    print(
        f"[hrl-eval] {doc['policy']} on {where}: "
        f"success {doc['success_rate']:.0%} over {doc['episodes']} episodes, mean steps {doc['mean_steps']:.1f}"
        + (f", episodes with a wall contact {contacts}" if contacts is not None else "")
        + f" -> {out_dir}"
    )
    return doc["success_rate"]


def main(argv: list[str] | None = None) -> int:
    """``hrl-eval``: ``argv`` (default: the command line) as Hydra overrides; ``sys.argv`` is left as it was."""
    register_schemas()
    run_hydra_app(_task, "eval", open_env_kwargs(list(sys.argv[1:] if argv is None else argv), "hrl-eval"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
