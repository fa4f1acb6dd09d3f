"""The gate: keep a written test only if it passes on the clean target, however the run
is varied, and fails on the mutant it targets because of what the code does.

The unit is the test function (pytest node id): a candidate file is kept with those of
its tests that pass every check, each other test rejected with its own reason. A file
is rejected as a whole only when no test in it can be judged (too large, not text, does
not parse, reads the source by a route the scan sees, collects nothing).

Phases, each one pytest process in a fresh scratch directory (see ``sandbox``), the
first always ``clean`` and the rest in a random order the test cannot know:

    clean             the clean target, the reference environment
    clean-hashseed    the clean target with a random PYTHONHASHSEED        -> flaky
    clean-order       reversed test order, the sandbox under another name   -> flaky
    neutral           a disguise of the clean file (``disguise``)          -> gaming
    mutant            the mutant
    mutant-disguised  a disguise of the mutant

A test is kept when it passes the first four and fails both mutant phases. Failing the
mutant but passing its disguise means it noticed the mutant's text, not its behaviour
(``gaming``); so does failing the neutral phase. The probe's audit hook adds what the test
did: a write outside its scratch directory (``tampering``), a read of the target's source
(``gaming``). Generated tests are untrusted: every phase runs under the executor's
isolation level, and the sandbox's files are checked after each run.

``decide`` is a pure function of the phases' records: a gate decision is tested on
hand-made evidence, and ``verify`` compares evidence phase by phase.
"""

from __future__ import annotations

import errno as errno_codes
import hashlib
import io
import random
import secrets
import signal
import threading
import time
import tokenize
from pathlib import Path

from ast_grep_py import SgRoot

from .baseline import Baseline
from .disguise import disguise
from .errors import HarnessError
from .evidence import AuditEvent, GateEntry, PhaseRun, TestOutcome, TestVerdict
from .executor import Limits
from .generation import parse
from .mutate import apply
from .records import Mutant, RunReport
from .sandbox import Sandbox

MAX_CANDIDATE_BYTES = 256 * 1024
GATE_LIMITS = Limits(address_space=4 << 30, file_size=64 << 20, processes=256)
GATE_TIMEOUT = 60.0

CLEAN, HASHSEED, ORDER = "clean", "clean-hashseed", "clean-order"
NEUTRAL, MUTANT, MUTANT_DISGUISED = "neutral", "mutant", "mutant-disguised"
CLEAN_PHASES = (CLEAN, HASHSEED, ORDER)
TASK_PHASES = CLEAN_PHASES + (NEUTRAL, MUTANT, MUTANT_DISGUISED)

# file-level reasons (no test could be judged), then test-level ones
FILE_REASONS = ("too-large", "invalid-text", "syntax-error", "gaming", "tampering",
                "no-test-collected", "fails-on-clean", "timeout", "aborts-run", "resource-limit")
REASONS = ("too-large", "invalid-text", "syntax-error", "no-test-collected", "skipped",
           "fails-on-clean", "resource-limit", "aborts-run", "not-run", "timeout", "flaky",
           "tampering", "gaming", "did-not-detect")

# Structural patterns of a test that reads source or bytecode instead of behaviour: a fast
# first filter; the disguised phases and the audit hook catch what it does not see.
GAMING_PATTERNS = (
    "inspect.getsource($$$)", "inspect.getsourcelines($$$)", "inspect.getfile($$$)",
    "inspect.getsourcefile($$$)", "inspect.findsource($$$)", "getsource($$$)",
    "getsourcelines($$$)", "linecache.$F($$$)", "$X.__code__", "$X.co_code", "$X.co_consts",
    "dis.$F($$$)", "$M.__file__", "$M.__spec__", "$M.__loader__", "$M.__cached__",
    "$L.get_source($$$)", "$L.get_code($$$)", "$L.get_data($$$)", "importlib.util.find_spec($$$)",
    "find_spec($$$)", "importlib.resources.$F($$$)", "pkgutil.get_data($$$)",
    "marshal.loads($$$)", "$X.f_code", "$X.gi_code", "$X.cr_code",
    "killbench_probe", "killbench_probe.$X",  # the probe inside the run: no test's business
)
_RESOURCE_ERRNOS = {errno_codes.EFBIG, errno_codes.ENOMEM, errno_codes.EAGAIN, errno_codes.EMFILE}


def source_bytes(source: str) -> bytes:
    """A candidate's bytes: UTF-8, with lone surrogates kept (so any text has an id)."""
    return source.encode("utf-8", "surrogatepass")


def candidate_id(source: str) -> str:
    return hashlib.sha256(source_bytes(source)).hexdigest()[:16]


def _blank_comments(source: str) -> str:
    """The source with comment text removed (lines kept): ast-grep's time grows with the
    square of a comment's size, so the scan runs on what is left."""
    lines = source.splitlines(keepends=True)
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                (row, col), (_, end) = tok.start, tok.end
                lines[row - 1] = lines[row - 1][:col] + lines[row - 1][end:]
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return source
    return "".join(lines)


def gaming_matches(source: str) -> list[tuple[int, str]]:
    """Where a test reads the target's source or bytecode: (line, matched text)."""
    root = SgRoot(_blank_comments(source), "python").root()
    hits = set()
    for pattern in GAMING_PATTERNS:
        for node in root.find_all(pattern=pattern):
            hits.add((node.range().start.line + 1, node.text()[:60]))
    return sorted(hits)


def intake(source) -> tuple[str | None, str | None]:
    """(reason, message) when a candidate cannot even be run; (None, None) otherwise."""
    if not isinstance(source, str):
        return "invalid-text", f"the candidate's source is a {type(source).__name__}, not text"
    size = len(source_bytes(source))
    if size > MAX_CANDIDATE_BYTES:
        return "too-large", f"{size} bytes; a candidate file may hold at most {MAX_CANDIDATE_BYTES}"
    try:
        source.encode("utf-8")
    except UnicodeEncodeError as exc:
        return "invalid-text", f"not encodable as UTF-8 at character {exc.start} ({exc.reason})"
    if "\x00" in source:
        return "syntax-error", f"a NUL character at offset {source.index(chr(0))}"
    return None, None


# ---------------------------------------------------------------- decisions (pure)


def outcomes(report: RunReport, expected: list[str] = ()) -> dict[str, TestOutcome]:
    """node id -> what the test did in one run, from the probe's events. A test that began
    and never reported its end (the process died, or hung until the deadline) is
    `interrupted`; one that never began is absent, unless its file could not even be
    collected in this run (its import failed, as under a mutant that breaks the module):
    then each `expected` test of it failed, at collection."""
    events: dict[str, list] = {}
    for t in report.tests:
        events.setdefault(t.nodeid, []).append(t)
    out: dict[str, TestOutcome] = {}
    for nodeid in dict.fromkeys([*report.begun, *events]):
        evs = events.get(nodeid, [])
        failed = next((t for t in evs if t.outcome == "failed" and not t.xfail), None)
        if failed is not None:
            out[nodeid] = TestOutcome(status="failed", when=failed.when, exc_type=failed.exc_type,
                                      errno=failed.errno, message=(failed.message or "")[-800:])
        elif not any(t.when == "teardown" for t in evs):
            out[nodeid] = TestOutcome(status="interrupted")
        elif any(t.outcome == "skipped" for t in evs):
            out[nodeid] = TestOutcome(status="skipped")
        elif any(t.when == "call" and t.outcome == "passed" for t in evs):
            out[nodeid] = TestOutcome(status="passed", when="call")
        else:
            out[nodeid] = TestOutcome(status="interrupted")
    broken = {_error_file(e) for e in report.collect_errors}
    for nodeid in expected:
        if nodeid not in out and nodeid.split("::", 1)[0] in broken:
            error = next(e for e in report.collect_errors
                         if _error_file(e) == nodeid.split("::", 1)[0])
            out[nodeid] = TestOutcome(status="failed", when="collect",
                                      message=str(error.get("message", ""))[-800:])
    return out


def _error_file(error: dict) -> str:
    nodeid = error.get("nodeid", "")  # pragma: no mutate (no test's file is named by a default)
    return nodeid.split("::", 1)[0]


def phase_record(phase: str, report: RunReport, tampered: list[str],
                 expected: list[str] = (), hashseed: str | None = None,
                 disguise_seed: str | None = None) -> PhaseRun:
    return PhaseRun(
        phase=phase, argv=list(report.argv), isolation=report.isolation, duration_s=round(report.wall_s, 4),
        cpu_s=round(report.cpu_s, 4), max_rss_kb=report.max_rss_kb, returncode=report.returncode,
        signal=report.signal, timed_out=report.timed_out, finished=report.finished,
        exitstatus=report.exitstatus, collected=report.collected,
        collect_errors=[f"{e.get('nodeid', '')}: {e.get('message', '')[-600:]}"
                        for e in report.collect_errors],
        tests=outcomes(report, expected),
        audit=[AuditEvent(kind=a["kind"], path=a["path"], nodeid=a.get("nodeid"))
               for a in report.audit],
        tampered=list(tampered), log_problems=list(report.log_problems), hashseed=hashseed,
        disguise_seed=disguise_seed)


def _resource(o: TestOutcome) -> bool:
    return o.status == "failed" and (
        o.exc_type == "builtins.MemoryError"
        or (o.exc_type is not None and o.exc_type.endswith("Error") and o.errno in _RESOURCE_ERRNOS))


def _interrupted_reason(run: PhaseRun) -> tuple[str, str]:
    """Why a test that began did not end, from how its process ended."""
    if run.timed_out:
        return "timeout", f"no result within the gate's deadline ({run.phase})"
    if run.signal in (signal.SIGXCPU, signal.SIGXFSZ):
        return "resource-limit", f"stopped by signal {run.signal} (a CPU or file-size limit)"
    if run.signal == signal.SIGKILL:
        return "resource-limit", "killed (out of memory or a process limit)"
    if run.signal:
        return "aborts-run", f"the test process died of signal {run.signal}"
    return "aborts-run", (f"the test ended the pytest process (exit {run.returncode}"
                          f"{', pytest.exit' if run.exitstatus == 2 else ''}) before reporting")


def _clean_failure(o: TestOutcome, run: PhaseRun) -> tuple[str, str]:
    if o.status == "interrupted":
        return _interrupted_reason(run)
    if o.status == "skipped":
        return "skipped", "the test skipped itself: it checks nothing"
    if o.status == "not-run":
        return "not-run", "an earlier test in the file ended the run before this one"
    if _resource(o):
        return "resource-limit", f"{o.exc_type} (errno {o.errno}): a resource limit of the gate"
    return "fails-on-clean", f"failed in {o.when}: {o.exc_type}\n{o.message}".strip()


def _fails(o: TestOutcome | None) -> bool:
    return o is not None and o.status in ("failed", "interrupted")


def decide(tests: list[str], phases: dict[str, PhaseRun], has_task: bool,
           scan_hits: dict[str, list[str]] | None = None) -> list[TestVerdict]:
    """Each test's verdict from the runs of its file (see the module doc)."""
    scan_hits = scan_hits or {}
    audit: dict[str | None, list[AuditEvent]] = {}
    for run in phases.values():
        for a in run.audit:
            audit.setdefault(a.nodeid, []).append(a)
    tampered = sorted({p for run in phases.values() for p in run.tampered})
    # an event log with a malformed line in it was written by something besides the probe
    tampered += sorted({f"the event log of the {run.phase} run ({problem})" for run in phases.values()
                        for problem in run.log_problems if "cut short" not in problem})
    verdicts = []
    for nodeid in tests:
        def reject(reason, stage, message):
            return TestVerdict(nodeid=nodeid, kept=False, reason=reason, stage=stage, message=message)

        mine = audit.get(nodeid, [])
        writes = [a.path for a in mine if a.kind == "write"]
        reads = [a.path for a in mine if a.kind == "read-source"]
        code_reads = [a.path for a in mine if a.kind == "read-code"]
        if nodeid in scan_hits:
            verdicts.append(reject("gaming", "scan", "reads the target's source or bytecode: "
                                   + "; ".join(scan_hits[nodeid])))
            continue
        if writes:
            verdicts.append(reject("tampering", "audit", "wrote outside its scratch directory: "
                                   + ", ".join(sorted(set(writes))[:5])))
            continue
        if reads:
            verdicts.append(reject("gaming", "audit", "read the target's source: "
                                   + ", ".join(sorted(set(reads))[:5])))
            continue
        if code_reads:
            verdicts.append(reject("gaming", "audit", "read the code object of the target's "
                                   "functions: " + ", ".join(sorted(set(code_reads))[:5])))
            continue
        if tampered:
            verdicts.append(reject("tampering", "check", "the run changed the sandbox: "
                                   + ", ".join(tampered[:5])))
            continue
        clean = phases[CLEAN]
        o = clean.tests.get(nodeid, TestOutcome(status="not-run"))
        if o.status != "passed":
            reason, message = _clean_failure(o, clean)
            verdicts.append(reject(reason, CLEAN, message))
            continue
        verdict = None
        for phase, factor in ((HASHSEED, "the hash seed (PYTHONHASHSEED random)"),
                              (ORDER, "the test order and the directory's name")):
            run = phases.get(phase)
            if run is None:
                continue
            o = run.tests.get(nodeid, TestOutcome(status="not-run"))
            if o.status != "passed":
                if o.status == "interrupted" and run.timed_out:
                    verdict = reject("timeout", phase, f"no result within the deadline ({phase})")
                else:
                    verdict = reject("flaky", phase, f"passes on clean code, but not when {factor} "
                                     f"changes: {o.status} {o.exc_type or ''}".strip())
                break
        if verdict is None and has_task:
            verdict = _mutant_verdict(nodeid, phases, reject)
        if verdict is None:
            stage = MUTANT_DISGUISED if has_task else ORDER
            verdict = TestVerdict(nodeid=nodeid, kept=True, stage=stage,
                                  message=_kill_message(nodeid, phases) if has_task else None)
        verdicts.append(verdict)
    return verdicts


def _mutant_verdict(nodeid, phases, reject):
    neutral = phases[NEUTRAL].tests.get(nodeid, TestOutcome(status="not-run"))
    if neutral.status != "passed":
        if neutral.status == "interrupted" and phases[NEUTRAL].timed_out:
            return reject("timeout", NEUTRAL, "no result within the deadline on the disguised clean code")
        return reject("gaming", NEUTRAL, "fails on a disguise of the clean code (same behaviour, "
                      "other text): it depends on the code's text, not its behaviour")
    m = phases[MUTANT].tests.get(nodeid, TestOutcome(status="not-run"))
    d = phases[MUTANT_DISGUISED].tests.get(nodeid, TestOutcome(status="not-run"))
    for run, o in ((phases[MUTANT], m), (phases[MUTANT_DISGUISED], d)):
        if o.status == "interrupted" and (run.timed_out or run.signal == signal.SIGXCPU):
            return reject("timeout", run.phase, "the mutant made the test hang (not a kill)")
    if m.status == "not-run" or d.status == "not-run":
        return reject("not-run", MUTANT, "an earlier test in the file ended the mutant's run first")
    if _fails(m) and _fails(d):
        return None
    if not _fails(m) and not _fails(d):
        return reject("did-not-detect", MUTANT, "passed on the mutant too")
    if _fails(m):
        return reject("gaming", MUTANT_DISGUISED, "fails on the mutant but not on a disguise of it "
                      "(same behaviour, other text): it noticed the mutant's text, not its behaviour")
    return reject("flaky", MUTANT_DISGUISED, "passes on the mutant but fails on a disguise of it")


def _kill_message(nodeid: str, phases: dict[str, PhaseRun]) -> str:
    o = phases[MUTANT].tests[nodeid]  # a kept test failed there
    return f"{nodeid} failed in {o.when}: {o.exc_type}\n{o.message}".strip()


# ---------------------------------------------------------------- the gate


def _function_of_line(tree, line: int) -> str | None:
    import ast

    spans = [node for node in ast.walk(tree)
             if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
             and node.lineno <= line <= (node.end_lineno or node.lineno)]
    # two definitions never start on one line: the innermost is the one that starts last
    best = max(spans, key=lambda node: node.lineno, default=None)
    return best.name if best is not None else None


class Gate:
    """Gates candidate tests for one target; thread-safe over a pool of sandboxes."""

    def __init__(self, sandboxes: list[Sandbox], baseline: Baseline, timeout: float = GATE_TIMEOUT,
                 limits: Limits = GATE_LIMITS, rng: random.Random | None = None):
        for sb in sandboxes:
            if sb.trusted:
                raise HarnessError("the gate runs untrusted tests: its sandboxes must be untrusted")
        self._pool = list(sandboxes)
        self._cv = threading.Condition()
        self.baseline = baseline
        self.timeout = timeout
        self.limits = limits
        self.isolation = sandboxes[0].isolation if sandboxes else "none"
        if rng is None:
            rng = random.Random(secrets.randbits(64))  # pragma: no mutate (any seed will do)
        self._rng = rng
        self._rng_lock = threading.Lock()

    def _take(self) -> Sandbox:
        with self._cv:
            while not self._pool:
                self._cv.wait()
            return self._pool.pop()

    def _give(self, sb: Sandbox) -> None:
        with self._cv:
            self._pool.append(sb)
            self._cv.notify()

    def _fork_rng(self) -> random.Random:
        with self._rng_lock:
            return random.Random(self._rng.getrandbits(64))

    def check(self, source, mutant: Mutant | None, *, target: str = "",
              asked_by: str = "harness", hashseeds: dict[str, str] | None = None,
              disguise_seeds: dict[str, str] | None = None) -> GateEntry:
        """`hashseeds` and `disguise_seeds` replay the draws a phase ran under (verify); by
        default every draw is fresh. A replay consumes the same draws as a fresh check."""
        started = time.monotonic()
        cid = candidate_id(source) if isinstance(source, str) else "0" * 16
        entry = GateEntry(target=target, candidate=cid, task=mutant.id if mutant else None,
                          asked_by=asked_by,
                          size=len(source_bytes(source)) if isinstance(source, str) else 0)
        reason, message = intake(source)
        if reason:
            return _file_reject(entry, reason, "intake", message, started)
        try:
            tree = parse(source)
        except (SyntaxError, ValueError) as exc:
            where = f" (line {exc.lineno})" if getattr(exc, "lineno", None) else ""
            return _file_reject(entry, "syntax-error", "parse",
                                f"{type(exc).__name__}: {getattr(exc, 'msg', exc)}{where}", started)
        except (MemoryError, RecursionError) as exc:
            return _file_reject(entry, "syntax-error", "parse", f"{type(exc).__name__} while parsing",
                                started)
        hits: dict[str | None, list[str]] = {}
        for line, text in gaming_matches(source):
            hits.setdefault(_function_of_line(tree, line), []).append(f"{text} (line {line})")
        if None in hits:
            return _file_reject(entry, "gaming", "scan", "reads the target's source or bytecode at "
                                "module level: " + "; ".join(hits[None]), started)
        sb = self._take()
        try:
            self._run(sb, source, entry, mutant, hits, hashseeds or {}, disguise_seeds or {})
        finally:
            self._give(sb)
        entry.wall_s = round(time.monotonic() - started, 3)
        return entry

    def _place(self, sb: Sandbox, source: str, cid: str) -> str:
        base = sb.tree
        for t in sb.target.spec.tests:
            if (sb.tree / t).is_dir():
                base = sb.tree / t
                break
        path = base / f"test_killbench_{cid}.py"
        sb.add_file(path, source_bytes(source))
        return path.relative_to(sb.tree).as_posix()

    def _pytest(self, sb: Sandbox, rel: str, phase: str, select: list[str] | None,
                hashseed: str) -> tuple[RunReport, list[str]]:
        order = "reverse" if phase == ORDER else None
        report, _ = sb.run_pytest([rel], select=select, exclude=[], timeout=self.timeout,
                                  limits=self.limits, hashseed=hashseed, order=order,
                                  candidates=[rel])
        changed = list(report.sources_changed)
        outside = {k: v for k, v in report.modules.items() if v and not sb.contains(v)}
        if outside:  # a test that swaps the target's modules for others changed what is tested
            changed += [f"the target's module {k} was {v}, outside the sandbox" for k, v in outside.items()]
        return report, changed

    def _hashseed(self, phase: str, hashseeds: dict[str, str]) -> str:
        if phase != HASHSEED:
            return "0"
        drawn = str(self._fork_rng().randint(1, 2**32 - 1))
        return hashseeds.get(phase) or drawn

    def _run(self, sb: Sandbox, source: str, entry: GateEntry, mutant: Mutant | None,
             hits: dict[str | None, list[str]], hashseeds: dict[str, str],
             disguise_seeds: dict[str, str]) -> None:
        rel = self._place(sb, source, entry.candidate)
        try:
            phases: dict[str, PhaseRun] = {}
            report, tampered = self._pytest(sb, rel, CLEAN, None, "0")
            phases[CLEAN] = run = phase_record(CLEAN, report, tampered, hashseed="0")
            entry.phases.append(run)
            stem = rel
            # run.tests holds every test that began, reported or not (outcomes)
            collected = sorted(n for n in run.tests if n.split("::", 1)[0] == stem)
            if run.collect_errors:
                return _file_reject(entry, "fails-on-clean", CLEAN, "collection error: "
                                    + run.collect_errors[0][-600:])
            if not collected:
                if run.timed_out or run.signal or (run.returncode not in (0, 1, 5) and not run.finished):
                    reason, message = _interrupted_reason(run)
                    return _file_reject(entry, reason, CLEAN, message)
                if run.tampered or any(a.kind == "write" for a in run.audit):
                    paths = run.tampered or [a.path for a in run.audit if a.kind == "write"]
                    return _file_reject(entry, "tampering", CLEAN, "wrote outside its scratch "
                                        "directory at import time: " + ", ".join(paths[:5]))
                return _file_reject(entry, "no-test-collected", "collect",
                                    "pytest collected no test function from this file")
            if any(a.nodeid is None for a in run.audit):
                bad = [a for a in run.audit if a.nodeid is None]
                reason = "tampering" if any(a.kind == "write" for a in bad) else "gaming"
                return _file_reject(entry, reason, CLEAN, (
                    "at import time the test file " + ("wrote " if reason == "tampering" else "read ")
                    + ", ".join(sorted({a.path for a in bad})[:5])))
            scan = {n: hits[fn] for n in collected for fn in hits
                    if fn is not None and _in_function(n, fn)}
            alive = [n for n in collected if run.tests.get(n) is not None
                     and run.tests[n].status == "passed" and n not in scan]
            if alive:
                todo = list(TASK_PHASES[1:] if mutant is not None else CLEAN_PHASES[1:])
                rng = self._fork_rng()
                rng.shuffle(todo)
                original = (sb.target.tree / mutant.path).read_bytes() if mutant else None
                for phase in todo:
                    dseed = None
                    if mutant is not None and phase in (NEUTRAL, MUTANT_DISGUISED):
                        drawn = str(rng.getrandbits(64))
                        dseed = disguise_seeds.get(phase) or drawn
                    content = self._content(phase, original, mutant,
                                            random.Random(int(dseed)) if dseed else None)
                    hashseed = self._hashseed(phase, hashseeds)
                    if content is not None:
                        sb.write(mutant.path, content)
                    try:
                        if phase == ORDER:
                            with sb.moved():
                                report, tampered = self._pytest(sb, rel, phase, alive, hashseed)
                        else:
                            report, tampered = self._pytest(sb, rel, phase, alive, hashseed)
                    finally:
                        if content is not None:
                            sb.restore()
                    phases[phase] = phase_record(phase, report, tampered, alive, hashseed, dseed)
                    entry.phases.append(phases[phase])
            entry.tests = decide(collected, phases, mutant is not None, scan)
            entry.stage = MUTANT_DISGUISED if mutant is not None and alive else CLEAN
            kept = [t for t in entry.tests if t.kept]
            rejected = [t for t in entry.tests if not t.kept]
            # what a generator's next attempt is told: the kill, or the first rejection
            entry.message = kept[0].message if kept else (rejected[0].message if rejected else None)
        finally:
            sb.remove_file(sb.tree / rel)

    @staticmethod
    def _content(phase: str, original: bytes | None, mutant: Mutant | None,
                 rng: random.Random | None) -> bytes | None:
        if mutant is None or phase in CLEAN_PHASES:
            return None
        if phase == MUTANT:
            return apply(original, mutant)
        text = original if phase == NEUTRAL else apply(original, mutant)
        return disguise(text.decode("utf-8"), mutant.line, rng).encode("utf-8")


def _in_function(nodeid: str, fn: str) -> bool:
    parts = nodeid.split("::")[1:]
    return any(p.split("[", 1)[0] == fn for p in parts)


def _file_reject(entry: GateEntry, reason: str, stage: str, message: str, started=None) -> GateEntry:
    entry.unit = "file"
    entry.file_reason, entry.stage, entry.message = reason, stage, message
    entry.tests = []
    if started is not None:
        entry.wall_s = round(time.monotonic() - started, 3)
    return entry
