"""The bounds' likelihood grid in one pass over all jobs (``fastsim.detector_bounds``
before it was integrated in blocks on threads), the reference the blocked one must
equal bit for bit."""
import math

import numpy as np
from scipy.special import ndtr, ndtri

from fastsim.detector_bounds import _shapes, _whiten


def log_marginal(score, cfg, hacking, upto=None, n_run=None, n_ustar=60, n_sigma=12):
    n = score.shape[-1] if upto is None else upto
    r = _whiten(score[:, :n], cfg.noise_rho)
    q = _whiten(_shapes(cfg, hacking, n_ustar, n_run or cfg.n_evals)[:, :n], cfg.noise_rho)
    rr = (r * r).sum(1)[:, None]
    rq = r @ q.T
    qq = (q * q).sum(1)[None, :]
    h_hat = rq / qq
    a, b = cfg.height
    s = cfg.sigma_spread
    quantiles = ndtri((np.arange(n_sigma) + 0.5) / n_sigma) if s > 0 else np.zeros(1)
    out = np.empty((score.shape[0], q.shape[0], quantiles.size))
    for i, zq in enumerate(quantiles):
        sig = max(cfg.sigma, 1e-6) * math.exp(s * zq - 0.5 * s * s)
        sd = sig / np.sqrt(qq)
        mass = ndtr((b - h_hat) / sd) - ndtr((a - h_hat) / sd)
        out[:, :, i] = (-(rr - rq * h_hat) / (2 * sig * sig) - n * math.log(sig)
                        + np.log(np.maximum(mass, 1e-300)) + np.log(sd))
    out = out.reshape(score.shape[0], -1)
    m = out.max(1, keepdims=True)
    return m[:, 0] + np.log(np.exp(out - m).mean(1))


def bayes_posterior(score, cfg, upto=None, n_run=None):
    prior = math.log(cfg.base_rate) - math.log1p(-cfg.base_rate)
    return 1.0 / (1.0 + np.exp(-(log_marginal(score, cfg, True, upto, n_run)
                                 - log_marginal(score, cfg, False, upto, n_run) + prior)))
