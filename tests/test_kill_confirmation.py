"""A kill seen under a mutant's covering tests counts only if those tests pass on clean code
when run the same way on their own (docs/DESIGN.md, "Kills under a covering selection are
confirmed"). Here the only test covering `lookup` passes only after another file's test
has filled the registry: alone it fails on clean code too, so its failure under a mutant of
`lookup` is no kill of that selection; the mutant is judged on the full suite instead. The
warm runner confirms in its own collected session, the plain path in a fresh process: both
must reach the same verdicts, and both must fall back to the full suite here."""

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
name = "registry"
version = "0.1"

[tool.setuptools.packages.find]
where = ["src"]

[tool.killbench]
mutate = ["src/registry"]
tests = ["tests"]
test_requires = ["pytest==9.0.3"]
"""

SOURCE = '''\
REGISTRY = {}


def register(key, value):
    REGISTRY[key] = value


def lookup(key):
    return REGISTRY.get(key, 0) * 2


def double(x):
    return x * 2
'''

TEST_A = '''\
from registry import double, register


def test_register():
    register("a", 21)
    assert double(2) == 4
'''

TEST_B = '''\
from registry import lookup


def test_lookup():
    assert lookup("a") == 42
'''


# A conftest that imports the target while pytest configures (semver's does): the forked
# runner's server then holds clean code, so its full-suite run of the mutant must not be read
# as the mutant's (it goes to the plain path, as for any mutant such a server cannot apply).
CONFTEST = "import registry  # noqa: F401\n"


@pytest.mark.slow
@pytest.mark.parametrize("conftest", [None, CONFTEST], ids=["no-conftest", "conftest-imports-target"])
def test_a_covering_selection_that_fails_alone_on_clean_code_sends_the_mutant_to_the_full_suite(
        use_cache, tmp_path, conftest):
    project = tmp_path / "registry"
    (project / "src" / "registry").mkdir(parents=True)
    (project / "tests").mkdir()
    if conftest:
        (project / "tests" / "conftest.py").write_text(conftest)
    (project / "pyproject.toml").write_text(PYPROJECT)
    (project / "src" / "registry" / "__init__.py").write_text(SOURCE)
    (project / "tests" / "test_a.py").write_text(TEST_A)
    (project / "tests" / "test_b.py").write_text(TEST_B)
    docs = {}
    for flag in ("--warm", "--no-warm"):
        out = tmp_path / f"{flag}.json"
        p = subprocess.run([sys.executable, "-m", "killbench.cli", "mutate", str(project), flag,
                            "--jobs", "1", "--fresh", "--json", str(out)], capture_output=True,
                           text=True, timeout=900, env={**os.environ, "KILLBENCH_CACHE": str(use_cache)})
        assert p.returncode == 0, p.stderr
        docs[flag] = {m["id"]: m for m in json.loads(out.read_text())["mutants"]}
    warm, plain = docs["--warm"], docs["--no-warm"]
    in_lookup = [m for m in warm.values() if m["function"] == "lookup"]
    assert in_lookup
    for m in in_lookup:
        assert m["covered_by"] == ["tests/test_b.py::test_lookup"], m
    # `* 2` -> `/ 2` (or any change of the result): test_b fails under the mutant, but it fails
    # alone on clean code as well, so the kill stands only on the full suite
    killed = [m for m in in_lookup if m["verdict"] == "killed"]
    assert killed, {m["id"]: (m["original"], m["replacement"], m["verdict"]) for m in in_lookup}
    for m in killed:
        assert m["selection"] == "full", m
        assert "fail alone on clean code" in (m["detail"] or ""), m
    assert any(m["runner"] == "warm" for m in killed), "the warm runner judged none of them"
    # the other functions' mutants are confirmed on their covering tests, which pass alone
    in_double = [m for m in warm.values() if m["function"] == "double" and m["verdict"] == "killed"]
    assert in_double and all(m["selection"] == "covering" for m in in_double)
    assert {i: (m["verdict"], m["selection"]) for i, m in warm.items()} == \
        {i: (m["verdict"], m["selection"]) for i, m in plain.items()}


CACHED = '''\
_TABLE = {}


def table():
    if not _TABLE:
        _TABLE["a"] = 1
        _TABLE["b"] = 2
    return _TABLE


def first():
    return table()["a"]
'''

TEST_FIRST = '''\
from registry import first


def test_first():
    assert first() == 1
'''

TEST_TABLE = '''\
from registry import table


def test_table():
    assert table()["b"] == 2
'''


@pytest.mark.slow
def test_a_survivor_of_its_covering_tests_is_judged_again_on_the_whole_suite(use_cache, tmp_path):
    """`_TABLE["b"] = 2` runs once, while test_first fills the cache, so test_first is its only
    covering test and passes whatever the line stores; test_table, which runs later and never
    executes the line, reads the value. The mutant survives its covering tests and dies on the
    whole suite: a survivor is only reported once the whole suite agrees."""
    project = tmp_path / "registry"
    (project / "src" / "registry").mkdir(parents=True)
    (project / "tests").mkdir()
    (project / "pyproject.toml").write_text(PYPROJECT)
    (project / "src" / "registry" / "__init__.py").write_text(CACHED)
    (project / "tests" / "test_first.py").write_text(TEST_FIRST)
    (project / "tests" / "test_table.py").write_text(TEST_TABLE)
    docs = {}
    for flag in ("--confirm-survivors", "--no-confirm-survivors"):
        out = tmp_path / f"{flag}.json"
        p = subprocess.run([sys.executable, "-m", "killbench.cli", "mutate", str(project), flag,
                            "--jobs", "1", "--fresh", "--json", str(out)], capture_output=True,
                           text=True, timeout=900, env={**os.environ, "KILLBENCH_CACHE": str(use_cache)})
        assert p.returncode == 0, p.stderr
        docs[flag] = {m["id"]: m for m in json.loads(out.read_text())["mutants"]}
    stores_b = [m for m in docs["--confirm-survivors"].values()
                if m["line"] == 7 and m["original"] == "2" and m["operator"] == "number-constant"]
    assert len(stores_b) == 1, [(m["line"], m["original"], m["operator"]) for m in docs["--confirm-survivors"].values()]
    m = stores_b[0]
    assert m["covered_by"] == ["tests/test_first.py::test_first"], m
    assert (m["verdict"], m["selection"]) == ("killed", "full"), m
    assert m["killed_by"]["test"] == "tests/test_table.py::test_table", m
    unconfirmed = docs["--no-confirm-survivors"][m["id"]]
    assert (unconfirmed["verdict"], unconfirmed["selection"]) == ("survived", "covering"), unconfirmed
