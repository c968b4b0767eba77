"""Cost-aware SGD on finite sums with a known optimum (arXiv 2604.28020, section 10 of MODEL.md).

``f(x) = (1/n) sum_i f_i(x)``, ``f_i(x) = loss(a_i . x, b_i) + (reg/2) |x|^2`` with a
squared loss (``b`` real) or a logistic loss (``b`` in {-1, +1}).  SGD samples ``i ~ p``,
steps along ``grad f_i(x) / (n p_i)`` and projects on the ball ``|x| <= radius``; the
driver runs independent replications (the RNG "cluster" coordinate) in parallel and
records the cost ``sum c_i`` of the queried samples until the averaged iterate is
within ``gap_target`` of ``f*``.  Problem instances are drawn here too, so a problem is
a pure function of ``(seed, instance)``.
"""
import math

import numpy as np
from numba import prange

from .costaware import (S_COST, S_FEATURE, S_NOISE, S_ROW_SCALE, S_SGD_PICK, S_TARGET,
                        draw_index_nb)
from .codes import (LEAST_SQUARES, LOGISTIC, LOGNORMAL, PARETO,  # noqa: F401 - nbs.CODE
                    STEP_CONVEX, STEP_STRONGLY_CONVEX)
from .jit import driver, entry
from .rng import normal_nb, uniform_nb



@entry
def make_problem_nb(kind, seed, instance, scale_sigma, noise, cost_dist, cost_param, cost_corr,
                    A, b, c):
    """Fill ``A`` (n, d), ``b`` (n,), ``c`` (n,) with one problem instance; costs have mean 1.

    Row ``i`` is scaled by ``exp(scale_sigma u_i)``, so gradient bounds are heavy-tailed;
    its cost is ``exp(cost_param z_i)`` (lognormal, ``cost_param`` = sigma) or a Pareto
    quantile of ``Phi(z_i)`` (``cost_param`` = alpha), with ``z_i`` correlated
    ``cost_corr`` with ``u_i`` (a Gaussian copula).
    """
    n, d = A.shape
    x_true = np.empty(d)
    for j in range(d):
        x_true[j] = normal_nb(seed, instance, 0, j, S_TARGET)
    rho_c = math.sqrt(max(0.0, 1.0 - cost_corr * cost_corr))
    total = 0.0
    for i in range(n):
        u = normal_nb(seed, instance, i, 0, S_ROW_SCALE)
        scale = math.exp(scale_sigma * u) / math.sqrt(d)
        z = 0.0
        for j in range(d):
            A[i, j] = scale * normal_nb(seed, instance, i, j, S_FEATURE)
            z += A[i, j] * x_true[j]
        e = normal_nb(seed, instance, i, 0, S_NOISE)
        if kind == LEAST_SQUARES:
            b[i] = z + noise * e
        else:
            b[i] = 1.0 if z + noise * e > 0.0 else -1.0
        zc = cost_corr * u + rho_c * normal_nb(seed, instance, i, 0, S_COST)
        if cost_dist == LOGNORMAL:
            c[i] = math.exp(cost_param * zc)
        else:
            q = 0.5 * math.erfc(zc / math.sqrt(2.0))  # 1 - Phi(z), accurate in the tail
            c[i] = max(q, 1e-300) ** (-1.0 / cost_param)
        total += c[i]
    for i in range(n):
        c[i] *= n / total


@entry
def margin_slope_nb(kind, z, y):
    """d loss / d z at ``z = a . x`` for label/target ``y``."""
    if kind == LEAST_SQUARES:
        return z - y
    t = -y * z  # logistic: -y sigma(-y z), written to avoid overflow
    if t > 0.0:
        return -y / (1.0 + math.exp(-t))
    e = math.exp(t)
    return -y * e / (1.0 + e)


@entry
def full_loss_nb(kind, A, b, reg, x):
    """``f(x) = (1/n) sum_i loss_i(x) + (reg/2) |x|^2``."""
    n, d = A.shape
    s = 0.0
    for i in range(n):
        z = 0.0
        for j in range(d):
            z += A[i, j] * x[j]
        if kind == LEAST_SQUARES:
            r = z - b[i]
            s += 0.5 * r * r
        else:
            t = -b[i] * z
            s += t + math.log1p(math.exp(-t)) if t > 0.0 else math.log1p(math.exp(t))
    xx = 0.0
    for j in range(d):
        xx += x[j] * x[j]
    return s / n + 0.5 * reg * xx


NEWTON_MAX_ITER = 100  # damped Newton steps of optimum_nb at most
NEWTON_TOL = 1e-26  # squared gradient norm at which optimum_nb stops
# ... or at its round-off floor: two steps in a row each leave more than NEWTON_STALL of the
# squared gradient norm, once it is below NEWTON_NEAR of its value at x = 0 but above
# NEWTON_FLOOR_MIN.  There the decrease a Newton step promises is below the rounding of
# the objective, so the line search halves the step until the objective reads the same: a
# logistic instance of n = 256, d = 1,000 stalls at 6.7e-20 after 5 steps and took 95 more,
# each leaving 99.999% of it.  A floor within a few powers of ten of NEWTON_TOL is
# sometimes crept under after a stall of a few steps, so there NEWTON_TOL alone decides
NEWTON_STALL = 0.9
NEWTON_NEAR = 1e-12
NEWTON_FLOOR_MIN = 1e-22


@entry
def newton_step_nb(kind, A, b, reg, weight, wsum, x):
    """One damped Newton step of ``optimum_nb`` from ``x`` (d,), ``wsum`` the summed
    weights: ``(next x, squared gradient norm at x)``; ``x`` itself when that norm is below
    ``NEWTON_TOL``.  Building the Hessian is O(n d^2) and solving it O(d^3)."""
    n, d = A.shape
    g = np.zeros(d)
    H = np.zeros((d, d))
    for i in range(n):
        if weight[i] == 0.0:
            continue
        z = 0.0
        for j in range(d):
            z += A[i, j] * x[j]
        s = margin_slope_nb(kind, z, b[i])
        if kind == LEAST_SQUARES:
            h = 1.0
        else:
            sg = 1.0 / (1.0 + math.exp(-z))
            h = sg * (1.0 - sg)
        for j in range(d):
            g[j] += weight[i] * s * A[i, j] / n
            for k in range(d):
                H[j, k] += weight[i] * h * A[i, j] * A[i, k] / n
    for j in range(d):
        g[j] += reg * wsum / n * x[j]
        H[j, j] += reg * wsum / n
    gn = 0.0
    for j in range(d):
        gn += g[j] * g[j]
    if gn < NEWTON_TOL:
        return x, gn
    step = np.linalg.solve(H, g)
    # Newton on a convex smooth function: halve until the objective decreases.
    f0 = weighted_loss_nb(kind, A, b, reg, weight, x)
    t = 1.0
    xn = x - step
    for _ in range(50):
        xn = x - t * step
        if weighted_loss_nb(kind, A, b, reg, weight, xn) <= f0:
            break
        t *= 0.5
    return xn, gn


@entry
def newton_done_nb(gn, seen):
    """Whether ``optimum_nb`` stops after its step from a point of squared gradient norm
    ``gn``: below ``NEWTON_TOL``, or stalled at its round-off floor (``NEWTON_STALL``,
    ``NEWTON_NEAR``, ``NEWTON_FLOOR_MIN``).  ``seen`` (3,) float64, all ``inf`` before the
    first step, holds the norm at ``x = 0`` and those before the last two steps; updated in
    place."""
    if seen[0] == np.inf:
        seen[0] = gn
    done = gn < NEWTON_TOL or (NEWTON_FLOOR_MIN < gn <= NEWTON_NEAR * seen[0]
                               and gn > NEWTON_STALL * seen[1]
                               and seen[1] > NEWTON_STALL * seen[2])
    seen[2] = seen[1]
    seen[1] = gn
    return done


@entry
def optimum_nb(kind, A, b, reg, weight):
    """Minimiser of ``(1/n) sum_i weight_i f_i(x)`` by damped Newton (exact for least squares).

    ``weight`` (n,) is 1 for every sample for the full problem, 0/1 for a subset.
    """
    n, d = A.shape
    wsum = 0.0
    for i in range(n):
        wsum += weight[i]
    x = np.zeros(d)
    seen = np.full(3, np.inf)
    for _ in range(NEWTON_MAX_ITER):
        x, gn = newton_step_nb(kind, A, b, reg, weight, wsum, x)
        if newton_done_nb(gn, seen) or kind == LEAST_SQUARES:
            break
    return x


@entry
def weighted_loss_nb(kind, A, b, reg, weight, x):
    """``(1/n) sum_i weight_i f_i(x)``, the objective a subset's SGD converges to."""
    n, d = A.shape
    s = 0.0
    wsum = 0.0
    for i in range(n):
        if weight[i] == 0.0:
            continue
        wsum += weight[i]
        z = 0.0
        for j in range(d):
            z += A[i, j] * x[j]
        if kind == LEAST_SQUARES:
            r = z - b[i]
            s += weight[i] * 0.5 * r * r
        else:
            t = -b[i] * z
            s += weight[i] * (t + math.log1p(math.exp(-t)) if t > 0.0 else math.log1p(math.exp(t)))
    xx = 0.0
    for j in range(d):
        xx += x[j] * x[j]
    return s / n + 0.5 * reg * wsum / n * xx


@entry
def gradient_bounds_nb(kind, A, b, reg, radius, out):
    """``out[i] = max_{|x| <= radius} |grad f_i(x)|`` bound (triangle inequality)."""
    n, d = A.shape
    for i in range(n):
        an = 0.0
        for j in range(d):
            an += A[i, j] * A[i, j]
        an = math.sqrt(an)
        if kind == LEAST_SQUARES:
            out[i] = an * (an * radius + abs(b[i])) + reg * radius
        else:
            out[i] = an + reg * radius  # |sigma| <= 1


@entry
def sample_gradient_nb(kind, A, b, reg, i, x, out):
    """``out = grad f_i(x)`` (d,)."""
    d = A.shape[1]
    z = 0.0
    for j in range(d):
        z += A[i, j] * x[j]
    s = margin_slope_nb(kind, z, b[i])
    for j in range(d):
        out[j] = s * A[i, j] + reg * x[j]


@entry
def sgd_1r_nb(kind, A, b, reg, mu, radius, cdf, p, c, step_rule, s_bound, f_star, gap_target,
              max_steps, seed, rep):
    """One replication; returns ``(cost, steps, gap)`` at the first check with gap <= target.

    If the target is never met, steps is -1, cost is what the run spent by the cap (a lower
    bound of its cost to the target, for censored statistics) and ``gap`` is the last one.
    Steps: convex ``eta_t = 2 radius / sqrt(S (t+1))`` with uniform averaging (anytime
    form of ``D / sqrt(S T)``); strongly convex ``eta_t = 2 / (mu (t+2))`` with
    ``t``-weighted averaging (Lacoste-Julien, Schmidt & Bach 2012).
    """
    n, d = A.shape
    x = np.zeros(d)
    xbar = np.zeros(d)
    g = np.empty(d)
    cost = 0.0
    next_check = 1
    gap = np.inf
    for t in range(max_steps):
        i = draw_index_nb(cdf, uniform_nb(seed, rep, 0, t, S_SGD_PICK))
        sample_gradient_nb(kind, A, b, reg, i, x, g)
        if step_rule == STEP_CONVEX:
            eta = 2.0 * radius / math.sqrt(s_bound * (t + 1.0))
        else:
            eta = 2.0 / (mu * (t + 2.0))
        scale = eta / (n * p[i])
        norm2 = 0.0
        for j in range(d):
            x[j] -= scale * g[j]
            norm2 += x[j] * x[j]
        if norm2 > radius * radius:
            shrink = radius / math.sqrt(norm2)
            for j in range(d):
                x[j] *= shrink
        cost += c[i]
        # running average of x_1..x_{t+1}: uniform weights, or weights proportional to s
        w_new = 1.0 / (t + 1.0) if step_rule == STEP_CONVEX else 2.0 / (t + 2.0)
        for j in range(d):
            xbar[j] += w_new * (x[j] - xbar[j])
        if t + 1 >= next_check:
            # geometric check schedule: cost is resolved to 1% at O(n d) per check
            gap = full_loss_nb(kind, A, b, reg, xbar) - f_star
            if gap <= gap_target:
                return cost, t + 1, gap
            next_check = max(t + 2, int((t + 1) * 1.01))
    return cost, -1, gap


@driver
def sgd_cost_to_eps_nb(kind, A, b, reg, mu, radius, p, c, step_rule, s_bound, f_star, gap_target,
                       max_steps, seed, rep0, cost_out, steps_out, gap_out):
    """Run ``cost_out.shape[0]`` replications ``rep0, rep0 + 1, ...`` in parallel; writes
    ``cost_out``, ``steps_out`` (int64) and ``gap_out`` (n_reps,), one row per replication."""
    cdf = np.cumsum(p)  # read-only, shared by all replications
    for r in prange(cost_out.shape[0]):
        cost, steps, gap = sgd_1r_nb(kind, A, b, reg, mu, radius, cdf, p, c, step_rule, s_bound,
                                     f_star, gap_target, max_steps, seed, rep0 + r)
        cost_out[r] = cost
        steps_out[r] = steps
        gap_out[r] = gap
