"""The thread count numba may be asked for: ``NUMBA_NUM_THREADS``, checked before numba
launches a thread.  numba reads the variable when first imported and launches every
thread it asks for at its first parallel kernel: 100000 was a segmentation fault (40000
libgomp's "Thread creation failed"), and a count beyond a C int numba's RuntimeError.
More threads than cores only wait their turn.  No numba here: the command line checks
the variable with this module before anything imports numba (``fastsim.cli``), and
``jit`` before any kernel is defined, so the Python API is refused too."""
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
