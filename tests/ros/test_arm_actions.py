"""control_msgs' arm actions: the tolerance rules (no ROS), then over real DDS in separate processes the simulated
arm's FollowJointTrajectory and GripperCommand servers (an action client in the test drives the arm to a joint
target and gets SUCCESSFUL; bad joint names get INVALID_JOINTS; a path tolerance the arm cannot keep aborts and
holds; a cancelled goal holds the arm where it was) and arm_policy_node with command_interface:=action reaching a
TCP goal through them. The DDS tests need control_msgs (a ROS 2 install, or scripts/build_control_msgs.sh)."""

import json
import math
import time

import numpy as np
import pytest

from hrl.ros.control_actions import (
    INVALID_GOAL,
    INVALID_JOINTS,
    GoalError,
    GoalTolerances,
    import_actions,
    resolve_action_interfaces,
    violation,
)
from tests.ros.conftest import spin_until
from tests.ros.test_sim_arm_node import ArmView

JOINTS = [f"panda_joint{i}" for i in range(1, 8)]
TRAJECTORY_ACTION = "/panda_arm_controller/follow_joint_trajectory"
GRIPPER_ACTION = "/panda_hand_controller/gripper_cmd"

try:
    import_actions()
    NO_CONTROL_MSGS = ""
except ImportError as err:
    NO_CONTROL_MSGS = str(err)
needs_control_msgs = pytest.mark.skipif(bool(NO_CONTROL_MSGS), reason=NO_CONTROL_MSGS)


# ---- the rules, no ROS -----------------------------------------------------------------------------------
def test_tolerances_follow_control_msgs_zero_default_minus_one_none():
    tol = GoalTolerances.resolve(
        JOINTS, [("panda_joint2", 0.1)], [("panda_joint1", -1.0), ("panda_joint3", 0.0)], 0.0, 0.02, 1.5
    )
    assert tol.path[1] == 0.1 and np.isinf(np.delete(tol.path, 1)).all()  # no default path tolerance
    assert math.isinf(tol.goal[0]) and tol.goal[2] == 0.02 and tol.goal[6] == 0.02
    assert tol.goal_time == 1.5
    assert GoalTolerances.resolve(JOINTS, [], [], 0.25, 0.02, 1.5).goal_time == 0.25
    with pytest.raises(GoalError, match="panda_joint9") as err:
        GoalTolerances.resolve(JOINTS, [("panda_joint9", 0.1)], [], 0.0, 0.02, 1.0)
    assert err.value.code == INVALID_JOINTS
    with pytest.raises(GoalError, match=r"-0\.5") as err:
        GoalTolerances.resolve(JOINTS, [], [("panda_joint1", -0.5)], 0.0, 0.02, 1.0)
    assert err.value.code == INVALID_GOAL
    with pytest.raises(GoalError, match="goal_time_tolerance"):
        GoalTolerances.resolve(JOINTS, [], [], math.nan, 0.02, 1.0)


def test_a_violation_names_the_joint_and_the_amounts():
    limit = np.array([0.1, math.inf, 0.1])
    assert violation(["a", "b", "c"], np.array([0.05, 9.0, -0.09]), limit, "path tolerance") is None
    said = violation(["a", "b", "c"], np.array([0.05, 9.0, -0.3]), limit, "path tolerance")
    assert said == "c is 0.3000 off the trajectory, beyond its path tolerance 0.1000"


def test_action_interfaces_setting():
    assert resolve_action_interfaces("never") == (False, "action interfaces off (action_interfaces=never)")
    serve, said = resolve_action_interfaces("auto")
    assert serve == (not NO_CONTROL_MSGS) and ("on (control_msgs from" in said if serve else "scripts/build" in said)
    if NO_CONTROL_MSGS:
        with pytest.raises(ValueError, match=r"build_control_msgs\.sh"):
            resolve_action_interfaces("always")


#: RIHS01 type hashes of the two actions in a colcon build of control_msgs itself (its generated
#: ``*__description.c``): the hash covers every field's name and type, so equal hashes mean the same types on the wire.
UPSTREAM_HASHES = {
    "FollowJointTrajectory": "RIHS01_738ebcb7a2d7cfa42f9f1001cc99ce3a4383d1cfe508015d9be8485e4b1c66f6",
    "GripperCommand": "RIHS01_e17c0e644eccf14bea84a0a93e0977182872c2eb7873ca6694900059b46dbc84",
}


@needs_control_msgs
def test_the_actions_are_control_msgs_own_types():
    """Whichever control_msgs imports (a ROS 2 install's, or ros_interfaces/control_msgs built by
    scripts/build_control_msgs.sh) has upstream's type hashes."""
    from pathlib import Path

    import control_msgs

    prefix = Path(control_msgs.__path__[0]).parents[3]  # <prefix>/lib/pythonX.Y/site-packages/control_msgs
    share = prefix / "share" / "control_msgs" / "action"
    for action, expected in UPSTREAM_HASHES.items():
        hashes = json.loads((share / f"{action}.json").read_text())["type_hashes"]
        assert {h["type_name"]: h["hash_string"] for h in hashes}[f"control_msgs/action/{action}"] == expected


# ---- over DDS --------------------------------------------------------------------------------------------
class ArmClient(ArmView):
    """The test's action clients of the simulated arm, and what it hears of it."""

    def __init__(self, node):
        from rclpy.action import ActionClient

        super().__init__(node)
        self.FollowJointTrajectory, self.GripperCommand = import_actions()
        self.trajectory = ActionClient(node, self.FollowJointTrajectory, TRAJECTORY_ACTION)
        self.gripper = ActionClient(node, self.GripperCommand, GRIPPER_ACTION)

    def wait_until_up(self, processes, proc):
        up = lambda: self.joint_states and self.trajectory.server_is_ready() and self.gripper.server_is_ready()  # noqa: E731
        assert spin_until(self.node, up, 90), processes.log(proc)

    def trajectory_goal(self, names, points, path_tolerance=()):
        from builtin_interfaces.msg import Duration
        from control_msgs.msg import JointTolerance
        from trajectory_msgs.msg import JointTrajectoryPoint

        goal = self.FollowJointTrajectory.Goal()
        goal.trajectory.joint_names = list(names)
        for positions, t in points:
            point = JointTrajectoryPoint(positions=[float(v) for v in positions])
            point.time_from_start = Duration(sec=int(t), nanosec=round((t - int(t)) * 1e9))
            goal.trajectory.points.append(point)
        goal.path_tolerance = [JointTolerance(name=n, position=p) for n, p in path_tolerance]
        return goal

    def send(self, client, goal, feedback=None, timeout_s=30.0):
        """The accepted goal's handle."""
        future = client.send_goal_async(goal, feedback_callback=feedback)
        assert spin_until(self.node, future.done, timeout_s)
        handle = future.result()
        assert handle.accepted
        return handle

    def result(self, handle, timeout_s=30.0):
        """(status, result) of the goal."""
        future = handle.get_result_async()
        assert spin_until(self.node, future.done, timeout_s)
        return future.result().status, future.result().result


@needs_control_msgs
def test_follow_joint_trajectory_on_the_simulated_arm(processes, rclpy_node):
    from action_msgs.msg import GoalStatus

    arm = processes.start("hrl.ros.sim_arm_node", "camera_hz:=0.0")
    client = ArmClient(rclpy_node)
    client.wait_until_up(processes, arm)
    types = dict(rclpy_node.get_topic_names_and_types())
    assert types[f"{TRAJECTORY_ACTION}/_action/feedback"] == [
        "control_msgs/action/FollowJointTrajectory_FeedbackMessage"
    ]
    fjt = client.FollowJointTrajectory.Result

    # to a joint target: SUCCESSFUL, with feedback of desired and actual positions on the way
    q0 = client.arm()
    target = q0 + np.array([0.3, -0.2, 0.25, 0.3, -0.3, 0.2, 0.4])
    feedback = []
    handle = client.send(
        client.trajectory,
        client.trajectory_goal(JOINTS, [(q0 + (target - q0) / 2, 0.75), (target, 1.5)]),
        lambda m: feedback.append(m.feedback),
    )
    status, result = client.result(handle)
    assert (status, result.error_code, result.error_string) == (GoalStatus.STATUS_SUCCEEDED, fjt.SUCCESSFUL, "")
    # the joint states show it there (the default goal tolerance). Waited for, not read at once: the result and the
    # joint states travel apart, and a fresh-clone CI run held a state from ~0.6 s before the end when the result
    # came in
    assert spin_until(rclpy_node, lambda: np.allclose(client.arm(), target, atol=0.02), 5), (client.arm(), target)
    assert len(feedback) > 10 and list(feedback[-1].joint_names) == JOINTS
    middle = feedback[len(feedback) // 2]
    desired, actual = np.array(middle.desired.positions), np.array(middle.actual.positions)
    assert np.allclose(np.array(middle.error.positions), desired - actual)
    assert np.abs(desired - q0).max() > 0.05 and np.abs(desired - target).max() > 0.05  # on its way

    # unknown joint names: INVALID_JOINTS naming them; the arm holds
    spin_until(rclpy_node, lambda: False, 1.0)  # settled (success is within the goal tolerance, still converging)
    here = client.arm()
    handle = client.send(client.trajectory, client.trajectory_goal(["panda_joint0", *JOINTS[1:]], [(q0, 1.0)]))
    status, result = client.result(handle)
    assert (status, result.error_code) == (GoalStatus.STATUS_ABORTED, fjt.INVALID_JOINTS), result
    assert "panda_joint0" in result.error_string
    spin_until(rclpy_node, lambda: False, 0.5)
    assert np.allclose(client.arm(), here, atol=0.005)

    # a path tolerance the tracking cannot keep: PATH_TOLERANCE_VIOLATED naming the joint; the arm stops
    tight = client.trajectory_goal(JOINTS, [(q0, 1.0)], path_tolerance=[("panda_joint1", 1e-4)])
    status, result = client.result(client.send(client.trajectory, tight))
    assert (status, result.error_code) == (GoalStatus.STATUS_ABORTED, fjt.PATH_TOLERANCE_VIOLATED), result
    assert result.error_string.startswith("panda_joint1 is ") and "path tolerance 0.0001" in result.error_string
    stopped = client.arm()
    assert np.abs(stopped - q0).max() > 0.1  # stopped on its way back, far from where the trajectory ends

    # cancelled on its way: the arm holds where it was
    slow = client.trajectory_goal(JOINTS, [(q0, 6.0)])
    handle = client.send(client.trajectory, slow)
    spin_until(rclpy_node, lambda: False, 1.0)
    cancelled = handle.cancel_goal_async()
    assert spin_until(rclpy_node, cancelled.done, 10)
    status, result = client.result(handle)
    assert status == GoalStatus.STATUS_CANCELED and "cancelled" in result.error_string
    spin_until(rclpy_node, lambda: False, 0.3)
    held = client.arm()
    assert np.abs(held - stopped).max() > 0.02  # it had moved
    spin_until(rclpy_node, lambda: False, 1.5)
    assert np.allclose(client.arm(), held, atol=0.005)  # and stays
    assert np.abs(held - q0).max() > 0.05  # short of the end


@needs_control_msgs
def test_gripper_command_on_the_simulated_arm(processes, rclpy_node):
    from action_msgs.msg import GoalStatus

    arm = processes.start("hrl.ros.sim_arm_node", "camera_hz:=0.0")
    client = ArmClient(rclpy_node)
    client.wait_until_up(processes, arm)
    goal = client.GripperCommand.Goal()
    goal.command.position = 0.03
    status, result = client.result(client.send(client.gripper, goal))
    assert status == GoalStatus.STATUS_SUCCEEDED and result.reached_goal and not result.stalled
    assert result.position == pytest.approx(0.03, abs=0.002)
    fingers = [v for n, v in client.joints().items() if "finger" in n]
    assert sum(fingers) == pytest.approx(0.03, abs=0.003)
    goal.command.position = math.nan
    status, result = client.result(client.send(client.gripper, goal))
    assert status == GoalStatus.STATUS_ABORTED and not result.reached_goal


@needs_control_msgs
def test_the_action_interface_drives_the_simulated_arm(processes, rclpy_node):
    """command_interface:=action: the policy node reaches a TCP goal through FollowJointTrajectory goals and
    publishes no trajectory on the topic."""
    from geometry_msgs.msg import PoseStamped
    from std_msgs.msg import String
    from trajectory_msgs.msg import JointTrajectory

    processes.start("hrl.ros.sim_arm_node", "scene:=single_cube", "camera_hz:=0.0")
    policy = processes.start("hrl.ros.arm_policy_node", "scene:=single_cube", "command_interface:=action")
    node = rclpy_node
    status, trajectories = [], []
    node.create_subscription(String, "/arm_subgoal_status", lambda m: status.append(json.loads(m.data)), 10)
    node.create_subscription(JointTrajectory, "/panda_arm_controller/joint_trajectory", trajectories.append, 10)
    goal_pub = node.create_publisher(PoseStamped, "/tcp_goal", 10)
    assert spin_until(node, lambda: goal_pub.get_subscription_count() > 0, 90), processes.log(policy)
    time.sleep(1.0)  # the policy node's action clients discover the servers
    goal = PoseStamped()
    goal.header.frame_id = "world"
    goal.pose.position.x, goal.pose.position.y, goal.pose.position.z = 0.1, -0.1, 0.1
    goal_pub.publish(goal)
    assert spin_until(node, lambda: status, 60), processes.log(policy)
    assert status[0]["outcome"] == "reached", (status, processes.log(policy))
    assert not trajectories
    assert "no action server" not in processes.log(policy)
