"""`killbench run` killed at several points (SIGKILL: no exit handler runs) and run again with
the same command: the final score is the uninterrupted run's, and no model call that had
been answered is made again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

import fixture_generators as fg
from model_servers import FakeOpenAI, Reply

SIGN_GOOD = "from basic import sign\n\n\ndef test_sign_zero():\n    assert sign(0) == 1\n"


class Scripted(FakeOpenAI):
    """Answers as a function of the request: which function the task is in, which attempt."""

    def __init__(self):
        super().__init__(*[Reply("")] * 1000)

    def render(self, kind, body, reply):
        user = [m for m in body["messages"] if m["role"] == "user"]
        attempt = len(user)
        prompt = user[0]["content"]
        if "def is_big" in prompt:
            text = fg.DOES_NOT_DETECT if attempt == 1 else fg.KILLS_BOUNDARY
        else:
            text = ["I need more context.", fg.FAILS_ON_CLEAN, SIGN_GOOD][min(attempt, 3) - 1]
        return super().render(kind, body, Reply(f"```python\n{text}\n```", 100 + attempt, 20))


def _cmd(project, out, url):
    return [sys.executable, "-m", "killbench.cli", "run", "-g", "targeted-gated",
            "-m", "openai-compatible/fake", "--base-url", url, "-t", str(project),
            "-o", "functions=is_big,sign", "--out", str(out), "--jobs", "2", "--gate-timeout", "20",
            "--no-cache"]


def _calls(out) -> int:
    path = out / "transcript.jsonl"
    if not path.exists():
        return 0
    return sum(1 for x in path.read_text().splitlines() if '"kind": "call"' in x)


def _score(out) -> dict:
    s = json.loads((out / "score.json").read_text())
    t = s["targets"]["basic"]
    return {"kills": t["killed_task_ids"], "tests": t["test_funnel"], "files": t["file_funnel"],
            "rejected": t["rejections"], "by_test": t["kills_by_test"],
            "tokens": (t["cost"]["tokens_in"], t["cost"]["tokens_out"]), "complete": s["complete"]}


@pytest.mark.slow
def test_killed_and_resumed_run_scores_as_an_uninterrupted_one(fixture_target, kb_cache, tmp_path):
    project = fixture_target("basic")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(KILLBENCH_CACHE=str(kb_cache), NO_PROXY="127.0.0.1,localhost")
    with Scripted() as server:
        ref = tmp_path / "reference"
        proc = subprocess.run(_cmd(project, ref, server.url), env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-3000:]
        expected_calls = len(server.received)
        expected = _score(ref)
    assert expected["complete"] and expected["kills"] and expected_calls >= 6

    with Scripted() as server:
        out = tmp_path / "interrupted"
        kills = 0
        # kill after the 1st and the 4th answered call (the run is gating then), and once
        # while it scores; then let the same command finish
        for after_calls in (1, 4, None):
            child = subprocess.Popen(_cmd(project, out, server.url), env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            deadline = time.monotonic() + 600
            while child.poll() is None and time.monotonic() < deadline:
                if after_calls is not None and _calls(out) >= after_calls:
                    time.sleep(0.5)
                    break
                journal = out / "journal.jsonl"
                if after_calls is None and journal.exists() and "target-end" in journal.read_text():
                    time.sleep(1.5)  # generation has ended: scoring has begun
                    break
                time.sleep(0.1)
            if child.poll() is None:
                child.send_signal(signal.SIGKILL)
                child.wait()
                kills += 1
        final = subprocess.run(_cmd(project, out, server.url), env=env, capture_output=True, text=True)
        assert final.returncode == 0, final.stderr[-3000:]
        calls = len(server.received)
    assert kills >= 2, "the run ended before it could be interrupted"
    assert _score(out) == expected
    assert calls == expected_calls, f"{calls - expected_calls} answered model calls were made again"
    # what verify holds the summary to: the replies served again by the transcript are not
    # counted twice (a resumed 1.5B run's bundle once failed verify on exactly this)
    from killbench.bundle import _tokens_from_transcript

    assert _tokens_from_transcript(out)["*"] == expected["tokens"]
    # nothing counted twice: each (file, task) gated once, each attempt submitted once
    gate = [json.loads(x) for x in (out / "evidence" / "gate.jsonl").read_text().splitlines()]
    assert len(gate) == len({(g["candidate"], g["task"]) for g in gate})
    subs = [json.loads(x) for x in (out / "candidates.jsonl").read_text().splitlines()]
    assert len(subs) == len({(s["candidate"], s["task"], s["attempt"]) for s in subs})
