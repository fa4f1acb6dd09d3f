"""Worker sandboxes: a private copy of a target per worker, and the one way to run
pytest in it.

Invariants (checked by ``killbench doctor``):

1. The code under test is the sandbox's copy. Each sandbox holds its own copy of
   the project tree and of the built wheel's content; a mutant is written into
   both, and every run reports the ``__file__`` of the target's modules so the
   caller can check it lies inside this sandbox.
2. No bytecode is shared: PYTHONDONTWRITEBYTECODE=1 and a fresh, empty
   PYTHONPYCACHEPREFIX for every run, so Python neither reads nor writes a
   ``__pycache__`` beside the sources.
3. A run ends when its deadline passes: the whole process group is killed.
4. After each run the sandbox's sources are hashed against the pristine ones;
   a run that changed them is reported and the sandbox rebuilt.
"""

from __future__ import annotations

import configparser
import ctypes
import json
import math
import os
import resource
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .locations import PROBE_DIR
from .records import RunReport, TestEvent
from .targets import PreparedTarget, _ignore, sha256_file


@dataclass(frozen=True)
class Limits:
    """Resource limits applied to every process of a run (POSIX rlimits)."""

    address_space: int | None = 8 << 30
    file_size: int = 1 << 30
    cpu_seconds: int | None = None

    def apply(self) -> None:
        _die_with_parent()
        _fixed_addresses()
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (self.file_size, self.file_size))
        if self.address_space:
            resource.setrlimit(resource.RLIMIT_AS, (self.address_space, self.address_space))
        if self.cpu_seconds:
            resource.setrlimit(resource.RLIMIT_CPU, (self.cpu_seconds, self.cpu_seconds + 5))


def _die_with_parent() -> None:
    """Linux: SIGKILL this child if killbench dies, so a killed run leaves no pytest behind."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


ADDR_NO_RANDOMIZE = 0x0040000


def _fixed_addresses() -> None:
    """Linux: exec the child without address-space randomisation. On CPython 3.11 hash(None)
    and every default object hash are addresses, so the iteration order of a set holding None
    changes from process to process, and with it pytest's parametrize ids: isodate's
    TEST_CASES set gave 96 test ids that came and went between three clean runs. Where a
    seccomp policy forbids it, the run goes on with randomisation."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        current = libc.personality(0xFFFFFFFF)
        if current != -1:
            libc.personality(current | ADDR_NO_RANDOMIZE)
    except (OSError, AttributeError):
        pass


@dataclass
class ProcessResult:
    returncode: int | None
    timed_out: bool
    wall_s: float
    stderr_tail: str


def run_process(cmd: list[str], cwd: Path, env: dict, timeout: float, limits: Limits,
                out_dir: Path, on_start=None) -> ProcessResult:
    """Run a command in its own process group; kill the whole group at the deadline."""
    if limits.cpu_seconds is None:
        # a busy loop orphaned by a killed parent still ends
        limits = Limits(limits.address_space, limits.file_size, math.ceil(timeout) + 10)
    start = time.monotonic()
    with open(out_dir / "stdout.txt", "wb") as so, open(out_dir / "stderr.txt", "wb") as se:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=so, stderr=se,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=limits.apply)
        if on_start is not None:
            on_start(proc.pid)
        timed_out = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # also reaps leftovers of a finished run
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
    wall = time.monotonic() - start
    err = (out_dir / "stderr.txt").read_bytes()[-4000:].decode("utf-8", "replace")
    out = (out_dir / "stdout.txt").read_bytes()[-4000:].decode("utf-8", "replace")
    return ProcessResult(None if timed_out else proc.returncode, timed_out, wall,
                         (out + "\n" + err).strip()[-4000:])


def read_report(path: Path, proc: ProcessResult) -> RunReport:
    """Turn the probe's event log into a RunReport; a missing or torn log stays visible."""
    rep = RunReport(returncode=proc.returncode, timed_out=proc.timed_out, wall_s=proc.wall_s,
                    stderr_tail=proc.stderr_tail)
    if not path.exists():
        return rep
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            ev = json.loads(raw)
        except json.JSONDecodeError:
            continue  # a line cut by a kill
        kind = ev.get("event")
        if kind == "start":
            rep.started = True
        elif kind == "collect_error":
            rep.collect_errors.append(ev)
        elif kind == "collected":
            rep.collected, rep.selected, rep.missing = ev["collected"], ev["selected"], ev["missing"]
        elif kind == "test":
            rep.tests.append(TestEvent(ev["nodeid"], ev["when"], ev["outcome"], ev["exc_type"],
                                       ev["assertion"], ev["xfail"], ev["duration"],
                                       ev.get("message", "")))
        elif kind == "finish":
            rep.finished = True
            rep.exitstatus = ev["exitstatus"]
            rep.modules = ev["modules"]
    return rep


def _write_launchers(site: Path | None, bin_dir: Path, python: Path) -> None:
    """The wheel's console scripts, as an installer writes them: a suite that runs its own
    command (glom's test_main runs `glom`) finds it on PATH, and it imports the sandbox's
    copy (PYTHONPATH is inherited), so a mutant reaches it too."""
    bin_dir.mkdir()
    if site is None:
        return
    for entry_points in sorted(site.glob("*.dist-info/entry_points.txt")):
        parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
        parser.optionxform = str  # script names are case-sensitive
        try:
            parser.read(entry_points, encoding="utf-8")
        except configparser.Error:
            continue
        if not parser.has_section("console_scripts"):
            continue
        for name, ref in parser.items("console_scripts"):
            module, _, attr = ref.partition(":")
            attr = attr.split("[", 1)[0].strip()
            if not name or "/" in name or not module.strip():
                continue
            launcher = bin_dir / name
            launcher.write_text(
                f"#!{python}\n"
                "import importlib, sys\n"
                f"entry = importlib.import_module({module.strip()!r})\n"
                f"for part in {attr!r}.split('.') if {attr!r} else ():\n"
                "    entry = getattr(entry, part)\n"
                "sys.exit(entry())\n", encoding="utf-8")
            launcher.chmod(0o755)


class Sandbox:
    """One worker's private copy of a target."""

    def __init__(self, target: PreparedTarget, root: Path):
        self.target = target
        self.root = root
        self.tree = root / "tree"
        self.site = root / "site"
        self._runs = 0
        self._dirty: set[str] = set()
        self.active_pid: int | None = None
        self.rebuild()

    def kill(self) -> None:
        """Kill the process group of a run in progress (on interrupt)."""
        pid = self.active_pid
        if pid:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def _started(self, pid: int) -> None:
        self.active_pid = pid

    def rebuild(self) -> None:
        if self.root.exists():
            shutil.rmtree(self.root)
        self.root.mkdir(parents=True)
        shutil.copytree(self.target.tree, self.tree, ignore=_ignore, symlinks=True)
        if self.target.site is not None:
            shutil.copytree(self.target.site, self.site, symlinks=True)
        _write_launchers(self.site if self.target.site is not None else None, self.root / "bin",
                         self.target.env.python)
        (self.root / "home").mkdir()
        self._dirty.clear()

    def copies(self, path: str) -> list[Path]:
        """Every copy of a source file in this sandbox (tree and installed)."""
        sf = self.target.source(path)
        out = [self.tree / sf.path]
        if self.target.site is not None:
            out.append(self.site / sf.module_path)
        return out

    def write(self, path: str, content: bytes) -> None:
        for p in self.copies(path):
            p.write_bytes(content)
        self._dirty.add(path)

    def restore(self) -> None:
        for path in sorted(self._dirty):
            original = (self.target.tree / path).read_bytes()
            for p in self.copies(path):
                p.write_bytes(original)
        self._dirty.clear()

    def changed_sources(self) -> list[str]:
        """Sources whose sandbox copies differ from the pristine ones (should be none)."""
        bad = []
        for sf in self.target.sources:
            if sf.path in self._dirty:
                continue
            for p in self.copies(sf.path):
                if not p.exists() or sha256_file(p) != sf.sha256:
                    bad.append(str(p.relative_to(self.root)))
        return bad

    def contains(self, file: str | None) -> bool:
        if not file:
            return False
        try:
            Path(file).resolve().relative_to(self.root.resolve())
            return True
        except ValueError:
            return False

    def python_path(self) -> list[str]:
        if self.target.site is not None:
            return [str(self.site)]
        return sorted({str(self.tree / sf.path[: -len(sf.module_path)])
                       for sf in self.target.sources})

    def run_pytest(self, args: list[str], *, select: list[str] | None, exclude: list[str],
                   timeout: float, coverage: bool = False, extra_paths: list[str] = (),
                   limits: Limits = Limits(), keep: bool = False,
                   prefix: list[str] = ()) -> tuple[RunReport, dict | None]:
        """Run pytest once in this sandbox; returns the report and, if asked, coverage data."""
        self._runs += 1
        run_dir = self.root / "runs" / str(self._runs)
        if run_dir.exists():
            shutil.rmtree(run_dir)
        run_dir.mkdir(parents=True)
        (run_dir / "pycache").mkdir()
        (run_dir / "tmp").mkdir()
        config = {
            "report": str(run_dir / "report.jsonl"),
            "select": select,
            "exclude": list(exclude),
            "modules": list(self.target.import_names),
            "seed": True,
        }
        if coverage:
            include = []
            for sf in self.target.sources:
                include += [str(p) for p in self.copies(sf.path)]
            config["coverage"] = {"data_file": str(run_dir / ".coverage"), "include": include,
                                  "out": str(run_dir / "coverage.json")}
        (run_dir / "probe.json").write_text(json.dumps(config))
        env = {
            "PATH": f"{self.root / 'bin'}:{self.target.env.root / 'bin'}:/usr/bin:/bin",
            "HOME": str(self.root / "home"),
            "TMPDIR": str(run_dir / "tmp"),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "TZ": "UTC",
            "PYTHONHASHSEED": "0",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONPYCACHEPREFIX": str(run_dir / "pycache"),
            "PYTHONNOUSERSITE": "1",
            "PYTHONPATH": os.pathsep.join([str(PROBE_DIR), *extra_paths, *self.python_path()]),
            "KILLBENCH_PROBE_CONFIG": str(run_dir / "probe.json"),
            "VIRTUAL_ENV": str(self.target.env.root),
        }
        cmd = [*prefix, str(self.target.env.pytest), "-p", "killbench_probe", "-p", "no:cacheprovider",
               "-q", "--rootdir", str(self.tree), f"--basetemp={run_dir / 'basetemp'}",
               *self.target.spec.pytest_args, *args]
        try:
            proc = run_process(cmd, self.tree, env, timeout, limits, run_dir, self._started)
        finally:
            self.active_pid = None
        report = read_report(run_dir / "report.jsonl", proc)
        cov = None
        if coverage and (run_dir / "coverage.json").exists():
            cov = json.loads((run_dir / "coverage.json").read_text())
            cov = self._coverage_by_source(cov)
        changed = self.changed_sources()
        if changed:
            report.stderr_tail += f"\n[killbench] the run changed sandbox sources: {changed}"
            report.sources_changed = changed
            self.rebuild()
        if not keep:
            shutil.rmtree(run_dir, ignore_errors=True)
        return report, cov

    def _coverage_by_source(self, cov: dict) -> dict:
        """Merge coverage of a file's two copies under its project path."""
        out = {}
        for sf in self.target.sources:
            merged: dict[str, set] = {}
            statements: set = set()
            for p in self.copies(sf.path):
                entry = cov.get(str(p), {})
                statements.update(entry.get("statements", []))
                for line, ctxs in entry.get("executed", {}).items():
                    merged.setdefault(line, set()).update(ctxs)
            out[sf.path] = {"statements": sorted(statements),
                            "executed": {k: sorted(v) for k, v in merged.items()}}
        return out
