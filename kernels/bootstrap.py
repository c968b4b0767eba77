"""Cluster bootstrap of a pooled ratio, streamed: O(n + n_boot) memory at any n.

Resample ``b`` draws its ``n`` cluster indices one at a time from the counter-based
generator (``kernels.rng``), keyed by ``(seed, b, i)``, and sums the drawn numerators
and denominators as it goes, so no ``(n_boot, n)`` index matrix is ever built and the
sums are a pure function of ``(seed, b)``: a call may take any range of resamples
(``first``), so ``fastsim.stats`` shares a large bootstrap among threads with the same
result.
"""
import numpy as np

from .jit import entry
from .rng import cluster_prefix_nb, key_from_prefix_nb, key_to_uniform_nb

BOOTSTRAP_STREAM = 200  # its own stream, far from the simulation's


@entry
def bootstrap_sums_nb(num, den, seed, out_num, out_den, first):
    """Resampled sums of ``num`` and ``den`` (float64 ``[n]``): writes ``out_num[r]`` and
    ``out_den[r]`` for resample ``b = first + r`` (float64 ``[n_boot]``)."""
    n = num.shape[0]
    for r in range(out_num.shape[0]):
        prefix = cluster_prefix_nb(seed, first + r, BOOTSTRAP_STREAM)
        sa = 0.0
        sb = 0.0
        for i in range(n):
            u = key_to_uniform_nb(key_from_prefix_nb(prefix, np.uint64(i)))
            k = min(int(u * n), n - 1)
            sa += num[k]
            sb += den[k]
        out_num[r] = sa
        out_den[r] = sb
