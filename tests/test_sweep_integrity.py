"""Sweep directories under concurrency and damage: one owner at a time (an OS lock that
names its holder), chunks verified by checksum on resume and aggregation, a damaged chunk
re-run (and said so), nothing derived from an incomplete set."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal as _assert_frame_equal

from conftest import held_elsewhere, small_sweep
from fastsim.cli import main
from fastsim.errors import ConfigError
from fastsim.io import atomic_write_bytes
from fastsim.sweep.aggregate import aggregate
from fastsim.sweep.grid import load_sweep
from fastsim.sweep.store import SweepStore


def assert_frame_equal(left, right):
    """Bit for bit: polars' own default passes floats that differ by 1e-5 relative."""
    _assert_frame_equal(left, right, check_exact=True)


SWEEP = small_sweep(6)  # three chunks a cell
DERIVED = ("summary.parquet", "cells.parquet", "jct_hist.parquet", "summary.txt")
ENV = {**os.environ, "FASTSIM_PROGRESS": "0"}


@pytest.fixture
def sweep_file(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text(SWEEP)
    return p


def sweep(path, out, *extra):
    return main(["sweep", str(path), "--out", str(out), "--no-progress", *extra])


def spawn(path, out, *extra):
    return subprocess.Popen([sys.executable, "-m", "fastsim.cli", "sweep", str(path), "--out",
                             str(out), "--no-progress", *extra], env=ENV, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def assert_same(a: Path, b: Path):
    files = sorted(p.relative_to(a) for p in a.glob("cells/*/*.parquet"))
    assert files == sorted(p.relative_to(b) for p in b.glob("cells/*/*.parquet"))
    for rel in files:
        assert (a / rel).read_bytes() == (b / rel).read_bytes()
    for name in DERIVED[:3]:
        assert_frame_equal(pl.read_parquet(a / name), pl.read_parquet(b / name))


# -- 1. two sweeps into one directory -------------------------------------------------------
def test_1_a_held_directory_is_refused_naming_the_holder(sweep_file, tmp_path):
    out = tmp_path / "out"
    store = SweepStore.open(out, load_sweep(sweep_file))  # this process holds the lock
    r = subprocess.run([sys.executable, "-m", "fastsim.cli", "sweep", str(sweep_file), "--out",
                        str(out), "--no-progress"], env=ENV, capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    assert f"is in use by pid {os.getpid()}" in r.stderr and "Traceback" not in r.stderr
    assert not list(out.glob("cells/*/*"))
    store.close()
    del store
    assert (out / "sweep.lock").read_text() == ""  # a released lock names nobody
    assert sweep(sweep_file, out) == 0  # released: the same command now runs
    assert (out / "sweep.lock").read_text() == ""


def test_1_concurrent_sweeps_never_mix(sweep_file, tmp_path):
    """Two sweeps with different seeds started at once into one directory: never both
    succeed, and the directory ends holding exactly the winner's results."""
    ref1, ref2 = tmp_path / "ref1", tmp_path / "ref2"
    assert sweep(sweep_file, ref1, "--seed", "1") == 0
    assert sweep(sweep_file, ref2, "--seed", "2") == 0
    out = tmp_path / "out"
    procs = [spawn(sweep_file, out, "--seed", s) for s in ("1", "2")]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    codes = [rc for rc, _ in results]
    assert sorted(codes) == [0, 2], results
    loser = results[codes.index(2)][1]
    assert "is in use by pid" in loser or "different grid" in loser
    assert "Traceback" not in loser
    assert_same(ref1 if codes[0] == 0 else ref2, out)


def test_1_a_refusal_in_the_holders_first_instant_still_names_it(tmp_path, monkeypatch):
    """The holder writes its line just after taking the lock; a process refused in that
    gap used to say "another process" (CI saw it once).  It now waits for the line."""
    import fcntl
    import types

    from fastsim.sweep import store as store_module
    from fastsim.sweep.store import LOCK, DirLock

    fh = open(tmp_path / LOCK, "a+")
    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # held, line not yet written
    # The line is written only once the refused side has found the file empty and waits:
    # the gap is exercised on every run, however the two threads are scheduled.
    refused_saw_empty = threading.Event()

    def sleep(seconds):
        refused_saw_empty.set()
        time.sleep(seconds)

    monkeypatch.setattr(store_module, "time", types.SimpleNamespace(
        monotonic=time.monotonic, strftime=time.strftime, sleep=sleep))

    def write_line_late():
        if refused_saw_empty.wait(timeout=60):
            fh.write("pid 4242 on host since now (fastsim sweep)\n")
            fh.flush()

    writer = threading.Thread(target=write_line_late, daemon=True)
    writer.start()
    try:
        with pytest.raises(ConfigError, match="is in use by pid 4242"):
            DirLock.acquire(tmp_path)
    finally:
        refused_saw_empty.set()  # never leave the writer waiting
        writer.join()
        fh.close()


def test_1_writers_of_one_file_never_share_a_temporary(tmp_path):
    """Identical sweeps used to crash on one shared ``NAME.tmp``; each writer has its own."""
    target = tmp_path / "f.bin"
    errors = []

    def write(i):
        try:
            for _ in range(50):
                atomic_write_bytes(target, bytes([i]) * 10_000)
        except Exception as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(set(target.read_bytes())) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["f.bin"]


# -- 6. damaged chunks ----------------------------------------------------------------------
def _damage(path: Path, how: str):
    if how == "flip":
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    elif how == "truncate":
        path.write_bytes(path.read_bytes()[:50])
    elif how == "empty":
        path.write_bytes(b"")
    else:
        path.unlink()


@pytest.mark.parametrize("kind,how", [("chunk", "flip"), ("chunk", "truncate"),
                                      ("chunk", "empty"), ("jct", "delete"), ("jct", "flip")])
def test_6_damaged_chunks_are_refused_then_rerun(sweep_file, tmp_path, capsys, kind, how):
    ref, out = tmp_path / "ref", tmp_path / "out"
    assert sweep(sweep_file, ref) == 0
    assert sweep(sweep_file, out) == 0
    capsys.readouterr()
    victim = sorted(out.glob(f"cells/*/{kind}-0001.parquet"))[0]
    _damage(victim, how)
    for name in DERIVED:
        (out / name).unlink()
    grid = load_sweep(sweep_file)
    with SweepStore.open(out, grid) as store:
        with pytest.raises(ConfigError, match=rf"{victim.name}"):
            aggregate(store)
    assert not any((out / name).exists() for name in DERIVED)  # nothing from a partial set
    assert sweep(sweep_file, out) == 0
    err = capsys.readouterr().err
    assert "re-running 1 chunk(s) that failed verification" in err and victim.name in err
    assert_same(ref, out)


def test_6_the_first_damaged_cell_in_grid_order_is_named(sweep_file, tmp_path, monkeypatch):
    """Cells aggregate side by side, yet the error is the same on every run: that of the
    first damaged cell in grid order, and nothing is written."""
    out = tmp_path / "out"
    assert sweep(sweep_file, out) == 0
    for name in DERIVED:
        (out / name).unlink()
    grid = load_sweep(sweep_file)
    first, second = (SweepStore(out, grid).path(c.id, "chunk", 2) for c in grid.cells[:2])
    _damage(first, "flip")
    _damage(second, "truncate")
    monkeypatch.setattr("fastsim.sweep.aggregate.numba.get_num_threads", lambda: 2)
    with SweepStore.open(out, grid) as store:
        with pytest.raises(ConfigError, match=rf"cell={grid.cells[0].id}/{first.name}: checksum"):
            aggregate(store)
    assert not any((out / name).exists() for name in DERIVED)


def test_6_chunks_of_another_grid_do_not_count(sweep_file, tmp_path, capsys):
    """Chunk files copied in from a sweep with another seed fail their records' grid."""
    a, b = tmp_path / "a", tmp_path / "b"
    assert sweep(sweep_file, a, "--seed", "1") == 0
    assert sweep(sweep_file, b, "--seed", "2") == 0
    for src in a.glob("cells/*/*"):
        (b / src.relative_to(a)).write_bytes(src.read_bytes())
    capsys.readouterr()
    assert sweep(sweep_file, b, "--seed", "2") == 0
    assert "failed verification" in capsys.readouterr().err
    ref = tmp_path / "ref"
    assert sweep(sweep_file, ref, "--seed", "2") == 0
    assert_same(ref, b)


@pytest.mark.parametrize("edit", ["rows", "entry"])
def test_6_an_edited_chunk_record_is_rerun(sweep_file, tmp_path, capsys, edit):
    """A record whose row count no longer matches its file re-ran forever (the check read
    only the checksum, aggregation the rows); one whose entry is not an object crashed."""
    import json

    ref, out = tmp_path / "ref", tmp_path / "out"
    assert sweep(sweep_file, ref) == 0
    assert sweep(sweep_file, out) == 0
    record = sorted(out.glob("cells/*/chunk-0001.json"))[0]
    rec = json.loads(record.read_text())
    if edit == "rows":
        rec["files"]["chunk-0001.parquet"]["rows"] -= 1
    else:
        rec["files"]["chunk-0001.parquet"] = "x"
    record.write_text(json.dumps(rec))
    capsys.readouterr()
    assert sweep(sweep_file, out) == 0
    assert "re-running 1 chunk(s) that failed verification" in capsys.readouterr().err
    assert_same(ref, out)


@pytest.mark.parametrize("grid", ['"s"', '{"cells": [1]}', '{"cells": [{"id": "a"}]}'])
def test_6_a_damaged_manifest_is_one_line(sweep_file, tmp_path, capsys, grid):
    """Refused in one line with a result under it; with none, nothing to keep, rewritten
    for this grid, also in one line."""
    out = tmp_path / "out"
    (out / "cells" / "cell=x").mkdir(parents=True)
    (out / "cells" / "cell=x" / "chunk-0000.json").write_text("{}")
    (out / "sweep.json").write_text('{"grid_hash": "x", "grid": %s}' % grid)
    assert sweep(sweep_file, out) == 2
    assert "was written for a different grid" in capsys.readouterr().err
    shutil.rmtree(out / "cells")
    with SweepStore.open(out, load_sweep(sweep_file)):
        pass
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "was written for a different grid" in err[0] \
        and err[0].endswith("rewrote it for this grid"), err


def test_6_another_grids_tables_are_results_too(sweep_file, tmp_path, capsys):
    """A manifest of another grid with its aggregated tables beside it (cells/ deleted
    once aggregated) holds that grid's results: it was rewritten for this grid, saying
    "no result was written under it", and the sweep replaced the other grid's tables."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "sweep.json").write_text('{"grid_hash": "x", "grid": {"cells": [1]}}')
    (out / "summary.parquet").write_bytes(b"the other grid's")
    assert sweep(sweep_file, out) == 2
    err = capsys.readouterr().err
    assert "was written for a different grid" in err and "Use a new --out" in err, err
    assert (out / "summary.parquet").read_bytes() == b"the other grid's"


# -- 7. a damaged or deleted manifest --------------------------------------------------------
def _counting_runs(monkeypatch) -> list:
    """Patch the chunk runner to record each chunk it runs; returns the record."""
    from fastsim.sweep import runner

    runs = []
    real = runner.run_chunks

    def run_chunks(configs, seed, start, n, keep_jobs):
        runs.extend((start, n) for _ in configs)
        return real(configs, seed, start, n, keep_jobs)

    monkeypatch.setattr(runner, "run_chunks", run_chunks)
    return runs


def _stamps(out: Path) -> dict:
    return {p.relative_to(out): (p.stat().st_mtime_ns, p.read_bytes())
            for p in out.glob("cells/*/*")}


@pytest.mark.parametrize("how", ["truncate", "empty", "not json", "no grid hash", "delete",
                                 "nested"])
def test_7_a_damaged_manifest_is_rebuilt_from_chunk_records(sweep_file, tmp_path, capsys,
                                                             monkeypatch, how):
    """Every chunk record names the hash of the grid it was computed for (every cell's
    config, clusters, chunk, seed): when they all name this grid, a truncated, empty or
    deleted sweep.json is rebuilt and no verified chunk is run again; the outputs are the
    same bytes as an undamaged run's.  It was a dead end ("use a new --out directory").
    One nested deeper than json parses (5,000 brackets) was a RecursionError traceback."""
    ref, out = tmp_path / "ref", tmp_path / "out"
    assert sweep(sweep_file, ref) == 0
    assert sweep(sweep_file, out) == 0
    manifest = out / "sweep.json"
    if how == "delete":
        manifest.unlink()
    else:
        manifest.write_bytes({"truncate": manifest.read_bytes()[:40], "empty": b"",
                              "not json": b"\x00" * 512, "no grid hash": b"{}",
                              "nested": b"[" * 5000 + b"]" * 5000}[how])
    for name in DERIVED:
        (out / name).unlink()
    before = _stamps(out)
    runs = _counting_runs(monkeypatch)
    capsys.readouterr()
    assert sweep(sweep_file, out) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert runs == [] and _stamps(out) == before  # no chunk re-run or rewritten
    assert len(err) == 2 and "rebuilt it: 6 chunk records in" in err[0], err
    assert err[1] == "resumed: 6 of 6 chunks were already done (verified)"
    assert manifest.read_bytes() == (ref / "sweep.json").read_bytes()
    for name in DERIVED:
        assert (out / name).read_bytes() == (ref / name).read_bytes(), name
    assert_same(ref, out)


@pytest.mark.parametrize("damage", ["truncated", "no grid", "another chunk's", "nested"])
def test_7_a_chunk_whose_record_proves_nothing_is_rerun_in_the_rebuild(
        sweep_file, tmp_path, capsys, monkeypatch, damage):
    """A record that cannot be read, names no grid, or is this grid's record of another
    chunk neither stops the rebuild nor is kept: its chunk is re-run, as on any resume."""
    ref, out = tmp_path / "ref", tmp_path / "out"
    assert sweep(sweep_file, ref) == 0
    assert sweep(sweep_file, out) == 0
    (out / "sweep.json").write_bytes(b"")
    record = sorted(out.glob("cells/*/chunk-0001.json"))[0]
    if damage == "truncated":
        record.write_bytes(record.read_bytes()[:30])
    elif damage == "no grid":
        record.write_text(record.read_text().replace('"grid_hash"', '"grid"'))
    elif damage == "nested":  # deeper than json parses: a RecursionError traceback
        record.write_bytes(b"[" * 5000 + b"]" * 5000)
    else:
        record.write_bytes(record.with_name("chunk-0000.json").read_bytes())
    runs = _counting_runs(monkeypatch)
    capsys.readouterr()
    assert sweep(sweep_file, out) == 0
    err = capsys.readouterr().err
    assert "rebuilt it: 5 chunk records" in err
    assert "1 chunk(s) whose record is damaged or misplaced will be re-run" in err
    assert runs == [(2, 2)]
    assert_same(ref, out)


@pytest.mark.parametrize("foreign", ["one chunk", "every chunk", "a cell", "a chunk index"])
def test_7_a_damaged_manifest_beside_another_grids_chunk_is_refused(sweep_file, tmp_path,
                                                                    capsys, foreign):
    """Never rebuilt over results that are not all this grid's: one line naming the first
    chunk or cell that is not, exit 2, and nothing written."""
    import shutil

    out, other = tmp_path / "out", tmp_path / "other"
    assert sweep(sweep_file, out) == 0
    grid = load_sweep(sweep_file)
    if foreign == "one chunk":  # the same cell and chunk, from a run with another seed
        assert sweep(sweep_file, other, "--seed", "2") == 0
        for src in other.glob("cells/*/*-0001.*"):
            shutil.copyfile(src, out / src.relative_to(other))
        named = sorted(out.glob("cells/*/chunk-0001.json"))[0]
        needle = f"{named} is a chunk record of grid {load_sweep(sweep_file, seed=2).hash[:12]}"
        argv = ()
    elif foreign == "every chunk":  # the right directory, run without its --seed
        named = sorted(out.glob("cells/*/chunk-0000.json"))[0]
        needle = f"{named} is a chunk record of grid {grid.hash[:12]}"
        argv = ("--seed", "2")
    elif foreign == "a cell":  # a cell of another sweep copied in
        other_file = tmp_path / "k3.toml"
        other_file.write_text(SWEEP.replace("evalstop:k=2", "evalstop:k=3"))
        assert sweep(other_file, other) == 0
        k3 = next(c.id for c in load_sweep(other_file).cells if c.baseline)
        shutil.copytree(other / "cells" / f"cell={k3}", out / "cells" / f"cell={k3}")
        named = out / "cells" / f"cell={k3}"
        needle = f"{named} is not a cell of {sweep_file}'s grid (hash {grid.hash[:12]})"
        argv = ()
    else:  # the same cells in chunks of 1: a chunk index the grid does not have
        assert sweep(sweep_file, other, "--chunk", "1") == 0
        for src in other.glob("cells/*/*-0005.*"):
            shutil.copyfile(src, out / src.relative_to(other))
        named = sorted(out.glob("cells/*/chunk-0005.json"))[0]
        needle = f"{named} is chunk 5, but {sweep_file}'s grid"
        argv = ()
    (out / "sweep.json").write_bytes(b"")
    before = _stamps(out)
    capsys.readouterr()
    assert sweep(sweep_file, out, *argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "sweep.json: unreadable sweep manifest" in err and needle in err, err
    assert "refusing to mix results" in err
    assert (out / "sweep.json").read_bytes() == b"" and _stamps(out) == before


def test_7_a_damaged_manifest_and_no_chunk_record_is_refused(sweep_file, tmp_path, capsys):
    out = tmp_path / "out"
    assert sweep(sweep_file, out) == 0
    for record in out.glob("cells/*/chunk-*.json"):
        record.unlink()
    (out / "sweep.json").unlink()
    capsys.readouterr()
    assert sweep(sweep_file, out) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"{out} holds sweep results but no sweep.json, and no chunk record in" in err
    assert not (out / "sweep.json").exists()


def test_7_reproduce_checks_a_damaged_manifest_before_writing_any(tmp_path, capsys):
    out = tmp_path / "r"
    (out / "noise" / "cells" / "cell=000000000000").mkdir(parents=True)
    (out / "noise" / "sweep.json").write_bytes(b'{"format": 2, "name": "noi')
    assert main(["reproduce", "--clusters", "2", "--out", str(out), "--no-figures",
                 "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "noise/cells/cell=000000000000 is not a cell of" in err
    assert sorted(p.name for p in out.iterdir()) == ["noise"]  # headline's was not written


@pytest.mark.parametrize("cell", ["its", "another"])
def test_7_reproduce_names_its_out_directory_to_act_on(tmp_path, capsys, cell):
    """A damaged manifest that the records cannot rebuild: reproduce's refusal said
    "delete OUT/noise to start over" (or "the sweep file ... that OUT/noise was run
    with"), a directory reproduce made; deleting it moved the refusal to the next sweep."""
    from fastsim.resources import shipped
    from fastsim.sweep.grid import load_sweep

    out = tmp_path / "r"
    grid = load_sweep(shipped("sweeps") / "noise.toml", clusters=2, seed=0)
    cell_id = grid.cells[0].id if cell == "its" else "000000000000"
    (out / "noise" / "cells" / f"cell={cell_id}").mkdir(parents=True)
    (out / "noise" / "sweep.json").write_bytes(b'{"format": 2, "name": "noi')
    assert main(["reproduce", "--clusters", "2", "--out", str(out), "--no-figures",
                 "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"fastsim reproduce: error: {out / 'noise' / 'sweep.json'}: "), err
    said = err.partition(" is not a cell of " if cell == "another" else ", so nothing ")[2]
    to_act_on = (f"use the --quick, --clusters and --chunk that {out} was run with"
                 if cell == "another" else f"delete the whole of {out} (not one sweep in it)")
    assert str(out / "noise") not in said and to_act_on in said, err
    assert sorted(p.name for p in out.iterdir()) == ["noise"]


def test_1_a_lock_that_is_a_symbolic_link_is_not_followed(sweep_file, tmp_path, capsys):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    (out / "sweep.lock").symlink_to(victim)
    assert sweep(sweep_file, out) == 2
    assert "cannot create sweep.lock (a symbolic link)" in capsys.readouterr().err
    assert victim.read_text() == "precious"


def test_kill_9_releases_the_lock_and_resume_is_byte_identical(tmp_path):
    """A sweep killed with SIGKILL mid-run leaves no lock behind (the OS drops it) and the
    same command finishes it, bit-identical to an uninterrupted run."""
    p = tmp_path / "k.toml"
    p.write_text(small_sweep(40))
    ref, out = tmp_path / "ref", tmp_path / "out"
    assert sweep(p, ref) == 0
    proc = spawn(p, out)
    deadline = time.monotonic() + 120
    while len(list(out.glob("cells/*/chunk-*.json"))) < 3 and proc.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read()
    assert sweep(p, out) == 0
    assert_same(ref, out)


@pytest.mark.parametrize("manifest", ["intact", "deleted"])
@pytest.mark.parametrize("what", ["a record", "a chunk file", "a cell", "cells"])
def test_7_a_path_of_the_wrong_kind_is_refused_before_any_chunk_runs(
        sweep_file, tmp_path, capsys, monkeypatch, manifest, what):
    """A directory where a chunk's record or file goes, or a file where a cell's
    directory (or cells/) goes, is one line naming it, exit 2, before any chunk runs and
    before the manifest is rebuilt.  It was a traceback (IsADirectoryError,
    NotADirectoryError from unlinking the record) or 'cannot write', after the chunk's
    simulation had run, and after the rebuilt manifest had been written."""
    import shutil

    out = tmp_path / "out"
    assert sweep(sweep_file, out) == 0
    cell = sorted(out.glob("cells/cell=*"))[0]
    named = {"a record": cell / "chunk-0001.json", "a chunk file": cell / "jct-0001.parquet",
             "a cell": cell, "cells": out / "cells"}[what]
    if named.is_dir():
        shutil.rmtree(named)
        named.write_text("")
    else:
        named.unlink()
        named.mkdir()
    if manifest == "deleted":
        (out / "sweep.json").unlink()
    runs = _counting_runs(monkeypatch)
    capsys.readouterr()
    assert sweep(sweep_file, out) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert f"{named}: " in err and "allowed: " in err, err
    assert runs == []
    assert (out / "sweep.json").exists() == (manifest == "intact")


@pytest.mark.parametrize("resume", [False, True])
@pytest.mark.parametrize("table", DERIVED)
def test_7_a_directory_where_a_table_goes_is_refused_before_any_chunk_runs(
        sweep_file, tmp_path, capsys, monkeypatch, resume, table):
    """A directory at the name of an aggregated table (summary.txt, ...) was found only
    by aggregation, after every chunk had run: 'cannot write DIR/summary.txt'."""
    import shutil

    out = tmp_path / "out"
    if resume:
        assert sweep(sweep_file, out) == 0
        shutil.rmtree(next(out.glob("cells/cell=*")))  # a cell to run again
        (out / table).unlink()
    (out / table).mkdir(parents=True)
    runs = _counting_runs(monkeypatch)
    capsys.readouterr()
    assert sweep(sweep_file, out) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert f"{out / table}: is a directory; allowed: " in err, err
    assert runs == []


@pytest.mark.parametrize("damage", ["grid not a table", "another grid's cells", "no name"])
def test_7_a_manifest_naming_this_grid_with_a_damaged_body_is_rewritten(
        sweep_file, tmp_path, capsys, monkeypatch, damage):
    """A sweep.json that is valid JSON and names this grid's hash, but whose grid is not
    the one that hash is of, or that has no name, is damage: rewritten (one line), as a
    damaged manifest is rebuilt, with no chunk run again.  It was taken as it was, so
    'fastsim figures' refused it (KeyError: no name) and told the user to run the sweep
    again, which left it as it was: a dead end."""
    import json

    ref, out = tmp_path / "ref", tmp_path / "out"
    assert sweep(sweep_file, ref) == 0
    assert sweep(sweep_file, out) == 0
    manifest = out / "sweep.json"
    m = json.loads(manifest.read_text())
    if damage == "grid not a table":
        m["grid"] = 5
    elif damage == "another grid's cells":
        m["grid"]["cells"] = m["grid"]["cells"][:1]
    else:
        del m["name"]
    manifest.write_text(json.dumps(m))
    runs = _counting_runs(monkeypatch)
    capsys.readouterr()
    assert sweep(sweep_file, out) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert runs == []
    assert len(err) == 2 and "damaged sweep manifest (it names this grid's hash" in err[0], err
    assert manifest.read_bytes() == (ref / "sweep.json").read_bytes()
    # read, not refused: the figure of a sweep of one's own, named by the manifest
    assert main(["figures", str(out), "--out", str(tmp_path / "figs"), "--formats", "png"]) == 0
    assert "[figures] sweep_s: sweep_s.png" in capsys.readouterr().out
    assert sweep(sweep_file, out) == 0  # said once: the next run finds it intact
    assert "damaged" not in capsys.readouterr().err


@pytest.mark.parametrize("damage", ["no files listed", "a copy under another name"])
def test_7_the_rebuild_counts_as_kept_only_records_resume_keeps(
        sweep_file, tmp_path, capsys, monkeypatch, damage):
    """The rebuild line's 'N chunk records ... are kept' is the number of chunks resume
    then keeps.  A record naming the grid, cell and chunk but listing no files (which
    resume re-runs), or a copy of a record under a name the sweep never reads
    (chunk-00001.json beside a deleted chunk-0001.json), was counted as kept: 6 kept, then
    'resumed: 5 of 6'."""
    import json

    ref, out = tmp_path / "ref", tmp_path / "out"
    assert sweep(sweep_file, ref) == 0
    assert sweep(sweep_file, out) == 0
    (out / "sweep.json").unlink()
    record = sorted(out.glob("cells/*/chunk-0001.json"))[0]
    if damage == "no files listed":
        rec = json.loads(record.read_text())
        del rec["files"]
        record.write_text(json.dumps(rec))
    else:
        record.rename(record.with_name("chunk-00001.json"))
    runs = _counting_runs(monkeypatch)
    capsys.readouterr()
    assert sweep(sweep_file, out) == 0
    err = capsys.readouterr().err
    assert "rebuilt it: 5 chunk records in" in err, err
    assert "resumed: 5 of 6 chunks were already done (verified)" in err, err
    assert runs == [(2, 2)]
    assert_same(ref, out)


def _traced_peak(call):
    """``call()``'s result and the peak of Python's traced memory while it ran."""
    import tracemalloc

    tracemalloc.start()
    try:
        return call(), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("manifest", ["intact", "deleted"])
def test_7_a_huge_file_at_a_records_name_is_not_read_into_memory(
        sweep_file, tmp_path, capsys, monkeypatch, manifest):
    """A chunk record is a few hundred bytes: a 256 MiB file at its name (sparse here) is
    not one, and is re-run as an unreadable record without being read in full.  It was
    read whole, three times per run (the manifest check, the rebuild, resume): a file of
    1 GiB there took 2.2 GB of memory and 16 s."""
    ref, out = tmp_path / "ref", tmp_path / "out"
    assert sweep(sweep_file, ref) == 0
    assert sweep(sweep_file, out) == 0
    record = sorted(out.glob("cells/*/chunk-0001.json"))[0]
    with open(record, "r+b") as fh:
        fh.truncate(256 << 20)
    if manifest == "deleted":
        (out / "sweep.json").unlink()
    err = _resumed_in_little_memory(sweep_file, out, monkeypatch, capsys)
    assert "re-running 1 chunk(s) that failed verification" in err
    assert_same(ref, out)


def _resumed_in_little_memory(sweep_file, out, monkeypatch, capsys) -> str:
    """Resume ``out``: one chunk runs again, the resume's Python peak stays under 64 MiB;
    returns what it said on stderr."""
    runs = _counting_runs(monkeypatch)
    capsys.readouterr()
    code, peak = _traced_peak(lambda: sweep(sweep_file, out))
    assert code == 0
    assert peak < 64 << 20, peak
    assert runs == [(2, 2)]
    return capsys.readouterr().err


@pytest.mark.parametrize("kind", ["chunk", "jct"])
def test_7_a_huge_file_at_a_chunks_name_is_not_read_into_memory(
        sweep_file, tmp_path, capsys, monkeypatch, kind):
    """A chunk's file was read whole to be hashed: a 1 GiB file at its name (sparse here)
    took its size in memory on every resume, and one larger than memory a MemoryError
    traceback.  No file of a chunk is larger than the memory that computed it: such a file
    is re-run, read no further than that bound."""
    ref, out = tmp_path / "ref", tmp_path / "out"
    assert sweep(sweep_file, ref) == 0
    assert sweep(sweep_file, out) == 0
    with open(sorted(out.glob(f"cells/*/{kind}-0001.parquet"))[0], "r+b") as fh:
        fh.truncate(1 << 30)
    err = _resumed_in_little_memory(sweep_file, out, monkeypatch, capsys)
    assert "bytes" in err  # "larger than N bytes", the reason said
    assert_same(ref, out)


def test_7_a_huge_file_at_the_manifests_name_is_damaged_and_rebuilt(
        sweep_file, tmp_path, capsys, monkeypatch):
    """A file of 1 GiB at sweep.json (sparse here) was read whole, as the figures read it:
    its size in memory.  Past MANIFEST_MAX_BYTES it is a damaged manifest: rebuilt from the
    chunk records, no chunk run again; `fastsim figures` refuses it as damaged."""
    from fastsim.sweep.store import MANIFEST_MAX_BYTES

    ref, out = tmp_path / "ref", tmp_path / "out"
    assert sweep(sweep_file, ref) == 0
    assert sweep(sweep_file, out) == 0
    with open(out / "sweep.json", "r+b") as fh:
        fh.truncate(1 << 30)
    figs = tmp_path / "figs"
    assert main(["figures", str(out), "--out", str(figs)]) == 2
    err = capsys.readouterr().err
    assert f"sweep.json: damaged (larger than {MANIFEST_MAX_BYTES} bytes" in err, err
    assert len(err.strip().splitlines()) == 1 and not figs.exists()
    runs = _counting_runs(monkeypatch)
    code, peak = _traced_peak(lambda: sweep(sweep_file, out))
    assert code == 0
    assert peak < MANIFEST_MAX_BYTES + (32 << 20), peak
    err = capsys.readouterr().err
    assert f"damaged sweep manifest (larger than {MANIFEST_MAX_BYTES} bytes" in err, err
    assert "rebuilt it: 6 chunk records in" in err and runs == []
    assert (out / "sweep.json").stat().st_size < 1 << 20
    assert_same(ref, out)


def test_7_the_largest_grid_a_sweep_file_may_expand_to_has_a_manifest_under_the_cap():
    """MANIFEST_MAX_BYTES leaves a margin over the manifest of MAX_CELLS cells with a
    baseline cell each, at the bytes per cell of the largest shipped sweep."""
    import json

    from fastsim.resources import shipped
    from fastsim.sweep.grid import MAX_CELLS
    from fastsim.sweep.store import MANIFEST_MAX_BYTES

    g = load_sweep(shipped("sweeps") / "frontier.toml")
    per_cell = len(json.dumps(SweepStore(Path("unused"), g).manifest(), indent=1)) / len(g.cells)
    assert 1.5 * (2 * MAX_CELLS * per_cell) < MANIFEST_MAX_BYTES


def test_1_a_cell_linked_into_a_held_sweep_directory_is_refused(sweep_file, tmp_path, capsys):
    """A cell directory that is a symbolic link into another sweep directory is written
    there (its temporaries removed, its chunks rewritten), so that directory is held as
    --out is: refused, naming the link and the holder, while another process has it.
    It was not: the sweep deleted the holder's temporaries and wrote chunks into its
    directory while it ran."""
    import shutil

    other, out = tmp_path / "other", tmp_path / "out"
    assert sweep(sweep_file, other) == 0
    assert sweep(sweep_file, out) == 0
    cell = sorted(out.glob("cells/cell=*"))[0]
    shutil.rmtree(cell)
    cell.symlink_to(other / "cells" / cell.name, target_is_directory=True)
    (other / "cells" / cell.name / "chunk-0001.json").unlink()  # to be rewritten
    pending = other / "cells" / cell.name / "chunk-0001.json.99999-abcdef.tmp"
    pending.write_text("the holder's write in flight")
    with held_elsewhere(other, ENV) as holder:
        capsys.readouterr()
        assert sweep(sweep_file, out) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"{cell} is a link to" in err, err
        assert f"is in use by pid {holder.pid}" in err, err
        assert pending.exists()
        assert not (other / "cells" / cell.name / "chunk-0001.json").exists()
    assert sweep(sweep_file, out) == 0  # released: the same command now runs
    assert (other / "cells" / cell.name / "chunk-0001.json").exists()
    assert (other / "sweep.lock").read_text() == ""  # and lets it go again


def test_1_an_output_that_is_a_link_out_of_a_held_directory_is_refused(sweep_file, tmp_path):
    """``fastsim run --out DIR/link.parquet``, the link naming a file elsewhere, renames its
    file over the link, in DIR: it was held only where the link led, so it wrote into a
    sweep directory another process held.  Now refused, in one line, naming the holder."""
    out = tmp_path / "out"
    store = SweepStore.open(out, load_sweep(sweep_file))  # this process holds the lock
    elsewhere = tmp_path / "elsewhere.parquet"
    elsewhere.write_text("old")
    (out / "link.parquet").symlink_to(elsewhere)
    r = subprocess.run([sys.executable, "-m", "fastsim.cli", "run", "--clusters", "2",
                        "--n-jobs", "5", "--out", str(out / "link.parquet"), "--no-progress"],
                       env=ENV, capture_output=True, text=True)
    err = r.stderr.strip()
    assert r.returncode == 2 and f"is in use by pid {os.getpid()}" in err, err
    assert len(err.splitlines()) == 1
    assert (out / "link.parquet").is_symlink() and elsewhere.read_text() == "old"
    store.close()


def test_6_a_summary_appears_only_beside_the_tables_it_goes_with(sweep_file, tmp_path,
                                                                 capsys, monkeypatch):
    """kill -9 between the renames of an aggregation left summary.parquet beside no
    jct_hist.parquet (renamed after it), and ``fastsim figures`` then failed with a
    traceback (FileNotFoundError).  The summary is now renamed last, and a summary without
    its histogram is refused in one line."""
    import fastsim.io

    out = tmp_path / "out"
    assert sweep(sweep_file, out) == 0
    for name in DERIVED:
        (out / name).unlink()
    real, renamed = os.replace, []

    def replace_then_die(src, dst):  # the process ends after the first rename
        if renamed:
            raise KeyboardInterrupt
        real(src, dst)
        renamed.append(Path(dst).name)
    monkeypatch.setattr(fastsim.io.os, "replace", replace_then_die)
    with pytest.raises(KeyboardInterrupt):
        aggregate(SweepStore.open(out, load_sweep(sweep_file)))
    monkeypatch.undo()
    assert renamed == ["cells.parquet"] and not (out / "summary.parquet").exists()
    assert main(["figures", str(out), "--out", str(tmp_path / "figs")]) == 2  # nothing to draw
    assert f"{out} holds a sweep not yet aggregated" in capsys.readouterr().err
    assert sweep(sweep_file, out) == 0
    (out / "jct_hist.parquet").unlink()  # as a kill between the renames left it before
    capsys.readouterr()
    assert main(["figures", str(out), "--out", str(tmp_path / "figs")]) == 2
    err = capsys.readouterr().err.strip()
    assert "jct_hist.parquet: damaged (missing beside summary.parquet)" in err, err
    assert len(err.splitlines()) == 1


# -- the directory a run holds stays the one it holds -----------------------------------------
@pytest.mark.parametrize("change", ["lock deleted", "directory moved"])
def test_a_run_whose_lock_file_or_directory_changes_under_it_stops(sweep_file, tmp_path,
                                                                    capsys, monkeypatch, change):
    """With ``sweep.lock`` deleted mid-run, a second ``fastsim sweep`` locked a new file
    and both wrote the directory at once (one removed the other's temporaries); with the
    directory moved, the run made a new one, unlocked, at the old path and wrote its
    chunks there.  Now the next write stops, in one line, exit 2."""
    out = tmp_path / "out"
    real = SweepStore.write_chunk
    calls = []

    def write_then_change(store, *args, **kwargs):
        real(store, *args, **kwargs)
        calls.append(1)
        if len(calls) == 1:
            if change == "lock deleted":
                (out / "sweep.lock").unlink()
            else:
                out.rename(tmp_path / "moved")
    monkeypatch.setattr(SweepStore, "write_chunk", write_then_change)
    assert sweep(sweep_file, out) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"{out / 'sweep.lock'} is no longer this process's lock" in err, err
    assert len(calls) == 1
    if change == "directory moved":
        assert not out.exists()  # not made again, unlocked
        out = tmp_path / "moved"
    monkeypatch.undo()
    assert sweep(sweep_file, out) == 0  # the same command again finishes it
    assert "no longer" not in capsys.readouterr().err


def test_a_refusal_after_the_lock_leaves_the_directory_free(sweep_file, tmp_path,
                                                              monkeypatch):
    """fastsim.sweep refused after taking the lock (a full disk under the manifest: cannot
    write sweep.json) kept the directory held for as long as the caller kept the exception
    (a notebook keeps the last one): the store that held it was a local of
    ``SweepStore.open``'s frame, in the traceback, and the same run again, from another
    process, was refused as "in use" by the caller's.  A directory the refused run made is
    removed with its lock file (nothing half-made is left); a lock file that was there is
    kept, free."""
    import fcntl

    import fastsim
    import fastsim.sweep.store as st

    def full(path, data, within=None):
        raise ConfigError(f"cannot write {path} (No space left on device)")
    monkeypatch.setattr(st, "atomic_write_bytes", full)
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match="sweep.json .No space left on device") as kept:
        fastsim.sweep(sweep_file, out)
    assert kept.traceback and not out.exists()
    out.mkdir()
    (out / "sweep.lock").write_text("")  # a finished sweep's, released
    with pytest.raises(ConfigError, match="sweep.json .No space left on device") as kept:
        fastsim.sweep(sweep_file, out)
    assert kept.traceback  # still held here
    fd = os.open(out / "sweep.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError while held
    finally:
        os.close(fd)


def test_a_lock_file_that_is_a_named_pipe_is_refused(sweep_file, tmp_path, capsys):
    """A named pipe at ``sweep.lock`` read "cannot create sweep.lock (None)", and
    ``fastsim figures`` wrote into the directory without any lock."""
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / "sweep.lock")
    assert sweep(sweep_file, out) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(f"{out / 'sweep.lock'}: not a regular file; allowed: the lock file "
                        "fastsim sweep makes (remove it)"), err
    assert sorted(p.name for p in out.iterdir()) == ["sweep.lock"]


def test_a_cell_directory_linked_to_another_cell_is_refused(sweep_file, tmp_path, capsys):
    """``cells/cell=A`` a link to ``cells/cell=B``: each run re-ran one cell's chunks over
    the other's and ended "chunk 0 of cell B is not complete", alternating, for ever."""
    out = tmp_path / "out"
    assert sweep(sweep_file, out) == 0
    a, b = sorted((out / "cells").iterdir())
    for p in a.iterdir():
        p.unlink()
    a.rmdir()
    a.symlink_to(b.name)
    before = sorted(p.name for p in b.iterdir())
    assert sweep(sweep_file, out) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"{a}: the same directory as {b.name} (a symbolic link); allowed: a directory of " \
           "its own for each cell" in err, err
    assert sorted(p.name for p in b.iterdir()) == before


@pytest.mark.parametrize("renamed", ["in the manifest", "in the sweep file"])
def test_a_sweep_renamed_is_recorded_under_the_sweep_files_name(sweep_file, tmp_path, capsys,
                                                                 renamed):
    """The name is not part of the grid hash.  A manifest edited to name another sweep kept
    that name on resume, and ``fastsim figures`` drew it as that sweep; a name changed in
    the sweep file was not recorded, so figures did not know the sweep by it."""
    import json

    out = tmp_path / "out"
    assert sweep(sweep_file, out) == 0
    manifest = out / "sweep.json"
    if renamed == "in the manifest":
        m = json.loads(manifest.read_text())
        manifest.write_text(json.dumps({**m, "name": "noise"}))
        want = "s"
    else:
        sweep_file.write_text('name = "noise"\n' + SWEEP)
        want = "noise"
    capsys.readouterr()
    assert sweep(sweep_file, out) == 0
    err = capsys.readouterr().err
    assert f"it records {want!r} from now on (fastsim figures knows a sweep by its name)" in err
    assert json.loads(manifest.read_text())["name"] == want
    assert sweep(sweep_file, out) == 0
    assert "from now on" not in capsys.readouterr().err


def test_a_sweep_directory_without_its_lock_file_is_still_held_by_writers(sweep_file, tmp_path):
    """A sweep directory was known by its lock file, so with it deleted ``fastsim figures``
    wrote there without taking the lock; its manifest says what it is too."""
    from fastsim.sweep.store import hold_sweep_dirs

    out = tmp_path / "out"
    assert sweep(sweep_file, out) == 0
    (out / "sweep.lock").unlink()
    held = hold_sweep_dirs(out / "figures")
    assert [lock.root for lock in held] == [out] and (out / "sweep.lock").is_file()


def refused_as_moved(code: int, capsys, out: Path) -> None:
    """The sweep into ``out`` stopped with the lock's one line, and left nothing there."""
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"{out / 'sweep.lock'} is no longer this process's lock" in err, err
    assert not out.exists()


@pytest.mark.parametrize("change", ["directory moved", "directory deleted"])
def test_a_directory_moved_while_a_chunk_is_encoded_is_not_made_again(sweep_file, tmp_path,
                                                                      capsys, monkeypatch,
                                                                      change):
    """Moved (or deleted) after a chunk's write had checked its lock but before its files
    were written, the run made the directory anew at the old path (``cells/``, the chunk,
    its record: no manifest, no lock) and only the next chunk's check stopped it.  Now
    that write stops, in one line, and nothing is left at the old path."""
    import shutil

    import fastsim.sweep.store as store_module

    out = tmp_path / "out"
    real = store_module.parquet_bytes
    calls = []

    def encode_then_change(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:  # the second chunk's first file
            if change == "directory moved":
                out.rename(tmp_path / "moved")
            else:
                shutil.rmtree(out)
        return real(*args, **kwargs)
    monkeypatch.setattr(store_module, "parquet_bytes", encode_then_change)
    refused_as_moved(sweep(sweep_file, out), capsys, out)


@pytest.mark.parametrize("when", ["before its manifest", "before aggregation"])
def test_a_directory_moved_at_the_start_or_end_of_a_run_is_named_as_moved(
        sweep_file, tmp_path, capsys, monkeypatch, when):
    """Moved between taking its lock and writing its manifest, a sweep wrote the manifest
    at the old path, made anew; moved after its last chunk, aggregation refused a chunk
    as "not complete; re-run the sweep", which the chunk was.  Both now stop with the
    lock's one line, and nothing is made at the old path."""
    import fastsim.sweep.store as store_module

    out = tmp_path / "out"
    if when == "before its manifest":
        real = store_module._read_manifest

        def read_then_move(root, *args, **kwargs):
            found = real(root, *args, **kwargs)
            if (Path(root) / "sweep.lock").exists():  # read by ``open``, under the lock
                Path(root).rename(tmp_path / "moved")
            return found
        monkeypatch.setattr(store_module, "_read_manifest", read_then_move)
    else:
        real = SweepStore.write_chunk
        calls = []

        def write_then_move(store, *args, **kwargs):
            real(store, *args, **kwargs)
            calls.append(1)
            if len(calls) == 6:  # the last chunk of both cells
                out.rename(tmp_path / "moved")
        monkeypatch.setattr(SweepStore, "write_chunk", write_then_move)
    refused_as_moved(sweep(sweep_file, out), capsys, out)
    monkeypatch.undo()
    assert sweep(sweep_file, tmp_path / "moved") == 0  # the same command finishes it


def test_7_a_manifest_of_a_newer_format_is_refused_and_left_as_it_is(sweep_file, tmp_path,
                                                                      capsys, monkeypatch):
    """A sweep.json of a format newer than this fastsim writes (a newer fastsim's) is
    refused in one line naming it and the formats this one reads, nothing written: it was
    rewritten as this fastsim's, unsaid, and what the newer one recorded was lost."""
    import json

    out = tmp_path / "out"
    assert sweep(sweep_file, out) == 0
    manifest = out / "sweep.json"
    m = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**m, "format": 99, "newer": "kept"}))
    before = {p: p.read_bytes() for p in out.rglob("*")
              if p.is_file() and p.name != "sweep.lock"}
    runs = _counting_runs(monkeypatch)
    capsys.readouterr()
    assert sweep(sweep_file, out) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"fastsim sweep: error: {manifest}: ") \
        and "format 99" in err[0] and "formats 1 to 3" in err[0], err
    assert runs == []
    assert {p: p.read_bytes() for p in out.rglob("*")
            if p.is_file() and p.name != "sweep.lock"} == before


def test_7_a_refused_manifest_leaves_no_lock_file_behind(sweep_file, tmp_path, capsys):
    """An --out holding a manifest with no sweep.lock beside it (copied, or its lock
    removed) that the sweep refuses, a newer fastsim's or another grid's with results, was
    left holding a blank sweep.lock that the command line's hold on --out made before the
    refusal: nothing is written on a refusal. A lock file there before is kept."""
    import json

    done = tmp_path / "done"
    assert sweep(sweep_file, done) == 0
    m = json.loads((done / "sweep.json").read_text())
    newer, other = tmp_path / "newer", tmp_path / "other"
    newer.mkdir()
    (newer / "sweep.json").write_text(json.dumps({**m, "format": 99}))
    shutil.copytree(done, other)
    (other / "sweep.lock").unlink()
    grid = json.loads((other / "sweep.json").read_text())
    (other / "sweep.json").write_text(json.dumps({**grid, "grid_hash": "0" * 64}))
    capsys.readouterr()
    for out, said in ((newer, "format 99"), (other, "different grid")):
        before = sorted(p.relative_to(out) for p in out.rglob("*"))
        assert sweep(sweep_file, out) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and said in err[0], err
        assert sorted(p.relative_to(out) for p in out.rglob("*")) == before
    # through the API: the store's own hold on a sweep directory makes the file too
    with pytest.raises(ConfigError, match="format 99"):
        SweepStore.open(newer, load_sweep(sweep_file))
    assert not (newer / "sweep.lock").exists()
    (newer / "sweep.lock").write_text("")  # there before: kept
    assert sweep(sweep_file, newer) == 2
    assert (newer / "sweep.lock").exists()


@pytest.mark.parametrize("value", ['"x"', "-1", "0", "true", "null"])
def test_7_a_manifest_whose_format_is_not_one_is_damaged_and_rebuilt(
        sweep_file, tmp_path, capsys, monkeypatch, value):
    """A format field that is no format (text, a negative number) is damage, rebuilt from
    the chunk records in one line, as any other damaged manifest is; it was rewritten
    unsaid."""
    import json

    ref, out = tmp_path / "ref", tmp_path / "out"
    assert sweep(sweep_file, ref) == 0
    assert sweep(sweep_file, out) == 0
    manifest = out / "sweep.json"
    m = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**m, "format": json.loads(value)}))
    runs = _counting_runs(monkeypatch)
    capsys.readouterr()
    assert sweep(sweep_file, out) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert runs == []
    assert len(err) == 2 and "damaged sweep manifest (its format field" in err[0] \
        and "rebuilt it: 6 chunk records in" in err[0], err
    assert manifest.read_bytes() == (ref / "sweep.json").read_bytes()


def test_a_refused_runs_lock_file_is_removed_only_if_it_is_still_its_own(tmp_path):
    """unmake_lock removed DIR/sweep.lock by its name: after this run's file was deleted
    and another process locked a new one there, a refusal of this run removed that one,
    and a third process could write beside the second."""
    from fastsim.sweep.store import LOCK, DirLock, unmake_lock

    lock = DirLock.acquire(tmp_path)
    (tmp_path / LOCK).unlink()
    (tmp_path / LOCK).write_text("another process\n")  # its own file, at the same name
    unmake_lock(lock, made=True)
    assert (tmp_path / LOCK).read_text() == "another process\n"
    mine = DirLock.acquire(tmp_path)  # still ours: removed as before
    unmake_lock(mine, made=True)
    assert not (tmp_path / LOCK).exists()


def _unlink_refused(monkeypatch, path: Path):
    """``path`` cannot be removed (its directory read-only, as copied from an archive);
    every other file can.  Returns ``Path.unlink`` as it was."""
    unlink = Path.unlink

    def read_only(self, missing_ok=False):
        if self == path:
            raise PermissionError(1, "Operation not permitted", str(self))
        unlink(self, missing_ok)
    monkeypatch.setattr(Path, "unlink", read_only)
    return unlink


def test_a_damaged_chunk_that_cannot_be_rewritten_is_one_line(sweep_file, tmp_path, capsys,
                                                              monkeypatch):
    """Re-running a damaged chunk removes its record first (not done while rewritten); in a
    cell directory that cannot be written (read-only, copied from an archive) that removal
    was a PermissionError traceback.  Now it is one line naming the record, exit 2, and
    the same command, the directory writable again, re-runs the chunk."""
    ref, out = tmp_path / "ref", tmp_path / "out"
    assert sweep(sweep_file, ref) == 0
    assert sweep(sweep_file, out) == 0
    victim = sorted(out.glob("cells/*/chunk-0001.parquet"))[0]
    _damage(victim, "flip")
    record = victim.with_suffix(".json")
    unlink = _unlink_refused(monkeypatch, record)
    capsys.readouterr()
    assert sweep(sweep_file, out) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    # after the lines saying it resumes and re-runs the chunk
    assert err.strip().splitlines()[2:] == [
        f"fastsim sweep: error: cannot write {record} (Operation not permitted)"], err
    monkeypatch.setattr(Path, "unlink", unlink)
    assert sweep(sweep_file, out) == 0
    assert_same(ref, out)


def test_a_killed_writers_temporary_that_cannot_be_removed_is_left(sweep_file, tmp_path,
                                                                    capsys, monkeypatch):
    """Opening a sweep directory removes a killed writer's temporaries; one in a cell
    directory that cannot be written (read-only) was a PermissionError traceback, and a
    finished sweep could not be aggregated again.  It is left (every reader passes over
    temporaries), and the run goes on."""
    ref, out = tmp_path / "ref", tmp_path / "out"
    assert sweep(sweep_file, ref) == 0
    assert sweep(sweep_file, out) == 0
    stale = sorted(out.glob("cells/*"))[0] / "chunk-0001.parquet.999999-abcdef01.tmp"
    stale.write_bytes(b"half")
    _unlink_refused(monkeypatch, stale)
    capsys.readouterr()
    assert sweep(sweep_file, out) == 0, capsys.readouterr().err
    assert stale.exists()
    assert_same(ref, out)
