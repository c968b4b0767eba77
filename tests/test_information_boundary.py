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
from test_user_extensions import user_dir  # noqa: F401  (the toy user modules)
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


# --------------------------------------------------------------------------- user code
# Each decision a user can register, through each path that calls it: a stop policy (the
# engine under every scheduler; keep="best", one reading losses, one reading the service
# and the planned length), a scheduler key, and the live monitor's Trainer callback
# (replay's: test_user_extensions).  A user's metric is accounting and may read the truth.

USER_KEYS = ("toy_user_schedulers:small_first", "toy_user_schedulers:typed")
USER_POLICIES = ("toy_user_policies:below_best:k=1", "toy_user_policies:drawdown:drop=0.02",
                 "toy_user_policies:flat_loss:w=1,tol=0.02", "toy_user_policies:halfway:f=0.4")


@pytest.mark.parametrize("scheduler", SCHEDULERS + USER_KEYS)
def test_scrambled_truth_changes_no_decision_of_user_code(user_dir, scheduler):  # noqa: F811
    cfg = SimConfig.from_specs(scheduler, "none", n_jobs=30, gpus=32, preempt_overhead_h=0.2,
                               sigma=0.05, loss_sigma=0.01)
    w = generate_workload(cfg.workload, 4, seed=9)
    fake = _scramble(w, 1)
    stopped = 0
    for policy in USER_POLICIES:
        c = cfg.with_policy(policy)
        real = run_workload(c, w).jobs.select(DECISIONS)
        assert real.equals(run_workload(c, fake).jobs.select(DECISIONS)), \
            f"{policy} over {scheduler} reacted to hidden truth"
        stopped += real["stopped"].sum()
    assert stopped > 0  # the policies did decide: the comparison is not vacuous


@pytest.mark.parametrize("scheduler", USER_KEYS)
def test_a_user_key_is_a_function_of_arrival_observations_only(user_dir, scheduler):  # noqa: F811
    # the run time and the curves too: a key is computed at arrival, before any service
    from fastsim.api import static_keys

    cfg = SimConfig.from_specs(scheduler, "none", n_jobs=30, gpus=32)
    w = generate_workload(cfg.workload, 3, seed=4)
    fake = _scramble(w, 2).with_arrays(duration_h=w.duration_h[:, ::-1] * 3.0)
    keys = static_keys(cfg, w)
    assert np.array_equal(keys, static_keys(cfg, fake))
    assert not np.array_equal(keys, static_keys(cfg, w.with_arrays(t_est_h=w.t_est_h * 2.0)))


def _callback_stop(spec, values, tmp_path, monkeypatch):
    """The step a ``StopPolicyCallback`` stops a stand-in Trainer's run at (100 planned
    steps, an evaluation every 10), or None."""
    from types import SimpleNamespace

    from fastsim.replay import hf

    monkeypatch.setattr(hf, "_TrainerCallback", type("Base", (), {}))
    args = SimpleNamespace(metric_for_best_model="accuracy", greater_is_better=True,
                           max_steps=100, eval_strategy="steps", save_strategy="steps",
                           eval_steps=10, save_steps=10, save_total_limit=None,
                           output_dir=str(tmp_path), load_best_model_at_end=False)
    cb = hf.StopPolicyCallback(spec)
    state, control = SimpleNamespace(global_step=0), SimpleNamespace(should_training_stop=False)
    cb.on_train_begin(args, state, control)
    for i, v in enumerate(values):
        state.global_step = 10 * (i + 1)
        cb.on_evaluate(args, state, control, metrics={"eval_accuracy": v})
        if control.should_training_stop:
            return state.global_step
    return None


def test_the_trainer_callback_shows_user_code_no_evaluation_to_come(
        user_dir, tmp_path, monkeypatch):  # noqa: F811
    """The callback asks a user's policy about what the run has seen: a look past the
    newest evaluation reads NaN (never stops), the last service of the series is the
    newest step, not the run's end (knows_T, stopping if it exceeds twice the plan, never
    does), and the plan is max_steps; an answer no online decision gives is refused.  The
    look past is refused at its first call, where its plain-Python version raises
    IndexError (``fastsim.plain_python``); past the calls that checks, it reads NaN."""
    from fastsim import plain_python
    from fastsim.errors import ConfigError

    acc = [0.5, 0.9, 0.8, 0.7, 0.1, 0.0]
    with pytest.raises(ConfigError, match=r"peek_past raised in plain Python .*IndexError"):
        _callback_stop("toy_user_policies:peek_past:scope=all", acc, tmp_path, monkeypatch)
    with monkeypatch.context() as mp:
        mp.setattr(plain_python, "MAX_CALLS", 0)
        assert _callback_stop("toy_user_policies:peek_past:scope=all", acc, tmp_path,
                              monkeypatch) is None
    assert _callback_stop("toy_user_policies:knows_T", acc, tmp_path, monkeypatch) is None
    assert _callback_stop("toy_user_policies:below_best:k=2", acc, tmp_path, monkeypatch) == 40
    assert _callback_stop("toy_user_policies:halfway:f=0.3", acc, tmp_path, monkeypatch) == 30
    with pytest.raises(ConfigError, match="neither 0 nor the evaluation the prefix ends at"):
        _callback_stop("toy_user_policies:peek_last", acc, tmp_path, monkeypatch)


PLANNED_SRC = '''
from numba import njit
from fastsim.registry import Param, stop_policy


@stop_policy(params=[Param("over", "float", 1.0, lo=0)], reads=("scores", "t_est_h"))
@njit
def planned_long(scores, losses, attained_h, t_est_h, over):
    """A decline, in a job planned longer than over hours."""
    e = scores.shape[0]
    return e if e >= 2 and t_est_h > over and scores[e - 1] < scores[e - 2] else 0
'''


def test_a_user_policy_reading_the_plan_does_not_see_the_true_run_time(tmp_path, monkeypatch):
    """The scrambles above keep the true run time, which the physics needs, so they passed
    a driver that handed a user's policy the run time as its plan (``duration_h`` for
    ``t_est_h``).  A policy deciding on the scores and the plan, not on the service, must
    decide the same whatever the run times are."""
    (tmp_path / "toy_planned.py").write_text(PLANNED_SRC)
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = SimConfig.from_specs("fifo", "none", n_jobs=30, gpus=32, sigma=0.05)
    w = generate_workload(cfg.workload, 4, seed=9)
    cfg = cfg.with_policy(f"toy_planned:planned_long:over={float(np.median(w.t_est_h)):.6g}")
    decisions = ["in_scope", "stopped", "demoted", "trigger_eval", "delivered_eval"]
    real = run_workload(cfg, w).jobs.select(decisions)
    longer = w.with_arrays(duration_h=w.duration_h[:, ::-1] * 3.0)
    assert real.equals(run_workload(cfg, longer).jobs.select(decisions))
    # not vacuous: it stops jobs, and by their plan
    assert real["stopped"].sum() > 0
    planned = w.with_arrays(t_est_h=w.t_est_h[:, ::-1] * 3.0)
    assert not real.equals(run_workload(cfg, planned).jobs.select(decisions))
