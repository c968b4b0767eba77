"""Per-cluster metrics (MODEL.md section 8) from per-job outcome arrays."""
import math

import numpy as np
from numba import prange

from .codes import RLHF
from .jit import driver, entry, kernel, kernel_and_entry, max_nb, min_nb

METRIC_NAMES = (
    "jct_mean_h", "jct_p50_h", "jct_p95_h", "jct_p99_h", "makespan_h", "utilization",
    "queue_mean_h", "gpu_h_total", "wasted_gpu_h", "wasted_share", "gold_hacking",
    "gold_healthy_rlhf", "gold_all", "regret_mean", "tp", "fp", "fn", "tn", "precision",
    "recall", "fpr", "delay_sum", "delay_count", "n_stopped", "tp_freed", "pos_at_completion",
    "stop_recall", "hacking_gpu_h", "fp_freed", "stop_fpr",
)
N_METRICS = len(METRIC_NAMES)


@kernel
def _partition_nb(a, low, high):
    """Three-way partition of ``a[low:high + 1]`` around the median of its first, middle
    and last element: returns ``(lt, gt)`` with ``a[low:lt] < pivot``, ``a[lt:gt]`` equal
    to it and ``a[gt:high + 1] > pivot`` (no NaN in ``a``).

    Branch-free (Lomuto's scheme with an unconditional swap and a conditional advance):
    on data in random order a comparison branch is mispredicted half the time, which
    cost more than the comparisons.  The equal block guarantees progress on ties."""
    x, y, z = a[low], a[(low + high) >> 1], a[high]
    pivot = max_nb(min_nb(x, y), min_nb(max_nb(x, y), z))
    lt = low
    for i in range(low, high + 1):
        v = a[i]
        a[i] = a[lt]
        a[lt] = v
        lt += v < pivot
    gt = lt
    for i in range(lt, high + 1):
        v = a[i]
        a[i] = a[gt]
        a[gt] = v
        gt += not pivot < v
    return lt, gt


@kernel
def _select_nb(a, k, low, high):
    """Put the ``k``-th smallest of ``a[low:high + 1]`` at ``a[k]``, smaller ones before,
    larger ones after."""
    while low < high:
        lt, gt = _partition_nb(a, low, high)
        if k < lt:
            high = lt - 1
        elif k >= gt:
            low = gt
        else:
            return


@kernel
def _min_to_front_nb(a, low, high):
    """Swap the smallest of ``a[low:high + 1]`` (the first one, on ties) into ``a[low]``."""
    m = low
    for i in range(low + 1, high + 1):
        m = i if a[i] < a[m] else m
    a[low], a[m] = a[m], a[low]


@kernel_and_entry
def percentiles_nb(x, qs):
    """``np.percentile(x, q)`` for each ``q`` of the increasing tuple ``qs`` (each strictly
    between 0 and 100), bit for bit as numba computes it (the same order statistics,
    interpolated by the same expression), from one copy of ``x`` narrowed from one
    percentile to the next instead of a copy and a selection per percentile; the order
    statistic after the ``k``-th is the smallest of those above it."""
    n = x.shape[0]
    out = np.empty(len(qs))  # np.full would compile a library function of its own
    for i in range(len(qs)):
        out[i] = np.nan
    for i in range(n):
        if np.isnan(x[i]):
            return out
    if n == 1:
        if np.isfinite(x[0]):
            out[:] = x[0]
        return out
    a = x.copy()
    low = 0
    for i in range(len(qs)):
        rank = 1 + (n - 1) * (qs[i] / 100.0)
        f = math.floor(rank)
        m = rank - f
        k = np.int64(f - 1)
        _select_nb(a, k, low, n - 1)
        _min_to_front_nb(a, k + 1, n - 1)
        out[i] = a[k] * (1 - m) + a[k + 1] * m
        low = k
    return out


@kernel
def accounting_1c_nb(c, gold, peak_eval, hacking, gpus, held_after_h, in_scope, stopped, demoted,
                     delivered_eval, delivered_gold, best_gold, wasted_gpu_h, positive):
    """Row ``c`` of what the metrics add to the engine's outputs: the gold score of the
    delivered checkpoint and of the best evaluation, the wasted GPU-hours (hacking jobs,
    after their peak: MODEL.md section 8) and the detection positives.  Inputs ``[C, J]``
    (``gold``: ``[C, J, E]``); the four outputs ``[C, J]`` are written in place."""
    for j in range(gold.shape[1]):
        delivered_gold[c, j] = gold[c, j, delivered_eval[c, j] - 1]
        best_gold[c, j] = gold[c, j, peak_eval[c, j] - 1]
        wasted_gpu_h[c, j] = gpus[c, j] * held_after_h[c, j] if hacking[c, j] else 0.0
        # ``&`` and ``|``, not ``and`` and ``or``: their short circuits compiled to branches
        # on flags random per job, often mispredicted (docs/performance.md, round 43)
        positive[c, j] = in_scope[c, j] & (stopped[c, j] | demoted[c, j])


@driver
def accounting_nb(gold, peak_eval, hacking, gpus, held_after_h, in_scope, stopped, demoted,
                  delivered_eval, delivered_gold, best_gold, wasted_gpu_h, positive):
    """``accounting_1c_nb`` for every cluster row."""
    for c_ in prange(gold.shape[0]):
        c = np.int64(c_)  # signed, as outside prange: each per-cluster kernel compiles once
        accounting_1c_nb(c, gold, peak_eval, hacking, gpus, held_after_h, in_scope, stopped,
                         demoted, delivered_eval, delivered_gold, best_gold, wasted_gpu_h,
                         positive)


@kernel
def cluster_metrics_1c_nb(c, capacity, n_evals, job_type, gpus, arrival_h, end_h, held_h,
                          wasted_gpu_h, hacking, in_scope, positive, stopped, delivered_gold,
                          best_gold, trigger_eval, peak_eval, out):
    """Row ``c`` of ``cluster_metrics_nb``: writes column ``out[:, c]``.

    A trigger at the last evaluation (``n_evals``) coincides with completion: it counts
    as a positive but frees nothing, so ``tp_freed`` and ``fp_freed`` (stopped earlier)
    and ``pos_at_completion`` keep the two apart (MODEL.md section 8, stop recall).  A
    demotion before the last evaluation frees nothing either and is no trigger at
    completion, so ``fp_freed`` is counted here, not derived from the other counts."""
    n_jobs = job_type.shape[1]
    jct = end_h[c] - arrival_h[c]
    # The maximum, minimum and means are summed up in the loop below, as numba's
    # ``max``/``min``/``mean`` compute them (the first NaN wins; sums in index order),
    # rather than called: each would be one more function to compile on a cold start.
    last_end = end_h[c, 0]
    first_arrival = arrival_h[c, 0]
    nan_end = 0.0  # the first NaN among the ends, if any
    has_nan_end = False
    jct_sum = 0.0
    gold_sum = 0.0
    gpu_h = 0.0
    wasted = 0.0
    queue = 0.0
    g_hack = 0.0
    n_hack = 0
    g_healthy = 0.0
    n_healthy = 0
    regret = 0.0
    tp = fp = fn = tn = 0
    delay = 0.0
    n_stop = 0
    tp_freed = 0
    fp_freed = 0
    at_completion = 0
    hacking_gpu_h = 0.0
    for j in range(n_jobs):
        e = end_h[c, j]
        if np.isnan(e) and not has_nan_end:
            nan_end = e
            has_nan_end = True
        if e > last_end:
            last_end = e
        if arrival_h[c, j] < first_arrival:
            first_arrival = arrival_h[c, j]
        jct_sum += jct[j]
        gold_sum += delivered_gold[c, j]
        gpu_h += gpus[c, j] * held_h[c, j]
        wasted += wasted_gpu_h[c, j]
        queue += jct[j] - held_h[c, j]
        regret += best_gold[c, j] - delivered_gold[c, j]
        if stopped[c, j]:
            n_stop += 1
        if hacking[c, j]:
            g_hack += delivered_gold[c, j]
            n_hack += 1
            hacking_gpu_h += gpus[c, j] * held_h[c, j]
        elif job_type[c, j] == RLHF:
            g_healthy += delivered_gold[c, j]
            n_healthy += 1
        if in_scope[c, j]:
            if positive[c, j]:
                if trigger_eval[c, j] == n_evals:
                    at_completion += 1
                if hacking[c, j]:
                    tp += 1
                    delay += trigger_eval[c, j] - peak_eval[c, j]
                    if stopped[c, j] and trigger_eval[c, j] < n_evals:
                        tp_freed += 1
                else:
                    fp += 1
                    if stopped[c, j] and trigger_eval[c, j] < n_evals:
                        fp_freed += 1
            elif hacking[c, j]:
                fn += 1
            else:
                tn += 1
    makespan = (nan_end if has_nan_end else last_end) - first_arrival
    o = out[:, c]
    o[0] = jct_sum / n_jobs
    p50, p95, p99 = percentiles_nb(jct, (50.0, 95.0, 99.0))
    o[1] = p50
    o[2] = p95
    o[3] = p99
    o[4] = makespan
    o[5] = gpu_h / (capacity * makespan) if makespan > 0 else np.nan
    o[6] = queue / n_jobs
    o[7] = gpu_h
    o[8] = wasted
    o[9] = wasted / gpu_h if gpu_h > 0 else np.nan
    o[10] = g_hack / n_hack if n_hack > 0 else np.nan
    o[11] = g_healthy / n_healthy if n_healthy > 0 else np.nan
    o[12] = gold_sum / n_jobs
    o[13] = regret / n_jobs
    o[14] = tp
    o[15] = fp
    o[16] = fn
    o[17] = tn
    o[18] = tp / (tp + fp) if tp + fp > 0 else np.nan
    o[19] = tp / (tp + fn) if tp + fn > 0 else np.nan
    o[20] = fp / (fp + tn) if fp + tn > 0 else np.nan
    o[21] = delay
    o[22] = tp
    o[23] = n_stop
    o[24] = tp_freed
    o[25] = at_completion
    o[26] = tp_freed / (tp + fn) if tp + fn > 0 else np.nan
    o[27] = hacking_gpu_h
    o[28] = fp_freed
    o[29] = fp_freed / (fp + tn) if fp + tn > 0 else np.nan


@driver
def cluster_metrics_nb(capacity, n_evals, job_type, gpus, arrival_h, end_h, held_h, wasted_gpu_h,
                       hacking, in_scope, positive, stopped, delivered_gold, best_gold,
                       trigger_eval, peak_eval, out):
    """All inputs ``[C, J]`` (``capacity``, ``n_evals``: scalars); writes
    ``out[N_METRICS, C]`` (one contiguous row per metric, in ``METRIC_NAMES`` order)."""
    for c_ in prange(job_type.shape[0]):
        c = np.int64(c_)  # signed, as outside prange: each per-cluster kernel compiles once
        cluster_metrics_1c_nb(c, capacity, n_evals, job_type, gpus, arrival_h, end_h, held_h,
                              wasted_gpu_h, hacking, in_scope, positive, stopped, delivered_gold,
                              best_gold, trigger_eval, peak_eval, out)


@entry
def jct_counts_nb(jct_h, job_type, edges, counts, spread, sizes):
    """Count each job's completion time ``jct_h`` ``[C, J]`` in ``counts[0]`` (every job)
    and ``counts[1 + job_type]``, at the bin ``b`` of ``edges`` with ``edges[b] <= jct <
    edges[b + 1]``: ``np.searchsorted(edges, jct, "right") - 1`` clipped to the bins, so
    a value below the first edge counts in the first bin, and NaN (which numpy sorts
    last) in the last.  ``edges``: 0, log-spaced edges 40 a decade from 0.01 h
    (``fastsim.sweep.extracts.JCT_EDGES_H``), then inf.

    Adds, over clusters, what the pooled CDF's interval needs (a ratio of cluster sums,
    ``fastsim.stats.pooled_cdf_band``): with ``A`` a cluster's count of the group's jobs
    in bins ``0..b`` and ``N`` its count of the group's jobs, ``spread[g, b]`` gets ``A^2``
    and ``A N``, and ``sizes[g]`` the clusters with ``N > 0``, ``N`` and ``N^2``.  All
    integers: the same sums in any chunking."""
    n_groups, n_bins = counts.shape
    last = n_bins - 1
    own = np.zeros((n_groups, n_bins), np.int64)
    size = np.zeros(n_groups, np.int64)
    for c in range(jct_h.shape[0]):
        size[:] = 0
        for j in range(jct_h.shape[1]):
            x = jct_h[c, j]
            x = x if x == x else np.inf
            # the bin guessed from log10 (a bisection's branches, mispredicted half the
            # time, cost three times as much), then moved to the edges themselves
            g = (math.log10(x) + 2.0) * 40.0 + 1.0 if x > 0.0 else 0.0
            b = np.int64(min_nb(max_nb(g, 0.0), float(last)))
            while b > 0 and edges[b] > x:
                b -= 1
            while b < last and edges[b + 1] <= x:
                b += 1
            t = 1 + job_type[c, j]
            own[0, b] += 1
            own[t, b] += 1
            size[0] += 1
            size[t] += 1
        for g in range(n_groups):
            n = size[g]
            if n == 0:
                continue
            sizes[g, 0] += 1
            sizes[g, 1] += n
            sizes[g, 2] += n * n
            a = np.int64(0)
            for b in range(n_bins):
                a += own[g, b]
                counts[g, b] += own[g, b]
                own[g, b] = 0
                spread[g, b, 0] += a * a
                spread[g, b, 1] += a * n
