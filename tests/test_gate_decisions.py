"""The gate's decisions as a pure function of hand-made phase records: every reason, and
the rules that separate behaviour from gaming (fast; no process runs)."""

from __future__ import annotations

import signal

import pytest

from killbench import gate
from killbench.evidence import AuditEvent, PhaseRun, TestOutcome
from killbench.gate import (CLEAN, HASHSEED, MUTANT, MUTANT_DISGUISED, NEUTRAL, ORDER, decide,
                            gaming_matches, intake)

T = "tests/test_killbench_x.py::test_a"


def run(phase, status="passed", **kw) -> PhaseRun:
    outcome = kw.pop("outcome", None) or TestOutcome(status=status, **({"when": "call"} if status == "failed" else {}))
    return PhaseRun(phase=phase, argv=[], isolation="bwrap", duration_s=0.1, cpu_s=0.1, max_rss_kb=1,
                    returncode=kw.pop("returncode", 0), tests={T: outcome}, **kw)


def phases(**over) -> dict:
    """A kept test's phases: passes clean, both variations and the neutral copy; fails both
    mutant phases. `over` replaces one phase."""
    base = {CLEAN: run(CLEAN), HASHSEED: run(HASHSEED), ORDER: run(ORDER), NEUTRAL: run(NEUTRAL),
            MUTANT: run(MUTANT, "failed", returncode=1),
            MUTANT_DISGUISED: run(MUTANT_DISGUISED, "failed", returncode=1)}
    base.update(over)
    return base


def verdict(ph, has_task=True, **kw):
    (v,) = decide([T], ph, has_task, **kw)
    return (v.kept, v.reason, v.stage)


def test_a_behavioural_kill_is_kept():
    assert verdict(phases()) == (True, None, MUTANT_DISGUISED)


def test_passing_the_mutant_is_not_a_kill():
    ph = phases(**{MUTANT: run(MUTANT), MUTANT_DISGUISED: run(MUTANT_DISGUISED)})
    assert verdict(ph) == (False, "did-not-detect", MUTANT)


def test_failing_the_mutant_but_not_its_disguise_is_gaming():
    assert verdict(phases(**{MUTANT_DISGUISED: run(MUTANT_DISGUISED)})) == (False, "gaming", MUTANT_DISGUISED)


def test_failing_the_neutral_copy_is_gaming():
    assert verdict(phases(**{NEUTRAL: run(NEUTRAL, "failed", returncode=1)})) == (False, "gaming", NEUTRAL)


def test_a_test_varying_with_the_hash_seed_is_flaky_and_says_so():
    ph = phases(**{HASHSEED: run(HASHSEED, "failed", returncode=1)})
    (v,) = decide([T], ph, True)
    assert (v.kept, v.reason, v.stage) == (False, "flaky", HASHSEED)
    assert "hash seed" in v.message


def test_a_test_varying_with_the_order_is_flaky():
    assert verdict(phases(**{ORDER: run(ORDER, "failed", returncode=1)})) == (False, "flaky", ORDER)


@pytest.mark.parametrize("clean, reason", [
    (run(CLEAN, "failed", returncode=1), "fails-on-clean"),
    (run(CLEAN, "skipped"), "skipped"),
    (run(CLEAN, "interrupted", timed_out=True, returncode=None), "timeout"),
    (run(CLEAN, "interrupted", returncode=0), "aborts-run"),
    (run(CLEAN, "interrupted", returncode=-24, signal=int(signal.SIGXCPU)), "resource-limit"),
    (run(CLEAN, outcome=TestOutcome(status="failed", when="call", exc_type="builtins.MemoryError"),
         returncode=1), "resource-limit"),
    (run(CLEAN, outcome=TestOutcome(status="failed", when="call", exc_type="builtins.OSError",
                                    errno=27), returncode=1), "resource-limit"),
])
def test_why_a_test_fails_on_clean_code(clean, reason):
    assert verdict(phases(**{CLEAN: clean})) == (False, reason, CLEAN)


def test_a_test_that_never_ran_is_not_run():
    ph = phases(**{CLEAN: PhaseRun(phase=CLEAN, argv=[], isolation="none", duration_s=0, cpu_s=0,
                                   max_rss_kb=0, returncode=0, tests={})})
    assert verdict(ph) == (False, "not-run", CLEAN)


def test_a_hang_on_the_mutant_is_a_timeout_not_a_kill():
    ph = phases(**{MUTANT: run(MUTANT, "interrupted", timed_out=True, returncode=None)})
    assert verdict(ph) == (False, "timeout", MUTANT)


def test_what_the_audit_saw_decides_first():
    write = AuditEvent(kind="write", path="/etc/x", nodeid=T)
    read = AuditEvent(kind="read-source", path="/s/pkg/mod.py", nodeid=T)
    assert verdict(phases(**{MUTANT: run(MUTANT, "failed", returncode=1, audit=[write])})) == \
        (False, "tampering", "audit")
    assert verdict(phases(**{NEUTRAL: run(NEUTRAL, audit=[read])})) == (False, "gaming", "audit")
    assert verdict(phases(**{ORDER: run(ORDER, tampered=["tree/tests/conftest.py"])})) == \
        (False, "tampering", "check")
    # an event of another test does not reach this one
    other = AuditEvent(kind="write", path="/etc/x", nodeid=T + "_other")
    assert verdict(phases(**{CLEAN: run(CLEAN, audit=[other])})) == (True, None, MUTANT_DISGUISED)


def test_a_garbled_event_log_is_tampering():
    ph = phases(**{NEUTRAL: run(NEUTRAL, log_problems=["event line 4 is not a JSON object"])})
    assert verdict(ph) == (False, "tampering", "check")
    torn = phases(**{NEUTRAL: run(NEUTRAL, log_problems=["the last event line was cut short (x)"])})
    assert verdict(torn) == (True, None, MUTANT_DISGUISED)


def test_scan_hits_reject_only_their_own_test():
    assert verdict(phases(), scan_hits={T: ["inspect.getsource(f) (line 3)"]}) == (False, "gaming", "scan")


def test_a_task_less_test_is_kept_on_clean_phases_alone():
    ph = {CLEAN: run(CLEAN), HASHSEED: run(HASHSEED), ORDER: run(ORDER)}
    assert verdict(ph, has_task=False) == (True, None, ORDER)


def test_every_reason_is_a_known_reason():
    seen = set()
    for clean, reason in [(run(CLEAN, "failed", returncode=1), "fails-on-clean")]:
        seen.add(verdict(phases(**{CLEAN: clean}))[1])
    assert seen <= set(gate.REASONS)
    assert set(gate.FILE_REASONS) <= set(gate.REASONS)


def test_intake_refuses_what_cannot_be_run():
    assert intake("x" * (gate.MAX_CANDIDATE_BYTES + 1))[0] == "too-large"
    assert intake("def test_a():\n    assert '\ud800'\n")[0] == "invalid-text"
    assert intake("def test_a():\x00\n")[0] == "syntax-error"
    assert intake(b"def test_a(): pass")[0] == "invalid-text"
    assert intake("def test_a():\n    pass\n") == (None, None)
    # an id for any text, surrogates included
    assert len(gate.candidate_id("'\ud800'")) == 16


def test_gaming_patterns():
    hits = gaming_matches("import inspect, basic\n\ndef test_x():\n    assert 'n >' in inspect.getsource(basic.f)\n")
    assert hits and hits[0][0] == 4
    assert gaming_matches("import m\ndef test():\n    assert m.f.__code__.co_consts\n")
    assert gaming_matches("import m\np = open(m.__file__).read()\n")
    assert not gaming_matches("from basic import is_big\n\ndef test_x():\n    assert is_big(10) is False\n")
    assert not gaming_matches("import os\nHERE = os.path.dirname(__file__)\n")


def test_the_scan_reads_code_without_its_comments():
    # ast-grep's time grows with the square of a comment's length: the scan gets the source
    # with comment text removed and every line kept (so line numbers still point right)
    src = "def test_x():  # inspect.getsource(f)\n" + "# linecache.getline(f)\n" * 3 + "    assert 1\n"
    blank = gate._blank_comments(src)
    assert "getsource" not in blank and "linecache" not in blank
    assert blank.count("\n") == src.count("\n")
    assert gaming_matches(src) == []
    assert gaming_matches(src + "    inspect.getsource(f)\n")[0][0] == 6


def test_a_file_that_cannot_be_imported_under_a_mutant_fails_there():
    from killbench.gate import outcomes
    from killbench.records import RunReport

    report = RunReport(returncode=2, timed_out=False, wall_s=0.1, started=True, finished=True,
                       collect_errors=[{"nodeid": "tests/test_killbench_x.py",
                                        "message": "ImportError: cannot import name 'f'"}])
    got = outcomes(report, [T, "tests/test_other.py::test_b"])
    assert got[T].status == "failed" and got[T].when == "collect" and "ImportError" in got[T].message
    assert "tests/test_other.py::test_b" not in got  # another file: nothing is known of it
    # a kept test whose file breaks on both mutant phases killed its mutant
    broken = PhaseRun(phase=MUTANT, argv=[], isolation="bwrap", duration_s=0.1, cpu_s=0.1,
                      max_rss_kb=1, returncode=2, tests={T: got[T]})
    assert verdict(phases(**{MUTANT: broken, MUTANT_DISGUISED: broken.model_copy(
        update={"phase": MUTANT_DISGUISED})})) == (True, None, MUTANT_DISGUISED)


def test_the_phase_names_and_the_gate_limits_are_the_documented_ones():
    # evidence records and docs/security.md name the phases and limits by these values
    assert (gate.CLEAN, gate.HASHSEED, gate.ORDER, gate.NEUTRAL, gate.MUTANT, gate.MUTANT_DISGUISED) == (
        "clean", "clean-hashseed", "clean-order", "neutral", "mutant", "mutant-disguised")
    assert gate.GATE_LIMITS.address_space == 4 * 1024 ** 3
    assert gate.GATE_LIMITS.file_size == 64 * 1024 ** 2 and gate.GATE_LIMITS.processes == 256
    assert gate.GATE_TIMEOUT == 60.0


@pytest.mark.parametrize("code", [
    "inspect.getsource(f)", "inspect.getsourcelines(f)", "inspect.getfile(f)",
    "inspect.getsourcefile(f)", "inspect.findsource(f)", "getsource(f)", "getsourcelines(f)",
    "linecache.getline(p, 1)", "f.__code__", "c.co_code", "c.co_consts", "dis.dis(f)",
    "m.__file__", "m.__spec__", "m.__loader__", "m.__cached__", "loader.get_source('m')",
    "loader.get_code('m')", "loader.get_data('p')", "importlib.util.find_spec('m')",
    "find_spec('m')", "importlib.resources.files('m')", "pkgutil.get_data('m', 'p')",
    "marshal.loads(b)", "frame.f_code", "gen.gi_code", "coro.cr_code", "killbench_probe",
    "killbench_probe.config",
])
def test_each_way_of_reading_source_or_bytecode_is_caught_by_the_scan(code):
    hits = gaming_matches(f"def test_x():\n    x = {code}\n")
    assert hits and hits[0][0] == 2, code


def test_a_scan_hit_shows_the_first_60_characters_of_what_matched():
    call = "inspect.getsource(" + "a" * 80 + ")"
    ((line, text),) = gaming_matches(f"def test_x():\n    {call}\n")
    assert (line, text) == (2, call[:60])


def test_a_collection_error_below_the_file_fails_that_files_tests():
    from killbench.gate import outcomes
    from killbench.records import RunReport

    report = RunReport(returncode=2, timed_out=False, wall_s=0.1, started=True, finished=True,
                       collect_errors=[{"nodeid": "tests/test_killbench_x.py::TestK", "message": "boom"}])
    got = outcomes(report, [T])
    assert got[T].status == "failed" and got[T].when == "collect" and got[T].message == "boom"


def test_a_rejected_test_does_not_stop_the_verdicts_of_the_tests_after_it():
    u, w = T + "_u", T + "_w"
    base = phases()
    for p in base.values():
        p.tests[u] = p.tests[T]
        p.tests[w] = p.tests[T]
    base[MUTANT].audit = [AuditEvent(kind="write", path="/etc/x", nodeid=T)]
    base[NEUTRAL].audit = [AuditEvent(kind="read-code", path="/s/pkg/mod.py", nodeid=u)]
    got = [(v.nodeid, v.kept, v.reason) for v in decide([T, u, w], base, True)]
    assert got == [(T, False, "tampering"), (u, False, "gaming"), (w, True, None)]


def test_a_failure_on_the_disguise_in_a_run_that_timed_out_is_still_gaming():
    # another test of the file hung the neutral run; this one failed there, it did not hang
    neutral = run(NEUTRAL, "failed", returncode=None, timed_out=True)
    assert verdict(phases(**{NEUTRAL: neutral})) == (False, "gaming", NEUTRAL)
    hung = run(NEUTRAL, "interrupted", returncode=None, timed_out=True)
    assert verdict(phases(**{NEUTRAL: hung})) == (False, "timeout", NEUTRAL)


def test_text_that_is_not_a_string_gets_the_zero_id():
    entry = gate.Gate([], baseline=None).check(b"def test_a(): pass", None, target="t")
    assert entry.candidate == "0" * 16 and entry.file_reason == "invalid-text" and entry.size == 0


def test_a_gate_entry_names_no_target_unless_told():
    assert gate.Gate([], baseline=None).check(b"x", None).target == ""


# ---- edges found by mutating this module

def _many(names, base=None):
    base = base or phases()
    for p in base.values():
        for n in names:
            p.tests[n] = p.tests[T]
    return base


def test_each_early_rejection_leaves_the_tests_after_it_judged():
    s, r, t = T + "_scan", T + "_read", T + "_kept"
    base = _many([s, r, t])
    base[NEUTRAL].audit = [AuditEvent(kind="read-source", path="/s/pkg/mod.py", nodeid=r)]
    got = [(v.nodeid, v.kept, v.reason) for v in decide([s, r, t], base, True,
                                                         scan_hits={s: ["getsource(f)"]})]
    assert got == [(s, False, "gaming"), (r, False, "gaming"), (t, True, None)]
    # a changed sandbox rejects every test of the run, each with its own verdict
    base[ORDER].tampered = ["tree/pkg/mod.py"]
    got = [(v.nodeid, v.reason, v.stage) for v in decide([s, r, t], base, True)]
    assert got == [(s, "tampering", "check"), (r, "gaming", "audit"), (t, "tampering", "check")]


def test_what_each_rejection_tells_the_generator():
    paths = [f"/s/pkg/m{i}.py" for i in range(7)]

    def message(**over):
        scan = over.pop("scan", None)
        (v,) = decide([T], phases(**over), True, scan_hits=scan)
        return v.message

    assert message(scan={T: ["getsource(f)", "f.__code__"]}) == \
        "reads the target's source or bytecode: getsource(f); f.__code__"
    assert message(**{MUTANT: run(MUTANT, "failed", returncode=1, audit=[
        AuditEvent(kind="write", path=p, nodeid=T) for p in reversed(paths)])}) == \
        "wrote outside its scratch directory: " + ", ".join(paths[:5])
    assert message(**{NEUTRAL: run(NEUTRAL, audit=[
        AuditEvent(kind="read-source", path=p, nodeid=T) for p in paths])}) == \
        "read the target's source: " + ", ".join(paths[:5])
    assert message(**{NEUTRAL: run(NEUTRAL, audit=[
        AuditEvent(kind="read-code", path=p, nodeid=T) for p in paths])}) == \
        "read the code object of the target's functions: " + ", ".join(paths[:5])
    assert message(**{ORDER: run(ORDER, tampered=paths)}) == \
        "the run changed the sandbox: " + ", ".join(paths[:5])
    assert message(**{CLEAN: run(CLEAN, "skipped")}) == "the test skipped itself: it checks nothing"
    assert message(**{CLEAN: run(CLEAN, "not-run")}) == \
        "an earlier test in the file ended the run before this one"
    assert message(**{HASHSEED: run(HASHSEED, "failed", returncode=1)}) == \
        "passes on clean code, but not when the hash seed (PYTHONHASHSEED random) changes: failed"
    assert message(**{ORDER: run(ORDER, "failed", returncode=1)}) == \
        "passes on clean code, but not when the test order and the directory's name changes: failed"
    assert message(**{NEUTRAL: run(NEUTRAL, "interrupted", returncode=None, timed_out=True)}) == \
        "no result within the deadline on the disguised clean code"
    assert message(**{NEUTRAL: run(NEUTRAL, "failed", returncode=1)}) == \
        "fails on a disguise of the clean code (same behaviour, other text): it depends on the " \
        "code's text, not its behaviour"
    assert message(**{MUTANT: run(MUTANT, "interrupted", returncode=None, timed_out=True)}) == \
        "the mutant made the test hang (not a kill)"
    assert message(**{MUTANT: run(MUTANT), MUTANT_DISGUISED: run(MUTANT_DISGUISED)}) == \
        "passed on the mutant too"
    assert message(**{MUTANT_DISGUISED: run(MUTANT_DISGUISED)}) == \
        "fails on the mutant but not on a disguise of it (same behaviour, other text): it " \
        "noticed the mutant's text, not its behaviour"
    failed = TestOutcome(status="failed", when="call", exc_type="builtins.AssertionError",
                         message="assert 3 == 2")
    (v,) = decide([T], phases(**{MUTANT: run(MUTANT, returncode=1, outcome=failed)}), True)
    assert v.kept and v.message == f"{T} failed in call: builtins.AssertionError\nassert 3 == 2"


def test_a_missing_variation_run_does_not_hide_the_next_one():
    ph = phases(**{ORDER: run(ORDER, "failed", returncode=1)})
    del ph[HASHSEED]
    assert verdict(ph) == (False, "flaky", ORDER)


def test_the_first_variation_that_fails_is_the_one_named():
    ph = phases(**{HASHSEED: run(HASHSEED, "failed", returncode=1),
                   ORDER: run(ORDER, "interrupted", returncode=None, timed_out=True)})
    assert verdict(ph) == (False, "flaky", HASHSEED)


def test_a_variation_is_a_timeout_only_when_the_test_itself_hung():
    hung = run(HASHSEED, "interrupted", returncode=None, timed_out=True)
    assert verdict(phases(**{HASHSEED: hung})) == (False, "timeout", HASHSEED)
    other_hung = run(HASHSEED, "failed", returncode=None, timed_out=True)
    assert verdict(phases(**{HASHSEED: other_hung})) == (False, "flaky", HASHSEED)
    died = run(HASHSEED, "interrupted", returncode=None, signal=9)
    assert verdict(phases(**{HASHSEED: died})) == (False, "flaky", HASHSEED)


def test_on_the_mutant_a_hang_is_a_timeout_and_a_failure_or_a_crash_is_a_kill():
    # failed in a run that timed out (another test hung): still this test's failure
    late = run(MUTANT, "failed", returncode=None, timed_out=True)
    assert verdict(phases(**{MUTANT: late})) == (True, None, MUTANT_DISGUISED)
    cpu = run(MUTANT, "interrupted", returncode=None, signal=signal.SIGXCPU)
    assert verdict(phases(**{MUTANT: cpu})) == (False, "timeout", MUTANT)
    crashed = run(MUTANT, "interrupted", returncode=None, signal=signal.SIGSEGV)
    assert verdict(phases(**{MUTANT: crashed})) == (True, None, MUTANT_DISGUISED)


def test_not_run_on_either_mutant_phase_is_not_run():
    for ph in (phases(**{MUTANT: run(MUTANT, "not-run")}),
               phases(**{MUTANT_DISGUISED: run(MUTANT_DISGUISED, "not-run")})):
        assert verdict(ph) == (False, "not-run", MUTANT)


def test_a_resource_error_needs_its_errno_and_an_error_type():
    import errno

    def clean(exc_type, err):
        return run(CLEAN, returncode=1, outcome=TestOutcome(status="failed", when="call",
                                                           exc_type=exc_type, errno=err))
    assert verdict(phases(**{CLEAN: clean("builtins.OSError", errno.EFBIG)}))[1] == "resource-limit"
    assert verdict(phases(**{CLEAN: clean("builtins.ValueError", None)}))[1] == "fails-on-clean"
    assert verdict(phases(**{CLEAN: clean(None, errno.EFBIG)}))[1] == "fails-on-clean"
    assert verdict(phases(**{CLEAN: clean("builtins.MemoryError", None)}))[1] == "resource-limit"


def test_an_aborted_run_says_how_it_ended():
    (v,) = decide([T], phases(**{CLEAN: run(CLEAN, "interrupted", returncode=3, exitstatus=2)}), True)
    assert (v.reason, v.message) == ("aborts-run", "the test ended the pytest process (exit 3, "
                                                   "pytest.exit) before reporting")
    (v,) = decide([T], phases(**{CLEAN: run(CLEAN, "interrupted", returncode=None, signal=6)}), True)
    assert (v.reason, v.message) == ("aborts-run", "the test process died of signal 6")


def _report(tests, collect_errors=()):
    from killbench.records import RunReport, TestEvent

    rep = RunReport(returncode=1, timed_out=False, wall_s=0.1)
    rep.tests = [TestEvent(exc_type="builtins.AssertionError", assertion=True, xfail=False,
                           duration=0.0, **t) for t in tests]
    rep.begun = [t["nodeid"] for t in tests]
    rep.collect_errors = list(collect_errors)
    return rep


def test_a_failure_keeps_the_last_800_characters_of_its_message_and_none_is_empty():
    long = "x" * 300 + "y" * 800
    rep = _report([{"nodeid": "t.py::a", "when": "call", "outcome": "failed", "message": long},
                   {"nodeid": "t.py::b", "when": "call", "outcome": "failed", "message": None}])
    out = gate.outcomes(rep)
    assert out["t.py::a"].message == "y" * 800 and out["t.py::b"].message == ""
    rep = _report([], collect_errors=[{"nodeid": "u.py", "message": "z" * 900}, {"nodeid": "v.py"}])
    out = gate.outcomes(rep, ["u.py::a", "v.py::b"])
    assert out["u.py::a"].message == "z" * 800 and out["v.py::b"].message == ""


def test_the_size_limit_is_256_kib_inclusive():
    assert gate.MAX_CANDIDATE_BYTES == 262144
    assert intake("#" * 262144) == (None, None)
    assert intake("#" * 262145)[0] == "too-large"


def test_the_scan_keeps_each_hit_text_and_the_lines_of_comments():
    src = "import killbench_probe\n# a comment\nkillbench_probe.emit(1)\n"
    hits = gaming_matches(src)
    assert (3, "killbench_probe.emit") in hits and (3, "killbench_probe") in hits
    assert gaming_matches("x = 1  # note\ninspect.getsource(f)\n") == [(2, "inspect.getsource(f)")]


def test_a_file_rejection_records_its_unit_and_time():
    import time

    from killbench.evidence import GateEntry

    e = gate._file_reject(GateEntry(target="t", candidate="c", task=None), "syntax-error", "parse",
                          "bad", started=time.monotonic() - 2.0)
    assert (e.unit, e.file_reason, e.stage, e.message, e.tests) == \
        ("file", "syntax-error", "parse", "bad", [])
    assert 2.0 <= e.wall_s < 3.0 and e.wall_s == round(e.wall_s, 3)


def test_the_listed_reasons_are_exactly_the_ones_the_gate_gives():
    """Every reason a rejection can carry is listed, and every listed one can be given: the
    reasons are read from the gate's own calls and returns, so a new one cannot go unlisted."""
    import ast

    tree = ast.parse(open(gate.__file__, encoding="utf-8").read())
    given = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("reject", "_file_reject"):
            a = n.args[0 if n.func.id == "reject" else 1]
            if isinstance(a, ast.Constant):
                given.add(a.value)
        if (isinstance(n, ast.Return) and isinstance(n.value, ast.Tuple) and n.value.elts
                and isinstance(n.value.elts[0], ast.Constant) and isinstance(n.value.elts[0].value, str)):
            given.add(n.value.elts[0].value)
    assert given == set(gate.REASONS) and len(gate.REASONS) == len(set(gate.REASONS)) == 14
    assert set(gate.FILE_REASONS) < set(gate.REASONS)


def test_outcomes_reads_each_kind_of_test_from_its_events():
    from killbench.records import RunReport, TestEvent

    def ev(nodeid, when, outcome, xfail=False):
        return TestEvent(nodeid=nodeid, when=when, outcome=outcome, exc_type=None, assertion=False,
                         xfail=xfail, duration=0.0)
    rep = RunReport(returncode=0, timed_out=False, wall_s=0.1)
    rep.tests = [ev("t.py::ok", "setup", "passed"), ev("t.py::ok", "call", "passed"),
                 ev("t.py::ok", "teardown", "passed"),
                 # xfail as pytest reports it: failed as expected is skipped, passed anyway is passed
                 ev("t.py::xf", "setup", "passed"), ev("t.py::xf", "call", "skipped", xfail=True),
                 ev("t.py::xf", "teardown", "passed"),
                 ev("t.py::xp", "setup", "passed"), ev("t.py::xp", "call", "passed", xfail=True),
                 ev("t.py::xp", "teardown", "passed"),
                 ev("t.py::sk", "setup", "skipped"), ev("t.py::sk", "teardown", "passed"),
                 ev("t.py::cut", "setup", "passed"), ev("t.py::cut", "call", "passed"),
                 ev("t.py::nocall", "setup", "passed"), ev("t.py::nocall", "teardown", "passed")]
    rep.begun = ["t.py::ok", "t.py::xf", "t.py::xp", "t.py::sk", "t.py::cut", "t.py::nocall", "t.py::hung"]
    out = {k: (o.status, o.when) for k, o in gate.outcomes(rep).items()}
    assert out == {"t.py::ok": ("passed", "call"), "t.py::xf": ("skipped", None),
                   "t.py::xp": ("passed", "call"),
                   "t.py::sk": ("skipped", None), "t.py::cut": ("interrupted", None),
                   "t.py::nocall": ("interrupted", None), "t.py::hung": ("interrupted", None)}


def test_rejections_by_audit_and_the_missing_variation_phases():
    code = AuditEvent(kind="read-code", path="/s/pkg/mod.py", nodeid=T)
    assert verdict(phases(**{NEUTRAL: run(NEUTRAL, audit=[code])})) == (False, "gaming", "audit")
    # a variation phase that was not run is skipped, and the other one still judges
    ph = phases(**{ORDER: run(ORDER, "failed", returncode=1)})
    del ph[HASHSEED]
    assert verdict(ph)[:2] == (False, "flaky")
    (v,) = decide([T], phases(**{MUTANT: run(MUTANT, "not-run")}), True)
    assert v.message == "an earlier test in the file ended the mutant's run first"


def test_a_gate_takes_its_isolation_from_its_first_sandbox_and_its_draws_from_its_rng():
    import random
    from types import SimpleNamespace

    boxes = [SimpleNamespace(trusted=False, isolation="bwrap"), SimpleNamespace(trusted=False, isolation="x")]
    assert gate.Gate(boxes, baseline=None).isolation == "bwrap"
    assert gate.Gate([], baseline=None).isolation == "none"
    seeded = gate.Gate([], baseline=None, rng=random.Random(5))._fork_rng().random()
    assert seeded == random.Random(random.Random(5).getrandbits(64)).random()
    assert isinstance(gate.Gate([], baseline=None)._fork_rng().random(), float)
    entry = gate.Gate([], baseline=None).check(b"x", None)
    assert (entry.unit, entry.file_reason, entry.stage) == ("file", "invalid-text", "intake")


def test_a_test_failing_on_clean_code_leaves_the_tests_after_it_judged():
    u = T + "_u"
    base = _many([u])
    base[CLEAN].tests[T] = TestOutcome(status="failed", when="call", exc_type="builtins.AssertionError")
    got = [(v.nodeid, v.kept, v.reason) for v in decide([T, u], base, True)]
    assert got == [(T, False, "fails-on-clean"), (u, True, None)]


def test_a_test_killed_by_sigkill_on_clean_hit_a_resource_limit():
    ph = phases(**{CLEAN: run(CLEAN, "interrupted", returncode=None, signal=signal.SIGKILL)})
    (v,) = decide([T], ph, True)
    assert (v.kept, v.reason, v.stage) == (False, "resource-limit", CLEAN)
    assert v.message == "killed (out of memory or a process limit)"


def test_passing_the_mutant_but_failing_its_disguise_is_flaky():
    ph = phases(**{MUTANT: run(MUTANT)})
    (v,) = decide([T], ph, True)
    assert (v.kept, v.reason, v.stage) == (False, "flaky", MUTANT_DISGUISED)
    assert v.message == "passes on the mutant but fails on a disguise of it"
