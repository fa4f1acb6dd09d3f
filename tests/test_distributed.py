"""--scheduler: the same runs on a Dask cluster give what this machine gives, and a
dead worker or a missing scheduler is a clear error that loses no finished result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from killbench.errors import ExitCode, HarnessError, TargetError

BUILD_TOML = ("schema = 2\nseed = 3\ntasks_per_target = 4\nmax_function_share = 0.5\nheld_out_per_target = 5\n"
              "lite_per_target = 2\ntimeout_floor = 4.0\n")


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "killbench.cli", *args], capture_output=True,
                          text=True, env={**os.environ, **env}, timeout=1800)


def _untimed(doc: dict) -> dict:
    """A mutate JSON without its measured times (the only fields two runs may differ in)."""
    doc = dict(doc, mutants=[{k: v for k, v in m.items() if k != "duration_s"} for m in doc["mutants"]])
    doc.pop("wall_s")
    return doc


def _home(root: Path) -> Path:
    """A KILLBENCH_HOME of its own: manifests build never writes the checkout's."""
    (root / "manifests").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "manifests" / "build.toml").write_text(BUILD_TOML)
    return root


@pytest.mark.slow
def test_mutate_on_a_local_cluster_equals_a_local_run(fixture_target, use_cache, tmp_path):
    project = fixture_target("basic")
    here, there = tmp_path / "here.json", tmp_path / "dask.json"
    p = _cli("mutate", str(project), "--jobs", "1", "--json", str(here))
    assert p.returncode == 0, p.stderr
    # --fresh: the worker runs the baseline and every mutant again, nothing is resumed
    p = _cli("mutate", str(project), "--fresh", "--scheduler", "local", "--json", str(there))
    assert p.returncode == 0, p.stderr
    a, b = json.loads(here.read_text()), json.loads(there.read_text())
    assert [(m["id"], m["verdict"], m["killed_by"], m["reachable"]) for m in a["mutants"]] == \
        [(m["id"], m["verdict"], m["killed_by"], m["reachable"]) for m in b["mutants"]]
    assert a["summary"]["verdicts"]["killed"] > 0
    assert _untimed(a) == _untimed(b)


@pytest.mark.slow
def test_manifest_built_on_a_local_cluster_has_the_local_bytes(fixture_target, use_cache, tmp_path):
    project = fixture_target("basic")
    here, there = _home(tmp_path / "here"), _home(tmp_path / "dask")
    p = _cli("manifests", "build", str(project), "--jobs", "2", KILLBENCH_HOME=str(here))
    assert p.returncode == 0, p.stderr
    # the worker gets an empty cache of its own: it downloads, builds and runs everything
    p = _cli("manifests", "build", str(project), "--scheduler", "local", KILLBENCH_HOME=str(there),
             KILLBENCH_CACHE=str(tmp_path / "worker-cache"))
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "worker-cache" / "work").is_dir()
    for rel in ("manifests/basic.json", "manifests/index.json", "docs/benchmark.md"):
        assert (here / rel).read_bytes() == (there / rel).read_bytes(), rel


def test_unreachable_scheduler_is_a_user_error_quickly(fixture_target, tmp_path):
    project = fixture_target("basic")
    home = _home(tmp_path / "home")
    env = {"DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "2s", "KILLBENCH_CACHE": str(tmp_path / "c"),
           "KILLBENCH_HOME": str(home)}
    for args in (["mutate", str(project)], ["manifests", "build", str(project)]):
        start = time.monotonic()
        p = _cli(*args, "--scheduler", "tcp://127.0.0.1:1", **env)
        assert time.monotonic() - start < 30
        assert p.returncode == ExitCode.USER_ERROR, p.stderr
        assert "could not connect to the Dask scheduler at tcp://127.0.0.1:1" in p.stderr
        assert "Traceback" not in p.stderr
    assert not (home / "manifests" / "index.json").exists()


def test_scheduler_without_workers_is_a_user_error(monkeypatch):
    import dask
    from distributed import LocalCluster

    from killbench.distributed import run_tasks
    from killbench.errors import UserError

    with LocalCluster(n_workers=0, processes=False, dashboard_address=None) as cluster, \
            dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        with pytest.raises(UserError, match="has no worker"):
            run_tasks(cluster.scheduler_address, {"x": (abs, {})}, lambda *a: None)


def _square(x):
    return x * x


def _refuse():
    raise TargetError("fixture", "refused on purpose")


def _die():
    time.sleep(0.5)
    os._exit(17)


def test_dead_worker_is_a_harness_error_and_finished_results_are_kept():
    import dask

    from killbench.distributed import run_tasks

    # the local cluster's workers are spawned with this process's sys.path: they import this module
    got = {}
    tasks = {"ok": (_square, {"x": 3}), "refused": (_refuse, {}), "dies": (_die, {})}
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        run_tasks("local", tasks, lambda name, value, error: got.__setitem__(name, (value, error)),
                  n_workers=2)
    assert got["ok"] == (9, None)
    _, refused = got["refused"]
    assert refused.exit_code == ExitCode.TARGET_ERROR and str(refused) == "target fixture: refused on purpose"
    _, died = got["dies"]
    assert isinstance(died, HarnessError) and died.exit_code == ExitCode.HARNESS_ERROR
    assert "target dies: the Dask worker running it died" in str(died)


def test_a_worker_with_other_killbench_code_refuses_the_task():
    from killbench.distributed import identity, run_on_worker

    out = run_on_worker(_square, {"x": 2}, dict(identity(), code="0" * 16))
    assert out["error"]["exit_code"] == ExitCode.USER_ERROR
    assert "install the same killbench on every worker" in out["error"]["message"]


@pytest.mark.slow
def test_one_target_in_chunks_on_a_local_cluster_equals_a_local_run(fixture_target, use_cache, tmp_path):
    """Three chunks on two workers (so one worker runs two, beside the other on one cache):
    the same mutants, in the same order, with the same verdicts, reach and killing tests."""
    project = fixture_target("basic")
    here, there = tmp_path / "here.json", tmp_path / "chunks.json"
    p = _cli("mutate", str(project), "--jobs", "1", "--json", str(here))
    assert p.returncode == 0, p.stderr
    p = _cli("mutate", str(project), "--fresh", "--scheduler", "local", "--jobs", "2", "--chunks", "3",
             "--json", str(there))
    assert p.returncode == 0, p.stderr
    a, b = json.loads(here.read_text()), json.loads(there.read_text())
    assert a["summary"]["verdicts"]["killed"] > 0 and len(a["mutants"]) >= 3
    assert _untimed(a) == _untimed(b)
    assert "spread over 3 chunks" in p.stdout


def test_chunks_that_do_not_fit_together_are_refused():
    from killbench.config import TargetSpec
    from killbench.harness import join_chunks

    spec = TargetSpec(name="t", kind="local", mutate=("t.py",), tests=("tests",), test_requires=())
    base = {"fingerprint": "f", "tests": ["a"], "flaky": [], "deselected": [], "skipped": [],
            "modules": {}, "coverage": {}, "lines_hit": 0, "lines_total": 0, "durations": {},
            "overhead_s": 0.1, "wall_s": [0.1]}

    def part(chunk, of=2, **over):
        return {"chunk": chunk, "of": of, "fingerprint": "f", "candidates": 0, "operators": ["x"],
                "sample": None, "baseline": dict(base), "records": [], "resumed": 0,
                "wall_s": 1.0, "workdir": "/w", **over}

    run = join_chunks(spec, [part(1), part(0)], 2.0)
    assert run.records == [] and run.extra == {"chunks": 2}
    with pytest.raises(HarnessError, match="came back"):
        join_chunks(spec, [part(0)], 1.0)  # chunk 2 of 2 missing
    with pytest.raises(HarnessError, match="came back"):
        join_chunks(spec, [part(0), part(0)], 1.0)
    with pytest.raises(HarnessError, match="fingerprint"):
        join_chunks(spec, [part(0), part(1, fingerprint="g")], 1.0)
    with pytest.raises(HarnessError, match="differs from chunk 1's in tests"):
        join_chunks(spec, [part(0), part(1, baseline=dict(base, tests=["a", "b"]))], 1.0)
    with pytest.raises(HarnessError, match="its share is"):
        join_chunks(spec, [part(0, candidates=1), part(1, candidates=1)], 1.0)
