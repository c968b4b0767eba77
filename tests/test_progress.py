"""Progress bars: redrawn in place on a terminal, written as lines into a log."""
from __future__ import annotations

import io

from fastsim.progress import progress_bar


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_bar_into_a_log_writes_lines_not_redraws():
    """Into a file or pipe a bar redrew itself with carriage returns: a sweep's log was one
    ever-growing 'line' of every state.  It writes its first and last state as lines, and
    at most one line per LOG_INTERVAL between."""
    log = io.StringIO()
    for _ in progress_bar(range(100_000), desc="cells", file=log):
        pass
    text = log.getvalue()
    assert "\r" not in text, text[:200]
    lines = text.splitlines()
    assert 1 <= len(lines) <= 3, lines
    assert lines[-1].startswith("cells: 100%") and "100000/100000" in lines[-1], lines


def test_a_bar_on_a_terminal_redraws_in_place_and_none_is_drawn_when_disabled():
    tty = _Terminal()
    for _ in progress_bar(range(10), desc="cells", file=tty, mininterval=0):
        pass
    assert "\r" in tty.getvalue() and "10/10" in tty.getvalue()
    quiet = io.StringIO()
    for _ in progress_bar(range(10), desc="cells", file=quiet, enabled=False):
        pass
    assert quiet.getvalue() == ""


def test_a_sweeps_bar_says_its_cells_from_its_first_line(capsys):
    """The sweep's bar set its cell count after its first state: two lines a sweep in a log,
    the first without the count."""
    from fastsim.sweep.runner import _progress

    bar = _progress(total=4, initial=0, n_cells=2, cells_done=0, enabled=True)
    bar.update(4)
    bar.close()
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and all("cells 0/2" in line for line in lines), lines


def test_a_resumed_sweeps_bar_writes_its_one_state_once(capsys):
    """A resumed sweep whose chunks were all done starts its bar in its last state: into a
    log it wrote '100% 36/36' twice, its first and last state the same line."""
    from fastsim.sweep.runner import _progress

    bar = _progress(total=4, initial=4, n_cells=2, cells_done=2, enabled=True)
    bar.close()
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and "4/4" in lines[0] and "cells 2/2" in lines[0], lines


def test_a_closed_bar_leaves_no_thread_running():
    """tqdm's monitor thread, started by the first bar, outlived it until the process
    exited: ``fastsim.sweep(...)`` returned leaving a thread running."""
    import threading

    import tqdm

    if tqdm.tqdm.monitor is not None:  # another library's bar's, in this process: stopped,
        tqdm.tqdm.monitor.exit()  # so that one a bar here started would show
        tqdm.tqdm.monitor = None
    before = set(threading.enumerate())
    for _ in progress_bar(range(10), desc="cells", file=io.StringIO()):
        pass
    assert set(threading.enumerate()) <= before, threading.enumerate()


def test_a_transient_bar_into_a_log_still_writes_its_last_state():
    """A bar that clears itself on a terminal (leave=False: a sweep's aggregation) wrote only
    its first state into a log, 'aggregate: 0% 0/24', and never its end: the log read as
    if aggregation had stalled at nothing."""
    log = io.StringIO()
    bar = progress_bar(total=24, unit="cell", desc="aggregate", leave=False, file=log)
    for _ in range(24):
        bar.update()
    bar.close()
    lines = log.getvalue().splitlines()
    assert lines[-1].startswith("aggregate: 100%") and "24/24" in lines[-1], lines


def test_the_api_sweep_shows_its_bar_where_stderr_is_a_terminal(tmp_path, monkeypatch):
    """fastsim.sweep(...) ran in silence for as long as its chunks took (progress=False
    by default), where fastsim sweep shows a bar.  By default it now shows one on a
    terminal, and none into a log or a pipe; False and True are kept as given."""
    import sys

    import fastsim

    p = tmp_path / "s.toml"
    p.write_text("clusters = 2\nchunk = 1\n[base]\nn_jobs = 8\n[axes]\npolicy = ['none']\n")
    drawn = {}
    for out, stream, progress in (("tty", _Terminal(), None), ("log", io.StringIO(), None),
                                  ("off", _Terminal(), False), ("on", io.StringIO(), True)):
        monkeypatch.setattr(sys, "stderr", stream)
        fastsim.sweep(p, tmp_path / out, progress=progress)
        drawn[out] = "cells 1/1" in stream.getvalue()  # the bar's last state
    assert drawn == {"tty": True, "log": False, "off": False, "on": True}, drawn
