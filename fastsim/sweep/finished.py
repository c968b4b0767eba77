"""A finished sweep, verified before it is read: the one check of every reader of one
(``fastsim figures`` and the figure scripts, ``read_summary``: ``fastsim reproduce``'s
report, ``fastsim.sweep``'s table, the frontier table).

``fastsim sweep`` verifies its directory against the grid its sweep file expands to
before it resumes (``SweepStore.open``).  A reader has no sweep file, so it checks the
manifest against itself and against the results it lists, refusing in one line naming
the file and what is wrong: the manifest's fields of the types ``SweepStore.manifest``
writes (a format of ``"3"``, text, was drawn as format 3); its ``grid`` the one its
``grid_hash`` is of, and its ``cells`` that grid's cells; its ``axes`` those
``cells.parquet`` (checked against its recorded SHA-256) has a column for, in order, and
every workload field the cells differ in; and every chunk of every cell there, its record
naming this grid, cell, chunk and code, and its files the bytes and rows it records (a
file moved from another cell's directory is another's bytes).  A directory whose
``cells/`` was deleted once aggregated keeps its tables, which are checked alone.
"""
from __future__ import annotations

import errno
import re
from pathlib import Path
from typing import Any

from fastsim.errors import ConfigError
from fastsim.io import JSONError, parquet_metadata
from fastsim.sweep.grid import clipped, grid_hash
from fastsim.sweep.aggregate import DESCRIPTIVE_AXES, FIXED_COLUMNS
from fastsim.sweep.store import (CHUNK_SLACK_BYTES, FORMAT_VERSION, GRID_KEY, KINDS,
                                 MANIFEST, MANIFEST_MAX_BYTES, RECORD_MAX_BYTES, TABLES,
                                 _code_ok, _file_error, _read_json, _tables_ok, cell_dir,
                                 check_format_readable, files_listed, max_chunk_bytes,
                                 read_sweep_table)

_HASH = re.compile(r"[0-9a-f]{64}")
# the last of cell_table's columns before the axes'; the descriptive axes the sweep does
# not vary follow its own
_LAST_FIXED = FIXED_COLUMNS[-1]


def verify_finished(root: Path, allowed: str) -> dict[str, Any]:
    """The manifest of the finished sweep in ``root``, once it and the results it lists
    are verified (the module docstring); else a ``ConfigError`` naming the file and what
    is wrong, ``allowed`` saying what to run.  About 1 ms a chunk (its record read, its
    files hashed): ``finished_manifest`` for a reader that has verified it already."""
    m = finished_manifest(root, allowed)
    _check_chunks(Path(root), m, allowed)
    return m


def finished_manifest(root: Path, allowed: str) -> dict[str, Any]:
    """``verify_finished`` but for the chunks: the manifest against itself and the tables."""
    root = Path(root)
    path = root / MANIFEST

    def damaged(why: str) -> ConfigError:
        return ConfigError(f"{path}: damaged ({why}); allowed: {allowed}")

    try:  # not a regular file (a named pipe would block the read), or huge: read no further
        m = _read_json(path, MANIFEST_MAX_BYTES)
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise damaged(f"{why}, which no sweep's manifest is"
                      if exc.errno == errno.EFBIG else why) from None
    except ValueError as exc:  # a JSONError (fastsim.io.loads_json): said in its words
        raise damaged(f"not valid JSON: {exc}" if isinstance(exc, JSONError)
                      else type(exc).__name__) from None
    check_format_readable(path, m, "or run the sweep again with this one")
    why = _field_error(m)
    if why is None:
        why = _grid_error(m)
    if why is not None:
        raise damaged(why)
    _check_cell_table(root, m, allowed, damaged)
    return m


def _field_error(m: Any) -> str | None:
    """Which field of manifest ``m`` is not of the type ``SweepStore.manifest`` writes."""
    if not isinstance(m, dict):
        return "not a JSON object"
    fmt, grid = m.get("format", 1), m.get("grid")
    cells = grid.get("cells") if isinstance(grid, dict) else None
    checks = (
        ("format", type(fmt) is int and 1 <= fmt <= FORMAT_VERSION,
         f"an integer 1 to {FORMAT_VERSION}"),
        ("name", isinstance(m.get("name"), str), "text"),
        ("grid_hash", isinstance(m.get("grid_hash"), str)
         and _HASH.fullmatch(m["grid_hash"]) is not None, "64 hexadecimal digits"),
        ("axes", isinstance(m.get("axes"), list)
         and all(isinstance(a, str) for a in m["axes"]), "a list of field names"),
        ("cells", isinstance(m.get("cells"), list) and all(
            isinstance(c, dict) and isinstance(c.get("id"), str)
            and isinstance(c.get("label"), str) and _is_baseline_id(c.get("baseline"))
            for c in m["cells"]), "a list of {id, label, baseline}"),
        ("grid", isinstance(cells, list) and all(
            isinstance(c, dict) and isinstance(c.get("id"), str)
            and _is_baseline_id(c.get("baseline")) and isinstance(c.get("config"), dict)
            and isinstance(c["config"].get("workload"), dict) for c in cells)
         and all(type(grid.get(k)) is int and grid[k] >= 1 for k in ("clusters", "chunk")),
         "clusters, chunk, seed and a list of cells with their configs"),
        ("code", "code" not in m or _code_ok(m["code"]), "fastsim's version and sources"),
        (TABLES, TABLES not in m or _tables_ok(m[TABLES]), "a SHA-256 and size per table"))
    for name, ok, allowed in checks:
        if not ok:
            shown = f", {clipped(repr(m[name]))}," if name in ("format", "grid_hash") \
                and name in m else ""
            return f"its {name} field{shown} is not {allowed}"
    return None


def _is_baseline_id(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _grid_error(m: dict) -> str | None:
    """Whether the manifest's grid is the one its hash names, its cells that grid's."""
    if grid_hash(m["grid"]) != m["grid_hash"]:
        return (f"its grid is not the one its grid_hash, {m['grid_hash'][:12]}, is of: "
                "edited since the sweep ran")
    listed = [(c["id"], c["baseline"]) for c in m["cells"]]
    if sorted(listed) != sorted((c["id"], c["baseline"]) for c in m["grid"]["cells"]) \
            or len(set(listed)) != len(listed):
        return "its cells are not its grid's cells (their ids and baselines)"
    return None


def _check_cell_table(root: Path, m: dict, allowed: str, damaged) -> None:
    """The manifest's cells (ids, labels in order) and axes against ``cells.parquet``
    (``aggregate.cell_table``), which aggregation wrote from the grid; and every workload
    field the cells differ in among the axes (none varies otherwise)."""
    axes = m["axes"]
    workloads = [c["config"]["workload"] for c in m["grid"]["cells"]]
    for field in sorted({f for w in workloads for f in w}):
        if field not in axes and len({repr(w.get(field)) for w in workloads}) > 1:
            raise damaged(f"its axes field leaves out {field}, which its cells differ in")
    path = root / "cells.parquet"
    if not path.is_file():
        return  # an older fastsim's sweep, aggregated without it: its summary is checked
    table = read_sweep_table(path, allowed)
    if parquet_metadata(path).get(GRID_KEY) not in (None, m["grid_hash"]):
        raise ConfigError(f"{path}: damaged (of another grid than the manifest beside it); "
                          f"allowed: {allowed}")
    if table["cell"].to_list() != [c["id"] for c in m["cells"]] or \
            table["label"].to_list() != [c["label"] for c in m["cells"]]:
        raise damaged(f"its cells are not those of {path.name} (their ids and labels)")
    columns = table.columns
    tail = columns[columns.index(_LAST_FIXED) + 1:] if _LAST_FIXED in columns else None
    own = [a for a in axes if a not in ("scheduler", "policy")]
    if tail is not None and tail != own + [a for a in DESCRIPTIVE_AXES if a not in axes]:
        raise damaged(f"its axes field, {clipped(repr(axes))}, is not the axes of "
                      f"{path.name} (its columns {', '.join(tail)})")


def _check_chunks(root: Path, m: dict, allowed: str) -> None:
    """Every chunk of every cell: its record names this grid, cell, chunk and code, and
    its files are the bytes and rows it lists (``store._file_error``, resume's check)."""
    if not (root / "cells").exists():
        return  # deleted once aggregated: the tables are the results
    grid = m["grid"]
    n_chunks = -(-grid["clusters"] // grid["chunk"])
    for cell in grid["cells"]:
        limit = _chunk_limit(cell["config"]["workload"], grid["chunk"])
        for index in range(n_chunks):
            why = _chunk_error(root, m, cell["id"], index, limit)
            if why is not None:
                raise ConfigError(f"{why}; allowed: {allowed}")


def _chunk_error(root: Path, m: dict, cell_id: str, index: int, limit: int) -> str | None:
    """Why chunk ``index`` of a cell is not the one ``m`` names, else None."""
    record = cell_dir(root, cell_id) / f"chunk-{index:04d}.json"
    try:
        rec = _read_json(record, RECORD_MAX_BYTES)
    except (OSError, ValueError) as exc:
        return f"{record}: {exc.strerror if isinstance(exc, OSError) else exc}"
    if not (isinstance(rec, dict) and rec.get("grid_hash") == m["grid_hash"]
            and rec.get("cell") == cell_id and rec.get("index") == index
            and rec.get("code") == m.get("code") and files_listed(rec)):
        return (f"{record}: damaged (not the record of chunk {index} of cell {cell_id} of "
                "this grid and code, listing each file's SHA-256 and rows)")
    files = rec["files"]
    for kind in KINDS:
        name = f"{kind}-{index:04d}.parquet"
        if name not in files:
            if kind == "jobs":
                continue  # per-job records: only with --keep-jobs
            return f"{record}: damaged (does not list {name})"
        why = _file_error(cell_dir(root, cell_id) / name, files[name], limit)
        if why is not None:
            return why
    return None


def _chunk_limit(workload: dict, chunk: int) -> int:
    """The most bytes a chunk's file holds: ``max_chunk_bytes`` of the cell's workload."""
    n_jobs, n_evals = workload.get("n_jobs"), workload.get("n_evals")
    if not (type(n_jobs) is int and type(n_evals) is int and n_jobs > 0 and n_evals > 0):
        return CHUNK_SLACK_BYTES  # no such workload has a chunk: none is read in full
    return max_chunk_bytes(chunk, n_jobs, n_evals)
