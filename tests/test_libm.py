"""``kernels.libm.exp_array_nb`` gives ``math.exp``'s bits: the workload's exponentials go
through it, and every result must stay what the C library's ``exp`` gives (the pure-Python
reference in tests/reference.py calls ``math.exp``)."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from numba import njit

from fastsim.kernels.libm import exp_array_nb


def _has_fma() -> bool:
    cpuinfo = Path("/proc/cpuinfo")
    return cpuinfo.exists() and " fma" in cpuinfo.read_text()


@njit
def _exp_array(x):
    out = np.empty_like(x)
    exp_array_nb(x, out)
    return out


@njit
def _exp_libm(x):
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        out[i] = math.exp(x[i])
    return out


EDGES = [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 1e-300, 2.0**-54, -(2.0**-54),
         2.0**-55, np.nextafter(2.0**-54, 0), 511.999, 512.0, -512.0, 709.78, 709.79, 710.0,
         -708.4, -708.5, -745.13, -745.14, -746.0, -1000.0, 1e308, -1e308]


@pytest.mark.skipif(not _has_fma(), reason="glibc runs its exp without FMA on this CPU: its "
                    "last bit can differ from the FMA algorithm exp_array_nb always runs")
def test_exp_array_gives_the_library_bits():
    rng = np.random.default_rng(2026)
    x = np.concatenate([
        rng.uniform(-750.0, 750.0, 1_000_000),  # every range, overflow and underflow included
        rng.normal(0.0, 3.0, 1_000_000),  # the workload's exponents: |x| of a few units
        rng.uniform(-1e-3, 1e-3, 200_000),
        np.ldexp(rng.uniform(1.0, 2.0, 200_000), rng.integers(-60, 10, 200_000)),
        np.asarray(EDGES)])
    got, want = _exp_array(x), _exp_libm(x)
    same = got.view(np.uint64) == want.view(np.uint64)
    assert same.all(), f"{(~same).sum()} of {x.size} differ, e.g. exp({x[~same][:3]})"


def test_exp_array_of_an_empty_array_and_special_values():
    assert _exp_array(np.empty(0)).size == 0
    out = _exp_array(np.array([0.0, np.inf, -np.inf, np.nan, 1.0]))
    assert out[0] == 1.0 and out[1] == np.inf and out[2] == 0.0 and np.isnan(out[3])
    assert out[4] == pytest.approx(np.e, rel=1e-15)


def test_exp_array_reads_its_table_without_gathers():
    """The table lookups stay scalar loads: vectorised, they became AVX2/AVX-512 gathers,
    which took 15.5 us for a cluster's 3,900 pairs of lookups against 3.9 us as loads on
    the project's 2-core machines, likely for the Gather Data Sampling mitigation
    (docs/performance.md, round 41).  On a CPU without gathers the count is 0 either way.
    The count is ``benchmarks/engine_refcounts.py``'s, which checks the engines too."""
    from conftest import benchmark_script

    gathers = benchmark_script("engine_refcounts").gathers
    fresh = njit(cache=False)(_exp_array.py_func)
    fresh(np.linspace(-5.0, 5.0, 64))
    assert "exp_array_nb" in fresh.inspect_asm(fresh.signatures[0])
    assert gathers(fresh) == 0


def test_load_nb_takes_integer_and_float_arrays_and_refuses_others_while_typing():
    """An atomic load of a bool, complex or record array was an LLVM error from inside
    numba's compiler ("cond is not i1"); such an array is now refused while typing."""
    from numba.core.errors import TypingError

    from fastsim.kernels.libm import load_nb

    def first(a):
        return load_nb(a, 1)

    assert njit(cache=False)(first)(np.arange(3, dtype=np.uint64)) == 1
    assert njit(cache=False)(first)(np.array([0.5, 2.5])) == 2.5
    for bad in (np.zeros(3, dtype=np.bool_), np.zeros(3, dtype=np.complex128)):
        with pytest.raises(TypingError):
            njit(cache=False)(first)(bad)
