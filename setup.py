"""For colcon (ament_python): installs the ROS package files beside the Python package described in
pyproject.toml. pip does not need this file."""

from glob import glob

from setuptools import setup

setup(
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/hrl_stack"]),
        ("share/hrl_stack", ["package.xml"]),
        ("share/hrl_stack/launch", glob("launch/*.launch.py")),
        ("share/hrl_stack/launch/params", glob("launch/params/*.yaml")),
    ],
)
