"""Forward kinematics, Jacobian and inverse kinematics of a serial chain read from a URDF, in plain Python and NumPy.

One IK for every simulator: the tabletop env turns a TCP displacement into joint targets here, and the
MuJoCo and PyBullet backends only track those targets, so the two engines share the controller's semantics
by construction (and the ROS arm node can run the same code on a real robot without either engine).
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Sequence
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


def _z_to(axis: np.ndarray) -> np.ndarray:
    """A rotation whose z column is the unit vector ``axis`` (the identity for z itself)."""
    if np.array_equal(axis, (0.0, 0.0, 1.0)):
        return np.eye(3)
    helper = np.array([1.0, 0.0, 0.0]) if abs(axis[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    x = np.cross(helper, axis)
    x /= np.linalg.norm(x)
    return np.stack([x, np.cross(axis, x), axis], axis=1)


class _Emitter:
    """Straight-line Python for a fixed chain of transforms. A value is a constant (float) or the name of a
    variable of the emitted code; products with the constants 0 and ±1 fold away, so a URDF's quarter turns
    (rpy = ±π/2) cost no arithmetic at run time. Only names made here and ``repr`` of floats enter the code."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._count = 0

    def let(self, expr: str) -> str:
        self._count += 1
        name = f"v{self._count}"
        self.lines.append(f"{name} = {expr}")
        return name

    def sum_of_products(self, terms: list[tuple[float | str, ...]]) -> float | str:
        """``sum(prod(factors) for factors in terms)``: a constant when no term has a variable, else a variable."""
        const, parts = 0.0, []
        for factors in terms:
            coef = math.prod(f for f in factors if not isinstance(f, str))
            names = " * ".join(f for f in factors if isinstance(f, str))
            if coef == 0.0:
                continue
            if not names:
                const += coef
            else:
                parts.append(names if coef == 1.0 else f"-{names}" if coef == -1.0 else f"{coef!r} * {names}")
        if not parts:
            return const
        if len(parts) == 1 and const == 0.0 and parts[0].isidentifier():
            return parts[0]  # a variable already: no copy
        expr = " + ".join(parts) + (f" + {const!r}" if const else "")
        return self.let(expr.replace("+ -", "- "))


def _compile_forward(steps: list[tuple[str, np.ndarray, np.ndarray]], tip: tuple[np.ndarray, np.ndarray], name: str):
    """A function ``f(q0, ..., qn-1) -> (p, R, J)`` as tuples, straight-line code for this chain.

    ``steps`` are the movable joints in order, each ``(kind, R, t)``: the fixed rotation and offset from the
    previous joint's frame (after its motion) to this joint's frame, in which it turns about or slides along
    z; ``tip`` is the fixed ``(R, t)`` from the last joint's frame to the tip.
    """
    e = _Emitter()
    R: list[list[float | str]] = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    p: list[float | str] = [0.0, 0.0, 0.0]

    def move(rotation, p, fixed_rotation, offset):  # by a fixed transform: p += R t, R = R F
        p = [e.sum_of_products([(p[r],), *((rotation[r][k], float(offset[k])) for k in range(3))]) for r in range(3)]
        rotation = [
            [e.sum_of_products([(rotation[r][k], float(fixed_rotation[k, c])) for k in range(3)]) for c in range(3)]
            for r in range(3)
        ]
        return rotation, p

    origins, axes = [], []
    for i, (kind, Rf, tf) in enumerate(steps):
        R, p = move(R, p, Rf, tf)
        origins.append(p)
        axes.append([R[r][2] for r in range(3)])
        if kind == "prismatic":
            p = [e.sum_of_products([(p[r],), (f"q{i}", R[r][2])]) for r in range(3)]
        else:  # about z: the first two columns turn, the third is the axis
            e.lines.append(f"c{i}, s{i} = cos(q{i}), sin(q{i})")
            R = [
                [
                    e.sum_of_products([(f"c{i}", R[r][0]), (f"s{i}", R[r][1])]),
                    e.sum_of_products([(f"c{i}", R[r][1]), (-1.0, f"s{i}", R[r][0])]),
                    R[r][2],
                ]
                for r in range(3)
            ]
    R, p = move(R, p, *tip)
    columns = []
    for (kind, _, _), o, (zx, zy, zz) in zip(steps, origins, axes, strict=True):
        if kind == "prismatic":
            columns.append((zx, zy, zz, 0.0, 0.0, 0.0))
            continue
        dx, dy, dz = (e.sum_of_products([(p[r],), (-1.0, o[r])]) for r in range(3))
        linear = (
            e.sum_of_products([(zy, dz), (-1.0, zz, dy)]),
            e.sum_of_products([(zz, dx), (-1.0, zx, dz)]),
            e.sum_of_products([(zx, dy), (-1.0, zy, dx)]),
        )
        columns.append((*linear, zx, zy, zz))

    def tup(values) -> str:
        return "(" + "".join(f"{v!r}, " if isinstance(v, float) else f"{v}, " for v in values) + ")"

    rows = [tup(column[k] for column in columns) for k in range(6)]
    args = ", ".join(f"q{i}" for i in range(len(steps)))
    body = "\n    ".join([*e.lines, f"return {tup(p)}, ({', '.join(tup(row) for row in R)}), ({', '.join(rows)})"])
    namespace = {"cos": math.cos, "sin": math.sin}
    exec(compile(f"def forward({args}):\n    {body}\n", f"<forward kinematics of {name}>", "exec"), namespace)
    return namespace["forward"]


class KinematicChain:
    """The chain of joints from ``base_link`` to ``tip_link``; movable joints in order are ``joint_names``."""

    def __init__(self, urdf: str | Path, base_link: str, tip_link: str) -> None:
        root = ET.parse(urdf).getroot()
        by_child = {j.find("child").get("link"): j for j in root.iter("joint")}
        chain: list[tuple[str, str, np.ndarray, np.ndarray]] = []  # name, kind, origin (4 x 4), unit axis
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
            chain.append((j.get("name"), j.get("type"), T, axis / norm if norm > 0 else axis))
            link = j.find("parent").get("link")
        chain.reverse()
        self.joint_names = [name for name, kind, _, _ in chain if kind != "fixed"]
        # Fold the fixed joints into the movable joints' origins, and turn each movable joint's frame so that it
        # moves about (or along) z: the generated code then needs no general axis-angle rotation.
        steps: list[tuple[str, np.ndarray, np.ndarray]] = []
        T, turn = np.eye(4), np.eye(3)  # turn: the previous joint's frame -> its z-aligned frame
        for _, kind, origin, axis in chain:
            T = T @ origin
            if kind == "fixed":
                continue
            align = _z_to(axis)
            steps.append((kind, turn.T @ T[:3, :3] @ align, turn.T @ T[:3, 3]))
            T, turn = np.eye(4), align
        self._forward = _compile_forward(steps, (turn.T @ T[:3, :3], turn.T @ T[:3, 3]), f"{base_link}->{tip_link}")

    def forward(self, q: Sequence[float], base: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """TCP position (3,), rotation (3, 3) and the geometric Jacobian (6, n) for joint positions ``q``.

        Positions are in the base link's frame shifted by ``base`` (the base's position in the world; the
        base is not rotated). The Jacobian's rows are linear then angular velocity.

        Straight-line Python on floats, generated for this chain when it is built (NumPy's per-call overhead
        makes 3 x 3 products cost more than their arithmetic): the env runs this twice per control step.
        """
        values = q.tolist() if isinstance(q, np.ndarray) and q.dtype == float else [float(v) for v in q]
        if len(values) != len(self.joint_names):
            raise ValueError(f"q must hold {len(self.joint_names)} joint positions ({self.joint_names}), got {q!r}")
        p, R, J = self._forward(*values)
        return np.array(p) if base is None else np.array(p) + base, np.array(R), np.array(J)


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
    q = np.minimum(np.maximum(np.asarray(q, dtype=float), lower), upper)  # cheaper than np.clip's dispatch
    w = np.array([1.0, 1.0, 1.0, orientation_weight, orientation_weight, orientation_weight])
    row_weights, regularizer = w[:, None], damping**2 * _I6
    # The errors on Python floats (a dozen NumPy calls on 3-vectors cost more than their arithmetic).
    (d0, d1, d2), (d3, d4, d5), (d6, d7, d8) = np.asarray(rotation, dtype=float).tolist()
    tx, ty, tz = np.asarray(target, dtype=float).tolist()
    bx, by, bz = (0.0, 0.0, 0.0) if base is None else np.asarray(base, dtype=float).tolist()
    for i in range(iterations):
        if i == 0 and first is not None:
            p, R, J = first
            (px, py, pz), R = p.tolist(), R.tolist()
        else:
            (px, py, pz), R, J = chain._forward(*q.tolist())
            px, py, pz, J = px + bx, py + by, pz + bz, np.array(J)
        (r0, r1, r2), (r3, r4, r5), (r6, r7, r8) = R
        dx, dy, dz = tx - px, ty - py, tz - pz
        # Orientation error as a rotation vector: half the skew part of R_err = rotation R^T (small angles).
        ex = 0.5 * ((d6 * r3 + d7 * r4 + d8 * r5) - (d3 * r6 + d4 * r7 + d5 * r8))
        ey = 0.5 * ((d0 * r6 + d1 * r7 + d2 * r8) - (d6 * r0 + d7 * r1 + d8 * r2))
        ez = 0.5 * ((d3 * r0 + d4 * r1 + d5 * r2) - (d0 * r3 + d1 * r4 + d2 * r5))
        if (
            math.sqrt(dx * dx + dy * dy + dz * dz) < tolerance
            and math.sqrt(ex * ex + ey * ey + ez * ez) < 10 * tolerance
        ):
            break
        Jw = J * row_weights
        dq = Jw.T @ np.linalg.solve(Jw @ Jw.T + regularizer, np.array((dx, dy, dz, ex, ey, ez)) * w)
        q = np.minimum(np.maximum(q + dq, lower), upper)
    return q


_I6 = np.eye(6)
