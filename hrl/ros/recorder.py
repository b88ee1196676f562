"""``bag_recorder``: record topics to a rosbag2 directory without a ROS installation (``rosbags``).

``ros2 bag record`` does this where ROS 2 is installed; this node is for machines with ROS 2 from PyPI
(no rosbag2 there). It subscribes to each topic in raw (serialised CDR) form and writes the bytes
unchanged, with the time DDS received it as the timestamp, so ``ros2 bag play``, ``rosbags`` and the sim-to-real
tools read the bag like any other. The bag is finalised (metadata.yaml written) on Ctrl-C / SIGTERM.

``topics`` takes topic names (``/topic`` with a type this module knows, or ``/topic:pkg/msg/Type``) and presets:
``rover`` (the defaults: what ``hrl-sim2real`` reads of a base) and ``arm`` (the arm's topics, docs/ros.md "The
arm": ``/joint_states``, the joint trajectory and gripper commands, ``/arm_subgoal`` and its statuses, ``/task`` and
``/task_status``, and ``/objects/<name>/pose`` for every object of the ``scene`` parameter's scene), e.g.
``topics:=arm`` or ``topics:="arm,/camera/front/image_raw:sensor_msgs/msg/Image"``.

Sensor streams (``sensor_msgs/*``, odometry) are subscribed with ``sensor_qos`` (default ``sensor_data``,
best effort: it hears reliable and best-effort drivers alike, REP 2003), the other topics with ``qos``
(default ``reliable``: commands, plans and statuses are not to be lost).
"""

from __future__ import annotations

import importlib
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rclpy.node import Node
from rclpy.parameter import Parameter

from hrl.ros import qos
from hrl.ros.params import Param, ParameterError, declare, non_empty

#: topic -> (ROS message type) recorded by default: what the sim-to-real comparison reads
DEFAULT_TOPICS = {
    "/odom": "nav_msgs/msg/Odometry",
    "/cmd_vel": "geometry_msgs/msg/Twist",
    "/scan": "sensor_msgs/msg/LaserScan",
    "/plan": "nav_msgs/msg/Path",
    "/subgoal": "geometry_msgs/msg/PoseStamped",
    "/subgoal_status": "std_msgs/msg/String",
    "/task": "std_msgs/msg/String",
    "/task_status": "std_msgs/msg/String",
}


#: the arm's topics (docs/ros.md, "The arm"), without the object poses (one per object of the scene)
ARM_TOPICS = {
    "/joint_states": "sensor_msgs/msg/JointState",
    "/panda_arm_controller/joint_trajectory": "trajectory_msgs/msg/JointTrajectory",
    "/panda_hand_controller/commands": "std_msgs/msg/Float64MultiArray",
    "/arm_subgoal": "std_msgs/msg/String",
    "/arm_subgoal_status": "std_msgs/msg/String",
    "/task": "std_msgs/msg/String",
    "/task_status": "std_msgs/msg/String",
}
#: the object pose topics of the arm preset: OBJECT_POSE_TOPIC.format(name=...) for each object of the scene
OBJECT_POSE_TOPIC, OBJECT_POSE_TYPE = "/objects/{name}/pose", "geometry_msgs/msg/PoseStamped"
PRESETS = ("rover", "arm")


def _topics(value: Any) -> str | None:
    if not isinstance(value, str):
        return "must be a string"
    for item in filter(None, (t.strip() for t in value.split(","))):
        name, _, msgtype = item.partition(":")
        if item in PRESETS:
            continue
        if not name.startswith("/") or (msgtype and msgtype.count("/") != 2):
            return f"must be comma-separated presets ({', '.join(PRESETS)}), /topic or /topic:pkg/msg/Type entries"
    return None


QUEUE = 100  # messages per topic held for the writer: a loaded machine can stall it for seconds

PARAMS = [
    Param("output", "", "bag directory to create (must not exist); empty: runs/bags/<time>", lambda v: None),
    Param(
        "topics",
        ",".join(DEFAULT_TOPICS),
        "comma-separated /topic[:pkg/msg/Type] to record, or presets: rover (the default list), arm",
        _topics,
    ),
    Param(
        "scene", "blocks", "tabletop scene (name or .yaml) whose object pose topics the arm preset records", non_empty
    ),
    Param("storage", "sqlite3", "rosbag2 storage: sqlite3 or mcap", non_empty),
    qos.qos_param("sensor_qos", "sensor_data", "sensor topics in (sensor_msgs/*, nav_msgs/Odometry)"),
    qos.qos_param("qos", "reliable", "the other topics in"),
]


def arm_topics(scene: str) -> dict[str, str]:
    """The arm preset: :data:`ARM_TOPICS` and the pose topic of every object of ``scene`` (a name or a path)."""
    from sim.tabletop.scene import load_scene

    try:
        objects = [o.name for o in load_scene(scene).objects]
    except (ValueError, FileNotFoundError) as err:
        raise ParameterError(f"parameter 'scene' = {scene!r}: {err}") from None
    return {**ARM_TOPICS, **{OBJECT_POSE_TOPIC.format(name=n): OBJECT_POSE_TYPE for n in objects}}


def parse_topics(text: str, scene: str = "blocks") -> dict[str, str]:
    """Topic -> type of a ``topics`` value: presets expanded, known topics typed (the arm's poses from ``scene``)."""
    out: dict[str, str] = {}
    for item in filter(None, (t.strip() for t in text.split(","))):
        if item == "rover":
            out.update(DEFAULT_TOPICS)
            continue
        if item == "arm":
            out.update(arm_topics(scene))
            continue
        name, _, msgtype = item.partition(":")
        if not msgtype:
            known = {**DEFAULT_TOPICS, **ARM_TOPICS}
            if name not in known:
                raise ParameterError(
                    f"topic {name!r} has no known type; give it as {name}:pkg/msg/Type (or use a preset: "
                    f"{', '.join(PRESETS)})"
                )
            msgtype = known[name]
        out[name] = msgtype
    return out


def is_sensor_stream(msgtype: str) -> bool:
    """Whether a topic of this type is a sensor stream (subscribed with ``sensor_qos``): sensor_msgs and
    odometry, what drivers publish as fast as they measure."""
    return msgtype.startswith("sensor_msgs/") or msgtype == "nav_msgs/msg/Odometry"


class Recorder(Node):
    """Writes every message of the chosen topics, serialised, to a rosbag2 directory; ``overrides`` are
    parameter values."""

    def __init__(self, **overrides: Any) -> None:
        super().__init__("bag_recorder", parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()])
        from rosbags.rosbag2 import StoragePlugin, Writer
        from rosbags.typesys import Stores, get_typestore

        p = declare(self, PARAMS)
        path = Path(p["output"] or Path("runs") / "bags" / time.strftime("%Y-%m-%d_%H-%M-%S"))
        if path.exists():
            raise ParameterError(f"parameter 'output' = {str(path)!r} exists; rosbag2 needs a new directory")
        storages = {"sqlite3": StoragePlugin.SQLITE3, "mcap": StoragePlugin.MCAP}
        if p["storage"] not in storages:
            raise ParameterError(f"parameter 'storage' = {p['storage']!r} must be sqlite3 or mcap")
        topics = parse_topics(p["topics"], p["scene"])
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        typestore = get_typestore(Stores.LATEST)
        self.writer: Any = Writer(path, version=9, storage_plugin=storages[p["storage"]])
        self.writer.open()
        self.count = 0  # all the node keeps: the messages go to the bag as they come
        for topic_name, msgtype in topics.items():
            pkg, _, name = msgtype.split("/")
            cls = getattr(importlib.import_module(f"{pkg}.msg"), name)
            conn = self.writer.add_connection(topic_name, msgtype, typestore=typestore)
            param = "sensor_qos" if is_sensor_stream(msgtype) else "qos"
            qos.subscribe(self, cls, topic_name, self._writer_for(conn), p[param], param, depth=QUEUE, raw=True)
        self.get_logger().info(f"recording {', '.join(topics)} to {path}")

    def _writer_for(self, conn: Any) -> Callable[[bytes, Any], None]:
        def write(data: bytes, info: Any) -> None:
            if self.writer is None:  # stopped: the bag is closed
                return
            # stamped when DDS received it, as rosbag2 does, not when this callback ran (late under load);
            # rmw implementations without a receive time report 0
            stamp = info["received_timestamp"] or self.get_clock().now().nanoseconds
            self.writer.write(conn, stamp, data)
            self.count += 1

        return write

    def stop(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.get_logger().info(f"wrote {self.count} messages to {self.path}")
            self.writer = None


def main(argv: list[str] | None = None) -> int:
    from hrl.ros.runner import run_node

    return run_node(Recorder, argv)


if __name__ == "__main__":
    sys.exit(main())
