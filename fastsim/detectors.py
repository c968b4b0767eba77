"""Detector benchmark: online detectors applied to the observed scores of generated jobs.

Cheap by design: a job's evaluation scores, and hence any detector's decision, do not
depend on the schedule (docs/model.md), and a job holds ``gpus x T`` GPU-hours over its
run whatever the schedule (no resume overhead by default), so detection rates, delay,
the GPU-hours a stop frees and the delivered gold follow from the workload alone, without
the engine.  Hidden truth (label, duration, gold) is used here to *score* decisions,
never to make them: each setting is a stop policy of ``fastsim.registry`` decided by the
simulator's decision driver, which gets the observed scores and the scope only.

Each detector's default at evaluation noise ``sigma`` is ``default_params`` (the rule of
docs/detectors.md, "Setting the parameters from the noise level"); ``sigma0`` is the noise
the user expects, the detectors refine it from each job's own residuals.
"""
from __future__ import annotations

import itertools

import numpy as np
import polars as pl

from fastsim import defaults as D
from fastsim import registry as R
from fastsim.config import PolicyConfig, WorkloadConfig
from fastsim.errors import ConfigError
from fastsim.stats import (Estimate, bootstrap_ratio_ci, cluster_mean_ci, cluster_sums, mcnemar_p,
                           mean_ci, proportion_ci)
from fastsim.workload import generate_workload
from fastsim.kernels.codes import LORA, RLHF
from fastsim.kernels.stops import resolve_stops_nb
from fastsim.progress import progress_bar

# EvalStop and every online detector declared in fastsim.registry: a setting of the
# benchmark is a stop policy, decided by the simulator's own decision driver.
DETECTORS = ("evalstop",) + tuple(d.name for d in R.BUILTIN_POLICIES if d.vector)
# the columns of a traces table ``trace_arrays`` reads (and ``seed`` where there is one)
TRACE_COLUMNS = ("job_id", "step", "score", "truth_gold", "truth_hacking")


def default_params(name: str, sigma: float) -> dict[str, float]:
    """Each detector's default at evaluation noise ``sigma`` (docs/detectors.md): its
    declared defaults (``fastsim.defaults.DETECTORS``) with ``sigma0 = sigma``, and the peak
    test's ``z`` by the noise (``D.PEAK_Z_HIGH_NOISE`` from ``D.PEAK_HIGH_NOISE`` on); the
    other knobs are in units of the noise already (``z``, ``h``, ``drift``)."""
    d = R.lookup("policy", name)
    out = {p.name: p.default for p in d.params if p.name != "scope"}
    out = {k: (float(sigma) if k == "sigma0" else v) for k, v in out.items()}
    if name == "peak" and sigma >= D.PEAK_HIGH_NOISE:
        out["z"] = D.PEAK_Z_HIGH_NOISE
    return out


def spec(name: str, params: dict[str, float]) -> str:
    """The policy spec of a setting, e.g. ``cusum:drift=0.0,h=2.0,sigma0=0.05``."""
    return f"{name}:" + ",".join(f"{k}={v}" for k, v in params.items()) if params else name


def policy(name: str, params: dict[str, float]) -> PolicyConfig:
    """A setting as the stop policy it is (validated by its declaration).  ``scope`` is
    not a setting's: which runs a detector watches is ``triggers``' ``in_scope`` (every
    trace run, the RLHF jobs of a synthetic cluster), so a setting's ``scope = "all"`` was
    read by nothing (and its label raised a ValueError, formatting the word as a number)."""
    if isinstance(params, dict) and "scope" in params:
        names = R.lookup("policy", name).param_names
        others = ", ".join(k for k in names if k != "scope") or "none"
        raise ConfigError("policy parameter 'scope' is not a detector setting's (the runs it "
                          "watches are the comparison's: every trace run, a synthetic "
                          f"cluster's RLHF jobs); allowed: {others}")
    return PolicyConfig.of(name, params)


def label(name: str, params: dict[str, float], sigma: float | None = None) -> str:
    """``name(k=v,...)``; ``sigma0`` is shown only when it is not the cell's noise."""
    shown = ",".join(f"{k}={v:.3g}" for k, v in params.items()
                     if k != "sigma0" or (sigma is not None and v != sigma))
    return f"{name}({shown})"


def triggers(name: str, params: dict[str, float], score: np.ndarray, in_scope: np.ndarray):
    """``(trigger_eval, delivered_eval)`` ``[C, J]`` of detector ``name`` over ``score``
    ``[C, J, E]``, by the simulator's decision driver (``kernels.stops.resolve_stops_nb``,
    as ``fastsim.api.decide_stops`` calls it); jobs out of ``in_scope`` never trigger."""
    p = policy(name, params)
    score = np.ascontiguousarray(score, dtype=np.float64)
    shape = np.shape(in_scope)
    if score.ndim != 3 or shape != score.shape[:2]:
        # the driver trusts them: a scope of more jobs than the scores have read past them
        # (a job of 10 evaluations triggered at evaluation 32), a 2-D score was a numba
        # TypingError of forty lines
        raise ConfigError(f"triggers(): score has shape {score.shape} and in_scope "
                          f"{shape}; allowed: score [clusters, jobs, evaluations] and "
                          "in_scope [clusters, jobs] of the same clusters and jobs")
    job_type = np.where(in_scope, RLHF, LORA).astype(np.int8)
    ones = np.ones(shape)
    flags = [np.empty(shape, np.bool_) for _ in range(3)]
    trig, deliv = np.empty(shape, np.int32), np.empty(shape, np.int32)
    resolve_stops_nb(p.code, p.k, float(p.f), p.w, float(p.tol), np.array(p.vector, np.float64),
                     False, job_type, ones, score, np.zeros(score.shape), ones, *flags, trig, deliv)
    return trig.astype(np.int64), deliv.astype(np.int64)


def cluster_counts(w, trig: np.ndarray, deliv: np.ndarray) -> dict[str, np.ndarray]:
    """Per-cluster detection counts, freed GPU-hours and delivered gold regret."""
    n = w.n_evals
    scope = w.job_type == RLHF
    hack = w.hacking & scope
    healthy = scope & ~w.hacking
    pos = trig > 0
    freed = np.where(pos, w.gpus * w.duration_h * (n - trig) / n, 0.0)  # 0 at completion
    c, j = np.indices(deliv.shape)
    gold_deliv = w.gold[c, j, deliv - 1]
    best = w.gold.max(axis=2)
    tp = pos & hack
    return {
        "tp": (tp).sum(1), "fp": (pos & healthy).sum(1),
        "fn": (~pos & hack).sum(1), "tn": (~pos & healthy).sum(1),
        "stop_tp": (tp & (trig < n)).sum(1), "stop_fp": (pos & healthy & (trig < n)).sum(1),
        "at_completion": (pos & scope & (trig == n)).sum(1),
        "delay": np.where(tp, trig - w.peak_eval, 0).sum(1),
        "reclaimed_gpu_h": np.where(hack, freed, 0.0).sum(1),
        "lost_gpu_h": np.where(healthy, freed, 0.0).sum(1),
        "regret": np.where(scope, best - gold_deliv, 0.0).sum(1), "n_scope": scope.sum(1),
        "hacking_gpu_h": np.where(hack, w.gpus * w.duration_h, 0.0).sum(1),
    }


def delay_ci(delay_sum, tp, n_evals: int | None) -> Estimate:
    """Mean delay (evaluations from the gold peak to the trigger) of ``delay_sum / tp``
    per replication.  Signed, never cut at 0: a detector can fire before the peak.  Cut to
    ``[1 - n_evals, n_evals - 1]``, the delays a run of ``n_evals`` can have: a t interval
    over a few seeds reached past (4.25 [-25.9, 34.4] on 21 evaluations)."""
    est = bootstrap_ratio_ci(delay_sum, tp, signed=True)
    return est if n_evals is None else est.within(1.0 - n_evals, n_evals - 1.0)


def summarize(counts: dict[str, np.ndarray], base: dict[str, np.ndarray] | None = None,
              n_evals: int | None = None) -> dict:
    """Rates with cluster-bootstrap/exact intervals, per-cluster means with t intervals,
    and (given the EvalStop(k=2) counts of the same clusters) paired differences.
    ``n_evals``: evaluations per job, which bound the delay (``delay_ci``)."""
    c = counts
    out = {
        "precision": proportion_ci(c["tp"], c["tp"] + c["fp"]),
        "recall": proportion_ci(c["tp"], c["tp"] + c["fn"]),
        "stop_recall": proportion_ci(c["stop_tp"], c["tp"] + c["fn"]),
        "fpr": proportion_ci(c["fp"], c["fp"] + c["tn"]),
        "stop_fpr": proportion_ci(c["stop_fp"], c["fp"] + c["tn"]),
        "delay_evals": delay_ci(c["delay"], c["tp"], n_evals),
        # GPU-hours are >= 0: a t interval of a few clusters reached below, and is cut
        # there as fastsim run's are
        "reclaimed_gpu_h": mean_ci(c["reclaimed_gpu_h"]).within(0.0, np.inf),
        "lost_gpu_h": mean_ci(c["lost_gpu_h"]).within(0.0, np.inf),
        "regret": bootstrap_ratio_ci(c["regret"], c["n_scope"]),
    }
    if base is not None:
        out["d_reclaimed_gpu_h"] = mean_ci(c["reclaimed_gpu_h"] - base["reclaimed_gpu_h"])
        out["d_fp"] = mean_ci(c["fp"] - base["fp"])
    return out


def run_grid(sigmas, base_rates, settings, n_clusters: int = 200, seed: int = 0,
             progress: bool = False, **workload) -> pl.DataFrame:
    """One row per (sigma, base rate, detector setting): every metric's estimate,
    95% interval and n.  ``settings``: a function ``sigma -> [(name, params), ...]``.
    ``progress``: a bar over the (sigma, base rate) cells on stderr (lines, in a log)."""
    rows = []
    cells = list(itertools.product(sigmas, base_rates))
    for sigma, br in progress_bar(cells, unit="cell", desc="detectors", leave=False,
                                  enabled=progress, dynamic_ncols=True):
        cfg = WorkloadConfig(sigma=float(sigma), base_rate=float(br), **workload)
        w = generate_workload(cfg, n_clusters, seed)
        scope = w.job_type == RLHF
        base = cluster_counts(w, *triggers("evalstop", {"k": 2}, w.score, scope))
        for name, params in settings(sigma):
            cnt = cluster_counts(w, *triggers(name, params, w.score, scope))
            row = {"sigma": float(sigma), "base_rate": float(br), "detector": name,
                   "setting": label(name, params, sigma), "n_clusters": n_clusters,
                   "n_evals": cfg.n_evals}
            for metric, est in summarize(cnt, base, cfg.n_evals).items():
                row[metric] = est.mean
                row[f"{metric}_lo"] = est.lo
                row[f"{metric}_hi"] = est.hi
            row["n_hacking"] = int((cnt["tp"] + cnt["fn"]).sum())
            row["n_healthy"] = int((cnt["fp"] + cnt["tn"]).sum())
            rows.append(row)
    return pl.DataFrame(rows)


def trace_arrays(traces: pl.DataFrame):
    """Per-run arrays of a traces table (``fastsim traces toy-rlhf``): observed
    ``score`` ``[R, E]`` and, for scoring only, ``steps``, exact ``gold``, the label and
    the run seed (runs of one seed share their random draws: the unit of replication).
    A table whose runs differ in length, or any other a command refuses, is one
    ``ConfigError`` naming the run (``replay.traces.check_trace_table``): runs of 3 and 5
    evaluations, 8 rows, passed as two of 4, each row holding parts of both runs."""
    from fastsim.replay.traces import check_trace_table  # here: only traces pay for it

    check_trace_table(traces, "trace_arrays(): traces", [*TRACE_COLUMNS, *(
        ["seed"] if "seed" in traces.columns else [])], equal_evals=True)
    t = traces.sort(["job_id", "step"])
    n_runs = t["job_id"].n_unique()
    n_evals = t.height // n_runs
    shape = (n_runs, n_evals)
    hacking = t["truth_hacking"].to_numpy().reshape(shape)[:, 0]
    # without a seed column nothing says which runs share draws: each run is its own
    seed = t["seed"].to_numpy().reshape(shape)[:, 0] if "seed" in t.columns else np.arange(n_runs)
    return {"seed": seed, "score": t["score"].to_numpy().reshape(shape).astype(np.float64),
            "step": t["step"].to_numpy().reshape(shape), "gold": t["truth_gold"].to_numpy().reshape(shape),
            "hacking": hacking.astype(bool)}


def trace_row(arrays, name: str, params: dict[str, float]) -> dict:
    """Detection on real traces.  A seed is one replication: the runs of one seed share
    their comparison pool and every draw of the policy (``fastsim.replay.traces``), so
    intervals resample seeds (``fastsim.stats.cluster_sums``), n = the seeds."""
    score = arrays["score"]
    n_runs, n = score.shape
    trig, deliv = triggers(name, params, score[None], np.ones((1, n_runs), np.bool_))
    trig, deliv = trig[0], deliv[0]
    hack = arrays["hacking"]
    pos = trig > 0
    last = arrays["step"][:, -1].astype(np.float64)
    stop_step = np.where(pos, arrays["step"][np.arange(n_runs), np.maximum(trig, 1) - 1], last)
    gold = arrays["gold"]
    regret = gold.max(axis=1) - gold[np.arange(n_runs), deliv - 1]
    peak = gold.argmax(axis=1) + 1
    tp, fp = (pos & hack).astype(float), (pos & ~hack).astype(float)
    seed = arrays.get("seed", np.arange(n_runs))  # no seeds known: each run its own (trace_arrays)
    per_seed = lambda *x: cluster_sums(seed, *x)  # noqa: E731
    rates = {
        "precision": proportion_ci(*per_seed(tp, tp + fp)),
        "recall": proportion_ci(*per_seed(tp, hack)),
        "stop_recall": proportion_ci(*per_seed(tp * (trig < n), hack)),
        "fpr": proportion_ci(*per_seed(fp, ~hack)),
        "stop_fpr": proportion_ci(*per_seed(fp * (trig < n), ~hack)),
        "delay_evals": delay_ci(*per_seed(np.where(tp > 0, trig - peak, 0), tp), n),
        "compute_saved": bootstrap_ratio_ci(*per_seed((last - stop_step) / last, np.ones(n_runs)),
                                            share=True),
        "regret": cluster_mean_ci(regret, seed, signed=False),
    }
    es = triggers("evalstop", {"k": 2}, score[None], np.ones((1, n_runs), np.bool_))[0][0] > 0
    healthy = ~hack
    # differences of two 0/1 outcomes lie in [-1, 1]: a t interval over a few seeds reached past
    rates["d_fpr"] = cluster_mean_ci(pos[healthy].astype(float) - es[healthy],
                                     seed[healthy]).within(-1.0, 1.0)
    rates["d_recall"] = cluster_mean_ci(pos[hack].astype(float) - es[hack],
                                        seed[hack]).within(-1.0, 1.0)
    fpr_p = mcnemar_p(pos[healthy], es[healthy])
    row = {"detector": name, "setting": label(name, params, params.get("sigma0")), "n_runs": n_runs,
           "n_seeds": int(np.unique(seed).size), "n_hacking": int(hack.sum()), "n_evals": n}
    for metric, est in rates.items():
        row[metric], row[f"{metric}_lo"], row[f"{metric}_hi"] = est.mean, est.lo, est.hi
    row["d_fpr_p"] = fpr_p
    return row
