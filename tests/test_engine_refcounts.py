"""The engine's scheduling loop holds no reference count, under any scheduler.

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

from fastsim.registry import BUILTIN_SCHEDULER_NAMES

ROOT = Path(__file__).resolve().parents[1]


def test_no_reference_count_is_left_in_any_engine_loop():
    env = {**os.environ, "FASTSIM_NO_CACHE": "1"}  # machine code is inspected as compiled
    r = subprocess.run([sys.executable, "engine_refcounts.py", str(ROOT / "kernels" / "engine.py")],
                       cwd=ROOT / "benchmarks", env=env, capture_output=True, text=True, check=True)
    counted = {}
    for line in r.stdout.splitlines():
        m = re.search(r"cluster_(\w+)_1c_nb +incref +\d+ \((\d+) in loops\), decref +\d+ "
                      r"\((\d+) in loops\); calls left: (.*)$", line)
        if m:
            counted[m.group(1)] = (int(m.group(2)), int(m.group(3)), m.group(4))
    assert set(counted) == set(BUILTIN_SCHEDULER_NAMES), r.stdout
    for scheduler, (increfs, decrefs, calls) in counted.items():
        assert (increfs, decrefs) == (0, 0), f"{scheduler}: counts left in the loop\n{r.stdout}"
        # a kernel LLVM leaves as a call brings its status check, a raise path, into the loop
        assert calls == "-", f"{scheduler}: calls left in the loop: {calls}"
