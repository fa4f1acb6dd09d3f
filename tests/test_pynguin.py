"""The `pynguin` generator: Pynguin run per module in the run's workspace, its files gated
test by test like any other generator's. Needs the `pynguin` extra (CI installs it)."""

from __future__ import annotations

import json

import pytest

from killbench.errors import UserError
from killbench.run import run_generator

pytest.importorskip("pynguin", reason="the pynguin extra is not installed")


@pytest.mark.slow
def test_pynguin_runs_in_the_workspace_and_its_tests_are_gated(fixture_target, use_cache,
                                                               tmp_path):
    project = fixture_target("basic")
    out = run_generator("pynguin", [str(project)], out=tmp_path / "run", jobs=2,
                        options={"search_seconds": "5"})
    [sub] = [json.loads(line) for line in (out / "candidates.jsonl").read_text().splitlines()]
    assert sub["task"] is None and sub["meta"]["module"] == "basic"
    assert sub["meta"]["exit"] == 0 and sub["meta"]["search_seconds"] == 5
    source = (out / "candidates" / f"{sub['candidate']}.py").read_text()
    assert "import basic" in source
    summary = json.loads((out / "summary.json").read_text())["basic"]
    assert summary["files"] == 1 and summary["tests"] == sub["meta"]["tests_in_file"] > 0
    # is_big, sign and parse_positive are pure: Pynguin's tests of them pass on clean code
    assert summary["kept_tests"] > 0
    metrics = summary["generator_metrics"]
    assert metrics["modules"] == metrics["modules_with_tests"] == 1
    assert metrics["timeouts"] == metrics["failures"] == 0
    config = json.loads((out / "config.json").read_text())
    assert config["generator"]["name"] == "pynguin"


def test_options_are_checked_before_anything_runs():
    from generators.pynguin import PynguinGenerator

    with pytest.raises(UserError, match="search_seconds"):
        PynguinGenerator(search_seconds="abc")
    with pytest.raises(UserError, match="must be positive"):
        PynguinGenerator(search_seconds="0")
    with pytest.raises(UserError, match="use tasks or all"):
        PynguinGenerator(modules="some")
    with pytest.raises(UserError, match="SIMPLE"):
        PynguinGenerator(assertions="DEEP")


def test_without_pynguin_installed_the_error_names_the_extra(monkeypatch):
    import importlib.util

    from generators.pynguin import PynguinGenerator

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "pynguin" else real(name, *a))
    with pytest.raises(UserError, match=r'pip install -e "\.\[pynguin\]"'):
        PynguinGenerator()
