"""Workload generation (MODEL.md sections 3-4): one cluster = one independent draw.

Every quantity is a pure function of ``(seed, cluster, job, eval, stream)`` through
``kernels.rng``; the rules are tabled in ``docs/model.md``.  Outputs are
struct-of-arrays ``[cluster, job]`` and ``[cluster, job, eval]``, written in place.
"""
import math
from collections import namedtuple

import numpy as np
from numba import prange

from kernels.codes import (DPO, RLHF, S_ARRIVAL, S_DURATION, S_ESTIMATE, S_EVAL_NOISE,
                           S_GPUS, S_HACKING, S_HEIGHT, S_LOSS0, S_LOSS_NOISE, S_LOSSINF,
                           S_LOSSTAU, S_TAU, S_TYPE, S_USTAR)
from kernels.curves import gold_rl_nb, gold_saturating_nb, loss_nb
from kernels.jit import driver, kernel
from kernels.rng import normal_nb, uniform_nb

# Scalars and small arrays describing the distributions; built by fastsim.workload.
WorkloadParams = namedtuple("WorkloadParams", [
    "cum_mix",          # float64[3]: cumulative fractions of LoRA, DPO, RLHF
    "demands",          # int32[3, max_choices]: GPU demand choices per type
    "n_demands",        # int64[3]: how many choices per type
    "median_h",         # float64[3]: run-time medians
    "log_sd",           # float64: log-normal sigma of run time
    "est_sigma",        # float64: log-normal sigma of the estimate error
    "base_rate",        # float64: P(hacking) for RLHF
    "dpo_base_rate",    # float64: P(hacking) for DPO
    "ustar_hacking",    # float64[2]
    "ustar_healthy",    # float64[2]
    "height",           # float64[2]
    "tau",              # float64[2]
    "loss0",            # float64[2]
    "loss_inf",         # float64[2]
    "loss_tau",         # float64[2]
    "sigma",            # float64: evaluation-score noise
    "loss_sigma",       # float64: loss-reading noise
    "arrival_rate",     # float64: Poisson rate (jobs / hour)
])


@kernel
def _between_nb(rng_pair, u):
    return rng_pair[0] + (rng_pair[1] - rng_pair[0]) * u


@kernel
def workload_1c_nb(p, seed, cluster, c, job_type, gpus, arrival_h, duration_h, t_est_h,
                   hacking, ustar, height, tau, loss0, loss_inf, loss_tau, gold, score, loss,
                   peak_eval):
    """Fill row ``c`` of every output with cluster number ``cluster``'s draws."""
    n_jobs = job_type.shape[1]
    n_evals = gold.shape[2]
    t_arr = 0.0
    for j in range(n_jobs):
        u = uniform_nb(seed, cluster, j, 0, S_TYPE)
        t = 2
        for tt in range(3):
            if u < p.cum_mix[tt]:
                t = tt
                break
        job_type[c, j] = t
        nd = p.n_demands[t]
        gpus[c, j] = p.demands[t, min(int(uniform_nb(seed, cluster, j, 0, S_GPUS) * nd), nd - 1)]
        dur = p.median_h[t] * math.exp(p.log_sd * normal_nb(seed, cluster, j, 0, S_DURATION))
        duration_h[c, j] = dur
        t_est_h[c, j] = dur * math.exp(p.est_sigma * normal_nb(seed, cluster, j, 0, S_ESTIMATE))
        uh = uniform_nb(seed, cluster, j, 0, S_HACKING)
        hk = (t == RLHF and uh < p.base_rate) or (t == DPO and uh < p.dpo_base_rate)
        hacking[c, j] = hk
        uu = uniform_nb(seed, cluster, j, 0, S_USTAR)
        if hk:
            us = _between_nb(p.ustar_hacking, uu)
        elif t == RLHF:
            us = _between_nb(p.ustar_healthy, uu)
        else:
            us = np.nan
        ustar[c, j] = us
        h = _between_nb(p.height, uniform_nb(seed, cluster, j, 0, S_HEIGHT))
        height[c, j] = h
        ta = _between_nb(p.tau, uniform_nb(seed, cluster, j, 0, S_TAU))
        tau[c, j] = ta
        l0 = _between_nb(p.loss0, uniform_nb(seed, cluster, j, 0, S_LOSS0))
        li = _between_nb(p.loss_inf, uniform_nb(seed, cluster, j, 0, S_LOSSINF))
        lt = _between_nb(p.loss_tau, uniform_nb(seed, cluster, j, 0, S_LOSSTAU))
        loss0[c, j] = l0
        loss_inf[c, j] = li
        loss_tau[c, j] = lt
        t_arr = t_arr + (-math.log(1.0 - uniform_nb(seed, cluster, j, 0, S_ARRIVAL)) / p.arrival_rate)
        arrival_h[c, j] = t_arr
        rl_form = t == RLHF or hk  # hacking DPO follows the RL form (Rafailov et al. 2024)
        best = -np.inf
        best_e = 1
        for e in range(1, n_evals + 1):
            ue = e / n_evals
            if rl_form:
                g = gold_rl_nb(ue, us, h)
            else:
                g = gold_saturating_nb(ue, ta, h)
            gold[c, j, e - 1] = g
            if g > best:
                best = g
                best_e = e
            score[c, j, e - 1] = g + p.sigma * normal_nb(seed, cluster, j, e, S_EVAL_NOISE)
            loss[c, j, e - 1] = loss_nb(ue, l0, li, lt) + p.loss_sigma * normal_nb(
                seed, cluster, j, e, S_LOSS_NOISE)
        peak_eval[c, j] = best_e


@driver
def workload_nb(p, seed, cluster_start, job_type, gpus, arrival_h, duration_h, t_est_h, hacking,
                ustar, height, tau, loss0, loss_inf, loss_tau, gold, score, loss, peak_eval):
    """Generate ``job_type.shape[0]`` clusters numbered from ``cluster_start``; all
    arrays ``[C, J]`` (``gold``, ``score``, ``loss``: ``[C, J, E]``) are written in place."""
    for c in prange(job_type.shape[0]):
        workload_1c_nb(p, seed, cluster_start + c, c, job_type, gpus, arrival_h, duration_h,
                       t_est_h, hacking, ustar, height, tau, loss0, loss_inf, loss_tau, gold,
                       score, loss, peak_eval)


