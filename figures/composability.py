"""EvalStop's mean-JCT gain and wasted-compute cut over each base scheduler (bars, 95% CIs)."""
import numpy as np
import polars as pl

from fastsim.figures import _style as S
from fastsim.sweep.scoring import ROWS_BY_KEY

NEEDS = ("composability",)
PLOTS = ("scheduler",)  # a cell per value of these (and of policy): one cell each
BASELINE = "none"  # its changes are against no stop policy (skipped otherwise)
# the columns it reads from its sweep's table (checked by `fastsim figures`)
READS = {"summary.parquet": ("policy_name", "metric", "scheduler", "mean", "lo", "hi", "n")}


@S.themed
def draw(sources, out, formats):
    df = S.summary(sources, "composability").filter(pl.col("policy_name") == "evalstop")
    found = df["scheduler"].unique().to_list()
    # known schedulers in their usual order, then any other one under its own name:
    # a scheduler in the results is never dropped for want of a display name
    order = ([s for s in S.SCHEDULER_NAMES if s in found]
             + sorted(s for s in found if s not in S.SCHEDULER_NAMES))
    fig, axes = S.subplots(1, 2, figsize=(10, 3.6))
    colors = S.sns.color_palette("colorblind", len(order))
    for ax, (m, title) in zip(axes, (("jct_mean_h_change", "Mean JCT gain with EvalStop"),
                                     ("wasted_gpu_h_change", "Wasted compute cut with EvalStop"))):
        rows = S.metric(df, m)
        r = [rows.filter(pl.col("scheduler") == s).row(0, named=True) for s in order]
        gain = np.array([-x["mean"] for x in r]) * 100
        err = np.array([[x["mean"] - x["lo"] for x in r], [x["hi"] - x["mean"] for x in r]]) * 100
        x = np.arange(len(order))
        ax.bar(x, gain, yerr=err[::-1], color=colors, capsize=4)
        ax.set_xticks(x, [S.SCHEDULER_NAMES.get(s, s) for s in order], rotation=30, ha="right")
        ax.set_ylabel("% (relative to the same scheduler alone)")
        ax.set_title(title)
        for xi, g in zip(x, gain):  # a gain with no estimate has no bar: "n/a", not "nan%"
            ok = np.isfinite(g)
            ax.annotate(f"{g:.1f}%" if ok else "n/a", (xi, g if ok else 0.0), xytext=(0, 3),
                        textcoords="offset points", ha="center", fontsize=8)
    paper = ROWS_BY_KEY["gain_range"]  # the paper's range, declared once
    axes[0].axhspan(*(100 * x for x in paper.paper), color="0.85", zorder=0,
                    label=f"paper range of JCT gains\n{paper.paper_text} (left panel)")
    S.legend_outside(axes[-1], axes[0], fontsize=8)
    S.footnote(fig, sources, "composability")
    fig.tight_layout()
    return S.save(fig, out, "composability", formats)


if __name__ == "__main__":
    S.main(draw, NEEDS, BASELINE, PLOTS)
