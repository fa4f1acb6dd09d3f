"""The task-set rule and the population built from it, on hand-made rows: every clause of
the rule, every invariant `check` raises, and each way a population is built (a manifest,
a `mutate` run's records, a pinned or project target, `--limit`)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from killbench import population as P
from killbench.errors import InvariantError, UserError
from killbench.evidence import Population, PopulationMutant
from killbench.records import Mutant, MutantRecord, Outcome, Reach


def row(i, verdict="survived", reachable=True, unkillable=None, role="sample", path="pkg/mod.py",
        covered=("t::a",)):
    return {"id": i, "path": path, "line": 3, "end_line": 3, "col": 4, "end_col": 6, "start": 20,
            "end": 22, "function": "f", "operator": "compare-flip", "original": "==",
            "replacement": "!=", "unkillable": unkillable, "verdict": verdict,
            "reachable": reachable, "import_time": False, "covered_by": list(covered), "role": role}


def pm(i, **kw):
    return PopulationMutant(**row(i, **kw))


def pop(mutants, task, held, **kw):
    return Population(target="pkg", source="mutate x", mutants=mutants, task_set=task,
                      held_out=held, **kw)


# ------------------------------------------------------------------ the rule


def test_a_task_is_a_reachable_killable_survivor_of_the_task_population():
    assert P.is_task("survived", True, None) is True
    assert P.is_task("survived", True, None, "sample") is True
    # each clause alone makes it not a task
    assert P.is_task("killed", True, None) is False
    assert P.is_task("timeout", True, None) is False
    assert P.is_task("survived", False, None) is False
    assert P.is_task("survived", True, "non-behavioural: __all__") is False
    assert P.is_task("survived", True, None, "held-out") is False
    assert P.is_task("killed", False, "x", "held-out") is False


def test_held_out_is_every_mutant_that_compiles_and_can_be_killed():
    assert P.is_held_out("survived", None) is True
    assert P.is_held_out("killed", None) is True
    assert P.is_held_out("timeout", None) is True
    assert P.is_held_out("invalid", None) is False
    assert P.is_held_out("killed", "excluded by pragma") is False


def test_split_sorts_tasks_and_holds_out_only_what_is_not_a_task():
    rows = [row("m5"), row("m1", verdict="killed"), row("m3"), row("m2", reachable=False),
            row("m4", verdict="invalid"), row("m6", unkillable="message text"),
            row("m0", verdict="survived", role="held-out")]
    task, held = P.split(rows)
    assert task == ["m3", "m5"]
    # unreachable survivors and the suite's kills are held out; invalid and unkillable are not
    assert held == ["m0", "m1", "m2"]


def test_a_row_without_a_role_is_of_the_task_population():
    r = row("m1")
    del r["role"]
    assert P.split([r]) == (["m1"], [])


def test_split_with_held_out_roles_holds_out_those_roles_only():
    rows = [row("a", verdict="killed", role="sample"), row("b", role="held-out"),
            row("c", verdict="killed", role="held-out"), row("d", role="surplus"),
            row("e", role="sample")]
    task, held = P.split(rows, held_out_roles=("held-out",))
    assert task == ["e"]
    assert held == ["b", "c"]
    # a row with no role is in no held-out role
    r = row("f", verdict="killed")
    del r["role"]
    assert P.split([r], held_out_roles=("held-out",)) == ([], [])


# ------------------------------------------------------------------ invariants


def test_a_population_that_holds_the_rule_passes_check():
    p = pop([pm("t"), pm("h", verdict="killed")], ["t"], ["h"])
    assert P.check(p) is None


def test_check_raises_on_two_mutants_with_one_id():
    with pytest.raises(InvariantError, match="share an id"):
        P.check(pop([pm("t"), pm("t")], ["t"], []))


def test_check_raises_on_a_mutant_both_task_and_held_out():
    with pytest.raises(InvariantError, match="both tasks and held out"):
        P.check(pop([pm("t")], ["t"], ["t"]))


def test_check_raises_on_ids_outside_the_population():
    with pytest.raises(InvariantError, match="not in the population"):
        P.check(pop([pm("t")], ["t"], ["zz"]))
    with pytest.raises(InvariantError, match="not in the population"):
        P.check(pop([pm("t")], ["t", "zz"], []))


def test_check_raises_on_a_task_the_rule_does_not_make_one():
    with pytest.raises(InvariantError, match="task k is not"):
        P.check(pop([pm("k", verdict="killed")], ["k"], []))


def test_check_raises_on_a_held_out_mutant_that_cannot_be_killed():
    with pytest.raises(InvariantError, match="held-out mutant u cannot"):
        P.check(pop([pm("t"), pm("u", unkillable="x")], ["t"], ["u"]))
    with pytest.raises(InvariantError, match="held-out mutant v cannot"):
        P.check(pop([pm("t"), pm("v", verdict="invalid")], ["t"], ["v"]))


# ------------------------------------------------------------------ from a manifest


def manifest(**kw):
    rows = [row("t2"), row("t1"), row("t3"), row("x", role="surplus"),
            row("h1", verdict="killed", role="held-out", path="pkg/other.py"),
            row("h2", role="held-out"), row("k", verdict="killed", role="sample")]
    m = {"target": {"name": "pkg"}, "mutants": rows, "task_set": ["t3", "t1", "t2"],
         "held_out": {"ids": ["h2", "h1"], "minimum": 7}}
    m.update(kw)
    return m


SOURCES = {"pkg/mod.py": "a\n", "pkg/other.py": "b\n", "pkg/unused.py": "c\n"}


def test_a_manifest_without_splits_gives_its_whole_task_set_as_the_full_split():
    p = P.from_manifest(manifest(), "manifest d", SOURCES, "full")
    assert p.task_set == ["t1", "t2", "t3"]
    assert p.held_out == ["h1", "h2"]
    assert p.split == "full" and p.source == "manifest d" and p.target == "pkg"
    assert p.held_out_minimum == 7
    assert [m.id for m in p.mutants] == ["t2", "t1", "t3", "x", "h1", "h2", "k"]
    assert p.by_id()["h1"].role == "held-out" and p.by_id()["h1"].verdict == "killed"
    # the sources of files with no mutant are not carried
    assert p.sources == {"pkg/mod.py": "a\n", "pkg/other.py": "b\n"}
    assert p.controls == {}
    assert P.from_manifest(manifest(), "manifest d", SOURCES).split == "full"


def test_a_named_split_is_the_task_set_of_the_population():
    p = P.from_manifest(manifest(splits={"full": ["t1", "t2", "t3"], "lite": ["t3", "t1"]}),
                        "manifest d", SOURCES, "lite")
    assert p.task_set == ["t1", "t3"] and p.split == "lite"
    # held out is the whole held-out population whatever the split
    assert p.held_out == ["h1", "h2"]


def test_a_manifest_whose_sets_are_not_the_rule_is_refused():
    with pytest.raises(InvariantError, match="not the rule"):
        P.from_manifest(manifest(task_set=["t1", "t2"]), "m", SOURCES)
    with pytest.raises(InvariantError, match="not the rule"):
        P.from_manifest(manifest(task_set=["t1", "t2", "t3", "k"]), "m", SOURCES)
    with pytest.raises(InvariantError, match="not the rule"):
        P.from_manifest(manifest(held_out={"ids": ["h1"], "minimum": 1}), "m", SOURCES)


def test_an_unknown_split_is_a_user_error_naming_the_splits_there_are():
    with pytest.raises(UserError, match=r"no 'medium' split \(it has: full, lite\)"):
        P.from_manifest(manifest(splits={"lite": ["t1"], "full": ["t1", "t2", "t3"]}), "m",
                        SOURCES, "medium")


def test_a_split_outside_the_task_set_is_refused():
    with pytest.raises(InvariantError, match="outside the task set"):
        P.from_manifest(manifest(splits={"full": ["t1", "t2", "t3"], "lite": ["t1", "k"]}), "m",
                        SOURCES, "lite")
    # the whole task set is a split of itself
    assert P.from_manifest(manifest(splits={"lite": ["t1", "t2", "t3"]}), "m", SOURCES,
                           "lite").task_set == ["t1", "t2", "t3"]


def test_the_full_split_keeps_the_negative_controls_as_sealed():
    negative = {"count": 3, "commitment": "c0ffee"}
    m = manifest(splits={"full": ["t1", "t2", "t3"], "lite": ["t1"]},
                 controls={"negative": negative, "positive": ["p"]})
    full = P.from_manifest(m, "m", SOURCES, "full")
    assert full.controls == {"negative": negative, "positive": ["p"]}
    lite = P.from_manifest(m, "m", SOURCES, "lite")
    assert lite.controls == {"negative": {"count": 1, "of_full": negative}, "positive": ["p"]}
    # the manifest's own controls are not edited
    assert m["controls"]["negative"] == {"count": 3, "commitment": "c0ffee"}
    none = {"count": 0, "commitment": "c0ffee"}
    lite0 = P.from_manifest(manifest(splits={"lite": ["t1"]}, controls={"negative": none}), "m",
                            SOURCES, "lite")
    assert lite0.controls == {"negative": {"count": 0, "of_full": none}}


# ------------------------------------------------------------------ from a mutate run


def record(i, verdict, reachable, covered=(), import_time=False, unkillable=None, killed_by=None):
    mut = Mutant(id=i, path="pkg/mod.py", line=2, end_line=2, col=1, end_col=3, start=5, end=7,
                 function=None, operator="number-constant", original="1", replacement="0",
                 unkillable=unkillable)
    return MutantRecord(mutant=mut, reach=Reach(reachable=reachable, covered_by=tuple(covered),
                                                import_time=import_time),
                        outcome=Outcome(verdict=verdict))


def test_a_mutate_run_is_a_population_with_every_other_killable_mutant_held_out():
    recs = [record("b", "survived", True, covered=("t::x", "t::y")),
            record("a", "survived", True, import_time=True),
            record("c", "killed", True, covered=("t::x",)),
            record("d", "survived", False), record("e", "invalid", False),
            record("f", "survived", True, unkillable="message text")]
    p = P.from_records("proj", recs, "mutate fp", {"pkg/mod.py": "x\n", "pkg/none.py": "y\n"})
    assert p.target == "proj" and p.source == "mutate fp"
    assert p.task_set == ["a", "b"]
    assert p.held_out == ["c", "d"]
    assert p.held_out_minimum is None and p.split == "full"
    assert p.sources == {"pkg/mod.py": "x\n"}
    by = p.by_id()
    assert by["b"].covered_by == ["t::x", "t::y"] and by["b"].reachable is True
    assert by["a"].import_time is True and by["b"].import_time is False
    assert by["d"].verdict == "survived" and by["d"].reachable is False
    assert by["f"].unkillable == "message text"
    assert by["a"].operator == "number-constant" and by["a"].start == 5
    # a task only an import reaches
    assert P.import_only(p) == {"a"}


def test_a_population_mutant_is_the_mutant_it_was_made_from():
    m = P.mutant(pm("q", unkillable="x"))
    assert isinstance(m, Mutant)
    assert (m.id, m.path, m.line, m.end_line, m.col, m.end_col, m.start, m.end) == \
        ("q", "pkg/mod.py", 3, 3, 4, 6, 20, 22)
    assert (m.function, m.operator, m.original, m.replacement, m.unkillable) == \
        ("f", "compare-flip", "==", "!=", "x")


# ------------------------------------------------------------------ --limit


def test_limit_keeps_the_first_tasks_and_drops_the_sealed_negative_count():
    p = pop([pm("t1"), pm("t2"), pm("t3"), pm("h", verdict="killed")], ["t1", "t2", "t3"], ["h"],
            controls={"negative": {"count": 1}, "positive": ["p"]})
    cut = P.limited(p, 2)
    assert cut.task_set == ["t1", "t2"] and cut.limit == 2
    assert cut.held_out == ["h"]
    assert cut.controls == {"positive": ["p"]}
    assert cut.source == "mutate x, first 2 tasks"
    assert p.task_set == ["t1", "t2", "t3"] and p.limit is None  # not edited in place
    one = P.limited(p, 1)
    assert one.task_set == ["t1"] and one.limit == 1


def test_no_limit_or_one_past_the_split_leaves_the_population_as_it_is():
    p = pop([pm("t1"), pm("t2")], ["t1", "t2"], [], controls={"negative": {"count": 1}})
    for limit in (None, 2, 3):
        same = P.limited(p, limit)
        assert same is p
        assert same.limit is None and same.controls == {"negative": {"count": 1}}


# ------------------------------------------------------------------ freeze


def target(tmp_path, kind, name="pkg", sha="s" * 64):
    (tmp_path / "pkg").mkdir(exist_ok=True)
    (tmp_path / "pkg" / "mod.py").write_text("a\n", encoding="utf-8")
    spec = SimpleNamespace(kind=kind, name=name, sdist_sha256=sha)
    return SimpleNamespace(spec=spec, tree=tmp_path, fingerprint="fp0",
                           sources=[SimpleNamespace(path="pkg/mod.py")])


def test_a_pin_is_frozen_from_its_manifest_with_the_split_in_its_source(tmp_path, monkeypatch):
    from killbench import manifests

    m = manifest(splits={"full": ["t1", "t2", "t3"], "lite": ["t2"]})
    m["target"]["sdist_sha256"] = "s" * 64
    monkeypatch.setattr(manifests, "load_manifests", lambda: {"pkg": m})
    digest = manifests.target_digest(m)
    full = P.freeze(target(tmp_path, "pin"), 1, "full")
    assert full.source == f"manifest {digest}"
    assert full.task_set == ["t1", "t2", "t3"]
    assert full.sources == {"pkg/mod.py": "a\n"}
    lite = P.freeze(target(tmp_path, "pin"), 1, "lite")
    assert lite.source == f"manifest {digest} lite split"
    assert lite.task_set == ["t2"] and lite.split == "lite"


def test_a_pin_without_a_manifest_of_its_sdist_is_refused(tmp_path, monkeypatch):
    from killbench import manifests

    m = manifest()
    m["target"]["sdist_sha256"] = "e" * 64
    monkeypatch.setattr(manifests, "load_manifests", lambda: {"pkg": m})
    with pytest.raises(UserError, match="no manifest built from its sdist"):
        P.freeze(target(tmp_path, "pin"), 1, "full")
    monkeypatch.setattr(manifests, "load_manifests", lambda: {})
    with pytest.raises(UserError, match="no manifest built from its sdist"):
        P.freeze(target(tmp_path, "pin"), 1, "full")


def test_a_project_has_only_the_full_split(tmp_path, monkeypatch):
    from killbench import harness, manifests

    def refuse(*a, **kw):
        raise AssertionError("a project asked for a lite split must not be mutated")

    monkeypatch.setattr(harness, "mutate_target", refuse)
    # a project of the same name as a manifest is not a pin: its manifest is not read
    monkeypatch.setattr(manifests, "load_manifests", lambda: {"pkg": manifest()})
    with pytest.raises(UserError, match="exists only for the benchmark's pinned targets"):
        P.freeze(target(tmp_path, "project"), 1, "lite")


def test_a_project_is_frozen_from_a_fresh_mutate_run(tmp_path, monkeypatch):
    from killbench import harness, manifests

    calls = []

    def mutate(spec, jobs=None, target=None, show_progress=True, **kw):
        calls.append((spec.name, jobs, target, show_progress))
        return SimpleNamespace(records=[record("a", "survived", True, covered=("t::x",)),
                                        record("b", "killed", True)])

    monkeypatch.setattr(harness, "mutate_target", mutate)
    monkeypatch.setattr(manifests, "load_manifests", lambda: {"pkg": manifest()})
    t = target(tmp_path, "project")
    p = P.freeze(t, 3, "full")
    assert calls == [("pkg", 3, t, True)]
    assert p.source == "mutate fp0"
    assert p.task_set == ["a"] and p.held_out == ["b"]
    assert p.sources == {"pkg/mod.py": "a\n"}


def test_a_manifest_with_two_mutants_of_one_id_is_refused_by_check():
    m = manifest()
    m["mutants"].append(row("h2", role="held-out"))
    m["held_out"]["ids"] = ["h1", "h2", "h2"]
    with pytest.raises(InvariantError, match="share an id"):
        P.from_manifest(m, "m", SOURCES)


def test_a_mutate_run_that_gives_one_mutant_twice_is_refused():
    recs = [record("a", "survived", True), record("a", "killed", True)]
    with pytest.raises(InvariantError, match="proj: two mutants of the population share an id"):
        P.from_records("proj", recs, "mutate fp", {})
