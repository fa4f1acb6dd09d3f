"""The generator plug-in protocol: what a generator receives and what it returns.

A generator is any object with ``name``, ``version`` and ``generate(ctx)``; it is
given a target (its sources, existing test files, the task set with each task's
function source and mutant diff), a model client (None for model-free generators),
the run's token budget and a gate it may call, and yields candidate test files, each
optionally attributed to a task. See docs/generators.md.
"""

from __future__ import annotations

import ast
import difflib
import threading
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Iterator, Protocol

from .mutate import apply
from .records import Mutant


# CPython 3.11 builds AST objects thread-unsafely (gh-106905): two threads parsing at
# once can fail with "SystemError: AST constructor recursion depth mismatch". Every
# ast.parse that may run outside the main thread takes this lock.
AST_LOCK = threading.Lock()


def parse(source, filename: str = "<unknown>") -> ast.Module:
    with AST_LOCK:
        return ast.parse(source, filename=filename)


@dataclass(frozen=True)
class Task:
    """One mutant a generator is asked to kill."""

    id: str  # the mutant id
    path: str  # file, relative to the target's root
    module: str  # importable module name, e.g. "cachetools.func"
    line: int
    end_line: int
    function: str | None  # qualified name, None at module level
    function_source: str  # the enclosing def (or the statement, at module level)
    diff: str  # unified diff of the mutation
    operator: str
    original: str
    replacement: str
    covered_by: tuple[str, ...] = ()  # node ids of the suite's tests that execute the line
    start: int = 0  # byte offsets of the edit in the file
    end: int = 0
    col: int = 0  # byte columns of the edit's first and last line
    end_col: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class CandidateTest:
    """A test file a generator wrote, optionally for one task."""

    source: str
    task: str | None = None
    attempt: int = 1
    meta: dict = field(default_factory=dict)


@dataclass
class GenerationContext:
    """What a generator is given for one target (every field is listed in docs/generators.md)."""

    target: str
    sources: dict[str, str]  # path -> text of every mutated source file
    modules: dict[str, str]  # path -> importable module name
    test_files: list[str]  # the suite's test files, relative to the target's root
    tasks: list[Task]
    model: Any  # a killbench.models.ModelClient, or None
    budget: Any  # the target's token budget (killbench.models.Budget), or None
    gate: Callable[[str, str | None], Any]  # (test source, task id or None) -> GateEntry
    seed: int = 0
    options: dict = field(default_factory=dict)
    read_test: Callable[[str], str] | None = None  # text of one of the suite's test files
    log: Callable[[str], None] = print
    prepared: Any = None  # the PreparedTarget, for model-free generators that run code
    baseline: Any = None
    budgets: Any = None  # killbench.evidence.Budgets: tokens, gate calls, seconds for this target
    python: Any = None  # the interpreter of the target's environment (a Path)
    workspace: Callable[[], Any] | None = None  # () -> killbench.execution.Workspace (see docs)
    report: Callable[[dict], None] | None = None  # the generator's own metrics, into the summary
    stopping: Callable[[], bool] = lambda: False  # True once a budget is spent: stop soon
    isolation: str = "none"  # the level every run of a test gets
    deadline: float | None = None  # time.monotonic() when the wall-time budget ends

    def seconds_left(self) -> float | None:
        """Seconds of the wall-time budget left (None: no limit)."""
        import time

        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())


class Generator(Protocol):
    name: str
    version: str
    needs_model: bool

    def generate(self, ctx: GenerationContext) -> Iterable[CandidateTest] | Iterator[CandidateTest]:
        ...


def module_name(module_path: str) -> str:
    """"cachetools/func.py" -> "cachetools.func"; package __init__ -> the package."""
    parts = module_path[:-3].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def function_source(text: str, mutant: Mutant) -> str:
    """The innermost def holding the mutant, or the statement at module level."""
    data = text.encode("utf-8")
    starts = [0] + [i + 1 for i, b in enumerate(data) if b == 0x0A]
    best = None
    for node in ast.walk(parse(data)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.stmt)):
            s = starts[node.lineno - 1] + node.col_offset
            first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            e = starts[node.end_lineno - 1] + node.end_col_offset
            if s <= mutant.start and mutant.end <= e:
                is_def = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                if is_def and (best is None or best[0] != "def" or s > best[1]):
                    best = ("def", s, first, node.end_lineno)
                elif best is None:
                    best = ("stmt", s, first, node.end_lineno)
    if best is None:
        return mutant.original
    lines = text.splitlines(keepends=True)
    return "".join(lines[best[2] - 1: best[3]])


def mutant_diff(text: str, mutant: Mutant) -> str:
    new = apply(text.encode("utf-8"), mutant).decode("utf-8")
    return "".join(difflib.unified_diff(text.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=f"a/{mutant.path}", tofile=f"b/{mutant.path}", n=3))


def make_task(mutant: Mutant, text: str, module_path: str, covered_by=()) -> Task:
    return Task(id=mutant.id, path=mutant.path, module=module_name(module_path), line=mutant.line,
                end_line=mutant.end_line, function=mutant.function,
                function_source=function_source(text, mutant), diff=mutant_diff(text, mutant),
                operator=mutant.operator, original=mutant.original, replacement=mutant.replacement,
                covered_by=tuple(covered_by), start=mutant.start, end=mutant.end, col=mutant.col,
                end_col=mutant.end_col)
