"""CPU time per cluster of each stage around the engine and of ``simulate`` for every
scheduler, 1 thread, on the bench's default cluster; for A/B runs of two checkouts.

    python benchmarks/stages_cpu.py [--clusters N] [--reps R] [--tag T] >> RUNS.jsonl
    python benchmarks/stages_cpu.py --summarize RUNS.jsonl --base main --new branch

The first form prints one JSON line: ``{"tag", "load1", "us": {stage: us per cluster}}``
(each the minimum over ``R`` calls of the process's CPU time, after a warm-up call).  Run
it from each checkout in turn, alternating, several rounds (load on a shared machine
then hits both sides alike); the second form pairs the lines round by round (the i-th
``base`` line with the i-th ``new`` line) and prints, per stage, the median of each side
and the median and range of the per-round ratios new / base.
"""
import argparse
import json
import os
import statistics
import sys
import time

import numba


def measure(n: int, reps: int) -> dict:
    from fastsim.api import _assemble, account, decide_stops, run_engine, simulate
    from fastsim.bench import ALL_SCHEDULERS, _config
    from fastsim.workload import generate_workload

    numba.set_num_threads(1)

    def best(fn):
        fn()
        b = float("inf")
        for _ in range(reps):
            t0 = time.process_time()
            fn()
            b = min(b, time.process_time() - t0)
        return b / n * 1e6

    cfg = _config()
    w = generate_workload(cfg.workload, n, seed=1)
    d = decide_stops(cfg, w)
    o = run_engine(cfg, w, d)
    us = {"generate": best(lambda: generate_workload(cfg.workload, n, seed=1)),
          "generate_reuse": best(lambda: generate_workload(cfg.workload, n, seed=1, out=w)),
          "decide_stops": best(lambda: decide_stops(cfg, w)),
          "metrics": best(lambda: _assemble(cfg, w, d, o, *account(cfg, w, d, o), False,
                                            False))}
    for s in ALL_SCHEDULERS:
        c = _config(s)
        us["simulate_" + s] = best(lambda: simulate(c, n, seed=1))
    return us


def summarize(path: str, base: str, new: str) -> None:
    runs = [json.loads(line) for line in open(path) if line.strip()]
    a = [r for r in runs if r["tag"] == base]
    b = [r for r in runs if r["tag"] == new]
    pairs = list(zip(a, b))
    loads = [r["load1"] for pair in pairs for r in pair]
    print(f"n = {len(pairs)} pairs; 1-minute load average {min(loads):.1f}-{max(loads):.1f}")
    print(f"| stage | {base}, median us | {new}, median us | ratio, median | ratio, range |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for k in pairs[0][0]["us"]:
        ratios = sorted(y["us"][k] / x["us"][k] for x, y in pairs)
        print(f"| {k} | {statistics.median(x['us'][k] for x, _ in pairs):.1f} | "
              f"{statistics.median(y['us'][k] for _, y in pairs):.1f} | "
              f"{statistics.median(ratios):.2f} | {ratios[0]:.2f}-{ratios[-1]:.2f} |")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clusters", type=int, default=100)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--tag", default="")
    ap.add_argument("--summarize", metavar="RUNS")
    ap.add_argument("--base", default="main")
    ap.add_argument("--new", default="branch")
    a = ap.parse_args(argv)
    if a.summarize:
        summarize(a.summarize, a.base, a.new)
        return
    line = {"tag": a.tag, "load1": os.getloadavg()[0], "us": measure(a.clusters, a.reps)}
    json.dump(line, sys.stdout)
    print()


if __name__ == "__main__":
    main()
