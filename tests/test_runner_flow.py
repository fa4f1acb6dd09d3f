"""How one mutant is run and judged (write, run, restore, classify, the reruns that confirm
or overturn a first reading), on a sandbox whose runs are scripted reports: each verdict
path of run_mutant and run_clean, fast and without a process."""

from __future__ import annotations

from pathlib import Path

import pytest

from killbench import runner
from killbench.mutate import apply
from killbench.records import Mutant, Reach, RunReport, TestEvent

MODULE = b"def f(x):\n    return x + 1\n"
MUT = Mutant(id="m1", path="pkg/mod.py", line=2, end_line=2, col=13, end_col=14,
             start=MODULE.index(b"+"), end=MODULE.index(b"+") + 1, function="f",
             operator="arith-swap", original="+", replacement="-")
PASS = TestEvent("t.py::a", "call", "passed", None, False, False, 0.1)
FAIL = TestEvent("t.py::a", "call", "failed", "builtins.AssertionError", True, False, 0.1)


def rep(returncode, tests=(), finished=True, **kw):
    r = RunReport(returncode=returncode, timed_out=False, wall_s=0.1, started=True, finished=finished)
    r.tests = list(tests)
    r.modules = {"pkg": "/sb/tree/pkg/__init__.py"}
    for k, v in kw.items():
        setattr(r, k, v)
    return r


class Baseline:
    tests = ["t.py::a", "t.py::b"]
    excluded = []

    def timeout_for(self, tests, factor, floor):
        return factor * 1.5 + floor  # 1.5 s expected

    def cpu_budget_for(self, tests, factor, floor, warm=False):
        return factor * 1.5 + floor - (0.5 if warm else 0.0)  # 0.5 s of start-up


class Sandbox:
    """Runs answer from `script` in turn; each call records the module text it ran on."""

    root = Path("/sb")
    warm = fork = None

    def __init__(self, tmp_path, script):
        self.tree = tmp_path / "tree"
        clean = tmp_path / "clean"
        for base in (self.tree, clean):
            (base / "pkg").mkdir(parents=True)
            (base / "pkg" / "mod.py").write_bytes(MODULE)
        (self.tree / "t.py").write_text("")
        self.target = type("T", (), {"tree": clean, "spec": type("S", (), {"tests": ["t.py"]})})
        self.script = list(script)
        self.calls = []
        self.budgets = []  # (deadline, CPU budget) of each run

    def contains(self, file):
        return bool(file) and str(file).startswith("/sb/")

    def write(self, path, content):
        (self.tree / path).write_bytes(content)

    def restore(self):
        (self.tree / "pkg/mod.py").write_bytes(MODULE)

    def run_pytest(self, args, select, exclude, timeout, limits=None):
        self.calls.append(((self.tree / "pkg/mod.py").read_bytes() != MODULE, select))
        self.budgets.append((timeout, limits.cpu_budget if limits else None))
        return self.script.pop(0), None


MUTATED, CLEAN = True, False


def go(tmp_path, script, tests=("t.py::a",), clean=None, settings=runner.RunSettings()):
    sb = Sandbox(tmp_path, script)
    out = runner.run_mutant(sb, Baseline(), MUT, None if tests is None else list(tests), settings,
                            clean=clean)
    assert (sb.tree / "pkg/mod.py").read_bytes() == MODULE  # always put back
    assert sb.script == []  # every scripted run was asked for
    return out, sb.calls


def test_a_mutant_the_tests_pass_on_survived(tmp_path):
    # its covering tests pass, and so does the whole suite it is then judged on
    out, calls = go(tmp_path, [rep(0, [PASS]), rep(0, [PASS])])
    assert (out.verdict, out.killed_by, out.selection, out.ran, out.runner) == \
        ("survived", None, "full", True, "plain")
    assert out.detail == "(survived its covering tests; judged on the full suite)"
    assert calls == [(MUTATED, ["t.py::a"]), (MUTATED, None)]
    assert 0.0 <= out.duration_s < 5.0
    # without the confirmation, the covering tests' word is the verdict
    out, calls = go(tmp_path / "2", [rep(0, [PASS])],
                    settings=runner.RunSettings(confirm_survivors=False))
    assert (out.verdict, out.selection, out.detail) == ("survived", "covering", None)
    assert calls == [(MUTATED, ["t.py::a"])]


def test_a_survivor_of_its_covering_tests_that_the_whole_suite_kills_is_killed(tmp_path):
    out, calls = go(tmp_path, [rep(0, [PASS]), rep(1, [FAIL])])
    assert (out.verdict, out.killed_by.test, out.selection) == ("killed", "t.py::a", "full")
    assert out.detail == "(survived its covering tests; judged on the full suite)"
    assert calls == [(MUTATED, ["t.py::a"]), (MUTATED, None)]
    # an odd end of that whole-suite run is checked on clean code, as any whole-suite run's
    out, calls = go(tmp_path / "2", [rep(0, [PASS]), rep(-11, [], finished=False), rep(0, [PASS])])
    assert (out.verdict, out.killed_by.kind, out.selection) == ("killed", "crash", "full")
    assert calls == [(MUTATED, ["t.py::a"]), (MUTATED, None), (CLEAN, None)]


def test_a_failing_test_kills_and_the_whole_suite_is_full(tmp_path):
    out, calls = go(tmp_path, [rep(1, [FAIL])], tests=None)
    assert (out.verdict, out.killed_by.kind, out.killed_by.test, out.selection) == \
        ("killed", "assertion", "t.py::a", "full")
    assert calls == [(MUTATED, None)]


def test_a_selection_with_tests_not_collected_is_run_again_as_the_whole_suite(tmp_path):
    out, calls = go(tmp_path, [rep(0, [PASS], missing=["t.py::a"]), rep(1, [FAIL])])
    assert (out.verdict, out.selection) == ("killed", "full")
    assert calls == [(MUTATED, ["t.py::a"]), (MUTATED, None)]
    out, _ = go(tmp_path / "2", [rep(0, [PASS], missing=["t.py::a"])], tests=None)
    assert (out.verdict, out.detail) == ("harness-error", "1 selected tests were not collected")


class Clean:
    def __init__(self, ok):
        self.ok, self.asked = ok, []

    def passes(self, sandbox, baseline, tests, settings, ran):
        self.asked.append((tests, ran))
        return self.ok


def test_a_kill_the_covering_tests_also_give_on_clean_code_is_judged_on_the_whole_suite(tmp_path):
    clean = Clean(False)
    out, calls = go(tmp_path, [rep(1, [FAIL], begun=["t.py::a"]), rep(0, [PASS])], clean=clean)
    assert (out.verdict, out.selection) == ("survived", "full")
    assert out.detail == "(covering tests fail alone on clean code; judged on the full suite)"
    assert calls == [(MUTATED, ["t.py::a"]), (MUTATED, None)]
    assert clean.asked == [(["t.py::a"], ["t.py::a"])]
    confirmed = Clean(True)
    out, calls = go(tmp_path / "2", [rep(1, [FAIL])], clean=confirmed)
    assert (out.verdict, out.selection, out.detail) == ("killed", "covering", None)
    assert len(confirmed.asked) == 1 and len(calls) == 1
    # a kill under the whole suite needs no confirmation
    whole = Clean(False)
    assert go(tmp_path / "3", [rep(1, [FAIL])], tests=None, clean=whole)[0].verdict == "killed"
    assert whole.asked == []


def test_a_run_that_ends_oddly_is_a_kill_only_when_the_same_tests_pass_on_clean(tmp_path):
    errors = [{"nodeid": "t.py", "message": "ImportError"}]
    out, calls = go(tmp_path / "a", [rep(2, [], collect_errors=errors), rep(0, [PASS])])
    assert (out.verdict, out.killed_by.kind, out.killed_by.test) == ("killed", "collection-error", "t.py")
    assert out.detail == "pytest exit 2 under the mutant; the same tests pass on clean code"
    assert calls == [(MUTATED, ["t.py::a"]), (CLEAN, ["t.py::a"])]
    out, _ = go(tmp_path / "b", [rep(4, [], finished=False), rep(0, [PASS])])
    assert (out.verdict, out.killed_by.kind, out.killed_by.test) == ("killed", "collection-error", None)
    out, _ = go(tmp_path / "c", [rep(-11, [], finished=False), rep(0, [PASS])])
    assert (out.verdict, out.killed_by.kind) == ("killed", "crash")
    assert out.detail == "pytest signal 11 under the mutant; the same tests pass on clean code"
    # the whole suite's odd end is checked on the whole suite
    out, calls = go(tmp_path / "d", [rep(3, [], finished=False), rep(0, [PASS])], tests=None)
    assert out.killed_by.kind == "crash" and calls == [(MUTATED, None), (CLEAN, None)]
    assert out.detail.startswith("pytest exit 3 under")


def test_the_clean_check_of_an_odd_end_runs_once_per_selection_and_only_a_pass_is_kept(tmp_path):
    clean = runner.CleanSelections()
    errors = [{"nodeid": "t.py", "message": "ImportError"}]
    # the whole suite: the first odd end runs it on clean code, the next ones reuse the pass
    _, calls = go(tmp_path / "a", [rep(2, [], collect_errors=errors), rep(0, [PASS])], tests=None,
                  clean=clean)
    assert calls == [(MUTATED, None), (CLEAN, None)]
    out, calls = go(tmp_path / "b", [rep(2, [], collect_errors=errors)], tests=None, clean=clean)
    assert calls == [(MUTATED, None)]
    assert (out.verdict, out.killed_by.kind) == ("killed", "collection-error")
    # a covering selection has its own entry, and a failing clean run is never kept
    _, calls = go(tmp_path / "c", [rep(-11, [], finished=False), rep(1, [FAIL])], clean=clean)
    assert calls == [(MUTATED, ["t.py::a"]), (CLEAN, ["t.py::a"])]
    out, calls = go(tmp_path / "d", [rep(-11, [], finished=False), rep(0, [PASS])], clean=clean)
    assert calls == [(MUTATED, ["t.py::a"]), (CLEAN, ["t.py::a"])]
    assert out.killed_by.kind == "crash"
    _, calls = go(tmp_path / "e", [rep(-11, [], finished=False)], clean=clean)
    assert calls == [(MUTATED, ["t.py::a"])]


@pytest.mark.parametrize("clean_report", [
    rep(1, [FAIL]), rep(0, [PASS], finished=False), rep(0, [PASS], missing=["t.py::a"]),
    rep(0, [PASS], modules={"pkg": None}), rep(0, [PASS], modules={"pkg": "/elsewhere/x.py"})])
def test_an_odd_end_that_clean_code_shares_is_a_harness_error(tmp_path, clean_report):
    out, _ = go(tmp_path, [rep(-9, [], finished=False, stderr_tail="boom"), clean_report])
    assert (out.verdict, out.killed_by) == ("harness-error", None)
    assert out.detail == ("pytest signal 9 under the mutant and the same tests fail on clean code "
                          f"too (clean exit {clean_report.returncode}): boom")


def test_a_clean_run_must_survive(tmp_path):
    sb = Sandbox(tmp_path, [rep(0, [PASS]), rep(1, [FAIL]), rep(-11, [], finished=False),
                            rep(0, [PASS], missing=["t.py::b"])])
    b = Baseline()
    got = [runner.run_clean(sb, b, ["t.py::a"]), runner.run_clean(sb, b, None),
           runner.run_clean(sb, b, ["t.py::a"]), runner.run_clean(sb, b, ["t.py::b"])]
    assert [(o.verdict, o.selection) for o in got] == [
        ("survived", "covering"), ("killed", "full"), ("harness-error", "covering"),
        ("harness-error", "covering")]
    assert got[1].killed_by.test == "t.py::a"
    assert all(0.0 <= o.duration_s < 5.0 for o in got)
    assert [c for c in sb.calls] == [(CLEAN, ["t.py::a"]), (CLEAN, None), (CLEAN, ["t.py::a"]),
                                     (CLEAN, ["t.py::b"])]


def test_a_mutant_runs_its_covering_tests_that_the_baseline_trusts_or_the_whole_suite():
    b = Baseline()
    assert runner.selection_for(Reach(True, ("t.py::b", "t.py::x", "t.py::a"), False), b) == \
        ["t.py::b", "t.py::a"]
    assert runner.selection_for(Reach(True, ("t.py::a",), True), b) is None
    assert runner.selection_for(Reach(False, (), False), b) == []


def test_a_collection_error_in_a_finished_failing_run_is_a_kill():
    from killbench.runner import classify

    report = rep(1, [], collect_errors=[{"nodeid": "t.py", "message": "NameError"}])
    verdict, killed_by, detail = classify(report, Sandbox.__new__(Sandbox))
    assert (verdict, killed_by.kind, killed_by.test, detail) == ("killed", "collection-error", "t.py", None)


def test_the_mutated_text_is_what_the_run_sees(tmp_path):
    seen = []
    sb = Sandbox(tmp_path, [rep(0, [PASS])])
    sb.run_pytest = lambda args, select, exclude, timeout, limits=None: (
        seen.append((sb.tree / "pkg/mod.py").read_bytes()) or (rep(0, [PASS]), None))
    runner.run_mutant(sb, Baseline(), MUT, ["t.py::a"])
    assert seen == [apply(MODULE, MUT)] * 2  # its covering tests, then the whole suite


def test_an_odd_end_of_the_whole_suite_after_missing_tests_is_checked_on_the_whole_suite(tmp_path):
    out, calls = go(tmp_path, [rep(0, [PASS], missing=["t.py::a"]), rep(3, [], finished=False),
                               rep(0, [PASS])])
    assert (out.verdict, out.killed_by.kind, out.selection) == ("killed", "crash", "full")
    assert calls == [(MUTATED, ["t.py::a"]), (MUTATED, None), (CLEAN, None)]


def test_an_odd_end_names_its_exit_code_even_zero_or_none(tmp_path):
    out, _ = go(tmp_path / "a", [rep(0, [], finished=False), rep(0, [PASS])])
    assert out.detail == "pytest exit 0 under the mutant; the same tests pass on clean code"
    out, _ = go(tmp_path / "b", [rep(None, [], finished=False), rep(0, [PASS])])
    assert out.detail == "pytest exit None under the mutant; the same tests pass on clean code"


def test_an_odd_end_shared_with_clean_code_keeps_the_last_300_characters_of_stderr(tmp_path):
    tail = "x" * 10 + "y" * 300
    out, _ = go(tmp_path, [rep(-9, [], finished=False, stderr_tail=tail), rep(1, [FAIL])])
    assert out.detail.endswith("(clean exit 1): " + "y" * 300)


class Warm:
    def __init__(self, report):
        self.report, self.asked = report, []

    def run(self, mutant, tests, timeout, cpu_seconds=None):
        self.asked.append((mutant, tests))
        self.budgets = getattr(self, "budgets", []) + [(timeout, cpu_seconds)]
        return self.report


def test_the_clean_confirmation_of_a_kill_runs_the_way_the_kill_was_seen(tmp_path):
    sb = Sandbox(tmp_path, [])
    sb.warm = Warm(rep(0, [PASS]))
    ok, report = runner._clean_passes(sb, Baseline(), ["t.py::a"], runner.RunSettings())
    assert ok and report is sb.warm.report
    assert sb.warm.asked == [(None, ["t.py::a"])] and sb.calls == []


class Clock:
    def __init__(self, first, later):
        self.readings = [first]
        self.later = later

    def monotonic(self):
        return self.readings.pop() if self.readings else self.later


def test_a_clean_run_records_its_duration_to_the_millisecond(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "time", Clock(50.0, 50.12345678))
    out = runner.run_clean(Sandbox(tmp_path, [rep(0, [PASS])]), Baseline(), ["t.py::a"])
    assert out.duration_s == 0.123


def test_a_mutant_run_records_its_duration_to_the_millisecond(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "time", Clock(50.0, 50.12345678))
    out, _ = go(tmp_path, [rep(0, [PASS]), rep(0, [PASS])])
    assert out.duration_s == 0.123


def test_a_run_has_a_cpu_budget_beside_its_deadline_and_using_it_up_is_a_timeout(tmp_path):
    timed_out = rep(None, [], finished=False, timed_out=True, cpu_exceeded=True)
    sb = Sandbox(tmp_path / "a", [timed_out])
    out = runner.run_mutant(sb, Baseline(), MUT, ["t.py::a"])
    assert sb.budgets == [(3 * 1.5 + 10.0, 3 * 1.5 + 1.0)]
    assert (out.verdict, out.detail) == ("timeout", "used up its CPU budget")
    sb = Sandbox(tmp_path / "b", [rep(None, [], finished=False, timed_out=True)])
    out = runner.run_mutant(sb, Baseline(), MUT, ["t.py::a"], runner.RunSettings(cpu_floor=None))
    assert sb.budgets == [(14.5, None)]
    assert (out.verdict, out.detail) == ("timeout", None)
    # the warm runner gets the same budget
    sb = Sandbox(tmp_path / "c", [])
    sb.warm = Warm(rep(0, [PASS]))
    runner._clean_passes(sb, Baseline(), ["t.py::a"], runner.RunSettings(cpu_floor=2.5))
    assert sb.warm.budgets == [(14.5, 6.5)]  # less the start-up a warm child does not pay


class ScriptedWarm:
    """A warm runner whose runs answer from `script` in turn; records what each was asked,
    and whether the sandbox held the mutant then."""

    order = ["t.py::a", "t.py::b"]

    def __init__(self, sandbox, script):
        self.sandbox, self.script, self.asked = sandbox, list(script), []

    def run(self, mutant, tests, timeout, cpu_seconds=None):
        mutated = (self.sandbox.tree / "pkg/mod.py").read_bytes() != MODULE
        self.asked.append((mutated, None if tests is None else list(tests)))
        return self.script.pop(0)


PASS_B = TestEvent("t.py::b", "call", "passed", None, False, False, 0.1)
FAIL_B = TestEvent("t.py::b", "call", "failed", "builtins.AssertionError", True, False, 0.1)


def _warm_run(tmp_path, warm_script, plain_script=(), clean=True):
    sb = Sandbox(tmp_path, plain_script)
    sb.warm = ScriptedWarm(sb, warm_script)
    out = runner.run_mutant(sb, Baseline(), MUT, ["t.py::a"], runner.RunSettings(),
                            clean=runner.CleanSelections() if clean else None)
    assert (sb.tree / "pkg/mod.py").read_bytes() == MODULE
    assert sb.warm.script == [] and sb.script == []
    return out, sb.warm.asked, sb.calls


def test_a_survivor_of_its_covering_tests_is_judged_on_the_whole_suite_in_the_warm_runner(tmp_path):
    survived = rep(0, [PASS, PASS_B], begun=["t.py::a", "t.py::b"])
    out, asked, plain = _warm_run(tmp_path / "a", [rep(0, [PASS]), survived])
    assert (out.verdict, out.selection) == ("survived", "full")
    assert out.detail == "(survived its covering tests; judged on the full suite)"
    assert asked == [(MUTATED, ["t.py::a"]), (MUTATED, None)] and plain == []
    # killed there: counted once the tests up to the kill pass on clean code in the warm runner
    killed = rep(1, [PASS, FAIL_B], begun=["t.py::a", "t.py::b"])
    out, asked, plain = _warm_run(tmp_path / "b", [rep(0, [PASS]), killed,
                                                   rep(0, [PASS, PASS_B])])
    assert (out.verdict, out.killed_by.test, out.selection) == ("killed", "t.py::b", "full")
    assert asked == [(MUTATED, ["t.py::a"]), (MUTATED, None), (CLEAN, ["t.py::a", "t.py::b"])]
    assert plain == []


def test_a_warm_whole_suite_kill_that_clean_code_shares_or_an_odd_end_is_judged_the_usual_way(
        tmp_path):
    killed = rep(1, [PASS, FAIL_B], begun=["t.py::a", "t.py::b"])
    # the tests up to the kill fail on clean code too: the plain whole suite decides
    out, asked, plain = _warm_run(tmp_path / "a", [rep(0, [PASS]), killed, rep(1, [PASS, FAIL_B])],
                                  [rep(0, [PASS, PASS_B])])
    assert (out.verdict, out.selection) == ("survived", "full")
    assert plain == [(MUTATED, None)]
    # a timeout in the warm whole suite: judged again the usual way
    timed_out = rep(None, [], finished=False, timed_out=True)
    out, asked, plain = _warm_run(tmp_path / "b", [rep(0, [PASS]), timed_out],
                                  [rep(1, [PASS, FAIL_B])])
    assert (out.verdict, out.killed_by.test) == ("killed", "t.py::b")
    assert plain == [(MUTATED, None)]
    # the warm runner cannot apply it: the usual way
    out, asked, plain = _warm_run(tmp_path / "c", [rep(0, [PASS]), None], [rep(0, [PASS, PASS_B])])
    assert out.verdict == "survived" and plain == [(MUTATED, None)]
    # no record of clean selections to confirm a kill with: the usual way, warm not asked
    out, asked, plain = _warm_run(tmp_path / "d", [rep(0, [PASS])], [rep(0, [PASS, PASS_B])],
                                  clean=False)
    assert asked == [(MUTATED, ["t.py::a"])] and plain == [(MUTATED, None)]
