"""Any sweep no paper figure reads: one panel per metric against the sweep's first varying
axis, its second as colour, its third as a column of panels; every point with its 95%
interval as an error bar, n in the note under the figure.

``fastsim figures DIR`` draws it as ``sweep_NAME.png``/``.pdf`` for each such sweep in DIR
(``--metrics`` picks the panels), and so does ``python figures/own_sweep.py DIR [OUT_DIR]``
(default metrics, no paper figure); ``plan`` says what it would draw, or why it cannot,
and ``points`` is the data it plots, read from the summary and nothing else.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl

from fastsim.figures import _style as S

NEEDS = ()  # any sweep no other figure reads (fastsim.sweep.figures.own_sweeps)
# the columns it reads from its sweep's table, beside the sweep's axes
READS = {"summary.parquet": ("policy", "metric", "kind", "mean", "lo", "hi", "n")}
# mean JCT is a mean over clusters; the other three are rates pooled over jobs
DEFAULT_METRICS = ("precision", "stop_recall", "fpr", "jct_mean_h")
MAX_AXES = 3      # x, colour, columns of panels
MAX_COLOURS = 10  # the colour-blind palette's
MAX_COLUMNS = 6
MAX_METRICS = 8
PICK = ("a sweep file with fewer axes, or fewer values on them (plot the summary by hand "
        "otherwise: docs/tutorial.md section 3)")


def stem(name: str) -> str:
    """The file name (no extension) of sweep ``name``'s figure: ``sweep_NAME``, every
    character but letters, digits, ``.``, ``_`` and ``-`` as ``_`` (a sweep name may hold
    spaces)."""
    return "sweep_" + re.sub(r"[^A-Za-z0-9._-]", "_", name)


def _axes(sweep: Path, df: pl.DataFrame) -> list[str]:
    """The sweep's axes that take several values in its summary, in its file's order; the
    policy too where only the baseline's cells add one (no policy axis)."""
    axes = json.loads((Path(sweep) / "sweep.json").read_text()).get("axes", [])
    if "policy" not in axes:
        axes = [*axes, "policy"]
    return [a for a in axes if a in df.columns and df[a].n_unique() > 1]


def summary_metrics(df: pl.DataFrame) -> list[str]:
    """The metrics of a summary, in its row order (the declarations')."""
    return df["metric"].unique(maintain_order=True).to_list()


def plan(sweep: Path, metrics=None) -> dict | str:
    """What the figure of the sweep in ``sweep`` draws: ``{"x", "hue", "col", "metrics"}``
    (an axis name, or None), or why it cannot be drawn (a string).  ``metrics``: names
    (a list, or text comma-separated; default ``DEFAULT_METRICS``, those the summary has);
    one the summary does not hold is refused (``ConfigError``) naming those it does."""
    from fastsim.errors import ConfigError

    df = S.sweep_table(Path(sweep) / "summary.parquet")
    have = summary_metrics(df)
    if metrics is None:
        chosen = [m for m in DEFAULT_METRICS if m in have]
    else:
        items = metrics.split(",") if isinstance(metrics, str) else list(metrics)
        chosen = list(dict.fromkeys(str(m).strip() for m in items if str(m).strip()))
        unknown = [m for m in chosen if m not in have]
        if unknown or not chosen:
            shown = ",".join(map(str, items)) if not isinstance(metrics, str) else metrics
            why = f"unknown: {', '.join(unknown)}" if unknown else "empty"
            raise ConfigError(f"--metrics={shown} is invalid ({why}, in {sweep}); allowed: "
                              f"metrics of the sweep's summary, comma-separated: "
                              f"{', '.join(have)}")
        if len(chosen) > MAX_METRICS:
            raise ConfigError(f"--metrics names {len(chosen)} metrics; allowed: at most "
                              f"{MAX_METRICS}, one panel each")
    axes = _axes(sweep, df)
    if not axes:
        return f"sweep in {sweep} varies no axis: one cell, nothing to draw against"
    if len(axes) > MAX_AXES:
        return (f"sweep in {sweep} varies {len(axes)} axes ({', '.join(axes)}); this figure "
                f"draws at most {MAX_AXES} (x, colour, columns of panels): {PICK}")
    x, hue, col = (axes + [None, None])[:3]
    for axis, most, role in ((hue, MAX_COLOURS, "colours"), (col, MAX_COLUMNS, "columns")):
        if axis is not None and df[axis].n_unique() > most:
            return (f"sweep in {sweep} has {df[axis].n_unique()} values of {axis}, drawn as "
                    f"{role}; allowed: at most {most}: {PICK}")
    return {"x": x, "hue": hue, "col": col, "metrics": chosen}


def points(df: pl.DataFrame, p: dict) -> pl.DataFrame:
    """The points the figure draws: per metric and value of the plan's axes, ``mean``,
    ``lo``, ``hi`` (in percent where the metric is shown as one) and ``n``.  Rows without
    an estimate (the precision of a policy that never stops: NaN) or without a value of x
    (a policy parameter axis, ``k``, at a policy without it) are left out, and so is a
    colour or a column of panels that has no other."""
    from fastsim.summary import _is_percent

    keys = [a for a in (p["x"], p["hue"], p["col"]) if a is not None]
    rows = df.filter(pl.col("metric").is_in(p["metrics"]) & pl.col(p["x"]).is_not_null()
                     & pl.col("mean").is_finite())
    scale = pl.Series([100.0 if _is_percent(m, k) else 1.0
                       for m, k in zip(rows["metric"], rows["kind"])])
    return rows.select("metric", *keys, pl.col("mean") * scale, pl.col("lo") * scale,
                       pl.col("hi") * scale, "n")


def axis_label(metric: str, kind: str) -> str:
    """A metric's declared label (``fastsim/metrics.py``) with its unit: "mean JCT (h)",
    "precision (%)", "mean JCT change (%)"."""
    from fastsim import metrics as M
    from fastsim.errors import ConfigError
    from fastsim.summary import _is_percent, display_name

    label = display_name(metric)
    if _is_percent(metric, kind):
        return f"{label} (%)"
    try:
        unit = M.lookup(metric).unit
    except ConfigError:  # a user metric whose module this process has not imported
        return label
    return label if not unit or label.endswith(f"({unit})") else f"{label} ({unit})"


def _values(df: pl.DataFrame, axis: str | None) -> list:
    """An axis' values as the figure orders them: numbers ascending, text (policies,
    schedulers, mixes) in the sweep's cell order."""
    if axis is None:
        return [None]
    values = df[axis].drop_nulls().unique(maintain_order=True)
    return sorted(values.to_list()) if values.dtype.is_numeric() else values.to_list()


def _text(axis: str, value) -> str:
    return str(value) if axis in ("policy", "scheduler") else f"{axis}={value}"


@S.themed
def draw_sweep(name: str, sweep: Path, out: Path, formats, p: dict) -> list[Path]:
    """Draw the figure of sweep ``name`` (its directory ``sweep``) by plan ``p``."""
    df = S.sweep_table(Path(sweep) / "summary.parquet")
    data = points(df, p)
    x, hue, col = p["x"], p["hue"], p["col"]
    xs, hues, cols = _values(data, x), _values(data, hue), _values(data, col)
    numeric = data[x].dtype.is_numeric()
    nrows, ncols = len(p["metrics"]), len(cols)
    if ncols == 1:  # one row of panels, as the paper's figures
        nrows, ncols = 1, nrows
    # a metric's panels share its y axis, so that the columns compare at a glance
    fig, axes = S.subplots(nrows, ncols, figsize=(3.6 * ncols, 3.0 * nrows), squeeze=False,
                           sharex=True, sharey="row" if len(cols) > 1 else False)
    colours = S.sns.color_palette("colorblind", MAX_COLOURS)
    for i, metric in enumerate(p["metrics"]):
        for j, c in enumerate(cols):
            ax = axes[i, j] if len(cols) > 1 else axes[0, i]
            for h_i, h in enumerate(hues):
                rows = data.filter(pl.col("metric") == metric)
                for axis, value in ((hue, h), (col, c)):
                    if axis is not None:
                        rows = rows.filter(pl.col(axis) == value)
                rows = rows.sort(x) if numeric else rows
                if rows.height == 0:
                    continue
                at = (rows[x].to_list() if numeric else
                      [xs.index(v) + (h_i - (len(hues) - 1) / 2) * 0.08 for v in rows[x]])
                mean = rows["mean"].to_numpy()
                ax.errorbar(at, mean, yerr=[mean - rows["lo"].to_numpy(),
                                            rows["hi"].to_numpy() - mean],
                            marker="o", ms=4, capsize=3, lw=1.2, color=colours[h_i],
                            label=_text(hue, h) if hue is not None else name)
            kind = df.filter(pl.col("metric") == metric)["kind"]
            ax.set_ylabel(axis_label(metric, kind[0] if kind.len() else "mean"))
            ax.set_xlabel(x)
            if col is not None:
                ax.set_title(_text(col, c), fontsize=9)
            if not numeric:
                ax.set_xticks(range(len(xs)), [str(v) for v in xs], rotation=20, ha="right")
    if hue is not None:  # from the panel with most entries: a rate has none of "none"
        fullest = max(axes.flat, key=lambda a: len(a.get_legend_handles_labels()[0]))
        S.legend_outside(axes[0, -1], fullest, fontsize=8, title=hue)
    S.footnote(fig, {name: sweep}, name, "error bars: 95% CIs over")
    fig.tight_layout()
    return S.save(fig, out, stem(name), formats)


def main() -> None:
    """Standalone use: the figures of the sweeps in ``RESULTS_DIR`` that no paper figure
    reads, into ``OUT_DIR`` (default ``RESULTS_DIR/figures``), as ``fastsim figures``
    draws them."""
    import sys

    from fastsim.sweep.figures import draw_all, find_sources, not_a_results_dir, own_sweeps

    S._usage()
    results = Path(sys.argv[1])
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else results / "figures"
    if not results.is_dir():
        S._refuse(not_a_results_dir(results))
    if not S._or_refuse(lambda: own_sweeps(find_sources(results))):
        S._refuse(f"no sweep in {results} that no paper figure reads: nothing to draw "
                  "(fastsim figures draws the paper's)")
    for p in S._or_refuse(lambda: draw_all(results, out, scripts=(), log=lambda _: None)):
        print(p)


if __name__ == "__main__":
    main()
