"""The navigation part of the simulation (the rover's): maps (``world``), the sim-agnostic task (``task``), the
backend protocol and the shared drive model (``physics``), the MuJoCo and PyBullet backends (``mujoco``,
``pybullet``) and the Gymnasium env ``hrl/RoverNav-v0`` (``env``). Its tabletop sibling is :mod:`sim.tabletop`;
what both share (sim-to-real wrappers, env registration) lives in :mod:`sim` itself.
"""
