"""``replay/RUN_DIR``: answer from a recorded run's transcript, with no network.

A submission must be re-scorable by anyone without calling a model, and a run must be
re-executable exactly. Replay looks each request up by its full request key (the same
sha256 as the cache), so it answers only the exact questions the recorded run asked;
anything else is a ``ModelError`` naming the request hash, never a guess. When one
request was asked several times its recorded answers are given back in order, and a
recorded failure is raised again, so a deterministic generator takes the same path.
Usage is replayed as recorded, so the budget runs out at the same call.
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict, deque
from pathlib import Path

from ..errors import UserError
from .base import ClientSettings, ModelClient, ModelError, Reply, canonical_json
from .transcript import TRANSCRIPT_NAME, Transcript


class ReplayClient(ModelClient):
    modes = frozenset({"chat", "completion"})
    sdk = None

    def __init__(self, settings: ClientSettings, run_dir: Path, calls: list[dict]):
        super().__init__(settings)
        self.run_dir = run_dir
        self._lock = threading.Lock()
        self._answers: dict[str, deque] = defaultdict(deque)
        for call in calls:
            self._answers[call["request_hash"]].append(call)

    @property
    def name(self) -> str:
        return f"replay/{self.run_dir}"

    def _send(self, request: dict, key: str) -> Reply:
        with self._lock:
            queue = self._answers.get(key)
            call = queue.popleft() if queue else None
        if call is None:
            asked = "asked more often than" if key in self._answers else "not in"
            raise ModelError(
                f"replay: request {key} was {asked} {self.run_dir / TRANSCRIPT_NAME} "
                f"(model {request['provider']}/{request['model']}, mode {request['mode']}, "
                f"max_tokens {request['max_tokens']}): the generator asked something the "
                "recorded run did not (a different prompt, budget or generator version)",
                request_hash=key)
        if call.get("error"):
            err = call["error"]
            raise ModelError(f"replay of a recorded failure: {err.get('message')}",
                             status=err.get("status"), request_hash=key)
        usage = call.get("usage") or {}
        response = call["response"]
        return Reply(text=response["text"], input_tokens=usage.get("input_tokens"),
                     output_tokens=usage.get("output_tokens"),
                     finish_reason=response.get("finish_reason"),
                     model=response.get("model") or request["model"], source="replay",
                     raw_usage=call.get("raw_usage"), usage_note=call.get("usage_note"),
                     recorded_latency_s=call.get("latency_s"),
                     extra={"replayed_seq": call.get("seq")})


def open_replay(settings: ClientSettings) -> ModelClient:
    """``replay/RUN_DIR``: RUN_DIR is everything after ``replay/`` (a path may hold slashes)."""
    run_dir = Path(settings.model).expanduser()
    path = run_dir / TRANSCRIPT_NAME
    if not path.is_file():
        raise UserError(f"replay/{settings.model}: no transcript at {path}; give the "
                        "directory of a recorded run (the one holding transcript.jsonl)")
    calls = [line for line in Transcript.read(path)
             if line.get("kind") == "call" and line.get("request_hash")
             and (line.get("response") is not None or line.get("error"))]
    # a recorded failure that was not a model's answer (our own bug, an interrupt) is
    # not replayed as an error: only ModelErrors are part of what the run saw
    calls = [c for c in calls if c.get("response") is not None
             or (c.get("error") or {}).get("type") == "ModelError"]
    models = sorted({(c["request"]["provider"], c["request"]["model"]) for c in calls})
    if len(models) > 1:
        raise UserError(f"replay/{settings.model}: the transcript holds calls to several "
                        f"models ({', '.join('/'.join(m) for m in models)}); replay one run's "
                        "transcript at a time")
    samplings = {canonical_json(c["request"].get("sampling")).decode() for c in calls}
    if len(samplings) > 1:
        raise UserError(f"replay/{settings.model}: the transcript's calls were made with "
                        f"different sampler settings ({', '.join(sorted(samplings))}); replay "
                        "one run's transcript at a time")
    provider, model = models[0] if models else ("replay", str(run_dir))
    client = ReplayClient(ClientSettings(
        provider=provider, model=model, base_url=None, cache=None,
        transcript=settings.transcript, budget=settings.budget), run_dir, calls)
    client.sampling = json.loads(samplings.pop()) if samplings else None
    return client
