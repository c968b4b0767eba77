"""Learning curves as functions of progress ``u`` (MODEL.md section 4).

Divisions use ``np.divide``: IEEE division like ``/`` but without numba's
ZeroDivisionError check, whose branch would stop loops over evaluations from
vectorising (every divisor here is positive for a valid config).
"""
import math

import numpy as np

from .jit import entry, part


@part
def gold_rl_nb(u, ustar, height):
    """Gao et al. (2023) RL form ``R(d) = d (alpha - beta ln d)`` with ``d`` linear in
    progress, normalised to peak ``height`` at ``u = ustar``: ``h x (1 - ln x)``."""
    if u <= 0.0:
        return 0.0
    x = np.divide(u, ustar)
    return height * x * (1.0 - math.log(x))


@part
def gold_rl_logs_nb(u, ln_u, ustar, ln_ustar, height):
    """``gold_rl_nb`` for ``u > 0`` given ``ln_u = log(u)`` and ``ln_ustar = log(ustar)``:
    ``h x (1 - (ln u - ln u*))``.  Workload generation takes the logs once per cluster
    and once per job instead of one ``log(u / u*)`` per evaluation (agrees with
    ``gold_rl_nb`` to ~1e-15 relative, not to the bit; tests/reference.py writes it so)."""
    x = np.divide(u, ustar)
    return height * x * (1.0 - (ln_u - ln_ustar))


@part
def gold_rl_curved_nb(u, ustar, height, gamma):
    """``gold_rl_nb`` with ``d = sqrt(KL)`` growing like ``u^gamma`` (KL curvature,
    MODEL.md section 4): ``x = (u / u*)^gamma``; ``gamma = 1`` is ``gold_rl_nb``."""
    if gamma == 1.0:
        return gold_rl_nb(u, ustar, height)
    if u <= 0.0:
        return 0.0
    ln_x = gold_rl_curved_exponent_nb(math.log(u), math.log(ustar), gamma)
    return gold_rl_curved_from_exp_nb(ln_x, math.exp(ln_x), height)


@part
def gold_rl_curved_exponent_nb(ln_u, ln_ustar, gamma):
    """``ln x = gamma (ln u - ln u*)``, the exponent of ``gold_rl_curved_nb`` for ``u > 0``
    given the logs.  The workload takes every exponential of a cluster in one vectorised
    pass (``kernels.libm``), so the curve is written in two halves around it."""
    return gamma * (ln_u - ln_ustar)


@part
def gold_rl_curved_from_exp_nb(ln_x, x, height):
    """``gold_rl_curved_nb`` from its exponent ``ln_x`` and ``x = exp(ln_x)``:
    ``h x (1 - ln x)``."""
    return height * x * (1.0 - ln_x)


@part
def gold_saturating_exponent_nb(u, tau):
    """LoRA and healthy DPO, ``h (1 - exp(-u / tau))``: the exponent."""
    return np.divide(-u, tau)


@part
def gold_saturating_from_exp_nb(e, height):
    """The saturating curve from ``e = exp(-u / tau)``."""
    return height * (1.0 - e)


@entry
def proxy_reward_nb(u, ustar, height, gamma=1.0):
    """Proxy reward, linear in ``d = sqrt(KL)``: the ``alpha d`` term of Gao's form
    (``d`` grows like ``u^gamma``)."""
    if gamma == 1.0:
        return height * (u / ustar)
    return height * (u / ustar) ** gamma


@part
def loss_nb(u, loss0, loss_inf, loss_tau):
    """Training loss, monotone decreasing for every job: no hacking signal."""
    return loss_inf + np.divide(loss0 - loss_inf, 1.0 + np.divide(u, loss_tau))
