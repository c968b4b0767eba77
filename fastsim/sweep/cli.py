"""``fastsim sweep``, ``fastsim figures`` and ``fastsim reproduce``."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

# fastsim reproduce's clusters per cell from the light defaults module, not from
# fastsim.sweep.reproduce, whose imports (numba, polars) --help would pay for
from fastsim.cli import examples
from fastsim.defaults import FULL_CLUSTERS, QUICK_CLUSTERS
from fastsim.errors import ConfigError, counted
from fastsim.values import (file_path, integer_option, kept_as_typed, number_option,
                            read_number)

DASK_TIMEOUT = 60.0  # seconds, --dask-timeout's default


def _add_backend(p: argparse.ArgumentParser, quiet: str = "no progress bar") -> None:
    p.add_argument("--backend", choices=("local", "dask"), default="local",
                   help="run chunks in this process (default) or on a Dask cluster")
    p.add_argument("--address", help="Dask scheduler address, e.g. tcp://host:8786; without "
                   "it, --backend dask starts a local cluster and prints its dashboard link "
                   "(default: none)")
    p.add_argument("--workers", type=integer_option, default=None, metavar="N",
                   help="worker processes of that local Dask cluster (default: one per core)")
    # read by check_backend, whose refusal echoes the text (0.00, not 0.0)
    p.add_argument("--dask-timeout", type=kept_as_typed(number_option), default=None,
                   metavar="S",
                   help="seconds to wait for a first Dask worker, and mid-sweep for a worker "
                   "when none is left before stopping (resumable); the scheduler must answer "
                   f"within 10 s or this, whichever is shorter (default {DASK_TIMEOUT:g})")
    p.add_argument("--no-progress", dest="progress", action="store_false", help=quiet)


def _figures_time(info: dict) -> str:
    """`` (+ figures 6 s)``; nothing under ``--no-figures``, which drew none in 0 s."""
    return "" if info["figures_dir"] is None else f" (+ figures {info['seconds_figures']:.0f} s)"


def register(subparsers) -> None:
    """Add the ``sweep``, ``figures`` and ``reproduce`` subcommands."""
    _register_sweep(subparsers)
    _register_figures(subparsers)
    _register_reproduce(subparsers)


def _register_sweep(subparsers) -> None:
    p = subparsers.add_parser(
        "sweep", help="run a sweep file (resumable) and aggregate it",
        description="Expand a sweep file's grid, run its missing chunks of clusters, write "
        "per-cluster Parquet per cell and an aggregated table (mean, 95% CI, n; paired "
        "against each cell's baseline: its workload and scheduler under the file's baseline "
        "policy, any fastsim run --baseline spec, none by default). Re-running resumes, "
        "re-running any chunk that fails its checksum; a changed grid is refused; a damaged or "
        "deleted sweep.json is rebuilt when every chunk record names this grid; one process "
        "at a time owns --out (a lock). Threads (local backend): NUMBA_NUM_THREADS (one per "
        "core when unset; the same bits for any count).",
        epilog=examples(
            ("fastsim sweep noise --out results/noise --clusters 200",
             "the noise sweep shipped with fastsim, at 200 clusters per cell"),
            ("fastsim sweep my.toml --out results/my",
             "your own grid of sigma, base_rate, k, ... (its format: docs/sweeps.md)")))
    p.add_argument("file", type=file_path, help="sweep definition: a TOML file, or the name of a "
                   "sweep shipped with fastsim (headline, noise, base_rate, k_sweep, ...)")
    p.add_argument("--out", type=Path, required=True,
                   help="output directory (created; locked while the sweep runs)")
    p.add_argument("--clusters", type=integer_option, metavar="N",
                   help="clusters per cell, an integer >= 1; 95%% intervals need >= 2 (default: "
                   "the file's)")
    p.add_argument("--chunk", type=integer_option, metavar="N",
                   help="clusters per chunk, the unit of work and of resume, >= 1 (default: "
                   "the file's)")
    p.add_argument("--seed", type=integer_option, metavar="INT",
                   help="seed, an integer >= 0; cluster i of a seed is the same cluster in "
                   "every cell (default: the file's)")
    p.add_argument("--keep-jobs", action="store_true",
                   help="also write per-job records (jobs-*.parquet; large)")
    _add_backend(p)
    p.set_defaults(func=cmd_sweep)


def _register_figures(subparsers) -> None:
    f = subparsers.add_parser("figures",
                              help="draw the paper figures from a sweep or reproduce directory",
                              description="Draw the paper's figures (PNG and PDF) from "
                              "aggregated Parquet in DIR (a sweep or reproduce output); a "
                              "figure whose sweep is not in DIR is skipped, and says so, as is "
                              "one that plots changes against no stop policy from a sweep whose "
                              "baseline is another. A sweep no paper figure reads (a name of "
                              "your own) gets a figure of its own, sweep_NAME: one panel per "
                              "metric (--metrics) against the sweep's first varying axis (--x), "
                              "its second as colour, its third as columns of panels, each point "
                              "with its 95% interval as an error bar and n under the figure; "
                              "a sweep varying more than three axes (--where holds one at a "
                              "value), or more than 10 values as colours or 6 as columns, is "
                              "skipped, saying so. A DIR with "
                              "nothing to draw is refused. The "
                              "cost-aware figures are drawn by fastsim costaware figures, the "
                              "documentation's by fastsim docs-figures. A figure knows a "
                              "sweep by its name (name = ... in the file, else its stem).",
                              epilog=examples(
                                  ("fastsim figures results/reproduce-quick --formats png",
                                   "the paper's figures of fastsim reproduce --quick, PNG only"),
                                  ("fastsim figures results/noise --formats svg",
                                   "the figure of one sweep (one named noise: noise_sweep)")))
    f.add_argument("dir", type=Path, help="results directory: a sweep's --out, or a directory "
                   "of them (fastsim reproduce's --out)")
    f.add_argument("--out", type=Path, metavar="DIR",
                   help="where to write figures (default: DIR/figures); refused while "
                   "another process holds a sweep directory it is in")
    f.add_argument("--formats", default="png,pdf", metavar="F,F,...",
                   help="file formats, comma-separated, each png, pdf or svg, named once "
                   "(default: png,pdf)")
    f.add_argument("--metrics", metavar="M,M,...",
                   help="the panels of the figure of a sweep no paper figure reads: metrics of "
                   "its summary (summary.parquet's metric column, e.g. precision, recall, "
                   "stop_recall, fpr, jct_mean_h, jct_mean_h_change), comma-separated, each "
                   "named once, at most 8 (default: precision,stop_recall,fpr,jct_mean_h)")
    f.add_argument("--x", metavar="AXIS",
                   help="the axis along x of the figure of a sweep no paper figure reads: one "
                   "the sweep varies (default: the first in its file)")
    f.add_argument("--where", action="append", metavar="AXIS=VALUE",
                   help="hold an axis of that figure at one of its values (e.g. sigma=0.02, "
                   "policy=evalstop(k=2)), so that a sweep of four axes can be drawn; "
                   "repeatable, one per axis (default: none held)")
    f.set_defaults(func=cmd_figures)


def _register_reproduce(subparsers) -> None:
    r = subparsers.add_parser(
        "reproduce", help="run the paper's sweeps, draw figures, write REPRODUCTION.md",
        description="Run every paper sweep (the sweep files shipped with fastsim) at one size, "
        "draw the figures and write a table of MODEL.md section 9: paper value, ours with 95% "
        "CI and n, the pre-registered tolerance, the verdict (match, miss, not comparable, "
        "fitted) and whether a parameter was fitted to the row; the headline counts matched "
        "held-out rows. Everything goes under OUT; an interrupted run resumes.")
    r.add_argument("--quick", action="store_true",
                   help=f"smaller run: {QUICK_CLUSTERS} clusters per cell (with numba's "
                   "cache warm on 2 cores, sweeps 11 s and figures 9 s at load 2, up to "
                   "56 s and 59 s at load 9), written under results/reproduce-quick")
    r.add_argument("--clusters", type=integer_option, metavar="N",
                   help=f"clusters per cell, at least 2 (default {FULL_CLUSTERS}; with --quick "
                   f"{QUICK_CLUSTERS})")
    r.add_argument("--chunk", type=integer_option, metavar="N",
                   help="clusters per chunk, the unit of work and of resume (default: each "
                   "sweep file's)")
    r.add_argument("--out", type=Path, metavar="DIR",
                   help="results directory (default results/reproduce, or "
                   "results/reproduce-quick with --quick), locked while the run lasts; "
                   "refused while another process holds it or a sweep directory in it, "
                   "and if it holds files that are not a reproduction's own")
    r.add_argument("--figures-dir", type=Path, metavar="DIR",
                   help="where the PNG and PDF figures go (default OUT/figures; the "
                   "repository's committed ones are made with --figures-dir figures)")
    r.add_argument("--report", type=file_path, metavar="FILE",
                   help="the Markdown report (default OUT/REPRODUCTION.md; the repository's is "
                   "made with --report REPRODUCTION.md)")
    r.add_argument("--no-figures", action="store_true", help="skip drawing figures")
    _add_backend(r, quiet="no progress bars, nor the line per sweep and per figure drawn "
                 "(a figure skipped is still said): silent until the table")
    r.set_defaults(func=cmd_reproduce)


def _finish_sweep(args, grid, store) -> None:
    from fastsim.sweep.aggregate import aggregate

    paths = aggregate(store, progress=args.progress)
    print(f"{grid.name}: {counted(len(grid.cells), 'cell')} x "
          f"{counted(grid.clusters, 'cluster')} -> "
          f"{paths['summary']} (tables: {paths['text']})")


def check_backend(args) -> None:
    """The Dask options, checked before any work; a value first, wrong wherever it is given."""
    timeout = args.dask_timeout
    if timeout is not None:  # a float64 by number_text: finite
        timeout = read_number(args.dask_timeout, "--dask-timeout")
        if not timeout > 0:
            raise ConfigError(f"--dask-timeout={args.dask_timeout} is invalid; allowed: "
                              "seconds > 0")
    if args.workers is not None and args.workers < 1:
        raise ConfigError(f"--workers={args.workers} is invalid; allowed: an integer >= 1")
    given = [flag for flag, value in (("--address", args.address), ("--workers", args.workers),
                                      ("--dask-timeout", args.dask_timeout)) if value is not None]
    if args.backend != "dask" and given:  # taken without a word, and never used
        named = " and ".join([", ".join(given[:-1]), given[-1]] if len(given) > 1 else given)
        them = "it" if len(given) == 1 else "them"
        raise ConfigError(f"{named} appl{'ies' if len(given) == 1 else 'y'} to --backend dask "
                          f"only; allowed: --backend dask with {them}, or without {them}")
    args.dask_timeout = DASK_TIMEOUT if timeout is None else timeout
    if args.address is not None and args.workers is not None:
        raise ConfigError("--workers sizes a local cluster; with --address the scheduler's "
                          "own workers run the chunks; allowed: one of --workers and --address")
    from fastsim.sweep.runner import check_address
    check_address(args.address)


def cmd_sweep(args) -> int:
    from fastsim.resources import sweep_file
    from fastsim.sweep.grid import load_sweep
    from fastsim.sweep.runner import check_sweep_memory, held_run, local_workers

    check_backend(args)
    grid = load_sweep(sweep_file(args.file), clusters=args.clusters, chunk=args.chunk,
                      seed=args.seed, options=True)
    check_sweep_memory(grid, args.keep_jobs,
                       local_workers(args.backend, args.address, args.workers))
    for line in grid.inert_notes(args.keep_jobs):
        print(f"note: {line}", file=sys.stderr)
    with held_run(grid, args.out, backend=args.backend, address=args.address,
                  workers=args.workers, timeout=args.dask_timeout, keep_jobs=args.keep_jobs,
                  progress=args.progress, announce=True, say_resumed=True) as (store, _):
        _finish_sweep(args, grid, store)
    return 0


def cmd_figures(args) -> int:
    from fastsim.sweep.figures import draw_all, parse_formats

    formats = parse_formats(args.formats, "--formats")
    written = draw_all(args.dir, args.out or args.dir / "figures", formats,
                       metrics=args.metrics, x=args.x, where=args.where)
    print(f"{counted(len(written), 'file')} written to "
          f"{args.out or args.dir / 'figures'}")
    return 0


def cmd_reproduce(args) -> int:
    from fastsim.sweep.reproduce import check_clusters, default_command, hold_outputs, reproduce

    check_backend(args)
    if args.no_figures and args.figures_dir is not None:  # taken without a word, never used
        raise ConfigError("--figures-dir is given with --no-figures, which draws no figure; "
                          "allowed: one of them")
    default = QUICK_CLUSTERS if args.quick else FULL_CLUSTERS
    # 0 is a value given, refused: ``or`` took it for no value and ran the default
    clusters = check_clusters(default if args.clusters is None else args.clusters, "--clusters=")
    out = args.out or Path("results") / ("reproduce-quick" if args.quick else "reproduce")
    figures = args.figures_dir or out / "figures"
    report = args.report or out / "REPRODUCTION.md"
    from fastsim.io import check_output, check_output_dir

    held = hold_outputs(out, None if args.no_figures else figures, report)  # noqa: F841
    check_output_dir(out)
    check_output(report, "--report", None)
    if not args.no_figures:
        check_output_dir(figures, "--figures-dir")
    info = reproduce(out, clusters=clusters, chunk=args.chunk, seed=0,
                     figures_dir=None if args.no_figures else figures, report=report,
                     backend=args.backend, address=args.address, workers=args.workers,
                     timeout=args.dask_timeout, progress=args.progress,
                     command=default_command(None), options=True)
    from fastsim.sweep.reproduce import (headline_count, not_comparable_note, text_table,
                                         uncounted_note)
    matched, held = headline_count(info["rows"])
    print("EvalStop paper (arXiv 2606.04145) vs fastsim: rlhf_heavy, 64 GPUs, k = 2 unless "
          f"stated; {counted(clusters, 'cluster')} per cell, paired on identical clusters\n")
    print(text_table(info["rows"]))
    print()
    resumed = (f", {info['chunks_skipped']} chunks already done and reused"
               if info["chunks_skipped"] else "")
    compiled = ", numba's one-time compilation included" if info.get("compiled") else ""
    print(f"reproduce: {counted(info['n_cells'], 'cell')} x {counted(clusters, 'cluster')} in "
          f"{info['seconds_sweeps']:.0f} s{compiled}{resumed}{_figures_time(info)}; "
          f"{matched} of {held} held-out paper rows matched{not_comparable_note(info['rows'])} "
          f"(pre-registered tolerances{uncounted_note(info['rows'])}); "
          f"report: {report}")
    return 0
