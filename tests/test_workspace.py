"""Two killbench processes on one target's work directory take turns."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

from killbench.workspace import exclusive

HOLD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from killbench.workspace import exclusive
    with exclusive(Path(sys.argv[1]), "t"):
        Path(sys.argv[2]).write_text("in")
        time.sleep(float(sys.argv[3]))
        Path(sys.argv[2]).write_text("done")
""")


def test_a_second_process_waits_and_one_process_reenters(tmp_path):
    work, flag = tmp_path / "work", tmp_path / "flag"
    other = subprocess.Popen([sys.executable, "-c", HOLD, str(work), str(flag), "1.5"])
    try:
        deadline = time.monotonic() + 30
        while not flag.exists():
            assert time.monotonic() < deadline and other.poll() is None
            time.sleep(0.05)
        start = time.monotonic()
        with exclusive(work, "t"):
            waited = time.monotonic() - start
            assert flag.read_text() == "done"  # the holder had left before we got in
            with exclusive(work, "t"):  # re-entrant in one process: no self-deadlock
                pass
        assert waited > 0.5
    finally:
        other.wait(timeout=30)
    # released: another process gets in at once
    flag.unlink()
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-c", HOLD, str(work), str(flag), "0"], check=True, timeout=30)
    assert flag.exists() and time.monotonic() - t0 < 20
