"""Record a run of the simulated robot over DDS: sim robot, policy, planner and bag recorder, each in its
own process, one task, the bag finalised. The input of ``hrl-sim2real`` when no hardware is at hand
(``sim_params`` make the simulated robot differ from the nominal one).

    python -m hrl.ros.recorded_run runs/bags/perturbed --task sofa -p friction:=0.5 -p latency_steps:=2
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path


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
    from hrl.ros.runner import NodeProcesses, spin_until

    bag = Path(bag)
    if bag.exists():
        raise FileExistsError(f"{bag} exists; rosbag2 needs a new directory")
    nodes = NodeProcesses(Path(log_dir or bag.parent / f"{bag.name}_logs"))
    rclpy.init()
    node = rclpy.create_node(f"recorded_run_{os.getpid()}")
    try:
        nodes.start("hrl.ros.sim_robot_node", f"map:={map_name}", f"start:={start}", *sim_params)
        policy = nodes.start("hrl.ros.policy_node")
        planner = nodes.start("hrl.ros.planner_node", f"map:={map_name}", "planner:=graph")
        recorder = nodes.start("hrl.ros.recorder", f"output:={bag}")
        status: list[str] = []
        node.create_subscription(String, "/task_status", lambda m: status.append(m.data), 10)
        pub = node.create_publisher(String, "/task", 10)

        if not spin_until(node, lambda: node.count_subscribers("/task") >= 2, 120):  # planner and recorder
            raise RuntimeError(f"the planner node did not come up:\n{nodes.log(planner)}")
        if not spin_until(node, lambda: node.count_subscribers("/subgoal") >= 2, 60):  # policy and recorder
            raise RuntimeError(f"the policy node did not come up:\n{nodes.log(policy)}")
        pub.publish(String(data=task))
        final = lambda: [s for s in status if is_final(s)]  # noqa: E731 (not the 'planning' reports)
        if not spin_until(node, final, timeout_s):
            raise RuntimeError(f"task {task!r} did not finish within {timeout_s} s:\n{nodes.log(planner)}")
        spin_until(node, lambda: False, 1.0)  # the recorder hears the last messages
        recorder.send_signal(signal.SIGINT)
        recorder.wait(timeout=20)
        if not (bag / "metadata.yaml").is_file():
            raise RuntimeError(f"the recorder did not finalise {bag}:\n{nodes.log(recorder)}")
        return final()[0]
    finally:
        nodes.stop_all()
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
