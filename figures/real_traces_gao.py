"""Gold gain against d = sqrt(KL) per proxy data size, with Gao's R(d) = d (alpha - beta ln d).

Reads ``traces.parquet`` and ``gao_fits.parquet`` from ``fastsim traces toy-rlhf``.
Usage: python figures/real_traces_gao.py [results/traces] [docs/figures]
"""
import sys
from pathlib import Path

import matplotlib
import numpy as np
import polars as pl

from fastsim.figures import _style as S


@S.themed
def main(src="results/traces", dst="docs/figures"):
    t = pl.read_parquet(Path(src) / "traces.parquet").sort("job_id", "step")
    fits = pl.read_parquet(Path(src) / "gao_fits.parquet")
    t = t.with_columns((pl.col("truth_gold") - pl.col("truth_gold").first().over("job_id")).alias("gain"),
                       pl.col("truth_kl_nats").clip(lower_bound=0).sqrt().alias("d"))
    kls = sorted(t["kl_coef"].unique())
    fig, axes = S.subplots(1, len(kls), figsize=(4.2 * len(kls), 3.8), sharey=True)
    cmap = matplotlib.colormaps["viridis"]
    sizes = sorted(t["n_comparisons"].unique())
    for ax, kl in zip(np.atleast_1d(axes), kls):
        for i, n in enumerate(sizes):
            c = cmap(i / max(1, len(sizes) - 1))
            g = t.filter((pl.col("kl_coef") == kl) & (pl.col("n_comparisons") == n))
            ax.scatter(g["d"], g["gain"], s=4, color=c, alpha=0.4)
            f = fits.filter((pl.col("kl_coef") == kl) & (pl.col("n_comparisons") == n)).row(0, named=True)
            d = np.linspace(1e-3, float(g["d"].max()), 100)
            ax.plot(d, d * (f["gao_alpha"] - f["gao_beta"] * np.log(d)), color=c,
                    label=f"n={n}: a={f['gao_alpha']:.2f} b={f['gao_beta']:.2f} R2={f['gao_r2']:.2f}")
        ax.set_title(f"KL coef {kl:g}")
        ax.set_xlabel("d = sqrt(KL) [nats^0.5]")
        ax.legend(fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.2))  # below the data
    np.atleast_1d(axes)[0].set_ylabel("gold gain over the reference policy")
    fig.tight_layout()
    S.save(fig, dst, "real_traces_gao", dpi=130)
    print(f"wrote {Path(dst)}/real_traces_gao.png/.pdf")


if __name__ == "__main__":
    main(*sys.argv[1:])
