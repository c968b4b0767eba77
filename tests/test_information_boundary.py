"""Decisions never see hidden truth (MODEL.md section 5).

Structural: the decision kernels' parameters name no hidden quantity, and the stage
that feeds them (``decide_stops``) hands them none but the oracle's.  Behavioural:
scrambling every hidden array while keeping what the platform observes (and the true
run time, which the physics needs) leaves every decision and every end time unchanged;
only the labelled oracle moves.
"""
import inspect

import numpy as np
import pytest

from conftest import POLICIES, SCHEDULERS
from fastsim.api import run_workload
from fastsim.config import SimConfig
from fastsim.workload import HIDDEN, OBSERVED, generate_workload
from fastsim.kernels import detectors, detectors_online, pipeline, schedulers, stops
from fastsim.kernels.codes import SRTF_EST

HIDDEN_WORDS = ("hacking", "ustar", "u_star", "height", "gold", "peak", "duration", "true",
                "tau", "label")


def _params(fn):
    return list(inspect.signature(getattr(fn, "py_func", fn)).parameters)


def _kernels(module):
    return [obj for name, obj in vars(module).items()
            if name.endswith("_nb") and getattr(obj, "__module__", module.__name__) == module.__name__
            or hasattr(obj, "py_func") and obj.py_func.__module__ == module.__name__]


@pytest.mark.parametrize("module", [detectors, detectors_online, schedulers])
def test_decision_kernels_take_no_hidden_argument(module):
    found = _kernels(module)
    assert len(found) >= 4
    for fn in found:
        for p in _params(fn):
            assert not any(w in p.lower() for w in HIDDEN_WORDS), f"{fn.__name__}({p})"


def _call(fn, callee):
    """The source text of ``fn``'s call to ``callee``, arguments included."""
    src = inspect.getsource(getattr(fn, "py_func", fn))
    call = src[src.index(callee + "("):]
    return call[: call.index(")") + 1]


def test_resolve_stops_passes_only_observations_to_the_decision():
    # duration_h enters resolve_stops_1c_nb only to form the attained service observed at
    # each evaluation; the decision kernel gets that array, never duration_h itself.
    call = _call(stops.resolve_stops_1c_nb, "stop_decision_1j_nb")
    assert "duration" not in call and "hacking" not in call and "gold" not in call
    for fn in (stops.resolve_stops_nb, stops.resolve_stops_1c_nb):
        assert set(_params(fn)) & set(HIDDEN) == {"duration_h"}


def test_one_pass_pipeline_hands_the_decisions_only_observations():
    # The one-pass kernel calls the same decision kernel with the same arrays as
    # decide_stops: observed ones and duration_h (for the attained service), nothing else.
    call = _call(pipeline.PIPELINES[SRTF_EST], "resolve_rule_stops_1c_nb")
    args = {a.strip() for a in call[call.index("(") + 1:-1].split(",")}
    assert args & set(HIDDEN) == {"duration_h"}
    assert not args & {"gold", "hacking", "peak_eval", "ustar", "height"}


def test_observed_and_hidden_partition_the_workload():
    w = generate_workload(SimConfig().workload, 1, seed=0)
    names = set(OBSERVED) | set(HIDDEN) | {"cluster_ids"}
    assert names == set(vars(w))
    assert not set(OBSERVED) & set(HIDDEN)


def _scramble(w, seed):
    rng = np.random.default_rng(seed)
    return w.with_arrays(
        hacking=rng.random(w.hacking.shape) < 0.5,
        ustar=rng.uniform(0.1, 5, w.ustar.shape),
        height=rng.uniform(0, 1, w.height.shape),
        tau=rng.uniform(0.1, 1, w.tau.shape),
        loss0=rng.uniform(1, 3, w.loss0.shape),
        loss_inf=rng.uniform(0, 1, w.loss_inf.shape),
        loss_tau=rng.uniform(0.01, 1, w.loss_tau.shape),
        gold=rng.normal(size=w.gold.shape),
        peak_eval=rng.integers(1, w.n_evals + 1, w.peak_eval.shape).astype(np.int32),
    )


DECISIONS = ["start_h", "end_h", "held_h", "stopped", "demoted", "positive", "trigger_eval",
             "delivered_eval", "n_preemptions"]


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_scrambled_truth_changes_no_decision(scheduler):
    cfg = SimConfig.from_specs(scheduler, "none", n_jobs=40, gpus=32, preempt_overhead_h=0.2)
    w = generate_workload(cfg.workload, 6, seed=9)
    fake = _scramble(w, 1)
    for policy in POLICIES:
        c = cfg.with_policy(policy)
        real = run_workload(c, w).jobs.select(DECISIONS)
        blind = run_workload(c, fake).jobs.select(DECISIONS)
        if c.policy.uses_hidden_truth:
            assert not real.equals(blind), "the oracle should react to the hidden labels"
        else:
            assert real.equals(blind), f"{policy} over {scheduler} reacted to hidden truth"
