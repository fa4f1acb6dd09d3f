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


def run_config(target_refs, gate_timeout_s):
    return RunConfig(killbench="x", generator=GeneratorInfo(ref="g", name="g", version="1"),
                     isolation="bwrap", gate_timeout_s=gate_timeout_s, target_refs=list(target_refs),
                     started_at="now")


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
    config = run_config(["pkg", "other"], gate_timeout_s=60)
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
    config = run_config(["pkg"], gate_timeout_s=45)
    run = m.run_score(config, {"pkg": s}, killbench="x", manifest_digest=None, incomplete=[],
                      resamples=1000, seed=0)
    assert run.run["gate_timeout_s"] == 45 and run.run["isolation"] == "bwrap"
    assert set(run.run) == {"generator", "model", "seed", "isolation", "outside_rules", "budgets",
                            "gate_timeout_s", "options"}
    # bundles on the leaderboard are of this schema; changing it needs a reader for the old one
    assert m.SCORE_SCHEMA == 2 and run.model_dump()["schema_version"] == 2


# ---- edges found by mutating this module

def test_every_rate_says_what_it_counts_at_95_percent():
    s = score()
    assert s.kills.what == "task-set mutants" and s.kills.confidence == 0.95
    assert s.kills_by_place["run by a test"].what == "task-set mutants on lines a test of the suite runs"
    assert s.kills_by_place["import only"].what == "task-set mutants on lines only an import runs"
    t = s.transfer
    assert t.within_function_executed.what == \
        "held-out mutants in the tests' functions, on lines kept tests execute"
    assert t.within_function_all.what == "held-out mutants in the tests' functions"
    assert t.cross_function.what == "held-out mutants in other functions"


def test_a_task_set_mutant_that_timed_out_or_was_interrupted_and_was_not_killed_is_counted():
    runs = [KillRun(mutant="t1", candidate="aaaa", cells={f"{F}::test_value": "timeout"}),
            KillRun(mutant="t2", candidate="aaaa", cells={f"{F}::test_value": "interrupted"}),
            KillRun(mutant="t3", candidate="aaaa", cells={f"{F}::test_value": "passed"}),
            KillRun(mutant="h3", candidate="aaaa", cells={f"{F}::test_value": "timeout"})]
    assert m.timeouts(MATRIX.model_copy(update={"runs": runs})) == {"t1", "t2", "h3"}
    s = m.target_score(POP, SUBS, ENTRIES, MATRIX.model_copy(update={"runs": runs}), SUMMARY,
                       SOURCES, complete=True)
    assert s.timeouts_on_task_set == 2 and s.kills.k == 0


def test_a_candidate_submitted_twice_for_one_task_is_counted_once():
    twice = SUBS + [Submission(target="pkg", candidate="aaaa", task="t1", attempt=3)]
    assert m.file_funnel(twice, ENTRIES) == m.file_funnel(SUBS, ENTRIES)
    assert m.test_funnel(twice, ENTRIES) == m.test_funnel(SUBS, ENTRIES)
    assert m.rejections(twice, ENTRIES) == m.rejections(SUBS, ENTRIES)


def _file(c, reason, stage):
    return GateEntry(target="pkg", candidate=c, task="t1", unit="file", file_reason=reason, stage=stage)


def test_files_lost_before_collection_are_placed_by_reason_and_stage_and_counted_each():
    subs = [Submission(target="pkg", candidate=c, task="t1") for c in "abcdefgh"]
    entries = [_file("a", "too-large", "intake"), _file("b", "invalid-text", "intake"),
               _file("c", "invalid-text", "intake"), _file("d", "gaming", "scan"),
               _file("e", "gaming", "scan"), _file("f", "gaming", "audit"),
               _file("g", "collection-error", "collect"),
               GateEntry(target="pkg", candidate="h", task="t1", tests=[
                   TestVerdict(nodeid=f"{F}::test_a", kept=True, stage="mutant-disguised")])]
    assert m.file_funnel(subs, entries) == {"files": 8, "accepted (size, text)": 5, "parsed": 5,
                                            "not gaming (scan)": 3, "collected": 1}
    assert m.rejections(subs, entries) == {"too-large (file)": 1, "invalid-text (file)": 2,
                                           "gaming (file)": 3, "collection-error (file)": 1}
    # a candidate never gated (the gate-call budget ran out) is lost at the first step
    ungated = subs + [Submission(target="pkg", candidate="z", task="t2")]
    assert m.file_funnel(ungated, entries)["accepted (size, text)"] == 5
    assert m.rejections(ungated, entries)["not gated (gate-call budget spent)"] == 1


def test_the_test_funnel_skips_ungated_and_rejected_files_wherever_they_come():
    subs = [Submission(target="pkg", candidate=c, task="t1") for c in ("r", "n", "k")]
    entries = [_file("r", "syntax-error", "parse"),
               GateEntry(target="pkg", candidate="k", task="t1", tests=[
                   TestVerdict(nodeid=f"{F}::test_a", kept=True, stage="mutant-disguised"),
                   TestVerdict(nodeid=f"{F}::test_b", kept=False, reason="timeout",
                               stage="mutant-disguised")])]
    assert m.test_funnel(subs, entries) == {"tests": 2, "passes on clean": 2,
                                            "stable (hash seed, order, directory)": 2,
                                            "not gaming (disguises, audit)": 2, "kept": 1}


def test_a_test_missing_from_its_file_or_a_file_missing_from_the_sources_has_class_none():
    classes = m.assertion_classes({F: "def test_a():\n    assert f() == 1\n"},
                                  [f"{F}::test_a", f"{F}::test_gone", f"{G}::test_b"])
    assert classes == {f"{F}::test_a": "value", f"{F}::test_gone": "none", f"{G}::test_b": "none"}


def test_specificity_with_no_test_killing_exactly_one_task():
    s = m.specificity(POP, {"a": {"t1", "t2"}, "b": set()})
    assert s.task_kills_per_test == {"0": 1, "2": 1} and s.exactly_one == 0 and s.tests == 2


def test_the_held_out_minimum_is_met_at_equality():
    pop = POP.model_copy(update={"held_out_minimum": 3})
    assert m.transfer(pop, {}, {}, {}, {}).minimum_met is True
    pop = POP.model_copy(update={"held_out_minimum": 4})
    assert m.transfer(pop, {}, {}, {}, {}).minimum_met is False


def test_transfer_counts_each_killed_held_out_mutant_by_its_killers_class():
    kills = {"a": {"h1"}, "b": {"h2", "h3"}}
    t = m.transfer(POP, kills, {"a": "t1", "b": "t3"}, {"a": {"h1"}, "b": {"h2", "h3"}},
                   {"a": "exception", "b": "value"})
    # a was written for t1 (f), b for t3 (g): every held-out mutant is in a test's function.
    # h1 (f) killed by a and h2 (g) by b count; b's kill of h3 (f) is not in b's function, and
    # f is a test's function, so it is neither a within- nor a cross-function kill
    assert (t.within_function_all.k, t.within_function_all.n) == (2, 3)
    assert (t.cross_function.k, t.cross_function.n) == (0, 0)
    assert t.by_class == {"value": 1, "exception": 1, "existence": 0, "none": 0}


@pytest.mark.parametrize("tokens,n,expected", [(1000, 3, 333.3), (1000, 0, None), (0, 4, 0.0),
                                               (0, 0, None)])
def test_tokens_per_unit(tokens, n, expected):
    s = SUMMARY.model_copy(update={"tokens_in": tokens, "tokens_out": 0})
    assert m.cost(s, n, n, n, n).tokens_per_kill == expected


def test_a_positive_control_is_held_only_when_every_gating_kept_its_test():
    pop = POP.model_copy(update={"controls": {
        "positive": [{"id": "t1"}, {"id": "t2"}, {"id": "t3"}, {"id": "h1"}],
        "negative": {"count": 4}}})

    def entry(task, kept=(True,), reason=None):
        return GateEntry(target="pkg", candidate="c" + task, task=task, file_reason=reason,
                         tests=[TestVerdict(nodeid=f"{F}::test_{i}", kept=k,
                                            reason=None if k else "did-not-detect",
                                            stage="mutant-disguised" if k else "mutant")
                                for i, k in enumerate(kept)])

    entries = [entry("t1"), entry("t1", (True, True)),      # held both times
               entry("t2"), entry("t2", (True, False)),     # one gating lost one test
               entry("h1", (), reason="syntax-error")]      # t3 never gated; h1's file rejected
    c = m.controls_held(pop, entries)
    assert (c.positive, c.positive_kept, c.negative) == (4, 1, 4)
    assert m.controls_held(POP, entries).model_dump() == {"positive": 0, "positive_kept": 0,
                                                          "negative": 0}


def test_pooled_over_targets_with_no_task_set_mutants_is_none_and_otherwise_a_bootstrap():
    s = score()
    empty = s.model_copy(update={"kills": m.r(0, 0, "task-set mutants")})
    assert m.pooled({"a": empty, "b": empty}, 100, 0) is None
    other = s.model_copy(update={"kills": m.r(1, 7, "task-set mutants")})
    p = m.pooled({"a": s, "b": other}, 1000, 0)
    assert (p.k, p.n, p.estimate) == (4, 10, 0.4) and p.low < 0.4 < p.high
    assert p.method == "cluster-bootstrap" and (p.resamples, p.seed) == (1000, 0)
    assert p.what == "task-set mutants, pooled over targets"


def test_run_level_shares_and_places_add_the_targets_up():
    s = score()
    other = s.model_copy(update={"target": "other", "kills": m.r(1, 4, "task-set mutants")})
    config = run_config(["pkg", "other"], gate_timeout_s=60)
    run = m.run_score(config, {"pkg": s, "other": other}, killbench="x", manifest_digest=None,
                      incomplete=[], resamples=100, seed=0)
    assert run.pooled_kills_by_place == {"run by a test": {"k": 4, "n": 4},
                                         "import only": {"k": 2, "n": 2}}
    assert run.value_class_share.what == "kept tests whose strongest assertion checks a concrete value"
    assert run.tokens_per_kill == round(2400 / 4, 1)
    odd = other.model_copy(update={"kills": m.r(0, 4, "task-set mutants")})
    run = m.run_score(config, {"pkg": s, "other": odd}, killbench="x", manifest_digest=None,
                      incomplete=[], resamples=100, seed=0)
    assert run.tokens_per_kill == 800.0 and m.tokens_per_kill(
        {"a": s.model_copy(update={"kills": m.r(7, 9, "task-set mutants")})}) == round(1200 / 7, 1)


def test_a_score_recorded_without_a_split_is_of_the_full_split():
    d = score().dump()
    del d["split"]
    assert m.TargetScore.model_validate(d).split == "full"


def test_a_committed_manifest_gives_its_own_task_set_as_the_full_split_by_default():
    from killbench import population
    from killbench.manifests import load_manifests

    manifest = load_manifests()["cachetools"]
    full = population.from_manifest(manifest, "manifest cachetools", {})
    assert full.split == "full" and full.task_set == sorted(manifest["task_set"])
    lite = population.from_manifest(manifest, "manifest cachetools", {}, "lite")
    assert lite.task_set == sorted(manifest["splits"]["lite"]) and set(lite.task_set) < set(full.task_set)
    # the records' own roles: the task population is the "sample" draw
    assert {r.get("role") for r in manifest["mutants"] if r["id"] in full.task_set} == {"sample"}


def test_a_run_score_recorded_without_a_split_is_of_the_full_split_and_rates_default_to_95():
    config = run_config(["pkg"], gate_timeout_s=45)
    d = m.run_score(config, {"pkg": score()}, killbench="x", manifest_digest=None, incomplete=[],
                    resamples=1000, seed=0).model_dump()
    del d["split"]
    assert m.Score.model_validate(d).split == "full"
    assert m.RateRecord(k=1, n=2, value=0.5, low=0.1, high=0.9, what="x").confidence == 0.95


def test_each_ungated_submission_is_counted():
    ungated = SUBS + [Submission(target="pkg", candidate=c, task="t2") for c in ("y", "z")]
    assert m.rejections(ungated, ENTRIES)["not gated (gate-call budget spent)"] == 2


def test_transfer_by_class_counts_the_kills_of_each_class_only():
    kills = {"a": {"h1", "h2"}, "b": set(), "c": {"h2"}}
    t = m.transfer(POP, kills, {"a": "t1", "b": "t3", "c": "t3"}, {},
                   {"a": "value", "b": "existence", "c": "exception"})
    # h1 (f) by a, h2 (g) by a and c; b (existence) kills nothing
    assert t.by_class == {"value": 2, "exception": 1, "existence": 0, "none": 0}


def test_a_lite_split_holds_one_negative_control_of_a_target_that_has_any():
    from killbench import population
    from killbench.manifests import load_manifests

    manifests = load_manifests()
    boltons, cachetools = manifests["boltons"], manifests["cachetools"]
    assert boltons["controls"]["negative"]["count"] == 3
    lite = population.from_manifest(boltons, "manifest boltons", {}, "lite")
    assert lite.controls["negative"] == {"count": 1, "of_full": boltons["controls"]["negative"]}
    full = population.from_manifest(boltons, "manifest boltons", {}, "full")
    assert full.controls["negative"] == boltons["controls"]["negative"]
    # a target with no negative control keeps its count of none in the lite split
    lite = population.from_manifest(cachetools, "manifest cachetools", {}, "lite")
    assert lite.controls["negative"]["count"] == 0


# ---- the funnels on any gate record: each ends at what it counts, and never rises

from hypothesis import given, settings, strategies as st  # noqa: E402

from killbench.gate import FILE_REASONS  # noqa: E402

_TEST_REASONS = sorted(m.TEST_STAGE)
_STAGES = ["intake", "parse", "scan", "clean", "collect", "clean-hashseed", "mutant",
           "mutant-disguised"]
_verdicts = st.lists(st.tuples(st.booleans(), st.sampled_from(_TEST_REASONS), st.sampled_from(_STAGES)),
                     max_size=4)
_entries = st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d", "e"]), st.sampled_from(["t1", "t2"]),
                              st.one_of(st.none(), st.tuples(st.sampled_from(FILE_REASONS),
                                                             st.sampled_from(_STAGES))),
                              _verdicts), max_size=8)


def _gate_record(rows, submitted):
    entries = []
    for cand, task, file_level, tests in rows:
        if file_level is not None:
            entries.append(GateEntry(target="pkg", candidate=cand, task=task, unit="file",
                                     file_reason=file_level[0], stage=file_level[1]))
        else:
            entries.append(GateEntry(target="pkg", candidate=cand, task=task, tests=[
                TestVerdict(nodeid=f"{F}::test_{i}", kept=kept, stage=stage,
                            reason=None if kept else reason)
                for i, (kept, reason, stage) in enumerate(tests)]))
    subs = [Submission(target="pkg", candidate=c, task=t) for c, t in submitted]
    return subs, entries


@settings(max_examples=150, deadline=None)
@given(_entries, st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d", "e", "f"]),
                                    st.sampled_from(["t1", "t2"])), max_size=8))
def test_the_funnels_end_at_the_files_collected_and_the_tests_kept(rows, submitted):
    subs, entries = _gate_record(rows, submitted)
    files, tests = m.file_funnel(subs, entries), m.test_funnel(subs, entries)
    by_key = {(e.candidate, e.task): e for e in entries}
    keys = list(dict.fromkeys((s.candidate, s.task) for s in subs))
    collected = [by_key[k] for k in keys if k in by_key and not by_key[k].file_reason]
    assert list(files) == list(m.FILE_FUNNEL) and list(tests) == list(m.TEST_FUNNEL)
    assert files["files"] == len(keys)
    assert files["collected"] == len(collected)
    assert tests["tests"] == sum(len(e.tests) for e in collected)
    assert tests["kept"] == sum(t.kept for e in collected for t in e.tests)
    for funnel in (files, tests):
        counts = list(funnel.values())
        assert all(a >= b >= 0 for a, b in zip(counts, counts[1:]))
