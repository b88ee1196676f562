"""Ship a trained policy: copy a run's best model into hrl/policies/<name>/ with a manifest.

    python scripts/ship_policy.py runs/train/rover_local/<time> --name rover_local

The manifest records how the model was made (the exact hrl-train command, the resolved config, seed,
commit, training time, library versions, from the run's own files) and what it achieves (evaluated
here on fixed seeds: local goals in `open`, and local goals in `apartment` with its wall-contact rate).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--name", required=True)
    parser.add_argument("--episodes", type=int, default=100)
    args = parser.parse_args()

    from hrl.config import EnvConfig, EvalRunConfig
    from hrl.eval import run_evaluation
    from hrl.policy import SHIPPED_DIR, sidecar_path

    run = args.run_dir
    model = run / "best_model.zip"
    for needed in (
        model,
        sidecar_path(model),
        run / "run_info.json",
        run / ".hydra" / "config.yaml",
        run / "metrics.csv",
        run / "summary.json",
    ):
        if not needed.exists():
            raise SystemExit(f"{needed} is missing: not a complete hrl-train run")
    dest = SHIPPED_DIR / args.name
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(model, dest / "model.zip")
    shutil.copyfile(sidecar_path(model), sidecar_path(dest / "model.zip"))
    shutil.copyfile(run / "learning_curve.png", dest / "learning_curve.png")

    evaluations = {}
    for label, env in {
        "open_local_2.5m": EnvConfig(map="open", goal_mode="local", local_goal_radius=2.5),
        "apartment_local_2.5m": EnvConfig(map="apartment", goal_mode="local", local_goal_radius=2.5),
    }.items():
        doc = run_evaluation(
            EvalRunConfig(
                policy=str(dest / "model.zip"),
                env=env,
                episodes=args.episodes,
                video_episodes=0,
                seed=20_000,
                progress_bar=False,
            ),
            Path("/tmp") / f"ship-{args.name}-{label}",
        )
        evaluations[label] = {
            "episodes": doc["episodes"],
            "success_rate": doc["success_rate"],
            "collision_free_rate": doc["collision_free_rate"],
            "mean_steps": doc["mean_steps"],
            "seed": 20_000,
        }
        print(f"{label}: success {doc['success_rate']:.0%}, collision-free {doc['collision_free_rate']:.0%}")

    info = json.loads((run / "run_info.json").read_text())
    summary = json.loads((run / "summary.json").read_text())
    sidecar = yaml.safe_load(sidecar_path(model).read_text())
    manifest = {
        "name": args.name,
        "file": "model.zip",
        "algorithm": sidecar["algo"]["name"],
        "trained_steps": sidecar["trained_steps"],
        "command": info[0]["command"],
        "commit": info[0]["commit"],
        "uncommitted_changes": info[0]["uncommitted_changes"],
        "seed": sidecar["seed"],
        "training_wall_time_s": round(summary["wall_time_s"], 1),
        "training_total_steps": summary["num_timesteps"],
        "best_eval_success_during_training": summary["best_success"],
        "machine": info[0]["machine"],
        "versions": info[0]["versions"],
        "evaluation": evaluations,
        "config": yaml.safe_load((run / ".hydra" / "config.yaml").read_text()),
    }
    (dest / "manifest.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    print(f"shipped {model} -> {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
