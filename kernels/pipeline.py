"""The whole simulation of a cluster in one pass: workload, stop decisions, engine, metrics.

``pipeline_nb`` runs, for each cluster row, the same per-cluster kernels as the
stage-by-stage drivers (``workload_1c_nb``, ``resolve_rule_stops_1c_nb`` (the rule
policies of ``resolve_stops_1c_nb``) or ``oracle_stops_1c_nb``, ``service_points_1c_nb``,
``cluster_1c_nb``, ``accounting_1c_nb``, ``cluster_metrics_1c_nb``), so its results are
the stages' results bit for bit (tests/test_determinism.py).  What it changes is the
order of the work: a cluster's arrays (about 100 kB at 300 jobs) are written and read
back while they are in the core's cache, and threads take clusters a few at a time
(``run_pipeline``) instead of meeting at a barrier after every stage, so a costly cluster
delays only itself (docs/performance.md).

The information boundary is unchanged: each decision kernel is handed the observed
arrays (and ``duration_h``, from which ``resolve_rule_stops_1c_nb`` forms the attained
service observed at each evaluation), as ``fastsim.api.decide_stops`` does.
"""
import threading
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

from .codes import ORACLE, SCHEDULERS
from .engine import cluster_of_nb, service_points_1c_nb
from .jit import linked_entry, one_of
from .metrics import accounting_1c_nb, cluster_metrics_1c_nb
from .oracle import oracle_stops_1c_nb
from .stops import resolve_rule_stops_1c_nb
from .workload import workload_1c_nb


def _pipeline(scheduler):
    """``pipeline_nb`` for one scheduler code, which runs that scheduler's engine
    (``kernels.engine``): only its code is compiled."""
    def pipeline_nb(lo, hi, generate, generate_only, draw_score, draw_loss, p, seed,
                    cluster_start, decide,
                    policy, k, f, w, tol, scope_all, backfill, thresholds_gpu_h, overhead_h,
                    capacity, keys, workload, decisions, service, outcome, segments, accounting,
                    out):
        """Simulate cluster rows ``lo .. hi - 1`` (``run_pipeline`` shares the rows among
        threads).

        ``generate``: draw the workload (``p``: ``kernels.workload.WorkloadParams``, clusters
        numbered from ``cluster_start``) into ``workload`` (its scores only if ``draw_score``,
        its loss readings only if ``draw_loss``), else read it as given; ``generate_only``:
        stop there (what ``fastsim.workload.generate_workload`` runs, so that generation is
        compiled once, here; every later argument is then unused);
        ``decide``: resolve the stop policy ``policy``, a rule policy or the oracle
        (``ORACLE``; ``k``, ``f``, ``w``, ``tol`` as ``kernels.stops.resolve_stops_nb`` takes
        them), into ``decisions``, else read them as given.  An online detector is never
        decided here (its decisions are resolved beforehand, ``decide`` False): a pipeline
        that compiled every detector would cost several seconds more on a cold start for
        runs that use none.  ``keys``: what the static-key scheduler
        orders by (``t_est_h``, or a user scheduler's keys).  Tuples of ``[C, J]`` arrays
        (``[C, J, E]``: gold, score, loss), written in place: ``workload`` (the 16 arrays of
        ``fastsim.workload.Workload`` in its field order, ``cluster_ids`` excepted),
        ``decisions`` (in_scope, stopped, demoted, trigger_eval, delivered_eval), ``service``
        (end, demote, account_from), ``outcome`` (start_h, end_h, held_h, held_after_h,
        n_preempt), ``segments`` (seg_job, seg_start, seg_end ``[C, S]``, seg_count,
        n_points ``[C]``), ``accounting`` (delivered_gold, best_gold, wasted_gpu_h,
        positive); ``out[N_METRICS, C]``.
        """
        (job_type, gpus, arrival_h, duration_h, t_est_h, hacking, ustar, height, tau, loss0,
         loss_inf, loss_tau, gold, score, loss, peak_eval) = workload
        in_scope, stopped, demoted, trigger_eval, delivered_eval = decisions
        end_service, demote_service, account_from = service
        start_h, end_h, held_h, held_after_h, n_preempt = outcome
        seg_job, seg_start, seg_end, seg_count, n_points = segments
        delivered_gold, best_gold, wasted_gpu_h, positive = accounting
        n_evals = gold.shape[2]
        scheduling = (backfill, thresholds_gpu_h, overhead_h, capacity)
        for c in range(lo, hi):
            if generate:
                workload_1c_nb(p, seed, cluster_start + c, c, job_type, gpus, arrival_h,
                               duration_h, t_est_h, hacking, ustar, height, tau, loss0, loss_inf,
                               loss_tau, gold, score, loss, peak_eval, draw_score, draw_loss)
            if generate_only:
                continue
            if decide and policy == ORACLE:
                oracle_stops_1c_nb(c, scope_all, job_type, hacking, peak_eval, n_evals, in_scope,
                                   stopped, demoted, trigger_eval, delivered_eval)
            elif decide:
                resolve_rule_stops_1c_nb(c, policy, k, f, w, tol, scope_all, job_type, t_est_h,
                                         score, loss, duration_h, in_scope, stopped, demoted,
                                         trigger_eval, delivered_eval)
            service_points_1c_nb(c, duration_h, stopped, demoted, trigger_eval, hacking, peak_eval,
                                 n_evals, end_service, demote_service, account_from)
            start_h[c] = np.nan  # the engine writes these only for jobs that start and end
            end_h[c] = np.nan
            n_preempt[c] = 0
            cluster_of_nb(scheduler, c, scheduling, (gpus, arrival_h, keys, loss, duration_h),
                          service, outcome, segments)
            accounting_1c_nb(c, gold, peak_eval, hacking, gpus, held_after_h, in_scope, stopped,
                             demoted, delivered_eval, delivered_gold, best_gold, wasted_gpu_h,
                             positive)
            cluster_metrics_1c_nb(c, capacity, n_evals, job_type, gpus, arrival_h, end_h,
                                  held_h, wasted_gpu_h, hacking, in_scope, positive, stopped,
                                  delivered_gold, best_gold, trigger_eval, peak_eval, out)
    return linked_entry(one_of(pipeline_nb, scheduler))


# Indexed by scheduler code; generation alone (``generate_only``) may use any of them.
PIPELINES = tuple(_pipeline(code) for code in SCHEDULERS)


# The most clusters a thread takes at a time: a call's dispatch (about 20 us) is then
# small beside a chunk's work (0.2-0.6 ms per cluster at the default cell).
MAX_CHUNK = 16


def run_pipeline(scheduler, n_clusters, *args):
    """The ``pipeline_nb`` of ``scheduler`` (a code) over rows ``0 .. n_clusters - 1``
    (``args``: its arguments after ``lo, hi``) on ``numba.get_num_threads()`` threads,
    each taking the next chunk of rows until none is left: at least 8 chunks per thread
    (so that threads finish within about a chunk of each other whatever the clusters
    cost), at most ``MAX_CHUNK`` rows each.
    The kernel releases the GIL, so the threads run in parallel; a serial kernel driven
    from here compiles in much less time than a ``prange`` loop (docs/performance.md).
    Rows are independent, so results do not depend on the thread count or on which
    thread took which rows.  Once the calling thread's share raises (Ctrl-C, SIGTERM: a
    signal is taken in the main thread only), the other threads take no further rows:
    the call ended with every row left to them computed first, 10 s at 60,000 clusters."""
    pipeline_nb = PIPELINES[scheduler]
    threads = min(numba.get_num_threads(), n_clusters)
    if threads <= 1:
        pipeline_nb(0, n_clusters, *args)
        return
    chunk = max(1, min(MAX_CHUNK, n_clusters // (8 * threads)))
    starts = iter(range(0, n_clusters, chunk))
    if not getattr(pipeline_nb, "signatures", ()):
        # its first call, in this thread: it compiles (for a minute on a busy machine) or
        # loads the cache.  Compiled in a pool thread, Ctrl-C, which the calling thread took
        # while it waited for numba's compiler lock, then waited for the whole compile
        # (the pool's end waits for its threads: 15-80 s in a first `fastsim sweep`);
        # numba's compiler is Python, which takes a signal between two of its steps.
        lo = next(starts)
        pipeline_nb(lo, min(lo + chunk, n_clusters), *args)
    lock = threading.Lock()
    stopped = threading.Event()

    def work():
        while True:
            with lock:
                lo = None if stopped.is_set() else next(starts, None)
            if lo is None:
                return
            pipeline_nb(lo, min(lo + chunk, n_clusters), *args)

    with ThreadPoolExecutor(threads - 1) as pool:
        helpers = [pool.submit(work) for _ in range(threads - 1)]
        try:
            work()
        except BaseException:
            stopped.set()  # before the pool's exit waits for the helpers' rows in hand
            raise
        for h in helpers:
            h.result()
