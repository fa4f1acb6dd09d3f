"""Attempt by attempt, what a model-driven run asked and what the gate said.

    python bench/attempts.py RUN_DIR

Prints, per attempt number: attempts made, answers identical to the same task's previous
attempt (the same candidate file: a retry that changed nothing), tests written, and the
gate's verdicts on them (kept, or the reason each test was rejected); then tokens in and
out as the API reported them, and model time. Reads the run directory only (its
candidates.jsonl, evidence/gate.jsonl and transcript.jsonl); scoring is `killbench score`'s.
"""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict
from pathlib import Path


def _lines(path: Path):
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass  # a torn last line
    return out


def main(run: Path) -> None:
    subs = _lines(run / "candidates.jsonl")
    gate = {}
    for e in _lines(run / "evidence" / "gate.jsonl"):
        gate[(e["candidate"], e["task"])] = e
    by_attempt: dict[int, Counter] = defaultdict(Counter)
    previous: dict[tuple, str] = {}
    for s in sorted(subs, key=lambda s: (s["target"], str(s["task"]), s["attempt"])):
        a = s["attempt"]
        c = by_attempt[a]
        c["attempts"] += 1
        key = (s["target"], s["task"])
        if previous.get(key) == s["candidate"]:
            c["identical to the previous attempt"] += 1
        previous[key] = s["candidate"]
        e = gate.get((s["candidate"], s["task"]))
        if e is None:
            c["not gated"] += 1
            continue
        if e.get("file_reason"):
            c[f"file rejected: {e['file_reason']}"] += 1
        for t in e.get("tests", []):
            c["tests"] += 1
            c["kept" if t.get("kept") else f"test rejected: {t.get('reason')}"] += 1
    for a in sorted(by_attempt):
        print(f"attempt {a}: " + ", ".join(f"{k} {v}" for k, v in sorted(by_attempt[a].items())))
    calls = [c for c in _lines(run / "transcript.jsonl") if c.get("kind", "call") == "call"
             and c.get("usage")]
    tin = sum(c["usage"]["input_tokens"] for c in calls)
    tout = sum(c["usage"]["output_tokens"] for c in calls)
    sent = [c for c in calls if not c.get("cached")]
    secs = sum(c.get("latency_s") or 0 for c in sent)
    print(f"model calls {len(calls)} ({len(calls) - len(sent)} from the response cache); tokens in "
          f"{tin:,}, out {tout:,}; model time {secs:.0f} s over the {len(sent)} sent"
          + (f", {sum(c['usage']['output_tokens'] for c in sent) / secs:.1f} output tokens/s "
             "(prompt time included)" if secs else ""))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
