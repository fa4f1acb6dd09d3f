"""A generator's run follows the benchmark's rules: budgets of gate calls and wall time that
stop it (keeping what it wrote), plug-in errors that fail the command, and an incomplete run
that cannot be bundled."""

from __future__ import annotations

import json
import time

import pytest

from killbench.bundle import bundle
from killbench.errors import GeneratorError, UserError
from killbench.rules import Rules, load_rules
from killbench.run import run_generator
from killbench.score import score_run

import fixture_generators as fg


def test_the_rules_are_pre_registered():
    rules = load_rules()
    assert rules == Rules()  # manifests/rules.toml says what the defaults say
    b = rules.budgets(tasks=3, needs_model=False)
    assert b.tokens is None and b.gate_calls == 30 and b.seconds == 720.0
    assert rules.budgets(tasks=1, needs_model=True).tokens == 200_000
    assert rules.budgets(tasks=1, needs_model=True).gate_calls == rules.gate_calls_min


@pytest.mark.slow
def test_a_yielded_string_fails_the_run_and_loses_nothing(fixture_target, use_cache, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(GeneratorError, match="yielded a str, not a killbench.generation.CandidateTest"):
        run_generator("fixture_generators:YieldsText", [str(fixture_target("basic"))], out=out,
                      jobs=2, gate_timeout=20)
    summary = json.loads((out / "summary.json").read_text())["basic"]
    assert summary["kept_tests"] == 1 and summary["error"].startswith("generate() yielded a str")
    score_run(out, jobs=2, resamples=2000)
    with pytest.raises(UserError, match="incomplete run"):
        bundle(out)


@pytest.mark.slow
def test_wall_time_stops_a_generator_and_keeps_what_it_wrote(fixture_target, use_cache, tmp_path):
    out = tmp_path / "run"
    started = time.monotonic()
    run_generator("fixture_generators:Sleeper", [str(fixture_target("basic"))], out=out, jobs=2,
                  gate_timeout=20, seconds=5)
    assert time.monotonic() - started < 300
    summary = json.loads((out / "summary.json").read_text())["basic"]
    assert summary["stopped"].startswith("wall-time budget spent: 5 s")
    assert (summary["files"], summary["kept_tests"], summary["error"]) == (1, 1, None)
    config = json.loads((out / "config.json").read_text())
    assert "seconds per target set to 5" in config["outside_rules"]
    s = score_run(out, jobs=2, resamples=2000)
    assert s.complete and s.targets["basic"].kills.k == 1


@pytest.mark.slow
def test_gate_calls_are_a_budget(fixture_target, use_cache, tmp_path):
    out = tmp_path / "run"
    run_generator("fixture_generators:GateHog", [str(fixture_target("basic"))], out=out, jobs=2,
                  gate_timeout=20, gate_calls=3)
    summary = json.loads((out / "summary.json").read_text())["basic"]
    assert fg.GateHog.asked == 4  # the 4th call was refused, without running anything
    assert summary["gate_calls"] == 3 and summary["gate_calls_by_generator"] == 3
    assert summary["stopped"].startswith("gate-call budget spent: 3")
    assert summary["files"] == 0  # it never got to yield


@pytest.mark.slow
def test_limit_runs_and_scores_the_first_tasks_only(fixture_target, use_cache, tmp_path, caplog):
    """`--limit N`: a quick look at the split's first N tasks. The generator sees N tasks, the
    score's denominator is N, and the run says it is outside the rules; a progress line
    counts the gate calls from the evidence."""
    import logging

    out = tmp_path / "run"
    project = fixture_target("basic")
    with caplog.at_level(logging.INFO, logger="killbench"):
        run_generator("amplify", [str(project)], out=out, jobs=2, gate_timeout=20, limit=2)
    config = json.loads((out / "config.json").read_text())
    assert "tasks per target set to 2" in config["outside_rules"]
    assert config["targets"]["basic"]["tasks"] == 2
    tasks = json.loads((out / "tasks" / "basic.json").read_text())
    assert len(tasks) == 2
    pop = json.loads((out / "population" / "basic.json").read_text())
    assert len(pop["task_set"]) == 2 and pop["source"].endswith(", first 2 tasks")
    s = score_run(out, jobs=2, resamples=2000)
    assert s.complete and s.targets["basic"].kills.n == 2
    lines = [r.getMessage() for r in caplog.records if "gate calls" in r.getMessage()]
    assert lines and lines[-1].startswith("basic: gate calls ")
    with pytest.raises(UserError, match="--limit"):
        run_generator("amplify", [str(project)], out=tmp_path / "r0", limit=0)
    assert not (tmp_path / "r0").exists()
