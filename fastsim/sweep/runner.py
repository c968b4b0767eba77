"""Run a sweep's missing chunks, in-process or on a Dask distributed cluster.

A chunk is ``(cell, chunk index)``: ``fastsim.api.simulate`` on clusters
``[i * chunk, (i + 1) * chunk)`` of the cell's config.  ``run_chunk`` is a top-level
function so Dask can ship it to workers; workers return small DataFrames and the
driver writes them (workers need no shared file system).  Results are identical
whatever the backend, worker count or chunk order: each cluster is a pure function of
``(seed, cluster index)`` and each chunk is written as computed.
"""
from __future__ import annotations

import sys
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

import polars as pl
from tqdm import tqdm

from fastsim.api import simulate
from fastsim.config import SimConfig
from fastsim.errors import ConfigError
from fastsim.sweep.extracts import jct_histogram
from fastsim.sweep.grid import Grid
from fastsim.sweep.store import SweepStore

BACKENDS = ("local", "dask")


@dataclass
class RunReport:
    """What a ``run_sweep`` call did."""

    chunks_total: int
    chunks_skipped: int
    chunks_run: int
    seconds: float
    complete: bool


def run_chunk(config: dict[str, Any], seed: int, start: int, n: int, keep_jobs: bool
              ) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame | None]:
    """Simulate one chunk: ``(per-cluster metrics, JCT histogram, per-job table or None)``.

    Takes the config as a plain dict so that a Dask task pickles only data.
    """
    cfg = SimConfig.from_dict(config)
    res = simulate(cfg, n_clusters=n, seed=seed, cluster_start=start, keep_jobs=True)
    hist = jct_histogram(res.jobs)
    return res.clusters, hist, (res.jobs if keep_jobs else None)


def warm_up() -> str:
    """Compile (or load from numba's on-disk cache) every kernel a chunk uses, once per
    process: every scheduler and the decision kernels (observed and oracle)."""
    import os

    from fastsim import registry as R

    scheds, pols = R.BUILTIN_SCHEDULERS, R.BUILTIN_POLICIES
    for i in range(max(len(scheds), len(pols))):  # every built-in at least once
        sched, pol = scheds[i % len(scheds)].usage(), pols[i % len(pols)].usage()
        simulate(SimConfig.from_specs(sched, pol, n_jobs=8), n_clusters=2, keep_jobs=True)
    return f"pid {os.getpid()} warm"


def _progress(total: int, initial: int, n_cells: int, cells_done: int, enabled: bool) -> tqdm:
    bar = tqdm(total=total, initial=initial, unit="chunk", disable=not enabled,
               dynamic_ncols=True, file=sys.stderr, smoothing=0.05)
    bar.set_postfix_str(f"cells {cells_done}/{n_cells}")
    return bar


def run_sweep(grid: Grid, store: SweepStore, *, backend: str = "local",
              address: str | None = None, keep_jobs: bool = False, progress: bool = True,
              max_chunks: int | None = None,
              on_chunk: Callable[[str, int], None] | None = None) -> RunReport:
    """Run every chunk of ``grid`` not yet complete in ``store``.

    Parameters
    ----------
    backend : ``local`` (this process; numba threads over clusters) or ``dask``.
    address : the Dask scheduler (``tcp://host:8786``) or a ``distributed.Client``.
    keep_jobs : also write per-job records (``jobs-*.parquet``); memory per chunk only.
    max_chunks : stop after this many chunks (a controlled interruption, for tests).
    on_chunk : called with ``(cell id, chunk index)`` after each chunk is written.
    """
    if backend not in BACKENDS:
        raise ConfigError(f"backend={backend!r} is unknown; allowed: {', '.join(BACKENDS)}")
    if backend == "dask" and address is None:
        raise ConfigError("backend=dask needs --address tcp://HOST:PORT of a running scheduler")
    t0 = time.perf_counter()
    total = len(grid.cells) * grid.n_chunks
    todo = store.pending(keep_jobs)
    if max_chunks is not None:
        todo = todo[:max_chunks]
    left = {c.id: 0 for c in grid.cells}
    for cid, _ in store.pending(keep_jobs):
        left[cid] += 1
    left0 = dict(left)
    cells_done = sum(1 for v in left.values() if v == 0)
    bar = _progress(total, total - sum(left.values()), len(grid.cells), cells_done, progress)
    configs = {c.id: c.config.to_dict() for c in grid.cells}

    def finished(cid: str, idx: int, result) -> None:
        nonlocal cells_done
        clusters, hist, jobs = result
        store.write_chunk(cid, idx, clusters, hist, jobs)
        left[cid] -= 1
        if left[cid] == 0:
            cells_done += 1
            bar.set_postfix_str(f"cells {cells_done}/{len(grid.cells)}", refresh=False)
        bar.update(1)
        if on_chunk is not None:
            on_chunk(cid, idx)

    try:
        if backend == "local":
            for cid, idx in todo:
                start, n = grid.chunk_range(idx)
                finished(cid, idx, run_chunk(configs[cid], grid.seed, start, n, keep_jobs))
        else:
            _run_dask(grid, todo, configs, address, keep_jobs, finished)
    finally:
        bar.close()
    pending_after = store.pending(keep_jobs)
    return RunReport(chunks_total=total, chunks_skipped=total - sum(left0.values()),
                     chunks_run=len(todo), seconds=time.perf_counter() - t0,
                     complete=not pending_after)


def _run_dask(grid: Grid, todo: list[tuple[str, int]], configs: dict[str, dict], address,
              keep_jobs: bool, finished) -> None:
    from dask.distributed import Client, as_completed

    own = not hasattr(address, "submit")
    client = Client(address) if own else address
    try:
        client.run(warm_up)  # each worker compiles (or loads the numba cache) once
        n_workers = max(1, len(client.scheduler_info().get("workers", {})))
        window = 2 * n_workers  # bounded in-flight results: memory stays per-chunk
        queue = deque(todo)
        key_of = {}

        def submit():
            cid, idx = queue.popleft()
            start, n = grid.chunk_range(idx)
            fut = client.submit(run_chunk, configs[cid], grid.seed, start, n, keep_jobs,
                                pure=False)
            key_of[fut.key] = (cid, idx)
            return fut

        ac = as_completed([submit() for _ in range(min(window, len(queue)))])
        for fut in ac:
            cid, idx = key_of.pop(fut.key)
            result = fut.result()
            fut.release()
            finished(cid, idx, result)
            if queue:
                ac.add(submit())
    finally:
        if own:
            client.close()
