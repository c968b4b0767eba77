"""The benchmark runs in its quick mode and states a verdict for every target; its plain
Python event loop (the yardstick) simulates what the engine simulates.  Timings are
printed, never asserted."""
import os

import numpy as np
import pytest

from fastsim import bench
from fastsim.api import decide_stops, run_engine
from fastsim.config import SimConfig
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


CLUSTERS = [dict(n_jobs=60), dict(n_jobs=40, gpus=16), dict(n_jobs=80, mix="mixed", gpus=32)]


@pytest.mark.parametrize("scheduler", bench.ALL_SCHEDULERS)
@pytest.mark.parametrize("cluster,seed", [(c, s) for c in CLUSTERS for s in (4, 11)])
def test_plain_loop_end_times_equal_the_engine(scheduler, cluster, seed):
    """Every job's end time, so a wrong order (a tie rule, a key, a missed re-key at an
    evaluation or a threshold crossing) shows even when the makespan would not."""
    cfg = bench._config(scheduler, **cluster)
    w = generate_workload(cfg.workload, 3, seed=seed)
    d = decide_stops(cfg, w)
    o = run_engine(cfg, w, d)
    for c in range(3):
        end = bench.plain_loop_cluster(cfg.workload.gpus, bench.plain_jobs(w, d, c), scheduler,
                                       cfg.scheduler.thresholds_gpu_h)
        np.testing.assert_allclose(end, o.end_h[c], rtol=1e-9)
    if scheduler in ("srtf_est", "loss_aware", "tiresias"):
        assert o.n_preempt.sum() > 0  # the clusters exercise preemption


def test_plain_loop_tiresias_with_two_thresholds_equals_the_engine():
    cfg = SimConfig.from_specs("tiresias:thresholds=4/32", bench.POLICY,
                               **{**bench.CLUSTER, "n_jobs": 60})
    w = generate_workload(cfg.workload, 3, seed=7)
    d = decide_stops(cfg, w)
    o = run_engine(cfg, w, d)
    for c in range(3):
        end = bench.plain_loop_cluster(cfg.workload.gpus, bench.plain_jobs(w, d, c), "tiresias",
                                       cfg.scheduler.thresholds_gpu_h)
        np.testing.assert_allclose(end, o.end_h[c], rtol=1e-9)


def test_compile_row_runs_the_first_command_a_newcomer_types():
    """The cold/warm row times a real ``fastsim run --clusters 10`` (here with the warm
    cache the suite has built): the command line is valid and its CPU time is read."""
    wall, cpu = bench._timed_run(dict(os.environ))
    assert wall > 0 and cpu > 0  # a failing command raises (check=True)


def test_bench_options_out_of_range_and_one_thread(monkeypatch, capsys):
    import numba

    from fastsim import bench

    for argv in (["--clusters", "0"], ["--reps", "0"], ["--clusters", "-5"]):
        with pytest.raises(SystemExit) as exc:
            bench.main(argv)
        assert exc.value.code == 2
        assert "allowed: clusters from 1 to 100,000" in capsys.readouterr().err
    monkeypatch.setattr(numba.config, "NUMBA_NUM_THREADS", 1)  # one core: no 2-thread row
    assert set(bench.throughput(4, 1)["srtf_est"]) == {1}


def test_a_near_miss_is_given_in_percent():
    """80.04 us against a target of 80 read "misses by 1.00 x"."""
    from fastsim.bench import _verdict

    assert _verdict(80.04, 80) == "misses by 0.1%"
    assert _verdict(160, 80) == "misses by 2.00 x"
    assert _verdict(1.80, 1.85, at_most=False) == "misses by 2.8%"
    assert _verdict(80, 80) == "holds"


def test_the_help_says_how_long_the_bench_takes_as_measured():
    """--help said --quick took about 20 s (and --quick --no-compile --no-rss about 5 s);
    `python -m fastsim.bench --quick` took 70 s on a shared 2-core machine (42 s of CPU),
    its fresh processes (the peak-RSS rows, the cold compile) most of it."""
    import argparse

    import fastsim.bench as bench

    ap = argparse.ArgumentParser()
    bench._add_options(ap)
    helps = {a.dest: a.help for a in ap._actions}
    for text in (bench.__doc__, bench.DESCRIPTION, helps["quick"]):
        assert "about 20 s" not in text and "about 5 s" not in text, text
    assert "about 70 s" in helps["quick"] and "about 70 s" in bench.DESCRIPTION
    assert "about 10 s" in bench.DESCRIPTION and "About 3 minutes" in bench.DESCRIPTION


def test_a_run_of_days_is_said_before_the_timing_starts(monkeypatch, capsys):
    """`fastsim bench --clusters 100000 --reps 1000` started without a word, for days."""
    class Timing(Exception):
        pass

    def timing(*args):
        raise Timing

    monkeypatch.setattr(bench, "_show_threads", timing)  # the first timed row
    with pytest.raises(Timing):
        bench.main(["--clusters", "100000", "--reps", "1000", "--no-compile", "--no-rss"])
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("work: "))
    assert "100,000 clusters x 1001 runs" in line and "over 1 hour" in line
    with pytest.raises(Timing):
        bench.main(["--clusters", "4", "--reps", "1", "--no-compile", "--no-rss"])
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("work: "))
    assert "4 clusters x 2 runs" in line and "hour" not in line
