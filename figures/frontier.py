"""The fidelity frontier (sweeps/frontier.toml): over the model family the paper table may
calibrate (evaluation cadence, hacking peak position, noise), EvalStop's wasted-compute
change against its recall, and each point's distance to the paper's detection rows and
system rows in units of their pre-registered tolerances (<= 1: within tolerance; at the
defaults three of the five rows are the ones fitted there, which the reproduction shows as
fitted, never as matches, so the figure says "within tolerance")."""
import numpy as np
from matplotlib.patches import Rectangle
import polars as pl

from fastsim.figures import _style as S
from fastsim import defaults as D
from fastsim.sweep.frontier import AXES, frontier_table
from fastsim.sweep.scoring import ROWS_BY_KEY

NEEDS = ("frontier",)
PLOTS = AXES  # one EvalStop cell per family point (skipped otherwise)
BASELINE = "none"  # its changes are against no stop policy (skipped otherwise)
FLOOR = 0.02  # distances below this are drawn at it (log axes)
# the columns it reads from its sweep's table (checked by `fastsim figures`); an axis of the
# family the sweep does not vary has no column, and n_evals and sigma are always there
READS = {"summary.parquet": ("policy_name", "metric", "n_evals", "sigma", "mean", "lo", "hi",
                             "n")}


def _is_default(r) -> bool:
    return (r["n_evals"] == D.N_EVALS and abs(r["sigma"] - D.SIGMA) < 1e-9
            and r["ustar_hacking"] == f"{D.USTAR_HACKING[0]:g}/{D.USTAR_HACKING[1]:g}")


def _axes(table: pl.DataFrame) -> list[str]:
    """The family's axes ``table`` has a column for, as ``frontier_table`` takes them: a
    sweep not varying one (ustar_hacking) has none, and selecting it was a polars error."""
    return [a for a in AXES if a in table.columns]


def _intervals(summary: pl.DataFrame) -> pl.DataFrame:
    """Per family point, the 95% interval of EvalStop's waste change and recall."""
    ev = summary.filter(pl.col("policy_name") == "evalstop")
    parts = [ev.filter(pl.col("metric") == metric).select(
                 *_axes(ev), pl.col("lo").alias(f"{key}_lo"), pl.col("hi").alias(f"{key}_hi"))
             for key, metric in (("waste", "wasted_gpu_h_change"), ("recall", "recall"))]
    return parts[0].join(parts[1], on=_axes(ev), how="left")


def best_title(table: pl.DataFrame) -> str:
    """The right panel's title: the most rows any point has within tolerance (each scored
    as the reproduction scores a row, ``frontier_table``'s ``rows_matched``)."""
    return f"Best point: {int(table['rows_matched'].max())} of 5 rows within tolerance"


@S.themed
def draw(sources, out, formats):
    df = frontier_table(S.summary(sources, "frontier"))
    cadences = sorted(df["n_evals"].unique().to_list())
    colors = dict(zip(cadences, S.sns.color_palette("viridis", len(cadences))))
    fig, axes = S.subplots(1, 2, figsize=(12, 4.4))
    ax = axes[0]
    w, r = ROWS_BY_KEY["waste"], ROWS_BY_KEY["recall"]
    ww, rw = w.tol.width(w.paper), r.tol.width(r.paper)
    ax.add_patch(Rectangle((100 * (w.paper - ww), 100 * (r.paper - rw)), 200 * ww,
                               200 * rw, color="0.85", zorder=0, label="paper ± tolerance"))
    ci = _intervals(S.summary(sources, "frontier"))
    for n in cadences:
        g = df.filter(pl.col("n_evals") == n).join(ci, on=_axes(ci), how="left")
        ax.errorbar(100 * g["waste"], 100 * g["recall"], fmt="o", ms=4, color=colors[n],
                    xerr=100 * np.abs([g["waste"] - g["waste_lo"], g["waste_hi"] - g["waste"]]),
                    yerr=100 * np.abs([g["recall"] - g["recall_lo"], g["recall_hi"] - g["recall"]]),
                    elinewidth=0.6, label=f"{n} evaluations per job")
    ax.plot(100 * w.paper, 100 * r.paper, "k*", ms=10, label="paper")
    for row in df.iter_rows(named=True):
        if _is_default(row):
            ax.plot(100 * row["waste"], 100 * row["recall"], "r*", ms=12, label="defaults")
    ax.set_xlabel("wasted compute change, post-peak (%)")
    ax.set_ylabel("EvalStop recall (%)")
    ax.set_title("Waste cut vs recall over the model family")
    S.legend_outside(ax, fontsize=7)
    ax = axes[1]
    x = np.maximum(df["system_distance"].to_numpy(), FLOOR)
    y = np.maximum(df["detection_distance"].to_numpy(), FLOOR)
    ax.add_patch(Rectangle((FLOOR / 2, FLOOR / 2), 1 - FLOOR / 2, 1 - FLOOR / 2,
                               color="0.85", zorder=0, label="all five rows within tolerance"))
    for n in cadences:
        m = (df["n_evals"] == n).to_numpy()
        ax.scatter(x[m], y[m], s=18, color=colors[n], label=f"{n} evaluations per job")
    front = np.flatnonzero(df["pareto"].to_numpy())
    front = front[np.argsort(x[front])]
    ax.step(x[front], y[front], where="post", color="k", lw=1, label="frontier")
    for i, row in enumerate(df.iter_rows(named=True)):
        if _is_default(row):
            ax.plot(x[i], y[i], "r*", ms=12, label="defaults")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("system distance: max(JCT, waste) miss / tolerance")
    ax.set_ylabel("detection distance: max(P, R, FPR) miss / tolerance")
    ax.set_title(best_title(df))
    S.legend_outside(ax, fontsize=7)
    S.footnote(fig, sources, "frontier", what="left: means with 95% CIs; right: distances "
               "of the means;")
    fig.tight_layout()
    return S.save(fig, out, "frontier", formats)


if __name__ == "__main__":
    S.main(draw, NEEDS, BASELINE, PLOTS)
