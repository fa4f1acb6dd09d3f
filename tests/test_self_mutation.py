"""killbench held to its own test: `killbench mutate` on this repository's [tool.killbench]
table (the modules that decide a published number or verdict, against their fast tests),
on a seeded sample, must leave no reachable mutant alive (docs/DESIGN.md, "Held to its own
test"). Also: the seeded sample itself, which that check relies on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from killbench.harness import sample_candidates, sample_ranks
from killbench.mutate import enumerate_file

ROOT = Path(__file__).resolve().parents[1]
# the sample CI runs; its size is what fits in CI's time (100 of 2,280 mutants; a sample
# of 200 took 488 s of a 63-minute slow run, about 80 s of it the clean and coverage runs,
# the rest ~2 s a mutant on 2 cores: the import-time ones run the whole suite)
SAMPLE, SEED = 100, 0
REPORT = ROOT / ".ci" / "self-mutation.txt"

SOURCE = '''
def f(a, b):
    if a > b:
        return a - b
    return b + 1


def g(x):
    return x * 2 if x > 0 else -x


def h(items):
    total = 0
    for i in items:
        if i % 2 == 0:
            total += i
    return total
'''


def _members(text, size, seed):
    cands = list(enumerate_file("pkg/m.py", text))
    picked = sample_candidates(cands, size, seed)
    return cands, picked


def test_a_sample_has_its_size_keeps_the_enumeration_order_and_follows_its_seed():
    cands, picked = _members(SOURCE, 10, 0)
    assert len(cands) > 20 and len(picked) == 10
    order = [c.mutant.id for c in cands]
    assert [c.mutant.id for c in picked] == [i for i in order if i in {c.mutant.id for c in picked}]
    _, again = _members(SOURCE, 10, 0)
    assert [c.mutant.id for c in again] == [c.mutant.id for c in picked]
    _, other = _members(SOURCE, 10, 1)
    assert {c.mutant.id for c in other} != {c.mutant.id for c in picked}
    assert len(sample_candidates(cands, 10_000, 0)) == len(cands)


def test_an_edit_to_one_function_changes_no_other_function_mutant_rank():
    cands = list(enumerate_file("pkg/m.py", SOURCE))
    edited = SOURCE.replace("return x * 2 if x > 0 else -x", "y = x * 3\n    return y if x > 1 else -x")
    cands2 = list(enumerate_file("pkg/m.py", edited))
    # every mutant id changes with the file (ids hash it); what a mutant is, and its rank, do not
    assert {c.mutant.id for c in cands}.isdisjoint({c.mutant.id for c in cands2})

    def by_what(cs):
        ranks, out = sample_ranks(cs, 3), {}
        for c in cs:
            what = (c.mutant.function, c.mutant.operator, c.mutant.original, c.mutant.replacement)
            n = sum(1 for k in out if k[:4] == what)
            out[(*what, n)] = ranks[c.mutant.id]
        return out

    before, after = by_what(cands), by_what(cands2)
    for fn in ("f", "h"):
        mine = {k: v for k, v in before.items() if k[0] == fn}
        assert mine and all(after.get(k) == v for k, v in mine.items()), fn
    g_before = {v for k, v in before.items() if k[0] == "g"}
    g_after = {v for k, v in after.items() if k[0] == "g"}
    assert g_before != g_after


def reachable_survivors(doc: dict) -> list[dict]:
    return [m for m in doc["mutants"] if m["verdict"] == "survived" and m["reachable"]
            and not m.get("unkillable")]


@pytest.mark.slow
def test_the_instrument_leaves_no_reachable_mutant_alive_in_its_sample(use_cache, tmp_path):
    out = tmp_path / "self.json"
    p = subprocess.run([sys.executable, "-m", "killbench.cli", "-q", "mutate", str(ROOT), "--sample",
                        str(SAMPLE), "--seed", str(SEED), "--json", str(out)],
                       capture_output=True, text=True, timeout=2400,
                       env={**os.environ, "KILLBENCH_CACHE": str(use_cache)})
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads(out.read_text())
    alive = reachable_survivors(doc)
    v = doc["summary"]["verdicts"]
    reachable = [m for m in doc["mutants"] if m["reachable"] and m["ran"]]
    lines = [p.stdout.strip(), "",
             f"reachable mutants run: {len(reachable)}; killed {v['killed']}, timeout {v['timeout']}; "
             f"reachable survivors: {len(alive)}"]
    lines += [f"  {m['id']} {m['path']}:{m['line']} {m['operator']}: {m['original']!r} -> "
              f"{m['replacement']!r}" for m in alive]
    REPORT.write_text("\n".join(lines) + "\n")
    assert doc["sample"] == {"size": SAMPLE, "seed": SEED, "of": doc["sample"]["of"]}
    assert v["harness-error"] == 0 and v["invalid"] == 0
    assert not alive, "\n".join(lines[-len(alive) - 1:])
