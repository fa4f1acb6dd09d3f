"""`amplify`: the model-free generator. It reuses and varies the calls the target's own
tests make, costs zero tokens, and is what `killbench run` does with no model.

Per target (see docs/amplify.md for the design and examples):

1. **trace**: the suite's tests that cover the task set run once, on clean code, in a
   private sandbox, with the `_amplify_plugin` pytest plugin recording every call
   that reaches a task's function as a replayable program (constructor + the steps
   the test made on that object, or one function call), arguments as literals.
2. **replay**: each task's recorded programs run on clean code (twice, to find
   unstable outcomes) and on the mutant, each step under a timeout. If no step's
   result, raised exception or observed state differs, **search**: neighbouring
   values of the recorded arguments (integers +-1, the boundaries of the function's
   constants, empty and one-element containers, swapped arguments of the same
   type, dropped steps), enumerated first and then drawn by hypothesis strategies
   seeded from the observed values, with a fixed seed and a fixed budget of calls
   and seconds.
3. **emit**: the first differing step becomes one pytest test: the steps before it
   as setup, one assert of the clean result by value (or ``pytest.raises`` of the
   clean exception), imports from the target's public module path, a readable name.
4. Every test goes through the harness's gate like any other generator's.

Deterministic: same target, same seed, same tests (the seconds budget only cuts a
search short, and when it does the candidate's meta says so).
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import os
import re
import shutil
import tempfile
import textwrap
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from killbench.errors import HarnessError, UserError
from killbench.generation import CandidateTest, Task, module_name

from ._amplify_plugin import SYNTAX, SYNTAX_IMPORTS, NotLiteral, literal_source
from ._common import _float, _int

PLUGIN = Path(__file__).with_name("_amplify_plugin.py")

DUNDER_WORDS = {"__getitem__": "getitem", "__setitem__": "setitem", "__delitem__": "delitem",
                "__contains__": "contains", "__len__": "len", "__iter__": "iter", "__repr__": "repr",
                "__str__": "str", "__bool__": "bool", "__eq__": "eq", "__ne__": "ne", "__lt__": "lt",
                "__le__": "le", "__gt__": "gt", "__ge__": "ge", "__copy__": "copy", "__call__": "call",
                "__hash__": "hash", "__reversed__": "reversed"}
OBSERVER_WORDS = {"len": "len", "list": "keys", "repr": "repr", "dict": "contents"}
CLASS_RANK = {"value": 0, "exception": 1, "existence": 2, "none": 3}


# ------------------------------------------------------------------ helpers

def apply_diff(text: str, diff: str) -> str:
    """Apply a unified diff (the Task's) to the clean text; ValueError if it does not fit."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    pos = 0
    dl = diff.splitlines(keepends=True)
    i = 0
    while i < len(dl):
        m = re.match(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", dl[i])
        if not m:
            i += 1
            continue
        start = int(m.group(1)) - (0 if m.group(2) == "0" else 1)
        out.extend(lines[pos:start])
        pos = start
        i += 1
        while i < len(dl) and not dl[i].startswith("@@"):
            line = dl[i]
            if line.startswith("\\"):
                if out and out[-1].endswith("\n") and dl[i - 1].startswith(("+", " ")):
                    out[-1] = out[-1][:-1]
            elif line.startswith(" ") or line.startswith("-"):
                if pos >= len(lines) or lines[pos].rstrip("\r\n") != line[1:].rstrip("\r\n"):
                    raise ValueError(f"diff does not fit at line {pos + 1}")
                if line.startswith(" "):
                    out.append(lines[pos])
                pos += 1
            elif line.startswith("+"):
                out.append(line[1:])
            i += 1
    out.extend(lines[pos:])
    return "".join(out)


def _literal_value(src: str):
    return eval(src, {"math": math, "__builtins__": {"frozenset": frozenset, "set": set}})  # noqa: S307


def _enclosing_classes(tree: ast.Module, qualname: str) -> list[ast.ClassDef]:
    out, body = [], tree.body
    for part in qualname.split(".")[:-1]:
        node = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == part), None)
        if node is None:
            break
        out.append(node)
        body = node.body
    return out


def _assigned_literals(body) -> dict[str, object]:
    out = {}
    for node in body:
        targets, value = [], None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        for t in targets:
            if isinstance(t, ast.Name):
                try:
                    out[t.id] = ast.literal_eval(value)
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                    pass
    return out


def function_constants(task: Task, module_source: str | None) -> list[tuple[object, str | None]]:
    """The constants a task's function compares against: its own literals and the
    module- and class-level constants it names, each with its name when it has one."""
    out: list[tuple[object, str | None]] = []
    try:
        fn = ast.parse(textwrap.dedent(task.function_source))
    except SyntaxError:
        return out
    names, attrs = set(), set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Constant) and type(node.value) in (int, float, str) \
                and not (isinstance(node.value, str) and len(node.value) > 40):
            out.append((node.value, None))
        elif isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            attrs.add(node.attr)
    if module_source:
        try:
            tree = ast.parse(module_source)
        except SyntaxError:
            tree = None
        if tree is not None:
            for name, value in _assigned_literals(tree.body).items():
                if name in names and type(value) in (int, float, str):
                    out.append((value, name))
            for cls in _enclosing_classes(tree, task.function or ""):
                for name, value in _assigned_literals(cls.body).items():
                    if (name in attrs or name in names) and type(value) in (int, float, str):
                        out.append((value, name.strip("_")))
    seen, uniq = set(), []
    for value, name in out:
        key = (type(value), value)
        if key not in seen:
            seen.add(key)
            uniq.append((value, name))
    return uniq


def neighbours(value, constants) -> list:
    """Nearby values of one argument, nearest and most telling first."""
    t = type(value)
    ints = [c for c, _ in constants if type(c) is int]
    nums = [c for c, _ in constants if type(c) in (int, float)]
    strs = [c for c, _ in constants if type(c) is str]
    out: list = []
    if t is bool:
        out = [not value]
    elif t is int:
        for c in ints:
            out += [c, c - 1, c + 1]
        out += [value - 1, value + 1, 0, 1, -1, -value]
    elif t is float:
        for c in nums:
            out += [float(c), float(c) - 1, float(c) + 1]
        out += [value - 1, value + 1, 0.0, -value]
    elif t is str:
        if re.fullmatch(r"-?\d+", value):
            n = int(value)
            for c in ints:
                out += [str(c), str(c - 1), str(c + 1)]
            out += [str(n - 1), str(n + 1), "0", str(-n)]
        out += ["", value[:1], value + value[-1:]] + strs
    elif t is bytes:
        out = [b"", value[:1]]
    elif t in (list, tuple):
        items = list(value)
        out = [t(), t(items[:1]), t(items[:-1]), t(items[::-1])]
    elif t in (set, frozenset):
        items = sorted(value, key=repr)
        out = [t(), t(items[:1])]
    elif t is dict:
        items = list(value.items())
        out = [{}, dict(items[:1])]
    uniq, seen = [], set()
    for v in out:
        key = (type(v), repr(v))
        if type(v) is type(value) and v == value and repr(v) == repr(value):
            continue
        if key not in seen:
            seen.add(key)
            uniq.append(v)
    return uniq


def _ident(text: str) -> str:
    text = re.sub(r"[^0-9a-zA-Z]+", "_", text).strip("_").lower()
    return text


# ------------------------------------------------------------------ programs

@dataclass
class Program:
    """A straight-line program over one recorded family: trace steps plus observers."""

    steps: list[dict]  # trace steps (kind, recv, name, owner, args, kwargs, assign)
    observers: list[tuple[str, str]]  # (var, template over {R})
    reach: list[int]  # indices of steps that reached the task's function
    classes: dict[str, str]  # var -> class name
    actions: dict = field(default_factory=dict)  # var -> public zero-argument methods
    origin: str = "recorded"
    edits: tuple = ()

    def key(self) -> str:
        return json.dumps([self.steps, self.observers], sort_keys=True)


@dataclass
class Rendered:
    pid: str
    imports: list[list[str]]  # per step: import lines it needs
    steps: list[dict]  # {"src"} or {"expr"}; plus "role" and "subject"
    program: Program

    def replay_form(self) -> dict:
        imports = sorted({i for imps in self.imports for i in imps})
        return {"id": self.pid, "imports": imports,
                "steps": [{k: s[k] for k in ("src", "expr") if k in s} for s in self.steps]}


def _import_line(owner: list[str]) -> tuple[str, str]:
    module, qual = owner
    head = qual.split(".")[0]
    return f"from {module} import {head}", qual


def _call_args(args: list[str], kwargs: list[list[str]]) -> str:
    return ", ".join(list(args) + [f"{k}={v}" for k, v in kwargs])


def render_step(step: dict) -> tuple[list[str], dict]:
    """One trace step as source: (imports, {"src"|"expr", "subject", ...})."""
    kind = step["kind"]
    args, kwargs = step.get("args", []), step.get("kwargs", [])
    imports: list[str] = []
    if kind in ("new", "call", "classcall"):
        line, qual = _import_line(step["owner"])
        imports.append(line)
        callee = qual if kind != "classcall" else f"{qual}.{step['name']}"
        expr = f"{callee}({_call_args(args, kwargs)})"
        subject = qual.split(".")[-1] if kind == "new" else callee.split(".")[-1] if kind == "call" \
            else f"{qual.split('.')[-1]}_{step['name']}"
    elif kind == "attr":
        expr = f"{step['recv']}.{step['name']}"
        subject = step["name"]
    else:  # method
        name, recv = step["name"], step["recv"]
        syntax = SYNTAX.get(name)
        if syntax is not None and not kwargs and (name == "__call__" or
                                                  syntax[0].count("{A") == len(args)):
            fields = {"R": recv, "ARGS": _call_args(args, kwargs)}
            fields.update({f"A{i}": a for i, a in enumerate(args)})
            expr = syntax[0].format(**fields)
            imports += [SYNTAX_IMPORTS[name]] if name in SYNTAX_IMPORTS else []
            if syntax[1]:
                return imports, {"src": expr, "subject": DUNDER_WORDS.get(name, name), "stmt": True}
        else:
            expr = f"{recv}.{name}({_call_args(args, kwargs)})"
        subject = DUNDER_WORDS.get(name, name.strip("_"))
    if any("math." in a for a in list(args) + [v for _, v in kwargs]):
        imports.append("import math")
    if step.get("assign"):
        return imports, {"src": f"{step['assign']} = {expr}", "rhs": expr, "subject": subject,
                         "assign": step["assign"]}
    return imports, {"expr": expr, "subject": subject}


def render(program: Program) -> Rendered:
    imports, steps = [], []
    for i, step in enumerate(program.steps):
        imps, r = render_step(step)
        r["role"] = "step"
        r["index"] = i
        imports.append(imps)
        steps.append(r)
    for var, template in program.observers:
        expr = template.replace("{R}", var)
        word = template.replace("{R}", "").strip("().") or "state"
        word = OBSERVER_WORDS.get(word, word)
        steps.append({"expr": expr, "role": "observe", "subject": word, "var": var})
        imports.append([])
    pid = hashlib.sha256(json.dumps([imports, [s.get("src") or s.get("expr") for s in steps]])
                         .encode()).hexdigest()[:16]
    return Rendered(pid, imports, steps, program)


def programs_for(task_key: str, families: list[dict], limit: int) -> list[Program]:
    """The task's recorded programs: each family that reached the task's function, up to a
    few steps after its last reaching step, with the family's observers appended."""
    out: list[Program] = []
    for fam in families:
        reach = fam["reach"].get(task_key)
        if not reach:
            continue
        steps = fam["steps"]
        last = min(len(steps) - 1, max(reach) + 3)
        kept = steps[: last + 1]
        assigned = [s["assign"] for s in kept if s.get("assign")]
        observers = [(v, t) for v in assigned for t in fam.get("observers", {}).get(v, [])]
        classes = {}
        for s in kept:
            if s.get("assign"):
                classes[s["assign"]] = (s["owner"][1].split(".")[-1] if s["kind"] == "new"
                                        else classes.get(s.get("recv"), s["assign"]))
        actions = {v: fam.get("actions", {}).get(v, []) for v in assigned}
        out.append(Program(kept, observers, [r for r in reach if r <= last], classes, actions=actions))
        first = min(reach)
        if first < last and fam["kind"] == "object":
            short = steps[: first + 1]
            assigned = [s["assign"] for s in short if s.get("assign")]
            obs = [(v, t) for v in assigned for t in fam.get("observers", {}).get(v, [])]
            out.append(Program(short, obs, [first], classes,
                               actions={v: fam.get("actions", {}).get(v, []) for v in assigned}))
    uniq, seen = [], set()
    for p in sorted(out, key=lambda p: (len(p.steps), p.key())):
        if p.key() not in seen:
            seen.add(p.key())
            uniq.append(p)
    return uniq[:limit]


# ------------------------------------------------------------------ search

def _slots(program: Program) -> list[tuple[int, str, object, object]]:
    """Editable argument slots: (step index, "arg"/"kw", position or name, value)."""
    out = []
    reach = set(program.reach)
    order = sorted(range(len(program.steps)), key=lambda i: (i not in reach, program.steps[i]["kind"] != "new", i))
    for i in order:
        step = program.steps[i]
        for j, src in enumerate(step.get("args", [])):
            try:
                out.append((i, "arg", j, _literal_value(src)))
            except Exception:  # noqa: BLE001 - a builtin name such as `len`: not editable
                pass
        for name, src in step.get("kwargs", []):
            try:
                out.append((i, "kw", name, _literal_value(src)))
            except Exception:  # noqa: BLE001
                pass
    return out


def apply_edits(program: Program, edits) -> Program | None:
    steps = [dict(s, args=list(s.get("args", [])), kwargs=[list(kv) for kv in s.get("kwargs", [])])
             for s in program.steps]
    drop = set()
    for edit in edits:
        kind = edit[0]
        if kind == "set":
            _, i, where, pos, value = edit
            try:
                src = literal_source(value)
            except NotLiteral:
                return None
            if where == "arg":
                steps[i]["args"][pos] = src
            else:
                for kv in steps[i]["kwargs"]:
                    if kv[0] == pos:
                        kv[1] = src
        elif kind == "swap":
            _, i, a, b = edit
            args = steps[i]["args"]
            args[a], args[b] = args[b], args[a]
        elif kind == "drop":
            drop.add(edit[1])
        elif kind == "drop_before":
            drop.update(i for i in range(edit[1]) if _droppable(steps[i]))
        elif kind == "extend":
            # do to a derived object (a copy) what the program did to its origin
            var = edit[1]
            steps += [dict(s, recv=var) for s in list(steps)
                      if s["kind"] == "method" and s.get("recv") not in (None, var) and not s.get("assign")]
        elif kind == "call":
            steps.append({"kind": "method", "recv": edit[1], "name": edit[2], "args": [], "kwargs": [],
                          "seq": len(steps)})
    if drop:
        keep = [i for i in range(len(steps)) if i not in drop]
        reach = [keep.index(r) for r in program.reach if r in keep]
        if not reach:
            return None
        steps = [steps[i] for i in keep]
    else:
        reach = list(program.reach)
    return Program(steps, list(program.observers), reach, dict(program.classes),
                   actions=dict(program.actions), origin="search", edits=tuple(edits))


def _droppable(step: dict) -> bool:
    return step["kind"] in ("method", "attr") and not step.get("assign")


def single_edits(program: Program, constants) -> list[tuple]:
    edits = []
    for i, where, pos, value in _slots(program):
        for v in neighbours(value, constants):
            edits.append(("set", i, where, pos, v))
    for i in program.reach:
        args = program.steps[i].get("args", [])
        vals = []
        for a in args:
            try:
                vals.append(_literal_value(a))
            except Exception:  # noqa: BLE001
                vals.append(None)
        for a in range(len(args)):
            for b in range(a + 1, len(args)):
                if type(vals[a]) is type(vals[b]) and args[a] != args[b] and vals[a] is not None:
                    edits.append(("swap", i, a, b))
    for i, step in enumerate(program.steps):
        if _droppable(step) and i not in program.reach:
            edits.append(("drop", i))
    out = [(e,) for e in edits]
    first = min(program.reach) if program.reach else 0
    structural = []
    if any(_droppable(program.steps[i]) for i in range(first)):
        structural.append((("drop_before", first),))
    for i in program.reach:
        var = program.steps[i].get("assign")
        if var and program.steps[i]["kind"] == "method":
            structural += [(("extend", var),), (("drop_before", first), ("extend", var))]
    # then call each public no-argument method once at the end (popitem, expire, ...)
    prefixes = [()] + [e for e in structural]
    for var, names in sorted(program.actions.items()):
        for name in names:
            for pre in prefixes:
                structural.append(tuple(pre) + (("call", var, name),))
    return structural + out


def hypothesis_edits(programs: list[Program], constants, count: int, seed: int) -> list[tuple[int, tuple]]:
    """Combinations of one to three edits, drawn by hypothesis strategies seeded from the
    observed values; fixed seed, no example database: the same draws every run."""
    if count <= 0:
        return []
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed
    from hypothesis import strategies as st

    slots = [_slots(p) for p in programs]
    usable = [k for k, s in enumerate(slots) if s]
    if not usable:
        return []

    def value_strategy(value):
        near = neighbours(value, constants)
        t = type(value)
        extra = None
        if t is int:
            lo = min([value] + [c for c, _ in constants if type(c) is int])
            hi = max([value] + [c for c, _ in constants if type(c) is int])
            extra = st.integers(min_value=lo - 3, max_value=hi + 3)
        elif t is float:
            extra = st.floats(min_value=min(value, 0.0) - 3, max_value=max(value, 0.0) + 3,
                              allow_nan=False, allow_infinity=False)
        elif t is str:
            alphabet = sorted(set(value) | set("0 -a")) or ["a"]
            extra = st.text(alphabet=alphabet, max_size=len(value) + 2)
        elif t in (list, tuple) and value:
            extra = st.lists(st.sampled_from(list(value)), max_size=len(value) + 1).map(t)
        options = ([st.sampled_from(near)] if near else []) + ([extra] if extra is not None else [])
        return st.one_of(options) if options else None

    strategies = {}
    for k in usable:
        for idx, (i, where, pos, value) in enumerate(slots[k]):
            s = value_strategy(value)
            if s is not None:
                strategies[(k, idx)] = s
    if not strategies:
        return []
    drawn: list[tuple[int, tuple]] = []

    @hseed(seed)
    @settings(max_examples=count, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck), derandomize=False, print_blob=False)
    @given(st.data())
    def collect(data):
        k = data.draw(st.sampled_from([k for k in usable if any((k, i) in strategies
                                                                  for i in range(len(slots[k])))]))
        choices = [i for i in range(len(slots[k])) if (k, i) in strategies]
        picked = data.draw(st.lists(st.sampled_from(choices), min_size=1, max_size=min(3, len(choices)),
                                    unique=True))
        edits = []
        for idx in sorted(picked):
            i, where, pos, _ = slots[k][idx]
            edits.append(("set", i, where, pos, data.draw(strategies[(k, idx)])))
        drawn.append((k, tuple(edits)))

    collect()
    return drawn


# ------------------------------------------------------------------ outcomes and tests

def _value_equal(a_src: str, b_src: str) -> bool:
    """Would `assert <b> == <a>` (or `is`, for True/False/None) pass?"""
    if a_src in ("True", "False", "None"):
        return b_src == a_src
    try:
        return _literal_value(a_src) == _literal_value(b_src)
    except Exception:  # noqa: BLE001
        return a_src == b_src


def _same_outcome(a: dict, b: dict) -> bool:
    if a.get("k") != b.get("k"):
        return False
    if a["k"] == "ok":
        if a.get("v") is None or b.get("v") is None:
            return a.get("v") is None and b.get("v") is None
        return _value_equal(b["v"], a["v"])
    if a["k"] == "raise":
        return a["type"] == b["type"] and a["msg"] == b["msg"]
    return True


@dataclass
class Finding:
    rendered: Rendered
    index: int  # the step whose outcome differs
    clean: dict
    mutant: dict
    cls: str  # assertion class of the test it makes
    source: str = ""
    name: str = ""
    stmts: int = 0
    body_chars: int = 0
    order: int = 0


def first_difference(rendered: Rendered, clean: list[dict], mutant: list[dict]) -> Finding | None:
    for i, step in enumerate(rendered.steps):
        if i >= len(clean):
            return None
        c = clean[i]
        if c.get("unstable") or c["k"] in ("timeout", "import-error"):
            return None
        if i >= len(mutant):
            return None
        m = mutant[i]
        if m["k"] in ("timeout", "import-error"):
            return None
        if c["k"] == "ok" and m["k"] == "ok":
            if "expr" not in step or c.get("v") is None:
                continue
            if m.get("v") is None or not _value_equal(c["v"], m["v"]):
                cls = "existence" if c["v"] == "None" else "value"
                return Finding(rendered, i, c, m, cls)
            continue
        if c["k"] == "ok" and m["k"] == "raise":
            if "expr" in step and c.get("v") is not None:
                return Finding(rendered, i, c, m, "existence" if c["v"] == "None" else "value")
            return Finding(rendered, i, c, m, "none")
        if c["k"] == "raise" and m["k"] == "ok":
            return Finding(rendered, i, c, m, "exception")
        if c["k"] == "raise" and m["k"] == "raise":
            caught = m["type"] == c["type"] or c["type"] in m.get("bases", [])
            if not caught:
                return Finding(rendered, i, c, m, "exception")
            if m["msg"] != c["msg"]:
                return Finding(rendered, i, c, m, "value")  # raises + an assert on the message
    return None


def _exception_name(outcome: dict) -> tuple[str, str | None]:
    module, qual = outcome["type"]
    if module == "builtins":
        return qual, None
    if not any(p.startswith("_") for p in module.split(".")) and "<" not in qual:
        return qual, f"from {module} import {qual.split('.')[0]}"
    for b_module, b_qual in outcome.get("bases", []):
        if b_module == "builtins":
            return b_qual, None
    return "Exception", None


def _arg_hint(step: dict, constants) -> str:
    args = step.get("args", []) or [v for _, v in step.get("kwargs", [])]
    if not args:
        return ""
    try:
        value = _literal_value(args[0])
    except Exception:  # noqa: BLE001
        return ""
    named = {(type(v), v): n for v, n in constants if n}
    t = type(value)
    if t is int:
        for (ct, c), n in named.items():
            if ct is int:
                if value == c:
                    return f"at_{n.lower()}"
                if value == c - 1:
                    return f"below_{n.lower()}"
                if value == c + 1:
                    return f"above_{n.lower()}"
        if value == 0:
            return "zero"
        return f"{'minus_' if value < 0 else ''}{abs(value)}" if abs(value) < 10 ** 6 else "large"
    if t is str:
        if value == "":
            return "empty_string"
        if re.fullmatch(r"-?\d+", value):
            n = int(value)
            return "zero" if n == 0 else f"{'minus_' if n < 0 else ''}{abs(n)}"
        word = _ident(value)
        return word if word and len(word) <= 16 else ""
    if t in (list, tuple, set, frozenset, dict) and not value:
        return f"empty_{t.__name__}"
    if t is bool:
        return str(value).lower()
    return ""


def write_test(f: Finding, constants) -> Finding:
    """Write the finding as one pytest test: setup, one call, one assert."""
    r = f.rendered
    imports: set[str] = set()
    body: list[str] = []
    clean = f.clean
    setup_exc = []
    for i in range(f.index):
        step = r.steps[i]
        if step["role"] == "observe" or r.program.steps[step["index"]]["kind"] == "attr":
            continue  # reads of state (observers, properties) are not setup
        imports.update(r.imports[i])
        src = step.get("src") or step["expr"]
        outcome = step.get("_clean")
        if outcome and outcome["k"] == "raise":
            name, imp = _exception_name(outcome)
            if imp:
                imports.add(imp)
            setup_exc.append(name)
            imports.add("import pytest")
            body += [f"with pytest.raises({name}):", f"    {src}"]
        else:
            body.append(src)
    step = r.steps[f.index]
    imports.update(r.imports[f.index])
    expr = step.get("expr") or step.get("rhs") or step["src"]
    stmt = step.get("src") or step["expr"]
    if clean["k"] == "ok" and clean.get("v") is not None and "expr" in step:
        v = clean["v"]
        if v in ("True", "False", "None"):
            body.append(f"assert {expr} is {v}")
        else:
            body.append(f"assert {expr} == {v}")
        if "math." in v:
            imports.add("import math")
    elif clean["k"] == "raise":
        name, imp = _exception_name(clean)
        if imp:
            imports.add(imp)
        imports.add("import pytest")
        if f.mutant["k"] == "raise" and f.mutant["type"] == clean["type"] or \
                (f.mutant["k"] == "raise" and clean["type"] in f.mutant.get("bases", [])):
            # a cut message is known only as its prefix: assert the prefix, never the whole
            got = f"str(excinfo.value)[:{len(clean['msg'])}]" if clean.get("cut") else "str(excinfo.value)"
            body += [f"with pytest.raises({name}) as excinfo:", f"    {stmt if 'rhs' not in step else expr}",
                     f"assert {got} == {clean['msg']!r}"]
        else:
            body += [f"with pytest.raises({name}):", f"    {stmt if 'rhs' not in step else expr}"]
    else:
        body.append(stmt)  # clean runs it, the mutant raises: the test fails on the mutant
    if any("math." in line for line in body):
        imports.add("import math")
    # name: what is called, on what, and how
    subject_parts = []
    cls = None
    first = r.steps[0] if r.steps else {}
    if r.program.steps and r.program.steps[0]["kind"] == "new":
        cls = r.program.steps[0]["owner"][1].split(".")[-1]
    if step["role"] == "observe":
        prior = next((r.steps[j] for j in range(f.index - 1, -1, -1) if r.steps[j]["role"] == "step"), first)
        subject_parts = [cls or "", prior.get("subject", ""), step["subject"]]
        hint = _arg_hint(r.program.steps[prior["index"]], constants) if "index" in prior else ""
    else:
        pstep = r.program.steps[step["index"]]
        if pstep["kind"] in ("method", "attr"):
            subject_parts = [cls or "", step["subject"]]
        else:
            subject_parts = [step["subject"]]
        hint = _arg_hint(pstep, constants)
    parts = [p for p in subject_parts if p] + ([hint] if hint else [])
    if clean["k"] == "raise":
        parts.append("raises_" + _exception_name(clean)[0].lower())
    name = "test_" + "_".join(_ident(p) for p in parts if _ident(p))
    name = name[:70].rstrip("_")
    std = sorted(i for i in imports if i.startswith("import "))
    frm = sorted(i for i in imports if i.startswith("from "))
    head = "\n".join(std) + ("\n\n" if std and frm else "") + "\n".join(frm)
    source = head + "\n\n\n" + f"def {name}():\n" + "".join(f"    {line}\n" for line in body)
    f.source, f.name, f.stmts, f.body_chars = source, name, len(body), sum(map(len, body))
    return f


# ------------------------------------------------------------------ the generator

@dataclass
class TaskReport:
    outcome: str
    calls_recorded: int = 0
    calls_skipped: Counter = field(default_factory=Counter)
    programs: int = 0
    search_calls: int = 0
    replay_seconds: float = 0.0
    search_seconds: float = 0.0
    budget_hit: bool = False
    minimize_calls: int = 0
    confirm_calls: int = 0
    confirm_failed: int = 0


def _seconds(name: str, value) -> float:
    out = _float(name, value)
    if not (out > 0 and math.isfinite(out)):
        raise UserError(f"option {name}={value!r}: must be a finite number more than 0")
    return out


def _count(name: str, value) -> int:
    return _int(name, value, minimum=0)  # 0 search calls: replay the suite's calls only


class AmplifyGenerator:
    """Test amplification: replay and vary the calls the target's own tests make."""

    name = "amplify"
    version = "3"
    needs_model = False

    OPTIONS = {"search_calls": (160, _count), "search_seconds": (30.0, _seconds),
               "step_timeout": (2.0, _seconds), "max_programs": (12, _int),
               "confirm_tries": (3, _int)}

    def __init__(self, **options):
        unknown = sorted(set(options) - set(self.OPTIONS))
        if unknown:
            raise UserError(f"generator 'amplify' has no option {', '.join(unknown)}; its "
                            f"options: {', '.join(sorted(self.OPTIONS))}")
        values = {name: convert(name, options[name]) if name in options else default
                  for name, (default, convert) in self.OPTIONS.items()}
        self.search_calls = values["search_calls"]
        self.search_seconds = values["search_seconds"]
        self.step_timeout = values["step_timeout"]
        self.max_programs = values["max_programs"]
        self.confirm_tries = values["confirm_tries"]
        self.last_summary: dict | None = None

    # -- plumbing
    def _replay(self, sb, lib: Path, programs: list[Rendered], seconds: float, seeds=(1, 2),
                max_timeouts: int = 0) -> tuple[dict, float]:
        """Run programs in the sandbox's current code; (id -> outcomes, wall seconds)."""
        if not programs:
            return {}, 0.0
        work = sb.scratch()
        cfg = {"mode": "replay", "out": str(work / "out.jsonl"), "step_timeout": self.step_timeout,
               "seconds": seconds, "seeds": list(seeds), "max_timeouts": max_timeouts,
               "modules": list(sb.target.import_names),
               "programs": [p.replay_form() for p in programs]}
        (work / "config.json").write_text(json.dumps(cfg))
        start = time.monotonic()
        report, _ = sb.run_pytest(["-p", "_amplify_plugin", f"--amplify-config={work / 'config.json'}"],
                                  select=None, exclude=[], timeout=seconds * 2 + 60,
                                  extra_paths=[str(lib)], writable=[work])
        wall = time.monotonic() - start
        out = {}
        path = work / "out.jsonl"
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if "outcomes" in row:
                    out[row["id"]] = row["outcomes"]
                    self._seconds[row["id"]] = row.get("s", 0.0)
                elif "modules" in row:
                    outside = {k: v for k, v in row["modules"].items() if v and not sb.contains(v)}
                    if outside:
                        raise HarnessError(f"amplify replay imported the target from outside its "
                                           f"sandbox: {outside}")
        if not out and programs:
            self._log(f"replay produced no outcome (exit {report.returncode}): {report.stderr_tail[-400:]}")
        shutil.rmtree(work, ignore_errors=True)
        return out, wall

    def _log(self, msg: str) -> None:
        if self._ctx_log:
            self._ctx_log(msg)

    _ctx_log = None
    _seconds: dict = {}

    # -- the protocol
    def generate(self, ctx):
        from killbench.sandbox import Sandbox

        self._ctx_log = ctx.log
        self._seconds = {}
        self._constants = {}
        started = time.monotonic()
        target = ctx.prepared
        baseline = ctx.baseline
        if target is None or baseline is None:
            ctx.log("amplify needs ctx.prepared and ctx.baseline (it runs the target's code)")
            return
        reports: dict[str, TaskReport] = {}
        eligible: list[Task] = []
        for task in ctx.tasks:
            if task.function is None:
                reports[task.id] = TaskReport("skipped: module-level statement")
            elif "<" in task.function:
                reports[task.id] = TaskReport("skipped: nested function or lambda")
            elif not task.covered_by:
                reports[task.id] = TaskReport("skipped: no covering test (runs at import)")
            else:
                eligible.append(task)
        from killbench.locations import cache_subdir

        root = Path(tempfile.mkdtemp(prefix="amplify-", dir=cache_subdir("tmp")))
        os.chmod(root, 0o755)
        totals = Counter()
        try:
            sb = Sandbox(target, root / "sandbox", trusted=False,
                         isolation=getattr(ctx, "isolation", "none"))
            lib = root / "lib"
            lib.mkdir()
            shutil.copy(PLUGIN, lib / "_amplify_plugin.py")
            families, trace_s = self._trace(sb, lib, target, baseline, eligible) if eligible else ([], 0.0)
            totals["trace_seconds"] = round(trace_s, 3)
            # the recorded programs of every task, replayed once on clean code
            per_task: dict[str, list[Rendered]] = {}
            for task in eligible:
                key = f"{task.module}|{task.function}"
                rep = reports[task.id] = TaskReport("not reached: generation stopped before this task")
                for fam in families:
                    if fam["test"] not in task.covered_by:
                        continue
                    rep.calls_recorded += len(fam["reach"].get(key, []))
                    rep.calls_skipped.update(fam["skipped"].get(key, {}))
                # only the calls made by the tests that execute the mutated line (reachability)
                covering = set(task.covered_by)
                mine = [f for f in families if f["test"] in covering]
                per_task[task.id] = [render(p) for p in programs_for(key, mine, self.max_programs)]
                rep.programs = len(per_task[task.id])
            # search programs are drawn up front (deterministic), so that clean code runs once
            # for every task: one clean batch, then one mutant run per task
            # All AST work (constants) and all hypothesis draws happen here, before the first
            # candidate is yielded: the harness gates candidates in threads, and CPython 3.11's
            # AST conversion is not thread-safe (gh-106905: "AST constructor recursion depth
            # mismatch" when two threads parse at once).
            variants: dict[str, list[Rendered]] = {}
            for task in eligible:
                constants = self._constants[task.id] = function_constants(task, ctx.sources.get(task.path))
                recorded = [r.program for r in per_task[task.id]]
                variants[task.id] = self._variants(task, recorded, constants, ctx.seed) if recorded else []
            unique = {r.pid: r for rs in [*per_task.values(), *variants.values()] for r in rs}
            clean, wall = self._replay(sb, lib, list(unique.values()),
                                       seconds=max(60.0, self.search_seconds * max(1, len(eligible))))
            totals["clean_replay_seconds"] = round(wall, 3)
            totals["recorded_programs"] = len({r.pid for rs in per_task.values() for r in rs})
            totals["search_programs"] = len(unique) - totals["recorded_programs"]
            for task in eligible:
                rep = reports[task.id]
                if not per_task[task.id]:
                    rep.outcome = ("no replayable call: " + rep.calls_skipped.most_common(1)[0][0]
                                   if rep.calls_skipped else "not reached by a recorded call")
                    continue
                rep.outcome = "no difference found"
                try:
                    cand = self._task(ctx, sb, lib, task, per_task[task.id], variants[task.id], clean, rep)
                except HarnessError:
                    raise
                except Exception as exc:  # a bug on one task is reported, counted, and not fatal
                    sb.restore()
                    rep.outcome = f"error: {type(exc).__name__}"
                    ctx.log(f"amplify: task {task.id}: {traceback.format_exc(limit=6)}")
                    cand = None
                totals["search_calls"] += rep.search_calls
                totals["search_seconds"] += rep.search_seconds
                totals["replay_seconds"] += rep.replay_seconds
                totals["confirm_calls"] += rep.confirm_calls
                totals["confirm_failed"] += rep.confirm_failed
                if cand is not None:
                    yield cand
        finally:
            shutil.rmtree(root, ignore_errors=True)
            summary = self._summary(ctx, reports, totals, time.monotonic() - started)
            self.last_summary = summary
            if getattr(ctx, "report", None) is not None:
                ctx.report({k: summary[k] for k in (
                    "search_calls", "confirm_calls", "confirm_failed", "search_programs",
                    "search_seconds", "replay_seconds", "trace_seconds", "recorded_programs",
                    "calls_recorded", "outcomes", "skip_reasons", "calls_skipped")})
            ctx.log("task outcomes: " + json.dumps(summary["task_outcomes"], sort_keys=True))

    def _trace(self, sb, lib, target, baseline, tasks):
        selected = sorted({t for task in tasks for t in task.covered_by
                           if t in set(baseline.tests)})
        work = sb.scratch()
        cfg_path = work / "amplify-trace.json"
        out = work / "amplify-trace.jsonl"
        cfg = {"mode": "trace", "out": str(out), "import_names": list(target.import_names),
               "modules": sorted(module_name(sf.module_path) for sf in target.sources),
               "tasks": sorted({(t.module, t.function) for t in tasks})}
        cfg_path.write_text(json.dumps(cfg))
        start = time.monotonic()
        report, _ = sb.run_pytest(["-p", "_amplify_plugin", f"--amplify-config={cfg_path}",
                                   *target.spec.tests],
                                  select=selected, exclude=baseline.excluded,
                                  timeout=baseline.timeout_for(selected, 10.0, 120.0),
                                  extra_paths=[str(lib)], writable=[work])
        wall = time.monotonic() - start
        families = []
        if out.exists():
            for line in out.read_text(encoding="utf-8").splitlines():
                try:
                    families.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
        if not report.finished:
            self._log(f"trace run did not finish (exit {report.returncode}, timed out "
                      f"{report.timed_out}): {report.stderr_tail[-400:]}")
        return families, wall

    def _task(self, ctx, sb, lib, task: Task, recorded: list[Rendered], variants: list[Rendered],
              clean: dict, rep: TaskReport) -> CandidateTest | None:
        original = ctx.sources.get(task.path)
        try:
            mutated = apply_diff(original, task.diff)
        except (ValueError, TypeError) as exc:
            rep.outcome = f"skipped: mutant diff did not apply ({exc})"
            return None
        constants = self._constants[task.id]
        usable = [r for r in recorded if r.pid in clean]
        searched = [r for r in variants if r.pid in clean]
        rep.budget_hit = len(searched) < len(variants)
        # the recorded calls and the search run in one process on the mutant; the search's
        # findings are used only when no recorded call differs
        sb.write(task.path, mutated.encode("utf-8"))
        try:
            mutant, wall = self._replay(sb, lib, usable + searched, seconds=self.search_seconds,
                                        seeds=(1,), max_timeouts=2)
        finally:
            sb.restore()
        rep.replay_seconds += wall
        rep.search_calls = sum(1 for r in searched if r.pid in mutant)
        rep.search_seconds = round(sum(self._seconds.get(r.pid, 0.0) for r in searched), 3)

        def collect(programs):
            found = []
            for order, r in enumerate(programs):
                c, m = clean.get(r.pid), mutant.get(r.pid)
                if c is None or m is None:
                    continue
                for step, outcome in zip(r.steps, c):
                    step["_clean"] = outcome
                f = first_difference(r, c, m)
                if f is not None:
                    f.order = order
                    found.append(write_test(f, constants))
            return found

        # The batch ran many programs in one process: a program that changed global state
        # (humanize's i18n.activate('fi')) changes what later ones return. A finding is used
        # only if it holds alone in a fresh process, on clean code and on the mutant.
        best, origin, findings = None, "recorded", []
        for origin, programs in (("recorded", usable), ("search", searched)):
            findings = collect(programs)
            findings.sort(key=lambda f: (CLASS_RANK[f.cls], f.stmts, f.body_chars, f.order))
            for f in findings[: self.confirm_tries]:
                if f.stmts > 2:
                    f = self._minimize(sb, lib, task, mutated, f, constants, rep)
                if self._holds_alone(sb, lib, task, mutated, f, clean, rep):
                    best = f
                    break
            if best is not None:
                break
        if best is None:
            if rep.confirm_failed:
                rep.outcome = "no difference held alone in a fresh process"
            return None
        rep.outcome = f"emitted ({origin})"
        meta = {"amplify": {"origin": origin, "assertion": best.cls,
                            "test": best.name, "edits": _edits_repr(best.rendered.program.edits),
                            "recorded_programs": rep.programs, "search_calls": rep.search_calls,
                            "search_seconds": rep.search_seconds,
                            "replay_seconds": round(rep.replay_seconds, 3),
                            "minimize_calls": rep.minimize_calls,
                            "confirm_calls": rep.confirm_calls, "confirm_failed": rep.confirm_failed,
                            "budget_hit": rep.budget_hit, "findings": len(findings)},
                "tokens": 0}
        return CandidateTest(best.source, task=task.id, meta=meta)

    def _holds_alone(self, sb, lib, task: Task, mutated: str, f: Finding, batch_clean: dict,
                     rep: TaskReport) -> bool:
        """The finding's program alone: same clean outcomes as in the batch (what the test
        asserts), and still different on the mutant. Two short runs."""
        r = f.rendered
        clean, w1 = self._replay(sb, lib, [r], seconds=self.search_seconds)
        sb.write(task.path, mutated.encode("utf-8"))
        try:
            mutant, w2 = self._replay(sb, lib, [r], seconds=self.search_seconds, seeds=(1,))
        finally:
            sb.restore()
        rep.replay_seconds += w1 + w2
        rep.confirm_calls += 2
        alone, on_mutant = clean.get(r.pid), mutant.get(r.pid)
        held = False
        if alone is not None and on_mutant is not None and f.index < len(alone):
            again = first_difference(r, alone, on_mutant)
            held = (again is not None and again.index == f.index
                    and _same_outcome(alone[f.index], f.clean))  # what the test asserts
        if not held:
            rep.confirm_failed += 1
        return held

    def _minimize(self, sb, lib, task: Task, mutated: str, best: Finding, constants,
                  rep: TaskReport) -> Finding:
        """One round of shortening: the program cut at the differing step, without the
        setup steps that can go (all of them, and each alone); the shortest that still
        differs wins. Two more runs (clean and mutant); the found test stands otherwise."""
        prog = best.rendered.program
        step = best.rendered.steps[best.index]
        if step["role"] == "observe":
            last = len(prog.steps) - 1
            template = next((t for v, t in prog.observers
                             if v == step["var"] and t.replace("{R}", v) == step["expr"]), None)
            if template is None:
                return best
            observers = [(step["var"], template)]
        else:
            last, observers = step["index"], []
        base = Program(prog.steps[: last + 1], observers, [r for r in prog.reach if r <= last],
                       dict(prog.classes), actions={}, origin=prog.origin, edits=prog.edits)
        droppable = [i for i in range(last) if _droppable(prog.steps[i]) and i not in prog.reach]
        if not droppable:
            return best
        candidates = [apply_edits(base, [("drop", i) for i in droppable])] + \
            [apply_edits(base, [("drop", i)]) for i in droppable]
        rendered = {}
        for c in candidates:
            if c is not None:
                c.origin, c.edits = prog.origin, prog.edits  # minimising is not a search move
                r = render(c)
                rendered.setdefault(r.pid, r)
        programs = list(rendered.values())[: self.search_calls]
        clean, w1 = self._replay(sb, lib, programs, seconds=self.search_seconds)
        sb.write(task.path, mutated.encode("utf-8"))
        try:
            mutant, w2 = self._replay(sb, lib, programs, seconds=self.search_seconds, seeds=(1,),
                                      max_timeouts=2)
        finally:
            sb.restore()
        rep.replay_seconds += w1 + w2
        rep.minimize_calls = len(programs)
        found = [best]
        for order, r in enumerate(programs):
            c, m = clean.get(r.pid), mutant.get(r.pid)
            if c is None or m is None:
                continue
            for st, outcome in zip(r.steps, c):
                st["_clean"] = outcome
            f = first_difference(r, c, m)
            if f is not None and f.cls == best.cls:
                f.order = order
                found.append(write_test(f, constants))
        found.sort(key=lambda f: (CLASS_RANK[f.cls], f.stmts, f.body_chars, f.order))
        return found[0]

    def _variants(self, task: Task, programs: list[Program], constants, seed: int) -> list[Rendered]:
        budget = self.search_calls
        out: dict[str, Rendered] = {}
        base_keys = {p.key() for p in programs}

        def add(program):
            if program is None or program.key() in base_keys:
                return
            r = render(program)
            if r.pid not in out and len(out) < budget:
                out[r.pid] = r

        # 1. single edits, enumerated: nearest first, the steps that reach the function first
        singles = [(p, single_edits(p, constants)) for p in programs]
        depth = 0
        while len(out) < budget * 0.6 and any(depth < len(e) for _, e in singles):
            for p, edits in singles:
                if depth < len(edits) and len(out) < budget * 0.6:
                    add(apply_edits(p, edits[depth]))
            depth += 1
        # 2. combinations drawn by hypothesis from strategies seeded by the observed values
        digest = int(hashlib.sha256(f"{seed}:{task.id}".encode()).hexdigest()[:8], 16)
        for k, edits in hypothesis_edits(programs, constants, budget - len(out), digest):
            add(apply_edits(programs[k], edits))
        return list(out.values())

    def _summary(self, ctx, reports: dict[str, TaskReport], totals: Counter, wall: float) -> dict:
        outcomes = Counter()
        for r in reports.values():
            outcomes[r.outcome.split(":")[0] if r.outcome.startswith(("skipped", "no replayable", "error"))
                     else r.outcome] += 1
        reasons = Counter()
        skipped_calls = Counter()
        for r in reports.values():
            if r.outcome.startswith(("skipped", "no replayable", "error")):
                reasons[r.outcome] += 1
            skipped_calls.update(r.calls_skipped)
        return {
            "target": ctx.target, "tasks": len(ctx.tasks),
            "outcomes": dict(sorted(outcomes.items())),
            "skip_reasons": dict(sorted(reasons.items())),
            "calls_recorded": sum(r.calls_recorded for r in reports.values()),
            "calls_skipped": dict(sorted(skipped_calls.items())),
            "search_calls": totals["search_calls"],
            "confirm_calls": totals["confirm_calls"], "confirm_failed": totals["confirm_failed"],
            "search_programs": totals["search_programs"],
            "search_seconds": round(totals["search_seconds"], 3),
            "replay_seconds": round(totals["replay_seconds"] + totals["clean_replay_seconds"], 3),
            "trace_seconds": totals["trace_seconds"],
            "recorded_programs": totals["recorded_programs"],
            "wall_s": round(wall, 3), "tokens": 0,
            "task_outcomes": {tid: r.outcome for tid, r in sorted(reports.items())},
        }


def _edits_repr(edits) -> list[str]:
    out = []
    for e in edits:
        if e[0] == "set":
            out.append(f"step {e[1]} {e[2]} {e[3]} = {e[4]!r}")
        else:
            out.append(" ".join(str(x) for x in e))
    return out
