"""JCT distribution per stop policy (headline cell set), from the merged JCT histograms,
with each CDF's pointwise 95% interval over clusters (shaded; ``merge_histograms``)."""
import numpy as np
import polars as pl

from fastsim.figures import _style as S

NEEDS = ("headline",)
PLOTS = ()  # one cell per policy
POLICIES = ("none", "evalstop", "stop_at", "loss_plateau", "oracle")
# the columns it reads from its sweep's table (checked by `fastsim figures`)
READS = {"jct_hist.parquet": ("policy_name", "group", "bin", "count", "bin_hi_h", "cdf",
                              "cdf_lo", "cdf_hi", "scheduler", "policy")}


@S.themed
def draw(sources, out, formats):
    h = S.sweep_table(sources["headline"] / "jct_hist.parquet")
    fig, axes = S.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    widest = 0.0
    for ax, (group, title) in zip(axes, (("all", "All jobs"), ("rlhf", "RLHF jobs"))):
        for p in POLICIES:
            rows = h.filter((pl.col("policy_name") == p) & (pl.col("group") == group)).sort("bin")
            filled = np.flatnonzero(rows["count"].to_numpy())
            if filled.size == 0:
                continue
            rows = rows[int(filled[0]):int(filled[-1]) + 1]  # the bins the CDF rises in
            edges = np.minimum(rows["bin_hi_h"].to_numpy(), 1e4)
            lo, hi = rows["cdf_lo"].to_numpy(), rows["cdf_hi"].to_numpy()
            widest = max(widest, float(np.max(hi - lo)))
            ax.fill_between(edges, lo, hi, step="post", color=S.PALETTE[p], alpha=0.3, lw=0)
            ax.step(edges, rows["cdf"].to_numpy(), where="post", color=S.PALETTE[p],
                    label=S.policy_label(p, rows))
        ax.set_xscale("log")
        ax.set_xlabel("job completion time (h)")
        ax.set_title(f"{title}, {S.scheduler_label(h)}")
    axes[0].set_ylabel("fraction of jobs")
    S.legend_outside(axes[-1], axes[0], fontsize=8)
    S.footnote(fig, sources, "headline", what="JCT pooled over all jobs, shaded: pointwise "
               f"95% intervals (at most {100 * widest:.2g} pp wide) over")
    fig.tight_layout()
    return S.save(fig, out, "jct_cdf", formats)


if __name__ == "__main__":
    S.main(draw, NEEDS, None, PLOTS)
