"""Bad input: one clear error naming the field, the value and what is allowed."""
import importlib
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fastsim.cli import main
from fastsim.config import (BOUNDS, FIELD_ALLOWED, PolicyConfig, SchedulerConfig, SimConfig,
                            WorkloadConfig)
from fastsim.costaware.configs import GRPOConfig, ProblemConfig, SGDConfig
from fastsim.errors import ConfigError

BAD_WORKLOAD = [
    ("sigma", -0.1), ("sigma", float("nan")), ("base_rate", 1.2), ("dpo_base_rate", -0.01),
    ("load", 0.0), ("load", 2.5), ("gpus", 0), ("n_jobs", 0), ("n_evals", 1),
    ("mix", "rlhf_only"), ("mix", (0.5, 0.5, 0.5)), ("demands_rlhf", (4, 128)),
    ("demands_lora", ()), ("median_rlhf_h", 0.0), ("log_sd", -1.0), ("est_sigma", 5.0),
    ("loss_sigma", -1.0), ("preempt_overhead_h", -1.0), ("ustar_hacking", (0.7, 0.3)),
    ("ustar_hacking", (0.0, 0.5)), ("ustar_healthy", (0.5, 2.0)), ("height", (-1.0, 1.0)),
    ("loss_inf", (0.2, 3.0)), ("gpus", 8.5),
    # the trace-grounded curve knobs (MODEL.md section 4)
    ("kl_gamma", 0.0), ("kl_gamma", 3.0), ("kl_gamma", float("inf")), ("hack_sharpness", 0.1),
    ("hack_sharpness", True), ("sigma_spread", -0.1), ("sigma_spread", 2.5), ("noise_rho", 1.0),
    ("noise_rho", -1.0), ("noise_rho", float("nan")), ("ustar_healthy", (0.7, 2.0)),
]


def test_healthy_peaks_may_start_where_hacking_ones_end():
    # Continuous peaks (MODEL.md section 4): no gap is allowed, an overlap is not.
    WorkloadConfig(ustar_hacking=(0.3, 0.6), ustar_healthy=(0.6, 2.0))
    with pytest.raises(ConfigError, match=r"^ustar_healthy=.*lo >= 0.6"):
        WorkloadConfig(ustar_hacking=(0.3, 0.6), ustar_healthy=(0.59, 2.0))


def test_curve_knobs_from_the_command_line(tmp_path):
    out = tmp_path / "r.parquet"
    assert main(["run", "--clusters", "2", "--n-jobs", "20", "--kl-gamma", "0.8",
                 "--hack-sharpness", "1.5", "--sigma-spread", "0.2", "--noise-rho", "0.3",
                 "--ustar-healthy", "0.8,3", "--no-progress", "--out", str(out)]) == 0
    assert out.exists()
    assert main(["run", "--clusters", "2", "--noise-rho", "1.5", "--no-progress"]) == 2


@pytest.mark.parametrize("field", sorted(BOUNDS))
def test_a_scalar_bound_is_declared_once(field):
    """A scalar field's bound is one declaration (``config.BOUNDS``): the ends its refusal
    and --help name are the ends it checks, each accepted and the next value beyond refused
    with those words (the check and the words were written apart, and could drift)."""
    b = BOUNDS[field]
    allowed = FIELD_ALLOWED[field]
    named = re.search(r"from (\S+) to (\S+)$" if b.integer else r"\[(\S+), (\S+)\]", allowed)
    assert named and (float(named[1]), float(named[2])) == (b.lo, b.hi), allowed
    beyond = ((b.lo - 1, b.hi + 1) if b.integer
              else (math.nextafter(b.lo, -math.inf), math.nextafter(b.hi, math.inf)))
    for end, out in zip((b.lo, b.hi), beyond):
        with pytest.raises(ConfigError) as refused:
            WorkloadConfig(**{field: out})
        assert str(refused.value) == f"{field}={out!r} is invalid; allowed: {allowed}"
        try:  # another limit may refuse an end (loss_sigma = 1 is above loss_inf's lower end / 8)
            WorkloadConfig(**{field: end})
        except ConfigError as exc:
            assert not str(exc).endswith(f"allowed: {allowed}"), exc


@pytest.mark.parametrize("field,value", BAD_WORKLOAD)
def test_bad_workload_value_names_the_field(field, value):
    with pytest.raises(ConfigError, match=rf"^{field}="):
        WorkloadConfig(**{field: value})


@pytest.mark.parametrize("spec,field", [
    ("evalstop:k=0", "k"), ("evalstop:k=x", "policy.k"), ("evalstop:k=", "no value"), ("stop_at:f=0", "f"),
    ("loss_plateau:w=0", "w"), ("evalstop:scope=dpo", "scope"), ("early", "policy"),
    ("evalstop:q=1", "policy parameter"), ("", "policy"),
])
def test_bad_policy_spec(spec, field):
    with pytest.raises(ConfigError, match=field):
        PolicyConfig.parse(spec)


@pytest.mark.parametrize("spec,field", [
    ("lifo", "scheduler"), ("sjf_est:backfill", "backfill"), ("tiresias:thresholds=64/16",
                                                              "scheduler.thresholds="),
    ("tiresias:thresholds=a", "scheduler.thresholds"), ("fifo:preempt", "scheduler parameter"),
])
def test_bad_scheduler_spec(spec, field):
    with pytest.raises(ConfigError, match=field):
        SchedulerConfig.parse(spec)


# Issue 9, defect 3: a spec parameter is taken as written or refused, never dropped.
@pytest.mark.parametrize("spec,needle", [
    ("evalstop:k=2,k=3", r"policy parameter 'k' is given twice in 'evalstop:k=2,k=3'; allowed: each"),
    ("evalstop:f=0.5", r"policy parameter 'f' is not a parameter of evalstop; allowed: k, scope$"),
    ("oracle:k=3", r"policy parameter 'k' is not a parameter of oracle; allowed: scope$"),
    ("stop_at:k=2", r"'k' is not a parameter of stop_at; allowed: f, scope$"),
    ("none:k=2", r"'k' is not a parameter of none"),
    # an integer's empty value was answered with a remark on true/false flags
    ("evalstop:k=", r"'k' has no value in 'evalstop:k='; allowed: k=VALUE, an integer in \[1, "),
    # a bare key that is no flag read "k= is invalid", as if a value had been typed empty
    ("evalstop:k", r"^policy\.k with no value is invalid; allowed: k=VALUE, an integer in \[1, "
     r".*; only a true/false flag may be given bare$"),
])
def test_policy_spec_parameters_are_checked_against_the_declaration(spec, needle):
    with pytest.raises(ConfigError, match=needle):
        PolicyConfig.parse(spec)


@pytest.mark.parametrize("spec,needle", [
    ("fifo:thresholds=16", r"'thresholds' is not a parameter of fifo; allowed: backfill$"),
    ("fifo:backfill=maybe", r"scheduler.backfill='maybe' is invalid; allowed: true or false"),
    ("fifo:backfill,backfill=false", "'backfill' is given twice"),
    ("srtf_est:backfill", "'backfill' is not a parameter of srtf_est"),
    ("fifo:backfill=", "'backfill' has no value in 'fifo:backfill='"),  # was read as the bare key
    ("fifo:backfill= ", "has a space"),  # a space is no value either
    ("fifo:backfill=", r"allowed: backfill=true, backfill=false or the bare flag backfill$"),
])
def test_scheduler_spec_parameters_are_checked_against_the_declaration(spec, needle):
    with pytest.raises(ConfigError, match=needle):
        SchedulerConfig.parse(spec)


@pytest.mark.parametrize("text", ["True", "true", "TRUE", ""])
def test_backfill_true_in_any_case_or_a_bare_key_is_backfill(text):
    spec = "fifo:backfill" + (f"={text}" if text else "")
    assert SchedulerConfig.parse(spec).backfill is True
    assert SchedulerConfig.parse("fifo:backfill=False").backfill is False


@pytest.mark.parametrize("text", ["yes", "no", "1", "0", "on", "off"])
def test_a_flag_is_true_or_false_only_as_its_error_says(text, capsys, tmp_path):
    spec = f"fifo:backfill={text}"
    why = rf"scheduler.backfill='{text}' is invalid; allowed: true or false$"
    with pytest.raises(ConfigError, match=why):
        SimConfig.from_specs(spec, "evalstop:k=2")
    out = tmp_path / "cells.parquet"
    assert main(["run", "--clusters", "2", "--n-jobs", "5", "--scheduler", spec, "--out",
                 str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    flag = rf"--scheduler fifo: backfill={text} is invalid; allowed: true or false$"
    assert len(err) == 1 and re.search(flag, err[0]) and not out.exists(), err
    from fastsim.sweep.grid import load_sweep
    p = tmp_path / "s.toml"
    p.write_text(f'clusters = 2\n[base]\nscheduler = "{spec}"\npolicy = "evalstop:k=2"\n')
    with pytest.raises(ConfigError, match="backfill='"):
        load_sweep(p)


def test_backfill_true_in_a_sweep_file_is_backfill(tmp_path):
    from fastsim.sweep.grid import load_sweep
    p = tmp_path / "s.toml"
    p.write_text('clusters = 2\nbaseline = false\n[base]\nscheduler = "fifo:backfill=True"\n'
                 'policy = "evalstop:k=2"\n')
    (cell,) = load_sweep(p).cells
    assert cell.config.scheduler.backfill and cell.label.startswith("fifo+backfill")
    p.write_text('clusters = 2\n[axes]\npolicy = ["evalstop:k=2,k=3"]\n')
    with pytest.raises(ConfigError, match="given twice"):
        load_sweep(p)


@pytest.mark.parametrize("argv", [["--scheduler", "fifo:thresholds=16"],
                                  ["--policy", "evalstop:k=2,k=3"], ["--policy", "oracle:k=3"]])
def test_cli_refuses_undeclared_spec_parameters_with_exit_2(argv, capsys, tmp_path):
    out = tmp_path / "cells.parquet"
    assert main(["run", "--clusters", "2", "--n-jobs", "5", "--out", str(out), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "parameter" in err[0] and "allowed" in err[0]
    assert not out.exists()


def test_too_few_evaluations_for_k():
    with pytest.raises(ConfigError, match=r"n_evals=3 .*k\+1=4"):
        SimConfig.from_specs(policy="evalstop:k=3", n_evals=3)
    with pytest.raises(ConfigError, match=r"n_evals=3 .*w\+1=4"):
        SimConfig.from_specs(policy="loss_plateau:w=3", n_evals=3)


def test_unknown_fields_are_refused():
    with pytest.raises(ConfigError, match="'sigmma' is unknown"):
        SimConfig.from_specs(sigmma=0.1)
    with pytest.raises(ConfigError, match="section 'workloads'"):
        SimConfig.from_dict({"workloads": {}})


@pytest.mark.parametrize("argv,needle", [
    (["run", "--sigma", "-1"], "--sigma=-1 is invalid"),
    (["run", "--policy", "evalstop:k=0"], "k=0 is invalid"),
    (["run", "--scheduler", "lifo"], "--scheduler=lifo is invalid"),
    (["run", "--base-rate", "1.2"], "--base-rate=1.2 is invalid"),
    (["run", "--load", "3"], "--load=3 is invalid"),
    (["run", "--n-evals", "2"], "--n-evals=2 is invalid"),
    (["run", "--clusters", "0"], "--clusters=0 is invalid"),
    (["run", "--sigma", "abc"], "--sigma='abc' is invalid; allowed: evaluation-score noise"),
])
def test_cli_prints_one_line_and_exits_2(argv, needle, capsys, tmp_path):
    out = tmp_path / "r.parquet"
    clusters = [] if "--clusters" in argv else ["--clusters", "2"]
    assert main(argv + ["--out", str(out)] + clusters) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not out.exists() and not list(tmp_path.iterdir())


@pytest.fixture(scope="module")
def toy_runs(tmp_path_factory) -> Path:
    """A runs file of ``fastsim traces toy-rlhf``, written once for the module (a refused
    command reads it and writes nothing)."""
    out = tmp_path_factory.mktemp("toy") / "t"
    assert main(["traces", "toy-rlhf", "--n-comparisons", "100", "--kl-coefs", "0.1",
                 "--seeds", "2", "--steps", "30", "--out", str(out)]) == 0
    return out / "runs.parquet"


@pytest.mark.parametrize("argv", [["replay", "--example"],
                                  ["traces", "compare-sim", "runs.parquet"]])
@pytest.mark.parametrize("spec,needle", [
    ("evalstop:k=0", "--policy evalstop: k=0 is invalid; allowed: an integer"),
    ("bogus", "--policy=bogus is invalid; allowed: none, evalstop"),
])
def test_replay_names_a_policy_flag_as_run_does(argv, spec, needle, capsys, request):
    # before: 'policy.k=0 is invalid', a field no one typed
    if argv[0] == "traces":  # a runs file, so the policies are what is refused
        argv = ["traces", "compare-sim", str(request.getfixturevalue("toy_runs"))]
    capsys.readouterr()
    assert main(argv + ["--policy", spec]) == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1


def test_cli_subprocess_has_no_traceback():
    r = subprocess.run([sys.executable, "-m", "fastsim.cli", "run", "--policy", "bogus"],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert "--policy=bogus is invalid" in r.stderr and "Traceback" not in r.stderr


def test_every_kernel_metric_slot_is_declared_once():
    from fastsim import metrics as M
    from fastsim.kernels.metrics import METRIC_NAMES

    columns = [m.name for m in M.BUILTIN_METRICS if m.column]
    assert sorted(columns) == sorted(METRIC_NAMES) and len(set(columns)) == len(columns)
    for m in M.BUILTIN_METRICS:
        for col in m.pooled[0] + m.pooled[1]:
            assert col in columns, f"{m.name} pools undeclared column {col}"


@pytest.mark.parametrize("what", ["policy", "scheduler"])
def test_every_declared_parameter_refuses_bad_values_with_its_name(what):
    """sklearn-style common test: each declaration's parameters, fed invalid values."""
    from fastsim import registry as R

    decls = R.BUILTIN_POLICIES if what == "policy" else R.BUILTIN_SCHEDULERS
    parse = PolicyConfig.parse if what == "policy" else SchedulerConfig.parse
    for d in decls:
        assert parse(d.usage()).label  # defaults are valid
        for p in d.params:
            bad = {"int": ["x", "1.5", "-1000"], "float": ["x", "nan", "1e9"], "bool": ["maybe"],
                   "choice": ["nope"], "floats": ["0", "3/2", "x"]}[p.kind]
            for text in bad:
                with pytest.raises(ConfigError, match=rf"{what}\.{p.name}=.*allowed: "):
                    parse(f"{d.name}:{p.name}={text}")
            help_line = R.help_text(what)
            assert d.name in help_line and p.help in help_line or p.name == "scope"


def test_loss_noise_is_bounded_so_that_loss_readings_stay_positive(tmp_path):
    # loss_aware and loss_plateau read relative loss drops: a reading <= 0 reverses them.
    # loss_sigma 0.05 against loss_inf's lower end 0.2 gave readings <= 0 (4 standard
    # deviations); it is refused, in one line naming the bound.
    with pytest.raises(ConfigError, match=r"^loss_sigma=0.05 is invalid; allowed: at most "
                                          r"loss_inf's lower end \(0.2\) / 8 = 0.025"):
        WorkloadConfig(loss_sigma=0.05)
    WorkloadConfig(loss_sigma=0.025)
    with pytest.raises(ConfigError, match=r"^loss_sigma=0.01 .* lower end \(0\) / 8 = 0,"):
        WorkloadConfig(loss_inf=(0.0, 0.3))
    WorkloadConfig(loss_inf=(0.0, 0.3), loss_sigma=0.0)  # noise-free readings stay above 0
    out = tmp_path / "r.parquet"
    assert main(["run", "--clusters", "2", "--loss-sigma", "0.05", "--no-progress",
                 "--out", str(out)]) == 2
    assert not out.exists()


def test_loss_curves_whose_readings_underflow_are_refused(tmp_path):
    # loss_inf from 0 (so loss_sigma 0) with loss0 1e-300 and loss_tau 1e-30: the reading
    # L(1) = 1e-300 / (1 + 1e30) underflowed to 0, and loss_plateau's relative drop
    # (0 / 0) ended fastsim run in a ZeroDivisionError traceback; readings in the
    # subnormal range (loss_tau 1e-22) moved loss_aware's schedule, which a relative drop
    # leaves unchanged when loss0 is scaled.
    tiny = dict(loss_inf=(0.0, 0.0), loss_sigma=0.0, loss0=(1e-300, 1e-300))
    with pytest.raises(ConfigError, match=r"^loss_inf=\(0.0, 0.0\) is invalid; allowed: a lower "
                                          r"end whose smallest noise-free loss reading .* is at "
                                          r"least 2.2e-308, the smallest normal float64"):
        WorkloadConfig(**tiny, loss_tau=(1e-22, 1.0))
    WorkloadConfig(**tiny, loss_tau=(1e-7, 1.0))  # L(1) = 1e-307
    WorkloadConfig(loss_inf=(0.0, 0.3), loss_sigma=0.0, loss_tau=(1e-300, 0.1))  # L(1) > 0
    out = tmp_path / "r.parquet"
    assert main(["run", "--clusters", "2", "--n-jobs", "10", "--scheduler", "fifo", "--policy",
                 "loss_plateau", "--loss-inf", "0,0", "--loss-sigma", "0", "--loss0",
                 "1e-300,1e-300", "--loss-tau", "1e-30,1e-30", "--no-progress", "--out",
                 str(out)]) == 2
    assert not out.exists()


def test_an_arrival_span_float64_cannot_resolve_runs_in_is_refused():
    # Each field in range, together: jobs arriving over ~1.8e10 h while LoRA runs take
    # ~1e-3 h, which float64 hours resolve to ~4e-3 relative (runs of zero held time).
    with pytest.raises(ConfigError, match=r"^load=0.01 is invalid; allowed: settings whose "
                                          r"arrival span \(about 1.77e\+10 h"):
        WorkloadConfig(n_jobs=3000, load=0.01, median_lora_h=0.001, median_dpo_h=1e4,
                       median_rlhf_h=1e4, log_sd=3.0, mix="mixed")
    WorkloadConfig(load=0.01, median_lora_h=0.001)  # 300 jobs over ~4e4 h: resolved


def test_api_config_arguments_of_the_wrong_shape_are_one_line():
    base = SimConfig.from_specs()
    for call, needle in (
            (lambda: SimConfig(base.workload, base.scheduler, base.policy, metrics=5),
             "metrics=5 is invalid"),
            (lambda: PolicyConfig(name="peak", params="z=1"), "are invalid; allowed: (name, value) pairs"),
            (lambda: PolicyConfig(name="peak", params=(("z", 1.0), ("z", 2.0))),
             "name a parameter twice")):
        with pytest.raises(ConfigError, match=re.escape(needle)):
            call()


def test_a_list_computed_with_numpy_is_a_list():
    # "demands_rlhf=array([1, 2, 3, 4]) is invalid; allowed: a non-empty list of integers"
    import numpy as np

    cfg = SimConfig.from_specs("tiresias", "evalstop", mix=np.array([0.2, 0.3, 0.5]),
                               demands_rlhf=np.arange(1, 5), height=np.array([0.5, 0.9]))
    assert cfg == SimConfig.from_specs("tiresias", "evalstop", mix=(0.2, 0.3, 0.5),
                                       demands_rlhf=(1, 2, 3, 4), height=(0.5, 0.9))
    assert SchedulerConfig(name="tiresias", thresholds_gpu_h=np.array([16, 64])) == \
        SchedulerConfig(name="tiresias", thresholds_gpu_h=(16.0, 64.0))


def test_a_series_is_a_list():
    """demands_rlhf=pl.Series([4, 8]) was refused with the Series' printout squashed into
    one line, where the same numbers in a numpy array are taken."""
    import pandas as pd
    import polars as pl

    for series in (pl.Series([4, 8]), pd.Series([4, 8])):
        cfg = WorkloadConfig(demands_rlhf=series, mix=series.__class__([0.2, 0.3, 0.5]))
        assert cfg == WorkloadConfig(demands_rlhf=(4, 8), mix=(0.2, 0.3, 0.5))
        assert type(cfg.demands_rlhf[0]) is int
    with pytest.raises(ConfigError, match=r"^demands_rlhf=\(4, None\) is invalid"):
        WorkloadConfig(demands_rlhf=pl.Series([4, None]))


def test_text_computed_with_numpy_is_text():
    """mix=np.str_("mixed") was stored as numpy's and named as np.str_('mixed') in messages
    and in the config's dict."""
    import numpy as np

    cfg = SimConfig.from_specs(np.str_("fifo"), PolicyConfig(name=np.str_("evalstop"),
                                                             scope=np.str_("all")),
                               mix=np.str_("mixed"))
    texts = (cfg.workload.mix, cfg.scheduler.name, cfg.policy.name, cfg.policy.scope)
    assert all(type(t) is str for t in texts) and "np.str_" not in repr(cfg.to_dict())
    with pytest.raises(ConfigError, match=r"^mix='mixe' is invalid"):
        WorkloadConfig(mix=np.str_("mixe"))
    with pytest.raises(ConfigError, match=r"^scope='bogus' is invalid"):
        PolicyConfig(scope=np.str_("bogus"))
    with pytest.raises(ConfigError, match=r"^metric='no_such_module:fn' cannot be imported"):
        SimConfig.from_specs(metrics=[np.str_("no_such_module:fn")])


def test_a_value_whose_repr_spans_lines_is_named_in_one_line():
    # a 2-D array's repr is one line per row, and the message was as many lines
    import numpy as np

    from fastsim.api import simulate

    for call in (lambda: SimConfig.from_specs(demands_rlhf=np.ones((3, 2), int)),
                 lambda: simulate(SimConfig.from_specs(n_jobs=10), np.ones((3, 2), int))):
        with pytest.raises(ConfigError) as info:
            call()
        assert "\n" not in str(info.value) and "[1, 1], [1, 1], [1, 1]" in str(info.value)


def test_compare_refuses_what_is_not_a_config_as_simulate_does():
    """compare("srtf_est") was AttributeError: 'str' object has no attribute 'with_policy'."""
    import fastsim

    for cfg in ("srtf_est", None, SimConfig.from_specs("srtf_est", "none").policy):
        with pytest.raises(ConfigError, match="is invalid; allowed: a SimConfig"):
            fastsim.compare(cfg, n_clusters=2)


@pytest.mark.parametrize("baseline, needle", [
    ("evalstop:k=-1", "baseline.k=-1 is invalid"), (3, "baseline=3 is invalid"),
    ("nosuch", "baseline='nosuch'"), (False, "baseline=off is invalid for compare"),
    # None was told "or false for no baseline", which compare then refused
    (None, "baseline=None is invalid for compare; allowed: a stop policy spec"),
    (3, "baseline=3 is invalid for compare")])
def test_compare_names_a_bad_baseline_before_running_either_arm(baseline, needle, monkeypatch):
    import fastsim.api as api

    def no_run(*a, **k):
        raise AssertionError("simulated before the baseline was checked")
    monkeypatch.setattr(api, "simulate", no_run)
    cfg = SimConfig.from_specs("srtf_est", "evalstop:k=2", n_jobs=20)
    with pytest.raises(ConfigError, match=re.escape(needle)):
        api.compare(cfg, baseline=baseline, n_clusters=2)


def _misspelt_keyword_calls(tmp_path):
    import fastsim
    from fastsim.config import WorkloadConfig

    cfg = SimConfig.from_specs("srtf_est", "evalstop:k=2", n_jobs=10)
    return [
        (lambda: fastsim.sweep("noise", tmp_path / "out", cluster=3), "fastsim.sweep()", "cluster",
         "clusters"),
        (lambda: fastsim.simulate(cfg, 2, seeds=1), "fastsim.simulate()", "seeds", "seed"),
        (lambda: fastsim.compare(cfg, n_cluster=2), "fastsim.compare()", "n_cluster", "n_clusters"),
        (lambda: fastsim.replay(tmp_path / "log.csv", "evalstop:k=2", gpu=2), "fastsim.replay()",
         "gpu", "gpus"),
        (lambda: fastsim.read_logs(tmp_path / "log.csv", metrc="loss"), "fastsim.read_logs()",
         "metrc", "metric"),
        (lambda: fastsim.summarize(None, base=None), "fastsim.summarize()", "base", "baseline"),
        (lambda: fastsim.format_table(None, titel="x"), "fastsim.format_table()", "titel", "title"),
        (lambda: fastsim.StopMonitor("evalstop:k=2", higher_better=False), "StopMonitor()",
         "higher_better", "higher_is_better"),
        (lambda: fastsim.EvalStopMonitor(kk=2), "EvalStopMonitor()", "kk", "k"),
        (lambda: fastsim.SimConfig(workloads=None), "SimConfig()", "workloads", "workload"),
        (lambda: WorkloadConfig(n_job=30), "WorkloadConfig()", "n_job", "n_jobs"),
        # from_specs named WorkloadConfig and left its own scheduler and policy out
        (lambda: SimConfig.from_specs(sheduler="fifo"), "SimConfig.from_specs()", "sheduler",
         "scheduler"),
        (lambda: SimConfig.from_specs(n_job=30), "SimConfig.from_specs()", "n_job", "n_jobs"),
        # docs/tutorial.md's way to draw from Python: it was Python's TypeError
        (lambda: importlib.import_module("fastsim.sweep.figures").draw_all(
            tmp_path, tmp_path / "out", fromats="png"), "fastsim.sweep.figures.draw_all()",
         "fromats", "formats"),
    ]


def test_a_misspelt_keyword_of_the_api_is_one_line_naming_it(tmp_path):
    """fastsim.sweep(..., cluster=3) was a TypeError traceback ('run_sweep_file() got an
    unexpected keyword argument'); every exported function and class says what it takes."""
    for call, what, key, near in _misspelt_keyword_calls(tmp_path):
        with pytest.raises(ConfigError) as e:
            call()
        text = str(e.value)
        assert text.startswith(f"{what} keyword {key!r} is unknown (did you mean {near}?); "
                               "allowed: "), text
        assert "\n" not in text and near in text.split("; allowed: ")[1].split(", ")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("call, text", [
    # Python's TypeError named the function behind the call: 'run_sweep_file() missing 1
    # required positional argument', 'replay_logs() ...', for fastsim.sweep and fastsim.replay
    (lambda f: f.sweep("noise"),
     "fastsim.sweep(): out is missing; allowed: fastsim.sweep(file, out, ...)"),
    (lambda f: f.sweep(out="results"),
     "fastsim.sweep(): file is missing; allowed: fastsim.sweep(file, out, ...)"),
    (lambda f: f.replay(), "fastsim.replay(): logs is missing; allowed: fastsim.replay(logs, ...)"),
    (lambda f: f.simulate(), "fastsim.simulate(): cfg and n_clusters are missing; allowed: "
     "fastsim.simulate(cfg, n_clusters, ...)"),
    (lambda f: f.StopMonitor("evalstop:k=2").observe("run-1", 1), "StopMonitor.observe(): "
     "score is missing; allowed: StopMonitor.observe(job_id, step, score, ...)"),
])
def test_a_required_argument_left_out_is_one_line_naming_the_call(call, text):
    import fastsim

    with pytest.raises(ConfigError) as e:
        call(fastsim)
    assert str(e.value) == text


def test_replay_names_read_logs_for_a_keyword_of_reading(tmp_path):
    """fastsim.replay(path, policy, metric="eval_loss") said only 'allowed: logs, policies,
    gpus': nothing said that the metric is chosen by read_logs."""
    import fastsim

    with pytest.raises(ConfigError) as e:
        fastsim.replay(tmp_path / "log.csv", "evalstop:k=2", metric="eval_loss")
    assert str(e.value) == (
        "fastsim.replay() keyword 'metric' is unknown; allowed: logs, policies, gpus; metric is "
        "fastsim.read_logs()'s: fastsim.replay(fastsim.read_logs(path, metric=...), policies)")


def test_the_api_still_takes_positional_arguments():
    import fastsim

    cfg = SimConfig.from_specs("srtf_est", "evalstop:k=2", n_jobs=10)
    assert fastsim.simulate(cfg, 2, 0).clusters.height == 2
    assert fastsim.StopMonitor("evalstop:k=1", False).observe("j", 1, 0.5).keep_step == 1
    assert fastsim.EvalStopMonitor(3).k == 3
    assert SimConfig(WorkloadConfig(n_jobs=10)).workload.n_jobs == 10
    with pytest.raises(ConfigError, match=r"fastsim.sweep\(\) keyword 'clusterz' is unknown \(did "):
        fastsim.sweep("noise", "unused", clusterz=3)  # the callable package forwards keywords


def test_summarize_and_format_table_refuse_what_they_cannot_read():
    """A SimResult (not its .clusters), a pandas frame, a frame without the pooled counts,
    a non-string title: AttributeError, TypeError, polars' ColumnNotFoundError or KeyError."""
    import polars as pl

    import fastsim

    cfg = SimConfig.from_specs("srtf_est", "evalstop:k=2", n_jobs=10)
    res = fastsim.simulate(cfg, 3)
    other = fastsim.simulate(cfg, 2, cluster_start=5).clusters
    for call, needle in (
            (lambda: fastsim.summarize(res), "clusters is a SimResult; allowed: the per-cluster"),
            (lambda: fastsim.summarize(None), "clusters is None; allowed"),
            (lambda: fastsim.summarize(res.clusters.to_pandas()), "clusters is a pandas DataFrame"),
            (lambda: fastsim.summarize(pl.DataFrame({"x": [1]})), "clusters has no column 'tp'"),
            (lambda: fastsim.summarize(res.clusters, res), "baseline is a SimResult"),
            (lambda: fastsim.summarize(res.clusters, res.clusters.drop("cluster")),
             "baseline has no column 'cluster'"),
            (lambda: fastsim.summarize(res.clusters, other), "baseline covers other clusters "
             "than clusters for a paired comparison (2 and 3, 0 in both); allowed: both arms"),
            (lambda: fastsim.format_table(5), "summary is 5; allowed: a table from"),
            (lambda: fastsim.format_table(res.clusters), "summary has no column 'metric'"),
            (lambda: fastsim.format_table(fastsim.summarize(res.clusters), 5), "title is 5")):
        with pytest.raises(ConfigError, match=re.escape(needle)):
            call()



def test_summarize_says_a_table_without_a_later_count_is_an_older_fastsims():
    """Per-cluster metrics written before fp_freed was counted (`fastsim run --out` of an
    older fastsim, read back) were refused as "has no column 'fp_freed'; allowed: the
    per-cluster metrics of fastsim.simulate", which did not say why a table fastsim wrote
    was not one, nor what to do."""
    import fastsim

    cfg = SimConfig.from_specs("srtf_est", "evalstop:k=2", n_jobs=10)
    older = fastsim.simulate(cfg, 2).clusters.drop("fp_freed", "stop_fpr")
    with pytest.raises(ConfigError) as err:
        fastsim.summarize(older)
    said = str(err.value)
    assert said.startswith("summarize(): clusters has no column 'fp_freed' but has 'tp', as "
                           "per-cluster metrics an older fastsim wrote before it counted "
                           "fp_freed do; allowed: "), said
    assert "simulated again (fastsim.simulate, or fastsim run --out)" in said, said
    assert "\n" not in said


@pytest.mark.parametrize("column,dtype", [("jct_mean_h", "String"), ("tp", "String"),
                                          ("cluster", "String"), ("cluster", "Categorical"),
                                          ("tp", "Boolean")])
def test_summarize_names_a_column_that_holds_no_numbers(column, dtype):
    """A metric column of text (numbers read from a CSV as strings) was a numpy TypeError
    ("ufunc 'isfinite' not supported") with a baseline, and summed as text without; a
    cluster column of text a polars SchemaError from the join; a count of booleans the
    words "pooled counts 10.0 of 8.0", naming no column."""
    import polars as pl

    import fastsim

    cfg = SimConfig.from_specs("srtf_est", "evalstop:k=2", n_jobs=10)
    clusters = fastsim.simulate(cfg, 3).clusters
    bad = clusters.with_columns((pl.col(column) > 0) if dtype == "Boolean" else
                                pl.col(column).cast(pl.String).cast(getattr(pl, dtype)))
    for call in (lambda: fastsim.summarize(bad, clusters),
                 lambda: fastsim.summarize(clusters, bad)) + (
                     () if column == "cluster" else (lambda: fastsim.summarize(bad),)):
        with pytest.raises(ConfigError, match=rf"^summarize\(\): (clusters|baseline) column "
                                              rf"{column} holds {dtype.lower()}[a-z]*; allowed: "):
            call()


def test_summarize_names_a_column_holding_more_than_one_value_per_cluster():
    """A column of arrays (polars' Array dtype) was flattened, each of its cells a
    cluster; refused since, in words naming no column ("values has shape (3, 2)")."""
    import numpy as np
    import polars as pl

    import fastsim

    res = fastsim.simulate(SimConfig.from_specs("srtf_est", "evalstop:k=2", n_jobs=10), 3)
    wide = res.clusters.with_columns(pl.Series("jct_mean_h", np.ones((3, 2)),
                                               dtype=pl.Array(pl.Float64, 2)))
    with pytest.raises(ConfigError, match=re.escape(
            "column jct_mean_h: values has shape (3, 2); allowed: one value per replication")):
        fastsim.summarize(wide)

# One spelling per spec: each laxity the parser once let through (a trailing ':' or ',', a
# space, a number Python's int() or float() reads but the grammar does not write) is
# refused in one line, alike from the API, the command line and a sweep file.
LAX_SPECS = [
    ("evalstop:", "has a parameter with no key"),
    ("evalstop:k=2,", "has a parameter with no key"),
    ("evalstop:,k=2", "has a parameter with no key"),
    ("evalstop:=2", "has a parameter with no key"),
    ("evalstop:k=2,,scope=all", "has a parameter with no key"),
    (":k=2", "has no name before ':'"),
    ("evalstop: k=2", "has a space"),
    ("evalstop:k = 2", "has a space"),
    ("evalstop:k=2 ", "has a space"),
    ("evalstop:k=", "has no value"),
    ("evalstop:k=2,k=3", "is given twice"),
    ("evalstop:k=2.0", "k='2.0' is invalid; allowed: an integer"),
    ("evalstop:k=+2", "k='+2' is invalid; allowed: an integer"),
    ("evalstop:k=0x2", "k='0x2' is invalid; allowed: an integer"),
    ("evalstop:k=1_0", "k='1_0' is invalid; allowed: an integer"),
    ("evalstop:k=\u0662", "is invalid; allowed: an integer"),  # ARABIC-INDIC DIGIT TWO
    ("evalstop:k=\uff12", "is invalid; allowed: an integer"),  # FULLWIDTH DIGIT TWO
    ("stop_at:f=+0.5", "f='+0.5' is invalid; allowed: a number"),
    ("stop_at:f=0.6_5", "f='0.6_5' is invalid; allowed: a number"),
    ("EvalStop:k=2", "'EvalStop' is invalid; allowed: none, evalstop"),
    ("evalstop:K=2", "'K' is not a parameter of evalstop; allowed: k, scope"),
    ("evalstop:scope=ALL", "scope='ALL' is invalid; allowed: one of"),
]


@pytest.mark.parametrize("spec,needle", LAX_SPECS)
def test_a_lax_policy_spec_is_refused_alike_by_api_cli_and_toml(spec, needle, capsys, tmp_path):
    with pytest.raises(ConfigError, match=re.escape(needle)) as exc:
        PolicyConfig.parse(spec)
    assert "allowed" in str(exc.value) and "\n" not in str(exc.value)
    with pytest.raises(ConfigError, match=re.escape(needle)):
        SimConfig.from_specs("fifo", spec)
    out = tmp_path / "cells.parquet"
    assert main(["run", "--clusters", "2", "--n-jobs", "5", "--policy", spec, "--out",
                 str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and re.search(r"error: --policy[ =]", err[0]) and "allowed" in err[0], err
    assert not out.exists()
    from fastsim.sweep.grid import load_sweep
    p = tmp_path / "s.toml"
    p.write_text(f'clusters = 2\n[axes]\npolicy = ["{spec}"]\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=re.escape(needle)):
        load_sweep(p)


@pytest.mark.parametrize("spec,needle", [
    ("fifo:", "has a parameter with no key"), ("fifo:backfill,", "has a parameter with no key"),
    ("fifo: backfill", "has a space"), ("tiresias:thresholds=16/+64", "is invalid"),
    ("tiresias:thresholds=16/6_4", "is invalid"), ("tiresias:thresholds=16//64", "is invalid"),
])
def test_a_lax_scheduler_spec_is_refused(spec, needle):
    with pytest.raises(ConfigError, match=re.escape(needle)):
        SchedulerConfig.parse(spec)


@pytest.mark.parametrize("spec", ["evalstop:k=3", "evalstop:k=-0", "stop_at:f=.65",
                                  "stop_at:f=6.5e-1", "loss_plateau:w=2,tol=1E-2"])
def test_numbers_written_in_digits_are_still_read(spec):
    try:
        PolicyConfig.parse(spec)
    except ConfigError as exc:  # out of range is the declaration's business, not the grammar's
        assert "written in digits" not in str(exc)


def test_a_long_number_in_a_spec_is_refused_at_once():
    """The grammar's number pattern backtracked quadratically on a long run of digits
    that did not end as a number: 30,000 characters took about 17 s to refuse (a sweep
    file's or a command line's spec can be that long), float() took microseconds."""
    import time

    for spec in ("stop_at:f=" + "1" * 30_000 + "x", "tiresias:thresholds=1/" + "2" * 30_000 + "x"):
        t0 = time.perf_counter()
        with pytest.raises(ConfigError, match="is invalid"):
            (SchedulerConfig if spec.startswith("tiresias") else PolicyConfig).parse(spec)
        assert time.perf_counter() - t0 < 1.0, spec[:20]


@pytest.mark.parametrize("parse,spec,near", [
    (SchedulerConfig.parse, "srtf", "srtf_est"), (SchedulerConfig.parse, "SJF", "sjf_est"),
    (PolicyConfig.parse, "evalstp:k=2", "evalstop"), (PolicyConfig.parse, "stopat", "stop_at"),
    (PolicyConfig.parse, "bogus", None),
    # a label is not a misspelt name: 'evalstop' would drop its k=3
    (PolicyConfig.parse, "evalstop(k=3)", None), (SchedulerConfig.parse, "tiresias(8/32)", None),
])
def test_a_misspelt_name_is_refused_with_the_nearest_one(parse, spec, near):
    """'srtf' was refused with the list alone, as keywords were before their hint."""
    with pytest.raises(ConfigError) as exc:
        parse(spec)
    said = str(exc.value)
    assert said.endswith(f" (did you mean {near}?)" if near else
                         ("of a user's @stop_policy", "of a user's @scheduler_key")), said


@pytest.mark.parametrize("key,home", [("k", 'policy="evalstop:k=..."'),
                                      ("backfill", 'scheduler="fifo:backfill=..."')])
def test_a_spec_parameter_given_to_from_specs_says_where_it_goes(key, home):
    """SimConfig.from_specs("fifo", "evalstop", k=3) said only that k is unknown, among the
    workload's 30 fields; fastsim run --k 3 says it goes in the policy spec, and so does
    the API now."""
    with pytest.raises(ConfigError) as e:
        SimConfig.from_specs("fifo", "evalstop", **{key: 3})
    text = str(e.value)
    assert "\n" not in text and f"it goes in the spec, {home}" in text, text


def test_format_table_refuses_the_rows_of_several_cells(tmp_path):
    """format_table(fastsim.sweep(...)) printed every cell's rows one after another with
    nothing to say which cell a row is of (the policy and its baseline under one header);
    a table holding a metric twice is refused, naming how to pick one cell."""
    import polars as pl

    import fastsim

    cfg = SimConfig.from_specs("fifo", "evalstop:k=2", n_jobs=8)
    one = fastsim.summarize(fastsim.simulate(cfg, 2).clusters)
    two = pl.concat([one.with_columns(pl.lit(c).alias("label")) for c in ("a", "b")])
    with pytest.raises(ConfigError, match=r"^format_table\(\): summary holds metric "
                                          r"'jct_mean_h' 2 times \(the rows of 2 cells\?\); "
                                          r"allowed: one cell's rows, as summary.filter"):
        fastsim.format_table(two)
    assert fastsim.format_table(one).count("mean JCT (h)") == 1


def test_a_misspelt_mix_gets_the_nearest_one():
    """mix='rlhf_havy' listed the two mixes without saying which was meant, as a
    misspelt scheduler or policy does."""
    with pytest.raises(ConfigError, match=r"^mix='rlhf_havy' is invalid \(did you mean "
                                          r"rlhf_heavy\?\); allowed: one of mixed, rlhf_heavy "
                                          r"or three fractions"):
        SimConfig.from_specs("fifo", "none", mix="rlhf_havy")
    # as fastsim run --help says it: "one of ['mixed', 'rlhf_heavy']" showed a Python list
    from fastsim.config import FIELD_ALLOWED
    assert FIELD_ALLOWED["mix"] == "one of mixed, rlhf_heavy or three fractions (lora, dpo, rlhf)"


def test_a_misspelt_builtin_metric_gets_the_nearest_one():
    """metrics=['jct_mean'] was refused as not MODULE:FUNCTION without saying that the
    metric meant (jct_mean_h) is a built-in one, always computed."""
    with pytest.raises(ConfigError, match=r"^metrics='jct_mean' is invalid \(did you mean "
                                          r"jct_mean_h\?\); allowed: MODULE:FUNCTION .*always"):
        SimConfig.from_specs("fifo", "none", metrics=["jct_mean"])


@pytest.mark.parametrize("spec, said", [
    ("x\ny", r"x\ny has a line break;"), ("x\ty", r"x\ty has a tab;"),
    ("x\u00a0", r"x\xa0 has a no-break space (U+00A0);"), ("x y", "x y has a space;")])
def test_a_spec_names_the_white_space_it_holds(capsys, spec, said):
    """fastsim run --scheduler $'x\\ny' echoed x\\ny and called the line break 'a space'."""
    from conftest import one_line

    one_line(capsys, ["run", "--scheduler", spec], f"--scheduler={said}")


def test_a_float32_mix_is_taken_to_float32_precision():
    """WorkloadConfig(mix=np.float32([.2, .3, .5])) was refused: widened, its fractions sum
    to 1 + 1.5e-8, beyond the 1e-9 a float64 mix is held to.  It is taken (as the widened
    values, as a float32 is in any other field), also when re-read from its dict; a float64
    mix and a float32 one off by 1e-4 are still refused."""
    import dataclasses

    import numpy as np

    cfg = SimConfig.from_specs(mix=np.array([.2, .3, .5], dtype=np.float32))
    assert cfg.workload.mix == (float(np.float32(.2)), float(np.float32(.3)), 0.5)
    assert SimConfig.from_dict(cfg.to_dict()) == cfg
    assert dataclasses.replace(cfg.workload, load=0.8).mix == cfg.workload.mix
    for mix in ((0.2, 0.3, 0.5000001), np.array([.2, .3, .5001], dtype=np.float32)):
        with pytest.raises(ConfigError, match="summing to 1"):
            WorkloadConfig(mix=mix)


@pytest.mark.parametrize("argv,needle", [
    # Python's int() and float() read these: --sigma ٠.١ ran with 0.1, --n-jobs 1_0 with 10,
    # while a spec's parameter (evalstop:k=1_0) refused them
    (["run", "--sigma", "\u0660.\u0661"], "--sigma='\u0660.\u0661' is invalid; allowed: "
     "evaluation-score noise (standard deviation), a number written in digits 0-9"),
    (["run", "--mix", "\u0661,0,0"], "--mix='\u0661,0,0': '\u0661' is invalid; allowed: "),
    (["run", "--n-jobs", "1_0"], "--n-jobs='1_0' is invalid; allowed: jobs per cluster, an "
     "integer written in digits 0-9"),
    (["run", "--demands-dpo", "2,+4"], "--demands-dpo='2,+4': '+4' is invalid"),
    (["run", "--clusters", "1_0"], "--clusters='1_0' is invalid; allowed: an integer written"),
    (["run", "--seed", " 3"], "--seed=' 3' is invalid"),
    (["run", "--load", "inf"], "--load='inf' is invalid"),
    (["sweep", "s.toml", "--out", "o", "--workers", "\u0662"], "--workers='\u0662' is invalid"),
    (["sweep", "s.toml", "--out", "o", "--dask-timeout", "1_0"], "--dask-timeout='1_0' is "),
    (["costaware", "ratios", "--reg", "\uff11"], "--reg='\uff11' is invalid"),
    (["costaware", "subset", "--gammas", "0.1,1_0"], "--gammas='0.1,1_0': '1_0' is invalid"),
    (["traces", "toy-rlhf", "--seeds", "1,\u0662"], "--seeds='1,\u0662': '\u0662' is "),
    (["traces", "toy-rlhf", "--kl-coefs", "0.1,nan"], "--kl-coefs='0.1,nan': 'nan' is "),
    (["replay", "--example", "--gpus", "\u0668"], "--gpus=\u0668 is invalid"),
    (["detectors", "--trace-noise", "0.0_1"], "--trace-noise='0.0_1' is invalid"),
])
def test_a_number_is_read_by_one_rule_in_every_option(argv, needle, capsys, tmp_path,
                                                      monkeypatch):
    from conftest import one_line

    monkeypatch.chdir(tmp_path)
    one_line(capsys, argv, needle)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("argv,needle", [
    # each echoed Python's float of the text (--dask-timeout=0.0, trace-noise=-1.0,
    # --sigma 1.5, eps=0.0), where fastsim run's options say it as typed (--sigma=-1.50)
    (["sweep", "s.toml", "--out", "o", "--backend", "dask", "--dask-timeout", "0.00"],
     "--dask-timeout=0.00 is invalid; allowed: seconds > 0"),
    (["reproduce", "--backend", "dask", "--dask-timeout", "-1"],
     "--dask-timeout=-1 is invalid; allowed: seconds > 0"),
    (["detectors", "--trace-noise", "-1"], "--trace-noise=-1 is invalid; allowed: a number in "),
    (["detectors", "--trace-noise", "2e6"], "--trace-noise=2e6 is invalid; allowed: "),
    (["traces", "compare-sim", "runs.parquet", "--sigma", "1.50"],
     "--sigma=1.50 is invalid; allowed: an evaluation-noise standard deviation in [0, 1]"),
    (["costaware", "sgd", "--eps", "0"], "--eps=0 is invalid; allowed: a number in (0, 1]"),
    (["costaware", "sgd", "--lam", "1.50"], "--lam=1.50 is invalid; allowed: a number in [0, 1]"),
    (["costaware", "grpo", "--len-sigma", "4"], "--len-sigma=4 is invalid; allowed: a number "
     "in [0, 3]"),
    (["costaware", "sgd", "--replications", "01"], "--replications=01 is invalid; allowed: an "
     "integer from 2 to 1000000"),
    # a list's item said as a float (--gammas=1.5), a list as the config's field and tuple
    # (kl_coefs=(-1.0,) is invalid; ...)
    (["costaware", "subset", "--gammas", "0.1,1.50"], "--gammas=0.1,1.50 is invalid; allowed: a "
     "fraction"),
    (["traces", "toy-rlhf", "--kl-coefs", "0,-1", "--out", "t"],
     "--kl-coefs=0,-1 is invalid; allowed: a non-empty list of finite numbers >= 0"),
    (["traces", "toy-rlhf", "--steps", "0", "--out", "t"], "--steps=0 is invalid; allowed: an "
     "integer from 1 to 1000000"),
])
def test_a_range_refusal_says_the_value_as_typed(argv, needle, capsys, tmp_path, monkeypatch):
    from conftest import one_line

    monkeypatch.chdir(tmp_path)
    one_line(capsys, argv, needle)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("argv,line", [
    # bounds said as Python's floats ((0.0, 1.0]), no "allowed:"; across fields, the
    # fields' names and Python's values (reg=0 with kind='logistic')
    (["sgd", "--eps", "0"], "--eps=0 is invalid; allowed: a number in (0, 1]"),
    (["ratios", "--reg", "1e308"], "--reg=1e308 is invalid; allowed: a number in [0, 1e+06]"),
    (["sgd", "--max-steps", "0"], "--max-steps=0 is invalid; allowed: an integer from 1 to "
     "1000000000"),
    (["ratios", "--kind", "logistic", "--reg", "0"], "--reg=0 is invalid; allowed: a number "
     "above 0 with --kind=logistic, whose optimum may otherwise be at infinity"),
    (["ratios", "--reg", "0.0", "--n", "4"], "--reg=0.0 is invalid; allowed: a number above 0 "
     "with --kind=least_squares and --n=4 < --d=8 (A'A is singular, so the optimum is not "
     "unique and the instance not strongly convex), or at least as many samples as dimensions"),
    (["grpo", "--prompts", "2", "--group", "4"], "--batch=32 is invalid; allowed: an integer "
     "from 1 to --prompts x --group = 8 (the responses of a step) (the default of --batch, "
     "which the options given rule out)"),
    # a product of fields said with the fields' names (n*d=..., prompts*group = 8)
    (["ratios", "--n", "1000000", "--d", "10000"], "--n x --d = 10000000000 is too large; "
     "allowed: at most 50,000,000 (--n=1000000, --d=10000: 74.5 GiB a copy)"),
    (["grpo", "--n-train", "1000000", "--n-traces", "1024", "--n-features", "1024"],
     "(--n-train + --n-test) x --n-traces x --n-features = 1048844435456 is too large; "
     "allowed: at most 50,000,000 (7814.5 GiB a thread)"),
    (["sgd", "--sgd-seed", "-1"], "--sgd-seed=-1 is invalid; allowed: an integer from 0 to "
     "2^63-1"),
])
def test_a_costaware_refusal_names_the_options_and_what_is_allowed(argv, line, capsys):
    """`fastsim costaware`'s refusals read as fastsim run's: the options as typed, then
    what is allowed; the Python API's name its keyword arguments."""
    assert main(["costaware", *argv]) == 2
    assert capsys.readouterr().err.splitlines() == [f"fastsim costaware {argv[0]}: error: {line}"]


@pytest.mark.parametrize("make,message", [
    (lambda: SGDConfig(eps=0), "eps=0 is invalid; allowed: a number in (0, 1]"),
    (lambda: SGDConfig(lam=2), "lam=2 is invalid; allowed: a number in [0, 1] (0 = pure "
     "strategy, 1 = uniform)"),
    (lambda: ProblemConfig(kind="logistic", reg=0), "reg=0 is invalid; allowed: a number "
     "above 0 with kind='logistic', whose optimum may otherwise be at infinity"),
    (lambda: GRPOConfig(prompts=2, group=4), "batch=32 is invalid; allowed: an integer from 1 "
     "to prompts*group = 8 (the responses of a step)"),
])
def test_a_costaware_config_refusal_names_its_keywords(make, message):
    with pytest.raises(ConfigError) as info:
        make()
    assert str(info.value) == message


def test_no_option_reads_its_number_with_python_int_or_float():
    """Each numeric option reads through fastsim.values.number_text, as spec parameters do
    (a new type=int option would take '1_0' and '٢' again)."""
    import argparse

    from fastsim.cli import build_parser

    def actions(parser):
        for action in parser._actions:
            yield parser.prog, action
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    yield from actions(sub)
    loose = [(prog, a.dest) for prog, a in actions(build_parser()) if a.type in (int, float)]
    assert not loose



@pytest.mark.parametrize("argv,needle", [
    # float() read 1e-400 as 0: --sigma 1e-400 ran with no noise, without a word
    (["run", "--sigma", "1e-400"], "--sigma='1e-400' is below the smallest float64"),
    (["run", "--sigma", "-1e-400"], "--sigma='-1e-400' is below the smallest float64"),
    (["run", "--sigma", "1e-310"], "--sigma='1e-310' is below the smallest float64"),  # subnormal
    (["run", "--load", "1e400"], "--load='1e400' is beyond the largest float64"),
    (["run", "--ustar-hacking", "1e-400,0.5"], "'1e-400' is below the smallest float64"),
    (["run", "--policy", "stop_at:f=1e-400"], "f='1e-400' is below the smallest float64"),
    (["sweep", "s.toml", "--out", "o", "--dask-timeout", "1e999"], "--dask-timeout='1e999' "
     "is beyond the largest float64"),
    (["costaware", "subset", "--gammas", "0,1e-320"], "'1e-320' is below the smallest float64"),
])
def test_a_number_float64_cannot_hold_is_refused_not_rounded(argv, needle, capsys, tmp_path,
                                                             monkeypatch):
    from conftest import one_line

    monkeypatch.chdir(tmp_path)
    one_line(capsys, argv, needle)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("text", ["0", "0.0", "-0", ".0", "0e-999", "-0.000e5",
                                  "2.2250738585072014e-308", "1.7976931348623157e308"])
def test_text_that_means_0_or_a_normal_float64_is_read(text):
    from fastsim.values import number_text

    assert number_text(text) == float(text)


@pytest.mark.parametrize("command", [["sweep"], ["costaware", "sweep"]])
@pytest.mark.parametrize("value,needle", [
    # tomllib reads floats with float(): sigma = 1e-400 ran a sweep with no noise
    ("1e-400", "s.toml:4: '1e-400' is below the smallest float64"),
    ("-1_0e-400", "s.toml:4: '-1_0e-400' is below the smallest float64"),
    ("1e400", "s.toml:4: '1e400' is beyond the largest float64"),
])
def test_a_sweep_file_float_float64_cannot_hold_names_its_line(command, value, needle, capsys,
                                                               tmp_path, monkeypatch):
    from conftest import one_line

    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.toml").write_text(f"clusters = 2\n# sigma = {value}\n[base]\n"
                                     f"sigma = {value}\n")
    one_line(capsys, [*command, "s.toml", "--out", "o"], needle)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("argv,line", [
    # said "axes.lam=true must be a non-empty list", where fastsim sweep says what is allowed
    (["costaware", "sweep", "{dir}/bad.toml", "--out", "{dir}/o"], "fastsim costaware sweep: error: "
     "bad.toml: axes.lam=true is invalid; allowed: a non-empty list of values, as lam = "
     "[true] (or lam = true under [base]: every cell's)"),
    # a value outside the choices said "is not allowed" (a config's field) or "invalid
    # choice: 'x' (choose from 'a', 'b')" (argparse's choices)
    (["costaware", "ratios", "--kind", "x"], "fastsim costaware ratios: error: --kind=x is "
     "invalid; allowed: least_squares, logistic"),
    (["sweep", "{dir}/bad.toml", "--out", "{dir}/o", "--backend", "x"], "fastsim sweep: error: "
     "--backend=x is invalid; allowed: local, dask (see fastsim sweep --help)"),
    (["traces", "toy"], "fastsim traces: error: kind 'toy' is invalid; allowed: toy-rlhf, "
     "compare-sim, fit-curves (see fastsim traces --help)"),
    # said "--gammas=0.1,1.50 must be a fraction of mean(G) ...: at most 0.999999999"
    (["costaware", "subset", "--gammas", "0.1,1.50"], "fastsim costaware subset: error: "
     "--gammas=0.1,1.50 is invalid; allowed: a fraction of mean(G) from 0 to 0.999999999 (1 allows dropping every "
     "sample, leaving none to run SGD on, and so does one within 1e-9 of 1, by the budget's "
     "slack)"),
    # said "--steps=0: must be an integer >= 1"
    (["traces", "toy-rlhf", "--steps", "0", "--out", "{dir}/t"], "fastsim traces toy-rlhf: "
     "error: --steps=0 is invalid; allowed: an integer from 1 to 1000000"),
    # said "[base] must be a table of field = value", where fastsim costaware sweep says this
    (["sweep", "{dir}/base.toml", "--out", "{dir}/o"], "fastsim sweep: error: {dir}/base.toml: base=3 "
     "is invalid; allowed: a table ([base] with field = value lines)"),
])
def test_a_refusal_reads_name_is_invalid_allowed(argv, line, capsys, tmp_path):
    """Every refusal a user meets is one line: the option or field as typed, "is invalid",
    then what is allowed, as fastsim run's are; nothing is written."""
    (tmp_path / "bad.toml").write_text('experiment = "sgd"\n[axes]\nlam = true\n')
    (tmp_path / "base.toml").write_text('base = 3\n')
    try:
        code = main([a.format(dir=tmp_path) for a in argv])
    except SystemExit as exc:  # argparse's refusals exit from the parser
        code = exc.code
    assert code == 2
    assert capsys.readouterr().err.splitlines() == [line.format(dir=tmp_path)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.toml", "base.toml"]


# a refusal's text as it was worded before the one-line form: "x must be ...", "... must
# have ...", "x is not allowed; allowed: ..." (the form is "x is invalid; allowed: ...")
_OLD_WORDING = re.compile(r"\bmust (be|have)\b|\bis not allowed;")
_REFUSALS = {"ConfigError", "_fail", "ArgumentTypeError", "ArgumentError"}


def _refusal_texts(root):
    """(file:line, text) of every refusal fastsim's source builds: the string parts of the
    arguments of each call of ``_REFUSALS`` (an f-string's literal parts in order)."""
    import ast

    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", getattr(node.func, "attr", None))
            if name in _REFUSALS:
                yield (f"{path.relative_to(root.parent)}:{node.lineno}",
                       "".join(n.value for a in node.args for n in ast.walk(a)
                               if isinstance(n, ast.Constant) and isinstance(n.value, str)))


def test_no_refusal_in_the_source_says_must_be():
    """Every refusal reads "NAME=VALUE is invalid; allowed: ...": the last ones that said
    "must be" (costaware, traces toy-rlhf, a sweep file's [base]) or "is not allowed;"
    (costaware's choices) were found one command at a time."""
    from pathlib import Path

    import fastsim

    texts = list(_refusal_texts(Path(fastsim.__file__).parent))
    assert len(texts) > 300  # the scan sees the refusals (ConfigError is raised ~700 times)
    old = [f"{where}: {text[:80]}" for where, text in texts if _OLD_WORDING.search(text)]
    assert not old, "\n".join(old)


def test_tiresias_takes_at_most_100_thresholds(tmp_path, capsys):
    """Each threshold is a queue and a scheduling point per job crossing it: 20,000 made a
    run 20 times slower, and a sweep file's million thresholds took minutes to validate (a
    conversion per value in every config, then a regular expression of the whole list to
    echo it) before running.  More than 100 are refused, at once."""
    import numpy as np
    from conftest import one_line

    hundred = tuple(float(x) for x in range(1, 101))
    assert SchedulerConfig(name="tiresias", thresholds_gpu_h=np.arange(1, 101)).thresholds_gpu_h \
        == hundred
    with pytest.raises(ConfigError, match=r"^thresholds_gpu_h=\(1, 2, .* 101\) is invalid; "
                       r"allowed: increasing positive numbers, at most 100 \(GPU-hours\)$"):
        SchedulerConfig(name="tiresias", thresholds_gpu_h=tuple(range(1, 102)))
    spec = "/".join(str(x) for x in range(1, 102))
    one_line(capsys, ["run", "--scheduler", f"tiresias:thresholds={spec}"],
             "/101 is invalid; allowed: increasing positive numbers A/B/..., at most 100")
    many = ", ".join(str(x) for x in range(1, 100_001))
    f = tmp_path / "many.toml"
    f.write_text(f'clusters = 2\n[base]\nscheduler = "tiresias"\nthresholds_gpu_h = [{many}]\n'
                 '[axes]\npolicy = ["none"]\n')
    one_line(capsys, ["sweep", str(f), "--out", str(tmp_path / "o")],
             "99999, 100000] is invalid; allowed: increasing positive numbers, at most 100")
    assert not (tmp_path / "o").exists()


def test_lists_of_allowed_values_read_as_words_not_python_lists(tmp_path):
    """A cost-aware sweep's unknown key, a GRPO run's arms and a config dict's unknown
    field listed what is allowed as a Python list ("['axes', 'base', ...]")."""
    from fastsim.config import SimConfig
    from fastsim.costaware import GRPOConfig, load_costaware_sweep

    p = tmp_path / "ca.toml"
    p.write_text('name = "ca"\nexperiment = "sgd"\nreplicatoins = 2\n')
    with pytest.raises(ConfigError, match=r"unknown key 'replicatoins'; allowed: axes, base, "
                                          r"experiment, gamma_fracs, name, replications, seed$"):
        load_costaware_sweep(p)
    with pytest.raises(ConfigError, match=r"allowed: distinct arms from uniform, cost_aware, "
                                          r"cost_only, advantage_only, nonzero_uniform, "
                                          r"starting with uniform"):
        GRPOConfig(arms=["cost_aware"])
    with pytest.raises(ConfigError, match=r"field 'gpu' is unknown; allowed: [a-z_]+, [a-z_]+"):
        SimConfig.from_dict({"workload": {"gpu": 8}})
