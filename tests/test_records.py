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
