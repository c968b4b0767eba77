"""Read evaluation logs into one validated table, applying the mess rules of docs/replay.md.

Formats (detected from the file, or forced with ``fmt``):

* long tables, ``csv``, ``jsonl``, ``parquet``: one row per evaluation with ``job_id, step,
  score`` and optional ``loss, proxy_reward, job_type, gpus, time`` (hours; or ``time_h``,
  or ``time_s`` in seconds), ``max_steps``; any other column is kept (``--metric`` may
  pick it) and ``truth_*`` columns ride along for scoring, never for deciding;
* ``trainer_state``: the ``trainer_state.json`` that Hugging Face ``Trainer`` and TRL write
  (``log_history`` entries holding ``eval_*`` metrics).

Every row is validated before anything is returned: a malformed file raises one
``ConfigError`` naming the file, the line and the field, so nothing partial comes out.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from fastsim.errors import ConfigError

FORMATS = ("csv", "jsonl", "parquet", "trainer_state")
# Missing-value spellings: such an evaluation is skipped (docs/replay.md, rule "missing").
MISSING_TOKENS = ("", "nan", "na", "n/a", "null", "none")
# trainer_state eval_* keys that are bookkeeping, not a quality metric.
HF_BOOKKEEPING = ("eval_runtime", "eval_samples_per_second", "eval_steps_per_second", "epoch")
# A metric whose name ends with one of these is lower-is-better unless told otherwise.
LOWER_IS_BETTER_SUFFIXES = ("loss", "perplexity", "ppl", "error", "wer", "cer")
NUMERIC_OPTIONAL = ("loss", "proxy_reward", "gpus", "max_steps")


@dataclass(frozen=True)
class EvalLog:
    """Evaluation logs of one or more jobs, validated and ordered.

    ``table`` columns: ``job_id`` (str), ``step`` (int64), ``metric`` (float64, as logged,
    NaN = missing), ``score`` (float64, the metric in the higher-is-better sense), then the
    optional ``loss, proxy_reward, job_type, gpus, time_h, max_steps``, any ``truth_*``
    columns, and ``source``/``line`` (where the kept row came from).  Rows are sorted by
    ``(job_id, step)`` with duplicates resolved.  ``notes`` lists the mess rules applied.
    """

    table: pl.DataFrame
    metric: str
    higher_is_better: bool
    notes: tuple[str, ...] = ()

    @property
    def job_ids(self) -> list[str]:
        return self.table["job_id"].unique(maintain_order=True).to_list()


def default_higher_is_better(metric: str) -> bool:
    """Sense of a metric from its name: losses, perplexities and error rates go down.

    Examples
    --------
    >>> default_higher_is_better("eval_loss"), default_higher_is_better("eval_accuracy")
    (False, True)
    """
    return not metric.lower().endswith(LOWER_IS_BETTER_SUFFIXES)


def detect_format(path: Path) -> str:
    """``csv``, ``jsonl``, ``parquet`` or ``trainer_state`` from the name and first bytes."""
    name = path.name.lower()
    if path.stat().st_size == 0:
        raise ConfigError(f"{path}: empty file; allowed: a log in one of {FORMATS}")
    if name.endswith((".csv", ".tsv")):
        return "csv"
    if name.endswith((".jsonl", ".ndjson")):
        return "jsonl"
    if name.endswith((".parquet", ".pq")):
        return "parquet"
    head = path.read_bytes()[:4096]
    if head.startswith(b"PAR1"):
        return "parquet"
    if name.endswith(".json"):
        return "trainer_state"
    text = head.decode("utf-8", errors="replace").lstrip()
    if text.startswith("{") and '"log_history"' in text:
        return "trainer_state"
    if text.startswith("{"):
        return "jsonl"
    if text:
        return "csv"
    raise ConfigError(f"{path}: empty file; allowed: a log in one of {FORMATS}")


def resolve_path(path: Path) -> Path:
    """A directory stands for its ``trainer_state.json``, else its latest checkpoint's."""
    if not path.exists():
        raise ConfigError(f"{path}: no such file or directory")
    if not path.is_dir():
        return path
    direct = path / "trainer_state.json"
    if direct.exists():
        return direct
    ckpts = [p for p in path.glob("checkpoint-*/trainer_state.json")
             if re.fullmatch(r"checkpoint-\d+", p.parent.name)]
    if not ckpts:
        raise ConfigError(f"{path}: a directory without trainer_state.json (nor in a "
                          "checkpoint-N/ subdirectory); pass log files instead")
    return max(ckpts, key=lambda p: int(p.parent.name.split("-")[1]))


# --------------------------------------------------------------------------- readers
def _raw_csv(path: Path) -> pl.DataFrame:
    sep = "\t" if path.name.lower().endswith(".tsv") else ","
    try:
        df = pl.read_csv(path, infer_schema=False, separator=sep)
    except pl.exceptions.NoDataError:
        raise ConfigError(f"{path}: empty file; allowed: a log in one of {FORMATS}") from None
    except pl.exceptions.ComputeError as exc:
        raise ConfigError(f"{path}: not a readable CSV table ({str(exc).splitlines()[0]})") from None
    # header is line 1; assumes no quoted newlines, which evaluation logs do not have
    return df.with_columns(pl.Series("line", np.arange(2, df.height + 2), dtype=pl.Int64))


def _raw_jsonl(path: Path) -> pl.DataFrame:
    rows, lines = [], []
    with path.open("r", encoding="utf-8") as fh:
        for lineno, text in enumerate(fh, start=1):
            if not text.strip():
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{path}:{lineno}: not valid JSON ({exc.msg}); allowed: one "
                                  "JSON object per line") from None
            if not isinstance(obj, dict):
                raise ConfigError(f"{path}:{lineno}: a JSON {type(obj).__name__}, allowed: "
                                  "one JSON object per line")
            rows.append(obj)
            lines.append(lineno)
    return _rows_to_frame(rows, lines)


def _cell_text(value):
    """JSON value -> the string the validators read (None stays missing)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (int, str)):
        return str(value)
    return json.dumps(value)


def _rows_to_frame(rows: list[dict], lines: list[int]) -> pl.DataFrame:
    keys: dict[str, None] = {}
    for r in rows:
        keys.update(dict.fromkeys(r))
    data = {key: [_cell_text(r.get(key)) for r in rows] for key in keys}
    df = pl.DataFrame(data, schema={key: pl.String for key in keys})
    return df.with_columns(pl.Series("line", lines, dtype=pl.Int64))


def _raw_parquet(path: Path) -> pl.DataFrame:
    try:
        df = pl.read_parquet(path)
    except Exception as exc:  # pyarrow and polars raise several types for a bad file
        raise ConfigError(f"{path}: not a readable Parquet file ({str(exc).splitlines()[0]})") from None
    # Parquet has no lines: "line" is the 1-based row number.
    return df.with_columns(pl.Series("line", np.arange(1, df.height + 1), dtype=pl.Int64))


def _hf_entries(path: Path, text: str):
    """``log_history`` entries with the line each starts on (json gives no positions)."""
    try:
        state = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    if not isinstance(state, dict) or not isinstance(state.get("log_history"), list):
        raise ConfigError(f"{path}:1: field 'log_history': missing; allowed: a trainer_state.json "
                          "as written by transformers.Trainer (a list of log entries)")
    decoder = json.JSONDecoder()
    m = re.search(r'"log_history"\s*:\s*\[', text)
    pos = m.end() if m else 0
    lines = []
    for _ in state["log_history"]:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        lines.append(text.count("\n", 0, pos) + 1)
        try:
            _, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            break
    lines += [0] * (len(state["log_history"]) - len(lines))
    return state, lines


def _job_id_from_path(path: Path) -> str:
    parent = path.resolve().parent
    if re.fullmatch(r"checkpoint-\d+", parent.name):
        parent = parent.parent
    return parent.name or path.stem


def _hf_metric(path: Path, entries: list[dict], metric: str | None) -> str:
    evals = [e for e in entries if isinstance(e, dict) and any(str(k).startswith("eval_") for k in e)]
    names: dict[str, None] = {}
    for e in evals:
        names.update(dict.fromkeys(k for k in e if k.startswith("eval_") and k not in HF_BOOKKEEPING))
    if metric is not None:
        full = metric if metric.startswith("eval_") else f"eval_{metric}"
        if full not in names:
            raise ConfigError(f"{path}: field {metric!r}: no evaluation entry logs it; allowed: "
                              f"{sorted(names) or 'none (no eval_* metrics in log_history)'}")
        return full
    quality = [n for n in names if n != "eval_loss"]
    if len(quality) == 1:
        return quality[0]
    if not quality and "eval_loss" in names:
        return "eval_loss"
    raise ConfigError(f"{path}: field 'eval_*': cannot pick the metric among {sorted(names) or 'none'}; "
                      "allowed: name one with --metric")


def _raw_trainer_state(path: Path, metric: str | None):
    text = path.read_text(encoding="utf-8")
    state, lines = _hf_entries(path, text)
    entries = state["log_history"]
    name = _hf_metric(path, entries, metric)
    job_id = _job_id_from_path(path)
    rows, rows_lines = [], []
    last_train_loss = None
    runtime_s = None
    for entry, line in zip(entries, lines):
        if not isinstance(entry, dict):
            raise ConfigError(f"{path}:{line}: log_history entry is a {type(entry).__name__}; "
                              "allowed: a JSON object")
        if "train_runtime" in entry:
            runtime_s = entry["train_runtime"]
        if "loss" in entry and "step" in entry:
            last_train_loss = entry["loss"]  # training loss, logged every logging_steps
        if not any(str(k).startswith("eval_") for k in entry):
            continue
        rows.append({"job_id": job_id, "step": entry.get("step"), name: entry.get(name),
                     "loss": last_train_loss})
        rows_lines.append(line)
    if not rows:
        raise ConfigError(f"{path}: field 'log_history': no evaluation entries (eval_*); "
                          "allowed: a run evaluated at least once")
    df = _rows_to_frame(rows, rows_lines)
    df = df.with_columns(pl.lit(_cell_text(state.get("max_steps")), dtype=pl.String).alias("max_steps"))
    # Trainer logs no wall clock per evaluation; train_runtime / global_step gives a
    # per-step time, an estimate that assumes steps of equal cost.
    global_step = state.get("global_step")
    if isinstance(runtime_s, (int, float)) and isinstance(global_step, int) and global_step > 0:
        step_num = df["step"].cast(pl.Float64, strict=False)
        df = df.with_columns((step_num * (float(runtime_s) / global_step / 3600.0))
                             .cast(pl.String).alias("time_h"))
    return df, name


# ----------------------------------------------------------------------- validation
def _numeric(df: pl.DataFrame, path: Path, field: str, allowed: str) -> pl.Series:
    """Column ``field`` as float64 with NaN for missing; non-numeric text is an error."""
    col = df[field]
    if col.dtype == pl.Boolean:
        raise ConfigError(f"{path}:{df['line'][0]}: field {field!r}: a boolean; allowed: {allowed}")
    if col.dtype.is_numeric():
        return col.cast(pl.Float64).fill_null(float("nan"))
    text = col.cast(pl.String).str.strip_chars()
    missing = text.is_null() | text.str.to_lowercase().is_in(list(MISSING_TOKENS))
    values = text.cast(pl.Float64, strict=False)
    bad = (~missing) & values.is_null()
    if bad.any():
        i = int(bad.arg_max())
        raise ConfigError(f"{path}:{df['line'][i]}: field {field!r}: {col[i]!r} is not a number; "
                          f"allowed: {allowed}")
    return pl.Series(field, np.where(missing.to_numpy(), np.nan, values.fill_null(0.0).to_numpy()))


def _validate(df: pl.DataFrame, path: Path, metric: str) -> pl.DataFrame:
    for field in ("job_id", "step"):
        if field not in df.columns:
            raise ConfigError(f"{path}:1: field {field!r}: missing column; allowed: a table with "
                              f"columns job_id, step, score (found {[c for c in df.columns if c != 'line']})")
    if metric not in df.columns:
        raise ConfigError(f"{path}:1: field {metric!r}: missing column; allowed: one of "
                          f"{[c for c in df.columns if c not in ('line', 'job_id', 'step')]} via --metric")
    if df.height == 0:
        raise ConfigError(f"{path}: no rows; allowed: at least one evaluation")
    job = df["job_id"].cast(pl.String).str.strip_chars()
    empty = job.is_null() | (job == "")
    if empty.any():
        i = int(empty.arg_max())
        raise ConfigError(f"{path}:{df['line'][i]}: field 'job_id': missing; allowed: a non-empty id")
    step = _numeric(df, path, "step", "a non-negative integer").to_numpy()
    bad = ~np.isfinite(step) | (step < 0) | (step != np.floor(step))
    if bad.any():
        i = int(np.argmax(bad))
        raise ConfigError(f"{path}:{df['line'][i]}: field 'step': {df['step'][i]!r} is not allowed; "
                          "allowed: a non-negative integer (every evaluation needs its step)")
    out = {"job_id": job, "step": pl.Series("step", step.astype(np.int64)),
           "metric": _numeric(df, path, metric, "a number, or empty/NaN/null for a missing evaluation")
           .alias("metric")}
    for field in NUMERIC_OPTIONAL:
        if field in df.columns and field != metric:
            out[field] = _numeric(df, path, field, "a number, or empty for missing").alias(field)
        elif field == metric:
            out[field] = out["metric"].alias(field)
    if "gpus" in out:
        g = out["gpus"].to_numpy()
        bad = np.isfinite(g) & (g <= 0)
        if bad.any():
            i = int(np.argmax(bad))
            raise ConfigError(f"{path}:{df['line'][i]}: field 'gpus': {g[i]:g}; allowed: a positive number")
    for field, scale in (("time", 1.0), ("time_h", 1.0), ("time_s", 1.0 / 3600.0)):
        if field in df.columns:
            out["time_h"] = (_numeric(df, path, field, "a number of hours (time_s: seconds), or "
                                      "empty for missing") * scale).alias("time_h")
            break
    if "job_type" in df.columns:
        out["job_type"] = df["job_type"].cast(pl.String).str.strip_chars().str.to_lowercase()
    for col in df.columns:
        if col.startswith("truth_"):
            out[col] = df[col]
    out["source"] = pl.Series("source", [str(path)] * df.height, dtype=pl.String)
    out["line"] = df["line"]
    return pl.DataFrame(out)


def read_one(path, fmt: str | None = None, metric: str | None = None) -> tuple[pl.DataFrame, str]:
    """Read and validate one log; returns ``(table, metric name)`` before the mess rules.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "log.csv"
    >>> _ = p.write_text("job_id,step,score\\na,1,0.5\\na,2,0.4\\n")
    >>> read_one(p)[0]["metric"].to_list()
    [0.5, 0.4]
    """
    path = resolve_path(Path(path))
    fmt = fmt or detect_format(path)
    if fmt not in FORMATS:
        raise ConfigError(f"--format {fmt!r}: unknown; allowed: {FORMATS}")
    if fmt == "trainer_state":
        raw, name = _raw_trainer_state(path, metric)
    else:
        raw = {"csv": _raw_csv, "jsonl": _raw_jsonl, "parquet": _raw_parquet}[fmt](path)
        name = metric or "score"
    return _validate(raw, path, name), name


def read_logs(paths, fmt: str | None = None, metric: str | None = None,
              higher_is_better: bool | None = None, on_duplicate: str = "last") -> EvalLog:
    """Read evaluation logs of any supported format into one validated ``EvalLog``.

    Mess rules (docs/replay.md): rows of every file are validated first; a ``(job_id,
    step)`` logged twice keeps its last row in command-line and file order (a resumed run
    re-logs a step), or raises with ``on_duplicate="error"``; rows are sorted by step;
    missing scores stay in the table as NaN (the decision skips them); wall-clock time
    must not run backwards within a job.

    Parameters
    ----------
    paths : path or list of paths (files, or run directories holding trainer_state.json)
    fmt : one of ``FORMATS``, or None to detect per file
    metric : column (long tables) or ``eval_*`` name (trainer_state); default ``score``
        for tables, the single non-loss ``eval_*`` metric (else ``eval_loss``) for HF
    higher_is_better : the metric's sense; None infers it from the name
    on_duplicate : ``"last"`` or ``"error"``

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "log.csv"
    >>> _ = p.write_text("job_id,step,score\\na,2,0.4\\na,1,0.5\\na,2,0.3\\n")
    >>> read_logs([p]).table["score"].to_list()
    [0.5, 0.3]
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    if not paths:
        raise ConfigError("no log files given; allowed: one or more paths")
    if on_duplicate not in ("last", "error"):
        raise ConfigError(f"on_duplicate {on_duplicate!r}: allowed: 'last', 'error'")
    tables, names = [], []
    for p in paths:
        t, name = read_one(p, fmt, metric)
        tables.append(t)
        names.append(name)
    if len(set(names)) > 1:
        raise ConfigError(f"files disagree on the metric ({sorted(set(names))}); allowed: one "
                          "metric per replay (name it with --metric)")
    name = names[0]
    hib = default_higher_is_better(name) if higher_is_better is None else bool(higher_is_better)
    table = pl.concat(tables, how="diagonal_relaxed").with_row_index("order")
    notes = []
    dup = table.select(pl.struct("job_id", "step").is_duplicated()).to_series()
    if dup.any():
        first = table.filter(dup).row(0, named=True)
        if on_duplicate == "error":
            raise ConfigError(f"{first['source']}:{first['line']}: field 'step': job "
                              f"{first['job_id']!r} logs step {first['step']} more than once; "
                              "allowed: one row per (job_id, step) (or --on-duplicate last)")
        n_extra = int(dup.sum()) - table.filter(dup).select(pl.struct("job_id", "step").n_unique()).item()
        table = table.unique(subset=["job_id", "step"], keep="last", maintain_order=True)
        notes.append(f"duplicates: {n_extra} repeated (job_id, step) rows dropped, the last kept")
    if table.select((pl.col("step").diff().over("job_id") < 0).any()).item():
        notes.append("unsorted: rows reordered by step within each job")
    table = table.sort(["job_id", "step"], maintain_order=True)
    if "time_h" in table.columns:
        back = table.select(((pl.col("time_h").diff().over("job_id")) < 0).alias("b"))["b"].fill_null(False)
        if back.any():
            i = int(back.arg_max())
            r = table.row(i, named=True)
            raise ConfigError(f"{r['source']}:{r['line']}: field 'time': {r['time_h']:g} h is earlier "
                              f"than job {r['job_id']!r}'s previous evaluation; allowed: wall-clock time "
                              "non-decreasing in step")
    n_missing = int(table["metric"].is_nan().sum())
    if n_missing:
        notes.append(f"missing: {n_missing} evaluations without a {name} value are skipped "
                     "(neither a decline nor a reset)")
    sign = 1.0 if hib else -1.0
    table = table.with_columns((pl.col("metric") * sign).alias("score")).drop("order")
    first = ["job_id", "step", "metric", "score"]
    table = table.select(first + [c for c in table.columns if c not in first])
    return EvalLog(table=table, metric=name, higher_is_better=hib, notes=tuple(notes))
