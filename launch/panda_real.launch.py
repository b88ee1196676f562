"""The arm policy node and the arm planner node for a real arm under ros2_control (a joint trajectory
controller or a servo node, a gripper forward command controller, /joint_states, and a perception node
publishing /objects/<name>/pose in the world frame): `ros2 launch hrl_stack panda_real.launch.py scene:=blocks`.

Without a ROS install: `hrl-deploy graph=arm_real` (docs/ros.md).
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription


def generate_launch_description():
    share = get_package_share_directory("hrl_stack")
    params = os.path.join(share, "launch", "params")
    args = [
        DeclareLaunchArgument(
            "scene", default_value="blocks", description="tabletop scene (sim/scenes) the arm works in: objects, places"
        ),
        DeclareLaunchArgument(
            "command_interface",
            default_value="trajectory",
            description="trajectory: a joint trajectory controller | twist: a servo node (MoveIt Servo style) | "
            "action: the controllers' control_msgs actions (FollowJointTrajectory, GripperCommand)",
        ),
        DeclareLaunchArgument(
            "thread_priority",
            default_value="0",
            description="SCHED_FIFO priority of the arm policy node's threads (0: normal scheduling; 50, as "
            "ros2_control's controller manager, keeps the 100 Hz loop on time beside other load; needs rtprio)",
        ),
        DeclareLaunchArgument(
            "planner",
            default_value="symbolic",
            description="tabletop planner: symbolic | llm_goals | saycan | flat | vla | vlm_http",
        ),
    ]
    return LaunchDescription(
        [
            *args,
            Node(
                package="hrl_stack",
                executable="hrl_arm_policy_node",
                name="arm_policy_node",
                parameters=[
                    os.path.join(params, "arm_policy_node.yaml"),
                    {
                        "scene": LaunchConfiguration("scene"),
                        "command_interface": LaunchConfiguration("command_interface"),
                        "thread_priority": LaunchConfiguration("thread_priority"),
                    },
                ],
                output="screen",
            ),
            Node(
                package="hrl_stack",
                executable="hrl_arm_planner_node",
                name="arm_planner_node",
                parameters=[
                    os.path.join(params, "arm_planner_node.yaml"),
                    {"scene": LaunchConfiguration("scene"), "planner": LaunchConfiguration("planner")},
                ],
                output="screen",
            ),
        ]
    )
