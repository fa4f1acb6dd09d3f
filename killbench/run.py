"""Drive one generator over targets' task sets into a self-contained, resumable run directory.

    config.json            what was asked (RunConfig): versions, the generator and its code,
                           model, seed, options, isolation, budgets and the rules they follow
    population/NAME.json   the target's population, frozen when its generation starts
    tasks/NAME.json        the tasks exactly as the generator was given them
    candidates/ID.py       every test file the generator wrote or gated, as its bytes
    candidates.jsonl       every file it yielded (target, candidate, task, attempt, meta)
    evidence/gate.jsonl    every gate evaluation: phases, per-test verdicts (GateEntry)
    journal.jsonl          per target: started, progress, ended (with its GenerationSummary)
    transcript.jsonl       every model call
    generator.log          what the generator reported while it ran
    summary.json           per target GenerationSummary, from the journal

Every append is flushed and fsynced. The same command with the same ``--out`` resumes an
interrupted run: finished targets are kept, and the target in progress is generated
again with every model call it already made answered from its transcript and every gate
verdict from its evidence, so nothing is asked or gated twice and nothing is counted
twice. A generator gets its budgets (tokens, gate calls, seconds) per target; when one
is spent it is stopped, and what it yielded is kept.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
import traceback
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

from . import __version__, executor
from .config import resolve
from .errors import GeneratorError, HarnessError, KillbenchError, UserError
from .execution import Workspace
from .evidence import (Budgets, GateEntry, GenerationSummary, GeneratorInfo, Population,
                       RunConfig, Submission, TargetConfig, load, read_jsonl, write)
from .gate import GATE_TIMEOUT, Gate, candidate_id, source_bytes
from .generation import CandidateTest, GenerationContext, make_task
from .harness import default_jobs, load_or_run_baseline, workdir_for
from .manifests import current_benchmark, current_digest
from .models import Budget, BudgetExhausted, Transcript, check_model
from .plugins import code_identity, load_generator
from .population import freeze, limited, mutant
from .rules import load_rules
from .sandbox import Sandbox
from .targets import PreparedTarget, prepare
from .workspace import exclusive

log = logging.getLogger("killbench")
PROGRESS_S = 30.0  # seconds between two progress lines of a run

DEFAULT_TARGETS = ("cachetools",)
GRACE_S = 5.0  # how long a stopped generator's thread may take to notice


class GateBudgetExhausted(BudgetExhausted):
    """The target's gate calls are spent."""


class WallTimeExhausted(BudgetExhausted):
    """The target's generation time is spent."""


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class RunDirectory:
    """The files of one run; appends are durable and safe from several threads."""

    def __init__(self, path: Path):
        self.path = path
        for sub in ("candidates", "tasks", "population", "evidence"):
            (path / sub).mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def write_json(self, rel: str, data) -> None:
        p = self.path / rel
        tmp = p.with_suffix(p.suffix + ".tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        os.replace(tmp, p)

    def append(self, rel: str, data: dict) -> None:
        line = json.dumps(data, sort_keys=True) + "\n"
        with self._lock:
            p = self.path / rel
            _repair(p)
            with open(p, "a", encoding="utf-8") as fh:
                fh.write(line)
                fh.flush()
                os.fsync(fh.fileno())

    def save_candidate(self, source: str) -> str:
        cid = candidate_id(source)
        p = self.path / "candidates" / f"{cid}.py"
        if not p.exists():
            tmp = p.with_suffix(".tmp")
            tmp.write_bytes(source_bytes(source))
            os.replace(tmp, p)
        return cid

    def generator_log(self, target: str, generator: str):
        """A generator's messages go whole to generator.log, shortened to the terminal."""

        def emit(msg) -> None:
            msg = str(msg)
            with self._lock:
                with open(self.path / "generator.log", "a", encoding="utf-8", errors="replace") as fh:
                    fh.write(f"[{target}] {msg}\n")
            first = msg.splitlines()[0] if msg else ""
            short = first if len(first) <= 160 and "\n" not in msg else \
                first[:160] + f" ... (whole in {self.path / 'generator.log'})"
            log.info("%s: %s", generator, short)

        return emit

    def journal(self) -> list[dict]:
        return read_journal(self.path)


def read_journal(run_dir: Path) -> list[dict]:
    """The run's journal events (a last line cut short by a kill is ignored)."""
    p = run_dir / "journal.jsonl"
    if not p.exists():
        return []
    raw = p.read_bytes()
    return [json.loads(x) for x in raw[: raw.rfind(b"\n") + 1].decode("utf-8").splitlines() if x]


def _repair(path: Path) -> None:
    """Drop a last line cut short by a kill, so that the next append starts clean."""
    if not path.exists():
        return
    raw = path.read_bytes()
    good = raw.rfind(b"\n") + 1
    if good < len(raw):
        with open(path, "r+b") as fh:
            fh.truncate(good)


def run_state(run_dir: Path) -> dict:
    """Which targets ended, and whether the run is complete (every target ended, no error)."""
    config = load(run_dir / "config.json", RunConfig)
    ended = {e["target"]: e["summary"] for e in read_journal(run_dir) if e["kind"] == "target-end"}
    errors = {t: s["error"] for t, s in ended.items() if s.get("error")}
    names = [config.targets[n].ref for n in config.targets]
    missing = [n for n in config.targets if n not in ended]
    missing += [r for r in config.target_refs if r not in names]
    return {"ended": ended, "errors": errors, "missing": missing,
            "complete": not missing and not errors}


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


def _config(generator_ref, generator, model, seed, options, isolation, gate_timeout, overrides,
            rules, target_refs, split) -> RunConfig:
    outside = []
    for key, value in sorted(overrides.items()):
        if value is not None:
            outside.append(f"{key} set to {value}")
    if gate_timeout != rules.gate_timeout_s:
        outside.append(f"gate timeout {gate_timeout} s (rules: {rules.gate_timeout_s} s)")
    if isolation != rules.isolation:
        outside.append(f"isolation {isolation} (rules: {rules.isolation})")
    return RunConfig(
        killbench=__version__, manifest_digest=current_digest(), benchmark=current_benchmark(),
        split=split,
        generator=GeneratorInfo(ref=generator_ref, name=str(generator.name),
                                version=str(generator.version),
                                needs_model=bool(getattr(generator, "needs_model", True)),
                                code=code_identity(generator),
                                prompts=getattr(generator, "prompt_hashes", lambda: {})()),
        model=model, seed=seed, options=options or {}, isolation=isolation,
        gate_timeout_s=gate_timeout, overrides={k: v for k, v in overrides.items() if v is not None},
        rules=rules.to_dict(), outside_rules=outside, target_refs=list(target_refs),
        started_at=_now())


def run_generator(generator_ref: str, target_names: list[str], *, model: str | None = None,
                  budget: int | None = None, gate_calls: int | None = None,
                  seconds: float | None = None, seed: int = 0, out: Path | None = None,
                  jobs: int | None = None, options: dict | None = None, base_url: str | None = None,
                  no_cache: bool = False, gate_timeout: float | None = None,
                  isolation: str | None = None, split: str = "full",
                  limit: int | None = None) -> Path:
    """`killbench run`: returns the run directory (resumed when `out` holds this run)."""
    rules = load_rules()
    generator = load_generator(generator_ref, options)
    needs_model = getattr(generator, "needs_model", True)
    if needs_model and not model:
        raise UserError(f"generator {generator.name!r} drives a model: give --model provider/name "
                        "(e.g. openai/gpt-4.1, anthropic/claude-sonnet-4-5, replay/RUN_DIR)")
    if not target_names or any(not t.strip() for t in target_names):
        raise UserError("--targets: give one or more pin names or project directories, "
                        "separated by commas")
    specs = [resolve(t) for t in target_names]  # every target checked before any work
    if split != "full":
        own = [s.name for s in specs if s.kind != "pin"]
        if own:
            raise UserError(f"--split {split}: the split exists only for the benchmark's pinned "
                            f"targets; {', '.join(own)} has one task set (--split full)")
    if needs_model:
        check_model(model, base_url)  # a bad name or a missing key, before any directory
    if len({s.name for s in specs}) != len(specs):
        raise UserError("two targets have the same name; give each once")
    isolation = executor.require(isolation or rules.isolation)
    gate_timeout = float(gate_timeout if gate_timeout is not None else rules.gate_timeout_s)
    jobs = jobs or default_jobs()
    if limit is not None and limit < 1:
        raise UserError(f"--limit must be at least 1 task per target, got {limit}")
    overrides = {"tokens per target": budget, "gate calls per target": gate_calls,
                 "seconds per target": seconds, "tasks per target": limit}
    config = _config(generator_ref, generator, model, seed, options, isolation, gate_timeout,
                     overrides, rules, target_names, split)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    run_path = out or Path("runs") / f"{stamp}-{generator.name}"
    resumed = (run_path / "config.json").exists()
    if resumed:
        old = load(run_path / "config.json", RunConfig)
        if old.identity() != config.identity():
            diff = sorted(k for k in set(old.identity()) | set(config.identity())
                          if old.identity().get(k) != config.identity().get(k))
            raise UserError(f"{run_path} holds another run (it differs in: {', '.join(diff)}); "
                            "give the same command to resume it, or another --out")
        config = old
        log.info("resuming the run in %s", run_path)
    elif run_path.exists() and any(p.name != "predictions.jsonl" for p in run_path.iterdir()):
        raise UserError(f"{run_path} exists and holds more than pre-registered predictions; "
                        "choose another --out")
    rd = RunDirectory(run_path)
    write(run_path / "config.json", config)
    ended = {e["target"]: e for e in rd.journal() if e["kind"] == "target-end"}
    transcript = Transcript(run_path / "transcript.jsonl")
    failures = []
    try:
        for spec, ref in zip(specs, target_names):
            done = ended.get(spec.name)
            if done is not None and not done["summary"].get("error"):
                log.info("%s: done in an earlier session", spec.name)
                continue
            summary = _run_target(rd, config, spec, ref, generator, model=model, budget=budget,
                                  gate_calls=gate_calls, seconds=seconds, rules=rules, jobs=jobs,
                                  base_url=base_url, no_cache=no_cache, transcript=transcript,
                                  resumed=resumed)
            if summary.error:
                failures.append((spec.name, summary.error))
                break
    finally:
        transcript.close()
        _write_summary(rd)
    if failures:
        name, error = failures[0]
        raise GeneratorError(f"generator {generator.name!r} failed on {name}: {error}. The run in "
                             f"{run_path} is incomplete; what it wrote is kept. Fix the cause and "
                             "run the same command again to resume it.")
    return run_path


def _write_summary(rd: RunDirectory) -> None:
    summary = {}
    for e in rd.journal():
        if e["kind"] == "target-end":
            summary[e["target"]] = e["summary"]
    rd.write_json("summary.json", summary)


def _population(rd: RunDirectory, target: PreparedTarget, jobs: int, split: str,
                limit: int | None = None) -> Population:
    """The target's population: frozen now, or as the interrupted session froze it. With a
    limit (`--limit`, a quick look) only the split's first `limit` tasks; the population's
    source says so, so the run is scored on those tasks and never matches the benchmark's."""
    path = rd.path / "population" / f"{target.name}.json"
    fresh = freeze(target, jobs, split)
    fresh = limited(fresh, limit)
    if path.exists():
        frozen = load(path, Population)
        if frozen.source != fresh.source:
            raise UserError(f"{target.name}: the run was started against {frozen.source} and "
                            f"this checkout has {fresh.source}; it cannot be resumed here")
        return frozen
    write(path, fresh)
    return fresh


class _Evaluations:
    """The target's gate evaluations: cached by (candidate, task), counted against the
    gate-call budget, recorded as evidence. Concurrent asks for one key run the gate once."""

    def __init__(self, rd: RunDirectory, gate: Gate, target: str, mutants: dict, limit: int,
                 earlier: list[GateEntry]):
        self.rd, self.gate, self.target, self.mutants, self.limit = rd, gate, target, mutants, limit
        self._lock = threading.Lock()
        self._done: dict[tuple, GateEntry] = {(e.candidate, e.task): e for e in earlier}
        self._pending: dict[tuple, Future] = {}
        self.asked_by_generator: set[tuple] = set()
        self.status = None  # () -> str: tokens and time, set by the generation loop
        self._shown = 0.0
        self._last: tuple | None = None

    def progress(self, final: bool = False) -> None:
        """A plain line every PROGRESS_S (and at the end): a run is never silent for minutes.
        Counted from the evidence, so a resumed run continues its counts."""
        now = time.monotonic()
        if not final and now - self._shown < PROGRESS_S:
            return
        with self._lock:
            done = list(self._done.values())
        kept = sum(1 for e in done for t in e.tests if t.kept)
        hit = len({e.task for e in done if e.task is not None and any(t.kept for t in e.tests)})
        if final and self._last == (len(done), kept, hit):
            return  # the line just shown says it already
        self._shown, self._last = now, (len(done), kept, hit)
        extra = self.status() if self.status is not None else ""
        log.info("%s: gate calls %d of %d, kept tests %d, tasks with a kept test %d%s",
                 self.target, len(done), self.limit, kept, hit, extra)

    @property
    def count(self) -> int:
        with self._lock:
            return len(self._done) + len(self._pending)

    def __contains__(self, key: tuple) -> bool:
        with self._lock:
            return key in self._done or key in self._pending

    def evaluate(self, source, task: str | None, asked_by: str) -> GateEntry:
        key = (candidate_id(source) if isinstance(source, str) else "0" * 16, task)
        with self._lock:
            if key not in self._done and key not in self._pending and \
                    len(self._done) + len(self._pending) >= self.limit:
                raise GateBudgetExhausted(
                    f"gate-call budget spent: {self.limit} distinct tests gated for {self.target}",
                    limit=self.limit, spent=self.limit)
            if asked_by == "generator":
                self.asked_by_generator.add(key)
            if key in self._done:
                return self._done[key]
            fut = self._pending.get(key)
            mine = fut is None
            if mine:
                fut = self._pending[key] = Future()
        if not mine:
            return fut.result()
        try:
            if isinstance(source, str):
                self.rd.save_candidate(source)
            with executor.accounting(None):  # the gate's work is not the generator's
                entry = self.gate.check(source, self.mutants.get(task) if task else None,
                                        target=self.target, asked_by=asked_by)
            self.rd.append("evidence/gate.jsonl", entry.dump())
        except BaseException as exc:
            with self._lock:
                self._pending.pop(key, None)
            fut.set_exception(exc)
            raise
        with self._lock:
            self._pending.pop(key, None)
            self._done[key] = entry
        fut.set_result(entry)
        self.progress()
        return entry


def _run_target(rd: RunDirectory, config: RunConfig, spec, ref: str, generator, *, model, budget,
                gate_calls, seconds, rules, jobs, base_url, no_cache, transcript,
                resumed) -> GenerationSummary:
    from .models import open_model

    target = prepare(spec)
    with exclusive(workdir_for(target), spec.name):
        workdir = workdir_for(target)
        pop = _population(rd, target, jobs, config.split, config.overrides.get("tasks per target"))
        baseline = load_or_run_baseline(target, workdir)
        needs_model = config.generator.needs_model
        budgets = rules.budgets(len(pop.task_set), needs_model)
        budgets = Budgets(tokens=budget if budget is not None and needs_model else budgets.tokens,
                          gate_calls=gate_calls if gate_calls is not None else budgets.gate_calls,
                          seconds=float(seconds) if seconds is not None else budgets.seconds)
        rows = pop.by_id()
        mutants = {i: mutant(rows[i]) for i in pop.task_set}
        texts = {sf.path: (target.tree / sf.path).read_text(encoding="utf-8") for sf in target.sources}
        modules = {sf.path: sf.module_path for sf in target.sources}
        tasks = [make_task(mutants[i], texts[mutants[i].path], modules[mutants[i].path],
                           rows[i].covered_by) for i in pop.task_set]
        config.targets[spec.name] = TargetConfig(ref=ref, version=spec.version,
                                                 fingerprint=target.fingerprint,
                                                 population=pop.source, tasks=len(tasks),
                                                 budgets=budgets)
        write(rd.path / "config.json", config)
        rd.write_json(f"tasks/{spec.name}.json", [t.to_dict() for t in tasks])
        journal = rd.journal()
        prior = max([e.get("elapsed_s", 0.0) for e in journal
                     if e["target"] == spec.name and e["kind"] == "progress"] or [0.0])
        rd.append("journal.jsonl", {"kind": "target-start", "target": spec.name, "at": _now(),
                                    "resumed_after_s": prior})
        earlier = [e for e in read_jsonl(rd.path / "evidence" / "gate.jsonl", GateEntry)
                   if e.target == spec.name]
        submitted = {(s.candidate, s.task, s.attempt)
                     for s in read_jsonl(rd.path / "candidates.jsonl", Submission)
                     if s.target == spec.name}
        t_budget = Budget(budgets.tokens) if needs_model else None
        sandboxes = [Sandbox(target, workdir / "sandboxes" / f"gate{i}", trusted=False,
                             isolation=config.isolation) for i in range(jobs)]
        gate = Gate(sandboxes, baseline, timeout=config.gate_timeout_s)
        evals = _Evaluations(rd, gate, spec.name, mutants, budgets.gate_calls, earlier)
        log.info("%s: %d tasks (%s split); gating %d positive controls first", spec.name,
                 len(tasks), config.split, len(pop.controls.get("positive", [])))
        check_positive_controls(rd, gate, pop)  # before any generator or model call
        log.info("%s: controls kept; %s generating", spec.name, generator.name)
        client = open_model(model, cache_dir=None, transcript=transcript, budget=t_budget,
                            base_url=base_url, no_cache=no_cache,
                            resume_from=rd.path / "transcript.jsonl" if resumed else None) \
            if needs_model else None
        try:
            return _generate(rd, config, spec.name, generator, target, baseline, pop, tasks, texts,
                             modules, client, t_budget, budgets, evals, submitted, prior, jobs)
        finally:
            if client is not None:
                client.close()


def check_positive_controls(rd: RunDirectory, gate: Gate, pop: Population) -> None:
    """Each positive control's reference test through the gate, exactly as a generator's
    test goes; one not kept is an instrument fault and stops the run here (controls.py)."""
    rows = pop.by_id()
    for pc in pop.controls.get("positive", []):
        entry = gate.check(pc["test"], mutant(rows[pc["id"]]), target=pop.target)
        rd.append("evidence/controls.jsonl", entry.dump())
        lost = [t for t in entry.tests if not t.kept]
        if entry.file_reason or not entry.tests or lost:
            why = entry.file_reason or (f"{lost[0].reason} at the {lost[0].stage} phase" if lost
                                        else "no test was collected")
            raise HarnessError(
                f"instrument fault on {pop.target}: the gate did not keep the reference test "
                f"{pc['file']} of positive control {pc['id']} ({why}). The gate cannot tell a "
                "kill on this machine today; the run stops before any generator call. "
                "`killbench doctor " + pop.target + "` checks the harness.")


def _generate(rd, config, name, generator, target, baseline, pop, tasks, texts, modules, client,
              t_budget, budgets: Budgets, evals: _Evaluations, submitted: set, prior: float,
              jobs: int) -> GenerationSummary:
    stop = threading.Event()
    stop_reason: list[str] = []
    items: queue.Queue = queue.Queue()
    metrics: dict = {}
    cpu = executor.CpuCounter()
    logger = rd.generator_log(name, generator.name)

    def halt(reason: str) -> None:
        if not stop.is_set():
            stop_reason.append(reason)
            stop.set()
            if t_budget is not None:
                t_budget.close(reason)

    def ctx_gate(source, task=None):
        if stop.is_set():
            raise WallTimeExhausted(stop_reason[0] if stop_reason else "generation stopped",
                                    limit=0, spent=0)
        if task is not None and task not in evals.mutants:
            raise UserError(f"ctx.gate: {task!r} is not a task of {name}")
        return evals.evaluate(source, task, "generator")

    def report(values: dict) -> None:
        for k, v in dict(values).items():
            if isinstance(v, (int, float, str)) and not isinstance(v, bool):
                metrics[str(k)] = v
            elif isinstance(v, dict) and all(isinstance(x, int) and not isinstance(x, bool)
                                             for x in v.values()):
                metrics[str(k)] = {str(a): b for a, b in v.items()}
            else:
                raise UserError(f"ctx.report: {k!r} must be a number, a string or a dict of "
                                f"counts, not {type(v).__name__}")

    ctx = GenerationContext(
        target=name, sources=dict(texts), modules=dict(modules), test_files=_test_files(target),
        tasks=list(tasks), model=client, budget=t_budget, gate=ctx_gate, seed=config.seed,
        options=dict(config.options), read_test=_read_test_factory(target), log=logger,
        prepared=target, baseline=baseline, budgets=budgets, python=target.env.python,
        workspace=None, report=report, stopping=stop.is_set, isolation=config.isolation)
    workspaces: list[Workspace] = []

    def workspace() -> Workspace:
        """The target's copy for the generator's own commands: made on first use."""
        if not workspaces:
            workspaces.append(Workspace(
                target, workdir_for(target) / "sandboxes" / "workspace",
                isolation=config.isolation, seconds_left=ctx.seconds_left,
                spent=lambda: WallTimeExhausted(
                    stop_reason[0] if stop_reason else
                    f"wall-time budget spent: {budgets.seconds:.0f} s of generation for {name}",
                    limit=0, spent=0),
                hashseed=str(config.seed)))
        if stop.is_set():
            raise workspaces[0]._spent()
        return workspaces[0]

    ctx.workspace = workspace

    def produce():
        started = time.thread_time()
        try:
            with executor.accounting(cpu):
                for cand in generator.generate(ctx):
                    if stop.is_set():
                        break
                    items.put(("candidate", cand))
            items.put(("end", None))
        except BudgetExhausted as exc:
            items.put(("budget", exc))
        except BaseException as exc:  # noqa: BLE001 - a plug-in's failure is recorded, not fatal here
            items.put(("error", exc, traceback.format_exc()))
        finally:
            cpu.cpu_s += time.thread_time() - started

    started = time.monotonic()
    deadline = started + max(0.0, budgets.seconds - prior)
    ctx.deadline = deadline

    ended: list[float] = []  # when generation ended: the gating that goes on is not generation

    def status() -> str:
        tokens = f", {t_budget.spent:,} of {t_budget.limit:,} tokens" if t_budget is not None else ""
        now = ended[0] if ended else time.monotonic()
        if ended:
            return f"{tokens}, {prior + now - started:.0f} s of generation (ended; gating)"
        left = max(0.0, deadline - now)
        return f"{tokens}, {prior + now - started:.0f} s of generation, at most {left:.0f} s left"

    evals.status = status
    worker = threading.Thread(target=produce, name=f"generate-{name}", daemon=True)
    worker.start()
    error = None
    futures: list[Future] = []
    pool = ThreadPoolExecutor(max_workers=jobs)
    attempts = Counter()
    try:
        while True:
            left = deadline - time.monotonic()
            try:
                item = items.get(timeout=max(0.01, min(left, PROGRESS_S))) if left > 0 \
                    else items.get_nowait()
            except queue.Empty:
                if deadline - time.monotonic() > 0:
                    evals.progress()  # a generator thinking for minutes is still shown
                    continue
                halt(f"wall-time budget spent: {budgets.seconds:.0f} s of generation for {name}")
                break
            kind = item[0]
            if kind == "end":
                break
            if kind == "budget":
                halt(str(item[1]))
                break
            if kind == "error":
                exc, tb = item[1], item[2]
                error = f"{type(exc).__name__}: {exc}"
                logger(f"generator error: {tb}")
                halt(f"the generator failed: {error}")
                break
            cand = item[1]
            if not isinstance(cand, CandidateTest):
                error = (f"generate() yielded a {type(cand).__name__}, not a "
                         "killbench.generation.CandidateTest")
                halt(error)
                break
            if cand.task is not None and cand.task not in evals.mutants:
                error = f"a test was attributed to {cand.task!r}, which is not a task of {name}"
                halt(error)
                break
            cid = rd.save_candidate(cand.source) if isinstance(cand.source, str) else "0" * 16
            attempt = cand.attempt if isinstance(cand.attempt, int) else 1
            meta = cand.meta if isinstance(cand.meta, dict) else {"meta": repr(cand.meta)[:200]}
            try:
                json.dumps(meta)
            except (TypeError, ValueError):
                meta = {"meta": repr(meta)[:200]}
            key = (cid, cand.task, attempt)
            if key not in submitted:
                submitted.add(key)
                rd.append("candidates.jsonl", Submission(target=name, candidate=cid, task=cand.task,
                                                         attempt=attempt, meta=meta).dump())
            attempts[(cid, cand.task)] += 1
            if (cid, cand.task) not in evals and evals.count >= evals.limit:
                halt(f"gate-call budget spent: {evals.limit} distinct tests gated for {name}")
                break
            rd.append("journal.jsonl", {"kind": "progress", "target": name,
                                        "elapsed_s": round(prior + time.monotonic() - started, 3)})
            futures.append(pool.submit(_gate_submission, evals, cand.source, cand.task))
        ended.append(time.monotonic())
        elapsed = prior + ended[0] - started
        worker.join(GRACE_S if stop.is_set() else None)
        for f in futures:
            try:
                f.result()
            except GateBudgetExhausted as exc:
                halt(str(exc))
    except BaseException:
        halt("interrupted")
        for f in futures:
            f.cancel()
        executor.kill_all()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    evals.progress(final=True)
    summary = _summary(rd, name, len(tasks), budgets, evals, t_budget, elapsed, cpu, stop_reason,
                       error, metrics)
    rd.append("journal.jsonl", {"kind": "target-end", "target": name, "at": _now(),
                                "summary": summary.dump()})
    return summary


def _gate_submission(evals: _Evaluations, source, task):
    try:
        return evals.evaluate(source, task, "harness")
    except GateBudgetExhausted:
        raise


def _summary(rd, name, tasks, budgets, evals, t_budget, elapsed, cpu, stop_reason, error,
             metrics) -> GenerationSummary:
    subs = [s for s in read_jsonl(rd.path / "candidates.jsonl", Submission) if s.target == name]
    entries = {(e.candidate, e.task): e for e in read_jsonl(rd.path / "evidence" / "gate.jsonl",
                                                            GateEntry) if e.target == name}
    files = {(s.candidate, s.task) for s in subs}
    rejected = Counter()
    tests = kept_tests = kept_files = 0
    for key in files:
        e = entries.get(key)
        if e is None:
            rejected["not gated (gate-call budget spent)"] += 1
            continue
        if e.file_reason:
            rejected[e.file_reason] += 1
            continue
        tests += len(e.tests)
        k = sum(1 for t in e.tests if t.kept)
        kept_tests += k
        kept_files += k > 0
        for t in e.tests:
            if not t.kept:
                rejected[t.reason] += 1
    account = t_budget.as_dict() if t_budget is not None else None
    return GenerationSummary(
        target=name, tasks=tasks, attempts=len(subs), files=len(files), tests=tests, kept_tests=kept_tests,
        kept_files=kept_files, rejected=dict(sorted(rejected.items())),
        gate_calls=evals.count, gate_calls_by_generator=len(evals.asked_by_generator),
        tokens_in=(account or {}).get("spent_in", 0),
        tokens_out=(account or {}).get("spent_out", 0), budget=account, budgets=budgets,
        wall_s=round(elapsed, 3), cpu_s=round(cpu.cpu_s, 3),
        stopped=stop_reason[0] if stop_reason else None, error=error,
        generator_metrics=metrics)


__all__ = ["DEFAULT_TARGETS", "GateBudgetExhausted", "KillbenchError", "RunDirectory",
           "WallTimeExhausted", "run_generator", "run_state"]
