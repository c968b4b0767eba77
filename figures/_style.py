"""Shared look and I/O of the figure scripts: they read aggregated Parquet only.

``sources`` maps a sweep's name to its output directory (``summary.parquet``,
``jct_hist.parquet``) and ``extracts`` to the per-job extracts directory.
"""
from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import polars as pl  # noqa: E402
import seaborn as sns  # noqa: E402

POLICY_NAMES = {"evalstop": "EvalStop (k=2)", "stop_at": "StopAt-0.65",
                "loss_plateau": "Loss plateau", "deprioritize": "Deprioritize (k=2)",
                "oracle": "Oracle (hidden truth)", "none": "no stop policy"}
SCHEDULER_NAMES = {"fifo": "FIFO", "fifo+backfill": "FIFO+backfill", "sjf_est": "SJF-Est",
                   "srtf_est": "SRTF-Est", "loss_aware": "LossAware", "tiresias": "Tiresias"}
PALETTE = dict(zip(POLICY_NAMES, sns.color_palette("colorblind", len(POLICY_NAMES))))


def setup() -> None:
    sns.set_theme(context="paper", style="whitegrid", font_scale=1.1)
    plt.rcParams.update({"figure.dpi": 120, "savefig.dpi": 200, "savefig.bbox": "tight",
                         "pdf.fonttype": 42})


def summary(sources: dict, sweep: str) -> pl.DataFrame:
    return pl.read_parquet(Path(sources[sweep]) / "summary.parquet")


def metric(df: pl.DataFrame, name: str) -> pl.DataFrame:
    return df.filter(pl.col("metric") == name)


def band(ax, x, rows: pl.DataFrame, label: str, color, scale: float = 100.0, marker="o") -> None:
    """A line with its 95% interval as a shaded band."""
    ax.plot(x, rows["mean"] * scale, marker=marker, ms=4, color=color, label=label)
    ax.fill_between(x, rows["lo"] * scale, rows["hi"] * scale, color=color, alpha=0.25, lw=0)


def save(fig, out: Path, stem: str, formats) -> list[Path]:
    paths = []
    for fmt in formats:
        p = Path(out) / f"{stem}.{fmt}"
        fig.savefig(p, metadata={"CreationDate": None} if fmt == "pdf" else None)
        paths.append(p)
    plt.close(fig)
    return paths


def footnote(fig, sources: dict, sweep: str) -> None:
    df = summary(sources, sweep)
    n = int(df["n"].min()) if df.height else 0
    fig.text(0.99, 0.005, f"{sweep}: 95% CIs over n = {n} clusters per cell",
             ha="right", va="bottom", fontsize=7, color="0.4")


def main(draw, needs) -> None:
    """Standalone use: ``python figures/NAME.py RESULTS_DIR [OUT_DIR]``."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from fastsim.sweep.figures import find_sources

    results = Path(sys.argv[1])
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else results / "figures"
    out.mkdir(parents=True, exist_ok=True)
    sources = find_sources(results)
    missing = [s for s in needs if s not in sources]
    if missing:
        sys.exit(f"no results for {', '.join(missing)} in {results}")
    for p in draw(sources, out, ("png", "pdf")):
        print(p)
