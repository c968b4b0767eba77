"""Workload generation (MODEL.md sections 3-4): one cluster = one independent draw.

Every quantity is a pure function of ``(seed, cluster, job, eval, stream)`` through
``kernels.rng``; the rules are tabled in ``docs/model.md``.  Outputs are
struct-of-arrays ``[cluster, job]`` and ``[cluster, job, eval]``, written in place.
"""
import math
from collections import namedtuple

import numpy as np

from .codes import (DPO, RLHF, S_ARRIVAL, S_DURATION, S_ESTIMATE, S_EVAL_NOISE,
                    S_GPUS, S_HACKING, S_HEIGHT, S_LOSS0, S_LOSS_NOISE, S_LOSSINF,
                    S_LOSSTAU, S_NOISE_SCALE, S_TAU, S_TYPE, S_USTAR)
from .curves import (gold_rl_curved_exponent_nb, gold_rl_curved_from_exp_nb, gold_rl_logs_nb,
                     gold_saturating_exponent_nb, gold_saturating_from_exp_nb, loss_nb)
from .jit import kernel, min_nb, part
from .libm import exp_array_nb
from .rng import (cluster_prefix_nb, job_prefix_nb, key_from_prefix_nb,
                  key_to_open_uniform_nb, key_to_uniform_nb, is_normal_tail_nb,
                  normal_central_nb, normal_tail_near_nb, normal_tail_nb,
                  normal_tail_side_nb)

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
    "kl_gamma",         # float64: sqrt(KL) grows like u^kl_gamma (1: the plain model)
    "hack_sharpness",   # float64: hacking gold is Gao's form in (d / d*)^m (1: plain)
    "sigma_spread",     # float64: log-normal sigma of the per-job noise scale (0: plain)
    "noise_rho",        # float64: AR(1) coefficient of the evaluation noise (0: plain)
])


# The per-job random streams, one row each of ``workload_1c_nb``'s uniforms: the first
# ``_N_UNIFORM`` used as uniforms, then those it turns into normals (open interval): run
# time, estimate and, only when the noise scales spread, the noise scale.
_JOB_STREAMS = (S_TYPE, S_GPUS, S_HACKING, S_USTAR, S_HEIGHT, S_TAU, S_LOSS0, S_LOSSINF,
                S_LOSSTAU, S_ARRIVAL, S_DURATION, S_ESTIMATE, S_NOISE_SCALE)
_N_UNIFORM = 10
_EVAL_STREAMS = (S_EVAL_NOISE, S_LOSS_NOISE)


@part
def _between_nb(rng_pair, u):
    return rng_pair[0] + (rng_pair[1] - rng_pair[0]) * u


@kernel
def _uniforms_nb(seed, cluster, stream, eval_, open_interval, n_jobs, out):
    """``out[j] = uniform_nb(seed, cluster, j, eval_, stream)`` for every job ``j``
    (``open_interval``: the (0, 1) uniform that ``normal_nb`` feeds its quantile).

    The key's prefixes are hashed once per stream and once per job, not once per draw
    (``kernels.rng.key_nb`` is the same chain), and the loop has no branch, so it
    vectorises.
    """
    pre = cluster_prefix_nb(seed, cluster, stream)
    if open_interval:
        for j in range(n_jobs):
            out[j] = key_to_open_uniform_nb(key_from_prefix_nb(job_prefix_nb(pre, j), eval_))
    else:
        for j in range(n_jobs):
            out[j] = key_to_uniform_nb(key_from_prefix_nb(job_prefix_nb(pre, j), eval_))


@kernel
def _eval_uniforms_nb(seed, cluster, stream, n_jobs, n_evals, out):
    """``out[j * E + e - 1]``: the open uniform behind ``normal_nb(seed, cluster, j, e, stream)``."""
    pre = cluster_prefix_nb(seed, cluster, stream)
    for j in range(n_jobs):
        job = job_prefix_nb(pre, j)
        base = j * n_evals
        for e in range(n_evals):
            out[base + e] = key_to_open_uniform_nb(key_from_prefix_nb(job, e + 1))


@kernel
def _normals_nb(p, out):
    """``out[i] = normal_quantile_nb(p[i])``, in passes that each vectorise, except the
    ``log`` calls: the central polynomial for every draw, then for the ~15% of draws in
    the tails, gathered into contiguous scratch: their ``r`` (select), ``log(r)`` (one
    scalar libm call each, independent of each other, so they overlap), the rest of the
    tail formula (``normal_tail_near_nb``), and a scatter back.  Draw by draw, the
    quantile was bound by its latency chain and by mispredicted branches; the values are
    the same operations on the same numbers, so the same bits."""
    n = p.shape[0]
    for i in range(n):
        out[i] = normal_central_nb(p[i])
    tails = np.empty(n, dtype=np.int64)
    n_tails = 0
    for i in range(n):  # branch-free compaction of the tail indices
        tails[n_tails] = i
        n_tails += is_normal_tail_nb(p[i])
    scratch = np.empty(3 * n_tails)  # one-dimensional, as every float buffer here: see below
    tp, lr, x = scratch[:n_tails], scratch[n_tails:2 * n_tails], scratch[2 * n_tails:]
    for k in range(n_tails):
        tp[k] = p[tails[k]]
    for k in range(n_tails):
        lr[k] = math.log(normal_tail_side_nb(tp[k]))
    n_far = 0
    for k in range(n_tails):
        x[k] = normal_tail_near_nb(tp[k], lr[k])
        n_far += math.sqrt(-lr[k]) > 5.0
    for k in range(n_tails):
        out[tails[k]] = x[k]
    if n_far > 0:  # p within ~1.4e-11 of 0 or 1: the other tail polynomial
        for k in range(n_tails):
            if math.sqrt(-lr[k]) > 5.0:
                out[tails[k]] = normal_tail_nb(tp[k])


@kernel
def _ar1_nb(rho, n_jobs, n_evals, noise):
    """Turn each job's iid normals ``noise[j * E + e]`` into a stationary AR(1) in place:
    ``eps_1 = z_1``, ``eps_e = rho eps_{e-1} + sqrt(1 - rho^2) z_e`` (unit variance).
    Evaluation by evaluation across jobs: the recursion is a chain within a job only, so
    the jobs' steps overlap instead of waiting on each other (1.5-2.5 us a cluster)."""
    c = math.sqrt(1.0 - rho * rho)
    for e in range(1, n_evals):
        for j in range(n_jobs):
            i = np.uint64(j * n_evals + e)  # unsigned: no wrap-around test per index
            noise[i] = rho * noise[i - np.uint64(1)] + c * noise[i]


@kernel
def workload_1c_nb(p, seed, cluster, c, job_type, gpus, arrival_h, duration_h, t_est_h,
                   hacking, ustar, height, tau, loss0, loss_inf, loss_tau, gold, score, loss,
                   peak_eval, draw_score=True, draw_loss=True):
    """Fill row ``c`` of every output with cluster number ``cluster``'s draws.

    ``draw_score=False`` leaves the evaluation scores (NaN in ``score``) and their noise
    undrawn, for a run whose decisions never read them (no stop policy, ``stop_at``,
    ``loss_plateau``, the oracle: no result column holds a score); ``draw_loss=False``
    the loss readings, for a run that never reads them (no ``loss_aware``, no loss-based
    stop policy).  Every other value is the same, since each draw has its own counter.

    Every value is bit-identical to the table of docs/model.md computed draw by draw;
    only the order of work differs: each stream's draws are made for all jobs at once
    (``_uniforms_nb``, ``_normals_nb``), every exponential in one pass (``exp_array_nb``),
    then they are combined job by job.
    """
    n_jobs = job_type.shape[1]
    n_evals = gold.shape[2]
    n_draws = n_jobs * n_evals
    n_series = np.int64(draw_score) + np.int64(draw_loss)  # of evaluation noise drawn
    n_noise = n_series * n_draws
    spread = p.sigma_spread
    n_streams = _N_UNIFORM + (3 if spread != 0.0 else 2)
    # Each kind of draw is made at one call site (a loop over streams) and every normal
    # in one call of ``_normals_nb``: the compiled kernel then holds one copy of their
    # vectorised loops instead of one per call (docs/performance.md, round 16).
    # ``draws``: a row of ``n_jobs`` uniforms per stream of ``_JOB_STREAMS``, then the
    # evaluation noise's uniforms (scores, then losses, those drawn); normals of all but
    # the first ``_N_UNIFORM`` rows.
    draws = np.empty(n_streams * n_jobs + n_noise)
    for k in range(n_streams):
        _uniforms_nb(seed, cluster, _JOB_STREAMS[k], 0, k >= _N_UNIFORM, n_jobs,
                     draws[k * n_jobs:(k + 1) * n_jobs])
    first_eval = n_streams * n_jobs
    skip = np.int64(not draw_score)  # the streams drawn: _EVAL_STREAMS[skip:skip + n_series]
    for k in range(n_series):
        at = first_eval + k * n_draws
        _eval_uniforms_nb(seed, cluster, _EVAL_STREAMS[skip + k], n_jobs, n_evals,
                          draws[at:at + n_draws])
    u_type, u_gpus = draws[0:n_jobs], draws[n_jobs:2 * n_jobs]
    u_hacking, u_ustar = draws[2 * n_jobs:3 * n_jobs], draws[3 * n_jobs:4 * n_jobs]
    u_height, u_tau = draws[4 * n_jobs:5 * n_jobs], draws[5 * n_jobs:6 * n_jobs]
    u_loss0, u_lossinf = draws[6 * n_jobs:7 * n_jobs], draws[7 * n_jobs:8 * n_jobs]
    u_losstau, u_arrival = draws[8 * n_jobs:9 * n_jobs], draws[9 * n_jobs:10 * n_jobs]
    z = np.empty(draws.shape[0] - _N_UNIFORM * n_jobs)
    _normals_nb(draws[_N_UNIFORM * n_jobs:], z)  # element by element: the same values
    z_duration, z_estimate, z_scale = z[:n_jobs], z[n_jobs:2 * n_jobs], z[2 * n_jobs:3 * n_jobs]
    noise = z[first_eval - _N_UNIFORM * n_jobs:]  # the scores' noise (if drawn), the losses'
    loss_noise = np.uint64(n_draws if draw_score else 0)
    # Float buffers are one-dimensional and sliced: numba compiles ``np.empty`` once per
    # shape and dtype, a few hundredths of a second of a cold start each.
    progress = np.empty(2 * n_evals)  # u_e = e / E and log(u_e)
    ln_progress = progress[n_evals:]
    progress = progress[:n_evals]
    for e in range(1, n_evals + 1):
        progress[e - 1] = e / n_evals
        ln_progress[e - 1] = math.log(e / n_evals)
    # Every exponential of the cluster in one vectorised pass (``exp_array_nb``: the
    # library's bits): ``arg`` holds the exponents of each job's run time, estimate and
    # noise scale ([0, 3J)), then of its gold curve at each evaluation (3J + j E + e);
    # ``ex`` their exponentials.  1.0 fills a slot that needs none.
    n_exp = 3 * n_jobs + n_draws
    expo = np.empty(2 * n_exp)
    arg, ex = expo[:n_exp], expo[n_exp:]
    ln_ustar = np.empty(n_jobs)  # log u*, for the plain RL form
    t_arr = 0.0
    for j in range(n_jobs):
        t = 2
        for tt in range(3):
            if u_type[j] < p.cum_mix[tt]:
                t = tt
                break
        job_type[c, j] = t
        nd = p.n_demands[t]
        gpus[c, j] = p.demands[t, min_nb(np.int64(u_gpus[j] * nd), nd - 1)]
        arg[j] = p.log_sd * z_duration[j]
        arg[n_jobs + j] = p.est_sigma * z_estimate[j]
        # the job's noise scale sigma_j = sigma exp(s Z_j - s^2 / 2) (mean sigma); s = 0:
        # every job at sigma, and no Z_j drawn
        arg[2 * n_jobs + j] = (spread * z_scale[j] - 0.5 * spread * spread if spread != 0.0
                               else 1.0)
        uh = u_hacking[j]
        hk = (t == RLHF and uh < p.base_rate) or (t == DPO and uh < p.dpo_base_rate)
        hacking[c, j] = hk
        if hk:
            us = _between_nb(p.ustar_hacking, u_ustar[j])
        elif t == RLHF:
            us = _between_nb(p.ustar_healthy, u_ustar[j])
        else:
            us = np.nan
        ustar[c, j] = us
        height[c, j] = _between_nb(p.height, u_height[j])
        tau[c, j] = _between_nb(p.tau, u_tau[j])
        loss0[c, j] = _between_nb(p.loss0, u_loss0[j])
        loss_inf[c, j] = _between_nb(p.loss_inf, u_lossinf[j])
        loss_tau[c, j] = _between_nb(p.loss_tau, u_losstau[j])
        t_arr = t_arr + (-math.log(1.0 - u_arrival[j]) / p.arrival_rate)
        arrival_h[c, j] = t_arr
        # Unsigned offsets, here and below: numba tests a signed index for wrap-around
        # element by element, and these short loops then gathered instead of loading.
        first = np.uint64(3 * n_jobs + j * n_evals)
        if t == RLHF or hk:  # hacking DPO: RL form (Rafailov et al. 2024)
            ln_ustar[j] = math.log(us)
            gam = p.kl_gamma * p.hack_sharpness if hk else p.kl_gamma
            for e in range(n_evals):
                arg[first + np.uint64(e)] = (1.0 if gam == 1.0 else gold_rl_curved_exponent_nb(
                    ln_progress[e], ln_ustar[j], gam))
        else:
            for e in range(n_evals):
                arg[first + np.uint64(e)] = gold_saturating_exponent_nb(progress[e], tau[c, j])
    exp_array_nb(arg, ex)
    # Evaluation noise: noise[j * E + e - 1] for scores, noise[loss_noise + j * E + e - 1]
    # for losses.
    if draw_score and p.noise_rho != 0.0:
        _ar1_nb(p.noise_rho, n_jobs, n_evals, noise[:n_draws])
    for j in range(n_jobs):
        dur = p.median_h[job_type[c, j]] * ex[j]
        duration_h[c, j] = dur
        t_est_h[c, j] = dur * ex[n_jobs + j]
        g = gold[c, j]
        first = np.uint64(3 * n_jobs + j * n_evals)
        h = height[c, j]
        if job_type[c, j] == RLHF or hacking[c, j]:
            gam = p.kl_gamma * p.hack_sharpness if hacking[c, j] else p.kl_gamma
            if gam == 1.0:
                for e in range(n_evals):
                    g[e] = gold_rl_logs_nb(progress[e], ln_progress[e], ustar[c, j],
                                           ln_ustar[j], h)
            else:
                for e in range(n_evals):
                    k = first + np.uint64(e)
                    g[e] = gold_rl_curved_from_exp_nb(arg[k], ex[k], h)
        else:
            for e in range(n_evals):
                g[e] = gold_saturating_from_exp_nb(ex[first + np.uint64(e)], h)
        best = -np.inf
        best_e = 1
        for e in range(n_evals):
            if g[e] > best:
                best = g[e]
                best_e = e + 1
        peak_eval[c, j] = best_e
        s = score[c, j]
        ls = loss[c, j]
        l0 = loss0[c, j]
        li = loss_inf[c, j]
        lt = loss_tau[c, j]
        sj = p.sigma
        if spread != 0.0:
            sj = p.sigma * ex[2 * n_jobs + j]
        first_noise = np.uint64(j * n_evals)
        for e in range(n_evals):  # one loop on both paths: ``s`` then needs no count per job
            s[e] = g[e] + sj * noise[first_noise + np.uint64(e)] if draw_score else np.nan
        if not draw_loss:
            ls[:] = np.nan
            continue
        first_noise += loss_noise
        for e in range(n_evals):
            ls[e] = (loss_nb(progress[e], l0, li, lt)
                     + p.loss_sigma * noise[first_noise + np.uint64(e)])
