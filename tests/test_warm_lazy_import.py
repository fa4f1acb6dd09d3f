"""A module the tests import inside a test (not at collection) is not live in the warm server:
its mutants, module-level ones too, run warm with the tests' own import reading the mutant
from disk, as a cold run would. A module the server did import keeps its module-level
mutants on the plain path. Verdicts must equal the plain path's either way."""

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
name = "lazy"
version = "0.1"

[tool.setuptools.packages.find]
where = ["src"]

[tool.killbench]
mutate = ["src/lazy"]
tests = ["tests"]
test_requires = ["pytest==9.0.3"]
"""

EAGER = '''\
LIMIT = 10


def over(x):
    return x > LIMIT
'''

LATE = '''\
FACTOR = 3


def scale(x):
    return x * FACTOR
'''

TEST = '''\
from lazy.eager import over


def test_over():
    assert over(11) and not over(10)


def test_scale():
    from lazy.late import scale

    assert scale(2) == 6
'''


@pytest.mark.slow
def test_mutants_of_a_lazily_imported_module_run_warm_and_agree_with_plain(use_cache, tmp_path):
    project = tmp_path / "lazy"
    (project / "src" / "lazy").mkdir(parents=True)
    (project / "tests").mkdir()
    (project / "pyproject.toml").write_text(PYPROJECT)
    (project / "src" / "lazy" / "__init__.py").write_text("")
    (project / "src" / "lazy" / "eager.py").write_text(EAGER)
    (project / "src" / "lazy" / "late.py").write_text(LATE)
    (project / "tests" / "test_lazy.py").write_text(TEST)
    docs = {}
    for flag in ("--warm", "--no-warm"):
        out = tmp_path / f"{flag}.json"
        p = subprocess.run([sys.executable, "-m", "killbench.cli", "mutate", str(project), flag,
                            "--jobs", "1", "--fresh", "--json", str(out)], capture_output=True,
                           text=True, timeout=900, env={**os.environ, "KILLBENCH_CACHE": str(use_cache)})
        assert p.returncode == 0, p.stderr
        docs[flag] = {m["id"]: m for m in json.loads(out.read_text())["mutants"]}
    warm, plain = docs["--warm"], docs["--no-warm"]
    late_module = [m for m in warm.values() if m["path"].endswith("late.py") and m["function"] is None]
    eager_module = [m for m in warm.values() if m["path"].endswith("eager.py") and m["function"] is None]
    # FACTOR = 3 -> 4 is covered by test_scale (the import runs inside it) and killed warm
    factor = [m for m in late_module if m["original"] == "3"]
    assert factor and all(m["verdict"] == "killed" and m["runner"] == "warm" for m in factor), factor
    # LIMIT = 10 -> 11 ran at collection (import time): the whole suite judges it, in a child
    # forked before collection (which imports the module afresh, from the mutated file)
    limit = [m for m in eager_module if m["original"] == "10"]
    assert limit and all(m["runner"] == "fork" and m["selection"] == "full" for m in limit), limit
    assert all(plain[m["id"]]["runner"] == "plain" for m in limit)
    assert {i: m["verdict"] for i, m in warm.items()} == {i: m["verdict"] for i, m in plain.items()}
