"""The warm runner of a sandbox: a server that collected the target's suite once, and runs
each mutant's covering tests in a forked child with the mutant applied in place.

What it saves, per mutant: the interpreter's start, importing pytest and the suite's
dependencies, and collecting the test files (the plain path does all of it for every
mutant). What it must not change: the verdict. So a mutant it cannot apply exactly (one
evaluated at import or definition time, a lambda, a name defined twice) runs on the plain
path, and every `mutate` run and `killbench doctor` run a sample of mutants both ways and
fail loudly on any difference (``check_sample``).

The forked runner (``ForkRunner``) serves the runs the warm one cannot: the whole suite,
for a mutant evaluated at import or definition time or a clean rerun, and a selection of a
suite whose plain runs collect the suite's own arguments (``--pyargs``). Its server stops
before collection, and each child collects and runs from there as a fresh process would,
importing the mutant from disk; checked against the plain path the same way.

The server runs the target's own suite: it is for trusted code only (``mutate``,
``manifests build``, ``doctor``), never for generated tests.
"""

from __future__ import annotations

import ast
import logging
import os
import shutil
import types
from collections import Counter
from pathlib import Path

from .errors import HarnessError
from .mutate import _utf8_source
from .operators import Source
from .executor import ProcessResult, Server
from .records import Mutant, RunReport

log = logging.getLogger("killbench")

CANNOT_APPLY = 99
START_TIMEOUT = 600.0
# How a mutant run of the target's suite formats a failure, on every path (plain, warm, forked):
# one line. A verdict reads the exit code and the probe's events, never the traceback, and
# pytest's long format reads and parses the source of every frame: half the CPU of a warm
# kill on cachetools (a child's tests 42 -> 8 ms median).
TRACEBACK = "--tb=line"


def _qualnames(code, out: Counter) -> Counter:
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            out[const.co_qualname] += 1
            _qualnames(const, out)
    return out


def _layout(clean: bytes) -> tuple[list[tuple[int, int]], Counter] | None:
    """Of a clean source file: its top-level defs and classes as (first byte, byte after the
    end), decorators included; and how many code objects bear each qualified name. None when
    it cannot be compiled, declares a coding other than UTF-8 (the child reads what it keeps
    as UTF-8), starts with a byte-order mark (columns of its first line do not count it), or
    ends a line with a lone carriage return (a line to Python, not to the child's blanking)."""
    if not _utf8_source(clean):
        return None
    if clean.startswith(b"\xef\xbb\xbf") or clean.count(b"\r") != clean.count(b"\r\n"):
        return None
    try:
        src = Source(clean.decode("utf-8"))
        tree = ast.parse(clean)
        code = compile(tree, "<clean>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):  # UnicodeDecodeError is a ValueError
        return None
    parts = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            parts.append((src.offset(first, 0), src.offset(node.end_lineno, node.end_col_offset)))
    return parts, _qualnames(code, Counter())


def segment_of(layout, mutant: Mutant) -> dict | None:
    """What of the mutated file the warm child may leave out for `mutant` (``mutated_code``
    in the child): every top-level def and class but the one that holds the whole edit, when
    every function the child swaps bears a name no other code object in the file bears
    (else it compiles the whole file, and refuses such a mutant)."""
    if layout is None or not mutant.function:
        return None
    parts, names = layout
    pieces = mutant.function.split(".<locals>.")
    if any(names[".<locals>.".join(pieces[:i])] != 1 for i in range(1, len(pieces) + 1)):
        return None
    holder = [p for p in parts if p[0] <= mutant.start and mutant.end <= p[1]]
    if len(holder) != 1:
        return None
    grown = len(mutant.replacement.encode("utf-8")) - (mutant.end - mutant.start)
    blank = [[a, b] if b <= mutant.start else [a + grown, b + grown]
             for a, b in parts if (a, b) != holder[0]]
    return {"blank": blank}


class WarmRunner:
    """One server per sandbox, started on first use and again after a sandbox rebuild."""

    kind = "warm"
    plugin = "killbench_warm"

    def server_args(self) -> list[str]:
        return [TRACEBACK, *self.sandbox.target.spec.tests]

    def __init__(self, sandbox, baseline):
        self.sandbox = sandbox
        self.baseline = baseline
        self.server: Server | None = None
        self.broken: str | None = None  # why this sandbox runs everything cold
        self._rebuilds = None
        self._jobs = 0
        self.runs = 0
        self.fallbacks = 0
        self.order: list[str] | None = None  # the collected suite in run order (warm runner)
        self._layouts: dict[str, object] = {}  # source path -> _layout of its clean text
        self.saved_cpu = 0.0  # CPU the server spent before forking that a plain run spends

    def _start(self) -> None:
        sb = self.sandbox
        root = sb.root / self.kind
        if root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True)
        (root / "home").mkdir()
        (root / "tmp").mkdir()
        spawn = sb.pytest_spawn(root, ["-p", self.plugin, *self.server_args()], select=None,
                                exclude=self.baseline.excluded, timeout=None)
        spawn.stdout, spawn.stderr = root / "server.out", root / "server.err"
        # The server imports the target while it collects: from clean sources, or every
        # later mutant of that file would run with the first one's edit still live.
        with sb.clean():
            self.server = Server(spawn)
            ready = self.server.read(START_TIMEOUT)
        if not ready or not ready.get("ready"):
            tail = (root / "server.err").read_text(errors="replace")[-800:]
            self.server.stop()
            self.server = None
            self.broken = f"the {self.kind} runner did not start ({ready}): {tail}"
            log.warning("%s: %s; running every mutant the plain way", sb.target.name, self.broken)
            return
        self._rebuilds = sb.rebuilds
        self.order = ready.get("order")
        self.saved_cpu = float(ready.get("saved_cpu") or 0.0)

    def close(self) -> None:
        self.order = None
        if self.server is not None:
            self.server.stop()
            self.server = None

    def run(self, mutant: Mutant | None, tests: list[str] | None, timeout: float,
            cpu_seconds: float | None = None) -> RunReport | None:
        """The covering tests (None: the whole suite) against `mutant` (already written into
        the sandbox), or with no mutant against clean code; None when it must run the plain
        way. ``cpu_seconds``: the CPU budget of the child's main thread, as on the plain
        path. The warm runner runs the whole suite as the selection of every test it
        collected, in their order (``order``)."""
        if self.broken:
            return None
        sb = self.sandbox
        if self.server is None or not self.server.alive() or self._rebuilds != sb.rebuilds:
            self.close()
            self._start()
            if self.server is None or not self._trusted_start(timeout):
                return None
        if tests is None and self.kind == "warm":
            if not self.order:
                return None
            tests = self.order
        return self._job(mutant, tests, timeout, cpu_seconds)

    def _trusted_start(self, timeout: float) -> bool:
        """Whether a server just started may judge (the forked runner checks itself)."""
        return True

    def _job(self, mutant: Mutant | None, tests: list[str] | None, timeout: float,
             cpu_seconds: float | None = None) -> RunReport | None:
        sb = self.sandbox
        self._jobs += 1
        job_dir = sb.root / self.kind / "job"
        if job_dir.exists():
            shutil.rmtree(job_dir)
        job_dir.mkdir(parents=True)
        job = {"id": self._jobs, "report": str(job_dir / "report.jsonl"), "select": None if tests is None else list(tests),
               "path": None, "function": None, "timeout": timeout, "cpu": cpu_seconds,
               "env": {"HOME": str(job_dir / "home"), "TMPDIR": str(job_dir / "tmp")}}
        if mutant is not None:
            copies = sb.copies(mutant.path)
            job.update({"path": str(copies[-1]),  # where the suite imports it from
                        "copies": [str(c) for c in copies],
                        "function": mutant.function, "start": mutant.start,
                        # where the replacement lies in the mutated file the child reads
                        "end": mutant.start + len(mutant.replacement.encode("utf-8")),
                        # the forked runner's children never swap code in place
                        "segment": segment_of(self._layout(mutant.path), mutant)
                        if self.kind == "warm" else None})
        if not self.server.send(job):
            self.close()
            return None
        answer = self.server.read(timeout + 30.0)
        if answer is None or answer.get("id") != job["id"]:
            self.close()  # a server that does not answer is gone: the plain path judges
            return None
        code = os.waitstatus_to_exitcode(answer["status"])
        if code == CANNOT_APPLY:
            self.fallbacks += 1
            return None
        self.runs += 1
        proc = ProcessResult(returncode=None if answer["timed_out"] else code,
                             signal=-code if code < 0 and not answer["timed_out"] else None,
                             timed_out=answer["timed_out"], wall_s=answer["wall_s"],
                             cpu_s=answer["cpu_s"], max_rss_kb=answer["max_rss_kb"],
                             isolation="none", argv=[f"({self.kind})", *(tests or [])],
                             cpu_exceeded=bool(answer.get("cpu_exceeded")))
        report, _ = sb.after_run(job_dir, proc, keep=True)
        report.runner = self.kind
        return report

    def _layout(self, path: str):
        if path not in self._layouts:
            self._layouts[path] = _layout((self.sandbox.target.tree / path).read_bytes())
        return self._layouts[path]


class ForkRunner(WarmRunner):
    """Runs that collect the suite's own arguments (the whole suite for mutants evaluated at
    import or definition time and clean reruns; a selection of a ``--pyargs`` suite the
    warm runner cannot take) in a child forked from a session that stopped before
    collection (``killbench_fork``): the
    child imports the tests and the target from disk and runs as the plain path would,
    without paying for the interpreter's start, pytest's import and its configuration.
    Checked against the plain path as the warm runner is."""

    kind = "fork"
    plugin = "killbench_fork"

    def server_args(self) -> list[str]:
        return ["-x", TRACEBACK, *self.sandbox.target.spec.tests]  # as the plain path's full suite

    def _job(self, mutant: Mutant | None, tests: list[str] | None, timeout: float,
             cpu_seconds: float | None = None) -> RunReport | None:
        """A child's CPU budget is the plain run's less what the server spent before its
        first fork (start-up, configuration, rewriting the suite's asserts), which the
        child does not spend again: its collection and tests get the plain run's share. At
        most the baseline's start-up and collection time is taken off (a server that
        started on a cold cache spent more than a plain run does)."""
        if cpu_seconds is not None:
            cpu_seconds = cpu_seconds - min(self.saved_cpu, self.baseline.overhead_s)
        return super()._job(mutant, tests, timeout, cpu_seconds)

    def _trusted_start(self, timeout: float) -> bool:
        """The whole suite must pass on clean code in a child of this server before any
        child's failure counts as a kill: every child starts from the server's one state, so
        a test that fails only forked (it depends on how objects lie in memory, say) shows
        here, and the plain path judges instead. Kills of whole-suite runs are otherwise
        confirmed only by the baseline, which ran the plain way."""
        with self.sandbox.clean():
            report = self._job(None, None, timeout)
        ok = report is not None and report.returncode == 0 and report.finished \
            and not report.timed_out and bool(report.ran_tests())
        if not ok:
            failed = [t.nodeid for t in report.failures()][:3] if report is not None else []
            self.broken = ("the whole suite did not pass on clean code in a forked child "
                           f"(exit {None if report is None else report.returncode}, failed {failed})")
            log.warning("%s: %s; running whole-suite runs the plain way", self.sandbox.target.name,
                        self.broken)
            self.close()
        return ok


def check_sample(name: str, pairs: list[tuple[Mutant, str, str]]) -> None:
    """Warm (or forked) and plain verdicts of a sample of mutants must be the same: raise
    otherwise."""
    diff = [f"{m.id} {m.path}:{m.line} {m.operator}: warm or forked {a}, plain {b}" for m, a, b in pairs if a != b]
    if diff:
        raise HarnessError(f"{name}: the warm or forked runner and the plain one disagree on {len(diff)} of "
                           f"{len(pairs)} sampled mutants (a killbench bug; rerun with "
                           f"--no-warm to use the plain path only): " + "; ".join(diff[:5]))
