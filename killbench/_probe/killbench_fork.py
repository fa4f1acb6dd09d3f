"""The forked runner: a pytest session of the target's whole suite that stops where
collection would begin, and forks one child per job that goes on from there as the run
would have: it collects (importing the tests and the target from disk, so a mutant of
import- or definition-time code is seen exactly as by a fresh process), runs, reports and
exits through pytest's own code. What a child does not pay for: the interpreter's start,
importing pytest and its plug-ins, parsing the configuration.

Loaded with ``-p killbench_fork`` into a normal killbench run of the suite (with the
probe and ``-x``, the plain path's full-suite arguments). Jobs and answers as for the warm
runner (``killbench_warm``), one JSON line each on the descriptors in KILLBENCH_WARM_FD:

    job     {"id", "report", "timeout", "env", "path": the mutated file as imported or
             null (clean code), "copies": every copy of it in the sandbox}
    answer  {"id", "status", "timed_out", "wall_s", "cpu_s", "max_rss_kb"}

A child whose mutated file something in the server was already made from (a conftest
imported it while pytest configured) exits 99: the plain path runs that mutant.
"""

import os
import signal
import sys

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
    live = job.get("path") is not None and warm._live_from(job.get("copies") or [job["path"]])
    warm._FUNCTIONS.clear()
    if live:
        os._exit(warm.CANNOT_APPLY)
    probe._reset({**probe._config(), "report": job["report"], "select": None})
    probe._emit({"event": "start", "pid": os.getpid(), "python": sys.version.split()[0],
                 "pytest": pytest.__version__, "fork": True})


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session):
    if warm.serve(0, _child):
        return None  # the child: pytest's own collection, run and exit from here on
    os._exit(0)
