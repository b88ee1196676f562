"""Shared fixtures. Importing ``sim`` registers the envs and selects headless rendering."""

from __future__ import annotations

import logging

import pytest

import sim  # noqa: F401


@pytest.fixture(autouse=True)
def _no_root_log_handlers_outlive_a_test():
    """A Hydra main run in a test (``hrl-posttrain``, ``hrl-train``, ...) configures job logging: root handlers on the
    stream pytest captured for that test. Once that stream is closed, every later warning that reaches the root
    logger prints "--- Logging error ---" to the real stderr, and a test that checks what reached the terminal fails
    or passes by test order. Handlers a test adds to the root logger are removed after it (pytest's own are left to
    pytest)."""
    root = logging.getLogger()
    before = set(root.handlers)
    level = root.level
    yield
    for handler in root.handlers[:]:
        if handler not in before and not type(handler).__module__.startswith("_pytest"):
            root.removeHandler(handler)
            handler.close()
    root.setLevel(level)
