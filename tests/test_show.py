"""What users of mutation tools expect on their own project: a dry run that counts mutants
without running any, a look at one mutant, and `# pragma: no mutate`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from killbench.errors import ExitCode
from killbench.mutate import UNKILLABLE_PRAGMA, enumerate_file


def _cli(*args, env=None):
    import os

    return subprocess.run([sys.executable, "-m", "killbench.cli", *args], capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, timeout=600)


def test_a_pragma_line_is_never_a_task_and_is_counted():
    src = "def f(n):\n    if n > 1:  # pragma: no mutate\n        return 2\n    return 3\n"
    by_line = {}
    for c in enumerate_file("m.py", src):
        by_line.setdefault(c.mutant.line, set()).add(c.mutant.unkillable)
    assert by_line[2] == {UNKILLABLE_PRAGMA}
    assert None in by_line[3] and UNKILLABLE_PRAGMA not in by_line[3]


@pytest.mark.slow
def test_dry_run_and_show_on_a_local_project(fixture_target, use_cache, tmp_path):
    project = fixture_target("basic")
    env = {"KILLBENCH_CACHE": str(use_cache)}
    p = _cli("mutate", "--dry-run", str(project), env=env)
    assert p.returncode == 0, p.stderr
    assert "compare-flip" in p.stdout and "(nothing run)" in p.stdout
    out = tmp_path / "m.json"
    p = _cli("mutate", str(project), "--json", str(out), env=env)
    assert p.returncode == 0, p.stderr
    rec = next(m for m in json.loads(out.read_text())["mutants"] if m["verdict"] == "killed")
    p = _cli("show", str(project), rec["id"], env=env)
    assert p.returncode == 0, p.stderr
    assert f"mutant {rec['id']}" in p.stdout and "the suite's verdict" in p.stdout and "killed" in p.stdout
    assert "--- a/" in p.stdout and "+++ b/" in p.stdout
    p = _cli("show", str(project), "ffffffffffffffff", env=env)
    assert p.returncode == ExitCode.USER_ERROR and "has no mutant" in p.stderr
    # the journal of the run above answers at once: a threshold above the score fails CI
    score = json.loads(out.read_text())["summary"]["score"]
    pct = 100 * score["killed"] / score["of"]
    assert 0 < pct < 100
    assert _cli("mutate", str(project), "--fail-under", f"{pct - 1:.2f}", env=env).returncode == 0
    p = _cli("mutate", str(project), "--fail-under", f"{pct + 1:.2f}", env=env)
    assert p.returncode == ExitCode.CHECK_FAILED and "below --fail-under" in p.stderr


@pytest.mark.slow
def test_show_on_a_pin_reads_its_manifest(use_cache):
    from killbench.manifests import load_manifests

    m = load_manifests()["cachetools"]
    task = m["task_set"][0]
    p = _cli("show", "cachetools", task, env={"KILLBENCH_CACHE": str(use_cache)})
    assert p.returncode == 0, p.stderr
    assert "(manifest): survived; a task" in p.stdout
