"""Which mutants change nothing a unit test should be asked to catch.

A benchmark of test generators asks for tests of behaviour. An edit to an annotation, an
``__all__`` entry, a ``__version__`` string, the name string of a TypeVar, a docstring or
help text, or the wording of an error, warning or log message changes no result a caller
relies on; the 0.1 task set was 27% such edits, because a suite's own tests rarely pin
them, so survival filtering concentrated them. Those mutants stay in the records with a
reason of their own (``non-behavioural: <category>``, in the ``unkillable`` field) and
are counted, but never enter a task set or a held-out population.

Each category is one switch (``[non_behavioural]`` in ``manifests/build.toml``); the
rules and the judgment behind each are in docs/benchmark.md.
"""

from __future__ import annotations

import ast

PREFIX = "non-behavioural: "

ANNOTATION = "annotation"
DUNDER_ALL = "__all__"
METADATA = "metadata"
TYPE_VARIABLE_NAME = "type-variable name"
DOCSTRING = "docstring"
MESSAGE_TEXT = "message text"
TYPE_CHECKING_GUARD = "type-checking guard"

# build.toml key -> category
SWITCHES = {
    "annotation": ANNOTATION,
    "dunder_all": DUNDER_ALL,
    "metadata": METADATA,
    "type_variable_name": TYPE_VARIABLE_NAME,
    "docstring": DOCSTRING,
    "message_text": MESSAGE_TEXT,
    "type_checking_guard": TYPE_CHECKING_GUARD,
}
ALL = frozenset(SWITCHES.values())

METADATA_NAMES = frozenset({
    "__version__", "__version_info__", "__author__", "__author_email__", "__email__",
    "__license__", "__copyright__", "__url__", "__uri__", "__title__", "__summary__",
    "__description__", "__maintainer__", "__maintainer_email__", "__credits__", "__status__",
    "__docformat__", "__contact__", "__homepage__", "__date__", "__doc__"})
TYPE_VARIABLE_FACTORIES = frozenset({"TypeVar", "ParamSpec", "TypeVarTuple", "NewType"})
HELP_KEYWORDS = frozenset({"help", "description", "epilog", "usage", "doc"})
LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical",
                         "fatal", "log"})
FORMAT_METHODS = frozenset({"format", "join"})


def reason(category: str) -> str:
    return PREFIX + category


def is_non_behavioural(unkillable: str | None) -> bool:
    return bool(unkillable) and unkillable.startswith(PREFIX)


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _is_logger(node: ast.AST) -> bool:
    """A receiver named like a logger: logging, log, logger, self._logger, LOG, ..."""
    name = _name(node)
    if name is None:
        return False
    low = name.lower().lstrip("_")
    return low in ("logging", "log", "logger") or low.endswith("logger") or low.endswith("_log")


def _message_args(call: ast.Call) -> list[ast.AST]:
    """The arguments of a call that only word a message, or [] when it is no message call."""
    func = call.func
    name = _name(func)
    if name == "warn" and (isinstance(func, ast.Name) or _name(getattr(func, "value", None)) == "warnings"):
        return call.args[:1] + [k.value for k in call.keywords if k.arg == "message"]
    if isinstance(func, ast.Attribute) and name in LOG_METHODS and _is_logger(func.value):
        args = call.args[1:] if name == "log" else call.args
        return list(args) + [k.value for k in call.keywords if k.arg == "msg"]
    return []


def _is_formatting(node: ast.AST) -> bool:
    """Nodes a message is built from: concatenation, %-formatting, str.format, join, tuples."""
    if isinstance(node, ast.BinOp):
        return isinstance(node.op, (ast.Add, ast.Mod))
    if isinstance(node, (ast.Tuple, ast.List, ast.Dict, ast.JoinedStr, ast.FormattedValue)):
        return True
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Attribute) and node.func.attr in FORMAT_METHODS
    if isinstance(node, ast.Attribute):  # "...".format: the constant is the attribute's value
        return node.attr in FORMAT_METHODS
    return False


def _message_text(node: ast.AST, parent: dict) -> bool:
    """A constant that only words a raised exception's, a warning's, a log call's or an
    assertion's message: every node between it and the message argument formats text."""
    child, anc = node, parent.get(node)
    while anc is not None:
        if isinstance(anc, ast.Assert):
            return child is anc.msg
        if isinstance(anc, ast.Call):
            if child in _message_args(anc):
                return True
            raised = parent.get(anc)
            if isinstance(raised, ast.Raise) and raised.exc is anc and child is not anc.func:
                return True
            if not _is_formatting(anc) or child is anc.func and not isinstance(anc.func, ast.Attribute):
                return False
        elif isinstance(anc, ast.keyword):
            pass
        elif not _is_formatting(anc):
            return False
        child, anc = anc, parent.get(anc)
    return False


def _assigned_names(stmt: ast.AST) -> list[str]:
    if isinstance(stmt, ast.Assign):
        return [t.id for t in stmt.targets if isinstance(t, ast.Name)]
    if isinstance(stmt, (ast.AugAssign, ast.AnnAssign)) and isinstance(stmt.target, ast.Name):
        return [stmt.target.id]
    return []


def classify(node: ast.AST, parent: dict, annotation_kind: str | None, operator: str) -> str | None:
    """The non-behavioural category of a mutant made at `node`, or None.

    `parent` maps each node to its parent; `annotation_kind` is what the enumerator knows
    about annotations (only evaluated ones get here: the others are unkillable already)."""
    if annotation_kind is not None:
        return ANNOTATION
    if operator == "negate-condition":
        guard = parent.get(node)
        if isinstance(guard, ast.If) and guard.test is node and not guard.orelse and \
                _name(node) == "TYPE_CHECKING":
            return TYPE_CHECKING_GUARD
    constant = isinstance(node, ast.Constant)
    text = constant and isinstance(node.value, (str, bytes))
    # the statement itself (a deleted `__all__.append(...)`, `__all__ += [...]`), then upwards
    child, anc = None, node
    while anc is not None:
        if isinstance(anc, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            break  # the rules below are about the statement or call holding the mutant
        names = _assigned_names(anc)
        if "__all__" in names:
            return DUNDER_ALL
        if isinstance(anc, ast.Call) and isinstance(anc.func, ast.Attribute) and \
                _name(anc.func.value) == "__all__":
            return DUNDER_ALL
        if isinstance(anc, ast.Expr) and isinstance(anc.value, ast.Call) and \
                isinstance(anc.value.func, ast.Attribute) and _name(anc.value.func.value) == "__all__":
            return DUNDER_ALL
        if names and set(names) <= METADATA_NAMES and isinstance(parent.get(anc), ast.Module):
            return METADATA
        if constant and isinstance(anc, ast.Call) and _name(anc.func) in TYPE_VARIABLE_FACTORIES:
            if anc.args and anc.args[0] is child:
                return TYPE_VARIABLE_NAME
            if isinstance(child, ast.keyword) and child.arg == "bound" and text:
                return ANNOTATION
        if text and isinstance(anc, ast.Call) and _name(anc.func) == "cast" and anc.args and \
                anc.args[0] is child:
            return ANNOTATION
        if text and isinstance(anc, ast.keyword) and anc.arg in HELP_KEYWORDS and anc.value is child:
            return DOCSTRING
        child, anc = anc, parent.get(anc)
    if text and isinstance(parent.get(node), ast.Expr):
        return DOCSTRING  # a bare string statement: an attribute docstring
    if text and _message_text(node, parent):
        return MESSAGE_TEXT
    return None
