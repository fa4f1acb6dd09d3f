"""One process at a time in a target's work directory.

Sandboxes, journals and baselines live under the work directory of a target's
fingerprint, at fixed names (sandboxes/gate0, ...). Two killbench processes on the same
target (two generators run side by side on one cache) would otherwise rebuild each
other's sandboxes mid-run. The lock is an flock, so a killed process never leaves it
held; within one process it is re-entrant (a run takes it, and the mutate or baseline
call inside takes it again).
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger("killbench")

_guard = threading.Lock()
_held: dict[str, list] = {}  # resolved work dir -> [fd, depth]


@contextmanager
def exclusive(workdir: Path, what: str):
    key = str(Path(workdir).resolve())
    with _guard:
        entry = _held.get(key)
        if entry is not None:
            entry[1] += 1
        else:
            Path(workdir).mkdir(parents=True, exist_ok=True)
            fd = os.open(os.path.join(key, ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                log.warning("%s: another killbench process is using %s; waiting for it", what, key)
                fcntl.flock(fd, fcntl.LOCK_EX)
            _held[key] = [fd, 1]
    try:
        yield
    finally:
        with _guard:
            entry = _held[key]
            entry[1] -= 1
            if entry[1] == 0:
                del _held[key]
                os.close(entry[0])  # closing the descriptor releases the flock
