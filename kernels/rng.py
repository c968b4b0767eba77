"""Counter-based randomness: every draw is a pure function of its coordinates.

A draw is ``hash(seed, cluster, job, eval, stream)`` pushed through SplitMix64's
finaliser (Steele, Lea & Flood 2014), so results never depend on thread count,
chunking, scheduler or stop policy: that is what makes common random numbers free.
"""
import math

import numpy as np

from .jit import part

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)
_S11 = np.uint64(11)


@part
def mix64_nb(z):
    """SplitMix64 finaliser: uint64 -> uint64, a bijection with full avalanche."""
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


@part
def cluster_prefix_nb(seed, cluster, stream):
    """The part of a key fixed by ``(seed, cluster, stream)``; see ``key_nb``."""
    h = mix64_nb(np.uint64(seed) + _GOLDEN * np.uint64(stream + 1))
    return mix64_nb(h ^ np.uint64(cluster))


@part
def job_prefix_nb(cluster_prefix, job):
    """The part of a key fixed by ``(seed, cluster, job, stream)``; see ``key_nb``."""
    return mix64_nb(cluster_prefix ^ (np.uint64(job) + _GOLDEN))


@part
def key_from_prefix_nb(job_prefix, eval_):
    """The key of evaluation ``eval_`` given ``job_prefix_nb``'s value."""
    return mix64_nb(job_prefix ^ (np.uint64(eval_) * _GOLDEN))


@part
def key_nb(seed, cluster, job, eval_, stream):
    """uint64 key of one draw; every coordinate is a non-negative integer.

    It is a chain of prefixes, so a loop over jobs or evaluations may compute the
    prefixes once (``cluster_prefix_nb``, ``job_prefix_nb``) and get the same bits.
    """
    h = cluster_prefix_nb(seed, cluster, stream)
    return key_from_prefix_nb(job_prefix_nb(h, job), eval_)


@part
def key_to_uniform_nb(key):
    """U[0, 1) from a key's top 53 bits."""
    return np.float64(key >> _S11) * (1.0 / 9007199254740992.0)


@part
def key_to_open_uniform_nb(key):
    """U(0, 1), never 0 or 1, from a key's top 53 bits: the input of ``normal_nb``."""
    return (np.float64(key >> _S11) + 0.5) * (1.0 / 9007199254740992.0)


@part
def uniform_nb(seed, cluster, job, eval_, stream):
    """U[0, 1) with 53 random bits."""
    return key_to_uniform_nb(key_nb(seed, cluster, job, eval_, stream))


@part
def normal_central_nb(p):
    """The central region ``|p - 0.5| <= 0.425`` of ``normal_quantile_nb``: branch-free,
    so a loop over it vectorises; outside that region its value is meaningless."""
    q = p - 0.5
    r = 0.180625 - q * q
    num = (((((((2.5090809287301226727e+3 * r + 3.3430575583588128105e+4) * r
                + 6.7265770927008700853e+4) * r + 4.5921953931549871457e+4) * r
              + 1.3731693765509461125e+4) * r + 1.9715909503065514427e+3) * r
            + 1.3314166789178437745e+2) * r + 3.3871328727963666080e+0) * q
    den = (((((((5.2264952788528545610e+3 * r + 2.8729085735721942674e+4) * r
                + 3.9307895800092710610e+4) * r + 2.1213794301586595867e+4) * r
              + 5.3941960214247511077e+3) * r + 6.8718700749205790830e+2) * r
            + 4.2313330701600911252e+1) * r + 1.0)
    # np.divide is IEEE division like ``/`` without the ZeroDivisionError check, whose
    # branch stops the loop vectoriser (den >= 1 in the central region anyway).
    return np.divide(num, den)


@part
def is_normal_tail_nb(p):
    """Whether ``normal_quantile_nb(p)`` takes the tail branch (``normal_tail_nb``)."""
    return not abs(p - 0.5) <= 0.425


@part
def normal_tail_side_nb(p):
    """The tail's ``r`` before the logarithm: ``p`` below the median, ``1 - p`` above."""
    return p if p - 0.5 <= 0.0 else 1.0 - p


@part
def normal_tail_near_nb(p, log_r):
    """``normal_tail_nb(p)`` given ``log_r = log(normal_tail_side_nb(p))``, valid when
    ``sqrt(-log_r) <= 5`` (``p`` beyond about 1.4e-11 of 0 or 1: every draw in practice).
    Branch-free (``np.divide``, selects), so a loop over tail draws vectorises; the
    ``log`` calls stay scalar, in their own loop, and give the same bits."""
    r = math.sqrt(-log_r) - 1.6
    num = (((((((7.74545014278341407640e-4 * r + 2.27238449892691845833e-2) * r
                + 2.41780725177450611770e-1) * r + 1.27045825245236838258e+0) * r
              + 3.64784832476320460504e+0) * r + 5.76949722146069140550e+0) * r
            + 4.63033784615654529590e+0) * r + 1.42343711074968357734e+0)
    den = (((((((1.05075007164441684324e-9 * r + 5.47593808499534494600e-4) * r
                + 1.51986665636164571966e-2) * r + 1.48103976427480074590e-1) * r
              + 6.89767334985100004550e-1) * r + 1.67638483018380384940e+0) * r
            + 2.05319162663775882187e+0) * r + 1.0)
    x = np.divide(num, den)
    return -x if p - 0.5 < 0.0 else x


@part
def normal_tail_nb(p):
    """The tails ``|p - 0.5| > 0.425`` of ``normal_quantile_nb``."""
    log_r = math.log(normal_tail_side_nb(p))
    if math.sqrt(-log_r) <= 5.0:
        return normal_tail_near_nb(p, log_r)
    q = p - 0.5
    r = math.sqrt(-log_r) - 5.0
    num = (((((((2.01033439929228813265e-7 * r + 2.71155556874348757815e-5) * r
                + 1.24266094738807843860e-3) * r + 2.65321895265761230930e-2) * r
              + 2.96560571828504891230e-1) * r + 1.78482653991729133580e+0) * r
            + 5.46378491116411436990e+0) * r + 6.65790464350110377720e+0)
    den = (((((((2.04426310338993978564e-15 * r + 1.42151175831644588870e-7) * r
                + 1.84631831751005468180e-5) * r + 7.86869131145613259100e-4) * r
              + 1.48753612908506148525e-2) * r + 1.36929880922735805310e-1) * r
            + 5.99832206555887937690e-1) * r + 1.0)
    x = num / den
    return -x if q < 0.0 else x


@part
def normal_quantile_nb(p):
    """Standard normal quantile, Wichura's AS241 (Applied Statistics 37(3), 1988),
    accurate to about 1e-16; the same steps as CPython's ``statistics`` fallback."""
    if is_normal_tail_nb(p):
        return normal_tail_nb(p)
    return normal_central_nb(p)


@part
def normal_nb(seed, cluster, job, eval_, stream):
    """N(0, 1) by inversion of a 53-bit uniform kept inside (0, 1).

    Inversion needs a ``log`` only in the 15% tails, where Box-Muller needs a ``log``
    and a ``cos`` for every draw: 3-4x faster, and one key per draw.
    """
    return normal_quantile_nb(key_to_open_uniform_nb(key_nb(seed, cluster, job, eval_, stream)))
