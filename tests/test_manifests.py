"""Manifests: deterministic bytes from a fresh build, invariants, and a digest that
changes when a pin changes."""

from __future__ import annotations


import pytest

from killbench.config import load_local
from killbench.manifests import (BuildSettings, build_manifest, canonical_bytes, digest,
                                 index_of, render_benchmark_md, survivor_places)

SMALL = BuildSettings(seed=3, tasks_per_target=4, held_out_per_target=5, lite_per_target=2,
                      max_function_share=0.5,
                      timeout_floor=4.0)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The same fixture built twice, each time from an empty cache (once for the module:
    the tests below only read the two manifests)."""
    import shutil
    from pathlib import Path

    project = tmp_path_factory.mktemp("project") / "basic"
    shutil.copytree(Path(__file__).parent / "fixtures" / "basic", project)
    out = []
    with pytest.MonkeyPatch.context() as mp:
        for i in range(2):
            mp.setenv("KILLBENCH_CACHE", str(tmp_path_factory.mktemp(f"cache{i}")))
            out.append(build_manifest(load_local(project), SMALL, jobs=2, show_progress=False))
    return out


@pytest.mark.slow
def test_two_fresh_builds_give_identical_bytes(built):
    a, b = built
    assert canonical_bytes(a) == canonical_bytes(b)


@pytest.mark.slow
def test_manifest_invariants(built):
    m = built[0]
    by_id = {r["id"]: r for r in m["mutants"]}
    task = set(m["task_set"])
    held = set(m["held_out"]["ids"])
    assert task and held and not task & held
    for i in task:
        r = by_id[i]
        assert r["verdict"] == "survived" and r["reachable"] and r["unkillable"] is None
    for i in held:
        assert by_id[i]["verdict"] != "invalid" and by_id[i]["unkillable"] is None
    for i, reason in m["unkillable"].items():
        assert by_id[i]["unkillable"] == reason
    sample = [r for r in m["mutants"] if r["role"] == "sample"]
    assert len(sample) == m["counts"]["mutants"]
    assert all(r["operator"] in m["operators"]["default"] for r in sample)
    assert all(r["unkillable"] is None and r["reachable"] for r in sample)
    assert task <= {r["id"] for r in sample}
    assert len(task) == SMALL.tasks_per_target and m["counts"]["task_set_full"]
    assert sum(m["counts"]["verdicts"].values()) == m["counts"]["mutants"]
    assert held == {r["id"] for r in m["mutants"] if r["role"] == "held-out"}
    assert len(held) == m["held_out"]["minimum"] == SMALL.held_out_per_target
    assert set(m["splits"]["lite"]) <= task and len(m["splits"]["lite"]) == SMALL.lite_per_target
    assert m["splits"]["full"] == m["task_set"]
    cap = SMALL.cap(SMALL.tasks_per_target)
    per_fn = {}
    for i in task:
        per_fn[by_id[i]["function"]] = per_fn.get(by_id[i]["function"], 0) + 1
    assert max(per_fn.values()) <= cap


@pytest.mark.slow
def test_changing_a_pin_changes_the_digest(built):
    m = built[0]
    before = digest({"basic": m})
    changed = dict(m, target=dict(m["target"], test_requires=["pytest==9.0.2"]))
    assert digest({"basic": changed}) != before
    assert digest({"basic": dict(m)}) == before
    index = index_of({"basic": m})
    assert index["digest"] == before
    assert before in render_benchmark_md(index, {"basic": m})


def test_survivor_places_split_every_sampled_survivor_once():
    def rec(role, verdict, reachable, covered_by, unkillable=None):
        return {"role": role, "verdict": verdict, "reachable": reachable,
                "covered_by": covered_by, "unkillable": unkillable}
    m = {"mutants": [
        rec("sample", "survived", True, ["t::a"]),
        rec("sample", "survived", True, []),           # reached only by the import
        rec("sample", "survived", True, []),
        rec("sample", "survived", False, []),
        rec("sample", "survived", True, [], "identical bytecode"),
        rec("sample", "killed", True, ["t::a"]),       # not a survivor
        rec("held-out-family", "survived", True, []),  # not in the sample
    ]}
    c = survivor_places(m)
    assert dict(c) == {"run by a test": 1, "import only": 2, "unreached": 1, "unkillable": 1}


def test_the_draw_is_re_derived_from_the_records():
    """check_draw replays the pre-registered draw over a manifest's records: an edited role
    or a task swapped for another survivor is named."""
    from killbench.manifests import _rank, check_draw

    s = BuildSettings(seed=7, tasks_per_target=2, max_function_share=0.5)

    def rec(i, fn, verdict="survived"):
        return {"id": i, "function": fn, "verdict": verdict, "reachable": True, "unkillable": None}
    rows = [rec("a", "f"), rec("b", "f"), rec("c", "f", "killed"), rec("d", "g"), rec("e", "g"),
            rec("h", "h")]
    order = sorted(rows, key=lambda r: _rank(7, r["id"]))
    tasks, per, roles = [], {}, {}
    for r in order:  # the rules, written out once more by hand
        if len(tasks) >= 2:
            roles[r["id"]] = "surplus"
        elif per.get(r["function"], 0) >= 1:
            roles[r["id"]] = "capped"
        else:
            roles[r["id"]] = "sample"
            if r["verdict"] == "survived":
                tasks.append(r["id"])
                per[r["function"]] = per.get(r["function"], 0) + 1
    m = {"build": s.to_dict(), "target": {"name": "t"}, "task_set": sorted(tasks),
         "mutants": [dict(r, role=roles[r["id"]]) for r in rows]}
    assert check_draw(m) == []
    other = next(r["id"] for r in rows if r["verdict"] == "survived" and r["id"] not in tasks)
    swapped = dict(m, task_set=sorted([tasks[0], other]))
    assert any("not the draw's survivors" in p for p in check_draw(swapped))
    assert set(roles.values()) != {"sample"}  # the example has capped or surplus mutants
    edited = dict(m, mutants=[dict(r, role="sample") for r in m["mutants"]])
    assert any("the draw's rules give" in p for p in check_draw(edited))


def test_build_settings_of_the_committed_manifests_read_back_unchanged_and_without_survivor_confirmation():
    """1.0.0 was built judging survivors on their covering tests only: its settings must read
    back as they were written (the digest depends on them) and verify must reproduce that
    procedure; a build that confirms survivors says so in its settings."""
    from killbench.manifests import BuildSettings, load_manifests

    for name, m in load_manifests().items():
        settings = BuildSettings.from_dict(m["build"])
        assert settings.to_dict() == m["build"], name
        assert settings.run_settings().confirm_survivors is False, name
    confirming = BuildSettings.from_dict({**next(iter(load_manifests().values()))["build"],
                                          "confirm_survivors": True})
    assert confirming.to_dict()["confirm_survivors"] is True
    assert confirming.run_settings().confirm_survivors is True
    assert BuildSettings.from_dict(confirming.to_dict()) == confirming


def test_the_committed_manifests_run_without_a_cpu_budget_and_a_build_that_has_one_says_so():
    """1.0.0's runs ended at the wall-clock deadline only; a CPU budget can turn a slow run
    into a timeout, so verify must not apply one to 1.0.0, and a build with one records it."""
    from killbench.errors import UserError
    from killbench.manifests import BuildSettings, load_manifests

    for name, m in load_manifests().items():
        settings = BuildSettings.from_dict(m["build"])
        assert "cpu_floor" not in m["build"] and settings.run_settings().cpu_floor is None, name
    build = next(iter(load_manifests().values()))["build"]
    budgeted = BuildSettings.from_dict({**build, "cpu_floor": 1.0})
    assert budgeted.to_dict()["cpu_floor"] == 1.0 and budgeted.run_settings().cpu_floor == 1.0
    assert BuildSettings.from_dict(budgeted.to_dict()) == budgeted
    for bad in ("1", 0.1, True, [1]):
        with pytest.raises(UserError, match="cpu_floor"):
            BuildSettings.from_dict({**build, "cpu_floor": bad})
