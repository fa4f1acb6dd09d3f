"""Loopback stand-ins for the OpenAI and Anthropic HTTP APIs, so the official SDKs can
be driven for real in tests without a key or the internet.

Each server answers from a script of recorded replies (text plus the usage numbers an
API would report), records every request it receives (path, headers, JSON body) and can
be told to fail: a scripted ``Fail`` answers one request with an HTTP error, and
``fail_forever`` makes every later request fail. Failures carry ``retry-after-ms`` so
the SDKs' own retry loops run without sleeping for seconds.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    """One recorded model answer; ``usage=False`` leaves the usage object out."""

    text: str
    input_tokens: int = 10
    output_tokens: int = 5
    finish_reason: str = "stop"
    usage: bool = True


@dataclass
class Fail:
    """One HTTP error answer."""

    status: int
    message: str = "scripted failure"


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: dict


@dataclass
class _State:
    script: deque = field(default_factory=deque)
    forever: Fail | None = None
    received: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class FakeServer:
    """Base: a threaded HTTP server on 127.0.0.1, an ephemeral port, a script."""

    routes: dict[str, str] = {}

    def __init__(self, *replies: Reply | Fail):
        self._state = _State(script=deque(replies))
        state, server_self = self._state, self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else {}
                except ValueError:
                    body = {"_unparsed": raw.decode("utf-8", "replace")}
                with state.lock:
                    state.received.append(Received(
                        "POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                    if state.forever is not None:
                        action = state.forever
                    elif state.script:
                        action = state.script.popleft()
                    else:
                        action = Fail(500, "fake server: no scripted reply left")
                kind = server_self.routes.get(self.path.split("?")[0])
                if kind is None:
                    action = Fail(404, f"fake server: no route {self.path}")
                if isinstance(action, Fail):
                    self._send(action.status, server_self.error_body(action),
                               {"retry-after-ms": "1"})
                else:
                    self._send(200, server_self.render(kind, body, action), {})

            def _send(self, status: int, payload: dict, headers: dict[str, str]):
                data = json.dumps(payload).encode("utf-8")
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    # --- control ---------------------------------------------------------------

    def __enter__(self) -> FakeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        if self._thread.is_alive():
            self._httpd.shutdown()
            self._thread.join(timeout=5)
        self._httpd.server_close()

    @property
    def root(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def add(self, *replies: Reply | Fail) -> None:
        with self._state.lock:
            self._state.script.extend(replies)

    def fail_forever(self, status: int, message: str = "scripted outage") -> None:
        with self._state.lock:
            self._state.forever = Fail(status, message)

    @property
    def received(self) -> list[Received]:
        with self._state.lock:
            return list(self._state.received)

    # --- API dialect, per subclass ---------------------------------------------

    def render(self, kind: str, body: dict, reply: Reply) -> dict:
        raise NotImplementedError

    def error_body(self, fail: Fail) -> dict:
        raise NotImplementedError


class FakeOpenAI(FakeServer):
    """Speaks ``POST /v1/chat/completions`` and ``POST /v1/completions``."""

    routes = {"/v1/chat/completions": "chat", "/v1/completions": "completion"}

    @property
    def url(self) -> str:
        return self.root + "/v1"

    def render(self, kind: str, body: dict, reply: Reply) -> dict:
        payload: dict = {"id": "fake-1", "created": 1700000000, "model": body.get("model", "")}
        if kind == "chat":
            payload["object"] = "chat.completion"
            payload["choices"] = [{
                "index": 0, "finish_reason": reply.finish_reason, "logprobs": None,
                "message": {"role": "assistant", "content": reply.text}}]
        else:
            payload["object"] = "text_completion"
            payload["choices"] = [{
                "index": 0, "finish_reason": reply.finish_reason, "logprobs": None,
                "text": reply.text}]
        if reply.usage:
            payload["usage"] = {
                "prompt_tokens": reply.input_tokens, "completion_tokens": reply.output_tokens,
                "total_tokens": reply.input_tokens + reply.output_tokens}
        return payload

    def error_body(self, fail: Fail) -> dict:
        return {"error": {"message": fail.message, "type": "server_error", "code": None}}


class FakeAnthropic(FakeServer):
    """Speaks ``POST /v1/messages`` (the Messages API)."""

    routes = {"/v1/messages": "messages"}

    @property
    def url(self) -> str:
        return self.root  # the SDK appends /v1/messages itself

    def render(self, kind: str, body: dict, reply: Reply) -> dict:
        payload: dict = {
            "id": "msg_fake", "type": "message", "role": "assistant",
            "model": body.get("model", ""),
            "content": [{"type": "text", "text": reply.text}],
            "stop_reason": {"stop": "end_turn", "length": "max_tokens"}.get(
                reply.finish_reason, reply.finish_reason),
            "stop_sequence": None,
        }
        if reply.usage:
            payload["usage"] = {"input_tokens": reply.input_tokens,
                                "output_tokens": reply.output_tokens}
        return payload

    def error_body(self, fail: Fail) -> dict:
        kind = {429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}.get(
            fail.status, "invalid_request_error")
        return {"type": "error", "error": {"type": kind, "message": fail.message}}
