"""Behaviour-preserving rewrites of a source file: the gate's neutral variants.

A test that reads the code under test (its text, its size, its AST or its bytecode)
instead of calling it can tell a mutant from clean code without testing anything. The
gate therefore also runs every candidate on a *disguised* copy of the clean file and of
the mutant: the same behaviour, a different text. A behavioural test gives the same
verdict on a file and on its disguise; a test that looked at the text does not.

A disguise, drawn from a random generator the test never sees:

- changes whitespace between tokens on every line it may (never inside strings, never
  indentation), so the mutated statement and its neighbours are spelled differently;
- inserts comment lines and trailing comments throughout, so lines shift by a random
  amount and the file's size changes by a random amount;
- inserts one statement that changes the AST of the function holding the mutant (and,
  where that is safe, its bytecode: a local assignment of a random constant; a function
  that looks at its own frame or locals gets a dead ``if 0:`` block instead), or of the
  module or class body holding it.

``disguise`` checks its own work: the result must parse to the same AST as the original
with only that statement inserted (line numbers aside); otherwise it raises.
"""

from __future__ import annotations

import ast
import io
import random
import tokenize

from .errors import HarnessError
from .generation import parse  # CPython 3.11 builds ASTs thread-unsafely: parse holds a lock

WORDS = ("note", "see", "keep", "this", "value", "order", "case", "why", "here", "check",
         "step", "loop", "edge", "data", "result", "input", "state", "rule", "list", "map")
# names whose presence means a function can see its own locals or frame
INTROSPECTION = {"locals", "vars", "_getframe", "currentframe", "f_locals", "exec", "eval",
                 "getframeinfo", "stack", "trace"}
_SKIP = {tokenize.INDENT, tokenize.DEDENT, tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER,
         tokenize.ENCODING, tokenize.COMMENT}
_FSTRING = {getattr(tokenize, n) for n in ("FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END")
            if hasattr(tokenize, n)}


def _comment(rng: random.Random) -> str:
    return "# " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 8)))


def _body_site(tree: ast.Module, anchor_line: int) -> tuple[ast.AST, bool]:
    """The innermost function or class holding the anchor line (the module if none), and
    whether a local assignment there is safe."""
    best: ast.AST = tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and \
                node.lineno <= anchor_line <= (node.end_lineno or node.lineno):
            if best is tree or node.lineno >= best.lineno:
                best = node
    safe = isinstance(best, (ast.FunctionDef, ast.AsyncFunctionDef))
    if safe:
        for node in ast.walk(best):
            name = node.id if isinstance(node, ast.Name) else \
                node.attr if isinstance(node, ast.Attribute) else None
            if name in INTROSPECTION or isinstance(node, (ast.Global, ast.Nonlocal)):
                safe = False
                break
    return best, safe


def _insertion(text: str, anchor_line: int, rng: random.Random) -> tuple[int, str] | None:
    """(0-based line index, the lines to insert there) of the AST-changing statement."""
    tree = parse(text)
    lines = text.splitlines(keepends=True)
    node, local_ok = _body_site(tree, anchor_line)
    body = node.body
    first = 0
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        first = 1  # after a docstring
    if node is tree:
        while first < len(body) and isinstance(body[first], ast.ImportFrom) and \
                body[first].module == "__future__":
            first += 1
    name = f"_killbench_{rng.getrandbits(32):08x}"
    value = rng.randint(1000, 10 ** 9)
    if first < len(body):
        stmt = body[first]
        # a decorated definition starts at its first decorator, not at its `def` line
        lineno = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])
        head = lines[lineno - 1]
        if node is not tree and lineno == node.lineno:
            return None  # a one-line def: no line to insert before
        indent = head[: len(head) - len(head.lstrip())]
        if head[len(indent):len(indent) + 1] in ("", "\n") or len(indent) != stmt.col_offset:
            return None
        at = lineno - 1
    else:
        if node is not tree:
            return None
        at, indent = len(lines), ""
    if local_ok:
        return at, [f"{indent}{name} = {value}\n"]
    return at, [f"{indent}if 0:\n", f"{indent}    {name} = {value}\n"]


def _respace(text: str, rng: random.Random, rate: float) -> tuple[str, list[int]]:
    """Extra spaces in gaps between tokens on one line (outside strings and f-strings), a
    trailing comment on some logical lines; and the indexes of lines that begin a logical
    line (where a comment line may go)."""
    lines = text.splitlines(keepends=True)
    edits: dict[int, list[tuple[int, str]]] = {}  # row -> [(col, text to insert)]
    starts: list[int] = []
    toks = list(tokenize.generate_tokens(io.StringIO(text).readline))
    depth = 0
    prev = None
    new_line = True
    for tok in toks:
        if tok.type in _FSTRING:
            depth += tok.type == getattr(tokenize, "FSTRING_START", -1)
            depth -= tok.type == getattr(tokenize, "FSTRING_END", -1)
            prev = tok
            continue
        if new_line and tok.type not in _SKIP:
            starts.append(tok.start[0] - 1)
            new_line = False
        if tok.type == tokenize.NEWLINE:
            new_line = True
            if prev is not None and prev.type != tokenize.COMMENT and prev.end[0] == tok.start[0] \
                    and rng.random() < rate / 3:
                edits.setdefault(tok.start[0], []).append((prev.end[1], "  " + _comment(rng)))
        if depth == 0 and prev is not None and prev.type not in _SKIP and tok.type not in _SKIP \
                and prev.type not in _FSTRING and prev.end[0] == tok.start[0] \
                and tok.start[1] > prev.end[1] and rng.random() < rate:
            edits.setdefault(tok.start[0], []).append((tok.start[1], " " * rng.randint(1, 2)))
        prev = tok
        if tok.type == tokenize.NL:
            new_line = new_line or True
    out = list(lines)
    for row, ins in edits.items():
        line = out[row - 1]
        for col, piece in sorted(ins, reverse=True):
            line = line[:col] + piece + line[col:]
        out[row - 1] = line
    return "".join(out), sorted(set(starts))


def disguise(text: str, anchor_line: int, rng: random.Random, rate: float = 0.5) -> str:
    """A rewrite of `text` with the same behaviour and another spelling (see the module doc)."""
    insertion = _insertion(text, anchor_line, rng)
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    reference_lines = list(lines)
    if insertion is not None:
        at, new = insertion
        reference_lines[at:at] = new
    reference = "".join(reference_lines)
    spaced, starts = _respace(reference, rng, rate)
    out = spaced.splitlines(keepends=True)
    # comment lines (and a blank line now and then) before some logical lines
    chosen = [i for i in starts if rng.random() < rate / 2] or starts[:1]
    for i in sorted(chosen, reverse=True):
        head = out[i]
        indent = head[: len(head) - len(head.lstrip())]
        block = [f"{indent}{_comment(rng)}\n" for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.3:
            block.append("\n")
        out[i:i] = block
    result = "".join(out)
    try:
        same = ast.dump(parse(result)) == ast.dump(parse(reference))
    except SyntaxError as exc:
        raise HarnessError(f"a disguise did not parse ({exc}); this is a killbench bug") from None
    if not same:
        raise HarnessError("a disguise changed the AST beyond its inserted statement; "
                           "this is a killbench bug")
    return result
