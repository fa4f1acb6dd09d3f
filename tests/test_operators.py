"""Operators and mutant enumeration on small snippets: exact spans, every mutant compiles
or is reported invalid, unkillable reasons, no docstrings, stable ids."""

from __future__ import annotations

import ast
import textwrap

import pytest

from killbench.mutate import (UNKILLABLE_FUTURE_ANNOTATION, UNKILLABLE_IDENTICAL,
                              UNKILLABLE_LOCAL_ANNOTATION, UNKILLABLE_TYPE_CHECKING, apply,
                              default_operators, enumerate_file, held_out_operators)


def mutants(src: str, operators=None):
    return list(enumerate_file("m.py", textwrap.dedent(src), operators))


def pairs(src: str, operators=None):
    return sorted((c.mutant.operator, c.mutant.original, c.mutant.replacement)
                  for c in mutants(src, operators))


@pytest.mark.parametrize("src, operator, original, replacement", [
    ("x = a < b\n", "compare-flip", "a < b", "a <= b"),
    ("x = a >= b\n", "compare-flip", "a >= b", "a > b"),
    ("x = a == b\n", "compare-flip", "a == b", "a != b"),
    ("x = a is not b\n", "compare-flip", "a is not b", "a is b"),
    ("x = a not in b\n", "compare-flip", "a not in b", "a in b"),
    ("x = (a)in(b)\n", "compare-flip", "(a)in(b)", "(a)not in(b)"),
    ("x = a and b\n", "boolean-swap", "a and b", "a or b"),
    ("x = a or b or c\n", "boolean-swap", "a or b or c", "a and b and c"),
    ("x = not (a or\n     b)\n", "remove-not", "not (a or\n     b)", "(a or\n     b)"),
    ("x = -y\n", "remove-unary-minus", "-y", "y"),
    ("x = a + b\n", "arith-swap", "a + b", "a - b"),
    ("x = a // b\n", "arith-swap", "a // b", "a / b"),
    ("x = a % b\n", "arith-swap", "a % b", "a / b"),
    ("x = a ** b\n", "arith-swap", "a ** b", "a * b"),
    ("x += 2\n", "augassign-swap", "x += 2", "x -= 2"),
    ("x *= 2\n", "augassign-to-assign", "x *= 2", "x = 2"),
    ("x = 0\n", "number-constant", "0", "1"),
    ("x = 1\n", "number-constant", "1", "0"),
    ("x = 41\n", "number-constant", "41", "42"),
    ("x = 2.5\n", "number-constant", "2.5", "3.5"),
    ("x = True\n", "bool-constant", "True", "False"),
    ("x = 'ab'\n", "string-constant", "'ab'", "'XXabXX'"),
    ("x = ''\n", "string-constant", "''", "'XX'"),
    ("x = b'ab'\n", "string-constant", "b'ab'", "b'XXabXX'"),
    ("def f():\n    return g()\n", "return-none", "return g()", "return None"),
    ("def f():\n    raise E()\n", "delete-raise", "raise E()", "pass"),
    ("f(1)\n", "delete-statement", "f(1)", "pass"),
    ("for i in r:\n    break\n", "break-continue", "break", "continue"),
    ("while c:\n    continue\n", "break-continue", "continue", "break"),
    ("if a > 1:\n    pass\n", "negate-condition", "a > 1", "not (a > 1)"),
    ("while x:\n    pass\n", "negate-condition", "x", "not (x)"),
])
def test_operator(src, operator, original, replacement):
    got = [(c.mutant.original, c.mutant.replacement) for c in mutants(src)
           if c.mutant.operator == operator]
    assert (original, replacement) in got
    for c in mutants(src):
        assert c.compiles, (c.mutant, c.error)


def test_spans_are_exact_and_apply_round_trips():
    src = textwrap.dedent('''\
        # comment with é
        def f(a, b):
            s = "é" + str(a < b)
            return s if a else -b
        ''')
    data = src.encode()
    for c in mutants(src):
        m = c.mutant
        assert data[m.start:m.end].decode() == m.original
        new = apply(data, m)
        assert new != data
        assert new.startswith(data[:m.start]) and new.endswith(data[m.end:])


def test_docstrings_are_not_mutated_but_other_strings_are():
    got = pairs('''\
        """module doc"""
        def f():
            """function doc"""
            return "value"
        class C:
            """class doc"""
        ''', ["string-constant"])
    assert [o for _, o, _ in got] == ['"value"']


def test_type_checking_block_is_unkillable():
    ms = mutants('''\
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            X = 1
        Y = 1
        ''', ["number-constant"])
    reasons = {c.mutant.line: c.mutant.unkillable for c in ms}
    assert reasons == {3: UNKILLABLE_TYPE_CHECKING, 4: None}


def test_annotations_under_future_import_are_unkillable():
    ms = mutants('''\
        from __future__ import annotations
        def f(x: "A" = "d") -> "B":
            y: "C" = 2
            return x
        ''', ["string-constant"])
    reasons = {c.mutant.original: c.mutant.unkillable for c in ms}
    assert reasons == {'"A"': UNKILLABLE_FUTURE_ANNOTATION, '"B"': UNKILLABLE_FUTURE_ANNOTATION,
                       '"C"': UNKILLABLE_LOCAL_ANNOTATION, '"d"': None}


def test_evaluated_annotations_are_non_behavioural_unless_switched_off():
    from killbench.mutate import enumerate_file

    src = 'def f(x: "A") -> "B":\n    return x\n'
    ms = mutants(src, ["string-constant"])
    assert [c.mutant.unkillable for c in ms] == ["non-behavioural: annotation"] * 2
    off = list(enumerate_file("m.py", src, ["string-constant"], non_behavioural=frozenset()))
    assert [c.mutant.unkillable for c in off] == [None, None]


def test_identical_bytecode_is_unkillable():
    # a bare string statement is dropped by the compiler: the mutant cannot change anything
    # (with the non-behavioural rules on, it is set aside as a docstring before compiling)
    src = 'def f():\n    x = 1\n    "not a docstring"\n    return x\n'
    assert [c.mutant.unkillable for c in mutants(src, ["string-constant"])] == ["non-behavioural: docstring"]
    from killbench.mutate import enumerate_file

    off = list(enumerate_file("m.py", src, ["string-constant"], non_behavioural=frozenset()))
    assert [c.mutant.unkillable for c in off] == [UNKILLABLE_IDENTICAL]


def test_token_merge_is_reported_invalid_not_dropped():
    ms = mutants("r = 1 if a else-1\n", ["remove-unary-minus"])
    assert len(ms) == 1 and not ms[0].compiles and "SyntaxError" in ms[0].error


def test_fstring_internals_are_skipped():
    assert pairs('x = f"{a + 1}"\n') == []


def test_function_qualnames():
    ms = mutants('''\
        X = 1
        class C:
            def m(self):
                def inner():
                    return 2
                return 3
        ''', ["number-constant"])
    assert {c.mutant.original: c.mutant.function for c in ms} == {
        "1": None, "2": "C.m.<locals>.inner", "3": "C.m"}


def test_ids_are_stable_and_unique():
    src = "def f(a):\n    return a + 1 if a > 0 else a - 1\n"
    a = [c.mutant.id for c in mutants(src)]
    b = [c.mutant.id for c in mutants(src)]
    assert a == b and len(set(a)) == len(a)


def test_held_out_operators_are_not_in_the_default_set():
    assert not set(default_operators()) & set(held_out_operators())
    got = pairs('''\
        def f(a=1, b=None):
            try:
                return a[1:b]
            except KeyError:
                return 0
        ''', held_out_operators())
    ops = {o for o, _, _ in got}
    assert ops == {"default-argument", "handler-broaden", "handler-reraise", "slice-bound"}


def test_every_mutant_of_a_real_module_compiles():
    import killbench.harness as mod

    src = open(mod.__file__, encoding="utf-8").read()
    ms = mutants(src)
    assert len(ms) > 100
    bad = [c for c in ms if not c.compiles]
    assert bad == []
    for c in ms[:50]:
        ast.parse(apply(src.encode(), c.mutant))


def test_assignment_and_call_argument_families():
    from killbench.mutate import enumerate_file

    src = ("class A:\n    def __init__(self, key):\n        self.key = key\n        a, b = 1, 2\n"
           "        print(key, 2, sep='-')\n        f(*args)\n        g(None)\n")
    got = sorted((c.mutant.operator, c.mutant.replacement) for c in enumerate_file(
        "m.py", src, ["assign-none", "call-argument-none", "call-argument-remove"]))
    assert got == [
        ("assign-none", "None"),  # self.key = None; `a, b = ...` is left alone (None would not unpack)
        ("call-argument-none", "print(None, 2, sep='-')"),
        ("call-argument-none", "print(key, 2, sep=None)"),
        ("call-argument-none", "print(key, None, sep='-')"),
        ("call-argument-remove", "g()"),
        ("call-argument-remove", "print(2, sep='-')"),
        ("call-argument-remove", "print(key, 2)"),
        ("call-argument-remove", "print(key, sep='-')"),
    ]  # f(*args): where its arguments go is not known, so nothing; g(None) is not made None again
    from killbench.operators import OPERATORS

    assert not any(OPERATORS[n].default for n in ("assign-none", "call-argument-none",
                                                   "call-argument-remove"))
