"""Coverage of fastsim's intervals (``fastsim.stats``), one mode a kind of interval:
``python benchmarks/coverage.py --help`` lists them, ``MODE --help`` a mode's arguments.

    python benchmarks/coverage.py disjoint [scheduler] [n_jobs] [runs]  # srtf_est 40 300

Simulates one pool of ``runs x 50`` clusters (evalstop:k=2), takes the pooled value over
the whole pool as the truth, and for each n in 2, 3, 5, 10, 20, 50 cuts the pool into
``runs`` disjoint sets of n clusters (independent draws of a cell of n clusters) and
counts how often each pooled metric's 95% interval holds the truth.  Prints, per metric
and n, the coverage among the sets that got an interval, with its exact binomial 95%
interval, and how many sets got none (no spread between their clusters).

    python benchmarks/coverage.py resample [scheduler] [pool] [runs] [policy]
                                                  # srtf_est 60000 2000 evalstop:k=2

Every interval of a summary, at 1 to 2,000 clusters: simulates a pool of ``pool`` clusters
of the headline cell (rlhf_heavy, 300 jobs, ``scheduler`` + ``policy``, paired with the
scheduler alone on the same clusters), and draws ``runs`` cells of n clusters *with
replacement* from it.  Such a cell is n independent draws from the pool, so the pool's own
values are the exact truth (the mean of a metric, of a per-cluster change, the pooled
ratio): no disjoint sets are needed, and n can be 2,000 from a pool of 60,000.  Prints,
per metric and n, the coverage among the cells with an interval +- 1.96 sqrt(p (1 - p) /
cells).  The last row holds the mean JCT change's interval against the ratio of means
(``sum policy / sum baseline - 1``), which it is not an interval for.  First, for each
rate, the pool's variance over clusters against the binomial one (``binomial_spread``).

    python benchmarks/coverage.py skew [scheduler] [pool] [runs]     # srtf_est 60000 20000

The same pool and cells with replacement, for the means and changes only: the Student-t
interval (``stats.mean_ci``) side by side with Hall's (1992) skewness-corrected interval
(``hall_quantiles``) and with the union of the two, each with its coverage +- 1.96 MC s.e.
and its paired difference from t's +- 1.96 s.e. (the same cells), and how far Hall moves
the interval's ends, in standard errors of the mean.  The t interval is computed here in
arrays, as ``mean_ci`` computes it, so 20,000 cells of up to 2,000 clusters take about
two minutes.  Neither candidate was adopted (docs/model.md gives the measurement).

    python benchmarks/coverage.py cdf [scheduler] [pool] [runs]      # srtf_est 20000 2000

The JCT CDF's pointwise interval (``stats.pooled_cdf_band``, drawn in ``jct_cdf.png``) at
1, 3, 10, 30 and 100 h, the same way: a pool of the headline cell, cells of n clusters
drawn with replacement, the pool's pooled CDF the truth; per point and n, the coverage
among the cells with an interval +- 1.96 MC s.e., and the interval's mean width in
parentheses.

    python benchmarks/coverage.py beta [cells]                        # 2000

A pooled FPR of 1.5% whose clusters' own rates differ: each cluster's rate drawn from a
Beta of mean 1.5% and concentration 5, 50 or 200 (5: most clusters near 0, a few far
above), its jobs Poisson(100), pooled over n = 5, 10, 30, 100 clusters.  Prints the
coverage of ``stats.proportion_ci`` over ``cells`` cells with its exact 95% interval
(about 40 CPU-seconds at 2,000).

    python benchmarks/coverage.py ratio-lognormal [cells]             # 2000

A pooled ratio of heavy-tailed values (``stats.bootstrap_ratio_ci`` of sum values / sum
events): each cluster holds Poisson(20) events, each event's value lognormal(0, 1.5)
(a mean of exp(1.125) = 3.08), pooled over n = 5, 10, 30, 100 clusters.  Prints the
coverage over ``cells`` cells with its exact 95% interval (about 10 CPU-seconds at
2,000): on such inputs the union under-covers at few clusters (docs/model.md).

    python benchmarks/coverage.py f1 [pool] [runs]                    # 20000 1000

The k sweep's F1 (REPRODUCTION.md's k row; ``fastsim.sweep.reproduce.k_bootstrap``) the
same way: a pool of the k sweep's cells k = 1, 2, 3 (rlhf_heavy, SRTF-Est + EvalStop, 300
jobs, the same clusters in every cell), cells of n clusters drawn with replacement, the
pool's F1 of its summed counts the truth.  Prints, per k and n, the coverage of F1's 95%
interval among the cells with one +- 1.96 MC s.e. (and its mean width), then how often
the lower bound of k = 1's lead (``lead_lo``, a one-sided bound under each of its two
paired t intervals) is at or below k = 1's true lead (about 75 CPU-seconds).

    python benchmarks/coverage.py bound [draws]                       # 500

The interval of a bound's minimum over m = 5 and 7 cells (REPRODUCTION.md's bound rows),
each cell a pooled rate of n = 10 or 100 clusters (``BOUND_CASES``: a tie, and a lowest
cell on few triggers beside narrow others).  Prints how often the lower end is at or below
every cell's truth (the bound "holds" side), and how often the interval holds the
minimum, for the lowest cell's own 95% interval, the least ends of every cell's 95%
interval, and ``scoring.simultaneous_minimum`` (about 70 CPU-seconds at 500).

    python benchmarks/coverage.py seeds [cells]                       # 2000

Intervals over runs that share a seed (``fastsim detectors``' tables on traces, and its
confirmation): S seeds of 13 healthy runs each (the traces' 11-17 and 798 / 60), each
seed's two firing rates drawn from Beta(0.6 c, 0.4 c) (EvalStop) and Beta(0.4 c, 0.6 c)
(a candidate), a run's two outcomes coupled by one uniform, so the truths are 40% and -20
points by construction.  Per concentration c (10: seeds far apart; 50: about the spread
the confirmation's FPR interval implies; inf: no seed effect) and S = 4, 5,
10, 30, 60, prints the coverage over ``cells`` cells with its exact 95% interval of the
candidate's FPR (``stats.proportion_ci`` of per-seed counts), of the paired change
(``stats.cluster_mean_ci``, resampling seeds) and of the same change's t interval over
runs (``stats.mean_ci``, as the confirmation's first change line); about 100 CPU-seconds.

    python benchmarks/coverage.py costaware [--pool 32768] [--cells 2000] [--quick]

The cost-aware tables' paired cost ratios (docs/costaware.md: ``bootstrap_ratio_ci`` of
one strategy's cost to reach eps over optimal sampling's, by replication), for the settings
of ``COSTAWARE_SETTINGS``: a pool of ``pool`` replications of ``fastsim costaware sgd``
per setting (an eighth of it for the logistic one, ten times slower), cells of n = 32,
128, 256 replications drawn with replacement from it, the pool's ratio the truth (printed
with its own 95% interval: how far it may be from the simulation's).  Prints per ratio and
n the coverage with its Monte Carlo standard error and exact 95% interval, and how many
intervals fell wholly below or above the truth.  Beside it, the same counts over the pool
cut into pool // n disjoint cells of n (``leave_cell_out``), each scored against the ratio
of the rest of the pool: cells that share no replication with each other or with their
truth, fewer of them, and an "ideal" coverage that an exact interval would reach against a
truth with an error of its own (about 170 CPU-seconds, 2.5 minutes on 2 busy cores;
``--quick``, a pool of 2,048 and 100 cells, about 12 s).
"""
import argparse

import numpy as np
from scipy import special

from fastsim import metrics as M
from fastsim import stats
from fastsim.api import simulate
from fastsim.cli import OneLineParser
from fastsim.config import SimConfig
from fastsim.errors import ConfigError
from fastsim.summary import pooled_ci, pooled_counts
from fastsim.values import integer_option

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


def disjoint(sched="srtf_est", n_jobs=40, runs=300):
    """Coverage of every pooled rate and ratio over disjoint sets of n clusters of one pool."""
    cfg = SimConfig.from_specs(sched, "evalstop:k=2", n_jobs=n_jobs)
    clusters = simulate(cfg, runs * max(SIZES), seed=12345).clusters
    counts = pooled_counts(clusters, list(M.pooled_metrics()))
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



RESAMPLED_SIZES = (1, 2, 3, 5, 10, 30, 100, 500, 2000)
RATIO_OF_MEANS = "jct_mean_h_change vs ratio of means"


def _pool(sched, pool, spec="evalstop:k=2"):
    """The pool's two arms (``spec`` and none) and its per-cluster means and changes."""
    policy, base = [simulate(SimConfig.from_specs(sched, p, mix="rlhf_heavy"), pool,
                             seed=777).clusters for p in (spec, "none")]
    values = {m: policy[m].to_numpy() for m in M.mean_metrics() if m in policy.columns}
    for m in M.paired_metrics():
        values[f"{m}_change"] = policy[m].to_numpy() / base[m].to_numpy() - 1.0
    return policy, base, values


def binomial_spread(counts, boot=400, seed=0):
    """Over the pool's clusters, the variance of ``num - rate * den`` against the binomial
    ``rate (1 - rate) den``: 1 when a rate's jobs are independent, more when clusters'
    own rates differ (what the exact binomial widening assumes away).  Percentile
    bootstrap over clusters."""
    def spread(num, den):
        rate = num.sum() / den.sum()
        return (num - rate * den).var(ddof=1) / np.mean(rate * (1 - rate) * den)
    rng = np.random.default_rng(seed)
    for m, (num, den) in counts.items():
        if M.lookup(m).binomial:
            idx = [rng.integers(0, num.size, num.size) for _ in range(boot)]
            lo, hi = np.percentile([spread(num[i], den[i]) for i in idx], [2.5, 97.5])
            print(f"  {m:22s} variance / binomial variance {spread(num, den):.4f} "
                  f"[{lo:.4f}, {hi:.4f}] over {num.size} clusters", flush=True)


def resampled(sched="srtf_est", pool=60_000, runs=2000, seed=7, spec="evalstop:k=2"):
    policy, base, values = _pool(sched, pool, spec)
    counts = pooled_counts(policy, list(M.pooled_metrics()))
    binomial_spread(counts)
    truth = {m: num.sum() / den.sum() for m, (num, den) in counts.items()}
    truth.update({m: float(np.nanmean(np.where(np.isfinite(v), v, np.nan)))
                  for m, v in values.items()})
    truth[RATIO_OF_MEANS] = policy["jct_mean_h"].sum() / base["jct_mean_h"].sum() - 1.0
    rng = np.random.default_rng(seed)
    print(f"{sched} + {spec} vs {sched}, rlhf_heavy, {pool} clusters drawn with "
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
                est[m] = pooled_ci(r, m, boot_seed)  # as a summary's table gives it
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


CDF_POINTS_H = (1.0, 3.0, 10.0, 30.0, 100.0)


def cdf_band(sched="srtf_est", pool=20_000, runs=2000, seed=7):
    """Coverage of the pooled JCT CDF's pointwise band (``stats.pooled_cdf_band``)."""
    cfg = SimConfig.from_specs(sched, "evalstop:k=2", mix="rlhf_heavy")
    points = np.array(CDF_POINTS_H)
    a = simulate(cfg, pool, seed=777, extract=lambda job: np.stack(
        [(job["jct_h"] <= x).sum(axis=1) for x in points], axis=1)).extract  # [cluster, point]
    n_jobs = cfg.workload.n_jobs
    truth = a.sum(axis=0) / (pool * n_jobs)
    rng = np.random.default_rng(seed)
    print(f"{sched} + evalstop:k=2, rlhf_heavy, {pool} clusters drawn with replacement into "
          f"{runs} cells per n; the CDF's coverage % +- 1.96 MC s.e. (mean width) at "
          + ", ".join(f"{x:g} h (truth {t:.4f})" for x, t in zip(points, truth)))
    for n in RESAMPLED_SIZES:
        hit, width = np.zeros(points.size), np.zeros(points.size)
        for _ in range(runs):
            c = a[rng.integers(0, pool, n)]
            _, lo, hi = stats.pooled_cdf_band(
                np.full(points.size, n), c.sum(axis=0), np.full(points.size, n * n_jobs),
                (c * c).sum(axis=0), (c * n_jobs).sum(axis=0), np.full(points.size, n * n_jobs ** 2))
            hit += (lo <= truth) & (truth <= hi)
            width += hi - lo
        cov = hit / runs
        print(f"  n={n:<5d} " + "  ".join(f"{100 * v:5.1f} +- {196 * np.sqrt(v * (1 - v) / runs):.1f}"
                                          f" ({w / runs:.4f})" for v, w in zip(cov, width)),
              flush=True)


def hall_quantiles(q, skew, n):
    """Lower and upper quantiles of the studentized mean ``T = (mean - mu) / se`` of ``n``
    values of sample skewness ``skew`` (central moments with divisor n), by Hall (1992, "On
    the removal of skewness by transformation", JRSS B 54, 221-228): the monotone cubic
    g(t) = t + a t^2 + a^2 t^3 / 3 + b, a = skew / (3 sqrt n), b = skew / (6 sqrt n), removes
    the n^-1/2 (skewness) term of T's Edgeworth expansion (the quadratic alone is Johnson's
    1978 modified t), so T's quantiles are g^-1(-q) and g^-1(q); with Student's ``q`` and
    skew 0 they are the t interval's.  Arrays of cells at once."""
    a, b = skew / (3.0 * np.sqrt(n)), skew / (6.0 * np.sqrt(n))

    def g_inverse(y):  # ((1 + 3a (y - b))^(1/3) - 1) / a without the cancellation at a ~ 0
        c = np.cbrt(1.0 + 3.0 * a * (y - b))
        return 3.0 * (y - b) / (c * c + c + 1.0)

    return g_inverse(-q), g_inverse(q)


def skew_intervals(x, level=stats.LEVEL):
    """``{name: (lo, hi)}`` of the t, Hall and Hall-or-t intervals of each row of ``x``
    (cells of n clusters), the standard errors, and which rows get an interval (some
    spread, as ``mean_ci``)."""
    n = x.shape[1]
    m = x.mean(1)
    d = x - m[:, None]
    m2, m3 = (d * d).sum(1), (d * d * d).sum(1)
    se = np.sqrt(m2 / (n - 1) / n)
    q = special.stdtrit(n - 1, 0.5 + level / 2)
    ok = x.max(1) > x.min(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        skew = np.where(ok, (m3 / n) / (m2 / n) ** 1.5, 0.0)
    t_lo, t_hi = hall_quantiles(q, skew, n)
    return {"t": (m - q * se, m + q * se), "Hall": (m - t_hi * se, m - t_lo * se),
            "Hall or t": (m - np.maximum(q, t_hi) * se, m - np.minimum(-q, t_lo) * se)}, se, ok


def skewed(sched="srtf_est", pool=60_000, runs=20_000, seed=7, batch=2000):
    values = {m: v for m, v in _pool(sched, pool)[2].items() if np.isfinite(v).all()}
    truth = {m: float(np.mean(v)) for m, v in values.items()}  # (non-finite ones left out)
    rng = np.random.default_rng(seed)
    names = ("t", "Hall", "Hall or t")
    print(f"{sched} + evalstop:k=2 vs {sched}, rlhf_heavy, {pool} clusters drawn with "
          f"replacement into {runs} cells per n; coverage % +- 1.96 MC s.e.; (difference "
          f"from t on the same cells +- 1.96 s.e.); Hall's ends moved, mean |shift| / se")
    for n in RESAMPLED_SIZES[1:]:
        hits = {m: {k: [] for k in names} for m in values}
        shift = {m: [] for m in values}
        for start in range(0, runs, batch):
            idx = rng.integers(0, pool, (min(batch, runs - start), n))
            for m, v in values.items():
                ci, se, ok = skew_intervals(v[idx])
                if start == 0 and ok[0]:  # the t interval here is mean_ci's
                    e = stats.mean_ci(v[idx[0]])
                    assert np.allclose([e.lo, e.hi], [ci["t"][0][0], ci["t"][1][0]], rtol=1e-9)
                for k, (lo, hi) in ci.items():
                    hits[m][k].append(((lo <= truth[m]) & (truth[m] <= hi))[ok])
                moved = np.abs(ci["Hall"][0] - ci["t"][0]) + np.abs(ci["Hall"][1] - ci["t"][1])
                shift[m].append(moved[ok] / (2 * se[ok]))
        for m in values:
            h = {k: np.concatenate(hits[m][k]) for k in names}
            cells = []
            for k in names:
                c = h[k].mean()
                cells.append(f"{k} {100 * c:5.2f} +- {196 * np.sqrt(c * (1 - c) / h[k].size):.2f}")
                if k != "t":
                    d = h[k].astype(float) - h["t"]
                    cells[-1] += f" ({100 * d.mean():+.2f} +- {196 * d.std() / np.sqrt(d.size):.2f})"
            print(f"  n={n:<5d} {m:22s} " + "  ".join(cells)
                  + f"  shift {np.concatenate(shift[m]).mean():.3f}"
                  + (f"  [{runs - h['t'].size} cells without]" if h["t"].size < runs else ""),
                  flush=True)


def spread_rates(runs=2000, rate=0.015, jobs=100):
    """Coverage of a pooled rate whose clusters' own rates follow Beta(rate * c, (1 - rate) * c)."""
    print(f"pooled rate {rate:g}, Poisson({jobs}) jobs a cluster, {runs} cells per n; "
          f"coverage % [exact 95% CI] of the cells with an interval")
    for conc in (5.0, 50.0, 200.0):
        cells = []
        for n in (5, 10, 30, 100):
            rng = np.random.default_rng(int(conc) * 1000 + n)
            hit = given = 0
            for _ in range(runs):
                den = rng.poisson(jobs, size=n).astype(float)
                p = rng.beta(rate * conc, (1 - rate) * conc, size=n)
                num = rng.binomial(den.astype(np.int64), p).astype(float)
                e = stats.proportion_ci(num, den, seed=int(rng.integers(1 << 30)))
                if np.isfinite(e.lo):
                    given += 1
                    hit += e.lo <= rate <= e.hi
            lo, hi = stats.clopper_pearson(hit, given)
            cells.append(f"n={n}: {100 * hit / given:.1f} [{100 * lo:.0f}, {100 * hi:.0f}]")
        print(f"  concentration {conc:g}  " + "  ".join(cells), flush=True)


def ratio_lognormal(runs=2000, events=20, sd=1.5):
    """Coverage of a pooled ratio whose per-event values are lognormal(0, sd)."""
    truth = np.exp(sd ** 2 / 2)
    print(f"pooled ratio sum lognormal(0, {sd:g}) / sum events, Poisson({events}) events a "
          f"cluster, {runs} cells per n; coverage % [exact 95% CI] of the cells with an interval")
    cells = []
    for n in (5, 10, 30, 100):
        rng = np.random.default_rng(n)
        hit = given = 0
        for _ in range(runs):
            den = rng.poisson(events, size=n)
            num = np.array([rng.lognormal(0, sd, k).sum() for k in den])
            e = stats.bootstrap_ratio_ci(num, den.astype(float), seed=int(rng.integers(1 << 30)))
            if np.isfinite(e.lo):
                given += 1
                hit += e.lo <= truth <= e.hi
        lo, hi = stats.clopper_pearson(hit, given)
        cells.append(f"n={n}: {100 * hit / given:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]")
        print("  " + cells[-1], flush=True)


# (name, each cell's truth and mean triggers per cluster: the first cell's, the others')
BOUND_CASES = (("a tie: every cell 0.92, 100 triggers", (0.92, 100), (0.92, 100)),
               ("the lowest 0.90 on 10 triggers, the others 0.905 on 400", (0.90, 10),
                (0.905, 400)))


def bound_coverage(runs=500, conc=50.0):
    """Coverage, for a bound over m cells (pooled rates, ``BOUND_CASES``), of three intervals
    for the minimum: the lowest cell's own 95% interval (what the row showed), the least
    ends of every cell's 95% interval (what decided the verdict), and
    ``scoring.simultaneous_minimum`` of every cell's at ``simultaneous_level(m)``."""
    from fastsim.sweep.scoring import simultaneous_level, simultaneous_minimum

    print(f"min over m cells of pooled rates (clusters' rates Beta, concentration {conc:g}; "
          f"Poisson triggers), {runs} draws per case, m and n: % of draws whose lower end is "
          "<= every cell's truth / whose interval holds the minimum (+- 1.96 MC s.e.)")
    for case, first, others in BOUND_CASES:
        print(f"  {case}")
        for m in (5, 7):
            level = simultaneous_level(m)
            truths = [first[0]] + [others[0]] * (m - 1)
            for n in (10, 100):
                rng = np.random.default_rng(1000 * m + n)
                held = {"lowest cell's 95%": [0, 0], "least ends of 95%s": [0, 0],
                        "simultaneous": [0, 0]}
                for _ in range(runs):
                    cells = [_bound_cell(rng, rate, jobs, n, conc, level)
                             for rate, jobs in [first] + [others] * (m - 1)]
                    low = min(cells, key=lambda c: c[0].mean)[0]
                    ends = {"lowest cell's 95%": (low.lo, low.hi)}
                    for name, q in (("least ends of 95%s", 0), ("simultaneous", 1)):
                        ends[name] = simultaneous_minimum((c[q].mean, c[q].lo, c[q].hi)
                                                          for c in cells)[1:]
                    for name, (lo, hi) in ends.items():
                        held[name][0] += lo <= min(truths)
                        held[name][1] += lo <= min(truths) <= hi
                text = "  ".join(f"{name}: " + " / ".join(
                    f"{100 * k / runs:.1f} +- {196 * np.sqrt(k / runs * (1 - k / runs) / runs):.1f}"
                    for k in counts) for name, counts in held.items())
                print(f"    m={m} n={n}  {text}", flush=True)


def _bound_cell(rng, rate, jobs, n, conc, level):
    """One cell's pooled rate of ``n`` clusters, its 95% interval and that at ``level``."""
    den = rng.poisson(jobs, size=n).astype(float)
    p = rng.beta(rate * conc, (1 - rate) * conc, size=n)
    num = rng.binomial(den.astype(np.int64), p).astype(float)
    seed = int(rng.integers(1 << 30))
    return stats.proportion_ci(num, den, seed=seed), stats.proportion_ci(num, den, level,
                                                                         seed=seed)


F1_KS = (1, 2, 3)
F1_SIZES = (5, 10, 30, 100, 2000)


def f1_pool(pool, seed=777):
    """``{k: [pool, 4] counts}`` of the k sweep's cells k in ``F1_KS`` on the same clusters
    (``reproduce.k_counts``' columns)."""
    from fastsim.sweep.reproduce import F1_RATES
    out = {}
    for k in F1_KS:
        cfg = SimConfig.from_specs("srtf_est", f"evalstop:k={k}", mix="rlhf_heavy")
        counts = pooled_counts(simulate(cfg, pool, seed=seed).clusters, list(F1_RATES))
        out[k] = np.column_stack([x for m in F1_RATES for x in counts[m]])
    return out


def f1_coverage(pool=20_000, runs=1000, seed=7):
    from fastsim.sweep.reproduce import _f1_of_sums, k_bootstrap
    counts = f1_pool(pool)
    truth = {k: float(_f1_of_sums(c.sum(axis=0))) for k, c in counts.items()}
    lead = truth[1] - max(v for k, v in truth.items() if k != 1)
    rng = np.random.default_rng(seed)
    print(f"srtf_est + evalstop:k=1,2,3, rlhf_heavy, {pool} clusters drawn with replacement "
          f"into {runs} cells per n; F1's coverage % +- 1.96 MC s.e. (mean width) at "
          + ", ".join(f"k={k} (truth {v:.4f})" for k, v in truth.items())
          + f"; k=1's lead {lead:.4f}, its lower bound at or below it %")
    for n in F1_SIZES:
        hit, given, width = dict.fromkeys(truth, 0), dict.fromkeys(truth, 0), dict.fromkeys(truth, 0.0)
        below = 0
        for _ in range(runs):
            idx = rng.integers(0, pool, n)
            boot = k_bootstrap({k: c[idx] for k, c in counts.items()},
                               seed=int(rng.integers(1 << 31)))
            for k, e in boot.f1.items():
                if np.isfinite(e.lo):
                    given[k] += 1
                    hit[k] += bool(e.lo <= truth[k] <= e.hi)
                    width[k] += e.hi - e.lo
            below += bool(boot.lead_lo[1] <= lead)
        cells = []
        for k in truth:
            c, g = hit[k] / max(given[k], 1), given[k]
            cells.append(f"k={k} {100 * c:5.1f} +- {196 * np.sqrt(c * (1 - c) / max(g, 1)):.1f} "
                         f"({width[k] / max(g, 1):.4f})" + (f" [{runs - g} none]" if g < runs else ""))
        b = below / runs
        print(f"  n={n:<5d} " + "  ".join(cells)
              + f"  lead bound {100 * b:5.1f} +- {196 * np.sqrt(b * (1 - b) / runs):.1f}", flush=True)


SEED_COUNTS = (4, 5, 10, 30, 60)


def seed_runs(rng, seeds, runs, conc):
    """Per run: its seed, EvalStop's and the candidate's firing (0/1), for ``seeds`` seeds
    of ``runs`` runs whose rates are Beta of means 0.6 and 0.4 and concentration ``conc``."""
    if np.isinf(conc):
        a, b = np.full(seeds, 0.6), np.full(seeds, 0.4)
    else:
        a, b = rng.beta(0.6 * conc, 0.4 * conc, seeds), rng.beta(0.4 * conc, 0.6 * conc, seeds)
    u = rng.random((seeds, runs))  # one uniform per run: the two rules see the same scores
    label = np.repeat(np.arange(seeds), runs)
    return label, (u < a[:, None]).ravel().astype(float), (u < b[:, None]).ravel().astype(float)


def seed_clustered(cells=2000, runs=13):
    print(f"{runs} runs a seed, seed rates Beta(0.6 c, 0.4 c) and Beta(0.4 c, 0.6 c), {cells} "
          f"cells per S; coverage % [exact 95% CI]: candidate FPR (truth 40%) | paired change, "
          f"seeds resampled (truth -20 pp) | the same, t over runs")
    for conc in (10.0, 50.0, np.inf):
        for seeds in SEED_COUNTS:
            rng = np.random.default_rng(seeds * 1000 + (0 if np.isinf(conc) else int(conc)))
            hit = np.zeros(3, int)
            given = np.zeros(3, int)
            for _ in range(cells):
                label, es, cand = seed_runs(rng, seeds, runs, conc)
                boot_seed = int(rng.integers(1 << 30))
                fpr = stats.proportion_ci(*stats.cluster_sums(label, cand, np.ones_like(cand)),
                                          seed=boot_seed)
                d = cand - es
                ests = (fpr, stats.cluster_mean_ci(d, label).within(-1.0, 1.0),
                        stats.mean_ci(d).within(-1.0, 1.0))
                for i, (e, truth) in enumerate(zip(ests, (0.4, -0.2, -0.2))):
                    if np.isfinite(e.lo):
                        given[i] += 1
                        hit[i] += e.lo <= truth <= e.hi
            cells_text = []
            for h, g in zip(hit, given):
                lo, hi = stats.clopper_pearson(int(h), int(g))
                cells_text.append(f"{100 * h / g:5.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"
                                  + (f" ({cells - g} none)" if g < cells else ""))
            print(f"  c={conc:<4g} S={seeds:<3d} " + " | ".join(cells_text), flush=True)


# (name, ProblemConfig fields, SGDConfig fields, the strategies whose cost over optimal's is
# checked, the share of --pool simulated): docs/costaware.md's table (least squares, convex,
# lognormal sigma 1.5: 4.26, gradient_norm 1.53), costaware_pareto.toml's heaviest tail
# (alpha 1.1: 4.61) and the ratio nearest 1 of costaware_sgd.toml (cost_only 0.933, where
# p* is beaten but not significantly), whose logistic runs take about 10 times as long
COSTAWARE_SETTINGS = (
    ("least squares, convex, lognormal sigma 1.5", {"cost_sigma": 1.5},
     {"step": "convex", "eps": 0.005}, ("uniform", "gradient_norm"), 1),
    ("least squares, convex, pareto alpha 1.1", {"cost_dist": "pareto", "cost_alpha": 1.1},
     {"step": "convex", "eps": 0.005, "max_steps": 5_000_000}, ("uniform",), 1),
    ("logistic, strongly convex, lognormal sigma 2, cost_corr 0.5",
     {"kind": "logistic", "cost_sigma": 2.0, "cost_corr": 0.5},
     {"step": "strongly_convex", "eps": 0.005, "max_steps": 5_000_000}, ("cost_only",), 1 / 8),
)
COSTAWARE_SIZES = (32, 128, 256)


def costaware_pool(problem_fields, sgd_fields, strategies, replications):
    """``{strategy: cost to reach eps}`` over ``replications`` paired replications of
    ``fastsim costaware sgd`` (seed 1, as the docs' runs: their replications are the pool's
    first), optimal's among them, and how many replications a strategy left short of eps."""
    from fastsim.costaware.sgd import ProblemConfig, SGDConfig, make_problem, run_sgd
    problem = make_problem(ProblemConfig(**problem_fields))
    cfg = SGDConfig(replications=replications, strategies=(*strategies, "optimal"), **sgd_fields)
    runs = run_sgd(problem, cfg, progress=False).sort("strategy", "replication")
    cost = {s: runs.filter(runs["strategy"] == s)["cost_units"].to_numpy()
            for s in cfg.strategies}
    reached = np.logical_and.reduce([np.isfinite(c) for c in cost.values()])
    return {s: c[reached] for s, c in cost.items()}, int((~reached).sum())


def sides(e, truth) -> tuple[int, int, int]:
    """Whether interval ``e`` is wholly below ``truth``, holds it, is wholly above it."""
    return int(e.hi < truth), int(e.contains(truth)), int(e.lo > truth)


def ratio_coverage(num, den, sizes, cells, rng):
    """The pool's ratio ``sum num / sum den`` and, per n of ``sizes``, (cells whose
    ``bootstrap_ratio_ci`` is below it, holds it, is above it) over ``cells`` cells of n
    pairs drawn with replacement: n independent draws of the pool, whose own ratio is then
    the exact truth.  Cells without an interval (no spread) are in none of the three."""
    truth = num.sum() / den.sum()
    counts = {}
    for n in sizes:
        tally = np.zeros(3, int)
        for _ in range(cells):
            idx = rng.integers(0, num.size, n)
            e = stats.bootstrap_ratio_ci(num[idx], den[idx], seed=int(rng.integers(1 << 31)))
            if np.isfinite(e.lo):
                tally += sides(e, truth)
        counts[n] = tuple(int(x) for x in tally)
    return truth, counts


def leave_cell_out(num, den, n):
    """The pool cut into ``num.size // n`` disjoint cells of n consecutive pairs (the
    replications are independent draws: one cut is as good as another), each with its
    truth, the ratio of every pair outside it.  A cell then shares no pair with another
    cell or with its truth, so it may hold runs rarer than the rest of the pool holds.  No
    cells when none would be left out.  Yields (the cell's indices, its truth)."""
    total_num, total_den = num.sum(), den.sum()
    cells = num.size // n if num.size > n else 0
    for start in range(0, cells * n, n):
        idx = np.arange(start, start + n)
        yield idx, (total_num - num[idx].sum()) / (total_den - den[idx].sum())


def disjoint_ratio_coverage(num, den, sizes, rng):
    """Per n of ``sizes``: (below, held, above) as ``ratio_coverage`` counts them, over the
    disjoint cells of ``leave_cell_out``, and how many cells there were."""
    counts = {}
    for n in sizes:
        tally, cells = np.zeros(3, int), 0
        for idx, truth in leave_cell_out(num, den, n):
            cells += 1
            e = stats.bootstrap_ratio_ci(num[idx], den[idx], seed=int(rng.integers(1 << 31)))
            if np.isfinite(e.lo):
                tally += sides(e, truth)
        counts[n] = (*(int(x) for x in tally), cells)
    return counts


def ideal_coverage(n, rest, level=stats.LEVEL):
    """What an exact ``level`` interval of a cell of n replications would cover, scored
    against a truth estimated from ``rest`` others: the two estimates' difference has
    variance (1/n + 1/rest) in units of one replication's (normal approximation)."""
    z = special.ndtri(0.5 + level / 2)
    return 2 * special.ndtr(z / np.sqrt(1 + n / rest)) - 1


def coverage_text(below, held, above, cells):
    """Coverage % (MC s.e.) [exact 95% CI] among the cells with an interval, and the misses
    on each side."""
    given = below + held + above
    c = held / given
    lo, hi = stats.clopper_pearson(held, given)
    return (f"{100 * c:5.1f} ({100 * np.sqrt(c * (1 - c) / given):.1f}) [{100 * lo:.1f}, "
            f"{100 * hi:.1f}]  below {below}, above {above}"
            + (f" ({cells - given} without)" if given < cells else ""))


def disjoint_text(below, held, above, cells, n, pool):
    """``disjoint_ratio_coverage``'s count for cells of n of a pool of ``pool``."""
    if not cells:
        return "no cell (the pool holds n or fewer)"
    if not below + held + above:
        return f"{cells} cells, none with an interval"
    return (f"{cells} cells {coverage_text(below, held, above, cells)}; ideal "
            f"{100 * ideal_coverage(n, pool - n):.1f}")


def costaware_coverage(pool=32_768, cells=2000, seed=7):
    """Coverage of the cost-aware tables' paired cost ratios (``costaware_pool``)."""
    rng = np.random.default_rng(seed)
    # the disjoint cells' bootstrap seeds come from a stream of their own, so the cells
    # drawn with replacement are the ones they were before the disjoint check
    disjoint_rng = np.random.default_rng(seed + 1)
    print(f"cost to reach eps over optimal's, paired replications; a pool of {pool} replications "
          f"(logistic: 1/8 of it) drawn with replacement into {cells} cells per n; coverage % (MC s.e.) "
          "[exact 95% CI]; intervals wholly below / above the truth")
    print("  | disjoint: the pool cut into pool // n cells of n, each scored against the ratio "
          "of the rest of the pool; the same columns; ideal: an exact 95% interval's coverage "
          "of that truth, which has an error of its own")
    for name, problem_fields, sgd_fields, strategies, share in COSTAWARE_SETTINGS:
        cost, short = costaware_pool(problem_fields, sgd_fields, strategies, int(pool * share))
        base = cost["optimal"]
        for s in strategies:
            whole = stats.bootstrap_ratio_ci(cost[s], base)
            truth, counts = ratio_coverage(cost[s], base, COSTAWARE_SIZES, cells, rng)
            disjoint = disjoint_ratio_coverage(cost[s], base, COSTAWARE_SIZES, disjoint_rng)
            print(f"  {name}, {s}/optimal: the pool's ratio {truth:.4f} [{whole.lo:.4f}, "
                  f"{whole.hi:.4f}] over {base.size} replications"
                  + (f" ({short} left out: a strategy missed eps)" if short else ""))
            for n, (below, held, above) in counts.items():
                print(f"    n={n:<4d} {coverage_text(below, held, above, cells)}  | disjoint: "
                      + disjoint_text(*disjoint[n], n, base.size), flush=True)


# --pool's least value: every setting's share of it is at least two replications
MIN_COSTAWARE_POOL = int(np.ceil(2 / min(s[-1] for s in COSTAWARE_SETTINGS)))
# costaware's --pool and --cells: (default, default under --quick)
QUICK_DEFAULTS = {"pool": (32_768, 2048), "cells": (2000, 100)}


def at_least(minimum: int):
    """argparse's ``type`` for a whole number of at least ``minimum``."""
    def check(text: str) -> int:
        value = integer_option(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{text!r} is invalid; allowed: a whole number "
                                             f">= {minimum}")
        return value
    return check


count = at_least(1)  # clusters, cells, runs, draws


def _mode(sub, name, run, summary, time, args=()):
    """A subcommand ``name`` calling ``run`` with its arguments (``(dest, default, type,
    help)``, each an optional positional, in order, as the commands docs/model.md quotes)."""
    p = sub.add_parser(name, help=f"{summary} ({time})", description=f"{summary} ({time}).")
    for dest, default, kind, text in args:  # dest: run's parameter
        p.add_argument(dest, nargs="?", default=default, type=kind,
                       metavar="scheduler" if dest == "sched" else dest,
                       help=f"{text} (default: {default})")
    p.set_defaults(run=run, command=p)
    return p


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="coverage.py", description=__doc__.split("\n\n")[0],
                      epilog="The module's docstring (and docs/model.md) gives each mode's "
                      "design; times are CPU time at the defaults.")
    sub = p.add_subparsers(title="modes", dest="mode", metavar="MODE", required=True)
    sched = ("sched", "srtf_est", str, "the scheduler")
    _mode(sub, "disjoint", disjoint, "pooled rates' intervals at 2-50 clusters, disjoint sets "
          "of one pool", "about 15 s", [sched, ("n_jobs", 40, count, "jobs a cluster"),
                                        ("runs", 300, count, "sets per n")])
    _mode(sub, "resample", resampled, "every interval of a summary at 1-2,000 clusters, "
          "cells drawn with replacement from a pool of the headline cell",
          "about 2.5 minutes", [sched, ("pool", 60_000, count, "clusters in the pool"),
                                ("runs", 2000, count, "cells per n"),
                                ("spec", "evalstop:k=2", str, "the stop policy")])
    _mode(sub, "skew", skewed, "means and changes: t against Hall's skewness-corrected "
          "interval", "about two minutes", [sched, ("pool", 60_000, count, "clusters"),
                                            ("runs", 20_000, count, "cells per n")])
    _mode(sub, "cdf", cdf_band, "the JCT CDF's pointwise band at 1-100 h",
          "about 10 s", [sched, ("pool", 20_000, count, "clusters"),
                             ("runs", 2000, count, "cells per n")])
    _mode(sub, "beta", spread_rates, "a pooled rate whose clusters' rates differ (Beta)",
          "about 40 s", [("runs", 2000, count, "cells per n")])
    _mode(sub, "ratio-lognormal", ratio_lognormal, "a pooled ratio of lognormal(0, 1.5) "
          "values", "about 10 s", [("runs", 2000, count, "cells per n")])
    _mode(sub, "f1", f1_coverage, "the k sweep's F1 and k = 1's lead bound", "about 75 s",
          [("pool", 20_000, count, "clusters"), ("runs", 1000, count, "cells per n")])
    _mode(sub, "bound", bound_coverage, "a bound's minimum over 5 and 7 cells",
          "about 70 s", [("runs", 500, count, "draws per case")])
    _mode(sub, "seeds", seed_clustered, "intervals over runs that share a seed",
          "about 100 s", [("cells", 2000, count, "cells per number of seeds")])
    ca = _mode(sub, "costaware", costaware_coverage, "docs/costaware.md's paired cost "
               "ratios (bootstrap_ratio_ci) at 32, 128 and 256 replications",
               "about 2.5 minutes; --quick about 12 s")
    ca.add_argument("--pool", type=at_least(MIN_COSTAWARE_POOL),
                    help=f"replications simulated per setting, at least {MIN_COSTAWARE_POOL} "
                    f"(default: {QUICK_DEFAULTS['pool'][0]})")
    ca.add_argument("--cells", type=count,
                    help=f"cells per n (default: {QUICK_DEFAULTS['cells'][0]})")
    ca.add_argument("--quick", action="store_true",
                    help="a smoke run: " + ", ".join(f"--{k} {q}" for k, (_, q) in
                                                     QUICK_DEFAULTS.items())
                    + ", each unless given (an explicit value wins)")
    return p


def arguments(argv=None) -> tuple:
    """The mode's function and its keyword arguments, or a one-line refusal (exit 2)."""
    args, unknown = parser().parse_known_args(argv)
    args = vars(args)
    run, command, mode = args.pop("run"), args.pop("command"), args.pop("mode")
    if unknown:
        command.error(f"unrecognized arguments: {' '.join(unknown)}; allowed: "
                      f"{mode}'s own")
    quick = args.pop("quick", False)
    for name, (full, smoke) in QUICK_DEFAULTS.items():
        if name in args and args[name] is None:
            args[name] = smoke if quick else full
    if "sched" in args:  # a bad scheduler or policy: one line before any simulation
        try:
            SimConfig.from_specs(args["sched"], args.get("spec", "evalstop:k=2"))
        except ConfigError as e:
            command.error(str(e))
    return run, args


def main(argv=None):
    run, args = arguments(argv)
    return run(**args)


if __name__ == "__main__":
    main()
