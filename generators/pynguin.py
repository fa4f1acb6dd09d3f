"""Pynguin, the search-based unit-test generator for Python, as a killbench generator.

Users ask first how a generator compares with the tools they know; Pynguin is the
standard one. It is run as its users run it: one module at a time, the module imported
from the target (here: from the run's private copy, through `ctx.workspace()`, under the
run's isolation), with the run's seed and a search time per module cut to the target's
wall-time budget. It is given no task: it sees the clean code only, as it would on a
user's machine, so each file it writes is a task-less candidate that scoring runs
against every task. Pynguin runs from killbench's environment (the `pynguin` extra: it
pins its own pytest), with the target's dependencies after its own on the path; the
tests it writes are judged, like every test, in the target's own environment.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import time
from pathlib import Path

from killbench.errors import UserError
from killbench.generation import CandidateTest, module_name

PINNED = "0.48.0"  # the version the leaderboard's rows were made with (pyproject's extra)
# Pynguin's start, module analysis and output, beyond its search time and its assertion
# generation (mutation analysis, given as long as the search): measured 13 s on cachetools'
# package module with 10 s of each, on 2 cores
STARTUP_S = 30.0
TEST_DEF = re.compile(r"^def test_", re.M)


def _positive(name: str, value, kind=float):
    try:
        out = kind(value)
    except (TypeError, ValueError):
        raise UserError(f"pynguin option {name}={value!r}: not a number") from None
    if out <= 0:
        raise UserError(f"pynguin option {name}={value!r}: must be positive")
    return out


class PynguinGenerator:
    name = "pynguin"
    version = "1"
    needs_model = False

    def __init__(self, search_seconds="60", modules="tasks", assertions="MUTATION_ANALYSIS"):
        """`search_seconds`: Pynguin's search time per module (cut to the budget's share);
        `modules`: `tasks` (the modules holding a task) or `all` (every mutated module);
        `assertions`: Pynguin's assertion generator (MUTATION_ANALYSIS, its default, or
        SIMPLE)."""
        self.search_seconds = _positive("search_seconds", search_seconds)
        if modules not in ("tasks", "all"):
            raise UserError(f"pynguin option modules={modules!r}: use tasks or all")
        self.modules = modules
        if assertions not in ("MUTATION_ANALYSIS", "SIMPLE", "NONE"):
            raise UserError(f"pynguin option assertions={assertions!r}: use "
                            "MUTATION_ANALYSIS, SIMPLE or NONE")
        self.assertions = assertions
        if importlib.util.find_spec("pynguin") is None:
            raise UserError("the pynguin generator needs Pynguin in killbench's environment: "
                            "pip install -e \".[pynguin]\" (or pip install "
                            f"pynguin=={PINNED})")

    def _targets(self, ctx) -> list[tuple[str, str]]:
        """(path, importable module name) in a fixed order: the modules holding a task,
        in task order, or every mutated module in path order."""
        paths = list(dict.fromkeys(t.path for t in ctx.tasks)) if self.modules == "tasks" \
            else sorted(ctx.modules)
        return [(p, module_name(ctx.modules[p])) for p in paths]

    def generate(self, ctx):
        if ctx.workspace is None:
            raise UserError("the pynguin generator runs Pynguin in ctx.workspace(), which this "
                            "context does not offer")
        from importlib.metadata import version

        installed = version("pynguin")
        ws = ctx.workspace()
        todo = self._targets(ctx)
        ctx.log(f"Pynguin {installed} on {len(todo)} modules, up to {self.search_seconds:.0f} s "
                f"of search each, seed {ctx.seed}")
        counts = {"modules": len(todo), "modules_with_tests": 0, "test_functions": 0,
                  "timeouts": 0, "failures": 0}
        started = time.monotonic()
        for i, (path, module) in enumerate(todo):
            left = ctx.seconds_left()
            search = self.search_seconds
            if left is not None:
                share = (left / (len(todo) - i) - STARTUP_S) / 2  # search, then mutation
                search = min(search, share)
                if search < 1:
                    ctx.log(f"{module}: skipped, no time left in the budget")
                    break
            search = int(search)
            project = next((p for p in ws.import_paths
                            if (p / ctx.modules[path]).exists()), ws.import_paths[0])
            argv = [sys.executable, "-m", "pynguin", "--project-path", str(project),
                    "--module-name", module, "--output-path", "tests", "--report-dir", "report",
                    "--maximum-search-time", str(search), "--seed", str(ctx.seed),
                    "--assertion-generation", self.assertions, "--maximum-mutation-time",
                    str(search), "--no-xfail", "True", "--no-rich"]
            res = ws.run(argv, timeout=2 * (search + STARTUP_S), env={"PYNGUIN_DANGER_AWARE": "1"})
            files = sorted((res.out / "tests").glob("test_*.py"))
            if res.timed_out:
                counts["timeouts"] += 1
            elif res.returncode != 0:
                counts["failures"] += 1
            if not files:
                tail = (res.stderr or res.stdout).strip().splitlines()[-3:]
                ctx.log(f"{module}: no test file (exit {res.returncode}"
                        f"{', timed out' if res.timed_out else ''}, {res.wall_s:.0f} s)\n"
                        + "\n".join(tail))
                continue
            counts["modules_with_tests"] += 1
            for f in files:
                source = f.read_text(encoding="utf-8", errors="replace")
                n = len(TEST_DEF.findall(source))
                counts["test_functions"] += n
                ctx.log(f"{module}: {n} tests in {f.name} ({res.wall_s:.0f} s)")
                yield CandidateTest(source, task=None, attempt=1,
                                    meta={"module": module, "search_seconds": search,
                                          "exit": res.returncode, "timed_out": res.timed_out,
                                          "wall_s": res.wall_s, "tests_in_file": n,
                                          "pynguin": installed})
        counts["seconds"] = round(time.monotonic() - started, 1)
        if ctx.report is not None:
            ctx.report(counts)
