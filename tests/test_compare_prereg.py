"""compare on hand-made score files; pre-registration refused after the start, judged by numbers."""

from __future__ import annotations

import json

import pytest

from killbench.compare import compare_runs
from killbench.errors import UserError
from killbench.preregister import judge, predictions, preregister


def _score(path, kills: dict[str, list[str]], n: dict[str, int], name="g", source="manifest t1", digest="d"):
    path.mkdir()
    targets = {t: {"kills": {"k": len(ids), "n": n[t]}, "killed_task_ids": ids, "population_source": source}
               for t, ids in kills.items()}
    (path / "score.json").write_text(json.dumps({
        "manifest_digest": digest, "run": {"generator": {"name": name}, "model": None}, "targets": targets}))
    return path


def test_compare_two_runs(tmp_path):
    a = _score(tmp_path / "a", {"t": [f"m{i}" for i in range(12)]}, {"t": 40}, "A")
    b = _score(tmp_path / "b", {"t": ["m0", "m1", "x1", "x2", "x3"]}, {"t": 40}, "B")
    r = compare_runs([a, b], resamples=2000)
    assert r["mutants"] == 40 and r["kills"] == [12, 5]
    assert (r["a_only"], r["b_only"]) == (10, 3)
    # exact McNemar by hand: 2 * sum_{i<=3} C(13, i) / 2^13 = 2 * 378 / 8192
    assert r["mcnemar_p"] == pytest.approx(2 * 378 / 8192)
    assert "A" in r["sentence"] and "kills 10 mutants" in r["sentence"]
    assert r["difference"]["low"] <= 7 / 40 <= r["difference"]["high"]


def test_compare_refuses_different_task_sets(tmp_path):
    a = _score(tmp_path / "a", {"t": ["m0"]}, {"t": 40})
    b = _score(tmp_path / "b", {"t": ["m0"]}, {"t": 41})
    with pytest.raises(UserError, match="different sizes"):
        compare_runs([a, b])


def test_compare_checks_each_targets_own_manifest(tmp_path):
    # the benchmark grew between the two scorings (other digest), this target's manifest did not
    a = _score(tmp_path / "a", {"t": ["m0"]}, {"t": 40}, "A", digest="before")
    b = _score(tmp_path / "b", {"t": ["m1"]}, {"t": 40}, "B", digest="after")
    assert compare_runs([a, b], resamples=200)["mutants"] == 40
    c = _score(tmp_path / "c", {"t": ["m0"]}, {"t": 40}, "C", source="manifest t2")
    with pytest.raises(UserError, match="different task sets"):
        compare_runs([a, c])


def test_preregistration(tmp_path):
    run = tmp_path / "run"
    e = preregister(run, "amplify kills fewer than a fifth", "pooled.kill_rate < 0.2")
    assert len(e["sha256"]) == 64
    (run / "config.json").write_text(json.dumps({"started_at": "9999-01-01T00:00:00+00:00"}))
    with pytest.raises(UserError, match="already started"):
        preregister(run, "too late")
    [p] = predictions(run)
    assert p["intact"] and p["before_run"]
    score = {"pooled_kills": {"k": 3, "n": 20}, "targets": {}}
    assert judge(p["check"], score) == "held"
    assert judge("pooled.kills >= 4", score) == "missed"
    assert judge("nowhere.kills >= 4", score) == "not measurable"
    with pytest.raises(UserError, match="SCOPE.METRIC OP NUMBER"):
        judge("kills more than 4", score)


def test_a_comparison_names_its_runs_and_reports_the_bootstrap_it_ran(tmp_path):
    from killbench.stats import paired_bootstrap_difference

    a = _score(tmp_path / "a", {"t": [f"m{i}" for i in range(12)]}, {"t": 40}, "A")
    b = _score(tmp_path / "b", {"t": ["m0", "m1", "x1", "x2", "x3"]}, {"t": 40}, "B")
    doc = json.loads((b / "score.json").read_text())
    doc["run"]["model"] = "local/m"
    (b / "score.json").write_text(json.dumps(doc))
    r = compare_runs([a, b], resamples=500, seed=3)
    assert r["runs"] == ["A [a]", "B (local/m) [b]"]
    va = [True] * 12 + [False] * 3 + [False] * 25
    vb = [True, True] + [False] * 10 + [True] * 3 + [False] * 25
    # one target: no clusters
    est = paired_bootstrap_difference(va, vb, clusters=None, resamples=500, seed=3)
    assert r["difference"] == {"estimate": est[0], "low": est[1], "high": est[2], "method": est.method}
    assert est[1] < est[0] < est[2]
    # the defaults, 10,000 resamples and seed 0, on counts fine enough to tell them apart
    c = _score(tmp_path / "c", {"t": [f"a{i}" for i in range(130)]}, {"t": 2000}, "C")
    d = _score(tmp_path / "d", {"t": [f"b{i}" for i in range(70)]}, {"t": 2000}, "D")
    vc = [True] * 130 + [False] * 1870
    vd = [False] * 130 + [True] * 70 + [False] * 1800

    def boot(resamples, seed):
        return tuple(paired_bootstrap_difference(vc, vd, clusters=None, resamples=resamples, seed=seed))

    got = compare_runs([c, d])["difference"]
    assert (got["estimate"], got["low"], got["high"]) == boot(10_000, 0)
    assert boot(10_000, 0) != boot(10_001, 0) and boot(10_000, 0) != boot(10_000, 1)


def test_a_two_run_comparison_renders_its_numbers_in_points():
    from killbench.compare import render_compare

    result = {"runs": ["A [a]", "B [b]"], "mutants": 40, "kills": [12, 5],
              "sentence": "A kills 10 mutants B misses; B kills 3 mutants A misses (of 40 task-set mutants).",
              "difference": {"estimate": 0.175, "low": 0.05, "high": -0.0123, "method": "bootstrap"},
              "mcnemar_p": 2 * 378 / 8192, "a_only": 10, "b_only": 3}
    assert render_compare(result).split("\n") == [
        "A [a]: 12 / 40 task-set mutants killed",
        "B [b]: 5 / 40 task-set mutants killed",
        result["sentence"],
        "difference (first - second): +17.5 points [95% CI +5.0 to -1.2] (bootstrap)",
        "exact McNemar p = 0.09229 on 13 discordant mutants"]


def test_more_runs_render_as_numbered_groups():
    from killbench.compare import render_compare

    result = {"runs": ["A", "B", "C"], "mutants": 9, "kills": [7, 6, 1],
              "groups": [["A", "B"], ["C"]]}
    assert render_compare(result).split("\n") == [
        "A: 7 / 9 task-set mutants killed", "B: 6 / 9 task-set mutants killed",
        "C: 1 / 9 task-set mutants killed",
        "group 1 (not distinguishable from its leader): A, B",
        "group 2 (not distinguishable from its leader): C"]


def test_compare_needs_score_files_and_a_shared_target(tmp_path):
    (tmp_path / "bare").mkdir()
    a = _score(tmp_path / "a", {"t": ["m0"]}, {"t": 4}, "A")
    with pytest.raises(UserError, match="has no score.json"):
        compare_runs([a, tmp_path / "bare"])
    b = _score(tmp_path / "b", {"u": ["m0"]}, {"u": 4}, "B")
    with pytest.raises(UserError, match="share no target"):
        compare_runs([a, b])


def test_three_runs_are_grouped_not_paired(tmp_path):
    a = _score(tmp_path / "a", {"t": [f"m{i}" for i in range(30)]}, {"t": 40}, "A")
    b = _score(tmp_path / "b", {"t": [f"m{i}" for i in range(29)]}, {"t": 40}, "B")
    c = _score(tmp_path / "c", {"t": []}, {"t": 40}, "C")
    r = compare_runs([a, b, c], resamples=200)
    assert r["groups"] == [["A [a]", "B [b]"], ["C [c]"]]
    assert r["kills"] == [30, 29, 0] and "sentence" not in r and "difference" not in r
