"""How many candidate tests the gate judges per CPU-second on one warm worker.

    python bench/gate_throughput.py [cachetools] [--reps 3] [--isolation bwrap]

"Warm worker": the target prepared, its baseline taken and one sandbox made and used once
before anything is timed, so that what is measured is the gate's own work per candidate
(all six phases of a candidate with a task: clean, random hash seed, reversed order,
neutral, mutant, disguised mutant). Two kinds of candidate, each gated against a task of
the pin's frozen manifest:

- generated: every file a generator wrote for this target in the committed submissions
  (submissions/*.killbench.tar.gz: model-written and amplify's, kept or not), gated
  against the task it was written for;
- file: each of the target's own test modules as one candidate file (many tests).

Printed per kind: files, tests judged, CPU-s per file of the gate's processes (the
executor's account of every process the gate ran: under bubblewrap the sandbox's init reaps
the test, so RUSAGE_CHILDREN would miss it) and of this process (the gate's own work between
runs), wall-s per file, and tests per CPU-second of both (per core: one worker, one process
at a time).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def own_test_modules(target) -> list[Path]:
    files = []
    for t in target.spec.tests:
        p = target.tree / t
        files += sorted(p.rglob("test_*.py")) if p.is_dir() else [p]
    return files


def generated_candidates(name: str, rows: dict) -> list[tuple[str, str, str]]:
    """(candidate id, source, task id) of every file a generator wrote for `name` in the
    committed submissions whose task is in today's manifest, each pair once."""
    out, seen = [], set()
    for bundle in sorted((ROOT / "submissions").glob("*.killbench.tar.gz")):
        with tarfile.open(bundle) as tar:
            members = {m.name: m for m in tar.getmembers()}
            gate = members.get("bundle/evidence/gate.jsonl")
            if gate is None:
                continue
            for line in tar.extractfile(gate).read().decode().splitlines():
                e = json.loads(line)
                key = (e["candidate"], e.get("task"))
                src = members.get(f"bundle/candidates/{e['candidate']}.py")
                if e["target"] != name or e.get("task") not in rows or key in seen or src is None:
                    continue
                seen.add(key)
                out.append((e["candidate"], tar.extractfile(src).read().decode("utf-8"), e["task"]))
    return out


def _own_cpu() -> float:
    """CPU of this process: the gate's own work between runs (tamper checks, disguises)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("target", nargs="?", default="cachetools")
    ap.add_argument("--reps", type=int, default=3, help="gate each candidate this many times")
    ap.add_argument("--isolation", default="bwrap", choices=["bwrap", "none"])
    args = ap.parse_args()

    from killbench import executor
    from killbench.config import resolve
    from killbench.gate import Gate
    from killbench.harness import load_or_run_baseline, workdir_for
    from killbench.population import freeze, mutant
    from killbench.sandbox import Sandbox
    from killbench.targets import prepare

    target = prepare(resolve(args.target))
    workdir = workdir_for(target)
    baseline = load_or_run_baseline(target, workdir)
    pop = freeze(target, jobs=1)
    rows = pop.by_id()
    tasks = [rows[i] for i in pop.task_set]
    rng = random.Random(0)

    singles = [(cid, text, mutant(rows[task])) for cid, text, task in
               generated_candidates(target.name, rows)]
    files = []
    for path in own_test_modules(target):
        rel = path.relative_to(target.tree).as_posix()
        covering = [m for m in tasks if any(n.split("::", 1)[0] == rel for n in (m.covered_by or []))]
        if covering:
            files.append((rel, path.read_text(encoding="utf-8"), mutant(rng.choice(covering))))

    sb = Sandbox(target, workdir / "sandboxes" / "bench-gate", trusted=False, isolation=args.isolation)
    gate = Gate([sb], baseline, timeout=60)
    warm_up = (singles or files)[0]
    gate.check(warm_up[1], warm_up[2], target=target.name)

    print(f"gate throughput on {target.name}, one worker, isolation {args.isolation}, "
          f"{args.reps} repetitions of each candidate")
    print(f"{'kind':9} {'files':>5} {'tests':>6} {'CPU s/file':>11} {'host s/file':>12} "
          f"{'wall s/file':>12} {'tests/CPU-s':>12} {'kept':>5}")
    for kind, cands in (("generated", singles), ("file", files)):
        cpu, host, wall, tests, kept, per_file = 0.0, 0.0, 0.0, 0, 0, []
        for _ in range(args.reps):
            for _name, text, m in cands:
                counter = executor.CpuCounter()
                t0, own0 = time.monotonic(), _own_cpu()
                with executor.accounting(counter):
                    entry = gate.check(text, m, target=target.name)
                wall += time.monotonic() - t0
                host += _own_cpu() - own0
                cpu += counter.cpu_s
                per_file.append(counter.cpu_s)
                tests += len(entry.tests)
                kept += sum(t.kept for t in entry.tests)
        n = len(cands) * args.reps
        if not n:
            continue
        print(f"{kind:9} {len(cands):>5} {tests // args.reps:>6} {cpu / n:>11.3f} {host / n:>12.3f} "
              f"{wall / n:>12.3f} {tests / (cpu + host) if cpu else 0:>12.2f} {kept // args.reps:>5}   "
              f"(median gate-process CPU s/file {statistics.median(per_file):.3f})")


if __name__ == "__main__":
    main()
