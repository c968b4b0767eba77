"""J(p)/J(p*) per strategy (predicted) next to the simulated cost ratio over optimal.

Reads ``costaware_sgd.summary.parquet``; never calls kernels.
Usage: ``python THIS RESULTS [OUT]``.
"""
from pathlib import Path

import polars as pl

from fastsim.figures import _style as S

ORDER = ["uniform", "gradient_norm", "cost_only"]


@S.themed
def main(results, out):
    src = Path(results) / "costaware_sgd.summary.parquet"
    if not src.exists():
        return []
    df = pl.read_parquet(src).filter(pl.col("strategy").is_in(ORDER)
                                     & (pl.col("problem_cost_corr") == 0.0))
    kinds = df["problem_kind"].unique(maintain_order=True).to_list()
    steps = df["sgd_step"].unique(maintain_order=True).to_list()
    fig, axes = S.subplots(len(kinds), len(steps), figsize=(4.2 * len(steps), 3.0 * len(kinds)),
                             squeeze=False, sharex=True)
    for r, kind in enumerate(kinds):
        for c, step in enumerate(steps):
            ax = axes[r, c]
            for i, s in enumerate(ORDER):
                d = df.filter((pl.col("problem_kind") == kind) & (pl.col("sgd_step") == step)
                              & (pl.col("strategy") == s)).sort("problem_cost_sigma")
                x = d["problem_cost_sigma"].to_numpy()
                ax.plot(x, d["predicted_ratio"].to_numpy(), ":", color=f"C{i}", marker="s", ms=3,
                        label=f"{s}: J(p)/J(p*)")
                ax.errorbar(x, d["simulated_ratio"].to_numpy(),
                            yerr=[d["simulated_ratio"].to_numpy() - d["simulated_ratio_lo"].to_numpy(),
                                  d["simulated_ratio_hi"].to_numpy() - d["simulated_ratio"].to_numpy()],
                            fmt="-o", color=f"C{i}", ms=3, capsize=2, label=f"{s}: simulated")
            ax.axhline(1.0, color="k", lw=0.8)
            ax.set_yscale("log")
            ax.set_title(f"{kind}, {step} steps", fontsize=9)
            ax.set_xlabel("cost heterogeneity (lognormal sigma)")
            ax.set_ylabel("cost / cost of p*")
    S.legend_outside(axes[0, -1], axes[0, 0], fontsize=6)
    fig.suptitle("Predicted (dotted) vs simulated (solid, 95% CI) cost over optimal sampling",
                 y=1.0)
    fig.tight_layout()
    return S.save(fig, out, "costaware_ratios", bbox_inches="tight", dpi=150)


if __name__ == "__main__":
    S.cli(main)
