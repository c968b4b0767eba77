"""Precision, recall, stop recall and FPR vs evaluation noise sigma, with 95% CI bands (noise sweep)."""
import polars as pl

from fastsim.figures import _style as S
from fastsim.sweep.scoring import ROWS_BY_KEY

NEEDS = ("noise",)
PLOTS = ("sigma",)  # a cell per value of these (and of policy): one cell each
POLICIES = ("evalstop", "stop_at", "loss_plateau")
# the columns it reads from its sweep's table (checked by `fastsim figures`)
READS = {"summary.parquet": ("policy_name", "metric", "sigma", "mean", "lo", "hi", "n")}


@S.themed
def draw(sources, out, formats):
    df = S.summary(sources, "noise").filter(pl.col("policy_name").is_in(POLICIES))
    fig, axes = S.subplots(1, 4, figsize=(14, 3.4), sharex=True)
    widths = []
    for ax, (m, title) in zip(axes, (("precision", "Precision"), ("recall", "Recall"),
                                     ("stop_recall", "Stop recall (GPUs freed)"),
                                     ("fpr", "False-positive rate"))):
        for p in POLICIES:
            rows = S.metric(df, m).filter(pl.col("policy_name") == p).sort("sigma")
            widths.append(S.band(ax, rows["sigma"], rows, S.policy_label(p, rows), S.PALETTE[p]))
        ax.set_title(title)
        ax.set_xlabel("evaluation noise $\\sigma$")
        ax.set_ylabel("%")
        ax.set_ylim(-2, 102)
    bound = ROWS_BY_KEY["noise_bound"]  # the paper's number, declared once
    S.paper_line(axes[0], 100 * bound.paper, 0.0,
                 f"paper: {bound.paper_text} for sigma <= {bound.over[1]:g}", until=bound.over[1])
    S.legend_outside(axes[-1], axes[0], fontsize=8)
    S.footnote(fig, sources, "noise", what=S.shaded(widths))
    fig.tight_layout()
    return S.save(fig, out, "noise_sweep", formats)


if __name__ == "__main__":
    S.main(draw, NEEDS, None, PLOTS)
