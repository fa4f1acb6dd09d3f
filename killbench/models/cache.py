"""The on-disk response cache: re-running a run asks no model twice the same question.

Entries are keyed by the request hash (see ``request_key``), one JSON file each,
written to a temporary name and renamed into place so that parallel writers and a kill
mid-write never leave a half entry. A cache hit is still charged to the budget (see
docs/models.md): the cache saves money and time, never changes what a run may do.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

CACHE_FORMAT = 1


class ResponseCache:
    def __init__(self, root: Path):
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        path = self._path(key)
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return None  # an unreadable entry is a miss; the next write replaces it
        if entry.get("format") != CACHE_FORMAT or entry.get("request_hash") != key:
            return None
        return entry

    def put(self, key: str, entry: dict) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps({"format": CACHE_FORMAT, "request_hash": key, **entry},
                          sort_keys=True, ensure_ascii=False)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
