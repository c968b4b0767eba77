"""The whole simulation of a cluster in one pass: workload, stop decisions, engine, metrics.

``pipeline_nb`` runs, for each cluster row of one ``prange``, the same per-cluster
kernels as the stage-by-stage drivers (``workload_1c_nb``, ``resolve_stops_1c_nb`` or
``oracle_stops_1c_nb``, ``service_points_1c_nb``, ``cluster_1c_nb``,
``accounting_1c_nb``, ``cluster_metrics_1c_nb``), so its results are the stages'
results bit for bit (tests/test_determinism.py).  What it changes is the order of the
work: a cluster's arrays (about 100 kB at 300 jobs) are written and read back while they
are in the core's cache, and threads take clusters one at a time instead of meeting at a
barrier after every stage, so a costly cluster delays only itself (docs/performance.md).

Threads claim cluster rows one at a time from a shared counter (``_claim_nb``), not a
fixed contiguous share each: numba's ``prange`` splits the rows statically (with any
``parallel_chunksize`` under the OpenMP and workqueue layers), and clusters differ in
cost several-fold, so a static half can leave one thread idle for a tenth of the run.
Which thread runs a row changes nothing in it: every row is computed on its own.

The information boundary is unchanged: each decision kernel is handed the observed
arrays (and ``duration_h``, from which ``resolve_stops_1c_nb`` forms the attained service
observed at each evaluation), as ``fastsim.api.decide_stops`` does.
"""
import numpy as np
from numba import prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from .codes import ORACLE
from .engine import cluster_1c_nb, service_points_1c_nb
from .jit import driver
from .metrics import accounting_1c_nb, cluster_metrics_1c_nb
from .oracle import oracle_stops_1c_nb
from .stops import resolve_stops_1c_nb
from .workload import workload_1c_nb


@intrinsic
def _claim_nb(typingctx, counter):
    """Atomically take the next row from ``counter[0]`` (int64) and return it."""
    if not (isinstance(counter, types.Array) and counter.ndim == 1
            and counter.dtype == types.int64):
        return None

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        first = cgutils.get_item_pointer(context, builder, signature.args[0], array,
                                         [context.get_constant(types.intp, 0)])
        one = context.get_constant(types.int64, 1)
        return builder.atomic_rmw("add", first, one, "monotonic")
    return types.int64(counter), codegen


@driver
def pipeline_nb(generate, generate_only, draw_loss, p, seed, cluster_start, decide, policy, k, f, w, tol,
                detector, scope_all, scheduler, backfill, thresholds_gpu_h, overhead_h, capacity, keys,
                workload, decisions, service, outcome, segments, accounting, out):
    """Simulate every cluster row.

    ``generate``: draw the workload (``p``: ``kernels.workload.WorkloadParams``, clusters
    numbered from ``cluster_start``) into ``workload`` (its loss readings only if
    ``draw_loss``), else read it as given; ``generate_only``: stop there (what
    ``fastsim.workload.generate_workload`` runs, so that generation is compiled once, here;
    every later argument is then unused);
    ``decide``: resolve the built-in stop policy ``policy`` (``ORACLE``: the oracle; ``k``,
    ``f``, ``w``, ``tol`` and an online detector's parameters ``detector``, as
    ``kernels.stops.resolve_stops_nb`` takes them) into ``decisions``, else read them as
    given.  ``keys``: what the static-key scheduler
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
    scheduling = (scheduler, backfill, thresholds_gpu_h, overhead_h, capacity)
    n_clusters = job_type.shape[0]
    claimed = np.zeros(1, np.int64)  # rows taken so far, by any thread
    # Each iteration takes rows until none is left, so a thread's first iteration does all
    # its work and the rest return at once; one iteration per row leaves none idle, for
    # any thread count.
    for _ in prange(n_clusters):
        c = _claim_nb(claimed)
        while c < n_clusters:
            if generate:
                workload_1c_nb(p, seed, cluster_start + c, c, job_type, gpus, arrival_h,
                               duration_h, t_est_h, hacking, ustar, height, tau, loss0,
                               loss_inf, loss_tau, gold, score, loss, peak_eval, draw_loss)
            if generate_only:
                c = _claim_nb(claimed)
                continue
            if decide and policy == ORACLE:
                oracle_stops_1c_nb(c, scope_all, job_type, hacking, peak_eval, n_evals,
                                   in_scope, stopped, demoted, trigger_eval, delivered_eval)
            elif decide:
                resolve_stops_1c_nb(c, policy, k, f, w, tol, detector, scope_all, job_type,
                                    t_est_h, score, loss, duration_h, in_scope, stopped,
                                    demoted, trigger_eval, delivered_eval)
            service_points_1c_nb(c, duration_h, stopped, demoted, trigger_eval, hacking,
                                 peak_eval, n_evals, end_service, demote_service, account_from)
            start_h[c] = np.nan  # the engine writes these only for jobs that start and end
            end_h[c] = np.nan
            n_preempt[c] = 0
            cluster_1c_nb(c, scheduling, (gpus, arrival_h, keys, loss, duration_h), service,
                          outcome, segments)
            accounting_1c_nb(c, gold, peak_eval, hacking, gpus, held_after_h, in_scope, stopped,
                             demoted, delivered_eval, delivered_gold, best_gold, wasted_gpu_h,
                             positive)
            cluster_metrics_1c_nb(c, capacity, n_evals, job_type, gpus, arrival_h, end_h,
                                  held_h, wasted_gpu_h, hacking, in_scope, positive, stopped,
                                  delivered_gold, best_gold, trigger_eval, peak_eval, out)
            c = _claim_nb(claimed)
