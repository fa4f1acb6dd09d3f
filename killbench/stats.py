"""Intervals and paired tests for kill rates: every published rate goes through here,
so it carries its denominator and an interval honest about how mutants were sampled.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from statistics import NormalDist

import numpy as np

# Cap on the size of one block of resampled indices (resamples x units), so that a
# bootstrap over thousands of mutants does not allocate gigabytes at once.
_MAX_BLOCK_CELLS = 2_000_000  # pragma: no mutate (memory only: any block size draws the same)

# Values of Estimate.method.
CLUSTER_BOOTSTRAP = "cluster-bootstrap"
WILSON_FLOOR = "wilson-floor"
WILSON_SINGLE_CLUSTER = "wilson-single-cluster"
MUTANT_BOOTSTRAP = "mutant-bootstrap"
MUTANT_BOOTSTRAP_SINGLE_CLUSTER = "mutant-bootstrap-single-cluster"


class Estimate(tuple):
    """An ``(estimate, low, high)`` triple that also says how the interval was made.

    It unpacks and compares like a plain 3-tuple. ``method`` is one of the module
    constants (``CLUSTER_BOOTSTRAP``, ``WILSON_FLOOR``, ``WILSON_SINGLE_CLUSTER``,
    ``MUTANT_BOOTSTRAP``, ``MUTANT_BOOTSTRAP_SINGLE_CLUSTER``) so that a report can show
    when the interval is not the one the caller asked for. ``resamples_used`` is how
    many bootstrap resamples entered the percentiles (None when none were drawn).
    """

    method: str
    resamples_used: int | None

    def __new__(
        cls,
        estimate: float,
        low: float,
        high: float,
        method: str,
        resamples_used: int | None = None,
    ) -> Estimate:
        self = super().__new__(cls, (float(estimate), float(low), float(high)))
        self.method = method
        self.resamples_used = resamples_used
        return self

    def __getnewargs__(self):
        # tuple's default would pass only the three numbers back to __new__ on unpickling.
        return (self[0], self[1], self[2], self.method, self.resamples_used)

    @property
    def estimate(self) -> float:
        return self[0]

    @property
    def low(self) -> float:
        return self[1]

    @property
    def high(self) -> float:
        return self[2]

    def __repr__(self) -> str:
        return (
            f"Estimate({self[0]!r}, {self[1]!r}, {self[2]!r}, method={self.method!r}, "
            f"resamples_used={self.resamples_used!r})"
        )


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence!r}")


def _check_count(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer count, got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")


def _check_resamples(resamples: int) -> None:
    if isinstance(resamples, bool) or not isinstance(resamples, (int, np.integer)):
        raise ValueError(f"resamples must be an integer, got {resamples!r}")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Interval for k successes in n trials that stays sensible near 0% and 100%.

    The normal ("Wald") interval collapses to a point at k == 0 or k == n, exactly
    where a strong generator's kill rate lives; Wilson's does not. With n == 0 there
    is no information and the interval is the whole range (0.0, 1.0).
    """
    _check_count("n", n)
    _check_count("k", k)
    if k > n:
        raise ValueError(f"k must be between 0 and n, got k={k} with n={n}")
    _check_confidence(confidence)
    if n == 0:
        return (0.0, 1.0)
    z = NormalDist().inv_cdf(1.0 - (1.0 - confidence) / 2.0)
    p = k / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2.0 * n)) / denom
    half = z * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n)) / denom
    # At the edges the formula gives exactly 0 or 1; pin them against rounding.
    low = 0.0 if k == 0 else max(0.0, centre - half)
    high = 1.0 if k == n else min(1.0, centre + half)
    return (low, high)


@dataclass(frozen=True)
class Rate:
    """A kill rate that cannot be printed without its denominator and interval."""

    k: int
    n: int
    low: float
    high: float
    what: str
    confidence: float = 0.95

    def __post_init__(self) -> None:
        _check_count("n", self.n)
        _check_count("k", self.k)
        # numpy integers would leak into to_dict() and break json.dumps.
        object.__setattr__(self, "k", int(self.k))
        object.__setattr__(self, "n", int(self.n))
        if self.k > self.n:
            raise ValueError(f"k must be between 0 and n, got k={self.k} with n={self.n}")
        _check_confidence(self.confidence)
        if not 0.0 <= self.low <= self.high <= 1.0:
            raise ValueError(
                f"interval must satisfy 0 <= low <= high <= 1, got ({self.low}, {self.high})"
            )
        if not self.what:
            raise ValueError("a Rate must say what n counts (what='...')")

    @property
    def value(self) -> float | None:
        """None rather than 0.0 when n == 0, so an empty task set cannot pose as 0%."""
        return None if self.n == 0 else self.k / self.n

    def __str__(self) -> str:
        level = f"{self.confidence * 100:g}%"
        value = "n/a" if self.n == 0 else f"{100.0 * self.k / self.n:.1f}%"
        return (
            f"{self.k} / {self.n} ({value}) "
            f"[{level} CI {100.0 * self.low:.1f}%-{100.0 * self.high:.1f}%] of {self.what}"
        )

    def to_dict(self) -> dict[str, object]:
        """Plain types only, for the JSON report."""
        return {
            "k": self.k,
            "n": self.n,
            "value": self.value,
            "low": self.low,
            "high": self.high,
            "confidence": self.confidence,
            "what": self.what,
        }


def rate(k: int, n: int, what: str, confidence: float = 0.95) -> Rate:
    """The usual way to make a Rate: Wilson interval, denominator named."""
    low, high = wilson_interval(k, n, confidence)
    return Rate(k=k, n=n, low=low, high=high, what=what, confidence=confidence)


def _resampled_sums(columns: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Sums of each column over units drawn with replacement, one row per resample.

    ``columns`` has one row per unit (a cluster or a mutant); the result has one row
    per resample. Work is done in blocks to bound memory.
    """
    units = columns.shape[0]
    out = np.empty((resamples, columns.shape[1]), dtype=columns.dtype)
    block = max(1, _MAX_BLOCK_CELLS // units)
    for start in range(0, resamples, block):
        size = min(block, resamples - start)
        idx = rng.integers(0, units, size=(size, units))
        out[start : start + size] = columns[idx].sum(axis=1)
    return out


def _percentiles(values: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(values, [tail, 1.0 - tail])
    return float(low), float(high)


def cluster_bootstrap(
    clusters: list[tuple[int, int]],
    resamples: int = 10000,
    seed: int = 0,
    confidence: float = 0.95,
    floor: bool = True,
) -> Estimate:
    """Pooled kill rate over targets, with an interval that knows mutants come in targets.

    Mutants of one target share code and tests, so they are not independent; when a
    few targets supply most mutants, a Wilson interval on the pooled counts is far
    too narrow. Each cluster is one target's ``(k, n)``. The estimate is
    sum(k) / sum(n); the interval is the percentile interval of that ratio over
    ``resamples`` resamples that draw whole clusters with replacement.

    Rules, each visible in the returned ``Estimate.method``:

    - Resamples whose total n is 0 (only empty clusters drawn) have no rate; they are
      dropped, not redrawn, and ``resamples_used`` counts the rest.
    - With fewer than two clusters that have n > 0 the bootstrap cannot vary, so the
      Wilson interval of the pooled counts is returned (``WILSON_SINGLE_CLUSTER``).
    - With ``floor=True`` (the default) the interval is never narrower than the
      Wilson interval of the pooled counts (``WILSON_FLOOR`` when that widened it):
      a cluster bootstrap over a dozen targets can by chance see less spread than
      independent sampling would give, and a published interval must not be
      narrower than the independence one on that account. ``floor=False`` gives the
      plain percentile interval (``CLUSTER_BOOTSTRAP``).

    Raises ValueError when there are no clusters or no mutants at all.
    """
    _check_resamples(resamples)
    _check_confidence(confidence)
    if len(clusters) == 0:
        raise ValueError("cluster_bootstrap needs at least one cluster")
    for i, pair in enumerate(clusters):
        if len(pair) != 2:
            raise ValueError(f"cluster {i} must be a (k, n) pair, got {pair!r}")
        k, n = pair
        _check_count(f"n of cluster {i}", n)
        _check_count(f"k of cluster {i}", k)
        if k > n:
            raise ValueError(f"cluster {i}: k must be between 0 and n, got k={k} with n={n}")
    counts = np.array(clusters, dtype=np.int64).reshape(-1, 2)
    total_k = int(counts[:, 0].sum())
    total_n = int(counts[:, 1].sum())
    if total_n == 0:
        raise ValueError(
            "cluster_bootstrap: every cluster has n == 0, there is no rate to estimate"
        )
    estimate = total_k / total_n
    wilson_low, wilson_high = wilson_interval(total_k, total_n, confidence)

    if int((counts[:, 1] > 0).sum()) < 2:
        return Estimate(estimate, wilson_low, wilson_high, WILSON_SINGLE_CLUSTER)

    rng = np.random.default_rng(seed)
    sums = _resampled_sums(counts, resamples, rng)
    keep = sums[:, 1] > 0
    used = int(keep.sum())
    if used == 0:
        raise ValueError(
            "cluster_bootstrap: every resample drew only empty clusters; raise `resamples`"
        )
    ratios = sums[keep, 0] / sums[keep, 1]
    low, high = _percentiles(ratios, confidence)
    # at equality, either branch gives the same interval; only a float equal to the bit can tell
    below = wilson_low < low  # pragma: no mutate (equal: the same interval either way)
    above = wilson_high > high  # pragma: no mutate (equal: the same interval either way)
    if floor and (below or above):
        return Estimate(estimate, min(low, wilson_low), max(high, wilson_high), WILSON_FLOOR, used)
    return Estimate(estimate, low, high, CLUSTER_BOOTSTRAP, used)


def mcnemar_exact(b: int, c: int) -> float:
    """Are two generators' kills on the same mutants different beyond chance?

    Only discordant mutants carry information: b = A kills and B misses, c = B kills
    and A misses. Under "no difference" each discordant mutant is a fair coin, so the
    p-value is the two-sided exact binomial tail 2 * P(X <= min(b, c)) with
    X ~ Binomial(b + c, 1/2), capped at 1. No discordant mutants gives 1.0.
    Computed in exact integer arithmetic, so it is right for any b + c.
    """
    _check_count("b", b)
    _check_count("c", c)
    n = int(b) + int(c)  # none discordant: 2 * 1 / 2**0, capped at 1
    smaller = min(int(b), int(c))
    term = 1  # C(n, 0)
    tail = 1
    for i in range(smaller):
        term = term * (n - i) // (i + 1)  # C(n, i + 1)
        tail += term
    return float(min(Fraction(1), Fraction(2 * tail, 2**n)))


def mcnemar_power(n: int, p1: float, p2: float, alpha: float = 0.05) -> float:
    """Power of the exact McNemar test (as `mcnemar_exact` computes it, at level `alpha`) to
    tell kill rates p1 and p2 apart over n paired mutants, when the two generators' kills
    are independent given the rates (positively correlated kills give more power, so this
    is the conservative case). Exact: the number of discordant mutants D is Binomial(n,
    p1(1-p2) + p2(1-p1)) and, given D, one side's count is Binomial(D, share)."""
    from scipy.stats import binom

    _check_count("n", n)
    for name, v in (("p1", p1), ("p2", p2)):
        if not 0.0 <= v <= 1.0:
            raise ValueError(f"{name} must be a rate in [0, 1], got {v!r}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    b_rate, c_rate = p1 * (1 - p2), p2 * (1 - p1)
    psi = b_rate + c_rate
    if psi == 0.0:
        return 0.0
    share = c_rate / psi
    p_d = binom.pmf(np.arange(n + 1), n, psi)
    power = 0.0
    # reject when the smaller side is below `count`: the number of m with 2 P(X <= m) <=
    # alpha, X ~ Binomial(d, 1/2) (p <= alpha, as the tie groups decide). It never falls as
    # d grows, so it is carried over; count <= d / 2 always (2 P(X <= d / 2) >= 1), so the
    # two tails never overlap
    count = 0
    for d in range(n + 1):
        while 2 * binom.cdf(count, d, 0.5) <= alpha:
            count += 1
        power += p_d[d] * (binom.cdf(count - 1, d, share) + binom.sf(d - count, d, share))
    return float(power)


def minimum_detectable_difference(n: int, base: float, alpha: float = 0.05, power: float = 0.8,
                                  design_effect: float = 1.0, step: float = 0.001) -> float | None:
    """The smallest rise d over kill rate `base` that the exact McNemar test detects with at
    least `power` over n paired mutants, counted as n / design_effect independent ones
    (targets are clusters). None when even a rate of 1 is not detected."""
    if design_effect < 1.0:
        raise ValueError(f"a design effect is at least 1, got {design_effect!r}")
    n_eff = int(n / design_effect)
    d = step
    while base + d <= 1.0 + 1e-12:
        if mcnemar_power(n_eff, base, min(1.0, base + d), alpha) >= power:
            return round(d, 6)
        d += step
    return None


def _as_kill_vector(name: str, values: Sequence[bool]) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a flat sequence of booleans, one per mutant")
    if arr.size and not np.isin(arr, (0, 1)).all():
        raise ValueError(f"{name} must contain only booleans (or 0/1), one per mutant")
    return arr.astype(np.int64)


def paired_bootstrap_difference(
    a: Sequence[bool],
    b: Sequence[bool],
    clusters: Sequence[str] | None = None,
    resamples: int = 10000,
    seed: int = 0,
    confidence: float = 0.95,
) -> Estimate:
    """How much more generator A kills than B on the same mutants, with an interval.

    Pairing matters: both generators faced the same mutants, so resampling the
    mutants (not each generator separately) keeps the correlation between them and
    gives a much tighter, correct interval. Returns (diff, low, high) with
    diff = kill rate of A - kill rate of B.

    Without ``clusters`` mutants are resampled individually (``MUTANT_BOOTSTRAP``;
    done exactly and cheaply by drawing the counts of the three kinds of mutant,
    A-only, B-only and other, from a multinomial). With ``clusters`` (one label per
    mutant, e.g. its target) whole clusters are resampled and the difference is
    pooled over them (``CLUSTER_BOOTSTRAP``); with fewer than two distinct labels this
    falls back to resampling mutants (``MUTANT_BOOTSTRAP_SINGLE_CLUSTER``). If A and
    B agree on every mutant the interval is (0, 0, 0); McNemar's p is then 1.
    """
    _check_resamples(resamples)
    _check_confidence(confidence)
    va = _as_kill_vector("a", a)
    vb = _as_kill_vector("b", b)
    if va.size != vb.size:
        raise ValueError(
            f"a and b must cover the same mutants: got {va.size} and {vb.size} entries"
        )
    if va.size == 0:
        raise ValueError("paired_bootstrap_difference needs at least one mutant")
    n = int(va.size)
    d = va - vb
    diff = float(d.sum()) / n
    rng = np.random.default_rng(seed)

    method = MUTANT_BOOTSTRAP
    if clusters is not None:
        labels = list(clusters)
        if len(labels) != n:
            raise ValueError(
                f"clusters must give one label per mutant: got {len(labels)} labels for {n} mutants"
            )
        names, inverse = np.unique(
            np.asarray(labels, dtype=object).astype(str), return_inverse=True
        )
        if len(names) >= 2:
            # (sum of d, mutants) per cluster
            per_cluster = np.column_stack([np.bincount(inverse, weights=d, minlength=len(names)),
                                           np.bincount(inverse, minlength=len(names))]).astype(np.int64)
            sums = _resampled_sums(per_cluster, resamples, rng)
            low, high = _percentiles(sums[:, 0] / sums[:, 1], confidence)
            return Estimate(diff, low, high, CLUSTER_BOOTSTRAP, resamples)
        method = MUTANT_BOOTSTRAP_SINGLE_CLUSTER

    a_only = int((d == 1).sum())
    b_only = int((d == -1).sum())
    # numpy's multinomial takes the last category as the remainder and only range-checks
    # the value given for it, so no change to it can change a draw
    rest = max(0.0, 1.0 - (a_only + b_only) / n)  # pragma: no mutate (numpy ignores it in range)
    draws = rng.multinomial(n, [a_only / n, b_only / n, rest], size=resamples)
    low, high = _percentiles((draws[:, 0] - draws[:, 1]) / n, confidence)
    return Estimate(diff, low, high, method, resamples)


def tied_groups(entries: dict[str, Sequence[bool]], alpha: float = 0.05) -> list[list[str]]:
    """Split a leaderboard into groups whose members the data cannot tell apart.

    Ranking by raw kill count alone would crown a winner on a one-mutant lead. Rule:

    1. Order entries by kill count, most first; equal counts by name, for a stable
       order. The first is the group's leader.
    2. Compare the leader with every other remaining entry by exact McNemar on the
       discordant mutants, and apply Holm's step-down correction over those
       comparisons at level ``alpha``: sort the p-values ascending and reject while
       p_(i) <= alpha / (m - i + 1); stop at the first that fails.
    3. The leader plus every entry not rejected form the group (in rank order);
       the rejected entries, in rank order, are ranked again from step 1.

    A group means "not distinguishable from its leader"; it is not an equivalence
    relation, so a member of a later group may be indistinguishable from a
    non-leader of an earlier one. All kill vectors must cover the same mutants in the
    same order.
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be strictly between 0 and 1, got {alpha!r}")
    vectors = {name: _as_kill_vector(f"entry {name!r}", v) for name, v in entries.items()}
    sizes = {v.size for v in vectors.values()}
    if len(sizes) > 1:
        detail = ", ".join(f"{name}: {v.size}" for name, v in vectors.items())
        raise ValueError(f"all entries must cover the same mutants; lengths differ ({detail})")

    remaining = sorted(vectors, key=lambda name: (-int(vectors[name].sum()), name))
    groups: list[list[str]] = []
    while remaining:
        leader, others = remaining[0], remaining[1:]
        lead = vectors[leader]
        pvalues = []
        for name in others:
            other = vectors[name]
            b = int(((lead == 1) & (other == 0)).sum())
            c = int(((lead == 0) & (other == 1)).sum())
            pvalues.append((mcnemar_exact(b, c), name))
        rejected: set[str] = set()
        m = len(pvalues)
        for i, (p, name) in enumerate(sorted(pvalues)):
            if p <= alpha / (m - i):
                rejected.add(name)
            else:
                break
        groups.append([leader] + [name for name in others if name not in rejected])
        remaining = [name for name in others if name in rejected]
    return groups
