"""Confidence intervals, in one place: every reported number goes through here.

* ``mean_ci``: Student-t interval of a mean over independent replications (clusters,
  seeds); values that all agree show no spread, so no interval is claimed (NaN, shown
  as none), as for one value.  Every quantile and binomial tail comes from ``scipy.special`` (scipy.stats
  gives the same numbers, to ~1e-12, but costs half a second more to import in every
  process; tests/test_stats.py checks the agreement).
* ``paired_change_ci``: per-replication relative change against a baseline computed
  on identical draws (common random numbers), then ``mean_ci`` of those changes.
* ``bootstrap_ratio_ci``: a pooled ratio (precision = sum TP / sum(TP + FP) over
  clusters), resampling clusters, not jobs, because jobs in one cluster share a
  schedule.  The interval is the union of two: the percentile cluster bootstrap, which
  follows skew, and the linearised (delta-method) interval of the ratio of cluster sums
  (Cochran, *Sampling Techniques*, 3rd ed., eq. 6.9) with Student-t quantiles on n - 1
  degrees of freedom.  Alone, the percentile interval is too narrow with few clusters
  (a delay's 95% interval held the truth in 51% of runs at n = 2, 85% at n = 5 and 91%
  at n = 20); with the t term the simulator's delays are covered 93.7-95.3% from 5
  clusters on (300 cells each), but heavy-tailed values are not (a ratio of lognormal(0, 1.5) values:
  88.5% at 5 clusters and 88.7% at 10, ``benchmarks/coverage.py ratio-lognormal``).  The t
  interval is inside the bootstrap's, to Monte Carlo error, once n is large
  (docs/model.md gives the measurements).  The union is cut to the values the ratio can take: >= 0 when every
  num and den is, <= 1 for a share (each num a part of its den; ``share=True``).
  Clusters that all give one ratio show no spread between clusters, so no interval is
  claimed (NaN), as for one cluster.  Clusters whose num and den are both 0 (recall in
  a cluster with no hacking job) bear on nothing and are left out, of ``n`` too.  The
  resamples are streamed in a numba kernel (``kernels.bootstrap``): memory O(n), time
  O(n_boot n); beyond ``BOOTSTRAP_MAX_N`` clusters the t interval is used alone, O(n)
  time.
* ``proportion_ci``: the same for a pooled *proportion* of counts, widened to contain
  the Clopper-Pearson exact interval of the pooled counts.  When an event never occurs
  (no false positive in 2,000 clusters) every bootstrap resample gives 0 and the
  percentile interval collapses to [0, 0]; the exact binomial bound still says how
  large the rate could be.  Beyond ``BOOTSTRAP_MAX_N`` clusters, in place of the t
  interval: the exact interval at the design effect's effective sample size
  (``clustered_exact_bounds``; Korn & Graubard 1998), joined with that of the pooled counts.
* ``pooled_cdf_band``: a pooled empirical CDF (the JCT histogram's) with the interval
  ``proportion_ci`` gives beyond ``BOOTSTRAP_MAX_N`` clusters at each point, from the
  exact integer sums over clusters a sweep's chunks add up.
* ``quantile_ci``: a quantile (the median by default) with the distribution-free
  order-statistic interval; runs censored at a cap (reported as NaN or +inf) count at
  what they had spent for the lower bound and as +inf for the upper one, so the interval
  covers whatever the censoring and is exact while it stays below the censored runs.
* ``cluster_sums`` and ``cluster_mean_ci``: rows that share their draws (the runs of one
  toy-RLHF seed) summed per cluster, so the rates and means above resample clusters.
* ``cluster_corr_ci``: a Pearson or Spearman correlation over rows with an interval
  that resamples clusters of rows (the rollouts of one prompt), not rows.
* ``MeanMoments`` and ``PooledRatio``: the same estimates from chunks streamed one at a
  time (``add``, then ``mean_ci`` / ``ratio_ci``), so a run's memory does not grow with
  its cluster count.  They keep exact sums (``_exact_sum``: ints, not rounded running
  moments), so any chunking of the clusters, added in their order, gives the batch
  functions' result bit for bit; ``MeanMoments`` the same in any order too.  A pooled
  ratio's point does not depend on the order either, but its bootstrap draws clusters
  by position, so clusters added in another order give another resample (another
  interval, as close as two seeds'); a sweep reads its chunks in cluster order.
"""
from __future__ import annotations

import math
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numba
import numpy as np
from scipy import special

from fastsim.defaults import (BOOTSTRAP_MAX_N,  # noqa: F401 (fastsim.stats' names for them)
                              MIN_PERCENTILE_BOOT)
from fastsim.errors import ConfigError
from fastsim.memory import SURELY_FITS, check_fits
from fastsim.values import (check_flags, check_seed, float_or_nan, is_integer, is_number,
                            plain_scalar)
from fastsim.kernels.bootstrap import bootstrap_sums_nb

LEVEL = 0.95
# Below this many clusters a Student-t interval of a skewed per-cluster quantity covers
# less than its 95%, T_FEW_COVERAGE: 88-93% at 5-10 clusters for the JCT percentiles, the
# queueing delay and the mean JCT under SRTF-Est, 85-88% under LossAware (docs/model.md,
# "Coverage of every interval", quotes T_FEW_COVERAGE); tables say so in a note.
T_FULL_COVERAGE_N = 30
T_FEW_COVERAGE = "85-93% at 5-10 clusters"


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its 95% interval and the number of replications behind it."""

    mean: float
    lo: float
    hi: float
    n: int

    def contains(self, value: float) -> bool:
        return bool(self.lo <= value <= self.hi)

    def within(self, floor: float, ceiling: float) -> "Estimate":
        """Its interval cut to the values the estimate can take (a t interval of a few
        clusters' GPU-hours reached below 0): the truth lies there, so coverage is the
        same.  A NaN bound (no interval) stays NaN."""
        lo = max(self.lo, floor) if self.lo == self.lo else self.lo
        hi = min(self.hi, ceiling) if self.hi == self.hi else self.hi
        return Estimate(self.mean, lo, hi, self.n)

    def fmt(self, scale: float = 1.0, digits: int = 3, unit: str = "") -> str:
        if not np.isfinite(self.mean):
            return "n/a"
        return fmt_interval(self.mean * scale, self.lo * scale, self.hi * scale, f".{digits}f",
                            unit)


def fmt_value(x: float, spec: str) -> str:
    """``x`` formatted with ``spec`` (``".1f"``, ``".1%"``, ``".3g"``); a value that rounds
    to zero prints as ``0``, never ``-0`` (a bound of -0.0004 is ``[0, 0]``, not ``[-0, 0]``)."""
    return format(x, "z" + spec)


def interval_decimals(lo: float, hi: float, digits: int, most: int = 6,
                      kind: str = "f") -> int:
    """``digits``, or more (up to ``most``) until an interval with ``lo < hi`` prints its
    two ends apart in format ``kind`` (``f``, ``%``, ``g``): at two decimals a delay of
    0.905 to 0.914 evaluations printed ``0.91 [0.91, 0.91]``, an interval of no width,
    which no interval here is (one whose clusters all agree is printed "no interval")."""
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        return digits
    while digits < most and (fmt_value(lo, f".{digits}{kind}")
                             == fmt_value(hi, f".{digits}{kind}")):
        digits += 1
    return digits


def fmt_interval(mean: float, lo: float, hi: float, spec: str, unit: str = "") -> str:
    """``mean [lo, hi]`` through ``fmt_value``; a NaN ``lo`` (one replication, or
    replications that all agree) is ``mean (no interval)``.  Every table's intervals
    are printed here."""
    if lo is None or lo != lo:
        return f"{fmt_value(mean, spec)}{unit} (no interval)"
    spec = _ends_apart(lo, hi, spec)
    return f"{fmt_value(mean, spec)}{unit} [{fmt_value(lo, spec)}, {fmt_value(hi, spec)}]"


def _ends_apart(lo: float, hi: float, spec: str) -> str:
    """``spec`` (``".2f"``, ``".1%"``, ``".3g"``) with as many more digits as
    ``interval_decimals`` gives: the detector table printed an FPR of 0.0138 to 0.0143 as
    ``0.014 [0.014, 0.014]``."""
    m = re.fullmatch(r"\.(\d+)([f%g])", spec)
    if m is None:
        return spec
    return f".{interval_decimals(lo, hi, int(m[1]), kind=m[2])}{m[2]}"


def mean_ci(values, level: float = LEVEL) -> Estimate:
    """Mean of finite ``values`` with a Student-t interval.

    Examples
    --------
    >>> e = mean_ci([1.0, 2.0, 3.0])
    >>> round(e.mean, 3), e.n
    (2.0, 3)
    """
    moments = MeanMoments()
    moments.add(values)
    return moments.mean_ci(level)


def paired_change_ci(policy, baseline, level: float = LEVEL) -> Estimate:
    """Mean per-replication relative change ``policy / baseline - 1`` with a t interval.

    Pairs whose baseline is zero or non-finite are dropped (a relative change is
    undefined there), as are those whose change is beyond a float (a baseline of 1e-320);
    ``n`` says how many pairs remain.  A negative baseline is refused: a relative change
    is defined for quantities that cannot be negative (a ratio scale), and against a
    negative one its sign is wrong (-3 against -1.5 reads +100%, though lower).
    """
    p, b = _paired_arrays(policy, baseline, "policy", "baseline", finite=False)
    return mean_ci(relative_changes(p, b), level)


def relative_changes(p: np.ndarray, b: np.ndarray, name: str = "baseline") -> np.ndarray:
    """``p / b - 1`` of the pairs ``paired_change_ci`` keeps (finite, ``b != 0``); a change
    beyond a float is inf, which ``mean_ci`` leaves out.  A negative ``b`` is refused,
    naming it ``name[i]``."""
    ok = np.isfinite(p) & np.isfinite(b) & (b != 0.0)
    if (b[ok] < 0.0).any():
        i = int(np.flatnonzero(ok & (b < 0.0))[0])
        raise ConfigError(f"{name}[{i}] = {float(b[i])!r} is negative, and a relative change "
                          "policy / baseline - 1 against it has the wrong sign (lower reads "
                          "as higher); allowed: a baseline of values >= 0, as a relative "
                          "change needs")
    with np.errstate(over="ignore"):  # numpy's warning reached the user
        return p[ok] / b[ok] - 1.0


def bootstrap_ratio_ci(num, den, level: float = LEVEL, n_boot: int = 2000, seed: int = 0,
                       share: bool = False, signed: bool = False) -> Estimate:
    """Pooled ratio ``sum(num) / sum(den)`` with the union of the percentile cluster
    bootstrap and the linearised t interval (that alone beyond ``BOOTSTRAP_MAX_N``
    clusters), within the values the ratio can take; NaN bounds when the clusters show
    no spread (module docstring).  ``share``: each num is a part of its den (steps saved
    of a job's steps), so the ratio is at most 1 and its interval is cut there.
    ``signed``: a num can be negative (a difference), so no num seen below 0 does not
    cut the interval at 0.

    >>> e = bootstrap_ratio_ci([4.0, 2.0, 6.0], [2.0, 1.0, 3.0])  # every cluster: 2
    >>> e.mean, e.lo, e.n
    (2.0, nan, 3)
    """
    pooled = PooledRatio()
    pooled.add(num, den)
    return pooled.ratio_ci(level, n_boot, seed, share, signed)


def proportion_ci(num, den, level: float = LEVEL, n_boot: int = 2000, seed: int = 0) -> Estimate:
    """Pooled proportion ``sum(num) / sum(den)`` of per-replication counts (whole numbers,
    ints or floats).

    The interval is the union of ``bootstrap_ratio_ci``'s (which carries the
    correlation within a cluster) and the Clopper-Pearson interval of the pooled counts
    (which never collapses at 0% or 100%), within [0, 1].

    Examples
    --------
    >>> e = proportion_ci([0, 0, 0], [100, 120, 80])
    >>> e.mean, e.lo, round(e.hi, 4)
    (0.0, 0.0, 0.0122)
    """
    a, b = _paired_arrays(num, den, "num", "den")
    # 0.5 of 1 and 1 of 2 pooled to 1.5 of 3, which the exact step rounded to 2 of 3
    bad = (a < 0) | (a > b) | (a != np.round(a)) | (b != np.round(b))
    if bad.any():
        i = int(np.argmax(bad))
        raise ConfigError(f"proportion_ci: num[{i}] = {float(a[i])!r} with den[{i}] = {float(b[i])!r}; "
                          f"allowed: whole-number counts with 0 <= num <= den")
    pooled = PooledRatio()
    pooled.add(a, b)
    return pooled.proportion_ci(level, n_boot, seed)


def pooled_cdf_band(clusters, s_a, s_n, s_aa, s_an, s_nn, level: float = LEVEL
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A pooled empirical CDF and its pointwise interval, from sums over clusters.

    At each point the CDF is a pooled proportion ``sum A / sum N`` (``A``: a cluster's
    values at or below the point, ``N``: its values), and its interval is
    ``PooledRatio.proportion_ci``'s beyond ``BOOTSTRAP_MAX_N`` clusters
    (``clustered_exact_bounds``: the exact interval at the effective sample size that
    the linearised variance of the ratio of cluster sums gives, joined with the
    Clopper-Pearson interval of the pooled counts); no bootstrap, so one pass over the
    bins of a histogram.
    Arrays of integers, one value per point: ``clusters`` (with ``N > 0``), the sums of
    ``A``, ``N``, ``A^2``, ``A N`` and ``N^2`` (``kernels.metrics.jct_counts_nb``).
    Returns ``(cdf, lo, hi)``."""
    _check_level(level)
    names = ("clusters", "s_a", "s_n", "s_aa", "s_an", "s_nn")
    given = [np.asarray(x) for x in (clusters, s_a, s_n, s_aa, s_an, s_nn)]
    for name, x in zip(names, given):
        # a shorter array was broadcast against the others (one point's sums read as
        # every point's), and 1.5 clusters was cast to 1: a CDF from neither
        if x.shape != given[0].shape or x.ndim != 1 or not (
                np.issubdtype(x.dtype, np.integer) or np.issubdtype(x.dtype, np.bool_)
                or (x.dtype.kind == "f" and bool(np.all(x == np.round(x))))):
            raise ConfigError(f"pooled_cdf_band: {name} has shape {x.shape} and dtype {x.dtype} "
                              f"for clusters' {given[0].shape}; allowed: 1-D arrays of "
                              "integers, one value per point, all of one length")
    n = np.asarray(clusters, dtype=np.int64)
    a, d = (np.asarray(x, dtype=np.int64) for x in (s_a, s_n))
    if np.any((a < 0) | (a > d)):
        raise ConfigError("pooled_cdf_band: allowed: counts with 0 <= sum A <= sum N")
    with np.errstate(divide="ignore", invalid="ignore"):
        cdf = a / d
        # S_N^2 times the squared deviations of A - cdf N: exact in Python integers (the
        # terms reach 1e28 at a million clusters), rounded once
        big = [np.asarray(x, dtype=np.int64).astype(object) for x in (s_a, s_n, s_aa, s_an, s_nn)]
        resid = (big[1] * big[1] * big[2] - 2 * big[0] * big[1] * big[3]
                 + big[0] * big[0] * big[4]).astype(np.float64)
        var = resid * n / ((n - 1) * d.astype(np.float64) ** 4)
        spread = (n > 1) & (resid > 0)
        lo, hi = clustered_exact_bounds(a, d, np.where(spread, var, 0.0), n, level)
    empty = d == 0
    return (np.where(empty, np.nan, cdf), np.where(empty, np.nan, lo), np.where(empty, np.nan, hi))


def cluster_sums(clusters, *values) -> tuple[np.ndarray, ...]:
    """Each of ``values`` (one number per row) summed per cluster (``clusters``: one label
    per row), clusters in sorted order: the replications to hand ``proportion_ci`` or
    ``bootstrap_ratio_ci`` when rows of one cluster share their random draws (the runs of
    one toy-RLHF seed), so that they resample clusters, not rows, and ``n`` is clusters.

    >>> cluster_sums([0, 0, 1], [1.0, 1.0, 0.0], [1.0, 1.0, 1.0])
    (array([2., 0.]), array([2., 1.]))
    """
    cid = _cluster_index(clusters)
    g = int(cid.max()) + 1 if cid.size else 0
    out = []
    for j, v in enumerate(values):
        _check_real(v, f"values[{j}]")
        a = _one_per_replication(np.asarray(v, dtype=np.float64), f"values[{j}]")
        if a.size != cid.size:
            raise ConfigError(f"cluster_sums: values[{j}] has {a.size} rows for {cid.size} "
                              "cluster labels; allowed: one label per row")
        out.append(np.bincount(cid, weights=a, minlength=g))
    return tuple(out)


def cluster_mean_ci(values, clusters, level: float = LEVEL, signed: bool = True) -> Estimate:
    """Mean of the finite ``values`` over rows, with an interval that resamples
    ``clusters`` (one label per row): the pooled ratio of the clusters' sums to their
    counts (``bootstrap_ratio_ci``), so ``n`` is the number of clusters and its t
    quantile has clusters - 1 degrees of freedom.  The point is ``mean_ci``'s.
    ``signed=False``: every value is >= 0 by definition (a regret), so the interval is
    cut at 0.

    >>> e = cluster_mean_ci([1.0, 1.0, 3.0, 3.0], [0, 0, 1, 1])
    >>> e.mean, e.n
    (2.0, 2)
    """
    check_flags(signed=signed)
    _check_real(values, "values")
    x = _one_per_replication(np.asarray(values, dtype=np.float64), "values")
    labels = _one_per_replication(np.asarray(clusters), "clusters")
    if labels.size != x.size:
        raise ConfigError(f"cluster_mean_ci: {labels.size} cluster labels for {x.size} values; "
                          "allowed: one label per value")
    _cluster_index(labels)  # checked as given: a row's index, before non-finite rows go
    ok = np.isfinite(x)
    total, count = cluster_sums(labels[ok], x[ok], np.ones(int(ok.sum())))
    if np.isfinite(total).all():
        return bootstrap_ratio_ci(total, count, level, signed=signed)
    # finite values whose cluster sums pass a float (1e308 + 1.7e308) were refused as
    # "num[0] = inf"; in units of a power of two the arithmetic is the same, exactly
    unit = math.frexp(float(np.abs(x[ok]).max()))[1]  # values in units of 2**unit
    total, count = cluster_sums(labels[ok], np.ldexp(x[ok], -unit), np.ones(int(ok.sum())))
    e = bootstrap_ratio_ci(total, count, level, signed=signed)
    with np.errstate(over="ignore"):
        return Estimate(*(float(np.ldexp(v, unit)) for v in (e.mean, e.lo, e.hi)), e.n)


def cluster_corr_ci(x, y, clusters, rank: bool = False, level: float = LEVEL,
                    n_boot: int = 2000, seed: int = 0) -> Estimate:
    """Pearson (or, with ``rank``, Spearman) correlation of ``x`` and ``y`` over rows,
    with an interval that resamples ``clusters`` (one label per row), not rows.

    Rows of one cluster are not independent (the rollouts of one prompt share it and
    its group-normalised advantages), so the Fisher-z interval over rows, whose standard
    error is ``1 / sqrt(rows - 3)``, is too narrow: with groups of 4 rollouts its 95%
    interval held the truth in 66-74% of simulated data sets.  Here the standard error of
    ``arctanh(r)`` is that of the cluster bootstrap, with Student-t quantiles on
    ``clusters - 1`` degrees of freedom (91-96% in the same simulations, 24 clusters of 4
    rows, tests/test_stats.py).  ``n`` is the number of clusters.
    """
    _check_level(level, n_boot)
    _bootstrap_seed(seed)
    check_flags(rank=rank)
    a, b = _paired_arrays(x, y, "x", "y")
    cid = _cluster_index(clusters)
    if cid.size != a.size:
        raise ConfigError(f"cluster_corr_ci: {cid.size} cluster labels for {a.size} rows; "
                          "allowed: one label per row")
    g = int(cid.max()) + 1 if cid.size else 0
    # A correlation does not change with the scale: at 1e200 the squared deviations
    # overflowed (r = 0.0 [0, 0] for an r of 0.89), at 1e-200 they underflowed (NaN)
    a, b = (v / np.abs(v).max() if v.size and np.abs(v).max() > 0 else v for v in (a, b))
    one = np.ones((1, a.size))
    point = float(_weighted_corr(a, b, one, rank)[0]) if g else np.nan
    if g < 3 or not np.isfinite(point) or abs(point) == 1.0:
        return Estimate(point, np.nan, np.nan, g)
    # the resampled counts, and several arrays of n_boot x rows at once (6.3 at the
    # most, measured, with rank): n_boot=10**6 over 20,000 rows was numpy's MemoryError
    check_fits(lambda n: 8 * n * (g + 7 * a.size), n_boot, "n_boot",
               f"{a.size} rows in {g} clusters")
    counts = np.random.default_rng(seed).multinomial(g, np.full(g, 1.0 / g), size=n_boot)
    boot = _weighted_corr(a, b, counts[:, cid].astype(np.float64), rank)
    z = np.arctanh(np.clip(boot[np.isfinite(boot)], -1 + 1e-12, 1 - 1e-12))
    half = float(special.stdtrit(g - 1, 0.5 + level / 2)) * float(z.std(ddof=1))
    return Estimate(point, float(np.tanh(np.arctanh(point) - half)),
                    float(np.tanh(np.arctanh(point) + half)), g)


def _weighted_corr(x: np.ndarray, y: np.ndarray, w: np.ndarray, rank: bool) -> np.ndarray:
    """Correlation of the sample that repeats row ``i`` ``w[k, i]`` times, one per row of
    ``w``; with ``rank``, of that sample's average ranks (Spearman, ties included)."""
    if rank:
        x, y = _weighted_ranks(x, w), _weighted_ranks(y, w)
    s = w.sum(axis=1, keepdims=True)
    dx = x - (w * x).sum(axis=1, keepdims=True) / s
    dy = y - (w * y).sum(axis=1, keepdims=True) / s
    with np.errstate(invalid="ignore", divide="ignore"):
        return (w * dx * dy).sum(axis=1) / np.sqrt((w * dx * dx).sum(axis=1)
                                                   * (w * dy * dy).sum(axis=1))


def _weighted_ranks(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Average rank of each row's value in the sample repeating row ``i`` ``w[k, i]``
    times: the weight of the smaller values plus the middle of its ties."""
    values, inv = np.unique(x, return_inverse=True)
    tied = np.zeros((w.shape[0], values.size))
    for k in range(values.size):
        tied[:, k] = w[:, inv == k].sum(axis=1)
    below = np.cumsum(tied, axis=1) - tied
    return (below + (tied + 1.0) / 2.0)[:, inv]


EXACT_MAX_COUNT = 2**44  # see _exact_bounds


def clopper_pearson(k: int, n: int, level: float = LEVEL) -> tuple[float, float]:
    """The exact (Clopper-Pearson) interval of a binomial proportion ``k / n``: beta
    quantiles, the bounds where the upper and lower tails hold ``(1 - level) / 2``.

    >>> [round(x, 4) for x in clopper_pearson(0, 300)]
    [0.0, 0.0122]
    """
    _check_level(level)
    # whole numbers: 1.5 of 3 was an interval of 1.5 events, True one event
    whole = [is_integer(x) or (isinstance(x, float) and x.is_integer())
             for x in (plain_scalar(k), plain_scalar(n))]
    if not (all(whole) and is_number(float_or_nan(n)) and 0 <= k <= n):
        raise ConfigError(f"clopper_pearson: {k!r} of {n!r}; allowed: whole-number counts "
                          "with 0 <= k <= n")
    # as floats: counts beyond 2**63 (a pooled sum of int64 counts) overflowed np.int64
    lo, hi = _exact_bounds(np.float64(k), np.float64(n), level)
    return float(lo), float(hi)


def _exact_bounds(k: np.ndarray, n: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """``clopper_pearson`` over arrays of counts ``0 <= k <= n``, unchecked; the beta
    quantiles take effective (fractional) counts too (``clustered_exact_bounds``)."""
    alpha = (1.0 - level) / 2
    lo = np.where(k > 0, special.betaincinv(np.where(k > 0, k, 1), n - k + 1, alpha), 0.0)
    hi = np.where(k < n, special.betaincinv(k + 1, np.where(k < n, n - k, 1), 1.0 - alpha), 1.0)
    # Beyond EXACT_MAX_COUNT events and non-events betaincinv loses its digits (2**61 trials,
    # a third of them events: lo 0.33333333272 > hi 0.33333332887); there the Wilson (1927)
    # score interval equals the exact one to a relative 1e-6 of its width.
    far = np.minimum(k, n - k) > EXACT_MAX_COUNT
    if np.any(far):
        z = float(special.ndtri(1.0 - alpha))
        kf, nf = np.asarray(k, np.float64), np.asarray(n, np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            centre = (kf + z * z / 2) / (nf + z * z)
            half = z * np.sqrt(kf * (nf - kf) / nf + z * z / 4) / (nf + z * z)
        lo, hi = np.where(far, centre - half, lo), np.where(far, centre + half, hi)
    return lo, hi


def clustered_exact_bounds(k, n, var, clusters, level: float = LEVEL
                           ) -> tuple[np.ndarray, np.ndarray]:
    """The exact interval of pooled proportions ``k / n`` of clustered counts, over arrays.

    Korn & Graubard (1998, "Confidence intervals for proportions with small expected
    number of positive counts estimated from survey data"): the Clopper-Pearson interval
    at the effective sample size ``n* = p (1 - p) / var`` (``var``: the linearised
    variance of the ratio of cluster sums, so ``n / n*`` is the design effect), times
    ``(z / t)**2`` for the t quantile's ``clusters - 1`` degrees of freedom, with
    ``p n*`` effective events; joined with the Clopper-Pearson interval of
    ``k`` of ``n`` itself, so it is never narrower than that (clusters less alike than
    independent jobs are not credited).  Where ``var`` is 0 (one cluster, or clusters
    that show no spread), the latter alone.  The linearised t interval it replaces is
    symmetric: with the CDF at 0.99 and jobs of one cluster alike (a design effect of 3.4),
    it held the truth in 90% of cells of 5 clusters, this in 95% (docs/model.md)."""
    k, n, var = (np.asarray(x, np.float64) for x in (k, n, var))
    clusters = np.asarray(clusters)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = k / n
        df_scale = (special.ndtri(0.5 + level / 2)
                    / special.stdtrit(np.maximum(clusters - 1, 1), 0.5 + level / 2)) ** 2
        spread = var > 0
        n_eff = np.where(spread, p * (1.0 - p) / np.where(spread, var, 1.0) * df_scale, n)
        # past 2^32 n the effective interval lies well inside the exact one, which the
        # join keeps; a variance near 0 would otherwise overflow the exact step's squares
        n_eff = np.minimum(n_eff, np.maximum(n, 1.0) * 2.0 ** 32)
        eff_lo, eff_hi = _exact_bounds(np.where(spread, p * n_eff, k), n_eff, level)
    exact_lo, exact_hi = _exact_bounds(k, n, level)
    return np.minimum(eff_lo, exact_lo), np.maximum(eff_hi, exact_hi)


def quantile_ci(values, q: float = 0.5, level: float = LEVEL, floor=None) -> Estimate:
    """The ``q``-quantile of ``values`` with its distribution-free 95% interval
    ``[X_(l), X_(u)]`` (order statistics; ``B ~ Binomial(n, q)`` counts the values below
    the true quantile, ``P(B < l) <= alpha/2`` and ``P(B >= u) <= alpha/2``), conservative
    for discrete values too.

    Non-finite values (NaN or +inf; -inf is refused) are runs censored at a cap: each is
    known only to exceed its ``floor`` (what it had spent by the cap, a finite number; a
    value seen has its floor unread, NaN say; without ``floor``, every value seen, as for
    a cap common to all runs).  Each order statistic is bracketed
    by those of the censored runs at their floor and at +inf, so the interval takes its
    lower bound from the first and its upper bound from the second: it covers whatever the
    censoring, and equals the uncensored interval while both bounds lie below the censored
    runs.  The point counts censored runs as +inf (it never understates) and is NaN ("n/a")
    when it would need one (a median with half the runs censored).  ``lo`` is -inf when ``n``
    is too small for any order statistic to be a lower bound (NaN when every run is censored
    and no ``floor`` is given), ``hi`` likewise +inf.

    Examples
    --------
    >>> e = quantile_ci(np.arange(1.0, 21.0))
    >>> e.mean, e.lo, e.hi, e.n
    (10.5, 6.0, 15.0, 20)
    >>> e = quantile_ci([1.0, 2.0, 3.0] * 4 + [np.nan] * 8)  # 8 of 20 censored
    >>> e.mean, e.lo, e.hi
    (3.0, 2.0, inf)
    """
    _check_level(level)
    if not isinstance(q, _REAL_SCALAR) or not 0.0 < q < 1.0:
        raise ConfigError(f"q {q!r}: allowed: a quantile strictly between 0 and 1")
    v, floor = _censored(values, floor)
    seen = np.isfinite(v)
    n = int(v.size)
    if n == 0:
        return Estimate(np.nan, np.nan, np.nan, 0)
    upper = np.sort(np.where(seen, v, np.inf))
    lower = np.sort(np.where(seen, v, floor))
    alpha = (1.0 - level) / 2
    # P(B <= k - 1) for k = 1..n: l is the largest k with it <= alpha, u the smallest >= 1 - alpha
    cdf = special.bdtr(np.arange(n), n, q)
    below = np.flatnonzero(cdf <= alpha)
    above = np.flatnonzero(cdf >= 1.0 - alpha)
    lo = float(lower[below[-1]]) if below.size else -np.inf
    hi = float(upper[above[0]]) if above.size else np.inf
    h = (n - 1) * q  # numpy's default (linear) sample quantile
    a, b = int(np.floor(h)), int(np.ceil(h))
    point = float(upper[a] + (h - a) * (upper[b] - upper[a])) if np.isfinite(upper[b]) else np.nan
    return Estimate(point, lo, hi, n)


def quantile_ci_min_n(q: float = 0.5, level: float = LEVEL) -> int:
    """The fewest values whose ``quantile_ci`` has both bounds finite (uncensored): below
    it no order statistic bounds the ``q``-quantile on one side at least (6 for the
    median at 95%: one run of 5 below it has probability 1/32, more than 2.5%).

    >>> quantile_ci_min_n()
    6
    """
    # q or level at or past 0 and 1 have no such count: the search never ended
    if not isinstance(q, _REAL_SCALAR) or not 0.0 < q < 1.0:
        raise ConfigError(f"q {q!r}: allowed: a quantile strictly between 0 and 1")
    _check_level(level)
    alpha = (1.0 - level) / 2
    n = 1
    while not (special.bdtr(0, n, q) <= alpha and special.bdtr(n - 1, n, q) >= 1.0 - alpha):
        n += 1
    return n


def _censored(values, floor) -> tuple[np.ndarray, np.ndarray]:
    """``quantile_ci``'s values and the floor of each (one per value, or one for all;
    without one, the largest value seen), or one line naming what is wrong."""
    _check_real(values, "values")
    if floor is not None:
        _check_real(floor, "floor")
    try:
        v = np.asarray(values, np.float64)
        f = None if floor is None else np.asarray(floor, np.float64)
    except (TypeError, ValueError):
        raise ConfigError("quantile_ci: values and floor: allowed: numbers") from None
    v = _one_per_replication(v, "values")
    f = None if f is None else _one_per_replication(f, "floor")
    low = v == -np.inf  # read as censored, it counted as beyond every value
    if low.any():
        raise ConfigError(f"quantile_ci: values[{int(np.argmax(low))}] = -inf; allowed: "
                          "numbers, NaN or +inf for a run censored at a cap")
    if f is None:
        seen = np.isfinite(v)
        f = np.array([v[seen].max() if seen.any() else np.nan])
    if f.size not in (1, v.size):
        raise ConfigError(f"quantile_ci: floor has {f.size} values for {v.size}; allowed: one "
                          "for all, or one per value")
    f = np.broadcast_to(f, v.shape)
    # a NaN floor sorted above every bound and -inf below it; a seen value's is never read
    bad = ~np.isfinite(v) & ~np.isfinite(f)
    if floor is not None and bad.any():
        i = int(np.argmax(bad))
        raise ConfigError(f"quantile_ci: floor[{i}] = {f[i]} for the censored values[{i}]; "
                          "allowed: a finite number (what the run had spent by its cap)")
    return v, f


def mcnemar_p(a, b) -> float:
    """Exact two-sided McNemar p-value that two paired binary outcomes ``a`` and ``b``
    (bool arrays, one pair per replication) have the same rate: a binomial test on
    the discordant pairs."""
    # as bools, NaN and 2 read as True, and arrays of two lengths broadcast or raised numpy's error
    x, y = _paired_arrays(a, b, "a", "b")
    bad = ~(np.isin(x, (0.0, 1.0)) & np.isin(y, (0.0, 1.0)))
    if bad.any():
        i = int(np.argmax(bad))
        raise ConfigError(f"mcnemar_p: a[{i}] = {float(x[i])!r}, b[{i}] = {float(y[i])!r}; "
                          "allowed: binary outcomes (True/False or 1/0)")
    a, b = x == 1.0, y == 1.0
    n01, n10 = int((a & ~b).sum()), int((~a & b).sum())
    if n01 + n10 == 0:
        return 1.0
    # Under p = 1/2 the two tails are mirror images: twice the smaller one (1 at the centre).
    n = n01 + n10
    return min(1.0, 2.0 * float(special.bdtr(min(n01, n10), n, 0.5)))


def _cluster_index(clusters) -> np.ndarray:
    """Each row's cluster as ``0 .. g-1``, the labels in sorted order.  Labels numpy
    cannot order (None among numbers, numbers among text) were its TypeError ("'<' not
    supported between instances of 'NoneType' and 'int'"); one line now."""
    labels = _one_per_replication(np.asarray(clusters), "clusters")
    # numpy's unique gathers every NaN (and every NaT) into one label: rows whose cluster
    # is missing were resampled as one cluster of their own
    if labels.dtype.kind in "fc":
        missing = np.isnan(labels)
    elif labels.dtype.kind in "mM":  # dates and durations: a run per day
        missing = np.isnat(labels)
    elif labels.dtype.kind == "O":
        missing = np.array([isinstance(x, (float, complex)) and x != x for x in labels], bool)
    else:
        missing = np.zeros(labels.shape, bool)
    if missing.any():
        raise ConfigError(f"clusters[{int(np.argmax(missing))}] = "
                          f"{'NaT' if labels.dtype.kind in 'mM' else 'nan'}: a missing label; "
                          "allowed: one label per row, all numbers, all text or all dates")
    try:
        return np.unique(labels, return_inverse=True)[1]
    except TypeError:
        raise ConfigError("clusters: labels that cannot be ordered (None, or numbers mixed "
                          "with text); allowed: one label per row, all numbers or all "
                          "text") from None


def _one_per_replication(a: np.ndarray, name: str) -> np.ndarray:
    """``a`` (an array of any dtype) flattened, if it holds one value per replication: a
    1-D array, or one row or one column (a frame's column taken as a 2-D array); else one
    line naming it.  A table was flattened, each of its cells a replication:
    ``mean_ci(np.ones((3, 2)))`` reported n = 6."""
    if a.ndim > 2 or (a.ndim == 2 and min(a.shape) > 1):
        raise ConfigError(f"{name} has shape {a.shape}; allowed: one value per replication "
                          "(a 1-D array, or a single row or column)")
    return a.ravel()


def _check_real(values, name: str) -> None:
    """Refuse complex numbers, durations, dates and text, which numpy turns into floats
    (the real part, with a ComplexWarning; the count of a duration's or a date's units;
    the number "2" or "２" writes), before ``values`` are converted: one line naming
    ``name``."""
    a = values
    if not isinstance(getattr(values, "dtype", None), np.dtype):  # a list, a Series, a str
        try:
            a = np.asarray(values)
        except (TypeError, ValueError):  # ragged: the conversion that follows names it
            return
    dtype = a.dtype
    if dtype.kind in ("c", "m", "M"):
        raise ConfigError(f"{name} holds {dtype}; allowed: real numbers, one per replication")
    text = dtype.kind in ("U", "S") or (dtype.kind == "O" and any(
        isinstance(x, (str, bytes)) for x in np.asarray(a).flat))
    if text:
        raise ConfigError(f"{name} holds text ({dtype}); allowed: real numbers, one per "
                          "replication")


def _paired_arrays(x, y, xname: str, yname: str, finite: bool = True):
    """``x`` and ``y`` as float arrays of one value per replication, or one line naming
    what is wrong with them."""
    _check_real(x, xname)
    _check_real(y, yname)
    try:
        a = np.asarray(x, dtype=np.float64)
        b = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError):
        raise ConfigError(f"{xname} and {yname}: allowed: numbers, one per replication") from None
    a, b = _one_per_replication(a, xname), _one_per_replication(b, yname)
    if a.size != b.size:
        raise ConfigError(f"{xname} and {yname} differ in length ({a.size} vs {b.size}); "
                          f"allowed: one value of each per replication")
    if finite:
        bad = ~(np.isfinite(a) & np.isfinite(b))
        if bad.any():
            i = int(np.argmax(bad))
            raise ConfigError(f"{xname}[{i}] = {float(a[i])!r}, {yname}[{i}] = "
                              f"{float(b[i])!r}: allowed: finite numbers")
    return a, b


def min_boot(level: float = LEVEL) -> int:
    """The fewest resamples behind a percentile interval at ``level``: 5 in each tail
    (``MIN_PERCENTILE_BOOT`` at 95%)."""
    return math.ceil(round(10.0 / (1.0 - level), 9))


def check_n_boot(n_boot, level: float = LEVEL, zero_ok: bool = False) -> int:
    """``n_boot`` as an int if it is enough resamples for a percentile interval at
    ``level`` (``min_boot``; or 0, for no interval, if ``zero_ok``), else one
    ``ConfigError``: an interval from fewer has an end set by one resample, and one of 1
    resample can miss its own estimate.  So many that their sums (two floats each, at
    the least) do not fit in memory are refused too (``memory.check_fits``): n_boot=10**12
    was numpy's MemoryError, 2**64-1 its ValueError."""
    need = min_boot(level)
    if (not is_integer(n_boot)
            or not ((zero_ok and n_boot == 0) or n_boot >= need)):
        raise ConfigError(f"n_boot={n_boot!r} is invalid; allowed: an integer >= {need} "
                          f"(fewer cannot set the ends of a {100 * level:g}% interval)"
                          + (", or 0 for no intervals" if zero_ok else ""))
    n_boot = int(n_boot)
    if 16 * n_boot > SURELY_FITS:  # two resampled sums each; below, memory is not asked
        check_fits(lambda n: 16 * n, n_boot, "n_boot", "two resampled sums each")
    return n_boot


def _bootstrap_seed(seed) -> int:
    """``seed`` (``values.check_seed``: 1.5 was the seed 1, and 2**70 raised
    OverflowError) as the int64 the bootstrap kernel takes, a seed above 2**63 as its bit
    pattern, as numpy's uint64 gave."""
    seed = check_seed(seed)
    return seed - 2**64 if seed >= 2**63 else seed


# a real number, numpy's too (np.number holds complex numbers, which scipy's quantiles refuse)
_REAL_SCALAR = (int, float, np.integer, np.floating)


def _check_level(level, n_boot: int | None = None) -> None:
    if not isinstance(level, _REAL_SCALAR) or not 0.0 < level < 1.0:
        raise ConfigError(f"level {level!r}: allowed: a number strictly between 0 and 1")
    if n_boot is not None:
        check_n_boot(n_boot, level)


# Below this many draws a bootstrap runs on one thread: a pool costs about 0.2 ms to start.
PARALLEL_MIN_DRAWS = 2**20


def _resampled_sums(values: np.ndarray, seed: int, n_boot: int) -> np.ndarray:
    """``bootstrap_sums_nb`` of ``values`` (``[n, m]``) over ``n_boot`` resamples
    (``[n_boot, m]``), shared among numba's threads when large (a resample's sums depend
    on its number only, so the result is the same)."""
    values = np.ascontiguousarray(values, dtype=np.float64)
    sums = np.empty((n_boot, values.shape[1]))
    threads = min(numba.get_num_threads(), n_boot)
    if threads <= 1 or values.shape[0] * n_boot < PARALLEL_MIN_DRAWS:
        bootstrap_sums_nb(values, seed, sums, 0)
        return sums
    bounds = [n_boot * t // threads for t in range(threads + 1)]
    with ThreadPoolExecutor(threads) as pool:  # the kernel releases the GIL
        for f in [pool.submit(bootstrap_sums_nb, values, seed, sums[lo:hi], lo)
                  for lo, hi in zip(bounds[:-1], bounds[1:])]:
            f.result()
    return sums


def bootstrap_sums(values, n_boot: int = 2000, seed: int = 0) -> np.ndarray:
    """Cluster-bootstrap sums of ``values`` (``[n, m]``, a row per cluster, a column per
    quantity): ``[n_boot, m]``, resample ``b``'s clusters drawn once for every column from
    ``(seed, b)`` (``kernels.bootstrap``), so columns that are several cells' counts on
    the same clusters (common random numbers) are resampled jointly, and the result is
    the same for any number of threads."""
    n_boot, seed = check_n_boot(n_boot), _bootstrap_seed(seed)
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 2 or values.shape[0] == 0 or not np.isfinite(values).all():
        raise ConfigError(f"values of shape {values.shape}: allowed: a finite [clusters, "
                          "quantities] array with at least one cluster")
    return _resampled_sums(values, seed, n_boot)


def _percentile_interval(sums_num: np.ndarray, sums_den: np.ndarray, point: float,
                         level: float, n: int) -> Estimate:
    """The percentile interval of the resampled ratios ``sums_num / sums_den``.  A resample
    whose den sums to 0 while its num does not (clusters with a num over a den of 0) has a
    ratio beyond any bound, +-inf, and is kept: dropped, a third of the resamples so
    left an interval with a finite upper end.  Among such ratios the percentiles are
    order statistics (interpolating towards an infinity is not a number)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        r = sums_num / sums_den
    r = r[~np.isnan(r)]
    if r.size == 0:
        return Estimate(point, np.nan, np.nan, n)
    q = [0.5 - level / 2, 0.5 + level / 2]
    lo, hi = (np.quantile(r, q) if np.isfinite(r).all()
              else np.quantile(r, q, method="inverted_cdf"))
    return Estimate(point, float(lo), float(hi), n)


def _percentile_bootstrap(num: np.ndarray, den: np.ndarray, point: float, level: float,
                          n_boot: int, seed: int) -> Estimate:
    sums = _resampled_sums(np.column_stack([num, den]), seed, n_boot)
    return _percentile_interval(sums[:, 0], sums[:, 1], point, level, num.size)


def bootstrap_together(ratios, n_boot: int = 2000, seed: int = 0) -> None:
    """Resample every ratio of ``ratios`` (``PooledRatio``, each over the same clusters,
    as a cell's are) that will bootstrap, in one pass: the cluster indices are drawn once
    for all of them (they depend on the seed, the resample and the cluster count only),
    so each ratio's sums, and its ``ratio_ci`` and ``proportion_ci`` with this
    ``n_boot`` and ``seed``, are exactly those of its own bootstrap."""
    n_boot, seed = check_n_boot(n_boot), _bootstrap_seed(seed)
    todo = [r for r in ratios if r._num and r.sum_den != 0]
    for n in {r.n for r in todo}:
        group = [r for r in todo if r.n == n]
        values = np.column_stack([np.concatenate(part) for r in group
                                  for part in (r._num, r._den)])
        sums = _resampled_sums(values, seed, n_boot)
        for q, r in enumerate(group):
            r._resampled = (n_boot, seed, sums[:, 2 * q], sums[:, 2 * q + 1])


# Exact sums (see ``_exact_sum``): a sum is an int in units of 2**-SUM_UNIT, a sum of
# products in units of 2**-PRODUCT_UNIT, so adding chunks is integer addition: the same
# whatever the split, the order or the backend.
SUM_UNIT = 1127  # every finite double is mant * 2**(e - 53), e >= -1073: a whole number of these
PRODUCT_UNIT = 2 * SUM_UNIT
_BLOCK = 2**20  # 2**20 parts below 2**27 sum below 2**47: bincount's float sums stay exact
_SPLIT_SAFE = (2.0**-450, 2.0**450)  # Dekker's product neither overflows nor underflows here


def _exact_sum(x) -> int:
    """The exact sum of finite float64 ``x``, an int in units of 2**-SUM_UNIT.

    Each value is its 53-bit integer mantissa times a power of two (``np.frexp``); the
    mantissas, split in halves of 27 bits, are summed per exponent by ``np.bincount``
    (exact: every partial sum is an integer below 2**53), then shifted into place as
    Python ints: a superaccumulator (Kulisch & Miranker 1981) vectorised.
    """
    x = np.asarray(x, dtype=np.float64).ravel()
    return sum((_block_sum(x[i:i + _BLOCK]) for i in range(0, x.size, _BLOCK)), 0)


def _block_sum(x: np.ndarray) -> int:
    m, e = np.frexp(x)
    mant = (m * 2.0**53).astype(np.int64)  # x == mant * 2**(e - 53), exactly
    hi = mant >> 27
    lo = mant - (hi << 27)  # 0 <= lo < 2**27, |hi| < 2**26
    bins = e + 1073  # e >= -1073 for a nonzero double; 0.0 has e == 0
    s_hi = np.bincount(bins, weights=hi.astype(np.float64))
    s_lo = np.bincount(bins, weights=lo.astype(np.float64))
    total = 0
    for b in np.flatnonzero((s_hi != 0) | (s_lo != 0)).tolist():
        # in units of 2**-1127, mant * 2**(e - 53) is mant << (e + 1074), and e + 1074 == b + 1
        total += (int(s_hi[b]) << (b + 28)) + (int(s_lo[b]) << (b + 1))
    return total


def _exact_dot(a, b) -> int:
    """The exact ``sum(a * b)`` of finite float64 arrays, an int in units of
    2**-PRODUCT_UNIT: each product is ``p + err`` exactly, ``p = a * b`` rounded and
    ``err`` its rounding error by Dekker's (1971) product with Veltkamp's splitting, both
    summed by ``_exact_sum``.  Values outside ``_SPLIT_SAFE`` (where a term of Dekker's
    product would overflow or underflow) are multiplied as Python ints, rarely."""
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    if a.size > _BLOCK:  # a dozen temporaries of the whole array: 790 MB for 10^7 values
        return sum((_exact_dot(a[i:i + _BLOCK], b[i:i + _BLOCK])
                    for i in range(0, a.size, _BLOCK)), 0)
    safe = _split_safe(a) & _split_safe(b)
    rare = not safe.all()  # usually none: skip the copies
    x, y = (a[safe], b[safe]) if rare else (a, b)
    p = x * y
    xh, xl = _veltkamp(x)
    yh, yl = _veltkamp(y)
    err = ((xh * yh - p) + xh * yl + xl * yh) + xl * yl
    total = _exact_sum(np.concatenate([p, err])) << (PRODUCT_UNIT - SUM_UNIT)
    if rare:
        for u, v in zip(a[~safe].tolist(), b[~safe].tolist()):
            total += _int_product(u, v)
    return total


def _split_safe(x: np.ndarray) -> np.ndarray:
    ax = np.abs(x)
    return (ax == 0.0) | ((ax >= _SPLIT_SAFE[0]) & (ax <= _SPLIT_SAFE[1]))


def _veltkamp(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``x`` as ``hi + lo`` exactly, each of at most 26 significant bits (Veltkamp)."""
    split = 134217729.0 * x  # 2**27 + 1
    hi = split - (split - x)
    return hi, x - hi


def _int_product(u: float, v: float) -> int:
    """``u * v`` exactly, in units of 2**-PRODUCT_UNIT."""
    mu, eu = math.frexp(u)
    mv, ev = math.frexp(v)
    # u * v == mant_u * mant_v * 2**(eu + ev - 106); eu, ev >= -1073, so the shift is >= 2
    return (int(mu * 2.0**53) * int(mv * 2.0**53)) << (eu + ev + 2 * 1074)


def _to_float(num: int, den: int) -> float:
    """``num / den`` correctly rounded (Python's int division is), inf beyond the doubles."""
    try:
        return num / den
    except OverflowError:
        return math.inf if num > 0 else -math.inf


def _sqrt_ratio(c: int, d: int) -> float:
    """``sqrt(c / d)`` of integers ``c >= 0``, ``d > 0``, without rounding ``c / d`` to a
    float first (it overflows or underflows where its square root need not): the root
    is taken in units of a power of two."""
    if c <= 0:
        return 0.0
    shift = (c.bit_length() - d.bit_length()) // 2 * 2  # c / d in [2**-2, 2**2] after it
    ratio = c / (d << shift) if shift >= 0 else (c << -shift) / d
    with np.errstate(over="ignore"):
        return float(np.ldexp(np.sqrt(ratio), shift // 2))


def _centred(n: int, s_a: int, s_b: int, s_ab: int) -> int:
    """``n`` times the sum of cross deviations about the means, exactly, from the exact
    sums of ``a``, ``b`` (units 2**-SUM_UNIT) and ``a * b`` (units 2**-PRODUCT_UNIT)."""
    return n * s_ab - s_a * s_b


@dataclass
class MeanMoments:
    """Count, exact sum and exact sum of squares of the finite values seen so far
    (``_exact_sum``, ``_exact_dot``), so ``mean`` (correctly rounded) and ``m2`` (the sum
    of squared deviations, ``S2 - S1**2 / n`` in exact arithmetic, then rounded once) are
    the same bits for any chunking, order or backend; ``mean_ci`` as the batch one."""

    n: int = 0
    s1: int = 0  # sum of x, in units of 2**-SUM_UNIT
    s2: int = 0  # sum of x * x, in units of 2**-PRODUCT_UNIT
    low: float = np.inf  # the range of the values seen: one value is no spread
    high: float = -np.inf

    def add(self, values) -> None:
        _check_real(values, "values")
        try:
            x = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError):
            raise ConfigError("values: allowed: numbers, one per replication") from None
        x = _one_per_replication(x, "values")
        x = x[np.isfinite(x)]
        if x.size == 0:
            return
        self.low, self.high = min(self.low, float(x.min())), max(self.high, float(x.max()))
        self.n += int(x.size)
        self.s1 += _exact_sum(x)
        self.s2 += _exact_dot(x, x)

    def merge(self, other: "MeanMoments") -> None:
        """Add another's values: the sums are exact, so this is ``add`` of its values."""
        self.n, self.s1, self.s2 = self.n + other.n, self.s1 + other.s1, self.s2 + other.s2
        self.low, self.high = min(self.low, other.low), max(self.high, other.high)

    @property
    def mean(self) -> float:
        return _to_float(self.s1, self.n << SUM_UNIT) if self.n else 0.0

    @property
    def m2(self) -> float:
        if not self.n:
            return 0.0
        return _to_float(_centred(self.n, self.s1, self.s1, self.s2), self.n << PRODUCT_UNIT)

    def _sd(self) -> float:
        """The sample standard deviation, ``sqrt(m2 / (n - 1))``.  Where ``m2`` is beyond a
        float's normal range, from the exact sums, the square root taken in units of a
        power of two: values of 1e160 gave an interval of [-inf, inf] (m2 overflowed) and
        of 1e-170 one of no width, [2e-170, 2e-170] (m2 underflowed to 0)."""
        m2 = self.m2
        if 2.0**-1000 < m2 < 2.0**1000:
            return float(np.sqrt(m2 / (self.n - 1)))
        c = _centred(self.n, self.s1, self.s1, self.s2)
        return _sqrt_ratio(c, (self.n << PRODUCT_UNIT) * (self.n - 1))

    def mean_ci(self, level: float = LEVEL) -> Estimate:
        _check_level(level)
        n = self.n
        if n == 0:
            return Estimate(np.nan, np.nan, np.nan, 0)
        m = self.mean
        if n == 1 or agree(self.low, self.high):  # values that all agree show no spread
            return Estimate(m, np.nan, np.nan, n)
        se = self._sd() / np.sqrt(n)
        with np.errstate(over="ignore"):  # a half-width beyond a float is inf: so are the ends
            half = float(special.stdtrit(n - 1, 0.5 + level / 2)) * se
        return Estimate(m, m - half, m + half, n)


def agree(low: float, high: float) -> bool:
    """The least and greatest of some values are one value, to rounding (a relative 1e-12:
    a ratio's one division, or 0.3 and 0.1 + 0.2): values with no spread, which get no
    interval rather than one of no width (the one rule of ``mean_ci`` and the ratios)."""
    return high - low <= 1e-12 * max(abs(low), abs(high))


@dataclass
class PooledRatio:
    """A pooled ratio ``sum num / sum den`` over clusters streamed in chunks.

    It keeps the clusters' values (for the bootstrap) only up to ``BOOTSTRAP_MAX_N``
    clusters, and always the exact sums the point and the linearised interval need
    (``_exact_sum``, ``_exact_dot``: the same for any chunking), the range of the
    clusters' own ratios (no spread, no interval) and the signs that bound the ratio:
    memory is bounded whatever the number of clusters.
    """

    n: int = 0  # clusters with a num or den other than 0: those the ratio rests on
    s_num: int = 0  # exact sums, in units of 2**-SUM_UNIT
    s_den: int = 0
    s_nn: int = 0  # exact sums of products, in units of 2**-PRODUCT_UNIT
    s_dd: int = 0
    s_nd: int = 0
    r_low: float = np.inf  # the range of num / den over clusters with den != 0
    r_high: float = -np.inf
    orphan: bool = False  # a cluster with num != 0 over den == 0: a spread no ratio shows
    nonneg: bool = True  # every num and den >= 0: the ratio is >= 0
    within: bool = True  # every num <= den as well: the ratio is <= 1
    _num: list = field(default_factory=list, repr=False)
    _den: list = field(default_factory=list, repr=False)
    # (n_boot, seed, resampled sums of num, of den) from ``bootstrap_together``
    _resampled: tuple | None = field(default=None, repr=False)

    def add(self, num, den) -> None:
        a, b = _paired_arrays(num, den, "num", "den")
        # A cluster with num = den = 0 (no job the rate is over: recall in a cluster with
        # no hacking job) says nothing of the ratio: counted, it made n the cell's clusters
        # (recall over 2 clusters that had hacking jobs, among 2,000, read n = 2,000) and
        # its t quantile one on 1,999 degrees of freedom, not 1.
        used = (a != 0) | (b != 0)
        if not used.all():
            a, b = a[used], b[used]
        nb = int(a.size)
        if nb == 0:
            return
        self._resampled = None
        if self.n + nb <= BOOTSTRAP_MAX_N:
            self._num.append(a.copy())
            self._den.append(b.copy())
        else:
            self._num, self._den = [], []
        self._add_shape(a, b)
        self.s_num += _exact_sum(a)
        self.s_den += _exact_sum(b)
        self.s_nn += _exact_dot(a, a)
        self.s_dd += _exact_dot(b, b)
        self.s_nd += _exact_dot(a, b)
        self.n += nb

    @property
    def sum_num(self) -> float:
        return _to_float(self.s_num, 1 << SUM_UNIT)

    @property
    def sum_den(self) -> float:
        return _to_float(self.s_den, 1 << SUM_UNIT)

    def _add_shape(self, a: np.ndarray, b: np.ndarray) -> None:
        has = b != 0
        if has.any():
            with np.errstate(over="ignore"):  # a ratio beyond a float is inf: its range
                r = a[has] / b[has]
            self.r_low, self.r_high = min(self.r_low, float(r.min())), max(self.r_high, float(r.max()))
        self.orphan |= bool(np.any(a[~has] != 0))
        self.nonneg &= bool(np.all(a >= 0) and np.all(b >= 0))
        self.within &= bool(np.all(a <= b))

    def no_spread(self) -> bool:
        """Every cluster gives the same ratio (``agree``)."""
        return not self.orphan and agree(self.r_low, self.r_high)

    def ratio_ci(self, level: float = LEVEL, n_boot: int = 2000, seed: int = 0,
                 share: bool = False, signed: bool = False) -> Estimate:
        """Point ratio and its interval: the union of the percentile bootstrap (up to
        ``BOOTSTRAP_MAX_N`` clusters) and the linearised t interval, within the values
        the ratio can take: >= 0 for non-negative sums, and <= 1 for a ``share`` (each
        num a part of its den).  That every num seen is at most its den does not make a
        ratio a share: a delay of 0.9 and 1.0 evaluations per detection in two clusters,
        or a cost ratio below 1 in every seed, was cut at 1.0, though the truth can lie
        above; ``proportion_ci`` cuts its counts at 1 itself.  Likewise a ``signed`` num
        (a difference) that was >= 0 in every cluster seen is not cut at 0."""
        _check_level(level, n_boot)
        seed = _bootstrap_seed(seed)
        check_flags(share=share, signed=signed)  # "no" is truthy
        n = self.n
        if n == 0 or self.s_den == 0:
            return Estimate(np.nan, np.nan, np.nan, n)
        point = _to_float(self.s_num, self.s_den)  # the exact ratio, rounded once
        if n == 1 or self.no_spread() or math.isinf(point):
            # no spread between clusters seen, or a ratio beyond a float: nothing to go on
            # (an inf point made an interval of inf - inf and numpy's warnings)
            return Estimate(point, np.nan, np.nan, n)
        kept = (np.concatenate(self._num), np.concatenate(self._den)) if self._num else None
        with np.errstate(over="ignore"):  # a spread beyond a float is an interval to inf
            half = self._t_half_width(point, level, kept)
        lo, hi = point - half, point + half
        if kept is not None:
            done = self._resampled
            if done is not None and done[:2] == (n_boot, seed):
                boot = _percentile_interval(done[2], done[3], point, level, n)
            else:
                boot = _percentile_bootstrap(*kept, point, level, n_boot, seed)
            if not np.isnan(boot.lo):  # an end may be unbounded (a den of 0 resampled)
                lo, hi = min(lo, boot.lo), max(hi, boot.hi)
        if self.nonneg and not signed:
            lo = max(lo, 0.0)
            hi = min(hi, 1.0) if share and self.within else hi
        return Estimate(point, lo, hi, n)

    def _t_half_width(self, point: float, level: float, kept) -> float:
        """Half-width of the linearised interval of a ratio of means, with a t quantile on
        n - 1 degrees of freedom (``_ratio_se``)."""
        return float(special.stdtrit(self.n - 1, 0.5 + level / 2)) * self._ratio_se(point, kept)

    def _ratio_se(self, point: float, kept) -> float:
        """Standard error of the linearised ratio of means: its variance is
        Var(num_i - R den_i) / (n mean_den^2).  From the kept values when there are (the
        same whatever the chunking), else from the streamed co-moments."""
        n = self.n
        if kept is not None:
            z = kept[0] - point * kept[1]
            d = z - z.mean()
            # in units of a power of two (exact, the same bits): squares of 1e307 overflowed,
            # an interval of [-inf, inf] for values whose spread is a float
            unit = math.frexp(float(np.abs(d).max()))[1] if np.isfinite(d).all() else 0
            scaled = np.ldexp(d, -unit)
            root = np.ldexp(np.sqrt((scaled @ scaled) / (n - 1) / n), unit)
            mean_den = float(kept[1].mean())
        else:
            resid, mean_den = self._streamed_resid(point), _to_float(self.s_den, n << SUM_UNIT)
            root = np.sqrt(resid / (n - 1) / n)
            if not 2.0**-1000 < resid < 2.0**1000:  # rounded to inf or 0 (as mean_ci's m2)
                c, d = self._streamed_resid_exact(point)
                root = _sqrt_ratio(c, d * (n - 1) * n)
        return float(root / abs(mean_den))

    def _streamed_resid(self, point: float) -> float:
        """Sum of squared deviations of ``num_i - point den_i`` about their mean, from the
        exact sums: ``C_nn - 2 R C_nd + R^2 C_dd`` with ``R = p / q`` exactly, rounded once."""
        return _to_float(*self._streamed_resid_exact(point))

    def _streamed_resid_exact(self, point: float) -> tuple[int, int]:
        """``_streamed_resid`` as the exact ratio of two integers."""
        n, (p, q) = self.n, point.as_integer_ratio()
        c_nn = _centred(n, self.s_num, self.s_num, self.s_nn)
        c_dd = _centred(n, self.s_den, self.s_den, self.s_dd)
        c_nd = _centred(n, self.s_num, self.s_den, self.s_nd)
        return (q * q * c_nn - 2 * p * q * c_nd + p * p * c_dd, (n * q * q) << PRODUCT_UNIT)

    def proportion_ci(self, level: float = LEVEL, n_boot: int = 2000, seed: int = 0) -> Estimate:
        """``ratio_ci`` widened to contain the Clopper-Pearson interval of the pooled
        counts, within [0, 1].  Beyond ``BOOTSTRAP_MAX_N`` clusters (no bootstrap), the
        exact interval at the effective sample size in place of the t interval
        (``clustered_exact_bounds``, as ``pooled_cdf_band``)."""
        whole = (1 << SUM_UNIT) - 1  # the exact sums' fraction bits
        if not 0 <= self.s_num <= self.s_den or (self.s_num | self.s_den) & whole:
            raise ConfigError(f"proportion_ci: pooled counts {self.sum_num!r} of "
                              f"{self.sum_den!r}; allowed: whole-number counts with "
                              "0 <= num <= den")
        boot = self.ratio_ci(level, n_boot, seed)
        k = int(round(self.sum_num))
        n = int(round(self.sum_den))
        if n == 0:
            return boot
        exact_lo, exact_hi = clopper_pearson(k, n, level)
        if not np.isfinite(boot.lo):
            return Estimate(boot.mean, exact_lo, exact_hi, boot.n)
        if not self._num:  # beyond BOOTSTRAP_MAX_N: the same interval as pooled_cdf_band's
            se = self._ratio_se(boot.mean, None)
            lo, hi = clustered_exact_bounds(k, n, se * se, self.n, level)
            return Estimate(boot.mean, float(lo), float(hi), boot.n)
        lo, hi = max(0.0, min(boot.lo, exact_lo)), min(1.0, max(boot.hi, exact_hi))
        return Estimate(boot.mean, lo, hi, boot.n)
