"""A one-line notice (with a spinner on a terminal) while numba compiles the kernels the
first time, so that nobody waits in silence; later runs load the on-disk cache."""
from __future__ import annotations

import itertools
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from fastsim.kernels.jit import CACHE, CACHE_DIR, UNCACHED

_OPEN = threading.local()  # notices (and quiet blocks) open in this thread: ``depth``
_WARM: set = set()  # schedulers (codes) and kernels (names) run in this process: compiled


def engine_is_cached(scheduler: int | None = None) -> bool:
    """Whether the one-pass simulation kernel of ``scheduler`` (a code, default the default
    scheduler's; what ``simulate`` and ``fastsim run`` call) is in numba's on-disk cache
    for this source."""
    if not CACHE:
        return False
    if scheduler is None:
        from fastsim.config import SchedulerConfig
        scheduler = SchedulerConfig().code
    # one index file per scheduler (``fastsim.kernels.jit.one_of``)
    return _in_cache(f"*/pipeline.*pipeline_nb_{scheduler}-*.nbi")


def kernels_cached(*names: str) -> bool:
    """Whether every kernel of ``names`` (``"costaware.optimal_j_nb"``: its module under
    ``kernels/`` and its name) is in numba's on-disk cache for this source."""
    return CACHE and all(_in_cache(f"*/{name}-*.nbi") for name in names)


def _in_cache(pattern: str) -> bool:
    """Whether a file of ``CACHE_DIR`` matches ``pattern``.  A directory that cannot be
    read is no cache: pathlib's glob passes on only some errors, and a NUMBA_CACHE_DIR
    with a name too long for the file system was an OSError traceback before any work
    (the kernels compile in memory then, ``fastsim.kernels.jit``)."""
    try:
        return any(Path(CACHE_DIR).glob(pattern))
    except OSError:
        return False


def _afterwards() -> str:
    """What the next run does: load the cache, or compile again (and why)."""
    if not CACHE:
        return "FASTSIM_NO_CACHE=1: every run compiles again"
    if UNCACHED:  # decorated in memory (``fastsim.kernels.jit._njit``)
        return (f"no writable cache directory ({CACHE_DIR}): every run "
                "compiles again; set NUMBA_CACHE_DIR to a writable directory")
    return "first run only, cached afterwards"


def notice_text(what: str = "the simulation kernels", seconds: str = "10-40",
                afterwards: str | None = None) -> str:
    return f"compiling {what} (about {seconds} s by machine load; {afterwards or _afterwards()})"


def sweep_notice(schedulers, stream=None, users=()) -> bool:
    """The notice, once, before a sweep's progress bar (or without one: ``fastsim sweep
    --no-progress``, ``fastsim.sweep``), if a kernel of one of ``schedulers`` (codes) is
    neither cached nor compiled in this process yet: the bar sat at its first chunk,
    silent, while they compiled (a newcomer's first ``fastsim reproduce --quick``); in a
    log, the bar's first line after it read "31.29s/chunk" and an hour to go.  Else the
    user functions' notice, if one of ``users`` (``user_call``'s arguments,
    ``fastsim.api.user_drivers_of``) is not compiled in this process yet: numba caches
    none of them, so every sweep compiled them in silence.  Whether it was said."""
    if not all(code in _WARM or engine_is_cached(code) for code in set(schedulers)):
        text = notice_text()
    else:  # ``users`` come once each, and a driver has one name (its makers are cached)
        fresh = [f"the {kind} {name}" for driver, kind, name in users
                 if ("user", driver) not in _WARM]
        text = notice_text(" and ".join(fresh), **_USER) if fresh else None
    if text:
        print(text, file=stream or sys.stderr, flush=True)
    return bool(text)


@contextmanager
def quiet():
    """No notice inside the block, of compiling or of inert settings (``fastsim.api``):
    its caller says it its own way (a sweep, once before it starts) or already has (an
    open notice)."""
    _OPEN.depth = getattr(_OPEN, "depth", 0) + 1
    try:
        yield
    finally:
        _OPEN.depth -= 1


def is_quiet() -> bool:
    """Whether this thread is inside ``quiet()`` (or an open notice)."""
    return bool(getattr(_OPEN, "depth", 0))


@contextmanager
def _once(key, cached, **notice):
    """The notice around a block that compiles what ``key`` names, unless ``key`` ran in
    this process or ``cached()`` finds it on disk: without the on-disk cache
    (``FASTSIM_NO_CACHE=1``) a loop of calls would say it at each."""
    with compile_notice(cached=key in _WARM or cached(), **notice):
        yield
    _WARM.add(key)


def first_run(scheduler: int):
    """The notice around a run of the engine of ``scheduler`` (a code) from the API
    (``simulate``, ``compare``): a notebook's first call compiled for 10-40 s in silence."""
    return _once(scheduler, lambda: engine_is_cached(scheduler))


# What the notice of a user's compiled code says: numba does not cache a user's code here
# (``fastsim.kernels.jit.user_driver``), so every process compiles it, for seconds on a
# busy machine.
_USER = dict(seconds="2-15", afterwards="again in every new process: user code is not cached")


def user_call(driver, kind: str, name: str):
    """The notice around the first call in this process of ``driver``, the compiled driver
    specialised on a user's function (``kind`` "stop policy", ``name`` "mypol:drawdown");
    each driver (the simulator's, replay's and the monitor's) compiles the function again."""
    return _once(("user", driver), lambda: False, what=f"the {kind} {name}", **_USER)


def first_call(name: str, *, what: str, seconds: str):
    """The notice around a call of the kernel ``name`` (``"costaware_sgd.sgd_cost_to_eps_nb"``)
    from the API, once per process."""
    return _once(name, lambda: kernels_cached(name), what=what, seconds=seconds)


@contextmanager
def compile_notice(scheduler: int | None = None, stream=None, *, cached: bool | None = None,
                   what: str = "the simulation kernels", seconds: str = "10-40",
                   afterwards: str | None = None):
    """Print the notice to ``stream`` (stderr) if the kernels of ``scheduler`` (a code)
    are not cached yet, or if not ``cached`` (other kernels: ``what``, compiled in about
    ``seconds``), and spin on a terminal until the block ends."""
    stream = stream or sys.stderr
    if is_quiet() or (engine_is_cached(scheduler) if cached is None else cached):
        yield
        return
    with quiet():
        yield from _announce(stream, notice_text(what, seconds, afterwards))


def _announce(stream, text: str):
    """Print ``text`` to ``stream``; on a terminal, spin with the seconds elapsed until the
    block ends (a generator: ``compile_notice``'s block runs at its ``yield``)."""
    if not stream.isatty():
        print(text, file=stream, flush=True)
        yield
        return
    done = threading.Event()
    t0 = time.perf_counter()

    def spin():
        for mark in itertools.cycle("|/-\\"):
            stream.write(f"\r{mark} {text} {time.perf_counter() - t0:4.0f} s")
            stream.flush()
            if done.wait(0.25):
                break
        stream.write(f"\r{text}: done in {time.perf_counter() - t0:.0f} s\n")
        stream.flush()

    spinner = threading.Thread(target=spin, daemon=True)
    spinner.start()
    try:
        yield
    finally:
        done.set()
        spinner.join()
