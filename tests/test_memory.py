"""Memory of ``fastsim run`` and of sweep aggregation does not grow with the number of
clusters (or of chunks).

Peak RSS is measured in a fresh process per run (``own_peak_rss_mb``: the process's own
high-water mark, not ``ru_maxrss``, which on Linux keeps the parent's size at the fork);
unlike time, it is stable enough on a loaded machine to assert.  Before the streamed summaries, 40,000
clusters cost about 700 MB more than 2,000 (the bootstrap's index matrix alone).
"""
import subprocess
import sys

import numpy as np

RUN = """
import sys
from fastsim.bench import own_peak_rss_mb
from fastsim.cli import main
rc = main(["run", "--clusters", sys.argv[1], "--n-jobs", "20", "--gpus", "16", "--no-progress"])
print(rc, own_peak_rss_mb())
"""


def _peak_rss_mb(n_clusters: int) -> float:
    out = subprocess.run([sys.executable, "-c", RUN, str(n_clusters)], check=True,
                         capture_output=True, text=True).stdout.split()
    assert out[-2] == "0"
    return float(out[-1])


def test_own_peak_rss_is_the_childs_not_the_parents():
    # The parent holds 400 MB when it starts the child; ru_maxrss would report them.
    held = np.ones(50_000_000)
    out = subprocess.run([sys.executable, "-c",
                          "from fastsim.bench import own_peak_rss_mb; print(own_peak_rss_mb())"],
                         check=True, capture_output=True, text=True).stdout
    assert held[-1] == 1 and float(out.split()[-1]) < 300, out


def test_run_peak_rss_is_flat_in_clusters():
    # 198,000 more clusters move the peak by under 1 MB; 10 MB is 50 bytes a cluster.  At
    # 40,000 clusters against 40 MB, keeping every cluster's metrics (+24 MB) passed.
    small, large = _peak_rss_mb(2_000), _peak_rss_mb(200_000)
    assert large - small < 10, (small, large)


AGGREGATE = """
import os, sys
import numpy as np, polars as pl
from fastsim.api import simulate
from fastsim.bench import own_peak_rss_mb
from fastsim.sweep.aggregate import aggregate
from fastsim.sweep.extracts import JCT_EDGES_H, JCT_GROUPS
from fastsim.sweep.grid import load_sweep
from fastsim.sweep.store import SweepStore

os.fsync = lambda fd: None  # durability is not under test: keep a thousand small writes fast
n_bins = len(JCT_EDGES_H) - 1  # the largest a chunk's JCT histogram can be: every bin filled
hist = pl.DataFrame({"group": [g for g in JCT_GROUPS for _ in range(n_bins)],
                     "bin": np.tile(np.arange(n_bins, dtype=np.int32), len(JCT_GROUPS)),
                     "count": np.ones(len(JCT_GROUPS) * n_bins, dtype=np.int64)})
for n, out in zip(map(int, sys.argv[2:4]), sys.argv[4:6]):
    grid = load_sweep(sys.argv[1], clusters=n, chunk=1)
    cell = grid.cells[0]
    one = simulate(cell.config, 1).clusters
    with SweepStore.open(out, grid) as store:
        for i in range(n):
            store.write_chunk(cell.id, i, one.with_columns(pl.lit(i, pl.Int64).alias("cluster")),
                              hist)
        aggregate(store)
    print(own_peak_rss_mb())
"""

SWEEP_FILE = """
title = "aggregation memory"
baseline = false
[base]
scheduler = "fifo"
policy = "none"
n_jobs = 8
gpus = 16
"""


def test_sweep_aggregation_peak_rss_is_flat_in_chunks(tmp_path):
    # A cell of 1,000 chunks aggregated after one of 50, in one process: the second may
    # raise the peak only by a bounded amount.  Reading a cell's JCT histograms all at
    # once cost about 125 kB per chunk here (+124 MB; 2,000 chunks per cell in the
    # million-cluster sweep); merged a batch at a time, 11 MB.
    sweep = tmp_path / "agg.toml"
    sweep.write_text(SWEEP_FILE)
    out = subprocess.run([sys.executable, "-c", AGGREGATE, str(sweep), "50", "1000",
                          str(tmp_path / "small"), str(tmp_path / "large")],
                         check=True, capture_output=True, text=True).stdout.split()
    small, large = float(out[-2]), float(out[-1])
    assert large - small < 40, (small, large)
