"""The numbers README.md and docs/model.md quote from one-off computations, one subcommand each.

    python benchmarks/doc_numbers.py NAME [--runs FILE]
    python benchmarks/doc_numbers.py --help           # the names, which doc and which number

Each subcommand prints one doc's estimate with its 95% interval and n in the form the doc
writes it, computed as the doc says (the same seeds, sizes and ``fastsim.stats``
functions).  Some start from the per-cluster results of a ``fastsim run ... --out FILE``:

* ``runs``: ``fastsim run --scheduler srtf_est --policy evalstop:k=2 --baseline none
  --clusters 2000 --seed 0 --out r.parquet``, the README's worked example (about 5 s);
* ``pool``: the same with ``--clusters 60000 --seed 777 --out pool.parquet``, the pool of
  ``benchmarks/coverage.py resample`` (about 40 s).

Those take the file as ``--runs FILE``, or else run that command themselves into a
temporary directory (its table is not printed).  The others simulate in-process.  Times
are wall-clock on 2 shared cores with numba's cache warm, given the file (numba's first
compile adds about 30 s).
"""
from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import tempfile
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import numpy as np
import polars as pl

import fastsim
from fastsim.stats import (bootstrap_ratio_ci, clopper_pearson, cluster_corr_ci, mean_ci,
                           pooled_cdf_band, proportion_ci)

RUN = ["run", "--scheduler", "srtf_est", "--policy", "evalstop:k=2", "--baseline", "none"]
RUNS = {"runs": RUN + ["--clusters", "2000", "--seed", "0"],
        "pool": RUN + ["--clusters", "60000", "--seed", "777"]}


def pct(e, digits: int = 1, scale: float = 100.0, less: float = 0.0) -> str:
    """``e`` (less ``less``) as the docs write it: ``-10.11% [-10.28, -9.94], n = 2,000
    clusters``."""
    lo, mid, hi = (f"{scale * (v - less):.{digits}f}" for v in (e.lo, e.mean, e.hi))
    return f"{mid}{'%' if scale == 100 else ''} [{lo}, {hi}], n = {e.n:,} clusters"


def cells(k: int, n: int) -> str:
    """A count of ``k`` of ``n`` cells as a percentage with its exact interval.  The share
    is rounded half up from its exact decimal (1,397 of 2,000: 69.85%, the doc's 69.9%,
    which float formatting would print as 69.8%)."""
    lo, hi = clopper_pearson(k, n)
    share = (Decimal(100 * k) / n).quantize(Decimal("0.1"), ROUND_HALF_UP)
    return f"{share}% [{100 * lo:.1f}, {100 * hi:.1f}] ({k:,} of {n:,} cells)"


@contextlib.contextmanager
def runs_file(given: Path | None, kind: str):
    """``given``, or the ``--out`` file of the ``kind`` command run into a temporary
    directory (``python -m fastsim``: the interpreter running this script)."""
    if given is not None:
        yield given
        return
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / f"{kind}.parquet"
        argv = RUNS[kind] + ["--out", str(out)]
        print(f"building: fastsim {' '.join(argv[:-1])} {kind}.parquet", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "fastsim", *argv], check=True,
                       stdout=subprocess.DEVNULL)
        yield out


def arm(d: pl.DataFrame, name: str, column: str) -> np.ndarray:
    return d.filter(pl.col("arm") == name)[column].to_numpy()


def skewness(v: np.ndarray) -> float:
    return ((v - v.mean()) ** 3).mean() / v.var() ** 1.5


def percentile_interval(stat, v: np.ndarray) -> np.ndarray:
    """The 95% percentile interval of ``stat`` over 2,000 resamples of ``v`` (seed 0)."""
    r = np.random.default_rng(0)
    return np.percentile([stat(v[r.integers(0, v.size, v.size)]) for _ in range(2000)],
                         [2.5, 97.5], axis=0)


def fp_unfreed(path: Path) -> None:
    """README.md, "stop FPR counts false positives so": the share of the policy arm's false
    positives that fire at the job's last evaluation and free nothing, 61.1% [59.2, 63.0],
    n = 1,488 clusters (those with a false positive).  From ``runs``; about 3 s."""
    d = pl.read_parquet(path).filter(pl.col("arm") == "policy")
    print("false positives at the job's last evaluation:",
          pct(proportion_ci(d["fp"] - d["fp_freed"], d["fp"])))


def jct_ratio(path: Path) -> None:
    """docs/model.md, "What a change estimates": the change of mean JCT over all jobs (ratio
    of the arms' mean ``jct_mean_h`` less 1), -10.11% [-10.28, -9.94], n = 2,000 clusters,
    and the two means, 12.236 and 13.612 h.  From ``runs``, about 3 s; from ``pool``, the
    -10.06% [-10.09, -10.03], n = 60,000, that the page quotes beside it."""
    d = pl.read_parquet(path).sort("cluster")
    policy, baseline = arm(d, "policy", "jct_mean_h"), arm(d, "baseline", "jct_mean_h")
    print("change of mean JCT (ratio of means):",
          pct(bootstrap_ratio_ci(policy, baseline), digits=2, less=1.0))
    print(f"mean jct_mean_h: policy {policy.mean():.3f} h, baseline {baseline.mean():.3f} h")


def jct_by_baseline(path: Path) -> None:
    """docs/model.md, "What a change estimates": a cluster's mean JCT change against its
    baseline mean JCT, Pearson -0.60 [-0.63, -0.57], n = 2,000 clusters, and the mean change
    in the quarter with the shortest baseline mean JCT, -6.8% [-7.0, -6.7], and the longest,
    -12.8% [-13.1, -12.5], n = 500 clusters each.  From ``runs``; about 3 s."""
    d = pl.read_parquet(path).sort("cluster")
    b = arm(d, "baseline", "jct_mean_h")
    c = arm(d, "policy", "jct_mean_h") / b - 1
    q = np.argsort(b, kind="stable")
    print("correlation of change and baseline mean JCT:",
          pct(cluster_corr_ci(b, c, np.arange(c.size)), digits=2, scale=1.0))
    quarter = c.size // 4
    print("change, shortest quarter:", pct(mean_ci(c[q[:quarter]])))
    print("change, longest quarter:", pct(mean_ci(c[q[-quarter:]])))


def lognormal_t() -> None:
    """docs/model.md, "Student-t intervals of right-skewed per-cluster quantities": the t
    interval's coverage of the mean of lognormal(0, 1.5) values, 69.9% [67.8, 71.9] at 5
    values to 85.5% [83.8, 87.0] at 100, 2,000 cells each (seed 0).  About 3 s."""
    r = np.random.default_rng(0)
    m = np.exp(1.5 ** 2 / 2)
    for n in (5, 10, 30, 100):
        k = 0
        for _ in range(2000):
            e = mean_ci(r.lognormal(0, 1.5, n))
            k += bool(e.lo <= m <= e.hi)
        print(f"n = {n}: {cells(k, 2000)}")


def makespan_ties(path: Path) -> None:
    """docs/model.md, "Student-t intervals ...": the share of clusters whose makespan change
    is exactly 0, 21.4% [21.1, 21.7], n = 60,000 clusters.  From ``pool``; about 2 s."""
    d = pl.read_parquet(path).sort("cluster")
    z = 1.0 * (arm(d, "policy", "makespan_h") == arm(d, "baseline", "makespan_h"))
    print("makespan change exactly 0:", pct(proportion_ci(z, np.ones_like(z))))


def tail_spread() -> None:
    """docs/model.md, the JCT CDF's band: the count of jobs beyond 100 h in a cluster has 3.4
    [3.3, 3.5] times the binomial variance and skewness 1.9 [1.8, 2.0], n = 20,000
    clusters (percentile intervals of 2,000 resamples, seed 0; the pool simulated with
    seed 777).  About 20 s."""
    cfg = fastsim.SimConfig.from_specs("srtf_est", "evalstop:k=2")
    c = fastsim.simulate(cfg, 20000, seed=777,
                         extract=lambda j: (j["jct_h"] > 100).sum(axis=1)).extract

    def f(c):
        return c.var() / (c.mean() * (1 - c.mean() / 300)), skewness(c)

    lo, hi = percentile_interval(f, c)
    var, skew = f(c)
    print(f"jobs beyond 100 h per cluster: variance over binomial {var:.1f} [{lo[0]:.1f}, "
          f"{hi[0]:.1f}], skewness {skew:.1f} [{lo[1]:.1f}, {hi[1]:.1f}], n = {c.size:,} clusters")


def cdf_150h() -> None:
    """docs/model.md, the JCT CDF's band: its coverage at 150 h, 92.3% [91.5, 93.1] of
    4,000 cells of 10 clusters and 94.7% [93.9, 95.4] of 30, drawn with replacement (seed 7)
    from a pool of 20,000 clusters (seed 777) whose CDF is the truth.  About 15 s."""
    cfg = fastsim.SimConfig.from_specs("srtf_est", "evalstop:k=2")
    a = fastsim.simulate(cfg, 20000, seed=777,
                         extract=lambda j: (j["jct_h"] <= 150).sum(axis=1)).extract
    t = a.mean() / 300
    r = np.random.default_rng(7)

    def holds(c, n):
        _, lo, hi = pooled_cdf_band(np.array([n]), np.array([c.sum()]), np.array([n * 300]),
                                    np.array([(c * c).sum()]), np.array([c.sum() * 300]),
                                    np.array([n * 90000]))
        return lo[0] <= t <= hi[0]

    for n in (10, 30):
        k = sum(bool(holds(a[r.integers(0, a.size, n)], n)) for _ in range(4000))
        print(f"{n} clusters: {cells(k, 4000)}")


def makespan_skew(path: Path) -> None:
    """docs/model.md, "A skewness-corrected interval": the policy arm's makespan skewness,
    1.15 [0.99, 1.36], n = 60,000 clusters (percentile interval of 2,000 resamples, seed 0).
    From ``pool``; about 20 s."""
    v = arm(pl.read_parquet(path).sort("cluster"), "policy", "makespan_h")
    lo, hi = percentile_interval(skewness, v)
    print(f"makespan skewness: {skewness(v):.2f} [{lo:.2f}, {hi:.2f}], n = {v.size:,} clusters")


# name -> (function, the run it reads: "runs", "pool" or None, the columns it needs, what
# it gives, for the list --help prints)
NUMBERS = {
    "fp-unfreed": (fp_unfreed, "runs", ("arm", "fp", "fp_freed"),
                   "README: false positives that free nothing, 61.1%"),
    "jct-ratio": (jct_ratio, "runs", ("cluster", "arm", "jct_mean_h"),
                  "model.md: ratio of means of JCT, -10.11%"),
    "jct-by-baseline": (jct_by_baseline, "runs", ("cluster", "arm", "jct_mean_h"),
                        "model.md: JCT change against baseline JCT, -0.60; -6.8%, -12.8%"),
    "lognormal-t": (lognormal_t, None, (),
                    "model.md: t coverage of a lognormal mean, 69.9-85.5%"),
    "makespan-ties": (makespan_ties, "pool", ("cluster", "arm", "makespan_h"),
                      "model.md: makespan change exactly 0, 21.4%"),
    "tail-spread": (tail_spread, None, (),
                    "model.md: jobs beyond 100 h, variance 3.4 x binomial, skewness 1.9"),
    "cdf-150h": (cdf_150h, None, (), "model.md: CDF band's coverage at 150 h, 92.3%, 94.7%"),
    "makespan-skew": (makespan_skew, "pool", ("cluster", "arm", "makespan_h"),
                      "model.md: makespan skewness, 1.15"),
}


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="name", required=True, metavar="NAME")
    for name, (fn, kind, _, what) in NUMBERS.items():
        p = sub.add_parser(name, help=what.replace("%", "%%"),
                           description=" ".join(fn.__doc__.split()))
        if kind:
            p.add_argument("--runs", type=Path, metavar="FILE",
                           help=f"the --out file of `fastsim {' '.join(RUNS[kind])} --out "
                                f"FILE` (default: run it into a temporary directory)")
    return ap


def unfit(path: Path, columns: tuple) -> str | None:
    """Why ``path`` cannot be read for ``columns``, or None."""
    if not path.is_file():
        return "no such file"
    try:
        missing = set(columns) - set(pl.read_parquet_schema(path))
    except (OSError, pl.exceptions.PolarsError):
        return "not a Parquet file"
    return f"no column {', '.join(sorted(missing))}" if missing else None


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    fn, kind, columns, _ = NUMBERS[args.name]
    if kind is None:
        fn()
        return 0
    if args.runs is not None and (why := unfit(args.runs, columns)):
        print(f"doc_numbers.py {args.name}: error: --runs={args.runs} is invalid ({why}); "
              f"allowed: the --out file of `fastsim {' '.join(RUNS[kind])}`", file=sys.stderr)
        return 2
    with runs_file(args.runs, kind) as path:
        fn(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
