"""A run's CPU budget ends a mutant that spins well before the wall-clock deadline, as a
timeout that says so; a mutant that makes a test wait (asleep, using no CPU) longer than
the budget is still killed by the test. The same on the warm and the plain path."""

from __future__ import annotations

import pytest

from killbench.config import load_local
from killbench.harness import mutate_target
from killbench.runner import RunSettings

DEADLINE_FLOOR = 12.0  # wall: a spinning mutant would run at least this long without a budget


@pytest.mark.slow
@pytest.mark.parametrize("warm", [True, False], ids=["warm", "plain"])
def test_a_spinning_mutant_uses_up_its_cpu_budget_and_a_waiting_one_is_killed(
        warm, fixture_target, use_cache):
    settings = RunSettings(timeout_factor=3.0, timeout_floor=DEADLINE_FLOOR, warm=warm,
                           cpu_floor=1.0)
    spec = load_local(fixture_target("spin_or_wait_when_mutated"))
    run = mutate_target(spec, jobs=2, settings=settings, show_progress=False)
    by_line = {}
    for r in run.records:
        by_line.setdefault(r.mutant.line, []).append(r)
    spinning = [r for r in by_line[10] if r.outcome.verdict == "timeout"]  # n -= 1 undone
    assert len(spinning) >= 3, [(r.mutant.replacement, r.outcome.verdict) for r in by_line[10]]
    for r in spinning:
        assert r.outcome.detail == "used up its CPU budget", r.outcome
        assert r.outcome.duration_s < DEADLINE_FLOOR, r.outcome
        assert r.outcome.runner == ("warm" if warm else "plain"), r.outcome
    waiting = [r for line in (16, 17) for r in by_line[line]
               if r.mutant.replacement in ("if not flag:", "pass", "not (flag)", "not flag")]
    assert waiting, {line: [r.mutant.replacement for r in by_line[line]] for line in (16, 17)}
    for r in waiting:
        assert r.outcome.verdict == "killed", r.outcome
        assert r.outcome.killed_by.test.endswith("test_ready"), r.outcome
        assert r.outcome.duration_s >= 4.0, r.outcome  # it waited, asleep, past the budget
