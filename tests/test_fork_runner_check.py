"""The forked runner judges whole-suite runs only after the whole suite passed on clean code
in one of its children. Here a test fails whenever its process is a child of the forked
runner's server (it looks at its parent's command line): on clean code too. Without that
check, every mutant of module-level code would be "killed" by it, the one no test can
detect (an unused constant) as well; with it, the plain path judges them and that mutant
survives."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PYPROJECT = """\
[build-system]
requires = ["setuptools>=69"]
build-backend = "setuptools.build_meta"

[project]
name = "forkshy"
version = "0.1"

[tool.setuptools.packages.find]
where = ["src"]

[tool.killbench]
mutate = ["src/forkshy"]
tests = ["tests"]
test_requires = ["pytest==9.0.3"]
"""

SOURCE = '''\
LIMIT = 10
UNUSED = 5


def over(x):
    return x > LIMIT
'''

TEST = '''\
import os

from forkshy import over


def test_over():
    with open(f"/proc/{os.getppid()}/cmdline", "rb") as fh:
        parent = fh.read()
    assert b"killbench_fork" not in parent
    assert over(11) and not over(10)
'''


@pytest.mark.slow
def test_a_suite_that_fails_in_a_forked_child_is_judged_the_plain_way(use_cache, tmp_path):
    project = tmp_path / "forkshy"
    (project / "src" / "forkshy").mkdir(parents=True)
    (project / "tests").mkdir()
    (project / "pyproject.toml").write_text(PYPROJECT)
    (project / "src" / "forkshy" / "__init__.py").write_text(SOURCE)
    (project / "tests" / "test_forkshy.py").write_text(TEST)
    out = tmp_path / "result.json"
    p = subprocess.run([sys.executable, "-m", "killbench.cli", "mutate", str(project), "--jobs", "1",
                        "--fresh", "--json", str(out)], capture_output=True, text=True, timeout=900,
                       env={**os.environ, "KILLBENCH_CACHE": str(use_cache)})
    assert p.returncode == 0, p.stderr
    mutants = json.loads(out.read_text())["mutants"]
    module_level = [m for m in mutants if m["function"] is None and m["ran"]]
    unused = [m for m in module_level if m["original"] == "5"]
    limit = [m for m in module_level if m["original"] == "10"]
    assert unused and limit
    assert all(m["runner"] == "plain" for m in module_level), module_level
    assert all(m["verdict"] == "survived" for m in unused), unused
    assert all(m["verdict"] == "killed" for m in limit), limit
