"""A user stop policy's plain-Python version (``.py_func``) asked what its compiled self
was asked, on cluster 0 of a run (``fastsim run``, ``simulate``, a sweep's first-cluster
trial and its first chunks).

Where Python raises and the compiled code returned, numba gave a value Python has none
for (``int`` of a NaN, an index past the prefix, which reads NaN, ``math.log(0)``), and
the decisions rest on it: a policy that did ``int(x)`` on a NaN never stopped a job, and
the run said nothing.  That is refused in one line naming the function, the line that
raised and the exception.  Decisions that differ while both return are a
``PlainPythonWarning``, not a refusal: numba sums an array in order where numpy sums it
pairwise, and its libm may round a last bit otherwise than numpy's vector loops, so a
legitimate policy can part from its plain self on a near tie.
"""
from __future__ import annotations

import numbers
import os
import traceback
import warnings
from typing import Any

import numpy as np

from fastsim.errors import ConfigError, PlainPythonWarning, readonly
from fastsim.user_modules import library_dirs

# Plain-Python calls at most, whole jobs only: about 1,700 on a default cluster (240 jobs
# in scope, 7 evaluations), so a cluster of thousands of jobs, or of hundreds of
# evaluations, does not pay for all of them.  A count, not a time: what is checked is the
# same on every machine.
MAX_CALLS = 4096


def check_stop_policy(decl: Any, params: tuple, w: Any, trigger_eval: np.ndarray,
                      in_scope: np.ndarray) -> None:
    """Ask ``decl``'s plain-Python trigger about the prefixes of cluster 0's jobs in scope,
    as ``kernels.stops.causal_trigger_nb`` asked its compiled one, and compare the first
    evaluation each answers with its own with ``trigger_eval`` (the compiled answers).
    Nothing when the batch does not start at cluster 0: one cluster, the same in every
    run of the seed, whatever the chunking."""
    if w.n_clusters == 0 or int(w.cluster_ids[0]) != 0:
        return
    # numpy's notes on what numba does silently (an empty mean, an overflow) are not the
    # run's to print: the answers are compared instead
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        differs = _first_difference(decl, params, w, trigger_eval, in_scope)
    if differs is not None and (decl.ref, params, differs) not in _SAID:
        _SAID.add((decl.ref, params, differs))  # once a process: a run checks cluster 0 twice
        j, compiled, plain = differs
        warnings.warn(
            f"stop policy {decl.name} decides otherwise as plain Python (its .py_func) on "
            f"cluster 0, job {j}: compiled, {_answer(compiled)}; plain, {_answer(plain)}; "
            "numba's sums and libm may round a last bit otherwise than numpy, which flips a "
            "near tie, and so do fastmath=True, an integer overflow (int64 wraps, Python's "
            "integers grow) and a NaN the compiled code reads (docs/extending.md)",
            PlainPythonWarning, stacklevel=3)


_SAID: set[tuple] = set()


def _answer(trig: int | None) -> str:
    return ("no stop" if trig == 0 else "an answer that is no integer" if trig is None else
            "an answer neither 0 nor the evaluation asked about" if trig < 0 else
            f"a stop at evaluation {trig}")


def _first_difference(decl: Any, params: tuple, w: Any, trigger_eval: np.ndarray,
                      in_scope: np.ndarray) -> tuple | None:
    """``(job, compiled answer, plain answer)`` of cluster 0's first job whose plain-Python
    answer differs (None: not an integer), or None; a ``ConfigError`` if Python raises."""
    py = decl.user.py_func
    n_evals = w.n_evals
    score, loss = readonly(w.score[0]), readonly(w.loss[0])
    calls = 0
    for j in np.flatnonzero(in_scope[0]):
        if calls >= MAX_CALLS:
            return None
        duration_h = float(w.duration_h[0, j])
        attained = np.array([duration_h * ((e + 1) / n_evals) for e in range(n_evals)])
        attained.flags.writeable = False
        t_est_h = float(w.t_est_h[0, j])
        trig = 0
        for e in range(1, n_evals + 1):
            calls += 1
            try:
                r = py(score[j, :e], loss[j, :e], attained[:e], t_est_h, *params)
            except Exception as exc:  # noqa: BLE001 - the user's code raised
                if _numba_only(exc):
                    return None  # a construct only compiled code runs: nothing to compare
                raise ConfigError(
                    f"stop policy {decl.name} raised in plain Python where its compiled code "
                    f"returned (its .py_func, on cluster 0, job {j}, evaluation {e}): "
                    f"{type(exc).__name__}: {_first_line(exc)} ({_where(exc, py)}); allowed: "
                    "a function whose plain-Python version returns where its compiled one "
                    "does (compiled, int() of a NaN, an index past the prefix and "
                    "math.log(0) give a value, not an error: docs/extending.md)") from None
            if not isinstance(r, numbers.Integral):
                trig = None
                break
            if r != 0:
                trig = e if r == e else -1
                break
        if trig != int(trigger_eval[0, j]):
            return int(j), int(trigger_eval[0, j]), trig
    return None


def _first_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return lines[0] if lines else ""


def _frames(exc: BaseException) -> list:
    """``(frame, line)`` of each frame ``exc`` passed through below the call of the user's
    function, innermost last."""
    return list(traceback.walk_tb(exc.__traceback__))[1:]


def _where(exc: BaseException, py: Any) -> str:
    """``FILE, line N: CODE`` of the innermost frame in the user's files (not numpy's,
    Python's or fastsim's), or in the function's own file."""
    import linecache

    own = os.path.realpath(py.__code__.co_filename)
    frames = [(f.f_code.co_filename, n) for f, n in _frames(exc)]
    mine = [(path, n) for path, n in frames if os.path.realpath(path) == own
            or not os.path.realpath(path).startswith(library_dirs())]
    path, line = (mine or frames)[-1]
    code = linecache.getline(path, line).strip()
    return f"{os.path.basename(path)}, line {line}" + (f": {code}" if code else "")


def _numba_only(exc: BaseException) -> bool:
    """Whether ``exc`` says that Python cannot run what numba compiles, rather than that
    the code parts from its compiled self: it was raised inside numba (an ``@intrinsic``
    called from Python, a compile for other types), or inside a function numba compiles
    from another implementation (an ``@overload`` stub, whose Python body is not what
    runs compiled)."""
    import numba
    from numba.core.typing.templates import builtin_registry

    frames = [f for f, _ in _frames(exc)]
    ours = os.path.join(os.path.realpath(os.path.dirname(numba.__file__)), "")
    if frames and os.path.realpath(frames[-1].f_code.co_filename).startswith(ours):
        return True
    overloaded = {getattr(v, "__code__", None) for v, _ in builtin_registry.globals}
    return any(f.f_code in overloaded for f in frames[1:])
