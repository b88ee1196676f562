"""Declared, described, validated node parameters, shared by the nodes, ``hrl-deploy`` and the tests.

Each node lists its parameters once (:class:`Param`); the node declares them with their descriptions,
reads them and validates them (a bad value stops the node with a message naming the parameter, the
value and what is allowed). The YAML files in ``launch/params/`` hold the same keys.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class ParameterError(ValueError):
    """A node parameter with a bad value."""


def positive(value: Any) -> str | None:
    ok = isinstance(value, (int, float)) and math.isfinite(value) and value > 0
    return None if ok else "must be a finite number > 0"


def non_negative(value: Any) -> str | None:
    ok = isinstance(value, (int, float)) and math.isfinite(value) and value >= 0
    return None if ok else "must be a finite number >= 0 (0: the robot spec's value)"


def whole_number(value: Any) -> str | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    return None if ok else "must be an integer >= 0"


def topic(value: Any) -> str | None:
    ok = isinstance(value, str) and value.startswith("/") and " " not in value
    return None if ok else "must be a topic name starting with '/'"


def non_empty(value: Any) -> str | None:
    return None if isinstance(value, str) and value.strip() else "must be a non-empty string"


@dataclass(frozen=True)
class Param:
    name: str
    default: Any
    description: str
    check: Callable[[Any], str | None] | None = None

    def validate(self, value: Any) -> Any:
        if isinstance(self.default, float) and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if type(value) is not type(self.default):
            raise ParameterError(
                f"parameter {self.name!r} = {value!r} must be a {type(self.default).__name__} ({self.description})"
            )
        problem = self.check(value) if self.check else None
        if problem:
            raise ParameterError(f"parameter {self.name!r} = {value!r} {problem} ({self.description})")
        return value


def validate(params: list[Param], values: dict[str, Any]) -> dict[str, Any]:
    """Defaults overlaid with ``values``, every one checked; unknown keys are errors."""
    known = {p.name: p for p in params}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ParameterError(f"unknown parameter(s) {unknown}; this node takes: {', '.join(known)}")
    return {p.name: p.validate(values.get(p.name, p.default)) for p in params}


def declare(node: Any, params: list[Param]) -> dict[str, Any]:
    """Declare ``params`` on an rclpy node (with descriptions), read and validate them."""
    from rcl_interfaces.msg import ParameterDescriptor

    values = {}
    for p in params:
        node.declare_parameter(p.name, p.default, ParameterDescriptor(description=p.description))
        values[p.name] = node.get_parameter(p.name).value
    return validate(params, values)
