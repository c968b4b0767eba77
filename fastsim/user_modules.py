"""A user's modules: where they are, and importing the ``MODULE:ATTR`` that names a
user's stop policy, scheduler key or metric, with one ``ConfigError`` that says what went
wrong (a misspelt module, a module that is not on the import path, a name it does not
declare, a declaration of another kind, a module that raised while it was imported); and
the line of the script run as ``__main__`` that a worker process importing it would run
again."""
from __future__ import annotations

import ast
import contextlib
import contextvars
import inspect
import os
import sys
import sysconfig
from functools import lru_cache
from typing import Any

from fastsim.errors import ConfigError, did_you_mean
from fastsim.resources import package_folders


def user_line(frames: list[tuple[str, int]], own: str | None = None) -> tuple[str, str] | None:
    """``("FILE, line N", CODE)`` of the innermost of ``frames`` (``(path, line)``, outermost
    first) in the user's files (not Python's, an installed package's or fastsim's; ``own``:
    a file that counts as the user's anyway), None where none is."""
    mine = [(path, n) for path, n in frames if os.path.realpath(path) == own
            or not os.path.realpath(path).startswith(library_dirs())]
    return line_at(*mine[-1]) if mine else None


def line_at(path: str, line: int) -> tuple[str, str]:
    """``("FILE, line N", CODE)``: where a refusal says a line of ``path`` is, and its code."""
    import linecache

    return f"{os.path.basename(path)}, line {line}", linecache.getline(path, line).strip()


@lru_cache(maxsize=None)
def library_dirs() -> tuple[str, ...]:
    """Folders of installed packages, of Python itself and of fastsim's own package: a
    user function's result never depends on an edit there that a sweep should notice (a
    version change is the user's; fastsim's source is recorded on its own, as
    ``resources.package_sha256``).  fastsim's package folders, not the folder above
    them: in an editable install that is the checkout, where users keep their modules
    (``PYTHONPATH=. fastsim sweep``), whose edits then went unnoticed.  Read on first
    use, once fastsim is imported."""
    dirs = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    dirs |= {str(d) for folders in package_folders().values() for d in folders}
    return tuple(os.path.realpath(d) + os.sep for d in dirs)


def user_module_names() -> list[str]:
    """The modules a ``MODULE:ATTR`` can name from a user's files: those of the import
    path's folders outside ``library_dirs`` (Python's own, installed packages', fastsim's),
    where ``import_ref`` imports a user's module from; offered for a misspelt one."""
    import pkgutil

    dirs = [d for d in dict.fromkeys(os.path.abspath(p or ".") for p in sys.path)
            if os.path.isdir(d) and not (os.path.realpath(d) + os.sep).startswith(library_dirs())]
    return sorted({m.name for m in pkgutil.iter_modules(dirs)})


# The files being read that name user modules (a sweep file): a module beside one is
# the user's too (``files_naming_modules``).
_NAMING_FILES: contextvars.ContextVar[tuple[str, ...]] = \
    contextvars.ContextVar("naming_files", default=())


@contextlib.contextmanager
def files_naming_modules(path: str):
    """While ``path`` (a sweep file) is read, a module it names that is not found but sits
    beside it gets ``import_hint``'s hint, as one in the current directory does:
    ``fastsim sweep exp/mine.toml`` beside ``exp/mine.py`` said only "No module named"."""
    token = _NAMING_FILES.set(_NAMING_FILES.get() + (str(path),))
    try:
        yield
    finally:
        _NAMING_FILES.reset(token)


def import_hint(module: str, exc: Exception) -> str:
    """A hint for a user module that is not found but sits in the current directory,
    which the ``fastsim`` command does not import from, or beside the sweep file being
    read: ``"; mine.py is in ..."``."""
    top = module.split(".")[0]
    if not (isinstance(exc, ModuleNotFoundError) and exc.name == top):
        return ""
    on_path = {os.path.abspath(p or ".") for p in sys.path}
    if os.getcwd() not in on_path and os.path.isfile(f"{top}.py"):
        return (f"; {top}.py is in the current directory, which is not on the import path: "
                f"put its directory on PYTHONPATH (PYTHONPATH=. fastsim ...)")
    for path in _NAMING_FILES.get():
        beside = os.path.dirname(os.path.abspath(path))
        if beside not in on_path and os.path.isfile(os.path.join(beside, f"{top}.py")):
            return (f"; {top}.py is beside {path}, in a directory not on the import path: "
                    f"put that directory on PYTHONPATH (PYTHONPATH={os.path.relpath(beside)} "
                    "fastsim ...)")
    return ""


def _near_module(module: str, exc: Exception) -> str:
    """`` (did you mean mydetectors?)`` for a user module not found (``mydetector``): the
    nearest module of the user's files on the import path (``user_module_names``)."""
    top = module.split(".")[0]
    if not (isinstance(exc, ModuleNotFoundError) and exc.name == top):
        return ""  # found: a module it imports is missing, or it lacks ATTR
    return did_you_mean(top, user_module_names())


def wrong_kind(ref: str, obj: Any, wanted: str, made_by: str) -> str:
    """`` (mykeys:gpu_h_first is a scheduler key, not a stop policy)``: ``obj``, named by
    ``ref`` where ``wanted`` goes (a ``DECLARED_AS``: "a stop policy", "a scheduler key",
    "a metric"), is a declaration of another kind; or a function left without its
    declaration ``made_by`` (``@stop_policy``), which a bare "not a declared policy" read
    as a wrong name; "" when it is neither."""
    kind = getattr(type(obj), "DECLARED_AS", None)
    if isinstance(kind, str):
        return f" ({ref} is {kind}, not {wanted})" if kind != wanted else ""
    if hasattr(obj, "py_func") or inspect.isfunction(obj):
        jitted = hasattr(obj, "py_func")
        needs_jit = wanted != "a metric"  # a metric runs as plain Python, the others compiled
        what = "an @njit function" if jitted else "a plain function"
        if jitted == needs_jit:
            return f" ({ref} is {what} with no {made_by}(...) over it)"
        return (f" ({ref} is {what}; {wanted} is {'an @njit' if needs_jit else 'a plain'} "
                f"function with {made_by}(...) over it)")
    return ""


def _declared_in(module: str, exc: BaseException) -> str:
    """What a user module that imported but lacks the name asked for does declare:
    ``"; mine declares below_best (a stop policy)"`` (a typo, or a function renamed)."""
    mod = sys.modules.get(module)
    if not isinstance(exc, AttributeError) or mod is None:
        return ""
    # a declaration's class says what it declares (StopPolicy, Scheduler, Metric): this
    # module, which they import, never imports them
    found = [f"{name} ({type(obj).DECLARED_AS})" for name, obj in vars(mod).items()
             if not name.startswith("_")
             and isinstance(getattr(type(obj), "DECLARED_AS", None), str)]
    if not found and module == "__main__":
        # a script's own spec (docs/extending.md) given to the command line, whose
        # __main__ is fastsim's: "__main__ declares no ..." read as a word on the script
        return ("; __main__ is the program running here, which declares none: a script's "
                "function is __main__:FUNCTION in that script's own process only (not on the "
                "command line, nor on a Dask worker); elsewhere name the module that "
                "declares it, MODULE:FUNCTION")
    return (f"; {module} declares {', '.join(found)}" if found else
            f"; {module} declares no @stop_policy, @scheduler_key or @cluster_metric")


def import_ref(field: str, ref: str, allowed: str):
    """The object ``MODULE:ATTR`` (``ref``, given as ``field``) names.  A module name that
    is not one, a module that cannot be found or lacks ``ATTR``, and a module that raises
    while it is imported (a syntax error, an exception at its top level, an import of its
    own that fails) are each one ``ConfigError`` naming ``field``; the last gave the
    user's traceback, and names the user's line."""
    import importlib

    module, _, attr = ref.partition(":")
    if not all(part.isidentifier() for part in module.split(".")):  # ":x", ".x:y"
        raise ConfigError(f"{field}={ref!r}: {module!r} is not a module name; allowed: "
                          f"{allowed}")
    try:
        found = importlib.import_module(module)
    except ImportError as exc:
        if not _not_found(module, exc):  # an import of the module's own failed: its line
            raise _raised_importing(field, ref, module, exc) from None
        raise ConfigError(f"{field}={ref!r} cannot be imported ({exc})"
                          f"{_near_module(module, exc)}; allowed: {allowed}"
                          f"{import_hint(module, exc)}") from None
    except ConfigError as exc:  # a declaration the module makes was refused (a name taken)
        raise ConfigError(f"{field}={ref!r}: importing {module}, {_user_line(exc)}: "
                          f"{exc}{_other_declaration(exc, allowed)}") from None
    except Exception as exc:  # noqa: BLE001 - the user's module raised while it was imported
        raise _raised_importing(field, ref, module, exc) from None
    try:
        return getattr(found, attr)
    except AttributeError as exc:
        raise ConfigError(f"{field}={ref!r} cannot be imported ({exc}); allowed: {allowed}"
                          f"{_declared_in(module, exc)}") from None


DECLARATIONS = ("@stop_policy", "@scheduler_key", "@cluster_metric")


def _other_declaration(exc: ConfigError, allowed: str) -> str:
    """`` (line 3 declares with @stop_policy; this place takes a @scheduler_key)``, where
    the refused declaration (its decorator: ``exc.declared_with``, set by
    ``fastsim.registry.declaring``) is of another kind than ``allowed`` asks for: a key
    declared with @stop_policy was refused for its arguments, "allowed: (scores, losses,
    attained_h, t_est_h, alpha)", which told its author to rewrite the key as a policy."""
    wanted = [d for d in DECLARATIONS if d in allowed]
    made = getattr(exc, "declared_with", None)
    if len(wanted) != 1 or made is None or made == wanted[0]:
        return ""
    return (f" (line {_user_frame(exc).lineno} declares with {made}; this place takes a "
            f"{wanted[0]})")


def _not_found(module: str, exc: ImportError) -> bool:
    """Whether ``exc`` says ``module`` itself (or a package holding it) is not there, rather
    than that an import the module makes failed: ``from fastsim.registry import
    stop_polciy`` in mine.py was "--policy=mine:f cannot be imported", offering the
    built-in policies' names and not the module's line."""
    return isinstance(exc, ModuleNotFoundError) and isinstance(exc.name, str) and (
        module == exc.name or module.startswith(exc.name + "."))


def _raised_importing(field: str, ref: str, module: str, exc: BaseException) -> ConfigError:
    """The refusal of a user module that raised while it was imported (a syntax error, an
    exception at its top level, an import of its own that failed), naming its line."""
    if isinstance(exc, SyntaxError):
        where, what = f"{exc.filename}, line {exc.lineno}", f"SyntaxError: {exc.msg}"
    else:
        where = _user_line(exc)
        what = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return ConfigError(f"{field}={ref!r}: importing {module} raised {what[:200]} ({where}); "
                       "allowed: a module that imports")


def _user_line(exc: BaseException) -> str:
    """``FILE, line N`` of ``_user_frame(exc)``."""
    frame = _user_frame(exc)
    return f"{frame.filename}, line {frame.lineno}"


def _user_frame(exc: BaseException):
    """The last frame of ``exc``'s traceback outside fastsim's own folders and Python's
    import machinery: the user's line that called into fastsim (a ``@cluster_metric``
    declaring a taken name), not fastsim's line that refused it."""
    import traceback

    ours = tuple(os.path.join(f, "") for fs in package_folders().values() for f in fs)
    frames = traceback.extract_tb(exc.__traceback__)
    theirs = [f for f in frames if not f.filename.startswith(ours)
              and not f.filename.startswith("<frozen ")]
    return (theirs or frames)[-1]


def unguarded_main_line() -> str | None:
    """``SCRIPT:LINE`` of the statement of the script run as ``__main__`` that is running
    now, if no ``if __name__ == "__main__":`` holds it, else None: a worker process that
    multiprocessing spawns runs the script again (as ``__mp_main__``), and that statement
    with it (a sweep on a local Dask cluster started in each worker, which failed with a
    page of tracebacks).  None where no worker runs the script again
    (``spawned_workers_rerun``), or Dask's workers forked."""
    import dask

    main = sys.modules.get("__main__")
    path = spawned_workers_rerun(main)
    if (path is None or not os.path.isfile(path)
            or dask.config.get("distributed.worker.multiprocessing-method", "spawn") == "fork"):
        return None
    line = _script_line(sys._getframe(), vars(main), path)
    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):  # cannot tell: not refused
        return None
    if line is None or main_guarded(tree, line):
        return None
    return f"{path}:{line}"


def _script_line(frame, main_globals: dict, path: str) -> int | None:
    """The line of the outermost frame from ``frame`` out that runs the top level of the
    script ``path`` as ``__main__``, or None.  Its file is checked, not only its globals:
    a runner such as ``python -m pdb`` clears ``__main__``'s dict and runs the script in
    it, so the runner's own ``<module>`` frame shares those globals and is outermost."""
    line = None
    while frame is not None:
        code = frame.f_code
        if (code.co_name == "<module>" and frame.f_globals is main_globals
                and os.path.realpath(code.co_filename) == os.path.realpath(path)):
            line = frame.f_lineno
        frame = frame.f_back
    return line


def spawned_workers_rerun(main) -> str | None:
    """The file of module ``main`` (``__main__``) that a process multiprocessing spawns runs
    again as ``__mp_main__``, or None: the rule of ``multiprocessing.spawn`` (its
    ``get_preparation_data`` and ``_fixup_main_from_name``), which runs no package's or
    directory's ``__main__.py`` (``python -m pkg``, ``python DIR/``) and no file-less
    ``__main__`` (a notebook, ``python -c``).  Its own function is not called: it fixes
    the process's start method as a side effect."""
    name = getattr(getattr(main, "__spec__", None), "name", None)
    path = getattr(main, "__file__", None)
    if name == "__main__" or (name or "").endswith(".__main__") or not path:
        return None
    if name is None and os.path.splitext(os.path.basename(path))[0] == "ipython":
        return None  # multiprocessing treats IPython's launch script as a __main__.py
    return os.path.abspath(path)


def main_guarded(tree, line: int) -> bool:
    """Whether the statement at ``line`` of module ``tree`` is one a run as ``__mp_main__``
    skips: in the body of ``if __name__ == "__main__":`` (either side first, or one term
    of an ``and``), in the ``else:`` of ``if __name__ != "__main__":``, or under
    ``match __name__: case "__main__":``.  Other forms are not recognised (refused)."""
    for node in ast.walk(tree):
        spans = []
        if isinstance(node, ast.If):
            terms = (node.test.values if isinstance(node.test, ast.BoolOp)
                     and isinstance(node.test.op, ast.And) else [node.test])
            if any(_compares_main(t, ast.Eq) for t in terms):
                spans.append(node.body)
            if _compares_main(node.test, ast.NotEq) and node.orelse:
                spans.append(node.orelse)
        elif isinstance(node, ast.Match) and _is_name(node.subject):
            spans += [case.body for case in node.cases
                      if isinstance(case.pattern, ast.MatchValue) and case.guard is None
                      and _is_main(case.pattern.value)]
        if any(body[0].lineno <= line <= body[-1].end_lineno for body in spans):
            return True
    return False


def _compares_main(test, op) -> bool:
    """Whether ``test`` is ``__name__ OP "__main__"``, either side first."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], op)):
        return False
    a, b = test.left, test.comparators[0]
    return (_is_name(a) and _is_main(b)) or (_is_main(a) and _is_name(b))


def _is_name(node) -> bool:
    return isinstance(node, ast.Name) and node.id == "__name__"


def _is_main(node) -> bool:
    return isinstance(node, ast.Constant) and node.value == "__main__"
