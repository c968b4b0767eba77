"""Monte Carlo sweeps: TOML grid -> chunks of clusters -> Parquet -> aggregated table.

* ``grid``: a sweep file expanded into cells (one ``SimConfig`` each, plus the
  ``none`` baselines that paired comparisons need), with a hash of the expanded grid.
* ``store``: the output directory (manifest, atomic per-chunk Parquet, resume).
* ``runner``: runs the missing chunks in-process or on a Dask cluster.
* ``aggregate``: per-cell estimates with 95% intervals (through ``fastsim.summary``).
* ``extracts``: small per-job extracts for figures (JCT histograms, trajectories).
* ``reproduce``: the paper's sweeps, figures and ``REPRODUCTION.md`` in one command.
* ``scoring``: the pre-registered tolerances and verdicts of the paper rows.
* ``frontier``: how close the model family comes to the detection and system rows together.
"""
from fastsim.sweep.grid import Cell, Grid, load_sweep  # noqa: F401
