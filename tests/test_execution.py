"""`ctx.workspace()`: a generator's own commands, run with the target importable in a private
copy, under the run's isolation, its deadline and a tamper check (killbench/execution.py).
Driven on the fixture target `basic`, at both isolation levels where bwrap exists."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from killbench import executor
from killbench.config import resolve
from killbench.execution import Workspace
from killbench.models import BudgetExhausted
from killbench.targets import prepare

LEVELS = ["none"] + ([] if executor.unavailable("bwrap") else ["bwrap"])
REPORT = """
import json, os, sys
import basic
json.dump({"file": basic.__file__, "cwd": os.getcwd(), "path": sys.path,
           "hashseed": os.environ.get("PYTHONHASHSEED")}, open("report.json", "w"))
"""


@pytest.fixture
def basic(fixture_target, use_cache):
    return prepare(resolve(str(fixture_target("basic"))))


def workspace(target, tmp_path, level, **kw) -> Workspace:
    return Workspace(target, tmp_path / f"ws-{level}", isolation=level, **kw)


@pytest.mark.slow
@pytest.mark.parametrize("level", LEVELS)
def test_a_command_imports_the_targets_copy_and_writes_only_its_output(basic, tmp_path, level):
    ws = workspace(basic, tmp_path, level, hashseed="7")
    res = ws.run([ws.python, "-c", REPORT], timeout=60)
    assert res.ok, res.stderr
    assert res.cpu_s > 0  # the command's own CPU time, also from inside bwrap
    report = json.loads((res.out / "report.json").read_text())
    root = (tmp_path / f"ws-{level}").resolve()
    # the package comes from the workspace's copy, never from the project the user gave
    assert Path(report["file"]).resolve().is_relative_to(root)
    assert Path(report["cwd"]).resolve() == res.out.resolve()
    assert report["hashseed"] == "7"
    assert str(ws.import_paths[0]) in report["path"]
    # a second run gets an output directory of its own
    again = ws.run([ws.python, "-c", "open('x', 'w').write('1')"], timeout=60)
    assert again.ok and again.out != res.out and not (again.out / "report.json").exists()
    assert res.tampered == [] and again.tampered == []


@pytest.mark.slow
@pytest.mark.parametrize("level", LEVELS)
def test_a_command_that_edits_the_copy_is_reported_and_the_copy_rebuilt(basic, tmp_path, level):
    ws = workspace(basic, tmp_path, level)
    edit = ("import basic, pathlib\n"
            "p = pathlib.Path(basic.__file__)\n"
            "p.write_text(p.read_text() + '\\nTHRESHOLD = 0\\n')\n")
    res = ws.run([ws.python, "-c", edit], timeout=60)
    if level == "bwrap":
        assert res.returncode != 0 and "Read-only file system" in res.stderr  # could not write
        assert res.tampered == []
    else:
        assert res.tampered, "an edit of the target's copy must be reported"
    check = ws.run([ws.python, "-c", "import basic; assert basic.THRESHOLD == 10"], timeout=60)
    assert check.ok, check.stderr  # the next command sees the clean code again


@pytest.mark.slow
def test_without_isolation_a_file_planted_in_the_shared_environment_is_reported_and_removed(
        basic, tmp_path):
    # only without bwrap can a command reach the environment every run shares (under bwrap it
    # is mounted read-only): the tamper check must see the planted startup file and remove it
    ws = workspace(basic, tmp_path, "none")
    site = next(Path(p) for p in ws.dependency_paths if p.name == "site-packages")
    plant = site / "zz_killbench_planted.pth"
    res = ws.run([ws.python, "-c", f"open({str(plant)!r}, 'w').write('import os\\n')"], timeout=60)
    assert res.ok, res.stderr
    rel = plant.relative_to(basic.env.root).as_posix()
    assert f"env/{rel}" in res.tampered
    assert not plant.exists()
    assert ws.run([ws.python, "-c", "pass"], timeout=60).tampered == []


@pytest.mark.slow
@pytest.mark.skipif("bwrap" not in LEVELS, reason="bubblewrap is not available")
def test_under_bwrap_a_command_has_no_network_and_cannot_write_outside_its_output(basic, tmp_path):
    ws = workspace(basic, tmp_path, "bwrap")
    outside = tmp_path / "outside.txt"
    probe = ("import socket, sys\n"
             f"try:\n    open({str(outside)!r}, 'w').write('x')\nexcept OSError:\n    pass\n"
             "s = socket.socket()\n"
             "try:\n    s.connect(('1.1.1.1', 53)); print('connected')\n"
             "except OSError:\n    print('no network')\n")
    res = ws.run([ws.python, "-c", probe], timeout=60)
    assert res.ok, res.stderr
    assert res.stdout.strip() == "no network"
    assert not outside.exists()


@pytest.mark.slow
def test_the_targets_dependencies_come_after_the_commands_own_environment(basic, tmp_path):
    ws = workspace(basic, tmp_path, "none")
    show = "import json, sys; json.dump(sys.path, open('path.json', 'w'))"
    res = ws.run([sys.executable, "-c", show], timeout=60)  # a tool from another environment
    assert res.ok, res.stderr
    path = json.loads((res.out / "path.json").read_text())
    deps = [str(p) for p in ws.dependency_paths]
    own = [p for p in path if p.startswith(sys.prefix) and p.endswith("site-packages")]
    assert deps and own
    assert path.index(str(ws.import_paths[0])) < path.index(own[0]) < path.index(deps[0])


@pytest.mark.slow
def test_the_deadline_of_the_generation_cuts_a_command_short_then_refuses(basic, tmp_path):
    left = [1.5]
    ws = workspace(basic, tmp_path, "none", seconds_left=lambda: left[0])
    res = ws.run([ws.python, "-c", "import time; time.sleep(30)"], timeout=60)
    assert res.timed_out and res.returncode is None and not res.ok
    assert res.wall_s < 20
    left[0] = 0.0
    with pytest.raises(BudgetExhausted):
        ws.run([ws.python, "-c", "pass"], timeout=60)


@pytest.mark.slow
def test_bad_commands_are_clear_errors(basic, tmp_path):
    from killbench.errors import UserError

    ws = workspace(basic, tmp_path, "none")
    with pytest.raises(UserError, match="no such program"):
        ws.run(["no-such-program-here"], timeout=5)
    with pytest.raises(UserError, match="empty command"):
        ws.run([], timeout=5)
    with pytest.raises(UserError, match="timeout"):
        ws.run([ws.python, "-c", "pass"], timeout=0)


@pytest.mark.slow
def test_the_workspace_plugin_of_the_docs_runs_as_written(fixture_target, use_cache, tmp_path,
                                                         monkeypatch):
    """docs/generators.md's workspace example, cut from the page and run as a plug-in: a
    generator written from the docs alone runs its own code in the target's environment."""
    import re

    from killbench.run import run_generator

    doc = (Path(__file__).resolve().parent.parent / "docs" / "generators.md").read_text()
    [code] = [b for b in re.findall(r"```python\n(.*?)```", doc, re.S)
              if "class SmallIntsGenerator" in b]
    (tmp_path / "small_ints.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    out = run_generator("small_ints:SmallIntsGenerator", [str(fixture_target("basic"))],
                        out=tmp_path / "run", jobs=2)
    summary = json.loads((out / "summary.json").read_text())["basic"]
    subs = [json.loads(line) for line in (out / "candidates.jsonl").read_text().splitlines()]
    sources = [(out / "candidates" / f"{s['candidate']}.py").read_text() for s in subs]
    # is_big(10) is False and is_big(11) True: the boundary mutant's test is among them
    assert any("assert repr(is_big(10)) == 'False'" in s for s in sources)
    assert summary["kept_tests"] >= 1
