"""The fidelity frontier: how close the model family comes to the paper's detection rows
and system rows *together* (``sweeps/frontier.toml``, docs/calibration.md).

Each point of the family (``n_evals`` x hacking ``u*`` x ``sigma``, EvalStop k = 2 over
SRTF-Est) gets, for each of five paper rows, its miss in units of that row's
pre-registered tolerance (``fastsim.sweep.scoring``): ``|ours - paper| / tolerance``.  The
detection distance is the largest of precision, recall and FPR; the system distance the
larger of mean JCT and wasted compute.  A row is matched as ``scoring.raw_verdict`` scores
it: a distance ``<= 1`` with a 95% interval no wider than the tolerance (a wider one is
``not comparable``, as in the reproduction, however close its point), so a point matches
all five rows only if both distances are ``<= 1`` and every interval is narrow enough.
"""
from __future__ import annotations

import sys

import polars as pl

from fastsim.errors import ConfigError
from fastsim.sweep.scoring import MATCH, NOT_COMPARABLE, ROWS_BY_KEY, raw_verdict

DETECTION = {"precision": "precision", "recall": "recall", "fpr": "fpr"}
SYSTEM = {"jct": "jct_mean_h_change", "waste": "wasted_gpu_h_change"}
AXES = ("n_evals", "ustar_hacking", "sigma")


def frontier_table(summary: pl.DataFrame) -> pl.DataFrame:
    """One row per family point: the five estimates with their 95% intervals (``_lo``,
    ``_hi``) and clusters ``n``, their distances (in tolerances), ``detection_distance``,
    ``system_distance``, ``rows_matched`` and ``rows_not_comparable`` (of 5, by
    ``scoring.raw_verdict``) and ``pareto`` (no other point is at least as close on both
    distances and closer on one)."""
    from fastsim.sweep.aggregate import require_none_baseline

    require_none_baseline(summary, "the fidelity frontier")
    ev = summary.filter(pl.col("policy_name") == "evalstop")
    axes = [a for a in AXES if a in ev.columns]
    _check_one_cell_per_point(ev, axes)
    rows = []
    for key_vals, g in ev.group_by(axes, maintain_order=True):
        point = dict(zip(axes, key_vals))
        row = {a: point.get(a) for a in AXES}  # u* reads "lo/hi", as in cells.parquet
        verdicts = []
        for key, metric in {**DETECTION, **SYSTEM}.items():
            m = g.filter(pl.col("metric") == metric).select("mean", "lo", "hi", "n")
            value, lo, hi, n = (m.row(0) if m.height else (float("nan"),) * 3 + (0,))
            paper = ROWS_BY_KEY[key]
            row.update({key: value, f"{key}_lo": lo, f"{key}_hi": hi, f"{key}_n": n})
            row[f"{key}_distance"] = abs(value - paper.paper) / paper.tol.width(paper.paper)
            verdicts.append(raw_verdict(paper, value, lo, hi).verdict)
        row["detection_distance"] = max(row[f"{k}_distance"] for k in DETECTION)
        row["system_distance"] = max(row[f"{k}_distance"] for k in SYSTEM)
        row["rows_matched"] = verdicts.count(MATCH)
        row["rows_not_comparable"] = verdicts.count(NOT_COMPARABLE)
        rows.append(row)
    df = pl.DataFrame(rows)
    d, s = df["detection_distance"].to_list(), df["system_distance"].to_list()
    pareto = [not any((d[j] <= d[i] and s[j] <= s[i]) and (d[j] < d[i] or s[j] < s[i])
                      for j in range(len(d))) for i in range(len(d))]
    return df.with_columns(pl.Series("pareto", pareto))


# a summary's columns that are not a cell's config (its id, labels and estimates)
_NOT_CONFIG = ("cell", "label", "policy", "baseline", "metric", "kind", "mean", "lo", "hi", "n")


def _check_one_cell_per_point(ev: pl.DataFrame, axes: list[str]) -> None:
    """A point is one EvalStop cell: a sweep with none had no table (a polars traceback),
    and one varying more than the family's axes (k, the scheduler) took each point's first
    cell, without a word."""
    if ev.is_empty():
        raise ConfigError("the fidelity frontier reads EvalStop's cells, and this sweep has "
                          "none; allowed: a sweep of EvalStop over n_evals, ustar_hacking and "
                          "sigma (sweeps/frontier.toml, sweeps/calibration_fit.toml)")
    keys = [*axes, "metric"]
    points = ev.select(keys).unique().height
    if points == ev.height:
        return
    varying = [c for c in ev.columns if c not in (*keys, *_NOT_CONFIG)
               and ev.select(*keys, c).unique().height > points]
    raise ConfigError(f"the fidelity frontier reads one EvalStop cell per point "
                      f"({', '.join(axes) or 'the sweep'}), and this sweep has several (it "
                      f"varies {', '.join(varying) or 'more than those'}); allowed: a sweep "
                      "varying n_evals, ustar_hacking and sigma only")


CALIBRATION_ROWS = ("jct", "waste", "precision")


def best_calibration(table: pl.DataFrame) -> dict:
    """The family point whose largest miss on the calibration rows (in tolerances) is
    smallest; ties broken by the sum of those misses."""
    d = [f"{k}_distance" for k in CALIBRATION_ROWS]
    scored = table.with_columns(pl.max_horizontal(d).alias("calibration_distance"),
                                pl.sum_horizontal(d).alias("_sum"))
    return scored.sort("calibration_distance", "_sum").row(0, named=True)


def main(argv: list[str] | None = None) -> int:
    """``python -m fastsim.sweep.frontier DIR [--calibration]``: the frontier table of an
    aggregated sweep, or its best calibration point."""
    import argparse

    from fastsim.stats import fmt_interval
    from fastsim.sweep.aggregate import read_summary

    p = argparse.ArgumentParser(prog="python -m fastsim.sweep.frontier", allow_abbrev=False)
    p.add_argument("dir", help="an aggregated sweep directory (frontier or calibration_fit)")
    p.add_argument("--calibration", action="store_true",
                   help="print the point that best matches the calibration rows")
    args = p.parse_args(argv)
    try:
        table = frontier_table(read_summary(args.dir))
    except ConfigError as exc:
        print(f"{p.prog}: error: {exc}", file=sys.stderr)
        return 2
    keys = (*DETECTION, *SYSTEM)
    cols = ["n_evals", "ustar_hacking", "sigma", *keys, "detection_distance", "system_distance",
            "rows_matched", "rows_not_comparable", "pareto"]
    if args.calibration:
        best = best_calibration(table)
        print({k: best[k] for k in [*cols, *(f"{k}{e}" for k in keys for e in ("_lo", "_hi")),
                                    "precision_n", *(f"{k}_distance" for k in CALIBRATION_ROWS)]})
        return 0
    shown = table.with_columns(pl.struct(k, f"{k}_lo", f"{k}_hi").map_elements(
        lambda r, k=k: fmt_interval(100 * r[k], 100 * r[f"{k}_lo"], 100 * r[f"{k}_hi"], ".1f"),
        return_dtype=pl.String).alias(k) for k in keys)
    print(f"% with 95% intervals over n = {table['precision_n'].max()} clusters a point")
    with pl.Config(tbl_rows=-1, tbl_cols=-1, tbl_width_chars=250, float_precision=3,
                   fmt_str_lengths=40):
        print(shown.select(cols).sort(cols[:3]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
