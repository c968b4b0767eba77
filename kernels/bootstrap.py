"""Cluster bootstrap of pooled ratios, streamed: O(n + n_boot) memory at any n.

Resample ``b`` draws its ``n`` cluster indices one at a time from the counter-based
generator (``kernels.rng``), keyed by ``(seed, b, i)``, and sums the drawn clusters'
values as it goes, so no ``(n_boot, n)`` index matrix is ever built and the sums are a
pure function of ``(seed, b)``: a call may take any range of resamples (``first``), so
``fastsim.stats`` shares a large bootstrap among threads with the same result.  The
values are a row per cluster, a column per quantity (a ratio's numerator and
denominator, for every ratio of a cell): the indices are drawn once for all columns,
and each column's sum is added in the same order as it would be alone.
"""
import numpy as np

from .jit import entry, min_nb
from .rng import cluster_prefix_nb, key_from_prefix_nb, key_to_uniform_nb

BOOTSTRAP_STREAM = 200  # its own stream, far from the simulation's


@entry
def bootstrap_sums_nb(values, seed, out, first):
    """Resampled column sums of ``values`` (float64 ``[n, m]``, a row per cluster): writes
    ``out[r, q]``, the sum of column ``q`` over resample ``b = first + r`` (float64
    ``[n_resamples, m]``)."""
    n, m = values.shape
    # the sums apart from ``out``, so they can stay in registers; element loops, as a
    # slice assignment compiles numba's shape-error message (string formatting: a second
    # of a cold start)
    sums = np.empty(m)
    for r in range(out.shape[0]):
        prefix = cluster_prefix_nb(seed, first + r, BOOTSTRAP_STREAM)
        for q in range(m):
            sums[q] = 0.0
        for i in range(n):
            u = key_to_uniform_nb(key_from_prefix_nb(prefix, np.uint64(i)))
            k = min_nb(np.int64(u * n), n - 1)
            for q in range(m):
                sums[q] += values[k, q]
        for q in range(m):
            out[r, q] = sums[q]
