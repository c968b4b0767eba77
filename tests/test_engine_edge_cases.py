"""The engine agrees with the reference on the edges of the workload's ranges.

``test_engine_vs_reference`` draws its cells from the middle of every range; here each
cell sits on one edge, for every base scheduler and a user's key x every stop policy
(built-in at its defaults, and a user's): one GPU, a single job, zero noise, every job
hacking or none, the largest noise the config allows, estimates as wide as allowed,
the most evaluations a policy may look back (k = n_evals - 1) and the fewest
evaluations there are (2).  Equal keys: FIFO's (all 0) and Tiresias' (integer queues)
tie in every random cell; equal estimates (``equal_keys``) need equal run times, so two
jobs started together also evaluate together, exact ties in *time*, where the engine
may depart from the reference (docs/model.md, "Round-off and exact ties", counted by
``benchmarks/ties.py``): the cell here is one where it does not.

Jobs wider than the cluster and a policy needing more evaluations than a job has are
refused before the engine runs (checked at the end).
"""
from __future__ import annotations

import re
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from fastsim.api import run_workload
from fastsim.config import PolicyConfig, SchedulerConfig, SimConfig, WorkloadConfig
from fastsim.errors import ConfigError
from fastsim.workload import Workload, generate_workload

sys.path.insert(0, str(Path(__file__).parent))
from conftest import POLICIES, SCHEDULERS  # noqa: E402
from test_engine_vs_reference import compare  # noqa: E402
from test_user_extensions import user_dir  # noqa: E402,F401  (the toy user modules)

BASE = WorkloadConfig(gpus=8, n_jobs=8, load=1.3, mix="mixed", demands_lora=(1, 2),
                      demands_dpo=(2, 4), demands_rlhf=(4, 8), n_evals=5, sigma=0.05,
                      loss_sigma=0.01, preempt_overhead_h=0.1)
ONE_GPU = dict(gpus=1, demands_lora=(1,), demands_dpo=(1,), demands_rlhf=(1,))
EDGES = {
    "one_gpu": ONE_GPU,
    "single_job": dict(n_jobs=1),
    "zero_noise": dict(sigma=0.0, loss_sigma=0.0, noise_rho=0.0),
    "all_hacking": dict(mix=(0.0, 0.5, 0.5), base_rate=1.0, dpo_base_rate=1.0),
    "none_hacking": dict(base_rate=0.0, dpo_base_rate=0.0),
    "max_sigma": dict(sigma=1.0, sigma_spread=1.0),
    "wide_estimates": dict(est_sigma=3.0, log_sd=3.0),
    "two_evals": dict(n_evals=2),
    "equal_keys": dict(log_sd=0.0, est_sigma=0.0, demands_lora=(1,), demands_dpo=(2,),
                       demands_rlhf=(4,)),
}
USER_POLICIES = ("toy_user_policies:below_best:k=1", "toy_user_policies:drawdown",
                 "toy_user_policies:flat_loss:w=1,tol=0.05", "toy_user_policies:halfway")
USER_KEYS = ("toy_user_schedulers:typed",)


def _policy_fits(policy: PolicyConfig, n_evals: int) -> PolicyConfig | None:
    """The policy at its defaults, or with its look-back cut to its least; None where
    even that needs more than ``n_evals`` evaluations (``peak`` on 2)."""
    if policy.min_evals <= n_evals:
        return policy
    values = dict(policy.params) if policy.decl.stores_params else {}
    for p in policy.decl.params:
        if p.name in ("k", "w", "patience", "min_evals"):
            values[p.name] = int(max(p.lo, 1))
    spec = policy.name + ("" if not values else ":" + ",".join(
        f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in values.items()))
    policy = PolicyConfig.parse(spec)
    return policy if policy.min_evals <= n_evals else None


@pytest.mark.parametrize("edge", list(EDGES))
def test_engine_matches_reference_on_edges(user_dir, edge):  # noqa: F811
    wc = replace(BASE, **EDGES[edge])
    for s in SCHEDULERS + USER_KEYS:
        for p in POLICIES + USER_POLICIES:
            policy = _policy_fits(PolicyConfig.parse(p), wc.n_evals)
            if policy is None:
                continue
            cfg = SimConfig(wc, SchedulerConfig.parse(s), policy)
            compare(cfg, seed=3, cluster_start=SCHEDULERS.index(s) if s in SCHEDULERS else 7,
                    n_clusters=2)


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_the_longest_lookback_matches_the_reference(scheduler):
    # k = n_evals - 1: the policy can trigger at the last evaluation only
    wc = replace(BASE, n_evals=4, sigma=0.15)
    for p in ("evalstop:k=3", "deprioritize:k=3", "patience:patience=3,threshold=0",
              "loss_plateau:w=3,tol=0.3"):
        compare(SimConfig(wc, SchedulerConfig.parse(scheduler), PolicyConfig.parse(p)),
                seed=5, cluster_start=0, n_clusters=3)


@pytest.mark.parametrize("kw, field", [(dict(gpus=4, demands_rlhf=(8,), demands_dpo=(2,)),
                                        "demands_rlhf"),
                                       (dict(n_evals=3), "evaluations for evalstop(k=3)")])
def test_what_the_engine_never_sees_is_refused(kw, field):
    with pytest.raises(ConfigError, match=re.escape(field)):
        SimConfig.from_specs("fifo", "evalstop:k=3", **kw)


def test_a_job_wider_than_the_cluster_in_a_given_workload_is_refused():
    cfg = SimConfig.from_specs("fifo", "evalstop:k=2", n_jobs=6, gpus=16)
    w = generate_workload(cfg.workload, 2, seed=1)
    gpus = w.gpus.copy()
    gpus[1, 2] = 17
    with pytest.raises(ConfigError, match=re.escape(
            "workload.gpus at cluster row 1, job 2 is 17; allowed: an integer from 1 to 16")):
        run_workload(cfg, w.with_arrays(gpus=gpus))


@pytest.mark.parametrize("policy", ["stop_at:f=0.5,scope=all",
                                    "toy_user_policies:halfway:f=0.5,scope=all"])
def test_a_perfect_estimate_meets_stop_at_on_its_grid_point(user_dir, policy):  # noqa: F811
    # est_sigma = 0: T_est = T, so the estimated progress at evaluation e is exactly e / 10
    # and f = 0.5 is met at evaluation 5, by every job.  The reference read the service as
    # e * T / E, which rounds twice and fell one ulp short for some jobs (trigger at 6).
    cfg = SimConfig(replace(BASE, est_sigma=0.0, n_evals=10, n_jobs=4, gpus=16,
                            demands_rlhf=(4, 8, 16)),
                    SchedulerConfig.parse("fifo"), PolicyConfig.parse(policy))
    assert compare(cfg, seed=15, cluster_start=0, n_clusters=2) == 8
    w = generate_workload(cfg.workload, 2, seed=15)
    assert run_workload(cfg, w).jobs["trigger_eval"].to_list() == [5] * 8


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_a_job_that_ends_at_its_peak_wastes_nothing(scheduler):
    """The oracle stops every hacking job at its peak, so no GPU-hour is wasted after it.
    Under Tiresias, whose every reallocation moves a running job's base, the end's instant
    and the crossing of the peak came along different sums and an ulp apart: 199 of 200
    default clusters were charged up to 5.8e-12 GPU-h of waste, where the reference
    charges exactly 0."""
    from fastsim.api import simulate

    res = simulate(SimConfig.from_specs(scheduler, "oracle"), 20, seed=0)
    assert (res.clusters["wasted_gpu_h"] == 0.0).all()


def _all_at_once(scheduler: str) -> tuple[SimConfig, Workload]:
    """Twelve jobs arriving together on 8 GPUs, demoted ones among them: many keys tie."""
    cfg = SimConfig.from_specs(scheduler, "deprioritize:k=2,scope=all", n_jobs=12, gpus=8,
                               n_evals=4, demands_lora=(1, 2), demands_dpo=(2, 4),
                               demands_rlhf=(4,), sigma=0.15, preempt_overhead_h=0.05)
    w = generate_workload(cfg.workload, 2, seed=4)
    return cfg, w.with_arrays(arrival_h=np.zeros_like(w.arrival_h))


def test_loss_aware_ties_a_key_of_minus_zero_with_plus_zero(monkeypatch):
    """A flat loss gives the rate 0.0 (key -0.0) if positive, -0.0 (key +0.0) if negative:
    equal keys, ordered by index.  The engine's sort read ``key + 0.0`` to make -0.0 +0.0,
    which fastmath's ``nsz`` lets the compiler drop: -0.0 sorted first, and 8 of the first
    cluster's 12 jobs started at other times than the reference's (up to 7.5 h off).
    ``check_workload`` now refuses negative losses under ``loss_aware`` (a relative drop
    reads them backwards), so the engine's order is tested past that check."""
    import fastsim.api
    monkeypatch.setattr(fastsim.api, "_loss_checks", lambda cfg, w: ())
    cfg, w = _all_at_once("loss_aware")
    sign = np.where(np.arange(12) % 2 == 0, -1.0, 1.0)[None, :, None]
    flat = (np.arange(12) % 4 != 3)[None, :, None]  # every fourth job's losses fall
    compare(cfg, seed=4, cluster_start=0, n_clusters=2,
            workload=w.with_arrays(loss=np.where(flat, sign * np.ones_like(w.loss), w.loss)))


@pytest.mark.parametrize("scheduler", ["srtf_est", "tiresias:thresholds=2/8/32"])
def test_equal_keys_of_jobs_arriving_together_go_by_index(scheduler):
    """srtf_est: estimates of 0 or a tenth of the run time, so keys reach exactly 0 and stay
    there; Tiresias: three queues, jobs crossing into them one by one.  Equal keys go by job
    index, not by where a job stood after the last sort."""
    cfg, w = _all_at_once(scheduler)
    est = np.where(np.arange(12) % 3 == 0, 0.0, 0.1 * w.duration_h)
    compare(cfg, seed=4, cluster_start=0, n_clusters=2, workload=w.with_arrays(t_est_h=est))
