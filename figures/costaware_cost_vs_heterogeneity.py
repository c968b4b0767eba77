"""Cost to reach eps per sampling strategy vs cost heterogeneity, with 95% CI bars.

Reads ``costaware_sgd.summary.parquet`` (``fastsim costaware sweep
sweeps/costaware_sgd.toml``); never calls kernels.  Usage: ``python THIS RESULTS [OUT]``.
"""
from pathlib import Path

import polars as pl
import seaborn as sns

from fastsim.figures import _style as S

ORDER = ["uniform", "gradient_norm", "cost_only", "optimal"]


@S.themed
def main(results, out):
    src = Path(results) / "costaware_sgd.summary.parquet"
    if not src.exists():
        return []
    df = pl.read_parquet(src).filter(pl.col("strategy").is_in(ORDER))
    g = sns.FacetGrid(df.to_pandas(), row="problem_kind", col="problem_cost_corr",
                      hue="strategy", hue_order=ORDER, sharey=False, height=2.4, aspect=1.2,
                      margin_titles=True)
    for (kind, corr), ax in g.axes_dict.items():
        sub = df.filter((pl.col("problem_kind") == kind) & (pl.col("problem_cost_corr") == corr))
        for i, s in enumerate(ORDER):
            for step, ls in (("convex", "-"), ("strongly_convex", "--")):
                d = sub.filter((pl.col("strategy") == s) & (pl.col("sgd_step") == step)) \
                    .sort("problem_cost_sigma")
                if d.height == 0:
                    continue
                x = d["problem_cost_sigma"].to_numpy()
                m = d["cost_units_mean"].to_numpy()
                ax.plot(x, m, ls, color=f"C{i}", marker="o", ms=3,
                        label=f"{s} ({step})")
                ax.fill_between(x, d["cost_units_lo"].to_numpy(), d["cost_units_hi"].to_numpy(),
                                color=f"C{i}", alpha=0.15, lw=0)
        ax.set_yscale("log")
    g.set_axis_labels("cost heterogeneity (lognormal sigma of c_i)", "cost to eps (cost units)")
    g.axes.flat[0].legend(fontsize=6, ncol=1)
    g.figure.suptitle("Cost-aware SGD: cost to reach eps (solid: convex steps, dashed: "
                      "strongly convex)", y=1.02)
    return S.save(g.figure, out, "costaware_cost_vs_heterogeneity", bbox_inches="tight", dpi=150)


if __name__ == "__main__":
    S.cli(main)
