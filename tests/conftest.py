"""Shared fixtures. Importing ``sim`` registers the envs and selects headless rendering."""

from __future__ import annotations

import sim  # noqa: F401
