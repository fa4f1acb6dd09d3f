"""A run's CPU budget counts the CPU of pytest's main thread, the one that runs the tests:
a mutant that spins there ends well before the wall-clock deadline, as a timeout that says
so; a mutant that makes a test wait longer than the budget, asleep or while a worker
thread of the code under test spins, is still killed by the test. The same on the warm and
the plain path."""

from __future__ import annotations

import pytest

from killbench.config import load_local
from killbench.harness import mutate_target
from killbench.runner import RunSettings

DEADLINE_FLOOR = 12.0  # wall: a spinning mutant would run at least this long without a budget


@pytest.mark.slow
@pytest.mark.parametrize("warm", [True, False], ids=["warm", "plain"])
def test_a_mutant_spinning_in_the_tests_thread_uses_up_the_budget_and_a_waiting_test_kills(
        warm, fixture_target, use_cache):
    settings = RunSettings(timeout_factor=3.0, timeout_floor=DEADLINE_FLOOR, warm=warm,
                           cpu_floor=1.0)
    spec = load_local(fixture_target("spin_or_wait_when_mutated"))
    run = mutate_target(spec, jobs=2, settings=settings, show_progress=False)
    at = {}
    for r in run.records:
        at.setdefault((r.mutant.line, r.mutant.replacement), r)

    spinning = [r for (line, _), r in at.items() if line == 10 and r.outcome.verdict == "timeout"]
    assert len(spinning) >= 3, [(k, r.outcome.verdict) for k, r in at.items() if k[0] == 10]
    for r in spinning:  # `n -= 1` undone: the tests' thread never leaves the loop
        assert r.outcome.detail == "used up its CPU budget", r.outcome
        assert r.outcome.duration_s < DEADLINE_FLOOR, r.outcome
        assert r.outcome.runner == ("warm" if warm else "plain"), r.outcome

    waiting = {"asleep": at[(16, "not (flag)")], "asleep, no set": at[(17, "pass")],
               "a worker spins": at[(26, "pass")]}  # `items.pop()` deleted
    for why, r in waiting.items():
        assert r.outcome.verdict == "killed", (why, r.outcome)
        assert r.outcome.duration_s >= 4.0, (why, r.outcome)  # it waited, past the budget
        assert r.outcome.runner == ("warm" if warm else "plain"), r.outcome
    assert waiting["asleep"].outcome.killed_by.test.endswith("test_ready")
    assert waiting["a worker spins"].outcome.killed_by.test.endswith("test_drain")


def test_the_budget_of_the_whole_suite_counts_every_test_it_runs_and_a_warm_child_pays_no_start_up():
    from killbench.baseline import Baseline

    b = Baseline(fingerprint="f", tests=["a", "b"], flaky=["c"], deselected=["d"],
                 durations={"a": 0.5, "b": 0.25, "s": 1.0, "x": 0.25, "c": 9.0, "d": 9.0},
                 overhead_s=0.5, wall_s=[1.0], modules={}, coverage={}, lines_hit=0,
                 lines_total=0, skipped=["s"])
    # the whole suite: a, b, the skipped s and the xfail x; not the excluded c and d
    # start-up and collection once, with a margin; the tests' time scaled by the factor
    assert b.cpu_budget_for(None, 3.0, 1.0) == 1.5 * 0.5 + 3.0 * 2.0 + 1.0
    assert b.cpu_budget_for(["a"], 3.0, 1.0) == 1.5 * 0.5 + 3.0 * 0.5 + 1.0
    assert b.cpu_budget_for(["a"], 3.0, 1.0, warm=True) == 1.5 * 0.5 + 3.0 * 0.5 + 1.0 - 0.5


def test_a_forked_child_gets_the_plain_budget_less_what_its_server_spent_before_forking(monkeypatch):
    """What the forked server's main thread spent before its first fork (start-up,
    configuration, rewriting asserts) a child does not spend again: taken off its budget, at
    most the baseline's start-up and collection time."""
    from types import SimpleNamespace

    from killbench.warm import ForkRunner, WarmRunner

    sent = []
    monkeypatch.setattr(WarmRunner, "_job", lambda self, mutant, tests, timeout, cpu=None: sent.append(cpu))
    runner = ForkRunner(sandbox=None, baseline=SimpleNamespace(overhead_s=0.8))
    runner.saved_cpu = 0.5
    runner._job(None, None, 10.0, 4.0)
    runner.saved_cpu = 2.0  # a server started on a cold cache
    runner._job(None, None, 10.0, 4.0)
    runner._job(None, None, 10.0, None)  # no budget stays none
    assert sent == [3.5, 3.2, None]
