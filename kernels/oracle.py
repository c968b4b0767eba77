"""The Oracle stop policy: the one declared user of hidden truth (MODEL.md section 7).

It stops each hacking job in scope at its peak evaluation.  It lives apart from the
decision kernels so that they stay provably blind; outputs label it as an upper bound.
"""
from numba import prange

from .codes import RLHF
from .detectors import in_scope_nb
from .jit import driver, kernel


@kernel
def oracle_stops_1c_nb(c, scope_all, job_type, hacking, peak_eval, n_evals, in_scope, stopped,
                       demoted, trigger_eval, delivered_eval):
    """Row ``c`` of ``oracle_stops_nb``."""
    for j in range(job_type.shape[1]):
        scoped = in_scope_nb(scope_all, job_type[c, j], RLHF)
        in_scope[c, j] = scoped
        demoted[c, j] = False
        stop = scoped and hacking[c, j]
        stopped[c, j] = stop
        trigger_eval[c, j] = peak_eval[c, j] if stop else 0
        delivered_eval[c, j] = peak_eval[c, j] if stop else n_evals


@driver
def oracle_stops_nb(scope_all, job_type, hacking, peak_eval, n_evals, in_scope, stopped,
                    demoted, trigger_eval, delivered_eval):
    """Same outputs as ``kernels.stops.resolve_stops_nb``, from the hacking label and
    the peak evaluation (hidden truth)."""
    for c in prange(job_type.shape[0]):
        oracle_stops_1c_nb(c, scope_all, job_type, hacking, peak_eval, n_evals, in_scope,
                           stopped, demoted, trigger_eval, delivered_eval)
