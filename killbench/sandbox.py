"""Worker sandboxes: a private copy of a target per worker, and the one way to run pytest in it.

Invariants (checked by ``killbench doctor`` and after every run):

1. The code under test is the sandbox's copy. Each sandbox holds its own copy of the
   project tree and of the built wheel's content; a mutant is written into both, and every
   run reports the ``__file__`` of the target's modules so the caller can check it lies
   inside this sandbox.
2. No bytecode of the target is ever reused: PYTHONDONTWRITEBYTECODE=1, and
   PYTHONPYCACHEPREFIX names the environment's bytecode template (the standard library and
   the installed packages, compiled once: ``targets.ensure_pycache``), so Python never reads
   or writes a ``__pycache__`` beside the sources, and the target's files (and a mutant),
   whose sandbox paths no template holds, are compiled from source in every run.
3. A run ends when its deadline passes: the executor kills its whole process group.
4. Every run starts from the same state: a fresh scratch directory at the same path (HOME,
   TMPDIR, pytest's basetemp and the probe's files live there), so nothing one run leaves
   behind reaches the next, and a test cannot tell one run from another by its paths.
5. After each run the sandbox's files are checked against what killbench put there: for
   the target's own suite the sources, for untrusted tests every file of the copy (tests
   directory, conftest files, pytest configuration, the installed package) and the
   interpreter's startup files in the target's environment. A run that changed anything
   is reported (``tampered``) and the sandbox rebuilt.

A sandbox is ``trusted`` (the target's own suite: no isolation, as a user runs it) or
``untrusted`` (generated tests: the executor's isolation level, read-only copy, the probe's
audit hook).
"""

from __future__ import annotations

import configparser
import contextlib
import hashlib
import json
import os
import secrets
import shutil
from pathlib import Path

from . import executor
from .executor import Limits, Policy, ProcessResult, Spawn
from .locations import PROBE_DIR
from .records import RunReport, TestEvent
from .targets import PreparedTarget, _ignore, sha256_file

__all__ = ["Limits", "Sandbox", "read_report"]

STARTUP_FILES = ("sitecustomize.py", "usercustomize.py")


def read_report(path: Path, proc: ProcessResult) -> RunReport:
    """Turn the probe's event log into a RunReport. Only a last line cut short by a kill is
    dropped; any other malformed line means the log cannot be trusted, and says so."""
    rep = RunReport(returncode=proc.returncode, timed_out=proc.timed_out, wall_s=proc.wall_s,
                    stderr_tail=proc.stderr_tail, signal=proc.signal, cpu_s=proc.cpu_s,
                    max_rss_kb=proc.max_rss_kb, isolation=proc.isolation, argv=list(proc.argv),
                    cpu_exceeded=proc.cpu_exceeded)
    if not path.exists():
        return rep
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    torn = lines.pop() if lines else b""  # after the last newline: empty, or a torn line
    if torn.strip():
        rep.log_problems.append("the last event line was cut short (the run was killed)")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            ev = json.loads(line.decode("utf-8", "replace"))
            kind = ev.get("event")
        except (json.JSONDecodeError, AttributeError):
            rep.log_problems.append(f"event line {i + 1} is not a JSON object")
            continue
        if kind == "start":
            rep.started = True
        elif kind == "collect_error":
            rep.collect_errors.append(ev)
        elif kind == "collected":
            rep.collected, rep.selected, rep.missing = ev["collected"], ev["selected"], ev["missing"]
        elif kind == "begin":
            rep.begun.append(ev["nodeid"])
        elif kind == "test":
            rep.tests.append(TestEvent(ev["nodeid"], ev["when"], ev["outcome"], ev["exc_type"],
                                       ev["assertion"], ev["xfail"], ev["duration"],
                                       ev.get("message", ""), ev.get("errno")))
        elif kind == "audit":
            rep.audit.append({"kind": ev["kind"], "path": ev["path"], "nodeid": ev.get("nodeid")})
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


def _digest_tree(root: Path) -> dict[str, str]:
    """relative path -> sha256 (or 'link:TARGET', 'dir') of everything under root."""
    out: dict[str, str] = {}
    if not root.exists():
        return out
    for dirpath, dirnames, filenames in os.walk(root):
        d = Path(dirpath)
        for name in dirnames:
            p = d / name
            if p.is_symlink():
                out[p.relative_to(root).as_posix()] = "link:" + os.readlink(p)
            else:
                out[p.relative_to(root).as_posix()] = "dir"
        for name in filenames:
            p = d / name
            rel = p.relative_to(root).as_posix()
            out[rel] = "link:" + os.readlink(p) if p.is_symlink() else sha256_file(p)
    return out


def _env_snapshot(env_root: Path) -> dict[str, str]:
    """What a test could change in the shared environment to reach later runs: the names,
    sizes and mtimes of everything in site-packages, and the content of .pth and startup
    files (cheap enough to check after every untrusted run: plain strings and scandir, as
    it runs after each of a gate's six phases)."""
    out: dict[str, str] = {}
    root = os.fspath(env_root)
    cut = len(root) + 1

    def walk(directory: str) -> None:
        try:
            entries = list(os.scandir(directory))
        except OSError:
            return
        for e in entries:
            rel = e.path[cut:]
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if e.name.endswith(".pth") or e.name in STARTUP_FILES:
                out[rel] = sha256_file(Path(e.path)) if e.is_file() else "?"
            else:
                out[rel] = f"{st.st_size}:{st.st_mtime_ns}:{st.st_mode}"
            if e.is_dir(follow_symlinks=False):
                walk(e.path)

    for site in sorted(env_root.glob("lib/python*/site-packages")):
        walk(os.fspath(site))
    return out


class Sandbox:
    """One worker's private copy of a target."""

    def __init__(self, target: PreparedTarget, root: Path, *, trusted: bool = True,
                 isolation: str = "none"):
        if not trusted and isolation not in executor.LEVELS:
            raise ValueError(f"isolation {isolation!r}")
        self.target = target
        self.root = root
        self.trusted = trusted
        self.isolation = "none" if trusted else isolation
        self._dirty: dict[str, bytes] = {}  # path -> content written in place of the clean file
        self._added: dict[str, bytes] = {}  # files put into the copy (relative to the root)
        self._pristine: dict[str, str] = {}
        self._env: dict[str, str] | None = None
        self.rebuilds = 0
        self.rebuild()

    # the copy's parts, always under the current root (a run may move it: see `moved`)
    @property
    def tree(self) -> Path:
        return self.root / "tree"

    @property
    def site(self) -> Path:
        return self.root / "site"

    @property
    def run_dir(self) -> Path:
        return self.root / "run"

    def kill(self) -> None:
        """Kill every run in progress (on interrupt)."""
        executor.kill_all()

    def rebuild(self) -> None:
        if self.root.exists():
            shutil.rmtree(self.root)
        self.root.mkdir(parents=True)
        os.chmod(self.root, 0o755)
        shutil.copytree(self.target.tree, self.tree, ignore=_ignore, symlinks=True)
        if self.target.site is not None:
            shutil.copytree(self.target.site, self.site, symlinks=True)
        _write_launchers(self.site if self.target.site is not None else None, self.root / "bin",
                         self.target.env.python)
        self._dirty.clear()
        for rel, content in self._added.items():
            (self.root / rel).write_bytes(content)
        if not self.trusted:
            self._pristine = self._digest()
            if self._env is None:
                self._env = _env_snapshot(self.target.env.root)
        self.rebuilds += 1

    def _digest(self) -> dict[str, str]:
        out = {}
        for part in ("tree", "site", "bin"):
            for rel, h in _digest_tree(self.root / part).items():
                out[f"{part}/{rel}"] = h
        return out

    def copies(self, path: str) -> list[Path]:
        """Every copy of a source file in this sandbox (tree and installed)."""
        sf = self.target.source(path)
        out = [self.tree / sf.path]
        if self.target.site is not None:
            out.append(self.site / sf.module_path)
        return out

    def write(self, path: str, content: bytes) -> None:
        """Put `content` in place of a source file (both copies), keeping the clean file's
        timestamps: a test must not tell a mutant from clean code by a file's mtime."""
        for p in self.copies(path):
            st = p.stat()
            p.write_bytes(content)
            os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
        self._dirty[path] = content

    def restore(self) -> None:
        for path in sorted(self._dirty):
            original = (self.target.tree / path).read_bytes()
            for p in self.copies(path):
                st = p.stat()
                p.write_bytes(original)
                os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
        self._dirty.clear()

    @contextlib.contextmanager
    def clean(self):
        """The clean sources in place for the duration, then whatever was written back:
        a process that imports the target here (the warm server) must see clean code,
        never the mutant of the run that happened to start it."""
        dirty = dict(self._dirty)
        self.restore()
        try:
            yield
        finally:
            for path, content in dirty.items():
                self.write(path, content)

    def add_file(self, path: Path, content: bytes) -> None:
        """Put a file into the copy (a candidate test) as part of what the copy should hold."""
        rel = path.relative_to(self.root).as_posix()
        path.write_bytes(content)
        self._added[rel] = content
        if not self.trusted:
            self._pristine[rel] = hashlib.sha256(content).hexdigest()

    def remove_file(self, path: Path) -> None:
        rel = path.relative_to(self.root).as_posix()
        path.unlink(missing_ok=True)
        self._added.pop(rel, None)
        if not self.trusted:
            self._pristine.pop(rel, None)

    def changed_sources(self) -> list[str]:
        """Sources whose sandbox copies differ from what killbench put there (should be none)."""
        bad = []
        for sf in self.target.sources:
            want = hashlib.sha256(self._dirty[sf.path]).hexdigest() if sf.path in self._dirty \
                else sf.sha256
            for p in self.copies(sf.path):
                if not p.exists() or sha256_file(p) != want:
                    bad.append(str(p.relative_to(self.root)))
        return bad

    def tampered(self) -> list[str]:
        """Everything an untrusted run changed: in the copy, or the environment's startup files."""
        expected = dict(self._pristine)
        for path, content in self._dirty.items():
            digest = hashlib.sha256(content).hexdigest()
            for p in self.copies(path):
                expected[p.relative_to(self.root).as_posix()] = digest
        now = self._digest()
        bad = sorted(k for k in set(expected) | set(now) if expected.get(k) != now.get(k))
        env_now = _env_snapshot(self.target.env.root)
        before = self._env or {}
        env_bad = sorted(k for k in set(before) | set(env_now) if before.get(k) != env_now.get(k))
        if env_bad:
            # only without isolation can a test reach the shared environment: what it added is
            # removed; what it changed is reported (the environment is shared, not rebuilt here)
            for k in sorted(set(env_now) - set(before), key=len, reverse=True):
                p = self.target.env.root / k
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    p.unlink(missing_ok=True)
            self._env = _env_snapshot(self.target.env.root)
        return bad + [f"env/{k}" for k in env_bad]

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

    def source_files(self) -> list[str]:
        out = []
        for sf in self.target.sources:
            out += [str(p) for p in self.copies(sf.path)]
        return out

    def _fresh_run_dir(self) -> Path:
        run = self.run_dir
        if run.exists():
            shutil.rmtree(run)
        for sub in ("", "home", "tmp"):
            (run / sub).mkdir(parents=True, exist_ok=True)
            if self.isolation == "bwrap" and os.geteuid() == 0:
                os.chown(run / sub, executor.NOBODY, executor.NOBODY)
        return run

    def pytest_spawn(self, run: Path, args: list[str], *, select: list[str] | None,
                     exclude: list[str], timeout: float | None, coverage: bool = False,
                     extra_paths: list[str] = (), limits: Limits = Limits(), hashseed: str = "0",
                     order: str | None = None, candidates: list[str] = (),
                     writable: list[Path] = ()) -> Spawn:
        """The one pytest command of this sandbox: its probe configuration (written into
        `run`), environment, isolation and limits."""
        config = {
            "report": str(run / "report.jsonl"),
            "select": select,
            "exclude": list(exclude),
            "modules": list(self.target.import_names),
            "seed": True,
            "order": order,
        }
        # HOME, TMPDIR, pytest's basetemp and the bytecode prefix: under bwrap a private,
        # size-limited /tmp; without it, directories of the scratch directory
        scratch = Path("/tmp") if self.isolation == "bwrap" else run
        home, tmp, basetemp = scratch / "home", scratch / "tmp", scratch / "basetemp"
        # bytecode of the standard library and the environment from its template (read only);
        # the target's files, in this sandbox, are in no template: compiled fresh every run
        pycache = self.target.env.pycache
        if coverage:
            config["coverage"] = {"data_file": str(run / ".coverage"),
                                  "include": self.source_files(), "out": str(run / "coverage.json")}
        if not self.trusted:
            env_site = [str(p) for p in sorted(self.target.env.root.glob("lib/python*/site-packages"))]
            library = ([str(self.site)] if self.target.site is not None else []) + \
                self.source_files() + env_site
            base = Path(os.path.realpath(self.target.env.python)).parent.parent
            config["audit"] = {"sources": self.source_files(), "library": library,
                               "candidates": [str(self.tree / c) for c in candidates],
                               "scratch": [str(run), *map(str, writable)],
                               "writable": [str(scratch)] if scratch != run else [],
                               "readonly": [str(self.root), str(self.target.env.root), str(base),
                                            str(PROBE_DIR)]}
        (run / "probe.json").write_text(json.dumps(config))
        env = executor.untrusted_env(
            path=[self.root / "bin", self.target.env.root / "bin", "/usr/bin", "/bin"],
            home=home, tmp=tmp, hashseed=hashseed,
            python_path=[PROBE_DIR, *extra_paths, *self.python_path()])
        env.update({"PYTHONPYCACHEPREFIX": str(pycache),
                    "KILLBENCH_PROBE_CONFIG": str(run / "probe.json"),
                    "VIRTUAL_ENV": str(self.target.env.root)})
        argv = [str(self.target.env.pytest), "-p", "killbench_probe", "-p", "no:cacheprovider",
                "-q", "--rootdir", str(self.tree), f"--basetemp={basetemp}",
                *self.target.spec.pytest_args, *args]
        python = self.target.env.python
        policy = Policy()
        if self.isolation == "bwrap":
            base = Path(os.path.realpath(python)).parent.parent
            readable = (base, self.target.env.root, PROBE_DIR, self.root,
                        *[Path(p) for p in extra_paths])
            policy = Policy("bwrap", readable=readable, writable=(run, *[Path(p) for p in writable]),
                            dirs=(home, tmp))
        spawn = Spawn(argv, cwd=self.tree, env=env, timeout=timeout, stdout=self.root / "stdout.txt",
                      stderr=self.root / "stderr.txt", limits=limits, policy=policy,
                      launcher_python=python,
                      rusage=run / "rusage.json"
                      if self.isolation == "bwrap" or limits.cpu_budget is not None else None)
        return spawn

    def run_pytest(self, args: list[str], *, select: list[str] | None, exclude: list[str],
                   timeout: float, coverage: bool = False, extra_paths: list[str] = (),
                   limits: Limits = Limits(), keep: bool = False, hashseed: str = "0",
                   order: str | None = None, candidates: list[str] = (), writable: list[Path] = ()) -> tuple[RunReport, dict | None]:
        """Run pytest once in this sandbox; returns the report and, if asked, coverage data."""
        run = self._fresh_run_dir()
        spawn = self.pytest_spawn(run, args, select=select, exclude=exclude, timeout=timeout,
                                  coverage=coverage, extra_paths=extra_paths, limits=limits,
                                  hashseed=hashseed, order=order, candidates=candidates,
                                  writable=writable)
        return self.after_run(run, executor.run(spawn), coverage=coverage, keep=keep)

    def after_run(self, run: Path, proc: ProcessResult, *, coverage: bool = False,
                  keep: bool = False) -> tuple[RunReport, dict | None]:
        """What a run in `run` reported, and the checks of the sandbox after it."""
        report = read_report(run / "report.jsonl", proc)
        cov = None
        if coverage and (run / "coverage.json").exists():
            cov = self._coverage_by_source(json.loads((run / "coverage.json").read_text()))
        changed = self.changed_sources() if self.trusted else self.tampered()
        if changed:
            report.stderr_tail += f"\n[killbench] the run changed the sandbox: {changed[:20]}"
            report.sources_changed = changed
            dirty = dict(self._dirty)
            self.rebuild()
            for path, content in dirty.items():  # the caller restores as usual
                self.write(path, content)
        if not keep:
            shutil.rmtree(run, ignore_errors=True)
        return report, cov

    def scratch(self) -> Path:
        """A fresh directory beside the copy that a run may write into (pass it as
        `writable`): a tool's configuration and output, say."""
        n = 0
        while True:
            n += 1
            d = self.root.parent / f"{self.root.name}-scratch{n}"
            if not d.exists():
                break
        d.mkdir(parents=True)
        if self.isolation == "bwrap" and os.geteuid() == 0:
            os.chown(d, executor.NOBODY, executor.NOBODY)
        return d

    def moved(self) -> "_Moved":
        """Run from a directory of another name (the gate's working-directory check)."""
        return _Moved(self)

    def _coverage_by_source(self, cov: dict) -> dict:
        """Merge coverage of a file's two copies under its project path. A file coverage could
        not analyse is kept as an error, never as 'nothing executed'."""
        out = {}
        for sf in self.target.sources:
            merged: dict[str, set] = {}
            statements: set = set()
            errors = []
            for p in self.copies(sf.path):
                entry = cov.get(str(p), {})
                if "error" in entry:
                    errors.append(f"{p.relative_to(self.root)}: {entry['error']}")
                    continue
                statements.update(entry.get("statements", []))
                for line, ctxs in entry.get("executed", {}).items():
                    merged.setdefault(line, set()).update(ctxs)
            out[sf.path] = {"statements": sorted(statements),
                            "executed": {k: sorted(v) for k, v in merged.items()}}
            if errors:
                out[sf.path]["error"] = "; ".join(errors)
        return out


class _Moved:
    """The sandbox renamed for the duration of a `with` block, and back."""

    def __init__(self, sandbox: Sandbox):
        self.sandbox = sandbox
        self.home = sandbox.root

    def __enter__(self) -> Sandbox:
        alt = self.home.with_name(f"{self.home.name}-{secrets.token_hex(3)}")
        os.rename(self.home, alt)
        self.sandbox.root = alt
        return self.sandbox

    def __exit__(self, *exc) -> None:
        os.rename(self.sandbox.root, self.home)
        self.sandbox.root = self.home
