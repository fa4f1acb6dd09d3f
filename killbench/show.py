"""One mutant, the way a person looks at it: its diff, why it is or is not a task, what the
target's own suite did with it (verdict, covering tests, the test that killed it), and, for
a dry run, every mutant of a target counted by operator, file and reason without running.

For a pin the verdict comes from its frozen manifest; for any other project from the
journals of earlier `killbench mutate` runs (nothing runs here).
"""

from __future__ import annotations

import difflib
import json
from collections import Counter
from pathlib import Path

from .errors import UserError
from .harness import enumerate_target, workdir_for
from .mutate import Candidate, apply, default_operators, held_out_operators


def find(target, mutant_id: str) -> Candidate:
    """The mutant of this id among every operator's mutants of the target."""
    if len(mutant_id) < 4:
        raise UserError(f"{mutant_id!r}: give at least 4 characters of a mutant id")
    # the default and the held-out-only operators enumerate apart, as a manifest build does
    # (one enumeration of both would merge their identical edits under one id)
    from . import behaviour

    categories = behaviour.ALL
    if target.spec.kind == "pin":  # the benchmark's own switches (manifests/build.toml)
        from .manifests import load_build_settings

        categories = load_build_settings().categories
    everything = (enumerate_target(target, default_operators(), categories)
                  + enumerate_target(target, held_out_operators(), categories))
    hits = [c for c in everything if c.mutant.id.startswith(mutant_id)]
    if not hits:
        raise UserError(f"{target.name} has no mutant {mutant_id!r} (ids are 16 hex digits; "
                        "`killbench mutate --dry-run` lists counts, a manifest or a --json lists ids)")
    if len(hits) > 1:
        raise UserError(f"{mutant_id!r} is the start of {len(hits)} ids of {target.name}: "
                        + ", ".join(c.mutant.id for c in hits[:5]))
    return hits[0]


def diff(target, c: Candidate) -> str:
    original = (target.tree / c.mutant.path).read_bytes()
    mutated = apply(original, c.mutant)
    a = original.decode("utf-8").splitlines(keepends=True)
    b = mutated.decode("utf-8", "replace").splitlines(keepends=True)
    return "".join(difflib.unified_diff(a, b, f"a/{c.mutant.path}", f"b/{c.mutant.path}", n=3))


def _recorded(target, mutant_id: str) -> dict | None:
    """The suite's result for this mutant: the manifest's record, or a mutate journal's."""
    if target.spec.kind == "pin":
        from .manifests import load_manifests

        m = load_manifests().get(target.name)
        if m is not None:
            for r in m["mutants"]:
                if r["id"] == mutant_id:
                    task = "a task" if mutant_id in m["task_set"] else (
                        "held out" if mutant_id in m["held_out"]["ids"] else f"role {r['role']}")
                    return {"source": "manifest", "verdict": r["verdict"], "killed_by": r["killed_by"],
                            "covered_by": r["covered_by"], "reachable": r["reachable"], "place": task}
    for journal in sorted(workdir_for(target).glob("journal-*.jsonl")):
        for line in journal.read_text().splitlines()[1:]:
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            if entry.get("id") == mutant_id and "outcome" in entry:
                o = entry["outcome"]
                return {"source": journal.name, "verdict": o.get("verdict"),
                        "killed_by": o.get("killed_by"), "covered_by": None, "reachable": None,
                        "place": None}
    return None


def describe(target, mutant_id: str) -> str:
    c = find(target, mutant_id)
    m = c.mutant
    lines = [f"mutant {m.id} of {target.name}: {m.operator} at {m.path}:{m.line} in "
             f"{m.function or '<module>'}",
             f"  {m.original!r} -> {m.replacement!r}"]
    if not c.compiles:
        lines.append(f"  does not compile: {c.error}")
    if m.unkillable:
        lines.append(f"  never a task: {m.unkillable}")
    rec = _recorded(target, m.id)
    if rec is None:
        lines.append("  the suite's verdict: not recorded (run `killbench mutate` on this target)")
    else:
        lines.append(f"  the suite's verdict ({rec['source']}): {rec['verdict']}"
                     + (f"; {rec['place']}" if rec["place"] else ""))
        if rec["killed_by"]:
            k = rec["killed_by"]
            lines.append(f"  killed by {k.get('test')} ({k.get('kind')}"
                         + (f", {k['exc_type']}" if k.get("exc_type") else "") + ")")
        if rec["covered_by"] is not None:
            cov = rec["covered_by"]
            lines.append(f"  covering tests: {len(cov)}" + (": " + ", ".join(cov[:5]) if cov else
                                                            (" (its line runs at import)" if rec["reachable"]
                                                             else " (no test runs its line)"))
                         + (" ..." if len(cov) > 5 else ""))
    lines += ["", diff(target, c).rstrip("\n")]
    return "\n".join(lines)


def dry_run(target, operators=None) -> str:
    """Every mutant the operators make, counted by operator, by file and by reason."""
    from tabulate import tabulate

    cands = enumerate_target(target, tuple(operators or default_operators()))
    by_op, by_file, by_reason = Counter(), Counter(), Counter()
    for c in cands:
        by_op[c.mutant.operator] += 1
        by_file[c.mutant.path] += 1
        by_reason["does not compile" if not c.compiles else (c.mutant.unkillable or "run against the suite")] += 1
    out = [f"{target.name}: {len(cands)} mutants (nothing run)", "",
           tabulate(sorted(by_op.items()), headers=["operator", "mutants"], tablefmt="github"), "",
           tabulate(sorted(by_file.items()), headers=["file", "mutants"], tablefmt="github"), "",
           tabulate(sorted(by_reason.items(), key=lambda kv: -kv[1]), headers=["what happens", "mutants"],
                    tablefmt="github")]
    return "\n".join(out)


__all__ = ["describe", "diff", "dry_run", "find"]
