"""Generators used by the tests: fixed test files with known gate outcomes."""

from __future__ import annotations

from killbench.generation import CandidateTest

# For the fixture target `basic`: one test per gate outcome.
KILLS_BOUNDARY = '''
from basic import is_big


def test_threshold_is_not_big():
    assert is_big(10) is False
'''
FAILS_ON_CLEAN = '''
from basic import is_big


def test_wrong():
    assert is_big(10) is True
'''
DOES_NOT_DETECT = '''
from basic import is_big


def test_far_from_boundary():
    assert is_big(100) is True
'''
GAMING = '''
import inspect
import basic


def test_reads_source():
    assert "n > THRESHOLD" in inspect.getsource(basic.is_big)
'''
SYNTAX_ERROR = "def test_broken(:\n    pass\n"
NO_TESTS = "def helper():\n    return 1\n"
# passes only under PYTHONHASHSEED=0 (hash("killbench") % 1000 is 346 there): a test that
# passes on the gate's machine with one seed and fails on a user's with another
FLAKY = '''
from basic import is_big


def test_flaky():
    assert hash("killbench") % 1000 == 346
    assert is_big(10) is False
'''
# the second test needs the first to have run: reversed, it fails
ORDER_DEPENDENT = '''
from basic import is_big

STATE = []


def test_first():
    STATE.append(1)
    assert is_big(11)


def test_second():
    assert STATE == [1]
    assert is_big(10) is False
'''
HANGS = '''
from basic import is_big


def test_hangs():
    while True:
        pass
'''


class FixedTests:
    """Writes the tests above for the task `is_big: n > THRESHOLD -> n >= THRESHOLD`."""

    name = "fixed-tests"
    version = "1"
    needs_model = False

    def generate(self, ctx):
        task = next(t for t in ctx.tasks if t.function == "is_big" and t.replacement == "n >= THRESHOLD")
        for src in (KILLS_BOUNDARY, FAILS_ON_CLEAN, DOES_NOT_DETECT, GAMING, SYNTAX_ERROR,
                    NO_TESTS, FLAKY, HANGS, ORDER_DEPENDENT):
            yield CandidateTest(src, task=task.id)


class FewTests:
    """Two tests for the same task: one the gate keeps, one it rejects."""

    name = "few-tests"
    version = "1"
    needs_model = False

    def generate(self, ctx):
        task = next(t for t in ctx.tasks if t.function == "is_big" and t.replacement == "n >= THRESHOLD")
        for src in (KILLS_BOUNDARY, DOES_NOT_DETECT):
            yield CandidateTest(src, task=task.id)


VACUOUS = '''
from basic import is_big, parse_positive, sign


def test_is_big_runs():
    assert is_big(11) is not None


def test_parse_positive_runs():
    assert parse_positive("5") is not None


def test_sign_runs():
    assert sign(5) is not None
'''


class VacuousTests:
    """Imports, calls, asserts only existence: a probe, not a specification."""

    name = "vacuous"
    version = "1"
    needs_model = False

    def generate(self, ctx):
        yield CandidateTest(VACUOUS, task=None)


class CrashesAfterOne:
    """Writes one good test, then fails the way a model API can."""

    name = "crashes-after-one"
    version = "1"
    needs_model = False

    def generate(self, ctx):
        task = next(t for t in ctx.tasks if t.function == "is_big" and t.replacement == "n >= THRESHOLD")
        yield CandidateTest(KILLS_BOUNDARY, task=task.id)
        raise ConnectionError("the model server went away")


def _task(ctx):
    return next(t for t in ctx.tasks if t.function == "is_big" and t.replacement == "n >= THRESHOLD")


class YieldsText:
    """A plug-in bug: yields a string where a CandidateTest belongs."""

    name = "yields-text"
    version = "1"
    needs_model = False

    def generate(self, ctx):
        yield CandidateTest(KILLS_BOUNDARY, task=_task(ctx).id)
        yield "def test_x():\n    assert True\n"


class Sleeper:
    """Writes one good test, then never returns: stopped by its wall-time budget."""

    name = "sleeper"
    version = "1"
    needs_model = False

    def generate(self, ctx):
        import time

        yield CandidateTest(KILLS_BOUNDARY, task=_task(ctx).id)
        time.sleep(3600)
        yield CandidateTest(DOES_NOT_DETECT, task=_task(ctx).id)


class GateHog:
    """Calls ctx.gate in a loop with a new test each time, until its gate calls are spent."""

    name = "gate-hog"
    version = "1"
    needs_model = False
    asked = 0

    def generate(self, ctx):
        task = _task(ctx)
        for i in range(1000):
            GateHog.asked = i + 1
            ctx.gate(f"from basic import is_big\n\n\ndef test_{i}():\n    assert is_big({i + 11})\n", task.id)
        yield CandidateTest(KILLS_BOUNDARY, task=task.id)


CALLS: list[str] = []


class RecordsCalls:
    """Writes nothing; records that generate() was called (a run stopped before it must not)."""

    name = "records-calls"
    version = "1"
    needs_model = False

    def generate(self, ctx):
        CALLS.append(ctx.target if hasattr(ctx, "target") else "called")
        return iter(())
