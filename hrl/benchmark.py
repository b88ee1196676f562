"""``hrl-benchmark``: compare planners across task suites, physics backends and seeds (Hydra multirun).

One job runs one planner on one task suite in one backend with one seed, and appends every episode, as
it finishes, to ``runs/benchmark/<name>/episodes/<planner>__<suite>__<backend>__s<seed>.jsonl``, with the
conditions it ran under (``conditions``: policy and its file's hash, executor settings, wrappers, the
planner's parameters, the task suite's definition). A sweep directory holds one condition: a job whose
conditions differ from the episodes already there is refused, naming what differs (give it its own
``name=``). A sweep that is interrupted and started again with the same ``name`` skips the episodes already
there. When the sweep ends, :class:`SweepCallback` (in the launching process) aggregates everything into
tables, plots and ``report.md`` (:mod:`hrl.benchmark_report`); it also shows one progress bar for the
whole sweep.

    hrl-benchmark                                            # the grid of configs/benchmark.yaml
    hrl-benchmark name=quick planner=graph,flat task=apartment_long seed=0,1 episodes=3
    hrl-benchmark hydra/launcher=submitit_slurm              # the same sweep on a Slurm cluster
    hrl-benchmark grid=tabletop                              # the tabletop's grid (configs/grid/tabletop.yaml)

A tabletop suite (``domain: tabletop``) runs the planner over the shipped Panda skills (:mod:`hierarchy`):
``layouts`` random layouts of each task per seed, one row per (seed, task, layout) with its ``category``
(stack2, stack3, sort, clear), which the report tabulates. A sweep directory holds one domain.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, NoReturn

from hydra.experimental.callback import Callback

from hrl.cli import CONFIG_DIR, run_hydra_app, typed_config
from hrl.cli import fail as cli_fail
from hrl.config import BenchmarkConfig, check_planner_domain, plain_wrapper_specs, suite_domain_of

EPISODES_DIR = "episodes"


def fail(message: str) -> NoReturn:
    cli_fail("hrl-benchmark", message)


def cell_name(planner: str, suite: str, backend: str, seed: int) -> str:
    return f"{planner}__{suite}__{backend}__s{seed}"


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The episodes in one job's file; a last line cut short by a kill is ignored (it is re-run)."""
    rows = []
    if not path.is_file():
        return rows
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def run_job(config: BenchmarkConfig, sweep_dir: Path) -> dict[str, Any]:
    """One planner x suite x backend x seed; returns what it ran (episodes done now and before)."""
    from omegaconf import OmegaConf

    from hrl.eval import planner_params
    from hrl.hierarchy_eval import run_suite
    from hrl.policy import GoalPolicy
    from hrl.tasks import suite_from_dict

    config.validate()
    task = config.task if isinstance(config.task, dict) else OmegaConf.to_container(config.task)
    check_planner_domain(config.planner.name, task)
    if suite_domain_of(task) == "tabletop":
        return run_tabletop_job(config, sweep_dir, task)
    suite = suite_from_dict(task)
    cell = cell_name(config.planner.name, suite.name, config.backend, config.seed)
    path = sweep_dir / EPISODES_DIR / f"{cell}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    wrappers = plain_wrapper_specs(config.wrappers)
    policy = GoalPolicy.load(config.policy)
    executor = replace(config.executor, max_episode_steps=suite.max_episode_steps)
    params = planner_params(config.planner)
    conditions = job_conditions(config, policy.path, executor, params, wrappers, task)
    check_same_conditions(sweep_dir, config.planner.name, suite.name, conditions)
    done = {(r["seed"], r["episode"]) for r in read_rows(path)}
    n_tasks = len(suite.tasks()[: config.episodes])
    if len(done) >= n_tasks:
        return {"cell": cell, "episodes": n_tasks, "new": 0}
    _drop_partial_line(path)
    every = config.trajectory_every

    def write(row: dict[str, Any], record: Any) -> None:
        row = dict(row, backend=config.backend, policy=config.policy, wrappers=wrappers, conditions=conditions)
        row["planner_latencies_s"] = [round(v, 5) for v in record.planner_latency_s]
        trajectory = record.trajectory[::every] + record.trajectory[-1:]
        row["trajectory"] = [[round(x, 2), round(y, 2)] for x, y in trajectory]
        with open(path, "a") as f:  # one line per episode, flushed: an interruption loses at most one
            f.write(json.dumps(row) + "\n")

    result = run_suite(
        config.planner.name,
        suite,
        policy,
        planner_params=params,
        seeds=(config.seed,),
        executor=executor,
        out_dir=None,
        video_episode=None,
        progress=config.progress_bar,
        limit=config.episodes,
        backend=config.backend,
        wrappers=wrappers or None,
        skip=done,
        on_episode=write,
    )
    return {"cell": cell, "episodes": n_tasks, "new": len(result.rows)}


def run_tabletop_job(config: BenchmarkConfig, sweep_dir: Path, task: dict[str, Any]) -> dict[str, Any]:
    """One planner x tabletop suite x backend x seed: ``config.layouts`` layouts of each of the suite's first
    ``config.episodes`` tasks (the layouts of :func:`hierarchy.evaluate.layout_seed`, as hrl-eval and
    benchmarks/tabletop_hierarchy.py draw them), one line per episode as it ends; resumes like a rover job."""
    from hierarchy.agent import Agent, AgentConfig
    from hierarchy.evaluate import layout_seed
    from hierarchy.suites import tabletop_suite_from_dict
    from hierarchy.tabletop import TabletopDomain, make_env
    from hrl.eval import planner_params
    from llm_planner.base import make_planner

    refuse_rover_options(config)
    suite = tabletop_suite_from_dict(task, source=f"task={task.get('name', 'tabletop suite')}")
    cell = cell_name(config.planner.name, suite.name, config.backend, config.seed)
    path = sweep_dir / EPISODES_DIR / f"{cell}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    params = planner_params(config.planner)
    agent_config = AgentConfig(max_episode_steps=suite.max_episode_steps)
    conditions = tabletop_conditions(agent_config, params, task)
    check_same_conditions(sweep_dir, config.planner.name, suite.name, conditions)
    tasks = suite.tasks[: config.episodes]
    done = {(r["seed"], r["episode"], r["layout"]) for r in read_rows(path)}
    todo = [(i, j) for i in range(len(tasks)) for j in range(config.layouts) if (config.seed, i, j) not in done]
    total = len(tasks) * config.layouts
    if not todo:
        return {"cell": cell, "episodes": total, "new": 0}
    _drop_partial_line(path)
    planner = make_planner(config.planner.name, **params)
    agent = Agent(TabletopDomain.with_skills(), planner, agent_config)
    env = make_env(suite.scene, config.backend)
    try:
        for i, j in todo:
            env.reset(seed=layout_seed(config.seed, i, j))
            episode = agent.run(env, tasks[i])
            row = {
                "domain": "tabletop",
                "suite": suite.name,
                "planner": config.planner.name,
                "backend": config.backend,
                "seed": config.seed,
                "episode": i,
                "layout": j,
                "category": tasks[i].category,
                "task": tasks[i].text,
                **episode.row(),
                "planner_latencies_s": [round(v, 5) for v in episode.planner_latency_s],
                "plans": episode.plans,
                "conditions": conditions,
            }
            with open(path, "a") as f:  # one line per episode, flushed: an interruption loses at most one
                f.write(json.dumps(row) + "\n")
    finally:
        env.close()
    return {"cell": cell, "episodes": total, "new": len(todo)}


def refuse_rover_options(config: BenchmarkConfig) -> None:
    """A tabletop job runs the shipped Panda skills with the tabletop's own loop: the rover's ``policy``,
    ``wrappers`` and ``executor`` settings would be ignored, so setting one is an error."""
    from hrl import DEFAULT_POLICY
    from hrl.executor import ExecutorConfig

    why = {
        "policy": config.policy != DEFAULT_POLICY,
        "wrappers": bool(config.wrappers),
        "executor": config.executor != ExecutorConfig(),
    }
    if any(why.values()):
        keys = ", ".join(k for k, v in why.items() if v)
        raise ValueError(
            f"{keys}: the rover's settings, which a tabletop suite does not read (it runs the shipped Panda skills, "
            "hierarchy/tabletop.py SKILLS, with its own loop); leave them unset, or sweep the tabletop on its own"
        )


def tabletop_conditions(agent_config: Any, planner_params: dict[str, Any], task: dict[str, Any]) -> dict[str, Any]:
    """A tabletop job's conditions (as :func:`job_conditions`): the skills and their files' hash stand for the
    policy, the agent's limits for the executor's."""
    from hierarchy.tabletop import SKILLS
    from hrl.policy import resolve_policy_path

    digest = hashlib.sha256()
    for name in sorted(SKILLS):
        digest.update(resolve_policy_path(SKILLS[name]).read_bytes())
    executor = asdict(agent_config)
    executor.pop("max_episode_steps")
    return json.loads(
        json.dumps(
            {
                "policy": "tabletop skills: " + ", ".join(f"{k}={v}" for k, v in sorted(SKILLS.items())),
                "policy_sha256": digest.hexdigest(),
                "executor": executor,
                "wrappers": [],
                "planner_params": planner_params,
                "task_sha256": hashlib.sha256(json.dumps(task, sort_keys=True, default=str).encode()).hexdigest(),
            },
            default=str,
        )
    )


#: Conditions every job of a sweep shares; ``planner_params`` must agree among the jobs of one planner, and
#: ``task_sha256`` (the suite's definition) among the jobs of one suite.
SHARED_CONDITIONS = ("policy", "policy_sha256", "executor", "wrappers")


def job_conditions(
    config: BenchmarkConfig,
    policy_path: Path,
    executor: Any,
    planner_params: dict[str, Any],
    wrappers: list[Any],
    task: dict[str, Any],
) -> dict[str, Any]:
    """What an episode's figures depend on besides the sweep's axes (planner, suite, backend, seed): recorded
    with every episode, and equal across a sweep directory. ``executor.max_episode_steps`` is the suite's."""
    executor_settings = asdict(executor)
    executor_settings.pop("max_episode_steps")
    return json.loads(
        json.dumps(
            {
                "policy": config.policy,
                "policy_sha256": hashlib.sha256(Path(policy_path).read_bytes()).hexdigest(),
                "executor": executor_settings,
                "wrappers": wrappers,
                "planner_params": planner_params,
                "task_sha256": hashlib.sha256(json.dumps(task, sort_keys=True, default=str).encode()).hexdigest(),
            },
            default=str,
        )
    )


def check_same_conditions(sweep_dir: Path, planner: str, suite: str, conditions: dict[str, Any]) -> None:
    """Refuse to add episodes to a sweep directory that holds episodes run under other conditions (its
    statistics would mix them silently); the error names every difference and the fix."""
    for path in sorted((sweep_dir / EPISODES_DIR).glob("*.jsonl")):
        for row in read_rows(path)[:1]:
            recorded = row.get("conditions")
            if recorded is None:
                differences = ["conditions (not recorded: these episodes predate per-episode conditions)"]
            else:
                keys = [
                    *SHARED_CONDITIONS,
                    *(["planner_params"] if row.get("planner") == planner else []),
                    *(["task_sha256"] if row.get("suite") == suite else []),
                ]
                differences = [
                    f"{key}: {json.dumps(recorded.get(key))} there, {json.dumps(conditions[key])} here"
                    for key in keys
                    if recorded.get(key) != conditions[key]
                ]
            if differences:
                raise ValueError(
                    f"{sweep_dir} holds episodes run under other conditions ({path.name}): "
                    + "; ".join(differences)
                    + ". A sweep directory compares one condition: give this condition its own name=..."
                )


def _drop_partial_line(path: Path) -> None:
    """Cut a last line without its newline (a job killed while writing) so appends start clean."""
    if not path.is_file():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        path.write_bytes(data[: data.rfind(b"\n") + 1])


class SweepCallback(Callback):
    """Hydra callback in the launching process: a progress bar over the whole sweep while it runs (it
    counts the episodes the jobs have written, whichever launcher runs them), then the report."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # Launchers (joblib, submitit) pickle the Hydra context, callbacks included: the watcher stays here.
    def __getstate__(self) -> dict[str, Any]:
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        try:
            total = sweep_size(config)
        except Exception as err:
            print(f"hrl-benchmark: no progress bar ({err})", file=sys.stderr)
            return
        self._thread = threading.Thread(target=self._watch, args=(sweep_dir, total), daemon=True)
        self._thread.start()

    def _watch(self, sweep_dir: Path, total: int) -> None:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, desc="hrl-benchmark", unit="ep", dynamic_ncols=True)
        while True:
            bar.n = min(total, count_episodes(sweep_dir))
            bar.refresh()
            if self._stop.wait(1.0):
                break
        bar.n = min(total, count_episodes(sweep_dir))
        bar.close()

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        from hrl.benchmark_report import write_report

        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        sweep_dir = Path(config.hydra.sweep.dir)
        try:
            report = write_report(sweep_dir, command=_command(config))
        except ValueError as err:
            print(f"hrl-benchmark: no report: {err}", file=sys.stderr)
            return
        print(f"[hrl-benchmark] report: {report}")


def count_episodes(sweep_dir: Path) -> int:
    total = 0
    for path in (sweep_dir / EPISODES_DIR).glob("*.jsonl"):
        try:
            total += path.read_bytes().count(b"\n")
        except OSError:
            continue
    return total


def sweep_size(config: Any) -> int:
    """Episodes in the whole sweep: the grid (sweeper params, then command-line overrides) x suite sizes."""
    import math

    import yaml
    from hydra.core.override_parser.overrides_parser import OverridesParser

    grid: dict[str, str] = {str(k): str(v) for k, v in (config.hydra.sweeper.params or {}).items()}
    for override in config.hydra.overrides.task:
        key, _, value = str(override).partition("=")
        grid[key.lstrip("+~")] = value
    parser = OverridesParser.create()
    values: dict[str, list[str]] = {}
    for key, value in grid.items():
        parsed = parser.parse_override(f"{key}={value}")
        if parsed.is_sweep_override():
            values[key] = list(parsed.sweep_string_iterator())
        else:
            values[key] = [parsed.get_value_element_as_str()]
    limit = config.get("episodes")
    suites = values.pop("task", [str(config.task.name)])
    layouts = sum(int(v) for v in values.pop("layouts", [str(config.get("layouts", 1))]))  # tabletop suites
    per_suite = 0
    for suite in suites:
        doc = yaml.safe_load((CONFIG_DIR / "task" / f"{suite}.yaml").read_text())
        n = len(doc.get("episodes", []))
        n = min(n, int(limit)) if limit is not None else n
        per_suite += n * (layouts if doc.get("domain") == "tabletop" else 1)
    return per_suite * math.prod(len(v) for k, v in values.items() if k != "episodes")


def _command(config: Any) -> str:
    overrides = " ".join(str(o) for o in config.hydra.overrides.task)
    return f"hrl-benchmark {overrides}".strip()


def _task(cfg: Any) -> float:
    from hydra.core.hydra_config import HydraConfig

    config: BenchmarkConfig = typed_config(cfg, "hrl-benchmark")
    hc = HydraConfig.get()
    sweep_dir = Path(hc.sweep.dir) if hc.mode.name == "MULTIRUN" else Path(hc.runtime.output_dir).parent
    t0 = time.perf_counter()
    try:
        result = run_job(config, sweep_dir)
    except (ValueError, FileNotFoundError) as err:
        fail(str(err))
    print(
        f"[hrl-benchmark] {result['cell']}: {result['new']} new episode(s) of {result['episodes']} "
        f"in {time.perf_counter() - t0:.0f} s"
    )
    return float(result["new"])


def register_schemas() -> None:
    from hydra.core.config_store import ConfigStore

    from hrl.train import register_schemas as register_train_schemas

    register_train_schemas()
    ConfigStore.instance().store(name="benchmark_schema", node=BenchmarkConfig)


def main(argv: list[str] | None = None) -> int:
    """``hrl-benchmark``: ``argv`` (default: the command line) as Hydra overrides; ``sys.argv`` is left as it was."""
    register_schemas()
    run_hydra_app(_task, "benchmark", argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
