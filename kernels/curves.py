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
    ln_x = gamma * (math.log(u) - math.log(ustar))
    return height * math.exp(ln_x) * (1.0 - ln_x)


@part
def gold_rl_curved_logs_nb(ln_u, ln_ustar, height, gamma):
    """``gold_rl_curved_nb`` for ``u > 0`` given the logs, as the workload computes it."""
    ln_x = gamma * (ln_u - ln_ustar)
    return height * math.exp(ln_x) * (1.0 - ln_x)


@part
def gold_saturating_nb(u, tau, height):
    """LoRA and healthy DPO: ``h (1 - exp(-u / tau))``."""
    return height * (1.0 - math.exp(np.divide(-u, tau)))


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
