"""The harness on fixture targets with known answers: every verdict bucket filled."""

from __future__ import annotations

import tomli
import pytest

from killbench.config import load_local
from killbench.harness import mutate_target
from killbench.runner import RunSettings

from conftest import FIXTURES

FAST = RunSettings(timeout_factor=3.0, timeout_floor=4.0)
NAMES = ["basic", "hang_when_mutated", "breaks_import", "collects_nothing_when_mutated",
         "tests_inside_package"]


def _key(rec) -> str:
    m = rec.mutant
    return f"{m.line}:{m.col}:{m.operator}:{m.replacement}"


def _observed(rec) -> dict:
    out = {"verdict": rec.outcome.verdict}
    if rec.outcome.verdict == "killed":
        out["kind"] = rec.outcome.killed_by.kind
    out["reach"] = "import" if rec.reach.import_time else ("tests" if rec.reach.reachable else "none")
    if rec.mutant.unkillable:
        out["unkillable"] = rec.mutant.unkillable
    return out


def run_fixture(name, fixture_target, jobs=2):
    spec = load_local(fixture_target(name))
    return mutate_target(spec, jobs=jobs, settings=FAST, show_progress=False)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_known_answers(name, fixture_target, use_cache):
    answers = tomli.loads((FIXTURES / name / "answers.toml").read_text())["mutants"]
    run = run_fixture(name, fixture_target)
    observed = {_key(r): _observed(r) for r in run.records}
    assert set(observed) == set(answers), "the fixture's mutants changed: update answers.toml"
    wrong = {k: (answers[k], observed[k]) for k in answers if answers[k] != observed[k]}
    assert not wrong


@pytest.mark.slow
def test_every_bucket_filled(fixture_target, use_cache):
    seen = set()
    for name in NAMES:
        for rec in run_fixture(name, fixture_target).records:
            seen.add(rec.outcome.verdict)
            if rec.outcome.killed_by:
                seen.add("killed:" + rec.outcome.killed_by.kind)
            if rec.outcome.verdict == "survived":
                seen.add("survived:" + ("reachable" if rec.reach.reachable else "unreachable"))
            if rec.mutant.unkillable:
                seen.add("unkillable:" + rec.mutant.unkillable.split()[0])
            if rec.reach.import_time:
                seen.add("import-time")
    wanted = {"killed", "survived", "timeout", "invalid", "harness-error", "killed:assertion",
              "killed:exception", "killed:collection-error", "survived:reachable",
              "survived:unreachable", "unkillable:inside", "unkillable:annotation", "import-time"}
    assert wanted <= seen, f"empty buckets: {sorted(wanted - seen)}"


@pytest.mark.slow
def test_a_selection_the_warm_runner_cannot_take_runs_forked_when_plain_would_collect_the_suite(
        fixture_target, use_cache, monkeypatch):
    """A --pyargs suite: a plain run of a mutant's covering tests collects the suite's own
    arguments and keeps the selection, which is what a child of the forked runner does. A
    mutant of a function whose name is defined twice (the warm runner cannot tell which one
    is live) runs its covering test there; the same verdicts as the plain path's."""
    import dataclasses

    import killbench.runner as runner

    runs = []
    real_run = runner._run

    def spy(sandbox, baseline, tests, settings, mutant=None, clean_warm=False):
        report = real_run(sandbox, baseline, tests, settings, mutant, clean_warm)
        runs.append((tests, report))
        return report

    monkeypatch.setattr(runner, "_run", spy)
    spec = load_local(fixture_target("tests_inside_package"))
    forked = {_key(r): r for r in mutate_target(spec, jobs=1, settings=FAST, show_progress=False,
                                                fresh=True).records}
    # a forked child ran only the selection it was sent
    selections = [(tests, r) for tests, r in runs if tests is not None and r.runner == "fork"]
    assert selections
    for tests, r in selections:
        assert r.selected == len(tests) and set(r.begun) <= set(tests), (tests, r.begun)
    for key in ("10:16:number-constant:4", "10:11:arith-swap:n / 3", "10:4:return-none:return None"):
        kill = forked[key]
        assert (kill.outcome.runner, kill.outcome.selection) == ("fork", "covering"), key
        assert kill.outcome.killed_by.test.endswith("test_third")
    plain = {_key(r): r for r in mutate_target(spec, jobs=1, settings=dataclasses.replace(FAST, warm=False),
                                               show_progress=False, fresh=True).records}
    assert {k: r.outcome.verdict for k, r in plain.items()} == \
        {k: r.outcome.verdict for k, r in forked.items()}
    assert {r.outcome.runner for r in plain.values() if r.outcome.ran} == {"plain"}
