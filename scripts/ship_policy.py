"""Ship a trained policy: copy a run's best model (or ``--model final``, its last weights) into hrl/policies/<name>/
with a manifest.

    python scripts/ship_policy.py runs/train/rover_local/<time> --name rover_local
    python scripts/ship_policy.py runs/skills/panda_reach --name panda_reach

The manifest records how the model was made (the exact hrl-train command, the resolved config, seed,
commit, training time, library versions, demonstrations, from the run's own files) and what it achieves,
evaluated here on fixed seeds (the same episodes in every env): a rover policy on local goals in `open`, and
in `apartment` with its wall-contact rate; any other policy on its own training env, rebuilt from its
.policy.yaml without training-time wrappers, and a tabletop skill also in the other engine
(env.backend).

A run stopped before its total_steps (Ctrl-C, SIGTERM) has no summary.json and no learning curve:
`--incomplete` ships its best model anyway, with the training figures read from metrics.csv, the curve
plotted from it, and `complete_run: false` in the manifest.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import shutil
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: The seed of the first evaluation episode (disjoint from hrl-train's evaluations, which start at 10000).
SEED = 20_000
ROVER = "hrl/RoverNav-*"
#: Env ids whose policies are evaluated in both engines (``env.backend``), their own first.
TWO_ENGINES = "hrl/PandaTabletop-*"
BACKENDS = ("mujoco", "pybullet")


def evaluation_envs(trained_on: Any) -> dict[str, Any]:
    """Label -> EnvConfig of the envs a policy trained on ``trained_on`` is evaluated in."""
    from hrl.config import EnvConfig

    if fnmatch.fnmatchcase(trained_on.id, ROVER):
        return {
            "open_local_2.5m": EnvConfig(kwargs={"map": "open", "goal_mode": "local", "local_goal_radius": 2.5}),
            "apartment_local_2.5m": EnvConfig(
                kwargs={"map": "apartment", "goal_mode": "local", "local_goal_radius": 2.5}
            ),
        }
    own = replace(trained_on, wrappers=[])  # training-time randomization is not part of the evaluation
    if not fnmatch.fnmatchcase(trained_on.id, TWO_ENGINES):
        return {trained_on.id: own}
    backend = own.engine()
    if backend not in BACKENDS:
        raise ValueError(f"env.backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    order = [backend, *(b for b in BACKENDS if b != backend)]
    kwargs = {k: v for k, v in own.kwargs.items() if k != "backend"}
    return {b: replace(own, backend=b, kwargs=kwargs) for b in order}


def training_figures(run: Path, incomplete: bool) -> dict[str, Any]:
    """Wall time, steps and best evaluation success of the run: its summary.json, or (``incomplete``) the
    last and best rows of its metrics.csv."""
    if not incomplete:
        summary = json.loads((run / "summary.json").read_text())
        return {
            "training_wall_time_s": round(summary["wall_time_s"], 1),
            "training_total_steps": summary["num_timesteps"],
            "best_eval_success_during_training": summary["best_success"],
        }
    from hrl.plots import read_metrics

    rows = read_metrics(run / "metrics.csv")
    if not rows:
        raise SystemExit(f"{run / 'metrics.csv'} has no evaluation rows: nothing to ship")
    return {
        "complete_run": False,
        "training_wall_time_s": round(rows[-1]["wall_time_s"], 1),
        "training_total_steps": int(rows[-1]["step"]),  # at its last evaluation
        "best_eval_success_during_training": max(r["success_rate"] for r in rows),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--name", required=True)
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument(
        "--incomplete",
        action="store_true",
        help="ship a run stopped before its total_steps (figures from metrics.csv)",
    )
    parser.add_argument(
        "--model",
        choices=["best", "final"],
        default="best",
        help="the run's best evaluation (best_model.zip) or its last weights (final_model.zip)",
    )
    args = parser.parse_args()
    if args.episodes < 1:
        parser.error(f"--episodes must be >= 1, got {args.episodes}")

    from hrl.config import EnvConfig, EvalRunConfig, migrate_env_dict
    from hrl.eval import run_evaluation
    from hrl.plots import plot_learning_curve
    from hrl.policy import SHIPPED_DIR, sidecar_path

    run = args.run_dir
    model = run / f"{args.model}_model.zip"
    if args.model == "final" and args.incomplete:
        parser.error("--model final needs a complete run (a run stopped early has no final_model.zip)")
    needed = [model, sidecar_path(model), run / "run_info.json", run / ".hydra" / "config.yaml", run / "metrics.csv"]
    if not args.incomplete:
        needed += [run / "summary.json", run / "learning_curve.png"]
    for path in needed:
        if not path.exists():
            hint = "" if args.incomplete else " (a run stopped early: --incomplete ships its best model)"
            raise SystemExit(f"{path} is missing: not a complete hrl-train run{hint}")
    sidecar = yaml.safe_load(sidecar_path(model).read_text())
    config = yaml.safe_load((run / ".hydra" / "config.yaml").read_text())
    dest = SHIPPED_DIR / args.name
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(model, dest / "model.zip")
    shutil.copyfile(sidecar_path(model), sidecar_path(dest / "model.zip"))
    if args.incomplete:
        title = f"{config['experiment_name']}: {sidecar['algo']['name']} (stopped early)"
        plot_learning_curve(run / "metrics.csv", dest / "learning_curve.png", title=title)
    else:
        shutil.copyfile(run / "learning_curve.png", dest / "learning_curve.png")

    evaluations = {}
    trained_on = EnvConfig(**migrate_env_dict(sidecar["env"]))
    for label, env in evaluation_envs(trained_on).items():
        doc = run_evaluation(
            EvalRunConfig(
                policy=str(dest / "model.zip"),
                env=env,
                episodes=args.episodes,
                video_episodes=0,
                seed=SEED,
                progress_bar=False,
            ),
            Path("/tmp") / f"ship-{args.name}-{label.replace('/', '_')}",
        )
        entry = {"episodes": doc["episodes"], "success_rate": doc["success_rate"]}
        if doc["collision_free_rate"] is not None:  # the env reports collisions (the rover)
            entry["collision_free_rate"] = doc["collision_free_rate"]
        entry |= {"mean_steps": doc["mean_steps"], "seed": SEED}
        if not fnmatch.fnmatchcase(trained_on.id, ROVER):
            entry |= {"mean_final_distance": round(doc["mean_final_distance"], 4), "env_id": doc["env_id"]}
            entry["env"] = doc["env"]
        evaluations[label] = entry
        contacts = f", collision-free {entry['collision_free_rate']:.0%}" if "collision_free_rate" in entry else ""
        print(f"{label}: success {doc['success_rate']:.0%}{contacts}")

    info = json.loads((run / "run_info.json").read_text())
    manifest = {
        "name": args.name,
        "file": "model.zip",
        "shipped_model": model.name,  # of the run: its best evaluation's weights or its last
        "algorithm": sidecar["algo"]["name"],
        "trained_steps": sidecar["trained_steps"],
        "command": info[0]["command"],
        "commit": info[0]["commit"],
        "uncommitted_changes": info[0]["uncommitted_changes"],
        "seed": sidecar["seed"],
        **training_figures(run, args.incomplete),
        "machine": info[0]["machine"],
        "versions": info[0]["versions"],
    }
    if len(info) > 1:  # resumed: every sitting's command
        manifest["resumed_with"] = [i["command"] for i in info[1:]]
    if (run / "demos.json").exists():  # expert episodes in the replay buffer, not counted in the steps above
        manifest["demonstrations"] = json.loads((run / "demos.json").read_text())
    manifest |= {"evaluation": evaluations, "config": config}
    (dest / "manifest.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    print(f"shipped {model} -> {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
