"""Scratch A/B timing of engine variants (files defining ``cluster_1c_nb``), 1 thread,
interleaved, min of N; also checks that outputs are identical to the first variant.

    FASTSIM_NO_CACHE=1 python benchmarks/engine_ab.py A.py B.py ... [--reps N]
"""
import argparse
import importlib.util
import inspect
import time

import numpy as np
from numba import njit

from fastsim.api import decide_stops
from fastsim.config import SimConfig
from fastsim.workload import generate_workload


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def serial_driver(one):
    @njit(cache=False)
    def run(*a):
        for c in range(a[5].shape[0]):
            one(c, *a)
    return run


ap = argparse.ArgumentParser()
ap.add_argument("files", nargs="+")
ap.add_argument("--reps", type=int, default=15)
ap.add_argument("--clusters", type=int, default=100)
ap.add_argument("--schedulers", default="fifo,sjf_est,srtf_est,loss_aware,tiresias")
ap.add_argument("--policy", default="evalstop:k=2")
a = ap.parse_args()
engines = [load(f, f"eng{i}").cluster_1c_nb for i, f in enumerate(a.files)]
runs = [serial_driver(e) for e in engines]
# Outputs after the 13 inputs (and ``c``): older engines have no ``n_points``.
n_outputs = [len(inspect.signature(e.py_func).parameters) - 14 for e in engines]
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
    outs, times = [], []
    for r, n_out in zip(runs, n_outputs):
        o = (np.full(sh, np.nan), np.full(sh, np.nan), np.zeros(sh), np.zeros(sh), np.zeros(sh, np.int32),
             np.zeros((C, 0), np.int64), np.zeros((C, 0)), np.zeros((C, 0)), np.zeros(C, np.int64),
             np.zeros(C, np.int64))[:n_out]
        args = (cfg.scheduler.code, cfg.scheduler.backfill, np.asarray(cfg.scheduler.thresholds_gpu_h, dtype=np.float64),
                float(cfg.workload.preempt_overhead_h), cfg.workload.gpus, w.gpus, w.arrival_h, w.t_est_h, w.loss,
                w.duration_h, es, ds, af) + o
        r(*args)
        outs.append(o)
        times.append([])
    for _ in range(a.reps):
        for r, o, ts in zip(runs, outs, times):
            args = (cfg.scheduler.code, cfg.scheduler.backfill, np.asarray(cfg.scheduler.thresholds_gpu_h, dtype=np.float64),
                    float(cfg.workload.preempt_overhead_h), cfg.workload.gpus, w.gpus, w.arrival_h, w.t_est_h, w.loss,
                    w.duration_h, es, ds, af) + o
            t0 = time.perf_counter()
            r(*args)
            ts.append(time.perf_counter() - t0)
    same = [all(np.array_equal(x, y, equal_nan=True) for x, y in zip(outs[0][:5], o[:5])) for o in outs]
    cells = "  ".join(f"{min(ts) / C * 1e6:7.1f}us{'' if ok else ' DIFF'}" for ts, ok in zip(times, same))
    print(f"{s:11s} {cells}")
