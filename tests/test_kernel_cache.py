"""numba's on-disk cache of the kernels is an optimisation: a full disk while it is
written, or a truncated or damaged cache file, compiles in memory and gives the same
results, never a traceback ending the command (``kernels/jit.py``, ``_cache_is_optional``);
machine code whose file does not check out is never loaded (``_checked_data``)."""
from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest

KERNEL = """
from fastsim.kernels.jit import entry


@entry
def add_nb(a, b):
    return a + b


print(add_nb(1, 2))
"""
# two specialisations, and how many were loaded from the cache
TWO = KERNEL + "print(add_nb(1.5, 2.25), sum(add_nb.stats.cache_hits.values()))\n"


def run_kernel(tmp_path, max_file_bytes=None, source=KERNEL, max_memory_bytes=None, env=()):
    script = tmp_path / "cached_kernel.py"
    script.write_text(source)

    def limit():
        if max_file_bytes is not None:  # a disk that takes no byte more (EFBIG, as ENOSPC)
            resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))
        if max_memory_bytes is not None:  # a runaway read ends, it does not fill the host
            resource.setrlimit(resource.RLIMIT_AS, (max_memory_bytes, max_memory_bytes))

    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, preexec_fn=limit,
                          env={**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"),
                               **dict(env)})


def cache_files(tmp_path, suffix):
    return sorted((tmp_path / "cache").rglob(f"*{suffix}"))


def test_a_cache_that_cannot_be_written_is_compiled_in_memory(tmp_path):
    # before: OSError: [Errno 27] File too large from numba's cache save, a traceback
    r = run_kernel(tmp_path, max_file_bytes=0)
    assert r.returncode == 0 and r.stdout.strip() == "3", r.stderr
    assert "Traceback" not in r.stderr
    assert not [p for p in cache_files(tmp_path, "") if p.is_file() and p.stat().st_size]
    r = run_kernel(tmp_path)  # room again: cached as usual
    assert r.returncode == 0 and r.stdout.strip() == "3", r.stderr
    assert cache_files(tmp_path, ".nbi") and cache_files(tmp_path, ".nbc")


def test_a_damaged_cache_file_is_a_miss_and_is_rewritten(tmp_path):
    r = run_kernel(tmp_path)
    assert r.returncode == 0, r.stderr
    indexes = cache_files(tmp_path, ".nbi")
    assert indexes
    for p in indexes:  # truncated, as by a copy or a sync tool cut short
        p.write_bytes(p.read_bytes()[:20])
    # before: _pickle.UnpicklingError: pickle data was truncated, a traceback, every run
    r = run_kernel(tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == "3", r.stderr
    assert "Traceback" not in r.stderr
    assert all(p.stat().st_size > 20 for p in cache_files(tmp_path, ".nbi"))


def test_damaged_machine_code_is_never_loaded(tmp_path):
    assert run_kernel(tmp_path, source=TWO).stdout.split() == ["3", "3.75", "0"]
    assert run_kernel(tmp_path, source=TWO).stdout.split() == ["3", "3.75", "2"]
    data = cache_files(tmp_path, ".nbc")
    assert len(data) == 2
    blob = bytearray(data[0].read_bytes())
    blob[blob.find(b"\x7fELF") + 300] ^= 0xFF  # inside the object code: it unpickles fine
    data[0].write_bytes(bytes(blob))
    # before: loaded and run as is (2 cache hits); now a miss, and the index goes with it
    r = run_kernel(tmp_path, source=TWO)
    assert r.stdout.split() == ["3", "3.75", "0"], r.stderr
    assert run_kernel(tmp_path, source=TWO).stdout.split()[-1] == "2"  # saved over


def test_a_data_file_of_another_signature_is_never_loaded(tmp_path):
    run_kernel(tmp_path, source=TWO)
    ints, floats = cache_files(tmp_path, ".nbc")
    a, b = ints.read_bytes(), floats.read_bytes()
    ints.write_bytes(b)  # as an index damaged into naming the other file would
    floats.write_bytes(a)
    # before: each signature ran the other's machine code
    r = run_kernel(tmp_path, source=TWO)
    assert r.stdout.split() == ["3", "3.75", "0"], r.stderr
    assert run_kernel(tmp_path, source=TWO).stdout.split()[-1] == "2"


@pytest.mark.parametrize("suffix,planted", [(".nbc", "/dev/zero"), (".nbc", "fifo"),
                                            (".nbi", "fifo")])
def test_a_cache_file_that_is_not_a_regular_file_is_a_miss(tmp_path, suffix, planted):
    # before: a data file linked to /dev/zero was read in full (here, with the memory
    # capped, to a gigabyte or more), a named pipe at a data file's or the index's name
    # blocked its open forever
    peak = TWO + "print(int(open('/proc/self/status').read().split('VmHWM:')[1].split()[0]))\n"
    run_kernel(tmp_path, source=peak)
    for p in cache_files(tmp_path, suffix):
        p.unlink()
        if planted == "fifo":
            os.mkfifo(p)
        else:
            p.symlink_to(planted)
    r = run_kernel(tmp_path, source=peak, max_memory_bytes=3 << 30)
    assert r.stdout.split()[:3] == ["3", "3.75", "0"] and "Traceback" not in r.stderr, r.stderr
    assert int(r.stdout.split()[3]) < 1 << 20, r.stdout  # kB: under a gigabyte
    assert run_kernel(tmp_path, source=peak).stdout.split()[2] == "2"  # saved over


def test_no_writable_place_for_the_cache_compiles_in_memory(tmp_path):
    # before: RuntimeError: cannot cache function 'add_nb': no locator available, a
    # traceback ending every command (a read-only install, a home that is not writable)
    blocked = tmp_path / "file"
    blocked.write_text("")
    (tmp_path / "__pycache__").write_text("")  # beside the source: not a directory
    said = KERNEL + "from fastsim.kernels.jit import UNCACHED\nprint('add_nb' in UNCACHED)\n"
    r = run_kernel(tmp_path, source=said,
                   env={"NUMBA_CACHE_DIR": str(blocked / "cache"), "HOME": str(blocked),
                        "XDG_CACHE_HOME": str(blocked)})
    # the compile notice reads UNCACHED to say every run compiles again
    assert r.returncode == 0 and r.stdout.split() == ["3", "True"], r.stderr


def test_a_kernel_is_cached_under_its_cache_directory_or_not_at_all(tmp_path):
    # before: with CACHE_DIR not writable numba cached the kernel beside its source
    # (kernels/__pycache__) or in the user's numba cache, keyed on its own file alone, and
    # loaded it after an edit of rng.py that it inlines: bootstrap_sums_nb gave the old
    # resamples.  Decorated only (its choice of cache is made then): nothing compiles here.
    blocked = tmp_path / "file"
    blocked.write_text("")
    said = ("from fastsim.kernels.bootstrap import bootstrap_sums_nb as f\n"
            "from fastsim.kernels.jit import UNCACHED\n"
            "print(type(f._cache).__name__, 'bootstrap_sums_nb' in UNCACHED)\n")
    r = run_kernel(tmp_path, source=said,
                   env={"NUMBA_CACHE_DIR": str(blocked / "cache"), "HOME": str(tmp_path),
                        "XDG_CACHE_HOME": str(tmp_path)})
    assert r.returncode == 0 and r.stdout.split() == ["NullCache", "True"], r.stdout + r.stderr


def test_no_full_collection_while_numba_compiles():
    """A compile runs without full collections of Python's cycle collector (``kernels/jit.py``,
    ``_NoFullCollection``: 0.6 s of a 10 s cold start), and the thresholds come back after
    it, also after a compile that fails."""
    import gc

    import numba
    from numba.core import event
    from numba.core.errors import TypingError

    from fastsim.kernels import jit  # its listener is registered first, at import

    seen = []

    class Probe(event.Listener):
        def on_start(self, ev):
            seen.append(gc.get_threshold())

        def on_end(self, ev):
            pass

    before = gc.get_threshold()
    probe = Probe()
    event.register("numba:compile", probe)
    try:
        assert numba.njit(lambda x: x + 1)(1) == 2
        with pytest.raises(TypingError):
            numba.njit(lambda x: x + "a")(1)
    finally:
        event.unregister("numba:compile", probe)
    assert [t[2] for t in seen] == [jit.NO_FULL_COLLECTION] * 2
    assert seen[0][:2] == before[:2]
    assert gc.get_threshold() == before


def test_a_cache_directory_name_too_long_is_no_cache(tmp_path, monkeypatch):
    # before: OSError: [Errno 36] File name too long from pathlib's glob, a traceback
    # before any work in fastsim run and costaware ratios (NUMBA_CACHE_DIR of 300 x's)
    from fastsim import compile_notice

    monkeypatch.setattr(compile_notice, "CACHE", True)
    monkeypatch.setattr(compile_notice, "CACHE_DIR", str(tmp_path / ("x" * 300) / "hash"))
    assert not compile_notice.engine_is_cached(0)
    assert not compile_notice.kernels_cached("costaware.optimal_j_nb")
