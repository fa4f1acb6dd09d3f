"""The doctor passes on a sound harness and fails when isolation is broken."""

from __future__ import annotations

import re
import pytest

from killbench.config import load_local
from killbench.doctor import run_doctor
from killbench.runner import RunSettings
from killbench.sandbox import Sandbox

FAST = RunSettings(timeout_floor=4.0)


@pytest.mark.slow
def test_doctor_passes_on_fixture(fixture_target, use_cache):
    checks, _ = run_doctor(load_local(fixture_target("basic")), jobs=2, sample=6, settings=FAST)
    assert [c.name for c in checks if not c.ok] == []
    assert len(checks) == 7


@pytest.mark.slow
def test_doctor_catches_mutants_written_to_the_wrong_copy(fixture_target, use_cache, monkeypatch):
    """The seed's trap: mutants written where the tests do not import from are invisible."""
    real = Sandbox.copies

    def tree_only(self, path):
        return real(self, path)[:1]  # the unpacked tree, not the installed copy the tests import

    monkeypatch.setattr(Sandbox, "copies", tree_only)
    checks, _ = run_doctor(load_local(fixture_target("basic")), jobs=2, sample=6, settings=FAST)
    failed = {c.name for c in checks if not c.ok}
    assert "canary is killed" in failed
    assert "no stale bytecode" in failed


def _doctor(fixture_target, monkeypatch=None, patch=None, settings=FAST):
    """The doctor on a fresh copy of `basic`, with `patch(target)` applied after the
    baseline exists (a fault in the baseline itself is refused before doctor starts)."""
    from killbench.harness import load_or_run_baseline, workdir_for
    from killbench.targets import prepare

    spec = load_local(fixture_target("basic"))
    target = prepare(spec)
    load_or_run_baseline(target, workdir_for(target))
    if patch is not None:
        patch(target)
    checks, _ = run_doctor(spec, jobs=2, sample=6, settings=settings)
    return {c.name: c for c in checks}


@pytest.mark.slow
def test_imports_check_fails_when_the_suite_imports_the_shared_copy(fixture_target, use_cache,
                                                                    monkeypatch):
    """The tests import the prepared target every run shares, not the worker's copy."""
    def patch(target):
        monkeypatch.setattr(Sandbox, "python_path", lambda self: [str(target.site)])

    checks = _doctor(fixture_target, monkeypatch, patch)
    c = checks["imports from the sandbox"]
    assert not c.ok
    assert "clean run harness-error" in c.observed and str(c.observed).count("outside") >= 1


@pytest.mark.slow
def test_stale_check_fails_when_a_clean_run_still_sees_the_mutant(fixture_target, use_cache,
                                                                  monkeypatch):
    """State left by one run reaches the next: the clean code is never put back."""
    monkeypatch.setattr(Sandbox, "restore", lambda self: None)
    checks = _doctor(fixture_target)
    c = checks["no stale bytecode"]
    assert not c.ok
    assert c.observed.split(" -> ")[1] != "survived"  # the clean run after the mutant
    assert checks["imports from the sandbox"].ok  # the first run had no mutant to leak


@pytest.mark.slow
def test_parallel_check_fails_when_the_pool_runs_the_clean_code(fixture_target, use_cache,
                                                                monkeypatch):
    """The parallel pool's workers never write their mutant; one worker (serial) does."""
    real = Sandbox.write

    def write(self, path, content):
        if not self.root.name.startswith("doctor-p"):
            real(self, path, content)

    monkeypatch.setattr(Sandbox, "write", write)
    checks = _doctor(fixture_target)
    c = checks["parallel equals serial"]
    assert not c.ok and c.details
    assert all("parallel survived, serial killed" in d for d in c.details)


@pytest.mark.slow
def test_warm_check_fails_when_the_warm_runner_skips_the_mutant(fixture_target, use_cache,
                                                                monkeypatch):
    """The warm runner's child is told no mutated file (as for a kill's confirmation on clean
    code): it runs the covering tests on the clean code it imported, and reports that as the
    mutant's verdict."""
    from killbench import executor

    real = executor.Server.send

    def send(self, job):
        return real(self, dict(job, path=None) if job.get("path") else job)

    monkeypatch.setattr(executor.Server, "send", send)
    checks = _doctor(fixture_target)
    c = checks["warm runner equals plain"]
    assert not c.ok and c.details
    assert all(re.search(r": (warm|fork) survived, plain killed$", d) for d in c.details)
    assert checks["parallel equals serial"].ok  # both pools were warm, and wrong alike


@pytest.mark.slow
def test_covering_check_fails_when_the_selection_misses_the_killing_test(fixture_target,
                                                                         use_cache, monkeypatch):
    """Every mutant is run against one test that executes none of its lines. Without the
    whole-suite confirmation of survivors the check sees the selection's false survivors;
    with it (the default) they are judged again on the whole suite and the verdicts hold."""
    import dataclasses

    import killbench.doctor as doctor

    real = doctor.selection_for

    def selection(reach, baseline):
        covering = real(reach, baseline)
        if covering is None:  # import-time code: the full suite, as before
            return None
        others = [t for t in sorted(baseline.tests) if t not in covering]
        return others[:1] or covering

    monkeypatch.setattr(doctor, "selection_for", selection)
    copies: dict = {}

    def once(name):  # one copy of the fixture for both doctor runs
        return copies.setdefault(name, copies.get(name) or fixture_target(name))

    checks = _doctor(once, settings=dataclasses.replace(FAST, confirm_survivors=False))
    c = checks["covering tests equal the full suite"]
    assert not c.ok
    assert any("covering survived, full suite killed" in d for d in c.details)
    confirmed = _doctor(once)
    assert confirmed["covering tests equal the full suite"].ok, confirmed["covering tests equal the full suite"]


@pytest.mark.slow
def test_counts_check_fails_when_the_task_set_rule_is_wrong(fixture_target, use_cache,
                                                            monkeypatch):
    """The task-set rule also takes killed mutants."""
    import killbench.population as population

    real = population.is_task
    monkeypatch.setattr(population, "is_task",
                        lambda verdict, reachable, unkillable:
                        real(verdict, reachable, unkillable) or verdict == "killed")
    checks = _doctor(fixture_target)
    c = checks["the counts add up"]
    assert not c.ok
    assert "the task set is not the reachable, killable survivors" in c.observed


@pytest.mark.slow
def test_counts_check_fails_when_a_mutant_is_tallied_twice(fixture_target, use_cache,
                                                          monkeypatch):
    """One mutant's verdict counted twice: the enumeration hands a mutant over again."""
    import killbench.doctor as doctor

    real = doctor.enumerate_target
    monkeypatch.setattr(doctor, "enumerate_target",
                        lambda target, ops: (lambda cs: cs + cs[:1])(real(target, ops)))
    checks = _doctor(fixture_target)
    c = checks["the counts add up"]
    assert not c.ok
    assert "a mutant is counted more than once" in c.observed


_UNCHECKED = """
import importlib.util, py_compile, sys
for clean, served in zip(sys.argv[1::2], sys.argv[2::2]):
    py_compile.compile(clean, cfile=importlib.util.cache_from_source(served), dfile=served,
                       doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
"""


@pytest.mark.slow
def test_stale_check_fails_when_the_template_serves_the_clean_bytecode(fixture_target,
                                                                      use_cache):
    """Stale bytecode served: the environment's bytecode template also holds the target's
    files at the doctor's sandbox paths, compiled from the clean code in a mode Python
    never checks against the source, so a mutant written there is never compiled."""
    import subprocess

    from killbench.harness import workdir_for

    patched = []

    def patch(target):
        patched.append(target)
        sb = Sandbox(target, workdir_for(target) / "sandboxes" / "doctor")
        args = []
        for sf in target.sources:
            for served in sb.copies(sf.path):
                args += [str(target.tree / sf.path), str(served)]
        subprocess.run([str(target.env.python), "-c", _UNCHECKED, *args], check=True,
                       env={"PYTHONPYCACHEPREFIX": str(target.env.pycache), "PATH": "/usr/bin:/bin"})

    try:
        checks = _doctor(fixture_target, patch=patch)
    finally:
        for target in patched:
            _drop_served_bytecode(target)
    c = checks["no stale bytecode"]
    assert not c.ok
    assert c.observed.split(" -> ")[0::2] == ["survived", "survived"], c.observed
    assert not checks["canary is killed"].ok


def _drop_served_bytecode(target):
    """The template is shared by every run on this environment: take the planted files out."""
    import subprocess
    from pathlib import Path

    from killbench.harness import workdir_for

    sb = Sandbox(target, workdir_for(target) / "sandboxes" / "doctor")
    for sf in target.sources:
        for served in sb.copies(sf.path):
            out = subprocess.run([str(target.env.python), "-c",
                                  "import importlib.util, sys; "
                                  "print(importlib.util.cache_from_source(sys.argv[1]))",
                                  str(served)], capture_output=True, text=True, check=True,
                                 env={"PYTHONPYCACHEPREFIX": str(target.env.pycache)})
            Path(out.stdout.strip()).unlink(missing_ok=True)
