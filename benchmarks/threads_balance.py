"""How evenly ``simulate``'s threads share the work, in counts that a loaded machine
disturbs less than a wall-time ratio: each thread's CPU time (``time.thread_time``) summed
over its calls of the one-pass kernel (``kernels.pipeline.PIPELINES``, which
``run_pipeline`` hands chunks of rows), their imbalance ``max / mean`` with 2 threads, and
the serial share of ``simulate`` (1 thread: CPU time outside the kernel / all), and the
kernel's CPU time summed over both threads against its CPU time on one (what running
beside another busy core costs the same work: shared caches, memory, the host).  Median
over runs with seeds ``1..R``; the implied 2/1 ratio is
``1 / (s + (1 - s) * imbalance / 2)``, and with that CPU cost
``1 / (s + (1 - s) * imbalance * inflation / 2)``.

    python benchmarks/threads_balance.py [clusters] [runs] [schedulers]

Threads that take chunks as they finish share the work by what the OS gives each of
them, so on a loaded machine the imbalance measures the machine as much as the split.
"""
import os
import statistics
import sys
import threading
import time

import numba

import fastsim.api as api
import fastsim.kernels.pipeline as kernels_pipeline
from fastsim.bench import _config

N = int(sys.argv[1]) if len(sys.argv) > 1 else 100
R = int(sys.argv[2]) if len(sys.argv) > 2 else 15
SCHEDULERS = (sys.argv[3] if len(sys.argv) > 3 else "srtf_est,tiresias").split(",")


busy = {}  # CPU seconds in the kernel, per thread


def timed(kernel):
    def timed_kernel(*args):
        cpu0 = time.thread_time()
        kernel(*args)
        ident = threading.get_ident()
        busy[ident] = busy.get(ident, 0.0) + time.thread_time() - cpu0
    return timed_kernel


kernels_pipeline.PIPELINES = tuple(timed(k) for k in kernels_pipeline.PIPELINES)
print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
for s in SCHEDULERS:
    cfg = _config(s)
    for threads in (2, 1):
        numba.set_num_threads(threads)
        api.simulate(cfg, N, seed=1)
    imbalance, serial, inflation = [], [], []
    for r in range(R):
        numba.set_num_threads(2)
        busy.clear()
        api.simulate(cfg, N, seed=1 + r)
        per_thread = sorted(busy.values())[-2:]
        imbalance.append(max(per_thread) / (sum(per_thread) / 2))
        two = sum(busy.values())
        numba.set_num_threads(1)
        busy.clear()
        cpu0 = time.process_time()
        api.simulate(cfg, N, seed=1 + r)
        serial.append(1 - sum(busy.values()) / (time.process_time() - cpu0))
        inflation.append(two / sum(busy.values()))
    mi, ms = statistics.median(imbalance), statistics.median(serial)
    mf = statistics.median(inflation)
    print(f"{s:10s} {N} clusters, {R} runs: kernel imbalance max/mean median {mi:.3f} "
          f"(max {max(imbalance):.3f}); serial share {ms:.3f}; kernel CPU with 2 threads / "
          f"with 1 median {mf:.3f}; implied 2/1 {1 / (ms + (1 - ms) * mi / 2):.3f}, "
          f"{1 / (ms + (1 - ms) * mi * mf / 2):.3f} with that CPU", flush=True)
numba.set_num_threads(1)
