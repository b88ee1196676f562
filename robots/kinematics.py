"""Forward kinematics, Jacobian and inverse kinematics of a serial chain read from a URDF, in NumPy.

One IK for every simulator: the tabletop env turns a TCP displacement into joint targets here, and the
MuJoCo and PyBullet backends only track those targets, so the two engines share the controller's semantics
by construction (and the ROS arm node can run the same code on a real robot without either engine).
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: TCP orientation of a gripper pointing straight down (tool z along world -z), as panda-gym commands it.
DOWN = np.array([[1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [0.0, 0.0, -1.0]])


def _rpy(r: float, p: float, y: float) -> np.ndarray:
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


def _axis_angle(axis: np.ndarray, angle: float) -> np.ndarray:
    x, y, z = axis
    c, s = math.cos(angle), math.sin(angle)
    C = 1.0 - c
    return np.array(
        [
            [c + x * x * C, x * y * C - z * s, x * z * C + y * s],
            [y * x * C + z * s, c + y * y * C, y * z * C - x * s],
            [z * x * C - y * s, z * y * C + x * s, c + z * z * C],
        ]
    )


@dataclass(frozen=True)
class _Joint:
    name: str
    kind: str  # revolute | prismatic | fixed
    origin: np.ndarray  # 4x4 parent -> joint frame at q = 0
    axis: np.ndarray


class KinematicChain:
    """The chain of joints from ``base_link`` to ``tip_link``; movable joints in order are ``joint_names``."""

    def __init__(self, urdf: str | Path, base_link: str, tip_link: str) -> None:
        root = ET.parse(urdf).getroot()
        by_child = {j.find("child").get("link"): j for j in root.iter("joint")}
        chain: list[_Joint] = []
        link = tip_link
        while link != base_link:
            if link not in by_child:
                raise ValueError(f"{urdf}: no joint chain from {base_link!r} to {tip_link!r} (stuck at {link!r})")
            j = by_child[link]
            o = j.find("origin")
            xyz = [float(v) for v in (o.get("xyz", "0 0 0") if o is not None else "0 0 0").split()]
            rpy = [float(v) for v in (o.get("rpy", "0 0 0") if o is not None else "0 0 0").split()]
            T = np.eye(4)
            T[:3, :3], T[:3, 3] = _rpy(*rpy), xyz
            a = j.find("axis")
            axis = np.array([float(v) for v in (a.get("xyz") if a is not None else "1 0 0").split()])
            norm = float(np.linalg.norm(axis))
            chain.append(_Joint(j.get("name"), j.get("type"), T, axis / norm if norm > 0 else axis))
            link = j.find("parent").get("link")
        self._joints = chain[::-1]
        self.joint_names = [j.name for j in self._joints if j.kind != "fixed"]
        # Fold the fixed joints into the movable joints' origins: per movable joint the rotation and offset
        # from the previous joint's frame (after its motion), its axis, and the rotation's constant parts
        # (R(q) = cos q I + sin q K + (1 - cos q) a a^T); then the tip's fixed transform.
        self._steps: list[tuple[np.ndarray, np.ndarray, str, np.ndarray, np.ndarray, np.ndarray]] = []
        T = np.eye(4)
        for j in self._joints:
            T = T @ j.origin
            if j.kind == "fixed":
                continue
            x, y, z = j.axis
            K = np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])
            self._steps.append((T[:3, :3].copy(), T[:3, 3].copy(), j.kind, j.axis, K, np.outer(j.axis, j.axis)))
            T = np.eye(4)
        self._tip_R, self._tip_t = T[:3, :3].copy(), T[:3, 3].copy()
        self._fast = [
            (tuple(Rf.ravel()), tuple(tf), kind, tuple(axis), "z" if np.allclose(axis, (0, 0, 1)) else "")
            for Rf, tf, kind, axis, _, _ in self._steps
        ]

    def forward(self, q: np.ndarray, base: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """TCP position (3,), rotation (3, 3) and the geometric Jacobian (6, n) for joint positions ``q``.

        Positions are in the base link's frame shifted by ``base`` (the base's position in the world; the
        base is not rotated). The Jacobian's rows are linear then angular velocity.

        Written on Python floats: a chain of 3 x 3 products costs ~1 µs each in NumPy's call overhead and
        ~0.3 µs as scalar arithmetic, and the env runs this twice per control step.
        """
        R = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)  # row-major
        px, py, pz = (0.0, 0.0, 0.0) if base is None else (float(base[0]), float(base[1]), float(base[2]))
        origins, axes = [], []
        for i, (Rf, tf, kind, axis, rot) in enumerate(self._fast):
            r0, r1, r2, r3, r4, r5, r6, r7, r8 = R
            px += r0 * tf[0] + r1 * tf[1] + r2 * tf[2]
            py += r3 * tf[0] + r4 * tf[1] + r5 * tf[2]
            pz += r6 * tf[0] + r7 * tf[1] + r8 * tf[2]
            R = _mul(R, Rf)
            r0, r1, r2, r3, r4, r5, r6, r7, r8 = R
            ax = (
                r0 * axis[0] + r1 * axis[1] + r2 * axis[2],
                r3 * axis[0] + r4 * axis[1] + r5 * axis[2],
                r6 * axis[0] + r7 * axis[1] + r8 * axis[2],
            )
            origins.append((px, py, pz))
            axes.append(ax)
            qi = float(q[i])
            if kind == "prismatic":
                px, py, pz = px + ax[0] * qi, py + ax[1] * qi, pz + ax[2] * qi
            elif rot == "z":  # the common case (every Panda joint): combine the first two columns
                c, s = math.cos(qi), math.sin(qi)
                R = (
                    c * r0 + s * r1,
                    c * r1 - s * r0,
                    r2,
                    c * r3 + s * r4,
                    c * r4 - s * r3,
                    r5,
                    c * r6 + s * r7,
                    c * r7 - s * r6,
                    r8,
                )
            else:
                c, s = math.cos(qi), math.sin(qi)
                _, _, _, _, K, aa = self._steps[i]
                R = _mul(R, tuple((c * _I3 + s * K + (1.0 - c) * aa).ravel()))
        r0, r1, r2, r3, r4, r5, r6, r7, r8 = R
        t = self._tip_t
        x, y, z = (
            px + r0 * t[0] + r1 * t[1] + r2 * t[2],
            py + r3 * t[0] + r4 * t[1] + r5 * t[2],
            pz + r6 * t[0] + r7 * t[1] + r8 * t[2],
        )
        columns = []
        for (ox, oy, oz), (ax, ay, az), step in zip(origins, axes, self._fast, strict=True):
            if step[2] == "prismatic":
                columns.append((ax, ay, az, 0.0, 0.0, 0.0))
            else:  # a x (p - o)
                dx, dy, dz = x - ox, y - oy, z - oz
                columns.append((ay * dz - az * dy, az * dx - ax * dz, ax * dy - ay * dx, ax, ay, az))
        return np.array((x, y, z)), np.array(R).reshape(3, 3) @ self._tip_R, np.array(columns).T


def _mul(a: tuple, b: tuple) -> tuple:
    """Product of two row-major 3 x 3 matrices held as 9-tuples."""
    a0, a1, a2, a3, a4, a5, a6, a7, a8 = a
    b0, b1, b2, b3, b4, b5, b6, b7, b8 = b
    return (
        a0 * b0 + a1 * b3 + a2 * b6,
        a0 * b1 + a1 * b4 + a2 * b7,
        a0 * b2 + a1 * b5 + a2 * b8,
        a3 * b0 + a4 * b3 + a5 * b6,
        a3 * b1 + a4 * b4 + a5 * b7,
        a3 * b2 + a4 * b5 + a5 * b8,
        a6 * b0 + a7 * b3 + a8 * b6,
        a6 * b1 + a7 * b4 + a8 * b7,
        a6 * b2 + a7 * b5 + a8 * b8,
    )


_I3 = np.eye(3)


def solve_ik(
    chain: KinematicChain,
    q: np.ndarray,
    target: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    *,
    rotation: np.ndarray = DOWN,
    base: np.ndarray | None = None,
    iterations: int = 8,
    damping: float = 0.05,
    orientation_weight: float = 0.5,
    tolerance: float = 1e-4,
    first: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Joint positions near ``q`` that put the TCP at ``target`` with ``rotation``: damped least squares.

    Starts from the current joints (the answer stays on the same branch, so successive small displacements
    give smooth joint motion), clamps to the joint limits after every iteration, and stops when the position
    error is below ``tolerance`` metres. An unreachable target gives the nearest reachable pose. ``first``
    is ``chain.forward(q, base)`` when the caller has it already (``q`` within the limits).
    """
    q = np.clip(np.asarray(q, dtype=float).copy(), lower, upper)
    w = np.array([1.0, 1.0, 1.0, orientation_weight, orientation_weight, orientation_weight])
    for i in range(iterations):
        p, R, J = first if i == 0 and first is not None else chain.forward(q, base)
        dp = target - p
        # Orientation error as a rotation vector (small-angle: half the skew part of R_err).
        Re = rotation @ R.T
        dr = 0.5 * np.array([Re[2, 1] - Re[1, 2], Re[0, 2] - Re[2, 0], Re[1, 0] - Re[0, 1]])
        err = np.concatenate([dp, dr]) * w
        if math.sqrt(dp @ dp) < tolerance and math.sqrt(dr @ dr) < 10 * tolerance:
            break
        Jw = J * w[:, None]
        dq = Jw.T @ np.linalg.solve(Jw @ Jw.T + damping**2 * _I6, err)
        q = np.minimum(np.maximum(q + dq, lower), upper)  # np.clip's dispatch costs more than the two ufuncs
    return q


_I6 = np.eye(6)
