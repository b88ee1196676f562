"""``hrl-deploy``: start the ROS 2 node graph of ``launch/*.launch.py`` without the launch system.

The ROS 2 launch system is not on PyPI; ``hrl-deploy`` starts the same nodes from the same params files
(``launch/params/<node>.yaml``), each in its own process (``processes=several``, like ``ros2 launch``) or
all in this one (``processes=one``)::

    hrl-deploy                                       # graph=sim: simulated rover + policy + planner
    hrl-deploy graph=real map=apartment              # policy + planner for a real base (/odom, /scan, /cmd_vel)
    hrl-deploy planner=llm_goals processes=one       # all nodes in one process
    hrl-deploy +overrides.policy_node.control_hz=50.0
    hrl-deploy graph=arm_sim scene=blocks            # simulated Panda + arm policy + arm planner
    hrl-deploy graph=arm_real planner=llm_goals      # arm policy + arm planner for a real arm under ros2_control

Then send a task: ``/task`` (std_msgs/String), e.g. from Python or ``ros2 topic pub`` where ROS is
installed. Ctrl-C or SIGTERM stops every node (the policy node publishes a final zero command). Each
node's merged parameters and log go to the run directory (``runs/deploy/<time>/``).
"""

from __future__ import annotations

import importlib
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hrl import DEFAULT_POLICY

ROOT = Path(__file__).resolve().parents[1]
#: node name -> (its module, its rclpy Node class there)
NODES = {
    "sim_robot_node": ("hrl.ros.sim_robot_node", "SimRobotNode"),
    "policy_node": ("hrl.ros.policy_node", "PolicyNode"),
    "planner_node": ("hrl.ros.planner_node", "PlannerNode"),
    "sim_arm_node": ("hrl.ros.sim_arm_node", "SimArmNode"),
    "arm_policy_node": ("hrl.ros.arm_policy_node", "ArmPolicyNode"),
    "arm_planner_node": ("hrl.ros.arm_planner_node", "ArmPlannerNode"),
}
GRAPHS = {
    "sim": ["sim_robot_node", "policy_node", "planner_node"],
    "real": ["policy_node", "planner_node"],
    "arm_sim": ["sim_arm_node", "arm_policy_node", "arm_planner_node"],
    "arm_real": ["arm_policy_node", "arm_planner_node"],
}
# top-level keys of the deploy config and the node parameters they set (like the launch arguments); a key
# left null keeps each node's params file value
SHARED = {
    "map": ("sim_robot_node", "planner_node"),
    "start": ("sim_robot_node",),
    "planner": ("planner_node", "arm_planner_node"),
    "policy": ("policy_node", "planner_node"),
    "scene": ("sim_arm_node", "arm_policy_node", "arm_planner_node"),
}


@dataclass
class DeployConfig:
    graph: str = "sim"
    processes: str = "several"
    params_dir: str = "launch/params"
    map: str = "apartment"
    start: str = "dock"
    planner: str | None = None  # None: the params file's (graph for the rover, the arm planner's own for the arm)
    scene: str = "blocks"
    policy: str = DEFAULT_POLICY
    overrides: dict[str, Any] = field(default_factory=dict)
    duration_s: float | None = None

    def validate(self) -> None:
        if self.graph not in GRAPHS:
            raise ValueError(f"graph={self.graph!r} is not one of {', '.join(GRAPHS)}")
        if self.processes not in ("one", "several"):
            raise ValueError(f"processes={self.processes!r}: use 'one' (this process) or 'several' (one per node)")
        unknown = sorted(set(self.overrides) - set(NODES))
        if unknown:
            raise ValueError(f"overrides for unknown node(s) {unknown}; nodes: {', '.join(NODES)}")
        if self.duration_s is not None and self.duration_s <= 0:
            raise ValueError(f"duration_s must be > 0 (or null: run until Ctrl-C), got {self.duration_s}")


def node_parameters(config: DeployConfig, node: str) -> dict[str, Any]:
    """The node's params file, with the config's shared keys and overrides on top, validated."""
    from hrl.ros.params import validate

    path = ROOT / config.params_dir / f"{node}.yaml"  # an absolute params_dir replaces ROOT
    if not path.is_file():
        raise ValueError(f"{path} not found: every node needs its params file in params_dir={config.params_dir!r}")
    doc = yaml.safe_load(path.read_text()) or {}
    try:
        values = dict(doc[node]["ros__parameters"])
    except (KeyError, TypeError):
        raise ValueError(f"{path} must hold {node}: ros__parameters: {{...}}") from None
    for key, nodes in SHARED.items():
        if node in nodes and getattr(config, key) is not None:
            values[key] = getattr(config, key)
    values.update(config.overrides.get(node) or {})
    params = importlib.import_module(NODES[node][0]).PARAMS
    return validate(params, values)


def run(config: DeployConfig, out_dir: Path) -> int:
    config.validate()
    out_dir.mkdir(parents=True, exist_ok=True)
    graph = {node: node_parameters(config, node) for node in GRAPHS[config.graph]}  # all checked before starting
    for node, values in graph.items():
        (out_dir / f"{node}.params.yaml").write_text(yaml.safe_dump({node: {"ros__parameters": values}}))
    print(f"[hrl-deploy] {config.graph}: {', '.join(graph)} ({config.processes} process(es)) -> {out_dir}", flush=True)
    stop = {"now": False}

    def on_signal(*_: Any) -> None:
        stop["now"] = True

    # Ctrl-C / SIGTERM end the loop, then the nodes stop cleanly; the caller's handlers come back after
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        if config.processes == "several":
            return _several(graph, out_dir, config.duration_s, stop)
        return _one(graph, config.duration_s, stop)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _several(graph: dict[str, dict], out_dir: Path, duration: float | None, stop: dict) -> int:
    procs = []
    for node in graph:
        log = open(out_dir / f"{node}.log", "w")  # noqa: SIM115 (open as long as the node runs)
        params_file = str(out_dir / f"{node}.params.yaml")
        cmd = [sys.executable, "-m", NODES[node][0], "--ros-args", "--params-file", params_file]
        procs.append((node, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)))
    t0 = time.monotonic()
    code = 0
    while not stop["now"] and (duration is None or time.monotonic() - t0 < duration):
        dead = [(n, p.returncode) for n, p in procs if p.poll() is not None]
        if dead:
            print(f"[hrl-deploy] {dead[0][0]} exited with {dead[0][1]}: see {out_dir / (dead[0][0] + '.log')}")
            code = 1
            break
        time.sleep(0.1)
    for _, p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)  # the nodes' own clean stop (final zero command)
    for _, p in procs:
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
    return code


def _one(graph: dict[str, dict], duration: float | None, stop: dict) -> int:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions

    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)  # ours: stop the loop, then stop the nodes
    nodes = [getattr(importlib.import_module(NODES[n][0]), NODES[n][1])(**values) for n, values in graph.items()]
    executor = SingleThreadedExecutor()
    for node in nodes:
        executor.add_node(node)
    t0 = time.monotonic()
    try:
        while not stop["now"] and (duration is None or time.monotonic() - t0 < duration):
            executor.spin_once(timeout_sec=0.05)
    finally:
        for node in nodes:
            if hasattr(node, "stop"):
                node.stop()
        executor.spin_once(timeout_sec=0.05)
        time.sleep(0.2)  # let DDS deliver the final commands
        for node in nodes:
            node.destroy_node()
        rclpy.try_shutdown()
    return 0


def _task(cfg: Any) -> int:
    from hydra.core.hydra_config import HydraConfig

    from hrl.cli import fail, typed_config

    config: DeployConfig = typed_config(cfg, "hrl-deploy")
    out_dir = Path(HydraConfig.get().runtime.output_dir)
    try:
        code = run(config, out_dir)
    except ValueError as err:
        fail("hrl-deploy", str(err))
    if code:
        sys.exit(code)
    return code


def main(argv: list[str] | None = None) -> int:
    from hydra.core.config_store import ConfigStore

    from hrl.cli import run_hydra_app

    ConfigStore.instance().store(name="deploy_schema", node=DeployConfig)
    run_hydra_app(_task, "deploy", argv)  # sys.argv is the caller's again afterwards
    return 0


if __name__ == "__main__":
    sys.exit(main())
