"""A/B timing of engine variants: copies of ``kernels/engine.py`` (each defining the driver
``cluster_nb`` with the flat signature), 1 thread, interleaved (the order alternates every
round), CPU time of the process per call; also checks that every variant's outputs are
identical to the first's.

    FASTSIM_NO_CACHE=1 python benchmarks/engine_ab.py A.py B.py ... [--reps N]

Each file is loaded as a module of ``fastsim.kernels``, so its relative imports resolve
to the installed kernels.  Per scheduler it prints each variant's minimum (us per
cluster), the ratio of minima to the first variant and the median of the per-round
ratios, the steadier figure on a loaded machine.
"""
import argparse
import statistics
import time

import numba
import numpy as np

from fastsim.api import decide_stops
from fastsim.config import SimConfig
from fastsim.workload import generate_workload

from _engine_copy import load_engine_copy


ap = argparse.ArgumentParser()
ap.add_argument("files", nargs="+")
ap.add_argument("--reps", type=int, default=15)
ap.add_argument("--clusters", type=int, default=100)
ap.add_argument("--schedulers", default="fifo,sjf_est,srtf_est,loss_aware,tiresias")
ap.add_argument("--policy", default="evalstop:k=2")
a = ap.parse_args()
numba.set_num_threads(1)
runs = [load_engine_copy(f, f"_engine_ab{i}").cluster_nb for i, f in enumerate(a.files)]
C = a.clusters
for s in a.schedulers.split(","):
    cfg = SimConfig.from_specs(s, a.policy)
    w = generate_workload(cfg.workload, C, seed=1)
    d = decide_stops(cfg, w)
    E = w.n_evals
    frac = d.trigger_eval / E
    es = np.where(d.stopped, w.duration_h * frac, w.duration_h)
    ds = np.where(d.demoted & (d.trigger_eval < E), w.duration_h * frac, np.inf)
    af = np.where(w.hacking, w.duration_h * (w.peak_eval / E), np.inf)
    sh = (C, w.n_jobs)
    inputs = (cfg.scheduler.code, cfg.scheduler.backfill,
              np.asarray(cfg.scheduler.thresholds_gpu_h, dtype=np.float64),
              float(cfg.workload.preempt_overhead_h), cfg.workload.gpus, w.gpus, w.arrival_h,
              w.t_est_h, w.loss, w.duration_h, es, ds, af)
    outs, times = [], []
    for r in runs:
        o = (np.full(sh, np.nan), np.full(sh, np.nan), np.zeros(sh), np.zeros(sh),
             np.zeros(sh, np.int32), np.zeros((C, 0), np.int64), np.zeros((C, 0)),
             np.zeros((C, 0)), np.zeros(C, np.int64), np.zeros(C, np.int64))
        r(*inputs, *o)
        outs.append(o)
        times.append([])
    for rep in range(a.reps):
        order = range(len(runs)) if rep % 2 == 0 else reversed(range(len(runs)))
        for k in order:
            t0 = time.process_time()
            runs[k](*inputs, *outs[k])
            times[k].append(time.process_time() - t0)
    same = [all(np.array_equal(x, y, equal_nan=True) for x, y in zip(outs[0], o)) for o in outs]
    cells = []
    for ts, ok in zip(times, same):
        cell = f"{min(ts) / C * 1e6:7.1f}us{'' if ok else ' DIFF'}"
        if ts is not times[0]:
            paired = statistics.median(x / y for x, y in zip(ts, times[0]))
            cell += f" (min {min(ts) / min(times[0]):.3f}x, median {paired:.3f}x)"
        cells.append(cell)
    print(f"{s:11s} {'  '.join(cells)}", flush=True)
