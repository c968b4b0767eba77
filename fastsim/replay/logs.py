"""Read evaluation logs into one validated table, applying the mess rules of docs/replay.md.

Formats (detected from the file, or forced with ``fmt``):

* long tables, ``csv``, ``jsonl``, ``parquet``: one row per evaluation with ``job_id, step,
  score`` and optional ``loss, proxy_reward, job_type, gpus, time`` (hours since the job
  started; or ``time_h``, or ``time_s`` in seconds), ``max_steps``; any other column is
  kept (``--metric`` may pick it) and ``truth_*`` columns ride along for scoring, never
  for deciding;
* ``trainer_state``: the ``trainer_state.json`` that Hugging Face ``Trainer`` and TRL write
  (``log_history`` entries holding ``eval_*`` metrics).

Every row is validated before anything is returned: a malformed file raises one
``ConfigError`` naming the file, the line and the field, so nothing partial comes out.
Each log is read once, whole (``read_log_bytes``): a file, or a pipe up to ``PIPE_LIMIT``.
"""
from __future__ import annotations

import io
import json
import math
import os
import re
import shlex
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from fastsim.config import is_path, plain_scalar
from fastsim.errors import ConfigError, did_you_mean, known_keywords, quoted
from fastsim.io import (LOCK_NOTICE_S, JSONError, check_regular, decode_utf8, file_kind,
                        loads_json, read_parquet_table)
from fastsim.kernels.codes import JOB_TYPE_LABELS
from fastsim.replay.formats import FORMATS, LOWER_IS_BETTER_SUFFIXES
from fastsim.values import check_file_path

# Missing-value spellings: such an evaluation is skipped (docs/replay.md, rule "missing").
MISSING_TOKENS = ("", "nan", "na", "n/a", "null", "none")
# trainer_state eval_* keys that are bookkeeping, not a quality metric.
HF_BOOKKEEPING = ("eval_runtime", "eval_samples_per_second", "eval_steps_per_second", "epoch")
NUMERIC_OPTIONAL = ("loss", "proxy_reward", "gpus", "max_steps")
# Steps are compared exactly as float64 by the decision kernels: beyond 2^53 two different
# steps could become one (and beyond 2^63 they would not fit in int64 at all).
MAX_STEP = 2**53
# The live detectors' noise fits sum squared scores: beyond about 1e154 a square overflows
# to inf, the fit turns NaN and the detector never fires again in that job.  A finite score
# of larger magnitude is refused (inf itself is a reading the fits leave out).
MAX_SCORE = 1e150
SCORE_RANGE = "a number from -1e150 to 1e150, inf or -inf"
TRUTH_NUMERIC = ("truth_gold", "truth_gold_peak_step")
# Wall-clock columns, each with its scale to hours; a log gives one of them.
TIME_FIELDS = {"time": 1.0, "time_h": 1.0, "time_s": 1.0 / 3600.0}
# A time since the job's start beyond this many hours (11 years) is a clock time (Unix time
# is about 4.7e5 h): read from 0 it charged the GPUs for decades before the first row
MAX_TIME_H = 1e5
# "file:line" a scored row's value was taken from (_fill_from_blank_rows), for the checks
# that refuse it by line after the merge; null where the row's own line holds it
FROM = {"loss": "loss_from", "time_h": "_time_from"}
FILLED = "_filled"  # how many of a row's values _fill_from_blank_rows took, while merging
TIME_FIELD = "_time_field"  # which of them a row's time_h was read from, while reading
# Fields of a job, not of a row: replay reads one value per job (_check_one_per_job).
PER_JOB = ("job_type", "max_steps", "truth_hacking", "truth_gold_peak_step", "seed")
# Every column name replay reads as a field of its own (the metric aside).
KNOWN_FIELDS = frozenset(("job_id", "step", "truth_hacking", *PER_JOB, *NUMERIC_OPTIONAL,
                          *TIME_FIELDS, *TRUTH_NUMERIC))
# What --columns (read_logs' ``columns``) may map a log's own column names to: the fields
# replay reads, ``score`` standing for the metric (as --metric names it).
COLUMN_FIELDS = ("job_id", "step", "score",
                 *sorted(KNOWN_FIELDS - {"job_id", "step", "truth_hacking"}), "truth_hacking")
COLUMNS_FORM = ("FIELD=COLUMN pairs, comma-separated (job_id=run,step=global_step,"
                "score=eval_accuracy), or a dict {field: column}")
TRUE_TOKENS, FALSE_TOKENS = ("true", "1", "1.0", "yes"), ("false", "0", "0.0", "no")
# A long table's format by its name's ending (else by its first bytes: detect_format).
TABLE_SUFFIXES = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl",
                  ".parquet": "parquet", ".pq": "parquet"}
# A compressed log's first bytes, and the tool that decompresses it: polars' CSV reader
# decompressed gzip and zstd itself but the rest of the reader saw the compressed bytes
# (a gzip log was refused for a last row "without a line break"), and the other kinds
# were read as text (a bzip2 log's header named as its binary first line).
COMPRESSED = ((rb"\x1f\x8b", "gzip", "zcat", "zcat"),
              (rb"BZh[1-9](1AY&SY|\x17rE8P\x90)", "bzip2", "bzcat", "bzcat"),
              (rb"\xfd7zXZ\x00", "xz", "xzcat", "xzcat"),
              (rb"\x28\xb5\x2f\xfd", "zstd", "zstdcat", "zstdcat"),
              (rb"PK\x03\x04", "zip", "unzip -p", "funzip"))  # magic, name, for a file, in a pipe
# A log may come through a pipe (`fastsim replay /dev/stdin`, bash's `<(...)`, a named
# pipe): it is read once, to its end, into memory, and refused beyond this size (a log
# that large belongs in a file, which has no limit).
PIPE_LIMIT = 256 * 2**20


@dataclass(frozen=True)
class EvalLog:
    """Evaluation logs of one or more jobs, validated and ordered.

    ``table`` columns: ``job_id`` (str), ``step`` (int64), ``metric`` (float64, as logged,
    NaN = missing), ``score`` (float64, the metric in the higher-is-better sense), then the
    optional ``loss, proxy_reward, job_type, gpus, time_h, max_steps``, any ``truth_*``
    columns, and ``source``/``line`` (where the kept row came from), and ``loss_from``
    (``file:line`` of a loss taken from a row of its step without a score, if any was).  Rows are sorted by
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


def read_log_bytes(path: Path) -> bytes:
    """A log's bytes, read once: a regular file, or a pipe read to its end (at most
    ``PIPE_LIMIT`` bytes).  A device (``/dev/zero`` never ends, a terminal waits for
    typing) or a socket is refused before it is opened."""
    path = Path(path)
    why = file_kind(path)
    if why is not None and why != "not a regular file (a pipe)":
        raise ConfigError(f"{path}: {why}; allowed: a log file, a run directory, or a pipe")
    try:
        if why is None:
            with open(path, "rb") as fh:
                return fh.read()
        return _read_pipe(path)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror or exc}); allowed: a readable "
                          "log") from None


def _read_pipe(path: Path) -> bytes:
    """A pipe's bytes, until its writer closes it (``read_log_bytes``).  A named pipe no
    one writes to blocks its reader for good, as ``cat`` would: still waiting after
    ``LOCK_NOTICE_S`` seconds, the command says so in one line, which invites Ctrl-C
    (it waited in silence, like a hung command)."""
    notice = threading.Timer(LOCK_NOTICE_S, lambda: print(
        f"fastsim: waiting for {path}, a pipe, to be written and closed (a pipe is read to "
        "its end) ...", file=sys.stderr, flush=True))
    notice.daemon = True
    notice.start()
    chunks, size = [], 0
    try:
        with open(path, "rb") as fh:  # a named pipe's open waits for a writer
            while chunk := fh.read(2**20):  # until the writer closes its end
                size += len(chunk)
                if size > PIPE_LIMIT:
                    raise ConfigError(f"{path}: a pipe carrying more than {PIPE_LIMIT / 2**20:g} "
                                      "MiB; allowed: a log up to that size through a pipe (a "
                                      "larger one from a file)")
                chunks.append(chunk)
    finally:
        notice.cancel()
    return b"".join(chunks)


def check_uncompressed(path: Path, data: bytes) -> None:
    """A compressed log is refused in one line saying how to replay it: decompressed
    first, or through a pipe (``zcat evals.csv.gz | fastsim replay /dev/stdin``)."""
    for magic, kind, tool, in_pipe in COMPRESSED:
        if not re.match(magic, data):
            continue
        how = (f"decompress it first, or replay it through a pipe: {tool} "
               f"{shlex.quote(str(path))} | fastsim replay /dev/stdin"
               if file_kind(path) is None else  # a regular file; else the pipe it came by
               f"decompress it in the pipe: ... | {in_pipe} | fastsim replay /dev/stdin")
        raise ConfigError(f"{path}: a log compressed with {kind}; allowed: an uncompressed "
                          f"log ({how})")


def detect_format(path: Path, data: bytes | None = None) -> str:
    """``csv``, ``tsv``, ``jsonl``, ``parquet`` or ``trainer_state`` from the name and the content
    (``data``, the log's bytes; read from ``path`` when not given)."""
    name = path.name.lower()
    data = read_log_bytes(path) if data is None else data
    if not data:
        raise ConfigError(f"{path}: empty file; allowed: a log in one of {', '.join(FORMATS)}")
    for suffix, fmt in TABLE_SUFFIXES.items():
        if name.endswith(suffix):
            return fmt
    head = data[:4096]
    if head.startswith(b"PAR1"):
        return "parquet"
    if name.endswith(".json"):
        return "trainer_state"
    # a byte-order mark is skipped when the log is read: so here, or JSON read as a CSV
    text = head.decode("utf-8", errors="replace").removeprefix("\ufeff").lstrip()
    if text.startswith("{") and '"log_history"' in text:
        return "trainer_state"
    if text.startswith("{"):
        return "jsonl"
    if text:
        return "csv"
    raise ConfigError(f"{path}: empty file; allowed: a log in one of {', '.join(FORMATS)}")


def _unmatched_pattern(path: Path) -> str:
    # a shell passes a pattern that matches no file as it is (logs/*.csv): say so, or the
    # newcomer looks for a file named with a star
    if not re.search(r"[*?[]", str(path)):
        return ""
    return ("; it is a pattern that matches no file (the shell passes it as written); "
            "allowed: log files or run directories that exist (fastsim replay --example: "
            "the log shipped with fastsim)")


def resolve_path(path: Path) -> Path:
    """A directory stands for its ``trainer_state.json``, else its latest checkpoint's."""
    # os.path's: False, not an OSError traceback, for a name too long to look up
    if not os.path.exists(path):
        raise ConfigError(f"{path}: no such file or directory{_unmatched_pattern(path)}")
    if not path.is_dir():
        return path
    direct = path / "trainer_state.json"
    if direct.exists() or direct.is_symlink():  # a broken link is refused by its own name
        return _regular_in_run(direct)
    ckpts = [p for p in path.glob("checkpoint-*/trainer_state.json")
             if re.fullmatch(r"checkpoint-\d+", p.parent.name)]
    if not ckpts:
        # a directory of logs: name the pattern that passes them (replay reads no directory)
        try:
            logs = sorted({q.suffix for q in path.iterdir()
                           if q.suffix.lower() in TABLE_SUFFIXES and q.is_file()})
        except OSError:  # an unreadable directory: no pattern to name
            logs = []
        raise ConfigError(f"{path}: a directory without trainer_state.json (nor in a "
                          "checkpoint-N/ subdirectory); allowed: a run directory, or log files"
                          + (" (" + ", ".join(f"{shlex.quote(str(path))}/*{x}" for x in logs)
                             + ")" if logs else ""))
    return _regular_in_run(max(ckpts, key=lambda p: int(p.parent.name.split("-")[1])))


def _regular_in_run(found: Path) -> Path:
    """``found``, a run directory's ``trainer_state.json``, unless it is a pipe or a device:
    one named on the command line is read as such on purpose, one found in a run directory
    would be waited on for a writer forever."""
    if os.path.exists(found):  # a broken link: refused by its reader, naming it
        check_regular(found, "a run directory's trainer_state.json is a regular file (as "
                      "transformers.Trainer writes it)")
    return found


# --------------------------------------------------------------------------- readers
def _raw_tsv(path: Path, data: bytes) -> pl.DataFrame:
    return _raw_csv(path, data, "\t")


def _line_ends(data: bytes) -> bytes:
    """A log's lines ended in LF: a CR alone ends a line too, as in Python's csv module
    (a CSV saved as "CSV (Macintosh)" ends every line so).  polars read such a file as
    one header line, and ``str.split`` a JSONL log's lines as one line; CR is no byte of
    a UTF-8 sequence, and JSON holds none inside a string."""
    return re.sub(rb"\r(?!\n)", b"\n", data) if b"\r" in data else data


def _raw_csv(path: Path, data: bytes, sep: str = ",") -> pl.DataFrame:
    data = _line_ends(data)
    # polars' own refusal named neither the line nor what is allowed
    what = "TSV log" if sep == "\t" else "CSV log"
    decode_utf8(path, data, what)
    _check_no_nul(path, data, what)
    try:
        df = pl.read_csv(io.BytesIO(data), infer_schema=False, separator=sep)
    except pl.exceptions.NoDataError:
        raise ConfigError(f"{path}: empty file; allowed: a log in one of "
                          f"{', '.join(FORMATS)}") from None
    except pl.exceptions.ComputeError as exc:
        _csv_lines(path, data, sep)  # a row with more fields than the header: its line
        raise ConfigError(f"{path}: not a readable CSV table ({str(exc).splitlines()[0]})") from None
    lines, blank = _csv_lines(path, data, sep)
    if df.height == lines.size and blank.any():
        # polars reads a blank line as a row of nulls (a log's trailing empty line was
        # refused as "field 'job_id': missing"); it holds no row, as in the csv module
        df, lines = df.filter(pl.Series(~blank)), lines[~blank]
    elif df.height == int((~blank).sum()):
        lines = lines[~blank]
    else:  # the csv module and polars disagree: fall back to row order
        lines = np.arange(2, df.height + 2)
    if df.height and not data.rstrip(b" \t").endswith((b"\n", b"\r")):
        _check_line_ended(path, lines[-1])
    return df.with_columns(pl.Series("line", lines, dtype=pl.Int64))


def _check_no_nul(path: Path, data: bytes, what: str) -> None:
    """No NUL byte in a text table: a crash mid-write can leave a block of a file zero-filled,
    and polars reads a NUL as any other character, so one left in a job id (``a\\x00``) made
    a job of its own, each half too short to decide on, without a word (in a number it was
    refused, but as "not a number")."""
    at = data.find(b"\x00")
    if at >= 0:
        line = data.count(b"\n", 0, at) + 1
        raise ConfigError(f"{path}:{line}: a NUL byte (0x00), which "
                          "no text log holds (a block zero-filled by a crash while the file "
                          f"was written?); allowed: a UTF-8 {what} without NUL bytes")


def _check_line_ended(path: Path, line: int) -> None:
    """A table's last row must end in a line break.  A log read while its writer appends
    to it (a buffered writer flushes at any byte, pandas rewrites the whole file) ends
    mid-row: one cut within its last value (``0.6`` of ``0.65``, ``12`` of ``1200``) has
    every field, so it was read as that other number, and could trigger a stop that the
    whole row does not (a cut before the last field is refused by ``_csv_lines``)."""
    raise ConfigError(f"{path}:{line}: the last row has no line break after it, so it may "
                      "be cut short (a log read while it is written: 0.6 of 0.65); allowed: "
                      "rows that each end in a line break (add one at the end of the file "
                      "once its writer has finished the row)")


def _separator_hint(header: list[str]) -> str:
    """Why a header read as one column may be: holding tabs, a TSV read as CSV (a pipe has
    no suffix); holding semicolons, a spreadsheet's CSV where the decimal mark is a comma."""
    one = header[0] if len(header) == 1 else ""
    if "\t" in one:
        return " (tab-separated? --format tsv, or read_logs(fmt='tsv'))"
    if ";" in one:
        return (" (semicolon-separated? the values of a row are separated by commas, or by "
                "tabs with --format tsv: save it so, with '.' as the decimal mark)")
    return ""


def _csv_lines(path: Path, data: bytes, sep: str) -> tuple[np.ndarray, np.ndarray]:
    """For each record after the header, the line it starts on (header = line 1; a quoted
    field may span lines) and whether it is a blank line, which holds no row.

    Also what polars lets through: a header naming a column twice (polars renames one) and
    a row with fewer fields than the header (polars fills them with nulls, which would read
    as missing evaluations), such as a line cut short while the log was being written.
    """
    import csv

    text = data.decode("utf-8", errors="replace")
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=sep)
    header, starts, blank, end = None, [], [], 0
    for row in _csv_rows(path, reader, lambda: end + 1):
        if header is not None:
            starts.append(end + 1)
            blank.append(not row)
        if row:
            if header is None:
                header = row
                seen = set()
                for name in (c.strip().lstrip("\ufeff") for c in row):
                    if name in seen:
                        raise ConfigError(f"{path}:1: column {name!r} appears twice; allowed: "
                                          "distinct column names")
                    seen.add(name)
            elif len(row) != len(header):
                why = ("not a line cut short" if len(row) < len(header) else
                       "a value holding the separator quoted")
                raise ConfigError(f"{path}:{end + 1}: {len(row)} fields, the header has "
                                  f"{len(header)}; allowed: one value per column (empty for a "
                                  f"missing one), {why}{_separator_hint(header)}")
        end = reader.line_num
    return np.asarray(starts, dtype=np.int64), np.asarray(blank, dtype=bool)


def _csv_rows(path: Path, reader, line):
    """``reader``'s rows; its refusal of a value longer than the csv module's field limit
    (131,072 characters), a traceback before, is one line naming the line the row starts
    on (``line()``).  polars reads such a value, so it reached this count only: most often
    a quote opened and never closed, which makes the rest of the log one value."""
    import csv

    try:
        yield from reader
    except csv.Error as exc:
        limit = csv.field_size_limit()
        if "field limit" not in str(exc):
            raise ConfigError(f"{path}:{line()}: not a readable CSV row ({exc}); allowed: "
                              "one value per column, separated as the header is") from None
        raise ConfigError(f"{path}:{line()}: a value of more than {limit:,} characters (a "
                          "quote opened and never closed makes the rest of the log one "
                          f"value); allowed: values of at most {limit:,} characters, each "
                          "quote closed") from None


class _LoneSurrogate(ValueError):
    """A key or text naming half of a UTF-16 surrogate pair ("\\ud800"): json.loads takes
    the escape, but no UTF-8 text holds it (polars' UnicodeEncodeError was a traceback)."""


def _check_utf8(key: str, value) -> None:
    if not (_utf8_holds(key) and (not isinstance(value, str) or _utf8_holds(value))):
        raise _LoneSurrogate(key)


def _utf8_holds(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _surrogate_text(exc: _LoneSurrogate) -> str:
    return (f"key {ascii(exc.args[0])} or its value "
            "holds a \\u escape of half a UTF-16 surrogate pair (\\ud800-\\udfff alone); "
            "allowed: text UTF-8 can hold")


def _float_or_text(text: str):
    """A JSON number as a float, or as its text when a float cannot hold it (``1e400``):
    json read it as inf, an ordinary score, where ``1e200`` is refused as too large; the
    text is refused by ``_numeric``, naming its line."""
    x = float(text)
    return x if math.isfinite(x) else text


def _json(text: str):
    return loads_json(text, parse_float=_float_or_text, each_pair=_check_utf8)


def _json_refusal(exc: JSONError, cut: str, allowed: str) -> str:
    """A log's ``JSONError`` in replay's words: a key given twice names itself, other text
    is not valid JSON, at the column json names (the caller names the line; ``cut``: said
    to end mid-way); ``allowed``: what the file holds."""
    if exc.allowed is not None:
        return f"{exc.msg}; allowed: {exc.allowed}"
    return f"not valid JSON ({exc.msg}{exc.at(line=False)}){cut}; allowed: {allowed}"


# A file read while its writer is mid-way ends mid-way: said where its JSON breaks there
_CUT = " (the file ends mid-way: read while it was written? read it again once written)"


def _raw_jsonl(path: Path, data: bytes, columns: dict[str, str] | None = None) -> pl.DataFrame:
    """A JSONL log's rows, its ids and seeds checked as JSON values under the keys
    ``columns`` (``column_map``'s) names for them: as text they no longer tell 1 from 1.0."""
    ids, seeds = ((columns or {}).get(f, f) for f in ("job_id", "seed"))
    rows, lines = [], []
    parts = decode_utf8(path, _line_ends(data), "JSONL log").split("\n")
    for lineno, text in enumerate(parts, start=1):
        if not text.strip():
            continue
        try:
            obj = _json(text)
        except JSONError as exc:
            # the last line, with no line break after it: a writer's line cut short
            cut = _CUT if exc.lineno is not None and lineno == len(parts) else ""
            why = _json_refusal(exc, cut, "one JSON object per line")
            raise ConfigError(f"{path}:{lineno}: {why}") from None
        except _LoneSurrogate as exc:
            raise ConfigError(f"{path}:{lineno}: {_surrogate_text(exc)}") from None
        if not isinstance(obj, dict):
            raise ConfigError(f"{path}:{lineno}: a JSON {type(obj).__name__}, allowed: "
                              "one JSON object per line")
        _check_json_job_id(path, lineno, obj.get(ids))
        if obj.get(ids) is not None:
            obj[ids] = job_key(obj[ids])
        _check_json_seed(path, lineno, obj.get(seeds))
        rows.append(obj)
        lines.append(lineno)
    return _rows_to_frame(rows, lines)


# What a log's text id is stripped of (polars' ``str.strip_chars()``, which ``_validate``
# applies to the column): Python's white space but the four separators U+001C-U+001F.
_ID_SPACE = "".join(c for c in map(chr, range(0x3001)) if c.isspace() and c not in "\x1c\x1d\x1e\x1f")


def job_key(job_id) -> str | None:
    """The key a job is filed under, in replay and in ``StopMonitor`` alike: a string
    without the white space around it (as a log's column is read), an integer (numpy's
    too) as its decimal text, so ``1``, ``np.int64(1)``, ``"1"`` and ``" 1"`` are one job.
    None for anything else: a bool (``True`` would be job ``"True"``), a float (``1.0``
    would be job ``"1.0"``, apart from ``1``; NaN a new job at every call).

    >>> job_key(1), job_key(" 1"), job_key(1.0)
    ('1', '1', None)
    """
    if isinstance(job_id, str):
        return job_id.strip(_ID_SPACE)
    if isinstance(job_id, (int, np.integer)) and not isinstance(job_id, (bool, np.bool_)):
        return str(int(job_id))
    return None


def _check_json_job_id(path: Path, lineno: int, job_id) -> None:
    """A JSON job id is a string or an integer (``job_key``); None is left to the check of
    missing ids."""
    if job_id is None or job_key(job_id) is not None:
        return
    raise ConfigError(f"{path}:{lineno}: field 'job_id': {json.dumps(job_id)}; allowed: a "
                      "string or an integer (a float such as 1.0 would be a job apart from 1)")


def _check_json_seed(path: Path, lineno: int, seed) -> None:
    """A JSON seed is a label as a Parquet one is: an integer or a string (null: none), or
    a number ``_seed_labels`` reads as the integer it equals (1.0) or refuses (1.5); true
    or a list was taken as its text."""
    if seed is None or (isinstance(seed, (str, int, float)) and not isinstance(seed, bool)):
        return
    raise ConfigError(f"{path}:{lineno}: field 'seed': {json.dumps(seed)}; allowed: an "
                      "integer or a text label, one per job (jobs that share their random "
                      "draws share it), or null")


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


def _raw_parquet(path: Path, data: bytes) -> pl.DataFrame:
    # a log from elsewhere may have no page checksums; one that has them is verified
    df = read_parquet_table(data, "a Parquet evaluation log (docs/replay.md)", name=path)
    # Parquet has no lines: "line" is the 1-based row number.
    return df.with_columns(pl.Series("line", np.arange(1, df.height + 1), dtype=pl.Int64))


def _hf_entries(path: Path, text: str):
    """``log_history`` entries with the line each starts on (json gives no positions)."""
    try:
        state = _json(text)
    except JSONError as exc:
        # Trainer rewrites the file whole at every save: read meanwhile, it ends mid-way
        cut = _CUT if exc.lineno is not None and not text.rstrip().endswith("}") else ""
        where = path if exc.lineno is None else f"{path}:{exc.lineno}"  # json gave no place
        why = _json_refusal(exc, cut, "a trainer_state.json as written by transformers.Trainer")
        raise ConfigError(f"{where}: {why}") from None
    except _LoneSurrogate as exc:
        raise ConfigError(f"{path}: {_surrogate_text(exc)}") from None
    if not isinstance(state, dict) or not isinstance(state.get("log_history"), list):
        # a table written as one JSON array of rows (pandas' to_json(orient="records"))
        rows = (" (a JSON array of rows? a long table in JSON is one object per line, a "
                ".jsonl file)" if isinstance(state, list) and state
                and all(isinstance(r, dict) for r in state) else "")
        raise ConfigError(f"{path}:1: field 'log_history': missing; allowed: a trainer_state.json "
                          f"as written by transformers.Trainer (a list of log entries){rows}")
    decoder = json.JSONDecoder()
    m = re.search(r'"log_history"\s*:\s*\[', text)
    pos = m.end() if m else 0
    lines, line, counted = [], 1, 0
    for _ in state["log_history"]:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        # counted on from the previous entry: from the start each time, a run's log of
        # 40,000 entries (6 MB) took 45 s, quadratic in its length
        line += text.count("\n", counted, pos)
        counted = pos
        lines.append(line)
        try:
            _, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            break
    lines += [0] * (len(state["log_history"]) - len(lines))
    return state, lines


def _job_id_from_path(path: Path) -> str:
    return _run_dir(path).name or path.stem


def _run_job_ids(paths: list[Path]) -> dict[Path, str]:
    """Job ids of trainer_state files: the run directory's name, lengthened by its parents
    where two different runs share a name (``exp1/output``, ``exp2/output``), so distinct
    runs never merge.  Files of one run (its checkpoints) share the run's id."""
    runs = {p: _run_dir(p) for p in paths}
    dirs = sorted(set(runs.values()))
    depth = {d: 1 for d in dirs}
    while True:
        ids = {d: "/".join(d.parts[-depth[d]:]) or str(d) for d in dirs}
        clash = {d for d in dirs if sum(ids[e] == ids[d] for e in dirs) > 1
                 and depth[d] < len(d.parts)}
        if not clash:
            return {p: ids[d] for p, d in runs.items()}
        for d in clash:
            depth[d] += 1


def _run_dir(path: Path) -> Path:
    if file_kind(path) is not None:  # a pipe has no run directory: it stands for itself
        return Path(path)
    parent = path.resolve().parent
    return parent.parent if re.fullmatch(r"checkpoint-\d+", parent.name) else parent


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


def _key_line(text: str, key: str) -> int:
    """Line of a top-level ``"key":`` in a trainer_state.json (Trainer indents by two)."""
    m = re.search(rf'^\s{{0,2}}"{re.escape(key)}"\s*:', text, re.M)
    return text.count("\n", 0, m.start()) + 1 if m else 1


def _global_step(path: Path, text: str, state: dict, largest: int | None, needed: bool):
    """trainer_state's ``global_step``, the steps ``train_runtime`` covers: ``time_h`` is
    ``step * train_runtime / global_step``, so one below the logged steps would inflate
    GPU-hours (10 while evaluations reach 40: 4x) and 0 would make them NaN.  Optional
    without a ``train_runtime`` (a run still training), checked wherever given."""
    g = state.get("global_step")
    if g is None and not needed:
        return None
    least = max(largest or 0, 1)
    if not (isinstance(g, int) and not isinstance(g, bool) and least <= g < MAX_STEP):
        got = "missing" if g is None else repr(g)
        raise ConfigError(f"{path}:{_key_line(text, 'global_step')}: field 'global_step': {got}; "
                          f"allowed: an integer >= {least}, the largest step the log holds "
                          "(train_runtime covers global_step steps)")
    return g


def _raw_trainer_state(path: Path, data: bytes, metric: str | None, job_id: str | None = None):
    text = decode_utf8(path, data, "trainer_state.json")
    state, lines = _hf_entries(path, text)
    entries = state["log_history"]
    name = _hf_metric(path, entries, metric)
    job_id = job_id or _job_id_from_path(path)
    rows, rows_lines, logged, runtime_s = _history_rows(path, entries, lines, job_id, name)
    max_steps = state.get("max_steps")
    if max_steps is not None and not (isinstance(max_steps, int) and not isinstance(max_steps, bool)
                                      and 0 <= max_steps < MAX_STEP):
        raise ConfigError(f"{path}:{_key_line(text, 'max_steps')}: field 'max_steps': "
                          f"{max_steps!r}; allowed: a non-negative integer (or null)")
    df = _rows_to_frame(rows, rows_lines)
    df = df.with_columns(pl.lit(_cell_text(max_steps), dtype=pl.String).alias("max_steps"))
    # Trainer logs no wall clock per evaluation; train_runtime / global_step gives a
    # per-step time, an estimate that assumes steps of equal cost.
    global_step = _global_step(path, text, state, logged[0], runtime_s is not None)
    if runtime_s is not None:
        step_num = df["step"].cast(pl.Float64, strict=False)
        df = df.with_columns((step_num * (float(runtime_s) / global_step / 3600.0))
                             .cast(pl.String).alias("time_h"))
    return df, name


def _history_rows(path: Path, entries: list, lines: list[int], job_id: str, name: str):
    """``log_history``'s rows: one per evaluation (``eval_*``) with the training loss
    logged last before it, then one at the last step logged if training logged after the
    last evaluation; their lines, ``(that last step, its line)`` and ``train_runtime``
    (None if not logged).  An entry that is not an object, a bad ``train_runtime``, or no
    evaluation is refused."""
    rows, rows_lines = [], []
    last_train_loss = None
    runtime_s = None
    logged = (None, 0)  # (the last step logged by any entry, its line)
    for entry, line in zip(entries, lines):
        if not isinstance(entry, dict):
            raise ConfigError(f"{path}:{line}: log_history entry is a {type(entry).__name__}; "
                              "allowed: a JSON object")
        s = entry.get("step")
        if isinstance(s, int) and not isinstance(s, bool) and (logged[0] is None or s >= logged[0]):
            logged = (s, line)
        if "train_runtime" in entry:
            runtime_s = entry["train_runtime"]
            ok = (isinstance(runtime_s, (int, float)) and not isinstance(runtime_s, bool)
                  and np.isfinite(runtime_s) and runtime_s >= 0)
            if not ok:
                raise ConfigError(f"{path}:{line}: field 'train_runtime': {runtime_s!r}; "
                                  "allowed: a non-negative number of seconds")
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
    last_eval = rows[-1]["step"]
    if (logged[0] is not None and isinstance(last_eval, int) and not isinstance(last_eval, bool)
            and logged[0] > last_eval):
        # training logged after the last evaluation (loss entries, the closing summary):
        # a row without a score at its last step, as a long log's loss-only rows, so a
        # trigger at the last evaluation is a stop that saves those steps, not one at
        # the run's completion
        rows.append({"job_id": job_id, "step": logged[0], name: None, "loss": last_train_loss})
        rows_lines.append(logged[1])
    return rows, rows_lines, logged, runtime_s


# ----------------------------------------------------------------------- validation
def _numeric(df: pl.DataFrame, path: Path, field: str, allowed: str) -> pl.Series:
    """Column ``field`` as float64 with NaN for missing; non-numeric text is an error."""
    col = df[field]
    if col.dtype == pl.Boolean:
        raise ConfigError(f"{path}:{df['line'][0]}: field {field!r}: a boolean; allowed: {allowed}")
    if col.dtype.is_numeric():
        return col.cast(pl.Float64).fill_null(float("nan"))
    _check_text_column(df, path, field, allowed)
    text = col.cast(pl.String).str.strip_chars()
    missing = text.is_null() | text.str.to_lowercase().is_in(list(MISSING_TOKENS))
    values = text.cast(pl.Float64, strict=False)
    bad = (~missing) & values.is_null()
    if bad.any():
        i = int(bad.arg_max())
        raise ConfigError(f"{path}:{df['line'][i]}: field {field!r}: {col[i]!r} is not a number; "
                          f"allowed: {allowed}")
    # a finite number beyond a float's range (1e400) was read as inf, a value apart from
    # what the log holds; "inf" itself is an ordinary value
    over = values.is_infinite() & ~text.str.to_lowercase().str.contains("inf")
    if over.any():
        i = int(over.arg_max())
        raise ConfigError(f"{path}:{df['line'][i]}: field {field!r}: {col[i]!r} is beyond a "
                          f"float's range; allowed: {allowed}")
    return pl.Series(field, np.where(missing.to_numpy(), np.nan, values.fill_null(0.0).to_numpy()))


def _check_text_column(df: pl.DataFrame, path: Path, field: str, allowed: str) -> None:
    """A column that is neither numeric nor text (a list, a struct, a duration...)."""
    dtype = df[field].dtype
    if dtype not in (pl.String, pl.Categorical, pl.Null) and not isinstance(dtype, pl.Enum):
        line = df["line"][0] if df.height else 1
        raise ConfigError(f"{path}:{line}: field {field!r}: a column of type {dtype}; "
                          f"allowed: {allowed}")


def _seed_labels(df: pl.DataFrame, path: Path) -> pl.Series:
    """``seed`` as text: the replication a job belongs to.  Jobs of one seed share their
    random draws (the runs of one toy-RLHF seed share its comparison pool and policy
    draws), so the summary's intervals resample seeds, not jobs; an empty cell, or a
    missing-value spelling (``MISSING_TOKENS``: NA, null, nan...), is none."""
    allowed = ("an integer or a text label, one per job (jobs that share their random draws "
               "share it), or empty")
    seed = df["seed"]
    if seed.dtype.is_float():
        seed = seed.fill_nan(None)  # a gap
    elif not seed.dtype.is_integer():
        _check_text_column(df, path, "seed", allowed)
    text = seed.cast(pl.String).str.strip_chars()
    # "NA" (R's gap) was the label 'NA', one seed of every job without one
    text = pl.select(pl.when(text.str.to_lowercase().is_in(list(MISSING_TOKENS)))
                     .then(pl.lit("")).otherwise(text).alias("seed"))["seed"]
    # Every format alike: pandas writes an integer column with a gap as floats, 1.0 in a
    # Parquet or JSONL column and "1.0" in a CSV cell; each is the seed 1 ("01" and "+1"
    # too), and 1.5 none (a CSV's "1.0" was refused where a Parquet's 1.0 was read as 1).
    integer = text.str.contains(r"^[+-]?[0-9]+$")
    number = text.cast(pl.Float64, strict=False)
    written = number.is_not_null() & ~integer  # 1.0, 1e3, 1.5, inf
    whole = written & (number % 1 == 0) & (number.abs() < 2.0**63)
    if (written & ~whole).any():
        i = int((written & ~whole).arg_max())
        raise ConfigError(f"{path}:{df['line'][i]}: field 'seed': {text[i]!r} is a number that "
                          f"is not an integer (below 2^63 in size); allowed: {allowed}")
    as_int = pl.select(pl.when(whole).then(number.cast(pl.Int64, strict=False))
                       .otherwise(text.cast(pl.Int64, strict=False)).cast(pl.String)
                       .alias("seed"))["seed"]  # "01" -> "1", "1.0" -> "1"; 2^70 stays
    return pl.select(pl.when(text == "").then(None)
                     .when((integer | whole) & as_int.is_not_null()).then(as_int)
                     .otherwise(text).alias("seed"))["seed"]


def _truth_hacking(df: pl.DataFrame, path: Path) -> pl.Series:
    """``truth_hacking`` as booleans: true/false, 1/0 (text or numbers)."""
    col = df["truth_hacking"]
    if col.dtype == pl.Boolean:
        if col.null_count():
            i = int(col.is_null().arg_max())
            raise ConfigError(f"{path}:{df['line'][i]}: field 'truth_hacking': None; allowed: "
                              "true/false or 1/0 (hidden truth: the job over-optimises)")
        return col
    allowed = "true/false or 1/0 (hidden truth: the job over-optimises)"
    if col.dtype.is_numeric():
        text = col.cast(pl.Float64).cast(pl.String)
    else:
        _check_text_column(df, path, "truth_hacking", allowed)
        text = col.cast(pl.String)
    text = text.str.strip_chars().str.to_lowercase()
    true, false = text.is_in(list(TRUE_TOKENS)), text.is_in(list(FALSE_TOKENS))
    bad = ~(true | false).fill_null(False)
    if bad.any():
        i = int(bad.arg_max())
        raise ConfigError(f"{path}:{df['line'][i]}: field 'truth_hacking': {col[i]!r}; "
                          f"allowed: {allowed}")
    return true.alias("truth_hacking")


def _truth_number(df: pl.DataFrame, path: Path, field: str) -> pl.Series:
    """``truth_gold`` or ``truth_gold_peak_step``: hidden truth scores every decision (the
    oracle stops at the gold peak), so it is never missing: a blank would move the peak."""
    allowed = ("a finite number on every row (hidden truth)" if field == "truth_gold" else
               "a non-negative integer on every row, a step the job logs (hidden truth)")
    col = _numeric(df, path, field, allowed)
    v = col.to_numpy()
    bad = ~np.isfinite(v)
    if field == "truth_gold_peak_step":
        bad |= np.isfinite(v) & ((v < 0) | (v >= MAX_STEP) | (v != np.floor(v)))
    if bad.any():
        i = int(np.argmax(bad))
        value = df[field][i]
        shown = "missing" if np.isnan(v[i]) else repr(value)
        raise ConfigError(f"{path}:{df['line'][i]}: field {field!r}: {shown}; allowed: {allowed}")
    return col.alias(field)


def _check_one_per_job(table: pl.DataFrame) -> None:
    """A per-job field (``PER_JOB``) holds one value per job, over all its rows and files:
    replay reads a single one, so rows that disagree (``max_steps`` 10 then 4, ``job_type``
    lora then rlhf) would silently decide on whichever it read.  Empty cells take the job's
    value.  The table is in command-line then file order."""
    for field in (f for f in PER_JOB if f in table.columns):
        value = pl.col(field).fill_nan(None) if table[field].dtype.is_float() else pl.col(field)
        first = value.drop_nulls().first().over("job_id")
        other = table.select((value != first).fill_null(False).alias("b"))["b"]
        if other.any():
            r = table.row(int(other.arg_max()), named=True)
            was = table.filter(pl.col("job_id") == r["job_id"])[field].drop_nulls()
            was = was.filter(was.is_not_nan()) if was.dtype.is_float() else was
            raise ConfigError(f"{r['source']}:{r['line']}: field {field!r}: job {r['job_id']!r} "
                              f"has {_shown(r[field])} here and {_shown(was[0])} on an earlier "
                              "row; allowed: one value per job (empty cells take it)")


def _shown(value) -> str:
    return f"{value:g}" if isinstance(value, float) else repr(value)


def _check_within_plan(table: pl.DataFrame) -> None:
    """No logged step beyond its job's ``max_steps``, the planned length (0: none given,
    as a ``TrainerState`` not yet planned holds): a log that runs past it shows the plan
    is not this run's (a length in epochs, a run resumed with another), and stop-at
    decided on it as ``T_est``, stopping at the "end" of a run that went on."""
    if "max_steps" not in table.columns:
        return
    plan = pl.col("max_steps").cast(pl.Float64).fill_nan(None)
    plan = pl.when(plan > 0).then(plan).max().over("job_id")
    bad = table.select((pl.col("step") > plan).fill_null(False).alias("b"))["b"]
    if bad.any():
        r = table.row(int(bad.arg_max()), named=True)
        ms = table.filter(pl.col("job_id") == r["job_id"])["max_steps"].cast(pl.Float64).max()
        raise ConfigError(f"{r['source']}:{r['line']}: field 'step': job {r['job_id']!r} logs "
                          f"step {r['step']}, beyond its max_steps {ms:g}; allowed: steps up to "
                          "the planned length max_steps (the run's own, in steps: a run resumed "
                          "with another records it in its latest log), or no max_steps")


def _check_peak_steps(table: pl.DataFrame) -> None:
    """``truth_gold_peak_step`` names one of its job's logged steps: another would score
    every detection delay against a step the job never reached (or never logged)."""
    if "truth_gold_peak_step" not in table.columns:
        return
    peak = pl.col("truth_gold_peak_step").cast(pl.Int64)
    logged = peak.is_in(pl.col("step").implode()).over("job_id")
    bad = table.select((~logged).alias("b"))["b"]
    if bad.any():
        r = table.row(int(bad.arg_max()), named=True)
        raise ConfigError(f"{r['source']}:{r['line']}: field 'truth_gold_peak_step': "
                          f"{r['truth_gold_peak_step']:g} is not a step job {r['job_id']!r} "
                          "logs; allowed: one of the job's logged steps (hidden truth)")


def _time_h(df: pl.DataFrame, path: Path) -> pl.Series | None:
    """The wall clock in hours from the one time column a log has (``TIME_FIELDS``), or None.
    Two are refused: they may disagree (one may even run backwards), and reading one
    would silently drop the other."""
    given = [f for f in TIME_FIELDS if f in df.columns]
    if not given:
        return None
    if len(given) > 1:
        raise ConfigError(f"{path}:1: fields {' and '.join(map(repr, given))}: two time columns; "
                          "allowed: one of time (hours), time_h (hours) or time_s (seconds)")
    field = given[0]
    t = _numeric(df, path, field, "a number of hours (time_s: seconds), or empty for missing")
    t = (t * TIME_FIELDS[field]).alias("time_h")
    hours = t.to_numpy()  # infinite: GPU-hours of 0 (a score may be: inf)
    if np.isinf(hours).any():
        i = int(np.argmax(np.isinf(hours)))
        raise ConfigError(f"{path}:{df['line'][i]}: field {field!r}: {hours[i]}; allowed: "
                          "a finite time, or empty for missing")
    if (hours < 0).any():  # time is counted from the job's start: GPU-hours begin at 0
        i = int(np.argmax(hours < 0))
        raise ConfigError(f"{path}:{df['line'][i]}: field {field!r}: {df[field][i]!r} is "
                          "before the job started; allowed: the time since the job started "
                          "(0 at its start; GPU-hours count from there), or empty for missing")
    if (hours > MAX_TIME_H).any():
        i = int(np.argmax(hours > MAX_TIME_H))
        raise ConfigError(f"{path}:{df['line'][i]}: field {field!r}: {df[field][i]!r} is "
                          f"{hours[i]:.3g} h after the job started, a clock time, not the "
                          f"time since the start; allowed: at most {MAX_TIME_H:g} h (subtract "
                          "the job's start time), or empty for missing")
    return t


def _check_field_names(df: pl.DataFrame, path: Path, metric: str) -> None:
    """A column named like one of replay's fields but not exactly (``Seed``, ``job type``)
    would be read as an unknown column and ignored: its jobs' seeds, types or truth lost
    without a word (a lost seed column narrows every interval)."""
    for col in df.columns:
        key = col.strip().lower().replace("-", "_").replace(" ", "_")
        if col != metric and col != key and key in KNOWN_FIELDS and key not in df.columns:
            raise ConfigError(f"{path}:1: field {col!r}: replay reads field names exactly; "
                              f"allowed: {key!r} (rename the column, or --columns {key}={col})")


def column_map(columns) -> dict[str, str]:
    """``--columns`` (read_logs' ``columns``) as ``{field replay reads: the log's column}``,
    from its text (``job_id=run,step=global_step``) or a dict; None is ``{}``.  A log whose
    columns are named otherwise (``run, global_step, eval_accuracy``) was refused for a
    missing ``job_id`` column, and its columns had to be renamed in the file.  Refused
    before any log is read: a field replay does not read, a field or a column given twice.

    Examples
    --------
    >>> column_map("job_id=run, step=global_step")
    {'job_id': 'run', 'step': 'global_step'}
    """
    if columns is None:
        return {}
    if isinstance(columns, str):
        pairs = []
        for part in columns.split(","):
            field, eq, col = (x.strip() for x in part.partition("="))
            if not (eq and field and col):
                raise ConfigError(f"columns {columns!r}: {part.strip()!r} is not FIELD=COLUMN; "
                                  f"allowed: {COLUMNS_FORM}")
            pairs.append((field, col))
    elif isinstance(columns, dict):
        pairs = list(columns.items())
    else:
        raise ConfigError(f"columns={columns!r} is invalid; allowed: {COLUMNS_FORM}")
    out: dict[str, str] = {}
    for field, col in pairs:
        if field not in COLUMN_FIELDS:
            raise ConfigError(f"columns {field}={col}: {field!r} is not a field replay reads"
                              f"{did_you_mean(str(field), COLUMN_FIELDS)}; allowed: "
                              f"{', '.join(COLUMN_FIELDS)} (score: the metric)")
        if not (isinstance(col, str) and col.strip()):
            raise ConfigError(f"columns {field}={col!r}: allowed: the name of a column of "
                              "the log")
        if field in out:
            raise ConfigError(f"columns: field {field!r} is mapped twice ({field}={out[field]} "
                              f"and {field}={col}); allowed: each field once")
        twice = next((f for f, c in out.items() if c == col), None)
        if twice is not None:
            raise ConfigError(f"columns: column {col!r} is mapped twice ({twice}={col} and "
                              f"{field}={col}); allowed: each column to one field")
        out[field] = col
    return out


def _map_columns(df: pl.DataFrame, path: Path, fmt: str, columns: dict[str, str]) -> pl.DataFrame:
    """A long table's columns renamed by ``columns`` (``column_map``'s, ``score`` aside: it
    is the metric, read under its own name); each named column must be in the log, and no
    field given a column may have one of its own."""
    if not columns:
        return df
    found = [c for c in df.columns if c != "line"]  # "line": the reader's line numbers
    for field, col in columns.items():
        if fmt == "trainer_state":
            raise ConfigError(f"{path}: columns {field}={col}: a trainer_state.json has no "
                              "columns to map (its job id is the run directory, its steps "
                              "Trainer's); allowed: columns for long tables (CSV, TSV, JSONL, "
                              "Parquet), or score=EVAL_NAME (the metric) alone")
        if col not in found:
            raise ConfigError(f"{path}:1: columns {field}={col}: the log has no column {col!r}"
                              f"{did_you_mean(col, found)}; allowed: one of {quoted(found)}")
        if field in found and field not in columns.values():
            raise ConfigError(f"{path}:1: columns {field}={col}: the log has a column "
                              f"{field!r} too; allowed: a field the log does not name itself")
    return df.rename({col: field for field, col in columns.items()})


def check_format(fmt) -> None:
    """``fmt`` is None (detect) or one of ``FORMATS``: the API's argument (the command
    line's ``--format`` takes only these)."""
    if fmt is not None and fmt not in FORMATS:
        raise ConfigError(f"fmt={fmt!r} is invalid{did_you_mean(str(fmt), FORMATS)}; "
                          f"allowed: {', '.join(FORMATS)}")


def _validate(df: pl.DataFrame, path: Path, metric: str) -> pl.DataFrame:
    _check_columns(df, path, metric)
    out = {"job_id": _job_ids(df, path), "step": _steps(df, path),
           "metric": _metric_values(df, path, metric)}
    out.update(_optional_numbers(df, path, metric, out["metric"]))
    out.update(_time_columns(df, path))
    if "job_type" in df.columns:
        out["job_type"] = _job_types(df, path)
    if "seed" in df.columns:
        out["seed"] = _seed_labels(df, path)
    out.update(_truth_columns(df, path))
    out["source"] = pl.Series("source", [str(path)] * df.height, dtype=pl.String)
    out["line"] = df["line"]
    return pl.DataFrame(out)


def _check_columns(df: pl.DataFrame, path: Path, metric: str) -> None:
    """Refuse a log without the columns replay reads (job_id, step, the metric), a metric
    named ``line``, or no rows."""
    _check_field_names(df, path, metric)
    found = [c for c in df.columns if c != "line"]
    tsv = _separator_hint(found)
    for field in ("job_id", "step"):
        if field not in df.columns:
            raise ConfigError(f"{path}:1: field {field!r}: missing column; allowed: a table with "
                              f"columns job_id, step, score (found {quoted(found)})"
                              # one column read from a line of them: a separator, not a name
                              + (tsv or f", or --columns {field}=COLUMN naming yours "
                                 "(read_logs(columns=...))"))
    if metric == "line":
        # the readers' column of each row's line, which replaces a log's own column of that
        # name: --metric line decided on line numbers, whatever the log held
        raise ConfigError(f"{path}:1: field 'line': the name replay gives each row's line "
                          "number; allowed: a metric column of another name (rename it)")
    if metric not in df.columns:
        metrics = [c for c in df.columns if c not in ("line", "job_id", "step")]
        raise ConfigError(f"{path}:1: field {metric!r}: missing column"
                          f"{did_you_mean(str(metric), metrics)}; allowed: one of "
                          f"{quoted(metrics)} "
                          "(--metric, or read_logs(metric=...))")
    if df.height == 0:
        raise ConfigError(f"{path}: no rows; allowed: at least one evaluation")


def _job_ids(df: pl.DataFrame, path: Path) -> pl.Series:
    """The job ids as text without surrounding white space; a missing or blank one refused."""
    if not df["job_id"].dtype.is_integer():
        _check_text_column(df, path, "job_id", "a text or integer id")
    job = df["job_id"].cast(pl.String).str.strip_chars()
    empty = job.is_null() | (job == "")
    if empty.any():
        i = int(empty.arg_max())
        raise ConfigError(f"{path}:{df['line'][i]}: field 'job_id': missing; allowed: a non-empty id")
    return job


def _steps(df: pl.DataFrame, path: Path) -> pl.Series:
    """The steps as int64; one missing, negative, fractional or from 2^53 refused."""
    step = _numeric(df, path, "step", "a non-negative integer").to_numpy()
    bad = ~np.isfinite(step) | (step < 0) | (step != np.floor(step))
    if bad.any():
        i = int(np.argmax(bad))
        raise ConfigError(f"{path}:{df['line'][i]}: field 'step': {df['step'][i]!r} is invalid; "
                          "allowed: a non-negative integer (every evaluation needs its step)")
    big = step >= MAX_STEP
    if big.any():
        i = int(np.argmax(big))
        raise ConfigError(f"{path}:{df['line'][i]}: field 'step': {df['step'][i]!r} is too large; "
                          f"allowed: a non-negative integer below 2^53 = {MAX_STEP} (larger "
                          "steps cannot be compared exactly)")
    return pl.Series("step", step.astype(np.int64))


def _metric_values(df: pl.DataFrame, path: Path, metric: str) -> pl.Series:
    """The metric column as float64 (NaN missing), named ``metric``; a finite value beyond
    ``SCORE_RANGE`` refused."""
    metric_values = (_numeric(df, path, metric, "a number, or empty/NaN/null for a missing "
                              "evaluation").alias("metric"))
    m = metric_values.to_numpy()
    big = np.isfinite(m) & (np.abs(m) > MAX_SCORE)
    if big.any():
        i = int(np.argmax(big))
        raise ConfigError(f"{path}:{df['line'][i]}: field {metric!r}: {df[metric][i]!r} is too "
                          f"large; allowed: {SCORE_RANGE}, or empty for missing (the "
                          "detectors' sums of squares overflow beyond)")
    return metric_values


def _optional_numbers(df: pl.DataFrame, path: Path, metric: str,
                      metric_values: pl.Series) -> dict[str, pl.Series]:
    """The ``NUMERIC_OPTIONAL`` columns the log has (the metric's own as read), as float64;
    a ``max_steps`` that is not a non-negative integer, or a ``gpus`` not positive and
    finite, refused."""
    out = {}
    for field in NUMERIC_OPTIONAL:
        if field in df.columns and field != metric:
            out[field] = _numeric(df, path, field, "a number, or empty for missing").alias(field)
        elif field == metric:
            out[field] = metric_values.alias(field)
    if "max_steps" in out:  # the planned length, as trainer_state's max_steps
        m = out["max_steps"].to_numpy()
        bad = ~np.isnan(m) & ~((m >= 0) & (m < MAX_STEP) & (m == np.floor(m)))
        if bad.any():
            i = int(np.argmax(bad))
            raise ConfigError(f"{path}:{df['line'][i]}: field 'max_steps': {df['max_steps'][i]!r}; "
                              "allowed: a non-negative integer, or empty for missing")
    if "gpus" in out:
        g = out["gpus"].to_numpy()
        bad = ~np.isnan(g) & ~((g > 0) & np.isfinite(g))
        if bad.any():
            i = int(np.argmax(bad))
            raise ConfigError(f"{path}:{df['line'][i]}: field 'gpus': {g[i]:g}; allowed: a "
                              "positive finite number")
    return out


def _time_columns(df: pl.DataFrame, path: Path) -> dict[str, pl.Series]:
    """``time_h`` (hours since the job's start) and the column it was read from, if the log
    has a time column."""
    out = {}
    time_h = _time_h(df, path)
    if time_h is not None:
        out["time_h"] = time_h
        # the column as the log names it, for _check_time_order's error (then dropped)
        out[TIME_FIELD] = pl.Series(TIME_FIELD, [next(f for f in TIME_FIELDS if f in df.columns)]
                                    * df.height, dtype=pl.String)
    return out


def _job_types(df: pl.DataFrame, path: Path) -> pl.Series:
    """``job_type`` as lower-case text; a type other than lora, dpo or rlhf refused."""
    _check_text_column(df, path, "job_type", "lora, dpo or rlhf")
    job_type = df["job_type"].cast(pl.String).str.strip_chars().str.to_lowercase()
    # a typo would silently put an RLHF job out of the default scope
    unknown = ~job_type.is_in(JOB_TYPE_LABELS) & job_type.is_not_null()
    if unknown.any():
        i = int(unknown.arg_max())
        raise ConfigError(f"{path}:{df['line'][i]}: field 'job_type': {df['job_type'][i]!r}; "
                          "allowed: lora, dpo or rlhf (any case), or empty")
    return job_type


def _truth_columns(df: pl.DataFrame, path: Path) -> dict[str, pl.Series]:
    """The hidden-truth columns (``truth_*``), in the log's order, the known ones checked."""
    out = {}
    for col in df.columns:
        if col == "truth_hacking":
            out[col] = _truth_hacking(df, path)
        elif col in TRUTH_NUMERIC:
            out[col] = _truth_number(df, path, col)
        elif col.startswith("truth_"):
            out[col] = df[col]
    return out


def read_one(path, fmt: str | None = None, metric: str | None = None,
             job_id: str | None = None, data: bytes | None = None,
             columns: dict[str, str] | None = None) -> tuple[pl.DataFrame, str]:
    """Read and validate one log; returns ``(table, metric name)`` before the mess rules.
    ``data``: the log's bytes if already read (a pipe can be read only once), ``path``
    then as resolved, or a frame's name; ``columns``: ``column_map``'s, ``score`` aside.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "log.csv"
    >>> _ = p.write_text("job_id,step,score\\na,1,0.5\\na,2,0.4\\n")
    >>> read_one(p)[0]["metric"].to_list()
    [0.5, 0.4]
    """
    check_format(fmt)
    if data is None:
        path = resolve_path(Path(path))
        data = read_log_bytes(path)
    check_uncompressed(path, data)
    fmt = fmt or detect_format(path, data)
    if fmt == "trainer_state":
        raw, name = _raw_trainer_state(path, data, metric, job_id)
    else:
        raw = (_raw_jsonl(path, data, columns) if fmt == "jsonl" else
               {"csv": _raw_csv, "tsv": _raw_tsv, "parquet": _raw_parquet}[fmt](path, data))
        name = metric or "score"
    return _validate(_map_columns(raw, path, fmt, columns or {}), path, name), name


@known_keywords("fastsim.read_logs()")
def read_logs(paths, fmt: str | None = None, metric: str | None = None,
              higher_is_better: bool | None = None, on_duplicate: str = "last",
              columns=None) -> EvalLog:
    """Read evaluation logs of any supported format into one validated ``EvalLog``.

    Mess rules (docs/replay.md): rows of every file are validated first; a ``(job_id,
    step)`` logged twice keeps its last row in command-line and file order (a resumed run
    re-logs a step), but never a row without a score over one with a score, or raises
    with ``on_duplicate="error"``; rows are sorted by step;
    missing scores stay in the table as NaN (the decision skips them); wall-clock time
    must not run backwards within a job.

    Parameters
    ----------
    paths : path, DataFrame, or list of them (files, run directories holding
        trainer_state.json, or Polars/pandas frames with a log table's columns, read as a
        Parquet log is)
    fmt : one of ``FORMATS``, or None to detect per file (a frame needs none)
    metric : column (long tables) or ``eval_*`` name (trainer_state); default ``score``
        for tables, the single non-loss ``eval_*`` metric (else ``eval_loss``) for HF
    higher_is_better : the metric's sense; None infers it from the name
    on_duplicate : ``"last"`` or ``"error"``
    columns : the log's own names for the fields replay reads, ``{"job_id": "run", "step":
        "global_step", "score": "eval_accuracy"}`` or the text ``"job_id=run,..."``
        (``--columns``): long tables' columns are read under the field's name, ``score``
        is the metric (as ``metric=`` names it, keeping its name)

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "log.csv"
    >>> _ = p.write_text("job_id,step,score\\na,2,0.4\\na,1,0.5\\na,2,0.3\\n")
    >>> read_logs([p]).table["score"].to_list()
    [0.5, 0.3]
    """
    higher_is_better = plain_scalar(higher_is_better)  # numpy's bool is a bool: np.bool_(True)
    columns, metric = _metric_column(column_map(columns), metric)
    paths = _check_read_args(paths, fmt, metric, higher_is_better, on_duplicate)
    tables, name = _read_tables(paths, fmt, metric, columns)
    hib = default_higher_is_better(name) if higher_is_better is None else bool(higher_is_better)
    table, notes = _merged(tables, name, on_duplicate)
    return EvalLog(table=_scored(table, hib), metric=name, higher_is_better=hib,
                   notes=tuple(notes))


def _metric_column(columns: dict[str, str],
                   metric: str | None) -> tuple[dict[str, str], str | None]:
    """``columns`` less ``score``, and the metric: the column ``score`` names, by its own
    name (its sense is read from it), or ``metric``; both given is refused."""
    if "score" in columns:
        if metric is not None:
            raise ConfigError(f"columns score={columns['score']} and metric {metric!r} both "
                              "name the metric column; allowed: one of them")
        metric = columns.pop("score")
    return columns, metric


def _read_tables(paths: list, fmt: str | None, metric: str | None,
                 columns: dict[str, str]) -> tuple[list[pl.DataFrame], str]:
    """Every log read and validated (``read_one``), and the one metric they name."""
    resolved, datas, formats = zip(*(_read_source(p, i, fmt) for i, p in enumerate(paths)))
    run_ids = _run_job_ids([p for p, f in zip(resolved, formats) if f == "trainer_state"])
    tables, names = [], []
    for p, f, d in zip(resolved, formats, datas):
        t, name = read_one(p, f, metric, run_ids.get(p), d, columns)
        tables.append(t)
        names.append(name)
    if len(set(names)) > 1:
        raise ConfigError(f"files disagree on the metric ({sorted(set(names))}); allowed: one "
                          "metric per replay (name it with --metric)")
    return tables, names[0]


def _merged(tables: list[pl.DataFrame], name: str,
            on_duplicate: str) -> tuple[pl.DataFrame, list[str]]:
    """The logs' rows as one table by the mess rules (docs/replay.md), each job's in step
    order, and the notes of the rules applied."""
    table = pl.concat(tables, how="diagonal_relaxed").with_row_index("order")
    _check_one_per_job(table)
    table, notes = _drop_duplicates(table, name, on_duplicate)
    if table.select((pl.col("step").diff().over("job_id") < 0).any()).item():
        notes.append("unsorted: rows reordered by step within each job")
    table = table.sort(["job_id", "step"], maintain_order=True)
    _check_time_order(table)
    table = table.drop(TIME_FIELD, FROM["time_h"], strict=False)
    _check_within_plan(table)
    _check_peak_steps(table)
    n_missing = int(table["metric"].is_nan().sum())
    if n_missing:
        notes.append(f"missing: {n_missing} row(s) with no {name} value skipped "
                     "(neither a decline nor a reset)")
    return table, notes


def _scored(table: pl.DataFrame, hib: bool) -> pl.DataFrame:
    """``table`` with ``score``, the metric signed so that higher is better, its columns
    in ``EvalLog``'s order."""
    sign = 1.0 if hib else -1.0
    table = table.with_columns((pl.col("metric") * sign).alias("score")).drop("order")
    first = ["job_id", "step", "metric", "score"]
    return table.select(first + [c for c in table.columns if c not in first])


def is_frame(v) -> bool:
    """A Polars or pandas DataFrame (pandas is not imported to ask)."""
    return isinstance(v, pl.DataFrame) or (type(v).__name__ == "DataFrame"
                                           and type(v).__module__.startswith("pandas"))


def _read_source(p, i: int, fmt: str | None) -> tuple[Path, bytes, str]:
    """Log ``i``'s name, bytes (read once: a pipe cannot be read again) and format.  A
    frame in memory is read as a Parquet log is, by the same rules, named ``DataFrame #N``
    by its place among the logs, its rows numbered from 1 where a file's lines are."""
    if not is_frame(p):
        path = resolve_path(Path(p))
        data = read_log_bytes(path)
        return path, data, fmt or detect_format(path, data)
    name = Path(f"DataFrame #{i + 1}")
    buf = io.BytesIO()
    try:
        (p if isinstance(p, pl.DataFrame) else pl.from_pandas(p)).write_parquet(buf)
    except Exception as exc:  # noqa: BLE001 - polars' or pyarrow's error on a column's type
        raise ConfigError(f"{name}: cannot be read as a table ({type(exc).__name__}: "
                          f"{str(exc).splitlines()[0][:200] if str(exc) else ''}); allowed: "
                          "columns of numbers and text") from None
    return name, buf.getvalue(), "parquet"


def _check_read_args(paths, fmt, metric, higher_is_better, on_duplicate) -> list:
    """``read_logs``' arguments checked before any file is opened; the logs as a list."""
    given = paths
    if isinstance(paths, (str, Path)) or is_frame(paths):
        paths = [paths]
    if not isinstance(paths, (list, tuple)) or not all(is_path(p) or is_frame(p) for p in paths):
        from fastsim.summary import value_kind  # a DataFrame's repr is many lines

        raise ConfigError(f"paths={value_kind(given)} is invalid; allowed: a path, a "
                          "DataFrame, or a list of them")
    if not paths:
        raise ConfigError("no log files given; allowed: one or more paths or DataFrames")
    for p in paths:
        check_file_path(p, "paths", or_dir=True)  # a run directory holds trainer_state.json
    if higher_is_better is not None and not isinstance(higher_is_better, bool):  # "no" is truthy
        raise ConfigError(f"higher_is_better={higher_is_better!r} is invalid; allowed: True, "
                          "False or None (inferred from the metric's name)")
    if metric is not None and not (isinstance(metric, str) and metric.strip()):
        raise ConfigError(f"metric={metric!r} is invalid; allowed: a column or eval_* name, "
                          "or None for the default")
    if isinstance(metric, str) and metric.strip().startswith("truth_"):
        # a policy decides on what is observed; truth_* columns only score its decisions
        raise ConfigError(f"metric={metric!r} is invalid; allowed: an observed column or "
                          "eval_* name (truth_* columns are hidden truth: they score the "
                          "decisions, never make them)")
    if on_duplicate not in ("last", "error"):
        raise ConfigError(f"on_duplicate={on_duplicate!r} is invalid; allowed: last, error")
    check_format(fmt)
    return list(paths)


def _drop_duplicates(table: pl.DataFrame, name: str, on_duplicate: str):
    """One row per ``(job_id, step)`` by the mess rules; the table and the notes it earns."""
    notes = []
    key = pl.struct("job_id", "step")
    dup = table.select(key.is_duplicated()).to_series()
    if not dup.any():
        return table, notes
    if on_duplicate == "error":
        again = table.select(~key.is_first_distinct()).to_series()
        r = table.filter(again).row(0, named=True)  # the first row that repeats one
        raise ConfigError(f"{r['source']}:{r['line']}: field 'step': job "
                          f"{r['job_id']!r} logs step {r['step']} more than once; "
                          "allowed: one row per (job_id, step) (or --on-duplicate last)")
    # A row without a value never displaces a scored row of its step: a loop that logs
    # the training loss and the evaluation on separate rows of one step would lose the
    # evaluation to whichever came last (and a trigger at the previous evaluation
    # would read as a stop before completion).
    scored = ~pl.col("metric").is_nan()
    blank = table.select(dup & (~scored & scored.any().over("job_id", "step"))).to_series()
    if blank.any():
        table = _fill_from_blank_rows(table, scored).filter(~blank)
        notes.append(f"duplicates: {int(blank.sum())} row(s) with no {name} value dropped "
                     "beside a row of the same (job_id, step) that has one")
    dup = table.select(key.is_duplicated()).to_series()
    if dup.any():
        n_extra = int(dup.sum()) - table.filter(dup).select(key.n_unique()).item()
        table = table.unique(subset=["job_id", "step"], keep="last", maintain_order=True)
        notes.append(f"duplicates: {n_extra} repeated (job_id, step) row(s) dropped, "
                     "the last kept")
    if FILLED in table.columns:  # counted on the rows kept: a value filled then dropped is not
        n_filled = int(table[FILLED].sum())
        table = table.drop(FILLED)
        if n_filled:
            notes.append(f"duplicates: {n_filled} missing value(s) of those steps' scored rows "
                         "(loss, time, ...) taken from the rows dropped")
    return table, notes


def _fill_from_blank_rows(table: pl.DataFrame, scored: pl.Expr) -> pl.DataFrame:
    """``table`` with each scored row's missing readings (a NaN or empty ``loss``, time,
    ``gpus``, ...) taken from the last row without a score of its ``(job_id, step)`` that
    has one, and how many each row took (``FILLED``): those rows are then dropped, and a
    loop that logs the loss and the evaluation on separate rows lost its losses
    (``loss_plateau`` read the job as too short, where the same log on one row per step
    stopped it)."""
    cols = [c for c, t in table.schema.items() if t.is_float() and c != "metric"]
    if not cols:
        return table
    missing = {c: pl.col(c).fill_nan(None).is_null() & scored for c in cols}
    # a per-job field is not counted: replay reads one value per job, filled or not
    counted = [missing[c] for c in cols if c not in PER_JOB]
    n_missing = pl.sum_horizontal(counted).cast(pl.Int64) if counted else pl.lit(0)
    table = table.with_columns(n_missing.alias(FILLED))
    step = ("job_id", "step")
    # where a value refused later by line came from: the scored row's line holds no such value
    here = pl.format("{}:{}", pl.col("source"), pl.col("line"))
    table = table.with_columns(
        [pl.when(missing[c]).then(here.filter(~scored & pl.col(c).fill_nan(None).is_not_null())
                                  .last().over(step)).alias(FROM[c])
         for c in cols if c in FROM]
        + [pl.when(scored).then(pl.coalesce(
            pl.col(c).fill_nan(None),
            pl.col(c).filter(~scored).fill_nan(None).drop_nulls().last().over(step),
            pl.col(c))).otherwise(pl.col(c)).alias(c) for c in cols])
    return table.with_columns(pl.col(FILLED) - n_missing)


def where(r: dict, field: str) -> str:
    """``file:line`` of row ``r``'s ``field`` value: the line it was taken from, if the merge
    took it from another row of its step (``FROM``)."""
    return r.get(FROM.get(field)) or f"{r['source']}:{r['line']}"


def _check_time_order(table: pl.DataFrame) -> None:
    """Wall-clock time must not run backwards within a job (the table sorted by step)."""
    if "time_h" not in table.columns:
        return
    # against the latest time logged before, so a missing time in between hides nothing
    before = pl.col("time_h").fill_nan(None).cum_max().forward_fill().shift(1).over("job_id")
    back = table.select((pl.col("time_h") < before).alias("b"))["b"].fill_null(False)
    if back.any():
        r = table.row(int(back.arg_max()), named=True)
        # named and valued as the log gives it: a time_s log was told of field 'time' in hours
        field = r.get(TIME_FIELD) or "time"
        value = r["time_h"] / TIME_FIELDS[field]
        raise ConfigError(f"{where(r, 'time_h')}: field {field!r}: {value:g} "
                          f"{'s' if field == 'time_s' else 'h'} is earlier than job "
                          f"{r['job_id']!r}'s previous evaluation; allowed: wall-clock time "
                          "non-decreasing in step")
