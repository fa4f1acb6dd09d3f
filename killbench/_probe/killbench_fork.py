"""The forked runner: a pytest session of the target's whole suite that stops where
collection would begin, and forks one child per job that goes on from there as the run
would have: it collects (importing the tests and the target from disk, so a mutant of
import- or definition-time code is seen exactly as by a fresh process), runs, reports and
exits through pytest's own code. What a child does not pay for: the interpreter's start,
importing pytest and its plug-ins, parsing the configuration.

Loaded with ``-p killbench_fork`` into a normal killbench run of the suite (with the
probe and ``-x``, the plain path's full-suite arguments). Jobs and answers as for the warm
runner (``killbench_warm``), one JSON line each on the descriptors in KILLBENCH_WARM_FD:

    job     {"id", "report", "timeout", "cpu", "env", "path": the mutated file as imported
             or null (clean code), "copies": every copy of it in the sandbox,
             "select": node ids to run, or null for the whole suite}
    answer  {"id", "status", "timed_out", "cpu_exceeded", "wall_s", "cpu_s", "max_rss_kb"}
    ready   also {"saved_cpu"}: the CPU seconds the server's main thread spent before the
            first fork, which a child does not spend again

A child whose mutated file something in the server was already made from (a conftest
imported it while pytest configured) exits 99: the plain path runs that mutant.

Before it forks, the server rewrites the asserts of the suite's files once (``_rewritten``):
bytecode is never written in a run, so every child would otherwise parse and rewrite every
test module again (on toolz, about 0.5 of a 0.85 CPU-s child). A child takes the server's
code object for a file only while the file holds the very bytes it was made from; any other
content (a mutated target file that pytest rewrites, say) is rewritten as usual.
"""

import os
import signal
import sys
import time

import pytest

import killbench_warm as warm


def _child(job, server_pid):
    os.setsid()
    warm._die_with(server_pid)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    import tempfile

    import killbench_probe as probe

    for key, value in job.get("env", {}).items():
        os.environ[key] = value
        if key in ("HOME", "TMPDIR"):
            os.makedirs(value, exist_ok=True)
    tempfile.tempdir = None
    if job.get("path") is not None and warm._live_from(job.get("copies") or [job["path"]]):
        os._exit(warm.CANNOT_APPLY)
    # a selection is kept by the probe after collection, as in a plain run of the suite's
    # own arguments with that selection
    probe._reset({**probe._config(), "report": job["report"], "select": job.get("select")})
    probe._emit({"event": "start", "pid": os.getpid(), "python": sys.version.split()[0],
                 "pytest": pytest.__version__, "fork": True})


def _package_paths(name):
    """Where a dotted module name of ``--pyargs`` lives, found without importing anything
    (importing the target's package here would make every child's mutant of it stale)."""
    from importlib.machinery import PathFinder
    from pathlib import Path

    search, spec = None, None
    for part in name.split("."):
        spec = PathFinder.find_spec(part, search)
        if spec is None:
            return []
        search = spec.submodule_search_locations
    if search:
        return [Path(p) for p in search]
    return [Path(spec.origin)] if spec.origin else []


def _suite_files(config):
    """The files a child may rewrite: every .py file under the run's paths (or packages,
    with --pyargs), and the conftest.py files of the tree."""
    from pathlib import Path

    roots = []
    for arg in config.args:
        arg = str(arg).split("::", 1)[0]
        path = Path(arg)
        if not path.is_absolute():
            path = Path(config.invocation_params.dir) / path
        if path.exists():
            roots.append(path)
        elif config.option.pyargs:
            try:
                roots.extend(_package_paths(arg))
            except (ImportError, ValueError):
                continue
    from _pytest.pathlib import fnmatch_ex

    patterns = list(config.getini("python_files") or ())

    def test_module(path):  # what pytest collects, and so rewrites, as a test module
        return any(fnmatch_ex(pattern, path) for pattern in patterns)

    files = set(Path(config.rootpath).rglob("conftest.py"))
    for root in roots:
        if root.is_dir():
            files.update(p for p in root.rglob("*.py")
                         if "__pycache__" not in p.parts and test_module(p))
        elif root.suffix == ".py":
            files.add(root)  # named on the command line: collected whatever its name
    return sorted(files)


def _rewritten(config):
    """Rewrite the suite's files now, in the server, and have children reuse the result for
    a file whose bytes are still those it was made from."""
    from _pytest.assertion import rewrite

    if not any(isinstance(h, rewrite.AssertionRewritingHook) for h in sys.meta_path):
        return  # --assert=plain: nothing is rewritten
    original = rewrite._rewrite_test
    made = {}
    try:
        files = _suite_files(config)
    except Exception:  # noqa: BLE001 - an unreadable tree, an odd path hook: children rewrite
        return
    for path in files:
        try:
            before = path.read_bytes()
            stat, code = original(path, config)
            if path.read_bytes() == before:
                made[str(path)] = (before, code)
        except Exception:  # noqa: BLE001 - a child meets the same error itself
            continue

    def rewrite_test(fn, config):
        hit = made.get(str(fn))
        if hit is not None:
            try:
                source = fn.read_bytes()
            except OSError:
                source = None
            if source == hit[0]:
                return os.stat(fn), hit[1]
        return original(fn, config)

    rewrite._rewrite_test = rewrite_test


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session):
    _rewritten(session.config)
    # what a plain run's main thread spends before collection (and on rewriting asserts,
    # which a child reuses), and a child does not: taken off the child's CPU budget, so
    # that its collection and tests get the plain run's share
    saved = time.thread_time()
    if warm.serve(0, _child, index=False, saved_cpu=saved):
        return None  # the child: pytest's own collection, run and exit from here on
    os._exit(0)
