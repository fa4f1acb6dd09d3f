"""The real local model, end to end: llama.cpp's server on loopback, started by
killbench, driven through the official openai SDK over HTTP, running targeted-gated
on the fixture target `basic` into a run directory with transcripts, gate results and
real token counts. Needs the `local` extra (.ci/run installs it); without it these
tests are skipped, saying so, except the ones that check the error a user then gets.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from killbench.errors import UserError
from killbench.models import Budget, Transcript, open_model
from killbench.models import local
from killbench.run import run_generator

MODEL = "local/gemma3-270m"
MISSING = local.missing_modules(local.CATALOGUE["gemma3-270m"].package)
needs_extra = pytest.mark.skipif(
    bool(MISSING), reason=f"the `local` extra is not installed (missing: {', '.join(MISSING)}): "
                          f"{local.INSTALL_HINT}")


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
                        lambda name, *a: None if name == "llama_cpp" else real(name, *a))
    with pytest.raises(UserError, match=r"needs the optional extra `local` \(missing: "
                                        r"llama-cpp-python.*\): pip install -e \.\[local\]"):
        open_model(MODEL, cache_dir=None, transcript=None, budget=None)


def test_unknown_local_model_is_a_clear_error():
    with pytest.raises(UserError, match="unknown local model 'nope'.*local/gemma3-270m"):
        open_model("local/nope", cache_dir=None, transcript=None, budget=None)


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
def test_server_starts_lazily_answers_and_the_cache_needs_no_server(tmp_path):
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
    local.shutdown()
    assert _gone(pid, 15)
    again = client().complete(ask, max_tokens=24, stop=["\ndef "], mode="completion")
    assert again.cached and again.text == resp.text and local._SERVERS == {}
    lines = Transcript.read(tmp_path / "run" / "transcript.jsonl")
    assert lines[0]["sent"]["endpoint"] == "completions" and lines[0]["source"] == "api"
    assert lines[0]["client"]["base_url"] == srv.base_url
    assert "llama-cpp-python" in lines[0]["client"]["sdk"]
    assert lines[1]["source"] == "cache"


CHILD = textwrap.dedent("""
    import sys, time
    from killbench.models import open_model
    c = open_model("local/gemma3-270m", cache_dir=None, transcript=None, budget=None,
                   no_cache=True)
    c.complete([{"role": "user", "content": "x = 1\\n"}], max_tokens=4, mode="completion")
    print(c.server.proc.pid, flush=True)
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
        pid = int(proc.stdout.readline())
        if how == "killed":  # no exit handler runs: the server's watchdog must notice
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        assert _gone(pid, 20), f"the llama.cpp server (pid {pid}) outlived killbench ({how})"
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
    gate = [json.loads(x) for x in (out / "gate.jsonl").read_text().splitlines()]
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
        assert g["kept"] or g["reason"] in ("syntax-error", "no-test-collected", "fails-on-clean",
                                            "did-not-detect", "flaky", "timeout", "gaming")
        assert (out / "candidates" / f"{g['candidate']}.py").is_file()
    budget = summary["budget"]
    assert budget["calls"] == len(calls) and budget["calls_without_usage"] == 0
    assert budget["spent_in"] == sum(c["usage"]["input_tokens"] for c in calls) > 0
    assert budget["spent_out"] == sum(c["usage"]["output_tokens"] for c in calls) > 0
    assert summary["attempts"] == len(gate) and summary["generator_gate_calls"] == len(gate)
    # what the closing note of the issue reports, in the test log (pytest -rA shows it)
    print(json.dumps({"wall_s": round(wall, 1), "attempts": len(gate),
                      "kept": sum(g["kept"] for g in gate),
                      "model_s_per_attempt": round(sum(c["latency_s"] for c in calls)
                                                   / len(calls), 2),
                      "tokens_in": budget["spent_in"], "tokens_out": budget["spent_out"],
                      "reasons": sorted(g["reason"] or "kept" for g in gate)}))
