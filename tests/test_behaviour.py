"""The non-behavioural rules: each category on the edits it names, and the behavioural edits
next to them left alone (an exit code, a compared string, a deleted log call)."""

from __future__ import annotations

import textwrap

import pytest

from killbench.mutate import enumerate_file


def reasons(src: str, operators=None) -> dict[tuple[str, str], str | None]:
    out = {}
    for c in enumerate_file("m.py", textwrap.dedent(src), operators):
        out[(c.mutant.operator, c.mutant.original)] = c.mutant.unkillable
    return out


def nb(category: str) -> str:
    return "non-behavioural: " + category


@pytest.mark.parametrize("src, edit, category", [
    ('__all__ = ["f", "g"]\n', ("string-constant", '"f"'), "__all__"),
    ('__all__ = []\n__all__ += ["f"]\n', ("string-constant", '"f"'), "__all__"),
    ('__all__ = []\n__all__.append("f")\n', ("delete-statement", '__all__.append("f")'), "__all__"),
    ('__version__ = "1.2"\n', ("string-constant", '"1.2"'), "metadata"),
    ('from typing import TypeVar\nT = TypeVar("T", bound="Base")\n', ("string-constant", '"T"'),
     "type-variable name"),
    ('from typing import TypeVar\nT = TypeVar("T", bound="Base")\n', ("string-constant", '"Base"'),
     "annotation"),
    ('from typing import cast\ndef f(x):\n    return cast("int", x)\n', ("string-constant", '"int"'),
     "annotation"),
    ('def f(x: "A") -> int:\n    return x\n', ("string-constant", '"A"'), "annotation"),
    ('X = 1\n"""the meaning of X"""\n', ("string-constant", '"""the meaning of X"""'), "docstring"),
    ('def main(p):\n    p.add_argument("--n", help="how many")\n', ("string-constant", '"how many"'),
     "docstring"),
    ('def f(x):\n    raise ValueError("bad value: %r" % (x,))\n', ("string-constant", '"bad value: %r"'),
     "message text"),
    ('def f(x):\n    raise ValueError("bad {}".format(x))\n', ("string-constant", '"bad {}"'),
     "message text"),
    ('import warnings\ndef f():\n    warnings.warn("old", DeprecationWarning)\n',
     ("string-constant", '"old"'), "message text"),
    ('import logging\nlog = logging.getLogger(__name__)\ndef f(x):\n    log.debug("got %s", x)\n',
     ("string-constant", '"got %s"'), "message text"),
    ('def f(x):\n    assert x, "x must be set"\n    return x\n', ("string-constant", '"x must be set"'),
     "message text"),
    ('from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import os\n',
     ("negate-condition", "TYPE_CHECKING"), "type-checking guard"),
    ('def f():\n    raise ValidationError("Not valid.", field_name="email")\n', ("string-constant", '"Not valid."'),
     "message text"),
    ('import warnings\ndef f():\n    warnings.warn(DeprecationWarning("old api"))\n', ("string-constant", '"old api"'),
     "message text"),
    ('import logging\ndef f():\n    logging.getLogger(__name__).warning("careful")\n', ("string-constant", '"careful"'),
     "message text"),
    ('import typing\ndef f(v):\n    return typing.cast("int", v)\n', ("string-constant", '"int"'), "annotation"),
])
def test_each_category(src, edit, category):
    assert reasons(src)[edit] == nb(category)


@pytest.mark.parametrize("src, edit", [
    ('import sys\ndef f():\n    raise SystemExit(2)\n', ("number-constant", "2")),  # an exit code
    ('def f(s):\n    return s == "on"\n', ("string-constant", '"on"')),  # a compared string
    ('def f():\n    return "mode"\n', ("string-constant", '"mode"')),  # a returned string
    ('import logging\nlog = logging.getLogger(__name__)\ndef f(x):\n    log.warning("w")\n    return x\n',
     ("delete-statement", 'log.warning("w")')),  # the record disappears: caplog sees it
    ('import warnings\ndef f():\n    warnings.warn("old", DeprecationWarning)\n',
     ("delete-statement", 'warnings.warn("old", DeprecationWarning)')),
    ('def f(x):\n    raise KeyError(lookup(x, "default"))\n', ("string-constant", '"default"')),
    ('def f(x):\n    msg = "bad"\n    raise ValueError(msg)\n', ("string-constant", '"bad"')),  # judgment
    # a factory's argument is a key (marshmallow's make_error("invalid") looks up a message)
    ('class F:\n    def f(self):\n        raise self.make_error("invalid")\n', ("string-constant", '"invalid"')),
    ('def f():\n    raise OSError(2, "No such file", "path.txt")\n', ("string-constant", '"path.txt"')),
    ('def f():\n    raise ValidationError("Not valid.", field_name="email")\n', ("string-constant", '"email"')),
    ('def f():\n    raise ValidationError({"email": ["bad"]})\n', ("string-constant", '"email"')),
    ('def f():\n    raise Error(code="E1")\n', ("string-constant", '"E1"')),
    ('def f(d, k):\n    raise d.get(k, "missing")\n', ("string-constant", '"missing"')),
    ('def f(x):\n    raise ValueError("%(a)s" % {"a": x})\n', ("string-constant", '"a"')),
    ('def f(conv, v):\n    return conv.cast("int", v)\n', ("string-constant", '"int"')),
    ('def f(Thing):\n    return Thing(description="on")\n', ("string-constant", '"on"')),
    ('from dataclasses import dataclass\n@dataclass\nclass C:\n    registry: "ClassVar[dict]" = 0\n',
     ("string-constant", '"ClassVar[dict]"')),
    ('import functools\n@functools.singledispatch\ndef f(x):\n    return 0\n@f.register\ndef _(x: "int"):\n    return 1\n',
     ("string-constant", '"int"')),
    ('from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import os\nelse:\n    os = None\n',
     ("negate-condition", "TYPE_CHECKING")),  # the else branch stops running
    ('def f():\n    __version__ = "x"\n    return __version__\n', ("string-constant", '"x"')),
])
def test_behavioural_edits_stay_tasks(src, edit):
    assert reasons(src)[edit] is None


def test_a_category_switched_off_is_a_task_again():
    src = '__all__ = ["f"]\ndef f(x):\n    raise ValueError("no")\n'
    off = {(c.mutant.operator, c.mutant.original): c.mutant.unkillable
           for c in enumerate_file("m.py", src, None, non_behavioural=frozenset({"__all__"}))}
    assert off[("string-constant", '"f"')] == nb("__all__")
    assert off[("string-constant", '"no"')] is None
