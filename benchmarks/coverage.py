"""Coverage of the pooled-rate intervals (``fastsim.stats``) at few clusters.

    python benchmarks/coverage.py [scheduler] [n_jobs] [runs]     # default: srtf_est 40 300

Simulates one pool of ``runs x 50`` clusters (evalstop:k=2), takes the pooled value over
the whole pool as the truth, and for each n in 2, 3, 5, 10, 20, 50 cuts the pool into
``runs`` disjoint sets of n clusters (independent draws of a cell of n clusters) and
counts how often each pooled metric's 95% interval holds the truth.  Prints, per metric
and n, the coverage among the sets that got an interval, with its exact binomial 95%
interval, and how many sets got none (no spread between their clusters).
"""
import sys

import numpy as np

from fastsim import metrics as M
from fastsim import stats
from fastsim.api import simulate
from fastsim.config import SimConfig
from fastsim.summary import _pooled_counts

SIZES = (2, 3, 5, 10, 20, 50)


def coverage(num, den, truth, n, runs, binomial):
    """(sets whose interval holds the truth, sets with an interval, sets without one)."""
    hit = given = 0
    for r in range(runs):
        a, b = num[r * n:(r + 1) * n], den[r * n:(r + 1) * n]
        if b.sum() == 0:
            continue
        e = stats.proportion_ci(a, b) if binomial else stats.bootstrap_ratio_ci(a, b)
        if np.isfinite(e.lo):
            given += 1
            hit += e.lo <= truth <= e.hi
    return hit, given, runs - given


def main():
    sched = sys.argv[1] if len(sys.argv) > 1 else "srtf_est"
    n_jobs = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 300
    cfg = SimConfig.from_specs(sched, "evalstop:k=2", n_jobs=n_jobs)
    clusters = simulate(cfg, runs * max(SIZES), seed=12345).clusters
    counts = _pooled_counts(clusters, list(M.pooled_metrics()))
    print(f"{sched} + evalstop:k=2, {n_jobs} jobs a cluster, {runs} disjoint sets per n; "
          f"coverage % [exact 95% CI] (sets without an interval)")
    for name, (num, den) in counts.items():
        truth = num.sum() / den.sum()
        cells = []
        for n in SIZES:
            hit, given, none = coverage(num, den, truth, n, runs, M.lookup(name).binomial)
            lo, hi = stats.clopper_pearson(hit, given) if given else (np.nan, np.nan)
            cells.append(f"n={n}: {100 * hit / max(given, 1):.1f} [{100 * lo:.0f}, {100 * hi:.0f}]"
                         + (f" ({none})" if none else ""))
        print(f"  {name:22s} truth {truth:.4f}  " + "  ".join(cells), flush=True)


if __name__ == "__main__":
    main()
