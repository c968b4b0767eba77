"""Scratch: per-cluster time of each stage, 1 thread, min over repetitions.

    python benchmarks/stages.py [n_clusters] [reps]
"""
import sys

import numba

from fastsim.api import decide_stops, run_engine
from fastsim.bench import _best, _us
from fastsim.config import SimConfig
from fastsim.workload import generate_workload

numba.set_num_threads(1)
C = int(sys.argv[1]) if len(sys.argv) > 1 else 200
R = int(sys.argv[2]) if len(sys.argv) > 2 else 7


def best(f):
    """Per-cluster microseconds: the bench's minimum over R calls after a warm-up."""
    return _us(_best(f, R), C)


cfg = SimConfig.from_specs("fifo", "evalstop:k=2", n_evals=10)
print(f"generate      {best(lambda: generate_workload(cfg.workload, C, seed=1)):8.1f} us/cluster")
w = generate_workload(cfg.workload, C, seed=1)
for pol in ("evalstop:k=2",):
    for s in ("fifo", "sjf_est", "srtf_est", "loss_aware", "tiresias"):
        cfg = SimConfig.from_specs(s, pol, n_evals=10)
        d = decide_stops(cfg, w)
        print(f"{s:12s} {pol:13s} {best(lambda: run_engine(cfg, w, d)):8.1f} us/cluster")
print(f"decide_stops  {best(lambda: decide_stops(cfg, w)):8.1f} us/cluster")
