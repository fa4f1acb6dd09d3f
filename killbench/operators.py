"""Mutation operators: each proposes source-preserving edits for one kind of AST node.

An operator never re-renders code: it finds the exact byte span of a node in the
original file (from the AST's positions, plus a small scanner for operator tokens
the AST does not locate) and proposes new text for that span only, so the rest of
the file stays byte-identical. Operator names are stable: they appear in mutant ids
and manifests.

Sites inside f-strings are skipped: before Python 3.12 the AST positions of their
inner expressions are not reliable, and a wrong span would mutate the wrong code.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from typing import Callable, Iterator


@dataclass(frozen=True)
class Operator:
    name: str
    family: str
    description: str
    default: bool = True  # in the default set of `killbench mutate`


OPERATORS: dict[str, Operator] = {}


def _register(name: str, family: str, description: str, default: bool = True) -> None:
    OPERATORS[name] = Operator(name, family, description, default)


_register("compare-flip", "comparison", "< <=, > >=, == !=, is / is not, in / not in")
_register("boolean-swap", "boolean", "and <-> or")
_register("remove-not", "unary", "not x -> x")
_register("remove-unary-minus", "unary", "-x -> x")
_register("arith-swap", "arithmetic", "+ -, * /, // /, % /, ** *")
_register("augassign-swap", "augmented-assign", "+= -=, *= /=, //= /=, %= /=")
_register("augassign-to-assign", "augmented-assign", "x += y -> x = y")
_register("number-constant", "constant", "0 -> 1, 1 -> 0, n -> n + 1")
_register("bool-constant", "constant", "True <-> False")
_register("string-constant", "constant", "'s' -> 'XXsXX', '' -> 'XX'")
_register("return-none", "statement", "return expr -> return None")
_register("delete-raise", "statement", "raise ... -> pass")
_register("delete-statement", "statement", "a call or augmented assignment statement -> pass")
_register("break-continue", "statement", "break <-> continue")
_register("negate-condition", "condition", "if c / while c -> if not (c)")
# Families used only for the held-out population (never in a task set).
_register("default-argument", "held-out", "a constant default argument changed", default=False)
_register("handler-broaden", "held-out", "except SomeError -> except Exception", default=False)
_register("handler-reraise", "held-out", "an except body -> raise", default=False)
_register("slice-bound", "held-out", "x[a:b] -> x[a:b+1] / x[a+1:b]", default=False)
_register("assign-none", "held-out", "x = expr / self.a = expr -> ... = None", default=False)
_register("call-argument-none", "held-out", "f(a, k=b): one argument -> None", default=False)
_register("call-argument-remove", "held-out", "f(a, k=b): one argument removed", default=False)


@dataclass(frozen=True)
class Proposal:
    """New text for the byte span [start, end) of one node."""

    start: int
    end: int
    replacement: str
    operator: str
    node: ast.AST


class Source:
    """A module's text with byte offsets for AST positions."""

    def __init__(self, text: str):
        self.text = text
        self.data = text.encode("utf-8")
        self.line_starts = [0]
        for i, b in enumerate(self.data):
            if b == 0x0A:
                self.line_starts.append(i + 1)

    def offset(self, line: int, col: int) -> int:
        return self.line_starts[line - 1] + col

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (self.offset(node.lineno, node.col_offset),
                self.offset(node.end_lineno, node.end_col_offset))

    def get(self, start: int, end: int) -> str:
        return self.data[start:end].decode("utf-8")

    def line_col(self, offset: int) -> tuple[int, int]:
        lo, hi = 0, len(self.line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.line_starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1, offset - self.line_starts[lo]

    def op_token(self, start: int, end: int) -> tuple[int, int] | None:
        """The operator token(s) between two operands, skipping parens, space, comments."""
        gap = self.data[start:end]
        first = last = None
        i = 0
        while i < len(gap):
            c = gap[i:i + 1]
            if c in b" \t\r\n\f()":
                i += 1
            elif c == b"\\" and gap[i + 1:i + 2] in (b"\n", b"\r"):
                i += 2
            elif c == b"#":
                while i < len(gap) and gap[i:i + 1] not in (b"\n", b"\r"):
                    i += 1
            else:
                if first is None:
                    first = i
                j = i
                while j < len(gap) and gap[j:j + 1] not in b" \t\r\n\f()#\\":
                    j += 1
                last = j
                i = j
        if first is None:
            return None
        return start + first, start + last


def _edit(src: Source, node: ast.AST, inner_start: int, inner_end: int, new: str,
          operator: str) -> Proposal:
    """A proposal replacing [inner_start, inner_end) within node's span."""
    s, e = src.span(node)
    text = src.get(s, inner_start) + new + src.get(inner_end, e)
    return Proposal(s, e, text, operator, node)


_CMP = {ast.Lt: "<=", ast.LtE: "<", ast.Gt: ">=", ast.GtE: ">", ast.Eq: "!=", ast.NotEq: "==",
        ast.Is: "is not", ast.IsNot: "is", ast.In: "not in", ast.NotIn: "in"}
_BIN = {ast.Add: "-", ast.Sub: "+", ast.Mult: "/", ast.Div: "*", ast.FloorDiv: "/",
        ast.Mod: "/", ast.Pow: "*"}
_AUG = {ast.Add: "-=", ast.Sub: "+=", ast.Mult: "/=", ast.Div: "*=", ast.FloorDiv: "/=",
        ast.Mod: "/="}


def _compare(src: Source, node: ast.Compare, ctx) -> Iterator[Proposal]:
    left = node.left
    for op, right in zip(node.ops, node.comparators):
        new = _CMP.get(type(op))
        tok = src.op_token(src.span(left)[1], src.span(right)[0])
        if new and tok:
            yield _edit(src, node, tok[0], tok[1], new, "compare-flip")
        left = right


def _boolop(src: Source, node: ast.BoolOp, ctx) -> Iterator[Proposal]:
    new = "or" if isinstance(node.op, ast.And) else "and"
    s, e = src.span(node)
    pieces, cursor = [], s
    for a, b in zip(node.values, node.values[1:]):
        tok = src.op_token(src.span(a)[1], src.span(b)[0])
        if tok is None:
            return
        pieces.append(src.get(cursor, tok[0]) + new)
        cursor = tok[1]
    pieces.append(src.get(cursor, e))
    yield Proposal(s, e, "".join(pieces), "boolean-swap", node)


def _unaryop(src: Source, node: ast.UnaryOp, ctx) -> Iterator[Proposal]:
    s, _ = src.span(node)
    operand_start = src.span(node.operand)[0]
    if isinstance(node.op, ast.Not):
        # delete the keyword and the space after it; parentheses of the operand stay
        rest = s + 3
        while src.data[rest:rest + 1] in (b" ", b"\t"):
            rest += 1
        if rest <= operand_start:
            yield _edit(src, node, s, rest, "", "remove-not")
    elif isinstance(node.op, ast.USub):
        yield _edit(src, node, s, s + 1, "", "remove-unary-minus")


def _binop(src: Source, node: ast.BinOp, ctx) -> Iterator[Proposal]:
    new = _BIN.get(type(node.op))
    if new is None:
        return
    tok = src.op_token(src.span(node.left)[1], src.span(node.right)[0])
    if tok:
        yield _edit(src, node, tok[0], tok[1], new, "arith-swap")


def _augassign(src: Source, node: ast.AugAssign, ctx) -> Iterator[Proposal]:
    tok = src.op_token(src.span(node.target)[1], src.span(node.value)[0])
    if tok is None:
        return
    new = _AUG.get(type(node.op))
    if new:
        yield _edit(src, node, tok[0], tok[1], new, "augassign-swap")
    yield _edit(src, node, tok[0], tok[1], "=", "augassign-to-assign")
    yield _replace_stmt(src, node, "delete-statement")


def _number(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return 1 if value == 0 else 0 if value == 1 else value + 1
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        new = 1.0 if value == 0 else 0.0 if value == 1 else value + 1
        return new if math.isfinite(new) and new != value else None
    if isinstance(value, complex):
        return value + 1j
    return None


def _constant(src: Source, node: ast.Constant, ctx) -> Iterator[Proposal]:
    value = node.value
    s, e = src.span(node)
    if isinstance(value, bool):
        yield Proposal(s, e, "False" if value else "True", "bool-constant", node)
    elif isinstance(value, (int, float, complex)):
        new = _number(value)
        if new is None or (isinstance(new, complex) and new.real):
            return  # only pure imaginary literals exist in source
        text = f"{new.imag!r}j" if isinstance(new, complex) else repr(new)
        yield Proposal(s, e, text, "number-constant", node)
    elif isinstance(value, (str, bytes)):
        if ctx.is_docstring(node):
            return
        if isinstance(value, str):
            new_s = "XX" + value + "XX" if value else "XX"
        else:
            new_s = b"XX" + value + b"XX" if value else b"XX"
        yield Proposal(s, e, repr(new_s), "string-constant", node)


def _replace_stmt(src: Source, node: ast.stmt, operator: str, new: str = "pass") -> Proposal:
    s, e = src.span(node)
    return Proposal(s, e, new, operator, node)


def _return(src: Source, node: ast.Return, ctx) -> Iterator[Proposal]:
    if node.value is None:
        return
    if isinstance(node.value, ast.Constant) and node.value.value is None:
        return
    yield _replace_stmt(src, node, "return-none", "return None")


def _raise(src: Source, node: ast.Raise, ctx) -> Iterator[Proposal]:
    yield _replace_stmt(src, node, "delete-raise")


def _expr_stmt(src: Source, node: ast.Expr, ctx) -> Iterator[Proposal]:
    if isinstance(node.value, ast.Call):
        yield _replace_stmt(src, node, "delete-statement")


def _break(src: Source, node: ast.Break, ctx) -> Iterator[Proposal]:
    yield _replace_stmt(src, node, "break-continue", "continue")


def _continue(src: Source, node: ast.Continue, ctx) -> Iterator[Proposal]:
    yield _replace_stmt(src, node, "break-continue", "break")


def _condition(src: Source, node: ast.If | ast.While, ctx) -> Iterator[Proposal]:
    s, e = src.span(node.test)
    yield Proposal(s, e, "not (" + src.get(s, e) + ")", "negate-condition", node.test)


# Held-out families ---------------------------------------------------------------

def _defaults(src: Source, node: ast.FunctionDef | ast.AsyncFunctionDef, ctx) -> Iterator[Proposal]:
    for d in list(node.args.defaults) + [d for d in node.args.kw_defaults if d is not None]:
        s, e = src.span(d)
        if isinstance(d, ast.Constant):
            v = d.value
            if v is None:
                new = "0"
            elif isinstance(v, bool):
                new = "False" if v else "True"
            elif isinstance(v, (int, float)) and _number(v) is not None:
                new = repr(_number(v))
            elif isinstance(v, str):
                new = repr("XX" + v + "XX")
            else:
                continue
        else:
            new = "None"
        yield Proposal(s, e, new, "default-argument", d)


def _handler(src: Source, node: ast.ExceptHandler, ctx) -> Iterator[Proposal]:
    if node.type is not None and not (isinstance(node.type, ast.Name)
                                      and node.type.id in ("Exception", "BaseException")):
        s, e = src.span(node.type)
        yield Proposal(s, e, "Exception", "handler-broaden", node.type)
    body = node.body
    if not (len(body) == 1 and isinstance(body[0], ast.Raise)):
        s = src.span(body[0])[0]
        e = src.span(body[-1])[1]
        # keep the body's first line indentation; replace the whole body with one raise
        yield Proposal(s, e, "raise", "handler-reraise", body[0])


def _slice(src: Source, node: ast.Slice, ctx) -> Iterator[Proposal]:
    for bound in (node.lower, node.upper):
        if bound is not None:
            s, e = src.span(bound)
            yield Proposal(s, e, "(" + src.get(s, e) + ") + 1", "slice-bound", bound)


def _assign(src: Source, node: ast.Assign | ast.AnnAssign, ctx) -> Iterator[Proposal]:
    value = node.value
    if value is None or (isinstance(value, ast.Constant) and value.value is None):
        return
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    if len(targets) != 1 or not isinstance(targets[0], (ast.Name, ast.Attribute, ast.Subscript)):
        return  # unpacking and chained assignment: `None` would not unpack
    s, e = src.span(value)
    yield Proposal(s, e, "None", "assign-none", value)


def _call(src: Source, node: ast.Call, ctx) -> Iterator[Proposal]:
    args = [a for a in node.args if not isinstance(a, ast.Starred)]
    keywords = [k for k in node.keywords if k.arg is not None]
    if len(args) != len(node.args) or len(keywords) != len(node.keywords):
        return  # *args and **kwargs: which argument goes where is not known
    items = [(a, a) for a in args] + [(k, k.value) for k in keywords]
    cs, ce = src.span(node)
    for i, (item, value) in enumerate(items):
        vs, ve = src.span(value)
        if not (isinstance(value, ast.Constant) and value.value is None):
            yield _edit(src, node, vs, ve, "None", "call-argument-none")
        # removing one argument: cut from its start to the next argument's start (or, for
        # the last, from the end of the one before it), so that the commas stay right
        s = src.span(item)[0] if not isinstance(item, ast.keyword) else \
            src.offset(item.lineno, item.col_offset)
        e = src.span(item)[1] if not isinstance(item, ast.keyword) else \
            src.offset(item.end_lineno, item.end_col_offset)
        if i + 1 < len(items):
            nxt = items[i + 1][0]
            e = src.span(nxt)[0] if not isinstance(nxt, ast.keyword) else \
                src.offset(nxt.lineno, nxt.col_offset)
        elif i > 0:
            prev = items[i - 1][0]
            s = src.span(prev)[1] if not isinstance(prev, ast.keyword) else \
                src.offset(prev.end_lineno, prev.end_col_offset)
        yield _edit(src, node, s, e, "", "call-argument-remove")


HANDLERS: dict[type, Callable] = {
    ast.Compare: _compare,
    ast.BoolOp: _boolop,
    ast.UnaryOp: _unaryop,
    ast.BinOp: _binop,
    ast.AugAssign: _augassign,
    ast.Constant: _constant,
    ast.Return: _return,
    ast.Raise: _raise,
    ast.Expr: _expr_stmt,
    ast.Break: _break,
    ast.Continue: _continue,
    ast.If: _condition,
    ast.While: _condition,
    ast.FunctionDef: _defaults,
    ast.AsyncFunctionDef: _defaults,
    ast.ExceptHandler: _handler,
    ast.Slice: _slice,
    ast.Assign: _assign,
    ast.AnnAssign: _assign,
    ast.Call: _call,
}
