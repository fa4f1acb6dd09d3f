"""The README's first command: `killbench run` with its defaults (amplify on the pinned
cachetools, offline, no key) produces a scored run directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_killbench_run_defaults(kb_cache, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["KILLBENCH_CACHE"] = str(kb_cache)
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "killbench.cli", "run", "--out", str(out)],
                          env=env, capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    config = json.loads((out / "config.json").read_text())
    assert config["generator"]["name"] == "amplify" and config["model"] is None
    score = json.loads((out / "score.json").read_text())
    t = score["targets"]["cachetools"]
    from killbench.manifests import load_manifests

    assert t["kills"]["n"] == len(load_manifests()["cachetools"]["task_set"])  # the committed task set
    assert t["controls"]["positive"] == t["controls"]["positive_kept"] > 0  # the gate's controls held
    assert t["kills"]["k"] >= 1
    assert t["cost"]["tokens_in"] == t["cost"]["tokens_out"] == 0
    assert score["pooled_kills"]["k"] == t["kills"]["k"]
