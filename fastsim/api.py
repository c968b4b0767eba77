"""Run simulation cells: workload -> stop decisions -> engine -> metrics.

Each stage is its own per-cluster kernel, so that its inputs say what it may know:
decisions see observed arrays only (the oracle, declared, sees the hacking label and
the peak), the engine adds the true run time (physics), and metrics add everything.
``simulate`` and ``run_workload`` run the stages one cluster at a time in a single pass
(``kernels.pipeline``); ``decide_stops``, ``run_engine``, ``account`` and ``run_stages``
run them stage by stage over all clusters, with the same results to the bit.

Examples
--------
>>> from fastsim.config import SimConfig
>>> res = simulate(SimConfig.from_specs("srtf_est", "evalstop:k=2", n_jobs=20), n_clusters=4)
>>> res.clusters.height
4
"""
from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import polars as pl

from fastsim import metrics as M
from fastsim import registry as R
from fastsim.compile_notice import first_call, first_run, is_quiet, user_call
from fastsim.config import (PolicyConfig, SchedulerConfig, SimConfig, check_code, check_flags,
                            inert_settings, parse_baseline, reads, self_baseline)
from fastsim.errors import (ConfigError, InertSettingWarning, SimulationError, known_keywords,
                            readonly, user_code)
from fastsim.memory import check_fits, simulate_bytes
from fastsim.plain_python import check_scheduler_key, check_stop_policy, coded_view, key_call
from fastsim.arrays import Accounting, Decisions, Outcome, empty_decisions, empty_outcome
from fastsim.workload import (Workload, allocate, check_counts, check_resolution,
                              generate_workload, kernel_params, pipeline_arrays)
from fastsim.kernels.codes import JOB_TYPE_LABELS, LORA, PATIENCE, RLHF, STOP_AT
from fastsim.kernels.engine import cluster_nb, max_points_nb, service_points_nb
from fastsim.kernels.metrics import METRIC_NAMES, N_METRICS, accounting_nb, cluster_metrics_nb
from fastsim.kernels.oracle import oracle_stops_nb
from fastsim.kernels.pipeline import run_pipeline
from fastsim.kernels.schedulers import user_keys_driver
from fastsim.kernels.stops import resolve_stops_nb, trigger_scratch, user_stops_driver


@dataclass
class SimResult:
    """Results of one cell.

    ``clusters``: one row per cluster: ``cluster`` (its id), ``seed`` (the seed it was
    drawn with; null for a workload the caller drew, as ``run_workload``'s) and the metric
    columns of
    ``fastsim.kernels.metrics.METRIC_NAMES``, with their unit in the name (``_h`` hours,
    ``_gpu_h`` GPU-hours) or declared (``fastsim.metrics.lookup("utilization").unit`` is
    ``share``: a fraction in [0, 1], as ``wasted_share``, ``precision``, ``recall``,
    ``fpr``, ``stop_recall`` and ``stop_fpr`` are; ``gold_*`` and ``regret_mean`` are gold
    scores; ``tp, fp, fn, tn`` and the other integer columns count jobs);
    ``fastsim.metrics.metrics()`` lists each with its label and unit.  A cluster's rate
    is NaN where it has nothing to count (``summarize`` pools the counts over clusters).
    ``jobs``: one row per cluster x job (times in hours; ``trigger_eval`` and
    ``delivered_eval`` are 1-based evaluations, ``trigger_eval`` 0 where none fired), or
    None unless ``keep_jobs``;
    ``segments``: run segments (cluster, job, start_h, end_h) when recorded;
    ``extract``: what ``simulate``'s ``extract`` returned, if given.
    """

    config: SimConfig
    clusters: pl.DataFrame
    jobs: pl.DataFrame | None = None
    segments: pl.DataFrame | None = None
    extract: Any = None


def decide_stops(cfg: SimConfig, w: Workload) -> Decisions:
    """Resolve every job's stop decision (observed data only, except the labelled oracle)."""
    check_workload(cfg, w)
    return _decide_stops(cfg, w)


# The stages' bodies, on what their public functions checked: ``run_stages`` and the bench
# check a workload once, not at every stage (the check costs about a third of the
# decisions stage on default clusters).
def _decide_stops(cfg: SimConfig, w: Workload) -> Decisions:
    d = empty_decisions((w.n_clusters, w.n_jobs))
    p = cfg.policy
    decl = p.decl
    scope_all = p.scope == "all"
    if decl.user is not None:
        check_code(p, "policy")
        values = p.values
        back = -1 if decl.keep == "best" else decl.lookback_of(values)
        params = tuple(v for k, v in values.items() if k != "scope")
        driver, *words = _policy_driver(p)
        with R.calling(decl, "stop policy"), user_call(driver, *words):
            driver(
                params, int(back),
                decl.action == "demote", scope_all, w.job_type, w.t_est_h, readonly(w.score),
                readonly(w.loss), w.duration_h, d.in_scope, d.stopped, d.demoted,
                d.trigger_eval, d.delivered_eval, *trigger_scratch(w.n_clusters, w.n_evals))
        R.check_returns(decl, "stop policy")
        broken = np.argwhere((d.trigger_eval < 0) | (d.delivered_eval < 1))
        if broken.size:
            c, j = (int(i) for i in broken[0])
            attained = w.duration_h[c, j] * (np.arange(1, w.n_evals + 1) / w.n_evals)
            raise ConfigError(R.trigger_error(decl.name, values, R.broken_at(
                decl, params, f"job {j} of cluster {c}", int(d.trigger_eval[c, j]),
                (w.score[c, j], w.loss[c, j], attained, w.t_est_h[c, j]))))
        check_stop_policy(decl, params, w, d.trigger_eval, d.in_scope)
    elif p.uses_hidden_truth:
        oracle_stops_nb(scope_all, w.job_type, w.hacking, w.peak_eval, w.n_evals, d.in_scope,
                        d.stopped, d.demoted, d.trigger_eval, d.delivered_eval)
    else:
        # its own kernel, not the one-pass pipeline's: a first call compiled it for 6-9
        # CPU-seconds (10-30 s on a busy machine) in silence
        with first_call("stops.resolve_stops_nb", what="the stop-decision kernels",
                        seconds="10-30"):
            resolve_stops_nb(p.code, p.k, float(p.f), p.w, float(p.tol),
                             np.array(p.vector, np.float64), scope_all, w.job_type, w.t_est_h,
                             w.score, w.loss, w.duration_h, d.in_scope, d.stopped, d.demoted,
                             d.trigger_eval, d.delivered_eval)
    return d


def user_drivers(cfg: SimConfig) -> list[tuple[Any, str, str]]:
    """``user_call``'s arguments for the compiled drivers a run of ``cfg`` calls for its
    user stop policy and scheduler key (a sweep says it once, before its chunks:
    ``fastsim.compile_notice.sweep_notice``)."""
    return ([_policy_driver(cfg.policy)] if cfg.policy.decl.user is not None else []) + (
        [_key_driver(cfg.scheduler)] if cfg.scheduler.decl.user is not None else [])


def user_drivers_of(configs) -> list[tuple[Any, str, str]]:
    """``user_drivers`` of each of ``configs`` in their order, each driver once: the one
    list a sweep's notice names (in set order, its names followed PYTHONHASHSEED)."""
    return list(dict.fromkeys(u for cfg in configs for u in user_drivers(cfg)))


def _policy_driver(p: PolicyConfig) -> tuple[Any, str, str]:
    return user_stops_driver(p.decl.user), "stop policy", p.name


def _key_driver(s: SchedulerConfig) -> tuple[Any, str, str]:
    return user_keys_driver(s.decl.user), "scheduler", s.decl.name


def check_like(given: Any, made: Any, name: str, maker: str) -> None:
    """``given`` holds ``made``'s arrays, of their dtypes and shapes: the stage kernels
    index them by the workload's clusters and jobs without bounds checks (the decisions
    of one cluster given for four read past their end into the engine's schedule, and
    the metrics stage crashed the process)."""
    if type(given) is not type(made):
        raise ConfigError(f"{name} is {type(given).__name__}; allowed: a "
                          f"{type(made).__name__}, as {maker} returns")
    for f in fields(made):
        a, want = getattr(given, f.name), getattr(made, f.name)
        if not isinstance(a, np.ndarray) or a.dtype != want.dtype or a.shape != want.shape:
            got = f"{a.dtype} {a.shape}" if isinstance(a, np.ndarray) else type(a).__name__
            raise ConfigError(f"{name}.{f.name} is {got}; allowed: {want.dtype} {want.shape} "
                              f"for this workload, as {maker} returns")


def _first_bad(values: np.ndarray, bad: np.ndarray) -> str:
    """The first ``True`` of a ``[C, J]`` mask and its value, as the error names them."""
    c, j = np.unravel_index(int(np.argmax(bad)), bad.shape)
    if values.ndim == 3:
        return f"cluster row {c}, job {j} has readings {values[c, j].tolist()}"
    return f"cluster row {c}, job {j} is {values[c, j]}"


def check_workload(cfg: SimConfig, w: Workload) -> None:
    """``ConfigError`` naming the first value of a given workload (built by hand, say)
    that the engine cannot run: it admits jobs in index order, divides by GPU demands and
    run times, orders by keys that must not be NaN, and indexes by job type and peak
    evaluation (an index out of range reads other memory).  A generated workload passes."""
    _check_arrays(cfg, w)
    # Each check screens with a reduction (a pass without temporaries: NaN propagates
    # through min, max and sum) and builds the mask that locates a bad value only if the
    # screen fails, so a valid chunk of 500 default clusters costs well under a millisecond.
    cap = cfg.workload.gpus
    gpus, dur, est, arr = w.gpus, w.duration_h, w.t_est_h, w.arrival_h
    jt, peak = w.job_type, w.peak_eval
    checks = (
        ("gpus", lambda: gpus.min() < 1 or gpus.max() > cap, lambda: (gpus < 1) | (gpus > cap),
         f"an integer from 1 to {cap} (the cluster's GPUs)"),
        ("duration_h", lambda: not (dur.min() > 0 and dur.max() < np.inf),
         lambda: ~((dur > 0) & (dur < np.inf)), "finite and > 0"),
        ("t_est_h", lambda: not (est.min() >= 0 and est.max() < np.inf),
         lambda: ~((est >= 0) & (est < np.inf)), "finite and >= 0"),
        ("arrival_h", lambda: not np.isfinite(arr.sum()), lambda: ~np.isfinite(arr), "finite"),
        ("job_type", lambda: jt.min() < LORA or jt.max() > RLHF,
         lambda: (jt < LORA) | (jt > RLHF), f"a job type code from {LORA} to {RLHF} "
         f"({', '.join(JOB_TYPE_LABELS)})"),
        ("peak_eval", lambda: peak.min() < 1 or peak.max() > w.n_evals,
         lambda: (peak < 1) | (peak > w.n_evals), f"an evaluation from 1 to {w.n_evals}"),
        ("arrival_h", lambda: (arr[:, 1:] < arr[:, :-1]).any(),
         lambda: np.pad(arr[:, 1:] < arr[:, :-1], ((0, 0), (1, 0))),
         "non-decreasing along each cluster row (jobs arrive in index order)"),
    )
    if cfg.policy.code == STOP_AT:  # its progress is attained / T_est
        checks += (("t_est_h", lambda: not est.min() > 0, lambda: ~(est > 0),
                    "> 0 under stop_at (it divides by it)"),)
    checks += _loss_checks(cfg, w)
    for name, screen, mask, allowed in checks:
        bad = mask() if screen() else None
        if bad is not None and bad.any():
            raise ConfigError(f"workload.{name} at {_first_bad(getattr(w, name), bad)}; "
                              f"allowed: {allowed}")
    check_resolution(w)


def _loss_checks(cfg: SimConfig, w: Workload) -> tuple:
    """``check_workload``'s checks of the loss readings that a ``positive_losses`` reader
    of the run takes as relative drops: ``loss_aware`` every job's, a policy those of the
    jobs in its scope.  A reading <= 0 reversed the drop (a negative loss falling read as
    rising) or made a NaN key (0 / 0), placed differently by the engine and the reference:
    other schedules, silently."""
    s, p = cfg.scheduler, cfg.policy
    readers = [d for d in (s.decl, p.decl) if d.positive_losses]
    if not readers:
        return ()
    loss = w.loss
    if s.decl.positive_losses or p.scope == "all":
        def mask():
            return ~((loss > 0) & (loss < np.inf)).all(axis=2)
    else:
        def mask():
            return ~((loss > 0) & (loss < np.inf)).all(axis=2) & (w.job_type == RLHF)
    label = s.label if s.decl.positive_losses else p.label
    return (("loss", lambda: not (loss.min() > 0 and loss.max() < np.inf), mask,
             "finite readings, each " + readers[0].loss_rule(label)),)


# The kind of number each array holds (the engine indexes by the integer ones and reads
# the bool one as a label); a float array of GPUs, say, would be truncated without a word.
_INTEGER_ARRAYS = ("cluster_ids", "job_type", "gpus", "peak_eval")
_BOOL_ARRAYS = ("hacking",)


def _check_arrays(cfg: SimConfig, w: Workload) -> None:
    """``ConfigError`` naming the first argument or array of ``check_workload`` of the
    wrong type, kind of number or shape."""
    if not isinstance(cfg, SimConfig):
        raise ConfigError(f"cfg={cfg!r} is invalid; allowed: a SimConfig")
    if not isinstance(w, Workload):
        raise ConfigError(f"workload {type(w).__name__} is invalid; allowed: a Workload "
                          "(fastsim.workload.generate_workload, or allocate and fill)")
    for f in fields(w):
        a = getattr(w, f.name)
        if not isinstance(a, np.ndarray):
            raise ConfigError(f"workload.{f.name} is a {type(a).__name__}; allowed: a numpy "
                              "array")
        kinds = "b" if f.name in _BOOL_ARRAYS else "iu" if f.name in _INTEGER_ARRAYS else "iuf"
        allowed = dict(b="bool", iu="integers", iuf="real numbers")[kinds]
        if a.dtype.kind not in kinds:
            raise ConfigError(f"workload.{f.name} has dtype {a.dtype}; allowed: {allowed}")
        # numba reads the bytes in this machine's order (a big-endian peak_eval indexed
        # out of bounds, big-endian times gave other results) and has no float16 or
        # longdouble type
        if not a.dtype.isnative:
            raise ConfigError(f"workload.{f.name} has dtype {a.dtype.str}, not in this "
                              f"machine's byte order; allowed: {allowed} in native byte order "
                              "(a.astype(a.dtype.newbyteorder('=')))")
        if a.dtype.kind == "f" and a.dtype.itemsize not in (4, 8):
            raise ConfigError(f"workload.{f.name} has dtype {a.dtype}; allowed: real numbers "
                              "of 32 or 64 bits")
    if w.job_type.ndim != 2 or w.gold.ndim != 3:
        raise ConfigError(f"workload.job_type has shape {w.job_type.shape} and workload.gold "
                          f"{w.gold.shape}; allowed: [clusters, jobs] and [clusters, jobs, "
                          "evaluations]")
    if w.n_evals != cfg.workload.n_evals:
        raise ConfigError(f"workload has {w.n_evals} evaluations, config says "
                          f"{cfg.workload.n_evals}")
    shape = (w.n_clusters, w.n_jobs)
    for f in fields(w):
        want = {"cluster_ids": shape[:1], "gold": (*shape, w.n_evals),
                "score": (*shape, w.n_evals), "loss": (*shape, w.n_evals)}.get(f.name, shape)
        if getattr(w, f.name).shape != want:
            raise ConfigError(f"workload.{f.name} has shape {getattr(w, f.name).shape}; "
                              f"allowed: {want}, as job_type and gold")


def run_engine(cfg: SimConfig, w: Workload, d: Decisions, max_segments: int = 0) -> Outcome:
    """Simulate the clusters of ``w`` under ``cfg``'s scheduler given the decisions ``d``."""
    check_workload(cfg, w)
    check_like(d, empty_decisions((w.n_clusters, w.n_jobs)), "decisions", "decide_stops(cfg, w)")
    return _run_engine(cfg, w, d, max_segments)


def _run_engine(cfg: SimConfig, w: Workload, d: Decisions, max_segments: int = 0) -> Outcome:
    shape = (w.n_clusters, w.n_jobs)
    end_service, demote_service, account_from = (np.empty(shape) for _ in range(3))
    service_points_nb(w.duration_h, d.stopped, d.demoted, d.trigger_eval, w.hacking, w.peak_eval,
                      w.n_evals, end_service, demote_service, account_from)
    o = empty_outcome(shape, max_segments)
    s = cfg.scheduler
    cluster_nb(s.code, s.backfill, np.asarray(s.thresholds_gpu_h, dtype=np.float64),
               float(cfg.workload.preempt_overhead_h), cfg.workload.gpus, w.gpus, w.arrival_h,
               static_keys(cfg, w), w.loss, w.duration_h, end_service, demote_service, account_from,
               o.start_h, o.end_h, o.held_h, o.held_after_h, o.n_preempt, o.seg_job,
               o.seg_start, o.seg_end, o.seg_count, o.n_points)
    _check_finished(cfg, w, o)
    return o


def _check_finished(cfg: SimConfig, w: Workload, o: Outcome) -> None:
    """``SimulationError`` naming the first cluster that hit the engine's bound."""
    stuck = np.flatnonzero(o.n_points < 0)
    if stuck.size:
        c = int(stuck[0])
        s = cfg.scheduler
        raise SimulationError(
            f"engine: cluster {int(w.cluster_ids[c])} reached the bound of "
            f"{max_points_nb(w.n_jobs, w.n_evals, len(s.thresholds_gpu_h))} scheduling points "
            f"without finishing its jobs ({stuck.size} of {w.n_clusters} clusters in this "
            f"chunk); its times are not finite at this scale (last arrival "
            f"{np.nanmax(w.arrival_h[c]):.3g} h, longest run time {np.nanmax(w.duration_h[c]):.3g} h)")


def static_keys(cfg: SimConfig, w: Workload) -> np.ndarray:
    """What the engine's static-key path (``sjf_est``) orders by: ``t_est_h`` for the
    built-ins, a user scheduler's keys (computed from arrival-time observations) for it.
    The engine reads ``t_est_h`` only through the scheduler's key, so this is the whole
    user-scheduler hook."""
    decl = cfg.scheduler.decl
    if decl.user is None:
        return w.t_est_h
    check_code(cfg.scheduler, "scheduler")
    keys, params = np.empty(w.t_est_h.shape), tuple(v for _, v in cfg.scheduler.params)
    driver, *words = _key_driver(cfg.scheduler)
    with R.calling(decl, "scheduler key"), user_call(driver, *words):
        driver(params, w.t_est_h, w.gpus, w.job_type, w.arrival_h, keys)
    if np.isnan(keys).any():  # the whole call (job's inputs, then parameters), to redo it
        c, j = np.argwhere(np.isnan(keys))[0]
        raise ConfigError(
            f"scheduler {decl.name} returned a NaN key {_at(cfg, w, c, j)}"
            f"{R.def_line(decl.user.py_func)}; allowed: numbers, inf")
    _check_integer_keys(cfg, keys, w)
    check_scheduler_key(decl, cfg.scheduler.params, w)
    return keys


def _at(cfg: SimConfig, w: Workload, c: int, j: int) -> str:
    """Where a user key's answer came from: the cluster, the job and the call."""
    return (f"for cluster {int(w.cluster_ids[c])}, job {j} "
            f"({key_call(w, c, j, cfg.scheduler.params).text})")


def _check_integer_keys(cfg: SimConfig, keys: np.ndarray, w: Workload) -> None:
    """The engine orders by float64 keys: integers beyond 2^53 collapse there (2^62 + 1 and
    2^62 + 2 are one float), so a key of them ran its jobs by arrival alone, silently."""
    if keys.size == 0 or not np.any(np.abs(keys[np.isfinite(keys)]) > 2.0**53):
        return
    c, j = np.unravel_index(int(np.argmax(np.where(np.isfinite(keys), np.abs(keys), 0))),
                            keys.shape)
    decl = cfg.scheduler.decl
    with user_code("scheduler key", decl.name):  # the job's own key, as the driver typed it
        one = decl.user(*key_call(w, c, j, cfg.scheduler.params).compiled)
    if isinstance(one, (int, np.integer)):
        raise ConfigError(f"scheduler {decl.name} returned the integer key {int(one)} "
                          f"{_at(cfg, w, c, j)}, beyond 2^53, where float64 keys no longer "
                          "order integers exactly; allowed: integer keys within +-2^53, or "
                          "float keys")


def run_workload(cfg: SimConfig, w: Workload, keep_jobs: bool = True,
                 record_segments: bool = False, seed: int | None = None) -> SimResult:
    """Run one cell on a given workload (generated, or built by hand).

    Parameters
    ----------
    cfg : the cell's configuration (its workload section must match ``w``'s shape).
    w : the clusters, e.g. from ``generate_workload``.
    keep_jobs : also return the per-job table (memory grows with clusters x jobs).
    record_segments : also return every run segment (for invariant tests; small runs).
    seed : the seed ``w`` was drawn with, if it was drawn (``generate_workload``): kept in
        the ``seed`` column, so that ``summarize`` refuses to pair it with other draws of
        the same cluster ids.  None (a workload built by hand): the column is null.
    """
    check_workload(cfg, w)
    check_flags(keep_jobs=keep_jobs, record_segments=record_segments)
    if seed is not None:
        check_counts(w.n_clusters, seed, 0)
    # the one-pass kernel only reads a given workload, but is compiled for drawing one in
    # place too: a read-only array (np.load's mmap_mode="r") was numba's TypingError
    frozen = {f.name: getattr(w, f.name).copy() for f in fields(w)
              if not getattr(w, f.name).flags.writeable}
    return _run(cfg, w.with_arrays(**frozen) if frozen else w, keep_jobs, record_segments, seed)


@dataclass
class _Buffers:
    """Every array one call of ``_run`` writes, for one shape ``(C, J, E, S)``."""

    shape: tuple[int, int, int, int]
    w: Workload
    d: Decisions
    service: tuple[np.ndarray, np.ndarray, np.ndarray]
    o: Outcome
    acc: Accounting
    in_use: bool = False  # by a ``_run`` of this thread that has not returned


# Buffers reused by the next call of the same shape in the same thread (a chunk loop):
# fresh arrays cost a page fault per 4 kB on first touch, a third of workload generation.
# Only up to this size, so one large call does not pin its memory for the process's life.
REUSE_MAX_BYTES = 256 * 2**20
_LOCAL = threading.local()


def _buffers(n_clusters: int, n_jobs: int, n_evals: int, max_segments: int,
             reuse: bool) -> _Buffers:
    """The arrays of one run, reused from this thread's previous run of the same shape when
    ``reuse`` (nothing returned earlier may share their memory: no per-job table), unless
    that run has not returned: a user metric or extract that calls ``simulate`` of the same
    shape overwrote the per-job arrays that the run's later metrics and extract read."""
    shape = (n_clusters, n_jobs, n_evals, max_segments)
    b = getattr(_LOCAL, "buffers", None)
    if reuse and b is not None and b.shape == shape and not b.in_use:
        return b
    cj = shape[:2]
    b = _Buffers(shape, allocate(*shape[:3]), empty_decisions(cj), tuple(np.empty(cj) for _ in range(3)),
                 empty_outcome(cj, max_segments), Accounting(np.empty(cj), np.empty(cj), np.empty(cj),
                                                        np.empty(cj, np.bool_)))
    if reuse and simulate_bytes(n_clusters, n_jobs, n_evals, False) <= REUSE_MAX_BYTES:
        _LOCAL.buffers = b
    return b


@contextmanager
def _held_buffers(shape: tuple[int, int, int, int], keep_jobs: bool) -> Iterator[_Buffers]:
    """``_buffers`` of ``shape`` (clusters, jobs, evaluations, segments), marked in use
    while the block runs: a ``simulate`` of the same shape in this thread meanwhile (a
    user metric's or extract's, or between the cells of ``simulate_cells``) takes fresh
    arrays instead of overwriting these."""
    b = _buffers(*shape, reuse=not keep_jobs)
    b.in_use = True
    try:
        yield b
    finally:
        b.in_use = False


def _shape(n_clusters: int, n_jobs: int, n_evals: int, record_segments: bool
           ) -> tuple[int, int, int, int]:
    """A run's buffer shape: its segments' bound only where they are recorded
    (preemptions are bounded by events)."""
    return n_clusters, n_jobs, n_evals, n_jobs * (2 * n_evals + 4) * 4 if record_segments else 0


def _run(cfg: SimConfig, w: Workload, keep_jobs: bool, record_segments: bool,
         seed: int | None = None) -> SimResult:
    """One cell on the workload ``w``: every stage in one pass over the clusters
    (``kernels.pipeline.pipeline_nb``), except a user stop policy's decisions and a user
    scheduler's keys, which run first as their own stages."""
    with _held_buffers(_shape(w.n_clusters, w.n_jobs, w.n_evals, record_segments),
                       keep_jobs) as b:
        return _run_on(b, cfg, w, keep_jobs, record_segments, 0, seed, 0, None, (False, False))


def _run_on(b: _Buffers, cfg: SimConfig, w: Workload | None, keep_jobs: bool,
            record_segments: bool, n_clusters: int, seed: int | None, cluster_start: int,
            extract: Callable | None, draws: tuple[bool, bool]) -> SimResult:
    """One cell, on the buffers ``b`` it holds, on the workload ``w``, or (``w`` None) on
    clusters ``cluster_start .. + n_clusters`` drawn with ``seed`` into ``b.w``, with the
    observed series ``draws`` (scores, losses).  ``w`` given: ``seed`` is what it was drawn
    with, only kept in the ``seed`` column (None: unknown)."""
    wc = cfg.workload
    C = n_clusters if w is None else w.n_clusters
    max_seg = b.shape[3]
    generate = w is None
    if generate:
        w = b.w
        w.cluster_ids[:] = np.arange(cluster_start, cluster_start + C, dtype=np.int64)
    s, p = cfg.scheduler, cfg.policy
    decide = _decides_in_pass(p)
    if generate and _read_outside(cfg):
        generate_workload(wc, C, seed, cluster_start, out=w, scheduler=s)
        generate = False
    d = b.d if decide else decide_stops(cfg, w)
    draw_score, draw_loss = draws
    o, acc = b.o, b.acc
    out = np.empty((N_METRICS, C))
    run_pipeline(s.code, C, generate, False, draw_score, draw_loss, kernel_params(wc),
                np.uint64(seed or 0), np.int64(cluster_start), decide, p.code, int(p.k), float(p.f),
                int(p.w), float(p.tol), p.scope == "all", bool(s.backfill),
                np.asarray(s.thresholds_gpu_h, dtype=np.float64), float(wc.preempt_overhead_h),
                wc.gpus, static_keys(cfg, w), pipeline_arrays(w),
                (d.in_scope, d.stopped, d.demoted, d.trigger_eval, d.delivered_eval), b.service,
                (o.start_h, o.end_h, o.held_h, o.held_after_h, o.n_preempt),
                (o.seg_job, o.seg_start, o.seg_end, o.seg_count, o.n_points),
                (acc.delivered_gold, acc.best_gold, acc.wasted_gpu_h, acc.positive), out)
    _check_finished(cfg, w, o)
    if generate:  # drawn by the one-pass kernel, which runs before its times are seen
        check_resolution(w, drawn=True)
    if record_segments and int(o.seg_count.max(initial=0)) > max_seg:
        raise RuntimeError("segment buffer overflow; raise max_segments")
    return _assemble(cfg, w, d, o, acc, out, keep_jobs, record_segments, extract, seed)


def _decides_in_pass(p: PolicyConfig) -> bool:
    """Whether the one-pass kernel decides ``p``'s stops.  An online detector decides in
    its own stage (``decide_stops``), like user code: the one-pass kernel then holds no
    detector, and a run that uses none never compiles one."""
    return p.decl.user is None and p.code < PATIENCE


def _read_outside(cfg: SimConfig) -> bool:
    """Whether code outside the one-pass kernel reads the workload (a user's stop policy
    or scheduler, an online detector): a run then draws its clusters first, in full
    (``generate_workload``)."""
    return not (_decides_in_pass(cfg.policy) and cfg.scheduler.decl.user is None)


def _draws(cfg: SimConfig) -> tuple[bool, bool]:
    """Whether a run of ``cfg`` that draws its clusters draws the scores and the loss
    readings: every series where code outside the one-pass kernel reads the workload
    (``_read_outside``); else those its decisions read (no result column holds a score
    or a loss).  Each draw has its own counter, so drawing a series changes no other
    value."""
    if _read_outside(cfg):
        return True, True
    return reads("scores", cfg.scheduler, cfg.policy), reads("losses", cfg.scheduler, cfg.policy)


def account(cfg: SimConfig, w: Workload, d: Decisions, o: Outcome) -> tuple[Accounting, np.ndarray]:
    """The metrics stage on its own: accounting ``[C, J]`` and ``out[N_METRICS, C]``
    (what ``pipeline_nb`` computes in its pass; for the stage-by-stage path)."""
    check_workload(cfg, w)
    shape = (w.n_clusters, w.n_jobs)
    check_like(d, empty_decisions(shape), "decisions", "decide_stops(cfg, w)")
    segments = o.seg_job.shape[1] if isinstance(o, Outcome) and o.seg_job.ndim == 2 else 0
    check_like(o, empty_outcome(shape, segments), "outcome", "run_engine(cfg, w, d)")
    return _account(cfg, w, d, o)


def _account(cfg: SimConfig, w: Workload, d: Decisions, o: Outcome
             ) -> tuple[Accounting, np.ndarray]:
    shape = (w.n_clusters, w.n_jobs)
    acc = Accounting(np.empty(shape), np.empty(shape), np.empty(shape), np.empty(shape, np.bool_))
    accounting_nb(w.gold, w.peak_eval, w.hacking, w.gpus, o.held_after_h, d.in_scope, d.stopped,
                  d.demoted, d.delivered_eval, acc.delivered_gold, acc.best_gold,
                  acc.wasted_gpu_h, acc.positive)
    out = np.empty((N_METRICS, w.n_clusters))
    cluster_metrics_nb(cfg.workload.gpus, w.n_evals, w.job_type, w.gpus, w.arrival_h, o.end_h,
                       o.held_h, acc.wasted_gpu_h, w.hacking, d.in_scope, acc.positive, d.stopped,
                       acc.delivered_gold, acc.best_gold, d.trigger_eval, w.peak_eval, out)
    return acc, out


def run_stages(cfg: SimConfig, w: Workload, keep_jobs: bool = True,
               record_segments: bool = False) -> SimResult:
    """``run_workload`` stage by stage (decisions, engine, metrics: one kernel each over
    all clusters).  Same results to the bit; kept to time the stages apart and to check
    the one-pass pipeline against."""
    check_workload(cfg, w)
    check_flags(keep_jobs=keep_jobs, record_segments=record_segments)
    d = _decide_stops(cfg, w)
    max_seg = w.n_jobs * (2 * w.n_evals + 4) * 4 if record_segments else 0
    o = _run_engine(cfg, w, d, max_seg)
    acc, out = _account(cfg, w, d, o)
    return _assemble(cfg, w, d, o, acc, out, keep_jobs, record_segments)


def check_run_args(cfg: SimConfig, n_clusters, seed, cluster_start) -> None:
    """The arguments of ``simulate``: integers (no bool, no float), in range."""
    if not isinstance(cfg, SimConfig):
        raise ConfigError(f"cfg={cfg!r} is invalid; allowed: a SimConfig")
    check_counts(n_clusters, seed, cluster_start)


@known_keywords("fastsim.simulate()")
def simulate(cfg: SimConfig, n_clusters: int, seed: int = 0, cluster_start: int = 0,
             keep_jobs: bool = False, record_segments: bool = False,
             extract: Callable[[Mapping[str, np.ndarray]], Any] | None = None) -> SimResult:
    """Draw clusters ``cluster_start ..`` with ``seed`` and run ``cfg`` on them.

    The same ``(seed, cluster)`` gives the same cluster under every scheduler and
    policy (common random numbers), in any chunking and thread count.  Bad arguments
    (a float or bool count, a seed outside ``[0, 2^64)``, a negative ``cluster_start``,
    more memory than available) raise ``ConfigError`` before anything is allocated.
    The first call of a scheduler on a machine compiles its kernels (10-40 s, said in one
    line on stderr); later calls load them from numba's cache.

    Parameters
    ----------
    cfg : SimConfig
        The cell: ``SimConfig.from_specs("srtf_est", "evalstop:k=2", n_jobs=60)``.
    n_clusters : int
        Independent clusters to simulate (``cfg.workload.gpus`` GPUs and ``n_jobs`` jobs
        each).
    seed : int, default 0
        The draws' seed, in ``[0, 2^64)``.
    cluster_start : int, default 0
        Id of the first cluster: ``simulate(cfg, 500, cluster_start=500)`` continues a run
        of 500.
    keep_jobs : bool, default False
        Also return the per-job table (memory grows with clusters x jobs).
    record_segments : bool, default False
        Also return every run segment (for invariant tests; small runs).
    extract : function, optional
        See below.

    Returns
    -------
    SimResult
        ``.clusters``: one row per cluster and metric column (units in ``SimResult``'s
        docstring); ``.jobs``, ``.segments``, ``.extract`` as asked.  ``summarize`` turns
        ``.clusters`` into estimates with 95% intervals; ``compare`` runs a baseline too.

    ``extract``: a function of the per-job arrays (the per-job table's columns as
    ``[C, J]`` arrays, ``job_type`` as codes, whose ``== "rlhf"`` raises as a metric's
    does), called once; its result is
    ``SimResult.extract``.  The arrays are read-only and valid during the call only
    (``simulate`` reuses them, and the per-job table shares them), so it keeps what it
    needs, small, computed or copied (a result holding one of them, or a view of one, is
    refused): a sweep's JCT histogram is one (``fastsim.sweep.extracts.jct_histogram``),
    without the per-job table.

    Examples
    --------
    >>> from fastsim.config import SimConfig
    >>> res = simulate(SimConfig.from_specs("fifo", "evalstop:k=2", n_jobs=20), 3, keep_jobs=True)
    >>> res.clusters.height, res.jobs.height, res.clusters["jct_mean_h"].dtype
    (3, 60, Float64)
    """
    check_run_args(cfg, n_clusters, seed, cluster_start)
    warn_inert(cfg, "simulate", jobs=keep_jobs or extract is not None)
    return _simulate(cfg, n_clusters, seed, cluster_start, keep_jobs, record_segments, extract)


def _simulate(cfg: SimConfig, n_clusters: int, seed: int = 0, cluster_start: int = 0,
              keep_jobs: bool = False, record_segments: bool = False,
              extract: Callable[[Mapping[str, np.ndarray]], Any] | None = None) -> SimResult:
    """``simulate``, its arguments checked, without its notes of inert settings
    (``compare`` says them of both arms)."""
    return next(simulate_cells([cfg], n_clusters, seed, cluster_start, keep_jobs,
                               record_segments, extract))[1]


def simulate_cells(cfgs: Sequence[SimConfig], n_clusters: int, seed: int = 0,
                   cluster_start: int = 0, keep_jobs: bool = False,
                   record_segments: bool = False, extract: Callable | None = None
                   ) -> Iterator[tuple[int, SimResult]]:
    """``(i, _simulate(cfgs[i], ...))`` for each cell, the results the same to the bit,
    with the clusters drawn once for all the cells whose workload sections are equal
    (the same ``(seed, cluster)`` is the same cluster under every scheduler and policy):
    the first of them draws, in its pass, every series any of them reads, and the others
    read those arrays.  A sweep's cells that differ only in scheduler or stop policy
    (``fastsim.sweep.runner.run_chunks``) and ``compare``'s two arms pay the workload once.
    Cells sharing a workload run one after another, in the order given; each result is
    yielded as it is made (a caller that writes it and lets it go holds one at a time)."""
    # as Python ints from here on: numpy's fixed-width ones would wrap in cluster id arithmetic
    n_clusters, seed, cluster_start = int(n_clusters), int(seed), int(cluster_start)
    check_flags(keep_jobs=keep_jobs, record_segments=record_segments)
    if extract is not None and not callable(extract):
        raise ConfigError(f"extract={extract!r} is invalid; allowed: None or a function of the "
                          "per-job arrays")
    same: dict[Any, list[int]] = {}
    for i, cfg in enumerate(cfgs):
        same.setdefault(same_clusters(cfg), []).append(i)
    for cells in same.values():
        wc = cfgs[cells[0]].workload
        check_fits(lambda n: simulate_bytes(n, wc.n_jobs, wc.n_evals, keep_jobs), n_clusters,
                   "n_clusters", f"n_jobs={wc.n_jobs}, n_evals={wc.n_evals}")
        draws = tuple(any(series) for series in zip(*(_draws(cfgs[i]) for i in cells)))
        shape = _shape(n_clusters, wc.n_jobs, wc.n_evals, record_segments)
        # held across the yields: a same-shape run between two cells takes other arrays
        with _held_buffers(shape, keep_jobs) as first:
            w = None
            for i in cells:
                # a per-job table shares its run's arrays: with keep_jobs, a cell's own
                b = first if w is None or not keep_jobs else _buffers(*shape, reuse=False)
                with first_run(cfgs[i].scheduler.code):
                    result = _run_on(b, cfgs[i], w, keep_jobs, record_segments, n_clusters,
                                     seed, cluster_start, extract, draws)
                w = first.w  # drawn there by the first cell
                yield i, result
                del result  # the caller's to keep: not held here while the next cell runs


def same_clusters(cfg: SimConfig) -> Any:
    """What makes two cells' clusters the same for a seed and cluster range: the workload
    section (``simulate_cells`` draws them once for the cells that share it)."""
    return cfg.workload


def warn_inert(cfg: SimConfig, what: str, baseline: PolicyConfig | None = None,
               jobs: bool = False) -> None:
    """One ``InertSettingWarning`` per workload setting, changed from its default, that no
    result depends on (``inert_settings``; ``jobs``: the per-job arrays are kept or read),
    and one for a ``baseline`` that is the policy itself (``self_baseline``);
    Python shows each once per calling line.  Not inside ``quiet()``: a sweep says its
    own, once, and the command line its own."""
    if is_quiet():
        return
    policies = {"policy": cfg.policy, "baseline": baseline}
    for name, why in inert_settings(cfg, baseline, jobs=jobs).items():
        value = policies[name].label if name in policies else getattr(cfg.workload, name)
        warnings.warn(f"fastsim.{what}(): {name}={value!r} has no effect: {why}",
                      InertSettingWarning, stacklevel=4)
    if (why := self_baseline(cfg.policy, baseline)) is not None:
        warnings.warn(f"fastsim.{what}(): {why}", InertSettingWarning, stacklevel=4)


@known_keywords("fastsim.compare()")
def compare(cfg: SimConfig, baseline: str | PolicyConfig = "none", n_clusters: int = 200,
            seed: int = 0, cluster_start: int = 0) -> pl.DataFrame:
    """``cfg`` against the same scheduler under ``baseline`` on the same clusters.

    Returns the summary table (``fastsim.summary.summarize``): one row per metric with
    ``metric, kind, mean, lo, hi, n``; ``kind`` is ``mean`` (over clusters, Student-t
    95% interval), ``pooled`` (precision, recall, FPR, delay: cluster bootstrap) or
    ``paired`` (``*_change``: per-cluster relative change against the baseline on
    identical clusters, t interval).  ``mean, lo, hi`` are in the metric's unit; shares,
    rates and changes are fractions (0.05 is 5%, as ``format_table`` prints it); ``n`` is
    the number of clusters behind the row.  ``fastsim.summary.format_table`` prints it.

    Examples
    --------
    >>> from fastsim.config import SimConfig
    >>> t = compare(SimConfig.from_specs("srtf_est", "evalstop:k=2", n_jobs=20), n_clusters=4)
    >>> t.filter(pl.col("metric") == "jct_mean_h_change")[["kind", "n"]].row(0)
    ('paired', 4)
    """
    from fastsim.summary import summarize

    check_run_args(cfg, n_clusters, seed, cluster_start)  # before with_policy reads cfg
    if not isinstance(baseline, PolicyConfig):  # checked before either arm runs
        # parse_baseline's "or false for no baseline" is not compare's: it needs two arms
        parsed = parse_baseline(baseline, "baseline") if isinstance(baseline, str) else None
        if parsed is None:
            shown = "off" if baseline is False or baseline == "off" else repr(baseline)
            raise ConfigError(f"baseline={shown} is invalid for compare; allowed: a stop policy "
                              "spec (\"none\", \"evalstop:k=3\", \"MODULE:FUNCTION\") or a "
                              "PolicyConfig; simulate runs one arm")
        baseline = parsed
    base_cfg = cfg.with_policy(baseline)
    warn_inert(cfg, "compare", baseline)  # of both arms, once
    (_, policy), (_, reference) = simulate_cells([cfg, base_cfg], n_clusters, seed,
                                                 cluster_start)
    return summarize(policy.clusters, reference.clusters)


def _assemble(cfg: SimConfig, w: Workload, d: Decisions, o: Outcome, acc: Accounting,
              out: np.ndarray, keep_jobs: bool, record_segments: bool,
              extract: Callable | None = None, seed: int | None = None) -> SimResult:
    """Kernel arrays -> Polars, in one place (``out[N_METRICS, C]``: one contiguous row
    per metric column).  ``seed``: what the clusters were drawn with, kept beside their
    ids, so that a baseline of other draws is not paired by id (``summarize``)."""
    int_cols = M.int_columns()
    cols = {"cluster": w.cluster_ids.copy(),
            "seed": pl.repeat(seed, w.n_clusters, dtype=pl.UInt64, eager=True)}
    for i, name in enumerate(METRIC_NAMES):
        cols[name] = out[i].astype(np.int64) if name in int_cols else out[i]
    if not (keep_jobs or cfg.metrics or extract):
        return SimResult(cfg, _frame(cols), None, _segments(w, o, record_segments))
    jct = o.end_h - w.arrival_h
    per_job = {  # [C, J] arrays: the jobs table's columns, and what user metrics read
        "job_type": w.job_type, "gpus": w.gpus, "arrival_h": w.arrival_h,
        "duration_h": w.duration_h, "t_est_h": w.t_est_h, "hacking": w.hacking,
        "peak_eval": w.peak_eval, "start_h": o.start_h, "end_h": o.end_h, "held_h": o.held_h,
        "jct_h": jct, "queue_h": jct - o.held_h, "stopped": d.stopped, "demoted": d.demoted,
        "positive": acc.positive, "in_scope": d.in_scope, "trigger_eval": d.trigger_eval,
        "delivered_eval": d.delivered_eval, "delivered_gold": acc.delivered_gold,
        "best_gold": acc.best_gold, "regret": acc.best_gold - acc.delivered_gold,
        "wasted_gpu_h": acc.wasted_gpu_h, "n_preemptions": o.n_preempt,
    }
    cols.update(M.user_columns(cfg.metrics, per_job))
    clusters = _frame(cols)
    jobs = None
    if keep_jobs:
        C, J = w.n_clusters, w.n_jobs
        flat = {k: v.ravel() for k, v in per_job.items()}
        # the labels gathered by code in Polars: a Series built from a numpy array of strings
        # costs 20 ms per 150,000 jobs, this 0.6 ms
        flat["job_type"] = pl.Series(JOB_TYPE_LABELS).gather(w.job_type.ravel())
        jobs = pl.DataFrame({"cluster": np.repeat(w.cluster_ids, J),
                             "job": np.tile(np.arange(J, dtype=np.int64), C), **flat})
    return SimResult(cfg, clusters, jobs, _segments(w, o, record_segments),
                     None if extract is None else _extract(extract, per_job))


EXTRACT_ALLOWED = "a function that reads the per-job arrays (read-only) and returns what it keeps"


def _extract(fn: Callable, per_job: dict[str, np.ndarray]) -> Any:
    """``fn`` over read-only views of the per-job arrays: the per-job table shares their
    memory, so an extract that sorted or scaled one in place changed the table returned
    beside it; a failure is one line naming it, as a user metric's is.  What it returns
    may not hold one of them, or a view of one (``_kept_view``)."""
    name = getattr(fn, "__name__", repr(fn))
    with user_code("extract", name, EXTRACT_ALLOWED):
        # job_type as a metric gets it: its == "rlhf" was False for every job, unsaid
        kept = fn(coded_view(per_job))
    if (found := _kept_view(kept, per_job)) is not None:
        raise ConfigError(f"extract {name} returned {found}, which the next simulate of this "
                          "shape overwrites; allowed: a copy (np.array(x)) or values computed "
                          "from the arrays")
    return kept


def _kept_view(value: Any, per_job: dict[str, np.ndarray], depth: int = 0) -> str | None:
    """Where ``value`` (an array, or a dict, list or tuple holding some, nested) holds the
    memory of a per-job array, in words; None if nowhere.  ``simulate`` reuses those
    arrays for its next call of the same shape in the thread: an extract that returned
    ``jobs["start_h"]`` (or a slice) read the next run's values afterwards, silently."""
    if isinstance(value, np.ndarray):
        hit = next((k for k, a in per_job.items() if np.may_share_memory(value, a)), None)
        return None if hit is None else f"a view of the per-job array {hit!r}"
    if depth < 4 and isinstance(value, (dict, list, tuple)):
        items = value.values() if isinstance(value, dict) else value
        return next((f for v in items if (f := _kept_view(v, per_job, depth + 1))), None)
    return None


def _frame(cols: dict[str, np.ndarray]) -> pl.DataFrame:
    """The frame of named 1-D arrays ``cols``, in their order.  Built from a list of Series:
    Polars' dict constructor inspects every value again, a third of the time of a call
    on a chunk of a few hundred clusters."""
    return pl.DataFrame([pl.Series(name, v) for name, v in cols.items()])


def _segments(w: Workload, o: Outcome, record: bool) -> pl.DataFrame | None:
    if not record:
        return None
    rows = [(int(w.cluster_ids[c]), int(o.seg_job[c, s]), float(o.seg_start[c, s]),
             float(o.seg_end[c, s]))
            for c in range(w.n_clusters) for s in range(int(o.seg_count[c]))]
    return pl.DataFrame(rows, schema=["cluster", "job", "start_h", "end_h"], orient="row")

