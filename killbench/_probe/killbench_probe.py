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
    coverage   null, or {"data_file", "include", "out"} for per-test coverage

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
    _emit({"event": "collected", "collected": len(seen), "selected": len(keep),
           "missing": missing})


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    if _config().get("seed", True):
        digest = hashlib.sha256(item.nodeid.encode("utf-8")).digest()
        random.seed(int.from_bytes(digest[:8], "big"))
    if _COV is not None:
        _COV.switch_context(item.nodeid)
    return None


def pytest_runtest_makereport(item, call):
    if call.excinfo is not None:
        etype = call.excinfo.type
        # pytest.fail / a pytest.raises that did not raise is an assertion in all but name
        asserted = issubclass(etype, (AssertionError, pytest.fail.Exception))
        _EXC[(item.nodeid, call.when)] = (etype.__module__ + "." + etype.__qualname__, asserted)
    return None


def pytest_runtest_logreport(report):
    exc = _EXC.pop((report.nodeid, report.when), (None, False))
    event = {"event": "test", "nodeid": report.nodeid, "when": report.when,
             "outcome": report.outcome, "exc_type": exc[0], "assertion": exc[1],
             "xfail": bool(getattr(report, "wasxfail", False)),
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


def pytest_sessionfinish(session, exitstatus):
    if _COV is not None:
        _write_coverage()
    modules = {}
    for name in _config().get("modules") or ():
        mod = sys.modules.get(name)
        modules[name] = getattr(mod, "__file__", None) if mod is not None else None
    _emit({"event": "finish", "exitstatus": int(exitstatus), "modules": modules,
           "testsfailed": session.testsfailed, "testscollected": session.testscollected})
