"""Aggregate a finished sweep into the tables figures and reports read.

Writes, atomically, into the sweep directory:

* ``cells.parquet``: one row per cell: ``cell, label, scheduler, policy, policy_name,
  baseline`` (the id of the cell it is paired against), ``baseline_policy`` (that cell's
  policy label, null if unpaired), ``is_baseline, uses_hidden_truth`` and one column per
  descriptive axis (the sweep's axes plus ``k, sigma, base_rate, load, n_evals, mix``).
* ``summary.parquet``: ``cells`` columns x ``fastsim.summary.summarize`` rows (``metric,
  kind, mean, lo, hi, n``), paired against the cell's baseline on identical clusters.
* ``jct_hist.parquet``: per cell, the JCT histogram summed over chunks.
* ``summary.txt``: the same estimates as plain-text tables, a heading per cell (its label,
  its workload axes, and a swept field its label leaves out: ``unlabelled_axes``); under a
  baseline other than ``none`` each heading says what its changes are against.
* ``sweep.json``'s ``tables``: the SHA-256 and size of each of these four, renamed after them
  (``SweepStore.write_aggregated``), which every reader checks (``read_sweep_table``).

Each cell's clusters are read chunk by chunk in cluster order (``CellSummary``), with the
baseline's same chunk beside them, and its JCT histograms are summed a batch of chunks at
a time (``merge_histograms``): memory does not grow with the cluster count, and the
estimates (bootstrap included) depend only on which clusters ran, not on the chunk size,
chunk order or resumes (``fastsim.stats`` sums exactly).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numba
import polars as pl

from fastsim.config import is_path
from fastsim.errors import ConfigError
from fastsim.registry import exact_text
from fastsim.summary import CellSummary, few_clusters_note, format_table
from fastsim.sweep.extracts import merge_histograms
from fastsim.sweep.grid import WORKLOAD_FIELDS, axis_value
from fastsim.io import parquet_bytes
from fastsim.sweep.store import (GRID_KEY, MANIFEST, RERUN, SweepStore, read_sweep_table,
                                  refused_if_written)
from fastsim.progress import progress_bar

DESCRIPTIVE_AXES = ("k", "sigma", "base_rate", "load", "n_evals", "mix")


def _column(name: str, values: list) -> pl.Series:
    nums = [v for v in values if v is not None]
    if nums and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in nums) \
            and any(isinstance(v, float) for v in nums):
        values = [None if v is None else float(v) for v in values]
    return pl.Series(name, values, strict=False)


# cell_table's columns before the axes' (a reader of a finished sweep finds its axes after
# the last of these)
FIXED_COLUMNS = ("cell", "experiment", "label", "scheduler", "policy", "policy_name",
                 "baseline", "baseline_policy", "is_baseline", "uses_hidden_truth")


def cell_table(store: SweepStore) -> pl.DataFrame:
    g = store.grid
    axes = [a for a in g.axes if a not in ("scheduler", "policy")]
    axes += [a for a in DESCRIPTIVE_AXES if a not in axes]
    cols: dict[str, list] = {k: [] for k in FIXED_COLUMNS}
    cols.update({a: [] for a in axes})
    policies = {c.id: c.config.policy.label for c in g.cells}
    for c in g.cells:
        cfg = c.config
        cols["cell"].append(c.id)
        cols["experiment"].append(g.name)
        cols["label"].append(c.label)
        cols["scheduler"].append(cfg.scheduler.label)
        cols["policy"].append(cfg.policy.label)
        cols["policy_name"].append(cfg.policy.name)
        cols["baseline"].append(c.baseline)
        cols["baseline_policy"].append(policies.get(c.baseline))
        cols["is_baseline"].append(c.is_baseline)
        cols["uses_hidden_truth"].append(cfg.policy.uses_hidden_truth)
        for a in axes:
            cols[a].append(axis_value(cfg, a))
    return pl.DataFrame([_column(k, v) for k, v in cols.items()])


def _cell_summary(store: SweepStore, cell_id: str, baseline_id: str | None) -> pl.DataFrame:
    """``summarize`` of one cell (paired against its baseline), one chunk in memory."""
    cell = CellSummary()
    for i in range(store.grid.n_chunks):
        clusters = store.read_chunk(cell_id, i)
        base = None if baseline_id is None else store.read_chunk(baseline_id, i)
        cell.add(clusters, base)
    return cell.table()


def _cell_title(store: SweepStore, c, unlabelled: tuple[str, ...] = ()) -> str:
    """``== scheduler | policy | sigma=0.05  [cell id]``: the label names the scheduler and
    the policy with their parameters; the workload axes are added, so cells that differ
    only there (a noise sweep's) are told apart in ``summary.txt``, and the swept fields
    that labels leave out (``unlabelled_axes``) where the cell has them."""
    def text(v):  # every digit, or sigma 0.05 and 0.0500001 made one title
        return exact_text(v) if isinstance(v, float) else str(v)
    shown = [a for a in store.grid.axes if a in WORKLOAD_FIELDS or a in unlabelled]
    axes = [f"{a}={text(v)}" for a in shown if (v := axis_value(c.config, a)) is not None]
    return f"== {' | '.join([c.label, *axes])}{_paired_text(store.grid, c)}  [cell {c.id}]"


def unlabelled_axes(grid) -> tuple[str, ...]:
    """The policy and scheduler fields on an axis that the labels of some cells leave out:
    two cells of one label differ in it (``patience`` of a user's policy labelled
    ``drawdown(delta={delta})``), so their headings would be one heading.  Where labels
    name every swept field (all built-ins'), none, and headings read as they always have."""
    fields = [a for a in grid.axes if a not in ("scheduler", "policy", *WORKLOAD_FIELDS)]
    seen: dict[tuple, dict[str, set]] = {}
    for c in grid.cells:
        key = (c.label, *(axis_value(c.config, a) for a in grid.axes if a in WORKLOAD_FIELDS))
        values = seen.setdefault(key, {a: set() for a in fields})
        for a in fields:
            values[a].add(axis_value(c.config, a))
    return tuple(a for a in fields if any(len(v[a]) > 1 for v in seen.values()))


def _paired_text(grid, c) -> str:
    """What a cell's changes are against, where the baseline is a policy other than
    ``none`` (under ``none``, the paper's, headings read as they always have)."""
    b = grid.baseline
    if b is None or b.name == "none":
        return ""
    return "  (the baseline)" if c.is_baseline else f"  vs {b.label}" if c.baseline else ""


def _header(grid) -> str:
    lines = [grid.title, f"{grid.clusters} clusters per cell, seed {grid.seed}, grid "
                         f"{grid.hash[:12]}"]
    b = grid.baseline
    if b is not None and b.name != "none":
        truth = "; it reads the hacking labels and gold peak: an upper bound, not a policy"
        lines.append(f"changes are paired against {b.label}, on the same workload, scheduler "
                     "and clusters" + (truth if b.uses_hidden_truth else ""))
    return "\n".join(lines) + "\n\n"


def _cell_parts(store: SweepStore, c, unlabelled: tuple[str, ...]
                ) -> tuple[pl.DataFrame, pl.DataFrame, str]:
    """One cell's summary rows, JCT histogram and text table."""
    s = _cell_summary(store, c.id, c.baseline)
    h = merge_histograms(store.read_each(c.id, "jct"))
    return (s.with_columns(pl.lit(c.id).alias("cell")), h.with_columns(pl.lit(c.id).alias("cell")),
            format_table(s, title=_cell_title(store, c, unlabelled), note=False))


def _each_cell(store: SweepStore, progress: bool) -> list[tuple]:
    """``_cell_parts`` of every cell, cells side by side on numba's threads (reading and
    decoding Parquet and the bootstrap release the GIL); results in grid order, and the
    first failing cell in grid order is the error raised."""
    cells = store.grid.cells
    unlabelled = unlabelled_axes(store.grid)  # of the grid, once
    bar = progress_bar(total=len(cells), unit="cell", desc="aggregate", enabled=progress,
                       dynamic_ncols=True, leave=False)
    pool = ThreadPoolExecutor(max(1, min(numba.get_num_threads(), len(cells))))
    try:
        parts = []
        for f in [pool.submit(_cell_parts, store, c, unlabelled) for c in cells]:
            parts.append(f.result())
            bar.update()
        return parts
    finally:
        pool.shutdown(cancel_futures=True)
        bar.close()


def aggregate(store: SweepStore, progress: bool = False) -> dict[str, Path]:
    """Aggregate every cell of a complete sweep; returns the written paths.

    Every chunk is verified against its record as it is read; a missing or damaged one
    is a ``ConfigError`` naming its file, and then nothing is written.  ``progress``: a
    bar over cells on stderr."""
    cells = cell_table(store)
    summaries, hists, texts = zip(*_each_cell(store, progress))
    summary = cells.join(pl.concat(summaries), on="cell", how="inner", maintain_order="right")
    jct = cells.select("cell", "label", "scheduler", "policy", "policy_name").join(
        pl.concat(hists), on="cell", how="inner", maintain_order="right")
    out = {"cells": store.root / "cells.parquet", "summary": store.root / "summary.parquet",
           "jct_hist": store.root / "jct_hist.parquet", "text": store.root / "summary.txt"}
    note = few_clusters_note(summary)  # once, under every cell's table
    text = (_header(store.grid) + "\n\n".join(texts) + "\n" + (note and f"\n{note}\n")).encode()
    # each table names its grid, so a table beside another sweep's manifest is refused
    tag = {GRID_KEY: store.grid.hash}
    # all four or none; renamed in this order, so summary.parquet, which figures and
    # reproduce know a sweep's results by, is there only once the other three are (a
    # kill -9 between renames left a summary beside no jct_hist.parquet: a traceback);
    # encoded and verified in memory, so the manifest hashes the tables as meant
    tables = {"cells": cells, "jct_hist": jct, "text": None, "summary": summary}
    store.write_aggregated({out[k]: text if df is None else parquet_bytes(df, out[k], tag)
                            for k, df in tables.items()})
    return out


def paired_against(table: pl.DataFrame) -> set[str]:
    """The baseline policies whose changes a ``cells`` or ``summary`` table holds (its
    ``baseline_policy`` labels); a table from before that column, the empty set, as the
    changes of such a table are against ``none``, the only baseline a sweep had then."""
    if "baseline_policy" not in table.columns:
        return set()
    return set(table["baseline_policy"].drop_nulls().unique().to_list())


def require_none_baseline(table: pl.DataFrame, what: str) -> None:
    """Refuse, in one line, a table whose changes are against a policy other than ``none``
    for ``what``, which reads them as changes against no stop policy (the paper's)."""
    other = sorted(paired_against(table) - {"none"})
    if other:
        raise ConfigError(f"{what} reads changes against no stop policy, but this sweep's "
                          f"are against {', '.join(other)}; allowed: a sweep with baseline "
                          "= \"none\" (the default)")


def read_summary(path: str | Path) -> pl.DataFrame:
    """The aggregated table of a sweep directory (or the file itself), checked against
    the SHA-256 its manifest records and its pages verified, once the sweep beside it is
    (``fastsim.sweep.finished``); one without page checksums (an older fastsim's) is
    refused, naming it."""
    if isinstance(path, str) and not is_path(path):
        raise ConfigError(f"path={path!r} is invalid; allowed: a sweep directory or its "
                          "summary.parquet")
    p = Path(path)
    table = p / "summary.parquet" if p.is_dir() else p
    with refused_if_written(table.parent):  # a sweep resumed meanwhile is not damaged
        if (table.parent / MANIFEST).exists():  # a table copied out alone is read unchecked
            from fastsim.sweep.finished import verify_finished

            verify_finished(table.parent, _SUMMARY_ALLOWED)
        return read_sweep_table(table, _SUMMARY_ALLOWED)


def read_aggregated_summary(root: Path) -> pl.DataFrame:
    """``read_summary`` of a sweep directory this process has just aggregated, whose
    chunks aggregation verified as it read them: the table alone, checked against the
    SHA-256 its manifest records (the chunks verified again cost about 1 ms each)."""
    return read_sweep_table(Path(root) / "summary.parquet", _SUMMARY_ALLOWED)


_SUMMARY_ALLOWED = ("a sweep's --out directory, or its summary.parquet, as this fastsim "
                    f"writes it: {RERUN}")
