"""Pre-registration: predictions stored, hashed and time-stamped before a run starts,
and shown beside the outcome after it.

A prediction is refused once the run has started (its config.json exists): a
prediction written after the fact is not a prediction. Each one is kept in
``predictions.jsonl`` next to the run with the sha256 of its text and the UTC time;
the scorer shows them and the person judging marks each held or missed (a model
never judges it).
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import datetime, timezone
from pathlib import Path

from .errors import UserError

FILE = "predictions.jsonl"


_OPS = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
        ">=": lambda a, b: a >= b, "==": lambda a, b: a == b}
METRICS = ("kills", "kill_rate", "kept", "within_function", "cross_function")


def parse_check(check: str) -> tuple[str, str, str, float]:
    """"SCOPE.METRIC OP NUMBER", SCOPE a target name or `pooled`: e.g. "pooled.kill_rate < 0.2"."""
    parts = check.split()
    if len(parts) != 3 or parts[1] not in _OPS or "." not in parts[0]:
        raise UserError(f"check {check!r}: write it as SCOPE.METRIC OP NUMBER, e.g. "
                        "\"pooled.kill_rate < 0.2\" or \"cachetools.kills >= 5\"")
    scope, _, metric = parts[0].rpartition(".")
    if metric not in METRICS:
        raise UserError(f"check {check!r}: unknown metric {metric!r}; known: {', '.join(METRICS)}")
    try:
        value = float(parts[2])
    except ValueError:
        raise UserError(f"check {check!r}: {parts[2]!r} is not a number") from None
    return scope, metric, parts[1], value


def _metric(score: dict, scope: str, metric: str) -> float | None:
    if scope == "pooled":
        p = score.get("pooled_kills")
        if not p:
            return None
        return {"kills": p["k"], "kill_rate": p["k"] / p["n"] if p["n"] else None}.get(metric)
    t = score["targets"].get(scope)
    if t is None:
        return None
    rate_of = lambda d: d["k"] / d["n"] if d["n"] else None  # noqa: E731
    return {"kills": t["kills"]["k"], "kill_rate": rate_of(t["kills"]), "kept": t["kept_tests"],
            "within_function": rate_of(t["transfer"]["within_function_all"]),
            "cross_function": rate_of(t["transfer"]["cross_function"])}[metric]


def judge(check: str, score: dict) -> str:
    """held / missed / not measurable: decided by the numbers, never by a model."""
    scope, metric, op, value = parse_check(check)
    observed = _metric(score, scope, metric)
    if observed is None:
        return "not measurable"
    return "held" if _OPS[op](observed, value) else "missed"


def preregister(run_dir: Path, text: str, check: str | None = None) -> dict:
    if (run_dir / "config.json").exists():
        raise UserError(f"{run_dir} has already started (config.json exists): a prediction stored "
                        "now would not be a pre-registration. Store predictions before `killbench run "
                        f"--out {run_dir}`.")
    if not text.strip():
        raise UserError("the prediction is empty")
    if check is not None:
        parse_check(check)
    run_dir.mkdir(parents=True, exist_ok=True)
    entry = {"sha256": hashlib.sha256((text + "\0" + (check or "")).encode("utf-8")).hexdigest(),
             "text": text, "check": check,
             "registered_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    with open(run_dir / FILE, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry, sort_keys=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    return entry


def predictions(run_dir: Path) -> list[dict]:
    """Stored predictions, each checked against its hash and against the run's start."""
    path = run_dir / FILE
    if not path.exists():
        return []
    started = None
    if (run_dir / "config.json").exists():
        started = json.loads((run_dir / "config.json").read_text()).get("started_at")
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        e = json.loads(line)
        blob = (e["text"] + "\0" + (e.get("check") or "")).encode("utf-8")
        e["intact"] = hashlib.sha256(blob).hexdigest() == e["sha256"]
        e["before_run"] = started is None or e["registered_at"] <= started
        out.append(e)
    return out
