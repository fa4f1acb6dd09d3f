"""Bad input gets a clear error naming what to change; the journal never loses or
double-counts a result."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from killbench.config import load_local, load_pin, resolve
from killbench.errors import ExitCode, UserError
from killbench.journal import Journal, set_aside

GOOD_PIN = '''
name = "demo"
version = "1.0"
sdist_sha256 = "%s"
import_names = ["demo"]
mutate = ["src/demo"]
tests = ["tests"]
test_requires = ["pytest==9.0.3"]
''' % ("a" * 64)


def test_pin_loads(tmp_path):
    p = tmp_path / "demo.toml"
    p.write_text(GOOD_PIN)
    spec = load_pin(p)
    assert spec.name == "demo" and spec.kind == "pin" and spec.sdist_sha256 == "a" * 64


@pytest.mark.parametrize("edit, message", [
    (lambda s: s.replace('version = "1.0"\n', ""), "missing key `version`"),
    (lambda s: s.replace("a" * 64, "xyz"), "64 hex digits"),
    (lambda s: s.replace('tests = ["tests"]', 'tests = "tests"'), "must be a list of strings"),
    (lambda s: s + 'deselect = ["tests/t.py::x"]\n', "needs a reason"),
    (lambda s: s + "oops = [\n", "not valid TOML"),
])
def test_bad_pins(tmp_path, edit, message):
    p = tmp_path / "demo.toml"
    p.write_text(edit(GOOD_PIN))
    with pytest.raises(UserError, match=message.replace("`", ".").replace("[", r"\[")):
        load_pin(p)


def test_local_project_needs_its_table(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    with pytest.raises(UserError, match=r"\[tool.killbench\]"):
        load_local(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.killbench]\nmutate = ['src']\n")
    with pytest.raises(UserError, match="missing `tests`, `test_requires`"):
        load_local(tmp_path)


def test_a_misspelt_key_is_refused_with_the_nearest(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "pyproject.toml").write_text(
        "[tool.killbench]\nmutate = ['src']\ntests = ['tests']\ntest_requires = []\n"
        "excludes = ['src/x.py']\n")
    with pytest.raises(UserError, match="unknown key `excludes`; did you mean `exclude`"):
        load_local(tmp_path)
    p = tmp_path / "one.toml"
    p.write_text(GOOD_PIN + "pytest_arg = ['-x']\n")
    with pytest.raises(UserError, match="unknown key `pytest_arg`; did you mean `pytest_args`"):
        load_pin(p)
    p.write_text(GOOD_PIN + "zzz = 1\n")
    with pytest.raises(UserError, match="unknown key `zzz`; the keys are: deselect"):
        load_pin(p)


def test_unknown_target_lists_known_pins(tmp_path):
    (tmp_path / "one.toml").write_text(GOOD_PIN)
    with pytest.raises(UserError, match="known pins: one"):
        resolve("nope", pins_dir=tmp_path)


def test_cli_bad_input_exit_code(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "killbench.cli", "mutate", str(tmp_path / "missing")],
                          capture_output=True, text=True)
    assert proc.returncode == ExitCode.USER_ERROR
    assert "unknown target" in proc.stderr and "Traceback" not in proc.stderr


def test_journal_resumes_and_drops_a_torn_line(tmp_path):
    path = tmp_path / "journal.jsonl"
    j = Journal(path, {"fingerprint": "f"})
    j.append("a", {"outcome": {"verdict": "killed"}})
    j.append("b", {"outcome": {"verdict": "survived"}})
    j.close()
    with open(path, "a") as fh:
        fh.write('{"id": "c", "outc')  # the process died mid-write
    j2 = Journal(path, {"fingerprint": "f"})
    assert sorted(j2.entries) == ["a", "b"] and j2.duplicates == 0
    j2.append("c", {"outcome": {"verdict": "timeout"}})
    j2.close()
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [x.get("id") for x in lines] == [None, "a", "b", "c"]


def test_journal_refuses_other_settings(tmp_path):
    path = tmp_path / "journal.jsonl"
    Journal(path, {"fingerprint": "f"}).close()
    with pytest.raises(UserError, match="--fresh"):
        Journal(path, {"fingerprint": "g"})
    aside = set_aside(path)
    assert aside.exists() and not path.exists()


def test_a_cache_entry_published_first_by_another_process_is_kept(tmp_path, monkeypatch):
    """Two processes that both miss the cache both build the entry; the one that renames
    second adopts the first one's (it failed at the rename: ENOTEMPTY)."""
    import shutil as sh
    from pathlib import Path

    from killbench import targets
    from killbench.config import load_local

    monkeypatch.setenv("KILLBENCH_CACHE", str(tmp_path / "cache"))
    project = tmp_path / "proj"
    (project / "src").mkdir(parents=True)
    (project / "src" / "m.py").write_text("X = 1\n")
    (project / "tests").mkdir()
    (project / "pyproject.toml").write_text(
        '[tool.killbench]\nname = "m"\nmutate = ["src/m.py"]\ntests = ["tests"]\ntest_requires = ["pytest"]\n')
    spec = load_local(project)
    real = sh.copytree

    def copy_while_another_finishes(src, dst, *args, **kw):
        out = real(src, dst, *args, **kw)
        if Path(src) != project:
            return out
        digest = targets.tree_digest(spec.project_dir)
        other = targets.cache_subdir("trees") / f"local-{spec.name}-{digest[:16]}"
        real(src, other / "tree", **kw)
        (other / ".killbench-ready").write_text("ok\n")
        (other / "tree" / "theirs").write_text("")
        return out

    monkeypatch.setattr(targets.shutil, "copytree", copy_while_another_finishes)
    tree, _ = targets._snapshot_local(spec)
    assert (tree / "theirs").exists()  # the first one published is the one used
    assert [p.name for p in tree.parent.parent.iterdir()] == [tree.parent.name]  # ours is gone
