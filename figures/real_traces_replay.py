"""Stop policies replayed on the toy RLHF traces, beside the simulator at the traces' noise.

Reads ``replay_summary.parquet`` (``fastsim replay ... --summary-out``) and
``simulator.parquet`` (``fastsim traces compare-sim ... --out``); never calls kernels.
Usage: ``python THIS RESULTS [OUT]``.
"""
from pathlib import Path

import numpy as np
import polars as pl

from fastsim.figures import _style as S

METRICS = (("precision", "Precision"), ("recall", "Recall"), ("fpr", "False-positive rate"))
_COLUMNS = ("policy", *(f"{m}{end}" for m, _ in METRICS for end in ("", "_lo", "_hi")))
# the tables this script reads and their columns it uses (checked by `docs-figures`)
READS = {"replay_summary.parquet": _COLUMNS, "simulator.parquet": _COLUMNS}


def _label(table_label: str) -> str:
    """``evalstop(k=3)[scope=all]`` -> "EvalStop (k=3)": the registry's figure label with
    the parameters the row ran with."""
    spec = table_label.split("[")[0]
    return S.policy_label(spec.split("(")[0].strip(), pl.DataFrame({"policy": [spec]}))


@S.themed
def main(results, out):
    results = Path(results)
    if not (results / "replay_summary.parquet").exists() or not (results / "simulator.parquet").exists():
        return []
    rep = S.table(results / "replay_summary.parquet")
    sim = S.table(results / "simulator.parquet")
    # a policy is matched by its spec: the replay's label carries a [scope=...] suffix
    spec = {p: p.split("[")[0] for p in rep["policy"].to_list() + sim["policy"].to_list()}
    pols = [p for p in rep["policy"].to_list()
            if spec[p] in {spec[q] for q in sim["policy"].to_list()}]
    fig, axes = S.subplots(1, len(METRICS), figsize=(13, 3.6), sharey=True)
    x = np.arange(len(pols))
    arms = ((rep, "toy-RLHF traces (replayed)"), (sim, "simulator at the traces' noise"))
    colours = S.sns.color_palette("colorblind", 2)
    for ax, (m, title) in zip(axes, METRICS):
        for off, (df, name), colour in zip((-0.2, 0.2), arms, colours):
            r = {spec[row["policy"]]: row for row in df.iter_rows(named=True)}
            mean = np.array([r[spec[p]][m] for p in pols], dtype=float) * 100
            lo = np.array([r[spec[p]][f"{m}_lo"] for p in pols], dtype=float) * 100
            hi = np.array([r[spec[p]][f"{m}_hi"] for p in pols], dtype=float) * 100
            ax.bar(x + off, np.nan_to_num(mean), 0.4, label=name, color=colour,
                   yerr=np.nan_to_num([mean - lo, hi - mean]), capsize=2)
        ax.set_xticks(x, [_label(p) for p in pols], rotation=30, ha="right", fontsize=8)
        ax.set_title(title)
        ax.set_ylim(0, 105)
    axes[0].set_ylabel("%")
    S.legend_outside(axes[-1], axes[0], fontsize=8)
    n_runs = int(rep["n_jobs"].max()) if "n_jobs" in rep.columns else 0
    n_clusters = int(sim["n_clusters"].max()) if "n_clusters" in sim.columns else 0
    # a summary of a log with seeds resamples them (the runs of a seed share its draws)
    traces = (f"n = {n_runs} runs of {int(rep['n_seeds'].max())} seeds (seeds resampled)"
              if "n_seeds" in rep.columns else f"n = {n_runs} runs (resampled)")
    S.note(fig, f"95% intervals: traces over {traces}; simulator over n = {n_clusters} clusters")
    fig.tight_layout()
    return S.save(fig, out, "real_traces_replay")


if __name__ == "__main__":
    S.cli(main)
