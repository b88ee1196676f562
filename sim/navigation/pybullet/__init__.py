"""PyBullet backend of the rover worlds: the same rover (robots/rover/rover.urdf), maps and drive model as MuJoCo."""
