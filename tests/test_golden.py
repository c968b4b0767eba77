"""Tiny scenarios worked out by hand, asserted to the number on the engine and on the
reference simulator.  All times are dyadic rationals, so every expected value is exact.

Each scenario is one cluster built with ``fastsim.workload.allocate``; evaluation ``e``
of a job with run time ``T`` happens when its attained service reaches ``e * T / E``.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

from fastsim.config import PolicyConfig, SchedulerConfig, SimConfig, WorkloadConfig
from fastsim.workload import allocate
from fastsim.kernels.codes import DPO, LORA, RLHF

sys.path.insert(0, str(Path(__file__).parent))
from reference import jobs_of, reference_cluster_metrics, reference_simulate  # noqa: E402

BACKENDS = ("reference", "engine")


def make_workload(jobs: list[dict], n_evals: int):
    """A one-cluster workload from hand-chosen jobs.  Each job: type, gpus, arrival, T,
    T_est, and optionally hacking, gold [E], score [E] (default: gold), loss [E]."""
    J, E = len(jobs), n_evals
    w = allocate(1, J, E)
    rising = np.linspace(0.1, 0.5, E)
    for j, d in enumerate(jobs):
        w.job_type[0, j] = d["type"]
        w.gpus[0, j] = d["gpus"]
        w.arrival_h[0, j] = d["arrival"]
        w.duration_h[0, j] = d["T"]
        w.t_est_h[0, j] = d["T_est"]
        w.hacking[0, j] = d.get("hacking", False)
        w.ustar[0, j] = math.nan
        w.height[0, j] = w.tau[0, j] = 0.5
        w.loss0[0, j], w.loss_inf[0, j], w.loss_tau[0, j] = 2.0, 0.5, 0.05
        gold = np.asarray(d.get("gold", rising), dtype=float)
        w.gold[0, j] = gold
        w.score[0, j] = np.asarray(d.get("score", gold), dtype=float)
        w.loss[0, j] = np.asarray(d.get("loss", np.linspace(2.0, 1.0, E)), dtype=float)
        w.peak_eval[0, j] = int(np.argmax(gold)) + 1  # first maximiser, 1-based
    return w


def config(jobs, n_evals, scheduler="fifo", policy="none", gpus=8, overhead=0.0):
    wc = WorkloadConfig(gpus=gpus, n_jobs=len(jobs), n_evals=n_evals,
                        demands_lora=(1, 2), demands_dpo=(2, 4), demands_rlhf=(4, 8),
                        preempt_overhead_h=overhead)
    return SimConfig(wc, SchedulerConfig.parse(scheduler), PolicyConfig.parse(policy))


def run(backend, cfg, w):
    """Per-job rows (list of dicts, by job) and the cluster's metrics (dict)."""
    if backend == "reference":
        jobs = jobs_of(w, 0)
        rows = reference_simulate(cfg, jobs).jobs
        return rows, reference_cluster_metrics(cfg, jobs, rows)
    from fastsim.api import run_workload
    res = run_workload(cfg, w, keep_jobs=True)
    rows = res.jobs.sort("job").to_dicts()
    clusters = res.clusters.to_dicts()
    assert len(clusters) == 1
    return rows, clusters[0]


def check(rows, expected: dict[str, list]):
    for col, values in expected.items():
        got = [r[col] for r in rows]
        assert got == pytest.approx(values, rel=1e-12, abs=1e-12), col


def check_metrics(m, expected: dict):
    # Evaluations at e * T / E are not always dyadic, so sums may be off by an ulp.
    for name, value in expected.items():
        if isinstance(value, float) and math.isnan(value):
            assert math.isnan(m[name]), name
        else:
            assert m[name] == pytest.approx(value, rel=1e-12, abs=1e-12), name


# --------------------------------------------------------------------------- 1. base schedulers
# G = 8.  J0: 4 GPUs, arrives 0, T = T_est = 4.   J1: 8 GPUs, arrives 1, T = T_est = 2.
#         J2: 4 GPUs, arrives 2, T = 1.5 but T_est = 1 (the scheduler only sees T_est).
# E = 2 evaluations per job (at half and full service).
THREE = [
    dict(type=LORA, gpus=4, arrival=0.0, T=4.0, T_est=4.0),
    dict(type=DPO, gpus=8, arrival=1.0, T=2.0, T_est=2.0),
    dict(type=DPO, gpus=4, arrival=2.0, T=1.5, T_est=1.0),
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_fifo_strict(backend):
    # t=0 J0 starts (4 free). t=1 J1 needs 8: head of line blocks. t=2 J2 would fit but
    # strict FIFO waits behind J1. t=4 J0 ends, J1 runs 4-6; J2 runs 6-7.5.
    rows, m = run(backend, config(THREE, 2, "fifo"), make_workload(THREE, 2))
    check(rows, {"start_h": [0, 4, 6], "end_h": [4, 6, 7.5], "held_h": [4, 2, 1.5],
                 "jct_h": [4, 5, 5.5], "queue_h": [0, 3, 4], "n_preemptions": [0, 0, 0]})
    # makespan 7.5; GPU-h 4*4 + 8*2 + 4*1.5 = 38; utilisation 38 / (8 * 7.5)
    check_metrics(m, {"makespan_h": 7.5, "gpu_h_total": 38.0, "utilization": 38 / 60,
                      "jct_mean_h": 14.5 / 3, "jct_p50_h": 5.0,
                      "jct_p95_h": 5.0 + 0.9 * 0.5,  # numpy's linear interpolation
                      "jct_p99_h": 5.0 + 0.98 * 0.5, "queue_mean_h": 7 / 3})


@pytest.mark.parametrize("backend", BACKENDS)
def test_fifo_backfill(backend):
    # As strict FIFO, but at t=2 J2 backfills into the 4 free GPUs: runs 2-3.5.
    rows, m = run(backend, config(THREE, 2, "fifo:backfill"), make_workload(THREE, 2))
    check(rows, {"start_h": [0, 4, 2], "end_h": [4, 6, 3.5], "jct_h": [4, 5, 1.5],
                 "queue_h": [0, 3, 0]})
    check_metrics(m, {"makespan_h": 6.0})


@pytest.mark.parametrize("backend", BACKENDS)
def test_srtf_est(backend):
    # t=0 J0 runs.  t=1 J1 arrives: keys J1 2 < J0 4-1=3, J1 takes all 8 GPUs, J0 paused.
    # t=2 J1's first evaluation, J2 arrives: keys J1 2-1=1, J2 1 (tie -> index: J1), J0 3.
    # t=3 J1 ends: J2 (1) and J0 (3) both fit: J2 runs 3-4.5, J0 resumes 3-6.
    rows, m = run(backend, config(THREE, 2, "srtf_est"), make_workload(THREE, 2))
    check(rows, {"start_h": [0, 1, 3], "end_h": [6, 3, 4.5], "held_h": [4, 2, 1.5],
                 "jct_h": [6, 2, 2.5], "queue_h": [2, 0, 1], "n_preemptions": [1, 0, 0]})
    check_metrics(m, {"jct_mean_h": 10.5 / 3})


# --------------------------------------------------------------------------- 2. evalstop(k=2)
# G = 8, FIFO strict, E = 5, scope rlhf.
# J0: RLHF, hacking, 8 GPUs, arrives 0, T = 10: evaluations at t = 2, 4, 6, 8, 10.
#     gold 0.5 .75 .625 .5 .375 (peak e=2), scores .5 .75 .625 .5625 .375:
#     e3 .625 < .75 (1 decline), e4 .5625 < .625 (2 declines) -> stop at e_t = 4, t = 8.
#     Delivered checkpoint e_t - k = 2 = the peak: regret 0.  Wasted: 8 GPUs from the
#     peak (t = 4) to the stop (t = 8) = 32 GPU-h (without the stop: 8 * 6 = 48).
# J1: LoRA, 4 GPUs, arrives 1, T = 2: out of scope.  Waits for J0's GPUs: runs 8-10
#     (without the stop it would run 10-12).
# J2: RLHF, healthy, 4 GPUs, arrives 1.5, T = 4; gold rises .25 .375 .5 .625 .75 (peak 5);
#     scores .3 .2 .2 .1 .05: e2 decline (1), e3 tie resets (0), e4 (1), e5 (2) -> trigger
#     at the last evaluation: counted as a (false) detection, delivers e = 3 (gold .5,
#     regret .25), but frees nothing: it runs 8-12 as if untriggered.
EVALSTOP = [
    dict(type=RLHF, gpus=8, arrival=0.0, T=10.0, T_est=10.0, hacking=True,
         gold=[0.5, 0.75, 0.625, 0.5, 0.375], score=[0.5, 0.75, 0.625, 0.5625, 0.375]),
    dict(type=LORA, gpus=4, arrival=1.0, T=2.0, T_est=2.0),
    dict(type=RLHF, gpus=4, arrival=1.5, T=4.0, T_est=4.0,
         gold=[0.25, 0.375, 0.5, 0.625, 0.75], score=[0.3, 0.2, 0.2, 0.1, 0.05]),
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_evalstop(backend):
    rows, m = run(backend, config(EVALSTOP, 5, "fifo", "evalstop:k=2"), make_workload(EVALSTOP, 5))
    check(rows, {"start_h": [0, 8, 8], "end_h": [8, 10, 12], "held_h": [8, 2, 4],
                 "jct_h": [8, 9, 10.5], "stopped": [True, False, True],
                 "demoted": [False, False, False], "positive": [True, False, True],
                 "in_scope": [True, False, True], "trigger_eval": [4, 0, 5],
                 "delivered_eval": [2, 5, 3], "delivered_gold": [0.75, 0.5, 0.5],
                 "best_gold": [0.75, 0.5, 0.75], "regret": [0, 0, 0.25],
                 "wasted_gpu_h": [32, 0, 0]})
    assert (m["tp"], m["fp"], m["fn"], m["tn"]) == (1, 1, 0, 0)
    assert (m["delay_sum"], m["delay_count"], m["n_stopped"]) == (2, 1, 2)  # 4 - 2
    # J2's trigger is at its last evaluation (its completion): a positive that frees nothing
    assert (m["tp_freed"], m["pos_at_completion"]) == (1, 1)
    check_metrics(m, {"stop_recall": 1.0, "hacking_gpu_h": 8 * 8})
    check_metrics(m, {"precision": 0.5, "recall": 1.0, "fpr": 1.0, "wasted_gpu_h": 32.0,
                      "gpu_h_total": 8 * 8 + 4 * 2 + 4 * 4, "wasted_share": 32 / 88,
                      "gold_hacking": 0.75, "gold_healthy_rlhf": 0.5, "gold_all": 1.75 / 3,
                      "regret_mean": 0.25 / 3, "makespan_h": 12.0})


@pytest.mark.parametrize("backend", BACKENDS)
def test_evalstop_baseline(backend):
    # Same cluster without a stop policy: J0 runs to t = 10, wastes 8 * (10 - 4) = 48.
    rows, m = run(backend, config(EVALSTOP, 5, "fifo", "none"), make_workload(EVALSTOP, 5))
    check(rows, {"end_h": [10, 12, 14], "delivered_eval": [5, 5, 5],
                 "wasted_gpu_h": [48, 0, 0], "regret": [0.375, 0, 0]})
    assert (m["tp"], m["fp"], m["fn"], m["tn"]) == (0, 0, 1, 1)
    check_metrics(m, {"precision": math.nan, "recall": 0.0, "fpr": 0.0, "wasted_gpu_h": 48.0,
                      "delay_sum": 0, "delay_count": 0, "n_stopped": 0, "tp_freed": 0,
                      "pos_at_completion": 0, "stop_recall": 0.0, "hacking_gpu_h": 80.0})


# --------------------------------------------------------------------------- 2b. stop FPR
# G = 16, FIFO strict, E = 5, every job RLHF with 4 GPUs: all four run at once from t <= 0.5.
# J0: healthy, scores .5 .4 .3 .6 .7: declines at e2, e3 -> evalstop(k=2) fires at e3 of 5,
#     before completion: a false positive that frees GPUs (fp_freed).
# J1: healthy, scores .3 .2 .2 .1 .05: e2 (1), e3 tie resets, e4 (1), e5 (2) -> a trigger
#     at the last evaluation: a false positive that frees nothing.
# J2: healthy, scores rising: a true negative.
# J3: hacking, gold = score .5 .75 .625 .5 .375: stop at e4 of 5 (a true positive, freed).
# FPR = 2 / 3, stop FPR = fp_freed / (fp + tn) = 1 / 3.  Under deprioritize(k=2) J0 is
# demoted at e3: still a positive before completion, yet it frees no GPU, so stop FPR is
# 0 / 3; fp - (pos_at_completion - (tp - tp_freed)) = 2 - (1 - (1 - 0)) = 2 would call it 2.
STOP_FPR = [
    dict(type=RLHF, gpus=4, arrival=0.0, T=5.0, T_est=5.0, score=[0.5, 0.4, 0.3, 0.6, 0.7]),
    dict(type=RLHF, gpus=4, arrival=0.0, T=5.0, T_est=5.0, score=[0.3, 0.2, 0.2, 0.1, 0.05]),
    dict(type=RLHF, gpus=4, arrival=0.5, T=5.0, T_est=5.0),
    dict(type=RLHF, gpus=4, arrival=0.5, T=5.0, T_est=5.0, hacking=True,
         gold=[0.5, 0.75, 0.625, 0.5, 0.375]),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("policy, trigger, freed, stop_fpr", [
    ("evalstop:k=2", [3, 5, 0, 4], (1, 1), 1 / 3),
    ("deprioritize:k=2", [3, 5, 0, 4], (0, 0), 0.0),
])
def test_stop_fpr_counts_only_false_positives_stopped_before_completion(
        backend, policy, trigger, freed, stop_fpr):
    rows, m = run(backend, config(STOP_FPR, 5, "fifo", policy, gpus=16),
                  make_workload(STOP_FPR, 5))
    check(rows, {"trigger_eval": trigger, "positive": [True, True, False, True]})
    assert (m["tp"], m["fp"], m["fn"], m["tn"]) == (1, 2, 0, 1)
    assert (m["tp_freed"], m["fp_freed"], m["pos_at_completion"]) == (*freed, 1)
    check_metrics(m, {"fpr": 2 / 3, "stop_fpr": stop_fpr, "stop_recall": float(freed[0])})


def test_stop_fpr_pools_over_clusters():
    """Pooled as FPR is: sum fp_freed / sum (fp + tn) over clusters (1 / 8 here), not the
    mean of the clusters' own rates (1 / 6), with an interval around it and n the
    clusters with a healthy job in scope."""
    import polars as pl

    from fastsim.summary import summarize

    counts = {"tp": [1, 0, 0], "fp": [2, 1, 0], "fn": [0, 1, 0], "tn": [1, 4, 0],
              "fp_freed": [1, 0, 0], "tp_freed": [1, 0, 0], "pos_at_completion": [1, 0, 0],
              "delay_sum": [0, 0, 0], "delay_count": [0, 0, 0]}
    row = summarize(pl.DataFrame({"cluster": [0, 1, 2], **counts})).filter(
        pl.col("metric") == "stop_fpr").row(0, named=True)
    assert row["kind"] == "pooled" and row["n"] == 2
    assert row["mean"] == pytest.approx(1 / 8)
    assert 0.0 <= row["lo"] < 1 / 8 < row["hi"] <= 1.0


# --------------------------------------------------------------------------- 3. tiresias
# G = 8, threshold 8 GPU-h, E = 2.  J0: 8 GPUs, arrives 0, T = 4 (evaluations at t = 2, 4
# while running).  J1: 8 GPUs, arrives 0.5, T = 1.
# t=0.5: J0 has 4 GPU-h (queue 0), J1 queue 0: FIFO inside the queue, J0 keeps running.
# t=1: J0 crosses 8 GPU-h; not a scheduling point, nothing changes.
# t=2: J0's first evaluation is the next scheduling point: J0 is now in queue 1, J1 (queue
#      0) takes the GPUs, runs 2-3.  t=3: J0 resumes and ends at 5.
TIRESIAS = [
    dict(type=RLHF, gpus=8, arrival=0.0, T=4.0, T_est=4.0),
    dict(type=RLHF, gpus=8, arrival=0.5, T=1.0, T_est=1.0),
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_tiresias_threshold_crossing(backend):
    cfg = config(TIRESIAS, 2, "tiresias:thresholds=8")
    rows, _ = run(backend, cfg, make_workload(TIRESIAS, 2))
    check(rows, {"start_h": [0, 2], "end_h": [5, 3], "held_h": [4, 1], "jct_h": [5, 2.5],
                 "n_preemptions": [1, 0]})


# A threshold reached exactly (queue = thresholds with gpus * attained >= threshold): the
# random cases never land on one, so a strict > would pass them all.  G = 8, threshold
# 8 GPU-h, E = 2.  J0: 8 GPUs, arrives 0, T = 4.  J1: 8 GPUs, arrives 1, T = 1.
# t=1: J1 arrives as J0 reaches 8 GPU-h: J0 is in queue 1, J1 (queue 0) takes the GPUs,
#      runs 1-2.  t=2: J0 resumes with 3 h left, ends at 5.
AT_THRESHOLD = [
    dict(type=RLHF, gpus=8, arrival=0.0, T=4.0, T_est=4.0),
    dict(type=RLHF, gpus=8, arrival=1.0, T=1.0, T_est=1.0),
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_tiresias_threshold_reached_exactly(backend):
    cfg = config(AT_THRESHOLD, 2, "tiresias:thresholds=8")
    rows, _ = run(backend, cfg, make_workload(AT_THRESHOLD, 2))
    check(rows, {"start_h": [0, 1], "end_h": [5, 2], "held_h": [4, 1], "n_preemptions": [1, 0]})


# The same when the threshold is reached at the job's own evaluation, a scheduling point
# (docs/model.md: events first, then the allocation from gpus * attained >= threshold).
# J0: 8 GPUs, arrives 0, T = 2 (evaluations at t = 1, 2).  J1: 8 GPUs, arrives 0.5, T = 1.
# t=1: J0's evaluation 1 at 8 GPU-h puts it in queue 1; J1 runs 1-2, J0 resumes, ends at 3.
# (An engine that looked for the next evaluation strictly after the crossing changed
# queue at t = 2: ends J0 at 2, J1 at 3.)
AT_EVALUATION = [
    dict(type=RLHF, gpus=8, arrival=0.0, T=2.0, T_est=2.0),
    dict(type=RLHF, gpus=8, arrival=0.5, T=1.0, T_est=1.0),
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_tiresias_threshold_reached_at_an_evaluation(backend):
    cfg = config(AT_EVALUATION, 2, "tiresias:thresholds=8")
    rows, _ = run(backend, cfg, make_workload(AT_EVALUATION, 2))
    check(rows, {"start_h": [0, 1], "end_h": [3, 2], "n_preemptions": [1, 0]})


# The same when the crossing falls on another running job's evaluation.  G = 8, threshold
# 4 GPU-h, E = 2.  J0: 4 GPUs, arrives 0, T = 4 (evaluations at service 2 and 4).  J1:
# 2 GPUs, arrives 0, T = 2 (evaluation at service 1, t = 1).  J2: 4 GPUs, arrives 0.5,
# T = 1: waits (2 GPUs free).  t=1: J0 reaches 4 GPU-h as J1 is evaluated: J1 and J2
# (queue 0) take 6 GPUs, J0 (queue 1) is paused; J1 and J2 end at 2, J0 resumes, ends at 5.
AT_OTHERS_EVALUATION = [
    dict(type=RLHF, gpus=4, arrival=0.0, T=4.0, T_est=4.0),
    dict(type=RLHF, gpus=2, arrival=0.0, T=2.0, T_est=2.0),
    dict(type=RLHF, gpus=4, arrival=0.5, T=1.0, T_est=1.0),
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_tiresias_threshold_reached_at_another_jobs_evaluation(backend):
    cfg = config(AT_OTHERS_EVALUATION, 2, "tiresias:thresholds=4")
    rows, _ = run(backend, cfg, make_workload(AT_OTHERS_EVALUATION, 2))
    check(rows, {"start_h": [0, 0, 1], "end_h": [5, 2, 2], "n_preemptions": [1, 0, 0]})


# --------------------------------------------------------------------------- 4. overhead
# G = 8, SRTF-Est, preempt_overhead_h = 1, E = 2, policy none.
# J0: RLHF hacking, 8 GPUs, arrives 0, T = 2 but T_est = 4; gold .75 .5 (peak e=1, at
#     service 1).  J1, J2: 8 GPUs, T = T_est = 1, arrive 1.5 and 3.
# t=0 J0 starts (first start: no overhead).  t=1 its evaluation 1 = its peak.
# t=1.5 J1 (key 1) beats J0 (4 - 1.5 = 2.5): J0 paused (1st preemption), J1 runs 1.5-2.5.
# t=2.5 J0 resumes owing 1 h of overhead.  t=3 J2 (key 1) beats J0 (still 2.5: overhead
#     is no service): J0 paused (2nd) after paying 0.5, still owes 0.5.  J2 runs 3-4.
# t=4 J0 resumes owing 0.5 + 1 = 1.5: service restarts at 5.5, 0.5 h left: ends at 6.
# J0 held 1.5 + 0.5 + 2 = 4 h; after its peak (t=1): 0.5 + 0.5 + 2 = 3 h -> 24 GPU-h
# wasted, 1.5 h of which is overhead.
OVERHEAD = [
    dict(type=RLHF, gpus=8, arrival=0.0, T=2.0, T_est=4.0, hacking=True, gold=[0.75, 0.5]),
    dict(type=RLHF, gpus=8, arrival=1.5, T=1.0, T_est=1.0),
    dict(type=RLHF, gpus=8, arrival=3.0, T=1.0, T_est=1.0),
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_preempt_overhead(backend):
    cfg = config(OVERHEAD, 2, "srtf_est", overhead=1.0)
    rows, m = run(backend, cfg, make_workload(OVERHEAD, 2))
    check(rows, {"start_h": [0, 1.5, 3], "end_h": [6, 2.5, 4], "held_h": [4, 1, 1],
                 "jct_h": [6, 1, 1], "queue_h": [2, 0, 0], "n_preemptions": [2, 0, 0],
                 "wasted_gpu_h": [24, 0, 0], "delivered_eval": [2, 2, 2],
                 "regret": [0.25, 0, 0]})
    # GPU-h 8 * (4 + 1 + 1) = 48 over 8 GPUs x 6 h: the GPUs were never idle.
    check_metrics(m, {"gpu_h_total": 48.0, "makespan_h": 6.0, "utilization": 1.0,
                      "wasted_gpu_h": 24.0, "wasted_share": 0.5})


# --------------------------------------------------------------------------- 5. deprioritize
# G = 8, SRTF-Est, deprioritize(k=1), E = 4.
# J0: RLHF hacking, 8 GPUs, arrives 0, T = T_est = 4: evaluations at t = 1, 2, 3, 4;
#     scores .5 .4 ...: the decline at e=2 (t=2) demotes it for good.
# J1: RLHF healthy, 8 GPUs, arrives 2.5, T = T_est = 4 (key 4 > J0's 1.5): without the
#     demotion J0 would keep the GPUs; demoted, J0 is paused.  J1 runs 2.5-6.5, J0 resumes
#     at 6.5 and ends at 8.  Delivered: the last evaluation.
DEPRIO = [
    dict(type=RLHF, gpus=8, arrival=0.0, T=4.0, T_est=4.0, hacking=True,
         gold=[0.5, 0.25, 0.125, 0.0625], score=[0.5, 0.4, 0.45, 0.46]),
    dict(type=RLHF, gpus=8, arrival=2.5, T=4.0, T_est=4.0),
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_deprioritize(backend):
    cfg = config(DEPRIO, 4, "srtf_est", "deprioritize:k=1")
    rows, m = run(backend, cfg, make_workload(DEPRIO, 4))
    check(rows, {"start_h": [0, 2.5], "end_h": [8, 6.5], "held_h": [4, 4],
                 "stopped": [False, False], "demoted": [True, False],
                 "positive": [True, False], "trigger_eval": [2, 0],
                 "delivered_eval": [4, 4], "n_preemptions": [1, 0],
                 "wasted_gpu_h": [8 * 3, 0]})
    assert (m["tp"], m["fp"], m["fn"], m["tn"]) == (1, 0, 0, 1)
    assert (m["delay_sum"], m["delay_count"], m["n_stopped"]) == (1, 1, 0)


# --------------------------------------------------------------------------- 6. paused at the peak
# Waste counts every hour held after the peak evaluation, including resume overhead paid
# while service still sits exactly at the peak's service point (MODEL.md section 8).
# G = 8, Tiresias with one threshold at 4 GPU-h, preempt_overhead_h = 0.5, E = 2.
# J0: RLHF hacking, 8 GPUs, arrives 0, T = 2; gold .75 .5 (peak e=1 at service 1).
# J1: 8 GPUs, arrives 0.25, T = 0.25 (2 GPU-h: never crosses).
# t=0.25 both in queue 0: FIFO keeps J0.  t=0.5 J0 crosses 4 GPU-h.  t=1 J0's peak
# evaluation is the next scheduling point: J0 (queue 1) is paused, J1 runs 1-1.25.
# t=1.25 J0 resumes, pays 0.5 h overhead, then its last 1 h of service: ends at 2.75.
# Wasted: 8 GPUs x (0.5 + 1) h after the peak = 12 GPU-h.
PEAK_PAUSE = [
    dict(type=RLHF, gpus=8, arrival=0.0, T=2.0, T_est=2.0, hacking=True, gold=[0.75, 0.5]),
    dict(type=RLHF, gpus=8, arrival=0.25, T=0.25, T_est=0.25),
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_overhead_after_peak_is_waste(backend):
    cfg = config(PEAK_PAUSE, 2, "tiresias:thresholds=4", overhead=0.5)
    rows, m = run(backend, cfg, make_workload(PEAK_PAUSE, 2))
    check(rows, {"start_h": [0, 1], "end_h": [2.75, 1.25], "held_h": [2.5, 0.25],
                 "jct_h": [2.75, 1.0], "queue_h": [0.25, 0.75], "n_preemptions": [1, 0],
                 "wasted_gpu_h": [12, 0]})
    check_metrics(m, {"wasted_gpu_h": 12.0, "gpu_h_total": 22.0, "wasted_share": 12 / 22})
