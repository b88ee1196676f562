"""Low-level goal-conditioned policies, their evaluation, and (later) the hierarchical executor and ROS 2 nodes."""
