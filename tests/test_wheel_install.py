"""The package carries the benchmark: a wheel installed into a fresh venv, run from a
directory outside the checkout, lists every pin with its manifest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_a_wheel_in_a_fresh_venv_lists_the_pins(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(ROOT), "-w",
                    str(wheels)], check=True, cwd=tmp_path)
    (wheel,) = wheels.glob("killbench-*.whl")
    env_dir = tmp_path / "fresh"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                   check=True, cwd=tmp_path)
    # the dependencies come from this interpreter's site-packages as a plain path entry: its
    # editable-install hook (which would point back into the checkout) is not run
    ours = sysconfig.get_paths()["purelib"]
    theirs = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                            capture_output=True, text=True, check=True).stdout.strip()
    Path(theirs, "deps-of-the-test.pth").write_text(ours + "\n")
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("KILLBENCH_HOME", "PYTHONPATH")}
    where = subprocess.run([str(py), "-c", "import killbench, json; print(json.dumps(killbench.__file__))"],
                           capture_output=True, text=True, check=True, cwd=work, env=env).stdout
    assert Path(json.loads(where)).is_relative_to(env_dir), where  # not the checkout's copy
    p = subprocess.run([str(env_dir / "bin" / "killbench"), "targets"], capture_output=True,
                       text=True, cwd=work, env=env)
    assert p.returncode == 0, p.stderr
    pins = sorted(x.stem for x in (ROOT / "targets").glob("*.toml"))
    listed = [line.split("|")[1].strip() for line in p.stdout.splitlines()[2:]]
    assert listed == pins and len(pins) == 12
    assert "(no manifest)" not in p.stdout
    v = subprocess.run([str(env_dir / "bin" / "killbench"), "--version"], capture_output=True,
                       text=True, cwd=work, env=env)
    assert v.returncode == 0 and "benchmark 1." in v.stdout and "manifest digest " in v.stdout
