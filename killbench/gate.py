"""The gate: keep a written test only if it passes on the clean target (several times,
in fresh processes) and fails on the mutant it targets. Every rejection has a reason.

Generated tests are untrusted code. Each run happens in a worker sandbox, in its own
process group, with resource limits and (where the platform allows) no network; the
target's files are hashed after every run. A test that reads the target's source or
bytecode to spot the mutation, instead of testing behaviour, is gaming the gate: it
is rejected by a structural scan (ast-grep) and by a dynamic check (the test must
also pass on a behaviour-neutral edit of the code it targets).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ast_grep_py import SgRoot

from .baseline import Baseline
from .generation import parse
from .errors import HarnessError
from .mutate import apply
from .records import Mutant, RunReport
from .sandbox import Limits, Sandbox

CLEAN_RUNS = 3
REASONS = ("syntax-error", "no-test-collected", "fails-on-clean", "flaky", "did-not-detect",
           "timeout", "gaming", "modified-target")

# Structural patterns of a test that reads source or bytecode instead of behaviour.
GAMING_PATTERNS = (
    "inspect.getsource($$$)", "inspect.getsourcelines($$$)", "inspect.getfile($$$)",
    "inspect.getsourcefile($$$)", "inspect.findsource($$$)", "getsource($$$)",
    "getsourcelines($$$)", "linecache.$F($$$)", "$X.__code__", "$X.co_code", "dis.$F($$$)",
    "$M.__file__", "$M.__spec__", "$M.__loader__", "$L.get_source($$$)",
    "importlib.util.find_spec($$$)", "find_spec($$$)",
)

GATE_LIMITS = Limits(address_space=4 << 30, file_size=64 << 20)
GATE_TIMEOUT = 60.0


@dataclass
class GateResult:
    """What the gate decided about one candidate test, and why."""

    candidate: str  # sha256[:16] of the test source
    task: str | None  # mutant id it targets (None: no target, e.g. one-prompt)
    kept: bool
    reason: str | None  # one of REASONS when rejected
    stage: str  # last stage reached: parse, collect, clean, neutral, mutant
    tests: list[str] = field(default_factory=list)  # node ids collected in the file
    message: str | None = None  # first failure, for the generator's next attempt
    runs: int = 0
    wall_s: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


def candidate_id(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]


def gaming_matches(source: str) -> list[str]:
    """Where a test reads the target's source or bytecode (pattern @ line)."""
    root = SgRoot(source, "python").root()
    hits = []
    for pattern in GAMING_PATTERNS:
        for node in root.find_all(pattern=pattern):
            hits.append(f"{node.text()[:60]} (line {node.range().start.line + 1})")
    return sorted(set(hits))


def neutral_variant(original: bytes, mutant: Mutant) -> bytes:
    """The clean file with a comment line inserted before the mutated statement:
    behaviour is unchanged, source text and line numbers are not."""
    from .reach import StatementIndex

    text = original.decode("utf-8")
    index = StatementIndex(text)
    line = min(index.statement_line(mutant.start, mutant.end, mutant.line), mutant.line)
    lines = text.splitlines(keepends=True)
    target = lines[line - 1]
    indent = target[: len(target) - len(target.lstrip())]
    lines.insert(line - 1, f"{indent}# killbench: neutral edit\n")
    return "".join(lines).encode("utf-8")


_LOOPBACK_UP = 'ip link set lo up 2>/dev/null; exec "$@"'


def _network_prefix() -> list[str]:
    """`unshare --net` when this machine allows it: generated tests get no network, but
    keep a working loopback (some suites need it: boltons' socket tests)."""
    exe = shutil.which("unshare")
    if not exe:
        return []
    prefix = [exe, "--net", "--", "sh", "-c", _LOOPBACK_UP, "sh"]
    try:
        ok = subprocess.run(prefix + ["true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return prefix if ok else []


class Gate:
    """Gates candidate tests for one target; thread-safe over a pool of sandboxes."""

    def __init__(self, sandboxes: list[Sandbox], baseline: Baseline, timeout: float = 60.0,
                 isolate_network: bool = True):
        self._pool = list(sandboxes)
        self._cv = threading.Condition()
        self.baseline = baseline
        self.timeout = timeout
        self.prefix = _network_prefix() if isolate_network else []
        self.calls = 0

    def _take(self) -> Sandbox:
        with self._cv:
            while not self._pool:
                self._cv.wait()
            return self._pool.pop()

    def _give(self, sb: Sandbox) -> None:
        with self._cv:
            self._pool.append(sb)
            self._cv.notify()

    def check(self, source: str, mutant: Mutant | None) -> GateResult:
        with self._cv:
            self.calls += 1
        cid = candidate_id(source)
        task = mutant.id if mutant else None
        try:
            parse(source)
        except SyntaxError as exc:
            return GateResult(cid, task, False, "syntax-error", "parse",
                              message=f"SyntaxError: {exc.msg} (line {exc.lineno})")
        hits = gaming_matches(source)
        if hits:
            return GateResult(cid, task, False, "gaming", "parse",
                              message="reads the target's source or bytecode: " + "; ".join(hits))
        sb = self._take()
        try:
            return self._run_gate(sb, source, cid, mutant)
        finally:
            self._give(sb)

    def _place(self, sb: Sandbox, source: str, cid: str) -> Path:
        spec = sb.target.spec
        base = sb.tree
        for t in spec.tests:
            d = sb.tree / t
            if d.is_dir():
                base = d
                break
        path = base / f"test_killbench_{cid}.py"
        path.write_text(source, encoding="utf-8")
        return path

    def _pytest(self, sb: Sandbox, path: Path) -> RunReport:
        report, _ = sb.run_pytest([str(path.relative_to(sb.tree))], select=None, exclude=[],
                                  timeout=self.timeout, limits=GATE_LIMITS, prefix=self.prefix)
        outside = {k: v for k, v in report.modules.items() if v and not sb.contains(v)}
        if outside:
            raise HarnessError(f"a gated test imported the target from outside the sandbox: {outside}")
        return report

    def _pytest_with(self, sb: Sandbox, path: Path, source_path: str, content: bytes,
                     res: GateResult) -> RunReport:
        """One run with `content` in place of a target file, restored afterwards."""
        sb.write(source_path, content)
        try:
            rep = self._pytest(sb, path)
        finally:
            sb.restore()
        res.runs += 1
        res.wall_s += rep.wall_s
        return rep

    def _run_gate(self, sb: Sandbox, source: str, cid: str, mutant: Mutant | None) -> GateResult:
        path = self._place(sb, source, cid)
        res = GateResult(cid, mutant.id if mutant else None, False, None, "collect")
        try:
            outcomes = []
            for _ in range(CLEAN_RUNS):
                rep = self._pytest(sb, path)
                res.runs += 1
                res.wall_s += rep.wall_s
                if rep.sources_changed:
                    return _reject(res, "modified-target", "clean",
                                   f"the test changed the target's files: {rep.sources_changed}")
                if rep.timed_out:
                    return _reject(res, "timeout", "clean", f"no result within {self.timeout:.0f} s")
                if rep.collect_errors:
                    return _reject(res, "fails-on-clean", "collect",
                                   "collection error: " + rep.collect_errors[0]["message"][-600:])
                ran = rep.ran_tests()
                if not ran:
                    return _reject(res, "no-test-collected", "collect",
                                   "pytest collected no test function from this file")
                res.tests = ran
                outcomes.append(rep.returncode == 0 and rep.finished)
                if not outcomes[-1] and len(outcomes) == 1:
                    return _reject(res, "fails-on-clean", "clean", _failure_message(rep))
            if not all(outcomes):
                return _reject(res, "flaky", "clean",
                               f"passed {sum(outcomes)} of {CLEAN_RUNS} clean runs")
            if mutant is None:
                res.kept, res.stage = True, "clean"
                return res
            original = (sb.target.tree / mutant.path).read_bytes()
            rep = self._pytest_with(sb, path, mutant.path, neutral_variant(original, mutant), res)
            if not (rep.returncode == 0 and rep.finished):
                return _reject(res, "gaming", "neutral",
                               "fails on a behaviour-neutral edit (a comment line) of the target: "
                               "it reads source text, not behaviour")
            rep = self._pytest_with(sb, path, mutant.path, apply(original, mutant), res)
            res.stage = "mutant"
            if rep.timed_out:
                return _reject(res, "timeout", "mutant", "the mutant made the test hang (not a kill)")
            if rep.returncode == 0 and rep.finished:
                return _reject(res, "did-not-detect", "mutant", "passed on the mutant too")
            res.kept = True
            res.message = _failure_message(rep)
            return res
        finally:
            path.unlink(missing_ok=True)


def _reject(res: GateResult, reason: str, stage: str, message: str) -> GateResult:
    res.kept, res.reason, res.stage, res.message = False, reason, stage, message
    return res


def _failure_message(rep: RunReport) -> str:
    for t in rep.tests:
        if t.outcome == "failed":
            return f"{t.nodeid} failed in {t.when}: {t.exc_type}\n{t.message}".strip()
    if rep.collect_errors:
        return "collection error: " + rep.collect_errors[0]["message"][-600:]
    return f"pytest exit {rep.returncode}: {rep.stderr_tail[-600:]}"
