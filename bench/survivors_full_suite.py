"""Every survivor of the committed manifests that was judged on its covering tests, run
against the target's whole suite: the ones it kills are no survivors (docs/errata-1.0.md).

Writes one JSON line per mutant to OUT/PIN.jsonl (the outcome as the harness records it),
then prints, per pin, the tasks, lite tasks and held-out survivors the whole suite kills, and
for each bundle in submissions/ how many of its task kills are of such tasks.

usage: python bench/survivors_full_suite.py [--out DIR] [--no-warm] [--report-only] [PIN ...]
"""

from __future__ import annotations

import argparse
import json
import tarfile
from collections import Counter
from pathlib import Path

from tabulate import tabulate

from killbench.config import resolve
from killbench.harness import load_or_run_baseline, run_mutants, workdir_for
from killbench.manifests import BuildSettings, load_manifests
from killbench.records import Mutant
from killbench.targets import prepare

ROOT = Path(__file__).resolve().parent.parent


def judged_on_covering_tests(manifest: dict) -> list[dict]:
    return [r for r in manifest["mutants"] if r["verdict"] == "survived" and r["reachable"]
            and not r["unkillable"] and r["selection"] == "covering"]


def run_pin(name: str, manifest: dict, out: Path, warm: bool) -> None:
    import dataclasses

    tasks = set(manifest["task_set"])
    records = judged_on_covering_tests(manifest)
    target = prepare(resolve(name))
    workdir = workdir_for(target)
    workdir.mkdir(parents=True, exist_ok=True)
    baseline = load_or_run_baseline(target, workdir)
    settings = dataclasses.replace(BuildSettings.from_dict(manifest["build"]).run_settings(), warm=warm)
    todo = [(Mutant(**{k: r[k] for k in Mutant.__dataclass_fields__}), None) for r in records]
    role = {r["id"]: "task" if r["id"] in tasks else r["role"] for r in records}
    with open(out / f"{name}.jsonl", "w") as f:
        def done(m, o):
            f.write(json.dumps({"id": m.id, "role": role[m.id], "path": m.path, "line": m.line,
                                "function": m.function, "operator": m.operator,
                                "outcome": o.to_dict()}) + "\n")
            f.flush()
        run_mutants(target, baseline, todo, workdir, 2, done, settings, sandbox_prefix="fullsuite")


def report(manifests: dict[str, dict], out: Path) -> None:
    rows, killed_ids, total = [], set(), Counter()
    for name, m in sorted(manifests.items()):
        path = out / f"{name}.jsonl"
        if not path.exists():
            rows.append([name, "not run", "", "", ""])
            continue
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        killed = {r["id"]: r for r in lines if r["outcome"]["verdict"] == "killed"}
        other = Counter(r["outcome"]["verdict"] for r in lines
                        if r["outcome"]["verdict"] not in ("killed", "survived"))
        if other:
            print(f"{name}: neither killed nor survived on the whole suite: {dict(other)}")
        killed_ids |= set(killed)
        tasks, lite = set(m["task_set"]), set(m["splits"]["lite"])
        checked = Counter(r["role"] for r in lines)
        c = Counter(tasks=len(tasks & set(killed)), lite=len(lite & set(killed)),
                    held=sum(1 for r in killed.values() if r["role"] == "held-out"))
        total.update(c)
        total.update(n_tasks=len(tasks), n_lite=len(lite), checked=len(lines))
        funcs = sorted({f"{r['path']}:{r['function']}" for r in killed.values()})
        rows.append([name, len(lines), f"{c['tasks']} / {len(tasks)} ({checked['task']} judged on covering tests)",
                     f"{c['lite']} / {len(lite)}", f"{c['held']} / {checked['held-out']}",
                     ", ".join(funcs) or "-"])
    rows.append(["all", total["checked"], f"{total['tasks']} / {total['n_tasks']}",
                 f"{total['lite']} / {total['n_lite']}", total["held"], ""])
    print(tabulate(rows, headers=["pin", "run on the whole suite", "tasks it kills",
                                  "lite tasks it kills", "held-out survivors it kills", "where"],
                   tablefmt="github"))
    print()
    benchmark = next(iter(manifests.values()))["benchmark"]
    for bundle in sorted((ROOT / "submissions").glob("*.killbench.tar.gz")):
        with tarfile.open(bundle) as t:
            member = next(x for x in t.getmembers() if x.name.endswith("score.json"))
            score = json.load(t.extractfile(member))
        if str(score.get("benchmark")) != str(benchmark):
            continue  # scored against another benchmark's manifests
        kills = {i for tg in score["targets"].values() for i in tg.get("killed_task_ids", [])}
        print(f"{bundle.name}: {len(kills)} task kills, {len(kills & killed_ids)} of them of tasks "
              "the whole suite kills")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pins", nargs="*")
    ap.add_argument("--out", type=Path, default=Path("survivors-full-suite"))
    ap.add_argument("--no-warm", action="store_true", help="every run in a fresh pytest process")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args()
    manifests = {n: m for n, m in load_manifests().items()}
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        for name in args.pins or sorted(manifests):
            run_pin(name, manifests[name], args.out, warm=not args.no_warm)
    report(manifests, args.out)


if __name__ == "__main__":
    main()
