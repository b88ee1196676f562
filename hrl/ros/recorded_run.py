"""Record a run of the simulated robot over DDS: sim robot, policy, planner and bag recorder, each in its
own process, one task, the bag finalised. The input of ``hrl-sim2real`` when no hardware is at hand
(``sim_params`` make the simulated robot differ from the nominal one).

    python -m hrl.ros.recorded_run runs/bags/perturbed --task sofa -p friction:=0.5 -p latency_steps:=2
"""

from __future__ import annotations

import argparse
import itertools
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def record_sim_run(
    bag: Path,
    *,
    task: str = "sofa",
    map_name: str = "apartment",
    start: str = "kitchen",
    sim_params: Sequence[str] = (),
    log_dir: Path | None = None,
    timeout_s: float = 150.0,
) -> str:
    """Run ``task`` on the simulated robot while recording ``bag``; returns the final /task_status.

    Uses the current ``ROS_DOMAIN_ID``; raises ``RuntimeError`` (with the planner's log) if the graph
    does not come up or the task does not finish in time.
    """
    import rclpy
    from std_msgs.msg import String

    from hrl.ros.planner_node import is_final
    from hrl.ros.runner import spin_until

    bag = Path(bag)
    if bag.exists():
        raise FileExistsError(f"{bag} exists; rosbag2 needs a new directory")
    log_dir = Path(log_dir or bag.parent / f"{bag.name}_logs")
    log_dir.mkdir(parents=True, exist_ok=True)
    procs: list[tuple[subprocess.Popen, Path]] = []

    def start_node(module: str, *params: str) -> subprocess.Popen:
        log = log_dir / f"{module.rsplit('.', 1)[-1]}.log"
        args = [sys.executable, "-m", module, "--ros-args", *itertools.chain(*(("-p", p) for p in params))]
        proc = subprocess.Popen(args, cwd=ROOT, stdout=open(log, "w"), stderr=subprocess.STDOUT)  # noqa: SIM115
        procs.append((proc, log))
        return proc

    rclpy.init()
    node = rclpy.create_node(f"recorded_run_{os.getpid()}")
    try:
        start_node("hrl.ros.sim_robot_node", f"map:={map_name}", f"start:={start}", *sim_params)
        start_node("hrl.ros.policy_node")
        start_node("hrl.ros.planner_node", f"map:={map_name}", "planner:=graph")
        recorder = start_node("hrl.ros.recorder", f"output:={bag}")
        status: list[str] = []
        node.create_subscription(String, "/task_status", lambda m: status.append(m.data), 10)
        pub = node.create_publisher(String, "/task", 10)

        planner_log = lambda: (log_dir / "planner_node.log").read_text()  # noqa: E731
        if not spin_until(node, lambda: node.count_subscribers("/task") >= 2, 120):  # planner and recorder
            raise RuntimeError(f"the planner node did not come up:\n{planner_log()}")
        if not spin_until(node, lambda: node.count_subscribers("/subgoal") >= 2, 60):  # policy and recorder
            raise RuntimeError("the policy node did not come up")
        pub.publish(String(data=task))
        final = lambda: [s for s in status if is_final(s)]  # noqa: E731 (not the 'planning' reports)
        if not spin_until(node, final, timeout_s):
            raise RuntimeError(f"task {task!r} did not finish within {timeout_s} s:\n{planner_log()}")
        spin_until(node, lambda: False, 1.0)  # the recorder hears the last messages
        recorder.send_signal(signal.SIGINT)
        recorder.wait(timeout=20)
        if not (bag / "metadata.yaml").is_file():
            raise RuntimeError(f"the recorder did not finalise {bag}:\n{(log_dir / 'recorder.log').read_text()}")
        return final()[0]
    finally:
        for proc, _ in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc, _ in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        node.destroy_node()
        rclpy.shutdown()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bag", type=Path, help="bag directory to create")
    parser.add_argument("--task", default="sofa")
    parser.add_argument("--map", default="apartment")
    parser.add_argument("--start", default="kitchen")
    parser.add_argument("-p", dest="params", action="append", default=[], help="sim_robot_node parameter name:=value")
    args = parser.parse_args(argv)
    try:
        status = record_sim_run(args.bag, task=args.task, map_name=args.map, start=args.start, sim_params=args.params)
    except (RuntimeError, FileExistsError) as err:
        print(f"recorded_run: error: {err}", file=sys.stderr)
        return 2
    print(f"{args.bag}: task {status}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
