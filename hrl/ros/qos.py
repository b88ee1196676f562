"""Quality of service for the ROS layer, in one place: named profiles, a parameter check, and the
incompatible-QoS warnings.

Every topic's QoS is a declared node parameter naming one of :data:`PROFILES` (``scan_qos:=sensor_data``).
Sensor topics default to ``sensor_data`` (best effort): a best-effort subscription matches both reliable
and best-effort publishers (REP 2003), while a reliable one cannot hear a best-effort lidar driver at all.
DDS drops an incompatible pair silently, so every subscription and publisher made here also gets rclpy's
incompatible-QoS event callback, which logs a warning naming the topic, the mismatched policy and the
parameter to set.

Importing this module needs no ROS (nodes list their ``Param`` s at import time); rclpy is imported when a
profile is built.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hrl.ros.params import Param

PROFILES: dict[str, str] = {
    "sensor_data": "best effort, keep last 5, volatile (rclpy's qos_profile_sensor_data): hears reliable and "
    "best-effort publishers alike; for sensor streams where only the latest message matters",
    "reliable": "reliable, keep last 10, volatile: for commands, subgoals and status, where a lost message "
    "matters; cannot hear a best-effort publisher",
    "latched": "reliable, keep last 1, transient local: a late subscriber still gets the last message "
    "(a plan, a map); a volatile publisher cannot serve it",
}


def qos_name(value: Any) -> str | None:
    """``Param`` check: ``value`` names one of :data:`PROFILES`."""
    return None if value in PROFILES else f"must be one of {', '.join(PROFILES)}"


def qos_param(name: str, default: str, what: str) -> Param:
    """The declared parameter choosing the QoS of one topic (``what`` says which, e.g. '/scan in')."""
    if default not in PROFILES:
        raise ValueError(f"QoS parameter {name!r}: default {default!r} is not one of {', '.join(PROFILES)}")
    return Param(name, default, f"QoS of {what}: {' | '.join(PROFILES)}", qos_name)


def profile(name: str) -> Any:
    """The rclpy ``QoSProfile`` called ``name`` in :data:`PROFILES`."""
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data

    if name == "sensor_data":
        return qos_profile_sensor_data
    if name == "reliable":
        return QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)
    if name == "latched":
        return QoSProfile(
            depth=1,
            history=HistoryPolicy.KEEP_LAST,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL,
        )
    raise ValueError(f"unknown QoS profile {name!r}; known: {', '.join(PROFILES)}")


def incompatible_message(side: str, topic: str, profile_name: str, param: str, policy: str) -> str:
    """The warning for an incompatible peer: what happened, and which parameter to set to what.

    Args:
        side: ``"subscription"`` (a publisher offers less than this node requests) or ``"publisher"``
            (a subscriber requests more than this node offers).
        topic: the topic name.
        profile_name: this node's profile for the topic (a key of :data:`PROFILES`).
        param: the parameter that sets it.
        policy: the mismatched QoS policy's name (``RELIABILITY``, ``DURABILITY``, ...).
    """
    if side == "subscription":
        head = (
            f"{topic}: a publisher's QoS is incompatible with this subscription ({param}={profile_name}; "
            f"policy {policy}): none of its messages will arrive"
        )
        fixes = {
            "RELIABILITY": f"the publisher is best effort (a typical sensor driver): set {param}:=sensor_data, "
            "which hears both kinds",
            "DURABILITY": f"the publisher is volatile: set {param}:=reliable or sensor_data",
        }
    elif side == "publisher":
        head = (
            f"{topic}: a subscriber's QoS is incompatible with this publisher ({param}={profile_name}; "
            f"policy {policy}): it gets none of these messages"
        )
        fixes = {
            "RELIABILITY": f"the subscriber requires reliable delivery: set {param}:=reliable here, "
            "or make that subscriber best effort",
            "DURABILITY": f"the subscriber requires transient local (latched) data: set {param}:=latched here, "
            "or make that subscriber volatile",
        }
    else:
        raise ValueError(f"side must be 'subscription' or 'publisher', got {side!r}")
    return f"{head}; {fixes.get(policy, f'make the two ends agree on {policy}')}"


def _warner(node: Any, side: str, topic: str, profile_name: str, param: str) -> Callable[[Any], None]:
    from rclpy.qos import qos_policy_name_from_kind

    def warn(info: Any) -> None:
        policy = qos_policy_name_from_kind(info.last_policy_kind)
        node.get_logger().warning(incompatible_message(side, topic, profile_name, param, policy))

    return warn


def subscribe(
    node: Any,
    msg_type: Any,
    topic: str,
    callback: Callable,
    profile_name: str,
    param: str,
    depth: int | None = None,
    **kwargs: Any,
) -> Any:
    """``node.create_subscription`` with the named profile and a warning for incompatible publishers
    (``depth``: a longer queue than the profile's, e.g. for a recorder; ``kwargs``: more of its arguments,
    e.g. ``raw=True``)."""
    import copy

    from rclpy.event_handler import SubscriptionEventCallbacks

    qos = profile(profile_name)
    if depth is not None:
        qos = copy.copy(qos)  # the named profiles are shared objects
        qos.depth = depth
    events = SubscriptionEventCallbacks(incompatible_qos=_warner(node, "subscription", topic, profile_name, param))
    return node.create_subscription(msg_type, topic, callback, qos, event_callbacks=events, **kwargs)


def advertise(node: Any, msg_type: Any, topic: str, profile_name: str, param: str) -> Any:
    """``node.create_publisher`` with the named profile and a warning for incompatible subscribers."""
    from rclpy.event_handler import PublisherEventCallbacks

    events = PublisherEventCallbacks(incompatible_qos=_warner(node, "publisher", topic, profile_name, param))
    return node.create_publisher(msg_type, topic, profile(profile_name), event_callbacks=events)
