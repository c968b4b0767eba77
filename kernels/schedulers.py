"""Base schedulers' priority keys (MODEL.md section 6): smaller key runs first.

Decision kernel: only observed job state goes in (estimate, attained service, GPU
demand, loss readings, demotion flag); ties break by job index, which is arrival
order because arrivals are generated in index order.
"""
from functools import lru_cache

import numpy as np
from numba import prange

from .codes import FIFO, LOSS_AWARE, SJF_EST, SRTF_EST, TIRESIAS
from .jit import kernel, max_nb, part, user_driver


@part
def is_preemptive_nb(scheduler):
    return scheduler == SRTF_EST or scheduler == LOSS_AWARE or scheduler == TIRESIAS


@part
def loss_aware_rate_nb(loss_prev, loss_last, gpu_h_between):
    """SLAQ-like value of more service: relative loss drop per GPU-hour."""
    return (loss_prev - loss_last) / loss_prev / gpu_h_between


@kernel
def tiresias_queue_nb(attained_gpu_h, thresholds_gpu_h):
    """2D-LAS queue index: how many thresholds the job has reached."""
    q = 0
    # An index loop, not ``for x in thresholds_gpu_h``: numba's array iterator costs a
    # reference-count round trip per call, which was half of srtf_est's engine time.
    for i in range(thresholds_gpu_h.shape[0]):
        if attained_gpu_h >= thresholds_gpu_h[i]:
            q += 1
    return q


@part
def priority_key_nb(scheduler, t_est_h, attained_h, gpus, n_loss, loss_rate, thresholds_gpu_h):
    """Scalar key of one job; the engine orders by ``(demoted, key, job index)``.  A part:
    each engine passes its scheduler as a constant, so numba keeps only that branch."""
    if scheduler == FIFO:
        return 0.0
    if scheduler == SJF_EST:
        return t_est_h
    if scheduler == SRTF_EST:
        return max_nb(t_est_h - attained_h, 0.0)
    if scheduler == LOSS_AWARE:
        if n_loss < 2:
            return -np.inf
        return -loss_rate
    if scheduler == TIRESIAS:
        return float(tiresias_queue_nb(gpus * attained_h, thresholds_gpu_h))
    return 0.0


@part
def precedes_nb(demoted_a, key_a, idx_a, demoted_b, key_b, idx_b):
    """Strict order used by every scheduler: not demoted first, then key, then index."""
    if demoted_a != demoted_b:
        return demoted_b
    if key_a != key_b:
        return key_a < key_b
    return idx_a < idx_b


@lru_cache(maxsize=None)
def user_keys_driver(key):
    """Static keys ``[C, J]`` of a user scheduler: ``key(t_est_h, gpus, job_type,
    arrival_h, *params)`` per job, from what is observed at its arrival.  The engine
    orders by them as it orders ``sjf_est`` by ``t_est_h`` (a static key)."""
    @user_driver
    def user_keys_nb(params, t_est_h, gpus, job_type, arrival_h, out):
        for c_ in prange(t_est_h.shape[0]):
            c = np.int64(c_)  # signed, as outside prange: each per-cluster kernel compiles once
            for j in range(t_est_h.shape[1]):
                out[c, j] = key(t_est_h[c, j], gpus[c, j], job_type[c, j], arrival_h[c, j], *params)
    return user_keys_nb
