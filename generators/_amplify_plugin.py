"""The pytest plugin `amplify` loads into the target's own environment.

It runs where the target's tests run (stdlib, pytest and the target's own
dependencies only: no hypothesis, no killbench), loaded with
``-p _amplify_plugin --amplify-config CONFIG.json``. Two modes:

``trace``
    While each selected test runs, a profile hook (``sys.setprofile``: call and
    return events only, no line events) records every *step*: the outermost call
    into the target's code made by non-target code (a test, unittest, a stdlib
    helper), or a call of any method on an object the plugin tracks. Objects are
    tracked from the constructor call that built them (``Cls(...)`` where ``Cls``
    is importable from the target's public module path) or when a step returns a
    new target object (``copy.copy(cache)``). The steps on one tracked object (and
    the objects derived from it) form a *family*: a straight-line program that
    rebuilds the object and replays what the test did to it. Arguments are kept only
    when they can be written as Python literals (or as a name from a small explicit
    set: builtins such as ``len``, ``math.inf``); any other step is not recorded and
    its reason is counted against every task function it reached.

``replay``
    Executes programs (source statements and expressions written by the generator),
    each step under a per-step alarm, each program twice with different ``random``
    seeds, and writes one JSON line per program: for every step, ``ok`` (with the
    value as literal source when it has one), ``raise`` (exception type and
    message), or ``timeout``; steps whose outcome differs between the two runs are
    flagged unstable. The output is what the generator compares between clean code
    and a mutant; the test it writes is the same source.
"""

import ast
import builtins
import collections.abc as cabc
import types
import json
import math
import random
import signal
import sys
import time

import pytest

CO_NEWLOCALS = 0x02
CO_VARARGS = 0x04
CO_VARKEYWORDS = 0x08
CO_GENERATOR_LIKE = 0x20 | 0x80 | 0x100 | 0x200  # generator, coroutine, iterable coroutine, async gen

MAX_LITERAL_ITEMS = 40
MAX_LITERAL_DEPTH = 4
MAX_LITERAL_CHARS = 400
MAX_STEPS_PER_FAMILY = 60
MAX_FAMILIES = 5000

# Special methods a test reaches through syntax; everything else is written as a call.
# name -> (template over the receiver R and rendered arguments A0, A1, ..., statement?)
SYNTAX = {
    "__init__": None,  # constructor: handled apart
    "__getitem__": ("{R}[{A0}]", False),
    "__setitem__": ("{R}[{A0}] = {A1}", True),
    "__delitem__": ("del {R}[{A0}]", True),
    "__contains__": ("{A0} in {R}", False),
    "__len__": ("len({R})", False),
    "__iter__": ("list({R})", False),
    "__reversed__": ("list(reversed({R}))", False),
    "__repr__": ("repr({R})", False),
    "__str__": ("str({R})", False),
    "__bool__": ("bool({R})", False),
    "__hash__": ("hash({R})", False),
    "__eq__": ("{R} == {A0}", False),
    "__ne__": ("{R} != {A0}", False),
    "__lt__": ("{R} < {A0}", False),
    "__le__": ("{R} <= {A0}", False),
    "__gt__": ("{R} > {A0}", False),
    "__ge__": ("{R} >= {A0}", False),
    "__copy__": ("copy.copy({R})", False),
    "__call__": ("{R}({ARGS})", False),
}
SYNTAX_IMPORTS = {"__copy__": "import copy"}


# ---------------------------------------------------------------- literals

class NotLiteral(Exception):
    """A value that cannot be written back as source; args[0] names its type."""


def _type_name(value) -> str:
    t = type(value)
    mod = getattr(t, "__module__", "?")
    return t.__qualname__ if mod == "builtins" else f"{mod}.{t.__qualname__}"


def literal_source(value, *, results: bool = False, lambdas: bool = False, _depth: int = 0) -> str:
    """Python source that evaluates to an equal value, or NotLiteral.

    Exact builtin types only (a subclass may behave differently), except with
    ``results=True``: then named tuples are written as tuples and dict views as
    lists, because a result is only compared with ``==``. With ``lambdas=True``
    a self-contained lambda (see ``lambda_source``) is written as its own source.
    """
    if _depth > MAX_LITERAL_DEPTH:
        raise NotLiteral("nesting too deep")
    t = type(value)
    if value is None or t is bool or t is int:
        return repr(value)
    if t is float:
        if math.isnan(value):
            raise NotLiteral("float nan")
        if math.isinf(value):
            return "math.inf" if value > 0 else "-math.inf"
        return repr(value)
    if t is complex:
        if math.isnan(value.real) or math.isnan(value.imag) or math.isinf(abs(value)):
            raise NotLiteral("complex inf/nan")
        return repr(value)
    if t is str or t is bytes:
        if len(value) > MAX_LITERAL_CHARS:
            raise NotLiteral(f"{t.__name__} too long")
        return repr(value)
    items = None
    if t in (list, tuple, set, frozenset, dict):
        items = value
    elif results and isinstance(value, tuple):  # named tuples compare equal to tuples
        t, items = tuple, tuple(value)
    elif results and isinstance(value, (cabc.KeysView, cabc.ValuesView, cabc.ItemsView)):
        t, items = list, list(value)
    if items is None:
        if _is_builtin_name(value):
            return value.__name__
        if lambdas and t is types.FunctionType and value.__name__ == "<lambda>":
            return lambda_source(value)
        raise NotLiteral(_type_name(value))
    if len(items) > MAX_LITERAL_ITEMS:
        raise NotLiteral(f"{t.__name__} too long")
    sub = lambda v: literal_source(v, results=results, lambdas=lambdas, _depth=_depth + 1)  # noqa: E731
    if t is dict:
        body = ", ".join(f"{sub(k)}: {sub(v)}" for k, v in items.items())
        out = "{" + body + "}"
    elif t is list:
        out = "[" + ", ".join(sub(v) for v in items) + "]"
    elif t is tuple:
        parts = [sub(v) for v in items]
        out = "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
    else:
        parts = sorted(sub(v) for v in items)  # a stable order to write a set in
        inner = "{" + ", ".join(parts) + "}" if parts else ""
        out = (f"frozenset({inner})" if t is frozenset else (inner or "set()"))
    if len(out) > MAX_LITERAL_CHARS * 2:
        raise NotLiteral(f"{t.__name__} too long")
    return out


_PARSED = {}


def lambda_source(func) -> str:
    """The source of a lambda that needs nothing but its arguments, literals and builtins
    (no closure, no defaults, no globals, no nested code), read back from its file."""
    code = func.__code__
    if func.__closure__ or func.__defaults__ or func.__kwdefaults__:
        raise NotLiteral("lambda with a closure or defaults")
    if any(isinstance(c, types.CodeType) for c in code.co_consts):
        raise NotLiteral("lambda with nested code")
    if code.co_flags & (CO_VARARGS | CO_VARKEYWORDS) or code.co_kwonlyargcount:
        raise NotLiteral("lambda with *args or keywords")
    if not all(hasattr(builtins, n) and func.__globals__.get(n, getattr(builtins, n)) is getattr(builtins, n)
               for n in code.co_names):
        raise NotLiteral("lambda that uses globals or attributes")
    pos = next(((ln, col) for ln, _, col, _ in code.co_positions() if ln and (ln, col) != (code.co_firstlineno, 0)),
               None)
    path = code.co_filename
    if path not in _PARSED:
        try:
            with open(path, encoding="utf-8") as fh:
                _PARSED[path] = ast.parse(fh.read())
        except (OSError, SyntaxError, ValueError):
            _PARSED[path] = None
    tree = _PARSED[path]
    if tree is None or pos is None:
        raise NotLiteral("lambda without source")
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Lambda) and node.lineno == code.co_firstlineno:
            b = node.body
            if (b.lineno, b.col_offset) <= pos <= (b.end_lineno, b.end_col_offset):
                names = [a.arg for a in node.args.posonlyargs + node.args.args]
                if names == list(code.co_varnames[:code.co_argcount]):
                    found.append(node)
    sources = {ast.unparse(n) for n in found}
    if len(sources) != 1:
        raise NotLiteral("lambda without source")
    return sources.pop()


def _is_builtin_name(value) -> bool:
    name = getattr(value, "__name__", None)
    return isinstance(name, str) and not name.startswith("_") and getattr(builtins, name, None) is value \
        and (callable(value))


def literal_namespace() -> dict:
    """What literal sources may refer to besides literals."""
    return {"math": math, "__builtins__": builtins}


# ---------------------------------------------------------------- config

_CONFIG = None


def pytest_addoption(parser):
    parser.addoption("--amplify-config", action="store", default=None,
                     help="killbench amplify: JSON configuration of a trace or replay run")


def pytest_configure(config):
    global _CONFIG
    path = config.getoption("--amplify-config")
    if not path:
        return
    with open(path, encoding="utf-8") as fh:
        _CONFIG = json.load(fh)
    if _CONFIG["mode"] == "trace":
        config.pluginmanager.register(Tracer(_CONFIG), "amplify-tracer")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    if _CONFIG is not None and _CONFIG["mode"] == "replay":
        replay(_CONFIG)
        pytest.exit("amplify replay done", returncode=0)


# ---------------------------------------------------------------- trace

class _Tracked:
    __slots__ = ("obj", "family", "var")

    def __init__(self, obj, family, var):
        self.obj, self.family, self.var = obj, family, var


class Tracer:
    def __init__(self, cfg):
        self.cfg = cfg
        self.prefixes = tuple(cfg["import_names"])
        # Target code is the code killbench mutates. Import prefixes alone are not enough:
        # tests shipped inside the package (toolz.tests, glom.test) share the prefix, and a
        # test function taken for a target call hides every call it makes.
        self.modules = frozenset(cfg.get("modules") or ())
        self.test_modules = set()
        self.task_keys = {tuple(k) for k in cfg["tasks"]}
        self.out = open(cfg["out"], "w", encoding="utf-8")
        self.families = 0
        self.code_keys = {}  # code -> (module, qualname) of a task function, or None
        self.target_codes = {}  # code -> defined in the target's package
        self.reset("")

    def reset(self, nodeid):
        self.nodeid = nodeid
        self.objs = {}  # id -> _Tracked (objects are kept alive until the test ends)
        self.untracked = {}  # id -> (obj, reason) for target objects we could not rebuild
        self.active = None  # the step in progress: dict
        self.active_frame = None
        self.fams = []

    # -- pytest hooks
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        self.reset(item.nodeid)
        module = getattr(getattr(item, "module", None), "__name__", None)
        if module:
            self.test_modules.add(module)
        sys.setprofile(self.profile)
        try:
            yield
        finally:
            sys.setprofile(None)
            self.flush()
            self.reset("")

    def pytest_sessionfinish(self, session):
        self.out.close()

    # -- output
    def flush(self):
        for fam in self.fams:
            if fam["reach"] or fam["skipped"]:
                self.out.write(json.dumps(fam, sort_keys=True) + "\n")
        self.out.flush()

    def new_family(self, kind):
        fam = {"test": self.nodeid, "index": len(self.fams), "kind": kind, "steps": [], "vars": {},
               "reach": {}, "skipped": {}, "poisoned": None}
        self.fams.append(fam)
        self.families += 1
        return fam

    # -- classification
    def is_target(self, module):
        if not module or module in self.test_modules:
            return False
        if self.modules:
            return module in self.modules
        return any(module == p or module.startswith(p + ".") for p in self.prefixes)

    def task_key(self, frame):
        code = frame.f_code
        try:
            return self.code_keys[code]
        except KeyError:
            pass
        key = (frame.f_globals.get("__name__"), code.co_qualname)
        key = key if key in self.task_keys else None
        self.code_keys[code] = key
        return key

    def profile(self, frame, event, arg):
        if event == "call":
            if self.active is not None:
                key = self.task_key(frame)
                if key is not None:
                    self.reached(key)
                return
            try:
                self.maybe_start(frame)
            except Exception as exc:  # a bug here must not break the target's test
                self.active, self.active_frame = None, None
                sys.stderr.write(f"[amplify] trace error: {exc!r}\n")
        elif event == "return" and frame is self.active_frame:
            step = self.active
            self.active, self.active_frame = None, None
            try:
                self.finish(step, arg)
            except Exception as exc:
                sys.stderr.write(f"[amplify] trace error: {exc!r}\n")

    def reached(self, key):
        step = self.active
        fam = step["family"]
        k = "|".join(key)
        if step.get("skip"):
            d = fam["skipped"].setdefault(k, {})
            d[step["skip"]] = d.get(step["skip"], 0) + 1
        else:
            fam["reach"].setdefault(k, [])
            if not fam["reach"][k] or fam["reach"][k][-1] != step["index"]:
                fam["reach"][k].append(step["index"])

    def maybe_start(self, frame):
        code = frame.f_code
        if not code.co_flags & CO_NEWLOCALS or code.co_flags & CO_GENERATOR_LIKE:
            return
        module = frame.f_globals.get("__name__", "")
        target = self.target_codes.get(code)
        if target is None:
            target = self.target_codes[code] = self.is_target(module)
        if not target and not self.objs:
            return
        first = None
        if code.co_argcount:
            first = frame.f_locals.get(code.co_varnames[0])
        tracked = self.objs.get(id(first)) if first is not None else None
        if tracked is not None and tracked.obj is not first:
            tracked = None
        if not target and tracked is None:
            return
        step = self.classify(frame, code, module, first, tracked)
        if step is None:
            return
        self.active, self.active_frame = step, frame
        if self.task_key(frame) is not None:
            self.reached(self.task_key(frame))

    def skip_step(self, reason, family=None):
        fam = family or self.new_family("skipped")
        return {"family": fam, "index": None, "skip": reason}

    def classify(self, frame, code, module, first, tracked):
        qual = code.co_qualname
        name = code.co_name
        if "<" in qual:
            return self.skip_step("nested function or lambda")
        if tracked is not None:
            fam = tracked.family
            if fam["poisoned"]:
                return self.skip_step(fam["poisoned"], fam)
            if len(fam["steps"]) >= MAX_STEPS_PER_FAMILY:
                return self.skip_step("program too long", fam)
            func, kind = self.resolve_method(type(first), name, code)
            if func is None:
                if not self.is_target(module):
                    return None  # a function that takes the object (copy.copy): not a method
                return self.skip_step("a function taking a built object, not a method", fam)
            if kind == "property":
                return self.add_step(fam, {"kind": "attr", "recv": tracked.var, "name": name})
            if name == "__init__":
                return self.poison(fam, "__init__ called again on a built object")
            if name.startswith("__") and name.endswith("__") and name not in SYNTAX:
                return self.poison(fam, f"special method {name}")
            try:
                args, kwargs = self.arguments(frame, code, func, skip_first=True)
            except NotLiteral as exc:
                return self.poison(fam, f"argument not a literal: {exc.args[0]}")
            return self.add_step(fam, {"kind": "method", "recv": tracked.var, "name": name,
                                       "args": args, "kwargs": kwargs})
        # a call into target code with no step in progress
        if "." not in qual:
            func = frame.f_globals.get(name)
            if getattr(func, "__code__", None) is not code:
                wrapped = getattr(func, "__wrapped__", None)
                if getattr(wrapped, "__code__", None) is not code:
                    return self.skip_step("function not importable by its name")
                func = wrapped
            owner = self.import_ref(frame.f_globals.get(name), module, name)
            if owner is None:
                return self.skip_step("function not importable by its name")
            try:
                args, kwargs = self.arguments(frame, code, func, skip_first=False)
            except NotLiteral as exc:
                return self.skip_step(f"argument not a literal: {exc.args[0]}")
            fam = self.new_family("call")
            return self.add_step(fam, {"kind": "call", "owner": owner, "args": args, "kwargs": kwargs})
        if name == "__init__" and first is not None and code.co_argcount:
            cls = type(first)
            if id(first) in self.untracked:
                return self.skip_step(self.untracked[id(first)][1])
            owner = self.class_ref(cls)
            if owner is None:
                reason = (f"receiver of a class defined outside the target ({_type_name(first)})"
                          if not self.is_target(cls.__module__) else
                          f"receiver class not importable ({_type_name(first)})")
                self.untracked[id(first)] = (first, reason)
                return self.skip_step(reason)
            func = self.resolve_method(cls, name, code)[0]
            try:
                args, kwargs = self.arguments(frame, code, func, skip_first=True)
            except NotLiteral as exc:
                reason = f"constructor argument not a literal: {exc.args[0]}"
                self.untracked[id(first)] = (first, reason)
                return self.skip_step(reason)
            if len(self.fams) >= MAX_FAMILIES:
                return self.skip_step("too many objects")
            fam = self.new_family("object")
            var = self.var_name(fam, cls)
            self.objs[id(first)] = _Tracked(first, fam, var)
            return self.add_step(fam, {"kind": "new", "owner": owner, "assign": var,
                                       "args": args, "kwargs": kwargs})
        # class-level callables reached without an instance: classmethod, staticmethod
        cls, raw = self.class_attribute(module, qual)
        if isinstance(raw, (classmethod, staticmethod)):
            owner = self.class_ref(first if isinstance(raw, classmethod) and isinstance(first, type)
                                   else cls)
            if owner is None:
                return self.skip_step("class not importable")
            try:
                args, kwargs = self.arguments(frame, code, raw.__func__,
                                              skip_first=isinstance(raw, classmethod))
            except NotLiteral as exc:
                return self.skip_step(f"argument not a literal: {exc.args[0]}")
            fam = self.new_family("call")
            return self.add_step(fam, {"kind": "classcall", "owner": owner, "name": name,
                                       "args": args, "kwargs": kwargs})
        if first is not None and id(first) in self.untracked:
            return self.skip_step(self.untracked[id(first)][1])
        return self.skip_step("receiver not built by a recorded constructor")

    def poison(self, fam, reason):
        """Later steps on this object cannot be replayed faithfully."""
        fam["poisoned"] = reason
        return self.skip_step(reason, fam)

    def add_step(self, fam, step):
        step["seq"] = len(fam["steps"])
        fam["steps"].append(step)
        return {"family": fam, "index": step["seq"], "skip": None, "step": step}

    def finish(self, step, result):
        """A step returned: track a new target object it handed back (a copy, a view)."""
        if step.get("skip") or step.get("step") is None:
            return
        fam = step["family"]
        rec = step["step"]
        if rec["kind"] in ("method", "attr") and result is not None and id(result) not in self.objs:
            cls = type(result)
            if self.is_target(getattr(cls, "__module__", "")) and not isinstance(result, type):
                var = self.var_name(fam, cls)
                self.objs[id(result)] = _Tracked(result, fam, var)
                rec["assign"] = var

    def var_name(self, fam, cls):
        base = _snake_last_word(cls.__name__)
        n = sum(1 for v in fam["vars"] if fam["vars"][v] == base) + 1
        var = base if n == 1 else f"{base}{n}"
        fam["vars"][var] = base
        fam.setdefault("observers", {})[var] = observers_for(cls, self.is_target)
        fam.setdefault("actions", {})[var] = actions_for(cls, self.is_target)
        return var

    # -- resolution helpers
    def resolve_method(self, cls, name, code):
        for klass in getattr(cls, "__mro__", ()):
            raw = klass.__dict__.get(name)
            if raw is None:
                continue
            if isinstance(raw, property):
                return raw.fget, "property"
            func = getattr(raw, "__func__", raw)
            if getattr(func, "__code__", None) is code:
                return func, "method"
        # a super() call or a mixin: find the function holding this code anywhere in the MRO
        for klass in getattr(cls, "__mro__", ()):
            for raw in klass.__dict__.values():
                if isinstance(raw, property) and getattr(raw.fget, "__code__", None) is code:
                    return raw.fget, "property"
                func = getattr(raw, "__func__", raw)
                if getattr(func, "__code__", None) is code:
                    return func, "method"
        return None, "method"

    def class_attribute(self, module, qual):
        obj = sys.modules.get(module)
        parts = qual.split(".")
        for p in parts[:-1]:
            obj = getattr(obj, p, None)
            if obj is None:
                return None, None
        if not isinstance(obj, type):
            return None, None
        return obj, obj.__dict__.get(parts[-1])

    def import_ref(self, obj, module, qualname):
        """[module, qualname] to import `obj` from: the shortest public module path."""
        if obj is None:
            return None
        parts = module.split(".")
        candidates = [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
        # public paths first, shorter first; the defining module last resort
        candidates.sort(key=lambda m: (any(p.startswith("_") for p in m.split(".")), m.count(".")))
        for mod_name in candidates:
            mod = sys.modules.get(mod_name)
            cur = mod
            for p in qualname.split("."):
                cur = getattr(cur, p, None)
            if cur is obj:
                return [mod_name, qualname]
        return None

    def class_ref(self, cls):
        if not isinstance(cls, type) or not self.is_target(cls.__module__) or "<" in cls.__qualname__:
            return None
        return self.import_ref(cls, cls.__module__, cls.__qualname__)

    def arguments(self, frame, code, func, skip_first):
        """The call's arguments as literal sources: (positional, [[keyword, source], ...])."""
        names = code.co_varnames
        nargs, nkw = code.co_argcount, code.co_kwonlyargcount
        npos_only = code.co_posonlyargcount
        loc = frame.f_locals
        i = nargs + nkw
        varargs = names[i] if code.co_flags & CO_VARARGS else None
        if varargs:
            i += 1
        varkw = names[i] if code.co_flags & CO_VARKEYWORDS else None
        defaults = (getattr(func, "__defaults__", None) or ()) if func is not None else ()
        kwdefaults = (getattr(func, "__kwdefaults__", None) or {}) if func is not None else {}
        first_default = nargs - len(defaults)
        start = 1 if skip_first else 0
        star = list(loc.get(varargs, ())) if varargs else []
        args, kwargs = [], []
        keyword_mode = False
        for j in range(start, nargs):
            name = names[j]
            value = loc.get(name)
            is_default = j >= first_default and func is not None and value is defaults[j - first_default]
            if is_default and not star:
                if j < npos_only:
                    args.append(literal_source(value, lambdas=True))  # cannot be passed by keyword
                else:
                    keyword_mode = True
                continue
            if keyword_mode and j >= npos_only and not star:
                kwargs.append([name, literal_source(value, lambdas=True)])
            else:
                args.append(literal_source(value, lambdas=True))
        for value in star:
            args.append(literal_source(value, lambdas=True))
        for name in names[nargs:nargs + nkw]:
            value = loc.get(name)
            if func is not None and name in kwdefaults and value is kwdefaults[name]:
                continue
            kwargs.append([name, literal_source(value, lambdas=True)])
        if varkw:
            for k, v in dict(loc.get(varkw, {})).items():
                if not (isinstance(k, str) and k.isidentifier()):
                    raise NotLiteral("keyword not an identifier")
                kwargs.append([k, literal_source(v, lambdas=True)])
        return args, kwargs


def _snake_last_word(name: str) -> str:
    """LRUCache -> cache, Item -> item, _Link -> link, HTTPServer -> server."""
    name = name.strip("_") or "obj"
    words, cur = [], ""
    for i, ch in enumerate(name):
        nxt = name[i + 1] if i + 1 < len(name) else ""
        if ch.isupper() and cur and (not cur[-1].isupper() or (nxt and nxt.islower())):
            words.append(cur)
            cur = ch
        elif ch == "_":
            if cur:
                words.append(cur)
            cur = ""
        else:
            cur += ch
    if cur:
        words.append(cur)
    word = (words[-1] if words else "obj").lower()
    return word if word.isidentifier() and word not in ("copy", "math", "pytest", "re") else "obj"


def actions_for(cls, is_target):
    """Public methods of the target's classes callable with no argument (search moves)."""
    out, seen = [], set()
    for klass in cls.__mro__:
        if not is_target(getattr(klass, "__module__", "")):
            continue
        for name, raw in sorted(klass.__dict__.items()):
            if name.startswith("_") or name in seen or not isinstance(raw, types.FunctionType):
                continue
            seen.add(name)
            code = raw.__code__
            required = code.co_argcount - len(raw.__defaults__ or ())
            kw_required = [k for k in code.co_varnames[code.co_argcount:code.co_argcount + code.co_kwonlyargcount]
                           if k not in (raw.__kwdefaults__ or {})]
            if required == 1 and not kw_required:
                out.append(name)
    return out


def observers_for(cls, is_target):
    """Expressions (over {R}) that show an object's state, least disturbing first."""
    out = []
    seen = set()
    for klass in cls.__mro__:
        if not is_target(getattr(klass, "__module__", "")):
            continue
        for name, raw in sorted(klass.__dict__.items()):
            if isinstance(raw, property) and not name.startswith("_") and name not in seen:
                seen.add(name)
                out.append("{R}." + name)
    if isinstance(cls, type) and issubclass(cls, cabc.Sized):
        out.append("len({R})")
    if isinstance(cls, type) and issubclass(cls, cabc.Iterable):
        out.append("list({R})")
    if any(is_target(getattr(k, "__module__", "")) and "__repr__" in k.__dict__ for k in cls.__mro__):
        out.append("repr({R})")
    if isinstance(cls, type) and issubclass(cls, cabc.Mapping):
        out.append("dict({R})")
    return out


# ---------------------------------------------------------------- replay

class _StepTimeout(BaseException):
    pass


def _on_alarm(signum, frame):
    raise _StepTimeout()


MESSAGE_CHARS = 300  # longer messages are kept as a prefix, marked "cut"


def _exception(exc):
    t = type(exc)
    msg = str(exc)
    return {"k": "raise", "type": [t.__module__, t.__qualname__], "msg": msg[:MESSAGE_CHARS],
            "cut": len(msg) > MESSAGE_CHARS,
            "bases": [[b.__module__, b.__qualname__] for b in t.__mro__[1:]
                      if b.__module__ == "builtins"][:4]}


def _run_step(step, ns, timeout):
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        if step.get("expr") is not None:
            value = eval(step["expr"], ns)
            try:
                return {"k": "ok", "v": literal_source(value, results=True)}
            except NotLiteral as exc:
                return {"k": "ok", "v": None, "opaque": exc.args[0]}
            except Exception as exc:  # a broken __eq__/__iter__ of a result
                return {"k": "ok", "v": None, "opaque": repr(exc)[:80]}
        exec(step["src"], ns)
        return {"k": "ok"}
    except _StepTimeout:
        return {"k": "timeout"}
    except (Exception, AssertionError, SystemExit) as exc:  # noqa: B014 (asserts and a CLI's
        return _exception(exc)                               # sys.exit are outcomes too)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _run_program(prog, seed, timeout):
    random.seed(seed)
    ns = literal_namespace()
    ns["__name__"] = "amplify_replay"
    outcomes = []
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        for imp in prog["imports"]:
            exec(imp, ns)
    except _StepTimeout:
        return [{"k": "timeout"}]
    except Exception as exc:
        return [dict(_exception(exc), k="import-error")]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    for step in prog["steps"]:
        out = _run_step(step, ns, timeout)
        outcomes.append(out)
        if out["k"] == "timeout":
            break
    return outcomes


def _same(a, b):
    if a.get("k") != b.get("k"):
        return False
    if a["k"] == "ok":
        return a.get("v") == b.get("v") and a.get("opaque") == b.get("opaque")
    if a["k"] == "raise":
        return a["type"] == b["type"] and a["msg"] == b["msg"]
    return True


def replay(cfg):
    signal.signal(signal.SIGALRM, _on_alarm)
    timeout = float(cfg["step_timeout"])
    deadline = time.monotonic() + float(cfg["seconds"])
    seeds = cfg.get("seeds") or [1]
    max_timeouts = int(cfg.get("max_timeouts") or 0)
    timeouts = 0
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 3000))
    with open(cfg["out"], "w", encoding="utf-8") as out:
        modules = {}
        for prog in cfg["programs"]:
            if time.monotonic() > deadline or (max_timeouts and timeouts >= max_timeouts):
                out.write(json.dumps({"id": prog["id"], "skipped": "budget"}) + "\n")
                continue
            started = time.monotonic()
            runs = [_run_program(prog, s, timeout) for s in seeds]
            timeouts += sum(1 for run in runs if run and run[-1]["k"] == "timeout")
            for name in cfg.get("modules") or ():
                if name not in modules and name in sys.modules:
                    modules[name] = getattr(sys.modules[name], "__file__", None)
                    out.write(json.dumps({"modules": {name: modules[name]}}) + "\n")
            first = runs[0]
            for other in runs[1:]:
                for i, o in enumerate(first):
                    if i >= len(other) or not _same(o, other[i]):
                        o["unstable"] = True
            out.write(json.dumps({"id": prog["id"], "outcomes": first,
                                  "s": round(time.monotonic() - started, 4)}, sort_keys=True) + "\n")
            out.flush()

