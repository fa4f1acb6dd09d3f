"""Verdicts from exit codes and structured events: each rule on a constructed report."""

from __future__ import annotations

from pathlib import Path

import pytest

from killbench.records import RunReport, TestEvent
from killbench.runner import classify


class FakeSandbox:
    root = Path("/sb")

    def contains(self, file):
        return bool(file) and str(file).startswith("/sb/")


def rep(returncode, tests=(), modules=None, **kw):
    r = RunReport(returncode=returncode, timed_out=kw.pop("timed_out", False), wall_s=1.0,
                  started=True, finished=kw.pop("finished", True))
    r.tests = list(tests)
    r.modules = {"pkg": "/sb/site/pkg/__init__.py"} if modules is None else modules
    for k, v in kw.items():
        setattr(r, k, v)
    return r


PASS = TestEvent("t.py::a", "call", "passed", None, False, False, 0.1)
FAIL_ASSERT = TestEvent("t.py::a", "call", "failed", "builtins.AssertionError", True, False, 0.1)
FAIL_EXC = TestEvent("t.py::a", "call", "failed", "builtins.KeyError", False, False, 0.1)
FAIL_SETUP = TestEvent("t.py::a", "setup", "failed", "builtins.AssertionError", True, False, 0.1)


@pytest.mark.parametrize("report, verdict, kind", [
    (rep(0, [PASS]), "survived", None),
    (rep(1, [FAIL_ASSERT]), "killed", "assertion"),
    (rep(1, [FAIL_EXC]), "killed", "exception"),
    (rep(1, [FAIL_SETUP]), "killed", "exception"),
    (rep(None, [], timed_out=True, finished=False), "timeout", None),
    (rep(0, []), "harness-error", None),  # exit 0 but nothing ran
    (rep(5, []), "harness-error", None),  # nothing collected
    (rep(0, [PASS], modules={"pkg": "/elsewhere/pkg/__init__.py"}), "harness-error", None),
    (rep(0, [PASS], modules={"pkg": None}), "harness-error", None),  # never imported
    (rep(0, [PASS], sources_changed=["site/pkg/x.py"]), "harness-error", None),
    (rep(2, [], collect_errors=[{"nodeid": "t.py", "message": "ImportError"}]), "check", None),
    (rep(4, [], finished=False), "check", None),
    (rep(-11, [], finished=False), "check", None),
    (rep(0, [PASS], missing=["t.py::gone"]), "missing", None),
])
def test_classify(report, verdict, kind):
    got, killed_by, _ = classify(report, FakeSandbox())
    assert got == verdict
    assert (killed_by.kind if killed_by else None) == kind
