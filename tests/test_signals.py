"""Ctrl-C and SIGTERM: at any moment the command ends with one line on stderr (no
traceback), removes the temporary file of a write in progress and leaves its outputs
whole or absent, so that running it again finishes as an uninterrupted run does.

The signal is sent from inside the command at a chosen moment (a patched function), so
each test is deterministic; commands that must die run in a subprocess with a timeout.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from fastsim import cli


def run_script(script: str, cwd, timeout=60):
    """``script`` in a fresh interpreter: (exit code, stderr lines)."""
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=cwd,
                       capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stderr.strip().splitlines()


def test_ctrl_c_while_starting_is_one_line(monkeypatch, capsys):
    # the subcommands' modules import numba and polars: seconds in which Ctrl-C is likely
    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    try:
        code = cli.main(["run"])
    except KeyboardInterrupt:  # caught here, or it would stop the whole test session
        pytest.fail("Ctrl-C while starting escaped fastsim's main")
    assert code == 130
    err = capsys.readouterr().err.strip()
    assert err == "fastsim: interrupted; nothing half-written is left", err


def test_sigterm_while_writing_leaves_no_temporary_file(tmp_path):
    code, err = run_script("""
        import os, signal
        import fastsim.io as io
        from fastsim.cli import main

        real = io.write_parquet

        def stopped_midway(df, target, metadata=None):
            real(df, target, metadata)
            os.kill(os.getpid(), signal.SIGTERM)

        io.write_parquet = stopped_midway
        raise SystemExit(main(["run", "--clusters", "2", "--n-jobs", "10", "--out", "o.parquet"]))
    """, tmp_path)
    assert code == 143, err
    assert err == ["fastsim run: terminated; nothing half-written is left"], err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM"])
def test_signal_during_a_sweep_resumes_to_the_same_tables(tmp_path, signum):
    toml = tmp_path / "s.toml"
    toml.write_text('clusters = 4\nchunk = 1\n[base]\nn_jobs = 10\n[axes]\n'
                    'policy = ["none", "oracle"]\n')
    argv = ["sweep", str(toml), "--no-progress", "--out"]
    code, err = run_script(f"""
        import os, signal
        import fastsim.sweep.store as store
        from fastsim.cli import main

        real, calls = store.SweepStore.write_chunk, []

        def stopped_after_two(self, *args, **kwargs):
            real(self, *args, **kwargs)
            calls.append(1)
            if len(calls) == 2:
                os.kill(os.getpid(), signal.{signum})

        store.SweepStore.write_chunk = stopped_after_two
        raise SystemExit(main({argv + ["cut"]!r}))
    """, tmp_path)
    assert code == (130 if signum == "SIGINT" else 143), err
    assert len(err) == 1 and "finished work is kept: the same command resumes it" in err[0], err
    assert not [p for p in (tmp_path / "cut").rglob("*") if p.name.endswith(".tmp")]
    assert not (tmp_path / "cut" / "summary.parquet").exists()
    assert (tmp_path / "cut" / "sweep.lock").read_text() == ""  # no holder named
    for out in ("cut", "whole"):
        assert cli.main([*argv, str(tmp_path / out)]) == 0
    for table in ("summary.parquet", "cells.parquet", "jct_hist.parquet"):
        assert ((tmp_path / "cut" / table).read_bytes()
                == (tmp_path / "whole" / table).read_bytes()), table


def test_ctrl_c_landing_in_a_finaliser_still_stops_the_command(monkeypatch, capsys):
    # Python drops an exception raised in a finaliser ('Exception ignored in ...'): a
    # Ctrl-C landing there, while figures were drawn, let the command run to its end
    class Finalised:
        def __del__(self):
            raise KeyboardInterrupt  # where the signal's handler ran

    def hold_outputs(args):
        Finalised()
        time.sleep(1)  # the command's work, where the signal is taken
        return []

    monkeypatch.setattr(cli, "hold_outputs", hold_outputs)
    try:
        code = cli.main(["run", "--clusters", "2", "--n-jobs", "10"])
    except KeyboardInterrupt:  # caught here, or it would stop the whole test session
        pytest.fail("Ctrl-C escaped fastsim's main")
    err = capsys.readouterr().err.strip()
    assert code == 130, err
    assert err == "fastsim run: interrupted; nothing half-written is left", err


def test_ctrl_c_between_two_renames_still_renames_both(tmp_path, monkeypatch):
    from fastsim import io

    real = os.replace

    def interrupted_after(src, dst):
        real(src, dst)
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C between this rename and the next

    monkeypatch.setattr(io.os, "replace", interrupted_after)
    targets = [tmp_path / "o.parquet", tmp_path / "jobs.parquet"]
    with pytest.raises(KeyboardInterrupt):  # taken once both are in place
        io.write_all([(t, io.bytes_writer(b"new")) for t in targets])
    assert [t.read_bytes() for t in targets] == [b"new", b"new"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jobs.parquet", "o.parquet"]


def test_sigterm_ignored_by_whoever_runs_fastsim_stays_ignored(monkeypatch):
    seen = []
    monkeypatch.setattr(cli, "hold_outputs", lambda args: seen.append(signal.getsignal(
        signal.SIGTERM)) or [])
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        assert cli.main(["run", "--clusters", "2", "--n-jobs", "10"]) == 0
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert seen == [signal.SIG_IGN]


def test_sigterm_handler_and_unraisable_hook_are_set_for_the_command_then_restored(monkeypatch):
    seen = []
    monkeypatch.setattr(cli, "hold_outputs", lambda args: seen.append(
        (signal.getsignal(signal.SIGTERM), sys.unraisablehook)) or [])
    before = (signal.getsignal(signal.SIGTERM), sys.unraisablehook)
    assert before[0] is signal.SIG_DFL
    assert cli.main(["run", "--clusters", "2", "--n-jobs", "10"]) == 0
    assert seen == [(cli._terminate, cli._redeliver)]
    assert (signal.getsignal(signal.SIGTERM), sys.unraisablehook) == before


def test_an_interrupted_run_does_not_claim_to_keep_work(monkeypatch, capsys):
    """Ctrl-C of fastsim run said "finished work is kept", though run keeps nothing (its
    outputs are written whole at the end): only the commands that resume say so."""
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "hold_outputs", interrupted)
    for argv, said in ((["run", "--clusters", "2"], "nothing half-written is left"),
                       (["sweep", "noise", "--out", "x"],
                        "finished work is kept: the same command resumes it")):
        assert cli.main(argv) == 130
        assert capsys.readouterr().err.strip() == f"fastsim {argv[0]}: interrupted; {said}"
    # a command with an action is named with it, as typed ("fastsim costaware" named none)
    for argv in (["costaware", "sgd", "--out", "x"], ["traces", "toy-rlhf", "--out", "x"]):
        assert cli.main(argv) == 130
        assert capsys.readouterr().err.strip() == (f"fastsim {' '.join(argv[:2])}: interrupted; "
                                                   "nothing half-written is left")


def test_ctrl_c_in_a_simulation_leaves_the_other_threads_no_further_rows(monkeypatch):
    """Ctrl-C in a built-in simulation of many clusters (a sweep's chunk of 60,000) is
    taken by the main thread between two of its rows, and the call then waited for the
    other threads to compute every row left: 10 s.  They now stop at the row in hand."""
    from fastsim.kernels import pipeline

    rows = []

    def pipeline_nb(lo, hi, *args):
        rows.append(lo)
        if threading.current_thread() is threading.main_thread():
            raise KeyboardInterrupt  # where the signal's handler ran
        time.sleep(0.001)

    monkeypatch.setattr(pipeline, "PIPELINES", (pipeline_nb,))
    monkeypatch.setattr(pipeline.numba, "get_num_threads", lambda: 2)
    with pytest.raises(KeyboardInterrupt):
        pipeline.run_pipeline(0, 16 * 1000)  # 1,000 rows of 16 clusters
    assert len(rows) < 20, len(rows)


def test_ctrl_c_while_a_simulation_compiles_does_not_wait_for_the_compile(monkeypatch):
    """A first `fastsim sweep` compiled its simulation kernel in whichever thread called
    it first, often a pool thread; Ctrl-C, taken by the main thread waiting for numba's
    compiler lock, then waited for the whole compile (15-80 s), the pool's end waiting
    for its threads.  The first call is now the calling thread's own, where numba's
    compiler (Python) takes the signal between two of its steps."""
    from fastsim.kernels import pipeline

    callers = []

    class Uncompiled:  # a kernel's dispatcher before its first call
        signatures: list = []

        def __call__(self, lo, hi, *args):
            callers.append(threading.current_thread() is threading.main_thread())
            if threading.current_thread() is threading.main_thread():
                raise KeyboardInterrupt  # where the signal's handler ran, inside the compile
            time.sleep(10)  # a pool thread's compile: the pool's end waited for it

    monkeypatch.setattr(pipeline, "PIPELINES", (Uncompiled(),))
    monkeypatch.setattr(pipeline.numba, "get_num_threads", lambda: 2)
    with pytest.raises(KeyboardInterrupt):
        pipeline.run_pipeline(0, 16 * 1000)
    assert callers == [True], callers  # the caller's call alone: no pool thread had started


# A user's stop policy that, in the process named by STUCK_SIGNAL, sends that signal to
# its own process from inside the compiled call (as Ctrl-C or `kill` would, at a moment
# known to be inside it), then never returns; elsewhere it never stops a job.
STUCK = '''
import ctypes
import os

from numba import njit

from fastsim.registry import stop_policy

_kill = ctypes.CDLL(None).kill
_kill.argtypes, _kill.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
PID, SIGNUM = os.getpid(), int(os.environ.get("STUCK_SIGNAL", "0"))


@stop_policy(params=[], label="stuck")
@njit
def stuck(scores, losses, attained_h, t_est_h):
    if SIGNUM:
        _kill(PID, SIGNUM)
        i = 0
        while i >= 0:  # forever
            i = (i + 1) % 1000
    return 0
'''


def stuck_command(tmp_path, signum, argv, timeout=30):
    """``fastsim ARGV`` in a child whose policy ``stuck:stuck`` receives ``signum`` inside
    its compiled call: (exit code, stderr lines but a compile notice, seconds taken)."""
    from conftest import own_lines

    (tmp_path / "stuck.py").write_text(STUCK)
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "STUCK_SIGNAL": str(int(signum))}
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "fastsim.cli", *argv], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=timeout)
    return r.returncode, own_lines(r.stderr), time.monotonic() - t0


@pytest.mark.parametrize("signum, code, how", [(signal.SIGINT, 130, "interrupted"),
                                               (signal.SIGTERM, 143, "terminated")])
def test_a_signal_inside_a_compiled_call_that_never_returns_ends_the_command(
        tmp_path, signum, code, how):
    """A user's @njit policy looping forever held `fastsim run` through Ctrl-C and SIGTERM
    (Python runs a handler only once the compiled call returns): only kill -9 ended it.
    Now it ends SIGNAL_GRACE_S after the signal, in its one line."""
    got, err, took = stuck_command(tmp_path, signum, ["run", "--clusters", "2", "--n-jobs",
                                                     "10", "--policy", "stuck:stuck"])
    assert got == code, err
    assert err == [f"fastsim run: {how}; a compiled call was still running 2 s later, so it "
                   "stopped there; nothing half-written is left"], err
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "__pycache__") == ["stuck.py"]


def test_a_signal_taken_keeps_its_own_ending_however_long(tmp_path):
    """Once the main thread has taken the signal, its own ending (a Dask cluster closed,
    seconds) goes on past SIGNAL_GRACE_S and prints today's line, not the hard stop's."""
    code, err = run_script("""
        import os, signal, time
        from fastsim import cli

        cli.SIGNAL_GRACE_S = 0.2

        def hold_outputs(args):
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(10)  # where the signal is taken
            finally:
                time.sleep(1.0)  # a slow ending: five grace periods
            return []

        cli.hold_outputs = hold_outputs
        raise SystemExit(cli.main(["run", "--clusters", "2", "--n-jobs", "10"]))
    """, tmp_path)
    assert code == 130, err
    assert err == ["fastsim run: interrupted; nothing half-written is left"], err


def test_a_signal_inside_the_first_cluster_trial_leaves_no_sweep_directory(tmp_path):
    """The first-cluster trial of a sweep's user functions runs once ``--out`` is locked:
    a policy stuck in its compiled call there, ended by Ctrl-C SIGNAL_GRACE_S later
    (``os._exit``, no ``finally``), left ``--out`` made and holding a blank ``sweep.lock``,
    a sweep directory to every later look, though the run wrote nothing."""
    (tmp_path / "s.toml").write_text('clusters = 2\nchunk = 1\n[base]\nn_jobs = 10\n[axes]\n'
                                     'policy = ["stuck:stuck"]\n')
    got, err, _ = stuck_command(tmp_path, signal.SIGINT,
                                ["sweep", "s.toml", "--no-progress", "--out", "out"])
    assert got == 130, err
    assert "a compiled call was still running 2 s later" in err[-1], err
    assert not (tmp_path / "out").exists(), sorted(p.name for p in (tmp_path / "out").iterdir())



def test_a_costaware_sweep_ended_inside_a_compiled_call_leaves_nothing_it_made(tmp_path):
    """`costaware sweep FILE --out NEW` whose Ctrl-C came during a compiled call of its
    points (an SGD run of seconds), ended SIGNAL_GRACE_S later (``os._exit``, no ``except``
    runs), left NEW holding a blank sweep.lock, a sweep directory to every later look,
    though it said "nothing half-written is left"; as a sweep's first-cluster trial, what
    it made is removed."""
    (tmp_path / "t.toml").write_text('name = "t"\nexperiment = "sgd"\n[axes]\nn = [16]\n')
    code, err = run_script("""
        import ctypes, os, signal
        import fastsim.costaware.sweep as S
        from fastsim import cli
        from numba import njit

        cli.SIGNAL_GRACE_S = 0.2
        kill = ctypes.CDLL(None).kill
        kill.argtypes, kill.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int

        @njit(nogil=True)  # as the kernels: the thread that watches for signals runs
        def interrupted_inside(pid, signum):  # Ctrl-C in a call that never returns
            kill(pid, signum)
            i = 0
            while i >= 0:
                i = (i + 1) % 1000
            return i

        def stuck(*args, **kwargs):
            assert os.path.exists("A/NEW/sweep.lock")
            interrupted_inside(os.getpid(), int(signal.SIGINT))

        S._point_tables = stuck
        raise SystemExit(cli.main(["costaware", "sweep", "t.toml", "--out", "A/NEW"]))
    """, tmp_path, timeout=30)
    assert code == 130, err
    assert "a compiled call was still running" in err[-1], err
    assert not (tmp_path / "A").exists(), sorted(p.name for p in (tmp_path / "A").rglob("*"))
