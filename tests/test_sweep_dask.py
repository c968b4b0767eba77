"""The Dask backend on a LocalCluster (2 worker processes) gives the in-process result bit
for bit, through the same ``fastsim sweep`` code path; a cluster that fails mid-sweep (a
worker or the scheduler killed) is rescheduled around, or stops the sweep in one line,
resumable."""
from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal as _assert_frame_equal
from conftest import after_connecting

import fastsim
from fastsim.cli import main


def assert_frame_equal(left, right):
    """Bit for bit: polars' own default passes floats that differ by 1e-5 relative."""
    _assert_frame_equal(left, right, check_exact=True)


distributed = pytest.importorskip("dask.distributed")

SWEEP = """
clusters = 12
chunk = 4
seed = 3
[base]
n_jobs = 30
gpus = 16
[axes]
scheduler = ["fifo:backfill", "srtf_est", "loss_aware"]
policy = ["evalstop:k=2", "oracle"]
"""


@pytest.fixture(scope="module")
def two_workers():
    """A LocalCluster of 2 worker processes, started once for the tests that only sweep on
    it (each start is a scheduler and two interpreters importing fastsim): its address."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        yield cluster.scheduler_address


def test_dask_local_cluster_equals_in_process(tmp_path, two_workers):
    p = tmp_path / "d.toml"
    p.write_text(SWEEP)
    local, remote = tmp_path / "local", tmp_path / "dask"
    assert main(["sweep", str(p), "--out", str(local), "--no-progress", "--keep-jobs"]) == 0
    assert main(["sweep", str(p), "--out", str(remote), "--no-progress", "--backend", "dask",
                 "--address", two_workers, "--keep-jobs"]) == 0
    files = sorted(x.relative_to(local) for x in local.glob("cells/*/*.parquet"))
    assert files == sorted(x.relative_to(remote) for x in remote.glob("cells/*/*.parquet"))
    # 9 cells x 3 chunks x (clusters, JCT histogram, per-job records)
    assert len(files) == 9 * 3 * 3
    for rel in files:
        assert_frame_equal(pl.read_parquet(local / rel), pl.read_parquet(remote / rel))
    # and every aggregated table and the text summary, the same bytes
    for name in ("summary.parquet", "cells.parquet", "jct_hist.parquet", "summary.txt"):
        assert (local / name).read_bytes() == (remote / name).read_bytes(), name


def test_a_dask_task_runs_a_chunks_cells_of_one_workload(tmp_path, monkeypatch):
    """Each task runs the cells of one chunk index that share a workload (the 9 cells of
    SWEEP: one task per chunk, on clusters drawn once), as a local run does; with
    --keep-jobs, one cell a task (the driver holds a task's per-job tables until it writes
    them).  The chunk files are the same bytes either way (tests above)."""
    import fastsim.sweep.runner as runner

    p = tmp_path / "d.toml"
    p.write_text(SWEEP)
    said = tmp_path / "sizes"  # the task is pickled by value: a list would be a copy's
    real = runner.run_chunks_on_worker

    def counting(configs, *args):
        with open(said, "a") as f:
            f.write(f"{len(configs)}\n")
        return real(configs, *args)
    monkeypatch.setattr(runner, "run_chunks_on_worker", counting)
    monkeypatch.setattr(runner, "warm_up", lambda: "warm")  # compiling is beside the point
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        for out, flags, expected in (("grouped", [], [9, 9, 9]),
                                     ("alone", ["--keep-jobs"], [1] * 27)):
            said.write_text("")
            assert main(["sweep", str(p), "--out", str(tmp_path / out), "--no-progress",
                         "--backend", "dask", "--address", cluster.scheduler_address,
                         *flags]) == 0
            assert [int(x) for x in said.read_text().split()] == expected, out


def test_million_sweep_file_on_dask_equals_in_process(tmp_path, two_workers):
    """``sweeps/million.toml`` itself, cut to 8 clusters per cell: 2 Dask workers give the
    in-process aggregate bit for bit (the full file differs only in ``--clusters``)."""
    sweep = Path(__file__).resolve().parents[1] / "sweeps" / "million.toml"
    small = ["--clusters", "8", "--chunk", "4", "--no-progress"]
    local, remote = tmp_path / "local", tmp_path / "dask"
    assert main(["sweep", str(sweep), "--out", str(local), *small]) == 0
    assert main(["sweep", str(sweep), "--out", str(remote), *small, "--backend", "dask",
                 "--address", two_workers]) == 0
    summary = pl.read_parquet(local / "summary.parquet")
    # every cell ran its 8 clusters (a rate over jobs a cell never has, the precision of
    # no stop policy, rests on none: n 0)
    assert (summary.group_by("cell").agg(pl.col("n").max())["n"] == 8).all()
    assert summary["cell"].n_unique() == 8
    assert_frame_equal(summary, pl.read_parquet(remote / "summary.parquet"))
    # a task ran a chunk of the two cells of each noise level, on clusters drawn once
    # (``chunk_groups``), as the local run did: each chunk file the same bytes
    files = sorted(x.relative_to(local) for x in local.glob("cells/*/chunk-*.parquet"))
    assert len(files) == 8 * 2
    for rel in files:
        assert (local / rel).read_bytes() == (remote / rel).read_bytes(), rel


def test_9_bad_or_unreachable_address_is_one_line(tmp_path, capsys):
    p = tmp_path / "d.toml"
    p.write_text(SWEEP)
    # a port where nothing listens is named so: distributed's connect retries a refused
    # connection until the time runs out, and the timeout read as a port that "accepts
    # connections but gave no Dask handshake"
    for address, needle in (("tcp://127.0.0.1:1", "cannot reach a Dask scheduler (nothing "
                             "listens there, the connection is refused: no scheduler runs"),
                            # .invalid never resolves (RFC 2606): it was named as a port
                            # that "accepts connections but gave no Dask handshake"
                            ("tcp://nosuchhost.invalid:8786", "cannot reach a Dask scheduler "
                             "(no host is found by the name nosuchhost.invalid: it does not "
                             "resolve)"),
                            # over websockets too: it was the port that "gave no handshake"
                            ("ws://nosuchhost.invalid:8786", "cannot reach a Dask scheduler "
                             "(no host is found by the name nosuchhost.invalid: it does not "
                             "resolve)"),
                            ("nonsense://x", "address='nonsense://x' is invalid"),
                            ("foo", "address='foo' is invalid")):
        out = tmp_path / address.replace("/", "_").replace(":", "_")
        assert main(["sweep", str(p), "--out", str(out), "--no-progress", "--backend", "dask",
                     "--address", address, "--dask-timeout", "2"]) == 2
        err = capsys.readouterr().err.strip()
        if address.startswith(("tcp://", "ws://")):  # a well-formed address: connecting is said first
            err = after_connecting(err, address)
        assert needle in err and len(err.splitlines()) == 1, err
        assert not out.exists()  # refused by its form, or before connecting: nothing written


@pytest.mark.parametrize("address, why", [
    ("tcp://127.0.0.1:99999", "port 99999 is not one of 1 to 65535"),
    ("127.0.0.1:0", "port 0 is not one of 1 to 65535"),
    ("foo://127.0.0.1:8786", "this dask has no connector for foo://: an unknown scheme, or "
                             "its library is not installed")])
def test_9_an_address_no_scheduler_can_have_is_refused_before_connecting(tmp_path, capsys,
                                                                         address, why):
    """A port outside 1-65535 or a scheme dask has no connector for is known from the
    address alone, yet came second, under "dask: connecting to the scheduler at ...", and
    worded as what answered there ("what answers is not a Dask scheduler: ValueError")."""
    p = tmp_path / "d.toml"
    p.write_text(SWEEP)
    assert main(["sweep", str(p), "--out", str(tmp_path / "o"), "--no-progress", "--backend",
                 "dask", "--address", address]) == 2
    assert capsys.readouterr().err.strip() == (
        f"fastsim sweep: error: address={address!r} is invalid ({why}); allowed: "
        "tcp://HOST:PORT (or HOST:PORT) of a running scheduler, a dask Client, or none for "
        "a local cluster")
    assert not (tmp_path / "o").exists()


def test_9_an_address_that_accepts_but_never_answers_is_one_line_in_time(tmp_path, capsys):
    # the dashboard's port (HTTP waits for a request) or another service's: distributed's
    # handshake read has no timeout, and the sweep waited forever despite --dask-timeout
    import socket
    import time

    p = tmp_path / "d.toml"
    p.write_text(SWEEP)
    import threading

    with socket.create_server(("127.0.0.1", 0)) as silent:
        address = f"tcp://127.0.0.1:{silent.getsockname()[1]}"
        # closed after 20 s, which resets the connections it never accepted: a sweep
        # still waiting then fails this test rather than hanging it
        threading.Timer(20, silent.close).start()
        t0 = time.monotonic()
        code = main(["sweep", str(p), "--out", str(tmp_path / "o"), "--no-progress",
                     "--backend", "dask", "--address", address, "--dask-timeout", "1"])
        assert code == 2 and time.monotonic() - t0 < 15
    err = after_connecting(capsys.readouterr().err, address)
    assert (f"--address {address!r}: cannot reach a Dask scheduler (it accepts connections "
            "but gave no Dask handshake within 1 s: not a scheduler's port") in err, err
    assert len(err.splitlines()) == 1 and not (tmp_path / "o").exists()


def test_9_scheduler_without_workers_times_out_with_a_message(tmp_path, capsys):
    p = tmp_path / "d.toml"
    p.write_text(SWEEP)
    with distributed.LocalCluster(n_workers=0, processes=False,
                                  dashboard_address=None) as cluster:
        assert main(["sweep", str(p), "--out", str(tmp_path / "o"), "--no-progress",
                     "--backend", "dask", "--address", cluster.scheduler_address,
                     "--dask-timeout", "2"]) == 2
        err = after_connecting(capsys.readouterr().err, cluster.scheduler_address)
    assert "no worker joined the scheduler within 2 s" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("via", ["cli", "api"])
def test_more_local_workers_than_memory_holds_is_one_line_before_any_start(
        tmp_path, monkeypatch, capsys, via):
    """--workers 1000 started a thousand worker processes of a few hundred MiB each, with
    no check: the machine ran out of memory instead of the run saying so."""
    from fastsim import memory

    class NoCluster:
        def __init__(self, *args, **kwargs):
            raise AssertionError("a local cluster was started")

    monkeypatch.setattr(distributed, "LocalCluster", NoCluster)
    monkeypatch.setattr(memory, "available_bytes", lambda: 8 << 30)
    sweep = tmp_path / "s.toml"
    sweep.write_text(SWEEP)
    out = tmp_path / "o"
    needle = r"workers 1000 with n_jobs=30, n_evals=7, chunk 4 needs about .* GiB of memory, " \
             r"8.0 GiB available; largest feasible: workers \d+$"
    if via == "cli":
        assert main(["sweep", str(sweep), "--out", str(out), "--no-progress",
                     "--backend", "dask", "--workers", "1000"]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and re.search(needle, err), err
    else:
        with pytest.raises(fastsim.ConfigError, match=needle):
            fastsim.sweep(sweep, out, backend="dask", workers=1000)
    assert not out.exists()


def test_local_workers_beyond_the_sweeps_chunks_are_counted_without_a_chunk(tmp_path,
                                                                             monkeypatch):
    """Each local worker was counted with a chunk of its own, though a worker runs one at a
    time and one beyond the sweep's chunks runs none: a one-chunk sweep was refused two
    workers on a machine that holds both processes and the one chunk."""
    from fastsim import memory
    from fastsim.memory import simulate_bytes
    from fastsim.sweep.grid import load_sweep
    from fastsim.sweep.runner import WORKER_BYTES, check_sweep_memory

    sweep = tmp_path / "one.toml"
    sweep.write_text("clusters = 3000\nchunk = 3000\nbaseline = false\n[base]\n"
                     "n_jobs = 200\n")
    grid = load_sweep(sweep)
    assert len(grid.cells) * grid.n_chunks == 1
    chunk = simulate_bytes(3000, 200, grid.cells[0].config.workload.n_evals, True)
    # two worker processes and one chunk fit, with room; two chunks would not
    monkeypatch.setattr(memory, "available_bytes",
                        lambda: int((2 * WORKER_BYTES + 1.5 * chunk) / memory.BUDGET_SHARE))
    check_sweep_memory(grid, False, 2)
    with pytest.raises(fastsim.ConfigError, match=r"^workers 1000 .*largest feasible: workers"):
        check_sweep_memory(grid, False, 1000)  # each process is still counted


@pytest.mark.parametrize("workers", [-1, 0, True, "2", 2.5])
def test_reproduce_refuses_a_worker_count_before_any_start(tmp_path, monkeypatch, workers):
    """reproduce() took any workers: -1 passed the local workers' memory check (negative
    bytes), started a local cluster of -1 workers and waited for one, then blamed
    '--address None'; "2" was a TypeError from the memory check.  Refused as a sweep
    refuses it, before any cluster starts or anything is written."""
    from fastsim.sweep import reproduce as R

    class NoCluster:
        def __init__(self, *args, **kwargs):
            raise AssertionError("a local cluster was started")

    monkeypatch.setattr(distributed, "LocalCluster", NoCluster)
    out = tmp_path / "R"
    with pytest.raises(fastsim.ConfigError, match=re.escape(
            f"workers={workers!r} is invalid; allowed: an integer >= 1")):
        R.reproduce(out, clusters=2, figures_dir=None, report=None, backend="dask",
                    workers=workers, timeout=2.0, progress=False)
    assert not out.exists()


@pytest.mark.parametrize("workers, said", [(1, "of 1 worker;"), (2, "of 2 workers;")])
def test_the_local_cluster_notice_counts_its_workers(workers, said, monkeypatch, capsys):
    """Printed 'a local cluster of 1 workers'; no cluster is started here."""
    from fastsim.sweep import runner

    from fastsim.sweep.worker_plugin import NAME, SweepWorkerPlugin

    plugins = []

    class Fake:
        dashboard_link = "http://127.0.0.1:8787/status"

        def __init__(self, *args, **kwargs):
            pass

        def wait_for_workers(self, n, timeout):
            pass

        def register_plugin(self, plugin, name=None):
            plugins.append((type(plugin), name))

    monkeypatch.setattr(distributed, "LocalCluster", Fake)
    monkeypatch.setattr(distributed, "Client", Fake)
    runner._connect(None, workers, 5.0)
    err = capsys.readouterr().err
    assert f"dask: started a local cluster {said} dashboard: http" in err
    assert plugins == [(SweepWorkerPlugin, NAME)]  # for every worker, restarted ones too


def test_a_second_local_cluster_names_its_dashboard_port_once(monkeypatch, capsys):
    """With port 8787 taken (another sweep's dashboard), distributed warns in five lines
    that it hosts the dashboard on another port, which the notice names anyway."""
    import warnings

    from fastsim.sweep import runner

    class Taken:
        def __init__(self, *args, **kwargs):  # distributed.node's words
            warnings.warn("Port 8787 is already in use.\nPerhaps you already have a cluster "
                          "running?\nHosting the HTTP server on port 46687 instead", UserWarning)

    class Client:
        dashboard_link = "http://127.0.0.1:46687/status"

        def __init__(self, cluster):
            pass

        def wait_for_workers(self, n, timeout):
            pass

        def register_plugin(self, plugin, name=None):
            pass

    monkeypatch.setattr(distributed, "LocalCluster", Taken)
    monkeypatch.setattr(distributed, "Client", Client)
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        runner._connect(None, 1, 5.0)
    assert not shown
    assert "dashboard: http://127.0.0.1:46687/status" in capsys.readouterr().err


def test_9_local_cluster_survives_a_worker_dying_in_warm_up(tmp_path, capsys, monkeypatch):
    """--backend dask without --address starts a local cluster (dashboard link printed);
    a worker killed during warm-up is restarted by its nanny and the sweep completes."""
    from fastsim.sweep import runner

    p = tmp_path / "d.toml"
    p.write_text(SWEEP.replace('scheduler = ["fifo:backfill", "srtf_est", "loss_aware"]',
                               'scheduler = ["srtf_est"]'))
    marker = str(tmp_path / "killed")

    def die_once():
        import os
        if not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(1)
        return "warm"

    # the worker that runs the chunks is the nanny's replacement (the first one died): it
    # started after fastsim's own SIGINT handler was back, and ignores SIGINT all the same
    handlers = tmp_path / "sigint"
    run_chunk = runner.run_chunks_on_worker

    def run_chunk_noting_sigint(*args, **kwargs):
        import signal
        with open(handlers, "a") as f:
            f.write(f"{signal.getsignal(signal.SIGINT)!r}\n")
        return run_chunk(*args, **kwargs)

    monkeypatch.setattr(runner, "warm_up", die_once)
    monkeypatch.setattr(runner, "run_chunks_on_worker", run_chunk_noting_sigint)
    local, remote = tmp_path / "local", tmp_path / "dask"
    assert main(["sweep", str(p), "--out", str(local), "--no-progress"]) == 0
    assert main(["sweep", str(p), "--out", str(remote), "--no-progress", "--backend", "dask",
                 "--workers", "1"]) == 0
    assert "dashboard: http" in capsys.readouterr().err
    assert (tmp_path / "killed").exists()
    assert set(handlers.read_text().splitlines()) == {"<Handlers.SIG_IGN: 1>"}
    assert_frame_equal(pl.read_parquet(local / "summary.parquet"),
                       pl.read_parquet(remote / "summary.parquet"))


# -- a cluster that fails mid-sweep: real `dask scheduler` / `dask worker` processes -------
ROOT = Path(__file__).resolve().parents[1]
# children (the sweep, the workers) import the fastsim this test imports
ENV = {**os.environ, "NUMBA_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(filter(None, [
    str(Path(fastsim.__file__).parents[1]), os.environ.get("PYTHONPATH")]))}
# `fastsim sweep` in a child (a deadline, so a regression fails instead of hanging) that
# kill -9s process VICTIM once its first chunk is written: the failure lands mid-sweep.
DRIVER = """
import os, signal, sys
from fastsim.cli import main
from fastsim.sweep.store import SweepStore
victim, write = [int(os.environ["VICTIM"])] if os.environ["VICTIM"] != "0" else [], \
    SweepStore.write_chunk
def write_then_kill(self, *a, **k):
    write(self, *a, **k)
    if victim:
        os.kill(victim.pop(), signal.SIGKILL)
SweepStore.write_chunk = write_then_kill
sys.exit(main(sys.argv[1:]))
"""


def test_the_worker_plugin_ignores_sigint_the_closing_cancel_and_a_lost_heartbeat():
    """What ``setup`` does in a worker process, checked in a child process (setting SIGINT
    here would change the test run's own)."""
    code = ("import logging, signal\n"
            "from fastsim.sweep.worker_plugin import STATE_MACHINE_LOGGER, SweepWorkerPlugin\n"
            "SweepWorkerPlugin().setup(None)\n"
            "SweepWorkerPlugin().setup(None)  # set up twice: still one filter\n"
            "log = logging.getLogger(STATE_MACHINE_LOGGER)\n"
            "def shown(msg, level=logging.WARNING):\n"
            "    return log.filter(log.makeRecord(log.name, level, 'f', 1, msg, (), None))\n"
            "print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN, len(log.filters),\n"
            "      bool(shown('Async instruction for <Task pending> ended with CancelledError')),\n"
            "      bool(shown('Unhandled exception in async instruction', logging.ERROR)))\n"
            "log = logging.getLogger('distributed.worker')\n"
            "print(len(log.filters),\n"
            "      bool(shown('Failed to communicate with scheduler during heartbeat.', logging.ERROR)),\n"
            "      bool(shown('Compute Failed', logging.ERROR)))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV,
                       timeout=120)
    assert r.stdout.split() == ["True", "1", "False", "True", "1", "False", "True"], r.stderr


class DaskProcesses:
    """A `dask scheduler` and `dask worker --no-nanny` processes (a killed worker stays
    dead: no nanny restarts it), all killed at the end."""

    def __init__(self, tmp_path: Path):
        self.file, self.procs = tmp_path / "scheduler.json", []
        self.scheduler = self._start("dask_scheduler", "--host", "127.0.0.1", "--port", "0",
                                     "--no-dashboard")
        deadline = time.monotonic() + 60
        while not self.file.exists():
            assert time.monotonic() < deadline and self.scheduler.poll() is None
            time.sleep(0.1)
        time.sleep(0.2)  # the file is written whole, then read
        self.address = json.loads(self.file.read_text())["address"]

    def _start(self, cli: str, *args: str) -> subprocess.Popen:
        p = subprocess.Popen([sys.executable, "-m", f"distributed.cli.{cli}", *args,
                              "--scheduler-file", str(self.file)], env=ENV, cwd=ROOT,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(p)
        return p

    def workers(self, n: int) -> list[subprocess.Popen]:
        new = [self._start("dask_worker", "--no-nanny", "--nthreads", "1", "--no-dashboard")
               for _ in range(n)]
        with distributed.Client(self.address, timeout=30) as c:
            c.wait_for_workers(len([p for p in self.procs[1:] if p.poll() is None]), timeout=60)
        return new

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=30)


@pytest.fixture
def dask_procs(tmp_path):
    d = DaskProcesses(tmp_path)
    yield d
    d.close()


@pytest.fixture(scope="module")
def in_process(tmp_path_factory):
    """The sweep run in this process: what every Dask run must equal bit for bit."""
    tmp = tmp_path_factory.mktemp("local")
    (tmp / "d.toml").write_text(SWEEP)
    assert main(["sweep", str(tmp / "d.toml"), "--out", str(tmp / "out"), "--no-progress"]) == 0
    return tmp / "d.toml", tmp / "out"


def sweep_killing(victim: int, argv: list[str], timeout: float = 90):
    """``fastsim sweep ARGV`` in a child that kill -9s process ``victim`` (0: none) once it
    has written its first chunk."""
    return subprocess.run([sys.executable, "-c", DRIVER, "sweep", *argv], env=dict(
        ENV, VICTIM=str(victim)), cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def same_results(a: Path, b: Path) -> None:
    """Every chunk file and the summary of sweep directory ``b`` equal ``a``'s."""
    files = sorted(x.relative_to(a) for x in a.glob("cells/*/*.parquet"))
    assert files == sorted(x.relative_to(b) for x in b.glob("cells/*/*.parquet"))
    for rel in [*files, Path("summary.parquet")]:
        assert_frame_equal(pl.read_parquet(a / rel), pl.read_parquet(b / rel))


@pytest.mark.slow  # about 20 s: a scheduler, workers and the sweep as processes
def test_9_worker_killed_while_another_remains_is_rescheduled(dask_procs, in_process, tmp_path):
    """kill -9 of one of two workers mid-sweep: its chunks run on the other; same bytes."""
    toml, local = in_process
    victim, _ = dask_procs.workers(2)
    out = tmp_path / "o"
    r = sweep_killing(victim.pid, [str(toml), "--out", str(out), "--no-progress", "--backend",
                                   "dask", "--address", dask_procs.address])
    assert r.returncode == 0, r.stderr
    assert victim.wait(timeout=10) == -signal.SIGKILL
    same_results(local, out)


@pytest.mark.slow  # about 20 s: a scheduler, workers and the sweep as processes
def test_9_last_worker_killed_stops_with_one_line_and_resumes(dask_procs, in_process, tmp_path):
    """kill -9 of the only worker mid-sweep: no hang; after --dask-timeout without a worker
    one line, exit 1, chunks kept; with a worker back the same command completes."""
    toml, local = in_process
    (victim,) = dask_procs.workers(1)
    out = tmp_path / "o"
    argv = [str(toml), "--out", str(out), "--no-progress", "--backend", "dask", "--address",
            dask_procs.address, "--dask-timeout", "3"]
    t0 = time.monotonic()
    r = sweep_killing(victim.pid, argv)
    assert r.returncode == 1, r.stderr
    assert time.monotonic() - t0 < 60
    err = after_connecting(r.stderr, dask_procs.address).splitlines()
    assert len(err) == 1 and "has had no worker for 3 s" in err[0], r.stderr
    assert "the same command resumes" in err[0]
    kept = len(list(out.glob("cells/*/chunk-*.json")))
    assert 1 <= kept < 27
    dask_procs.workers(1)
    r = sweep_killing(0, argv)
    assert r.returncode == 0, r.stderr
    assert f"resumed: {kept} of 27 chunks were already done" in r.stderr
    same_results(local, out)


def test_a_client_that_fails_to_close_leaves_the_runs_own_error(monkeypatch):
    """With the scheduler killed, the sweep's one line (ClusterLostError) was replaced, in
    one run of a few, by distributed failing to close the client ("RuntimeError: Cannot
    change state of expiring Timeout"): two tracebacks.  Closing after a failure is quiet."""
    from fastsim.errors import ClusterLostError
    from fastsim.sweep import runner

    closed = []

    class Broken:
        def close(self):
            closed.append(self)
            raise RuntimeError("Cannot change state of expiring Timeout")

    client, cluster = Broken(), Broken()
    monkeypatch.setattr(runner, "_connect", lambda *a: (client, cluster))
    monkeypatch.setattr(runner, "_quiet_client_logs", lambda: None)
    with pytest.raises(ClusterLostError, match="lost"):
        with runner.dask_client("dask", "tcp://x:1", None, 1.0):
            raise ClusterLostError("lost the connection to the Dask scheduler")
    assert closed == [client, cluster]


def test_a_signal_while_the_local_cluster_closes_is_taken_once_it_is_closed(monkeypatch):
    """SIGTERM as a sweep ended, while its local cluster closed, cancelled distributed's
    close half-way: the cluster stayed "closing", and the close distributed runs at exit
    waited its whole 10 s timeout for it (``fastsim sweep ... --backend dask`` took 11 s to
    end).  The signal is raised once the cluster is closed."""
    from distributed.core import Status

    from fastsim.errors import Terminated, signal_handlers
    from fastsim.sweep import runner

    closing = distributed.LocalCluster._close

    async def signalled_while_closing(self):
        # to the main thread, waiting on the close, as the kernel delivers a SIGTERM
        signal.pthread_kill(threading.main_thread().ident, signal.SIGTERM)
        await asyncio.sleep(0.5)  # the main thread takes it before the close goes on
        await closing(self)

    def terminate(signum, frame):
        raise Terminated()

    monkeypatch.setattr(distributed.LocalCluster, "_close", signalled_while_closing)
    monkeypatch.setattr(runner, "SIGNAL_WAIT_S", 120.0)  # however busy the machine
    with signal_handlers({signal.SIGTERM: terminate}):
        with pytest.raises(Terminated):
            with runner.dask_client("dask", None, 1, 60.0) as client:
                cluster = client.cluster
    assert cluster.status == Status.closed


def test_a_signal_while_the_local_cluster_starts_leaves_it_closed(monkeypatch):
    """SIGTERM in the seconds a local cluster started cancelled its start half-way, which
    fastsim never had to close: distributed's close at exit failed on its half-started
    workers, a 20-line traceback under the command's one line.  The signal is raised once
    the cluster has started, and closed again."""
    from distributed.core import Status

    from fastsim.errors import Terminated, signal_handlers
    from fastsim.sweep import runner

    made = []

    class SignalledWhileStarting(distributed.LocalCluster):
        async def _start(self):
            made.append(self)
            signal.pthread_kill(threading.main_thread().ident, signal.SIGTERM)
            await asyncio.sleep(0.5)  # the main thread takes it before the start goes on
            await super()._start()

    def terminate(signum, frame):
        raise Terminated()

    monkeypatch.setattr(distributed, "LocalCluster", SignalledWhileStarting)
    monkeypatch.setattr(runner, "SIGNAL_WAIT_S", 120.0)  # however busy the machine
    with signal_handlers({signal.SIGTERM: terminate}):
        with pytest.raises(Terminated):
            with runner.dask_client("dask", None, 1, 60.0):
                pass
    assert [c.status for c in made] == [Status.closed]


@pytest.mark.slow  # about 20 s: a scheduler, workers and the sweep as processes
def test_9_scheduler_killed_mid_sweep_is_one_line(dask_procs, in_process, tmp_path):
    """kill -9 of the scheduler mid-sweep: one line (no traceback), exit 1, chunks kept."""
    toml, _ = in_process
    dask_procs.workers(1)
    out = tmp_path / "o"
    r = sweep_killing(dask_procs.scheduler.pid, [
        str(toml), "--out", str(out), "--no-progress", "--backend", "dask", "--address",
        dask_procs.address, "--dask-timeout", "3"])
    assert r.returncode == 1, r.stderr
    err = after_connecting(r.stderr, dask_procs.address).splitlines()
    assert len(err) == 1 and "lost the connection to the Dask scheduler" in err[0], r.stderr
    assert "the same command resumes" in err[0]
    assert len(list(out.glob("cells/*/chunk-*.json"))) >= 1


class FakeFuture:
    def __init__(self, status, exc=None):
        self.status, self.exc = status, exc

    def exception(self):
        return self.exc

    def result(self, timeout=None):
        raise self.exc


class FakeClient:
    """What the run asks of a client: its status and the scheduler's workers."""
    status = "running"

    def __init__(self, n_workers):
        from types import SimpleNamespace

        self.n_workers = n_workers
        self.scheduler = SimpleNamespace(address="tcp://h:8786", identity=self.identity)

    def identity(self, n_workers=-1):
        return {"workers": {f"w{i}": {} for i in range(self.n_workers)}}

    def sync(self, func, *args, callback_timeout=None, **kwargs):
        return func(*args, **kwargs)


def test_9_a_chunk_lost_with_every_worker_is_one_error():
    """distributed's KilledWorker (a chunk whose workers all died): ClusterLostError."""
    from types import SimpleNamespace

    from distributed.scheduler import KilledWorker

    from fastsim.errors import ClusterLostError
    from fastsim.sweep.runner import _Watch

    exc = KilledWorker("run_chunk-1", SimpleNamespace(address="tcp://w:1"), 3)
    with pytest.raises(ClusterLostError, match="chunk 2 of cell c was lost: every Dask "
                       "worker that ran it died .4 attempts.; the chunks already written"):
        _Watch(FakeClient(1), 60).result(FakeFuture("error", exc), ["c"], 2)
    # a task runs a chunk's cells of one workload together, and is named by all of them
    with pytest.raises(ClusterLostError, match="chunk 2 of cells a, b was lost"):
        _Watch(FakeClient(1), 60).result(FakeFuture("error", exc), ["a", "b"], 2)


def test_9_a_computed_chunk_not_fetched_runs_again_then_stops():
    """A fetch that fails (its worker died) asks for the chunk to run again, 3 times; the
    scheduler gone is said as such."""
    from fastsim.errors import ClusterLostError
    from fastsim.sweep.runner import REFETCHES, _Watch

    watch = _Watch(FakeClient(1), 60)
    lost = FakeFuture("finished", TimeoutError())
    assert [watch.result(lost, ["c"], 0) for _ in range(REFETCHES)] == [None] * REFETCHES
    with pytest.raises(ClusterLostError, match="computed 4 times but could not be fetched"):
        watch.result(lost, ["c"], 0)
    client = FakeClient(1)
    client.status = "connecting"
    with pytest.raises(ClusterLostError, match="lost the connection to the Dask scheduler"):
        _Watch(client, 60).result(FakeFuture("finished", OSError("reset")), ["c"], 0)


def test_9_a_scheduler_that_stops_answering_mid_sweep_stops_the_run_in_time():
    # a scheduler whose process or host froze keeps its connections open: the run's look
    # at its workers (scheduler_info, no time limit) waited forever, whatever --dask-timeout
    # said.  Its rpc pointed at a port that accepts and never answers stands for it.
    import socket
    import threading

    from fastsim.errors import ClusterLostError
    from fastsim.sweep.runner import _Watch

    with distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=None) as cl, \
            distributed.Client(cl) as client, socket.create_server(("127.0.0.1", 0)) as silent:
        watch = _Watch(client, 1)
        assert watch.workers() == 0
        client.scheduler = client.rpc(f"tcp://127.0.0.1:{silent.getsockname()[1]}")
        threading.Timer(10, silent.close).start()  # still waiting then: fail, not hang
        t0 = time.monotonic()
        with pytest.raises(ClusterLostError, match=r"the Dask scheduler \S+ has not answered "
                           r"for 1 s mid-sweep \(its process or host frozen"):
            watch.workers()
        assert time.monotonic() - t0 < 8


def test_9_no_worker_for_the_grace_period_stops(monkeypatch):
    """No worker for --dask-timeout seconds, looked at once a second: ClusterLostError."""
    from fastsim.errors import ClusterLostError
    from fastsim.sweep import runner

    from types import SimpleNamespace

    clock = iter([0.0, 2.0, 5.5])  # the runner's clock only, not the time module's
    monkeypatch.setattr(runner, "time", SimpleNamespace(monotonic=lambda: next(clock)))
    watch = runner._Watch(FakeClient(0), 5)
    watch.check()  # the first look without a worker starts the grace period
    watch.check()  # 2 s: waiting still
    with pytest.raises(ClusterLostError, match="has had no worker for 5 s"):
        watch.check()


def test_9_a_worker_without_fastsim_is_one_error_and_a_chunk_error_stays_its_own():
    # anything a worker raises that is not fastsim's own came out as a raw traceback
    from fastsim.errors import ClusterLostError, ConfigError
    from fastsim.sweep.runner import _Watch

    missing = ModuleNotFoundError("No module named 'fastsim'")
    with pytest.raises(ClusterLostError, match="chunk 1 of cell c failed on a Dask worker: "
                       "ModuleNotFoundError: No module named 'fastsim'; every worker needs"):
        _Watch(FakeClient(1), 60).result(FakeFuture("error", missing), ["c"], 1)
    own = ConfigError("policy x: allowed: y")
    with pytest.raises(ConfigError, match="policy x"):
        _Watch(FakeClient(1), 60).result(FakeFuture("error", own), ["c"], 1)


def test_ctrl_c_stops_a_local_cluster_sweep_in_one_line(tmp_path):
    # Ctrl-C reaches the terminal's whole process group: the worker processes too
    toml = tmp_path / "long.toml"
    toml.write_text('clusters = 20000\nchunk = 50\n[base]\nn_jobs = 300\n[axes]\n'
                    'policy = ["none", "oracle"]\n')
    p = subprocess.Popen([sys.executable, "-c", "from fastsim.cli import main; "
                          "raise SystemExit(main())", "sweep", str(toml), "--backend", "dask",
                          "--workers", "1", "--no-progress", "--out", str(tmp_path / "out")],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        started = p.stderr.readline()
        assert started.startswith("dask: started a local cluster"), started
        time.sleep(2.0)  # the worker settled and running chunks (it printed nothing sooner)
        os.killpg(p.pid, signal.SIGINT)
        err = p.communicate(timeout=60)[1].strip().splitlines()
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 130, err
    assert err[-1] == "fastsim sweep: interrupted; finished work is kept: the same command resumes it", err
    # no worker prints a traceback, nor distributed's warning of a task cancelled as its
    # worker closes ("Async instruction ... ended with CancelledError": worker_plugin)
    assert not [line for line in err if "Traceback" in line or "KeyboardInterrupt" in line], err
    assert len(err) == 1, err


@pytest.mark.parametrize("kw, said", [
    ({"workers": 2}, "workers=2 applies to backend='dask' only; allowed: backend='dask' with "
     "it, or None"),
    ({"address": "tcp://127.0.0.1:8786"}, "address='tcp://127.0.0.1:8786' applies to "
     "backend='dask' only"),
    ({"backend": "dask", "address": "tcp://127.0.0.1:8786", "workers": 2},
     "workers sizes a local cluster; with an address the scheduler's own workers run the "
     "chunks; allowed: one of workers and address"),
])
def test_the_python_api_refuses_dask_options_it_would_not_use(tmp_path, kw, said):
    """fastsim.sweep(file, out, workers=2) ran in this process, workers dropped without a
    word, as the command line refuses --workers without --backend dask."""
    p = tmp_path / "s.toml"
    p.write_text("clusters = 2\nchunk = 2\n[base]\nn_jobs = 10\n[axes]\npolicy = ['none']\n")
    with pytest.raises(fastsim.ConfigError, match=re.escape(said)):
        fastsim.sweep(p, tmp_path / "o", **kw)
    assert not (tmp_path / "o").exists()


def test_a_numpy_worker_count_is_a_count(tmp_path):
    """workers=np.int64(2) was refused as 'allowed: an integer >= 1'."""
    import numpy as np

    from fastsim.sweep.grid import load_sweep
    from fastsim.sweep.runner import check_run

    p = tmp_path / "s.toml"
    p.write_text("clusters = 2\nchunk = 2\n[base]\nn_jobs = 10\n[axes]\npolicy = ['none']\n")
    check_run(load_sweep(p), "dask", np.int64(2))


def test_distributeds_cancel_race_at_ctrl_c_is_not_logged():
    """Ctrl-C landing while distributed's ``sync`` had not yet made the future its
    ``cancel`` callback cancels logged tornado's traceback of the NameError (once in a CI
    run of test_ctrl_c_stops_a_local_cluster_sweep_in_one_line); the client's logs drop
    that record, and only that one."""
    import logging
    import os

    from fastsim.sweep.runner import _not_syncs_cancel_race

    def raised_in(filename: str, name: str) -> logging.LogRecord:
        scope: dict = {}
        exec(compile(f"def {name}():\n    future\n", filename, "exec"), scope)
        try:
            scope[name]()
        except NameError:
            info = sys.exc_info()
        return logging.LogRecord("tornado.application", logging.ERROR, __file__, 1,
                                 "Exception in callback", None, info)

    race = raised_in(os.path.join("x", "distributed", "utils.py"), "cancel")
    assert _not_syncs_cancel_race(race) is False
    assert _not_syncs_cancel_race(raised_in(os.path.join("x", "mine.py"), "cancel"))
    assert _not_syncs_cancel_race(raised_in(os.path.join("x", "distributed", "utils.py"), "other"))
    assert _not_syncs_cancel_race(logging.LogRecord("t", logging.ERROR, __file__, 1, "m", None,
                                                    None))


def test_9_a_scheduler_killed_is_lost_not_frozen_when_its_question_times_out():
    # after kill -9 the client's rpc retries the connection until the question's time runs
    # out, so on a loaded machine the killed scheduler was reported as frozen
    import socket

    from fastsim.errors import ClusterLostError
    from fastsim.sweep.runner import _Watch

    with socket.create_server(("127.0.0.1", 0)) as gone:
        port = gone.getsockname()[1]  # closed below: nothing listens there any more
    client = FakeClient(1)
    client.scheduler.address = f"tcp://127.0.0.1:{port}"

    def times_out(func, *args, callback_timeout=None, **kwargs):
        raise TimeoutError

    client.sync = times_out
    with pytest.raises(ClusterLostError, match="lost the connection to the Dask scheduler"):
        _Watch(client, 5).workers()


def test_a_script_without_the_main_guard_is_refused_before_any_worker_starts(tmp_path):
    """fastsim.sweep(..., backend="dask") at a script's top level: each spawned worker
    imported the script, ran the sweep again and failed to start, some 350 lines of
    tracebacks (docs/sweeps.md says to guard it).  Refused at once, naming the line; the
    guard, even inside a try, and a script run by ``python -c`` are not."""
    (tmp_path / "s.toml").write_text(SWEEP)
    call = 'fastsim.sweep("s.toml", "out", backend="dask", workers=1, progress=False)'
    (tmp_path / "bare.py").write_text(f"import fastsim\n\ndef go():\n    {call}\n\ngo()\n")
    r = subprocess.run([sys.executable, "bare.py"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=120)
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 1 and "Nanny" not in r.stderr, r.stderr
    assert last == (f"fastsim.errors.ConfigError: {tmp_path / 'bare.py'}:6: starts a sweep on a "
                    "local Dask cluster outside `if __name__ == \"__main__\":`, and each worker "
                    "process imports the script first and would start it again; allowed: the "
                    "call under that guard (docs/sweeps.md, Dask)"), r.stderr
    assert not (tmp_path / "out").exists()
    said = "from fastsim.user_modules import unguarded_main_line as u\n"
    (tmp_path / "guarded.py").write_text(said + "try:\n    if '__main__' == __name__:\n"
                                                "        print(u())\nfinally:\n    pass\n")
    for argv in (["guarded.py"], ["-c", said + "print(u())"]):
        r = subprocess.run([sys.executable, *argv], cwd=tmp_path, capture_output=True,
                           text=True, timeout=120)
        assert r.stdout == "None\n", r.stderr


def test_a_package_run_as_main_is_not_refused(tmp_path):
    """`python -m pkg` and `python DIR/` run a ``__main__.py``, which spawned workers never
    run again (multiprocessing skips a main module named ``__main__``): an unguarded
    sweep there was refused, though it ran; `python -m pkg.mod` is run again, refused."""
    said = "from fastsim.user_modules import unguarded_main_line as u\nprint(u())\n"
    (tmp_path / "pkg").mkdir()
    for name in ("__init__.py", "__main__.py", "mod.py"):
        (tmp_path / "pkg" / name).write_text(said if name != "__init__.py" else "")
    for argv, out in ((["-m", "pkg"], "None"), (["pkg/"], "None"),
                      (["-m", "pkg.mod"], f"{tmp_path / 'pkg' / 'mod.py'}:2")):
        r = subprocess.run([sys.executable, *argv], cwd=tmp_path, capture_output=True,
                           text=True, timeout=120)
        assert r.stdout == out + "\n", (argv, r.stderr)


@pytest.mark.parametrize("source, guarded", [
    ('if __name__ == "__main__":\n    go()  # here', True),
    ('if "__main__" == __name__:\n    go()  # here', True),
    ('if __name__ == "__main__" and x:\n    go()  # here', True),
    ('if x and __name__ == "__main__":\n    go()  # here', True),
    ('if __name__ == "__main__" or x:\n    go()  # here', False),
    ('if __name__ == "__main__":\n    pass\nelse:\n    go()  # here', False),
    ('if __name__ != "__main__":\n    pass\nelse:\n    go()  # here', True),
    ('if __name__ != "__main__":\n    go()  # here', False),
    ('match __name__:\n    case "__main__":\n        go()  # here', True),
    ('match __name__:\n    case "other":\n        go()  # here', False),
    ('try:\n    if __name__ == "__main__":\n        go()  # here\nfinally:\n    pass', True),
    ('go()  # here', False),
])
def test_which_statements_a_worker_rerunning_the_script_skips(source, guarded):
    """The guard forms a worker's run of the script as ``__mp_main__`` skips: `and` with
    another test, and `match` were refused though skipped; an `else:` of the guard, which
    the worker runs, was taken as guarded."""
    import ast

    from fastsim.user_modules import main_guarded

    line = next(i for i, s in enumerate(source.splitlines(), 1) if "# here" in s)
    assert main_guarded(ast.parse(source), line) is guarded


def test_a_script_run_by_pdb_is_judged_by_its_own_lines(tmp_path):
    """`python -m pdb script.py` runs the script in ``__main__``'s dict from pdb's own
    top level, whose frame was taken as the script's: a guarded sweep was refused, and
    an unguarded one named a line of pdb.py as the script's."""
    said = "from fastsim.user_modules import unguarded_main_line as u\n"
    (tmp_path / "guarded.py").write_text(said + "if __name__ == '__main__':\n    print(u())\n")
    (tmp_path / "plain.py").write_text(said + "print(u())\n")
    for name, out in (("guarded.py", "None"), ("plain.py", f"{tmp_path / 'plain.py'}:2")):
        r = subprocess.run([sys.executable, "-m", "pdb", name], cwd=tmp_path, input="c\nq\n",
                           capture_output=True, text=True, timeout=120)
        assert "(Pdb) " + out + "\n" in r.stdout, (name, r.stdout, r.stderr)
