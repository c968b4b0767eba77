"""Headline comparison of stop policies under SRTF-Est: detection (recall beside stop recall
and the share of triggers at completion) and paired changes (three waste readings)."""
import numpy as np
import polars as pl

from fastsim.figures import _style as S

NEEDS = ("headline",)
PLOTS = ()  # one cell per policy
BASELINE = "none"  # its changes are against no stop policy (skipped otherwise)
POLICIES = ("evalstop", "stop_at", "loss_plateau", "deprioritize", "oracle")
# the columns it reads from its sweep's table (checked by `fastsim figures`)
READS = {"summary.parquet": ("policy_name", "metric", "mean", "lo", "hi", "n", "scheduler")}


def _present(df, metrics):
    """The policies with a row for every metric, in the fixed order: the bars' slots are
    laid out for these only, so a missing policy leaves no gap and no bar off its tick."""
    return [p for p in POLICIES
            if all(S.metric(df, m).filter(pl.col("policy_name") == p).height for m in metrics)]


def _bars(ax, df, metrics, names, sign=1.0):
    present = _present(df, metrics)
    width = 0.8 / max(len(present), 1)
    x = np.arange(len(metrics))
    for i, p in enumerate(present):
        r = [S.metric(df, m).filter(pl.col("policy_name") == p).row(0, named=True)
             for m in metrics]
        mean = np.array([sign * v["mean"] for v in r]) * 100
        lo = np.array([min(sign * v["lo"], sign * v["hi"]) for v in r]) * 100
        hi = np.array([max(sign * v["lo"], sign * v["hi"]) for v in r]) * 100
        # an estimate that does not exist (precision of a policy that never fired) has no
        # bar and says "n/a": drawn as 0 it read as a precision of 0%
        at = x + (i - len(present) / 2 + 0.5) * width
        ax.bar(at, mean, width,
               yerr=[np.nan_to_num(mean - lo), np.nan_to_num(hi - mean)], capsize=2,
               color=S.PALETTE[p], label=S.policy_label(p, df.filter(pl.col("policy_name") == p)))
        for xi in at[~np.isfinite(mean)]:
            ax.annotate("n/a", (xi, 0), xytext=(0, 2), textcoords="offset points", ha="center",
                        va="bottom", fontsize=6, rotation=90, color=S.PALETTE[p])
    ax.set_xticks(x, names)


@S.themed
def draw(sources, out, formats):
    df = S.summary(sources, "headline")
    fig, axes = S.subplots(1, 2, figsize=(13, 3.8))
    _bars(axes[0], df, ("precision", "recall", "stop_recall", "completion_share", "fpr"),
          ("precision", "recall", "stop\nrecall", "at\ncompletion", "FPR"))
    axes[0].set_ylabel("%")
    axes[0].set_title("Detection (RLHF jobs)")
    _bars(axes[1], df, ("jct_mean_h_change", "wasted_gpu_h_change", "hacking_gpu_h_change",
                        "gpu_h_total_change", "jct_p95_h_change"),
          ("mean JCT", "waste\n(post-peak)", "hacking\nGPU-h", "all\nGPU-h", "p95 JCT"))
    axes[1].set_ylabel(f"% change vs {S.scheduler_label(df)} alone")
    axes[1].set_title("Paired change vs no stop policy")
    axes[1].axhline(0, color="0.3", lw=0.8)
    S.legend_outside(axes[-1], axes[0], fontsize=7)
    S.footnote(fig, sources, "headline")
    fig.tight_layout()
    return S.save(fig, out, "headline", formats)


if __name__ == "__main__":
    S.main(draw, NEEDS, BASELINE, PLOTS)
