"""Record a run of the simulated robot over DDS: sim robot, policy, planner and bag recorder, each in its
own process, one task, the bag finalised. The input of ``hrl-sim2real`` when no hardware is at hand
(``sim_params`` make the simulated robot differ from the nominal one).

The arm (``--arm``, :func:`record_arm_run`): ``sim_arm_node``, ``arm_policy_node``, ``arm_planner_node`` and the
recorder with its ``arm`` preset; a task for the planner, or skill calls sent straight to the policy node.

    python -m hrl.ros.recorded_run runs/bags/perturbed --task sofa -p friction:=0.5 -p latency_steps:=2
    python -m hrl.ros.recorded_run runs/bags/arm_perturbed --arm --task "red_block on blue_block" -p latency_s:=0.03
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: Seconds the first task or call waits once the policy's command topics show their readers here (DDS matches each
#: publisher with each subscription some time after both show; a command sent before is lost at one of them).
COMMANDS_SETTLE_S = 1.0


def _start(bag: Path, log_dir: Path | None) -> tuple[Any, Any]:
    """The node processes (logging to ``log_dir``, default ``<bag>_logs``) and this process's rclpy node."""
    import rclpy

    from hrl.ros.runner import NodeProcesses

    if bag.exists():
        raise FileExistsError(f"{bag} exists; rosbag2 needs a new directory")
    nodes = NodeProcesses(Path(log_dir or bag.parent / f"{bag.name}_logs"))
    rclpy.init()
    return nodes, rclpy.create_node(f"recorded_run_{os.getpid()}")


def _finish(node: Any, nodes: Any, recorder: Any, bag: Path) -> None:
    """Let the recorder hear the last messages, stop it, and check that it finalised the bag."""
    from hrl.ros.runner import spin_until

    spin_until(node, lambda: False, 1.0)
    recorder.send_signal(signal.SIGINT)
    recorder.wait(timeout=20)
    if not (bag / "metadata.yaml").is_file():
        raise RuntimeError(f"the recorder did not finalise {bag}:\n{nodes.log(recorder)}")


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

    Uses the current ``ROS_DOMAIN_ID``; the task is sent once the policy's commands flow. Raises ``RuntimeError``
    (with the planner's log) if the graph does not come up or the task does not finish in time, and (saying why)
    if the recording cannot be replayed: ``sim_robot_node`` dropped control periods, or the bag lacks the commands
    that started the motion (:func:`missed_start`).
    """
    import rclpy
    from geometry_msgs.msg import Twist
    from std_msgs.msg import String

    from hrl.ros.planner_node import is_final
    from hrl.ros.runner import spin_until

    bag = Path(bag)
    nodes, node = _start(bag, log_dir)
    try:
        sim = nodes.start("hrl.ros.sim_robot_node", f"map:={map_name}", f"start:={start}", *sim_params)
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
        # The policy publishes (zero) commands before it has a subgoal. Its /cmd_vel publisher matches the robot's
        # and the recorder's subscriptions some time after it appears: a task sent before that loses the first
        # commands at one of them, and an open-loop replay never recovers from a missed start (two commands
        # missed: 0.15 m ATE). So the task waits until commands flow, for a second after both readers show.
        heard: list[Any] = []
        node.create_subscription(Twist, "/cmd_vel", heard.append, 10)
        readers = lambda: node.count_subscribers("/cmd_vel") >= 3  # noqa: E731 (the robot, the recorder, us)
        if not spin_until(node, lambda: readers() and len(heard) >= 5, 60):
            raise RuntimeError(f"the policy node's /cmd_vel did not reach this process:\n{nodes.log(policy)}")
        spin_until(node, lambda: False, COMMANDS_SETTLE_S)
        pub.publish(String(data=task))
        final = lambda: [s for s in status if is_final(s)]  # noqa: E731 (not the 'planning' reports)
        if not spin_until(node, final, timeout_s):
            raise RuntimeError(f"task {task!r} did not finish within {timeout_s} s:\n{nodes.log(planner)}")
        _finish(node, nodes, recorder, bag)
        _refuse_if_lagged(nodes, sim, "sim_robot_node", bag)
        missed = missed_start(bag)
        if missed is not None:
            raise RuntimeError(f"the recording {bag} cannot be replayed: {missed}")
        return final()[0]
    finally:
        nodes.stop_all()
        node.destroy_node()
        rclpy.shutdown()


def record_arm_run(
    bag: Path,
    *,
    task: str | None = None,
    calls: Sequence[Any] = (),
    scene: str = "blocks",
    backend: str = "mujoco",
    layout_seed: int = 0,
    planner: str = "symbolic",
    sim_params: Sequence[str] = (),
    log_dir: Path | None = None,
    timeout_s: float = 240.0,
) -> list[str]:
    """Run the simulated arm while recording ``bag`` (the recorder's ``arm`` preset): ``task`` through
    ``arm_planner_node`` (returns ``[final /task_status]``), or else each of ``calls``
    (:class:`hrl.ros.arm_messages.SkillCall`) sent to ``arm_policy_node`` in turn, each after the last one's status
    (returns their outcomes). ``sim_params`` (``name:=value``) make ``sim_arm_node`` a different robot.

    Uses the current ``ROS_DOMAIN_ID``; raises ``RuntimeError`` (with the relevant node's log) if the graph does not
    come up or the run does not finish within ``timeout_s``, and (naming the lag) if ``sim_arm_node`` dropped control
    periods: a stand-in that fell behind wall-clock time recorded motion its commands do not give.
    """
    import rclpy
    from std_msgs.msg import String

    from hrl.ros.planner_node import is_final
    from hrl.ros.qos import profile
    from hrl.ros.runner import spin_until

    if (task is None) == (not calls):
        raise ValueError("give a task for the planner or skill calls for the policy node (one of them)")
    bag = Path(bag)
    nodes, node = _start(bag, log_dir)
    try:
        sim = nodes.start("hrl.ros.sim_arm_node", f"scene:={scene}", f"backend:={backend}",
                          f"layout_seed:={layout_seed}", "camera_hz:=0.0", *sim_params)  # fmt: skip
        policy = nodes.start("hrl.ros.arm_policy_node", f"scene:={scene}")
        recorder = nodes.start("hrl.ros.recorder", f"output:={bag}", "topics:=arm", f"scene:={scene}")
        readers = 2 if task is None else 3  # of /joint_states: the policy node, the recorder (and the planner)
        statuses: list[str] = []
        results: list[str] = []
        reliable = profile("reliable")
        node.create_subscription(String, "/task_status", lambda m: statuses.append(m.data), reliable)
        node.create_subscription(String, "/arm_subgoal_status", lambda m: results.append(m.data), reliable)
        if task is not None:
            planner_proc = nodes.start("hrl.ros.arm_planner_node", f"scene:={scene}", f"planner:={planner}")
        commands = ("/panda_arm_controller/joint_trajectory", "/panda_hand_controller/commands")
        up = lambda: (  # noqa: E731
            node.count_subscribers("/joint_states") >= readers
            and node.count_subscribers("/arm_subgoal") >= 2  # the policy node and the recorder
            and node.count_publishers("/joint_states") >= 1
            # the policy's commands: its publishers, and the arm's and the recorder's subscriptions
            and all(node.count_publishers(c) >= 1 and node.count_subscribers(c) >= 2 for c in commands)
        )
        if not spin_until(node, up, 120):
            seen = (
                f"/joint_states: {node.count_publishers('/joint_states')} publisher(s) of 1, "
                f"{node.count_subscribers('/joint_states')} subscriber(s) of {readers}; "
                f"/arm_subgoal: {node.count_subscribers('/arm_subgoal')} subscriber(s) of 2; "
                + "; ".join(f"{c}: {node.count_publishers(c)} publisher(s) of 1, {node.count_subscribers(c)} "
                            "subscriber(s) of 2" for c in commands)
            )  # fmt: skip
            raise RuntimeError(f"the arm graph did not come up within 120 s ({seen}):\n{nodes.report()}")
        spin_until(node, lambda: False, COMMANDS_SETTLE_S)  # the endpoints seen here match among the nodes
        if task is not None:
            pub = node.create_publisher(String, "/task", reliable)
            if not spin_until(node, lambda: node.count_subscribers("/task") >= 2, 120):  # planner and recorder
                raise RuntimeError(f"the arm planner node did not come up:\n{nodes.log(planner_proc)}")
            pub.publish(String(data=task))
            final = lambda: [s for s in statuses if is_final(s)]  # noqa: E731
            if not spin_until(node, final, timeout_s):
                raise RuntimeError(f"task {task!r} did not finish within {timeout_s} s:\n{nodes.log(planner_proc)}")
            outcome = final()[:1]
        else:
            pub = node.create_publisher(String, "/arm_subgoal", reliable)
            outcome = []
            for call in calls:
                pub.publish(String(data=call.to_json()))
                mine = lambda c=call: [r for r in results if json.loads(r).get("id") == c.id]  # noqa: E731
                if not spin_until(node, mine, timeout_s):
                    raise RuntimeError(f"skill call {call.id} had no status within {timeout_s} s:\n{nodes.log(policy)}")
                outcome.append(json.loads(mine()[0])["outcome"])
        _finish(node, nodes, recorder, bag)
        _refuse_if_lagged(nodes, sim, "sim_arm_node", bag)
        return outcome
    finally:
        nodes.stop_all()
        node.destroy_node()
        rclpy.shutdown()


def _refuse_if_lagged(nodes: Any, sim: Any, name: str, bag: Path) -> None:
    """RuntimeError naming the lag when the simulated robot ``sim`` dropped control periods: a stand-in that fell
    behind wall-clock time recorded motion its commands do not give."""
    lag = lag_in(nodes.log(sim))
    if lag is not None:
        raise RuntimeError(f"{name} dropped control periods while recording {bag}: {lag}")


def missed_start(bag: Path) -> str | None:
    """What is wrong when the recorder of ``bag`` did not hear the policy before the first subgoal (None: it did).

    The policy publishes commands from its start; a recorder that heard none before the first /subgoal matched the
    command topic late and may lack the commands that started the motion."""
    from hrl.sim2real import read_bag

    rec = read_bag(bag)
    if not len(rec.subgoal_t) or rec.cmd_t[0] < rec.subgoal_t[0]:
        return None
    return (
        f"its first /cmd_vel ({rec.cmd_t[0]:.2f} s) is not before its first /subgoal ({rec.subgoal_t[0]:.2f} s): "
        "the recorder heard the policy only once it was moving the robot"
    )


def lag_in(log: str) -> str | None:
    """The first line of a simulated robot's log that says it dropped control periods (None: it kept up)."""
    from hrl.base_drive import LAG_MARK

    return next((line for line in log.splitlines() if LAG_MARK in line), None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bag", type=Path, help="bag directory to create")
    parser.add_argument("--task", default=None, help="the task (default: sofa; the arm: red_block on blue_block)")
    parser.add_argument("--map", default="apartment")
    parser.add_argument("--start", default="kitchen")
    parser.add_argument("--arm", action="store_true", help="the simulated arm (sim_arm_node) instead of the rover")
    parser.add_argument("--scene", default="blocks", help="the arm's tabletop scene")
    parser.add_argument("--backend", default="mujoco", help="the arm's simulator (sim_arm_node's backend)")
    parser.add_argument("--layout-seed", type=int, default=0, help="the arm's scene layout seed")
    parser.add_argument(
        "-p", dest="params", action="append", default=[], help="sim_robot_node (sim_arm_node) parameter name:=value"
    )
    args = parser.parse_args(argv)
    try:
        if args.arm:
            status = record_arm_run(
                args.bag, task=args.task or "red_block on blue_block", scene=args.scene, backend=args.backend,
                layout_seed=args.layout_seed, sim_params=args.params,
            )[0]  # fmt: skip
        else:
            status = record_sim_run(
                args.bag, task=args.task or "sofa", map_name=args.map, start=args.start, sim_params=args.params
            )
    except (RuntimeError, FileExistsError) as err:
        print(f"recorded_run: error: {err}", file=sys.stderr)
        return 2
    print(f"{args.bag}: task {status}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
