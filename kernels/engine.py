"""The event-driven cluster engine: one 64-GPU cluster per ``prange`` iteration.

It advances from scheduling point to scheduling point and visits only the points that
can change the allocation (arrivals, ends, demotions, every evaluation under
``loss_aware``, the first point after a Tiresias threshold crossing); docs/model.md
argues why the others change nothing, and tests/reference.py checks it.  A
``loss_aware`` evaluation reallocates only if the new key moves its job after a job the
last walk passed over (``_keeps_place_nb``).

The engine owns the *physics* (true run time ``duration_h``) and the *accounting*
(``account_from_h``, the service after which held time is wasted); every *decision*
goes through ``kernels.schedulers`` with observed quantities only.

A cluster's state: one ``JOB`` record per job (``jobs[j]`` is a reference into the
cluster's record array): what the job is, copied once, and the *base* of a running job:
since ``since`` it has held its GPUs, starting from ``attained0`` service and ``owed0``
overhead; its service at any ``t`` is the read-only ``_attained_nb``.  The base moves
only at the job's own events (service pinned to the planned point, ``_pin_nb``), at a
pause or an end and, under Tiresias, at every reallocation (``_rebase_nb``), so a
reallocation writes no other running job's state.  The time of a running job's next
event is kept apart, in ``next_time``, because the search for the next point reads it
for every running job.  Four job lists: ``active`` (arrived, not ended; in priority
order once sorted; a non-preemptive scheduler never pauses a job, so there a job leaves
``active`` when it starts), ``running``, ``starts`` (to start at this point, in order) and
``loss_aware``'s ``passed``.

``cluster_1c_nb`` reads as one scheduling point: the next point, Tiresias' pending
point, arrivals, the running jobs' own events (``_own_events_nb``), then, if the
allocation can change, the reallocation (``_reallocate_nb``) and the starts
(``_start_chosen_nb``).  It and those three steps are templates over the globals
``SCHEDULER``, ``PREEMPTIVE`` and ``REKEY``: ``_engine`` binds them per scheduler
(``kernels.jit.bind``), so each engine holds only its scheduler's steps.  The steps
are parts (``@part``, inlined by numba before type inference) over one job's record and
scalars or over the job lists.  An inlined part's array argument is a new reference to
the array: an atomic count up and down on every call unless numba's pruner removes the
pair, which it does only if no exception exit lies between them and the array falls out
of use at one point on every path.  So the loop is compiled with numpy's error model
(its own divisions raise nothing), LLVM inlines every kernel it calls, and a part whose
branches use different arrays returns through ``last_use_nb`` (docs/performance.md,
rounds 9, 17 and 20; ``benchmarks/engine_refcounts.py`` counts the pairs left in each
engine's loop: none, which ``tests/test_engine_refcounts.py`` checks).
"""
import numpy as np
from numba import prange

from .codes import FIFO, LOSS_AWARE, SCHEDULERS, SJF_EST, SRTF_EST, TIRESIAS
from .libm import bits_nb
from .jit import (bind, driver, engine_kernel, kernel, kernel_and_entry, last_use_nb, max_nb,
                  min_nb, one_of, part)
from .schedulers import (is_preemptive_nb, loss_aware_rate_nb, precedes_nb,
                         priority_key_nb)

WAITING = 1
RUNNING = 2
DONE = 3
# bits of ``flags``
HAS_RUN = 1  # has held GPUs before: a restart pays the preemption overhead
DEMOTED = 2

JOB = np.dtype([
    # what the job is (copied from the cluster's inputs; ``t_est``: its static key input)
    ("gpus", np.int64), ("t_est", np.float64), ("duration", np.float64),
    ("end", np.float64), ("demote", np.float64), ("account_from", np.float64),
    # the base of a running job, and the service at its next planned event
    ("since", np.float64), ("attained0", np.float64), ("owed0", np.float64),
    ("next_point", np.float64),
    # accounting: start of the open segment, time held, time held after account_from
    ("seg_open", np.float64), ("held", np.float64), ("held_after", np.float64),
    # ordering: key, WAITING/RUNNING/DONE, evaluations read (loss_aware), last walk
    # that chose it, how many jobs that walk passed over before it, HAS_RUN | DEMOTED
    ("key", np.float64), ("status", np.int64), ("evals_seen", np.int64),
    ("chosen_at", np.int64), ("block", np.int64), ("flags", np.int64),
    # loss_aware: the service at its last evaluation seen and at its next one
    ("eval_last", np.float64), ("eval_next", np.float64),
], align=True)


@kernel
def _next_eval_nb(t, attained_now, owed_now, T, n_evals):
    """Time and service point of a running job's next evaluation strictly after service
    ``attained_now`` (``inf`` if none is left); ``T``: its run time."""
    e = np.int64(attained_now / T * n_evals) + 1
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


@kernel_and_entry
def max_points_nb(n_jobs, n_evals, n_thresholds):
    """A bound on one cluster's scheduling points.  Every point but the first holds an
    event, and a job has at most its arrival, end, demotion, ``n_evals`` evaluations and
    ``n_thresholds`` crossings; twice that leaves room and still fails fast."""
    return 2 * n_jobs * (n_evals + n_thresholds + 3) + 2


@part
def _new_job_nb(job, gpus, t_est, duration, end, demote, account_from):
    """A job's record before it arrives."""
    job.gpus, job.t_est, job.duration = gpus, t_est, duration
    job.end, job.demote, job.account_from = end, demote, account_from
    job.since = job.attained0 = job.owed0 = job.next_point = 0.0
    job.seg_open = job.held = job.held_after = job.key = job.eval_last = job.eval_next = 0.0
    job.status = job.evals_seen = job.chosen_at = job.block = job.flags = 0


@part
def _pin_nb(job, t, point):
    """Move a running job's base to ``t`` at one of its own events, its service pinned to
    the planned ``point``, so accounting cannot fall on the wrong side of it by round-off:
    a job that reaches at most ``account_from`` by ``t`` held nothing after it, whatever
    ``t`` and the crossing instant, computed along different sums, read."""
    if point > job.account_from:
        job.held_after += _held_after_nb(t, job.since, job.attained0, job.owed0,
                                         job.account_from)
    job.since = t
    job.attained0 = point
    job.owed0 = 0.0


@part
def _rebase_nb(job, t):
    """Move a running job's base to ``t``, its service and overhead read at ``t``."""
    job.held_after += _held_after_nb(t, job.since, job.attained0, job.owed0, job.account_from)
    job.attained0 = _attained_nb(t, job.since, job.attained0, job.owed0)
    job.owed0 = _owed_nb(t, job.since, job.owed0)
    job.since = t


@part
def _plan_nb(job, t, scheduler, preemptive, n_evals, thresholds_gpu_h):
    """Plan a running job's next event that matters (docs/model.md): its end, its demotion,
    its next evaluation (``loss_aware``) or its next threshold crossing (Tiresias)."""
    p = job.end
    if preemptive and not job.flags & DEMOTED and job.demote < p:
        p = job.demote
    if scheduler == LOSS_AWARE:
        pe = job.eval_next
        if pe < p:
            p = pe
    # the first threshold (in order) above the job's service: scanned from the top, as a
    # part does not break out of a loop over an array
    n_thr = thresholds_gpu_h.shape[0] if scheduler == TIRESIAS else 0
    crossing = np.inf
    for k in range(n_thr - 1, -1, -1):
        s = thresholds_gpu_h[k] / job.gpus
        if s > job.attained0:
            crossing = s
    if crossing < p:
        p = crossing
    job.next_point = p
    return t + job.owed0 + (p - job.attained0)


@part
def _start_nb(job, t, overhead_h):
    """The job takes its GPUs at ``t``; a restart owes the preemption overhead.  Returns
    whether this is its first start."""
    job.status = RUNNING
    job.since = t
    job.seg_open = t
    if job.flags & HAS_RUN:
        job.owed0 += overhead_h
        return False
    job.flags |= HAS_RUN
    return True


@part
def _reached_evaluation_nb(job, n_evals):
    """``loss_aware``: whether a running job's service reached its next evaluation, which
    it then counts as seen; and the service at the evaluation seen before it, for the
    rate."""
    before = job.eval_last
    reached = job.attained0 >= job.eval_next
    if reached:
        e = job.evals_seen + 1
        job.evals_seen = e
        job.eval_last = job.eval_next
        job.eval_next = job.duration * ((e + 1) / n_evals)
    return reached, before


@kernel
def _evaluation_rate_nb(job, before_h, loss, c, j):
    """``loss_aware``: the loss rate between a job's last two evaluations seen (0 before the
    second); ``before_h``: its service at the first of the two."""
    e = job.evals_seen
    # both readings loaded on every path, so the array needs no reference count here
    before, last = loss[c, j, max_nb(e - 2, 0)], loss[c, j, e - 1]
    rate = 0.0
    if e >= 2:
        between = job.gpus * (job.eval_last - before_h)
        rate = loss_aware_rate_nb(before, last, between)
    return rate


# Events of different jobs that meet in exact arithmetic (degenerate inputs: equal run
# times, arrivals on a grid) can land a few ulps apart, each a float sum along its own
# history.  A running job's own event at most this far (relative) after a point is taken
# at that point: else a reallocation there could pause a job with an ulp of work left,
# which then waits hours for GPUs (docs/model.md, "Round-off and exact ties").  Random
# continuous inputs never put two events this close.
MERGE_RELATIVE = 2.0 ** -50


@part
def _next_point_nb(t_arrival, t_pending, next_time, running, n_running):
    """The next scheduling point ``t``: the next arrival, the earliest planned event of a
    running job or Tiresias' pending point, whichever comes first; ``(first, last)``, the
    first position in ``running`` whose event is at ``t`` (``n_running`` if none) and the
    last one holding the earliest planned event; and ``upto``, the latest event time
    taken at ``t`` (``MERGE_RELATIVE`` after it).  The positions outside them hold later
    events, so the events at ``t`` are taken from ``first`` to ``last``, in list order;
    if a second event falls within ``upto``, from the whole list."""
    first = last = n_running
    t_run = np.inf
    t_second = np.inf  # the second earliest planned event (equal ones counted twice)
    for i in range(n_running):
        ti = next_time[running[i]]
        t_second = min_nb(t_second, max_nb(ti, t_run))
        if ti < t_run:
            t_run = ti
            first = i
        if ti == t_run:
            last = i
    t = min_nb(t_arrival, t_run)
    if t_pending < t:
        t = t_pending
    upto = t + t * MERGE_RELATIVE
    if not t_run <= upto:
        first = n_running
    elif t_second <= upto and first < n_running:  # (no event found: every one at inf)
        first, last = 0, n_running - 1
    return t, (first, last), upto


@part
def _reach_pending_nb(job, t, point):
    """Tiresias' pending point: ``job``'s evaluation at service ``point``, pinned to the
    evaluation grid as every event is, if the job still runs.  Returns whether the job's
    own planned event (its end at its last evaluation, say) is this same instant,
    computed along another path, and so is taken now too."""
    due = False
    if job.status == RUNNING:
        _pin_nb(job, t, point)
        due = point >= job.next_point
    return due


@part
def _ends_nb(job, t):
    """Pin a running job at its planned event at ``t``; if that is its end, the job ends
    and counts the time it held its GPUs.  Returns whether it ended."""
    _pin_nb(job, t, job.next_point)
    ended = job.attained0 >= job.end
    if ended:
        job.status = DONE
        job.held += t - job.seg_open
    return ended


@part
def _demoted_nb(job, preemptive):
    """Whether a running job's service just reached its demotion point (preemptive
    schedulers), which puts it behind every job not demoted."""
    demoted = preemptive and not job.flags & DEMOTED and job.attained0 >= job.demote
    if demoted:
        job.flags |= DEMOTED
    return demoted


@part
def _arrive_nb(t, arrival, next_arrival, jobs, active, n_active, scheduler, thresholds_gpu_h):
    """Admit the jobs arriving at ``t`` (from ``next_arrival`` on) to ``active``; returns
    the next job to arrive, ``n_active`` and the GPUs they demand.  Under a static order
    (``sjf_est``) and under Tiresias each takes its place in ``active``, which so stays in
    order; fifo's arrival order is its order."""
    demand = 0
    while next_arrival < arrival.shape[0] and arrival[next_arrival] == t:
        job = jobs[next_arrival]
        job.status = WAITING
        job.key = priority_key_nb(scheduler, job.t_est, 0.0, job.gpus, 0, 0.0, thresholds_gpu_h)
        if scheduler == SJF_EST or scheduler == TIRESIAS:
            n_active = _insert_nb(jobs, active, n_active, next_arrival)
        else:
            active[n_active] = next_arrival
            n_active += 1
        demand += job.gpus
        next_arrival += 1
    return next_arrival, n_active, demand


@part
def _on_evaluation_nb(job, n_evals):
    """Whether a job's service is exactly one of its evaluation points."""
    e = np.int64(job.attained0 / job.duration * n_evals + 0.5)
    return 1 <= e <= n_evals and job.duration * (e / n_evals) == job.attained0


@part
def _next_evaluation_nb(t, j, jobs, next_time, running, n_running, n_evals, pending,
                        pending_job, pending_point):
    """Tiresias, after running job ``j``'s own event: rebase every other running job and
    return the earliest next evaluation of any (time, job, service), or ``pending``'s.
    An evaluation at ``t`` itself (``j`` reached its crossing, or another job its service
    point, exactly at an evaluation) makes ``t`` the pending point: the queue changes now."""
    for r in range(n_running):
        jr = running[r]
        job = jobs[jr]
        if jr != j:  # rebase, as at every Tiresias reallocation (see there)
            before = job.attained0
            _rebase_nb(job, t)
            now = job.attained0 > before and _on_evaluation_nb(job, n_evals)
        else:  # pinned at its event, a service point it reached by running
            now = _on_evaluation_nb(job, n_evals)
        te, pe = _next_eval_nb(t, _attained_nb(t, job.since, job.attained0, job.owed0),
                               _owed_nb(t, job.since, job.owed0), job.duration, n_evals)
        if now:
            te, pe = t, job.attained0
        if pe == job.next_point:
            # The evaluation is also jr's own planned event (its end, say): use the very
            # same float time so both happen at one instant.
            te = next_time[jr]
        if te < pending:
            pending = te
            pending_job = jr
            pending_point = pe
    return pending, pending_job, pending_point


@part
def _rebase_running_nb(t, jobs, running, n_running, rekey, thresholds_gpu_h):
    """Tiresias: move every running job's base to ``t`` and, if ``rekey`` (a full
    reallocation follows), key it by its service at ``t``, the new base's ``attained0``:
    one pass over the running jobs instead of two.  Returns whether a key changed (a job
    changed queue): only then does the re-key leave ``active`` out of order."""
    changed = False
    for r in range(n_running):
        job = jobs[running[r]]
        _rebase_nb(job, t)
        if rekey:
            key = priority_key_nb(TIRESIAS, job.t_est, job.attained0, job.gpus, 0, 0.0,
                                  thresholds_gpu_h)
            changed |= key != job.key
            job.key = key
    return last_use_nb(changed, (jobs, running, thresholds_gpu_h))


@part
def _rekey_running_nb(t, jobs, running, n_running, scheduler, thresholds_gpu_h):
    """Key every running job by its service at ``t`` (srtf_est; Tiresias keys them in
    ``_rebase_running_nb``)."""
    for r in range(n_running):
        job = jobs[running[r]]
        job.key = priority_key_nb(scheduler, job.t_est,
                                  _attained_nb(t, job.since, job.attained0, job.owed0),
                                  job.gpus, 0, 0.0, thresholds_gpu_h)


@kernel
def _precedes_job_nb(jobs, a, b):
    """Whether job ``a`` runs before job ``b``: the scheduler's strict, total order."""
    return precedes_nb(jobs[a].flags >> 1, jobs[a].key, a, jobs[b].flags >> 1, jobs[b].key, b)


@kernel
def _insert_nb(jobs, order, n, j):
    """Insert job ``j`` into ``order[:n]``, which is in priority order; returns ``n + 1``."""
    b = n - 1
    while b >= 0 and _precedes_job_nb(jobs, j, order[b]):
        order[b + 1] = order[b]
        b -= 1
    order[b + 1] = j
    return n + 1


@kernel
def _queue_rank_nb(jobs, j):
    """Tiresias: job ``j``'s place in the order ``(demoted, key, index)`` as one integer,
    its keys being queue indices (fewer than 2^30 queues and 2^32 jobs, far above any
    cluster's)."""
    job = jobs[j]
    return ((job.flags >> 1) << 62) | (np.int64(job.key) << 32) | np.int64(j)


@kernel
def _sort_by_queue_nb(jobs, order, n):
    """Tiresias: insertion sort of ``order[:n]`` by ``_queue_rank_nb``, the largest rank
    so far kept (it stays at the end of the sorted part after an insertion): the order
    changes little between points, so this is about linear."""
    last = _queue_rank_nb(jobs, order[0]) if n > 0 else 0
    for a in range(1, n):
        j = order[a]
        rank = _queue_rank_nb(jobs, j)
        if rank > last:
            last = rank
            continue
        order[a] = order[a - 1]
        b = a - 2
        while b >= 0 and _queue_rank_nb(jobs, order[b]) > rank:
            order[b + 1] = order[b]
            b -= 1
        order[b + 1] = j


@kernel
def _float_rank_nb(jobs, j):
    """Job ``j``'s place in the order ``(demoted, key, index)`` as integers: the key's bits
    mapped so that integer order is float order (``-0.0`` read as ``+0.0``, equal to it)."""
    job = jobs[j]
    b = bits_nb(job.key)
    # -0.0 made +0.0 on the bits: under fastmath's nsz the compiler drops a ``+ 0.0``
    b &= ~(np.uint64(b == np.uint64(1 << 63)) << np.uint64(63))
    u = b ^ ((np.uint64(0) - (b >> np.uint64(63))) | np.uint64(1 << 63))
    return (np.uint64(job.flags >> 1), u, j)


@part
def _sort_by_float_rank_nb(jobs, order, n):
    """``srtf_est``, ``loss_aware``: ``_sort_by_queue_nb`` by ``_float_rank_nb``.  Keys are
    never NaN, so the order is ``precedes_nb``'s, strict and total.  The loop is written
    twice, not once with the rank as an argument: numba does not cache a kernel that takes
    a function, so every process would compile the engine anew."""
    last = _float_rank_nb(jobs, order[0]) if n > 0 else (np.uint64(0), np.uint64(0), np.uint64(0))
    for a in range(1, n):
        j = order[a]
        rank = _float_rank_nb(jobs, j)
        if rank > last:
            last = rank
            continue
        order[a] = order[a - 1]
        b = a - 2
        while b >= 0 and _float_rank_nb(jobs, order[b]) > rank:
            order[b + 1] = order[b]
            b -= 1
        order[b + 1] = j
    return last_use_nb(0, (jobs, order))


@part
def _remove_nb(order, n, j):
    """Remove job ``j`` from ``order[:n]``, keeping the order; returns the new length."""
    k = 0
    for a in range(n):
        if order[a] != j:
            order[k] = order[a]
            k += 1
    return k


@kernel
def _waiting_in_order_nb(jobs, active, n_active, starts):
    """Every active job fits: the waiting ones go to ``starts`` in priority order (by their
    stored keys, which are current for a waiting job); returns how many."""
    n_start = 0
    for a in range(n_active):
        j = active[a]
        if jobs[j].status == WAITING:
            n_start = _insert_nb(jobs, starts, n_start, j)
    return n_start


@kernel
def _choose_preemptive_nb(jobs, active, n_active, capacity, n_realloc, starts):
    """Greedy walk over ``active`` in priority order: mark the chosen jobs
    (``chosen_at = n_realloc``) and put the waiting ones among them in ``starts``; returns
    how many.  Once every GPU is given out no later job can be chosen (demands are >= 1)."""
    n_start = 0
    avail = capacity
    a = 0
    while a < n_active and avail > 0:
        j = active[a]
        job = jobs[j]
        if job.gpus <= avail:
            avail -= job.gpus
            job.chosen_at = n_realloc
            if job.status == WAITING:
                starts[n_start] = j
                n_start += 1
        a += 1
    return n_start


@kernel
def _choose_in_blocks_nb(jobs, active, n_active, capacity, n_realloc, starts, passed):
    """The walk of ``_choose_preemptive_nb`` (loss_aware), which also records the jobs it
    passes over in ``passed``, in order, then the first it does not reach, and in each
    chosen job's ``block`` how many it passed before it (for ``_keeps_place_nb``; apart,
    as the bookkeeping slowed the other schedulers' walk).  Returns how many start and
    how many are in ``passed``."""
    n_start = n_passed = 0
    avail = capacity
    a = 0
    while a < n_active and avail > 0:
        j = active[a]
        job = jobs[j]
        if job.gpus <= avail:
            avail -= job.gpus
            job.chosen_at = n_realloc
            job.block = n_passed
            if job.status == WAITING:
                starts[n_start] = j
                n_start += 1
        else:
            passed[n_passed] = j
            n_passed += 1
        a += 1
    # then the first job not reached, if any: written either way (``passed`` has a slot to
    # spare), so the lists are used on every path (see ``last_use_nb``)
    passed[n_passed] = active[min_nb(a, n_active - 1)]
    n_passed += a < n_active
    return n_start, n_passed


@part
def _keeps_place_nb(jobs, passed, n_passed, j):
    """Whether running job ``j``, re-keyed since the last greedy walk
    (``_choose_in_blocks_nb``), still precedes the first job that walk passed over after
    it.  While every running job does, the walk would choose the same jobs: the running
    jobs fit together, so each is chosen wherever it stands, and each passed job has at
    least the running jobs before it that it had, so it sees at most the GPUs it saw."""
    b = jobs[j].block
    hi = passed[min_nb(b, n_passed - 1)]
    job, high = jobs[j], jobs[hi]
    return b >= n_passed or precedes_nb(job.flags >> 1, job.key, j, high.flags >> 1,
                                        high.key, hi)


@part
def _start_waiting_nb(jobs, active, n_active, free, strict, starts):
    """Non-preemptive walk over ``active``, which then holds only waiting jobs, in priority
    order: the jobs that fit in the ``free`` GPUs move to ``starts`` (strict fifo stops at
    the first that does not fit), the others stay, in order.  Once no GPU is free no later
    job fits (demands are >= 1).  Returns how many start and how many stay."""
    n_start = 0
    blocked = False
    # one loop that walks, then closes the gaps the started jobs left
    for a in range(n_active):
        j = active[a]
        if free > 0 and not blocked:
            job = jobs[j]
            if job.gpus <= free:
                free -= job.gpus
                starts[n_start] = j
                n_start += 1
                continue
            blocked = strict
        elif n_start == 0:
            break  # the walk is over and started nothing: the list stays as it is
        active[a - n_start] = j
    return last_use_nb((n_start, n_active - n_start), (jobs, active, starts))


@kernel
def _pause_unchosen_nb(c, t, n_realloc, jobs, next_time, running, n_running, n_preempt,
                       segments, n_seg):
    """Pause the running jobs the walk did not choose (``chosen_at != n_realloc``) and
    record their segments; returns ``n_running``, ``n_seg`` and the GPUs freed."""
    seg_job, seg_start, seg_end = segments
    freed = 0
    i = 0
    while i < n_running:
        j = running[i]
        job = jobs[j]
        if job.chosen_at == n_realloc:
            i += 1
            continue
        _rebase_nb(job, t)
        job.held += t - job.seg_open
        job.status = WAITING
        next_time[j] = np.inf
        n_preempt[c, j] += 1
        freed += job.gpus
        if n_seg < seg_job.shape[1]:
            seg_job[c, n_seg] = j
            seg_start[c, n_seg] = job.seg_open
            seg_end[c, n_seg] = t
        n_seg += 1
        running[i] = running[n_running - 1]
        n_running -= 1
    return n_running, n_seg, freed


def _own_events_nb(c, t, span, jobs, next_time, running, n_running, active, n_active, passed,
                   n_passed, loss, ended, segs, n_seg, n_done, free, active_demand, capacity,
                   pending, n_evals, thresholds_gpu_h):
    """The running jobs' own events at ``t``, those planned by ``upto`` (positions ``span
    = (first, last, upto)`` of ``running``, ``last`` following the job an end moves into a
    freed position):
    ends (recorded in ``ended = (end_h, held_h, held_after_h)`` and the segments ``segs``),
    demotions, ``loss_aware``'s evaluations (a new key) and Tiresias' crossings (a new
    ``pending`` point, a tuple ``(time, job, service)``).  Returns the counts and GPU
    totals after them, whether the allocation may change, whether a key moved, and
    ``pending``."""
    seg_job, seg_start, seg_end = segs
    end_h, held_h, held_after_h = ended
    t_pending, pending_job, pending_point = pending
    realloc = moved = False
    i, last, upto = span
    while i < n_running and i <= last:
        j = running[i]
        job = jobs[j]
        if not next_time[j] <= upto:
            i += 1
            continue
        if _ends_nb(job, t):
            next_time[j] = np.inf
            end_h[c, j] = t
            # here, not copied out of every record after the loop: LLVM made that copy
            # gathers (records 168 bytes apart), slower than loads under the Gather Data
            # Sampling mitigation (docs/performance.md, round 43)
            held_h[c, j], held_after_h[c, j] = job.held, job.held_after
            if n_seg < seg_job.shape[1]:
                seg_job[c, n_seg], seg_start[c, n_seg] = j, job.seg_open
                seg_end[c, n_seg] = t
            n_seg += 1
            running[i] = running[n_running - 1]
            n_running -= 1
            last = min_nb(last, n_running - 1)
            if PREEMPTIVE:  # else the job left ``active`` when it started
                n_active = _remove_nb(active, n_active, j)
            free += job.gpus
            active_demand -= job.gpus
            n_done += 1
            realloc = True
            continue
        if _demoted_nb(job, PREEMPTIVE):
            realloc = moved = True
        if SCHEDULER == LOSS_AWARE:
            reached, before_h = _reached_evaluation_nb(job, n_evals)
            if reached:
                rate = _evaluation_rate_nb(job, before_h, loss, c, j)
                job.key = priority_key_nb(SCHEDULER, job.t_est, job.attained0, job.gpus,
                                          job.evals_seen, rate, thresholds_gpu_h)
                moved = True
                # The new key changes no allocation if every active job fits, or if it
                # keeps the job before the jobs the last greedy walk passed over after it
                # (if not every job fits, the last reallocation was that walk: the demand
                # changes only at arrivals and ends, which reallocate).
                if not (active_demand <= capacity
                        or _keeps_place_nb(jobs, passed, n_passed, j)):
                    realloc = True
        next_time[j] = _plan_nb(job, t, SCHEDULER, PREEMPTIVE, n_evals, thresholds_gpu_h)
        if SCHEDULER == TIRESIAS:
            # The crossing is not a scheduling point; the next evaluation of any
            # running job (or an arrival or end, which reallocates anyway) is.
            t_pending, pending_job, pending_point = _next_evaluation_nb(
                t, j, jobs, next_time, running, n_running, n_evals, t_pending, pending_job,
                pending_point)
        i += 1
    return (n_running, n_active, n_done, n_seg, free, active_demand, realloc, moved,
            (t_pending, pending_job, pending_point))


def _reallocate_nb(c, t, jobs, next_time, lists, n_active, n_running, n_passed, n_preempt,
                   segs, n_seg, free, capacity, active_demand, moved, n_realloc, strict,
                   thresholds_gpu_h):
    """Choose the jobs that hold GPUs after ``t``: the waiting ones to start go to
    ``starts`` in priority order; preemptive schedulers pause the running jobs not
    chosen.  ``lists = (active, running, starts, passed)``.  Returns how many start, and
    ``n_active, n_running, n_seg, free, moved, n_realloc, n_passed`` after it."""
    active, running, starts, passed = lists
    requeued = False
    if SCHEDULER == TIRESIAS:
        # Tiresias alone moves every running job's base here: its threshold crossings and
        # pinned pending points chain event times through long busy periods, and reading
        # service lazily (fewer, different roundings) lets those times drift from the
        # eager results by 2e-11 h (2e-12 relative in jct_h).
        requeued = _rebase_running_nb(t, jobs, running, n_running, active_demand > capacity,
                                      thresholds_gpu_h)
    n_start = 0
    if not PREEMPTIVE:
        # ``active`` holds the waiting jobs, in their static order (no re-key, no sort);
        # if every active job fits, every waiting one fits in the free GPUs
        n_start, n_active = _start_waiting_nb(jobs, active, n_active, free, strict, starts)
    elif active_demand <= capacity:
        # Every active job fits, so the greedy walk would choose them all whatever the
        # order, which only fixes that of ``starts``: no re-key, no sort (exact; the
        # next full reallocation re-keys first).
        if n_active > n_running:
            n_start = _waiting_in_order_nb(jobs, active, n_active, starts)
    else:
        # A job's key is kept equal to its key from observed state: set at arrival and
        # whenever an input changes, which only happens to a running job: its service
        # (srtf_est, tiresias: re-keyed here) or its loss readings (loss_aware).
        if REKEY and n_running > 0:
            if SCHEDULER == SRTF_EST:
                _rekey_running_nb(t, jobs, running, n_running, SCHEDULER, thresholds_gpu_h)
                moved = True
            else:  # Tiresias, re-keyed as it rebased, above (arrivals took their place)
                moved = moved or requeued
        # else nothing moved since the last sort: ``active`` is in order
        if moved:
            moved = False
            if SCHEDULER == TIRESIAS:
                _sort_by_queue_nb(jobs, active, n_active)
            else:
                _sort_by_float_rank_nb(jobs, active, n_active)
        n_realloc += 1
        if SCHEDULER == LOSS_AWARE:
            n_start, n_passed = _choose_in_blocks_nb(jobs, active, n_active, capacity,
                                                     n_realloc, starts, passed)
        else:
            n_start = _choose_preemptive_nb(jobs, active, n_active, capacity, n_realloc,
                                            starts)
        n_running, n_seg, freed = _pause_unchosen_nb(c, t, n_realloc, jobs, next_time,
                                                     running, n_running, n_preempt, segs,
                                                     n_seg)
        free += freed
    n_start = last_use_nb(n_start, (jobs, next_time, active, running, starts, passed,
                                     n_preempt, segs, thresholds_gpu_h))
    return n_start, n_active, n_running, n_seg, free, moved, n_realloc, n_passed


def _start_chosen_nb(c, t, jobs, next_time, starts, n_start, running, n_running, free,
                     start_h, overhead_h, n_evals, thresholds_gpu_h):
    """Start the ``n_start`` jobs of ``starts`` at ``t`` (a first start is recorded in
    ``start_h``) and plan each one's next event; returns ``n_running`` and ``free``."""
    for q in range(n_start):
        j = starts[q]
        job = jobs[j]
        if _start_nb(job, t, overhead_h):
            start_h[c, j] = t
        free -= job.gpus
        running[n_running] = j
        n_running += 1
        next_time[j] = _plan_nb(job, t, SCHEDULER, PREEMPTIVE, n_evals, thresholds_gpu_h)
    return n_running, free


@part
def _new_jobs_nb(c, workload, service, scheduler):
    """The records of row ``c``'s jobs before any arrives."""
    gpus, arrival_h, t_est_h, loss, duration_h = workload
    end_service, demote_service, account_from_h = service
    jobs = np.empty(gpus.shape[1], dtype=JOB)
    for j in range(gpus.shape[1]):
        _new_job_nb(jobs[j], gpus[c, j], t_est_h[c, j], duration_h[c, j], end_service[c, j],
                    demote_service[c, j], account_from_h[c, j])
        if scheduler == LOSS_AWARE:
            jobs[j].eval_next = duration_h[c, j] * (1 / loss.shape[2])
    return jobs


# What ``_engine`` binds per scheduler (``kernels.jit.bind``): the scheduler's code, whether
# it preempts, and whether its keys move with service (srtf_est, tiresias).  The templates
# below read them as globals, so they are constants of each engine's code; these values
# are placeholders, never compiled.
SCHEDULER = PREEMPTIVE = REKEY = None


def cluster_1c_nb(c, scheduling, workload, service, outcome, segments):
    """Simulate cluster row ``c``.  ``scheduling = (backfill, thresholds_gpu_h,
    overhead_h, capacity)``; ``workload = (gpus, arrival_h, t_est_h, loss, duration_h)`` and
    ``service = (end_service, demote_service, account_from_h)``, ``[C, J]`` (``loss``:
    ``[C, J, E]``); writes row ``c`` of ``outcome = (start_h, end_h, held_h, held_after_h,
    n_preempt)`` ``[C, J]`` and of ``segments = (seg_job, seg_start, seg_end, seg_count,
    n_points)`` (``[C, S]``, ``S = 0`` to skip recording; ``[C]``).  ``n_points[c]``: the
    scheduling points visited, or -1 if it reached ``max_points_nb`` and stopped there."""
    backfill, thresholds_gpu_h, overhead_h, capacity = scheduling
    start_h, end_h, held_h, held_after_h, n_preempt = outcome
    seg_job, seg_start, seg_end, seg_count, n_points = segments
    segs = (seg_job, seg_start, seg_end)
    loss = workload[3]
    n_jobs, n_evals = loss.shape[1], loss.shape[2]
    strict = SCHEDULER == FIFO and not backfill
    arrival = workload[1][c]
    jobs = _new_jobs_nb(c, workload, service, SCHEDULER)
    next_time = np.empty(n_jobs)  # of a running job's next event; apart: the scan reads it
    # active: arrived, not ended (non-preemptive: not started), in priority order;
    # starts: to start at this point, in priority order; passed: loss_aware, the jobs the
    # last greedy walk passed over, in order (each with a slot to spare: the walk writes
    # one past the jobs it passed).
    # Unsigned: numba tests a signed index into ``jobs`` for wrap-around at every access.
    job_lists = np.empty((4, n_jobs + 1), dtype=np.uint64)
    active, running, starts, passed = job_lists[0], job_lists[1], job_lists[2], job_lists[3]
    lists = (active, running, starts, passed)
    n_active = n_running = n_done = n_seg = n_realloc = next_arrival = n_passed = points = 0
    active_demand = 0  # GPUs demanded by all active jobs (arrived, not ended)
    free = capacity
    t_pending = np.inf  # Tiresias: the next point after a threshold crossing, the
    pending_job = np.uint64(0)  # evaluation of ``pending_job`` (a list entry) at service
    pending_point = 0.0  # ``pending_point``
    moved = False  # whether a key moved since ``active`` was last sorted
    max_points = max_points_nb(n_jobs, n_evals, thresholds_gpu_h.shape[0])
    while n_done < n_jobs:
        points += 1
        if points > max_points:
            points = -1  # not a finite schedule (e.g. non-finite times): refuse, never loop
            break
        # the next point: an arrival, a running job's own event or Tiresias' pending point
        t_arrival = arrival[next_arrival] if next_arrival < n_jobs else np.inf
        t, (first, last), upto = _next_point_nb(t_arrival, t_pending, next_time, running,
                                                n_running)
        realloc = t_pending == t
        if realloc:
            t_pending = np.inf
            if _reach_pending_nb(jobs[pending_job], t, pending_point):
                next_time[pending_job] = t
                first, last = 0, n_running - 1  # the job may sit anywhere in ``running``
        if next_arrival < n_jobs and t_arrival == t:
            next_arrival, n_active, demand = _arrive_nb(t, arrival, next_arrival, jobs, active,
                                                        n_active, SCHEDULER, thresholds_gpu_h)
            active_demand += demand
            realloc = True
            if PREEMPTIVE and SCHEDULER != TIRESIAS:  # else every arrival took its place
                moved = True  # in order (fifo's, sjf_est's and a user's keys are static)
        (n_running, n_active, n_done, n_seg, free, active_demand, changed, rekeyed,
         pending) = _own_events_nb(
            c, t, (first, last, upto), jobs, next_time, running, n_running, active, n_active,
            passed, n_passed, loss, (end_h, held_h, held_after_h), segs, n_seg, n_done, free,
            active_demand, capacity, (t_pending, pending_job, pending_point), n_evals,
            thresholds_gpu_h)
        t_pending, pending_job, pending_point = pending
        moved = moved or rekeyed
        # Tiresias: a crossing reached at an evaluation at this instant changes queues now
        if not (realloc or changed or t_pending == t):
            continue
        t_pending = np.inf  # queues are recomputed now
        (n_start, n_active, n_running, n_seg, free, moved, n_realloc,
         n_passed) = _reallocate_nb(
            c, t, jobs, next_time, lists, n_active, n_running, n_passed, n_preempt, segs,
            n_seg, free, capacity, active_demand, moved, n_realloc, strict, thresholds_gpu_h)
        n_running, free = _start_chosen_nb(c, t, jobs, next_time, starts, n_start, running,
                                           n_running, free, start_h, overhead_h, n_evals,
                                           thresholds_gpu_h)
    seg_count[c] = n_seg
    n_points[c] = points


_STEPS = (_own_events_nb, _reallocate_nb, _start_chosen_nb)


def _engine(scheduler):
    """``cluster_1c_nb`` for one scheduler code, its steps bound to the same constants:
    numba prunes the other schedulers' branches, in the loop and in each step, before it
    inlines the parts they call, and never compiles what only they take
    (docs/performance.md, rounds 19 and 20)."""
    constants = dict(SCHEDULER=scheduler, PREEMPTIVE=bool(is_preemptive_nb.py_func(scheduler)),
                     REKEY=scheduler == SRTF_EST or scheduler == TIRESIAS)
    steps = {fn.__name__: part(bind(fn, **constants)) for fn in _STEPS}
    return engine_kernel(one_of(bind(cluster_1c_nb, **constants, **steps), scheduler))


# One per scheduler code (a user scheduler runs ``sjf_est``'s).  Kernels pick theirs by
# name through ``cluster_of_nb``, never from a tuple: numba would type a tuple of kernels
# as function pointers and compile every one.
(cluster_fifo_1c_nb, cluster_sjf_est_1c_nb, cluster_srtf_est_1c_nb, cluster_loss_aware_1c_nb,
 cluster_tiresias_1c_nb) = (_engine(code) for code in SCHEDULERS)


@part
def cluster_of_nb(scheduler, c, scheduling, workload, service, outcome, segments):
    """Run ``scheduler``'s ``cluster_1c_nb`` on cluster row ``c``.  Callers pass a constant
    (a closure variable of their own code): inlined, the comparisons are of constants, so
    numba prunes every branch but one before typing, and only that engine is compiled."""
    if scheduler == FIFO:
        cluster_fifo_1c_nb(c, scheduling, workload, service, outcome, segments)
    elif scheduler == SJF_EST:
        cluster_sjf_est_1c_nb(c, scheduling, workload, service, outcome, segments)
    elif scheduler == SRTF_EST:
        cluster_srtf_est_1c_nb(c, scheduling, workload, service, outcome, segments)
    elif scheduler == LOSS_AWARE:
        cluster_loss_aware_1c_nb(c, scheduling, workload, service, outcome, segments)
    else:
        cluster_tiresias_1c_nb(c, scheduling, workload, service, outcome, segments)


def _engine_driver(scheduler):
    """``cluster_nb`` for one scheduler code: it runs that scheduler's ``cluster_1c_nb``."""
    def cluster_nb(backfill, thresholds_gpu_h, overhead_h, capacity, gpus, arrival_h, t_est_h,
                   loss, duration_h, end_service, demote_service, account_from_h, start_h,
                   end_h, held_h, held_after_h, n_preempt, seg_job, seg_start, seg_end,
                   seg_count, n_points):
        scheduling = (backfill, thresholds_gpu_h, overhead_h, capacity)
        workload = (gpus, arrival_h, t_est_h, loss, duration_h)
        service = (end_service, demote_service, account_from_h)
        outcome = (start_h, end_h, held_h, held_after_h, n_preempt)
        segments = (seg_job, seg_start, seg_end, seg_count, n_points)
        for c_ in prange(gpus.shape[0]):
            c = np.int64(c_)  # signed, as outside prange: each per-cluster kernel compiles once
            cluster_of_nb(scheduler, c, scheduling, workload, service, outcome, segments)
    return driver(one_of(cluster_nb, scheduler))


_DRIVERS = tuple(_engine_driver(code) for code in SCHEDULERS)


def cluster_nb(scheduler, *args):
    """Simulate every cluster row under ``scheduler`` (a code): the arguments after it are
    ``backfill, thresholds_gpu_h, overhead_h, capacity``, the inputs ``gpus, arrival_h,
    t_est_h, loss, duration_h, end_service, demote_service, account_from_h`` ``[C, J]``
    (``loss``: ``[C, J, E]``) and the outputs, written in place: ``start_h, end_h, held_h,
    held_after_h, n_preempt`` ``[C, J]``, the segments ``seg_job, seg_start, seg_end``
    ``[C, S]``, ``seg_count`` and ``n_points`` ``[C]`` (-1: the cluster hit the bound on
    scheduling points)."""
    _DRIVERS[scheduler](*args)


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
    for c_ in prange(duration_h.shape[0]):
        c = np.int64(c_)  # signed, as outside prange: each per-cluster kernel compiles once
        service_points_1c_nb(c, duration_h, stopped, demoted, trigger_eval, hacking, peak_eval,
                             n_evals, end_service, demote_service, account_from_h)
