"""The warm runner under a suite that turns warnings into errors (`filterwarnings =
error`, as humanize, isodate, python-slugify and toolz do): its verdicts are the plain
runner's. A forked child once dropped the parent's open report file; the ResourceWarning of
closing it became an error in the next test, a kill of every mutant that no mutant made."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_warm_equals_plain_when_warnings_are_errors(fixture_target, use_cache, tmp_path):
    import os

    project = fixture_target("basic")
    py = project / "pyproject.toml"
    py.write_text(py.read_text() + '\n[tool.pytest.ini_options]\nfilterwarnings = ["error"]\n')
    verdicts = {}
    for flag in ("--warm", "--no-warm"):
        out = tmp_path / f"{flag}.json"
        p = subprocess.run([sys.executable, "-m", "killbench.cli", "mutate", str(project), flag, "--fresh",
                            "--json", str(out)], capture_output=True, text=True, timeout=900,
                           env={**os.environ, "KILLBENCH_CACHE": str(use_cache)})
        assert p.returncode == 0, p.stderr
        doc = json.loads(out.read_text())
        verdicts[flag] = {m["id"]: m["verdict"] for m in doc["mutants"]}
        if flag == "--warm":
            assert any(m.get("runner") == "warm" for m in doc["mutants"]), "the warm path was used"
    assert verdicts["--warm"] == verdicts["--no-warm"]
    assert "survived" in verdicts["--warm"].values() and "killed" in verdicts["--warm"].values()
