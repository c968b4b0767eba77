"""Coverage of the pooled-rate intervals (``fastsim.stats``) at few clusters.

    python benchmarks/coverage.py [scheduler] [n_jobs] [runs]     # default: srtf_est 40 300

Simulates one pool of ``runs x 50`` clusters (evalstop:k=2), takes the pooled value over
the whole pool as the truth, and for each n in 2, 3, 5, 10, 20, 50 cuts the pool into
``runs`` disjoint sets of n clusters (independent draws of a cell of n clusters) and
counts how often each pooled metric's 95% interval holds the truth.  Prints, per metric
and n, the coverage among the sets that got an interval, with its exact binomial 95%
interval, and how many sets got none (no spread between their clusters).

    python benchmarks/coverage.py resample [scheduler] [pool] [runs]  # srtf_est 60000 2000

Every interval of a summary, at 1 to 2,000 clusters: simulates a pool of ``pool`` clusters
of the headline cell (rlhf_heavy, 300 jobs, ``scheduler`` + evalstop:k=2, paired with the
scheduler alone on the same clusters), and draws ``runs`` cells of n clusters *with
replacement* from it.  Such a cell is n independent draws from the pool, so the pool's own
values are the exact truth (the mean of a metric, of a per-cluster change, the pooled
ratio): no disjoint sets are needed, and n can be 2,000 from a pool of 60,000.  Prints,
per metric and n, the coverage among the cells with an interval +- 1.96 sqrt(p (1 - p) /
cells).  The last row holds the mean JCT change's interval against the ratio of means
(``sum policy / sum baseline - 1``), which it is not an interval for.
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


RESAMPLED_SIZES = (1, 2, 3, 5, 10, 30, 100, 500, 2000)
RATIO_OF_MEANS = "jct_mean_h_change vs ratio of means"


def resampled(sched="srtf_est", pool=60_000, runs=2000, seed=7):
    arms = [simulate(SimConfig.from_specs(sched, p, mix="rlhf_heavy"), pool, seed=777).clusters
            for p in ("evalstop:k=2", "none")]
    policy, base = arms
    counts = _pooled_counts(policy, list(M.pooled_metrics()))
    values = {m: policy[m].to_numpy() for m in M.mean_metrics() if m in policy.columns}
    for m in M.paired_metrics():
        values[f"{m}_change"] = policy[m].to_numpy() / base[m].to_numpy() - 1.0
    truth = {m: num.sum() / den.sum() for m, (num, den) in counts.items()}
    truth.update({m: float(np.nanmean(np.where(np.isfinite(v), v, np.nan)))
                  for m, v in values.items()})
    truth[RATIO_OF_MEANS] = policy["jct_mean_h"].sum() / base["jct_mean_h"].sum() - 1.0
    rng = np.random.default_rng(seed)
    print(f"{sched} + evalstop:k=2 vs {sched}, rlhf_heavy, {pool} clusters drawn with "
          f"replacement into {runs} cells per n; coverage % +- 1.96 MC s.e. (cells without "
          f"an interval)")
    for n in RESAMPLED_SIZES:
        hit = dict.fromkeys(truth, 0)
        given = dict.fromkeys(truth, 0)
        for _ in range(runs):
            idx = rng.integers(0, pool, n)
            est = {m: stats.mean_ci(v[idx]) for m, v in values.items()}
            est[RATIO_OF_MEANS] = est["jct_mean_h_change"]
            ratios = {}
            for m, (num, den) in counts.items():
                ratios[m] = stats.PooledRatio()
                ratios[m].add(num[idx], den[idx])
            boot_seed = int(rng.integers(1 << 31))
            stats.bootstrap_together(ratios.values(), seed=boot_seed)
            for m, r in ratios.items():
                est[m] = (r.proportion_ci(seed=boot_seed) if M.lookup(m).binomial
                          else r.ratio_ci(seed=boot_seed))
            for m, e in est.items():
                if np.isfinite(e.lo):
                    given[m] += 1
                    hit[m] += bool(e.lo <= truth[m] <= e.hi)
        for m in truth:
            g = given[m]
            if not g:
                print(f"  n={n:<5d} {m:40s} truth {truth[m]:+.5g}  (no interval)")
                continue
            c = hit[m] / g
            print(f"  n={n:<5d} {m:40s} truth {truth[m]:+.5g}  {100 * c:5.1f} +- "
                  f"{196 * np.sqrt(c * (1 - c) / g):.1f}" + (f" ({runs - g})" if g < runs else ""),
                  flush=True)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "resample":
        a = sys.argv[2:]
        return resampled(a[0] if a else "srtf_est", int(a[1]) if len(a) > 1 else 60_000,
                         int(a[2]) if len(a) > 2 else 2000)
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
