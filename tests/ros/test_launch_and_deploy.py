"""The launch files, checked statically (the ROS 2 launch system is not on PyPI), and ``hrl-deploy``,
which starts the same node graph from the same params files."""

import ast
import importlib
import math
import signal
import subprocess
import sys
import tomllib

import pytest
import yaml
from geometry_msgs.msg import PoseStamped, Twist
from nav_msgs.msg import Odometry
from std_msgs.msg import String

from hrl.deploy import GRAPHS, NODES, DeployConfig, node_parameters
from hrl.deploy import main as deploy_main
from hrl.ros.planner_node import is_final
from tests.ros.conftest import ROOT, spin_until, status_handshake

LAUNCH_FILES = sorted((ROOT / "launch").glob("*.launch.py"))


def launch_nodes(path):
    """(executable, name, params file names, override keys, launch arguments used) per Node(...) call."""
    tree = ast.parse(path.read_text())
    declared = {
        call.args[0].value
        for call in ast.walk(tree)
        if isinstance(call, ast.Call) and getattr(call.func, "id", "") == "DeclareLaunchArgument"
    }
    nodes = []
    for call in ast.walk(tree):
        if not (isinstance(call, ast.Call) and getattr(call.func, "id", "") == "Node"):
            continue
        kw = {k.arg: k.value for k in call.keywords}
        files, keys, used = [], [], []
        for item in kw["parameters"].elts:
            if isinstance(item, ast.Call):  # os.path.join(params, "x.yaml")
                files.append(item.args[-1].value)
            elif isinstance(item, ast.Dict):
                keys += [k.value for k in item.keys]
                used += [v.args[0].value for v in item.values]
        nodes.append((kw["executable"].value, kw["name"].value, kw["package"].value, files, keys, used, declared))
    return nodes


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_launch_file_nodes_exist_and_their_params_match_the_declarations(path):
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    nodes = launch_nodes(path)
    assert nodes
    for executable, name, package, files, keys, used, declared in nodes:
        assert package == "hrl_stack"
        assert executable in scripts, f"{executable} is not an entry point in pyproject.toml"
        module = importlib.import_module(scripts[executable].split(":")[0])
        declared_params = {p.name for p in module.PARAMS}
        for f in files:
            doc = yaml.safe_load((ROOT / "launch" / "params" / f).read_text())
            assert set(doc) == {name}, f"{f} must be keyed by the node name {name!r}"
            assert set(doc[name]["ros__parameters"]) == declared_params, f
        assert set(keys) <= declared_params
        assert set(used) <= declared, f"{path.name} uses undeclared launch arguments {set(used) - declared}"
    # every launch argument has a description
    tree = ast.parse(path.read_text())
    for call in ast.walk(tree):
        if isinstance(call, ast.Call) and getattr(call.func, "id", "") == "DeclareLaunchArgument":
            assert any(k.arg == "description" and k.value.value for k in call.keywords)


def test_ros_package_manifest_and_resource_marker():
    manifest = (ROOT / "package.xml").read_text()
    assert "<name>hrl_stack</name>" in manifest and "<build_type>ament_python</build_type>" in manifest
    assert (ROOT / "resource" / "hrl_stack").is_file()


def test_deploy_parameters_merge_and_validate():
    config = DeployConfig(map="house", overrides={"policy_node": {"control_hz": 50}})
    assert node_parameters(config, "planner_node")["map"] == "house"
    assert node_parameters(config, "sim_robot_node")["map"] == "house"
    assert node_parameters(config, "policy_node")["control_hz"] == 50.0
    with pytest.raises(ValueError, match=r"'control_hz' = -1\.0 must be a finite number > 0"):
        node_parameters(DeployConfig(overrides={"policy_node": {"control_hz": -1.0}}), "policy_node")
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['rate'\]"):
        node_parameters(DeployConfig(overrides={"policy_node": {"rate": 1.0}}), "policy_node")
    with pytest.raises(ValueError, match="overrides for unknown node"):
        DeployConfig(overrides={"camera_node": {}}).validate()
    assert set(NODES) == {"sim_robot_node", "policy_node", "planner_node"} | set(GRAPHS["arm_sim"])


def test_deploy_arm_graphs_share_the_scene_and_the_planner():
    """graph=arm_sim / arm_real: the simulated arm and the arm's policy and planner nodes; ``scene`` reaches all
    three, ``planner`` the arm planner; a null planner keeps each params file's (the rover's graph planner)."""
    assert GRAPHS["arm_sim"] == ["sim_arm_node", "arm_policy_node", "arm_planner_node"]
    assert GRAPHS["arm_real"] == ["arm_policy_node", "arm_planner_node"]
    assert GRAPHS["sim"] == ["sim_robot_node", "policy_node", "planner_node"]  # the rover's, unchanged
    config = DeployConfig(graph="arm_sim", scene="sort", overrides={"sim_arm_node": {"backend": "pybullet"}})
    sim = node_parameters(config, "sim_arm_node")
    assert (sim["scene"], sim["backend"], sim["control_hz"]) == ("sort", "pybullet", 100.0)
    assert node_parameters(DeployConfig(), "planner_node")["planner"] == "graph"
    with pytest.raises(ValueError, match=r"'image_size' = 4 must be an integer from 16 to 256"):
        node_parameters(DeployConfig(overrides={"sim_arm_node": {"image_size": 4}}), "sim_arm_node")
    for node in GRAPHS["arm_sim"][1:]:
        assert node_parameters(config, node)["scene"] == "sort"
    assert node_parameters(DeployConfig(planner="llm_goals"), "arm_planner_node")["planner"] == "llm_goals"


def start_deploy(out, *overrides):
    return subprocess.Popen(
        [sys.executable, "-m", "hrl.deploy", *overrides, "duration_s=180", f"hydra.run.dir={out}"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def stop_deploy(proc):
    """Ctrl-C, as a person would; its output."""
    proc.send_signal(signal.SIGINT)
    return proc.communicate(timeout=60)[0]


@pytest.mark.parametrize("processes", ["one", "several"])
def test_hrl_deploy_runs_a_task_on_the_simulated_rover(tmp_path, ros_domain, rclpy_node, processes):
    out = tmp_path / "deploy"
    proc = start_deploy(out, f"processes={processes}", "map=apartment", "start=kitchen")
    node = rclpy_node
    status, odom = [], []
    said = node.create_subscription(String, "/task_status", lambda m: status.append(m.data), 10)
    node.create_subscription(Odometry, "/odom", lambda m: odom.append(m), 10)
    pub = node.create_publisher(String, "/task", 10)
    try:  # our /task writer and its /task_status writer matched: the first, volatile 'planning' status is not lost
        matched = lambda: pub.get_subscription_count() > 0 and said.get_publisher_count() > 0  # noqa: E731
        assert spin_until(node, lambda: odom and matched(), 120)
        goals = node.create_publisher(PoseStamped, "/goal_pose", 10)
        assert spin_until(node, lambda: goals.get_subscription_count() > 0, 60)
        assert status_handshake(node, goals, status), status  # the node's statuses reach us from now on
        assert spin_until(node, lambda: node.count_subscribers("/subgoal") > 0, 60)
        pub.publish(String(data="fridge"))
        assert spin_until(node, lambda: any(map(is_final, status)), 90)
        assert [s for s in status if is_final(s)] == ["done"] and status[0] == "planning: fridge"
    finally:
        output = stop_deploy(proc)
    assert proc.returncode == 0, output
    assert (out / "policy_node.params.yaml").is_file() and "[hrl-deploy] sim" in output


def test_hrl_deploy_graph_real_drives_a_stand_in_base(tmp_path, processes, rclpy_node):
    """graph=real: the policy and planner nodes only, on a base that is not this project's
    (tests/ros/independent_base.py, its own 6 x 6 m room = the 'open' map): a task ends with the base at the
    goal, and Ctrl-C leaves it with a zero command."""
    log = processes.tmp / "base.log"
    base = subprocess.Popen(
        [sys.executable, str(ROOT / "tests/ros/independent_base.py"), "1.5", "1.5", "0.0"],
        cwd=ROOT, stdout=log.open("w"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    processes.procs.append((base, log))
    out = tmp_path / "deploy"
    proc = start_deploy(out, "graph=real", "map=open")
    node = rclpy_node
    status, odom, cmds = [], [], []
    said = node.create_subscription(String, "/task_status", lambda m: status.append(m.data), 10)
    node.create_subscription(Odometry, "/odom", lambda m: odom.append(m.pose.pose.position), 10)
    node.create_subscription(Twist, "/cmd_vel", lambda m: cmds.append((m.linear.x, m.angular.z)), 50)
    pub = node.create_publisher(String, "/task", 10)
    try:
        matched = lambda: pub.get_subscription_count() > 0 and said.get_publisher_count() > 0  # noqa: E731
        assert spin_until(node, lambda: odom and matched() and cmds, 120)
        pub.publish(String(data="center"))
        assert spin_until(node, lambda: any(map(is_final, status)), 90), (
            status,
            (out / "planner_node.log").read_text(),
        )
        assert [s for s in status if is_final(s)] == ["done"]
        assert math.dist((odom[-1].x, odom[-1].y), (3.0, 3.0)) <= 0.35  # the center mark, on the base's odometry
    finally:
        output = stop_deploy(proc)
    assert proc.returncode == 0, output
    assert (
        "[hrl-deploy] real: policy_node, planner_node" in output and not (out / "sim_robot_node.params.yaml").exists()
    )
    assert spin_until(node, lambda: cmds[-1] == (0.0, 0.0), 10)  # the policy node's last word


def test_hrl_deploy_main_leaves_sys_argv_as_it_was(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["pytest", "-q"])
    with pytest.raises(SystemExit) as exited:
        deploy_main(["graph=moon", f"hydra.run.dir={tmp_path}"])
    assert exited.value.code == 2 and sys.argv == ["pytest", "-q"]


def test_hrl_deploy_rejects_bad_settings(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "hrl.deploy", "graph=moon", f"hydra.run.dir={tmp_path}"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and "graph='moon' is not one of sim, real" in done.stderr
