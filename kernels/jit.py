"""One place for numba options, so no kernel hard-codes them.

``fastmath`` is limited to ``nsz``: ``reassoc``/``contract``/``arcp`` would let the
compiler change float results, and the engine must agree with the pure-Python reference
to the last bit; ``nnan``/``ninf`` would be unsafe because ``inf`` is a sentinel
("never") and NaN marks undefined metrics.

Caching: numba keys a cached function on its own file only, so a change in a kernel it
calls from another module would silently load stale machine code.  We therefore cache
under a directory named by a hash of every ``kernels/*.py`` source: any kernel edit
gives a fresh cache, and identical code (e.g. every Dask worker) shares one.

Environment: ``FASTSIM_NO_PARALLEL=1`` compiles the drivers without ``parallel`` (for
profilers; results are identical by construction), ``FASTSIM_NO_CACHE=1`` disables the
on-disk cache, ``NUMBA_CACHE_DIR`` moves it.
"""
import hashlib
import os
from pathlib import Path

import numba
from numba import njit

CACHE = os.environ.get("FASTSIM_NO_CACHE", "0") != "1"
PARALLEL = os.environ.get("FASTSIM_NO_PARALLEL", "0") != "1"
FASTMATH = {"nsz"}


def _source_hash() -> str:
    h = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    h.update(f"{PARALLEL}{sorted(FASTMATH)}{numba.__version__}".encode())
    return h.hexdigest()[:16]


if CACHE:
    _root = os.environ.get("NUMBA_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache"), "fastsim-numba")
    numba.config.CACHE_DIR = os.path.join(_root, _source_hash())

# Per-cluster kernels: serial, inlined into the drivers.
kernel = njit(cache=CACHE, fastmath=FASTMATH, nogil=True)
# Drivers that loop over clusters with prange.
driver = njit(cache=CACHE, fastmath=FASTMATH, nogil=True, parallel=PARALLEL)
# Drivers specialised on a user's @njit function (one compilation per function per
# process).  Never cached: numba keys its cache on the driver's bytecode and closure,
# not on the function it calls, so a cached copy could run another user's function.
user_driver = njit(cache=False, fastmath=FASTMATH, nogil=True, parallel=PARALLEL)
