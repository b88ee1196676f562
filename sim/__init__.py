"""Simulated worlds for the rover: map files, sim-agnostic task logic, MuJoCo (and later PyBullet) backends.

Importing ``sim`` registers the Gymnasium environments (``hrl/RoverNav-v0``).
"""

from __future__ import annotations

import os

# Headless by default: MuJoCo picks its OpenGL platform when it is first imported. Without a display,
# EGL (Mesa's software renderer on a CPU-only machine) renders offscreen; set MUJOCO_GL yourself
# (glfw, egl or osmesa) to choose otherwise.
if "MUJOCO_GL" not in os.environ and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
    os.environ["MUJOCO_GL"] = "egl"

from sim.registration import register_envs
from sim.world import World, available_maps, load_world

register_envs()

__all__ = ["World", "available_maps", "load_world", "register_envs"]
