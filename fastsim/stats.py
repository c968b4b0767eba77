"""Confidence intervals, in one place: every reported number goes through here.

* ``mean_ci``: Student-t interval of a mean over independent replications (clusters,
  seeds).  scipy.stats supplies the quantile.
* ``paired_change_ci``: per-replication relative change against a baseline computed
  on identical draws (common random numbers), then ``mean_ci`` of those changes.
* ``bootstrap_ratio_ci``: percentile cluster-bootstrap of a pooled ratio
  (precision = sum TP / sum(TP + FP) over clusters): resample clusters, not jobs,
  because jobs in one cluster share a schedule.
* ``proportion_ci``: the same for a pooled *proportion* of counts, widened to contain
  the Clopper-Pearson exact interval of the pooled counts.  When an event never occurs
  (no false positive in 2,000 clusters) every bootstrap resample gives 0 and the
  percentile interval collapses to [0, 0]; the exact binomial bound still says how
  large the rate could be.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

LEVEL = 0.95


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its 95% interval and the number of replications behind it."""

    mean: float
    lo: float
    hi: float
    n: int

    def contains(self, value: float) -> bool:
        return bool(self.lo <= value <= self.hi)

    def fmt(self, scale: float = 1.0, digits: int = 3, unit: str = "") -> str:
        if not np.isfinite(self.mean):
            return "n/a"
        m, lo, hi = (self.mean * scale, self.lo * scale, self.hi * scale)
        return f"{m:.{digits}f}{unit} [{lo:.{digits}f}, {hi:.{digits}f}]"


def mean_ci(values, level: float = LEVEL) -> Estimate:
    """Mean of finite ``values`` with a Student-t interval.

    Examples
    --------
    >>> e = mean_ci([1.0, 2.0, 3.0])
    >>> round(e.mean, 3), e.n
    (2.0, 3)
    """
    x = np.asarray(values, dtype=np.float64)
    x = x[np.isfinite(x)]
    n = int(x.size)
    if n == 0:
        return Estimate(np.nan, np.nan, np.nan, 0)
    m = float(x.mean())
    if n == 1:
        return Estimate(m, np.nan, np.nan, 1)
    se = float(x.std(ddof=1)) / np.sqrt(n)
    if se == 0.0:
        return Estimate(m, m, m, n)
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * se
    return Estimate(m, m - half, m + half, n)


def paired_change_ci(policy, baseline, level: float = LEVEL) -> Estimate:
    """Mean per-replication relative change ``policy / baseline - 1`` with a t interval.

    Pairs whose baseline is zero or non-finite are dropped (a relative change is
    undefined there); ``n`` says how many pairs remain.
    """
    p = np.asarray(policy, dtype=np.float64)
    b = np.asarray(baseline, dtype=np.float64)
    if p.shape != b.shape:
        raise ValueError(f"paired arrays differ in shape: {p.shape} vs {b.shape}")
    ok = np.isfinite(p) & np.isfinite(b) & (b != 0.0)
    return mean_ci(p[ok] / b[ok] - 1.0, level)


def bootstrap_ratio_ci(num, den, level: float = LEVEL, n_boot: int = 2000, seed: int = 0) -> Estimate:
    """Pooled ratio ``sum(num) / sum(den)`` with a percentile cluster bootstrap."""
    a = np.asarray(num, dtype=np.float64)
    b = np.asarray(den, dtype=np.float64)
    n = int(a.size)
    tot = b.sum()
    if n == 0 or tot == 0:
        return Estimate(np.nan, np.nan, np.nan, n)
    point = float(a.sum() / tot)
    rng = np.random.default_rng(seed)  # resampling, not simulation: CRN not needed
    idx = rng.integers(0, n, size=(n_boot, n))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = a[idx].sum(axis=1) / b[idx].sum(axis=1)
    r = r[np.isfinite(r)]
    if r.size == 0:
        return Estimate(point, np.nan, np.nan, n)
    lo, hi = np.quantile(r, [0.5 - level / 2, 0.5 + level / 2])
    return Estimate(point, float(lo), float(hi), n)


def proportion_ci(num, den, level: float = LEVEL, n_boot: int = 2000, seed: int = 0) -> Estimate:
    """Pooled proportion ``sum(num) / sum(den)`` of per-replication counts.

    The interval is the union of the cluster-bootstrap percentile interval (which
    carries the correlation within a cluster) and the Clopper-Pearson interval of the
    pooled counts (which never collapses at 0% or 100%).

    Examples
    --------
    >>> e = proportion_ci([0, 0, 0], [100, 120, 80])
    >>> e.mean, e.lo, round(e.hi, 4)
    (0.0, 0.0, 0.0122)
    """
    boot = bootstrap_ratio_ci(num, den, level, n_boot, seed)
    k = int(round(float(np.sum(num))))
    n = int(round(float(np.sum(den))))
    if n == 0:
        return boot
    exact = stats.binomtest(k, n).proportion_ci(confidence_level=level, method="exact")
    lo = float(exact.low) if not np.isfinite(boot.lo) else min(boot.lo, float(exact.low))
    hi = float(exact.high) if not np.isfinite(boot.hi) else max(boot.hi, float(exact.high))
    return Estimate(boot.mean, lo, hi, boot.n)
