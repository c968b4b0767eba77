"""The Dask backend on a LocalCluster (2 worker processes) gives the in-process result bit
for bit, through the same ``fastsim sweep`` code path."""
from __future__ import annotations

import polars as pl
import pytest
from polars.testing import assert_frame_equal as _assert_frame_equal

from fastsim.cli import main


def assert_frame_equal(left, right):
    """Bit for bit: polars' own default passes floats that differ by 1e-5 relative."""
    _assert_frame_equal(left, right, check_exact=True)


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


def test_9_bad_or_unreachable_address_is_one_line(tmp_path, capsys):
    p = tmp_path / "d.toml"
    p.write_text(SWEEP)
    for address, needle in (("tcp://127.0.0.1:1", "cannot reach a Dask scheduler"),
                            ("nonsense://x", "address='nonsense://x' is invalid"),
                            ("foo", "address='foo' is invalid")):
        out = tmp_path / address.replace("/", "_").replace(":", "_")
        assert main(["sweep", str(p), "--out", str(out), "--no-progress", "--backend", "dask",
                     "--address", address, "--dask-timeout", "2"]) == 2
        err = capsys.readouterr().err.strip()
        assert needle in err and len(err.splitlines()) == 1, err
        if needle != "cannot reach a Dask scheduler":  # refused by its form: nothing written
            assert not out.exists()


def test_9_scheduler_without_workers_times_out_with_a_message(tmp_path, capsys):
    p = tmp_path / "d.toml"
    p.write_text(SWEEP)
    with distributed.LocalCluster(n_workers=0, processes=False,
                                  dashboard_address=None) as cluster:
        assert main(["sweep", str(p), "--out", str(tmp_path / "o"), "--no-progress",
                     "--backend", "dask", "--address", cluster.scheduler_address,
                     "--dask-timeout", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert "no worker joined the scheduler within 2 s" in err and len(err.splitlines()) == 1


def test_9_local_cluster_survives_a_worker_dying_in_warm_up(tmp_path, capsys, monkeypatch):
    """--backend dask without --address starts a local cluster (dashboard link printed);
    a worker killed during warm-up is restarted by its nanny and the sweep completes."""
    from fastsim.sweep import runner

    p = tmp_path / "d.toml"
    p.write_text(SWEEP.replace('scheduler = ["fifo:backfill", "srtf_est", "loss_aware"]',
                               'scheduler = ["srtf_est"]'))
    marker = str(tmp_path / "killed")

    def die_once():
        import os
        if not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(1)
        return "warm"

    monkeypatch.setattr(runner, "warm_up", die_once)
    local, remote = tmp_path / "local", tmp_path / "dask"
    assert main(["sweep", str(p), "--out", str(local), "--no-progress"]) == 0
    assert main(["sweep", str(p), "--out", str(remote), "--no-progress", "--backend", "dask",
                 "--workers", "1"]) == 0
    assert "dashboard: http" in capsys.readouterr().err
    assert (tmp_path / "killed").exists()
    assert_frame_equal(pl.read_parquet(local / "summary.parquet"),
                       pl.read_parquet(remote / "summary.parquet"))
