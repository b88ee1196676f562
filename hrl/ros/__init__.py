"""ROS 2 deployment: thin rclpy nodes around pure-Python cores (``hrl.ros.core``), so the same policy and
planners that run in simulation drive a robot that speaks the standard topics (/cmd_vel, /odom, /scan).

``core`` needs no ROS installation; the node modules import ``rclpy`` (extra ``ros``)."""
