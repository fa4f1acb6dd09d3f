"""Enumerate the mutants of a source file: ids, spans, functions, unkillable reasons.

Every proposal from the operators is applied to the file's bytes and compiled (its
statement alone first, the whole file when that is not conclusive: ``_Statements``):
one that does not compile is kept with the verdict ``invalid`` (it is reported, never
run); one that compiles to the same bytecode as the original is flagged unkillable
("identical bytecode"). Mutants inside ``if TYPE_CHECKING:`` and in annotations that
are never evaluated are flagged with their reason too. Nothing is dropped silently.
"""

from __future__ import annotations

import ast
import hashlib
import types
import warnings
from dataclasses import dataclass
from typing import Iterable, Iterator

from . import behaviour
from .operators import HANDLERS, OPERATORS, Proposal, Source  # noqa: F401 (re-exported)
from .records import Mutant

UNKILLABLE_TYPE_CHECKING = "inside `if TYPE_CHECKING:` (never runs)"
UNKILLABLE_FUTURE_ANNOTATION = "annotation never evaluated (from __future__ import annotations)"
UNKILLABLE_LOCAL_ANNOTATION = "local variable annotation (never evaluated)"
UNKILLABLE_IDENTICAL = "identical bytecode"
UNKILLABLE_PRAGMA = "excluded by `# pragma: no mutate` on its line"
PRAGMA = "pragma: no mutate"


def default_operators() -> tuple[str, ...]:
    return tuple(name for name, op in OPERATORS.items() if op.default)


def held_out_operators() -> tuple[str, ...]:
    return tuple(name for name, op in OPERATORS.items() if not op.default)


@dataclass
class Candidate:
    """A mutant plus whether it compiled (invalid ones are reported, not run)."""

    mutant: Mutant
    compiles: bool
    error: str | None = None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


class _Context:
    """What the operators and the unkillable rules need to know about each node."""

    def __init__(self, tree: ast.Module, non_behavioural: frozenset = behaviour.ALL):
        self.non_behavioural = non_behavioural
        self.parent: dict[ast.AST, ast.AST] = {}
        self.docstrings: set[int] = set()
        self.skip: set[int] = set()  # inside f-strings
        self.type_checking: set[int] = set()
        self.annotation: dict[int, str] = {}  # node id -> "future" | "local" | "evaluated"
        self.qualname: dict[int, str | None] = {}
        self.future_annotations = any(
            isinstance(n, ast.ImportFrom) and n.module == "__future__"
            and any(a.name == "annotations" for a in n.names) for n in tree.body)
        self._walk(tree, None, [], False)

    def _mark(self, node: ast.AST, into: set[int] | dict, value=None) -> None:
        for sub in ast.walk(node):
            if isinstance(into, set):
                into.add(id(sub))
            else:
                into.setdefault(id(sub), value)

    def _walk(self, node: ast.AST, parent, scope: list[str], in_function: bool) -> None:
        if parent is not None:
            self.parent[node] = parent
        self.qualname[id(node)] = ".".join(scope) if scope else None
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                self.docstrings.add(id(body[0].value))
        if isinstance(node, ast.JoinedStr):
            self._mark(node, self.skip)
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for stmt in node.body:
                self._mark(stmt, self.type_checking)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            kind = "future" if self.future_annotations else "evaluated"
            args = node.args
            for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
                if a is not None and a.annotation is not None:
                    self._mark(a.annotation, self.annotation, kind)
            if node.returns is not None:
                self._mark(node.returns, self.annotation, kind)
        if isinstance(node, ast.AnnAssign):
            kind = "local" if in_function else ("future" if self.future_annotations else "evaluated")
            self._mark(node.annotation, self.annotation, kind)
        child_scope, child_in_function = scope, in_function
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            child_scope = scope + (["<locals>"] if in_function else []) + [node.name]
            child_in_function = not isinstance(node, ast.ClassDef)
        for field, value in ast.iter_fields(node):
            items = value if isinstance(value, list) else [value]
            for child in items:
                if not isinstance(child, ast.AST):
                    continue
                # decorators, defaults, annotations and bases run in the enclosing scope
                in_header = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                    and field in ("decorator_list", "args", "returns", "bases", "keywords")
                if in_header:
                    self._walk(child, node, scope, in_function)
                else:
                    self._walk(child, node, child_scope, child_in_function)

    def is_docstring(self, node: ast.AST) -> bool:
        return id(node) in self.docstrings

    def unkillable(self, node: ast.AST) -> str | None:
        if id(node) in self.type_checking:
            return UNKILLABLE_TYPE_CHECKING
        kind = self.annotation.get(id(node))
        if kind == "future":
            return UNKILLABLE_FUTURE_ANNOTATION
        if kind == "local":
            return UNKILLABLE_LOCAL_ANNOTATION
        return None

    def behaviour(self, node: ast.AST, operator: str) -> str | None:
        """The non-behavioural reason of a mutant at `node`, when its category is on."""
        category = behaviour.classify(node, self.parent, self.annotation.get(id(node)), operator)
        return behaviour.reason(category) if category in self.non_behavioural else None


def _code_equal(a: types.CodeType, b: types.CodeType) -> bool:
    """Same behaviour-relevant content, ignoring line and column tables."""
    attrs = ("co_code", "co_names", "co_varnames", "co_freevars", "co_cellvars", "co_argcount",
             "co_posonlyargcount", "co_kwonlyargcount", "co_flags", "co_name", "co_qualname",
             "co_exceptiontable", "co_nlocals", "co_stacksize")
    for attr in attrs:
        if getattr(a, attr, None) != getattr(b, attr, None):
            return False
    if len(a.co_consts) != len(b.co_consts):
        return False
    for x, y in zip(a.co_consts, b.co_consts):
        if isinstance(x, types.CodeType) and isinstance(y, types.CodeType):
            if not _code_equal(x, y):
                return False
        elif type(x) is not type(y) or x != y:
            if not (isinstance(x, float) and isinstance(y, float) and x != x and y != y):
                return False
    return True


def _compile(data: bytes, filename: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return compile(data, filename, "exec", dont_inherit=True)


class _Statements:
    """Compiles a mutant's statement alone rather than its whole file: a mutant changes one
    top-level statement (or one method of a top-level class), and such a statement compiles
    alone (after a `pass`, so that a bare string is never taken for the docstring; with the
    module's ``__future__`` flags; a method inside a class of its own) to code that differs
    from the original's when the whole module's does, at the cost of the statement, not the
    file. The alone compile is only a filter: a mutant that fails to compile alone, or
    compiles to identical code, is compiled whole again, so those two outcomes and the error
    text always come from the module itself. The shortcut is not taken where the module
    context can change the answer: a statement the module compiles to no code at all (dead
    after a top-level `raise` or endless loop), an edit before a `__future__` import, a file
    with a `global` or `nonlocal` outside functions, or a coding cookie other than UTF-8.
    bench/enumerate_equivalence.py checks the two ways agree on every pin."""

    def __init__(self, tree: ast.Module, src: Source, module_code: types.CodeType):
        import __future__

        self.src = src
        self.flags = 0
        self.starts: list[int] = []
        self.units: list[tuple[int, int, bytes]] = []  # (start, end, prefix) of each top-level statement
        self.methods: dict[int, list[tuple[int, int, bytes]]] = {}  # top-level index -> its methods
        self._original: dict[tuple[int, int], types.CodeType | None] = {}
        self.enabled = _utf8_source(src.data) and not _global_outside_functions(tree)
        self.live_lines = _lines_with_code(module_code)
        # up to the last `from __future__` import, the whole file decides: an edit there (the
        # docstring turned into another statement) can make the import illegal in the module
        self.future_end = 0
        for stmt in tree.body:
            if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__":
                for alias in stmt.names:
                    self.flags |= getattr(getattr(__future__, alias.name, None), "compiler_flag", 0)
                self.future_end = src.offset(stmt.end_lineno, stmt.end_col_offset)
            first = self._first(stmt)
            self.starts.append(src.offset(first.lineno, first.col_offset))
            live = self._live(first.lineno, stmt.end_lineno)
            self.units.append((self.starts[-1], src.offset(stmt.end_lineno, stmt.end_col_offset),
                               b"pass\n") if live else None)
            if isinstance(stmt, ast.ClassDef):
                self.methods[len(self.units) - 1] = [
                    # from the start of its first line, indentation and all, under a class line
                    (src.offset(self._first(m).lineno, 0), src.offset(m.end_lineno, m.end_col_offset),
                     b"class _:\n")
                    for m in stmt.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and self._alone_on_its_lines(m, src) and self._live(self._first(m).lineno, m.end_lineno)]

    def _live(self, first: int, last: int) -> bool:
        """Whether the module has any code on these lines (dead statements have none)."""
        return any(line in self.live_lines for line in range(first, last + 1))

    @staticmethod
    def _first(stmt: ast.stmt) -> ast.AST:
        return min([stmt, *getattr(stmt, "decorator_list", [])], key=lambda n: (n.lineno, n.col_offset))

    def _alone_on_its_lines(self, m: ast.stmt, src: Source) -> bool:
        first = self._first(m)
        return not src.data[src.offset(first.lineno, 0):src.offset(first.lineno, first.col_offset)].strip()

    def _compile(self, data: bytes):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return compile(data, "<statement>", "exec", flags=self.flags, dont_inherit=True)

    def _unit(self, p: Proposal) -> tuple[int, int, bytes] | None:
        import bisect

        i = bisect.bisect_right(self.starts, p.start) - 1
        if not self.enabled or i < 0 or self.units[i] is None or p.end > self.units[i][1] \
                or p.start < self.future_end:
            return None
        for unit in self.methods.get(i, ()):
            if unit[0] <= p.start and p.end <= unit[1]:
                return unit
        return self.units[i]

    def differs(self, p: Proposal) -> bool:
        """True only when the mutant surely compiles in its module to code other than the
        original's; False means: compile the whole file to know."""
        unit = self._unit(p)
        if unit is None:
            return False
        start, end, prefix = unit
        data = self.src.data
        if (start, end) not in self._original:
            try:
                self._original[start, end] = self._compile(prefix + data[start:end])
            except (SyntaxError, ValueError):
                self._original[start, end] = None
        original = self._original[start, end]
        if original is None:
            return False
        try:
            code = self._compile(prefix + data[start:p.start] + p.replacement.encode("utf-8") + data[p.end:end])
        except (SyntaxError, ValueError):
            return False
        return not _code_equal(code, original)


def _utf8_source(data: bytes) -> bool:
    """No coding cookie, or a UTF-8 one: a statement compiled alone is decoded as its file is."""
    import re

    for line in data.split(b"\n", 2)[:2]:
        m = re.match(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", line)
        if m:
            return m.group(1).decode("ascii", "replace").lower().replace("_", "-") in ("utf-8", "utf8")
    return True


def _global_outside_functions(tree: ast.Module) -> bool:
    """A `global` or `nonlocal` in module or class code: it can make a use elsewhere in the
    module illegal, which no statement compiled alone would show."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        todo.extend(ast.iter_child_nodes(node))
    return False


def _lines_with_code(code: types.CodeType) -> set[int]:
    lines = {line for _, _, line in code.co_lines() if line is not None}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            lines |= _lines_with_code(const)
    return lines


def mutant_id(path: str, file_sha: str, p: Proposal) -> str:
    blob = "\0".join([path, file_sha, p.operator, str(p.start), str(p.end), p.replacement])
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def _enclosing_function(ctx: _Context, node: ast.AST) -> str | None:
    return ctx.qualname.get(id(node))


def enumerate_file(path: str, text: str, operators: Iterable[str] | None = None,
                   non_behavioural: frozenset = behaviour.ALL) -> Iterator[Candidate]:
    """All mutants of one file by the given operators (default set if None); those in the
    `non_behavioural` categories carry that reason (see behaviour.py)."""
    wanted = set(operators if operators is not None else default_operators())
    unknown = wanted - set(OPERATORS)
    if unknown:
        raise ValueError(f"unknown operators: {sorted(unknown)}")
    src = Source(text)
    tree = ast.parse(src.data, filename=path)
    ctx = _Context(tree, frozenset(non_behavioural))
    ctx.pragma_lines = _pragma_lines(src.data)
    original_code = _compile(src.data, path)
    statements = _Statements(tree, src, original_code)
    file_sha = hashlib.sha256(src.data).hexdigest()
    seen: set[tuple] = set()
    for node in ast.walk(tree):
        handler = HANDLERS.get(type(node))
        if handler is None or id(node) in ctx.skip:
            continue
        for p in handler(src, node, ctx):
            if p.operator not in wanted:
                continue
            key = (p.start, p.end, p.replacement)
            if key in seen or src.get(p.start, p.end) == p.replacement:
                continue
            seen.add(key)
            yield _candidate(path, src, ctx, original_code, file_sha, p, statements)


def _pragma_lines(data: bytes) -> set[int]:
    """Lines whose comment says `pragma: no mutate` (a project's own opt-out, as in mutmut)."""
    import io
    import tokenize

    lines = set()
    try:
        for tok in tokenize.tokenize(io.BytesIO(data).readline):
            if tok.type == tokenize.COMMENT and PRAGMA in tok.string:
                lines.add(tok.start[0])
    except (tokenize.TokenError, SyntaxError):
        pass
    return lines


def _candidate(path, src: Source, ctx: _Context, original_code, file_sha, p: Proposal,
               statements: _Statements | None = None) -> Candidate:
    line, col = src.line_col(p.start)
    end_line, end_col = src.line_col(p.end)
    mutated = src.data[:p.start] + p.replacement.encode("utf-8") + src.data[p.end:]
    reason = UNKILLABLE_PRAGMA if line in getattr(ctx, "pragma_lines", ()) else ctx.unkillable(p.node) or ctx.behaviour(p.node, p.operator)
    compiles, error = True, None
    if statements is None or not statements.differs(p):
        try:
            code = _compile(mutated, path)
        except (SyntaxError, ValueError) as exc:
            compiles, error = False, f"{type(exc).__name__}: {exc}"
        else:
            if reason is None and _code_equal(code, original_code):
                reason = UNKILLABLE_IDENTICAL
    mutant = Mutant(
        id=mutant_id(path, file_sha, p), path=path, line=line, end_line=end_line, col=col,
        end_col=end_col, start=p.start, end=p.end, function=_enclosing_function(ctx, p.node),
        operator=p.operator, original=src.get(p.start, p.end), replacement=p.replacement,
        unkillable=reason)
    return Candidate(mutant, compiles, error)


def apply(original: bytes, mutant: Mutant) -> bytes:
    """The mutated file content; checks the span still holds the original text."""
    if original[mutant.start:mutant.end].decode("utf-8") != mutant.original:
        raise ValueError(f"mutant {mutant.id}: {mutant.path} bytes {mutant.start}-{mutant.end} "
                         "no longer hold the original text (the file changed)")
    return original[:mutant.start] + mutant.replacement.encode("utf-8") + original[mutant.end:]
