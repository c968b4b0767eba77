"""Stop policies replayed on the toy RLHF traces, beside the simulator at the traces' noise.

Reads ``replay_summary.parquet`` (``fastsim replay ... --summary-out``) and
``simulator.parquet`` (``fastsim traces compare-sim ... --out``).
Usage: python figures/real_traces_replay.py [results/traces] [docs/figures]
"""
import sys
from pathlib import Path

import numpy as np
import polars as pl

from fastsim.figures import _style as S


@S.themed
def main(src="results/traces", dst="docs/figures"):
    rep = pl.read_parquet(Path(src) / "replay_summary.parquet")
    sim = pl.read_parquet(Path(src) / "simulator.parquet")
    pols = [p for p in rep["policy"].to_list() if p in sim["policy"].to_list()]
    fig, axes = S.subplots(1, 3, figsize=(13, 3.8), sharey=True)
    x = np.arange(len(pols))
    for ax, m in zip(axes, ("precision", "recall", "fpr")):
        for off, (df, name) in zip((-0.2, 0.2), ((rep, "toy RLHF traces (replay)"), (sim, "simulator, matched sigma"))):
            r = {row["policy"]: row for row in df.iter_rows(named=True)}
            mean = np.array([r[p][m] for p in pols])
            lo = np.array([r[p][f"{m}_lo"] for p in pols])
            hi = np.array([r[p][f"{m}_hi"] for p in pols])
            ax.bar(x + off, mean, 0.4, label=name,
                   yerr=np.nan_to_num([mean - lo, hi - mean]), capsize=2)
        ax.set_xticks(x, [p.split("[")[0] for p in pols], rotation=35, ha="right", fontsize=7)
        ax.set_title(m.upper() if m == "fpr" else m)
        ax.set_ylim(0, 1.05)
    S.legend_outside(axes[-1], axes[0], fontsize=7)
    fig.tight_layout()
    S.save(fig, dst, "real_traces_replay", dpi=130)
    print(f"wrote {Path(dst)}/real_traces_replay.png/.pdf")


if __name__ == "__main__":
    main(*sys.argv[1:])
