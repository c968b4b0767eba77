"""User-written stop policies and scheduler keys, declared outside the package.

The modules below are written to a temporary directory and imported by name, as a
user's own code would be: they go through ``simulate`` (engine == reference), ``fastsim
run``, a sweep (in-process and on Dask workers, by spec string), replay, the live
monitor, and the information-boundary check.  Two user policies run in two fresh
processes must give different results (a cache keyed on the driver alone would not).
"""
from __future__ import annotations

import copy
import json
import logging
import math
import pickle
import re
import os
import subprocess
import sys
import textwrap
import warnings
import zlib
from functools import partial
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from conftest import POLICIES, after_connecting, modules_on_path, one_line, own_lines

from fastsim.api import run_workload, simulate
from fastsim.cli import main
from fastsim.config import PolicyConfig, SchedulerConfig, SimConfig, WorkloadConfig
from fastsim.errors import ConfigError
from fastsim.registry import Param
from fastsim.workload import generate_workload

sys.path.insert(0, str(Path(__file__).parent))
from reference import jobs_of, reference_simulate  # noqa: E402
from test_engine_vs_reference import compare  # noqa: E402

POLICY_SRC = '''
import numpy as np
from numba import njit
from fastsim.registry import Param, stop_policy


@stop_policy(params=[Param("k", "int", 2, lo=1, help="evaluations below the best"),
                     Param("drop", "float", 0.0, lo=0, help="margin below the best")],
             label="below_best(k={k},drop={drop:g})", lookback="k",
             min_evals=lambda v: v["k"] + 1)
@njit
def below_best(scores, losses, attained_h, t_est_h, k, drop):
    """Stop after k consecutive evaluations more than drop below the best so far."""
    best, run = -1e300, 0
    for e in range(scores.shape[0]):
        if scores[e] < best - drop:
            run += 1
            if run >= k:
                return e + 1
        else:
            run = 0
        best = max(best, scores[e])
    return 0


@stop_policy(params=[Param("drop", "float", 0.05, lo=0, help="drawdown from the best")],
             label="drawdown(drop={drop:g})", keep="best", min_evals=2)
@njit
def drawdown(scores, losses, attained_h, t_est_h, drop):
    """Stop when the score falls more than drop below the best so far; keep the best."""
    best = -1e300
    for e in range(scores.shape[0]):
        best = max(best, scores[e])
        if scores[e] < best - drop:
            return e + 1
    return 0


@stop_policy(params=[Param("w", "int", 3, lo=1), Param("tol", "float", 0.01, lo=0)],
             label="flat_loss(w={w},tol={tol:g})", reads=("losses",),
             min_evals=lambda v: v["w"] + 1)
@njit
def flat_loss(scores, losses, attained_h, t_est_h, w, tol):
    """Stop when the loss fell less than tol (relative) over w evaluations (loss_plateau,
    written by a user): the one toy policy that reads the losses."""
    for e in range(w, losses.shape[0]):
        ref = losses[e - w]
        if (ref - losses[e]) / ref < tol:
            return e + 1
    return 0


@stop_policy(params=[Param("f", "float", 0.5, lo=0, lo_open=True)], label="halfway(f={f:g})",
             reads=("attained_h", "t_est_h"))
@njit
def halfway(scores, losses, attained_h, t_est_h, f):
    """Stop at estimated progress f (stop_at, written by a user)."""
    for e in range(attained_h.shape[0]):
        if attained_h[e] / t_est_h >= f:
            return e + 1
    return 0


@stop_policy(params=[], label="knows_T")
@njit
def knows_T(scores, losses, attained_h, t_est_h):
    """Looks ahead: the last service of a full series is the run time T, hidden truth."""
    return 1 if attained_h[attained_h.shape[0] - 1] > 2.0 * t_est_h else 0


@stop_policy(params=[], label="long_plan")
@njit
def long_plan(scores, losses, attained_h, t_est_h):
    """Stops a job at once if its planned length is over 100 steps (reads t_est_h unsaid)."""
    return 1 if t_est_h > 100.0 else 0


@stop_policy(params=[], label="long_plan_said", reads=("scores", "t_est_h"))
@njit
def long_plan_said(scores, losses, attained_h, t_est_h):
    """The same, declaring that it reads the planned length."""
    return 1 if t_est_h > 100.0 else 0


@stop_policy(params=[], label="peek_past")
@njit
def peek_past(scores, losses, attained_h, t_est_h):
    """Reads one past its prefix (numba checks no bounds): stops if the next score is lower."""
    e = scores.shape[0]
    return e if scores[e] < scores[e - 1] or losses[e] == losses[e] else 0


@stop_policy(params=[], label="scan_length")
@njit
def scan_length(scores, losses, attained_h, t_est_h):
    """Reads on past its prefix, through the NaN, to where its scratch's next row begins:
    that distance was the job's number of evaluations.  Stops at what it takes to be the
    last one."""
    e = scores.shape[0]
    i = e
    while np.isnan(scores[i]):
        i += 1
    return e if e == i - 1 else 0


@stop_policy(params=[], label="says_yes")
@njit
def says_yes(scores, losses, attained_h, t_est_h):
    """Answers whether to stop (a bool), not where: its True read as evaluation 1."""
    return scores.shape[0] >= 1


@stop_policy(params=[], label="says_half")
@njit
def says_half(scores, losses, attained_h, t_est_h):
    """Returns a float: 2.0 read as evaluation 2."""
    return scores.shape[0] / 2.0 if scores.shape[0] == 4 else 0.0


@stop_policy(params=[], label="peek_last")
@njit
def peek_last(scores, losses, attained_h, t_est_h):
    """Looks ahead: stops at the first evaluation if the last score will be lower."""
    return 1 if scores[scores.shape[0] - 1] < scores[0] else 0
'''

SCHED_SRC = '''
from numba import njit
from fastsim.registry import Param, scheduler_key


@scheduler_key(params=[Param("per_gpu_h", "float", 1.0, lo=0, help="weight of GPU demand")],
               label="small_first")
@njit
def small_first(t_est_h, gpus, job_type, arrival_h, per_gpu_h):
    """Fewest estimated GPU-hours first."""
    return per_gpu_h * gpus * t_est_h


@scheduler_key(params=[Param("per_h", "float", 4.0, lo=0, help="weight of arrival time")],
               label="typed")
@njit
def typed(t_est_h, gpus, job_type, arrival_h, per_h):
    """RLHF first, then a mix of GPUs, squared estimate and arrival: every argument moves
    the key, none symmetrically (small_first cannot tell t_est_h from gpus), and the
    type against the grain of the estimates (RLHF jobs are the long ones)."""
    return -100.0 * job_type + gpus + t_est_h * t_est_h + per_h * arrival_h
'''


@pytest.fixture(scope="module")
def user_dir(tmp_path_factory):
    yield from modules_on_path(tmp_path_factory, "usercode", {
        "toy_user_policies.py": POLICY_SRC, "toy_user_schedulers.py": SCHED_SRC})


POL = "toy_user_policies:below_best"


def test_user_cells_on_shared_clusters_equal_each_alone(user_dir):
    """A sweep chunk's cells share one drawing of the clusters (``simulate_cells``): a
    user's stop policy and scheduler key, after a built-in cell that reads no score and
    before one that does, give what each gives alone, to the bit."""
    from fastsim.api import simulate_cells

    cfgs = [SimConfig.from_specs(s, p, n_jobs=14, gpus=16) for s, p in (
        ("fifo", "none"), ("srtf_est", POL), ("toy_user_schedulers:small_first", "none"),
        ("toy_user_schedulers:small_first", POL), ("tiresias", "evalstop:k=2"))]
    together = dict(simulate_cells(cfgs, 3, seed=4, keep_jobs=True))
    for i, cfg in enumerate(cfgs):
        alone = simulate(cfg, 3, seed=4, keep_jobs=True)
        assert alone.clusters.equals(together[i].clusters), cfg
        assert alone.jobs.equals(together[i].jobs), cfg


def test_spec_grammar_resolves_user_code(user_dir, monkeypatch):
    from fastsim.metrics import lookup as metric_lookup

    p = PolicyConfig.parse(f"{POL}:k=3,drop=0.01")
    assert p.name == POL and dict(p.params) == {"k": 3, "drop": 0.01}
    assert p.label == "below_best(k=3,drop=0.01)" and p.min_evals == 4 and len(p.impl) == 16
    assert PolicyConfig.parse(POL).params == (("k", 2), ("drop", 0.0))  # defaults filled in
    with pytest.raises(ConfigError, match="'w' is not a parameter of toy_user_policies:below_best"):
        PolicyConfig.parse(f"{POL}:w=3")
    with pytest.raises(ConfigError, match=r"policy.k=0 is invalid; allowed: an integer in \[1"):
        PolicyConfig.parse(f"{POL}:k=0")
    with pytest.raises(ConfigError, match="cannot be imported"):
        PolicyConfig.parse("no_such_module_xyz:det")
    with pytest.raises(ConfigError, match="differs"):
        PolicyConfig(name=POL, params=(("k", 2),), impl="0" * 16)
    # a misspelt function is refused with what the module does declare
    with pytest.raises(ConfigError, match=r"has no attribute 'below'\); allowed: .*; "
                       r"toy_user_policies declares below_best \(a stop policy\), "):
        PolicyConfig.parse("toy_user_policies:below")
    with pytest.raises(ConfigError, match=r"toy_user_schedulers declares small_first \(a "
                       r"scheduler key\)"):
        SchedulerConfig.parse("toy_user_schedulers:small")
    with pytest.raises(ConfigError, match=r"; json declares no @stop_policy, @scheduler_key "
                       r"or @cluster_metric$"):
        PolicyConfig.parse("json:nothing_here")
    # one kind named where the other goes said only what was allowed, not what it is
    with pytest.raises(ConfigError, match=r"^policy='toy_user_schedulers:small_first' is not a "
                       r"declared policy; allowed: an object made by @stop_policy "
                       r"\(toy_user_schedulers:small_first is a scheduler key, not a stop "
                       r"policy\)$"):
        PolicyConfig.parse("toy_user_schedulers:small_first")
    with pytest.raises(ConfigError, match=rf"^scheduler='{POL}' is not a declared scheduler; "
                       rf"allowed: an object made by @scheduler_key \({POL} is a stop policy, "
                       r"not a scheduler key\)$"):
        SchedulerConfig.parse(POL)
    # a metric named as a scheduler or a policy, and the reverse, said only what was allowed
    import fastsim.metrics as M
    monkeypatch.setattr(M, "_METRICS", dict(M._METRICS))
    (user_dir / "toy_user_kind_metric.py").write_text(
        "from fastsim.metrics import cluster_metric\n\n\n@cluster_metric()\n"
        "def gpu_total(jobs):\n    return jobs['gpus'].sum(axis=1) * 1.0\n")
    met = "toy_user_kind_metric:gpu_total"
    with pytest.raises(ConfigError, match=rf"^scheduler='{met}' is not a declared scheduler; "
                       rf"allowed: an object made by @scheduler_key \({met} is a metric, not a "
                       r"scheduler key\)$"):
        SchedulerConfig.parse(met)
    with pytest.raises(ConfigError, match=rf"\({met} is a metric, not a stop policy\)$"):
        PolicyConfig.parse(met)
    for ref, kind in (("toy_user_schedulers:small_first", "scheduler key"),
                      (POL, "stop policy")):
        with pytest.raises(ConfigError, match=rf"^metric='{ref}' is invalid; allowed: "
                           rf"MODULE:FUNCTION of a @cluster_metric \({ref} is a {kind}, not a "
                           r"metric\)$"):
            metric_lookup(ref)
    s = SchedulerConfig.parse("toy_user_schedulers:small_first:per_gpu_h=2")
    assert s.params == (("per_gpu_h", 2.0),) and s.label == "small_first"
    cfg = SimConfig.from_specs("toy_user_schedulers:small_first", f"{POL}:k=2")
    assert SimConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg


@pytest.mark.parametrize("scheduler", ["fifo", "srtf_est", "tiresias", "loss_aware",
                                       "toy_user_schedulers:small_first",
                                       "toy_user_schedulers:typed"])
@pytest.mark.parametrize("policy", [f"{POL}:k=2", f"{POL}:k=1,drop=0.02",
                                    "toy_user_policies:halfway:f=0.4", "evalstop:k=2",
                                    "toy_user_policies:drawdown:drop=0.03",
                                    "toy_user_policies:flat_loss:w=2,tol=0.05"])
def test_engine_matches_reference_with_user_code(user_dir, scheduler, policy):
    # a stable seed: hash() of a str changes with every process (PYTHONHASHSEED)
    rng = np.random.default_rng(zlib.crc32(f"{scheduler} {policy}".encode()))
    # the second case against the reference in exact arithmetic: user code sees floats there
    for reference in (reference_simulate, partial(reference_simulate, exact=True)):
        wc = WorkloadConfig(gpus=16, n_jobs=int(rng.integers(6, 14)), load=1.2,
                            demands_rlhf=(4, 8, 16), n_evals=int(rng.integers(3, 7)),
                            sigma=0.05, mix="mixed", preempt_overhead_h=0.1,
                            est_sigma=float(rng.uniform(0, 1)))
        cfg = SimConfig(wc, SchedulerConfig.parse(scheduler), PolicyConfig.parse(policy))
        compare(cfg, seed=int(rng.integers(0, 1000)), cluster_start=0, n_clusters=4,
                reference=reference)


@pytest.mark.parametrize("scheduler", ["toy_user_schedulers:small_first",
                                       "toy_user_schedulers:typed"])
@pytest.mark.parametrize("policy", POLICIES)
def test_user_keys_match_the_reference_under_every_builtin_policy(user_dir, scheduler, policy):
    # docs/extending.md: a user's key runs the sjf_est path, checked against the reference
    # for every stop policy, the built-ins' each with its default parameters
    rng = np.random.default_rng(zlib.crc32(f"{scheduler} {policy}".encode()))
    wc = WorkloadConfig(gpus=16, n_jobs=int(rng.integers(6, 14)), load=1.2,
                        demands_rlhf=(4, 8, 16), n_evals=int(rng.integers(5, 8)),
                        sigma=0.05, mix="mixed", preempt_overhead_h=0.1,
                        est_sigma=float(rng.uniform(0, 1)))
    cfg = SimConfig(wc, SchedulerConfig.parse(scheduler), PolicyConfig.parse(policy))
    compare(cfg, seed=int(rng.integers(0, 1000)), cluster_start=0, n_clusters=4)


def test_user_policy_equals_the_builtin_it_rewrites(user_dir):
    # halfway is stop_at written by a user: identical results, bit for bit.
    base = SimConfig.from_specs("srtf_est", "stop_at:f=0.4", n_jobs=60)
    mine = base.with_policy("toy_user_policies:halfway:f=0.4")
    a, b = simulate(base, 6, seed=2), simulate(mine, 6, seed=2)
    assert a.clusters.equals(b.clusters)
    # flat_loss is loss_plateau: the user's trigger must be handed the loss readings
    base = SimConfig.from_specs("srtf_est", "loss_plateau:w=2,tol=0.05", n_jobs=60,
                                loss_sigma=0.02)
    a = simulate(base, 6, seed=2)
    b = simulate(base.with_policy("toy_user_policies:flat_loss:w=2,tol=0.05"), 6, seed=2)
    assert a.clusters.equals(b.clusters) and a.clusters["n_stopped"].sum() > 0


def test_user_code_sees_no_hidden_truth(user_dir):
    from test_information_boundary import DECISIONS, _scramble

    cfg = SimConfig.from_specs("toy_user_schedulers:small_first", f"{POL}:k=1", n_jobs=40,
                               gpus=32)
    w = generate_workload(cfg.workload, 4, seed=9)
    for c in (cfg, cfg.with_policy("toy_user_policies:halfway")):
        real = run_workload(c, w).jobs.select(DECISIONS)
        assert real.equals(run_workload(c, _scramble(w, 1)).jobs.select(DECISIONS))


def test_user_driver_passes_only_observations():
    import inspect

    from fastsim.kernels import stops

    src = inspect.getsource(stops.causal_trigger_nb)
    call = src[src.index("r = trigger("):]
    call = call[: call.index(")") + 1]
    assert call == "r = trigger(shown[0, :e], shown[1, :e], shown[2, :e], t_est_h, *params)"


@pytest.mark.parametrize("name", ["knows_T", "peek_last"])
def test_a_user_policy_sees_no_evaluation_to_come(user_dir, tmp_path, capsys, name):
    """Asked about each prefix in turn, a policy that reads the end of its series (the run
    time T in the last service, a score to come) gets what it has seen so far, and its
    answers, not those of an online decision, are refused in one line."""
    cfg = SimConfig.from_specs("srtf_est", f"toy_user_policies:{name}:scope=all", n_jobs=20)
    with pytest.raises(ConfigError, match="neither 0 nor the evaluation the prefix ends") as e:
        simulate(cfg, 4, seed=0)
    # its parameters as a spec writes them: the line ended in a Python dict
    assert f"(run as toy_user_policies:{name}:scope=all)" in str(e.value)
    if name != "peek_last":  # replay's attained service never exceeds 2 t_est: no stop
        return
    log = tmp_path / "l.csv"
    log.write_text("job_id,step,score\na,1,0.9\na,2,0.8\na,3,0.7\na,4,0.1\n")
    out = tmp_path / "r.csv"
    assert main(["replay", str(log), "--policy", f"toy_user_policies:{name}:scope=all",
                 "--out", str(out)]) == 2
    assert "neither 0 nor the evaluation" in capsys.readouterr().err and not out.exists()


def test_a_user_policy_reading_past_its_prefix_finds_nan(user_dir):
    """An index past the prefix reads the caller's scratch, NaN there, not the series: the
    look-ahead policy above, which read the next score before, never stops.  (From
    cluster 1: on cluster 0 its plain Python version raises IndexError, and the run is
    refused, as the monitor refuses it at its first call.)"""
    cfg = SimConfig.from_specs("srtf_est", "toy_user_policies:peek_past:scope=all", n_jobs=20)
    assert simulate(cfg, 4, seed=0, cluster_start=1).clusters["n_stopped"].sum() == 0
    with pytest.raises(ConfigError, match=r"peek_past raised in plain Python .*: IndexError: "):
        simulate(cfg, 4, seed=0)
    from fastsim.replay.monitor import StopMonitor

    m = StopMonitor("toy_user_policies:peek_past:scope=all")
    # it loads the losses, so the monitor asks for them (the series past the prefix are NaN)
    with pytest.raises(ConfigError, match=r"peek_past raised in plain Python .*'a', "
                                          r"evaluation 1\): IndexError: "):
        m.observe("a", 1, 0.5, loss=1.0)


def test_replay_scratch_does_not_tell_a_user_policy_the_jobs_length(user_dir, tmp_path):
    """Replay asked a job's prefixes in scratch sized to the job, so a policy reading past
    its prefix (numba checks no bounds) found the job's length where the NaN ended, and
    stopped each job exactly at its last logged evaluation.  The scratch now grows with
    the prefix, as the monitor's does, and tells nothing the prefix does not."""
    from fastsim.plain_python import PlainCheck
    from fastsim.replay.policies import decide_series, parse_policy

    p = parse_policy("toy_user_policies:scan_length")
    # the compiled answers alone: its plain Python raises past the prefix, and is refused
    unchecked = PlainCheck(p)
    unchecked.off = True
    for n in (3, 5, 9):
        s = np.linspace(0.1, 0.9, n)
        assert decide_series(p, s, np.zeros(n), np.arange(1.0, n + 1), math.nan,
                             unchecked)[1] == 0, n


def test_decide_series_called_alone_checks_a_user_policys_plain_python(user_dir):
    """Replay and the monitor ask a user policy's plain-Python version beside its compiled
    one; decide_series called alone (one job's series) did not, and answered what the
    compiled code made of an index past the prefix, unsaid.  It now checks as they do."""
    from fastsim.replay.policies import decide_series, parse_policy

    p = parse_policy("toy_user_policies:peek_past")
    with pytest.raises(ConfigError, match=r"peek_past raised in plain Python where its compiled "
                                          r"code returned \(its \.py_func, on evaluation 1 of "
                                          r"the series\): IndexError: "):
        decide_series(p, np.ones(4), np.zeros(4), np.arange(1.0, 5), math.nan)


@pytest.mark.parametrize("name,returns", [("says_yes", "bool"), ("says_half", "float64")])
def test_a_trigger_that_returns_no_integer_is_refused_naming_its_type(user_dir, name, returns):
    """A trigger returning a bool stopped every job at evaluation 1 (True == 1), and one
    returning a float was taken where it happened to equal the prefix's length: each is
    now refused in one line naming the type, in the simulator, replay and the monitor."""
    from fastsim.replay.monitor import StopMonitor
    from fastsim.replay.policies import decide_series, parse_policy

    spec = f"toy_user_policies:{name}:scope=all"
    # and where: its file and its def line
    said = (f"stop policy toy_user_policies:{name} returns {returns} (toy_user_policies.py, "
            f"line ")
    with pytest.raises(ConfigError, match=re.escape(said)):
        simulate(SimConfig.from_specs("fifo", spec, n_jobs=10), 2, seed=0)
    with pytest.raises(ConfigError, match=re.escape(said)):
        decide_series(parse_policy(spec), np.ones(5), np.zeros(5), np.arange(1.0, 6), math.nan)
    with pytest.raises(ConfigError, match=re.escape(said)):
        m = StopMonitor(spec)
        for step in range(1, 6):
            m.observe("a", step, 0.5)


def test_a_float_trigger_is_refused_for_its_type_with_no_warning_before(user_dir, tmp_path,
                                                                         capsys, monkeypatch):
    """Replay asks a policy's plain-Python version beside each compiled call: a trigger
    returning a float was first warned of as deciding otherwise ("compiled,
    no stop; plain, an answer that is no integer; numba's sums and libm may round a last
    bit otherwise ... near tie"), a cause it did not have, then refused for its type."""
    import fastsim.plain_python as P
    from fastsim.errors import PlainPythonWarning
    from fastsim.replay.policies import decide_series, parse_policy

    monkeypatch.setattr(P, "_SAID", set())  # said once a process: not left to test order
    said = "stop policy toy_user_policies:says_half returns float64 (toy_user_policies.py"
    with warnings.catch_warnings():
        warnings.simplefilter("error", PlainPythonWarning)
        with pytest.raises(ConfigError, match=re.escape(said)):
            decide_series(parse_policy("toy_user_policies:says_half"), np.ones(5), np.zeros(5),
                          np.arange(1.0, 6), math.nan)
    log = tmp_path / "l.csv"
    log.write_text("job_id,step,score\n" + "".join(f"a,{s},0.5\n" for s in range(1, 6)))
    assert main(["replay", str(log), "--policy", "toy_user_policies:says_half"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0], err


def test_replay_gives_user_policies_no_hindsight_length(user_dir, tmp_path, capsys):
    """Without max_steps replay knows a job's length only from its last logged step, which
    is hindsight: a user policy gets NaN for it, or, if it declares reading t_est_h, the
    log is refused before anything runs."""
    log = tmp_path / "l.csv"
    log.write_text("job_id,step,score\nshort,10,0.5\nshort,20,0.6\nshort,50,0.7\n"
                   "long,10,0.5\nlong,20,0.6\nlong,500,0.7\n")
    out = tmp_path / "r.csv"
    assert main(["replay", str(log), "--policy", "toy_user_policies:long_plan",
                 "--out", str(out)]) == 0
    assert pl.read_csv(out)["status"].to_list() == ["continued", "continued"]
    out.unlink()
    assert main(["replay", str(log), "--policy", "toy_user_policies:long_plan_said",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "reads the planned length (t_est_h): job 'long' has no max_steps" in err
    assert not out.exists()
    # two evaluations each: a trigger at a job's only one would be at completion, not a stop
    log.write_text("job_id,step,score,max_steps\nshort,10,0.5,50\nshort,20,0.6,50\n"
                   "long,10,0.5,500\nlong,20,0.6,500\n")
    assert main(["replay", str(log), "--policy", "toy_user_policies:long_plan_said",
                 "--out", str(out)]) == 0
    status = dict(pl.read_csv(out).select("job_id", "status").iter_rows())
    assert status == {"short": "continued", "long": "stopped"}


# a stop policy that loads the losses without declaring it (reads= defaults to scores)
LOSS_UP_UNSAID = (
    "from numba import njit\nfrom fastsim.registry import stop_policy\n\n\n"
    "@stop_policy(params=[], label='loss_up')\n@njit\n"
    "def loss_up(scores, losses, attained_h, t_est_h):\n"
    "    for e in range(1, losses.shape[0]):\n"
    "        if losses[e] > losses[e - 1]:\n            return e + 1\n    return 0\n")


def test_replay_refuses_a_log_without_losses_to_a_policy_that_reads_them(tmp_path, capsys,
                                                                        monkeypatch):
    """A user's policy that loads the losses without declaring it (the default reads=
    ("scores",)), replayed on a log with no loss column, was handed none and never
    stopped: every job "continued", exit 0.  Now it is refused before anything runs, as a
    policy declaring it is, naming the policy and the column; with a loss column it stops."""
    (tmp_path / "toy_loss_unsaid.py").write_text(LOSS_UP_UNSAID)
    monkeypatch.syspath_prepend(str(tmp_path))
    log, out = tmp_path / "l.csv", tmp_path / "r.csv"
    log.write_text("job_id,step,score\na,1,0.5\na,2,0.6\na,3,0.7\na,4,0.8\n")
    assert main(["replay", str(log), "--policy", "toy_loss_unsaid:loss_up", "--out",
                 str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and not out.exists()
    assert captured.err.strip() == (
        "fastsim replay: error: policy loss_up[scope=all] (its function reads losses, not "
        "declared): the log has no 'loss' column; allowed: a policy that does not read "
        "losses (or add a loss column)")
    log.write_text("job_id,step,score,loss\na,1,0.5,1.0\na,2,0.6,0.9\na,3,0.7,1.2\n"
                   "a,4,0.8,1.3\n")
    assert main(["replay", str(log), "--policy", "toy_loss_unsaid:loss_up", "--out",
                 str(out)]) == 0
    assert pl.read_csv(out)["status"].to_list() == ["stopped"]


def test_the_monitor_refuses_a_call_without_a_loss_to_a_policy_that_reads_them(tmp_path,
                                                                               monkeypatch):
    """StopMonitor decided from the declaration alone: a user's policy that loads the
    losses without declaring it was handed NaN and never stopped.  It is now refused as a
    declared reader is, and with losses given it stops."""
    from fastsim.replay.monitor import StopMonitor

    (tmp_path / "toy_loss_unsaid_live.py").write_text(LOSS_UP_UNSAID)
    monkeypatch.syspath_prepend(str(tmp_path))
    m = StopMonitor("toy_loss_unsaid_live:loss_up")
    with pytest.raises(ConfigError, match="no loss given, and loss_up"):
        m.observe("a", 1, 0.5)
    stops = [m.observe("b", s, x, loss=l).stop
             for s, (x, l) in enumerate([(0.5, 1.0), (0.6, 0.9), (0.7, 1.2)], 1)]
    assert stops == [False, False, True]

BOTH_WORSE_UNSAID = ("from numba import njit\nfrom fastsim.registry import stop_policy\n\n\n"
                     "@stop_policy(params=[], label='both_worse')\n@njit\n"
                     "def both_worse(scores, losses, attained_h, t_est_h):\n"
                     "    for e in range(1, scores.shape[0]):\n"
                     "        if scores[e] < scores[e - 1] and losses[e] > losses[e - 1]:\n"
                     "            return e + 1\n    return 0\n")


def test_the_monitor_counts_the_evaluations_replay_counts_for_an_undeclared_loss_reader(
        tmp_path, monkeypatch):
    """A user's policy that loads the losses without declaring ``reads`` decides, in
    replay, on the rows with a score (a declared loss reader on those with a loss).  Asked
    for its losses, the monitor also took them as what counts an evaluation: a reading
    with a loss and no score was an evaluation (its score NaN) and one with a score and no
    loss was skipped, so this policy never stopped live where replay stopped it at step 30."""
    from fastsim.replay.logs import EvalLog
    from fastsim.replay.monitor import StopMonitor
    from fastsim.replay.policies import replay

    (tmp_path / "toy_both_unsaid.py").write_text(BOTH_WORSE_UNSAID)
    monkeypatch.syspath_prepend(str(tmp_path))
    spec, nan = "toy_both_unsaid:both_worse", math.nan
    rows = [(10, 0.5, 1.0), (20, nan, 1.5), (30, 0.4, 1.6), (40, 0.3, nan), (50, 0.2, 1.7)]
    step, score, loss = (list(c) for c in zip(*rows))
    t = pl.DataFrame({"job_id": ["j"] * len(rows), "step": step, "metric": score,
                      "score": score, "loss": loss})
    row = replay(EvalLog(t, "metric", True), [spec]).row(0, named=True)
    m = StopMonitor(spec)
    ds = [m.observe("j", s, x, loss=lo) for s, x, lo in rows]
    stops = [s for s, d in zip(step, ds) if d.stop]
    assert (row["trigger_step"], row["delivered_step"]) == (30, 30)
    assert (stops[0] if stops else None, ds[-1].keep_step) == (30, 30)


def test_the_monitor_hands_a_missing_loss_as_nan_as_replay_does(tmp_path, monkeypatch):
    """A reading whose loss is missing (NaN; the Trainer callback's first evaluation before
    any logged loss) reached a user's policy that reads the losses as a loss of 0.0: this
    one, stopping when the loss rises, stopped live at step 3 (0.9 > 0.0), while replay,
    handed the log's NaN, let the run go on.  Both now hand it NaN and decide alike."""
    from fastsim.replay.logs import EvalLog
    from fastsim.replay.monitor import StopMonitor
    from fastsim.replay.policies import replay

    (tmp_path / "toy_loss_gap.py").write_text(LOSS_UP_UNSAID)
    monkeypatch.syspath_prepend(str(tmp_path))
    spec, rows = "toy_loss_gap:loss_up", [(1, 0.5, 1.0), (2, 0.6, math.nan), (3, 0.7, 0.9)]
    step, score, loss = (list(c) for c in zip(*rows))
    t = pl.DataFrame({"job_id": ["j"] * len(rows), "step": step, "metric": score,
                      "score": score, "loss": loss})
    assert replay(EvalLog(t, "metric", True), [spec])["status"].to_list() == ["continued"]
    m = StopMonitor(spec)
    assert [m.observe("j", s, x, loss=lo).stop for s, x, lo in rows] == [False] * 3


def test_the_trainer_callback_skips_an_evaluation_without_its_metric_for_an_undeclared_loss_reader(
        tmp_path, monkeypatch):
    """An evaluation without the callback's metric (another eval dataset's, reported first
    at the same step) is no evaluation of a policy that counts its scores: passed to the
    monitor for a user's policy that loads the losses undeclared, it took the step with a
    NaN score, and the metric's own evaluation at that step was dropped; the policy never
    stopped.  It stops at step 30, as replay and the monitor decide on the same readings."""
    from types import SimpleNamespace

    from fastsim.replay import hf

    (tmp_path / "toy_both_unsaid_cb.py").write_text(BOTH_WORSE_UNSAID)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(hf, "_TrainerCallback", type("Base", (), {}))
    args = SimpleNamespace(metric_for_best_model="accuracy", greater_is_better=True,
                           max_steps=100, eval_strategy="steps", save_strategy="steps",
                           eval_steps=10, save_steps=10, save_total_limit=None,
                           output_dir=str(tmp_path), load_best_model_at_end=False)
    cb = hf.StopPolicyCallback("toy_both_unsaid_cb:both_worse")
    state = SimpleNamespace(global_step=0, log_history=[])
    control = SimpleNamespace(should_training_stop=False)
    cb.on_train_begin(args, state, control)
    with pytest.warns(UserWarning, match="metric 'eval_accuracy' not in the evaluation"):
        for acc, loss in zip([0.5, 0.45, 0.4, 0.3], [1.0, 0.9, 1.6, 1.7]):
            state.global_step += 10
            state.log_history.append({"loss": loss, "step": state.global_step})
            for metrics in ({"eval_other": 0.0}, {"eval_accuracy": acc}):
                cb.on_evaluate(args, state, control, metrics=metrics)
            if control.should_training_stop:
                break
    assert control.should_training_stop and state.global_step == 30 and cb.keep_step == 30


def test_run_sweep_and_replay_accept_user_policies(user_dir, tmp_path, capsys):
    assert main(["run", "--policy", f"{POL}:k=2", "--scheduler",
                 "toy_user_schedulers:small_first", "--clusters", "3", "--n-jobs", "20"]) == 0
    assert "below_best(k=2,drop=0) over small_first" in capsys.readouterr().out
    sweep = tmp_path / "u.toml"
    sweep.write_text(f'clusters = 4\nchunk = 2\n[base]\nn_jobs = 20\n[axes]\n'
                     f'policy = ["{POL}:k=1", "{POL}:k=2", "evalstop:k=2"]\n')
    assert main(["sweep", str(sweep), "--out", str(tmp_path / "out"), "--no-progress"]) == 0
    summary = pl.read_parquet(tmp_path / "out" / "summary.parquet")
    assert {"below_best(k=1,drop=0)", "below_best(k=2,drop=0)"} <= set(summary["policy"])
    log = tmp_path / "log.csv"
    log.write_text("job_id,step,score\na,1,0.5\na,2,0.7\na,3,0.6\na,4,0.65\na,5,0.2\n"
                   "b,1,0.1\nb,2,0.2\n")
    out = tmp_path / "r.csv"
    assert main(["replay", str(log), "--policy", f"{POL}:k=3", "--out", str(out)]) == 0
    r = pl.read_csv(out).filter(pl.col("job_id") == "a").row(0, named=True)
    assert r["trigger_step"] == 5 and r["delivered_step"] == 2  # 3 below 0.7, keep 3 back


def test_a_sweep_baseline_may_be_a_user_policy(user_dir, tmp_path, capsys):
    """A sweep file's baseline takes what run --baseline takes, a user's policy included:
    the user cell is the shared baseline, and the others are paired against it."""
    sweep = tmp_path / "ub.toml"
    sweep.write_text(f'clusters = 4\nchunk = 2\nbaseline = "{POL}:k=2"\n[base]\nn_jobs = 20\n'
                     f'[axes]\npolicy = ["{POL}:k=2", "evalstop:k=2", "none"]\n')
    assert main(["sweep", str(sweep), "--out", str(tmp_path / "out"), "--no-progress"]) == 0
    capsys.readouterr()
    cells = pl.read_parquet(tmp_path / "out" / "cells.parquet").sort("policy")
    assert cells.select("policy", "baseline_policy", "is_baseline").rows() == [
        ("below_best(k=2,drop=0)", None, True), ("evalstop(k=2)", "below_best(k=2,drop=0)", False),
        ("none", "below_best(k=2,drop=0)", False)]


def test_monitor_streams_user_and_builtin_policies_like_replay(user_dir):
    from fastsim.replay.logs import EvalLog
    from fastsim.replay.monitor import StopMonitor
    from fastsim.replay.policies import replay

    rng = np.random.default_rng(0)
    specs = [f"{POL}:k=2", "evalstop:k=2", "stop_at:f=0.5", "loss_plateau:w=2,tol=0.05",
             "toy_user_policies:halfway:f=0.3"]
    for _ in range(30):
        n = int(rng.integers(1, 12))
        sc = np.round(rng.random(n), 1)
        lo = np.round(2 - np.cumsum(rng.random(n)) / 5, 2)
        steps = 10 * np.arange(1, n + 1)
        t = pl.DataFrame({"job_id": ["j"] * n, "step": steps, "metric": sc, "score": sc,
                          "loss": lo, "max_steps": [10.0 * 12] * n})
        res = replay(EvalLog(t, "metric", True), specs)
        for spec, row in zip(specs, res.iter_rows(named=True)):
            m = StopMonitor(spec, planned_steps=120)
            ds = [m.observe("j", int(s), float(x), float(l)) for s, x, l in zip(steps, sc, lo)]
            stops = [int(s) for s, d in zip(steps, ds) if d.stop]
            assert (stops[0] if stops else None) == row["trigger_step"], spec
            if stops:
                assert ds[-1].keep_step == row["delivered_step"], spec


def test_monitor_asks_a_user_policy_once_per_evaluation_and_decides_as_the_engine(
        user_dir, monkeypatch):
    """Long series (the monitor's scratch grows past 16, 32 and 64 evaluations): the
    monitor's decision is ``decide_series``'s (the engine's ``causal_trigger_nb`` over
    every prefix), and it asks the trigger once per scored evaluation; it asked about
    every prefix again at each evaluation (cubic in evaluations).  The compiled decisions
    alone, past the calls whose plain-Python version is checked (which refuses peek_past:
    ``test_the_monitor_checks_its_first_calls_only``)."""
    from fastsim import plain_python
    from fastsim.replay import monitor as M

    monkeypatch.setattr(plain_python, "MAX_CALLS", 0)
    from fastsim.replay.policies import decide_series

    calls = []
    real = M.user_prefix_driver

    def counting(trigger):
        f = real(trigger)
        return lambda *a: calls.append(a[1]) or f(*a)
    monkeypatch.setattr(M, "user_prefix_driver", counting)
    rng = np.random.default_rng(7)
    specs = [f"{POL}:k=3,drop=0.05", "toy_user_policies:drawdown:drop=0.3",
             "toy_user_policies:flat_loss:w=3,tol=0.001", "toy_user_policies:peek_past"]
    fired = 0
    for _ in range(12):
        n = int(rng.integers(20, 90))
        sc = np.cumsum(rng.normal(0.01, 0.05, n))
        lo = 2 - np.cumsum(rng.random(n)) / n
        for spec in specs:
            p = PolicyConfig.parse(spec)
            _, trig, deliv = decide_series(p, sc.copy(), lo.copy(), np.arange(1.0, n + 1),
                                           np.nan)
            m, calls[:] = M.StopMonitor(spec), []
            stop = next((e for e in range(1, n + 1)
                         if m.observe("j", e, float(sc[e - 1]), float(lo[e - 1])).stop), 0)
            assert stop == trig, spec
            assert calls == list(range(1, (trig or n) + 1)), spec
            if trig:
                fired += 1
                assert m.decision("j").keep_step == deliv, spec
    assert fired > 12


def test_monitor_refuses_policies_without_a_streaming_form():
    from fastsim.replay.monitor import StopMonitor

    for spec in ("oracle", "deprioritize:k=2"):
        with pytest.raises(ConfigError, match="no streaming form"):
            StopMonitor(spec)
    with pytest.raises(ConfigError, match="planned_steps"):
        StopMonitor("stop_at:f=0.5")


def _run_in_fresh_process(module: str, src: str, d: Path) -> dict:
    (d / f"{module}.py").write_text(src)
    code = textwrap.dedent(f"""
        import json
        from fastsim.api import simulate
        from fastsim.config import SimConfig
        cfg = SimConfig.from_specs("srtf_est", "{module}:detector", n_jobs=30)
        c = simulate(cfg, 4, seed=1).clusters
        print(json.dumps({{"n_stopped": c["n_stopped"].to_list()}}))
    """)
    # The shared on-disk cache, as a user's runs would have it: the built-ins load from it,
    # and a driver that wrongly cached the first user's function would be found there.
    # No bytecode cache: the two sources have one size, and a rewrite within the second of
    # the first would pass Python's (mtime in seconds, size) check and load the old module.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(d), os.environ.get("PYTHONPATH", "")]),
           "PYTHONDONTWRITEBYTECODE": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


DETECTOR = '''
from numba import njit
from fastsim.registry import stop_policy


@stop_policy()
@njit
def detector(scores, losses, attained_h, t_est_h):
    return {body}
'''


def test_two_user_policies_in_two_fresh_processes_differ(tmp_path):
    # Same module layout, same function name, same driver: only the user's code differs.
    a = _run_in_fresh_process("fresh_policy", DETECTOR.format(body="1"), tmp_path)
    b = _run_in_fresh_process("fresh_policy", DETECTOR.format(body="0"), tmp_path)
    assert a["n_stopped"] != b["n_stopped"]
    assert all(n == 0 for n in b["n_stopped"]) and all(n > 0 for n in a["n_stopped"])


def test_user_policy_on_dask_workers_by_spec_string(user_dir, tmp_path, monkeypatch):
    distributed = pytest.importorskip("dask.distributed")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(user_dir),
                                                      os.environ.get("PYTHONPATH", "")]))
    sweep = tmp_path / "d.toml"
    sweep.write_text(f'clusters = 4\nchunk = 2\n[base]\nn_jobs = 20\n[axes]\n'
                     f'policy = ["{POL}:k=2"]\n')
    local, remote = tmp_path / "local", tmp_path / "dask"
    assert main(["sweep", str(sweep), "--out", str(local), "--no-progress"]) == 0
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        assert main(["sweep", str(sweep), "--out", str(remote), "--no-progress", "--backend",
                     "dask", "--address", cluster.scheduler_address]) == 0
    assert pl.read_parquet(local / "summary.parquet").equals(
        pl.read_parquet(remote / "summary.parquet"))


def test_user_policy_can_keep_the_best_checkpoint(user_dir):
    """A user policy with ``keep="best"`` delivers the best score's checkpoint up to the
    trigger, in the simulator, replay and the monitor alike."""
    from fastsim.replay.monitor import StopMonitor
    from fastsim.replay.policies import decide_series

    cfg = SimConfig.from_specs("fifo", "toy_user_policies:drawdown:drop=0.02", n_jobs=30,
                               sigma=0.05)
    jobs = simulate(cfg, 3, seed=1, keep_jobs=True).jobs
    w = generate_workload(cfg.workload, 3, seed=1)
    stopped = jobs.filter(pl.col("stopped"))
    assert stopped.height > 0
    for r in stopped.iter_rows(named=True):
        s = w.score[r["cluster"], r["job"]]
        assert r["delivered_eval"] == 1 + int(np.argmax(s[: r["trigger_eval"]]))
        _, trig, deliv = decide_series(cfg.policy, s.copy(), np.zeros(s.size),
                                       np.arange(1.0, s.size + 1), 1.0)
        assert (trig, deliv) == (r["trigger_eval"], r["delivered_eval"])
        m = StopMonitor(cfg.policy)
        for e, x in enumerate(s):
            d = m.observe("j", e + 1, float(x))
        assert m.decision("j").keep_step == deliv


@pytest.mark.parametrize("kind,args,want", [
    ("policy", "losses, scores, attained_h, t_est_h", "(scores, losses, attained_h, t_est_h)"),
    ("scheduler", "gpus, t_est_h, job_type, arrival_h", "(t_est_h, gpus, job_type, arrival_h)"),
])
def test_observations_named_in_another_order_are_refused(kind, args, want):
    """The observations arrive by position too, under any names (``s, l, a, t`` is fine),
    but a function naming them in another order read each under the other's name: a key
    written ``(gpus, t_est_h, ...)`` ordered the jobs by GPU demand, a policy written
    ``(losses, scores, ...)`` decided on the losses, and the run exited 0."""
    from numba import njit

    from fastsim.registry import scheduler_key, stop_policy

    namespace = {}
    exec(f"def f({args}):\n    return 0\n", namespace)
    declare = stop_policy() if kind == "policy" else scheduler_key()
    with pytest.raises(ConfigError, match=re.escape(
            f"arguments differ from the declaration; allowed: {want}")):
        declare(njit(namespace["f"]))
    exec("def g(s, l, a, t):\n    return 0\n", namespace)  # other names: by position
    declare(njit(namespace["g"]))


@pytest.mark.parametrize("flag,declare,said", [
    ("--scheduler", "@stop_policy()\n@njit\ndef f(t_est_h, gpus, job_type, arrival_h):\n",
     "(line 5 declares with @stop_policy; this place takes a @scheduler_key)"),
    # the hint was read off the line's text, which this spelling did not match
    ("--scheduler", "@R.stop_policy()\n@njit\ndef f(t_est_h, gpus, job_type, arrival_h):\n",
     "(line 5 declares with @stop_policy; this place takes a @scheduler_key)"),
    ("--metric", "@stop_policy()\ndef f(jobs):\n",
     "(line 5 declares with @stop_policy; this place takes a @cluster_metric)"),
    ("--scheduler", "@njit\n@scheduler_key()\ndef f(t_est_h, gpus, job_type, arrival_h):\n",
     "allowed: a numba.njit-decorated function, with @njit below @scheduler_key(...), next "
     "to its def"),
])
def test_a_declaration_of_the_wrong_kind_or_order_says_so(tmp_path, capsys, monkeypatch,
                                                           flag, declare, said):
    """A key declared with @stop_policy was refused for its arguments, "allowed: (scores,
    losses, attained_h, t_est_h)", which asked its author to rewrite it as a policy; @njit
    written above @scheduler_key was "not an @njit function" beside the @njit in sight."""
    path = tmp_path / "toy_wrong_kind.py"
    path.write_text("from numba import njit\nimport fastsim.registry as R\nfrom fastsim.registry "
                    f"import scheduler_key, stop_policy\n\n{declare}    return 0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "toy_wrong_kind", raising=False)
    one_line(capsys, ["run", flag, "toy_wrong_kind:f"], said)


def test_a_user_keys_parameter_given_to_from_specs_says_where_it_goes(user_dir):
    """``from_specs("mykeys:gpu_h_first", per_gpu=0.5)`` listed the workload's fields as
    allowed, where a built-in's ``k`` is told to go in its spec."""
    with pytest.raises(ConfigError, match=re.escape(
            "keyword 'per_gpu_h' is unknown: per_gpu_h is a parameter of toy_user_schedulers:"
            "small_first; it goes in the spec, scheduler=\"toy_user_schedulers:small_first:"
            "per_gpu_h=...\"")):
        SimConfig.from_specs("toy_user_schedulers:small_first", "evalstop", per_gpu_h=1.0)


@pytest.mark.parametrize("kind,args,params,gets", [
    ("scheduler", "duration_h, gpus, job_type, arrival_h", (), "receives t_est_h"),
    ("policy", "gold, losses, attained_h, t_est_h", (), "receives scores"),
    ("scheduler", "t_est_h, gpus, job_type, arrival_h, hacking", (), "no such argument is passed"),
    ("policy", "scores, losses, attained_h, t_est_h, gold", ("k",), "receives k, whatever"),
])
def test_an_argument_named_as_hidden_truth_is_refused(kind, args, params, gets):
    """A key written ``(duration_h, gpus, ...)`` read as an oracle of the true run time to
    its author, and ordered the jobs by the estimate it was given, exit 0; a parameter of
    the declaration may take such a name (a ``tau`` of the user's own).  In a declared
    parameter's place it was said to receive nothing ("no such argument is passed")."""
    from numba import njit

    from fastsim.registry import scheduler_key, stop_policy

    namespace = {}
    exec(f"def f({args}):\n    return 0\n", namespace)
    declared = [Param(p, "int", 2) for p in params]
    declare = (stop_policy if kind == "policy" else scheduler_key)(params=declared)
    name = next(a for a in args.split(", ") if a in ("duration_h", "gold", "hacking"))
    with pytest.raises(ConfigError, match=re.escape(f"{name} is hidden truth, which no ")) as e:
        declare(njit(namespace["f"]))
    assert gets in str(e.value)
    exec("def g(t_est_h, gpus, job_type, arrival_h, tau):\n    return 0\n", namespace)
    scheduler_key(params=[Param("tau", "float", 1.0)])(njit(namespace["g"]))

def test_declarations_match_their_functions_and_replay_takes_bare_names(user_dir):
    """Declared parameters arrive by position: a function whose arguments name them in
    another order, a parameter kind the compiled call cannot take, or a label naming an
    undeclared parameter is refused when declared, not after a whole run."""
    from numba import njit

    from fastsim.registry import Param, scheduler_key, stop_policy
    from fastsim.replay.policies import parse_policy

    two = [Param("k", "int", 2, lo=1), Param("drop", "float", 0.5, lo=0)]

    def swapped(scores, losses, attained_h, t_est_h, drop, k):
        return 0

    with pytest.raises(ConfigError, match=r"arguments differ from the declaration; allowed: "
                                          r"\(scores, losses, attained_h, t_est_h, k, drop\)"):
        stop_policy(params=two)(njit(swapped))
    with pytest.raises(ConfigError, match=r"Param\('th', 'floats', ...\): kind 'floats' is "
                                          "invalid; allowed: int, float or bool"):
        stop_policy(params=[Param("th", "floats", (1.0,))])(
            njit(lambda scores, losses, attained_h, t_est_h, th: 0))
    with pytest.raises(ConfigError, match=r"label 'a \{x\}' cannot be formatted"):
        scheduler_key(label="a {x}")(njit(lambda t_est_h, gpus, job_type, arrival_h: 0.0))
    assert parse_policy(POL).label == "below_best(k=2,drop=0)[scope=all]"  # no ',scope' glued
    from fastsim.metrics import cluster_metric

    def cluster(jobs):
        return jobs["gpus"].sum(axis=1)

    with pytest.raises(ConfigError, match="metric 'cluster' is a built-in column"):
        cluster_metric()(cluster)


def test_a_metric_name_another_module_declared_is_refused(monkeypatch):
    """Summaries find a metric's label, bounds and pairing by its column's name: a second
    module's metric of the same name replaced the first's, so a run of the first was
    summarised with the second's bounds (an interval of a mean 2,445 cut to hi 0)."""
    import fastsim.metrics as M

    monkeypatch.setattr(M, "_METRICS", dict(M._METRICS))

    def share(jobs):
        return jobs["gpus"].sum(axis=1) * 1.0

    share.__module__ = "toy_share_a"
    first = M.cluster_metric(bounds=(0, math.inf))(share)

    def share(jobs):  # noqa: F811 - the same name, in another module
        return -jobs["gpus"].sum(axis=1) * 1.0

    share.__module__ = "toy_share_b"
    with pytest.raises(ConfigError, match="toy_share_a:share and toy_share_b:share both fill "
                                          "'share'; allowed: a new name"):
        M.cluster_metric(bounds=(-math.inf, 0))(share)
    assert M.estimate_range("share", "mean") == (0.0, math.inf)
    M.cluster_metric(bounds=(0, math.inf))(first.fn)  # its own module again (a reload)


def test_a_metric_labelled_as_another_row_is_refused_when_declared(monkeypatch):
    """A summary's rows are named by label alone: a metric labelled "mean JCT (h)" was a
    second row of that name in `fastsim run`'s table and in each cell of a sweep's
    summary.txt, one the reader could not tell from the built-in's."""
    import fastsim.metrics as M

    monkeypatch.setattr(M, "_METRICS", dict(M._METRICS))

    def toy_jct(jobs):
        return jobs["jct_h"].mean(axis=1)

    toy_jct.__module__ = "toy_label_a"
    for kw, said in (
            (dict(label="mean JCT (h)"), "label='mean JCT (h)' names a row the built-in "
                                         "metric jct_mean_h has"),
            (dict(label="mine", paired="mean JCT change"), "paired='mean JCT change' names a "
                                                           "row the built-in metric jct_mean_h"),
            (dict(label="mine", paired="mine"), "paired='mine' is its own label")):
        with pytest.raises(ConfigError, match=re.escape(f"metric toy_label_a:toy_jct: {said}")):
            M.cluster_metric(**kw)(toy_jct)
    first = M.cluster_metric(label="mine", paired="mine changed", bounds=(0, math.inf))(toy_jct)
    M.cluster_metric(label="mine", paired="mine changed", bounds=(0, math.inf))(first.fn)

    def other_jct(jobs):
        return jobs["jct_h"].mean(axis=1)

    other_jct.__module__ = "toy_label_b"
    with pytest.raises(ConfigError, match="label='mine changed' names a row the metric "
                                          "toy_label_a:toy_jct has in summaries already"):
        M.cluster_metric(label="mine changed")(other_jct)


def test_a_run_of_a_metric_labelled_as_a_built_in_is_refused_in_one_line(tmp_path,
                                                                          monkeypatch, capsys):
    (tmp_path / "toy_jct_label.py").write_text(
        "from fastsim.metrics import cluster_metric\n\n\n"
        "@cluster_metric(label='mean JCT (h)', unit='h')\ndef jct_again(jobs):\n"
        "    return jobs['jct_h'].mean(axis=1)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert one_line(capsys, ["run", "--metric", "toy_jct_label:jct_again", "--clusters", "2"],
                    "label='mean JCT (h)' names a row the built-in metric jct_mean_h") == ""


def test_a_metric_named_as_a_paired_change_is_refused_when_declared(monkeypatch):
    """A summary names a paired metric's change NAME_change: a user metric of that name made
    a second row of it, and `fastsim run --metric m:jct_mean_h_change` wrote its results,
    then failed saying the table held "the rows of 2 cells"."""
    from fastsim import metrics as M

    monkeypatch.setattr(M, "_METRICS", dict(M._METRICS))

    def jct_mean_h_change(jobs):
        return jobs["jct_h"].mean(axis=1)

    with pytest.raises(ConfigError, match="a summary names the paired change of jct_mean_h so"):
        M.cluster_metric()(jct_mean_h_change)

    def toy_stops_change(jobs):  # no metric toy_stops yet: a column like any other
        return jobs["stopped"].sum(axis=1) * 1.0

    def toy_stops(jobs):
        return jobs["stopped"].sum(axis=1) * 1.0

    M.cluster_metric()(toy_stops_change)
    with pytest.raises(ConfigError, match="would name its paired change toy_stops_change"):
        M.cluster_metric(paired="stops change")(toy_stops)
    M.cluster_metric()(toy_stops)  # not paired: no change row


def test_a_metric_loaded_again_under_its_module_name_is_the_same_metric(tmp_path, monkeypatch):
    """A script declaring a metric, run as __main__, whose sweep file names it by module
    (``mymet:gpu_total``) imports it a second time: that was refused as two metrics."""
    import importlib.util

    import fastsim.metrics as M

    monkeypatch.setattr(M, "_METRICS", dict(M._METRICS))
    src = tmp_path / "toy_mymet.py"
    src.write_text("from fastsim.metrics import cluster_metric\n\n\n@cluster_metric()\n"
                   "def gpu_total(jobs):\n    return jobs['gpus'].sum(axis=1) * 1.0\n")
    for module in ("__main__", "toy_mymet"):  # the script, then its import by name
        spec = importlib.util.spec_from_file_location(module, src)
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    assert M.lookup("gpu_total").ref == "toy_mymet:gpu_total"


HOSTILE_SRC = '''
import numpy as np
from numba import njit
from fastsim.metrics import cluster_metric
from fastsim.registry import Param, stop_policy, scheduler_key


@stop_policy(params=[])
@njit
def flatten(scores, losses, attained_h, t_est_h):
    scores[0] = 0.0
    return 0


@scheduler_key(params=[Param("a", "float", 1.0)])
@njit
def nan_key(t_est_h, gpus, job_type, arrival_h, a):
    return np.nan


@scheduler_key()
@njit
def array_key(t_est_h, gpus, job_type, arrival_h):
    return np.array([t_est_h, gpus])


@scheduler_key()
@njit
def complex_key(t_est_h, gpus, job_type, arrival_h):
    return complex(t_est_h, 1.0)


@stop_policy(params=[])
@njit
def tuple_policy(scores, losses, attained_h, t_est_h):
    return (scores.shape[0], 0)


@stop_policy(params=[])
@njit
def sometimes_none(scores, losses, attained_h, t_est_h):
    if scores.shape[0] > 3:
        return scores.shape[0]
    return None


@scheduler_key()
@njit
def raising_key(t_est_h, gpus, job_type, arrival_h):
    raise ValueError("boom")


@scheduler_key()
@njit
def huge_int_key(t_est_h, gpus, job_type, arrival_h):
    return np.int64(2**62) + gpus  # every job the same float64: scheduled by arrival alone


@stop_policy(params=[])
@njit
def raising_policy(scores, losses, attained_h, t_est_h):
    if scores.shape[0] > 2:
        raise ValueError("policy boom")
    return 0


@cluster_metric()
def mutating(jobs):
    jobs["duration_h"][:] = 1000.0
    return jobs["duration_h"].sum(axis=1)


@cluster_metric(dtype="int")
def int_nan(jobs):
    return np.full(jobs["gpus"].shape[0], np.nan)


@cluster_metric(dtype="int")
def int_half(jobs):
    return np.full(jobs["gpus"].shape[0], 1.5)


@cluster_metric(dtype="int")
def int_huge(jobs):
    return np.full(jobs["gpus"].shape[0], 1e30)


@cluster_metric()
def float_inf(jobs):
    return np.full(jobs["gpus"].shape[0], np.inf)


@cluster_metric(bounds=(0, 1))
def out_of_bounds(jobs):
    return np.full(jobs["gpus"].shape[0], 1.5)


@cluster_metric()
def float_minus_inf_once(jobs):
    v = np.zeros(jobs["gpus"].shape[0], np.float32)  # float32's inf too
    v[-1] = -np.inf
    return v


@cluster_metric()
def float_nan_once(jobs):
    # undefined on a cluster with fewer than 6 hacking jobs: one of the test's three
    return np.where(jobs["hacking"].sum(axis=1) < 6, np.nan, 1.0)


@cluster_metric(dtype="int")
def int_inf(jobs):
    return np.full(jobs["gpus"].shape[0], np.inf)


@cluster_metric()
def complex_values(jobs):
    return np.full(jobs["gpus"].shape[0], 1 + 2j)


@cluster_metric()
def rewritable(jobs):
    x = jobs["jct_h"]
    x.flags.writeable = True  # numpy allowed it on a view of writable memory
    x[:] = 0.0
    return jobs["gpus"].sum(axis=1) * 1.0


@cluster_metric()
def text_values(jobs):
    return np.full(jobs["gpus"].shape[0], "1.5")


@cluster_metric()
def none_values(jobs):
    return [None] * jobs["gpus"].shape[0]


@cluster_metric()
def datetime_values(jobs):
    return np.zeros(jobs["gpus"].shape[0], "datetime64[s]")


@cluster_metric()
def relative_to_batch(jobs):
    return jobs["jct_h"].mean(axis=1) / jobs["jct_h"].mean()


@cluster_metric()
def from_next_cluster(jobs):  # cluster c given cluster c+1's mean JCT; the last its own
    v = jobs["jct_h"].mean(axis=1)
    v[:-1] = v[1:].copy()
    return v


@cluster_metric()
def misspelt(jobs):  # the column's unit left off
    return jobs["jct"].mean(axis=1)


@cluster_metric()
def falls_back(jobs):  # a KeyError it catches is its own business
    try:
        return jobs["jct"].mean(axis=1)
    except KeyError:
        return jobs["jct_h"].mean(axis=1)
'''


def _def_of(name: str) -> str:
    """Where a refusal of what ``name`` of HOSTILE_SRC returns points: its def line."""
    lines = HOSTILE_SRC.splitlines()
    n = next(i for i, ln in enumerate(lines) if ln.startswith(f"def {name}("))
    return f"toy_hostile_user.py, line {n + 1}: {lines[n]}"


def _line_of(code: str) -> str:
    """Where a refusal of an exception HOSTILE_SRC raises points: the line that raised."""
    lines = HOSTILE_SRC.splitlines()
    n = next(i for i, ln in enumerate(lines) if ln.strip() == code)
    return f"toy_hostile_user.py, line {n + 1}: {code}"


@pytest.fixture(scope="module")
def hostile_dir(tmp_path_factory):
    metric = ("from fastsim.metrics import cluster_metric\n@cluster_metric()\ndef waste(jobs):\n"
              "    return jobs['wasted_gpu_h'].sum(axis=1)\n")
    yield from modules_on_path(tmp_path_factory, "hostilecode", {
        "toy_hostile_user.py": HOSTILE_SRC, "toy_metric_a.py": metric, "toy_metric_b.py": metric})


@pytest.mark.parametrize("argv,needle", [
    (["--policy", "toy_hostile_user:flatten"], "stop policy toy_hostile_user:flatten failed"),
    # numba's typing error said only "Failed in nopython mode pipeline (step: nopython
    # frontend)": the cause and the user's line are further down its text
    (["--policy", "toy_hostile_user:flatten"], "TypingError: Cannot modify readonly array"),
    (["--policy", "toy_hostile_user:flatten"], "(toy_hostile_user.py, line 11: scores[0] = 0.0)"),
    # it said no job and no line: the job's inputs call the key again to see why
    (["--scheduler", "toy_hostile_user:nan_key"], "returned a NaN key for cluster 0, job 0 "
     "(t_est_h="),
    (["--scheduler", "toy_hostile_user:nan_key"], f"({_def_of('nan_key')}); allowed: numbers"),
    # and not the key's parameters, the rest of that call
    (["--scheduler", "toy_hostile_user:nan_key"], ", a=1.0) (toy_hostile_user.py, line"),
    # it always raises, so it never returns a key: numba types its return as none
    (["--scheduler", "toy_hostile_user:raising_key"], "scheduler key toy_hostile_user:raising_key "
     f"returns none ({_def_of('raising_key')}); allowed: a real number"),
    # the typing error named numba's setitem of the engine's key array
    (["--scheduler", "toy_hostile_user:array_key"], "scheduler key toy_hostile_user:array_key "
     f"returns array(float64, 1d, C) ({_def_of('array_key')}); allowed: a real number"),
    # numba's typing of the engine's key array was the message: setitem(..., complex128)
    (["--scheduler", "toy_hostile_user:complex_key"], "scheduler key toy_hostile_user:complex_key "
     f"returns complex128 ({_def_of('complex_key')}); allowed: a real number"),
    # the driver's comparison with 0 was the message: ne(Tuple(...), Literal[int](0))
    (["--policy", "toy_hostile_user:tuple_policy"], "stop policy toy_hostile_user:tuple_policy "
     f"returns Tuple(int64, Literal[int](0)) ({_def_of('tuple_policy')}); allowed: an integer"),
    # "TypeError: expected int64, got None"
    (["--policy", "toy_hostile_user:sometimes_none"], "stop policy "
     "toy_hostile_user:sometimes_none returns OptionalType(int64) "
     f"({_def_of('sometimes_none')}); allowed: an integer"),
    (["--scheduler", "toy_hostile_user:huge_int_key"], "scheduler toy_hostile_user:huge_int_key returned the "
     "integer key 46116860184273879"),
    (["--scheduler", "toy_hostile_user:huge_int_key"], ", beyond 2^53, where float64 keys no "
     "longer order integers exactly; allowed: integer keys within +-2^53, or float keys"),
    (["--policy", "toy_hostile_user:raising_policy"],
     "raising_policy failed: ValueError: policy boom"),  # its own message, from a parallel kernel
    # and the line that raised, compiled (numba keeps it) as in plain Python: they named none
    (["--policy", "toy_hostile_user:raising_policy"], "raising_policy failed: ValueError: "
     "policy boom (" + _line_of('raise ValueError("policy boom")') + "); allowed: "),
    (["--metric", "toy_hostile_user:mutating"], "metric mutating failed: ValueError"),
    (["--metric", "toy_hostile_user:mutating"], "read-only "
     "(" + _line_of('jobs["duration_h"][:] = 1000.0') + "); allowed: "),
    # a metric is plain Python: the error said it must be "a pure @njit function"
    (["--metric", "toy_hostile_user:mutating"], "allowed: a pure function of the per-job arrays"),
    (["--metric", "toy_hostile_user:int_nan"], "metric int_nan (dtype int) returned nan"),
    # stored as 1, and as -2^63 after numpy's RuntimeWarning
    (["--metric", "toy_hostile_user:int_half"], "metric int_half (dtype int) returned 1.5"),
    (["--metric", "toy_hostile_user:int_huge"], "metric int_huge (dtype int) returned 1e+30"),
    # an infinity was left out of the mean as NaN is: "n/a" with n 0, and exit 0
    (["--metric", "toy_hostile_user:float_inf"], "metric float_inf returned inf "
     f"({_def_of('float_inf')}); allowed: finite numbers, or NaN on a cluster where the "
     "metric is undefined"),
    (["--metric", "toy_hostile_user:float_minus_inf_once"],
     "metric float_minus_inf_once returned -inf"),
    (["--metric", "toy_hostile_user:int_inf"], "metric int_inf (dtype int) returned inf"),
    # declared bounds cut its interval: a value outside them would make that cut wrong
    (["--metric", "toy_hostile_user:out_of_bounds"], "metric out_of_bounds returned 1.5 "
     f"({_def_of('out_of_bounds')}); allowed: values in its declared bounds [0.0, 1.0]"),
    # and where: a value is the whole function's, its def line (int_nan's too)
    (["--metric", "toy_hostile_user:int_nan"], f"({_def_of('int_nan')}); allowed: integers"),
    # the imaginary part was dropped, after numpy's ComplexWarning
    (["--metric", "toy_hostile_user:complex_values"], "complex_values returned complex values"),
    # it set its view writable again and zeroed the per-job table's JCTs, exit 0
    (["--metric", "toy_hostile_user:rewritable"], "metric rewritable failed: ValueError: "
     "cannot set WRITEABLE flag to True of this array"),
    # numpy's cast read the text "1.5" as 1.5, None as NaN and a datetime as its count
    (["--metric", "toy_hostile_user:text_values"], "metric text_values returned values of "
     f"dtype <U3 ({_def_of('text_values')}); allowed: real numbers, one per cluster"),
    (["--metric", "toy_hostile_user:none_values"], "none_values returned values of dtype object"),
    (["--metric", "toy_hostile_user:datetime_values"],
     "datetime_values returned values of dtype datetime64[s]"),
    (["--metric", "toy_metric_a:waste", "--metric", "toy_metric_b:waste"],
     "both fill 'waste'"),
    # "KeyError: 'jct'" named neither jct_h nor any other column a metric may read
    (["--metric", "toy_hostile_user:misspelt"], "metric misspelt failed: KeyError: 'jct' is not "
     "a per-job column (did you mean jct_h?); the columns: job_type, gpus, arrival_h, "),
    # it read the other clusters of the batch: its values changed with a sweep's chunk
    (["--metric", "toy_hostile_user:relative_to_batch"], "metric relative_to_batch returned "),
    # it read cluster c+1's jobs for cluster c and left the last alone, which alone was asked
    (["--metric", "toy_hostile_user:from_next_cluster"], "metric from_next_cluster returned "),
])
def test_user_code_that_misbehaves_is_one_line(hostile_dir, tmp_path, capsys, argv, needle):
    """User code runs on read-only views of what both arms of a run share, and a failure
    of its own (an exception, a write, a NaN key) is one line naming it; the baseline arm
    is never run on what a policy or metric changed."""
    out = tmp_path / "o.parquet"
    assert main(["run", "--clusters", "2", "--n-jobs", "10", "--baseline", "evalstop:k=3",
                 "--out", str(out), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(own_lines(err)) == 1, err
    assert not out.exists()


def test_a_huge_integer_key_names_the_cluster_the_job_and_the_call(hostile_dir, capsys):
    """The refusal of an integer key beyond 2^53 named neither the job nor its inputs, as
    the NaN key's does: the call, to redo it."""
    import re

    assert main(["run", "--clusters", "2", "--n-jobs", "10", "--no-progress",
                 "--scheduler", "toy_hostile_user:huge_int_key"]) == 2
    err = capsys.readouterr().err.strip()
    assert re.search(r"huge_int_key returned the integer key \d+ for cluster [01], job \d+ "
                     r"\(t_est_h=[0-9.e+-]+, gpus=\d+, job_type=\d, arrival_h=[0-9.e+-]+\), "
                     r"beyond 2\^53, ", err), err


def test_a_metric_catching_a_missing_column_runs(hostile_dir, capsys):
    assert main(["run", "--clusters", "2", "--n-jobs", "10", "--no-progress",
                 "--metric", "toy_hostile_user:falls_back"]) == 0, capsys.readouterr().err


def test_a_metric_reading_other_clusters_is_refused_in_a_sweep_of_any_chunk(hostile_dir,
                                                                             tmp_path, capsys):
    """Refused in the sweep's trial, before anything is written: its one cluster could not
    show a value that depends on the batch, and the first chunk refused it with sweep.json
    left in --out."""
    sweep = tmp_path / "s.toml"
    sweep.write_text('clusters = 4\n[base]\nn_jobs = 10\nmetrics = '
                     '["toy_hostile_user:relative_to_batch"]\n[axes]\nsigma = [0.01]\n')
    for chunk in ("2", "4"):
        assert main(["sweep", str(sweep), "--chunk", chunk, "--out", str(tmp_path / chunk),
                     "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert "for the same cluster alone; allowed: a value computed from the cluster's own " \
               "jobs" in err, err
        assert not (tmp_path / chunk).exists()


@pytest.mark.parametrize("ref,said", [
    ("toy_metric_a:waste:q=95", "which takes no parameters (toy_metric_a:waste)"),
    ("toy_metric_a:waste,toy_metric_b:waste", "several metrics are several names"),
])
def test_a_metric_given_parameters_or_another_metric_says_so(hostile_dir, capsys, ref, said):
    """Both were "module 'toy_metric_a' has no attribute 'waste:q=95'", read as a typo."""
    one_line(capsys, ["run", "--metric", ref], f"--metric={ref} is invalid; allowed: ")
    with pytest.raises(ConfigError, match=re.escape(said)):
        SimConfig.from_specs("fifo", "evalstop", metrics=[ref])


def test_a_metric_named_twice_is_refused(hostile_dir, tmp_path, capsys):
    """Named twice (on the command line, in a sweep file, in the API), a metric ran once
    and nothing was said, where the second was likely meant as another."""
    ref = "toy_metric_a:waste"
    with pytest.raises(ConfigError, match=f"each metric named once \\({ref} is named twice"):
        SimConfig.from_specs("fifo", "evalstop", metrics=[ref, ref])
    one_line(capsys, ["run", "--metric", ref, "--metric", ref, "--out", str(tmp_path / "o.parquet")],
             f"--metric {ref} --metric {ref} is invalid; allowed: each metric named once")
    sweep = tmp_path / "s.toml"
    sweep.write_text(f'clusters = 2\n[base]\nmetrics = ["{ref}", "{ref}"]\n')
    one_line(capsys, ["sweep", str(sweep), "--out", str(tmp_path / "out")], "is named twice")
    assert not (tmp_path / "o.parquet").exists() and not (tmp_path / "out").exists()


def test_a_float_metric_is_nan_where_undefined_and_left_out_of_its_n(hostile_dir):
    from fastsim.summary import summarize

    base = SimConfig.from_specs("fifo", "evalstop:k=2", n_jobs=10)
    cfg = SimConfig(base.workload, base.scheduler, base.policy,
                    metrics=("toy_hostile_user:float_nan_once",))
    row = summarize(simulate(cfg, 3).clusters).filter(pl.col("metric") == "float_nan_once")
    assert row["n"][0] == 2 and row["mean"][0] == 1.0


def test_replay_refuses_to_decide_on_hidden_truth(tmp_path, capsys):
    log = tmp_path / "t.csv"
    log.write_text("job_id,step,score,truth_gold\na,1,0.5,0.5\na,2,0.6,0.4\na,3,0.7,0.3\n")
    assert main(["replay", str(log), "--metric", "truth_gold"]) == 2
    assert "truth_* columns are hidden truth" in capsys.readouterr().err


def _policy_file(tmp_path, monkeypatch, module: str, name: str, head: str, returns: str):
    """A user policy ``module:name`` written to a file on the path (``head``: its imports
    and constants; ``returns``: the trigger's return expression), looked up."""
    from fastsim import registry as R

    (tmp_path / f"{module}.py").write_text(
        "from numba import njit\nfrom fastsim.registry import stop_policy\n" + head + "\n"
        f"@stop_policy(params=[], label='{name}')\n@njit\n"
        f"def {name}(scores, losses, attained_h, t_est_h):\n    return {returns}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return R.lookup("policy", f"{module}:{name}")


def test_the_code_hash_covers_helpers_in_the_same_and_other_files(tmp_path, monkeypatch):
    # A sweep resumed after a helper changed must not reuse the old cells: the hash that
    # ties cells to a user's code covers the file defining the policy and the files of the
    # user functions it names (here a helper imported from another file).
    import importlib

    from fastsim import registry as R

    (tmp_path / "hash_helpers.py").write_text(
        "from numba import njit\n\n@njit\ndef shift(x):\n    return x - 0.0\n")
    decl = _policy_file(tmp_path, monkeypatch, "hash_policy", "shifted",
                        "from hash_helpers import shift\n\nLIMIT = 2\n",
                        "1 if shift(scores[-1]) < scores[0] and scores.shape[0] > LIMIT else 0")
    before = decl.impl
    for name, old, new in (("hash_helpers.py", "x - 0.0", "x + 0.3"),
                           ("hash_policy.py", "LIMIT = 2", "LIMIT = 3")):
        path = tmp_path / name
        path.write_text(path.read_text().replace(old, new))
        R._source_hash.cache_clear()
        assert decl.impl != before, name
        before = decl.impl
    # library code: Python's, installed packages' and fastsim's own package folders
    # (kernels/ and figures/ included; its source is recorded on its own), not the folder
    # above them: the tests' modules, there in a checkout, are a user's
    from fastsim.kernels import stops
    for library in (np.mean, importlib, R, stops.resolve_stops_nb,
                    importlib.import_module("fastsim.figures")):
        assert R._user_file(library) is None, library
    assert Path(R._user_file(_policy_file)).samefile(__file__)


def test_the_code_hash_covers_a_constant_imported_by_name(tmp_path, monkeypatch):
    # `from consts import THRESH`: neither file's text changes with consts.py's value
    # in the policy's file, and numba compiles the value in: a sweep reused old cells
    import sys

    from fastsim import registry as R

    (tmp_path / "hash_consts.py").write_text("THRESH = 100\n")
    decl = _policy_file(tmp_path, monkeypatch, "hash_bynamepol", "byname",
                        "from hash_consts import THRESH\n",
                        "scores.shape[0] if scores.shape[0] == THRESH else 0")
    before = decl.impl
    monkeypatch.setattr(sys.modules["hash_bynamepol"], "THRESH", 3)  # as a new process would see it
    R._source_hash.cache_clear()
    assert decl.impl != before


@pytest.mark.parametrize("name,returns", [
    ("via_call", "scores.shape[0] if hash_{name}_mod.below(scores[-1]) else 0"),  # its import
    ("via_value", "scores.shape[0] if scores[-1] < hash_{name}_mod.THRESH else 0"),  # imported
])
def test_the_code_hash_covers_what_a_module_attribute_reaches(tmp_path, monkeypatch, name,
                                                              returns):
    # `import helpers; helpers.below(x)`: the module's file was hashed, but not the file it
    # imports THRESH from by name: `fastsim sweep` of such a policy, THRESH edited there,
    # and the same command said "resumed: 2 of 2 chunks were already done (verified)" and
    # kept the old results
    import importlib

    from fastsim import registry as R

    const, mod = f"hash_{name}_const", f"hash_{name}_mod"
    (tmp_path / f"{const}.py").write_text("THRESH = 0.1\n")
    (tmp_path / f"{mod}.py").write_text(
        f"from numba import njit\nfrom {const} import THRESH\n\n\n@njit\n"
        "def below(x):\n    return x < THRESH\n")
    decl = _policy_file(tmp_path, monkeypatch, f"hash_{name}", name, f"import {mod}\n",
                        returns.format(name=name))
    before, digest = decl.impl, R.source_sha256(decl.user)
    (tmp_path / f"{const}.py").write_text("THRESH = 0.9\n")
    for module in (const, mod):  # as a new process would see them
        importlib.reload(sys.modules[module])
    R._source_hash.cache_clear()
    assert decl.impl != before and R.source_sha256(decl.user) != digest


def test_the_code_hash_covers_partials_objects_and_functions_beside(tmp_path, monkeypatch):
    # a functools.partial and an object called as a function have no source file of their
    # own: hashed as nothing, an edit of theirs resumed a sweep on old chunks; and a function
    # it calls in the same file was read, not followed: a constant that one imports by name
    # was not
    import importlib
    import sys

    from fastsim import registry as R

    (tmp_path / "hash_k.py").write_text("K = 2.0\n")
    path = tmp_path / "hash_callables.py"
    path.write_text("import functools\nfrom hash_k import K\n\n\ndef double(x):\n"
                    "    return x * K\n\n\ndef scaled(jobs, scale):\n"
                    "    return double(jobs) / scale\n\n\nclass Scaled:\n"
                    "    def __init__(self, scale):\n        self.scale = scale\n\n"
                    "    def __call__(self, jobs):\n        return double(jobs) / self.scale\n"
                    "\n\nby_partial = functools.partial(scaled, scale=20.0)\n"
                    "by_object = Scaled(20.0)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("hash_callables")
    for fn in (mod.by_partial, mod.by_object):
        before = R.source_sha256(fn)
        path.write_text(path.read_text() + "\n# edited\n")
        assert R.source_sha256(fn) != before, fn
    for fn in (mod.by_partial, mod.by_object, mod.scaled):
        before = R.source_sha256(fn)
        monkeypatch.setattr(mod, "K", 3.0)  # hash_k.py edited, as a new process sees it
        assert R.source_sha256(fn) != before, fn
        monkeypatch.setattr(mod, "K", 2.0)
    sys.modules.pop("hash_callables")


def test_the_code_hash_of_a_set_or_an_object_in_a_container_is_every_processs(tmp_path):
    # a set of strings iterates in an order salted per process, and an object's repr holds
    # its address: the hash changed from run to run, so each resume was refused as edited
    (tmp_path / "hash_sets.py").write_text(
        "import numpy as np\n\nCOLS = frozenset({'gpus', 'jct_h', 'stopped', 'hacking'})\n"
        "HOW = {'rlhf': (np.mean, object())}\n\n\ndef cols(jobs):\n"
        "    return HOW['rlhf'][0](jobs[min(COLS)], axis=1)\n")
    code = ("from fastsim import registry as R; import hash_sets; "
            "print(R.source_sha256(hash_sets.cols))")
    digests = {subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True,
                              capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(tmp_path),
                                   "PYTHONHASHSEED": seed}).stdout
               for seed in ("1", "2", "3")}
    assert len(digests) == 1, digests


def test_a_plain_constant_is_hashed_as_before_sets_were_sorted():
    # a tuple, list or dict of numbers and strings keeps the text it was hashed by, so the
    # cells and records of sweeps written before stay this code's
    from fastsim.registry import _value_text

    for value in ((1, 2.5, "a"), [3, (4, None)], {"rlhf": [0.1, 0.2]}, []):
        assert _value_text(value) == repr(value)
    assert _value_text(frozenset({"b", "a"})) == "frozenset['a', 'b']"


def test_the_code_hash_of_a_module_in_a_zip_covers_all_its_functions(tmp_path):
    # a zip's module has no file to read: only the function's own compiled code was
    # hashed, so an edit of a function it calls resumed a sweep on old chunks
    import zipfile

    def digest(factor: str) -> str:
        archive = tmp_path / f"code{factor}.zip"
        with zipfile.ZipFile(archive, "w") as z:
            z.writestr("hash_zipped.py", f"def double(x):\n    return x * {factor}\n\n\n"
                                         "def share(jobs):\n    return double(jobs)\n")
        code = ("from fastsim import registry as R; import hash_zipped as m; "
                "print(m.__file__, R.source_sha256(m.share))")
        where, sha = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True,
                                    capture_output=True, text=True,
                                    env={**os.environ, "PYTHONPATH": str(archive)}
                                    ).stdout.split()
        assert where == str(archive / "hash_zipped.py")
        return sha

    assert digest("2.0") != digest("3.0")


@pytest.mark.parametrize("lookback, param", [
    (-1, None),
    (1.5, None),
    ("n", ("n", "int", 3, -5)),  # an int parameter that may go negative
    ("n", ("n", "float", 1.0, 0)),  # a float parameter
])
def test_a_lookback_that_could_point_after_the_stop_is_refused(lookback, param):
    # replay kept step 50 of a stop at 40, the engine the best evaluation, the monitor
    # raised an IndexError: one declaration, three answers
    from numba import njit

    from fastsim.registry import Param, stop_policy

    @njit
    def bare(scores, losses, attained_h, t_est_h):
        return 4 if scores.shape[0] >= 4 else 0

    @njit
    def with_n(scores, losses, attained_h, t_est_h, n):
        return 4 if scores.shape[0] >= 4 else 0

    declared = [Param(param[0], param[1], param[2], lo=param[3])] if param else []
    with pytest.raises(ConfigError, match="lookback.*allowed: an integer >= 0"):
        stop_policy(params=declared, lookback=lookback)(with_n if param else bare)


def test_a_lookback_beside_keep_best_is_refused():
    """`lookback="k", keep="best"` was declared, and its lookback never applied: the
    best-scored evaluation was delivered, whatever k."""
    from numba import njit

    from fastsim.registry import Param, stop_policy

    @njit
    def best_of_k(scores, losses, attained_h, t_est_h, k):
        return 0

    with pytest.raises(ConfigError, match=r"lookback='k' with keep='best': .*allowed: one of "):
        stop_policy(params=[Param("k", "int", 2, lo=1)], lookback="k", keep="best")(best_of_k)


@pytest.mark.parametrize("lookback, said", [
    ("p", "lookback='p' is invalid; allowed: an integer >= 0 or the name of an int parameter "
          "with lo >= 0 (patience)"),
    (-1, "lookback=-1 is invalid; allowed: "),
])
def test_a_lookback_that_is_no_parameter_is_refused_as_every_value_is(lookback, said):
    """A misspelt lookback read "lookback='p': allowed: ... (['patience'])", unlike every
    other refusal ("X is invalid; allowed: ..."), with a Python list for the names."""
    from numba import njit

    from fastsim.registry import stop_policy

    @njit
    def misspelt_lookback(scores, losses, attained_h, t_est_h, patience):
        return 0

    with pytest.raises(ConfigError) as exc:
        stop_policy(params=[Param("patience", "int", 2, lo=1)],
                    lookback=lookback)(misspelt_lookback)
    assert said in str(exc.value), exc.value


def test_a_numpy_lookback_is_the_integer_it_is():
    """lookback=np.int64(1) was refused as 'allowed: an integer >= 0'."""
    from numba import njit

    from fastsim.registry import stop_policy

    @njit
    def numpy_lookback(scores, losses, attained_h, t_est_h):
        return 0

    decl = stop_policy(lookback=np.int64(1))(numpy_lookback)
    assert decl.lookback == 1 and type(decl.lookback) is int


@pytest.mark.parametrize("min_evals, said", [
    (lambda v: 1 / 0, r"min_evals\(\{'k': 2, 'scope': 'rlhf'\}\) raised ZeroDivisionError"),
    (lambda v: "three", r"min_evals.* returned 'three'"),  # int() raised ValueError: a traceback
    (lambda v: 2.7, r"min_evals.* returned 2.7"),  # int() made it 2
    ("3", r"min_evals='3'"),  # int() made it 3
    (-5, r"min_evals=-5"),
    (True, r"min_evals=True"),
])
def test_a_min_evals_that_is_no_count_is_refused_when_declared(min_evals, said):
    from numba import njit

    from fastsim.registry import Param, stop_policy

    @njit
    def quiet(scores, losses, attained_h, t_est_h, k):
        return 0

    with pytest.raises(ConfigError, match=r"stop policy .*quiet: " + said +
                       r".*; allowed: an integer >= 1, or a function"):
        stop_policy(params=[Param("k", "int", 2, lo=1)], min_evals=min_evals)(quiet)


@pytest.mark.parametrize("reads", ["losses", ("scores", "loss"), ("gold",), None])
def test_reads_that_name_no_series_are_refused_when_declared(reads):
    # reads="losses" was read letter by letter: replay and the monitor gave it no loss
    from numba import njit

    from fastsim.registry import stop_policy

    @njit
    def on_loss(scores, losses, attained_h, t_est_h):
        return 0

    with pytest.raises(ConfigError, match=r"reads=.* is invalid; allowed: a tuple of names "
                       r"from scores, losses, attained_h, t_est_h"):
        stop_policy(reads=reads)(on_loss)


@pytest.mark.parametrize("kw, said", [
    ({"name": "my policy"}, "name='my policy' is invalid"),  # registered, and no spec named it
    ({"name": "a:b"}, "name='a:b' is invalid"),
    ({"name": "k=2"}, "name='k=2' is invalid"),
    ({"name": "x,y"}, "name='x,y' is invalid"),
    ({"name": 3}, "name=3 is invalid"),
    ({"label": 3}, "label=3 is invalid; allowed: a string"),  # an AttributeError
    ({"help": None}, "help=None is invalid; allowed: a string"),
    # a lone Param or None was a TypeError traceback ('Param' object is not iterable)
    ({"params": Param("k", "int", 2)}, "params=Param(name='k'"),
    ({"params": None}, "params=None is invalid; allowed: a list of fastsim.registry.Param"),
])
@pytest.mark.parametrize("kind", ["policy", "scheduler"])
def test_a_name_no_spec_can_write_or_a_label_not_text_is_refused(kw, said, kind):
    from numba import njit

    from fastsim.registry import scheduler_key, stop_policy

    @njit
    def never(scores, losses, attained_h, t_est_h):
        return 0

    @njit
    def flat(t_est_h, gpus, job_type, arrival_h):
        return 0.0

    declare, fn = (stop_policy, never) if kind == "policy" else (scheduler_key, flat)
    with pytest.raises(ConfigError, match=re.escape(said)):
        declare(**kw)(fn)


def test_a_min_evals_that_fails_for_some_values_is_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "toy_min_evals.py").write_text(
        "from numba import njit\nfrom fastsim.registry import Param, stop_policy\n"
        "@stop_policy(params=[Param('k', 'int', 2, lo=1)],\n"
        "             min_evals=lambda v: v['k'] + 1 if v['k'] < 5 else v['missing'])\n"
        "@njit\ndef quiet(scores, losses, attained_h, t_est_h, k):\n    return 0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["run", "--policy", "toy_min_evals:quiet:k=5", "--clusters", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert "stop policy toy_min_evals:quiet: min_evals({'k': 5, 'scope': 'rlhf'}) raised " \
           "KeyError: 'missing'" in err and len(err.splitlines()) == 1, err


def test_keep_best_never_delivers_an_unscored_evaluation():
    # replay keeps unscored rows in a job's series; the monitor drops them: the first
    # scored best is the same evaluation for both
    from fastsim import registry as R

    decl = R.lookup("policy", "cusum")
    scores = np.array([np.nan, 0.5, 0.7, 0.6, 0.4])
    assert decl.delivered(5, decl.defaults(), 5, scores) == 3
    assert decl.delivered(1, decl.defaults(), 5, np.array([np.nan])) == 1


RAISING_SRC = '''
from numba import njit
from fastsim.registry import stop_policy


@stop_policy(params=[], label="raise_above_one")
@njit
def raise_above_one(scores, losses, attained_h, t_est_h):
    if scores[-1] > 1.0:
        raise ValueError("score above one")
    return 4 if scores.shape[0] >= 4 else 0


@stop_policy(params=[], label="writes")
@njit
def writes(scores, losses, attained_h, t_est_h):
    scores[0] = 0.0
    return 0
'''


@pytest.fixture(scope="module")
def raising_dir(tmp_path_factory):
    yield from modules_on_path(tmp_path_factory, "raising", {"toy_raising.py": RAISING_SRC})


def test_a_failing_user_policy_leaves_no_trace_in_the_monitor(raising_dir):
    # a call that raised had stored its score and step: every later call raised again,
    # and the retried step was refused as "not after the previous step"
    from fastsim.replay.monitor import StopMonitor

    mon = StopMonitor("toy_raising:raise_above_one")
    mon.observe("j", 10, 0.5)
    with pytest.raises(ConfigError, match="stop policy toy_raising:raise_above_one failed"):
        mon.observe("j", 20, 1.5)
    assert not mon.observe("j", 20, 0.4).stop  # the same step again, now valid
    assert not mon.observe("j", 30, 0.3).stop
    assert mon.observe("j", 40, 0.2).stop  # the 4th evaluation, as if 1.5 never came


def test_replay_says_a_failing_user_policy_in_one_line(raising_dir, tmp_path, capsys):
    log = tmp_path / "l.csv"
    log.write_text("job_id,step,score\n" + "".join(f"a,{s},{v}\n" for s, v in
                                                  ((10, 0.5), (20, 1.5), (30, 0.4))))
    for spec, needle in (("toy_raising:raise_above_one", "ValueError"),
                         ("toy_raising:writes", "failed")):
        assert main(["replay", str(log), "--policy", spec]) == 2
        err = own_lines(capsys.readouterr().err)  # its compile said as fastsim run says it
        assert len(err) == 1, err
        assert f"stop policy {spec} failed" in err[0] and needle in err[0]


def test_the_monitor_takes_the_steps_replay_takes():
    from fastsim.replay.monitor import StopMonitor

    mon = StopMonitor("evalstop:k=2")
    mon.observe("j", 2**53 - 1, 0.5)
    with pytest.raises(ConfigError, match="2\\^53-1"):
        mon.observe("j", 2**53 + 1, 0.6)  # equal to 2^53 as a float: no longer "after"


@pytest.mark.parametrize("kind,name,said", [
    ("policy", "fifo", "policy name 'fifo' is the built-in scheduler fifo's"),
    ("scheduler", "evalstop", "scheduler name 'evalstop' is the built-in policy evalstop's"),
])
def test_a_short_name_of_a_built_in_of_the_other_kind_is_refused(kind, name, said):
    """A policy declared with name="fifo" ran as "fifo over evalstop" under a user key
    named evalstop: the run's heading and a sweep's tables read as the built-ins'."""
    from numba import njit

    from fastsim.registry import scheduler_key, stop_policy

    def trigger(scores, losses, attained_h, t_est_h):
        return 0

    def key(t_est_h, gpus, job_type, arrival_h):
        return t_est_h

    declare, fn = (stop_policy, trigger) if kind == "policy" else (scheduler_key, key)
    with pytest.raises(ConfigError, match=re.escape(said)):
        declare(name=name)(njit(fn))


@pytest.mark.parametrize("kind,label,said", [
    ("policy", "evalstop(k={k})", "labelled 'evalstop(k=2)', which reads as the built-in policy "
     "evalstop"),
    ("policy", "fifo", "labelled 'fifo', which reads as the built-in scheduler fifo"),
    ("scheduler", "FIFO", "labelled 'FIFO', which reads as the built-in scheduler fifo"),
    ("scheduler", "tiresias(q={k})", "labelled 'tiresias(q=2)', which reads as the built-in "
     "scheduler tiresias"),
])
def test_a_label_that_reads_as_a_built_in_is_refused(kind, label, said):
    """``fastsim run``'s heading, ``summary.txt`` and the figures name a policy and a
    scheduler by label alone: a key labelled ``fifo`` ran as "evalstop(k=2) over fifo", a
    policy labelled ``evalstop(k={k})`` as "evalstop(k=2) over srtf_est"."""
    from numba import njit

    from fastsim.registry import Param, scheduler_key, stop_policy

    def trigger(scores, losses, attained_h, t_est_h, k):
        return 0

    def key(t_est_h, gpus, job_type, arrival_h, k):
        return t_est_h

    declare, fn = (stop_policy, trigger) if kind == "policy" else (scheduler_key, key)
    with pytest.raises(ConfigError, match=re.escape(said) + ".*allowed: a label whose first "
                       "word is no built-in policy's or scheduler's name"):
        declare(params=[Param("k", "int", 2, lo=1)], label=label)(njit(fn))
    declare(params=[Param("k", "int", 2, lo=1)], label="fifo_like(k={k})")(njit(fn))


def test_every_built_in_label_starts_with_its_name():
    """What the refusal of a user's label reading as a built-in's rests on."""
    from fastsim.registry import BUILTIN_POLICIES, BUILTIN_SCHEDULERS

    for decl in (*BUILTIN_POLICIES, *BUILTIN_SCHEDULERS):
        assert re.match(r"\w*", decl.format_label(decl.defaults())).group() == decl.name


def test_a_run_of_a_key_labelled_as_a_built_in_is_refused_in_one_line(tmp_path, monkeypatch,
                                                                        capsys):
    (tmp_path / "toy_fifo_label.py").write_text(
        "from numba import njit\nfrom fastsim.registry import scheduler_key\n\n\n"
        "@scheduler_key(label='fifo')\n@njit\ndef late_first(t_est_h, gpus, job_type, "
        "arrival_h):\n    return -arrival_h\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert one_line(capsys, ["run", "--scheduler", "toy_fifo_label:late_first", "--clusters", "2"],
                    "toy_fifo_label:late_first is labelled 'fifo'") == ""


def test_a_user_module_named_like_a_built_in_is_told_to_rename(tmp_path, monkeypatch):
    # `margin:mine` with a file margin.py said only "'mine' is not a parameter of margin"
    from fastsim.config import PolicyConfig

    (tmp_path / "margin.py").write_text("def mine():\n    return 0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match="a module of yours named margin cannot be addressed "
                       "as margin:ATTR.*rename the module"):
        PolicyConfig.parse("margin:mine")
    with pytest.raises(ConfigError) as err:  # no such module: no hint
        PolicyConfig.parse("evalstop:mine")
    assert "module of yours" not in str(err.value)


def test_a_bare_flag_of_a_built_in_shadowed_by_a_user_module_is_ambiguous(tmp_path,
                                                                           monkeypatch):
    # `fifo:backfill` with a fifo.py defining backfill ran the built-in FIFO with backfill,
    # silently; without such a module it still does, and `backfill=true` always does
    from fastsim.config import SchedulerConfig

    assert SchedulerConfig.parse("fifo:backfill").backfill
    (tmp_path / "fifo.py").write_text("def backfill():\n    return 0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match="'fifo:backfill' is ambiguous.*fifo:backfill=true "
                       "for the built-in, or rename the module"):
        SchedulerConfig.parse("fifo:backfill")
    assert SchedulerConfig.parse("fifo:backfill=true").backfill
    assert main(["run", "--scheduler", "fifo:backfill", "--clusters", "2"]) == 2



def test_a_shadowed_parameter_that_is_no_flag_is_not_called_one(tmp_path, monkeypatch):
    # a patience.py of the user's defining patience: `patience:patience` was "ambiguous:
    # patience is a built-in policy with a flag patience", offering
    # `patience:patience=true`, which the built-in refuses (its patience is an integer)
    (tmp_path / "patience.py").write_text("def patience():\n    return 0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError) as err:
        PolicyConfig.parse("patience:patience")
    said = str(err.value)
    assert "is ambiguous: patience is a built-in policy with a parameter patience" in said, said
    assert "flag" not in said and "=true" not in said, said
    assert "patience:patience=VALUE, an integer in [1, 1000]" in said, said
    assert "or rename the module" in said, said

def test_a_scripts_main_spec_on_the_command_line_says_to_name_a_module(capsys):
    # a policy declared in a script is __main__:f there (docs/extending.md); the same
    # spec on the command line said "__main__ declares no @stop_policy, ...", of a
    # program that was not the user's script
    assert main(["run", "--policy", "__main__:mpat", "--clusters", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert ("__main__ is the program running here, which declares none: a script's "
            "function is __main__:FUNCTION in that script's own process only (not on the "
            "command line, nor on a Dask worker); elsewhere name the module that declares "
            "it, MODULE:FUNCTION") in err, err

def test_a_user_module_left_off_the_import_path_gets_a_hint(tmp_path, monkeypatch):
    # `fastsim run --policy mine:det` from the directory holding mine.py: the console
    # script does not import from the current directory, so say so and how to fix it
    from fastsim.metrics import lookup as metric_lookup

    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine_not_on_path.py").write_text("x = 1\n")
    for parse in (PolicyConfig.parse, SchedulerConfig.parse, metric_lookup):
        with pytest.raises(ConfigError, match=r"mine_not_on_path\.py is in the current directory.*PYTHONPATH=\."):
            parse("mine_not_on_path:det")
    with pytest.raises(ConfigError, match="cannot be imported") as exc:
        PolicyConfig.parse("no_such_module_xyz:det")  # no such file here: no hint
    assert "PYTHONPATH" not in str(exc.value)


@pytest.mark.parametrize("spec", [":evalstop", ".mod:det", "my-mod:det"])
def test_a_spec_whose_module_part_is_not_a_module_name_is_one_line(spec):
    from fastsim.metrics import lookup as metric_lookup

    # ':evalstop' was a ValueError traceback from importlib, '.mod:det' a TypeError one
    for parse in (PolicyConfig.parse, SchedulerConfig.parse, metric_lookup):
        with pytest.raises(ConfigError, match="is not a module name"):
            parse(spec)


def test_a_user_metrics_declared_bounds_cut_its_interval():
    from fastsim import metrics as M
    from fastsim.stats import mean_ci
    from fastsim.summary import summarize

    for bad in ((1.0, 0.0), (0, "x"), (0.0,), [0.0, 1.0], (True, 2)):
        with pytest.raises(ConfigError, match="bounds=.*allowed: a tuple"):
            M.cluster_metric(bounds=bad)
    try:
        @M.cluster_metric(bounds=(0, math.inf))
        def cut_me(jobs):
            return jobs

        f = pl.DataFrame({"cluster": [0, 1, 2], "cut_me": [0.0, 0.0, 0.9]})
        for c in ("tp", "fp", "fn", "tn", "delay_sum", "delay_count", "tp_freed",
                  "fp_freed", "pos_at_completion"):
            f = f.with_columns(pl.lit(0).alias(c))
        row = summarize(f).filter(pl.col("metric") == "cut_me").row(0, named=True)
        t = mean_ci([0.0, 0.0, 0.9])
        assert t.lo < 0.0 and (row["lo"], row["hi"]) == (0.0, t.hi)
    finally:
        M._METRICS.pop("cut_me", None)  # declared for this test only


def test_a_policy_declared_in_a_script_is_named_by_main(tmp_path):
    """docs/extending.md: a policy declared in a script (or a notebook) rather than a
    module is ``__main__:FUNCTION`` there, for simulate and an in-process sweep."""
    script = tmp_path / "experiment.py"
    script.write_text(textwrap.dedent('''
        import pathlib
        from numba import njit
        import fastsim
        from fastsim.registry import Param, stop_policy

        @stop_policy(params=[Param("k", "int", 2, lo=1)], label="down(k={k})", lookback="k")
        @njit
        def down(scores, losses, attained_h, t_est_h, k):
            run = 0
            for e in range(1, scores.shape[0]):
                run = run + 1 if scores[e] < scores[e - 1] else 0
                if run >= k:
                    return e + 1
            return 0

        cfg = fastsim.SimConfig.from_specs("srtf_est", "__main__:down:k=2", n_jobs=20)
        print("simulate", fastsim.simulate(cfg, 3).clusters["n_stopped"].sum() > 0)
        pathlib.Path("s.toml").write_text(
            'clusters = 4\\n[base]\\nn_jobs = 20\\n[axes]\\npolicy = ["__main__:down:k=2"]\\n')
        s = fastsim.sweep("s.toml", "out")
        print("sweep", sorted(set(s["policy"])))
        try:  # a worker imports no script: it ran the chunks of the cells it could
            fastsim.sweep("s.toml", "out_dask", backend="dask", address="tcp://127.0.0.1:9")
        except fastsim.ConfigError as exc:
            print(exc, pathlib.Path("out_dask").exists())
    '''))
    r = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "simulate True", "sweep ['down(k=2)', 'none']",
        "__main__:down is declared in the script this process runs, which Dask workers do not "
        "import; allowed with backend='dask': a module on the workers' PYTHONPATH "
        "(docs/extending.md) False"], r.stdout


def test_an_axis_of_a_user_policys_parameter_sets_it(user_dir, tmp_path):
    """`k = [1, 2]` beside `policy = "toy_user_policies:below_best"` ran one cell (k=2),
    twice over; then it was refused, the parameter sent to the spec.  Now the field is the
    parameter its declaration names: two cells, each the cell of its spec."""
    from fastsim.sweep.grid import load_sweep

    p = tmp_path / "mine.toml"
    p.write_text(f'clusters = 4\n[base]\npolicy = "{POL}"\n[axes]\nk = [1, 2]\n')
    q = tmp_path / "specs.toml"
    q.write_text(f'clusters = 4\n[axes]\npolicy = ["{POL}:k=1", "{POL}:k=2"]\n')
    cells = [c for c in load_sweep(p).cells if not c.is_baseline]
    assert [c.config.policy.values["k"] for c in cells] == [1, 2]
    assert {c.id for c in cells} == {c.id for c in load_sweep(q).cells if not c.is_baseline}


def test_an_axis_no_user_policy_declares_names_what_it_declares(user_dir, tmp_path):
    """`k = [1, 2]` beside a user's policy without a `k` was answered `policy =
    ["MODULE:FUNCTION:k=..."]`, a spec that is itself refused: the hint names the
    parameters the policy does declare."""
    from fastsim.sweep.grid import load_sweep

    pol = "toy_user_policies:long_plan_said"
    p = tmp_path / "mine.toml"
    p.write_text(f'clusters = 4\n[base]\npolicy = "{pol}"\n[axes]\nk = [1, 2]\n')
    with pytest.raises(ConfigError) as err:
        load_sweep(p)
    assert (f"axis 'k' applies to no cell: no policy of the grid has the field 'k'; allowed: "
            f"a field of a policy of the grid ({pol}: no parameter), or 'k' beside a policy "
            f"that declares it (evalstop, deprioritize, margin") in str(err.value)


def test_an_axis_beside_a_policy_whose_parameters_go_in_its_spec_says_so(tmp_path,
                                                                          monkeypatch):
    """A policy whose one parameter is named like a workload field (`sigma`, given in its
    spec only) was said to declare no parameter beside `k = [1, 2]`."""
    from fastsim.sweep.grid import load_sweep

    _declare(tmp_path, monkeypatch, "toy_spec_only",
             "from fastsim.registry import Param\n"
             "@stop_policy(params=[Param('sigma', 'float', 0.1, lo=0)])\n@njit\n"
             "def noisy(scores, losses, attained_h, t_est_h, sigma):\n    return 0\n")
    p = tmp_path / "mine.toml"
    p.write_text('clusters = 4\n[base]\npolicy = "toy_spec_only:noisy"\n[axes]\nk = [1, 2]\n')
    with pytest.raises(ConfigError) as err:
        load_sweep(p)
    assert "(toy_spec_only:noisy: sigma, in its spec only), or 'k' beside" in str(err.value)


PEEKING_SRC = '''
import ctypes
import random
import sys

import numba
import numpy as np
from numba import njit, objmode
from fastsim.registry import scheduler_key, stop_policy


def _peak_of(t_est_h):
    """The hidden peak of the job with this duration estimate, from the caller's frames."""
    f = sys._getframe()
    while f is not None and not hasattr(f.f_locals.get("w"), "peak_eval"):
        f = f.f_back
    if f is None:
        return 0
    w = f.f_locals["w"]
    c, j = np.argwhere(w.t_est_h == t_est_h)[0]
    return int(w.peak_eval[c, j]) if w.hacking[c, j] else 0


@njit
def _peek(t_est_h):
    with objmode(p="int64"):
        p = _peak_of(t_est_h)
    return p


# the same Python, called from compiled code through a ctypes callback instead
_PEEK_C = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_double)(_peak_of)


@njit
def {name}(scores, losses, attained_h, t_est_h):
    {body}
'''


@pytest.mark.parametrize("name,body,needle", [
    # object mode walked the frames to the workload: precision and recall 1, FPR 0
    ("at_the_peak", "return scores.shape[0] if scores.shape[0] == _peek(t_est_h) + 1 else 0",
     "_peek has a with block (numba's object mode)"),
    # a ctypes callback runs that Python without object mode: it read the peaks, exit 0
    ("at_the_peak_c", "return scores.shape[0] if scores.shape[0] == _PEEK_C(t_est_h) + 1 else 0",
     "at_the_peak_c uses _PEEK_C (a ctypes function that runs Python"),
    # numba's generator is per thread: results changed from run to run
    ("coin", "return scores.shape[0] if np.random.random() < 0.3 else 0",
     "coin uses np.random (a random generator's state)"),
    ("coin_stdlib", "return scores.shape[0] if random.random() < 0.3 else 0",
     "coin_stdlib uses random (a random generator's state)"),
    # the job's thread decided: results changed with NUMBA_NUM_THREADS, exit 0
    ("by_thread", "return scores.shape[0] if numba.get_thread_id() == 1 else 0",
     "by_thread uses numba.get_thread_id (which thread runs it, or how many)"),
    ("by_threads", "return scores.shape[0] if numba.get_num_threads() > 1 else 0",
     "by_threads uses numba.get_num_threads (which thread runs it, or how many)"),
])
@pytest.mark.parametrize("kind", ["policy", "scheduler"])
def test_user_code_cannot_reach_hidden_truth_or_thread_timing(tmp_path, monkeypatch, capsys,
                                                              name, body, needle, kind):
    """The information boundary holds for user code beyond its arguments: a function that
    runs Python (object mode) or draws from a generator is refused in one line when it is
    declared, before any workload exists."""
    module = f"toy_peeking_{kind}_{name}"
    src = PEEKING_SRC.format(name=name, body=body)
    if kind == "scheduler":
        src = src.replace("(scores, losses, attained_h, t_est_h)",
                          "(t_est_h, gpus, job_type, arrival_h)")
        src = src.replace("return scores.shape[0] if ", "return 1.0 if ").replace(" else 0", " else 2.0")
        src = src.replace("scores.shape[0] == _peek(t_est_h) + 1", "_peek(t_est_h) > 0")
        src = src.replace("scores.shape[0] == _PEEK_C(t_est_h) + 1", "_PEEK_C(t_est_h) > 0")
    (tmp_path / f"{module}.py").write_text(src + f"\n{name} = "
                                           f"{'stop_policy' if kind == 'policy' else 'scheduler_key'}"
                                           f"()({name})\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "o.parquet"
    assert main(["run", "--clusters", "2", "--n-jobs", "10", f"--{kind}", f"{module}:{name}",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "allowed: a pure @njit function" in err, err
    assert len(err.splitlines()) == 1 and not out.exists()


def test_a_c_librarys_ctypes_function_stays_allowed():
    """Only a ctypes function that runs Python is refused (the case above): one looked up
    in a C library is machine code over its arguments, as a numba function is."""
    import ctypes
    import ctypes.util

    from fastsim.purity import _runs_python

    libm = ctypes.CDLL(ctypes.util.find_library("m"))
    callback = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(lambda x: x)
    address = ctypes.cast(callback, ctypes.c_void_p).value
    assert not _runs_python(libm.erf) and not _runs_python(len)
    assert _runs_python(callback) and _runs_python(ctypes.pythonapi.PyRun_SimpleString)
    assert _runs_python(ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(address))
    assert _runs_python(ctypes.CDLL(None).PyRun_SimpleString)


HELPER_BELOW_SRC = '''
import numpy as np
from numba import njit
from fastsim.registry import scheduler_key, stop_policy


@stop_policy()
@njit
def coin_below(scores, losses, attained_h, t_est_h):
    return scores.shape[0] if coin() else 0


@scheduler_key()
@njit
def coin_key(t_est_h, gpus, job_type, arrival_h):
    return 1.0 if coin() else 2.0


@njit
def coin():  # defined after the declarations that call it: not there when they are made
    return np.random.random() < 0.3
'''


@pytest.mark.parametrize("argv", [["--policy", "toy_helper_below:coin_below"],
                                  ["--scheduler", "toy_helper_below:coin_key"]])
def test_a_random_helper_defined_below_its_policy_is_refused_before_it_runs(
        tmp_path, monkeypatch, capsys, argv):
    """Declared, a policy's helper further down the module does not exist yet, so the
    purity check passed it; numba compiled it in at the first call, and the run's results
    changed from run to run (exit 0).  It is asked again where the code runs, and by a
    sweep before it writes a chunk."""
    (tmp_path / "toy_helper_below.py").write_text(HELPER_BELOW_SRC)
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "o.parquet"
    assert main(["run", "--clusters", "2", "--n-jobs", "10", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "coin uses np.random (a random generator's state)" in err, err
    assert len(own_lines(err)) == 1 and not out.exists()
    sweep = tmp_path / "s.toml"
    option, spec = argv
    sweep.write_text(f'clusters = 2\n[base]\nn_jobs = 10\n[axes]\n{option[2:]} = ["{spec}"]\n')
    assert main(["sweep", str(sweep), "--out", str(tmp_path / "sw"), "--no-progress"]) == 2
    assert "coin uses np.random" in capsys.readouterr().err
    assert not list((tmp_path / "sw").glob("cells/**/*.parquet"))


@pytest.mark.parametrize("cached", ["policy", "helper"])
def test_a_policy_compiled_with_numbas_disk_cache_is_refused(tmp_path, monkeypatch, cached):
    """numba's cache=True keys compiled code by the function's own file: THRESH edited in
    the file its helper imports it from, a StopMonitor of the policy still stopped at a
    decline of 15 against THRESH = 50 (the machine code of THRESH = 0.5 ran)."""
    import importlib

    from fastsim.registry import stop_policy

    (tmp_path / f"disk_{cached}_helper.py").write_text(
        "from numba import njit\nTHRESH = 0.5\n\n\n"
        f"@njit{'(cache=True)' if cached == 'helper' else ''}\n"
        "def below(d):\n    return d > THRESH\n")
    (tmp_path / f"disk_{cached}.py").write_text(
        f"from numba import njit\nimport disk_{cached}_helper\n\n\n"
        f"@njit{'(cache=True)' if cached == 'policy' else ''}\n"
        "def cached(scores, losses, attained_h, t_est_h):\n    e = scores.shape[0]\n"
        f"    return e if e >= 2 and disk_{cached}_helper.below(scores[e - 2] - scores[e - 1]) "
        "else 0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    fn = importlib.import_module(f"disk_{cached}").cached
    with pytest.raises(ConfigError, match=r"(cached|below) is compiled with cache=True \(numba's "
                                          r"cache notices no edit outside its own file\)"):
        stop_policy()(fn)


def test_a_metric_calling_a_function_compiled_with_numbas_disk_cache_is_refused(tmp_path,
                                                                                 monkeypatch):
    """A metric's @njit(cache=True) callee multiplied by SCALE, imported from a third file:
    with SCALE edited from 1.0 to 2.0, the next run's metric column held the values of
    SCALE = 1.0 (numba's cache watches the callee's own file alone), and a sweep, whose
    hash saw the edit, computed new cells with the old code.  Decision functions were
    refused so; metrics were not checked."""
    import importlib

    (tmp_path / "disk_metric_consts.py").write_text("SCALE = 1.0\n")
    (tmp_path / "disk_metric_scale.py").write_text(
        "from numba import njit\nfrom disk_metric_consts import SCALE\n\n\n"
        "@njit(cache=True)\ndef scaled(x):\n    return x * SCALE\n")
    (tmp_path / "disk_metric.py").write_text(
        "from fastsim.metrics import cluster_metric\nimport disk_metric_scale\n\n\n"
        "@cluster_metric()\ndef scaled_jct(jobs):\n"
        "    return disk_metric_scale.scaled(jobs['jct_h'].sum(axis=1))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with pytest.raises(ConfigError, match=r"^metric scaled_jct: scaled is compiled with "
                                              r"cache=True \(numba's cache notices no edit "
                                              r"outside its own file\); allowed: a pure function"):
            importlib.import_module("disk_metric")
    finally:
        from fastsim import metrics as M
        M._METRICS.pop("scaled_jct", None)  # declared for this test only, if it was


@pytest.mark.parametrize("reach", ["method", "attribute"])
def test_a_metric_reaching_a_disk_cached_function_through_an_object_is_refused(
        tmp_path, monkeypatch, reach):
    """The cache check followed the functions a metric names and their modules' functions
    (``mod.f``), not a method of an object of the user's (``SCALER.apply(v)``) nor
    what that object holds (``self.fn``): a metric reaching an @njit(cache=True) function
    so passed, and with a constant of that function's, in a third file, edited, the next
    run's column held the old constant's values (numba's cache watches the function's own
    file alone), and a resumed sweep kept cells of the old code (the code hash missed
    those files too)."""
    import importlib

    from fastsim import registry as R

    name = f"disk_object_{reach}"
    (tmp_path / f"{name}_consts.py").write_text("SCALE = 1.0\n")
    (tmp_path / f"{name}_scale.py").write_text(
        f"from numba import njit\nfrom {name}_consts import SCALE\n\n\n"
        "@njit(cache=CACHED)\ndef scaled(x):\n    return x * SCALE\n".replace(
            "CACHED", "__import__('os').environ.get('TOY_CACHED') == '1'"))
    call = ("self.fn(v)" if reach == "attribute" else f"{name}_scale.scaled(v)")
    (tmp_path / f"{name}.py").write_text(
        f"from fastsim.metrics import cluster_metric\nimport {name}_scale\n\n\n"
        "class Scaler:\n    def __init__(self, fn):\n        self.fn = fn\n\n"
        f"    def apply(self, v):\n        return {call}\n\n\n"
        f"SCALER = Scaler({name}_scale.scaled)\n\n\n"
        f"@cluster_metric()\ndef {name}(jobs):\n"
        "    return SCALER.apply(jobs['jct_h'].sum(axis=1))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from fastsim import metrics as M
    try:
        monkeypatch.setenv("TOY_CACHED", "1")
        with pytest.raises(ConfigError, match=rf"^metric {name}: scaled is compiled with "
                                              r"cache=True \(numba's cache notices no edit"):
            importlib.import_module(name)
        M._METRICS.pop(name, None)
        for module in (name, f"{name}_scale"):
            sys.modules.pop(module, None)
        monkeypatch.setenv("TOY_CACHED", "0")  # in memory: the code hash follows it too
        importlib.import_module(name)
        fn = M.lookup(f"{name}:{name}").fn
        before = R.source_sha256(fn)
        monkeypatch.setattr(sys.modules[f"{name}_scale"], "SCALE", 2.0)  # the consts edited
        assert R.source_sha256(fn) != before
    finally:
        M._METRICS.pop(name, None)  # declared for this test only, if it was
        for module in (name, f"{name}_scale", f"{name}_consts"):
            sys.modules.pop(module, None)



def test_an_object_holding_its_own_method_is_followed_once(tmp_path):
    """The cache check and the code hash follow a method of a user's object and what the
    object holds: an object holding a bound method of its own (``self.fn = self.apply``,
    a callback) was followed again each time that method was reached, for ever, so
    declaring a metric calling ``SCALER.apply`` never returned."""
    (tmp_path / "selfheld.py").write_text(
        "from fastsim.metrics import cluster_metric\n\n\n"
        "class Scaler:\n    def __init__(self):\n        self.fn = self.apply\n\n"
        "    def apply(self, v):\n        return v * 2.0\n\n\n"
        "SCALER = Scaler()\n\n\n"
        "@cluster_metric()\ndef selfheld(jobs):\n"
        "    return SCALER.apply(jobs['jct_h'].sum(axis=1))\n")
    script = ("import selfheld\nfrom fastsim import metrics as M, registry as R\n"
              "print(len(R.source_sha256(M.lookup('selfheld:selfheld').fn)))\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=30, env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert (done.returncode, done.stdout) == (0, "64\n"), done.stderr

DISK_BELOW_SRC = '''
from numba import njit
from fastsim.metrics import cluster_metric


@cluster_metric()
def cached_below_jct(jobs):
    return total(jobs["jct_h"])


@njit(cache=True)  # defined after the metric that calls it: not there when it is declared
def total(x):
    return x.sum(axis=1)
'''


def test_a_metric_whose_disk_cached_callee_is_defined_below_it_is_refused_before_it_runs(
        tmp_path, monkeypatch, capsys):
    """Declared, the function the metric calls, further down its module, does not exist
    yet; it is asked again where the metric runs, and by a sweep before it writes a chunk."""
    (tmp_path / "toy_disk_below.py").write_text(DISK_BELOW_SRC)
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "o.parquet"
    assert main(["run", "--clusters", "2", "--n-jobs", "10", "--metric",
                 "toy_disk_below:cached_below_jct", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "metric cached_below_jct: total is compiled with cache=True" in err, err
    assert len(own_lines(err)) == 1 and not out.exists()
    sweep = tmp_path / "s.toml"
    sweep.write_text('clusters = 2\n[base]\nn_jobs = 10\n'
                     'metrics = ["toy_disk_below:cached_below_jct"]\n[axes]\nsigma = [0.01]\n')
    assert main(["sweep", str(sweep), "--out", str(tmp_path / "sw"), "--no-progress"]) == 2
    assert "total is compiled with cache=True" in capsys.readouterr().err
    assert not list((tmp_path / "sw").glob("cells/**/*.parquet"))


CHAIN_SRC = '''
from collections import namedtuple

import numpy as np
from numba import njit
from fastsim.registry import stop_policy

import {pkg}.inner

Limits = namedtuple("Limits", "random floor")
LIMITS = Limits(0.5, 0.0)


@njit
def chain_{pkg}_attr(scores, losses, attained_h, t_est_h):
    return scores.shape[0] if np.mean(scores) > LIMITS.random else 0


@njit
def chain_{pkg}_deep(scores, losses, attained_h, t_est_h):
    return scores.shape[0] if {pkg}.inner.peek(t_est_h) > 0 else 0
'''


def test_purity_follows_each_attribute_from_its_own_global(tmp_path, monkeypatch):
    """An attribute is read from what it is loaded on: a field named random on a global
    tuple was taken for np.random (the code also loaded np), and a user function reached
    as pkg.inner.peek was never followed to the object mode inside it."""
    import importlib

    from fastsim.registry import stop_policy

    pkg = "purity_chain_pkg"
    (tmp_path / pkg).mkdir()
    (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / pkg / "inner.py").write_text(
        "from numba import njit, objmode\n\n\n@njit\ndef peek(t):\n"
        "    with objmode(p='int64'):\n        p = 1\n    return p\n")
    (tmp_path / "purity_chain.py").write_text(CHAIN_SRC.format(pkg=pkg))
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("purity_chain")
    stop_policy()(getattr(mod, f"chain_{pkg}_attr"))
    with pytest.raises(ConfigError, match=r"peek has a with block \(numba's object mode\)"):
        stop_policy()(getattr(mod, f"chain_{pkg}_deep"))


CLOSURE_SRC = '''
import numpy as np
from numba import njit, objmode


@njit
def _peek(t):
    with objmode(p="int64"):
        p = 1
    return p


def made(draw, floor):
    @njit
    def closure_policy(scores, losses, attained_h, t_est_h):
        return scores.shape[0] if draw(t_est_h) > floor else 0
    return closure_policy


@njit
def _mean_of(t):
    return np.mean(np.arange(3.0)) * t
'''


@pytest.mark.parametrize("draw,refused", [
    ("np.random.random", "uses draw (a random generator's state)"),
    ("mod._peek", "_peek has a with block"),
    ("mod._mean_of", None),
])
def test_purity_reads_a_closures_variables(tmp_path, monkeypatch, draw, refused):
    """A policy made by a factory loads what it captured from its closure: a generator or
    an object-mode function captured there was accepted (numba compiles both in)."""
    import importlib

    from fastsim.registry import stop_policy

    (tmp_path / "purity_closure.py").write_text(CLOSURE_SRC)
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("purity_closure")
    fn = mod.made(eval(draw, {"np": np, "mod": mod}), 0.5)
    if refused is None:
        stop_policy(name=f"closure_ok_{tmp_path.name}")(fn)
        return
    with pytest.raises(ConfigError, match=re.escape(refused)):
        stop_policy(name=f"closure_{tmp_path.name}")(fn)


def test_a_metric_refused_for_rounding_by_batch_is_told_so():
    """A metric of the cluster's own jobs whose last bits follow the batch's shape (here a
    sum along a Fortran-order copy; a BLAS product does the same) is refused, since a
    sweep's results are the same bits for any chunk, with the cause and the fix named: it
    read as if it used other clusters.  One that does use them gets no such note."""
    from fastsim import metrics as M

    x = np.random.default_rng(0).lognormal(1.0, 2.0, (5, 300))
    jobs = {"held_h": x}

    def fortran_sum(j):
        return np.asfortranarray(j["held_h"]).sum(axis=1)

    def relative(j):
        return j["held_h"].mean(axis=1) / j["held_h"].mean()

    try:
        for fn in (fortran_sum, relative):
            M.cluster_metric()(fn)
        with pytest.raises(ConfigError, match=r"returned .* alone \(a rounding difference: a "
                                              r"matrix product .*\(x \* w\)\.sum\(axis=1\)"):
            M.user_columns(("fortran_sum",), jobs)
        with pytest.raises(ConfigError, match=r"for the same cluster alone; allowed"):
            M.user_columns(("relative",), jobs)
    finally:
        for name in ("fortran_sum", "relative"):
            M._METRICS.pop(name, None)  # declared for this test only


def test_a_metric_that_moves_values_between_clusters_is_refused_though_the_last_is_its_own():
    """Only the last cluster was asked again alone: a metric that gave cluster c the value
    of cluster c+1's jobs, took the clusters in another order, or summed the clusters after
    it, each leaving the last cluster its own value, passed, and its column changed with a
    sweep's chunk.  The first, middle and last clusters are each asked again alone."""
    from fastsim import metrics as M

    x = np.random.default_rng(1).lognormal(1.0, 1.0, (7, 40))
    jobs = {"held_h": x}

    def next_clusters_sum(j):
        v = j["held_h"].sum(axis=1)
        v[:-1] = v[1:].copy()
        return v

    def reordered_sum(j):
        v = j["held_h"].sum(axis=1)
        v[:-1] = v[:-1][::-1].copy()
        return v

    def later_clusters_sum(j):
        return np.cumsum(j["held_h"].sum(axis=1)[::-1])[::-1]

    def own_rows_sum(j):
        return j["held_h"].sum(axis=1)

    names = ("next_clusters_sum", "reordered_sum", "later_clusters_sum", "own_rows_sum")
    try:
        for fn in (next_clusters_sum, reordered_sum, later_clusters_sum, own_rows_sum):
            M.cluster_metric()(fn)
        for name in names[:-1]:
            for n in (2, 3, 7) if name != "reordered_sum" else (3, 7):  # 2: the identity
                with pytest.raises(ConfigError, match=rf"^metric {name} returned .* among {n} "
                                                      r"and .* for the same cluster alone; "
                                                      r"allowed: a value computed from the "
                                                      r"cluster's own jobs"):
                    M.user_columns((name,), {"held_h": x[:n]})
        own = M.user_columns(("own_rows_sum",), jobs)["own_rows_sum"]
        assert np.array_equal(own, x.sum(axis=1))
    finally:
        for name in names:
            M._METRICS.pop(name, None)  # declared for this test only


def test_a_metric_that_moves_a_value_between_clusters_none_asked_alone_is_refused():
    """Only the first, middle and last clusters are asked again alone: a metric that gave
    cluster 1 cluster 2's value passed in a batch of 4 or more (its column changed with a
    sweep's chunk).  The batch is asked again without its first cluster: every other one
    must keep its value, to the bit; NaN where the metric is undefined is kept too."""
    from fastsim import metrics as M

    x = np.random.default_rng(2).lognormal(1.0, 1.0, (8, 30))

    def second_takes_third(j):
        v = j["held_h"].sum(axis=1)
        if v.shape[0] >= 4:
            v[1] = v[2]
        return v

    def own_or_nan(j):
        v = j["held_h"].sum(axis=1)
        return np.where(v > np.median(x.sum(axis=1)), v, np.nan)  # a fixed cut: its own

    try:
        for fn in (second_takes_third, own_or_nan):
            M.cluster_metric()(fn)
        for n in (4, 5, 8):
            with pytest.raises(ConfigError, match=rf"^metric second_takes_third returned .* "
                                                  rf"for cluster \d of {n} and .* without "
                                                  r"cluster 0; allowed: a value computed "
                                                  r"from the cluster's own jobs"):
                M.user_columns(("second_takes_third",), {"held_h": x[:n]})
        got = M.user_columns(("own_or_nan",), {"held_h": x})["own_or_nan"]
        assert np.isnan(got).any() and not np.isnan(got).all()
    finally:
        for name in ("second_takes_third", "own_or_nan"):
            M._METRICS.pop(name, None)  # declared for this test only


def test_a_metric_that_rebinds_or_drops_a_key_changes_no_other_metric():
    """Each metric gets a dict of its own: one that rebinds a key (a unit conversion,
    ``jobs["jct_h"] = jobs["jct_h"] / 24``) or drops one changed what every later metric
    read, and what its own check against the cluster alone read (refused as if it used
    other clusters)."""
    from fastsim import metrics as M

    x = np.random.default_rng(0).lognormal(1.0, 1.0, (4, 30))
    jobs = {"jct_h": x, "held_h": x / 2}

    def in_days(j):
        j["jct_h"] = j["jct_h"] / 24
        return j["jct_h"].mean(axis=1)

    def held_only(j):
        return j.pop("held_h").sum(axis=1)

    def in_hours(j):
        return j["jct_h"].mean(axis=1) + 0 * j["held_h"][:, 0]

    try:
        for fn in (in_days, held_only, in_hours):
            M.cluster_metric()(fn)
        out = M.user_columns(("in_days", "held_only", "in_hours"), jobs)
        assert np.array_equal(out["in_days"], (x / 24).mean(axis=1))
        assert np.array_equal(out["in_hours"], x.mean(axis=1))
        assert set(jobs) == {"jct_h", "held_h"} and jobs["jct_h"] is x
    finally:
        for name in ("in_days", "held_only", "in_hours"):
            M._METRICS.pop(name, None)  # declared for this test only


def test_a_module_named_like_its_policys_short_name_is_still_module_attr(tmp_path,
                                                                          monkeypatch):
    """``name="samename"`` declared in samename.py registers the short name on import; its
    ``samename:samename:k=3`` was taken before the import and refused after it ("too many
    ':'"), so the second cell of a sweep naming it failed where the first ran."""
    from fastsim import registry as R

    (tmp_path / "samename.py").write_text(POLICY_SRC.replace(
        'min_evals=lambda v: v["k"] + 1)', 'min_evals=lambda v: v["k"] + 1, name="samename")')
        .replace("def below_best(", "def samename("))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "samename", raising=False)
    try:
        for spec in ("samename:samename:k=3", "samename:samename:k=3", "samename:k=3"):
            p = PolicyConfig.parse(spec)
            assert (p.name, p.values["k"]) == ("samename:samename", 3)
        assert PolicyConfig.parse("samename:samename").values["k"] == 2
    finally:
        R._REGISTRY["policy"].pop("samename", None)  # registered for this test only
        sys.modules.pop("samename", None)


def test_replay_refuses_two_policies_of_one_label(tmp_path, monkeypatch):
    """Rows and summaries name a policy by its label: the same declaration in two modules
    (both ``below_best(k=2,drop=0)``) was summarised as one policy over twice the jobs."""
    from fastsim.replay.logs import read_logs
    from fastsim.replay.policies import replay

    for mod in ("label_twin_a", "label_twin_b"):
        (tmp_path / f"{mod}.py").write_text(POLICY_SRC)
    monkeypatch.syspath_prepend(str(tmp_path))
    log = tmp_path / "log.csv"
    log.write_text("job_id,step,score\na,1,0.5\na,2,0.6\na,3,0.5\na,4,0.4\na,5,0.3\n")
    with pytest.raises(ConfigError, match=re.escape(
            "policies label_twin_a:below_best and label_twin_b:below_best are both labelled "
            "'below_best(k=2,drop=0)[scope=all]'; allowed: policies whose labels differ")):
        replay(read_logs([log]), ["label_twin_a:below_best", "label_twin_b:below_best"])
    table = replay(read_logs([log]), ["label_twin_a:below_best", "label_twin_a:below_best:k=2"])
    assert table.height == 1  # one policy given twice is still replayed once


def test_replay_names_one_policy_at_two_settings_its_label_cannot_tell_apart(
        tmp_path, monkeypatch):
    """One declaration whose label leaves out a parameter (none given: its name alone),
    replayed at two settings: refused as "policies X and X are both labelled", telling the
    user to declare one with a label of its own, which a second module cannot mend."""
    from fastsim.replay.logs import read_logs
    from fastsim.replay.policies import replay

    (tmp_path / "label_unnamed.py").write_text(
        POLICY_SRC.replace('label="below_best(k={k},drop={drop:g})", ', ""))
    monkeypatch.syspath_prepend(str(tmp_path))
    log = tmp_path / "log.csv"
    log.write_text("job_id,step,score\na,1,0.5\na,2,0.6\na,3,0.5\na,4,0.4\na,5,0.3\n")
    with pytest.raises(ConfigError, match=re.escape(
            "policy label_unnamed:below_best at two settings (k=2 and k=3) is labelled "
            "'below_best[scope=all]' at both: its label leaves out what they differ in; "
            "allowed: one setting, or a label naming every parameter")):
        replay(read_logs([log]), ["label_unnamed:below_best", "label_unnamed:below_best:k=3"])


def test_a_sweep_refuses_two_policies_of_one_label(tmp_path, monkeypatch):
    """A sweep over the same declaration in two modules ran two cells that summary.txt
    headed alike and a figure drew under one legend entry; refused before any work."""
    from fastsim.sweep.grid import load_sweep

    for mod in ("sweep_twin_a", "sweep_twin_b"):
        (tmp_path / f"{mod}.py").write_text(POLICY_SRC)
    monkeypatch.syspath_prepend(str(tmp_path))
    toml = tmp_path / "twins.toml"
    for policies, baseline in ((["sweep_twin_a:below_best", "sweep_twin_b:below_best"], ""),
                               (["sweep_twin_a:below_best"],
                                'baseline = "sweep_twin_b:below_best"\n')):
        toml.write_text(f"clusters = 4\n{baseline}[base]\nn_jobs = 20\n[axes]\n"
                        f"policy = {policies!r}\n".replace("'", '"'))
        with pytest.raises(ConfigError, match=re.escape(
                "are both labelled 'below_best(k=2,drop=0)'; allowed: policy labels that "
                "differ")):
            load_sweep(toml)
    toml.write_text('clusters = 4\n[base]\nn_jobs = 20\n[axes]\npolicy = '
                    '["sweep_twin_a:below_best", "sweep_twin_a:below_best:k=3"]\n')
    assert len(load_sweep(toml).cells) == 3  # one module's policy at two settings: fine


def test_a_keep_best_policy_on_losses_with_no_score_yet_keeps_the_first_evaluation(
        tmp_path, monkeypatch):
    """A ``keep="best"`` policy that reads losses may fire before any score: replay (and
    the engine) deliver the first evaluation, the monitor said "keep the checkpoint of
    step None" (the transformers callback then kept ``checkpoint-None``)."""
    from fastsim.replay.monitor import StopMonitor
    from fastsim.replay.policies import replay
    from fastsim.replay.logs import read_logs

    (tmp_path / "loss_best.py").write_text(textwrap.dedent('''
        from numba import njit
        from fastsim.registry import stop_policy

        @stop_policy(keep="best", reads=("scores", "losses"), min_evals=2)
        @njit
        def at_two(scores, losses, attained_h, t_est_h):
            return 2 if scores.shape[0] == 2 else 0
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    log = tmp_path / "log.csv"
    log.write_text("job_id,step,score,loss\nj,10,,1.0\nj,20,,0.9\nj,30,0.5,0.8\n")
    row = replay(read_logs([log]), ["loss_best:at_two"]).row(0, named=True)
    m = StopMonitor("loss_best:at_two")
    for step, loss in ((10, 1.0), (20, 0.9)):
        d = m.observe("j", step, math.nan, loss=loss)
    assert (row["trigger_step"], row["delivered_step"]) == (20, 10)
    assert d.stop and d.keep_step == 10 and "step None" not in d.reason


def test_a_metric_that_is_a_lambda_is_refused():
    """Its column was "<lambda>", which no spec names, and a second lambda of the same
    module replaced the first in the registry: runs of the first computed the second."""
    from fastsim import metrics as M

    with pytest.raises(ConfigError, match=r"metric '<lambda>': the column is named after the "
                                          r"function; allowed: a function defined with def"):
        M.cluster_metric(label="first")(lambda jobs: jobs["jct_h"].mean(axis=1))
    assert "<lambda>" not in M._METRICS


def test_a_metric_that_cannot_take_the_columns_alone_is_refused_where_declared(
        tmp_path, monkeypatch, capsys):
    """A metric written ``def two(jobs, k)`` was declared, and the run failed at its call in
    a line naming neither its file nor its line (``metric two failed: TypeError: two()
    missing 1 required positional argument: 'k'``): it is now refused where it is
    declared, as a stop policy's or a key's arguments are, naming its line."""
    (tmp_path / "toy_two_args.py").write_text(
        "from fastsim.metrics import cluster_metric\n\n\n@cluster_metric()\n"
        "def two(jobs, k):\n    return jobs['jct_h'].mean(axis=1)\n\n\n@cluster_metric()\n"
        "def fine(jobs, k=2, *rest):\n    return jobs['jct_h'].mean(axis=1) * k\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "o.parquet"
    assert main(["run", "--clusters", "2", "--n-jobs", "10", "--metric", "toy_two_args:two",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and not out.exists(), err
    assert "toy_two_args.py, line 4: metric two('jobs', 'k'): arguments differ from the " \
           "declaration; allowed: one argument, the per-job arrays (def two(jobs))" in err, err

def test_numpy_scalars_are_a_user_parameters_numbers_as_a_built_ins(tmp_path, monkeypatch):
    """A value or default computed with numpy (np.int64(3)) was refused as 'allowed: an
    integer', where a built-in's k=np.int64(3) was taken as 3."""
    (tmp_path / "toy_np_scalars.py").write_text(textwrap.dedent("""
        import numpy as np
        from numba import njit
        from fastsim.registry import Param, stop_policy

        @stop_policy(params=[Param("k", "int", np.int64(2), lo=1),
                             Param("drop", "float", np.float32(0.5), lo=0)],
                     label="np_scalars(k={k},drop={drop:g})")
        @njit
        def np_scalars(scores, losses, attained_h, t_est_h, k, drop):
            return 0
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    import toy_np_scalars

    assert [type(p.default) for p in toy_np_scalars.np_scalars.params[:2]] == [int, float]
    name = "toy_np_scalars:np_scalars"
    p = PolicyConfig(name=name, params={"k": np.int64(3), "drop": np.float64(0.25)})
    assert p.params == (("k", 3), ("drop", 0.25)) and type(p.params[0][1]) is int
    assert p == PolicyConfig(name=name, params={"k": 3, "drop": 0.25})


@pytest.mark.parametrize("param,said", [
    # read as 'default of a=2 is invalid; allowed: a number in [-inf, inf)'
    (Param("a", "integer", 2), "kind 'integer' is invalid; allowed: int, float or bool"),
    (Param("a", "float", 1.0, lo="0"), "lo='0' is invalid; allowed: a number"),  # TypeError
    (Param("a", "float", 1.0, hi=math.nan), "hi=nan is invalid"),  # 'a number in [-inf, nan]'
    (Param("a", "int", 1, hi=10**400), "hi=1000"),  # an OverflowError traceback
    (Param("a", "float", 1.0, lo=2, hi=0), "lo=2 is above hi=0; allowed: lo <= hi"),
    (Param(1, "float", 1.0), "name 1 is invalid; allowed: a Python identifier"),  # TypeError
])
def test_a_param_its_function_cannot_take_is_refused_when_declared(param, said):
    from numba import njit

    from fastsim.registry import scheduler_key

    with pytest.raises(ConfigError) as e:
        scheduler_key(params=[param])(njit(lambda t_est_h, gpus, job_type, arrival_h, a: 0.0))
    assert said in str(e.value) and str(e.value).startswith(f"Param({param.name!r}, ")


@pytest.mark.parametrize("kw, said", [
    ({"percent": "no"}, "percent='no'; allowed: True or False"),  # shown x100 with a %
    ({"paired": True}, "paired=True; allowed: text"),  # its change labelled 'True'
    ({"label": 5}, "label=5; allowed: text"),
    ({"bounds": (0, 10**400)}, "bounds=(0, 1000"),  # an OverflowError traceback
])
def test_a_metric_declaration_of_the_wrong_kinds_is_refused_in_one_line(kw, said):
    from fastsim import metrics as M

    with pytest.raises(ConfigError) as e:
        M.cluster_metric(**kw)
    assert said in str(e.value) and str(e.value).startswith("cluster_metric ")


def test_a_metric_bound_may_be_a_numpy_number():
    from fastsim import metrics as M

    M.cluster_metric(bounds=(np.int64(0), np.float32(1.0)))  # refused as 'two numbers'


def test_a_metric_declared_a_percentage_by_numpys_bool_is_one():
    """percent=np.True_ was refused as 'allowed: True or False' (it was taken before the
    declaration's checks); it is declared with the bool it is."""
    from fastsim import metrics as M

    def np_percent_share(jobs):
        return jobs["stopped"].mean(axis=1)

    try:
        assert M.cluster_metric(percent=np.True_)(np_percent_share).percent is True
    finally:
        M._METRICS.pop("np_percent_share", None)


def test_a_config_made_before_its_policy_was_declared_again_is_refused(tmp_path, monkeypatch):
    """A notebook cell that declares a policy again (or a module reloaded) replaced the
    code a config made before names: simulate ran the new trigger under the old config
    (its impl hash, hence its sweep cell), and the monitor and replay did the same."""
    import importlib

    from fastsim.replay.monitor import StopMonitor
    from fastsim.replay.policies import parse_policy

    src = ("from numba import njit\nfrom fastsim.registry import stop_policy, scheduler_key\n"
           "@stop_policy()\n@njit\ndef mine(scores, losses, attained_h, t_est_h):\n"
           "    return {policy}\n"
           "@scheduler_key()\n@njit\ndef key(t_est_h, gpus, job_type, arrival_h):\n"
           "    return {key}\n")
    mod = tmp_path / "toy_redeclared.py"
    mod.write_text(src.format(policy="0", key="t_est_h"))
    monkeypatch.syspath_prepend(str(tmp_path))
    import toy_redeclared

    cfg = SimConfig.from_specs("toy_redeclared:key", "toy_redeclared:mine", n_jobs=10)
    simulate(cfg, 2)
    mod.write_text(src.format(policy="2 if scores.shape[0] >= 2 else 0", key="-t_est_h"))
    importlib.reload(toy_redeclared)
    for call in (lambda: simulate(cfg, 2), lambda: StopMonitor(cfg.policy),
                 lambda: parse_policy(cfg.policy),
                 lambda: simulate(cfg.with_policy("none"), 2)):
        with pytest.raises(ConfigError, match=r"'toy_redeclared:(mine|key)': its source here "
                                              r"\(hash \w+\) differs from the one the config "
                                              r"was made with"):
            call()
    # it said "allowed: the same code", not what runs the new code
    with pytest.raises(ConfigError, match=re.escape(
            "allowed: the same code, or a config made again from its spec "
            "(\"toy_redeclared:mine:...\"), which runs the code declared now")):
        simulate(SimConfig(cfg.workload, SimConfig.from_specs("srtf_est", "none").scheduler,
                           cfg.policy), 2)
    fresh = SimConfig.from_specs("toy_redeclared:key", "toy_redeclared:mine", n_jobs=10)
    assert simulate(fresh, 2).clusters.height == 2


@pytest.mark.parametrize("clone", [copy.deepcopy, lambda m: pickle.loads(pickle.dumps(m))])
def test_a_copied_monitor_of_a_user_policy_decides_as_the_original(user_dir, clone):
    """A StopMonitor copied mid-run (copy.deepcopy, or pickled to a checkpoint and loaded)
    held its user policy's read-only view of the series as an array of its own, frozen at
    the copy: the trigger never saw a later score, and the copy never stopped."""
    from fastsim.replay.monitor import StopMonitor

    m = StopMonitor("toy_user_policies:drawdown:drop=0.1,scope=all")
    for step, score in ((1, 0.5), (2, 0.6)):
        assert not m.observe("j", step, score).stop
    copied = clone(m)
    assert copied.observe("j", 3, 0.45) == m.observe("j", 3, 0.45)
    assert m.decision("j").stop and m.decision("j").keep_step == 2


def test_reading_a_user_policy_closes_the_files_it_reads(user_dir):
    """Each file of a user's code was opened for its hash and left for the garbage
    collector to close: a ResourceWarning per file (an error under -W error)."""
    import gc
    import warnings

    from fastsim.replay.monitor import StopMonitor

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        StopMonitor("toy_user_policies:says_half:scope=all")
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]


def test_a_misspelt_user_module_is_offered_the_nearest_one(tmp_path, monkeypatch):
    # --policy mydetector:below_best with mydetectors.py on the import path said only
    # "No module named 'mydetector'"
    from fastsim.metrics import lookup as metric_lookup

    (tmp_path / "mydetectors_typo.py").write_text("x = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for what, parse in (("policy", PolicyConfig.parse), ("scheduler", SchedulerConfig.parse),
                        ("metric", metric_lookup)):
        with pytest.raises(ConfigError) as exc:
            parse("mydetector_typo:below_best")
        assert str(exc.value).startswith(
            f"{what}='mydetector_typo:below_best' cannot be imported (No module named "
            "'mydetector_typo') (did you mean mydetectors_typo?); allowed: "), exc.value
    with pytest.raises(ConfigError) as exc:
        PolicyConfig.parse("zzq_unlike_any:det")  # nothing near: no hint
    assert "did you mean" not in str(exc.value)


def test_a_declaration_named_with_a_dot_or_by_its_module_alone_is_shown_its_spec(user_dir):
    """`mydetectors.below_best` (Python's way) and `mydetectors` were refused as a name
    that is neither a built-in nor MODULE:ATTR, with no word of the colon."""
    from fastsim.config import SchedulerConfig

    with pytest.raises(ConfigError, match=re.escape(
            "(a module and its function are joined by a colon: toy_user_policies:below_best)")):
        PolicyConfig.parse("toy_user_policies.below_best:k=2")
    with pytest.raises(ConfigError, match=re.escape(
            "(toy_user_schedulers is a module of yours: name its declaration, "
            "toy_user_schedulers:FUNCTION)")):
        SchedulerConfig.parse("toy_user_schedulers")
    with pytest.raises(ConfigError, match=r"or MODULE:FUNCTION of a user's @stop_policy$"):
        PolicyConfig.parse("no_such_thing_at_all")  # neither: no hint
    with pytest.raises(ConfigError, match=re.escape(
            "(a module and its function are joined by a colon: toy_user_policies:m)")):
        SimConfig.from_specs("fifo", "none", metrics=["toy_user_policies.m"])


MISTAKES_SRC = '''
from numba import jit, njit
from fastsim.metrics import cluster_metric
from fastsim.registry import scheduler_key, stop_policy
'''


@pytest.mark.parametrize("kind,args", [("policy", "scores, losses, attained_h, t_est_h"),
                                       ("scheduler", "t_est_h, gpus, job_type, arrival_h")])
def test_a_function_compiled_in_object_mode_is_refused_when_declared(tmp_path, monkeypatch,
                                                                     capsys, kind, args):
    """``@jit(forceobj=True)`` is object mode, as a ``with objmode`` block is: it was
    declared, and the run failed in numba's typing of the driver, in a line naming the
    function by its address (``Invalid use of type(CPUDispatcher(<function forced at
    0x7f...>))``) and not object mode."""
    module = f"toy_forceobj_{kind}"
    decorator = "stop_policy" if kind == "policy" else "scheduler_key"
    (tmp_path / f"{module}.py").write_text(
        MISTAKES_SRC + f"\n\n@{decorator}()\n@jit(forceobj=True)\ndef forced({args}):\n"
        "    return 0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "o.parquet"
    assert main(["run", "--clusters", "2", "--n-jobs", "10", f"--{kind}", f"{module}:forced",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "forced is compiled in object mode (forceobj=True)" in err, err
    assert "CPUDispatcher" not in err and len(own_lines(err)) == 1 and not out.exists()


def _declare(tmp_path, monkeypatch, module: str, body: str):
    """Import ``module`` written from MISTAKES_SRC + ``body``: what a user's file holds."""
    import importlib

    (tmp_path / f"{module}.py").write_text(MISTAKES_SRC + textwrap.dedent(body))
    monkeypatch.syspath_prepend(str(tmp_path))
    return importlib.import_module(module)


def _sweep_of(tmp_path, monkeypatch, module: str, body: str, axis: str, specs: list[str]):
    """``module`` declared as ``_declare`` does, and a sweep file of 2-cluster cells of 10
    jobs whose ``axis`` lists ``specs``: (the sweep file, the --out it is run into)."""
    _declare(tmp_path, monkeypatch, module, body)
    sweep = tmp_path / "s.toml"
    sweep.write_text(f"clusters = 2\n[base]\nn_jobs = 10\n[axes]\n{axis} = {json.dumps(specs)}\n")
    return sweep, tmp_path / "sw"


def test_a_sweep_says_it_compiles_a_user_key_once(tmp_path, monkeypatch, capsys):
    """A sweep of a user's key sat silent while numba compiled it (5 s on a busy 2-core
    machine, --no-progress), where fastsim run says so in one line: it says it once, and a
    second sweep in the process, which compiles nothing, does not."""
    import fastsim.compile_notice as notice

    monkeypatch.setattr(notice, "engine_is_cached", lambda *code: True)
    sweep, out = _sweep_of(tmp_path, monkeypatch, "toy_sweep_notice_key",
                           "@scheduler_key()\n@njit\ndef f(t_est_h, gpus, job_type, arrival_h):\n"
                           "    return t_est_h * gpus\n", "scheduler", ["toy_sweep_notice_key:f"])
    said = "compiling the scheduler toy_sweep_notice_key:f (about 2-15 s"
    assert main(["sweep", str(sweep), "--out", str(out), "--no-progress"]) == 0
    assert capsys.readouterr().err.count(said) == 1
    assert main(["sweep", str(sweep), "--out", str(tmp_path / "again"), "--no-progress"]) == 0
    assert said not in capsys.readouterr().err


def test_a_misspelt_name_in_a_policy_names_its_def_line(tmp_path, monkeypatch, capsys):
    """A name the function never defined (a typo of a variable) is a numba typing error
    that quotes no line of the user's file: the refusal named the policy and the name
    alone, where every other refusal of what the function is names a line of it."""
    mod = _declare(tmp_path, monkeypatch, "toy_misspelt_name",
                   "@stop_policy()\n@njit\ndef f(scores, losses, attained_h, t_est_h):\n"
                   "    return int(scores.shape[0] > bestt)\n")
    assert main(["run", "--policy", "toy_misspelt_name:f", "--clusters", "2", "--n-jobs", "10",
                 "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    from fastsim.registry import def_line

    assert ("failed: TypingError: NameError: name 'bestt' is not defined"
            f"{def_line(mod.f.user.py_func)}; allowed: ") in err and len(own_lines(err)) == 1, err


@pytest.mark.parametrize("option, decorator, said", [
    ("--policy", "@njit", "an @njit function with no @stop_policy(...) over it"),
    ("--scheduler", "@njit", "an @njit function with no @scheduler_key(...) over it"),
    ("--metric", "", "a plain function with no @cluster_metric(...) over it"),
    # the other way round, its declaration alone would not do: say what it must be
    ("--policy", "", "a plain function; a stop policy is an @njit function with "
     "@stop_policy(...) over it"),
    ("--metric", "@njit", "an @njit function; a metric is a plain function with "
     "@cluster_metric(...) over it"),
])
def test_a_function_left_undeclared_is_said_to_lack_its_declaration(
        tmp_path, monkeypatch, capsys, option, decorator, said):
    """A function written without its declaration was refused as "is not a declared
    policy; allowed: an object made by @stop_policy", which a newcomer read as a wrong
    name: it now says that the function is there, and what to put over it."""
    module = f"toy_undeclared_{option[2:]}{'_jit' if decorator else ''}"
    _declare(tmp_path, monkeypatch, module,
             f"{decorator}\ndef f(scores, losses, attained_h, t_est_h):\n    return 0\n")
    assert main(["run", option, f"{module}:f", "--clusters", "2", "--n-jobs", "10",
                 "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert f"({module}:f is {said})" in err and len(own_lines(err)) == 1, err


@pytest.mark.parametrize("body, said", [
    ("@stop_policy()\n@njit\ndef f(scores, losses, attained_h, t_est_h):\n"
     "    return scores.shape[0] + 5\n", "it answered 6 to the first evaluation of {job}"),
    ("@stop_policy(params=[Param('k', 'int', 2, lo=1)], lookback='k')\n@njit\n"
     "def f(scores, losses, attained_h, t_est_h, k):\n    return 1\n",
     "it stopped {job} at evaluation 1, at or before its lookback of 2"),
])
def test_a_policy_breaking_its_contract_is_told_which_job_and_answer(
        tmp_path, monkeypatch, capsys, body, said):
    """The refusal of an answer that is neither 0 nor the prefix's last evaluation (or of
    a stop its lookback puts before the first evaluation) named neither the job nor the
    answer: the user had to find both by hand.  The simulator, replay and the live
    monitor now name them."""
    from fastsim import StopMonitor

    module = f"toy_contract_{abs(zlib.crc32(body.encode()))}"
    _declare(tmp_path, monkeypatch, module, "from fastsim.registry import Param\n" + body)
    spec = f"{module}:f:scope=all"
    with pytest.raises(ConfigError) as exc:
        simulate(SimConfig.from_specs("fifo", spec, n_jobs=10), 2, seed=0)
    assert said.format(job="job 0 of cluster 0") in str(exc.value), exc.value
    log = tmp_path / "l.csv"
    log.write_text("job_id,step,score\na,1,0.9\na,2,0.8\na,3,0.7\n")
    assert main(["replay", str(log), "--policy", spec]) == 2
    assert said.format(job="job 'a' of the log") in capsys.readouterr().err
    with pytest.raises(ConfigError) as exc:
        StopMonitor(spec).observe("run-1", 1, 0.5)
    assert said.format(job="job 'run-1'") in str(exc.value), exc.value


@pytest.mark.parametrize("decorator", ["stop_policy", "scheduler_key", "cluster_metric"])
def test_a_declaration_without_parentheses_says_how_to_write_it(tmp_path, monkeypatch,
                                                                decorator):
    """``@stop_policy`` written as ``@njit`` may be (no parentheses) said "stop_policy()
    takes 0 positional arguments but 1 was given; allowed: a module that imports"."""
    with pytest.raises(ConfigError) as exc:
        _declare(tmp_path, monkeypatch, f"toy_bare_{decorator}",
                 f"@{decorator}\ndef f(a):\n    return 0\n")
    said = str(exc.value)
    assert f"@{decorator} is written with parentheses, @{decorator}(...)" in said, said
    assert "positional argument" not in said and len(said.splitlines()) == 1


@pytest.mark.parametrize("outer,inner,said", [
    ("stop_policy", "stop_policy", "stop policy toy_twice_0:f is declared already (a stop "
     "policy)"),
    ("scheduler_key", "stop_policy", "scheduler key toy_twice_1:f is declared already (a stop "
     "policy)"),
    ("cluster_metric", "scheduler_key", "metric toy_twice_2:f is declared already (a scheduler "
     "key)"),
])
def test_a_declaration_declared_again_is_named_not_printed(tmp_path, monkeypatch, outer, inner,
                                                           said):
    """A decorator stacked twice printed the whole first declaration in its message (its
    repr: 1,200 characters of parameters, labels and addresses)."""
    module = f"toy_twice_{['stop_policy', 'scheduler_key', 'cluster_metric'].index(outer)}"
    args = ("scores, losses, attained_h, t_est_h" if inner == "stop_policy"
            else "t_est_h, gpus, job_type, arrival_h")
    with pytest.raises(ConfigError) as exc:
        _declare(tmp_path, monkeypatch, module,
                 f"@{outer}()\n@{inner}()\n@njit\ndef f({args}):\n    return 0\n")
    assert said in str(exc.value) and len(str(exc.value)) < 300, exc.value


def test_an_njit_metric_is_refused_when_declared(tmp_path, monkeypatch):
    """A metric is plain Python; declared over an ``@njit`` function it ran, and failed in
    numba's typing of the columns: "TypingError: non-precise type pyobject", which names
    neither the cause nor what to do."""
    with pytest.raises(ConfigError) as exc:
        _declare(tmp_path, monkeypatch, "toy_njit_metric",
                 "@cluster_metric()\n@njit\ndef f(jobs):\n    return jobs['jct_h'].mean(axis=1)\n")
    assert str(exc.value).startswith("metric toy_njit_metric:f is an @njit function; allowed: a "
                                     "plain Python function of the per-job arrays"), exc.value


def test_a_declaration_reached_under_another_name_says_so(tmp_path, monkeypatch, capsys):
    """``strict = stop_policy(...)(below)`` over an ``@njit def below`` is the declaration of
    ``MODULE:below`` (a declaration is named by its function): ``--policy MODULE:strict``
    said "policy='MODULE:below' is not a declared policy", a name the user never gave."""
    (tmp_path / "toy_renamed.py").write_text(
        MISTAKES_SRC + "\n\n@njit\ndef below(scores, losses, attained_h, t_est_h):\n"
        "    return 0\n\n\nstrict = stop_policy(label='strict')(below)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "o.parquet"
    assert main(["run", "--clusters", "2", "--n-jobs", "10", "--policy", "toy_renamed:strict",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert ("--policy=toy_renamed:strict is the declaration of toy_renamed:below, its "
            "function's name, and toy_renamed.below is not that declaration" in err), err
    assert len(own_lines(err)) == 1 and not out.exists()


@pytest.mark.parametrize("line,said", [
    ("from fastsim.registry import stop_polciy\n",
     "ImportError: cannot import name 'stop_polciy' from 'fastsim.registry'"),
    ("import no_such_dependency_xyz\n",
     "ModuleNotFoundError: No module named 'no_such_dependency_xyz'"),
])
def test_an_import_that_fails_inside_a_user_module_names_its_line(tmp_path, monkeypatch,
                                                                  capsys, line, said):
    """A user module whose own import fails was refused as a spec that "cannot be imported",
    offering the built-in policies' names and not the module's line."""
    module = f"toy_bad_import_{'name' if 'polciy' in line else 'module'}"
    (tmp_path / f"{module}.py").write_text("import numpy\n" + line)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["run", "--clusters", "2", "--policy", f"{module}:f"]) == 2
    err = capsys.readouterr().err.strip()
    assert f"--policy={module}:f: importing {module} raised {said}" in err, err
    assert f"{module}.py, line 2); allowed: a module that imports" in err, err
    assert "evalstop" not in err and len(own_lines(err)) == 1


def test_a_declaration_given_where_a_spec_goes_is_named_by_its_spec(user_dir, tmp_path,
                                                                    monkeypatch):
    """``SimConfig.from_specs("srtf_est", below_best)``, the object ``@stop_policy`` made,
    refused it by printing its whole repr (1.5 kB of parameters, labels and addresses);
    so did ``baseline=`` and ``metrics=[...]`` with a declaration."""
    import fastsim
    import toy_user_policies as mod
    import toy_user_schedulers as keys
    from fastsim.config import parse_baseline

    metrics = _declare(tmp_path, monkeypatch, "toy_spec_metric", "@cluster_metric()\n"
                       "def spec_jct(jobs):\n    return jobs['jct_h'].mean(axis=1)\n")

    cfg = fastsim.SimConfig.from_specs("srtf_est", "evalstop")
    for call, said in [
        (lambda: fastsim.SimConfig.from_specs("srtf_est", mod.below_best),
         'policy=<stop policy toy_user_policies:below_best> is invalid; allowed: a policy spec '
         '("evalstop", "NAME:key=value,...") or a PolicyConfig (this declaration\'s spec is '
         '"toy_user_policies:below_best")'),
        (lambda: fastsim.SimConfig.from_specs(keys.small_first, "evalstop"),
         "scheduler=<scheduler key toy_user_schedulers:small_first> is invalid"),
        (lambda: parse_baseline(mod.below_best),
         "baseline=<stop policy toy_user_policies:below_best> is invalid"),
        (lambda: fastsim.SimConfig(cfg.workload, cfg.scheduler, cfg.policy, (metrics.spec_jct,)),
         "metrics=(<metric toy_spec_metric:spec_jct>,) is invalid"),
    ]:
        with pytest.raises(ConfigError) as exc:
            call()
        assert str(exc.value).startswith(said) and len(str(exc.value)) < 400, exc.value


@pytest.mark.parametrize("option,body,said", [
    ("policy", "def f(scores, losses, attained_h, t_est_h):\n    return 1.0\n",
     "stop policy toy_sweep_first_policy:f returns float64"),
    ("scheduler", "def f(t_est_h, gpus, job_type, arrival_h):\n    raise ValueError('boom')\n",
     "scheduler key toy_sweep_first_scheduler:f returns none"),
])
def test_a_sweep_whose_user_code_fails_on_its_first_cluster_writes_nothing(
        tmp_path, monkeypatch, capsys, option, body, said):
    """A sweep made its directory, its manifest and its first cells' chunks, and only then
    ran the user's function, which failed at its first call; once the function was fixed,
    the same command was refused ("the results in OUT are of other code than this run's:
    ... has been edited since they were computed"), though no result of that function
    existed. The first cluster of a cell of each user function is now run first."""
    decorator = "stop_policy" if option == "policy" else "scheduler_key"
    sweep, out = _sweep_of(tmp_path, monkeypatch, f"toy_sweep_first_{option}",
                           f"@{decorator}()\n@njit\n{body}", option,
                           [f"toy_sweep_first_{option}:f"])
    assert main(["sweep", str(sweep), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert said in err and len(own_lines(err)) == 1, err
    assert not out.exists()


def test_a_dask_sweep_whose_user_code_fails_on_its_first_cluster_writes_nothing(
        tmp_path, monkeypatch, capsys):
    """With ``--backend dask`` the first cluster was not tried: the sweep made its
    directory and manifest, the baseline's chunks were written, the policy failed on a
    worker, and once fixed the same command was refused as results "of other code". It
    is now tried on a worker, before anything but the lock is written, and refused in the
    local backend's one line."""
    distributed = pytest.importorskip("dask.distributed")
    sweep, out = _sweep_of(tmp_path, monkeypatch, "toy_dask_first_policy",
                           "@stop_policy()\n@njit\ndef f(scores, losses, attained_h, t_est_h):\n"
                           "    return 1.0\n", "policy", ["evalstop", "toy_dask_first_policy:f"])
    logged: list[str] = []  # a local cluster's worker writes its log in the driver's terminal
    worker_log = logging.getLogger("distributed.worker")
    handler = logging.Handler()
    handler.emit = lambda record: logged.append(record.getMessage())
    worker_log.addHandler(handler)
    try:  # in this process (its threads): the module on this sys.path, no interpreter to start
        with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                      dashboard_address=None) as cluster:
            assert main(["sweep", str(sweep), "--out", str(out), "--no-progress", "--backend",
                         "dask", "--address", cluster.scheduler_address]) == 2
            err = after_connecting(capsys.readouterr().err, cluster.scheduler_address)
    finally:
        worker_log.removeHandler(handler)
    # the worker logged it too, with its traceback ("Compute Failed"): a dozen lines
    assert not [m for m in logged if "Compute Failed" in m], logged
    assert err == ("fastsim sweep: error: stop policy toy_dask_first_policy:f returns "
                   "float64 (toy_dask_first_policy.py, line 7: def f(scores, losses, "
                   "attained_h, t_est_h):); allowed: an integer, the 1-based evaluation at "
                   "which it stops the job, or 0"), err
    assert not out.exists()


def test_a_sweep_into_a_directory_in_use_is_refused_before_its_trial(tmp_path, monkeypatch):
    """``fastsim.sweep(...)`` into a directory another sweep held ran (and compiled, 26 s
    with numba's cache cold) the first-cluster trial of its user functions, and only then
    was refused as in use.  The directory is now locked before the trial runs."""
    import threading

    import fastsim
    import fastsim.sweep.runner as runner
    from fastsim.sweep.store import DirLock

    sweep, out = _sweep_of(tmp_path, monkeypatch, "toy_busy_trial_policy",
                           "@stop_policy()\n@njit\ndef f(scores, losses, attained_h, t_est_h):\n"
                           "    return 0\n", "policy", ["toy_busy_trial_policy:f"])
    out.mkdir()
    held: list[DirLock] = []  # the other holder: a thread's lock is refused as a process's
    holder = threading.Thread(target=lambda: held.append(DirLock.acquire(out)))
    holder.start()
    holder.join()

    def no_run(*args):
        raise AssertionError("a cluster was run")
    monkeypatch.setattr(runner, "run_chunks", no_run)  # run_chunk calls it too
    try:
        with pytest.raises(ConfigError, match="is in use by another thread of this process"):
            fastsim.sweep(sweep, out)
    finally:
        held[0].release()


def test_a_dask_cluster_lost_in_the_trial_says_nothing_was_written(tmp_path, monkeypatch,
                                                                    capsys):
    """A Dask cluster lost while a worker ran the first-cluster trial said "the chunks
    already written are kept and the same command resumes": no chunk had been written."""
    from types import SimpleNamespace

    distributed = pytest.importorskip("dask.distributed")
    from distributed.scheduler import KilledWorker

    import fastsim.sweep.runner as runner

    sweep, out = _sweep_of(tmp_path, monkeypatch, "toy_dask_lost_trial_policy",
                           "@stop_policy()\n@njit\ndef f(scores, losses, attained_h, t_est_h):\n"
                           "    return 0\n", "policy", ["toy_dask_lost_trial_policy:f"])

    def killed(*args):  # every worker that ran the trial died (distributed's own error)
        raise KilledWorker("run_chunks_on_worker", SimpleNamespace(address="tcp://w:1"), 3)
    monkeypatch.setattr(runner, "run_chunks_on_worker", killed)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        assert main(["sweep", str(sweep), "--out", str(out), "--no-progress", "--backend",
                     "dask", "--address", cluster.scheduler_address]) == 1
        err = after_connecting(capsys.readouterr().err, cluster.scheduler_address)
    assert err.startswith("fastsim sweep: error: the first-cluster trial of cell ") and \
        err.endswith(" was lost: every Dask worker that ran it died (4 attempts); this run "
                     "wrote nothing (it was trying each user function on its first cluster, "
                     "before any chunk), and the same command starts it again"), err
    assert "already written" not in err and len(own_lines(err)) == 1 and not out.exists()


def test_replay_and_the_monitor_given_a_declaration_offer_its_spec(user_dir):
    """``StopMonitor(below_best)`` and ``fastsim.replay(log, below_best)``, with the object
    ``@stop_policy`` made, said what they take but not the string that names it."""
    import fastsim
    import toy_user_policies as mod
    from fastsim.replay import StopMonitor
    from fastsim.resources import example_log

    for call in (lambda: StopMonitor(mod.below_best),
                 lambda: fastsim.replay(example_log(), [mod.below_best])):
        with pytest.raises(ConfigError) as exc:
            call()
        assert str(exc.value).endswith(
            '(this declaration\'s spec is "toy_user_policies:below_best")'), exc.value


def test_a_metric_of_the_wrong_shape_is_told_the_batch_and_the_axis(tmp_path, monkeypatch,
                                                                    capsys):
    """A metric returning one number (``jobs["jct_h"].mean()``) under ``--clusters 3`` was
    told "returned shape (); allowed: (1,)": the 1 was a batch the user never asked for."""
    _declare(tmp_path, monkeypatch, "toy_scalar_metric",
             "@cluster_metric()\ndef overall(jobs):\n    return jobs['jct_h'].mean()\n")
    out = tmp_path / "o.parquet"
    assert main(["run", "--clusters", "3", "--n-jobs", "10", "--metric",
                 "toy_scalar_metric:overall", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert re.search(r"metric overall returned shape \(\) for a batch of (\d+) clusters? "
                     r"\(toy_scalar_metric\.py, line \d+: def overall\(jobs\):\); "
                     r"allowed: \(\1,\), one value per cluster: a reduction along axis=1 of "
                     r"the \[clusters, jobs\] arrays, as jobs\[\"jct_h\"\]\.mean\(axis=1\)$",
                     err), err
    assert len(own_lines(err)) == 1 and not out.exists()


def test_a_sweep_resumed_tries_no_user_code_its_chunks_ran_already(tmp_path, monkeypatch,
                                                                   capsys):
    """The first-cluster trial ran on every resume, also of a complete sweep whose
    records show the same code ran already: with numba's cache cold (another machine, a
    new NUMBA_CACHE_DIR) re-running a complete sweep to aggregate it compiled the kernels
    for a cluster whose result was thrown away (16 s, against 2 s without the trial)."""
    import fastsim.sweep.runner as runner

    sweep, out = _sweep_of(tmp_path, monkeypatch, "toy_resume_trial_policy",
                           "@stop_policy()\n@njit\ndef f(scores, losses, attained_h, t_est_h):\n"
                           "    return 0\n", "policy", ["toy_resume_trial_policy:f"])
    assert main(["sweep", str(sweep), "--out", str(out), "--no-progress"]) == 0

    def no_run(*args):
        raise AssertionError("a cluster was run")
    monkeypatch.setattr(runner, "run_chunks", no_run)  # run_chunk calls it too
    capsys.readouterr()
    assert main(["sweep", str(sweep), "--out", str(out), "--no-progress"]) == 0, \
        capsys.readouterr().err


PLAIN_RAISES = {
    "int_of_nan": ("import numpy as np\n\n\n@stop_policy()\n@njit\n"
                   "def f(scores, losses, attained_h, t_est_h):\n"
                   "    first = np.mean(scores[:0])  # a slip: the mean of nothing, NaN\n"
                   "    return scores.shape[0] if int((first - scores[-1]) * 100) >= 2 else 0\n",
                   "ValueError: cannot convert float NaN to integer"),
    "past_prefix": ("@stop_policy()\n@njit\ndef f(scores, losses, attained_h, t_est_h):\n"
                    "    n = scores.shape[0]  # off by one: meant the last two scores\n"
                    "    return n if scores[n] < scores[n - 1] else 0\n",
                    "IndexError: index 1 is out of bounds for axis 0 with size 1"),
}


@pytest.mark.parametrize("case", sorted(PLAIN_RAISES))
def test_a_policy_whose_plain_python_raises_is_refused_before_any_output(
        tmp_path, monkeypatch, capsys, case):
    """A compiled policy taking int() of a NaN got -2^63 from numba where Python raises
    ValueError, and one reading an index past its prefix got NaN where Python raises
    IndexError: neither ever stopped a job, and ``fastsim run`` exited 0.  Its plain-Python
    version now runs on cluster 0 too: one line naming it, the line that raised and the
    exception, exit 2, nothing written; a sweep refuses it in its first-cluster trial,
    before its directory is made."""
    body, said = PLAIN_RAISES[case]
    module = f"toy_plain_{case}"
    _declare(tmp_path, monkeypatch, module, body)
    text = (tmp_path / f"{module}.py").read_text().splitlines()
    line = next(i for i, ln in enumerate(text, 1) if ln.lstrip().startswith("return"))
    out = tmp_path / "o.parquet"
    assert main(["run", "--policy", f"{module}:f", "--clusters", "3", "--n-jobs", "20",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert re.fullmatch(
        rf"fastsim run: error: stop policy {module}:f raised in plain Python where its "
        r"compiled code returned \(its \.py_func, on cluster 0, job \d+, evaluation 1\): "
        rf"{re.escape(said)} \({module}\.py, line {line}: return .*\); allowed: a function "
        r"whose plain-Python version returns where its compiled one does .*",
        own_lines(err)[0]), err
    assert len(own_lines(err)) == 1 and not out.exists()
    sweep = tmp_path / "s.toml"
    sweep.write_text(f'clusters = 2\n[base]\nn_jobs = 10\n[axes]\npolicy = ["{module}:f"]\n')
    assert main(["sweep", str(sweep), "--out", str(tmp_path / "sw"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert said in err and len(own_lines(err)) == 1 and not (tmp_path / "sw").exists(), err
    # cluster 0 only: a batch that starts elsewhere runs as before
    cfg = SimConfig.from_specs("srtf_est", f"{module}:f", n_jobs=20)
    assert simulate(cfg, 2, cluster_start=1).clusters["n_stopped"].sum() == 0


PLAIN_WRAPS = ("@stop_policy()\n@njit\ndef f(scores, losses, attained_h, t_est_h):\n"
               "    h = 1  # a product of the scores in millionths: int64 wraps past 2^63\n"
               "    for e in range(scores.shape[0]):\n"
               "        h *= int(scores[e] * 1e6) + 3\n"
               "    return scores.shape[0] if h < 0 else 0\n")


PLAIN_LOG = ("job_id,step,score\na,1,0.9\na,2,0.8\na,3,0.7\na,4,0.1\na,5,0.5\nb,1,0.5\n"
             "b,2,0.4\n")


@pytest.mark.parametrize("case", sorted(PLAIN_RAISES))
def test_replay_and_the_monitor_refuse_a_policy_whose_plain_python_raises(
        tmp_path, monkeypatch, capsys, case):
    """Outside a run the same policies were not checked: ``fastsim replay --policy
    mod:f`` of the off-by-one one never stopped a job and exited 0, and ``StopMonitor``
    (the Hugging Face and TRL callbacks' too) never stopped training.  Both now ask the
    plain-Python version beside the compiled one: replay refuses in one line, exit 2,
    nothing written; the monitor raises at the first call, which leaves no trace (the
    job's next call is refused again, not decided on a series missing it)."""
    from fastsim.replay.monitor import StopMonitor

    body, said = PLAIN_RAISES[case]
    module = f"toy_plain_{case}"
    _declare(tmp_path, monkeypatch, module, body)
    text = (tmp_path / f"{module}.py").read_text().splitlines()
    line = next(i for i, ln in enumerate(text, 1) if ln.lstrip().startswith("return"))
    log, out = tmp_path / "l.csv", tmp_path / "r.csv"
    log.write_text(PLAIN_LOG)
    assert main(["replay", str(log), "--policy", f"{module}:f", "--out", str(out)]) == 2
    captured = capsys.readouterr()
    err = own_lines(captured.err.strip())
    assert len(err) == 1 and re.fullmatch(
        rf"fastsim replay: error: stop policy {module}:f raised in plain Python where its "
        r"compiled code returned \(its \.py_func, on job 'a' of the log, evaluation 1\): "
        rf"{re.escape(said)} \({module}\.py, line {line}: return .*\); allowed: .*",
        err[0]), err
    assert not out.exists() and not captured.out
    m = StopMonitor(f"{module}:f")
    for _ in range(2):
        with pytest.raises(ConfigError, match=rf"on job 'run', evaluation 1\): "
                                              rf"{re.escape(said)} \({module}\.py, line "):
            m.observe("run", 100, 0.9)


def test_the_monitor_checks_its_first_calls_only(tmp_path, monkeypatch, user_dir):
    """The monitor runs in a training loop: the plain-Python version is asked on its first
    ``MAX_CALLS`` calls, whichever jobs they are of, and never after, so a policy whose
    plain version raises only later is not refused there, and a long run pays nothing
    more; a correct policy (the walkthrough's) says nothing, and decides as before."""
    from fastsim import plain_python
    from fastsim.errors import PlainPythonWarning
    from fastsim.replay.monitor import StopMonitor

    _declare(tmp_path, monkeypatch, "toy_plain_late",
             "@stop_policy()\n@njit\ndef f(scores, losses, attained_h, t_est_h):\n"
             "    n = scores.shape[0]  # past the prefix from the third evaluation on\n"
             "    return n if n >= 3 and scores[n] < 0.5 else 0\n")
    monkeypatch.setattr(plain_python, "MAX_CALLS", 3)
    m = StopMonitor("toy_plain_late:f")
    m.observe("a", 1, 0.9), m.observe("a", 2, 0.9)
    with pytest.raises(ConfigError, match="on job 'a', evaluation 3"):
        m.observe("a", 3, 0.9)  # the third call
    m = StopMonitor("toy_plain_late:f")
    for job in "abc":  # three calls, of three jobs: the fourth is not checked
        m.observe(job, 1, 0.9)
    assert not [m.observe("a", s, 0.9).stop for s in (2, 3, 4)][-1]
    with warnings.catch_warnings():
        warnings.simplefilter("error", PlainPythonWarning)
        m = StopMonitor(f"{POL}:k=2")
        assert [m.observe("a", s, x).stop for s, x in enumerate([.5, .6, .4, .3, .2], 1)] \
            == [False, False, False, True, True]


def test_replay_says_once_where_plain_python_decides_otherwise(tmp_path, monkeypatch,
                                                              capsys):
    """Compiled and plain Python both return and differ (an int64 product wraps where
    Python's integers grow: negative at job a's fifth evaluation): replay, like a run, says
    so in one ``warning:`` line and goes on."""
    _declare(tmp_path, monkeypatch, "toy_plain_wraps_replay", PLAIN_WRAPS)
    log = tmp_path / "l.csv"
    log.write_text(PLAIN_LOG)
    assert main(["replay", str(log), "--policy", "toy_plain_wraps_replay:f"]) == 0
    err = [ln for ln in own_lines(capsys.readouterr().err) if "warning" in ln]
    assert len(err) == 1 and re.fullmatch(
        r"fastsim replay: warning: stop policy toy_plain_wraps_replay:f decides otherwise as "
        r"plain Python \(its \.py_func\) on job 'a' of the log, evaluation 5: compiled, a stop "
        r"at evaluation 5; plain, no stop; .*", err[0]), err


def test_a_construct_only_compiled_code_runs_is_not_refused(tmp_path, monkeypatch):
    """A function numba compiles from an ``@overload`` raises in plain Python, by design: its
    Python body is not what runs compiled, so the policy's plain version proves nothing."""
    _declare(tmp_path, monkeypatch, "toy_plain_overload",
             "from numba.extending import overload\n\n\ndef clip01(x):\n"
             "    raise NotImplementedError('compiled only')\n\n\n@overload(clip01)\n"
             "def _clip01(x):\n    return lambda x: min(max(x, 0.0), 1.0)\n\n\n"
             "@stop_policy()\n@njit\ndef f(scores, losses, attained_h, t_est_h):\n"
             "    return scores.shape[0] if clip01(scores[-1]) < 0.5 else 0\n")
    cfg = SimConfig.from_specs("srtf_est", "toy_plain_overload:f", n_jobs=20)
    assert simulate(cfg, 2).clusters["n_stopped"].sum() > 0


def test_a_policy_deciding_otherwise_in_plain_python_is_said_once(tmp_path, monkeypatch,
                                                                  capsys, user_dir):
    """Compiled and plain Python both return, and differ: an int64 product wraps where
    Python's integers grow.  Not a refusal (numba's sums and libm can part from numpy's in
    a last bit, on a legitimate policy), but one ``warning:`` line; a policy that agrees,
    the walkthrough's, says nothing."""
    from fastsim.errors import PlainPythonWarning

    _declare(tmp_path, monkeypatch, "toy_plain_wraps", PLAIN_WRAPS)
    assert main(["run", "--policy", "toy_plain_wraps:f", "--clusters", "3",
                 "--n-jobs", "20"]) == 0
    err = [ln for ln in own_lines(capsys.readouterr().err) if not ln.startswith("note:")]
    assert len(err) == 1 and re.fullmatch(
        r"fastsim run: warning: stop policy toy_plain_wraps:f decides otherwise as plain "
        r"Python \(its \.py_func\) on cluster 0, job \d+: compiled, a stop at evaluation \d; "
        r"plain, no stop; .*an integer overflow.*", err[0]), err
    with warnings.catch_warnings():
        warnings.simplefilter("error", PlainPythonWarning)
        simulate(SimConfig.from_specs("srtf_est", f"{POL}:k=2,drop=0.01", n_jobs=40), 2)


def test_a_metric_comparing_the_job_type_with_text_is_told_the_codes(tmp_path, monkeypatch,
                                                                      capsys):
    """``jobs["job_type"] == "rlhf"`` in a metric was False for every job (the column holds
    integer codes), so the metric was 0 on every cluster and the run exited 0.  That
    comparison (and ``!=``, ``np.isin``) now raises, naming the line and the codes; the
    same metric over ``RLHF`` runs as before."""
    import fastsim.metrics as M
    from fastsim.kernels.codes import RLHF

    monkeypatch.setattr(M, "_METRICS", dict(M._METRICS))
    _declare(tmp_path, monkeypatch, "toy_text_type_metric",
             "import numpy as np\nfrom fastsim.kernels.codes import RLHF\n\n\n"
             "@cluster_metric()\ndef rlhf_waste_text(jobs):\n"
             "    return (jobs['wasted_gpu_h'] * (jobs['job_type'] == 'rlhf')).sum(axis=1)\n\n\n"
             "@cluster_metric()\ndef other_text(jobs):\n"
             "    return np.isin(jobs['job_type'], ['lora', 'dpo']).mean(axis=1)\n\n\n"
             "@cluster_metric()\ndef rlhf_waste(jobs):\n"
             "    return (jobs['wasted_gpu_h'] * (jobs['job_type'] == RLHF)).sum(axis=1)\n")
    text = (tmp_path / "toy_text_type_metric.py").read_text().splitlines()
    line = next(i for i, ln in enumerate(text, 1) if "== 'rlhf'" in ln)
    out = tmp_path / "o.parquet"
    assert main(["run", "--metric", "toy_text_type_metric:rlhf_waste_text", "--clusters", "3",
                 "--n-jobs", "20", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert own_lines(err) == [
        "fastsim run: error: metric rlhf_waste_text failed: TypeError: jobs[\"job_type\"] "
        "holds integer codes, not text: == 'rlhf' is False for every job "
        f"(toy_text_type_metric.py, line {line}); compare with fastsim.kernels.codes.RLHF "
        "(LORA 0, DPO 1, RLHF 2); allowed: a pure function of the per-job arrays, one value "
        "per cluster (docs/extending.md)"], err
    assert not out.exists()
    cfg = SimConfig.from_specs("srtf_est", "evalstop", n_jobs=20,
                               metrics=["toy_text_type_metric:other_text"])
    with pytest.raises(ConfigError, match=r"np\.isin of 'lora' is False for every job .*"
                       r"compare with fastsim\.kernels\.codes\.LORA \("):
        simulate(cfg, 2)
    cfg = SimConfig.from_specs("srtf_est", "evalstop", n_jobs=20,
                               metrics=["toy_text_type_metric:rlhf_waste"])
    res = simulate(cfg, 3, keep_jobs=True)
    jobs = res.jobs.filter(pl.col("job_type") == "rlhf").group_by("cluster").agg(
        pl.col("wasted_gpu_h").sum()).sort("cluster")
    assert res.clusters["rlhf_waste"].to_list() == pytest.approx(jobs["wasted_gpu_h"].to_list())
    assert jobs["wasted_gpu_h"].sum() > 0 and RLHF == 2


def test_a_scheduler_key_comparing_the_job_type_with_text_is_refused(tmp_path, monkeypatch,
                                                                     capsys):
    """Compiled, ``job_type == "rlhf"`` is False for every job (numba compares an integer
    with text so): a key meant to run RLHF first ran every job by its estimate, exit 0.
    Its plain-Python version, run on cluster 0 with ``job_type`` an integer whose ``==``
    with text raises, now refuses it in one line naming the codes and the line."""
    _declare(tmp_path, monkeypatch, "toy_text_type_key",
             "@scheduler_key()\n@njit\ndef f(t_est_h, gpus, job_type, arrival_h):\n"
             "    return t_est_h - (100.0 if job_type == 'rlhf' else 0.0)\n")
    text = (tmp_path / "toy_text_type_key.py").read_text().splitlines()
    line = next(i for i, ln in enumerate(text, 1) if "'rlhf'" in ln)
    out = tmp_path / "o.parquet"
    assert main(["run", "--scheduler", "toy_text_type_key:f", "--clusters", "3",
                 "--n-jobs", "20", "--out", str(out)]) == 2
    err = own_lines(capsys.readouterr().err)
    assert len(err) == 1 and err[0].startswith(
        "fastsim run: error: scheduler key toy_text_type_key:f raised in plain Python where "
        "its compiled code returned (its .py_func, on cluster 0, job 0): TypeError: job_type "
        "is an integer code, not text: == 'rlhf' is False for every job; compare with "
        "fastsim.kernels.codes.RLHF (LORA 0, DPO 1, RLHF 2) (toy_text_type_key.py, line "
        f"{line}: return "), err
    assert not out.exists()


@pytest.mark.parametrize("compare", [lambda jt: np.isin(jt, [b"rlhf"]),
                                     lambda jt: jt == np.array([b"rlhf"]),
                                     lambda jt: jt != np.str_("rlhf")])
def test_job_type_text_as_bytes_or_numpy_text_is_named_as_written(compare):
    """Text in a numpy array of bytes was named as ``"b'rlhf'"`` (its ``str``), a text
    nobody wrote, and matched no code, so the error named none; a ``np.str_`` was named
    as ``np.str_('rlhf')``.  Named as the text it holds, with the code to compare with."""
    from fastsim.plain_python import JobTypeCodes

    jt = np.array([[0, 2]], dtype=np.int8).view(JobTypeCodes)
    with pytest.raises(TypeError, match=r"(==|!=|np\.isin of) 'rlhf' is False for every job"
                       r".*compare with fastsim\.kernels\.codes\.RLHF \("):
        compare(jt)


@pytest.mark.parametrize("compare", [lambda jt: jt[0, 2] == "rlhf",
                                     lambda jt: [t == "rlhf" for row in jt for t in row],
                                     lambda jt: [t != "rlhf" for t in jt.tolist()[0]],
                                     lambda jt: "rlhf" in jt.tolist()[0],
                                     lambda jt: jt.astype(object) == "rlhf"])
def test_a_job_type_taken_out_of_the_codes_compared_with_text_is_told_the_codes(compare):
    """A scalar taken out of the codes (an index, a loop over them, ``.tolist()``) was a
    numpy or Python integer, whose ``== "rlhf"`` was False for every job, unsaid; it is a
    job type's code that raises as the column does, and is the same integer otherwise."""
    from fastsim.plain_python import JobTypeCodes

    jt = np.array([[0, 1, 2, 2]], dtype=np.int8).view(JobTypeCodes)
    with pytest.raises(TypeError, match=r"job_type is an integer code, not text: (==|!=) "
                       r"'rlhf' is False for every job; compare with fastsim\.kernels\.codes"):
        compare(jt)
    assert jt[0, 2] == 2 and jt.tolist() == [[0, 1, 2, 2]] and [int(t) for t in jt[0]] == \
        [0, 1, 2, 2] and sum(t == 2 for t in jt[0]) == 2
    assert (jt.astype(object) == 2).tolist() == [[False, False, True, True]]


def test_labels_made_from_the_job_type_codes_compare_with_text():
    """``np.choose(jobs["job_type"], ["lora", "dpo", "rlhf"]) == "rlhf"`` is a right way to
    count RLHF jobs, but numpy kept the codes' class on the labels it made (and on
    ``astype(str)``), whose comparison with text raised "jobs["job_type"] holds integer
    codes, not text: == 'lora' is False for every job", true of neither."""
    from fastsim.kernels.codes import JOB_TYPE_LABELS
    from fastsim.plain_python import JobTypeCodes

    jt = np.array([[0, 1, 2, 2]], dtype=np.int8).view(JobTypeCodes)
    labels = np.choose(jt, list(JOB_TYPE_LABELS))
    assert (labels == "rlhf").sum(axis=1).tolist() == [2]
    assert (labels != "rlhf").sum(axis=1).tolist() == [2]
    assert np.isin(labels, ["rlhf"]).sum() == 2
    assert (jt.astype(str) == "2").sum() == 2
    with pytest.raises(TypeError, match="holds integer codes, not text"):
        jt == labels  # noqa: B015 - the codes compared with text still raise


@pytest.mark.parametrize("kw,refused", [
    ({"label": " fifo"}, "is labelled ' fifo', which reads as the built-in scheduler fifo"),
    ({"figure_label": "EvalStop (k={k})"}, "figure label 'EvalStop (k=2)', which reads as "
                                           "the built-in policy evalstop"),
    ({"figure_label": "SRTF-Est mine"}, "the built-in scheduler srtf_est (SRTF-Est)"),
    ({"figure_label": "EvalStopper"}, None), ({"figure_label": "fifo_like"}, None)])
def test_a_figure_label_or_spaced_label_reading_as_a_built_ins_is_refused(kw, refused):
    """A leading space passed the label check (" fifo"), and figure labels were not checked:
    a policy drawn as "EvalStop (k=2)" read as the built-in in every legend."""
    from numba import njit

    from fastsim.registry import Param, stop_policy

    ns: dict = {}
    exec("def toy(scores, losses, attained_h, t_est_h, k):\n    return 0\n", ns)
    ns["toy"].__module__ = "toy_figure_label"
    declare = stop_policy(params=[Param("k", "int", 2, lo=1)], **kw)
    if refused is None:
        declare(njit(ns["toy"]))
        return
    with pytest.raises(ConfigError, match=re.escape(refused)):
        declare(njit(ns["toy"]))


def test_user_code_says_that_it_compiles_once_a_process(user_dir, capsys, forget_compiled):
    """A first `fastsim run --policy mypol:drawdown` sat 12 s in silence while numba
    compiled the user's function (every process compiles it: user code is not cached),
    where the built-in kernels say so.  One line per function and process."""
    forget_compiled()
    cfg = SimConfig.from_specs("toy_user_schedulers:small_first", f"{POL}:k=1", n_jobs=20)
    simulate(cfg, 2)
    err = capsys.readouterr().err.splitlines()
    said = [line.split(" (")[0] for line in err if line.startswith("compiling")]
    assert said == [f"compiling the stop policy {POL}",
                    "compiling the scheduler toy_user_schedulers:small_first"], err
    assert all("again in every new process: user code is not cached)" in line
               for line in err if line.startswith("compiling the s")), err
    simulate(cfg, 2)
    assert "compiling" not in capsys.readouterr().err


@pytest.mark.parametrize("bar", [True, False])
def test_user_code_says_that_it_compiles_in_a_sweep_replay_and_the_monitor(
        user_dir, tmp_path, capsys, monkeypatch, bar, forget_compiled):
    """With the built-in kernels cached, a user's policy compiled in silence in `fastsim
    sweep` (with its bar, 5 s before it; without, 10 s before the summary), `fastsim
    replay` (which said "compiling the stop-policy kernels", first run only, at every run
    instead) and `StopMonitor.observe` (so `StopPolicyCallback`).  Each says one line
    a process, the first time its driver compiles."""
    import fastsim
    import fastsim.compile_notice as notice
    from fastsim.replay.monitor import StopMonitor

    forget_compiled()
    monkeypatch.setattr(notice, "engine_is_cached", lambda *code: True)
    monkeypatch.setattr(notice, "kernels_cached", lambda *names: True)
    said = f"compiling the stop policy {POL} (about 2-15 s by machine load; again in every " \
           "new process: user code is not cached)"
    sweep = tmp_path / "s.toml"
    sweep.write_text(f'clusters = 2\nchunk = 1\n[base]\nn_jobs = 10\n[axes]\n'
                     f'policy = ["{POL}:k=1", "{POL}:k=2", "evalstop:k=2"]\n')
    for out in ("a", "b"):  # the second compiles nothing
        argv = ["sweep", str(sweep), "--out", str(tmp_path / out)]
        assert main(argv + ([] if bar else ["--no-progress"])) == 0
        err = [line for line in capsys.readouterr().err.splitlines() if "compiling" in line]
        assert err == ([said] if out == "a" else []), err
    forget_compiled()
    for out in ("c", "d"):  # from Python: a notebook's sweep shows no bar by default
        fastsim.sweep(sweep, tmp_path / out, progress=bar)
        err = [line for line in capsys.readouterr().err.splitlines() if "compiling" in line]
        assert err == ([said] if out == "c" else []), err
    log = tmp_path / "log.csv"
    log.write_text("job_id,step,score\na,1,0.5\na,2,0.6\na,3,0.5\na,4,0.4\n")
    for _ in range(2):
        fastsim.replay(log, f"{POL}:k=2")
        assert capsys.readouterr().err.strip().splitlines() == ([said] if _ == 0 else [])
    forget_compiled()  # replay compiled the monitor's driver
    for _ in range(2):
        m = StopMonitor(f"{POL}:k=2")
        for step, score in enumerate([0.5, 0.6, 0.5, 0.4]):
            m.observe("run", step, score)
        assert capsys.readouterr().err.strip().splitlines() == ([said] if _ == 0 else [])


def test_a_paired_metric_that_may_be_negative_is_refused_when_declared():
    """A paired metric with the default bounds (-inf, inf) was accepted, and a negative
    baseline was refused only at aggregation, after the whole sweep had run."""
    from fastsim import metrics as M

    def toy_net(jobs):
        return jobs["jct_h"].mean(axis=1) - 1.0

    toy_net.__module__ = "toy_net_mod"
    for bounds in ((-math.inf, math.inf), (-1.0, 5.0)):
        with pytest.raises(ConfigError, match=re.escape(
                f"metric toy_net_mod:toy_net: paired='net change' with bounds={bounds!r}; "
                "allowed: a paired metric's bounds from 0 or above")):
            M.cluster_metric(paired="net change", bounds=bounds)(toy_net)
    assert "toy_net" not in M.paired_metrics()
    M.cluster_metric(bounds=(-1.0, 5.0))(toy_net)  # not paired: any bounds
