"""The clean suite: three plain runs to find flaky tests and durations, one run with
per-test coverage for reachability.

A target whose suite does not pass on clean code is an error, not a run: a
mutation score over a red suite measures nothing.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .errors import HarnessError, TargetError
from .records import RunReport
from .reach import line_coverage
from .sandbox import Sandbox

log = logging.getLogger("killbench")

CLEAN_RUNS = 3
# a run's CPU budget allows its start-up and collection this many times the baseline's time
OVERHEAD_MARGIN = 1.5


@dataclass
class Baseline:
    """What the clean suite did; saved as baseline.json in the work directory."""

    fingerprint: str
    tests: list[str]  # node ids that passed every clean run (flaky ones excluded)
    flaky: list[str]
    deselected: list[str]  # from the target spec
    durations: dict[str, float]  # node id -> slowest setup+call+teardown seen
    overhead_s: float  # start-up and collection time of a run (slowest seen)
    wall_s: list[float]
    modules: dict[str, str]  # import name -> file, relative to the sandbox root
    coverage: dict[str, dict]  # source path -> {"statements": [...], "executed": {line: [ctx]}}
    lines_hit: int = 0
    lines_total: int = 0
    skipped: list[str] = field(default_factory=list)

    @property
    def excluded(self) -> list[str]:
        return sorted(set(self.flaky) | set(self.deselected))

    def timeout_for(self, tests: list[str] | None, factor: float, floor: float) -> float:
        """Deadline of a run: factor x its expected time (from the baseline) plus a floor."""
        chosen = self.tests if tests is None else tests
        expected = self.overhead_s + sum(self.durations.get(t, 0.0) for t in chosen)
        return factor * expected + floor

    def cpu_budget_for(self, tests: list[str] | None, factor: float, floor: float,
                       warm: bool = False) -> float:
        """CPU seconds the main thread of a run may use: its start-up and collection with a
        margin (``OVERHEAD_MARGIN``), factor x its tests' expected time, and a floor. The
        whole suite counts every test that runs in it, skipped and xfail ones too (`tests`
        holds the passing ones only). ``warm``: a forked child of the warm runner, which pays
        neither start-up nor collection; the same budget less the baseline's time for both,
        so that the tests get the same CPU on either path. Start-up is not scaled by the
        factor: a mutant changes what the tests do, and the margin covers its noise; scaled,
        it gave every warm endless loop twice the start-up it never pays."""
        if tests is None:
            excluded = set(self.excluded)
            chosen = [t for t in self.durations if t not in excluded]
        else:
            chosen = tests
        budget = OVERHEAD_MARGIN * self.overhead_s + \
            factor * sum(self.durations.get(t, 0.0) for t in chosen) + floor
        return budget - self.overhead_s if warm else budget  # at least the floor

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Baseline":
        return cls(**d)


def _outcomes(report: RunReport) -> dict[str, str]:
    """node id -> passed/failed/skipped, over all phases."""
    out: dict[str, str] = {}
    for t in report.tests:
        prev = out.get(t.nodeid)
        if t.outcome == "failed" and not t.xfail:
            out[t.nodeid] = "failed"
        elif t.outcome == "skipped" and prev != "failed":
            out[t.nodeid] = "skipped"
        elif prev is None:
            out[t.nodeid] = t.outcome
    return out


def _check_imports(report: RunReport, sandbox: Sandbox, target: str) -> dict[str, str]:
    modules = {}
    for name, file in report.modules.items():
        if file is None:
            continue
        if not sandbox.contains(file):
            raise HarnessError(
                f"target {target}: the suite imported {name} from {file}, not from the sandbox "
                f"{sandbox.root}; mutants would be invisible. Check the pin's tests and pytest_args.")
        modules[name] = str(Path(file).resolve().relative_to(sandbox.root.resolve()))
    if not modules:
        raise HarnessError(f"target {target}: the suite never imported any of "
                           f"{list(report.modules)}; check `import_names` and `tests`")
    return modules


def _describe_failure(report: RunReport) -> str:
    if report.timed_out:
        return "the run timed out"
    if not report.started:
        return f"pytest did not start (exit {report.returncode}):\n{report.stderr_tail[-1500:]}"
    if report.collect_errors:
        first = report.collect_errors[0]
        return f"collection error in {first['nodeid']}:\n{first['message'][-1500:]}"
    if report.exitstatus == 5 or (report.finished and report.collected == 0):
        return "no tests were collected"
    return f"pytest exit {report.returncode}:\n{report.stderr_tail[-1500:]}"


def run_baseline(sandbox: Sandbox, fingerprint: str, timeout: float = 1800.0) -> Baseline:
    """Run the clean suite CLEAN_RUNS times plus once with coverage."""
    spec = sandbox.target.spec
    deselected = [d.id for d in spec.deselect]
    reports: list[RunReport] = []
    for i in range(CLEAN_RUNS):
        log.info("%s: clean run %d of %d", spec.name, i + 1, CLEAN_RUNS)
        report, _ = sandbox.run_pytest(list(spec.tests), select=None, exclude=deselected,
                                       timeout=timeout)
        if not report.finished or report.returncode not in (0, 1):
            raise TargetError(spec.name, "the suite does not run on clean code: "
                              + _describe_failure(report))
        reports.append(report)
    outcomes = [_outcomes(r) for r in reports]
    all_ids = sorted(set().union(*outcomes))
    flaky, failing, passing, skipped = [], [], [], []
    for nodeid in all_ids:
        seen = [o.get(nodeid, "missing") for o in outcomes]
        if all(s == "passed" for s in seen):
            passing.append(nodeid)
        elif all(s == "skipped" for s in seen):
            skipped.append(nodeid)
        elif all(s == "failed" for s in seen):
            failing.append(nodeid)
        else:
            flaky.append(nodeid)
    if failing:
        shown = "\n  ".join(failing[:20])
        raise TargetError(spec.name, f"{len(failing)} tests fail on clean code in all "
                          f"{CLEAN_RUNS} runs; fix or deselect them (with a reason):\n  {shown}")
    if not passing:
        raise TargetError(spec.name, "no test passed on clean code")
    if flaky:
        log.warning("%s: %d flaky tests excluded: %s", spec.name, len(flaky), ", ".join(flaky))
    modules = _check_imports(reports[0], sandbox, spec.name)
    log.info("%s: clean run with per-test coverage", spec.name)
    exclude = sorted(set(deselected) | set(flaky))
    cov_report, coverage = sandbox.run_pytest(list(spec.tests), select=None, exclude=exclude,
                                              timeout=timeout * 3, coverage=True)
    cov_out = _outcomes(cov_report)
    newly_failing = sorted(n for n in passing if cov_out.get(n) != "passed")
    if cov_report.returncode != 0 or coverage is None or newly_failing:
        raise TargetError(spec.name, "the suite does not pass under coverage: "
                          + (f"{newly_failing[:10]}" if newly_failing else _describe_failure(cov_report)))
    durations: dict[str, float] = {}
    for r in reports:
        per: dict[str, float] = {}
        for t in r.tests:
            per[t.nodeid] = per.get(t.nodeid, 0.0) + t.duration
        for k, v in per.items():
            durations[k] = max(durations.get(k, 0.0), v)
    overhead = max(max(0.0, r.wall_s - sum(t.duration for t in r.tests)) for r in reports)
    hit, total = line_coverage(coverage)
    return Baseline(
        fingerprint=fingerprint, tests=passing, flaky=flaky, deselected=deselected,
        durations={k: round(v, 6) for k, v in sorted(durations.items())},
        overhead_s=round(overhead, 3), wall_s=[round(r.wall_s, 3) for r in reports],
        modules=modules, coverage=coverage, lines_hit=hit, lines_total=total, skipped=skipped)
