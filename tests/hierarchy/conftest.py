"""Shared fixtures of the hierarchy tests: the tabletop domain with the shipped skills, loaded once per run."""

from __future__ import annotations

import pytest

from hierarchy.tabletop import TabletopDomain, make_env


@pytest.fixture(scope="session")
def domain() -> TabletopDomain:
    """The tabletop domain with the shipped panda_pick_place, panda_push and panda_reach skills."""
    return TabletopDomain.with_skills()


@pytest.fixture
def env_factory():
    """``env_factory(scene, backend)``: a hierarchy env (pick-and-place mode) closed after the test."""
    envs = []

    def make(scene: str = "blocks", backend: str = "mujoco", **kwargs):
        env = make_env(scene, backend, **kwargs)
        envs.append(env)
        return env

    yield make
    for env in envs:
        env.close()
