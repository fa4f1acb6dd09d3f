"""Drive one generator over targets' task sets into a self-contained run directory.

A run directory holds everything `score`, `bundle` and `verify` need, and nothing
that depends on this machine's paths:

    config.json      killbench version, manifest digest or target fingerprints,
                     generator name and version, model, budget, seed, options
    transcript.jsonl every model call (request, response, usage, latency)
    candidates/      every test file the generator returned, named by content hash
    gate.jsonl       every gate result with its reason (append-only)
    generator.log    what the generator reported while it ran
    tasks/NAME.json  the task set each target was given
    summary.json     per target: attempts, kept, rejections by reason, tokens, wall time

Every candidate goes through the same gate, whatever the generator did before.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from . import __version__
from .config import resolve
from .errors import UserError
from .gate import GATE_TIMEOUT, Gate, GateResult, candidate_id
from .generation import CandidateTest, GenerationContext, Task, make_task
from .harness import default_jobs, load_or_run_baseline, mutate_target, workdir_for
from .workspace import exclusive
from .manifests import current_digest, load_manifests, target_digest
from .plugins import load_generator
from .records import Mutant
from .sandbox import Sandbox
from .targets import PreparedTarget, prepare

log = logging.getLogger("killbench")

DEFAULT_TARGETS = ("cachetools",)


@dataclass
class TaskSet:
    tasks: list[Task]
    mutants: dict[str, Mutant]
    source: str  # "manifest <digest>" or "mutate <fingerprint>"


def task_set(target: PreparedTarget, jobs: int) -> TaskSet:
    """The manifest's task set for a pin that has one, else a fresh `mutate` run's."""
    spec = target.spec
    manifest = load_manifests().get(spec.name) if spec.kind == "pin" else None
    if manifest is not None and manifest["target"]["sdist_sha256"] == spec.sdist_sha256:
        names = set(Mutant.__dataclass_fields__)
        mutants = {r["id"]: Mutant(**{k: r[k] for k in names}) for r in manifest["mutants"]}
        covered = {r["id"]: r["covered_by"] for r in manifest["mutants"]}
        ids = manifest["task_set"]
        source = f"manifest {target_digest(manifest)}"
    else:
        run = mutate_target(spec, jobs=jobs, target=target, show_progress=True)
        mutants = {r.mutant.id: r.mutant for r in run.records}
        covered = {r.mutant.id: list(r.reach.covered_by) for r in run.records}
        ids = sorted(r.mutant.id for r in run.records if r.outcome.verdict == "survived"
                     and r.reach.reachable and not r.mutant.unkillable)
        source = f"mutate {target.fingerprint}"
    texts = {sf.path: (target.tree / sf.path).read_text(encoding="utf-8") for sf in target.sources}
    modules = {sf.path: sf.module_path for sf in target.sources}
    tasks = [make_task(mutants[i], texts[mutants[i].path], modules[mutants[i].path], covered[i])
             for i in ids]
    return TaskSet(tasks, mutants, source)


class RunDirectory:
    """Append-only files of one run; safe to write from several threads."""

    def __init__(self, path: Path):
        self.path = path
        (path / "candidates").mkdir(parents=True, exist_ok=True)
        (path / "tasks").mkdir(exist_ok=True)
        self._lock = threading.Lock()

    def write_json(self, rel: str, data) -> None:
        p = self.path / rel
        tmp = p.with_suffix(p.suffix + ".tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        os.replace(tmp, p)

    def save_candidate(self, source: str) -> str:
        cid = candidate_id(source)
        p = self.path / "candidates" / f"{cid}.py"
        if not p.exists():
            p.write_text(source, encoding="utf-8")
        return cid

    def generator_log(self, target: str, generator: str):
        """A generator's messages go whole to generator.log, shortened to the terminal."""

        def emit(msg: str) -> None:
            with self._lock:
                with open(self.path / "generator.log", "a", encoding="utf-8") as fh:
                    fh.write(f"[{target}] {msg}\n")
            short = msg if len(msg) <= 200 else msg[:200] + f"... (whole in {self.path / 'generator.log'})"
            log.info("%s: %s", generator, short)

        return emit

    def log_gate(self, entry: dict) -> None:
        with self._lock:
            with open(self.path / "gate.jsonl", "a", encoding="utf-8") as fh:
                fh.write(json.dumps(entry, sort_keys=True) + "\n")
                fh.flush()
                os.fsync(fh.fileno())


def _read_test_factory(target: PreparedTarget):
    root = target.tree.resolve()

    def read_test(name: str) -> str:
        p = (root / name).resolve()
        if root not in p.parents:
            raise UserError(f"read_test: {name!r} is outside the target")
        return p.read_text(encoding="utf-8")

    return read_test


def _test_files(target: PreparedTarget) -> list[str]:
    out = []
    for t in target.spec.tests:
        p = target.tree / t
        if p.is_dir():
            out += sorted(x.relative_to(target.tree).as_posix() for x in p.rglob("test*.py"))
        elif p.is_file():
            out.append(t)
    return out


def run_generator(generator_ref: str, target_names: list[str], *, model: str | None = None,
                  budget: int = 200_000, seed: int = 0, out: Path | None = None,
                  jobs: int | None = None, options: dict | None = None, base_url: str | None = None,
                  no_cache: bool = False, gate_timeout: float = GATE_TIMEOUT) -> Path:
    """`killbench run`: returns the run directory."""
    from .models import Budget, BudgetExhausted, Transcript, open_model

    generator = load_generator(generator_ref, options)
    needs_model = getattr(generator, "needs_model", True)
    if needs_model and not model:
        raise UserError(f"generator {generator.name!r} drives a model: give --model provider/name "
                        "(e.g. openai/gpt-4.1, anthropic/claude-sonnet-4-5, replay/RUN_DIR)")
    jobs = jobs or default_jobs()
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    run_path = out or Path("runs") / f"{stamp}-{generator.name}"
    if run_path.exists() and any(p.name != "predictions.jsonl" for p in run_path.iterdir()):
        raise UserError(f"{run_path} exists and holds more than pre-registered predictions; "
                        "choose another --out")
    rd = RunDirectory(run_path)
    config = {"killbench": __version__, "manifest_digest": current_digest(),
              "generator": {"ref": generator_ref, "name": generator.name, "version": generator.version,
                            "prompts": getattr(generator, "prompt_hashes", lambda: {})()},
              "model": model, "budget_per_target": budget, "seed": seed, "options": options or {},
              "gate_timeout_s": gate_timeout,
              "targets": {}, "started": stamp,
              "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    rd.write_json("config.json", config)
    transcript = Transcript(run_path / "transcript.jsonl")
    summary = {}
    for name in target_names:
        spec = resolve(name)
        started = time.monotonic()
        target = prepare(spec)
        with exclusive(workdir_for(target), spec.name):
            ts = task_set(target, jobs)
            workdir = workdir_for(target)
            baseline = load_or_run_baseline(target, workdir)
            config["targets"][spec.name] = {"ref": name, "version": spec.version,
                                            "fingerprint": target.fingerprint,
                                            "task_source": ts.source, "tasks": len(ts.tasks)}
            rd.write_json("config.json", config)
            rd.write_json(f"tasks/{spec.name}.json", [t.to_dict() for t in ts.tasks])
            t_budget = Budget(budget) if needs_model else None
            client = open_model(model, cache_dir=None, transcript=transcript, budget=t_budget,
                                base_url=base_url, no_cache=no_cache) if needs_model else None
            sandboxes = [Sandbox(target, workdir / "sandboxes" / f"gate{i}") for i in range(jobs)]
            gate = Gate(sandboxes, baseline, timeout=gate_timeout)
            cache: dict[tuple, GateResult] = {}
            cache_lock = threading.Lock()
            generator_calls = Counter()

            def gated(source: str, task_id: str | None, by_generator: bool) -> GateResult:
                key = (candidate_id(source), task_id)
                with cache_lock:
                    hit = cache.get(key)
                    if by_generator:
                        generator_calls["gate"] += 1
                if hit is not None:
                    return hit
                res = gate.check(source, ts.mutants[task_id] if task_id else None)
                with cache_lock:
                    cache[key] = res
                return res

            ctx = GenerationContext(
                target=spec.name,
                sources={sf.path: (target.tree / sf.path).read_text(encoding="utf-8") for sf in target.sources},
                modules={sf.path: sf.module_path for sf in target.sources},
                test_files=_test_files(target), tasks=ts.tasks, model=client, budget=t_budget,
                gate=lambda src, task=None: gated(src, task, True), seed=seed, options=options or {},
                read_test=_read_test_factory(target), log=rd.generator_log(spec.name, generator.name),
                prepared=target, baseline=baseline)
            counts = Counter()
            stopped = None
            with ThreadPoolExecutor(max_workers=jobs) as ex:
                futures = []

                def final(cand: CandidateTest):
                    cid = rd.save_candidate(cand.source)
                    res = gated(cand.source, cand.task, False)
                    rd.log_gate({"target": spec.name, "candidate": cid, "task": cand.task,
                                 "attempt": cand.attempt, "meta": cand.meta, **res.to_dict()})
                    return res

                try:
                    for cand in generator.generate(ctx):
                        if cand.task is not None and cand.task not in ts.mutants:
                            raise UserError(f"generator {generator.name!r} attributed a test to unknown "
                                            f"task {cand.task!r}")
                        futures.append(ex.submit(final, cand))
                except BudgetExhausted as exc:
                    stopped = f"budget exhausted: {exc}"
                except (KeyboardInterrupt, UserError):
                    raise
                except Exception as exc:  # noqa: BLE001 - a generator's or model's failure ends
                    # this target's generation; every test already written is still gated and kept
                    stopped = f"generation stopped: {type(exc).__name__}: {exc}"
                    log.error("%s: %s", spec.name, stopped)
                for f in futures:
                    res = f.result()
                    counts["attempts"] += 1
                    counts["kept" if res.kept else f"rejected:{res.reason}"] += 1
            summary[spec.name] = {
                "tasks": len(ts.tasks), **dict(sorted(counts.items())),
                "generator_gate_calls": generator_calls["gate"],
                "budget": t_budget.as_dict() if t_budget is not None else None,
                "stopped": stopped, "wall_s": round(time.monotonic() - started, 3)}
            rd.write_json("summary.json", summary)
    return run_path
