"""The warm server imports the target while it collects the suite, and it is started by the
first mutant that runs warm, when that mutant is already written into the sandbox. It once
imported that mutant: every later mutant of the same file then ran with the first one's edit
still live, and a test that killed the first "killed" them all. Here the first function's
mutants are killed by the one test that also covers the second function, whose mutants are
equivalent: the second's must survive warm exactly as they do plain."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

PYPROJECT = """\
[build-system]
requires = ["setuptools>=69"]
build-backend = "setuptools.build_meta"

[project]
name = "twofuncs"
version = "0.1"

[tool.setuptools.packages.find]
where = ["src"]

[tool.killbench]
mutate = ["src/twofuncs"]
tests = ["tests"]
test_requires = ["pytest==9.0.3"]
"""

SOURCE = '''\
def first(x):
    return x + 1


def second(x):
    if x > 100:
        return x
    return x
'''

TEST = '''\
from twofuncs import first, second


def test_both():
    assert first(1) == 2
    assert second(1) == 1
'''


@pytest.mark.slow
def test_later_mutants_of_a_file_do_not_inherit_the_first_ones_edit(use_cache, tmp_path):
    project = tmp_path / "twofuncs"
    (project / "src" / "twofuncs").mkdir(parents=True)
    (project / "tests").mkdir()
    (project / "pyproject.toml").write_text(PYPROJECT)
    (project / "src" / "twofuncs" / "__init__.py").write_text(SOURCE)
    (project / "tests" / "test_twofuncs.py").write_text(textwrap.dedent(TEST))
    docs = {}
    for flag in ("--warm", "--no-warm"):
        out = tmp_path / f"{flag}.json"
        p = subprocess.run([sys.executable, "-m", "killbench.cli", "mutate", str(project), flag,
                            "--jobs", "1", "--fresh", "--json", str(out)], capture_output=True, text=True,
                           timeout=900, env={**os.environ, "KILLBENCH_CACHE": str(use_cache)})
        assert p.returncode == 0, p.stderr
        docs[flag] = json.loads(out.read_text())["mutants"]
    warm = {m["id"]: m for m in docs["--warm"]}
    plain = {m["id"]: m["verdict"] for m in docs["--no-warm"]}
    in_second = [m for m in warm.values() if m["function"] == "second"]
    in_first = [m for m in warm.values() if m["function"] == "first"]
    assert in_first and in_second
    # the first function's mutants run first and are killed by the covering test
    assert all(m["verdict"] == "killed" for m in in_first)
    assert any(m["runner"] == "warm" for m in in_second), "the warm path judged the second"
    assert all(m["verdict"] == "survived" for m in in_second
               if m["runner"] == "warm" and "100" in (m["original"] + m["replacement"])), \
        {m["id"]: (m["original"], m["replacement"], m["verdict"]) for m in in_second}
    assert {i: m["verdict"] for i, m in warm.items()} == plain
