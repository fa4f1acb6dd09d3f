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

import json
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
    live = job.get("path") is not None and warm._live_from(job.get("copies") or [job["path"]])
    warm._FUNCTIONS.clear()
    if live:
        os._exit(warm.CANNOT_APPLY)
    probe._reset({**probe._config(), "report": job["report"], "select": None})
    probe._emit({"event": "start", "pid": os.getpid(), "python": sys.version.split()[0],
                 "pytest": pytest.__version__, "fork": True})


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session):
    jobs_fd, answers_fd = (int(x) for x in os.environ["KILLBENCH_WARM_FD"].split(","))
    jobs = os.fdopen(jobs_fd, "r", encoding="utf-8")
    out = os.fdopen(answers_fd, "w", encoding="utf-8")
    warm._FUNCTIONS.update(warm._function_index())
    print(json.dumps({"ready": True, "items": 0, "pid": os.getpid()}), file=out, flush=True)
    server_pid = os.getpid()
    for line in jobs:
        if not line.strip():
            continue
        job = json.loads(line)
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:
            try:
                # through their file objects: this child returns into pytest, and a file
                # object left open would close its descriptor number later, by then another
                # file's (the job's report)
                out.close()
                jobs.close()
                _child(job, server_pid)
            except BaseException:
                os._exit(98)
            return None  # the child: pytest's own collection, run and exit from here on
        status, usage, timed_out = warm._wait(pid, job["timeout"])
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        print(json.dumps({"id": job["id"], "status": status, "timed_out": timed_out,
                          "wall_s": round(time.monotonic() - started, 4),
                          "cpu_s": round(usage.ru_utime + usage.ru_stime, 4),
                          "max_rss_kb": int(usage.ru_maxrss)}), file=out, flush=True)
    os._exit(0)
