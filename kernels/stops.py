"""Resolve every job's stop decision before the event loop.

A job's service at evaluation ``e`` is ``T * e / E`` whatever the schedule, so what it
observes at each evaluation, and hence its stop decision, does not depend on the
schedule (docs/model.md).  This driver replays each job's observations through the
decision kernel ``kernels.detectors.stop_decision_1j_nb``; it holds ``duration_h`` only
to compute the attained service the platform observes at each evaluation.
"""
from functools import lru_cache

import numpy as np
from numba import prange

from .codes import ACT_DEMOTE, ACT_STOP, PATIENCE, RLHF, STOP_AT
from .detectors import in_scope_nb, rule_decision_1j_nb, stop_decision_1j_nb
from .detectors_online import best_observed_eval_nb
from .jit import driver, kernel, part, user_driver, user_entry


@part
def _start_job_nb(c, j, scope_all, job_type, n_evals, in_scope, stopped, demoted,
                  trigger_eval, delivered_eval):
    """Reset job ``(c, j)``'s five outputs (no stop, final checkpoint); returns whether it
    is in the policy's scope.  Shared by the built-in and the user drivers, and inlined
    into both: a call per job, with its array arguments, cost more than its body."""
    scoped = in_scope_nb(scope_all, job_type[c, j], RLHF)
    in_scope[c, j] = scoped
    stopped[c, j] = False
    demoted[c, j] = False
    trigger_eval[c, j] = 0
    delivered_eval[c, j] = n_evals
    return scoped


@part
def _attained_nb(duration_h, attained):
    """``attained[e - 1]``: the service a job of run time ``duration_h`` has received at
    evaluation ``e`` (evaluations evenly spaced in service)."""
    n_evals = attained.shape[0]
    for e in range(n_evals):
        attained[e] = duration_h * ((e + 1) / n_evals)


@part
def _record_nb(c, j, act, trig, deliv, stopped, demoted, trigger_eval, delivered_eval):
    """Write job ``(c, j)``'s decision ``(action, trigger_eval, delivered_eval)``."""
    trigger_eval[c, j] = trig
    delivered_eval[c, j] = deliv
    stopped[c, j] = act == ACT_STOP
    demoted[c, j] = act == ACT_DEMOTE


@kernel
def resolve_stops_1c_nb(c, policy, k, f, w, tol, p, scope_all, job_type, t_est_h, score, loss,
                        duration_h, in_scope, stopped, demoted, trigger_eval, delivered_eval):
    """Row ``c`` of ``resolve_stops_nb`` (same arguments, same outputs)."""
    if policy < PATIENCE:  # a rule policy: the one-pass pipeline's kernel
        resolve_rule_stops_1c_nb(c, policy, k, f, w, tol, scope_all, job_type, t_est_h, score,
                                 loss, duration_h, in_scope, stopped, demoted, trigger_eval,
                                 delivered_eval)
        return
    n_jobs, n_evals = score.shape[1], score.shape[2]
    attained = np.zeros(n_evals)  # an online detector reads scores only
    for j in range(n_jobs):
        if _start_job_nb(c, j, scope_all, job_type, n_evals, in_scope, stopped, demoted,
                         trigger_eval, delivered_eval):
            act, trig, deliv = stop_decision_1j_nb(policy, k, f, w, tol, p, score[c, j],
                                                   loss[c, j], attained, t_est_h[c, j])
            _record_nb(c, j, act, trig, deliv, stopped, demoted, trigger_eval, delivered_eval)


@kernel
def resolve_rule_stops_1c_nb(c, policy, k, f, w, tol, scope_all, job_type, t_est_h, score, loss,
                             duration_h, in_scope, stopped, demoted, trigger_eval,
                             delivered_eval):
    """``resolve_stops_1c_nb`` for the rule policies only (``rule_decision_1j_nb``): what
    the one-pass pipeline compiles, so that it holds no online detector."""
    n_jobs, n_evals = score.shape[1], score.shape[2]
    attained = np.empty(n_evals)  # read by STOP_AT only, so filled for it only
    attained[:] = 0.0
    for j in range(n_jobs):
        if _start_job_nb(c, j, scope_all, job_type, n_evals, in_scope, stopped, demoted,
                         trigger_eval, delivered_eval):
            if policy == STOP_AT:
                _attained_nb(duration_h[c, j], attained)
            act, trig, deliv = rule_decision_1j_nb(policy, k, f, w, tol, score[c, j],
                                                   loss[c, j], attained, t_est_h[c, j])
            _record_nb(c, j, act, trig, deliv, stopped, demoted, trigger_eval, delivered_eval)


@driver
def resolve_stops_nb(policy, k, f, w, tol, p, scope_all, job_type, t_est_h, score, loss,
                     duration_h, in_scope, stopped, demoted, trigger_eval, delivered_eval):
    """Inputs ``[C, J]`` (``score``, ``loss``: ``[C, J, E]``; ``p``: an online detector's
    parameters, see ``stop_decision_1j_nb``); writes the five outputs ``[C, J]`` in place
    (evaluations 1-based, 0 = none)."""
    for c_ in prange(score.shape[0]):
        c = np.int64(c_)  # signed, as outside prange: each per-cluster kernel compiles once
        resolve_stops_1c_nb(c, policy, k, f, w, tol, p, scope_all, job_type, t_est_h, score,
                            loss, duration_h, in_scope, stopped, demoted, trigger_eval,
                            delivered_eval)


@part
def causal_trigger_nb(trigger, score, loss, attained, t_est_h, params, seen, shown):
    """A user trigger asked about each prefix of a job's series in turn, as the monitor
    asks it online: the first evaluation ``e`` whose prefix (the first ``e`` scores,
    losses and attained services) it answers with ``e``; 0 if none; -1 if it answers
    anything else (an evaluation it has not reached, or one before: it looked ahead).
    The prefixes are views of scratch (``[3, E + 1]``), written through ``seen`` one
    evaluation at a time, NaN beyond, and shown through ``shown``, a read-only alias of
    the same memory: the index just past a prefix (numba does not check bounds) reads NaN,
    never a value to come, and a write does not compile.  So it never sees a score, loss
    or service to come, nor how many evaluations remain (MODEL.md section 5), whatever it
    reads."""
    n_evals = score.shape[0]
    for i in range(3):
        for e in range(n_evals + 1):
            seen[i, e] = np.nan
    trig = 0
    e = 1
    while trig == 0 and e <= n_evals:
        seen[0, e - 1], seen[1, e - 1], seen[2, e - 1] = score[e - 1], loss[e - 1], attained[e - 1]
        r = trigger(shown[0, :e], shown[1, :e], shown[2, :e], t_est_h, *params)
        if r != 0:
            trig = e if r == e else -1
        e += 1
    return trig


def trigger_scratch(*shape):
    """Scratch for ``causal_trigger_nb``: an array ``shape + (3, E + 1)`` and a read-only
    alias of it (``shape`` ends with ``E``)."""
    seen = np.empty(shape[:-1] + (3, shape[-1] + 1))
    shown = seen.view()
    shown.flags.writeable = False
    return seen, shown


@lru_cache(maxsize=None)
def user_trigger_driver(trigger):
    """``causal_trigger_nb`` of one job's series for a user's trigger (replay)."""
    @user_entry
    def user_trigger_nb(score, loss, attained, t_est_h, params, seen, shown):
        return causal_trigger_nb(trigger, score, loss, attained, t_est_h, params, seen, shown)
    return user_trigger_nb


@lru_cache(maxsize=None)
def user_prefix_driver(trigger):
    """A user's trigger asked about one prefix, the first ``e`` columns of ``shown``
    (``[3, capacity]``, read-only, NaN beyond ``e``), with ``causal_trigger_nb``'s answer:
    ``e`` if it answers ``e``, 0 for 0, -1 for anything else.  The monitor asks only about
    the newest prefix: every shorter one was asked before and answered 0 (else the job
    stopped, or the call was refused and undone), so its decisions are
    ``causal_trigger_nb``'s at O(1) calls per evaluation, not O(evaluations)."""
    @user_entry
    def user_prefix_nb(shown, e, t_est_h, params):
        r = trigger(shown[0, :e], shown[1, :e], shown[2, :e], t_est_h, *params)
        return 0 if r == 0 else (e if r == e else -1)
    return user_prefix_nb


@lru_cache(maxsize=None)
def user_stops_driver(trigger):
    """``resolve_stops_nb`` for a user's ``@njit`` trigger function (see
    ``fastsim.registry.stop_policy``), compiled once per function per process.

    ``trigger(scores, losses, attained_h, t_est_h, *params)`` returns the 1-based
    evaluation that stops (or demotes) the job, 0 for never; ``lookback`` is how many
    evaluations before it the delivered checkpoint is (-1: the best observed score's).  The trigger gets the same
    observed arrays as ``stop_decision_1j_nb``, nothing else.
    """
    @user_driver
    def resolve_user_stops_nb(params, lookback, demote, scope_all, job_type, t_est_h, score,
                              loss, duration_h, in_scope, stopped, demoted, trigger_eval,
                              delivered_eval, seen, shown):
        n_clusters, n_jobs, n_evals = score.shape
        for c_ in prange(n_clusters):
            c = np.int64(c_)  # signed, as outside prange: each per-cluster kernel compiles once
            attained = np.empty(n_evals)
            for j in range(n_jobs):
                if not _start_job_nb(c, j, scope_all, job_type, n_evals, in_scope, stopped,
                                     demoted, trigger_eval, delivered_eval):
                    continue
                _attained_nb(duration_h[c, j], attained)
                trig = causal_trigger_nb(trigger, score[c, j], loss[c, j], attained,
                                         t_est_h[c, j], params, seen[c], shown[c])
                if trig != 0:
                    trigger_eval[c, j] = trig
                    if demote:
                        demoted[c, j] = True
                    else:
                        stopped[c, j] = True
                        delivered_eval[c, j] = (best_observed_eval_nb(score[c, j], trig)
                                                if lookback < 0 and trig > 0 else trig - lookback)
    return resolve_user_stops_nb
