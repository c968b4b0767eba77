"""``fastsim replay`` (stop policies on evaluation logs) and ``fastsim traces`` (toy RLHF).

Everything is read, validated and computed before anything is written, and files are
written through a temporary name, so a malformed input never leaves partial output.
The reading and computing modules (polars, numba, scipy) are imported by the functions
that use them: the parser, ``--help`` and usage errors need none of them.
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from fastsim import defaults as D
from fastsim import registry as R
from fastsim.cli import examples
from fastsim.config import parse_flag
from fastsim.errors import ConfigError, counted, printable
from fastsim.values import (NumberTextError, as_typed, file_or_dir_path, file_path,
                            integer_option, kept_as_typed, number_option, number_text,
                            read_number, read_numbers)
from fastsim.replay.formats import FORMATS, LOWER_IS_BETTER_SUFFIXES

if TYPE_CHECKING:  # annotations only
    import polars as pl

DEFAULT_POLICIES = ("evalstop:k=2",)
# fit-curves resamples in Python, milliseconds a resample: a count past this runs for hours
MAX_BOOT = 100_000
TRACE_POLICIES = ("evalstop:k=2", "evalstop:k=3", "deprioritize:k=2", "stop_at:f=0.65",
                  "loss_plateau:w=2,tol=0.01", "oracle")


def register(subparsers) -> None:
    """Add the ``replay`` and ``traces`` subcommands."""
    _register_replay(subparsers)
    _register_traces(subparsers)


def _register_replay(subparsers) -> None:
    p = subparsers.add_parser(
        "replay", help="replay stop policies on evaluation logs (CSV, JSONL, Parquet, trainer_state.json)",
        description="Replay stop policies on real evaluation logs: per job, whether and where "
        "the policy triggers, the checkpoint it delivers, its score against the final one and "
        "the compute a stop would have saved. A trigger at a job's last logged step is status "
        "triggered_at_completion, not stopped: it keeps its checkpoint but saves nothing (the "
        "summary's 'at completion'). A CSV, TSV, JSONL or Parquet log has one row per "
        "evaluation and columns job_id, step and score (--metric names another score "
        "column); formats and mess rules: docs/replay.md.",
        epilog=examples(
            ("fastsim replay evals.csv --policy evalstop:k=2 --policy evalstop:k=3",
             "two policies on your log; gpus and time (hours) columns give GPU-hours saved"),
            ("fastsim replay my-run --metric eval_loss --gpus 8",
             "a Hugging Face run directory's trainer_state.json (a loss: lower is better)"),
            ("fastsim replay --example --summary-only",
             "the small log shipped with fastsim, one summary line per policy")))
    _add_replay_options(p)
    p.set_defaults(func=_cmd_replay)


def _add_replay_options(p) -> None:
    """``fastsim replay``'s options: what it reads and how, and what it writes."""
    p.add_argument("paths", nargs="*", type=file_or_dir_path, metavar="PATH",
                   help="log files, or run directories holding trainer_state.json; a log "
                   "may come through a pipe (/dev/stdin, bash's <(...), a named pipe), read "
                   "once into memory, up to 256 MiB (docs/replay.md)")
    p.add_argument("--example", action="store_true",
                   help="replay the small CSV log shipped with fastsim instead of PATH (3 jobs "
                   "with out-of-order steps, a duplicate and a missing score); its path is "
                   "printed, to copy it as a template")
    p.add_argument("--policy", action="append", default=None, metavar="SPEC",
                   help="stop policy, repeatable, one given twice runs once (default "
                   "evalstop:k=2): "
                   + ", ".join(d.usage() for d in R.policies() if not d.uses_hidden_truth)
                   + ", or MODULE:FUNCTION[:key=value,...] of a user's @stop_policy; "
                   + ", ".join(d.name for d in R.policies() if d.uses_hidden_truth)
                   + " on trace sets only (uses hidden truth); every policy takes "
                   "scope=all|rlhf (default all here, unlike fastsim run: rlhf leaves out the "
                   "jobs whose job_type is given and is not rlhf)")
    p.add_argument("--metric", default=None, help="metric column / eval_* name (default: score; "
                   "for trainer_state the single non-loss eval_* metric, else eval_loss)")
    p.add_argument("--columns", default=None, metavar="FIELD=COLUMN,...",
                   help="the log's own names for the columns replay reads, e.g. "
                   "job_id=run,step=global_step,score=eval_accuracy (score: the metric, as "
                   "--metric names it); fields: job_id, step, score and the optional ones of "
                   "docs/replay.md (loss, gpus, time, max_steps, ...); long tables only "
                   "(default: none, the log's columns named as replay reads them)")
    sense = p.add_mutually_exclusive_group()
    sense.add_argument("--lower-is-better", dest="higher_is_better", action="store_false", default=None,
                       help="the metric improves downwards (default for names ending in "
                       + "/".join(LOWER_IS_BETTER_SUFFIXES) + ")")
    sense.add_argument("--higher-is-better", dest="higher_is_better", action="store_true",
                       help="the metric improves upwards (default for every other name)")
    p.add_argument("--format", dest="fmt", default=None,
                   choices=list(FORMATS), help="force the format (default: detect from the name "
                   "and content; a pipe has no name, so a TSV through one needs --format tsv)")
    p.add_argument("--on-duplicate", choices=["last", "error"], default="last",
                   help="a (job_id, step) logged twice: keep the last row (default) or fail")
    p.add_argument("--gpus", default=None, metavar="N",  # text: a refusal echoes it as typed
                   help="GPUs held by jobs whose log has no gpus column, a positive number; "
                   "sets the GPU-hours saved (default: none, GPU-hours not reported)")
    p.add_argument("--out", type=file_path, default=None, help="per-job results, .parquet or .csv (default: none, printed only)")
    p.add_argument("--summary-out", type=file_path, default=None,
                   help="per-policy summary, .parquet or .csv (default: none, printed only)")
    p.add_argument("--summary-only", action="store_true", help="print the summary, not every job")


def _register_traces(subparsers) -> None:
    t = subparsers.add_parser("traces", help="genuine over-optimisation traces: generate, fit "
                              "the curve knobs, compare with the simulator",
                              description="Trace sets with hidden truth for replay "
                              "(docs/real-traces.md): generate them (toy-rlhf), fit the "
                              "simulator's curve knobs to them (fit-curves), and run the "
                              "simulator at their noise (compare-sim).")
    tsub = t.add_subparsers(dest="traces_command", metavar="KIND")
    tsub.required = True
    _register_toy(tsub)
    _register_compare(tsub)
    _register_fit(tsub)


def _register_toy(tsub) -> None:
    toy = tsub.add_parser(
        "toy-rlhf", help="toy RLHF: gold RM, Bradley-Terry proxy, GRPO-style policy",
        description="Run a toy RLHF loop per data size x KL coefficient x seed (a proxy reward "
        "model fitted to comparisons labelled by a gold one, a policy trained on the proxy) and "
        "write its evaluation traces with hidden truth (gold score, gold peak, hacking or "
        "healthy), for fastsim replay, compare-sim, fit-curves and fastsim detectors. The "
        "default set is 72 runs (docs/real-traces.md).")
    toy.add_argument("--out", type=Path, default=Path("results/traces"), metavar="DIR",
                     help="directory for traces.parquet, runs.parquet, gao_fits.parquet "
                     "(default: results/traces)")
    toy.add_argument("--n-comparisons", default=None, metavar="N,N,...",
                     help="comparisons the proxy reward model is fitted to, distinct integers >= 1, "
                     "comma-separated (default: 100,200,400,800,1600,3200)")
    toy.add_argument("--kl-coefs", default=None, metavar="B,B,...",
                     help="KL penalty coefficients, distinct numbers from 0 to the KL step's "
                     "stability bound (20.1 with the default parameters, 21.7 with world "
                     "seed 1; beyond it the penalty step overshoots: docs/real-traces.md), "
                     "comma-separated (default: 0.02,0.1,0.3)")
    toy.add_argument("--seeds", default=None, metavar="S,S,...|N",
                     help="run seeds, distinct integers >= 0, comma-separated, or N for 0..N-1 "
                     "(default: 4); one run per data size x KL coefficient x seed")
    toy.add_argument("--steps", type=integer_option, default=None, metavar="N",
                     help="policy-gradient steps per run, an integer >= 15 (an evaluation "
                     "every 15, at least two; default: 300)")
    toy.add_argument("--world-seed", type=integer_option, default=None, metavar="INT",
                     help="seed of the gold reward, reference policy and prompts, >= 0 "
                     "(default: 0)")
    start = toy.add_mutually_exclusive_group()
    start.add_argument("--quick", action="store_true",
                       help="a 12-run set for a smoke test (100 and 3200 comparisons, KL 0.02 "
                       "and 0.3, 3 seeds, 150 steps)")
    start.add_argument("--like", type=file_path, default=None, metavar="FILE",
                       help="start from the parameters recorded in FILE (traces.parquet, "
                       "runs.parquet or gao_fits.parquet written by toy-rlhf; every file "
                       "records them, world seed included); the options above override them (default: "
                       "none, the options' defaults)")
    toy.set_defaults(func=_cmd_toy)


def _register_compare(tsub) -> None:
    cmp_ = tsub.add_parser(
        "compare-sim", help="the simulator's detection numbers at the traces' noise",
        description="Simulate RLHF-only clusters at the traces' noise, base rate and "
        "evaluation count, and print each policy's precision, recall and FPR with 95% "
        "intervals, to set beside fastsim replay on the same traces (docs/real-traces.md).")
    cmp_.add_argument("runs", type=file_path, help="runs.parquet written by toy-rlhf")
    cmp_.add_argument("--policy", action="append", default=None, metavar="SPEC",
                      help="stop policy, repeatable, as for fastsim replay, run with scope "
                      "rlhf (every simulated job is RLHF); one given twice runs once (default: "
                      + ", ".join(TRACE_POLICIES) + ")")
    cmp_.add_argument("--clusters", type=integer_option, default=50, metavar="N",
                      help="simulated clusters per policy, an integer >= 2 (default: 50)")
    # read by _cmd_compare, whose refusal echoes the text (1.50, not 1.5)
    cmp_.add_argument("--sigma", type=kept_as_typed(number_option), default=None, metavar="X",
                      help="evaluation noise of the simulator, a standard deviation in score "
                      "units (default: matched to the traces: their median noise over gold "
                      "gain, on the simulator's scale)")
    cmp_.add_argument("--plain", action="store_true",
                      help="the plain curve model (trace-grounded curve knobs off, MODEL.md section 4)")
    cmp_.add_argument("--out", type=file_path, default=None,
                      help="simulator comparison, .parquet or .csv (default: none, printed only)")
    cmp_.set_defaults(func=_cmd_compare)


def _register_fit(tsub) -> None:
    fit = tsub.add_parser(
        "fit-curves", help="fit the curve knobs (MODEL.md section 4) to a trace set",
        description="Fit the simulator's trace-grounded curve knobs (KL curvature, hacking "
        "sharpness, per-job and AR(1) noise, peak positions) to a toy-rlhf trace set, with "
        "run-bootstrap 95% intervals (docs/real-traces.md).")
    fit.add_argument("traces", type=file_path, help="traces.parquet written by toy-rlhf")
    fit.add_argument("--boot", type=integer_option, default=1000, metavar="N",
                     help="bootstrap resamples of the runs for the 95%% intervals, an integer "
                     f"from {D.MIN_PERCENTILE_BOOT} to {MAX_BOOT}, or 0 for no intervals "
                     "(default: 1000)")
    fit.add_argument("--seed", type=integer_option, default=0, metavar="INT",
                     help="bootstrap seed, an integer >= 0 (default: 0)")
    fit.add_argument("--out", type=file_path, default=None, help="fitted values, .parquet or .csv (default: none, printed only)")
    fit.set_defaults(func=_cmd_fit)


def _write(df: pl.DataFrame, path: Path, within: Path) -> None:
    from fastsim.io import atomic_write_table

    atomic_write_table(df, path, within=within)


def _check_out(path: Path | None, option: str = "--out") -> Path | None:
    """Refuse an output that could not be written, before any work; the directory it is
    written within (``io.check_output``)."""
    from fastsim.io import check_output

    return check_output(path, option)


def _fmt(x, digits=3):
    if x is None:
        return "-"
    if isinstance(x, float):
        return "nan" if x != x else f"{x:.{digits}g}"
    return str(x)


def _policy_width(table: pl.DataFrame) -> int:
    """The policy column's width: 28, or the longest label (a user policy's can be longer)."""
    return max([28] + [len(p) for p in table["policy"]])


def _print_jobs(res: pl.DataFrame, metric: str) -> None:
    w, kept = _policy_width(res), f"kept {metric}"
    mw = max(16, len(kept))
    # the status column widens to the longest status, as to triggered_at_completion
    sw = max([14] + [len(s) for s in res["status"]])
    # whole, as the policy column: ids cut to a width printed two jobs alike (run-2026-12-07-a
    # and -b), and a control character in one broke its line
    ids = [printable(j) for j in res["job_id"]]
    jw = max([22] + [len(j) for j in ids])
    print(f"{'policy':<{w}} {'job_id':<{jw}} {'status':<{sw}} {'trigger':>8} {'keep':>8} "
          f"{kept:>{mw}} {'final':>10} {'gain':>8} {'saved':>6} {'GPU-h saved':>12}")
    for r, job in zip(res.iter_rows(named=True), ids):
        print(f"{r['policy']:<{w}} {job:<{jw}} {r['status']:<{sw}} {_fmt(r['trigger_step']):>8} "
              f"{_fmt(r['delivered_step']):>8} {_fmt(r['delivered_metric'], 4):>{mw}} "
              f"{_fmt(r['final_metric'], 4):>10} {_fmt(r['delivered_gain'], 3):>8} "
              f"{r['compute_saved_share']:>6.1%} {_fmt(r['gpu_h_saved'], 4):>12}")


def _ci(r, name, pct=True):
    from fastsim.stats import fmt_interval

    m, lo, hi = r.get(name), r.get(f"{name}_lo"), r.get(f"{name}_hi")
    if m is None or m != m:
        return "n/a"
    # a NaN lo: one job, or jobs that all agree: no spread to go on
    return fmt_interval(m, lo, hi, ".1%" if pct else ".3g")


def _gains_left_out(unknown: int, infinite: int) -> str:
    """Why some triggers are not in the mean gain: a checkpoint kept at a step with no
    score (a loss-reading policy), or a gain that is infinite (inf is a score)."""
    why = [f"{unknown - infinite} kept an unscored step" if unknown > infinite else "",
           f"{infinite} had an infinite gain" if infinite else ""]
    return ", ".join(w for w in why if w)


def _print_summary(summ: pl.DataFrame) -> None:
    truth = "precision" in summ.columns
    w = _policy_width(summ)
    for r in summ.iter_rows(named=True):
        line = (f"{r['policy']:<{w}} jobs {r['n_jobs']:>4}  stopped {r['n_stopped']:>4}  "
                f"demoted {r['n_demoted']:>3}  at completion {r['n_triggered_at_completion']:>3}  "
                f"too short {r['n_too_short']:>3}  compute saved {_ci(r, 'compute_saved_share')}  "
                f"kept-vs-final {_ci(r, 'delivered_gain', pct=False)}")
        unknown = r["n_detected"] - r["n_delivered_gain_known"]
        if unknown:
            line += (f" over {r['n_delivered_gain_known']} of {counted(r['n_detected'], 'trigger')} "
                     f"({_gains_left_out(unknown, r['n_delivered_gain_infinite'])})")
        if r["n_jobs_gpu_h_known"]:
            line += f"  GPU-h saved {r['gpu_h_saved']:.4g} of {r['gpu_h_total']:.4g}"
            if r["n_jobs_gpu_h_known"] < r["n_jobs"]:  # a sum over some jobs must say so
                line += (f" (over {r['n_jobs_gpu_h_known']} of {r['n_jobs']} jobs; the others "
                         "have no time per evaluation or no GPU count)")
        print(line)
        if truth:
            print(f"{'':<{w}} precision {_ci(r, 'precision')}  recall {_ci(r, 'recall')}  "
                  f"FPR {_ci(r, 'fpr')}  (TP {r['tp']} FP {r['fp']} FN {r['fn']} TN {r['tn']})")
            print(f"{'':<{w}} stopped before completion: stop recall "
                  f"{_ci(r, 'stop_recall')}  stop FPR {_ci(r, 'stop_fpr')}  triggers at "
                  f"completion {_ci(r, 'completion_share')}")


def _unit(res) -> str:
    """What the summary of a log with seeds resamples: its seeds, and each job without a
    seed on its own (printed as more seeds, 1 seed and 3 such jobs read '4 seeds')."""
    jobs = res.unique("job_id")
    alone = jobs["seed"].null_count()
    return (f"rates and means resample the {counted(jobs['seed'].drop_nulls().n_unique(), 'seed')}"
            " (jobs of a seed share their draws)"
            + (f" and the {counted(alone, 'job')} without one, each its own" if alone else ""))


def _gpus(text: str | None) -> float | None:
    """``--gpus`` as a number; refused as typed (``--gpus=-2``, not ``-2.0``; ``1e400``, not
    ``inf``) unless a positive finite count."""
    if text is None:
        return None
    try:
        gpus = number_text(text)
    except NumberTextError:
        gpus = math.nan
    if not 0 < gpus < math.inf:
        raise ConfigError(f"--gpus={text} is invalid; allowed: a positive finite GPU count")
    return gpus


def _cmd_replay(args) -> int:
    from fastsim.io import check_distinct, table_writer, write_all
    from fastsim.replay.logs import column_map, read_logs, resolve_path
    from fastsim.replay.policies import parse_policy, replay, summarize_replay

    if not args.paths and not args.example:
        raise ConfigError("no log given; allowed: PATH (log files or run directories), or "
                          "--example (the log shipped with fastsim)")
    if args.paths and args.example:
        raise ConfigError("PATH and --example together; allowed: one of them")
    if args.metric is not None and not args.metric.strip():
        raise ConfigError(f"--metric {args.metric!r}: allowed: a column or eval_* name "
                          "(omit it for the default)")
    columns = column_map(args.columns)  # refused before any log is read
    if args.example:
        from fastsim.resources import example_log
        args.paths = [example_log()]
    within = [d for d in (_check_out(args.out), _check_out(args.summary_out, "--summary-out"))
              if d]
    logs = {f"the log {p}": resolve_path(Path(p)) for p in args.paths}  # the files read
    check_distinct({"--out": args.out, "--summary-out": args.summary_out}, inputs=logs)
    gpus = _gpus(args.gpus)
    policies = [parse_flag(parse_policy, s, "--policy") for s in (args.policy or DEFAULT_POLICIES)]
    log = read_logs(args.paths, fmt=args.fmt, metric=args.metric,
                    higher_is_better=args.higher_is_better, on_duplicate=args.on_duplicate,
                    columns=columns)
    res = replay(log, policies, gpus=gpus)
    summ = summarize_replay(res)
    # written first, both or neither: a write that fails (a full disk) prints no results
    outputs = [(p, df) for p, df in ((args.out, res), (args.summary_out, summ)) if p]
    write_all([(p, table_writer(df, p)) for p, df in outputs], within=within)
    sense = "higher" if log.higher_is_better else "lower"
    if args.example:
        print(f"example log: {args.paths[0]}")
    n_evals = int(log.table["metric"].is_not_nan().sum())  # a row may hold a loss only
    rows = "" if n_evals == log.table.height else f" in {log.table.height} rows"
    print(f"replay: {counted(len(log.job_ids), 'job')}, {counted(n_evals, 'evaluation')}{rows}, "
          f"metric {log.metric} ({sense} is better)")
    for note in log.notes:
        print(f"  rule applied: {note}")
    if gpus is not None and "time_h" not in log.table.columns:
        print("  note: --gpus is given, but the log has no time per evaluation (a time, time_h "
              "or time_s column; for trainer_state.json, the train_runtime Trainer logs when "
              "training ends), so GPU-hours are not reported (nan)")
    if not args.summary_only:
        _print_jobs(res, log.metric)
        print()
    unit = _unit(res) if "n_seeds" in summ.columns else "rates resample jobs"
    print(f"summary (95% intervals; {unit}):")
    _print_summary(summ)
    for p, _ in outputs:
        print(f"wrote {p}")
    return 0


def _items(text: str, name: str, what: str) -> list[str]:
    """The comma-separated items of an option; none for a blank one, which the config
    refuses as empty (not read as the default).  An empty item among others is refused:
    dropped, 1,,2 ran as 1,2 and --seeds 4, as seed 4 alone."""
    if not text.strip():
        return []
    items = text.split(",")
    if any(not x.strip() for x in items):
        raise ConfigError(f"--{name} {text!r} has an empty item; allowed: comma-separated "
                          f"{what}")
    return items


def _ints(text: str, name: str) -> tuple[int, ...]:
    vals = read_numbers(text, f"--{name}", True, "comma-separated integers") if _items(
        text, name, "integers") else ()
    if name == "seeds" and len(vals) == 1 and "," not in text:
        if not 1 <= vals[0] <= 100_000:
            raise ConfigError(f"--seeds {text!r}: allowed: N from 1 to 100000 (seeds 0..N-1), "
                              "or comma-separated integers")
        return tuple(range(vals[0]))
    return vals


def _like_config(path):
    """The parameters recorded in ``path`` (``--like``), refused when it records none."""
    from fastsim.io import file_kind
    from fastsim.replay.traces import read_trace_config

    why = file_kind(path)  # "no such file", or a pipe or device refused unread
    if why is not None:
        raise ConfigError(f"--like {path}: {why}; allowed: a .parquet file "
                          "written by fastsim traces toy-rlhf")
    base = read_trace_config(path)
    if base is None:
        # fit-curves' or compare-sim's own output was called an older trace file
        raise ConfigError(f"--like {path}: records no generating parameters (not written by "
                          "fastsim traces toy-rlhf, or written before fastsim recorded them); "
                          "allowed: traces.parquet, runs.parquet or gao_fits.parquet written "
                          "by this fastsim's toy-rlhf, or the options themselves (defaults: "
                          "world seed 0)")
    return base


# the options of toy-rlhf that set a ToyRLHFConfig field: (its dest, the option)
TOY_OPTIONS = {"n_comparisons": ("n_comparisons", "--n-comparisons"),
               "kl_coefs": ("kl_coefs", "--kl-coefs"), "seeds": ("seeds", "--seeds"),
               "n_steps": ("steps", "--steps"), "world_seed": ("world_seed", "--world-seed")}


def _toy_option_refusal(msg: str, kw: dict, args) -> str | None:
    """A config's refusal of a value an option gave, as typed (``as_typed``): ``kl_coefs=
    (-1.0,) is invalid; ...`` -> ``--kl-coefs=-1 is invalid; ...``; None for any other."""
    for field, (dest, option) in TOY_OPTIONS.items():
        text = getattr(args, dest)
        if text is not None and field in kw:
            said = as_typed(msg, field, kw[field], option, str(text))
            if said is not None:
                return said
    return None


def _cmd_toy(args) -> int:
    from fastsim.io import check_output_dir, table_writer, write_all
    from fastsim.replay.traces import (ToyRLHFConfig, config_metadata, gao_fit_groups,
                                       generate_toy_rlhf, run_summary)

    base = ToyRLHFConfig() if args.like is None else _like_config(args.like)
    kw = {}
    if args.quick:
        kw.update(n_comparisons=(100, 3200), kl_coefs=(0.02, 0.3), seeds=(0, 1, 2), n_steps=150)
    # an empty value is refused by the config (non-empty), not read as the default
    if args.n_comparisons is not None:
        kw["n_comparisons"] = _ints(args.n_comparisons, "n-comparisons")
    if args.kl_coefs is not None:
        kw["kl_coefs"] = read_numbers(args.kl_coefs, "--kl-coefs", False,
                                      "comma-separated numbers") if _items(
            args.kl_coefs, "kl-coefs", "numbers") else ()
    if args.seeds is not None:
        kw["seeds"] = _ints(args.seeds, "seeds")
    if args.steps is not None:
        kw["n_steps"] = args.steps
    if args.world_seed is not None:
        kw["world_seed"] = args.world_seed
    try:
        cfg = replace(base, **kw)  # every check, the record's values included
    except ConfigError as exc:
        typed = _toy_option_refusal(str(exc), kw, args)
        if typed is not None:
            raise ConfigError(typed) from None
        if args.like is None:
            raise
        # a file's record is read without the KL-step bound (older files); running it
        # again would run the unstable penalty step, so it is refused here
        raise ConfigError(f"--like {args.like}: cannot regenerate: {exc} (options given "
                          "with --like override the file's)") from None
    within = check_output_dir(args.out)
    t0 = time.perf_counter()
    # into a log too (fastsim.progress: first and last state, a line every 30 s): the
    # default set's two minutes passed in silence in a log or behind `2>&1 | tee`
    traces = generate_toy_rlhf(cfg, progress=True)
    runtime = time.perf_counter() - t0
    runs = run_summary(traces)
    fits = gao_fit_groups(traces)
    meta = config_metadata(cfg)  # the file alone says how to regenerate it
    write_all([(args.out / f"{name}.parquet", table_writer(df, args.out / f"{name}.parquet", meta))
               for name, df in (("traces", traces), ("runs", runs), ("gao_fits", fits))],
              within=within)
    print(f"toy-rlhf: {counted(cfg.n_runs, 'run')} x "
          f"{counted(traces.height // cfg.n_runs, 'evaluation')} in "
          f"{runtime:.1f} s (numba compile included on a cold cache); wrote {args.out}/"
          "{traces,runs,gao_fits}.parquet")
    _print_toy(cfg, runs, fits)
    return 0


def _print_toy(cfg, runs: pl.DataFrame, fits: pl.DataFrame) -> None:
    """The toy-RLHF runs by comparison count, and Gao's form fitted per cell and per run."""
    import polars as pl

    from fastsim.replay.traces import gao_run_medians
    from fastsim.stats import fmt_interval, fmt_value

    by_n = runs.group_by("n_comparisons").agg(
        pl.col("truth_hacking").mean().alias("hacking_share"),
        pl.col("gold_gain").mean(), (pl.col("gold_peak") - pl.col("gold_final")).mean().alias("gold_drop"),
        pl.col("proxy_gain").mean(), pl.col("eval_noise_sd").mean()).sort("n_comparisons")
    with pl.Config(tbl_rows=50, tbl_cols=20, tbl_width_chars=160, float_precision=3):
        print(by_n)
        print(fits.select("n_comparisons", "kl_coef", "hacking_share", "gao_alpha", "gao_beta",
                          "gao_r2", "d_peak", "d_max"))
    lo, hi = fits["n_seeds"].min(), fits["n_seeds"].max()
    print(f"Gao's form per cell: pooled fit (mean of the per-seed fits [95% t interval over "
          f"{counted(lo, 'seed') if lo == hi else f'{lo}-{hi} seeds'}])")
    for r in fits.iter_rows(named=True):
        cells = "  ".join(f"{n[4:]} {fmt_value(r[n], '.2f')} ("
                          + fmt_interval(r[n + "_seed_mean"], r[n + "_lo"], r[n + "_hi"], ".2f") + ")"
                          for n in ("gao_alpha", "gao_beta", "gao_r2"))
        print(f"  n {r['n_comparisons']:>5} KL {r['kl_coef']:<5g} {cells}")
    print("Gao's form per run, medians [95% bootstrap interval over runs] (min):")
    for r in gao_run_medians(runs).iter_rows(named=True):
        print(f"  {r['runs']:<8} {r['statistic'][4:]:<6} "
              f"{fmt_interval(r['median'], r['lo'], r['hi'], '.3f')} "
              f"(min {r['min']:.3f}), n {counted(r['n_runs'], 'run')}")
    print(f"hacking runs: {int(runs['truth_hacking'].sum())} of {runs.height} "
          f"(gold peak above the final gold by > {cfg.hacking_margin:.0%} of the gain)")


def _cmd_compare(args) -> int:
    from fastsim.io import check_distinct, read_parquet_table
    from fastsim.replay.policies import parse_policy
    from fastsim.memory import check_fits, simulate_bytes
    from fastsim.replay.traces import (COMPARE_JOBS, RUNS_ALLOWED, check_run_values,
                                       check_trace_table, matched_n_evals,
                                       simulator_comparison, trace_origin)

    within = _check_out(args.out)
    check_distinct({"--out": args.out}, inputs={"RUNS": args.runs})
    # the workload's own check would name its field, sigma=, not the option
    if args.sigma is not None:
        sigma = read_number(args.sigma, "--sigma")
        if not 0.0 <= sigma <= 1.0:
            raise ConfigError(f"--sigma={args.sigma} is invalid; allowed: an evaluation-noise "
                              "standard deviation in [0, 1]")
        args.sigma = sigma
    if not os.path.exists(args.runs):  # not OSError for a too-long name
        raise ConfigError(f"{args.runs}: no such file; allowed: runs.parquet from fastsim traces toy-rlhf")
    runs = read_parquet_table(args.runs, "runs.parquet from fastsim traces toy-rlhf")
    check_trace_table(runs, args.runs, ["job_id", "truth_hacking", "n_evals", "eval_noise_sd",
                                        "gold_gain", "truth_gold_peak_step", "final_step"],
                      allowed=RUNS_ALLOWED, per_run=False)
    check_run_values(runs, args.runs)
    origin = trace_origin(args.runs)
    specs = [s for s in (args.policy or TRACE_POLICIES)]
    if all(parse_flag(parse_policy, s, "--policy").name == "none" for s in specs):  # skips none
        raise ConfigError("--policy none only: none never stops, so there is nothing to "
                          "compare; allowed: a stop policy, e.g. --policy evalstop:k=2")
    if args.clusters < 2:
        raise ConfigError(f"--clusters {args.clusters}: allowed: an integer >= 2")
    # as fastsim run checks its own: simulate's check named its argument, n_clusters
    n_evals = matched_n_evals(runs)
    check_fits(lambda n: simulate_bytes(n, COMPARE_JOBS, n_evals, keep_jobs=False),
               args.clusters, "--clusters", f"n_jobs={COMPARE_JOBS}, n_evals={n_evals}")
    curves = D.PLAIN_CURVES if args.plain else None
    res = simulator_comparison(runs, specs, n_clusters=args.clusters, sigma=args.sigma,
                               curves=curves, source=str(args.runs))
    print(origin)
    print(f"simulator ({'plain' if args.plain else 'trace-grounded'} curves) at sigma "
          f"{res['sigma'][0]:.4f}, base rate {res['base_rate'][0]:.1%}, "
          f"{res['n_evals'][0]} evaluations, {args.clusters} clusters:")
    for r in res.iter_rows(named=True):
        print(f"{r['policy']:<28} precision {_ci(r, 'precision')}  recall {_ci(r, 'recall')}  "
              f"FPR {_ci(r, 'fpr')}")
    if args.out:
        _write(res, args.out, within)
        print(f"wrote {args.out}")
    return 0


def _cmd_fit(args) -> int:
    from fastsim.io import check_distinct, read_parquet_table
    from fastsim.replay.traces import (check_fit_values, check_trace_table, fit_curve_knobs,
                                       trace_origin)
    from fastsim.stats import fmt_value

    within = _check_out(args.out)
    check_distinct({"--out": args.out}, inputs={"TRACES": args.traces})
    if not os.path.exists(args.traces):  # not OSError for a too-long name
        raise ConfigError(f"{args.traces}: no such file; allowed: traces.parquet from fastsim traces toy-rlhf")
    if not (args.boot == 0 or D.MIN_PERCENTILE_BOOT <= args.boot <= MAX_BOOT):
        raise ConfigError(f"--boot {args.boot}: allowed: an integer from {D.MIN_PERCENTILE_BOOT} "
                          f"to {MAX_BOOT} (fewer cannot set the ends of a 95% interval), or 0 "
                          "for no intervals")
    if args.seed < 0:  # numpy's generator takes non-negative seeds only
        raise ConfigError(f"--seed {args.seed}: allowed: an integer >= 0")
    traces = read_parquet_table(args.traces, "traces.parquet from fastsim traces toy-rlhf")
    origin = trace_origin(args.traces)
    check_trace_table(traces, args.traces, ["job_id", "step", "score", "truth_gold",
                                            "truth_kl_nats", "truth_hacking"])
    check_fit_values(traces, args.traces)
    res = fit_curve_knobs(traces, n_boot=args.boot, seed=args.seed)
    print(origin)
    print(f"curve knobs fitted to {args.traces} ("
          + (f"95% intervals: {args.boot} resamples of the runs" if args.boot else "no intervals: "
             "--boot 0") + "):")
    for r in res.iter_rows(named=True):
        ci = ("(no run of the kind it is fitted to)" if r["n_runs"] == 0 else
              "(no interval)" if r["lo"] != r["lo"] else
              f"[{fmt_value(r['lo'], '.4g')}, {fmt_value(r['hi'], '.4g')}]")
        print(f"{r['statistic']:<22} {fmt_value(r['value'], '.4g'):>9}  {ci}  n {r['n_runs']}")
    if args.out:
        _write(res, args.out, within)
        print(f"wrote {args.out}")
    return 0
