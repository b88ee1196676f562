"""hrl-sim2real on arm recordings: runs of the simulated arm recorded over DDS (sim_arm_node, arm_policy_node and the
bag recorder's arm preset, each in its own process), replayed in MuJoCo and PyBullet; a robot with command latency
tracks worse than the nominal one; broken arm bags give clear errors."""

import json

import numpy as np
import pytest
from rclpy.serialization import serialize_message
from rosbags.highlevel import AnyReader
from rosbags.rosbag2 import Writer
from rosbags.typesys import Stores, get_typestore
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from hrl.ros.arm_messages import SkillCall
from hrl.ros.arm_sim2real import compare, read_arm_bag
from hrl.ros.recorded_run import record_arm_run
from hrl.ros.recorder import arm_topics
from hrl.sim2real import BagError, main
from robots.arm import load_arm
from sim.tabletop.scene import load_scene
from tests.ros.conftest import own_domain

CALLS = [
    SkillCall("a", "reach", (-0.25, -0.1, 0.2), None, 0.02, 100, label="reach A"),
    SkillCall("b", "reach", (-0.05, 0.12, 0.1), None, 0.02, 100, label="reach B"),
]
BACKENDS = ["mujoco", "pybullet"]


@pytest.fixture(scope="module")
def bags(tmp_path_factory):
    """Two recorded runs of the same calls: the nominal simulated arm, and one whose commands take effect 60 ms
    late (``latency_s``: a robot unlike the simulators)."""
    root = tmp_path_factory.mktemp("arm_bags")
    out = {}
    for name, params in (("nominal", ()), ("latency", ("latency_s:=0.06",))):
        with own_domain():
            outcomes = record_arm_run(root / name, calls=CALLS, sim_params=params, timeout_s=120)
        assert outcomes == ["reached", "reached"], (name, outcomes)
        out[name] = root / name
    return out


def test_the_arm_preset_records_the_arm_topics(bags):
    with AnyReader([bags["nominal"]]) as reader:
        counts = {c.topic: c.msgcount for c in reader.connections}
    assert set(counts) == set(arm_topics("blocks"))
    assert counts["/joint_states"] > 100 and counts["/panda_arm_controller/joint_trajectory"] > 20
    assert counts["/arm_subgoal"] == 2 and counts["/arm_subgoal_status"] == 2
    assert counts["/objects/red_block/pose"] > 100 and counts["/panda_hand_controller/commands"] > 20


def test_a_recorded_arm_run_replays_with_finite_errors_and_reached_subgoals(bags, tmp_path):
    assert main([str(bags["nominal"]), "--out", str(tmp_path / "out")]) == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["kind"] == "arm" and set(summary["backends"]) == set(BACKENDS)
    assert [s["outcome"] for s in summary["robot"]["subgoals"]] == ["reached", "reached"]
    assert summary["robot"]["task_success"] is True
    for name, b in summary["backends"].items():
        values = [
            b["joint_rms_rad"],
            b["joint_max_rad"],
            b["tcp_rms_m"],
            b["tcp_max_m"],
            *b["joint_rms_per_joint_rad"].values(),
        ]
        assert all(np.isfinite(values)), (name, b)
        # the same simulated arm and commands: within a few millimetres (the commands' timing on the period grid)
        assert b["tcp_rms_m"] < 0.005 and b["joint_rms_rad"] < 0.01, (name, b)
        assert [s["reached"] for s in b["subgoals"]] == [True, True] and b["task_success"] is True
        assert all(e < 0.005 for e in b["object_final_error_m"].values()), (name, b)  # nothing touched: still
    for f in ("report.md", "joints.png", "tcp_error.png"):
        assert (tmp_path / "out" / f).is_file()
    assert "| mujoco |" in (tmp_path / "out" / "report.md").read_text()


def test_a_robot_with_command_latency_tracks_worse_than_the_nominal_one(bags):
    arm, scene = load_arm("panda"), load_scene("blocks")
    nominal = compare(read_arm_bag(bags["nominal"], arm, scene), scene, BACKENDS)
    late = compare(read_arm_bag(bags["latency"], arm, scene), scene, BACKENDS)
    for name in BACKENDS:
        n, p = nominal["backends"][name], late["backends"][name]
        assert p["tcp_rms_m"] > 3 * n["tcp_rms_m"] and p["joint_rms_rad"] > 3 * n["joint_rms_rad"], (name, n, p)


# ---- broken arm bags (written here: no DDS) -------------------------------------------------------------------

ARM = [f"panda_joint{i}" for i in range(1, 8)]
T0 = 1_700_000_000 * 10**9


def write_bag(path, messages):
    """``messages``: (time ns, topic, type, message)."""
    typestore = get_typestore(Stores.LATEST)
    with Writer(path, version=9) as writer:
        conns = {}
        for t, topic, msgtype, msg in messages:
            if topic not in conns:
                conns[topic] = writer.add_connection(topic, msgtype, typestore=typestore)
            writer.write(conns[topic], t, serialize_message(msg))
    return path


def joint_state(names, t):
    m = JointState()
    m.header.stamp.sec, m.header.stamp.nanosec = divmod(t, 10**9)
    m.name = list(names)
    home = load_arm("panda").home
    m.position = [float(home[ARM.index(n[-len("panda_joint1") :])]) for n in names]
    # all three arrays filled: rosbags refuses rclpy's serialisation of a JointState ending in an empty array
    m.velocity = m.effort = [0.0] * len(names)
    return m


def trajectory(names):
    m = JointTrajectory()
    m.joint_names = list(names)
    point = JointTrajectoryPoint()
    point.positions = [float(v) for v in load_arm("panda").home[: len(names)]]
    point.velocities = point.accelerations = point.effort = [0.0] * len(names)  # (see joint_state)
    point.time_from_start.nanosec = 40_000_000
    m.points = [point]
    return m


def test_a_bag_without_arm_or_rover_topics_is_refused_naming_both(tmp_path, capsys):
    bag = write_bag(tmp_path / "only_task", [(T0, "/task", "std_msgs/msg/String", String(data="stack"))])
    assert main([str(bag)]) == 2
    err = capsys.readouterr().err
    assert "neither a rover recording" in err and "/joint_states" in err and "/task" in err


def test_an_arm_bag_without_trajectories_is_refused(tmp_path, capsys):
    states = [(T0 + k * 10**7, "/joint_states", "sensor_msgs/msg/JointState", joint_state(ARM, T0)) for k in range(5)]
    assert main([str(write_bag(tmp_path / "no_commands", states))]) == 2
    assert "JointTrajectory topic: nothing to replay" in capsys.readouterr().err


def test_joint_states_missing_an_arm_joint_are_refused_naming_it(tmp_path, capsys):
    six = ARM[:6]
    messages = [(T0 + k * 10**7, "/joint_states", "sensor_msgs/msg/JointState", joint_state(six, T0)) for k in range(5)]
    messages.append((T0 + 2, "/panda_arm_controller/joint_trajectory", "trajectory_msgs/msg/JointTrajectory",
                     trajectory(ARM)))  # fmt: skip
    bag = write_bag(tmp_path / "six_joints", messages)
    with pytest.raises(BagError, match=r"missing: \['panda_joint7'\].*--joint-prefix"):
        read_arm_bag(bag, load_arm("panda"), load_scene("blocks"))
    assert main([str(bag)]) == 2
    assert "panda_joint7" in capsys.readouterr().err
    # the same joints under a prefix the user names: read
    prefixed = [(t, topic, ty, joint_state([f"fr_{n}" for n in ARM], T0)) for t, topic, ty, _ in messages[:-1]]
    traj = trajectory([f"fr_{n}" for n in ARM])
    bag = write_bag(tmp_path / "prefixed", [*prefixed, (T0 + 2, *messages[-1][1:3], traj)])
    rec = read_arm_bag(bag, load_arm("panda"), load_scene("blocks"), joint_prefix="fr_")
    assert rec.joints.shape == (5, 7) and len(rec.trajectories) == 1


def test_calls_moving_an_object_the_scene_lacks_are_refused_naming_the_scene(tmp_path):
    messages = [(T0 + k * 10**7, "/joint_states", "sensor_msgs/msg/JointState", joint_state(ARM, T0)) for k in range(5)]
    messages.append((T0 + 2, "/panda_arm_controller/joint_trajectory", "trajectory_msgs/msg/JointTrajectory",
                     trajectory(ARM)))  # fmt: skip
    call = SkillCall("c", "pick_place", (0.0, 0.0, 0.1), "mug", 0.02, 50)
    messages.append((T0 + 3, "/arm_subgoal", "std_msgs/msg/String", String(data=call.to_json())))
    bag = write_bag(tmp_path / "mug", sorted(messages, key=lambda m: m[0]))
    with pytest.raises(BagError, match=r"\['mug'\].*scene 'blocks'.*--scene"):
        read_arm_bag(bag, load_arm("panda"), load_scene("blocks"))
