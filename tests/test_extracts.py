"""The sweeps' JCT histogram, taken from ``simulate``'s per-job arrays (an ``extract``)
instead of a per-job table: the same counts as a search of the edges over that table, and
the sums over clusters behind the pooled CDF's interval: those of each cluster counted
alone, the same in any chunking, and an interval that covers the CDF."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import polars as pl
import pytest
from scipy.special import ndtr

from fastsim.api import simulate
from fastsim.config import SimConfig
from fastsim.errors import ConfigError
from fastsim.stats import PooledRatio, clopper_pearson, pooled_cdf_band
from fastsim.sweep.extracts import (JCT_EDGES_H, JCT_GROUPS, JCT_SCHEMA, jct_histogram,
                                    merge_histograms)

N_BINS = len(JCT_EDGES_H) - 1


def test_bins_are_those_of_a_search_of_the_edges_to_the_bit():
    """Each value at every edge, a step of one float either side, zero, negatives, huge,
    infinite and NaN, and random values over ten decades: counted where a search puts it."""
    e = JCT_EDGES_H
    rng = np.random.default_rng(0)
    values = np.concatenate([e, np.nextafter(e, -np.inf), np.nextafter(e, np.inf),
                             [np.nan, -1.0, -0.0, 5e-324, 1e300, -np.inf, np.inf],
                             10 ** rng.uniform(-4, 6, 200_000), rng.uniform(0, 100, 50_000)])
    types = rng.integers(0, len(JCT_GROUPS) - 1, values.size).astype(np.int8)
    hist = jct_histogram({"jct_h": values.reshape(4, -1), "job_type": types.reshape(4, -1)})
    expected = np.clip(np.searchsorted(e, values, side="right") - 1, 0, N_BINS - 1)
    for g, group in enumerate(JCT_GROUPS):
        sel = expected if g == 0 else expected[types == g - 1]
        counts = np.bincount(sel, minlength=N_BINS)
        h = hist.filter((pl.col("group") == group) & (pl.col("count") > 0))
        assert np.array_equal(h["bin"].to_numpy(), np.flatnonzero(counts)), group
        assert np.array_equal(h["count"].to_numpy(), counts[counts > 0]), group


def _from_table(jobs: pl.DataFrame) -> pl.DataFrame:
    """The histogram the slow way: a search per job over the per-job table, counted per
    group in Polars."""
    idx = np.clip(np.searchsorted(JCT_EDGES_H, jobs["jct_h"].to_numpy(), side="right") - 1,
                  0, N_BINS - 1)
    t = jobs.select("job_type").with_columns(pl.Series("bin", idx.astype(np.int32)))
    parts = [t.select(pl.lit("all").alias("group"), "bin")]
    parts += [t.filter(pl.col("job_type") == g).select(pl.lit(g).alias("group"), "bin")
              for g in JCT_GROUPS[1:]]
    order = {g: i for i, g in enumerate(JCT_GROUPS)}
    return (pl.concat(parts).group_by("group", "bin").agg(pl.len().cast(pl.Int64).alias("count"))
            .sort(pl.col("group").replace_strict(order), "bin"))


@pytest.mark.parametrize("scheduler,mix", [("srtf_est", "rlhf_heavy"), ("fifo", "mixed"),
                                           ("loss_aware", "rlhf_heavy")])
def test_the_histogram_from_arrays_counts_what_the_table_holds(scheduler, mix):
    cfg = SimConfig.from_specs(scheduler, "evalstop:k=2", mix=mix, n_jobs=60)
    shapes = []

    def histogram(per_job):
        shapes.append({k: v.shape for k, v in per_job.items()})
        return jct_histogram(per_job)

    kept = simulate(cfg, 40, seed=5, keep_jobs=True, extract=histogram)
    light = simulate(cfg, 40, seed=5, extract=jct_histogram)
    assert all(s == (40, 60) for s in shapes[0].values())
    assert light.jobs is None and light.clusters.equals(kept.clusters)
    assert light.extract.equals(kept.extract)
    filled = light.extract.filter(pl.col("count") > 0).select("group", "bin", "count")
    assert filled.equals(_from_table(kept.jobs))
    assert light.extract.schema == JCT_SCHEMA
    assert simulate(cfg, 4).extract is None


def test_an_extract_cannot_change_the_per_job_table_beside_it():
    """The per-job table shares the arrays an extract reads: one that sorted or scaled an
    array in place changed the table ``simulate`` returned with it.  The arrays are
    read-only, and a write is one line naming the extract."""
    cfg = SimConfig.from_specs("fifo", "evalstop:k=2", n_jobs=20)

    def sorts_in_place(per_job):
        per_job["jct_h"].sort(axis=1)
        return per_job["jct_h"][:, -1]

    before = simulate(cfg, 4, seed=1, keep_jobs=True).jobs
    with pytest.raises(ConfigError, match=r"^extract sorts_in_place failed: ValueError: .*"
                                          r"read-only"):
        simulate(cfg, 4, seed=1, keep_jobs=True, extract=sorts_in_place)
    kept = simulate(cfg, 4, seed=1, keep_jobs=True, extract=lambda a: a["jct_h"].max(axis=1))
    assert kept.jobs.equals(before)
    assert np.array_equal(kept.extract, before["jct_h"].to_numpy().reshape(4, 20).max(axis=1))


@pytest.mark.parametrize("keeps,said", [
    (lambda a: a["start_h"], "'start_h'"),
    (lambda a: {"first": [a["duration_h"][:, 0]]}, "'duration_h'"),  # a slice, nested
    (lambda a: a, "'job_type'"),
])
def test_an_extract_that_keeps_a_per_job_array_is_refused(keeps, said):
    """``simulate`` reuses the per-job arrays for its next run of the same shape: an
    extract that returned one, or a view of one, held the next run's values afterwards."""
    cfg = SimConfig.from_specs("fifo", "evalstop:k=2", n_jobs=20)
    with pytest.raises(ConfigError, match=rf"^extract <lambda> returned a view of the per-job "
                                          rf"array {said}, which the next simulate"):
        simulate(cfg, 4, seed=1, extract=keeps)
    copied = simulate(cfg, 4, seed=1, extract=lambda a: np.array(a["start_h"])).extract
    simulate(cfg, 4, seed=2)
    assert np.array_equal(copied, simulate(cfg, 4, seed=1, keep_jobs=True).jobs["start_h"]
                          .to_numpy().reshape(4, 20))


def _cluster_by_cluster(jct: np.ndarray, types: np.ndarray) -> dict[str, np.ndarray]:
    """The CDF's sums the slow way: each cluster's histogram per group on its own, summed."""
    n_bins = len(JCT_EDGES_H) - 1
    out = {k: np.zeros((len(JCT_GROUPS), n_bins), np.int64) for k in ("a_sq", "a_n")}
    out.update({k: np.zeros(len(JCT_GROUPS), np.int64) for k in ("clusters", "n_sum", "n_sq")})
    bins = np.clip(np.searchsorted(JCT_EDGES_H, jct, side="right") - 1, 0, n_bins - 1)
    for c in range(jct.shape[0]):
        for g in range(len(JCT_GROUPS)):
            mine = bins[c] if g == 0 else bins[c][types[c] == g - 1]
            if mine.size == 0:
                continue
            a = np.cumsum(np.bincount(mine, minlength=n_bins))
            n = mine.size
            out["a_sq"][g] += a * a
            out["a_n"][g] += a * n
            out["clusters"][g] += 1
            out["n_sum"][g] += n
            out["n_sq"][g] += n * n
    return out


def test_the_cdf_sums_are_those_of_each_cluster_counted_alone():
    rng = np.random.default_rng(3)
    jct = 10 ** rng.uniform(-3, 5, (9, 50))
    jct[2, :5] = np.nan
    types = rng.integers(0, 2, jct.shape).astype(np.int8)  # the third type in no cluster
    types[4] = 0  # a cluster with jobs of one type only
    hist = jct_histogram({"jct_h": jct, "job_type": types})
    want = _cluster_by_cluster(jct, types)
    for g, group in enumerate(JCT_GROUPS):
        h = hist.filter(pl.col("group") == group)
        for k in ("a_sq", "a_n"):
            assert np.array_equal(h[k].to_numpy(), want[k][g]), (group, k)
        for k in ("clusters", "n_sum", "n_sq"):
            assert (h[k] == want[k][g]).all(), (group, k)
    assert want["clusters"][3] == 0 and want["clusters"][1] == 9 and want["clusters"][2] == 8


def _linearised(a: np.ndarray, n: np.ndarray):
    """``PooledRatio.proportion_ci`` with its bootstrap off (beyond ``BOOTSTRAP_MAX_N``):
    the exact interval at the effective sample size, joined with the pooled counts' one."""
    r = PooledRatio()
    r._num, r._den = [], []
    r.add(a, n)
    r._num, r._den = [], []  # no kept values: the variance from the streamed sums
    return r.proportion_ci()


@pytest.mark.parametrize("case", ["spread", "zeros", "ones", "one cluster", "no spread",
                                  "empty clusters"])
def test_the_band_is_pooled_ratios_interval_beyond_the_bootstrap(case):
    rng = np.random.default_rng(len(case))
    n = rng.integers(1, 400, 60)
    a = rng.binomial(n, rng.beta(2, 3, n.size))
    if case == "zeros":
        a[:] = 0
    elif case == "ones":
        a = n.copy()
    elif case == "one cluster":
        a, n = a[:1], n[:1]
    elif case == "no spread":
        n = np.full(n.size, 40)
        a = np.full(n.size, 10)
    elif case == "empty clusters":
        a[::3], n[::3] = 0, 0
    used = n > 0
    cdf, lo, hi = pooled_cdf_band([int(used.sum())], [a.sum()], [n.sum()], [(a * a).sum()],
                                  [(a * n).sum()], [(n * n).sum()])
    e = _linearised(a, n)
    assert cdf[0] == e.mean
    assert np.allclose([lo[0], hi[0]], [e.lo, e.hi], rtol=1e-12, atol=1e-15), (lo, hi, e)
    exact = clopper_pearson(int(a.sum()), int(n.sum()))
    assert lo[0] <= exact[0] and hi[0] >= exact[1]


def test_the_merged_band_is_the_same_in_any_chunking():
    cfg = SimConfig.from_specs("srtf_est", "evalstop:k=2", mix="mixed", n_jobs=40)
    whole = merge_histograms([simulate(cfg, 30, seed=2, extract=jct_histogram).extract])
    parts = merge_histograms(simulate(cfg, 10, seed=2, cluster_start=s,
                                      extract=jct_histogram).extract for s in (20, 0, 10))
    assert whole.equals(parts)
    assert whole.filter(pl.col("group") == "all")["clusters"].to_list() == [30] * 242
    inside = whole.filter((pl.col("cdf_lo") > pl.col("cdf")) | (pl.col("cdf_hi") < pl.col("cdf")))
    assert inside.height == 0 and whole["cdf_lo"].min() >= 0 and whole["cdf_hi"].max() <= 1


def test_the_cdf_band_covers_the_cdf_of_clustered_jobs():
    """Jobs of one cluster share its load (a log-normal scale per cluster), so they are not
    independent: the exact binomial interval of the pooled counts alone covers the CDF far
    less often than 95%; the band, which resamples clusters in effect, covers it."""
    rng = np.random.default_rng(11)
    points = np.array([-1.0, 0.0, 1.0])  # log JCT
    truth = ndtr(points / np.sqrt(1 + 0.5 ** 2))
    band_hits, exact_hits, reps = np.zeros(3), np.zeros(3), 400
    for _ in range(reps):
        n = rng.integers(20, 61, 40)
        mu = rng.normal(0.0, 0.5, n.size)
        a = np.array([[np.sum(rng.normal(m, 1.0, k) <= x) for x in points]
                      for m, k in zip(mu, n)])  # [cluster, point]
        _, lo, hi = pooled_cdf_band(np.full(3, n.size), a.sum(0), np.full(3, n.sum()),
                                    (a * a).sum(0), (a * n[:, None]).sum(0),
                                    np.full(3, (n * n).sum()))
        band_hits += (lo <= truth) & (truth <= hi)
        exact = [clopper_pearson(int(k), int(n.sum())) for k in a.sum(0)]
        exact_hits += [e[0] <= t <= e[1] for e, t in zip(exact, truth)]
    assert np.all(np.abs(band_hits / reps - 0.95) <= 0.035), band_hits / reps  # 3 s.e.
    assert np.all(exact_hits / reps < 0.8), exact_hits / reps


@pytest.mark.parametrize("clusters", [5, 10, 30])
def test_the_cdf_band_covers_the_upper_tail_at_few_clusters(clusters):
    """The CDF at 0.99 over clusters whose jobs are alike (each cluster's share beyond the
    point drawn from a Beta of mean 1% and concentration 125: a design effect of about
    3.4, as the headline cell's JCT at 100 h has).  The symmetric linearised t interval
    (pooled_cdf_band before 56648c3) held the truth in 91.1%, 91.7% and 93.1% of these
    4,000 cells of 5, 10 and 30 clusters (the cells short of long jobs are also those
    whose spread looks small); the exact interval
    at the effective sample size holds it in 95% (+- 0.7, 1.96 MC s.e.)."""
    rng = np.random.default_rng(5)
    cells, jobs, beyond = 4000, 300, 0.01
    p = rng.beta(beyond * 125, (1 - beyond) * 125, (cells, clusters))
    a = jobs - rng.binomial(jobs, p)  # [cell, cluster]: jobs at or below the point
    # each cell is one "point" of the band: its sums over its clusters
    _, lo, hi = pooled_cdf_band(np.full(cells, clusters), a.sum(1), np.full(cells, clusters * jobs),
                                (a * a).sum(1), a.sum(1) * jobs,
                                np.full(cells, clusters * jobs * jobs))
    covered = np.mean((lo <= 1 - beyond) & (1 - beyond <= hi))
    assert abs(covered - 0.95) <= 0.015, covered


def test_the_example_positives_are_stops_that_free_gpus_where_there_are_any():
    """The trajectories figure's example true positive (and false positive) was the first
    job the policy stopped, in job order: under the headline config that was a trigger at
    the job's last evaluation, its completion, which frees no GPU (MODEL.md section 7), drawn
    as "stop (trigger)" at u = 1 as the figure's one picture of a detection.  A stop
    before completion is shown where the clusters hold one; one at completion says so."""
    from fastsim.sweep.extracts import trajectories
    from fastsim.sweep.grid import build_config

    cfg = build_config({"scheduler": "srtf_est", "policy": "evalstop:k=2"})
    jobs, _ = trajectories(cfg, seed=0)
    for role in ("true positive", "false positive"):
        row = jobs.filter(pl.col("role") == role).row(0, named=True)
        assert row["stopped"] and row["trigger_eval"] < row["n_evals"], row


def test_an_extract_comparing_the_job_type_with_text_is_told_the_codes():
    """A metric's ``jobs["job_type"] == "rlhf"`` raises naming the codes, but an extract got
    the plain codes: its count of RLHF jobs by text was 0 on every run, unsaid.  It gets
    the column as a metric does; compared with the codes, the same values as before."""
    from fastsim.kernels.codes import RLHF

    cfg = SimConfig.from_specs("fifo", "evalstop:k=2", n_jobs=20)
    with pytest.raises(ConfigError, match=r"^extract <lambda> failed: TypeError: "
                                          r'jobs\["job_type"\] holds integer codes, not text: '
                                          r"== 'rlhf' is False for every job"):
        simulate(cfg, 2, extract=lambda a: (a["job_type"] == "rlhf").sum())
    res = simulate(cfg, 2, keep_jobs=True, extract=lambda a: (a["job_type"] == RLHF).sum(axis=1))
    assert type(res.extract) is np.ndarray
    assert res.extract.sum() == res.jobs.filter(pl.col("job_type") == "rlhf").height > 0


def test_decide_stops_announces_a_first_compile_in_one_line(capsys, monkeypatch,
                                                          forget_compiled):
    """``decide_stops`` decides in a kernel of its own, not the one-pass pipeline: on an
    empty numba cache its first call compiled for 10-30 s with no line (it was fastsim
    reproduce's 25 s of silence between the last sweep and the figures).  One line, once
    per process."""
    import fastsim.compile_notice
    from fastsim.api import decide_stops
    from fastsim.workload import generate_workload

    cfg = SimConfig.from_specs("srtf_est", "evalstop:k=2", n_jobs=20)
    w = generate_workload(cfg.workload, 2)
    monkeypatch.setattr(fastsim.compile_notice, "kernels_cached", lambda *names: False)
    forget_compiled()
    decide_stops(cfg, w)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("compiling the stop-decision kernels"), err
    decide_stops(cfg, w)  # compiled in this process
    assert capsys.readouterr().err == ""
    forget_compiled()
    monkeypatch.setattr(fastsim.compile_notice, "kernels_cached", lambda *names: True)
    decide_stops(cfg, w)  # found in the on-disk cache
    assert capsys.readouterr().err == ""


def test_the_example_trajectories_compile_nothing_after_the_sweeps():
    """fastsim reproduce's example trajectories decide their stops in the one-pass kernel
    its sweeps compiled, not in ``decide_stops``' own kernel: on an empty numba cache that
    one compiled for 9 CPU-seconds more (25 s at load) between the last sweep and the
    figures.  A fresh process that ran the headline cell compiles nothing more for them."""
    code = ("from fastsim.api import simulate\n"
            "from fastsim.sweep.extracts import trajectories\n"
            "from fastsim.sweep.grid import build_config\n"
            "from fastsim.kernels.stops import resolve_stops_nb\n"
            "cfg = build_config({'scheduler': 'srtf_est', 'policy': 'evalstop:k=2'})\n"
            "simulate(cfg, 2)\n"
            "jobs, points = trajectories(cfg, seed=0)\n"
            "assert jobs.height == 4 and points.height > 0, jobs\n"
            "print(len(resolve_stops_nb.signatures))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0 and out.stdout.strip() == "0", out.stderr
