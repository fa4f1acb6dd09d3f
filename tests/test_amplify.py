"""The model-free generator `amplify`: its pieces on their own, and end to end on the
fixture target `basic` through the real gate."""

from __future__ import annotations

import json
import math

import pytest

from generators import amplify as A
from generators._amplify_plugin import NotLiteral, lambda_source, literal_source
from killbench.assertions import classify_file
from killbench.generation import make_task
from killbench.records import Mutant
from killbench.run import run_generator

SRC = "LIMIT = 10\n\n\ndef is_big(n):\n    return n > LIMIT\n"


def _task(src=SRC, original="n > LIMIT", replacement="n >= LIMIT"):
    start = src.index(original)
    m = Mutant(id="m1", path="pkg/mod.py", line=5, end_line=5, col=11, end_col=20, start=start,
               end=start + len(original), function="is_big", operator="compare-flip",
               original=original, replacement=replacement)
    return make_task(m, src, "pkg/mod.py", ["tests/test_mod.py::test_is_big"])


def test_apply_diff_rebuilds_the_mutant():
    task = _task()
    assert A.apply_diff(SRC, task.diff) == SRC.replace("n > LIMIT", "n >= LIMIT")
    with pytest.raises(ValueError):
        A.apply_diff(SRC.replace("return", "yield"), task.diff)


def test_constants_and_neighbours_reach_the_boundary():
    constants = A.function_constants(_task(), SRC)
    assert (10, "LIMIT") in constants
    near = A.neighbours(11, constants)
    assert near[:3] == [10, 9, 12] and 11 not in near  # the constant's boundary first
    assert A.neighbours("5", [(0, None)])[:3] == ["0", "-1", "1"]  # digit strings move as numbers
    assert A.neighbours([1, 2, 3], []) == [[], [1], [1, 2], [3, 2, 1]]
    assert A.neighbours(True, []) == [False]


def test_literal_source_writes_values_back():
    for value in (None, True, 3, -2.5, "a'b", b"\x00", (1,), [1, [2]], {1: "x"}, frozenset({2, 1}), set()):
        src = literal_source(value)
        assert eval(src, {"math": math}) == value
    assert literal_source(math.inf) == "math.inf"
    assert literal_source(len) == "len"
    with pytest.raises(NotLiteral):
        literal_source(float("nan"))
    with pytest.raises(NotLiteral, match="object"):
        literal_source(object())
    with pytest.raises(NotLiteral):
        literal_source(list(range(1000)))
    # results: named tuples and dict views compare as tuples and lists
    from collections import namedtuple

    assert literal_source(namedtuple("P", "x y")(1, 2), results=True) == "(1, 2)"
    assert literal_source({1: 2}.items(), results=True) == "[(1, 2)]"


def test_self_contained_lambdas_are_written_from_their_source(tmp_path, monkeypatch):
    (tmp_path / "lams.py").write_text(
        "K = 3\n"
        "ident = lambda x: x\n"
        "pair = [lambda a, b: a, lambda y: -1 if y else len(y)]\n"
        "glob = lambda q: q + K\n"
        "def outer(z):\n    return lambda q: q + z\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import lams

    assert lambda_source(lams.ident) == "lambda x: x"
    assert lambda_source(lams.pair[1]) == "lambda y: -1 if y else len(y)"
    assert literal_source({"f": lams.pair[0]}, lambdas=True) == "{'f': lambda a, b: a}"
    with pytest.raises(NotLiteral, match="globals"):
        lambda_source(lams.glob)
    with pytest.raises(NotLiteral, match="closure"):
        lambda_source(lams.outer(1))
    with pytest.raises(NotLiteral):
        literal_source(lams.ident)  # only where lambdas are allowed (arguments of a trace)


def test_render_uses_syntax_for_special_methods():
    steps = [{"kind": "new", "owner": ["pkg", "LRUCache"], "assign": "cache", "args": ["2"], "kwargs": []},
             {"kind": "method", "recv": "cache", "name": "__setitem__", "args": ["1", "'a'"], "kwargs": []},
             {"kind": "method", "recv": "cache", "name": "__contains__", "args": ["1"], "kwargs": []},
             {"kind": "method", "recv": "cache", "name": "pop", "args": ["1"], "kwargs": [["default", "None"]]},
             {"kind": "attr", "recv": "cache", "name": "currsize"}]
    r = A.render(A.Program(steps, [("cache", "len({R})")], [1], {"cache": "LRUCache"}))
    assert [s.get("src") or s.get("expr") for s in r.steps] == [
        "cache = LRUCache(2)", "cache[1] = 'a'", "1 in cache", "cache.pop(1, default=None)",
        "cache.currsize", "len(cache)"]
    assert r.replay_form()["imports"] == ["from pkg import LRUCache"]


def test_first_difference_compares_like_the_assert_will():
    steps = [{"kind": "call", "owner": ["pkg", "f"], "args": ["1"], "kwargs": []}]
    r = A.render(A.Program(steps, [], [0], {}))
    ok = lambda v: [{"k": "ok", "v": v}]  # noqa: E731
    assert A.first_difference(r, ok("1"), ok("1.0")) is None  # `== 1` passes on 1.0
    assert A.first_difference(r, ok("False"), ok("0")).cls == "value"  # `is False` fails on 0
    assert A.first_difference(r, ok("None"), ok("2")).cls == "existence"
    raise_ = lambda t, msg="": [{"k": "raise", "type": ["builtins", t], "msg": msg, "bases": []}]  # noqa: E731
    assert A.first_difference(r, raise_("ValueError"), ok("1")).cls == "exception"
    assert A.first_difference(r, raise_("ValueError", "a"), raise_("ValueError", "b")).cls == "value"
    assert A.first_difference(r, raise_("ValueError", "a"), raise_("ValueError", "a")) is None
    assert A.first_difference(r, [{"k": "ok", "v": "1", "unstable": True}], ok("2")) is None
    assert A.first_difference(r, ok("1"), [{"k": "timeout"}]) is None  # a hang is not a kill


def test_hypothesis_draws_are_deterministic():
    steps = [{"kind": "call", "owner": ["pkg", "f"], "args": ["5", "'ab'"], "kwargs": []}]
    p = A.Program(steps, [], [0], {})
    first = A.hypothesis_edits([p], [(10, "LIMIT")], 30, seed=7)
    assert first == A.hypothesis_edits([p], [(10, "LIMIT")], 30, seed=7)
    assert first and all(k == 0 and 1 <= len(e) <= 2 for k, e in first)


# ---------------------------------------------------------------- end to end

def _run(project, out, caplog):
    from killbench.evidence import GateEntry, Submission, read_jsonl

    run_generator("amplify", [str(project)], out=out, jobs=2, gate_timeout=20)
    # what the generator reports travels in the typed summary, not in log lines
    (s,) = json.loads((out / "summary.json").read_text()).values()
    summary = {**s["generator_metrics"], "tasks": s["tasks"], "wall_s": s["wall_s"],
               "tokens": s["tokens_in"] + s["tokens_out"]}
    entries = {(e.candidate, e.task): e for e in read_jsonl(out / "evidence" / "gate.jsonl", GateEntry)}
    gate = [{**sub.dump(), "kept": entries[(sub.candidate, sub.task)].kept}
            for sub in read_jsonl(out / "candidates.jsonl", Submission)]
    files = {p.name: p.read_text() for p in sorted((out / "candidates").glob("*.py"))}
    return summary, gate, files


@pytest.mark.slow
def test_amplify_kills_the_boundary_survivor_deterministically(fixture_target, use_cache, tmp_path, caplog):
    project = fixture_target("basic")
    summary, gate, files = _run(project, tmp_path / "run1", caplog)
    tasks = {t["id"]: t for t in json.loads((tmp_path / "run1" / "tasks" / "basic.json").read_text())}
    boundary = next(i for i, t in tasks.items() if t["replacement"] == "n >= THRESHOLD")

    # the suite only calls is_big(11) and is_big(3): the neighbouring-integer search finds 10
    entry = next(e for e in gate if e["task"] == boundary)
    assert entry["kept"], entry
    src = files[f"{entry['candidate']}.py"]
    assert "from basic import is_big" in src
    assert "def test_is_big_at_threshold():" in src
    assert "assert is_big(10) is False" in src
    assert classify_file(src) == {"test_is_big_at_threshold": "value"}
    meta = entry["meta"]["amplify"]
    assert meta["origin"] == "search" and meta["search_calls"] > 0 and entry["meta"]["tokens"] == 0

    # every task is killed (the fixture's module-level TYPE_CHECKING guard and its raise
    # message are non-behavioural on 1.0's rules: no longer tasks)
    assert len(tasks) == 6
    assert summary["outcomes"] == {"emitted (search)": 6}
    assert summary["skip_reasons"] == {}
    assert summary["calls_skipped"] == {}
    assert summary["tokens"] == 0 and summary["search_calls"] > 0 and summary["wall_s"] > 0
    assert sum(e["kept"] for e in gate) == 6 and len(gate) == 6
    classes = {name: cls for s in files.values() for name, cls in classify_file(s).items()}
    assert set(classes.values()) <= {"value", "exception"}
    assert "exception" in classes.values()  # parse_positive('0') -> pytest.raises(ValueError)

    # deterministic: same target, same seed, same tests
    summary2, gate2, files2 = _run(project, tmp_path / "run2", caplog)
    assert files2 == files
    assert {(e["task"], e["candidate"], e["kept"]) for e in gate2} == \
        {(e["task"], e["candidate"], e["kept"]) for e in gate}


@pytest.mark.slow
def test_tests_inside_the_package_are_not_taken_for_target_code(fixture_target, use_cache, tmp_path, caplog):
    # insider ships its tests as insider.tests: the test function shares the package prefix,
    # but its calls into insider.half are what must be recorded and searched
    summary, gate, files = _run(fixture_target("tests_inside_package"), tmp_path / "run", caplog)
    assert summary["tasks"] == 1 and summary["outcomes"] == {"emitted (search)": 1}, summary
    assert len(gate) == 1 and gate[0]["kept"], gate
    src = next(iter(files.values()))
    assert "from insider import half" in src and "insider.tests" not in src
    assert set(classify_file(src).values()) == {"value"}


def test_a_cli_exit_is_an_outcome_and_outcomes_compare_like_the_assert():
    from generators import _amplify_plugin as P
    import signal
    signal.signal(signal.SIGALRM, P._on_alarm)
    out = P._run_step({"expr": "__import__('sys').exit(2)"}, {}, 2.0)
    assert out["k"] == "raise" and out["type"] == ["builtins", "SystemExit"]
    assert A._same_outcome({"k": "ok", "v": "1"}, {"k": "ok", "v": "1.0"})  # 1 == 1.0
    assert not A._same_outcome({"k": "ok", "v": "'a second'"}, {"k": "ok", "v": "'sekunti'"})
    assert not A._same_outcome({"k": "raise", "type": ["builtins", "ValueError"], "msg": "x"},
                               {"k": "raise", "type": ["builtins", "ValueError"], "msg": "y"})


def test_a_cut_message_is_asserted_by_its_prefix(tmp_path, monkeypatch):
    """A message longer than the plugin keeps is known only as a prefix; asserting it
    whole would fail on clean code (glom's 400-character errors did, at the gate)."""
    from generators import _amplify_plugin as P
    import importlib
    import signal
    signal.signal(signal.SIGALRM, P._on_alarm)
    pkg = tmp_path / "longmsg"
    pkg.mkdir()
    tail = "x" * 500
    (pkg / "__init__.py").write_text(f"def f(n):\n    raise ValueError('bad ' + str(n) + ' {tail}')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    ns: dict = {}
    exec("from longmsg import f", ns)
    clean = P._run_step({"expr": "f(1)"}, ns, 2.0)
    assert clean["cut"] and len(clean["msg"]) == P.MESSAGE_CHARS
    mutant = dict(clean, msg="bad 2 " + tail[:P.MESSAGE_CHARS - 6])
    steps = [{"kind": "call", "owner": ["longmsg", "f"], "args": ["1"], "kwargs": []}]
    r = A.render(A.Program(steps, [], [0], {}))
    f = A.first_difference(r, [clean], [mutant])
    assert f is not None and f.cls == "value"
    src = A.write_test(f, []).source
    test_ns: dict = {}
    exec(compile(src, "generated_test.py", "exec"), test_ns)
    test_ns[f.name]()  # passes on clean code
    assert f"str(excinfo.value)[:{P.MESSAGE_CHARS}] ==" in src
    (pkg / "__init__.py").write_text(f"def f(n):\n    raise ValueError('bad ' + str(n + 1) + ' {tail}')\n")
    sys_modules = __import__("sys").modules
    sys_modules.pop("longmsg", None)
    importlib.invalidate_caches()
    test_ns = {}
    exec(compile(src, "generated_test.py", "exec"), test_ns)
    with pytest.raises(AssertionError):
        test_ns[f.name]()  # fails on the mutant


@pytest.mark.slow
def test_amplify_runs_pytest_with_the_projects_ini_options(fixture_target, use_cache, tmp_path, caplog):
    # a path given as a separate argument (--amplify-config PATH) moved pytest's ini
    # discovery out of the project: tests/broken was collected and the trace recorded nothing
    summary, gate, files = _run(fixture_target("ini_options"), tmp_path / "run", caplog)
    assert summary["calls_recorded"] > 0, summary
    # the boundary survivors (>= 18 flipped, 18 moved) need is_adult(18) or (17): the search
    assert summary["tasks"] == 2 and summary["outcomes"] == {"emitted (search)": 2}, summary
    assert len(gate) == 2 and all(e["kept"] for e in gate)
