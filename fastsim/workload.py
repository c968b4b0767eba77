"""Workload arrays: built once per chunk of clusters, struct-of-arrays ``[cluster, job]``.

``Workload`` separates what the platform *observes* (type, demand, arrival, estimate,
evaluation scores, loss readings) from the *hidden truth* (run time, hacking label,
curve parameters, gold curve, peak evaluation); ``observed()`` and ``hidden()`` name
the split that the information-boundary test relies on.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from functools import lru_cache

import numpy as np

from fastsim.arrays import HIDDEN, OBSERVED, empty_decisions, empty_outcome
from fastsim.config import SchedulerConfig, WorkloadConfig
from fastsim.errors import ConfigError
from fastsim.memory import SURELY_FITS, check_fits, scratch_bytes, workload_bytes
from fastsim.values import MAX_CLUSTER, check_seed, is_integer
from fastsim.kernels.metrics import N_METRICS
from fastsim.kernels.pipeline import run_pipeline
from fastsim.kernels.workload import WorkloadParams


@dataclass
class Workload:
    """Jobs of ``C`` clusters x ``J`` jobs with ``E`` evaluations each.

    Arrays are ``[C, J]`` except ``gold``, ``score`` and ``loss`` (``[C, J, E]``).
    ``cluster_ids[c]`` is the global cluster number of row ``c`` (its random draws).
    """

    cluster_ids: np.ndarray
    job_type: np.ndarray
    gpus: np.ndarray
    arrival_h: np.ndarray
    duration_h: np.ndarray
    t_est_h: np.ndarray
    hacking: np.ndarray
    ustar: np.ndarray
    height: np.ndarray
    tau: np.ndarray
    loss0: np.ndarray
    loss_inf: np.ndarray
    loss_tau: np.ndarray
    gold: np.ndarray
    score: np.ndarray
    loss: np.ndarray
    peak_eval: np.ndarray

    @property
    def n_clusters(self) -> int:
        return int(self.job_type.shape[0])

    @property
    def n_jobs(self) -> int:
        return int(self.job_type.shape[1])

    @property
    def n_evals(self) -> int:
        return int(self.gold.shape[2])

    def observed(self) -> dict[str, np.ndarray]:
        return {k: getattr(self, k) for k in OBSERVED}

    def hidden(self) -> dict[str, np.ndarray]:
        return {k: getattr(self, k) for k in HIDDEN}

    def with_arrays(self, **arrays: np.ndarray) -> "Workload":
        """A copy with some arrays replaced (used by tests and hand-built scenarios)."""
        return replace(self, **arrays)

    def take(self, rows) -> "Workload":
        """The clusters at ``rows`` (row indices, not global cluster numbers)."""
        return Workload(**{f.name: getattr(self, f.name)[rows] for f in fields(self)})


@lru_cache(maxsize=64)
def kernel_params(cfg: WorkloadConfig) -> WorkloadParams:
    """The kernels' view of ``cfg`` (arrays and floats, which no kernel writes), built once
    per config: building it costs about as much as simulating a cluster."""
    demands = (cfg.demands_lora, cfg.demands_dpo, cfg.demands_rlhf)
    width = max(len(d) for d in demands)
    dem = np.zeros((3, width), dtype=np.int32)
    for t, d in enumerate(demands):
        dem[t, : len(d)] = d
    cum = np.cumsum(np.asarray(cfg.mix_fractions, dtype=np.float64))
    pair = lambda v: np.asarray(v, dtype=np.float64)  # noqa: E731
    return WorkloadParams(
        cum_mix=cum, demands=dem, n_demands=np.array([len(d) for d in demands], dtype=np.int64),
        median_h=np.array(cfg.medians_h, dtype=np.float64),
        log_sd=float(cfg.log_sd), est_sigma=float(cfg.est_sigma), base_rate=float(cfg.base_rate),
        dpo_base_rate=float(cfg.dpo_base_rate), ustar_hacking=pair(cfg.ustar_hacking),
        ustar_healthy=pair(cfg.ustar_healthy), height=pair(cfg.height), tau=pair(cfg.tau),
        loss0=pair(cfg.loss0), loss_inf=pair(cfg.loss_inf), loss_tau=pair(cfg.loss_tau),
        sigma=float(cfg.sigma), loss_sigma=float(cfg.loss_sigma),
        arrival_rate=float(cfg.arrival_rate()), kl_gamma=float(cfg.kl_gamma),
        hack_sharpness=float(cfg.hack_sharpness),
        sigma_spread=float(cfg.sigma_spread), noise_rho=float(cfg.noise_rho),
    )


def allocate(n_clusters: int, n_jobs: int, n_evals: int) -> Workload:
    """Uninitialised arrays for a workload; the only place their dtypes are chosen."""
    cj = (n_clusters, n_jobs)
    cje = (n_clusters, n_jobs, n_evals)
    f = lambda shape: np.empty(shape, dtype=np.float64)  # noqa: E731
    return Workload(
        cluster_ids=np.arange(n_clusters, dtype=np.int64),
        job_type=np.empty(cj, dtype=np.int8), gpus=np.empty(cj, dtype=np.int32),
        arrival_h=f(cj), duration_h=f(cj), t_est_h=f(cj), hacking=np.empty(cj, dtype=np.bool_),
        ustar=f(cj), height=f(cj), tau=f(cj), loss0=f(cj), loss_inf=f(cj), loss_tau=f(cj),
        gold=f(cje), score=f(cje), loss=f(cje), peak_eval=np.empty(cj, dtype=np.int32),
    )


def check_out(out: Workload, shape: tuple[int, int, int]) -> None:
    """``out`` holds every array ``allocate(*shape)`` would, of its dtype and shape: the
    kernel writes each one without bounds checks (a gpus of one row for two clusters was
    written past its end, into other memory)."""
    if not isinstance(out, Workload):
        raise ConfigError(f"out={type(out).__name__} is invalid; allowed: a Workload (allocate)")
    C, J, E = shape
    ref = allocate(0, 0, 0)
    for f in fields(out):
        a, want = getattr(out, f.name), getattr(ref, f.name)
        need = (C,) if f.name == "cluster_ids" else (C, J, E) if want.ndim == 3 else (C, J)
        if not isinstance(a, np.ndarray) or a.dtype != want.dtype or a.shape != need \
                or not a.flags.c_contiguous or not a.flags.writeable:
            got = (f"{a.dtype} {a.shape}" if isinstance(a, np.ndarray) else type(a).__name__)
            raise ConfigError(f"out.{f.name} is {got}; allowed: a writable C-contiguous "
                              f"{want.dtype} array of shape {need}, as allocate{shape} makes")


def generate_workload(cfg: WorkloadConfig, n_clusters: int, seed: int = 0,
                      cluster_start: int = 0, out: Workload | None = None,
                      scheduler: SchedulerConfig | None = None) -> Workload:
    """Draw clusters ``cluster_start .. cluster_start + n_clusters - 1``.

    Cluster ``i``'s jobs are the same whatever chunk it is drawn in, so a sweep may split
    clusters any way it likes.

    ``out``: a workload of the same shape whose arrays are overwritten instead of
    allocating new ones. Fresh arrays cost about a third of generation time in page
    faults on first touch; a loop over chunks can reuse one buffer, provided nothing
    it produced earlier (e.g. a per-job DataFrame, which may share memory with these
    arrays) is still in use.

    ``scheduler``: the scheduler a later run on these clusters uses (default: the default
    scheduler).  The draws are the same whatever it is; generation runs in the compiled
    simulation kernel of that scheduler, so a first run compiles one kernel, not two.

    Examples
    --------
    >>> from fastsim.config import WorkloadConfig
    >>> w = generate_workload(WorkloadConfig(n_jobs=5), n_clusters=2, seed=1)
    >>> w.gold.shape == (2, 5, WorkloadConfig().n_evals)  # [cluster, job, evaluation]
    True
    """
    if not isinstance(cfg, WorkloadConfig):
        raise ConfigError(f"cfg={cfg!r} is invalid; allowed: a WorkloadConfig")
    if not (scheduler is None or isinstance(scheduler, SchedulerConfig)):
        raise ConfigError(f"scheduler={scheduler!r} is invalid; allowed: None or a "
                          "SchedulerConfig")
    check_counts(n_clusters, seed, cluster_start)
    n_clusters, seed, cluster_start = int(n_clusters), int(seed), int(cluster_start)
    J, E = cfg.n_jobs, cfg.n_evals

    def need(n: int) -> int:  # the arrays drawn into, unless given; the scratch, per thread
        return workload_bytes(n, J, E) * (out is None) + scratch_bytes(n, J, E)

    if need(n_clusters) > SURELY_FITS:  # a million clusters was numpy's MemoryError
        check_fits(need, n_clusters, "n_clusters", f"n_jobs={J}, n_evals={E}")
    if out is None:
        w = allocate(n_clusters, J, E)
    else:
        check_out(out, (n_clusters, cfg.n_jobs, cfg.n_evals))
        w = out
    w.cluster_ids[:] = np.arange(cluster_start, cluster_start + n_clusters, dtype=np.int64)
    generate_into(cfg, w, seed, cluster_start, (scheduler or SchedulerConfig()).code)
    check_resolution(w, drawn=True)
    return w


def check_counts(n_clusters, seed, cluster_start) -> None:
    """Which clusters to draw (``simulate``, ``generate_workload``): integers (no bool, no
    float: seed=1.5 drew seed 1's clusters), in range."""
    # compared as Python ints: a numpy scalar (np.int32(3)) compared with 2^63-1 raises
    # OverflowError under numpy's scalar promotion rules, instead of being checked
    if not is_integer(n_clusters) or not 1 <= int(n_clusters) <= MAX_CLUSTER:
        raise ConfigError(f"n_clusters={n_clusters!r} is invalid; allowed: an integer from 1 "
                          "to 2^63-1 (cluster ids are 64-bit counters)")
    check_seed(seed)
    if not is_integer(cluster_start) or not 0 <= int(cluster_start) <= MAX_CLUSTER - int(n_clusters):
        raise ConfigError(f"cluster_start={cluster_start!r} is invalid; allowed: an integer "
                          f"from 0 to 2^63-1-n_clusters")


# A run time must stay a run time on the engine's float64 clock: one below the clock's
# resolution where the job runs vanished (1e-300 h at arrival 1e6 h: JCT 0.0, exit 0).
# 2^-32 of the cluster's time scale keeps its run time to 2^-20 (six digits).
RESOLUTION = 2.0**-32


def _unresolved(w: Workload) -> tuple[int, int, float] | None:
    """(cluster row, job, the row's time scale) of the first run time below ``RESOLUTION``
    of its row's time scale, or None."""
    if w.n_jobs == 0:
        return None
    arr, dur = w.arrival_h, w.duration_h
    # every time the engine reaches in a row is at most this large in magnitude (arrivals
    # are in order along a row: drawn so, and checked so in a built workload)
    with np.errstate(over="ignore"):  # an overflowing row is left to the engine (below)
        scale = np.maximum(arr[:, -1], -arr[:, 0]) + dur.sum(axis=1)
    # a row whose times overflow has no clock to resolve: the engine's bound on scheduling
    # points stops it, naming the cluster (tests/test_engine_bound.py)
    low = np.isfinite(scale) & (dur.min(axis=1) < scale * RESOLUTION)
    if not low.any():
        return None
    c = int(np.argmax(low))
    return c, int(np.argmin(dur[c])), float(scale[c])


def check_resolution(w: Workload, drawn: bool = False) -> None:
    """``ConfigError`` naming the first run time too small for its cluster's clock: of a
    built workload, by its row and job; of a ``drawn`` one, in its settings' words
    (``WorkloadConfig`` bounds the arrival span alone, so settings it lets through, a
    shortest median of 0.001 h beside RLHF runs of 1e4 h that queue, could still draw a
    cluster whose run times sum beyond what its shortest run resolves against)."""
    bad = _unresolved(w)
    if bad is None:
        return
    c, j, scale = bad
    if drawn:
        raise ConfigError(f"workload: cluster {int(w.cluster_ids[c])} drew a run time of "
                          f"{float(w.duration_h[c, j]):.3g} h, below 2^-32 of its time scale "
                          f"({scale:.6g} h: its largest arrival plus all run times); allowed: "
                          "settings whose runs the float64 clock keeps to six digits: a "
                          "longer shortest median, shorter long ones, a smaller log_sd or "
                          "fewer jobs")
    raise ConfigError(f"workload.duration_h at cluster row {c}, job {j} is "
                      f"{float(w.duration_h[c, j])!r}; allowed: at least 2^-32 of the "
                      f"cluster row's time scale (its largest arrival plus all run times, "
                      f"{scale:.6g} h: >= {scale * RESOLUTION:.3g} h), so the float64 "
                      "clock keeps a run time to six digits")


def pipeline_arrays(w: Workload) -> tuple[np.ndarray, ...]:
    """The arrays of ``w`` in the order ``pipeline_nb`` takes them."""
    return (w.job_type, w.gpus, w.arrival_h, w.duration_h, w.t_est_h, w.hacking, w.ustar,
            w.height, w.tau, w.loss0, w.loss_inf, w.loss_tau, w.gold, w.score, w.loss,
            w.peak_eval)


def generate_into(wc: WorkloadConfig, w: Workload, seed: int, cluster_start: int,
                  scheduler: int) -> None:
    """Draw ``w``'s clusters (``fastsim.workload.generate_workload``) with the
    ``pipeline_nb`` of ``scheduler`` (a code) stopping after generation, so that
    generation and ``simulate`` share one compiled kernel.  The arguments after the
    workload's are unused: empty arrays and zeros of the types ``fastsim.api`` passes, so that
    the call matches its compiled signature."""
    d, o = empty_decisions((0, 0)), empty_outcome((0, 0), 0)
    none = np.empty((0, 0))
    run_pipeline(scheduler, w.n_clusters, True, True, True, True, kernel_params(wc),
                np.uint64(seed), np.int64(cluster_start), False, 0, 0, 0.0, 0, 0.0, False, False,
                np.empty(0), 0.0, 0, w.t_est_h, pipeline_arrays(w),
                (d.in_scope, d.stopped, d.demoted, d.trigger_eval, d.delivered_eval),
                (none, none, none), (o.start_h, o.end_h, o.held_h, o.held_after_h, o.n_preempt),
                (o.seg_job, o.seg_start, o.seg_end, o.seg_count, o.n_points),
                (none, none, none, np.empty((0, 0), np.bool_)), np.empty((N_METRICS, 0)))
