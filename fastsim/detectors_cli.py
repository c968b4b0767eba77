"""``fastsim detectors``: the detector benchmark (docs/detectors.md).

Synthetic workloads at each noise level and base rate, every detector setting of
``SETTINGS`` applied to the observed scores, and (given a trace set) the same
detectors on the toy-RLHF traces.  Writes ``synthetic.parquet``, ``traces.parquet``,
``table.md`` and the Pareto figures; nothing is written until everything is computed.
The benchmark's modules (numba, polars, scipy) are imported by the functions that use
them: the parser, ``--help`` and usage errors need none of them.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from fastsim.errors import ConfigError, counted
from fastsim.values import file_path, integer_option, kept_as_typed, number_option, read_number

if TYPE_CHECKING:  # annotations only
    import polars as pl

SIGMAS = (0.0, 0.01, 0.02, 0.05, 0.08, 0.12, 0.15)
BASE_RATES = (0.2, 0.4, 0.6, 0.8)
TABLE_SIGMAS = (0.02, 0.05, 0.12)
BOUND_CLUSTERS = 100  # the bounds integrate a grid per job: fewer clusters than the grid


def settings(sigma: float) -> list[tuple[str, dict]]:
    """Every setting the benchmark measures at noise ``sigma``: each detector's default
    (``det.default_params``) and a few neighbours along its main knob."""
    from fastsim import detectors as det

    out = [("evalstop", {"k": 2}), ("evalstop", {"k": 3})]
    for p in (1, 2, 3):
        for a in (0.0, 1.0, 2.0):
            out.append(("patience", {"patience": p, "threshold": a * sigma}))
    for k in (1, 2):
        for z in (0.5, 1.0, 2.0):
            out.append(("margin", {"k": k, "z": z, "sigma0": sigma}))
    for drift in (0.0, 0.5):
        for h in (1.0, 1.5, 2.0, 3.0, 4.0):
            out.append(("cusum", {"drift": drift, "h": h, "sigma0": sigma}))
    def peak(z, sigma0=sigma, min_evals=4, origin=1, gamma=1.0):
        return ("peak", {"z": z, "sigma0": sigma0, "min_evals": min_evals, "origin": origin,
                         "window": 0, "gamma": gamma})
    out += [peak(z) for z in (0.5, 1.0, 1.3, 1.65, 2.33)]
    out += [peak(z, min_evals=5) for z in (1.0, 1.3)]
    out += [peak(1.0, sigma0=s0) for s0 in (0.0, 2 * sigma)]  # a wrong noise prior
    out += [peak(z, origin=0) for z in (0.5, 1.0, 1.65, 2.33)]
    out += [peak(z, origin=0, gamma=0.5) for z in (1.0, 1.3, 1.65, 2.33, 3.0)]  # trace-like KL growth
    out += [peak(z, min_evals=6) for z in (2.33, 3.0, 3.5)]  # the high-precision end (goal 2)
    for z in (0.5, 1.0, 1.65):
        out.append(("bocpd", {"hazard": 0.2, "z": z, "sigma0": sigma, "prior_sd": 0.1}))
    # every declared detector at its defaults, so a new declaration is measured too
    out += [(n, det.default_params(n, sigma)) for n in det.DETECTORS
            if (n, det.default_params(n, sigma)) not in out]
    return out


def trace_settings(noise: float) -> list[tuple[str, dict]]:
    """Settings on real traces, whose scores do not start at 0 (``origin=0``), with the
    local fit (``window`` 6 and 8) next to the global one."""
    out = []
    for name, params in settings(noise):
        if name == "peak":
            if params["origin"] == 1 or params["sigma0"] != noise or params["gamma"] != 1.0:
                continue
            for window in (0, 6, 8):
                out.append((name, {**params, "min_evals": max(4, window), "window": window}))
        else:
            out.append((name, params))
    # CUSUM's neighbours between the grid's steps, where it is best on real traces
    out += [("cusum", {"drift": 0.0, "h": h, "sigma0": noise}) for h in (1.25, 1.75)]
    # the global fit on the traces' own KL growth (sqrt(KL) ~ u^0.43-0.51)
    out += [("peak", {"z": z, "sigma0": noise, "min_evals": 4, "origin": 0, "window": 0,
                      "gamma": 0.5}) for z in (1.0, 1.65, 2.1, 2.33)]
    # chosen after a finer search on these same traces (docs/detectors.md, goal 3): the
    # multiple-comparison correction of the goal-3 table counts every setting here
    out += [("cusum", {"drift": 0.0, "h": 1.05, "sigma0": noise}),
            ("bocpd", {"hazard": 0.2, "z": 0.0, "sigma0": noise, "prior_sd": 0.1})]
    return out


# settings tried on the traces in all, counting the finer search behind the last few of
# trace_settings (cusum h 0.8-1.45 x drift {0, 0.25}, peak z 1.5-2.5 x min_evals {4, 6, 8},
# margin k {1, 2} x z 0.5-1.2, bocpd hazard {0.05, 0.1, 0.2} x z {0, 0.25, 0.5}): the
# Bonferroni factor of the goal-3 table
TRACE_SEARCH_SIZE = 28 + 33 + 16 + 9


# what a first run compiles, beside the simulation kernel that draws the workloads: the
# stop decisions and the bootstrap (their cache files' names)
KERNELS = ("stops.resolve_stops_nb", "bootstrap.bootstrap_sums_nb")


def _compile_first(seed: int) -> None:
    """Compile the kernels on a tiny grid under the project's notice, unless they are
    cached: a first run's first cell compiled them for 30-140 s behind a progress bar at
    0%, without a word (compiled apart, so the spinner and the bars share no line)."""
    from fastsim import detectors as det
    from fastsim.compile_notice import compile_notice, engine_is_cached, kernels_cached

    if engine_is_cached() and kernels_cached(*KERNELS):
        return
    with compile_notice(cached=False, what="the detector benchmark's kernels",
                        seconds="30-140"):
        det.run_grid(SIGMAS[:1], BASE_RATES[:1], settings, n_clusters=2, seed=seed)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "detectors", help="benchmark the online stop detectors against EvalStop (k=2)",
        description="Precision, recall, stop recall, FPR, delay, reclaimed GPU-hours and "
        "delivered gold regret of every detector setting, at noise 0..0.15 and base rates "
        "0.2..0.8 (95% intervals), and on a toy-RLHF trace set (docs/detectors.md).")
    p.add_argument("--out", type=Path, default=Path("results/detectors"), metavar="DIR",
                   help="directory for synthetic.parquet, traces.parquet, table.md, figures "
                   "(default: results/detectors)")
    # None when not given: --quick sizes an unsized run, and --confirm refuses them
    p.add_argument("--clusters", type=integer_option, default=None, metavar="N",
                   help="clusters per cell, an integer from 2 to 1,000,000, and no more "
                   "than memory holds (default: 200; 50 with --quick)")
    p.add_argument("--seed", type=integer_option, default=None, metavar="INT",
                   help="seed of the synthetic workloads, >= 0 (default: 0)")
    p.add_argument("--traces", type=file_path, default=None,
                   help="traces.parquet from `fastsim traces toy-rlhf` (default: none, synthetic "
                   "workloads only)")
    # read by _check_values, whose refusal echoes the text (-1, not -1.0)
    p.add_argument("--trace-noise", type=kept_as_typed(number_option), default=None,
                   help="sigma0 on the traces, in score units, >= 0 (default: the median "
                   "run's sd of score - truth_gold; 0, as for scores equal to gold, leaves "
                   "the detectors to each run's residuals)")
    p.add_argument("--figures", type=Path, default=None,
                   help="where the Pareto figures go (default: OUT)")
    p.add_argument("--doc", type=file_path, default=None,
                   help="a markdown file whose fastsim-detectors block gets the tables (default: "
                   "none)")
    p.add_argument("--quick", action="store_true",
                   help="base rate 0.6 only, and 50 clusters per cell unless --clusters is given")
    p.add_argument("--confirm", type=file_path, default=None, metavar="PLAN",
                   help="run only the pre-registered comparison of PLAN (a TOML file, e.g. "
                   "docs/preregistration/detectors_goal3.toml) on --traces, which must be the "
                   "plan's fresh trace set; writes OUT/confirm.md and the doc's confirmation block "
                   "(default: none, the whole benchmark)")
    p.set_defaults(func=_cmd)


def _check_values(args: argparse.Namespace) -> None:
    """Every value given, checked before any work; --clusters and --seed get their
    defaults (which --quick sets)."""
    from fastsim.io import check_regular

    clusters = (50 if args.quick else 200) if args.clusters is None else args.clusters
    seed = 0 if args.seed is None else args.seed
    # named as typed, as --trace-noise is (a default is always in range)
    if not 2 <= clusters <= 1_000_000:
        raise ConfigError(f"--clusters={clusters} is invalid; allowed: an integer from 2 "
                          "to 1,000,000")
    if not 0 <= seed < 2**63:
        raise ConfigError(f"--seed={seed} is invalid; allowed: an integer from 0 to 2^63-1")
    # a cell's clusters are drawn and scored at once: --clusters 1000000 (allowed) was a
    # MemoryError traceback after the first cell's bar, or the process killed
    from fastsim.config import WorkloadConfig
    from fastsim.memory import check_fits, simulate_bytes

    w = WorkloadConfig()  # run_grid's, but for sigma and base_rate
    check_fits(lambda n: simulate_bytes(n, w.n_jobs, w.n_evals, keep_jobs=False), clusters,
               "--clusters", f"n_jobs={w.n_jobs}, n_evals={w.n_evals}")
    if args.traces is not None:
        check_regular(args.traces, "a traces.parquet", "--traces")
    if args.trace_noise is not None:
        noise = read_number(args.trace_noise, "--trace-noise")
        args.trace_noise = trace_sigma0(noise, "--trace-noise", args.trace_noise)
    _check_unused(args)  # a value is checked first: wrong wherever it is given
    args.clusters, args.seed = clusters, seed
    if args.doc is not None:
        check_regular(args.doc, "a markdown file with the fastsim-detectors block", "--doc")


def _cmd(args: argparse.Namespace) -> int:
    # imported here, not at the top: the parser, --help and usage errors need none of them
    import polars as pl

    from fastsim import detector_bounds as bounds
    from fastsim import detectors as det
    from fastsim.io import (bytes_writer, check_distinct, check_output_dir, existing_directory,
                            table_writer, write_all)

    _check_values(args)
    if args.confirm is not None:
        return _cmd_confirm(args)
    # the directories the outputs go in as they are now: none is made again if moved meanwhile
    within = [check_output_dir(args.out)]
    figures = args.figures or args.out
    if args.figures is not None:  # drawn last, after the tables: refused before any work
        figures_within = check_output_dir(args.figures, "--figures")
    if args.traces is not None:  # the traces table is written as OUT/traces.parquet
        check_distinct({"--out": args.out / "traces.parquet"}, inputs={"--traces": args.traces})
    if args.doc is not None:
        _check_doc_apart(args, TABLES)
        update_doc(args.doc, "")  # refuse a doc without the markers before any work
        within.append(existing_directory(args.doc.parent))
    # the traces are read, and refused, before the synthetic grid's minutes of work
    traces = None if args.traces is None else trace_table(_read_traces(args.traces),
                                                          args.trace_noise, args.traces)
    t0 = time.perf_counter()
    _compile_first(args.seed)
    n = args.clusters
    rates = (0.6,) if args.quick else BASE_RATES
    if sys.stderr.isatty():  # as the progress bars: on a terminal only
        # --quick: 1.5 CPU-minutes (90 s, 2.2 before the bounds shared their grids and ran
        # on numba's threads); 2.8 minutes on a busy 2-core machine (load 6), numba's cache
        # warm (docs/performance.md, "The detector bounds"): the one wall time measured
        print(f"fastsim detectors: {len(SIGMAS)} noise levels x {len(rates)} base rate(s) at "
              f"{n} clusters, then the bounds at {len(TABLE_SIGMAS)} noise levels (the slower "
              f"part; {'about 3 minutes' if args.quick else 'several minutes'} on 2 busy "
              "cores)", file=sys.stderr)
    synthetic = det.run_grid(SIGMAS, rates, settings, n_clusters=n, seed=args.seed, progress=True)
    bound = bounds.bounds(TABLE_SIGMAS, n_clusters=min(n, BOUND_CLUSTERS), seed=args.seed,
                          progress=True)
    table = markdown_table(synthetic, traces, bound)
    full = markdown_table(synthetic, traces, bound, short=False)
    doc = update_doc(args.doc, table) if args.doc is not None else None
    # every table and the doc, or none of them (a kill or a full disk leaves no mix of runs)
    outputs = [*((args.out / name, data) for name, data in
                 zip(TABLES, (synthetic, bound, traces, table, full))), (args.doc, doc)]
    write_all(((path, table_writer(data, path) if isinstance(data, pl.DataFrame)
                else bytes_writer(data.encode()))
               for path, data in outputs if data is not None), within=within)
    _draw_figure(args, figures, figures_within if args.figures is not None else None)
    print(table)
    print(f"fastsim detectors: {len(synthetic)} synthetic rows, {n} clusters per cell, "
          f"{time.perf_counter() - t0:.0f} s; wrote {args.out}", file=sys.stderr)
    return 0


def _draw_figure(args: argparse.Namespace, figures: Path, figures_within) -> None:
    """The Pareto figure, drawn from the tables just written: a drawing that fails (a full
    disk) says that the tables (and --doc) are written, so that minutes of work are not
    taken for lost."""
    from fastsim.io import make_directory, unmade_on_failure
    from fastsim.sweep.figures import load_script
    try:
        with unmade_on_failure() as made:  # --figures not left empty by a failed drawing
            if figures_within is not None:
                made.append(make_directory(args.figures, figures_within))
            load_script("detectors_pareto").main(args.out, figures)
    except ConfigError as exc:
        written = f"the tables under {args.out}" + (f" and {args.doc}" if args.doc else "")
        raise ConfigError(f"{exc}; {written} are written, the figure is not (a re-run "
                          "writes both)") from None


# what the benchmark writes under --out, in its order; --confirm writes CONFIRMED
TABLES = ("synthetic.parquet", "bounds.parquet", "traces.parquet", "table.md", "table_full.md")
CONFIRMED = "confirm.md"


def _check_doc_apart(args: argparse.Namespace, names: tuple[str, ...]) -> None:
    """--doc is rewritten in place: named as a file written under --out (OUT/table.md),
    one of the two writes replaced the other without a word; named as a file read, it
    would be written over."""
    from fastsim.io import check_distinct

    reads = {option: path for option, path in (("--traces", args.traces),
                                               ("--confirm", args.confirm)) if path is not None}
    check_distinct({"--doc": args.doc},
                   inputs={**{f"--out's {name}": args.out / name for name in names}, **reads})


# what only the synthetic benchmark reads: --confirm's plan fixes its own
BENCHMARK_ONLY = ("clusters", "seed", "quick", "figures", "trace_noise")


def _check_unused(args: argparse.Namespace) -> None:
    """An option given where it would not be used is refused, not dropped without a word
    (``--confirm --quick`` ran the plan as if ``--quick`` had not been typed)."""
    if args.trace_noise is not None and args.traces is None:
        # it sets the detectors' sigma0 on --traces
        raise ConfigError("--trace-noise is given but would not be used (it applies to "
                          "--traces); allowed: --trace-noise with --traces")
    if args.confirm is None:
        return
    for name in BENCHMARK_ONLY:
        if getattr(args, name) not in (None, False):
            option = "--" + name.replace("_", "-")
            raise ConfigError(f"{option} is given but would not be used (--confirm runs only "
                              f"its plan's comparison, with the plan's settings); allowed: "
                              f"{option} without --confirm")


def _cmd_confirm(args: argparse.Namespace) -> int:
    """The pre-registered test (``fastsim.detectors_confirm``), checks before any work."""
    from fastsim import detectors_confirm as cf
    from fastsim.io import bytes_writer, check_output_dir, existing_directory, write_all
    if args.traces is None:
        raise ConfigError("confirm needs --traces; allowed: the plan's fresh traces.parquet")
    within = [check_output_dir(args.out)]  # a file there failed after the comparison
    if args.doc is not None:
        _check_doc_apart(args, (CONFIRMED,))
        within.append(existing_directory(args.doc.parent))
    plan = cf.read_plan(args.confirm)
    arrays = cf.check_traces(_read_traces(args.traces), plan, args.traces)
    from fastsim.replay.traces import trace_origin
    print(trace_origin(args.traces), file=sys.stderr)
    if args.doc is not None:
        update_doc(args.doc, "", cf.START, cf.END)
    from fastsim.compile_notice import compile_notice, kernels_cached

    # no bar here: the notice spins while the comparison runs
    with compile_notice(cached=kernels_cached(*KERNELS), what="the detector benchmark's "
                        "kernels", seconds="10-60"):
        text = cf.markdown(cf.confirm(arrays, plan), args.confirm)
    doc = update_doc(args.doc, text, cf.START, cf.END) if args.doc is not None else None
    write_all(((path, bytes_writer(data.encode()))
               for path, data in ((args.out / CONFIRMED, text), (args.doc, doc))
               if data is not None), within=within)
    print(text)
    return 0


def _read_traces(path: Path) -> pl.DataFrame:
    import polars as pl

    from fastsim.detectors import TRACE_COLUMNS
    from fastsim.io import read_parquet_table
    from fastsim.replay.traces import check_trace_table

    traces = read_parquet_table(path, "traces.parquet from `fastsim traces toy-rlhf`")
    # every run a row of one [runs, evaluations] matrix (detectors.trace_arrays)
    traces = check_trace_table(traces, path, [*TRACE_COLUMNS, *(
        ["seed"] if "seed" in traces.columns else [])], equal_evals=True)
    # the noise is a standard deviation over a run's evaluations and the compute saved a
    # share of its last step: one evaluation, or steps that are not after 0, give NaN, which
    # was refused as 'num[0] = nan, den[0] = 1.0', after numpy's warnings
    allowed = "traces.parquet from `fastsim traces toy-rlhf`"
    if traces.height == traces["job_id"].n_unique():
        raise ConfigError(f"{path}: run {traces['job_id'][0]!r} has 1 evaluation; allowed: at "
                          f"least 2 per run ({allowed})")
    last = traces.group_by("job_id", maintain_order=True).agg(pl.col("step").max())
    bad = traces["step"] < 0
    if bad.any() or (last["step"] <= 0).any():
        i = int(bad.arg_max()) if bad.any() else 0
        where = (f"row {i + 1}: step is {traces['step'][i]}" if bad.any() else
                 f"run {last.filter(pl.col('step') <= 0)['job_id'][0]!r} ends at step 0")
        raise ConfigError(f"{path}: {where}; allowed: steps >= 0, each run's last after 0 "
                          f"({allowed})")
    return traces


def trace_sigma0(noise: float, where: str, typed: str | None = None) -> float:
    """``noise`` as the detectors' ``sigma0`` on the traces, in its declared range.  0 is
    one: the detectors then rely on each run's residuals alone (their noise estimate is
    floored, ``SIGMA_FLOOR``), as at the synthetic grid's noise 0, so a given 0 and a
    measured 0 (scores equal to gold) are read alike.  ``typed``: the text an option gave,
    which its refusal echoes."""
    from fastsim.registry import SIGMA0
    try:
        return SIGMA0.check(noise)
    except ConfigError:  # worded for the option or the file, not for a spec's sigma0=
        shown = repr(noise) if typed is None else typed
        raise ConfigError(f"{where}={shown} is invalid; allowed: {SIGMA0.allowed()}") from None


def trace_table(traces: pl.DataFrame, noise: float | None, path: Path | str = "traces"
                ) -> pl.DataFrame:
    import numpy as np
    import polars as pl

    from fastsim import detectors as det

    arrays = det.trace_arrays(traces)
    if noise is None:  # the median run's sd of score - gold: 0 if the scores are gold
        noise = trace_sigma0(float(np.median(np.std(arrays["score"] - arrays["gold"], axis=1,
                                                    ddof=1))), f"{path}: measured noise")
    rows = [det.trace_row(arrays, name, params) for name, params in trace_settings(noise)]
    return pl.DataFrame(rows).with_columns(pl.lit(noise).alias("sigma0"))


def _fmt(row: dict, m: str, scale: float = 100.0, digits: int = 1) -> str:
    import numpy as np

    from fastsim.stats import fmt_interval

    v, lo, hi = row[m], row[f"{m}_lo"], row[f"{m}_hi"]
    if v is None or not np.isfinite(v):
        return "n/a"
    if lo is None or lo != lo:  # one replication, or replications that all agree
        lo = hi = np.nan
    return fmt_interval(v * scale, lo * scale, hi * scale, f".{digits}f")


RATE_COLS = ("precision", "recall", "stop_recall", "fpr", "stop_fpr")
# rows of the short tables (docs/detectors.md); the full grid is in table_full.md
SHORT = ("evalstop(k=2)", "evalstop(k=3)", "patience(patience=2,threshold=0)", "margin(k=1,z=2)",
         "cusum(drift=0,h=2)", "bocpd(hazard=0.2,z=0.5,prior_sd=0.1)",
         "peak(z=1,min_evals=4,origin=0,window=0,gamma=0.5)",
         "peak(z=1.3,min_evals=4,origin=0,window=0,gamma=0.5)",
         "peak(z=1.65,min_evals=4,origin=0,window=0,gamma=0.5)",
         "peak(z=2.33,min_evals=4,origin=0,window=0,gamma=0.5)",
         "peak(z=1,min_evals=4,origin=0,window=0,gamma=1)", "peak(z=1,min_evals=4,origin=1,window=0,gamma=1)",
         "peak(z=1,min_evals=5,origin=1,window=0,gamma=1)")
SHORT_TRACES = ("evalstop(k=2)", "evalstop(k=3)", "patience(patience=2,threshold=0)",
                "patience(patience=3,threshold=0)", "margin(k=1,z=1)", "margin(k=2,z=0.5)",
                "cusum(drift=0,h=1)", "cusum(drift=0,h=1.25)", "cusum(drift=0,h=1.5)",
                "cusum(drift=0,h=2)", "bocpd(hazard=0.2,z=0.5,prior_sd=0.1)",
                "peak(z=1,min_evals=4,origin=0,window=0,gamma=1)", "peak(z=1,min_evals=6,origin=0,window=6,gamma=1)",
                "peak(z=1.65,min_evals=8,origin=0,window=8,gamma=1)",
                "peak(z=2.33,min_evals=8,origin=0,window=8,gamma=1)",
                "peak(z=1.65,min_evals=4,origin=0,window=0,gamma=0.5)",
                "peak(z=2.33,min_evals=4,origin=0,window=0,gamma=0.5)",
                "cusum(drift=0,h=1.05)", "bocpd(hazard=0.2,z=0,prior_sd=0.1)",
                "peak(z=2.1,min_evals=4,origin=0,window=0,gamma=0.5)")


def markdown_table(synthetic: pl.DataFrame, traces: pl.DataFrame | None,
                   bound: pl.DataFrame | None = None, short: bool = True) -> str:
    """The tables of docs/detectors.md: per noise level (base rate 0.6) rates in %, delay
    in evaluations, GPU-hours per cluster with the paired change against EvalStop(k=2);
    the traces; the Bayes bound.  ``short``: the rows of ``SHORT`` only."""
    import polars as pl

    lines = []
    for sigma in TABLE_SIGMAS:
        cell = synthetic.filter((pl.col("sigma") == sigma) & (pl.col("base_rate") == 0.6))
        if short:
            cell = cell.filter(pl.col("setting").is_in(SHORT))
        if cell.is_empty():
            continue
        r0 = cell.row(0, named=True)
        lines += [f"#### sigma = {sigma:g} (base rate 0.6, n = {r0['n_clusters']} clusters, "
                  f"{r0['n_hacking']} hacking / {r0['n_healthy']} healthy RLHF jobs)", "",
                  "| setting | precision % | recall % | stop recall % | FPR % | stop FPR % | delay "
                  "(evals) | reclaimed GPU-h / cluster | vs EvalStop(k=2) | lost GPU-h (healthy) "
                  "| regret (gold) |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in cell.iter_rows(named=True):
            lines.append("| " + " | ".join([
                r["setting"], *(_fmt(r, m) for m in RATE_COLS), _fmt(r, "delay_evals", 1, 2),
                _fmt(r, "reclaimed_gpu_h", 1, 0), _fmt(r, "d_reclaimed_gpu_h", 1, 0),
                _fmt(r, "lost_gpu_h", 1, 0), _fmt(r, "regret", 1, 3)]) + " |")
        lines.append("")
    lines += goal_table(synthetic)
    if bound is not None:
        lines += goal2_table(synthetic, bound)
    if traces is not None:
        lines += traces_markdown(traces, short)
    return "\n".join(lines)


def traces_markdown(traces: pl.DataFrame, short: bool = True) -> list[str]:
    """The traces' part of ``markdown_table`` (the end of the doc's block): it depends on
    the traces table alone, so it can be made again from ``trace_table`` without the
    synthetic grid's minutes."""
    import polars as pl

    tr = traces.filter(pl.col("setting").is_in(SHORT_TRACES)) if short else traces
    r0 = traces.row(0, named=True)
    lines = [f"#### toy-RLHF traces ({counted(r0['n_runs'], 'run')} of "
             f"{counted(r0['n_seeds'], 'seed')}, {r0['n_hacking']} hacking, "
             f"{counted(r0['n_evals'], 'evaluation')}, sigma0 = "
             f"{r0['sigma0']:.3f} score units; intervals resample seeds)", "",
             "| setting | precision % | recall % | stop recall % | FPR % | stop FPR % | FPR "
             "change vs EvalStop(k=2) (paired, pp) | delay (evals) | compute saved % | regret "
             "(gold) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in tr.iter_rows(named=True):
        lines.append("| " + " | ".join([
            r["setting"], *(_fmt(r, m) for m in RATE_COLS), _fmt(r, "d_fpr"),
            _fmt(r, "delay_evals", 1, 2), _fmt(r, "compute_saved"), _fmt(r, "regret", 1, 3)]) + " |")
    return lines + [""] + goal3_table(traces)


def goal2_table(synthetic: pl.DataFrame, bound: pl.DataFrame, target: float = 0.95,
                min_recall: float = 0.9) -> list[str]:
    """Goal 2 of the issue (precision >= 95% with recall >= 90%), per noise level of the
    bounds (base rate 0.6): each detector's setting with the highest recall among those
    with precision >= ``target`` and the most precise one with recall >= ``min_recall``
    (point estimates), then the bounds of ``fastsim.detector_bounds`` (not detectors).
    Where no setting meets a target the row still carries numbers with intervals: those of
    the setting closest to it (highest precision, or highest recall), marked as a miss."""
    import polars as pl

    from fastsim import detectors as det

    lines = []
    for sigma in bound["sigma"].unique(maintain_order=True):
        cell = synthetic.filter((pl.col("sigma") == sigma) & (pl.col("base_rate") == 0.6))
        b = bound.filter(pl.col("sigma") == sigma)
        r0 = b.row(0, named=True)
        lines += [f"#### Goal 2 at sigma = {sigma:g}: precision >= {100 * target:.0f}% with recall >= "
                  f"{100 * min_recall:.0f}%; detectors (base rate 0.6, n = "
                  f"{cell['n_clusters'][0] if cell.height else 0} clusters) and bounds (n = "
                  f"{r0['n_clusters']} held-out clusters, {r0['n_jobs']} RLHF jobs)", "",
                  "| detector or bound | setting / threshold | precision % | recall % | FPR % |",
                  "| --- | --- | --- | --- | --- |"]
        for name in det.DETECTORS:
            d = cell.filter(pl.col("detector") == name)
            for which, need, floor, best in (
                    (f"recall at precision >= {100 * target:.0f}%", "precision", target, "recall"),
                    (f"precision at recall >= {100 * min_recall:.0f}%", "recall", min_recall, "precision")):
                rows = d.filter(pl.col(need) >= floor).sort(best, descending=True)
                if rows.is_empty():  # a miss: show the setting nearest the target, with intervals
                    r = d.sort(need, descending=True).row(0, named=True)
                    setting = f"none of its {d.height} settings; highest {need}: {r['setting']}"
                else:
                    r = rows.row(0, named=True)
                    setting = r["setting"]
                lines.append(f"| {name}: best {which} | {setting} | {_fmt(r, 'precision')} | "
                             f"{_fmt(r, 'recall')} | {_fmt(r, 'fpr')} |")
        for r in b.iter_rows(named=True):
            chosen = f" (threshold for {100 * target:.0f}% on the other clusters)" if "Bayes" in r["bound"] else ""
            lines.append(f"| bound: {r['bound']} | {r['rule']}{chosen} | {_fmt(r, 'precision')} | "
                         f"{_fmt(r, 'recall')} | {_fmt(r, 'fpr')} |")
        lines.append("")
    return lines


def goal3_table(traces: pl.DataFrame, top: int = 6) -> list[str]:
    """Goal 3 of the issue on the traces: the settings with recall at least EvalStop(k=2)'s
    (same runs), lowest paired FPR change first, with the exact McNemar p-value of that
    change and the same p-value Bonferroni-corrected for every setting tried on these
    traces (``TRACE_SEARCH_SIZE`` included)."""
    import polars as pl

    m = traces.height + TRACE_SEARCH_SIZE
    es_recall = traces.filter(pl.col("setting") == "evalstop(k=2)")["recall"][0]
    d = (traces.filter((pl.col("recall") >= es_recall) & (pl.col("setting") != "evalstop(k=2)"))
         .sort(["d_fpr", "d_fpr_hi"]).head(top))
    r0 = traces.row(0, named=True)
    lines = [f"#### Goal 3 on the traces: recall at least EvalStop(k=2)'s ({100 * es_recall:.1f}%), "
             f"lowest FPR first (n = {counted(r0['n_seeds'], 'seed')}, "
             f"{counted(r0['n_runs'] - r0['n_hacking'], 'healthy run')}, paired; intervals "
             "resample seeds; "
             f"Bonferroni over {m} settings tried)", "",
             "| setting | recall % | FPR % | FPR change vs EvalStop(k=2), pp | McNemar p | "
             "Bonferroni p | significant after correction |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in d.iter_rows(named=True):
        adj = min(1.0, r["d_fpr_p"] * m)
        lines.append(f"| {r['setting']} | {_fmt(r, 'recall')} | {_fmt(r, 'fpr')} | {_fmt(r, 'd_fpr')} | "
                     f"{r['d_fpr_p']:.3f} | {adj:.2f} | {'yes' if adj < 0.05 else 'no'} |")
    return lines + [""]


def goal_table(synthetic: pl.DataFrame) -> list[str]:
    """Goal 1 of the issue, per noise level and base rate: among the settings whose FPR is
    no higher than EvalStop(k=2)'s on the same clusters, the one that reclaims the most
    (paired change per cluster); ``holds`` when that change's interval is above 0."""
    import polars as pl

    base = synthetic.filter(pl.col("setting") == "evalstop(k=2)").select(
        "sigma", "base_rate", pl.col("fpr").alias("es_fpr"), pl.col("fpr_lo").alias("es_fpr_lo"),
        pl.col("fpr_hi").alias("es_fpr_hi"))
    d = (synthetic.filter((pl.col("sigma") > 0) & (pl.col("setting") != "evalstop(k=2)"))
         .join(base, on=["sigma", "base_rate"]).filter(pl.col("fpr") <= pl.col("es_fpr"))
         .sort("d_reclaimed_gpu_h", descending=True).group_by(["sigma", "base_rate"]).first()
         .sort(["sigma", "base_rate"]))
    lines = [f"#### Goal 1: per noise level and base rate, the setting with FPR no higher than "
             f"EvalStop(k=2)'s that reclaims the most (n = {d['n_clusters'][0] if d.height else 0} "
             "clusters per cell)", "",
             "| sigma | base rate | setting | FPR % | EvalStop(k=2) FPR % | false positives / cluster, "
             "change | reclaimed GPU-h / cluster, change | holds |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in d.iter_rows(named=True):
        es = {"fpr": r["es_fpr"], "fpr_lo": r["es_fpr_lo"], "fpr_hi": r["es_fpr_hi"]}
        holds = r["d_reclaimed_gpu_h_lo"] > 0
        lines.append(f"| {r['sigma']:g} | {r['base_rate']:g} | {r['setting']} | {_fmt(r, 'fpr', 100, 2)} | "
                     f"{_fmt(es, 'fpr', 100, 2)} | {_fmt(r, 'd_fp', 1, 2)} | "
                     f"{_fmt(r, 'd_reclaimed_gpu_h', 1, 0)} | {'yes' if holds else 'no'} |")
    return lines + [""]


START, END = "<!-- fastsim detectors: start -->", "<!-- fastsim detectors: end -->"


def update_doc(path: Path, table: str, start: str = START, end: str = END) -> str:
    """``path``'s text with the part between the ``start`` and ``end`` markers replaced;
    the rest as it was, line ends included."""
    import codecs

    from fastsim.io import read_text

    # Path.read_text was a UnicodeDecodeError traceback on invalid UTF-8, and turned a
    # CRLF doc's every line end into LF, which the rewrite then saved over the whole file
    text = read_text(path, "markdown file")
    a, b = text.find(start), text.find(end)
    if a < 0 or b < a:
        raise ConfigError(f"doc={str(path)!r} has no '{start}' ... '{end}' block; allowed: a "
                          "markdown file with both markers")
    twice = next((m for m in (start, end) if text.count(m) > 1), None)
    if twice is not None:  # the text from the first start to the end was replaced, unsaid
        raise ConfigError(f"doc={str(path)!r} has '{twice}' twice; allowed: a markdown file "
                          f"with one '{start}' ... '{end}' block")
    newline = "\r\n" if "\r\n" in text else "\n"
    block = ("\n" + table + "\n").replace("\n", newline)
    bom = "\ufeff" if path.read_bytes().startswith(codecs.BOM_UTF8) else ""  # read_text drops it
    return bom + text[:a + len(start)] + block + text[b:]
