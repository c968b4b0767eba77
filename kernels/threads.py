"""The thread count numba may be asked for: ``NUMBA_NUM_THREADS``, checked before numba
launches a thread.  numba reads the variable when first imported and launches every
thread it asks for at its first parallel kernel: 100000 was a segmentation fault (40000
libgomp's "Thread creation failed"), and a count beyond a C int numba's RuntimeError.
More threads than cores only wait their turn.  No numba here: the command line checks
the variable with this module before anything imports numba (``fastsim.cli``), and
``jit`` before any kernel is defined, so the Python API is refused too.

``NUMBA_THREADING_LAYER`` too: numba loads the layer when it first launches its threads,
a traceback then (a name it does not know, or ``tbb`` without TBB installed).  Checking
that a layer loads means loading it, so numba is imported here when, and only when, the
variable names a layer.

``NUMBA_OPT`` too: numba reads it when first imported, and a value it does not take was a
multi-line warning with its traceback, the run going on at numba's default level."""
import os

MAX_THREADS = max(1024, os.cpu_count() or 1)


def threads_variable_error() -> str | None:
    """What is wrong with ``NUMBA_NUM_THREADS`` in this process's environment, as one line
    naming it and what is allowed; None if it is unset or a count numba can launch."""
    value = os.environ.get("NUMBA_NUM_THREADS")
    if value is None:
        return None
    try:
        # digits 0-9 only: isdigit() alone passes "²", which int() refuses
        ok = value.isascii() and value.isdigit() and 1 <= int(value) <= MAX_THREADS
    except ValueError:  # beyond Python's limit on digits (4300): no count numba launches
        ok = False
    if ok:
        return None
    return (f"NUMBA_NUM_THREADS={value!r} is invalid; allowed: a positive integer up to "
            f"{MAX_THREADS} written in digits 0-9, or unset (one thread per core)")


def numba_variables_error() -> str | None:
    """What is wrong with the numba variables fastsim cannot run under, as one line: the
    threads' (``threads_variable_error``), the layer's (``threading_layer_error``), then
    ``NUMBA_DISABLE_JIT``, then ``NUMBA_OPT`` (``opt_variable_error``).
    ``NUMBA_DISABLE_JIT`` set (numba reads
    any integer but 0 as on), the kernels were plain Python functions, and their
    decoration failed with an AttributeError traceback; uncompiled, their 64-bit integer
    arithmetic (the counter-based random draws) would not wrap as compiled code does."""
    why = threads_variable_error() or threading_layer_error()
    if why is not None:
        return why
    value = os.environ.get("NUMBA_DISABLE_JIT", "")
    try:
        on = int(value) != 0  # numba's reading: int(); text that is not one, a warning and off
    except ValueError:
        on = False
    if on:
        return (f"NUMBA_DISABLE_JIT={value!r} is invalid; allowed: 0 or unset (fastsim's "
                "kernels run compiled)")
    return opt_variable_error()


# the values numba takes (numba.core.config._process_opt_level), exactly: " 3" is not one
OPT_LEVELS = ("0", "1", "2", "3", "max")


def opt_variable_error() -> str | None:
    """What is wrong with ``NUMBA_OPT``, as one line; None if it is unset or one of
    ``OPT_LEVELS``."""
    value = os.environ.get("NUMBA_OPT")
    if value is None or value in OPT_LEVELS:
        return None
    return (f"NUMBA_OPT={value!r} is invalid; allowed: {', '.join(OPT_LEVELS)} (numba's "
            "optimisation levels), or unset (3)")


# numba's layers, and its kinds that pick one (numba.np.ufunc.parallel._launch_threads)
LAYERS = ("default", "safe", "forksafe", "threadsafe", "tbb", "omp", "workqueue")


def threading_layer_error() -> str | None:
    """What is wrong with ``NUMBA_THREADING_LAYER`` (or ``NUMBA_THREADING_LAYER_PRIORITY``),
    as one line; None if both are unset or name what this installation loads.  Read as
    numba reads them (``_launch_threads``): the layer's name in any case, "" a name it does
    not know, and the priority a permutation of tbb, omp and workqueue, checked first."""
    priority = os.environ.get("NUMBA_THREADING_LAYER_PRIORITY")
    if priority is not None and sorted(priority.split()) != ["omp", "tbb", "workqueue"]:
        return (f"NUMBA_THREADING_LAYER_PRIORITY={priority!r} is invalid; allowed: tbb, omp "
                "and workqueue, each once, in any order, separated by spaces, or unset")
    layer = os.environ.get("NUMBA_THREADING_LAYER")
    if layer is None or layer.lower() == "default":
        return None
    allowed = (f"allowed: {', '.join(LAYERS)} (one this installation loads: workqueue "
               "always), or unset")
    if layer.lower() not in LAYERS:
        return f"NUMBA_THREADING_LAYER={layer!r} is invalid; {allowed}"
    from numba.np.ufunc import parallel

    try:
        parallel._launch_threads()
    except ValueError as exc:  # numba's message, with a multi-line hint after its first
        return (f"NUMBA_THREADING_LAYER={layer!r} cannot be loaded ({str(exc).splitlines()[0]}"
                f"); {allowed}")
    return None
