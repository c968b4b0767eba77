"""Gold gain against d = sqrt(KL) per proxy data size, with Gao's R(d) = d (alpha - beta ln d).

Reads ``traces.parquet`` and ``gao_fits.parquet`` from ``fastsim traces toy-rlhf``; never
calls kernels.  The fitted parameters are tabulated in docs/real-traces.md, not printed
here.  Usage: ``python THIS RESULTS [OUT]``.
"""
from pathlib import Path

import matplotlib
import numpy as np
import polars as pl

from fastsim.figures import _style as S

# the tables this script reads and their columns it uses (checked by `docs-figures`)
READS = {"traces.parquet": ("job_id", "step", "kl_coef", "n_comparisons", "truth_gold",
                            "truth_kl_nats"),
         "gao_fits.parquet": ("kl_coef", "n_comparisons", "gao_alpha", "gao_beta")}


@S.themed
def main(results, out):
    results = Path(results)
    if not (results / "traces.parquet").exists() or not (results / "gao_fits.parquet").exists():
        return []
    t = S.table(results / "traces.parquet").sort("job_id", "step")
    fits = S.table(results / "gao_fits.parquet")
    t = t.with_columns((pl.col("truth_gold") - pl.col("truth_gold").first().over("job_id")).alias("gain"),
                       pl.col("truth_kl_nats").clip(lower_bound=0).sqrt().alias("d"))
    kls = sorted(t["kl_coef"].unique())
    fig, axes = S.subplots(1, len(kls), figsize=(3.6 * len(kls) + 2.4, 3.4), sharey=True,
                           squeeze=False)
    cmap = matplotlib.colormaps["viridis"]
    sizes = sorted(t["n_comparisons"].unique())
    for ax, kl in zip(axes[0], kls):
        for i, n in enumerate(sizes):
            c = cmap(0.9 * i / max(1, len(sizes) - 1))  # the top of viridis is too pale on white
            g = t.filter((pl.col("kl_coef") == kl) & (pl.col("n_comparisons") == n))
            f = fits.filter((pl.col("kl_coef") == kl) & (pl.col("n_comparisons") == n))
            ax.scatter(g["d"], g["gain"], s=4, color=c, alpha=0.35, lw=0)
            if f.height:
                f = f.row(0, named=True)
                d = np.linspace(1e-3, float(g["d"].max()), 100)
                ax.plot(d, d * (f["gao_alpha"] - f["gao_beta"] * np.log(d)), color=c,
                        label=f"{n} comparisons")
        ax.set_title(f"KL coef {kl:g}")
        ax.set_xlabel("d = sqrt(KL)  (nats$^{1/2}$)")
    axes[0, 0].set_ylabel("gold gain over the reference policy")
    S.legend_outside(axes[0, -1], fontsize=8, title="proxy RM data", title_fontsize=8)
    runs = int(fits["n_runs"].min()) if "n_runs" in fits.columns and fits.height else 0
    S.note(fig, f"dots: every evaluation of the runs (n = {runs} seeds per colour and panel); "
                "lines: Gao's form R(d) = d (α - β ln d) fitted to them, per colour and panel")
    fig.tight_layout()
    return S.save(fig, out, "real_traces_gao")


if __name__ == "__main__":
    S.cli(main)
