"""Every metric on hand-made evidence: a population of six mutants, three submissions and
a kill matrix written out by hand, with every expected number worked out beside it."""

from __future__ import annotations

import pytest

from killbench import metrics as m
from killbench.errors import InvariantError
from killbench.evidence import (Budgets, GateEntry, GenerationSummary, KillMatrix, KillRow, KillRun,
                                Population, PopulationMutant, RunConfig, GeneratorInfo, Submission,
                                TestVerdict)

F = "tests/test_killbench_aaaa.py"
G = "tests/test_killbench_bbbb.py"


def mut(i, fn, verdict="survived", reachable=True, covered=("t::a",), role="sample"):
    return PopulationMutant(id=i, path="pkg/mod.py", line=1, end_line=1, col=0, end_col=1, start=0,
                            end=1, function=fn, operator="compare-flip", original="a", replacement="b",
                            verdict=verdict, reachable=reachable, covered_by=list(covered), role=role)


# tasks t1 (f), t2 (f), t3 (g, import only); held out h1 (f, killed by the suite),
# h2 (g, survived the suite), h3 (f, survived)
POP = Population(target="pkg", source="mutate x", mutants=[
    mut("t1", "f"), mut("t2", "f"), mut("t3", "g", covered=()),
    mut("h1", "f", verdict="killed", role="held-out-family"),
    mut("h2", "g", role="held-out-family"), mut("h3", "f", role="held-out-family")],
    task_set=["t1", "t2", "t3"], held_out=["h1", "h2", "h3"], held_out_minimum=2)

SUBS = [Submission(target="pkg", candidate="aaaa", task="t1"),
        Submission(target="pkg", candidate="bbbb", task="t2"),
        Submission(target="pkg", candidate="cccc", task="t2", attempt=2),
        Submission(target="pkg", candidate="dddd", task="t1")]
ENTRIES = [
    GateEntry(target="pkg", candidate="aaaa", task="t1", tests=[
        TestVerdict(nodeid=f"{F}::test_value", kept=True, stage="mutant-disguised"),
        TestVerdict(nodeid=f"{F}::test_wrong", kept=False, reason="fails-on-clean", stage="clean")]),
    GateEntry(target="pkg", candidate="bbbb", task="t2", tests=[
        TestVerdict(nodeid=f"{G}::test_exists", kept=True, stage="mutant-disguised"),
        TestVerdict(nodeid=f"{G}::test_weak", kept=False, reason="did-not-detect", stage="mutant"),
        TestVerdict(nodeid=f"{G}::test_seed", kept=False, reason="flaky", stage="clean-hashseed")]),
    GateEntry(target="pkg", candidate="cccc", task="t2", unit="file", file_reason="syntax-error",
              stage="parse"),
    GateEntry(target="pkg", candidate="dddd", task="t1", unit="file", file_reason="gaming",
              stage="scan"),
]
SOURCES = {F: "from pkg.mod import f\n\ndef test_value():\n    assert f(1) == 2\n\n"
              "def test_wrong():\n    assert f(1) == 3\n",
           G: "from pkg.mod import g\n\ndef test_exists():\n    assert g(1) is not None\n"}
MATRIX = KillMatrix(target="pkg", isolation="bwrap", rows=[
    KillRow(key=f"{F}::test_value", candidate="aaaa", nodeid=f"{F}::test_value", task="t1",
            clean="passed", reached=["t1", "t2", "h1", "h3"]),
    KillRow(key=f"{G}::test_exists", candidate="bbbb", nodeid=f"{G}::test_exists", task="t2",
            clean="passed", reached=["t2", "t3", "h2"])],
    runs=[KillRun(mutant="t1", candidate="aaaa", cells={f"{F}::test_value": "failed"}),
          KillRun(mutant="t2", candidate="aaaa", cells={f"{F}::test_value": "passed"}),
          KillRun(mutant="h1", candidate="aaaa", cells={f"{F}::test_value": "failed"}),
          KillRun(mutant="h3", candidate="aaaa", cells={f"{F}::test_value": "timeout"}),
          KillRun(mutant="t2", candidate="bbbb", cells={f"{G}::test_exists": "failed"}),
          KillRun(mutant="t3", candidate="bbbb", cells={f"{G}::test_exists": "failed"}),
          KillRun(mutant="h2", candidate="bbbb", cells={f"{G}::test_exists": "failed"})])
SUMMARY = GenerationSummary(target="pkg", tasks=3, files=4, gate_calls=4, tokens_in=900,
                            tokens_out=300, budgets=Budgets(tokens=1000, gate_calls=20, seconds=600),
                            wall_s=12.5, cpu_s=3.0)


def score():
    return m.target_score(POP, SUBS, ENTRIES, MATRIX, SUMMARY, SOURCES, complete=True)


def test_kills_pass_clean_and_fail_the_mutant():
    kills = m.kills_by_test(MATRIX)
    assert kills == {f"{F}::test_value": {"t1", "h1"}, f"{G}::test_exists": {"t2", "t3", "h2"}}
    s = score()
    assert (s.kills.k, s.kills.n) == (3, 3) and s.killed_task_ids == ["t1", "t2", "t3"]
    assert {p: (r.k, r.n) for p, r in s.kills_by_place.items()} == {"run by a test": (2, 2),
                                                                    "import only": (1, 1)}
    assert s.timeouts_on_task_set == 0  # h3 timed out, but it is held out


def test_an_excluded_or_unclean_test_kills_nothing():
    excluded = MATRIX.model_copy(update={"excluded": {f"{G}::test_exists": "read the source"}})
    assert m.kills_by_test(excluded)[f"{G}::test_exists"] == set()
    unclean = MATRIX.model_copy(deep=True)
    unclean.rows[0].clean = "failed"
    assert m.kills_by_test(unclean)[f"{F}::test_value"] == set()


def test_funnels_count_files_then_tests():
    s = score()
    # 4 files: one does not parse, one is gaming by the scan, two have tests collected
    assert s.file_funnel == {"files": 4, "accepted (size, text)": 4, "parsed": 3,
                             "not gaming (scan)": 2, "collected": 2}
    # 5 tests: one fails on clean, one is flaky, one does not detect, two are kept
    assert s.test_funnel == {"tests": 5, "passes on clean": 4,
                             "stable (hash seed, order, directory)": 3,
                             "not gaming (disguises, audit)": 3, "kept": 2}
    assert s.rejections == {"did-not-detect": 1, "fails-on-clean": 1, "flaky": 1,
                            "gaming (file)": 1, "syntax-error (file)": 1}


def test_a_reason_with_no_place_in_the_funnel_is_an_error():
    bad = [GateEntry(target="pkg", candidate="aaaa", task="t1", tests=[
        TestVerdict(nodeid="x::t", kept=False, reason="made-up", stage="clean")])]
    with pytest.raises(InvariantError, match="made-up"):
        m.test_funnel(SUBS[:1], bad)


def test_classes_specificity_and_transfer():
    s = score()
    assert s.classes_by_test == {f"{F}::test_value": "value", f"{G}::test_exists": "existence"}
    assert s.by_class["value"].model_dump() == {"tests": 1, "task_kills": 1, "held_out_kills": 1}
    assert s.by_class["existence"].model_dump() == {"tests": 1, "task_kills": 2, "held_out_kills": 1}
    assert s.specificity.task_kills_per_test == {"1": 1, "2": 1} and s.specificity.exactly_one == 1
    t = s.transfer
    # within: held-out in f (test_value's task t1) or g? test_exists was written for t2 (f),
    # so both tests' functions are {f}: h1 and h3; h2 (g) is cross-function
    assert (t.within_function_all.k, t.within_function_all.n) == (1, 2)
    assert (t.within_function_executed.k, t.within_function_executed.n) == (1, 2)
    assert (t.cross_function.k, t.cross_function.n) == (1, 1)
    assert t.minimum == 2 and t.minimum_met is True
    assert t.by_class == {"value": 1, "exception": 0, "existence": 1, "none": 0}


def test_beyond_the_suite_and_cost():
    s = score()
    assert [x["mutant"] for x in s.beyond_the_suite.held_out] == ["h2"]  # h1 the suite kills
    c = s.cost
    assert (c.tokens_in, c.tokens_out, c.files, c.tests) == (900, 300, 4, 5)
    assert c.tokens_per_kill == 400.0 and c.tokens_per_kept_test == 600.0 and c.gate_calls == 4


def test_run_level_numbers():
    s = score()
    other = s.model_copy(update={"target": "other", "kills": m.r(0, 7, "task-set mutants"),
                                 "kept_tests": 0})
    config = RunConfig(killbench="x", generator=GeneratorInfo(ref="g", name="g", version="1"),
                       isolation="bwrap", gate_timeout_s=60, target_refs=["pkg", "other"],
                       started_at="now")
    run = m.run_score(config, {"pkg": s, "other": other}, killbench="x", manifest_digest=None,
                      incomplete=[], resamples=1000, seed=0)
    assert (run.pooled_kills.k, run.pooled_kills.n) == (3, 10)
    assert run.value_class_share.k == 2 and run.value_class_share.n == 2  # other's rows copied s's
    assert run.tokens_per_kill == round(2400 / 3, 1)
    assert run.complete


def _verdict(i, reason, stage):
    return TestVerdict(nodeid=f"{F}::test_{i}", kept=False, reason=reason, stage=stage)


def test_every_clean_phase_reason_is_lost_at_passes_on_clean_and_counted_once_each():
    # two of each reason that stops a test on clean code, one kept: 13 tests, 12 lost there
    reasons = ["fails-on-clean", "resource-limit", "aborts-run", "not-run", "skipped", "timeout"]
    tests = [_verdict(f"{r}{n}", r, "clean") for r in reasons for n in (1, 2)]
    tests.append(TestVerdict(nodeid=f"{F}::test_kept", kept=True, stage="mutant-disguised"))
    entries = [GateEntry(target="pkg", candidate="aaaa", task="t1", tests=tests)]
    assert m.test_funnel(SUBS[:1], entries) == {
        "tests": 13, "passes on clean": 1, "stable (hash seed, order, directory)": 1,
        "not gaming (disguises, audit)": 1, "kept": 1}


def test_a_timeout_or_flaky_verdict_on_the_mutant_is_lost_at_kept():
    tests = [_verdict("a", "timeout", "mutant"), _verdict("b", "flaky", "mutant-disguised"),
             _verdict("c", "tampering", "audit"), _verdict("d", "gaming", "neutral"),
             _verdict("e", "flaky", "clean-order")]
    entries = [GateEntry(target="pkg", candidate="aaaa", task="t1", tests=tests)]
    assert m.test_funnel(SUBS[:1], entries) == {
        "tests": 5, "passes on clean": 5, "stable (hash seed, order, directory)": 4,
        "not gaming (disguises, audit)": 2, "kept": 0}


def test_two_files_lost_at_one_stage_count_two():
    subs = [Submission(target="pkg", candidate=c, task="t1") for c in ("aaaa", "bbbb", "cccc")]
    entries = [GateEntry(target="pkg", candidate=c, task="t1", unit="file", file_reason="syntax-error",
                         stage="parse") for c in ("aaaa", "bbbb")]
    entries.append(GateEntry(target="pkg", candidate="cccc", task="t1", unit="file",
                             file_reason="too-large", stage="intake"))
    assert m.file_funnel(subs, entries) == {"files": 3, "accepted (size, text)": 2, "parsed": 0,
                                            "not gaming (scan)": 0, "collected": 0}


def test_a_parametrized_test_takes_its_function_class():
    classes = m.assertion_classes(SOURCES, [f"{F}::test_value[1-2]", f"{F}::test_wrong"])
    assert classes == {f"{F}::test_value[1-2]": "value", f"{F}::test_wrong": "value"}


def test_beyond_the_suite_records_where_each_mutant_is():
    s = score()
    assert s.beyond_the_suite.held_out == [{"mutant": "h2", "path": "pkg/mod.py", "line": 1,
                                            "operator": "compare-flip", "baseline_verdict": "survived",
                                            "killed_by": [f"{G}::test_exists"]}]


def test_a_target_with_no_generation_summary_costs_nothing():
    c = m.cost(None, files=0, tests=0, kept=0, k=0)
    assert (c.tokens_in, c.tokens_out, c.gate_calls, c.wall_s, c.cpu_s) == (0, 0, 0, 0.0, 0.0)
    assert (c.tokens_per_file, c.tokens_per_kill) == (None, None)


def test_the_score_records_the_run_settings_by_name():
    s = score()
    config = RunConfig(killbench="x", generator=GeneratorInfo(ref="g", name="g", version="1"),
                       isolation="bwrap", gate_timeout_s=45, target_refs=["pkg"], started_at="now")
    run = m.run_score(config, {"pkg": s}, killbench="x", manifest_digest=None, incomplete=[],
                      resamples=1000, seed=0)
    assert run.run["gate_timeout_s"] == 45 and run.run["isolation"] == "bwrap"
    assert set(run.run) == {"generator", "model", "seed", "isolation", "outside_rules", "budgets",
                            "gate_timeout_s", "options"}
    # bundles on the leaderboard are of this schema; changing it needs a reader for the old one
    assert m.SCORE_SCHEMA == 2 and run.model_dump()["schema_version"] == 2
