"""Typed reading of YAML documents with errors that name the file and the field.

Shared by the robot specs (robots/) and the world maps (sim/): both are hand-written YAML that users
edit, so every error says where it is (``file: field.path``) and what would be accepted.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml


class ConfigFileError(ValueError):
    """A YAML file (robot spec, world map) is malformed or inconsistent.

    The message starts with ``<file>: <field>:`` so the user knows exactly what to edit.
    """

    def __init__(self, source: str | Path, field: str, problem: str) -> None:
        self.source = str(source)
        self.field = field
        self.problem = problem
        where = f"{self.source}: {field}" if field else self.source
        super().__init__(f"{where}: {problem}")


def load_yaml_mapping(path: str | Path) -> dict[str, Any]:
    """Read a YAML file whose top level must be a mapping."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigFileError(path, "", f"cannot read file ({err.strerror})") from err
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        raise ConfigFileError(path, "", f"invalid YAML: {where}{getattr(err, 'problem', err)}") from err
    if not isinstance(data, dict):
        raise ConfigFileError(path, "", f"top level must be a mapping, got {type(data).__name__}")
    return data


class Fields:
    """A view on one mapping inside a YAML document that knows its own path, for precise errors.

    ``Fields(source, "rooms[2]", {...}).number("width", positive=True)`` raises
    ``ConfigFileError("<file>: rooms[2].width: must be > 0, got -1")``.
    """

    def __init__(self, source: str | Path, path: str, data: Any) -> None:
        if not isinstance(data, Mapping):
            raise ConfigFileError(source, path, f"must be a mapping, got {_describe(data)}")
        self.source = source
        self.path = path
        self.data = data

    def child_path(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def error(self, key: str | None, problem: str) -> ConfigFileError:
        return ConfigFileError(self.source, self.child_path(key) if key else self.path, problem)

    def reject_unknown(self, allowed: Sequence[str]) -> None:
        """Typos in keys must not be ignored silently."""
        for key in self.data:
            if key not in allowed:
                hint = did_you_mean(str(key), allowed)
                raise self.error(str(key), f"unknown field{hint}; allowed: {', '.join(allowed)}")

    def has(self, key: str) -> bool:
        return key in self.data and self.data[key] is not None

    def raw(self, key: str, default: Any = ...) -> Any:
        if key not in self.data or self.data[key] is None:
            if default is ...:
                raise self.error(key, "missing required field")
            return default
        return self.data[key]

    def sub(self, key: str, default: Any = ...) -> Fields:
        return Fields(self.source, self.child_path(key), self.raw(key, default))

    def text(self, key: str, default: Any = ...) -> str:
        value = self.raw(key, default)
        if not isinstance(value, str) or not value.strip():
            raise self.error(key, f"must be a non-empty string, got {_describe(value)}")
        return value

    def string(self, key: str, default: str = "") -> str:
        """An optional string (may be empty): a description, an instruction."""
        value = self.raw(key, default)
        if not isinstance(value, str):
            raise self.error(key, f"must be a string, got {_describe(value)}")
        return value

    def number(
        self,
        key: str,
        default: Any = ...,
        *,
        positive: bool = False,
        non_negative: bool = False,
        maximum: float | None = None,
    ) -> float:
        value = self.raw(key, default)
        return check_number(
            value,
            lambda problem: self.error(key, problem),
            positive=positive,
            non_negative=non_negative,
            maximum=maximum,
        )

    def integer(self, key: str, default: Any = ..., *, minimum: int = 1) -> int:
        value = self.raw(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"must be an integer, got {_describe(value)}")
        if value < minimum:
            raise self.error(key, f"must be >= {minimum}, got {value}")
        return value

    def flag(self, key: str, default: Any = ...) -> bool:
        value = self.raw(key, default)
        if not isinstance(value, bool):
            raise self.error(key, f"must be true or false, got {_describe(value)}")
        return value

    def vector(self, key: str, length: int, default: Any = ...) -> tuple[float, ...]:
        return as_vector(self.raw(key, default), length, lambda p: self.error(key, p))

    def string_list(self, key: str) -> tuple[str, ...]:
        value = self.raw(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise self.error(key, f"must be a list of non-empty strings, got {_describe(value)}")
        return tuple(value)

    def items(self, key: str) -> list[Any]:
        value = self.raw(key, [])
        if not isinstance(value, list):
            raise self.error(key, f"must be a list, got {_describe(value)}")
        return value


def check_number(
    value: Any,
    make_error: Any,
    *,
    positive: bool = False,
    non_negative: bool = False,
    maximum: float | None = None,
) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise make_error(f"must be a number, got {_describe(value)}")
    value = float(value)
    if not math.isfinite(value):
        raise make_error(f"must be finite, got {value}")
    if positive and value <= 0:
        raise make_error(f"must be > 0, got {value}")
    if non_negative and value < 0:
        raise make_error(f"must be >= 0, got {value}")
    if maximum is not None and value > maximum:
        raise make_error(f"must be <= {maximum}, got {value}")
    return value


def as_vector(value: Any, length: int, make_error: Any) -> tuple[float, ...]:
    if not isinstance(value, (list, tuple)) or len(value) != length:
        raise make_error(f"must be a list of {length} numbers, got {_describe(value)}")
    return tuple(check_number(v, make_error) for v in value)


def _describe(value: Any) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({type(value).__name__})"


def did_you_mean(name: str, options: Sequence[str]) -> str:
    import difflib

    close = difflib.get_close_matches(name, list(options), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def resolve_yaml(
    name_or_path: str | Path, *, what: str, known: Sequence[str], path_of: Callable[[str], Path], file_label: str
) -> Path:
    """The YAML file of a shipped ``what`` (robot, arm, map, scene) named ``name_or_path`` (one of ``known``,
    found at ``path_of(name)``), or ``name_or_path`` itself when it is a path (a ``.yaml`` or an existing file).

    Raises FileNotFoundError for a missing path and ValueError, with the known names and a did-you-mean, for an
    unknown name. ``file_label`` names the kind of file in messages ("robot spec", "map").
    """
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml") or candidate.is_file():
        if not candidate.is_file():
            raise FileNotFoundError(f"{file_label} file {str(candidate)!r} does not exist")
        return candidate
    name = str(name_or_path)
    if name not in known:
        article = "an" if file_label[0] in "aeiou" else "a"
        raise ValueError(
            f"unknown {what} {name!r}{did_you_mean(name, known)}; known {what}s: {', '.join(known)} "
            f"(or pass the path of {article} {file_label} .yaml)"
        )
    return path_of(name)
