"""What a user's decision function (a stop policy's trigger, a scheduler's key) may not
do, checked when it is declared, before any workload exists.

Its arguments carry observations only (the information boundary is the drivers'
signature), but two things reach past them:

- numba's object mode (``with objmode(...)``, or ``@jit(forceobj=True)``) runs plain
  Python inside the compiled function, which can walk the interpreter's frames up to the
  workload and read its hidden truth (gold, peaks, hacking labels), or read a clock; so
  does a ctypes function numba calls that runs Python: a callback made of a Python
  function (``CFUNCTYPE(...)(f)``), the interpreter's C API (``ctypes.pythonapi``,
  ``Py*``), or one made from a bare address, which may be either (a shared library's
  C function, ``CDLL("libm.so.6").erf``, is none of these);
- a random number generator's state (``numpy.random``, ``random``): numba keeps one per
  thread, so in a parallel kernel the draws follow thread timing, and results changed
  from run to run and with the thread count;
- which thread runs it, or how many there are (``numba.get_thread_id``,
  ``numba.get_num_threads``): a decision by either changed with ``NUMBA_NUM_THREADS``;
- numba's on-disk cache (``@njit(cache=True)``), which keys compiled code by its own
  file alone: with a constant or a helper it imports from another file edited, the old
  machine code ran (and a sweep, whose hash saw the edit, computed new cells with it).

A user's metric is plain Python, kept to the last rule alone (``disk_cached``): the
``@njit`` functions it calls must not be cached on disk either.

All are found in the function's bytecode and in that of the user functions it calls
(library code, numpy's and numba's, is not followed).  Code that builds its way around
this (a C library of one's own, numba's extension API) is beyond what a check can see:
review it.
"""
from __future__ import annotations

import ctypes
import dis
import inspect
import types
from typing import Any, Callable, Iterator

_WITH = frozenset({"SETUP_WITH", "BEFORE_WITH", "SETUP_ASYNC_WITH", "BEFORE_ASYNC_WITH"})
_RANDOM = ("random", "numpy.random")
_THREADS = ("numba.np.ufunc.parallel",)  # get_thread_id, get_num_threads, ...
_MISSING = object()


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    """``code`` and the code of the functions defined inside it."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _named(fn: types.FunctionType, code: types.CodeType) -> Iterator[tuple[str, Any]]:
    """The globals and closure variables ``code`` loads (numba takes both in as
    constants), each with the attributes then loaded from it in turn (``np.random.rand``:
    ``np``, ``np.random``, ``np.random.rand``).  Following the chain, not pairing every
    global with every attribute name the code loads, keeps an attribute of an argument
    (``params.random``) from reading as ``np.random``."""
    scopes = {"LOAD_GLOBAL": fn.__globals__, "LOAD_NAME": fn.__globals__,
              "LOAD_DEREF": _closure(fn)}
    name, value = None, None
    for ins in dis.get_instructions(code):
        if ins.opname in scopes:
            scope = scopes[ins.opname]
            name, value = (ins.argval, scope[ins.argval]) if ins.argval in scope else (None, None)
        elif ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and name is not None:
            name, value = f"{name}.{ins.argval}", getattr(value, ins.argval, _MISSING)
            if value is _MISSING:
                name = None
        else:
            name = None
        if name is not None:
            yield name, value


def loaded_names(fn: types.FunctionType) -> Iterator[tuple[str, Any]]:
    """Each global and closure variable the code of ``fn`` (and of the functions defined
    in it) loads, and each attribute loaded from it in turn, with its value (``_named``):
    ``helpers``, ``helpers.f`` for ``helpers.f(x)``."""
    for code in _codes(fn.__code__):
        yield from _named(fn, code)


def loaded_arguments(fn: types.FunctionType) -> frozenset[str]:
    """The names of ``fn``'s arguments that its code (or a function defined in it) loads:
    what it can read of what it is handed, whatever it declares."""
    code = fn.__code__
    args = set(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
    found = set()
    for inner in _codes(code):
        for ins in dis.get_instructions(inner):
            if ins.opname.startswith("LOAD_FAST") or ins.opname in ("LOAD_DEREF", "LOAD_CLOSURE"):
                found.update(ins.argval if isinstance(ins.argval, tuple) else (ins.argval,))
    return frozenset(found & args)


def _closure(fn: types.FunctionType) -> dict[str, Any]:
    """``fn``'s closure variables by name (an empty cell, not yet assigned, left out)."""
    found = {}
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            found[name] = cell.cell_contents
        except ValueError:
            pass
    return found


def _is_from(value: Any, modules: tuple[str, ...]) -> bool:
    """One of ``modules`` (or a submodule), one of their functions, or a bound method of
    an object of theirs (a generator's)."""
    def in_modules(name: Any) -> bool:
        return isinstance(name, str) and any(name == m or name.startswith(m + ".")
                                             for m in modules)

    if inspect.ismodule(value):
        return in_modules(value.__name__)
    owner = getattr(value, "__self__", None)
    return (in_modules(getattr(value, "__module__", None))
            or (owner is not None and in_modules(type(owner).__module__)))


def _runs_python(value: Any) -> bool:
    """Whether ``value`` is a ctypes function that runs Python when compiled code calls
    it: one not looked up in a shared library (a callback of a Python function holds its
    thunk; one made from an address holds nothing), or one of the interpreter's C API."""
    if not isinstance(value, ctypes._CFuncPtr):
        return False
    libraries = [o for o in (value._objects or {}).values() if isinstance(o, ctypes.CDLL)]
    return (not libraries or any(isinstance(o, ctypes.PyDLL) for o in libraries)
            or getattr(value, "__name__", "").startswith(("Py", "_Py")))


def _disk_cached(dispatcher: Any) -> bool:
    """Whether an ``@njit`` function keeps its compiled code on disk (``cache=True``)."""
    cache = getattr(dispatcher, "_cache", None)
    return cache is not None and type(cache).__name__ != "NullCache"


def _reached(fn: Any, is_users: Callable[[Any], bool]) -> Iterator[tuple[Any, types.FunctionType]]:
    """``fn`` and each user function it calls, in turn, as (the object called, its Python
    function): each is yielded before the functions it names are looked for, so a check
    that stops at the first finding reads no further.  ``is_users(obj)``: whether a
    function is the user's code (followed) rather than a library's."""
    todo, done, owners = [fn], set(), set()
    while todo:
        item = todo.pop()
        # a method (``SCALER.apply(v)``) is its function, and what its object holds
        # (``self.fn``) is reached from it: both were passed over, and an ``@njit(cache=
        # True)`` function a method called kept its machine code after an edit elsewhere.
        # Each object once: one holding a method of its own (``self.fn = self.apply``)
        # was followed again at every visit of that method, for ever.
        owner = getattr(item, "__self__", None)
        if owner is not None and id(owner) not in owners and not inspect.ismodule(owner) \
                and is_users(type(owner)):
            owners.add(id(owner))
            todo += [v for v in getattr(owner, "__dict__", {}).values()
                     if callable(getattr(v, "py_func", v)) and is_users(v)]
        py = getattr(item, "py_func", item)
        py = getattr(py, "__func__", py)
        if not isinstance(py, types.FunctionType) or id(py) in done:
            continue
        done.add(id(py))
        yield item, py
        for code in _codes(py.__code__):
            for _, value in _named(py, code):
                if callable(getattr(value, "py_func", value)) and is_users(value):
                    todo.append(value)


def _object_mode(dispatcher: Any) -> bool:
    """Whether a numba function is compiled in object mode as a whole (``@jit(forceobj=
    True)``): plain Python, as a ``with objmode`` block is."""
    return bool(getattr(dispatcher, "targetoptions", {}).get("forceobj"))


def _cached_text(item: Any, py: types.FunctionType) -> str | None:
    if _disk_cached(item):
        return (f"{py.__qualname__} is compiled with cache=True (numba's cache notices no "
                "edit outside its own file)")
    return None


def disk_cached(fn: Any, is_users: Callable[[Any], bool]) -> str | None:
    """Which of ``fn`` and the user functions it calls is compiled with ``cache=True``, in
    words; None if none.  The one rule of ``impurity`` a metric keeps too: it is plain
    Python, which may use a with block (``np.errstate``) or a seeded generator of its own,
    but an ``@njit(cache=True)`` function it calls ran the machine code of a constant
    another file had before an edit."""
    for item, py in _reached(fn, is_users):
        if (found := _cached_text(item, py)) is not None:
            return found
    return None


def impurity(fn: Any, is_users: Callable[[Any], bool]) -> str | None:
    """What in ``fn`` (an ``@njit`` function), or in a user function it calls, uses object
    mode (or a ctypes function that runs Python), a random generator or numba's thread
    functions, or is cached on disk, in words;
    None if nothing.
    ``is_users(obj)``: whether a function is the user's code (followed) rather than a
    library's."""
    for item, py in _reached(fn, is_users):
        if (found := _cached_text(item, py)) is not None:
            return found
        if _object_mode(item):  # it was declared, and the driver failed to type its call
            return f"{py.__qualname__} is compiled in object mode (forceobj=True)"
        for code in _codes(py.__code__):
            if any(i.opname in _WITH for i in dis.get_instructions(code)):
                return f"{py.__qualname__} has a with block (numba's object mode)"
            for name, value in _named(py, code):
                if _is_from(value, _RANDOM):
                    return f"{py.__qualname__} uses {name} (a random generator's state)"
                if _is_from(value, _THREADS):
                    return f"{py.__qualname__} uses {name} (which thread runs it, or how many)"
                if _runs_python(value):
                    return (f"{py.__qualname__} uses {name} (a ctypes function that runs "
                            "Python, as object mode does)")
    return None
