"""Detector benchmark: online detectors applied to the observed scores of generated jobs.

Cheap by design: a job's evaluation scores, and hence any detector's decision, do not
depend on the schedule (docs/model.md), and a job holds ``gpus x T`` GPU-hours over its
run whatever the schedule (no resume overhead by default), so detection rates, delay,
the GPU-hours a stop frees and the delivered gold follow from the workload alone, without
the engine.  Hidden truth (label, duration, gold) is used here to *score* decisions,
never to make them: ``kernels.detectors_online.detector_triggers_nb`` gets the observed
scores and the scope only.

Each detector's parameters are set from the evaluation noise ``sigma`` by the rule in
``default_params`` (docs/detectors.md); ``sigma0`` is the noise the user expects, the
detectors refine it from each job's own residuals.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from fastsim.config import WorkloadConfig
from fastsim.stats import bootstrap_ratio_ci, mcnemar_p, mean_ci, proportion_ci
from fastsim.workload import generate_workload
from fastsim.kernels import detectors_online as K
from fastsim.kernels.codes import RLHF


@dataclass(frozen=True)
class Detector:
    """A detector's name, kernel code and parameter names (in the kernel's order)."""

    name: str
    code: int
    params: tuple[str, ...]


DETECTORS = {
    "evalstop": Detector("evalstop", K.EVALSTOP_K, ("k",)),
    "patience": Detector("patience", K.PATIENCE, ("patience", "threshold")),
    "margin": Detector("margin", K.MARGIN, ("k", "z", "sigma0")),
    "cusum": Detector("cusum", K.CUSUM, ("drift", "h", "sigma0")),
    "peak": Detector("peak", K.PEAK, ("z", "sigma0", "min_evals", "origin", "window", "gamma")),
    "bocpd": Detector("bocpd", K.BOCPD, ("hazard", "z", "sigma0", "prior_sd")),
}


def default_params(name: str, sigma: float) -> dict[str, float]:
    """Each detector's default at evaluation noise ``sigma`` (docs/detectors.md): the noise
    enters as ``sigma0``; the other knobs are in units of the noise already (``z``, ``h``,
    ``drift``) and were chosen on the synthetic grid of ``fastsim detectors``."""
    return {
        "evalstop": {"k": 2},
        "patience": {"patience": 2, "threshold": 0.0},
        "margin": {"k": 1, "z": 2.0, "sigma0": sigma},
        "cusum": {"drift": 0.0, "h": 2.0, "sigma0": sigma},
        "peak": {"z": 1.65, "sigma0": sigma, "min_evals": 4, "origin": 0, "window": 0,
                 "gamma": 0.5},
        "bocpd": {"hazard": 0.2, "z": 0.5, "sigma0": sigma, "prior_sd": 0.1},
    }[name]


def label(name: str, params: dict[str, float], sigma: float | None = None) -> str:
    """``name(k=v,...)``; ``sigma0`` is shown only when it is not the cell's noise."""
    shown = ",".join(f"{k}={v:.3g}" for k, v in params.items()
                     if k != "sigma0" or (sigma is not None and v != sigma))
    return f"{name}({shown})"


def triggers(name: str, params: dict[str, float], score: np.ndarray, in_scope: np.ndarray):
    """``(trigger_eval, delivered_eval)`` ``[C, J]`` of detector ``name`` over ``score``."""
    det = DETECTORS[name]
    p = np.zeros(8)
    p[: len(det.params)] = [float(params[k]) for k in det.params]
    trig = np.empty(in_scope.shape, np.int64)
    deliv = np.empty(in_scope.shape, np.int64)
    K.detector_triggers_nb(det.code, p, score, in_scope, trig, deliv)
    return trig, deliv


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
        "stop_tp": (tp & (trig < n)).sum(1), "at_completion": (pos & scope & (trig == n)).sum(1),
        "delay": np.where(tp, trig - w.peak_eval, 0).sum(1),
        "reclaimed_gpu_h": np.where(hack, freed, 0.0).sum(1),
        "lost_gpu_h": np.where(healthy, freed, 0.0).sum(1),
        "regret": np.where(scope, best - gold_deliv, 0.0).sum(1), "n_scope": scope.sum(1),
        "hacking_gpu_h": np.where(hack, w.gpus * w.duration_h, 0.0).sum(1),
    }


def summarize(counts: dict[str, np.ndarray], base: dict[str, np.ndarray] | None = None) -> dict:
    """Rates with cluster-bootstrap/exact intervals, per-cluster means with t intervals,
    and (given the EvalStop(k=2) counts of the same clusters) paired differences."""
    c = counts
    out = {
        "precision": proportion_ci(c["tp"], c["tp"] + c["fp"]),
        "recall": proportion_ci(c["tp"], c["tp"] + c["fn"]),
        "stop_recall": proportion_ci(c["stop_tp"], c["tp"] + c["fn"]),
        "fpr": proportion_ci(c["fp"], c["fp"] + c["tn"]),
        "delay_evals": bootstrap_ratio_ci(c["delay"], c["tp"]),
        "reclaimed_gpu_h": mean_ci(c["reclaimed_gpu_h"]),
        "lost_gpu_h": mean_ci(c["lost_gpu_h"]),
        "regret": bootstrap_ratio_ci(c["regret"], c["n_scope"]),
    }
    if base is not None:
        out["d_reclaimed_gpu_h"] = mean_ci(c["reclaimed_gpu_h"] - base["reclaimed_gpu_h"])
        out["d_fp"] = mean_ci(c["fp"] - base["fp"])
    return out


def run_grid(sigmas, base_rates, settings, n_clusters: int = 200, seed: int = 0,
             **workload) -> pl.DataFrame:
    """One row per (sigma, base rate, detector setting): every metric's estimate,
    95% interval and n.  ``settings``: a function ``sigma -> [(name, params), ...]``."""
    rows = []
    for sigma in sigmas:
        for br in base_rates:
            cfg = WorkloadConfig(sigma=float(sigma), base_rate=float(br), **workload)
            w = generate_workload(cfg, n_clusters, seed)
            scope = w.job_type == RLHF
            base = cluster_counts(w, *triggers("evalstop", {"k": 2}, w.score, scope))
            for name, params in settings(sigma):
                cnt = cluster_counts(w, *triggers(name, params, w.score, scope))
                row = {"sigma": float(sigma), "base_rate": float(br), "detector": name,
                       "setting": label(name, params, sigma), "n_clusters": n_clusters,
                       "n_evals": cfg.n_evals}
                for metric, est in summarize(cnt, base).items():
                    row[metric] = est.mean
                    row[f"{metric}_lo"] = est.lo
                    row[f"{metric}_hi"] = est.hi
                row["n_hacking"] = int((cnt["tp"] + cnt["fn"]).sum())
                row["n_healthy"] = int((cnt["fp"] + cnt["tn"]).sum())
                rows.append(row)
    return pl.DataFrame(rows)


def trace_arrays(traces: pl.DataFrame):
    """Per-run arrays of a traces table (``fastsim traces toy-rlhf``): observed
    ``score`` ``[R, E]`` and, for scoring only, ``steps``, exact ``gold`` and the label."""
    t = traces.sort(["job_id", "step"])
    runs = t["job_id"].unique(maintain_order=True)
    n_runs = runs.len()
    n_evals = t.height // n_runs
    if n_runs * n_evals != t.height:
        raise ValueError("every run of the traces must have the same number of evaluations")
    shape = (n_runs, n_evals)
    hacking = t["truth_hacking"].to_numpy().reshape(shape)[:, 0]
    return {"score": t["score"].to_numpy().reshape(shape).astype(np.float64),
            "step": t["step"].to_numpy().reshape(shape), "gold": t["truth_gold"].to_numpy().reshape(shape),
            "hacking": hacking.astype(bool)}


def trace_row(arrays, name: str, params: dict[str, float]) -> dict:
    """Detection on real traces: one run is one replication (run-bootstrap intervals)."""
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
    one = np.ones(n_runs)
    tp, fp = (pos & hack).astype(float), (pos & ~hack).astype(float)
    rates = {
        "precision": proportion_ci(tp, tp + fp),
        "recall": proportion_ci(tp, hack.astype(float)),
        "stop_recall": proportion_ci(tp * (trig < n), hack.astype(float)),
        "fpr": proportion_ci(fp, (~hack).astype(float)),
        "delay_evals": bootstrap_ratio_ci(np.where(tp > 0, trig - peak, 0), tp),
        "compute_saved": bootstrap_ratio_ci((last - stop_step) / last, one),
        "regret": bootstrap_ratio_ci(regret, one),
    }
    es = triggers("evalstop", {"k": 2}, score[None], np.ones((1, n_runs), np.bool_))[0][0] > 0
    healthy = ~hack
    rates["d_fpr"] = mean_ci((pos[healthy].astype(float) - es[healthy].astype(float)))
    rates["d_recall"] = mean_ci((pos[hack].astype(float) - es[hack].astype(float)))
    fpr_p = mcnemar_p(pos[healthy], es[healthy])
    row = {"detector": name, "setting": label(name, params, params.get("sigma0")), "n_runs": n_runs,
           "n_hacking": int(hack.sum()), "n_evals": n}
    for metric, est in rates.items():
        row[metric], row[f"{metric}_lo"], row[f"{metric}_hi"] = est.mean, est.lo, est.hi
    row["d_fpr_p"] = fpr_p
    return row


_STEP = {
    "evalstop": None,
    "patience": (lambda n, p: np.array([np.nan, 0.0]), K.patience_step_nb),
    "margin": (lambda n, p: K.margin_init(n), K.margin_step_nb),
    "cusum": (lambda n, p: K.cusum_init(n), K.cusum_step_nb),
    "peak": (lambda n, p: K.peak_init(n, int(p["window"])), K.peak_step_nb),
    "bocpd": (lambda n, p: K.bocpd_init(n), K.bocpd_step_nb),
}


class StreamingDetector:
    """One job's detector, fed one evaluation score at a time (live training loops).

    The state is the kernel's (a few numbers; ``bocpd`` keeps ``max_runs`` run lengths and
    merges longer ones).  ``update`` returns True from the evaluation at which the
    detector fires; ``best_eval`` is the 1-based evaluation with the highest score so far
    (the checkpoint to keep).

    Examples
    --------
    >>> d = StreamingDetector("cusum", drift=0.0, h=2.0, sigma0=0.01)
    >>> [d.update(s) for s in (0.2, 0.4, 0.5, 0.45, 0.41)]
    [False, False, False, True, True]
    >>> d.best_eval
    3
    """

    def __init__(self, name: str, max_runs: int = 64, **params: float):
        if name not in _STEP or _STEP[name] is None:
            raise ValueError(f"detector={name!r}; allowed: {', '.join(k for k, v in _STEP.items() if v)}")
        det = DETECTORS[name]
        missing = set(det.params) - set(params)
        if missing or set(params) - set(det.params):
            raise ValueError(f"{name} takes exactly the parameters {', '.join(det.params)}")
        init, self._step = _STEP[name]
        self._args = tuple(float(params[k]) for k in det.params if k != "window")
        self._state = init(max_runs, params)
        self.n_evals = 0
        self.fired_at = 0
        self.best_eval = 0
        self._best = -np.inf

    def update(self, score: float) -> bool:
        self.n_evals += 1
        if score > self._best:
            self._best, self.best_eval = score, self.n_evals
        if not self.fired_at and self._step(self._state, float(score), *self._args):
            self.fired_at = self.n_evals
        return self.fired_at > 0
