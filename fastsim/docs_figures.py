"""``fastsim docs-figures``: the documentation's figures (``docs/figures/``) from one command.

Each figure of the docs is drawn by a script of ``figures/`` from the output of one of
fastsim's own commands, at the sizes the docs quote.  This command runs those commands
(``STEPS``, in order) into a results directory, then draws every figure into the output
directory.  A step is reused, and says so, only when ``RESULTS/docs-figures.json`` records
it with the same command and code and every file it read and wrote still has the SHA-256
recorded; otherwise it runs again and says why (a trace set recording other parameters
than the docs' is refused).  ``fastsim sweep`` resumes by itself, verifying every
finished chunk; a sweep directory of other code that this command ran is computed again
from nothing (a symbolic link to one is refused: its target is not this command's).  One
process at a time owns RESULTS (a lock).  The detector benchmark (``fastsim detectors``,
about 9 minutes: 533 s measured in docs/detectors.md) is not run here: its figures are
drawn when its results are in ``RESULTS/detectors``.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
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


# Each step's command, code and the SHA-256 of what it read and wrote (``_entry``), in
# RESULTS: a step is reused only when all of it still holds (``_why_rerun``).
RECORD = "docs-figures.json"

TRACE_FIGURES = ("real_traces_curves", "real_traces_gao", "real_traces_replay")
TRACE_INPUTS = ("the tables `fastsim traces toy-rlhf`, `replay --summary-out` and `traces "
                "compare-sim --out` write")
DETECTOR_INPUTS = "the tables `fastsim detectors` writes"


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
    """Run every step of ``STEPS`` whose outputs ``_why_rerun`` does not verify against
    ``RECORD``, and record each step run.  Returns 0, or the exit status of the step that
    failed, which has said why in its own line."""
    from fastsim.cli import main

    steps = _read_record(results, log)
    for what, outputs, template in STEPS:
        argv = [a.format(r=results) for a in template]
        why = _why_rerun(steps.get(what), template, results, outputs)
        if why is None:
            log(f"[docs-figures] {what}: reused {', '.join(outputs)} under {results} "
                f"(verified against {RECORD})")
            continue
        if not outputs:  # a sweep: its directory is this command's from the first run on
            why = _clear_stale_sweep(Path(argv[argv.index("--out") + 1]), steps.get(what))
            steps[what] = _entry(template, results, outputs)
            _write_record(results, steps)
        log(f"[docs-figures] {what}: {why + ', so ' if why else ''}fastsim {' '.join(argv)}")
        t0 = time.perf_counter()
        status = main(argv)
        if status != 0:  # a second line would only repeat the step's (a refusal: exit 2)
            return status
        if outputs:
            steps[what] = _entry(template, results, outputs)
            _write_record(results, steps)
        log(f"[docs-figures] {what}: {time.perf_counter() - t0:.0f} s")
    return 0


def _clear_stale_sweep(out: Path, entry) -> str:
    """Why a sweep step's directory is computed again from nothing ("" when it is resumed).
    A sweep refuses a directory of other code ("use a new --out directory"), which this
    command cannot do: after any change of fastsim's source every run stopped there.  A
    directory ``RECORD`` shows this command ran the sweep into is its own, and is removed;
    another is refused, saying how to go on."""
    import shutil

    from fastsim.sweep.grid import diff_code
    from fastsim.sweep.store import DirLock, recorded_code

    # RESULTS is this process's (its lock): a trash name is a killed run's, never removed
    for trash in out.parent.glob(f".{out.name}.stale-*"):
        if trash.is_dir() and not trash.is_symlink():
            shutil.rmtree(trash)
        else:
            trash.unlink()
    code = recorded_code(out) if out.is_dir() else None
    changes = diff_code(code, _code()) if code is not None else []
    if not changes:
        return ""
    said = "; ".join(changes)
    if out.is_symlink():  # its target is not this command's to remove (rmtree refuses it)
        raise ConfigError(f"{out}: a symbolic link to a sweep of other code ({said}); "
                          "allowed: a directory, which docs-figures removes and computes "
                          "again (delete the link, or the sweep it points to, to go on)")
    if not isinstance(entry, dict) or not _entry_ok(entry):  # a damaged one shows nothing
        raise ConfigError(f"{out}: a sweep of other code ({said}) that {RECORD} does not "
                          "record as this command's; allowed: the sweep fastsim docs-figures "
                          "runs there (delete the directory to compute it again)")
    lock = DirLock.acquire(out)  # refused while a sweep still runs in it
    trash = out.with_name(f".{out.name}.stale-{os.getpid()}")
    os.rename(out, trash)  # the sweep is gone from its name at once, even if killed here
    lock.release()
    shutil.rmtree(trash)
    return f"{out} held the sweep this command ran with other code ({said}): removed"


def _inputs(template: list[str]) -> list[str]:
    """The outputs of other steps a step's command reads (``{r}/traces/runs.parquet``)."""
    made = {f"{{r}}/{o}": o for _, outputs, _ in STEPS for o in outputs}
    return [made[a] for a in template if a in made]


def _sha256(path: Path) -> str | None:
    """The SHA-256 of a file's bytes; None for one that cannot be read as a file."""
    try:
        with open(path, "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    except OSError:
        return None


def _code() -> dict:
    """The code a step's outputs are computed by, as a sweep records it (``Grid.code`` of
    no user function)."""
    from fastsim.sweep.grid import code_of

    return code_of(())


def _entry(template: list[str], results: Path, outputs: tuple[str, ...]) -> dict:
    """What ``RECORD`` keeps of a step just run: its command, the code, and the SHA-256 of
    each file it read and wrote."""
    return {"argv": template, "code": _code(),
            "inputs": {i: _sha256(results / i) for i in _inputs(template)},
            "outputs": {o: _sha256(results / o) for o in outputs}}


def _why_rerun(entry, template: list[str], results: Path,
               outputs: tuple[str, ...]) -> str | None:
    """Why a step's outputs are not reused (None: they are); "" when one is missing.
    Existing outputs were trusted as they were: a truncated table was drawn, or a replay
    table of a trace set regenerated since, or one computed by another fastsim."""
    from fastsim.sweep.grid import diff_code

    if not outputs or not all((results / o).exists() for o in outputs):
        return ""  # the sweep has none: it resumes by itself, verifying its chunks
    if not isinstance(entry, dict) or not _entry_ok(entry):
        return f"its outputs are not in {RECORD} (made by another command)"
    if entry["argv"] != template:
        return "its outputs were recorded for another command"
    if changes := diff_code(entry["code"], _code()):
        return f"its outputs are of other code ({'; '.join(changes)})"
    for kind, files in (("read", entry["inputs"]), ("wrote", entry["outputs"])):
        for name, sha in files.items():
            if _sha256(results / name) != sha:
                return f"{name}, which it {kind}, changed since (its SHA-256 is not {RECORD}'s)"
    return None


def _entry_ok(entry: dict) -> bool:
    """Whether a ``RECORD`` entry has the form ``_entry`` writes."""
    code = entry.get("code")
    return (isinstance(entry.get("argv"), list) and isinstance(code, dict)
            and isinstance(code.get("fastsim"), str) and isinstance(code.get("user"), dict)
            and all(isinstance(entry.get(k), dict) for k in ("inputs", "outputs")))


def _read_record(results: Path, log, then: str = "every step is run again") -> dict:
    """``RECORD``'s steps; a damaged record is said and read as empty: every step runs,
    or, under ``--draw-only`` (``then`` says so), no table is checked against it."""
    from fastsim.io import check_regular, loads_json

    path = results / RECORD
    if not os.path.lexists(path):
        return {}
    try:
        check_regular(path, "the record fastsim docs-figures writes")
        record = loads_json(path.read_bytes())  # nested too deeply: a ValueError too
    except (ConfigError, OSError, ValueError) as exc:
        record = None
        log(f"[docs-figures] {path}: unreadable ({str(exc).splitlines()[0][:80]}); {then}")
    if record is not None and not (isinstance(record, dict) and record.get("format") == 1
                                   and isinstance(record.get("steps"), dict)):
        log(f"[docs-figures] {path}: damaged (not the record this command writes); {then}")
        return {}
    return record["steps"] if record else {}


def _write_record(results: Path, steps: dict) -> None:
    from fastsim.io import atomic_write_bytes

    data = json.dumps({"format": 1, "steps": steps}, indent=1, sort_keys=True) + "\n"
    atomic_write_bytes(results / RECORD, data.encode())


def _check_results(results: Path) -> None:
    """A pipe or device among the tables the figure scripts read is refused unread."""
    from fastsim.io import check_tables_regular

    for sub in ("traces", "costaware", "detectors"):
        check_tables_regular(results / sub, "the tables `fastsim docs-figures` writes")


def _check_trace_set(results: Path) -> None:
    """The trace set the trace figures draw, checked as every command that reads one checks
    it (``check_trace_table``): an empty one, or text where a number goes, was an
    IndexError or format traceback from inside a figure, and steps written as text drew
    each run's curve in the text's order."""
    from fastsim.io import read_parquet_table
    from fastsim.replay.traces import TRACES_ALLOWED, check_trace_table
    from fastsim.sweep.figures import figure_tables

    path = results / "traces.parquet"
    if path.is_file():
        columns = figure_tables(TRACE_FIGURES).get(path.name, set())
        check_trace_table(read_parquet_table(path, TRACES_ALLOWED), path, sorted(columns))


def draw(results: Path, out: Path, log=print, within: Path | None = None) -> list[Path]:
    """Draw every docs figure whose inputs are in ``results``; returns the files written
    (all of this drawing's, never some of each of two into one ``out`` at once).
    ``within``: the directory ``out`` is made in (``io.make_directory``), as found
    before the run's steps."""
    from fastsim.costaware.cli import FIGURE_INPUTS, FIGURE_SCRIPTS
    from fastsim.io import holding_directory, make_directory, remove_made, unmade_on_failure
    from fastsim.sweep.figures import check_figure_inputs, load_script

    _check_results(results)
    # as costaware figures does: a table without a column the scripts use was a polars
    # traceback after the figures before it were written
    check_figure_inputs(results / "costaware", FIGURE_SCRIPTS, FIGURE_INPUTS)
    check_figure_inputs(results / "traces", TRACE_FIGURES, TRACE_INPUTS)
    _check_trace_set(results / "traces")
    if (results / "detectors" / "synthetic.parquet").is_file():
        check_figure_inputs(results / "detectors", ("detectors_pareto",), DETECTOR_INPUTS)
        load_script("detectors_pareto").plotted(results / "detectors")
    # failed or interrupted before its first figure, or refused by the caller for drawing
    # none: nothing made, OUT included
    with unmade_on_failure() as made:
        made.append(make_directory(out, within))
        with holding_directory(out):
            written = _draw_held(results, out, log)
    if not written:
        remove_made(made[0])
    return written


def _draw_held(results: Path, out: Path, log) -> list[Path]:
    """``draw``'s figures, ``out`` held."""
    from fastsim.costaware.cli import FIGURE_SCRIPTS as COSTAWARE
    from fastsim.sweep.figures import (check_sweep_columns, find_sources, load_script,
                                       skip_reason)

    written: list[Path] = []

    def drawn(name: str, files: list[Path]) -> None:
        # said as each is drawn: the whole drawing takes 10-15 s, which passed in silence
        # before a list of every file at the end
        if files:
            log(f"[docs-figures] {name}: {', '.join(p.name for p in files)}")
        written.extend(files)

    inputs = ("frontier", "traces", "costaware", "detectors")
    if any((results / name).is_dir() for name in inputs):  # checks and imports: seconds
        log(f"[docs-figures] drawing the figures of {results} into {out}")
    if (results / "frontier").is_dir():
        frontier, sources = load_script("frontier"), find_sources(results)
        check_sweep_columns(sources, {"frontier": frontier})
        # a frontier sweep killed before its tables, or another sweep there, was a KeyError
        # traceback from inside the script
        why = skip_reason(frontier.NEEDS, frontier.BASELINE, sources, results, frontier.PLOTS)
        if why is None:
            drawn("frontier", frontier.draw(sources, out, ("png", "pdf")))
        else:
            log(f"[docs-figures] frontier: skipped, {why}")
    for name in TRACE_FIGURES:
        drawn(name, load_script(name).main(results / "traces", out))
    for name in COSTAWARE:
        drawn(name, load_script(name).main(results / "costaware", out))
    if (results / "detectors" / "synthetic.parquet").exists():
        drawn("detectors_pareto", load_script("detectors_pareto").main(results / "detectors", out))
    else:
        log(f"[docs-figures] detectors_pareto: skipped, no {results}/detectors/synthetic.parquet "
            f"(fastsim detectors --traces {results}/traces/traces.parquet --out "
            f"{results}/detectors)")
    return written


def _check_recorded(results: Path) -> None:
    """Under ``--draw-only``: a table ``RECORD`` names whose bytes changed since (a
    truncated or damaged copy) is refused before any figure; tables it does not name
    (yours) are drawn as they are."""
    # nothing runs here: "every step is run again" was said of a run that ran none
    steps = _read_record(results, log=print, then="its tables are drawn unchecked (run "
                         "without --draw-only to compute and record them again)")
    for entry in steps.values():
        if isinstance(entry, dict) and _entry_ok(entry):
            for name, sha in entry["outputs"].items():
                path = results / name
                if path.exists() and _sha256(path) != sha:
                    raise ConfigError(f"{path}: changed since fastsim docs-figures wrote it "
                                      f"(its SHA-256 is not the one in {results / RECORD}); "
                                      "allowed: the table as written (run without "
                                      "--draw-only to compute it again)")


def cmd_docs_figures(args) -> int:
    from fastsim.io import check_output_dir
    from fastsim.sweep.store import DirLock

    check_output_dir(args.results, "--results")
    within = check_output_dir(args.out, "--out")  # as it is before the steps
    if args.draw_only and not args.results.is_dir():
        raise ConfigError(f"--results={args.results} is not a directory; allowed: the results "
                          "of an earlier fastsim docs-figures run")
    _check_results(args.results)  # before the steps, which reuse what exists
    if args.draw_only:
        _check_recorded(args.results)
    else:
        _check_reused_traces(args.results)
        args.results.mkdir(parents=True, exist_ok=True)
        lock = DirLock.acquire(args.results)  # noqa: F841 (RESULTS is this run's while held)
        status = run_steps(args.results)
        if status != 0:
            return status
    written = draw(args.results, args.out, within=within)
    if not written:  # as fastsim figures and costaware figures refuse a DIR with nothing
        raise ConfigError(f"--results={args.results} holds nothing to draw (no frontier "
                          "sweep, traces, costaware or detectors results); allowed: the "
                          "results of an earlier fastsim docs-figures run")
    print(f"docs-figures: {len(written)} files written to {args.out}")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "docs-figures", help="regenerate the documentation's figures (docs/figures)",
        description="Run the experiments behind the documentation's figures at the sizes "
        "the docs quote (the fidelity frontier sweep, the toy-RLHF traces with their replay "
        "and simulator comparison, the cost-aware SGD and GRPO runs) into --results, then "
        "draw every figure, PNG and PDF, into --out. A step's outputs are reused, and each "
        "reuse printed, when RESULTS/docs-figures.json records the same command and code "
        "and the SHA-256 of every file it read and wrote; otherwise the step runs again, "
        "saying why (a trace set made with other parameters than the docs' is refused); "
        "the sweep resumes, verifying its finished chunks (one this command ran with other "
        "code is computed again from nothing); one process at a time owns "
        "--results (a lock). The detector benchmark is not run (fastsim detectors, about "
        "9 minutes: 533 s on 2 shared cores, docs/detectors.md); its figure is drawn when "
        "its results are in RESULTS/detectors. About 5 minutes of CPU from nothing.")
    p.add_argument("--results", type=Path, default=Path("results/docs"), metavar="DIR",
                   help="where the experiments write, and are reused from (default: "
                   "results/docs)")
    p.add_argument("--out", type=Path, default=Path("docs/figures"), metavar="DIR",
                   help="where the PNG and PDF figures go (default: docs/figures)")
    p.add_argument("--draw-only", action="store_true",
                   help="run nothing: draw from what is in --results (refused when it "
                   "holds nothing to draw, or a table whose SHA-256 is not the one "
                   "docs-figures.json records)")
    p.set_defaults(func=cmd_docs_figures)
