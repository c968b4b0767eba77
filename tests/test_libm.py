"""``kernels.libm``'s array kernels give the C library's bits: the workload's exponentials
and logarithms go through them, and every result must stay what ``math.exp`` and
``math.log`` give (the pure-Python reference in tests/reference.py calls those)."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from numba import njit

from fastsim.kernels.libm import exp_array_nb, log_array_nb


def _has_fma() -> bool:
    cpuinfo = Path("/proc/cpuinfo")
    return cpuinfo.exists() and " fma" in cpuinfo.read_text()


NO_FMA = ("glibc runs its exp and log without FMA on this CPU: their last bit can differ "
          "from the FMA algorithm the kernels always run")


@njit
def _kernel(which, x):
    out = np.empty_like(x)
    if which == 0:
        exp_array_nb(x, out)
    else:
        log_array_nb(x, out)
    return out


@njit
def _library(which, x):
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        out[i] = math.exp(x[i]) if which == 0 else math.log(x[i])
    return out


EXP_EDGES = [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 1e-300, 2.0**-54,
             -(2.0**-54), 2.0**-55, np.nextafter(2.0**-54, 0), 511.999, 512.0, -512.0, 709.78,
             709.79, 710.0, -708.4, -708.5, -745.13, -745.14, -746.0, -1000.0, 1e308, -1e308]
LOG_EDGES = [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, 1e-310, 2.2250738585072014e-308,
             1.0, np.nextafter(1.0, 0.0), np.nextafter(1.0, 2.0), 0.9375, 1.0647, -1.0, 1e308,
             1.7976931348623157e308]


def _exp_arguments(rng):
    return np.concatenate([
        rng.uniform(-750.0, 750.0, 1_000_000),  # every range, overflow and underflow included
        rng.normal(0.0, 3.0, 1_000_000),  # the workload's exponents: |x| of a few units
        rng.uniform(-1e-3, 1e-3, 200_000),
        np.ldexp(rng.uniform(1.0, 2.0, 200_000), rng.integers(-60, 10, 200_000)),
        np.asarray(EXP_EDGES)])


def _log_arguments(rng):
    return np.concatenate([
        np.exp(rng.uniform(-744.0, 709.0, 1_000_000)),  # every binade, subnormals included
        1.0 - rng.random(1_000_000),  # the arrival gaps' 1 - U
        rng.uniform(0.9, 1.1, 500_000),  # near 1, where glibc takes its other path
        rng.uniform(0.0, 0.075, 500_000),  # the normal tails' r
        np.asarray(LOG_EDGES)])


@pytest.mark.skipif(not _has_fma(), reason=NO_FMA)
@pytest.mark.parametrize("which, arguments", [(0, _exp_arguments), (1, _log_arguments)],
                         ids=["exp", "log"])
def test_the_array_kernels_give_the_library_bits(which, arguments):
    x = arguments(np.random.default_rng(2026))
    got, want = _kernel(which, x), _library(which, x)
    same = got.view(np.uint64) == want.view(np.uint64)
    assert same.all(), f"{(~same).sum()} of {x.size} differ, e.g. at {x[~same][:3]}"


def test_empty_arrays_and_special_values():
    assert _kernel(0, np.empty(0)).size == 0 and _kernel(1, np.empty(0)).size == 0
    e = _kernel(0, np.array([0.0, np.inf, -np.inf, np.nan, 1.0]))
    assert e[0] == 1.0 and e[1] == np.inf and e[2] == 0.0 and np.isnan(e[3])
    assert e[4] == pytest.approx(np.e, rel=1e-15)
    g = _kernel(1, np.array([1.0, 0.0, np.inf, -1.0, np.e, 0.25]))
    assert g[0] == 0.0 and g[1] == -np.inf and g[2] == np.inf and np.isnan(g[3])
    assert g[4] == pytest.approx(1.0, rel=1e-15) and g[5] == pytest.approx(-math.log(4.0))
