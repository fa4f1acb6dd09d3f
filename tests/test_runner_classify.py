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
    # a malformed line in the middle of the event log: something besides the probe wrote it
    (rep(0, [PASS], log_problems=["event line 3 is not a JSON object"]), "harness-error", None),
    # a line cut by a kill at the end is only noted
    (rep(0, [PASS], log_problems=["the last event line was cut short (the run was killed)"]),
     "survived", None),
])
def test_classify(report, verdict, kind):
    got, killed_by, _ = classify(report, FakeSandbox())
    assert got == verdict
    assert (killed_by.kind if killed_by else None) == kind


def test_a_file_coverage_could_not_measure_is_a_harness_error_not_unreached():
    from types import SimpleNamespace

    from killbench.harness import decided_without_run
    from killbench.mutate import Candidate
    from killbench.records import Mutant, Reach

    m = Mutant(id="a", path="pkg/m.py", line=1, end_line=1, col=0, end_col=1, start=0, end=1,
               function="f", operator="x", original="a", replacement="b")
    unreached = Reach(False, (), False)
    base = SimpleNamespace(coverage={"pkg/m.py": {"statements": [], "executed": {},
                                                  "error": "NoSource('no source')"}})
    out = decided_without_run(Candidate(m, True), unreached, base)
    assert out.verdict == "harness-error" and "could not be measured" in out.detail
    fine = SimpleNamespace(coverage={"pkg/m.py": {"statements": [1], "executed": {}}})
    assert decided_without_run(Candidate(m, True), unreached, fine).verdict == "survived"


def test_read_report_keeps_only_a_torn_last_line_quiet(tmp_path):
    from killbench.executor import ProcessResult
    from killbench.sandbox import read_report

    proc = ProcessResult(0, None, False, 1.0, 0.5, 1, "none")
    path = tmp_path / "report.jsonl"
    path.write_text('{"event": "start"}\nnot json\n{"event": "finish", "exitstatus": 0, "modules": {}}\n{"ev')
    r = read_report(path, proc)
    assert r.started and r.finished
    assert r.log_problems == ["the last event line was cut short (the run was killed)",
                              "event line 2 is not a JSON object"]


def test_nothing_collected_is_read_from_pytests_own_exit_status_too():
    # the process's code can be another's (a wrapper's); pytest's own status says 5
    got, _, detail = classify(rep(1, [], exitstatus=5), FakeSandbox())
    assert (got, detail) == ("harness-error", "no tests were collected: nothing judged this mutant")
    got, _, detail = classify(rep(0, []), FakeSandbox())
    assert (got, detail) == ("harness-error", "exit 0 but no test ran: nothing judged this mutant")


def test_the_run_settings_defaults_are_the_clis():
    from killbench.cli import mutate
    from killbench.runner import RunSettings

    defaults = {p.name: p.default for p in mutate.params}
    assert RunSettings() == RunSettings(defaults["timeout_factor"], defaults["timeout_floor"],
                                        defaults["warm"])
    assert (defaults["timeout_factor"], defaults["timeout_floor"], defaults["warm"]) == (3.0, 10.0, True)


def test_a_kill_is_confirmed_by_the_part_of_the_selection_that_ran_and_parts_answer_for_each_other(
        monkeypatch):
    from killbench import runner

    clean_runs = []
    fails_from = {"t3"}  # on clean code, a run that reaches t3 fails (t3 needs other tests)

    def clean_passes(sandbox, baseline, tests, settings):
        clean_runs.append(list(tests))
        return not (fails_from & set(tests)), None

    monkeypatch.setattr(runner, "_clean_passes", clean_passes)
    selection = ["t1", "t2", "t3", "t4"]
    killed_at_t2 = RunReport(returncode=1, timed_out=False, wall_s=0.1,
                             begun=["t1", "t2", "t1"])  # repeated ids counted once
    assert runner.ran_until_kill(killed_at_t2, selection) == ["t1", "t2"]
    assert runner.ran_until_kill(RunReport(returncode=1, timed_out=False, wall_s=0.1),
                                 selection) == selection  # nothing began: all of it

    known = runner.CleanSelections()
    assert known.passes(None, None, selection, None, ["t1", "t2"]) is True
    assert clean_runs == [["t1", "t2"]]  # only the part that saw the kill is run
    assert known.passes(None, None, selection, None, ["t1"]) is True
    assert known.runs == 1  # a shorter part of a passing part: no run
    assert known.passes(None, None, selection, None, ["t1", "t2", "t3"]) is False
    assert known.passes(None, None, selection, None, selection) is False
    assert known.runs == 2  # a longer part of a failing part fails without a run
    assert known.passes(None, None, selection, None, ["t2"]) is True
    assert known.runs == 3  # not a leading part of the selection: judged on its own
    assert clean_runs[-1] == ["t2"]


# ---- edges found by mutating killbench.runner

def test_run_settings_cannot_be_changed_once_made():
    import dataclasses

    from killbench.runner import RunSettings

    with pytest.raises(dataclasses.FrozenInstanceError):
        RunSettings().warm = False


def test_a_run_that_imported_nothing_is_a_problem_only_where_an_import_is_required():
    from killbench.runner import _imports_ok

    report = rep(0, [PASS], modules={})
    assert _imports_ok(report, FakeSandbox()) is None
    assert _imports_ok(report, FakeSandbox(), require=True) == \
        "the selected tests never imported the target"


def test_the_first_failure_skips_passes_and_expected_failures():
    from killbench.runner import _first_failure

    xfail = TestEvent("t.py::x", "call", "failed", "builtins.AssertionError", True, True, 0.1)
    failed = TestEvent("t.py::b", "call", "failed", "builtins.KeyError", False, False, 0.1)
    got = _first_failure(rep(1, [PASS, xfail, failed]))
    assert (got.kind, got.test, got.exc_type) == ("exception", "t.py::b", "builtins.KeyError")


def test_clean_code_runs_in_the_warm_runner_only_when_asked(monkeypatch):
    from killbench import runner

    calls = []

    class Warm:
        def run(self, mutant, tests, timeout, cpu_seconds=None):
            calls.append(("warm", mutant, list(tests)))
            return rep(0, [PASS])

    class Sb(FakeSandbox):
        warm = Warm()
        fork = None
        tree = Path("/nonexistent")

        class target:
            class spec:
                tests = ["t.py"]

        def run_pytest(self, args, select, exclude, timeout, limits=None):
            calls.append(("plain", None, list(select)))
            return rep(0, [PASS]), None

    class Baseline:
        excluded = []

        def timeout_for(self, tests, factor, floor):
            return 1.0

        def cpu_budget_for(self, tests, factor, floor, warm=False):
            return 1.0

    settings = runner.RunSettings()
    runner._run(Sb(), Baseline(), ["t.py::a"], settings)
    runner._run(Sb(), Baseline(), ["t.py::a"], settings, clean_warm=True)
    assert calls == [("plain", None, ["t.py::a"]), ("warm", None, ["t.py::a"])]


def test_a_known_part_answers_again_at_its_own_length(monkeypatch):
    from killbench import runner

    monkeypatch.setattr(runner, "_clean_passes",
                        lambda sandbox, baseline, tests, settings: ("bad" not in tests, None))
    known = runner.CleanSelections()
    assert known.passes(None, None, ["a", "b", "bad"], None, ["a", "b"]) is True
    assert known.passes(None, None, ["a", "b", "bad"], None, ["a", "b"]) is True
    assert known.runs == 1
    assert known.passes(None, None, ["a", "b", "bad"], None, ["a", "b", "bad"]) is False
    assert known.passes(None, None, ["a", "b", "bad"], None, ["a", "b", "bad"]) is False
    assert known.runs == 2
    # a failing part says nothing of a shorter one that was never run
    fails = runner.CleanSelections()
    assert fails.passes(None, None, ["bad", "x"], None, ["bad", "x"]) is False
    assert fails.passes(None, None, ["bad", "x"], None, ["bad"]) is False
    assert fails.runs == 2


def test_test_files_are_the_file_part_of_each_node_id():
    from killbench.runner import test_files

    assert test_files(["b.py::C::t", "a.py::t[x::y]", "b.py::u", "c.py"]) == ["a.py", "b.py", "c.py"]


def test_a_run_goes_to_the_warm_runner_the_forked_runner_or_a_process_of_its_own(tmp_path):
    from killbench import runner

    (tmp_path / "t.py").write_text("")
    # told apart by their exit codes
    warm_report, fork_report, plain_report = rep(0, [PASS]), rep(1, [PASS]), rep(2, [PASS])
    calls = []

    class Runner:
        def __init__(self, name, answer):
            self.name, self.answer = name, answer

        def run(self, mutant, tests, timeout, cpu_seconds=None):
            calls.append((self.name, tests))
            return self.answer

    class Sb(FakeSandbox):
        tree = tmp_path

        def __init__(self, warm=None, fork=None):
            self.warm, self.fork = warm, fork

        class target:
            class spec:
                tests = ["suite/"]

        def run_pytest(self, args, select, exclude, timeout, limits=None):
            calls.append(("plain", list(args), select))
            return plain_report, None

    class Baseline:
        excluded = []

        def timeout_for(self, tests, factor, floor):
            return 1.0

        def cpu_budget_for(self, tests, factor, floor, warm=False):
            return 1.0

    on, off = runner.RunSettings(), runner.RunSettings(warm=False)
    mutant = object()

    def go(sb, tests, settings=on):
        calls.clear()
        return runner._run(sb, Baseline(), tests, settings, mutant=mutant), list(calls)

    assert go(Sb(warm=Runner("warm", warm_report)), ["t.py::a"]) == \
        (warm_report, [("warm", ["t.py::a"])])
    # the warm runner could not take it: a process of its own, on the test's file
    assert go(Sb(warm=Runner("warm", None)), ["t.py::a"]) == \
        (plain_report, [("warm", ["t.py::a"]), ("plain", ["-x", "--tb=line", "t.py"], ["t.py::a"])])
    # a node id whose file is not under the tree: the suite's own arguments, selected by id
    assert go(Sb(), ["pkg/u.py::a"]) == (plain_report, [("plain", ["-x", "--tb=line", "suite/"], ["pkg/u.py::a"])])
    assert go(Sb(), ["t.py::a", "pkg/u.py::a"])[1] == [("plain", ["-x", "--tb=line", "suite/"], ["t.py::a", "pkg/u.py::a"])]
    # the whole suite: the forked runner, else a process of its own
    assert go(Sb(fork=Runner("fork", fork_report)), None) == (fork_report, [("fork", None)])
    assert go(Sb(fork=Runner("fork", None)), None) == \
        (plain_report, [("fork", None), ("plain", ["-x", "--tb=line", "suite/"], None)])
    # a selection never goes to the forked runner; --no-warm goes to neither
    assert go(Sb(fork=Runner("fork", fork_report)), ["t.py::a"])[1] == [("plain", ["-x", "--tb=line", "t.py"], ["t.py::a"])]
    assert go(Sb(warm=Runner("warm", warm_report), fork=Runner("fork", fork_report)), None, off)[1] == \
        [("plain", ["-x", "--tb=line", "suite/"], None)]
    assert go(Sb(warm=Runner("warm", warm_report)), ["t.py::a"], off)[1] == \
        [("plain", ["-x", "--tb=line", "t.py"], ["t.py::a"])]
