"""The sweeps' JCT histogram, taken from ``simulate``'s per-job arrays (an ``extract``)
instead of a per-job table: the same counts as a search of the edges over that table."""
from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from fastsim.api import simulate
from fastsim.config import SimConfig
from fastsim.errors import ConfigError
from fastsim.sweep.extracts import JCT_EDGES_H, JCT_GROUPS, jct_histogram

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
        h = hist.filter(pl.col("group") == group)
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
    assert light.extract.equals(_from_table(kept.jobs))
    assert light.extract.schema == {"group": pl.String, "bin": pl.Int32, "count": pl.Int64}
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
