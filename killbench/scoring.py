"""Run the kept tests against the population: the kill matrix of one target.

Each kept test file runs alone, with only its kept tests selected, in a fresh scratch
directory under the run's isolation level, so that no test's outcome depends on another
file (a test that changes global state, plants a file or forges events reaches no other
file's verdict). For each file:

1. one clean run with per-test coverage: each test's status on clean code and the lines
   it executes (and those its module runs at import), so the mutants it can reach;
2. one run per reached mutant, the mutant disguised (``disguise``: same behaviour, a text
   no test has seen), each test's status read from the probe's events.

A test kills a mutant when it passed on clean code and failed on the mutant. Timeouts
and harness trouble are recorded as such, never as kills; a test that wrote outside its
scratch directory or read the target's source during scoring is excluded with that
reason. Nothing here computes a number: ``metrics`` does, from the matrix.
"""

from __future__ import annotations

import itertools
import random
import secrets
import threading
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .disguise import disguise
from .evidence import KillMatrix, KillRow, KillRun, Population
from .gate import GATE_LIMITS, outcomes, source_bytes
from .mutate import apply
from .population import mutant as to_mutant
from .reach import StatementIndex
from .sandbox import Sandbox

SCORE_TIMEOUT = 60.0


class KeptFile:
    """One candidate file with the tests the gate kept from it."""

    def __init__(self, candidate: str, source: str, nodeids: list[str], task: str | None):
        self.candidate, self.source, self.nodeids, self.task = candidate, source, sorted(nodeids), task


def _test_dir(sb: Sandbox) -> Path:
    for t in sb.target.spec.tests:
        if (sb.tree / t).is_dir():
            return sb.tree / t
    return sb.tree


def _reached(pop: Population, cov: dict, nodeids: list[str], target) -> dict[str, set[str]]:
    """nodeid -> population mutants on lines it executed (a line its module runs at import
    counts for every test of the file)."""
    per_test: dict[str, set] = defaultdict(set)
    at_import: set = set()
    for path, entry in cov.items():
        for line, ctxs in entry.get("executed", {}).items():
            for c in ctxs:
                if c == "":
                    at_import.add((path, int(line)))
                elif c in nodeids:
                    per_test[c].add((path, int(line)))
    index: dict[str, StatementIndex] = {}
    out: dict[str, set[str]] = {n: set() for n in nodeids}
    for m in pop.mutants:
        if m.path not in index:
            index[m.path] = StatementIndex(pop.sources.get(m.path)
                                           or (target.tree / m.path).read_text(encoding="utf-8"))
        first = min(index[m.path].statement_line(m.start, m.end, m.line), m.line)
        span = {(m.path, ln) for ln in range(first, m.end_line + 1)}
        shared = bool(span & at_import)
        for n in nodeids:
            if shared or span & per_test[n]:
                out[n].add(m.id)
    return out


def _flags(report) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for a in report.audit:
        out[a.get("nodeid") or "*"].append(f"{a['kind']} {a['path']}")
    for p in report.sources_changed:
        out["*"].append(f"changed {p}")
    return out


def kill_matrix(target, pop: Population, files: list[KeptFile], *, jobs: int, workdir: Path,
                isolation: str, seed: int | None = None, progress=None,
                only: set[tuple[str, str]] | None = None) -> KillMatrix:
    """Run every kept file against every population mutant its tests reach (`only`: just
    these (candidate, mutant) runs, after every file's clean run: verify's sample)."""
    matrix = KillMatrix(target=target.name, isolation=isolation)
    if not files:
        return matrix
    rng = random.Random(seed if seed is not None else secrets.randbits(64))
    sandboxes = [Sandbox(target, workdir / "sandboxes" / f"score{i}", trusted=False,
                         isolation=isolation) for i in range(max(1, jobs))]
    rows = pop.by_id()
    mutants = {i: to_mutant(rows[i]) for i in pop.task_set + pop.held_out}
    lock = threading.Lock()
    # every run of one file happens in the same sandbox: its clean and its mutant runs then
    # show a test the same paths (cwd, argv, PATH, sys.path), so no run can tell them apart
    home = {kf.candidate: i % len(sandboxes) for i, kf in enumerate(files)}
    locks = [threading.Lock() for _ in sandboxes]

    def run_file(kf: KeptFile, mutant_id: str | None, coverage: bool, disguise_seed: int,
                 neutral: dict[str, int] | None = None):
        i = home[kf.candidate]
        with locks[i]:
            sb = sandboxes[i]
            path = _test_dir(sb) / f"test_killbench_{kf.candidate}.py"
            try:
                sb.add_file(path, source_bytes(kf.source))
                rel = path.relative_to(sb.tree).as_posix()
                m = mutants.get(mutant_id) if mutant_id else None
                changed = False
                if m is not None:
                    original = (target.tree / m.path).read_bytes()
                    text = apply(original, m).decode("utf-8")
                    sb.write(m.path, disguise(text, m.line, random.Random(disguise_seed)).encode("utf-8"))
                    changed = True
                for p, anchor in sorted((neutral or {}).items()):
                    # the clean code disguised as the mutant runs are: a test that tells the
                    # runs apart by text, size or bytecode fails here and is excluded
                    text = (target.tree / p).read_bytes().decode("utf-8")
                    sb.write(p, disguise(text, anchor, random.Random(f"{disguise_seed}:{p}")).encode("utf-8"))
                    changed = True
                try:
                    report, cov = sb.run_pytest([rel], select=kf.nodeids, exclude=[],
                                                timeout=SCORE_TIMEOUT + 2.0 * len(kf.nodeids),
                                                coverage=coverage, limits=GATE_LIMITS, candidates=[rel])
                finally:
                    if changed:
                        sb.restore()
                return report, cov
            finally:
                sb.remove_file(path)

    # 1. clean runs with coverage, one per file: what each test reaches
    clean: dict[str, tuple] = {}
    with ThreadPoolExecutor(max_workers=len(sandboxes)) as ex:
        for kf, res in zip(files, ex.map(lambda kf: run_file(kf, None, True, 0), files)):
            clean[kf.candidate] = res
    reaches = {}
    for kf in files:
        _, cov = clean[kf.candidate]
        reaches[kf.candidate] = _reached(pop, cov or {}, kf.nodeids, target) if cov else \
            {n: set() for n in kf.nodeids}
    # 1b. the clean status of each test: a run set up exactly as its mutant runs are (no
    # coverage, the same sandbox), on a disguise of every file holding a mutant it reaches
    neutral_of = {}
    for kf in files:
        got = set().union(*reaches[kf.candidate].values()) if reaches[kf.candidate] else set()
        anchors: dict[str, int] = {}
        for mid in sorted(got):
            m = mutants.get(mid)
            if m is not None:
                anchors.setdefault(m.path, m.line)
        neutral_of[kf.candidate] = anchors
    status_runs: dict[str, tuple] = {}
    with ThreadPoolExecutor(max_workers=len(sandboxes)) as ex:
        seeds = {kf.candidate: rng.getrandbits(64) for kf in files}
        for kf, res in zip(files, ex.map(lambda kf: run_file(kf, None, False, seeds[kf.candidate],
                                                             neutral_of[kf.candidate]), files)):
            status_runs[kf.candidate] = res
    todo = []
    for kf in files:
        report, cov = status_runs[kf.candidate][0], clean[kf.candidate][1]
        status = outcomes(report)
        flags = _flags(report)
        for k, v in _flags(clean[kf.candidate][0]).items():
            flags.setdefault(k, []).extend(v)
        reach = reaches[kf.candidate]
        errors = [f"{p}: {e['error']}" for p, e in (cov or {}).items() if "error" in e]
        for n in kf.nodeids:
            st = status.get(n)
            row = KillRow(key=n, candidate=kf.candidate, nodeid=n, task=kf.task,
                          clean=st.status if st else "not-run", reached=sorted(reach.get(n, ())))
            matrix.rows.append(row)
            why = None
            if st is None or st.status != "passed":
                why = (f"{row.clean} on (a disguise of) the clean code when its file runs alone "
                       "in scoring" + (f" ({st.exc_type})" if st and st.exc_type else ""))
            elif flags.get(n) or flags.get("*"):
                why = "during scoring: " + "; ".join((flags.get(n) or []) + (flags.get("*") or []))[:400]
            elif cov is None or errors:
                why = "coverage could not be measured: " + ("; ".join(errors) or "no coverage data")
            if why:
                matrix.excluded[n] = why
        live = [n for n in kf.nodeids if n not in matrix.excluded]
        reached = sorted(set().union(*[reach.get(n, set()) for n in live])) if live else []
        for mid in reached:
            dseed = rng.getrandbits(64)
            if only is None or (kf.candidate, mid) in only:
                todo.append((kf, mid, dseed))
    if progress is not None:
        progress(0, len(todo))

    # 2. one run per (file, reached mutant), the files' sandboxes taken in turn
    by_home: dict[int, list] = defaultdict(list)
    for item in todo:
        by_home[home[item[0].candidate]].append(item)
    todo = [item for group in itertools.zip_longest(*by_home.values()) for item in group
            if item is not None]
    done = [0]

    def one(item):
        kf, mid, dseed = item
        report, _ = run_file(kf, mid, False, dseed)
        status = outcomes(report, kf.nodeids)
        flags = _flags(report)
        cells = {}
        for n in kf.nodeids:
            if n in matrix.excluded:
                continue
            st = status.get(n)
            if st is None:
                cells[n] = "timeout" if report.timed_out else "not-run"
            elif st.status == "interrupted":
                cells[n] = "timeout" if report.timed_out else "interrupted"
            elif st.status == "failed":
                cells[n] = "failed"
            elif st.status == "passed":
                cells[n] = "passed"
            else:
                cells[n] = "not-run"
        run = KillRun(mutant=mid, candidate=kf.candidate, cells=cells,
                      duration_s=round(report.wall_s, 3), timed_out=report.timed_out,
                      flags={k: sorted(set(v)) for k, v in flags.items()})
        with lock:
            done[0] += 1
            if progress is not None:
                progress(done[0], len(todo))
        return run

    with ThreadPoolExecutor(max_workers=len(sandboxes)) as ex:
        for run in ex.map(one, todo):
            matrix.runs.append(run)
    # a test flagged in any mutant run (a write outside its directory, a read of the source)
    # scores nothing: what it did there is not testing behaviour
    for run in matrix.runs:
        for who, seen in run.flags.items():
            for n in (run.cells if who == "*" else [who]):
                matrix.excluded.setdefault(n, f"during scoring: {'; '.join(seen)}"[:400])
    matrix.runs.sort(key=lambda r: (r.candidate, r.mutant))
    matrix.rows.sort(key=lambda r: r.key)
    return matrix
