"""The warm child compiles only the top-level def or class that holds a mutant: the code
objects it swaps in must be exactly those the whole mutated file compiles to."""

import inspect
import types

import pytest

from killbench.locations import PROBE_DIR
from killbench.records import Mutant
from killbench.warm import _layout, segment_of

SAMPLE = b'''"""A module with what compiles differently out of context."""
from __future__ import annotations

import functools

LIMIT = 3


def deco(f):
    @functools.wraps(f)
    def inner(*a, **k):
        return f(*a, **k)
    return inner


@deco
def plain(x: list[int], y=LIMIT) -> dict[str, int]:
    total = 0
    for v in x:
        if v > y:
            total += v
    return {"total": total}


class Base:
    def hello(self) -> str:
        return "base"


class Child(Base):
    __secret = 1

    def hello(self) -> str:
        return super().hello() + str(self.__secret)

    class Inner:
        def deep(self, n: int) -> int:
            def helper(k: int) -> int:
                return k * n
            return helper(2)


async def fetch(n):
    async def one():
        return n
    return await one()
'''


@pytest.fixture
def child(monkeypatch):
    monkeypatch.syspath_prepend(str(PROBE_DIR))
    import killbench_warm

    return killbench_warm


def _all_codes(code, out):
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            out.setdefault(const.co_qualname, []).append(const)
            _all_codes(const, out)
    return out


def _shape(code):
    """Everything a code object runs by, nested code included (marshal's bytes also record
    which objects happen to be shared, which says nothing about what runs)."""
    return (code.co_code, code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars,
            code.co_flags, code.co_firstlineno, code.co_linetable, code.co_exceptiontable,
            code.co_qualname, code.co_name, code.co_filename, code.co_argcount,
            code.co_posonlyargcount, code.co_kwonlyargcount, code.co_stacksize, code.co_nlocals,
            tuple(code.co_positions()),
            tuple(_shape(c) if isinstance(c, types.CodeType) else (type(c).__name__, repr(c))
                  for c in code.co_consts))


def _mutant(source: bytes, function: str, original: bytes, replacement: bytes) -> Mutant:
    start = source.index(original)
    return Mutant(id="x", path="m.py", line=source[:start].count(b"\n") + 1, end_line=0, col=0,
                  end_col=0, start=start, end=start + len(original), function=function,
                  operator="t", original=original.decode(), replacement=replacement.decode())


def _both(child, source: bytes, mutant: Mutant):
    """The code objects of the whole mutated file and of its segment, by qualified name."""
    mutated = source[:mutant.start] + mutant.replacement.encode() + source[mutant.end:]
    end = mutant.start + len(mutant.replacement.encode())
    segment = segment_of(_layout(source), mutant)
    assert segment is not None
    whole = child.mutated_code(mutated, "/t/m.py", mutant.start, end)
    part = child.mutated_code(mutated, "/t/m.py", mutant.start, end, segment)
    return _all_codes(whole[0], {}), _all_codes(part[0], {}), part


@pytest.mark.parametrize("function, original, replacement", [
    ("plain", b"v > y", b"v <= y"),
    ("deco.<locals>.inner", b"return f(*a, **k)", b"return None"),
    ("Child.hello", b'super().hello() + str', b'super().hello() - str'),
    ("Child.Inner.deep.<locals>.helper", b"k * n", b"k / n"),
    ("fetch.<locals>.one", b"return n", b"return None"),
    # two lines become one: every part after it moves up a line and 33 bytes
    ("plain", b"if v > y:\n            total += v", b"pass"),
])
def test_segment_compiles_to_the_same_code_as_the_whole_file(child, function, original, replacement):
    whole, part, (code, tree, starts, start, end) = _both(
        child, SAMPLE, _mutant(SAMPLE, function, original, replacement))
    pieces = function.split(".<locals>.")
    for i in range(1, len(pieces) + 1):
        name = ".<locals>.".join(pieces[:i])
        assert len(whole[name]) == len(part[name]) == 1
        assert _shape(part[name][0]) == _shape(whole[name][0]), name
    # the mutation's place in the compiled part is where its syntax tree has it
    assert child._in_body(tree, function, start, end, starts)


def test_the_module_scope_is_kept(child):
    """The compiler reads the module's scope: a call on an imported module compiles to other
    bytecode than one on any other name (CPython 3.11+), and future features change how a
    function builds the annotations of those it defines. The part keeps the file's imports
    and module-level statements; with them left out as well, the code differs, which the
    comparison above must catch."""
    m = _mutant(SAMPLE, "Child.Inner.deep.<locals>.helper", b"k * n", b"k / n")
    segment = segment_of(_layout(SAMPLE), m)
    mutated = SAMPLE[:m.start] + b"k / n" + SAMPLE[m.end:]
    end = m.start + len(b"k / n")
    whole = _all_codes(child.mutated_code(mutated, "/t/m.py", m.start, end)[0], {})
    right = _all_codes(child.mutated_code(mutated, "/t/m.py", m.start, end, segment)[0], {})
    imports = [[SAMPLE.index(t), SAMPLE.index(t) + len(t)]
               for t in (b"from __future__ import annotations", b"import functools")]
    wrong = _all_codes(child.mutated_code(mutated, "/t/m.py", m.start, end,
                                          {"blank": imports + segment["blank"]})[0], {})
    name = "Child.Inner.deep"
    assert _shape(right[name][0]) == _shape(whole[name][0])
    assert _shape(wrong[name][0]) != _shape(whole[name][0])
    d = _mutant(SAMPLE, "deco.<locals>.inner", b"return f(*a, **k)", b"return None")
    mutated = SAMPLE[:d.start] + b"return None" + SAMPLE[d.end:]
    end = d.start + len(b"return None")
    whole = _all_codes(child.mutated_code(mutated, "/t/m.py", d.start, end)[0], {})
    wrong = _all_codes(child.mutated_code(mutated, "/t/m.py", d.start, end,
                                          {"blank": imports + segment_of(_layout(SAMPLE), d)["blank"]})[0], {})
    if _compiler_reads_imports():
        assert _shape(wrong["deco"][0]) != _shape(whole["deco"][0])


def _compiler_reads_imports() -> bool:
    """Whether this CPython compiles a call on an imported module differently (3.11 does)."""
    def code(src):
        return _all_codes(compile(src, "<t>", "exec", dont_inherit=True), {})["f"][0]
    return _shape(code("import m\ndef f():\n    m.g()\n")) != _shape(code("def f():\n    m.g()\n"))


def test_apply_in_place_swaps_the_live_function_and_falls_back_to_the_whole_file(
        child, tmp_path, monkeypatch):
    """Through the child's own apply, with the server's index of live functions: the part
    compiles (a def's range takes in a `;` after its last statement), and a part that does
    not compile (here a range cut mid-statement on purpose) falls back to the whole file;
    either way the live function runs the mutant."""
    clean = b"import os\n\n\ndef g():\n    return os.sep and 1\n\n\ndef f(): return 2;\n"
    path = tmp_path / "m_apply.py"
    path.write_bytes(clean)
    namespace: dict = {}
    exec(compile(clean, str(path), "exec"), namespace)
    monkeypatch.setattr(child, "_FUNCTIONS", child._function_index())
    m = _mutant(clean, "g", b"1", b"5")
    segment = segment_of(_layout(clean), m)
    assert segment == {"blank": [[clean.index(b"def f"), len(clean) - 1]]}
    cut = {"blank": [[clean.index(b"def f"), clean.index(b"def f") + 5]]}
    for part, value in ((segment, 5), (cut, 7)):
        mutated = clean[:m.start] + str(value).encode() + clean[m.end:]
        path.write_bytes(mutated)
        compiled = child.mutated_code(mutated, str(path), m.start, m.start + 1, part)
        assert (compiled is None) == (part is cut)
        assert child.apply_in_place(str(path), "g", m.start, m.start + 1, part)
        assert namespace["g"]() == value and namespace["f"]() == 2


@pytest.mark.parametrize("module", ["textwrap", "dataclasses", "functools", "argparse", "json.decoder"])
def test_every_function_of_real_modules(child, module):
    """Every function of a few standard-library modules, compiled from its top-level part,
    is the code the whole file compiles to (an unchanged mutant: replacement = original)."""
    mod = __import__(module, fromlist=["_"])
    source = inspect.getsource(mod).encode("utf-8")
    layout = _layout(source)
    assert layout is not None
    whole = _all_codes(compile(source, "/t/m.py", "exec", dont_inherit=True), {})
    checked = 0
    for name, codes in whole.items():
        if len(codes) != 1 or "<" in name.split(".")[-1]:
            continue
        code = codes[0]
        line = code.co_firstlineno
        lines = source.split(b"\n")
        if line >= len(lines) or not lines[line].strip():
            continue
        start = sum(len(x) + 1 for x in lines[:line]) + (len(lines[line]) - len(lines[line].lstrip()))
        m = Mutant(id="x", path="m.py", line=line + 1, end_line=0, col=0, end_col=0, start=start,
                   end=start + 1, function=name, operator="t",
                   original=source[start:start + 1].decode(), replacement=source[start:start + 1].decode())
        segment = segment_of(layout, m)
        if segment is None:
            continue  # an enclosing name not unique, or not inside a top-level def or class
        part = _all_codes(child.mutated_code(source, "/t/m.py", start, start + 1, segment)[0], {})
        assert _shape(part[name][0]) == _shape(code), (module, name)
        checked += 1
    assert checked >= 10


def test_no_part_when_a_name_is_defined_twice_or_the_file_is_odd():
    twice = b"def f():\n    return 1\n\n\ndef f():\n    return 2\n"
    assert segment_of(_layout(twice), _mutant(twice, "f", b"return 2", b"return 3")) is None
    latin = b"# -*- coding: latin-1 -*-\ndef f():\n    return 1\n"
    assert _layout(latin) is None
    assert _layout(b"\xef\xbb\xbfdef f():\n    return 1\n") is None  # a byte-order mark
    assert _layout(b"def f():\r    return 1\r") is None  # lone carriage returns
    assert _layout(b"def f():\r\n    return 1\r\n") is not None
    nested_if = b"import sys\nif sys:\n    def g():\n        return 1\n"
    assert segment_of(_layout(nested_if), _mutant(nested_if, "g", b"return 1", b"return 2")) is None
