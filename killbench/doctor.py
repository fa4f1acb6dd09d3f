"""The instrument checks: each states its expected outcome, runs, and shows what it saw.

These are the checks that caught every harness bug in the study this benchmark
comes from. `killbench doctor` exits 0 only if all of them hold.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

from .errors import InvariantError
from .workspace import exclusive
from .harness import (decided_without_run, enumerate_target, load_or_run_baseline, reach_all,
                      run_mutants, summarize, workdir_for)
from .mutate import Candidate, default_operators
from .records import Mutant, MutantRecord, Outcome
from .runner import RunSettings, classify, run_clean, run_mutant, selection_for
from .runner import _run as runner_run
from .sandbox import Sandbox
from .targets import PreparedTarget, prepare


@dataclass
class Check:
    name: str
    expected: str
    observed: str
    ok: bool
    details: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"name": self.name, "expected": self.expected, "observed": self.observed,
                "ok": self.ok, "details": self.details}


def canary_mutant(target: PreparedTarget, records_by_line: dict) -> tuple[Mutant, list[str]] | None:
    """A statement inside a function, executed by the most tests, replaced by a raise."""
    import ast

    best = None
    for sf in target.sources:
        text = (target.tree / sf.path).read_bytes()
        starts = [0] + [i + 1 for i, b in enumerate(text) if b == 0x0A]
        executed = records_by_line.get(sf.path, {})
        for fn in ast.walk(ast.parse(text)):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for stmt in fn.body:
                ctxs = executed.get(str(stmt.lineno), [])
                if "" in ctxs or not ctxs:
                    continue
                if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                    continue  # docstring
                if best is None or len(ctxs) > len(best[3]):
                    best = (sf, stmt, starts, ctxs)
    if best is None:
        return None
    sf, stmt, starts, ctxs = best
    s = starts[stmt.lineno - 1] + stmt.col_offset
    e = starts[stmt.end_lineno - 1] + stmt.end_col_offset
    text = (target.tree / sf.path).read_bytes()
    mutant = Mutant(id="canary", path=sf.path, line=stmt.lineno, end_line=stmt.end_lineno,
                    col=stmt.col_offset, end_col=stmt.end_col_offset, start=s, end=e,
                    function=fn_name(text, stmt.lineno), operator="canary",
                    original=text[s:e].decode("utf-8"),
                    replacement='raise RuntimeError("killbench canary")')
    return mutant, sorted(ctxs)


def fn_name(text: bytes, line: int) -> str | None:
    import ast

    best = None
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                node.lineno <= line <= node.end_lineno:
            if best is None or node.lineno > best.lineno:
                best = node
    return best.name if best else None


def run_doctor(spec, jobs: int = 2, sample: int = 8, seed: int = 0,
               settings: RunSettings = RunSettings()) -> tuple[list[Check], PreparedTarget]:
    target = prepare(spec)
    with exclusive(workdir_for(target), spec.name):
        return _run_doctor(spec, target, jobs, sample, seed, settings)


def _run_doctor(spec, target, jobs, sample, seed, settings) -> tuple[list[Check], PreparedTarget]:
    workdir = workdir_for(target)
    workdir.mkdir(parents=True, exist_ok=True)
    baseline = load_or_run_baseline(target, workdir)
    checks: list[Check] = []
    sb = Sandbox(target, workdir / "sandboxes" / "doctor")

    # 1. the suite imports the target from the sandbox (what this run imported, not the
    # baseline's record of it)
    report = runner_run(sb, baseline, None, settings)
    verdict, _, detail = classify(report, sb)
    imported = {k: v for k, v in report.modules.items() if v}
    inside = bool(imported) and all(sb.contains(v) for v in imported.values())
    checks.append(Check(
        "imports from the sandbox",
        "the suite imports the target from the worker's copy and passes on clean code",
        f"imported {', '.join(f'{k} from {v}' for k, v in imported.items()) or 'nothing'}; "
        f"clean run {verdict}" + (f" ({detail})" if detail else ""),
        inside and verdict == "survived"))

    # 2. a canary that breaks a reached function is killed
    cov = {p: c.get("executed", {}) for p, c in baseline.coverage.items()}
    found = canary_mutant(target, cov)
    if found is None:
        checks.append(Check("canary is killed", "killed", "no statement inside a function is "
                            "executed by a test: nothing to break", False))
        canary = None
    else:
        canary, covering = found
        covering = [t for t in covering if t in set(baseline.tests)]
        out = run_mutant(sb, baseline, canary, covering, settings)
        checks.append(Check(
            "canary is killed",
            f"killed ({canary.path}:{canary.line} in {canary.function} replaced by a raise)",
            out.verdict + (f" by {out.killed_by.kind} in {out.killed_by.test}" if out.killed_by else ""),
            out.verdict == "killed"))

        # 3. mutant -> clean -> mutant -> clean in one worker alternates; on the canary's
        # covering tests, or on the full suite when those fail alone on clean code (tests that
        # need others to have run first: a clean run of them says nothing about bytecode)
        alone = run_clean(sb, baseline, covering, settings).verdict == "survived"
        tests = covering if alone else None
        seq = []
        for i in range(4):
            if i % 2 == 0:
                seq.append(run_mutant(sb, baseline, canary, tests, settings).verdict)
            else:
                seq.append(run_clean(sb, baseline, tests, settings).verdict)
        want = ["killed", "survived", "killed", "survived"]
        checks.append(Check("no stale bytecode", " -> ".join(want),
                            " -> ".join(seq) + ("" if alone else " (on the full suite: the canary's "
                                                "covering tests fail alone on clean code)"),
                            seq == want))

    # 4 and 5 need a sample of real mutants
    candidates = enumerate_target(target, default_operators())
    reaches = reach_all(target, baseline, candidates)
    rng = random.Random(seed)
    runnable = [c for c in candidates if decided_without_run(c, reaches[c.mutant.id], baseline) is None]
    unreached = [c for c in candidates if c.compiles and not reaches[c.mutant.id].reachable
                 and not c.mutant.unkillable]
    picked = rng.sample(runnable, min(sample, len(runnable)))
    todo = [(c.mutant, selection_for(reaches[c.mutant.id], baseline)) for c in picked]

    parallel: dict[str, Outcome] = {}
    serial: dict[str, Outcome] = {}
    run_mutants(target, baseline, todo, workdir, jobs, lambda m, o: parallel.__setitem__(m.id, o),
                settings, sandbox_prefix="doctor-p")
    run_mutants(target, baseline, todo, workdir, 1, lambda m, o: serial.__setitem__(m.id, o),
                settings, sandbox_prefix="doctor-s")
    diff = [f"{m.id} {m.path}:{m.line} {m.operator}: parallel {parallel[m.id].verdict}, "
            f"serial {serial[m.id].verdict}" for m, _ in todo if parallel[m.id].verdict != serial[m.id].verdict]
    checks.append(Check(
        "parallel equals serial",
        f"identical verdicts for {len(todo)} sampled mutants with {jobs} workers and with 1",
        f"{len(todo) - len(diff)} / {len(todo)} identical "
        f"({_tally(parallel.values())})", not diff and len(todo) > 0, diff))

    # 5. the warm runner gives the plain path's verdicts
    import dataclasses

    # the runners on their own: both sides without the whole-suite confirmation of survivors,
    # which would judge again (and so hide) a warm runner that never saw a mutant
    alone = dataclasses.replace(settings, confirm_survivors=False)
    fast: dict[str, Outcome] = {}
    plain: dict[str, Outcome] = {}
    run_mutants(target, baseline, todo, workdir, jobs, lambda m, o: fast.__setitem__(m.id, o),
                alone, sandbox_prefix="doctor-w")
    run_mutants(target, baseline, todo, workdir, jobs, lambda m, o: plain.__setitem__(m.id, o),
                dataclasses.replace(alone, warm=False), sandbox_prefix="doctor-plain")
    warm = [m for m, _ in todo if fast[m.id].runner in ("warm", "fork")]
    forked = sum(1 for m in warm if fast[m.id].runner == "fork")
    diff = [f"{m.id} {m.path}:{m.line} {m.operator}: {fast[m.id].runner} "
            f"{fast[m.id].verdict}, plain {plain[m.id].verdict}"
            for m in warm if fast[m.id].verdict != plain[m.id].verdict]
    checks.append(Check(
        "warm runner equals plain",
        f"identical verdicts for the sampled mutants the warm or forked runner judged and the plain path",
        f"{len(warm) - len(diff)} / {len(warm)} identical ({forked} of them forked before "
        f"collection; {len(todo) - len(warm)} of {len(todo)} sampled mutants ran the plain way)",
        not diff and (len(warm) > 0 or not settings.warm), diff))

    # 6. what the instrument reports (survivors of their covering tests judged again on the
    # whole suite when the settings say so) equals the full suite; unreached mutants survive it
    sel_sample = [c for c in picked if not reaches[c.mutant.id].import_time]
    extra = rng.sample(unreached, min(max(2, sample // 4), len(unreached)))
    full: dict[str, Outcome] = {}
    run_mutants(target, baseline, [(c.mutant, None) for c in sel_sample + extra], workdir, jobs,
                lambda m, o: full.__setitem__(m.id, o), settings, sandbox_prefix="doctor-f")
    diff = []
    for c in sel_sample:
        a, b = parallel[c.mutant.id].verdict, full[c.mutant.id].verdict
        if a != b:
            diff.append(f"{c.mutant.id} {c.mutant.path}:{c.mutant.line} {c.mutant.operator}: "
                        f"covering {a}, full suite {b}")
    for c in extra:
        if full[c.mutant.id].verdict != "survived":
            diff.append(f"{c.mutant.id} {c.mutant.path}:{c.mutant.line} {c.mutant.operator}: "
                        f"no test executes it, yet the full suite says {full[c.mutant.id].verdict}")
    checks.append(Check(
        "covering tests equal the full suite",
        f"identical verdicts for {len(sel_sample)} sampled mutants with covering tests and with "
        f"the full suite; {len(extra)} unreached mutants survive the full suite",
        f"{len(sel_sample) + len(extra) - len(diff)} / {len(sel_sample) + len(extra)} as expected",
        not diff and len(sel_sample) + len(extra) > 0, diff))

    # 7. the counts add up (on the last complete mutate run if there is one)
    checks.append(_counts_check(target, workdir, baseline, candidates, reaches, parallel))
    return checks, target


def _tally(outcomes) -> str:
    from collections import Counter

    c = Counter(o.verdict for o in outcomes)
    return ", ".join(f"{k} {v}" for k, v in sorted(c.items()))


def _counts_check(target, workdir: Path, baseline, candidates: list[Candidate], reaches,
                  sample) -> Check:
    from .harness import mutate_header, mutate_journal_path

    path = mutate_journal_path(workdir, mutate_header(target, default_operators(), RunSettings()))
    entries = {}
    if path.exists():
        for line in path.read_text().splitlines()[1:]:
            try:
                e = json.loads(line)
            except json.JSONDecodeError:
                continue
            entries[e["id"]] = e
    complete = candidates and all(c.mutant.id in entries for c in candidates)
    if complete:
        records = [MutantRecord(c.mutant, reaches[c.mutant.id],
                                Outcome.from_dict(entries[c.mutant.id]["outcome"])) for c in candidates]
        where = f"the last complete `killbench mutate` run ({len(records)} mutants)"
    else:
        records = []
        for c in candidates:
            out = decided_without_run(c, reaches[c.mutant.id], baseline) or sample.get(c.mutant.id)
            if out is not None:
                records.append(MutantRecord(c.mutant, reaches[c.mutant.id], out))
        where = f"the doctor's sample and the not-run mutants ({len(records)} mutants; run " \
                "`killbench mutate` for all)"
    try:
        s = summarize(records)
        ok = True
        observed = (f"on {where}: one verdict for each of {s['mutants']} mutants; task set "
                    f"{s['task_set']} = survived reachable killable {s['survived_reachable']}")
    except InvariantError as exc:
        ok, observed = False, f"an invariant failed on {where}: {exc}"
    return Check("the counts add up",
                 "one verdict per mutant; task set = survived and reachable and not unkillable",
                 observed, ok)
