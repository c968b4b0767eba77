"""One command from nothing to ``REPRODUCTION.md``: the paper's sweeps, figures, table.

``reproduce`` runs every sweep of ``PAPER_SWEEPS`` (the shipped ``sweeps/*.toml``) at one size
into ``OUT/<sweep name>/`` (resumable like ``fastsim sweep``), writes the example
trajectories into ``OUT/extracts/``, draws the figures and writes a report comparing
each number of MODEL.md section 9 with ours (95% CI, n), saying whether the paper's
value lies inside our interval, within the stated tolerance, or neither.
"""
from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

import fastsim

from fastsim.errors import ConfigError
from fastsim.resources import shipped
from fastsim.sweep.aggregate import aggregate, read_summary
from fastsim.sweep.extracts import trajectories
from fastsim.sweep.grid import build_config, load_sweep
from fastsim.sweep.runner import check_sweep_memory, run_sweep
from fastsim.sweep.store import SweepStore, atomic_write_bytes, atomic_write_parquet

PAPER_SWEEPS = ("headline", "composability", "noise", "base_rate", "k_sweep", "mixed")
FULL_CLUSTERS = 2000
QUICK_CLUSTERS = 500  # tight enough CIs to read the table; ~20 s on 2 cores
# Absolute tolerance (percentage points) when the paper's value is outside our CI: the
# paper reports no interval or cluster count, so its own sampling error is unknown.
TOLERANCE = 0.03


@dataclass(frozen=True)
class Target:
    """One number of MODEL.md section 9 and where our estimate of it lives."""

    result: str
    paper: float           # a fraction (0.094 = 9.4%)
    sweep: str
    metric: str
    where: dict[str, Any]  # column filters on summary.parquet
    bound: str = "="       # "=" (value), ">=" (paper gives a lower bound)
    negate: bool = False   # report a gain (-change)
    paper_text: str = ""


EVALSTOP = {"scheduler": "srtf_est", "policy_name": "evalstop", "k": 2}
TARGETS = (
    Target("EvalStop + SRTF-Est vs SRTF-Est: mean JCT change", -0.094, "headline",
           "jct_mean_h_change", EVALSTOP),
    Target("same: wasted compute change", -0.218, "headline", "wasted_gpu_h_change", EVALSTOP),
    Target("EvalStop precision", 0.983, "headline", "precision", EVALSTOP),
    Target("EvalStop recall", 0.993, "headline", "recall", EVALSTOP),
    Target("EvalStop FPR", 0.015, "headline", "fpr", EVALSTOP),
    Target("StopAt-0.65 precision", 0.571, "headline", "precision",
           {"scheduler": "srtf_est", "policy_name": "stop_at"}),
    Target("StopAt-0.65 FPR on healthy RLHF", 0.645, "headline", "fpr",
           {"scheduler": "srtf_est", "policy_name": "stop_at"}),
    Target("Loss-plateau precision", 0.570, "headline", "precision",
           {"scheduler": "srtf_est", "policy_name": "loss_plateau"}),
    Target("Loss-plateau recall", 0.383, "headline", "recall",
           {"scheduler": "srtf_est", "policy_name": "loss_plateau"}),
    Target("EvalStop precision, sigma = 0.01", 1.00, "noise", "precision",
           {"policy_name": "evalstop", "sigma": 0.01}),
    Target("EvalStop precision, sigma = 0.12", 0.81, "noise", "precision",
           {"policy_name": "evalstop", "sigma": 0.12}),
)
GAIN_SCHEDULERS = {"fifo": "FIFO", "sjf_est": "SJF-Est", "srtf_est": "SRTF-Est",
                   "loss_aware": "LossAware"}
PAPER_GAIN_RANGE = (0.089, 0.252)


def _select(summary: pl.DataFrame, metric: str, where: dict[str, Any]) -> dict[str, Any]:
    df = summary.filter(pl.col("metric") == metric)
    for k, v in where.items():
        df = df.filter(pl.col(k).is_between(v - 1e-9, v + 1e-9) if isinstance(v, float)
                       else pl.col(k) == v)
    if df.height != 1:
        raise RuntimeError(f"expected one row for {metric} {where}, found {df.height}")
    return df.row(0, named=True)


def _pct(x: float) -> str:
    if x is None or x != x:
        return "n/a"
    # an interval bound like 99.998% must not print as 100.0%: that would read as certainty
    near_edge = 0 < abs(x) < 0.0005 or 0.9995 < abs(x) < 1
    return f"{100 * x:.3f}%" if near_edge else f"{100 * x:.1f}%"


def _status(paper: float, mean: float, lo: float, hi: float, bound: str) -> str:
    if bound == ">=":
        if mean >= paper:
            return "yes (bound holds)"
        return (f"within ±{100 * TOLERANCE:.0f} pp" if mean >= paper - TOLERANCE
                else f"**no** ({100 * (mean - paper):+.1f} pp)")
    if lo <= paper <= hi:
        return "inside CI"
    if abs(mean - paper) <= TOLERANCE:
        return f"within ±{100 * TOLERANCE:.0f} pp"
    return f"**no** ({100 * (mean - paper):+.1f} pp)"


def comparison_rows(summaries: dict[str, pl.DataFrame]) -> list[dict[str, Any]]:
    """Every MODEL.md section 9 number: paper, ours (mean, lo, hi, n), status."""
    rows = []

    def add(result, paper_text, paper, r, bound="=", negate=False, note=""):
        m, lo, hi = r["mean"], r["lo"], r["hi"]
        if negate:
            m, lo, hi = -m, -hi, -lo
        rows.append({"result": result, "paper": paper_text, "paper_value": paper, "ours": m,
                     "lo": lo, "hi": hi, "n": r["n"], "status": _status(paper, m, lo, hi, bound),
                     "note": note})

    for t in TARGETS:
        add(t.result, t.paper_text or _pct(t.paper), t.paper,
            _select(summaries[t.sweep], t.metric, t.where))
    comp = summaries["composability"]
    gains = []
    for sched, name in GAIN_SCHEDULERS.items():
        r = _select(comp, "jct_mean_h_change", {"scheduler": sched, "policy_name": "evalstop"})
        gains.append((name, -r["mean"]))
        lo_p, hi_p = PAPER_GAIN_RANGE
        m, lo, hi = -r["mean"], -r["hi"], -r["lo"]
        inside = hi >= lo_p - TOLERANCE and lo <= hi_p + TOLERANCE
        rows.append({"result": f"EvalStop JCT gain over {name}", "paper": "8.9% to 25.2%",
                     "paper_value": None, "ours": m, "lo": lo, "hi": hi, "n": r["n"],
                     "status": "inside paper range" if inside else "**no** (outside range)",
                     "note": ""})
    lo_g, hi_g = min(g for _, g in gains), max(g for _, g in gains)
    ok = abs(lo_g - PAPER_GAIN_RANGE[0]) <= TOLERANCE and abs(hi_g - PAPER_GAIN_RANGE[1]) <= TOLERANCE
    rows.append({"result": "range of those four gains", "paper": "8.9% to 25.2%", "paper_value": None,
                 "ours": None, "lo": lo_g, "hi": hi_g, "n": None,
                 "status": f"within ±{100 * TOLERANCE:.0f} pp at both ends" if ok else
                 f"**no** (ends {100 * (lo_g - PAPER_GAIN_RANGE[0]):+.1f} / "
                 f"{100 * (hi_g - PAPER_GAIN_RANGE[1]):+.1f} pp)", "note": ""})
    noise = summaries["noise"].filter((pl.col("metric") == "precision")
                                      & (pl.col("policy_name") == "evalstop"))
    low = noise.filter(pl.col("sigma") <= 0.05 + 1e-9).sort("mean").row(0, named=True)
    add("EvalStop precision, min over sigma <= 0.05", ">= 91%", 0.91, low, bound=">=",
        note=f"at sigma = {low['sigma']:g}")
    br = summaries["base_rate"].filter((pl.col("metric") == "precision")
                                       & (pl.col("policy_name") == "evalstop"))
    worst = br.sort("mean").row(0, named=True)
    add("EvalStop precision, min over base rate 0.2-0.8", ">= 89%", 0.89, worst, bound=">=",
        note=f"at base rate = {worst['base_rate']:g}")
    best_k, f1s = k_balance(summaries["k_sweep"])
    rows.append({"result": "k sweep: k balancing early detection and false positives",
                 "paper": "k = 2", "paper_value": None, "ours": None, "lo": None, "hi": None,
                 "n": None, "status": "yes" if best_k == 2 else f"**no** (k = {best_k})",
                 "note": "k maximising pooled F1 = 2PR/(P+R): "
                         + ", ".join(f"k={k}: {100 * f:.1f}%" for k, f in f1s)})
    return rows


def k_balance(summary: pl.DataFrame) -> tuple[int, list[tuple[int, float]]]:
    """The k maximising F1 of pooled precision and recall, and every k's F1."""
    ev = summary.filter(pl.col("policy_name") == "evalstop")
    f1s = []
    for k in sorted(ev["k"].unique().to_list()):
        p = _select(ev, "precision", {"k": k})["mean"]
        r = _select(ev, "recall", {"k": k})["mean"]
        f1s.append((int(k), 2 * p * r / (p + r) if p + r > 0 else 0.0))
    return max(f1s, key=lambda t: t[1])[0], f1s


def k_table(summary: pl.DataFrame) -> str:
    metrics = [("precision", "precision"), ("recall", "recall"), ("fpr", "FPR"),
               ("detection_delay_evals", "delay (evals)"), ("jct_mean_h_change", "mean JCT"),
               ("wasted_gpu_h_change", "wasted compute")]
    ev = summary.filter(pl.col("policy_name") == "evalstop")
    lines = ["| k | " + " | ".join(n for _, n in metrics) + " |",
             "|---|" + "---|" * len(metrics)]
    for k in sorted(ev["k"].unique().to_list()):
        cells = []
        for m, _ in metrics:
            r = _select(ev, m, {"k": k})
            if m == "detection_delay_evals":
                cells.append("n/a" if r["mean"] != r["mean"] else
                             f"{r['mean']:.2f} [{r['lo']:.2f}, {r['hi']:.2f}]")
            else:
                cells.append(f"{_pct(r['mean'])} [{_pct(r['lo'])}, {_pct(r['hi'])}]")
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def markdown_table(rows: list[dict[str, Any]]) -> str:
    lines = ["| result | paper | ours | 95% CI | n | paper value vs ours |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        ours = "" if r["ours"] is None else _pct(r["ours"])
        ci = "" if r["lo"] is None else f"[{_pct(r['lo'])}, {_pct(r['hi'])}]"
        if r["ours"] is None and r["lo"] is not None:
            ours, ci = f"{_pct(r['lo'])} to {_pct(r['hi'])}", "(point estimates)"
        n = "" if r["n"] is None else str(r["n"])
        status = r["status"] + (f"; {r['note']}" if r["note"] else "")
        lines.append(f"| {r['result']} | {r['paper']} | {ours} | {ci} | {n} | {status} |")
    return "\n".join(lines)


def text_table(rows: list[dict[str, Any]]) -> str:
    """The comparison with the paper as a plain-text table for the terminal."""
    head = f"{'result':58s} {'paper':>14s} {'ours [95% CI]':>30s} {'n':>6s}  verdict"
    lines = [head, "-" * len(head)]
    for r in rows:
        if r["ours"] is None and r["lo"] is not None:
            ours = f"{_pct(r['lo'])} to {_pct(r['hi'])}"
        elif r["ours"] is None:
            ours = ""
        elif r["lo"] is None:
            ours = _pct(r["ours"])
        else:
            ours = f"{_pct(r['ours'])} [{_pct(r['lo'])}, {_pct(r['hi'])}]"
        n = "" if r["n"] is None else str(r["n"])
        verdict = r["status"].replace("**", "") + (f"; {r['note']}" if r["note"] else "")
        lines.append(f"{r['result'][:58]:58s} {r['paper']:>14s} {ours:>30s} {n:>6s}  {verdict}")
    return "\n".join(lines)


def write_extracts(out: Path, seed: int, base_overrides: dict[str, Any] | None = None) -> None:
    """Example trajectories under the headline config (EvalStop, k = 2)."""
    d = out / "extracts"
    d.mkdir(parents=True, exist_ok=True)
    cfg = build_config({**(base_overrides or {}), "scheduler": "srtf_est", "policy": "evalstop:k=2"})
    jobs, points = trajectories(cfg, seed=seed)
    atomic_write_parquet(jobs, d / "trajectory_jobs.parquet")
    atomic_write_parquet(points, d / "trajectory_points.parquet")


def _git_commit() -> str:
    """The commit of the checkout fastsim runs from, or "?" for an installed wheel."""
    package = Path(fastsim.__file__).resolve().parent
    try:
        top, commit = subprocess.run(
            ["git", "rev-parse", "--show-toplevel", "--short", "HEAD"], cwd=package,
            capture_output=True, text=True, timeout=10).stdout.split()
    except (OSError, subprocess.SubprocessError, ValueError):
        return "?"
    # a wheel installed in a virtual environment inside some checkout is not that checkout
    return commit if Path(top).resolve() / "fastsim" == package else "?"


def reproduce(out: Path, *, clusters: int, chunk: int | None = None, seed: int = 0,
              figures_dir: Path | None, report: Path | None, sweeps_dir: Path | None = None,
              backend: str = "local", address: str | None = None, workers: int | None = None,
              timeout: float = 60.0, progress: bool = True,
              command: str | None = None, formats: tuple[str, ...] = ("png", "pdf"),
              base_overrides: dict[str, Any] | None = None) -> dict:
    """Run the paper's sweeps, the extracts, the figures and the report.

    ``base_overrides`` changes workload fields of every sweep (tests use tiny clusters).
    """
    sweeps_dir = sweeps_dir or shipped("sweeps")
    grids = {}
    for name in PAPER_SWEEPS:  # expand (validate) everything before running anything
        grids[name] = load_sweep(sweeps_dir / f"{name}.toml", clusters=clusters, chunk=chunk,
                                 seed=seed, base_overrides=base_overrides)
    for g in grids.values():
        check_sweep_memory(g)
    stores = {name: SweepStore.open(out / name, g) for name, g in grids.items()}
    t0 = time.perf_counter()
    timings, skipped = {}, 0
    for name, g in grids.items():
        if progress:
            print(f"[reproduce] {name}: {len(g.cells)} cells x {g.clusters} clusters",
                  file=sys.stderr)
        t = time.perf_counter()
        rep = run_sweep(g, stores[name], backend=backend, address=address, workers=workers,
                        timeout=timeout, progress=progress)
        skipped += rep.chunks_skipped
        aggregate(stores[name])
        timings[name] = time.perf_counter() - t
    write_extracts(out, seed, base_overrides)
    t_sweeps = time.perf_counter() - t0
    t1 = time.perf_counter()
    drawn: list[Path] = []
    if figures_dir is not None:
        from fastsim.sweep.figures import draw_all
        drawn = draw_all(out, figures_dir, formats=formats)
    t_figures = time.perf_counter() - t1
    summaries = {name: read_summary(out / name) for name in PAPER_SWEEPS}
    rows = comparison_rows(summaries)
    info = {"clusters": clusters, "seconds_sweeps": t_sweeps, "seconds_figures": t_figures,
            "timings": timings, "chunks_skipped": skipped,
            "n_cells": sum(len(g.cells) for g in grids.values()), "rows": rows,
            "figures": drawn}
    if report is not None:
        text = render_report(info, summaries, command or "fastsim reproduce", out, figures_dir)
        report.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(report, text.encode())
    return info


def render_report(info: dict, summaries: dict[str, pl.DataFrame], command: str, out: Path,
                  figures_dir: Path | None) -> str:
    rows = info["rows"]
    if figures_dir is not None:
        try:
            figures_dir = Path(figures_dir).resolve().relative_to(Path.cwd())
        except ValueError:
            pass
    n_ok = sum(1 for r in rows if not r["status"].startswith("**no"))
    threads = os.environ.get("NUMBA_NUM_THREADS", str(os.cpu_count()))
    resumed = (f" ({info['chunks_skipped']} chunks were already done and skipped, so this is "
               "not the time of a full run)" if info["chunks_skipped"] else "")
    per = ", ".join(f"{k} {v:.0f} s" for k, v in info["timings"].items())
    fig_line = (f"Figures: `{figures_dir}` (PNG and PDF), drawn from the aggregated Parquet only "
                f"by `fastsim figures {out}`." if figures_dir else "Figures: not drawn.")
    return f"""# Reproducing the EvalStop paper (MODEL.md section 9)

Made by

    {command}

at commit `{_git_commit()}` with fastsim {fastsim.__version__}, Python {platform.python_version()},
{os.cpu_count()} CPU cores, numba threads {threads}. {info['n_cells']} cells x {info['clusters']} clusters
(each cell paired with its `none` baseline on identical clusters), seed 0.

Wall time: sweeps and aggregation {info['seconds_sweeps']:.0f} s ({per}), figures
{info['seconds_figures']:.0f} s{resumed}, from one run (wall-clock times vary with whatever
else the machine is doing).

Ours: the estimate over clusters with its 95% interval (paired per-cluster relative changes:
Student-t; precision, recall and FPR pooled over clusters: cluster bootstrap widened to the exact binomial interval), n = clusters
(pairs). "Inside CI": the paper's value is in our interval; "within ±{100 * TOLERANCE:.0f} pp": it is
not, but it is within {100 * TOLERANCE:.0f} percentage points of our estimate (the paper gives no
interval or sample size, so its own sampling error is unknown); "**no**": neither.
Bounds ("≥ 91%") are checked on our point estimate. {n_ok} of {len(rows)} rows pass.

{markdown_table(rows)}

## k sweep (EvalStop + SRTF-Est, rlhf_heavy)

{k_table(summaries['k_sweep'])}

## Where we differ and why

See `docs/calibration.md` for the calibration of the defaults, the sensitivity sweeps
(`sweeps/calibration_*.toml`) and which paper numbers the model cannot reach with honest,
model-level choices.

{fig_line} Per-cell tables: `{out}/<sweep>/summary.txt`.
"""


def default_command(argv: list[str] | None) -> str:
    return "fastsim " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))


def check_clusters(clusters: int) -> int:
    if clusters < 2:
        raise ConfigError(f"clusters={clusters} is invalid; allowed: at least 2 per cell "
                          "(intervals need two replications)")
    return clusters



