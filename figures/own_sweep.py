"""Any sweep no paper figure reads: one panel per metric against the sweep's first varying
axis, its second as colour, its third as a column of panels; every point with its 95%
interval as an error bar, n in the note under the figure.

``fastsim figures DIR`` draws it as ``sweep_NAME.png``/``.pdf`` for each such sweep in DIR
(``--metrics`` picks the panels), and so does ``python figures/own_sweep.py DIR [OUT_DIR]``
(default metrics, no paper figure); ``plan`` says what it would draw, or why it cannot,
and ``points`` is the data it plots, read from the summary and nothing else.
"""
from __future__ import annotations

import math
import textwrap
from pathlib import Path

import polars as pl
from matplotlib.ticker import MaxNLocator

from fastsim.errors import ConfigError, counted, named_twice
from fastsim.figures import _style as S
from fastsim import registry as R
from fastsim.registry import POLICY_FIELDS
from fastsim.sweep.figures import comma_items, figure_stem, read_manifest
from fastsim.values import is_number

NEEDS = ()  # any sweep no other figure reads (fastsim.sweep.figures.own_sweeps)
# the columns it reads from its sweep's table, beside the sweep's axes
READS = {"summary.parquet": ("cell", "policy", "policy_name", "metric", "kind", "mean", "lo",
                               "hi", "n")}
# mean JCT is a mean over clusters; the other three are rates pooled over jobs
DEFAULT_METRICS = ("precision", "stop_recall", "fpr", "jct_mean_h")
MAX_AXES = 3      # x, colour, columns of panels
MAX_COLOURS = 10  # the colour-blind palette's
MAX_COLUMNS = 6
MAX_METRICS = 8
TICK_INCHES_PER_CHAR = 0.05  # a tick label's height a character, at 45 degrees and its font
YLABEL_CHARS = 28  # a y label's line: about 2 inches at the panels' font, within a 3-inch panel
PICK = ("hold an axis at one value (--where AXIS=VALUE), or a sweep file with fewer axes, "
        "or fewer values on them (plot the summary by hand otherwise: docs/tutorial.md "
        "section 3)")


stem = figure_stem  # the file name (no extension) of a sweep's figure


def _axes(manifest: dict, df: pl.DataFrame, varying: bool = True) -> list[str]:
    """The axes of the sweep of ``manifest`` (its ``sweep.json``) that take several values
    in its summary (``varying``; else all of them), in its file's order; the policy too
    where only the baseline's cells add one (no policy axis)."""
    axes = manifest.get("axes", [])
    if "policy" not in axes:
        axes = [*axes, "policy"]
    return [a for a in axes if a in df.columns
            and (not varying or df[a].drop_nulls().n_unique() > 1)]


def _hold(sweep: Path, manifest: dict, df: pl.DataFrame, where) -> dict:
    """``--where``'s ``AXIS=VALUE`` items (a list of text) as ``{axis: value}``, each an
    axis of the sweep and one of its values; a row without the axis (a policy without
    that parameter) is kept.  Anything else is refused (``ConfigError``)."""
    held: dict = {}
    names = _axes(manifest, df, varying=False)
    for item in where or ():
        axis, eq, text = str(item).partition("=")
        axis, text = axis.strip(), text.strip()
        if not eq or axis not in names:
            raise ConfigError(f"--where={item} is invalid (in {sweep}); allowed: AXIS=VALUE, "
                              f"AXIS one of the sweep's axes: {', '.join(names)}")
        if axis in held:
            raise ConfigError(f"--where={item} is invalid ({axis} is held twice); allowed: "
                              "one value per axis")
        values = _values(df, axis)
        found = [v for v in values if str(v) == text or _same_number(v, text)]
        if not found:
            raise ConfigError(f"--where={item} is invalid ({axis} takes no {text!r} in "
                              f"{sweep}); allowed: {', '.join(f'{axis}={v}' for v in values)}")
        held[axis] = found[0]
    return held


def _same_number(value, text: str) -> bool:
    try:
        return is_number(value) and float(text) == float(value)
    except ValueError:
        return False


def _held(df: pl.DataFrame, p: dict) -> pl.DataFrame:
    """The rows of the summary at the plan's held values (``--where``)."""
    for axis, value in p.get("where", {}).items():
        df = df.filter((pl.col(axis) == value) | pl.col(axis).is_null())
    return df


def summary_metrics(df: pl.DataFrame) -> list[str]:
    """The metrics of a summary, in its row order (the declarations')."""
    return df["metric"].unique(maintain_order=True).to_list()


def plan(sweep: Path, metrics=None, x: str | None = None, where=None) -> dict | str:
    """What the figure of the sweep in ``sweep`` draws: ``{"x", "hue", "col", "metrics",
    "where"}`` (an axis name, or None), or why it cannot be drawn (a string).  ``metrics``:
    names (a list, or text comma-separated; default ``DEFAULT_METRICS``, those the summary
    has); one the summary does not hold is refused (``ConfigError``) naming those it does.
    A user metric's module, which the sweep's manifest names, is imported for its label
    and unit; ``"unlabelled"``: those whose module cannot be (labelled by their column).
    ``x`` (``--x``): the axis along x (default: the first varying one); ``where``
    (``--where``): ``AXIS=VALUE`` items, each axis held at that value; an axis or value
    the sweep does not have is refused, naming those it has."""
    df = S.sweep_table(Path(sweep) / "summary.parquet")
    manifest = read_manifest(sweep)  # once: its axes, the code it ran, its cells' configs
    have = summary_metrics(df)
    chosen = _chosen_metrics(sweep, metrics, have)
    unlabelled = _import_user_metrics(manifest, chosen)
    held = _hold(sweep, manifest, df, where)
    df = _held(df, {"where": held})
    axes = _axes(manifest, df)
    configs = _cell_configs(sweep, manifest)
    params = _policy_params(configs)
    if x is not None:
        axes = _x_first(sweep, axes, x, held)
    if not axes:
        return (f"sweep in {sweep} varies no axis (one cell: nothing to draw against); "
                "allowed: a sweep with an axis of several values")
    if len(_roles(axes, params)) > MAX_AXES:
        return (f"sweep in {sweep} varies {len(axes)} axes ({', '.join(axes)}); allowed: at "
                f"most {MAX_AXES} (x, colour, columns of panels): {PICK}")
    x, hue, col = (_roles(axes, params) + [None, None])[:3]
    names = (_policy_colours(df, configs, x, {x, col, *held})
             if hue == "policy_name" else {})
    too_many = _too_many_to_tell(sweep, df, x, hue, col, names, params)
    if too_many:
        return too_many
    p = {"x": x, "hue": hue, "col": col, "metrics": chosen, "where": held,
         "unlabelled": unlabelled, "names": names, "params": params}
    return _one_row_per_point(sweep, manifest, df, p) or p


def _chosen_metrics(sweep: Path, metrics, have: list[str]) -> list[str]:
    """The metrics drawn: ``metrics`` (a list, or text comma-separated), each one of
    ``have``, once, at most ``MAX_METRICS``, else refused; default ``DEFAULT_METRICS`` in
    ``have``."""
    if metrics is None:
        chosen = [m for m in DEFAULT_METRICS if m in have]
    else:
        chosen = comma_items(metrics)
        unknown = [m for m in chosen or () if m not in have]
        if unknown or not chosen:
            shown = (",".join(map(str, metrics)) if isinstance(metrics, (tuple, list))
                     else metrics if isinstance(metrics, str) else repr(metrics))
            why = (f"unknown: {', '.join(unknown)}" if unknown else "empty" if chosen == []
                   else "neither text nor a list of text")
            raise ConfigError(f"--metrics={shown} is invalid ({why}, in {sweep}); allowed: "
                              f"metrics of the sweep's summary, comma-separated: "
                              f"{', '.join(have)}")
        twice = named_twice(chosen, "metric")
        if twice is not None:
            raise ConfigError(f"--metrics={','.join(chosen)} is invalid (in {sweep}); "
                              f"allowed: {twice}")
        if len(chosen) > MAX_METRICS:
            raise ConfigError(f"--metrics={','.join(chosen)} is invalid ({len(chosen)} "
                              f"metrics, in {sweep}); allowed: at most {MAX_METRICS}, one "
                              "panel each")
    return chosen


def _x_first(sweep: Path, axes: list[str], x: str, held: dict) -> list[str]:
    """``axes`` with ``x`` (``--x``) first; an axis the sweep does not vary refused."""
    if x not in axes:
        raise ConfigError(f"--x={x} is invalid (in {sweep}); allowed: an axis the sweep "
                          f"varies{' (not held by --where)' if held else ''}: "
                          f"{', '.join(axes) or 'none'}")
    return [x, *(a for a in axes if a != x)]


def _too_many_to_tell(sweep: Path, df: pl.DataFrame, x: str, hue: str | None,
                      col: str | None, names: dict, params: tuple[str, ...]) -> str | None:
    """Why the figure cannot be drawn, if it has more lines (colours) or columns of panels
    than can be told apart; else None."""
    for axis, most, role in ((hue, MAX_COLOURS, "colours"), (col, MAX_COLUMNS, "columns")):
        n = len(_lines(df, x, hue, names, params)) if axis == hue else df[axis].n_unique() if axis else 0
        if n > most:
            shown = "policies" if axis == "policy_name" else f"values of {axis}"
            return (f"sweep in {sweep} has {n} {shown}, drawn as {role}; allowed: at most "
                    f"{most}: {PICK}")
    return None


def _import_user_metrics(manifest: dict, chosen: list[str]) -> list[str]:
    """Import the modules declaring the user metrics among ``chosen`` (and those whose
    paired change is), as ``fastsim sweep`` did: its manifest records each as
    ``MODULE:FUNCTION`` (``code.user``), the function named as the column.  Their declared
    label, unit and percent are then used; returned: those whose module cannot be imported
    here (or that no declaration names), labelled by their column's name."""
    from fastsim import metrics as M
    code = manifest.get("code", {})
    refs = {ref.partition(":")[2]: ref for ref in code.get("user", {}) if ":" in str(ref)}
    unlabelled = []
    for metric in chosen:
        name = metric[:-len("_change")] if (metric.endswith("_change")
                                             and metric not in refs) else metric
        try:
            M.lookup(refs.get(name, name))  # a built-in, or imported as the sweep did
        except ConfigError:
            unlabelled.append(metric)
    return unlabelled


def _cell_configs(sweep: Path, manifest: dict) -> dict[str, dict]:
    """Cell id -> the cell's whole config (``policy``, ``scheduler``, ``workload``), as the
    sweep's manifest records its grid; a manifest without them is refused, naming it."""
    grid = manifest.get("grid")
    cells = grid.get("cells") if isinstance(grid, dict) else None
    if not (isinstance(cells, list) and all(
            isinstance(c, dict) and isinstance(c.get("id"), str)
            and isinstance(c.get("config"), dict) for c in cells)):
        raise ConfigError(f"{Path(sweep) / 'sweep.json'}: damaged (grid.cells is not a list "
                          "of cells, each with an id and a config); allowed: a sweep "
                          "directory as fastsim sweep writes it (run it again to rebuild)")
    return {c["id"]: c["config"] for c in cells}


def _policy_values(config: dict) -> dict:
    """A cell's policy parameters (``scope`` too), a user policy's and an online
    detector's among them, by name."""
    policy = config.get("policy", {})
    return {**{k: v for k, v in policy.items() if k not in ("name", "params", "impl")},
            **dict(policy.get("params") or ())}


def _plain(name: str, key: str, value) -> str:
    """A parameter's value as its policy's spec writes it (``Param.text``: ``flag=true``,
    ``thresholds=16/64``); a field of no declared parameter (``scope``) as its text."""
    decl = next((d for d in R.policies() if d.name == name), None)
    if decl is not None and key in decl.param_names:
        return decl.param(key).text(value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def _policy_colours(df: pl.DataFrame, cells: dict, x: str, drawn: set) -> dict[str, str]:
    """Where x is a policy parameter and the colour the policy's name: policy label ->
    its colour, the name and the parameters that tell it from another policy of that
    name, but those ``drawn`` (x, the columns' axis, an axis held by ``--where``):
    ``evalstop(scope=all)`` beside ``evalstop(scope=rlhf)`` over k.  Two such policies
    were one colour, their rows on one point each, and none was drawn; a parameter drawn
    as columns tells them apart already (one colour across the columns)."""
    rows = (df.filter(pl.col(x).is_not_null()).select("cell", "policy", "policy_name")
            .unique(maintain_order=True))
    values = {}
    for cell, label, name in rows.iter_rows():
        values[label] = (name, {k: v for k, v in _policy_values(cells.get(cell, {})).items()
                                if k not in drawn})
    colours = {}
    for label, (name, own) in values.items():
        others = [v for n, v in values.values() if n == name]
        told = [k for k in own if any(v.get(k) != own[k] for v in others)]
        shown = ",".join(f"{k}={_plain(name, k, own[k])}" for k in told)
        colours[label] = f"{name}({shown})" if told else name
    return colours


def _flat(config: dict, prefix: str = "") -> dict:
    """A cell's config as ``{"policy.k": 2, "workload.sigma": 0.1, ...}``."""
    flat = {}
    for key, value in config.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{key}."))
        elif key == "params" and isinstance(value, list):  # a user policy's: by name
            flat.update(_flat(dict(value), prefix))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _one_row_per_point(sweep: Path, manifest: dict, df: pl.DataFrame, p: dict) -> str | None:
    """Why the plan cannot be drawn where two rows of the summary would be drawn on one
    point (None if none would): they differ in a parameter the figure draws on no axis
    (a policy whose label leaves out a parameter it was run at two values of), named with
    how to hold it.  Such rows were left out, counted as having no place."""
    rows = _placed(df, p).filter("placed")
    rows = rows.filter(pl.struct(_point(p)).is_duplicated())
    if rows.height == 0:
        return None
    cells, differ = _cell_configs(sweep, manifest), {}
    for group in rows.partition_by(_point(p)):
        configs = [_flat(cells.get(c, {})) for c in group["cell"].unique(maintain_order=True)]
        for key in dict.fromkeys(k for c in configs for k in c):  # a key one cell lacks too
            if any(c.get(key) != configs[0].get(key) for c in configs[1:]):
                differ.setdefault(key)
    # a spec's name by its axis (policy, scheduler), any other field by its own name
    fields = list(dict.fromkeys(key.partition(".")[0] if key.endswith(".name")
                                else key.rpartition(".")[2] for key in differ))
    axes = [f for f in fields if f in _axes(manifest, df, varying=False)]
    how = (f"hold {axes[0]} at one value (--where {axes[0]}=VALUE)" if axes else
           f"{' and '.join(fields)} is on no axis of the sweep: run it at one value, or name "
           "it in the label of its declaration (docs/extending.md)" if fields else
           "its cells' configs in sweep.json are alike: run fastsim sweep again to rebuild it")
    return (f"sweep in {sweep} has {rows.height} rows that would be drawn on a point "
            f"another is drawn on (they differ in {', '.join(fields) or 'their cell'}, which "
            f"this figure draws on no axis); allowed: one row per point: {how}")


def _policy_params(configs: dict[str, dict]) -> tuple[str, ...]:
    """The axes that are a policy's parameters: a built-in's fields (``k``, ``f``, ...)
    and the parameters of the users' policies of the sweep's cells (``delta``), by name
    as their ``configs`` (``_cell_configs``) hold them."""
    return tuple(dict.fromkeys((*POLICY_FIELDS, *(k for cfg in configs.values()
                                                  for k in _policy_values(cfg)))))


def _roles(axes: list[str], params: tuple[str, ...] = POLICY_FIELDS) -> list[str]:
    """x, colour, columns of panels, ... from the varying axes.  Where x is a policy
    parameter (``k``, one of ``params``) the colour is the policy's name, each policy's
    line drawn over the values it has (a policy without it: a reference line); where the
    colour is one, it is the policy (``evalstop(k=2)``): the policy is no axis of its own
    then."""
    x, rest = axes[0], axes[1:]
    if x in params and "policy" in rest:
        return [x, "policy_name", *(a for a in rest if a != "policy")]
    if rest and rest[0] in params and "policy" in rest:
        return [x, "policy", *(a for a in rest[1:] if a != "policy")]
    return axes


def _line(x: str, hue: str | None, names: dict | None = None,
          params: tuple[str, ...] = POLICY_FIELDS) -> pl.Expr:
    """A row's colour: its value of ``hue``; by policy name, that of a policy without x is
    its label (``stop_at(f=0.65)``: a reference line), and so is that of a policy without
    ``hue`` where it is a policy parameter (``k=2``; x is the policy then).  ``names``: a
    policy's colour by its label where the name alone is not enough (``_policy_colours``)."""
    if hue == "policy_name":
        name = (pl.col("policy").replace_strict(names, default=pl.col("policy_name"))
                if names else pl.col("policy_name"))
        return pl.when(pl.col(x).is_null()).then(pl.col("policy")).otherwise(name)
    if hue in params:  # x is the policy: one without the parameter, a point of its own
        return (pl.when(pl.col(hue).is_null()).then(pl.col("policy"))
                .otherwise(pl.lit(f"{hue}=") + pl.col(hue).cast(pl.String)))
    return pl.col(hue) if hue is not None else pl.lit(None)


def _lines(df: pl.DataFrame, x: str, hue: str | None, names: dict | None = None,
           params: tuple[str, ...] = POLICY_FIELDS) -> list:
    """The colours a plan draws: ``_line``'s values."""
    return (df.select(_line(x, hue, names, params).alias("line"))["line"].drop_nulls()
            .unique().to_list())


def _point(p: dict) -> list[str]:
    """The columns that place a row of ``_placed`` on the figure: its panel, colour, x."""
    return ["metric", "line", p["x"], *([p["col"]] if p["col"] else [])]


def _placed(df: pl.DataFrame, p: dict) -> pl.DataFrame:
    """The rows of the plan's metrics that have an estimate, as the figure places them:
    ``mean``, ``lo``, ``hi`` (in percent where the metric is shown as one), ``n``,
    ``line`` (``_line``) and ``ref`` (a policy without x: a reference line), ``placed``
    whether they have a place: a value of the colour and the column, and one of x where x
    is no policy parameter."""
    from fastsim.summary import is_percent

    x, hue, col = p["x"], p["hue"], p["col"]
    params = p.get("params", POLICY_FIELDS)
    df = _held(df, p)
    keys = list(dict.fromkeys(a for a in ("policy", x, hue, col) if a is not None))
    rows = df.filter(pl.col("metric").is_in(p["metrics"]) & pl.col("mean").is_finite())
    scale = pl.Series([100.0 if is_percent(m, k) else 1.0
                       for m, k in zip(rows["metric"], rows["kind"])])
    rows = rows.select("metric", *keys, pl.col("mean") * scale, pl.col("lo") * scale,
                       pl.col("hi") * scale, "n",
                       _line(x, hue, p.get("names"), params).alias("line"),
                       (pl.col(x).is_null() & pl.lit(x in params)).alias("ref"),
                       "cell")
    placed = ((pl.col(x).is_not_null() | pl.col("ref"))
              & (pl.col("line").is_not_null() | pl.lit(hue is None))
              & (pl.col(col).is_not_null() if col is not None else pl.lit(True)))
    return rows.with_columns(placed.alias("placed"))


def _split(df: pl.DataFrame, p: dict) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(the points drawn, the rows of the plan's metrics that have an estimate but cannot
    be drawn): without a value of the colour or the column, without one of x where x is
    no policy parameter, or two rows on one point (a plan refuses those:
    ``_one_row_per_point``)."""
    rows = _placed(df, p)
    placed = pl.col("placed") & ~pl.struct(_point(p)).is_duplicated()
    return (rows.filter(placed).drop("placed", "cell"),
            rows.filter(~placed).drop("placed", "cell"))


def points(df: pl.DataFrame, p: dict) -> pl.DataFrame:
    """The points the figure draws: per metric and value of the plan's axes, ``mean``,
    ``lo``, ``hi`` (in percent where the metric is shown as one) and ``n``; ``line``, the
    colour (``_line``), and ``ref``, a policy without x (a policy parameter) drawn as a
    reference line.  Rows without an estimate (the precision of a policy that never stops:
    NaN) are left out, and so is a colour or a column of panels that has no other; those
    that cannot be placed are ``not_drawn``'s."""
    return _split(df, p)[0]


def not_drawn(df: pl.DataFrame, p: dict) -> str:
    """The rows with an estimate the figure cannot place, with a count ("" if none): a
    column of panels or a colour they have no value of, or two on one point."""
    rows = _split(df, p)[1]
    if rows.height == 0:
        return ""
    labels = rows["policy"].unique(maintain_order=True).to_list()
    return (f"{counted(rows.height, 'row')} not drawn (no place on "
            f"{', '.join(a for a in (p['x'], p['hue'], p['col']) if a)}: "
            f"{', '.join(map(str, labels))})")


def _finite(v) -> bool:
    return v is not None and math.isfinite(v)


def bare(data: pl.DataFrame) -> str:
    """What the figure says of its points drawn without an interval ("" if none): a
    point's ``lo`` or ``hi`` NaN (too few clusters, or no spread between them), which a
    bare marker would show as exact."""
    k = data.filter(~(pl.col("lo").is_finite() & pl.col("hi").is_finite())).height
    return (f"{counted(k, 'point')} without an interval (too few clusters, or "
            "none differ): drawn bare, not exact") if k else ""


def _named(axis: str, value) -> str:
    """``policy evalstop(k=2)``, ``sigma=0.1``: one value of an axis, in a sentence."""
    return f"{axis} {value}" if axis in ("policy", "scheduler") else f"{axis}={value}"


def unlabelled(p: dict) -> str:
    """What the figure says of user metrics labelled by their column's name ("" if none)."""
    names = p.get("unlabelled", ())
    return (f"{', '.join(names)}: label is the column name (the module declaring "
            f"{'it' if len(names) == 1 else 'them'} cannot be imported here: put it on "
            "PYTHONPATH)" if names else "")


def held_text(p: dict) -> str:
    """``sigma=0.02, policy=evalstop(k=2)``: the values ``--where`` holds."""
    return ", ".join(f"{a}={v}" for a, v in p.get("where", {}).items())


def describe(df: pl.DataFrame, p: dict) -> str:
    """What the figure of plan ``p`` draws from summary ``df``, as ``fastsim figures``
    says it: the metrics, x, and the colours and columns of panels that hold a point (a
    column of panels none of the metrics has an estimate in is no column)."""
    data, df = points(df, p), _held(df, p)
    x, hue, col = p["x"], p["hue"], p["col"]
    shown = [m for m in p["metrics"] if m in set(data["metric"].to_list())]
    empty = [m for m in p["metrics"] if m not in shown]
    said = [f"{', '.join(shown) or 'nothing'} against {x}"]
    if hue is not None:
        lines = _values(data.filter(~pl.col("ref")), "line")
        refs = [v for v in _values(data.filter(pl.col("ref")), "line") if v not in lines]
        if hue == "policy_name":  # each policy over the values of x it has
            said.append(f"policy as colour ({', '.join(lines) or 'no policy'} over {x}"
                        + (f"; {', '.join(refs)} as reference line{'s' * (len(refs) > 1)}"
                           if refs else "") + ")")
        else:
            said.append(f"{hue} as colour" if len(lines) > 1 else
                        f"{_named(hue, lines[0])} only" if lines else "")
    if col is not None:
        cols = _values(data, col)
        gone = [v for v in _values(df.filter(pl.col("metric").is_in(p["metrics"])), col)
                if v not in cols]
        said.append(f"{col} as columns" if len(cols) > 1 else f"{_named(col, cols[0])} only"
                    if cols else "")
        if gone:
            said[-1] += (f" ({', '.join(_text(col, v, p['params']) for v in gone)}: "
                         "no estimate)")
    if empty:
        said.append(f"no estimate of {', '.join(empty)}")
    if p.get("where"):
        said.append(f"at {held_text(p)}")
    return ", ".join(s for s in said if s)


def axis_label(metric: str, kind: str) -> str:
    """A metric's declared label (``fastsim/metrics.py``) with its unit: "mean JCT (h)",
    "precision (%)", "mean JCT change (%)"."""
    from fastsim import metrics as M
    from fastsim.summary import is_percent, display_name

    label = display_name(metric)
    if is_percent(metric, kind):
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


def _text(axis: str, value, params: tuple[str, ...] = POLICY_FIELDS) -> str:
    # a policy parameter's colour is "k=2", or the label of a policy without it
    return (str(value) if axis in ("policy", "policy_name", "scheduler", *params)
            and (axis not in params or isinstance(value, str)) else f"{axis}={value}")


@S.themed
def draw_sweep(name: str, sweep: Path, out: Path, formats, p: dict) -> list[Path]:
    """Draw the figure of sweep ``name`` (its directory ``sweep``) by plan ``p``."""
    df = S.sweep_table(Path(sweep) / "summary.parquet")
    data = points(df, p)
    cols = _values(data, p["col"])
    ticks = [] if data[p["x"]].dtype.is_numeric() else [str(v) for v in _values(data, p["x"])]
    fig, axes = _panels(len(p["metrics"]), len(cols), max(map(len, ticks), default=0))
    lines = _colour_order(data, p["hue"])
    for i, metric in enumerate(p["metrics"]):
        for j, c in enumerate(cols):
            ax = axes[i, j] if len(cols) > 1 else axes[0, i]
            _draw_panel(ax, data, p, metric, c, lines, name)
            _label_panel(ax, df, data, p, metric, c)
    _legend_and_notes(fig, axes, df, data, p, name, sweep)
    fig.tight_layout()
    return S.save(fig, out, stem(name), formats)


def _colour_order(data: pl.DataFrame, hue: str | None) -> list:
    """The colours drawn, in order: the lines over x first, then the policies without x
    (reference lines); ``[None]`` without a colour axis."""
    return ([None] if hue is None else
            _values(data.filter(~pl.col("ref")), "line")
            + [v for v in _values(data.filter(pl.col("ref")), "line")
               if v not in set(data.filter(~pl.col("ref"))["line"].to_list())])


def _panels(n_metrics: int, n_cols: int, tick_chars: int = 0):
    """The figure and its grid of panels: a row per metric and a column per value of the
    column axis, or one row of a panel per metric where there is one column; taller by
    the height of x tick labels of ``tick_chars`` characters at 45 degrees."""
    nrows, ncols = n_metrics, n_cols
    if ncols == 1:  # one row of panels, as the paper's figures
        nrows, ncols = 1, nrows
    # the bottom row's labels only (x is shared); without that height, a policy axis of
    # labels such as below_best(k=2,drop=0.02) left each panel a third of the figure
    ticks_h = TICK_INCHES_PER_CHAR * tick_chars
    # a metric's panels share its y axis, so that the columns compare at a glance
    return S.subplots(nrows, ncols, figsize=(3.6 * ncols, 3.0 * nrows + ticks_h), squeeze=False,
                      sharex=True, sharey="row" if n_cols > 1 else False)


def _draw_panel(ax, data: pl.DataFrame, p: dict, metric: str, c, lines: list,
                name: str) -> None:
    """The points of ``metric`` at value ``c`` of the column axis with their error bars,
    joined by a line per colour of ``lines`` where x is a number (k, sigma); along text
    (policies, schedulers) the points stand alone, as a line between categories draws a
    trend that is not there.  A policy without x is a dashed reference line."""
    x, hue, col = p["x"], p["hue"], p["col"]
    xs, numeric = _values(data, x), data[x].dtype.is_numeric()
    colours = S.sns.color_palette("colorblind", MAX_COLOURS)
    for h_i, h in enumerate(lines):
        rows = data.filter(pl.col("metric") == metric)
        if hue is not None:
            rows = rows.filter(pl.col("line") == h)
        if col is not None:
            rows = rows.filter(pl.col(col) == c)
        label = _text(hue, h, p["params"]) if hue is not None else name
        ref, rows = rows.filter(pl.col("ref")), rows.filter(~pl.col("ref"))
        # the points run along the ticks: text (policies) in cell order, not alphabetical
        rows = rows.sort(x if numeric else pl.col(x).replace_strict(xs, range(len(xs))))
        if ref.height:  # a policy without x: its value at every x
            mean, lo, hi = ref["mean"][0], ref["lo"][0], ref["hi"][0]
            ax.axhline(mean, color=colours[h_i], lw=1.2, ls="--", label=label)
            if _finite(lo) and _finite(hi):
                ax.axhspan(lo, hi, color=colours[h_i], alpha=0.12, lw=0)
        if rows.height == 0:
            continue
        at = (rows[x].to_list() if numeric else
              [xs.index(v) + (h_i - (len(lines) - 1) / 2) * 0.08 for v in rows[x]])
        mean = rows["mean"].to_numpy()
        ax.errorbar(at, mean, yerr=[mean - rows["lo"].to_numpy(),
                                    rows["hi"].to_numpy() - mean],
                    marker="o", ms=4, capsize=3, lw=1.2, ls="-" if numeric else "none",
                    color=colours[h_i], label=label)


def _label_panel(ax, df: pl.DataFrame, data: pl.DataFrame, p: dict, metric: str, c) -> None:
    """A panel's axis labels, its title (the column's value) and its ticks along x."""
    x, col = p["x"], p["col"]
    xs, numeric = _values(data, x), data[x].dtype.is_numeric()
    kind = df.filter(pl.col("metric") == metric)["kind"]
    # on lines of a panel's height at most: "stop recall (stopped before completion) (%)"
    # in one line was taller than its 3-inch panel, and tight_layout shrank every panel of
    # the figure to a third of its height to make room for it
    ax.set_ylabel("\n".join(textwrap.wrap(axis_label(metric, kind[0] if kind.len() else "mean"),
                                         YLABEL_CHARS)))
    ax.set_xlabel(x)
    if col is not None:
        ax.set_title(_text(col, c, p["params"]), fontsize=9)
    if not numeric:  # at 20 degrees, labels such as drawdown(delta=0.005,p=2) ran into each other
        ax.set_xticks(range(len(xs)), [str(v) for v in xs], rotation=45, ha="right",
                      rotation_mode="anchor")
    elif data[x].dtype.is_integer():  # k = [1, 2] was ticked 1.0, 1.2, ..., 2.0
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _legend_and_notes(fig, axes, df: pl.DataFrame, data: pl.DataFrame, p: dict, name: str,
                      sweep: Path) -> None:
    """The legend of the colours, outside the panels, and the note under the figure: the
    values held, the points without an interval, the rows not drawn, n."""
    hue = p["hue"]
    if hue is not None:  # from the panel with most entries: a rate has none of "none"
        fullest = max(axes.flat, key=lambda a: len(a.get_legend_handles_labels()[0]))
        S.legend_outside(axes[0, -1], fullest, fontsize=8,
                         title="policy" if hue == "policy_name" else hue)
    held = f"at {held_text(p)}" if p.get("where") else ""
    notes = (held, bare(data), not_drawn(df, p), unlabelled(p))
    S.footnote(fig, {name: sweep}, name, "error bars: 95% CIs over",
               more="\n".join(t for t in notes if t), rows=data)


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
        S._refuse(f"no sweep in {results} that no paper figure reads (nothing to draw); "
                  "allowed: a sweep under a name of its own (fastsim figures draws the "
                  "paper's)")
    # what is skipped or not drawn, on stderr; the figures written, on stdout
    log = lambda line: print(line, file=sys.stderr)  # noqa: E731
    for p in S._or_refuse(lambda: draw_all(results, out, scripts=(), log=log)):
        print(p)


if __name__ == "__main__":
    main()
