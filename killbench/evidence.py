"""Typed records of what a run recorded: the interface between running and computing.

Everything `run`, the gate and scoring observe is written as one of these records into
the run directory (and the bundle); every number killbench prints is computed from them
by ``metrics`` without running anything, and ``verify`` re-executes a run and compares
these records before it compares numbers. The JSON Schemas in ``docs/schemas/`` are
generated from these models (``killbench.evidence.write_schemas``), and a bundle is
validated against them when it is loaded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import UserError

TestStatus = Literal["passed", "failed", "skipped", "interrupted", "not-run"]
CellStatus = Literal["passed", "failed", "timeout", "interrupted", "not-run", "harness-error"]


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def dump(self) -> dict:
        return self.model_dump(mode="json")


# ---------------------------------------------------------------- the gate


class TestOutcome(Record):
    """One test in one run, as the probe reported it."""

    __test__ = False  # not a pytest test class

    status: TestStatus
    when: str | None = None  # setup, call or teardown: where it failed
    exc_type: str | None = None
    errno: int | None = None
    message: str = ""  # the end of pytest's failure text: feedback only, never a verdict


class AuditEvent(Record):
    kind: Literal["write", "read-source", "read-code"]
    path: str
    nodeid: str | None = None  # None: at import time of the test file


class PhaseRun(Record):
    """One pytest process of the gate: what ran, how it ended, what each test did."""

    phase: str
    argv: list[str]
    isolation: str
    duration_s: float
    cpu_s: float
    max_rss_kb: int
    returncode: int | None
    signal: int | None = None
    timed_out: bool = False
    finished: bool = False
    exitstatus: int | None = None
    collected: int = 0
    collect_errors: list[str] = Field(default_factory=list)
    tests: dict[str, TestOutcome] = Field(default_factory=dict)
    audit: list[AuditEvent] = Field(default_factory=list)
    tampered: list[str] = Field(default_factory=list)
    log_problems: list[str] = Field(default_factory=list)
    # the PYTHONHASHSEED it ran under: drawn at random for clean-hashseed (the test cannot
    # know it beforehand) and recorded so that verify replays the same seed
    hashseed: str | None = Field(default=None, pattern=r"^[0-9]{1,20}$")
    # the seed of the disguise the module was rewritten with (neutral, mutant-disguised):
    # drawn at random like the hash seed, recorded for the same reason
    disguise_seed: str | None = Field(default=None, pattern=r"^[0-9]{1,20}$")


class TestVerdict(Record):
    """The gate's decision on one test function of a candidate file."""

    __test__ = False

    nodeid: str
    kept: bool
    reason: str | None = None  # one of gate.REASONS when rejected
    stage: str  # the phase that decided
    message: str | None = None


class GateEntry(Record):
    """Everything the gate did with one candidate file, and what it decided."""

    target: str
    candidate: str  # sha256[:16] of the file's bytes
    task: str | None  # the mutant it was written for (None: no task)
    asked_by: Literal["generator", "harness"] = "harness"  # ctx.gate, or the gating of a yield
    unit: Literal["test", "file"] = "test"
    file_reason: str | None = None  # the file was rejected as a whole (before any test ran)
    stage: str = "intake"
    message: str | None = None
    size: int = 0
    tests: list[TestVerdict] = Field(default_factory=list)
    phases: list[PhaseRun] = Field(default_factory=list)
    wall_s: float = 0.0

    @property
    def kept(self) -> bool:
        return self.file_reason is None and any(t.kept for t in self.tests)

    @property
    def kept_tests(self) -> list[str]:
        return [t.nodeid for t in self.tests if t.kept] if self.file_reason is None else []

    @property
    def reason(self) -> str | None:
        """The file's reason, or the first test's (what a generator's retry is told)."""
        if self.kept:
            return None
        if self.file_reason:
            return self.file_reason
        return next((t.reason for t in self.tests if t.reason), None)

    @property
    def feedback(self) -> str | None:
        if self.file_reason or not self.tests:
            return self.message
        first = next((t for t in self.tests if not t.kept), None)
        return (first.message if first else None) or self.message


# ---------------------------------------------------------------- the population


class PopulationMutant(Record):
    """One mutant of the run's population with its baseline verdict and reach."""

    id: str
    path: str
    line: int
    end_line: int
    col: int
    end_col: int
    start: int
    end: int
    function: str | None
    operator: str
    original: str
    replacement: str
    unkillable: str | None = None
    verdict: str
    reachable: bool
    import_time: bool = False
    covered_by: list[str] = Field(default_factory=list)
    role: str = "sample"


class Population(Record):
    """The mutants a run is scored on, frozen when the run starts."""

    target: str
    source: str  # "manifest <digest>" or "mutate <fingerprint>"
    mutants: list[PopulationMutant]
    task_set: list[str]
    held_out: list[str]
    held_out_minimum: int | None = None
    split: str = "full"  # which of the manifest's task splits (a `mutate` run has only full)
    limit: int | None = None  # `run --limit N`: only the split's first N tasks
    # the manifest's controls (controls.py): negative count and commitment, positive tests
    controls: dict = Field(default_factory=dict)
    sources: dict[str, str] = Field(default_factory=dict)  # path -> clean text (for export)

    def by_id(self) -> dict[str, PopulationMutant]:
        return {m.id: m for m in self.mutants}


# ---------------------------------------------------------------- scoring


class KillRow(Record):
    """One kept test: which candidate file and test function, and what it was written for."""

    key: str  # "CANDIDATE::NODEID" within the file
    candidate: str
    nodeid: str
    task: str | None
    clean: TestStatus  # its status on clean code, run alone with its file's other kept tests
    reached: list[str] = Field(default_factory=list)  # population mutants on lines it executes


class KillRun(Record):
    """One candidate file's kept tests against one mutant."""

    mutant: str
    candidate: str
    cells: dict[str, CellStatus]  # row key -> status
    duration_s: float = 0.0
    timed_out: bool = False
    flags: dict[str, list[str]] = Field(default_factory=dict)  # row key ("*": the file) -> what
    # the run saw it do that no test should: a write outside its directory, a read of the source


class KillMatrix(Record):
    target: str
    isolation: str
    rows: list[KillRow] = Field(default_factory=list)
    runs: list[KillRun] = Field(default_factory=list)
    excluded: dict[str, str] = Field(default_factory=dict)  # row key -> why it scores nothing

    def status(self) -> dict[str, dict[str, str]]:
        """row key -> mutant -> status, over every run."""
        out: dict[str, dict[str, str]] = {r.key: {} for r in self.rows}
        for run in self.runs:
            for key, st in run.cells.items():
                out.setdefault(key, {})[run.mutant] = st
        return out


# ---------------------------------------------------------------- the run


class Budgets(Record):
    """What one target's generation may spend; `rules` says whether these are the benchmark's."""

    tokens: int | None  # None: a model-free generator (no token ceiling applies)
    gate_calls: int
    seconds: float


class GenerationSummary(Record):
    """One target's generation, as it ended."""

    target: str
    tasks: int
    attempts: int = 0  # files yielded (the same file yielded again for a task counts again)
    files: int = 0  # distinct (file, task) pairs yielded
    tests: int = 0
    kept_tests: int = 0
    kept_files: int = 0
    rejected: dict[str, int] = Field(default_factory=dict)  # reason -> tests (or files)
    gate_calls: int = 0  # distinct tests gated for this target (asked for or yielded)
    gate_calls_by_generator: int = 0  # of which the generator asked for through ctx.gate
    tokens_in: int = 0
    tokens_out: int = 0
    budget: dict | None = None  # the token budget's own account
    budgets: Budgets
    wall_s: float = 0.0
    cpu_s: float = 0.0
    stopped: str | None = None  # budget, wall time, gate calls, or the generator's error
    error: str | None = None  # a plug-in or model failure: the run is not complete
    # what the generator reported of its own work (ctx.report): numbers, strings, or counts
    generator_metrics: dict[str, float | int | str | dict[str, int]] = Field(default_factory=dict)


def read_jsonl(path: Path, model: type[Record]) -> list:
    """Records of one kind from a JSON-lines file; only a torn last line is dropped."""
    if not path.exists():
        return []
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    lines.pop()  # after the last newline: empty, or a line cut by a kill
    out = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append(model.model_validate(json.loads(line)))
        except (json.JSONDecodeError, ValidationError) as exc:
            raise UserError(f"{path}: line {i} is not a valid {model.__name__}: "
                            f"{str(exc).splitlines()[0]}") from None
    return out


def load(path: Path, model: type[Record]):
    try:
        return model.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        raise UserError(f"{path} is missing") from None
    except ValidationError as exc:
        raise UserError(f"{path} is not a valid {model.__name__}: "
                        f"{exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}") from None


def write(path: Path, record: Record) -> None:
    import os

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(record.dump(), indent=1, sort_keys=True))
    os.replace(tmp, path)


class Submission(Record):
    """One test file a generator yielded: what the funnel and scoring start from."""

    target: str
    candidate: str
    task: str | None
    attempt: int = 1
    meta: dict = Field(default_factory=dict)


class GeneratorInfo(Record):
    ref: str
    name: str
    version: str
    needs_model: bool = True
    code: dict = Field(default_factory=dict)  # module, sha256 of its file, distribution
    prompts: dict = Field(default_factory=dict)


class TargetConfig(Record):
    ref: str
    version: str | None = None
    fingerprint: str
    population: str  # "manifest <digest>" or "mutate <fingerprint>"
    tasks: int
    budgets: Budgets


class RunConfig(Record):
    """What a run was asked to do and under which rules; what a resumed run must match."""

    schema_version: int = 2
    killbench: str
    manifest_digest: str | None = None
    benchmark: str | None = None  # the benchmark version of the manifests
    split: str = "full"  # the task split the generator is given: full or lite
    generator: GeneratorInfo
    model: str | None = None
    seed: int = 0
    options: dict = Field(default_factory=dict)
    isolation: str
    gate_timeout_s: float
    overrides: dict = Field(default_factory=dict)  # budgets set on the command line
    rules: dict = Field(default_factory=dict)
    outside_rules: list[str] = Field(default_factory=list)  # what differs from the rules
    target_refs: list[str]
    targets: dict[str, TargetConfig] = Field(default_factory=dict)
    started_at: str

    def identity(self) -> dict:
        """The fields a resumed run must share with the interrupted one."""
        d = self.dump()
        for k in ("targets", "started_at"):
            d.pop(k)
        return d


def schema_models() -> dict[str, type[Record]]:
    """The records whose JSON Schemas are published in docs/schemas/ (file name -> model)."""
    from .metrics import Score

    return {"run-config": RunConfig, "submission": Submission, "gate-entry": GateEntry,
            "population": Population, "kill-matrix": KillMatrix,
            "generation-summary": GenerationSummary, "score": Score}


def render_schemas() -> dict[str, str]:
    """file name -> the JSON Schema text generated from each record (what docs/schemas holds)."""
    return {f"{name}.schema.json": json.dumps(model.model_json_schema(), indent=1, sort_keys=True) + "\n"
            for name, model in schema_models().items()}


def write_schemas(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for name, text in render_schemas().items():
        (directory / name).write_text(text)
        out.append(directory / name)
    return out
