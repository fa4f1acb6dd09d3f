"""The exec prefix of every sandboxed run: set the child's limits, then become the command.

killbench runs it as ``PYTHON -I -S killbench_launch.py SPEC -- COMMAND...`` (SPEC is a
JSON object). It applies, in this order and in the child's own process rather than in a
``preexec_fn`` (unsafe in a process with threads, and killbench gates from a thread pool):

    rlimits     {"RLIMIT_AS": n, ...}: set as soft and hard limit (CPU: hard = soft + 5)
    gid, uid    drop to this unprivileged user (inside the sandbox only), with no
                supplementary groups and no way to gain privileges again
    pdeathsig   the child gets this signal when killbench's thread that started it ends
                (set after the uid change, which would clear it)
    no_aslr     exec without address-space randomisation (CPython 3.11 hashes of None
                and of plain objects are addresses: set order would vary per process)
    rusage      a path: run the command as a child, wait for it, write its CPU time,
                peak memory and the signal that ended it there as JSON, and end as it ended (a sandbox's own init
                would otherwise reap it, and its CPU time be lost to killbench)

    cpu_budget  seconds (needs rusage): the CPU time the command's main thread may use;
                past it the command is killed and the JSON says "cpu_exceeded": true

then ``os.execv`` the command, so the limits and the user apply to it and its children.
Standard library only: it runs with the target environment's interpreter.
"""

import ctypes
import json
import os
import resource
import sys

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
ADDR_NO_RANDOMIZE = 0x0040000


def _libc():
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def main(argv):
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write("usage: killbench_launch.py SPEC -- COMMAND...\n")
        return 127
    spec = json.loads(argv[0])
    command = argv[2:]
    for name, value in spec.get("rlimits", {}).items():
        which = getattr(resource, name)
        hard = value + 5 if name == "RLIMIT_CPU" else value
        resource.setrlimit(which, (value, hard))
    libc = _libc()
    if spec.get("uid") is not None:
        os.setgroups([])
        os.setgid(int(spec["gid"]))
        os.setuid(int(spec["uid"]))
        if os.getuid() == 0 or os.geteuid() == 0:
            sys.stderr.write("killbench_launch: could not drop root\n")
            return 126
    if libc is not None:
        # after the uid change, which clears a parent-death signal set before it
        if spec.get("pdeathsig"):
            libc.prctl(PR_SET_PDEATHSIG, int(spec["pdeathsig"]), 0, 0, 0)
            if spec.get("parent") and os.getppid() != spec["parent"]:
                return 137  # killbench is already gone
        if spec.get("no_aslr"):
            current = libc.personality(0xFFFFFFFF)
            if current != -1:
                libc.personality(current | ADDR_NO_RANDOMIZE)
        if spec.get("uid") is not None:
            libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    if spec.get("rusage"):
        return _run_and_account(command, spec["rusage"], libc, spec.get("cpu_budget"))
    try:
        os.execv(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"killbench_launch: cannot execute {command[0]}: {exc}\n")
        return 127


def thread_cpu(pid):
    """CPU seconds used so far by the main thread of process `pid` (its other threads not
    counted); None once it is gone."""
    try:
        with open(f"/proc/{pid}/task/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        # after the command name: state is field 3 of proc(5), utime 14 and stime 15
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def wait_within(pid, deadline, budget):
    """Wait for child `pid`; kill it once its main thread has used `budget` CPU seconds, or
    at the monotonic `deadline`. Returns (status, rusage, why) with why None, "cpu" or
    "deadline"."""
    import signal
    import time

    if budget is None and deadline is None:
        while True:
            try:
                _, status, usage = os.wait4(pid, 0)
                return status, usage, None
            except InterruptedError:
                continue
    delay = 0.001
    while True:
        got, status, usage = os.wait4(pid, os.WNOHANG)
        if got:
            return status, usage, None
        why = None
        if budget is not None:
            used = thread_cpu(pid)
            if used is not None and used > budget:
                why = "cpu"
        if why is None and deadline is not None and time.monotonic() >= deadline:
            why = "deadline"
        if why is not None:
            got, status, usage = os.wait4(pid, os.WNOHANG)
            if got:  # it ended on its own meanwhile: as it ended
                return status, usage, None
            # a warm child leads its own group (what its tests started goes with it); the
            # exec prefix's command does not, and its leftovers go with the run's group
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            _, status, usage = os.wait4(pid, 0)
            return status, usage, why
        time.sleep(delay)
        delay = min(delay * 2, 0.02)


def _run_and_account(command, path, libc, budget=None):
    pid = os.fork()
    if pid == 0:
        try:
            if libc is not None:
                libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)
            os.execv(command[0], command)
        except OSError as exc:
            sys.stderr.write(f"killbench_launch: cannot execute {command[0]}: {exc}\n")
        os._exit(127)
    status, usage, why = wait_within(pid, None, budget)
    try:
        with open(path, "w") as fh:
            json.dump({"cpu_s": usage.ru_utime + usage.ru_stime, "max_rss_kb": usage.ru_maxrss,
                       "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
                       "cpu_exceeded": why == "cpu"}, fh)
    except OSError:
        pass
    if os.WIFSIGNALED(status):
        import signal

        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
