"""An append-only journal of results, so an interrupted run resumes without redoing,
losing or double-counting a verdict.

One JSON object per line, flushed and fsynced as each result arrives. The first line
is a header naming what the results depend on; a journal written for something else
is refused rather than mixed in. A last line cut short by a kill is dropped on open.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .errors import UserError


class Journal:
    def __init__(self, path: Path, header: dict):
        self.path = path
        self.header = header
        self.entries: dict[str, dict] = {}
        self.duplicates = 0
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and path.stat().st_size:
            self._load()
        else:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(json.dumps({"kind": "header", **header}, sort_keys=True) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
        self._fh = open(path, "a", encoding="utf-8")

    def _load(self) -> None:
        raw = self.path.read_bytes()
        good_end = raw.rfind(b"\n") + 1
        if good_end < len(raw):  # a torn last line: drop it so appends start clean
            with open(self.path, "r+b") as fh:
                fh.truncate(good_end)
            raw = raw[:good_end]
        lines = raw.decode("utf-8").splitlines()
        head = json.loads(lines[0]) if lines else {}
        head.pop("kind", None)
        if head != self.header:
            raise UserError(
                f"{self.path} was written for other settings ({head}); to start over, run with "
                f"--fresh (the old journal is then moved aside, not deleted)")
        for line in lines[1:]:
            entry = json.loads(line)
            if entry["id"] in self.entries:
                self.duplicates += 1
            self.entries[entry["id"]] = entry

    def done(self, key: str) -> bool:
        return key in self.entries

    def append(self, key: str, payload: dict) -> None:
        entry = {"id": key, **payload}
        self._fh.write(json.dumps(entry, sort_keys=True) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self.entries[key] = entry

    def close(self) -> None:
        self._fh.close()


def set_aside(path: Path) -> Path | None:
    """Move an old journal out of the way (kept, with a numbered suffix)."""
    if not path.exists():
        return None
    n = 1
    while path.with_name(f"{path.name}.old{n}").exists():
        n += 1
    dest = path.with_name(f"{path.name}.old{n}")
    path.rename(dest)
    return dest
