"""Run the figure scripts (``figures/`` in the repository, ``fastsim.figures`` once
installed) on a results directory.

Each script is a standalone file (``python figures/noise_sweep.py RESULTS OUT``) with a
``draw(sources, out, formats)`` function that reads only aggregated Parquet; this module
finds the inputs and calls them.  Figures are drawn without pyplot's GUI machinery and
under a theme scoped to the call, so a notebook's backend and style stay as they were.  ``sources`` maps a sweep's name to its directory
(``summary.parquet``, ``jct_hist.parquet``), plus ``extracts`` for per-job extracts.
"""
from __future__ import annotations

import importlib
import os
import re
from pathlib import Path

from fastsim.errors import did_you_mean_path, known_keywords

# The paper's figures (fastsim reproduce draws these), then the fidelity frontier's (its own
# sweep, sweeps/frontier.toml).
PAPER_FIGURES = ("headline", "noise_sweep", "base_rate", "composability", "k_tradeoff",
                 "jct_cdf", "trajectories")
FIGURE_SCRIPTS = PAPER_FIGURES + ("frontier",)
OWN_SWEEP = "own_sweep"  # the figure of a sweep none of FIGURE_SCRIPTS reads
FORMATS = ("png", "pdf", "svg")  # the file formats a figure is drawn in
EXTRACTS = ("trajectory_jobs.parquet", "trajectory_points.parquet")  # reproduce's extracts


def figure_stem(name: str) -> str:
    """The file name (no extension) of sweep ``name``'s figure (of ``OWN_SWEEP``):
    ``sweep_NAME``, every character but letters, digits, ``.``, ``_`` and ``-`` as ``_``
    (a sweep name may hold spaces), so one byte per character of the name."""
    return "sweep_" + re.sub(r"[^A-Za-z0-9._-]", "_", name)


def check_figure_name(name: str, where: str, formats: tuple[str, ...] = FORMATS,
                      limit: int | None = None) -> None:
    """Refuse sweep ``name`` (said as ``where``'s) whose figure's file name, in one of
    ``formats`` and under the temporary name it is first written as, is longer than
    ``limit`` bytes (default: the common file systems').  A sweep's file is checked on
    loading, for every format, and ``fastsim figures`` against its ``--out``: a name
    refused only there was refused after the whole sweep had run."""
    from fastsim.errors import ConfigError
    from fastsim.io import NAME_MAX, TMP_EXTRA, room_for

    limit = NAME_MAX if limit is None else limit
    longest = max(len(f) for f in formats)
    most = room_for(limit) - len(figure_stem("")) - len(".") - longest
    if len(figure_stem(name)) - len(figure_stem("")) > most:
        raise ConfigError(f"{where}: name is {len(name)} characters long; allowed: at most "
                          f"{most} (its figure's file, {figure_stem('NAME')}."
                          f"{max(formats, key=len)}, within the file system's {limit} "
                          f"bytes, less the {TMP_EXTRA} of the temporary name it is "
                          "written under)")


def sweep_dirs(results: Path) -> list[Path]:
    """``results`` and its subdirectories, as ``find_sources`` looks for sweeps in them."""
    return [results] + sorted(p for p in results.iterdir() if p.is_dir())


def find_sources(results: Path) -> dict[str, Path]:
    """Sweep name -> directory, for ``results`` itself or its subdirectories.  A damaged
    manifest or table is refused here, by name, before any figure is drawn."""
    sources: dict[str, Path] = {}
    for d in sweep_dirs(results):
        manifest = d / "sweep.json"
        if manifest.exists() and (d / "summary.parquet").exists():
            name, grid_hash = _read_manifest(manifest)
            for table in ("summary.parquet", "jct_hist.parquet"):
                _check_table(d / table, grid_hash)
            if name in sources:  # a copy or an older run: which one is meant is not ours to guess
                from fastsim.errors import ConfigError

                raise ConfigError(f"{results}: two directories hold sweep {name!r}, "
                                  f"{sources[name]} and {d}; allowed: one per sweep (move the "
                                  "other out of it)")
            sources[name] = d
    for d in sources.values():  # aggregation writes both (summary.parquet last)
        if not (d / "jct_hist.parquet").exists():
            raise _damaged(d / "jct_hist.parquet", "missing beside summary.parquet")
    if (results / "extracts").is_dir():
        # the extracts the figures read, never another file there: a table of the user's
        # without page checksums (extracts/notes.parquet) was refused as a damaged extract,
        # in reproduce after every sweep, saying to run the same command again
        for name in EXTRACTS:
            _check_table(results / "extracts" / name, allowed=REPRODUCE_OUTPUT)
        # written together by reproduce; one without the other is a run killed between them
        have = [(results / "extracts" / t).exists() for t in EXTRACTS]
        if any(have) and not all(have):
            from fastsim.errors import ConfigError

            raise ConfigError(f"{results / 'extracts' / EXTRACTS[have.index(False)]}: "
                              f"missing beside {EXTRACTS[have.index(True)]}; allowed: both, "
                              "as `fastsim reproduce` writes them (run it again: it rewrites "
                              "them)")
        if all(have):
            # they lie in OUT, whose names other commands may write (fastsim run --out
            # OUT/extracts/trajectory_jobs.parquet): a missing column was a KeyError
            # traceback from inside the script
            check_figure_inputs(results / "extracts", ("trajectories",),
                                "the extracts `fastsim reproduce` writes")
            sources["extracts"] = results / "extracts"
    return sources


SWEEP_OUTPUT = ("the sweep's own output (run `fastsim sweep FILE --out DIR` again: it "
                "verifies its chunks and rewrites the tables)")
# an extract is written by reproduce, which rewrites it; a sweep never does
REPRODUCE_OUTPUT = ("the extracts `fastsim reproduce` writes (run it again, the same "
                    "command: it rewrites them)")


def _damaged(path: Path, why: str, allowed: str = SWEEP_OUTPUT):
    from fastsim.errors import ConfigError

    return ConfigError(f"{path}: damaged ({why}); allowed: {allowed}")


def read_manifest(sweep: Path) -> dict:
    """The manifest (``sweep.json``) of the finished sweep in directory ``sweep``, checked
    against itself and its tables (``fastsim.sweep.finished``: the chunks too are checked
    once, by ``find_sources``); a damaged or edited one is refused naming the file and
    what is wrong."""
    from fastsim.sweep.finished import finished_manifest

    return finished_manifest(Path(sweep), SWEEP_OUTPUT)


def _read_manifest(manifest: Path) -> tuple[str, str]:
    """The sweep's name and grid hash, once the sweep and its results are verified."""
    from fastsim.sweep.finished import verify_finished

    m = verify_finished(manifest.parent, SWEEP_OUTPUT)
    return m["name"], m["grid_hash"]


def _check_table(path: Path, grid_hash: str | None = None,
                 allowed: str = SWEEP_OUTPUT) -> None:
    """A Parquet table that reads in full, its pages passing their checksums (a truncated
    file has no footer; a damaged page fails its checksum; one without checksums is an
    older fastsim's) and, beside a manifest, was aggregated from that manifest's grid (a
    table copied from another run of the same sweep name is not), before any figure is
    drawn."""
    if not path.exists():
        return
    from fastsim.io import DamagedParquet, file_kind, parquet_metadata
    from fastsim.sweep.store import GRID_KEY, REWRITE, read_sweep_table

    why = file_kind(path)  # a named pipe would block the read
    if why is not None:
        raise _damaged(path, why, allowed)
    try:  # an extract's refusals name what rewrites it, as no sweep does
        read_sweep_table(path, REWRITE if allowed == SWEEP_OUTPUT else allowed)
    except DamagedParquet as exc:
        raise _damaged(path, exc.reason, allowed) from None
    if grid_hash is not None:
        written = parquet_metadata(path).get(GRID_KEY)
        if written != grid_hash:
            source = "names no grid" if written is None else f"is of grid {written[:12]}"
            raise _damaged(path, f"it {source}, but the manifest beside it is grid "
                                 f"{grid_hash[:12]}")


def read_table(path: Path, columns: list[str] | None = None):
    """A sweep's aggregated table (``summary.parquet``, ``jct_hist.parquet``) or an
    extract, as the figures read it: verified page by page, refused without checksums,
    and a sweep's against the SHA-256 its manifest records (``read_sweep_table``)."""
    from fastsim.sweep.store import REWRITE, read_sweep_table

    return read_sweep_table(path, REWRITE, columns=columns)


class SkipReason(str):
    """Why a figure is skipped, as its ``[figures] NAME: skipped, ...`` line says it, with
    what would be drawn (``allowed``) for a refusal's one line (``refusal``)."""

    allowed: str

    def __new__(cls, why: str, allowed: str) -> "SkipReason":
        reason = super().__new__(cls, why)
        reason.allowed = allowed
        return reason

    def refusal(self) -> str:
        return f"{self}; allowed: {self.allowed}"


def skip_reason(needs: tuple[str, ...], want: str | None, sources: dict[str, Path],
                results: Path, plots: tuple[str, ...] | None = None) -> str | None:
    """Why a figure cannot be drawn from ``sources`` (None if it can): a sweep it needs is
    missing, holds changes against another baseline than ``want``, the one its axes
    name (a script's ``BASELINE``: ``none`` where it plots changes against no stop policy),
    or has several cells where the figure draws one (a script's ``PLOTS``: the summary
    columns it draws a cell per value of)."""
    missing = [s for s in needs if s not in sources]
    if missing:
        # a sweep stopped before its tables (killed, or still running) read as absent
        begun = [str(results / s) for s in missing if (results / s / "sweep.json").is_file()]
        return SkipReason(f"no results for {', '.join(missing)} in {results}"
                          + (f" ({', '.join(begun)}: begun, not aggregated yet; the command "
                             "that runs it finishes it)" if begun else ""),
                          what_writes(missing))
    import polars as pl

    from fastsim.sweep.aggregate import paired_against

    for name in needs if plots is not None else ():
        why = _several_cells(name, Path(sources[name]), plots)
        if why is not None:
            return why
    for name in needs if want is not None else ():
        table = Path(sources[name]) / "summary.parquet"
        if table.is_file() and "baseline_policy" in pl.read_parquet_schema(table):
            other = sorted(paired_against(read_table(table, columns=["baseline_policy"]))
                           - {want})
            if other:
                return SkipReason(f"sweep {name} in {sources[name]} holds changes against "
                                  f"{', '.join(other)}; this figure plots changes against "
                                  f"{want} (baseline = \"{want}\" in the sweep file)",
                                  f"sweep {name} run with baseline = \"{want}\"")
    return None


def what_writes(missing: list[str]) -> str:
    """What is allowed where a figure's sources ``missing`` (names of its ``NEEDS``) are
    absent: each named with what writes it.  ``extracts`` is no sweep: a sweep named so
    would not do (it was said to), only ``fastsim reproduce``'s extracts."""
    sweeps = [s for s in missing if s != "extracts"]
    held = []
    if sweeps:
        held.append(f"the sweep{'s' * (len(sweeps) > 1)} {', '.join(sweeps)} (fastsim "
                    "reproduce's --out, or "
                    + ("a sweep's --out whose file says" if len(sweeps) == 1 else
                       "the --out of sweeps whose files say")
                    + " " + " and ".join(f'name = "{s}"' for s in sweeps) + ")")
    if "extracts" in missing:
        held.append(f"the extracts {' and '.join(f'extracts/{t}' for t in EXTRACTS)} "
                    "(fastsim reproduce's --out)")
    return f"a directory holding {' and '.join(held)}"


def not_drawn(policies: tuple[str, ...], name: str, sweep: Path) -> list[str]:
    """The policies of sweep ``name`` (in ``sweep``) a figure drawing only ``policies`` (a
    script's ``POLICIES``: the paper's) leaves out, but for the baseline ``none`` and those
    the shipped sweep of that name runs (the figure leaves them out by design: jct_cdf
    draws no deprioritize): a user's policy in a sweep named ``noise`` had no line in
    noise_sweep, and nothing said so."""
    from fastsim.resources import shipped
    from fastsim.sweep.grid import load_sweep

    paper = shipped("sweeps", f"{name}.toml")
    by_design = {c.config.policy.name for c in load_sweep(paper).cells} if paper.is_file() else set()
    names = read_table(sweep / "summary.parquet", columns=["policy_name"])["policy_name"]
    return sorted(set(names.unique().to_list()) - set(policies) - {"none"} - by_design)


def _several_cells(name: str, sweep: Path, plots: tuple[str, ...]) -> SkipReason | None:
    """A sweep that varies an axis a figure does not plot (a sweep named ``headline`` that
    also varies ``sigma``) has several cells where the figure draws one, and the figure
    took the first without a word."""
    import polars as pl

    table = sweep / "summary.parquet"
    if not table.is_file():
        return None
    schema = pl.read_parquet_schema(table)
    # an axis the sweep does not vary has no column: the cells are grouped by those it does
    # (a frontier sweep over n_evals alone that also varied k was not checked at all)
    plots = tuple(p for p in plots if p in schema)
    # by policy name, as the figures pick rows: EvalStop at k=2 and k=3 are two labels of
    # one name, whose rows a figure took the first of, or pooled, without a word
    keys = ["policy_name", *plots, "metric"]
    if not {"policy_name", "metric"} <= set(schema):
        return None
    rows = read_table(table, columns=keys).group_by(keys).len()
    if rows["len"].max() <= 1:
        return None
    axes = read_manifest(sweep).get("axes", [])
    other = [a for a in axes if a not in ("policy", *plots)]
    varies = (f"it varies {', '.join(other)}" if other else "it runs one policy at several "
              "settings" if "policy" in axes else "it varies more than those")
    per = " and ".join(["policy", *plots])
    return SkipReason(f"sweep {name} in {sweep} has several cells per {per} ({varies}), "
                      "where this figure draws one (a sweep of its own under another name "
                      "keeps them apart)",
                      f"sweep {name} with one cell per {per}, or its cells as a sweep under "
                      "another name (drawn by a figure of its own)")


def not_a_results_dir(results: Path) -> str:
    """The refusal of a DIR that is no directory, for ``fastsim figures`` and the scripts
    run alone: what it is, and what to give instead."""
    # a named pipe or a device there was "no such directory", sending the user looking
    # for a typo (as costaware figures says, it is not a directory)
    what = ("a file" if os.path.isfile(results) else "not a directory"
            if os.path.lexists(results) else "no such directory")
    near = ""
    if what == "no such directory":  # results/reproduce after reproduce --quick wrote -quick
        parent = Path(results).parent
        try:
            dirs = sorted(d for d in parent.iterdir() if d.is_dir())
        except OSError:  # no parent, or one that cannot be listed: nothing to offer
            dirs = []
        near = did_you_mean_path(results, dirs)
    return (f"{results} is not a results directory ({what}){near}; allowed: a sweep's --out, "
            "or a directory of them (fastsim reproduce's --out)")


def _nothing_to_draw(results: Path, sources: dict[str, Path], modules: dict,
                     why_not: dict[str, str | None], own_why: dict[str, str]) -> str:
    """Why no figure can be drawn from ``results``, in one line."""
    unfinished = [d for d in [results, *results.iterdir()] if (d / "sweep.json").is_file()
                  and not (d / "summary.parquet").exists()]
    if not sources and unfinished:  # killed before its tables were written
        return (f"{unfinished[0]} holds a sweep not yet aggregated (sweep.json without "
                "summary.parquet): nothing to draw; run `fastsim sweep FILE --out "
                f"{unfinished[0]}` again, which finishes it")
    if not sources:
        return (f"{results} holds no sweep results (sweep.json beside summary.parquet, in it "
                "or in a directory in it): nothing to draw; allowed: a sweep's --out, or a "
                "directory of them (fastsim reproduce's --out)")
    # the figures that have their sweeps say why they skip them (the generic figure of a
    # sweep of the user's own too); the others only lack them
    have = [why for name, why in why_not.items() if set(modules[name].NEEDS) <= set(sources)]
    have += [why for why in own_why.values()]  # their own allowed part said already
    return f"no figure can be drawn from {results}: " + "; ".join(
        why.refusal() if isinstance(why, SkipReason) else why
        for why in dict.fromkeys(have or why_not.values()))


def own_sweeps(sources: dict[str, Path]) -> dict[str, Path]:
    """The sweeps of ``sources`` no figure script reads (a user's own, under a name of its
    own): each is drawn by the generic figure (``figures/own_sweep.py``)."""
    sweeps = {name: d for name, d in sources.items() if name != "extracts"}
    read = {s for name in FIGURE_SCRIPTS for s in load_script(name).NEEDS} if sweeps else set()
    return {name: d for name, d in sweeps.items() if name not in read}


def own_plans(sources: dict[str, Path], metrics=None, x: str | None = None,
              where=None) -> dict[str, dict | str]:
    """Sweep name -> what its generic figure draws, or why it cannot (``own_sweep.plan``),
    for each sweep no figure script reads; ``metrics`` (``--metrics``) picks the panels, and
    is refused where there is no such sweep, or names a metric one of them lacks."""
    from fastsim.errors import ConfigError

    own = own_sweeps(sources)
    given = [o for o, v in (("--metrics", metrics), ("--x", x), ("--where", where)) if v]
    if given and not own:
        raise ConfigError(f"{given[0]} picks what the figure of a sweep no paper figure "
                          "reads draws, and there is none here (it holds "
                          f"{', '.join(sorted(sources)) or 'no sweep'}); allowed: without "
                          f"{given[0]}")
    if not own:
        return {}
    script = load_script(OWN_SWEEP)
    check_sweep_reads(own.values(), script.READS)
    return {name: script.plan(d, metrics, x, where) for name, d in own.items()}


def load_script(name: str):
    """The figure script ``figures/NAME.py`` as the module ``fastsim.figures.NAME``."""
    return importlib.import_module(f"fastsim.figures.{name}")


def figure_tables(scripts: tuple[str, ...]) -> dict[str, set]:
    """``{table: columns}`` the figure scripts read (each script's ``READS``)."""
    tables: dict[str, set] = {}
    for name in scripts:
        for table, columns in load_script(name).READS.items():
            tables.setdefault(table, set()).update(columns)
    return tables


def check_sweep_columns(sources: dict[str, Path], modules: dict) -> None:
    """The columns each figure script of ``modules`` (name: module) reads from its sweeps'
    tables (its ``READS``), checked before any figure is drawn.  A table aggregated by an
    older fastsim lacks the columns added since (``jct_hist.parquet`` had no ``cdf_lo``
    before the CDF's interval): jct_cdf ended in a polars traceback after the figures
    before it were written."""
    for module in modules.values():
        # the extracts: checked by ``find_sources``
        check_sweep_reads([sources[need] for need in module.NEEDS
                           if need in sources and need != "extracts"],
                          getattr(module, "READS", {}))


def check_sweep_reads(sweeps, reads: dict) -> None:
    """The columns a figure reads (its ``READS``: table -> columns) in each table of the
    sweep directories ``sweeps`` that holds it, one line naming those missing: the check
    of the paper's figures (``check_sweep_columns``) and of a sweep of one's own's."""
    import polars as pl

    from fastsim.sweep.store import REWRITE

    for d in sweeps:
        for table, columns in reads.items():
            path = Path(d) / table
            if path.is_file():
                _check_columns(path, pl.read_parquet_schema(path), columns, REWRITE,
                               " (an older fastsim's table?)")


def _check_columns(path: Path, have, columns, allowed: str, why: str = "") -> None:
    """A ``ConfigError`` naming the ``columns`` a figure reads that ``path`` lacks (it has
    ``have``), if any."""
    from fastsim.errors import ConfigError

    missing = sorted(set(columns) - set(have))
    if missing:
        raise ConfigError(f"{path}: missing column(s) {', '.join(missing)}{why}; allowed: "
                          f"{allowed}")


def check_figure_inputs(results: Path, scripts: tuple[str, ...], allowed: str) -> None:
    """The tables in ``results`` that the figure ``scripts`` read, checked before any is
    drawn (``costaware figures``, ``docs-figures``, the extracts of ``fastsim figures``);
    ``allowed`` says in an error what the tables should be."""
    check_figure_tables(results, figure_tables(scripts), allowed)


def check_figure_tables(results: Path, tables: dict[str, set], allowed: str) -> None:
    """Each table present read in full and holding the columns the scripts use, before
    any is drawn: a truncated table or a missing column was a polars traceback from
    inside a script, after the figures before it were written."""
    from fastsim.io import read_parquet_table

    for table, columns in tables.items():
        path = results / table
        if path.is_file():
            df = read_parquet_table(path, allowed)
            _check_columns(path, df.columns, columns, allowed)
            _check_drawable(path, df, columns, allowed)
            _check_one_row_per_point(path, df)


# the columns a figure reads as labels (a panel's, a line's, a legend entry's); every other
# column it reads it draws or computes with, so it holds numbers
_LABEL_COLUMNS = {"strategy", "sgd_step", "problem_kind", "arm", "policy", "job_id", "detector",
                  "setting", "role", "kind"}


def _check_drawable(path: Path, df, columns: set, allowed: str) -> None:
    """A table with no row, with text in a column a figure draws (a hand-edited one), or
    with a NaN or null count (``n_*``: ``n_seeds``): a matplotlib, format or ``int()``
    traceback from inside a script, or a figure drawn wrong (matplotlib plots text as
    categories, in the order it meets them).  A NaN among the values a figure plots is
    drawn as a gap, as a table of runs that reached no target holds them."""
    import polars as pl

    from fastsim.errors import ConfigError

    if df.height == 0:
        raise ConfigError(f"{path}: no rows; allowed: {allowed}")
    text = sorted(c for c in columns - _LABEL_COLUMNS
                  if not (df.schema[c].is_numeric() or df.schema[c] == pl.Boolean))
    if text:
        raise ConfigError(f"{path}: column(s) {', '.join(text)} hold no numbers; allowed: "
                          f"{allowed}")
    missing = sorted(c for c in columns - _LABEL_COLUMNS if c.startswith("n_") and (
        df[c].null_count() or (df.schema[c].is_float() and df[c].is_nan().any())))
    if missing:
        raise ConfigError(f"{path}: column(s) {', '.join(missing)} hold a NaN or null count, "
                          f"which a figure writes as a number; allowed: {allowed}")


# the columns that tell a figure's points apart (its panels, lines and x); any other knob
# taking two values (a sweep's further axis: lam, n, ...) put two rows on one point, drawn
# on top of each other, and said nowhere
_POINT_KEYS = {
    "costaware_sgd.summary.parquet": ("problem_kind", "problem_cost_corr", "sgd_step",
                                      "strategy", "problem_cost_sigma"),
    "costaware_grpo.curves.parquet": ("arm", "eval"),
    "costaware_grpo_sweep.curves.parquet": ("grpo_lam", "grpo_len_sigma", "arm", "eval")}
_KNOBS = ("problem_", "sgd_", "grpo_")  # config_columns' prefixes


def _check_one_row_per_point(path: Path, df) -> None:
    from fastsim.errors import ConfigError

    keys = _POINT_KEYS.get(path.name, ())
    n_points = df.select(keys).unique().height if keys else df.height
    if not keys or n_points == df.height:
        return
    varying = [c for c in df.columns if c.startswith(_KNOBS) and c not in keys
               and df.select(*keys, c).unique().height > n_points]
    raise ConfigError(f"{path}: {', '.join(varying) or 'a knob'} varies within a plotted "
                      f"point ({', '.join(keys)}); allowed: one value of each other knob "
                      "per table (a sweep with a further axis draws no figure)")


def held_output(out: Path, option: str = "--out") -> list:
    """Hold the sweep directory ``out`` lies in, if any (a sweep directory is written by
    its owner only: refused, naming the holder, while another process has it), check
    that ``out`` can be written (``option``: how the command names it) and is none of a
    sweep's own files nor in its cells/ (``check_not_owned``), and remove a killed
    drawing's temporaries there.  Keep the returned locks until the drawing is done."""
    from fastsim.io import check_output_dir
    from fastsim.sweep.store import check_not_owned, hold_sweep_dirs, remove_temporaries_in

    # as fastsim figures --out is checked (``fastsim.cli.hold_outputs``): a script run alone
    # or draw_all put its figures among a sweep's cells
    check_not_owned(out, option)
    held = hold_sweep_dirs(out)
    try:
        check_output_dir(out, option)
        remove_temporaries_in(out, held)  # only in a directory this process holds
    except BaseException:
        held.clear()  # not kept by a traceback the caller keeps (``draw_all``)
        raise
    return held


def check_figure_files(out: Path, names, formats: tuple[str, ...],
                       option: str = "--out") -> None:
    """Refuse, before any figure is drawn, a directory (or another file that cannot be
    replaced) where one of ``names``' ``out/NAME.FMT`` goes: drawing failed there after
    the figures before it were written, and in ``fastsim reproduce`` after every sweep."""
    from fastsim.io import check_output

    for name in names:
        for fmt in formats:
            check_output(Path(out) / f"{name}.{fmt}", option, None)


def comma_items(value) -> list[str] | None:
    """The items of ``value``, text comma-separated or a list (or tuple) of text, each
    stripped, in order, the empty ones left out; None where ``value`` is neither (a set's
    order is the process's hash seed's: it drew a figure's panels in another order each
    run).  ``--metrics`` and ``--formats`` are read by it (a value named twice is refused)."""
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, (tuple, list)) and all(isinstance(v, str) for v in value):
        items = value
    else:
        return None
    return [v.strip() for v in items if v.strip()]


def parse_formats(formats, option: str | None = None) -> tuple[str, ...]:
    """The file formats of ``formats`` (a list, or text comma-separated), each named once,
    else refused, as ``--metrics`` refuses a metric named twice (png,png drew every figure
    twice over one file and counted both, then drew it once without a word); a text taken
    for a list ("png") drew in formats 'p', 'n', 'g', failing in matplotlib after making
    the output directory.  ``option``: the command line's name of the value (``--formats``)."""
    from fastsim.errors import ConfigError, named_twice

    parsed = tuple(comma_items(formats) or ())
    shown = f"{option}={formats}" if option else f"formats={formats!r}"
    if not parsed or any(f not in FORMATS for f in parsed):
        raise ConfigError(f"{shown} is invalid; allowed: {', '.join(FORMATS)} (comma-separated)")
    twice = named_twice(parsed, "format")
    if twice is not None:
        raise ConfigError(f"{shown} is invalid; allowed: {twice}")
    return parsed


@known_keywords("fastsim.sweep.figures.draw_all()")
def draw_all(results: str | Path, out: str | Path, formats: tuple[str, ...] = ("png", "pdf"),
             log=print, scripts: tuple[str, ...] = FIGURE_SCRIPTS,
             metrics=None, own: bool = True, x: str | None = None,
             where=None) -> list[Path]:
    """Draw every figure of ``scripts`` whose inputs exist in ``results``, and the generic
    figure (``sweep_NAME``) of each sweep there that no figure script reads, in ``formats``
    (png, pdf, svg; a list, or text comma-separated); returns the files written.
    ``metrics``: the generic figure's panels (a list, or text comma-separated; default
    precision, stop recall, FPR and mean JCT); ``x``: its axis along x (default: the first
    the sweep varies); ``where``: ``AXIS=VALUE`` items (a list), each axis held at that
    value (a sweep of four axes drawn at one of them); ``own=False`` draws ``scripts`` alone
    (``fastsim reproduce``: the paper's figures, not one of its mixed sweep)."""
    from fastsim.errors import one_line
    from fastsim.io import (existing_directory, holding_directory, make_directory, name_max,
                            unmade_on_failure)
    from fastsim.sweep.store import refused_if_written

    said = log
    log = lambda line: said(one_line(line))  # noqa: E731 (a sweep path's line break escaped)
    formats = parse_formats(formats)
    results, out = Path(results), Path(out)
    if not os.path.isdir(results):  # os.path's: False, not OSError, for a too-long name
        from fastsim.errors import ConfigError

        raise ConfigError(not_a_results_dir(results))
    # A lock goes with its last reference, and a traceback the caller keeps (IPython keeps
    # the last one) keeps this frame's: emptied on any exit, or a drawing refused on a
    # damaged table left the sweep directory held, and the run of the sweep that the
    # refusal asks for was refused as "in use" by this process.
    held = held_output(out)
    try:
        with refused_if_written(*sweep_dirs(results)):  # being resumed, not damaged
            sources = find_sources(results)
            modules, why_not, plans, own_why, stems = _what_to_draw(
                results, sources, scripts, own, metrics, x, where)
        drawn = {name: m for name, m in modules.items() if why_not[name] is None}
        for name in stems:  # the rule a sweep's file is loaded by, at --out's own limit
            check_figure_name(name, str(sources[name] / "sweep.json"), formats,
                              name_max(existing_directory(out)))
        check_figure_files(out, list(drawn) + list(stems.values()), formats)
        # said once the choice is made (the plotting libraries loaded): the first figure's
        # line came 6-10 s after the command on a busy 2-core machine, after its drawing
        log(f"[figures] drawing {', '.join(list(drawn) + list(stems.values()))} into {out}")
        with unmade_on_failure() as made:  # a drawing failed before its first figure
            made.append(make_directory(out))  # leaves no empty DIR behind
            with holding_directory(out):  # all of one drawing's figures, never some of two
                written = _draw_scripts(modules, why_not, sources, out, formats, log,
                                        alone=len(own_why) == len(plans))
                written += _draw_own_sweeps(plans, own_why, stems, sources, out, formats, log)
        return written
    finally:
        held.clear()


def _what_to_draw(results: Path, sources: dict[str, Path], scripts: tuple[str, ...],
                  own: bool, metrics, x: str | None, where) -> tuple:
    """``draw_all``'s choice, before anything is made: the figure scripts (name: module),
    why each is skipped (None: drawn), the plans of the sweeps of one's own (or why each
    is skipped, also in ``own_why``) and their figures' file names (``stems``); refused
    where nothing can be drawn, or two sweeps' figures would share a file name."""
    modules = {name: load_script(name) for name in scripts}
    # before the reasons to skip a figure, which read its table too: one without a
    # column a figure plots a cell per value of (k, scheduler) read as a sweep of
    # several cells per policy, and that figure was skipped, saying so, exit 0
    check_sweep_columns(sources, modules)
    plans = own_plans(sources if own else {}, metrics, x, where)
    own_why = {name: p for name, p in plans.items() if isinstance(p, str)}
    why_not = {name: skip_reason(m.NEEDS, getattr(m, "BASELINE", None), sources, results,
                                 getattr(m, "PLOTS", None)) for name, m in modules.items()}
    if (all(why is not None for why in why_not.values())
            and len(own_why) == len(plans)):  # refused before DIR/figures is made
        from fastsim.errors import ConfigError

        raise ConfigError(_nothing_to_draw(results, sources, modules, why_not, own_why))
    stems = {name: figure_stem(name) for name in plans if name not in own_why}
    if len(set(stems.values())) < len(stems):  # "my sweep" and "my_sweep"
        from fastsim.errors import ConfigError

        raise ConfigError(f"{results}: sweeps {', '.join(sorted(stems))} would draw "
                          f"figures of one file name; allowed: names that differ in "
                          "letters, digits, '.', '_' or '-'")
    return modules, why_not, plans, own_why, stems


def _draw_scripts(modules: dict, why_not: dict, sources: dict[str, Path], out: Path,
                  formats: tuple[str, ...], log, alone: bool) -> list[Path]:
    """Draw each figure script of ``modules`` not skipped (``why_not``), saying what it
    wrote and which policies of its sweep it leaves out; a skipped one is said where no
    sweep of one's own is drawn (``alone``) or some of its sweeps are here."""
    written: list[Path] = []
    for name, module in modules.items():
        if why_not[name] is not None:
            # beside a sweep of the user's own, a paper figure none of whose
            # sweeps is here is no news
            if alone or set(module.NEEDS) & set(sources):
                log(f"[figures] {name}: skipped, {why_not[name]}")
            continue
        files = module.draw(sources, out, formats)
        log(f"[figures] {name}: {', '.join(Path(f).name for f in files)}")
        policies = getattr(module, "POLICIES", None)
        left = (not_drawn(policies, module.NEEDS[0], sources[module.NEEDS[0]])
                if policies else [])
        if left:
            log(f"[figures] {name}: {', '.join(left)} not drawn; it draws "
                f"{', '.join(policies)} only")
        written += files
    return written


def _draw_own_sweeps(plans: dict, own_why: dict, stems: dict, sources: dict[str, Path],
                     out: Path, formats: tuple[str, ...], log) -> list[Path]:
    """Draw the figure of each sweep of one's own by its plan, saying what it draws and
    what it leaves out, or why it is skipped (``own_why``)."""
    generic = load_script(OWN_SWEEP) if plans else None
    written: list[Path] = []
    for name, p in plans.items():
        if name in own_why:
            log(f"[figures] {figure_stem(name)}: skipped, {own_why[name]}")
            continue
        files = generic.draw_sweep(name, sources[name], out, formats, p)
        # what is drawn, not what the plan offers: a column of panels with no
        # estimate of the metrics asked for is none
        summary = read_table(sources[name] / "summary.parquet")
        log(f"[figures] {stems[name]}: {', '.join(Path(f).name for f in files)}"
            f" ({generic.describe(summary, p)})")
        for left in (generic.not_drawn(summary, p), generic.unlabelled(p)):
            if left:  # said under the figure too
                log(f"[figures] {stems[name]}: {left}")
        written += files
    return written
