"""What every model client does the same way, whatever the provider.

A generator only ever calls ``ModelClient.complete``. Around the provider-specific
``_send`` this base class applies the rules that make runs comparable and
reproducible: the budget caps the output and refuses calls once spent, the request is
hashed into the key shared by the cache and replay, a cache hit is marked and still
charged, and every call, failed or not, becomes one durable transcript line before the
generator sees its result. Providers only translate a request into one SDK call.
"""

from __future__ import annotations

import abc
import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from ..errors import KillbenchError, UserError
from .budget import BudgetExhausted, utc_now

if TYPE_CHECKING:
    from .budget import Budget
    from .cache import ResponseCache
    from .transcript import Transcript

Mode = Literal["chat", "completion"]
REQUEST_FORMAT = 1
ROLES = ("system", "user", "assistant")
DEFAULT_MAX_RETRIES = 5  # the SDKs' default is 2: too few for rate limits over a long run
SDK_RETRIED = (408, 409, 429)  # plus every 5xx: what both SDKs retry by themselves


class ModelError(KillbenchError):
    """A model call failed for good (after the SDK's retries); nothing recorded is lost."""

    def __init__(self, message: str, *, status: int | None = None,
                 request_hash: str | None = None):
        super().__init__(message)
        self.status = status
        self.request_hash = request_hash


def http_error(name: str, status: int, message: str, max_retries: int, key: str) -> ModelError:
    """The ModelError for an HTTP failure the SDK gave up on, saying whether it retried."""
    retried = status in SDK_RETRIED or status >= 500
    how = (f"still failing after {max_retries} retries by the SDK" if retried
           else "not retried: the request itself was refused")
    hint = {401: " (check the API key)", 403: " (the key may lack access to this model)",
            404: " (check the model name and the base URL)",
            429: " (rate limited: wait, or run fewer workers at once)"}.get(status, "")
    return ModelError(f"{name}: HTTP {status}, {how}: {message}{hint}",
                      status=status, request_hash=key)


@dataclass(frozen=True)
class Usage:
    """Token counts exactly as the API reported them (never estimated)."""

    input_tokens: int
    output_tokens: int

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens

    def as_dict(self) -> dict:
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens}


@dataclass(frozen=True)
class ModelResponse:
    text: str
    usage: Usage | None  # None: the API reported no usage (the transcript says so)
    latency_s: float
    cached: bool  # True: served from the cache or a replayed transcript, not a model
    request_hash: str
    model: str  # as the API named it (may be a dated snapshot of the requested name)
    finish_reason: str | None
    max_tokens: int  # the output cap actually applied (after the budget)


@dataclass
class Reply:
    """What a provider's ``_send`` hands back to the base class."""

    text: str
    input_tokens: int | None
    output_tokens: int | None
    finish_reason: str | None
    model: str
    sent: dict | None = None  # the parameters as the provider's API received them
    source: str = "api"  # api | cache | replay
    raw_usage: dict | None = None
    usage_note: str | None = None
    recorded_latency_s: float | None = None
    extra: dict = field(default_factory=dict)  # provider-specific optional transcript keys

    @property
    def usage(self) -> Usage | None:
        if self.input_tokens is None or self.output_tokens is None:
            return None
        return Usage(self.input_tokens, self.output_tokens)


@dataclass(frozen=True)
class ClientSettings:
    """Everything a provider factory gets; new fields get defaults so factories keep working."""

    provider: str
    model: str
    base_url: str | None = None
    cache: ResponseCache | None = None
    transcript: Transcript | None = None
    budget: Budget | None = None
    max_retries: int = DEFAULT_MAX_RETRIES
    timeout_s: float = 600.0


def canonical_json(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def request_key(request: dict) -> str:
    """The sha256 that names a request in the cache, the transcript and replay."""
    return hashlib.sha256(canonical_json(request)).hexdigest()


def build_request(provider: str, model: str, messages: list[dict], *, max_tokens: int,
                  temperature: float, stop: list[str] | None, mode: str,
                  sampling: dict | None = None) -> dict:
    """The canonical request: everything that can change the answer, and no base URL.

    ``sampling`` holds a client's fixed sampler settings beyond the temperature (a local
    model's repetition penalty): a key only when there are any, so every other request,
    and every cache entry written before the key existed, keeps its hash."""
    request = {
        "format": REQUEST_FORMAT,
        "provider": provider,
        "model": model,
        "mode": mode,
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": temperature,
        "stop": stop,
    }
    if sampling:
        request["sampling"] = dict(sampling)
    return request


def prompt_from_messages(messages: list[dict]) -> str:
    """Completion mode's prompt: the message contents joined with nothing in between,
    so the generator controls every character a base model sees."""
    return "".join(m["content"] for m in messages)


def _check_messages(messages) -> list[dict]:
    if not isinstance(messages, (list, tuple)) or not messages:
        raise UserError("messages must be a non-empty list of {'role': ..., 'content': ...} dicts")
    checked = []
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or set(msg) != {"role", "content"}:
            raise UserError(f"message {i} must be a dict with exactly the keys 'role' and "
                            f"'content', got {msg!r:.200}")
        if msg["role"] not in ROLES or not isinstance(msg["content"], str):
            raise UserError(f"message {i}: role must be one of {', '.join(ROLES)} and content "
                            f"a string, got role={msg['role']!r}")
        checked.append({"role": msg["role"], "content": msg["content"]})
    return checked


def _check_stop(stop) -> list[str] | None:
    if stop is None:
        return None
    if isinstance(stop, str):
        stop = [stop]
    stop = list(stop)
    if not all(isinstance(s, str) and s for s in stop):
        raise UserError(f"stop must be a list of non-empty strings, got {stop!r}")
    return stop or None


class ModelClient(abc.ABC):
    """The one interface generators use; subclasses implement ``_send`` only.

    ``modes`` lists the request modes the provider supports: ``chat`` (role-tagged
    messages) and ``completion`` (one raw prompt, for base models with no chat
    template).
    """

    modes: frozenset[str] = frozenset({"chat"})
    sdk: str | None = None  # "name version" of the SDK behind it, for the transcript
    sampling: dict | None = None  # fixed sampler settings sent with every request (local models)

    def __init__(self, settings: ClientSettings):
        self.settings = settings
        self.provider = settings.provider
        self.model = settings.model
        self.budget = settings.budget
        self.cache = settings.cache
        self.transcript = settings.transcript

    @property
    def name(self) -> str:
        return f"{self.provider}/{self.model}"

    def close(self) -> None:
        """Release network resources (the transcript belongs to the caller)."""

    def __enter__(self) -> ModelClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @abc.abstractmethod
    def _send(self, request: dict, key: str) -> Reply:
        """Make one call for ``request`` (the canonical request); raise ModelError on failure."""

    # --- the call ----------------------------------------------------------------

    def complete(self, messages: list[dict], *, max_tokens: int, temperature: float = 0.0,
                 stop: list[str] | None = None, mode: Mode = "chat",
                 attempt_id: str | None = None) -> ModelResponse:
        """Ask the model once, within the budget; the call is in the transcript on return."""
        if mode not in ("chat", "completion"):
            raise UserError(f"mode must be 'chat' or 'completion', not {mode!r}")
        if mode not in self.modes:
            raise UserError(
                f"{self.name} does not support mode={mode!r} (supported: "
                f"{', '.join(sorted(self.modes))}); completion mode needs an OpenAI-compatible "
                f"server (openai/... or openai-compatible/...)")
        messages = _check_messages(messages)
        stop = _check_stop(stop)
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens <= 0:
            raise UserError(f"max_tokens must be a positive integer, not {max_tokens!r}")
        temperature = float(temperature)

        granted = max_tokens
        if self.budget is not None:
            try:
                granted = self.budget.reserve(max_tokens, attempt_id=attempt_id)
            except BudgetExhausted as exc:
                self._record({"kind": "budget-exhausted", "attempt_id": attempt_id,
                              "requested_max_tokens": max_tokens,
                              "error": {"type": "BudgetExhausted", "message": str(exc)},
                              "budget": self.budget.as_dict()})
                raise
        request = build_request(self.provider, self.model, messages, max_tokens=granted,
                                temperature=temperature, stop=stop, mode=mode,
                                sampling=self.sampling)
        key = request_key(request)
        started = time.monotonic()
        try:
            reply = self._from_cache(request, key) or self._send(request, key)
        except BaseException as exc:
            if self.budget is not None:
                self.budget.release(granted)
            if isinstance(exc, Exception):
                status = exc.status if isinstance(exc, ModelError) else None
                self._record(self._entry(request, key, max_tokens, attempt_id, None,
                                         time.monotonic() - started, error={
                                             "type": type(exc).__name__, "status": status,
                                             "message": str(exc)}))
            if isinstance(exc, ModelError) and exc.request_hash is None:
                exc.request_hash = key
            raise
        latency = time.monotonic() - started

        if self.budget is not None:
            self.budget.settle(granted, reply.input_tokens, reply.output_tokens)
        if reply.usage is None and reply.usage_note is None:
            reply.usage_note = (
                "the API returned no usage: input and output tokens are unknown (recorded "
                f"as null); the budget was charged the output cap of {granted} tokens")
        # the transcript first: it is the record; the cache is only a saving
        self._record(self._entry(request, key, max_tokens, attempt_id, reply, latency))
        if reply.source == "api" and self.cache is not None:
            self.cache.put(key, {
                "request": request, "text": reply.text,
                "usage": reply.usage.as_dict() if reply.usage else None,
                "raw_usage": reply.raw_usage, "finish_reason": reply.finish_reason,
                "model": reply.model, "latency_s": latency, "created": utc_now()})
        return ModelResponse(text=reply.text, usage=reply.usage, latency_s=latency,
                             cached=reply.source != "api", request_hash=key, model=reply.model,
                             finish_reason=reply.finish_reason, max_tokens=granted)

    def _from_cache(self, request: dict, key: str) -> Reply | None:
        if self.cache is None:
            return None
        entry = self.cache.get(key)
        if entry is None or entry.get("request") != request:
            return None
        usage = entry.get("usage") or {}
        return Reply(text=entry["text"], input_tokens=usage.get("input_tokens"),
                     output_tokens=usage.get("output_tokens"),
                     finish_reason=entry.get("finish_reason"),
                     model=entry.get("model", self.model),
                     source="cache", raw_usage=entry.get("raw_usage"),
                     recorded_latency_s=entry.get("latency_s"))

    def _entry(self, request: dict, key: str, requested: int, attempt_id: str | None,
               reply: Reply | None, latency: float, error: dict | None = None) -> dict:
        """One ``call`` line; its keys are listed in docs/models.md (always all present)."""
        entry = {
            "kind": "call",
            "attempt_id": attempt_id,
            "request_hash": key,
            "request": request,
            "requested_max_tokens": requested,
            "client": {"name": self.name, "sdk": self.sdk, "base_url": self.settings.base_url},
            "source": reply.source if reply else None,
            "cached": reply is not None and reply.source != "api",
            "sent": reply.sent if reply else None,
            "response": {"text": reply.text, "finish_reason": reply.finish_reason,
                         "model": reply.model} if reply else None,
            "usage": reply.usage.as_dict() if reply and reply.usage else None,
            "raw_usage": reply.raw_usage if reply else None,
            "latency_s": round(latency, 6),
            "error": error,
            "budget": self.budget.as_dict() if self.budget is not None else None,
        }
        if reply is not None:  # the optional keys
            if reply.usage_note:
                entry["usage_note"] = reply.usage_note
            if reply.recorded_latency_s is not None:
                entry["recorded_latency_s"] = reply.recorded_latency_s
            entry.update(reply.extra)
        return entry

    def _record(self, entry: dict) -> None:
        if self.transcript is not None:
            self.transcript.append({"timestamp": utc_now(), **entry})
