"""The warm runner: a pytest session that collects a target's suite once, then runs each
mutant in a forked child with the mutant's function swapped in.

Loaded with ``-p killbench_warm`` into a normal killbench run of the target's own suite
(with the probe). After collection, ``pytest_runtestloop`` does not run the tests: it
answers jobs, one JSON line each on the first file descriptor named by KILLBENCH_WARM_FD
("JOBS,ANSWERS"), with one JSON line on the second (pytest and the tests own stdout):

    job     {"id", "report", "select": [node ids], "path": the mutated file as imported,
             "copies": every copy of it in the sandbox, "function": qualified name or null,
             "timeout": seconds, "cpu": the CPU seconds the child's main thread may use, or null,
             "segment": what of the file the child may leave out, or null (``mutated_code``)}
            (path null: the clean code, a kill's confirmation)
    answer  {"id", "status": wait status, "timed_out", "cpu_exceeded" (the timeout was the
             CPU budget), "wall_s", "cpu_s", "max_rss_kb"}
            (status 99 from the child: the mutant cannot be applied in place; run it cold)

The child (in a session of its own) compiles the mutated file as it is on disk (killbench
wrote the mutant there, so a lazy import sees it too), replaces the code of the mutant's
function, and of every function enclosing it, in every live function object made from them
(closures made later come from the mutated code), then runs the selected tests through
pytest's own protocol, stopping at the first failure, with the probe writing the job's
report. Only mutants inside a function body are applied this way; anything evaluated at
import or definition time (module and class bodies, defaults, decorators, annotations) is
for a cold run, unless nothing in the server was made from the mutated file (a module the
tests import lazily): then the tests' own import reads the mutant from disk, as cold. ``killbench doctor`` and every ``mutate`` run compare this path with the
plain one on a sample of mutants; a difference is a harness error, never a fallback.
"""

import ast
import gc
import json
import os
import signal
import sys
import time
import types
import weakref

import pytest
from killbench_launch import wait_within

CANNOT_APPLY = 99

# file -> qualified name -> weak references to every live function object compiled from
# that file's code of that name: taken once in the server after collection (nothing changes
# it between jobs: the server only forks), so a child finds a mutant's functions without
# walking the heap, which costs tens of milliseconds and copies every page it touches. Weak,
# so that no test sees an object kept alive by it, without the child having to drop it
# (dropping thousands of references touched, and so copied, thousands of pages per child);
# a test that counts a server function's weak references sees one more than in a plain run.
_FUNCTIONS = {}
# the real paths of the files the server's modules were imported from (``_live_from``)
_MODULE_FILES = set()


def _function_index():
    out = {}
    for obj in gc.get_objects():
        if isinstance(obj, types.FunctionType):
            c = obj.__code__
            out.setdefault(c.co_filename, {}).setdefault(c.co_qualname, []).append(weakref.ref(obj))
    return out


def _function_files():
    return {obj.__code__.co_filename for obj in gc.get_objects()
            if isinstance(obj, types.FunctionType)}


def _module_files():
    out = set()
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None)
        if isinstance(f, str):
            out.add(os.path.realpath(f))
    return out


def _codes(code, prefix=()):
    """qualname -> code object, over a module code's nested functions and classes."""
    out = {}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            out.setdefault(const.co_qualname, []).append(const)
            for k, v in _codes(const).items():
                out.setdefault(k, []).extend(v)
    return out


def _in_body(tree, qualname, start, end, starts):
    """Whether [start, end) lies inside the body of the function `qualname` (not its
    signature, defaults, decorators or annotations, which run at definition time)."""

    def walk(body, path):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                here = path + [node.name]
                name = ".".join(here)
                if name == qualname and not isinstance(node, ast.ClassDef):
                    first, last = node.body[0], node.body[-1]
                    s = starts[first.lineno - 1] + first.col_offset
                    e = starts[last.end_lineno - 1] + last.end_col_offset
                    return s <= start and end <= e
                inner = here + (["<locals>"] if not isinstance(node, ast.ClassDef) else [])
                if qualname.startswith(".".join(inner) + "."):
                    return walk(node.body, inner)
        return False

    return walk(tree.body, [])


def _line_starts(data):
    starts = [0]
    find = data.find
    i = find(b"\n")
    while i >= 0:
        starts.append(i + 1)
        i = find(b"\n", i + 1)
    return starts


def mutated_code(data, path, start, end, segment=None):
    """The mutated file's code, its syntax tree, line starts, and where the mutation lies in
    them; None on a syntax error. ``segment`` (from killbench, which read the clean file):
    {"blank": [[start, end], ...]}, the other top-level defs and classes, in bytes of the
    mutated file. Each is left out, its lines kept as empty ones, so that the rest (imports,
    module-level statements, the def or class that holds the mutation) compiles at its own
    lines and columns in the same module scope, to the same code objects as the whole file
    (tests/test_warm_segment.py), at a fraction of the cost."""
    if segment is not None:
        pieces, at, removed = [], 0, 0
        for first, after in segment["blank"]:
            pieces.append(data[at:first])
            lines = data.count(b"\n", first, after)
            pieces.append(b"\n" * lines)
            if after <= start:
                removed += (after - first) - lines
            at = after
        pieces.append(data[at:])
        data = b"".join(pieces)
        start, end = start - removed, end - removed
    try:
        tree = ast.parse(data)
        code = compile(tree, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return None
    return code, tree, _line_starts(data), start, end


def apply_in_place(path, function, start, end, segment=None):
    """Swap the mutated function's code (and its enclosing functions') into every live
    function object; False when the mutant cannot be applied this way."""
    if not function or "<lambda>" in function or "<genexpr>" in function:
        return False
    with open(path, "rb") as fh:
        data = fh.read()
    made = mutated_code(data, path, start, end, segment)
    if made is None and segment is not None:  # a part that does not compile: the file
        made = mutated_code(data, path, start, end)
    if made is None:
        return False
    code, tree, starts, start, end = made
    if not _in_body(tree, function, start, end, starts):
        return False
    mutated = _codes(code)
    chain = []
    parts = function.split(".<locals>.")
    for i in range(1, len(parts) + 1):
        chain.append(".<locals>.".join(parts[:i]))
    wanted = {}
    for name in chain:
        found = mutated.get(name, [])
        if len(found) != 1:
            return False  # two definitions share the name: which one is live is unknown
        wanted[name] = found[0]
    swapped = 0
    live = _FUNCTIONS.get(path, {})
    for name, new in wanted.items():
        for ref in live.get(name, ()):
            obj = ref()
            if obj is None:
                continue
            if obj.__code__.co_freevars != new.co_freevars:
                return False
            obj.__code__ = new
            swapped += 1
    return swapped > 0


def _live_from(copies):
    """Whether anything in this process was made from one of `copies` (the mutated file's
    places in the sandbox): a module imported from it, or a function compiled from it."""
    real = {os.path.realpath(p) for p in copies}
    return bool(real & _MODULE_FILES) or any(name in _FUNCTIONS for name in set(copies) | real)


def _apply(job):
    """Make the child see the mutant. A file nothing in the server was made from (a module
    the tests import lazily) needs nothing: the tests' own import reads the mutant killbench
    wrote to disk, as in a cold run. Otherwise only a function's body can be swapped in."""
    if not _live_from(job.get("copies") or [job["path"]]):
        return True
    if job.get("function") is None:
        return False  # module level, and the module is already live: a cold run imports it
    return apply_in_place(job["path"], job["function"], job["start"], job["end"],
                          job.get("segment"))


def _run_items(session, items):
    import killbench_probe as probe

    for i, item in enumerate(items):
        nextitem = items[i + 1] if i + 1 < len(items) else None
        item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
        if session.testsfailed:
            break
    code = 1 if session.testsfailed else 0
    probe.finish(code, session.testsfailed, len(items))
    return code


def _die_with(server_pid):
    """A forked child does not inherit the server's parent-death signal, and its own session
    takes it out of the server's process group: without this, a child still running when
    killbench and the server are killed (an endless-loop mutant) would run on forever."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != server_pid:  # the server died before the signal was armed
        os._exit(137)


def _child(session, job, by_id, server_pid):
    os.setsid()
    _die_with(server_pid)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    import tempfile

    import killbench_probe as probe

    for key, value in job.get("env", {}).items():  # a fresh HOME and TMPDIR for every job
        os.environ[key] = value
        if key in ("HOME", "TMPDIR"):
            os.makedirs(value, exist_ok=True)
    tempfile.tempdir = None

    missing = [n for n in job["select"] if n not in by_id]
    items = [by_id[n] for n in job["select"] if n in by_id]
    probe._reset({**probe._config(), "report": job["report"], "select": job["select"]})
    if job.get("path") is not None and not _apply(job):
        os._exit(CANNOT_APPLY)
    probe._emit({"event": "start", "pid": os.getpid(), "python": sys.version.split()[0],
                 "pytest": pytest.__version__, "warm": True})
    probe._emit({"event": "collected", "collected": len(by_id), "selected": len(items),
                 "missing": missing})
    session.testsfailed = 0
    session.shouldstop = session.shouldfail = False
    code = _run_items(session, items)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def serve(items, child, order=None, index=True, saved_cpu=None):
    """The server's loop, shared with the forked runner: answer each job by forking a child
    that runs ``child(job, server_pid)``, waiting for it up to the job's deadline and killing
    whatever it left in its session. True in a child whose ``child`` returned (the forked
    runner's goes on into pytest), False in the server when the jobs pipe closes. ``order``:
    the collected node ids in the order a run of the whole suite takes them (sent once).
    ``index``: take the index of live functions a child swaps code in (the forked runner's
    children never swap, and need only the files); ``saved_cpu``: sent in the ready line."""
    jobs_fd, answers_fd = (int(x) for x in os.environ["KILLBENCH_WARM_FD"].split(","))
    jobs = os.fdopen(jobs_fd, "r", encoding="utf-8")
    out = os.fdopen(answers_fd, "w", encoding="utf-8")
    if index:
        _FUNCTIONS.update(_function_index())
    else:
        _FUNCTIONS.update({name: {} for name in _function_files()})
    _MODULE_FILES.update(_module_files())
    print(json.dumps({"ready": True, "items": items, "pid": os.getpid(), "order": order,
                      "saved_cpu": saved_cpu}), file=out, flush=True)
    server_pid = os.getpid()
    for line in jobs:
        if not line.strip():
            continue
        job = json.loads(line)
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:
            try:
                # through their file objects: a child that returns into pytest would otherwise
                # have them close their descriptor numbers later, by then another file's
                out.close()
                jobs.close()
                child(job, server_pid)
            except BaseException:
                os._exit(98)
            return True
        # the deadline, or the child's main thread past its CPU budget: a timeout either way,
        # watched as the plain path's exec prefix watches a command
        status, usage, why = wait_within(pid, started + job["timeout"], job.get("cpu"))
        timed_out, cpu_exceeded = why is not None, why == "cpu"
        try:
            os.killpg(pid, signal.SIGKILL)  # whatever the child's tests left in its session
        except (ProcessLookupError, PermissionError):
            pass
        print(json.dumps({"id": job["id"], "status": status, "timed_out": timed_out,
                          "cpu_exceeded": cpu_exceeded,
                          "wall_s": round(time.monotonic() - started, 4),
                          "cpu_s": round(usage.ru_utime + usage.ru_stime, 4),
                          "max_rss_kb": int(usage.ru_maxrss)}), file=out, flush=True)
    return False


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):
    by_id = {item.nodeid: item for item in session.items}
    if serve(len(by_id), lambda job, server_pid: _child(session, job, by_id, server_pid),
             order=list(by_id)):
        os._exit(98)  # a warm child ends in _child, never here
    return True
