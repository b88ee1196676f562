"""The policy node and the planner node for a real base that publishes /odom and /scan and takes
/cmd_vel: `ros2 launch hrl_stack rover_real.launch.py map:=apartment`.

Without a ROS install: `hrl-deploy graph=real` (docs/ros.md).
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
            "map", default_value="apartment", description="map of the robot's surroundings (odom frame = map frame)"
        ),
        DeclareLaunchArgument(
            "planner", default_value="graph", description="graph | sorb | llm_goals | llm_route | flat | random"
        ),
        DeclareLaunchArgument("policy", default_value="shipped:rover_local", description="low-level policy"),
        DeclareLaunchArgument("max_linear", default_value="0.0", description="speed limit (m/s); 0: the robot spec's"),
        DeclareLaunchArgument(
            "max_angular", default_value="0.0", description="turn-rate limit (rad/s); 0: the robot spec's"
        ),
        DeclareLaunchArgument(
            "thread_priority",
            default_value="0",
            description="SCHED_FIFO priority of the policy node's threads (0: normal scheduling; 50, as ros2_control's "
            "controller manager, keeps the control loop on time beside other load; needs rtprio)",
        ),
    ]
    return LaunchDescription(
        [
            *args,
            Node(
                package="hrl_stack",
                executable="hrl_policy_node",
                name="policy_node",
                parameters=[
                    os.path.join(params, "policy_node.yaml"),
                    {
                        "policy": LaunchConfiguration("policy"),
                        "max_linear": LaunchConfiguration("max_linear"),
                        "max_angular": LaunchConfiguration("max_angular"),
                        "thread_priority": LaunchConfiguration("thread_priority"),
                    },
                ],
                output="screen",
            ),
            Node(
                package="hrl_stack",
                executable="hrl_planner_node",
                name="planner_node",
                parameters=[
                    os.path.join(params, "planner_node.yaml"),
                    {"map": LaunchConfiguration("map"), "planner": LaunchConfiguration("planner")},
                ],
                output="screen",
            ),
        ]
    )
