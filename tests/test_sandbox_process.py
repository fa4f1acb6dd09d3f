"""Processes the harness starts: the same address layout every time, so that address-based
hashes (hash(None) on CPython 3.11) do not reorder sets and rename parametrized tests."""

from __future__ import annotations

import sys

import pytest

from killbench.sandbox import ADDR_NO_RANDOMIZE, Limits, run_process

PROBE = "print(int(open('/proc/self/personality').read(), 16), hash(None), hash(object()))"


def _child(tmp_path, i):
    out = tmp_path / str(i)
    out.mkdir()
    result = run_process([sys.executable, "-c", PROBE], tmp_path, {}, 30, Limits(), out)
    assert result.returncode == 0, result.stderr_tail
    personality, *hashes = (out / "stdout.txt").read_text().split()
    return int(personality), hashes


def _machine_allows_it() -> bool:
    import subprocess
    code = ("import ctypes; ctypes.CDLL(None).personality(0x0040000); "
            "print(int(open('/proc/self/personality').read(), 16))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return bool(int(out.stdout) & ADDR_NO_RANDOMIZE)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="personality(2) is Linux only")
def test_children_run_without_address_randomisation(tmp_path):
    if not _machine_allows_it():
        pytest.skip("this machine's seccomp policy forbids personality(ADDR_NO_RANDOMIZE)")
    runs = [_child(tmp_path, i) for i in range(3)]
    assert all(p & ADDR_NO_RANDOMIZE for p, _ in runs)
    assert runs[0][1] == runs[1][1] == runs[2][1]
