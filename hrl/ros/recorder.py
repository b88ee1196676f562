"""``bag_recorder``: record topics to a rosbag2 directory without a ROS installation (``rosbags``).

``ros2 bag record`` does this where ROS 2 is installed; this node is for machines with ROS 2 from PyPI
(no rosbag2 there). It subscribes to each topic in raw (serialised CDR) form and writes the bytes
unchanged, with the time DDS received it as the timestamp, so ``ros2 bag play``, ``rosbags`` and the sim-to-real
tools read the bag like any other. The bag is finalised (metadata.yaml written) on Ctrl-C / SIGTERM.

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


def _topics(value: Any) -> str | None:
    if not isinstance(value, str):
        return "must be a string"
    for item in filter(None, (t.strip() for t in value.split(","))):
        name, _, msgtype = item.partition(":")
        if not name.startswith("/") or (msgtype and msgtype.count("/") != 2):
            return "must be comma-separated /topic or /topic:pkg/msg/Type entries"
    return None


QUEUE = 100  # messages per topic held for the writer: a loaded machine can stall it for seconds

PARAMS = [
    Param("output", "", "bag directory to create (must not exist); empty: runs/bags/<time>", lambda v: None),
    Param("topics", ",".join(DEFAULT_TOPICS), "comma-separated /topic[:pkg/msg/Type] to record", _topics),
    Param("storage", "sqlite3", "rosbag2 storage: sqlite3 or mcap", non_empty),
    qos.qos_param("sensor_qos", "sensor_data", "sensor topics in (sensor_msgs/*, nav_msgs/Odometry)"),
    qos.qos_param("qos", "reliable", "the other topics in"),
]


def parse_topics(text: str) -> dict[str, str]:
    out = {}
    for item in filter(None, (t.strip() for t in text.split(","))):
        name, _, msgtype = item.partition(":")
        if not msgtype:
            if name not in DEFAULT_TOPICS:
                raise ParameterError(f"topic {name!r} has no known type; give it as {name}:pkg/msg/Type")
            msgtype = DEFAULT_TOPICS[name]
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
        topics = parse_topics(p["topics"])
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
