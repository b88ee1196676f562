"""Sim-to-real for the arm (``hrl-sim2real`` on an arm recording): the robot's recorded joint trajectories and gripper
commands replayed in each nominal simulator, and how far the simulators are from the robot.

An arm recording (the bag recorder's ``arm`` preset, or ``ros2 bag record`` of the same topics) holds
``/joint_states`` and a ``trajectory_msgs/JointTrajectory`` topic (needed), and the gripper's
``std_msgs/Float64MultiArray``, ``/arm_subgoal`` with ``/arm_subgoal_status``, ``/task_status`` and
``/objects/<name>/pose`` (used when present). Each simulator (``PandaTabletopEnv`` on MuJoCo or PyBullet: the same
scene and layout seed, the scene's nominal dynamics, the arm put at the robot's first recorded joint state) is
driven as ``sim_arm_node`` drives its physics: every control period on the recording's period grid
(:func:`hrl.sim2real.period_start` of the joint states), the commands received by then take effect (a trajectory
tracked from its receipt, or its stamp, by ``hrl.ros.sim_arm_node.TrackedTrajectory``, the fingers closing to the
commanded width). Reported, per simulator:

* joint tracking error against the robot's joint states at the same times: RMS (all joints, and per joint), max;
* TCP error: the distance between the TCPs (forward kinematics of the arm's URDF, ``robots.kinematics``): RMS,
  max, final;
* each subgoal (a skill call on ``/arm_subgoal``): the distance from the call's object (or the TCP) to its goal
  when the call ended (its status), and whether and when it came within the call's tolerance + ``slack`` (5 mm)
  between the call and its status (a skill stops as soon as it is within its tolerance, so the robot ends just
  inside it: without the slack a simulator a millimetre off would read as failing); the robot's by the same rule
  from its recorded state, with its status's outcome and the call's duration;
* task success: the robot's last ``/task_status`` is ``done`` (without one: its last call reached); a
  simulator's: the last subgoal reached there;
* the objects' final position error (simulator vs the robot's last recorded pose).

Broken recordings give a clear error (no joint states or trajectories, the arm's joints missing from the joint
states, an unknown scene), never a traceback.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hrl.sim2real import BagError, period_start, read_messages, write_report

JOINT_STATE, TRAJECTORY = "sensor_msgs/msg/JointState", "trajectory_msgs/msg/JointTrajectory"
GRIPPER, STRING, POSE = "std_msgs/msg/Float64MultiArray", "std_msgs/msg/String", "geometry_msgs/msg/PoseStamped"
SUBGOAL, SUBGOAL_STATUS, TASK_STATUS = "/arm_subgoal", "/arm_subgoal_status", "/task_status"


def is_arm_recording(topics: dict[str, str]) -> bool:
    """Whether a bag's topics (topic -> type) are an arm's: a joint trajectory command, or joint states without a
    base's odometry (reading it says what is missing, if something is)."""
    types = set(topics.values())
    return TRAJECTORY in types or (JOINT_STATE in types and "/odom" not in topics)


@dataclass
class Trajectory:
    """One received JointTrajectory: receive time and start (s from the recording's start), point times from the
    start, positions in the arm's joint order."""

    received: float
    start: float
    times: np.ndarray
    positions: np.ndarray


@dataclass
class Call:
    """One skill call and how it ended on the robot (``status`` None: no status recorded)."""

    sent: float
    id: str
    skill: str
    goal: np.ndarray
    object: str | None
    tolerance: float
    label: str
    ended: float | None = None
    status: dict[str, Any] | None = None


@dataclass
class ArmRecording:
    """The arm topics of a bag as arrays; times in seconds from the first message (receive time)."""

    path: Path
    joints_t: np.ndarray  # (n,)
    joints: np.ndarray  # (n, 7) arm joint positions (rad)
    width_t: np.ndarray  # (k,) finger widths' times
    widths: np.ndarray  # (k,) the finger width (m): the two finger positions summed
    trajectories: list[Trajectory]
    gripper_t: np.ndarray = field(default_factory=lambda: np.zeros(0))
    gripper: np.ndarray = field(default_factory=lambda: np.zeros(0))  # commanded widths (m)
    calls: list[Call] = field(default_factory=list)
    task_status: list[tuple[float, str]] = field(default_factory=list)
    objects: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # name -> (t (m,), xyz (m, 3))
    warnings: list[str] = field(default_factory=list)

    @property
    def duration(self) -> float:
        return float(self.joints_t[-1] - self.joints_t[0])


def _one_topic(topics: dict[str, str], msgtype: str, given: str | None, what: str, flag: str) -> str | None:
    """The topic of ``msgtype`` in the bag: ``given``, or the only one there is (None: none)."""
    if given is not None:
        if topics.get(given) != msgtype:
            raise BagError(f"{flag} {given}: the bag has no {msgtype} topic of that name; its {what} topics: "
                           f"{', '.join(t for t, m in topics.items() if m == msgtype) or 'none'}")  # fmt: skip
        return given
    found = sorted(t for t, m in topics.items() if m == msgtype)
    if len(found) > 1:
        raise BagError(f"the bag has several {what} topics ({', '.join(found)}): choose one with {flag}")
    return found[0] if found else None


def read_arm_bag(
    path: str | Path,
    arm: Any,
    scene: Any,
    *,
    joint_prefix: str = "",
    trajectory_topic: str | None = None,
    gripper_topic: str | None = None,
    joint_states_topic: str = "/joint_states",
) -> ArmRecording:
    """Read an arm recording (module docstring) for ``arm`` (a ``robots.arm`` spec) in ``scene``."""
    from hrl.sim2real import bag_topics

    path = Path(path)
    topics = bag_topics(path)
    if topics.get(joint_states_topic) != JOINT_STATE:
        raise BagError(
            f"{path}: no {joint_states_topic} ({JOINT_STATE}); an arm recording needs the joint states (where the "
            f"arm was) and a {TRAJECTORY} topic (what it was told). Topics in the bag: "
            f"{', '.join(sorted(topics)) or 'none'}"
        )
    trajectory_topic = _one_topic(topics, TRAJECTORY, trajectory_topic, "joint trajectory", "--trajectory-topic")
    if trajectory_topic is None:
        raise BagError(f"{path}: no {TRAJECTORY} topic: nothing to replay (record the arm controller's command topic)")
    gripper_topic = _one_topic(topics, GRIPPER, gripper_topic, "gripper command", "--gripper-topic")
    object_topics = {f"/objects/{o.name}/pose": o.name for o in scene.objects}
    wanted = {joint_states_topic: JOINT_STATE, trajectory_topic: TRAJECTORY}
    wanted |= {gripper_topic: GRIPPER} if gripper_topic else {}
    wanted |= {SUBGOAL: STRING, SUBGOAL_STATUS: STRING, TASK_STATUS: STRING}
    wanted |= {t: POSE for t in object_topics}
    _, raw, notes = read_messages(path, wanted)
    items = [m for m in raw.values() if m]
    if not items:
        raise BagError(f"{path}: the arm topics hold no messages ({', '.join(wanted)})")
    t0 = min(m[0][0] for m in items)
    sec = lambda ns: (ns - t0) * 1e-9  # noqa: E731

    arm_names = [joint_prefix + n for n in arm.joint_names]
    finger_names = [joint_prefix + n for n in arm.gripper.joints]
    jt, jq, wt, ww, seen = [], [], [], [], set()
    for stamp, m in raw.get(joint_states_topic, []):
        where = {n: i for i, n in enumerate(m.name)}
        seen.update(m.name)
        if all(n in where for n in arm_names) and len(m.position) == len(m.name):
            q = [m.position[where[n]] for n in arm_names]
            if all(map(math.isfinite, q)):
                jt.append(sec(stamp))
                jq.append(q)
        if all(n in where for n in finger_names) and len(m.position) == len(m.name):
            w = sum(m.position[where[n]] for n in finger_names)
            if math.isfinite(w):
                wt.append(sec(stamp))
                ww.append(w)
    if len(jt) < 2:
        missing = [n for n in arm_names if n not in seen]
        raise BagError(
            f"{path}: {joint_states_topic} has {'no' if not jt else 'one'} usable message with all the arm's joints "
            f"{arm_names} (missing: {missing or 'none; positions were not finite or not one per name'}; names in the "
            f"bag: {sorted(seen) or 'none'}); a joint_prefix? give it with --joint-prefix"
        )
    if not wt:
        notes.append(f"no finger joints {finger_names} on {joint_states_topic}: the gripper is not compared")

    trajectories = []
    for stamp, m in raw.get(trajectory_topic, []):
        try:
            trajectories.append(_trajectory(m, arm_names, sec(stamp), t0))
        except ValueError as err:
            notes.append(f"{trajectory_topic}: a trajectory at {sec(stamp):.3f} s skipped (the arm refuses it): {err}")
    if not trajectories:
        raise BagError(f"{path}: no usable trajectory on {trajectory_topic}: nothing to replay")

    rec = ArmRecording(path, np.array(jt), np.array(jq), np.array(wt), np.array(ww), trajectories, warnings=notes)
    if gripper_topic:
        grips = [(sec(s), sum(m.data)) for s, m in raw.get(gripper_topic, []) if len(m.data) == 2]
        if len(grips) < len(raw.get(gripper_topic, [])):
            skipped = len(raw[gripper_topic]) - len(grips)
            notes.append(
                f"{gripper_topic}: {skipped} command(s) without two finger positions skipped (the arm refuses them)"
            )
        rec.gripper_t = np.array([t for t, _ in grips], dtype=float)
        rec.gripper = np.array([w for _, w in grips], dtype=float)  # the width: the two finger positions summed
    else:
        notes.append("no gripper command topic: the fingers hold their first recorded width")
    rec.calls = _calls(raw, sec, notes)
    unknown = sorted({c.object for c in rec.calls if c.object is not None and c.object not in object_topics.values()})
    if unknown:
        raise BagError(
            f"{path}: skill calls move {unknown}, which scene {scene.name!r} does not have (its objects: "
            f"{', '.join(object_topics.values())}): the run's scene? give it with --scene"
        )
    rec.task_status = [(sec(s), m.data) for s, m in raw.get(TASK_STATUS, [])]
    for topic, name in object_topics.items():
        poses = [(sec(s), (m.pose.position.x, m.pose.position.y, m.pose.position.z)) for s, m in raw.get(topic, [])]
        if poses:
            rec.objects[name] = (np.array([t for t, _ in poses]), np.array([p for _, p in poses], dtype=float))
    if not rec.objects and scene.objects:
        notes.append("no object poses in the bag: the objects' final errors are not compared")
    return rec


def _trajectory(m: Any, arm_names: list[str], received: float, t0_ns: int) -> Trajectory:
    from hrl.ros.sim_arm_node import CommandError, parse_trajectory

    seconds = lambda d: d.sec + d.nanosec * 1e-9  # noqa: E731
    points = [(list(p.positions), list(p.velocities), seconds(p.time_from_start)) for p in m.points]
    try:
        times, positions = parse_trajectory(list(m.joint_names), points, arm_names)
    except CommandError as err:
        raise ValueError(str(err)) from None
    stamp_ns = m.header.stamp.sec * 10**9 + m.header.stamp.nanosec
    start = received if stamp_ns == 0 else (stamp_ns - t0_ns) * 1e-9  # stamp 0: start on receipt
    return Trajectory(received, start, times, positions)


def _calls(raw: dict[str, list[tuple[int, Any]]], sec: Any, notes: list[str]) -> list[Call]:
    from hrl.ros.arm_messages import MessageError, SkillCall

    calls: dict[str, Call] = {}
    for stamp, m in raw.get(SUBGOAL, []):
        try:
            c = SkillCall.from_json(m.data)
        except MessageError as err:
            notes.append(f"{SUBGOAL}: a call at {sec(stamp):.3f} s skipped: {err}")
            continue
        calls[c.id] = Call(sec(stamp), c.id, c.skill, np.asarray(c.goal, dtype=float), c.object, c.tolerance, c.label)
    for stamp, m in raw.get(SUBGOAL_STATUS, []):
        try:
            status = json.loads(m.data)
        except json.JSONDecodeError:
            notes.append(f"{SUBGOAL_STATUS}: a status at {sec(stamp):.3f} s is not JSON; skipped")
            continue
        call = calls.get(str(status.get("id"))) if isinstance(status, dict) else None
        if call is not None and call.status is None:
            call.ended, call.status = sec(stamp), status
    if not calls:
        notes.append(f"no {SUBGOAL} calls in the bag: subgoals and task success are not compared")
    return sorted(calls.values(), key=lambda c: c.sent)


# ---------------------------------------------------------------------------------------------- replay


@dataclass
class ArmReplay:
    backend: str
    t: np.ndarray  # period ends (s, the recording's clock)
    sim_q: np.ndarray  # (k, 7)
    real_q: np.ndarray  # (k, 7): the robot's joint states interpolated at the same times
    sim_tcp: np.ndarray  # (k, 3)
    real_tcp: np.ndarray  # (k, 3)
    sim_objects: dict[str, np.ndarray]  # name -> (k, 3)
    sim_width: np.ndarray  # (k,)


def make_env(scene: Any, backend: str, control_hz: float, layout_seed: int) -> tuple[Any, dict[str, Any]]:
    """The nominal simulator as ``sim_arm_node`` builds it: the scene's own dynamics, the seeded layout."""
    from sim.tabletop.env import PandaTabletopEnv

    env = PandaTabletopEnv(scene, backend=backend, goal_mode="reach", block_gripper=False, control_hz=control_hz,
                           max_steps=2**31 - 1)  # fmt: skip
    layout = scene.sample_layout(np.random.default_rng(layout_seed))
    env.reset(seed=layout_seed, options={"layout": layout})
    env.unwrapped.physics.set_goal_marker(None)
    return env, layout


def replay(
    rec: ArmRecording, scene: Any, backend: str, *, control_hz: float = 100.0, layout_seed: int = 0
) -> ArmReplay:
    """The recorded commands replayed in ``backend`` from the robot's first joint state (module docstring)."""
    from hrl.ros.sim_arm_node import TrackedTrajectory

    env, layout = make_env(scene, backend, control_hz, layout_seed)
    u = env.unwrapped
    physics, chain, base = u.physics, u.chain, np.asarray(scene.robot_base, dtype=float)
    max_width = u.arm.gripper.max_width
    width = float(rec.widths[0]) if len(rec.widths) else max_width
    physics.reset(rec.joints[0].copy(), width, layout)
    q_target, width_target = rec.joints[0].copy(), width
    dt = 1.0 / control_hz
    start = period_start(rec.joints_t, dt)
    times = np.arange(start + dt, float(rec.joints_t[-1]) + 1e-9, dt)
    # the commands in the order they took effect: (time, kind, payload)
    events = sorted(
        [(tr.received, 0, "trajectory", tr) for tr in rec.trajectories]
        + [(float(t), 1, "gripper", min(max(float(w), 0.0), max_width)) for t, w in zip(rec.gripper_t, rec.gripper,
                                                                                         strict=True)],
        key=lambda e: (e[0], e[1]),
    )  # fmt: skip
    tracked, k = None, 0
    sim_q, sim_width, objects = [], [], {o.name: [] for o in scene.objects}
    for t in times:
        while k < len(events) and events[k][0] <= t:
            _, _, kind, payload = events[k]
            if kind == "gripper":
                width_target = payload
            else:
                tracked = TrackedTrajectory(payload.start, payload.times, payload.positions, q_target.copy())
            k += 1
        if tracked is not None:
            q_target = tracked.at(float(t))
        physics.step(q_target, width_target)
        sim_q.append(physics.joints()[0].copy())
        sim_width.append(physics.finger_width())
        for name, track in objects.items():
            track.append(physics.object_state(name).position.copy())
    env.close()
    real_q = np.stack([np.interp(times, rec.joints_t, rec.joints[:, j]) for j in range(rec.joints.shape[1])], axis=1)
    sim_q_arr = np.asarray(sim_q)
    fk = lambda qs: np.array([chain.forward(q, base)[0] for q in qs])  # noqa: E731
    return ArmReplay(backend, times, sim_q_arr, real_q, fk(sim_q_arr), fk(real_q),
                     {n: np.asarray(v) for n, v in objects.items()}, np.asarray(sim_width))  # fmt: skip


# ---------------------------------------------------------------------------------------------- metrics


def achieved(call: Call, t: np.ndarray, tcp: np.ndarray, objects: dict[str, np.ndarray]) -> np.ndarray:
    """Distance (m) from what ``call`` moves (its object, or the TCP) to its goal at each of ``t``."""
    where = objects[call.object] if call.object else tcp
    return np.linalg.norm(where - call.goal, axis=1)


def judge(call: Call, t: np.ndarray, distance: np.ndarray, end: float, slack: float) -> dict[str, Any]:
    """``time_to_goal_s``: seconds from the call until ``distance`` first came within its tolerance + ``slack``
    before ``end`` (None: never); ``final_distance_m``: the distance at ``end``; ``reached``."""
    hit = np.nonzero((t >= call.sent) & (t <= end) & (distance <= call.tolerance + slack))[0]
    return {
        "reached": bool(hit.size),
        "time_to_goal_s": round(float(t[hit[0]] - call.sent), 3) if hit.size else None,
        "final_distance_m": round(float(np.interp(end, t, distance)), 4),
    }


def compare(
    rec: ArmRecording,
    scene: Any,
    backends: list[str],
    *,
    control_hz: float = 100.0,
    layout_seed: int = 0,
    slack: float = 0.005,
) -> dict[str, Any]:
    """Replay in every backend and measure; the summary (JSON-able) keeps the replays under ``_replays`` for plots."""
    joint_names = [f"panda_joint{i + 1}" for i in range(rec.joints.shape[1])]
    summary: dict[str, Any] = {
        "kind": "arm",
        "bag": str(rec.path),
        "scene": scene.name,
        "layout_seed": layout_seed,
        "control_hz": control_hz,
        "duration_s": round(rec.duration, 2),
        "joint_state_messages": len(rec.joints_t),
        "trajectories_replayed": len(rec.trajectories),
        "gripper_commands": len(rec.gripper),
        "subgoals": len(rec.calls),
        "subgoal_slack_m": slack,
        "warnings": list(rec.warnings),
        "backends": {},
    }
    replays = [replay(rec, scene, b, control_hz=control_hz, layout_seed=layout_seed) for b in backends]
    t_end = float(rec.joints_t[-1])
    ends = [c.ended if c.ended is not None else t_end for c in rec.calls]
    if replays:
        rep = replays[0]
        real_objects = {n: _interp_rows(rep.t, *rec.objects[n]) for n in rec.objects}
        check_layout(rec, rep, summary["warnings"])
        robot_calls = []
        for call, end in zip(rec.calls, ends, strict=True):
            entry = {"id": call.id, "skill": call.skill, "label": call.label,
                     "outcome": None if call.status is None else call.status.get("outcome"),
                     "call_s": None if call.ended is None else round(call.ended - call.sent, 3)}  # fmt: skip
            if call.object is None or call.object in real_objects:
                distance = achieved(call, rep.t, rep.real_tcp, real_objects)
                entry |= judge(call, rep.t, distance, end, slack)
            robot_calls.append(entry)
        final = [s for _, s in rec.task_status if s == "done" or s.startswith(("failed", "cancelled"))]
        success = (final[-1] == "done") if final else (bool(robot_calls) and robot_calls[-1]["outcome"] == "reached")
        summary["robot"] = {"subgoals": robot_calls, "task_success": success if rec.calls or final else None,
                            "task_status": final[-1] if final else None}  # fmt: skip
    for rep in replays:
        err = rep.sim_q - rep.real_q
        tcp_err = np.linalg.norm(rep.sim_tcp - rep.real_tcp, axis=1)
        sims = []
        for call, end in zip(rec.calls, ends, strict=True):
            distance = achieved(call, rep.t, rep.sim_tcp, rep.sim_objects)
            sims.append({"id": call.id, **judge(call, rep.t, distance, end, slack)})
        final_objects = {
            n: round(float(np.linalg.norm(rep.sim_objects[n][-1] - pos[-1])), 4) for n, (_, pos) in rec.objects.items()
        }
        summary["backends"][rep.backend] = {
            "joint_rms_rad": round(float(np.sqrt(np.mean(err**2))), 5),
            "joint_max_rad": round(float(np.abs(err).max()), 5),
            "joint_rms_per_joint_rad": {
                n: round(float(v), 5) for n, v in zip(joint_names, np.sqrt(np.mean(err**2, axis=0)), strict=True)
            },
            "tcp_rms_m": round(float(np.sqrt(np.mean(tcp_err**2))), 5),
            "tcp_max_m": round(float(tcp_err.max()), 5),
            "tcp_final_m": round(float(tcp_err[-1]), 5),
            "object_final_error_m": final_objects,
            "subgoals": sims,
            "task_success": bool(sims) and sims[-1]["reached"] if rec.calls else None,
        }
    summary["_replays"] = replays
    return summary


def _interp_rows(t: np.ndarray, ts: np.ndarray, rows: np.ndarray) -> np.ndarray:
    return np.stack([np.interp(t, ts, rows[:, j]) for j in range(rows.shape[1])], axis=1)


def check_layout(rec: ArmRecording, rep: ArmReplay, notes: list[str], tolerance: float = 0.01) -> None:
    """Warn when the simulator's objects do not start where the robot's were (another layout seed or scene)."""
    off = {
        n: float(np.linalg.norm(rep.sim_objects[n][0][:2] - pos[0][:2]))
        for n, (_, pos) in rec.objects.items()
        if n in rep.sim_objects
    }
    far = {n: round(d, 3) for n, d in off.items() if d > tolerance}
    if far:
        notes.append(
            f"the objects start {far} m away from the robot's recorded poses (more than {tolerance} m): another layout "
            "seed or scene? (--layout-seed, --scene)"
        )


# ---------------------------------------------------------------------------------------------- output


def plot(summary: dict[str, Any], replays: list[ArmReplay], out_dir: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not replays:
        return
    n = replays[0].real_q.shape[1]
    fig, axes = plt.subplots(n, 1, figsize=(8, 1.4 * n), sharex=True)
    for j, ax in enumerate(axes):
        ax.plot(replays[0].t, replays[0].real_q[:, j], color="black", lw=2, label="robot")
        for rep in replays:
            ax.plot(rep.t, rep.sim_q[:, j], ls="--", lw=1.2, label=rep.backend)
        ax.set_ylabel(f"joint {j + 1}\n(rad)", fontsize=8)
    axes[0].legend(loc="best", fontsize=7, ncol=3)
    axes[-1].set_xlabel("time (s)")
    fig.tight_layout()
    fig.savefig(out_dir / "joints.png", dpi=100)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(8, 3.2))
    for rep in replays:
        ax.plot(rep.t, 1000 * np.linalg.norm(rep.sim_tcp - rep.real_tcp, axis=1), label=rep.backend)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("TCP error (mm)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_dir / "tcp_error.png", dpi=110)
    plt.close(fig)


def write_outputs(summary: dict[str, Any], out_dir: Path, command: str) -> Path:
    """``summary.json``, ``report.md``, ``joints.png`` and ``tcp_error.png`` in ``out_dir``; returns the report."""
    out_dir.mkdir(parents=True, exist_ok=True)
    replays = summary.pop("_replays")
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    plot(summary, replays, out_dir)
    yes = lambda v: "–" if v is None else ("yes" if v else "no")  # noqa: E731
    fmt = lambda v: "–" if v is None else f"{v:.2f}"  # noqa: E731

    def cell(j: dict[str, Any]) -> str:
        return f"{fmt(j['time_to_goal_s'])} / {1000 * j['final_distance_m']:.0f}" if "final_distance_m" in j else "–"

    robot = summary.get("robot", {})
    lines = [
        f"# Sim-to-real (arm): `{Path(summary['bag']).name}`",
        "",
        "```bash",
        command,
        "```",
        "",
        f"Scene `{summary['scene']}` (layout seed {summary['layout_seed']}), {summary['duration_s']} s recorded, "
        f"{summary['trajectories_replayed']} trajectories and {summary['gripper_commands']} gripper commands "
        f"replayed at {summary['control_hz']:g} Hz. Task success on the robot: {yes(robot.get('task_success'))}"
        + (f" (`{robot['task_status']}`)" if robot.get("task_status") else "")
        + ".",
        "",
        "| simulator | joint RMS / max (rad) | TCP RMS / max / final (mm) | objects' final error (mm) | task success |",
        "|---|---|---|---|---|",
    ]
    for name, b in summary["backends"].items():
        objects = ", ".join(f"{k} {1000 * v:.0f}" for k, v in b["object_final_error_m"].items()) or "–"
        lines.append(
            f"| {name} | {b['joint_rms_rad']:.4f} / {b['joint_max_rad']:.4f} | {1000 * b['tcp_rms_m']:.1f} / "
            f"{1000 * b['tcp_max_m']:.1f} / {1000 * b['tcp_final_m']:.1f} | {objects} | {yes(b['task_success'])} |"
        )
    names = list(summary["backends"])
    if names:
        lines += ["", "Joint RMS per joint (rad):", "", "| simulator | " + " | ".join(
            summary["backends"][names[0]]["joint_rms_per_joint_rad"]) + " |", "|---|" + "---|" * 7]  # fmt: skip
        for name in names:
            per = summary["backends"][name]["joint_rms_per_joint_rad"].values()
            lines.append(f"| {name} | " + " | ".join(f"{v:.4f}" for v in per) + " |")
    if robot.get("subgoals"):
        lines += [
            "",
            f"Subgoals: time until within the call's tolerance + {1000 * summary['subgoal_slack_m']:.0f} mm of its "
            "goal (s, from the call; – = never) / the distance to it when the call ended (mm), and the robot's "
            "status and call duration:",
            "",
            "| # | skill | label | robot: status, call (s) | robot | " + " | ".join(names) + " |",
            "|---|---|---|---|---|" + "---|" * len(names),
        ]
        for k, r in enumerate(robot["subgoals"]):
            sims = " | ".join(cell(summary["backends"][n]["subgoals"][k]) for n in names)
            lines.append(
                f"| {k + 1} | {r['skill']} | {r['label'] or '–'} | {r['outcome'] or '–'}, {fmt(r['call_s'])} | "
                f"{cell(r)} | {sims} |"
            )
    return write_report(out_dir, lines, {"joints": "joints.png", "TCP error": "tcp_error.png"}, summary["warnings"])
