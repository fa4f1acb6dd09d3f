"""Score a run directory: build its kill matrices (the one step that runs tests), then
compute every number from the evidence with ``metrics`` and write ``score.json``.

With no model call, ever. The kill matrix of a target is reused when the run directory
already holds one for the same kept tests (``fresh=True`` runs it again); everything
else is recomputed from the records every time.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from . import __version__
from .config import resolve
from .errors import UserError
from .evidence import (GateEntry, GenerationSummary, KillMatrix, Population, RunConfig,
                       Submission, load, read_jsonl, write)
from .harness import default_jobs, workdir_for
from .manifests import current_benchmark, current_digest
from .metrics import Score, run_score, target_score
from .run import run_state
from .scoring import KeptFile, kill_matrix
from .targets import prepare
from .workspace import exclusive

log = logging.getLogger("killbench")


class RunRecords:
    """What a run directory recorded, loaded and validated once."""

    def __init__(self, run_dir: Path):
        if not (run_dir / "config.json").exists():
            raise UserError(f"{run_dir} is not a run directory (no config.json)")
        self.dir = run_dir
        self.config = load(run_dir / "config.json", RunConfig)
        self.submissions = read_jsonl(run_dir / "candidates.jsonl", Submission)
        self.entries = read_jsonl(run_dir / "evidence" / "gate.jsonl", GateEntry)
        controls = run_dir / "evidence" / "controls.jsonl"
        self.control_entries = read_jsonl(controls, GateEntry) if controls.exists() else []
        self.state = run_state(run_dir)
        self.summaries = {t: GenerationSummary.model_validate(s) for t, s in self.state["ended"].items()}

    def population(self, name: str) -> Population:
        return load(self.dir / "population" / f"{name}.json", Population)

    def candidate(self, cid: str) -> str:
        return (self.dir / "candidates" / f"{cid}.py").read_bytes().decode("utf-8", "surrogatepass")

    def kept_files(self, name: str) -> list[KeptFile]:
        """Each submitted file with the tests the gate kept, once per file (the first task it
        was kept for names what it was written for)."""
        by_key = {(e.candidate, e.task): e for e in self.entries if e.target == name}
        out: dict[str, KeptFile] = {}
        for s in self.submissions:
            if s.target != name or s.candidate in out:
                continue
            e = by_key.get((s.candidate, s.task))
            if e is not None and e.kept:
                out[s.candidate] = KeptFile(s.candidate, self.candidate(s.candidate), e.kept_tests,
                                            s.task)
        return list(out.values())

    def matrix_path(self, name: str) -> Path:
        return self.dir / "evidence" / "kills" / f"{name}.json"

    def incomplete(self) -> list[str]:
        out = [f"{t}: {e}" for t, e in sorted(self.state["errors"].items())]
        out += [f"{t}: generation did not end (interrupted)" for t in self.state["missing"]]
        return out


def _matrix(records: RunRecords, name: str, files: list[KeptFile], jobs: int, fresh: bool,
            progress) -> KillMatrix:
    path = records.matrix_path(name)
    want = sorted(n for kf in files for n in kf.nodeids)
    if path.exists() and not fresh:
        old = load(path, KillMatrix)
        if sorted(r.key for r in old.rows) == want and old.isolation == records.config.isolation:
            return old
    tconf = records.config.targets[name]
    spec = resolve(tconf.ref)
    target = prepare(spec)
    if target.fingerprint != tconf.fingerprint:
        log.warning("%s: prepared now with fingerprint %s, the run used %s", name,
                    target.fingerprint[:12], tconf.fingerprint[:12])
    pop = records.population(name)
    with exclusive(workdir_for(target), spec.name):
        matrix = kill_matrix(target, pop, files, jobs=jobs, workdir=workdir_for(target),
                             isolation=records.config.isolation, progress=progress)
    write(path, matrix)
    return matrix


def compute(records: RunRecords, matrices: dict[str, KillMatrix], resamples: int = 10_000,
            seed: int = 0) -> Score:
    """Every number of the run from its records and kill matrices (runs nothing)."""
    targets = {}
    for name in records.config.targets:
        pop = records.population(name)
        files = records.kept_files(name)
        sources = {}
        for row in matrices[name].rows:
            sources[row.nodeid.split("::", 1)[0]] = records.candidate(row.candidate)
        subs = [s for s in records.submissions if s.target == name]
        entries = [e for e in records.entries if e.target == name]
        targets[name] = target_score(pop, subs, entries, matrices[name],
                                     records.summaries.get(name), sources,
                                     complete=name in records.summaries
                                     and not records.summaries[name].error,
                                     control_entries=[e for e in records.control_entries
                                                      if e.target == name])
        del files
    score = run_score(records.config, targets, killbench=__version__,
                      manifest_digest=current_digest(), incomplete=records.incomplete(),
                      resamples=resamples, seed=seed, benchmark=current_benchmark())
    from .preregister import judge, predictions

    dumped = score.dump()
    for pr in predictions(records.dir):
        pr["outcome"] = judge(pr["check"], dumped) if pr.get("check") else "judge by hand"
        score.predictions.append(pr)
    return score


def score_run(run_dir: Path, jobs: int | None = None, resamples: int = 10_000, seed: int = 0,
              fresh: bool = False, progress=None) -> Score:
    """`killbench score`: kill matrices (run when missing), numbers, score.json written."""
    records = RunRecords(run_dir)
    jobs = jobs or default_jobs()
    matrices = {}
    for name in records.config.targets:
        files = records.kept_files(name)
        matrices[name] = _matrix(records, name, files, jobs, fresh,
                                 (lambda done, total, n=name: progress(n, done, total))
                                 if progress else None)
    score = compute(records, matrices, resamples, seed)
    (run_dir / "score.json").write_text(json.dumps(score.dump(), indent=1, sort_keys=True))
    return score


def load_score(path: Path) -> Score:
    return load(path, Score)
