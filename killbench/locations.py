"""Where killbench keeps downloads, environments and work on disk.

Everything lives under one cache root (``KILLBENCH_CACHE``, else the user cache dir)
so that a user can see and delete it in one place; nothing is written into the
checkout or into a target's project directory.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs


def cache_root() -> Path:
    env = os.environ.get("KILLBENCH_CACHE")
    root = Path(env) if env else Path(platformdirs.user_cache_dir("killbench"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def cache_subdir(name: str) -> Path:
    path = cache_root() / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def repo_root() -> Path:
    """The checkout this package runs from (targets/ and manifests/ live there)."""
    env = os.environ.get("KILLBENCH_HOME")
    return Path(env) if env else Path(__file__).resolve().parent.parent


PROBE_DIR = Path(__file__).resolve().parent / "_probe"
