"""A sweep's output directory: manifest, atomic chunks, resume.

Layout (``DIR`` is ``--out``)::

    DIR/sweep.json                          manifest: grid hash and the expanded grid
    DIR/cells/cell=<id>/chunk-0003.parquet  per-cluster metrics of chunk 3 of a cell
    DIR/cells/cell=<id>/jct-0003.parquet    the chunk's JCT histogram (figures)
    DIR/cells/cell=<id>/jobs-0003.parquet   per-job records, only with --keep-jobs
    DIR/summary.parquet, DIR/cells.parquet, DIR/jct_hist.parquet   (aggregate.py)

Every file is written to ``NAME.tmp`` and renamed into place (``os.replace`` is atomic
on POSIX), and a chunk's ``chunk-*.parquet`` is renamed last: it exists if and only if
the chunk's work is complete.  A re-run skips complete chunks and rewrites the rest;
since a chunk is a pure function of (config, seed, cluster range), a rewritten chunk is
bit-identical to the lost one, so an interrupted run ends where an uninterrupted one does.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from fastsim.errors import ConfigError
from fastsim.io import atomic_write_bytes, atomic_write_parquet  # noqa: F401  (re-exported)
from fastsim.sweep.grid import Grid, diff_grids

MANIFEST = "sweep.json"
FORMAT_VERSION = 1


class SweepStore:
    """The directory of one sweep.  ``open`` checks (or writes) the manifest."""

    def __init__(self, root: str | Path, grid: Grid):
        self.root = Path(root)
        self.grid = grid

    # -- manifest ---------------------------------------------------------------------
    @classmethod
    def open(cls, root: str | Path, grid: Grid) -> "SweepStore":
        """Create ``root`` for ``grid``, or reopen it if it holds the same grid.

        Raises ``ConfigError`` naming the manifest and the differences if ``root`` holds
        another grid (a changed sweep file, size, seed or model default).
        """
        store = cls(root, grid)
        path = store.root / MANIFEST
        if path.exists():
            try:
                old = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError) as exc:
                raise ConfigError(f"{path}: unreadable sweep manifest ({exc}); "
                                  "use a new --out directory") from None
            if old.get("grid_hash") != grid.hash:
                diffs = diff_grids(old.get("grid", {}), grid.canonical())
                raise ConfigError(
                    f"{path} was written for a different grid (hash {str(old.get('grid_hash'))[:12]}, "
                    f"sweep {old.get('name')!r} from {old.get('source')}); {grid.source} now "
                    f"expands to hash {grid.hash[:12]}: " + "; ".join(diffs or ["cells differ"])
                    + ". Use a new --out directory, or delete the old one to start over.")
        else:
            if (store.root / "cells").exists():
                raise ConfigError(f"{store.root} holds sweep results but no {MANIFEST}; "
                                  "refusing to mix results: use a new --out directory")
            store.root.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(path, json.dumps(store.manifest(), indent=1).encode())
        store.remove_temporaries()
        return store

    def manifest(self) -> dict[str, Any]:
        g = self.grid
        return {
            "format": FORMAT_VERSION, "name": g.name, "title": g.title, "source": g.source,
            "grid_hash": g.hash, "axes": list(g.axes),
            "cells": [{"id": c.id, "label": c.label, "baseline": c.baseline} for c in g.cells],
            "grid": g.canonical(),
        }

    def remove_temporaries(self) -> None:
        """Half-written files of an interrupted run (never renamed into place)."""
        cells = self.root / "cells"
        if cells.exists():
            for tmp in cells.glob("*/*.tmp"):
                tmp.unlink(missing_ok=True)

    # -- chunks -------------------------------------------------------------------------
    def cell_dir(self, cell_id: str) -> Path:
        return self.root / "cells" / f"cell={cell_id}"

    def path(self, cell_id: str, kind: str, index: int) -> Path:
        return self.cell_dir(cell_id) / f"{kind}-{index:04d}.parquet"

    def is_done(self, cell_id: str, index: int, keep_jobs: bool = False) -> bool:
        if not self.path(cell_id, "chunk", index).exists():
            return False
        return not keep_jobs or self.path(cell_id, "jobs", index).exists()

    def pending(self, keep_jobs: bool = False) -> list[tuple[str, int]]:
        """``(cell id, chunk index)`` of every chunk still to run, cell by cell."""
        return [(c.id, i) for c in self.grid.cells for i in range(self.grid.n_chunks)
                if not self.is_done(c.id, i, keep_jobs)]

    def write_chunk(self, cell_id: str, index: int, clusters: pl.DataFrame,
                    jct_hist: pl.DataFrame, jobs: pl.DataFrame | None = None) -> None:
        """Write one chunk's files; the ``chunk-*`` file last (completion marker)."""
        start, n = self.grid.chunk_range(index)
        ids = clusters["cluster"]
        if clusters.height != n or ids.min() != start or ids.max() != start + n - 1:
            raise RuntimeError(f"chunk {index} of cell {cell_id} must hold clusters "
                               f"{start}..{start + n - 1}")
        d = self.cell_dir(cell_id)
        d.mkdir(parents=True, exist_ok=True)
        if jobs is not None:
            atomic_write_parquet(jobs, self.path(cell_id, "jobs", index))
        atomic_write_parquet(jct_hist, self.path(cell_id, "jct", index))
        atomic_write_parquet(clusters, self.path(cell_id, "chunk", index))

    def read(self, cell_id: str, kind: str = "chunk") -> pl.DataFrame:
        """All complete chunks of a cell, concatenated in chunk order."""
        frames = [pl.read_parquet(self.path(cell_id, kind, i)) for i in range(self.grid.n_chunks)
                  if self.path(cell_id, "chunk", i).exists()
                  and self.path(cell_id, kind, i).exists()]
        if not frames:
            raise FileNotFoundError(f"no complete chunks of cell {cell_id} in {self.root}")
        return pl.concat(frames, how="vertical")

    def read_clusters(self, cell_id: str) -> pl.DataFrame:
        """A cell's per-cluster table, checked to hold each cluster exactly once."""
        df = self.read(cell_id).sort("cluster")
        n = self.grid.clusters
        ids = df["cluster"].to_numpy()
        if df.height != n or ids[0] != 0 or ids[-1] != n - 1 or (ids[1:] == ids[:-1]).any():
            raise RuntimeError(f"cell {cell_id} in {self.root} holds {df.height} cluster rows, "
                               f"expected clusters 0..{n - 1} once each; re-run the sweep")
        return df
