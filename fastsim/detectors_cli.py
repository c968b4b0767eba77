"""``fastsim detectors``: the detector benchmark (docs/detectors.md).

Synthetic workloads at each noise level and base rate, every detector setting of
``SETTINGS`` applied to the observed scores, and (given a trace set) the same
detectors on the toy-RLHF traces.  Writes ``synthetic.parquet``, ``traces.parquet``,
``table.md`` and the Pareto figures; nothing is written until everything is computed.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

from fastsim import detectors as det
from fastsim.errors import ConfigError
from fastsim.io import atomic_write_bytes, atomic_write_parquet

SIGMAS = (0.0, 0.01, 0.02, 0.05, 0.08, 0.12, 0.15)
BASE_RATES = (0.2, 0.4, 0.6, 0.8)
TABLE_SIGMAS = (0.02, 0.05, 0.12)


def settings(sigma: float) -> list[tuple[str, dict]]:
    """Every setting the benchmark measures at noise ``sigma``: each detector's default
    (``det.default_params``) and a few neighbours along its main knob."""
    out = [("evalstop", {"k": 2}), ("evalstop", {"k": 3})]
    for p in (1, 2, 3):
        for a in (0.0, 1.0, 2.0):
            out.append(("patience", {"patience": p, "threshold": a * sigma}))
    for k in (1, 2):
        for z in (0.5, 1.0, 2.0):
            out.append(("margin", {"k": k, "z": z, "sigma0": sigma}))
    for drift in (0.0, 0.5):
        for h in (1.0, 2.0, 3.0):
            out.append(("cusum", {"drift": drift, "h": h, "sigma0": sigma}))
    for origin in (1, 0):
        for z in (0.5, 1.0, 1.65, 2.33):
            out.append(("peak", {"z": z, "sigma0": sigma, "min_evals": 4, "origin": origin,
                                 "window": 0}))
    for z in (0.5, 1.0, 1.65):
        out.append(("bocpd", {"hazard": 0.2, "z": z, "sigma0": sigma, "prior_sd": 0.1}))
    return out


def trace_settings(noise: float) -> list[tuple[str, dict]]:
    """Settings on real traces, whose scores do not start at 0 (``origin=0``), with the
    local fit (``window`` 6 and 8) next to the global one."""
    out = []
    for name, params in settings(noise):
        if name == "peak":
            if params["origin"] == 1:
                continue
            for window in (0, 6, 8):
                out.append((name, {**params, "min_evals": max(4, window), "window": window}))
        else:
            out.append((name, params))
    return out


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "detectors", help="benchmark the online stop detectors against EvalStop (k=2)",
        description="Precision, recall, stop recall, FPR, delay, reclaimed GPU-hours and "
        "delivered gold regret of every detector setting, at noise 0..0.15 and base rates "
        "0.2..0.8 (95%% intervals), and on a toy-RLHF trace set (docs/detectors.md).")
    p.add_argument("--out", type=Path, default=Path("results/detectors"),
                   help="directory for synthetic.parquet, traces.parquet, table.md, figures")
    p.add_argument("--clusters", type=int, default=200, help="clusters per cell (default 200)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--traces", type=Path, default=None,
                   help="traces.parquet from `fastsim traces toy-rlhf` (optional)")
    p.add_argument("--trace-noise", type=float, default=None,
                   help="sigma0 on the traces, in score units (default: median per-run noise)")
    p.add_argument("--figures", type=Path, default=None,
                   help="where the Pareto figures go (default: OUT)")
    p.add_argument("--quick", action="store_true", help="50 clusters, base rate 0.6 only")
    p.set_defaults(func=_cmd)


def _cmd(args: argparse.Namespace) -> int:
    if args.clusters < 2:
        raise ConfigError(f"clusters={args.clusters!r} is invalid; allowed: an integer >= 2")
    if args.traces is not None and not args.traces.is_file():
        raise ConfigError(f"traces={str(args.traces)!r} is not a file; allowed: a traces.parquet")
    t0 = time.perf_counter()
    n = 50 if args.quick else args.clusters
    rates = (0.6,) if args.quick else BASE_RATES
    synthetic = det.run_grid(SIGMAS, rates, settings, n_clusters=n, seed=args.seed)
    traces = None
    if args.traces is not None:
        traces = trace_table(pl.read_parquet(args.traces), args.trace_noise)
    table = markdown_table(synthetic, traces)
    args.out.mkdir(parents=True, exist_ok=True)
    atomic_write_parquet(synthetic, args.out / "synthetic.parquet")
    if traces is not None:
        atomic_write_parquet(traces, args.out / "traces.parquet")
    atomic_write_bytes(args.out / "table.md", table.encode())
    from fastsim.sweep.figures import load_script
    load_script("detectors_pareto").main(args.out, args.figures or args.out)
    print(table)
    print(f"fastsim detectors: {len(synthetic)} synthetic rows, {n} clusters per cell, "
          f"{time.perf_counter() - t0:.0f} s; wrote {args.out}", file=sys.stderr)
    return 0


def trace_table(traces: pl.DataFrame, noise: float | None) -> pl.DataFrame:
    arrays = det.trace_arrays(traces)
    if noise is None:
        noise = float(np.median(np.std(arrays["score"] - arrays["gold"], axis=1, ddof=1)))
    rows = [det.trace_row(arrays, name, params) for name, params in trace_settings(noise)]
    return pl.DataFrame(rows).with_columns(pl.lit(noise).alias("sigma0"))


def _fmt(row: dict, m: str, scale: float = 100.0, digits: int = 1) -> str:
    v, lo, hi = row[m], row[f"{m}_lo"], row[f"{m}_hi"]
    if v is None or not np.isfinite(v):
        return "n/a"
    return f"{v * scale:.{digits}f} [{lo * scale:.{digits}f}, {hi * scale:.{digits}f}]"


RATE_COLS = ("precision", "recall", "stop_recall", "fpr")


def markdown_table(synthetic: pl.DataFrame, traces: pl.DataFrame | None) -> str:
    """The tables of docs/detectors.md: per noise level (base rate 0.6) every setting,
    rates in %, delay in evaluations, GPU-hours per cluster, paired change vs EvalStop(k=2)."""
    lines = []
    for sigma in TABLE_SIGMAS:
        cell = synthetic.filter((pl.col("sigma") == sigma) & (pl.col("base_rate") == 0.6))
        if cell.is_empty():
            continue
        r0 = cell.row(0, named=True)
        lines += [f"### sigma = {sigma:g} (base rate 0.6, n = {r0['n_clusters']} clusters, "
                  f"{r0['n_hacking']} hacking / {r0['n_healthy']} healthy RLHF jobs)", "",
                  "| setting | precision % | recall % | stop recall % | FPR % | delay (evals) "
                  "| reclaimed GPU-h / cluster | vs EvalStop(k=2) | lost GPU-h (healthy) | regret (gold) |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in cell.iter_rows(named=True):
            lines.append("| " + " | ".join([
                r["setting"], *(_fmt(r, m) for m in RATE_COLS), _fmt(r, "delay_evals", 1, 2),
                _fmt(r, "reclaimed_gpu_h", 1, 0), _fmt(r, "d_reclaimed_gpu_h", 1, 0),
                _fmt(r, "lost_gpu_h", 1, 0), _fmt(r, "regret", 1, 3)]) + " |")
        lines.append("")
    if traces is not None:
        r0 = traces.row(0, named=True)
        lines += [f"### toy-RLHF traces ({r0['n_runs']} runs, {r0['n_hacking']} hacking, "
                  f"{r0['n_evals']} evaluations, sigma0 = {r0['sigma0']:.3f} score units)", "",
                  "| setting | precision % | recall % | stop recall % | FPR % | delay (evals) "
                  "| compute saved % | regret (gold) |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in traces.iter_rows(named=True):
            lines.append("| " + " | ".join([
                r["setting"], *(_fmt(r, m) for m in RATE_COLS), _fmt(r, "delay_evals", 1, 2),
                _fmt(r, "compute_saved"), _fmt(r, "regret", 1, 3)]) + " |")
        lines.append("")
    return "\n".join(lines)
