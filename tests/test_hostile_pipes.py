"""Hostile input, pipes and devices: a named pipe blocks whoever opens it until a writer
comes (forever if none does) and ``/dev/zero`` never ends.  A file the command reads whole
(a sweep file, a Parquet table, a results directory's tables) must be a regular file:
anything else is one line, exit 2, before it is opened.  Replay logs may be pipes
(docs/replay.md): read once, into memory, up to a limit.

Commands run in a subprocess with a timeout, so a regression hangs one test, not the suite.
"""
from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from fastsim.errors import ConfigError
from fastsim.io import check_regular, file_kind, read_parquet_table, read_toml
from fastsim.replay import logs
from fastsim.replay.logs import read_logs
from fastsim.resources import sweep_file

FIXTURES = Path(__file__).parent / "fixtures"

TOML = 'clusters = 2\n[base]\nn_jobs = 10\n[axes]\npolicy = ["none"]\n'


def cli(argv, cwd, timeout=60):
    """``fastsim ARGV`` in a subprocess: (exit code, stderr lines)."""
    r = subprocess.run([sys.executable, "-c", "from fastsim.cli import main; "
                        "raise SystemExit(main())", *map(str, argv)], cwd=cwd,
                       capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stderr.strip().splitlines()


def refused(argv, cwd, needle):
    code, err = cli(argv, cwd)
    assert code == 2 and len(err) == 1 and "Traceback" not in err[0], err
    assert needle in err[0], err


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "named.pipe"
    os.mkfifo(path)
    return path


def test_file_kind_only_stats(fifo, tmp_path):
    (tmp_path / "f.toml").write_text(TOML)
    assert file_kind(tmp_path / "f.toml") is None
    assert file_kind(fifo) == "not a regular file (a pipe)"  # returns: nothing opened it
    assert file_kind("/dev/zero") == "not a regular file (a character device)"
    assert file_kind(tmp_path) == "is a directory"
    assert file_kind(tmp_path / "missing") == "no such file"
    with pytest.raises(ConfigError, match=r"named.pipe: not a regular file \(a pipe\); allowed: x$"):
        check_regular(fifo, "x")


@pytest.mark.parametrize("path", ["/dev/zero", "FIFO"])
def test_a_sweep_file_that_is_no_regular_file_is_refused_unread(path, fifo):
    path = fifo if path == "FIFO" else path
    with pytest.raises(ConfigError, match=r": not a regular file \(a (pipe|character device)\); "
                                          r"allowed: a TOML file, or one of .*headline"):
        sweep_file(path)
    for read in (lambda: read_toml(path), lambda: read_parquet_table(path, "a table")):
        with pytest.raises(ConfigError, match="not a regular file"):
            read()


@pytest.mark.parametrize("argv", [
    ["sweep", "{p}", "--out", "o"],
    ["sweep", "/dev/zero", "--out", "o"],
    ["costaware", "sweep", "{p}", "--out", "o"],
    ["costaware", "sweep", "/dev/zero", "--out", "o"],
    ["traces", "compare-sim", "{p}", "--out", "o.parquet"],
    ["traces", "fit-curves", "{p}", "--out", "o.parquet"],
    ["traces", "toy-rlhf", "--like", "{p}", "--out", "o"],
    ["detectors", "--traces", "{p}", "--out", "o"],
    ["detectors", "--doc", "{p}", "--out", "o"],
])
def test_cli_input_files_that_are_pipes_or_devices_are_one_line(argv, fifo, tmp_path):
    refused([a.format(p=fifo) for a in argv], tmp_path, "not a regular file")
    assert not (tmp_path / "o").exists() and not (tmp_path / "o.parquet").exists()


def test_a_detectors_plan_that_is_a_pipe_is_one_line(fifo, tmp_path):
    import polars as pl

    pl.DataFrame({"job_id": ["a"], "step": [1]}).write_parquet(tmp_path / "t.parquet")
    refused(["detectors", "--traces", "t.parquet", "--confirm", fifo, "--out", "o"], tmp_path,
            "not a regular file")


def test_results_directories_holding_a_pipe_are_refused(tmp_path):
    (tmp_path / "sw").mkdir()
    os.mkfifo(tmp_path / "sw" / "sweep.json")
    (tmp_path / "sw" / "summary.parquet").write_bytes(b"")
    refused(["figures", "sw", "--out", "figs"], tmp_path, "not a regular file (a pipe)")
    (tmp_path / "cw").mkdir()
    os.mkfifo(tmp_path / "cw" / "costaware_grpo.curves.parquet")
    refused(["costaware", "figures", "cw"], tmp_path, "not a regular file (a pipe)")
    (tmp_path / "docs" / "traces").mkdir(parents=True)
    os.mkfifo(tmp_path / "docs" / "traces" / "traces.parquet")
    refused(["docs-figures", "--draw-only", "--results", "docs", "--out", "figs"], tmp_path,
            "not a regular file (a pipe)")
    assert not (tmp_path / "figs").exists()


def test_a_sweep_directory_whose_manifest_is_a_pipe_is_refused(tmp_path):
    (tmp_path / "s.toml").write_text(TOML)
    (tmp_path / "o").mkdir()
    os.mkfifo(tmp_path / "o" / "sweep.json")
    refused(["sweep", "s.toml", "--out", "o"], tmp_path, "not a regular file (a pipe)")


# -- replay logs may be pipes ------------------------------------------------------------------
LOG = "job_id,step,score\na,1,0.5\na,2,0.6\na,3,0.5\na,4,0.4\nb,1,0.2\nb,2,0.3\n"


@contextlib.contextmanager
def feeding(fifo, data: bytes):
    """A writer thread that opens the named pipe and writes ``data``; on the way out a
    writer still waiting for a reader is let through, so no thread is left blocked."""
    def write():
        try:
            with open(fifo, "wb") as fh:
                fh.write(data)
        except BrokenPipeError:  # the reader stopped early (a refused log)
            pass

    t = threading.Thread(target=write, daemon=True)
    t.start()
    try:
        yield
    finally:
        if t.is_alive():  # nobody opened the pipe for reading: do it, and drain it
            fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
            t.join(5)
            os.close(fd)
        t.join(5)
        assert not t.is_alive()


def _same_table(got, path):
    want = read_logs([path]).table.drop("source")
    assert got.table.drop("source").equals(want)


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_a_named_pipe_is_read_once_with_the_format_from_its_content(fmt, fifo, tmp_path):
    import polars as pl

    path = tmp_path / f"log.{fmt}"
    df = pl.read_csv(io.StringIO(LOG))
    {"csv": df.write_csv, "jsonl": df.write_ndjson, "parquet": df.write_parquet}[fmt](path)
    with feeding(fifo, path.read_bytes()):
        got = read_logs([fifo])  # no suffix: detected from the bytes
    _same_table(got, path)
    assert got.table["source"].unique().to_list() == [str(fifo)]


def test_a_pipe_with_its_format_forced_is_read(fifo, tmp_path):
    (tmp_path / "log.csv").write_text(LOG)
    with feeding(fifo, LOG.encode()):  # polars had failed to map it (os error 19)
        got = read_logs([fifo], fmt="csv")
    _same_table(got, tmp_path / "log.csv")


def test_a_trainer_state_through_a_pipe_is_the_pipe_s_job(fifo):
    state = FIXTURES / "hf_run" / "trainer_state.json"
    with feeding(fifo, state.read_bytes()):
        got = read_logs([fifo])
    assert got.job_ids == [fifo.name] and got.metric == "eval_loss"
    assert got.table["step"].equals(read_logs([state]).table["step"])


def test_an_empty_or_oversized_pipe_and_a_device_are_one_line(fifo, monkeypatch):
    with feeding(fifo, b""), pytest.raises(ConfigError, match="named.pipe: empty file"):
        read_logs([fifo])
    monkeypatch.setattr(logs, "PIPE_LIMIT", 1000)
    with feeding(fifo, LOG.encode() * 100), pytest.raises(
            ConfigError, match=r"named.pipe: a pipe carrying more than 0.000953674 MiB; allowed"):
        read_logs([fifo])
    with pytest.raises(ConfigError, match=r"/dev/zero: not a regular file \(a character "
                                          r"device\); allowed: a log file, a run directory, or a pipe"):
        read_logs(["/dev/zero"])


@pytest.mark.parametrize("source", ["log.csv", "log.parquet", "trainer_state.json"])
def test_replay_reads_its_standard_input_when_it_is_a_pipe(source, tmp_path):
    import polars as pl

    if source == "trainer_state.json":
        data = (FIXTURES / "hf_run" / source).read_bytes()
    else:
        pl.read_csv(io.StringIO(LOG)).write_parquet(tmp_path / "log.parquet")
        data = LOG.encode() if source == "log.csv" else (tmp_path / source).read_bytes()
    argv = ["replay", "/dev/stdin", "--summary-only", "--summary-out", "s.csv"]
    r = subprocess.run([sys.executable, "-c", "from fastsim.cli import main; "
                        "raise SystemExit(main())", *argv], cwd=tmp_path, input=data,
                       capture_output=True, timeout=60)  # input= goes through a pipe
    assert r.returncode == 0, r.stderr.decode()
    assert b" evaluations" in r.stdout and b", metric " in r.stdout
    assert (tmp_path / "s.csv").is_file()


def test_a_named_pipe_no_one_writes_to_is_waited_for_saying_so(fifo, tmp_path):
    """``fastsim replay FIFO`` with no writer waited in silence, forever, like a hung
    command.  It now says in one line that it waits for the pipe, and reads the log once
    a writer comes and closes it (a pipe is read to its end, as ``cat`` would)."""
    import select

    proc = subprocess.Popen([sys.executable, "-m", "fastsim.cli", "replay", str(fifo),
                             "--summary-only"], cwd=tmp_path, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        seen = ""
        while not seen.startswith("fastsim: waiting for"):  # past numba's compile notice
            ready, _, _ = select.select([proc.stderr], [], [], 60)
            assert ready, "no line saying the command waits for its pipe"
            seen = proc.stderr.readline()
            assert seen, proc.wait()
        assert seen.strip() == (f"fastsim: waiting for {fifo}, a pipe, to be written and "
                                "closed (a pipe is read to its end) ...")
        with open(fifo, "w") as fh:
            fh.write(LOG)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0 and err == "", err
    assert out.startswith("replay: 2 jobs, 6 evaluations"), out
