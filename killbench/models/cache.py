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


class TranscriptCache:
    """Answers from a run's own transcript: what a resumed run asks again is served from
    what the interrupted run already paid for (in the recorded order when a request was
    asked several times), so no completed model call is ever made twice. Only successful
    API answers are served; anything else is a miss and goes to the next cache or the model."""

    def __init__(self, path: Path):
        from collections import defaultdict, deque

        from .transcript import Transcript

        self._answers: dict[str, "deque"] = defaultdict(deque)
        for line in Transcript.read(path):
            if line.get("kind") == "call" and line.get("response") is not None \
                    and line.get("source") == "api" and line.get("request_hash"):
                self._answers[line["request_hash"]].append(line)

    def __len__(self) -> int:
        return sum(len(q) for q in self._answers.values())

    def get(self, key: str) -> dict | None:
        queue = self._answers.get(key)
        if not queue:
            return None
        call = queue.popleft()
        response = call["response"]
        return {"request": call["request"], "text": response["text"], "usage": call.get("usage"),
                "raw_usage": call.get("raw_usage"), "finish_reason": response.get("finish_reason"),
                "model": response.get("model"), "latency_s": call.get("latency_s")}

    def put(self, key: str, entry: dict) -> None:
        """The transcript is written by the client itself; nothing to store here."""


class ChainCache:
    """Several caches, asked in order; writes go to every one that stores."""

    def __init__(self, *caches):
        self.caches = [c for c in caches if c is not None]

    def get(self, key: str) -> dict | None:
        for c in self.caches:
            hit = c.get(key)
            if hit is not None:
                return hit
        return None

    def put(self, key: str, entry: dict) -> None:
        for c in self.caches:
            c.put(key, entry)
