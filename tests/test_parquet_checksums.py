"""Every Parquet file fastsim writes carries page checksums, and every one it reads back is
verified: a flipped byte inside a data page is one line naming the file (exit 2, or a
``ConfigError``), never other numbers.  polars neither writes nor checks them, so such a
byte was read back silently as long as the page still decompressed."""
from __future__ import annotations

import hashlib
import io
import json
import os
import re
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from polars.testing import assert_frame_equal

from conftest import one_line
from conftest import small_sweep
from fastsim.cli import main
from fastsim.errors import ConfigError
from fastsim.io import PAGE_CHECKSUMS_KEY, read_parquet_table, write_parquet
from fastsim.sweep.aggregate import read_summary
from fastsim.sweep.grid import load_sweep
from fastsim.sweep.store import GRID_KEY, TABLES, SweepStore

SWEEP = small_sweep(4)  # two chunks a cell
PAGE = "a page fails its checksum"
RERUN = re.escape("run the sweep again (same command; into a new --out directory if the code "
                  "changed since)")


def flip_in_data_page(path: Path, column: int = 0) -> None:
    """Flip one byte of a data page's body, found from the footer: the last byte of a
    column chunk is the end of its last data page, past every page header (a byte of a
    header, its statistics say, is not what the page checksum covers)."""
    path.write_bytes(flipped_in_data_page(path.read_bytes(), column))


def flipped_in_data_page(data: bytes, column: int = 0) -> bytes:
    """A Parquet file's bytes with one byte of a data page's body flipped
    (``flip_in_data_page``)."""
    meta = pq.ParquetFile(io.BytesIO(data)).metadata.row_group(0).column(column)
    first = min(o for o in (meta.dictionary_page_offset, meta.data_page_offset) if o is not None)
    data = bytearray(data)
    data[first + meta.total_compressed_size - 1] ^= 0x01
    return bytes(data)


def without_checksums(path: Path) -> None:
    """Rewrite a table as an older fastsim did (polars' writer: no page checksums, no
    flag), keeping its other metadata (the grid hash)."""
    table = pq.read_table(path)
    meta = {k: v for k, v in (table.schema.metadata or {}).items()
            if k != PAGE_CHECKSUMS_KEY.encode()}
    pq.write_table(table.replace_schema_metadata(meta), path, compression="zstd")


def older_manifest(out: Path) -> None:
    """The manifest as a fastsim from before the aggregated tables were hashed wrote it."""
    m = json.loads((out / "sweep.json").read_text())
    del m[TABLES]
    (out / "sweep.json").write_text(json.dumps(m))


def flip_in_footer(path: Path) -> None:
    """Flip a byte of the footer's name of the writer: the file still parses and its pages
    pass their checksums, which do not cover the footer."""
    data = bytearray(path.read_bytes())
    data[data.rfind(b"parquet-cpp-arrow")] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.fixture
def swept(tmp_path):
    """A finished sweep directory."""
    p = tmp_path / "s.toml"
    p.write_text(SWEEP)
    out = tmp_path / "out"
    assert main(["sweep", str(p), "--out", str(out), "--no-progress"]) == 0
    return p, out


def _rehash(record: Path, chunk: Path) -> None:
    """The chunk's record made to vouch for its present bytes: what the SHA-256 cannot
    catch (bytes damaged before they were hashed, or a record rewritten to match)."""
    rec = json.loads(record.read_text())
    rec["files"][chunk.name]["sha256"] = hashlib.sha256(chunk.read_bytes()).hexdigest()
    record.write_text(json.dumps(rec))


def test_every_table_a_sweep_writes_carries_the_flag(swept):
    _, out = swept
    tables = [*out.glob("cells/*/*.parquet"), *out.glob("*.parquet")]
    assert len(tables) == 2 * 2 * 2 + 3  # 2 cells (and baseline) x 2 chunks x (chunk, jct) + 3
    for t in tables:
        assert pq.read_schema(t).metadata[PAGE_CHECKSUMS_KEY.encode()] == b"1", t


def test_a_damaged_page_of_a_sweep_chunk_is_one_line(swept, capsys):
    """(a) The record's SHA-256 catches it first (the chunk is re-run: test_sweep_integrity);
    with a record that vouches for the damaged bytes, the page checksum refuses it when
    the chunk is aggregated, and says how to have it recomputed."""
    p, out = swept
    chunk = next(out.glob("cells/*/chunk-0001.parquet"))
    good = chunk.read_bytes()
    flip_in_data_page(chunk, column=1)
    record = chunk.with_suffix(".json")
    _rehash(record, chunk)
    capsys.readouterr()
    assert main(["sweep", str(p), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()  # after the line saying what resumed
    assert err[-1].endswith(f"{chunk}: damaged ({PAGE}), though its record's SHA-256 matches; "
                            f"remove {record} and re-run the sweep (same command) to "
                            "recompute it"), err
    assert len(err) == 2 and "Traceback" not in "".join(err)
    store = SweepStore(out, load_sweep(p))
    with pytest.raises(ConfigError, match=PAGE):
        store.read_chunk(chunk.parent.name.removeprefix("cell="), 1)
    record.unlink()  # as the message says: the chunk is recomputed, bit for bit
    assert main(["sweep", str(p), "--out", str(out), "--no-progress"]) == 0
    assert chunk.read_bytes() == good


def test_a_chunk_damaged_as_it_is_encoded_is_never_recorded(swept, monkeypatch):
    """Bytes damaged after pyarrow encoded them and before their SHA-256 was taken (memory,
    an encoder's fault) were vouched for by the record, and resume kept the chunk; now the
    bytes are read back and compared with the frame first, and the write refused: no
    record, so the chunk is still to run."""
    p, out = swept
    store = SweepStore.open(out, load_sweep(p))
    cell = store.grid.cells[0].id
    frames = [pl.read_parquet(store.path(cell, k, 1)) for k in ("chunk", "jct")]
    store.record_path(cell, 1).unlink()  # the chunk to run
    real = write_parquet

    def damaging(df, target, metadata=None):
        real(df, target, metadata)
        if isinstance(target, io.BytesIO):  # the chunk's bytes, before they are hashed
            data = flipped_in_data_page(target.getvalue(), column=1)
            target.seek(0)
            target.write(data)

    monkeypatch.setattr("fastsim.io.write_parquet", damaging)
    with pytest.raises(ConfigError) as exc:
        store.write_chunk(cell, 1, *frames)
    assert str(exc.value) == (f"cannot write {store.path(cell, 'jct', 1)} (its encoding fails "
                              f"verification: {PAGE})")
    assert store.check(cell, 1) == "missing"
    monkeypatch.undo()
    store.write_chunk(cell, 1, *frames)
    assert store.is_done(cell, 1)
    store.close()


def test_a_damaged_page_of_summary_parquet_is_one_line(swept, capsys):
    """(b) ``fastsim figures`` before it draws anything, and ``read_summary``."""
    _, out = swept
    older_manifest(out)  # else the manifest's SHA-256 refuses it first (tests below)
    summary = out / "summary.parquet"
    flip_in_data_page(summary, column=len(pq.read_schema(summary)) - 1)
    capsys.readouterr()
    one_line(capsys, ["figures", str(out), "--formats", "png"],
             f"{summary}: damaged ({PAGE})")
    assert not (out / "figures").exists()
    with pytest.raises(ConfigError, match=f"summary.parquet: damaged \\({PAGE}\\)"):
        read_summary(out)


AGGREGATED = ("cells.parquet", "jct_hist.parquet", "summary.txt", "summary.parquet")
SHA = "its SHA-256 is not the one sweep.json records"


def test_aggregation_records_each_files_sha256_in_the_manifest(swept):
    _, out = swept
    tables = json.loads((out / "sweep.json").read_text())[TABLES]
    assert sorted(tables) == sorted(AGGREGATED)
    for name in AGGREGATED:
        assert tables[name]["sha256"] == hashlib.sha256((out / name).read_bytes()).hexdigest()


def test_a_huge_file_at_a_tables_name_is_not_read_into_memory(swept, capsys):
    """A table was read whole to be hashed: a 1 GiB file at summary.parquet (sparse here)
    took its size in memory in `fastsim figures`.  The manifest records each table's size,
    and a reader reads no further."""
    import tracemalloc

    _, out = swept
    size = (out / "summary.parquet").stat().st_size
    assert json.loads((out / "sweep.json").read_text())[TABLES]["summary.parquet"][
        "bytes"] == size
    with open(out / "summary.parquet", "r+b") as fh:
        fh.truncate(1 << 30)
    capsys.readouterr()
    tracemalloc.start()
    try:
        one_line(capsys, ["figures", str(out), "--formats", "png"],
                 f"summary.parquet: damaged (larger than the {size} bytes sweep.json records)")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, peak


@pytest.mark.parametrize("table", ["summary.parquet", "jct_hist.parquet"])
def test_a_flip_in_a_tables_footer_that_still_parses_is_one_line(swept, capsys, table):
    """The page checksums do not cover the footer: such a table was read as it was."""
    _, out = swept
    path = out / table
    flip_in_footer(path)
    pq.read_table(path, page_checksum_verification=True)  # parses, its pages pass
    capsys.readouterr()
    one_line(capsys, ["figures", str(out), "--formats", "png"],
             f"{path}: damaged ({SHA}); allowed: the sweep's own output (run `fastsim sweep "
             "FILE --out DIR` again: it verifies its chunks and rewrites the tables)")
    assert not (out / "figures").exists()
    if table == "summary.parquet":  # fastsim reproduce's report, frontier, fastsim.sweep
        with pytest.raises(ConfigError, match=f"summary.parquet: damaged \\({SHA}\\); "
                           f"allowed: .*{RERUN}"):
            read_summary(out)


def test_an_older_directorys_tables_are_read_unhashed_until_the_sweep_runs_again(swept,
                                                                                  capsys):
    """As before tables were hashed (page checksums only); the sweep run again (same
    command) aggregates again and records them from then on."""
    p, out = swept
    older_manifest(out)
    before = read_summary(out)
    flip_in_footer(out / "summary.parquet")
    assert_frame_equal(read_summary(out), before)  # unnoticed, as it was
    assert main(["sweep", str(p), "--out", str(out), "--no-progress"]) == 0
    assert sorted(json.loads((out / "sweep.json").read_text())[TABLES]) == sorted(AGGREGATED)
    flip_in_footer(out / "summary.parquet")
    with pytest.raises(ConfigError, match=SHA):
        read_summary(out)


def test_a_rebuilt_manifest_vouches_for_no_table_until_aggregated(swept, capsys):
    """A deleted manifest is rebuilt from the chunk records, which say nothing of the
    tables: they are refused until the sweep, run again, aggregates; a manifest rewritten
    for its name keeps the tables' hashes, which are still this grid's."""
    p, out = swept
    m = json.loads((out / "sweep.json").read_text())
    (out / "sweep.json").write_text(json.dumps({**m, "name": "renamed"}))
    SweepStore.open(out, load_sweep(p)).close()
    assert json.loads((out / "sweep.json").read_text())[TABLES] == m[TABLES]
    read_summary(out)
    (out / "sweep.json").unlink()
    SweepStore.open(out, load_sweep(p)).close()
    with pytest.raises(ConfigError, match="sweep.json records no SHA-256 for it"):
        read_summary(out)
    assert main(["sweep", str(p), "--out", str(out), "--no-progress"]) == 0
    read_summary(out)


def test_a_damaged_page_of_a_run_output_is_refused_when_read(tmp_path, capsys):
    """(c) ``fastsim run --out``: the same numbers read back, and a damaged page refused."""
    out = tmp_path / "x.parquet"
    assert main(["run", "--clusters", "3", "--n-jobs", "5", "--out", str(out)]) == 0
    assert pq.read_schema(out).metadata[PAGE_CHECKSUMS_KEY.encode()] == b"1"
    assert_frame_equal(read_parquet_table(out, "a run's table"), pl.read_parquet(out),
                       check_exact=True)
    flip_in_data_page(out, column=0)
    with pytest.raises(ConfigError) as exc:
        read_parquet_table(out, "a run's table")
    assert str(exc.value).startswith(f"{out}: damaged ({PAGE}); allowed: a run's table")
    assert len(str(exc.value).splitlines()) == 1


def test_a_replay_log_is_verified_if_it_has_checksums(tmp_path, capsys):
    """(d) A user's log: without checksums (another program's) it is read as before; with
    them, a damaged page is one line."""
    log = pl.DataFrame({"job_id": ["a"] * 6 + ["b"] * 6, "step": list(range(1, 7)) * 2,
                        "score": [0.1, 0.3, 0.5, 0.6, 0.55, 0.5, 0.2, 0.4, 0.5, 0.52, 0.53, 0.5]})
    plain, checked = tmp_path / "plain.parquet", tmp_path / "checked.parquet"
    log.write_parquet(plain)
    write_parquet(log, checked)
    assert main(["replay", str(plain)]) == 0
    assert main(["replay", str(checked)]) == 0
    capsys.readouterr()
    flip_in_data_page(checked, column=2)
    one_line(capsys, ["replay", str(checked)], f"{checked}: damaged ({PAGE})")


def test_a_sweep_chunk_without_checksums_is_rerun_or_refused(swept, capsys):
    """An older fastsim's chunk (no flag): the same command rewrites it, identical but for
    the checksums; read without that (the store's own reader) it is refused with the hint."""
    p, out = swept
    chunk = next(out.glob("cells/*/chunk-0000.parquet"))
    before = chunk.read_bytes()
    without_checksums(chunk)
    _rehash(chunk.with_suffix(".json"), chunk)
    store = SweepStore(out, load_sweep(p))
    with pytest.raises(ConfigError, match=f"{re.escape(str(chunk))}: has no page checksums.*{RERUN}"):
        store.read_chunk(chunk.parent.name.removeprefix("cell="), 0)
    capsys.readouterr()
    assert main(["sweep", str(p), "--out", str(out), "--no-progress"]) == 0
    assert f"{chunk}: has no page checksums" in capsys.readouterr().err
    assert chunk.read_bytes() == before


def test_a_summary_without_checksums_is_refused_with_the_hint(swept, capsys):
    _, out = swept
    older_manifest(out)  # as an older fastsim left it: tables unhashed, pages unchecked
    summary = out / "summary.parquet"
    without_checksums(summary)
    assert GRID_KEY.encode() in pq.read_schema(summary).metadata  # only the flag is gone
    capsys.readouterr()
    one_line(capsys, ["figures", str(out), "--formats", "png"],
             f"{summary}: has no page checksums")
    with pytest.raises(ConfigError, match=RERUN):
        read_summary(out)


@pytest.mark.parametrize("damage, reason", [
    (lambda b: b[: len(b) // 2], "not a readable Parquet table (Parquet magic bytes"),
    (lambda b: b"not parquet at all", "not a readable Parquet table"),
    (lambda b: b"", "not a readable Parquet table"),
])
def test_truncated_or_not_parquet_is_one_line_naming_the_file(damage, reason):
    buf = io.BytesIO()
    write_parquet(pl.DataFrame({"x": [1.5, 2.5]}), buf)
    with pytest.raises(ConfigError) as exc:
        read_parquet_table(damage(buf.getvalue()), "a table", name=Path("t.parquet"))
    assert str(exc.value).startswith(f"t.parquet: {reason}")
    assert len(str(exc.value).splitlines()) == 1


def test_an_ordinary_round_trip_is_identical_and_deterministic(tmp_path):
    """Every type fastsim's tables hold, nulls and an empty table included; the bytes are
    the same on every write (no time stamp: a rewritten chunk is bit-identical)."""
    df = pl.DataFrame({
        "f": [0.1, float("inf"), float("nan"), None], "i": [1, -2, None, 2**62],
        "u": pl.Series([0, 1, 255, 7], dtype=pl.UInt8), "b": [True, False, None, True],
        "s": ["a", None, "ü", ""], "n": pl.Series([None] * 4, dtype=pl.Null),
        "i32": pl.Series([1, 2, 3, None], dtype=pl.Int32)})
    for frame in (df, df.clear()):
        a, b = io.BytesIO(), io.BytesIO()
        write_parquet(frame, a, {GRID_KEY: "h"})
        write_parquet(frame, b, {GRID_KEY: "h"})
        assert a.getvalue() == b.getvalue()
        back = read_parquet_table(a.getvalue(), "t", name=Path("t"), require_page_checksums=True)
        assert_frame_equal(back, frame, check_exact=True)
        assert pl.read_parquet(io.BytesIO(a.getvalue())).equals(frame)  # polars reads it too
        meta = pq.ParquetFile(pa.BufferReader(a.getvalue())).schema_arrow.metadata
        assert meta[GRID_KEY.encode()] == b"h" and meta[PAGE_CHECKSUMS_KEY.encode()] == b"1"


def test_a_table_is_never_read_beside_the_manifest_of_another_aggregation(swept):
    """Aggregation renames its tables, then the manifest with their SHA-256, holding the
    directory's lock for renames (``fastsim.io._renaming_in``); a reader between two of
    those renames (fastsim figures --out elsewhere during a re-run) read a new table
    beside the old manifest and called it damaged.  It reads both once the renames are
    done: here, a writer holds the lock, swaps a table and its hash, then lets go."""
    import fcntl
    import threading

    _, out = swept
    summary, manifest = out / "summary.parquet", out / "sweep.json"
    got: list = []
    fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        reader = threading.Thread(target=lambda: got.append(_read_or_error(out)))
        reader.start()
        reader.join(timeout=0.5)
        assert reader.is_alive()  # waits for the renames
        flip_in_footer(summary)  # another aggregation's table (it still parses) ...
        m = json.loads(manifest.read_text())  # ... and its manifest, renamed after it
        m[TABLES]["summary.parquet"]["sha256"] = hashlib.sha256(summary.read_bytes()).hexdigest()
        manifest.write_text(json.dumps(m))
    finally:
        os.close(fd)
    reader.join(timeout=30)
    assert len(got) == 1 and isinstance(got[0], pl.DataFrame), got


def _read_or_error(out: Path):
    try:
        return read_summary(out)
    except ConfigError as exc:
        return exc


def test_a_table_is_decoded_on_one_thread(tmp_path, monkeypatch):
    """pyarrow's thread pool, once a read started it in a process that had loaded polars
    first (every fastsim process), aborted the process at exit in 7 of 40 runs of
    ``read_summary`` ("terminate called without an active exception", exit 134, after the
    work was done; apache/arrow#34314); reading on one thread, 0 of 100."""
    import pyarrow.parquet as pq

    from fastsim.io import atomic_write_parquet, read_parquet_table

    path = tmp_path / "t.parquet"
    atomic_write_parquet(pl.DataFrame({"a": [1, 2]}), path)
    calls, read = [], pq.ParquetFile.read
    monkeypatch.setattr(pq.ParquetFile, "read",
                        lambda self, *a, **kw: calls.append(kw) or read(self, *a, **kw))
    for source in (path, path.read_bytes()):
        assert read_parquet_table(source, "a table", name=path)["a"].to_list() == [1, 2]
    assert [kw.get("use_threads", True) for kw in calls] == [False, False]


def _not_utf8(table: pa.Table, text: bytes) -> bytes:
    """``table`` as Parquet (uncompressed, no checksums: another tool's) with ``text``
    made invalid UTF-8 wherever it is, its page data or its footer."""
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="none", use_dictionary=False)
    return buf.getvalue().replace(text, text[:-1] + b"\xff")


def test_a_parquet_log_with_a_string_that_is_not_utf8_is_one_line(tmp_path, capsys):
    """A Parquet log whose job ids are not UTF-8 (a tool that does not check, or a byte
    flipped in a page without checksums) made polars panic as replay grouped its jobs:
    a PanicException traceback, which is no ``Exception`` and passed every refusal."""
    log = tmp_path / "evals.parquet"
    log.write_bytes(_not_utf8(pa.table({"job_id": ["jobA"] * 4, "step": [1, 2, 3, 4],
                                        "score": [0.5, 0.6, 0.5, 0.4]}), b"jobA"))
    one_line(capsys, ["replay", str(log)],
             f"{log}: not a readable Parquet table (Column 0: In chunk 0: Invalid: Invalid UTF8")


def test_a_table_whose_metadata_is_not_utf8_is_one_line():
    """A flipped bit in a footer's key-value metadata (fastsim's own key) made polars
    panic converting the table (a traceback from ``fastsim figures``'s extracts)."""
    table = pa.table({"x": [1.5]}).replace_schema_metadata({b"fastsim.key": b"1"})
    with pytest.raises(ConfigError, match=r"^t.parquet: not a readable Parquet table "
                                          r"\(metadata that is not UTF-8 \(b'fastsim.ke\\xff'\)\)"):
        read_parquet_table(_not_utf8(table, b"fastsim.key"), "a table", name=Path("t.parquet"))


def test_a_row_count_flipped_in_the_footer_never_drops_rows_unsaid():
    """A row group's row count is in the footer, which no page checksum covers, and
    pyarrow reads that many rows: a bit flipped there read an extract's 624 trajectory
    points as 560, without a word.  Every place the count is written, flipped, is refused
    or read whole."""
    buf = io.BytesIO()
    df = pl.DataFrame({"u": [i / 7 for i in range(624)], "role": ["a"] * 624})
    write_parquet(df, buf)
    data = buf.getvalue()
    count = b"\x16\xe0\x09"  # a thrift i64 field of 624 (zigzag varint 0xe0 0x09)
    places = [i for i in range(len(data)) if data.startswith(count, i)]
    refused = 0
    for i in places:
        flipped = bytearray(data)
        flipped[i + 2] ^= 0x01  # 624 -> 560
        try:
            got = read_parquet_table(bytes(flipped), "a table", name=Path("t.parquet"))
        except ConfigError as exc:
            assert str(exc).startswith("t.parquet: not a readable Parquet table"), exc
            refused += 1
            continue
        assert_frame_equal(got, df)
    assert places and refused, places
