"""Plain-Python reference of the online detectors (kernels/detectors_online.py).

Written from each detector's rule (docs/detectors.md), over the whole prefix of scores at
each evaluation instead of an incremental state: the patience counter and the decline
run are recounted from the start, the Gao-form fit is re-solved from its normal
equations over the prefix, the CUSUM statistic is re-accumulated, and the Adams-MacKay
run-length posterior is recomputed from the first difference on.  The arithmetic of each
formula is written the way the kernels evaluate it, so decisions agree exactly (a
threshold crossing can hinge on the last bit); ``fit_lstsq`` solves the same fit with
``numpy.linalg.lstsq`` to check the formulas independently.
"""
from __future__ import annotations

import math

import numpy as np

PRIOR_DOF = 2.0
SIGMA_FLOOR = 1e-9


def patience_trigger(scores, patience, threshold):
    for e in range(1, len(scores) + 1):
        best, counter = None, 0
        for s in scores[:e]:
            if best is None or (s > best and s - best > threshold):
                counter = 0
            else:
                counter += 1
            if best is None or s > best:
                best = s
        if counter >= patience:
            return e
    return 0


def fit_sums(prefix, first=1, gamma=1.0):
    """Sums of the normal equations of ``y ~ 1 + t + t ln t`` over ``t = tau^gamma``,
    ``tau = first, first + 1, ...``."""
    s = [0.0] * 11
    for i, y in enumerate(prefix):
        if not math.isfinite(y):  # an infinite reading is no point of a fit
            continue
        t = float(i + first) ** gamma
        lt = t * math.log(t)
        terms = (1.0, 1.0, t, lt, t * t, t * lt, lt * lt, y, t * y, lt * y, y * y)
        for j in range(11):
            s[j] += terms[j]
    return s


def fit_solve(prefix, t, first=1, gamma=1.0):
    """``(slope at t, g' (X'X)^-1 g, rss, dof)`` by the adjugate, as in the kernel."""
    f = fit_sums(prefix, first, gamma)
    n = f[0]
    if n < 3.0:
        return math.nan, math.nan, 0.0, 0.0
    s11, s12, s13, s22, s23, s33 = f[1], f[2], f[3], f[4], f[5], f[6]
    c11 = s22 * s33 - s23 * s23
    c12 = s13 * s23 - s12 * s33
    c13 = s12 * s23 - s13 * s22
    c22 = s11 * s33 - s13 * s13
    c23 = s12 * s13 - s11 * s23
    c33 = s11 * s22 - s12 * s12
    det = s11 * c11 + s12 * c12 + s13 * c13
    if not det > 0.0:
        return math.nan, math.nan, 0.0, 0.0
    y1, y2, y3 = f[7], f[8], f[9]
    a = (c11 * y1 + c12 * y2 + c13 * y3) / det
    b = (c12 * y1 + c22 * y2 + c23 * y3) / det
    c = (c13 * y1 + c23 * y2 + c33 * y3) / det
    g3 = math.log(t) + 1.0
    slope = b + c * g3
    quad = (c22 + 2.0 * c23 * g3 + c33 * g3 * g3) / det
    rss = max(f[10] - (a * y1 + b * y2 + c * y3), 0.0)
    return slope, quad, rss, n - 3.0


def fit_solve_origin(prefix, t, gamma=1.0):
    """The same for ``y ~ b t + c t ln t`` (no offset)."""
    f = fit_sums(prefix, 1, gamma)
    n = f[0]
    if n < 2.0:
        return math.nan, math.nan, 0.0, 0.0
    s22, s23, s33 = f[4], f[5], f[6]
    det = s22 * s33 - s23 * s23
    if not det > 0.0:
        return math.nan, math.nan, 0.0, 0.0
    y2, y3 = f[8], f[9]
    b = (s33 * y2 - s23 * y3) / det
    c = (s22 * y3 - s23 * y2) / det
    g3 = math.log(t) + 1.0
    slope = b + c * g3
    quad = (s33 - 2.0 * s23 * g3 + s22 * g3 * g3) / det
    rss = max(f[10] - (b * y2 + c * y3), 0.0)
    return slope, quad, rss, n - 2.0


def fit_lstsq(prefix, t, origin=False):
    """The same slope, quadratic form and RSS by ``numpy.linalg.lstsq`` (independent)."""
    tt = np.arange(1, len(prefix) + 1, dtype=float)
    cols = [tt, tt * np.log(tt)] if origin else [np.ones_like(tt), tt, tt * np.log(tt)]
    X = np.column_stack(cols)
    coef, *_ = np.linalg.lstsq(X, np.asarray(prefix, float), rcond=None)
    g = np.array(([] if origin else [0.0]) + [1.0, math.log(t) + 1.0])
    quad = float(g @ np.linalg.inv(X.T @ X) @ g)
    rss = float(np.sum((X @ coef - np.asarray(prefix, float)) ** 2))
    return float(g @ coef), quad, rss


def noise_sd(prefix, sigma0):
    """Fit residual noise of ``prefix`` shrunk towards ``sigma0``; the fit takes the finite
    readings at their places among themselves (an infinite one is skipped like a missing one)."""
    _, _, rss, dof = fit_solve([y for y in prefix if math.isfinite(y)], 1.0)
    sd = math.sqrt((rss + PRIOR_DOF * sigma0 * sigma0) / (dof + PRIOR_DOF))
    return max(sd, SIGMA_FLOOR)


def margin_trigger(scores, k, z, sigma0):
    for e in range(2, len(scores) + 1):
        run = 0
        for i in range(1, e):  # decline at evaluation i + 1, noise from evaluations 1..i
            margin = z * math.sqrt(2.0) * noise_sd(scores[:i], sigma0)
            run = run + 1 if scores[i] < scores[i - 1] - margin else 0
        if run >= k:
            return e
    return 0


def cusum_trigger(scores, drift, h, sigma0):
    for e in range(2, len(scores) + 1):
        g = 0.0
        for i in range(1, e):
            x = (scores[i - 1] - scores[i]) / (math.sqrt(2.0) * noise_sd(scores[:i], sigma0))
            g = g + x - drift
            g = g if g > 0.0 else 0.0  # NaN (inf - inf) counts as no decline
        if g > h:
            return e
    return 0


def peak_trigger(scores, z, sigma0, min_evals, origin, window, gamma):
    for e in range(1, len(scores) + 1):
        if e < min_evals:
            continue
        if scores[e - 1] == -math.inf:
            return e
        t = float(e) ** gamma
        if window > 0:  # local fit over the last `window` evaluations, with an offset
            first = max(1, e - window + 1)
            slope, quad, rss, dof = fit_solve(scores[first - 1:e], t, first, gamma)
        elif origin > 0.0:
            slope, quad, rss, dof = fit_solve_origin(scores[:e], t, gamma)
        else:
            slope, quad, rss, dof = fit_solve(scores[:e], t, 1, gamma)
        # quad is a positive quadratic form, but round-off on a near-singular fit (gamma
        # near 0: every t^gamma near 1) can make it negative: no standard error, no
        # decision at e, as the kernel's NaN comparison gives
        if math.isnan(slope) or quad < 0.0:
            continue
        sd = max(math.sqrt((rss + PRIOR_DOF * sigma0 * sigma0) / (dof + PRIOR_DOF)), SIGMA_FLOOR)
        if slope < -z * sd * math.sqrt(quad):
            return e
    return 0


def bocpd_slope_posterior(scores, hazard, sigma0, prior_sd):
    """Adams & MacKay (2007), Algorithm 1, on ``x_i = s_{i+1} - s_i``: returns the mean
    and variance of the current segment's slope after the last difference."""
    p0 = 1.0 / (prior_sd * prior_sd)
    runs = [(1.0, 0.0, p0)]  # (probability, posterior mean, posterior precision) by run length
    mix_mean, mix_var = 0.0, 0.0
    for i in range(1, len(scores)):
        x = scores[i] - scores[i - 1]
        v = 2.0 * noise_sd(scores[:i], sigma0) ** 2
        logp = []
        for (w, m, p) in runs:
            var = 1.0 / p + v
            d = x - m
            logp.append(-0.5 * (d * d / var + math.log(var)))
        best = max(lp for lp, (w, _, _) in zip(logp, runs) if w > 0.0)
        grown = [0.0] * (len(runs) + 1)
        change = 0.0
        for r, (w, m, p) in enumerate(runs):
            u = w * math.exp(logp[r] - best) if w > 0.0 else 0.0
            grown[r + 1] = u * (1.0 - hazard)
            change += u * hazard
        grown[0] = change
        post = [(0.0, p0)] + [((p * m + x / v) / (p + 1.0 / v), p + 1.0 / v) for (_, m, p) in runs]
        total = sum(grown)
        if not 0.0 < total < math.inf:  # no run length explains x: afresh from the prior
            runs = [(1.0, 0.0, p0)]
            continue
        runs = [(grown[r] / total, post[r][0], post[r][1]) for r in range(len(grown))]
    # the current slope given that the segment holds data (run length >= 1)
    w = sum(r[0] for r in runs[1:])
    if not w > 0.0:
        return None
    mix_mean = sum(p * m for (p, m, _) in runs[1:]) / w
    mix_sq = sum(p * (1.0 / q + m * m) for (p, m, q) in runs[1:])
    return mix_mean, max(mix_sq / w - mix_mean * mix_mean, 0.0)


def bocpd_trigger(scores, hazard, z, sigma0, prior_sd):
    for e in range(2, len(scores) + 1):
        if scores[e - 1] - scores[e - 2] == -math.inf:  # an infinite fall
            return e
        post = bocpd_slope_posterior(scores[:e], hazard, sigma0, prior_sd)
        if post is not None and post[0] < -z * math.sqrt(post[1]):
            return e
    return 0


def evalstop_trigger(scores, k):
    for e in range(1, len(scores) + 1):
        run = 0
        for i in range(1, e):
            run = run + 1 if scores[i] < scores[i - 1] else 0
        if run >= k:
            return e
    return 0


REFERENCE = {
    "patience": patience_trigger,
    "margin": margin_trigger,
    "cusum": cusum_trigger,
    "peak": peak_trigger,
    "bocpd": bocpd_trigger,
    "evalstop": evalstop_trigger,
}
