"""Low-level goal-conditioned policies: training, evaluation, the hierarchical executor, ROS 2 nodes, deployment."""

#: The low-level policy every command uses unless told otherwise (hrl/policies/<name>/). rover_local_dr
#: (trained with domain randomization) is better on single local goals and transfers as well, but touches
#: door frames when chaining waypoints (92 % vs 100 % on maze_long), so the default stays rover_local
#: (docs/sim2real.md, benchmarks/RESULTS.md).
DEFAULT_POLICY = "shipped:rover_local"
