"""Exact ties: the engine, the reference and an exact reference on tie-heavy clusters.

    python benchmarks/ties.py [cases] [--grid G] [--medians M,M,M,...]
    python benchmarks/ties.py 100                       # the default: 2,400 cells
    python benchmarks/ties.py 40 --grid 2               # arrivals on a half-hour grid

Random continuous draws never make two events coincide, so the engine and the
reference (``tests/reference.py``) agree on every random case of
``tests/test_engine_vs_reference.py``.  Degenerate configurations do: ``log_sd = 0`` and
``est_sigma = 0`` make every job of a type run exactly as long as the others, and
arrivals on a grid (``--grid G``: floored to multiples of ``1 / G`` h) make ends meet
arrivals.  Event times are float sums along each job's history, so two instants equal
in exact arithmetic can land a few ulps apart (and round-off can make unequal ones
equal), and the engine and the reference, which add along different paths, can then
break the tie differently.  This counts, per scheduler, over ``cases`` random cells of
``test_engine_vs_reference.random_case`` per stop policy (``none``, ``evalstop``,
``stop_at``, ``deprioritize``) made tie-heavy (one or two LoRA demands, DPO 4 GPUs,
RLHF 8 or 4 and 8; run-time medians ``--medians``: LoRA, DPO, then RLHF's choices), the
cells where

* ``engine != reference``: ``compare`` of that test fails (as it would in the suite);
* ``engine != exact``: the same against the reference run in exact arithmetic
  (``reference_simulate(..., exact=True)``: every time a ``Fraction``, so the tie rule of
  docs/model.md is applied to the exact instants of the float inputs);
* ``reference != exact``: the two references disagree (discrete columns exactly, times
  to 1e-9, the segments' order).

docs/model.md ("Round-off and exact ties") quotes its counts.
"""
from __future__ import annotations

import argparse
import collections
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import test_engine_vs_reference as T  # noqa: E402
from reference import jobs_of, reference_simulate  # noqa: E402

from fastsim.config import SimConfig  # noqa: E402
from fastsim.workload import generate_workload  # noqa: E402

POLICIES = ("none", "evalstop", "stop_at", "deprioritize")
COUNTS = ("engine != reference", "engine != exact", "reference != exact")


def agrees(check) -> bool:
    try:
        check()
    except AssertionError:
        return False
    return True


def references_agree(cfg: SimConfig, jobs: dict) -> bool:
    """The float and the exact reference: discrete columns equal, times within 1e-9."""
    a, b = reference_simulate(cfg, jobs), reference_simulate(cfg, jobs, exact=True)
    for ra, rb in zip(a.jobs, b.jobs):
        if any(int(ra[c]) != int(rb[c]) for c in T.DISCRETE):
            return False
        if not all(np.isclose(ra[c], rb[c], rtol=T.RTOL, atol=T.ATOL, equal_nan=True)
                   for c in T.FLOATS):
            return False
    return ([s[0] for s in a.segments] == [s[0] for s in b.segments]
            and np.allclose([s[1:] for s in a.segments], [s[1:] for s in b.segments],
                            rtol=T.RTOL, atol=T.ATOL))


def count(cases: int, grid: float, medians: tuple) -> collections.Counter:
    exact = partial(reference_simulate, exact=True)
    counts = collections.Counter()
    for si, scheduler in enumerate(T.SCHEDULERS):
        for pi, policy in enumerate(POLICIES):
            rng = np.random.default_rng(1000 * si + pi)
            for _ in range(cases):
                cfg, seed, start = T.tie_case(rng, scheduler, policy, medians)
                w = generate_workload(cfg.workload, 1, seed=seed, cluster_start=start)
                if grid:
                    w = w.with_arrays(arrival_h=np.floor(w.arrival_h * grid) / grid)
                run = partial(T.compare, cfg, seed, start, 1, workload=w)
                counts[scheduler, "cells"] += 1
                counts[scheduler, COUNTS[0]] += not agrees(run)
                counts[scheduler, COUNTS[1]] += not agrees(partial(run, reference=exact))
                counts[scheduler, COUNTS[2]] += not references_agree(cfg, jobs_of(w, 0))
    return counts


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="?", type=int, default=100,
                    help="cells per scheduler and stop policy (default 100)")
    ap.add_argument("--grid", type=float, default=0.0,
                    help="floor arrivals to multiples of 1/G h (default: continuous)")
    ap.add_argument("--medians", default="1,2,2,4",
                    help="run-time medians (h): LoRA, DPO, then RLHF's choices (default 1,2,2,4)")
    args = ap.parse_args(argv)
    medians = tuple(float(m) for m in args.medians.split(","))
    if args.cases < 1 or args.grid < 0 or len(medians) < 3 or min(medians) <= 0:
        ap.error("cases >= 1, --grid >= 0, --medians: at least 3 positive numbers")
    t0 = time.perf_counter()
    counts = count(args.cases, args.grid, medians)
    print(f"tie-heavy cells: {args.cases} per scheduler x {len(POLICIES)} policies, arrivals "
          + (f"on a 1/{args.grid:g} h grid" if args.grid else "continuous")
          + f", medians {args.medians} h ({time.perf_counter() - t0:.0f} s)")
    print(f"{'scheduler':16s} {'cells':>6s}" + "".join(f" {c:>20s}" for c in COUNTS))
    for s in T.SCHEDULERS + ("all",):
        row = [sum(counts[x, c] for x in T.SCHEDULERS) if s == "all" else counts[s, c]
               for c in ("cells",) + COUNTS]
        print(f"{s:16s} {row[0]:6d}" + "".join(f" {v:20d}" for v in row[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
