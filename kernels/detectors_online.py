"""Online detectors of "the evaluation score has peaked", over one job's observed scores.

Decision kernels (MODEL.md section 5): each sees one job's evaluation scores in order,
nothing else; never a hacking label, ``u*``, gold or the true duration.  Each detector
has a streaming form (``*_init`` state + ``*_step_nb``: one update per evaluation,
returns whether it fires); the batch form (``detector_trigger_nb``: the first 1-based
evaluation at which it fires, 0 = never) is one loop over the step for every detector, so
the two decide identically.  The time axis is the evaluation index ``t = e`` (evenly spaced
evaluations), never the true progress.

Detectors (docs/detectors.md gives each rule, its cost and how to set it):

* ``patience``: Hugging Face ``EarlyStoppingCallback``'s rule (patience, threshold);
* ``margin``: ``k`` consecutive declines, each larger than ``z`` noise standard
  deviations of a difference, the noise estimated online from the job's own residuals;
* ``cusum``: one-sided CUSUM of standardised first differences (Page 1954);
* ``peak``: a sequential test that the peak has passed: the slope, at the latest
  evaluation, of a least-squares fit of Gao et al.'s (2023) form
  ``R(d) = d (alpha - beta ln d)`` (with ``d`` proportional to ``t``: the span of
  ``{t, t ln t}``, plus an offset ``1`` for runs that do not start at 0) is below ``-z``
  of its standard error;
* ``bocpd``: Bayesian online change-point detection (Adams & MacKay 2007) on the first
  differences (the slope), Gaussian segments of unknown mean; fires when the slope of the
  current segment is negative with posterior probability ``Phi(z)``.

As stop policies (``fastsim.registry``: parameters as one float64 array in declared
order, codes from ``kernels.codes``), the simulator and replay decide through
``detector_trigger_nb`` and the live monitor steps through ``detector_init_nb`` /
``detector_step_nb``: one branch per detector in each of those two.

The noise estimate of ``margin``, ``cusum`` and ``bocpd`` is the residual variance of the
Gao-form fit with an offset (``peak`` uses its own fit's), shrunk towards a prior noise ``sigma0`` worth ``PRIOR_DOF``
residual degrees of freedom: ``sigma_hat^2 = (RSS + PRIOR_DOF sigma0^2) / (n - 3 + PRIOR_DOF)``.
The fit's sufficient statistics take O(1) state.

An infinite score is an ordinary reading to every comparison (a loss that diverges to
``inf`` is a decline, docs/replay.md), but no fit takes it: it would turn every later
noise estimate into NaN and switch the detector off for the rest of the job.  So
``margin`` and ``cusum`` count a fall to ``-inf`` as a decline beyond any margin, and
``peak`` and ``bocpd`` fire on it (its slope is ``-inf``).
"""
import math

import numpy as np

from .codes import BOCPD, CUSUM, MARGIN, MAX_EVALS, PATIENCE, PEAK
from .jit import entry

PRIOR_DOF = 2.0
SIGMA_FLOOR = 1e-9  # keeps standardised statistics finite at zero noise
N_FIT = 11          # size of the Gao-fit state: n and the sums of the normal equations


# --------------------------------------------------------------------------- patience

@entry
def patience_init(n_max):
    """State: ``[best, counter]`` (best NaN before any score)."""
    s = np.zeros(2)
    s[0] = np.nan
    return s


@entry
def patience_step_nb(state, score, patience, threshold):
    """``state = [best, counter]`` (best NaN before any score); returns whether to stop.

    The counter resets when ``score`` beats the best previous score by more than
    ``threshold``, else it grows; the best is updated on any strict improvement (the
    Trainer's ``best_metric``); stop when the counter reaches ``patience``.
    """
    best = state[0]
    if math.isnan(best) or (score > best and score - best > threshold):
        state[1] = 0.0
    else:
        state[1] += 1.0
    if math.isnan(best) or score > best:
        state[0] = score
    return state[1] >= patience



# --------------------------------------------------------------------------- Gao-form fit

@entry
def fit_update_nb(fit, t, y):
    """Add the point ``(t, y)`` to the normal equations of ``y ~ a + b t + c t ln t``.

    ``fit[0]`` is n; then sums of 1, t, l, tt, tl, ll, y, ty, ly, yy with ``l = t ln t``
    (``fit[1]`` is n again, kept so the layout reads as the matrix).  An infinite ``y``
    is left out, as a missing reading is: it is a decline or a rise of no finite size,
    and in the sums it would make every later noise estimate and slope NaN.
    """
    if not math.isfinite(y):
        return
    lt = t * math.log(t)
    fit[0] += 1.0
    fit[1] += 1.0
    fit[2] += t
    fit[3] += lt
    fit[4] += t * t
    fit[5] += t * lt
    fit[6] += lt * lt
    fit[7] += y
    fit[8] += t * y
    fit[9] += lt * y
    fit[10] += y * y


@entry
def fit_solve_nb(fit, t):
    """``(slope, g' (X'X)^-1 g, rss, dof)`` of ``y ~ a + b t + c t ln t``, the slope
    taken at ``t``; ``slope`` is NaN while the fit is undetermined (fewer than three
    points).  Solved by the adjugate of the 3x3 symmetric matrix.
    """
    n = fit[0]
    if n < 3.0:
        return np.nan, np.nan, 0.0, 0.0
    s11 = fit[1]
    s12 = fit[2]
    s13 = fit[3]
    s22 = fit[4]
    s23 = fit[5]
    s33 = fit[6]
    c11 = s22 * s33 - s23 * s23
    c12 = s13 * s23 - s12 * s33
    c13 = s12 * s23 - s13 * s22
    c22 = s11 * s33 - s13 * s13
    c23 = s12 * s13 - s11 * s23
    c33 = s11 * s22 - s12 * s12
    det = s11 * c11 + s12 * c12 + s13 * c13
    if not det > 0.0:
        return np.nan, np.nan, 0.0, 0.0
    y1 = fit[7]
    y2 = fit[8]
    y3 = fit[9]
    a = (c11 * y1 + c12 * y2 + c13 * y3) / det
    b = (c12 * y1 + c22 * y2 + c23 * y3) / det
    c = (c13 * y1 + c23 * y2 + c33 * y3) / det
    g3 = math.log(t) + 1.0
    slope = b + c * g3
    quad = (c22 + 2.0 * c23 * g3 + c33 * g3 * g3) / det
    rss = fit[10] - (a * y1 + b * y2 + c * y3)
    if rss < 0.0:
        rss = 0.0
    return slope, quad, rss, n - 3.0


@entry
def fit_solve_origin_nb(fit, t):
    """As ``fit_solve_nb`` for ``y ~ b t + c t ln t`` (the curve starts at 0 at ``t = 0``,
    as MODEL.md's gold does): Gao's form with ``d`` proportional to ``t`` exactly."""
    n = fit[0]
    if n < 2.0:
        return np.nan, np.nan, 0.0, 0.0
    s22 = fit[4]
    s23 = fit[5]
    s33 = fit[6]
    det = s22 * s33 - s23 * s23
    if not det > 0.0:
        return np.nan, np.nan, 0.0, 0.0
    y2 = fit[8]
    y3 = fit[9]
    b = (s33 * y2 - s23 * y3) / det
    c = (s22 * y3 - s23 * y2) / det
    g3 = math.log(t) + 1.0
    slope = b + c * g3
    quad = (s33 - 2.0 * s23 * g3 + s22 * g3 * g3) / det
    rss = fit[10] - (b * y2 + c * y3)
    if rss < 0.0:
        rss = 0.0
    return slope, quad, rss, n - 2.0


@entry
def noise_sd_nb(rss, dof, sigma0):
    """Residual noise of a fit shrunk towards ``sigma0`` (PRIOR_DOF pseudo-dof)."""
    sd = math.sqrt((rss + PRIOR_DOF * sigma0 * sigma0) / (dof + PRIOR_DOF))
    return max(sd, SIGMA_FLOOR)


@entry
def fit_noise_nb(fit, sigma0):
    """The noise estimate of a fit state, from the fit with an offset (``sigma0``
    until the fit has residual degrees of freedom)."""
    _, _, rss, dof = fit_solve_nb(fit, 1.0)
    return noise_sd_nb(rss, dof, sigma0)


# --------------------------------------------------------------------------- margin declines

@entry
def margin_init(n_max):
    """State: ``[prev, run, fit...]``."""
    s = np.zeros(2 + N_FIT)
    s[0] = np.nan
    return s


@entry
def margin_step_nb(state, score, k, z, sigma0):
    """A decline counts when ``score < prev - z sqrt(2) sigma_hat`` (``sigma_hat`` from the
    evaluations before this one); ``k`` consecutive ones stop the job."""
    fit = state[2:]
    prev = state[0]
    if not math.isnan(prev):
        margin = z * math.sqrt(2.0) * fit_noise_nb(fit, sigma0)
        if score < prev - margin:
            state[1] += 1.0
        else:
            state[1] = 0.0
    fit_update_nb(fit, fit[0] + 1.0, score)
    state[0] = score
    return state[1] >= k



# --------------------------------------------------------------------------- CUSUM

@entry
def cusum_init(n_max):
    """State: ``[prev, g, fit...]``."""
    s = np.zeros(2 + N_FIT)
    s[0] = np.nan
    return s


@entry
def cusum_step_nb(state, score, drift, h, sigma0):
    """``g <- max(0, g + x - drift)`` with ``x = -(s_e - s_{e-1}) / (sqrt(2) sigma_hat)``
    (a standardised decline); stop when ``g > h``."""
    fit = state[2:]
    prev = state[0]
    fired = False
    if not math.isnan(prev):
        x = (prev - score) / (math.sqrt(2.0) * fit_noise_nb(fit, sigma0))
        g = state[1] + x - drift
        state[1] = g if g > 0.0 else 0.0
        fired = state[1] > h
    fit_update_nb(fit, fit[0] + 1.0, score)
    state[0] = score
    return fired



# --------------------------------------------------------------------------- peak test

@entry
def peak_init(n_max, window=0):
    """State: ``[fit over every score (N_FIT), fit over the window (N_FIT), the count of
    evaluations, the last `window` scores (ring buffer)]``; ``window`` 0 fits every score
    so far."""
    return np.zeros(2 * N_FIT + 1 + window)


@entry
def peak_step_nb(state, score, z, sigma0, min_evals, origin, gamma):
    """Add the score; stop when the fitted slope at this evaluation is below ``-z``
    standard errors (and at least ``min_evals`` scores are in).

    ``origin`` 1: the curve starts at 0 at ``t = 0`` (no offset; MODEL.md's curves);
    0: with an offset (real runs).  ``gamma``: ``d = sqrt(KL)`` grows like ``t^gamma``
    (1 in MODEL.md's plain curves; about 0.5 in RLHF traces), so the fit's time axis is
    ``t^gamma``.  A window (``peak_init(n, window)``) fits the last ``window`` scores only
    (with an offset): a local fit, for long runs whose shape departs from Gao's form far
    from the current evaluation.  The noise comes from the same fit.
    """
    fit = state[:N_FIT]
    t = state[2 * N_FIT] + 1.0  # evaluations so far
    state[2 * N_FIT] = t
    fit_update_nb(fit, t ** gamma, score)
    window = state.shape[0] - 2 * N_FIT - 1
    if window > 0:
        ring = state[2 * N_FIT + 1:]
        ring[int(t - 1.0) % window] = score
        fit = state[N_FIT:2 * N_FIT]
        fit[:] = 0.0
        first = max(1.0, t - window + 1.0)
        u = first
        while u <= t:
            fit_update_nb(fit, u ** gamma, ring[int(u - 1.0) % window])
            u += 1.0
    if t < min_evals:
        return False
    if origin > 0.0 and window == 0:
        slope, quad, rss, dof = fit_solve_origin_nb(fit, t ** gamma)
    else:
        slope, quad, rss, dof = fit_solve_nb(fit, t ** gamma)
    if score == -np.inf:  # an infinite decline (a diverged loss): the slope is -inf
        return True
    if math.isnan(slope):
        return False
    se = noise_sd_nb(rss, dof, sigma0) * math.sqrt(quad)
    return slope < -z * se



# --------------------------------------------------------------------------- BOCPD

@entry
def bocpd_init(n_max):
    """State: ``[prev, n_obs, fit (N_FIT), then three rows of n_max + 1: run-length
    probability, posterior mean and posterior precision of the segment slope]``.

    Run lengths beyond ``n_max`` are merged into the last slot (truncation): with
    ``n_max`` at least the number of evaluations nothing is merged.
    """
    m = n_max + 1
    s = np.zeros(2 + N_FIT + 3 * m)
    s[0] = np.nan
    return s


@entry
def bocpd_step_nb(state, score, hazard, z, sigma0, prior_sd):
    """One Adams-MacKay update on the difference ``x = s_e - s_{e-1}``.

    Segments: ``x ~ N(mu, v)``, ``v = 2 sigma_hat^2``, ``mu ~ N(0, prior_sd^2)``; constant
    hazard.  Stop when the posterior mean ``M`` and variance ``V`` of the current segment's
    slope, mixed over the run lengths that hold data (``r >= 1``; a segment that has
    just begun is the prior), give ``M / sqrt(V) < -z``.
    """
    fit = state[2:2 + N_FIT]
    m = (state.shape[0] - 2 - N_FIT) // 3
    prob = state[2 + N_FIT:2 + N_FIT + m]
    mean = state[2 + N_FIT + m:2 + N_FIT + 2 * m]
    prec = state[2 + N_FIT + 2 * m:]
    prev = state[0]
    fired = False
    if math.isnan(prev):
        prob[0] = 1.0
        mean[0] = 0.0
        prec[0] = 1.0 / (prior_sd * prior_sd)
    else:
        x = score - prev
        v = 2.0 * fit_noise_nb(fit, sigma0) ** 2
        r_top = int(state[1])  # run lengths 0..r_top carry mass
        if r_top > m - 1:
            r_top = m - 1
        # log predictive of x under each run length, shifted by its maximum
        best = -np.inf
        logp = np.empty(r_top + 1)
        for r in range(r_top + 1):
            var = 1.0 / prec[r] + v
            d = x - mean[r]
            logp[r] = -0.5 * (d * d / var + math.log(var))
            if prob[r] > 0.0 and logp[r] > best:
                best = logp[r]
        grown = np.zeros(r_top + 2)
        change = 0.0
        for r in range(r_top + 1):
            w = prob[r] * math.exp(logp[r] - best) if prob[r] > 0.0 else 0.0
            grown[r + 1] = w * (1.0 - hazard)
            change += w * hazard
        grown[0] = change
        # posterior of each run's slope after x (run r becomes r + 1)
        new_mean = np.empty(r_top + 2)
        new_prec = np.empty(r_top + 2)
        p0 = 1.0 / (prior_sd * prior_sd)
        new_prec[0] = p0
        new_mean[0] = 0.0
        for r in range(r_top + 1):
            p = prec[r] + 1.0 / v
            new_prec[r + 1] = p
            new_mean[r + 1] = (prec[r] * mean[r] + x / v) / p
        top = r_top + 1
        if top > m - 1:  # truncate: merge the longest run into the last slot
            w_last = grown[m - 1] + grown[m]
            if w_last > 0.0:
                a = grown[m - 1] / w_last
                new_mean[m - 1] = a * new_mean[m - 1] + (1.0 - a) * new_mean[m]
                new_prec[m - 1] = a * new_prec[m - 1] + (1.0 - a) * new_prec[m]
            grown[m - 1] = w_last
            top = m - 1
        total = 0.0
        for r in range(top + 1):
            total += grown[r]
        if not (total > 0.0 and total < np.inf):
            # no run length explains x (an infinite or NaN score): start afresh from the
            # prior, as after a change point, rather than divide by nothing
            top = 0
            grown[0], total = 1.0, 1.0
            new_mean[0], new_prec[0] = 0.0, p0
        mix_w = 0.0
        mix_mean = 0.0
        mix_sq = 0.0
        for r in range(top + 1):
            prob[r] = grown[r] / total
            mean[r] = new_mean[r]
            prec[r] = new_prec[r]
            if r > 0:
                mix_w += prob[r]
                mix_mean += prob[r] * mean[r]
                mix_sq += prob[r] * (1.0 / prec[r] + mean[r] * mean[r])
        state[1] = top
        if mix_w > 0.0:
            mix_mean = mix_mean / mix_w
            mix_var = mix_sq / mix_w - mix_mean * mix_mean
            if mix_var < 0.0:
                mix_var = 0.0
            fired = mix_mean < -z * math.sqrt(mix_var)
        if x == -np.inf:  # an infinite decline: no segment explains it, and it is a fall
            fired = True
    fit_update_nb(fit, fit[0] + 1.0, score)
    state[0] = score
    return fired



# --------------------------------------------------------------------------- shared

@entry
def best_observed_eval_nb(scores, upto):
    """1-based evaluation with the highest observed score among ``1..upto`` (first on
    ties): the checkpoint a detector delivers when it fires at ``upto``."""
    best = 0
    for e in range(1, upto):
        if scores[e] > scores[best]:
            best = e
    return best + 1


@entry
def detector_init_nb(code, p, n_max):
    """A fresh streaming state of detector ``code`` with parameters ``p`` (float64, in
    the order of its declaration in ``fastsim.registry``) for up to ``n_max`` evaluations
    (only BOCPD's state grows with it: longer runs are merged)."""
    if code == PATIENCE:
        return patience_init(n_max)
    if code == MARGIN:
        return margin_init(n_max)
    if code == CUSUM:
        return cusum_init(n_max)
    if code == PEAK:
        return peak_init(n_max, int(p[4]))
    return bocpd_init(n_max)


@entry
def detector_step_nb(code, p, state, score):
    """One evaluation of detector ``code``'s streaming form: updates ``state`` in place and
    returns whether it fires."""
    if code == PATIENCE:
        return patience_step_nb(state, score, p[0], p[1])
    if code == MARGIN:
        return margin_step_nb(state, score, p[0], p[1], p[2])
    if code == CUSUM:
        return cusum_step_nb(state, score, p[0], p[1], p[2])
    if code == PEAK:
        return peak_step_nb(state, score, p[0], p[1], p[2], p[3], p[5])
    return bocpd_step_nb(state, score, p[0], p[1], p[2], p[3])


@entry
def detector_trigger_nb(code, p, scores):
    """Trigger of detector ``code`` with parameters ``p`` (float64, in the order of its
    declaration in ``fastsim.registry``): the first 1-based evaluation at which its
    streaming form fires, 0 = never.  The batch form *is* the streaming form run over the
    whole series, so the simulator, replay and the live monitor decide identically.  BOCPD
    keeps at most ``MAX_EVALS`` run lengths, as the monitor does: a replayed job of 10^6
    evaluations kept them all, O(n^2), and took hours."""
    if code < PATIENCE or code > BOCPD:
        return 0
    state = detector_init_nb(code, p, min(scores.shape[0], MAX_EVALS))
    for e in range(scores.shape[0]):
        if detector_step_nb(code, p, state, scores[e]):
            return e + 1
    return 0
