"""`killbench manifests verify` on committed manifests: a fresh download, fresh
environment and fresh sandboxes reproduce a seeded sample of verdicts."""

from __future__ import annotations

import subprocess
import sys

import pytest

from killbench.manifests import load_manifests

BUILT = sorted(load_manifests())


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in ("cachetools", "toolz", "tenacity") if n in BUILT][:2])
def test_verify_sample(name, use_cache):
    proc = subprocess.run([sys.executable, "-m", "killbench.cli", "manifests", "verify", name,
                           "--sample", "4", "--seed", "1", "--jobs", "2"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_committed_manifests_match_the_index():
    from killbench.manifests import index_of, manifests_dir
    import json

    assert BUILT, "the benchmark ships at least one manifest"
    index = json.loads((manifests_dir() / "index.json").read_text())
    assert index == json.loads(json.dumps(index_of(load_manifests())))
