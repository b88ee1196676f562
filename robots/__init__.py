"""Robot descriptions (MJCF, later URDF) and their specs: limits, lidar, ROS topics and frames."""

from robots.spec import LidarSpec, RobotSpec, RosInterface, VelocityLimits, available_robots, load_robot

__all__ = ["LidarSpec", "RobotSpec", "RosInterface", "VelocityLimits", "available_robots", "load_robot"]
