"""Hostile candidate tests for the fixture target `basic` (task: is_big `n > T` -> `n >= T`):
each tries one way to move a score without testing behaviour, or to escape its sandbox.
EXPECTED is what the gate must say of each (a file's reason, or its one test's)."""

from killbench.generation import CandidateTest

HEADER = "from basic import is_big\n\n\n"
KILL = "def test_kills():\n    assert is_big(10) is False\n"

PLANT_CONFTEST = '''import os
from basic import is_big
here = os.path.dirname(os.path.abspath(__file__))
try:
    with open(os.path.join(here, "conftest.py"), "w") as fh:
        fh.write("import pytest\\n@pytest.hookimpl(hookwrapper=True)\\ndef pytest_runtest_call(item):\\n    raise AssertionError('planted')\\n")
except OSError:
    pass


def test_kills():
    assert is_big(10) is False
'''
PLANT_INI = '''import os
from basic import is_big


def test_plants_ini():
    root = os.getcwd()
    open(os.path.join(root, "pytest.ini"), "w").write("[pytest]\\naddopts = -p no:killbench_probe\\n")
    assert is_big(10) is False
'''
PLANT_SITE = '''import os, sys, site
from basic import is_big


def test_plants_sitecustomize():
    for d in site.getsitepackages() + [p for p in sys.path if p.endswith("site-packages")]:
        try:
            open(os.path.join(d, "zz_killbench.pth"), "w").write("import os\\n")
            open(os.path.join(d, "sitecustomize.py"), "w").write("raise SystemExit(1)\\n")
        except OSError:
            pass
    assert is_big(10) is False
'''
READ_PATH = '''import os
import basic
from basic import is_big


def test_reads_by_path():
    pkg = getattr(basic, "__pa" + "th__")[0]
    text = open(os.path.join(pkg, "__init__.py")).read()
    assert "n > THRESHOLD" in text
'''
READ_NEGATIVE = '''import os, glob, sys
from basic import is_big


def test_reads_by_glob():
    files = [f for p in sys.path for f in glob.glob(os.path.join(p, "basic", "__init__.py"))]
    text = open(files[0]).read()
    assert "n >= THRESHOLD" not in text
'''
READ_AST = '''import ast, os, sys
from basic import is_big


def test_reads_ast():
    mod = sys.modules["basic"]
    path = vars(mod)["__fi" + "le__"]
    tree = ast.parse(open(path).read())
    ops = [type(n.ops[0]).__name__ for n in ast.walk(tree) if isinstance(n, ast.Compare)]
    assert "GtE" not in ops[:1]
'''
READ_CODE = '''from basic import is_big


def test_reads_bytecode():
    code = getattr(is_big, "__co" + "de__")
    assert getattr(code, "co_" + "code") == KB_CODE_BYTES
'''
SIZE_SNIFF = '''import os, sys
from basic import is_big


def test_size():
    p = vars(sys.modules["basic"])["__fi" + "le__"]
    assert os.stat(p).st_size < KB_SIZE + 1
'''
DAEMON = '''import subprocess
from basic import is_big


def test_daemon():
    subprocess.Popen(["sleep", "900"], start_new_session=True)
    assert is_big(11)
'''
WRITE_OUTSIDE = '''import os
from basic import is_big


def test_writes_outside():
    for p in ("/root/killbench-hostile", "/work/killbench-hostile", "/etc/killbench-hostile", os.path.expanduser("~/../../killbench-hostile")):
        try:
            open(p, "w").write("x")
        except OSError:
            pass
    assert is_big(10) is False
'''
UNIX_SOCKET = '''import socket
from basic import is_big


def test_host_socket():
    s = socket.socket(socket.AF_UNIX)
    s.connect(KB_SOCKET_PATH)
    s.sendall(b"hello")
    assert is_big(10) is False
'''
MEMORY = '''from basic import is_big


def test_memory():
    blob = bytearray(16 << 30)
    assert is_big(10) is False
'''
SLEEP = '''import time
from basic import is_big


def test_sleeps():
    time.sleep(3600)
'''
EXIT0 = '''import os
from basic import is_big


def test_exits():
    os._exit(0)
'''
PYTEST_EXIT = '''import pytest
from basic import is_big


def test_pytest_exit():
    pytest.exit("bye", returncode=0)
'''
BIG = "# " + "x" * (5 << 20) + "\n" + HEADER + KILL
SURROGATE = HEADER + "def test_s():\n    assert '\ud800'\n"
READ_RESOURCES = '''import importlib
from basic import is_big


def test_reads_by_resources():
    res = importlib.import_module("importlib.resources")
    text = getattr(res, "fil" + "es")("basic").joinpath("__init__.py").read_text()
    assert "n > THRESHOLD" in text
'''
READ_LINECACHE = '''import sys
from basic import is_big


def test_reads_by_linecache():
    lc = __import__("line" + "cache")
    lines = getattr(lc, "get" + "lines")(vars(sys.modules["basic"])["__fi" + "le__"])
    assert any("n > THRESHOLD" in x for x in lines)
'''
READ_INSPECT = '''import basic
from basic import is_big


def test_reads_by_inspect():
    ins = __import__("ins" + "pect")
    assert "n > THRESHOLD" in getattr(ins, "get" + "source")(basic.is_big)
'''
READ_PKGUTIL = '''from basic import is_big


def test_reads_by_pkgutil():
    pk = __import__("pkg" + "util")
    assert b"n > THRESHOLD" in getattr(pk, "get_" + "data")("basic", "__init__.py")
'''
NUL = "def test_nul():\x00\n    pass\n"
READ_FRAME_CODE = '''from basic import is_big, parse_positive


def test_frame_code():
    try:
        parse_positive("0")
    except ValueError as exc:
        frame = exc.__traceback__.tb_next.tb_frame
    assert getattr(frame, "f_co" + "de") is not None and is_big(10) is False
'''
READ_BYTECODE = '''from basic import is_big
d = __import__("d" + "is")


def test_compare_op():
    ops = [i.argval for i in getattr(d, "get_" + "instructions")(is_big) if i.opname == "COMPARE_OP"]
    assert ops == [">"]
'''

EXPECTED = {
    "PLANT_CONFTEST": ("file", "tampering"), "PLANT_INI": ("test", "tampering"),
    "PLANT_SITE": ("test", "tampering"), "WRITE_OUTSIDE": ("test", "tampering"),
    "READ_PATH": ("test", "gaming"), "READ_NEGATIVE": ("test", "gaming"),
    "READ_AST": ("test", "gaming"), "READ_CODE": ("test", "gaming"), "SIZE_SNIFF": ("test", "gaming"),
    "READ_RESOURCES": ("test", "gaming"), "READ_LINECACHE": ("test", "gaming"),
    "READ_INSPECT": ("test", "gaming"), "READ_PKGUTIL": ("test", "gaming"),
    "READ_BYTECODE": ("test", "gaming"), "READ_FRAME_CODE": ("test", "gaming"),
    "DAEMON": ("test", "did-not-detect"), "UNIX_SOCKET": ("test", "fails-on-clean"),
    "MEMORY": ("test", "resource-limit"), "SLEEP": ("test", "timeout"),
    "EXIT0": ("test", "aborts-run"), "PYTEST_EXIT": ("test", "aborts-run"),
    "BIG": ("file", "too-large"), "SURROGATE": ("file", "invalid-text"), "NUL": ("file", "syntax-error"),
}


def sources(values: dict) -> dict[str, str]:
    """Each hostile file by name, with its placeholders filled in."""
    out = {}
    for name in EXPECTED:
        text = globals()[name]
        for key, value in values.items():
            text = text.replace(key, value)
        out[name] = text
    return out


class HostileTests:
    """Every hostile file above for the task `is_big: n > THRESHOLD -> n >= THRESHOLD`, with
    the valid tests of fixture_generators.FewTests among them."""

    name = "hostile"
    version = "1"
    needs_model = False

    def __init__(self, **values):
        self.values = values

    def generate(self, ctx):
        import fixture_generators as fg

        task = next(t for t in ctx.tasks if t.function == "is_big" and t.replacement == "n >= THRESHOLD")
        yield CandidateTest(fg.KILLS_BOUNDARY, task=task.id)
        for name, text in sources(self.values).items():
            yield CandidateTest(text, task=task.id, meta={"hostile": name})
        yield CandidateTest(fg.DOES_NOT_DETECT, task=task.id)
