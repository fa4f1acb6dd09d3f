"""What verify holds the summaries' token counts to, on transcripts of interrupted and resumed
runs: a resumed target asks its calls again and its own transcript answers them, so the
replies served again are not spent twice, and nothing an earlier start paid for is hidden."""

from __future__ import annotations

import json

from killbench.bundle import _tokens_from_transcript


def call(at: str, request: str, tokens_in: int, tokens_out: int, source: str = "api") -> dict:
    return {"kind": "call", "timestamp": f"2026-12-04T{at}.500+00:00", "request_hash": request,
            "source": source, "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out}}


def start(at: str, target: str) -> dict:
    return {"kind": "target-start", "target": target, "at": f"2026-12-04T{at}+00:00"}


def write(tmp_path, journal: list[dict], calls: list[dict]):
    (tmp_path / "journal.jsonl").write_text("".join(json.dumps(x) + "\n" for x in journal))
    (tmp_path / "transcript.jsonl").write_text("".join(json.dumps(x) + "\n" for x in calls))
    return _tokens_from_transcript(tmp_path)["*"]


def test_an_uninterrupted_run_counts_every_call(tmp_path):
    calls = [call("10:00:01", "a", 100, 10), call("10:00:02", "b", 200, 20),
             call("10:05:01", "a", 100, 10, source="cache")]  # the response cache, charged
    assert write(tmp_path, [start("10:00:00", "x"), start("10:05:00", "y")], calls) == (400, 40)


def test_a_resumed_target_counts_its_replayed_calls_once(tmp_path):
    journal = [start("10:00:00", "x"), start("11:00:00", "x")]
    calls = [call("10:00:01", "a", 100, 10), call("10:00:02", "b", 200, 20),
             call("11:00:01", "a", 100, 10, source="cache"),
             call("11:00:02", "b", 200, 20, source="cache"), call("11:00:03", "c", 400, 40)]
    assert write(tmp_path, journal, calls) == (700, 70)


def test_twice_interrupted_counts_each_paid_call_once(tmp_path):
    journal = [start("10:00:00", "x"), start("11:00:00", "x"), start("12:00:00", "x")]
    calls = [call("10:00:01", "a", 100, 10),
             call("11:00:01", "a", 100, 10, source="cache"), call("11:00:02", "b", 200, 20),
             call("12:00:01", "a", 100, 10, source="cache"),
             call("12:00:02", "b", 200, 20, source="cache"), call("12:00:03", "c", 400, 40)]
    assert write(tmp_path, journal, calls) == (700, 70)


def test_an_earlier_call_not_asked_again_is_still_counted(tmp_path):
    # the resumed start asked something else: what the first start paid for stays counted,
    # so a summary holding only the last start's budget differs from the transcript
    journal = [start("10:00:00", "x"), start("11:00:00", "x")]
    calls = [call("10:00:01", "a", 100, 10), call("10:00:02", "b", 200, 20),
             call("11:00:01", "a", 100, 10, source="cache"), call("11:00:02", "c", 400, 40)]
    assert write(tmp_path, journal, calls) == (700, 70)  # a once, b, c


def test_a_replay_is_matched_within_its_own_target_only(tmp_path):
    # y's cache hit on the same request does not excuse x's earlier call
    journal = [start("10:00:00", "x"), start("11:00:00", "x"), start("12:00:00", "y")]
    calls = [call("10:00:01", "a", 100, 10), call("11:00:01", "b", 200, 20),
             call("12:00:01", "a", 100, 10, source="cache")]
    assert write(tmp_path, journal, calls) == (400, 40)


def test_without_a_journal_every_call_counts(tmp_path):
    (tmp_path / "transcript.jsonl").write_text(
        json.dumps(call("10:00:01", "a", 100, 10)) + "\n"
        + json.dumps(call("10:00:02", "a", 100, 10, source="cache")) + "\n")
    assert _tokens_from_transcript(tmp_path)["*"] == (200, 20)
