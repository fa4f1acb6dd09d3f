"""A suite that runs its package's own command (glom's test_main runs `glom`): the
sandbox provides the wheel's console scripts, importing the sandbox's copy."""

from __future__ import annotations

import pytest

from killbench.config import load_local
from killbench.harness import mutate_target
from killbench.runner import RunSettings


@pytest.mark.slow
def test_console_script_is_on_path_in_the_sandbox(fixture_target, use_cache):
    spec = load_local(fixture_target("console_script"))
    run = mutate_target(spec, jobs=2, settings=RunSettings(timeout_factor=3.0, timeout_floor=4.0),
                        show_progress=False)
    # the command's test passed in all three clean runs (without a launcher it fails in all
    # three, and the harness refuses the target)
    assert "tests/test_cli.py::test_greet_command" in run.baseline.tests
    # Known limit: coverage is measured in the pytest process only, so lines the command
    # runs in its own process count as unreached and are not run (docs/DESIGN.md).
    hello = next(r for r in run.records if r.mutant.replacement == "'XXhello XX'")
    assert not hello.reach.reachable and hello.outcome.verdict == "survived" and not hello.outcome.ran
