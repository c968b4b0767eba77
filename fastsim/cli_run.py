"""``fastsim run``: one cell (workload x scheduler x stop policy) against a baseline.

Every workload knob of ``WorkloadConfig`` is an option, generated from the dataclass so
``--help`` can never drift from the code; units and defaults come from the field's
description below and ``fastsim.defaults``.  The simulation's modules (numba, polars,
scipy) are imported by the functions that run it, so ``fastsim run --help`` starts fast.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from typing import TYPE_CHECKING

from fastsim import defaults as D
from fastsim import registry as R
from fastsim.cli import examples
from fastsim.config import (FIELD_ALLOWED, FIELD_HELP, PolicyConfig, SchedulerConfig, SimConfig,
                            WorkloadConfig, inert_settings, parse_baseline, parse_flag,
                            self_baseline)
from fastsim.errors import ConfigError, counted
from fastsim.values import MAX_SEED, as_typed, file_path, integer_option, read_number, read_numbers

if TYPE_CHECKING:  # annotations only
    from tqdm import tqdm

# Fields that are ranges/lists are parsed from "a,b,...".
_LIST_FIELDS = {f for f in FIELD_HELP if f.startswith(("demands_", "ustar_")) or f in
                ("height", "tau", "loss0", "loss_inf", "loss_tau")}
CHUNK = 500  # clusters per progress step; chunking never changes results
# A run streams its chunks (memory does not grow with --clusters unless rows are kept for
# --out, which the memory check bounds) and cannot resume: its bound is time.  At 50-400 us
# a cluster for both arms (docs/performance.md; the note after the first chunk says this
# machine's pace) 10^8 clusters take 1.5-12 hours; more is a sweep's work, in chunks that
# resume.  --clusters 9223372036854775807, every cluster id, ran for millions of years.
MAX_RUN_CLUSTERS = 100_000_000
RUN_CLUSTERS_ALLOWED = (f"an integer from 1 to {MAX_RUN_CLUSTERS:,} (that many take "
                        "1.5-12 hours; a run does not resume: run more as a sweep)")


def _parse_field(name: str, text: str, default):
    option = f"--{name.replace('_', '-')}"
    if name == "mix" and "," not in text:
        return text  # a mix's name
    if name == "mix" or name in _LIST_FIELDS:
        return read_numbers(text, option, name.startswith("demands_"), FIELD_HELP[name])
    if isinstance(default, bool):
        try:
            return R.flag_value(text)  # as a spec's flag: true or false, nothing else
        except ValueError:
            raise ConfigError(f"{option}={text!r} is not a valid value; expected "
                              f"{FIELD_HELP[name]}") from None
    return read_number(text, option, isinstance(default, int), FIELD_HELP[name])


def add_workload_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("workload (MODEL.md section 3; defaults in fastsim/defaults.py)")
    for f in dataclasses.fields(WorkloadConfig):
        default = f.default
        shown = ",".join(map(str, default)) if isinstance(default, tuple) else default
        g.add_argument(f"--{f.name.replace('_', '-')}", dest=f.name, default=None,
                       metavar="X",
                       help=f"{FIELD_HELP[f.name]}; allowed: {FIELD_ALLOWED[f.name]} "
                            f"(default: {shown})")


def workload_from_args(args: argparse.Namespace) -> WorkloadConfig:
    kw, given = {}, {}
    for f in dataclasses.fields(WorkloadConfig):
        text = getattr(args, f.name, None)
        if text is not None:
            kw[f.name] = _parse_field(f.name, text, f.default)
            given[f.name] = text
    try:
        return WorkloadConfig(**kw)
    except ConfigError as exc:
        raise ConfigError(_as_option(str(exc), kw, given)) from None


def _as_option(msg: str, kw: dict, given: dict) -> str:
    """A workload field's refusal in the words of its option: "sigma=-1.0 is invalid; ..."
    -> "--sigma=-1 is invalid; ...", as typed; a default the options given rule out
    (``--gpus 4`` and the default DPO demands 2,4,8) names the option that sets it."""
    name = msg.partition("=")[0]
    typed = (as_typed(msg, name, kw[name], f"--{name.replace('_', '-')}", given[name])
             if name in given else None)
    if typed is not None:
        return typed
    if name in FIELD_HELP and name not in given:
        option = f"--{name.replace('_', '-')}"
        v = kw[name] if name in kw else next(
            f.default for f in dataclasses.fields(WorkloadConfig) if f.name == name)
        head = f"{name}={v!r} "
        if msg.startswith(head):  # "demands_dpo=(2, 4, 8)" as the option would be typed
            shown = (",".join(map(str, v)) if isinstance(v, tuple)
                     else f"{v:g}" if isinstance(v, float) else str(v))
            msg = f"{option}={shown} {msg[len(head):]}"
        return msg + f" (the default of {option}, which the options given rule out)"
    return msg


def _sim_config(args: argparse.Namespace, workload: WorkloadConfig, scheduler, policy,
                metrics: tuple) -> SimConfig:
    """``SimConfig``, whose checks across parts (``--n-evals`` against the policy's ``k``)
    are worded as the options were typed, as ``workload_from_args`` words the workload's."""
    try:
        return SimConfig(workload, scheduler, policy, metrics)
    except ConfigError as exc:
        msg = str(exc)
        for ref in metrics:  # "metric='m:f' cannot be imported" -> "--metric=m:f cannot ..."
            for what in ("metric", "metrics"):
                typed = as_typed(msg, what, ref, "--metric", ref)
                if typed is not None:
                    raise ConfigError(typed) from None
        typed = as_typed(msg, "metrics", tuple(metrics), "--metric", "")
        if typed is not None:  # a refusal of the list (one named twice), as it was typed:
            # "--metric=A, A" is a form the option itself refuses
            raise ConfigError(" ".join(f"--metric {m}" for m in metrics)
                              + typed[len("--metric="):]) from None
        kw = {f.name: getattr(workload, f.name) for f in dataclasses.fields(WorkloadConfig)}
        given = {f.name: getattr(args, f.name) for f in dataclasses.fields(WorkloadConfig)
                 if getattr(args, f.name, None) is not None}
        raise ConfigError(_as_option(msg, kw, given)) from None


def note_inert(args: argparse.Namespace, cfg: SimConfig, baseline) -> None:
    """One ``note:`` line on stderr per workload option given that changes no result
    (``inert_settings``): the run goes on, but whoever typed it thought it mattered."""
    given = [f.name for f in dataclasses.fields(WorkloadConfig)
             if getattr(args, f.name, None) is not None] + ["policy", "baseline"]
    jobs = args.jobs_out is not None  # the per-job records carry t_est_h
    for name, why in inert_settings(cfg, baseline, given, jobs=jobs).items():
        print(f"note: --{name.replace('_', '-')} has no effect: {why}", file=sys.stderr)
    if (why := self_baseline(cfg.policy, baseline)) is not None:
        print(f"note: --baseline {args.baseline} is --policy {args.policy}: {why}",
              file=sys.stderr)


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends ``(default: X)`` only where the help does not already say it, and never
    ``(default: None)``."""

    def _get_help_string(self, action):
        if action.default is None or action.nargs == 0 or "(default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run", help="simulate one scheduler + stop policy against a baseline",
        description="Simulate CLUSTERS independent clusters under a base scheduler and a stop "
        "policy, and the same clusters (common random numbers) under the baseline policy; print "
        "every metric with its 95% confidence interval and the paired change.  A workload "
        "option given that no result reads (--base-rate with no RLHF job in --mix, "
        "--preempt-overhead-h under a non-preemptive scheduler) is said in one note: line on "
        "stderr, and the run goes on.  Threads: NUMBA_NUM_THREADS (one per core when unset; "
        "the same bits for any count).",
        epilog=examples(
            ("fastsim run --scheduler fifo --policy stop_at:f=0.65 --sigma 0.05",
             "a policy over another scheduler, at another evaluation noise"),
            ("fastsim run --policy evalstop:k=3 --baseline evalstop:k=2 --clusters 1000",
             "changes paired against another policy instead of none"),
            ("fastsim run --mix mixed --base-rate 0.3 --out cells.parquet",
             "another workload; the per-cluster results of both arms kept")),
        formatter_class=_HelpFormatter)
    p.add_argument("--scheduler", default=D.SCHEDULER,
                   help="base scheduler NAME[:key=value,...] or MODULE:KEY[:...] (a user's "
                   "@scheduler_key): " + R.help_text("scheduler").replace("%", "%%"))
    p.add_argument("--policy", default=f"{D.POLICY}:k={D.K}",
                   help="stop policy NAME[:key=value,...] or MODULE:FUNCTION[:...] (a user's "
                   "@stop_policy): " + R.help_text("policy").replace("%", "%%")
                   + "; every policy takes scope=rlhf|all, rlhf unless given")
    p.add_argument("--metric", action="append", default=[], metavar="MODULE:FUNCTION",
                   help="also compute this user metric (a @cluster_metric) per cluster; "
                   "repeatable (default: none)")
    p.add_argument("--baseline", default="none",
                   help="policy to compare against on the same clusters, any --policy spec, "
                   "or 'off' (no baseline, no change rows) (default: none, the policy that "
                   "never stops)")
    p.add_argument("--clusters", type=integer_option, default=D.CLUSTERS,
                   help=f"independent clusters to simulate, {RUN_CLUSTERS_ALLOWED}; a run its "
                   "first 500 clusters show to need more than a minute says how long, in one "
                   "line on stderr")
    p.add_argument("--seed", type=integer_option, default=D.SEED,
                   help="random seed, an integer >= 0; cluster i of a seed is the same cluster "
                   "under every policy")
    p.add_argument("--out", type=file_path, default=None,
                   help="write per-cluster results (both arms) to this Parquet file (default: none, "
                   "only the table is printed)")
    p.add_argument("--jobs-out", type=file_path, default=None,
                   help="also write per-job records of both arms to this Parquet file (default: "
                   "none)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    add_workload_options(p)
    p.set_defaults(func=run_command)


def _run_arms(arms: list[tuple[str, SimConfig]], n: int, seed: int, keep_clusters: bool,
              keep_jobs: bool, bar: tqdm | None):
    """Simulate the arms chunk by chunk on the same clusters and summarise as they come,
    so memory does not grow with ``n`` unless per-cluster or per-job rows are kept."""
    from fastsim.api import run_workload
    from fastsim.summary import CellSummary
    from fastsim.workload import generate_workload

    cell = CellSummary()
    kept = {name: ([], []) for name, _ in arms}
    reuse = not (keep_clusters or keep_jobs)  # kept frames may share the buffer's memory
    w = None
    t0 = time.perf_counter()
    for start in range(0, n, CHUNK):
        size = min(CHUNK, n - start)
        # Both arms run on the same clusters: one workload, into one buffer per run.
        buffer = w if reuse and w is not None and w.n_clusters == size else None
        w = generate_workload(arms[0][1].workload, size, seed, start, out=buffer,
                              scheduler=arms[0][1].scheduler)
        chunk = {}
        for name, cfg in arms:
            r = run_workload(cfg, w, keep_jobs=keep_jobs, seed=seed)
            chunk[name] = r.clusters
            if keep_clusters:
                kept[name][0].append(r.clusters)
            if keep_jobs:
                kept[name][1].append(r.jobs)
            if bar is not None:
                bar.update(r.clusters.height)
        cell.add(chunk["policy"], chunk.get("baseline"))
        if start == 0 and n > size:
            say_estimate(n, size, time.perf_counter() - t0)
    return cell.table(), kept


ESTIMATE_FROM_S = 60.0  # a run estimated to take longer says how long, once


def say_estimate(n: int, done: int, elapsed_s: float) -> None:
    """How long the rest of a run of ``n`` clusters takes at the pace of its first ``done``,
    one line on stderr if past ``ESTIMATE_FROM_S``: without a terminal there is no bar, and
    a run of hours (up to ``MAX_RUN_CLUSTERS``) ran in silence."""
    left = elapsed_s / done * (n - done)
    if left >= ESTIMATE_FROM_S:
        print(f"note: --clusters {n}: about {_duration(left)} to go at {elapsed_s / done * 1e6:.0f}"
              f" us a cluster (the first {done}, every arm); Ctrl-C stops it", file=sys.stderr,
              flush=True)


def _duration(s: float) -> str:
    for unit, size in (("years", 365.25 * 86400), ("days", 86400), ("h", 3600), ("min", 60)):
        if s >= size:
            return f"{s / size:.3g} {unit}"
    return f"{s:.0f} s"


def _check_memory(w: WorkloadConfig, n: int, n_arms: int, keep_clusters: bool,
                  keep_jobs: bool) -> None:
    """Per chunk a simulation; kept only for --out / --jobs-out: every cluster's metrics
    (and every job) of every arm; the streamed summary is bounded."""
    from fastsim.memory import check_fits, results_bytes, simulate_bytes, summary_bytes

    def need(c: int) -> int:
        kept = n_arms * results_bytes(c, w.n_jobs, keep_jobs) if keep_clusters or keep_jobs else 0
        return (simulate_bytes(min(CHUNK, c), w.n_jobs, w.n_evals, keep_jobs) + kept
                + summary_bytes(c, n_arms))
    check_fits(need, n, "--clusters", f"n_jobs={w.n_jobs}, n_evals={w.n_evals}"
               + (", --jobs-out" if keep_jobs else ""))


def run_command(args: argparse.Namespace) -> int:
    # imported here, not at the top: the parser, --help and usage errors need none of them
    from fastsim.progress import progress_bar

    from fastsim.api import simulate
    from fastsim.compile_notice import compile_notice
    from fastsim.summary import format_table

    workload, cfg, base_policy, base_cfg = _configs(args)
    note_inert(args, cfg, base_policy)
    keep_jobs = args.jobs_out is not None
    arms = [("policy", cfg)] + ([("baseline", base_cfg)] if base_cfg else [])
    within = _check_outputs(args, workload, len(arms))
    total = args.clusters * len(arms)
    with compile_notice(cfg.scheduler.code):
        simulate(cfg, 1, seed=args.seed)  # compile, or load the cache, before the clock
    t0 = time.perf_counter()
    show = not args.no_progress and sys.stderr.isatty() or os.environ.get("FASTSIM_PROGRESS") == "1"
    with progress_bar(total=total, unit="cluster", desc="simulating", enabled=show,
                      mininterval=0.5, delay=2.0) as bar:
        summary, kept = _run_arms(arms, args.clusters, args.seed, args.out is not None,
                                  keep_jobs, bar)
    elapsed = time.perf_counter() - t0
    title = _title(args, workload, arms, elapsed)
    written = _write_outputs(args, arms, kept, within)  # first: a failed write prints no results
    print(format_table(summary, title))
    for path in written:
        print(f"wrote {path}")
    return 0


def _configs(args: argparse.Namespace) -> tuple:
    """The run's workload, the policy's ``SimConfig``, the baseline policy and its
    ``SimConfig`` (both ``None`` with ``--baseline off``), or the refusal of an option."""
    if not 1 <= args.clusters <= MAX_RUN_CLUSTERS:
        raise ConfigError(f"--clusters={args.clusters} is invalid; allowed: "
                          f"{RUN_CLUSTERS_ALLOWED}")
    if not 0 <= args.seed <= MAX_SEED:
        raise ConfigError(f"--seed={args.seed} is invalid; allowed: an integer from 0 to 2^64-1")
    workload = workload_from_args(args)
    cfg = _sim_config(args, workload,
                      parse_flag(SchedulerConfig.parse, args.scheduler, "--scheduler"),
                      parse_flag(PolicyConfig.parse, args.policy, "--policy"),
                      tuple(args.metric))
    base_policy = parse_baseline(args.baseline, "--baseline", "off")
    base_cfg = None if base_policy is None else _sim_config(args, workload, cfg.scheduler,
                                                            base_policy, cfg.metrics)
    return workload, cfg, base_policy, base_cfg


def _check_outputs(args: argparse.Namespace, workload: WorkloadConfig, n_arms: int) -> list:
    """--out and --jobs-out checked, distinct and within memory before the run; the
    directories ``check_output`` found, which ``_write_outputs`` writes in."""
    from fastsim.io import check_distinct, check_output

    # the directories they go in as they are now: none is made again if moved meanwhile
    within = [d for d in (check_output(args.out, "--out", (".parquet",)),
                          check_output(args.jobs_out, "--jobs-out", (".parquet",))) if d]
    check_distinct({"--out": args.out, "--jobs-out": args.jobs_out})
    _check_memory(workload, args.clusters, n_arms, args.out is not None,
                  args.jobs_out is not None)
    return within


def _title(args: argparse.Namespace, workload: WorkloadConfig, arms: list,
           elapsed: float) -> str:
    """The table's heading: what ran against what, on which workload and clusters, how
    its numbers are estimated, and a note on an arm that reads the hidden truth."""
    cfg, base_cfg = dict(arms)["policy"], dict(arms).get("baseline")
    mix = workload.mix if isinstance(workload.mix, str) else ",".join(map(str, workload.mix))
    title = (f"fastsim run: {cfg.policy.label} over {cfg.scheduler.label}"
             + (f" vs {base_cfg.policy.label}" if base_cfg else "")
             + f"\nworkload: mix={mix}, {workload.gpus} GPUs, {workload.n_jobs} jobs, load "
             f"{workload.load:g}, sigma {workload.sigma:g}, base_rate {workload.base_rate:g}; "
             f"{counted(args.clusters, 'cluster')}, seed {args.seed}; "
             f"simulated in {elapsed:.1f} s\n"
             "estimates are means over clusters with 95% t intervals; detection rates and delay "
             "pooled over clusters (cluster bootstrap joined with a t interval; rates widened to "
             "the exact binomial interval)"
             + ("; changes are means of per-cluster relative changes (policy / baseline - 1), "
                "paired on identical clusters" if base_cfg else ""))
    for arm, c in arms:
        if c.policy.uses_hidden_truth:
            title += (f"\nNOTE: the {arm}, {c.policy.label}, reads the hacking labels and "
                      "gold peak: an upper bound, not a policy")
    return title


def _write_outputs(args: argparse.Namespace, arms: list, kept: dict, within: list) -> list:
    """--out (per-cluster rows of both arms) and --jobs-out, both written or neither,
    ``within`` the directories ``check_output`` found before the run; the paths written."""
    import polars as pl

    from fastsim.io import table_writer, write_all

    outputs = []
    if args.out is not None:
        frames = [pl.concat(kept[name][0]).with_columns(
                      pl.lit(name).alias("arm"), pl.lit(c.policy.label).alias("policy"),
                      pl.lit(c.scheduler.label).alias("scheduler"))
                  for name, c in arms]
        outputs.append((args.out, pl.concat(frames)))
    if args.jobs_out is not None:
        frames = [pl.concat(kept[name][1]).with_columns(pl.lit(name).alias("arm"))
                  for name, _ in arms]
        outputs.append((args.jobs_out, pl.concat(frames)))
    write_all([(path, table_writer(df, path)) for path, df in outputs], within=within)
    return [path for path, _ in outputs]
