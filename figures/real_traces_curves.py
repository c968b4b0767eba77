"""Gold and proxy along toy RLHF runs: data-poor proxies over-optimise, data-rich do not.

Reads ``traces.parquet`` from ``fastsim traces toy-rlhf``; writes PNG and PDF.
Usage: python figures/real_traces_curves.py [results/traces] [docs/figures]
"""
import sys
from pathlib import Path

import polars as pl

from fastsim.figures import _style as S


@S.themed
def main(src="results/traces", dst="docs/figures"):
    t = pl.read_parquet(Path(src) / "traces.parquet")
    kl = sorted(t["kl_coef"].unique())[0]
    sizes = sorted(t["n_comparisons"].unique())
    pick = [sizes[0], sizes[-1]]
    fig, axes = S.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    for ax, n in zip(axes, pick):
        sub = t.filter((pl.col("n_comparisons") == n) & (pl.col("kl_coef") == kl)).sort("step")
        for i, ((job,), g) in enumerate(sub.group_by(["job_id"], maintain_order=True)):
            c = f"C{i}"
            ax.plot(g["step"], g["truth_gold"], color=c, lw=2, label="gold (exact)" if i == 0 else None)
            ax.plot(g["step"], g["score"], color=c, lw=0, marker=".", ms=5,
                    label="gold, observed (finite sample)" if i == 0 else None)
            ax.plot(g["step"], g["truth_proxy"], color=c, ls="--", lw=1, label="proxy reward" if i == 0 else None)
        ax.set_title(f"proxy trained on {n} comparisons (KL coef {kl:g})")
        ax.set_xlabel("policy-gradient step")
    axes[0].set_ylabel("reward")
    S.legend_outside(axes[-1], axes[0], fontsize=8)
    fig.tight_layout()
    S.save(fig, dst, "real_traces_curves", dpi=130)
    print(f"wrote {Path(dst)}/real_traces_curves.png/.pdf")


if __name__ == "__main__":
    main(*sys.argv[1:])
