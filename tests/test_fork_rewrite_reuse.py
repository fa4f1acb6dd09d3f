"""The forked runner's server rewrites the suite's asserts once; a child reuses that code
object only while the file holds the bytes it was made from. A stale one would run the
clean version of a file that changed (a mutated module pytest rewrites), so the check on
the bytes is what keeps the saving from touching a verdict."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
from _pytest.assertion import rewrite

from killbench.locations import PROBE_DIR


@pytest.fixture
def fork_plugin(monkeypatch):
    monkeypatch.syspath_prepend(str(PROBE_DIR))
    import killbench_fork

    monkeypatch.setattr(rewrite, "_rewrite_test", rewrite._rewrite_test)  # restored after
    return killbench_fork


def _config(tmp_path: Path, args: list[str], pyargs: bool = False):
    return types.SimpleNamespace(
        args=args, rootpath=tmp_path, option=types.SimpleNamespace(pyargs=pyargs),
        invocation_params=types.SimpleNamespace(dir=tmp_path),
        getini=lambda name: ["test_*.py", "*_test.py"] if name == "python_files" else False)


def _run(code: types.CodeType) -> dict:
    ns: dict = {}
    exec(code, ns)
    return ns


def test_a_child_reuses_the_rewrite_of_an_unchanged_file_and_rewrites_a_changed_one(
        fork_plugin, tmp_path):
    assert any(isinstance(h, rewrite.AssertionRewritingHook) for h in sys.meta_path)
    (tmp_path / "tests").mkdir()
    test = tmp_path / "tests" / "test_x.py"
    test.write_text("VALUE = 1\n\ndef test_value():\n    assert VALUE == 1\n")
    (tmp_path / "conftest.py").write_text("X = 1\n")
    config = _config(tmp_path, ["tests"])
    fork_plugin._rewritten(config)

    _, first = rewrite._rewrite_test(test, config)
    _, again = rewrite._rewrite_test(test, config)
    assert first is again  # made once, in the server
    _, conftest = rewrite._rewrite_test(tmp_path / "conftest.py", config)
    assert _run(conftest)["X"] == 1

    test.write_text("VALUE = 2\n\ndef test_value():\n    assert VALUE == 1\n")  # same size
    _, changed = rewrite._rewrite_test(test, config)
    assert changed is not first
    ns = _run(changed)
    assert ns["VALUE"] == 2
    with pytest.raises(AssertionError) as info:
        ns["test_value"]()
    assert "assert 2 == 1" in str(info.value)  # rewritten: pytest's explanation, not a bare assert


def test_pyargs_packages_are_found_without_importing_them(fork_plugin, tmp_path, monkeypatch):
    pkg = tmp_path / "site" / "pkgx"
    (pkg / "tests").mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise RuntimeError('the server must not import the target')\n")
    (pkg / "tests" / "__init__.py").write_text("")
    (pkg / "tests" / "test_y.py").write_text("def test_y():\n    assert 1 + 1 == 2\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    config = _config(tmp_path, ["pkgx.tests"], pyargs=True)
    (pkg / "tests" / "helpers.py").write_text("X = 1\n")  # not a test module: never rewritten
    assert fork_plugin._suite_files(config) == [pkg / "tests" / "test_y.py"]
    assert "pkgx" not in sys.modules
    fork_plugin._rewritten(config)
    _, first = rewrite._rewrite_test(pkg / "tests" / "test_y.py", config)
    _, again = rewrite._rewrite_test(pkg / "tests" / "test_y.py", config)
    assert first is again
    assert "pkgx" not in sys.modules
