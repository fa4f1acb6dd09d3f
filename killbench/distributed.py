"""Per-target jobs on a Dask distributed cluster instead of this machine.

Each target is one Dask task. The worker calls the same library function the local
path calls, with its own cache (``KILLBENCH_CACHE`` on the worker), and sends back
plain data; the client writes each target's output as soon as its task completes, so
a worker that dies loses only the target it was running. Dask, not a scheduler of our
own: it already handles workers joining, dying and being retried, and users run it.
How to start a cluster: docs/distributed.md.
"""

from __future__ import annotations

import hashlib
import logging
import sys
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable

from . import __version__
from .errors import ExitCode, HarnessError, KillbenchError, UserError

LOCAL = "local"

Task = tuple[Callable[..., Any], dict]
OnResult = Callable[[str, Any, "KillbenchError | None"], None]


class TaskError(KillbenchError):
    """A KillbenchError raised on a worker, rebuilt on the client with its exit code
    (exceptions are carried as data: TargetError and friends do not unpickle)."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = ExitCode(exit_code)


def identity() -> dict:
    """What must match for a worker's results to be the ones this machine would get:
    killbench's code (all of it: sampling and manifests are decided outside the
    instrument too) and the Python minor version (it decides bytecode and ASTs)."""
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
    return {"killbench": __version__, "code": h.hexdigest()[:16],
            "python": "%d.%d" % sys.version_info[:2]}


def _worker_jobs() -> int:
    """Sandboxes per task: the worker's cores shared among its threads (tasks at once)."""
    from distributed import get_worker

    from .harness import default_jobs

    return max(1, default_jobs() // max(1, get_worker().state.nthreads))


def run_on_worker(fn: Callable[..., Any], kwargs: dict, expected: dict) -> dict:
    """The Dask task. ``jobs=None`` in kwargs means this worker's share of its cores."""
    try:
        mine = identity()
        if mine != expected:
            raise UserError(f"this worker runs killbench {mine}, the client {expected}: install "
                            "the same killbench on every worker (results depend on its code)")
        if "jobs" in kwargs and kwargs["jobs"] is None:
            kwargs = {**kwargs, "jobs": _worker_jobs()}
        return {"value": fn(**kwargs)}
    except KillbenchError as exc:
        return {"error": {"message": str(exc), "exit_code": int(exc.exit_code)}}


def _connect_timeout() -> float:
    import dask
    from dask.utils import parse_timedelta

    return parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), default="s")


@contextmanager
def _client(address: str, n_workers: int):
    from distributed import Client, LocalCluster

    if not logging.getLogger("killbench").isEnabledFor(logging.DEBUG):
        logging.getLogger("distributed").setLevel(logging.WARNING)  # its INFO is per-worker chatter
    if address == LOCAL:
        try:
            cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                   dashboard_address=None, memory_limit=0,
                                   silence_logs=logging.ERROR)
        except Exception as exc:
            raise HarnessError(f"could not start a local Dask cluster: {type(exc).__name__}: {exc}") from exc
        with cluster, Client(cluster, set_as_default=False) as client:
            yield client
        return
    timeout = _connect_timeout()
    try:
        client = Client(address, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise UserError(
            f"could not connect to the Dask scheduler at {address} within {timeout:g} s ({exc}); "
            "start one with `dask scheduler` and pass the address it prints, or use --scheduler "
            "local (docs/distributed.md)") from None
    try:
        try:
            client.wait_for_workers(1, timeout=timeout)
        except TimeoutError:
            raise UserError(f"the Dask scheduler at {address} has no worker after {timeout:g} s; "
                            f"start one on each machine with `dask worker {address}`") from None
        yield client
    finally:
        try:
            client.close()
        except OSError:  # the scheduler is gone: nothing is left to close
            pass


def _failure(name: str, exc: BaseException) -> HarnessError:
    from distributed import KilledWorker

    if isinstance(exc, KilledWorker):
        return HarnessError(f"target {name}: the Dask worker running it died ({exc}); other "
                            "targets' results are kept; run again to retry it (its journal on "
                            "the worker's cache resumes it)")
    hint = ("; install killbench on every worker" if isinstance(exc, ImportError) else "")
    return HarnessError(f"target {name}: its Dask task failed: {type(exc).__name__}: {exc}{hint}")


def _lost(address: str, exc: BaseException) -> HarnessError:
    return HarnessError(f"lost the connection to the Dask scheduler at {address} "
                        f"({type(exc).__name__}: {exc}); the targets that finished are written, "
                        "run again for the others")


def run_tasks(address: str, tasks: dict[str, Task], on_result: OnResult, n_workers: int = 1) -> None:
    """Run each named task on the cluster at ``address`` (or ``local``); call
    ``on_result(name, value, error)`` on this machine as each one completes."""
    from distributed import as_completed

    with _client(address, n_workers) as client:
        expected = identity()
        names = {}
        try:
            for name, (fn, kwargs) in tasks.items():
                fut = client.submit(run_on_worker, fn, kwargs, expected, pure=False,
                                    key=f"killbench-{name}-{uuid.uuid4().hex[:8]}")
                names[fut] = name
            done = iter(as_completed(list(names), loop=client.loop))
        except OSError as exc:
            raise _lost(address, exc) from None
        while True:
            try:
                fut = next(done)
            except StopIteration:
                break
            except OSError as exc:
                raise _lost(address, exc) from None
            name = names.pop(fut)
            try:
                out = fut.result()
            except Exception as exc:  # a dead worker, a lost scheduler, a bug on the worker
                out = {"failure": _failure(name, exc)}
            # on_result runs outside the try: its own errors (a full disk) are not the task's
            if "failure" in out:
                on_result(name, None, out["failure"])
            elif "error" in out:
                on_result(name, None, TaskError(**out["error"]))
            else:
                on_result(name, out["value"], None)
