"""The one way killbench runs a child process, and the isolation policy for untrusted code.

Every run of a test (the target's own suite, a generated test at the gate, a kept test in
scoring, verify, amplify's replays) is a ``Spawn`` given to ``run``:

- the child runs in its own session and process group; at the deadline, on an interrupt,
  or when it ends, the whole group is killed (so a finished run leaves nothing behind);
- resource limits, the parent-death signal, fixed addresses and the unprivileged user are
  set by an exec prefix (``_probe/killbench_launch.py``), never by a ``preexec_fn``;
- the outcome is the exit status (or the signal), wall and CPU time and peak memory from
  ``wait4``, never printed text.

An untrusted run also gets an isolation level, recorded wherever its outcome goes:

``bwrap``  bubblewrap: new PID namespace (nothing the test starts outlives the run), new
           network namespace (loopback only) and IPC/UTS namespaces, a mount namespace
           whose only contents are the system directories, the interpreter and the
           target's environment read-only, the sandbox copy read-only and the run's
           scratch directory writable (a private /tmp, HOME inside it), and, when killbench
           runs as root, the unprivileged user ``nobody``.
``none``   no isolation, chosen explicitly (``--isolation none``): process group, limits
           and a check of the sandbox's files after each run only.

Where bwrap is not available, ``require`` refuses (fail closed) with what to do.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .errors import UserError
from .locations import PROBE_DIR

LEVELS = ("bwrap", "none")
LAUNCHER = PROBE_DIR / "killbench_launch.py"
NOBODY = 65534
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/etc")


@dataclass(frozen=True)
class Limits:
    """Resource limits of a run's every process (POSIX rlimits)."""

    address_space: int | None = 8 << 30
    file_size: int = 1 << 30
    cpu_seconds: int | None = None  # default: the run's timeout plus 10 s
    processes: int | None = None  # counted per user: applied only when dropping to nobody
    # CPU seconds the command's main thread may use (the exec prefix watches it): the run's
    # CPU budget, a timeout when used up (ProcessResult.cpu_exceeded). Not an rlimit: those
    # count every thread, and a test that waits while a thread of the code under test spins
    # must still end as the test decides.
    cpu_budget: float | None = None

    def rlimits(self, timeout: float | None, drop_user: bool) -> dict[str, int]:
        out = {"RLIMIT_CORE": 0, "RLIMIT_FSIZE": self.file_size}
        if self.address_space:
            out["RLIMIT_AS"] = self.address_space
        cpu = self.cpu_seconds or (int(timeout) + 10 if timeout else None)
        if cpu:
            out["RLIMIT_CPU"] = cpu
        if self.processes and drop_user:
            out["RLIMIT_NPROC"] = self.processes
        return out


@dataclass(frozen=True)
class Policy:
    """Where a run may read and write. ``level`` is one of LEVELS."""

    level: str = "none"
    readable: tuple[Path, ...] = ()  # bound read-only (bwrap); the system dirs are added
    writable: tuple[Path, ...] = ()  # bound read-write (bwrap)
    tmp: Path | None = None  # bound at /tmp (bwrap); None: a private tmpfs of tmp_bytes
    tmp_bytes: int = 512 << 20  # the size of the private /tmp, and 1/8 of it for /dev/shm
    dirs: tuple[Path, ...] = ()  # created (mode 0777) once everything is mounted (bwrap)


def untrusted_env(*, path: list[Path | str], home: Path, tmp: Path, hashseed: str,
                  python_path: list[Path | str]) -> dict[str, str]:
    """The environment every run of untrusted code starts from (a gate or scoring run of a
    test, a generator's workspace command): nothing of this process's environment leaks in,
    and locale, time zone, hash seed and bytecode writing are fixed, so that a verdict does
    not depend on the machine that reached it."""
    return {
        "PATH": os.pathsep.join(map(str, path)),
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        "PYTHONHASHSEED": hashseed,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "PYTHONPATH": os.pathsep.join(map(str, python_path)),
    }


@dataclass
class Spawn:
    argv: list[str]
    cwd: Path
    env: dict[str, str]
    timeout: float | None
    stdout: Path
    stderr: Path
    limits: Limits = Limits()
    policy: Policy = Policy()
    launcher_python: Path | None = None  # interpreter of the exec prefix (None: sys.executable)
    rusage: Path | None = None  # where the exec prefix writes the command's CPU time (bwrap)


@dataclass
class ProcessResult:
    """How a child ended: from wait4 and the deadline, never from its output."""

    returncode: int | None  # None when killed at the deadline
    signal: int | None  # the signal that ended it, if any
    timed_out: bool
    wall_s: float
    cpu_s: float  # user + system of the child and everything it waited for
    max_rss_kb: int
    isolation: str
    argv: list[str] = field(default_factory=list)  # the command, without the exec prefix
    stderr_tail: str = ""
    cpu_exceeded: bool = False  # the command used up its CPU budget (Limits.cpu_budget): a timeout

    def to_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------- CPU accounting

_account = threading.local()


class CpuCounter:
    """CPU seconds of the children a thread ran (a generator's own search, say)."""

    def __init__(self):
        self.cpu_s = 0.0
        self.runs = 0


@contextmanager
def accounting(counter: CpuCounter | None):
    """Charge the CPU time of every run this thread makes inside the block to `counter`
    (None: to nobody, e.g. the gate's runs inside a generator's ctx.gate call)."""
    previous = getattr(_account, "counter", None)
    _account.counter = counter
    try:
        yield counter
    finally:
        _account.counter = previous


# ---------------------------------------------------------------- process groups in flight

_active: set[int] = set()
_active_lock = threading.Lock()


def kill_all() -> None:
    """Kill the process group of every run in progress (interrupt, SIGTERM, shutdown)."""
    with _active_lock:
        groups = list(_active)
    for pgid in groups:
        _killpg(pgid)


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# ---------------------------------------------------------------- isolation

_probe_cache: dict[str, str | None] = {}
_probe_lock = threading.Lock()


def _dirs_to_create(paths: list[Path]) -> list[str]:
    """Every ancestor of the bind targets, shallowest first: bwrap would create them 0700,
    and the unprivileged user could not reach what is bound below."""
    out: set[str] = set()
    for p in paths:
        for parent in Path(p).parents:
            if str(parent) != "/":
                out.add(str(parent))
    return sorted(out, key=lambda s: (s.count("/"), s))


def bwrap_prefix(policy: Policy, cwd: Path, drop_user: bool) -> list[str]:
    exe = shutil.which("bwrap")
    if exe is None:
        raise UserError("isolation `bwrap` needs bubblewrap (`apt-get install bubblewrap`)")
    cmd = [exe, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net",
           "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--hostname", "killbench"]
    if not drop_user and os.geteuid() != 0:
        cmd.append("--unshare-user")  # an unprivileged bwrap needs a user namespace
    readable = [Path(p) for p in policy.readable]
    writable = [Path(p) for p in policy.writable]
    # /tmp first: binds below it (a cache under /tmp) then get their mount points inside it
    # a size-limited tmpfs: a test that fills /tmp or /dev/shm fills its own memory budget,
    # not the machine's
    if policy.tmp is not None:
        cmd += ["--bind", str(policy.tmp), "/tmp"]
    else:
        cmd += ["--perms", "1777", "--size", str(policy.tmp_bytes), "--tmpfs", "/tmp"]
    for d in _dirs_to_create(readable + writable):
        cmd += ["--perms", "0755", "--dir", d]
    for d in SYSTEM_DIRS:
        if os.path.exists(d):
            cmd += ["--ro-bind", d, d]
    cmd += ["--proc", "/proc", "--dev", "/dev",
            "--perms", "1777", "--size", str(policy.tmp_bytes // 8), "--tmpfs", "/dev/shm"]
    for p in readable:
        cmd += ["--ro-bind", str(p), str(p)]
    for p in writable:
        cmd += ["--bind", str(p), str(p)]
    for d in policy.dirs:
        cmd += ["--perms", "0777", "--dir", str(d)]
    cmd += ["--chdir", str(cwd), "--"]
    return cmd


def _launcher(spawn: Spawn, drop_user: bool) -> list[str]:
    spec = {"rlimits": spawn.limits.rlimits(spawn.timeout, drop_user), "no_aslr": True,
            "pdeathsig": int(signal.SIGKILL)}
    if drop_user:
        spec.update(uid=NOBODY, gid=NOBODY)
    if spawn.policy.level == "none":
        spec["parent"] = os.getpid()
    if spawn.rusage is not None:
        spec["rusage"] = str(spawn.rusage)
    if spawn.limits.cpu_budget is not None:
        if spawn.rusage is None:
            raise ValueError("a CPU budget needs a rusage path: the exec prefix reports there")
        spec["cpu_budget"] = float(spawn.limits.cpu_budget)
    python = str(spawn.launcher_python or sys.executable)
    return [python, "-I", "-S", str(LAUNCHER), json.dumps(spec, sort_keys=True), "--"]


def _drops_user(policy: Policy) -> bool:
    return policy.level == "bwrap" and os.geteuid() == 0


def command(spawn: Spawn) -> list[str]:
    """The full command line of a spawn: isolation prefix, exec prefix, the command."""
    drop = _drops_user(spawn.policy)
    prefix = bwrap_prefix(spawn.policy, spawn.cwd, drop) if spawn.policy.level == "bwrap" else []
    return prefix + _launcher(spawn, drop) + list(spawn.argv)


def unavailable(level: str, python: Path | None = None) -> str | None:
    """Why `level` cannot be used on this machine (None: it can). Probed once per process
    by running a real command under it."""
    if level not in LEVELS:
        return f"unknown isolation level {level!r}; known: {', '.join(LEVELS)}"
    if level == "none":
        return None
    with _probe_lock:
        key = f"{level}:{python}"
        if key in _probe_cache:
            return _probe_cache[key]
        reason = _probe(level, python)
        _probe_cache[key] = reason
        return reason


def _probe(level: str, python: Path | None) -> str | None:
    if sys.platform != "linux":
        return f"isolation `{level}` needs Linux namespaces; this is {sys.platform}"
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    import tempfile

    py = Path(python or sys.executable)
    base = Path(os.path.realpath(py)).parent.parent
    from .locations import cache_subdir

    with tempfile.TemporaryDirectory(prefix="isolation-probe-", dir=cache_subdir("tmp")) as tmp:
        out = Path(tmp)
        os.chmod(out, 0o755)
        spawn = Spawn([str(py), "-I", "-S", "-c", "import os; print(os.getpid())"], cwd=out,
                      env={"PATH": "/usr/bin:/bin"}, timeout=30, stdout=out / "o", stderr=out / "e",
                      policy=Policy(level, readable=(base, py.parent.parent, PROBE_DIR), writable=(out,)),
                      launcher_python=py)
        try:
            res = run(spawn)
        except OSError as exc:
            return f"bwrap could not start: {exc}"
        text = (out / "o").read_text(errors="replace").strip()
        if res.returncode != 0 or text != "2":
            err = (out / "e").read_text(errors="replace").strip()[-400:]
            return (f"a test command under bwrap failed (exit {res.returncode}, pid {text!r}): "
                    f"{err or 'no output'}")
    return None


def require(level: str, python: Path | None = None) -> str:
    """The level, or a UserError saying why it cannot be had and what to do."""
    reason = unavailable(level, python)
    if reason:
        raise UserError(f"isolation `{level}` is not available here: {reason}. Generated tests "
                        "are untrusted code; install bubblewrap, or run with `--isolation none` "
                        "to run them without isolation (the level is recorded with every result)")
    return level


# ---------------------------------------------------------------- running


def run(spawn: Spawn, on_start=None) -> ProcessResult:
    """Run one spawn to its end or its deadline; kill its whole group either way."""
    argv = command(spawn)
    start = time.monotonic()
    with open(spawn.stdout, "wb") as so, open(spawn.stderr, "wb") as se:
        proc = subprocess.Popen(argv, cwd=spawn.cwd, env=spawn.env, stdout=so, stderr=se,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    pgid = proc.pid
    with _active_lock:
        _active.add(pgid)
    if on_start is not None:
        on_start(proc.pid)
    timed_out = False
    try:
        timed_out = not _wait_exit(proc.pid, spawn.timeout)
        if timed_out:
            _killpg(pgid)
        _, status, usage = os.wait4(proc.pid, 0)
    except BaseException:
        _killpg(pgid)
        try:
            os.wait4(proc.pid, 0)
        except ChildProcessError:
            pass
        proc.returncode = -9
        raise
    finally:
        _killpg(pgid)  # whatever the run left in its group
        with _active_lock:
            _active.discard(pgid)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - start
    cpu, rss = usage.ru_utime + usage.ru_stime, int(usage.ru_maxrss)
    sig = -proc.returncode if proc.returncode < 0 else None
    cpu_exceeded = False
    if spawn.rusage is not None:  # the exec prefix's account of the command
        try:
            inner = json.loads(Path(spawn.rusage).read_text())
            if spawn.policy.level != "none":  # else the prefix's own wait4 counted it already
                cpu, rss = cpu + float(inner["cpu_s"]), max(rss, int(inner["max_rss_kb"]))
            # read only when this run has a budget: an untrusted run's own code can write in
            # the directory of that file, and a run without a budget never exceeds one
            cpu_exceeded = (spawn.limits.cpu_budget is not None and not timed_out
                            and inner.get("cpu_exceeded") is True)
        except (OSError, ValueError, KeyError, TypeError):
            pass  # killed before it could say: the deadline, or the test's own doing
    timed_out = timed_out or cpu_exceeded
    counter = getattr(_account, "counter", None)
    if counter is not None:
        counter.cpu_s += cpu
        counter.runs += 1
    tail = _tail(spawn.stdout) + "\n" + _tail(spawn.stderr)
    return ProcessResult(
        returncode=None if timed_out else proc.returncode, signal=None if timed_out else sig,
        timed_out=timed_out, wall_s=round(wall, 4), cpu_s=round(cpu, 4), max_rss_kb=rss,
        isolation=spawn.policy.level, argv=list(spawn.argv), stderr_tail=tail.strip()[-4000:],
        cpu_exceeded=cpu_exceeded)


def _wait_exit(pid: int, timeout: float | None) -> bool:
    """True when the child ended within the timeout (it is not reaped here)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        fd = None
    if fd is not None:
        try:
            while True:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                ready, _, _ = select.select([fd], [], [], left)
                if ready:
                    return True
                if deadline is not None and time.monotonic() >= deadline:
                    return False
        finally:
            os.close(fd)
    while True:  # no pidfd: poll without reaping
        try:
            info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        if info is not None:
            return True
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(0.01)


def _tail(path: Path, n: int = 4000) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - n))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def run_trusted(argv: list[str], *, cwd: Path | None = None, env: dict | None = None,
                timeout: float | None = None) -> subprocess.CompletedProcess:
    """killbench's own tools (pip, venv): no limits, but a process group that is killed on
    an interrupt, with output captured."""
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True, text=True)
    with _active_lock:
        _active.add(proc.pid)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        _killpg(proc.pid)
        proc.wait()
        raise
    finally:
        with _active_lock:
            _active.discard(proc.pid)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


class Server:
    """A long-lived child (the warm runner): the same exec prefix and isolation as a run,
    jobs in on a pipe, answers out on stdout, one JSON line each. Killed with its group."""

    def __init__(self, spawn: Spawn):
        jobs_read, self._jobs = os.pipe()
        self._answers, answers_write = os.pipe()
        env = dict(spawn.env, KILLBENCH_WARM_FD=f"{jobs_read},{answers_write}")
        self.spawn = spawn
        self._stdout = open(spawn.stdout, "wb")
        self._stderr = open(spawn.stderr, "wb")
        try:
            self.proc = subprocess.Popen(command(spawn), cwd=spawn.cwd, env=env, stdout=self._stdout,
                                         stderr=self._stderr, stdin=subprocess.DEVNULL,
                                         start_new_session=True, pass_fds=(jobs_read, answers_write))
        finally:
            os.close(jobs_read)
            os.close(answers_write)
        with _active_lock:
            _active.add(self.proc.pid)
        self._buf = b""

    def read(self, timeout: float | None) -> dict | None:
        """The next answer, or None when none came in time or the server is gone."""
        deadline = None if timeout is None else time.monotonic() + timeout
        fd = self._answers
        while b"\n" not in self._buf:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        try:
            return json.loads(line)
        except ValueError:
            return {"garbage": line[-200:].decode("utf-8", "replace")}

    def send(self, job: dict) -> bool:
        try:
            os.write(self._jobs, (json.dumps(job) + "\n").encode())
            return True
        except OSError:
            return False

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        try:
            os.close(self._jobs)
        except OSError:
            pass
        _killpg(self.proc.pid)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        with _active_lock:
            _active.discard(self.proc.pid)
        for f in (self._stdout, self._stderr):
            f.close()
        try:
            os.close(self._answers)
        except OSError:
            pass
