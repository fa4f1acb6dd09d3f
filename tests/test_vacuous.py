"""A deliberately vacuous generator scores what existence checks can catch, and no more."""

from __future__ import annotations

import json

import pytest

from killbench.run import run_generator
from killbench.score import score_run


@pytest.mark.slow
def test_vacuous_tests_catch_only_none_and_crashes(fixture_target, use_cache, tmp_path):
    project = fixture_target("basic")
    run = tmp_path / "run"
    run_generator("fixture_generators:VacuousTests", [str(project)], out=run, jobs=2, gate_timeout=20)
    score = score_run(run, jobs=2, resamples=2000).targets["basic"].model_dump()
    # one file of three task-less tests: each is judged, and kept, on its own
    assert score["kept_tests"] == 3 and score["kept_files"] == 1
    assert (score["kills"]["k"], score["kills"]["n"]) == (0, 6)
    assert score["assertion_classes"] == {"existence": 3}
    tasks_and_held = json.loads((run / "tasks" / "basic.json").read_text())
    assert len(tasks_and_held) == 6
    killed = set().union(*map(set, score["kills_by_test"].values()))
    from killbench.evidence import Population, load
    pop = load(run / "population" / "basic.json", Population).by_id()
    got = sorted(f"{pop[i].line}:{pop[i].operator}" for i in killed)
    # return None in the three called functions, and the negated check that makes
    # parse_positive("5") raise: nothing else is visible to `is not None`
    assert got == ["13:return-none", "18:negate-condition", "20:return-none", "24:return-none"]
    assert score["by_class"]["existence"]["held_out_kills"] == 4
