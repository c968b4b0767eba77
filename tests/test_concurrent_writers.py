"""Two processes writing the same outputs at once (two ``fastsim run --out same.parquet
--jobs-out same_jobs.parquet``): each command's files are renamed into place together,
so the outputs are all of one command's, never some of each.
"""
from __future__ import annotations

import errno
import fcntl
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from fastsim.cli import main
from fastsim.io import atomic_write_bytes, bytes_writer, write_all


def test_two_writers_never_leave_files_of_each(tmp_path):
    # the first writer pauses between its two renames, as a descheduled process may
    first = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import os, time
        from fastsim.io import bytes_writer, write_all

        real = os.replace

        def slow(src, dst):
            real(src, dst)
            time.sleep(1.0)

        os.replace = slow
        write_all([("a.txt", bytes_writer(b"first")), ("b.txt", bytes_writer(b"first"))])
    """)], cwd=tmp_path)
    deadline = time.monotonic() + 30
    while not (tmp_path / "a.txt").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    write_all([(tmp_path / "a.txt", bytes_writer(b"second")),
               (tmp_path / "b.txt", bytes_writer(b"second"))])
    assert first.wait(timeout=30) == 0
    assert (tmp_path / "a.txt").read_text() == (tmp_path / "b.txt").read_text()


def test_every_output_is_synced_before_any_rename(tmp_path, monkeypatch):
    """Each output's temporary file reaches the disk (``os.fsync``) before the first rename:
    a power cut after it leaves the new outputs whole, not empty files under their names.
    (The suite otherwise makes ``os.fsync`` a no-op, conftest ``no_fsync``.)"""
    synced, renamed = [], []
    real_replace = os.replace

    def replace(src, dst):
        renamed.append((str(src), len(synced)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(os.readlink(f"/proc/self/fd/{fd}")))
    monkeypatch.setattr(os, "replace", replace)
    write_all([(tmp_path / "a.txt", bytes_writer(b"a")), (tmp_path / "b.txt", bytes_writer(b"b"))])
    assert [src for src, _ in renamed] == synced and len(synced) == 2, (synced, renamed)
    assert [n for _, n in renamed] == [2, 2]  # both synced before the first rename
    assert (tmp_path / "a.txt").read_text() + (tmp_path / "b.txt").read_text() == "ab"


def test_a_directory_at_one_target_leaves_every_target_as_it_was(tmp_path):
    """A directory where the second of two files goes failed its rename after the first
    was renamed: the first output new beside the second's old one."""
    import pytest

    from fastsim.errors import ConfigError

    (tmp_path / "a.txt").write_text("old")
    (tmp_path / "b.txt").mkdir()
    with pytest.raises(ConfigError, match=r"cannot write .*b\.txt \(Is a directory\)"):
        write_all([(tmp_path / "a.txt", bytes_writer(b"new")),
                   (tmp_path / "b.txt", bytes_writer(b"new"))])
    assert (tmp_path / "a.txt").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.txt"]


def _dead_pid() -> int:
    """The PID of a process that has ended."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_killed_writers_temporary_is_removed_at_the_next_write_never_a_live_ones(tmp_path):
    """``kill -9`` during a write left ``x.parquet.<pid>-<random>.tmp`` beside the output
    for good; the next write to it removes it, once its writer is gone."""
    out = tmp_path / "x.parquet"
    writer = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sys, time
        from pathlib import Path
        from fastsim.io import write_all

        def half(tmp):
            Path(tmp).write_bytes(b"half")
            print("writing", flush=True)
            time.sleep(120)

        write_all([(Path(sys.argv[1]), half)])
    """), str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline() == "writing\n"
        [tmp] = tmp_path.glob("x.parquet.*.tmp")
        atomic_write_bytes(out, b"first")
        assert tmp.exists()  # its writer lives
    finally:
        writer.kill()
        writer.wait()
    assert main(["run", "--clusters", "2", "--n-jobs", "5", "--out", str(out)]) == 0
    assert not tmp.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.parquet"]


def test_only_a_gone_writers_temporaries_of_that_target_are_removed(tmp_path):
    out = tmp_path / "x.csv"
    dead = _dead_pid()
    stale = tmp_path / f"x.csv.{dead}-0123abcd.tmp"
    other_target = tmp_path / f"y.csv.{dead}-0123abcd.tmp"
    users = tmp_path / "x.csv.draft.tmp"
    # its PID means nothing here (a writer on another machine), but it holds the lock
    elsewhere = tmp_path / f"x.csv.{dead}-4567cdef.tmp"
    for p in (stale, other_target, users, elsewhere):
        p.write_bytes(b"half")
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        alive = tmp_path / f"x.csv.{live.pid}-89abcdef.tmp"
        alive.write_bytes(b"half")
        with open(elsewhere, "rb") as held:
            fcntl.flock(held.fileno(), fcntl.LOCK_EX)
            atomic_write_bytes(out, b"a,b\n")
        assert not stale.exists()
        assert all(p.exists() for p in (other_target, users, elsewhere, alive))
    finally:
        live.kill()
        live.wait()
    atomic_write_bytes(out, b"a,b\n")
    assert not elsewhere.exists() and not alive.exists()
    assert other_target.exists() and users.exists()


def _hold_lock(directory, seconds):
    """Another process holding ``directory``'s lock for ``seconds``, once it holds it."""
    script = textwrap.dedent(f"""
        import fcntl, os, time
        fd = os.open({str(directory)!r}, os.O_RDONLY | os.O_DIRECTORY)
        fcntl.flock(fd, fcntl.LOCK_EX)
        print("held", flush=True)
        time.sleep({seconds})
    """)
    holder = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "held\n"
    return holder


def _writer_argv(target):
    return [sys.executable, "-c", "import sys; from pathlib import Path; "
            "from fastsim.io import atomic_write_bytes; "
            "atomic_write_bytes(Path(sys.argv[1]), b'x')", str(target)]


def test_a_command_waiting_for_a_held_directory_lock_says_so_then_writes(tmp_path):
    """A directory's lock is held for milliseconds by fastsim; a holder that is stopped
    (or another program's) leaves the writer waiting: it says so in one line, and writes
    once the lock is free."""
    holder = _hold_lock(tmp_path, seconds=2.5)
    writer = subprocess.run(_writer_argv(tmp_path / "o.bin"), capture_output=True, text=True,
                            timeout=60)
    holder.wait(timeout=60)
    assert writer.returncode == 0, writer.stderr
    lines = writer.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"fastsim: waiting for the lock on {tmp_path}")
    assert (tmp_path / "o.bin").read_bytes() == b"x"


def test_a_free_directory_lock_is_taken_in_silence(tmp_path, capsys):
    atomic_write_bytes(tmp_path / "o.bin", b"x")
    assert capsys.readouterr().err == ""


def test_ctrl_c_stops_a_command_waiting_for_a_held_directory_lock(tmp_path):
    """The wait for a directory's lock comes before any rename, so Ctrl-C ends it: the
    notice invites it, and a holder stopped with Ctrl-Z may never let go."""
    holder = _hold_lock(tmp_path, seconds=60)
    try:
        writer = subprocess.Popen(_writer_argv(tmp_path / "o.bin"), stderr=subprocess.PIPE,
                                  text=True)
        assert writer.stderr.readline().startswith("fastsim: waiting for the lock on")
        writer.send_signal(signal.SIGINT)
        try:
            writer.wait(timeout=10)
        except subprocess.TimeoutExpired:
            writer.kill()
            raise AssertionError("Ctrl-C did not end the wait for the lock") from None
        assert writer.returncode != 0
        assert not (tmp_path / "o.bin").exists()
        assert [p.name for p in tmp_path.iterdir()] == []  # its temporary removed too
    finally:
        holder.kill()
        holder.wait()


# ``draw_all`` with its figure scripts replaced by two that each write one file, the
# first of them pausing after its write, as a figure takes a while to draw
_DRAWING = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from types import SimpleNamespace
    from fastsim.io import bytes_writer, write_all

    def script(name, text, pause):
        def draw(sources, out, formats):
            write_all([(Path(out) / f"{name}.png", bytes_writer(text.encode()))])
            time.sleep(pause)
            return [Path(out) / f"{name}.png"]
        return SimpleNamespace(NEEDS=(), draw=draw)

    def drawing(figures, out, text, pause):
        scripts = {"a": script("a", text, pause), "b": script("b", text, 0)}
        figures.find_sources = lambda results: {}
        figures.skip_reason = lambda *args: None
        figures.load_script = scripts.__getitem__
        figures.draw_all(out, out, formats=("png",), scripts=tuple(scripts), log=print)
""")


def test_two_drawings_into_one_directory_never_leave_figures_of_each(tmp_path, monkeypatch):
    # fastsim figures D1 --out F beside fastsim figures D2 --out F (or two reproduce runs
    # with one --figures-dir): each figure was renamed in as drawn, so F held a.png of the
    # second drawing beside b.png of the first
    from fastsim.sweep import figures

    first = subprocess.Popen([sys.executable, "-c", _DRAWING + "from fastsim.sweep import "
                              "figures\ndrawing(figures, Path(sys.argv[1]), 'first', 0.4)",
                              str(tmp_path)])
    deadline = time.monotonic() + 30
    while not (tmp_path / "a.png").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    for name in ("find_sources", "skip_reason", "load_script"):  # restored after the test
        monkeypatch.setattr(figures, name, getattr(figures, name))
    here: dict = {}
    exec(_DRAWING, here)
    here["drawing"](figures, tmp_path, "second", 0)
    assert first.wait(timeout=30) == 0
    assert (tmp_path / "a.png").read_text() == (tmp_path / "b.png").read_text() == "second"


def test_a_killed_writers_temporary_under_this_process_pid_is_removed(tmp_path):
    # in a container each command gets the same PID run after run: the temporary of one
    # killed mid-write named this process's PID, and was kept at every later write
    out = tmp_path / "x.csv"
    stale = tmp_path / f"x.csv.{os.getpid()}-0123abcd.tmp"
    live = tmp_path / f"x.csv.{os.getpid()}-4567cdef.tmp"  # another thread's, writing
    stale.write_bytes(b"half")
    live.write_bytes(b"half")
    with open(live, "rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        atomic_write_bytes(out, b"a,b\n")
    assert not stale.exists() and live.exists() and out.read_bytes() == b"a,b\n"


def test_a_sweep_directory_held_by_one_thread_is_refused_to_another(tmp_path):
    """Two sweeps into one directory from two threads of a process both took its lock
    (``flock`` cannot tell threads apart, and the lock was shared within the process):
    each removed the other's temporaries, named by the process's PID, and one failed
    half-way with "cannot write out/sweep.json (No such file or directory)".  The second
    thread is refused, naming the holder; the holding thread still shares its lock."""
    import threading

    from fastsim.errors import ConfigError
    from fastsim.sweep.store import DirLock

    lock = DirLock.acquire(tmp_path)
    again = DirLock.acquire(tmp_path)  # a store reopened in its own thread: the same lock
    assert again._fh is lock._fh and lock.made and not again.made
    seen = []

    def other():
        try:
            DirLock.acquire(tmp_path)
            seen.append("taken")
        except ConfigError as exc:
            seen.append(str(exc))

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert len(seen) == 1 and "in use by another thread of this process (pid " in seen[0]
    lock.release()
    t = threading.Thread(target=other)  # released: the other thread takes it
    t.start()
    t.join()
    assert seen[1] == "taken"


def test_two_sweeps_starting_at_once_one_inside_the_other_never_both_run(tmp_path,
                                                                          monkeypatch):
    """``fastsim sweep --out A`` and ``--out A/B`` started at the same instant: the inner
    one found no sweep directory around it (A had neither lock nor manifest yet) and made
    A/B just after the outer one had listed A as empty; both ran, a sweep inside a sweep,
    which either refuses when the other already runs.  Sequenced here with hooks, the
    second to get there is refused, naming the holder."""
    import threading

    import fastsim.sweep.store as store_module
    from conftest import small_sweep
    from fastsim.errors import ConfigError
    from fastsim.sweep.grid import load_sweep
    from fastsim.sweep.store import SweepStore

    (tmp_path / "s.toml").write_text(small_sweep(2))
    grid = load_sweep(tmp_path / "s.toml")
    outer, inner = tmp_path / "A", tmp_path / "A" / "B"
    outer_listed, inner_open = threading.Event(), threading.Event()
    results = {}
    check_output_dir, check_not_nested = store_module.check_output_dir, \
        store_module._check_not_nested

    def open_outer():
        try:
            results["outer"] = SweepStore.open(outer, grid)
        except ConfigError as exc:
            results["outer"] = exc
        finally:
            outer_listed.set()

    def outer_waits(root):  # the outer sweep has listed A (empty) and holds its lock
        if root == outer:
            outer_listed.set()
            inner_open.wait(10)
        check_not_nested(root)

    def inner_starts_outer(root):  # the inner sweep found nothing around A/B
        check_output_dir(root)
        if root == inner:
            threading.Thread(target=open_outer).start()
            outer_listed.wait(10)
    monkeypatch.setattr(store_module, "check_output_dir", inner_starts_outer)
    monkeypatch.setattr(store_module, "_check_not_nested", outer_waits)
    try:
        results["inner"] = SweepStore.open(inner, grid)
    except ConfigError as exc:
        results["inner"] = exc
    inner_open.set()
    for _ in range(500):
        if "outer" in results:
            break
        time.sleep(0.01)
    refused = [k for k, v in results.items() if isinstance(v, ConfigError)]
    assert len(results) == 2 and refused, results  # never both
    for v in results.values():
        if not isinstance(v, ConfigError):
            v.close()
    # The refused one removed what it made, and only that: the inner one left A/B made,
    # empty but for a blank sweep.lock, a sweep directory inside A to every later look.
    if refused == ["inner"]:
        assert not inner.exists(), list(inner.iterdir())
        assert (outer / "sweep.json").is_file()
    else:
        assert sorted(p.name for p in outer.iterdir()) == ["B"]


def test_a_lock_found_gone_by_one_thread_is_found_gone_by_the_next(tmp_path):
    """Aggregation reads a sweep's cells on several threads: with the directory moved, the
    first thread's lock check released the lock (closing its file) and the next thread's
    check read the closed file's descriptor, a ``ValueError`` traceback instead of the
    one-line refusal.  Every check after the first refuses the same way."""
    import pytest

    from fastsim.errors import ConfigError
    from fastsim.sweep.store import DirLock

    (tmp_path / "out").mkdir()
    lock = DirLock.acquire(tmp_path / "out")
    (tmp_path / "out").rename(tmp_path / "moved")
    for _ in range(2):
        with pytest.raises(ConfigError, match="is no longer this process's lock"):
            lock.check()
    lock.release()  # and releasing again is harmless


def test_an_output_that_replaces_a_file_keeps_its_permissions(tmp_path):
    """`fastsim detectors --doc DOC` (or any output written over a file) gave the new file
    the umask's mode: a private 0600 doc came back 0644, readable by every user, and a
    read-only 0444 one writable."""
    for mode in (0o600, 0o444, 0o640):
        path = tmp_path / f"doc{mode:o}.md"
        path.write_text("old\n")
        os.chmod(path, mode)
        atomic_write_bytes(path, b"new\n")
        assert path.read_bytes() == b"new\n"
        assert os.stat(path).st_mode & 0o7777 == mode
    new = tmp_path / "new.md"  # a new file: the umask's mode, as open() gives
    atomic_write_bytes(new, b"x")
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(new).st_mode & 0o7777 == 0o666 & ~umask


def test_a_refused_command_in_the_thread_holding_its_out_keeps_the_holders_lock(tmp_path):
    """``fastsim.cli.main`` run in a thread holding DIR, whose ``acquire`` had made
    DIR/sweep.lock, and refused (exit 2) removed that file and released the holder's lock:
    the command's acquisition returned the holder's lock, whose ``made`` it read as its
    own.  A further acquisition in the holding thread made no file, and says so."""
    from fastsim.cli import main
    from fastsim.sweep.store import LOCK, DirLock

    holder = DirLock.acquire(tmp_path)
    assert holder.made
    assert main(["run", "--clusters", "2", "--n-jobs", "10", "--policy", "nosuch",
                 "--out", str(tmp_path / "r.parquet")]) == 2
    assert (tmp_path / LOCK).exists() and not holder._fh.closed
    holder.check()  # still the file it holds
    holder.release()


def test_a_nested_acquisition_released_keeps_the_holders_lock(tmp_path):
    """A further ``DirLock.acquire`` in the thread holding DIR returns the holder's lock; its
    ``release`` released the holder's too (closing its file), and another process took DIR
    while the holder still wrote there.  The holder keeps the lock until it releases it."""
    from fastsim.sweep.store import DirLock

    take = [sys.executable, "-c", "import sys; from pathlib import Path; "
            "from fastsim.errors import ConfigError\n"
            "from fastsim.sweep.store import DirLock\n"
            "try:\n    DirLock.acquire(Path(sys.argv[1])); print('taken')\n"
            "except ConfigError:\n    print('refused')", str(tmp_path)]
    holder = DirLock.acquire(tmp_path)
    DirLock.acquire(tmp_path).release()  # a nested command that ended well
    assert not holder._fh.closed
    holder.check()  # still the file it holds
    assert subprocess.run(take, capture_output=True, text=True).stdout == "refused\n"
    holder.release()
    assert subprocess.run(take, capture_output=True, text=True).stdout == "taken\n"


@pytest.mark.parametrize("second", ["b.bin", "sub/b.bin"])
def test_a_failed_writer_never_removes_a_directory_another_is_about_to_write_in(tmp_path,
                                                                                 monkeypatch,
                                                                                 second):
    """Two commands writing into one new directory D: the first makes D; the second finds
    it made; the first fails and removes D, still empty, as its own; the second then
    created its file (or its D/sub) in a directory no longer there ("cannot write D/b.bin
    (No such file or directory)").  Sequenced here with hooks; the second makes D again,
    as its own."""
    import pathlib
    import threading

    import fastsim.io as io_module
    from fastsim.errors import ConfigError

    d = tmp_path / "new"
    first_writing, second_found_d = threading.Event(), threading.Event()
    first: list = []

    def fails(tmp):  # the disk fills up under the first writer, once the second found D
        first_writing.set()
        second_found_d.wait(10)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def write_first():
        try:
            write_all([(d / "a.bin", fails)])
        except ConfigError as exc:
            first.append(str(exc))

    def once_the_first_failed(make, is_next):  # the second writer's next step in D
        def step(path, *args):
            if is_next(path) and not second_found_d.is_set():
                second_found_d.set()
                writer.join(10)  # the first's clean-up is done: D removed, empty
            return make(path, *args)
        return step

    if second == "b.bin":  # between D found made and the file made in it
        monkeypatch.setattr(io_module, "_claim", once_the_first_failed(
            io_module._claim, lambda tmp: tmp.name.startswith("b.bin.")))
    else:  # between D found made and D/sub made in it
        monkeypatch.setattr(pathlib.Path, "mkdir", once_the_first_failed(
            pathlib.Path.mkdir, lambda path: path == d / "sub"))
    writer = threading.Thread(target=write_first)
    writer.start()
    assert first_writing.wait(10)
    write_all([(d / second, bytes_writer(b"second"))])
    assert first == [f"cannot write {d / 'a.bin'} (No space left on device)"]
    assert (d / second).read_bytes() == b"second"
    assert sorted(p.name for p in d.iterdir()) == [second.split("/")[0]]


def test_another_commands_writability_probe_is_no_file_of_anyones(tmp_path, capsys):
    """Two ``fastsim sweep --out DIR`` started at once: the first made DIR and locked it;
    the second, not yet refused the lock, probed DIR for writability (an empty
    ``.fastsim-probe-*`` file, removed at once), and the first, listing DIR in that
    instant, was refused as holding "files that are not a sweep's (.fastsim-probe-...)",
    while the second went on to run (or, DIR removed by the first's clean-up meanwhile,
    was refused too).  The probe is its maker's: the sweep runs and leaves it alone."""
    from conftest import small_sweep

    (tmp_path / "s.toml").write_text(small_sweep(2))
    out = tmp_path / "out"
    out.mkdir()
    (out / ".fastsim-probe-k2x9q0ab").touch()  # the other command's, in that instant
    assert main(["sweep", str(tmp_path / "s.toml"), "--out", str(out), "--no-progress"]) == 0
    assert (out / "summary.parquet").is_file() and (out / ".fastsim-probe-k2x9q0ab").exists()


def test_a_directory_removed_by_a_refused_sweep_before_the_lock_is_made_again(tmp_path,
                                                                             monkeypatch):
    """Two sweeps into one new --out started at once: the second found DIR made by the
    first, which, refused (its own user function failing, say), removed it, empty, before
    the second made its lock file there: "cannot create sweep.lock (No such file or
    directory)", and neither ran.  The second now makes DIR again, as its own, and runs."""
    from conftest import small_sweep
    from fastsim.sweep.store import DirLock

    (tmp_path / "s.toml").write_text(small_sweep(2))
    out = tmp_path / "out"
    out.mkdir()  # the first sweep's
    acquire = DirLock.acquire.__func__
    removed = []

    def first_refused_meanwhile(cls, root):
        if not removed:
            removed.append(root)
            root.rmdir()  # the first sweep's clean-up
        return acquire(cls, root)
    monkeypatch.setattr(DirLock, "acquire", classmethod(first_refused_meanwhile))
    assert main(["sweep", str(tmp_path / "s.toml"), "--out", str(out), "--no-progress"]) == 0
    assert removed == [out] and (out / "summary.parquet").is_file()


def test_a_directory_removed_before_every_lock_is_made_again_race_tries_times(tmp_path):
    """``made_and_claimed`` (io's, and a sweep's lock's) makes the directory again while
    the claim finds it gone, ``RACE_TRIES`` times, then raises the claim's error."""
    from fastsim.io import RACE_TRIES, made_and_claimed
    from fastsim.sweep.store import DirectoryGone, DirLock

    root, made = tmp_path / "out", []

    def make():
        root.mkdir()
        made.append(root)

    def claim():
        root.rmdir()  # another writer's clean-up, every time
        return DirLock.acquire(root)

    with pytest.raises(DirectoryGone, match=r"cannot create sweep\.lock \(No such file"):
        made_and_claimed(make, claim, gone=DirectoryGone)
    assert len(made) == RACE_TRIES


def test_a_sweep_being_written_by_another_process_is_said_to_be_not_called_damaged(
        tmp_path, capsys):
    """A sweep resumed in one process, read in another (fastsim figures, read_summary):
    its chunks not yet written were refused as missing, "run the sweep again", which
    was refused while the first ran.  Probed only once the read failed: a sweep at rest
    is refused as before."""
    from fastsim.errors import ConfigError
    from fastsim.sweep.aggregate import read_summary

    sweep = tmp_path / "s.toml"
    sweep.write_text('name = "s"\nclusters = 2\nchunk = 1\nseed = 0\nbaseline = false\n'
                     '[base]\nn_jobs = 10\n')
    d = tmp_path / "s"
    assert main(["sweep", str(sweep), "--out", str(d), "--no-progress"]) == 0
    record = next((d / "cells").glob("*/chunk-0001.json"))
    record.unlink()  # as a resume finds it, and rewrites it
    with pytest.raises(ConfigError) as at_rest:
        read_summary(d)
    assert "chunk-0001.json: no such file" in str(at_rest.value)
    # another process resuming the sweep holds its lock (DirLock, naming itself)
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time
        from pathlib import Path
        from fastsim.sweep.store import DirLock
        lock = DirLock.acquire(Path({str(d)!r}))
        print("held", flush=True)
        time.sleep(60)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        said = f"{d}: the sweep is being written by another process (pid {holder.pid} on "
        with pytest.raises(ConfigError) as in_use:
            read_summary(d)
        assert str(in_use.value).startswith(said), in_use.value
        assert str(in_use.value).endswith("allowed: wait for it to finish, then read it again")
        capsys.readouterr()
        assert main(["figures", str(d), "--out", str(tmp_path / "f")]) == 2
        err = capsys.readouterr().err
        assert said in err and len(err.strip().splitlines()) == 1, err
        assert not (tmp_path / "f").exists()
    finally:
        holder.kill()
        holder.wait()
    with pytest.raises(ConfigError) as again:  # free again: what is wrong is said
        read_summary(d)
    assert str(again.value) == str(at_rest.value)
