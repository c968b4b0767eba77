"""GRPO held-out accuracy vs training tokens, uniform vs cost-aware, 95% CI bands over seeds.

Reads ``costaware_grpo.curves.parquet`` (``fastsim costaware grpo --out DIR``) and, if
present, ``costaware_grpo_sweep.curves.parquet``; never calls kernels.
Usage: ``python THIS RESULTS [OUT]``.
"""
from pathlib import Path

import polars as pl

from fastsim.figures import _style as S

ARMS = (("uniform", "C0"), ("cost_aware", "C3"))


def _panel(ax, df, title):
    for arm, color in ARMS:
        d = df.filter(pl.col("arm") == arm).sort("eval")
        x = d["tokens_mean"].to_numpy() / 1e6
        ax.plot(x, d["accuracy_mean"].to_numpy(), color=color, label=arm.replace("_", "-"))
        ax.fill_between(x, d["accuracy_lo"].to_numpy(), d["accuracy_hi"].to_numpy(),
                        color=color, alpha=0.2, lw=0)
    peak = df.filter(pl.col("arm") == "uniform")["accuracy_mean"].max()
    ax.axhline(peak, color="C0", ls=":", lw=0.8)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("training tokens (millions, mean over seeds)")
    ax.set_ylabel("held-out accuracy")


@S.themed
def main(results, out):
    results = Path(results)
    written = []
    src = results / "costaware_grpo.curves.parquet"
    if src.exists():
        df = pl.read_parquet(src)
        fig, ax = S.subplots(figsize=(5, 3.4))
        _panel(ax, df, f"GRPO on the toy reasoning task ({df['n_seeds'].max()} seeds)")
        ax.legend()
        fig.tight_layout()
        written += S.save(fig, out, "costaware_grpo", dpi=150)
    src = results / "costaware_grpo_sweep.curves.parquet"
    if src.exists():
        df = pl.read_parquet(src)
        lams = sorted(df["grpo_lam"].unique().to_list())
        sigmas = sorted(df["grpo_len_sigma"].unique().to_list())
        fig, axes = S.subplots(len(sigmas), len(lams), figsize=(3.6 * len(lams),
                                 2.8 * len(sigmas)), squeeze=False)
        for r, s in enumerate(sigmas):
            for c, lam in enumerate(lams):
                sub = df.filter((pl.col("grpo_lam") == lam) & (pl.col("grpo_len_sigma") == s))
                _panel(axes[r, c], sub, f"lam={lam}, length sigma={s}")
        S.legend_outside(axes[0, -1], axes[0, 0])
        fig.tight_layout()
        written += S.save(fig, out, "costaware_grpo_sweep", dpi=150)
    return written


if __name__ == "__main__":
    S.cli(main)
