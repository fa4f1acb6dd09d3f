"""Shared fixtures: a killbench cache for the whole session, and fixture targets copied
before use (a test never runs the harness inside tests/fixtures itself)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def kb_cache(tmp_path_factory) -> Path:
    """One cache per session (KILLBENCH_TEST_CACHE reuses one across sessions)."""
    path = Path(os.environ["KILLBENCH_TEST_CACHE"]) if os.environ.get("KILLBENCH_TEST_CACHE") \
        else tmp_path_factory.mktemp("kbcache")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def use_cache(kb_cache, monkeypatch) -> Path:
    monkeypatch.setenv("KILLBENCH_CACHE", str(kb_cache))
    return kb_cache


@pytest.fixture
def fixture_target(tmp_path):
    """Copy a fixture target into a fresh directory and return its path."""

    def copy(name: str) -> Path:
        dest = tmp_path / name
        shutil.copytree(FIXTURES / name, dest)
        return dest

    return copy
