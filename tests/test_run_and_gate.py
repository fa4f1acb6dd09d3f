"""`killbench run` with a plug-in generator: every candidate gated test by test, each
rejection with its reason, a self-contained run directory, and scores worked out by hand."""

from __future__ import annotations

import json

import pytest

from killbench.errors import GeneratorError, UserError
from killbench.evidence import GateEntry, read_jsonl
from killbench.plugins import load_generator
from killbench.run import run_generator
from killbench.score import score_run

import fixture_generators as fg


def test_unknown_generator_is_a_clear_error():
    with pytest.raises(UserError, match="unknown generator 'nope'"):
        load_generator("nope")
    with pytest.raises(UserError, match="no attribute"):
        load_generator("fixture_generators:Missing")


def _verdicts(out) -> dict[str, object]:
    """candidate source -> the file's reason, or {test name: kept / reason}."""
    entries = read_jsonl(out / "evidence" / "gate.jsonl", GateEntry)
    got = {}
    for e in entries:
        src = (out / "candidates" / f"{e.candidate}.py").read_text()
        got[src] = e.file_reason or {t.nodeid.split("::")[-1]: ("kept" if t.kept else t.reason)
                                     for t in e.tests}
    return got


@pytest.mark.slow
def test_run_gates_every_candidate(fixture_target, use_cache, tmp_path):
    project = fixture_target("basic")
    out = tmp_path / "run"
    run_generator("fixture_generators:FixedTests", [str(project)], out=out, jobs=2, gate_timeout=10)
    assert _verdicts(out) == {
        fg.KILLS_BOUNDARY: {"test_threshold_is_not_big": "kept"},
        fg.FAILS_ON_CLEAN: {"test_wrong": "fails-on-clean"},
        fg.DOES_NOT_DETECT: {"test_far_from_boundary": "did-not-detect"},
        fg.GAMING: {"test_reads_source": "gaming"},
        fg.SYNTAX_ERROR: "syntax-error",
        fg.NO_TESTS: "no-test-collected",
        fg.FLAKY: {"test_flaky": "flaky"},
        fg.HANGS: {"test_hangs": "timeout"},
        fg.ORDER_DEPENDENT: {"test_first": "did-not-detect", "test_second": "flaky"},
    }
    entries = {e.candidate: e for e in read_jsonl(out / "evidence" / "gate.jsonl", GateEntry)}
    flaky = next(e for e in entries.values() if (out / "candidates" / f"{e.candidate}.py").read_text() == fg.FLAKY)
    assert flaky.tests[0].stage == "clean-hashseed" and "hash seed" in flaky.tests[0].message
    kept = next(e for e in entries.values() if e.kept)
    # the phases as run: clean first, the rest in an order the test cannot know
    assert kept.phases[0].phase == "clean"
    assert sorted(p.phase for p in kept.phases) == sorted(
        ["clean", "clean-hashseed", "clean-order", "neutral", "mutant", "mutant-disguised"])
    assert all(p.isolation == "bwrap" for p in kept.phases)
    summary = json.loads((out / "summary.json").read_text())["basic"]
    assert (summary["files"], summary["tests"], summary["kept_tests"], summary["kept_files"]) == (9, 8, 1, 1)
    config = json.loads((out / "config.json").read_text())
    assert config["generator"]["name"] == "fixed-tests" and config["isolation"] == "bwrap"
    assert config["outside_rules"] == ["gate timeout 10.0 s (rules: 60.0 s)"]
    tasks = json.loads((out / "tasks" / "basic.json").read_text())
    assert any(t["replacement"] == "n >= THRESHOLD" and "def is_big" in t["function_source"]
               and t["diff"].startswith("--- a/src/basic/__init__.py") for t in tasks)

    # the run scores to the answers worked out by hand (see the fixture's answers.toml)
    s = score_run(out, jobs=2, resamples=2000).targets["basic"]
    assert (s.kills.k, s.kills.n) == (1, 6)
    # the only import-only survivor, `if TYPE_CHECKING:` negated (line 6), and the raise
    # message are non-behavioural on 1.0's rules: the 6 tasks are all run by a test
    assert {p: (r.k, r.n) for p, r in s.kills_by_place.items()} == {"run by a test": (1, 6),
                                                                    "import only": (0, 0)}
    assert s.file_funnel == {"files": 9, "accepted (size, text)": 9, "parsed": 8,
                             "not gaming (scan)": 8, "collected": 7}
    assert s.test_funnel == {"tests": 8, "passes on clean": 6, "stable (hash seed, order, directory)": 4,
                             "not gaming (disguises, audit)": 3, "kept": 1}
    assert s.assertion_classes == {"value": 1}
    assert s.specificity.exactly_one == 1
    t = s.transfer
    assert (t.within_function_all.k, t.within_function_all.n) == (1, 1)
    assert (t.cross_function.k, t.cross_function.n) == (0, 9)
    assert t.minimum is None and t.minimum_met is None
    assert s.held_out == 10
    assert s.beyond_the_suite.held_out == []


@pytest.mark.slow
def test_a_failing_generator_loses_nothing(fixture_target, use_cache, tmp_path):
    project = fixture_target("basic")
    out = tmp_path / "run"
    with pytest.raises(GeneratorError, match="ConnectionError: the model server went away"):
        run_generator("fixture_generators:CrashesAfterOne", [str(project)], out=out, jobs=2,
                      gate_timeout=20)
    entries = read_jsonl(out / "evidence" / "gate.jsonl", GateEntry)
    assert [e.kept for e in entries] == [True]
    summary = json.loads((out / "summary.json").read_text())["basic"]
    assert summary["kept_tests"] == 1
    assert summary["error"].startswith("ConnectionError")
    assert "Traceback" in (out / "generator.log").read_text()
    s = score_run(out, jobs=2, resamples=2000)
    assert not s.complete and "ConnectionError" in s.incomplete[0]
