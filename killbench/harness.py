"""The mutation harness: prepare a target, run its clean baseline, enumerate its
mutants, and run each one through a pool of worker sandboxes into the journal.

Stages: prepare -> baseline -> enumerate -> reach -> run -> records. Each result is
journaled as it arrives; running the same command again resumes from the journal.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import queue
import sys
import threading
import time
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from . import __version__
from .baseline import Baseline, run_baseline
from .config import TargetSpec
from .errors import HarnessError, InvariantError
from .journal import Journal, set_aside
from .locations import cache_subdir
from .mutate import Candidate, default_operators, enumerate_file
from .reach import StatementIndex, reach_of
from .records import VERDICTS, Mutant, MutantRecord, Outcome, Reach
from .runner import CleanSelections, RunSettings, run_mutant, selection_for
from .sandbox import Sandbox
from .targets import PreparedTarget, prepare
from . import behaviour
from .warm import ForkRunner, WarmRunner, check_sample

log = logging.getLogger("killbench")


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def workdir_for(target: PreparedTarget) -> Path:
    return cache_subdir("work") / f"{target.name}-{target.fingerprint[:12]}"


def _write_json(path: Path, data) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, path)


def load_or_run_baseline(target: PreparedTarget, workdir: Path, fresh: bool = False) -> Baseline:
    path = workdir / "baseline.json"
    if path.exists() and not fresh:
        base = Baseline.from_dict(json.loads(path.read_text()))
        if base.fingerprint == target.fingerprint:
            return base
    sandbox = Sandbox(target, workdir / "sandboxes" / "baseline")
    base = run_baseline(sandbox, target.fingerprint)
    _write_json(path, base.to_dict())
    return base


def enumerate_target(target: PreparedTarget, operators=None,
                     non_behavioural: frozenset = behaviour.ALL) -> list[Candidate]:
    """Every candidate mutant of every source file, in a stable order."""
    out: list[Candidate] = []
    for sf in target.sources:
        text = (target.tree / sf.path).read_bytes().decode("utf-8")
        out.extend(enumerate_file(sf.path, text, operators, non_behavioural))
    out.sort(key=lambda c: (c.mutant.path, c.mutant.start, c.mutant.end, c.mutant.operator,
                            c.mutant.replacement))
    return out


def reach_all(target: PreparedTarget, baseline: Baseline, candidates: list[Candidate]) -> dict[str, Reach]:
    indexes: dict[str, StatementIndex] = {}
    excluded = set(baseline.excluded)
    out = {}
    for c in candidates:
        m = c.mutant
        if m.path not in indexes:
            indexes[m.path] = StatementIndex((target.tree / m.path).read_bytes().decode("utf-8"))
        executed = baseline.coverage.get(m.path, {}).get("executed", {})
        out[m.id] = reach_of(m, executed, indexes[m.path], excluded)
    return out


def decided_without_run(c: Candidate, reach: Reach, baseline: Baseline | None = None) -> Outcome | None:
    """Outcomes that follow without running: invalid, identical bytecode, unreached; and a
    harness error where coverage could not say what reaches the file (never "unreached")."""
    if not c.compiles:
        return Outcome("invalid", ran=False, selection="none", detail=c.error)
    error = (baseline.coverage.get(c.mutant.path, {}).get("error") if baseline is not None else None)
    if error:
        return Outcome("harness-error", ran=False, selection="none",
                       detail=f"the coverage of {c.mutant.path} could not be measured: {error}")
    if c.mutant.unkillable == "identical bytecode":
        return Outcome("survived", ran=False, selection="none",
                       detail="not run: compiles to the same bytecode as the original")
    if not reach.reachable:
        return Outcome("survived", ran=False, selection="none",
                       detail="not run: no test executes this line")
    return None


@dataclass(frozen=True)
class TargetIdentity:
    """What a mutate report names of its target; the client of a chunked run has this
    without preparing the target itself (its workers did)."""

    name: str
    fingerprint: str
    spec: TargetSpec


@dataclass
class MutationRun:
    """The result of `killbench mutate` on one target."""

    target: PreparedTarget | TargetIdentity
    baseline: Baseline
    records: list[MutantRecord]
    wall_s: float
    workdir: Path
    operators: tuple[str, ...]
    resumed: int = 0  # results taken from the journal of an earlier, interrupted run
    extra: dict = field(default_factory=dict)
    sample: dict | None = None  # {"size", "seed", "of"} when only a seeded sample was run

    def counts(self) -> dict:
        return summarize(self.records)


def summarize(records: list[MutantRecord]) -> dict:
    """Counts by verdict and the survivor split, with the invariants checked (raised as
    InvariantError, so that they hold under `python -O` too)."""
    from .population import is_task

    verdicts = Counter(r.outcome.verdict for r in records)
    unknown = sorted(set(verdicts) - set(VERDICTS))
    if unknown:
        raise InvariantError(f"verdicts outside the known buckets: {unknown}")
    kinds = Counter(r.outcome.killed_by.kind for r in records
                    if r.outcome.verdict == "killed" and r.outcome.killed_by)
    survived = [r for r in records if r.outcome.verdict == "survived"]
    unkillable = [r for r in records if r.mutant.unkillable]
    surv_unkillable = [r for r in survived if r.mutant.unkillable]
    surv_reach = [r for r in survived if not r.mutant.unkillable and r.reach.reachable]
    surv_unreached = [r for r in survived if not r.mutant.unkillable and not r.reach.reachable]
    task_set = sorted(r.mutant.id for r in records
                      if is_task(r.outcome.verdict, r.reach.reachable, r.mutant.unkillable))
    total = len(records)
    distinct = len({r.mutant.id for r in records})
    checks = [
        (distinct == total, f"{total} verdicts for {distinct} mutants: a mutant is counted "
                            "more than once"),
        (len(surv_reach) + len(surv_unreached) + len(surv_unkillable) == len(survived),
         "survivors split into reachable, unreached and unkillable do not add up"),
        (task_set == sorted(r.mutant.id for r in surv_reach),
         "the task set is not the reachable, killable survivors"),
        (sum(kinds.values()) == verdicts.get("killed", 0),
         f"kill kinds sum to {sum(kinds.values())}, not to the {verdicts.get('killed', 0)} kills"),
    ]
    for ok, message in checks:
        if not ok:
            raise InvariantError(message)
    killable_ran = [r for r in records if not r.mutant.unkillable
                    and r.outcome.verdict in ("killed", "survived", "timeout")]
    return {
        "mutants": total,
        "verdicts": {v: verdicts.get(v, 0) for v in VERDICTS},
        "killed_by": dict(sorted(kinds.items())),
        "unkillable": len(unkillable),
        "unkillable_reasons": dict(sorted(Counter(r.mutant.unkillable for r in unkillable).items())),
        "survived_reachable": len(surv_reach),
        "survived_unreachable": len(surv_unreached),
        "survived_unkillable": len(surv_unkillable),
        "task_set": len(task_set),
        # killed among the killable ones only: a non-behavioural or pragma mutant the suite
        # kills is not a point of the score (it would exceed 100%)
        "score": {"killed": sum(1 for r in killable_ran if r.outcome.verdict == "killed"),
                  "of": len(killable_ran),
                  "what": "killable mutants with a killed/survived/timeout verdict"},
    }


class _Progress:
    """Mutants done / total, verdicts so far and time left, on a terminal only."""

    def __init__(self, total: int, initial: int, label: str):
        self.bar = tqdm(total=total, initial=initial, desc=label, unit="mutant",
                        disable=not sys.stderr.isatty(), dynamic_ncols=True, file=sys.stderr)
        self.counts: Counter = Counter()

    def update(self, verdict: str) -> None:
        self.counts[verdict] += 1
        self.bar.set_postfix({k: v for k, v in self.counts.items()}, refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


def run_mutants(target: PreparedTarget, baseline: Baseline, todo: list[tuple[Mutant, list[str] | None]],
                workdir: Path, jobs: int, on_result, settings: RunSettings = RunSettings(),
                progress: _Progress | None = None, sandbox_prefix: str = "w") -> None:
    """Run (mutant, selection) pairs on `jobs` sandboxes; on_result(mutant, outcome) per result."""
    if not todo:
        return
    jobs = max(1, min(jobs, len(todo)))
    pool: queue.Queue[Sandbox] = queue.Queue()
    sandboxes = [Sandbox(target, workdir / "sandboxes" / f"{sandbox_prefix}{i}") for i in range(jobs)]
    for sb in sandboxes:
        if settings.warm:
            sb.warm = WarmRunner(sb, baseline)
            sb.fork = ForkRunner(sb, baseline)
        pool.put(sb)
    lock = threading.Lock()
    clean = CleanSelections()

    def work(mutant: Mutant, tests):
        sb = pool.get()
        try:
            return mutant, run_mutant(sb, baseline, mutant, tests, settings, clean)
        finally:
            pool.put(sb)

    with ThreadPoolExecutor(max_workers=jobs) as ex:
        pending = set()
        items = iter(todo)
        try:
            for mutant, tests in items:
                pending.add(ex.submit(work, mutant, tests))
                if len(pending) >= jobs * 2:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for fut in done:
                        m, outcome = fut.result()
                        with lock:
                            on_result(m, outcome)
                            if progress:
                                progress.update(outcome.verdict)
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    m, outcome = fut.result()
                    with lock:
                        on_result(m, outcome)
                        if progress:
                            progress.update(outcome.verdict)
        except BaseException:
            for fut in pending:
                fut.cancel()
            for sb in sandboxes:
                sb.kill()
            raise
        finally:
            for sb in sandboxes:
                for runner in (getattr(sb, "warm", None), getattr(sb, "fork", None)):
                    if runner is not None:
                        runner.close()


def run_candidates(target: PreparedTarget, baseline: Baseline, candidates: list[Candidate],
                   reaches: dict[str, Reach], journal: Journal, jobs: int,
                   settings: RunSettings = RunSettings(), show_progress: bool = True,
                   label: str = "", check_warm: bool = True,
                   sandbox_prefix: str = "") -> list[MutantRecord]:
    """Outcomes for these candidates: from the journal, decided without a run, or run. A
    caller that runs many small batches passes check_warm=False and calls
    warm_equals_plain once over all of them. `sandbox_prefix` keeps the sandboxes of runs
    that share a work directory at once (the chunks of one target) apart."""
    todo = []
    for c in candidates:
        if journal.done(c.mutant.id):
            continue
        outcome = decided_without_run(c, reaches[c.mutant.id], baseline)
        if outcome is not None:
            journal.append(c.mutant.id, {"outcome": outcome.to_dict()})
        else:
            todo.append((c.mutant, selection_for(reaches[c.mutant.id], baseline)))
    progress = _Progress(len(candidates), len(candidates) - len(todo), label or target.name) \
        if show_progress else None
    try:
        run_mutants(target, baseline, todo, journal.path.parent, jobs,
                    lambda m, o: journal.append(m.id, {"outcome": o.to_dict()}),
                    settings, progress, sandbox_prefix=sandbox_prefix + "w")
    finally:
        if progress:
            progress.close()
    records = []
    for c in candidates:
        entry = journal.entries.get(c.mutant.id)
        if entry is None:
            raise HarnessError(f"mutant {c.mutant.id} has no result after the run")
        records.append(MutantRecord(c.mutant, reaches[c.mutant.id], Outcome.from_dict(entry["outcome"])))
    if settings.warm and check_warm:
        warm_equals_plain(target, baseline, records, journal.path.parent, jobs, settings,
                          label or target.name, sandbox_prefix=sandbox_prefix + "plain")
    return records


WARM_SAMPLE = 8  # mutants the warm runner judged, run again the plain way
FORK_SAMPLE = 4  # and of those the forked runner judged


def warm_equals_plain(target: PreparedTarget, baseline: Baseline, records: list[MutantRecord],
                      workdir: Path, jobs: int, settings: RunSettings, name: str,
                      sample: int = WARM_SAMPLE, seed: int = 0,
                      sandbox_prefix: str = "plain") -> list[tuple]:
    """A seeded sample of the mutants the warm and the forked runner judged, run again the
    plain way: the verdicts must be the same (a harness error otherwise, never a silent
    fallback)."""
    import dataclasses
    import random

    rng = random.Random(f"{seed}:{name}")
    picked = []
    for kind, size in (("warm", sample), ("fork", FORK_SAMPLE if sample else 0)):
        judged = [r for r in records if r.outcome.runner == kind]
        picked += rng.sample(judged, min(size, len(judged)))
    if not picked:
        return []
    plain: dict[str, Outcome] = {}
    run_mutants(target, baseline, [(r.mutant, selection_for(r.reach, baseline)) for r in picked],
                workdir, jobs, lambda m, o: plain.__setitem__(m.id, o),
                dataclasses.replace(settings, warm=False), sandbox_prefix=sandbox_prefix)
    pairs = [(r.mutant, r.outcome.verdict, plain[r.mutant.id].verdict) for r in picked]
    check_sample(name, pairs)
    return pairs


def mutate_header(target: PreparedTarget, ops, settings: RunSettings) -> dict:
    """What a mutate journal's results depend on."""
    return {"killbench": __version__, "fingerprint": target.fingerprint, "operators": sorted(ops),
            "timeout_factor": settings.timeout_factor, "timeout_floor": settings.timeout_floor,
            "warm": settings.warm, "confirm_survivors": settings.confirm_survivors,
            "cpu_floor": settings.cpu_floor}


def mutate_journal_path(workdir: Path, header: dict) -> Path:
    """One journal per set of settings: runs with other settings never collide."""
    digest = hashlib.sha256(json.dumps(header, sort_keys=True).encode()).hexdigest()[:12]
    return workdir / f"journal-{digest}.jsonl"


def sample_ranks(candidates: list[Candidate], seed: int) -> dict[str, str]:
    """Each mutant's place in a seeded sample, such that an edit elsewhere does not
    reshuffle it. A mutant's id hashes its whole file, so its rank hashes what it is
    instead: the seed, its file, function, operator, original and replacement text, and
    which occurrence of those it is within its function. An edit to one function changes
    only that function's mutants' ranks."""
    seen: Counter = Counter()
    out = {}
    for c in candidates:
        m = c.mutant
        key = (m.path, m.function or "", m.operator, m.original, m.replacement)
        seen[key] += 1
        blob = "\0".join([str(seed), *key, str(seen[key])])
        out[m.id] = hashlib.sha256(blob.encode("utf-8")).hexdigest()
    return out


def sample_candidates(candidates: list[Candidate], size: int, seed: int) -> list[Candidate]:
    """The `size` mutants of lowest rank (``sample_ranks``), in the enumeration order."""
    ranks = sample_ranks(candidates, seed)
    keep = set(sorted(ranks, key=ranks.__getitem__)[:size])
    return [c for c in candidates if c.mutant.id in keep]


def mutate_candidates(target: PreparedTarget, ops, sample: int | None,
                      seed: int) -> tuple[list[Candidate], dict | None]:
    """The mutants a mutate run (or each of its chunks) runs, and its sample's description."""
    candidates = enumerate_target(target, ops)
    if len({c.mutant.id for c in candidates}) != len(candidates):
        raise HarnessError(f"target {target.name}: two mutants share an id")
    if sample is None:
        return candidates, None
    sampled = {"size": min(sample, len(candidates)), "seed": seed, "of": len(candidates)}
    return sample_candidates(candidates, sample, seed), sampled


def mutate_target(spec: TargetSpec, jobs: int | None = None, operators=None, fresh: bool = False,
                  settings: RunSettings = RunSettings(), show_progress: bool = True,
                  target: PreparedTarget | None = None, sample: int | None = None,
                  seed: int = 0) -> MutationRun:
    """`killbench mutate`: every mutant of a target through its own suite (or a seeded
    sample of `sample` of them)."""
    started = time.monotonic()
    target = target or prepare(spec)
    ops = tuple(sorted(operators or default_operators()))
    workdir = workdir_for(target)
    workdir.mkdir(parents=True, exist_ok=True)
    header = mutate_header(target, ops, settings)
    if sample is not None:
        header["sample"] = {"size": sample, "seed": seed}
    journal_path = mutate_journal_path(workdir, header)
    if fresh:
        set_aside(journal_path)
    baseline = load_or_run_baseline(target, workdir, fresh=fresh)
    candidates, sampled = mutate_candidates(target, ops, sample, seed)
    reaches = reach_all(target, baseline, candidates)
    journal = Journal(journal_path, header)
    resumed = len(journal.entries)
    try:
        records = run_candidates(target, baseline, candidates, reaches, journal,
                                 jobs or default_jobs(), settings, show_progress, spec.name)
    finally:
        journal.close()
    return MutationRun(target=target, baseline=baseline, records=records,
                       wall_s=time.monotonic() - started, workdir=workdir, operators=ops,
                       resumed=resumed, sample=sampled)


def _chunk_baseline(target: PreparedTarget, workdir: Path, fresh_token: str | None) -> Baseline:
    """The baseline every chunk on this cache shares. A fresh run is one token for all its
    chunks: the first chunk here to see a new token runs the clean suite again, the others
    read what it wrote (the caller holds the work directory's lock)."""
    mark = workdir / "baseline.fresh"
    if fresh_token is None or (mark.exists() and mark.read_text() == fresh_token):
        return load_or_run_baseline(target, workdir)
    base = load_or_run_baseline(target, workdir, fresh=True)
    mark.write_text(fresh_token)
    return base


def mutate_chunk(spec: TargetSpec, chunk: int, of: int, jobs: int | None = None, operators=None,
                 fresh_token: str | None = None, settings: RunSettings = RunSettings(),
                 sample: int | None = None, seed: int = 0) -> dict:
    """Chunk `chunk` of `of` of a target's mutants (every `of`-th in enumeration order, from
    the `chunk`-th), as a Dask task: the target prepared in this machine's cache, the clean
    baseline shared with the chunks beside it, a journal and sandboxes of its own (so a
    retried chunk resumes and chunks on one machine run side by side). Plain data back;
    ``join_chunks`` on the client makes the one report."""
    from .workspace import exclusive

    if not 0 <= chunk < of:
        raise HarnessError(f"chunk {chunk} of {of}: no such chunk")
    started = time.monotonic()
    target = prepare(spec)
    ops = tuple(sorted(operators or default_operators()))
    workdir = workdir_for(target)
    with exclusive(workdir, spec.name):
        baseline = _chunk_baseline(target, workdir, fresh_token)
    candidates, sampled = mutate_candidates(target, ops, sample, seed)
    mine = candidates[chunk::of]
    header = dict(mutate_header(target, ops, settings), chunk=[chunk, of])
    if sample is not None:
        header["sample"] = {"size": sample, "seed": seed}
    if fresh_token is not None:
        header["fresh"] = fresh_token  # a journal of its own: nothing earlier is resumed
    reaches = reach_all(target, baseline, mine)
    label = f"{spec.name} chunk {chunk + 1} of {of}"
    with exclusive(workdir / "chunks" / f"{chunk}-of-{of}", label):
        journal = Journal(mutate_journal_path(workdir, header), header)
        resumed = len(journal.entries)
        try:
            records = run_candidates(target, baseline, mine, reaches, journal, jobs or default_jobs(),
                                     settings, False, label, sandbox_prefix=f"c{chunk}-")
        finally:
            journal.close()
    return {"chunk": chunk, "of": of, "fingerprint": target.fingerprint, "candidates": len(candidates),
            "baseline": baseline.to_dict(), "operators": list(ops), "sample": sampled,
            "records": [{"mutant": r.mutant.to_dict(), "reach": r.reach.to_dict(),
                         "outcome": r.outcome.to_dict()} for r in records],
            "resumed": resumed, "wall_s": time.monotonic() - started, "workdir": str(workdir)}


# what a verdict depends on in a baseline: chunks whose baselines differ here were judged
# against different suites (durations and wall times differ between machines and may)
_SHARED_BASELINE = ("fingerprint", "tests", "flaky", "deselected", "skipped", "modules", "coverage",
                    "lines_hit", "lines_total")


def join_chunks(spec: TargetSpec, parts: list[dict], wall_s: float) -> MutationRun:
    """The one report of a chunked run, from every chunk's plain data; a harness error when
    the chunks do not fit together (missing or repeated chunks, other targets, other
    baselines, other enumerations), never a report of part of the target."""
    if not parts:
        raise HarnessError(f"target {spec.name}: no chunks came back")
    of = parts[0]["of"]
    by_chunk = {p["chunk"]: p for p in parts}
    if len(by_chunk) != len(parts) or set(by_chunk) != set(range(of)) or \
            any(p["of"] != of for p in parts):
        raise HarnessError(f"target {spec.name}: chunks {sorted(p['chunk'] for p in parts)} came "
                           f"back, of {of}")
    first = by_chunk[0]
    for p in parts:
        for key in ("fingerprint", "candidates", "operators", "sample"):
            if p[key] != first[key]:
                raise HarnessError(f"target {spec.name}: chunk {p['chunk'] + 1} ran with {key} "
                                   f"{p[key]!r}, chunk 1 with {first[key]!r} (another killbench "
                                   "or another copy of the target on that worker)")
        differs = [k for k in _SHARED_BASELINE if p["baseline"][k] != first["baseline"][k]]
        if differs:
            raise HarnessError(f"target {spec.name}: the clean suite of chunk {p['chunk'] + 1} "
                               f"differs from chunk 1's in {', '.join(differs)} (a test that "
                               "passes on one worker and not another?); the chunks' verdicts are "
                               "not comparable, so nothing is reported")
    n = first["candidates"]
    slots: list[MutantRecord | None] = [None] * n
    for p in parts:
        want = len(range(p["chunk"], n, of))
        if len(p["records"]) != want:
            raise HarnessError(f"target {spec.name}: chunk {p['chunk'] + 1} has "
                               f"{len(p['records'])} records, its share is {want}")
        for j, r in enumerate(p["records"]):
            reach = r["reach"]
            slots[p["chunk"] + j * of] = MutantRecord(
                Mutant.from_dict(r["mutant"]),
                Reach(reach["reachable"], tuple(reach["covered_by"]), reach["import_time"]),
                Outcome.from_dict(r["outcome"]))
    records = [r for r in slots if r is not None]
    if len({r.mutant.id for r in records}) != n:
        raise HarnessError(f"target {spec.name}: the chunks' mutants repeat or miss some")
    return MutationRun(target=TargetIdentity(spec.name, first["fingerprint"], spec),
                       baseline=Baseline.from_dict(first["baseline"]), records=records,
                       wall_s=wall_s, workdir=Path(first["workdir"]),
                       operators=tuple(first["operators"]),
                       resumed=sum(p["resumed"] for p in parts), sample=first["sample"],
                       extra={"chunks": of})
