"""fastsim costaware ACTION: cost-aware learning from the command line.

Actions: ratios (predicted J(p)/J(p*)), sgd (simulated cost to reach eps), subset
(greedy vs exact knapsack and the cost/bias trade), grpo (the toy GRPO experiment),
trl-gradnorm (|A| vs per-sample gradient norms in TRL; needs fastsim[trl]), sweep FILE
--out DIR (a sweeps/costaware_*.toml file) and figures DIR.  The options mirror the
fields of the config dataclasses, which validate them: a bad value gets one line naming
the option and what is allowed, and so does an option the run would not read
(--cost-alpha without --cost-dist pareto).
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time
from dataclasses import MISSING, fields
from pathlib import Path
from typing import TYPE_CHECKING

from fastsim.errors import ConfigError
from fastsim.values import (as_typed, file_path, integer_option, kept_as_typed, number_option,
                            read_number, read_numbers)

# The experiments' modules (numba, polars) are imported by the functions that run them:
# the parser, --help and usage errors need none of them.  (The docstring above is
# fastsim costaware --help's text.)

if TYPE_CHECKING:  # annotations only
    import polars as pl

# transformers' set_seed (numpy's legacy seeding) takes 0 to 2^32-1
TRL_MAX_SEED = 2**32 - 1
# trl-gradnorm's work on CPU: its default (6 batches a measurement, 10 steps) takes under
# a minute (docs/costaware.md), each batch a few seconds (a gradient per rollout) and each
# step about one; these are hours, and 10**12 was taken as a run that never ends
TRL_MAX_BATCHES = 1_000
TRL_MAX_TRAIN_STEPS = 10_000
FIGURE_SCRIPTS = ("costaware_cost_vs_heterogeneity", "costaware_ratios", "costaware_grpo")
FIGURE_INPUTS = "the tables `fastsim costaware sweep`, `sgd --out` or `grpo --out` write"
# subsets the greedy-vs-exact check of `costaware subset` may enumerate: 1,024 instances of
# n = 22, about 3 minutes
MAX_CHECK_SUBSETS = 2**32


# Meaning, unit and allowed values of every option generated from a config field; the
# dataclasses' validators enforce the same ranges.
FIELD_HELP = {
    # ProblemConfig
    "kind": "finite-sum problem: least_squares or logistic",
    "n": "samples in the finite sum, 2 to 1,000,000 (n*d at most 50,000,000)",
    "d": "dimension, 1 to 10,000; solving the instance costs O(n d^2 + d^3) a Newton step "
         "(least squares: one, logistic: up to 100, fewer once it stalls at its round-off "
         "floor), seconds at d = 1,000 and minutes to hours at 10,000, shown on a progress "
         "bar",
    "reg": "L2 regularisation (the strong-convexity floor), 0 to 1e6; above 0 for "
           "logistic, and for least squares with n < d",
    "scale_sigma": "log-normal sigma of row norms (spread of the gradient bounds G_i), 0 to 5",
    "noise": "target noise (least squares) or label-flip noise (logistic), 0 to 1e6",
    "cost_dist": "distribution of per-sample costs c_i: lognormal or pareto",
    "cost_sigma": "log-normal sigma of the costs (cost heterogeneity), 0 to 5 (with "
                  "--cost-dist lognormal only)",
    "cost_alpha": "Pareto tail index of the costs, in (0.5, 100] (with --cost-dist pareto "
                  "only)",
    "cost_corr": "correlation of log cost with log row norm, -1 to 1",
    "radius_factor": "projection-ball radius over |x*|, > 1",
    "seed": "seed of the drawn instance, >= 0",
    "instance": "instance number under that seed, >= 0",
    # SGDConfig
    "step": "step-size rule: strongly_convex (eta_t = 2/(mu(t+2))) or convex "
            "(eta_t = 2R/sqrt(S(p)(t+1)))",
    "eps": "target relative optimality gap, in (0, 1]",
    "max_steps": "step cap per replication (a run that misses eps is censored: no cost, "
                 "counted as above the cap in the median), 1 to 1,000,000,000 (roughly 10^7 "
                 "steps a second a core at d = 8)",
    "replications": "independent SGD runs per strategy, 2 to 1,000,000",
    "lam": "weight of the uniform distribution mixed into every strategy, 0 to 1",
    # GRPOConfig
    "seeds": "independent GRPO runs per arm, 2 to 100,000",
    "n_train": "training prompts, 1 to 1,000,000 ((n_train+n_test)*n_traces*n_features "
               "at most 50,000,000)",
    "n_test": "held-out prompts, 1 to 1,000,000",
    "n_traces": "candidate responses per prompt, 2 to 1024",
    "n_features": "policy features per response, 2 to 1024",
    "median_len": "median response length, tokens, 1 to 1,000,000",
    "len_sigma": "log-normal sigma of response lengths, 0 to 3",
    "length_effect": "effect of log length on correctness (logit), -10 to 10",
    "difficulty_mean": "mean prompt difficulty (logit), -10 to 10",
    "difficulty_sd": "spread of prompt difficulty (logit), 0 to 10",
    "noise_sd": "noise of the correctness logit, 0 to 10",
    "n_steps": "training steps of the uniform arm, 1 to 1,000,000",
    "cost_aware_step_factor": "cost-aware arm's steps over the uniform arm's, 1 to 100",
    "prompts": "prompts per step, >= 1 (prompts*group at most 10,000,000)",
    "group": "responses sampled per prompt (the GRPO group), 2 to 4096",
    "batch": "mini-batch of responses per gradient step, 1 to prompts*group",
    "lr": "learning rate, > 0 and at most 1,000,000",
    "floor": "smallest |A| a response is scored with (q ∝ max(|A|, floor) / sqrt(tokens)), "
             "0 to 1,000,000",
    "eval_every": "steps between held-out evaluations, 1 to n_steps, dividing every arm's "
                  "steps (n_steps, and n_steps x the step factor, rounded)",
    "prompt_median_len": "median prompt length, tokens, 0 to 1,000,000; every response to "
                         "a prompt pays its prompt's tokens too (0: cost is response tokens "
                         "only)",
    "prompt_len_sigma": "log-normal sigma of prompt lengths, 0 to 3 (with "
                        "--prompt-median-len > 0 only)",
}


def _add_fields(parser, cls, skip=()):
    group = parser.add_argument_group(f"{cls.__name__} fields")
    for f in fields(cls):
        if f.name in skip or f.default is MISSING or isinstance(f.default, tuple):
            continue
        kind = type(f.default)
        meaning = FIELD_HELP.get(f.name, f.name.replace("_", " "))
        # a number is read by _build, whose refusal echoes the text
        number = {int: integer_option, float: number_option}.get(kind)
        group.add_argument("--" + f.name.replace("_", "-"), dest=f.name, default=None,
                           type=kind if number is None else kept_as_typed(number),
                           metavar=kind.__name__.upper(),
                           help=f"{meaning} (default: {f.default})")


def _floats(text: str, option: str, what: str) -> list[float]:
    """A comma-separated list of numbers, or one ``ConfigError`` naming the option."""
    # -0 as 0: one row, one label
    values = [v + 0.0 for v in read_numbers(text, f"--{option}", allowed=f"{what}, "
                                            "comma-separated (e.g. 0,0.1,0.5)")]
    if len(set(values)) != len(values):  # each value is a row of the table: two would be one
        raise ConfigError(f"--{option}={text!r} is invalid; allowed: {what}, each value once")
    return values


def _build(cls, args, **extra):
    """``cls`` of the options given; a refusal names the options and the values as typed
    (``--eps=0 is invalid; ...``; the dataclass's own says ``eps=0.0``): ``_as_options``."""
    kw, typed = {}, {}
    for f in fields(cls):
        value = getattr(args, f.name, None)
        if value is None:
            continue
        typed[f.name] = value
        if type(f.default) in (int, float):
            value = read_number(value, _option(f.name), type(f.default) is int)
        kw[f.name] = value
    kw.update(extra)
    try:
        config = cls(**kw)
    except ConfigError as exc:
        raise ConfigError(_as_options(str(exc), cls, kw, typed, extra)) from None
    for name, (needs, value) in getattr(config, "unused", dict)().items():
        if name in typed:  # --cost-alpha 3 ran lognormal costs, as if it had not been typed
            raise ConfigError(f"{_option(name)} is given but would not be used (it applies to "
                              f"{_option(needs)} {value}); allowed: {_option(name)} with "
                              f"{_option(needs)} {value}")
    return config


def _as_options(msg: str, cls, kw: dict, typed: dict, extra: dict) -> str:
    """A refusal of ``cls`` in the words of the command line: each field of an option it
    echoes as ``name=value`` (``reg=0.0``, ``kind='logistic'``), first or across fields, as
    that option with the text typed (``--reg=0``, ``--kind=logistic``, as ``as_typed`` says
    one option's), or its default's (``--d=8``); a default refused first says so, as
    ``fastsim run``'s do.  A field another option gives (``extra``: ``--sgd-seed``'s seed)
    is left to it."""
    head = msg.partition("=")[0]
    options = [f.name for f in fields(cls) if f.name not in extra  # given by another option
               and f.default is not MISSING and not isinstance(f.default, tuple)]
    # a product of fields (prompts*group, (n_train+n_test)*n_traces) as the options' product
    msg = _PRODUCT.sub(lambda m: _product_of_options(m.group(), options), msg)
    for f in fields(cls):
        if f.name not in options:
            continue  # no option of its own
        value = kw.get(f.name, f.default)
        text = typed.get(f.name, value if isinstance(value, str) else repr(value))
        echo = re.compile(rf"(?<![\w*+.-]){re.escape(f.name)}={re.escape(repr(value))}"
                          r"(?=[\s:;,)]|$)")
        msg = echo.sub(lambda _, text=text, f=f: f"{_option(f.name)}={text}", msg)
        if f.name == head and f.name not in typed and msg.startswith(_option(f.name) + "="):
            msg += f" (the default of {_option(f.name)}, which the options given rule out)"
    return msg


_PRODUCT = re.compile(r"(?<![\w-])[\w()+]+(\*[\w()+]+)+(?![\w-])")


def _product_of_options(product: str, options: list[str]) -> str:
    """``prompts*group`` as ``--prompts x --group``: each field of an option said as that
    option, ``*`` as `` x `` and ``+`` as `` + `` between them (``(--n-train + --n-test) x
    --n-traces x ...``); a name of no option (``n_evals``) stays as it is."""
    said = re.sub(r"\w+", lambda m: _option(m.group()) if m.group() in options else m.group(),
                  product)
    return said.replace("*", " x ").replace("+", " + ")


def _option(name: str) -> str:
    return "--" + name.replace("_", "-")


def _sgd_config(args):
    """SGDConfig of the options; its seed is --sgd-seed's, and an error says so (it said
    seed=..., the name of --seed, the instance's seed)."""
    from fastsim.costaware.sgd import SGDConfig

    try:
        return _build(SGDConfig, args, seed=args.sgd_seed)
    except ConfigError as exc:
        if str(exc).startswith("seed="):
            raise ConfigError(f"--sgd-{exc}") from None
        raise


def _show(df: pl.DataFrame, title: str, exact: tuple[str, ...] = ()):
    """``df`` under ``title``, its numbers to 4 decimals but for the ``exact`` columns, a
    value the user gave, in full: a budget of 0.999999999 printed as 1.0000, a budget the
    subset command refuses (each is below 1)."""
    import polars as pl

    print(f"\n{title}")
    df = df.with_columns(pl.col(c).cast(pl.String) for c in exact)  # the shortest exact text
    with pl.Config(tbl_rows=200, tbl_cols=30, tbl_width_chars=200, float_precision=4,
                   tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True):
        print(df)


# the files each command writes into --out, checked before any work
OUTPUTS = {
    "cmd_ratios": ("costaware_ratios.parquet",),
    "cmd_sgd": ("costaware_sgd.summary.parquet", "costaware_sgd.runs.parquet"),
    "cmd_subset": ("costaware_subset.summary.parquet",),
    "cmd_grpo": ("costaware_grpo.summary.parquet", "costaware_grpo.curves.parquet",
                 "costaware_grpo.runs.parquet"),
    "cmd_trl_gradnorm": ("costaware_trl_gradnorm.parquet",),
}


def _check_outputs(out: Path, cmd_name: str) -> Path:
    """``out`` and the files ``cmd_name`` will write there, before any work: a directory,
    a socket or an unwritable place at one of those names was found only after the run.
    Returns the directory they are written within (``io.check_output_dir``)."""
    from fastsim.io import check_output, check_output_dir

    within = check_output_dir(out)
    for name in OUTPUTS.get(cmd_name, ()):
        check_output(out / name, "--out", allowed=(".parquet",))
    return within


def _out_checked(cmd):
    """``cmd`` with a given ``--out`` checked first (``_check_outputs``), the directory
    its files are written within kept as ``args.out_within``."""
    def run(args):
        args.out_within = None
        if getattr(args, "out", None) is not None:
            args.out_within = _check_outputs(Path(args.out), cmd.__name__)
        return cmd(args)
    run.__name__ = cmd.__name__
    return run


def _write(out, tables: dict[str, pl.DataFrame], within: Path | None):
    """Write every ``{name: table}`` into ``out`` or none of them (``io.write_all``), so a
    failure on the last file leaves no summary beside another run's records; ``within``:
    the directory ``_check_outputs`` found before the run, never made again."""
    from fastsim.io import table_writer, write_all

    if out is None:
        return
    paths = {name: Path(out) / name for name in tables}
    write_all(((paths[name], table_writer(df, paths[name])) for name, df in tables.items()),
              within=within)
    for path in paths.values():
        print(f"wrote {path}")


def _add_no_progress(p: argparse.ArgumentParser) -> None:
    # as fastsim sweep's: a run logged to a file is otherwise full of bar redraws
    p.add_argument("--no-progress", dest="progress", action="store_false",
                   help="no progress bar")


RATIO_KERNELS = ("costaware_sgd.make_problem_nb", "costaware_sgd.newton_step_nb",
                 "costaware_sgd.newton_done_nb",
                 "costaware.optimal_j_nb")


def cmd_ratios(args):
    from fastsim.compile_notice import compile_notice, kernels_cached
    from fastsim.costaware.sampling import ratio_table
    from fastsim.costaware.sgd import ProblemConfig, make_problem

    lams = _floats(args.lams, "lams", "uniform mixing weights in [0, 1]")
    if any(not 0 <= v <= 1 for v in lams):
        raise ConfigError(f"--lams={args.lams!r} is invalid; allowed: weights in [0, 1]")
    config = _build(ProblemConfig, args)  # a bad value is refused before the notice
    # 8-10 s of first compilation in silence before the notice; compiled on a tiny
    # instance, so that the spinner and the bar of a large instance's solve do not share
    # the terminal's line
    with compile_notice(cached=kernels_cached(*RATIO_KERNELS), what="the cost-aware kernels",
                        seconds="5-20"):
        tiny = make_problem(ProblemConfig(kind=config.kind, n=2, d=1))
        ratio_table(tiny.G, tiny.c, lams=lams)
    problem = make_problem(config, progress=args.progress)
    table = ratio_table(problem.G, problem.c, lams=lams)
    _show(table, f"predicted cost factor J(p) = S(p) C(p) over J(p*)  [{problem.config}]")
    _write(args.out, {"costaware_ratios.parquet": table}, args.out_within)


def cmd_sgd(args):
    import polars as pl

    from fastsim.costaware.sgd import (ProblemConfig, config_columns, make_problem, run_sgd,
                                       summarize_sgd)
    from fastsim.stats import quantile_ci_min_n

    problem_cfg = _build(ProblemConfig, args)
    sgd_cfg = _sgd_config(args)
    t0 = time.perf_counter()
    problem = make_problem(problem_cfg, progress=args.progress)
    runs = run_sgd(problem, sgd_cfg, progress=args.progress)
    # the sweep's schema: rows tagged with the config, so `costaware figures` reads either
    tags = {k: pl.lit(v) for k, v in config_columns(problem_cfg, sgd_cfg).items()}
    summary = summarize_sgd(runs, problem, sgd_cfg.lam).with_columns(**tags)
    runs = runs.with_columns(**tags)
    # with too few runs no order statistic bounds the median, capped or not
    need = quantile_ci_min_n()
    why_inf = ("inf: the cap censors the bound" if sgd_cfg.replications >= need else
               f"0 to inf: too few runs for a 95% order-statistic interval, which needs at "
               f"least {need}, and {sgd_cfg.replications} ran")
    _show(summary.select("strategy", "n", "reached_frac", "reached_lo", "reached_hi",
                         "cost_units_median", "cost_units_median_lo", "cost_units_median_hi",
                         "predicted_ratio", "simulated_ratio", "simulated_ratio_lo",
                         "simulated_ratio_hi"),
          f"cost to reach eps={sgd_cfg.eps} ({sgd_cfg.step}, {sgd_cfg.replications} "
          f"replications, at most {sgd_cfg.max_steps} steps): share reaching it (exact "
          "binomial CI) and median cost with a distribution-free 95% CI, a run that missed "
          "eps counted at what it spent by the cap for the lower bound, as +inf for the "
          f"median and the upper bound ({why_inf}; NaN: the median itself); ratios over "
          "optimal sampling, NaN unless every run reached eps")
    print(f"elapsed {time.perf_counter() - t0:.1f} s")
    _write(args.out, {"costaware_sgd.summary.parquet": summary,
                      "costaware_sgd.runs.parquet": runs}, args.out_within)


def cmd_subset(args):
    from fastsim.costaware.sgd import ProblemConfig
    from fastsim.costaware.subset import check_gamma_frac, greedy_vs_exact
    from fastsim.costaware.sweep import subset_experiment

    gammas = _floats(args.gammas, "gammas", "bias budgets as fractions of mean(G), >= 0")
    for g in gammas:  # refused as typed: --gammas=0.1,1.50, not Python's 1.5
        try:
            check_gamma_frac(g, "--gammas")
        except ConfigError as exc:
            raise ConfigError(as_typed(str(exc), "--gammas", g, "--gammas", args.gammas)
                              or str(exc)) from None
    _build(ProblemConfig, args), _sgd_config(args)  # validate first
    from fastsim.costaware.subset import EXACT_MAX_N  # the check runs the exact search

    for option, hi in (("check_instances", 100_000), ("check_n", EXACT_MAX_N),
                       ("check_seed", 2**63 - 1)):
        lo = 0 if option == "check_seed" else 1
        if not lo <= getattr(args, option) <= hi:
            raise ConfigError(f"--{option.replace('_', '-')}={getattr(args, option)} is "
                              f"invalid; allowed: an integer from {lo} to {hi:,}")
    # the exact search enumerates 2^n subsets per instance (about 0.2 s at n = 22): each
    # option in range, their product still ran for hours
    subsets = args.check_instances * 2**args.check_n
    if subsets > MAX_CHECK_SUBSETS:
        raise ConfigError(f"--check-instances={args.check_instances} with "
                          f"--check-n={args.check_n} enumerate {subsets:,} subsets; allowed: "
                          f"check-instances x 2^check-n at most {MAX_CHECK_SUBSETS:,} (e.g. "
                          f"{MAX_CHECK_SUBSETS >> EXACT_MAX_N:,} instances of n={EXACT_MAX_N})")
    t0 = time.perf_counter()
    # greedy vs exact on small random instances: the gap must stay within the LP bound
    check = greedy_vs_exact(args.check_instances, args.check_n, args.check_seed)
    opt, gap, worst, viol = (check[k] for k in ("greedy_optimal", "mean_gap", "max_gap",
                                                "violations"))
    print(f"greedy vs exact on n = {args.check_instances} instances of {args.check_n} samples "
          f"(95% CIs over instances): greedy optimal in {opt.fmt(100, 1, '%')}, mean gap "
          f"{gap.fmt(1, 4)} of W(all), max gap {worst.mean:.4f} (its bound there "
          f"{worst.hi:.4f}); bound or budget violations: {round(viol.mean * viol.n)} "
          f"({viol.fmt(100, 1, '%')})")
    report, _ = subset_experiment(_build(ProblemConfig, args),
                                  _sgd_config(args), gammas,
                                  progress=args.progress)
    _show(report, "greedy subsets: predicted saving 1 - J(K)/J(all), bias bound, bias paid "
          "(excess loss of the subset optimum), simulated cost ratio vs optimal SGD on all",
          exact=("gamma_frac",))
    print(f"elapsed {time.perf_counter() - t0:.1f} s")
    _write(args.out, {"costaware_subset.summary.parquet": report}, args.out_within)


def cmd_grpo(args):
    from fastsim.costaware.experiment import GRPOConfig, curve_summary, run_grpo, summarize_grpo

    cfg = _build(GRPOConfig, args)
    t0 = time.perf_counter()
    curves = run_grpo(cfg, progress=args.progress)
    summary = summarize_grpo(curves)
    _show(summary, f"GRPO, uniform vs cost-aware mini-batches, {cfg.seeds} seeds "
          f"(tokens = summed lengths of mini-batch responses in gradient steps)")
    print(f"elapsed {time.perf_counter() - t0:.1f} s")
    _write(args.out, {"costaware_grpo.summary.parquet": summary,
                      "costaware_grpo.curves.parquet": curve_summary(curves),
                      "costaware_grpo.runs.parquet": curves}, args.out_within)


def cmd_trl_gradnorm(args):
    import importlib.util

    for option, value, lo, hi in (("batches", args.batches, 1, TRL_MAX_BATCHES),
                                  ("train-steps", args.train_steps, 0, TRL_MAX_TRAIN_STEPS)):
        if not lo <= value <= hi:
            raise ConfigError(f"--{option}={value} is invalid; allowed: an integer from {lo} "
                              f"to {hi:,} (hours of work on CPU; a typo must not start an "
                              "endless run)")
    if args.seed < 0:
        raise ConfigError(f"--seed={args.seed} is invalid; allowed: an integer >= 0")
    if args.seed > TRL_MAX_SEED:  # transformers' set_seed raised it inside the Trainer
        raise ConfigError(f"--seed={args.seed} is invalid; allowed: an integer from 0 to "
                          f"{TRL_MAX_SEED:,} (the seeds transformers takes)")
    missing = [m for m in ("trl", "datasets", "torch") if importlib.util.find_spec(m) is None]
    if missing:
        raise ConfigError(f"trl-gradnorm needs {', '.join(missing)}; install the extra: "
                          "pip install 'fastsim[trl]'")
    out = Path(args.out) if args.out else Path("results") / "costaware_trl"
    if args.out is None:  # the default directory too, before minutes of training
        args.out_within = _check_outputs(out, "cmd_trl_gradnorm")
    import polars as pl

    from fastsim.costaware.trl_toy import (PROMPTS, gradnorm_correlations, gradnorm_study,
                                           read_prompts, toy_trainer)
    from fastsim.io import check_regular

    prompts = Path(args.prompts) if args.prompts else PROMPTS
    check_regular(prompts, "a JSONL prompt set", "--prompts")
    read_prompts(prompts)  # a malformed prompt set is refused before any model is built
    args.prompts = prompts

    t0 = time.perf_counter()
    frames = []
    for phase, steps in (("init", 0), ("trained", args.train_steps)):
        trainer = toy_trainer(args.prompts, out / f"run_{phase}", steps=max(steps, 1),
                              seed=args.seed)
        if steps:
            trainer.train()
        frames.append(gradnorm_study(trainer, args.batches).with_columns(phase=pl.lit(phase)))
        _show(gradnorm_correlations(frames[-1]), f"{phase} ({steps} GRPO steps): correlations "
              f"over {frames[-1].height} rollouts (95% intervals over prompt groups, n groups)")
    rollouts = pl.concat(frames)
    print(f"elapsed {time.perf_counter() - t0:.1f} s")
    _write(out, {"costaware_trl_gradnorm.parquet": rollouts}, args.out_within)


def cmd_sweep(args):
    from fastsim.costaware.sweep import load_costaware_sweep, write_costaware_sweep

    t0 = time.perf_counter()
    from fastsim.resources import sweep_file

    path = sweep_file(args.file, prefix="costaware_")
    spec = load_costaware_sweep(path)
    for line in spec.notes:
        print(f"note: {line}", file=sys.stderr)
    paths = write_costaware_sweep(spec, path, Path(args.out), args.progress)
    for p in paths.values():
        print(f"wrote {p}")
    print(f"elapsed {time.perf_counter() - t0:.1f} s")


FIGURES_ALLOWED = "allowed: the --out of fastsim costaware sweep, sgd or grpo"


def cmd_figures(args):
    from fastsim.sweep.figures import check_figure_tables, figure_tables, load_script

    results = Path(args.dir)
    if not os.path.isdir(results):  # os.path's: False, not OSError, for a too-long name
        # a device or a file: "does not exist" sent the user looking for a typo
        why = "is not a directory" if os.path.lexists(results) else "does not exist"
        raise ConfigError(f"figures: results directory {str(results)!r} {why}; {FIGURES_ALLOWED}")
    from fastsim.io import check_tables_regular

    check_tables_regular(results, "the tables `fastsim costaware sweep` writes")
    out = Path(args.out) if args.out else results / "figures"
    from fastsim.sweep.store import hold_sweep_dirs

    held = hold_sweep_dirs(out)  # noqa: F841 (a sweep directory is written by its owner only)
    tables = figure_tables(FIGURE_SCRIPTS)
    if not any((results / table).is_file() for table in tables):  # before OUT is made
        # the tables of a sweep the figures do not draw (costaware_ablation's): "holds no
        # cost-aware results; allowed: the --out of fastsim costaware sweep" was untrue
        other = sorted(p.name for suffix in ("summary", "curves")
                       for p in results.glob(f"*.{suffix}.parquet") if p.name not in tables)
        holds = f"; it holds {', '.join(other)}, which they do not draw" if other else ""
        names = " or ".join(f'name = "{t.split(".")[0]}"' for t in sorted(tables))
        raise ConfigError(f"{results} holds no table the cost-aware figures draw "
                          f"({', '.join(tables)}): nothing to draw{holds}; allowed: the --out "
                          f"of fastsim costaware sgd or grpo, or of costaware sweep of a file "
                          f"with {names}")
    check_figure_tables(results, tables, FIGURE_INPUTS)
    _check_written_values(results, tables)
    from fastsim.io import holding_directory, make_directory, unmade_on_failure

    n = 0
    with unmade_on_failure() as made:  # a drawing failed before its first figure
        made.append(make_directory(out))  # leaves no empty DIR behind
        with holding_directory(out):  # all of one drawing's figures, never some of two
            for name in FIGURE_SCRIPTS:
                for written in load_script(name).main(results, out):
                    print(f"wrote {written}")
                    n += 1
    print(f"{n} files written to {out}")


# columns the cost-aware writers always fill with a number (a ratio of two predicted J's,
# a share of runs); the others read by a figure hold NaN where no estimate exists
NEVER_NAN = ("predicted_ratio", "reached_frac")


def _check_written_values(results: Path, tables: dict[str, set]) -> None:
    """Values the cost-aware writers never write: an infinity in any column a figure reads
    (their bounds are cut at 0 and their ratios of positive costs are finite), NaN in
    ``NEVER_NAN``.  The tables carry no checksums (a sweep's summary does, ``fastsim
    figures``): a summary edited to inf or NaN ratios was drawn without a word."""
    from fastsim.io import read_parquet_table

    for table, columns in tables.items():
        path = results / table
        if not path.is_file():
            continue
        df = read_parquet_table(path, FIGURE_INPUTS)
        for c in sorted(c for c in columns if df.schema[c].is_float()):
            bad = ("inf" if df[c].is_infinite().any() else
                   "NaN" if c in NEVER_NAN and (df[c].is_nan().any() or df[c].null_count())
                   else None)
            if bad is not None:
                raise ConfigError(f"{path}: column {c} holds {bad}, which fastsim costaware "
                                  f"never writes there (an edited table?); allowed: {FIGURE_INPUTS}")


def register(subparsers):
    """Add ``costaware`` and its sub-subcommands to the ``fastsim`` parser."""
    top = subparsers.add_parser("costaware", help="cost-aware learning (arXiv 2604.28020)",
                                description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = top.add_subparsers(dest="costaware_command", metavar="ACTION")
    sub.required = True
    for add in (_register_ratios, _register_sgd, _register_subset, _register_grpo,
                _register_trl_gradnorm, _register_sweep, _register_figures):
        add(sub)


def _add_action(sub, name: str, help: str):
    """An action's parser, whose ``--help`` opens with the line the list of actions gives
    it (without one it showed the options alone, never what the action does)."""
    return sub.add_parser(name, help=help, description=help.replace("%%", "%"))


def _register_ratios(sub) -> None:
    from fastsim.costaware.configs import ProblemConfig

    p = _add_action(sub, "ratios", help="predicted J(p)/J(p*) of each strategy on one instance")
    _add_fields(p, ProblemConfig)
    p.add_argument("--lams", default="0,0.1,0.5", metavar="L,L,...",
                   help="weights of the uniform distribution mixed into each strategy, each "
                   "in [0, 1], comma-separated (default: 0,0.1,0.5)")
    p.add_argument("--out", metavar="DIR",
                   help="also write costaware_ratios.parquet into this directory (default: none, "
                   "printed only)")
    _add_no_progress(p)
    p.set_defaults(func=_out_checked(cmd_ratios))


def _register_sgd(sub) -> None:
    from fastsim.costaware.configs import ProblemConfig, SGDConfig

    p = _add_action(sub, "sgd", help="simulated cost to reach eps per strategy, with 95%% CIs")
    _add_fields(p, ProblemConfig)
    _add_fields(p, SGDConfig, skip=("seed",))
    p.add_argument("--sgd-seed", type=integer_option, default=1, metavar="INT",
                   help="seed of the SGD replications, >= 0 (default: 1)")
    p.add_argument("--out", metavar="DIR",
                   help="also write costaware_sgd.{summary,runs}.parquet into this directory, "
                   "in the schema of `fastsim costaware sweep` (`costaware figures DIR` reads it; "
                   "default: none, printed only)")
    _add_no_progress(p)
    p.set_defaults(func=_out_checked(cmd_sgd))


def _register_subset(sub) -> None:
    from fastsim.costaware.configs import EXACT_MAX_N, ProblemConfig, SGDConfig

    p = _add_action(sub, "subset", help="bias-budgeted subset selection: greedy vs exact, "
                                      "cost saved and bias paid")
    _add_fields(p, ProblemConfig)
    _add_fields(p, SGDConfig, skip=("seed",))
    p.add_argument("--sgd-seed", type=integer_option, default=1, metavar="INT",
                   help="seed of the SGD replications, >= 0 (default: 1)")
    p.add_argument("--gammas", default="0.01,0.02,0.05,0.1", metavar="G,G,...",
                   help="bias budgets as fractions of mean(G), each from 0 to below 1 (at most "
                   "0.999999999), comma-separated (default: 0.01,0.02,0.05,0.1)")
    p.add_argument("--check-instances", type=integer_option, default=200, metavar="INT",
                   help="random instances of the greedy-vs-exact check, 1 to 100,000, and "
                   "at most 2^32 / 2^check-n: 1,024 at n=22 (default: 200)")
    p.add_argument("--check-n", type=integer_option, default=14, metavar="INT",
                   help="samples per check instance (exact search is 2^n), 1 to "
                   f"{EXACT_MAX_N} (default: 14)")
    p.add_argument("--check-seed", type=integer_option, default=0, metavar="INT",
                   help="seed of the check instances, >= 0 (default: 0)")
    p.add_argument("--out", metavar="DIR",
                   help="also write costaware_subset.summary.parquet into this directory (default: "
                   "none, printed only)")
    _add_no_progress(p)
    p.set_defaults(func=_out_checked(cmd_subset))


def _register_grpo(sub) -> None:
    from fastsim.costaware.configs import GRPOConfig

    p = _add_action(sub, "grpo", help="toy GRPO: uniform vs cost-aware mini-batches over seeds")
    _add_fields(p, GRPOConfig)
    p.add_argument("--out", metavar="DIR",
                   help="also write costaware_grpo.{summary,curves,runs}.parquet into this "
                   "directory (default: none, printed only)")
    _add_no_progress(p)
    p.set_defaults(func=_out_checked(cmd_grpo))


def _register_trl_gradnorm(sub) -> None:
    p = _add_action(sub, "trl-gradnorm", help="|A| vs per-sample gradient norm of TRL's GRPO "
                                            "loss on a tiny random GPT-2 (needs fastsim[trl])")
    p.add_argument("--prompts", type=file_path, default=None, metavar="FILE",
                   help="JSONL prompt set, one {\"prompt\": \"say: LETTERS ...\"} per line, "
                   "characters from 'abcdefghsy:. ' only; a malformed line is refused "
                   "before any model is built "
                   "(default: the toy task's 32 prompts, shipped with fastsim)")
    p.add_argument("--batches", type=integer_option, default=6, metavar="N",
                   help="generation batches of 16 rollouts per measurement, 1 to "
                   f"{TRL_MAX_BATCHES:,} (hours on CPU) (default: 6)")
    p.add_argument("--train-steps", type=integer_option, default=10, metavar="N",
                   help="GRPO steps between the two measurements, 0 to "
                   f"{TRL_MAX_TRAIN_STEPS:,} (hours on CPU) (default: 10)")
    p.add_argument("--seed", type=integer_option, default=0, metavar="INT",
                   help="seed of the tiny model and of generation, 0 to 2^32-1 (default: 0)")
    p.add_argument("--out", metavar="DIR", help="directory for costaware_trl_gradnorm.parquet "
                   "and the trainers' run folders (default: results/costaware_trl)")
    p.set_defaults(func=_out_checked(cmd_trl_gradnorm))


def _register_sweep(sub) -> None:
    p = _add_action(sub, "sweep", help="run a cost-aware sweep file (costaware_sgd, "
                       "costaware_grpo, ...)")
    p.add_argument("file", type=file_path, help="a cost-aware sweep file (TOML with experiment "
                   "= sgd, subset or grpo), or the name of one shipped with fastsim: costaware_sgd, "
                   "costaware_pareto, costaware_subset, costaware_grpo, costaware_ablation")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="output directory (created): NAME.summary.parquet, NAME.runs.parquet "
                   "(and NAME.curves.parquet for grpo)")
    _add_no_progress(p)
    p.set_defaults(func=cmd_sweep)


def _register_figures(sub) -> None:
    p = _add_action(sub, "figures", help="draw figures from a results directory")
    p.add_argument("dir", help="results of fastsim costaware sweep, or of costaware sgd or "
                   "grpo with --out")
    p.add_argument("--out", metavar="DIR", help="figure directory (default: DIR/figures)")
    p.set_defaults(func=_out_checked(cmd_figures))
