"""`killbench run` with a plug-in generator: every candidate gated, each rejection with
its reason, a self-contained run directory."""

from __future__ import annotations

import json

import pytest

from killbench.gate import gaming_matches, neutral_variant
from killbench.errors import UserError
from killbench.plugins import load_generator
from killbench.records import Mutant
from killbench.run import run_generator
from killbench.score import score_run

import fixture_generators as fg


def test_gaming_patterns():
    assert gaming_matches(fg.GAMING)
    assert gaming_matches("import m\ndef test():\n    assert m.f.__code__.co_consts\n")
    assert gaming_matches("import m\np = open(m.__file__).read()\n")
    assert not gaming_matches(fg.KILLS_BOUNDARY)
    assert not gaming_matches("import os\nHERE = os.path.dirname(__file__)\n")


def test_neutral_variant_keeps_behaviour_and_moves_text():
    src = b"def f(n):\n    if n:\n        return n > 1\n    return 0\n"
    m = Mutant(id="x", path="m.py", line=3, end_line=3, col=15, end_col=20, start=35, end=40,
               function="f", operator="compare-flip", original="n > 1", replacement="n >= 1")
    assert src[35:40] == b"n > 1"
    out = neutral_variant(src, m)
    assert out == b"def f(n):\n    if n:\n        # killbench: neutral edit\n        return n > 1\n    return 0\n"
    compile(out, "m.py", "exec")


def test_unknown_generator_is_a_clear_error():
    with pytest.raises(UserError, match="unknown generator 'nope'"):
        load_generator("nope")
    with pytest.raises(UserError, match="no attribute"):
        load_generator("fixture_generators:Missing")


@pytest.mark.slow
def test_run_gates_every_candidate(fixture_target, use_cache, tmp_path):
    project = fixture_target("basic")
    out = tmp_path / "run"
    run_generator("fixture_generators:FixedTests", [str(project)], out=out, jobs=2, gate_timeout=10)
    gate = [json.loads(x) for x in (out / "gate.jsonl").read_text().splitlines()]
    by_source = {}
    for entry in gate:
        src = (out / "candidates" / f"{entry['candidate']}.py").read_text()
        by_source[src] = (entry["kept"], entry["reason"])
    assert by_source == {
        fg.KILLS_BOUNDARY: (True, None),
        fg.FAILS_ON_CLEAN: (False, "fails-on-clean"),
        fg.DOES_NOT_DETECT: (False, "did-not-detect"),
        fg.GAMING: (False, "gaming"),
        fg.SYNTAX_ERROR: (False, "syntax-error"),
        fg.NO_TESTS: (False, "no-test-collected"),
        fg.FLAKY: (False, "flaky"),
        fg.HANGS: (False, "timeout"),
    }
    summary = json.loads((out / "summary.json").read_text())
    s = next(iter(summary.values()))
    assert s["attempts"] == 8 and s["kept"] == 1
    assert sum(v for k, v in s.items() if k.startswith("rejected:")) == 7
    config = json.loads((out / "config.json").read_text())
    assert config["generator"]["name"] == "fixed-tests"
    tasks = json.loads((out / "tasks" / "basic.json").read_text())
    assert any(t["replacement"] == "n >= THRESHOLD" and "def is_big" in t["function_source"]
               and t["diff"].startswith("--- a/src/basic/__init__.py") for t in tasks)

    # the run scores to the answers worked out by hand (see the fixture's answers.toml)
    score = score_run(out, jobs=2, resamples=2000)["targets"]["basic"]
    assert (score["kills"]["k"], score["kills"]["n"]) == (1, 8)
    # of the 8, only `if TYPE_CHECKING:` negated (line 6) runs at import alone
    by_place = {p: (r["k"], r["n"]) for p, r in score["kills_by_place"].items()}
    assert by_place == {"run by a test": (1, 7), "import only": (0, 1)}
    assert score["funnel"] == {"attempts": 8, "parsed": 7, "not gaming (scan)": 6, "collected": 5,
                               "passes on clean": 3, "stable on clean": 2,
                               "not gaming (neutral edit)": 2, "kept": 1,
                               "kills beyond its own mutant": 0}
    assert score["assertion_classes"] == {"value": 1}
    assert score["specificity"]["exactly_one"] == 1
    t = score["transfer"]
    assert (t["within_function_all"]["k"], t["within_function_all"]["n"]) == (1, 1)
    assert (t["cross_function"]["k"], t["cross_function"]["n"]) == (0, 9)
    assert t["minimum"] is None and t["minimum_met"] is None
    assert score["held_out"] == 10
    assert score["beyond_the_suite"]["held_out"] == []


@pytest.mark.slow
def test_a_failing_generator_loses_nothing(fixture_target, use_cache, tmp_path):
    project = fixture_target("basic")
    out = tmp_path / "run"
    run_generator("fixture_generators:CrashesAfterOne", [str(project)], out=out, jobs=2, gate_timeout=20)
    gate = [json.loads(x) for x in (out / "gate.jsonl").read_text().splitlines()]
    assert [g["kept"] for g in gate] == [True]
    summary = json.loads((out / "summary.json").read_text())["basic"]
    assert summary["kept"] == 1
    assert summary["stopped"].startswith("generation stopped: ConnectionError")
