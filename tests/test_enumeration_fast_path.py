"""Enumeration compiles a mutant's statement alone before (when that is not conclusive) its
whole file (`mutate._Statements`). Whether a mutant compiles, its error text and its
"identical bytecode" flag must come out exactly as with the whole file compiled for every
mutant: checked here on source written to trip the shortcut (name mangling, zero-argument
super, a `__future__` import, decorators, statements sharing a line, class attributes, syntax
errors only the module shows) and on killbench's own modules. bench/enumerate_equivalence.py
runs the same comparison over every pin."""

from __future__ import annotations

import ast
from pathlib import Path
from unittest import mock

import pytest

from killbench import mutate

TRICKY = '''\
from __future__ import annotations
import functools
X = 1; Y = X + 2
if X > 0: Z = 3
else: Z = 4


def deco(f):
    return f


class Base:
    __slots__ = ()
    LIMIT = 10 if X else 20

    @deco
    @functools.lru_cache(maxsize=None)
    def __hidden(self, a: int = 5) -> list[int]:
        return [a + 1, self.__other(a - 1)]

    def __other(self, b):
        "not a docstring" if b else None
        return b * 2 if b > 0 else-b

    async def later(self, n):
        total = 0
        for i in range(n):
            if i % 2 == 0:
                continue
            total += i
        return total

    @property
    def name(self): return "base" if self.LIMIT > 5 else ""


class Child(Base):
    def method(self, *args, **kwargs):
        value = super().name
        while value and len(value) > 2:
            value = value[:-1]
            break
        try:
            return value or None
        finally:
            pass

    def closure(self):
        count = 0

        def inc():
            nonlocal count
            count += 1
            return count
        return inc


def gen(n: int) -> int:
    "a docstring"
    x: int = n
    "a bare string"
    yield from range(x)
    return x is None and x == 0
'''


def _enumerate(path: str, text: str, whole_file: bool, rules=mutate.behaviour.ALL) -> dict[str, tuple]:
    ops = mutate.default_operators() + mutate.held_out_operators()
    if whole_file:
        with mock.patch.object(mutate._Statements, "differs", lambda self, p: False):
            cands = list(mutate.enumerate_file(path, text, ops, rules))
    else:
        cands = list(mutate.enumerate_file(path, text, ops, rules))
    return {c.mutant.id: (c.compiles, c.error, c.mutant.unkillable) for c in cands}


@pytest.mark.parametrize("rules", [mutate.behaviour.ALL, frozenset()], ids=["rules-on", "rules-off"])
def test_tricky_source_enumerates_the_same_both_ways(rules):
    fast, whole = _enumerate("tricky.py", TRICKY, False, rules), _enumerate("tricky.py", TRICKY, True, rules)
    assert len(whole) > 50
    assert fast == whole
    # the source exercises each outcome the shortcut must leave to the whole file
    assert any(not v[0] and "SyntaxError" in v[1] for v in whole.values())
    if not rules:  # with the rules on, bare strings are set aside before any compile
        assert any(v[2] == mutate.UNKILLABLE_IDENTICAL for v in whole.values())


def test_a_mutant_that_breaks_only_in_its_module_is_found_by_the_whole_file():
    # `nonlocal count` needs the enclosing function: a statement-alone compile of `closure`
    # is fine, so any mutant that removes `count = 0` must still compile or fail as the module says
    text = "def outer():\n    count = 0\n    def inner():\n        nonlocal count\n        return count\n    return inner\n"
    assert _enumerate("m.py", text, False) == _enumerate("m.py", text, True)


def test_an_edit_before_a_future_import_is_judged_by_the_whole_file():
    # a docstring that stops being one makes the `__future__` import after it a SyntaxError
    # in the module, though the edited statement compiles alone
    text = '"""doc"""\nfrom __future__ import annotations\nX = 1\n'
    with mock.patch.object(mutate, "HANDLERS", {**mutate.HANDLERS, ast.Expr: _docstring_to_call}):
        fast, whole = _enumerate("m.py", text, False, frozenset()), _enumerate("m.py", text, True, frozenset())
    assert fast == whole
    assert [v[0] for v in whole.values()].count(False) == 1


def _docstring_to_call(src, node, ctx):
    if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
        start, end = src.span(node)
        yield mutate.Proposal(start, end, "print()", "string-constant", node)


@pytest.mark.parametrize("name", ["mutate.py", "operators.py", "behaviour.py", "runner.py"])
def test_killbench_modules_enumerate_the_same_both_ways(name):
    path = Path(mutate.__file__).parent / name
    text = path.read_text()
    assert _enumerate(name, text, False) == _enumerate(name, text, True)


# where the module context changes the answer (found by a review): each must enumerate as
# the whole file does
CONTEXT_CASES = {
    "dead after a top-level raise": 'raise ImportError("no")\nx = 1\ndef f():\n    return 2\n',
    "dead after an endless loop": 'while True:\n    pass\nx = 1\ndef f():\n    return x + 2\n',
    "dead method after a raise in the class": 'class A:\n    raise ImportError\n    def f(self):\n        return 2\n',
    "a bare string that alone would be a docstring": 'x = 1\n"""Timeout."""\n"Section: " + "helpers"\n',
    # the string mutant of an escaped "\u00e9" writes the character itself, which ascii cannot hold
    "a coding cookie other than UTF-8": '# coding: ascii\nx = "\\u00e9"\ny = x + "d"\n',
    "a global after a use": 'try:\n    pass\nexcept KeyError:\n    pass\nglobal Exception\n',
}


@pytest.mark.parametrize("rules", [mutate.behaviour.ALL, frozenset()], ids=["rules-on", "rules-off"])
@pytest.mark.parametrize("case", sorted(CONTEXT_CASES))
def test_the_module_context_decides_where_it_can_change_the_answer(case, rules):
    text = CONTEXT_CASES[case]
    assert _enumerate("m.py", text, False, rules) == _enumerate("m.py", text, True, rules)
