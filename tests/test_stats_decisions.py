"""The statistics' decisions, each pinned by a case built so that one wrong comparison, one
wrong operator or one dropped check gives a different answer (issue 21: these changes to
killbench.stats once survived the whole suite). Every expected value is derived here, by
hand or with scipy, never by calling the code under test for it."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import binomtest

from killbench import stats
from killbench.compare import compare_runs
from killbench.stats import (
    cluster_bootstrap,
    mcnemar_exact,
    paired_bootstrap_difference,
    tied_groups,
    wilson_interval,
)

N = 20
LEADER = [i < 10 for i in range(N)]  # kills mutants 0..9


def _kills(*ids):
    return [i in ids for i in range(N)]


# X: 0..7 discordant with the leader (b = 8, c = 0); Y: b = 6; W: b = 8, c = 1 (mutant 10)
X = _kills(8, 9)
Y = _kills(6, 7, 8, 9)
W = _kills(8, 9, 10)


def test_the_constructed_p_values():
    """The designs below rest on these exact McNemar p-values (scipy's exact binomial)."""
    assert binomtest(0, 8, 0.5).pvalue == pytest.approx(2 / 2**8)  # X: 0.0078
    assert binomtest(0, 6, 0.5).pvalue == pytest.approx(2 / 2**6)  # Y: 0.03125
    assert binomtest(1, 9, 0.5).pvalue == pytest.approx(2 * 10 / 2**9)  # W: 0.0391
    for other, (b, c) in ((X, (8, 0)), (Y, (6, 0)), (W, (8, 1))):
        assert mcnemar_exact(b, c) == pytest.approx(binomtest(c, b + c, 0.5).pvalue)
        got = (sum(l and not o for l, o in zip(LEADER, other)),
               sum(o and not l for l, o in zip(LEADER, other)))
        assert got == (b, c)


def test_holm_thresholds_grow_as_comparisons_are_rejected():
    # m = 2: X's p 0.0078 <= 0.05 / 2 is rejected, then Y's 0.03125 <= 0.05 / 1. With the
    # thresholds of alpha / (m + i) Y's second one would be 0.05 / 3 and Y would stay.
    assert tied_groups({"L": LEADER, "X": X, "Y": Y}) == [["L"], ["Y", "X"]]


def test_holm_stops_at_the_first_comparison_it_cannot_reject():
    # m = 3, thresholds 0.0167, 0.025, 0.05: X (0.0078) rejected, Y (0.03125 > 0.025) not,
    # and the step-down stops there: W (0.039 <= 0.05) is not rejected either.
    assert tied_groups({"L": LEADER, "X": X, "Y": Y, "W": W}) == [["L", "Y", "W"], ["X"]]


def test_a_p_value_equal_to_its_threshold_is_rejected():
    # b = 5, c = 0: p = 2 / 32 = 0.0625 exactly, and alpha / (1 - 0) = 0.0625 exactly
    z = _kills(5, 6, 7, 8, 9)
    assert mcnemar_exact(5, 0) == 0.0625
    assert tied_groups({"L": LEADER, "Z": z}, alpha=0.0625) == [["L"], ["Z"]]
    assert tied_groups({"L": LEADER, "Z": z}, alpha=0.0624) == [["L", "Z"]]


# ---------------------------------------------------------------- paired difference


def _clustered(seed=4):
    rng = np.random.default_rng(seed)
    a, b, labels = [], [], []
    for t, (pa, pb) in enumerate([(0.6, 0.3), (0.2, 0.25), (0.5, 0.5), (0.9, 0.4)]):
        for _ in range(40):
            a.append(bool(rng.random() < pa))
            b.append(bool(rng.random() < pb))
            labels.append(f"t{t}")
    return a, b, labels


def _cluster_bootstrap_by_hand(a, b, labels, resamples, seed):
    """Resample whole targets; the difference is pooled over the mutants drawn."""
    names = sorted(set(labels))
    d = {t: [int(x) - int(y) for x, y, l in zip(a, b, labels) if l == t] for t in names}
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(resamples):
        drawn = [names[i] for i in rng.integers(0, len(names), size=len(names))]
        out.append(sum(sum(d[t]) for t in drawn) / sum(len(d[t]) for t in drawn))
    return np.quantile(out, [0.025, 0.975])


def test_cluster_paired_difference_is_a_pooled_rate_difference():
    a, b, labels = _clustered()
    est = paired_bootstrap_difference(a, b, clusters=labels, resamples=4000, seed=0)
    assert est.method == stats.CLUSTER_BOOTSTRAP
    assert est[0] == pytest.approx((sum(a) - sum(b)) / len(a))
    assert -1.0 <= est[1] <= est[0] <= est[2] <= 1.0
    low, high = _cluster_bootstrap_by_hand(a, b, labels, 4000, 123)
    assert est[1] == pytest.approx(low, abs=0.02)
    assert est[2] == pytest.approx(high, abs=0.02)


def test_paired_difference_when_the_second_generator_is_better():
    # B kills 30 mutants A misses, A kills 5 that B misses: the difference is -25 / 100
    a = [False] * 30 + [True] * 5 + [True] * 20 + [False] * 45
    b = [True] * 30 + [False] * 5 + [True] * 20 + [False] * 45
    est = paired_bootstrap_difference(a, b, resamples=20000, seed=0)
    assert est[0] == -0.25
    d = np.array(a, dtype=int) - np.array(b, dtype=int)
    se = d.std() / np.sqrt(len(d))
    assert est[1] == pytest.approx(-0.25 - 1.96 * se, abs=0.015)
    assert est[2] == pytest.approx(-0.25 + 1.96 * se, abs=0.015)


@pytest.mark.parametrize("kwargs, message", [
    ({"resamples": 0}, "resamples"), ({"resamples": True}, "resamples"),
    ({"resamples": 10.0}, "resamples"), ({"confidence": 1.0}, "confidence"),
    ({"confidence": 0.0}, "confidence"),
])
def test_paired_difference_checks_its_settings(kwargs, message):
    a, b = [True, False, True], [False, False, True]
    with pytest.raises(ValueError, match=message):
        paired_bootstrap_difference(a, b, **kwargs)
    with pytest.raises(ValueError, match=message):
        paired_bootstrap_difference(a, b, clusters=["t1", "t2", "t2"], **kwargs)


# ---------------------------------------------------------------- cluster bootstrap


def test_the_wilson_floor_widens_one_side_only():
    """Two targets, (17, 21) and (1, 1): the resampled ratios are 17/21, 18/22 and 1, so the
    percentile interval is [17/21, 1]. Wilson's on 18/22 is [0.615, 0.927]: wider below,
    narrower above. The floor takes the lower bound from Wilson and keeps the upper."""
    clusters = [(17, 21), (1, 1)]
    w_low, w_high = wilson_interval(18, 22)
    assert w_low < 17 / 21 and w_high < 1.0
    plain = cluster_bootstrap(clusters, resamples=4000, floor=False)
    assert plain.method == stats.CLUSTER_BOOTSTRAP
    assert (plain.low, plain.high) == pytest.approx((17 / 21, 1.0))
    floored = cluster_bootstrap(clusters, resamples=4000)
    assert floored.method == stats.WILSON_FLOOR
    assert (floored.low, floored.high) == pytest.approx((w_low, 1.0))


@pytest.mark.parametrize("clusters, message", [
    ([(2.5, 5), (1, 2)], "k of cluster 0"), ([(1, 5.0), (1, 2)], "n of cluster 0"),
    ([(1, 5), (True, 2)], "k of cluster 1"), ([(-1, 5), (1, 2)], "k of cluster 0"),
    ([(1, 5, 7)], "cluster 0 must be a"),
])
def test_cluster_bootstrap_checks_each_cluster(clusters, message):
    with pytest.raises(ValueError, match=message):
        cluster_bootstrap(clusters, resamples=100)


@pytest.mark.parametrize("kwargs, message", [
    ({"resamples": 0}, "resamples"), ({"confidence": 1.5}, "confidence")])
def test_cluster_bootstrap_checks_its_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        cluster_bootstrap([(1, 5), (2, 5)], **kwargs)


@pytest.mark.parametrize("b, c", [(2.5, 1), (1, 2.5), (True, 1), (-1, 3), (3, -1)])
def test_mcnemar_refuses_what_is_not_a_count(b, c):
    with pytest.raises(ValueError):
        mcnemar_exact(b, c)


# ---------------------------------------------------------------- compare


def _score(path, kills: dict[str, list[str]], n: dict[str, int], name):
    path.mkdir()
    targets = {t: {"kills": {"k": len(ids), "n": n[t]}, "killed_task_ids": ids,
                   "population_source": f"manifest {t}"} for t, ids in kills.items()}
    (path / "score.json").write_text(json.dumps({
        "manifest_digest": "d", "run": {"generator": {"name": name}, "model": None},
        "targets": targets}))
    return path


def test_compare_clusters_by_target_only_when_there_are_several(tmp_path):
    one_a = _score(tmp_path / "1a", {"t": ["m0", "m1", "m2"]}, {"t": 20}, "A")
    one_b = _score(tmp_path / "1b", {"t": ["m0"]}, {"t": 20}, "B")
    single = compare_runs([one_a, one_b], resamples=1000)
    assert single["difference"]["method"] == stats.MUTANT_BOOTSTRAP
    two_a = _score(tmp_path / "2a", {"t": ["m0", "m1"], "u": ["m5"]}, {"t": 20, "u": 20}, "A")
    two_b = _score(tmp_path / "2b", {"t": ["m0"], "u": []}, {"t": 20, "u": 20}, "B")
    several = compare_runs([two_a, two_b], resamples=1000)
    assert several["difference"]["method"] == stats.CLUSTER_BOOTSTRAP
    assert several["difference"]["estimate"] == pytest.approx(2 / 40)


def test_the_documented_defaults_seed_0_and_alpha_005():
    # scores and the leaderboard say "10000 resamples, seed 0"; docs/benchmark.md's power
    # table is at the 5% level
    clusters = [(1, 5), (3, 7), (0, 4), (2, 6), (5, 11), (1, 13), (4, 9), (0, 3), (6, 17), (2, 8)]
    assert stats.cluster_bootstrap(clusters).resamples_used == 10000
    assert stats.cluster_bootstrap(clusters, resamples=300, floor=False) == \
        stats.cluster_bootstrap(clusters, resamples=300, seed=0, floor=False)
    assert stats.cluster_bootstrap(clusters, resamples=300, floor=False) != \
        stats.cluster_bootstrap(clusters, resamples=300, seed=1, floor=False)
    a, b = [True, False, True, True, False, False] * 5, [False, False, True, False, True, False] * 5
    assert stats.paired_bootstrap_difference(a, b) == stats.paired_bootstrap_difference(a, b, seed=0)
    assert stats.paired_bootstrap_difference(a, b) != stats.paired_bootstrap_difference(a, b, seed=1)
    assert stats.mcnemar_power(40, 0.2, 0.5) == stats.mcnemar_power(40, 0.2, 0.5, alpha=0.05)
    assert 0 < stats.mcnemar_power(40, 0.2, 0.5) < 1


def test_one_resample_is_allowed_and_zero_is_not():
    est = stats.cluster_bootstrap([(1, 5), (3, 7)], resamples=1, floor=False)
    assert est.method == stats.CLUSTER_BOOTSTRAP
    with pytest.raises(ValueError, match="resamples must be >= 1"):
        stats.cluster_bootstrap([(1, 5), (3, 7)], resamples=0)


def test_clusters_count_by_their_mutants_not_their_kills():
    # two clusters with mutants, one with kills: still two clusters, so the bootstrap runs
    est = stats.cluster_bootstrap([(2, 5), (0, 5)], floor=False)
    assert est.method == stats.CLUSTER_BOOTSTRAP
    one = stats.cluster_bootstrap([(2, 5), (0, 0)], floor=False)
    assert one.method == stats.WILSON_SINGLE_CLUSTER


def _power_by_enumeration(n, p1, p2, alpha):
    """Every outcome (b mutants only A kills, c only B kills, the rest) with its multinomial
    probability, rejected when the exact two-sided McNemar p-value is at most alpha."""
    from fractions import Fraction
    from math import comb, factorial

    b_rate, c_rate = p1 * (1 - p2), p2 * (1 - p1)
    rest = 1 - b_rate - c_rate
    power = 0.0
    for b in range(n + 1):
        for c in range(n + 1 - b):
            d = b + c
            p = min(Fraction(1), Fraction(2 * sum(comb(d, i) for i in range(min(b, c) + 1)), 2 ** d))
            if d and p <= Fraction(alpha):
                power += (factorial(n) / (factorial(b) * factorial(c) * factorial(n - d))
                          * b_rate ** b * c_rate ** c * rest ** (n - d))
    return power


@pytest.mark.parametrize("n, p1, p2, alpha", [
    (12, 0.2, 0.6, 0.05), (12, 0.6, 0.2, 0.05), (15, 0.1, 0.5, 0.2), (9, 0.3, 0.9, 0.0625),
    (5, 0.0, 1.0, 0.0625), (20, 0.4, 0.45, 0.05), (7, 0.5, 0.5, 0.5), (3, 0.2, 0.9, 0.9),
    (10, 0.0, 0.0, 0.05), (10, 1.0, 1.0, 0.05)])
def test_mcnemar_power_equals_the_enumeration_of_every_outcome(n, p1, p2, alpha):
    assert stats.mcnemar_power(n, p1, p2, alpha) == pytest.approx(_power_by_enumeration(n, p1, p2, alpha),
                                                                  abs=1e-9)


def test_mcnemar_power_checks_its_rates_by_name():
    with pytest.raises(ValueError, match="p1 must be a rate"):
        stats.mcnemar_power(10, 1.5, 0.5)
    with pytest.raises(ValueError, match="p2 must be a rate"):
        stats.mcnemar_power(10, 0.5, -0.1)


@pytest.mark.parametrize("block_cells", [10**9, 6])
def test_every_resample_row_is_filled_in_one_block_or_many(monkeypatch, block_cells):
    # every unit holds (1, 2): each resample of 3 units sums to (3, 6), whatever was drawn
    monkeypatch.setattr(stats, "_MAX_BLOCK_CELLS", block_cells)
    columns = np.array([[1, 2]] * 3, dtype=np.int64)
    out = stats._resampled_sums(columns, 5, np.random.default_rng(0))
    assert out.shape == (5, 2) and (out == [3, 6]).all()


# ---- edges found by mutating killbench.stats

def test_a_rate_checks_each_of_its_fields():
    from killbench.stats import Rate

    ok = dict(k=1, n=2, low=0.1, high=0.9, what="x")
    assert Rate(**ok).confidence == 0.95
    assert Rate(**{**ok, "low": 0.5, "high": 0.5}).high == 0.5  # a point interval is an interval
    for bad, field in (({"n": 2.5}, "n"), ({"n": -1, "k": 0}, "n"), ({"k": -1}, "k"),
                       ({"k": 1.5}, "k"), ({"confidence": 1.5}, "confidence")):
        with pytest.raises(ValueError, match=f"^{field} must"):
            Rate(**{**ok, **bad})


def test_each_estimate_names_the_method_that_made_it():
    one = stats.cluster_bootstrap([(3, 10)], resamples=200, seed=0)
    assert one.method == "wilson-single-cluster"
    # a cluster counts when it has mutants, whether or not any was killed, even one mutant
    assert stats.cluster_bootstrap([(0, 50), (30, 50)], resamples=200, seed=0,
                                   floor=False).method == "cluster-bootstrap"
    assert stats.cluster_bootstrap([(1, 1), (0, 1)], resamples=200, seed=0,
                                   floor=False).method == "cluster-bootstrap"
    assert stats.cluster_bootstrap([(0, 5), (0, 0)], resamples=200, seed=0).method == \
        "wilson-single-cluster"
    floored = stats.cluster_bootstrap([(1, 40), (1, 40)], resamples=200, seed=0)
    assert floored.method == "wilson-floor"
    a, b = [True] * 30 + [False] * 70, [True] * 20 + [False] * 80
    assert stats.paired_bootstrap_difference(a, b, resamples=200).method == "mutant-bootstrap"
    two = ["x"] * 50 + ["y"] * 50
    assert stats.paired_bootstrap_difference(a, b, clusters=two, resamples=200).method == \
        "cluster-bootstrap"
    assert stats.paired_bootstrap_difference(a, b, clusters=["x"] * 100, resamples=200).method == \
        "mutant-bootstrap-single-cluster"


def test_a_bad_confidence_is_named_before_a_bad_cluster():
    with pytest.raises(ValueError, match="^confidence"):
        stats.cluster_bootstrap([(5, 3)], confidence=2.0)


def test_resampled_sums_of_more_units_than_a_block_holds():
    cols = np.ones((2_000_001, 1), dtype=np.int64)
    out = stats._resampled_sums(cols, 2, np.random.default_rng(0))
    assert out.tolist() == [[2_000_001], [2_000_001]]


def test_mcnemar_names_its_bad_argument_and_no_discordance_is_p_one():
    with pytest.raises(ValueError, match="^c must"):
        stats.mcnemar_exact(1, -1)
    assert stats.mcnemar_exact(0, 0) == 1.0 and stats.mcnemar_exact(1, 0) == 1.0


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_alpha_is_strictly_between_zero_and_one(alpha):
    with pytest.raises(ValueError, match="alpha"):
        stats.mcnemar_power(50, 0.2, 0.4, alpha=alpha)
    with pytest.raises(ValueError, match="alpha"):
        stats.tied_groups({"a": [True, False], "b": [False, False]}, alpha=alpha)


def test_power_needs_a_count_of_mutants():
    with pytest.raises(ValueError, match="^n must"):
        stats.mcnemar_power(-1, 0.2, 0.4)


def test_the_defaults_of_the_minimum_detectable_difference_are_the_documented_ones():
    import inspect

    # docs/benchmark.md's power table: alpha 0.05, power 0.8, no design effect, 0.1-point steps
    params = inspect.signature(stats.minimum_detectable_difference).parameters
    assert {k: p.default for k, p in params.items() if p.default is not p.empty} == \
        {"alpha": 0.05, "power": 0.8, "design_effect": 1.0, "step": 0.001}


def test_the_paired_bootstrap_defaults_to_ten_thousand_resamples():
    a = [True] * 130 + [False] * 1870
    b = [False] * 130 + [True] * 70 + [False] * 1800
    base = tuple(stats.paired_bootstrap_difference(a, b))
    assert base == tuple(stats.paired_bootstrap_difference(a, b, resamples=10_000, seed=0))
    assert base != tuple(stats.paired_bootstrap_difference(a, b, resamples=10_001, seed=0))


def test_kill_vectors_are_named_in_their_errors():
    with pytest.raises(ValueError, match="^a must"):
        stats.paired_bootstrap_difference([[True]], [True])
    with pytest.raises(ValueError, match="^b must"):
        stats.paired_bootstrap_difference([True], [2])
    with pytest.raises(ValueError) as info:
        stats.tied_groups({"a": [True, False], "b": [True]})
    assert str(info.value) == "all entries must cover the same mutants; lengths differ (a: 2, b: 1)"


def test_clusters_of_one_mutant_and_clusters_with_no_kill_still_count_as_clusters():
    # two clusters of n == 1 each: two clusters, bootstrapped (not the single-cluster Wilson)
    boot = (stats.CLUSTER_BOOTSTRAP, stats.WILSON_FLOOR)
    assert stats.cluster_bootstrap([(1, 1), (0, 1)], resamples=200).method in boot
    # a cluster with no kill is a cluster too
    assert stats.cluster_bootstrap([(3, 5), (0, 4)], resamples=200).method in boot
    assert stats.cluster_bootstrap([(3, 5), (0, 0)], resamples=200).method == stats.WILSON_SINGLE_CLUSTER


def test_a_paired_difference_over_exactly_two_clusters_is_clustered():
    a, b = [True, False, True, True], [False, False, True, False]
    est = stats.paired_bootstrap_difference(a, b, ["x", "x", "y", "y"], resamples=200)
    assert est.method == stats.CLUSTER_BOOTSTRAP
    one = stats.paired_bootstrap_difference(a, b, ["x"] * 4, resamples=200)
    assert one.method == stats.MUTANT_BOOTSTRAP_SINGLE_CLUSTER


def test_resamples_that_drew_only_empty_clusters_are_dropped_and_only_those():
    clusters = [(1, 1), (0, 1), (0, 0)]
    est = stats.cluster_bootstrap(clusters, resamples=2000, seed=0, floor=False)
    sums = stats._resampled_sums(np.array(clusters), 2000, np.random.default_rng(0))
    drawn = sums[:, 1] > 0
    assert est.resamples_used == int(drawn.sum()) < 2000
    assert (est.low, est.high) == stats._percentiles(sums[drawn, 0] / sums[drawn, 1], 0.95)


# ---- the minimum detectable difference, on values where each bound of its search shows


def test_the_minimum_detectable_difference_is_the_first_step_with_the_power():
    mdd = stats.minimum_detectable_difference
    d = mdd(200, 0.2, step=0.01)
    assert d == 0.13
    assert stats.mcnemar_power(200, 0.2, 0.2 + 0.13) >= 0.8 > stats.mcnemar_power(200, 0.2, 0.2 + 0.12)
    # a power reached exactly at a step is reached there
    p = stats.mcnemar_power(200, 0.2, 0.2 + 0.1)
    assert mdd(200, 0.2, step=0.1, power=p) == 0.1
    assert mdd(200, 0.2, step=0.05, power=p) == 0.1
    # rounded to six decimals: two steps of 0.1234567 are 0.2469134
    assert mdd(200, 0.2, step=0.1234567) == 0.246913


def test_a_design_effect_divides_the_mutants_that_count():
    mdd = stats.minimum_detectable_difference
    assert mdd(400, 0.2, step=0.01, design_effect=2.0) == mdd(200, 0.2, step=0.01) == 0.13
    assert mdd(400, 0.2, step=0.01) < 0.13
    assert mdd(200, 0.2, step=0.01, design_effect=1.0) == 0.13
    for bad in (0.5, 0.0, 0.999):
        with pytest.raises(ValueError, match="design effect is at least 1"):
            mdd(200, 0.2, design_effect=bad)


def test_the_search_stops_at_a_rate_of_one_and_includes_it():
    mdd = stats.minimum_detectable_difference
    # 40 mutants at 0.75: a rate of 1 is detected (power 0.96), and a step of 0.25 lands on it
    assert stats.mcnemar_power(40, 0.75, 1.0) > 0.95
    assert mdd(40, 0.75, step=0.25) == 0.25
    # a step past 1 is never tried, even as 1
    assert mdd(40, 0.75, step=0.3) is None
    # a sum that rounds to a hair above 1 still counts as 1
    top = 1.0 + 1e-12
    base = top - 0.25
    assert base + 0.25 == top
    assert mdd(40, base, step=0.25) == 0.25
    # nothing detectable: five mutants
    assert mdd(5, 0.9, step=0.01) is None


def test_an_estimate_is_its_first_number():
    est = stats.cluster_bootstrap([(3, 10), (5, 10)], resamples=200)
    assert est.estimate == est[0] == 0.4
    assert est.estimate != est[1]


def test_a_rate_refuses_an_interval_out_of_order():
    with pytest.raises(ValueError, match="low <= high"):
        stats.Rate(k=1, n=2, low=0.6, high=0.4, what="mutants")
    with pytest.raises(ValueError, match="low <= high"):
        stats.Rate(k=1, n=2, low=0.2, high=1.2, what="mutants")


def test_a_bootstrap_whose_every_resample_is_empty_is_an_error():
    # two clusters with mutants among fifty empty ones: seed 2's single resample draws only empty ones
    clusters = [(1, 2), (0, 3)] + [(0, 0)] * 50
    with pytest.raises(ValueError, match="every resample drew only empty clusters"):
        stats.cluster_bootstrap(clusters, resamples=1, seed=2)
