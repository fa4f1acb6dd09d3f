"""The executor: one way to run a child, with limits from an exec prefix, a deadline that
kills the whole group, and (where bubblewrap runs) the isolation untrusted tests get."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from killbench import executor
from killbench.executor import Limits, Policy, Spawn

ADDR_NO_RANDOMIZE = 0x0040000
PERSONALITY = "print(int(open('/proc/self/personality').read(), 16), hash(None), hash(object()))"
BWRAP = executor.unavailable("bwrap")
needs_bwrap = pytest.mark.skipif(bool(BWRAP), reason=f"bubblewrap isolation unavailable: {BWRAP}")


def _spawn(tmp_path: Path, code: str, *, level: str = "none", timeout: float = 30,
           limits: Limits = Limits(), name: str = "run",
           rusage: bool = False) -> tuple[executor.ProcessResult, str]:
    out = tmp_path / name
    out.mkdir()
    os.chmod(out, 0o777)
    base = Path(os.path.realpath(sys.executable)).parent.parent
    policy = Policy(level, readable=(base, Path(sys.prefix), executor.PROBE_DIR),
                    writable=(out,)) if level == "bwrap" else Policy()
    res = executor.run(Spawn([sys.executable, "-c", code], cwd=out, env={"PATH": "/usr/bin:/bin"},
                             timeout=timeout, stdout=out / "stdout", stderr=out / "stderr",
                             limits=limits, policy=policy,
                             rusage=out / "rusage.json" if rusage else None))
    return res, (out / "stdout").read_text()


def _machine_allows_no_aslr() -> bool:
    import subprocess
    code = ("import ctypes; ctypes.CDLL(None).personality(0x0040000); "
            "print(int(open('/proc/self/personality').read(), 16))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return bool(int(out.stdout) & ADDR_NO_RANDOMIZE)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="personality(2) is Linux only")
def test_children_run_without_address_randomisation(tmp_path):
    if not _machine_allows_no_aslr():
        pytest.skip("this machine's seccomp policy forbids personality(ADDR_NO_RANDOMIZE)")
    runs = []
    for i in range(3):
        res, out = _spawn(tmp_path, PERSONALITY, name=str(i))
        assert res.returncode == 0, res.stderr_tail
        personality, *hashes = out.split()
        runs.append((int(personality), hashes))
    assert all(p & ADDR_NO_RANDOMIZE for p, _ in runs)
    assert runs[0][1] == runs[1][1] == runs[2][1]


def test_the_deadline_kills_the_whole_group(tmp_path):
    code = ("import subprocess, time\n"
            "p = subprocess.Popen(['sleep', '300'])\n"
            "print(p.pid, flush=True)\n"
            "time.sleep(300)\n")
    started = time.monotonic()
    res, out = _spawn(tmp_path, code, timeout=2)
    assert res.timed_out and res.returncode is None
    assert time.monotonic() - started < 20
    child = int(out.split()[0])
    time.sleep(0.2)
    assert not os.path.exists(f"/proc/{child}") or \
        open(f"/proc/{child}/stat").read().split(")")[1].split()[0] in "ZX"


def test_limits_come_from_the_exec_prefix(tmp_path):
    code = ("import resource\n"
            "print(resource.getrlimit(resource.RLIMIT_FSIZE)[0], resource.getrlimit(resource.RLIMIT_AS)[0],"
            " resource.getrlimit(resource.RLIMIT_CPU)[0])\n")
    res, out = _spawn(tmp_path, code, limits=Limits(address_space=3 << 30, file_size=1 << 20), timeout=7)
    assert res.returncode == 0, res.stderr_tail
    assert [int(x) for x in out.split()] == [1 << 20, 3 << 30, 17]


def test_a_cpu_hog_is_stopped_by_its_limit(tmp_path):
    res, _ = _spawn(tmp_path, "while True: pass", limits=Limits(cpu_seconds=1), timeout=60)
    assert not res.timed_out and res.signal == 24  # SIGXCPU
    assert res.cpu_s >= 0.9


SPIN_IN_MAIN = "while True: pass"
SPIN_IN_WORKER = ("import sys, threading, time\n"
                  "def spin():\n"
                  "    while True:\n"
                  "        pass\n"
                  "threading.Thread(target=spin, daemon=True).start()\n"
                  "time.sleep(2.5)\n"
                  "sys.exit(3)\n")


@pytest.mark.parametrize("level", ["none", pytest.param("bwrap", marks=needs_bwrap)])
def test_a_cpu_budget_counts_the_main_thread_and_ends_the_run_as_a_timeout(tmp_path, level):
    budget = Limits(cpu_budget=1.0)
    res, _ = _spawn(tmp_path, SPIN_IN_MAIN, level=level, limits=budget, timeout=30, rusage=True,
                    name="main")
    assert (res.timed_out, res.cpu_exceeded, res.returncode) == (True, True, None), res
    assert res.wall_s < 10 and 0.9 <= res.cpu_s < 3.0, res
    # a worker thread spins for 2.5 s while the main one sleeps: the command ends as it will
    res, _ = _spawn(tmp_path, SPIN_IN_WORKER, level=level, limits=budget, timeout=30, rusage=True,
                    name="worker")
    assert (res.timed_out, res.cpu_exceeded, res.returncode) == (False, False, 3), res
    assert 2.0 <= res.cpu_s < 4.0, res  # counted once, whichever process reaped it
    # without a budget the same spin runs to the deadline
    res, _ = _spawn(tmp_path, SPIN_IN_MAIN, level=level, timeout=2, name="deadline")
    assert (res.timed_out, res.cpu_exceeded) == (True, False), res


def test_a_cpu_budget_without_a_place_to_report_it_is_refused(tmp_path):
    with pytest.raises(ValueError, match="rusage"):
        _spawn(tmp_path, "pass", limits=Limits(cpu_budget=1.0))


@needs_bwrap
def test_bwrap_contains_the_run(tmp_path):
    code = "\n".join([
        "import os, socket, subprocess",
        "print('pid', os.getpid())",
        "print('uid', os.getuid())",
        "subprocess.Popen(['sleep', '300'], start_new_session=True)",
        "for path in ('/etc/killbench-x', '/usr/killbench-x', os.path.expanduser('~root/x')):",
        "    try:",
        "        open(path, 'w')",
        "        print('wrote', path)",
        "    except OSError as exc:",
        "        print('refused', exc.errno)",
        "try:",
        "    socket.create_connection(('1.1.1.1', 53), timeout=3)",
        "    print('net open')",
        "except OSError:",
        "    print('net refused')",
        "print('listing', sorted(os.listdir('/')))",
    ])
    before = {p for p in os.listdir("/proc") if p.isdigit()}
    res, out = _spawn(tmp_path, code, level="bwrap")
    assert res.returncode == 0, res.stderr_tail
    lines = out.splitlines()
    assert "pid 2" in lines  # a PID namespace of its own
    if os.geteuid() == 0:
        assert f"uid {executor.NOBODY}" in lines
    assert "net refused" in lines and not any(x.startswith("wrote") for x in lines)
    assert sum(x.startswith("refused") for x in lines) == 3
    assert res.isolation == "bwrap"
    time.sleep(0.3)
    after = {p for p in os.listdir("/proc") if p.isdigit()}
    leftovers = []
    for pid in after - before:
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read()
        except OSError:
            continue
        if b"sleep\x00300" in cmd:
            leftovers.append(pid)
    assert not leftovers, "the daemonised child outlived its run"


def test_an_unknown_level_is_refused():
    with pytest.raises(executor.UserError, match="unknown isolation level"):
        executor.require("docker")
    assert executor.unavailable("none") is None
