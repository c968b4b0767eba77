"""How evenly ``simulate``'s threads share the work, in counts that a loaded machine
disturbs less than a wall-time ratio: inside the one kernel call (``pipeline_nb``), each of
the 2 threads' CPU time (``/proc/<tid>/schedstat``; run with ``OMP_WAIT_POLICY=passive``
so that a thread with no work left sleeps instead of spinning), their imbalance
``max / mean``, and the serial share of ``simulate`` (1 thread: CPU time outside the
kernel call / all).  Median over runs with seeds ``1..R``; the implied 2/1 ratio is
``1 / (s + (1 - s) * imbalance / 2)``.

    OMP_WAIT_POLICY=passive python benchmarks/threads_balance.py [clusters] [runs] [schedulers]

With the clusters claimed one at a time the CPU-time imbalance follows what the OS gives
each thread, not the split; with a static split it is the split's own imbalance.
"""
import os
import statistics
import sys
import time

import numba

import fastsim.api as api
from fastsim.bench import _config

if os.environ.get("OMP_WAIT_POLICY") != "passive":
    raise SystemExit("run with OMP_WAIT_POLICY=passive (an idle thread would spin)")
N = int(sys.argv[1]) if len(sys.argv) > 1 else 100
R = int(sys.argv[2]) if len(sys.argv) > 2 else 15
SCHEDULERS = (sys.argv[3] if len(sys.argv) > 3 else "srtf_est,tiresias").split(",")


def thread_cpu_ns() -> dict:
    out = {}
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/schedstat") as f:
            out[tid] = int(f.read().split()[0])
    return out


kernel_call = api.pipeline_nb
seen = {}


def timed_kernel(*args):
    before, cpu0 = thread_cpu_ns(), time.process_time()
    kernel_call(*args)
    after = thread_cpu_ns()
    seen["threads"] = sorted(after[k] - before.get(k, 0) for k in after)[-2:]
    seen["cpu"] = time.process_time() - cpu0


api.pipeline_nb = timed_kernel
print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
for s in SCHEDULERS:
    cfg = _config(s)
    for threads in (2, 1):
        numba.set_num_threads(threads)
        api.simulate(cfg, N, seed=1)
    imbalance, serial = [], []
    for r in range(R):
        numba.set_num_threads(2)
        api.simulate(cfg, N, seed=1 + r)
        busy = seen["threads"]
        imbalance.append(max(busy) / (sum(busy) / 2))
        numba.set_num_threads(1)
        cpu0 = time.process_time()
        api.simulate(cfg, N, seed=1 + r)
        serial.append(1 - seen["cpu"] / (time.process_time() - cpu0))
    mi, ms = statistics.median(imbalance), statistics.median(serial)
    print(f"{s:10s} {N} clusters, {R} runs: kernel imbalance max/mean median {mi:.3f} "
          f"(max {max(imbalance):.3f}); serial share {ms:.3f}; implied 2/1 "
          f"{1 / (ms + (1 - ms) * mi / 2):.3f}", flush=True)
numba.set_num_threads(1)
