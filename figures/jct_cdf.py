"""JCT distribution per stop policy (headline cell set), from the merged JCT histograms."""
import numpy as np
import polars as pl

from fastsim.figures import _style as S

NEEDS = ("headline",)
PLOTS = ()  # one cell per policy
POLICIES = ("none", "evalstop", "stop_at", "loss_plateau", "oracle")


@S.themed
def draw(sources, out, formats):
    h = S.sweep_table(sources["headline"] / "jct_hist.parquet")
    fig, axes = S.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    for ax, (group, title) in zip(axes, (("all", "All jobs"), ("rlhf", "RLHF jobs"))):
        for p in POLICIES:
            rows = h.filter((pl.col("policy_name") == p) & (pl.col("group") == group)).sort("bin")
            if rows.height == 0:
                continue
            cdf = np.cumsum(rows["count"].to_numpy()) / rows["count"].sum()
            edges = np.minimum(rows["bin_hi_h"].to_numpy(), 1e4)
            ax.step(edges, cdf, where="post", color=S.PALETTE[p], label=S.policy_label(p, rows))
        ax.set_xscale("log")
        ax.set_xlabel("job completion time (h)")
        ax.set_title(f"{title}, {S.scheduler_label(h)}")
    axes[0].set_ylabel("fraction of jobs")
    S.legend_outside(axes[-1], axes[0], fontsize=8)
    S.footnote(fig, sources, "headline", what="JCT histograms pooled over all jobs of")
    fig.tight_layout()
    return S.save(fig, out, "jct_cdf", formats)


if __name__ == "__main__":
    S.main(draw, NEEDS, None, PLOTS)
