"""What a sweep spends writing and reading one chunk's Parquet files.

    python benchmarks/chunk_io.py [--repeat 15]

Runs the ``headline`` sweep at 250 clusters, one chunk a cell, with ``--keep-jobs`` into a
temporary directory, then times on its first cell's chunk, per file (``chunk``, ``jct``,
``jobs``): the encoding ``SweepStore.write_chunk`` does before its renames and fsyncs
(``fastsim.io.parquet_bytes``: encoded, read back and compared with the frame; before it,
``store._parquet_bytes``, encoded only), and aggregation's read of the file
(``SweepStore._load``: its bytes, their SHA-256 against the record, its pages).
Medians of ``--repeat``, in milliseconds.  Only what both ends of a change have is
called, so one checkout's numbers compare with another's (docs/performance.md).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

from fastsim.cli import main as fastsim
from fastsim.resources import sweep_file
from fastsim.sweep.grid import load_sweep
from fastsim.sweep.store import SweepStore

try:
    from fastsim.io import parquet_bytes
except ImportError:  # a checkout from before chunks were verified as encoded
    from fastsim.sweep.store import _parquet_bytes

    def parquet_bytes(df, path):
        return _parquet_bytes(df)

ARGS = {"clusters": 250, "chunk": 250}


def median_ms(call, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=15)
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "headline"
        if fastsim(["sweep", "headline", "--out", str(out), "--keep-jobs", "--no-progress",
                    *(f"--{k}={v}" for k, v in ARGS.items())]) != 0:
            return 1
        store = SweepStore(out, load_sweep(sweep_file("headline"), **ARGS))
        cell = store.grid.cells[0].id
        total_w = total_r = 0.0
        for kind in ("chunk", "jct", "jobs"):
            path = store.path(cell, kind, 0)
            df = pl.read_parquet(path)
            w = median_ms(lambda: parquet_bytes(df, path), a.repeat)
            r = median_ms(lambda: store._load(cell, kind, 0), a.repeat)
            total_w, total_r = total_w + w, total_r + r
            print(f"{kind:6s} {df.height:7,d} rows {path.stat().st_size:10,d} B   "
                  f"encode {w:6.2f} ms   read {r:6.2f} ms")
        print(f"total {'':33s} encode {total_w:6.2f} ms   read {total_r:6.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
