"""``fastsim docs-figures``: the documentation's figures (``docs/figures/``) from one command.

Each figure of the docs is drawn by a script of ``figures/`` from the output of one of
fastsim's own commands, at the sizes the docs quote.  This command runs those commands
(``STEPS``, in order) into a results directory, then draws every figure into the output
directory.  A step whose outputs all exist is reused, and says so (delete them to
recompute; a trace set recording other parameters than the docs' is refused); ``fastsim
sweep`` resumes by itself, verifying every finished chunk.  The
detector benchmark (``fastsim detectors``, about 20 minutes: 1,206 s measured in
docs/detectors.md) is not run here: its figures are drawn when its results are in
``RESULTS/detectors``.
"""
from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

from fastsim.errors import ConfigError
from fastsim.replay.cli import TRACE_POLICIES

TOY_RLHF_OUTPUTS = ("traces/traces.parquet", "traces/runs.parquet", "traces/gao_fits.parquet")
# (what, outputs under RESULTS, the fastsim command with {r} = RESULTS); docs/calibration.md,
# docs/real-traces.md and docs/costaware.md quote these commands and sizes.
STEPS = (
    ("fidelity frontier (125 points x 100 clusters)", (),
     ["sweep", "frontier", "--out", "{r}/frontier", "--no-progress"]),
    ("toy-RLHF traces (72 runs)", TOY_RLHF_OUTPUTS, ["traces", "toy-rlhf", "--out", "{r}/traces"]),
    ("stop policies replayed on the traces", ("traces/replay_summary.parquet",),
     ["replay", "{r}/traces/traces.parquet", "--summary-only",
      *[a for p in TRACE_POLICIES for a in ("--policy", p)],
      "--out", "{r}/traces/replay.parquet", "--summary-out", "{r}/traces/replay_summary.parquet"]),
    ("the simulator at the traces' noise (200 clusters)", ("traces/simulator.parquet",),
     ["traces", "compare-sim", "{r}/traces/runs.parquet", "--clusters", "200",
      "--out", "{r}/traces/simulator.parquet"]),
    ("cost-aware SGD sweep (60 points x 128 replications)",
     ("costaware/costaware_sgd.summary.parquet",),
     ["costaware", "sweep", "costaware_sgd", "--out", "{r}/costaware"]),
    ("toy GRPO, uniform vs cost-aware (128 seeds)", ("costaware/costaware_grpo.curves.parquet",),
     ["costaware", "grpo", "--out", "{r}/costaware"]),
    ("toy GRPO sweep (9 points x 128 seeds)", ("costaware/costaware_grpo_sweep.curves.parquet",),
     ["costaware", "sweep", "costaware_grpo", "--out", "{r}/costaware"]),
)


TRACE_FIGURES = ("real_traces_curves", "real_traces_gao", "real_traces_replay")
TRACE_INPUTS = ("the tables `fastsim traces toy-rlhf`, `replay --summary-out` and `traces "
                "compare-sim --out` write")


def _check_reused_traces(results: Path) -> None:
    """Trace sets record the parameters they were made with: one made with others (``fastsim
    traces toy-rlhf --seeds 0 --out RESULTS/traces``) was reused, said to be the docs' 72
    runs, and drawn into the docs' figures."""
    from fastsim.replay.traces import ToyRLHFConfig, read_trace_config

    docs = ToyRLHFConfig()
    for path in (results / o for o in TOY_RLHF_OUTPUTS):
        recorded = read_trace_config(path) if path.is_file() else None
        if recorded not in (None, docs):
            differ = ", ".join(f"{f.name}={getattr(recorded, f.name)}, not "
                               f"{getattr(docs, f.name)}" for f in dataclasses.fields(docs)
                               if getattr(recorded, f.name) != getattr(docs, f.name))
            raise ConfigError(f"{path}: made with other parameters than the docs' trace set "
                              f"({differ}); allowed: the output of fastsim traces toy-rlhf "
                              f"--out {results}/traces (delete it, and the tables made from "
                              "it, to recompute)")


def run_steps(results: Path, log=print) -> int:
    """Run every step of ``STEPS`` whose outputs are not all in ``results``, and every step
    that reads an output recomputed here: its own outputs are of the input before (trace
    sets regenerated beside the replay and simulator tables of the deleted ones).  Returns
    0, or the exit status of the step that failed, which has said why in its own line."""
    from fastsim.cli import main

    recomputed: set[str] = set()
    for what, outputs, argv in STEPS:
        argv = [a.format(r=results) for a in argv]
        if (outputs and all((results / o).exists() for o in outputs)
                and not recomputed & set(argv)):
            log(f"[docs-figures] {what}: reused {', '.join(outputs)} under {results}")
            continue
        recomputed |= {str(results / o) for o in outputs}
        log(f"[docs-figures] {what}: fastsim {' '.join(argv)}")
        t0 = time.perf_counter()
        status = main(argv)
        if status != 0:  # a second line would only repeat the step's (a refusal: exit 2)
            return status
        log(f"[docs-figures] {what}: {time.perf_counter() - t0:.0f} s")
    return 0


def _check_results(results: Path) -> None:
    """A pipe or device among the tables the figure scripts read is refused unread."""
    from fastsim.io import check_tables_regular

    for sub in ("traces", "costaware", "detectors"):
        check_tables_regular(results / sub, "the tables `fastsim docs-figures` writes")


def draw(results: Path, out: Path, log=print) -> list[Path]:
    """Draw every docs figure whose inputs are in ``results``; returns the files written."""
    from fastsim.costaware.cli import FIGURE_SCRIPTS as COSTAWARE, check_figure_inputs
    from fastsim.sweep.figures import find_sources, load_script, skip_reason

    _check_results(results)
    # as costaware figures does: a table without a column the scripts use was a polars
    # traceback after the figures before it were written
    check_figure_inputs(results / "costaware")
    check_figure_inputs(results / "traces", TRACE_FIGURES, TRACE_INPUTS)
    written: list[Path] = []
    if (results / "frontier").is_dir():
        frontier, sources = load_script("frontier"), find_sources(results)
        # a frontier sweep killed before its tables, or another sweep there, was a KeyError
        # traceback from inside the script
        why = skip_reason(frontier.NEEDS, frontier.BASELINE, sources, results, frontier.PLOTS)
        if why is None:
            written += frontier.draw(sources, out, ("png", "pdf"))
        else:
            log(f"[docs-figures] frontier: skipped, {why}")
    for name in TRACE_FIGURES:
        written += load_script(name).main(results / "traces", out)
    for name in COSTAWARE:
        written += load_script(name).main(results / "costaware", out)
    if (results / "detectors" / "synthetic.parquet").exists():
        written += load_script("detectors_pareto").main(results / "detectors", out)
    else:
        log(f"[docs-figures] detectors_pareto: skipped, no {results}/detectors/synthetic.parquet "
            f"(fastsim detectors --traces {results}/traces/traces.parquet --out "
            f"{results}/detectors)")
    return written


def cmd_docs_figures(args) -> int:
    from fastsim.io import check_output_dir

    check_output_dir(args.results, "--results")
    check_output_dir(args.out, "--out")
    if args.draw_only and not args.results.is_dir():
        raise ConfigError(f"--results={args.results} is not a directory; allowed: the results "
                          "of an earlier fastsim docs-figures run")
    _check_results(args.results)  # before the steps, which reuse what exists
    if not args.draw_only:
        _check_reused_traces(args.results)
        status = run_steps(args.results)
        if status != 0:
            return status
    written = draw(args.results, args.out)
    if not written:  # as fastsim figures and costaware figures refuse a DIR with nothing
        raise ConfigError(f"--results={args.results} holds nothing to draw (no frontier "
                          "sweep, traces, costaware or detectors results); allowed: the "
                          "results of an earlier fastsim docs-figures run")
    for p in written:
        print(f"wrote {p}")
    print(f"docs-figures: {len(written)} files written to {args.out}")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "docs-figures", help="regenerate the documentation's figures (docs/figures)",
        description="Run the experiments behind the documentation's figures at the sizes "
        "the docs quote (the fidelity frontier sweep, the toy-RLHF traces with their replay "
        "and simulator comparison, the cost-aware SGD and GRPO runs) into --results, then "
        "draw every figure, PNG and PDF, into --out. Outputs that already exist are reused, "
        "and each reuse is printed (delete them to recompute; a trace set made with other "
        "parameters than the docs' is refused); the sweep resumes, verifying "
        "its finished chunks. The detector benchmark is not run (fastsim detectors, about "
        "20 minutes: 1,206 s on 2 shared cores, docs/detectors.md); its figure is drawn when "
        "its results are in RESULTS/detectors. About 5 minutes of CPU from nothing.")
    p.add_argument("--results", type=Path, default=Path("results/docs"), metavar="DIR",
                   help="where the experiments write, and are reused from (default: "
                   "results/docs)")
    p.add_argument("--out", type=Path, default=Path("docs/figures"), metavar="DIR",
                   help="where the PNG and PDF figures go (default: docs/figures)")
    p.add_argument("--draw-only", action="store_true",
                   help="run nothing: draw from what is in --results (refused when it "
                   "holds nothing to draw)")
    p.set_defaults(func=cmd_docs_figures)
