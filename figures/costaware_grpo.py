"""GRPO held-out accuracy vs training tokens, uniform vs cost-aware, 95% CI bands over seeds.

Reads ``costaware_grpo.curves.parquet`` (``fastsim costaware grpo --out DIR``) and, if
present, ``costaware_grpo_sweep.curves.parquet``; never calls kernels.
Usage: ``python THIS RESULTS [OUT]``.
"""
from pathlib import Path

import polars as pl

from fastsim.figures import _style as S

ARMS = ("uniform", "cost_aware", "cost_only", "advantage_only", "nonzero_uniform")
_CURVES = ("arm", "eval", "tokens_mean", "accuracy_mean", "accuracy_lo", "accuracy_hi",
           "n_seeds")
# the tables this script reads and their columns it uses (checked by `costaware figures`)
READS = {"costaware_grpo.curves.parquet": _CURVES,
         "costaware_grpo_sweep.curves.parquet": _CURVES + ("grpo_lam", "grpo_len_sigma")}


def _panel(ax, df, title):
    colors = dict(zip(ARMS, S.sns.color_palette("colorblind", len(ARMS))))
    for arm in [a for a in ARMS if a in set(df["arm"].to_list())]:
        d = df.filter(pl.col("arm") == arm).sort("eval")
        x = d["tokens_mean"].to_numpy() / 1e6
        ax.plot(x, d["accuracy_mean"].to_numpy(), color=colors[arm], label=S.STRATEGY_NAMES[arm])
        ax.fill_between(x, d["accuracy_lo"].to_numpy(), d["accuracy_hi"].to_numpy(),
                        color=colors[arm], alpha=0.2, lw=0)
    peak = df.filter(pl.col("arm") == "uniform")["accuracy_mean"].max()
    if peak is not None:
        ax.axhline(peak, color=colors["uniform"], ls=":", lw=0.8, label="uniform's peak")
    ax.set_title(title, fontsize=9)


def _seeds(df) -> str:
    return f"n = {int(df['n_seeds'].min())} seeds"


@S.themed
def main(results, out):
    results = Path(results)
    written = []
    src = results / "costaware_grpo.curves.parquet"
    if src.exists():
        df = S.table(src)
        fig, ax = S.subplots(figsize=(5.2, 3.4))
        _panel(ax, df, "GRPO on the toy reasoning task")
        ax.set_xlabel("training tokens (millions, mean over seeds)")
        ax.set_ylabel("held-out accuracy")
        S.legend_outside(ax, fontsize=8)
        S.note(fig, f"costaware grpo: means with 95% CI bands over {_seeds(df)}")
        fig.tight_layout()
        written += S.save(fig, out, "costaware_grpo")
    src = results / "costaware_grpo_sweep.curves.parquet"
    if src.exists():
        df = S.table(src)
        lams = sorted(df["grpo_lam"].unique().to_list())
        sigmas = sorted(df["grpo_len_sigma"].unique().to_list())
        fig, axes = S.subplots(len(sigmas), len(lams), figsize=(3.2 * len(lams) + 2.0,
                                                                2.5 * len(sigmas)),
                               squeeze=False, sharex="row", sharey=True)
        for r, s in enumerate(sigmas):
            for c, lam in enumerate(lams):
                ax = axes[r, c]
                sub = df.filter((pl.col("grpo_lam") == lam) & (pl.col("grpo_len_sigma") == s))
                _panel(ax, sub, f"λ = {lam:g}, length σ = {s:g}")
                if r == len(sigmas) - 1:
                    ax.set_xlabel("training tokens (millions)")
                if c == 0:
                    ax.set_ylabel("held-out accuracy")
        S.legend_outside(axes[0, -1], fontsize=8)
        S.note(fig, "costaware_grpo_sweep: λ = uniform mixing weight, σ = lognormal spread of "
                    f"response lengths; means with 95% CI bands over {_seeds(df)} per point")
        fig.tight_layout()
        written += S.save(fig, out, "costaware_grpo_sweep")
    return written


if __name__ == "__main__":
    S.cli(main)
