"""The simulation of both embodiments, each in MuJoCo and PyBullet: ``sim.navigation`` (the rover: maps, task,
backends, ``hrl/RoverNav-v0``) and ``sim.tabletop`` (the Panda: scenes, backends, ``hrl/PandaTabletop-v0``); what
they share here: the sim-to-real wrappers (``sim.wrappers``) and the env registration (``sim.registration``).
The data sit beside them: ``sim/maps/`` (the rover's maps) and ``sim/scenes/`` (the tabletop's scenes).

Importing ``sim`` registers the Gymnasium environments (``hrl/RoverNav-v0``, ``hrl/PandaTabletop-v0``).
"""

from __future__ import annotations

import os

# Headless by default: MuJoCo picks its OpenGL platform when it is first imported. Without a display,
# EGL (Mesa's software renderer on a CPU-only machine) renders offscreen; set MUJOCO_GL yourself
# (glfw, egl or osmesa) to choose otherwise.
if "MUJOCO_GL" not in os.environ and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
    os.environ["MUJOCO_GL"] = "egl"

from sim.navigation.world import World, available_maps, load_world
from sim.registration import register_envs

register_envs()

__all__ = ["World", "available_maps", "load_world", "register_envs"]
