"""The policy node's control loop over DDS: latency from /odom arrival to /cmd_vel publish, and missed
cycles, at 20 Hz and 50 Hz, with the shipped policy on 2 cores.

A driver (this process) publishes /odom and /scan (360 beams) at the rate and a subgoal the robot never
reaches; the policy node runs in its own process in ``control_mode=odom`` (a command per /odom message)
and logs, for every cycle, the time from the /odom message's arrival to the /cmd_vel publish (monotonic
clock, in the node), and of it the policy's time and the publish call's (the rest: message handling,
observation, safety filter). A missed cycle is an /odom message without its command before the next one is due
(fewer commands than messages, or a latency above the period). The reference, measured in the same run:
the policy's own inference time (``GoalPolicy`` on the same observation, in this process), so the ratio
shows what ROS adds. Target (issue 19): p99 <= 2 ms and no missed cycle at 50 Hz. The messages are what a
real base sends (frames, stamps, a scan geometry that agrees with its ranges): the node refuses others.

The arm (issue 18), in the same run: ``sim_arm_node`` (MuJoCo, cameras off) publishes /joint_states at 100 Hz and
``arm_policy_node`` (its own process) runs the reach skill at the controller's rate (``skill_hz`` 100, so one
JointTrajectory per controller cycle; ``trajectory_hz`` 200: two points each, from which the measured position the
command started from is recovered exactly, ``2 p1 - p2``), sent back and forth between two TCP goals on /tcp_goal.
This process listens: the **command latency** of a trajectory is its DDS receive time minus that of the
/joint_states message it was computed from (matched by position), both taken here (``hrl.ros.sim_clock``). The
node's loop locks to the arrival of /joint_states, so this latency is the node's compute plus two DDS hops (and
the waits for a core and for the GIL). The **command interval** is the time between successive commands within a
skill call (10 ms when on time). A **missed cycle** is a controller period within a skill call with no command
(intervals between commands rounded to periods, minus one). Target (issue 18): p99 <= 5 ms and no missed cycle at
100 Hz over 60 s. Both arm nodes run with ``thread_priority`` ``--thread-priority`` (default 50: SCHED_FIFO, as
ros2_control runs its loop); before it, the same loop with normal scheduling is measured as the reference
(``--no-arm-reference`` skips it). ``--load N`` runs N busy processes beside both: what else a robot's computer
runs (the planner's language model).

    python benchmarks/ros_loop.py [--quick] [--no-record] [--seconds 60] [--no-rover | --no-arm]
        [--thread-priority 50] [--no-arm-reference] [--load 0]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import itertools
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import emit, record
from hrl import DEFAULT_POLICY
from hrl.ros.domains import acquire_domain

ROOT = Path(__file__).resolve().parents[1]


def percentile(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q)) if xs else math.nan


def inference_ms(n: int = 500) -> tuple[float, float]:
    from hrl.policy import GoalPolicy
    from hrl.ros.core import PolicyController

    policy = GoalPolicy.load(DEFAULT_POLICY)
    ctrl = PolicyController(policy, 0.5, 1.5)
    ranges = np.full(len(ctrl.angles), 3.0)
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        ctrl.command((1.0, 1.0, 0.3), (0.2, 0.1), ranges, (5.0, 5.0))
        times.append(1000 * (time.perf_counter() - t0))
    return percentile(times, 50), percentile(times, 99)


def run_rate(rate: float, seconds: float, domain: int) -> dict:
    import rclpy
    from geometry_msgs.msg import PoseStamped, Twist
    from nav_msgs.msg import Odometry
    from sensor_msgs.msg import LaserScan

    env = dict(os.environ, ROS_DOMAIN_ID=str(domain), ROS_LOCALHOST_ONLY="1")
    os.environ.update(ROS_DOMAIN_ID=str(domain), ROS_LOCALHOST_ONLY="1")
    log = Path(tempfile.mkdtemp()) / "latency.json"
    node_proc = subprocess.Popen(
        [sys.executable, "-m", "hrl.ros.policy_node", "--ros-args", "-p", "control_mode:=odom",
         "-p", f"control_hz:={rate}", "-p", f"latency_log:={log}", "-p", "subgoal_budget_s:=1000.0",
         "-p", "stuck_s:=1000.0"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    rclpy.init()
    node = rclpy.create_node("ros_loop_driver")
    odom_pub = node.create_publisher(Odometry, "/odom", 10)
    scan_pub = node.create_publisher(LaserScan, "/scan", 10)
    goal_pub = node.create_publisher(PoseStamped, "/subgoal", 10)
    cmds: list[float] = []
    node.create_subscription(Twist, "/cmd_vel", lambda m: cmds.append(time.monotonic()), 100)
    deadline = time.monotonic() + 120
    while node.count_subscribers("/odom") == 0 and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.1)
    scan = LaserScan()
    scan.header.frame_id = "laser"
    inc = 2 * math.pi / 360
    scan.angle_min, scan.angle_max, scan.angle_increment = -math.pi, math.pi - inc, inc
    scan.range_min, scan.range_max = 0.1, 8.0
    scan.ranges = [3.0] * 360
    goal = PoseStamped()
    goal.header.frame_id = "odom"
    goal.pose.position.x = goal.pose.position.y = 1000.0  # never reached: the policy runs every cycle
    odom = Odometry()
    odom.header.frame_id, odom.child_frame_id = "odom", "base_link"
    odom.pose.pose.orientation.w = 1.0

    def publish() -> None:
        odom.header.stamp = scan.header.stamp = node.get_clock().now().to_msg()
        scan_pub.publish(scan)
        odom_pub.publish(odom)

    period = 1.0 / rate
    for _ in range(int(rate)):  # one second of warm-up, then the subgoal
        publish()
        rclpy.spin_once(node, timeout_sec=period)
    goal_pub.publish(goal)
    rclpy.spin_once(node, timeout_sec=0.2)
    cmds.clear()
    sent = 0
    t_next = time.monotonic()
    t_end = t_next + seconds
    while time.monotonic() < t_end:
        publish()
        sent += 1
        t_next += period
        while (left := t_next - time.monotonic()) > 0:
            rclpy.spin_once(node, timeout_sec=left)
    for _ in range(10):
        rclpy.spin_once(node, timeout_sec=0.02)
    node_proc.send_signal(signal.SIGINT)
    node_proc.wait(timeout=30)
    node.destroy_node()
    rclpy.shutdown()
    cycles = {k: 1000 * np.asarray(v[-sent:]) for k, v in json.loads(log.read_text()).items()}  # after warm-up
    lat = cycles["latency_s"].tolist()
    late = sum(x > 1000 * period for x in lat)
    rest = cycles["latency_s"] - cycles["policy_s"] - cycles["publish_s"]
    return {
        "rate_hz": rate,
        "seconds": seconds,
        "odom_sent": sent,
        "cmd_received": len(cmds),
        "latency_p50_ms": round(percentile(lat, 50), 3),
        "latency_p99_ms": round(percentile(lat, 99), 3),
        "latency_max_ms": round(max(lat), 3) if lat else math.nan,
        "missed_cycles": max(0, sent - len(lat)) + late,
        # where a cycle's time goes, in the node: the policy, the /cmd_vel publish (DDS write), the rest
        "node_policy_p50_ms": round(percentile(cycles["policy_s"].tolist(), 50), 3),
        "node_policy_p99_ms": round(percentile(cycles["policy_s"].tolist(), 99), 3),
        "publish_p50_ms": round(percentile(cycles["publish_s"].tolist(), 50), 3),
        "publish_p99_ms": round(percentile(cycles["publish_s"].tolist(), 99), 3),
        "rest_p50_ms": round(percentile(rest.tolist(), 50), 3),
        "rest_p99_ms": round(percentile(rest.tolist(), 99), 3),
    }


#: the arm's controller rate (Hz), and the two TCP goals (world frame, m) the reach skill is sent between
ARM_HZ = 100.0
ARM_GOALS = ((-0.2, -0.15, 0.2), (0.0, 0.15, 0.1))


def arm_command_start(points: list) -> np.ndarray:
    """The joint position a two-point trajectory of ``hrl.ros.arm_core.interpolate`` starts from: the points are
    at 1/2 and 2/2 of the way, so the start is ``2 p1 - p2`` (exact to rounding)."""
    p1, p2 = (np.asarray(pt.positions, dtype=float) for pt in points[:2])
    return 2 * p1 - p2


def arm_loop_figures(
    states: list[tuple[float, np.ndarray]],
    commands: list[tuple[float, np.ndarray]],
    call_ends: list[float],
    period: float,
) -> dict:
    """Latency, command intervals and missed cycles from what the driver heard: ``states`` (receive time s, arm
    joints) of /joint_states, ``commands`` (receive time s, the position the trajectory started from), the receive
    times of the skill calls' statuses (``call_ends``: the gaps between calls are not control cycles)."""
    times = np.array([t for t, _ in states])
    qs = np.array([q for _, q in states]) if states else np.zeros((0, 7))
    latency, unmatched = [], 0
    for t, q0 in commands:
        before = np.nonzero(times <= t)[0]
        match = before[np.max(np.abs(qs[before] - q0), axis=1) < 1e-7] if before.size else before
        if match.size:
            latency.append(1000 * (t - times[match[-1]]))  # the newest state it could have come from
        else:
            unmatched += 1
    # the commands of each skill call: consecutive ones with no status between them
    calls: list[list[float]] = [[]]
    ends = iter(sorted(call_ends))
    end = next(ends, math.inf)
    for t, _ in commands:
        while t > end:
            calls.append([])
            end = next(ends, math.inf)
        calls[-1].append(t)
    missed, intervals = 0, []
    for call in filter(lambda c: len(c) > 1, calls):
        gaps = np.diff(np.asarray(call))
        intervals += (1000 * gaps).tolist()
        missed += int(np.sum(np.maximum(0, np.round(gaps / period) - 1)))
    return {
        "commands": len(commands),
        "skill_calls": sum(1 for c in calls if c),
        "unmatched_commands": unmatched,
        "latency_p50_ms": round(percentile(latency, 50), 3),
        "latency_p99_ms": round(percentile(latency, 99), 3),
        "latency_max_ms": round(max(latency), 3) if latency else math.nan,
        "interval_p50_ms": round(percentile(intervals, 50), 3),
        "interval_p99_ms": round(percentile(intervals, 99), 3),
        "interval_max_ms": round(max(intervals), 3) if intervals else math.nan,
        "missed_cycles": missed,
    }


def run_arm(seconds: float, domain: int, log_dir: Path, priority: int = 0) -> dict:
    """The arm's loop over DDS (module docstring): sim_arm_node and arm_policy_node in their own processes, both
    with ``thread_priority`` ``priority`` (0: normal scheduling; else SCHED_FIFO, which the nodes log if refused)."""
    import rclpy
    from geometry_msgs.msg import PoseStamped
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String
    from trajectory_msgs.msg import JointTrajectory

    from hrl.ros.runner import NodeProcesses, normal_scheduling, set_thread_priority, spin_until
    from hrl.ros.sim_clock import received_at
    from robots.arm import load_arm

    os.environ.update(ROS_DOMAIN_ID=str(domain), ROS_LOCALHOST_ONLY="1")
    arm_joints = load_arm("panda").joint_names
    nodes = NodeProcesses(log_dir)
    nodes.start("hrl.ros.sim_arm_node", f"control_hz:={ARM_HZ}", "camera_hz:=0.0", f"thread_priority:={priority}")
    policy = nodes.start(
        "hrl.ros.arm_policy_node",
        f"skill_hz:={ARM_HZ}",
        f"trajectory_hz:={2 * ARM_HZ}",
        "tcp_goal_budget:=400",
        f"thread_priority:={priority}",
    )
    rclpy.init()
    node = rclpy.create_node("ros_loop_arm_driver")
    if priority:  # this process stands in for the controller, which runs real-time too (ros2_control)
        refused = set_thread_priority(priority)
        if refused:
            print(f"listener: {refused}", flush=True)
    measuring = {"on": False}
    states: list[tuple[float, np.ndarray]] = []
    commands: list[tuple[float, np.ndarray]] = []
    call_ends: list[float] = []

    def on_state(msg: JointState, info: dict) -> None:
        if measuring["on"]:
            where = {n: i for i, n in enumerate(msg.name)}
            states.append((received_at(info), np.array([msg.position[where[n]] for n in arm_joints])))

    def on_trajectory(msg: JointTrajectory, info: dict) -> None:
        if measuring["on"] and len(msg.points) >= 2:
            order = [list(msg.joint_names).index(n) for n in arm_joints]
            commands.append((received_at(info), arm_command_start(msg.points)[order]))

    statuses: list[str] = []

    def on_status(msg: String, info: dict) -> None:
        statuses.append(msg.data)
        if measuring["on"]:
            call_ends.append(received_at(info))
        send_goal()

    goals = itertools.cycle(ARM_GOALS)
    goal_pub = node.create_publisher(PoseStamped, "/tcp_goal", 10)

    def send_goal() -> None:
        goal = PoseStamped()
        goal.header.frame_id = "world"
        goal.pose.position.x, goal.pose.position.y, goal.pose.position.z = next(goals)
        goal.pose.orientation.w = 1.0
        goal_pub.publish(goal)

    node.create_subscription(JointState, "/joint_states", on_state, 1000)
    node.create_subscription(JointTrajectory, "/panda_arm_controller/joint_trajectory", on_trajectory, 1000)
    node.create_subscription(String, "/arm_subgoal_status", on_status, 100)
    try:
        if not spin_until(node, lambda: node.count_subscribers("/tcp_goal") >= 1, 120):
            raise RuntimeError(f"arm_policy_node did not come up:\n{nodes.log(policy)}")
        send_goal()  # waits in DDS while the skills load; each status sends the next goal
        if not spin_until(node, lambda: len(statuses) >= 1, 120):
            raise RuntimeError(f"no skill call finished within 120 s:\n{nodes.log(policy)}")
        measuring["on"] = True
        spin_until(node, lambda: False, seconds)
        measuring["on"] = False
    finally:
        nodes.stop_all()
        node.destroy_node()
        rclpy.shutdown()
        if priority:  # back to normal scheduling for what this process does next
            normal_scheduling()
    outcomes = collections.Counter(json.loads(s).get("outcome") for s in statuses)
    refused = [line for line in nodes.all_logs().splitlines() if "SCHED_FIFO refused" in line]
    return {
        "rate_hz": ARM_HZ,
        "thread_priority": priority,
        "sched_fifo_refused": bool(refused),
        "seconds": seconds,
        "joint_states_received": len(states),
        **arm_loop_figures(states, commands, call_ends, 1.0 / ARM_HZ),
        "call_outcomes": dict(outcomes),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 s per loop instead of 60")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--no-record", action="store_true")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--no-rover", action="store_true", help="only the arm's loop")
    which.add_argument("--no-arm", action="store_true", help="only the rover's loop")
    parser.add_argument(
        "--thread-priority",
        type=int,
        default=50,
        help="thread_priority of sim_arm_node and arm_policy_node (SCHED_FIFO; 0: normal scheduling); the targets "
        "are judged on this run",
    )
    parser.add_argument(
        "--load",
        type=int,
        default=0,
        help="busy processes (normal scheduling) running beside the arm's loop: what else a robot's computer runs "
        "(a planner's language model, perception); 0: none",
    )
    parser.add_argument(
        "--no-arm-reference",
        action="store_true",
        help="skip the arm's reference run with normal scheduling (thread_priority 0) before it",
    )
    args = parser.parse_args()
    from hrl.ros.runner import thread_priority

    problem = thread_priority(args.thread_priority)
    if problem:
        parser.error(f"--thread-priority {args.thread_priority} {problem}")
    if not (math.isfinite(args.seconds) and args.seconds > 0):
        parser.error(f"--seconds must be a positive number, got {args.seconds}")
    if not 0 <= args.load <= 64:
        parser.error(f"--load must be from 0 to 64 busy processes, got {args.load}")
    seconds = 10.0 if args.quick else args.seconds
    figures: dict = {"quick": args.quick, "seconds": seconds, "targets_met": {}}
    if not args.no_rover:
        figures.update(rover_loop(seconds))
    if not args.no_arm:
        runs = [] if args.no_arm_reference or args.thread_priority == 0 else [("arm_100hz_reference", 0)]
        for key, priority in [*runs, ("arm_100hz", args.thread_priority)]:
            with busy_processes(args.load):
                r = figures[key] = run_arm(
                    seconds, acquire_domain().id, Path(tempfile.mkdtemp(prefix="ros_loop_arm_")), priority
                )
            r["load"] = args.load
            print_arm(r)
        if "arm_100hz_reference" in figures:  # what SCHED_FIFO buys, measured in the same run
            ref = figures["arm_100hz_reference"]
            figures["arm_p99_over_reference_p99"] = round(r["latency_p99_ms"] / ref["latency_p99_ms"], 2)
        figures["targets_met"].update(
            {"arm_p99<=5ms@100Hz": r["latency_p99_ms"] <= 5.0, "arm_no_missed@100Hz": r["missed_cycles"] == 0}
        )
        if not args.no_rover:  # the arm's loop against the rover's, measured in the same run
            r50 = figures["50hz"]
            figures["arm_p99_over_rover50_p99"] = round(r["latency_p99_ms"] / r50["latency_p99_ms"], 2)
            figures["arm_p50_over_rover50_p50"] = round(r["latency_p50_ms"] / r50["latency_p50_ms"], 2)
    if not args.no_record:
        record_rows(figures)
    emit(figures)


@contextlib.contextmanager
def busy_processes(n: int) -> Iterator[None]:
    """``n`` processes spinning on a core each (normal scheduling) while the block runs."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def print_arm(r: dict) -> None:
    scheduling = f"SCHED_FIFO {r['thread_priority']}" if r["thread_priority"] else "normal scheduling"
    if r["sched_fifo_refused"]:
        scheduling += " refused by the system (ran with normal scheduling)"
    if r["load"]:
        scheduling += f", {r['load']} busy processes beside it"
    print(
        f"arm {r['rate_hz']:.0f} Hz ({scheduling}): /joint_states -> JointTrajectory p50 {r['latency_p50_ms']:.2f} ms, "
        f"p99 {r['latency_p99_ms']:.2f} ms, max {r['latency_max_ms']:.2f} ms; command interval p50 / p99 / max "
        f"{r['interval_p50_ms']:.2f} / {r['interval_p99_ms']:.2f} / {r['interval_max_ms']:.2f} ms; "
        f"missed {r['missed_cycles']} of "
        f"{r['commands']} commands in {r['skill_calls']} skill calls ({r['unmatched_commands']} unmatched)",
        flush=True,
    )


def rover_loop(seconds: float) -> dict:
    """The rover's policy node at 20 and 50 Hz, and the policy's own inference time for reference."""
    inf50, inf99 = inference_ms()
    results = {}
    for rate in (20.0, 50.0):
        results[f"{rate:.0f}hz"] = r = run_rate(rate, seconds, domain=acquire_domain().id)
        print(
            f"{rate:.0f} Hz: /odom -> /cmd_vel p50 {r['latency_p50_ms']:.2f} ms, p99 {r['latency_p99_ms']:.2f} ms, "
            f"max {r['latency_max_ms']:.2f} ms; missed {r['missed_cycles']} of {r['odom_sent']}; p50 / p99 of it: "
            f"policy {r['node_policy_p50_ms']:.2f} / {r['node_policy_p99_ms']:.2f}, "
            f"publish {r['publish_p50_ms']:.2f} / {r['publish_p99_ms']:.2f}, "
            f"rest {r['rest_p50_ms']:.2f} / {r['rest_p99_ms']:.2f} ms",
            flush=True,
        )
    r50 = results["50hz"]
    return {
        "policy_inference_p50_ms": round(inf50, 3),
        "policy_inference_p99_ms": round(inf99, 3),
        **results,
        "p99_over_inference_p99": round(r50["latency_p99_ms"] / inf99, 2),
        "targets_met": {"p99<=2ms@50Hz": r50["latency_p99_ms"] <= 2.0, "no_missed@50Hz": r50["missed_cycles"] == 0},
    }


def record_rows(figures: dict) -> None:
    """A row in RESULTS.md's ros_loop table (the rover) and one in ros_loop_arm (the arm), for what ran."""
    met = figures["targets_met"]
    if "50hz" in figures:
        r20, r50 = figures["20hz"], figures["50hz"]
        record(
            "ros_loop",
            figures,
            [
                f"{r20['latency_p50_ms']:.2f} / {r20['latency_p99_ms']:.2f} ms, "
                f"missed {r20['missed_cycles']}/{r20['odom_sent']}",
                f"{r50['latency_p50_ms']:.2f} / {r50['latency_p99_ms']:.2f} ms, "
                f"missed {r50['missed_cycles']}/{r50['odom_sent']} (p50: policy {r50['node_policy_p50_ms']:.2f}, "
                f"publish {r50['publish_p50_ms']:.2f}, rest {r50['rest_p50_ms']:.2f} ms)",
                f"{figures['policy_inference_p50_ms']:.2f} / {figures['policy_inference_p99_ms']:.2f} ms",
                ", ".join(f"{k}: {'yes' if met[k] else '**no**'}" for k in ("p99<=2ms@50Hz", "no_missed@50Hz")),
            ],
            ["20 Hz: p50 / p99, missed", "50 Hz: p50 / p99, missed", "policy inference p50 / p99 (reference)",
             "targets"],
        )  # fmt: skip
    for key in ("arm_100hz_reference", "arm_100hz"):  # the reference first (it ran first)
        if key not in figures:
            continue
        r = figures[key]
        ratio = figures.get("arm_p99_over_rover50_p99") if key == "arm_100hz" else None
        scheduling = f"SCHED_FIFO {r['thread_priority']}" if r["thread_priority"] else "normal scheduling"
        if r["sched_fifo_refused"]:
            scheduling += " (refused: ran with normal scheduling)"
        targets = ", ".join(
            f"{k}: {'yes' if met[k] else '**no**'}" for k in ("arm_p99<=5ms@100Hz", "arm_no_missed@100Hz")
        )
        record(
            "ros_loop_arm",
            figures,
            [
                f"{r['seconds']:.0f} s, {scheduling}"
                + (f", {r['load']} busy processes beside it" if r["load"] else "")
                + (", reference" if key.endswith("reference") else ""),
                f"{r['latency_p50_ms']:.2f} / {r['latency_p99_ms']:.2f} / {r['latency_max_ms']:.2f} ms",
                f"{r['interval_p50_ms']:.2f} / {r['interval_p99_ms']:.2f} / {r['interval_max_ms']:.2f} ms",
                f"{r['missed_cycles']} of {r['commands']} commands ({r['skill_calls']} calls)",
                "–" if ratio is None else f"{ratio:.2f}",
                "(reference, same run)" if key.endswith("reference") else targets,
            ],
            ["window", "/joint_states -> JointTrajectory p50 / p99 / max", "command interval p50 / p99 / max",
             "missed cycles", "arm p99 / rover 50 Hz p99", "targets"],
        )  # fmt: skip


if __name__ == "__main__":
    main()
