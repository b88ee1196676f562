"""MuJoCo backend of the rover worlds: model composition (builder) and the physics interface."""
