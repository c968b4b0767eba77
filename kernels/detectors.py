"""Stop-policy decisions (MODEL.md section 7) over one job's *observed* history.

Decision kernel: arguments are evaluation scores, loss readings, the attained service
at each evaluation and the duration estimate; never a hacking label, ``u*``, gold or
the true duration.  Evaluation indices are 1-based (``e = 1..n``); 0 means "never".

``evalstop_step_nb`` is the online form used by the streaming monitor and by replay;
the batch scans below are loops over it, so all three decide identically.
"""

import numpy as np

from .codes import (ACT_CONTINUE, ACT_DEMOTE, ACT_STOP, DEPRIORITIZE, EVALSTOP,
                    LOSS_PLATEAU, PATIENCE, STOP_AT)
from .detectors_online import best_observed_eval_nb, detector_trigger_nb
from .jit import entry, kernel_and_entry, last_use_nb, part


@kernel_and_entry
def evalstop_step_nb(prev_score, score, decline_run):
    """New consecutive-decline count after observing ``score``.

    A decline is strictly lower than the previous score; a tie or a rise resets the
    run.  ``prev_score`` NaN (no previous evaluation) is never a decline.
    """
    if score < prev_score:  # False when either is NaN
        return decline_run + 1
    return 0


@part
def evalstop_trigger_nb(scores, k):
    """First evaluation (1-based) ending ``k`` consecutive declines, or 0."""
    run = 0
    prev = np.nan
    for e in range(scores.shape[0]):
        run = evalstop_step_nb(prev, scores[e], run)
        if run >= k:
            return e + 1
        prev = scores[e]
    return 0


@part
def stop_at_trigger_nb(attained_h, t_est_h, f):
    """First evaluation whose estimated progress ``attained / T_est`` is >= f, or 0.

    ``attained_h[e-1]`` is the service the job had received at evaluation ``e``.
    """
    for e in range(attained_h.shape[0]):
        if attained_h[e] / t_est_h >= f:
            return e + 1
    return 0


@part
def loss_plateau_trigger_nb(losses, w, tol):
    """First evaluation ``e > w`` with ``(L[e-w] - L[e]) / L[e-w] < tol``, or 0."""
    for e in range(w, losses.shape[0]):
        ref = losses[e - w]
        if (ref - losses[e]) / ref < tol:
            return e + 1
    return 0


@entry
def stop_decision_1j_nb(policy, k, f, w, tol, p, scores, losses, attained_h, t_est_h):
    """Decide one in-scope job: returns ``(action, trigger_eval, delivered_eval)``.

    ``action`` is ACT_CONTINUE, ACT_STOP or ACT_DEMOTE; ``delivered_eval`` is the
    checkpoint handed back (the last evaluation when the job is not stopped).  ``p``:
    an online detector's parameters (float64, declared order; empty for the others).
    The oracle is not here: it needs hidden truth (see ``kernels.oracle``).
    """
    if policy >= PATIENCE:  # an online detector: keeps the best observed checkpoint
        e = detector_trigger_nb(policy, p, scores)
        if e > 0:
            return ACT_STOP, e, best_observed_eval_nb(scores, e)
        return ACT_CONTINUE, 0, scores.shape[0]
    return rule_decision_1j_nb(policy, k, f, w, tol, scores, losses, attained_h, t_est_h)


@part
def rule_decision_1j_nb(policy, k, f, w, tol, scores, losses, attained_h, t_est_h):
    """``stop_decision_1j_nb`` for the rule policies (evalstop, deprioritize, stop_at,
    loss_plateau, none), without the online detectors: what the one-pass pipeline
    compiles, so that a run without a detector never compiles one.

    A part, as are the triggers it calls, and with one exit (``last_use_nb``): inlined
    into the loop over jobs, the row views it is given then cost no reference count per
    job (docs/performance.md, round 21)."""
    n = scores.shape[0]
    act, trig, deliv = ACT_CONTINUE, 0, n
    if policy == EVALSTOP or policy == DEPRIORITIZE:
        e = evalstop_trigger_nb(scores, k)
        if e > 0:
            act, trig, deliv = (ACT_STOP, e, e - k) if policy == EVALSTOP else (ACT_DEMOTE, e, n)
    elif policy == STOP_AT:
        e = stop_at_trigger_nb(attained_h, t_est_h, f)
        if e > 0:
            act, trig, deliv = ACT_STOP, e, e
    elif policy == LOSS_PLATEAU:
        e = loss_plateau_trigger_nb(losses, w, tol)
        if e > 0:
            act, trig, deliv = ACT_STOP, e, e
    return last_use_nb((act, trig, deliv), (scores, losses, attained_h))


@part
def in_scope_nb(scope_all, job_type, rlhf_code):
    """Whether a job of ``job_type`` is in the policy's scope (RLHF jobs, or all).

    Scope does not depend on the policy: under ``none`` the jobs in scope are scored
    too (all negatives), so a baseline reports recall 0 rather than nothing.
    """
    return scope_all or job_type == rlhf_code


