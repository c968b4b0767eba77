"""The Dask backend on a LocalCluster (2 worker processes) gives the in-process result bit
for bit, through the same ``fastsim sweep`` code path."""
from __future__ import annotations

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from fastsim.cli import main

distributed = pytest.importorskip("dask.distributed")

SWEEP = """
clusters = 12
chunk = 4
seed = 3
[base]
n_jobs = 30
gpus = 16
[axes]
scheduler = ["fifo:backfill", "srtf_est", "loss_aware"]
policy = ["evalstop:k=2", "oracle"]
"""


def test_dask_local_cluster_equals_in_process(tmp_path):
    p = tmp_path / "d.toml"
    p.write_text(SWEEP)
    local, remote = tmp_path / "local", tmp_path / "dask"
    assert main(["sweep", str(p), "--out", str(local), "--no-progress"]) == 0
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        assert main(["sweep", str(p), "--out", str(remote), "--no-progress", "--backend",
                     "dask", "--address", cluster.scheduler_address]) == 0
    files = sorted(x.relative_to(local) for x in local.glob("cells/*/*.parquet"))
    assert files == sorted(x.relative_to(remote) for x in remote.glob("cells/*/*.parquet"))
    assert len(files) == 9 * 3 * 2  # 9 cells x 3 chunks x (clusters, JCT histogram)
    for rel in files:
        assert_frame_equal(pl.read_parquet(local / rel), pl.read_parquet(remote / rel))
    assert_frame_equal(pl.read_parquet(local / "summary.parquet"),
                       pl.read_parquet(remote / "summary.parquet"))


def test_million_sweep_file_on_dask_equals_in_process(tmp_path):
    """``sweeps/million.toml`` itself, cut to 8 clusters per cell: 2 Dask workers give the
    in-process aggregate bit for bit (the full file differs only in ``--clusters``)."""
    from pathlib import Path

    sweep = Path(__file__).resolve().parents[1] / "sweeps" / "million.toml"
    small = ["--clusters", "8", "--chunk", "4", "--no-progress"]
    local, remote = tmp_path / "local", tmp_path / "dask"
    assert main(["sweep", str(sweep), "--out", str(local), *small]) == 0
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        assert main(["sweep", str(sweep), "--out", str(remote), *small, "--backend", "dask",
                     "--address", cluster.scheduler_address]) == 0
    summary = pl.read_parquet(local / "summary.parquet")
    assert summary["cell"].n_unique() == 8 and (summary["n"] > 0).all()
    assert_frame_equal(summary, pl.read_parquet(remote / "summary.parquet"))
