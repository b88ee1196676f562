"""``hrl-sim2real``: how far a recorded run on a robot is from the same commands in each simulator.

Reads a rosbag2 recording (``rosbags``, no ROS install needed) with ``/odom`` and ``/cmd_vel`` (needed) and
``/scan``, ``/plan``, ``/subgoal`` (used when present); starts each simulator at the first ``/odom`` pose
and replays the recorded commands from their receive times (each command held until the next, zero after
``cmd_timeout_s`` without one, as the robot base does; ``hrl.base_drive``). Reports, per simulator:

* trajectory error: ATE (RMSE of the position difference over time; both start at the same pose, so no
  alignment) and RPE (RMSE of the difference in relative motion over ``rpe_window_s``: translation, yaw);
* time to each subgoal (first time within ``tolerance`` of it after it was published), real vs simulated;
* success (the last subgoal reached) on the robot and in simulation;
* lidar discrepancy: at the robot's pose at each scan, what the simulator's lidar reads there vs the
  recorded scan (min-pooled into the simulator's rays like the policy node does), mean absolute error.

Writes ``summary.json``, ``report.md``, ``paths.png`` (robot vs simulated paths on the map) and
``errors.png`` (position error over time) to ``runs/sim2real/<bag name>/``.

    hrl-sim2real runs/bags/2026-12-02_12-00-00 --map apartment
    hrl-sim2real BAG --map apartment --backends mujoco pybullet --out runs/sim2real/run1

An arm recording (``/joint_states`` and a ``trajectory_msgs/JointTrajectory`` topic: the bag recorder's ``arm``
preset) is detected and replayed in the tabletop simulators instead: joint tracking error, TCP error, time per
subgoal and task success, robot vs simulators (``hrl.ros.arm_sim2real``; ``--scene``, ``--layout-seed``).

    hrl-sim2real runs/bags/arm_perturbed --scene blocks --layout-seed 0

Broken recordings give a clear error (no ``/odom``, no ``/cmd_vel``, not a bag) or a warning (a missing
optional topic, stamps out of order, a damaged message: what was read before it), never a traceback.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REQUIRED = {"/odom": "nav_msgs/msg/Odometry", "/cmd_vel": "geometry_msgs/msg/Twist"}
OPTIONAL = {
    "/scan": "sensor_msgs/msg/LaserScan",
    "/plan": "nav_msgs/msg/Path",
    "/subgoal": "geometry_msgs/msg/PoseStamped",
}


class BagError(ValueError):
    """A recording that cannot be used, with what is wrong and what to do."""


@dataclass
class Recording:
    """The topics of a bag as arrays; times in seconds from the first message (receive time)."""

    path: Path
    odom_t: np.ndarray  # (n,)
    odom: np.ndarray  # (n, 5): x, y, yaw, v, w
    cmd_t: np.ndarray  # (m,)
    cmd: np.ndarray  # (m, 2): v, w
    scan_t: np.ndarray = field(default_factory=lambda: np.zeros(0))
    scans: list[dict[str, Any]] = field(default_factory=list)  # ranges, angle_min, angle_increment, range_max
    subgoal_t: np.ndarray = field(default_factory=lambda: np.zeros(0))
    subgoals: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))
    plans: list[tuple[float, list[tuple[float, float]]]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def duration(self) -> float:
        return float(self.odom_t[-1] - self.odom_t[0])


def bag_topics(path: str | Path) -> dict[str, str]:
    """Topic -> message type of the bag at ``path`` (:class:`BagError` if it is not a readable rosbag2 directory)."""
    reader = _open(Path(path))
    try:
        return {c.topic: c.msgtype for c in reader.connections}
    finally:
        reader.close()


def _open(path: Path) -> Any:
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    if not path.exists():
        raise BagError(f"{path} does not exist (give the bag directory that holds metadata.yaml)")
    if path.is_dir() and not (path / "metadata.yaml").is_file():
        raise BagError(
            f"{path} has no metadata.yaml: not a rosbag2 directory, or a recording that was not finalised "
            "(the recorder was killed); `ros2 bag reindex` rebuilds it"
        )
    try:
        reader = AnyReader([path], default_typestore=get_typestore(Stores.LATEST))
        reader.open()
    except Exception as err:  # rosbags raises several types for unreadable files
        raise BagError(f"cannot open bag {path}: {err} (is it a complete rosbag2 recording?)") from None
    return reader


def read_messages(
    path: Path, wanted: dict[str, str]
) -> tuple[dict[str, str], dict[str, list[tuple[int, Any]]], list[str]]:
    """The bag's topics (topic -> type), and the deserialised messages (receive time ns, message) of the ``wanted``
    topics (topic -> the type they must have) that it holds, each in time order; notes on what was wrong (out of
    order, damaged after N messages). :class:`BagError` for an unreadable bag or a topic of another type."""
    reader = _open(path)
    notes: list[str] = []
    raw: dict[str, list[tuple[int, Any]]] = {}
    try:
        topics = {c.topic: c.msgtype for c in reader.connections}
        for topic, msgtype in wanted.items():
            if topic in topics and topics[topic] != msgtype:
                raise BagError(f"{path}: topic {topic} has type {topics[topic]}, expected {msgtype}")
        connections = [c for c in reader.connections if c.topic in wanted]
        raw = {c.topic: [] for c in connections}
        count = 0
        try:
            for conn, stamp, data in reader.messages(connections=connections):
                raw[conn.topic].append((stamp, reader.deserialize(data, conn.msgtype)))
                count += 1
        except Exception as err:  # a truncated or corrupt file: keep what was read
            if count == 0:
                raise BagError(f"cannot read any message from {path}: {err} (the file may be truncated)") from None
            notes.append(f"the bag is damaged after {count} messages ({err}); using what was read")
    finally:
        reader.close()
    for topic, items in raw.items():
        stamps = [s for s, _ in items]
        if any(b < a for a, b in itertools.pairwise(stamps)):
            notes.append(f"{topic}: messages out of order in the file; sorted by time")
            items.sort(key=lambda item: item[0])
    return topics, raw, notes


def read_bag(path: str | Path) -> Recording:
    """Read a rosbag2 directory (sqlite3 or mcap) into a :class:`Recording`."""
    path = Path(path)
    topics, raw, notes = read_messages(path, {**REQUIRED, **OPTIONAL})
    raw = {t: raw.get(t, []) for t in (*REQUIRED, *OPTIONAL)}

    for topic in REQUIRED:
        if not raw[topic]:
            present = ", ".join(sorted(topics)) or "none"
            raise BagError(
                f"{path}: no {topic} messages ({REQUIRED[topic]}); hrl-sim2real needs /odom (where the robot "
                f"was) and /cmd_vel (what it was told) to replay a run. Topics in the bag: {present}"
            )
    for topic in OPTIONAL:
        if not raw[topic]:
            notes.append(f"no {topic} in the bag: {_what_needs(topic)} skipped")

    _check_header_stamps(raw, notes)

    t0 = min(items[0][0] for items in raw.values() if items)
    sec = lambda ns: (ns - t0) * 1e-9  # noqa: E731

    odom_t = np.array([sec(s) for s, _ in raw["/odom"]])
    odom = np.array([_odom_row(m) for _, m in raw["/odom"]])
    finite = np.isfinite(odom).all(axis=1)
    if not finite.all():
        notes.append(f"/odom: {int((~finite).sum())} message(s) with NaN or inf dropped")
        odom_t, odom = odom_t[finite], odom[finite]
    if len(odom_t) < 2:
        raise BagError(f"{path}: fewer than two usable /odom messages; nothing to compare")
    cmd_t = np.array([sec(s) for s, _ in raw["/cmd_vel"]])
    cmd = np.array([[float(m.linear.x), float(m.angular.z)] for _, m in raw["/cmd_vel"]])
    rec = Recording(path=path, odom_t=odom_t, odom=odom, cmd_t=cmd_t, cmd=cmd, warnings=notes)
    if raw["/scan"]:
        rec.scan_t = np.array([sec(s) for s, _ in raw["/scan"]])
        rec.scans = [
            {
                "ranges": np.asarray(m.ranges, dtype=np.float64),
                "angle_min": float(m.angle_min),
                "angle_increment": float(m.angle_increment),
                "range_min": float(m.range_min),
                "range_max": float(m.range_max),
            }
            for _, m in raw["/scan"]
        ]
    if raw["/subgoal"]:
        rec.subgoal_t = np.array([sec(s) for s, _ in raw["/subgoal"]])
        rec.subgoals = np.array([[m.pose.position.x, m.pose.position.y] for _, m in raw["/subgoal"]], dtype=float)
    rec.plans = [(sec(s), [(p.pose.position.x, p.pose.position.y) for p in m.poses]) for s, m in raw["/plan"]]
    return rec


def _what_needs(topic: str) -> str:
    return {"/scan": "lidar discrepancy", "/subgoal": "time to subgoal and success", "/plan": "the plan drawing"}[topic]


def _odom_row(m: Any) -> list[float]:
    q = m.pose.pose.orientation
    yaw = math.atan2(2.0 * (q.w * q.z + q.x * q.y), 1.0 - 2.0 * (q.y * q.y + q.z * q.z))
    return [m.pose.pose.position.x, m.pose.pose.position.y, yaw, m.twist.twist.linear.x, m.twist.twist.angular.z]


def _check_header_stamps(raw: dict[str, list[tuple[int, Any]]], notes: list[str]) -> None:
    """Receive times are the clock used. Where a sensor's header stamps go backwards (messages delivered
    out of order), its messages are put back in header-stamp order on the same receive times."""
    for topic in ("/odom", "/scan"):
        items = raw[topic]
        stamps = [m.header.stamp.sec * 10**9 + m.header.stamp.nanosec for _, m in items]
        backwards = sum(1 for a, b in itertools.pairwise(stamps) if b < a)
        if backwards:
            order = sorted(range(len(items)), key=lambda i: stamps[i])
            raw[topic] = [(items[k][0], items[i][1]) for k, i in enumerate(order)]
            notes.append(f"{topic}: header stamps go backwards {backwards} time(s); re-ordered by header stamp")


@dataclass
class Replay:
    backend: str
    t: np.ndarray  # control times (s)
    sim: np.ndarray  # (k, 3) x, y, yaw in simulation
    real: np.ndarray  # (k, 3) the robot (odom interpolated at the same times)
    collisions: int
    lidar_mae: float | None = None
    lidar_scans: int = 0


def replay(
    rec: Recording,
    world: Any,
    backend: str,
    *,
    robot: str = "rover",
    control_hz: float = 10.0,
    cmd_timeout_s: float = 0.5,
) -> Replay:
    """The recorded commands replayed in ``backend`` from the first /odom pose.

    Each command takes effect at its recorded receive time, at the simulator's physics-step resolution,
    as the simulated robot applies it (``hrl.base_drive``); the simulated pose is sampled at the end of
    every control period, on the base's period grid (:func:`period_start`).
    """
    from hrl.base_drive import PHYSICS_DT, CommandTimeline, drive, make_base_env, physics_steps_per_period
    from sim.navigation.world import Pose2D

    steps = physics_steps_per_period(control_hz)
    env = make_base_env(world, robot, backend)
    u = env.unwrapped
    x0, y0, yaw0 = rec.odom[0, :3]
    if not world.is_free((x0, y0), clearance=0.0):
        raise BagError(f"the recording starts at ({x0:.2f}, {y0:.2f}), inside a wall of map {world.name!r}: wrong map?")
    env.reset(seed=0)
    u.observation_at(Pose2D(float(x0), float(y0), float(yaw0)))
    commands = CommandTimeline(cmd_timeout_s)
    for t, (v, w) in zip(rec.cmd_t, rec.cmd, strict=True):
        commands.add(float(t), float(v), float(w))
    dt = steps * PHYSICS_DT
    start, stop = period_start(rec.odom_t, dt), float(rec.odom_t[-1])
    times = np.arange(start, stop + 1e-9, dt)
    poses, collisions = [], 0
    for k, t in enumerate(times):
        pose = u.pose
        poses.append((pose.x, pose.y, pose.yaw))
        if k < len(times) - 1:
            collisions += int(drive(env, commands, float(t), steps))  # periods with a wall contact
    result = Replay(backend, times - start, np.array(poses), interpolate_odom(rec, times), collisions)
    if rec.scans:
        result.lidar_mae, result.lidar_scans = lidar_discrepancy(rec, env)
    env.close()
    return result


def period_start(odom_t: np.ndarray, dt: float) -> float:
    """The base's first control-period boundary on the recording's clock.

    A base publishes /odom at the end of each period and the recorder stamps it some delay later, never
    earlier. Taking the first message's stamp as the boundary shifts every period by that message's
    delay. The messages that came about on time mark the boundaries best: their offsets from the first
    stamp's period grid cluster just after the boundary (within a quarter period of the median offset).
    A tick late by more than half a period wraps round to look early, so the boundary is the cluster's
    10th percentile, not its minimum: a few such ticks do not move it.
    """
    offsets = np.mod(odom_t - odom_t[0], dt)
    offsets = np.where(offsets >= dt / 2, offsets - dt, offsets)  # to [-dt/2, dt/2): early or late vs the grid
    typical = float(np.median(offsets))
    on_time = offsets[np.abs(offsets - typical) <= dt / 4]
    return float(odom_t[0] + min(0.0, float(np.quantile(on_time, 0.1))))


def interpolate_odom(rec: Recording, times: np.ndarray) -> np.ndarray:
    yaw = np.unwrap(rec.odom[:, 2])
    out = np.stack([np.interp(times, rec.odom_t, rec.odom[:, k]) for k in (0, 1)] + [np.interp(times, rec.odom_t, yaw)])
    out = out.T
    out[:, 2] = (out[:, 2] + math.pi) % (2 * math.pi) - math.pi
    return out


def lidar_discrepancy(rec: Recording, env: Any, max_scans: int = 200) -> tuple[float | None, int]:
    """Mean |simulated - recorded| range (m) over the simulator's rays, at the robot's pose at each scan."""
    from hrl.ros.core import adapt_scan
    from sim.navigation.world import Pose2D

    u = env.unwrapped
    lidar = u.robot.lidar
    idx = np.linspace(0, len(rec.scans) - 1, min(max_scans, len(rec.scans))).astype(int)
    idx = idx[(rec.scan_t[idx] >= rec.odom_t[0]) & (rec.scan_t[idx] <= rec.odom_t[-1])]
    poses = interpolate_odom(rec, rec.scan_t[idx])  # the robot's pose at each scan, in one pass
    angles = np.asarray(lidar.angles())
    errors = []
    for i, (x, y, yaw) in zip(idx, poses, strict=True):
        if not u.world.in_bounds((x, y)):
            continue
        s = rec.scans[i]
        real = adapt_scan(
            s["ranges"], s["angle_min"], s["angle_increment"], s["range_min"], s["range_max"], angles, lidar.max_range
        )
        simulated = u.observation_at(Pose2D(float(x), float(y), float(yaw)))["observation"][6:] * lidar.max_range
        errors.append(np.abs(np.asarray(real, dtype=np.float64) - simulated))
    if not errors:
        return None, 0
    return float(np.mean(np.concatenate(errors))), len(errors)


# ---------------------------------------------------------------------------------------------- metrics


def ate(rep: Replay) -> float:
    return float(np.sqrt(np.mean(np.sum((rep.sim[:, :2] - rep.real[:, :2]) ** 2, axis=1))))


def rpe(rep: Replay, window_s: float, control_hz: float) -> tuple[float | None, float | None]:
    """RMSE of (relative translation in the start frame, relative yaw) differences over ``window_s``."""
    n = max(1, round(window_s * control_hz))
    if len(rep.t) <= n:
        return None, None

    def relative(traj: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        d = traj[n:, :2] - traj[:-n, :2]
        c, s = np.cos(traj[:-n, 2]), np.sin(traj[:-n, 2])
        local = np.stack([c * d[:, 0] + s * d[:, 1], -s * d[:, 0] + c * d[:, 1]], axis=1)
        dyaw = (traj[n:, 2] - traj[:-n, 2] + math.pi) % (2 * math.pi) - math.pi
        return local, dyaw

    (lr, yr), (ls, ys) = relative(rep.real), relative(rep.sim)
    trans = float(np.sqrt(np.mean(np.sum((lr - ls) ** 2, axis=1))))
    rot = float(np.sqrt(np.mean(((yr - ys + math.pi) % (2 * math.pi) - math.pi) ** 2)))
    return trans, rot


def subgoal_times(rec: Recording, t: np.ndarray, traj: np.ndarray, tolerance: float) -> list[float | None]:
    """Seconds from each subgoal's publication until the trajectory is within ``tolerance`` of it."""
    out: list[float | None] = []
    for ts, goal in zip(rec.subgoal_t, rec.subgoals, strict=True):
        rel = ts - rec.odom_t[0]
        after = t >= rel
        near = np.linalg.norm(traj[:, :2] - goal, axis=1) <= tolerance
        hit = np.nonzero(after & near)[0]
        out.append(round(float(t[hit[0]] - rel), 2) if hit.size else None)
    return out


def compare(
    rec: Recording,
    world: Any,
    backends: list[str],
    *,
    robot: str = "rover",
    control_hz: float = 10.0,
    tolerance: float = 0.3,
    rpe_window_s: float = 1.0,
    cmd_timeout_s: float = 0.5,
) -> dict[str, Any]:
    """Replay in every backend and measure; returns the summary (JSON-able) and keeps replays for plots."""
    summary: dict[str, Any] = {
        "bag": str(rec.path),
        "map": world.name,
        "duration_s": round(rec.duration, 2),
        "odom_messages": len(rec.odom_t),
        "cmd_vel_messages": len(rec.cmd_t),
        "scan_messages": len(rec.scans),
        "subgoals": len(rec.subgoals),
        "warnings": list(rec.warnings),
        "backends": {},
    }
    real_times = None
    replays = []
    for backend in backends:
        rep = replay(rec, world, backend, robot=robot, control_hz=control_hz, cmd_timeout_s=cmd_timeout_s)
        replays.append(rep)
        err = np.linalg.norm(rep.sim[:, :2] - rep.real[:, :2], axis=1)
        trans, rot = rpe(rep, rpe_window_s, control_hz)
        if real_times is None and len(rec.subgoals):
            real_times = subgoal_times(rec, rep.t, rep.real, tolerance)
        sim_times = subgoal_times(rec, rep.t, rep.sim, tolerance) if len(rec.subgoals) else []
        summary["backends"][backend] = {
            "ate_m": round(ate(rep), 4),
            "final_position_error_m": round(float(err[-1]), 4),
            "max_position_error_m": round(float(err.max()), 4),
            "rpe_translation_m": None if trans is None else round(trans, 4),
            "rpe_yaw_rad": None if rot is None else round(rot, 4),
            "rpe_window_s": rpe_window_s,
            "time_to_subgoal_s": sim_times,
            "success": bool(sim_times) and sim_times[-1] is not None,
            "collisions": rep.collisions,
            "lidar_mae_m": None if rep.lidar_mae is None else round(rep.lidar_mae, 4),
            "lidar_scans_compared": rep.lidar_scans,
        }
    if len(rec.subgoals):
        summary["robot"] = {"time_to_subgoal_s": real_times, "success": bool(real_times) and real_times[-1] is not None}
    summary["_replays"] = replays
    return summary


# ---------------------------------------------------------------------------------------------- output


def plot_paths(rec: Recording, world: Any, replays: list[Replay], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    w, h = world.size
    fig, ax = plt.subplots(figsize=(7, 7 * h / w + 0.5))
    for wall in world.walls:
        xs, ys = wall.footprint().exterior.xy
        ax.fill(xs, ys, color="0.35", lw=0)
    ax.plot(rec.odom[:, 0], rec.odom[:, 1], color="black", lw=2.2, label="robot (/odom)")
    colours = {"mujoco": "tab:orange", "pybullet": "tab:blue"}
    for rep in replays:
        ax.plot(rep.sim[:, 0], rep.sim[:, 1], lw=1.5, ls="--", color=colours.get(rep.backend), label=rep.backend)
    for k, (_, plan) in enumerate(rec.plans):
        if plan:
            xy = np.asarray(plan)
            ax.plot(xy[:, 0], xy[:, 1], ":", color="tab:green", lw=1, alpha=0.7, label="plan" if k == 0 else None)
    if len(rec.subgoals):
        ax.plot(rec.subgoals[:, 0], rec.subgoals[:, 1], "*", color="tab:green", ms=11, label="subgoals")
    ax.plot(*rec.odom[0, :2], "o", color="tab:red", ms=7, label="start")
    ax.set_aspect("equal")
    ax.legend(loc="best", fontsize=8)
    ax.set_title(f"{rec.path.name}: robot vs the same commands in simulation")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_errors(replays: list[Replay], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.2))
    for rep in replays:
        ax.plot(rep.t, np.linalg.norm(rep.sim[:, :2] - rep.real[:, :2], axis=1), label=rep.backend)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("position error (m)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_outputs(summary: dict[str, Any], rec: Recording, world: Any, out_dir: Path, command: str) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    replays = summary.pop("_replays")
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    plot_paths(rec, world, replays, out_dir / "paths.png")
    plot_errors(replays, out_dir / "errors.png")
    lines = [
        f"# Sim-to-real: `{rec.path.name}`",
        "",
        "```bash",
        command,
        "```",
        "",
        f"Map `{world.name}`, {summary['duration_s']} s recorded, {summary['cmd_vel_messages']} commands replayed.",
        "",
        "| simulator | ATE (m) | final error (m) | RPE trans. (m) / yaw (rad) per "
        f"{next(iter(summary['backends'].values()))['rpe_window_s']} s | success | lidar MAE (m) |",
        "|---|---|---|---|---|---|",
    ]
    robot = summary.get("robot")
    for name, b in summary["backends"].items():
        rpe_cell = "–" if b["rpe_translation_m"] is None else f"{b['rpe_translation_m']:.3f} / {b['rpe_yaw_rad']:.3f}"
        lidar = "–" if b["lidar_mae_m"] is None else f"{b['lidar_mae_m']:.3f}"
        success = (
            "–"
            if robot is None
            else f"{'yes' if b['success'] else 'no'} (robot: {'yes' if robot['success'] else 'no'})"
        )
        lines.append(
            f"| {name} | {b['ate_m']:.3f} | {b['final_position_error_m']:.3f} | {rpe_cell} | {success} | {lidar} |"
        )
    if robot is not None:
        names = list(summary["backends"])
        lines += ["", "Time to each subgoal (s, from its publication; – = never reached):", ""]
        lines += ["| subgoal | robot | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
        fmt = lambda v: "–" if v is None else f"{v:.2f}"  # noqa: E731
        for k, real in enumerate(robot["time_to_subgoal_s"]):
            sims = " | ".join(fmt(summary["backends"][n]["time_to_subgoal_s"][k]) for n in names)
            lines.append(f"| {k + 1} | {fmt(real)} | {sims} |")
    return write_report(out_dir, lines, {"paths": "paths.png", "position error": "errors.png"}, summary["warnings"])


def write_report(out_dir: Path, lines: list[str], figures: dict[str, str], notes: list[str]) -> Path:
    """``report.md`` in ``out_dir``: ``lines``, then the figures (caption -> file), then the warnings."""
    for caption, name in figures.items():
        lines += ["", f"![{caption}]({name})"]
    lines.append("")
    if notes:
        lines += ["## Warnings", "", *(f"* {w}" for w in notes), ""]
    report = out_dir / "report.md"
    report.write_text("\n".join(lines))
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hrl-sim2real", description=__doc__.splitlines()[0])
    parser.add_argument("bag", type=Path, help="rosbag2 directory (e.g. from hrl_bag_recorder or ros2 bag record)")
    parser.add_argument("--map", default="apartment", help="map the run took place in (name or .yaml path)")
    parser.add_argument("--backends", nargs="+", default=["mujoco", "pybullet"], help="simulators to replay in")
    parser.add_argument("--robot", default="rover")
    parser.add_argument(
        "--control-hz", type=float, default=None, help="the rate commands are replayed at (default: rover 10, arm 100)"
    )
    parser.add_argument("--tolerance", type=float, default=0.3, help="m: a subgoal counts as reached within this")
    parser.add_argument("--rpe-window", type=float, default=1.0, help="s: the relative pose error's time window")
    parser.add_argument("--cmd-timeout", type=float, default=0.5, help="s: a command older than this reads zero")
    parser.add_argument("--out", type=Path, default=None, help="output directory (default runs/sim2real/<bag>)")
    arm = parser.add_argument_group("arm recordings")
    arm.add_argument("--scene", default="blocks", help="the tabletop scene of the run (name or .yaml path)")
    arm.add_argument("--layout-seed", type=int, default=0, help="the scene's layout seed (sim_arm_node's layout_seed)")
    arm.add_argument(
        "--subgoal-slack", type=float, default=0.005, help="m: a subgoal counts as reached within its tolerance + this"
    )
    arm.add_argument("--joint-prefix", default="", help="prefix of the joint names in the bag")
    arm.add_argument("--trajectory-topic", default=None, help="the JointTrajectory topic (default: the only one)")
    arm.add_argument(
        "--gripper-topic", default=None, help="the gripper's Float64MultiArray topic (default: the only one)"
    )
    args = parser.parse_args(argv)

    from sim.navigation.physics import BACKENDS
    from sim.navigation.world import load_world

    def fail(message: str) -> int:
        print(f"hrl-sim2real: error: {message}", file=sys.stderr)
        return 2

    unknown = [b for b in args.backends if b not in BACKENDS]
    if unknown:
        return fail(f"unknown backend(s) {unknown}; available: {', '.join(sorted(BACKENDS))}")
    if not (math.isfinite(args.subgoal_slack) and args.subgoal_slack >= 0):
        return fail(f"--subgoal-slack must be a number >= 0, got {args.subgoal_slack}")
    for name in ("control_hz", "tolerance", "rpe_window", "cmd_timeout"):
        value = getattr(args, name)
        if value is not None and not (math.isfinite(value) and value > 0):
            return fail(f"--{name.replace('_', '-')} must be a positive number, got {value}")
    command = "hrl-sim2real " + " ".join(sys.argv[1:] if argv is None else argv)
    from hrl.ros.arm_sim2real import is_arm_recording

    try:
        topics = bag_topics(args.bag)
        if is_arm_recording(topics):
            return _main_arm(args, command)
    except (ValueError, FileNotFoundError) as err:  # BagError, a bad scene
        return fail(str(err))
    if not set(REQUIRED) & set(topics):
        return fail(
            f"{args.bag} is neither a rover recording (/odom and /cmd_vel) nor an arm recording (/joint_states and a "
            f"trajectory_msgs/JointTrajectory topic: the bag recorder's arm preset); topics in the bag: "
            f"{', '.join(sorted(topics)) or 'none'}"
        )
    args.control_hz = args.control_hz or 10.0
    try:
        world = load_world(args.map)
    except (ValueError, FileNotFoundError) as err:
        return fail(str(err))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rec = read_bag(args.bag)
        for note in rec.warnings:
            print(f"hrl-sim2real: warning: {note}", file=sys.stderr)
        summary = compare(
            rec, world, args.backends, robot=args.robot, control_hz=args.control_hz, tolerance=args.tolerance,
            rpe_window_s=args.rpe_window, cmd_timeout_s=args.cmd_timeout,
        )  # fmt: skip
    except (ValueError, FileNotFoundError) as err:  # BagError, or a bad --robot
        return fail(str(err))
    report = write_outputs(summary, rec, world, _out_dir(args), command)
    return _said(report, [
        f"{name}: ATE {b['ate_m']:.3f} m, final error {b['final_position_error_m']:.3f} m, "
        f"RPE {b['rpe_translation_m']} m / {b['rpe_yaw_rad']} rad, lidar MAE {b['lidar_mae_m']} m"
        for name, b in summary["backends"].items()
    ])  # fmt: skip


def _out_dir(args: argparse.Namespace) -> Path:
    return args.out or Path("runs") / "sim2real" / args.bag.resolve().name


def _said(report: Path, lines: list[str]) -> int:
    for line in [*lines, f"report: {report}"]:
        print(f"[hrl-sim2real] {line}")
    return 0


def _main_arm(args: argparse.Namespace, command: str) -> int:
    """``hrl-sim2real`` on an arm recording (``hrl.ros.arm_sim2real``)."""
    from hrl.ros import arm_sim2real
    from robots.arm import load_arm
    from sim.tabletop.scene import load_scene

    scene = load_scene(args.scene)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec = arm_sim2real.read_arm_bag(
            args.bag, load_arm("panda"), scene, joint_prefix=args.joint_prefix,
            trajectory_topic=args.trajectory_topic, gripper_topic=args.gripper_topic,
        )  # fmt: skip
    for note in rec.warnings:
        print(f"hrl-sim2real: warning: {note}", file=sys.stderr)
    summary = arm_sim2real.compare(
        rec, scene, args.backends, control_hz=args.control_hz or 100.0, layout_seed=args.layout_seed,
        slack=args.subgoal_slack,
    )  # fmt: skip
    report = arm_sim2real.write_outputs(summary, _out_dir(args), command)
    robot = summary.get("robot", {})
    return _said(report, [
        f"arm recording, {summary['duration_s']} s; robot task success: {robot.get('task_success')}",
        *(f"{name}: joint RMS {b['joint_rms_rad']:.4f} rad (max {b['joint_max_rad']:.4f}), TCP RMS "
          f"{1000 * b['tcp_rms_m']:.1f} mm (max {1000 * b['tcp_max_m']:.1f}), task success {b['task_success']}"
          for name, b in summary["backends"].items()),
    ])  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
