"""The tabletop part of the simulator: scenes (tables, objects, places) and the Panda manipulation env."""
