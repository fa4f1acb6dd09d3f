"""Known answers for the intervals and tests in killbench.stats."""

import copy
import json
import math
import pickle
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import binomtest

from killbench import stats
from killbench.stats import (
    Rate,
    cluster_bootstrap,
    mcnemar_exact,
    paired_bootstrap_difference,
    rate,
    tied_groups,
    wilson_interval,
)

Z95 = 1.959963984540054  # the 0.975 quantile of the standard normal


def wilson_by_hand(k, n, z=Z95):
    """Wilson's formula written out, independently of the module."""
    p = k / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    denom = 1 + z * z / n
    return (centre - spread) / denom, (centre + spread) / denom


# ---------------------------------------------------------------- Wilson


@pytest.mark.parametrize("k, n", [(44, 53), (0, 10), (10, 10), (1, 2), (81, 263)])
def test_wilson_matches_formula(k, n):
    low, high = wilson_interval(k, n)
    want_low, want_high = wilson_by_hand(k, n)
    assert low == pytest.approx(want_low, abs=1e-12)
    assert high == pytest.approx(want_high, abs=1e-12)


def test_wilson_known_numbers():
    # 44/53: p = 0.8302, centre (0.8302 + 0.03624) / 1.07248, half-width 0.1001
    assert wilson_interval(44, 53) == pytest.approx((0.70775, 0.90800), abs=5e-5)
    # k = 0: low is exactly 0, high = (z^2/n) / (1 + z^2/n) = 0.38415 / 1.38415
    assert wilson_interval(0, 10) == (0.0, pytest.approx(0.277533, abs=1e-6))
    # k = n: mirror image, low = 1 / 1.38415
    assert wilson_interval(10, 10) == (pytest.approx(0.722467, abs=1e-6), 1.0)


def test_wilson_published_value():
    # 81 / 263, the example of Newcombe (1998) and of the Wikipedia article:
    # Wilson 95% interval 0.2553 to 0.3662.
    low, high = wilson_interval(81, 263)
    assert low == pytest.approx(0.2553, abs=1e-4)
    assert high == pytest.approx(0.3662, abs=1e-4)


def test_wilson_no_information_and_confidence():
    assert wilson_interval(0, 0) == (0.0, 1.0)
    low95, high95 = wilson_interval(20, 50)
    low99, high99 = wilson_interval(20, 50, confidence=0.99)
    assert low99 < low95 < 0.4 < high95 < high99


@pytest.mark.parametrize(
    "k, n, message",
    [
        (11, 10, "between 0 and n"),
        (-1, 10, "k must be >= 0"),
        (0, -1, "n must be >= 0"),
        (1.5, 3, "integer"),
    ],
)
def test_wilson_rejects_bad_counts(k, n, message):
    with pytest.raises(ValueError, match=message):
        wilson_interval(k, n)


def test_wilson_rejects_bad_confidence():
    with pytest.raises(ValueError, match="confidence"):
        wilson_interval(1, 2, confidence=95)


# ---------------------------------------------------------------- Rate


def test_rate_prints_denominator_and_interval():
    r = rate(44, 53, "task-set mutants")
    assert str(r) == "44 / 53 (83.0%) [95% CI 70.8%-90.8%] of task-set mutants"
    assert r.value == pytest.approx(44 / 53)
    assert (r.low, r.high) == wilson_interval(44, 53)


def test_rate_with_no_mutants_has_no_value():
    r = rate(0, 0, "held-out mutants")
    assert r.value is None
    assert str(r) == "0 / 0 (n/a) [95% CI 0.0%-100.0%] of held-out mutants"


def test_rate_other_confidence_is_labelled():
    assert str(rate(5, 10, "task-set mutants", confidence=0.9)).startswith(
        "5 / 10 (50.0%) [90% CI "
    )


def test_rate_to_dict_is_json_ready():
    r = rate(np.int64(3), np.int64(4), "task-set mutants")
    d = json.loads(json.dumps(r.to_dict()))
    assert d == {
        "k": 3,
        "n": 4,
        "value": 0.75,
        "low": r.low,
        "high": r.high,
        "confidence": 0.95,
        "what": "task-set mutants",
    }


def test_rate_is_frozen_and_validated():
    r = rate(1, 2, "task-set mutants")
    with pytest.raises(AttributeError):
        r.k = 2
    with pytest.raises(ValueError, match="between 0 and n"):
        Rate(k=3, n=2, low=0.0, high=1.0, what="task-set mutants")
    with pytest.raises(ValueError, match="what n counts"):
        Rate(k=1, n=2, low=0.1, high=0.9, what="")


# ---------------------------------------------------------------- McNemar


def test_mcnemar_by_hand():
    # b = 12, c = 3: 15 discordant mutants, each a fair coin under "no difference".
    # p = 2 * sum_{i=0..3} C(15, i) / 2^15 = 2 * (1 + 15 + 105 + 455) / 32768
    #   = 1152 / 32768 = 0.03515625
    assert sum(math.comb(15, i) for i in range(4)) == 576
    assert mcnemar_exact(12, 3) == 1152 / 32768 == 0.03515625
    assert mcnemar_exact(3, 12) == 0.03515625


def test_mcnemar_edges():
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(5, 5) == 1.0  # 2 * P(X <= 5) > 1, capped
    assert mcnemar_exact(1, 0) == 1.0  # 2 * 1/2
    assert mcnemar_exact(10, 0) == 2 / 1024


@pytest.mark.parametrize("b, c", [(7, 2), (20, 9), (1, 6), (40, 25), (600, 520)])
def test_mcnemar_agrees_with_scipy(b, c):
    assert mcnemar_exact(b, c) == pytest.approx(binomtest(b, b + c, 0.5).pvalue, rel=1e-9)


def test_mcnemar_rejects_negative():
    with pytest.raises(ValueError, match="b must be >= 0"):
        mcnemar_exact(-1, 3)


# ---------------------------------------------------------------- cluster bootstrap

# One target supplies 200 of the 415 mutants and has a very different kill rate.
DOMINATED = [(10, 200), (45, 50), (40, 50), (48, 50), (30, 40), (20, 25)]


def test_cluster_bootstrap_estimate_is_pooled_rate():
    est, low, high = cluster_bootstrap(DOMINATED, resamples=2000)
    assert est == 193 / 415
    assert low < est < high


def test_cluster_bootstrap_is_deterministic_under_a_seed():
    first = cluster_bootstrap(DOMINATED, resamples=2000, seed=7, floor=False)
    again = cluster_bootstrap(DOMINATED, resamples=2000, seed=7, floor=False)
    other = cluster_bootstrap(DOMINATED, resamples=2000, seed=8, floor=False)
    assert first == again
    assert first[0] == other[0]
    assert (first[1], first[2]) != (other[1], other[2])


def test_dominant_cluster_widens_the_interval_beyond_wilson():
    total_k = sum(k for k, _ in DOMINATED)
    total_n = sum(n for _, n in DOMINATED)
    w_low, w_high = wilson_interval(total_k, total_n)
    result = cluster_bootstrap(DOMINATED, floor=False)
    assert result.method == stats.CLUSTER_BOOTSTRAP
    _, low, high = result
    assert high - low > 2 * (w_high - w_low)
    assert low < w_low and high > w_high


def test_identical_clusters_fall_back_to_wilson_floor():
    clusters = [(5, 10)] * 12
    plain = cluster_bootstrap(clusters, resamples=500, floor=False)
    assert tuple(plain) == (0.5, 0.5, 0.5)  # every resample has rate 0.5
    floored = cluster_bootstrap(clusters, resamples=500)
    assert floored.method == stats.WILSON_FLOOR
    assert (floored.low, floored.high) == wilson_interval(60, 120)


def test_single_cluster_gives_wilson_and_says_so():
    result = cluster_bootstrap([(30, 40)])
    assert result.method == stats.WILSON_SINGLE_CLUSTER
    assert result.resamples_used is None
    assert tuple(result) == (0.75, *wilson_interval(30, 40))
    # empty clusters do not count as a second cluster
    assert cluster_bootstrap([(30, 40), (0, 0)]).method == stats.WILSON_SINGLE_CLUSTER


def test_resamples_of_only_empty_clusters_are_dropped():
    result = cluster_bootstrap([(3, 5), (0, 0), (0, 0), (4, 5)], resamples=4000, floor=False)
    # P(a resample draws only the two empty clusters) = (1/2)^4 = 1/16: ~250 of 4000.
    assert 100 < 4000 - result.resamples_used < 450
    assert result[0] == 7 / 10


@pytest.mark.parametrize(
    "clusters, message",
    [
        ([], "at least one cluster"),
        ([(0, 0), (0, 0)], "every cluster has n == 0"),
        ([(3, 2)], "cluster 0"),
    ],
)
def test_cluster_bootstrap_rejects_bad_input(clusters, message):
    with pytest.raises(ValueError, match=message):
        cluster_bootstrap(clusters)


def test_estimate_survives_pickle_and_copy():
    result = cluster_bootstrap(DOMINATED, resamples=500)
    for clone in (pickle.loads(pickle.dumps(result)), copy.deepcopy(result)):
        assert tuple(clone) == tuple(result)
        assert (clone.method, clone.resamples_used) == (result.method, result.resamples_used)


def test_estimate_repr_shows_how_the_interval_was_made():
    from killbench.stats import Estimate

    e = Estimate(0.5, 0.25, 0.75, "cluster-bootstrap", 990)
    assert repr(e) == "Estimate(0.5, 0.25, 0.75, method='cluster-bootstrap', resamples_used=990)"


# ---------------------------------------------------------------- paired difference


def _pair(seed=3, n=400):
    rng = np.random.default_rng(seed)
    a = rng.random(n) < 0.6
    b = np.where(rng.random(n) < 0.8, a, ~a)  # B agrees with A on about 80%
    return a.tolist(), b.tolist()


def test_paired_difference_estimate_and_determinism():
    a, b = _pair()
    want = (sum(a) - sum(b)) / len(a)
    first = paired_bootstrap_difference(a, b, resamples=2000, seed=1)
    assert first[0] == want
    assert first[1] < want < first[2]
    assert paired_bootstrap_difference(a, b, resamples=2000, seed=1) == first
    assert paired_bootstrap_difference(a, b, resamples=2000, seed=2) != first
    assert first.method == stats.MUTANT_BOOTSTRAP


def test_paired_difference_interval_matches_normal_approximation():
    a, b = _pair()
    d = np.array(a, dtype=int) - np.array(b, dtype=int)
    se = d.std() / math.sqrt(len(d))
    _, low, high = paired_bootstrap_difference(a, b, resamples=20000, seed=0)
    assert high - low == pytest.approx(2 * Z95 * se, rel=0.05)


def test_paired_difference_of_identical_generators_is_zero():
    a = [True, False, True, True]
    assert tuple(paired_bootstrap_difference(a, list(a))) == (0.0, 0.0, 0.0)


def test_paired_difference_by_cluster():
    # A is far better on target "t1" and worse on "t2": the cluster interval is wide.
    a = [True] * 50 + [False] * 50 + [True] * 10
    b = [False] * 50 + [True] * 40 + [False] * 10 + [True] * 10
    labels = ["t1"] * 50 + ["t2"] * 50 + ["t3"] * 10
    by_mutant = paired_bootstrap_difference(a, b, resamples=2000)
    by_cluster = paired_bootstrap_difference(a, b, clusters=labels, resamples=2000)
    assert by_cluster.method == stats.CLUSTER_BOOTSTRAP
    assert by_cluster[0] == by_mutant[0] == pytest.approx(10 / 110)
    assert by_cluster[2] - by_cluster[1] > by_mutant[2] - by_mutant[1]


def test_paired_difference_single_cluster_falls_back_to_mutants():
    a, b = _pair()
    plain = paired_bootstrap_difference(a, b, resamples=1000, seed=5)
    single = paired_bootstrap_difference(a, b, clusters=["t1"] * len(a), resamples=1000, seed=5)
    assert single.method == stats.MUTANT_BOOTSTRAP_SINGLE_CLUSTER
    assert tuple(single) == tuple(plain)


@pytest.mark.parametrize(
    "a, b, clusters, message",
    [
        ([True], [True, False], None, "same mutants"),
        ([], [], None, "at least one mutant"),
        ([True, False], [True, True], ["t1"], "one label per mutant"),
        ([2, 0], [1, 1], None, "only booleans"),
    ],
)
def test_paired_difference_rejects_bad_input(a, b, clusters, message):
    with pytest.raises(ValueError, match=message):
        paired_bootstrap_difference(a, b, clusters=clusters)


# ---------------------------------------------------------------- tied groups


def test_tied_groups_constructed_case():
    # 30 mutants. "alpha" kills 0..24; "beta" kills 1..25 (2 discordant: p = 1);
    # "gamma" kills 0..4 and "delta" 0..3 (20+ discordant with alpha: p < 1e-5).
    n = 30
    entries = {
        "alpha": [i < 25 for i in range(n)],
        "beta": [1 <= i < 26 for i in range(n)],
        "gamma": [i < 5 for i in range(n)],
        "delta": [i < 4 for i in range(n)],
    }
    assert tied_groups(entries) == [["alpha", "beta"], ["gamma", "delta"]]


def test_tied_groups_holm_correction_matters():
    # leader vs x: b = 6, c = 0, p = 2 / 2^6 = 0.03125 < 0.05.
    leader = [True] * 6 + [True] * 4 + [False] * 2
    x = [False] * 6 + [True] * 4 + [False] * 2
    # Alone, x is distinguishable from the leader.
    assert tied_groups({"leader": leader, "x": x}) == [["leader"], ["x"]]
    # With a second comparison (a twin, p = 1) Holm asks for p <= 0.05 / 2 first.
    assert tied_groups({"x": x, "twin": list(leader), "leader": leader}) == [
        ["leader", "twin", "x"]
    ]


def test_tied_groups_edge_cases():
    assert tied_groups({}) == []
    assert tied_groups({"only": [True, False]}) == [["only"]]
    with pytest.raises(ValueError, match="lengths differ"):
        tied_groups({"a": [True], "b": [True, False]})


def test_mcnemar_is_exact_for_many_discordant_mutants():
    # 200 discordant mutants split 150 / 50: compare with the exact rational value.
    want = Fraction(2 * sum(math.comb(200, i) for i in range(51)), 2**200)
    assert mcnemar_exact(150, 50) == float(want)
