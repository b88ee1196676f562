"""Sim-to-real gap measured on recorded runs: a nominal and a perturbed simulated robot over DDS.

Records, with ``hrl.ros.recorded_run`` (sim robot, policy, graph planner and bag recorder in separate
processes), the task "sofa" from the apartment's kitchen twice: on the nominal robot, and on a robot that
differs as hardware would (friction 0.5, motor gain 0.85, mass x1.3, two control periods of command
latency). Then ``hrl-sim2real`` replays each bag in MuJoCo and PyBullet and reports ATE, RPE, success and
lidar discrepancy. The nominal run is the reference: its replay error is the tool's own floor (timing
jitter of a wall-clock run); the perturbed run's is the gap a different robot opens.

    python benchmarks/sim2real.py [--quick] [--no-record]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import emit, record

PERTURBED = ("friction:=0.5", "motor_gain:=0.85", "mass_scale:=1.3", "latency_steps:=2")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a shorter task (the stove), MuJoCo only")
    parser.add_argument("--no-record", action="store_true", help="do not append to benchmarks/RESULTS.md")
    parser.add_argument("--out", type=Path, default=Path("runs/bench/sim2real"))
    args = parser.parse_args()
    from hrl.ros.domains import acquire_domain
    from hrl.ros.recorded_run import record_sim_run

    if "ROS_DOMAIN_ID" not in os.environ:  # one no other run on the machine uses (held until this process ends)
        os.environ["ROS_DOMAIN_ID"] = str(acquire_domain().id)
    os.environ.setdefault("ROS_LOCALHOST_ONLY", "1")

    from hrl.sim2real import compare, read_bag, write_outputs
    from sim.navigation.world import load_world

    task = "stove" if args.quick else "sofa"
    backends = ["mujoco"] if args.quick else ["mujoco", "pybullet"]
    world = load_world("apartment")
    figures: dict[str, object] = {"quick": args.quick, "task": task, "runs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name, params in (("nominal", ()), ("perturbed", PERTURBED)):
            bag = Path(tmp) / name
            t0 = time.perf_counter()
            status = record_sim_run(bag, task=task, sim_params=params)
            rec = read_bag(bag)
            summary = compare(rec, world, backends)
            out = args.out / name
            write_outputs(summary, rec, world, out, f"python benchmarks/sim2real.py ({name} run)")
            figures["runs"][name] = {  # type: ignore[index]
                "robot_params": list(params),
                "task_status": status,
                "duration_s": summary["duration_s"],
                "robot_success": summary.get("robot", {}).get("success"),
                "backends": summary["backends"],
                "seconds": round(time.perf_counter() - t0, 1),
            }
            for backend, b in summary["backends"].items():
                print(
                    f"{name:>9} {backend:>8}: ATE {b['ate_m']:.3f} m, final {b['final_position_error_m']:.3f} m, "
                    f"RPE {b['rpe_translation_m']} m / {b['rpe_yaw_rad']} rad per s, success {b['success']} "
                    f"(robot {figures['runs'][name]['robot_success']}), lidar MAE {b['lidar_mae_m']} m",  # type: ignore[index]
                    flush=True,
                )
    if not args.no_record:
        runs = figures["runs"]  # type: ignore[assignment]
        cells = []
        for name in ("nominal", "perturbed"):
            parts = [
                f"{backend}: ATE {b['ate_m']:.3f} m, RPE {b['rpe_translation_m']:.3f} m / {b['rpe_yaw_rad']:.3f} rad, "
                f"lidar {b['lidar_mae_m']:.4f} m, success {'yes' if b['success'] else 'no'}"
                for backend, b in runs[name]["backends"].items()  # type: ignore[index]
            ]
            cells.append(
                f"{runs[name]['duration_s']} s, robot success {runs[name]['robot_success']}<br>" + "<br>".join(parts)
            )  # type: ignore[index]
        record("sim2real", figures, [task, *cells], ["task", "nominal robot", "perturbed robot"])
    emit(figures)


if __name__ == "__main__":
    main()
