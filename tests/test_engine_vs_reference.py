"""The numba engine agrees with the pure-Python reference on many tiny random clusters.

The reference (``tests/reference.py``) processes every evaluation as a scheduling point
and recomputes the allocation from scratch each time; the engine resolves stop
decisions up front and skips evaluations that cannot change the allocation.  They must
agree on every job and every cluster metric, for every base scheduler (FIFO strict and
with backfill, SJF-Est, SRTF-Est, LossAware, Tiresias) x stop policy pair:

* discrete columns exactly, float columns to ``rtol = atol = 1e-9`` (GPU-hours to ``atol``
  per GPU: ``gpu_h_atol``);
* every per-cluster metric (integers exactly, NaN where both are undefined).

The engine runs once per (scheduler, policy, parameters) batch over several clusters.
"""
from __future__ import annotations

import math
import sys
from dataclasses import replace
from fractions import Fraction
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastsim import metrics as M
from fastsim.config import PolicyConfig, SchedulerConfig, SimConfig, WorkloadConfig
from fastsim.workload import generate_workload

sys.path.insert(0, str(Path(__file__).parent))
from reference import (jobs_of, reference_cluster_metrics,  # noqa: E402
                       reference_simulate)

from conftest import POLICY_NAMES as POLICIES  # noqa: E402
from conftest import SCHEDULERS  # noqa: E402

DISCRETE = ("stopped", "demoted", "positive", "in_scope", "trigger_eval", "delivered_eval",
            "n_preemptions")
FLOATS = ("start_h", "end_h", "held_h", "jct_h", "queue_h", "delivered_gold", "best_gold",
          "regret", "wasted_gpu_h")
# Every declared per-cluster metric: counts exactly, the rest to RTOL (delay_sum is a
# sum of integers, so exact too).
INT_METRICS = tuple(m.name for m in M.BUILTIN_METRICS
                    if m.column and (m.dtype == "int" or m.name == "delay_sum"))
FLOAT_METRICS = tuple(m.name for m in M.BUILTIN_METRICS if m.column and m.name not in INT_METRICS)
RTOL = ATOL = 1e-9
# The engine and the reference reach each instant along different arithmetic paths, a few
# ulps apart (docs/model.md, "Round-off"), so a span between two instants (a held time, the
# held time after a peak) is off by a few ulps of the instants however short it is: an
# absolute ATOL hours absorbs that.  A GPU-hour value is gpus x such a span, and its error
# gpus x those ulps: at 1e5 h one ulp is 1.5e-11 h, times 1,000 GPUs 1.5e-8 GPU-h, past an
# ATOL of 1e-9 on a value too small for RTOL to cover it (test_gpu_hours_at_scale).  So a
# GPU-hour value's absolute tolerance is ATOL per GPU: gpus x ATOL.
GPU_H_FLOATS = ("wasted_gpu_h",)


def gpu_h_atol(atol: float, gpus) -> np.ndarray:
    """The absolute tolerance of GPU-hours over ``gpus`` GPUs: the hours' ``atol`` per GPU."""
    return atol * np.asarray(gpus, dtype=float)


def assert_close(actual, desired, rtol: float, atol, err_msg: str) -> None:
    """``np.testing.assert_allclose`` (``|actual - desired| <= atol + rtol |desired|``, NaN
    equal to NaN) with ``atol`` per element, which numpy's takes as one number only."""
    a, d = np.broadcast_arrays(np.asarray(actual, dtype=float), np.asarray(desired, dtype=float))
    tol = np.broadcast_to(atol, a.shape)
    with np.errstate(invalid="ignore"):  # inf - inf: equal, as numpy's takes them
        ok = (a == d) | (np.isnan(a) & np.isnan(d)) | (np.abs(a - d) <= tol + rtol * np.abs(d))
    assert ok.all(), (f"{err_msg}\nnot within rtol={rtol:g} + atol at {np.flatnonzero(~ok)}: "
                      f"engine {a[~ok]}, reference {d[~ok]}, atol {tol[~ok]}")


def test_every_metric_is_compared():
    from fastsim.kernels.metrics import METRIC_NAMES
    assert sorted(INT_METRICS + FLOAT_METRICS) == sorted(METRIC_NAMES)
CLUSTERS_PER_CASE = 8
CASES_PER_PAIR = 4


# --------------------------------------------------------------------------- scenarios

def _subset(rng, choices, gpus):
    ok = [c for c in choices if c <= gpus]
    n = int(rng.integers(1, len(ok) + 1))
    return tuple(sorted(int(x) for x in rng.choice(ok, size=n, replace=False)))


def random_case(rng, scheduler: str, policy: str):
    """A random tiny cell (SimConfig, seed, cluster_start) for one scheduler x policy."""
    gpus = int(rng.choice([8, 12, 16]))
    n_evals = int(rng.integers(3, 7))
    mix = tuple(rng.dirichlet([1.0, 1.0, 2.0]))
    mix = (mix[0], mix[1], 1.0 - mix[0] - mix[1])
    wc = WorkloadConfig(
        gpus=gpus, n_jobs=int(rng.integers(4, 13)), load=float(rng.uniform(0.4, 1.8)),
        mix=mix, demands_lora=_subset(rng, (1, 2, 4), gpus),
        demands_dpo=_subset(rng, (2, 4, 8), gpus), demands_rlhf=_subset(rng, (4, 8, 12, 16), gpus),
        median_lora_h=float(rng.uniform(0.5, 2)), median_dpo_h=float(rng.uniform(1, 4)),
        median_rlhf_h=float(rng.uniform(2, 8)), log_sd=float(rng.uniform(0, 1)),
        n_evals=n_evals, base_rate=float(rng.uniform(0.2, 0.9)),
        dpo_base_rate=float(rng.choice([0.0, 0.5])), est_sigma=float(rng.uniform(0, 1)),
        sigma=float(rng.choice([0.0, 0.02, 0.08, 0.15])),
        loss_sigma=float(rng.choice([0.0, 0.01, 0.025])),
        preempt_overhead_h=float(rng.choice([0.0, rng.uniform(0.05, 0.5)])),
    )
    name, _, opt = scheduler.partition(":")
    sc = SchedulerConfig(
        name=name, backfill=opt == "backfill",
        thresholds_gpu_h=[(4.0,), (8.0, 32.0), (16.0,), (2.0, 6.0, 20.0)][int(rng.integers(4))])
    pc = PolicyConfig(
        name=policy, k=int(rng.integers(1, min(3, n_evals - 1) + 1)),
        f=float(rng.uniform(0.3, 1.2)), w=int(rng.integers(1, min(2, n_evals - 1) + 1)),
        tol=float(rng.uniform(0.0, 0.3)), scope=str(rng.choice(["rlhf", "all"])))
    case_seed, start = int(rng.integers(0, 2**31)), int(rng.integers(0, 1000))
    wc = curve_knobs(rng, wc)
    if pc.decl.stores_params:  # drawn last, so the other policies' cases stay as they were
        pc = replace(pc, params=random_values(rng, pc.decl, n_evals))
    return SimConfig(wc, sc, pc), case_seed, start


def random_values(rng, decl, n_evals: int) -> tuple:
    """Random parameters of any declared policy, from its declaration: each the default a
    quarter of the time, else uniform around it within the declared range; redrawn until
    the policy can trigger within ``n_evals`` evaluations."""
    for _ in range(100):
        values = {}
        for p in decl.params:
            if p.name == "scope":
                continue
            d = p.default
            if rng.random() < 0.25:
                values[p.name] = d
            elif p.kind == "int":
                lo = int(max(p.lo, 0))
                values[p.name] = int(rng.integers(lo, int(min(p.hi, lo + 3)) + 1))
            elif p.kind == "float":
                span = 3 * max(abs(d), 0.05)
                lo, hi = max(p.lo, d - span), min(p.hi, d + span)
                v = float(rng.uniform(lo, hi))
                values[p.name] = d if (p.lo_open and v <= p.lo or p.hi_open and v >= p.hi) else v
            elif p.kind == "bool":
                values[p.name] = bool(rng.random() < 0.5)
            else:
                values[p.name] = d
        if decl.min_evals({**values, "scope": "rlhf"}) <= n_evals:
            return tuple(values.items())
    raise AssertionError(f"no parameters of {decl.name} fit {n_evals} evaluations")


def curve_knobs(rng, wc: WorkloadConfig) -> WorkloadConfig:
    """The trace-grounded curve knobs (MODEL.md section 4), each off (the plain model)
    about half the time; drawn after the rest so the plain cases stay as they were."""
    on = rng.random(5) < 0.5
    hi = wc.ustar_hacking[1]
    return replace(
        wc, kl_gamma=float(rng.uniform(0.3, 1.5)) if on[0] else 1.0,
        hack_sharpness=float(rng.uniform(0.5, 3.0)) if on[4] else 1.0,
        sigma_spread=float(rng.uniform(0.1, 1.0)) if on[1] else 0.0,
        noise_rho=float(rng.uniform(-0.5, 0.9)) if on[2] else 0.0,
        ustar_healthy=(float(rng.uniform(hi, 1.2)), 3.0) if on[3] else (1.5, 4.0))


def describe(cfg: SimConfig, seed: int, cluster: int) -> str:
    return (f"scheduler={cfg.scheduler!r}\npolicy={cfg.policy!r}\nworkload={cfg.workload!r}\n"
            f"seed={seed} cluster={cluster}")


# --------------------------------------------------------------------------- comparison

def compare(cfg: SimConfig, seed: int, cluster_start: int, n_clusters: int,
            rtol: float = RTOL, atol: float = ATOL, workload=None,
            reference=reference_simulate) -> int:
    """Run the engine once over the clusters and the reference on each; assert agreement.
    Returns how many jobs were compared.  ``workload``: the clusters' draws, if not
    ``cfg``'s (``benchmarks/ties.py`` puts arrivals on a grid); ``reference``: the
    reference's simulation of one cluster, ``(cfg, jobs) -> ReferenceRun``."""
    from fastsim.api import run_workload

    w = workload if workload is not None else generate_workload(
        cfg.workload, n_clusters, seed=seed, cluster_start=cluster_start)
    res = run_workload(cfg, w, keep_jobs=True, record_segments=True)
    eng_jobs = res.jobs.sort(["cluster", "job"])
    eng_clusters = res.clusters.sort("cluster")
    eng_segs = res.segments
    assert eng_clusters.height == n_clusters
    n = 0
    for row in range(n_clusters):
        cid = int(w.cluster_ids[row])
        where = describe(cfg, seed, cid)
        jobs = jobs_of(w, row)
        ref = reference(cfg, jobs)
        ref_m = reference_cluster_metrics(cfg, jobs, ref.jobs)
        eng = eng_jobs.filter(eng_jobs["cluster"] == cid)
        assert eng.height == len(ref.jobs), where
        assert eng["job"].to_list() == list(range(len(ref.jobs))), where
        for col in DISCRETE:
            r = [int(x[col]) for x in ref.jobs]
            e = [int(x) for x in eng[col].to_list()]
            assert e == r, f"{col}: engine {e} != reference {r}\n{where}"
        for col in FLOATS:
            r = np.array([x[col] for x in ref.jobs], dtype=float)
            e = eng[col].to_numpy().astype(float)
            assert_close(e, r, rtol, gpu_h_atol(atol, jobs["gpus"]) if col in GPU_H_FLOATS
                         else atol, f"{col} (engine vs reference)\n{where}")
        m = eng_clusters.filter(eng_clusters["cluster"] == cid).to_dicts()[0]
        for name in INT_METRICS:
            assert int(m[name]) == ref_m[name], f"{name}: {m[name]} != {ref_m[name]}\n{where}"
        # a cluster's GPU-hours sum its jobs': their tolerances add up
        metric_atol = {"GPU-h": gpu_h_atol(atol, jobs["gpus"].sum())}
        for name in FLOAT_METRICS:
            assert_close(float(m[name]), ref_m[name], rtol,
                         metric_atol.get(M.lookup(name).unit, atol), f"metric {name}\n{where}")
        for metric in map(M.lookup, cfg.metrics):  # the user's, as the built-ins
            if metric.dtype == "int":
                assert int(m[metric.name]) == ref_m[metric.name], \
                    f"{metric.name}: {m[metric.name]} != {ref_m[metric.name]}\n{where}"
            else:
                assert_close(float(m[metric.name]), ref_m[metric.name], rtol,
                             metric_atol.get(metric.unit, atol), f"metric {metric.name}\n{where}")
        segs = eng_segs.filter(eng_segs["cluster"] == cid).sort(["start_h", "job"])
        e_segs = list(zip(segs["job"].to_list(), segs["start_h"].to_list(), segs["end_h"].to_list()))
        assert [s[0] for s in e_segs] == [s[0] for s in ref.segments], f"segments\n{where}"
        np.testing.assert_allclose(np.array([s[1:] for s in e_segs]).reshape(-1, 2),
                                   np.array([s[1:] for s in ref.segments]).reshape(-1, 2),
                                   rtol=rtol, atol=atol, err_msg=f"segments\n{where}")
        n += len(ref.jobs)
    return n


PAIRS = [(s, p) for s in SCHEDULERS for p in POLICIES]


@pytest.mark.parametrize("scheduler,policy", PAIRS, ids=[f"{s}-{p}" for s, p in PAIRS])
def test_engine_matches_reference(scheduler, policy):
    rng = np.random.default_rng(100 * SCHEDULERS.index(scheduler) + POLICIES.index(policy))
    for _ in range(CASES_PER_PAIR):
        cfg, seed, start = random_case(rng, scheduler, policy)
        compare(cfg, seed, start, CLUSTERS_PER_CASE)


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(scheduler=st.sampled_from(SCHEDULERS), policy=st.sampled_from(POLICIES),
       case_seed=st.integers(0, 2**32 - 1))
def test_engine_matches_reference_hypothesis(scheduler, policy, case_seed):
    cfg, seed, start = random_case(np.random.default_rng(case_seed), scheduler, policy)
    compare(cfg, seed, start, 3)


@pytest.mark.parametrize("scheduler", SCHEDULERS)
@pytest.mark.parametrize("policy", ["none", "evalstop:k=2"])
def test_engine_matches_reference_default_scale(scheduler, policy):
    # The defaults' shape (64 GPUs, 10 evaluations, many concurrent jobs), fewer jobs.
    cfg = SimConfig(WorkloadConfig(n_jobs=60, preempt_overhead_h=0.05),
                    SchedulerConfig.parse(scheduler), PolicyConfig.parse(policy))
    compare(cfg, seed=11, cluster_start=3, n_clusters=2)


# --------------------------------------------------------------------------- the reference itself

@settings(max_examples=60, deadline=None, derandomize=True)
@given(scheduler=st.sampled_from(SCHEDULERS), policy=st.sampled_from(POLICIES),
       case_seed=st.integers(0, 2**32 - 1))
def test_reference_invariants(scheduler, policy, case_seed):
    """Capacity, conservation and ordering properties of the reference's own runs."""
    cfg, seed, start = random_case(np.random.default_rng(case_seed), scheduler, policy)
    wc = cfg.workload
    w = generate_workload(wc, 2, seed=seed, cluster_start=start)
    for row in range(2):
        jobs = jobs_of(w, row)
        run = reference_simulate(cfg, jobs)
        E = wc.n_evals
        # capacity is never exceeded (ends before starts at the same instant)
        edges = sorted([(a, 1, j) for j, a, b in run.segments]
                       + [(b, -1, j) for j, a, b in run.segments], key=lambda x: (x[0], x[1]))
        used = 0
        for _, d, j in edges:
            used += d * int(jobs["gpus"][j])
            assert used <= wc.gpus
        for r in run.jobs:
            j = r["job"]
            segs = [(a, b) for jj, a, b in run.segments if jj == j]
            assert segs, "every job runs"
            assert all(b > a for a, b in segs)
            assert all(segs[i][1] <= segs[i + 1][0] for i in range(len(segs) - 1))
            assert segs[0][0] == r["start_h"] >= jobs["arrival_h"][j]
            assert segs[-1][1] == r["end_h"]
            assert math.isclose(r["held_h"], sum(b - a for a, b in segs), rel_tol=1e-12)
            assert len(segs) == r["n_preemptions"] + 1
            # held time = service to the end point + resume overhead actually paid
            last = r["trigger_eval"] if (r["stopped"]) else E
            service = last * jobs["duration_h"][j] / E
            overhead = r["held_h"] - service
            assert overhead >= -1e-9
            assert overhead <= r["n_preemptions"] * wc.preempt_overhead_h + 1e-9
            if wc.preempt_overhead_h == 0.0:
                assert abs(overhead) <= 1e-9
            assert r["jct_h"] >= r["held_h"] - 1e-9
            assert 0.0 <= r["wasted_gpu_h"] <= r["held_h"] * jobs["gpus"][j] + 1e-9
            assert r["regret"] >= -1e-15
            assert 1 <= r["delivered_eval"] <= E
            if not r["in_scope"]:
                assert not (r["stopped"] or r["demoted"]) and r["trigger_eval"] == 0
        if not cfg.scheduler.decl.preemptive:
            assert all(r["n_preemptions"] == 0 for r in run.jobs)
        if cfg.scheduler.name == "fifo" and not cfg.scheduler.backfill:
            starts = [r["start_h"] for r in run.jobs]
            assert starts == sorted(starts), "strict FIFO starts jobs in arrival order"


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_engine_matches_the_reference_in_exact_arithmetic(scheduler):
    """The reference with every time a ``Fraction`` (``exact=True``, which
    ``benchmarks/ties.py`` counts tie-breaks against) agrees with the engine where no two
    events tie, as on random cases: a check of the exact reference, and that the engine's
    float times stay within 1e-9 of the exact ones."""
    rng = np.random.default_rng(31 + SCHEDULERS.index(scheduler))
    for policy in POLICIES:
        cfg, seed, start = random_case(rng, scheduler, policy)
        compare(cfg, seed, start, 2, reference=partial(reference_simulate, exact=True))
    trace = []  # and no float creeps into its times, service or overhead
    w = generate_workload(cfg.workload, 1, seed=seed, cluster_start=start)
    reference_simulate(cfg, jobs_of(w, 0), trace, exact=True)
    assert trace and all(isinstance(v, Fraction) for t, jobs in trace
                         for v in (t, *(x for job in jobs for x in job[4:])))


# Full-size clusters: 300 jobs and ~500 h of busy time, every scheduler x policy pair.
# Rounding accumulates along long chains of events, so times are compared at 1e-9
# relative with 1e-7 h absolute (docs/model.md, "Round-off"); discrete results exactly.
@pytest.mark.parametrize("scheduler,policy", PAIRS, ids=[f"{s}-{p}" for s, p in PAIRS])
def test_engine_matches_reference_full_size(scheduler, policy):
    cfg = SimConfig.from_specs(scheduler, policy, n_evals=10, sigma=0.03, preempt_overhead_h=0.1)
    assert compare(cfg, seed=5, cluster_start=100, n_clusters=1, atol=1e-7) == 300


# A cluster whose clock runs to 1e5 h, with 1,000-GPU jobs: long 1-GPU LoRA runs at a low
# load spread 400 arrivals over ~1e5 h, and RLHF runs of 36 s on 1,000 GPUs each waste a
# few GPU-hours.  End times agree to a few ulps (1.5e-11 h each), the waste to those ulps
# times 1,000 GPUs: 1.5e-8 GPU-h and more, which an ATOL of 1e-9 GPU-h refused.
@pytest.mark.parametrize("scheduler,policy", [("fifo", "none"), ("srtf_est", "evalstop:k=1")])
def test_gpu_hours_at_scale(scheduler, policy):
    cfg = SimConfig.from_specs(scheduler, policy, gpus=2000, n_jobs=400, mix=(0.5, 0.0, 0.5),
                               demands_lora=(1,), demands_rlhf=(1000,), median_lora_h=1e4,
                               median_rlhf_h=0.01, log_sd=0.0, load=0.01, n_evals=10, sigma=0.02)
    assert generate_workload(cfg.workload, 1, seed=1).arrival_h.max() > 9e4
    assert compare(cfg, seed=1, cluster_start=0, n_clusters=1) == 400


# --------------------------------------------------------------------------- degenerate inputs

def tie_case(rng, scheduler: str, policy: str, medians: tuple = (1, 2, 2, 4)) -> tuple:
    """``random_case``'s cell with every job of a type alike (SimConfig, seed, start):
    ``log_sd = est_sigma = 0``, one or two LoRA demands, DPO 4 GPUs, RLHF 8 or 4 and 8;
    run-time medians ``medians``: LoRA, DPO, then RLHF's choices (``benchmarks/ties.py``)."""
    cfg, seed, start = random_case(rng, scheduler, policy)
    g = cfg.workload.gpus
    lora = tuple(d for d in (1, 2) if d <= g)[:int(rng.integers(1, 3))]
    wc = replace(cfg.workload, log_sd=0.0, est_sigma=0.0, demands_lora=lora, demands_dpo=(4,),
                 demands_rlhf=(8,) if rng.random() < 0.5 else (4, 8),
                 median_lora_h=medians[0], median_dpo_h=medians[1],
                 median_rlhf_h=float(rng.choice(medians[2:])))
    return SimConfig(wc, cfg.scheduler, cfg.policy), seed, start


def alike_rlhf(scheduler: str, policy: str, **workload) -> SimConfig:
    """Every job an RLHF job of one demand and one run time, on a crowded cluster: events of
    different jobs meet in exact arithmetic and land a few ulps apart in floats."""
    return SimConfig.from_specs(
        scheduler, policy, n_jobs=12, load=2.0, log_sd=0.0, est_sigma=0.0, mix=(0, 0, 1.0),
        sigma=0.0, loss_sigma=0.0, ustar_hacking=(0.5, 0.5), ustar_healthy=(1.0, 1.0),
        height=(0.7, 0.7), loss0=(2.0, 2.0), loss_inf=(0.5, 0.5), loss_tau=(0.05, 0.05),
        **workload)


def test_no_job_paused_an_ulp_before_its_end():
    """Under Tiresias job 7's stop fell one ulp after job 8's evaluation, where the queues
    were recomputed: the engine paused job 7 with an ulp of work left and it ended at
    31.07 h instead of 18.91 h (job 9 too, 7.8 h late); both references end it at 18.91."""
    cfg = alike_rlhf("tiresias", "oracle", gpus=8, demands_rlhf=(4,))
    compare(cfg, seed=0, cluster_start=0, n_clusters=4)
    compare(cfg, seed=0, cluster_start=0, n_clusters=4,
            reference=partial(reference_simulate, exact=True))


def _paused_with_no_work_left(cfg: SimConfig, segments) -> list:
    """Jobs whose last segment, after a pause, holds only the resume overhead: paused
    with (almost) nothing left to run."""
    out = []
    for (job,), seg in segments.group_by(["job"]):
        if seg.height > 1:
            last = seg.sort("start_h").row(-1, named=True)
            if last["end_h"] - last["start_h"] - cfg.workload.preempt_overhead_h < 1e-9:
                out.append(job)
    return out


GRID_CASES = 4  # grid-arrival cells per stop policy


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_engine_matches_reference_on_degenerate_inputs(scheduler):
    """Degenerate inputs (every job of a type alike, continuous or half-hour-grid arrivals),
    every stop policy.  Alike RLHF jobs: the engine agrees with the reference on everything
    (``compare``).  Grid arrivals, where the float reference itself can split an exact tie
    the other way (docs/model.md, "Round-off and exact ties"): no job is paused with no work
    left, and except under Tiresias every end time is the float reference's or, where that
    departs from exact arithmetic, the exact one's."""
    from fastsim.api import run_workload

    rng = np.random.default_rng(50 + SCHEDULERS.index(scheduler))
    for policy in POLICIES:
        cfg = alike_rlhf(scheduler, policy, gpus=int(rng.choice([8, 16])),
                         demands_rlhf=(int(rng.choice([2, 4])),))
        compare(cfg, seed=int(rng.integers(1000)), cluster_start=0, n_clusters=6)
        for _ in range(GRID_CASES):
            cfg, seed, start = tie_case(rng, scheduler, policy)
            w = generate_workload(cfg.workload, 1, seed=seed, cluster_start=start)
            w = w.with_arrays(arrival_h=np.floor(w.arrival_h * 2) / 2)
            res = run_workload(cfg, w, keep_jobs=True, record_segments=True)
            where = describe(cfg, seed, start)
            assert _paused_with_no_work_left(cfg, res.segments) == [], where
            if cfg.scheduler.name == "tiresias":
                continue
            end = res.jobs.sort("job")["end_h"].to_numpy()
            ref = [x["end_h"] for x in reference_simulate(cfg, jobs_of(w, 0)).jobs]
            if not np.allclose(end, ref, rtol=RTOL, atol=ATOL):
                exact = [x["end_h"]
                         for x in reference_simulate(cfg, jobs_of(w, 0), exact=True).jobs]
                np.testing.assert_allclose(end, exact, rtol=RTOL, atol=ATOL, err_msg=where)
