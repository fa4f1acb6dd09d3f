"""Run selected tests against one mutant in one sandbox, and say what happened.

The verdict comes from pytest's exit code and the probe's structured events, never
from printed text:

    exit 0, the selected tests ran, target imported from the sandbox -> survived
    exit 1 with a failed test                                         -> killed (assertion
                                                                          or exception)
    deadline passed (whole process group killed), or pytest's main   -> timeout
    thread used up the run's CPU budget (RunSettings.cpu_floor)
    exit 2/3/4/5, a signal, or no report                              -> the same tests
        are run on clean code in the same sandbox: if they pass there, the mutant
        caused it -> killed (collection-error, or crash); if not -> harness-error
    selected tests missing from the collection                        -> rerun on the
        full suite; still wrong -> harness-error
    target imported from outside the sandbox, or sources changed      -> harness-error

A harness-error is never a kill.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass

from .baseline import Baseline
from .executor import Limits
from .mutate import apply
from .records import KilledBy, Mutant, Outcome, Reach, RunReport
from .sandbox import Sandbox
from .warm import TRACEBACK


@dataclass(frozen=True)
class RunSettings:
    timeout_factor: float = 3.0
    timeout_floor: float = 10.0
    warm: bool = True  # run covering tests in the sandbox's warm runner where it applies
    # a mutant that survives its covering tests is judged again on the whole suite (below)
    confirm_survivors: bool = True
    # A run's CPU budget: the CPU seconds pytest's main thread (the one that runs the tests)
    # may use, timeout_factor x its expected time plus this (None: no budget, the deadline
    # alone). Used up, the run is a timeout, as at the deadline. The deadline's floor is wall
    # time, large for a loaded machine and for a test that waits (asleep, or while a thread
    # of the code under test spins) before it fails; an endless loop in the tests' own
    # thread uses its CPU, and this ends it sooner.
    cpu_floor: float | None = 1.0


def test_files(nodeids: list[str]) -> list[str]:
    """The file arguments that collect these node ids."""
    return sorted({n.split("::", 1)[0] for n in nodeids})


def selection_for(reach: Reach, baseline: Baseline) -> list[str] | None:
    """Covering tests, or None for the full suite (import-time code)."""
    if reach.import_time:
        return None
    valid = set(baseline.tests)
    return [t for t in reach.covered_by if t in valid]


def _limits(baseline: Baseline, tests: list[str] | None, settings: RunSettings,
            warm: bool = False):
    """A run's deadline (wall seconds) and CPU budget (seconds of its main thread, or None);
    ``warm``: the budget of a warm runner's child."""
    timeout = baseline.timeout_for(tests, settings.timeout_factor, settings.timeout_floor)
    cpu = None if settings.cpu_floor is None else round(baseline.cpu_budget_for(
        tests, settings.timeout_factor, settings.cpu_floor, warm=warm), 3)
    return timeout, cpu


def _whole_suite_warm(sandbox: Sandbox, baseline: Baseline, settings: RunSettings,
                      mutant: Mutant) -> tuple[RunReport | None, list[str] | None]:
    """The whole suite against `mutant` in the warm runner (every test it collected, in their
    order), and that order; (None, None) when it cannot. Only for a mutant whose line no
    import or collection ran: the state the server built while collecting is then the same
    with the mutant as without, and its child sees the swapped code from the first test on,
    as for its covering tests."""
    warm = getattr(sandbox, "warm", None)
    if warm is None or not settings.warm:
        return None, None
    timeout, cpu = _limits(baseline, None, settings, warm=True)
    report = warm.run(mutant, None, timeout, cpu)
    return (report, list(warm.order)) if report is not None and warm.order else (None, None)


def _run(sandbox: Sandbox, baseline: Baseline, tests: list[str] | None,
         settings: RunSettings, mutant: Mutant | None = None, clean_warm: bool = False) -> RunReport:
    """One run of `tests` (None: the whole suite) on the sandbox as it is: in the warm
    runner when it has one, for a mutant's selection or (`clean_warm`) for the same kind of
    selection on clean code; in the forked runner when it has one, for a run that collects
    the suite's own arguments (the whole suite, or a selection of node ids that are not
    paths); else as a process of its own."""
    timeout, cpu = _limits(baseline, tests, settings)
    warm = getattr(sandbox, "warm", None)
    if warm is not None and settings.warm and (mutant is not None or clean_warm) and tests:
        _, warm_cpu = _limits(baseline, tests, settings, warm=True)
        report = warm.run(mutant, tests, timeout, warm_cpu)
        if report is not None:
            return report
    spec = sandbox.target.spec
    files = test_files(tests) if tests is not None else []
    suite_args = tests is None or not all((sandbox.tree / f).is_file() for f in files)
    fork = getattr(sandbox, "fork", None)
    if fork is not None and settings.warm and suite_args:
        # the forked runner's children collect the suite's own arguments, as this run
        # would: the whole suite, or a selection of it the warm runner could not take
        report = fork.run(mutant, tests, timeout, cpu)
        if report is not None:
            return report
    if suite_args:
        # node ids that are not paths under the tree (e.g. tests collected with --pyargs
        # from the installed package): collect the suite's own arguments, select by id
        files = list(spec.tests)
    args = ["-x", TRACEBACK] + files
    report, _ = sandbox.run_pytest(args, select=tests, exclude=baseline.excluded, timeout=timeout,
                                   limits=Limits(cpu_budget=cpu))
    return report


def _imports_ok(report: RunReport, sandbox: Sandbox, require: bool = False) -> str | None:
    """None if every imported target module came from the sandbox, else the problem.

    With ``require``, at least one must have been imported: a run that passed
    without importing the target judged nothing."""
    imported = {k: v for k, v in report.modules.items() if v}
    outside = {k: v for k, v in imported.items() if not sandbox.contains(v)}
    if outside:
        return f"target imported from outside the sandbox: {outside}"
    if require and report.finished and not imported:
        return "the selected tests never imported the target"
    return None


def _first_failure(report: RunReport) -> KilledBy | None:
    for t in report.tests:
        if t.outcome == "failed" and not t.xfail:
            kind = "assertion" if (t.when == "call" and t.assertion) else "exception"
            return KilledBy(kind=kind, test=t.nodeid, exc_type=t.exc_type)
    return None


def _clean_passes(sandbox: Sandbox, baseline: Baseline, tests, settings) -> tuple[bool, RunReport]:
    """Whether `tests` pass on clean code, run the way a mutant's selection is run: in the
    warm runner when there is one (the same collected session a warm kill was seen in, so
    the confirmation asks of that kill exactly "does this run pass without the mutant?")."""
    report = _run(sandbox, baseline, tests, settings, clean_warm=True)
    ok = (report.returncode == 0 and report.finished and not report.missing
          and _imports_ok(report, sandbox, require=True) is None)
    return ok, report


def classify(report: RunReport, sandbox: Sandbox) -> tuple[str, KilledBy | None, str | None]:
    """First reading of one run: verdict, how killed, detail; 'check' needs a clean rerun."""
    if report.sources_changed:
        return "harness-error", None, f"the run changed sandbox sources: {report.sources_changed}"
    garbled = [p for p in report.log_problems if "cut short" not in p]
    if garbled:
        return "harness-error", None, f"the probe's event log is malformed: {garbled[:3]}"
    if report.timed_out:
        return "timeout", None, "used up its CPU budget" if report.cpu_exceeded else None
    problem = _imports_ok(report, sandbox)
    if problem:
        return "harness-error", None, problem
    if report.missing:
        return "missing", None, f"{len(report.missing)} selected tests were not collected"
    if report.returncode == 5 or report.exitstatus == 5:
        return "harness-error", None, "no tests were collected: nothing judged this mutant"
    if report.returncode == 0 and report.finished:
        if not report.ran_tests():
            return "harness-error", None, "exit 0 but no test ran: nothing judged this mutant"
        problem = _imports_ok(report, sandbox, require=True)
        if problem:
            return "harness-error", None, problem
        return "survived", None, None
    if report.returncode == 1 and report.finished:
        killed_by = _first_failure(report)
        if killed_by is not None:
            return "killed", killed_by, None
        if report.collect_errors:
            return "killed", KilledBy("collection-error", report.collect_errors[0]["nodeid"]), None
    return "check", None, None


def ran_until_kill(report: RunReport, tests: list[str]) -> list[str]:
    """The selected tests a killing run started, in the order it ran them: the first
    failure stops a run, so this is the part of the selection that saw the kill."""
    wanted = set(tests)
    ran = [n for n in dict.fromkeys(report.begun) if n in wanted]
    return ran or list(tests)


WHOLE_SUITE = ("",)  # CleanSelections' key of the whole suite (no node id is empty)


class CleanSelections:
    """Whether the tests that saw a kill pass on clean code when run that way on their own.

    A kill under a covering selection counts only if the run that saw it passes on clean
    code without the mutant: tests that depend on other tests having run first would
    otherwise turn into false kills. That run is the selection up to the killing test (the
    first failure ends it), so that part is what is confirmed; a clean run of a longer
    part of the same selection, in the same order, answers for every shorter one (the
    tests before a point run the same whatever is selected after it). Results are shared
    by all workers.
    """

    def __init__(self):
        self._passing: dict[tuple, int] = {}  # selection -> longest part known to pass
        self._failing: dict[tuple, int] = {}  # selection -> shortest part known to fail
        self._lock = threading.Lock()
        self.runs = 0

    def known_to_pass(self, tests: list[str] | None) -> bool:
        """Whether a clean run of all of `tests` (None: the whole suite) already passed: a
        mutant whose run ended without a verdict (a collection error, a crash) is checked
        against that run, the same for every such mutant."""
        key = WHOLE_SUITE if tests is None else tuple(tests)
        with self._lock:
            return self._passing.get(key, 0) >= len(key)

    def record_pass(self, tests: list[str] | None) -> None:
        key = WHOLE_SUITE if tests is None else tuple(tests)
        with self._lock:
            self._passing[key] = max(self._passing.get(key, 0), len(key))

    def passes(self, sandbox: Sandbox, baseline: Baseline, tests: list[str], settings,
               ran: list[str] | None = None) -> bool:
        """Whether `ran` (the selection `tests` up to its kill; all of it if not given)
        passes on clean code."""
        key, part = tuple(tests), list(tests if ran is None else ran)
        n = len(part)
        if list(key[:n]) != part:
            key = tuple(part)  # not run in the selection's order (plain collection order)
        with self._lock:
            if self._passing.get(key, 0) >= n:
                return True
            if self._failing.get(key, n + 1) <= n:
                return False
        ok, _ = _clean_passes(sandbox, baseline, part, settings)
        with self._lock:
            self.runs += 1
            if ok:
                self._passing[key] = max(self._passing.get(key, n), n)
            else:
                self._failing[key] = min(self._failing.get(key, n), n)
        return ok


def run_mutant(sandbox: Sandbox, baseline: Baseline, mutant: Mutant, tests: list[str] | None,
               settings: RunSettings = RunSettings(),
               clean: CleanSelections | None = None) -> Outcome:
    """Write the mutant into the sandbox, run the selection, restore, classify."""
    start = time.monotonic()
    selection = "full" if tests is None else "covering"
    original = (sandbox.target.tree / mutant.path).read_bytes()
    mutated = apply(original, mutant)

    @contextmanager
    def applied():
        """The mutant written into the sandbox for the length of a run; always put back."""
        sandbox.write(mutant.path, mutated)
        try:
            yield
        finally:
            sandbox.restore()

    with applied():
        report = _run(sandbox, baseline, tests, settings, mutant)
        runner = report.runner
        verdict, killed_by, detail = classify(report, sandbox)
        if verdict == "missing" and tests is not None:
            selection = "full"
            report = _run(sandbox, baseline, None, settings, mutant)
            verdict, killed_by, detail = classify(report, sandbox)

    def on_full_suite(why: str, warm_first: bool = False):
        """The mutant judged again on the whole suite (passed on, so that a forked runner whose
        server already holds the mutated module, a conftest imported it, hands it to the plain
        path); the verdict, how killed, and the detail saying why. ``warm_first``: try the
        warm runner's whole suite first; its survivor stands, and its kill when the tests up
        to the kill pass on clean code there; anything else is judged the usual way."""
        if warm_first and clean is not None:
            with applied():
                rep, order = _whole_suite_warm(sandbox, baseline, settings, mutant)
                v, kb, d = classify(rep, sandbox) if rep is not None else (None, None, None)
            if v == "survived" or (v == "killed" and clean.passes(
                    sandbox, baseline, order, settings, ran_until_kill(rep, order))):
                return rep, v, kb, ((d or "") + f" ({why}; judged on the full suite)").strip()
        with applied():
            rep = _run(sandbox, baseline, None, settings, mutant)
            v, kb, d = classify(rep, sandbox)
        return rep, v, kb, ((d or "") + f" ({why}; judged on the full suite)").strip()

    if verdict == "killed" and selection == "covering" and clean is not None \
            and not clean.passes(sandbox, baseline, tests, settings, ran_until_kill(report, tests)):
        # the covering tests that saw the kill fail on clean code run alone
        selection = "full"
        report, verdict, killed_by, detail = on_full_suite("covering tests fail alone on clean code")
    if verdict == "survived" and selection == "covering" and settings.confirm_survivors:
        # a survivor is a claim about the whole suite, and a test that never runs the mutated
        # line can still see its effect: a module-level cache that the line fills while one
        # test runs and a later test reads (isodate's date and time regexes are built so: 10
        # of the 40 tasks of benchmark 1.0 judged on covering tests die on the whole suite)
        selection = "full"
        report, verdict, killed_by, detail = on_full_suite("survived its covering tests",
                                                           warm_first=True)
    if verdict == "missing":
        verdict = "harness-error"
    if verdict == "check":
        part = None if selection == "full" else tests
        if clean is not None and clean.known_to_pass(part):
            clean_ok, clean_report = True, None
        else:
            clean_ok, clean_report = _clean_passes(sandbox, baseline, part, settings)
            if clean is not None and clean_ok:
                clean.record_pass(part)
        code = "signal %d" % -report.returncode \
            if report.returncode is not None and report.returncode < 0 else f"exit {report.returncode}"
        if clean_ok:
            if report.collect_errors or report.returncode in (2, 4):
                where = report.collect_errors[0]["nodeid"] if report.collect_errors else None
                verdict, killed_by = "killed", KilledBy("collection-error", where)
            else:
                verdict, killed_by = "killed", KilledBy("crash", None)
            detail = f"pytest {code} under the mutant; the same tests pass on clean code"
        else:
            verdict = "harness-error"
            detail = (f"pytest {code} under the mutant and the same tests fail on clean code too "
                      f"(clean exit {clean_report.returncode}): {report.stderr_tail[-300:]}")
    return Outcome(verdict=verdict, killed_by=killed_by,
                   duration_s=round(time.monotonic() - start, 3), ran=True,
                   selection=selection, detail=detail, runner=runner)


def run_clean(sandbox: Sandbox, baseline: Baseline, tests: list[str] | None,
              settings: RunSettings = RunSettings()) -> Outcome:
    """The same run with no mutant: must survive (used by doctor's alternation check)."""
    start = time.monotonic()
    report = _run(sandbox, baseline, tests, settings)
    verdict, killed_by, detail = classify(report, sandbox)
    if verdict in ("check", "missing"):
        verdict = "harness-error"
    return Outcome(verdict=verdict, killed_by=killed_by,
                   duration_s=round(time.monotonic() - start, 3),
                   selection="full" if tests is None else "covering", detail=detail)
