"""The simulated arm's control_msgs action servers, as ros2_controllers' controllers serve them on a robot.

* ``FollowJointTrajectory`` (``/panda_arm_controller/follow_joint_trajectory``, the joint trajectory controller's):
  the goal's trajectory is followed exactly as one on the controller's topic (``sim_arm_node``: same checks, same
  interpolation, a newer trajectory, twist or goal replaces it). Feedback every control period: the desired
  (interpolated) and actual (measured) positions and their difference. The goal ends

  - ``SUCCESSFUL`` once the trajectory has ended and every joint is within its goal tolerance;
  - aborted with ``GOAL_TOLERANCE_VIOLATED`` when a joint is still outside it ``goal_time`` after the end, with
    ``PATH_TOLERANCE_VIOLATED`` when a joint strays beyond its path tolerance on the way (the arm then holds where
    it is), with ``INVALID_JOINTS`` / ``INVALID_GOAL`` / ``OLD_HEADER_TIMESTAMP`` for a trajectory the topic would
    refuse, and with ``INVALID_GOAL`` "preempted" when a newer command replaces it;
  - cancelled on request: the arm holds where it is measured to be.

  Tolerances follow control_msgs (:mod:`hrl.ros.control_actions`): 0 = the node's default (``goal_tolerance``,
  ``goal_time_s``; no default path tolerance), -1 = none. Every error has an ``error_string`` naming the joint and
  the amounts.
* ``GripperCommand`` (``/panda_hand_controller/gripper_cmd``, the gripper action controller's): ``position`` is the
  gap between the fingers (m), clamped to the hand's range; the goal succeeds with ``reached_goal`` when the gap is
  within ``gripper_tolerance`` of it, or with ``stalled`` when the fingers stopped moving for ``gripper_stall_s``
  short of it (closed on an object: a grasp). ``max_effort`` is not modelled (the simulated fingers squeeze with
  their own force) and ``effort`` reads 0. Cancelled: the fingers stop where they are.

Both run in the node's single-threaded executor: the execute callbacks are coroutines that wait on a future which
:meth:`SimArmActions.update`, called each tick after the control periods were simulated, completes.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hrl.ros.control_actions import (
    GOAL_TOLERANCE_VIOLATED,
    INVALID_GOAL,
    INVALID_JOINTS,
    PATH_TOLERANCE_VIOLATED,
    SUCCESSFUL,
    GoalError,
    GoalTolerances,
    import_actions,
    violation,
)

#: The error string of a trajectory goal replaced by a newer command.
PREEMPTED = "preempted by a newer trajectory, twist or goal"
#: The fingers count as moving while their gap changes by more than this (m) within ``gripper_stall_s``.
FINGER_STILL = 1e-4


@dataclass(eq=False)
class TrajectoryGoal:
    """A FollowJointTrajectory goal handed to the arm: in force from ``takes_effect`` (monotonic clock) until a
    newer command replaces it; its trajectory ends at ``end`` at ``final`` (the arm's joint order)."""

    handle: Any
    future: Any
    tolerances: GoalTolerances
    takes_effect: float
    end: float
    final: np.ndarray
    done: bool = False


@dataclass(eq=False)
class GripperGoal:
    """A GripperCommand goal: the gap ``target`` (m), in force from ``takes_effect``; ``moved`` is when the gap last
    changed by more than :data:`FINGER_STILL` and ``gap`` the gap then."""

    handle: Any
    future: Any
    target: float
    takes_effect: float
    moved: float
    gap: float
    done: bool = False


@dataclass
class SimArmActions:
    """The two action servers of ``node`` (a :class:`hrl.ros.sim_arm_node.SimArmNode`)."""

    node: Any
    trajectory_action: str
    gripper_action: str
    goal_tolerance: float
    goal_time_s: float
    gripper_tolerance: float
    gripper_stall_s: float
    trajectory_goals: list[TrajectoryGoal] = field(default_factory=list)
    gripper_goals: list[GripperGoal] = field(default_factory=list)

    def __post_init__(self) -> None:
        from rclpy.action import ActionServer, CancelResponse

        self.FollowJointTrajectory, self.GripperCommand = import_actions()
        accept_cancel = lambda _handle: CancelResponse.ACCEPT  # noqa: E731
        self.servers = [
            ActionServer(self.node, self.FollowJointTrajectory, self.trajectory_action, self._execute_trajectory,
                         cancel_callback=accept_cancel),
            ActionServer(self.node, self.GripperCommand, self.gripper_action, self._execute_gripper,
                         cancel_callback=accept_cancel),
        ]  # fmt: skip

    # ---- FollowJointTrajectory ------------------------------------------------------------------------
    async def _execute_trajectory(self, handle: Any) -> Any:
        from rclpy.task import Future

        node, request, received = self.node, handle.request, time.monotonic()
        try:
            multi = request.multi_dof_trajectory
            if multi.joint_names or multi.points:
                raise GoalError(f"multi_dof_trajectory names {list(multi.joint_names)}: this arm has no multi-DOF "
                                "joints (send them in trajectory)", INVALID_JOINTS)  # fmt: skip
            if request.component_path_tolerance or request.component_goal_tolerance:
                raise GoalError("component tolerances are for multi-DOF joints; this arm has none")
            start, times, positions = node.plan_trajectory(request.trajectory, received)
            tolerances = GoalTolerances.resolve(
                node.arm_joints,
                [(t.name, t.position) for t in request.path_tolerance],
                [(t.name, t.position) for t in request.goal_tolerance],
                request.goal_time_tolerance.sec + request.goal_time_tolerance.nanosec * 1e-9,
                self.goal_tolerance,
                self.goal_time_s,
            )
        except GoalError as err:  # the node's CommandError too: JointNamesError is INVALID_JOINTS, ...
            node.refuse("FollowJointTrajectory goal", str(err))
            handle.abort()
            return self.FollowJointTrajectory.Result(error_code=err.code, error_string=str(err))
        goal = TrajectoryGoal(handle, Future(), tolerances, received + node.p["latency_s"], start + times[-1],
                              positions[-1])  # fmt: skip
        self.trajectory_goals.append(goal)
        node.command(received, "trajectory", (start, times, positions), goal)
        return await goal.future

    def _finish_trajectory(self, goal: TrajectoryGoal, how: str, code: int, text: str) -> None:
        """End ``goal`` (``how``: succeed, abort or canceled) with ``code`` and ``text``; failures are logged as
        warnings, a preempted goal (a stream of them is how a controller is driven) not at all."""
        goal.done = True
        self.trajectory_goals.remove(goal)
        getattr(goal.handle, how)()
        goal.future.set_result(self.FollowJointTrajectory.Result(error_code=code, error_string=text))
        log = self.node.get_logger()
        if how == "succeed":
            log.info("FollowJointTrajectory goal succeeded")
        elif how == "canceled":
            log.info(f"FollowJointTrajectory goal {text}")
        elif text != PREEMPTED:
            log.warning(f"FollowJointTrajectory goal aborted: {text} (error_code {code})")

    def _update_trajectory(self, goal: TrajectoryGoal, t: float) -> None:
        node = self.node
        in_force = node.trajectory_goal is goal
        if goal.handle.is_cancel_requested:
            if in_force:
                node.hold_here()
            return self._finish_trajectory(goal, "canceled", SUCCESSFUL, "cancelled: the arm holds where it is")
        if not in_force:
            if t >= goal.takes_effect:  # it took effect and a newer command replaced it
                self._finish_trajectory(goal, "abort", INVALID_GOAL, PREEMPTED)
            return
        actual, velocity = node.physics.joints()
        desired = node.q_target
        goal.handle.publish_feedback(self._feedback(desired, actual, velocity))
        if t < goal.end:
            strayed = violation(node.arm_joints, desired - actual, goal.tolerances.path, "path tolerance")
            if strayed:
                node.hold_here()
                self._finish_trajectory(goal, "abort", PATH_TOLERANCE_VIOLATED, f"{strayed}; the arm holds there")
            return
        off = violation(node.arm_joints, goal.final - actual, goal.tolerances.goal, "goal tolerance")
        if off is None:
            self._finish_trajectory(goal, "succeed", SUCCESSFUL, "")
        elif t - goal.end > goal.tolerances.goal_time:
            node.hold_here()
            self._finish_trajectory(
                goal, "abort", GOAL_TOLERANCE_VIOLATED,
                f"{goal.tolerances.goal_time:g} s after the trajectory's end {off}; the arm holds there",
            )  # fmt: skip

    def _feedback(self, desired: np.ndarray, actual: np.ndarray, velocity: np.ndarray) -> Any:
        feedback = self.FollowJointTrajectory.Feedback()
        feedback.header.stamp = self.node.get_clock().now().to_msg()
        feedback.joint_names = list(self.node.arm_joints)
        for point, positions in ((feedback.desired, desired), (feedback.actual, actual),
                                 (feedback.error, desired - actual)):  # fmt: skip
            point.positions = [float(x) for x in positions]
        feedback.actual.velocities = [float(x) for x in velocity]
        return feedback

    # ---- GripperCommand -------------------------------------------------------------------------------
    async def _execute_gripper(self, handle: Any) -> Any:
        from rclpy.task import Future

        node, received = self.node, time.monotonic()
        gap = node.physics.finger_width()
        wanted = float(handle.request.command.position)
        if not math.isfinite(wanted):
            node.refuse("GripperCommand goal", f"position {wanted} must be a finite gap between the fingers (m)")
            handle.abort()
            return self._gripper_result(gap, stalled=False, reached=False)
        most = 2 * node.max_finger
        target = min(max(wanted, 0.0), most)
        if target != wanted:
            node.get_logger().warning(f"GripperCommand position {wanted} m beyond the hand's 0..{most} m: {target}")
        goal = GripperGoal(handle, Future(), target, received + node.p["latency_s"], received, gap)
        self.gripper_goals.append(goal)
        node.command(received, "gripper", target, goal)
        return await goal.future

    def _gripper_result(self, gap: float, *, stalled: bool, reached: bool, feedback: bool = False) -> Any:
        kind = self.GripperCommand.Feedback if feedback else self.GripperCommand.Result
        return kind(position=float(gap), effort=0.0, stalled=stalled, reached_goal=reached)

    def _finish_gripper(self, goal: GripperGoal, how: str, gap: float, stalled: bool, reached: bool) -> None:
        goal.done = True
        self.gripper_goals.remove(goal)
        getattr(goal.handle, how)()
        goal.future.set_result(self._gripper_result(gap, stalled=stalled, reached=reached))

    def _update_gripper(self, goal: GripperGoal, t: float) -> None:
        node = self.node
        gap = node.physics.finger_width()
        in_force = node.gripper_goal is goal
        if goal.handle.is_cancel_requested:
            if in_force:
                node.hold_fingers_here()
            return self._finish_gripper(goal, "canceled", gap, stalled=False, reached=False)
        if not in_force:
            if t >= goal.takes_effect:  # replaced by a newer gripper command
                self._finish_gripper(goal, "abort", gap, stalled=False, reached=False)
            return
        if abs(gap - goal.gap) > FINGER_STILL:
            goal.moved, goal.gap = t, gap
        reached = abs(gap - goal.target) <= self.gripper_tolerance
        stalled = not reached and t - max(goal.moved, goal.takes_effect) > self.gripper_stall_s
        goal.handle.publish_feedback(self._gripper_result(gap, stalled=stalled, reached=reached, feedback=True))
        if reached or stalled:
            self._finish_gripper(goal, "succeed", gap, stalled=stalled, reached=reached)

    # ---- each tick ------------------------------------------------------------------------------------
    def update(self, t: float) -> None:
        """Feedback and ends of the goals, after the control periods up to ``t`` (monotonic clock) were simulated."""
        for goal in list(self.trajectory_goals):
            self._update_trajectory(goal, t)
        for goal in list(self.gripper_goals):
            self._update_gripper(goal, t)
