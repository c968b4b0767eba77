"""The engine's scheduling loop holds no reference count, under any scheduler, and no
other per-cluster kernel of the pipeline holds one in a loop.

The loop is written in parts that numba inlines (``kernels/engine.py``).  It runs as fast
as the one-function engine it replaced only while numba's pruner removes the pair of
atomic reference counts every array argument of a part costs: a part that uses an array
in one branch only, or a raise path inside the loop, leaves pairs on every call, which
made the engine 1.2-2.2x slower when measured (docs/performance.md, rounds 17 and 20).
Time cannot be asserted here; the machine code can.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fastsim.registry import BUILTIN_SCHEDULER_NAMES

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def counted_out():
    """The script's report on every engine, then on the pipeline's other kernels: one
    process, so the workload and stop kernels both need compile once, not twice."""
    env = {**os.environ, "FASTSIM_NO_CACHE": "1"}  # machine code is inspected as compiled
    return subprocess.run([sys.executable, "engine_refcounts.py", str(ROOT / "kernels" / "engine.py"),
                           "--pipeline"], cwd=ROOT / "benchmarks", env=env, capture_output=True,
                          text=True, check=True).stdout


def test_no_reference_count_is_left_in_any_engine_loop(counted_out):
    counted = {}
    for line in counted_out.splitlines():
        m = re.search(r"cluster_(\w+)_1c_nb +incref +\d+ \((\d+) in loops\), decref +\d+ "
                      r"\((\d+) in loops\); \d+ gathers; calls left: (.*)$", line)
        if m:
            counted[m.group(1)] = (int(m.group(2)), int(m.group(3)), m.group(4))
    assert set(counted) == set(BUILTIN_SCHEDULER_NAMES), counted_out
    for scheduler, (increfs, decrefs, calls) in counted.items():
        assert (increfs, decrefs) == (0, 0), f"{scheduler}: counts left in the loop\n{counted_out}"
        # a kernel LLVM leaves as a call brings its status check, a raise path, into the loop
        assert calls == "-", f"{scheduler}: calls left in the loop: {calls}"


def test_no_reference_count_is_paid_per_job_around_the_engine(counted_out):
    """The one-pass pipeline's other per-cluster kernels (workload, stop decisions, service
    points, metrics) hold no count in a loop either: the stop decisions paid two pairs
    per job through the row views they hand the decision rule, about a tenth of a
    cluster's time end to end (docs/performance.md, round 21)."""
    counted = re.findall(r"kernel (\S+) +incref +\d+ \((\d+) in loops\), decref +\d+ \((\d+) in loops\)",
                         counted_out)
    assert {name for name, _, _ in counted} >= {"stops.resolve_rule_stops_1c_nb",
                                               "workload.workload_1c_nb"}, counted_out
    for name, increfs, decrefs in counted:
        assert (increfs, decrefs) == ("0", "0"), f"{name}: counts left in a loop\n{counted_out}"


def test_no_gather_in_any_engine_or_per_cluster_kernel(counted_out):
    """No AVX2/AVX-512 gather in the machine code of any engine or of the pipeline's other
    per-cluster kernels.  Each engine copied its jobs' held times out of their records
    (168 bytes apart) in a loop LLVM vectorised into four gathers, which on a CPU with
    the Gather Data Sampling mitigation cost more than the scalar loads they replace
    (docs/performance.md, round 43); the times are now written as each job ends.  On a
    CPU without gathers the count is 0 either way."""
    counted = re.findall(r"(\S+) +incref .*; (\d+) gathers", counted_out)
    assert len(counted) == len(BUILTIN_SCHEDULER_NAMES) + 6, counted_out
    assert all(n == "0" for _, n in counted), counted_out
