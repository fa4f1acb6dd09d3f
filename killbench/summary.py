"""Terminal and JSON views of a mutation run: every rate as k / n with what n counts."""

from __future__ import annotations

from tabulate import tabulate

from . import __version__
from .harness import MutationRun


def _pct(k: int, n: int) -> str:
    return f"{k} / {n} ({100.0 * k / n:.1f}%)" if n else f"{k} / 0"


def render(run: MutationRun) -> str:
    c = run.counts()
    b = run.baseline
    v = c["verdicts"]
    lines = [
        f"killbench {__version__} · target {run.target.name}"
        + (f" {run.target.spec.version}" if run.target.spec.version else "")
        + f" · fingerprint {run.target.fingerprint[:12]}",
        f"suite: {len(b.tests)} tests pass 3/3 on clean code"
        + (f", {len(b.flaky)} flaky excluded" if b.flaky else "")
        + (f", {len(b.deselected)} deselected by the pin" if b.deselected else ""),
        "",
    ]
    if run.sample:
        lines[-1:-1] = [f"a seeded sample: {run.sample['size']} of {run.sample['of']} mutants "
                        f"(seed {run.sample['seed']}); every count below is of the sample"]
    rows = [[verdict, v[verdict]] for verdict in v] + [["total", c["mutants"]]]
    lines.append(tabulate(rows, headers=["verdict", "mutants"], tablefmt="github"))
    if c["killed_by"]:
        lines.append("killed by: " + ", ".join(f"{k} {n}" for k, n in c["killed_by"].items()))
    lines += [
        "",
        f"line coverage of the suite: {_pct(b.lines_hit, b.lines_total)} of statements in the mutated files",
        f"mutation score:             {_pct(c['score']['killed'], c['score']['of'])} of {c['score']['what']}",
        "",
        f"survivors: {v['survived']}",
        f"  reachable (task set):      {c['survived_reachable']}",
        f"  not reachable (untested):  {c['survived_unreachable']}",
        f"  unkillable:                {c['survived_unkillable']}",
    ]
    if c["unkillable_reasons"]:
        lines.append("unkillable mutants by reason: "
                     + "; ".join(f"{r}: {n}" for r, n in c["unkillable_reasons"].items()))
    chunks = run.extra.get("chunks")
    lines += ["", f"wall time {run.wall_s:.1f} s"
              + (f" ({run.resumed} results resumed from the journal)" if run.resumed else "")
              + (f", the mutants spread over {chunks} chunks" if chunks else ""),
              f"work directory: {run.workdir}" + (" (chunk 1's, on its worker)" if chunks else "")]
    return "\n".join(lines)


def to_json(run: MutationRun) -> dict:
    return {
        "killbench": __version__,
        "target": {"name": run.target.name, "version": run.target.spec.version,
                   "kind": run.target.spec.kind, "fingerprint": run.target.fingerprint,
                   "sdist_sha256": run.target.spec.sdist_sha256},
        "operators": list(run.operators),
        "baseline": {"tests": len(run.baseline.tests), "flaky": run.baseline.flaky,
                     "deselected": run.baseline.deselected, "lines_hit": run.baseline.lines_hit,
                     "lines_total": run.baseline.lines_total, "modules": run.baseline.modules},
        "summary": run.counts(),
        "sample": run.sample,
        "wall_s": round(run.wall_s, 3),
        "mutants": [r.to_dict() for r in run.records],
    }
