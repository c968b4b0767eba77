"""The benchmark runs in its quick mode and states a verdict for every target; its plain
Python event loop (the yardstick) simulates what the engine simulates.  Timings are
printed, never asserted."""
import os

import numpy as np
import pytest

from fastsim import bench
from fastsim.api import decide_stops, run_workload
from fastsim.workload import generate_workload


def test_quick_bench_prints_every_stage_and_a_verdict_per_target(capsys):
    bench.main(["--quick", "--no-compile", "--no-rss", "--clusters", "4", "--reps", "1"])
    out = capsys.readouterr().out
    for section in ("whole pipeline", "per-cluster time by stage", "end to end per cluster",
                    "plain Python event loop", "== targets"):
        assert section in out
    targets = out[out.index("== targets"):].splitlines()[1:]
    for s in bench.ALL_SCHEDULERS:
        row = next(line for line in targets if f"end to end, {s} " in line)
        assert f"{bench.TARGET_US.get(s, 80.0):.2f} us" in row
        assert row.rstrip().endswith("holds") or "misses by" in row
    assert any("threads, srtf_est" in line and ">=    1.85" in line for line in targets)


@pytest.mark.parametrize("scheduler", bench.PLAIN_LOOP)
def test_plain_loop_makespan_equals_the_engine(scheduler):
    cfg = bench._config(scheduler, n_jobs=60)
    w = generate_workload(cfg.workload, 3, seed=4)
    d = decide_stops(cfg, w)
    run_h = w.duration_h * np.where(d.stopped, d.trigger_eval / w.n_evals, 1.0)
    makespan = run_workload(cfg, w, keep_jobs=False).clusters["makespan_h"].to_numpy()
    for c in range(3):
        end = bench.plain_loop_cluster(cfg.workload.gpus, w.gpus[c].tolist(),
                                       w.arrival_h[c].tolist(), w.t_est_h[c].tolist(),
                                       run_h[c].tolist(), scheduler)
        assert end - w.arrival_h[c, 0] == pytest.approx(makespan[c], rel=1e-9)


def test_compile_row_runs_the_first_command_a_newcomer_types():
    """The cold/warm row times a real ``fastsim run --clusters 10`` (here with the warm
    cache the suite has built): the command line is valid and its CPU time is read."""
    wall, cpu = bench._timed_run(dict(os.environ))
    assert wall > 0 and cpu > 0  # a failing command raises (check=True)
