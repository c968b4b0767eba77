"""Run a sweep's missing chunks, in-process or on a Dask distributed cluster.

A chunk is ``(cell, chunk index)``: ``fastsim.api.simulate`` on clusters
``[i * chunk, (i + 1) * chunk)`` of the cell's config.  In this process the cells of
one chunk index whose workload sections are equal run together, on clusters drawn once
(``run_chunks``).  ``run_chunks_on_worker`` is a top-level function so Dask can ship it
to workers; workers return small DataFrames and the driver writes them (workers need no
shared file system), each with the code the worker ran (``worker_code``): a chunk
computed by other code than the grid's (another fastsim, or another copy of a user's
module) is refused before it is written.  Results are identical whatever the backend,
worker count, chunk order or grouping: each cluster is a pure function of ``(seed,
cluster index)`` and each chunk is written as computed.
"""
from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import signal
import sys
import threading
import time
import warnings
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import polars as pl

from fastsim.api import same_clusters, simulate, simulate_cells, user_drivers_of
from fastsim.compile_notice import quiet
from fastsim.config import SimConfig, check_flags, is_integer
from fastsim.errors import ClusterLostError, ConfigError, SimulationError, counted
from fastsim.io import signals_held
from fastsim.memory import check_fits, simulate_bytes, summary_bytes
from fastsim.sweep.extracts import jct_histogram
from fastsim.sweep.grid import Grid, code_of, diff_code
from fastsim.sweep.store import SweepStore, cell_dir
from fastsim.progress import progress_bar

BACKENDS = ("local", "dask")
DASK_TIMEOUT_S = 60.0  # for a first worker to join, and without any worker mid-sweep
DASK_CONNECT_S = 10.0  # at most, to reach the scheduler
POLL_S = 1.0  # how often a Dask run checks that its cluster still has workers
PROBE_S = 2.0  # after a question timed out: a TCP connection to the scheduler, killed or frozen
FETCH_S = 10.0  # at most, to fetch a computed chunk (small tables: well under 1 s on a LAN)
REFETCHES = 3  # a computed chunk not fetched is run again this often, then the run stops
# One local Dask worker process before its chunk: Python with numpy, numba (kernels loaded),
# polars and distributed imported (measured: about 310 MiB resident)
WORKER_BYTES = 320 << 20


@dataclass
class RunReport:
    """What a ``run_sweep`` call did."""

    chunks_total: int
    chunks_skipped: int
    chunks_run: int
    seconds: float
    complete: bool
    # Chunks that had been written but failed verification (and were re-run): why.
    damaged: list[str] = field(default_factory=list)


def run_chunk(config: dict[str, Any], seed: int, start: int, n: int, keep_jobs: bool
              ) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame | None]:
    """Simulate one chunk: ``(per-cluster metrics, JCT histogram, per-job table or None)``.

    Takes the config as a plain dict so that a Dask task pickles only data.
    """
    return next(run_chunks([config], seed, start, n, keep_jobs))[1]


def run_chunks(configs: list[dict[str, Any]], seed: int, start: int, n: int, keep_jobs: bool
               ) -> Iterator[tuple[int, tuple]]:
    """``run_chunk`` of each of ``configs`` on the same clusters, ``(its index, result)`` as
    each is made: the cells whose workload sections are equal draw the clusters once
    (``fastsim.api.simulate_cells``), the same results to the bit."""
    made = simulate_cells([SimConfig.from_dict(c) for c in configs], n, seed, start,
                          keep_jobs=keep_jobs, extract=jct_histogram)
    while True:
        with quiet():  # a sweep says it compiles once, before its bar, and never in a log
            item = next(made, None)  # quiet only while a cell runs, not while it is written
        if item is None:
            return
        i, res = item
        yield i, (res.clusters, res.extract, res.jobs)
        del item, res  # the caller's to keep: not held here while the next cell runs


def chunk_groups(todo: list[tuple[str, int]], grid: Grid) -> list[tuple[int, list[str]]]:
    """``todo``'s chunks as ``(chunk index, cell ids)``, one group per chunk index and
    workload section (``fastsim.api.same_clusters``), in the order of each group's first
    chunk: a group's cells run on the same clusters, drawn once (``run_chunks``).  A
    group per workload, not per chunk index: a Dask task is one group, and so stays the
    size of a few chunks."""
    clusters = {c.id: same_clusters(c.config) for c in grid.cells}
    groups: dict[tuple, list[str]] = {}
    for cid, idx in todo:
        groups.setdefault((idx, clusters[cid]), []).append(cid)
    return [(idx, cids) for (idx, _), cids in groups.items()]


def worker_code(configs: list[dict[str, Any]]) -> dict[str, Any]:
    """``Grid.code`` of cells of these configs as this process reads the code: on a Dask
    worker, what the driver checks against the grid's (fastsim's source is read once per
    process, a user function's files on each call)."""
    return code_of(SimConfig.from_dict(c) for c in configs)


def run_chunks_on_worker(configs: list[dict[str, Any]], seed: int, start: int, n: int,
                         keep_jobs: bool) -> tuple[str, dict[str, Any], list]:
    """``(worker address, worker_code, run_chunks' results in the order of configs)``: a
    Dask task, whose results the driver writes only if the worker's code is the grid's
    (``check_worker_code``).  A chunk's own error (``ConfigError``, ``SimulationError``)
    comes back last, in place of its result and those after it, for the driver to raise
    as its one line once the chunks before it are written: raised here, the worker also
    logged it with its traceback ("Compute Failed", a dozen lines in a local cluster's
    terminal)."""
    from distributed import get_worker

    worker, code = get_worker().address, worker_code(configs)
    results: list = []
    try:
        for _, result in run_chunks(configs, seed, start, n, keep_jobs):
            results.append(result)
    except (ConfigError, SimulationError) as exc:
        results.append(exc)
    return worker, code, results


def check_worker_code(worker: str, theirs: dict[str, Any], grid: Grid) -> None:
    """Refuse results of a Dask worker whose code (``worker_code``) is not the grid's,
    which the records name: they would be pooled with this process's as one code's."""
    changes = diff_code(grid.code, theirs, changed="differs",
                        versions="fastsim {new} there, {old} here")
    if changes:
        raise ConfigError(f"the Dask worker {worker} runs other code than this process: "
                          + "; ".join(changes) + "; refusing to mix results of two versions: "
                          "give every worker the code this process runs, then run the same "
                          "command again")


def check_workers(client, grid: Grid) -> None:
    """Every worker's code against ``grid``'s, before anything is written (a worker that
    joins later is checked on each chunk it returns, as every worker is).  One config per
    set of user functions the cells name, not every cell's, is sent to be hashed."""
    probes: dict[tuple, dict[str, Any]] = {}
    for c in grid.cells:
        cfg = c.config
        probes.setdefault((cfg.policy.decl.ref, cfg.scheduler.decl.ref, cfg.metrics),
                          cfg.to_dict())
    try:
        answers = client.run(worker_code, list(probes.values()), on_error="return")
    except Exception:  # noqa: BLE001 - a worker lost mid-call: its chunks are checked still
        return
    for worker, theirs in answers.items():
        if isinstance(theirs, dict):  # else its error, which its chunks report in one line
            check_worker_code(worker, theirs, grid)


def warm_up() -> str:
    """Compile (or load from numba's on-disk cache) every kernel a chunk uses, once per
    process: every scheduler and the decision kernels (observed and oracle)."""
    from fastsim import registry as R

    scheds, pols = R.BUILTIN_SCHEDULERS, R.BUILTIN_POLICIES
    for i in range(max(len(scheds), len(pols))):  # every built-in at least once
        sched, pol = scheds[i % len(scheds)].usage(), pols[i % len(pols)].usage()
        with quiet():  # on a Dask worker, whose output nobody reads
            simulate(SimConfig.from_specs(sched, pol, n_jobs=8), n_clusters=2, keep_jobs=True)
    return f"pid {os.getpid()} warm"


_ADDRESS = re.compile(r"^([a-z]+://)?(\[[0-9A-Fa-f:.]+\]|[^\s:/\[\]]+):\d{1,5}$"
                      r"|^inproc://\S+$")  # an in-process scheduler's (tests, notebooks)


def check_address(address) -> None:
    """A Dask scheduler's address, as far as its form tells, before any directory is
    written (whether it answers is known only on connecting)."""
    if address is None or hasattr(address, "submit"):
        return
    why = None
    if not isinstance(address, str) or not _ADDRESS.match(address):
        why = ""
    elif not address.startswith("inproc://"):
        scheme = address.partition("://")[0] if "://" in address else "tcp"
        port = int(address.rpartition(":")[2])
        if not 1 <= port <= 65535:
            why = f" (port {port} is not one of 1 to 65535)"
        elif not _connects_by(scheme):
            why = (f" (this dask has no connector for {scheme}://: an unknown scheme, or "
                   "its library is not installed)")
    if why is not None:
        raise ConfigError(f"address={address!r} is invalid{why}; allowed: tcp://HOST:PORT "
                          "(or HOST:PORT) of a running scheduler, a dask Client, or none for "
                          "a local cluster")


def _connects_by(scheme: str) -> bool:
    """Whether distributed has a working connector for ``scheme`` (its own registry: no
    list of fastsim's to fall behind): an unknown one, or one whose library is missing
    (``ucx``), was said after the line saying the scheduler was being connected to."""
    from distributed.comm.registry import get_backend

    try:
        get_backend(scheme).get_connector()
    except (ValueError, TypeError, ImportError):
        return False
    return True


def check_run(grid: Grid, backend: str = "local", workers: int | None = None,
              keep_jobs: bool = False, address=None) -> None:
    """``run_sweep``'s options and memory, checked before a sweep directory is opened
    (``fastsim.sweep.run_sweep_file``, the CLI) so that a refused run writes nothing."""
    if backend not in BACKENDS:
        raise ConfigError(f"backend={backend!r} is unknown; allowed: {', '.join(BACKENDS)}")
    check_address(address)
    if workers is not None and (not is_integer(workers) or workers < 1):
        raise ConfigError(f"workers={workers!r} is invalid; allowed: an integer >= 1")
    # as the command line refuses --workers and --address without --backend dask: taken
    # without a word and never used
    given = [f"{n}={v!r}" for n, v in (("address", address), ("workers", workers)) if v is not None]
    if backend != "dask" and given:
        raise ConfigError(f"{' and '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to "
                          f"backend='dask' only; allowed: backend='dask' with "
                          f"{'it' if len(given) == 1 else 'them'}, or None")
    if address is not None and workers is not None:
        raise ConfigError("workers sizes a local cluster; with an address the scheduler's own "
                          "workers run the chunks; allowed: one of workers and address")
    check_flags(keep_jobs=keep_jobs)  # "no" is truthy
    if backend == "dask":
        _check_importable(grid)
    check_sweep_memory(grid, keep_jobs, local_workers(backend, address, workers))


def _check_importable(grid: Grid) -> None:
    """A Dask worker imports user code by its module's name, and a function declared in
    the running script is ``__main__:FUNCTION`` (``__mp_main__`` in a spawned process):
    a worker ran the cells it could and failed on the others with an error of its own (a
    local worker re-ran the script as ``__mp_main__``, and numba's thread count clashed)."""
    for ref in grid.code["user"]:
        if ref.split(":")[0] in ("__main__", "__mp_main__"):
            raise ConfigError(f"{ref} is declared in the script this process runs, which Dask "
                              "workers do not import; allowed with backend='dask': a module on "
                              "the workers' PYTHONPATH (docs/extending.md)")


def local_workers(backend: str, address, workers: int | None) -> int:
    """The worker processes of the local Dask cluster a run would start (``_connect``);
    0 where it starts none (in this process, or on a cluster whose memory is its own)."""
    if backend != "dask" or address is not None:
        return 0
    return workers or os.cpu_count() or 1


def check_sweep_memory(grid: Grid, keep_jobs: bool = False, workers: int = 0) -> None:
    """Refuse, before anything is written, a sweep whose chunk or whose aggregation
    (one cell and its baseline in memory, with the cluster bootstrap) cannot fit, or
    whose ``workers`` local Dask worker processes (``local_workers``), as many of them
    as the sweep has chunks each running one, cannot: ``--workers 1000`` started a
    thousand processes of a few hundred MiB."""
    shapes = {(c.config.workload.n_jobs, c.config.workload.n_evals) for c in grid.cells}
    J, E = max(shapes, key=lambda s: simulate_bytes(1, *s, True))
    settings = f"n_jobs={J}, n_evals={E}" + (", --keep-jobs" if keep_jobs else "")
    # a chunk: its simulation, counted with the per-job table (an upper bound: without
    # keep_jobs the JCT histogram reads the per-job arrays, no table), and, with
    # keep_jobs, the Parquet bytes of its per-job records
    chunk_need = lambda n: simulate_bytes(n, J, E, True) + (n * J * 250 if keep_jobs else 0)  # noqa: E731
    check_fits(chunk_need, min(grid.chunk, grid.clusters), "chunk", settings)  # as run
    check_fits(lambda n: summary_bytes(n) + chunk_need(min(grid.chunk, n)), grid.clusters,
               "clusters", settings + f", chunk {grid.chunk}")
    if workers:
        c = min(grid.chunk, grid.clusters)
        # each worker runs one chunk at a time: a worker beyond the sweep's chunks runs
        # none, and is its process alone (a one-chunk sweep was refused two workers)
        chunks = len(grid.cells) * grid.n_chunks
        check_fits(lambda w: w * WORKER_BYTES + min(w, chunks) * chunk_need(c), workers,
                   "workers", settings + f", chunk {c}")


class WriteBehind:
    """Each finished chunk written (``write(cell, index, result)``) on one thread of its
    own while the next one runs, then ``written(cell, index)`` called in this thread (the
    bar, ``on_chunk``) once its write is done: encoding, verifying and syncing a chunk's
    files otherwise left the second core idle, a fifth of a sweep's time on one thread at
    chunks of a few hundred clusters (docs/performance.md, round 46).  At most one chunk is in
    flight, so the files on disk are those of every chunk ``written`` was called for,
    and at most the one after it; its write's error is raised here, at the next chunk or
    at the block's end.  Leaving the block, on an error or a signal too, waits for the
    write in flight (Ctrl-C and SIGTERM held meanwhile), so no write outlives the sweep
    directory's lock.  ``inline``: each chunk written and ``written`` in this thread."""

    def __init__(self, write: Callable, written: Callable, inline: bool = False):
        self._write, self._written = write, written
        self._pool = None if inline else ThreadPoolExecutor(1, thread_name_prefix="fastsim-write")
        self._pending: tuple | None = None  # (future, cell, index)

    def __enter__(self) -> Callable:
        return self.put

    def put(self, cid: str, idx: int, result) -> None:
        if self._pool is None:
            self._write(cid, idx, result)
            self._written(cid, idx)
            return
        self._settle()
        self._pending = (self._pool.submit(self._write, cid, idx, result), cid, idx)

    def _settle(self) -> None:
        if self._pending is not None:
            (future, cid, idx), self._pending = self._pending, None
            future.result()
            self._written(cid, idx)

    def __exit__(self, kind, exc, tb) -> None:
        if self._pool is None:
            return
        # the write in flight ends before the block is left: Ctrl-C and SIGTERM meanwhile
        # are held, and raised once it has (a thread's join alone took one at once)
        with signals_held():
            self._pool.shutdown(wait=True)
        if kind is None:
            self._settle()  # else the error in hand is said, whether the write failed or not


def _progress(total: int, initial: int, n_cells: int, cells_done: int, enabled: bool):
    # the cell count from the first state on: set after it, it was a second line in a log
    return progress_bar(total=total, initial=initial, unit="chunk", enabled=enabled,
                        dynamic_ncols=True, smoothing=0.05, postfix=f"cells {cells_done}/{n_cells}")


def run_sweep(grid: Grid, store: SweepStore, *, backend: str = "local",
              address: str | None = None, workers: int | None = None,
              timeout: float = DASK_TIMEOUT_S, keep_jobs: bool = False, progress: bool = True,
              max_chunks: int | None = None,
              on_chunk: Callable[[str, int], None] | None = None,
              notice: bool = True, announce: bool = False,
              say_resumed: bool = False) -> RunReport:
    """Run every chunk of ``grid`` not yet complete in ``store``.

    Parameters
    ----------
    backend : ``local`` (this process; numba threads over clusters) or ``dask``.
    address : the Dask scheduler (``tcp://host:8786``) or a ``distributed.Client``; None
        with ``backend="dask"`` starts a local cluster of ``workers`` processes.
    workers : worker processes of that local cluster (default: one per core).
    timeout : seconds to wait for a first worker, and mid-sweep, when no worker is left,
        for one to join before stopping with ``ClusterLostError`` (the scheduler must
        answer within ``DASK_CONNECT_S`` or this, whichever is shorter).
    keep_jobs : also write per-job records (``jobs-*.parquet``); memory per chunk only.
    max_chunks : stop after this many chunks (a controlled interruption, for tests).
    on_chunk : called with ``(cell id, chunk index)`` after each chunk is written.
    notice : say, before the bar, that kernels compile (false: said already).
    announce : say it without a bar too (``fastsim sweep --no-progress``, as ``fastsim run
        --no-progress`` does; ``fastsim reproduce --no-progress`` stays silent).
    say_resumed : say, before any chunk runs, how many were done already (``fastsim
        sweep``; said once the sweep had ended, it was silent while the rest ran).  Only
        ``try_user_code``'s trial, and its compile notice, came before, in ``held_run``.
    """
    check_run(grid, backend, workers, keep_jobs)
    t0 = time.perf_counter()
    total = len(grid.cells) * grid.n_chunks
    pending = store.pending_with_reasons(keep_jobs)
    todo = [t for t, _ in pending]
    if say_resumed and len(todo) < total:
        print(f"resumed: {total - len(todo)} of {total} chunks were already done (verified)",
              file=sys.stderr)
    damaged = [why for _, why in pending if why != "missing"]
    if damaged:
        print(f"re-running {len(damaged)} chunk(s) that failed verification: "
              + "; ".join(damaged[:3]) + ("; ..." if len(damaged) > 3 else ""), file=sys.stderr)
    left = {c.id: 0 for c in grid.cells}
    for cid, _ in todo:
        left[cid] += 1
    if max_chunks is not None:
        todo = todo[:max_chunks]
    left0 = dict(left)
    cells_done = sum(1 for v in left.values() if v == 0)
    # before the bar, or without one if announced; a Dask worker compiles in its own process
    if backend == "local" and (progress or announce) and notice:
        from fastsim.compile_notice import sweep_notice

        cfgs = {c.id: c.config for c in grid.cells}
        sweep_notice((cfgs[cid].scheduler.code for cid, _ in todo),
                     users=user_drivers_of(cfgs[cid] for cid, _ in todo))
    bar = _progress(total, total - sum(left.values()), len(grid.cells), cells_done, progress)
    configs = {c.id: c.config.to_dict() for c in grid.cells}

    def write(cid: str, idx: int, result) -> None:
        store.write_chunk(cid, idx, *result)

    def written(cid: str, idx: int) -> None:
        nonlocal cells_done
        left[cid] -= 1
        if left[cid] == 0:
            cells_done += 1
            bar.set_postfix_str(f"cells {cells_done}/{len(grid.cells)}", refresh=False)
        bar.update(1)
        if on_chunk is not None:
            on_chunk(cid, idx)

    def finished(cid: str, idx: int, result) -> None:
        write(cid, idx, result)
        written(cid, idx)

    try:
        if backend == "local":
            # a per-job table in flight would be a second chunk's in memory: written inline
            with WriteBehind(write, written, inline=keep_jobs) as put:
                for idx, cids in chunk_groups(todo, grid):
                    start, n = grid.chunk_range(idx)
                    for i, result in run_chunks([configs[c] for c in cids], grid.seed, start,
                                                n, keep_jobs):
                        put(cids[i], idx, result)
                        del result  # not held here while the next cell runs
        else:
            with dask_client(backend, address, workers, timeout) as client:
                _run_dask(grid, todo, configs, client, timeout, keep_jobs, finished)
    finally:
        bar.close()
    pending_after = store.pending(keep_jobs)
    return RunReport(chunks_total=total, chunks_skipped=total - sum(left0.values()),
                     chunks_run=len(todo), seconds=time.perf_counter() - t0,
                     complete=not pending_after, damaged=damaged)


def try_user_code(grid: Grid, progress: bool = True, client=None,
                  timeout: float = DASK_TIMEOUT_S, out=None) -> bool:
    """The first cluster (the first two where it names a metric) of one cell per set of
    user functions the cells name (stop policy, scheduler key, metrics), run once the sweep directory is locked and before its
    manifest is written (``SweepStore.open``'s ``trial``): a function that fails at its
    first call (returns the wrong type, does not compile, raises) is refused in one line
    with nothing left behind (the lock file, and the directory if it was made, removed),
    and a directory another process holds is refused before any trial compiles.  It
    failed in the first chunk of its cell, after the manifest and other cells' chunks were
    written, and once fixed, the same command was refused as results "of other code"
    though none of its results existed.
    In this process, which compiles those kernels for the sweep anyway; with a Dask
    ``client``, on its workers (``run_chunks_on_worker``: a worker compiles its own, and the
    one that ran a trial keeps it for its chunks).  Not for functions a cell of the sweep
    directory ``out`` has a chunk record of: they ran there, and ``check_manifest`` found
    their code unchanged (a resumed sweep, complete or not, compiled kernels for a cluster
    thrown away).  Whether it said the compile notice (which ``run_sweep`` then does not
    say again)."""
    probes: dict[tuple, Any] = {}
    ran: set[tuple] = set()
    for c in grid.cells:
        cfg = c.config
        if cfg.policy.decl.user is not None or cfg.scheduler.decl.user is not None or cfg.metrics:
            key = (cfg.policy.decl.ref, cfg.scheduler.decl.ref, cfg.metrics)
            probes.setdefault(key, c)
            if out is not None and any(cell_dir(out, c.id).glob("chunk-*.json")):
                ran.add(key)
    probes = {k: c for k, c in probes.items() if k not in ran}
    # a metric is checked against the batch it ran in (its value for a cluster alone must
    # be the one it gave among others), which one cluster cannot show: a metric reading
    # the other clusters passed the trial and was refused in the first chunk, sweep.json
    # written
    n = min(2, grid.clusters) if any(c.config.metrics for c in probes.values()) else 1
    if client is not None:
        if probes:
            _run_dask(grid, [(c.id, 0) for c in probes.values()],
                      {c.id: c.config.to_dict() for c in probes.values()}, client, timeout,
                      False, lambda cid, idx, result: None, span=lambda idx: (0, n))
        return False
    said = False
    if probes and progress:  # said here, where the compiling now starts, for every cell
        from fastsim.compile_notice import sweep_notice

        said = sweep_notice((c.config.scheduler.code for c in grid.cells),
                            users=user_drivers_of(c.config for c in probes.values()))
    for c in probes.values():
        run_chunk(c.config.to_dict(), grid.seed, 0, n, False)
    return said


@contextlib.contextmanager
def held_run(grid: Grid, out, *, backend: str = "local", address=None,
             workers: int | None = None, timeout: float = DASK_TIMEOUT_S,
             keep_jobs: bool = False, progress: bool = True, announce: bool = False,
             say_resumed: bool = False):
    """Run ``grid`` into the sweep directory ``out`` and yield ``(store, report)`` with
    the directory still held (for aggregating).  Nothing is written before ``out`` is
    known to be writable and of this grid, and the Dask cluster, if any, answers with a
    worker; then ``out`` is locked (refused at once if another process holds it), and
    each user function runs its first cluster (``try_user_code``) before anything but the
    lock file is written, which a failure removes.  A local cluster is closed before the
    caller goes on, freeing its memory.  ``announce``: the compile notice without a bar
    too, once the checks have passed and only for chunks still to run; ``say_resumed``:
    ``run_sweep``'s."""
    from fastsim.io import check_output_dir

    check_output_dir(out)
    SweepStore.check_manifest(out, grid)  # another grid: refused before connecting
    with contextlib.ExitStack() as held:
        with dask_client(backend, address, workers, timeout, (grid,)) as client:
            said = []  # the trial runs inside ``open``, once the directory is locked

            def trial() -> None:
                said.append(try_user_code(grid, progress or announce, client, timeout, out))
            store = held.enter_context(SweepStore.open(out, grid, trial))  # holds the lock
            rep = run_sweep(grid, store, backend=backend, address=client, workers=workers,
                            timeout=timeout, keep_jobs=keep_jobs, progress=progress,
                            notice=not any(said), announce=announce,
                            say_resumed=say_resumed)
        yield store, rep


@contextlib.contextmanager
def dask_client(backend: str, address, workers: int | None, timeout: float,
                grids: tuple[Grid, ...] = ()):
    """The Dask client a sweep runs on (None for the local backend), connected, with a
    worker, and its workers' code checked against the ``grids``' (``check_workers``)
    before the caller writes anything in a sweep directory, so an unreachable or empty
    cluster, or one running other code, leaves no trace.  Closes what it opened; a given
    client is the caller's to close."""
    if backend != "dask":
        yield address
        return
    if hasattr(address, "submit"):
        for g in grids:
            check_workers(address, g)
        yield address
        return
    _quiet_client_logs()
    client, cluster = _connect(address, workers, timeout)
    closes = (client.close, *((cluster.close,) if cluster is not None else ()))
    try:
        for g in grids:
            check_workers(client, g)
        yield client
    except BaseException:
        # The run's own error says what happened.  Closing a client whose scheduler is
        # gone can fail inside distributed ("RuntimeError: Cannot change state of expiring
        # Timeout", by timing), which replaced that one line with two tracebacks.
        _close_whole(closes, quiet=True)
        raise
    _close_whole(closes)


# How long starting or closing a local cluster may go on after Ctrl-C or SIGTERM
# (``_waited``); a local cluster of two workers starts in 2-4 s and closes in about 1 s.
SIGNAL_WAIT_S = 5.0


def _waited(call: Callable[[], Any], undo: Callable[[Any], Any] | None = None) -> Any:
    """``call()``, run in a thread of its own while the main thread waits: Ctrl-C or
    SIGTERM meanwhile is raised once it has returned (``SIGNAL_WAIT_S`` at most), after
    ``undo(its result)``.  Taken inside distributed's start or close of a local cluster,
    it cancelled that half-way: a cluster left "closing" was waited for by the close
    distributed runs at exit for its whole 10 s timeout (a sweep SIGTERMed as it ended
    took 11 s to end), and one left starting failed that close with a traceback."""
    result: list = []
    failed: list[BaseException] = []
    done = threading.Event()  # not ``Thread.join``: Python 3.11's, interrupted by a
    # signal, can mark the thread it waits for as ended while it still runs

    def run() -> None:
        try:
            result.append(call())
        except BaseException as exc:  # noqa: BLE001 - raised in the main thread below
            failed.append(exc)
        finally:
            done.set()

    signalled: KeyboardInterrupt | None = None
    deadline = math.inf
    try:  # a signal the call itself sends at once can land while the thread starts
        threading.Thread(target=run, name="fastsim-dask", daemon=True).start()
    except KeyboardInterrupt as exc:  # Terminated too
        signalled, deadline = exc, time.monotonic() + SIGNAL_WAIT_S
    while not done.is_set() and time.monotonic() < deadline:
        try:
            done.wait(None if signalled is None else deadline - time.monotonic())
        except KeyboardInterrupt as exc:  # Terminated too
            if signalled is None:
                signalled, deadline = exc, time.monotonic() + SIGNAL_WAIT_S
    if signalled is not None:
        if result and undo is not None:
            with contextlib.suppress(Exception):
                _waited(lambda: undo(result[0]))
        raise signalled
    if failed:
        raise failed[0]
    return result[0]


def _close_whole(closes, quiet: bool = False) -> None:
    """Call each of ``closes`` (a client's, a local cluster's), even after one fails,
    signals held off (``_waited``); ``quiet``: the caller is raising its own error, and
    a close's is dropped."""
    def close_each() -> list[Exception]:
        failed = []
        for close in closes:
            try:
                close()
            except Exception as exc:  # noqa: BLE001 - raised below
                failed.append(exc)
        return failed

    failed = _waited(close_each)
    if failed and not quiet:
        raise failed[0]


def _quiet_client_logs() -> None:
    """distributed logs, on the client's side too, each lost worker, failed fetch and
    reconnection attempt, with tracebacks, and asyncio the tasks distributed abandons (when
    they are collected, at exit maybe); a run reports what they mean for the sweep in one
    line, so they stay quiet for the rest of the process."""
    import distributed  # noqa: F401 - its import sets these levels: first, then ours

    # distributed.batched: the client's send loop, which logs its closed connection with a
    # traceback when the scheduler dies (seen once in a few runs, by timing)
    # distributed.scheduler and .nanny: a local cluster's, in this process, which log a
    # killed worker ("broadcast failed", "Restarting worker") as it is replaced
    for name in ("distributed.client", "distributed.batched", "distributed.comm",
                 "distributed.core", "distributed.scheduler", "distributed.nanny", "asyncio"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    tornado = logging.getLogger("tornado.application")
    if _not_syncs_cancel_race not in tornado.filters:
        tornado.addFilter(_not_syncs_cancel_race)


def _not_syncs_cancel_race(record: logging.LogRecord) -> bool:
    """False for the traceback tornado logs when Ctrl-C lands while distributed's ``sync``
    has not yet made the future its ``cancel`` callback cancels (a ``NameError`` on
    ``future`` in ``distributed/utils.py``): seen once in a CI run, a dozen lines above
    fastsim's one line, which says what happened."""
    exc = record.exc_info[1] if record.exc_info else None
    if not isinstance(exc, NameError) or exc.__traceback__ is None:
        return True
    tb = exc.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    return not (code.co_name == "cancel"
                and code.co_filename.endswith(os.path.join("distributed", "utils.py")))


def _workers_deaf_to_ctrl_c():
    """Start the local cluster's worker processes ignoring SIGINT: Ctrl-C goes to the
    terminal's whole process group, and each worker printed its own KeyboardInterrupt
    traceback (two dozen lines a worker) around fastsim's one line, while fastsim, which
    takes the Ctrl-C, stops them anyway.  An ignored SIGINT is inherited across exec and
    kept by Python at start-up.  Ctrl-C in the seconds the workers take to start is lost
    (pressed again, it stops the sweep).  A worker distributed starts later, to replace
    one, inherits fastsim's handler instead: ``worker_plugin`` ignores SIGINT in it."""
    from fastsim.errors import signal_handlers

    return signal_handlers({signal.SIGINT: signal.SIG_IGN})


def _connect(address, workers: int | None, timeout: float):
    """``(client, cluster or None)``: a client of ``address``, or of a new local cluster.

    Bad or unreachable addresses and a scheduler without workers are one ``ConfigError``.
    """
    from dask.distributed import Client, LocalCluster

    cluster = None
    if address is None:
        from fastsim.user_modules import unguarded_main_line

        line = unguarded_main_line()
        if line is not None:
            raise ConfigError(f"{line}: starts a sweep on a local Dask cluster outside `if "
                              "__name__ == \"__main__\":`, and each worker process imports "
                              "the script first and would start it again; allowed: the call "
                              "under that guard (docs/sweeps.md, Dask)")
        n = workers or os.cpu_count() or 1
        # one numba thread per worker process: the processes are the parallelism
        with warnings.catch_warnings():  # a second sweep's dashboard takes another port,
            # which the line below names: distributed's five-line warning says it again
            warnings.filterwarnings("ignore", "Port .* is already in use", UserWarning)
            with _workers_deaf_to_ctrl_c():
                cluster = _waited(lambda: LocalCluster(
                    n_workers=n, threads_per_worker=1, processes=True,
                    env={"NUMBA_NUM_THREADS": "1"}), undo=lambda started: started.close())
        client = Client(cluster)
        from fastsim.sweep.worker_plugin import NAME, SweepWorkerPlugin
        client.register_plugin(SweepWorkerPlugin(), name=NAME)  # restarted workers too
        print(f"dask: started a local cluster of {counted(n, 'worker')}; dashboard: "
              f"{client.dashboard_link}", file=sys.stderr)
    else:
        # a scheduler that refuses connections is retried until the timeout: a short one,
        # as an address is either up or wrong (workers may take longer to join)
        connect_s = min(timeout, DASK_CONNECT_S)
        # said first: a port where nothing listens was 10 s of silence before its one line
        print(f"dask: connecting to the scheduler at {address} (retried for up to "
              f"{connect_s:g} s)", file=sys.stderr)
        try:
            _handshake(address, connect_s)
            client = Client(address, timeout=connect_s)
        except Exception as exc:  # noqa: BLE001 - distributed raises OSError, TimeoutError, ValueError...
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            # TimeoutError is an OSError
            why = _unreachable(address) if isinstance(exc, OSError) else None
            if why is not None:
                reason = why
            elif isinstance(exc, TimeoutError) and not str(exc).strip():  # _handshake's
                reason = (f"it accepts connections but gave no Dask handshake within "
                          f"{connect_s:g} s: not a scheduler's port (the dashboard's, "
                          f"another service's?)")
            elif not isinstance(exc, (OSError, TimeoutError)):  # bytes of another protocol
                reason = f"what answers is not a Dask scheduler: {type(exc).__name__}: {reason}"
            raise ConfigError(f"--address {address!r}: cannot reach a Dask scheduler ({reason}); "
                              "allowed: tcp://HOST:PORT of a running scheduler, or no --address "
                              "for a local cluster") from None
    try:
        client.wait_for_workers(1, timeout=timeout)
    except TimeoutError:
        client.close()
        raise ConfigError(f"--address {address}: no worker joined the scheduler within "
                          f"{timeout:g} s; start workers (dask worker {address}) and re-run") from None
    return client, cluster


def _handshake(address: str, seconds: float) -> None:
    """Open one comm to the scheduler at ``address`` and close it, its handshake included,
    within ``seconds`` (else ``TimeoutError``).  distributed's ``connect`` times the TCP
    connection but then waits for the peer's handshake without a limit: a ``Client`` of
    an address that accepts and never answers (the dashboard's HTTP port, which waits for
    a request) waited forever, whatever its ``timeout``.  In a thread of its own, as a
    caller may be inside an event loop (a notebook's)."""
    import asyncio
    import threading

    from distributed.comm import connect
    from distributed.security import Security

    async def probe():
        args = Security().get_connection_args("client")
        comm = await asyncio.wait_for(connect(address, timeout=seconds, **args), seconds)
        await comm.close()

    failed: list[BaseException] = []

    def run():
        try:
            asyncio.run(probe())
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            failed.append(exc)

    thread = threading.Thread(target=run, name="fastsim-dask-handshake", daemon=True)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]


def _warm_up(client) -> None:
    """Compile on every worker once.  Only an optimisation: a worker that dies meanwhile
    (its nanny restarts it) compiles, or loads numba's cache, on its first chunk."""
    try:
        client.run(warm_up, on_error="return")
    except Exception:  # noqa: BLE001 - a worker lost mid-call; the chunks still run
        pass


RESUME = "the chunks already written are kept and the same command resumes"
# lost in ``try_user_code``'s trial, which runs before any chunk (and whose failure removes
# the lock file the run made): no chunk of this run is there to keep
TRIAL = ("this run wrote nothing (it was trying each user function on its first cluster, "
         "before any chunk), and the same command starts it again")


# what distributed's connect retries until its time runs out, and so named as that timeout:
# a port where nothing listens read as one that "accepts connections but gave no Dask
# handshake" (_handshake's) or "Timed out trying to connect" (distributed's)
NOTHING_LISTENS = ("nothing listens there, the connection is refused: no scheduler runs at "
                   "that address, or it has stopped")


def _unreachable(address: str) -> str | None:
    """Why a TCP connection to ``address`` (tcp, tls, ws, wss) fails now, at the socket
    level, in words: ``NOTHING_LISTENS``, or a host name that resolves to no address (a
    typo, a name this network does not know); None if it connects, is not reached in time
    (a frozen scheduler's), is not TCP or does not parse."""
    import socket

    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        scheme, where = parse_address(address)
        host, port = parse_host_port(where)
        if scheme not in ("tcp", "tls", "ws", "wss"):  # each a TCP connection underneath
            return None
        socket.create_connection((host, port), timeout=PROBE_S).close()
    except ConnectionRefusedError:
        return NOTHING_LISTENS
    except socket.gaierror:  # the name looked up once, by the connection
        return f"no host is found by the name {host}: it does not resolve"
    except (OSError, ValueError, TypeError):
        return None
    return None


class _Watch:
    """Notices a cluster that can no longer finish the sweep: distributed keeps a task
    whose worker died waiting for another worker forever, so a scheduler without workers
    for ``grace`` seconds, or a lost scheduler, ends the run instead of hanging it."""

    def __init__(self, client, grace: float, trial: bool = False):
        self.client, self.grace, self.empty_since = client, grace, None
        self.trial = trial  # running ``try_user_code``'s trial: nothing written yet
        self.resume = TRIAL if trial else RESUME
        self.answer_s = min(grace, DASK_CONNECT_S)  # as it must answer when first reached
        self.refetched: dict[tuple[tuple[str, ...], int], int] = {}
        self.address = getattr(client, "scheduler", None) and client.scheduler.address

    def scheduler_lost(self) -> ClusterLostError:
        return ClusterLostError(f"lost the connection to the Dask scheduler {self.address} "
                                f"mid-sweep; {self.resume} once it is back")

    def workers(self) -> int:
        """The scheduler's worker count now, asked within ``answer_s``: ``scheduler_info``
        waits without a limit, and a scheduler that stops answering without closing its
        connections (a frozen process or host, a network cut off) hung the sweep forever."""
        try:
            info = self.client.sync(self.client.scheduler.identity, n_workers=-1,
                                    callback_timeout=self.answer_s)
            n = len(info.get("workers", {}))
        except TimeoutError:  # before OSError, of which it is one
            raise self._silent_or_gone() from None
        except Exception:  # noqa: BLE001 - OSError, KeyError once closed: the scheduler is gone
            raise self.scheduler_lost() from None
        # checked after the call: a connection lost meanwhile empties its answer
        if self.client.status != "running":
            raise self.scheduler_lost()
        return n

    def _silent_or_gone(self) -> ClusterLostError:
        """What a scheduler that let a question time out is: gone when its address now
        refuses a connection (killed: the client's rpc kept trying to reconnect until the
        time ran out), else silent (frozen, or the network to it cut)."""
        if _unreachable(self.address) == NOTHING_LISTENS:
            return self.scheduler_lost()
        return ClusterLostError(
            f"the Dask scheduler {self.address} has not answered for {self.answer_s:g} s "
            f"mid-sweep (its process or host frozen, or the network to it cut); "
            f"{self.resume} once it answers")

    def no_worker(self) -> ClusterLostError:
        return ClusterLostError(
            f"the Dask scheduler {self.address} has had no worker for {self.grace:g} s "
            f"(--dask-timeout) mid-sweep; {self.resume} once workers are back "
            f"(dask worker {self.address})")

    def check(self) -> None:
        """Raise once the scheduler is gone or has had no worker for ``grace`` seconds."""
        if self.workers():
            self.empty_since = None
        elif self.empty_since is None:
            self.empty_since = time.monotonic()
        elif time.monotonic() - self.empty_since > self.grace:
            raise self.no_worker()

    def what(self, cids: list[str], idx: int) -> str:
        """What the task of ``(cids, idx)`` ran, as a lost one is named."""
        cells = f"cell {cids[0]}" if len(cids) == 1 else f"cells {', '.join(cids)}"
        return (f"the first-cluster trial of {cells}" if self.trial
                else f"chunk {idx} of {cells}")

    def result(self, fut, cids: list[str], idx: int):
        """A finished future's result, None if it must run again; a lost one is one
        ``ClusterLostError``."""
        from concurrent.futures import CancelledError

        from distributed.scheduler import KilledWorker

        if fut.status == "cancelled":
            raise self.scheduler_lost()
        if fut.status == "error" and isinstance(fut.exception(), KilledWorker):
            raise ClusterLostError(f"{self.what(cids, idx)} was lost: every Dask worker "
                                   f"that ran it died ({fut.exception().allowed_failures + 1} "
                                   f"attempts); {self.resume}")
        if fut.status == "error":
            exc = fut.exception()
            if isinstance(exc, (ConfigError, SimulationError)):
                raise exc  # a chunk's own error, one line as in a local run
            # anything else is the worker's (fastsim missing or older there, out of memory)
            first = (str(exc).strip().splitlines() or [""])[0]
            raise ClusterLostError(f"{self.what(cids, idx)} failed on a Dask worker: "
                                   f"{type(exc).__name__}: {first}; every worker needs the "
                                   "same fastsim and Python packages as this process; "
                                   f"{self.resume}")
        try:  # the worker holding it may die before it is fetched: the fetch then stalled
            # 30 or 60 s in tests (distributed's connect timeout is 30 s), or, with no worker
            # left, forever; a chunk is pure, so running it again is safe
            return fut.result(timeout=min(FETCH_S, self.grace))
        except (OSError, CancelledError):  # TimeoutError and CommClosedError are OSErrors
            pass
        self.workers()  # raises if the scheduler is gone
        task = (tuple(cids), idx)
        self.refetched[task] = self.refetched.get(task, 0) + 1
        if self.refetched[task] > REFETCHES:
            raise ClusterLostError(f"{self.what(cids, idx)} was computed {REFETCHES + 1} "
                                   "times but could not be fetched within "
                                   f"{min(FETCH_S, self.grace):g} s; {self.resume}")
        return None  # run it again (the no-worker grace applies to it like to any chunk)


def _run_dask(grid: Grid, todo: list[tuple[str, int]], configs: dict[str, dict], client,
              timeout: float, keep_jobs: bool, finished,
              span: Callable[[int], tuple[int, int]] | None = None) -> None:
    """Run the chunks ``todo`` on ``client``'s workers, handing each result to ``finished``;
    ``span`` gives a chunk's ``(first cluster, count)`` (``try_user_code``'s trial: the
    first cluster alone, without warming every worker up first).  A task runs the cells
    of a chunk that share a workload (``chunk_groups``), as a local run does; one cell
    where per-job tables are kept (``keep_jobs``: a task's tables are held until the
    driver writes them, so a group's would be several chunks' memory) and in the trial."""
    from concurrent.futures import CancelledError

    from dask.distributed import wait

    watch = _Watch(client, timeout, trial=span is not None)
    alone = keep_jobs or span is not None
    if span is None:
        span = grid.chunk_range
        _warm_up(client)
    window = 2 * max(1, watch.workers())  # bounded in-flight results: memory stays per-chunk
    queue = deque([(idx, [cid]) for cid, idx in todo] if alone else chunk_groups(todo, grid))
    running = {}
    while queue or running:
        while queue and len(running) < window:
            idx, cids = queue.popleft()
            start, n = span(idx)
            running[client.submit(run_chunks_on_worker, [configs[c] for c in cids], grid.seed,
                                  start, n, keep_jobs, pure=False)] = (idx, cids)
        try:  # a bounded wait, so a cluster that lost every worker is noticed
            with client.as_current():
                done = wait(list(running), timeout=POLL_S, return_when="FIRST_COMPLETED").done
        except TimeoutError:
            done = ()
        except CancelledError:  # distributed cancels every future when the scheduler goes
            raise watch.scheduler_lost() from None
        if not done:
            watch.check()
        for fut in done:
            idx, cids = running.pop(fut)
            result = watch.result(fut, cids, idx)
            fut.release()
            if result is None:
                queue.appendleft((idx, cids))
                continue
            worker, code, chunks = result
            check_worker_code(worker, code, grid)  # before any chunk of it is written
            for cid, chunk in zip(cids, chunks):
                if isinstance(chunk, Exception):
                    raise chunk
                finished(cid, idx, chunk)
