"""Adding a planner: register_planner by path or as the documented class decorator."""

from __future__ import annotations

import pytest

from llm_planner.base import PLANNERS, make_planner, planner_class, register_planner


class DecoratedPlanner:
    name = "test_decorated"
    domains = ("tabletop",)

    def plan(self, task, scene, feedback=None):  # pragma: no cover - never planned with here
        raise NotImplementedError


def test_the_decorator_registers_the_class_by_its_import_path():
    """Applied here, not at import: collecting this module must not add a planner other tests would list."""
    try:
        assert register_planner("test_decorated")(DecoratedPlanner) is DecoratedPlanner
        assert PLANNERS["test_decorated"] == f"{__name__}:DecoratedPlanner"
        assert planner_class("test_decorated") is DecoratedPlanner
        assert isinstance(make_planner("test_decorated"), DecoratedPlanner)
    finally:
        PLANNERS.pop("test_decorated", None)


def test_registering_by_path_and_bad_registrations():
    try:
        register_planner("test_by_path", "llm_planner.planners.symbolic:SymbolicPlanner")
        assert planner_class("test_by_path").__name__ == "SymbolicPlanner"
    finally:
        PLANNERS.pop("test_by_path", None)
    with pytest.raises(ValueError, match="module:Class"):
        register_planner("bad", "llm_planner.planners.symbolic.SymbolicPlanner")
    with pytest.raises(ValueError, match="non-empty string"):
        register_planner("")
    with pytest.raises(ValueError, match="unknown planner 'nope'"):
        planner_class("nope")
