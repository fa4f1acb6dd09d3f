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
