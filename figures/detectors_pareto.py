"""Pareto figures of the detector benchmark: FPR against reclaimed compute, per noise level.

Reads ``synthetic.parquet`` (and ``traces.parquet`` if present) written by
``fastsim detectors``; draws ``detectors_pareto.png`` (one panel per noise level, base
rate 0.6, 95% intervals as error bars) and ``detectors_traces.png``.  A detector family's
legend name and colour are its declaration's (``_style.policy_label``, ``_style.PALETTE``),
the same as in every other figure.
"""
from __future__ import annotations

from pathlib import Path

import polars as pl

from fastsim.errors import ConfigError
from fastsim.figures import _style as S

_POINT = ("detector", "setting", "fpr", "fpr_lo", "fpr_hi")
# the tables this script reads and their columns it uses (checked by `docs-figures`)
READS = {"synthetic.parquet": (*_POINT, "sigma", "base_rate", "n_clusters", "reclaimed_gpu_h",
                               "reclaimed_gpu_h_lo", "reclaimed_gpu_h_hi"),
         "traces.parquet": (*_POINT, "compute_saved", "compute_saved_lo", "compute_saved_hi",
                            "n_runs", "n_hacking")}
BASE_RATE = 0.6

def _points(ax, df: pl.DataFrame, y: str, scale: float = 1.0) -> None:
    """One colour per detector family (every setting of it), in the results' order."""
    for name in df["detector"].unique(maintain_order=True).to_list():
        d = df.filter(pl.col("detector") == name)
        fpr = d["fpr"].to_numpy() * 100
        yy = d[y].to_numpy() * scale
        ax.errorbar(fpr, yy, xerr=[fpr - d["fpr_lo"].to_numpy() * 100, d["fpr_hi"].to_numpy() * 100 - fpr],
                    yerr=[yy - d[f"{y}_lo"].to_numpy() * scale, d[f"{y}_hi"].to_numpy() * scale - yy],
                    fmt="o", ms=3.5, lw=0.7, color=S.PALETTE[name], label=S.policy_label(name),
                    alpha=0.85)
    base = df.filter(pl.col("setting") == "evalstop(k=2)")
    if not base.is_empty():
        ax.scatter(base["fpr"] * 100, base[y] * scale, s=90, facecolors="none", edgecolors="black",
                   zorder=5, label=S.policy_label("evalstop", base.rename({"setting": "policy"})))


def plotted(results: Path) -> pl.DataFrame:
    """The rows of ``synthetic.parquet`` the figure draws (base rate 0.6).  A table with
    none (a hand-edited one) is a ``ConfigError`` naming it: it was a matplotlib
    traceback from inside the figure."""
    path = Path(results) / "synthetic.parquet"
    syn = S.table(path).filter((pl.col("base_rate") == BASE_RATE) & pl.col("sigma").is_finite())
    if syn.is_empty():
        raise ConfigError(f"{path}: no row at base_rate {BASE_RATE} with a finite sigma, the "
                          "rows the figure draws; allowed: synthetic.parquet as fastsim "
                          "detectors writes it")
    return syn


@S.themed
def main(results: Path, out: Path, formats=("png",)) -> list[Path]:
    written = []
    syn = plotted(results)
    sigmas = sorted(syn["sigma"].unique().to_list())
    cols = 4
    rows = (len(sigmas) + cols - 1) // cols
    fig, axes = S.subplots(rows, cols, figsize=(3.2 * cols, 2.8 * rows), squeeze=False)
    for ax, sigma in zip(axes.flat, sigmas):
        _points(ax, syn.filter(pl.col("sigma") == sigma), "reclaimed_gpu_h")
        n = syn.filter(pl.col("sigma") == sigma)["n_clusters"][0]
        ax.set_title(f"sigma = {sigma:g} (n = {n} clusters)")
        ax.set_xscale("symlog", linthresh=1.0)  # FPR of 0-1% and 50-100% both readable
        ax.set_xlim(-0.1, 110)
        ax.set_xlabel("FPR on healthy RLHF jobs (%, symlog)")
        ax.set_ylabel("GPU-h reclaimed / cluster")
    spare = list(axes.flat)[len(sigmas):]
    for ax in spare:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    if spare:  # the legend fills a panel slot with no data
        spare[0].legend(handles, labels, loc="center", fontsize=8, frameon=False)
    else:
        S.legend_outside(axes[0, -1], axes.flat[0], fontsize=8, frameon=False)
    S.note(fig, "base rate 0.6; bars: 95% intervals (FPR and reclaimed GPU-h) over n clusters "
                "per panel")
    fig.tight_layout()
    written += S.save(fig, out, "detectors_pareto", formats)
    written += traces_figure(results, out, formats)
    return written


@S.themed
def traces_figure(results: Path, out: Path, formats=("png",)) -> list[Path]:
    """``detectors_traces.png`` from ``traces.parquet`` alone, if there is one: the
    traces' table is made in seconds (``detectors_cli.trace_table``), the grid in minutes."""
    tr = Path(results) / "traces.parquet"
    if not tr.exists():
        return []
    df = S.table(tr)
    fig, ax = S.subplots(figsize=(4.8, 3.4))
    _points(ax, df, "compute_saved", 100.0)
    # a table written before the intervals resampled seeds has no n_seeds: its resample runs
    seeds = f" of {df['n_seeds'][0]} seeds" if "n_seeds" in df.columns else ""
    ax.set_title(f"toy-RLHF traces ({df['n_runs'][0]} runs{seeds}, {df['n_hacking'][0]} hacking)")
    ax.set_xlabel("FPR on healthy runs (%)")
    ax.set_xscale("symlog", linthresh=1.0)
    ax.set_xlim(-0.1, 110)
    ax.set_ylabel("compute saved (% of steps)")
    S.legend_outside(ax, fontsize=7, frameon=False)
    S.note(fig, "bars: 95% intervals resampling the seeds" if seeds else
           "bars: 95% intervals over the runs")
    fig.tight_layout()
    return S.save(fig, out, "detectors_traces", formats)


if __name__ == "__main__":
    S.cli(main)
