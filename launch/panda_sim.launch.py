"""The simulated Panda over the tabletop, the arm policy node and the arm planner node:
`ros2 launch hrl_stack panda_sim.launch.py scene:=blocks planner:=symbolic`.

Without a ROS install (no `launch` on PyPI): `hrl-deploy graph=arm_sim` starts the same nodes from the same
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
            "scene", default_value="blocks", description="tabletop scene (sim/scenes) of the simulation and the nodes"
        ),
        DeclareLaunchArgument(
            "backend", default_value="mujoco", description="physics of the simulated arm: mujoco | pybullet"
        ),
        DeclareLaunchArgument("layout_seed", default_value="0", description="seed of the scene's object layout"),
        DeclareLaunchArgument(
            "command_interface",
            default_value="trajectory",
            description="arm commands: trajectory | twist | action (control_msgs goals)",
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
                executable="hrl_sim_arm_node",
                name="sim_arm_node",
                parameters=[
                    os.path.join(params, "sim_arm_node.yaml"),
                    {
                        "scene": LaunchConfiguration("scene"),
                        "backend": LaunchConfiguration("backend"),
                        "layout_seed": LaunchConfiguration("layout_seed"),
                    },
                ],
                output="screen",
            ),
            Node(
                package="hrl_stack",
                executable="hrl_arm_policy_node",
                name="arm_policy_node",
                parameters=[
                    os.path.join(params, "arm_policy_node.yaml"),
                    {
                        "scene": LaunchConfiguration("scene"),
                        "command_interface": LaunchConfiguration("command_interface"),
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
