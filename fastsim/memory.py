"""Memory a run will need, checked before anything is allocated.

The estimates follow the arrays fastsim allocates (``fastsim.workload.allocate``, the
engine's outputs, the per-job table, the cluster bootstrap of ``fastsim.stats``); they
are upper-bound approximations, good to a factor well under two, which is what a
"will this fit at all" check needs.  A run that does not fit in what this process may
still take (``available_bytes``: the machine's free memory, or less under ``ulimit -v`` or
a cgroup's memory limit, v2 or v1) is refused with one ``ConfigError`` giving the largest
size that does.
"""
from __future__ import annotations

import os
import resource
from pathlib import Path
from typing import Callable

from numba import get_num_threads

from fastsim.defaults import BOOTSTRAP_MAX_N
from fastsim.errors import ConfigError
from fastsim.kernels.metrics import N_METRICS

GIB = 2.0 ** 30
BUDGET_SHARE = 0.8  # of the memory available now: leave room for the interpreter and libraries
BOOTSTRAP_DRAWS = 2000  # fastsim.stats' cluster bootstrap: resampled sums per draw
UNKNOWN = 1 << 62  # a limit that cannot be read limits nothing: do not refuse


def available_bytes() -> int:
    """Memory this process may still take: the least of the machine's (``MemAvailable``;
    else its physical memory), what its address-space limit leaves (``ulimit -v``) and
    what its cgroup's memory limit leaves (``_cgroup_left``).  Past a limit, an allocation
    the machine could give fails (a MemoryError traceback, or the kernel ends the process)."""
    return min(_machine_available(), _address_space_left(), _cgroup_left())


def _machine_available() -> int:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError, AttributeError):
        return UNKNOWN


def _address_space_left() -> int:
    """``RLIMIT_AS`` (``ulimit -v``) less this process's address space now (``VmSize``,
    which the limit counts: what is mapped, touched or not)."""
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    if limit == resource.RLIM_INFINITY:
        return UNKNOWN
    try:
        with open("/proc/self/status") as fh:
            size = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmSize:"))
    except (OSError, ValueError, IndexError, StopIteration):
        size = 0
    return max(0, limit - size)


def _cgroup_left(root: Path = Path("/sys/fs/cgroup"),
                 membership: Path = Path("/proc/self/cgroup")) -> int:
    """The least that this process's cgroups leave: v2's ``memory.max`` above
    ``memory.current`` (the hierarchy mounted at ``root``), and v1's
    ``memory.limit_in_bytes`` above ``memory.usage_in_bytes`` (its memory controller's,
    mounted at ``root/memory``: older Docker and Kubernetes hosts, where a container's
    limit is there alone), each at the process's level and every one holding it."""
    try:
        lines = membership.read_text().splitlines()
    except OSError:
        return UNKNOWN
    left = UNKNOWN
    for line in lines:  # "0::PATH" (v2), "ID:CONTROLLERS:PATH" (v1)
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if line.startswith("0::"):
            left = min(left, _levels_left(root, path, "memory.max", "memory.current",
                                          "inactive_file"))
        elif "memory" in controllers.split(","):
            left = min(left, _levels_left(root / controllers, path, "memory.limit_in_bytes",
                                          "memory.usage_in_bytes", "total_inactive_file"))
    return left


def _levels_left(mount: Path, path: str, limit_file: str, usage_file: str,
                 inactive: str) -> int:
    """The least that ``limit_file`` leaves above ``usage_file``, less the page cache it
    could reclaim (``inactive`` in ``memory.stat``, which ``MemAvailable`` counts free
    too), over the cgroup at ``path`` below ``mount`` and each one holding it.  A level
    without a limit ("max" in v2, the page counter's maximum, about 2**63, in v1) or
    unreadable limits nothing."""
    left = UNKNOWN
    here = mount / path.strip().lstrip("/")
    for d in (here, *here.parents):
        if not d.is_relative_to(mount):
            break
        try:  # a container sees its own cgroup at the mount, not at the path the host names
            limit = (d / limit_file).read_text().strip()
            if limit != "max" and int(limit) < UNKNOWN:
                used = int((d / usage_file).read_text()) - _inactive_file(d, inactive)
                left = min(left, max(0, int(limit) - used))
        except (OSError, ValueError):
            continue
    return left


def _inactive_file(d: Path, key: str) -> int:
    """The page cache cgroup ``d`` could reclaim (``key`` in its ``memory.stat``), 0 if
    unread."""
    try:
        stat = (d / "memory.stat").read_text().split()
        return int(stat[stat.index(key) + 1])
    except (OSError, ValueError, IndexError):
        return 0


# Below this many bytes an allocation is not checked: reading /proc/meminfo costs more than
# drawing a small workload (the benchmark times generate_workload call by call).
SURELY_FITS = 2**28


def workload_bytes(n_clusters: int, n_jobs: int, n_evals: int) -> int:
    """The arrays of ``fastsim.workload.allocate``: gold, score and loss (``[C, J, E]``
    float64) and the per-job ones (82 bytes a job)."""
    return n_clusters * n_jobs * (24 * n_evals + 82)


def scratch_bytes(n_clusters: int, n_jobs: int, n_evals: int) -> int:
    """What drawing a cluster holds while it runs (``kernels/workload.py``), in each
    thread at once: a job's evaluation noise as uniforms, normals, their tail indices and
    tail scratch (two series: scores and losses), and the exponentials of its gold curve,
    72 bytes a job and evaluation in all, three times the cluster's own workload.  Small
    for clusters of the usual shape; 1.4 GB a thread at 20,000 jobs x 1,000 evaluations."""
    return min(n_clusters, get_num_threads()) * n_jobs * n_evals * 72


def simulate_bytes(n_clusters: int, n_jobs: int, n_evals: int, keep_jobs: bool) -> int:
    """Peak of ``fastsim.api.simulate`` on ``n_clusters`` clusters: workload arrays
    (gold, score, loss: ``[C, J, E]`` float64; ~12 per-job arrays), the drawing's scratch
    in each thread (``scratch_bytes``), decisions, engine outputs, metrics and, with
    ``keep_jobs``, the per-job table (~27 columns, built through flattened copies)."""
    rest = 118 + (500 if keep_jobs else 0)  # a job's bytes beyond its workload's
    return (workload_bytes(n_clusters, n_jobs, n_evals)
            + scratch_bytes(n_clusters, n_jobs, n_evals)
            + n_clusters * (n_jobs * rest + 8 * (N_METRICS + 1)))


def results_bytes(n_clusters: int, n_jobs: int, keep_jobs: bool) -> int:
    """Results kept across chunks: per-cluster metrics (and per-job records), with the
    copy that concatenating them makes."""
    return n_clusters * (16 * (N_METRICS + 1) + (n_jobs * 500 if keep_jobs else 0))


def summary_bytes(n_clusters: int, tables: int = 2) -> int:
    """Summarising a cell chunk by chunk (``fastsim.summary.CellSummary``): at most
    ``BOOTSTRAP_MAX_N`` clusters' tables and pooled counts (4 metrics x 2 columns, with
    the copy concatenating them makes), and the bootstrap's resampled sums."""
    n = min(n_clusters, BOOTSTRAP_MAX_N)
    return n * (tables * 16 * (N_METRICS + 1) + 4 * 2 * 16) + 2 * 8 * BOOTSTRAP_DRAWS


def largest(need: Callable[[int], int], budget: float, hi: int) -> int:
    """The largest ``n`` in ``[0, hi]`` with ``need(n) <= budget`` (``need`` increasing)."""
    lo = 0
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if need(mid) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


def table_bytes(rows: int, columns: int) -> int:
    """A table of ``rows`` rows of ``columns`` numeric columns (8 bytes a value) kept until
    written, with the copy concatenating its parts makes."""
    return 16 * rows * columns


def check_fits(need: Callable[[int], int], n: int, what: str, settings: str, least: int = 1,
               none_fits: str = "even one does not fit; reduce n_jobs x n_evals") -> None:
    """Refuse ``need(n)`` bytes if it exceeds the budget, naming the largest feasible ``n``.

    ``what`` names the size (``--clusters``), ``settings`` the rest of the run; ``least`` is
    the smallest size allowed, and ``none_fits`` what to say when even it does not fit."""
    avail = available_bytes()
    budget = BUDGET_SHARE * avail
    if need(n) <= budget:
        return
    best = largest(need, budget, n)
    advice = f"largest feasible: {what} {best}" if best >= least else none_fits
    raise ConfigError(f"{what} {n} with {settings} needs about {need(n) / GIB:.1f} GiB of "
                      f"memory, {avail / GIB:.1f} GiB available; {advice}")
