"""The k trade-off: precision, recall, stop recall, wasted compute and mean JCT vs k (95% CI bands)."""
import polars as pl

from fastsim.figures import _style as S

NEEDS = ("k_sweep",)
PLOTS = ("k",)  # a cell per value of these (and of policy): one cell each
BASELINE = "none"  # its changes are against no stop policy (skipped otherwise)
# the columns it reads from its sweep's table (checked by `fastsim figures`)
READS = {"summary.parquet": ("policy_name", "metric", "k", "mean", "lo", "hi", "n")}
PANELS = (("precision", "Precision (%)"), ("recall", "Recall (%)"),
          ("stop_recall", "Stop recall (%): GPUs freed"),
          ("wasted_gpu_h_change", "Wasted compute change (%)"),
          ("jct_mean_h_change", "Mean JCT change (%)"))


@S.themed
def draw(sources, out, formats):
    df = S.summary(sources, "k_sweep").filter(pl.col("policy_name") == "evalstop")
    fig, axes = S.subplots(1, 5, figsize=(16, 3.2), sharex=True)
    widths = []
    for ax, (m, title) in zip(axes, PANELS):
        rows = S.metric(df, m).sort("k")
        width = S.band(ax, rows["k"], rows, "EvalStop", S.PALETTE["evalstop"])
        if not m.endswith("_change"):  # rates, in points; a change is relative
            widths.append(width)
        ax.axvline(2, ls=":", color="0.5", lw=1)
        ax.set_title(title)
        ax.set_xlabel("k (consecutive declines)")
        ax.set_xticks(rows["k"].to_list())
        if m in ("precision", "recall"):  # a rate axis spans at least 10 points
            # None without an EvalStop row (100 * None was a TypeError), NaN if none triggered
            S.rate_axis(ax, (100 * rows["lo"]).min(), (100 * rows["hi"]).max())
    S.footnote(fig, sources, "k_sweep", what=S.shaded(widths, " of the rates"))
    fig.tight_layout()
    return S.save(fig, out, "k_tradeoff", formats)


if __name__ == "__main__":
    S.main(draw, NEEDS, BASELINE, PLOTS)
