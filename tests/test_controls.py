"""Controls: what a test can observe is the same in every phase of the gate and every run of
scoring (the mutant is visible only through what the code does); the sealed list of
negative controls is bound to the manifests by its commitment."""

from __future__ import annotations

import pytest

from killbench import executor
from killbench.controls import add_to_manifest, commitment, load_sealed

BWRAP = executor.unavailable("bwrap")

# Each observation's sha256, bit by bit, as the outcomes of tests: a test that passes on the
# clean code and fails in another phase means the observation differs between the two.
OBSERVER = '''
import hashlib
import os
import resource
import sys

import pytest

import basic

BITS = 24
KEYS = ["env", "argv", "cwd", "cwd-listing", "test-dir-listing", "file", "rlimits", "path", "probe"]


def _observed():
    basic.is_big(5)  # reach the mutated function, so scoring runs this file on its mutants
    here = os.path.dirname(os.path.abspath(__file__))
    limits = {n: resource.getrlimit(getattr(resource, n)) for n in dir(resource)
              if n.startswith("RLIMIT_")}
    return {"env": sorted(os.environ.items()), "argv": list(sys.argv), "cwd": os.getcwd(),
            "cwd-listing": sorted(os.listdir(os.getcwd())), "test-dir-listing": sorted(os.listdir(here)),
            "file": __file__, "rlimits": sorted(limits.items()), "path": list(sys.path),
            "probe": open(os.environ.get("KILLBENCH_PROBE_CONFIG", os.devnull)).read()}


@pytest.mark.parametrize("bit", range(BITS))
@pytest.mark.parametrize("key", KEYS)
def test_bit_is_zero(key, bit):
    digest = int.from_bytes(hashlib.sha256(repr(_observed()[key]).encode()).digest()[:4], "big")
    assert not (digest >> bit) & 1
'''

SAME_AS_CLEAN = ("neutral", "mutant", "mutant-disguised")


@pytest.mark.slow
@pytest.mark.skipif(bool(BWRAP), reason=f"bubblewrap isolation unavailable: {BWRAP}")
def test_a_test_observes_the_same_environment_in_every_phase_and_run(fixture_target, use_cache):
    from killbench.config import resolve
    from killbench.gate import CLEAN, Gate
    from killbench.harness import load_or_run_baseline, workdir_for
    from killbench.population import freeze, mutant
    from killbench.sandbox import Sandbox
    from killbench.scoring import KeptFile, kill_matrix
    from killbench.targets import prepare

    target = prepare(resolve(str(fixture_target("basic"))))
    workdir = workdir_for(target)
    baseline = load_or_run_baseline(target, workdir)
    pop = freeze(target, jobs=2, split_name="full")
    rows = pop.by_id()
    task = next(i for i in pop.task_set if rows[i].function == "is_big")
    sb = Sandbox(target, workdir / "sandboxes" / "observer", trusted=False, isolation="bwrap")
    entry = Gate([sb], baseline).check(OBSERVER, mutant(rows[task]), target=target.name)
    phases = {p.phase: p for p in entry.phases}
    alive = [n for n, o in phases[CLEAN].tests.items() if o.status == "passed"]
    # about half the bits are 0: enough tests ran past the clean phase to see a difference
    assert len(alive) > 60, entry.message
    assert any("[probe-" in n for n in alive)
    # (the probe's configuration differs between the clean phase, which runs the whole file,
    # and the later ones, which select the tests that passed: a test that tells them apart
    # that way also fails the neutral phase, and is gaming; scoring below must not differ)
    for phase in SAME_AS_CLEAN:
        differ = sorted(n.split("[", 1)[1].rstrip("]").rsplit("-", 1)[0] for n in alive
                        if "[probe-" not in n and (phases[phase].tests.get(n) is None
                                                   or phases[phase].tests[n].status != "passed"))
        assert not differ, f"the {phase} phase shows a test other {sorted(set(differ))} than the clean phase"
    assert not [t for t in entry.tests if t.kept]
    # scoring: the same file against every mutant its tests reach, and the clean run
    matrix = kill_matrix(target, pop, [KeptFile(entry.candidate, OBSERVER, alive, task)], jobs=2,
                         workdir=workdir, isolation="bwrap")
    assert matrix.runs, "the observer reaches is_big: scoring must run it on is_big's mutants"
    # scoring runs in directories of its own (paths differ from the gate's, on purpose the
    # same for the clean and every mutant run): each mutant run must see its clean run's world
    clean = {row.key: row.clean for row in matrix.rows}
    assert "passed" in clean.values()
    for run in matrix.runs:
        differ = sorted(k for k, v in run.cells.items()
                        if v != clean[k] and not (clean[k] != "passed" and v == "not-run"))
        assert not differ, f"mutant {run.mutant}: scoring shows the test other {differ[:3]}"


def test_the_sealed_list_must_match_the_commitment(tmp_path, monkeypatch):
    import json

    salt = "s" * 40
    manifest = {"target": {"name": "t"}, "task_set": ["a", "b", "c"], "splits": {"full": ["a", "b", "c"],
                                                                              "lite": ["a"]},
                "mutants": [{"id": i, "covered_by": ["x::y"], "verdict": "survived"} for i in "abc"]
                + [{"id": "k", "covered_by": ["x::y"], "verdict": "killed"}]}
    sealed = add_to_manifest(manifest, salt, ["b", "c"], [{"id": "k", "file": "test_k.py",
                                                             "test": "def test_k(): pass\n"}], "c")
    assert sealed["controls"]["negative"] == {"count": 2, "commitment": commitment(salt, ["c", "b"])}
    assert sealed["splits"]["lite"] == ["a", "c"] and "controls" not in manifest
    path = tmp_path / "controls.json"
    monkeypatch.setenv("KILLBENCH_CONTROLS", str(path))
    path.write_text(json.dumps({"benchmark": "9", "salt": salt, "negative": {"t": [{"id": "b"}, {"id": "c"}]}}))
    assert load_sealed("9", {"t": sealed}).ids("t") == {"b", "c"}
    # a list with one control swapped for another task no longer matches what was published
    path.write_text(json.dumps({"benchmark": "9", "salt": salt, "negative": {"t": [{"id": "a"}, {"id": "c"}]}}))
    from killbench.errors import HarnessError

    with pytest.raises(HarnessError, match="commitment"):
        load_sealed("9", {"t": sealed})
    with pytest.raises(Exception, match="not a task"):
        add_to_manifest(manifest, salt, ["zz"], [], None)
    with pytest.raises(Exception, match="not a mutant the suite kills"):
        add_to_manifest(manifest, salt, ["b"], [{"id": "a", "file": "f", "test": ""}], None)


@pytest.mark.slow
@pytest.mark.skipif(bool(BWRAP), reason=f"bubblewrap isolation unavailable: {BWRAP}")
def test_a_gate_that_skips_the_mutant_stops_the_run_before_any_generator_call(use_cache, tmp_path,
                                                                               monkeypatch):
    """The mutant phases made no-ops (the mutant's file never written): every reference test
    passes "on the mutant", the positive controls are lost, and the run stops at once."""
    from killbench.errors import HarnessError
    from killbench.gate import Gate
    from killbench.manifests import load_manifests
    from killbench.run import run_generator

    import fixture_generators

    assert load_manifests()["cachetools"]["controls"]["positive"], "cachetools has positive controls"
    monkeypatch.setattr(Gate, "_content", staticmethod(lambda phase, original, mutant, rng: None))
    fixture_generators.CALLS.clear()
    out = tmp_path / "run"
    with pytest.raises(HarnessError, match="instrument fault on cachetools"):
        run_generator("fixture_generators:RecordsCalls", ["cachetools"], out=out, jobs=2)
    assert fixture_generators.CALLS == []
    import json

    recorded = [json.loads(line) for line in (out / "evidence" / "controls.jsonl").read_text().splitlines()]
    assert recorded and not any(t["kept"] for e in recorded for t in e["tests"])
    assert {t["reason"] for e in recorded for t in e["tests"]} == {"did-not-detect"}


@pytest.mark.slow
@pytest.mark.skipif(bool(BWRAP), reason=f"bubblewrap isolation unavailable: {BWRAP}")
def test_a_test_that_behaves_only_in_the_gate_kills_nothing_extra_in_scoring(fixture_target, use_cache):
    """Honest in the gate (it kills its task by behaviour), and in scoring (told apart by the
    sandbox's name) it fails whenever the source file's size is not the clean size: before
    scoring's clean status ran on a disguise, it 'killed' every mutant it reached."""
    from killbench.config import resolve
    from killbench.gate import Gate
    from killbench.harness import load_or_run_baseline, workdir_for
    from killbench.population import freeze, mutant
    from killbench.sandbox import Sandbox
    from killbench.scoring import KeptFile, kill_matrix
    from killbench.targets import prepare

    project = fixture_target("basic")
    size = (project / "src" / "basic" / "__init__.py").stat().st_size
    source = f'''
import os

from basic import is_big


def test_threshold_is_not_big():
    if "score" in os.getcwd():
        assert os.path.getsize(os.path.join(os.getcwd(), "src", "basic", "__init__.py")) == {size}
    assert is_big(10) is False
'''
    target = prepare(resolve(str(project)))
    workdir = workdir_for(target)
    baseline = load_or_run_baseline(target, workdir)
    pop = freeze(target, jobs=2, split_name="full")
    rows = pop.by_id()
    task = next(i for i in pop.task_set if rows[i].replacement == "n >= THRESHOLD")
    sb = Sandbox(target, workdir / "sandboxes" / "twofaced", trusted=False, isolation="bwrap")
    entry = Gate([sb], baseline).check(source, mutant(rows[task]), target=target.name)
    assert entry.kept, entry.message  # the gate sees an honest test
    matrix = kill_matrix(target, pop, [KeptFile(entry.candidate, source, entry.kept_tests, task)],
                         jobs=2, workdir=workdir, isolation="bwrap")
    (key,) = [row.key for row in matrix.rows]
    assert key in matrix.excluded and "disguise" in matrix.excluded[key]


def test_the_lite_split_counts_its_own_negative_control():
    """The lite split holds one negative control of a target that has any: its population
    (and every score and leaderboard cell on it) says 1, not the full split's count."""
    from killbench.manifests import load_manifests
    from killbench.population import from_manifest

    for name, m in load_manifests().items():
        full = (m.get("controls") or {}).get("negative", {}).get("count", 0)
        lite = from_manifest(m, "manifest x lite split", {}, "lite").controls.get("negative") or {}
        assert lite.get("count", 0) == min(1, full), name
        assert from_manifest(m, "manifest x", {}, "full").controls.get("negative", {}).get(
            "count", 0) == full


def test_a_withdrawn_control_stays_sealed_but_its_kill_no_longer_fails_a_run():
    """Ten of 1.0.0's negative controls were shown killable by behaviour (user subclasses and
    user-supplied objects; the tests are in the controls file, and all were kept by the gate):
    they stay tasks and stay in the commitment, and a kill of them is an ordinary kill."""
    from types import SimpleNamespace

    from killbench.manifests import current_benchmark, load_manifests
    from killbench.report import negative_control_hits, withdrawn_controls

    manifests = load_manifests()
    sealed = load_sealed(current_benchmark(), manifests)  # the commitment check still passes
    assert sealed is not None
    withdrawn = {(t, c["id"]) for t, cs in sealed.negative.items() for c in cs if c.get("withdrawn")}
    assert withdrawn == {("semver", "b0bc09aeefcd35cf"), ("tenacity", "badca7f058bcbd70"),
                         ("boltons", "0ca1ec601d405e7c"), ("isodate", "223735c498a1447e"),
                         ("more-itertools", "57a72cd8a19680f6"),
                         ("python-slugify", "1f6a059ce01b4e0f"),
                         ("python-slugify", "66d6e7c76c2bcdda"),
                         ("python-slugify", "67166935939c7461"),
                         ("tenacity", "36368f85254d19a2"), ("tenacity", "900f61e5bfa6c890")}
    from pathlib import Path

    attacks = Path(__file__).resolve().parent.parent / "controls" / "attacks-1.0.0"
    for t, i in withdrawn - {("semver", "b0bc09aeefcd35cf"), ("tenacity", "badca7f058bcbd70")}:
        assert (attacks / f"{t}__{i}.py").is_file()  # the kept killing test, beside the list
    for t, cs in sealed.negative.items():
        for c in cs:
            if c.get("withdrawn"):
                w = c["withdrawn"]
                assert w["why"] and "def test_" in w["killing_test"] and w["date"]
                assert c["id"] in sealed.ids(t) and c["id"] not in sealed.active(t)
    active = sorted(sealed.active("semver"))[0]
    score = {"targets": {"semver": {"kills_by_test": {
        "tests/a.py::test_w": ["b0bc09aeefcd35cf"], "tests/a.py::test_a": [active]}}}}
    records = SimpleNamespace(entries=[], config=SimpleNamespace(targets={"semver": None}),
                              population=lambda name: SimpleNamespace(
                                  task_set=manifests["semver"]["splits"]["lite"]))
    assert negative_control_hits(records, score) == [("semver", active, "tests/a.py::test_a kills it")]
    assert withdrawn_controls(records) == 1  # the lite split's semver control is the withdrawn one


WARM_OBSERVER = '''
import json
import os
import resource
import sys

import basic

LOG = {log!r}


def test_aaa_observer():
    here = os.path.dirname(os.path.abspath(__file__))
    limits = {{n: resource.getrlimit(getattr(resource, n)) for n in dir(resource)
              if n.startswith("RLIMIT_")}}
    seen = {{"env": sorted(os.environ.items()), "argv": list(sys.argv), "cwd": os.getcwd(),
            "cwd-listing": sorted(os.listdir(os.getcwd())), "test-dir-listing": sorted(os.listdir(here)),
            "package-listing": sorted(os.listdir(os.path.dirname(basic.__file__))),
            "file": basic.__file__, "rlimits": sorted(limits.items()), "path": list(sys.path)}}
    with open(LOG, "a") as fh:
        fh.write(json.dumps(seen, sort_keys=True) + "\\n")
    # reach the mutated functions (after recording: a mutant may make these raise), so the
    # runs of their mutants select this test
    basic.is_big(5), basic.sign(3), basic.parse_positive("3")
'''


@pytest.mark.slow
def test_the_warm_runner_shows_every_mutant_the_same_environment(fixture_target, use_cache, tmp_path):
    """The warm runner applies each mutant in a forked child of one server. Nothing but the
    code's behaviour may tell the mutants apart: not an environment variable naming the
    mutant (as in runners that select it that way), not argv, the working directory, a file
    listing or a resource limit. The target's own test below records what it sees in every
    run; within each runner and sandbox, every run must have seen the same."""
    import json
    import os
    import subprocess
    import sys

    project = fixture_target("basic")
    log = tmp_path / "observed.jsonl"
    (project / "tests" / "test_aaa_observer.py").write_text(WARM_OBSERVER.format(log=str(log)))
    out = tmp_path / "mutate.json"
    p = subprocess.run([sys.executable, "-m", "killbench.cli", "mutate", str(project), "--jobs", "1",
                        "--fresh", "--json", str(out)], capture_output=True, text=True, timeout=900,
                       env={**os.environ, "KILLBENCH_CACHE": str(use_cache)})
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    observer = "tests/test_aaa_observer.py::test_aaa_observer"
    warm_runs = [m for m in doc["mutants"]
                 if m.get("runner") == "warm" and observer in (m.get("covered_by") or [])]
    assert len(warm_runs) >= 5, "the warm path ran the mutants the observer reaches"
    seen = [json.loads(line) for line in log.read_text().splitlines()]
    groups: dict = {}
    for s in seen:
        # the warm runner's children, the forked runner's (whole-suite runs: where a mutant
        # of import-time code, and every clean run that confirms one, runs), the plain path:
        # which one runs follows from where a mutant is, not from what it is; within each,
        # every run must see the same
        kind = "fork" if "killbench_fork" in s["argv"] else \
            "warm" if any(k == "KILLBENCH_WARM_FD" for k, _ in s["env"]) else "plain"
        groups.setdefault((kind, s["cwd"]), []).append(s)
    warm_seen = [s for (kind, _), g in groups.items() if kind == "warm" for s in g]
    # every warm run of a mutant it reaches runs the observer first (its file sorts first)
    assert len(warm_seen) >= len(warm_runs), (len(warm_seen), len(warm_runs))
    assert len({cwd for kind, cwd in groups if kind == "warm"}) == 1, "one warm server, one directory"
    assert any(kind == "fork" for kind, _ in groups), "the forked runner ran the import-time mutants"
    problems = []
    for (kind, cwd), group in groups.items():
        warm = kind != "plain"
        if cwd.endswith("/baseline/tree"):
            continue  # the baseline's runs (with coverage, then timed) are not mutant runs
        first = group[0]
        for other in group[1:]:
            differ = {k: (first[k], other[k]) for k in first if first[k] != other[k]}
            if not warm:
                # the plain path names the covering test files in argv and sets RLIMIT_CPU from
                # their measured times: both follow from where the mutant is (which tests
                # reach it), not from what it is; the warm path shows neither
                differ.pop("argv", None)
                if differ.get("rlimits"):
                    a, b = ([x for x in r if x[0] != "RLIMIT_CPU"] for r in differ["rlimits"])
                    if a == b:
                        differ.pop("rlimits")
            if differ:
                problems.append(f"{kind} runs in {cwd} ({len(group)}) saw different "
                                + "; ".join(f"{k}: {_delta(a, b)}" for k, (a, b) in differ.items()))
                break
    assert not problems, "\n".join(problems)


def _delta(a, b):
    if isinstance(a, list) and isinstance(b, list):
        return f"{[x for x in a if x not in b]} vs {[x for x in b if x not in a]}"
    return f"{a!r} vs {b!r}"
