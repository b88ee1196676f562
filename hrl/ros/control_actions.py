"""control_msgs' arm actions (``FollowJointTrajectory``, ``GripperCommand``): where they come from, whether a node
serves or sends them, and the tolerance rules of a trajectory goal.

control_msgs is not on PyPI. A sourced ROS 2 install has it; without one, ``scripts/build_control_msgs.sh`` builds
the two actions (the upstream field layout: the same type names and hashes on the wire) into the venv. Nodes take
a parameter ``action_interfaces``: ``auto`` (serve the actions when control_msgs imports, say in the log which),
``always`` (stop with the fix when it does not) or ``never``.

The tolerance rules are those of ros2_controllers' joint trajectory controller, as control_msgs documents them:
a tolerance of 0 means the server's default, -1 no limit, any other value the limit itself. Importing this module
needs no ROS.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

ACTION_INTERFACES = ("auto", "always", "never")
BUILD_HINT = (
    "source a ROS 2 install that has control_msgs, or build its actions into the venv: "
    "bash scripts/build_control_msgs.sh .venv/bin/python ~/.cache/hrl-stack/control_msgs"
)

# FollowJointTrajectory.Result error codes (control_msgs/action/FollowJointTrajectory.action), here so that
# ROS-free code can name them.
SUCCESSFUL, INVALID_GOAL, INVALID_JOINTS, OLD_HEADER_TIMESTAMP, PATH_TOLERANCE_VIOLATED, GOAL_TOLERANCE_VIOLATED = (
    0,
    -1,
    -2,
    -3,
    -4,
    -5,
)


def import_actions() -> tuple[Any, Any]:
    """``(FollowJointTrajectory, GripperCommand)`` from control_msgs; ImportError saying how to get them."""
    try:
        from control_msgs.action import FollowJointTrajectory, GripperCommand
    except ImportError as err:
        raise ImportError(f"control_msgs' actions are not importable ({err}): {BUILD_HINT}") from None
    return FollowJointTrajectory, GripperCommand


def action_interfaces_setting(value: Any) -> str | None:
    """``Param`` check of ``action_interfaces``."""
    return None if value in ACTION_INTERFACES else f"must be one of {', '.join(ACTION_INTERFACES)}"


def resolve_action_interfaces(setting: str) -> tuple[bool, str]:
    """Whether to serve the actions under ``setting`` (``auto``/``always``/``never``) and the log line saying why;
    ``always`` without control_msgs is a ValueError naming the fix."""
    if setting == "never":
        return False, "action interfaces off (action_interfaces=never)"
    try:
        import_actions()
    except ImportError as err:
        if setting == "always":
            raise ValueError(f"action_interfaces=always: {err}") from None
        return False, f"action interfaces off (action_interfaces=auto): {err}"
    import control_msgs

    return True, f"action interfaces on (control_msgs from {control_msgs.__path__[0]})"


class GoalError(ValueError):
    """A trajectory (goal) the arm refuses; ``code`` is its FollowJointTrajectory error code."""

    code = INVALID_GOAL

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


def limits(joints: Sequence[str], tolerances: Iterable[tuple[str, float]], default: float, what: str) -> np.ndarray:
    """Per joint of ``joints`` the position limit (rad or m; ``inf``: none) from a goal's ``(name, position)``
    tolerances: 0 or absent -> ``default``, -1 -> none, > 0 -> itself. :class:`GoalError` for an unknown joint
    (INVALID_JOINTS) or another value (INVALID_GOAL)."""
    out = np.full(len(joints), float(default))
    for name, value in tolerances:
        if name not in joints:
            raise GoalError(f"{what} names joint {name!r}; this arm's joints: {', '.join(joints)}", INVALID_JOINTS)
        if not math.isfinite(value) or (value < 0 and value != -1):
            raise GoalError(f"{what} of {name} = {value}: must be > 0, 0 (the default) or -1 (none)")
        if value != 0:
            out[joints.index(name)] = math.inf if value == -1 else value
    return out


def violation(joints: Sequence[str], error: np.ndarray, limit: np.ndarray, what: str) -> str | None:
    """The first joint whose ``|error|`` exceeds its ``limit``, as a sentence; None when all are within."""
    over = np.abs(error) > limit
    if not over.any():
        return None
    i = int(np.argmax(over))
    return f"{joints[i]} is {abs(float(error[i])):.4f} off the trajectory, beyond its {what} {float(limit[i]):.4f}"


@dataclass
class GoalTolerances:
    """A trajectory goal's tolerances resolved against the server's defaults: per joint ``path`` and ``goal``
    position limits (``inf``: none) and ``goal_time`` (s after the trajectory's end the joints may take to settle
    within ``goal``; ``inf``: no limit)."""

    path: np.ndarray
    goal: np.ndarray
    goal_time: float

    @classmethod
    def resolve(
        cls,
        joints: Sequence[str],
        path: Iterable[tuple[str, float]],
        goal: Iterable[tuple[str, float]],
        goal_time: float,
        default_goal: float,
        default_goal_time: float,
    ) -> GoalTolerances:
        """From a goal's tolerances (``(name, position)`` pairs, ``goal_time`` in s, 0 = the defaults; there is no
        default path tolerance, as in ros2_controllers)."""
        if not math.isfinite(goal_time) or goal_time < 0:
            raise GoalError(f"goal_time_tolerance {goal_time} s must be >= 0 (0: the server's default)")
        return cls(
            limits(joints, path, math.inf, "path_tolerance"),
            limits(joints, goal, default_goal, "goal_tolerance"),
            goal_time or default_goal_time,
        )


#: The names of FollowJointTrajectory's error codes, for the log.
ERROR_NAMES = {
    SUCCESSFUL: "SUCCESSFUL",
    INVALID_GOAL: "INVALID_GOAL",
    INVALID_JOINTS: "INVALID_JOINTS",
    OLD_HEADER_TIMESTAMP: "OLD_HEADER_TIMESTAMP",
    PATH_TOLERANCE_VIOLATED: "PATH_TOLERANCE_VIOLATED",
    GOAL_TOLERANCE_VIOLATED: "GOAL_TOLERANCE_VIOLATED",
}


class ArmActionClients:
    """An arm commanded through control_msgs' actions (``command_interface:=action``): each trajectory a
    ``FollowJointTrajectory`` goal (the controller replaces the goal in force with it, as it does a trajectory on
    its topic), the fingers a ``GripperCommand`` goal whenever their commanded gap changes.

    Goals are sent without waiting (the sender keeps its rate); their ends come back on the node's executor. Only the
    newest goal's end is news (the others were replaced by a newer one): a newest goal that is rejected or ends with
    an error is logged with its error code and string; a server that is not up is logged and nothing is sent.
    ``node``: the rclpy node; the two action names. ImportError naming the fix without control_msgs.
    """

    def __init__(self, node: Any, trajectory_action: str, gripper_action: str) -> None:
        import threading

        from rclpy.action import ActionClient

        self.FollowJointTrajectory, self.GripperCommand = import_actions()
        self.node = node
        self.names = {"trajectory": trajectory_action, "gripper": gripper_action}
        self.clients = {
            "trajectory": ActionClient(node, self.FollowJointTrajectory, trajectory_action),
            "gripper": ActionClient(node, self.GripperCommand, gripper_action),
        }
        self._lock = threading.Lock()
        self._newest = {"trajectory": 0, "gripper": 0}
        self._gap: float | None = None

    def send_trajectory(self, trajectory: Any) -> None:
        """``trajectory`` (trajectory_msgs/JointTrajectory) as a goal, with the server's default tolerances."""
        self._send("trajectory", self.FollowJointTrajectory.Goal(trajectory=trajectory))

    def send_gripper(self, gap: float) -> None:
        """The gap between the fingers (m) as a goal, unless it is the gap last sent."""
        if self._gap is not None and abs(gap - self._gap) < 1e-6:
            return
        self._gap = gap
        goal = self.GripperCommand.Goal()
        goal.command.position = float(gap)
        self._send("gripper", goal)

    def _send(self, kind: str, goal: Any) -> None:
        client, log = self.clients[kind], self.node.get_logger()
        if not client.server_is_ready():
            log.warning(f"no action server on {self.names[kind]} (is the controller running?): goal not sent",
                        throttle_duration_sec=5.0)  # fmt: skip
            if kind == "gripper":
                self._gap = None  # send it again once the server is there
            return
        with self._lock:
            self._newest[kind] += 1
            number = self._newest[kind]
        client.send_goal_async(goal).add_done_callback(lambda f: self._on_response(kind, number, f))

    def _is_newest(self, kind: str, number: int) -> bool:
        with self._lock:
            return self._newest[kind] == number

    def _on_response(self, kind: str, number: int, future: Any) -> None:
        handle = future.result()
        if not handle.accepted:
            if self._is_newest(kind, number):
                self.node.get_logger().error(f"{self.names[kind]} rejected the goal", throttle_duration_sec=5.0)
            return
        handle.get_result_async().add_done_callback(lambda f: self._on_result(kind, number, f))

    def _on_result(self, kind: str, number: int, future: Any) -> None:
        if not self._is_newest(kind, number):
            return
        result = future.result().result
        if kind == "trajectory" and result.error_code != SUCCESSFUL:
            code = ERROR_NAMES.get(result.error_code, str(result.error_code))
            self.node.get_logger().warning(
                f"{self.names[kind]}: the trajectory goal ended {code}: {result.error_string}",
                throttle_duration_sec=5.0,
            )

    def close(self) -> None:
        for client in self.clients.values():
            client.destroy()
        self.clients = {}
