"""Common random numbers and determinism: chunking, thread count, policy."""
import os
import subprocess
import sys
from pathlib import Path

import numba
import numpy as np
import polars as pl
from polars.testing import assert_frame_equal as _assert_frame_equal

import pytest

from conftest import POLICIES, SCHEDULERS
from fastsim.api import run_stages, run_workload, simulate, simulate_cells
from fastsim.config import SimConfig
from fastsim.workload import generate_workload


def assert_frame_equal(left, right):
    """Bit for bit: polars' own default passes floats that differ by 1e-5 relative."""
    _assert_frame_equal(left, right, check_exact=True)


ROOT = Path(__file__).resolve().parents[1]
WORKLOAD_COLS = ["cluster", "job", "job_type", "gpus", "arrival_h", "duration_h", "t_est_h",
                 "hacking", "peak_eval"]


def test_chunking_does_not_change_results():
    cfg = SimConfig.from_specs("tiresias", "evalstop:k=2", n_jobs=40)
    whole = simulate(cfg, 12, seed=7, keep_jobs=True)
    parts = [simulate(cfg, n, seed=7, cluster_start=s, keep_jobs=True)
             for s, n in ((0, 5), (5, 1), (6, 6))]
    assert_frame_equal(whole.clusters, pl.concat([p.clusters for p in parts]))
    assert_frame_equal(whole.jobs, pl.concat([p.jobs for p in parts]))


@pytest.mark.parametrize("scheduler", SCHEDULERS + ("tiresias:thresholds=2/8/32",))
def test_one_pass_equals_the_stages(scheduler):
    """``simulate`` (generation, decisions, engine and metrics in one pass per cluster) and
    ``run_workload`` (one pass on a given workload) give exactly what the stages give, one
    kernel over all clusters each, for every stop policy; with preemption overhead."""
    for policy in POLICIES:
        cfg = SimConfig.from_specs(scheduler, policy, n_jobs=30, gpus=16, load=1.2,
                                   preempt_overhead_h=0.2, dpo_base_rate=0.3, mix="mixed")
        w = generate_workload(cfg.workload, 5, seed=9, cluster_start=3)
        staged = run_stages(cfg, w, keep_jobs=True, record_segments=True)
        drawn = simulate(cfg, 5, seed=9, cluster_start=3, keep_jobs=True, record_segments=True)
        # the seed is known where simulate drew the clusters, not of a workload handed in
        assert drawn.clusters["seed"].to_list() == [9] * 5
        assert staged.clusters["seed"].null_count() == 5
        for r in (drawn, run_workload(cfg, w, keep_jobs=True, record_segments=True)):
            assert_frame_equal(r.clusters.drop("seed"), staged.clusters.drop("seed"))
            assert_frame_equal(r.jobs, staged.jobs)
            assert_frame_equal(r.segments, staged.segments)
        assert_frame_equal(simulate(cfg, 5, seed=9, cluster_start=3).clusters, drawn.clusters)


def _cells_alone_and_together(cfgs, n, **kw):
    """Each cell's ``simulate`` alone, and ``simulate_cells`` of all of them (results in
    the order given)."""
    alone = [simulate(c, n, seed=5, cluster_start=2, **kw) for c in cfgs]
    together = dict(simulate_cells(cfgs, n, seed=5, cluster_start=2, **kw))
    return alone, [together[i] for i in range(len(cfgs))]


@pytest.mark.filterwarnings("ignore::fastsim.errors.InertSettingWarning")
def test_cells_on_shared_clusters_equal_each_cell_alone():
    """``simulate_cells`` (the cells of one workload on clusters drawn once, as a sweep's
    chunk runs them) gives each cell's ``simulate`` to the bit: every scheduler, every
    stop policy (a first cell that reads no score or loss draws those a later one reads;
    the online detectors read the workload outside the one-pass kernel), two workloads of
    one shape interleaved, with the per-job table and the segments."""
    a = dict(n_jobs=16, gpus=16, load=1.3, mix="mixed", dpo_base_rate=0.3)
    b = dict(n_jobs=16, gpus=16, sigma=0.05)  # the same shape: only equal workloads share
    cfgs = [SimConfig.from_specs(s, p, **(a if (i + j) % 3 else b))
            for i, s in enumerate(SCHEDULERS) for j, p in enumerate(POLICIES)]
    alone, together = _cells_alone_and_together(cfgs, 3, keep_jobs=True, record_segments=True)
    for x, y in zip(alone, together):
        assert_frame_equal(x.clusters, y.clusters)
        assert_frame_equal(x.jobs, y.jobs)
        assert_frame_equal(x.segments, y.segments)
    alone, together = _cells_alone_and_together(cfgs[:12], 4)  # on reused buffers
    for x, y in zip(alone, together):
        assert_frame_equal(x.clusters, y.clusters)


def test_cells_on_shared_clusters_keep_them_from_a_run_between_two_cells():
    """The clusters a group's first cell drew are held across the yields: a ``simulate``
    of the same shape between two cells (a sweep's ``on_chunk``, a loop's own work) ran
    in the same arrays and redrew them, and the next cells ran on other clusters, unsaid."""
    cfgs = [SimConfig.from_specs("srtf_est", p, n_jobs=12) for p in POLICIES[:4]]
    other = SimConfig.from_specs("fifo", "none", n_jobs=12)
    together = {}
    for i, result in simulate_cells(cfgs, 3, seed=2):
        together[i] = result
        simulate(other, 3, seed=99)  # the same shape, other clusters
    for i, cfg in enumerate(cfgs):
        assert_frame_equal(together[i].clusters, simulate(cfg, 3, seed=2).clusters)


def test_cells_on_shared_clusters_hold_one_result_at_a_time():
    """A result ``simulate_cells`` yielded is the caller's: once let go, it is not kept
    alive while the next cell runs (its per-job table is as large as the run's arrays)."""
    import weakref

    cfgs = [SimConfig.from_specs("srtf_est", p, n_jobs=12) for p in POLICIES[:3]]
    refs, alive = [], []

    def extract(per_job):  # called while a cell runs
        alive.append(sum(ref() is not None for ref in refs))
        return 0
    for _, result in simulate_cells(cfgs, 2, keep_jobs=True, extract=extract):
        refs.append(weakref.ref(result))
        del result
    assert alive == [0, 0, 0]


def test_cells_on_shared_clusters_draw_them_once(drawings):
    """The cells of one workload section draw their clusters in one pass, the first
    cell's; the others read them (``generate`` false); another workload draws its own."""
    cfgs = [SimConfig.from_specs(s, p, n_jobs=10) for s in ("fifo", "tiresias")
            for p in ("none", "evalstop:k=2", "loss_plateau")]
    cfgs.append(SimConfig.from_specs("fifo", "none", n_jobs=11))
    results = list(simulate_cells(cfgs, 2))
    assert [i for i, _ in results] == [0, 1, 2, 3, 4, 5, 6]
    assert drawings == [True, False, False, False, False, False, True]


def test_reused_buffers_leave_earlier_results_alone():
    """``simulate`` reuses its arrays for the next call of the same shape: a result it
    returned stays as it was, and a call gives the same whatever ran before it."""
    cfg = SimConfig.from_specs("srtf_est", "evalstop:k=2", n_jobs=25)
    first = simulate(cfg, 6, seed=1)
    kept = first.clusters.clone()
    other = simulate(cfg.with_policy("none"), 6, seed=2, cluster_start=100)
    assert_frame_equal(first.clusters, kept)
    assert_frame_equal(simulate(cfg, 6, seed=1).clusters, kept)
    assert not other.clusters.equals(kept)


def test_a_simulate_inside_an_extract_leaves_the_running_one_alone():
    """A user's extract (or metric) that calls ``simulate`` of the same shape got the
    running call's reused arrays and overwrote them: what the running call read after it
    (its later metrics, its extract) was the inner run's."""
    cfg = SimConfig.from_specs("fifo", "evalstop:k=2", n_jobs=10)

    def nested(per_job):
        simulate(cfg.with_policy("none"), 4, seed=123)
        return per_job["start_h"].sum(axis=1)

    alone = simulate(cfg, 4, seed=1, extract=lambda a: a["start_h"].sum(axis=1)).extract
    assert np.array_equal(simulate(cfg, 4, seed=1, extract=nested).extract, alone)


# With one numba thread allowed, "1 and 2 threads" would compare 1 with 1 and pass unseen;
# test_numba_num_threads_env_bit_identical still compares fresh processes there.
needs_two_threads = pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2,
                                       reason="numba allows one thread here")


@needs_two_threads
def test_thread_count_does_not_change_results():
    cfg = SimConfig.from_specs("loss_aware", "stop_at:f=0.65", n_jobs=60)
    cfg_tiresias = SimConfig.from_specs("tiresias", "evalstop:k=2", n_jobs=60)  # reused buffers
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = simulate(cfg, 16, seed=3, keep_jobs=True)
        one_tiresias = simulate(cfg_tiresias, 16, seed=3)
        numba.set_num_threads(2)
        two = simulate(cfg, 16, seed=3, keep_jobs=True)
        two_tiresias = simulate(cfg_tiresias, 16, seed=3)
    finally:
        numba.set_num_threads(before)
    assert_frame_equal(one.jobs, two.jobs)
    assert_frame_equal(one.clusters, two.clusters)
    assert_frame_equal(one_tiresias.clusters, two_tiresias.clusters)


def test_numba_num_threads_env_bit_identical():
    """The same cell in fresh processes with NUMBA_NUM_THREADS=1 and 2: identical bytes."""
    code = ("import sys; from fastsim.api import simulate; from fastsim.config import SimConfig;"
            "r = simulate(SimConfig.from_specs('srtf_est', 'evalstop:k=2', n_jobs=50), 8, seed=11,"
            " keep_jobs=True); sys.stdout.write(r.jobs.hash_rows().sum().__str__() + ' ' +"
            " repr(r.clusters['jct_mean_h'].to_list()))")
    outs = []
    for threads in ("1", "2"):
        env = dict(os.environ, NUMBA_NUM_THREADS=threads)
        outs.append(subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, check=True,
                                   capture_output=True, text=True).stdout)
    assert outs[0] == outs[1]


def test_policies_share_identical_clusters():
    cfg = SimConfig.from_specs("srtf_est", "none", n_jobs=30)
    frames = [simulate(cfg.with_policy(p), 4, seed=5, keep_jobs=True).jobs.select(WORKLOAD_COLS)
              for p in ("none", "evalstop:k=2", "oracle", "loss_plateau")]
    for f in frames[1:]:
        assert_frame_equal(frames[0], f)
    # and across schedulers
    other = simulate(SimConfig.from_specs("fifo", "none", n_jobs=30), 4, seed=5, keep_jobs=True)
    assert_frame_equal(frames[0], other.jobs.select(WORKLOAD_COLS))


def test_seed_changes_draws_and_workload_is_a_pure_function():
    cfg = SimConfig.from_specs(n_jobs=20).workload
    a = generate_workload(cfg, 3, seed=1)
    b = generate_workload(cfg, 3, seed=1)
    c = generate_workload(cfg, 3, seed=2)
    assert np.array_equal(a.score, b.score)
    assert not np.array_equal(a.score, c.score)
    # evaluation noise is a function of the eval index: changing sigma moves scores only
    quiet = generate_workload(SimConfig.from_specs(n_jobs=20, sigma=0.0).workload, 3, seed=1)
    np.testing.assert_array_equal(quiet.gold, a.gold)
    np.testing.assert_array_equal(quiet.score, a.gold)


def test_generate_into_reused_buffer_is_identical():
    cfg = SimConfig.from_specs(n_jobs=15).workload
    fresh = generate_workload(cfg, 4, seed=2, cluster_start=10)
    buf = generate_workload(cfg, 4, seed=9)
    again = generate_workload(cfg, 4, seed=2, cluster_start=10, out=buf)
    assert again is buf
    for name in ("cluster_ids", "arrival_h", "score", "loss", "gold", "peak_eval", "hacking"):
        np.testing.assert_array_equal(getattr(fresh, name), getattr(again, name))


@needs_two_threads
def test_online_detectors_are_deterministic_across_threads_and_chunks():
    """Every online detector policy: 1 and 2 threads, and two chunks, give identical jobs."""
    from fastsim import registry as R

    before = numba.get_num_threads()
    for d in (d for d in R.BUILTIN_POLICIES if d.vector):
        cfg = SimConfig.from_specs("srtf_est", d.name, n_jobs=40, sigma=0.05)
        try:
            numba.set_num_threads(1)
            one = simulate(cfg, 6, seed=3, keep_jobs=True).jobs
            numba.set_num_threads(2)
            two = simulate(cfg, 6, seed=3, keep_jobs=True).jobs
        finally:
            numba.set_num_threads(before)
        parts = pl.concat([simulate(cfg, n, seed=3, cluster_start=s, keep_jobs=True).jobs
                           for s, n in ((0, 2), (2, 4))])
        assert_frame_equal(one, two)
        assert_frame_equal(one, parts)
        assert one["stopped"].sum() > 0, d.name  # the comparison is not vacuous
