"""Scratch: bench's rlhf_heavy per-cluster stage times (1 thread), min over repetitions.

    python benchmarks/hot.py [n_clusters] [reps] [stages...]   # stages: gen reuse fifo sim:fifo ...

``gen``: generation into fresh arrays (page faults included); ``reuse``: into one reused
buffer, as ``simulate`` does from its second call on; a scheduler's name: its engine
alone; ``stops``: the stop decisions alone, ``account``: the metrics stage alone (both
under ``srtf_est``, through the public functions, so with their input checks: about 2
and 3.6 us of the readings on the bench's cluster); ``sim:`` and a scheduler's name: ``simulate`` end to end, as the
bench's target rows time it; ``points:`` and a scheduler's name: no timing, the
engine's scheduling points per cluster and how many jobs run and are active (arrived,
not ended) on average over a cluster's span (held time, and end minus arrival, summed
over jobs, over the span).
"""
import sys

import numba

from fastsim.api import account, decide_stops, run_engine, simulate
from fastsim.bench import _best, _config, _us
from fastsim.workload import generate_workload

numba.set_num_threads(1)
C = int(sys.argv[1]) if len(sys.argv) > 1 else 400
R = int(sys.argv[2]) if len(sys.argv) > 2 else 15
WHICH = sys.argv[3:] or ["gen", "fifo", "srtf_est", "tiresias", "loss_aware"]


def best(f):
    """Per-cluster microseconds: the bench's minimum over R calls after a warm-up."""
    return _us(_best(f, R), C)


cfg = _config()
w = generate_workload(cfg.workload, C, seed=1)
for s in WHICH:
    if s == "gen":
        print(f"gen        {best(lambda: generate_workload(cfg.workload, C, seed=1)):7.1f} us")
        continue
    if s == "reuse":
        buf = generate_workload(cfg.workload, C, seed=1)
        print(f"reuse      {best(lambda: generate_workload(cfg.workload, C, seed=1, out=buf)):7.1f} us")
        continue
    if s in ("stops", "account"):
        c = _config("srtf_est")
        d = decide_stops(c, w)
        o = run_engine(c, w, d)
        f = (lambda: decide_stops(c, w)) if s == "stops" else (lambda: account(c, w, d, o))
        print(f"{s:10s} {best(f):7.1f} us")
        continue
    if s.startswith("sim:"):
        c = _config(s[4:])
        print(f"{s:10s} {best(lambda: simulate(c, C, seed=1)):7.1f} us")
        continue
    if s.startswith("points:"):
        c = _config(s[7:])
        o = run_engine(c, w, decide_stops(c, w))
        span = o.end_h.max(axis=1) - w.arrival_h.min(axis=1)
        print(f"{s:10s} {o.n_points.mean():7.1f} points, {(o.held_h.sum(axis=1) / span).mean():.1f}"
              f" running, {((o.end_h - w.arrival_h).sum(axis=1) / span).mean():.1f} active")
        continue
    c = _config(s)
    d = decide_stops(c, w)
    print(f"{s:10s} {best(lambda: run_engine(c, w, d)):7.1f} us")
