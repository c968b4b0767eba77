"""A user stop policy's or scheduler key's plain-Python version (``.py_func``) asked what
its compiled self was asked, on cluster 0 of a run (``fastsim run``, ``simulate``, a
sweep's first-cluster trial and its first chunks), and a stop policy's beside each
compiled call of replay, of the live monitor and of ``replay.policies.decide_series``
called alone, on their first ``MAX_CALLS`` calls (``PlainCheck``); and the job-type codes
as user code gets them, whose comparison with text (``== "rlhf"``, False for every job)
raises.

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
import sys
import traceback
import warnings
from contextlib import contextmanager
from typing import Any, NamedTuple

import numpy as np

from fastsim.errors import ConfigError, PlainPythonWarning, readonly
from fastsim.kernels.codes import JOB_TYPE_LABELS
from fastsim.registry import check_returns
from fastsim.user_modules import library_dirs, line_at, user_line

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
    with _quiet():
        differs = _first_difference(decl, params, w, trigger_eval, in_scope)
    if differs is not None:
        j, compiled, plain = differs
        _differs(decl, params, f"on cluster 0, job {j}", compiled, plain)


_SAID: set[tuple] = set()


def _differs(decl: Any, params: tuple, at: str, compiled: int, plain: int | None) -> None:
    """The ``PlainPythonWarning`` of ``decl``'s plain-Python answer ``plain`` where the
    compiled one was ``compiled``, ``at`` a job; once a process for each (a run checks
    cluster 0 twice).  A plain answer that is no integer is first asked of the compiled
    function's type: a trigger returning a float was warned of in replay and the monitor
    as deciding otherwise "on a near tie", before being refused for its type; now it is
    refused alone, naming the type and what is allowed (``check_returns``)."""
    if plain is None:
        check_returns(decl, "stop policy")
    if (decl.ref, params, at, compiled, plain) in _SAID:
        return
    _SAID.add((decl.ref, params, at, compiled, plain))
    warnings.warn(
        f"stop policy {decl.name} decides otherwise as plain Python (its .py_func) {at}: "
        f"compiled, {_answer(compiled)}; plain, {_answer(plain)}; "
        "numba's sums and libm may round a last bit otherwise than numpy, which flips a "
        "near tie, and so do fastmath=True, an integer overflow (int64 wraps, Python's "
        "integers grow) and a NaN the compiled code reads (docs/extending.md)",
        PlainPythonWarning, stacklevel=4)


@contextmanager
def _quiet():
    """numpy's notes on what numba does silently (an empty mean, an overflow) are not the
    caller's to print: the answers are compared instead."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


NUMBA_ONLY = object()
"""``plain_answer``'s answer where Python cannot run what numba compiles (``_numba_only``):
nothing to compare."""


def plain_answer(decl: Any, params: tuple, score: np.ndarray, loss: np.ndarray,
                 attained: np.ndarray, t_est_h: float, at: str) -> int | None | object:
    """``decl``'s plain-Python trigger asked about one prefix (read-only arrays of its
    ``e`` evaluations), answered as ``causal_trigger_nb`` reads the compiled one: ``e``
    for ``e``, 0 for 0, -1 for another integer; None for what is no integer;
    ``NUMBA_ONLY``; a ``ConfigError`` naming ``at`` (where: ``on cluster 0, job 3,
    evaluation 1``) if Python raises.  Called within ``_quiet()``."""
    py = decl.user.py_func
    try:
        r = py(score, loss, attained, t_est_h, *params)
    except Exception as exc:  # noqa: BLE001 - the user's code raised
        if _numba_only(exc):
            return NUMBA_ONLY  # a construct only compiled code runs: nothing to compare
        raise _refusal("stop policy", decl.name, at, exc, py) from None
    if not isinstance(r, numbers.Integral):
        return None
    e = score.shape[0]
    return 0 if r == 0 else (e if r == e else -1)


class PlainCheck:
    """``plain_answer`` beside each compiled answer a caller gets outside a run (replay,
    the live monitor) about a user policy ``policy`` (a ``PolicyConfig``), on its first
    ``MAX_CALLS`` calls (a monitor's job of thousands of evaluations is not checked to its
    end, nor is a training loop's every job): ``ask`` says whether to check the next
    call, and ``check`` asks the plain-Python version about the prefix the compiled one
    answered ``compiled`` (0, ``e``, -1) for, refusing where Python raises and warning
    once where the two differ.  Stops checking at a construct only compiled code runs.
    It holds the policy's config, not its declaration, so a monitor holding one pickles
    as before."""

    def __init__(self, policy: Any):
        self.policy, self.calls, self.off, self.said = policy, 0, False, False
        self.params = tuple(v for k, v in policy.values.items() if k != "scope")

    def ask(self) -> bool:
        return not self.off and self.calls < MAX_CALLS

    def check(self, score: np.ndarray, loss: np.ndarray, attained: np.ndarray,
              t_est_h: float, compiled: int, at: str) -> None:
        decl = self.policy.decl
        with _quiet():
            plain = plain_answer(decl, self.params, score, loss, attained, t_est_h, at)
        self.calls += 1
        if plain is NUMBA_ONLY:
            self.off = True
        elif plain != compiled and not self.said:
            self.said = True  # once: the calls after it may differ for the same reason
            _differs(decl, self.params, at, compiled, plain)


def check_scheduler_key(decl: Any, params: tuple[tuple[str, Any], ...], w: Any) -> None:
    """Ask ``decl``'s plain-Python key about cluster 0's jobs, as ``user_keys_driver``
    asked its compiled one, ``job_type`` as a ``JobTypeCode``: where Python raises, the
    compiled keys rest on a value Python has none for (or on ``job_type == "rlhf"``,
    False compiled), refused as a stop policy's is.  The keys themselves are not
    compared: a last bit of difference is expected of floats, and changes no order but
    on a tie.  ``params``: the scheduler's ``(name, value)`` pairs."""
    if w.n_clusters == 0 or int(w.cluster_ids[0]) != 0:
        return
    py = decl.user.py_func
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for j in range(min(w.n_jobs, MAX_CALLS)):
            try:
                py(*key_call(w, 0, j, params).plain)
            except Exception as exc:  # noqa: BLE001 - the user's code raised
                if _numba_only(exc):
                    return
                raise _refusal("scheduler key", decl.name, f"on cluster 0, job {j}", exc,
                               py) from None


def _refusal(what: str, name: str, at: str, exc: BaseException, py: Any) -> ConfigError:
    """The one line of a user function whose plain-Python version raised at ``at``."""
    made_up = ("int() of a NaN, an index past the prefix and math.log(0) give a value"
               if what == "stop policy" else "int() of a NaN and math.log(0) give a value, "
               "and job_type == \"rlhf\" is False")
    return ConfigError(
        f"{what} {name} raised in plain Python where its compiled code returned (its "
        f".py_func, {at}): {type(exc).__name__}: {_first_line(exc)} "
        f"({_where(exc, py)}); allowed: a function whose plain-Python version returns where "
        f"its compiled one does (compiled, {made_up}, not an error: docs/extending.md)")


def _answer(trig: int | None) -> str:
    return ("no stop" if trig == 0 else "an answer that is no integer" if trig is None else
            "an answer neither 0 nor the evaluation asked about" if trig < 0 else
            f"a stop at evaluation {trig}")


def _first_difference(decl: Any, params: tuple, w: Any, trigger_eval: np.ndarray,
                      in_scope: np.ndarray) -> tuple | None:
    """``(job, compiled answer, plain answer)`` of cluster 0's first job whose plain-Python
    answer differs (None: not an integer), or None; a ``ConfigError`` if Python raises."""
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
            r = plain_answer(decl, params, score[j, :e], loss[j, :e], attained[:e], t_est_h,
                             f"on cluster 0, job {j}, evaluation {e}")
            if r is NUMBA_ONLY:
                return None
            if r != 0:
                trig = r
                break
        if trig != int(trigger_eval[0, j]):
            return int(j), int(trigger_eval[0, j]), trig
    return None


def _text_in(x: Any) -> str | None:
    """The first text in ``x`` (a str, or a list or array of them), or None; as a plain
    ``str`` (bytes decoded; ``str`` of numpy's bytes named ``"b'rlhf'"``, and its repr of
    ``np.str_`` ``np.str_('rlhf')``, neither the text written nor a code's name)."""
    if isinstance(x, (str, bytes)):
        return str(x) if isinstance(x, str) else x.decode(errors="replace")
    if isinstance(x, (list, tuple, np.ndarray)):
        try:
            a = np.asarray(x)
        except ValueError:  # ragged: not an operand numpy compares with, nor text
            return None
        if a.dtype.kind in "US" and a.size:
            return _text_in(a.ravel()[0].item())
    return None


def _codes_not_text(text: str, what: str,
                    subject: str = 'jobs["job_type"] holds integer codes') -> TypeError:
    """The error of text compared with the job-type codes, naming the user's line (a
    scheduler key's refusal names it itself)."""
    frame, where = (None if subject == _A_CODE else sys._getframe(1)), ""
    while frame is not None:
        path = frame.f_code.co_filename
        if not os.path.realpath(path).startswith(library_dirs()) and not path.startswith("<"):
            where = f" ({os.path.basename(path)}, line {frame.f_lineno})"
            break
        frame = frame.f_back
    codes = ", ".join(f"{c.upper()} {i}" for i, c in enumerate(JOB_TYPE_LABELS))
    code = next((c.upper() for c in JOB_TYPE_LABELS if c == text.lower()), None)
    said = (f"compare with fastsim.kernels.codes.{code} ({codes})" if code else
            f"compare with a code of fastsim.kernels.codes ({codes})")
    return TypeError(f"{subject}, not text: {what} {text!r} is False for every job{where}; "
                     f"{said}")


class JobTypeCodes(np.ndarray):
    """``jobs["job_type"]`` as a metric gets it: the integer codes, whose ``==``, ``!=``
    or ``np.isin`` with text (``jobs["job_type"] == "rlhf"``) raises naming the codes,
    where the plain array answered False for every job, and the metric was silently
    wrong.  Every other operation gives what the plain array does, as a plain array."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if ufunc in (np.equal, np.not_equal) and any(map(_is_codes, inputs)):
            for x in inputs:
                if not _is_codes(x) and (text := _text_in(x)) is not None:
                    raise _codes_not_text(text, "==" if ufunc is np.equal else "!=")
        plain = tuple(x.view(np.ndarray) if isinstance(x, JobTypeCodes) else x
                      for x in inputs)
        if "out" in kwargs:
            kwargs["out"] = tuple(x.view(np.ndarray) if isinstance(x, JobTypeCodes) else x
                                  for x in kwargs["out"])
        return getattr(ufunc, method)(*plain, **kwargs)

    def __getitem__(self, key):
        got = super().__getitem__(key)
        # a scalar taken out (jobs["job_type"][c, j], a loop over a row): a numpy integer,
        # whose == "rlhf" was False for every job, unsaid
        return JobTypeCode(got) if isinstance(got, np.integer) and _is_codes(self) else got

    def tolist(self):
        plain = self.view(np.ndarray).tolist()
        return _coded(plain) if _is_codes(self) else plain

    def astype(self, dtype, *args, **kwargs):
        got = super().astype(dtype, *args, **kwargs)
        if _is_codes(self) and got.dtype.kind == "O":  # Python ints, each == "rlhf" False
            return np.asarray(np.frompyfunc(JobTypeCode, 1, 1)(self.view(np.ndarray)),
                              dtype=object)
        return got

    def __array_function__(self, func, types, args, kwargs):
        if func is np.isin and _is_codes(kwargs.get("element", args[0] if args else None)):
            tests = kwargs.get("test_elements", args[1] if len(args) > 1 else None)
            if not _is_codes(tests) and (text := _text_in(tests)) is not None:
                raise _codes_not_text(text, "np.isin of")
        return super().__array_function__(func, types, args, kwargs)


def coded_view(jobs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The per-job arrays as user code reads them (a metric, ``simulate``'s ``extract``):
    read-only, and ``job_type`` as ``JobTypeCodes``."""
    view = {k: readonly(a) for k, a in jobs.items()}
    if "job_type" in view:
        view["job_type"] = view["job_type"].view(JobTypeCodes)
    return view


def _is_codes(x: Any) -> bool:
    """Whether ``x`` holds the job-type codes: numpy keeps ``JobTypeCodes`` on what it makes
    of them (``np.choose(codes, ["lora", "dpo", "rlhf"])``'s labels, ``astype(str)``),
    whose comparison with text is right, and was refused naming their first label."""
    return isinstance(x, JobTypeCodes) and x.dtype.kind in "iu"


def _coded(x: Any) -> Any:
    """``tolist()``'s nested lists of the codes with each a ``JobTypeCode``."""
    return [_coded(v) for v in x] if isinstance(x, list) else JobTypeCode(x)


_A_CODE = "job_type is an integer code"


class JobTypeCode(int):
    """A job's ``job_type`` as a scheduler key's plain-Python version gets it
    (``check_scheduler_key``), and as a scalar taken out of ``JobTypeCodes``: the integer
    code, whose ``==`` or ``!=`` with text raises naming the codes; compiled, ``job_type ==
    "rlhf"`` is False for every job."""

    def __eq__(self, other):
        if isinstance(other, (str, bytes)):
            raise _codes_not_text(_text_in(other), "==", _A_CODE)
        return int(self) == other

    def __ne__(self, other):
        if isinstance(other, (str, bytes)):
            raise _codes_not_text(_text_in(other), "!=", _A_CODE)
        return int(self) != other

    __hash__ = int.__hash__


# ``user_keys_driver``'s call, ``key(t_est_h, gpus, job_type, arrival_h, *params)``: the
# job's inputs, each with the type its plain-Python version gets
KEY_INPUTS = (("t_est_h", float), ("gpus", int), ("job_type", JobTypeCode), ("arrival_h", float))


class KeyCall(NamedTuple):
    compiled: tuple  # the arguments as the driver passes them (the arrays' own scalars)
    plain: tuple  # the same as plain Python values, ``job_type`` a ``JobTypeCode``
    text: str  # ``t_est_h=..., gpus=..., ..., <param>=...``, to redo the call


def key_call(w: Any, c: int, j: int, params: tuple[tuple[str, Any], ...]) -> KeyCall:
    """A user scheduler key's call for cluster index ``c``, job ``j`` of ``w``, with the
    scheduler's ``(name, value)`` ``params``."""
    inputs = tuple(getattr(w, name)[c, j] for name, _ in KEY_INPUTS)
    values = tuple(v for _, v in params)
    plain = tuple(kind(x) for (_, kind), x in zip(KEY_INPUTS, inputs)) + values
    names = [name for name, _ in KEY_INPUTS] + [k for k, _ in params]
    return KeyCall(inputs + values, plain,
                   ", ".join(f"{k}={v!r}" for k, v in zip(names, plain)))


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
    frames = [(f.f_code.co_filename, n) for f, n in _frames(exc)]
    found = user_line(frames, own=os.path.realpath(py.__code__.co_filename))
    where, code = found or line_at(*frames[-1])  # none of the user's: the innermost there is
    return where + (f": {code}" if code else "")


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
