"""What isolating generated tests costs: wall and CPU seconds per gated test, on the same
machine in one run, before (killbench 0.1's gate: five pytest runs, `unshare --net` or
nothing) and after (this gate: six runs under bubblewrap, or `--isolation none`).

    python bench/isolation.py [--reps 5] [--before COMMIT]

The "before" gate runs from a git worktree of COMMIT (default b8c497f, the last 0.1 commit)
in a cache of its own. Each setting gates the same three candidate files for the fixture
target `basic` (a kill, a test that does not detect its mutant, one that fails on clean
code) `--reps` times, settings interleaved; the figures are medians per candidate file.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = textwrap.dedent("""
    import json, os, resource, sys, time
    sys.path.insert(0, sys.argv[1])
    sys.path.insert(0, sys.argv[2])
    from pathlib import Path
    import fixture_generators as fg
    from killbench.config import resolve
    from killbench.targets import prepare
    from killbench.harness import load_or_run_baseline, mutate_target, workdir_for
    from killbench.sandbox import Sandbox
    from killbench.gate import Gate
    mode, reps = sys.argv[3], int(sys.argv[4])
    spec = resolve(sys.argv[5])
    target = prepare(spec)
    workdir = workdir_for(target)
    run = mutate_target(spec, jobs=1, target=target, show_progress=False)
    base = load_or_run_baseline(target, workdir)
    m = next(r.mutant for r in run.records
             if r.mutant.function == "is_big" and r.mutant.replacement == "n >= THRESHOLD")
    if mode in ("before-unshare", "before-plain"):
        sb = Sandbox(target, workdir / "sandboxes" / "bench")
        gate = Gate([sb], base, timeout=60, isolate_network=(mode == "before-unshare"))
        check = lambda src: gate.check(src, m)
    else:
        sb = Sandbox(target, workdir / "sandboxes" / "bench", trusted=False, isolation=mode)
        gate = Gate([sb], base, timeout=60)
        check = lambda src: gate.check(src, m, target="basic")
    # after: the executor's account (under bwrap the sandbox's init reaps the test, so
    # RUSAGE_CHILDREN would not see its CPU time); before: this process's children
    if mode.startswith("before"):
        executor = None
    else:
        from killbench import executor
        counter_of = executor.CpuCounter
    out = []
    for _ in range(reps):
        for name in ("KILLS_BOUNDARY", "DOES_NOT_DETECT", "FAILS_ON_CLEAN"):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.monotonic()
            if executor is not None:
                counter = counter_of()
                with executor.accounting(counter):
                    res = check(getattr(fg, name))
                cpu = counter.cpu_s
            else:
                res = check(getattr(fg, name))
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            wall = time.monotonic() - t0
            out.append({"case": name, "wall": wall, "cpu": cpu,
                        "verdict": "kept" if res.kept else res.reason})
    print(json.dumps(out))
""")


def measure(code_root: Path, cache: Path, mode: str, reps: int, project: Path) -> list[dict]:
    env = {**os.environ, "KILLBENCH_CACHE": str(cache), "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(code_root), str(ROOT / "tests"), mode,
                           str(reps), str(project)], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{mode}: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--before", default="b8c497f")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kb-isolation-") as tmp:
        tmp = Path(tmp)
        before = tmp / "before"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(before),
                        args.before], check=True)
        try:
            project = tmp / "basic"
            shutil.copytree(ROOT / "tests" / "fixtures" / "basic", project)
            settings = [("before-plain", before, tmp / "cache-before"),
                        ("before-unshare", before, tmp / "cache-before"),
                        ("none", ROOT, tmp / "cache-after"), ("bwrap", ROOT, tmp / "cache-after")]
            for name, root, cache in settings:  # warm each cache (envs, baselines) first
                measure(root, cache, name, 1, project)
            results: dict[str, list[dict]] = {name: [] for name, _, _ in settings}
            for _ in range(args.reps):  # interleaved, one repetition of each at a time
                for name, root, cache in settings:
                    results[name] += measure(root, cache, name, 1, project)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before)])
    cases = ("KILLS_BOUNDARY", "DOES_NOT_DETECT", "FAILS_ON_CLEAN")
    print(f"per gated candidate file (fixture `basic`), median of {args.reps} repetitions; "
          "wall s / CPU s of the gate's runs:")
    print(f"{'setting':16} " + " ".join(f"{c:>22}" for c in cases))
    med = {}
    for name, rows in results.items():
        cells = []
        for case in cases:
            mine = [r for r in rows if r["case"] == case]
            w = statistics.median(r["wall"] for r in mine)
            c = statistics.median(r["cpu"] for r in mine)
            med[(name, case)] = (w, c)
            cells.append(f"{w:.3f} / {c:.3f} {mine[0]['verdict'][:6]:>6}")
        print(f"{name:16} " + " ".join(f"{x:>22}" for x in cells))
    for a, b, label in (("before-plain", "before-unshare", "before (0.1: unshare --net, 5 runs)"),
                        ("none", "bwrap", "after (bubblewrap, 6 runs)")):
        for case in cases:
            dw = med[(b, case)][0] - med[(a, case)][0]
            dc = med[(b, case)][1] - med[(a, case)][1]
            print(f"isolation overhead {label}, {case}: {dw:+.3f} s wall "
                  f"({100 * dw / med[(a, case)][0]:+.1f}%), {dc:+.3f} s CPU")


if __name__ == "__main__":
    main()
