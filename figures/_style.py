"""Shared look and I/O of the figure scripts: they read aggregated Parquet only.

``sources`` maps a sweep's name to its output directory (``summary.parquet``,
``jct_hist.parquet``) and ``extracts`` to the per-job extracts directory.  The paper
scripts have ``draw(sources, out, formats)`` and run standalone through ``main``; the
cost-aware scripts have ``main(results, out)`` and run standalone through ``cli``.
"""
from __future__ import annotations

import functools
import math
import re
import sys
from pathlib import Path

import matplotlib
import numpy as np
import polars as pl
from cycler import cycler
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

from fastsim import registry as R  # noqa: E402  (declarations only: names and labels)
from fastsim.errors import ConfigError, counted  # noqa: E402
from fastsim.io import DRAWING, make_directory, remove_made, write_all  # noqa: E402


class _Labels(dict):
    """Figure labels from the registry's declarations; a name nobody declared (a user
    policy's, a results file's from elsewhere) is shown as itself rather than raising."""

    def __missing__(self, key):
        return str(key)


class _Palette(dict):
    """One colour per policy: built-ins in declaration order, any other name the next
    free colour of the same palette (stable within a figure), never a KeyError."""

    def __missing__(self, key):
        colours = _seaborn().color_palette("colorblind", 10)
        self[key] = colours[len(self) % len(colours)]
        return self[key]


def _figure_label(d, values=None) -> str:
    """``d.figure_label`` with its parameters filled in (``values`` over the defaults)."""
    try:
        return d.figure_label.format(**{**d.defaults(), **(values or {})})
    except (KeyError, IndexError, ValueError):
        return d.figure_label


# A policy's label at its default parameters; ``policy_label`` renders the ones a sweep used.
POLICY_NAMES = _Labels({d.name: _figure_label(d) for d in R.policies()})


def policy_label(name: str, rows: pl.DataFrame | None = None) -> str:
    """The figure label of policy ``name`` with the parameters its ``rows`` were run with,
    read from their ``policy`` column (the table label, e.g. ``evalstop(k=3)``): "EvalStop
    (k=3)".  Rows of several parameter settings, or none, give the bare name, never the
    defaults' numbers (a legend must not claim k=2 for a k=3 run)."""
    try:
        d = R.lookup("policy", name)
    except ConfigError:
        return str(name)
    bare = re.split(r" \(|-", d.figure_label.split("{")[0])[0] or d.name  # "EvalStop (k=" -> "EvalStop"
    specs = [] if rows is None or "policy" not in rows.columns else rows["policy"].unique().to_list()
    if len(specs) != 1:
        return bare if "{" in d.figure_label else d.figure_label
    m = re.fullmatch(r"([\w.:]+)\((.*)\)", specs[0])
    if m is None:
        return bare if "{" in d.figure_label else d.figure_label
    try:
        values = d.values(R.parse_spec(f"{m.group(1)}:{m.group(2)}", "policy")[1], "policy")
    except ConfigError:
        return bare
    return _figure_label(d, values)
# Cost-aware sampling strategies and GRPO arms (fastsim.costaware) as figures name them:
# what each samples in proportion to.  A name not listed is shown as itself.
STRATEGY_NAMES = _Labels({
    "uniform": "uniform", "gradient_norm": "gradient norm (p ∝ G)",
    "cost_only": "cost only (p ∝ 1/√c)", "optimal": "optimal (p ∝ G/√c)",
    "cost_aware": "cost-aware (p ∝ |A|/√c)", "advantage_only": "advantage only (p ∝ |A|)",
    "nonzero_uniform": "uniform over A ≠ 0"})
PROBLEM_NAMES = _Labels({"least_squares": "least squares", "logistic": "logistic regression",
                         "convex": "convex step rule", "strongly_convex": "strongly convex step rule"})


# A scheduler's table label is its name, or name+flag for a bool parameter set (fifo+backfill).
SCHEDULER_NAMES = _Labels(
    (label, d.figure_label + suffix) for d in R.schedulers()
    for label, suffix in [(d.name, "")] + [(f"{d.name}+{p.name}", f"+{p.name}")
                                           for p in d.params if p.kind == "bool"])


def scheduler_label(rows: pl.DataFrame) -> str:
    """The figure label of the one scheduler ``rows`` ran under ("SRTF-Est"), read from
    their ``scheduler`` column: a sweep under the headline's name run with FIFO was
    labelled SRTF-Est."""
    found = rows["scheduler"].unique().to_list()
    return SCHEDULER_NAMES[found[0]] if len(found) == 1 else "the base scheduler"


# The paper's policies, then the no-policy baseline (the colours the figures have always
# had), then the online detectors, in dark shades past the colour-blind palette's ten.
_ORDER = ([d.name for d in R.policies() if not d.vector and d.name != "none"] + ["none"]
          + [d.name for d in R.policies() if d.vector])


def _seaborn():
    """seaborn, imported by the first drawing rather than with this module: it imports
    pandas and scipy.stats (about 3.6 CPU s), and ``fastsim figures`` loads the figure
    scripts to check what it is asked to draw, so that a refusal came seconds late and a
    valid call said nothing for as long."""
    import seaborn

    return seaborn


@functools.cache
def _palette() -> _Palette:
    sns = _seaborn()
    return _Palette(zip(_ORDER, sns.color_palette("colorblind") + sns.color_palette("dark")))


@functools.cache
def _theme() -> dict:
    # One theme for every figure (figures/ and docs/figures/): seaborn's paper context on
    # a white grid, the colour-blind palette, and TrueType (Type 42) fonts embedded in PDFs
    # and PostScript so that the text stays text.
    sns = _seaborn()
    return {**sns.axes_style("whitegrid"), **sns.plotting_context("paper", font_scale=1.1),
            "axes.prop_cycle": cycler(color=sns.color_palette("colorblind")),
            "figure.dpi": 120, "savefig.dpi": 200, "savefig.bbox": "tight",
            "pdf.fonttype": 42, "ps.fonttype": 42}


_LAZY = {"sns": _seaborn, "PALETTE": _palette, "THEME": _theme}


def __getattr__(name: str):
    """``S.sns``, ``S.PALETTE`` (a colour per policy) and ``S.THEME`` (the figures' rc
    settings), made on first use (``_seaborn``)."""
    if name in _LAZY:
        return _LAZY[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def themed(draw):
    """Run a drawing function under ``THEME`` without touching the caller's settings.

    The theme lives in an ``rc_context`` for the duration of the call only, so drawing in
    a notebook leaves its style and backend as they were; one call at a time in a process
    (``fastsim.io.DRAWING``), since the settings are the process's: a second thread's
    figure was drawn without the theme, and the theme was left set.
    """
    @functools.wraps(draw)
    def wrapper(*args, **kwargs):
        with DRAWING, matplotlib.rc_context(_theme()):
            return draw(*args, **kwargs)
    return wrapper


def subplots(nrows: int = 1, ncols: int = 1, **kwargs):
    """``plt.subplots`` without pyplot: a ``Figure`` bound to no GUI backend (nothing is
    shown, no backend is switched), and its axes."""
    fig = Figure(figsize=kwargs.pop("figsize", None))
    return fig, fig.subplots(nrows, ncols, **kwargs)


def sweep_table(path: Path) -> pl.DataFrame:
    """A sweep's table (``summary.parquet``, ``jct_hist.parquet``, an extract), its pages
    verified; one without page checksums (an older fastsim's) is refused."""
    from fastsim.sweep.figures import read_table

    return read_table(Path(path))


def table(path: Path) -> pl.DataFrame:
    """A results table a cost-aware or trace figure reads, its pages verified where it
    carries checksums (traces may come from elsewhere)."""
    from fastsim.io import read_parquet_table

    return read_parquet_table(Path(path), "the output of the command that writes it (run it "
                              "again)")


def summary(sources: dict, sweep: str) -> pl.DataFrame:
    return sweep_table(Path(sources[sweep]) / "summary.parquet")


def metric(df: pl.DataFrame, name: str) -> pl.DataFrame:
    return df.filter(pl.col("metric") == name)


def band(ax, x, rows: pl.DataFrame, label: str, color, scale: float = 100.0, marker="o"
         ) -> np.ndarray:
    """A line with its 95% interval as a shaded band; nothing (and no legend entry) when
    ``rows`` is empty.  Returns the intervals' widths (in ``scale`` units) for ``shaded``."""
    if rows.height == 0:
        return np.empty(0)
    ax.plot(x, rows["mean"] * scale, marker=marker, ms=4, color=color, label=label)
    ax.fill_between(x, rows["lo"] * scale, rows["hi"] * scale, color=color, alpha=0.25, lw=0)
    width = (rows["hi"] - rows["lo"]).to_numpy().astype(np.float64) * scale
    return width[np.isfinite(width)]


def shaded(widths, of: str = "") -> str:
    """A band figure's footnote ``what``: at 2,000 clusters most bands are narrower than
    their line, and "95% CIs" alone did not say whether they were drawn at all.  ``widths``
    are of rates (percentage points); ``of`` says which panels they are where others are
    not rates (a relative change's width is no number of points)."""
    w = np.concatenate([np.ravel(x) for x in widths]) if len(widths) else np.empty(0)
    if w.size == 0:
        return "95% CIs over"
    return (f"shaded 95% CIs (median width {np.median(w):.2g} pp, widest {w.max():.2g} pp"
            f"{of}; a band narrower than its line is hidden by it) over")


def save(fig, out: Path, stem: str, formats=("png", "pdf"), **savefig) -> list[Path]:
    """Write ``out/stem.FMT`` per format, close ``fig``, return the paths.  ``out`` is made
    by the caller before it draws and never here: moved or deleted meanwhile, it is not
    made again at its old path with some of the figures (``fastsim.io.write_all``).

    ``savefig`` keywords (``dpi``, ``bbox_inches``) go to every ``fig.savefig``; PDFs carry
    no creation date so that redrawing the same data gives the same file.
    """
    import matplotlib.pyplot as plt

    out = Path(out)
    paths = [out / f"{stem}.{fmt}" for fmt in formats]

    def writer(fmt):
        meta = {"CreationDate": None} if fmt == "pdf" else None
        return lambda tmp: fig.savefig(tmp, format=fmt, metadata=meta, **savefig)
    try:  # every format or none, each renamed into place complete (a kill leaves no stub)
        write_all([(p, writer(fmt)) for p, fmt in zip(paths, formats)], within=out)
    finally:
        plt.close(fig)  # figures made by seaborn grids go through pyplot; ours are not kept there
    return paths


def legend_outside(ax, source=None, **kwargs) -> None:
    """The legend of ``source`` (default ``ax``) to the right of ``ax``, outside every
    axes so that it never covers data; ``tight_layout`` and ``save`` make room for it."""
    handles, labels = (source or ax).get_legend_handles_labels()
    if handles:
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                  borderaxespad=0.0, **kwargs)


def paper_line(ax, y: float, x: float, text: str, until: float | None = None) -> None:
    """The paper's reported value as a dotted horizontal line, labelled below at ``x``;
    ``until``: the x its claim stops at (a bound for sigma <= 0.05 drawn across every
    sigma read as a claim about all of them)."""
    if until is None:
        ax.axhline(y, ls=":", color="0.5", lw=1)
    else:
        ax.plot([x, until], [y, y], ls=":", color="0.5", lw=1)
    ax.annotate(text, (x, y), xytext=(0, -12), textcoords="offset points", fontsize=7,
                color="0.4")


def note(fig, text: str) -> None:
    """``text`` under the figure, right-aligned below every axis label (``save`` crops to a
    tight box, which takes the note in): where a figure says what its bars are and its n."""
    fig.text(0.99, 0.0, text, ha="right", va="top", fontsize=7, color="0.4")


def footnote(fig, sources: dict, sweep: str, what: str = "95% CIs over",
             more: str = "", rows: pl.DataFrame | None = None) -> None:
    """``SWEEP: WHAT n = N clusters per cell`` under the figure (``note``), and the fewest
    an estimate rests on where some rest on fewer (a change drops a cluster whose baseline
    is 0, a rate one with no job it is over): the fewest was given as the clusters per
    cell, so one change over 1,998 pairs made a sweep of 2,000 read "n = 1998".  ``more``:
    a further line (what the figure could not draw).  ``rows``: the summary's rows drawn,
    where a figure draws some of them (default: the whole summary)."""
    df = summary(sources, sweep) if rows is None else rows
    n = int(df["n"].max()) if df.height else 0
    shown = df.filter(pl.col("mean").is_finite())  # a row with no estimate draws nothing
    fewest = int(shown["n"].min()) if shown.height else n
    text = f"{sweep}: {what} n = {n} clusters per cell"
    note(fig, text + (f"; some estimates rest on fewer (n >= {fewest})" if fewest < n else "")
         + (f"\n{more}" if more else ""))


def at_points(n: int) -> str:
    """``at 1 point``, ``at 3 points``: where a figure's note counts what it left out."""
    return f"at {counted(n, 'point')}"


def not_drawn_note(ax, why: str, missed: list[str], top: bool = False) -> None:
    """Name in panel ``ax`` what it leaves out: ``not drawn WHY:`` over a line per entry of
    ``missed`` (nothing where it is empty), small and grey in its lower left corner, or
    its upper left (``top``): the cost-aware figures' points with no estimate."""
    if missed:
        ax.text(0.02, 0.98 if top else 0.02, f"not drawn {why}:\n" + "\n".join(missed),
                ha="left", va="top" if top else "bottom", transform=ax.transAxes,
                fontsize=7, color="0.4")


def rate_axis(ax, lo: float | None, hi: float | None, min_span: float = 10.0) -> None:
    """Y range of a percentage panel: the data's range, at least ``min_span`` points wide,
    inside [0, 100], so that a flat 99.9-100% reads as flat rather than as a cliff.  No
    range (None: no row; NaN: no interval, as of a policy that never triggered) is the
    whole of [0, 100]: matplotlib refused a NaN limit with a traceback."""
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        ax.set_ylim(-1.0, 101.0)
        return
    span = max(hi - lo, min_span)
    bottom, top = (lo + hi) / 2 - span / 2, (lo + hi) / 2 + span / 2
    if top > 100:
        bottom, top = bottom - (top - 100), 100.0
    if bottom < 0:
        bottom, top = 0.0, min(top - bottom, 100.0)
    pad = 0.03 * (top - bottom)
    ax.set_ylim(max(bottom - pad, -1.0), min(top + pad, 101.0))


def plain_log_ticks(ax) -> None:
    """Tick labels of a log-scaled y axis as plain numbers (300, 1000, 2), not 3x10^2; the
    2-3-5 minor ticks are labelled too when the axis spans less than 30x.  Call after
    drawing, once the limits are known."""
    def plain(y, _):
        return f"{y:g}"

    def minor(y, _):
        lead = y / 10 ** np.floor(np.log10(y)) if y > 0 else 0
        return f"{y:g}" if np.isclose(lead, (2, 3, 5)).any() else ""

    lo, hi = ax.get_ylim()
    ax.yaxis.set_major_formatter(FuncFormatter(plain))
    ax.yaxis.set_minor_formatter(FuncFormatter(minor) if 0 < lo and hi / lo < 30
                                 else NullFormatter())


def _refuse(message: str) -> None:
    """One line on stderr, exit 2, in the form of the command line's refusals
    (``noise_sweep.py: error: ...`` as ``fastsim figures: error: ...``; ``one_line``: a
    path's line break escaped)."""
    from fastsim.errors import one_line

    print(f"{Path(sys.argv[0]).name}: error: {one_line(message)}", file=sys.stderr)
    sys.exit(2)


def _or_refuse(call, *args):
    """``call(*args)``, its ``ConfigError`` (a damaged results directory, a held one) one
    line and exit 2, as the command line's (it was a traceback, exit 1)."""
    try:
        return call(*args)
    except ConfigError as exc:
        _refuse(str(exc))


def _held(out) -> list:
    """``fastsim.sweep.figures.held_output``: a script run alone writes into a sweep
    directory only while no other process holds it, as ``fastsim figures`` does."""
    from fastsim.sweep.figures import held_output

    return _or_refuse(held_output, Path(out), "OUT_DIR")


def _usage() -> None:
    """A script run without RESULTS_DIR (or with more than two arguments) says how to run
    it; an empty one is refused, as fastsim figures refuses it: Path('') is '.', so
    ``"$DIR"`` with DIR unset drew the current directory's sweep, or wrote there."""
    if not 2 <= len(sys.argv) <= 3:  # a usage line, as argparse's: no "error:"
        print(f"usage: python {sys.argv[0]} RESULTS_DIR [OUT_DIR] (default OUT_DIR: "
              "RESULTS_DIR/figures)", file=sys.stderr)
        sys.exit(2)
    for name, arg in zip(("RESULTS_DIR", "OUT_DIR"), sys.argv[1:]):
        if not arg.strip():
            _refuse(f"{name} is empty; allowed: a path")


def main(draw, needs, baseline: str | None = None, plots: tuple[str, ...] | None = None) -> None:
    """Standalone use: ``python figures/NAME.py RESULTS_DIR [OUT_DIR]``; ``baseline`` and
    ``plots`` as a script's ``BASELINE`` and ``PLOTS``
    (``fastsim.sweep.figures.skip_reason``)."""
    from fastsim.sweep.figures import (check_sweep_columns, find_sources, not_a_results_dir,
                                       skip_reason)

    _usage()
    results = Path(sys.argv[1])
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else results / "figures"
    if not results.is_dir():
        _refuse(not_a_results_dir(results))
    sources = _or_refuse(find_sources, results)
    _or_refuse(check_sweep_columns, sources, {"script": sys.modules[draw.__module__]})
    why = skip_reason(needs, baseline, sources, results, plots)
    if why is not None:  # before making OUT: a mistyped RESULTS_DIR leaves nothing behind
        _refuse(why.refusal())
    held = _held(out)  # noqa: F841 (released when the script ends)
    out.mkdir(parents=True, exist_ok=True)
    for p in _or_refuse(draw, sources, out, ("png", "pdf")):  # a table damaged since
        print(p)


def cli(main) -> None:
    """Standalone use of a ``main(results, out)`` script: ``python figures/NAME.py RESULTS
    [OUT_DIR]`` (default ``RESULTS/figures``); prints the files written."""
    _usage()
    results = Path(sys.argv[1])
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else results / "figures"
    if not results.is_dir():
        from fastsim.sweep.figures import not_a_results_dir

        _refuse(not_a_results_dir(results))
    held = _held(out)  # noqa: F841 (released when the script ends)
    name = Path(sys.argv[0]).stem
    made = make_directory(out)  # ``save`` writes in it, never makes it
    try:
        try:
            written = main(results, out)
        except ConfigError as exc:  # a table that fails its checksums, or is not Parquet
            _refuse(str(exc))
        except pl.exceptions.PolarsError as exc:  # a damaged table: a traceback
            _refuse(f"{results}: a table {name} reads is damaged "
                    f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); "
                    "allowed: the output of the command that writes it (run it again)")
        except OSError as exc:  # a file it reads or writes (a full disk): named, not 'damaged'
            _refuse(f"{exc.filename or results}: {exc.strerror or exc}")
        if not written:  # it read nothing: a mistyped DIR said nothing, exit 0
            reads = getattr(sys.modules[main.__module__], "READS", {})
            _refuse(f"no results for {name} in {results}; allowed: a directory holding "
                    f"the tables it reads ({', '.join(reads)})")
    except BaseException:
        remove_made(made)  # refused: OUT_DIR not left behind, if nothing was drawn in it
        raise
    for p in written:
        print(p)
