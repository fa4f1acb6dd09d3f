"""The model layer, driven through the real openai and anthropic SDKs against loopback
servers (tests/model_servers.py): no key, no internet. What is checked is what a run
depends on: the request the SDK actually sent, usage taken from the API, the cache, the
budget's cap and refusal, retries, errors that lose nothing, and exact replay."""

from __future__ import annotations

import json
import re
import threading

import pytest

from killbench.errors import KillbenchError, UserError
from killbench.models import (
    Budget,
    BudgetExhausted,
    ModelError,
    Transcript,
    Usage,
    open_model,
    register_provider,
)
from killbench.models.registry import PROVIDERS

from model_servers import Fail, FakeAnthropic, FakeOpenAI, Reply

ENV = ["OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL",
       "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE", "ANTHROPIC_CUSTOM_HEADERS",
       "KILLBENCH_BASE_URL", "KILLBENCH_API_KEY"]
ASK = [{"role": "user", "content": "Write a test for add()."}]
# the transcript's line schema, as docs/models.md lists it
CALL_KEYS = {"seq", "timestamp", "kind", "attempt_id", "request_hash", "request",
             "requested_max_tokens", "client", "source", "cached", "sent", "response", "usage",
             "raw_usage", "latency_s", "error", "budget"}
REQUEST_KEYS = {"format", "provider", "model", "mode", "messages", "max_tokens", "temperature",
                "stop"}
REFUSAL_KEYS = {"seq", "timestamp", "kind", "attempt_id", "requested_max_tokens", "error",
                "budget"}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KILLBENCH_CACHE", str(tmp_path / "kbcache"))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture
def run_dir(tmp_path):
    path = tmp_path / "run"
    path.mkdir()
    return path


def lines(run_dir):
    return Transcript.read(run_dir / "transcript.jsonl")


def openai_client(server, run_dir, tmp_path, *, budget=None, no_cache=False, key="sk-test",
                  monkeypatch=None, **kw):
    if key:
        monkeypatch.setenv("OPENAI_API_KEY", key)
    return open_model("openai/gpt-test", cache_dir=tmp_path / "cache",
                      transcript=Transcript.for_run(run_dir), budget=budget,
                      base_url=server.url, no_cache=no_cache, **kw)


# --- openai SDK ------------------------------------------------------------------

def test_openai_chat_gets_text_and_usage(tmp_path, run_dir, monkeypatch):
    with FakeOpenAI(Reply("def test_add():\n    assert add(1, 2) == 3\n", 21, 13)) as server:
        client = openai_client(server, run_dir, tmp_path, monkeypatch=monkeypatch)
        resp = client.complete(ASK, max_tokens=64, stop=["\n\n\n"], attempt_id="t1/a1")
    assert resp.text.startswith("def test_add():")
    assert resp.usage == Usage(21, 13)
    assert (resp.cached, resp.finish_reason, resp.model, resp.max_tokens) == \
        (False, "stop", "gpt-test", 64)
    [req] = server.received
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer sk-test"
    # a non-OpenAI server gets the cap as max_tokens (older servers ignore the newer name)
    assert req.body == {"model": "gpt-test", "messages": ASK, "max_tokens": 64,
                        "temperature": 0.0, "stop": ["\n\n\n"]}
    [line] = lines(run_dir)
    assert set(line) == CALL_KEYS and set(line["request"]) == REQUEST_KEYS
    assert line["usage"] == {"input_tokens": 21, "output_tokens": 13}
    assert line["request_hash"] == resp.request_hash and line["attempt_id"] == "t1/a1"
    assert line["request"]["messages"] == ASK and line["source"] == "api"
    assert line["response"]["text"] == resp.text and line["error"] is None
    assert "sk-test" not in json.dumps(line)  # keys never reach the transcript


def test_openai_compatible_completion_mode_for_base_models(tmp_path, run_dir, monkeypatch):
    with FakeOpenAI(Reply("    assert add(2, 2) == 4\n", 9, 8, finish_reason="stop")) as server:
        monkeypatch.setenv("KILLBENCH_BASE_URL", server.url)
        client = open_model("openai-compatible/gemma3-270m", cache_dir=None,
                            transcript=Transcript.for_run(run_dir), budget=Budget(1000))
        resp = client.complete([{"role": "system", "content": "# tests for add\n"},
                                {"role": "user", "content": "def test_add():\n"}],
                               max_tokens=40, stop=["\ndef ", "\nclass "], mode="completion")
    assert resp.text == "    assert add(2, 2) == 4\n" and resp.usage == Usage(9, 8)
    [req] = server.received
    assert req.path == "/v1/completions"
    assert req.headers["authorization"].startswith("Bearer ")  # a dummy key: none was set
    assert req.body["prompt"] == "# tests for add\ndef test_add():\n"
    assert req.body["max_tokens"] == 40 and req.body["stop"] == ["\ndef ", "\nclass "]
    assert lines(run_dir)[0]["sent"]["endpoint"] == "completions"


def test_usage_missing_is_recorded_as_none_and_charged_the_cap(tmp_path, run_dir,
                                                               monkeypatch):
    budget = Budget(500)
    with FakeOpenAI(Reply("x = 1", usage=False)) as server:
        client = openai_client(server, run_dir, tmp_path, budget=budget,
                               monkeypatch=monkeypatch)
        resp = client.complete(ASK, max_tokens=100)
    assert resp.usage is None
    [line] = lines(run_dir)
    assert line["usage"] is None and "no usage" in line["usage_note"]
    assert (budget.spent_in, budget.spent_out) == (0, 100)
    assert budget.as_dict()["calls_without_usage"] == 1


# --- anthropic SDK -----------------------------------------------------------------

def test_anthropic_messages_request_and_usage(tmp_path, run_dir, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    budget = Budget(10_000)
    with FakeAnthropic(Reply("def test_sub():\n    assert sub(3, 1) == 2\n", 40, 17)) as server:
        client = open_model("anthropic/claude-test", cache_dir=tmp_path / "cache",
                            transcript=Transcript.for_run(run_dir), budget=budget,
                            base_url=server.url)
        resp = client.complete([{"role": "system", "content": "You write pytest tests."},
                                *ASK], max_tokens=256, stop=["```\n"], attempt_id="a1")
        with pytest.raises(UserError, match="completion"):
            client.complete(ASK, max_tokens=10, mode="completion")
    assert resp.text.startswith("def test_sub():") and resp.usage == Usage(40, 17)
    assert resp.finish_reason == "end_turn"
    [req] = server.received
    assert req.path == "/v1/messages"
    assert req.body["model"] == "claude-test" and req.body["max_tokens"] == 256
    assert req.body["messages"] == ASK  # the system message went to `system`
    assert req.body["system"] == "You write pytest tests."
    assert req.body["stop_sequences"] == ["```\n"]
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", req.headers["anthropic-version"])
    # the key goes out as x-api-key (SDK < 2) or Authorization: Bearer (SDK 2.x)
    sent_key = req.headers.get("x-api-key") or req.headers.get("authorization", "").removeprefix(
        "Bearer ")
    assert sent_key == "sk-ant-test"
    [line] = lines(run_dir)
    assert line["usage"] == {"input_tokens": 40, "output_tokens": 17}
    assert line["raw_usage"]["input_tokens"] == 40
    if "temperature" not in req.body:  # SDK 2.x: the API version takes no sampling params
        assert "temperature" in line["sent"]["not_sent"]
    assert (budget.spent_in, budget.spent_out) == (40, 17)


def test_anthropic_rate_limit_is_retried_by_the_sdk(tmp_path, run_dir, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    with FakeAnthropic(Fail(429, "slow down"), Reply("ok", 5, 1)) as server:
        client = open_model("anthropic/claude-test", cache_dir=None, transcript=None,
                            budget=None, base_url=server.url, no_cache=True)
        assert client.complete(ASK, max_tokens=8).text == "ok"
    assert len(server.received) == 2


# --- cache -----------------------------------------------------------------------

def test_cache_hit_skips_the_server_and_is_still_charged(tmp_path, run_dir, monkeypatch):
    budget = Budget(1000)
    with FakeOpenAI(Reply("answer", 30, 20)) as server:
        client = openai_client(server, run_dir, tmp_path, budget=budget,
                               monkeypatch=monkeypatch)
        first = client.complete(ASK, max_tokens=50)
        second = client.complete(ASK, max_tokens=50)
    assert len(server.received) == 1
    assert (first.cached, second.cached) == (False, True)
    assert (second.text, second.usage, second.request_hash) == \
        (first.text, first.usage, first.request_hash)
    assert (budget.spent_in, budget.spent_out) == (60, 40)  # both responses count
    assert [line["source"] for line in lines(run_dir)] == ["api", "cache"]


def test_no_cache_reads_and_writes_nothing(tmp_path, run_dir, monkeypatch):
    with FakeOpenAI(Reply("one"), Reply("two")) as server:
        client = openai_client(server, run_dir, tmp_path, no_cache=True,
                               monkeypatch=monkeypatch)
        texts = [client.complete(ASK, max_tokens=50).text for _ in range(2)]
    assert texts == ["one", "two"] and len(server.received) == 2
    assert not (tmp_path / "cache").exists()


def test_cache_key_ignores_base_url_but_not_the_request(tmp_path, run_dir, monkeypatch):
    with FakeOpenAI(Reply("a"), Reply("b")) as one, FakeOpenAI(Reply("c")) as two:
        c1 = openai_client(one, run_dir, tmp_path, monkeypatch=monkeypatch)
        c2 = openai_client(two, run_dir, tmp_path, monkeypatch=monkeypatch)
        assert c1.complete(ASK, max_tokens=50).text == "a"
        assert c2.complete(ASK, max_tokens=50).cached  # same request, other server
        assert c1.complete(ASK, max_tokens=51).text == "b"  # another cap: another key
    assert len(one.received) == 2 and len(two.received) == 0


# --- budget ----------------------------------------------------------------------

def test_budget_caps_output_then_refuses_without_calling(tmp_path, run_dir, monkeypatch):
    budget = Budget(100)
    with FakeOpenAI(Reply("first", 30, 50), Reply("second", 30, 20), Reply("never")) as server:
        client = openai_client(server, run_dir, tmp_path, budget=budget,
                               monkeypatch=monkeypatch)
        assert client.complete(ASK, max_tokens=500).max_tokens == 100
        assert budget.remaining == 20
        assert client.complete(ASK, max_tokens=500, attempt_id="t/2").max_tokens == 20
        # the second call's input overshot the ceiling: kept and reported, not hidden
        assert (budget.spent, budget.remaining, budget.overshoot) == (130, -30, 30)
        assert budget.exhausted and budget.stop_reason is None
        with pytest.raises(BudgetExhausted) as info:
            client.complete(ASK, max_tokens=500, attempt_id="t/3")
    assert [r.body["max_tokens"] for r in server.received] == [100, 20]
    assert info.value.spent == 130 and not isinstance(info.value, ModelError)
    assert "130 of 100" in budget.stop_reason and "t/3" in budget.stop_reason
    assert budget.stopped_at is not None
    last = lines(run_dir)[-1]
    assert set(last) == REFUSAL_KEYS
    assert last["kind"] == "budget-exhausted" and last["attempt_id"] == "t/3"


def test_budget_is_thread_safe():
    budget = Budget(1000)
    granted = []

    def worker():
        for _ in range(50):
            try:
                cap = budget.reserve(7)
            except BudgetExhausted:
                return
            granted.append(cap)
            budget.settle(cap, 1, cap)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert budget.spent == sum(granted) + len(granted)
    assert budget.spent_out == sum(granted) and budget.exhausted
    assert budget.overshoot <= 8  # only inputs (1 token per call in flight) can overshoot


# --- retries and errors ------------------------------------------------------------

def test_rate_limit_then_success_is_retried_by_the_sdk(tmp_path, run_dir, monkeypatch):
    with FakeOpenAI(Fail(429, "rate limited"), Reply("after retry", 4, 2)) as server:
        client = openai_client(server, run_dir, tmp_path, monkeypatch=monkeypatch)
        assert client.complete(ASK, max_tokens=10).text == "after retry"
    assert len(server.received) == 2
    assert [r.headers.get("x-stainless-retry-count") for r in server.received] == ["0", "1"]
    assert len(lines(run_dir)) == 1


def test_server_error_forever_is_a_model_error_and_loses_nothing(tmp_path, run_dir,
                                                                 monkeypatch):
    budget = Budget(1000)
    with FakeOpenAI(Reply("kept", 10, 5)) as server:
        client = openai_client(server, run_dir, tmp_path, budget=budget, max_retries=2,
                               monkeypatch=monkeypatch)
        client.complete(ASK, max_tokens=10, attempt_id="a1")
        server.fail_forever(500, "the model is down")
        with pytest.raises(ModelError) as info:
            client.complete([{"role": "user", "content": "again"}], max_tokens=10,
                            attempt_id="a2")
    assert info.value.status == 500 and "HTTP 500" in str(info.value)
    assert "the model is down" in str(info.value) and "2 retries" in str(info.value)
    assert isinstance(info.value, KillbenchError)
    assert len(server.received) == 1 + 3  # one success, then 1 try + 2 retries
    first, failed = lines(run_dir)
    assert set(failed) == CALL_KEYS
    assert first["response"]["text"] == "kept" and first["attempt_id"] == "a1"
    assert failed["error"]["status"] == 500 and failed["response"] is None
    assert failed["request_hash"] == info.value.request_hash
    assert budget.spent == 15  # the failed call charged nothing


# --- replay ------------------------------------------------------------------------

def test_replay_gives_identical_responses_without_a_server(tmp_path, run_dir, monkeypatch):
    asks = [[{"role": "user", "content": f"task {i}"}] for i in range(3)]
    recorded_budget = Budget(150)
    with FakeOpenAI(Reply("t0", 20, 30), Reply("t1", 20, 30), Reply("t2", 20, 30, usage=False),
                    Reply("t0 again", 20, 5)) as server:
        client = openai_client(server, run_dir, tmp_path, budget=recorded_budget,
                               no_cache=True, monkeypatch=monkeypatch)
        recorded = [client.complete(a, max_tokens=60) for a in asks]
        with pytest.raises(BudgetExhausted):
            client.complete(asks[0], max_tokens=60)
    server.stop()  # nothing listens any more

    replay_dir = tmp_path / "replayed"
    budget = Budget(150)
    replay = open_model(f"replay/{run_dir}", cache_dir=None,
                        transcript=Transcript.for_run(replay_dir), budget=budget)
    replayed = [replay.complete(a, max_tokens=60) for a in asks]
    with pytest.raises(BudgetExhausted):
        replay.complete(asks[0], max_tokens=60)
    for old, new in zip(recorded, replayed):
        assert (new.text, new.usage, new.request_hash, new.model, new.finish_reason,
                new.max_tokens) == (old.text, old.usage, old.request_hash, old.model,
                                    old.finish_reason, old.max_tokens)
        assert new.cached
    assert budget.as_dict()["spent"] == recorded_budget.as_dict()["spent"]
    calls = [line for line in lines(replay_dir) if line["kind"] == "call"]
    assert [line["source"] for line in calls] == ["replay"] * 3
    assert [line["replayed_seq"] for line in calls] == [0, 1, 2]
    assert set(calls[0]) == CALL_KEYS | {"recorded_latency_s", "replayed_seq"}
    assert "no usage" in calls[2]["usage_note"]

    with pytest.raises(ModelError) as info:
        open_model(f"replay/{run_dir}", cache_dir=None, transcript=None, budget=None) \
            .complete([{"role": "user", "content": "never asked"}], max_tokens=60)
    assert re.search(r"request [0-9a-f]{64} was not in", str(info.value))
    assert info.value.request_hash in str(info.value)


def test_replay_raises_recorded_failures_again(tmp_path, run_dir, monkeypatch):
    with FakeOpenAI() as server:
        server.fail_forever(503)
        client = openai_client(server, run_dir, tmp_path, max_retries=0,
                               monkeypatch=monkeypatch)
        with pytest.raises(ModelError):
            client.complete(ASK, max_tokens=10)
    replay = open_model(f"replay/{run_dir}", cache_dir=None, transcript=None, budget=None)
    with pytest.raises(ModelError) as info:
        replay.complete(ASK, max_tokens=10)
    assert info.value.status == 503


def test_cap_parameter_name_follows_the_server():
    from killbench.models.openai_provider import _is_official

    assert _is_official(None) and _is_official("https://api.openai.com/v1")
    assert not _is_official("http://127.0.0.1:8080/v1")


# --- names, keys, providers ----------------------------------------------------------

@pytest.mark.parametrize("name, needle", [
    ("gpt-4.1", "provider/model"),
    ("openai/", "provider/model"),
    ("nosuch/model", "unknown model provider 'nosuch'"),
    ("openai/gpt-4.1", "OPENAI_API_KEY"),
    ("anthropic/claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
    ("openai-compatible/llama", "--base-url"),
    ("local/no-such-model", "unknown local model 'no-such-model'"),
    ("replay/does/not/exist", "no transcript"),
])
def test_bad_names_and_missing_keys_say_what_to_do(name, needle):
    with pytest.raises(UserError) as info:
        open_model(name, cache_dir=None, transcript=None, budget=None)
    assert needle in str(info.value)


def test_missing_key_message_offers_base_url():
    with pytest.raises(UserError, match=r"set OPENAI_API_KEY, or use --base-url"):
        open_model("openai/gpt-4.1", cache_dir=None, transcript=None, budget=None)


def test_registry_is_extensible(tmp_path):
    from killbench.models import ClientSettings, ModelClient
    from killbench.models.base import Reply as ProviderReply

    class Echo(ModelClient):
        def _send(self, request, key):
            return ProviderReply(text=request["messages"][-1]["content"], input_tokens=1,
                                 output_tokens=1, finish_reason="stop", model=self.model)

    def factory(settings: ClientSettings) -> ModelClient:
        return Echo(settings)

    register_provider("echo-test", factory)
    try:
        client = open_model("echo-test/m", cache_dir=tmp_path / "c", transcript=None,
                            budget=Budget(10))
        assert client.complete(ASK, max_tokens=5).text == ASK[0]["content"]
        with pytest.raises(ValueError):
            register_provider("echo-test", factory)
    finally:
        PROVIDERS.pop("echo-test", None)


def test_bad_requests_are_user_errors(tmp_path):
    (tmp_path / "transcript.jsonl").write_text("")
    client = open_model(f"replay/{tmp_path}", cache_dir=None, transcript=None, budget=None)
    for bad in ([], [{"role": "robot", "content": "x"}], [{"content": "x"}]):
        with pytest.raises(UserError):
            client.complete(bad, max_tokens=5)
    with pytest.raises(UserError):
        client.complete(ASK, max_tokens=0)


def test_transcript_drops_a_torn_last_line_and_keeps_appending(tmp_path):
    path = tmp_path / "transcript.jsonl"
    with Transcript(path) as transcript:
        transcript.append({"kind": "call", "n": 1})
    with open(path, "a", encoding="utf-8") as fh:
        fh.write('{"kind": "call", "n": 2, "cut sh')  # a kill mid-write
    assert [line["n"] for line in Transcript.read(path)] == [1]
    with Transcript(path) as transcript:
        transcript.append({"kind": "call", "n": 3})
    assert [(line["seq"], line["n"]) for line in Transcript.read(path)] == [(0, 1), (1, 3)]


def test_fixed_sampler_settings_reach_the_server_name_the_request_and_replay(
        tmp_path, run_dir, monkeypatch):
    """A local model's repetition penalty changes its answers, so it is sent with every
    request, is part of the request key (a cache entry made without it never answers a
    request with it), and a replay of such a run asks exactly the same questions."""
    with FakeOpenAI(Reply("plain", 10, 2), Reply("penalised", 10, 3)) as server:
        plain = openai_client(server, run_dir, tmp_path, monkeypatch=monkeypatch)
        first = plain.complete(ASK, max_tokens=32)
        sampled = openai_client(server, run_dir, tmp_path, monkeypatch=monkeypatch)
        sampled.sampling = {"repeat_penalty": 1.1}
        second = sampled.complete(ASK, max_tokens=32)
        bodies = [r.body for r in server.received]
    assert "repeat_penalty" not in bodies[0] and bodies[1]["repeat_penalty"] == 1.1
    assert (first.text, second.text) == ("plain", "penalised")  # no cache hit across them
    assert first.request_hash != second.request_hash and not second.cached
    calls = [line for line in lines(run_dir) if line["kind"] == "call"]
    assert "sampling" not in calls[0]["request"]
    assert calls[1]["request"]["sampling"] == {"repeat_penalty": 1.1}

    sampled_run = tmp_path / "sampled"
    sampled_run.mkdir()
    (sampled_run / "transcript.jsonl").write_text(json.dumps(calls[1]) + "\n")
    replay = open_model(f"replay/{sampled_run}", cache_dir=None, transcript=None, budget=None)
    again = replay.complete(ASK, max_tokens=32)
    assert (again.text, again.request_hash) == ("penalised", second.request_hash)
    with pytest.raises(UserError, match="different sampler settings"):
        (sampled_run / "transcript.jsonl").write_text(
            json.dumps(calls[0]) + "\n" + json.dumps(calls[1]) + "\n")
        open_model(f"replay/{sampled_run}", cache_dir=None, transcript=None, budget=None)


def test_the_qwen_models_are_served_with_a_repetition_penalty():
    from killbench.models.local import CATALOGUE

    for name in ("qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"):
        assert dict(CATALOGUE[name].sampling) == {"repeat_penalty": 1.1}
    assert CATALOGUE["gemma3-270m"].sampling == ()  # its cache entries keep their keys


def test_the_console_drops_the_http_clients_request_lines_unless_verbose(
        tmp_path, run_dir, monkeypatch, caplog):
    """Every model request logged an "HTTP Request" line at INFO: the SDK's HTTP client is
    httpx2 now, and only httpx's logger was quietened."""
    import logging

    from killbench import cli
    quiet = ("httpx", "httpx2", "httpcore", "httpcore2", "openai", "anthropic")
    before = {n: logging.getLogger(n).level for n in quiet}
    for n in quiet:  # an earlier CLI call in the same process may have quietened them
        logging.getLogger(n).setLevel(logging.NOTSET)
    caplog.set_level(logging.INFO)
    with FakeOpenAI(Reply("x", 1, 1), Reply("y", 1, 1)) as server:
        client = openai_client(server, run_dir, tmp_path, monkeypatch=monkeypatch)
        client.complete(ASK, max_tokens=8, attempt_id="loud")
        loud = [r.name for r in caplog.records if not r.name.startswith("killbench")]
        assert loud, "the control: an HTTP client logs a request at INFO by default"
        caplog.clear()
        names = {n.split(".")[0] for n in loud}
        try:
            cli._setup_logging(verbose=False)
            client.complete(ASK + [{"role": "user", "content": "again"}], max_tokens=8,
                            attempt_id="quiet")
        finally:
            for name in names | set(quiet):
                logging.getLogger(name).setLevel(before.get(name, logging.NOTSET))
        assert len(server.received) == 2  # the second request was sent, not cached
        assert [r.name for r in caplog.records if not r.name.startswith("killbench")] == []
