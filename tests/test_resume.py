"""A run killed mid-way (SIGKILL, no chance to clean up) resumes from its journal and
ends with the same verdicts as an uninterrupted run, with nothing counted twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import tomli

from conftest import FIXTURES


def _journal(cache: Path) -> Path | None:
    found = list((cache / "work").glob("hang-*/journal-*.jsonl")) if (cache / "work").exists() else []
    return found[0] if found else None


def _entries(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()[1:] if x.strip()]


def _alive(*marks: str) -> list[bytes]:
    """Command lines of live processes holding any of these strings (zombies have none)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes()
        except OSError:
            continue
        if any(m.encode() in text for m in marks):
            found.append(text.replace(b"\0", b" ")[:200])
    return found


@pytest.mark.slow
def test_sigkill_then_resume(fixture_target, kb_cache, tmp_path):
    project = fixture_target("hang_when_mutated")
    out_json = tmp_path / "mutants.json"
    env = dict(os.environ, KILLBENCH_CACHE=str(kb_cache))
    cmd = [sys.executable, "-m", "killbench.cli", "mutate", str(project), "--jobs", "2",
           "--timeout-floor", "4", "--json", str(out_json)]
    # prepare and baseline first, so the kill lands among mutant runs
    subprocess.run([sys.executable, "-m", "killbench.cli", "doctor", str(project), "--sample", "1"],
                   env=env, capture_output=True, check=False)
    for stale in (kb_cache / "work").glob("hang-*/journal-*.jsonl"):
        stale.unlink()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    killed_at = None
    while time.monotonic() < deadline:
        path = _journal(kb_cache)
        if path is not None and len(_entries(path)) >= 4:
            proc.send_signal(signal.SIGKILL)
            killed_at = len(_entries(path))
            break
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.wait()
    assert killed_at is not None, "the run finished before it could be interrupted"
    assert proc.returncode == -signal.SIGKILL
    # nothing killbench started outlives it: not the warm server, not a mutant's forked child
    # stuck in the endless loop (once, both ran on at 65% CPU each with parent 1)
    deadline = time.monotonic() + 10
    while _alive(f"{kb_cache}/work/hang-") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _alive(f"{kb_cache}/work/hang-") == []
    assert killed_at < 13, "the kill landed after every result was in"

    again = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    entries = _entries(_journal(kb_cache))
    ids = [e["id"] for e in entries]
    assert len(ids) == len(set(ids)) == 13, "a result was lost or counted twice"

    answers = tomli.loads((FIXTURES / "hang_when_mutated" / "answers.toml").read_text())["mutants"]
    records = json.loads(out_json.read_text())["mutants"]
    got = {f"{r['line']}:{r['col']}:{r['operator']}:{r['replacement']}": r["verdict"] for r in records}
    assert got == {k: v["verdict"] for k, v in answers.items()}


@pytest.mark.slow
def test_sigterm_stops_like_ctrl_c_and_leaves_nothing(fixture_target, kb_cache, tmp_path):
    """SIGTERM (what a scheduler or `timeout` sends): exit code 130, the resume hint, no
    process left, no temporary directory left in the system's temp dir or the cache."""
    project = fixture_target("hang_when_mutated")
    systmp = tmp_path / "systmp"
    systmp.mkdir()
    env = dict(os.environ, KILLBENCH_CACHE=str(kb_cache), TMPDIR=str(systmp))
    subprocess.run([sys.executable, "-m", "killbench.cli", "doctor", str(project), "--sample", "1"],
                   env=env, capture_output=True, check=False)
    for stale in (kb_cache / "work").glob("hang-*/journal-*.jsonl"):
        stale.unlink()
    cache_tmp_before = set((kb_cache / "tmp").iterdir()) if (kb_cache / "tmp").exists() else set()
    proc = subprocess.Popen([sys.executable, "-m", "killbench.cli", "mutate", str(project),
                             "--jobs", "2", "--timeout-floor", "4"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        path = _journal(kb_cache)
        if path is not None and len(_entries(path)) >= 2:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be stopped"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "resume" in err and "Traceback" not in err
    time.sleep(0.5)
    left = _alive(f"{kb_cache}/work/hang-", str(project))
    assert left == [], f"a child of the stopped run is still alive: {left}"
    assert list(systmp.iterdir()) == []
    cache_tmp_after = set((kb_cache / "tmp").iterdir()) if (kb_cache / "tmp").exists() else set()
    assert cache_tmp_after <= cache_tmp_before
