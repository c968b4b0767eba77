"""GRPO held-out accuracy vs training tokens, uniform vs cost-aware, 95% CI bands over seeds.

Reads ``costaware_grpo.curves.parquet`` (``fastsim costaware grpo --out DIR``) and, if
present, ``costaware_grpo_sweep.curves.parquet``; never calls kernels.
Usage: ``python THIS RESULTS [OUT]``.
"""
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import polars as pl  # noqa: E402
import seaborn as sns  # noqa: E402

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


def main(results, out):
    results, out = Path(results), Path(out)
    written = []
    sns.set_theme(style="whitegrid", context="paper")
    src = results / "costaware_grpo.curves.parquet"
    if src.exists():
        out.mkdir(parents=True, exist_ok=True)
        df = pl.read_parquet(src)
        fig, ax = plt.subplots(figsize=(5, 3.4))
        _panel(ax, df, f"GRPO on the toy reasoning task ({df['n_seeds'].max()} seeds)")
        ax.legend()
        fig.tight_layout()
        for ext in ("png", "pdf"):
            path = out / f"costaware_grpo.{ext}"
            fig.savefig(path, dpi=150)
            written.append(path)
        plt.close(fig)
    src = results / "costaware_grpo_sweep.curves.parquet"
    if src.exists():
        out.mkdir(parents=True, exist_ok=True)
        df = pl.read_parquet(src)
        lams = sorted(df["grpo_lam"].unique().to_list())
        sigmas = sorted(df["grpo_len_sigma"].unique().to_list())
        fig, axes = plt.subplots(len(sigmas), len(lams), figsize=(3.6 * len(lams),
                                 2.8 * len(sigmas)), squeeze=False)
        for r, s in enumerate(sigmas):
            for c, lam in enumerate(lams):
                sub = df.filter((pl.col("grpo_lam") == lam) & (pl.col("grpo_len_sigma") == s))
                _panel(axes[r, c], sub, f"lam={lam}, length sigma={s}")
        axes[0, 0].legend()
        fig.tight_layout()
        for ext in ("png", "pdf"):
            path = out / f"costaware_grpo_sweep.{ext}"
            fig.savefig(path, dpi=150)
            written.append(path)
        plt.close(fig)
    return written


if __name__ == "__main__":
    res = sys.argv[1]
    for p in main(res, sys.argv[2] if len(sys.argv) > 2 else Path(res) / "figures"):
        print(p)
