"""The event-driven cluster engine: one 64-GPU cluster per ``prange`` iteration.

It advances from scheduling point to scheduling point and visits only the points that
can change the allocation (arrivals, ends, demotions, every evaluation under
``loss_aware``, the first point after a Tiresias threshold crossing); docs/model.md
argues why the others change nothing, and tests/reference.py checks it.

The engine owns the *physics* (true run time ``duration_h``) and the *accounting*
(``account_from_h``, the service after which held time is wasted); every *decision*
goes through ``kernels.schedulers`` with observed quantities only.
"""
import numpy as np
from numba import prange

from kernels.codes import FIFO, LOSS_AWARE, SRTF_EST, TIRESIAS
from kernels.jit import driver, kernel
from kernels.schedulers import (is_preemptive_nb, loss_aware_rate_nb, precedes_nb,
                                priority_key_nb)

WAITING = 1
RUNNING = 2
DONE = 3


@kernel
def _next_threshold_service_nb(attained_h, gpus, thresholds_gpu_h):
    """Service at which the job reaches its next Tiresias threshold (inf if none)."""
    for i in range(thresholds_gpu_h.shape[0]):  # not an iterator: no reference counting
        s = thresholds_gpu_h[i] / gpus
        if s > attained_h:
            return s
    return np.inf


@kernel
def _next_eval_nb(j, t, attained_now, owed_now, duration_h, n_evals):
    """Time and service point of running job ``j``'s next evaluation strictly after
    service ``attained_now`` (``inf`` if none is left)."""
    T = duration_h[j]
    e = int(attained_now / T * n_evals) + 1
    while e > 1 and T * ((e - 1) / n_evals) > attained_now:
        e -= 1
    while T * (e / n_evals) <= attained_now:
        e += 1
    if e > n_evals:
        return np.inf, np.inf
    return t + owed_now + (T * (e / n_evals) - attained_now), T * (e / n_evals)


@kernel
def cluster_1c_nb(c, scheduler, backfill, thresholds_gpu_h, overhead_h, capacity,
                  gpus, arrival_h, t_est_h, loss, duration_h, end_service, demote_service,
                  account_from_h, start_h, end_h, held_h, held_after_h, n_preempt,
                  seg_job, seg_start, seg_end, seg_count):
    """Simulate cluster row ``c``; writes row ``c`` of the five per-job outputs and of the
    segment buffers (``seg_*``: ``[C, S]``, ``S = 0`` to skip recording)."""
    n_jobs = gpus.shape[1]
    n_evals = loss.shape[2]
    preemptive = is_preemptive_nb(scheduler)
    strict = scheduler == FIFO and not backfill
    g = gpus[c]
    status = np.zeros(n_jobs, dtype=np.int8)
    attained = np.zeros(n_jobs)
    owed = np.zeros(n_jobs)
    run_since = np.zeros(n_jobs)
    seg_open = np.zeros(n_jobs)
    held = np.zeros(n_jobs)
    held_after = np.zeros(n_jobs)
    ever_ran = np.zeros(n_jobs, dtype=np.bool_)
    demoted = np.zeros(n_jobs, dtype=np.bool_)
    evals_seen = np.zeros(n_jobs, dtype=np.int64)
    n_loss = np.zeros(n_jobs, dtype=np.int64)
    loss_rate = np.zeros(n_jobs)
    key = np.zeros(n_jobs)
    chosen = np.zeros(n_jobs, dtype=np.bool_)
    next_point = np.full(n_jobs, np.inf)
    next_time = np.full(n_jobs, np.inf)
    active = np.empty(n_jobs, dtype=np.int64)  # arrived, not ended, kept in priority order
    running = np.empty(n_jobs, dtype=np.int64)
    n_active = 0
    n_running = 0
    free = capacity
    next_arrival = 0
    n_done = 0
    pending = np.inf  # Tiresias: next scheduling point after a threshold crossing
    pending_job = -1  # whose evaluation that point is, and at which service
    pending_point = 0.0
    n_seg = 0
    max_seg = seg_job.shape[1]
    my_end = end_service[c]
    my_demote = demote_service[c]
    my_from = account_from_h[c]
    dur = duration_h[c]

    # The two helpers below are closures because numba inlines closures for certain:
    # as module-level kernels taking seven arrays, LLVM kept them as calls, and the
    # calls (dozens of arguments, reference counting) were most of the engine's time.
    def sync(j, t):
        """Bring running job ``j``'s service, owed overhead and held time up to ``t``."""
        dt = t - run_since[j]
        if dt > 0.0:
            held[j] += dt
            if attained[j] >= my_from[j]:
                held_after[j] += dt
            else:
                cross = run_since[j] + owed[j] + (my_from[j] - attained[j])
                if t > cross:
                    held_after[j] += t - cross
            if dt > owed[j]:
                attained[j] += dt - owed[j]
                owed[j] = 0.0
            else:
                owed[j] -= dt
            run_since[j] = t

    def plan(j):
        """Service point and time of running job ``j``'s next event that matters."""
        p = my_end[j]
        if preemptive and not demoted[j] and my_demote[j] < p:
            p = my_demote[j]
        if scheduler == LOSS_AWARE:
            pe = dur[j] * ((evals_seen[j] + 1) / n_evals)
            if pe < p:
                p = pe
        elif scheduler == TIRESIAS:
            pc = _next_threshold_service_nb(attained[j], g[j], thresholds_gpu_h)
            if pc < p:
                p = pc
        next_point[j] = p
        next_time[j] = run_since[j] + owed[j] + (p - attained[j])

    def job_key(j):
        return priority_key_nb(scheduler, t_est_h[c, j], attained[j], g[j], n_loss[j],
                               loss_rate[j], thresholds_gpu_h)

    unsorted = False  # whether ``active`` may be out of priority order
    while n_done < n_jobs:
        t = np.inf
        if next_arrival < n_jobs:
            t = arrival_h[c, next_arrival]
        for i in range(n_running):
            if next_time[running[i]] < t:
                t = next_time[running[i]]
        if pending < t:
            t = pending
        realloc = False
        if pending == t:
            pending = np.inf
            realloc = True
            # The point is pending_job's evaluation: pin its service to the evaluation
            # grid, as every other event does, so accounting against the peak evaluation
            # (wasted compute) cannot fall on the wrong side of it by round-off.
            if status[pending_job] == RUNNING:
                sync(pending_job, t)
                attained[pending_job] = pending_point
                owed[pending_job] = 0.0
                if pending_point >= next_point[pending_job]:
                    # Its own planned event (e.g. the end at its last evaluation) is this
                    # same instant, computed along another path: take it now.
                    next_time[pending_job] = t
        while next_arrival < n_jobs and arrival_h[c, next_arrival] == t:
            j = next_arrival
            status[j] = WAITING
            key[j] = job_key(j)
            active[n_active] = j
            n_active += 1
            next_arrival += 1
            realloc = True
            unsorted = True
        i = 0
        while i < n_running:
            j = running[i]
            if next_time[j] != t:
                i += 1
                continue
            sync(j, t)
            attained[j] = next_point[j]  # snap: the event is defined by this service point
            owed[j] = 0.0
            if attained[j] >= my_end[j]:
                status[j] = DONE
                end_h[c, j] = t
                free += g[j]
                n_done += 1
                if n_seg < max_seg:
                    seg_job[c, n_seg] = j
                    seg_start[c, n_seg] = seg_open[j]
                    seg_end[c, n_seg] = t
                n_seg += 1
                running[i] = running[n_running - 1]
                n_running -= 1
                k = 0
                for a in range(n_active):
                    if active[a] != j:
                        active[k] = active[a]
                        k += 1
                n_active = k
                next_time[j] = np.inf
                realloc = True
                continue
            if preemptive and not demoted[j] and attained[j] >= my_demote[j]:
                demoted[j] = True
                realloc = True
                unsorted = True
            if scheduler == LOSS_AWARE:
                e = evals_seen[j] + 1
                if attained[j] >= dur[j] * (e / n_evals):
                    evals_seen[j] = e
                    n_loss[j] = e
                    if e >= 2:
                        between = g[j] * (dur[j] * (e / n_evals) - dur[j] * ((e - 1) / n_evals))
                        loss_rate[j] = loss_aware_rate_nb(loss[c, j, e - 2], loss[c, j, e - 1], between)
                    key[j] = job_key(j)
                    realloc = True
                    unsorted = True
            plan(j)
            if scheduler == TIRESIAS:
                # The crossing is not a scheduling point; the next evaluation of any
                # running job (or an arrival/end, which reallocates anyway) is.
                for r in range(n_running):
                    jr = running[r]
                    if jr != j:
                        sync(jr, t)
                    te, pe = _next_eval_nb(jr, t, attained[jr], owed[jr], dur, n_evals)
                    if pe == next_point[jr]:
                        # The evaluation is also jr's own planned event (its end, say):
                        # use the very same float time so both happen at one instant.
                        te = next_time[jr]
                    if te < pending:
                        pending = te
                        pending_job = jr
                        pending_point = pe
            i += 1
        if not realloc:
            continue
        if scheduler == TIRESIAS:
            pending = np.inf  # queues are recomputed now
        # Every running job's state is brought up to t (not needed by fifo's keys, but
        # the held-time sums must keep the same terms, to the last bit).
        if scheduler != FIFO:
            for r in range(n_running):
                sync(running[r], t)
        # Keys of active jobs, from observed state only.  key[j] is kept equal to
        # job_key(j): it is set at arrival, and again whenever an input changes, which
        # only happens to a running job: attained (srtf_est, tiresias, here) and the loss
        # readings (loss_aware, at its evaluations).  fifo's and sjf_est's never change.
        if scheduler == SRTF_EST or scheduler == TIRESIAS:
            for r in range(n_running):
                key[running[r]] = job_key(running[r])
            unsorted = True
        # Insertion sort: the order changes little between points, so this is ~linear.
        # Keys are never NaN, so the order is strict and total: skipping the sort when no
        # key, demotion or arrival changed leaves the order it would produce.
        if unsorted:
            unsorted = False
            for a in range(1, n_active):
                j = active[a]
                b = a - 1
                while b >= 0 and precedes_nb(demoted[j], key[j], j, demoted[active[b]],
                                             key[active[b]], active[b]):
                    active[b + 1] = active[b]
                    b -= 1
                active[b + 1] = j
        if preemptive:
            avail = capacity
            for a in range(n_active):
                j = active[a]
                chosen[j] = g[j] <= avail
                if chosen[j]:
                    avail -= g[j]
            i = 0
            while i < n_running:
                j = running[i]
                if chosen[j]:
                    i += 1
                    continue
                sync(j, t)
                status[j] = WAITING
                n_preempt[c, j] += 1
                free += g[j]
                next_time[j] = np.inf
                if n_seg < max_seg:
                    seg_job[c, n_seg] = j
                    seg_start[c, n_seg] = seg_open[j]
                    seg_end[c, n_seg] = t
                n_seg += 1
                running[i] = running[n_running - 1]
                n_running -= 1
        for a in range(n_active):
            j = active[a]
            if status[j] != WAITING:
                continue
            if preemptive:
                go = chosen[j]
            else:
                go = g[j] <= free
                if not go and strict:
                    break
            if not go:
                continue
            status[j] = RUNNING
            free -= g[j]
            run_since[j] = t
            seg_open[j] = t
            if ever_ran[j]:
                owed[j] += overhead_h
            else:
                ever_ran[j] = True
                start_h[c, j] = t
            running[n_running] = j
            n_running += 1
            plan(j)
    for j in range(n_jobs):
        held_h[c, j] = held[j]
        held_after_h[c, j] = held_after[j]
    seg_count[c] = n_seg


@driver
def cluster_nb(scheduler, backfill, thresholds_gpu_h, overhead_h, capacity, gpus, arrival_h,
               t_est_h, loss, duration_h, end_service, demote_service, account_from_h,
               start_h, end_h, held_h, held_after_h, n_preempt, seg_job, seg_start, seg_end,
               seg_count):
    """Simulate every cluster row: inputs ``[C, J]`` (``loss``: ``[C, J, E]``); writes
    ``start_h, end_h, held_h, held_after_h, n_preempt`` ``[C, J]`` and the segments."""
    for c in prange(gpus.shape[0]):
        cluster_1c_nb(c, scheduler, backfill, thresholds_gpu_h, overhead_h, capacity, gpus,
                      arrival_h, t_est_h, loss, duration_h, end_service, demote_service,
                      account_from_h, start_h, end_h, held_h, held_after_h, n_preempt,
                      seg_job, seg_start, seg_end, seg_count)
