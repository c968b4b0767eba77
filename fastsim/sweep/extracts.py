"""Small per-job extracts that figures need, so figures never touch per-job data.

* ``jct_histogram``: counts of job completion times on fixed log-spaced bins, per job
  group, taken from ``simulate``'s per-job arrays (an ``extract``), with the sums over
  clusters that the pooled CDF's pointwise interval needs.  Integer sums add exactly
  across chunks, so the merged histogram does not depend on chunking or on a resume,
  and it stays a few kB for any number of clusters.
* ``trajectories``: a handful of example RLHF jobs (noise-free proxy reward, loss and
  gold on a fine progress grid; observed evaluation scores and loss readings; the
  policy's trigger and delivered checkpoint), computed from the workload arrays with
  the model's curve functions.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Iterable, Mapping

import numpy as np
import polars as pl

from fastsim.api import JOB_TYPE_LABELS, run_workload
from fastsim.config import SimConfig
from fastsim.workload import generate_workload
from fastsim.kernels.codes import RLHF
from fastsim.kernels.curves import gold_rl_curved_nb, loss_nb, proxy_reward_nb
from fastsim.kernels.metrics import jct_counts_nb
from fastsim.stats import pooled_cdf_band

# Bin edges (hours): 0, then 40 log-spaced bins per decade from 0.01 h to 10^4 h, then inf.
JCT_EDGES_H = np.concatenate([[0.0], np.logspace(-2, 4, 6 * 40 + 1), [np.inf]])
JCT_GROUPS = ("all",) + JOB_TYPE_LABELS


# A chunk's histogram: every bin of every group, so that summing chunks adds each bin's
# sums over clusters (``jct_counts_nb``) as they are; its size does not depend on the chunk.
JCT_SCHEMA = {"group": pl.String, "bin": pl.Int32, "count": pl.Int64, "a_sq": pl.Int64,
              "a_n": pl.Int64, "clusters": pl.Int64, "n_sum": pl.Int64, "n_sq": pl.Int64}
SUMMED = [c for c in JCT_SCHEMA if c not in ("group", "bin")]


def jct_histogram(per_job: Mapping[str, np.ndarray]) -> pl.DataFrame:
    """``group, bin, count`` of the jobs' ``jct_h`` on ``JCT_EDGES_H``, from the per-job
    arrays ``simulate`` hands an ``extract`` (``jct_h`` and the ``job_type`` codes, ``[C,
    J]``): no per-job table is built.  Beside the counts, the sums over clusters that the
    pooled CDF's interval needs (``a_sq``, ``a_n``: per bin; ``clusters``, ``n_sum``,
    ``n_sq``: per group, on each of its rows; ``kernels.metrics.jct_counts_nb``)."""
    n_groups, n_bins = len(JCT_GROUPS), len(JCT_EDGES_H) - 1
    counts = np.zeros((n_groups, n_bins), dtype=np.int64)
    spread = np.zeros((n_groups, n_bins, 2), dtype=np.int64)
    sizes = np.zeros((n_groups, 3), dtype=np.int64)
    jct_counts_nb(per_job["jct_h"], per_job["job_type"], JCT_EDGES_H, counts, spread, sizes)
    each = np.repeat(sizes, n_bins, axis=0)
    return pl.DataFrame({"group": np.repeat(np.array(JCT_GROUPS), n_bins),
                         "bin": np.tile(np.arange(n_bins, dtype=np.int32), n_groups),
                         "count": counts.ravel(), "a_sq": spread[..., 0].ravel(),
                         "a_n": spread[..., 1].ravel(), "clusters": each[:, 0],
                         "n_sum": each[:, 1], "n_sq": each[:, 2]}, schema=JCT_SCHEMA)


MERGE_BATCH = 64  # chunk histograms held at once while merging


def _sum_counts(frames: list[pl.DataFrame]) -> pl.DataFrame:
    return pl.concat(frames).group_by(["group", "bin"]).agg(pl.col(SUMMED).sum())


def merge_histograms(frames: Iterable[pl.DataFrame]) -> pl.DataFrame:
    """Sum chunk histograms; add the bin edges in hours and the pooled CDF at each bin's
    upper edge with its pointwise 95% interval over clusters (``cdf``, ``cdf_lo``,
    ``cdf_hi``; ``clusters``: those with a job of the group; ``stats.pooled_cdf_band``).
    Groups with no job are left out.

    ``frames`` may be a generator: it is summed ``MERGE_BATCH`` frames at a time into a
    running total, so memory is that of one batch whatever the number of chunks (a
    million-cluster cell has 2,000).  Integer sums: the same total in any grouping."""
    total: list[pl.DataFrame] = []
    batch: list[pl.DataFrame] = []
    for f in frames:
        batch.append(f)
        if len(batch) == MERGE_BATCH:
            total, batch = [_sum_counts(total + batch)], []
    h = (_sum_counts(total + batch).filter(pl.col("n_sum") > 0)
         .sort(pl.col("group").replace_strict({g: i for i, g in enumerate(JCT_GROUPS)}), "bin"))
    b = h["bin"].to_numpy()
    s_a = h.select(pl.col("count").cum_sum().over("group"))["count"].to_numpy()
    cdf, lo, hi = pooled_cdf_band(h["clusters"].to_numpy(), s_a,
                                  *(h[c].to_numpy() for c in ("n_sum", "a_sq", "a_n", "n_sq")))
    return h.select("group", "bin", "count", "clusters").with_columns(
        pl.Series("bin_lo_h", JCT_EDGES_H[b]), pl.Series("bin_hi_h", JCT_EDGES_H[b + 1]),
        pl.Series("cdf", cdf), pl.Series("cdf_lo", lo), pl.Series("cdf_hi", hi))


def trajectories(cfg: SimConfig, seed: int = 0, n_clusters: int = 4, n_points: int = 201
                 ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Example RLHF jobs under ``cfg``'s stop policy: one per outcome that occurs in the
    first ``n_clusters`` clusters (true positive, true negative, false positive, false
    negative), the first of each in job order; for a positive, the first stopped before
    its last evaluation where there is one (a trigger there is the job's completion and
    frees no GPU: MODEL.md section 7).

    Returns ``(jobs, points)``: ``jobs`` one row per example (role, cluster, job, hidden
    truth, trigger and delivered evaluation); ``points`` the curves, ``kind`` = ``curve``
    (noise-free, on ``n_points`` progress values) or ``eval`` (observed, at ``u_e``).
    """
    w = generate_workload(cfg.workload, n_clusters, seed, scheduler=cfg.scheduler)
    # the stops as the one-pass kernel of the sweeps decides them (``decide_stops`` gives
    # the same, in a kernel of its own that a first run compiled for 9 CPU-seconds more)
    jobs = run_workload(cfg, w).jobs
    d = SimpleNamespace(**{k: jobs[k].to_numpy().reshape(w.n_clusters, w.n_jobs)
                           for k in ("stopped", "trigger_eval", "delivered_eval")})
    E = w.n_evals
    roles = {"true positive": lambda c, j: w.hacking[c, j] and d.stopped[c, j],
             "true negative": lambda c, j: not w.hacking[c, j] and not d.stopped[c, j],
             "false positive": lambda c, j: not w.hacking[c, j] and d.stopped[c, j],
             "false negative": lambda c, j: w.hacking[c, j] and not d.stopped[c, j]}
    picks: list[tuple[str, int, int]] = []
    for role, test in roles.items():
        found = [(c, j) for c in range(w.n_clusters) for j in range(w.n_jobs)
                 if w.job_type[c, j] == RLHF and test(c, j)]
        early = [(c, j) for c, j in found if d.stopped[c, j] and d.trigger_eval[c, j] < E]
        if found:
            picks.append((role, *(early or found)[0]))
    job_rows, frames = [], []
    u_fine = np.linspace(0.0, 1.0, n_points)
    u_eval = np.arange(1, E + 1) / E
    for role, c, j in picks:
        us, h = float(w.ustar[c, j]), float(w.height[c, j])
        wc = cfg.workload  # d = sqrt(KL) ~ u^gamma; hacking gold Gao's form in (d/d*)^m
        gam = wc.kl_gamma * (wc.hack_sharpness if w.hacking[c, j] else 1.0)
        l0, li, lt = float(w.loss0[c, j]), float(w.loss_inf[c, j]), float(w.loss_tau[c, j])
        job_rows.append({
            "role": role, "cluster": int(w.cluster_ids[c]), "job": j, "hacking": bool(w.hacking[c, j]),
            "ustar": us, "height": h, "duration_h": float(w.duration_h[c, j]),
            "peak_eval": int(w.peak_eval[c, j]), "stopped": bool(d.stopped[c, j]),
            "trigger_eval": int(d.trigger_eval[c, j]), "delivered_eval": int(d.delivered_eval[c, j]),
            "n_evals": E, "policy": cfg.policy.label, "sigma": cfg.workload.sigma,
        })
        frames.append(pl.DataFrame({
            "role": role, "kind": "curve", "u": u_fine,
            "proxy": [proxy_reward_nb(u, us, h, wc.kl_gamma) for u in u_fine],
            "gold": [gold_rl_curved_nb(u, us, h, gam) for u in u_fine],
            "loss": [loss_nb(u, l0, li, lt) for u in u_fine],
        }))
        frames.append(pl.DataFrame({
            "role": role, "kind": "eval", "u": u_eval,
            "proxy": [proxy_reward_nb(u, us, h, wc.kl_gamma) for u in u_eval],
            "gold": w.gold[c, j].astype(np.float64), "loss": w.loss[c, j].astype(np.float64),
            "score": w.score[c, j].astype(np.float64),
        }))
    points = pl.concat(frames, how="diagonal") if frames else pl.DataFrame()
    return pl.DataFrame(job_rows), points
