"""Precision (and recall) vs the share of hacking RLHF jobs, with 95% CI bands."""
import polars as pl

from fastsim.figures import _style as S
from fastsim.sweep.scoring import ROWS_BY_KEY

NEEDS = ("base_rate",)
PLOTS = ("base_rate",)  # a cell per value of these (and of policy): one cell each
POLICIES = ("evalstop", "stop_at")
# the columns it reads from its sweep's table (checked by `fastsim figures`)
READS = {"summary.parquet": ("policy_name", "metric", "base_rate", "mean", "lo", "hi", "n")}


@S.themed
def draw(sources, out, formats):
    df = S.summary(sources, "base_rate").filter(pl.col("policy_name").is_in(POLICIES))
    fig, axes = S.subplots(1, 2, figsize=(8, 3.4), sharex=True)
    widths = []
    for ax, (m, title) in zip(axes, (("precision", "Precision"), ("recall", "Recall"))):
        for p in POLICIES:
            rows = S.metric(df, m).filter(pl.col("policy_name") == p).sort("base_rate")
            widths.append(S.band(ax, rows["base_rate"] * 100, rows, S.policy_label(p, rows),
                                 S.PALETTE[p]))
        ax.set_title(title)
        ax.set_xlabel("hacking RLHF jobs (%)")
        ax.set_ylabel("%")
        ax.set_ylim(0, 102)
    bound = ROWS_BY_KEY["base_rate_bound"]  # the paper's number, declared once
    S.paper_line(axes[0], 100 * bound.paper, 100 * bound.over[0],
                 f"paper: EvalStop {bound.paper_text}")
    S.legend_outside(axes[-1], fontsize=8)
    S.footnote(fig, sources, "base_rate", what=S.shaded(widths))
    fig.tight_layout()
    return S.save(fig, out, "base_rate", formats)


if __name__ == "__main__":
    S.main(draw, NEEDS, None, PLOTS)
