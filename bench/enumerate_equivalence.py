"""Check and time mutant enumeration: every pin's full enumeration (default and held-out
operators) with each mutant's top-level statement compiled alone first (the fast path)
against every mutant's whole file compiled (the reference). Prints, per pin, the mutants,
the CPU seconds of each way and any mutant whose `compiles`, error or unkillable reason
differs; exits 1 on any difference.

    python bench/enumerate_equivalence.py [PIN ...]
"""

from __future__ import annotations

import sys
import time
from unittest import mock

from killbench import mutate
from killbench.config import list_pins, resolve
from killbench.targets import prepare


def enumerate_all(target) -> dict[str, tuple]:
    ops = mutate.default_operators() + mutate.held_out_operators()
    out = {}
    for sf in target.sources:
        text = (target.tree / sf.path).read_bytes().decode("utf-8")
        for c in mutate.enumerate_file(sf.path, text, ops):
            out[c.mutant.id] = (c.compiles, c.error, c.mutant.unkillable)
    return out


def main(names: list[str]) -> int:
    names = names or sorted(p.stem for p in list_pins())
    differences = 0
    print(f"{'pin':16} {'mutants':>8} {'whole-file CPU s':>17} {'statement CPU s':>16} {'ratio':>6}  differences")
    totals = [0, 0.0, 0.0]
    for name in names:
        target = prepare(resolve(name))
        t = time.process_time()
        with mock.patch.object(mutate._Statements, "differs", lambda self, p: False):
            reference = enumerate_all(target)
        whole = time.process_time() - t
        t = time.process_time()
        fast = enumerate_all(target)
        alone = time.process_time() - t
        diff = sorted(i for i in reference.keys() | fast.keys() if reference.get(i) != fast.get(i))
        differences += len(diff)
        totals[0] += len(reference); totals[1] += whole; totals[2] += alone
        print(f"{name:16} {len(reference):8} {whole:17.1f} {alone:16.1f} {whole / alone:6.1f}  {len(diff)}")
        for i in diff[:10]:
            print(f"    {i}: whole file {reference.get(i)}, statement {fast.get(i)}")
    print(f"{'all':16} {totals[0]:8} {totals[1]:17.1f} {totals[2]:16.1f} {totals[1] / totals[2]:6.1f}  {differences}")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
