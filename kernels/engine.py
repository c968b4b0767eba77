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

from .codes import FIFO, LOSS_AWARE, SRTF_EST, TIRESIAS
from .jit import driver, kernel
from .schedulers import (is_preemptive_nb, loss_aware_rate_nb, precedes_nb,
                         priority_key_nb)

WAITING = 1
RUNNING = 2
DONE = 3


@kernel
def _next_eval_nb(t, attained_now, owed_now, T, n_evals):
    """Time and service point of a running job's next evaluation strictly after service
    ``attained_now`` (``inf`` if none is left); ``T``: its run time."""
    e = int(attained_now / T * n_evals) + 1
    while e > 1 and T * ((e - 1) / n_evals) > attained_now:
        e -= 1
    while e <= n_evals and T * (e / n_evals) <= attained_now:
        e += 1
    if e > n_evals:
        return np.inf, np.inf
    return t + owed_now + (T * (e / n_evals) - attained_now), T * (e / n_evals)


@kernel
def _attained_nb(t, since, attained0, owed0):
    """Service of a job running since ``since`` with ``attained0`` service and ``owed0``
    overhead then: the overhead is paid first."""
    dt = t - since
    if dt > owed0:
        return attained0 + (dt - owed0)
    return attained0


@kernel
def _owed_nb(t, since, owed0):
    """Overhead still owed at ``t`` by a job running since ``since`` owing ``owed0``."""
    dt = t - since
    if dt > owed0:
        return 0.0
    if dt > 0.0:
        return owed0 - dt
    return owed0


@kernel
def _held_after_nb(t, since, attained0, owed0, account_from):
    """Time in ``(since, t]`` that a running job holds its GPUs after its service
    reached ``account_from`` (overhead included)."""
    dt = t - since
    if dt <= 0.0:
        return 0.0
    if attained0 >= account_from:
        return dt
    cross = since + owed0 + (account_from - attained0)
    if t > cross:
        return t - cross
    return 0.0


@kernel
def max_points_nb(n_jobs, n_evals, n_thresholds):
    """A bound on one cluster's scheduling points.  Every point but the first holds an
    event, and a job has at most its arrival, end, demotion, ``n_evals`` evaluations and
    ``n_thresholds`` crossings; twice that leaves room and still fails fast."""
    return 2 * n_jobs * (n_evals + n_thresholds + 3) + 2


@kernel
def cluster_1c_nb(c, scheduler, backfill, thresholds_gpu_h, overhead_h, capacity,
                  gpus, arrival_h, t_est_h, loss, duration_h, end_service, demote_service,
                  account_from_h, start_h, end_h, held_h, held_after_h, n_preempt,
                  seg_job, seg_start, seg_end, seg_count, n_points):
    """Simulate cluster row ``c``; writes row ``c`` of the five per-job outputs and of the
    segments (``seg_*``: ``[C, S]``, ``S = 0`` to skip recording), and ``n_points[c]``: the
    scheduling points visited, or -1 if it reached ``max_points_nb`` and stopped there.

    A running job's state is a *base*: since ``since[j]`` it has held its GPUs, starting
    from ``attained0[j]`` service and ``owed0[j]`` overhead; its service at any ``t`` is
    the read-only ``_attained_nb``.  The base is moved only at the job's own events
    (where its service is pinned to the planned point), at a pause and at its end, so a
    reallocation writes no running job's state.  No closures and no helper taking
    arrays: either makes numba emit atomic reference counting in the loop.
    """
    n_jobs = gpus.shape[1]
    n_evals = loss.shape[2]
    preemptive = is_preemptive_nb(scheduler)
    strict = scheduler == FIFO and not backfill
    rekey = scheduler == SRTF_EST or scheduler == TIRESIAS  # keys move with service
    n_thr = thresholds_gpu_h.shape[0]
    g = gpus[c]
    my_end = end_service[c]
    my_demote = demote_service[c]
    my_from = account_from_h[c]
    dur = duration_h[c]
    t_est = t_est_h[c]
    fs = np.zeros((9, n_jobs))  # one allocation for the float state
    since, attained0, owed0 = fs[0], fs[1], fs[2]
    seg_open, held, held_after = fs[3], fs[4], fs[5]
    key, next_point, next_time = fs[6], fs[7], fs[8]
    ist = np.zeros((4, n_jobs), dtype=np.int64)  # and one for the integer state
    status, evals_seen, chosen_at, flags = ist[0], ist[1], ist[2], ist[3]
    # flags: bit 0 = has held GPUs before, bit 1 = demoted
    order = np.empty((3, n_jobs), dtype=np.int64)
    active, running = order[0], order[1]  # active: arrived, not ended, in priority order
    starts = order[2]  # jobs to start at this point, in priority order
    n_active = 0
    n_running = 0
    active_demand = 0  # GPUs demanded by all active jobs (arrived, not ended)
    free = capacity
    next_arrival = 0
    n_done = 0
    n_realloc = 0
    pending = np.inf  # Tiresias: next scheduling point after a threshold crossing
    pending_job = -1  # whose evaluation that point is, and at which service
    pending_point = 0.0
    n_seg = 0
    max_seg = seg_job.shape[1]

    unsorted = False  # whether ``active`` may be out of priority order
    points = 0
    max_points = max_points_nb(n_jobs, n_evals, n_thr)
    while n_done < n_jobs:
        points += 1
        if points > max_points:
            points = -1  # not a finite schedule (e.g. non-finite times): refuse, never loop
            break
        t = np.inf
        if next_arrival < n_jobs:
            t = arrival_h[c, next_arrival]
        # first: the first position in ``running`` whose event is at t (n_running if
        # none); the positions before it have later events, so the event loop below
        # starts there and visits the same jobs in the same order.
        first = n_running
        t_run = np.inf
        for i in range(n_running):
            if next_time[running[i]] < t_run:
                t_run = next_time[running[i]]
                first = i
        if t_run <= t:
            t = t_run
        else:
            first = n_running
        if pending < t:
            t = pending
            first = n_running
        realloc = False
        if pending == t:
            pending = np.inf
            realloc = True
            # The point is pending_job's evaluation: pin its service to the evaluation
            # grid, as every other event does, so accounting against the peak evaluation
            # (wasted compute) cannot fall on the wrong side of it by round-off.
            j = pending_job
            if status[j] == RUNNING:
                held_after[j] += _held_after_nb(t, since[j], attained0[j], owed0[j], my_from[j])
                since[j] = t
                attained0[j] = pending_point
                owed0[j] = 0.0
                if pending_point >= next_point[j]:
                    # Its own planned event (e.g. the end at its last evaluation) is this
                    # same instant, computed along another path: take it now.
                    next_time[j] = t
                    first = 0  # j may sit anywhere in ``running``
        while next_arrival < n_jobs and arrival_h[c, next_arrival] == t:
            j = next_arrival
            status[j] = WAITING
            key[j] = priority_key_nb(scheduler, t_est[j], 0.0, g[j], 0, 0.0, thresholds_gpu_h)
            active[n_active] = j
            n_active += 1
            active_demand += g[j]
            next_arrival += 1
            realloc = True
            unsorted = True
        i = first
        while i < n_running:
            j = running[i]
            if next_time[j] != t:
                i += 1
                continue
            # j's own event: move its base to t, service pinned to the planned point.
            held_after[j] += _held_after_nb(t, since[j], attained0[j], owed0[j], my_from[j])
            since[j] = t
            attained0[j] = next_point[j]
            owed0[j] = 0.0
            if attained0[j] >= my_end[j]:
                status[j] = DONE
                end_h[c, j] = t
                held[j] += t - seg_open[j]
                free += g[j]
                active_demand -= g[j]
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
            demoted = flags[j] >> 1
            if preemptive and not demoted and attained0[j] >= my_demote[j]:
                demoted = 1
                flags[j] |= 2
                realloc = True
                unsorted = True
            if scheduler == LOSS_AWARE:
                e = evals_seen[j] + 1
                if attained0[j] >= dur[j] * (e / n_evals):
                    evals_seen[j] = e
                    rate = 0.0
                    if e >= 2:
                        between = g[j] * (dur[j] * (e / n_evals) - dur[j] * ((e - 1) / n_evals))
                        rate = loss_aware_rate_nb(loss[c, j, e - 2], loss[c, j, e - 1], between)
                    key[j] = priority_key_nb(scheduler, t_est[j], attained0[j], g[j], e, rate,
                                             thresholds_gpu_h)
                    realloc = True
                    unsorted = True
            # plan j's next event that matters (docs/model.md)
            p = my_end[j]
            if preemptive and not demoted and my_demote[j] < p:
                p = my_demote[j]
            if scheduler == LOSS_AWARE:
                pe = dur[j] * ((evals_seen[j] + 1) / n_evals)
                if pe < p:
                    p = pe
            elif scheduler == TIRESIAS:
                for k in range(n_thr):
                    s = thresholds_gpu_h[k] / g[j]
                    if s > attained0[j]:
                        if s < p:
                            p = s
                        break
            next_point[j] = p
            next_time[j] = t + (p - attained0[j])
            if scheduler == TIRESIAS:
                # The crossing is not a scheduling point; the next evaluation of any
                # running job (or an arrival/end, which reallocates anyway) is.
                for r in range(n_running):
                    jr = running[r]
                    if jr != j:  # rebase, as at every Tiresias reallocation (see there)
                        held_after[jr] += _held_after_nb(t, since[jr], attained0[jr], owed0[jr],
                                                         my_from[jr])
                        attained0[jr] = _attained_nb(t, since[jr], attained0[jr], owed0[jr])
                        owed0[jr] = _owed_nb(t, since[jr], owed0[jr])
                        since[jr] = t
                    te, pe = _next_eval_nb(
                        t, _attained_nb(t, since[jr], attained0[jr], owed0[jr]),
                        _owed_nb(t, since[jr], owed0[jr]), dur[jr], n_evals)
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
            # Tiresias alone moves every running job's base here, as the previous engine
            # did: its threshold crossings and pinned pending points chain event times
            # through long busy periods, and reading service lazily (fewer, different
            # roundings) let those times drift from the previous results by 2e-11 h (2e-12
            # relative in jct_h), beyond the 1e-12 budget.  srtf_est and loss_aware stay
            # within a few ulps lazily.
            for r in range(n_running):
                j = running[r]
                held_after[j] += _held_after_nb(t, since[j], attained0[j], owed0[j], my_from[j])
                attained0[j] = _attained_nb(t, since[j], attained0[j], owed0[j])
                owed0[j] = _owed_nb(t, since[j], owed0[j])
                since[j] = t
        n_start = 0
        if active_demand <= capacity:
            # All-fit fast path (exact).  Every active job fits at once, so the greedy walk
            # (preemptive: over all active jobs; non-preemptive: over the waiting ones in
            # the free GPUs, whose demand is active_demand - (capacity - free) <= free)
            # chooses every job whatever the order: nobody is paused, no walk breaks
            # (strict fifo's head-of-line block included), and every waiting job starts.
            # The only thing the order decides is the order of ``starts``, which fixes the
            # order of ``running`` (hence of same-instant events and of segments): the
            # waiting jobs are sorted among themselves by (demoted, key, job), the
            # restriction of the total order, using their stored keys, which are current:
            # a waiting job's inputs do not change (keys are stored at arrival, at a
            # loss_aware evaluation, or re-keyed at the full reallocation that paused it).
            # Running jobs' keys are not refreshed and ``active`` is neither sorted nor
            # reordered; ``unsorted`` is left as it is.  That keeps the invariant the
            # sort-skip relies on ("unsorted is False => active is in order of the stored
            # keys"), and the next full reallocation re-keys every running job (srtf_est,
            # tiresias; unsorted = True) before it sorts, exactly as before.  After this
            # path no job is waiting, so every job a later full reallocation reads is
            # either re-keyed there or keyed at arrival since.  Tiresias' rebase and
            # ``pending`` reset above run as at any reallocation (same floats, same
            # meaning: the crossing's queue change cannot alter an all-fit allocation).
            if n_active > n_running:
                for a in range(n_active):
                    j = active[a]
                    if status[j] != WAITING:
                        continue
                    b = n_start - 1
                    while b >= 0 and precedes_nb(flags[j] >> 1, key[j], j, flags[starts[b]] >> 1,
                                                 key[starts[b]], starts[b]):
                        starts[b + 1] = starts[b]
                        b -= 1
                    starts[b + 1] = j
                    n_start += 1
        else:
            # Keys of active jobs, from observed state only.  key[j] is kept equal to the
            # job's key: it is set at arrival, and again whenever an input changes, which
            # only happens to a running job: attained (srtf_est, tiresias, here) and the loss
            # readings (loss_aware, at its evaluations).  fifo's and sjf_est's never change.
            if rekey and n_running > 0:
                for r in range(n_running):
                    j = running[r]
                    key[j] = priority_key_nb(scheduler, t_est[j],
                                             _attained_nb(t, since[j], attained0[j], owed0[j]),
                                             g[j], 0, 0.0, thresholds_gpu_h)
                unsorted = True
            # Insertion sort: the order changes little between points, so this is ~linear.
            # Keys are never NaN, so the order is strict and total: skipping the sort when no
            # key, demotion or arrival changed leaves the order it would produce.
            if unsorted:
                unsorted = False
                for a in range(1, n_active):
                    j = active[a]
                    b = a - 1
                    while b >= 0 and precedes_nb(flags[j] >> 1, key[j], j, flags[active[b]] >> 1,
                                                 key[active[b]], active[b]):
                        active[b + 1] = active[b]
                        b -= 1
                    active[b + 1] = j
            n_realloc += 1
            if preemptive:
                # Greedy walk; waiting jobs chosen go to ``starts`` (in priority order), and
                # once every GPU is given out no later job can be chosen (demands are >= 1).
                avail = capacity
                for a in range(n_active):
                    j = active[a]
                    if g[j] <= avail:
                        avail -= g[j]
                        chosen_at[j] = n_realloc
                        if status[j] == WAITING:
                            starts[n_start] = j
                            n_start += 1
                        if avail == 0:
                            break
                i = 0
                while i < n_running:
                    j = running[i]
                    if chosen_at[j] == n_realloc:
                        i += 1
                        continue
                    held_after[j] += _held_after_nb(t, since[j], attained0[j], owed0[j], my_from[j])
                    attained0[j] = _attained_nb(t, since[j], attained0[j], owed0[j])
                    owed0[j] = _owed_nb(t, since[j], owed0[j])
                    since[j] = t
                    held[j] += t - seg_open[j]
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
            else:
                will_free = free
                for a in range(n_active):
                    j = active[a]
                    if status[j] != WAITING:
                        continue
                    if g[j] <= will_free:
                        will_free -= g[j]
                        starts[n_start] = j
                        n_start += 1
                    elif strict:
                        break
        for q in range(n_start):
            j = starts[q]
            status[j] = RUNNING
            free -= g[j]
            since[j] = t
            seg_open[j] = t
            if flags[j] & 1:
                owed0[j] += overhead_h
            else:
                flags[j] |= 1
                start_h[c, j] = t
            running[n_running] = j
            n_running += 1
            # plan j's next event that matters (as above; kept inline on purpose: as a helper
            # taking the thresholds array it cost 3% of srtf_est's time, measured)
            p = my_end[j]
            if preemptive and not (flags[j] >> 1) and my_demote[j] < p:
                p = my_demote[j]
            if scheduler == LOSS_AWARE:
                pe = dur[j] * ((evals_seen[j] + 1) / n_evals)
                if pe < p:
                    p = pe
            elif scheduler == TIRESIAS:
                for k in range(n_thr):
                    s = thresholds_gpu_h[k] / g[j]
                    if s > attained0[j]:
                        if s < p:
                            p = s
                        break
            next_point[j] = p
            next_time[j] = t + owed0[j] + (p - attained0[j])
    for j in range(n_jobs):
        held_h[c, j] = held[j]
        held_after_h[c, j] = held_after[j]
    seg_count[c] = n_seg
    n_points[c] = points


@driver
def cluster_nb(scheduler, backfill, thresholds_gpu_h, overhead_h, capacity, gpus, arrival_h,
               t_est_h, loss, duration_h, end_service, demote_service, account_from_h,
               start_h, end_h, held_h, held_after_h, n_preempt, seg_job, seg_start, seg_end,
               seg_count, n_points):
    """Simulate every cluster row: inputs ``[C, J]`` (``loss``: ``[C, J, E]``); writes
    ``start_h, end_h, held_h, held_after_h, n_preempt`` ``[C, J]``, the segments and
    ``n_points`` ``[C]`` (-1: the cluster hit the bound on scheduling points)."""
    for c in prange(gpus.shape[0]):
        cluster_1c_nb(c, scheduler, backfill, thresholds_gpu_h, overhead_h, capacity, gpus,
                      arrival_h, t_est_h, loss, duration_h, end_service, demote_service,
                      account_from_h, start_h, end_h, held_h, held_after_h, n_preempt,
                      seg_job, seg_start, seg_end, seg_count, n_points)


@kernel
def service_points_1c_nb(c, duration_h, stopped, demoted, trigger_eval, hacking, peak_eval,
                         n_evals, end_service, demote_service, account_from_h):
    """Row ``c`` of ``service_points_nb``."""
    for j in range(duration_h.shape[1]):
        T = duration_h[c, j]
        at_trigger = T * (trigger_eval[c, j] / n_evals)
        end_service[c, j] = at_trigger if stopped[c, j] else T
        demote_service[c, j] = (at_trigger if demoted[c, j] and trigger_eval[c, j] < n_evals
                                else np.inf)
        account_from_h[c, j] = T * (peak_eval[c, j] / n_evals) if hacking[c, j] else np.inf


@driver
def service_points_nb(duration_h, stopped, demoted, trigger_eval, hacking, peak_eval, n_evals,
                      end_service, demote_service, account_from_h):
    """Per job, the service (h) at which it ends, is demoted and starts counting as wasted
    (``inf``: never).  Inputs ``[C, J]``; the three outputs ``[C, J]`` are written in place.

    Physics and accounting, not decisions: the decisions (``stopped``, ``demoted``,
    ``trigger_eval``) come from ``kernels.stops``; ``hacking`` and ``peak_eval`` only
    place the start of waste (MODEL.md section 8).
    """
    for c in prange(duration_h.shape[0]):
        service_points_1c_nb(c, duration_h, stopped, demoted, trigger_eval, hacking, peak_eval,
                             n_evals, end_service, demote_service, account_from_h)
