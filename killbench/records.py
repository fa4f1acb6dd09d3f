"""The shared vocabulary as plain records: what flows between stages and onto disk.

Every record converts to and from a JSON-ready dict with the same field names the
docs use, so what a user reads in a file is what the code calls it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

VERDICTS = ("killed", "survived", "timeout", "invalid", "harness-error")
KILL_KINDS = ("assertion", "exception", "collection-error", "crash")


def _plain(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [_plain(x) for x in obj]
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    return obj


@dataclass(frozen=True)
class Mutant:
    """One small source change at one site by one operator."""

    id: str  # stable content hash
    path: str  # path relative to the target's root, with forward slashes
    line: int
    end_line: int
    col: int  # byte column of the edit's start, 0-based
    end_col: int
    start: int  # byte offsets of the edit in the file
    end: int
    function: str | None  # qualified name of the innermost def, None at module level
    operator: str
    original: str
    replacement: str
    unkillable: str | None = None  # reason, or None

    def to_dict(self) -> dict:
        return _plain(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Mutant":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass(frozen=True)
class KilledBy:
    """How a mutant was killed: the kind and the first test that noticed."""

    kind: str  # one of KILL_KINDS
    test: str | None  # node id, or None (e.g. a crash before any test ran)
    exc_type: str | None = None

    def to_dict(self) -> dict:
        return _plain(self)


@dataclass(frozen=True)
class Reach:
    """Which tests execute a mutant's line, from per-test coverage."""

    reachable: bool
    covered_by: tuple[str, ...]  # node ids of tests whose run executed the line
    import_time: bool  # executed while modules were imported (outside any test)

    def to_dict(self) -> dict:
        return _plain(self)


@dataclass(frozen=True)
class Outcome:
    """What running the suite (or not running it, with the reason) said about a mutant."""

    verdict: str  # one of VERDICTS
    killed_by: KilledBy | None = None
    duration_s: float = 0.0
    ran: bool = True  # False when the verdict follows without a run (unreached, identical bytecode)
    selection: str = "covering"  # "covering", "full" or "none"
    detail: str | None = None  # why, for harness-error, invalid and not-run verdicts
    runner: str = "plain"  # "warm" / "fork" when the first run of the mutant was in the warm / forked runner

    def to_dict(self) -> dict:
        return _plain(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Outcome":
        kb = d.get("killed_by")
        return cls(
            verdict=d["verdict"],
            killed_by=KilledBy(**kb) if kb else None,
            duration_s=d.get("duration_s", 0.0),
            ran=d.get("ran", True),
            selection=d.get("selection", "covering"),
            detail=d.get("detail"),
            runner=d.get("runner", "plain"),
        )


@dataclass(frozen=True)
class MutantRecord:
    """A mutant with its reach and baseline outcome: one row of `mutate --json`."""

    mutant: Mutant
    reach: Reach
    outcome: Outcome

    def to_dict(self) -> dict:
        d = self.mutant.to_dict()
        d.update(self.reach.to_dict())
        d.update(self.outcome.to_dict())
        return d


@dataclass
class TestEvent:
    """One test phase as the probe plugin reported it."""

    __test__ = False  # not a pytest test class

    nodeid: str
    when: str
    outcome: str
    exc_type: str | None
    assertion: bool
    xfail: bool
    duration: float
    message: str = ""  # the end of pytest's failure text: feedback for generators only, never a verdict
    errno: int | None = None  # of an OSError the test raised (EFBIG: the file-size limit)


@dataclass
class RunReport:
    """One pytest process: its exit status and the structured events it wrote."""

    returncode: int | None  # None when killed by the harness after a timeout
    timed_out: bool
    wall_s: float
    started: bool = False  # the probe plugin was loaded
    finished: bool = False  # pytest reached sessionfinish
    exitstatus: int | None = None
    collected: int = 0
    selected: int = 0
    missing: list[str] = field(default_factory=list)
    collect_errors: list[dict] = field(default_factory=list)
    tests: list[TestEvent] = field(default_factory=list)
    modules: dict[str, str | None] = field(default_factory=dict)
    stderr_tail: str = ""
    sources_changed: list[str] = field(default_factory=list)  # what the run changed in the sandbox
    signal: int | None = None  # the signal that ended pytest (SIGXCPU: the CPU limit)
    cpu_s: float = 0.0
    max_rss_kb: int = 0
    isolation: str = "none"
    argv: list[str] = field(default_factory=list)  # the command, without the exec prefix
    begun: list[str] = field(default_factory=list)  # node ids whose run started, in order
    audit: list[dict] = field(default_factory=list)  # the probe's audit events (untrusted runs)
    log_problems: list[str] = field(default_factory=list)  # malformed event lines
    runner: str = "plain"  # "warm": a child of the warm runner; "fork": of the forked runner
    cpu_exceeded: bool = False  # the timeout was the run's CPU budget used up, not its deadline

    def failures(self) -> list[TestEvent]:
        return [t for t in self.tests if t.outcome == "failed"]

    def ran_tests(self) -> list[str]:
        return sorted({t.nodeid for t in self.tests if t.when == "call"})

    def passed_tests(self) -> set[str]:
        passed = {t.nodeid for t in self.tests if t.when == "call" and t.outcome == "passed"}
        failed = {t.nodeid for t in self.tests if t.outcome == "failed"}
        return passed - failed
