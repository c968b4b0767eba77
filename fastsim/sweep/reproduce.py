"""One command from nothing to ``REPRODUCTION.md``: the paper's sweeps, figures, table.

``reproduce`` runs every sweep of ``PAPER_SWEEPS`` (the shipped ``sweeps/*.toml``) at one size
into ``OUT/<sweep name>/`` (resumable like ``fastsim sweep``), writes the example
trajectories into ``OUT/extracts/``, draws the figures and writes a report comparing
each number of MODEL.md section 9 with ours (95% CI, n) under the pre-registered
tolerances of ``fastsim.sweep.scoring``: match, miss, not comparable, or fitted.
"""
from __future__ import annotations

import math
import os
import platform
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import polars as pl
from scipy import special

import fastsim

from fastsim.config import check_flags, is_path, is_real
from fastsim.errors import ConfigError
from fastsim.io import (check_distinct, check_output, holding_directory, make_directory,
                        table_writer, unmade_on_failure, write_all)
from fastsim.resources import package_folders, shipped
from fastsim.values import MAX_CLUSTER
from fastsim.stats import (LEVEL, Estimate, PooledRatio, bootstrap_sums, fmt_interval,
                           fmt_value, interval_decimals, min_boot)
from fastsim.summary import pooled_counts
from fastsim.sweep.aggregate import aggregate, read_aggregated_summary
from fastsim.defaults import FULL_CLUSTERS, QUICK_CLUSTERS  # noqa: F401 (this module's names)
from fastsim.sweep.extracts import trajectories
from fastsim.sweep.figures import (EXTRACTS, FORMATS, PAPER_FIGURES, check_figure_files,
                                   parse_formats)
from fastsim.sweep.grid import axis_value, build_config, load_sweep
from fastsim.sweep.runner import check_run, dask_client, run_sweep
from fastsim.sweep.scoring import (DECLARED, FITTED, MATCH, MISS, NOT_COMPARABLE, PAPER_ROWS,
                                   ROWS_BY_KEY, TIED, PaperRow, bound_fitted_by,
                                   cell_fitted_by, in_headline,
                                   raw_verdict,
                                   registration_table, share_text, simultaneous_level,
                                   simultaneous_maximum, simultaneous_minimum, tolerance_text,
                                   verdict)
from fastsim.sweep.store import (LOCK, DirLock, SweepStore, atomic_write_bytes,
                                 check_no_other_files, check_output_dir, hold_sweep_dirs,
                                 lies_at, remove_temporaries_in)

PAPER_SWEEPS = ("headline", "composability", "noise", "base_rate", "k_sweep", "mixed")
# every name reproduce writes directly in OUT (its lock, sweeps, extracts, default figures
# directory and report)
OWN_NAMES = (LOCK, *PAPER_SWEEPS, "extracts", "figures", "REPRODUCTION.md")


EVALSTOP = {"scheduler": "srtf_est", "policy_name": "evalstop", "k": 2}
STOP_AT = {"scheduler": "srtf_est", "policy_name": "stop_at"}
PLATEAU = {"scheduler": "srtf_est", "policy_name": "loss_plateau"}
# Where our estimate of each value row lives: (sweep, metric, column filters, negate).
ESTIMATES = {
    "jct": ("headline", "jct_mean_h_change", EVALSTOP),
    "waste": ("headline", "wasted_gpu_h_change", EVALSTOP),
    "precision": ("headline", "precision", EVALSTOP),
    "recall": ("headline", "recall", EVALSTOP),
    "fpr": ("headline", "fpr", EVALSTOP),
    "stopat_precision": ("headline", "precision", STOP_AT),
    "stopat_fpr": ("headline", "fpr", STOP_AT),
    "plateau_precision": ("headline", "precision", PLATEAU),
    "plateau_recall": ("headline", "recall", PLATEAU),
    "noise_001": ("noise", "precision", {"policy_name": "evalstop", "sigma": 0.01}),
    "noise_012": ("noise", "precision", {"policy_name": "evalstop", "sigma": 0.12}),
}
# A recall or FPR row is scored on MODEL.md section 7's detection (any trigger, at
# completion too), but a trigger at completion frees nothing: each is shown beside the
# rate of the triggers that free GPU-time (section 8), so the two are never confused.
STOP_COUNTERPARTS = {"recall": ("stop_recall", "stop recall"),
                     "fpr": ("stop_fpr", "stop FPR")}
GAIN_SCHEDULERS = {"fifo": "FIFO", "sjf_est": "SJF-Est", "srtf_est": "SRTF-Est",
                   "loss_aware": "LossAware"}
# The paper's "wasted compute" is undefined: its -21.8% against each reading (MODEL.md s. 8).
WASTE_READINGS = (
    ("wasted_gpu_h_change", "GPU-hours of hacking jobs after their gold peak"),
    ("hacking_gpu_h_change", "all GPU-hours of hacking jobs"),
    ("gpu_h_total_change", "all GPU-hours"),
)
PAPER_WASTE = ROWS_BY_KEY["waste"].paper


def _select(summary: pl.DataFrame, metric: str, where: dict[str, Any]) -> dict[str, Any]:
    df = summary.filter(pl.col("metric") == metric)
    for k, v in where.items():
        df = df.filter(pl.col(k).is_between(v - 1e-9, v + 1e-9) if isinstance(v, float)
                       else pl.col(k) == v)
    if df.height != 1:
        raise RuntimeError(f"expected one row for {metric} {where}, found {df.height}")
    return df.row(0, named=True)


def _pct_digits(*xs) -> int:
    """The decimals (1 to 6) that an estimate and its bounds ``xs`` (fractions) are printed
    with in percent, together: the fewest at which none that is not exactly 0 or +-100%
    prints as 0 or 100.  An interval bound like 99.998% must not print as 100.0%, which
    reads as certainty; chosen for each number alone, a precision of 99.950% printed
    "100.0%" beside its upper bound "99.970%" (its interval seemed to exclude it), and a
    point "99.9%" beside "[99.9%, 99.961%]"."""
    vals = [abs(100 * x) for x in xs if x is not None and x == x and abs(x) not in (0.0, 1.0)]
    first = 3 if any(v < 0.05 for v in vals) else 1  # 0.035%, not 0.03%
    return next((d for d in range(first, 6)
                 if all(round(v, d) not in (0.0, 100.0) for v in vals)), 6)


def _pct(x: float, digits: int | None = None) -> str:
    """``x`` in percent with ``digits`` decimals (by default ``_pct_digits(x)``)."""
    if x is None or x != x:
        return "n/a"
    return fmt_value(100 * x, f".{digits or _pct_digits(x)}f") + "%"


def _pct_ci(mean, lo, hi) -> tuple[str, str]:
    """An estimate and its ``[lo, hi]`` in percent, with the same decimals."""
    d = _pct_digits(mean, lo, hi)
    if lo is not None and hi is not None:  # an interval's two ends printed apart
        d = interval_decimals(100 * lo, 100 * hi, d)
    return _pct(mean, d), _ci_pct(lo, hi, d)


def _row(paper_row: PaperRow, ours, lo, hi, n, note: str = "",
         ends_fitted_by: tuple[str, str] = ("", ""),
         decided: tuple[float, float] | None = None) -> dict[str, Any]:
    """One row of the comparison; ``ends_fitted_by``: for the range, what was fitted to
    the row each end's gain is (``verdict``'s ``ends_fitted``); ``decided``: for the k
    row, how firmly the data picks our k (``verdict``'s)."""
    v = verdict(paper_row, ours, lo, hi, tuple(map(bool, ends_fitted_by)), decided=decided)
    fitted_by = paper_row.fitted_by
    if v.verdict == FITTED and not fitted_by:
        fitted_by = ", ".join(dict.fromkeys(p for p in ends_fitted_by if p))
    return {"key": paper_row.key, "result": paper_row.result, "paper": paper_row.paper_text,
            "ours": ours, "lo": lo, "hi": hi, "n": n, "tolerance": tolerance_text(paper_row),
            "verdict": v.verdict, "detail": v.detail, "fitted_by": fitted_by,
            "tied_to": paper_row.derived_from if v.verdict == TIED else "", "note": note}


def comparison_rows(summaries: dict[str, pl.DataFrame], k_boot: "KBootstrap | None" = None,
                    *, bounds: dict[str, dict[str, Estimate]]) -> list[dict[str, Any]]:
    """Every row of ``scoring.PAPER_ROWS``: paper, ours (mean, lo, hi, n), tolerance,
    verdict, and the parameter fitted to it (if any).  ``k_boot``: the k sweep's
    bootstrap (``k_bootstrap``); without it the k row is not comparable.  ``bounds``: the
    bounds' cells' intervals at the simultaneous level (``bound_intervals``)."""
    rows = []
    for key, (sweep, metric, where) in ESTIMATES.items():
        r = _select(summaries[sweep], metric, where)
        row = ROWS_BY_KEY[key]
        # a row over an axis the fit set (the noise rows: sigma) is the fitted number
        # itself where its cell is the fitted one
        fitted = cell_fitted_by(row, where[row.axis]) if row.axis else ""
        rows.append(_row(replace(row, fitted_by=row.fitted_by or fitted), r["mean"], r["lo"],
                         r["hi"], r["n"], note=_stop_note(summaries[sweep], metric, where)))
    rows += _bound_rows(summaries, bounds)
    rows += _gain_rows(summaries["composability"])
    rows.append(_k_row(summaries["k_sweep"], k_boot))
    order = {r.key: i for i, r in enumerate(PAPER_ROWS)}
    return sorted(rows, key=lambda r: order[r["key"]])


def _stop_note(summary: pl.DataFrame, metric: str, where: dict[str, Any]) -> str:
    """For a recall or FPR row, its rate counting only the triggers that free GPU-time
    (``STOP_COUNTERPARTS``) with its 95% interval and n; "" for another metric."""
    if metric not in STOP_COUNTERPARTS:
        return ""
    stop, name = STOP_COUNTERPARTS[metric]
    r = _select(summary, stop, where)
    shown = " ".join(_pct_ci(r["mean"], r["lo"], r["hi"]))
    return (f"{name}, triggers that free GPU-time only: {shown}, n = {r['n']}; the "
            "verdict is on any trigger (MODEL.md section 7)")


# The bounds on EvalStop's precision: (row, sweep, axis column, its name, the axis' range).
# The paper's range only, as the noise bound takes sigma <= 0.05 only: a sweep file with
# base rate 0.1 as well had that cell scored as part of "0.2-0.8".
BOUNDS = tuple((key, sweep, column, name, ROWS_BY_KEY[key].over)
               for key, sweep, column, name in (("noise_bound", "noise", "sigma", "sigma"),
                                                ("base_rate_bound", "base_rate", "base_rate",
                                                 "base rate")))


def _in_range(value: float, axis_range: tuple[float, float]) -> bool:
    low, high = axis_range
    return low - 1e-9 <= value <= high + 1e-9


def bound_intervals(stores: dict[str, SweepStore], n_boot: int = 2000,
                    seed: int = 0) -> dict[str, dict[str, Estimate]]:
    """For each bound (``BOUNDS``), each of its m cells' precision with its interval at
    ``simultaneous_level(m)`` (Bonferroni), by cell id.  The bound's cells are taken here
    alone, from the grid: its EvalStop cells in the axis' range.  From the chunks'
    per-cluster counts, as the summary holds 95% intervals only; the interval is the
    summary's (``PooledRatio.proportion_ci``) at that level."""
    out = {}
    for key, sweep, column, _, axis_range in BOUNDS:
        store = stores[sweep]
        cells = [c for c in store.grid.cells if c.config.policy.name == "evalstop"
                 and _in_range(axis_value(c.config, column), axis_range)]
        level = simultaneous_level(len(cells))
        out[key] = {}
        for c in cells:
            ratio = PooledRatio()
            for counts in _chunk_counts(store, c.id, ("precision",)):
                ratio.add(*counts["precision"])
            out[key][c.id] = ratio.proportion_ci(level, max(n_boot, min_boot(level)), seed)
    return out


def _bound_rows(summaries: dict[str, pl.DataFrame],
                intervals: dict[str, dict[str, Estimate]]) -> list[dict[str, Any]]:
    """The two bounds on EvalStop's precision (``BOUNDS``): the minimum over the cells with
    its simultaneous interval (``scoring.simultaneous_minimum``, of each cell's interval in
    ``intervals``: ``bound_intervals``, which chose the cells), and in the note the cell
    that decides the bound (``_bound_cell``)."""
    rows = []
    for key, sweep, column, name, _ in BOUNDS:
        row = ROWS_BY_KEY[key]
        cells = _bound_cells(summaries[sweep], intervals[key])
        cell, note = _bound_cell(row, cells, column, name)
        fitted = bound_fitted_by(row, cells.select(column, "mean", "lo", "hi").rows(),
                                 cell[column])
        mean, lo, hi = simultaneous_minimum(cells.select("mean", "lo", "hi").rows())
        each = fmt_value(100 * simultaneous_level(cells.height), ".4g")
        note += ((f" (a fitted cell: {fitted})" if fitted else "")
                 + f"; CI simultaneous over {cells.height} cells, each at {each}%")
        # decided at a fitted cell, the bound is scored as a row a parameter was fitted to
        rows.append(_row(replace(row, fitted_by=fitted), mean, lo, hi, int(cells["n"].min()),
                         note=note))
    return rows


def _bound_cells(summary: pl.DataFrame, intervals: dict[str, Estimate]) -> pl.DataFrame:
    """The precision rows of ``summary``'s cells in ``intervals`` (by the ``cell`` column),
    in the summary's order, with each cell's ``lo`` and ``hi`` from ``intervals``."""
    simultaneous = pl.DataFrame({"cell": list(intervals),
                                 "lo": [e.lo for e in intervals.values()],
                                 "hi": [e.hi for e in intervals.values()]},
                                schema_overrides={"cell": summary.schema["cell"],
                                                  "lo": pl.Float64, "hi": pl.Float64})
    precision = summary.filter(pl.col("metric") == "precision").drop("lo", "hi")
    cells = precision.join(simultaneous, on="cell", how="inner", maintain_order="left")
    if cells.height != len(intervals):
        raise RuntimeError(f"expected one precision row for each of the cells "
                           f"{sorted(intervals)}, found {cells.height}")
    return cells


# A single gain is shown against the paper's range, but the range is one paper number,
# scored once, by its own row: three gains inside it were counted as three matches.
WITHIN_NOTE = "not counted: the range row below scores the paper's range"


def _gain_rows(composability: pl.DataFrame) -> list[dict[str, Any]]:
    """EvalStop's JCT gain over each base scheduler (``GAIN_SCHEDULERS``), then the range
    of those gains (``_gain_range_row``)."""
    rows, gains = [], []
    for sched in GAIN_SCHEDULERS:
        r = _select(composability, "jct_mean_h_change",
                    {"scheduler": sched, "policy_name": "evalstop"})
        gains.append((-r["mean"], -r["hi"], -r["lo"], r["n"]))
        rows.append(_row(ROWS_BY_KEY[f"gain_{sched}"], -r["mean"], -r["hi"], -r["lo"], r["n"],
                         note=WITHIN_NOTE))
    rows.append(_gain_range_row(gains))
    return rows


def t_interval_at(mean: float, lo: float, hi: float, n: int,
                  level: float) -> tuple[float, float, float]:
    """A paired change's 95% Student-t interval ``[lo, hi]`` over ``n`` pairs (as the
    summary holds it: ``mean +- t se``) at ``level`` instead: its half-width scaled by the
    ratio of the two t quantiles."""
    if not (n > 1 and lo == lo and hi == hi):
        return mean, lo, hi
    scale = special.stdtrit(n - 1, 0.5 + level / 2) / special.stdtrit(n - 1, 0.5 + LEVEL / 2)
    return mean, mean - (mean - lo) * scale, mean + (hi - mean) * scale


def _gain_range_row(gains: list[tuple[float, float, float, int]]) -> dict[str, Any]:
    """The range of the gains (``(gain, lo, hi, n)`` each, 95% intervals, in
    ``GAIN_SCHEDULERS``' order): its ends, the lowest and the highest gain, each with its
    interval simultaneous over the gains (``simultaneous_minimum`` and ``_maximum``, of
    each gain's interval at ``simultaneous_level``), as the bounds are: an end chosen as
    the lowest or the highest of four, with its own 95% interval, held its truth less
    often than 95%; and whether each end is a fitted row's gain."""
    level = simultaneous_level(len(gains))
    cells = [t_interval_at(g, lo, hi, n, level) for g, lo, hi, n in gains]
    low, high = simultaneous_minimum(cells), simultaneous_maximum(cells)
    ends = (low[0], high[0])
    # a gain with no estimate leaves the range's ends unknown (``simultaneous_minimum``:
    # NaN): min() and max() skipped a NaN anywhere but first, and the range of the other
    # three was scored as the four's
    means = [c[0] for c in cells]
    at = [means.index(e) if e == e else 0 for e in ends]
    keys = list(GAIN_SCHEDULERS)
    # an end that is a fitted row's gain cannot make the range a match (``verdict``)
    fitted = tuple(ROWS_BY_KEY[f"gain_{keys[i]}"].fitted_by if e == e else ""
                   for i, e in zip(at, ends))
    note = "; ".join(f"{side} end: the gain over {GAIN_SCHEDULERS[keys[i]]}, a fitted row"
                     for side, i, f in zip(("low", "high"), at, fitted) if f)
    each = fmt_value(100 * level, ".4g")
    note += ("; " if note else "") + (f"each end's CI simultaneous over {len(gains)} gains, "
                                      f"each at {each}%")
    # n: the fewest pairs behind a gain
    return _row(ROWS_BY_KEY["gain_range"], ends, (low[1], high[1]), (low[2], high[2]),
                min(g[3] for g in gains), note, fitted)


def _k_row(k_sweep: pl.DataFrame, k_boot: "KBootstrap | None") -> dict[str, Any]:
    """The k balancing early detection and false positives (``k_balance``), decided only
    as firmly as the bootstrap ``k_boot`` says."""
    best_k, f1s = k_balance(k_sweep)
    ks = k_sweep.filter((pl.col("policy_name") == "evalstop")
                        & pl.col("metric").is_in(list(F1_RATES)))
    # n: the clusters per cell of the k sweep (as its table's n column: a rate at k = 5
    # rests on the few clusters with a trigger, which the k table says)
    n = k_boot.n if k_boot is not None else int(ks["n"].max()) if ks.height else None
    decided = None
    if k_boot is not None and best_k is not None:
        decided = (k_boot.best_share.get(best_k, 0.0), k_boot.lead_lo.get(best_k, math.nan))
    return _row(ROWS_BY_KEY["k_balance"], best_k, None, None, n,
                note=_f1_note(best_k, f1s, k_boot), decided=decided)


def _bound_cell(row: PaperRow, cells: pl.DataFrame, column: str,
                name: str) -> tuple[dict[str, Any], str]:
    """The cell of ``cells`` that decides the bound ``row`` over them, and the note that
    says where it is (``column``'s value, written ``name``).  A cell with no estimate
    (NaN: no trigger at all) makes the minimum unknown (sorted, NaN came last, and the
    bound was scored on the other cells alone); else the lowest cell that misses the bound
    (its interval wholly below it: the bound fails there), else the lowest whose interval
    crosses it (not comparable), else the lowest (the bound holds); the intervals are at
    the simultaneous level (``bound_intervals``).  Taken as the
    lowest cell alone, a bound held while another cell's interval crossed it, and was not
    comparable while another cell's lay below it."""
    unknown = cells.filter(~pl.col("mean").is_finite())
    if unknown.height:
        cell = unknown.row(0, named=True)
        return cell, f"at {name} = {cell[column]:g}"
    ordered = cells.sort("mean").rows(named=True)
    found = [r for want in (MISS, NOT_COMPARABLE) for r in ordered
             if raw_verdict(row, r["mean"], r["lo"], r["hi"]).verdict == want]
    cell = (found or ordered)[0]
    note = f"at {name} = {cell[column]:g}"
    if cell is not ordered[0]:
        low = ordered[0]
        note += f"; the lowest, {_pct(low['mean'])}, at {name} = {low[column]:g}"
    return cell, note


# The two rates the k row's F1 is of (``k_balance``'s point and ``k_counts``' per-cluster
# num and den of each): stop recall, as a trigger at completion detects nothing early.
F1_RATES = ("precision", "stop_recall")


def k_balance(summary: pl.DataFrame) -> tuple[int | None, list[tuple[int, float]]]:
    """The k maximising F1 of pooled precision and stop recall (a trigger at completion
    detects nothing early), and every k's F1.  F1 is 0 where nothing is detected early
    (stop recall 0), NaN where stop recall has no hacking job to count; the best k is None
    (no estimate) where some k's F1 is NaN or several k share the highest F1: the first k
    won the tie, so k = 1 and 2 both at 100% read "k = 1", a miss, and k = 2 and 3 a match."""
    ev = summary.filter(pl.col("policy_name") == "evalstop")
    f1s = []
    for k in sorted(ev["k"].unique().to_list()):
        # the two rates as sums with a denominator of 1: the bootstrap's F1 (k_counts),
        # of the same two rates, so the point and the resamples cannot score different ks
        p, r = (_select(ev, m, {"k": k})["mean"] for m in F1_RATES)
        f1s.append((int(k), float(_f1_of_sums(np.array([p, 1.0, r, 1.0])))))
    values = [f for _, f in f1s]
    if not values or any(f != f for f in values):
        return None, f1s
    best = [k for k, f in f1s if f == max(values)]
    return (best[0] if len(best) == 1 else None), f1s


def _f1_note(best: int | None, f1s: list[tuple[int, float]],
             k_boot: "KBootstrap | None" = None) -> str:
    """The k row's note: every k's F1 (with its 95% interval and n, and the share of
    resamples in which it is the highest, given ``k_boot``), and why no k is ours when
    none is."""
    if k_boot is None:
        text = "F1(precision, stop recall): " + ", ".join(
            f"k={k}: {_pct(f)}" for k, f in f1s)  # an F1 of 0.002% is not "0.0%"
    else:
        text = (f"F1(precision, stop recall) [95% CI], n = {k_boot.n} clusters per k: "
                + ", ".join(f"k={k}: {_f1_text(k_boot.f1[k])}" for k, _ in f1s if k in k_boot.f1)
                + f"; highest F1 in {_shares_text(k_boot)} of {k_boot.n_boot} "
                  "cluster-bootstrap resamples")
    finite = [f for _, f in f1s if f == f]
    if best is None and finite and len(finite) == len(f1s):
        tied = [str(k) for k, f in f1s if f == max(finite)]
        text += f"; k = {' and '.join(tied)} tie"
    return text


def _f1_text(e: Estimate) -> str:
    """An F1 and its interval in percent, as the other rates."""
    mean, ci = _pct_ci(e.mean, e.lo, e.hi)
    return f"{mean} {ci}"


def _shares_text(k_boot: "KBootstrap") -> str:
    """Each k's share of the resamples in which it alone has the highest F1 (those it
    never has left out); "no k" when none ever has."""
    parts = [f"{share_text(s)} (k = {k})" for k, s in k_boot.best_share.items() if s > 0]
    return ", ".join(parts) or "none (no k alone)"




@dataclass(frozen=True)
class KBootstrap:
    """The k sweep's F1s under one cluster bootstrap over all its k cells at once.

    ``n``: clusters per cell (the same clusters in every cell, resampled jointly);
    ``f1``: each k's F1 with its 95% interval; ``best_share``: the share of the ``n_boot``
    resamples in which each k alone has the highest F1; ``lead_lo``: for each k, the
    lowest, over the other ks, lower 95% t bound of its paired F1 lead over that k."""

    n: int
    n_boot: int
    f1: dict[int, Estimate]
    best_share: dict[int, float]
    lead_lo: dict[int, float]


def k_counts(store: SweepStore) -> dict[int, np.ndarray]:
    """Each EvalStop cell's per-cluster counts, ``[clusters, 4]``: precision's num and den,
    stop recall's num and den (``metrics``' declarations), read chunk by chunk, verified,
    in cluster order."""
    out = {}
    for c in store.grid.cells:
        if c.config.policy.name != "evalstop":
            continue
        parts = [np.column_stack([x for m in F1_RATES for x in counts[m]])
                 for counts in _chunk_counts(store, c.id, F1_RATES)]
        out[int(axis_value(c.config, "k"))] = np.concatenate(parts)
    return out


def _chunk_counts(store: SweepStore, cell: str, rates) -> Iterator[dict]:
    """Each chunk's per-cluster counts of ``rates`` in ``cell`` (``pooled_counts``), read
    and verified one chunk at a time, in cluster order."""
    for i in range(store.grid.n_chunks):
        yield pooled_counts(store.read_chunk(cell, i), rates)


def _f1_of_sums(s: np.ndarray) -> np.ndarray:
    """F1 = 2PR / (P + R) from sums ``[..., 4]`` (P's num, den, R's num, den), as
    ``k_balance``: 2AC / (AD + BC); 0 where nothing is detected early (C = 0), NaN where
    R has no job to count (D = 0)."""
    a, b, c, d = (s[..., q] for q in range(4))
    with np.errstate(invalid="ignore", divide="ignore"):
        f = 2 * a * c / (a * d + b * c)
    return np.where(d == 0, np.nan, np.where(c == 0, 0.0, f))


def _f1_influence(x: np.ndarray) -> np.ndarray:
    """Each cluster's linearised contribution to F1 (``[n, 4]`` counts -> ``[n]``): the
    gradient of F1 at the mean counts times the cluster's deviation from them (delta
    method, as ``PooledRatio``'s t interval of a ratio)."""
    a, b, c, d = x.mean(axis=0)
    q, num = a * d + b * c, 2 * a * c
    if d == 0 or q == 0:
        return np.zeros(len(x)) if d != 0 else np.full(len(x), np.nan)
    grad = np.array([2 * c * q - num * d, -num * c, 2 * a * q - num * b, -num * a]) / q ** 2
    return (x - x.mean(axis=0)) @ grad


def k_bootstrap(counts: dict[int, np.ndarray], n_boot: int = 2000, seed: int = 0,
                level: float = LEVEL) -> KBootstrap:
    """Every k's F1 with its 95% interval, and how often each k is the best, from the k
    cells' per-cluster counts (``k_counts``: the same clusters in every cell).  Clusters
    are resampled jointly across the cells (``stats.bootstrap_sums``: one draw of indices
    per resample for every column), as their runs share each cluster's workload.  An F1's
    interval is, as a pooled rate's, the union of the percentile bootstrap and the
    linearised t interval (the percentile alone is too narrow with few clusters), cut to
    [0, 1]; clusters that all give one F1 show no spread, so no interval (NaN).  ``k``
    is the best in a resample where its F1 alone is the highest (a tie, or a k with no
    F1, makes none the best)."""
    ks = sorted(counts)
    n = len(counts[ks[0]])
    values = np.column_stack([counts[k] for k in ks])
    sums = bootstrap_sums(values, n_boot, seed).reshape(n_boot, len(ks), 4)
    boot = _f1_of_sums(sums)  # [n_boot, k]
    t = float(special.stdtrit(n - 1, 0.5 + level / 2)) if n > 1 else math.nan
    points = _f1_of_sums(values.reshape(n, len(ks), 4).sum(axis=0))
    infl = np.column_stack([_f1_influence(counts[k]) for k in ks])
    se = infl.std(axis=0, ddof=1) / math.sqrt(n) if n > 1 else np.full(len(ks), np.nan)
    f1 = {}
    for q, k in enumerate(ks):
        f1[k] = _f1_estimate(points[q], boot[:, q], t * se[q], level, n)
    decided = np.isfinite(boot).all(axis=1)
    top = np.where(decided, np.nanargmax(np.where(np.isnan(boot), -1.0, boot), axis=1), -1)
    alone = (boot == boot.max(axis=1, keepdims=True)).sum(axis=1) == 1
    best_share = {k: float(np.mean((top == q) & alone)) for q, k in enumerate(ks)}
    lead_lo = {}
    for q, k in enumerate(ks):
        lows = [points[q] - points[j] - t * (infl[:, q] - infl[:, j]).std(ddof=1)
                / math.sqrt(n) for j in range(len(ks)) if j != q] if n > 1 else [math.nan]
        lead_lo[k] = float(min(lows)) if lows else math.inf
    return KBootstrap(n, n_boot, f1, best_share, lead_lo)


def _f1_estimate(point: float, boot: np.ndarray, half: float, level: float,
                 n: int) -> Estimate:
    """An F1's interval: the percentile bootstrap's joined with ``point +- half`` (the t
    interval), within [0, 1]; NaN without spread or without an estimate."""
    seen = boot[np.isfinite(boot)]
    if not point == point or seen.size == 0 or (seen.min() == seen.max() and not half > 0):
        return Estimate(float(point), math.nan, math.nan, n)
    lo, hi = np.quantile(seen, [0.5 - level / 2, 0.5 + level / 2])
    if half == half:
        lo, hi = min(lo, point - half), max(hi, point + half)
    return Estimate(float(point), float(max(lo, 0.0)), float(min(hi, 1.0)), n)


def detection_split(summary: pl.DataFrame) -> list[dict[str, Any]]:
    """The headline cell's recall and stop recall, FPR and stop FPR, and share of triggers
    at completion, for EvalStop and for the two baselines whose precision and FPR are
    scored too (their triggers at completion count there as well, and free nothing
    either)."""
    names = (("recall", "recall (any trigger)"),
             ("stop_recall", "stop recall (stopped before completion, GPUs freed)"),
             ("fpr", "FPR (any trigger)"),
             ("stop_fpr", "stop FPR (stopped before completion, GPUs freed)"),
             ("completion_share", "share of triggers at completion (frees nothing)"))
    return [{"metric": f"{policy}: {label}",
             **{k: _select(summary, m, where)[k] for k in ("mean", "lo", "hi", "n")}}
            for policy, where in (("EvalStop", EVALSTOP), ("StopAt-0.65", STOP_AT),
                                  ("Loss plateau", PLATEAU))
            for m, label in names]


def fp_at_completion(store: SweepStore, where: dict[str, Any] = EVALSTOP) -> Estimate:
    """The share of a cell's false positives that fire at the job's last evaluation (the
    headline's EvalStop cell by default), ``sum (fp - fp_freed) / sum fp`` over clusters,
    with the interval of the other pooled rates (``PooledRatio.proportion_ci``: clusters
    resampled, widened to the exact binomial one).  The counts are ``fpr``'s and
    ``stop_fpr``'s numerators (``pooled_counts``), read chunk by chunk; ``n`` is the
    clusters with a false positive (one with none bears on nothing).  The share is
    ``1 - stop FPR / FPR``, both pooled over the same healthy jobs."""
    def value(cfg, column):  # a cell's value in the summary's column (``cell_table``)
        return cfg.policy.name if column == "policy_name" else axis_value(cfg, column)

    cells = [c for c in store.grid.cells
             if all(value(c.config, k) == v for k, v in where.items())]
    if len(cells) != 1:
        raise RuntimeError(f"expected one cell for {where}, found {len(cells)}")
    ratio = PooledRatio()
    for counts in _chunk_counts(store, cells[0].id, ("fpr", "stop_fpr")):
        fp, freed = counts["fpr"][0], counts["stop_fpr"][0]
        ratio.add(fp - freed, fp)
    return ratio.proportion_ci()


def fpr_split_note(summary: pl.DataFrame, at_completion: Estimate | None = None) -> str:
    """One sentence on EvalStop's scored FPR (headline cell): the share of its false
    positives that free no GPU, ``1 - stop_fpr / fpr`` (both pooled over the same healthy
    jobs, so this is ``1 - sum fp_freed / sum fp``; EvalStop stops, never demotes, so they
    are its triggers at a job's last evaluation), with its 95% interval and n given
    ``at_completion`` (``fp_at_completion``, from the chunks: the summary holds the two
    rates, not their clusters), and the FPR of its stops that do."""
    fpr, stop = _select(summary, "fpr", EVALSTOP), _select(summary, "stop_fpr", EVALSTOP)
    if at_completion is not None:
        share = (" ".join(_pct_ci(at_completion.mean, at_completion.lo, at_completion.hi))
                 + f" (n = {at_completion.n} clusters with a false positive)"
                 if at_completion.mean == at_completion.mean else "n/a")  # no false positive
    else:
        share = _pct(1.0 - stop["mean"] / fpr["mean"] if fpr["mean"] == fpr["mean"]
                     and fpr["mean"] > 0 and stop["mean"] == stop["mean"] else math.nan)
    fpr_text, stop_text = (" ".join(_pct_ci(r["mean"], r["lo"], r["hi"])) for r in (fpr, stop))
    return (f"Of EvalStop's FPR above, {fpr_text} (MODEL.md section 7: a trigger on a "
            f"healthy job at any evaluation), {share} is triggers at the job's last "
            "evaluation, which free no GPU (1 - stop FPR / FPR, over the same healthy jobs); "
            f"counting only the stops that free GPUs, its FPR is {stop_text} (stop FPR, "
            f"n = {stop['n']} clusters).")


def waste_readings(summary: pl.DataFrame) -> tuple[list[dict[str, Any]], str]:
    """The paper's -21.8% against each waste reading, and which reading is closest."""
    out = []
    for metric, label in WASTE_READINGS:
        r = _select(summary, metric, EVALSTOP)
        out.append({"metric": label, "mean": r["mean"], "lo": r["lo"], "hi": r["hi"],
                    "n": r["n"], "gap": r["mean"] - PAPER_WASTE})
    # a reading with no estimate (NaN) is nobody's closest: min() kept a NaN gap that came
    # first, as neither compares below the other
    known = [r for r in out if r["gap"] == r["gap"]]
    return out, (min(known, key=lambda r: abs(r["gap"]))["metric"] if known
                 else "none (no reading has an estimate)")


def needed_factor(change: dict[str, Any]) -> str:
    """How many times the compute EvalStop saves here a -21.8% cut of all GPU-hours would
    need (``change``: that reading's row of ``waste_readings``), with its 95% interval and
    n: ``PAPER_WASTE / change`` maps the change's interval ends (monotone below 0; an end at
    or above 0 leaves the factor unbounded).  The report printed the point alone."""
    m, lo, hi, n = change["mean"], change["lo"], change["hi"], change["n"]
    if not (m == m and m < 0):
        return "n/a times the compute it saves here (it saves none)"
    point = PAPER_WASTE / m
    if not (lo == lo and hi == hi):
        return (f"{fmt_value(point, '.1f')} times the compute it saves here "
                f"{NO_INTERVAL} (n = {n})")
    shown = fmt_interval(point, PAPER_WASTE / lo, PAPER_WASTE / hi if hi < 0 else math.inf,
                         ".1f")
    at, ci = shown.split(" ", 1)
    return f"{at} times the compute it saves here (95% CI {ci}, n = {n})"


NO_INTERVAL = "(no interval: no spread between clusters)"


def _ci_pct(lo, hi, digits: int | None = None) -> str:
    """``[lo, hi]`` in percent; NaN bounds mean the clusters all agreed."""
    if lo is None:
        return ""
    digits = digits or _pct_digits(lo, hi)
    return NO_INTERVAL if lo != lo else f"[{_pct(lo, digits)}, {_pct(hi, digits)}]"


def _delay_text(r: dict[str, Any]) -> str:
    if r["mean"] != r["mean"]:
        return "n/a"
    if r["lo"] != r["lo"]:  # every cluster with a detection gave the same delay
        return f"{fmt_value(r['mean'], '.2f')} {NO_INTERVAL}"
    return fmt_interval(r["mean"], r["lo"], r["hi"], ".2f")  # more digits if its ends need


def k_table(summary: pl.DataFrame, k_boot: KBootstrap | None = None) -> str:
    """The k sweep's rates per k; given ``k_boot``, each k's F1 (of precision and stop
    recall, which the k row scores) with its 95% interval, and the share of the
    bootstrap's resamples in which it alone has the highest F1."""
    metrics = [("precision", "precision"), ("recall", "recall"),
               ("stop_recall", "stop recall"), ("completion_share", "at completion"),
               ("fpr", "FPR"), ("detection_delay_evals", "delay (evals)"),
               ("jct_mean_h_change", "mean JCT"), ("wasted_gpu_h_change", "wasted compute")]
    ev = summary.filter(pl.col("policy_name") == "evalstop")
    extra = (["F1 (precision, stop recall)", f"highest F1 (of {k_boot.n_boot} resamples)"]
             if k_boot is not None else [])
    lines = ["| k | " + " | ".join([n for _, n in metrics] + extra) + " | n |",
             "|---|" + "---|" * (len(metrics) + len(extra) + 1)]
    for k in sorted(ev["k"].unique().to_list()):
        rows = [_select(ev, m, {"k": k}) for m, _ in metrics]
        # n: the clusters (pairs); a change over fewer pairs (a baseline of 0 has no
        # relative change) says its own n, as the table had no n at all
        n = max(r["n"] for r in rows)
        cells = []
        for (m, _), r in zip(metrics, rows):
            text = (_delay_text(r) if m == "detection_delay_evals"
                    else " ".join(_pct_ci(r["mean"], r["lo"], r["hi"])))
            cells.append(text + (f" (n = {r['n']})" if r["n"] != n else ""))
        if k_boot is not None:
            cells += [_f1_text(k_boot.f1[int(k)]) + (f" (n = {k_boot.n})" if k_boot.n != n
                                                     else ""),
                      share_text(k_boot.best_share[int(k)])]
        lines.append(f"| {k} | " + " | ".join(cells) + f" | {n} |")
    return "\n".join(lines)


def ours_text(r: dict[str, Any]) -> tuple[str, str]:
    """(ours, 95% CI) as printed; for a range of estimates, each end's interval (the
    verdict reads them: an end as uncertain as its tolerance is not comparable)."""
    if isinstance(r["ours"], tuple):
        d = _pct_digits(*r["ours"])
        ends = f"{_pct(r['ours'][0], d)} to {_pct(r['ours'][1], d)}"
        if r["lo"] is None:
            return ends, "(point estimates)"
        return ends, " to ".join(_pct_ci(m, lo, hi)[1]
                                 for m, lo, hi in zip(r["ours"], r["lo"], r["hi"]))
    if isinstance(r["ours"], int):
        return f"k = {r['ours']}", ""
    return _pct_ci(r["ours"], r["lo"], r["hi"])


def _verdict_text(r: dict[str, Any], bold: bool) -> str:
    v = f"**{r['verdict']}**" if bold and r["verdict"] == "miss" else r["verdict"]
    parts = [p for p in (r["detail"], r["note"]) if p]
    return v + (f" ({'; '.join(parts)})" if parts else "")


def markdown_table(rows: list[dict[str, Any]]) -> str:
    lines = ["| result | paper | ours | 95% CI | n | tolerance | verdict | fitted to it |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ours, ci = ours_text(r)
        n = "" if r["n"] is None else str(r["n"])
        lines.append(f"| {r['result']} | {r['paper']} | {ours} | {ci} | {n} | {r['tolerance']} "
                     f"| {_verdict_text(r, True)} | {_fitted_cell(r)} |")
    return "\n".join(lines)


def _fitted_cell(r: dict[str, Any]) -> str:
    """The table's "fitted to it": the parameters, or the fitted numbers it follows from."""
    return r["fitted_by"] or (f"tied: {r['tied_to']}" if r["tied_to"] else "no")


def text_table(rows: list[dict[str, Any]]) -> str:
    """The comparison with the paper as a plain-text table for the terminal."""
    w = max([52] + [len(r["result"]) for r in rows])  # a row's name is never cut
    head = (f"{'result':{w}s} {'paper':>13s} {'ours [95% CI]':>30s} {'n':>5s} "
            f"{'tolerance':>21s}  {'fitted':6s}  verdict")
    lines = [head, "-" * len(head)]
    for r in rows:
        ours, ci = ours_text(r)
        # a range's two intervals do not fit the column: the Markdown report has them
        if ci and not ci.startswith("(") and not isinstance(r["ours"], tuple):
            ours = f"{ours} {ci}"
        n = "" if r["n"] is None else str(r["n"])
        fitted = "yes" if r["fitted_by"] else "tied" if r["tied_to"] else "no"
        lines.append(f"{r['result']:{w}s} {r['paper']:>13s} {ours:>30s} {n:>5s} "
                     f"{r['tolerance']:>21s}  {fitted:6s}  {_verdict_text(r, False)}")
    return "\n".join(lines)


def not_comparable_note(rows: list[dict[str, Any]]) -> str:
    """What the headline's count leaves unsaid: how many held-out rows that did not match
    could not be scored (no estimate, or an interval wider than the tolerance), which are
    not misses; "" if none.  "3 of 14 match" read as eleven misses."""
    n = sum(r["verdict"] == NOT_COMPARABLE for r in _held_out(rows))
    return f" ({n} of them not comparable: no estimate or too few clusters)" if n else ""


def _held_out(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if in_headline(ROWS_BY_KEY[r["key"]], r["verdict"])]


def uncounted_note(rows: list[dict[str, Any]]) -> str:
    """The rows the headline leaves out, by why: fitted, tied to the fit, and single gains
    inside the paper's one range (the range row counts it once)."""
    fitted = sum(r["verdict"] == FITTED for r in rows)
    tied = sum(r["verdict"] == TIED for r in rows)
    within = sum(ROWS_BY_KEY[r["key"]].kind == "within" and r["verdict"] not in (FITTED, TIED)
                 for r in rows)
    parts = [f"{fitted} fitted (a parameter was fitted to them)" if fitted else "",
             f"{tied} tied to the fit (functions of the fitted cell's numbers)" if tied else "",
             f"{within} single gains inside the paper's one range, which its range row "
             "scores once" if within else ""]
    return "; not counted: " + ", ".join(p for p in parts if p) if any(parts) else ""


def headline_count(rows: list[dict[str, Any]]) -> tuple[int, int]:
    """(matched held-out rows, held-out rows): ``scoring.in_headline``."""
    held = _held_out(rows)
    return sum(r["verdict"] == MATCH for r in held), len(held)


def write_extracts(out: Path, seed: int, base_overrides: dict[str, Any] | None = None,
                   within: Path | None = None) -> None:
    """Example trajectories under the headline config (EvalStop, k = 2), in OUT/extracts;
    ``within``: ``io.write_all``'s (the run's OUT, made at its start, never again)."""
    d = out / "extracts"
    cfg = build_config({**(base_overrides or {}), "scheduler": "srtf_est", "policy": "evalstop:k=2"})
    jobs, points = trajectories(cfg, seed=seed)
    # both or none; figures refuse one without the other (a kill between the renames)
    write_all([(d / name, table_writer(df, d / name))
               for name, df in (("trajectory_points.parquet", points),
                                ("trajectory_jobs.parquet", jobs))], within=within)


def _git_commit() -> str:
    """The commit of the checkout fastsim runs from, in backquotes, or `?` for an installed
    wheel; said to be edited where its source or sweep files differ from that commit's
    (the report named the commit alone, whose code gives other numbers)."""
    package = Path(fastsim.__file__).resolve().parent
    try:
        top, commit = subprocess.run(
            ["git", "rev-parse", "--show-toplevel", "--short", "HEAD"], cwd=package,
            capture_output=True, text=True, timeout=10).stdout.split()
    except (OSError, subprocess.SubprocessError, ValueError):
        return "`?`"
    # a wheel installed in a virtual environment inside some checkout is not that checkout
    if Path(top).resolve() / "fastsim" != package:
        return "`?`"
    # what the results depend on (``package_sha256``'s files, and the sweep files), not
    # the figures and the report this run writes into the checkout
    specs = [f":(glob){Path(os.path.relpath(folder, top)).as_posix()}/**/*.{ext}"
             for folders in package_folders().values() for folder in folders
             for ext in ("py", "toml")]
    try:
        edited = subprocess.run(["git", "status", "--porcelain", "--", *specs], cwd=top,
                                capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        edited = "?"
    return f"`{commit}`" + (" (edited since: uncommitted changes to fastsim's source or "
                            "sweep files)" if edited else "")


def compiles_here(grids, backend: str) -> bool:
    """Whether the sweeps' time will include numba's one-time compilation: a local run of a
    cell whose scheduler's one-pass kernel is not cached (Dask workers compile in their own
    processes, whatever this one has cached)."""
    from fastsim.compile_notice import engine_is_cached

    return backend == "local" and not all(
        engine_is_cached(c.config.scheduler.code) for g in grids for c in g.cells)


def hold_outputs(out: Path, figures_dir: Path | None, report: Path | None) -> list[DirLock]:
    """Own every sweep directory the run writes in (OUT's own, each sweep's, any holding the
    figures or the report) for the whole run; a held one is refused before any write."""
    return hold_sweep_dirs(out, *(out / name for name in PAPER_SWEEPS), figures_dir,
                           report.parent if report is not None else None)


def own_names(out: Path, figures_dir: Path | None, report: Path | None,
              formats: tuple[str, ...] = ("png", "pdf")) -> tuple[str, ...]:
    """``OWN_NAMES``, and the name in OUT of ``figures_dir`` and ``report`` given inside it
    (``--report OUT/notes.md`` wrote it there), or of each figure when ``figures_dir`` is OUT
    itself: the same command resumes."""
    base = Path(os.path.realpath(out))
    names = []
    for p in (Path(p) for p in (figures_dir, report) if p is not None):
        here = lies_at(p)
        if base in here.parents:
            names.append(here.relative_to(base).parts[0])
    if figures_dir is not None and Path(os.path.realpath(figures_dir)) == base:
        names += [f"{name}.{fmt}" for name in PAPER_FIGURES for fmt in formats]
    return (*OWN_NAMES, *names)


def reproduce(out: Path, *, clusters: int, chunk: int | None = None, seed: int = 0,
              figures_dir: Path | None, report: Path | None, sweeps_dir: Path | None = None,
              backend: str = "local", address: str | None = None, workers: int | None = None,
              timeout: float = 60.0, progress: bool = True,
              command: str | None = None, formats: tuple[str, ...] = ("png", "pdf"),
              base_overrides: dict[str, Any] | None = None, options: bool = False) -> dict:
    """Run the paper's sweeps, the extracts, the figures and the report.

    ``base_overrides`` changes workload fields of every sweep (tests use tiny clusters).
    ``options``: ``clusters`` and ``chunk`` are ``fastsim reproduce``'s options, named so
    in an error (``grid.parse_sweep``).
    """
    out, figures_dir, report, formats = _check_args(out, figures_dir, report, formats,
                                                    progress, timeout)
    sweeps_dir = sweeps_dir or shipped("sweeps")
    grids = {}
    for name in PAPER_SWEEPS:  # expand (validate) everything before running anything
        grids[name] = load_sweep(sweeps_dir / f"{name}.toml", clusters=clusters, chunk=chunk,
                                 seed=seed, base_overrides=base_overrides, options=options)
        b = grids[name].baseline
        if b is None or b.name != "none":  # the paper's changes are against no stop policy
            raise ConfigError(f"{grids[name].source}: baseline="
                              f"{'false' if b is None else repr(b.label)} cannot be scored "
                              "against the paper's changes, which are against no stop "
                              "policy; allowed: \"none\" (the default)")
    check_clusters(clusters)  # the command line's check: one cluster scores every row n/a
    for g in grids.values():  # the options too, as a sweep checks them: workers=-1 passed
        # the memory check (negative bytes) and started a local cluster of -1 workers
        check_run(g, backend, workers, address=address)
    held = hold_outputs(out, figures_dir, report)
    _check_outputs(out, grids, figures_dir, report, formats)
    # the directories made here are removed again, while still empty, if the run fails or
    # is interrupted before writing in them (Ctrl-C during the sweeps)
    with unmade_on_failure() as made:
        t0, timings, skipped, compiled, k_boot, at_completion, bounds = _run_sweeps(
            out, grids, figures_dir, report, made, held, backend=backend, address=address,
            workers=workers, timeout=timeout, progress=progress)
        write_extracts(out, seed, base_overrides, within=out)
        sweeps = {"clusters": clusters, "seed": seed, "seconds_sweeps": time.perf_counter() - t0,
                  "timings": timings, "chunks_skipped": skipped, "compiled": compiled,
                  "n_cells": sum(len(g.cells) for g in grids.values()), "k_boot": k_boot,
                  "fp_at_completion": at_completion, "bounds": bounds}
        return _draw_and_report(out, figures_dir, report, formats, sweeps, progress, command)


def _run_sweeps(out: Path, grids: dict, figures_dir: Path | None, report: Path | None,
                made: list, held: list, *, backend: str, address: str | None,
                workers: int | None, timeout: float, progress: bool
                ) -> tuple[float, dict[str, float], int, Any, KBootstrap, Estimate, dict]:
    """Run and aggregate each paper sweep in OUT (made and locked here, into ``held``),
    the figures' and the report's directories made first (into ``made``).  Returns the
    sweeps' start time, the seconds of each, the chunks skipped (done by an earlier run),
    what compiled, the k sweep's bootstrap (``k_bootstrap``), the share of EvalStop's
    false positives at completion (``fp_at_completion``) and the bounds' simultaneous
    intervals (``bound_intervals``)."""
    # the Dask cluster answers, with a worker running this code, before anything is
    # written; one client (or local cluster) serves every sweep
    with dask_client(backend, address, workers, timeout, tuple(grids.values())) as client:
        out.mkdir(parents=True, exist_ok=True)
        held.append(DirLock.acquire(out))  # OUT is this run's, as a sweep's --out is
        # the figures' and the report's directories too, now: written at the end,
        # within them (``_figures_held``), none is made again if moved meanwhile
        for d in _figures_dirs(figures_dir, report):
            made.append(make_directory(d))
        # a killed run's half-written extracts or report (the sweeps remove their own,
        # the figures theirs)
        for d in (out, out / "extracts", report.parent if report is not None else None):
            if d is not None:
                remove_temporaries_in(d, hold_sweep_dirs(d))
        stores = {name: SweepStore.open(out / name, g) for name, g in grids.items()}
        compiled = compiles_here(grids.values(), backend)
        t0 = time.perf_counter()
        timings, skipped = {}, 0
        for name, g in grids.items():
            if progress:
                print(f"[reproduce] {name}: {len(g.cells)} cells x {g.clusters} clusters",
                      file=sys.stderr)
            t = time.perf_counter()
            rep = run_sweep(g, stores[name], backend=backend, address=client, workers=workers,
                            timeout=timeout, progress=progress)
            skipped += rep.chunks_skipped
            aggregate(stores[name], progress=progress)
            timings[name] = time.perf_counter() - t
        # the k row's F1s need each cluster's counts, which only the chunks hold
        k_boot = k_bootstrap(k_counts(stores["k_sweep"]))
        # and so does the interval of the share of EvalStop's false positives at completion
        at_completion = fp_at_completion(stores["headline"])
        # and the bounds' intervals at their simultaneous level
        bounds = bound_intervals(stores)
    return t0, timings, skipped, compiled, k_boot, at_completion, bounds


def _draw_and_report(out: Path, figures_dir: Path | None, report: Path | None,
                     formats: tuple[str, ...], sweeps: dict, progress: bool,
                     command: str | None) -> dict:
    """Draw the figures from OUT's sweeps and write the report; returns what the report
    was made of (``sweeps``, the figures' seconds, the scored rows, the figures drawn)."""
    # the figures and the report naming them are all of one run's, never some of each of
    # two runs drawing into one --figures-dir at once
    with _figures_held(figures_dir, report):
        t1 = time.perf_counter()
        drawn: list[Path] = []
        if figures_dir is not None:
            from fastsim.sweep.figures import draw_all
            if progress:
                print(f"[reproduce] figures: {len(PAPER_FIGURES)} -> {figures_dir}",
                      file=sys.stderr)
            # a line per figure drawn on stderr, as the sweeps' bars (stdout is the report's
            # table); a figure skipped is said whatever --no-progress
            drawn = draw_all(out, figures_dir, formats=formats, scripts=PAPER_FIGURES,
                             own=False, log=lambda line: (progress or ": skipped, " in line)
                             and print(line, file=sys.stderr))
        t_figures = time.perf_counter() - t1
        # every sweep aggregated by this run (``_run_sweeps``), its chunks verified then
        summaries = {name: read_aggregated_summary(out / name) for name in PAPER_SWEEPS}
        info = {**sweeps, "seconds_figures": t_figures,
                "rows": comparison_rows(summaries, sweeps.get("k_boot"),
                                        bounds=sweeps["bounds"]),
                "figures": drawn, "figures_dir": figures_dir}
        if report is not None:
            text = render_report(info, summaries, command or "fastsim reproduce", out,
                                 figures_dir)
            atomic_write_bytes(report, text.encode(), within=report.parent)
    return info


def _figures_dirs(figures_dir: Path | None, report: Path | None) -> list[Path]:
    return [d for d in (figures_dir, report.parent if report is not None else None)
            if d is not None]


def _figures_held(figures_dir: Path | None, report: Path | None):
    """Hold the figures' directory and the report's (``holding_directory``) while the run
    writes them: all of one run's figures, beside its own report.  Made at the run's
    start: one moved or deleted since is refused, not made again at its old path."""
    held = _figures_dirs(figures_dir, report)
    for d in held:
        make_directory(d, within=d)
    return holding_directory(*held)


def _check_outputs(out: Path, grids: dict, figures_dir: Path | None, report: Path | None,
                   formats: tuple[str, ...]) -> None:
    """Where the run writes, checked before anything is: OUT, its sweep directories, and a
    report that lands on nothing the run makes."""
    check_output_dir(out)
    # the extracts are written after every sweep has run: a file or a dangling link at
    # OUT/extracts, or a directory at one of its tables, failed there with a traceback
    check_output_dir(out / "extracts")
    for name in EXTRACTS:
        check_output(out / "extracts" / name, "--out", None)
    # OUT holds the run's own names only, as a sweep's --out does: its sweep directories,
    # extracts, figures and report went among a user's files (--out ~), over their own
    check_no_other_files(out, own_names(out, figures_dir, report, formats),
                         "fastsim reproduce's")
    for name, g in grids.items():  # every sweep's directory checked before any is written
        # (``SweepStore.open`` checks it too, but only after the sweeps before it were made)
        check_output_dir(out / name)
        SweepStore.check_manifest(out / name, g, whole=out)
        if report is not None and (out / name).resolve() in report.resolve().parents:
            raise ConfigError(f"--report {report}: inside the sweep directory {out / name}, "
                              "whose files the sweep owns; allowed: a file outside OUT's sweep "
                              "directories")
    # the report is written last: over a figure or an extract of this run, it replaced it
    # with Markdown (--report OUT/figures/headline.png), and the run said nothing; at a
    # directory the run makes (--report equal to --figures-dir), it failed after all the work
    if figures_dir is not None:  # drawn after every sweep has run
        check_figure_files(figures_dir, PAPER_FIGURES, formats, "--figures-dir")
    figure_files = [] if figures_dir is None else [figures_dir / f"{name}.{fmt}"
                                                   for name in PAPER_FIGURES for fmt in formats]
    made = [out, *(out / name for name in (*PAPER_SWEEPS, "extracts")), figures_dir]
    check_distinct({"--report": report}, inputs={
        **{f"the directory {d} the run makes": d for d in made if d is not None},
        f"the lock file {out / LOCK} the run holds": out / LOCK,
        **{f"the figure {p} the run draws": p for p in figure_files},
        **{f"the extract {p} the run writes": p for p in (out / "extracts" / n
                                                           for n in EXTRACTS)}})

def _estimate_table(rows: list[dict[str, Any]], extra: str = "") -> str:
    head = "| reading | ours | 95% CI | n |" + (f" {extra} |" if extra else "")
    lines = [head, "|---|---|---|---|" + ("---|" if extra else "")]
    for r in rows:
        gap = f" {100 * r['gap']:+.1f} pp |" if extra else ""
        mean, ci = _pct_ci(r["mean"], r["lo"], r["hi"])
        lines.append(f"| {r['metric']} | {mean} | {ci} | {r['n']} |{gap}")
    return "\n".join(lines)


def render_report(info: dict, summaries: dict[str, pl.DataFrame], command: str, out: Path,
                  figures_dir: Path | None) -> str:
    """The reproduction's Markdown report, section by section."""
    rows = info["rows"]
    if figures_dir is not None:
        try:
            figures_dir = Path(figures_dir).resolve().relative_to(Path.cwd())
        except ValueError:
            pass
    split = detection_split(summaries["headline"])
    fpr_note = fpr_split_note(summaries["headline"], info.get("fp_at_completion"))
    waste, closest = waste_readings(summaries["headline"])
    return "\n\n".join((_report_provenance(info, command, figures_dir),
                        _report_verdicts(rows, fpr_note),
                        _report_scoring(),
                        _report_detection_split(split),
                        _report_waste(waste, closest),
                        _report_k_sweep(summaries["k_sweep"], info.get("k_boot")),
                        _report_differences(out, figures_dir)))


def _report_provenance(info: dict, command: str, figures_dir: Path | None) -> str:
    """The report's title, the command, code and machine that made it, and its wall time."""
    threads = os.environ.get("NUMBA_NUM_THREADS", str(os.cpu_count()))
    resumed = (f" ({info['chunks_skipped']} chunks were already done and skipped, so this is "
               "not the time of a full run)" if info["chunks_skipped"] else "")
    per = ", ".join(f"{k} {v:.0f} s" for k, v in info["timings"].items())
    figures = (f"figures\n{info['seconds_figures']:.0f} s" if figures_dir is not None
               else "no figures drawn (--no-figures)")
    return f"""# Reproducing the EvalStop paper (MODEL.md section 9)

Made by

    {command}

at commit {_git_commit()} with fastsim {fastsim.__version__}, Python {platform.python_version()},
{os.cpu_count()} CPU cores, numba threads {threads}. {info['n_cells']} cells x {info['clusters']} clusters
(each cell paired with its `none` baseline on identical clusters), seed {info['seed']}.

Wall time: sweeps and aggregation {info['seconds_sweeps']:.0f} s ({per}), {figures}{resumed}, from one run (wall-clock times vary with whatever
else the machine is doing)."""


def _report_verdicts(rows: list[dict[str, Any]], fpr_note: str) -> str:
    """The headline count, how to read the comparison table, and the table."""
    matched, held = headline_count(rows)
    return f"""**{matched} of {held} held-out rows match**{not_comparable_note(rows)} the paper under the pre-registered tolerances
below{uncounted_note(rows)} (shown, never counted).
Held-out rows are not independent of the fit: [docs/calibration.md](docs/calibration.md#what-the-held-out-matches-owe-to-the-fit)
runs every row again with the fitted parameters at MODEL.md's values (`python benchmarks/unfitted.py`)
and shows how far each match rests on them.

Ours: the estimate over clusters with its 95% interval (paired changes: the mean of the
per-cluster relative changes, not the change of the mean (docs/model.md), Student-t;
precision, recall, stop recall, FPR and stop FPR pooled over clusters: cluster bootstrap
joined with a t interval of the ratio, widened to the exact binomial interval), n =
clusters (pairs). A bound over several cells ("min over ...") shows the lowest cell's
estimate with a 95% interval simultaneous over the m cells the bound is over (Bonferroni:
the lowest lower end and the lowest upper end of the cells' intervals at 1 - 0.05/m), as
"at every sigma" is a claim about all cells at once; n is the fewest clusters of a cell.
The range of the gains shows each end with an interval simultaneous over the four gains
in the same way (each gain's t interval at 1 - 0.05/4), as each end is chosen as an extreme.
Verdicts follow the scoring
declared in `fastsim/sweep/scoring.py` (see below: when): `match` (our point
estimate within the tolerance; a bound holds; a value inside the paper's range; a range whose
two ends both match; the paper's k is our best k), `miss`, `not comparable` (no estimate, no
interval, our interval wider than the tolerance, or across a bound, a range end or an edge of the tolerance band; a best k
that has the highest F1 in fewer than 95% of cluster-bootstrap resamples, or whose lead has a
95% t interval reaching 0), `fitted` (a parameter of
`docs/calibration.md` was fitted to this row; for a range, to the row one of its ends is,
while no other end misses; for a bound, at the cell that decides it, while no cell not
fitted misses), `tied to the fit` (a function of the fitted cell's numbers: EvalStop's FPR
and its precision at other base rates follow from its fitted precision and its recall by
Bayes' rule, as its recall and FPR do not depend on the share of hacking jobs).

{markdown_table(rows)}

{fpr_note}"""


def _report_scoring() -> str:
    """The pre-registered tolerances, and why each is what it is."""
    return f"""## The pre-registered scoring

The tolerances were {DECLARED}.

{registration_table()}

Why 1 pp for a rate: the paper's own detection numbers agree with each other only to about
that (at 60% hacking, recall 99.3% and FPR 1.5% imply precision 99.0%, not 98.3%). Why a
relative band for FPR: an absolute 1 pp would let 0.0% match 1.5%. Why 15% for JCT and
waste: a ratio of means from one trace of unstated load and run-time spread; 15% keeps the
leading digit (-9.4% matches -8.0% to -10.8%)."""


def _report_detection_split(split: list[dict[str, Any]]) -> str:
    """The headline cell's detections split into stops and triggers at completion."""
    return f"""## Detection split: what a trigger buys (SRTF-Est, headline cell)

A trigger at the last evaluation is the job's completion: it counts for recall, and on a
healthy job as a false positive (MODEL.md section 7), but frees no GPU-time. Stop recall
and stop FPR count only stops before completion.

{_estimate_table(split)}"""


def _report_waste(waste: list[dict[str, Any]], closest: str) -> str:
    """EvalStop's waste change under each reading of the paper's "wasted compute"."""
    return f"""## Wasted compute: three readings of the paper's -21.8%

The paper does not define "wasted compute" (MODEL.md section 8). EvalStop's paired change
against SRTF-Est alone under each reading, and its gap to -21.8%:

{_estimate_table(waste, "gap to -21.8%")}

Closest reading: **{closest}**. The scored row uses MODEL.md's definition (compute after
the gold peak), and `n_evals`, `ustar_hacking` and `sigma` are fitted to it, so its closeness here
is by construction, not evidence for that reading. What does argue for it: a stop can only
save compute after the peak (it fires at least k evaluations later), so the two wider
readings dilute the same saving by compute no stop policy can touch (before the peak, and
the healthy jobs); a -21.8% cut of all GPU-hours would need EvalStop to save
{needed_factor(waste[-1])}."""


def _report_k_sweep(summary: pl.DataFrame, k_boot: KBootstrap | None) -> str:
    """The k sweep's F1 per k, with how often each k leads."""
    return f"""## k sweep (EvalStop + SRTF-Est, rlhf_heavy)

F1 of pooled precision and stop recall, as the k row scores it: 95% interval from a cluster
bootstrap that resamples the same clusters in every k cell at once (they ran on identical
clusters), joined with the linearised t interval; the last column is the share of those
resamples in which each k alone has the highest F1.

{k_table(summary, k_boot)}"""


def _report_differences(out: Path, figures_dir: Path | None) -> str:
    """Where the model and the paper differ, and where the figures and tables are."""
    # the command that draws them again, wherever --figures-dir put them
    fig_line = (f"Figures: `{figures_dir}` (PNG and PDF), drawn from the aggregated Parquet only: "
                f"`fastsim figures {out} --out {figures_dir}` draws them again (and the "
                "mixed-workload sweep's own figure, `sweep_mixed`)." if figures_dir
                else "Figures: not drawn.")
    return f"""## Where we differ and why

See `docs/calibration.md` for every fitted parameter and its evidence, the held-out rows,
and the fidelity frontier (`sweeps/frontier.toml`, `docs/figures/frontier.png`): how far
the detection rows and the system rows can be matched together in this model family.

{fig_line} Per-cell tables: `{out}/<sweep>/summary.txt`.
"""


def default_command(argv: list[str] | None) -> str:
    return "fastsim " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))


def _check_args(out, figures_dir, report, formats, progress, timeout) -> tuple:
    """``reproduce``'s arguments the command line checks as it parses them, checked before
    any work; the paths as ``Path``.  Through the Python API a str
    out was a TypeError, and formats="png" was read letter by letter, refused by
    matplotlib after every sweep had run."""
    for name, value, none_ok in (("out", out, False), ("figures_dir", figures_dir, True),
                                 ("report", report, True)):
        if not (is_path(value) or (none_ok and value is None)):
            raise ConfigError(f"{name}={value!r} is invalid; allowed: a path"
                              + (" or None" if none_ok else ""))
    # The API takes a list of exact names: no comma-separated text, and no blank or
    # padded item, which parse_formats (read from a command line) strips or drops.
    if (not isinstance(formats, (tuple, list)) or not formats
            or not all(isinstance(f, str) and f in FORMATS for f in formats)):
        raise ConfigError(f"formats={formats!r} is invalid; allowed: a list of "
                          f"{', '.join(FORMATS)}, as formats=(\"png\", \"pdf\")")
    formats = parse_formats(formats)  # a format named twice, as --formats refuses it
    check_flags(progress=progress)
    if not (is_real(timeout) and 0 < timeout < math.inf):
        raise ConfigError(f"timeout={timeout!r} is invalid; allowed: seconds > 0")
    paths = tuple(None if p is None else Path(p) for p in (out, figures_dir, report))
    return (*paths, tuple(formats))


def check_clusters(clusters: int, name: str = "clusters=") -> int:
    """``clusters`` if a cell's interval can be formed (``name``: how the caller's input
    writes it, ``--clusters=`` on the command line)."""
    # the top as load_sweep's (MAX_CLUSTER): --clusters 10**20 was refused there, saying
    # "allowed: an integer from 1 to ...", which 1 is not
    if not 2 <= clusters <= MAX_CLUSTER:
        raise ConfigError(f"{name}{clusters} is invalid; allowed: at least 2 per cell "
                          "(intervals need two replications), at most 2^63-1")
    return clusters



