"""J(p)/J(p*) per strategy (predicted) next to the simulated cost ratio over optimal.

Reads ``costaware_sgd.summary.parquet``; never calls kernels.
Usage: ``python THIS RESULTS [OUT]``.  It draws uncorrelated costs (``cost_corr = 0``): a
table without them is skipped, and says so.  A point with no simulated ratio (a run of
the strategy or of optimal missed eps, or optimal was not run there) is not drawn, and
its panel names the strategies it left out, each with how many of its pairs of runs with
optimal there lost a run that missed eps, at how many points (as the cost figure counts
its runs), or at how many points optimal was not run.
"""
from pathlib import Path

import polars as pl
from matplotlib.lines import Line2D

from fastsim.figures import _style as S

ORDER = ["uniform", "gradient_norm", "cost_only"]
# the tables this script reads and their columns it uses (checked by `costaware figures`)
READS = {"costaware_sgd.summary.parquet": (
    "strategy", "sgd_step", "problem_kind", "problem_cost_corr", "problem_cost_sigma",
    "predicted_ratio", "simulated_ratio", "simulated_ratio_lo", "simulated_ratio_hi",
    "n_pairs", "n")}


def _panel(ax, d: pl.DataFrame, color) -> None:
    d = d.sort("problem_cost_sigma")
    x = d["problem_cost_sigma"].to_numpy()
    ratio = d["simulated_ratio"].to_numpy()
    ax.plot(x, d["predicted_ratio"].to_numpy(), ":", color=color, marker="s", ms=3)
    ax.errorbar(x, ratio, yerr=[ratio - d["simulated_ratio_lo"].to_numpy(),
                                d["simulated_ratio_hi"].to_numpy() - ratio],
                fmt="-o", color=color, ms=3, capsize=2)


def _missed(ax, cell: pl.DataFrame) -> None:
    """Name, in the panel, each strategy whose point has no simulated ratio, with how many
    of its pairs with optimal lost a run that missed eps (summarize_sgd pools no ratio
    over the pairs that reached it), at how many points, or at how many optimal was not
    run (``optimal_ran``): the names alone read the same for one pair at one point as
    for every one, and said "a run missed eps" where optimal had not run."""
    gaps = cell.filter(~pl.col("simulated_ratio").is_finite())
    missed = []
    for s in ORDER:
        d = gaps.filter(pl.col("strategy") == s)
        name = S.STRATEGY_NAMES[s].split(" (")[0]
        lost, alone = d.filter(pl.col("optimal_ran")), d.filter(~pl.col("optimal_ran"))
        if lost.height:
            k, pairs = int((lost["n"] - lost["n_pairs"]).sum()), int(lost["n"].sum())
            missed.append(f"{name}: {k} of {pairs} pairs had a run miss eps, {S.at_points(lost.height)}")
        if alone.height:
            missed.append(f"{name}: optimal not run, {S.at_points(alone.height)}")
    S.not_drawn_note(ax, "(no simulated ratio)", missed, top=True)


@S.themed
def main(results, out):
    src = Path(results) / "costaware_sgd.summary.parquet"
    if not src.exists():
        return []
    df = _uncorrelated_points(S.table(src))
    if df.height == 0:
        # a table of correlated costs only, or of optimal sampling only, has no point this
        # figure draws: it was matplotlib's ValueError ("Number of rows must be a positive
        # integer, not 0"), after the figures before it were written
        print(f"skipped {Path(out) / 'costaware_ratios'}: {src} has no row with "
              f"problem_cost_corr = 0 of {', '.join(ORDER)} (the figure draws uncorrelated "
              "costs against optimal sampling)")
        return []
    kinds = df["problem_kind"].unique(maintain_order=True).to_list()
    steps = df["sgd_step"].unique(maintain_order=True).to_list()
    colors = dict(zip(["uniform", "gradient_norm", "cost_only", "optimal"],
                      S.sns.color_palette("colorblind", 4)))
    fig, axes = S.subplots(len(kinds), len(steps), figsize=(3.8 * len(steps) + 2.4,
                                                            2.8 * len(kinds)),
                           squeeze=False, sharex=True)
    _draw_panels(axes, df, kinds, steps, colors)
    _legend(axes, colors)
    # over the points drawn: a left-out point's n_pairs counts only its pairs that both
    # reached eps, and read as the n of every point
    drawn = df.filter(pl.col("simulated_ratio").is_finite())
    over = (f"over n >= {int(drawn['n_pairs'].min())} paired replications per point"
            if drawn.height else "(none drawn: each panel says why)")
    S.note(fig, "costaware_sgd, no cost-gradient correlation: simulated ratio = pooled paired "
                f"ratio, bootstrap 95% CI {over}")
    fig.suptitle("Predicted vs simulated cost over optimal sampling")
    fig.tight_layout()
    return S.save(fig, out, "costaware_ratios")


def _uncorrelated_points(table: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``ORDER``'s strategies with uncorrelated costs, each marked
    ``optimal_ran`` if optimal sampling ran at its point."""
    table = table.filter(pl.col("problem_cost_corr") == 0.0)
    point = ["sgd_step", "problem_kind", "problem_cost_sigma"]
    optimal = table.filter(pl.col("strategy") == "optimal").select(point).unique()
    return table.filter(pl.col("strategy").is_in(ORDER)).join(
        optimal.with_columns(optimal_ran=pl.lit(True)), on=point, how="left",
        maintain_order="left").with_columns(pl.col("optimal_ran").fill_null(False))


def _draw_panels(axes, df: pl.DataFrame, kinds: list, steps: list, colors: dict) -> None:
    """One panel per problem kind (rows) and SGD step (columns): each strategy's ratios."""
    for r, kind in enumerate(kinds):
        for c, step in enumerate(steps):
            ax = axes[r, c]
            cell = df.filter((pl.col("problem_kind") == kind) & (pl.col("sgd_step") == step))
            for s in ORDER:
                _panel(ax, cell.filter(pl.col("strategy") == s), colors[s])
            _missed(ax, cell)
            ax.axhline(1.0, color="0.2", lw=0.8)
            ax.set_yscale("log")
            S.plain_log_ticks(ax)
            ax.set_title(f"{S.PROBLEM_NAMES[kind]}, {S.PROBLEM_NAMES[step]}", fontsize=9)
            if r == len(kinds) - 1:
                ax.set_xlabel("cost heterogeneity (lognormal σ of $c_i$)")
            if c == 0:
                ax.set_ylabel("cost / cost of optimal p*\n(log scale)")


def _legend(axes, colors: dict) -> None:
    """The strategies' colours and the marks' meanings, right of the top row."""
    handles = [Line2D([], [], color=colors[s], lw=6, label=S.STRATEGY_NAMES[s]) for s in ORDER]
    handles += [Line2D([], [], color="0.3", ls=":", marker="s", ms=3,
                       label="predicted J(p)/J(p*)"),
                Line2D([], [], color="0.3", ls="-", marker="o", ms=3,
                       label="simulated (95% CI)"),
                Line2D([], [], color="0.2", lw=0.8, label="optimal p* (= 1)")]
    axes[0, -1].legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                       borderaxespad=0.0, fontsize=8)


if __name__ == "__main__":
    S.cli(main)
