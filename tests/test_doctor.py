"""The doctor passes on a sound harness and fails when isolation is broken."""

from __future__ import annotations

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
