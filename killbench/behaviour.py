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
import builtins
import re

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
# the calls whose help= / description= / doc= text is documentation (argparse, click, face,
# property); the same keyword on any other call may be data
HELP_CALLS = frozenset({"add_argument", "add_parser", "add_argument_group", "add_subparsers",
                        "add_mutually_exclusive_group", "ArgumentParser", "option", "argument",
                        "command", "group", "Option", "Argument", "Command", "Flag", "add",
                        "property"})
_EXCEPTION_NAME = re.compile(r"^_?[A-Z]\w*(Error|Exception|Warning|Failure|Fault|Exit)$")
# class bodies whose annotations make behaviour (fields of a dataclass, a NamedTuple, ...)
FIELD_DECORATORS = frozenset({"dataclass", "dataclasses", "define", "frozen", "attrs", "s",
                              "mutable", "dataclass_transform"})
FIELD_BASES = frozenset({"NamedTuple", "TypedDict", "BaseModel", "Struct", "Protocol"})
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


def _is_exception_class(func: ast.AST) -> bool:
    """A callee that names an exception class: a builtin one, or a CapWords name ending in
    Error, Exception, Warning, ... (`self.make_error` is a factory, not a class)."""
    name = _name(func)
    if name is None:
        return False
    obj = getattr(builtins, name, None)
    if isinstance(obj, type) and issubclass(obj, BaseException):
        return True
    return bool(_EXCEPTION_NAME.match(name))


def _is_logger(node: ast.AST) -> bool:
    """A receiver named like a logger: logging, log, logger, self._logger, LOG, a
    getLogger(...) call, ..."""
    if isinstance(node, ast.Call) and _name(node.func) == "getLogger":
        return True
    name = _name(node)
    if name is None:
        return False
    low = name.lower().lstrip("_")
    return low in ("logging", "log", "logger") or low.endswith("logger") or low.endswith("_log")


def _message_args(call: ast.Call, parent: dict) -> list[ast.AST]:
    """The arguments of a call that only word a message, or [] when it is no message call."""
    func = call.func
    name = _name(func)
    if name == "warn" and (isinstance(func, ast.Name) or _name(getattr(func, "value", None)) == "warnings"):
        return call.args[:1] + [k.value for k in call.keywords if k.arg == "message"]
    if _is_exception_class(func) and call.args:
        # the message of an exception constructed to be raised or warned: its first
        # positional argument only (others are data: OSError's filename, a field name)
        up = parent.get(call)
        if isinstance(up, ast.Raise) and up.exc is call:
            return call.args[:1]
        if isinstance(up, ast.Call) and _name(up.func) == "warn" and up.args and up.args[0] is call:
            return call.args[:1]
    if isinstance(func, ast.Attribute) and name in LOG_METHODS and _is_logger(func.value):
        args = call.args[1:] if name == "log" else call.args
        return list(args) + [k.value for k in call.keywords if k.arg == "msg"]
    return []


def _is_formatting(node: ast.AST) -> bool:
    """Nodes a message is built from: concatenation, %-formatting, str.format, join, tuples."""
    if isinstance(node, ast.BinOp):
        return isinstance(node.op, (ast.Add, ast.Mod))
    if isinstance(node, (ast.Tuple, ast.List, ast.JoinedStr, ast.FormattedValue)):
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
            if any(child is a for a in _message_args(anc, parent)):
                return True
            if not _is_formatting(anc) or child is anc.func and not isinstance(anc.func, ast.Attribute):
                return False
        elif isinstance(anc, ast.keyword):
            if not (isinstance(parent.get(anc), ast.Call) and _is_formatting(parent.get(anc))):
                return False  # a keyword of a formatting call (.format(name=...)) only
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


def _typing_cast(func: ast.AST, module: ast.Module | None) -> bool:
    """typing.cast (or t.cast, typing_extensions.cast), or a `cast` imported from typing."""
    if isinstance(func, ast.Attribute):
        return func.attr == "cast" and _name(func.value) in ("typing", "t", "typing_extensions")
    if isinstance(func, ast.Name) and func.id == "cast" and module is not None:
        return any(isinstance(n, ast.ImportFrom) and n.module in ("typing", "typing_extensions")
                   and any(a.name == "cast" and (a.asname or a.name) == "cast" for a in n.names)
                   for n in module.body)
    return False


def _module_of(node: ast.AST, parent: dict) -> ast.Module | None:
    while node is not None and not isinstance(node, ast.Module):
        node = parent.get(node)
    return node


def _annotation_makes_behaviour(node: ast.AST, parent: dict) -> bool:
    """Annotations that are behaviour: the fields of a dataclass, attrs class, NamedTuple,
    TypedDict or pydantic model, and the parameters of a singledispatch `.register`."""
    anc = parent.get(node)
    while anc is not None:
        if isinstance(anc, ast.ClassDef):
            decos = {_name(d.func if isinstance(d, ast.Call) else d) for d in anc.decorator_list}
            bases = {_name(b) for b in anc.bases}
            return bool(decos & FIELD_DECORATORS or bases & FIELD_BASES)
        if isinstance(anc, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return any(_name(d.func if isinstance(d, ast.Call) else d) == "register"
                       for d in anc.decorator_list)
        anc = parent.get(anc)
    return False


def classify(node: ast.AST, parent: dict, annotation_kind: str | None, operator: str) -> str | None:
    """The non-behavioural category of a mutant made at `node`, or None.

    `parent` maps each node to its parent; `annotation_kind` is what the enumerator knows
    about annotations (only evaluated ones get here: the others are unkillable already)."""
    if annotation_kind is not None:
        return None if _annotation_makes_behaviour(node, parent) else ANNOTATION
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
        if text and isinstance(anc, ast.Call) and anc.args and anc.args[0] is child and \
                _typing_cast(anc.func, _module_of(anc, parent)):
            return ANNOTATION
        if text and isinstance(anc, ast.keyword) and anc.arg in HELP_KEYWORDS and anc.value is child \
                and isinstance(parent.get(anc), ast.Call) and _name(parent.get(anc).func) in HELP_CALLS:
            return DOCSTRING
        child, anc = anc, parent.get(anc)
    if text and isinstance(parent.get(node), ast.Expr):
        return DOCSTRING  # a bare string statement: an attribute docstring
    if text and _message_text(node, parent):
        return MESSAGE_TEXT
    return None
