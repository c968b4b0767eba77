"""Hostile input, second hunt: paths that name another file, labels that hide a value,
readings a rule cannot take, outputs written before a refusal, and inputs that crashed
instead of being refused.  Each refusal is one line, exit 2 (``ConfigError`` in the
API), before any work and before any output is written."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tracemalloc

import polars as pl
import pytest

import fastsim
from fastsim.api import compare, simulate
from conftest import held_elsewhere, one_line
from fastsim.cli import main
from fastsim.config import PolicyConfig, SchedulerConfig, SimConfig, WorkloadConfig
from fastsim.errors import ConfigError
from fastsim.io import write_parquet
from fastsim.replay.monitor import StopMonitor
from fastsim.resources import shipped, sweep_file

LOG = "job_id,step,score,loss\na,1,0.5,{}\na,2,0.6,{}\na,3,0.5,{}\na,4,0.4,{}\n"


# -- a path names the file it names ----------------------------------------------------------
def test_a_missing_sweep_path_is_not_the_shipped_sweep_of_its_name(tmp_path, capsys):
    out = tmp_path / "o"
    one_line(capsys, ["sweep", str(tmp_path / "no_such_dir" / "k_sweep.toml"), "--out", str(out)],
             "no such file")
    assert not out.exists()
    shipped_k = shipped("sweeps", "k_sweep.toml")
    assert sweep_file("k_sweep") == sweep_file("k_sweep.toml") == shipped_k
    assert sweep_file("sweeps/k_sweep.toml").resolve() == shipped_k.resolve()


def test_outputs_spelled_apart_are_still_one_file(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    os.symlink(tmp_path / "a.parquet", tmp_path / "link.parquet")
    for jobs_out in ("sub/../a.parquet", "link.parquet"):
        one_line(capsys, ["run", "--clusters", "2", "--n-jobs", "10", "--out", "a.parquet",
                          "--jobs-out", jobs_out], "the same file as --out")
    assert not (tmp_path / "a.parquet").exists()


def test_replay_never_writes_over_its_log(tmp_path, capsys):
    log = tmp_path / "log.csv"
    log.write_text(LOG.format(1.0, 0.9, 0.8, 0.7))
    for out in (tmp_path / "sub" / ".." / "log.csv", log):
        (tmp_path / "sub").mkdir(exist_ok=True)
        one_line(capsys, ["replay", str(log), "--out", str(out)], "the same file as the log")
        one_line(capsys, ["replay", str(log), "--summary-out", str(out)], "the same file")
    assert log.read_text() == LOG.format(1.0, 0.9, 0.8, 0.7)


# -- labels tell parameter values apart --------------------------------------------------------
def test_labels_show_the_values_that_make_cells_differ():
    label = lambda spec: SchedulerConfig.parse(spec).label  # noqa: E731
    assert label("tiresias") == label("tiresias:thresholds=16") == "tiresias"
    assert label("tiresias:thresholds=1/500") == "tiresias(thresholds=1/500)"
    assert label("tiresias:thresholds=1") != label("tiresias:thresholds=500")
    pol = lambda spec: PolicyConfig.parse(spec).label  # noqa: E731
    assert pol("stop_at:f=0.65") == "stop_at(f=0.65)"  # the usual labels are unchanged
    assert pol("stop_at:f=0.6500001") == "stop_at(f=0.6500001)"
    assert pol("loss_plateau:w=2,tol=0.01") == "loss_plateau(w=2,tol=0.01)"


# -- loss_plateau reads positive losses only ---------------------------------------------------
@pytest.mark.parametrize("losses,bad", [((0.0, 0.0, 0.0, 0.0), "0"),
                                        ((-1.0, -2.0, -4.0, -8.0), "-1")])
def test_loss_plateau_refuses_a_loss_it_cannot_read(tmp_path, capsys, losses, bad):
    log = tmp_path / "z.csv"
    log.write_text(LOG.format(*losses))
    out = tmp_path / "r.csv"
    one_line(capsys, ["replay", str(log), "--policy", "loss_plateau:w=1,tol=0.01", "--out",
                      str(out)], f"z.csv:2: field 'loss': {bad}; allowed: a positive loss")
    assert not out.exists()
    assert main(["replay", str(log), "--policy", "evalstop:k=2"]) == 0  # scores only: fine
    m = StopMonitor("loss_plateau:w=1,tol=0.01")
    m.observe("a", 1, 0.5, loss=1.0)
    with pytest.raises(ConfigError, match="allowed: a positive loss"):
        m.observe("a", 2, 0.5, loss=losses[1])
    assert not m.observe("a", 2, 0.5, loss=0.99).stop  # the refused call left no trace


# -- a refused run writes nothing ---------------------------------------------------------------
def test_the_api_sweep_checks_its_options_before_writing(tmp_path):
    small = tmp_path / "s.toml"
    small.write_text("clusters = 2\n[base]\nn_jobs = 10\n")
    huge = tmp_path / "h.toml"
    huge.write_text("clusters = 100000\nchunk = 100000\n[base]\nn_jobs = 100000\n"
                    "n_evals = 1000\n")
    for file, options in ((small, {"backend": "bogus"}), (small, {"backend": "dask",
                                                                  "workers": 0}), (huge, {})):
        out = tmp_path / f"o_{file.stem}_{len(options)}"
        with pytest.raises(ConfigError):
            fastsim.sweep(file, out, **options)
        assert not out.exists()


def test_costaware_sweep_names_stay_inside_out_and_hold_its_lock(tmp_path, capsys,
                                                                 monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = ('name = "{}"\nexperiment = "sgd"\nreplications = 2\n[base]\nn = 16\nd = 2\n'
            'eps = 0.05\nmax_steps = 200\n')
    (tmp_path / "s.toml").write_text(spec.format("../../escaped"))
    one_line(capsys, ["costaware", "sweep", "s.toml", "--out", "out"], 'name="../../escaped"')
    assert not any(tmp_path.parent.parent.glob("escaped*")) and not (tmp_path / "out").exists()
    (tmp_path / "s.toml").write_text(spec.format("ok"))
    (tmp_path / "out").mkdir()
    with held_elsewhere(tmp_path / "out"):
        one_line(capsys, ["costaware", "sweep", "s.toml", "--out", "out"], "is in use by pid")
        assert not list((tmp_path / "out").glob("*.parquet"))


def test_the_api_costaware_sweep_holds_a_sweep_directory_as_the_command_does(tmp_path,
                                                                            monkeypatch):
    # fastsim.costaware.run_costaware_sweep wrote its tables into a sweep directory that
    # another process held, and into its cells/, where the command refuses both
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.toml").write_text('name = "ok"\nexperiment = "sgd"\nreplications = 2\n'
                                     '[base]\nn = 16\nd = 2\neps = 0.05\nmax_steps = 200\n')
    (tmp_path / "sw" / "cells").mkdir(parents=True)
    (tmp_path / "sw" / "sweep.json").write_text('{"grid_hash": "0"}')
    with pytest.raises(ConfigError, match=r"^out_dir=sw/cells: among the files of the sweep"):
        fastsim.costaware.run_costaware_sweep("s.toml", "sw/cells", progress=False)
    with held_elsewhere(tmp_path / "sw"):
        with pytest.raises(ConfigError, match="sw is in use by pid"):
            fastsim.costaware.run_costaware_sweep("s.toml", "sw/ca", progress=False)
    assert not list((tmp_path / "sw").rglob("*.parquet")) and not (tmp_path / "sw" / "ca").exists()


def test_a_failed_api_costaware_sweep_leaves_no_directory_held(tmp_path, monkeypatch):
    # its locks were locals of the frame that the kept exception's traceback holds (IPython
    # keeps the last one): the directories stayed held, every other process refused
    import fcntl

    import fastsim.costaware.sweep as cs

    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.toml").write_text('name = "ok"\nexperiment = "sgd"\nreplications = 2\n'
                                     '[base]\nn = 16\nd = 2\neps = 0.05\nmax_steps = 200\n')
    (tmp_path / "sw" / "cells").mkdir(parents=True)
    (tmp_path / "sw" / "sweep.json").write_text('{"grid_hash": "0"}')

    def fails(*args, **kwargs):
        raise RuntimeError("a point failed")
    monkeypatch.setattr(cs, "run_sgd", fails)
    with pytest.raises(RuntimeError, match="a point failed") as kept:
        cs.run_costaware_sweep("s.toml", "sw/ca", progress=False)
    assert kept.traceback  # still held here, as a notebook holds it
    # the directory the failed run made is gone with its lock; the outer one is not held
    assert not (tmp_path / "sw" / "ca").exists()
    fd = os.open(tmp_path / "sw" / "sweep.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError while held
    finally:
        os.close(fd)
    (tmp_path / "sw" / "ca").mkdir()  # there before the run: kept, without the lock it made
    with pytest.raises(RuntimeError, match="a point failed"):
        cs.run_costaware_sweep("s.toml", "sw/ca", progress=False)
    assert (tmp_path / "sw" / "ca").is_dir()
    assert not (tmp_path / "sw" / "ca" / "sweep.lock").exists()


def test_a_sweep_keeps_the_users_own_tmp_files(tmp_path):
    from fastsim.io import _tmp_path
    from fastsim.sweep.store import SweepStore

    mine = tmp_path / "draft.tmp"
    mine.write_text("important")
    ours = _tmp_path(tmp_path / "summary.parquet")
    ours.write_text("half written")
    SweepStore(tmp_path, None).remove_temporaries()
    assert mine.read_text() == "important" and not ours.exists()


# -- refused in one line instead of a traceback, a hang or all the memory -------------------
def test_a_huge_grid_is_refused_before_it_is_built(tmp_path):
    axes = ("sigma", "base_rate", "loss_sigma", "est_sigma", "log_sd", "kl_gamma",
            "hack_sharpness", "sigma_spread")
    values = ", ".join(f"0.{i:03d}" for i in range(1, 11))
    p = tmp_path / "g.toml"
    p.write_text("[axes]\n" + "".join(f"{a} = [{values}]\n" for a in axes))
    tracemalloc.start()
    try:
        with pytest.raises(ConfigError, match="100000000 cells; at most 10000"):
            fastsim.sweep(p, tmp_path / "o")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 << 20  # the 10^8 combinations were never listed


BIG = "1" + "0" * 400


@pytest.mark.parametrize("body,needle", [
    (f"[base]\nsigma = {BIG}", "sigma="), (f'[base]\npolicy = "stop_at"\nf = {BIG}', "f="),
    (f"[base]\nmix = [0, 0, {BIG}]", "mix="), (f"[base]\nk = {BIG}", "k="),
    (f'[base]\nscheduler = "tiresias"\nthresholds_gpu_h = [{BIG}]', "thresholds_gpu_h="),
    ("[base]\nsigma = " + "[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ("[base]\nsigma = " + "{a = " * 5_000 + "1" + "}" * 5_000, "nested too deeply"),
])
def test_huge_integers_and_deep_nesting_in_a_sweep_file(tmp_path, capsys, body, needle):
    p = tmp_path / "t.toml"
    p.write_text("clusters = 2\n" + body + "\n")
    one_line(capsys, ["sweep", str(p), "--out", str(tmp_path / "o")], needle)
    assert not (tmp_path / "o").exists()
    with pytest.raises(ConfigError):
        SimConfig.from_specs(sigma=10**400)


@pytest.mark.parametrize("command", [["sweep"], ["costaware", "sweep"]])
@pytest.mark.parametrize("body", ["", "# every key is a comment\n\n"])
def test_an_empty_sweep_file_is_refused_not_run_as_the_defaults(tmp_path, capsys, command,
                                                                  body):
    p = tmp_path / "t.toml"  # truncated, or never saved: it ran a 2-cell default sweep
    p.write_text(body)
    one_line(capsys, [*command, str(p), "--out", str(tmp_path / "o")],
             f"{p}: the sweep file holds no key (empty, or comments only); allowed: at least "
             "one key")
    assert not (tmp_path / "o").exists()


def _manifest(d, name="k_sweep") -> str:
    """A manifest of a grid of no cell, as an older fastsim wrote it (no table hashes), so
    that its tables are checked as tables; the grid's hash."""
    import json

    from fastsim.sweep.grid import grid_hash

    grid = {"clusters": 1, "chunk": 1, "seed": 0, "cells": []}
    (d / "sweep.json").write_text(json.dumps({
        "format": 3, "name": name, "grid_hash": grid_hash(grid), "axes": [], "cells": [],
        "grid": grid}))
    return grid_hash(grid)


def test_figures_refuse_a_damaged_table_by_name(tmp_path, capsys):
    d = tmp_path / "r"
    d.mkdir()
    _manifest(d)
    pl.DataFrame({"x": list(range(1000))}).write_parquet(d / "summary.parquet")
    data = (d / "summary.parquet").read_bytes()
    (d / "summary.parquet").write_bytes(data[:len(data) // 2])
    one_line(capsys, ["figures", str(d), "--formats", "png"], "summary.parquet: damaged")
    (d / "summary.parquet").write_bytes(data)
    (d / "sweep.json").write_text('{"name": ')
    one_line(capsys, ["figures", str(d), "--formats", "png"], "sweep.json: damaged")
    assert not (d / "figures").exists() or not any((d / "figures").iterdir())


def test_figures_refuse_a_damaged_page_and_two_copies_of_one_sweep(tmp_path, capsys):
    d = tmp_path / "r"
    (d / "a").mkdir(parents=True)
    h = _manifest(d / "a")
    # fastsim's writer: a table without page checksums is refused before its pages are read
    write_parquet(pl.DataFrame({"x": [float(i) for i in range(5000)]}), d / "a" / "summary.parquet")
    data = bytearray((d / "a" / "summary.parquet").read_bytes())
    good = bytes(data)
    for i in range(100, 400):  # a damaged data page behind an intact footer
        data[i] ^= 0xFF
    (d / "a" / "summary.parquet").write_bytes(bytes(data))
    one_line(capsys, ["figures", str(d), "--formats", "png"], "summary.parquet: damaged")
    (d / "a" / "summary.parquet").write_bytes(good)
    one_line(capsys, ["figures", str(d), "--formats", "png"], "it names no grid")
    _tagged(pl.read_parquet(d / "a" / "summary.parquet"), d / "a" / "summary.parquet", h)
    (d / "b").mkdir()  # a backup copy: which one is meant is not for figures to guess
    for name in ("sweep.json", "summary.parquet"):
        (d / "b" / name).write_bytes((d / "a" / name).read_bytes())
    one_line(capsys, ["figures", str(d), "--formats", "png"], "two directories hold sweep 'k_sweep'")
    assert not (d / "figures").exists()


def _tagged(df, path, grid_hash):
    from fastsim.io import table_writer
    from fastsim.sweep.store import GRID_KEY

    table_writer(df, path, {GRID_KEY: grid_hash})(path)


def test_figures_refuse_a_table_aggregated_from_another_grid(tmp_path, capsys):
    """A summary copied over from another run of the same sweep name (another grid) is
    refused by both hashes, not drawn as this sweep's."""
    d = tmp_path / "r"
    d.mkdir()
    h = _manifest(d)
    _tagged(pl.DataFrame({"x": [1.0]}), d / "summary.parquet", "bbbbbbbbbbbbbbbb")
    one_line(capsys, ["figures", str(d), "--formats", "png"],
             f"it is of grid bbbbbbbbbbbb, but the manifest beside it is grid {h[:12]}")
    assert not (d / "figures").exists()


def test_a_sweeps_tables_name_its_grid(tmp_path):
    from fastsim.io import parquet_metadata
    from fastsim.sweep.store import GRID_KEY

    p = tmp_path / "s.toml"
    p.write_text('name = "tiny"\nclusters = 2\n[base]\nn_jobs = 10\n'
                 '[axes]\npolicy = ["none", "evalstop:k=2"]\n')
    out = tmp_path / "o"
    fastsim.sweep(p, out)
    import json
    grid_hash = json.loads((out / "sweep.json").read_text())["grid_hash"]
    for table in ("summary.parquet", "cells.parquet", "jct_hist.parquet"):
        assert parquet_metadata(out / table)[GRID_KEY] == grid_hash


def test_commands_refuse_to_overwrite_what_they_read(tmp_path, capsys):
    t = tmp_path / "t.parquet"
    pl.DataFrame({"x": [1]}).write_parquet(t)
    one_line(capsys, ["traces", "compare-sim", str(t), "--out", str(t)], "the same file as RUNS")
    one_line(capsys, ["traces", "fit-curves", str(t), "--out", str(t)], "the same file as TRACES")
    tr = tmp_path / "d" / "traces.parquet"
    tr.parent.mkdir()
    tr.write_bytes(t.read_bytes())
    one_line(capsys, ["detectors", "--quick", "--traces", str(tr), "--out", str(tr.parent)],
             "the same file as --traces")
    one_line(capsys, ["detectors", "--quick", "--out", str(t)], "exists and is not a directory")
    assert pl.read_parquet(t).equals(pl.read_parquet(tr))


def test_detectors_writes_its_tables_and_doc_all_or_none(tmp_path, capsys, monkeypatch):
    """A write that fails part-way (here the fifth of six) leaves no table of the new run
    beside the old ones, and the doc as it was."""
    from fastsim import detector_bounds, detectors, io
    from fastsim import detectors_cli as dc
    table = pl.DataFrame({"x": [1]})
    # the command imports these when it runs (its parser imports none of them)
    monkeypatch.setattr(detectors, "run_grid", lambda *a, **k: table)
    monkeypatch.setattr(detector_bounds, "bounds", lambda *a, **k: table)
    monkeypatch.setattr(dc, "markdown_table", lambda *a, **k: "table")
    monkeypatch.setattr(dc, "update_doc", lambda doc, text, *a: f"<{text}>")
    real = io.bytes_writer

    def failing(data):
        if data == b"table":  # table_full.md; table.md is the same text and written before
            failing.calls += 1
            if failing.calls == 2:
                return lambda tmp: (_ for _ in ()).throw(OSError(28, "No space left on device"))
        return real(data)
    failing.calls = 0
    monkeypatch.setattr(io, "bytes_writer", failing)
    doc = tmp_path / "doc.md"
    doc.write_text("old doc")
    out = tmp_path / "det"
    one_line(capsys, ["detectors", "--quick", "--doc", str(doc), "--out", str(out)],
             "No space left on device")
    # nor the directory it made for them, left empty
    assert not out.exists() and doc.read_text() == "old doc"


def test_reproduce_checks_every_sweep_directory_before_writing_any(tmp_path, capsys):
    out = tmp_path / "r"
    (out / "noise" / "cells" / "cell=x").mkdir(parents=True)  # a result: another grid's
    (out / "noise" / "cells" / "cell=x" / "chunk-0000.json").write_text("{}")
    (out / "noise" / "sweep.json").write_text('{"grid_hash": "x", "name": "noise", "grid": {}}')
    one_line(capsys, ["reproduce", "--clusters", "2", "--out", str(out), "--no-figures"],
             "noise/sweep.json was written for a different grid")
    assert sorted(p.name for p in out.iterdir()) == ["noise"]  # headline's was not written
    (out / "noise" / "sweep.json").unlink()
    shutil.rmtree(out / "noise" / "cells")
    one_line(capsys, ["reproduce", "--clusters", "2", "--out", str(out), "--no-figures",
                      "--report", str(out / "headline" / "sweep.json")],
             "inside the sweep directory")


def test_reproduce_never_writes_its_report_over_a_figure_or_extract_it_makes(tmp_path, capsys):
    """`fastsim reproduce --report OUT/figures/headline.png` drew the figure, then wrote the
    report over it, and exited 0: the figure was Markdown."""
    out = tmp_path / "r"
    argv = ["reproduce", "--clusters", "2", "--out", str(out), "--no-progress"]
    one_line(capsys, [*argv, "--report", str(out / "figures" / "headline.png")],
             f"--report {out / 'figures' / 'headline.png'}: the same file as the figure")
    report = tmp_path / "f" / ".." / "f" / "jct_cdf.pdf"
    one_line(capsys, [*argv, "--figures-dir", str(tmp_path / "f"), "--report", str(report)],
             "the same file as the figure")
    one_line(capsys, [*argv, "--report", str(out / "extracts" / "trajectory_jobs.parquet")],
             "the same file as the extract")
    # and not over the lock the run holds (refused only once a first run had made it)
    one_line(capsys, [*argv, "--report", str(out / "sweep.lock")],
             "the same file as the lock file")
    assert not out.exists() and not (tmp_path / "f").exists()


def test_reproduce_never_takes_a_directory_it_makes_for_its_report(tmp_path, capsys):
    """`fastsim reproduce --figures-dir F --report F` ran every sweep, drew every figure into
    F, then failed: 'cannot write F (Is a directory)'."""
    out = tmp_path / "r"
    argv = ["reproduce", "--clusters", "2", "--out", str(out), "--no-progress", "--report"]
    for report, extra in ((tmp_path / "f", ["--figures-dir", str(tmp_path / "f")]),
                          (out, []), (out / "headline", []), (out / "extracts", [])):
        one_line(capsys, [*argv, str(report), *extra],
                 f"--report {report}: the same file as the directory {report} the run makes")
    assert not out.exists() and not (tmp_path / "f").exists()


def test_reproduce_and_figures_name_their_flags_as_typed(tmp_path, capsys):
    out = tmp_path / "r"
    # before: --clusters 0 was taken for no value, and the run went on with 2,000
    one_line(capsys, ["reproduce", "--clusters", "0", "--out", str(out), "--no-figures"],
             "--clusters=0 is invalid; allowed: at least 2 per cell")
    assert not out.exists()
    one_line(capsys, ["reproduce", "--quick", "--clusters", "1", "--out", str(out)],
             "--clusters=1 is invalid")
    # refused by the sweep files' check, it said 'allowed: an integer from 1 to ...'
    one_line(capsys, ["reproduce", "--clusters", str(10**20), "--out", str(out)],
             f"--clusters={10**20} is invalid; allowed: at least 2 per cell (intervals need "
             "two replications), at most 2^63-1")
    one_line(capsys, ["figures", str(tmp_path), "--formats", "jpg"],  # read 'formats='jpg''
             "--formats=jpg is invalid; allowed: png, pdf, svg")


@pytest.mark.parametrize("value", ["0", "-1", "two", "\u00b2", "\u0662"])  # ² passed isdigit()
def test_a_bad_thread_count_variable_is_one_line(value):
    r = subprocess.run([sys.executable, "-m", "fastsim.cli", "--version"], capture_output=True,
                       text=True, env={**os.environ, "NUMBA_NUM_THREADS": value}, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    from fastsim.kernels.threads import MAX_THREADS

    assert r.stderr.strip().splitlines() == [f"fastsim: error: NUMBA_NUM_THREADS='{value}' is "
                                             f"invalid; allowed: a positive integer up to "
                                             f"{MAX_THREADS} written in digits 0-9, or unset "
                                             "(one thread per core)"]


@pytest.mark.parametrize("value", ["100000", "9999999999999999999"])
def test_a_thread_count_no_machine_can_launch_is_one_line(value):
    """numba launches every thread NUMBA_NUM_THREADS asks for at its first parallel kernel:
    with 100000, fastsim costaware sgd died of a segmentation fault (libgomp: 'Thread
    creation failed' at 40000), and 9999999999999999999 was numba's RuntimeError
    traceback ('Invalid number of threads. This likely indicates a bug in Numba')."""
    from fastsim.kernels.threads import MAX_THREADS

    r = subprocess.run([sys.executable, "-m", "fastsim.cli", "--version"], capture_output=True,
                       text=True, env={**os.environ, "NUMBA_NUM_THREADS": value}, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [
        f"fastsim: error: NUMBA_NUM_THREADS='{value}' is invalid; allowed: a positive integer "
        f"up to {MAX_THREADS} written in digits 0-9, or unset (one thread per core)"]
    ok = subprocess.run([sys.executable, "-m", "fastsim.cli", "--version"], capture_output=True,
                        text=True, env={**os.environ, "NUMBA_NUM_THREADS": str(MAX_THREADS)},
                        timeout=120)
    assert ok.returncode == 0 and ok.stderr == ""


@pytest.mark.parametrize("value", ["100000", "0", "two"])
def test_the_python_api_refuses_a_thread_count_before_any_kernel(value):
    """The command line refused NUMBA_NUM_THREADS=100000, but the Python API took it:
    ``fastsim.sweep(...)`` died of a segmentation fault at its first parallel kernel.  Now
    the kernels' import refuses it in one ValueError line (in a process of its own: the
    crash would have killed this one)."""
    from fastsim.kernels.threads import MAX_THREADS

    code = ("import fastsim\n"
            "cfg = fastsim.SimConfig.from_specs('srtf_est', 'evalstop:k=2')\n"
            "fastsim.simulate(cfg, n_clusters=2)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "NUMBA_NUM_THREADS": value}, timeout=120)
    assert r.returncode == 1, r.stderr
    assert r.stderr.strip().splitlines()[-1] == (
        f"ValueError: NUMBA_NUM_THREADS='{value}' is invalid; allowed: a positive integer up "
        f"to {MAX_THREADS} written in digits 0-9, or unset (one thread per core)"), r.stderr


# what each numba setting allows, and a value of it that runs
_NUMBA_SETTINGS = {
    "NUMBA_DISABLE_JIT": ("0 or unset (fastsim's kernels run compiled)", "0"),
    "NUMBA_OPT": ("0, 1, 2, 3, max (numba's optimisation levels), or unset (3)", "max"),
}


@pytest.mark.parametrize("name,value", [("NUMBA_DISABLE_JIT", "1"), ("NUMBA_DISABLE_JIT", " 1"),
                                        ("NUMBA_OPT", "abc"), ("NUMBA_OPT", " 3"),
                                        ("NUMBA_OPT", "")])
def test_a_numba_setting_fastsim_cannot_run_under_is_one_line(tmp_path, name, value):
    """NUMBA_DISABLE_JIT=1 left the kernels plain functions: an AttributeError traceback
    from their decoration ('function' object has no attribute 'get_call_template').
    NUMBA_OPT=abc was numba's multi-line warning with its traceback, and the run went on
    at its default level.  A value numba takes runs."""
    allowed, taken = _NUMBA_SETTINGS[name]
    r = subprocess.run([sys.executable, "-m", "fastsim.cli", "run", "--clusters", "2",
                        "--out", str(tmp_path / "o.parquet")], capture_output=True, text=True,
                       env={**os.environ, name: value}, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [
        f"fastsim: error: {name}={value!r} is invalid; allowed: {allowed}"]
    assert not list(tmp_path.iterdir())
    ok = subprocess.run([sys.executable, "-m", "fastsim.cli", "--version"],
                        capture_output=True, text=True, env={**os.environ, name: taken},
                        timeout=120)
    assert ok.returncode == 0 and ok.stderr == ""


@pytest.mark.parametrize("layer", ["bogus", ""])
def test_a_threading_layer_numba_does_not_know_is_one_line(tmp_path, layer):
    """numba loads NUMBA_THREADING_LAYER at its first thread launch: 'bogus' was its
    ValueError traceback from fastsim run's memory check; so was '', which numba reads as
    a layer named '' (not as unset)."""
    r = subprocess.run([sys.executable, "-m", "fastsim.cli", "run", "--clusters", "2",
                        "--out", str(tmp_path / "o.parquet")], capture_output=True, text=True,
                       env={**os.environ, "NUMBA_THREADING_LAYER": layer}, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [
        f"fastsim: error: NUMBA_THREADING_LAYER={layer!r} is invalid; allowed: default, safe, "
        "forksafe, threadsafe, tbb, omp, workqueue (one this installation loads: workqueue "
        "always), or unset"]
    assert not list(tmp_path.iterdir())


def test_a_threading_layer_that_does_not_load_is_one_line(monkeypatch):
    """NUMBA_THREADING_LAYER=tbb without TBB installed: numba's ValueError traceback, with
    a multi-line hint; now its first line, naming the variable."""
    from numba.np.ufunc import parallel

    from fastsim.kernels.threads import numba_variables_error

    def no_layer():
        raise ValueError("No threading layer could be loaded.\nHINT:\nIntel TBB is required")
    monkeypatch.setattr(parallel, "_launch_threads", no_layer)
    monkeypatch.setenv("NUMBA_THREADING_LAYER", "tbb")
    monkeypatch.delenv("NUMBA_NUM_THREADS", raising=False)
    assert numba_variables_error() == (
        "NUMBA_THREADING_LAYER='tbb' cannot be loaded (No threading layer could be loaded.); "
        "allowed: default, safe, forksafe, threadsafe, tbb, omp, workqueue (one this "
        "installation loads: workqueue always), or unset")
    monkeypatch.setenv("NUMBA_THREADING_LAYER", "default")
    assert numba_variables_error() is None


@pytest.mark.parametrize("layer", [None, "omp"])
def test_a_threading_layer_priority_numba_refuses_is_one_line(tmp_path, layer):
    """numba refuses a NUMBA_THREADING_LAYER_PRIORITY other than an order of tbb, omp and
    workqueue at its first thread launch: a traceback with no layer set, and with one set
    the refusal blamed NUMBA_THREADING_LAYER='omp'."""
    env = {**os.environ, "NUMBA_THREADING_LAYER_PRIORITY": "omp"}
    env.pop("NUMBA_THREADING_LAYER", None)
    if layer is not None:
        env["NUMBA_THREADING_LAYER"] = layer
    r = subprocess.run([sys.executable, "-m", "fastsim.cli", "run", "--clusters", "2",
                        "--n-jobs", "10", "--out", str(tmp_path / "o.parquet")],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [
        "fastsim: error: NUMBA_THREADING_LAYER_PRIORITY='omp' is invalid; allowed: tbb, omp "
        "and workqueue, each once, in any order, separated by spaces, or unset"]
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("layer", ["OMP", "Workqueue", "DEFAULT"])
def test_a_threading_layer_is_read_in_any_case(monkeypatch, layer):
    """numba lowercases the layer's name, and runs NUMBA_THREADING_LAYER=OMP on omp; it
    was refused as a name numba does not know."""
    from numba.np.ufunc import parallel

    from fastsim.kernels.threads import numba_variables_error

    monkeypatch.setattr(parallel, "_launch_threads", lambda: None)
    monkeypatch.setenv("NUMBA_THREADING_LAYER", layer)
    monkeypatch.delenv("NUMBA_NUM_THREADS", raising=False)
    monkeypatch.delenv("NUMBA_THREADING_LAYER_PRIORITY", raising=False)
    assert numba_variables_error() is None


@pytest.mark.parametrize("name", ["FASTSIM_NO_CACHE", "FASTSIM_NO_PARALLEL", "FASTSIM_PROGRESS"])
@pytest.mark.parametrize("value", ["yes", "true", " 1"])
def test_a_switch_variable_other_than_0_or_1_is_one_line(tmp_path, monkeypatch, capsys, name,
                                                          value):
    """Only "1" turns these on: FASTSIM_NO_CACHE=yes kept the cache, FASTSIM_NO_PARALLEL=true
    the threads, FASTSIM_PROGRESS=yes the bar off, all without a word."""
    monkeypatch.setenv(name, value)
    out = tmp_path / "c.parquet"
    assert main(["run", "--clusters", "2", "--n-jobs", "10", "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"fastsim: error: {name}={value!r} is invalid; allowed: 1 (on), 0 or unset (off)"]
    assert not out.exists()
    monkeypatch.setenv(name, "0")
    assert main(["run", "--clusters", "2", "--n-jobs", "10", "--no-progress"]) == 0


@pytest.mark.parametrize("argv,needle", [
    (["run", "--clusters", "1e3"], "--clusters='1e3' is invalid; allowed: an integer written"),
    (["sweep", "k_sweep", "--out", "o", "--chunk", "2.5"], "--chunk='2.5' is invalid"),
    (["runn"], "command 'runn' is invalid (did you mean run?); allowed: run, sweep"),
])
def test_usage_errors_are_one_line(capsys, argv, needle):
    one_line(capsys, argv, needle)


def test_api_arguments_of_the_wrong_type(tmp_path):
    cfg = SimConfig.from_specs("srtf_est", "evalstop:k=2", n_jobs=10)
    for call, needle in [(lambda: compare(cfg, baseline=None), "baseline=None"),
                         (lambda: compare(cfg, baseline=5), "baseline=5"),
                         (lambda: SimConfig(policy="evalstop"), "allowed: a PolicyConfig"),
                         (lambda: SimConfig(workload=None), "workload=None"),
                         (lambda: SimConfig.from_dict(None), "config=None"),
                         (lambda: SimConfig.from_dict({"workload": None}), "workload=None"),
                         (lambda: simulate(cfg, 2, extract=5), "extract=5")]:
        with pytest.raises(ConfigError, match=needle):
            call()


def test_a_chunk_beyond_the_clusters_is_sized_as_it_runs(tmp_path):
    from fastsim.sweep.grid import load_sweep
    from fastsim.sweep.runner import check_sweep_memory

    p = tmp_path / "s.toml"
    p.write_text("clusters = 10\n[base]\nn_jobs = 10\n")
    check_sweep_memory(load_sweep(p, chunk=10**22))  # ten clusters run: nothing to refuse


def test_a_peak_before_any_evaluation_is_refused():
    with pytest.raises(ConfigError, match="lo >= 0.001"):
        WorkloadConfig(ustar_hacking=(1e-300, 1e-300))
    WorkloadConfig(ustar_hacking=(0.001, 0.5))


@pytest.mark.parametrize("argv,needle", [
    (["--traces", "BAD"], "not a readable Parquet table"),
    (["--trace-noise", "nan"], "--trace-noise='nan' is invalid"),
    (["--trace-noise", "-1"], "--trace-noise=-1 is invalid"),
    (["--clusters", "99999999999999999999999"], "allowed: an integer from 2 to 1,000,000"),
    (["--seed", "99999999999999999999999"], "allowed: an integer from 0 to 2^63-1"),
    (["--doc", "/no/such/doc.md"], "--doc /no/such/doc.md: no such file"),
])
def test_detectors_checks_every_input_before_its_grid(tmp_path, capsys, argv, needle):
    """The synthetic grid takes minutes: a bad trace file, noise, size or doc is refused
    before it, not after."""
    out = tmp_path / "det"
    (tmp_path / "bad.parquet").write_text("not parquet at all\n")
    argv = [str(tmp_path / "bad.parquet") if a == "BAD" else a for a in argv]
    one_line(capsys, ["detectors", "--out", str(out), *argv], needle)
    assert not out.exists()


def _toy_traces(n_runs=4, n_evals=5) -> pl.DataFrame:
    """A small table of the shape ``fastsim traces toy-rlhf`` writes (the columns the
    trace commands read), the first run hacking."""
    rows = [{"job_id": f"r{r}", "step": 15 * e, "score": 0.1 * e + 0.01 * r,
             "truth_gold": 0.1 * e, "truth_kl_nats": 0.2 * e, "truth_hacking": r == 0,
             "seed": r} for r in range(n_runs) for e in range(n_evals)]
    return pl.DataFrame(rows)


_BAD_TRACES = {
    "no rows": (lambda t: t.head(0), "no rows"),
    "another table": (lambda t: t.drop("step", "score"), "missing columns ['score', 'step']"),
    "text labels": (lambda t: t.with_columns(pl.col("truth_hacking").cast(pl.String)),
                    "column 'truth_hacking' holds String; allowed: booleans"),
    "twice": (lambda t: pl.concat([t, t]), "row 1: run 'r0' step 0 appears twice"),
    "nan score": (lambda t: t.with_columns(pl.when(pl.int_range(pl.len()) == 2)
                                           .then(float("nan")).otherwise("score").alias("score")),
                  "row 3: score is nan"),
    "mixed label": (lambda t: t.with_columns(pl.when(pl.int_range(pl.len()) == 1)
                                             .then(False).otherwise("truth_hacking")
                                             .alias("truth_hacking")),
                    "run 'r0' has both truth_hacking values"),
}


@pytest.mark.parametrize("case", sorted(_BAD_TRACES))
@pytest.mark.parametrize("command", ["detectors", "fit-curves"])
def test_a_damaged_trace_table_is_one_line_before_any_work(tmp_path, capsys, case, command):
    """A trace table that toy-rlhf could not have written is refused naming the file and
    what is wrong: it was a polars or numpy traceback (no rows, another table), or read
    silently wrong (the text 'false' counted as a hacking run; a table concatenated
    twice read as runs of twice the evaluations; a NaN score made the noise NaN and the
    error named a policy threshold)."""
    damage, needle = _BAD_TRACES[case]
    p = tmp_path / "traces.parquet"
    damage(_toy_traces()).write_parquet(p)
    out = tmp_path / "det"
    argv = (["detectors", "--quick", "--traces", str(p), "--out", str(out)]
            if command == "detectors" else ["traces", "fit-curves", str(p), "--boot", "0"])
    one_line(capsys, argv, needle)
    assert not out.exists()


def test_detectors_refuses_runs_of_unequal_length(tmp_path, capsys):
    p = tmp_path / "traces.parquet"
    t = _toy_traces()
    t.filter(~((pl.col("job_id") == "r1") & (pl.col("step") == 60))).write_parquet(p)
    one_line(capsys, ["detectors", "--quick", "--traces", str(p), "--out", str(tmp_path / "d")],
             "run 'r1' has 4 evaluations, run 'r0' 5; allowed: the same number for every run")


def test_detectors_refuses_a_run_of_several_seeds(tmp_path, capsys):
    """A run's seed was read from its first row: a table whose seed column changed within a
    run (a hand-edited one) gave runs of other seeds than their rows say, and intervals
    that resample seeds counted the wrong units, without a word."""
    p = tmp_path / "traces.parquet"
    t = _toy_traces()
    t.with_columns(pl.when((pl.col("job_id") == "r1") & (pl.col("step") == 60)).then(0)
                   .otherwise(pl.col("seed")).alias("seed")).write_parquet(p)
    one_line(capsys, ["detectors", "--quick", "--traces", str(p), "--out", str(tmp_path / "d")],
             "run 'r1' has several seeds; allowed: one seed per run")


@pytest.mark.parametrize("damage,needle", [
    (lambda r: r.with_columns(pl.col("truth_hacking").cast(pl.String)),
     "column 'truth_hacking' holds String"),
    (lambda r: pl.concat([r, r]), "row 1: run 'r0' appears twice"),
    (lambda r: r.with_columns(pl.lit(float("nan")).alias("eval_noise_sd")),
     "row 1: eval_noise_sd is nan"),
    # settings derived from the runs named as such (they named ustar_hacking=, sigma=, which
    # the user never wrote)
    (lambda r: r.with_columns(pl.lit(0).alias("truth_gold_peak_step")),
     "runs.parquet: the simulator setting derived from the traces (the hacking runs' "
     "truth_gold_peak_step / final_step) is refused: ustar_hacking=(0.0, 0.0) is invalid"),
    (lambda r: r.with_columns(pl.lit(1e299).alias("eval_noise_sd")),
     "runs.parquet: the simulator setting derived from the traces (the median eval_noise_sd / "
     "gold_gain, on the simulator's scale) is refused: sigma="),
])
def test_compare_sim_refuses_a_damaged_runs_table(tmp_path, capsys, damage, needle):
    runs = pl.DataFrame({"job_id": ["r0", "r1"], "truth_hacking": [True, False],
                         "n_evals": [5, 5], "eval_noise_sd": [0.02, 0.03],
                         "gold_gain": [1.0, 1.0], "truth_gold_peak_step": [30, 60],
                         "final_step": [60, 60]})
    p = tmp_path / "runs.parquet"
    damage(runs).write_parquet(p)
    one_line(capsys, ["traces", "compare-sim", str(p), "--clusters", "2"], needle)


@pytest.mark.parametrize("body,needle", [
    ("job_id,step,score,job_type\na,1,0.5,RLFH\na,2,0.4,RLFH\n", "l.csv:2: field 'job_type'"),
    ("job_id,step,score,time_h\na,1,0.5,1\na,2,0.4,inf\n", "l.csv:3: field 'time_h': inf"),
])
def test_replay_refuses_a_mistyped_job_type_and_an_infinite_time(tmp_path, capsys, body,
                                                                  needle):
    log = tmp_path / "l.csv"
    log.write_text(body)
    one_line(capsys, ["replay", str(log)], needle)


def test_stop_monitor_arguments():
    """The live monitor's arguments: one line naming the argument, as the CLI's."""
    import numpy as np

    m = StopMonitor("evalstop:k=2")
    for call, needle in [(lambda: m.observe(["a"], 1, 0.5), "job_id = ['a']"),
                         (lambda: m.reset(["a"]), "job_id = ['a']"),
                         (lambda: m.observe(True, 1, 0.5), "job_id = True"),
                         (lambda: m.observe("b", 1, 0.5, loss="abc"), "loss = 'abc'"),
                         (lambda: m.observe("b", 1, "0.5"), "score = '0.5'"),
                         (lambda: StopMonitor("stop_at:f=0.5", planned_steps="100"),
                          "planned_steps = '100'"),
                         (lambda: StopMonitor("evalstop:k=2", planned_steps=True),
                          "planned_steps = True"),
                         (lambda: StopMonitor(5), "policy = 5")]:
        with pytest.raises(ConfigError, match=needle.replace("[", r"\[").replace("]", r"\]")):
            call()
    assert m.observe("c", np.float32(3.0), np.float32(0.5)).eval_index == 1  # numpy scalars


@pytest.mark.parametrize("argv,needle", [
    (["ratios", "--reg", "1e308"], "--reg=1e308 is invalid; allowed: a number in [0, 1e+06]"),
    (["ratios", "--n", "1000000", "--d", "10000"], "--n x --d = 10000000000 is too large"),
    (["ratios", "--seed", "99999999999999999999999"], "is invalid; allowed: an integer from 0 "
     "to 2^63-1"),
    (["subset", "--check-seed", "-1"], "--check-seed=-1 is invalid"),
    (["subset", "--check-instances", "99999999999999999999"], "--check-instances="),
    # each in range, together hours of exact search
    (["subset", "--check-n", "22", "--check-instances", "100000"],
     "--check-instances=100000 with --check-n=22 enumerate 419,430,400,000 subsets; allowed: "
     "check-instances x 2^check-n at most 4,294,967,296"),
    (["subset", "--gammas", "inf"], "--gammas='inf': 'inf' is invalid; allowed: bias budgets"),
    # 1 drops every sample: SGD on none was refused after the check, as a bool mask
    (["subset", "--gammas", "0.1,1"], "--gammas=0.1,1 is invalid; allowed: a fraction of mean(G) "
                                      "from 0 to 0.999999999 (1 allows dropping every sample, "
                                      "leaving none"),
    # 1e308 * mean(G) overflowed to an infinite budget after the check line was printed
    (["subset", "--gammas", "0.1,1e308"], "--gammas=0.1,1e308 is invalid; allowed: a fraction "
                                           "of mean(G) from 0 to 0.999999999 (1 allows"),
    # below 1, yet within the budget's 1e-12 slack of it: it dropped every sample too, and
    # was refused after the check line, as a bad bool mask, naming no option
    (["subset", "--gammas", "0.999999999999"], "--gammas=0.999999999999 is invalid; allowed: "
                                               "a fraction of mean(G) from 0 to 0.999999999"),
])
def test_costaware_numbers_are_checked_before_work(capsys, argv, needle):
    assert one_line(capsys, ["costaware", *argv], needle) == ""  # nothing printed before


def test_costaware_sweep_gamma_fracs_are_checked_when_the_file_is_read(tmp_path):
    from fastsim.costaware.sweep import load_costaware_sweep

    p = tmp_path / "s.toml"
    p.write_text('experiment = "subset"\ngamma_fracs = [0.01, 2.0]\n[axes]\nn = [200]\n')
    with pytest.raises(ConfigError, match=r"^s.toml: gamma_fracs=2.0 is invalid; "
                                        r"allowed: a fraction"):
        load_costaware_sweep(p)


def test_api_flags_and_paths_are_checked(tmp_path):
    cfg = SimConfig.from_specs("fifo", "none", n_jobs=10)
    with pytest.raises(ConfigError, match="keep_jobs='no' is invalid; allowed: True or False"):
        simulate(cfg, 2, keep_jobs="no")
    p = tmp_path / "s.toml"
    p.write_text("clusters = 2\nchunk = 2\n[base]\nn_jobs = 10\n[axes]\npolicy = ['none']\n")
    for args, needle in (((p, None), "out=None is invalid; allowed: a path"),
                         ((None, tmp_path / "o"), "file=None is invalid"),
                         ((p, tmp_path / "o"), "keep_jobs='no' is invalid")):
        with pytest.raises(ConfigError, match=needle):
            fastsim.sweep(*args, keep_jobs="no")
    with pytest.raises(ConfigError, match="progress='no' is invalid; allowed: True, False or None"):
        fastsim.sweep(p, tmp_path / "o", progress="no")  # it drew progress bars
    assert not (tmp_path / "o").exists()


def test_an_output_directory_that_is_a_file_is_refused_before_work(tmp_path, capsys):
    f = tmp_path / "afile"
    f.write_text("x")
    (tmp_path / "r").mkdir()
    one_line(capsys, ["figures", str(tmp_path / "r"), "--out", str(f)], "exists and is not a directory")
    assert one_line(capsys, ["costaware", "ratios", "--out", str(f)],
                    "exists and is not a directory") == ""  # no table printed first
    assert f.read_text() == "x"


def test_a_figure_is_written_whole_or_not_at_all(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fastsim.figures import _style as S

    fig, ax = plt.subplots()
    ax.plot([0, 1])
    fig.savefig = lambda *a, **k: (_ for _ in ()).throw(OSError(28, "No space left on device"))
    with pytest.raises(ConfigError, match="No space left on device"):
        S.save(fig, tmp_path, "f", ("png", "pdf"))
    assert list(tmp_path.iterdir()) == []


def test_a_damaged_trace_table_is_one_line(tmp_path, capsys):
    t = tmp_path / "traces.parquet"
    pl.DataFrame({"x": [float(i) for i in range(5000)]}).write_parquet(t, statistics=False)
    data = bytearray(t.read_bytes())
    for i in range(100, 400):  # a damaged data page behind an intact footer
        data[i] ^= 0xFF
    t.write_bytes(bytes(data))
    one_line(capsys, ["traces", "fit-curves", str(t)], "not a readable Parquet table")
    one_line(capsys, ["traces", "compare-sim", str(t)], "not a readable Parquet table")


def test_an_out_directory_through_a_dangling_link_is_one_line(tmp_path, capsys):
    # it said "cannot create (File exists)", with no "allowed"
    sweep = tmp_path / "s.toml"
    sweep.write_text('clusters = 2\n[base]\nn_jobs = 8\n[axes]\npolicy = ["evalstop:k=2"]\n')
    os.symlink(tmp_path / "gone" / "x", tmp_path / "link")
    one_line(capsys, ["sweep", str(sweep), "--out", str(tmp_path / "link"), "--no-progress"],
             "which does not exist; allowed: a directory, or a link to an existing one")
    assert not (tmp_path / "gone").exists()



@pytest.mark.parametrize("command", ["replay", "sweep"])
def test_an_output_beneath_a_dangling_link_is_refused_before_any_work(tmp_path, capsys,
                                                                     command):
    """A dangling link as a directory the output goes in (``--out link/o.parquet``, or a
    sweep's ``--out link/sub``) passed the checks (the nearest existing directory above it
    accepted a file) and was refused after the work, as "cannot write link/o.parquet (File
    exists)", with no "allowed"; now before it, naming the link."""
    os.symlink(tmp_path / "gone" / "x", tmp_path / "link")
    if command == "replay":
        log = tmp_path / "l.csv"
        log.write_text(LOG.format(1.0, 0.9, 0.8, 0.7))
        argv = ["replay", str(log), "--out", str(tmp_path / "link" / "o.parquet")]
    else:
        sweep = tmp_path / "s.toml"
        sweep.write_text('clusters = 2\n[base]\nn_jobs = 8\n[axes]\npolicy = ["evalstop:k=2"]\n')
        argv = ["sweep", str(sweep), "--out", str(tmp_path / "link" / "sub"), "--no-progress"]
    stdout = one_line(capsys, argv, f"{tmp_path / 'link'}: a link to {tmp_path / 'gone' / 'x'}, "
                                    "which does not exist; allowed: a directory, or a link to "
                                    "an existing one")
    assert stdout == "" and not (tmp_path / "gone").exists()

def test_a_trace_noise_of_0_is_read_as_a_measured_0(tmp_path, capsys):
    """Scores equal to gold were run at a measured noise of 0 while ``--trace-noise 0`` was
    refused; sigma0's declared range starts at 0 (the synthetic grid runs noise 0 with
    sigma0 0), so both are taken, alike."""
    from fastsim.detectors_cli import trace_table

    gold = _toy_traces().with_columns(pl.col("truth_gold").alias("score"))
    measured = trace_table(gold, None)
    assert measured["sigma0"].unique().to_list() == [0.0]
    assert measured.equals(trace_table(gold, 0.0))
    # the option's value passes its check (this refusal comes after it)
    one_line(capsys, ["detectors", "--trace-noise", "0", "--out", str(tmp_path / "o")],
             "--trace-noise is given but would not be used")
    one_line(capsys, ["detectors", "--trace-noise", "2e6", "--out", str(tmp_path / "o")],
             "--trace-noise=2e6 is invalid; allowed: a number in [0, 1e+06]")


def test_a_measured_trace_noise_out_of_range_names_the_file(tmp_path, capsys):
    """The median run's noise is checked against sigma0's range as --trace-noise is; the
    refusal names the traces file it was measured on (it said 'traces: measured noise')."""
    p = tmp_path / "traces.parquet"
    _toy_traces().with_columns(
        (pl.col("truth_gold") + pl.when(pl.col("step") % 30 == 0).then(1e7).otherwise(-1e7))
        .alias("score")).write_parquet(p)
    out = tmp_path / "det"
    one_line(capsys, ["detectors", "--quick", "--traces", str(p), "--out", str(out)],
             f"{p}: measured noise=")
    assert not out.exists()


@pytest.mark.parametrize("length", [240, 260])
def test_an_output_name_too_long_to_write_is_refused_before_work(tmp_path, capsys, length):
    # 240: the file system took the name, not its temporary one: refused after the replay;
    # 260: the lookup of the name was an OSError traceback
    log = tmp_path / "log.csv"
    log.write_text(LOG.format(1.0, 0.9, 0.8, 0.7))
    long = "b" * length
    outs = [tmp_path / f"{long}.csv"]
    if length > 255:  # a directory is made under its own name: 240 bytes are one
        outs.append(tmp_path / long / "r.csv")
        one_line(capsys, ["sweep", "k_sweep", "--out", str(tmp_path / long)], "a name of")
    for out in outs:
        assert one_line(capsys, ["replay", str(log), "--out", str(out)], "a name of") == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.csv"]


def test_a_long_directory_name_the_file_system_takes_is_an_output(tmp_path, capsys):
    # a new directory is made under its name (no temporary one): 240 bytes were refused as
    # if it were a file's; a file replaced keeps its temporary name's limit
    log = tmp_path / "log.csv"
    log.write_text(LOG.format(1.0, 0.9, 0.8, 0.7))
    out = tmp_path / ("d" * 240) / "r.csv"
    assert main(["replay", str(log), "--out", str(out)]) == 0
    assert out.is_file()
    capsys.readouterr()
    existing = tmp_path / ("e" * 240 + ".csv")
    existing.write_text("kept")
    one_line(capsys, ["replay", str(log), "--out", str(existing)], "a name of 244 bytes")
    assert existing.read_text() == "kept"


def test_a_costaware_sweep_name_too_long_for_its_files_is_refused_before_work(tmp_path,
                                                                              capsys):
    (tmp_path / "s.toml").write_text(f'name = "{"a" * 230}"\nexperiment = "sgd"\n'
                                     'replications = 2\n[base]\nn = 16\nd = 2\neps = 0.05\n')
    out = tmp_path / "out"
    # the name as typed, and what it may be (it read "a name of 246 bytes; allowed: names of
    # at most 234 bytes", the name with .summary.parquet, which no one typed)
    one_line(capsys, ["costaware", "sweep", str(tmp_path / "s.toml"), "--out", str(out)],
             f"s.toml: name {'a' * 230}: a name of 230 bytes; allowed: names of at most 218 ")
    assert not out.exists()


@pytest.mark.parametrize("argv,needle", [
    (["replay", "{}.csv"], "no such file"), (["sweep", "{}.toml", "--out", "o"], "no such file"),
    (["figures", "{}"], "not a results directory"),
    (["traces", "fit-curves", "{}.parquet"], "no such file"),
    (["traces", "compare-sim", "{}.parquet"], "no such file"),
    (["costaware", "sweep", "{}.toml", "--out", "o"], "no such file"),
    (["costaware", "figures", "{}"], "does not exist")])
def test_an_input_name_too_long_to_look_up_is_one_line(tmp_path, capsys, monkeypatch, argv,
                                                       needle):
    # each was an OSError traceback (File name too long) from pathlib's exists or is_dir
    monkeypatch.chdir(tmp_path)
    one_line(capsys, [a.format("c" * 300) for a in argv], needle)
    with pytest.raises(ConfigError, match="no such file"):
        fastsim.replay("c" * 300 + ".csv", "evalstop:k=2")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("argv", [
    ["run", "--clusters", "2", "--n-jobs", "10", "--out", "{d}/summary.parquet"],
    ["replay", "{log}", "--summary-out", "{d}/summary.txt"],
    ["replay", "{log}", "--out", "{d}/cells/x.csv"],
    ["sweep", "k_sweep", "--out", "{d}/cells"],
    ["figures", "{d}", "--out", "{d}/cells/figs"],
    ["reproduce", "--quick", "--out", "{d}/../r", "--report", "{d}/summary.txt"]])
def test_no_output_replaces_a_sweep_directorys_own_files(tmp_path, capsys, argv):
    # reproduce --report DIR/summary.txt of another sweep wrote its report over the
    # sweep's table text, and a sweep --out DIR/cells put a second sweep among the chunks
    log = tmp_path / "log.csv"
    log.write_text(LOG.format(1.0, 0.9, 0.8, 0.7))
    d = tmp_path / "sw"
    (tmp_path / "s.toml").write_text("clusters = 2\n[base]\nn_jobs = 10\n[axes]\n"
                                     'policy = ["evalstop:k=2"]\n')
    assert main(["sweep", str(tmp_path / "s.toml"), "--out", str(d), "--no-progress"]) == 0
    capsys.readouterr()
    before = {p: p.read_bytes() for p in d.rglob("*") if p.is_file()}
    one_line(capsys, [a.format(d=d, log=log) for a in argv], "which its sweep writes")
    assert {p: p.read_bytes() for p in d.rglob("*") if p.is_file()} == before
    assert not (tmp_path / "r").exists()


def test_a_directory_locked_without_a_sweep_keeps_its_names_free(tmp_path, capsys):
    # a cost-aware sweep's --out (and reproduce's OUT) hold a sweep.lock and no sweep.json:
    # run --out DIR/summary.parquet there was refused as "among the files of the sweep
    # directory", which no sweep writes there
    from fastsim.sweep.store import DirLock

    d = tmp_path / "costaware"
    d.mkdir()
    DirLock.acquire(d).release()
    assert main(["run", "--clusters", "2", "--n-jobs", "10",
                 "--out", str(d / "summary.parquet")]) == 0
    assert (d / "summary.parquet").is_file()
    capsys.readouterr()
    one_line(capsys, ["run", "--clusters", "2", "--n-jobs", "10", "--out", str(d / "sweep.lock")],
             "the lock file of")


def test_an_output_path_too_long_to_look_up_is_one_line(tmp_path, capsys, monkeypatch):
    # each name short, the whole past the file system's path length: check_output's
    # is_dir was an OSError traceback (File name too long)
    monkeypatch.chdir(tmp_path)
    deep = "x/" * 3000
    one_line(capsys, ["run", "--clusters", "2", "--out", deep + "r.parquet"],
             "a path of 6009 bytes")
    one_line(capsys, ["sweep", "k_sweep", "--out", deep + "d"], "a path of 6001 bytes")
    assert not list(tmp_path.iterdir())


def test_a_sweep_never_writes_among_another_directorys_files(tmp_path, capsys):
    """`fastsim sweep k_sweep --out /` (as root) wrote a whole sweep into /, its cells/ and
    tables among the system's directories."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "notes.txt").write_text("mine\n")
    (home / "src").mkdir()
    assert main(["sweep", "k_sweep", "--out", str(home), "--clusters", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "holds files that are not a sweep's (notes.txt, src)" in err
    assert sorted(p.name for p in home.iterdir()) == ["notes.txt", "src"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["sweep", "k_sweep", "--out", str(empty), "--clusters", "2",
                 "--no-progress"]) == 0
    (empty / "figures").mkdir()
    (empty / "sweep.json").unlink()  # a sweep's own directory, its manifest rebuilt
    assert main(["sweep", "k_sweep", "--out", str(empty), "--clusters", "2",
                 "--no-progress"]) == 0


def test_reproduce_never_writes_among_another_directorys_files(tmp_path, capsys):
    """`fastsim reproduce --out DIR` wrote its six sweep directories, extracts/ and figures/
    among DIR's files, and its report over a REPRODUCTION.md of the user's there."""
    from fastsim.sweep.reproduce import OWN_NAMES
    from fastsim.sweep.store import check_no_other_files

    home = tmp_path / "home"
    home.mkdir()
    (home / "notes.txt").write_text("mine\n")
    (home / "REPRODUCTION.md").write_text("my own report\n")
    before = {p: p.read_bytes() for p in home.rglob("*")}
    one_line(capsys, ["reproduce", "--clusters", "2", "--out", str(home), "--no-figures"],
             "holds files that are not fastsim reproduce's (notes.txt)")
    assert {p: p.read_bytes() for p in home.rglob("*")} == before
    sweep = tmp_path / "sweep"  # a sweep's directory is not reproduce's either
    assert main(["sweep", "k_sweep", "--out", str(sweep), "--clusters", "2",
                 "--no-progress"]) == 0
    capsys.readouterr()
    one_line(capsys, ["reproduce", "--clusters", "2", "--out", str(sweep), "--no-figures"],
             "holds files that are not fastsim reproduce's (cells, cells.parquet")
    own = tmp_path / "own"  # a reproduction's own directory resumes
    for name in OWN_NAMES:
        (own / name).mkdir(parents=True)
    (own / "REPRODUCTION.md.123-0badcafe.tmp").write_text("")  # a killed run's temporary
    check_no_other_files(own, OWN_NAMES, "fastsim reproduce's")


def test_reproduce_resumes_with_its_report_and_figures_inside_its_out(tmp_path,
                                                                    monkeypatch):
    """`fastsim reproduce --out R --report R/notes.md --figures-dir R/figs`, run again,
    was refused: R held notes.md and figs/, which the first run wrote there."""
    from fastsim.sweep import reproduce as R

    out = tmp_path / "R"
    for name in R.PAPER_SWEEPS + ("extracts", "figs"):  # what a first run left
        (out / name).mkdir(parents=True)
    (out / "notes.md").write_text("the first run's report\n")

    class Reached(Exception):
        pass

    def reached(*args):  # every check before any work passed
        raise Reached

    monkeypatch.setattr(R, "dask_client", reached)
    kw = dict(clusters=2, figures_dir=out / "figs", report=out / "notes.md", progress=False)
    with pytest.raises(Reached):
        R.reproduce(out, **kw)
    (out / "notes.txt").write_text("mine\n")  # a file of neither is refused still
    with pytest.raises(ConfigError, match=r"not fastsim reproduce's \(notes.txt\)"):
        R.reproduce(out, **kw)


def test_reproduce_resumes_with_its_figures_dir_its_out(tmp_path, monkeypatch):
    """`fastsim reproduce --out R --figures-dir R` drew its figures among the sweep
    directories, and the same command, run again, was refused: R held headline.png, ..."""
    from fastsim.sweep import reproduce as R

    out = tmp_path / "R"
    for name in R.PAPER_SWEEPS + ("extracts",):  # what a first run left
        (out / name).mkdir(parents=True)
    for name in R.PAPER_FIGURES:
        for fmt in ("png", "pdf"):
            (out / f"{name}.{fmt}").write_bytes(b"a figure")

    class Reached(Exception):
        pass

    def reached(*args):  # every check before any work passed
        raise Reached

    monkeypatch.setattr(R, "dask_client", reached)
    with pytest.raises(Reached):
        R.reproduce(out, clusters=2, figures_dir=out, report=None, progress=False)
    with pytest.raises(ConfigError, match=r"not fastsim reproduce's \(base_rate.pdf"):
        R.reproduce(out, clusters=2, figures_dir=None, report=None, progress=False)


@pytest.mark.parametrize("plant", ["file", "dangling link", "directory at a table"])
def test_reproduce_refuses_an_extracts_path_it_cannot_write_before_any_work(
        tmp_path, monkeypatch, plant):
    """OUT/extracts is written after every sweep has run: a file or a dangling link there,
    or a directory at one of its tables, failed only then, with a traceback."""
    from fastsim.sweep import reproduce as R

    out = tmp_path / "R"
    out.mkdir()
    extracts = out / "extracts"
    if plant == "file":
        extracts.write_text("not a directory\n")
    elif plant == "dangling link":
        extracts.symlink_to(tmp_path / "nowhere")
    else:
        (extracts / R.EXTRACTS[0]).mkdir(parents=True)

    def reached(*args):  # a check before any work should have refused it
        raise AssertionError("work started")

    monkeypatch.setattr(R, "dask_client", reached)
    with pytest.raises(ConfigError, match=r"--out .*extracts.*(not a directory|does not "
                                          r"exist|is a directory); allowed"):
        R.reproduce(out, clusters=2, figures_dir=None, report=None, progress=False)


def test_a_directory_where_a_figure_goes_is_refused_before_any_is_drawn(tmp_path, capsys):
    """`fastsim figures` drew the figures before it, then failed at a directory where a
    figure's file goes ('cannot write'): some figures new, some not."""
    sweep = tmp_path / "k_sweep.toml"
    sweep.write_text('clusters = 2\nchunk = 2\n[base]\nn_jobs = 12\ngpus = 16\n'
                     'policy = "evalstop"\n[axes]\nk = [1, 2]\n')
    results = tmp_path / "r"
    assert main(["sweep", str(sweep), "--out", str(results), "--no-progress"]) == 0
    (results / "figures" / "k_tradeoff.pdf").mkdir(parents=True)
    capsys.readouterr()
    one_line(capsys, ["figures", str(results)],
             f"--out {results / 'figures' / 'k_tradeoff.pdf'}: is a directory; allowed: ")
    assert [p.name for p in (results / "figures").iterdir()] == ["k_tradeoff.pdf"]


def test_reproduce_refuses_a_directory_where_a_figure_goes_before_any_work(
        tmp_path, monkeypatch):
    """reproduce draws its figures after every sweep has run, and failed only then."""
    from fastsim.sweep import reproduce as R

    figs = tmp_path / "figs"
    (figs / "trajectories.png").mkdir(parents=True)

    def reached(*args):  # a check before any work should have refused it
        raise AssertionError("work started")

    monkeypatch.setattr(R, "dask_client", reached)
    with pytest.raises(ConfigError, match=r"--figures-dir .*trajectories.png: is a directory"):
        R.reproduce(tmp_path / "R", clusters=2, figures_dir=figs, report=None, progress=False)


@pytest.mark.parametrize("stop", [KeyboardInterrupt, ConfigError])
def test_reproduce_stopped_during_its_sweeps_leaves_no_empty_directory_it_made(
        tmp_path, monkeypatch, stop):
    """reproduce makes its figures' and report's directories at its start: interrupted
    (Ctrl-C) or refused during the sweeps, it left them behind, empty.  One that was
    there before the run stays."""
    from fastsim.sweep import reproduce as R

    def stopped(*args, **kwargs):  # the first sweep step
        raise stop("stopped during the sweeps")

    monkeypatch.setattr(R, "run_sweep", stopped)
    figs, report = tmp_path / "F" / "figs", tmp_path / "notes" / "report.md"
    with pytest.raises(stop):
        R.reproduce(tmp_path / "R", clusters=2, figures_dir=figs, report=report,
                    progress=False)
    assert not (tmp_path / "F").exists() and not (tmp_path / "notes").exists()
    assert (tmp_path / "R").is_dir()  # OUT holds the run's lock and sweeps: kept
    (tmp_path / "mine").mkdir()
    with pytest.raises(stop):
        R.reproduce(tmp_path / "R", clusters=2, figures_dir=tmp_path / "mine",
                    report=None, progress=False)
    assert (tmp_path / "mine").is_dir()


def test_reproduce_refuses_a_file_at_its_last_sweeps_directory_before_making_any(tmp_path):
    """A file at OUT/mixed, the last sweep's directory, was refused only when that sweep
    was opened: the five sweep directories before it had been made, each with its
    manifest."""
    from fastsim.sweep import reproduce as R

    out = tmp_path / "R"
    out.mkdir()
    (out / R.PAPER_SWEEPS[-1]).write_text("not a directory\n")
    with pytest.raises(ConfigError, match=r"--out .*mixed: exists and is not a directory"):
        R.reproduce(out, clusters=2, figures_dir=None, report=None, progress=False)
    assert sorted(p.name for p in out.iterdir()) == [R.PAPER_SWEEPS[-1]]


def test_a_new_sweep_is_never_made_inside_another(tmp_path, capsys):
    """`fastsim sweep --out SW/sub` made a sweep inside SW: `fastsim figures SW` then took
    it for one of SW's sources, and refused SW's figures when both ran one file."""
    sw = tmp_path / "sw"
    argv = ["sweep", "k_sweep", "--clusters", "2", "--no-progress", "--out"]
    assert main([*argv, str(sw)]) == 0
    capsys.readouterr()
    before = _listing(sw)
    for inner in (sw / "sub", sw / "figures" / "deeper"):
        one_line(capsys, [*argv, str(inner)], f"--out {inner}: inside the sweep directory {sw}")
    link = tmp_path / "link"  # through a symbolic link too
    link.symlink_to(sw)
    one_line(capsys, [*argv, str(link / "sub")], f"inside the sweep directory {sw}")
    assert _listing(sw) == before
    assert main([*argv, str(sw)]) == 0  # SW itself resumes


def test_another_tools_sweep_lock_is_never_locked_nor_truncated(tmp_path):
    """Any file named sweep.lock in a directory above an output made that directory a
    locked one: `fastsim run --out project/sub/o.parquet` truncated a project's own
    sweep.lock to nothing."""
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    (project / "sweep.lock").write_text("held by another tool\n")
    assert main(["run", "--clusters", "2", "--n-jobs", "10", "--gpus", "16", "--no-progress",
                 "--out", str(project / "sub" / "o.parquet")]) == 0
    assert (project / "sweep.lock").read_text() == "held by another tool\n"


def test_another_tools_sweep_json_makes_no_sweep_directory_to_nest_in(tmp_path, capsys):
    """A project whose top holds a tuner's sweep.json refused every sweep below it, as
    "inside the sweep directory" of the project, and every command writing below it took
    it for a sweep directory: locked it (leaving a sweep.lock there) and refused a
    cells.parquet there as a sweep's own file."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "sweep.json").write_text('{"method": "bayes", "metric": {"name": "loss"}}\n')
    out = project / "results" / "k"
    assert main(["sweep", "k_sweep", "--clusters", "2", "--no-progress", "--out",
                 str(out)]) == 0
    assert (out / "summary.parquet").exists()
    assert not (project / "sweep.lock").exists()
    assert main(["run", "--clusters", "2", "--n-jobs", "10", "--gpus", "16", "--no-progress",
                 "--out", str(project / "cells.parquet")]) == 0
    assert main(["sweep", "k_sweep", "--clusters", "2", "--no-progress", "--out",
                 str(out)]) == 0  # resumed
    assert sorted(p.name for p in project.iterdir()) == ["cells.parquet", "results",
                                                         "sweep.json"]


def _listing(d):
    return sorted(str(p.relative_to(d)) for p in d.rglob("*"))


def test_an_empty_positional_path_is_refused_not_read_as_here(tmp_path, capsys, monkeypatch):
    """`fastsim figures "$DIR"` with DIR unset drew the figures of the sweep in the current
    directory (Path('') is '.'), as `--out ''` once wrote there; now one line naming the
    argument, as for an empty --out."""
    sw = tmp_path / "sw"
    assert main(["sweep", "k_sweep", "--clusters", "2", "--no-progress", "--out", str(sw)]) == 0
    capsys.readouterr()
    monkeypatch.chdir(sw)
    one_line(capsys, ["figures", "", "--formats", "png"], "DIR is empty; allowed: a path")
    assert not (sw / "figures").exists()
    for argv, name in ((["replay", " "], "PATH"), (["sweep", "", "--out", "x"], "FILE"),
                       (["traces", "fit-curves", ""], "TRACES"),
                       (["costaware", "figures", ""], "DIR"),
                       # an output directory that is no --out: its figure went to '.'
                       (["detectors", "--quick", "--figures", ""], "--figures"),
                       # an input file given empty was named '.', "is a directory"
                       (["detectors", "--quick", "--traces", ""], "--traces"),
                       (["detectors", "--confirm=", "--quick"], "--confirm"),
                       (["traces", "toy-rlhf", "--like", " "], "--like")):
        one_line(capsys, argv, f"{name} is empty; allowed: a path")


def test_the_python_api_refuses_an_empty_path_not_reading_it_as_here(tmp_path, monkeypatch):
    """fastsim.sweep(file, "") swept into the current directory, and
    fastsim.read_logs("") replayed the run there (Path('') is '.'), as the command line
    no longer does."""
    p = tmp_path / "s.toml"
    p.write_text("clusters = 2\nchunk = 2\n[base]\nn_jobs = 10\n[axes]\npolicy = ['none']\n")
    here = tmp_path / "here"
    here.mkdir()
    (here / "trainer_state.json").write_text(
        '{"global_step": 20, "log_history": [{"step": 10, "eval_loss": 0.5}, '
        '{"step": 20, "eval_loss": 0.6}]}')
    monkeypatch.chdir(here)
    for call, needle in ((lambda: fastsim.sweep(p, ""), "out='' is invalid; allowed: a path"),
                         (lambda: fastsim.sweep(" ", tmp_path / "o"), "file=' ' is invalid"),
                         (lambda: fastsim.read_logs(""), "paths='' is invalid"),
                         (lambda: fastsim.read_logs(["run", ""]), "is invalid; allowed: a path")):
        with pytest.raises(ConfigError, match=needle):
            call()
    assert sorted(p.name for p in here.iterdir()) == ["trainer_state.json"]
    assert not (tmp_path / "o").exists()


def test_a_summary_read_from_an_empty_path_is_refused(tmp_path, monkeypatch, capsys):
    """read_summary("") read the sweep in the current directory, and so did `python -m
    fastsim.sweep.frontier ""`."""
    from fastsim.sweep import frontier
    from fastsim.sweep.aggregate import read_summary

    sw = tmp_path / "sw"
    assert main(["sweep", "k_sweep", "--clusters", "2", "--no-progress", "--out", str(sw)]) == 0
    monkeypatch.chdir(sw)
    with pytest.raises(ConfigError, match="path='' is invalid; allowed: a sweep directory"):
        read_summary("")
    capsys.readouterr()
    assert frontier.main([" "]) == 2
    assert "path=' ' is invalid" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    # Path('ok.toml/') is ok.toml: fastsim sweep ok.toml/ read the file the slash says is a
    # directory (open() of it fails on POSIX)
    ["sweep", "{f}/", "--out", "o"],
    ["run", "--out", "r.parquet/"], ["run", "--jobs-out", "j.parquet/"],
    ["reproduce", "--quick", "--report", "r.md/"],
    ["replay", "{f}/"], ["replay", "--example", "--out", "r.csv/"],
    ["replay", "--example", "--summary-out", "s.csv/"],
    ["traces", "toy-rlhf", "--like", "{f}/"], ["traces", "compare-sim", "{f}/"],
    ["traces", "compare-sim", "{f}", "--out", "c.csv/"], ["traces", "fit-curves", "{f}/"],
    ["traces", "fit-curves", "{f}", "--out", "c.csv/"],
    ["detectors", "--traces", "{f}/"], ["detectors", "--doc", "{f}/"],
    ["detectors", "--confirm", "{f}/"],
    ["costaware", "sweep", "{f}/", "--out", "o"], ["costaware", "trl-gradnorm", "--prompts", "{f}/"],
])
def test_a_file_argument_ending_in_a_slash_is_refused(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ok.toml").write_text("clusters = 2\n[base]\nn_jobs = 3\n")
    argv = [a.format(f="ok.toml") for a in argv]
    one_line(capsys, argv, "ends in '/': it names a directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.toml"]


@pytest.mark.parametrize("call,said", [
    # the command line refused these (fastsim.values.file_path); the API read the file
    (lambda: fastsim.sweep.load_sweep("ok.toml/"), "path='ok.toml/'"),
    (lambda: fastsim.sweep("ok.toml/", "o"), "file='ok.toml/'"),
    (lambda: fastsim.read_logs("log.csv/"), "paths='log.csv/'"),
    (lambda: fastsim.read_logs(["log.csv", "log.csv/"]), "paths='log.csv/'"),
    (lambda: fastsim.replay("log.csv/", "evalstop:k=2"), "logs='log.csv/'"),
    (lambda: fastsim.costaware.load_costaware_sweep("ca.toml/"), "path='ca.toml/'"),
    (lambda: fastsim.costaware.run_costaware_sweep("ca.toml/", "o"), "path='ca.toml/'"),
])
def test_the_api_refuses_a_file_argument_ending_in_a_slash(call, said, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ok.toml").write_text("clusters = 2\n[base]\nn_jobs = 3\n")
    (tmp_path / "ca.toml").write_text('experiment = "sgd"\nreplications = 2\n')
    (tmp_path / "log.csv").write_text(LOG.format(1.0, 0.9, 0.8, 0.7))
    with pytest.raises(ConfigError) as info:
        call()
    assert str(info.value).startswith(f"{said} ends in '/': it names a directory"), info.value
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ca.toml", "log.csv", "ok.toml"]


def test_a_run_directory_ending_in_a_slash_is_still_replayed(tmp_path, capsys):
    from fastsim.cli import main

    run = tmp_path / "run"
    run.mkdir()
    hist = [{"step": 10 * (i + 1), "eval_accuracy": s} for i, s in enumerate([.5, .6, .5, .4])]
    (run / "trainer_state.json").write_text(json.dumps(
        {"global_step": 40, "max_steps": 40, "log_history": hist}))
    assert main(["replay", f"{run}/", "--policy", "evalstop:k=2"]) == 0
    assert "replay: 1 job" in capsys.readouterr().out


# -- an output's directory moved while the command runs is not made again ------------------------
def _moving_after(monkeypatch, module, name, directory, moved):
    """``module.name`` runs, then ``directory`` is moved to ``moved``: another process
    moving the output's directory while the command works."""
    real = getattr(module, name)

    def run_then_move(*args, **kwargs):
        result = real(*args, **kwargs)
        directory.rename(moved)
        return result
    monkeypatch.setattr(module, name, run_then_move)


@pytest.mark.parametrize("command", ["run", "replay"])
@pytest.mark.parametrize("missing", ["", "new/"])
def test_an_output_directory_moved_while_the_command_runs_is_not_made_again(
        tmp_path, capsys, monkeypatch, command, missing):
    """`fastsim run --out DIR/o.parquet` (and replay, and every command writing a file)
    made every missing directory of its output when it wrote it: DIR moved away by
    another process meanwhile was made anew at its old path, holding the output, and the
    command said it wrote it there.  Now only what was missing at the start is made (here
    ``new/`` too), and a directory gone since is refused in one line, nothing made."""
    import fastsim.cli_run
    import fastsim.replay.policies

    res, moved = tmp_path / "res", tmp_path / "moved"
    res.mkdir()
    out = res / f"{missing}o.parquet"
    if command == "run":
        _moving_after(monkeypatch, fastsim.cli_run, "_run_arms", res, moved)
        argv = ["run", "--clusters", "2", "--n-jobs", "10", "--no-progress", "--out", str(out)]
    else:
        log = tmp_path / "l.csv"
        log.write_text(LOG.format(1.0, 0.9, 0.8, 0.7))
        _moving_after(monkeypatch, fastsim.replay.policies, "replay", res, moved)
        argv = ["replay", str(log), "--out", str(out)]
    stdout = one_line(capsys, argv, f"cannot write {out} ({res} was moved or deleted while "
                                    "the command ran; it is not made again at its old path)")
    assert stdout == "" and not res.exists() and list(moved.iterdir()) == []
    monkeypatch.undo()
    assert main(argv) == 0 and out.is_file()  # what was missing at the start is made
