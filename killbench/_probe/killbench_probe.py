"""The pytest plugin killbench loads into every test run of a target.

It runs inside the target's own environment (stdlib, pytest and coverage only), so
that verdicts come from structured events written here, never from pytest's
printed output. It is loaded with ``-p killbench_probe`` and configured by the
JSON file named in ``KILLBENCH_PROBE_CONFIG``:

    report     path of the JSON-lines event log this run appends to
    select     node ids to keep (null: keep everything collected)
    exclude    node ids to drop (flaky tests found at baseline)
    modules    import names whose ``__file__`` is recorded at the end
    seed       seed ``random`` before each test from the node id (bool)
    order      null, or "reverse": run the selected tests in reverse order
    coverage   null, or {"data_file", "include", "out"} for per-test coverage
    audit      null, or {"sources", "library", "candidates", "scratch", "writable",
               "readonly"}: record
               what an untrusted test does that no test should (see the end of this file)

Events are flushed one per line as they happen, so a run killed by a timeout
still shows how far it got.
"""

import hashlib
import json
import os
import random
import sys

import pytest

_CONFIG = None
_REPORT = None
_EXC = {}
_COV = None


def _config():
    global _CONFIG
    if _CONFIG is None:
        path = os.environ.get("KILLBENCH_PROBE_CONFIG")
        if not path:
            _CONFIG = {}
        else:
            with open(path, encoding="utf-8") as fh:
                _CONFIG = json.load(fh)
    return _CONFIG


def _emit(event):
    global _REPORT
    path = _config().get("report")
    if not path:
        return
    if _REPORT is None:
        _REPORT = open(path, "a", encoding="utf-8")
    _REPORT.write(json.dumps(event, sort_keys=True) + "\n")
    _REPORT.flush()


def _start_coverage():
    """Start coverage before any target module is imported (plugin import time)."""
    global _COV
    spec = _config().get("coverage")
    if not spec:
        return
    import coverage

    _COV = coverage.Coverage(
        data_file=spec["data_file"],
        include=spec["include"],
        config_file=False,
    )
    _COV.start()


_start_coverage()


def pytest_configure(config):
    _emit({"event": "start", "pid": os.getpid(), "python": sys.version.split()[0],
           "pytest": pytest.__version__})


def pytest_collectreport(report):
    if report.failed:
        _emit({"event": "collect_error", "nodeid": report.nodeid,
               "message": str(report.longrepr)[-2000:]})


def pytest_collection_modifyitems(session, config, items):
    cfg = _config()
    select = cfg.get("select")
    exclude = set(cfg.get("exclude") or ())
    keep, drop = [], []
    seen = set()
    for item in items:
        seen.add(item.nodeid)
        wanted = (select is None or item.nodeid in select) and item.nodeid not in exclude
        (keep if wanted else drop).append(item)
    missing = sorted(set(select) - seen) if select is not None else []
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    if cfg.get("order") == "reverse":
        items.reverse()
    _emit({"event": "collected", "collected": len(seen), "selected": len(keep),
           "missing": missing})


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    _emit({"event": "begin", "nodeid": item.nodeid})
    _AUDIT["test"] = item.nodeid
    if _config().get("seed", True):
        digest = hashlib.sha256(item.nodeid.encode("utf-8")).digest()
        random.seed(int.from_bytes(digest[:8], "big"))
    if _COV is not None:
        _COV.switch_context(item.nodeid)
    return None


def pytest_runtest_logfinish(nodeid, location):
    _AUDIT["test"] = None


def pytest_runtest_makereport(item, call):
    if call.excinfo is not None:
        etype = call.excinfo.type
        # pytest.fail / a pytest.raises that did not raise is an assertion in all but name
        asserted = issubclass(etype, (AssertionError, pytest.fail.Exception))
        errno = getattr(call.excinfo.value, "errno", None)
        _EXC[(item.nodeid, call.when)] = (etype.__module__ + "." + etype.__qualname__, asserted,
                                          errno if isinstance(errno, int) else None)
    return None


def pytest_runtest_logreport(report):
    exc = _EXC.pop((report.nodeid, report.when), (None, False, None))
    event = {"event": "test", "nodeid": report.nodeid, "when": report.when,
             "outcome": report.outcome, "exc_type": exc[0], "assertion": exc[1],
             "errno": exc[2], "xfail": bool(getattr(report, "wasxfail", False)),
             "duration": round(report.duration, 6)}
    if report.failed:
        # feedback text for a generator's next attempt; never read to decide a verdict
        event["message"] = str(report.longrepr)[-800:]
    _emit(event)


def _write_coverage():
    global _COV
    spec = _config().get("coverage")
    cov, _COV = _COV, None
    cov.switch_context("")
    cov.stop()
    cov.save()
    data = cov.get_data()
    out = {}
    for path in spec["include"]:
        try:
            _, statements, _, _, _ = cov.analysis2(path)
        except Exception as exc:  # file not importable Python: report, do not hide
            out[path] = {"error": repr(exc)}
            continue
        by_line = data.contexts_by_lineno(path) if path in data.measured_files() else {}
        out[path] = {
            "statements": sorted(statements),
            "executed": {str(line): sorted(ctx) for line, ctx in sorted(by_line.items())},
        }
    with open(spec["out"], "w", encoding="utf-8") as fh:
        json.dump(out, fh, sort_keys=True)


_INHERITED = []


def _reset(config):
    """A forked child of the warm runner: this job's configuration and a report of its own;
    nothing of the parent's run is carried over. The parent's open report file is kept
    referenced, never finalized here: dropping it would close an unclosed file inside the
    child, and the ResourceWarning that raises is, under a suite's `filterwarnings = error`,
    a failure of the next test (a kill that no mutant made). The child ends with os._exit."""
    global _CONFIG, _REPORT, _EXC, _COV
    _INHERITED.extend(x for x in (_REPORT, _COV) if x is not None)
    _CONFIG, _REPORT, _EXC, _COV = config, None, {}, None


def finish(exitstatus, testsfailed=None, testscollected=None):
    modules = {}
    for name in _config().get("modules") or ():
        mod = sys.modules.get(name)
        modules[name] = getattr(mod, "__file__", None) if mod is not None else None
    _emit({"event": "finish", "exitstatus": int(exitstatus), "modules": modules,
           "testsfailed": testsfailed, "testscollected": testscollected})


def pytest_sessionfinish(session, exitstatus):
    _AUDIT["on"] = False  # coverage and pytest's own reporting read sources legitimately
    if _COV is not None:
        _write_coverage()
    finish(exitstatus, session.testsfailed, session.testscollected)


# ---------------------------------------------------------------- untrusted tests
#
# An audit hook (PEP 578) sees every file this process opens. While an untrusted test is
# collected or runs, two things are recorded as "audit" events, with the test's node id:
#
#   write        a file opened for writing (or renamed, removed, created, linked, chmod-ed)
#                outside the run's writable directories: the sandbox copy, the target's
#                environment and the rest of the machine are not the test's to change;
#   read-source  one of the target's source files opened for reading by code the test
#                controls (the candidate file, or code it built with exec/compile), not by
#                the import system and not by the library itself: a test that reads the
#                code under test is looking at the mutant's text, not its behaviour.
#   read-code    the code object of the target's code (a function's `__code__`, a frame's
#                `f_code`, a generator's `gi_code`, or through gc.get_referents) fetched by
#                the test's own code or by `dis` for it, by any spelling: CPython audits these
#                attributes. That is the mutant's bytecode, not its behaviour. Reads by other
#                modules (mock's autospec, inspect's signature and flags, doctest, pytest)
#                are not counted: they look at the interface.
#
# The hook only labels: the sandbox's mounts and its checks after each run enforce.

_AUDIT = {"on": False, "test": None, "busy": False}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_MUTATING = {"os.rename": (0, 1), "os.replace": (0, 1), "os.remove": (0,), "os.unlink": (0,),
             "os.rmdir": (0,), "os.mkdir": (0,), "os.symlink": (1,), "os.link": (1,),
             "os.chmod": (0,), "os.chown": (0,), "os.truncate": (0,), "os.utime": (0,),
             "shutil.copyfile": (1,), "shutil.rmtree": (0,), "shutil.move": (1,)}
_IMPORT_FRAMES = {"_find_and_load", "_load_unlocked", "_exec", "_load"}


def _path_of(value):
    if isinstance(value, int):
        return None
    try:
        return os.path.abspath(os.fsdecode(value))
    except (TypeError, ValueError):
        return None


def _inside(path, roots):
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _by_test_code(frame, library, candidates):
    """Whether the code that asked for a file is the test's: walking out from the innermost
    frame past the standard library, pytest and this probe, the first frame that is either
    the candidate test file (or code it compiled at run time, like exec'd text) or the
    target's own modules and their dependencies (a library may read its own files) decides.
    A frame of the import system means an import is reading a source to run it."""
    while frame is not None:
        code = frame.f_code
        name = code.co_filename
        if name.startswith("<frozen"):
            if code.co_name in _IMPORT_FRAMES:
                return False
        elif name.startswith("<") or name in candidates:
            return True
        elif _inside(name, library):
            return False
        frame = frame.f_back  # the standard library, pytest, its launcher: look further out
    return False


_CODE_ATTRS = ("__code__", "f_code", "gi_code", "cr_code", "ag_code")


def _reads_code_for_test(frame, library, candidates):
    """Whether a code-object read is the test's own: made directly by the candidate's code (or
    code it compiled at run time), or by `dis` on its behalf. A read by any other module (the
    standard library's mock, inspect's flag and signature helpers, doctest, pytest's
    tracebacks, the target itself) is not counted: they look at flags and signatures."""
    name = frame.f_code.co_filename
    if name in candidates or (name.startswith("<") and not name.startswith("<frozen")):
        return True
    if name.endswith(os.sep + "dis.py"):
        return _by_test_code(frame, library, candidates)
    return False


def _start_audit():
    spec = _config().get("audit")
    if not spec:
        return
    sources = {os.path.abspath(p) for p in spec.get("sources", ())}
    writable = [os.path.abspath(p) for p in spec.get("writable", ())] + ["/dev/", "/proc/self/"]
    scratch = [os.path.abspath(p) for p in spec.get("scratch", ())]
    readonly = [os.path.abspath(p) for p in spec.get("readonly", ())]

    def may_write(path):
        if _inside(path, scratch):
            return True
        return _inside(path, writable) and not _inside(path, readonly)

    library = [os.path.abspath(p) for p in spec.get("library", ())]
    candidates = {os.path.abspath(p) for p in spec.get("candidates", ())}
    report = os.path.abspath(_config().get("report", "")) if _config().get("report") else None

    def record(kind, path):
        _AUDIT["busy"] = True
        try:
            _emit({"event": "audit", "kind": kind, "path": path, "nodeid": _AUDIT["test"]})
        finally:
            _AUDIT["busy"] = False

    def hook(event, args):
        if not _AUDIT["on"] or _AUDIT["busy"]:
            return
        if event == "open":
            path = _path_of(args[0])
            if path is None or path == report:
                return
            mode, flags = args[1], args[2] if len(args) > 2 else 0
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
                (mode is None and isinstance(flags, int) and flags & _WRITE_FLAGS)
            if writing:
                if not may_write(path):
                    record("write", path)
            elif path in sources or (path.endswith(".pyc") and path[:-1] in sources):
                _AUDIT["busy"] = True
                try:
                    by_test = _by_test_code(sys._getframe(1), library, candidates)
                finally:
                    _AUDIT["busy"] = False
                if by_test:
                    record("read-source", path)
        elif event == "object.__getattr__" and len(args) > 1 and args[1] in _CODE_ATTRS:
            _AUDIT["busy"] = True  # the hook's own attribute reads are not the test's
            try:
                code = getattr(args[0], args[1], None)
                path = os.path.abspath(code.co_filename) if code is not None else None
                flagged = path in sources and \
                    _reads_code_for_test(sys._getframe(1), library, candidates)
            except Exception:  # noqa: BLE001 - an odd object: nothing to label
                flagged = False
            finally:
                _AUDIT["busy"] = False
            if flagged:
                record("read-code", f"{path}:{getattr(code, 'co_qualname', '?')}")
        elif event in ("gc.get_referents", "gc.get_referrers") and args:
            # the garbage collector hands out a function's code object without any attribute
            _AUDIT["busy"] = True
            try:
                funcs = [o for o in (args[0] if isinstance(args[0], tuple) else args)
                         if callable(o) and hasattr(o, "__code__")]
                hit = [os.path.abspath(f.__code__.co_filename) for f in funcs]
                hit = [h for h in hit if h in sources]
                flagged = bool(hit) and _by_test_code(sys._getframe(1), library, candidates)
            except Exception:  # noqa: BLE001
                flagged, hit = False, []
            finally:
                _AUDIT["busy"] = False
            if flagged:
                record("read-code", hit[0])
        elif event in _MUTATING:
            for i in _MUTATING[event]:
                path = _path_of(args[i]) if i < len(args) else None
                if path is not None and not may_write(path):
                    record("write", path)

    sys.addaudithook(hook)
    _AUDIT["on"] = True


_start_audit()
