"""A generator's own tools, run with the target importable (`ctx.workspace()`).

Some generators run a program of their own against the target: a search-based tool
that imports the module under test (Pynguin), a tracer, a fuzzer. Such a program runs
code the run has not vetted, so it gets what a generated test gets: a private copy of
the clean target, the run's isolation level (under bwrap: no network, the copy and every
environment read-only, one writable output directory), resource limits, a deadline no
later than the generation's own, and a check afterwards that it changed nothing it was
not given. What it writes is in `Execution.out`; a test file it wrote only counts once it
is yielded and gated like any other.

Import order inside the command: the target's package first (the sandbox copy), then
the command's own environment (so that a tool keeps the pytest it pins), then the
target's environment (its dependencies), appended by a `sitecustomize` module placed
first on the path.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from . import executor
from .executor import Limits, Policy, Spawn
from .errors import UserError
from .models import BudgetExhausted
from .sandbox import Sandbox
from .targets import PreparedTarget

TAIL = 64 << 10
BOOT = '''"""killbench: the target's environment after the command's own (killbench.execution)."""
import os
import sys

for _p in os.environ.get("KILLBENCH_DEPENDENCY_PATHS", "").split(os.pathsep):
    if _p and _p not in sys.path:
        sys.path.append(_p)
'''


@dataclass(frozen=True)
class Execution:
    """How one command of a generator's ended (from its exit status and the deadline)."""

    argv: list[str]
    returncode: int | None  # None when it was killed at its deadline
    timed_out: bool
    wall_s: float
    cpu_s: float
    stdout: str  # the last 64 KiB
    stderr: str
    out: Path  # the directory it ran in and could write: what it wrote is here
    tampered: list[str] = field(default_factory=list)  # what it changed in the target's copy

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


class Workspace:
    """A clean copy of one target in which a generator runs commands of its own.

    One per target and generation; each `run` starts from the clean copy (a command that
    changed it is reported in `Execution.tampered`, and the copy is rebuilt) and gets a
    fresh output directory."""

    def __init__(self, target: PreparedTarget, root: Path, *, isolation: str,
                 seconds_left: Callable[[], float | None] = lambda: None,
                 spent: Callable[[], BaseException] | None = None, hashseed: str = "0"):
        self.target = target
        self._spent = spent or (lambda: BudgetExhausted(
            "wall-time budget spent: no time left to run a command", limit=0, spent=0))
        self.isolation = isolation
        self._seconds_left = seconds_left
        self._hashseed = hashseed
        if root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True)
        os.chmod(root, 0o755)
        self._root = root
        self._sandbox = Sandbox(target, root / "copy", trusted=False, isolation=isolation)
        self._boot = root / "boot"
        self._boot.mkdir()
        (self._boot / "sitecustomize.py").write_text(BOOT)
        os.chmod(self._boot, 0o755)
        self.runs = 0

    @property
    def import_paths(self) -> list[Path]:
        """Where the target's package is importable inside the copy (on PYTHONPATH already):
        the directory to give a tool that asks for a project path."""
        return [Path(p) for p in self._sandbox.python_path()]

    @property
    def dependency_paths(self) -> list[Path]:
        """The target environment's site-packages: its dependencies and test requirements."""
        return sorted(self.target.env.root.glob("lib/python*/site-packages"))

    @property
    def python(self) -> Path:
        """The interpreter of the target's environment."""
        return Path(self.target.env.python)

    def run(self, argv: Sequence[str | os.PathLike], *, timeout: float,
            env: Mapping[str, str] | None = None, readable: Sequence[Path] = (),
            memory_bytes: int = 8 << 30) -> Execution:
        """Run `argv` in a fresh output directory (its working directory) with the target
        importable. `timeout` is cut to the wall time left in the generation; `readable`
        names extra paths the command may read under bwrap (its own environment and the
        target's are readable already)."""
        argv = [os.fspath(a) for a in argv]
        if not argv:
            raise UserError("ctx.workspace().run: an empty command")
        if not isinstance(timeout, (int, float)) or timeout <= 0:
            raise UserError(f"ctx.workspace().run: timeout must be a positive number of "
                            f"seconds, not {timeout!r}")
        left = self._seconds_left()
        if left is not None:
            if left <= 0:
                raise self._spent()
            timeout = min(float(timeout), left)
        exe = shutil.which(argv[0]) if os.sep not in argv[0] else argv[0]
        if exe is None or not os.path.exists(exe):
            raise UserError(f"ctx.workspace().run: no such program {argv[0]!r}")
        argv[0] = os.path.abspath(exe)
        self.runs += 1
        out = self._sandbox.scratch()
        private = self._sandbox.scratch()  # HOME and TMPDIR without bwrap
        scratch = Path("/tmp") if self.isolation == "bwrap" else private
        home, tmp = scratch / "home", scratch / "tmp"
        if self.isolation != "bwrap":
            home.mkdir()
            tmp.mkdir()
        tool_bin = Path(argv[0]).parent
        environment = executor.untrusted_env(
            path=[tool_bin, self.target.env.root / "bin", "/usr/bin", "/bin"], home=home,
            tmp=tmp, hashseed=self._hashseed, python_path=[self._boot, *self.import_paths])
        environment["KILLBENCH_DEPENDENCY_PATHS"] = os.pathsep.join(map(str, self.dependency_paths))
        environment.update({str(k): str(v) for k, v in (env or {}).items()})
        policy = Policy()
        logs = self._root / f"log{self.runs}"
        logs.mkdir()
        if self.isolation == "bwrap" and os.geteuid() == 0:
            os.chown(logs, executor.NOBODY, executor.NOBODY)  # the launcher writes rusage.json
        if self.isolation == "bwrap":
            prefixes = {Path(os.path.realpath(argv[0])).parent.parent, tool_bin.parent,
                        Path(os.path.realpath(self.target.env.python)).parent.parent}
            policy = Policy("bwrap", readable=(*sorted(prefixes), self.target.env.root,
                                               self._sandbox.root, self._boot,
                                               executor.LAUNCHER.parent, *map(Path, readable)),
                            writable=(out, logs), dirs=(home, tmp))
        spawn = Spawn(argv, cwd=out, env=environment, timeout=timeout,
                      stdout=logs / "stdout.txt", stderr=logs / "stderr.txt",
                      limits=Limits(address_space=memory_bytes), policy=policy,
                      launcher_python=Path(self.target.env.python),
                      rusage=logs / "rusage.json" if self.isolation == "bwrap" else None)
        started = time.monotonic()
        proc = executor.run(spawn)
        tampered = self._sandbox.tampered()
        if tampered:
            self._sandbox.rebuild()
        shutil.rmtree(private, ignore_errors=True)
        return Execution(argv=argv, returncode=proc.returncode, timed_out=proc.timed_out,
                         wall_s=round(time.monotonic() - started, 3), cpu_s=proc.cpu_s,
                         stdout=_tail(logs / "stdout.txt"), stderr=_tail(logs / "stderr.txt"),
                         out=out, tampered=tampered)


def _tail(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-TAIL:].decode("utf-8", "replace")

