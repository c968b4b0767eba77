"""One place for numba options, so no kernel hard-codes them.

``fastmath`` is on without ``nnan``/``ninf``: ``inf`` is a sentinel ("never") in the
engine and NaN marks undefined metrics, so those two flags would be unsafe.
Set ``FASTSIM_NO_PARALLEL=1`` to compile the drivers without ``parallel``
(useful under a profiler); results do not change, by construction.
"""
import os

from numba import njit

CACHE = os.environ.get("FASTSIM_NO_CACHE", "0") != "1"
PARALLEL = os.environ.get("FASTSIM_NO_PARALLEL", "0") != "1"
# reassoc/contract/arcp change float results with the compiler's choices; the engine must
# agree with the pure-Python reference to the last bit, so only signed-zero freedom is allowed.
FASTMATH = {"nsz"}

# Per-cluster kernels: serial, inlined into the drivers.
kernel = njit(cache=CACHE, fastmath=FASTMATH, nogil=True)
# Drivers that loop over clusters with prange.
driver = njit(cache=CACHE, fastmath=FASTMATH, nogil=True, parallel=PARALLEL)
