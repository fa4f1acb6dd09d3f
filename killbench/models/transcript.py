"""The transcript: every model call of a run, one JSON line each, in the run directory.

It is what makes a run auditable (tokens in and out per attempt, what was asked, what
came back) and re-executable without a model (``replay/RUN_DIR`` answers from it). So
it is append-only and each line is flushed and fsynced before the caller gets its
response: a run killed at any point keeps every call it already paid for. A last line
cut short by a kill is dropped when the transcript is opened again.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

TRANSCRIPT_NAME = "transcript.jsonl"


class Transcript:
    """Append-only JSONL; safe to share between threads."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._seq = len(_read_lines(self.path, repair=True))
        self._fh = open(self.path, "a", encoding="utf-8")

    @classmethod
    def for_run(cls, run_dir: Path) -> Transcript:
        return cls(Path(run_dir) / TRANSCRIPT_NAME)

    def append(self, entry: dict) -> dict:
        """Write one line durably; returns the entry with its sequence number."""
        with self._lock:
            if self._fh.closed:
                raise ValueError(f"transcript {self.path} is closed")
            line = {"seq": self._seq, **entry}
            self._fh.write(json.dumps(line, sort_keys=True, ensure_ascii=False) + "\n")
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._seq += 1
            return line

    def close(self) -> None:
        with self._lock:
            self._fh.close()

    def __enter__(self) -> Transcript:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @staticmethod
    def read(path: Path) -> list[dict]:
        """Every complete line of a transcript (a torn last line is ignored, not repaired)."""
        return _read_lines(Path(path), repair=False)


def _read_lines(path: Path, *, repair: bool) -> list[dict]:
    if not path.exists():
        return []
    raw = path.read_bytes()
    good_end = raw.rfind(b"\n") + 1
    if good_end < len(raw) and repair:
        with open(path, "r+b") as fh:  # drop the torn line so appends start clean
            fh.truncate(good_end)
    return [json.loads(line) for line in raw[:good_end].decode("utf-8").splitlines() if line]
