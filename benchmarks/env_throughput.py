"""Env steps per second against raw MuJoCo physics on the same compiled model and substeps.

For each map: the rate of ``env.step`` (random actions, through ``gym.make``'s wrappers) against two
references on the same compiled ``MjModel`` doing the same ``mj_step`` substeps per control step, on the
same trajectory (same start, same commands):

* ``raw_physics``: ``mj_step`` with sensors disabled (pure physics, the strict reference);
* ``raw_mj_step``: ``mj_step`` as compiled, which also evaluates every rangefinder at each substep.

PyBullet (``--backends pybullet``): ``env.step`` against ``stepSimulation`` on a copy of the same world,
``substeps`` calls per control step, replaying the joint forces the env applied (recorded in a first
pass), so both follow the same trajectory, wall contacts included:

* ``raw_step_simulation``: ``setJointMotorControlArray`` + ``stepSimulation`` per substep, nothing else
  (the least any Python driver of a force-controlled robot does).

Each case runs the same stretch of trajectory in every round, the cases alternating; the ratio quoted is the
median over rounds of env.step's rate over the reference's in the same round (paired: a round with wall
contacts slows both alike). Then SB3 vector envs (DummyVecEnv in process, SubprocVecEnv with one worker per
core): total env steps/s. Target: env.step >= 50 % of the raw reference with the lidar included, on every
backend.

The tabletop (``--suites tabletop``, ``hrl/PandaTabletop-v0`` in ``push`` mode, random actions, one long
episode): per backend, ``env.step`` against the same engine stepping a copy of the same scene through the
backend's ``physics.step`` (the joint targets into the servos, then the same 20 substeps: no IK, no
observation, no cameras), replaying the joint targets the env commanded (recorded in a first pass), so both
follow the same trajectory. Target: >= 50 %. Then, side by side in one run, our push env on each backend
against panda-gym's ``PandaPush-v3`` (same 20 substeps of 2 ms, same actions; ``pip install -e '.[panda]'``),
alternating: target, our PyBullet env >= 1.5x theirs. With it, the share of each env.step spent in the
engine's substeps, and so the ratio our env would reach with no Python around its physics at all.

    python benchmarks/env_throughput.py [--quick] [--no-record] [--suites rover tabletop]
        [--backends mujoco pybullet] [--maps open apartment]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gymnasium as gym
import mujoco
import numpy as np

import sim  # noqa: F401
from benchmarks._common import emit, interleaved_rates, paired_ratio, record

SENSOR_BIT = int(mujoco.mjtDisableBit.mjDSBL_SENSOR)


def single_env(map_name: str, n: int, rounds: int) -> dict[str, float]:
    """Env vs raw physics on identical workloads: three copies of the env start from the same seed and
    receive the same action sequence, so all three follow the same trajectory (sensors do not affect
    dynamics), wall contacts included. No resets during timing (one long episode)."""
    total = n * rounds + 1
    envs = [gym.make("hrl/RoverNav-v0", map=map_name, max_steps=total + 1) for _ in range(3)]
    for env in envs:
        env.reset(seed=0)
    u = envs[0].unwrapped
    substeps = u.substeps
    actions = np.random.default_rng(0).uniform(-1, 1, size=(total, 2))
    scale = np.array([u.robot.limits.max_linear_velocity, u.robot.limits.max_angular_velocity])
    ctrls = actions * scale
    lin, ang = (u.physics.model.actuator(name).id for name in ("drive_linear", "drive_angular"))

    def stepper(case: str):
        i = 0
        if case == "env_step":
            env = envs[0]

            def step() -> None:
                nonlocal i
                env.step(actions[i])
                i += 1
        else:
            physics = envs[1 if case == "raw_physics" else 2].unwrapped.physics
            model, data = physics.model, physics.data
            bit = SENSOR_BIT if case == "raw_physics" else 0

            def step() -> None:
                nonlocal i
                data.ctrl[lin], data.ctrl[ang] = ctrls[i]
                model.opt.disableflags |= bit
                for _ in range(substeps):
                    mujoco.mj_step(model, data)
                model.opt.disableflags &= ~bit
                i += 1

        return step

    samples = interleaved_rates({c: stepper(c) for c in ("env_step", "raw_physics", "raw_mj_step")}, n, rounds)
    poses = [e.unwrapped.physics.pose() for e in envs]
    return (
        _medians(samples)
        | _finish(envs, poses, atol=1e-6)
        | {
            "ratio_vs_raw_physics": paired_ratio(samples, "env_step", "raw_physics"),
            "ratio_vs_raw_mj_step": paired_ratio(samples, "env_step", "raw_mj_step"),
        }
    )


def pybullet_env(map_name: str, n: int, rounds: int) -> dict[str, float]:
    """PyBullet env.step vs stepSimulation replaying the same joint forces (same trajectory)."""
    import pybullet as pb

    total = n * rounds + 1
    actions = np.random.default_rng(0).uniform(-1, 1, size=(total, 2))
    make = lambda: gym.make("hrl/RoverNav-v0", map=map_name, backend="pybullet", max_steps=total + 1)  # noqa: E731

    # Pass 1 (untimed): record the forces the drive applies at every substep.
    recorder = make()
    recorder.reset(seed=0)
    forces: list[list[float]] = []
    original = pb.setJointMotorControlArray

    def record(*args, **kwargs):
        if kwargs.get("controlMode", args[2] if len(args) > 2 else None) == pb.TORQUE_CONTROL:
            forces.append(list(kwargs["forces"]))
        return original(*args, **kwargs)

    pb.setJointMotorControlArray = record
    try:
        for a in actions:
            recorder.step(a)
    finally:
        pb.setJointMotorControlArray = original
    recorder.close()

    envs = [make() for _ in range(2)]
    for env in envs:
        env.reset(seed=0)
    u = envs[0].unwrapped
    substeps = u.substeps
    physics = envs[1].unwrapped.physics
    client, body, joints = physics.client, physics.body, physics._joints

    def env_stepper():
        i = 0

        def step() -> None:
            nonlocal i
            envs[0].step(actions[i])
            i += 1

        return step

    def raw_stepper():
        k = 0

        def step() -> None:
            nonlocal k
            for _ in range(substeps):
                pb.setJointMotorControlArray(body, joints, pb.TORQUE_CONTROL, forces=forces[k], physicsClientId=client)
                pb.stepSimulation(physicsClientId=client)
                k += 1

        return step

    samples = interleaved_rates({"env_step": env_stepper(), "raw_step_simulation": raw_stepper()}, n, rounds)
    physics._read_state()
    poses = [envs[0].unwrapped.physics.pose(), physics.pose()]
    return (
        _medians(samples)
        | _finish(envs, poses, atol=1e-9)
        | {
            "ratio_vs_raw_step_simulation": paired_ratio(samples, "env_step", "raw_step_simulation"),
        }
    )


def _medians(samples: dict[str, list[float]]) -> dict[str, float]:
    return {k: statistics.median(v) for k, v in samples.items()}


def _finish(envs: list, poses: list, atol: float) -> dict[str, int]:
    """Check every copy followed the same trajectory (same workload), close them, describe the workload."""
    if not all(np.allclose([p.x, p.y], [poses[0].x, poses[0].y], atol=atol) for p in poses[1:]):
        raise RuntimeError(f"benchmark workloads diverged: {poses}")
    u = envs[0].unwrapped
    for env in envs:
        env.close()
    return {"substeps": u.substeps, "lidar_rays": u.robot.lidar.num_rays, "walls": len(u.world.walls)}


TABLETOP_ID = "hrl/PandaTabletop-v0"


def _push_env(backend: str, total: int) -> gym.Env:
    """The tabletop push env, cameras off, one episode of ``total`` steps (no reset while timing)."""
    return gym.make(TABLETOP_ID, backend=backend, goal_mode="push", max_steps=total + 1)


def _stepper(env: gym.Env, actions: np.ndarray) -> Callable[[], None]:
    """A function that steps ``env`` with the next of ``actions`` at each call."""
    i = 0

    def step() -> None:
        nonlocal i
        env.step(actions[i])
        i += 1

    return step


def tabletop_env(backend: str, n: int, rounds: int) -> dict[str, float]:
    """Tabletop env.step vs the same engine replaying the joint targets the env commanded (same trajectory)."""
    total = n * rounds + 1
    actions = np.random.default_rng(0).uniform(-1, 1, size=(total, 3))

    # Pass 1 (untimed): the joint and finger targets the env hands its physics at every control step.
    recorder = _push_env(backend, total)
    recorder.reset(seed=0)
    physics = recorder.unwrapped.physics
    targets: list[tuple[np.ndarray, float]] = []
    step = physics.step

    def record(q_target: np.ndarray, width_target: float) -> None:
        targets.append((np.array(q_target), width_target))
        step(q_target, width_target)

    physics.step = record  # the instance attribute shadows the method for this env only
    for a in actions:
        recorder.step(a)
    recorder.close()

    envs = [_push_env(backend, total) for _ in range(2)]
    for env in envs:
        env.reset(seed=0)
    raw = envs[1].unwrapped.physics
    k = 0

    def raw_step() -> None:
        nonlocal k
        raw.step(*targets[k])  # servo targets in, `substeps` engine steps: no IK, no observation
        k += 1

    samples = interleaved_rates({"env_step": _stepper(envs[0], actions), "raw_physics": raw_step}, n, rounds)
    states = [np.concatenate([e.unwrapped.physics.joints()[0], e.unwrapped.physics.object_state("cube").position])
              for e in envs]  # fmt: skip
    if not np.allclose(states[0], states[1], atol=1e-9):
        raise RuntimeError(f"benchmark workloads diverged: {states}")
    substeps = envs[0].unwrapped.physics.substeps
    for env in envs:
        env.close()
    return _medians(samples) | {
        "ratio_vs_raw_physics": paired_ratio(samples, "env_step", "raw_physics"),
        "substeps": substeps,
    }


def _time_calls(owner: object, method: str, spent: list[float]) -> None:
    """Add the wall time of every call of ``owner.method`` to ``spent[0]`` (an instance attribute shadows the
    method, for this object only)."""
    call = getattr(owner, method)

    def timed(*args: object) -> None:
        t0 = time.perf_counter()
        call(*args)
        spent[0] += time.perf_counter() - t0

    setattr(owner, method, timed)


def versus_panda_gym(backends: list[str], n: int, rounds: int) -> dict[str, object]:
    """Our push env on each backend against panda-gym's PandaPush-v3: env.step/s, alternating, same actions.

    Also the share of each env.step spent in the engine's 20 substeps (our ``physics.step``, their
    ``sim.step``): with that share our env cannot beat theirs by more than their rate over our physics-only
    rate, however little Python surrounds the physics."""
    try:
        import panda_gym  # noqa: F401  (registers PandaPush-v3)
    except ImportError:
        return {"skipped": "panda-gym is not installed: pip install -e '.[panda]'"}
    total = n * rounds
    actions = np.random.default_rng(0).uniform(-1, 1, size=(total, 3))
    theirs = gym.make("PandaPush-v3", max_episode_steps=total + 1)
    ours = {f"ours_{b}": _push_env(b, total) for b in backends}
    for env in [*ours.values(), theirs]:
        env.reset(seed=0)
    substeps = theirs.unwrapped.sim.n_substeps, theirs.unwrapped.sim.timestep
    spent = {name: [0.0] for name in [*ours, "panda_gym"]}
    for name, env in ours.items():
        _time_calls(env.unwrapped.physics, "step", spent[name])
    _time_calls(theirs.unwrapped.sim, "step", spent["panda_gym"])
    samples = interleaved_rates(
        {name: _stepper(env, actions) for name, env in ours.items()} | {"panda_gym": _stepper(theirs, actions)},
        n,
        rounds,
    )
    for env in [*ours.values(), theirs]:
        env.close()
    share = {name: spent[name][0] / sum(n / r for r in samples[name]) for name in spent}
    ratios = {name: paired_ratio(samples, name, "panda_gym") for name in ours}
    return (
        _medians(samples)
        | {f"{name}_vs_panda_gym": ratio for name, ratio in ratios.items()}
        | {f"{name}_physics_share": value for name, value in share.items()}
        # Our env with no Python around its physics at all: its rate would be ours / share.
        | {f"{name}_physics_only_vs_panda_gym": ratio / share[name] for name, ratio in ratios.items()}
        | {"panda_gym_substeps": substeps[0], "panda_gym_timestep": substeps[1]}
    )


def vector_env(kind: str, n_envs: int, steps: int) -> float:
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    vec_cls = DummyVecEnv if kind == "dummy" else SubprocVecEnv
    venv = make_vec_env("hrl/RoverNav-v0", n_envs=n_envs, seed=0, vec_env_cls=vec_cls)
    venv.reset()
    actions = np.random.default_rng(0).uniform(-1, 1, size=(steps, n_envs, 2))
    for a in actions[:20]:  # warm-up (worker start, first reset)
        venv.step(a)
    t0 = time.perf_counter()
    for a in actions:
        venv.step(a)
    elapsed = time.perf_counter() - t0
    venv.close()
    return steps * n_envs / elapsed


def rover(args: argparse.Namespace, figures: dict[str, object]) -> None:
    """The rover's envs per map and backend, and SB3 vector envs; one row in RESULTS.md's env_throughput."""
    n, rounds, vec_steps = (300, 3, 300) if args.quick else (2000, 7, 2000)
    workers = max(2, os.cpu_count() or 2)
    ratios: list[float] = []
    cells: dict[str, list[str]] = {"mujoco": [], "pybullet": []}
    for map_name in args.maps:
        if "mujoco" in args.backends:
            res = single_env(map_name, n, rounds)
            figures[map_name] = {k: round(v, 3) if isinstance(v, float) else v for k, v in res.items()}
            ratios.append(res["ratio_vs_raw_physics"])
            print(
                f"{map_name:>10} mujoco: env.step {res['env_step']:8.0f}/s  raw physics {res['raw_physics']:8.0f}/s  "
                f"raw mj_step {res['raw_mj_step']:8.0f}/s  -> {res['ratio_vs_raw_physics']:.0%} of raw physics, "
                f"{res['ratio_vs_raw_mj_step']:.0%} of raw mj_step ({res['substeps']} substeps, "
                f"{res['lidar_rays']} rays)"
            )
            cells["mujoco"].append(
                f"{map_name}: {res['env_step']:.0f}/s = {res['ratio_vs_raw_physics']:.0%} of raw physics "
                f"({res['raw_physics']:.0f}/s), {res['ratio_vs_raw_mj_step']:.0%} of raw mj_step"
            )
        if "pybullet" in args.backends:
            # PyBullet steps ~5x slower than MuJoCo here: a quarter of the steps. Rounds of several hundred
            # steps mix free driving and wall contacts (which slow stepSimulation) alike in every round.
            res = pybullet_env(map_name, max(75, n // 4), rounds)
            figures.setdefault("pybullet", {})[map_name] = {  # type: ignore[index]
                k: round(v, 3) if isinstance(v, float) else v for k, v in res.items()
            }
            ratios.append(res["ratio_vs_raw_step_simulation"])
            print(
                f"{map_name:>10} pybullet: env.step {res['env_step']:8.0f}/s  raw stepSimulation "
                f"{res['raw_step_simulation']:8.0f}/s  -> {res['ratio_vs_raw_step_simulation']:.0%} "
                f"({res['substeps']} substeps, {res['lidar_rays']} rays)"
            )
            cells["pybullet"].append(
                f"{map_name}: {res['env_step']:.0f}/s = {res['ratio_vs_raw_step_simulation']:.0%} of raw "
                f"stepSimulation ({res['raw_step_simulation']:.0f}/s)"
            )
    figures["dummy_vec_env_steps_per_s"] = round(vector_env("dummy", workers, vec_steps), 1)
    figures["subproc_vec_env_steps_per_s"] = round(vector_env("subproc", workers, vec_steps), 1)
    figures["vec_envs"] = workers
    print(
        f"SB3 vector envs ({workers} MuJoCo envs): DummyVecEnv {figures['dummy_vec_env_steps_per_s']:.0f} env "
        f"steps/s, SubprocVecEnv {figures['subproc_vec_env_steps_per_s']:.0f} env steps/s"
    )
    figures["worst_ratio"] = round(min(ratios), 3)
    figures["target_met"] = min(ratios) >= 0.5
    if not args.no_record:
        record(
            "env_throughput",
            figures,
            [
                "<br>".join(cells["mujoco"]) or "—",
                "<br>".join(cells["pybullet"]) or "—",
                f"{figures['dummy_vec_env_steps_per_s']:.0f} / {figures['subproc_vec_env_steps_per_s']:.0f}",
                "yes" if figures["target_met"] else "**no**",
            ],
            [
                "MuJoCo env.step vs raw (per map)",
                "PyBullet env.step vs raw stepSimulation (per map)",
                f"vec env steps/s Dummy / Subproc ({workers} envs)",
                "target >= 50 %",
            ],
        )


def tabletop(args: argparse.Namespace) -> dict[str, object]:
    """The tabletop push env per backend against raw physics, then against panda-gym's PandaPush-v3; one row
    in RESULTS.md's env_throughput_tabletop."""
    # PyBullet steps ~2.5x slower than MuJoCo here: fewer steps per round (each round still spans several
    # hundred control steps of random pushing, contacts with the cube and the table included).
    n, rounds = (40, 3) if args.quick else (500, 7)
    figures: dict[str, object] = {}
    cells: list[str] = []
    for backend in ("mujoco", "pybullet"):
        if backend not in args.backends:
            cells.append("—")
            continue
        res = tabletop_env(backend, n if backend == "mujoco" else n // 2, rounds)
        figures[backend] = {k: round(v, 3) if isinstance(v, float) else v for k, v in res.items()}
        print(
            f"tabletop {backend}: env.step {res['env_step']:6.0f}/s  raw physics {res['raw_physics']:6.0f}/s  -> "
            f"{res['ratio_vs_raw_physics']:.0%} ({res['substeps']} substeps)"
        )
        cells.append(f"{res['env_step']:.0f}/s = {res['ratio_vs_raw_physics']:.0%} of raw ({res['raw_physics']:.0f}/s)")
    ratios = [figures[b]["ratio_vs_raw_physics"] for b in args.backends]  # type: ignore[index]
    figures["raw_target_met"] = min(ratios) >= 0.5
    versus = versus_panda_gym(args.backends, n // 2, rounds)
    figures["versus_panda_gym"] = {k: round(v, 3) if isinstance(v, float) else v for k, v in versus.items()}
    if "skipped" in versus:
        print(f"tabletop vs panda-gym: skipped ({versus['skipped']})")
        cells.append(f"skipped: {versus['skipped']}")
    else:
        ours = [b for b in ("mujoco", "pybullet") if b in args.backends]
        rates = " / ".join(f"{versus[f'ours_{b}']:.0f}" for b in ours)
        ratio_text = ", ".join(f"{b} {versus[f'ours_{b}_vs_panda_gym']:.2f}x" for b in ours)
        shares = ", ".join(f"{b} {versus[f'ours_{b}_physics_share']:.0%}" for b in ours)
        ceiling = ", ".join(f"{b} {versus[f'ours_{b}_physics_only_vs_panda_gym']:.2f}x" for b in ours)
        print(f"tabletop vs panda-gym PandaPush-v3: ours ({', '.join(ours)}) {rates} env steps/s, "
              f"theirs {versus['panda_gym']:.0f}/s -> {ratio_text}")  # fmt: skip
        print(f"  physics share of env.step: ours {shares}, panda-gym {versus['panda_gym_physics_share']:.0%}; "
              f"ours with no Python around the physics: {ceiling}")  # fmt: skip
        cells.append(
            f"{rates} / {versus['panda_gym']:.0f} ({ratio_text}); physics share of env.step: ours {shares}, "
            f"panda-gym {versus['panda_gym_physics_share']:.0%}; physics alone: {ceiling}"
        )
        if "pybullet" in args.backends:
            figures["panda_gym_target_met"] = versus["ours_pybullet_vs_panda_gym"] >= 1.5
    if not args.no_record:

        def met(key: str) -> str:
            return "—" if key not in figures else ("yes" if figures[key] else "**no**")

        record(
            "env_throughput_tabletop",
            figures,
            [*cells, f"raw: {met('raw_target_met')}; panda-gym: {met('panda_gym_target_met')}", "—"],
            [
                "MuJoCo env.step vs raw physics",
                "PyBullet env.step vs raw physics",
                "push env.step/s: ours MuJoCo / ours PyBullet / panda-gym PandaPush-v3",
                "targets: >= 50 % of raw; PyBullet >= 1.5x panda-gym",
                "notes",
            ],
        )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short run (< 1 minute per suite)")
    parser.add_argument("--no-record", action="store_true", help="do not append to benchmarks/RESULTS.md")
    parser.add_argument("--suites", nargs="+", default=["rover", "tabletop"], choices=["rover", "tabletop"])
    parser.add_argument("--maps", nargs="+", default=["open", "apartment"], help="the rover's maps")
    parser.add_argument("--backends", nargs="+", default=["mujoco", "pybullet"], choices=["mujoco", "pybullet"])
    args = parser.parse_args()
    figures: dict[str, object] = {"quick": args.quick}
    if "rover" in args.suites:
        rover(args, figures)
    if "tabletop" in args.suites:
        figures["tabletop"] = tabletop(args)
    emit(figures)


if __name__ == "__main__":
    main()
