"""hrl-sim2real on hand-made bags: an exact replay, and broken recordings (missing topics, stamps out of
order, a truncated file, no metadata, the wrong map) -> clear errors or warnings, never a traceback."""

import json
import math
import shutil

import gymnasium as gym
import numpy as np
import pytest
from geometry_msgs.msg import PoseStamped, Twist
from nav_msgs.msg import Odometry
from rclpy.serialization import serialize_message
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore
from sensor_msgs.msg import LaserScan

from hrl.ros.recorded_run import missed_start
from hrl.sim2real import BagError, compare, main, read_bag
from sim.navigation.world import load_world

TYPES = {"/odom": "nav_msgs/msg/Odometry", "/cmd_vel": "geometry_msgs/msg/Twist",
         "/scan": "sensor_msgs/msg/LaserScan", "/subgoal": "geometry_msgs/msg/PoseStamped"}  # fmt: skip
T0 = 1_700_000_000 * 10**9


def simulated_run(steps=60, seed=0):
    """A run of the MuJoCo rover under known commands, as the messages a robot would have published:
    odom + scan at each tick, the period's command a nanosecond after them (a base applies a command from its
    arrival, hrl.base_drive: here, the whole period), one subgoal."""
    env = gym.make("hrl/RoverNav-v0", map="apartment", goal_mode="anywhere", max_steps=10**6)
    env.reset(seed=seed, options={"start": (2.0, 6.0, 0.0)})
    u = env.unwrapped
    lim = u.robot.limits
    rng = np.random.default_rng(seed)
    messages = [(T0, "/subgoal", _subgoal(3.5, 6.5, T0))]
    for k in range(steps + 1):
        t = T0 + k * 100_000_000
        pose, (v, w) = u.pose, u.physics.velocity()
        messages.append((t, "/odom", _odom(pose.x, pose.y, pose.yaw, v, w, t)))
        messages.append((t, "/scan", _scan(u.physics.lidar(), u.robot.lidar, t)))
        if k < steps:
            cmd = np.array([0.8, 0.3 * math.sin(k / 6)]) + rng.normal(0, 0.05, 2)
            messages.append((t + 1, "/cmd_vel", _twist(cmd[0] * lim.max_linear_velocity,
                                                               cmd[1] * lim.max_angular_velocity)))  # fmt: skip
            env.step(cmd)
    env.close()
    return messages


def _stamp(msg, t):
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(t, 10**9)


def _odom(x, y, yaw, v, w, t):
    m = Odometry()
    _stamp(m, t)
    m.header.frame_id, m.child_frame_id = "odom", "base_link"
    m.pose.pose.position.x, m.pose.pose.position.y = float(x), float(y)
    m.pose.pose.orientation.z, m.pose.pose.orientation.w = math.sin(yaw / 2), math.cos(yaw / 2)
    m.twist.twist.linear.x, m.twist.twist.angular.z = float(v), float(w)
    return m


def _scan(ranges, lidar, t):
    m = LaserScan()
    _stamp(m, t)
    angles = lidar.angles()
    m.angle_min, m.angle_max = float(angles[0]), float(angles[-1])
    m.angle_increment = float(angles[1] - angles[0])
    m.range_min, m.range_max = float(lidar.min_range), float(lidar.max_range)
    m.ranges = [math.inf if r >= lidar.max_range - 1e-6 else float(r) for r in ranges]
    return m


def _twist(v, w):
    m = Twist()
    m.linear.x, m.angular.z = float(v), float(w)
    return m


def _subgoal(x, y, t):
    m = PoseStamped()
    _stamp(m, t)
    m.header.frame_id = "odom"
    m.pose.position.x, m.pose.position.y = x, y
    return m


def write_bag(path, messages, storage="sqlite3"):
    typestore = get_typestore(Stores.LATEST)
    plugin = {"sqlite3": StoragePlugin.SQLITE3, "mcap": StoragePlugin.MCAP}[storage]
    with Writer(path, version=9, storage_plugin=plugin) as writer:
        conns = {}
        for t, topic, msg in messages:
            if topic not in conns:
                conns[topic] = writer.add_connection(topic, TYPES[topic], typestore=typestore)
            writer.write(conns[topic], t, msg if isinstance(msg, bytes) else serialize_message(msg))
    return path


@pytest.fixture(scope="module")
def run_messages():
    return simulated_run()


def test_exact_replay_of_a_simulated_run(tmp_path, run_messages):
    rec = read_bag(write_bag(tmp_path / "good", run_messages))
    assert rec.warnings == ["no /plan in the bag: the plan drawing skipped"]
    summary = compare(rec, load_world("apartment"), ["mujoco", "pybullet"])
    summary.pop("_replays")
    mujoco, pybullet = summary["backends"]["mujoco"], summary["backends"]["pybullet"]
    assert mujoco["ate_m"] < 1e-3 and mujoco["final_position_error_m"] < 1e-3  # the simulator it came from
    assert pybullet["ate_m"] < 0.03  # the twin, within the parity tolerance
    assert mujoco["lidar_mae_m"] < 1e-3 and mujoco["lidar_scans_compared"] == 61
    assert summary["robot"]["success"] and mujoco["success"]
    assert abs(summary["robot"]["time_to_subgoal_s"][0] - mujoco["time_to_subgoal_s"][0]) < 0.11


def test_missing_odom_or_cmd_vel_is_a_clear_error(tmp_path, run_messages, capsys):
    for missing in ("/odom", "/cmd_vel"):
        bag = write_bag(tmp_path / missing.strip("/"), [m for m in run_messages if m[1] != missing])
        with pytest.raises(BagError, match=rf"no {missing} messages .*Topics in the bag: "):
            read_bag(bag)
        assert main([str(bag), "--out", str(tmp_path / "out")]) == 2
        assert f"hrl-sim2real: error: {bag}: no {missing} messages" in capsys.readouterr().err


def test_missing_optional_topics_are_warnings(tmp_path, run_messages):
    bag = write_bag(tmp_path / "bare", [m for m in run_messages if m[1] in ("/odom", "/cmd_vel")])
    rec = read_bag(bag)
    assert any("no /scan in the bag: lidar discrepancy skipped" in w for w in rec.warnings)
    assert any("no /subgoal in the bag: time to subgoal and success skipped" in w for w in rec.warnings)
    summary = compare(rec, load_world("apartment"), ["mujoco"])
    summary.pop("_replays")
    assert summary["backends"]["mujoco"]["lidar_mae_m"] is None and "robot" not in summary
    assert summary["backends"]["mujoco"]["ate_m"] < 1e-3


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_out_of_order_stamps_are_sorted_with_a_warning(tmp_path, run_messages, storage):
    shuffled = list(run_messages)
    odom = [i for i, m in enumerate(shuffled) if m[1] == "/odom"]
    # Two odometry messages delivered in the wrong order: their header stamps go backwards.
    (ta, _, ma), (tb, _, mb) = shuffled[odom[10]], shuffled[odom[11]]
    shuffled[odom[10]], shuffled[odom[11]] = (ta, "/odom", mb), (tb, "/odom", ma)
    # ... and the file itself out of time order (a recorder that buffers per topic)
    shuffled[odom[20]], shuffled[odom[21]] = shuffled[odom[21]], shuffled[odom[20]]
    rec = read_bag(write_bag(tmp_path / f"shuffled_{storage}", shuffled, storage))
    assert any("/odom: header stamps go backwards 1 time(s); re-ordered" in w for w in rec.warnings), rec.warnings
    assert np.all(np.diff(rec.odom_t) >= 0)
    summary = compare(rec, load_world("apartment"), ["mujoco"])
    assert summary["backends"]["mujoco"]["ate_m"] < 1e-3  # sorted, the run is intact


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
@pytest.mark.parametrize("keep", [1 / 3, 2 / 3], ids=["a_third", "two_thirds"])
def test_truncated_bag_is_a_clear_error_naming_it(tmp_path, run_messages, capsys, storage, keep):
    """A data file cut short (a recorder killed mid-write) cannot be opened: sqlite reports the database
    malformed, MCAP misses its end magic; either way exit code 2 and one line naming the bag, no traceback."""
    bag = write_bag(tmp_path / f"cut_{storage}", run_messages, storage)
    data_file = next(p for p in bag.iterdir() if p.suffix in (".db3", ".mcap"))
    data = data_file.read_bytes()
    data_file.write_bytes(data[: int(len(data) * keep)])
    code = main([str(bag), "--backends", "mujoco", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    assert f"hrl-sim2real: error: cannot open bag {bag}: " in err and "is it a complete rosbag2 recording?" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_a_damaged_message_keeps_what_was_read_before_it_with_a_warning(tmp_path, run_messages, capsys, storage):
    """A message whose bytes do not deserialize (a corrupt record) ends the reading there: the messages before
    it are replayed, and a warning says after how many it broke."""
    # a command: the only message at its time stamp, so exactly the messages before it in the file are read
    damaged_at = next(i for i, m in enumerate(run_messages) if m[1] == "/cmd_vel" and m[0] >= T0 + 4 * 10**9)
    broken = [*run_messages[:damaged_at], (run_messages[damaged_at][0], "/cmd_vel", b"\x00\x01\x00\x00\xff\xff")]
    bag = write_bag(tmp_path / f"damaged_{storage}", [*broken, *run_messages[damaged_at + 1 :]], storage)
    code = main([str(bag), "--backends", "mujoco", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 0 and "Traceback" not in err, err
    assert f"hrl-sim2real: warning: the bag is damaged after {damaged_at} messages" in err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["backends"]["mujoco"]["ate_m"] < 1e-3  # what was read replays exactly


def test_not_a_bag_and_unfinished_recordings(tmp_path, run_messages):
    with pytest.raises(BagError, match="does not exist"):
        read_bag(tmp_path / "nothing")
    bag = write_bag(tmp_path / "unfinished", run_messages)
    (bag / "metadata.yaml").unlink()
    with pytest.raises(BagError, match=r"no metadata.yaml.*ros2 bag reindex"):
        read_bag(bag)
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "metadata.yaml").write_text("not: a bag\n")
    with pytest.raises(BagError, match="cannot open bag"):
        read_bag(plain)


def test_a_run_in_another_map_is_named(tmp_path, run_messages):
    rec = read_bag(write_bag(tmp_path / "good", run_messages))
    with pytest.raises(BagError, match=r"inside a wall of map 'open': wrong map\?"):
        compare(rec, load_world("open"), ["mujoco"])


def test_nan_odometry_is_dropped_with_a_warning(tmp_path, run_messages):
    broken = list(run_messages)
    i = next(k for k, m in enumerate(broken) if m[1] == "/odom" and m[0] > T0 + 10**9)
    t = broken[i][0]
    broken[i] = (t, "/odom", _odom(math.nan, 1.0, 0.0, 0.0, 0.0, t))
    rec = read_bag(write_bag(tmp_path / "nan", broken))
    assert any("NaN or inf dropped" in w for w in rec.warnings)
    assert np.isfinite(rec.odom).all()


def test_bad_cli_values(tmp_path, run_messages, capsys):
    bag = write_bag(tmp_path / "good", run_messages)
    assert main([str(bag), "--backends", "gazebo"]) == 2
    assert "unknown backend(s) ['gazebo']" in capsys.readouterr().err
    assert main([str(bag), "--tolerance", "-1"]) == 2
    assert "--tolerance must be a positive number" in capsys.readouterr().err
    assert main([str(bag), "--map", "atlantis"]) == 2
    assert "atlantis" in capsys.readouterr().err
    shutil.rmtree(bag)


def test_a_recorder_that_heard_no_command_before_the_first_subgoal_is_named(tmp_path, run_messages):
    # simulated_run has the subgoal first and commands from 1 ns after it: what a recorder whose /cmd_vel
    # subscription matched the policy late holds (it may lack the commands that started the motion)
    late = missed_start(write_bag(tmp_path / "late", run_messages))
    assert late is not None and "is not before its first /subgoal (0.00 s)" in late
    heard = [(T0 - 10**8, "/cmd_vel", _twist(0.0, 0.0)), *run_messages]  # a zero command 0.1 s before the subgoal
    assert missed_start(write_bag(tmp_path / "heard", heard)) is None
    no_subgoal = [m for m in run_messages if m[1] != "/subgoal"]
    assert missed_start(write_bag(tmp_path / "no_subgoal", no_subgoal)) is None  # nothing to tell it by
