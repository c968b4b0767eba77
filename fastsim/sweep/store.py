"""A sweep's output directory: lock, manifest, verified chunks, resume.

Layout (``DIR`` is ``--out``)::

    DIR/sweep.lock                          held (OS file lock) by the one process using DIR
    DIR/sweep.json                          manifest: grid hash, the expanded grid and the
                                            code (fastsim version, user functions' SHA-256)
    DIR/cells/cell=<id>/chunk-0003.parquet  per-cluster metrics of chunk 3 of a cell
    DIR/cells/cell=<id>/jct-0003.parquet    the chunk's JCT histogram (figures)
    DIR/cells/cell=<id>/jobs-0003.parquet   per-job records, only with --keep-jobs
    DIR/cells/cell=<id>/chunk-0003.json     the chunk's record: grid hash, code, and the
                                            SHA-256 and row count of each of its files
    DIR/summary.parquet, DIR/cells.parquet, DIR/jct_hist.parquet   (aggregate.py); each
                                            names its grid hash in its metadata (GRID_KEY),
                                            and the manifest records its SHA-256 (TABLES)

One process at a time owns a directory: ``open`` takes an exclusive ``flock`` on
``sweep.lock`` (released by the OS on any exit, ``kill -9`` included) and refuses, naming
the holder, while another process has it; ``hold_sweep_dirs`` does the same for any other
writer (``fastsim figures``, ``fastsim reproduce``) into a sweep directory or below it.  Every file is written under a temporary name
unique to its writer and renamed into place (``os.replace`` is atomic on POSIX); a chunk's
record is renamed last, so it exists only for a complete chunk.  A chunk counts as done
only if its record names this grid and every file matches its checksum and carries page
checksums (``fastsim.io.write_parquet``; a chunk of an older fastsim has none): resume and
aggregation verify them, aggregation each page's too, and a chunk that fails is re-run
(``run_sweep`` says so) or, when reading, refused with the file named.  Since a chunk is
a pure function of (config, seed, cluster range), a rewritten chunk is bit-identical to
the lost one, so an interrupted or damaged run ends where an uninterrupted one does.  A
record names the hash of the whole grid (every cell's config, clusters, chunk, seed), so
the records alone show whose results the directory holds: a damaged or deleted manifest
is rebuilt when every readable record names the grid being opened, and refused, naming
the chunk, when one does not.

The grid hash does not cover the code the chunks were computed by: fastsim's version and
source, and the source of the user functions the cells name (``Grid.code``).  The manifest
and every record name it too, and a directory whose manifest (or, rebuilding it, a record)
names other code is refused, naming what changed, before anything runs: results of two
versions of a function are never pooled (a manifest naming other code than every one of
its records, which name this code, is damaged, and rebuilt from them; one with no
result, no chunk nor record under it and none of its tables beside it, is rewritten for
this code, as one of another grid with no result is for this grid).  A manifest
written before the code was recorded names none, or (written before fastsim's source was
recorded) its version only; its chunks are taken to be this code's (said in one line) and
the code is recorded from then on.  A manifest of a newer format (a newer fastsim's) is
refused, never rewritten; one whose format is no format is damaged, and rebuilt.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import io
import json
import os
import re
import socket
import stat
import sys
import threading
import time
import weakref
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, Callable, Iterator

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from fastsim.errors import ConfigError
from fastsim.io import (PAGE_CHECKSUMS_KEY, TMP_SUFFIX,  # noqa: F401
                        DamagedParquet, atomic_write_bytes, atomic_write_parquet,
                        bytes_writer, check_output_dir, file_kind, is_probe, is_temporary,
                        loads_json, made_and_claimed, make_directory, parquet_bytes,
                        read_parquet_table, remove_made, renames_settled, write_all)
from fastsim.sweep.grid import Grid, clipped, diff_code, diff_grids

MANIFEST = "sweep.json"
LOCK = "sweep.lock"
FORMAT_VERSION = 3  # 2: chunk records with checksums; 3: manifest and records name the code
# (fastsim_sha256 came later, within format 3: a code without it is an older one's, kept and
# said, as a format-2 manifest is; a new format would have older fastsims drop it unsaid)
KINDS = ("chunk", "jct", "jobs")
# A chunk's record is a few hundred bytes; a file at its name of more than this is not one
# (read in full, a stray gigabyte there cost its size in memory on every resume).
RECORD_MAX_BYTES = 1 << 20
# A manifest is 1.5-1.7 kB per cell: 0.4 MB for sweeps/frontier.toml's 250 cells, 34 MB for
# the largest grid a sweep file may expand to (MAX_CELLS cells, each with its own baseline
# cell).  A file at its name of more than about twice that is not a manifest: damaged.
MANIFEST_MAX_BYTES = 64 << 20
# A chunk's file is smaller than the memory its computation took (``chunk_max_bytes``) plus
# this, far more than any Parquet footer: a larger file at its name is not the chunk's
CHUNK_SLACK_BYTES = 16 << 20
GRID_KEY = "fastsim.grid_hash"  # Parquet metadata key of the aggregated tables: their grid
# The manifest's field recording the SHA-256 of each file aggregation wrote (``write_aggregated``);
# added within format 3: a manifest without it is an older fastsim's, its tables read unhashed
TABLES = "tables"
# What a sweep's table without page checksums (an older fastsim's) asks for: the same
# command rewrites it, unless the code changed since, which that directory refuses.
RERUN = ("run the sweep again (same command; into a new --out directory if the code "
         "changed since)")
REWRITE = f"a sweep's table as this fastsim writes it: {RERUN}"


class DirectoryGone(ConfigError):
    """``DirLock.acquire``'s refusal where the directory is gone since it was made."""


class DirLock:
    """An exclusive ``flock`` on ``DIR/sweep.lock``, held while this object lives.

    The file holds a line naming the holder (pid, host, start time, command) so that a
    refused process can say who has the directory.  Within one thread the lock is shared
    (``acquire`` returns the live holder, as a ``HeldAgain``), so reopening a store never
    deadlocks; another
    thread of the process is refused as another process is: ``flock`` cannot tell two
    threads apart, and two sweeps into one directory from two threads removed each
    other's temporaries (this process's own, by its PID) and failed half-way.
    """

    _held: "weakref.WeakValueDictionary[str, DirLock]" = weakref.WeakValueDictionary()

    def __init__(self, root: Path, fh, made: bool = False):
        self.root, self._fh = root, fh
        self.made = made  # this ``acquire`` created the lock file (``unmake_lock``)
        self._thread = threading.get_ident()
        # ``check`` and ``release`` from several threads at once (aggregation reads cells
        # on numba's threads): one closes the file while another reads its descriptor
        self._closing = threading.Lock()

    @classmethod
    def acquire(cls, root: Path) -> "DirLock | HeldAgain":
        key = os.path.realpath(root)
        held = cls._held.get(key)
        if held is not None and not held._fh.closed:
            if held._thread != threading.get_ident():
                raise ConfigError(f"{root} is in use by another thread of this process "
                                  f"({cls._read_holder(held._fh)}); wait for it to finish, "
                                  "or use another --out directory")
            return HeldAgain(held)
        made = not os.path.lexists(root / LOCK)
        try:  # never through a symbolic link: the lock truncates what it opens
            fd = os.open(root / LOCK, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            why = ("a symbolic link" if exc.errno == errno.ELOOP else exc.strerror)
            raise (DirectoryGone if exc.errno == errno.ENOENT else ConfigError)(
                f"{root}: cannot create {LOCK} ({why}); allowed: a writable --out directory"
            ) from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # a named pipe: no lock at all
            os.close(fd)
            raise ConfigError(f"{root / LOCK}: not a regular file; allowed: the lock file "
                              "fastsim sweep makes (remove it)")
        fh = os.fdopen(fd, "a+")
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = cls._read_holder(fh)
            fh.close()
            raise ConfigError(f"{root} is in use by {holder}; wait for it to finish, or use "
                              "another --out directory") from None
        lock = cls(root, fh, made)
        lock.check()  # the file locked is still the one its name names (see ``check``)
        lock._write_holder()
        cls._held[key] = lock
        return lock

    def _write_holder(self) -> None:
        """Name this process in the lock file, for a refused one to say who has the
        directory.  Written unbuffered: a buffered line that a full disk refused stayed
        pending, and the flush retried by ``release`` at exit raised too (a traceback,
        then an ignored exception); now a failed write is one ``ConfigError``."""
        command = " ".join(Path(a).name if i == 0 else a for i, a in enumerate(sys.argv))
        line = (f"pid {os.getpid()} on {socket.gethostname()} since "
                f"{time.strftime('%Y-%m-%d %H:%M:%S')} ({command})\n").encode()
        fd = self._fh.fileno()
        try:
            os.ftruncate(fd, 0)
            if os.write(fd, line) < len(line):  # a short write: the disk filled up
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        except OSError as exc:
            self.release()
            raise ConfigError(f"cannot write {self.root / LOCK} ({exc.strerror})") from None

    def check(self) -> None:
        """Refuse to go on if ``DIR/sweep.lock`` is no longer the file this lock holds: the
        directory was moved or renamed (a write would make a new, unlocked one at the old
        path), or the lock file deleted or replaced (a second process would lock the new
        one and write beside this one).  Called before each write."""
        try:
            there = os.stat(self.root / LOCK, follow_symlinks=False)
        except OSError:
            there = None
        with self._closing:  # released already (by another thread's check): gone as well
            ours = None if self._fh.closed else os.fstat(self._fh.fileno())
        if there is None or ours is None \
                or (there.st_dev, there.st_ino) != (ours.st_dev, ours.st_ino):
            self.release()
            raise ConfigError(f"{self.root / LOCK} is no longer this process's lock (the "
                              "directory was moved or renamed, or its lock file deleted or "
                              "replaced, while this process held it): stopped, so that no "
                              "second process writes it too; finished work is kept: run the "
                              "same command again")

    @staticmethod
    def _read_holder(fh, wait: float = 2.0) -> str:
        # The holder writes its line just after taking the lock; a process refused in
        # that gap would read an empty file, so give the line a moment to appear.
        deadline = time.monotonic() + wait
        while True:
            fh.seek(0)
            holder = fh.read().strip()
            if holder or time.monotonic() > deadline:
                return holder or "another process"
            time.sleep(0.02)

    def unlink_if_ours(self) -> None:
        """Remove ``DIR/sweep.lock`` if it is still the file this lock holds: removed by
        its name alone it could be the file of another process, which locked a new one
        there after this one's was moved or deleted (released already: left)."""
        with self._closing:  # no other thread releases it meanwhile
            if self._fh.closed:
                return
            ours = os.fstat(self._fh.fileno())
            try:
                there = os.stat(self.root / LOCK, follow_symlinks=False)
            except OSError:
                return
            if (there.st_dev, there.st_ino) == (ours.st_dev, ours.st_ino):
                with contextlib.suppress(OSError):
                    os.unlink(self.root / LOCK)

    def release(self) -> None:
        with self._closing:
            if not self._fh.closed:
                # Blank the holder's line first, so that a process refused by the next
                # holder in its first instant never names this finished one.
                self._fh.seek(0)
                self._fh.truncate()
                self._fh.close()  # closing the file releases the flock

    def __del__(self):
        self.release()


class HeldAgain:
    """A further ``DirLock.acquire`` by the thread holding the directory: the holder's
    lock (its attributes and methods), with ``made`` of its own, False, as the lock file
    was there, so that what this acquisition undoes on a refusal (``unmake_held``) is
    only what it made, never the holder's file; and a ``release`` of its own, which
    leaves the holder's lock held: the holder keeps it until it releases it itself."""

    made = False

    def __init__(self, lock: DirLock):
        self._lock = lock

    def release(self) -> None:
        """Nothing to let go: released through to the holder's lock, a nested command
        that ended well closed the holder's file, and another process took the directory
        while the holder still wrote in it."""

    def __getattr__(self, name):
        return getattr(self._lock, name)


# What the blocks running now would remove if they failed (``unmade_if_ended``): a
# command ended at once in a compiled call (``cli._end_now``: ``os._exit``, no ``finally``
# runs) left ``--out`` made and holding a blank ``sweep.lock``, though the run wrote
# nothing (a sweep's first-cluster trial, a cost-aware sweep's points): it removes them
# (``unmake_trying``).
_TRYING: list[Callable[[], None]] = []


@contextlib.contextmanager
def unmade_if_ended(unmake: Callable[[], None]):
    """A block that, ended at once in a compiled call, has ``unmake`` remove what it made
    (``unmake_trying``), as its own ``except`` would have on Ctrl-C taken in Python."""
    _TRYING.append(unmake)
    try:
        yield
    finally:
        _TRYING.remove(unmake)


def unmake_trying() -> None:
    """Run the ``unmake`` of each block running now, from a command ending at once; one
    that fails leaves the others to run."""
    for unmake in list(_TRYING):
        with contextlib.suppress(Exception):
            unmake()


def unmake_lock(lock: DirLock | None, made: bool) -> None:
    """Remove the lock file of a run refused or interrupted before it wrote anything, if
    it made that file (``made``: no ``sweep.lock`` was there before ``acquire``), then
    release it: a blank ``sweep.lock`` left behind made the directory a sweep's to every
    later look.  Removed while ``lock`` holds it and only if the name still names it
    (``DirLock.unlink_if_ours``), so never another process's."""
    if lock is not None and made:
        lock.unlink_if_ours()
        lock.release()


def unmake_held(locks: list[DirLock]) -> None:
    """``unmake_lock`` of each lock a refused command took (``fastsim.cli.hold_outputs``)
    whose file it made: `fastsim sweep` refused an --out whose manifest was a newer
    fastsim's, or another sweep's, and left a blank ``sweep.lock`` beside it.  Such a lock
    lies beside a sweep's manifest (``hold_sweep_dirs`` makes none elsewhere), which alone
    makes the directory a sweep's: removing it changes no later look."""
    for lock in locks:
        unmake_lock(lock, lock.made)


def lies_at(target: Path) -> Path:
    """Where ``target`` lies: its directory resolved, not its own name.  A file is written
    by renaming a new one over it (``fastsim.io.write_all``), so a link is replaced where
    it lies, in the link's directory, not where it leads."""
    target = Path(target)
    return Path(os.path.realpath(target.parent)) / target.name


def _both_places(target: Path) -> tuple[Path, Path]:
    """Where ``target`` leads (every link resolved) and where it lies (``lies_at``)."""
    return Path(os.path.realpath(target)), lies_at(target)


def is_sweep_dir(d: Path) -> bool:
    """Whether ``d`` is a sweep's directory: its ``sweep.json`` names a grid, or lies beside
    the ``cells/`` a sweep writes (a damaged manifest's).  Another tool's ``sweep.json``
    (a tuner's configuration at the top of a project) makes none: every sweep below it
    was refused as nested, and every command writing below it locked it.  The one test of
    what a sweep directory is, for locking, nesting and a sweep's own files."""
    if not os.path.isfile(d / MANIFEST):
        return False
    if os.path.isdir(d / "cells"):
        return True
    try:
        manifest = _read_json(d / MANIFEST, MANIFEST_MAX_BYTES)
    except (OSError, ValueError):
        return False  # not a manifest, nor beside a sweep's results
    return isinstance(manifest, dict) and "grid_hash" in manifest


_HOLDER = re.compile(rb"pid [0-9]+ on ")  # the start of ``DirLock._write_holder``'s line


def writer_of(root: Path) -> str | None:
    """The line naming the process that holds ``root``'s sweep lock, if another process
    holds it; else None (no lock file, or not held, or held by this process).  Probed
    read-only and without waiting: the lock file opened for reading, never made, and a
    shared ``flock`` tried, let go at once where it is free.  For readers whose read has
    already failed only (``refused_if_written``): a reader takes no lock on its way."""
    if DirLock._held.get(os.path.realpath(root)) is not None:
        return None  # this process's own sweep: its failure is not another's writing
    try:
        fd = os.open(Path(root) / LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd) as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:  # a writer holds it exclusively
            return DirLock._read_holder(fh)
    return None  # closing the file let the probe's shared lock go


@contextlib.contextmanager
def refused_if_written(*roots: Path):
    """A ``ConfigError`` of the block (a sweep's results refused as damaged, missing or not
    yet aggregated) said as what it is where another process is writing one of the sweep
    directories ``roots``: the sweep is in use, not damaged, and running it again (what
    the refusal asked) is refused while it is."""
    try:
        yield
    except ConfigError:
        for root in roots:
            holder = writer_of(root)
            if holder is not None:
                raise ConfigError(f"{root}: the sweep is being written by another process "
                                  f"({holder}); allowed: wait for it to finish, then read "
                                  "it again") from None
        raise


def is_fastsim_lock(path: Path) -> bool:
    """Whether a directory's ``sweep.lock`` at ``path`` may be fastsim's: empty (released,
    or just taken), naming its holder as ``DirLock`` does, or not a regular file (which
    ``DirLock.acquire`` refuses, naming it).  Another tool's ``sweep.lock`` makes no sweep
    directory: every command writing below it locked it, truncating the file to nothing."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False  # none there (``os.path.exists``'s answer)
    if not stat.S_ISREG(mode):
        return True
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
    except OSError:
        return True  # unreadable: ``DirLock.acquire`` says what is wrong with it
    return not head or _HOLDER.match(head) is not None


def hold_sweep_dirs(*targets: Path | None) -> list[DirLock]:
    """Lock every sweep directory (one with a ``sweep.lock``) that is or holds a target.

    A command writing into a sweep directory owns it while it writes, as ``fastsim sweep``
    does: refused with ``DirLock``'s message, before anything is written, while another
    process holds it.  Keep the returned locks alive until the writing is done.

    A target that is a symbolic link is held where it lies as well as where it leads: a
    file is written by renaming a new one over the link (``fastsim.io.write_all``), in
    the link's directory."""
    locks: list[DirLock] = []
    seen: set[Path] = set()
    for target in targets:
        if target is None:
            continue
        for path in _both_places(target):
            for d in (path, *path.parents):
                # a sweep's manifest without its lock file is a sweep directory still
                # os.path's: False, not an OSError, for a name too long to look up
                if d not in seen and (is_fastsim_lock(d / LOCK) or is_sweep_dir(d)):
                    locks.append(DirLock.acquire(d))
                seen.add(d)
    return locks


# what a sweep writes at the top of its directory (the manifest, the lock, aggregate.py's
# tables); below its cells/ every file is the sweep's
AGGREGATED = ("summary.parquet", "cells.parquet", "jct_hist.parquet", "summary.txt")
OWNED = (MANIFEST, LOCK, *AGGREGATED)


def check_not_owned(target: Path | None, option: str) -> None:
    """An output of another command is never one of a sweep directory's own files, nor in
    its cells/: it replaced the sweep's verified results (reproduce's --report into
    another sweep's summary.txt), or put a second sweep among the chunks."""
    if target is None:
        return
    here = lies_at(target)
    parts = here.parts
    # each parent's relative path sliced from one split: relative_to splits the path
    # again per parent, seconds for a path of thousands of names that is then refused
    for depth, d in enumerate(here.parents, start=1):
        rel = parts[len(parts) - depth:]
        if is_sweep_dir(d):
            if rel[0] == "cells" or (len(rel) == 1 and rel[0] in OWNED):
                raise ConfigError(f"{option} {target}: among the files of the sweep "
                                  f"directory {d}, which its sweep writes; allowed: a path "
                                  f"outside its cells/, and none of its {', '.join(OWNED)}")
        # a lock without a manifest (reproduce's OUT, a cost-aware sweep's --out) guards a
        # directory whose tables are not these: its other names are free
        elif rel == (LOCK,) and os.path.exists(d / LOCK):
            raise ConfigError(f"{option} {target}: the lock file of {d}, which a sweep "
                              "holds while it writes there; allowed: any other name")


def remove_temporaries_in(directory: Path, held: list[DirLock]) -> None:
    """Our half-written files (``NAME.<pid>-<random>.tmp``, never a user's ``draft.tmp``)
    directly in ``directory``, left by a writer killed mid-write, when ``held`` (this
    process's locks, ``hold_sweep_dirs``) covers it: no other writer is active there.
    Outside a held sweep directory another process may be writing: nothing is removed."""
    if not held or not Path(directory).is_dir():
        return
    for tmp in Path(directory).glob(f"*{TMP_SUFFIX}"):
        if is_temporary(tmp):
            _remove_left(tmp)


def _remove_left(tmp: Path) -> None:
    """Remove a killed writer's temporary.  One in a directory that cannot be written
    (read-only, copied from an archive) stays: every reader passes over temporaries, and
    a write the run needs there says why it cannot (its removal was a traceback, and a
    sweep with every chunk done could not even aggregate)."""
    with contextlib.suppress(OSError):
        tmp.unlink(missing_ok=True)


def _read_regular(path: Path, limit: int | None = None) -> bytes:
    """A file's bytes; anything but a regular file is an ``OSError`` as a missing one is
    (a named pipe planted in a results directory would block the read forever), and so is
    a file of more than ``limit`` bytes, of which no more than that is read."""
    why = file_kind(path)
    if why is not None:
        raise OSError(errno.EINVAL, why)
    if limit is None:
        return path.read_bytes()
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        # read(n) allocates n bytes first: ask for the file's size, not the limit's
        data = fh.read(min(size, limit) + 1)
        if len(data) > size:  # it grew since: the rest, up to the limit
            data += fh.read(max(0, limit + 1 - len(data)))
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit} bytes")
    return data


def _read_json(path: Path, limit: int | None = None) -> Any:
    """A JSON file's value, its bytes read by ``_read_regular``; text that is not JSON,
    names a key twice or is nested too deeply for the parser is a ``JSONError``
    (``fastsim.io.loads_json``), a ValueError: a chunk record or manifest of 1,000 nested
    brackets was a RecursionError traceback, not damage to re-run or rebuild."""
    return loads_json(_read_regular(path, limit))


def _record_ok(rec: Any, grid: Grid, cell_id: str, index: int, older: bool = False) -> bool:
    """Whether ``rec`` (a parsed chunk record) names this grid, cell and chunk, and this
    code, and lists its files with a checksum and a row count each: what resume and
    aggregation use.  ``older``: a record that names no code, or fastsim's version but not
    its source (written before records did), passes too; only opening a directory whose
    manifest is that old (or rebuilt) asks, and rewrites it with this code
    (``SweepStore._adopt_older_records``), so that a record copied in from an older
    directory beside a manifest that records the code is re-run, never pooled."""
    code = rec.get("code") if isinstance(rec, dict) else None
    return (isinstance(rec, dict) and rec.get("grid_hash") == grid.hash
            and rec.get("cell") == cell_id and rec.get("index") == index
            and (older if code is None else
                 (_code_ok(code, grid) and not diff_code(code, grid.code)
                  and (older or "fastsim_sha256" in code)))
            and files_listed(rec))


def files_listed(rec: dict) -> bool:
    """Whether chunk record ``rec`` lists its files with a checksum and a row count each
    (``_record_ok``, and a reader of a finished sweep)."""
    files = rec.get("files")
    return isinstance(files, dict) and all(
        isinstance(e, dict) and isinstance(e.get("sha256"), str) and type(e.get("rows")) is int
        for e in files.values())


def max_chunk_bytes(n_clusters: int, n_jobs: int, n_evals: int) -> int:
    """The most bytes a file of a chunk of ``n_clusters`` clusters of this workload size
    holds (``SweepStore.chunk_max_bytes``)."""
    from fastsim.memory import simulate_bytes

    return (CHUNK_SLACK_BYTES + simulate_bytes(n_clusters, n_jobs, n_evals, True)
            + n_clusters * n_jobs * 250)


def _file_error(p: Path, entry: dict, limit: int) -> str | None:
    """Why chunk file ``p`` is not the one its record's ``entry`` lists (its SHA-256 and
    row count), read no further than ``limit`` bytes; None if it is.  The check of resume
    (``SweepStore.check``) and of every reader of a finished sweep (``verify_finished``)."""
    try:
        data = _read_regular(p, limit)
    except OSError as exc:
        return f"{p}: {exc.strerror or exc}"
    if _sha256(data) != entry.get("sha256"):
        return f"{p}: checksum mismatch (damaged or replaced)"
    try:  # the footer's row count against the record's (an edited record)
        footer = pq.read_metadata(io.BytesIO(data))
    except (OSError, ValueError, pa.ArrowException):
        return f"{p}: not a readable Parquet file"
    if footer.num_rows != entry["rows"]:
        return f"{p}: {footer.num_rows} rows, its record says {entry['rows']}"
    if PAGE_CHECKSUMS_KEY.encode() not in (footer.metadata or {}):
        # an older fastsim's (this grid's, by code taken to be this one's: see the
        # module docstring): rewritten, the same values with checksums
        return f"{p}: has no page checksums (an older fastsim's)"
    return None


def _code_ok(code: Any, grid: Grid | None = None) -> bool:
    """Whether a manifest's or record's ``code`` has the form of ``Grid.code`` (without
    ``fastsim_sha256`` if written before fastsim's source was recorded) and, given the
    ``grid`` whose hash it is written under, names exactly its user functions: its cells
    name them, so another set is damage (a function it does not name goes unchecked)."""
    return (isinstance(code, dict) and isinstance(code.get("fastsim"), str)
            and isinstance(code.get("fastsim_sha256", ""), str)
            and isinstance(code.get("user"), dict)
            and all(isinstance(v, str) for v in code["user"].values())
            and (grid is None or code["user"].keys() == grid.code["user"].keys()))


def recorded_code(root: Path) -> dict | None:
    """The code (``Grid.code``) a sweep directory's manifest says its results were computed
    by; None when it has no readable manifest recording one (a resume then decides, as on
    any damage)."""
    try:
        manifest = _read_json(Path(root) / MANIFEST, MANIFEST_MAX_BYTES)
    except (OSError, ValueError):
        return None
    code = manifest.get("code") if isinstance(manifest, dict) else None
    return code if _code_ok(code) else None


def _other_code(where: str, changes: list[str], whole: Path | None = None) -> ConfigError:
    """The refusal of results computed by other code than this run's (``diff_code``);
    ``whole`` is the --out directory a sweep directory is part of (``reproduce``'s), the one
    to delete: deleting the sweep directory alone moved the refusal to the next one."""
    return ConfigError(f"{where} of other code than this run's: "
                       + "; ".join(changes) + "; refusing to mix results of two versions: "
                       "restore the code they were computed by, use a new --out directory, "
                       f"or delete {_old_out(whole)} to compute them again with this code")


def _old_out(whole: Path | None) -> str:
    """What a refusal says to delete to start over: the --out directory, all of it."""
    return "the old one" if whole is None else f"the whole of {whole} (not one sweep in it)"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _tables_ok(tables: Any) -> bool:
    """Whether a manifest's ``TABLES`` has the form ``write_aggregated`` writes."""
    return isinstance(tables, dict) and all(
        isinstance(e, dict) and isinstance(e.get("sha256"), str)
        and type(e.get("bytes", 0)) is int and e.get("bytes", 0) >= 0
        for e in tables.values())


def read_sweep_table(path: Path, allowed: str,
                     columns: list[str] | None = None) -> pl.DataFrame:
    """A sweep's aggregated table (``summary.parquet``, ``jct_hist.parquet``, ...), its
    bytes checked against the SHA-256 the manifest beside it records and its pages
    against their checksums; one without page checksums (an older fastsim's) refused.  A
    damaged table is a ``DamagedParquet`` naming it and ``allowed`` (what to run)."""
    path = Path(path)
    data = _recorded_bytes(path, allowed)
    return read_parquet_table(path if data is None else data, allowed, name=path,
                              columns=columns, require_page_checksums=True)


def _recorded_bytes(path: Path, allowed: str) -> bytes | None:
    """``path``'s bytes, matching the SHA-256 that the manifest beside it records; None
    where none is recorded to check: no manifest there (a table copied out of its
    directory), one from before manifests recorded them (older, read as before), or no
    such file (``read_parquet_table`` names what is wrong with it)."""
    manifest = path.parent / MANIFEST
    if file_kind(path) is not None or not os.path.lexists(manifest):
        return None
    # both read between two aggregations' renames, never a table of one beside the
    # manifest of the other (a reader not holding the sweep's lock: fastsim figures)
    with renames_settled(path.parent):
        try:
            m = _read_json(manifest, MANIFEST_MAX_BYTES)
        except (OSError, ValueError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            raise ConfigError(f"{manifest}: unreadable sweep manifest ({reason}); "
                              f"allowed: {allowed}") from None
        # a table read on its own too (readers of a whole sweep check this first, in
        # ``finished_manifest``): a newer one's columns may mean other things
        check_format_readable(manifest, m, "or run the sweep again with this one")
        if isinstance(m, dict) and TABLES not in m:
            return None
        if not isinstance(m, dict) or not _tables_ok(m[TABLES]):
            raise ConfigError(f"{manifest}: damaged sweep manifest (its {TABLES} field); "
                              f"allowed: {allowed}")
        entry = m[TABLES].get(path.name)
        if entry is None:
            raise _damaged_table(path, f"{MANIFEST} records no SHA-256 for it", allowed)
        try:  # no further than the size recorded (a manifest before sizes were: all of it)
            data = _read_regular(path, entry.get("bytes"))
        except OSError as exc:
            if exc.errno == errno.EFBIG:  # a huge file there was read whole into memory
                raise _damaged_table(path, f"larger than the {entry['bytes']} bytes "
                                     f"{MANIFEST} records", allowed) from None
            raise ConfigError(f"{path}: {exc.strerror or exc}; allowed: {allowed}") from None
    if _sha256(data) != entry["sha256"]:
        raise _damaged_table(path, f"its SHA-256 is not the one {MANIFEST} records", allowed)
    return data


def _damaged_table(path: Path, why: str, allowed: str) -> DamagedParquet:
    return DamagedParquet(f"{path}: damaged ({why}); allowed: {allowed}", why)


class SweepStore:
    """The directory of one sweep.  ``open`` locks it and checks (or writes) the manifest."""

    def __init__(self, root: str | Path, grid: Grid, trial: Callable[[], Any] | None = None):
        self.root = Path(root)
        self.grid = grid
        self._trial = trial  # run by ``open`` once the directory is held (``_take``)
        self._lock: DirLock | None = None
        self._outer: list[DirLock] = []
        self._made: list[Path] = []  # the directories ``open`` made (``_unmake``)
        self._made_lock = False  # whether ``open`` made the lock file (``_unmake``)

    # -- manifest ---------------------------------------------------------------------
    @classmethod
    def open(cls, root: str | Path, grid: Grid,
             trial: Callable[[], Any] | None = None) -> "SweepStore":
        """Lock ``root`` and create it for ``grid``, or reopen it if it holds the same grid.

        Raises ``ConfigError`` if another process holds ``root``, if ``root`` is not a
        writable directory, or if it holds another grid's results (a changed sweep file,
        size, seed or model default; the message names the manifest and the differences;
        another grid's manifest with no result under it is rewritten, saying so; a
        ``cells/`` of folders without a file is no result, and removed, ``_empty_cells``).
        ``trial`` (the runner's ``try_user_code``) runs once ``root`` is held and its
        manifest checked, before anything else is written: a directory in use is refused
        before the trial compiles anything, and a trial that raises leaves nothing behind
        (the lock file and the directories ``open`` made are removed, as on any refusal).
        """
        store = cls(root, grid, trial)
        try:
            store._take()
        except BaseException:
            store._unmake()
            # the caller may keep the traceback (IPython keeps the last one), and with it
            # this store: its locks go now, or a refusal after the lock was taken (a full
            # disk under the manifest) left the directory held by this process, and the
            # same command run again was refused as "in use"
            store.close()
            raise
        return store

    def _unmake(self) -> None:
        """Remove what a refused ``open`` made: the lock file and the directory (with its
        parents) it made.  Refused in the nested race (a sweep into A/B started with one
        into A, ``_take``), it left A/B holding a blank ``sweep.lock``, a sweep directory
        to every later look (A's own sweep refused it as another's file).  The lock file
        goes while this store holds it, so never another's; a directory only while empty."""
        unmake_lock(self._lock, self._made_lock)
        remove_made(self._made)

    def _take(self) -> None:
        """``open``'s work: hold the directory, check its manifest (or write one)."""
        # for ``_unmake``, asked before ``hold_sweep_dirs`` locks a sweep directory (one
        # with a manifest) and so makes its lock file; a live holder's (an earlier store's
        # in this thread) is not this store's to remove
        self._made_lock = not os.path.lexists(self.root / LOCK)
        # Held already (this directory, or a sweep directory holding it): refused before
        # even the writability probe creates a file in it.
        self._outer = hold_sweep_dirs(self.root)
        check_output_dir(self.root)
        self._lock = self._make_and_lock()
        # Again, now that this directory is made and locked: a sweep started at the same
        # instant into a directory around it had no lock there yet at the first look, and
        # had listed it empty before this one was made; both ran, one inside the other.
        # Held now, or made after this directory (which its listing then refuses).
        self._outer += hold_sweep_dirs(self.root)
        self._outer += _hold_linked_cells(self.root)
        path = self.root / MANIFEST
        old, note = _read_manifest(self.root, self.grid)
        if self._trial is not None:
            with unmade_if_ended(self._unmake):
                self._trial()
        # older manifests: chunks without records (format 1), without the code (2), or
        # without fastsim's source (the note says so)
        if old is None or old.get("format") != FORMAT_VERSION or note is not None:
            if old is None or not _code_ok(old.get("code")) \
                    or "fastsim_sha256" not in old["code"]:
                self._adopt_older_records()  # before the manifest: a crash between re-runs
            if old is None:  # a new manifest: folders without a file are no result
                self._write(lambda: _remove_empty_cells(self.root))
            manifest = self.manifest()
            if old is not None and _tables_ok(old.get(TABLES)):  # still this grid's tables
                manifest[TABLES] = old[TABLES]
            data = json.dumps(manifest, indent=1).encode()
            self._write(lambda: atomic_write_bytes(path, data, within=self.root))
            if note is not None:
                print(note, file=sys.stderr)
        self.remove_temporaries()

    def _make_and_lock(self) -> "DirLock | HeldAgain":
        """Make the directory if it is missing, then lock it, as ``made_and_claimed``: one
        found made may be that of another sweep started at the same instant, which,
        refused, removes it (empty) before this one locks it."""
        def make():
            try:
                self._made = make_directory(self.root)
            except OSError as exc:
                raise ConfigError(f"--out {self.root}: cannot create ({exc.strerror})") from None

        return made_and_claimed(make, lambda: DirLock.acquire(self.root), gone=DirectoryGone)

    @staticmethod
    def check_manifest(root: Path, grid: Grid, whole: Path | None = None) -> dict | None:
        """The manifest in ``root`` if it is for ``grid``; None if there is none yet, or if
        it is missing or damaged (not a manifest) and the chunk records in ``root`` prove
        that the results are ``grid``'s, or if it names ``grid``'s hash but its grid or
        name is damaged (``open`` then rebuilds it, and says so).  A
        ``ConfigError`` naming the differences if it is for another grid or names other
        code (``Grid.code``: a user function edited, another fastsim) and a result is
        under it (with none, None, and ``open`` rewrites it, saying so), and if it is
        unreadable or damaged and the results cannot be shown to be ``grid``'s (naming the
        chunk that is not).  Reads only: ``reproduce`` checks every sweep's directory
        before it opens (and writes in) any, giving its OUT as ``whole``: the directory a
        refusal says to delete to start over."""
        return _read_manifest(Path(root), grid, whole)[0]

    def close(self) -> None:
        """Release the directory (also done by the OS when the process exits)."""
        self._lock = None  # the lock goes with its last store in this process
        self._outer = []

    def __enter__(self) -> "SweepStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def manifest(self) -> dict[str, Any]:
        g = self.grid
        return {
            "format": FORMAT_VERSION, "name": g.name, "title": g.title, "source": g.source,
            "grid_hash": g.hash, "code": g.code, "axes": list(g.axes),
            "cells": [{"id": c.id, "label": c.label, "baseline": c.baseline} for c in g.cells],
            "grid": g.canonical(), TABLES: {},  # none aggregated yet (``write_aggregated``)
        }

    def write_aggregated(self, files: dict[Path, bytes]) -> None:
        """Write aggregation's files (renamed in the order given), then the manifest with
        each one's SHA-256 (``TABLES``), all or none: a page checksum does not cover a
        table's footer, so a flip there that still parses was read as the table.  Renamed
        last, as a chunk's record is: killed between, the manifest names the tables it
        replaced, and the new ones are refused until the sweep is run again."""
        manifest = self.manifest()
        # the size too: a reader reads no further (a huge file there, not the table)
        manifest[TABLES] = {p.name: {"sha256": _sha256(b), "bytes": len(b)}
                            for p, b in files.items()}
        self._write(lambda: write_all(
            [*((p, bytes_writer(b)) for p, b in files.items()),
             (self.root / MANIFEST, bytes_writer(json.dumps(manifest, indent=1).encode()))],
            within=self.root))

    def remove_temporaries(self) -> None:
        """Half-written files of an interrupted run (never renamed into place).  Safe
        because this process holds the directory's lock: no other writer is active."""
        # ``cells/`` is ours alone; beside it, only our names (never a user's ``draft.tmp``)
        ours = [t for t in self.root.glob(f"*{TMP_SUFFIX}") if is_temporary(t)]
        for tmp in [*ours, *self.root.glob(f"cells/*/*{TMP_SUFFIX}")]:
            _remove_left(tmp)

    # -- chunks -------------------------------------------------------------------------
    @cached_property
    def _workloads(self) -> dict[str, Any]:
        return {c.id: c.config.workload for c in self.grid.cells}

    def chunk_max_bytes(self, cell_id: str, index: int) -> int:
        """The most bytes a file of this chunk can hold: no more than the memory that
        computed it (``fastsim.memory.simulate_bytes``, per-job records and their Parquet
        bytes counted), and ``CHUNK_SLACK_BYTES``.  A larger file at its name (a sparse
        100 GB file) was read whole into memory to be hashed, on every resume."""
        w, (_, n) = self._workloads[cell_id], self.grid.chunk_range(index)
        return max_chunk_bytes(n, w.n_jobs, w.n_evals)

    def cell_dir(self, cell_id: str) -> Path:
        return cell_dir(self.root, cell_id)

    def path(self, cell_id: str, kind: str, index: int) -> Path:
        return self.cell_dir(cell_id) / f"{kind}-{index:04d}.parquet"

    def record_path(self, cell_id: str, index: int) -> Path:
        return self.cell_dir(cell_id) / f"chunk-{index:04d}.json"

    def _record(self, cell_id: str, index: int) -> dict[str, Any] | None:
        """The chunk's record if it is readable and names this grid, code and chunk."""
        try:
            rec = _read_json(self.record_path(cell_id, index), RECORD_MAX_BYTES)
        except (OSError, ValueError):
            return None
        return rec if _record_ok(rec, self.grid, cell_id, index) else None

    def _adopt_older_records(self) -> None:
        """Record this code in each chunk record written before records named it (or
        fastsim's source), as the note of ``_read_manifest`` says its chunks are kept: from
        then on every record names the code, and ``_record_ok`` asks it of each."""
        for cell in self.grid.cells:
            for index in range(self.grid.n_chunks):
                path = self.record_path(cell.id, index)
                try:
                    rec = _read_json(path, RECORD_MAX_BYTES)
                except (OSError, ValueError):
                    continue  # missing or damaged: re-run, as on any resume
                if _record_ok(rec, self.grid, cell.id, index, older=True) and \
                        not _record_ok(rec, self.grid, cell.id, index):
                    rec["code"] = self.grid.code
                    atomic_write_bytes(path, json.dumps(rec, indent=1).encode(),
                                       within=self.root)

    def check(self, cell_id: str, index: int, keep_jobs: bool = False) -> str | None:
        """Why chunk ``index`` of a cell is not verifiably complete, or None if it is."""
        rp = self.record_path(cell_id, index)
        if not rp.exists():
            return "missing"
        rec = self._record(cell_id, index)
        if rec is None:
            return f"{rp}: unreadable, or written for another grid or by other code"
        kinds = KINDS if keep_jobs else KINDS[:2]
        for kind in kinds:
            p = self.path(cell_id, kind, index)
            entry = rec["files"].get(p.name)
            if entry is None:
                return "missing" if kind == "jobs" else f"{rp}: does not list {p.name}"
            why = _file_error(p, entry, self.chunk_max_bytes(cell_id, index))
            if why is not None:
                return why
        return None

    def is_done(self, cell_id: str, index: int, keep_jobs: bool = False) -> bool:
        return self.check(cell_id, index, keep_jobs) is None

    def pending(self, keep_jobs: bool = False) -> list[tuple[str, int]]:
        """``(cell id, chunk index)`` of every chunk still to run, cell by cell."""
        return [todo for todo, _ in self.pending_with_reasons(keep_jobs)]

    def pending_with_reasons(self, keep_jobs: bool = False) -> list[tuple[tuple[str, int], str]]:
        """Like ``pending``, each with why: ``missing`` (never completed) or the failed check."""
        out = []
        for c in self.grid.cells:
            for i in range(self.grid.n_chunks):
                why = self.check(c.id, i, keep_jobs)
                if why is not None:
                    out.append(((c.id, i), why))
        return out

    def check_held(self) -> None:
        """``DirLock.check`` of this store's lock: before every write into it."""
        if self._lock is not None:
            self._lock.check()

    def write_chunk(self, cell_id: str, index: int, clusters: pl.DataFrame,
                    jct_hist: pl.DataFrame, jobs: pl.DataFrame | None = None) -> None:
        """Write one chunk's files, then its record (the completion marker)."""
        self.check_held()
        start, n = self.grid.chunk_range(index)
        ids = clusters["cluster"]
        if clusters.height != n or ids.min() != start or ids.max() != start + n - 1:
            raise RuntimeError(f"chunk {index} of cell {cell_id} must hold clusters "
                               f"{start}..{start + n - 1}")
        frames = {"jobs": jobs, "jct": jct_hist, "chunk": clusters}
        # hashed as encoded and verified: a record vouches only for bytes holding the frame
        blobs = {k: parquet_bytes(df, self.path(cell_id, k, index))
                 for k, df in frames.items() if df is not None}
        record = {"grid_hash": self.grid.hash, "code": self.grid.code, "cell": cell_id,
                  "index": index, "clusters": [start, n],
                  "files": {self.path(cell_id, k, index).name:
                            {"sha256": _sha256(b), "rows": frames[k].height}
                            for k, b in blobs.items()}}
        items = [(self.path(cell_id, k, index), bytes_writer(b)) for k, b in blobs.items()]
        done = self.record_path(cell_id, index)
        items.append((done, bytes_writer(json.dumps(record, indent=1).encode())))

        def write():
            try:  # not done while rewriting
                done.unlink(missing_ok=True)
            except OSError as exc:  # a read-only cell directory: a traceback, re-running
                raise ConfigError(f"cannot write {done} ({exc.strerror or exc})") from None
            # ``remove_temporaries`` tidied, when the store opened
            write_all(items, tidy=False, within=self.root)
        self._write(write)

    def _write(self, write) -> None:
        """``write()`` into this store's directory, its lock checked just before: a
        directory moved or deleted while a chunk was encoded was made anew at the old
        path (``write_all`` made every missing parent), unlocked, with the chunk in it.
        Now the directory is never made (``within``), and a write that fails because it
        went says so, as the check does, not that a file is missing."""
        self.check_held()
        try:
            write()
        except ConfigError:
            self.check_held()
            raise

    def _load(self, cell_id: str, kind: str, index: int) -> pl.DataFrame:
        """One verified file: read once, checked against its record, then parsed.  A file
        not found because the directory was moved or deleted under this store's lock is
        refused as the lock check refuses it (``check_held``), not as an incomplete chunk
        that the same command would recompute."""
        try:
            return self._load_verified(cell_id, kind, index)
        except ConfigError:
            self.check_held()
            raise

    def _load_verified(self, cell_id: str, kind: str, index: int) -> pl.DataFrame:
        p = self.path(cell_id, kind, index)
        hint = "; re-run the sweep (same command) to recompute it"
        rec = self._record(cell_id, index)
        entry = rec["files"].get(p.name) if rec else None
        if entry is None:
            raise ConfigError(f"{p}: chunk {index} of cell {cell_id} is not complete{hint}")
        try:
            data = _read_regular(p, self.chunk_max_bytes(cell_id, index))
        except OSError as exc:
            raise ConfigError(f"{p}: {exc.strerror or exc}{hint}") from None
        if _sha256(data) != entry.get("sha256"):
            raise ConfigError(f"{p}: checksum mismatch (damaged or replaced){hint}")
        try:  # its pages' checksums too: the record's SHA-256 vouches only for the bytes
            # it was written beside (an edited record; a chunk written before fastsim
            # verified a chunk's bytes before hashing them, ``parquet_bytes``)
            df = read_parquet_table(data, REWRITE, name=p, require_page_checksums=True)
        except DamagedParquet as exc:  # resume trusts the record: it must go for a re-run
            raise ConfigError(f"{p}: damaged ({exc.reason}), though its record's SHA-256 "
                              f"matches; remove {self.record_path(cell_id, index)} and re-run "
                              "the sweep (same command) to recompute it") from None
        if df.height != entry.get("rows"):
            raise ConfigError(f"{p}: {df.height} rows, its record says {entry.get('rows')}{hint}")
        return df

    def read(self, cell_id: str, kind: str = "chunk") -> pl.DataFrame:
        """Every chunk of a cell, verified and concatenated in chunk order; a missing or
        damaged chunk is a ``ConfigError`` naming its file (nothing partial is returned)."""
        return pl.concat(list(self.read_each(cell_id, kind)), how="vertical")

    def read_each(self, cell_id: str, kind: str = "chunk") -> Iterator[pl.DataFrame]:
        """A cell's chunks one at a time, verified as each is read (``read`` without
        holding them all: memory of one chunk, whatever the number of chunks)."""
        for i in range(self.grid.n_chunks):
            yield self._load(cell_id, kind, i)

    def read_chunk(self, cell_id: str, index: int) -> pl.DataFrame:
        """One verified chunk's per-cluster rows in cluster order, checked to be exactly
        the chunk's cluster range (aggregation reads a cell this way, one chunk at a time)."""
        df = self._load(cell_id, "chunk", index)
        ids = df["cluster"].to_numpy()
        if (ids[1:] < ids[:-1]).any():  # written in order: a sort is a Polars pass per chunk
            df = df.sort("cluster")
            ids = df["cluster"].to_numpy()
        start, n = self.grid.chunk_range(index)
        if df.height != n or (n and (ids[0] != start or ids[-1] != start + n - 1
                                     or (ids[1:] == ids[:-1]).any())):
            raise RuntimeError(f"chunk {index} of cell {cell_id} in {self.root} holds "
                               f"{df.height} cluster rows, expected clusters {start}.."
                               f"{start + n - 1} once each; re-run the sweep")
        return df

    def read_clusters(self, cell_id: str) -> pl.DataFrame:
        """A cell's per-cluster table, checked to hold each cluster exactly once."""
        df = self.read(cell_id).sort("cluster")
        n = self.grid.clusters
        ids = df["cluster"].to_numpy()
        if df.height != n or ids[0] != 0 or ids[-1] != n - 1 or (ids[1:] == ids[:-1]).any():
            raise RuntimeError(f"cell {cell_id} in {self.root} holds {df.height} cluster rows, "
                               f"expected clusters 0..{n - 1} once each; re-run the sweep")
        return df


def _hold_linked_cells(root: Path) -> list[DirLock]:
    """Lock the sweep directories that ``cells/`` or a ``cells/cell=<id>`` reached through
    a symbolic link lies in: this process removes the temporaries and writes the chunks
    there, so it must own them as it owns ``root`` (``hold_sweep_dirs``: refused, naming
    the holder, while another process has one)."""
    cells = root / "cells"
    here = os.path.join(os.path.realpath(root), "cells")
    try:
        dirs = [cells, *(cells.glob("cell=*") if cells.is_dir() else ())]
    except OSError:
        return []  # unreadable: _read_manifest refuses it, naming it
    locks: list[DirLock] = []
    for d in dirs:
        real = os.path.realpath(d)
        if real in (here, os.path.join(here, d.name)):
            continue  # in root, which is held
        try:
            locks += hold_sweep_dirs(Path(real))
        except ConfigError as exc:
            raise ConfigError(f"{d} is a link to {real}: {exc}") from None
    return locks


def check_no_other_files(root: Path, own: tuple[str, ...] = (*OWNED, "figures"),
                         whose: str = "a sweep's") -> None:
    """Refuse an ``--out`` that already holds files not among ``own`` (the names the
    command writes there; by default a sweep's own, its figures): its outputs would go
    among them (``--out ~``, ``--out /`` as root), and be left there by anyone who removes
    them by their files.  Our temporaries and probes are not another's files."""
    try:
        names = sorted(e.name for e in os.scandir(root))
    except (FileNotFoundError, NotADirectoryError):
        return  # made by the command, or refused as not a directory where it is checked
    except OSError:
        return  # not listed, so not known to hold anything: writing there says what is wrong
    other = [n for n in names
             if n not in own and not (is_temporary(root / n) or is_probe(root / n))]
    if other:
        shown = ", ".join(other[:3]) + (f" and {len(other) - 3} more" if len(other) > 3 else "")
        raise ConfigError(f"--out {root}: holds files that are not {whose} ({shown}); "
                          f"allowed: a new or empty directory, or {whose} own (use a new "
                          "--out directory)")


def _check_not_nested(root: Path) -> None:
    """Refuse a new sweep inside another sweep's directory (``--out SW/sub``): ``fastsim
    figures SW`` and reproduce's readers take every sweep directory directly below SW for
    one of SW's sources, and refused SW's figures as two directories of one sweep when the
    inner one ran the same file.  The reverse, a new sweep around another, is refused by
    ``check_no_other_files``.  A sweep nested before this check resumes (it has a
    manifest, so is not new)."""
    for path in _both_places(root):
        for d in path.parents:
            if is_sweep_dir(d):
                raise ConfigError(f"--out {root}: inside the sweep directory {d}; allowed: a "
                                  "directory outside every sweep directory (its figures "
                                  "would take this sweep for one of its own)")


def _check_layout(root: Path, grid: Grid) -> None:
    """Refuse, before anything is written, a path the sweep writes through that is of the
    wrong kind: ``cells`` or one of ``grid``'s ``cell=<id>`` that is not a directory (a
    file, a dangling link), or a directory where a chunk's file or record goes.  A chunk
    there fails verification and is re-run, and writing it failed only after its
    simulation, with a traceback (``unlink`` of a directory) or an error line.  So is a
    directory where an aggregated table goes: aggregation, after every chunk had run,
    failed to rename its table over it."""
    def refuse(path: Path, why: str, allowed: str):
        return ConfigError(f"{path}: {why}; allowed: {allowed} (move it away, or use a new "
                           "--out directory)")

    def kind(path: Path) -> str:
        if not path.exists():  # there (lexists), but a link to nothing
            return "a symbolic link to nothing"
        return file_kind(path) or "a file"

    for name in AGGREGATED:  # a link is replaced where it lies; only a directory blocks
        if (root / name).is_dir() and not (root / name).is_symlink():
            raise refuse(root / name, "is a directory", "the table the sweep aggregates there")
    cells = root / "cells"
    try:
        if not os.path.lexists(cells):
            return
        if not cells.is_dir():
            raise refuse(cells, kind(cells), "the sweep's directory of cells")
        where: dict[str, Path] = {}
        for c in grid.cells:
            d = cell_dir(root, c.id)
            if not os.path.lexists(d):
                continue
            if not d.is_dir():
                raise refuse(d, kind(d), "the directory of that cell's chunks")
            other = where.setdefault(os.path.realpath(d), d)
            if other != d:  # a link to another cell's: each run re-ran one cell over the other
                raise refuse(d, f"the same directory as {other.name} (a symbolic link)",
                             "a directory of its own for each cell")
            for f in sorted(d.iterdir()):
                if f.name in _chunk_names(grid.n_chunks) and f.is_dir() and not f.is_symlink():
                    raise refuse(f, "is a directory", "the chunk's file, written by the sweep")
    except OSError as exc:
        raise ConfigError(f"{cells}: cannot be read ({exc.strerror or exc}); use a new "
                          "--out directory") from None


# what a reader's glob of a cell's files matches (``chunk-*.parquet``): a sync tool's
# ``chunk-0001 (conflicted copy).parquet`` too
_GLOBBED = re.compile(r"(chunk|jct|jobs)-.*\.parquet")


def _check_only_grid_chunks(root: Path, grid: Grid) -> None:
    """Refuse a ``cells/`` holding a ``cell=<id>`` that is not one of ``grid``'s cells, or
    in one of its cells a chunk file at an index ``grid`` has not (copied in from another
    run).  Resume and aggregation read only the grid's own and said nothing, but
    ``pl.scan_parquet("DIR/cells/*/chunk-*.parquet")``, which the docs give for reading
    every cluster, read them too, as this sweep's clusters.  A manifest rebuilt from the
    records refuses them the same way (``_rebuild_from_records``, which names an edit of
    the code first)."""
    cells = root / "cells"
    ids, names = {c.id for c in grid.cells}, _chunk_names(grid.n_chunks)
    own = f"{grid.source}'s grid (hash {grid.hash[:12]})"

    def refuse(path: Path, why: str) -> ConfigError:
        return ConfigError(f"{path}: {why}; allowed: only its cells and chunks in {cells}, "
                           "where reading every chunk-*.parquet would count it as this "
                           "sweep's (move it away, or use a new --out directory)")

    try:
        for d in sorted(cells.iterdir()) if cells.is_dir() else ():
            if not d.name.startswith("cell="):
                continue
            if d.name[len("cell="):] not in ids:
                raise refuse(d, f"not a cell of {own}")
            for f in sorted(d.iterdir()):
                if _GLOBBED.fullmatch(f.name) and f.name not in names:
                    raise refuse(f, f"not a chunk of {own}, which has {grid.n_chunks} per cell")
    except OSError as exc:
        raise ConfigError(f"{cells}: cannot be read ({exc.strerror or exc}); use a new "
                          "--out directory") from None


@lru_cache(maxsize=8)
def _chunk_names(n_chunks: int) -> frozenset[str]:
    """Every file name a cell directory of ``n_chunks`` chunks holds (``SweepStore.path``,
    ``record_path``)."""
    return frozenset([f"{k}-{i:04d}.parquet" for k in KINDS for i in range(n_chunks)]
                     + [f"chunk-{i:04d}.json" for i in range(n_chunks)])


def _read_manifest(root: Path, grid: Grid,
                   whole: Path | None = None) -> tuple[dict | None, str | None]:
    """``check_manifest``, and the line that says why the manifest is to be rebuilt (None
    when it is not)."""
    _check_layout(root, grid)
    path = root / MANIFEST
    if not path.exists():
        if (root / "cells").exists() and not _empty_cells(root):
            return None, _rebuild_from_records(
                root, grid, whole, f"{root} holds sweep results but no {MANIFEST}")
        return None, _new_here(root) or None
    try:
        old = _read_json(path, MANIFEST_MAX_BYTES)
    except OSError as exc:
        if exc.errno == errno.EFBIG:  # no grid's manifest is this large: damaged
            return None, _rebuild_from_records(
                root, grid, whole, f"{path}: damaged sweep manifest ({exc.strerror}, which "
                "no grid's manifest is)")
        # not read, so not known to be damaged: it may name another grid
        raise ConfigError(f"{path}: unreadable sweep manifest ({exc.strerror or exc}); "
                          "use a new --out directory") from None
    except ValueError as exc:
        return None, _rebuild_from_records(root, grid, whole,
                                           f"{path}: unreadable sweep manifest ({exc})")
    fmt = old.get("format") if isinstance(old, dict) else None
    # a newer fastsim's: rewritten as this one's, what it recorded (and any results it
    # keeps where this one does not look) was lost, unsaid
    check_format_readable(path, old, "or use a new --out directory")
    if isinstance(old, dict) and "format" in old and not (type(fmt) is int and fmt >= 1):
        return None, _rebuild_from_records(
            root, grid, whole, f"{path}: damaged sweep manifest (its format field, "
            f"{clipped(repr(fmt))}, is not one of 1 to {FORMAT_VERSION})")
    if not isinstance(old, dict) or not isinstance(old.get("grid_hash"), str):
        return None, _rebuild_from_records(
            root, grid, whole, f"{path}: damaged sweep manifest (it names no grid hash)")
    code = old.get("code")
    if _code_ok(code) and (changes := diff_code(code, grid.code)):
        return _manifest_of_other_code(root, grid, whole, path, old, changes)
    if old["grid_hash"] == grid.hash:
        return _manifest_of_this_grid(root, grid, whole, path, old)
    return _manifest_of_other_grid(root, grid, whole, path, old)


def check_format_readable(path: Path, manifest, instead: str) -> None:
    """Refuse a manifest of a format newer than this fastsim reads, naming ``path`` and
    what to do ``instead`` beside running that fastsim: its tables may hold columns, or
    mean things, this one does not know."""
    fmt = manifest.get("format") if isinstance(manifest, dict) else None
    if type(fmt) is int and fmt > FORMAT_VERSION:
        raise ConfigError(f"{path}: a sweep manifest of format {fmt}, written by a newer "
                          f"fastsim; this fastsim reads formats 1 to {FORMAT_VERSION}: run "
                          f"that fastsim, {instead}")


def _manifest_of_other_code(root: Path, grid: Grid, whole: Path | None, path: Path, old: dict,
                            changes: list[str]) -> tuple[dict | None, str | None]:
    """``_read_manifest`` of a manifest naming other code than this run's."""
    if old["grid_hash"] == grid.hash and _records_name_only(root, grid):
        # every record was written beside this manifest, naming its code: the
        # records are this run's code, so the manifest's code is the damaged part (a
        # flipped byte read as "computed by fastsim 1.1.0", whose refusal said to
        # delete the results); they decide, as when the field does not parse
        return None, _rebuild_from_records(
            root, grid, whole, f"{path}: damaged sweep manifest (its code field names "
            "other code than every chunk record beside it, which name this run's)")
    if not _holds_results(root):
        # stopped before its first chunk (Ctrl-C while compiling, a function failing
        # past the first cluster ``try_user_code`` runs): no result of that code to mix
        # with, and the refusal said to delete results that did not exist.  Also when
        # the hashes differ: an edited policy or key changes its cells (``impl``)
        empty = _new_here(root)
        return None, (f"{path} names other code than this run's ({'; '.join(changes)}) "
                      f"and no result was written under it{empty and f' ({empty})'}; "
                      "rewrote it for this run")
    # also when the hashes differ: an edited user policy or key changes its cells too
    # (their ``impl``), and the edit, not those cells, is what to name
    raise _other_code(f"{path}: the results in {root} are", changes, whole)


def _manifest_of_this_grid(root: Path, grid: Grid, whole: Path | None, path: Path,
                           old: dict) -> tuple[dict | None, str | None]:
    """``_read_manifest`` of a manifest naming this grid's hash, and no other code."""
    code = old.get("code")
    current = old.get("format") == FORMAT_VERSION
    if current and not _code_ok(code, grid):  # the records name the code: they decide
        return None, _rebuild_from_records(
            root, grid, whole,
            f"{path}: damaged sweep manifest (its code field is damaged)")
    _check_only_grid_chunks(root, grid)
    # its hash is this grid's, so the rest is what ``manifest()`` writes for it: a grid
    # that is not the one the hash is of, or no name (``fastsim figures`` knows a sweep
    # by it), is damage, rewritten as a damaged manifest is rebuilt.  Its axes and cells
    # are not checked: the hash leaves out their order (an [axes] table reordered in the
    # sweep file is no damage), and aggregation writes them from the grid at the end
    bad = [f for f, ok in (("grid", old.get("grid") == grid.canonical()),
                           ("name", isinstance(old.get("name"), str))) if not ok]
    if bad and current:
        return None, (f"{path}: damaged sweep manifest (it names this grid's hash, "
                      f"{grid.hash[:12]}, but its {' and '.join(bad)} "
                      f"{'fields are' if len(bad) > 1 else 'field is'} not "
                      f"{grid.source}'s); rewrote it for that grid")
    if code is None:  # an older format's (``open`` rewrites it, and says this)
        user = " and its user functions' sources" if grid.code["user"] else ""
        return old, (f"{path} does not record the code its chunks were computed by "
                     "(written before sweeps did), so they are kept as this code's, "
                     f"unchecked; it records this code (fastsim {grid.code['fastsim']}"
                     f"{user}) from now on")
    if _code_ok(code) and "fastsim_sha256" not in code:
        return old, (f"{path} does not record fastsim's source its chunks were computed "
                     f"by, only its version ({code['fastsim']}, this one's; written before "
                     "sweeps did), so they are kept as this source's, unchecked; it "
                     "records this source from now on")
    if old["name"] != grid.name:  # renamed in the sweep file, or the manifest edited
        return old, (f"{path} names the sweep {clipped(repr(old['name']))}, and "
                     f"{grid.source} {grid.name!r}: it records {grid.name!r} from now "
                     "on (fastsim figures knows a sweep by its name)")
    return old, None


def _manifest_of_other_grid(root: Path, grid: Grid, whole: Path | None, path: Path,
                            old: dict) -> tuple[dict | None, str | None]:
    """``_read_manifest`` of a manifest naming another grid's hash, and no other code."""
    try:
        diffs = diff_grids(old.get("grid", {}), grid.canonical())
    except (AttributeError, TypeError, KeyError, ValueError):
        diffs = ["its grid is damaged"]
    written = (f"{path} was written for a different grid (hash "
               f"{clipped(old['grid_hash'][:12])}, sweep {clipped(repr(old.get('name')))} from "
               f"{clipped(str(old.get('source')), 200)}); {grid.source} now expands to hash "
               f"{grid.hash[:12]}: " + "; ".join(diffs or ["cells differ"]))
    if not _holds_results(root):
        # stopped before its first chunk, as a manifest of other code above: no result of
        # that grid to keep apart from this one's, and the refusal said to delete none
        # (its aggregated tables count as results: ``_holds_results``)
        empty = _new_here(root)
        return None, (f"{written}; no result was written under it{empty and f' ({empty})'}: "
                      "rewrote it for this grid")
    raise ConfigError(written + ". Use a new --out directory, or delete "
                      + _old_out(whole) + " to start over.")


def cell_dir(root: Path, cell_id: str) -> Path:
    """The directory of cell ``cell_id``'s chunks in the sweep directory ``root``."""
    return Path(root) / "cells" / f"cell={cell_id}"


_CHUNK_FILE = re.compile(r"(chunk|jct|jobs)-([0-9]{4,})\.(parquet|json)")


def _holds_results(root: Path) -> bool:
    """Whether ``root`` holds a result: an aggregated table (its ``cells/`` may have been
    deleted once aggregated) or any file under ``cells/`` (a chunk, a record, a temporary
    of one); a ``cells/`` that cannot be listed is taken to."""
    if any(os.path.lexists(root / t) for t in AGGREGATED):
        return True
    if not os.path.lexists(root / "cells"):
        return False
    try:
        return any(files for _, _, files in os.walk(root / "cells", onerror=_raise))
    except OSError:
        return True


def _raise(exc: OSError) -> None:
    raise exc


def _empty_cells(root: Path) -> bool:
    """Whether ``root/cells`` is a directory holding folders alone, no file nor symbolic
    link at any depth: no result (left by a run stopped as it made a cell's folder, or
    made by hand), which ``SweepStore.open`` removes where it writes a new manifest, as it
    rewrites one with no result under it; it was refused as another's file, ``cells``."""
    cells = root / "cells"
    try:
        if cells.is_symlink() or not cells.is_dir():
            return False
        for top, dirs, files in os.walk(cells, onerror=_raise):
            if files or any(os.path.islink(os.path.join(top, d)) for d in dirs):
                return False
    except OSError:
        return False  # not known to hold nothing
    return True


def _new_here(root: Path) -> str:
    """Check ``root``, which holds no result, as a new sweep's directory (no other file
    there, not inside a sweep's); the words saying that its empty ``cells/`` is removed
    (``_empty_cells``), or "" when it has none."""
    empty = _empty_cells(root)
    check_no_other_files(root, (*OWNED, "figures", *(["cells"] if empty else [])))
    _check_not_nested(root)
    return f"{root / 'cells'} holds folders but no file: removed them" if empty else ""


def _remove_empty_cells(root: Path) -> None:
    """Remove ``root/cells`` if it holds folders alone (``_empty_cells``), deepest first."""
    if not _empty_cells(root):
        return
    try:
        for top, _, _ in os.walk(root / "cells", topdown=False, onerror=_raise):
            os.rmdir(top)
    except OSError as exc:
        raise ConfigError(f"{root / 'cells'}: holds folders but no file, and cannot be "
                          f"removed ({exc.strerror or exc}); allowed: no cells/ there (remove "
                          "it, or use a new --out directory)") from None


def _records_name_only(root: Path, grid: Grid) -> bool:
    """Whether at least one chunk record under ``root/cells`` is readable and every one
    that is names ``grid``'s hash and its code, fastsim's source included.  A manifest
    and its records name one code (a run of other code is refused before it writes a
    record), so a manifest naming another is damaged, not the record of an edit."""
    found = False
    try:
        for f in sorted((root / "cells").glob("cell=*/chunk-*.json")):
            try:
                rec = _read_json(f, RECORD_MAX_BYTES)
            except (OSError, ValueError):
                continue  # proves nothing either way: re-run on resume
            code = rec.get("code") if isinstance(rec, dict) else None
            if not (isinstance(rec, dict) and rec.get("grid_hash") == grid.hash
                    and _code_ok(code, grid) and "fastsim_sha256" in code
                    and not diff_code(code, grid.code)):
                return False
            found = True
    except OSError:
        return False
    return found


def _rebuild_from_records(root: Path, grid: Grid, whole: Path | None, damage: str) -> str:
    """The line saying that ``root``'s manifest is rebuilt for ``grid``, if its chunk
    records prove that its results are ``grid``'s; else a ``ConfigError`` (``damage`` and
    why not, naming the first cell or chunk that is not ``grid``'s).

    A record names the hash of the whole grid (every cell's config, clusters, chunk, seed)
    it was computed for, and its cell and chunk: a record naming ``grid.hash`` is a chunk
    this grid would compute, so the manifest it was written under was ``grid``'s.  Every
    readable record must name it, and at least one, and none other code (``Grid.code``; a
    record written before the code was recorded names none, and is kept as this code's);
    every cell directory must be a cell of ``grid`` and every chunk file a chunk index it
    has.  A chunk whose record is unreadable, names no grid, is another chunk's or lists
    no checksummed files proves nothing and is re-run, as on any resume (``_record_ok``,
    the resume's own test, decides which are kept); a chunk's files are verified against
    its record when resuming, as always."""
    cells = root / "cells"
    own = f"{grid.source}'s grid (hash {grid.hash[:12]})"
    kept, unproven, unknown, sourceless = _count_records(root, grid, whole, damage, own)
    if kept == 0:
        raise ConfigError(f"{damage}, and no chunk record in {cells} names {own}, so nothing "
                          f"shows its results are this grid's: use a new --out directory, "
                          f"or delete {root if whole is None else _old_out(whole)} to start "
                          "over")
    rerun = (f"; {unproven} chunk(s) whose record is damaged or misplaced will be re-run"
             if unproven else "")
    older = (f"; {unknown} of them do not record the code (written before records did) and "
             "are kept as this code's, unchecked" if unknown else "")
    older += (f"; {sourceless} of them record fastsim's version but not its source (written "
              "before records did) and are kept as this source's, unchecked"
              if sourceless else "")
    return (f"{damage}; rebuilt it: {kept} chunk records in {cells} name {own} and none "
            f"another grid or other code, so their chunks are kept (each verified before "
            f"use){older}{rerun}")


def _count_records(root: Path, grid: Grid, whole: Path | None, damage: str,
                   own: str) -> tuple[int, int, int, int]:
    """Count the chunk records by what a rebuild does with them, refusing other grids and code."""
    cells = root / "cells"
    refuse = _refuse_mixing(root, whole)
    cell_ids = {c.id for c in grid.cells}
    kept = unproven = unknown = sourceless = 0
    # The first sign of another grid is named, unless a record names other code: an edited
    # user policy or key changes its cells too (``impl``), and the edit is what to name.
    other_grid: ConfigError | None = None
    try:
        for d, cell_id in _cell_dirs(cells):
            if cell_id not in cell_ids:
                other_grid = other_grid or ConfigError(
                    f"{damage}, and {d} is not a cell of {own}{refuse}")
            for f, index, ext in _chunk_files(d):
                if index >= grid.n_chunks:
                    other_grid = other_grid or ConfigError(
                        f"{damage}, and {f} is chunk {index}, but {own} has "
                        f"{grid.n_chunks} chunk(s) per cell{refuse}")
                if ext != "json":
                    continue
                try:
                    rec = _read_json(f, RECORD_MAX_BYTES)
                except (OSError, ValueError):
                    unproven += 1
                    continue
                code = rec.get("code") if isinstance(rec, dict) else None
                names = _other_grid_named(f, rec, code, grid, damage, whole)
                if names is not None:
                    other_grid = other_grid or ConfigError(
                        f"{damage}, and {f} is a chunk record of grid {clipped(names[:12])}, "
                        f"not of {own}{refuse}")
                if other_grid is not None:
                    continue  # refused below, once every record's code is known
                if not _record_ok(rec, grid, cell_id, index, older=True):
                    unproven += 1  # damaged, or this grid's record of another chunk: re-run
                    continue  # (kept: exactly the records that resume reads as this chunk's)
                kept += 1
                unknown += code is None
                sourceless += code is not None and "fastsim_sha256" not in code
    except OSError as exc:
        raise ConfigError(f"{damage}, and {cells} cannot be read "
                          f"({exc.strerror or exc}); use a new --out directory") from None
    if other_grid is not None:
        raise other_grid
    return kept, unproven, unknown, sourceless


def _refuse_mixing(root: Path, whole: Path | None) -> str:
    """What a refusal to rebuild ``root``'s manifest from another grid's records says to do.
    ``whole``: reproduce's OUT, the directory its user gave and can act on (it has no
    sweep file nor --seed); OUT/noise is one of the sweeps it made."""
    return ("; refusing to mix results: use the "
            + (f"sweep file, --clusters, --chunk and --seed that {root}" if whole is None else
               f"--quick, --clusters and --chunk that {whole}")
            + " was run with, or a new --out directory")


def _cell_dirs(cells: Path) -> Iterator[tuple[Path, str]]:
    """``(directory, cell id)`` of each ``cell=ID`` directory in ``cells``, in name order."""
    cell_dirs = sorted(d for d in cells.iterdir() if d.name.startswith("cell=")
                       and d.is_dir()) if cells.is_dir() else []
    for d in cell_dirs:
        yield d, d.name[len("cell="):]


def _chunk_files(d: Path) -> Iterator[tuple[Path, int, str]]:
    """``(file, chunk index, extension)`` of each file in cell directory ``d`` named as the
    store names its chunks, in name order."""
    for f in sorted(d.iterdir()):
        m = _CHUNK_FILE.fullmatch(f.name)
        if m is None or (m[3] == "json" and m[1] != "chunk") or \
                m[2] != f"{int(m[2]):04d}":
            continue  # not ours (a temporary is removed on opening; the store
            # reads chunk-0001.json, never a copy named chunk-00001.json)
        yield f, int(m[2]), m[3]


def _other_grid_named(f: Path, rec: Any, code: Any, grid: Grid, damage: str,
                      whole: Path | None) -> str | None:
    """The grid hash chunk record ``rec`` (of file ``f``) names when it is not ``grid``'s,
    else None; a record of other code than ``grid``'s is refused, naming the change."""
    if _code_ok(code) and (changes := diff_code(code, grid.code)):
        raise _other_code(f"{damage}, and {f} is a chunk record", changes, whole)
    names = rec.get("grid_hash") if isinstance(rec, dict) else None
    return names if isinstance(names, str) and names != grid.hash else None
