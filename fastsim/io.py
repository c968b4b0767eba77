"""File input and output shared by every command.

Output is crash-safe: every file fastsim writes appears whole or not at all.  Data goes
to a temporary name beside the target (``NAME.<pid>-<random>.tmp``, unique per writer,
so two writers never share one), is flushed to disk, then renamed into place
(``os.replace`` is atomic on POSIX).  A temporary that a killed writer (``kill -9``)
left is removed at the next write to its target once its writer is known to be gone: no
process has the PID in its name and none holds the ``flock`` each writer keeps on its
temporary while writing it (``_remove_stale_temporaries``).  ``write_all`` stages several
files and renames them only once every one is written, so a command leaves all of its
outputs or none, and renames them holding a lock on their directories, so two commands
writing the same files at once leave all of one's, never some of each; a command kept
waiting for that lock more than a second (its holder stopped, say) says so in one line.
Output paths are checked with ``check_output`` before any work, which returns the
directory that exists then: written ``within`` it, a command makes only the directories
missing at its start, never one another process moved or deleted while it ran.  A failed
write (disk full, read-only directory) is one ``ConfigError`` naming the file and the
reason.

Every Parquet file fastsim writes goes through ``write_parquet`` and every one it reads
through ``read_parquet_table``: each page carries a CRC-32 of its data, verified as it
is read, so a flipped bit in a page is a refusal naming the file, never other numbers.

Input errors (an unreadable file, invalid TOML or UTF-8) become one ``ConfigError``
naming the file.  A file read whole must be a regular file (``check_regular``): a named
pipe blocks its reader until some writer comes, forever if none does, and a device such
as ``/dev/zero`` never ends, so either would hang the command or fill the memory.
"""
from __future__ import annotations

import contextlib
import datetime
import fcntl
import io
import json
import os
import re
import secrets
import signal
import stat
import sys
import tempfile
import threading
import time
import tomllib
from pathlib import Path
from typing import Any, Callable, Iterable

import polars as pl

from fastsim.values import NumberTextError, check_path_text, float64_text
from fastsim.errors import ConfigError, signal_handlers

TABLE_SUFFIXES = (".parquet", ".csv")
TMP_SUFFIX = ".tmp"
# How long a directory's lock may be held before a command waiting for it says so.
LOCK_NOTICE_S = 1.0


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _tmp_path(path: Path) -> Path:
    return path.with_name(f"{path.name}.{os.getpid()}-{secrets.token_hex(4)}{TMP_SUFFIX}")


# what ``_tmp_path`` names, and nothing a user would name a file: (target, writer's PID)
TMP_NAME = re.compile(r"(.+)\.(\d+)-[0-9a-f]{8}" + re.escape(TMP_SUFFIX))


def is_temporary(path: Path) -> bool:
    """Whether ``path`` is one of our half-written files (``_tmp_path``'s pattern)."""
    return TMP_NAME.fullmatch(path.name) is not None


# The empty file ``_check_writable_dir`` creates and removes at once.  Another command's,
# seen in that instant, is no file of anyone's: a sweep that had just made and locked its
# --out was refused as holding "files that are not a sweep's" by a second sweep probing it
# before being refused the lock itself.  Never removed by name: it is its maker's to remove.
PROBE_PREFIX = ".fastsim-probe-"


def is_probe(path: Path) -> bool:
    """Whether ``path`` is a writability probe (``PROBE_PREFIX``), its maker's to remove."""
    return path.name.startswith(PROBE_PREFIX)


def _discard(tmp: Path) -> None:
    try:
        tmp.unlink(missing_ok=True)
    except OSError:
        pass  # the write's own error is the one worth reporting


# The temporaries this process is writing (``_claim`` to the end of ``write_all``): those
# with its PID that are not among them are a killed writer's that had the PID before it.
_OWN_TEMPORARIES: set[str] = set()


def writing() -> bool:
    """Whether this process has a temporary file being written (``write_all``: from its
    creation until it is renamed into place or removed), which ending the process at once
    would leave behind, for the next write of its target to remove."""
    return bool(_OWN_TEMPORARIES)


def _claim(tmp: Path) -> int:
    """Create ``tmp`` and hold an ``flock`` on it while it is written (closing the returned
    descriptor releases it): what tells ``_remove_stale_temporaries`` that its writer is
    alive, on any machine sharing the directory, where the PID in its name says nothing."""
    _OWN_TEMPORARIES.add(tmp.name)  # first: another thread may list it before the flock
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    with contextlib.suppress(OSError):  # a file system without flock: the PID decides
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):  # another user's process, or no PID we could make
        return True
    return True


def _remove_stale_temporaries(paths: list[Path]) -> None:
    """Remove the temporaries of ``paths`` (``_tmp_path``) that a writer killed mid-write
    (``kill -9``, a crash) left, at the next write to them, when both say the writer is
    gone: no process here has the PID the name records, and no one holds the ``flock`` its
    writer held (``_claim``; a writer on another machine has a PID meaningless here).  A
    live writer's is never removed; one whose PID a new process took stays until that one
    ends, unless this process took it: then one this process is not writing, and no one
    holds the ``flock`` of, is removed.  One listing per directory (a sweep's cell holds
    thousands of files)."""
    targets: dict[Path, set[str]] = {}
    for p in paths:
        targets.setdefault(p.parent, set()).add(p.name)
    for directory, names in targets.items():
        try:
            found = [(e.name, int(m[2])) for e in os.scandir(directory)
                     if e.name.endswith(TMP_SUFFIX) and (m := TMP_NAME.fullmatch(e.name))
                     and m[1] in names]
        except OSError:
            continue  # the write itself reports what is wrong with the directory
        for tmp, pid in found:
            # this process's own PID in the name, not one it writes: a writer killed before
            # this process took the PID (a container's commands get the same PIDs run after
            # run)
            if pid == os.getpid():
                if tmp not in _OWN_TEMPORARIES:
                    _remove_unheld(directory / tmp, pid_gone=False)
            elif not _pid_alive(pid):
                _remove_unheld(directory / tmp)


def _remove_unheld(tmp: Path, pid_gone: bool = True) -> None:
    """Remove ``tmp`` unless a writer holds its ``flock`` (``_claim``); on a file system
    without ``flock``, only if ``pid_gone`` (its writer's PID said it is gone)."""
    try:
        fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return  # gone already, or a symbolic link: not ours
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # held: its writer lives, on another machine or in another thread
        except OSError:
            if not pid_gone:
                return
            # a file system without flock: the PID decided
        with contextlib.suppress(OSError):  # removed by another writer meanwhile
            os.unlink(tmp)
    finally:
        os.close(fd)


def existing_directory(path: Path) -> Path:
    """The nearest of ``path`` and its ancestors, as spelled, that is a directory now.
    Taken before a command's work, it is the ``within`` of its outputs' ``write_all``:
    what it makes at the end is then only what was missing at the start, never a
    directory another process moved or deleted meanwhile (``check_output`` returns it)."""
    d = Path(path)
    while not os.path.isdir(d) and d != d.parent:  # False, not OSError, on a too-long name
        d = d.parent
    return d


def _holder(directory: Path, within: Path | tuple[Path, ...]) -> Path:
    """The deepest of ``within`` (one directory, or several) that is or holds ``directory``."""
    held = [Path(w) for w in ((within,) if isinstance(within, Path) else within)
            if directory == Path(w) or Path(w) in directory.parents]
    if not held:
        raise ValueError(f"{directory} is in none of {within}")
    return max(held, key=lambda w: len(w.parts))


def make_directory(directory: Path, within: Path | tuple[Path, ...] | None = None,
                   target: Path | None = None) -> list[Path]:
    """``directory`` made with every missing parent; with ``within``, only those below it
    (the deepest of several holding it), which must be there: a directory moved or
    deleted by another process is not made anew at its old path, and the write of
    ``target`` (default ``directory``) is refused, saying so.  Returns the directories
    this call made, outermost first (``remove_made``), not those another process made
    meanwhile.  One found made that another writer's clean-up removes, empty, before the
    next is made in it (``remove_made``: it was that writer's) is made again, by this
    call, as its own."""
    made: list[Path] = []
    tries = RACE_TRIES
    try:
        while True:
            try:
                _make_missing(Path(directory), within, target, made)
                return made
            except FileNotFoundError:  # a parent found made is gone since
                tries -= 1
                if not tries:
                    raise
    except BaseException:  # failed part-way (a name too long): none of it is left behind
        remove_made(made)
        raise


# How often a directory that other writers remove is made again before a write fails: a
# writer's clean-up removes only what it made, once, so a second try holds it.
RACE_TRIES = 10


def _make_missing(directory: Path, within: Path | tuple[Path, ...] | None,
                  target: Path | None, made: list[Path]) -> None:
    """``make_directory``'s one try, each directory it makes added to ``made`` at once."""
    if within is None:
        d = existing_directory(directory)
    else:
        d = _holder(directory, within)
        if not os.path.isdir(d):
            raise ConfigError(f"cannot write {target or directory} ({d} was moved or deleted "
                              "while the command ran; it is not made again at its old path)")
    for part in directory.relative_to(d).parts:
        d = d / part
        try:
            d.mkdir()
            made.append(d)
        except FileExistsError:
            if not d.is_dir():
                raise


def remove_made(made: list[Path]) -> None:
    """Remove the directories ``make_directory`` made, innermost first, each only while
    empty: a command refused after making its output directory leaves nothing half-made,
    and never removes what another process has put there since."""
    for d in reversed(made):
        try:
            d.rmdir()
        except OSError:
            return  # not empty (or gone): its parents hold it


@contextlib.contextmanager
def unmade_on_failure():
    """A block that makes output directories before its work: it adds what each
    ``make_directory`` call returns to the list it is given, and if it fails or is
    interrupted (Ctrl-C), each of those directories still empty is removed again
    (``remove_made``), never one it did not make nor one holding a file."""
    made: list[list[Path]] = []
    try:
        yield made
    except BaseException:
        for each in reversed(made):
            remove_made(each)
        raise


def _make_parent(path: Path, within: Path | tuple[Path, ...] | None) -> list[Path]:
    return make_directory(path.parent, within, target=path)


def write_all(items: Iterable[tuple[Path, Callable[[Path], None]]],
              tidy: bool = True, within: Path | Iterable[Path] | None = None) -> None:
    """Write every ``(path, write)`` or none: ``write(tmp)`` fills a temporary file, and
    the temporaries are renamed into place only after all of them are complete.  Stale
    temporaries of each path (a killed writer's) are removed first, unless ``tidy`` is
    false: a sweep removes its own when it opens its directory, under its lock, and a
    listing of a cell holding thousands of chunks at every chunk would cost O(chunks^2).
    With ``within`` (a directory holding every path, or several: each path goes in the
    deepest holding it), those directories are never made (``_make_parent``): a command
    takes them before its work (a sweep's directory, ``existing_directory``).  A directory
    made for a path and still empty when the write fails is removed again: a full disk
    left `fastsim costaware sgd --out DIR`'s new DIR behind, empty.  Only this write's: one
    another writer made, and removed so before this one's file was in it, is made again
    (``_claim_made``)."""
    items = [(Path(path), write) for path, write in items]
    if isinstance(within, (str, os.PathLike)):
        within = Path(within)
    elif within is not None:
        within = tuple(Path(w) for w in within)
    if tidy:
        _remove_stale_temporaries([path for path, _ in items])
    staged: list[tuple[Path, Path]] = []
    claims: list[int] = []
    named: list[str] = []
    with unmade_on_failure() as made, contextlib.ExitStack() as cleanup:
        cleanup.callback(_unstage, staged, claims, named)
        for path, write in items:
            try:
                tmp = _tmp_path(path)
                named.append(tmp.name)
                claims.append(_claim_made(tmp, path, within, made))
                staged.append((tmp, path))
                write(tmp)
                with open(tmp, "rb") as fh:
                    os.fsync(fh.fileno())
            except (OSError, pl.exceptions.PolarsError) as exc:
                raise ConfigError(f"cannot write {path} ({_reason(exc)})") from None
        # the lock first, then the signals: a command left waiting for a lock held by a
        # stopped holder is stopped by Ctrl-C, before any of its files is renamed
        with _renaming_in(path.parent for _, path in staged), signals_held():
            # a directory is the one target a rename cannot replace: found at the second
            # of two renames, the first output was new beside the second's old one
            for _, path in staged:
                if path.is_dir() and not path.is_symlink():
                    raise ConfigError(f"cannot write {path} (Is a directory)")
            for tmp, path in staged:
                try:
                    _keep_mode(tmp, path)
                    os.replace(tmp, path)
                except OSError as exc:
                    raise ConfigError(f"cannot write {path} ({_reason(exc)})") from None
        staged.clear()


def _claim_made(tmp: Path, path: Path, within: Path | tuple[Path, ...] | None,
                made: list[list[Path]]) -> int:
    """``_claim`` of ``tmp`` once ``path``'s directory is made (``_make_parent``; what it
    made added to ``made``), as ``made_and_claimed``.  With ``tmp`` in it, no writer's
    clean-up removes it."""
    return made_and_claimed(lambda: made.append(_make_parent(path, within)),
                            lambda: _claim(tmp))


def made_and_claimed(make: Callable[[], Any], claim: Callable[[], Any],
                     gone: type[BaseException] = FileNotFoundError) -> Any:
    """``claim()`` (a file made in a directory) once ``make()`` made that directory.  One
    found made by another writer may be removed by that writer's failed write, still
    empty, before the claim is in it: the claim raises ``gone``, and the directory is made
    again, now this writer's own (``RACE_TRIES`` times, then ``gone`` is raised)."""
    tries = RACE_TRIES
    while True:
        make()
        try:
            return claim()
        except gone:
            tries -= 1
            if not tries:
                raise


def _unstage(staged: list[tuple[Path, Path]], claims: list[int], named: list[str]) -> None:
    """``write_all``'s temporaries not renamed into place discarded, and its claims on
    them let go, before the directories it made are removed while empty."""
    for tmp, _ in staged:
        _discard(tmp)
    for fd in claims:
        os.close(fd)  # after the renames or removals: held while the file is ours
    _OWN_TEMPORARIES.difference_update(named)


def _keep_mode(tmp: Path, path: Path) -> None:
    """``tmp`` given the permissions of the file it is to replace, if any: a doc rewritten
    by ``fastsim detectors --doc`` came back with the umask's mode, a private 0600 file
    readable by every user."""
    try:
        st = os.stat(path)
    except OSError:  # nothing there yet: the umask's mode, as a new file gets
        return
    if stat.S_ISREG(st.st_mode):
        with contextlib.suppress(OSError):  # a file system without modes: written as before
            os.chmod(tmp, stat.S_IMODE(st.st_mode))


@contextlib.contextmanager
def signals_held():
    """Hold Ctrl-C and SIGTERM back while a command's files are renamed, and take them
    once all are: stopped between two renames, a command left some of its new outputs
    beside the old or missing others.  Another thread's writes (a Dask worker's chunk)
    are not held (``signal_handlers``)."""
    caught: list[int] = []
    hold = lambda signum, frame: caught.append(signum)  # noqa: E731
    with signal_handlers({signal.SIGINT: hold, signal.SIGTERM: hold}):
        yield
    if caught:
        signal.raise_signal(caught[0])  # its own handler now: KeyboardInterrupt, ...


def _renaming_in(directories: Iterable[Path]):
    """Hold an exclusive ``flock`` on each directory while a command's files are renamed
    into it: two commands writing the same files at once (two ``fastsim run --out o.parquet
    --jobs-out j.parquet``) each rename theirs in one go, so the files are all one
    command's, never an ``o.parquet`` of one beside a ``j.parquet`` of the other."""
    return _directories_locked(directories, fcntl.LOCK_EX)


def renames_settled(directory: Path):
    """Hold a shared ``flock`` on ``directory`` for the block: ``write_all`` renames a
    command's files into it holding an exclusive one (``_renaming_in``), so the files read
    in the block are all of one command's, never one renamed and the next not yet (a
    sweep's table and the manifest recording its SHA-256)."""
    return _directories_locked([directory], fcntl.LOCK_SH)


# Directories this thread holds for a whole block (``holding_directory``): its own renames
# and reads there take no second flock, which would wait on the first.  Per thread: held
# for the process, a second thread's drawing into one went in unlocked, beside the first's.
_HELD = threading.local()

# One drawing at a time in a process (``holding_directory``, and each figure script's
# ``themed``): matplotlib's settings are the process's, and the theme set and restored
# around one thread's figure was restored under another's, which was saved without it (at
# another resolution, its caption cut off).  Reentrant: a drawing holds it around each of
# its figures.  Taken before any directory's flock, so two drawings never wait in a cycle.
DRAWING = threading.RLock()


def _held_here() -> set[str]:
    """The directories this thread holds (``holding_directory``)."""
    if not hasattr(_HELD, "dirs"):
        _HELD.dirs = set()
    return _HELD.dirs


@contextlib.contextmanager
def holding_directory(*directories: Path):
    """Hold each directory's exclusive ``flock`` for the block (taken in one order, as
    ``write_all`` takes them for one rename): a command writing files into one after
    another (figures, each its own ``write_all``, then a report naming them) leaves all of
    its files, never some of each of two commands drawing there at once.  The second
    waits, saying so; a second thread of this process waits too (``DRAWING``).  A directory
    held further out in this thread is not taken again."""
    with DRAWING:
        held = _held_here()
        keys = {os.path.realpath(d) for d in directories} - held
        with _directories_locked(keys, fcntl.LOCK_EX):
            held.update(keys)
            try:
                yield
            finally:
                held.difference_update(keys)


@contextlib.contextmanager
def _directories_locked(directories: Iterable[Path], operation: int):
    """``flock(operation)`` on each directory for the block, taken in one order (sorted),
    so two holders never wait on each other in a cycle; a directory that cannot be opened
    or locked is left unlocked (the rename or read reports what is wrong with it), and
    one this thread holds already (``holding_directory``) is not locked again."""
    fds: list[int] = []
    try:
        for d in sorted({os.path.realpath(d) for d in directories} - _held_here()):
            try:
                fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
            except OSError:
                continue
            fds.append(fd)
            with contextlib.suppress(OSError):  # a file system without flock: unlocked
                _flock_saying_so(fd, operation, d)
        yield
    finally:
        for fd in fds:
            os.close(fd)  # closing releases the flock


def _flock_saying_so(fd: int, operation: int, directory: str,
                     after_s: float = LOCK_NOTICE_S) -> None:
    """``flock(fd, operation)``, saying in one line on stderr that the command waits if
    the lock is still held after ``after_s`` seconds.  fastsim holds it only while it
    renames files, milliseconds, or draws figures (``holding_directory``); a holder that
    is stopped (Ctrl-Z) or another program's would otherwise leave the command waiting in
    silence."""
    deadline = time.monotonic() + after_s
    said = False
    while not _flocked(fd, operation):
        if not said and time.monotonic() >= deadline:
            print(f"fastsim: waiting for the lock on {directory}, held by another process "
                  "(fastsim holds it while it renames files into the directory, or "
                  "draws figures there) ...", file=sys.stderr, flush=True)
            said = True
        # polled, never a blocking flock: Ctrl-C arriving just before one entered it was
        # lost, and the command waited on a stopped holder for good
        time.sleep(0.1 if said else 0.01)


def _flocked(fd: int, operation: int) -> bool:
    """Whether ``flock(fd, operation)`` took the lock without waiting."""
    try:
        fcntl.flock(fd, operation | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def table_writer(df: pl.DataFrame, path: Path,
                 metadata: dict[str, str] | None = None) -> Callable[[Path], None]:
    """The writer of ``df`` as Parquet or CSV, chosen by ``path``'s suffix.  ``metadata``
    (Parquet only) goes into the file's key-value metadata; ``parquet_metadata`` reads it."""
    if Path(path).suffix.lower() == ".csv":
        if metadata:
            raise ConfigError(f"output {path}: CSV cannot record metadata; allowed: a .parquet file")
        return lambda tmp: df.write_csv(tmp)
    return lambda tmp: write_parquet(df, tmp, metadata)


# Key-value metadata of every Parquet file ``write_parquet`` makes: its pages carry
# checksums.  A sweep's table without it is an older fastsim's (``read_parquet_table``).
PAGE_CHECKSUMS_KEY = "fastsim.page_checksums"


def write_parquet(df: pl.DataFrame, target, metadata: dict[str, str] | None = None) -> None:
    """Write ``df`` as Parquet to ``target`` (a path or a binary buffer): the one writer of
    the Parquet files fastsim makes.  polars writes pages without checksums and reads
    them unchecked, so a flipped bit in a page came back as other numbers (or as an
    error only where it broke the compression); pyarrow writes a CRC-32 per page, and
    the file says so (``PAGE_CHECKSUMS_KEY``) beside ``metadata``.  The bytes depend on
    ``df`` and the pyarrow version only (no time stamp): a rewritten chunk is identical."""
    import pyarrow as pa  # imported here, as in ``read_parquet_table``
    import pyarrow.parquet as pq

    table = df.to_arrow()
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), **(metadata or {}),
                                           PAGE_CHECKSUMS_KEY: "1"})
    # a dictionary for text only (labels repeat): numbers are mostly distinct, and pyarrow's
    # default built one per column before falling back, 4x polars' time for a chunk's jobs
    text = [f.name for f in table.schema if pa.types.is_string(f.type)
            or pa.types.is_large_string(f.type)]
    pq.write_table(table, target, compression="zstd", use_dictionary=text,
                   write_page_checksum=True)


def parquet_bytes(df: pl.DataFrame, name: Path,
                  metadata: dict[str, str] | None = None) -> bytes:
    """``df`` as a Parquet file's bytes (``write_parquet``), verified before they are
    returned: read back, every page's checksum checked, and equal to ``df``.  A SHA-256 of
    these bytes (a sweep chunk's record, an aggregated table's in ``sweep.json``) then
    vouches for ``df`` itself, so any later damage fails it; hashed unverified, bytes
    damaged between encoding and hashing were vouched for, and only a page checksum
    found them, at aggregation.  ``name``: the file they are for, named by the refusal."""
    buf = io.BytesIO()
    write_parquet(df, buf, metadata)
    data = buf.getvalue()
    try:
        back = read_parquet_table(data, "a table read back as written", name=name)
    except DamagedParquet as exc:
        raise ConfigError(f"cannot write {name} (its encoding fails verification: "
                          f"{exc.reason})") from None
    if not back.equals(df):
        raise ConfigError(f"cannot write {name} (its encoding fails verification: it "
                          "reads back as another table)")
    return data


def parquet_metadata(path: Path) -> dict[str, str]:
    """The key-value metadata of a Parquet file (empty for a file with none); a file that
    is not Parquet is one ``ConfigError`` naming it."""
    import pyarrow.parquet as pq

    check_regular(path, "a Parquet file")
    try:
        raw = pq.read_schema(path).metadata or {}
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise ConfigError(f"{path}: cannot read as Parquet ({_reason(exc)}); "
                          "allowed: a Parquet file") from None
    return {k.decode("utf-8", "replace"): v.decode("utf-8", "replace") for k, v in raw.items()}


def bytes_writer(data: bytes) -> Callable[[Path], None]:
    """The writer of ``data`` as a file's whole content, for ``write_all``."""
    return lambda tmp: Path(tmp).write_bytes(data)


def atomic_write_bytes(path: Path, data: bytes, within: Path | None = None) -> None:
    write_all([(Path(path), bytes_writer(data))], within=within)


def atomic_write_parquet(df: pl.DataFrame, path: Path) -> None:
    atomic_write_table(df, path, allowed=(".parquet",))


def atomic_write_table(df: pl.DataFrame, path: Path, allowed=TABLE_SUFFIXES,
                       within: Path | None = None) -> None:
    """Write ``df`` as Parquet or CSV, chosen by ``path``'s suffix (``within``:
    ``write_all``'s)."""
    path = Path(path)
    if path.suffix.lower() not in allowed:
        raise ConfigError(f"output {path}: allowed: a file ending in {' or '.join(allowed)}")
    write_all([(path, table_writer(df, path))], within=within)


# the name length of the common file systems (ext4, xfs, btrfs, tmpfs, APFS), in bytes
NAME_MAX = 255


def name_max(directory: Path) -> int:
    """The longest file name, in bytes, ``directory``'s file system takes (``NAME_MAX``
    where it cannot say)."""
    try:
        return os.pathconf(directory, "PC_NAME_MAX")
    except (OSError, ValueError):
        return NAME_MAX


# what ``_tmp_path`` adds to a name at most (a Linux PID has up to 7 digits)
TMP_EXTRA = len(".4194304-0123abcd" + TMP_SUFFIX)


def room_for(limit: int, extra: int = TMP_EXTRA) -> int:
    """The longest name, in bytes, a file may have under a file system's name ``limit``,
    written first under a temporary name ``extra`` bytes longer."""
    return limit - extra


def check_names_fit(directory: Path, names: Iterable[str], option: str, target: Path,
                    extra: int = TMP_EXTRA) -> None:
    """Each of ``names``, to be made in ``directory`` (or below it), with the ``extra``
    bytes of the temporary name a file is first written under, within the file system's
    name length: a longer one was refused by the file system after the work (or a
    traceback on its lookup).  A directory is made under its own name: ``extra=0``."""
    limit = name_max(directory)
    why = (f"the file system's {limit}, less the {extra} added in the temporary name a "
           "file is written under" if extra else "the file system's limit")
    for name in names:
        if len(os.fsencode(name)) > room_for(limit, extra):
            raise ConfigError(f"{option} {target}: a name of {len(os.fsencode(name))} bytes; "
                              f"allowed: names of at most {room_for(limit, extra)} bytes ({why})")


def _existing_ancestor(path: Path) -> Path:
    d = path.absolute()
    while not os.path.exists(d) and d != d.parent:  # False, not OSError, on a too-long name
        d = d.parent
    return d


def _check_new_names(path: Path, option: str, file: bool = False) -> None:
    """The names ``path`` would create, checked before it is looked up: the lookup of a
    too-long one is an ``OSError``.  Only a ``file`` is written under a longer temporary
    name (an existing one too, when it is replaced); its new directories are made as named."""
    check_path_text(path, option)
    d = _existing_ancestor(path)
    _check_path_fits(d, path, option, TMP_EXTRA if file else 0)
    new = path.absolute().relative_to(d).parts
    check_names_fit(d, new[:-1] if file else new, option, path, extra=0)
    if file:
        check_names_fit(d, [path.name], option, path)


def _check_path_fits(directory: Path, path: Path, option: str, extra: int) -> None:
    """``path`` as given (what its lookups pass) within the file system's path length,
    with ``extra`` bytes of a temporary name: past it, each lookup is an ``OSError``."""
    try:
        limit = os.pathconf(directory, "PC_PATH_MAX") - 1  # less the terminating NUL
    except (OSError, ValueError):
        limit = 4095
    size = len(os.fsencode(str(path)))
    if size + extra > limit:
        raise ConfigError(f"{option} {path}: a path of {size} bytes; allowed: paths of at "
                          f"most {limit - extra} bytes")


def _check_writable_dir(directory: Path, option: str, target: Path) -> None:
    """``directory`` (or, if it does not exist yet, its nearest existing ancestor) must
    accept a new file: probed by creating and removing one, so nothing is left behind.
    A dangling link on the way is refused, naming it: the ancestor above it accepted the
    probe, and the write failed after the work ("cannot write ... (File exists)")."""
    link = Path(directory)
    while not os.path.lexists(link) and link != link.parent:
        link = link.parent
    if os.path.islink(link) and not os.path.exists(link):
        raise ConfigError(f"{option} {target}: {link}: a link to {os.readlink(link)}, which "
                          "does not exist; allowed: a directory, or a link to an existing one")
    d = _existing_ancestor(directory)
    if not d.is_dir():
        raise ConfigError(f"{option} {target}: {d} is not a directory; allowed: a writable path")
    try:
        fd, probe = tempfile.mkstemp(dir=d, prefix=PROBE_PREFIX)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ConfigError(f"{option} {target}: cannot write in {d} ({_reason(exc)}); "
                          "allowed: a writable path") from None


def check_output(path: Path | None, option: str = "--out",
                 allowed: tuple[str, ...] | None = TABLE_SUFFIXES) -> Path | None:
    """Refuse, before any work, an output file that could not be written; return the
    directory it is to be written within (``existing_directory``: none is made now)."""
    if path is None:
        return None
    path = Path(path)
    if allowed is not None and path.suffix.lower() not in allowed:
        raise ConfigError(f"{option} {path}: allowed: a file ending in {' or '.join(allowed)}")
    _check_new_names(path, option, file=True)
    if path.is_dir():
        raise ConfigError(f"{option} {path}: is a directory; allowed: a file path")
    if path.exists() and not path.is_file():
        raise ConfigError(f"{option} {path}: not a regular file; allowed: a file path")
    _check_writable_dir(path.parent, option, path)
    return existing_directory(path.parent)


def check_output_dir(path: Path, option: str = "--out") -> Path:
    """Refuse, before any work, an output directory that could not be written; return the
    directory its files are to be written within (``existing_directory``, as
    ``check_output``)."""
    path = Path(path)
    _check_new_names(path, option)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{option} {path}: exists and is not a directory; allowed: a directory")
    if path.is_symlink() and not path.exists():  # a directory cannot be made through it
        raise ConfigError(f"{option} {path}: a link to {os.readlink(path)}, which does not "
                          "exist; allowed: a directory, or a link to an existing one")
    _check_writable_dir(path, option, path)
    return existing_directory(path)


def check_distinct(paths: dict[str, Path | None],
                   inputs: dict[str, Path] | None = None) -> None:
    """Two options naming one file (however spelled: ``..``, symbolic links) would
    overwrite each other, or one of ``inputs`` (what the command reads)."""
    seen: dict[Path, str] = {Path(p).resolve(): what for what, p in (inputs or {}).items()}
    for option, p in paths.items():
        if p is None:
            continue
        key = Path(p).resolve()
        if key in seen:
            raise ConfigError(f"{option} {p}: the same file as {seen[key]}; allowed: distinct files")
        seen[key] = option


_KINDS = ((stat.S_ISDIR, "is a directory"), (stat.S_ISFIFO, "not a regular file (a pipe)"),
          (stat.S_ISCHR, "not a regular file (a character device)"),
          (stat.S_ISBLK, "not a regular file (a block device)"),
          (stat.S_ISSOCK, "not a regular file (a socket)"))


def file_kind(path: Path) -> str | None:
    """None for a regular file (or a link to one), else why it is not one: ``"no such
    file"``, ``"is a directory"``, ``"not a regular file (a pipe)"``, ...  Only stats it:
    opening a named pipe would wait for a writer."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "no such file"
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        return f"cannot read ({_reason(exc)})"
    if stat.S_ISREG(mode):
        return None
    return next((why for test, why in _KINDS if test(mode)), "not a regular file")


def check_regular(path: Path, allowed: str, option: str | None = None) -> None:
    """Refuse, before opening it, a path that is not a regular file (module docstring);
    ``option``: the flag that named it, for the message."""
    why = file_kind(path)
    if why is not None:
        raise ConfigError(f"{option + ' ' if option else ''}{path}: {why}; allowed: {allowed}")


def check_tables_regular(directory: Path, allowed: str,
                         suffixes: tuple[str, ...] = (".parquet", ".json", ".csv")) -> None:
    """Refuse a results directory holding a table (or manifest) that is not a regular
    file, before a figure script opens it (polars would wait on a named pipe forever)."""
    if not Path(directory).is_dir():
        return
    for p in sorted(Path(directory).iterdir()):
        if p.suffix.lower() in suffixes and not p.is_dir():
            check_regular(p, allowed)


class DamagedParquet(ConfigError):
    """A Parquet file that cannot be read in full, or whose pages fail their checksums;
    ``reason`` says which, for a caller that words its own refusal (``_check_table``)."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason


def read_parquet_table(source: Path | bytes, allowed: str, *, name: Path | None = None,
                       columns: list[str] | None = None,
                       require_page_checksums: bool = False) -> pl.DataFrame:
    """A Parquet table (a path, or a file's bytes that ``name`` names) read in full, every
    page that carries a checksum verified; a missing, truncated or damaged one is a
    ``DamagedParquet`` (a ``ConfigError``) naming it and ``allowed`` (what the command
    takes).  ``require_page_checksums``: a table fastsim wrote and re-reads (a sweep's),
    which must carry them: one written without them is an older fastsim's, refused
    naming it.  A user's file (a log, traces) is verified as far as it has checksums."""
    import pyarrow as pa  # imported here: a command that reads no Parquet spares 0.1 s
    import pyarrow.parquet as pq

    if isinstance(source, bytes):
        where = pa.BufferReader(source)  # no copy
    else:
        name, where = Path(source), str(source)
        check_regular(source, allowed)
    try:
        with pq.ParquetFile(where, page_checksum_verification=True) as parquet:
            _check_row_counts(parquet.metadata)
            written = parquet.schema_arrow.metadata or {}
            if not require_page_checksums or PAGE_CHECKSUMS_KEY.encode() in written:
                # one thread: pyarrow's pool, once started in a process that loaded polars
                # first, could abort the process at exit after its work was done
                # ("terminate called without an active exception", rc 134: apache/arrow#34314)
                return _to_polars(parquet.read(columns=columns, use_threads=False))
    except Exception as exc:  # noqa: BLE001 - pyarrow and polars raise several types for a
        # bad file (OSError, ArrowInvalid, a thrift error, a type polars cannot take)
        reason = _reason(exc)
        if "CRC checksum verification failed" in reason:  # pyarrow's words, page ordinal aside
            raise DamagedParquet(f"{name}: damaged (a page fails its checksum); allowed: "
                                 f"{allowed}", "a page fails its checksum") from None
        raise DamagedParquet(f"{name}: not a readable Parquet table ({reason}); allowed: "
                             f"{allowed}", reason) from None
    raise ConfigError(f"{name}: has no page checksums (written by an older fastsim, or not "
                      f"by fastsim); allowed: {allowed}")


def _check_row_counts(meta) -> None:
    """Refuse (``ValueError``) a footer whose row groups' row counts do not add up to the
    file's: the counts are in the footer, which no page checksum covers, and pyarrow reads
    as many rows as a row group's count says, so a flipped bit there dropped rows without
    a word (an extract's trajectory points, 624 read as 560).  Only the counts are read:
    a column chunk's metadata, damaged, aborted the process (pyarrow's C++ exception)."""
    groups = sum(meta.row_group(g).num_rows for g in range(meta.num_row_groups))
    if groups != meta.num_rows:
        raise ValueError(f"its row groups hold {groups} rows, its footer says {meta.num_rows}")


def _to_polars(table) -> pl.DataFrame:
    """A pyarrow table as polars, refused (``ValueError``) where polars would panic: a
    string that is not UTF-8 (a log written by a tool that does not check, or a byte
    flipped in a page without checksums) or metadata that is not.  The panic is no
    ``Exception`` (pyo3's ``PanicException``), so it went past every refusal as a
    traceback."""
    table.validate(full=True)  # full: every string's UTF-8 too (pyarrow's ArrowInvalid)
    for where in (table.schema, *table.schema):
        for key, value in (where.metadata or {}).items():
            try:
                key.decode("utf-8"), value.decode("utf-8")
            except UnicodeDecodeError:
                raise ValueError(f"metadata that is not UTF-8 ({key!r})") from None
    return pl.from_arrow(table)


def read_text(path: Path, what: str) -> str:
    """A UTF-8 text file; unreadable or invalid UTF-8 is a ``ConfigError`` with the line."""
    path = Path(path)
    check_regular(path, f"a UTF-8 {what}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what} ({_reason(exc)})") from None
    return decode_utf8(path, data, what)


def decode_utf8(path: Path, data: bytes, what: str) -> str:
    """``data`` read from ``path`` as text; invalid UTF-8 is a ``ConfigError`` with the line.
    A leading byte-order mark (some Windows editors write one) is dropped, as CSV logs'
    is: JSON and TOML parsers refused it, TOML as an "invalid statement" at line 1."""
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}:{line}: invalid UTF-8 (byte 0x{data[exc.start]:02x}); "
                          f"allowed: a UTF-8 {what}") from None


def toml_text(value: Any) -> str:
    """``value`` (as ``tomllib`` reads it) written as TOML writes it, for a message that
    echoes a file: ``true``, ``"text"``, ``[1, "a"]``, ``{k = 2}``, ``1979-05-27``; Python's
    repr (``True``, ``'text'``) is not what the file says.

    Examples
    --------
    >>> toml_text([True, "a", 1.5, {"k": 2}])
    '[true, "a", 1.5, {k = 2}]'
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a TOML basic string escapes as JSON does
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_text(v) for v in value) + "]"
    if isinstance(value, dict):
        keys = (k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k) for k in value)
        return "{" + ", ".join(f"{k} = {toml_text(v)}" for k, v in zip(keys, value.values())) + "}"
    if isinstance(value, (datetime.date, datetime.time)):  # datetime is a date
        return value.isoformat()
    return repr(value)  # a number: int, float, inf and nan read as TOML writes them


def axis_refusal(key: str, values: Any) -> str | None:
    """What is wrong with ``values`` as a sweep file's ``[axes]`` entry ``key`` (a
    non-empty list of values), None if nothing: ``fastsim sweep`` and ``fastsim costaware
    sweep`` refuse an axis in these words.  A single value written without brackets is told
    both places it can go."""
    if isinstance(values, list) and values:
        return None
    text = toml_text(values)
    one = ("" if isinstance(values, (list, dict)) else
           f", as {key} = [{text}] (or {key} = {text} under [base]: every cell's)")
    return f"axes.{key}={text} is invalid; allowed: a non-empty list of values{one}"


def toml_echo(msg: str, values: dict[str, Any]) -> str:
    """A validator's message with each ``key=repr(value)`` it echoes of a file's ``values``
    written as the file writes it (``sigma=True`` -> ``sigma=true``, ``mix='x'`` ->
    ``mix="x"``)."""
    for key, value in values.items():
        # a list is checked as a tuple: mix=[0.5, 0.5, true] is echoed as (0.5, 0.5, True)
        for said in {repr(value), repr(tuple(value)) if isinstance(value, list) else repr(value)}:
            msg = _replace_word(msg, f"{key}={said}", lambda: f"{key}={toml_text(value)}")
    return msg


def _replace_word(text: str, old: str, new: Callable[[], str]) -> str:
    """``text`` with each ``old`` not preceded by a word character or '-' replaced by
    ``new()``: found as text, not as a regular expression (the escaped repr of a list of a
    million thresholds took minutes to compile, to echo a refusal of it)."""
    out, start = [], 0
    while (i := text.find(old, start)) >= 0:
        if i > 0 and (text[i - 1].isalnum() or text[i - 1] in "_-"):
            out.append(text[start:i + 1])
            start = i + 1
            continue
        out.append(text[start:i] + new())
        start = i + len(old)
    return "".join(out) + text[start:]


def _bare_word_hint(error: str, text: str) -> str:
    """For tomllib's "Invalid value (at line L, column C)" at a word written without
    quotes (``scheduler = fifo``, ``policy = [evalstop:k=2]``): how TOML writes text."""
    at = re.fullmatch(r"Invalid value \(at line (\d+), column (\d+)\)", error)
    lines = text.splitlines()
    if not at or int(at[1]) > len(lines):
        return ""
    word = re.match(r"[A-Za-z_][^\s,\]\}#]*", lines[int(at[1]) - 1][int(at[2]) - 1:])
    if word and word[0].lower() in ("true", "false"):
        return "; allowed: true or false, in lower case"
    return f"; allowed: text in double quotes, as \"{word[0]}\"" if word else ""


def _line_of(text: str, literal: str) -> int:
    """The line of ``text`` (a TOML file) whose value holds the number ``literal``, outside
    a comment; 1 if none does."""
    number = re.compile(rf"(?<![\w.+-]){re.escape(literal)}(?![\w.])")
    return next((i for i, line in enumerate(text.splitlines(), 1)
                 if number.search(line.partition("#")[0])), 1)


class JSONError(ValueError):
    """Text that is not the JSON a reader takes (``loads_json``): ``msg`` says why (json's
    own words, ``key 'a' appears twice in one object``, ``nested too deeply``), ``lineno``
    and ``colno`` where, when json knows (None otherwise), ``allowed`` what the refusal
    asks for itself (``each key once``; None: the reader says what its file holds).  Its
    text is ``msg`` and where (``at``), as a reader that names no line of its own says it."""

    def __init__(self, msg: str, lineno: int | None = None, allowed: str | None = None,
                 colno: int | None = None):
        self.msg, self.lineno, self.colno, self.allowed = msg, lineno, colno, allowed
        super().__init__(msg + self.at())

    def at(self, line: bool = True) -> str:
        """Where json found the text wrong, for a refusal: `` at line 3, column 14``, or
        `` at column 14`` without ``line`` (a reader that names the line itself,
        ``FILE:3: ...``); empty where json gives no place (a key twice, the nesting)."""
        if self.colno is None:
            return f" at line {self.lineno}" if line and self.lineno is not None else ""
        return f" at line {self.lineno}, column {self.colno}" if line else f" at column {self.colno}"


def _unique_pairs(pairs: list, each_pair: Callable[[str, Any], None] | None = None) -> dict:
    obj = {}
    for key, value in pairs:
        if key in obj:  # json.loads would keep the last value silently
            raise JSONError(f"key {key!r} appears twice in one object", allowed="each key once")
        if each_pair is not None:
            each_pair(key, value)
        obj[key] = value
    return obj


def loads_json(text: str | bytes, parse_float: Callable[[str], Any] | None = None,
               each_pair: Callable[[str, Any], None] | None = None) -> Any:
    """``json.loads`` of ``text``, every refusal one ``JSONError``: text that is not JSON
    (or not UTF-8), a key given twice in one object (json keeps the last, silently), and
    nesting deeper than json's parser recurses (a RecursionError traceback).  Every JSON
    file fastsim reads goes through here.  ``parse_float`` is json's; ``each_pair(key,
    value)`` is called on every pair of every object, and may raise (replay's UTF-8 rule).

    >>> loads_json('{"a": 1, "a": 2}')
    Traceback (most recent call last):
    ...
    fastsim.io.JSONError: key 'a' appears twice in one object
    >>> loads_json("[" * 100_000)
    Traceback (most recent call last):
    ...
    fastsim.io.JSONError: nested too deeply
    """
    hook = _unique_pairs if each_pair is None else (lambda pairs: _unique_pairs(pairs, each_pair))
    try:
        return json.loads(text, object_pairs_hook=hook, parse_float=parse_float)
    except json.JSONDecodeError as exc:
        raise JSONError(exc.msg, exc.lineno, colno=exc.colno) from None
    except UnicodeDecodeError as exc:  # bytes: json decodes them first
        raise JSONError(f"not UTF-8 ({exc.reason})") from None
    except RecursionError:  # json recurses once per nesting level
        raise JSONError("nested too deeply") from None
    except ValueError as exc:  # an integer of more digits than Python converts (4,300)
        if type(exc) is not ValueError or "digits" not in str(exc):
            raise  # the hook's or parse_float's own refusal, as it is
        raise JSONError("a number too long to read (an integer of over 4,300 digits)") from None


def read_toml(path: Path, what: str = "sweep file") -> dict[str, Any]:
    """Parse a TOML file; a missing or unreadable file, bad TOML, a float a float64 cannot
    hold (``1e-400``, which tomllib reads as 0: ``fastsim.values.float64_text``) or a file
    with no key is a ``ConfigError`` (an empty file is a truncated or unsaved one far more
    often than a wish for every default: it would run a sweep nobody wrote)."""
    path = Path(path)
    text = read_text(path, what)
    try:
        doc = tomllib.loads(text, parse_float=float64_text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}{_bare_word_hint(str(exc), text)}") from None
    except NumberTextError as exc:  # sigma = 1e-400 read as 0
        raise ConfigError(f"{path}:{_line_of(text, exc.text)}: {exc}; allowed: "
                          f"{exc.allowed}") from None
    except RecursionError:  # the parser recurses once per nested array or table
        raise ConfigError(f"{path}: arrays or tables nested too deeply to read; allowed: "
                          "a sweep's values (a few levels)") from None
    if not doc:
        raise ConfigError(f"{path}: the {what} holds no key (empty, or comments only); "
                          "allowed: at least one key, as in the files of sweeps/")
    return doc
