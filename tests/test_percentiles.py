"""The metrics' percentiles equal numba's ``np.percentile`` to the bit."""
import numpy as np
import pytest
from numba import njit

from fastsim.kernels.metrics import percentiles_nb

QS = (50.0, 95.0, 99.0)


@njit(cache=True)  # np.percentile takes about 10 s to compile: once per cache
def _numba_percentiles(x):
    return np.array([np.percentile(x, 50.0), np.percentile(x, 95.0), np.percentile(x, 99.0)])


@pytest.mark.parametrize("n", [1, 2, 3, 5, 20, 101, 300, 1200])
def test_percentiles_equal_numba_percentile(n):
    rng = np.random.default_rng(n)
    for trial in range(30):
        x = rng.lognormal(0, 2, n)
        if trial % 3 == 1:
            x = np.round(x, 0)  # many ties
        if trial % 3 == 2:
            x = np.sort(x)[::-1].copy()  # reverse-sorted
        np.testing.assert_array_equal(percentiles_nb(x, QS), _numba_percentiles(x))
    for special in (np.nan, np.inf):
        x = rng.lognormal(0, 1, n)
        x[n // 2] = special
        np.testing.assert_array_equal(percentiles_nb(x, QS), _numba_percentiles(x))


@pytest.mark.parametrize("n", [2, 3, 300, 1200])
def test_percentiles_all_ties(n):
    """Every value equal, or only two distinct values: the partition must still narrow."""
    rng = np.random.default_rng(n)
    for x in (np.full(n, 3.0), rng.integers(0, 2, n).astype(np.float64),
              np.repeat([2.0, 1.0], [n // 2, n - n // 2])):
        np.testing.assert_array_equal(percentiles_nb(x, QS), _numba_percentiles(x))
