"""Upper bounds for the detector benchmark: what is reachable at all from the scores.

**Not detectors.**  Each bound below knows something no stop policy may know (MODEL.md
section 5), and so bounds what any detector over the same scores can reach:

* ``offline Bayes``: the Bayes classifier ``P(hacking | all scores)`` under the model's
  own generating distributions (curve family, the priors of ``u*``, height, per-job
  noise and AR(1) noise, the base rate) and the run length (where each evaluation sits
  in the run).  It sees every evaluation of the run at once.  An online detector's
  "fired or not" is also a function of the run's scores, so at a given precision no
  detector recalls more than thresholding this posterior does (up to sampling error).
* ``online Bayes``: the same posterior computed after each evaluation, firing at the
  first evaluation (from the third) where it passes a threshold: a sequential rule that
  still knows the run length and the priors.
* ``offline Bayes, run length unknown``: the offline posterior without the run length
  (uniform over ``E .. 3E`` evaluations): it knows the priors but not where in the run
  each evaluation sits, as an online rule at its last evaluation does not.
* ``noiseless peak``: sees the noise-free gold curve and fires when its highest
  evaluation is before the last ("the peak is inside the run").

Each threshold is chosen on the even-numbered clusters (highest recall with precision at
least the target there) and scored on the odd-numbered ones, so the reported precision and
recall are out of sample, with cluster-bootstrap intervals and their n.  The hidden truth
used here is the label (to score) and, for the noiseless oracle, the gold curve.
"""
from __future__ import annotations

import functools
import math
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
import polars as pl
from scipy.special import ndtr, ndtri

from fastsim.config import WorkloadConfig
from fastsim.kernels.codes import RLHF
from fastsim.stats import proportion_ci
from fastsim.workload import generate_workload
from fastsim.progress import progress_bar


def _shapes(cfg: WorkloadConfig, hacking: bool, n_ustar: int, n_run: int) -> np.ndarray:
    """Gold curves of height 1 at the evaluations ``[G, n_run]`` of a run of ``n_run``
    evaluations, one per ``u*`` on a midpoint grid of the class's uniform prior
    (MODEL.md section 4 with the curve knobs)."""
    u = np.arange(1, n_run + 1) / n_run
    lo, hi = cfg.ustar_hacking if hacking else cfg.ustar_healthy
    ustar = lo + (hi - lo) * (np.arange(n_ustar) + 0.5) / n_ustar
    gamma = cfg.kl_gamma * (cfg.hack_sharpness if hacking else 1.0)
    ln_x = gamma * (np.log(u)[None, :] - np.log(ustar)[:, None])
    return np.exp(ln_x) * (1.0 - ln_x)


def _whiten(x: np.ndarray, rho: float) -> np.ndarray:
    """AR(1) noise with coefficient ``rho`` turned into independent unit-variance noise."""
    if rho == 0.0:
        return x
    out = x.copy()
    out[..., 1:] = (x[..., 1:] - rho * x[..., :-1]) / math.sqrt(1.0 - rho * rho)
    return out


# jobs per block of ``log_marginal``: a block's arrays (ROWS x 720 floats, about 3 MB) are
# reused by the allocator, where the whole grid's were mapped and their pages faulted in
# afresh each time (docs/performance.md)
ROWS = 512


def log_marginal(score: np.ndarray, cfg: WorkloadConfig, hacking: bool, upto: int | None = None,
                 n_run: int | None = None, n_ustar: int = 60, n_sigma: int = 12) -> np.ndarray:
    """``log p(scores 1..upto | class)`` of each job ``[N]`` (up to a constant shared by
    both classes): ``u*`` on a grid, the height integrated exactly over its uniform prior
    (the score is linear in it), the per-job noise on ``n_sigma`` quantiles of its
    log-normal.  ``n_run``: the evaluations in the run (default ``cfg.n_evals``), which
    places each evaluation in the run.  The grid is integrated in blocks of ``ROWS`` jobs
    on numba's threads (NumPy and SciPy release the GIL): each job's row is the same
    arithmetic in any block on any thread, so the result does not depend on either."""
    n = score.shape[-1] if upto is None else upto
    r = _whiten(score[:, :n], cfg.noise_rho)
    q = _whiten(_shapes(cfg, hacking, n_ustar, n_run or cfg.n_evals)[:, :n], cfg.noise_rho)
    rr = (r * r).sum(1)[:, None]
    rq = r @ q.T
    qq = (q * q).sum(1)[None, :]
    h_hat = rq / qq
    s = cfg.sigma_spread
    quantiles = ndtri((np.arange(n_sigma) + 0.5) / n_sigma) if s > 0 else np.zeros(1)
    sigs = [max(cfg.sigma, 1e-6) * math.exp(s * zq - 0.5 * s * s) for zq in quantiles]
    # one block when there are no jobs: the reduction then refuses them, as it always did
    blocks = [slice(i, i + ROWS) for i in range(0, max(score.shape[0], 1), ROWS)]
    # a block's error or Ctrl-C leaves the queued blocks unrun: ``map``'s iterator cancels
    # them as it exits, so the pool's exit waits only for those already running
    with ThreadPoolExecutor(min(numba.get_num_threads(), len(blocks))) as pool:
        return np.concatenate(list(pool.map(
            lambda rows: _log_mean_likelihood(rr[rows], rq[rows], h_hat[rows], qq, n, sigs,
                                              cfg.height), blocks)))


def _log_mean_likelihood(rr: np.ndarray, rq: np.ndarray, h_hat: np.ndarray, qq: np.ndarray,
                         n: int, sigs: list[float], height: tuple[float, float]) -> np.ndarray:
    """``log_marginal`` of a block of jobs ``[B]`` from its sums (``rr [B, 1]``, ``rq`` and
    the least-squares height ``h_hat [B, G]``, ``qq [1, G]``): the likelihood's log-mean
    over the ``u*`` grid and the noise quantiles ``sigs``, the height ``height``'s uniform
    prior integrated exactly."""
    a, b = height
    # what does not depend on the noise level, once (the same values the loop used)
    to_b, to_a, misfit = b - h_hat, a - h_hat, -(rr - rq * h_hat)
    out = np.empty((rr.shape[0], qq.shape[1], len(sigs)))
    for i, sig in enumerate(sigs):
        sd = sig / np.sqrt(qq)  # posterior sd of the height
        mass = ndtr(to_b / sd) - ndtr(to_a / sd)
        out[:, :, i] = (misfit / (2 * sig * sig) - n * math.log(sig)
                        + np.log(np.maximum(mass, 1e-300)) + np.log(sd))
    out = out.reshape(rr.shape[0], -1)
    m = out.max(1, keepdims=True)
    return m[:, 0] + np.log(np.exp(out - m).mean(1))


def marginals(score: np.ndarray, cfg: WorkloadConfig, **grid: int):
    """``log_marginal`` of ``score`` under ``cfg`` as a function of ``(hacking, upto,
    n_run)`` that computes each grid once: the offline posterior is also the online one
    at the last evaluation and the unknown-run one's first term."""
    @functools.cache
    def once(hacking: bool, upto: int, n_run: int) -> np.ndarray:
        return log_marginal(score, cfg, hacking, upto, n_run, **grid)
    return lambda hacking, upto=None, n_run=None: once(
        hacking, score.shape[-1] if upto is None else upto, n_run or cfg.n_evals)


def _posterior(log_hacking: np.ndarray, log_healthy: np.ndarray, cfg: WorkloadConfig) -> np.ndarray:
    prior = math.log(cfg.base_rate) - math.log1p(-cfg.base_rate)
    return 1.0 / (1.0 + np.exp(-(log_hacking - log_healthy + prior)))


def bayes_posterior(score: np.ndarray, cfg: WorkloadConfig, upto: int | None = None,
                    marginal=None, **grid: int) -> np.ndarray:
    """``P(hacking | scores 1..upto)`` of each RLHF job ``[N, E]`` under ``cfg``'s model
    (a bound, not a detector: see the module docstring); ``grid``: ``log_marginal``'s
    ``n_ustar`` and ``n_sigma``; ``marginal``: a ``marginals`` of the same score, to share
    its grids."""
    lm = marginal or marginals(score, cfg, **grid)
    return _posterior(lm(True, upto), lm(False, upto), cfg)


def bayes_posterior_unknown_run(score: np.ndarray, cfg: WorkloadConfig, factor: int = 3,
                                marginal=None) -> np.ndarray:
    """``bayes_posterior`` after all ``E`` evaluations without knowing that they are all,
    so without knowing where in the run each sits: the run length uniform over
    ``E .. factor E`` evaluations (what an online rule knows at its ``E``-th evaluation,
    with the model's priors)."""
    lm = marginal or marginals(score, cfg)
    runs = range(cfg.n_evals, factor * cfg.n_evals + 1)
    lh = np.logaddexp.reduce([lm(True, n_run=m) for m in runs], axis=0)
    lo = np.logaddexp.reduce([lm(False, n_run=m) for m in runs], axis=0)
    return _posterior(lh, lo, cfg)


def threshold_at_precision(stat: np.ndarray, hacking: np.ndarray, target: float) -> float:
    """Lowest threshold on ``stat`` (fire when ``stat >= t``) whose precision is at least
    ``target``: the highest recall at that precision (``inf`` when none reaches it)."""
    order = np.argsort(-stat, kind="stable")
    h = hacking[order]
    tp = np.cumsum(h)
    ok = tp / np.arange(1, h.size + 1) >= target
    return float(stat[order][np.flatnonzero(ok).max()]) if ok.any() else np.inf


RULES = {"offline Bayes": "P(hacking given all scores) >= a threshold",
         "online Bayes": "P(hacking given the scores so far) >= a threshold, from evaluation 3",
         "offline Bayes, run length unknown": "as offline Bayes, the run length uniform over "
         "E..3E evaluations",
         "noiseless peak": "the noise-free gold peaks before the last evaluation"}


def _scored(name: str, sigma: float, fire: np.ndarray, hacking: np.ndarray, cluster: np.ndarray,
            test: np.ndarray, target: float) -> dict:
    """Precision, recall and FPR of ``fire`` on the test clusters, pooled with
    cluster-bootstrap intervals."""
    row = {"bound": name, "rule": RULES[name], "sigma": sigma, "precision_target": target}
    ids = np.unique(cluster[test])
    per = lambda x: np.bincount(np.searchsorted(ids, cluster[test]), x[test].astype(float), ids.size)
    tp, fp = per(fire & hacking), per(fire & ~hacking)
    for metric, est in (("precision", proportion_ci(tp, tp + fp)),
                        ("recall", proportion_ci(tp, per(hacking))),
                        ("fpr", proportion_ci(fp, per(~hacking)))):
        row[metric], row[f"{metric}_lo"], row[f"{metric}_hi"] = est.mean, est.lo, est.hi
    row["n_clusters"] = int(ids.size)
    row["n_jobs"] = int(test.sum())
    return row


def bounds(sigmas, n_clusters: int = 50, seed: int = 0, target: float = 0.95,
           progress: bool = False, **workload) -> pl.DataFrame:
    """One row per noise level and bound (base rate 0.6 unless ``workload`` says):
    out-of-sample precision, recall and FPR at the threshold that reaches ``target``
    precision on the other half of the clusters.  ``progress``: a bar over the noise
    levels on stderr (lines, in a log)."""
    rows = []
    for sigma in progress_bar(sigmas, unit="noise level", desc="bounds", leave=False,
                              enabled=progress, dynamic_ncols=True):
        cfg = WorkloadConfig(sigma=float(sigma), **workload)
        w = generate_workload(cfg, n_clusters, seed)
        scope = w.job_type == RLHF
        score, hacking = w.score[scope], w.hacking[scope]
        cluster = np.broadcast_to(w.cluster_ids[:, None], scope.shape)[scope]
        train, test = cluster % 2 == 0, cluster % 2 == 1
        lm = marginals(score, cfg)
        offline = bayes_posterior(score, cfg, marginal=lm)
        thr = threshold_at_precision(offline[train], hacking[train], target)
        rows.append(_scored("offline Bayes", sigma, offline >= thr, hacking, cluster, test, target))
        # online: the running maximum of the posterior over evaluations 3..E fires first
        online = np.max([bayes_posterior(score, cfg, e, lm) for e in range(3, cfg.n_evals + 1)], axis=0)
        thr = threshold_at_precision(online[train], hacking[train], target)
        rows.append(_scored("online Bayes", sigma, online >= thr, hacking, cluster, test, target))
        unknown = bayes_posterior_unknown_run(score, cfg, marginal=lm)
        thr = threshold_at_precision(unknown[train], hacking[train], target)
        rows.append(_scored("offline Bayes, run length unknown", sigma, unknown >= thr, hacking,
                            cluster, test, target))
        gold = w.gold[scope]
        inside = gold.argmax(1) < gold.shape[1] - 1
        rows.append(_scored("noiseless peak", sigma, inside, hacking, cluster, test, target))
    return pl.DataFrame(rows)
