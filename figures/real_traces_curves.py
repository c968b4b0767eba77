"""Gold and proxy along toy RLHF runs: data-poor proxies over-optimise, data-rich do not.

Reads ``traces.parquet`` from ``fastsim traces toy-rlhf``; never calls kernels.
Usage: ``python THIS RESULTS [OUT]`` (RESULTS holds ``traces.parquet``).
"""
from pathlib import Path

import polars as pl
from matplotlib.lines import Line2D

from fastsim.figures import _style as S

# the tables this script reads and their columns it uses (checked by `docs-figures`)
READS = {"traces.parquet": ("job_id", "step", "score", "kl_coef", "n_comparisons", "truth_gold",
                            "truth_proxy", "truth_hacking")}


@S.themed
def main(results, out):
    src = Path(results) / "traces.parquet"
    if not src.exists():
        return []
    t = S.table(src)
    kl = sorted(t["kl_coef"].unique())[0]
    sizes = sorted(t["n_comparisons"].unique())
    pick = sorted({sizes[0], sizes[-1]})
    fig, axes = S.subplots(1, len(pick), figsize=(4.6 * len(pick) + 2.0, 3.6), sharey=True,
                           squeeze=False)
    colours = S.sns.color_palette("colorblind", 10)
    for ax, n in zip(axes[0], pick):
        sub = t.filter((pl.col("n_comparisons") == n) & (pl.col("kl_coef") == kl)).sort("step")
        runs = sub.group_by(["job_id"], maintain_order=True)
        n_runs = n_hacking = 0
        for i, ((_,), g) in enumerate(runs):
            c = colours[i % len(colours)]
            ax.plot(g["step"], g["truth_gold"], color=c, lw=2)
            ax.plot(g["step"], g["score"], color=c, lw=0, marker=".", ms=5)
            ax.plot(g["step"], g["truth_proxy"], color=c, ls="--", lw=1)
            n_runs, n_hacking = n_runs + 1, n_hacking + bool(g["truth_hacking"][0])
        ax.set_title(f"proxy RM from {n} comparisons, KL coef {kl:g}\n"
                     f"({n_runs} seeds, {n_hacking} over-optimise)", fontsize=9)
        ax.set_xlabel("policy-gradient step")
    axes[0, 0].set_ylabel("reward")
    handles = [Line2D([], [], color="0.3", lw=2, label="gold reward (exact)"),
               Line2D([], [], color="0.3", lw=0, marker=".", ms=6,
                      label="gold, observed (finite sample)"),
               Line2D([], [], color="0.3", ls="--", lw=1, label="proxy reward"),
               Line2D([], [], lw=0, label="one colour per seed")]
    axes[0, -1].legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                       borderaxespad=0.0, fontsize=8)
    fig.tight_layout()
    return S.save(fig, out, "real_traces_curves")


if __name__ == "__main__":
    S.cli(main)
