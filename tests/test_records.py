"""The typed records: their published schemas are generated from them, and the invariants
checked on them hold under `python -O` too."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from killbench.evidence import render_schemas

ROOT = Path(__file__).resolve().parent.parent


def test_the_published_schemas_are_generated_from_the_records():
    published = {p.name: p.read_text() for p in (ROOT / "docs" / "schemas").glob("*.json")}
    assert published == render_schemas()


def test_invariants_are_not_asserts():
    code = """
from killbench.harness import summarize
from killbench.records import Mutant, MutantRecord, Outcome, Reach
m = Mutant(id="a", path="p.py", line=1, end_line=1, col=0, end_col=1, start=0, end=1,
           function=None, operator="x", original="a", replacement="b")
bad = MutantRecord(m, Reach(True, (), False), Outcome("exploded"))
try:
    summarize([bad])
except Exception as exc:
    print(type(exc).__name__)
"""
    out = subprocess.run([sys.executable, "-O", "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "InvariantError", out.stderr


def _record(mid, verdict, reachable=True, unkillable=None, killed_by=None):
    from killbench.records import Mutant, MutantRecord, Outcome, Reach

    m = Mutant(id=mid, path="p.py", line=1, end_line=1, col=0, end_col=1, start=0, end=1,
               function=None, operator="x", original="a", replacement="b",
               unkillable=unkillable)
    return MutantRecord(m, Reach(reachable, (), False), Outcome(verdict, killed_by=killed_by))


def test_summarize_counts_each_bucket_and_refuses_a_mutant_counted_twice():
    import pytest

    from killbench.errors import InvariantError
    from killbench.harness import summarize
    from killbench.records import KilledBy

    kill = KilledBy("test", "t::a")
    records = [_record("a", "killed", killed_by=kill), _record("b", "survived"),
               _record("c", "survived", reachable=False),
               _record("d", "survived", unkillable="pragma"), _record("e", "timeout")]
    s = summarize(records)
    assert (s["mutants"], s["verdicts"]["killed"], s["verdicts"]["survived"],
            s["verdicts"]["timeout"]) == (5, 1, 3, 1)
    assert (s["survived_reachable"], s["survived_unreachable"], s["survived_unkillable"],
            s["task_set"]) == (1, 1, 1, 1)
    assert s["score"]["killed"] == 1 and s["score"]["of"] == 4
    with pytest.raises(InvariantError, match="5 verdicts for 4 mutants"):
        summarize(records[:4] + [_record("b", "killed", killed_by=kill)])
    with pytest.raises(InvariantError, match="kill kinds sum to 0"):
        summarize([_record("a", "killed")])
