"""Disguises: the same behaviour as the file, another text, size and AST; checked on every
source file of this repository at several anchors and seeds (fast)."""

from __future__ import annotations

import ast
import random
from pathlib import Path

import pytest

from killbench.disguise import disguise

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted(p for d in ("killbench", "generators", "tests") for p in (ROOT / d).rglob("*.py"))

SRC = '''"""doc"""
from __future__ import annotations

LIMIT = 10


def is_big(value):
    """True above LIMIT."""
    return value > LIMIT


def peek():
    return locals()


class Box:
    size = 3

    def area(self):
        return self.size * self.size
'''


def _code(text: str):
    return compile(text, "m.py", "exec")


def _functions(code):
    out = {}
    for c in code.co_consts:
        if hasattr(c, "co_code"):
            out[c.co_qualname] = c
            out.update(_functions(c))
    return out


def test_a_function_gets_a_new_local_so_its_bytecode_changes():
    line = SRC.splitlines().index("    return value > LIMIT") + 1
    out = disguise(SRC, line, random.Random(1))
    assert out != SRC and len(out) != len(SRC)
    before, after = _functions(_code(SRC)), _functions(_code(out))
    assert before["is_big"].co_code != after["is_big"].co_code
    assert len(after["is_big"].co_varnames) == len(before["is_big"].co_varnames) + 1
    # every other function compiles to the same bytecode
    assert all(before[k].co_code == after[k].co_code for k in before if k != "is_big")
    ns_a, ns_b = {}, {}
    exec(_code(SRC), ns_a)
    exec(_code(out), ns_b)
    assert [ns_b["is_big"](v) for v in (9, 10, 11)] == [ns_a["is_big"](v) for v in (9, 10, 11)]
    assert ns_b["is_big"].__doc__ == ns_a["is_big"].__doc__ == "True above LIMIT."


def test_a_function_that_sees_its_locals_gets_a_dead_block_instead():
    line = SRC.splitlines().index("    return locals()") + 1
    out = disguise(SRC, line, random.Random(2))
    ns = {}
    exec(_code(out), ns)
    assert ns["peek"]() == {}
    assert ast.dump(ast.parse(out)) != ast.dump(ast.parse(SRC))


def test_module_and_class_level_anchors_keep_the_namespace():
    for anchor in ("LIMIT = 10", "    size = 3"):
        line = SRC.splitlines().index(anchor) + 1
        out = disguise(SRC, line, random.Random(3))
        ns_a, ns_b = {}, {}
        exec(_code(SRC), ns_a)
        exec(_code(out), ns_b)
        assert sorted(ns_a) == sorted(ns_b)
        assert vars(ns_a["Box"]).keys() == vars(ns_b["Box"]).keys()


def test_a_decorated_first_statement_keeps_its_decorator():
    # the statement goes before the decorator, not between it and its `def` (boltons' queueutils)
    src = 'class Q:\n    """doc"""\n    @staticmethod\n    def pop(b):\n        return b.pop()\n'
    for seed in range(20):
        out = disguise(src, 5, random.Random(seed))
        ns = {}
        exec(_code(out), ns)
        assert ns["Q"].pop([1, 2]) == 2


def test_two_disguises_differ():
    line = SRC.splitlines().index("    return value > LIMIT") + 1
    a, b = (disguise(SRC, line, random.Random(s)) for s in (5, 6))
    assert a != b


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_file_here_disguises_soundly(path):
    text = path.read_text(encoding="utf-8")
    n = len(text.splitlines()) or 1
    rng = random.Random(path.name)
    for anchor in {1, n // 2 or 1, n}:
        out = disguise(text, anchor, rng)  # raises if the AST changed beyond its statement
        assert out != text
        compile(out, str(path), "exec")
