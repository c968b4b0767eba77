"""Counter-based randomness: every draw is a pure function of its coordinates.

A draw is ``hash(seed, cluster, job, eval, stream)`` pushed through SplitMix64's
finaliser (Steele, Lea & Flood 2014), so results never depend on thread count,
chunking, scheduler or stop policy: that is what makes common random numbers free.
"""
import math

import numpy as np

from kernels.jit import kernel

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)
_S11 = np.uint64(11)
_S32 = np.uint64(32)
_LO32 = np.uint64(0xFFFFFFFF)
_TWO_PI = 2.0 * math.pi


@kernel
def mix64_nb(z):
    """SplitMix64 finaliser: uint64 -> uint64, a bijection with full avalanche."""
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


@kernel
def key_nb(seed, cluster, job, eval_, stream):
    """uint64 key of one draw; every coordinate is a non-negative integer."""
    h = mix64_nb(np.uint64(seed) + _GOLDEN * np.uint64(stream + 1))
    h = mix64_nb(h ^ np.uint64(cluster))
    h = mix64_nb(h ^ (np.uint64(job) + _GOLDEN))
    return mix64_nb(h ^ (np.uint64(eval_) * _GOLDEN))


@kernel
def uniform_nb(seed, cluster, job, eval_, stream):
    """U[0, 1) with 53 random bits."""
    return np.float64(key_nb(seed, cluster, job, eval_, stream) >> _S11) * (1.0 / 9007199254740992.0)


@kernel
def normal_nb(seed, cluster, job, eval_, stream):
    """N(0, 1) by Box-Muller on the two 32-bit halves of one key."""
    h = key_nb(seed, cluster, job, eval_, stream)
    u1 = (np.float64(h >> _S32) + 0.5) * (1.0 / 4294967296.0)  # in (0, 1): log is finite
    u2 = np.float64(h & _LO32) * (1.0 / 4294967296.0)
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(_TWO_PI * u2)
