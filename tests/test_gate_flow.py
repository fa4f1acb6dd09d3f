"""The gate's own sequence (place, clean run, the drawn phases, the mutant written and put
back, the file removed) on an in-process sandbox whose "pytest" runs the candidate's test
functions against whatever module text the gate left in place. The real sandbox and its
isolation are tested by the slow suite; this one shows what the gate asks of it (fast)."""

from __future__ import annotations

import ast
import contextlib
import random
import signal
import sys
import threading
import time
import types
from pathlib import Path
from types import SimpleNamespace

import pytest

from killbench import gate
from killbench.errors import HarnessError
from killbench.gate import CLEAN, HASHSEED, MUTANT, MUTANT_DISGUISED, NEUTRAL, ORDER, TASK_PHASES, Gate
from killbench.mutate import apply
from killbench.records import Mutant, RunReport, TestEvent

MODULE = "def f(x):\n    return x + 1\n"
PLUS = MODULE.index("+")
MUT = Mutant(id="m1", path="pkg/mod.py", line=2, end_line=2, col=13, end_col=14, start=PLUS,
             end=PLUS + 1, function="f", operator="arith-swap", original="+", replacement="-")


class Hang(BaseException):
    """Raised by a scripted test to stand for a test that never ends."""


class ScriptedSandbox:
    trusted = False
    isolation = "scripted"

    def __init__(self, root: Path, tests=("tests",), after=None):
        self.root = root / "box"
        self.tree = self.root / "tree"
        clean = root / "clean"
        for base in (self.tree, clean):
            (base / "pkg").mkdir(parents=True)
            (base / "pkg" / "mod.py").write_text(MODULE)
            (base / "tests").mkdir()
        spec = SimpleNamespace(tests=list(tests))
        self.target = SimpleNamespace(tree=clean, spec=spec)
        self.calls: list[dict] = []
        self.moved_now = False
        self.after = after or (lambda report, call: None)
        self.added: list[str] = []

    # the narrow interface the gate uses
    def add_file(self, path: Path, content: bytes) -> None:
        path.write_bytes(content)
        self.added.append(path.relative_to(self.tree).as_posix())

    def remove_file(self, path: Path) -> None:
        path.unlink(missing_ok=True)

    def write(self, path: str, content: bytes) -> None:
        (self.tree / path).write_bytes(content)

    def restore(self) -> None:
        (self.tree / "pkg/mod.py").write_bytes((self.target.tree / "pkg/mod.py").read_bytes())

    @contextlib.contextmanager
    def moved(self):
        self.moved_now = True
        try:
            yield
        finally:
            self.moved_now = False

    def contains(self, file) -> bool:
        return bool(file) and str(file).startswith(str(self.root))

    def run_pytest(self, args, *, select, exclude, timeout, limits, hashseed, order, candidates):
        (rel,) = args
        text = (self.tree / "pkg/mod.py").read_text()
        call = {"select": select, "hashseed": hashseed, "order": order, "moved": self.moved_now,
                "module": text, "candidates": list(candidates), "timeout": timeout}
        self.calls.append(call)
        report = RunReport(returncode=0, timed_out=False, wall_s=0.12345678, started=True,
                           finished=True, exitstatus=0, argv=["pytest", rel], isolation=self.isolation)
        mod = types.ModuleType("pkg.mod")
        exec(compile(text, "pkg/mod.py", "exec"), mod.__dict__)
        saved = {k: sys.modules.get(k) for k in ("pkg", "pkg.mod")}
        sys.modules["pkg"], sys.modules["pkg.mod"] = types.ModuleType("pkg"), mod
        try:
            ns = {"__name__": "candidate", "HASHSEED": hashseed, "MOVED": self.moved_now,
                  "Hang": Hang, "STATE": [], "MODULE_TEXT": text}
            try:
                exec(compile((self.tree / rel).read_text(), rel, "exec"), ns)
            except Exception as exc:
                report.collect_errors = [{"nodeid": rel, "message": f"{type(exc).__name__}: {exc}"}]
                report.returncode = report.exitstatus = 2
                self.after(report, call)
                return report, None
            names = [n for n, v in ns.items() if n.startswith("test") and callable(v)]
            ids = [f"{rel}::{n}" for n in names]
            if select is not None:
                ids = [i for i in ids if i in select]
            if order == "reverse":
                ids.reverse()
            report.collected = len(ids)
            for nodeid in ids:
                report.begun.append(nodeid)
                report.tests.append(TestEvent(nodeid, "setup", "passed", None, False, False, 0.0))
                try:
                    ns[nodeid.split("::")[1]]()
                    outcome, exc_type = "passed", None
                except Hang:
                    report.timed_out, report.returncode, report.finished = True, None, False
                    break
                except Exception as exc:
                    outcome, exc_type = "failed", f"builtins.{type(exc).__name__}"
                    report.returncode = report.exitstatus = 1
                report.tests.append(TestEvent(nodeid, "call", outcome, exc_type,
                                              exc_type == "builtins.AssertionError", False, 0.0,
                                              message=f"{nodeid} said no" if outcome == "failed" else ""))
                report.tests.append(TestEvent(nodeid, "teardown", "passed", None, False, False, 0.0))
        finally:
            for k, v in saved.items():
                if v is None:
                    sys.modules.pop(k, None)
                else:
                    sys.modules[k] = v
        self.after(report, call)
        return report, None


CANDIDATE = """from pkg.mod import f

def test_kill():
    assert f(1) == 2

def test_weak():
    assert f(0) is not None

def test_wrong():
    assert f(1) == 3
"""


def verdicts(entry):
    return [(t.nodeid.split("::")[1], t.kept, t.reason, t.stage) for t in entry.tests]


def test_a_task_runs_clean_then_the_five_other_phases_in_a_drawn_order(tmp_path):
    sb = ScriptedSandbox(tmp_path)
    entry = Gate([sb], baseline=None, rng=random.Random(5)).check(CANDIDATE, MUT, target="pkg")
    rel = f"tests/test_killbench_{gate.candidate_id(CANDIDATE)}.py"
    assert sb.added == [rel]
    assert verdicts(entry) == [("test_kill", True, None, MUTANT_DISGUISED),
                               ("test_weak", False, "did-not-detect", MUTANT),
                               ("test_wrong", False, "fails-on-clean", CLEAN)]
    assert entry.target == "pkg" and entry.task == "m1" and entry.unit == "test"
    assert entry.stage == MUTANT_DISGUISED and entry.file_reason is None
    assert entry.message == f"{rel}::test_kill failed in call: builtins.AssertionError\n{rel}::test_kill said no"
    # the order: clean first, then the rest as the gate's rng shuffles them
    rng = random.Random(5)
    draw = random.Random(rng.getrandbits(64))
    order = list(TASK_PHASES[1:])
    draw.shuffle(order)
    seed = str(random.Random(rng.getrandbits(64)).randint(1, 2**32 - 1))
    assert [p.phase for p in entry.phases] == [CLEAN, *order]
    by_phase = dict(zip([p.phase for p in entry.phases], sb.calls))
    assert by_phase[CLEAN]["select"] is None
    alive = [f"{rel}::test_kill", f"{rel}::test_weak"]
    for phase in order:
        assert by_phase[phase]["select"] == alive
    assert {p: c["hashseed"] for p, c in by_phase.items()} == {p: seed if p == HASHSEED else "0"
                                                               for p in TASK_PHASES}
    # each phase records the seed it ran under (verify replays the drawn one)
    assert {p.phase: p.hashseed for p in entry.phases} == {p: c["hashseed"] for p, c in by_phase.items()}
    assert {p: (c["order"], c["moved"]) for p, c in by_phase.items() if c["order"] or c["moved"]} == \
        {ORDER: ("reverse", True)}
    # the module each phase saw
    mutated = apply(MODULE.encode(), MUT).decode()
    for p in (CLEAN, HASHSEED, ORDER):
        assert by_phase[p]["module"] == MODULE
    assert by_phase[MUTANT]["module"] == mutated
    assert by_phase[NEUTRAL]["module"] not in (MODULE, mutated)
    assert by_phase[MUTANT_DISGUISED]["module"] not in (MODULE, mutated)
    assert all(c["candidates"] == [rel] and c["timeout"] == gate.GATE_TIMEOUT for c in sb.calls)
    # the phase records: this sandbox's isolation, rounded timings, each test's outcome
    clean = entry.phases[0]
    assert clean.isolation == "scripted" and clean.duration_s == 0.1235 and clean.argv == ["pytest", rel]
    assert clean.tests[f"{rel}::test_wrong"].status == "failed"
    assert entry.phases[-1].tests.keys() == set(alive)
    # afterwards: the clean module back, the candidate gone
    assert (sb.tree / "pkg/mod.py").read_text() == MODULE
    assert not (sb.tree / rel).exists()
    assert entry.wall_s >= 0.0


def test_a_disguise_keeps_the_behaviour_of_the_text_it_disguises(tmp_path):
    rng = random.Random(1)
    original = MODULE.encode()
    assert Gate._content(CLEAN, original, MUT, rng) is None
    assert Gate._content(HASHSEED, original, MUT, rng) is None
    assert Gate._content(MUTANT, original, None, rng) is None
    assert Gate._content(MUTANT, original, MUT, rng) == apply(original, MUT)
    for phase, want in ((NEUTRAL, 2), (MUTANT_DISGUISED, 0)):
        text = Gate._content(phase, original, MUT, random.Random(3))
        assert text not in (original, apply(original, MUT))
        ns = {}
        exec(text.decode(), ns)
        assert ns["f"](1) == want, phase


def test_without_a_task_only_the_clean_phases_run(tmp_path):
    sb = ScriptedSandbox(tmp_path)
    entry = Gate([sb], baseline=None, rng=random.Random(2)).check(CANDIDATE, None)
    assert sorted(p.phase for p in entry.phases) == sorted([CLEAN, HASHSEED, ORDER])
    assert entry.phases[0].phase == CLEAN
    assert all(c["module"] == MODULE for c in sb.calls)
    # a test with no task is kept when it passes every clean phase; the last one decides
    assert verdicts(entry) == [("test_kill", True, None, ORDER), ("test_weak", True, None, ORDER),
                               ("test_wrong", False, "fails-on-clean", CLEAN)]
    assert entry.stage == CLEAN and entry.task is None


def test_tests_that_depend_on_the_seed_the_order_or_the_directory_are_flaky(tmp_path):
    src = """from pkg.mod import f

def test_seed():
    assert HASHSEED == "0"

def test_first():
    STATE.append(1)

def test_second():
    assert STATE == [1]

def test_dir():
    assert not MOVED

def test_kill():
    assert f(1) == 2
"""
    entry = Gate([ScriptedSandbox(tmp_path)], baseline=None, rng=random.Random(4)).check(src, MUT)
    # verdicts come in node-id order
    assert verdicts(entry) == [("test_dir", False, "flaky", ORDER),
                               ("test_first", False, "did-not-detect", MUTANT),
                               ("test_kill", True, None, MUTANT_DISGUISED),
                               ("test_second", False, "flaky", ORDER),
                               ("test_seed", False, "flaky", HASHSEED)]


def test_a_replayed_hash_seed_is_used_and_recorded_and_the_draws_stay_the_same(tmp_path):
    src = "def test_seed():\n    assert HASHSEED != \"77\"\n"
    drawn_sb, replay_sb = ScriptedSandbox(tmp_path / "a"), ScriptedSandbox(tmp_path / "b")
    drawn = Gate([drawn_sb], baseline=None, rng=random.Random(9)).check(src, MUT)
    replayed = Gate([replay_sb], baseline=None, rng=random.Random(9)).check(src, MUT, hashseeds={HASHSEED: "77"})
    assert verdicts(drawn) == [("test_seed", False, "did-not-detect", MUTANT)]
    assert verdicts(replayed) == [("test_seed", False, "flaky", HASHSEED)]
    assert {p.phase: p.hashseed for p in replayed.phases}[HASHSEED] == "77"
    # the replay consumes the same draw: every other phase ran in the same order on the same text
    assert [p.phase for p in replayed.phases][:len(replayed.phases)] == \
        [p.phase for p in drawn.phases][:len(replayed.phases)]
    assert [c["module"] for c in replay_sb.calls] == [c["module"] for c in drawn_sb.calls][:len(replay_sb.calls)]


def test_a_file_that_fails_to_import_is_rejected_after_one_run(tmp_path):
    sb = ScriptedSandbox(tmp_path)
    entry = Gate([sb], baseline=None).check("import no_such_module\n\ndef test_a():\n    pass\n", MUT)
    assert (entry.unit, entry.file_reason, entry.stage) == ("file", "fails-on-clean", CLEAN)
    assert entry.message.startswith("collection error: tests/test_killbench_")
    assert entry.message.endswith("ModuleNotFoundError: No module named 'no_such_module'")
    assert len(sb.calls) == 1 and entry.tests == [] and len(entry.phases) == 1


@pytest.mark.parametrize("after,reason,stage", [
    (None, "no-test-collected", "collect"),
    (lambda r, c: setattr(r, "timed_out", True), "timeout", CLEAN),
    (lambda r, c: setattr(r, "signal", signal.SIGKILL), "resource-limit", CLEAN),
    (lambda r, c: (setattr(r, "returncode", 3), setattr(r, "finished", False)), "aborts-run", CLEAN),
    (lambda r, c: setattr(r, "returncode", 5), "no-test-collected", "collect"),
    (lambda r, c: setattr(r, "sources_changed", ["tree/pkg/mod.py"]), "tampering", CLEAN),
    (lambda r, c: setattr(r, "audit", [{"kind": "write", "path": "/etc/x"}]), "tampering", CLEAN),
    (lambda r, c: setattr(r, "audit", [{"kind": "read-source", "path": "/x"}]), "no-test-collected", "collect"),
])
def test_a_file_with_no_test_collected_says_why(tmp_path, after, reason, stage):
    sb = ScriptedSandbox(tmp_path, after=after)
    entry = Gate([sb], baseline=None).check("from pkg.mod import f\n", MUT)
    assert (entry.unit, entry.file_reason, entry.stage) == ("file", reason, stage)
    assert len(sb.calls) == 1


@pytest.mark.parametrize("kind,reason,word", [("write", "tampering", "wrote"), ("read-source", "gaming", "read")])
def test_what_a_file_does_at_import_time_rejects_it(tmp_path, kind, reason, word):
    audit = [{"kind": kind, "path": "/b"}, {"kind": kind, "path": "/a"},
             {"kind": "read-source", "path": "/in-a-test", "nodeid": "x::test_kill"}]
    sb = ScriptedSandbox(tmp_path, after=lambda r, c: setattr(r, "audit", audit))
    entry = Gate([sb], baseline=None).check(CANDIDATE, MUT)
    assert (entry.unit, entry.file_reason, entry.stage) == ("file", reason, CLEAN)
    assert entry.message == f"at import time the test file {word} /a, /b"


def test_a_test_the_scan_sees_reading_source_is_gaming_and_not_run_again(tmp_path):
    src = ("import inspect\nfrom pkg import mod\nfrom pkg.mod import f\n\n"
           "def test_reads():\n    assert 'x + 1' in inspect.getsource(mod)\n\n"
           "def test_kill():\n    assert f(1) == 2\n")
    sb = ScriptedSandbox(tmp_path)
    entry = Gate([sb], baseline=None).check(src, MUT)
    assert verdicts(entry) == [("test_kill", True, None, MUTANT_DISGUISED),
                               ("test_reads", False, "gaming", "scan")]
    assert all(c["select"] == [n for n in c["select"] if n.endswith("::test_kill")] for c in sb.calls[1:])
    assert len(sb.calls) == 6


def test_reading_source_at_module_level_rejects_the_file_before_any_run(tmp_path):
    sb = ScriptedSandbox(tmp_path)
    src = "import inspect\nfrom pkg import mod\nTEXT = inspect.getsource(mod)\n\ndef test_a():\n    pass\n"
    entry = Gate([sb], baseline=None).check(src, MUT)
    assert (entry.file_reason, entry.stage) == ("gaming", "scan")
    assert entry.message == ("reads the target's source or bytecode at module level: "
                             "inspect.getsource(mod) (line 3)")
    assert sb.calls == [] and sb.added == []


def test_a_file_that_does_not_parse_names_its_line(tmp_path):
    sb = ScriptedSandbox(tmp_path)
    entry = Gate([sb], baseline=None).check("def test_a():\n    pass\n\ndef (:\n", MUT)
    assert (entry.file_reason, entry.stage) == ("syntax-error", "parse")
    assert entry.message.startswith("SyntaxError: ") and entry.message.endswith("(line 4)")
    assert sb.calls == []


def test_a_run_that_swaps_in_modules_from_outside_the_sandbox_tampered(tmp_path):
    def outside(report, call):
        report.modules = {"pkg.mod": "/elsewhere/mod.py", "pkg": None}
        report.sources_changed = ["tree/x"]

    sb = ScriptedSandbox(tmp_path, after=outside)
    entry = Gate([sb], baseline=None).check(CANDIDATE, MUT)
    assert entry.phases[0].tampered == ["tree/x", "the target's module pkg.mod was /elsewhere/mod.py, "
                                        "outside the sandbox"]
    inside = ScriptedSandbox(tmp_path / "in", after=lambda r, c: setattr(
        r, "modules", {"pkg.mod": str(tmp_path / "in" / "box" / "tree" / "pkg" / "mod.py")}))
    assert Gate([inside], baseline=None).check(CANDIDATE, MUT).phases[0].tampered == []


def test_a_candidate_goes_into_the_first_test_directory_or_the_tree(tmp_path):
    sb = ScriptedSandbox(tmp_path / "a", tests=("test_top.py", "missing", "tests"))
    Gate([sb], baseline=None).check(CANDIDATE, None)
    assert sb.added == [f"tests/test_killbench_{gate.candidate_id(CANDIDATE)}.py"]
    top = ScriptedSandbox(tmp_path / "b", tests=("test_top.py",))
    Gate([top], baseline=None).check(CANDIDATE, None)
    assert top.added == [f"test_killbench_{gate.candidate_id(CANDIDATE)}.py"]


def test_when_no_test_passes_on_clean_nothing_else_runs(tmp_path):
    sb = ScriptedSandbox(tmp_path)
    src = "def test_a():\n    assert False\n\ndef test_b():\n    raise ValueError\n"
    entry = Gate([sb], baseline=None).check(src, MUT)
    assert [v[2] for v in verdicts(entry)] == ["fails-on-clean", "fails-on-clean"]
    assert len(sb.calls) == 1 and entry.stage == CLEAN
    assert entry.message == entry.tests[0].message and "test_a said no" in entry.message


def test_a_hung_test_is_a_timeout(tmp_path):
    src = "from pkg.mod import f\n\ndef test_kill():\n    if f(1) != 2:\n        raise Hang\n"
    entry = Gate([ScriptedSandbox(tmp_path)], baseline=None, rng=random.Random(0)).check(src, MUT)
    assert verdicts(entry) == [("test_kill", False, "timeout", entry.tests[0].stage)]
    assert entry.tests[0].stage in (MUTANT, MUTANT_DISGUISED)


def test_one_sandbox_serves_concurrent_checks_one_at_a_time(tmp_path):
    busy, peak = [], []
    lock = threading.Lock()
    sb = ScriptedSandbox(tmp_path)
    run = sb.run_pytest

    def counted(*a, **kw):
        with lock:
            busy.append(1)
            peak.append(len(busy))
            first = len(peak) == 1
        try:
            if first:  # the other checks reach an empty pool while this one holds the sandbox
                time.sleep(0.3)
            return run(*a, **kw)
        finally:
            with lock:
                busy.pop()

    sb.run_pytest = counted
    g = Gate([sb], baseline=None)
    entries = []
    # daemons: a gate that never hands a sandbox back must fail this test, not hang the run
    threads = [threading.Thread(target=lambda: entries.append(g.check(CANDIDATE, None)), daemon=True)
               for _ in range(3)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 5
    for t in threads:
        t.join(timeout=max(0.0, deadline - time.monotonic()))
    stuck = [t.is_alive() for t in threads]
    if any(stuck):  # free them without the pool's lock, so that no thread outlives the test
        g._pool.extend([sb] * 3)
        for t in threads:
            t.join(timeout=5)
    assert not any(stuck)
    assert len(entries) == 3 and max(peak) == 1
    assert all(e.tests and e.tests[0].kept for e in entries)
    assert g._pool == [sb]


def test_a_trusted_sandbox_is_refused():
    with pytest.raises(HarnessError, match="must be untrusted"):
        Gate([SimpleNamespace(trusted=False, isolation="x"), SimpleNamespace(trusted=True)], baseline=None)


def test_the_innermost_definition_names_a_line():
    tree = ast.parse("X = 1\n\nclass C:\n    def m(self):\n        def inner():\n            pass\n"
                     "        return 1\n\n    y = 2\n\ndef g():\n    pass\n")
    got = {line: gate._function_of_line(tree, line) for line in range(1, 13)}
    assert got == {1: None, 2: None, 3: "C", 4: "m", 5: "inner", 6: "inner", 7: "m", 8: "C", 9: "C",
                   10: None, 11: "g", 12: "g"}


def test_a_node_id_is_in_a_function_by_any_part_after_its_file():
    assert gate._in_function("t.py::test_a", "test_a")
    assert gate._in_function("t.py::TestC::test_a", "TestC")
    assert gate._in_function("t.py::test_a[1-2]", "test_a")
    assert not gate._in_function("t.py::test_ab", "test_a")
    assert not gate._in_function("test_a::test_b", "test_a")


def test_a_phase_record_carries_the_run_as_reported():
    report = RunReport(returncode=1, timed_out=True, wall_s=1.234567, cpu_s=0.987654, max_rss_kb=77,
                       signal=9, finished=True, exitstatus=1, collected=3, argv=["pytest", "a"],
                       isolation="bwrap", collect_errors=[{"nodeid": "t.py", "message": "x" * 700}],
                       audit=[{"kind": "read-source", "path": "/p", "nodeid": "t.py::a"}, {"kind": "write", "path": "/q"}],
                       log_problems=["bad line"])
    run = gate.phase_record(MUTANT, report, ["tree/x"])
    assert (run.phase, run.argv, run.isolation, run.duration_s, run.cpu_s, run.max_rss_kb) == \
        (MUTANT, ["pytest", "a"], "bwrap", 1.2346, 0.9877, 77)
    assert (run.returncode, run.signal, run.timed_out, run.finished, run.exitstatus, run.collected) == \
        (1, 9, True, True, 1, 3)
    assert run.collect_errors == ["t.py: " + "x" * 600]
    assert [(a.kind, a.path, a.nodeid) for a in run.audit] == [("read-source", "/p", "t.py::a"), ("write", "/q", None)]
    assert run.tampered == ["tree/x"] and run.log_problems == ["bad line"]


def test_the_scan_reads_a_file_that_does_not_tokenize():
    # an unterminated string: the comment cannot be blanked, the scan still runs
    assert gate.gaming_matches("x = inspect.getsource(f)  # note\ny = '''\n") == [(1, "inspect.getsource(f)")]


def test_a_check_waits_for_a_sandbox_given_back():
    sb = object()
    g = Gate([], baseline=None)
    got = []
    taker = threading.Thread(target=lambda: got.append(g._take()), daemon=True)
    taker.start()
    taker.join(timeout=0.3)
    assert taker.is_alive() and got == []  # no sandbox free: it waits
    giver = threading.Thread(target=g._give, args=(sb,), daemon=True)
    giver.start()
    giver.join(timeout=3)
    taker.join(timeout=3)
    stuck = giver.is_alive() or taker.is_alive()
    if stuck:  # free them without the pool's lock, so that no thread outlives the test
        g._pool.append(sb)
        giver.join(timeout=3)
        taker.join(timeout=3)
    assert not stuck
    assert got == [sb] and g._pool == []


def test_a_parse_error_without_a_line_and_a_parser_that_gives_up(tmp_path, monkeypatch):
    def raising(exc):
        def parse(source):
            raise exc
        return parse

    sb = ScriptedSandbox(tmp_path)
    monkeypatch.setattr(gate, "parse", raising(ValueError("bad bytes")))
    entry = Gate([sb], baseline=None).check(CANDIDATE, MUT)
    assert (entry.unit, entry.file_reason, entry.stage, entry.message) == \
        ("file", "syntax-error", "parse", "ValueError: bad bytes")
    for exc in (RecursionError("deep"), MemoryError()):
        monkeypatch.setattr(gate, "parse", raising(exc))
        entry = Gate([sb], baseline=None).check(CANDIDATE, MUT)
        assert (entry.unit, entry.file_reason, entry.stage, entry.message) == \
            ("file", "syntax-error", "parse", f"{type(exc).__name__} while parsing")
    assert sb.calls == []


def test_every_module_level_read_is_named(tmp_path):
    src = ("import inspect\nfrom pkg import mod\nA = inspect.getsource(mod)\n"
           "B = inspect.getsource(mod.f)\n\ndef test_a():\n    pass\n")
    entry = Gate([ScriptedSandbox(tmp_path)], baseline=None).check(src, MUT)
    assert entry.message == ("reads the target's source or bytecode at module level: "
                             "inspect.getsource(mod) (line 3); inspect.getsource(mod.f) (line 4)")


class Clock:
    """time.monotonic for the gate: the first reading, then a later one for every other."""

    def __init__(self, first, later):
        self.readings = [first]
        self.later = later

    def monotonic(self):
        return self.readings.pop() if self.readings else self.later


def test_a_check_records_its_wall_time_to_the_millisecond(tmp_path, monkeypatch):
    monkeypatch.setattr(gate, "time", Clock(100.0, 101.23456))
    entry = Gate([ScriptedSandbox(tmp_path)], baseline=None).check(CANDIDATE, MUT)
    assert entry.wall_s == 1.235 and entry.file_reason is None
    monkeypatch.setattr(gate, "time", Clock(100.0, 102.34567))
    entry = Gate([ScriptedSandbox(tmp_path / "2")], baseline=None).check("def (:\n", MUT)
    assert entry.wall_s == 2.346 and entry.file_reason == "syntax-error"


def test_a_candidate_goes_into_the_first_of_several_test_directories(tmp_path):
    sb = ScriptedSandbox(tmp_path, tests=("missing", "tests", "more"))
    (sb.tree / "more").mkdir()
    Gate([sb], baseline=None).check(CANDIDATE, MUT)
    assert sb.added == [f"tests/test_killbench_{gate.candidate_id(CANDIDATE)}.py"]


def _on_clean(change):
    """An `after` hook that edits the clean run's report only."""
    def after(report, call):
        if call["select"] is None:
            change(report, call["candidates"][0])
    return after


def test_only_the_candidates_own_tests_are_judged_from_what_began_or_reported(tmp_path):
    def foreign(report, rel):
        other = "tests/test_other.py::test_x"
        report.begun.append(other)
        report.tests.append(TestEvent(other, "call", "passed", None, False, False, 0.0))

    sb = ScriptedSandbox(tmp_path, after=_on_clean(foreign))
    entry = Gate([sb], baseline=None, rng=random.Random(5)).check(CANDIDATE, MUT)
    assert verdicts(entry) == [("test_kill", True, None, MUTANT_DISGUISED),
                               ("test_weak", False, "did-not-detect", MUTANT),
                               ("test_wrong", False, "fails-on-clean", CLEAN)]
    assert all(all("test_other" not in n for n in c["select"]) for c in sb.calls[1:])


def test_a_test_that_began_or_reported_alone_is_still_judged(tmp_path):
    def not_begun(report, rel):  # reported, but its start was not recorded
        report.begun.remove(f"{rel}::test_kill")

    entry = Gate([ScriptedSandbox(tmp_path, after=_on_clean(not_begun))], baseline=None,
                 rng=random.Random(5)).check(CANDIDATE, MUT)
    assert [v[0] for v in verdicts(entry)] == ["test_kill", "test_weak", "test_wrong"]
    assert verdicts(entry)[0][1] is True

    def begun_only(report, rel):  # started, and nothing reported of it
        report.begun.append(f"{rel}::test_ghost")

    entry = Gate([ScriptedSandbox(tmp_path / "2", after=_on_clean(begun_only))], baseline=None,
                 rng=random.Random(5)).check(CANDIDATE, MUT)
    assert [v[0] for v in verdicts(entry)] == ["test_ghost", "test_kill", "test_weak", "test_wrong"]
    assert verdicts(entry)[0][1] is False


def test_a_long_collection_error_is_cut_to_its_last_600_characters(tmp_path):
    text = "a" * 50 + "b" * 700
    entry = Gate([ScriptedSandbox(tmp_path)], baseline=None).check(
        f"raise ImportError({text!r})\n\ndef test_a():\n    pass\n", MUT)
    assert entry.file_reason == "fails-on-clean"
    assert entry.message == "collection error: " + "b" * 600


@pytest.mark.parametrize("returncode,finished", [(0, False), (1, False), (5, False), (2, True)])
def test_an_ordinary_end_with_no_test_collected_is_not_an_interruption(tmp_path, returncode,
                                                                      finished):
    def end(report, call):
        report.returncode, report.finished = returncode, finished

    entry = Gate([ScriptedSandbox(tmp_path, after=end)], baseline=None).check("from pkg.mod import f\n", MUT)
    assert (entry.file_reason, entry.stage, entry.message) == \
        ("no-test-collected", "collect", "pytest collected no test function from this file")


def test_writes_at_import_time_are_named_from_the_sandbox_check_first_then_the_audit(tmp_path):
    def both(report, call):
        report.sources_changed = ["tree/pkg/mod.py"]
        report.audit = [{"kind": "write", "path": "/w"}]

    entry = Gate([ScriptedSandbox(tmp_path, after=both)], baseline=None).check("from pkg.mod import f\n", MUT)
    assert (entry.file_reason, entry.message) == (
        "tampering", "wrote outside its scratch directory at import time: tree/pkg/mod.py")

    def audit(report, call):
        report.audit = [{"kind": "read-source", "path": "/r"}] + \
            [{"kind": "write", "path": f"/w{i}"} for i in range(7)]

    entry = Gate([ScriptedSandbox(tmp_path / "2", after=audit)], baseline=None).check(
        "from pkg.mod import f\n", MUT)
    assert (entry.file_reason, entry.message) == (
        "tampering", "wrote outside its scratch directory at import time: /w0, /w1, /w2, /w3, /w4")


def test_what_its_tests_do_does_not_reject_the_file_and_import_time_names_five(tmp_path):
    inside = [{"kind": "read-source", "path": "/in-a-test", "nodeid": "x::test_kill"}]
    entry = Gate([ScriptedSandbox(tmp_path, after=lambda r, c: setattr(r, "audit", inside))],
                 baseline=None).check(CANDIDATE, MUT)
    assert entry.unit == "test" and entry.file_reason is None
    many = [{"kind": "read-source", "path": f"/r{i}"} for i in range(7)]
    entry = Gate([ScriptedSandbox(tmp_path / "2", after=lambda r, c: setattr(r, "audit", many))],
                 baseline=None).check(CANDIDATE, MUT)
    assert entry.message == "at import time the test file read /r0, /r1, /r2, /r3, /r4"


def _strip_seeds(entry):
    return entry.model_copy(update={"phases": [p.model_copy(update={"hashseed": None})
                                                for p in entry.phases]})


def test_verify_replays_the_recorded_seed_of_a_flaky_verdict_and_no_other(tmp_path):
    from killbench.bundle import _differing, regate_entry

    # fails under one seed only: a fresh draw passes it, the recorded seed reproduces the run
    src = "def test_seed():\n    assert HASHSEED != \"77\"\n"
    old = Gate([ScriptedSandbox(tmp_path / "run")], baseline=None).check(src, MUT, target="pkg",
                                                                          hashseeds={HASHSEED: "77"})
    assert verdicts(old) == [("test_seed", False, "flaky", HASHSEED)]
    verify_gate = Gate([ScriptedSandbox(tmp_path / "verify")], baseline=None)
    assert _differing(old, verify_gate.check(src, MUT, target="pkg")) == [
        f"tests/test_killbench_{gate.candidate_id(src)}.py::test_seed"]
    assert _differing(old, regate_entry(verify_gate, old, src, MUT, seed=0)) == []
    # without the recorded seed (an older bundle), 16 seeded draws do not hit "77": it stays a difference
    assert _differing(_strip_seeds(old), regate_entry(verify_gate, _strip_seeds(old), src, MUT, 0)) != []


def test_an_older_bundle_s_flaky_verdict_is_confirmed_by_a_seeded_series_of_seeds(tmp_path):
    from killbench.bundle import _differing, regate_entry

    # fails under about half of all seeds, like a test that asserts a set's order
    src = "def test_order():\n    assert int(HASHSEED) % 2 == 0 or HASHSEED == \"0\"\n"
    verify_gate = Gate([ScriptedSandbox(tmp_path / "verify")], baseline=None, rng=random.Random(2))
    old = None
    for s in ("3", "5", "7"):
        old = Gate([ScriptedSandbox(tmp_path / s)], baseline=None).check(src, MUT, target="pkg",
                                                                          hashseeds={HASHSEED: s})
        assert verdicts(old) == [("test_order", False, "flaky", HASHSEED)]
    # this gate's own draw passes the test (so the series is what confirms the verdict)
    same_draw = Gate([ScriptedSandbox(tmp_path / "draw")], baseline=None, rng=random.Random(2))
    assert _differing(old, same_draw.check(src, MUT, target="pkg")) != []
    assert _differing(old, regate_entry(verify_gate, _strip_seeds(old), src, MUT, seed=0)) == []


def test_a_kept_test_only_a_fresh_hash_seed_rejects_is_replayed_and_reported_as_a_finding(tmp_path):
    from killbench.bundle import _differing, regate_entry

    # seed-dependent: passes under seed 0 and the run's draw (77) only; a test can read its
    # seed anyway, so the recorded seed is replayed and the dependence is a finding
    src = "from pkg.mod import f\n\ndef test_kill():\n    assert HASHSEED in (\"0\", \"77\") and f(1) == 2\n"
    node = f"tests/test_killbench_{gate.candidate_id(src)}.py::test_kill"
    old = Gate([ScriptedSandbox(tmp_path / "run")], baseline=None).check(src, MUT, target="pkg",
                                                                          hashseeds={HASHSEED: "77"})
    assert verdicts(old) == [("test_kill", True, None, MUTANT_DISGUISED)]
    sb = ScriptedSandbox(tmp_path / "verify")
    verify_gate = Gate([sb], baseline=None, rng=random.Random(4))
    fresh_seed = next(p.hashseed for p in Gate([ScriptedSandbox(tmp_path / "draw")], baseline=None,
                                               rng=random.Random(4)).check(src, MUT).phases
                      if p.phase == HASHSEED)
    findings = []
    settled = regate_entry(verify_gate, old, src, MUT, 0, findings)
    assert _differing(old, settled) == []
    assert [c["hashseed"] for c in sb.calls if c["hashseed"] not in ("0", fresh_seed)] == ["77"]
    assert findings == [f"pkg gate {old.candidate} (task m1) test_kill: kept under the run's hash seed 77, "
                        f"flaky under hash seed {fresh_seed} (seed-dependent; the run's one random "
                        "seed let it through)"]
    # a recorded seed the test does not pass under reproduces nothing: the difference stands
    wrong = old.model_copy(update={"phases": [p.model_copy(update={"hashseed": "78"} if p.phase == HASHSEED
                                                           else {}) for p in old.phases]})
    findings = []
    fresh = regate_entry(verify_gate, wrong, src, MUT, 0, findings)
    assert verdicts(fresh) == [("test_kill", False, "flaky", HASHSEED)]
    assert _differing(wrong, fresh) == [node] and findings == []
    # an older bundle (no seed recorded): the seeded series does not hit 77 either
    assert _differing(_strip_seeds(old), regate_entry(verify_gate, _strip_seeds(old), src, MUT, 0)) == [node]


def test_an_older_bundle_s_kept_seed_dependent_test_is_settled_by_the_series_and_said_so(tmp_path):
    from killbench.bundle import _differing, regate_entry

    # passes under about half of all seeds, like a test asserting a small set's repr
    src = ("from pkg.mod import f\n\ndef test_kill():\n"
           "    assert (HASHSEED == \"0\" or int(HASHSEED) % 2 == 0) and f(1) == 2\n")
    old = _strip_seeds(Gate([ScriptedSandbox(tmp_path / "run")], baseline=None).check(
        src, MUT, target="pkg", hashseeds={HASHSEED: "8"}))
    assert verdicts(old) == [("test_kill", True, None, MUTANT_DISGUISED)]
    odd = next(r for r in range(40) if int(next(
        p.hashseed for p in Gate([ScriptedSandbox(tmp_path / f"d{r}")], baseline=None,
                                 rng=random.Random(r)).check(src, MUT).phases if p.phase == HASHSEED)) % 2)
    findings = []
    settled = regate_entry(Gate([ScriptedSandbox(tmp_path / "verify")], baseline=None,
                                rng=random.Random(odd)), old, src, MUT, 0, findings)
    assert _differing(old, settled) == []
    assert len(findings) == 1 and "(a seeded draw: the bundle records none)" in findings[0]


def test_a_kept_test_the_fresh_check_rejects_elsewhere_too_is_never_settled_by_the_seed(tmp_path):
    from killbench.bundle import _differing, regate_entry

    # seed-dependent, and also fails from the renamed directory: the hash seed is not the only
    # thing that rejects it, so no replay settles it
    src = ("from pkg.mod import f\n\ndef test_kill():\n"
           "    assert HASHSEED in (\"0\", \"77\") and f(1) == 2 and (HASHSEED == \"77\" or not MOVED)\n")
    old = Gate([ScriptedSandbox(tmp_path / "run")], baseline=None).check(src, MUT, target="pkg",
                                                                          hashseeds={HASHSEED: "77"})
    forged = old.model_copy(update={"tests": [t.model_copy(update={"kept": True, "reason": None,
                                                                     "stage": MUTANT_DISGUISED})
                                              for t in old.tests]})
    assert verdicts(old) == [("test_kill", False, "flaky", ORDER)]
    findings = []
    fresh = regate_entry(Gate([ScriptedSandbox(tmp_path / "verify")], baseline=None), forged, src,
                         MUT, 0, findings)
    assert verdicts(fresh) == [("test_kill", False, "flaky", HASHSEED)]
    assert _differing(forged, fresh) != [] and findings == []


def test_a_kept_test_that_notices_disguises_gets_one_fresh_draw_not_a_series(tmp_path):
    from killbench.bundle import _differing, regate_entry

    # seed-dependent and passing on about half the disguises of the clean code; the bundle
    # strips its disguise seeds, which would give an older bundle's series of 16 draws
    src = ("import zlib\nfrom pkg.mod import f\n\ndef test_kill():\n"
           "    assert HASHSEED in (\"0\", \"77\") and f(1) == 2\n"
           f"    assert MODULE_TEXT == {MODULE!r} or zlib.crc32(MODULE_TEXT.encode()) % 2 == 0\n")
    runs = {r: Gate([ScriptedSandbox(tmp_path / f"r{r}")], baseline=None, rng=random.Random(r)).check(
        src, MUT, target="pkg", hashseeds={HASHSEED: "77"}) for r in range(12)}
    kept = [e for e in runs.values() if verdicts(e) == [("test_kill", True, None, MUTANT_DISGUISED)]]
    noticed = [r for r, e in runs.items() if verdicts(e) == [("test_kill", False, "gaming", NEUTRAL)]]
    assert kept and noticed  # both occur: the verdict depends on the disguise
    old = _strip_disguise_seeds(kept[0])
    findings = []
    # verify's own draw (the same as a run with rng `noticed[0]`) disguises it out: that stands
    fresh = regate_entry(Gate([ScriptedSandbox(tmp_path / "verify")], baseline=None,
                              rng=random.Random(noticed[0])), old, src, MUT, 0, findings)
    assert _differing(old, fresh) != [] and findings == []


def _disguised_texts(sb):
    """The module text each disguised phase saw, from the sandbox's calls (in phase order)."""
    return [c["module"] for c in sb.calls if c["module"] not in (MODULE, apply(MODULE.encode(), MUT).decode())]


def test_the_disguise_seeds_are_recorded_and_a_replay_rewrites_the_same_text(tmp_path):
    from killbench.disguise import disguise

    drawn_sb = ScriptedSandbox(tmp_path / "a")
    drawn = Gate([drawn_sb], baseline=None, rng=random.Random(9)).check(CANDIDATE, MUT)
    seeds = {p.phase: p.disguise_seed for p in drawn.phases}
    assert {p for p, s in seeds.items() if s is not None} == {NEUTRAL, MUTANT_DISGUISED}
    # drawn from the check's own rng, after it shuffled the phases, one per disguise in phase order
    rng = random.Random(9)
    draw = random.Random(rng.getrandbits(64))
    order = list(TASK_PHASES[1:])
    draw.shuffle(order)
    assert [seeds[p] for p in order if p in (NEUTRAL, MUTANT_DISGUISED)] == \
        [str(draw.getrandbits(64)), str(draw.getrandbits(64))]
    by_phase = dict(zip([p.phase for p in drawn.phases], drawn_sb.calls))
    mutated = apply(MODULE.encode(), MUT).decode()
    # each disguise is the one its recorded seed makes
    assert by_phase[NEUTRAL]["module"] == disguise(MODULE, MUT.line, random.Random(int(seeds[NEUTRAL])))
    assert by_phase[MUTANT_DISGUISED]["module"] == disguise(mutated, MUT.line,
                                                            random.Random(int(seeds[MUTANT_DISGUISED])))
    # replayed by a gate with other draws: the same two texts, recorded with the same seeds
    replay_sb = ScriptedSandbox(tmp_path / "b")
    wanted = {NEUTRAL: seeds[NEUTRAL], MUTANT_DISGUISED: seeds[MUTANT_DISGUISED]}
    replayed = Gate([replay_sb], baseline=None, rng=random.Random(10)).check(CANDIDATE, MUT,
                                                                            disguise_seeds=wanted)
    again = dict(zip([p.phase for p in replayed.phases], replay_sb.calls))
    assert {p: again[p]["module"] for p in wanted} == {p: by_phase[p]["module"] for p in wanted}
    assert {p.phase: p.disguise_seed for p in replayed.phases if p.disguise_seed} == wanted
    # a replay under the same rng consumes the same draws: order and hash seed unchanged
    same_sb = ScriptedSandbox(tmp_path / "c")
    other = {NEUTRAL: "1", MUTANT_DISGUISED: "2"}
    same = Gate([same_sb], baseline=None, rng=random.Random(9)).check(CANDIDATE, MUT, disguise_seeds=other)
    assert [p.phase for p in same.phases] == [p.phase for p in drawn.phases]
    assert [p.hashseed for p in same.phases] == [p.hashseed for p in drawn.phases]
    assert [p.disguise_seed for p in same.phases if p.disguise_seed] == \
        [other[p.phase] for p in same.phases if p.phase in other]


def _one_disguise(tmp_path, rng_seed):
    """The clean code's disguise a gate with this rng draws, and that gate's entry's seeds."""
    sb = ScriptedSandbox(tmp_path / f"probe{rng_seed}")
    entry = Gate([sb], baseline=None, rng=random.Random(rng_seed)).check(CANDIDATE, MUT)
    by_phase = dict(zip([p.phase for p in entry.phases], sb.calls))
    return by_phase[NEUTRAL]["module"], {p.phase: p.disguise_seed for p in entry.phases}


def _strip_disguise_seeds(entry):
    return entry.model_copy(update={"phases": [p.model_copy(update={"disguise_seed": None})
                                                for p in entry.phases]})


def test_verify_replays_the_recorded_disguises_of_a_gaming_verdict(tmp_path):
    from killbench.bundle import _differing, regate_entry

    # fails on one disguise of the clean code only: a fresh draw keeps it, the recorded seeds
    # reproduce the run's `gaming`
    text, _ = _one_disguise(tmp_path, 21)
    src = f"from pkg.mod import f\n\ndef test_kill():\n    assert f(1) == 2 and MODULE_TEXT != {text!r}\n"
    old = Gate([ScriptedSandbox(tmp_path / "run")], baseline=None, rng=random.Random(21)).check(
        src, MUT, target="pkg")
    node = f"tests/test_killbench_{gate.candidate_id(src)}.py::test_kill"
    assert verdicts(old) == [("test_kill", False, "gaming", NEUTRAL)]
    verify_gate = Gate([ScriptedSandbox(tmp_path / "verify")], baseline=None)
    assert _differing(old, verify_gate.check(src, MUT, target="pkg")) == [node]
    confirmed = regate_entry(verify_gate, old, src, MUT, seed=0)
    assert _differing(old, confirmed) == []
    assert {p.phase: p.disguise_seed for p in confirmed.phases}[NEUTRAL] == \
        {p.phase: p.disguise_seed for p in old.phases}[NEUTRAL]
    # without the recorded seeds (an older bundle) the seeded series does not hit that one text
    stripped = _strip_disguise_seeds(old)
    assert _differing(stripped, regate_entry(verify_gate, stripped, src, MUT, 0)) == [node]


def test_an_older_bundle_s_gaming_verdict_is_confirmed_by_a_seeded_series_of_disguises(tmp_path):
    from killbench.bundle import _differing, regate_entry

    # fails on about half of all disguises of the clean code
    src = ("import zlib\nfrom pkg.mod import f\n\ndef test_kill():\n    assert f(1) == 2\n"
           f"    assert MODULE_TEXT == {MODULE!r} or zlib.crc32(MODULE_TEXT.encode()) % 2 == 0\n")
    entries = [(i, Gate([ScriptedSandbox(tmp_path / f"r{i}")], baseline=None,
                        rng=random.Random(i)).check(src, MUT, target="pkg")) for i in range(12)]
    gaming = [e for _, e in entries if verdicts(e) == [("test_kill", False, "gaming", NEUTRAL)]]
    kept_rng = [i for i, e in entries if verdicts(e) == [("test_kill", True, None, MUTANT_DISGUISED)]]
    assert gaming and kept_rng  # both verdicts occur: the verdict depends on the draw
    old = _strip_disguise_seeds(gaming[0])
    # this gate's own draw keeps the test, so the series is what confirms the verdict
    verify_gate = Gate([ScriptedSandbox(tmp_path / "verify")], baseline=None,
                       rng=random.Random(kept_rng[0]))
    same_draw = Gate([ScriptedSandbox(tmp_path / "draw")], baseline=None, rng=random.Random(kept_rng[0]))
    assert _differing(old, same_draw.check(src, MUT, target="pkg")) != []
    assert _differing(old, regate_entry(verify_gate, old, src, MUT, seed=0)) == []


def test_a_kept_verdict_is_checked_under_fresh_disguises_never_the_recorded_ones(tmp_path):
    from killbench.bundle import _differing, regate_entry

    # a forged bundle: a test that passes on one disguise of the clean code only (and on the
    # clean code), kept under the disguise seed it was written for
    text, seeds = _one_disguise(tmp_path, 33)
    src = (f"from pkg.mod import f\n\ndef test_kill():\n"
           f"    assert f(1) == 2 and MODULE_TEXT in ({MODULE!r}, {text!r})\n")
    old = Gate([ScriptedSandbox(tmp_path / "run")], baseline=None).check(
        src, MUT, target="pkg", disguise_seeds={NEUTRAL: seeds[NEUTRAL]})
    assert verdicts(old) == [("test_kill", True, None, MUTANT_DISGUISED)]
    fresh = regate_entry(Gate([ScriptedSandbox(tmp_path / "verify")], baseline=None), old, src, MUT, 0)
    assert verdicts(fresh) == [("test_kill", False, "gaming", NEUTRAL)]
    assert _differing(old, fresh) == [f"tests/test_killbench_{gate.candidate_id(src)}.py::test_kill"]


def test_only_claimed_rejections_are_replayed_and_a_replay_that_misses_leaves_the_difference(tmp_path):
    from killbench.bundle import _differing, _rejections_only, regate_entry

    # the differences verify may confirm by replay: only tests the bundle says were rejected
    src = "def test_seed():\n    assert HASHSEED != \"77\"\n"
    flaky = Gate([ScriptedSandbox(tmp_path / "run")], baseline=None).check(src, MUT, hashseeds={HASHSEED: "77"})
    node = f"tests/test_killbench_{gate.candidate_id(src)}.py::test_seed"
    assert _rejections_only(flaky, [node])
    assert not _rejections_only(flaky, [])
    assert not _rejections_only(flaky, [node, "tests/test_other.py::test_x"])
    kept = Gate([ScriptedSandbox(tmp_path / "kept")], baseline=None).check(CANDIDATE, MUT)
    kill = f"tests/test_killbench_{gate.candidate_id(CANDIDATE)}.py::test_kill"
    assert not _rejections_only(kept, [kill])
    # a rejection the replay does not reproduce stays a difference, and verify reports the fresh entry
    forged = flaky.model_copy(update={"phases": [p.model_copy(update={"hashseed": "5"}) for p in flaky.phases]})
    fresh = regate_entry(Gate([ScriptedSandbox(tmp_path / "verify")], baseline=None), forged, src, MUT, 0)
    assert _differing(forged, fresh) == [node]
    assert {p.phase: p.hashseed for p in fresh.phases}[HASHSEED] != "5"


def test_replaying_one_disguise_leaves_the_other_as_a_fresh_check_draws_it(tmp_path):
    fresh_sb, one_sb = ScriptedSandbox(tmp_path / "a"), ScriptedSandbox(tmp_path / "b")
    fresh = Gate([fresh_sb], baseline=None, rng=random.Random(9)).check(CANDIDATE, MUT)
    one = Gate([one_sb], baseline=None, rng=random.Random(9)).check(CANDIDATE, MUT,
                                                                   disguise_seeds={NEUTRAL: "12345"})
    seeds = lambda e: {p.phase: p.disguise_seed for p in e.phases}
    assert seeds(one)[NEUTRAL] == "12345" and seeds(fresh)[NEUTRAL] != "12345"
    assert seeds(one)[MUTANT_DISGUISED] == seeds(fresh)[MUTANT_DISGUISED]
    texts = lambda e, sb: dict(zip([p.phase for p in e.phases], [c["module"] for c in sb.calls]))
    assert texts(one, one_sb)[MUTANT_DISGUISED] == texts(fresh, fresh_sb)[MUTANT_DISGUISED]
    # an empty replay value is no replay
    empty_sb = ScriptedSandbox(tmp_path / "c")
    empty = Gate([empty_sb], baseline=None, rng=random.Random(9)).check(
        CANDIDATE, MUT, disguise_seeds={NEUTRAL: ""}, hashseeds={HASHSEED: ""})
    assert [(p.phase, p.hashseed, p.disguise_seed) for p in empty.phases] == \
        [(p.phase, p.hashseed, p.disguise_seed) for p in fresh.phases]


@pytest.mark.parametrize("field,value", [("disguise_seed", "abc"), ("disguise_seed", "9" * 5000),
                                         ("disguise_seed", str(2**64)), ("hashseed", "abc"),
                                         ("hashseed", "0"), ("hashseed", str(2**32)),
                                         ("hashseed", "\u0661\u0662")])
def test_a_recorded_draw_no_gate_could_make_confirms_nothing(tmp_path, field, value):
    from killbench.bundle import _differing, _valid_draw, regate_entry

    # a test the run rejected under a replayable draw; its record then carries a forged value
    text, seeds = _one_disguise(tmp_path, 21)
    src = f"from pkg.mod import f\n\ndef test_kill():\n    assert f(1) == 2 and MODULE_TEXT != {text!r}\n"
    old = Gate([ScriptedSandbox(tmp_path / "run")], baseline=None, rng=random.Random(21)).check(src, MUT)
    assert verdicts(old) == [("test_kill", False, "gaming", NEUTRAL)]
    phase = NEUTRAL if field == "disguise_seed" else HASHSEED
    assert not _valid_draw(phase, value)
    forged = old.model_copy(update={"phases": [p.model_copy(update={field: value}) if p.phase == phase else p
                                               for p in old.phases]})
    # verify neither crashes nor replays it: the difference is reported
    fresh = regate_entry(Gate([ScriptedSandbox(tmp_path / "verify")], baseline=None), forged, src, MUT, 0)
    assert _differing(forged, fresh) == [f"tests/test_killbench_{gate.candidate_id(src)}.py::test_kill"]
    # a record that is not a number of at most 20 ASCII digits does not even load (a number out
    # of range does: the clean phases record "0", and the range depends on the phase)
    from pydantic import ValidationError

    from killbench.evidence import PhaseRun
    record = {**forged.phases[0].model_dump(), field: value}
    if value.isascii() and value.isdecimal() and len(value) <= 20:
        assert getattr(PhaseRun.model_validate(record), field) == value
    else:
        with pytest.raises(ValidationError):
            PhaseRun.model_validate(record)


def test_the_draws_a_gate_makes_are_valid_replays():
    from killbench.bundle import _valid_draw

    for phase in (HASHSEED, NEUTRAL, MUTANT_DISGUISED):
        assert _valid_draw(phase, "1") and _valid_draw(phase, str(2**32 - 1))
    assert _valid_draw(NEUTRAL, "0") and _valid_draw(MUTANT_DISGUISED, str(2**64 - 1))
    assert not _valid_draw(MUTANT_DISGUISED, str(2**64)) and not _valid_draw(HASHSEED, str(2**32))
    assert not _valid_draw(HASHSEED, "-1") and not _valid_draw(NEUTRAL, " 1") and not _valid_draw(NEUTRAL, "")


def test_verify_compares_the_stage_of_a_rejection_as_well(tmp_path):
    from killbench.bundle import _differing

    src = "def test_seed():\n    assert HASHSEED != \"77\"\n"
    old = Gate([ScriptedSandbox(tmp_path / "run")], baseline=None).check(src, MUT, hashseeds={HASHSEED: "77"})
    assert verdicts(old) == [("test_seed", False, "flaky", HASHSEED)]
    moved = old.model_copy(update={"tests": [t.model_copy(update={"stage": ORDER}) for t in old.tests]})
    assert _differing(old, moved) == [f"tests/test_killbench_{gate.candidate_id(src)}.py::test_seed"]
