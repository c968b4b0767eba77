"""Crash-safe, resumable sweeps: an interrupted run, resumed, ends bit-identical to an
uninterrupted one; a changed grid is refused; chunks are never double-counted."""
from __future__ import annotations

import json
import re

import polars as pl
import pytest
from polars.testing import assert_frame_equal as _assert_frame_equal

from fastsim.errors import ConfigError
from fastsim.sweep.aggregate import aggregate
from fastsim.sweep.grid import load_sweep
from fastsim.sweep.runner import run_sweep
from fastsim.sweep.store import SweepStore


def assert_frame_equal(left, right):
    """Bit for bit: polars' own default passes floats that differ by 1e-5 relative."""
    _assert_frame_equal(left, right, check_exact=True)


SWEEP = """
clusters = 10
chunk = 3
seed = 7
[base]
n_jobs = 24
gpus = 16
scheduler = "srtf_est"
[axes]
policy = ["evalstop:k=2", "stop_at:f=0.65"]
"""


@pytest.fixture
def sweep_file(tmp_path):
    p = tmp_path / "tiny.toml"
    p.write_text(SWEEP)
    return p


def run_all(path, out, **kw):
    grid = load_sweep(path)
    store = SweepStore.open(out, grid)
    rep = run_sweep(grid, store, progress=False, **kw)
    return grid, store, rep


def chunk_files(out):
    return sorted(p.relative_to(out) for p in out.glob("cells/*/*.parquet"))


def assert_same_results(a, b):
    assert chunk_files(a) == chunk_files(b)
    for rel in chunk_files(a):
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
    for name in ("summary.parquet", "cells.parquet", "jct_hist.parquet"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
        assert_frame_equal(pl.read_parquet(a / name), pl.read_parquet(b / name))
    assert (a / "summary.txt").read_text() == (b / "summary.txt").read_text()


def test_resume_after_interruptions_equals_uninterrupted(sweep_file, tmp_path):
    ref = tmp_path / "ref"
    grid, store, rep = run_all(sweep_file, ref)
    assert rep.complete and rep.chunks_run == len(grid.cells) * grid.n_chunks == 12
    aggregate(store)

    out = tmp_path / "resumed"
    # 1) Ctrl-C after 4 chunks (KeyboardInterrupt raised from inside the run).
    calls = []

    def interrupt(cid, idx):
        calls.append((cid, idx))
        if len(calls) == 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_all(sweep_file, out, on_chunk=interrupt)
    assert len(list(out.glob("cells/*/chunk-*.parquet"))) == 4
    # 2) A controlled stop after 3 more chunks, then a kill -9 in the middle of a write:
    #    a half-written temp file and a histogram whose chunk marker never got renamed.
    _, store2, rep2 = run_all(sweep_file, out, max_chunks=3)
    assert rep2.chunks_skipped == 4 and rep2.chunks_run == 3 and not rep2.complete
    cid, idx = store2.pending()[0]
    cell_dir = store2.cell_dir(cid)
    cell_dir.mkdir(parents=True, exist_ok=True)
    (cell_dir / f"chunk-{idx:04d}.parquet.tmp").write_bytes(b"PAR1 truncated garbage")
    pl.DataFrame({"group": ["all"], "bin": [0], "count": [999]}).write_parquet(
        cell_dir / f"jct-{idx:04d}.parquet")
    # 3) The same command again finishes the rest, and nothing is counted twice.
    _, store3, rep3 = run_all(sweep_file, out)
    assert rep3.chunks_skipped == 7 and rep3.chunks_run == 5 and rep3.complete
    assert not list(out.glob("cells/*/*.tmp"))
    # 4) A further re-run does nothing.
    _, _, rep4 = run_all(sweep_file, out)
    assert rep4.chunks_run == 0
    aggregate(store3)
    assert_same_results(ref, out)


def test_a_resumed_sweep_says_so_before_running_the_rest(sweep_file, tmp_path, monkeypatch,
                                                       capsys):
    """`fastsim sweep ... --no-progress` said "resumed: 13 of 72 chunks were already done"
    once the other 59 had run, after 20 s of silence, as if it had resumed nothing yet."""
    import sys

    import fastsim.sweep.runner as runner
    from fastsim.cli import main

    out = tmp_path / "out"
    run_all(sweep_file, out, max_chunks=2)  # interrupted after two chunks
    run_chunks = runner.run_chunks

    def said_first(configs, *args):
        print("a chunk runs\n" * len(configs), end="", file=sys.stderr)
        return run_chunks(configs, *args)
    monkeypatch.setattr(runner, "run_chunks", said_first)
    capsys.readouterr()
    assert main(["sweep", str(sweep_file), "--out", str(out), "--no-progress"]) == 0
    err = capsys.readouterr().err.splitlines()
    grid = load_sweep(sweep_file)
    total = len(grid.cells) * grid.n_chunks
    assert err[0] == f"resumed: 2 of {total} chunks were already done (verified)", err
    assert err.count("a chunk runs") == total - 2, err


def test_a_chunks_cells_draw_their_clusters_once(sweep_file, tmp_path, monkeypatch, drawings):
    """The cells of one chunk index whose workload sections are equal (the sweep's cells
    and their baseline) run on clusters drawn once: one drawing per chunk, whatever the
    cell count; the chunk files are each cell's own (``assert_same_results`` against a
    run of one cell per call)."""
    import fastsim.sweep.runner as runner

    grid, together, _ = run_all(sweep_file, tmp_path / "together")
    assert len(grid.cells) == 3 and drawings.count(True) == grid.n_chunks == 4, drawings
    monkeypatch.setattr(runner, "chunk_groups",
                        lambda todo, grid: [(idx, [cid]) for cid, idx in todo])
    drawings.clear()
    _, alone, _ = run_all(sweep_file, tmp_path / "alone")
    assert drawings.count(True) == len(grid.cells) * grid.n_chunks, drawings
    for store in (together, alone):
        aggregate(store)
    assert_same_results(tmp_path / "together", tmp_path / "alone")


def test_changed_grid_is_refused(sweep_file, tmp_path):
    out = tmp_path / "out"
    run_all(sweep_file, out, max_chunks=1)
    manifest_before = (out / "sweep.json").read_text()
    sweep_file.write_text(SWEEP.replace("clusters = 10", "clusters = 11"))
    with pytest.raises(ConfigError) as exc:
        run_all(sweep_file, out)
    msg = str(exc.value)
    assert "sweep.json" in msg and "clusters: 10 -> 11" in msg and str(sweep_file) in msg
    sweep_file.write_text(SWEEP.replace('"stop_at:f=0.65"', '"stop_at:f=0.5"'))
    with pytest.raises(ConfigError, match=r"1 cell\(s\) no longer in the grid, 1 new cell"):
        run_all(sweep_file, out)
    sweep_file.write_text(SWEEP.replace("n_jobs = 24", "n_jobs = 25"))
    with pytest.raises(ConfigError, match=r"n_jobs: 24 -> 25"):
        run_all(sweep_file, out)
    assert (out / "sweep.json").read_text() == manifest_before  # nothing overwritten


def test_manifest_and_double_count_guard(sweep_file, tmp_path):
    out = tmp_path / "out"
    grid, store, _ = run_all(sweep_file, out)
    m = json.loads((out / "sweep.json").read_text())
    assert m["grid_hash"] == grid.hash and len(m["cells"]) == len(grid.cells)
    cid = grid.cells[0].id
    df = store.read_clusters(cid)
    assert df["cluster"].to_list() == list(range(10))
    # A stray copy of a chunk under another index must not be silently counted twice:
    # it fails the chunk's checksum, and the file is named.
    src = store.path(cid, "chunk", 0).read_bytes()
    store.path(cid, "chunk", 1).write_bytes(src)
    with pytest.raises(ConfigError, match=r"chunk-0001.parquet: checksum mismatch"):
        store.read_clusters(cid)


def test_keep_jobs_writes_per_job_records_only_when_asked(sweep_file, tmp_path):
    out = tmp_path / "out"
    grid, store, _ = run_all(sweep_file, out)
    assert not list(out.glob("cells/*/jobs-*.parquet"))
    _, _, rep = run_all(sweep_file, out, keep_jobs=True)  # reruns chunks lacking jobs
    assert rep.chunks_run == 12
    jobs = store.read(grid.cells[0].id, "jobs")
    assert jobs.height == 10 * 24 and jobs["cluster"].n_unique() == 10


@pytest.mark.parametrize("threads", [1, 3])
def test_aggregation_is_the_same_on_any_number_of_threads(sweep_file, tmp_path, monkeypatch,
                                                          threads):
    """Cells are aggregated side by side on numba's threads; the files are the same bytes
    as one cell at a time, and a chunk whose rows are out of order is still sorted."""
    grid, store, _ = run_all(sweep_file, tmp_path / "ref")
    aggregate(store)
    out = tmp_path / "out"
    _, store2, _ = run_all(sweep_file, out)
    cid = grid.cells[0].id
    reversed_chunk = store2.read_chunk(cid, 1).reverse()  # same rows, descending clusters
    store2.write_chunk(cid, 1, reversed_chunk, store2._load(cid, "jct", 1))
    assert store2._load(cid, "chunk", 1)["cluster"].to_list() == [5, 4, 3]
    monkeypatch.setattr("fastsim.sweep.aggregate.numba.get_num_threads", lambda: threads)
    aggregate(store2)
    for name in ("summary.parquet", "cells.parquet", "jct_hist.parquet", "summary.txt"):
        assert (out / name).read_bytes() == (tmp_path / "ref" / name).read_bytes(), name


def test_cells_and_chunks_of_another_run_are_refused_not_read_beside(sweep_file, tmp_path):
    """A cell directory of another run (another seed) or a chunk at an index the grid has
    not, copied into cells/: resume and aggregation read only the grid's own and said
    nothing, while the documented ``pl.scan_parquet("DIR/cells/*/chunk-*.parquet")``
    read them as this sweep's clusters.  Now refused by name before anything runs."""
    import shutil

    out, other = tmp_path / "a", tmp_path / "b"
    grid, store, _ = run_all(sweep_file, out)
    aggregate(store)
    store.close()
    store = SweepStore.open(other, load_sweep(sweep_file, seed=8))
    run_sweep(store.grid, store, progress=False)
    store.close()
    cell = grid.cells[0].id
    foreign = out / "cells" / "cell=0123456789ab"
    shutil.copytree(other / "cells" / f"cell={cell}", foreign)
    stray = out / "cells" / f"cell={cell}" / f"chunk-{grid.n_chunks:04d}.parquet"
    shutil.copy(out / "cells" / f"cell={cell}" / "chunk-0000.parquet", stray)
    (out / "cells" / f"cell={cell}" / "notes.txt").write_text("mine")  # no chunk: kept
    copy = stray.with_name("chunk-0001 (conflicted copy).parquet")  # a sync tool's
    shutil.copy(stray, copy)
    for path, why in ((foreign, f"not a cell of {sweep_file}'s grid"),
                      (copy, f"not a chunk of {sweep_file}'s grid"),
                      (stray, f"not a chunk of {sweep_file}'s grid")):
        needle = "^" + re.escape(f"{path}: {why}")
        with pytest.raises(ConfigError, match=needle):
            SweepStore.check_manifest(out, grid)
        with pytest.raises(ConfigError, match=needle):
            SweepStore.open(out, grid)
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    _, store, rep = run_all(sweep_file, out)
    assert rep.chunks_skipped == rep.chunks_total


def test_summary_is_the_same_bits_for_any_chunk_size(tmp_path):
    """A sweep's summary depends on its clusters only: chunks of 7 and one chunk of 40
    give the same tables, bit for bit (rounded moments merged chunk by chunk moved the
    means' last bits)."""
    tables = []
    for chunk in (7, 40):
        path = tmp_path / f"chunk{chunk}" / "tiny.toml"  # one name: the tables carry it
        path.parent.mkdir()
        path.write_text(SWEEP.replace("clusters = 10\nchunk = 3", f"clusters = 40\nchunk = {chunk}"))
        _, store, _ = run_all(path, tmp_path / f"out{chunk}")
        aggregate(store)
        tables.append(pl.read_parquet(tmp_path / f"out{chunk}" / "summary.parquet"))
    assert tables[0]["cell"].to_list() == tables[1]["cell"].to_list()
    assert_frame_equal(tables[0], tables[1])
