"""``fastsim costaware ...``: cost-aware learning from the command line.

Sub-subcommands: ``ratios`` (predicted J(p)/J(p*)), ``sgd`` (simulated cost to eps),
``subset`` (greedy vs exact knapsack and the cost/bias trade), ``grpo`` (the toy GRPO
experiment), ``sweep FILE --out DIR`` and ``figures DIR``.  Options mirror the fields of
the config dataclasses, which validate them.
"""
from __future__ import annotations

import argparse
import time
from dataclasses import MISSING, fields
from pathlib import Path

import numpy as np
import polars as pl

from fastsim.errors import ConfigError
from fastsim.io import atomic_write_parquet

FIGURE_SCRIPTS = ("costaware_cost_vs_heterogeneity", "costaware_ratios", "costaware_grpo")


def _add_fields(parser, cls, skip=()):
    group = parser.add_argument_group(cls.__name__)
    for f in fields(cls):
        if f.name in skip or f.default is MISSING or isinstance(f.default, tuple):
            continue
        kind = type(f.default)
        group.add_argument("--" + f.name.replace("_", "-"), dest=f.name, type=kind, default=None,
                           help=f"default {f.default!r}")


def _build(cls, args, **extra):
    kw = {f.name: getattr(args, f.name) for f in fields(cls)
          if getattr(args, f.name, None) is not None}
    kw.update(extra)
    return cls(**kw)


def _show(df: pl.DataFrame, title: str):
    print(f"\n{title}")
    with pl.Config(tbl_rows=200, tbl_cols=30, tbl_width_chars=200, float_precision=4,
                   tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True):
        print(df)


def _write(df: pl.DataFrame, out, name: str):
    if out is None:
        return
    path = Path(out) / name
    atomic_write_parquet(df, path)
    print(f"wrote {path}")


def cmd_ratios(args):
    from fastsim.costaware.sampling import ratio_table
    from fastsim.costaware.sgd import ProblemConfig, make_problem

    problem = make_problem(_build(ProblemConfig, args))
    lams = [float(x) for x in args.lams.split(",")]
    table = ratio_table(problem.G, problem.c, lams=lams)
    _show(table, f"predicted cost factor J(p) = S(p) C(p) over J(p*)  [{problem.config}]")
    _write(table, args.out, "costaware_ratios.parquet")


def cmd_sgd(args):
    from fastsim.costaware.sgd import ProblemConfig, SGDConfig, make_problem, run_sgd, summarize_sgd

    problem_cfg = _build(ProblemConfig, args)
    sgd_cfg = _build(SGDConfig, args, seed=args.sgd_seed)
    t0 = time.perf_counter()
    problem = make_problem(problem_cfg)
    runs = run_sgd(problem, sgd_cfg)
    summary = summarize_sgd(runs, problem, sgd_cfg.lam)
    _show(summary.select("strategy", "reached_frac", "cost_units_mean", "cost_units_lo",
                         "cost_units_hi", "predicted_ratio", "simulated_ratio",
                         "simulated_ratio_lo", "simulated_ratio_hi"),
          f"cost to reach eps={sgd_cfg.eps} ({sgd_cfg.step}, {sgd_cfg.replications} "
          f"replications); ratios are over optimal sampling")
    print(f"elapsed {time.perf_counter() - t0:.1f} s")
    _write(summary, args.out, "costaware_sgd.summary.parquet")
    _write(runs, args.out, "costaware_sgd.runs.parquet")


def cmd_subset(args):
    from fastsim.costaware.sgd import ProblemConfig, SGDConfig
    from fastsim.costaware.subset import select_subset
    from fastsim.costaware.sweep import subset_experiment

    gammas = [float(x) for x in args.gammas.split(",")]
    t0 = time.perf_counter()
    # greedy vs exact on small random instances: the gap must stay within the LP bound
    rng = np.random.default_rng(args.check_seed)
    gaps, bounds, viol = [], [], 0
    for _ in range(args.check_instances):
        G = rng.lognormal(0.0, 1.0, args.check_n)
        c = rng.lognormal(0.0, 1.0, args.check_n)
        gamma = rng.uniform(0.0, 0.5) * G.mean()
        g = select_subset(G, c, gamma, "greedy")
        e = select_subset(G, c, gamma, "exact")
        gaps.append((g.w_kept - e.w_kept) / e.w_all)
        bounds.append(g.critical_value / e.w_all)
        viol += int(g.w_kept - e.w_kept > g.critical_value + 1e-9 or g.bias_bound > gamma + 1e-12)
    gaps = np.array(gaps)
    print(f"greedy vs exact on {args.check_instances} instances of n={args.check_n}: "
          f"greedy optimal in {np.mean(gaps < 1e-12):.1%}, mean gap {gaps.mean():.4f} of W(all), "
          f"max gap {gaps.max():.4f} (its bound there {bounds[int(gaps.argmax())]:.4f}); "
          f"bound or budget violations: {viol}")
    report, _ = subset_experiment(_build(ProblemConfig, args),
                                  _build(SGDConfig, args, seed=args.sgd_seed), gammas,
                                  progress=True)
    _show(report, "greedy subsets: predicted saving 1 - J(K)/J(all), bias bound, bias paid "
          "(excess loss of the subset optimum), simulated cost ratio vs optimal SGD on all")
    print(f"elapsed {time.perf_counter() - t0:.1f} s")
    _write(report, args.out, "costaware_subset.summary.parquet")


def cmd_grpo(args):
    from fastsim.costaware.experiment import GRPOConfig, curve_summary, run_grpo, summarize_grpo

    cfg = _build(GRPOConfig, args)
    t0 = time.perf_counter()
    curves = run_grpo(cfg)
    summary = summarize_grpo(curves)
    _show(summary, f"GRPO, uniform vs cost-aware mini-batches, {cfg.seeds} seeds "
          f"(tokens = summed lengths of mini-batch responses in gradient steps)")
    print(f"elapsed {time.perf_counter() - t0:.1f} s")
    _write(summary, args.out, "costaware_grpo.summary.parquet")
    _write(curve_summary(curves), args.out, "costaware_grpo.curves.parquet")
    _write(curves, args.out, "costaware_grpo.runs.parquet")


def cmd_trl_gradnorm(args):
    from fastsim.costaware.trl_toy import gradnorm_correlations, gradnorm_study, toy_trainer

    t0 = time.perf_counter()
    out = Path(args.out) if args.out else Path("results") / "costaware_trl"
    frames = []
    for phase, steps in (("init", 0), ("trained", args.train_steps)):
        trainer = toy_trainer(args.prompts, out / f"run_{phase}", steps=max(steps, 1),
                              seed=args.seed)
        if steps:
            trainer.train()
        frames.append(gradnorm_study(trainer, args.batches).with_columns(phase=pl.lit(phase)))
        _show(gradnorm_correlations(frames[-1]), f"{phase} ({steps} GRPO steps): correlations "
              f"over {frames[-1].height} rollouts (95% Fisher-z intervals)")
    rollouts = pl.concat(frames)
    print(f"elapsed {time.perf_counter() - t0:.1f} s")
    _write(rollouts, out, "costaware_trl_gradnorm.parquet")


def cmd_sweep(args):
    from fastsim.costaware.sweep import run_sweep

    t0 = time.perf_counter()
    paths = run_sweep(args.file, args.out)
    for p in paths.values():
        print(f"wrote {p}")
    print(f"elapsed {time.perf_counter() - t0:.1f} s")


def figures_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "figures"


def cmd_figures(args):
    from fastsim.sweep.figures import load_script

    results = Path(args.dir)
    if not results.is_dir():
        raise ConfigError(f"figures: results directory {str(results)!r} does not exist")
    out = Path(args.out) if args.out else results / "figures"
    for name in FIGURE_SCRIPTS:
        for written in load_script(name, figures_dir()).main(results, out):
            print(f"wrote {written}")


def register(subparsers):
    """Add ``costaware`` and its sub-subcommands to the ``fastsim`` parser."""
    from fastsim.costaware.experiment import GRPOConfig
    from fastsim.costaware.sgd import ProblemConfig, SGDConfig

    top = subparsers.add_parser("costaware", help="cost-aware learning (arXiv 2604.28020)",
                                description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = top.add_subparsers(dest="costaware_command", metavar="ACTION")
    sub.required = True

    p = sub.add_parser("ratios", help="predicted J(p)/J(p*) of each strategy on one instance")
    _add_fields(p, ProblemConfig)
    p.add_argument("--lams", default="0,0.1,0.5", help="uniform mixing weights, comma-separated")
    p.add_argument("--out", help="directory for Parquet output")
    p.set_defaults(func=cmd_ratios)

    p = sub.add_parser("sgd", help="simulated cost to reach eps per strategy, with 95%% CIs")
    _add_fields(p, ProblemConfig)
    _add_fields(p, SGDConfig, skip=("seed",))
    p.add_argument("--sgd-seed", type=int, default=1, help="seed of the SGD replications")
    p.add_argument("--out", help="directory for Parquet output")
    p.set_defaults(func=cmd_sgd)

    p = sub.add_parser("subset", help="bias-budgeted subset selection: greedy vs exact, "
                                      "cost saved and bias paid")
    _add_fields(p, ProblemConfig)
    _add_fields(p, SGDConfig, skip=("seed",))
    p.add_argument("--sgd-seed", type=int, default=1)
    p.add_argument("--gammas", default="0.01,0.02,0.05,0.1",
                   help="bias budgets as fractions of mean(G), comma-separated")
    p.add_argument("--check-instances", type=int, default=200)
    p.add_argument("--check-n", type=int, default=14)
    p.add_argument("--check-seed", type=int, default=0)
    p.add_argument("--out", help="directory for Parquet output")
    p.set_defaults(func=cmd_subset)

    p = sub.add_parser("grpo", help="toy GRPO: uniform vs cost-aware mini-batches over seeds")
    _add_fields(p, GRPOConfig)
    p.add_argument("--out", help="directory for Parquet output")
    p.set_defaults(func=cmd_grpo)

    p = sub.add_parser("trl-gradnorm", help="|A| vs per-sample gradient norm of TRL's GRPO "
                                            "loss on a tiny random GPT-2 (needs fastsim[trl])")
    p.add_argument("--prompts", default="tests/fixtures/trl_prompts.jsonl",
                   help="JSONL prompt set (one {\"prompt\": ...} per line)")
    p.add_argument("--batches", type=int, default=6, help="generation batches of 16 rollouts")
    p.add_argument("--train-steps", type=int, default=10,
                   help="GRPO steps before the second measurement")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="directory for the per-rollout Parquet")
    p.set_defaults(func=cmd_trl_gradnorm)

    p = sub.add_parser("sweep", help="run a sweeps/costaware_*.toml file")
    p.add_argument("file")
    p.add_argument("--out", required=True, help="output directory")
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("figures", help="draw figures from a results directory")
    p.add_argument("dir")
    p.add_argument("--out", help="figure directory (default DIR/figures)")
    p.set_defaults(func=cmd_figures)
