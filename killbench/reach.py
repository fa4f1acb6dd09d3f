"""Reachability: which tests execute the line of each mutant, from per-test coverage.

Coverage is recorded with one dynamic context per test (its node id) and the empty
context for everything that runs outside a test: imports during collection, class
bodies, decorators, default arguments. A mutant on a line run in the empty context
is reachable and import-time: it is run against the whole suite, never against an
empty selection.
"""

from __future__ import annotations

import ast
import bisect

from .records import Mutant, Reach


class StatementIndex:
    """The innermost statement that holds a byte offset, for one file."""

    def __init__(self, text: str):
        data = text.encode("utf-8")
        starts = [0]
        for i, b in enumerate(data):
            if b == 0x0A:
                starts.append(i + 1)
        self._spans: list[tuple[int, int, int]] = []  # start, end, lineno
        from .generation import AST_LOCK

        with AST_LOCK:
            tree = ast.parse(data)
        for node in ast.walk(tree):
            if isinstance(node, ast.stmt):
                s = starts[node.lineno - 1] + node.col_offset
                e = starts[node.end_lineno - 1] + node.end_col_offset
                first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
                self._spans.append((s, e, first))
        self._spans.sort()
        self._starts = [s for s, _, _ in self._spans]

    def statement_line(self, start: int, end: int, default: int) -> int:
        best = None
        i = bisect.bisect_right(self._starts, start)
        for s, e, line in reversed(self._spans[:i]):
            if s <= start and end <= e:
                if best is None or (e - s) < (best[1] - best[0]):
                    best = (s, e, line)
        return best[2] if best else default


def reach_of(mutant: Mutant, executed: dict[str, list[str]], index: StatementIndex,
             excluded_tests: set[str]) -> Reach:
    """Reach of one mutant from its file's line -> contexts map."""
    first = min(index.statement_line(mutant.start, mutant.end, mutant.line), mutant.line)
    contexts: set[str] = set()
    for line in range(first, mutant.end_line + 1):
        contexts.update(executed.get(str(line), ()))
    import_time = "" in contexts
    tests = tuple(sorted(c for c in contexts if c and c not in excluded_tests))
    return Reach(reachable=bool(tests) or import_time, covered_by=tests, import_time=import_time)


def line_coverage(coverage: dict[str, dict]) -> tuple[int, int]:
    """(executed statements, statements) over all mutated files."""
    hit = total = 0
    for entry in coverage.values():
        statements = set(entry.get("statements", []))
        executed = {int(k) for k in entry.get("executed", {})}
        total += len(statements)
        hit += len(statements & executed)
    return hit, total
