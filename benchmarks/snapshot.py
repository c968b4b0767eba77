"""Bit-exact snapshot of the engine's results, to check that optimisations change nothing.

    python benchmarks/snapshot.py save DIR      # write DIR/*.parquet and DIR/workload_*.npz
    python benchmarks/snapshot.py compare DIR   # recompute and compare with DIR, exactly
    python benchmarks/snapshot.py compare DIR --rtol 1e-12   # floats within rtol (+ rtol abs)
    python benchmarks/snapshot.py compare DIR --plain        # curve knobs off (MODEL.md 4)
    python benchmarks/snapshot.py compare DIR --simulate     # through simulate(), not run_workload

``--plain`` switches the trace-grounded curve knobs off (``fastsim.defaults.PLAIN_CURVES``)
in every workload: the plain model, which must stay bit-identical to a snapshot saved
before the knobs existed.

Covers every scheduler x every stop policy on two workloads: default clusters, and small
crowded clusters with a preemption overhead and hacking DPO jobs (both curve forms,
overhead accounting and many preemptions).  ``compare`` requires discrete columns and
float columns to be identical (NaN == NaN), or with ``--rtol R`` floats to agree within
``|a - b| <= R * max(|a|, |b|) + R`` (discrete columns stay exact); it prints the worst
relative float difference seen overall and for any column that fails, and exits non-zero
on a failure.  A column the code adds since the snapshot (a new metric) is listed under
its table as new, not compared; a column the snapshot has must still be there.
"""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import polars as pl

from fastsim.api import run_workload, simulate
from fastsim.defaults import PLAIN_CURVES
from fastsim.io import read_parquet_table, write_parquet
from fastsim.config import SimConfig
from fastsim.errors import InertSettingWarning
from fastsim.workload import generate_workload

# every scheduler runs the crowded workload's preemption overhead, on purpose: the
# non-preemptive ones must ignore it, which the snapshot checks
warnings.simplefilter("ignore", InertSettingWarning)

SCHEDULERS = ("fifo", "fifo:backfill", "sjf_est", "srtf_est", "loss_aware", "tiresias",
              "tiresias:thresholds=2/8/32")
POLICIES = ("none", "evalstop:k=2", "stop_at:f=0.65", "loss_plateau:w=2,tol=0.01",
            "deprioritize:k=2", "oracle", "evalstop:k=2,scope=all")
WORKLOADS = {
    "default": (dict(), 100, 7),
    "small": (dict(gpus=16, n_jobs=40, preempt_overhead_h=0.3, dpo_base_rate=0.3,
                   mix="mixed", load=1.2), 300, 11),
}
WORKLOAD_ARRAYS = ("job_type", "gpus", "arrival_h", "duration_h", "t_est_h", "hacking", "ustar",
                   "height", "tau", "loss0", "loss_inf", "loss_tau", "gold", "score", "loss",
                   "peak_eval")


def compute(extra=None, via_simulate=False):
    """Yield ``(name, frame or dict of arrays)`` for every snapshot item (``extra``:
    workload fields set in every workload; ``via_simulate``: each cell drawn by
    ``simulate`` itself, which generates the clusters in the same pass, instead of
    ``run_workload`` on the shared workload)."""
    for wname, (wkw, n_clusters, seed) in WORKLOADS.items():
        wkw = {**wkw, **(extra or {})}
        base = SimConfig.from_specs("fifo", "none", **wkw)
        w = generate_workload(base.workload, n_clusters, seed=seed)
        yield f"workload_{wname}", {k: getattr(w, k) for k in WORKLOAD_ARRAYS}
        jobs, clusters = [], []
        for s in SCHEDULERS:
            for p in POLICIES:
                cfg = SimConfig.from_specs(s, p, **wkw)
                r = (simulate(cfg, n_clusters, seed, keep_jobs=True) if via_simulate
                     else run_workload(cfg, w, keep_jobs=True))
                tag = [pl.lit(s).alias("scheduler"), pl.lit(p).alias("policy")]
                jobs.append(r.jobs.with_columns(tag))
                # the seed column says how the clusters were drawn, not what the engine
                # computed (null through run_workload): snapshots compare the engine's
                clusters.append(r.clusters.drop("seed").with_columns(tag))
        yield f"jobs_{wname}", pl.concat(jobs)
        yield f"clusters_{wname}", pl.concat(clusters)


RTOL = 0.0  # set by --rtol
WORST = {"rel": 0.0, "abs": 0.0, "where": "", "n": 0}  # largest float deviation seen


def _compare_arrays(name, a, b):
    """Comparison of two arrays (floats within RTOL); returns a list of problems."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return [f"{name}: dtype/shape {a.dtype}{a.shape} != {b.dtype}{b.shape}"]
    if a.dtype.kind == "f":
        same = (a == b) | (np.isnan(a) & np.isnan(b))
        if same.all():
            return []
        bad = ~same
        with np.errstate(divide="ignore", invalid="ignore"):
            diff = np.abs(a[bad] - b[bad])
            rel = diff / np.maximum(np.abs(a[bad]), np.abs(b[bad]))
        nan_mismatch = int(np.isnan(diff).sum())
        worst = float(np.nanmax(rel, initial=0.0))
        WORST["n"] += 1
        if worst > WORST["rel"]:
            WORST.update(rel=worst, abs=float(np.nanmax(diff, initial=0.0)), where=name)
        scale = np.maximum(np.abs(a[bad]), np.abs(b[bad]))
        outside = int((~(diff <= RTOL * scale + RTOL)).sum())  # NaN diff counts as outside
        if RTOL > 0.0 and outside == 0:
            return []
        return [f"{name}: {bad.sum()} differ ({outside} beyond rtol {RTOL:g}), max rel "
                f"{worst:.3e} (nan-mismatch {nan_mismatch})"]
    n = int((a != b).sum())
    return [f"{name}: {n} differ"] if n else []


def new_columns(old, new) -> list[str]:
    """The columns of frame ``new`` that the snapshot ``old`` predates (a new metric)."""
    return [] if isinstance(new, dict) else [c for c in new.columns if c not in old.columns]


def compare(old, new, name):
    """Problems of ``new`` against the snapshot ``old``: every column the snapshot has must
    be there, in the same order, and agree; a column it lacks (``new_columns``) is none."""
    if isinstance(new, dict):
        return sum((_compare_arrays(f"{name}.{k}", old[k], new[k]) for k in new), [])
    kept = [c for c in new.columns if c in old.columns]
    if kept != old.columns or old.height != new.height:
        return [f"{name}: columns/height differ"]
    problems = []
    for col in kept:
        a, b = old[col], new[col]
        if a.dtype in (pl.String, pl.Utf8):
            n = int((a != b).sum())
            if n:
                problems.append(f"{name}.{col}: {n} differ")
        else:
            problems += _compare_arrays(f"{name}.{col}", a.to_numpy(), b.to_numpy())
    return problems


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=("save", "compare"))
    ap.add_argument("dir", type=Path)
    ap.add_argument("--rtol", type=float, default=0.0,
                    help="compare: floats may differ by rtol relative + rtol absolute")
    ap.add_argument("--plain", action="store_true",
                    help="curve knobs off (fastsim.defaults.PLAIN_CURVES): the plain model")
    ap.add_argument("--simulate", action="store_true",
                    help="run each cell through simulate() (one-pass generation) instead of "
                    "run_workload() on the shared workload")
    a = ap.parse_args(argv)
    global RTOL
    RTOL = a.rtol
    a.dir.mkdir(parents=True, exist_ok=True)
    problems = []
    for name, item in compute(PLAIN_CURVES if a.plain else None, a.simulate):
        if a.action == "save":
            if isinstance(item, dict):
                np.savez(a.dir / f"{name}.npz", **item)
            else:
                write_parquet(item, a.dir / f"{name}.parquet")
            print(f"saved {name}")
            continue
        if isinstance(item, dict):
            with np.load(a.dir / f"{name}.npz") as z:
                old = {k: z[k] for k in z.files}
        else:
            old = read_parquet_table(a.dir / f"{name}.parquet", "a snapshot this script saved")
        before = WORST["n"]
        p = compare(old, item, name)
        exact = not p and WORST["n"] == before
        print(f"{name}: {'IDENTICAL' if exact else 'WITHIN RTOL' if not p else 'DIFFERENT'}")
        added = new_columns(old, item)
        if added:
            print(f"   new column{'s' if len(added) > 1 else ''}, not in the snapshot "
                  f"(not compared): {', '.join(added)}")
        problems += p
    for p in problems:
        print("  ", p)
    if a.action == "compare":
        print(f"max float deviation: rel {WORST['rel']:.3e} (abs {WORST['abs']:.3e}) in "
              f"{WORST['where'] or '-'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
