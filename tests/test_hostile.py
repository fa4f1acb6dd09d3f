"""A generator of hostile tests: each gets the right reason, the valid tests among them score
exactly as they score alone, nothing the tests start outlives the run, nothing outside the
run's scratch directories changes, and a socket on the host hears nothing."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from killbench import executor
from killbench.evidence import GateEntry, Submission, read_jsonl
from killbench.run import run_generator
from killbench.score import score_run
from killbench.targets import tree_digest

import hostile_generators as hg

BWRAP = executor.unavailable("bwrap")
SENTINELS = [Path("/etc/killbench-hostile"), Path(os.path.expanduser("~root")) / "killbench-hostile",
             Path("/work/killbench-hostile")]


def _processes(pattern: bytes) -> list[str]:
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if pattern in open(f"/proc/{pid}/cmdline", "rb").read():
                    out.append(pid)
            except OSError:
                pass
    return out


def _listing(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


@pytest.mark.slow
@pytest.mark.skipif(bool(BWRAP), reason=f"bubblewrap isolation unavailable: {BWRAP}")
def test_hostile_tests_are_caught_and_contained(fixture_target, use_cache, tmp_path):
    from killbench.config import resolve
    from killbench.harness import load_or_run_baseline, workdir_for
    from killbench.targets import prepare

    project = fixture_target("basic")
    target = prepare(resolve(str(project)))
    load_or_run_baseline(target, workdir_for(target))
    code = subprocess.run([str(target.env.python), "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                           "from basic import is_big; print(is_big.__code__.co_code)", str(target.site)],
                          capture_output=True, text=True, check=True).stdout.strip()
    size = (target.site / "basic" / "__init__.py").stat().st_size
    sock_path = tmp_path / "host.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock_path))
    os.chmod(sock_path, 0o777)
    server.listen(8)
    heard: list[bytes] = []

    def listen():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            heard.append(conn.recv(64))

    threading.Thread(target=listen, daemon=True).start()
    site_packages = next(target.env.root.glob("lib/python*/site-packages"))
    env_before, project_before = _listing(site_packages), tree_digest(project)
    daemons_before = set(_processes(b"sleep\x00900"))

    values = {"KB_CODE_BYTES": code, "KB_SIZE": str(size), "KB_SOCKET_PATH": repr(str(sock_path))}
    out = tmp_path / "hostile"
    run_generator("hostile_generators:HostileTests", [str(project)], out=out, jobs=2,
                  gate_timeout=15, options=values)
    entries = {(e.candidate, e.task): e for e in read_jsonl(out / "evidence" / "gate.jsonl", GateEntry)}
    got = {}
    for sub in read_jsonl(out / "candidates.jsonl", Submission):
        name = sub.meta.get("hostile")
        if name is None:
            continue
        e = entries[(sub.candidate, sub.task)]
        got[name] = ("file", e.file_reason) if e.file_reason else ("test", e.tests[0].reason)
    assert got == hg.EXPECTED

    # the valid tests among them score exactly as they do alone
    alone = tmp_path / "alone"
    run_generator("fixture_generators:FewTests", [str(project)], out=alone, jobs=2, gate_timeout=15)
    a = score_run(out, jobs=2, resamples=2000).targets["basic"]
    b = score_run(alone, jobs=2, resamples=2000).targets["basic"]
    assert a.kills_by_test == b.kills_by_test and a.kills.k == b.kills.k == 1
    assert a.transfer == b.transfer and a.excluded_kept_tests == b.excluded_kept_tests == {}

    # contained: no process left, nothing outside the run's directories changed
    time.sleep(0.5)
    assert set(_processes(b"sleep\x00900")) - daemons_before == set()
    assert not any(p.exists() for p in SENTINELS)
    assert _listing(site_packages) == env_before
    assert tree_digest(project) == project_before
    assert heard == []
    server.close()
