"""The real pin path: download with pip, verify sha256, build, baseline, doctor."""

from __future__ import annotations

import dataclasses

import pytest

from killbench.config import resolve
from killbench.doctor import run_doctor
from killbench.errors import TargetError
from killbench.targets import prepare


@pytest.mark.slow
def test_wrong_hash_is_a_clear_error(use_cache):
    spec = dataclasses.replace(resolve("cachetools"), sdist_sha256="0" * 64)
    with pytest.raises(TargetError, match="target cachetools: sdist sha256 mismatch") as info:
        prepare(spec)
    assert "Nothing was used" in str(info.value)


@pytest.mark.slow
def test_doctor_holds_on_pinned_cachetools(use_cache):
    checks, target = run_doctor(resolve("cachetools"), jobs=2, sample=6)
    assert target.spec.version == "8.0.2"
    assert [c.name for c in checks if not c.ok] == []
