"""The simulated rover, the policy node and the planner node: `ros2 launch hrl_stack rover_sim.launch.py`.

Without a ROS install (no `launch` on PyPI): `hrl-deploy graph=sim` starts the same nodes from the same
params files (docs/ros.md).
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
            "map", default_value="apartment", description="map of the simulated world and the planner"
        ),
        DeclareLaunchArgument("start", default_value="dock", description="named start of the map, or 'x,y,yaw'"),
        DeclareLaunchArgument(
            "planner", default_value="graph", description="graph | sorb | llm_goals | llm_route | flat | random"
        ),
        DeclareLaunchArgument("policy", default_value="shipped:rover_local", description="low-level policy"),
        DeclareLaunchArgument("control_hz", default_value="20.0", description="policy node control rate (Hz)"),
    ]
    return LaunchDescription(
        [
            *args,
            Node(
                package="hrl_stack",
                executable="hrl_sim_robot_node",
                name="sim_robot_node",
                parameters=[
                    os.path.join(params, "sim_robot_node.yaml"),
                    {"map": LaunchConfiguration("map"), "start": LaunchConfiguration("start")},
                ],
                output="screen",
            ),
            Node(
                package="hrl_stack",
                executable="hrl_policy_node",
                name="policy_node",
                parameters=[
                    os.path.join(params, "policy_node.yaml"),
                    {"policy": LaunchConfiguration("policy"), "control_hz": LaunchConfiguration("control_hz")},
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
