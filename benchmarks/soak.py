"""Soak: the simulated robot, the policy node and the planner node (each its own process, real DDS)
running tasks back to back for 10 minutes with a 50 Hz control loop.

The policy node runs at ``control_hz`` 50 (timer mode: a /cmd_vel every 20 ms, moving or not) and the
simulated robot publishes /odom and /scan at 50 Hz; the graph planner takes apartment tasks one after
another, each from where the robot ended the last. Measured:

* missed control cycles per interval (a minute; 10 s with ``--quick``): the commands expected at 50 Hz
  minus those received in this process (the node's timer skips a period that is already over, so a
  missed cycle is a missing message); also late arrivals (more than 1.5 periods after the previous one,
  which include DDS delivery and this process's scheduling). Their trend: the least-squares slope over
  the intervals, and whether it is significantly upward (slope > 0 by more than two standard errors);
* the resident memory (RSS) of each node process after a warm-up task and at the end (target: < 5 %
  growth);
* tasks done / failed, and their durations.

    python benchmarks/soak.py [--quick] [--minutes 10] [--no-record]
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import emit, record

RATE_HZ = 50.0
TASKS = ("fridge", "bed", "desk", "stove", "toilet", "charging_dock", "tv", "sofa")  # after the warm-up: sofa
TASK_TIMEOUT_S = 150.0


def rss_mb(pid: int) -> float:
    """Resident memory of a process (MB), from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def trend(counts: list[float]) -> tuple[float, float]:
    """Least-squares slope of ``counts`` over their index, and its standard error (nan with < 3 points)."""
    n = len(counts)
    if n < 3:
        return (math.nan, math.nan)
    x = np.arange(n, dtype=float)
    slope, intercept = np.polyfit(x, counts, 1)
    residual = np.asarray(counts) - (slope * x + intercept)
    se = math.sqrt(float(residual @ residual) / (n - 2) / float(((x - x.mean()) ** 2).sum()))
    return float(slope), se


class CycleWatch:
    """Arrival times of /cmd_vel, counted per interval of ``bucket_s`` since :meth:`start`: commands
    received, and late arrivals (more than 1.5 periods after the previous one)."""

    def __init__(self, period: float, bucket_s: float) -> None:
        self.period, self.bucket_s = period, bucket_s
        self.t0: float | None = None
        self.last: float | None = None
        self.received: list[int] = []
        self.late: list[int] = []

    def start(self) -> None:
        self.t0 = self.last = time.monotonic()

    def on_cmd(self, _msg: object) -> None:
        now = time.monotonic()
        if self.t0 is None or self.last is None:
            return
        k = int((now - self.t0) // self.bucket_s)
        while len(self.received) <= k:
            self.received.append(0)
            self.late.append(0)
        self.received[k] += 1
        self.late[k] += now - self.last > 1.5 * self.period
        self.last = now

    def missed(self, intervals: int) -> list[int]:
        """Control periods without a command in each of the first ``intervals`` intervals: expected minus
        received (rcl skips a timer period that is already over, so a late cycle is a missing message; an
        interval's edge can move one message into the next, hence -1 now and then)."""
        expected = round(self.bucket_s / self.period)
        got = self.received + [0] * max(0, intervals - len(self.received))
        return [expected - got[k] for k in range(intervals)]


def soak(seconds: float, bucket_s: float, log_dir: Path) -> dict:
    import rclpy
    from geometry_msgs.msg import Twist
    from std_msgs.msg import String

    from hrl.ros.planner_node import is_final
    from hrl.ros.runner import NodeProcesses, spin_until

    nodes = NodeProcesses(log_dir)
    rclpy.init()
    node = rclpy.create_node(f"soak_{os.getpid()}")
    watch = CycleWatch(1.0 / RATE_HZ, bucket_s)
    try:
        procs = {
            "sim_robot_node": nodes.start(
                "hrl.ros.sim_robot_node", "map:=apartment", "start:=kitchen", f"control_hz:={RATE_HZ}"
            ),
            "policy_node": nodes.start("hrl.ros.policy_node", f"control_hz:={RATE_HZ}"),
            "planner_node": nodes.start("hrl.ros.planner_node", "map:=apartment", "planner:=graph"),
        }
        status: list[str] = []
        node.create_subscription(String, "/task_status", lambda m: status.append(m.data), 10)
        node.create_subscription(Twist, "/cmd_vel", watch.on_cmd, 100)
        task_pub = node.create_publisher(String, "/task", 10)
        up = lambda: node.count_subscribers("/task") and node.count_subscribers("/subgoal")  # noqa: E731
        if not spin_until(node, up, 180):
            raise RuntimeError("the nodes did not come up:\n" + "\n".join(nodes.log(p) for p in procs.values()))

        def run_task(text: str, timeout_s: float) -> tuple[str | None, float]:
            """The task's outcome (None: none within ``timeout_s``) and how long it took."""
            status.clear()
            t = time.monotonic()
            task_pub.publish(String(data=text))
            # this task's outcome: a 'cancelled' is the previous task's, ended by this one
            final = lambda: [s for s in status if is_final(s) and not s.startswith("cancelled:")]  # noqa: E731
            return (final()[0] if spin_until(node, final, timeout_s) else None), time.monotonic() - t

        warm = run_task("sofa", TASK_TIMEOUT_S)  # first plans, first allocations: not part of the soak
        print(f"warm-up task: {warm[0]} in {warm[1]:.1f} s", flush=True)
        rss_start = {name: rss_mb(p.pid) for name, p in procs.items()}
        watch.start()
        t_end = time.monotonic() + seconds
        outcomes: list[tuple[str, str, float]] = []
        unfinished = None
        for k in itertools.count():
            left = t_end - time.monotonic()
            if left <= 0:
                break
            text, timeout = TASKS[k % len(TASKS)], min(TASK_TIMEOUT_S, left)
            result, took = run_task(text, timeout)
            if result is None and timeout < TASK_TIMEOUT_S:  # cut by the end of the soak, not failed
                unfinished = text
                break
            outcomes.append((text, result or f"failed: no outcome within {TASK_TIMEOUT_S:.0f} s", took))
            at = seconds - (t_end - time.monotonic())
            print(f"{at:6.0f} s  {text:>14}: {outcomes[-1][1]} ({took:.1f} s)", flush=True)
        elapsed = time.monotonic() - watch.t0  # type: ignore[operator]
        rss_end = {name: rss_mb(p.pid) for name, p in procs.items()}
        dead = [name for name, p in procs.items() if p.poll() is not None]
    finally:
        nodes.stop_all()
        node.destroy_node()
        rclpy.shutdown()
    full = int(elapsed // bucket_s)  # complete intervals only: the last one is cut short
    scale = 60.0 / bucket_s
    per_minute = [m * scale for m in watch.missed(full)]
    slope, se = trend(per_minute)
    growth = {name: round(100 * (rss_end[name] / rss_start[name] - 1), 2) for name in procs}
    done = [o for o in outcomes if o[1] == "done"]
    return {
        "seconds": round(elapsed, 1),
        "rate_hz": RATE_HZ,
        "interval_s": bucket_s,
        "missed_per_minute": [round(m, 1) for m in per_minute],
        "missed_total": sum(watch.missed(full)),
        "late_per_minute": [round(n * scale, 1) for n in watch.late[:full]],
        "cmd_received": sum(watch.received[:full]),
        "cmd_expected": round(full * bucket_s * RATE_HZ),
        "missed_slope_per_minute": round(slope * scale, 3) if not math.isnan(slope) else None,
        "missed_slope_se": round(se * scale, 3) if not math.isnan(se) else None,
        "upward_trend": bool(slope > 0 and slope > 2 * se) if not math.isnan(slope) else None,
        "rss_start_mb": {k: round(v, 1) for k, v in rss_start.items()},
        "rss_end_mb": {k: round(v, 1) for k, v in rss_end.items()},
        "rss_growth_pct": growth,
        "tasks_done": len(done),
        "tasks_failed": len(outcomes) - len(done),
        "task_cut_by_the_end": unfinished,
        "failures": [f"{t}: {r}" for t, r, _ in outcomes if r != "done"],
        "task_s_median": round(statistics.median(o[2] for o in done), 1) if done else None,
        "nodes_exited_early": dead,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 minute in 10-s intervals instead of 10 minutes")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--no-record", action="store_true", help="do not append to benchmarks/RESULTS.md")
    args = parser.parse_args()
    seconds, bucket_s = (60.0, 10.0) if args.quick else (60.0 * args.minutes, 60.0)

    from hrl.ros.domains import acquire_domain

    os.environ["ROS_DOMAIN_ID"] = str(acquire_domain().id)  # held until this process ends
    os.environ["ROS_LOCALHOST_ONLY"] = "1"
    with tempfile.TemporaryDirectory() as tmp:
        r = soak(seconds, bucket_s, Path(tmp))
    max_growth = max(r["rss_growth_pct"].values())
    figures = {
        "quick": args.quick,
        **r,
        "targets_met": {
            "no_upward_trend": r["upward_trend"] is False,
            "rss_growth<5%": max_growth < 5.0,
            "no_node_exited": not r["nodes_exited_early"],
        },
    }
    print(
        f"{r['seconds']:.0f} s at {RATE_HZ:.0f} Hz: missed cycles per minute {r['missed_per_minute']} "
        f"(slope {r['missed_slope_per_minute']} +- {r['missed_slope_se']} per minute); RSS growth "
        f"{r['rss_growth_pct']} %; tasks done {r['tasks_done']}, failed {r['tasks_failed']}",
        flush=True,
    )
    if not args.no_record:
        record(
            "soak",
            figures,
            [
                f"{r['seconds'] / 60:.1f} min",
                f"{r['missed_total']} of {r['cmd_expected']}; per minute {r['missed_per_minute']}",
                f"{r['missed_slope_per_minute']} ± {r['missed_slope_se']}",
                ", ".join(f"{k}: {r['rss_start_mb'][k]:.0f} → {r['rss_end_mb'][k]:.0f} MB ({v:+.1f} %)"
                          for k, v in r["rss_growth_pct"].items()),
                f"{r['tasks_done']} / {r['tasks_failed']}",
                ", ".join(f"{k}: {'yes' if v else '**no**'}" for k, v in figures["targets_met"].items()),
            ],
            ["duration", "missed cycles at 50 Hz (total; per minute)", "trend (missed/min per min ± SE)",
             "RSS after warm-up → end", "tasks done / failed", "targets"],
        )  # fmt: skip
    emit(figures)


if __name__ == "__main__":
    main()
