"""Submissions: pack a run into one archive, and verify one from scratch.

A bundle holds what is needed to re-score a run without calling a model: the
config, every candidate test (kept and rejected), the gate log, the transcripts,
the task sets, the environment and the score as submitted, plus a list of sha256
sums. `verify` unpacks it into a fresh directory, checks every candidate file
against its content-hash name, re-gates every candidate in fresh sandboxes, re-scores
the kept tests and compares each number with the submitted ones: it prints
"reproduced" or each difference. Edited numbers or edited tests do not survive it.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import platform
import sys
import tarfile
import tempfile
from contextlib import ExitStack
from pathlib import Path

from . import __version__
from .config import resolve
from .errors import UserError
from .gate import Gate, candidate_id
from .workspace import exclusive
from .harness import default_jobs, load_or_run_baseline, workdir_for
from .manifests import current_digest
from .records import Mutant
from .sandbox import Sandbox
from .score import score_run
from .targets import prepare

MEMBERS = ("config.json", "summary.json", "gate.jsonl", "transcript.jsonl", "predictions.jsonl",
           "generator.log", "score.json")
DIRS = ("candidates", "tasks")

log = logging.getLogger("killbench")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def bundle(run_dir: Path, out: Path | None = None) -> Path:
    if not (run_dir / "config.json").exists():
        raise UserError(f"{run_dir} is not a run directory (no config.json)")
    if not (run_dir / "score.json").exists():
        raise UserError(f"{run_dir} has no score.json: run `killbench score {run_dir}` before bundling")
    files: dict[str, bytes] = {}
    for name in MEMBERS:
        if (run_dir / name).exists():
            files[name] = (run_dir / name).read_bytes()
    for d in DIRS:
        for p in sorted((run_dir / d).glob("*")):
            files[f"{d}/{p.name}"] = p.read_bytes()
    files["environment.json"] = json.dumps({
        "killbench": __version__, "python": sys.version, "platform": platform.platform(),
        "manifest_digest": current_digest()}, indent=1, sort_keys=True).encode()
    files["SHA256SUMS"] = "".join(f"{_sha(v)}  {k}\n" for k, v in sorted(files.items())).encode()
    out = out or run_dir.with_suffix(".killbench.tar.gz")
    with tarfile.open(out, "w:gz") as tf:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(f"bundle/{name}")
            info.size = len(data)
            info.mtime = 0
            tf.addfile(info, io.BytesIO(data))
    return out


def _unpack(archive: Path, dest: Path) -> Path:
    try:
        with tarfile.open(archive) as tf:
            tf.extractall(dest, filter="data")
    except (tarfile.TarError, OSError) as exc:
        raise UserError(f"{archive}: not a readable bundle: {exc}") from None
    root = dest / "bundle"
    if not (root / "config.json").exists():
        raise UserError(f"{archive}: no bundle/config.json inside; not a killbench bundle")
    return root


def _numbers(score: dict) -> dict:
    """The submitted numbers that must reproduce, flattened."""
    out = {}
    for name, t in score.get("targets", {}).items():
        out[f"{name}.kills"] = (t["kills"]["k"], t["kills"]["n"])
        out[f"{name}.killed_task_ids"] = tuple(t["killed_task_ids"])
        out[f"{name}.kept_tests"] = t["kept_tests"]
        out[f"{name}.funnel"] = tuple(sorted(t["funnel"].items()))
        for k in ("within_function_executed", "within_function_all", "cross_function"):
            out[f"{name}.transfer.{k}"] = (t["transfer"][k]["k"], t["transfer"][k]["n"])
        out[f"{name}.assertion_classes"] = tuple(sorted(t["assertion_classes"].items()))
        out[f"{name}.kills_by_test"] = tuple((k, tuple(v)) for k, v in sorted(t["kills_by_test"].items()))
    p = score.get("pooled_kills")
    if p:
        out["pooled"] = (p["k"], p["n"], round(p["low"], 9), round(p["high"], 9))
    return out


def verify(archive: Path, jobs: int | None = None, gate_timeout: float | None = None) -> tuple[list[str], dict]:
    """Differences between the bundle's claims and a from-scratch re-gate and re-score."""
    jobs = jobs or default_jobs()
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="killbench-verify-") as tmp, ExitStack() as held:
        root = _unpack(archive, Path(tmp))
        sums = {}
        for line in (root / "SHA256SUMS").read_text().splitlines():
            digest, _, name = line.partition("  ")
            sums[name] = digest
        for name, digest in sums.items():
            p = root / name
            if not p.exists():
                problems.append(f"{name}: listed in SHA256SUMS but missing")
            elif _sha(p.read_bytes()) != digest:
                problems.append(f"{name}: content does not match SHA256SUMS")
        for p in sorted((root / "candidates").glob("*.py")):
            if candidate_id(p.read_text(encoding="utf-8")) != p.stem:
                problems.append(f"candidates/{p.name}: the test was edited (its hash is "
                                f"{candidate_id(p.read_text(encoding='utf-8'))})")
        config = json.loads((root / "config.json").read_text())
        claimed_gate = [json.loads(x) for x in (root / "gate.jsonl").read_text().splitlines() if x.strip()]
        timeout = gate_timeout or config.get("gate_timeout_s", 60.0)
        # re-gate every candidate in fresh sandboxes
        new_gate = []
        for name, tconf in config["targets"].items():
            spec = resolve(tconf.get("ref", name))
            target = prepare(spec)
            workdir = workdir_for(target)
            held.enter_context(exclusive(workdir, spec.name))  # released when verify ends
            baseline = load_or_run_baseline(target, workdir)
            tasks = {t["id"]: t for t in json.loads((root / "tasks" / f"{name}.json").read_text())}
            mutants = _task_mutants(target, tasks)
            sandboxes = [Sandbox(target, workdir / "sandboxes" / f"verify{i}") for i in range(jobs)]
            gate = Gate(sandboxes, baseline, timeout=timeout)
            for e in claimed_gate:
                if e["target"] != name:
                    continue
                src = (root / "candidates" / f"{e['candidate']}.py").read_text(encoding="utf-8")
                res = gate.check(src, mutants.get(e["task"]) if e["task"] else None)
                if (res.kept, res.reason) != (e["kept"], e["reason"]):
                    problems.append(f"{name} candidate {e['candidate']}: bundle says "
                                    f"{'kept' if e['kept'] else e['reason']}, re-gated "
                                    f"{'kept' if res.kept else res.reason}")
                new_gate.append({**e, **res.to_dict(), "candidate": e["candidate"]})
        # re-score the re-gated run
        (root / "gate.jsonl").write_text("".join(json.dumps(x, sort_keys=True) + "\n" for x in new_gate))
        claimed = json.loads((root / "score.json").read_text())
        fresh = score_run(root, jobs=jobs, resamples=claimed.get("pooled_kills", {}).get("resamples", 10_000)
                          if claimed.get("pooled_kills") else 10_000,
                          seed=(claimed.get("pooled_kills") or {}).get("seed", 0))
        a, b = _numbers(claimed), _numbers(fresh)
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                problems.append(f"{key}: bundle says {a.get(key)}, re-scored {b.get(key)}")
        # what decides a target's numbers is its own manifest; the benchmark's digest also
        # moves when another target is added, which is reported but changes no number here
        for name in sorted(set(claimed.get("targets", {})) | set(fresh.get("targets", {}))):
            a_src = claimed.get("targets", {}).get(name, {}).get("population_source")
            b_src = fresh.get("targets", {}).get(name, {}).get("population_source")
            if a_src != b_src:
                problems.append(f"{name}: scored against {a_src}, here {b_src}")
        if claimed.get("manifest_digest") != fresh.get("manifest_digest"):
            log.warning("the bundle was scored with benchmark digest %s, this checkout has %s; "
                        "every target's own manifest is compared above",
                        claimed.get("manifest_digest"), fresh.get("manifest_digest"))
    return problems, fresh


def _task_mutants(target, tasks: dict) -> dict[str, Mutant]:
    """Rebuild each task's Mutant from the pristine source (the task file names its edit)."""
    from .mutate import enumerate_file, held_out_operators, default_operators

    out = {}
    wanted = set(tasks)
    for sf in target.sources:
        text = (target.tree / sf.path).read_text(encoding="utf-8")
        # enumerated per operator set, as the manifest build does: one list of both would
        # merge an edit two operators make alike (a default `False` -> `True`) into one id
        for operators in (default_operators(), held_out_operators()):
            for c in enumerate_file(sf.path, text, operators):
                if c.mutant.id in wanted:
                    out[c.mutant.id] = c.mutant
    missing = wanted - set(out)
    if missing:
        raise UserError(f"{target.name}: {len(missing)} tasks of the bundle are not mutants of this "
                        f"target (e.g. {sorted(missing)[0]}): the bundle was made for other code")
    return out
