"""Coverage of the interval methods of ``fastsim.stats`` on distributions with known truth.

Each test draws many independent replications with a fixed seed and counts how often
the 95% interval contains the true value.  With R replications the count's standard
error is sqrt(0.95 * 0.05 / R); the bands below are about +-3 standard errors, so a
method that is off by a few points (a wrong quantile, a z instead of t, a biased
bootstrap) fails.
"""
from __future__ import annotations

import numpy as np

from fastsim.stats import bootstrap_ratio_ci, mean_ci, paired_change_ci


def coverage(hits) -> float:
    return float(np.mean(hits))


def test_mean_ci_covers_normal_mean_at_small_n():
    rng = np.random.default_rng(1)
    hits = [mean_ci(rng.normal(3.0, 2.0, size=8)).contains(3.0) for _ in range(4000)]
    assert 0.94 <= coverage(hits) <= 0.96 + 0.005  # t interval is exact for normal data
    # A normal-quantile interval would under-cover at n=8 (about 0.91); make sure we
    # would notice: the band above excludes it.


def test_mean_ci_covers_skewed_mean_at_cluster_scale():
    rng = np.random.default_rng(2)
    hits = [mean_ci(rng.lognormal(0.0, 0.8, size=200)).contains(np.exp(0.32))
            for _ in range(2000)]
    assert 0.925 <= coverage(hits) <= 0.97


def test_paired_change_ci_covers_true_relative_change():
    rng = np.random.default_rng(3)
    hits, widths_paired = [], []
    for _ in range(1500):
        base = rng.lognormal(2.0, 0.5, size=100)         # common random numbers
        policy = base * 0.9 * rng.lognormal(0.0, 0.05, size=100) / np.exp(0.05 ** 2 / 2)
        e = paired_change_ci(policy, base)
        hits.append(e.contains(-0.10))
        widths_paired.append(e.hi - e.lo)
    assert 0.93 <= coverage(hits) <= 0.97
    assert np.mean(widths_paired) < 0.03  # pairing removes the spread (unpaired: ~0.2)


def test_bootstrap_ratio_ci_covers_pooled_precision():
    """Clusters with a random number of positives and a cluster-level precision effect
    (jobs in a cluster are correlated): the pooled ratio's truth is E[TP] / E[TP + FP]."""
    rng = np.random.default_rng(4)
    truth = 0.8  # E[p_c] with p_c ~ Beta(8, 2), independent of the cluster's count
    hits = []
    for _ in range(600):
        n_pos = rng.poisson(20, size=150) + 1
        p_c = rng.beta(8, 2, size=150)
        tp = rng.binomial(n_pos, p_c)
        hits.append(bootstrap_ratio_ci(tp, n_pos, n_boot=1000, seed=int(rng.integers(1 << 31)))
                    .contains(truth))
    assert 0.91 <= coverage(hits) <= 0.98


def test_degenerate_inputs():
    assert mean_ci([]).n == 0 and np.isnan(mean_ci([]).mean)
    e = mean_ci([2.0, 2.0, 2.0])
    assert (e.mean, e.lo, e.hi) == (2.0, 2.0, 2.0)
    assert paired_change_ci([1.0, 2.0], [0.0, 1.0]).n == 1  # zero baseline dropped
    assert np.isnan(bootstrap_ratio_ci([0, 0], [0, 0]).mean)


def test_proportion_ci_never_collapses_and_covers_rare_rates():
    from fastsim.stats import proportion_ci

    zero = proportion_ci(np.zeros(50), np.full(50, 40.0))
    assert zero.mean == 0.0 and zero.lo == 0.0 and 0.0 < zero.hi < 0.01
    # coverage of a rare event rate (0.2%) with clustered counts of 40 trials each
    rng = np.random.default_rng(3)
    p, hits, reps = 0.002, 0, 300
    for _ in range(reps):
        den = np.full(60, 40.0)
        num = rng.binomial(40, p, size=60).astype(float)
        e = proportion_ci(num, den, n_boot=400, seed=int(rng.integers(1 << 30)))
        hits += e.lo <= p <= e.hi
    assert hits / reps >= 0.93
