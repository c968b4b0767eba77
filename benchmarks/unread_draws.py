"""What leaving unread scores undrawn saves: ``simulate`` of one cell with the evaluation
scores drawn as the run decides (only if its decisions read them) and forced drawn, as
every run drew them before (loss readings are drawn as decided in both), interleaved in
one process (the order alternates every round), one thread, CPU time of each call,
minimum over the rounds.

    python benchmarks/unread_draws.py srtf_est none [--rounds 30] [--clusters 400]

Results are the same either way (``benchmarks/snapshot.py compare --simulate``): no result
column holds a score.
"""
import argparse
import time

import numba

import fastsim.api as api
from fastsim.config import SimConfig

ap = argparse.ArgumentParser()
ap.add_argument("scheduler")
ap.add_argument("policy")
ap.add_argument("--rounds", type=int, default=30)
ap.add_argument("--clusters", type=int, default=400)
a = ap.parse_args()
numba.set_num_threads(1)
run_pipeline = api.run_pipeline
forced = [False]


def drawing(scheduler, n, generate, only, draw_score, draw_loss, *rest):
    return run_pipeline(scheduler, n, generate, only, draw_score or forced[0], draw_loss, *rest)


api.run_pipeline = drawing
cfg = SimConfig.from_specs(a.scheduler, a.policy)
for forced[0] in (False, True):
    api.simulate(cfg, a.clusters, seed=1)  # compiled, buffers allocated
best = {False: float("inf"), True: float("inf")}
for i in range(a.rounds):
    for forced[0] in ((False, True) if i % 2 else (True, False)):
        t = time.process_time()
        api.simulate(cfg, a.clusters, seed=1 + i)
        best[forced[0]] = min(best[forced[0]], time.process_time() - t)
us = {k: v / a.clusters * 1e6 for k, v in best.items()}
print(f"{a.scheduler} + {a.policy}: scores drawn {us[True]:.1f} us per cluster, drawn only if "
      f"read {us[False]:.1f} us ({us[False] / us[True]:.3f} x)")
