"""Bundles made by hand for tests of what reads them (leaderboard, compare): real records of a
pinned target's population, a kept test per killed task, a consistent score; nothing runs."""

from __future__ import annotations

import json
from pathlib import Path

from killbench.bundle import bundle
from killbench.evidence import (Budgets, GateEntry, GenerationSummary, GeneratorInfo, KillMatrix,
                                KillRow, KillRun, RunConfig, Submission, TargetConfig, TestVerdict,
                                write)
from killbench.gate import candidate_id
from killbench.manifests import current_benchmark, current_digest, load_manifests, target_digest
from killbench.population import from_manifest
from killbench.score import RunRecords, compute


def make_run(run_dir: Path, generator: str, killed: dict[str, list[str]], *, version: str = "7",
             model: str | None = None, source: str | None = None, outside_rules=()) -> Path:
    """A scored run directory on pinned targets: `killed` maps a target to the task ids its
    kept tests kill (one test each)."""
    run_dir.mkdir(parents=True)
    for sub in ("candidates", "population", "evidence/kills", "tasks"):
        (run_dir / sub).mkdir(parents=True, exist_ok=True)
    from killbench.rules import load_rules

    manifests = load_manifests()
    rules = load_rules()
    targets, subs, entries, journal = {}, [], [], []
    for name, ids in killed.items():
        # a target outside the benchmark borrows cachetools' records under its own name
        m = manifests.get(name, manifests["cachetools"])
        src = source or (f"manifest {target_digest(m)}" if name in manifests else "mutate abc")
        pop = from_manifest(m, src, {}).model_copy(update={"target": name})
        write(run_dir / "population" / f"{name}.json", pop)
        budgets = rules.budgets(len(pop.task_set), bool(model))
        targets[name] = TargetConfig(ref=name, version=m["target"]["version"], fingerprint="f" * 64,
                                     population=pop.source, tasks=len(pop.task_set), budgets=budgets)
        rows, runs = [], []
        for i, task in enumerate(ids):
            src = f"def test_kills_{i}():\n    assert {task!r} == {task!r}\n"
            cid = candidate_id(src)
            (run_dir / "candidates" / f"{cid}.py").write_text(src)
            nodeid = f"tests/test_killbench_{cid}.py::test_kills_{i}"
            subs.append(Submission(target=name, candidate=cid, task=task))
            entries.append(GateEntry(target=name, candidate=cid, task=task, tests=[
                TestVerdict(nodeid=nodeid, kept=True, stage="mutant-disguised")]))
            rows.append(KillRow(key=nodeid, candidate=cid, nodeid=nodeid, task=task, clean="passed",
                                reached=[task]))
            runs.append(KillRun(mutant=task, candidate=cid, cells={nodeid: "failed"}))
        write(run_dir / "evidence" / "kills" / f"{name}.json",
              KillMatrix(target=name, isolation="bwrap", rows=rows, runs=runs))
        summary = GenerationSummary(target=name, tasks=len(pop.task_set), files=len(ids),
                                    tests=len(ids), kept_tests=len(ids), kept_files=len(ids),
                                    gate_calls=len(ids), budgets=budgets,
                                    tokens_in=100 * len(ids) if model else 0)
        journal.append({"kind": "target-end", "target": name, "summary": summary.dump()})
    config = RunConfig(killbench="0.2.0", manifest_digest=current_digest(), benchmark=current_benchmark(),
                       generator=GeneratorInfo(ref=generator, name=generator,
                                                                    version=version,
                                                                    needs_model=bool(model)),
                       model=model, isolation="bwrap", gate_timeout_s=rules.gate_timeout_s,
                       rules=rules.to_dict(),
                       target_refs=list(killed), targets=targets, started_at="2026-12-01T00:00:00",
                       outside_rules=list(outside_rules))
    write(run_dir / "config.json", config)
    for name in ("candidates.jsonl", "evidence/gate.jsonl", "journal.jsonl"):
        (run_dir / name).write_text("")
    with open(run_dir / "candidates.jsonl", "w") as fh:
        fh.writelines(json.dumps(s.dump()) + "\n" for s in subs)
    with open(run_dir / "evidence" / "gate.jsonl", "w") as fh:
        fh.writelines(json.dumps(e.dump()) + "\n" for e in entries)
    with open(run_dir / "journal.jsonl", "w") as fh:
        fh.writelines(json.dumps(j) + "\n" for j in journal)
    records = RunRecords(run_dir)
    matrices = {n: KillMatrix.model_validate_json(
        (run_dir / "evidence" / "kills" / f"{n}.json").read_text()) for n in killed}
    score = compute(records, matrices, 2000, 0)
    (run_dir / "score.json").write_text(json.dumps(score.dump(), indent=1, sort_keys=True))
    return run_dir


def make_bundle(folder: Path, name: str, killed: dict[str, list[str]], **kw) -> Path:
    run = make_run(folder / f"run-{name}", name, killed, **kw)
    return bundle(run, folder / f"{name}.tar.gz")
