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
    """The checkout this package runs from (targets/, manifests/ and docs/ live there)."""
    env = os.environ.get("KILLBENCH_HOME")
    return Path(env) if env else Path(__file__).resolve().parent.parent


# the benchmark's data directories, and the names they are installed under in the package
_PACKAGED = {"targets": "_targets", "manifests": "_manifests"}


def benchmark_dir(name: str) -> Path:
    """targets/ or manifests/: under KILLBENCH_HOME when set, else the checkout's (an
    editable install, or running from the source tree), else the copy installed with the
    package (a wheel or `pip install .`), which is the same data."""
    env = os.environ.get("KILLBENCH_HOME")
    if env:
        return Path(env) / name
    here = Path(__file__).resolve().parent
    checkout = here.parent / name
    if checkout.is_dir() and (here.parent / "pyproject.toml").is_file():
        return checkout
    return here / _PACKAGED[name]


PROBE_DIR = Path(__file__).resolve().parent / "_probe"
