"""Throughput benchmark of the engine (prints ratios, asserts nothing).

Run ``fastsim bench`` (the same as ``python -m fastsim.bench``; about 40 s, most of it
the cold compile) or ``fastsim bench --quick`` (about 30 s; add ``--no-compile`` for about 5 s) from
the repository root.  Every time is the minimum over repetitions of
one call on a batch of clusters, divided by the batch size; on a shared machine the
minimum is the least noisy estimate of what the code costs.

The cluster is MODEL.md's default: ``rlhf_heavy``, 64 GPUs, 300 jobs, 10 evaluations
(pinned here, whatever ``fastsim.defaults`` says), scheduler ``srtf_est`` and
``evalstop:k=2`` unless a row says otherwise.

Examples
--------
>>> from fastsim.bench import main
>>> main(["--quick", "--no-compile"])  # doctest: +SKIP
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numba

from fastsim.api import decide_stops, run_engine, simulate
from fastsim.config import SimConfig
from fastsim.workload import generate_workload

SCHEDULERS = ("fifo", "srtf_est", "loss_aware", "tiresias")
POLICY = "evalstop:k=2"
CLUSTER = dict(mix="rlhf_heavy", gpus=64, n_jobs=300, n_evals=10)


def _config(scheduler: str = "srtf_est", **overrides) -> SimConfig:
    return SimConfig.from_specs(scheduler, POLICY, **{**CLUSTER, **overrides})


def _best(fn, reps: int) -> float:
    """Minimum wall time (s) of ``fn()`` over ``reps`` calls, after one warm-up call."""
    fn()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _us(seconds: float, n: int) -> float:
    return seconds / n * 1e6


def throughput(n_clusters: int, reps: int) -> dict:
    """Clusters per second of the whole pipeline (``simulate``) with 1 and 2 threads."""
    cfg = _config()
    best = {1: float("inf"), 2: float("inf")}
    for _ in range(reps):  # alternate, so that a busy spell on the machine hits both
        for threads in (1, 2):
            numba.set_num_threads(threads)
            best[threads] = min(best[threads], _best(lambda: simulate(cfg, n_clusters, seed=1), 1))
    numba.set_num_threads(1)
    return {k: n_clusters / v for k, v in best.items()}


def stages(n_clusters: int, reps: int) -> dict:
    """Per-cluster microseconds (1 thread) of generation, stop decisions and the engine."""
    numba.set_num_threads(1)
    cfg = _config()
    w = generate_workload(cfg.workload, n_clusters, seed=1)
    out = {"generate": _us(_best(lambda: generate_workload(cfg.workload, n_clusters, seed=1), reps),
                           n_clusters),
           "generate_reuse": _us(_best(lambda: generate_workload(cfg.workload, n_clusters, seed=1,
                                                                 out=w), reps), n_clusters),
           "decide_stops": _us(_best(lambda: decide_stops(cfg, w), reps), n_clusters)}
    for s in SCHEDULERS:
        c = _config(s)
        d = decide_stops(c, w)
        out[s] = _us(_best(lambda: run_engine(c, w, d), reps), n_clusters)
    return out


def reference_speedup(n_ref: int, engine_us: dict) -> dict | None:
    """Per-cluster seconds of the pure-Python reference (``tests.reference``), or None."""
    try:
        from tests.reference import reference_simulate, reference_workload
    except ImportError:
        return None
    cfg = _config()
    reference_workload(cfg.workload, 1, 0)  # first call loads the random primitive
    t_wl = t_sim = float("inf")
    for cluster in range(n_ref):
        t0 = time.perf_counter()
        jobs = reference_workload(cfg.workload, 1, cluster)
        t1 = time.perf_counter()
        reference_simulate(cfg, jobs)
        t2 = time.perf_counter()
        t_wl, t_sim = min(t_wl, t1 - t0), min(t_sim, t2 - t1)
    return {"generate": t_wl * 1e6, "simulate": t_sim * 1e6,
            "generate_x": t_wl * 1e6 / engine_us["generate"],
            "simulate_x": t_sim * 1e6 / (engine_us["decide_stops"] + engine_us["srtf_est"])}


def scaling(n_jobs_list, n_clusters: int, reps: int) -> dict:
    """Per-cluster microseconds of ``simulate`` (1 thread) against jobs per cluster."""
    numba.set_num_threads(1)
    out = {}
    for n_jobs in n_jobs_list:
        cfg = _config(n_jobs=n_jobs)
        c = max(1, n_clusters * 300 // n_jobs)
        out[n_jobs] = _us(_best(lambda: simulate(cfg, c, seed=1), reps), c)
    return out


_FIRST_CALL = (
    "import time; t0 = time.perf_counter()\n"
    "from fastsim.bench import _config\n"
    "from fastsim.api import simulate\n"
    "simulate(_config(), 2, seed=1)\n"
    "print(time.perf_counter() - t0)\n"
)


def compile_times() -> tuple[float, float]:
    """Seconds to import and run a first ``simulate``, in fresh interpreters: with an
    empty numba cache (cold), then with the cache that run left behind (warm)."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        env.pop("FASTSIM_NO_CACHE", None)
        times = []
        for _ in range(2):
            r = subprocess.run([sys.executable, "-c", _FIRST_CALL], env=env, check=True,
                               capture_output=True, text=True)
            times.append(float(r.stdout.strip().splitlines()[-1]))
    return times[0], times[1]


def _add_options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--quick", action="store_true",
                    help="smaller batches: 100 clusters, 5 repetitions (about 30 s with the "
                    "compile row)")
    ap.add_argument("--no-compile", action="store_true",
                    help="skip the cold/warm compile-time row (two subprocesses)")


def register(subparsers) -> None:
    """``fastsim bench``: the same benchmark as ``python -m fastsim.bench``."""
    p = subparsers.add_parser("bench", help="speed: clusters per second, stages, reference "
                              "speed-up, scaling, compile time", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_options(p)
    p.set_defaults(func=run)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m fastsim.bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_options(ap)
    run(ap.parse_args(argv))


def run(a: argparse.Namespace) -> int:
    """Run the benchmark with parsed options ``a`` (``quick``, ``no_compile``)."""
    n, reps, n_ref = (100, 5, 1) if a.quick else (400, 10, 3)
    cfg = _config()
    n_jobs, n_evals = cfg.workload.n_jobs, cfg.workload.n_evals
    simulate(cfg, 2, seed=1)  # compile or load from the cache before timing
    print(f"fastsim benchmark: {cfg.workload.mix}, {cfg.workload.gpus} GPUs, {n_jobs} jobs, "
          f"{n_evals} evals per cluster; {cfg.scheduler.name} + {POLICY} unless stated; "
          f"numba {numba.__version__}, {numba.config.NUMBA_NUM_THREADS} threads available; "
          f"min of {reps} runs of {n} clusters")

    tp = throughput(n, reps)
    print("\n== whole pipeline (simulate: workload, stop decisions, engine, metrics) ==")
    print(f"  1 thread : {tp[1]:9.0f} clusters/s")
    print(f"  2 threads: {tp[2]:9.0f} clusters/s   ratio 2/1 = {tp[2] / tp[1]:.2f}")
    print(f"  evaluation events per second per core (1 thread): "
          f"{tp[1] * n_jobs * n_evals:,.0f}")

    st = stages(n, reps)
    print("\n== per-cluster time by stage, 1 thread ==")
    print(f"  {'workload generation':24s} {st['generate']:8.1f} us   (fresh arrays, as simulate() does)")
    print(f"  {'  into reused buffers':24s} {st['generate_reuse']:8.1f} us   "
          "(generate_workload(..., out=w); the rest is first-touch page faults)")
    print(f"  {'stop decisions':24s} {st['decide_stops']:8.1f} us")
    for s in SCHEDULERS:
        print(f"  {'engine ' + s:24s} {st[s]:8.1f} us   ({st[s] / st['srtf_est']:.2f} x srtf_est)")

    ref = reference_speedup(n_ref, st)
    print("\n== speed-up over the pure-Python reference (tests/reference.py), 1 thread ==")
    if ref is None:
        print("  tests.reference is not importable (run from the repository root): row skipped")
    else:
        print(f"  workload generation: reference {ref['generate'] / 1e3:8.1f} ms/cluster, "
              f"engine {st['generate']:7.1f} us  -> {ref['generate_x']:7.0f} x")
        print(f"  simulation (srtf_est, stop decisions + engine): reference "
              f"{ref['simulate'] / 1e3:8.1f} ms/cluster, engine "
              f"{st['decide_stops'] + st['srtf_est']:7.1f} us  -> {ref['simulate_x']:7.0f} x")

    sc = scaling((150, 300, 600, 1200), n // 2 if a.quick else n, reps)
    print("\n== growth with jobs per cluster (simulate, 1 thread) ==")
    for j, us in sc.items():
        print(f"  {j:5d} jobs: {us:9.1f} us/cluster   {us / sc[300]:5.2f} x the 300-job time "
              f"(jobs ratio {j / 300:.2f})")

    if not a.no_compile:
        cold, warm = compile_times()
        print("\n== first call (import + first simulate) in a fresh interpreter ==")
        print(f"  cold numba cache: {cold:6.1f} s")
        print(f"  warm numba cache: {warm:6.1f} s   ratio cold/warm = {cold / warm:.1f}")
    return 0


if __name__ == "__main__":
    main()
