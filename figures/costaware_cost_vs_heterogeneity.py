"""Cost to reach eps per sampling strategy vs cost heterogeneity, with 95% CI bands.

Reads ``costaware_sgd.summary.parquet`` (``fastsim costaware sweep
sweeps/costaware_sgd.toml``); never calls kernels.  Usage: ``python THIS RESULTS [OUT]``.
One panel per problem (rows) and cost-gradient correlation (columns); solid lines are
the convex step rule, dashed the strongly convex one.  A point where a run missed eps has
no mean cost (a mean over the runs that reached it would drop the slowest): it is not
drawn, and its panel names the strategies it left out, each with how many of its runs
there missed eps, at how many points.
"""
from pathlib import Path

import polars as pl
from matplotlib.lines import Line2D

from fastsim.figures import _style as S

ORDER = ["uniform", "gradient_norm", "cost_only", "optimal"]
STEPS = (("convex", "-"), ("strongly_convex", "--"))
# the tables this script reads and their columns it uses (checked by `costaware figures`)
READS = {"costaware_sgd.summary.parquet": (
    "strategy", "sgd_step", "problem_kind", "problem_cost_corr", "problem_cost_sigma",
    "cost_units_mean", "cost_units_lo", "cost_units_hi", "n", "reached_frac")}


def _panel(ax, sub: pl.DataFrame, colors) -> None:
    """The cost curves of one panel, or a note in it when no run reached eps (every cost
    is NaN: a log axis of no positive value was a matplotlib ValueError)."""
    cost = sub["cost_units_mean"]
    if not (cost.is_finite() & (cost > 0)).any():  # polars orders NaN above every number
        ax.text(0.5, 0.5, "no run reached eps\n(no cost to plot)", ha="center", va="center",
                transform=ax.transAxes, fontsize=9, color="0.4")
        ax.set_yticks([])
        return
    for s in ORDER:
        for step, ls in STEPS:
            d = sub.filter((pl.col("strategy") == s) & (pl.col("sgd_step") == step)) \
                .sort("problem_cost_sigma")
            if d.height == 0:
                continue
            x = d["problem_cost_sigma"].to_numpy()
            ax.plot(x, d["cost_units_mean"].to_numpy(), ls, color=colors[s], marker="o", ms=3)
            ax.fill_between(x, d["cost_units_lo"].to_numpy(), d["cost_units_hi"].to_numpy(),
                            color=colors[s], alpha=0.15, lw=0)
    ax.set_yscale("log")
    S.plain_log_ticks(ax)  # after drawing, once the limits are known
    # a point's mean is NaN once a run there missed eps (summarize_sgd gives no mean over
    # the runs that reached it): such a strategy's line lost those points, or vanished,
    # and the panel looked as if the strategy had not been run; "a run" read the same whether
    # one of its runs or every one missed, so each says how many
    gaps = sub.filter(pl.col("strategy").is_in(ORDER) & ~pl.col("cost_units_mean").is_finite())
    missed = []
    for s in ORDER:
        d = gaps.filter(pl.col("strategy") == s)
        if d.height:
            k = round(float((d["n"] * (1.0 - d["reached_frac"])).sum()))
            missed.append(f"{S.STRATEGY_NAMES[s].split(' (')[0]}: {k} of {d['n'].sum()} runs "
                          f"missed it, {S.at_points(d.height)}")
    S.not_drawn_note(ax, "where a run missed eps", missed)


def _legend_handles(colors, steps):
    handles = [Line2D([], [], color=colors[s], marker="o", ms=3, label=S.STRATEGY_NAMES[s])
               for s in ORDER]
    handles += [Line2D([], [], color="0.3", ls=ls, label=S.PROBLEM_NAMES[step])
                for step, ls in STEPS if step in steps]
    return handles


@S.themed
def main(results, out):
    src = Path(results) / "costaware_sgd.summary.parquet"
    if not src.exists():
        return []
    df = S.table(src).filter(pl.col("strategy").is_in(ORDER))
    kinds = df["problem_kind"].unique(maintain_order=True).to_list()
    corrs = sorted(df["problem_cost_corr"].unique().to_list())
    colors = dict(zip(ORDER, S.sns.color_palette("colorblind", len(ORDER))))
    fig, axes = S.subplots(len(kinds), len(corrs), figsize=(3.4 * len(corrs) + 2.2,
                                                            2.7 * len(kinds)),
                           squeeze=False, sharex=True)
    for r, kind in enumerate(kinds):
        for c, corr in enumerate(corrs):
            ax = axes[r, c]
            _panel(ax, df.filter((pl.col("problem_kind") == kind)
                                 & (pl.col("problem_cost_corr") == corr)), colors)
            ax.set_title(f"{S.PROBLEM_NAMES[kind]}, corr(log c, log G) = {corr:g}", fontsize=9)
            if r == len(kinds) - 1:
                ax.set_xlabel("cost heterogeneity\n(lognormal σ of the costs $c_i$)")
            if c == 0:
                ax.set_ylabel("cost to reach eps\n(cost units, log scale)")
    steps = set(df["sgd_step"].to_list())
    axes[0, -1].legend(handles=_legend_handles(colors, steps), loc="upper left",
                       bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize=8)
    n = int(df["sgd_replications"].min()) if "sgd_replications" in df.columns else None
    S.note(fig, f"costaware_sgd: mean cost with 95% CI bands over n = {n} SGD replications "
                "per point" if n else "costaware_sgd: mean cost with 95% CI bands")
    fig.suptitle("Cost-aware SGD: cost to reach eps per sampling strategy")
    fig.tight_layout()
    return S.save(fig, out, "costaware_cost_vs_heterogeneity")


if __name__ == "__main__":
    S.cli(main)
