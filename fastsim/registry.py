"""One declaration per scheduler and stop policy; everything else derives from it.

A declaration says what a thing is called, which parameters it takes (type, range,
default, unit, help), what it needs and can do (evaluations needed, streaming form,
hidden truth, preemption), which kernel runs it and how tables and figures label it.
Config parsing and validation, ``--help``, sweep canonicalisation, replay, the live
monitor, figure labels and the parametrised tests read these declarations; nothing
else lists the policies or schedulers.

The spec grammar has one parser, ``parse_spec``::

    NAME[:key=value,...]           a registered name (built-in, or registered by a module)
    MODULE:ATTR[:key=value,...]    a declaration importable as MODULE.ATTR (user code)

A bare key (``fifo:backfill``) is ``key=true``.  Unknown and repeated keys are refused,
as are spaces, empty parts (``evalstop:``, ``k=2,``) and numbers not written in ASCII
digits (``+2``, ``0x2``, ``1_000``; ``2.0`` for an integer).

User code declares a stop policy with ``@stop_policy`` over an ``@njit`` trigger
function and a scheduler with ``@scheduler_key`` over an ``@njit`` static key function
(docs/extending.md).  Their specs name them by import path, so a Dask worker resolves
them by importing the module, and their canonical form carries a hash of their source,
so an edited function never reuses stored sweep cells.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import inspect
import math
import numbers
import os
import re
import types
import unicodedata
from dataclasses import dataclass, replace
from functools import lru_cache, partial
from typing import Any, Callable, ClassVar, Iterable, Iterator

from fastsim import defaults as D
from fastsim.errors import NJIT_ALLOWED, ConfigError, did_you_mean, user_code
from fastsim.kernels import codes as K
from fastsim.purity import disk_cached, impurity, loaded_names
from fastsim.user_modules import import_ref, library_dirs, user_module_names, wrong_kind
from fastsim.values import (NumberTextError, float_or_nan, is_integer, is_number,
                            number_text, plain, plain_scalar)

def flag_value(text: str) -> bool:
    """A flag's text: ``true`` or ``false`` in any case (``backfill=True`` as Python writes
    it), else ``ValueError``.  Nothing else: ``yes`` or ``1`` would be a second grammar that
    the error messages, TOML and the API do not have.  A spec's bare key (``fifo:backfill``)
    is true before this is asked."""
    t = text.strip().lower()
    if t not in ("true", "false"):
        raise ValueError(text)
    return t == "true"


INT_MAX = 2**31 - 1  # the largest integer parameter (kernels take int64)
# The most numbers a ``floats`` parameter holds (Tiresias' queue thresholds): each one is a
# queue and a scheduling point per job crossing it (``max_points_nb``), so 20,000 made a
# run 20 times slower, and a sweep file's million took minutes to validate before any work.
MAX_FLOATS = 100

@dataclass(frozen=True)
class Param:
    """A declared parameter: ``kind`` is ``int``, ``float``, ``bool``, ``choice`` or
    ``floats`` (increasing positive numbers, written ``A/B/C`` in a spec)."""

    name: str
    kind: str
    default: Any
    lo: float = -math.inf
    hi: float = math.inf
    lo_open: bool = False
    hi_open: bool = False
    choices: tuple = ()
    unit: str = ""
    help: str = ""
    field: str = ""  # the config field it fills (defaults to ``name``)

    @property
    def target(self) -> str:
        return self.field or self.name

    def allowed(self) -> str:
        """What the parameter accepts, in words (used in every error message)."""
        if self.kind == "bool":
            return "true or false"
        if self.kind == "choice":
            return "one of " + ", ".join(map(str, self.choices))
        if self.kind == "floats":
            return (f"increasing positive numbers A/B/..., at most {MAX_FLOATS}"
                    + (f" ({self.unit})" if self.unit else ""))
        what = "an integer" if self.kind == "int" else "a number"
        top = self._hi()
        lo = "(" if self.lo_open or math.isinf(self.lo) else "["  # no "[-inf"
        hi = ")" if self.hi_open or math.isinf(top) else "]"
        return (f"{what} in {lo}{_fmt(self.lo)}, {_fmt(top)}{hi}"
                + (f" ({self.unit})" if self.unit else ""))

    def _fail(self, where: str, value: Any) -> ConfigError:
        return ConfigError(f"{where}{self.name}={value!r} is invalid; allowed: "
                           f"{self.allowed()}")

    def from_text(self, text: str, where: str = "") -> Any:
        """A value from its spec text (``k=3``, ``backfill``, ``thresholds=16/64``).

        Numbers are read as every number given as text is (``fastsim.values.number_text``:
        ASCII digits only; Python's ``int`` and ``float`` would also take ``+2``, ``1_000``
        and ``٢``)."""
        t = text
        if t == "" and self.kind != "bool":  # read "k=", a value left out
            raise ConfigError(f"{where}{self.name} with no value is invalid; allowed: "
                              f"{self.name}=VALUE, {self.allowed()}; only a true/false "
                              "flag may be given bare")
        try:
            if self.kind == "bool":
                value: Any = t == "" or flag_value(t)  # "": the bare key
            elif self.kind == "int":
                value = number_text(t, integer=True)
            elif self.kind == "float":
                value = number_text(t)
            elif self.kind == "floats":
                value = tuple(number_text(x) for x in t.split("/"))
            else:
                value = t
        except NumberTextError as exc:
            said = f"{t!r}: {exc}" if self.kind == "floats" else str(exc)
            each = "each " if self.kind == "floats" else ""
            raise ConfigError(f"{where}{self.name}={said}; allowed: {self.allowed()}, "
                              f"{each}{exc.written}") from None
        except ValueError:
            raise self._fail(where, t) from None
        return self.check(value, where)

    def check(self, value: Any, where: str = "") -> Any:
        """``value`` validated and normalised (lists become tuples, numpy scalars Python's
        numbers, as a config's own fields are), or ConfigError."""
        if self.kind == "floats" and not fits_floats(value):  # before a million are read
            raise self._fail(where, value)
        v = plain(value)
        if self.kind == "bool":
            ok = isinstance(v, bool)
        elif self.kind == "int":
            ok = (isinstance(v, int) and not isinstance(v, bool) and -2**63 <= v < 2**63
                  and self._in_range(v))  # the kernels take it as an int64
        elif self.kind == "float":
            ok = is_number(v) and self._in_range(v)
            if ok and v == 0:  # -0 is 0: one cell and label (threshold=-0 ran as a cell apart)
                v = abs(v)
        elif self.kind == "floats":
            v = tuple(v) if isinstance(v, (list, tuple)) else v
            ok = (isinstance(v, tuple) and 1 <= len(v) <= MAX_FLOATS
                  and all(is_number(x) and x > 0 for x in v)
                  and all(a < b for a, b in zip(v, v[1:])))
        else:
            ok = v in self.choices
        if not ok:
            raise self._fail(where, value)
        return v

    def _hi(self) -> float:
        # Integer parameters reach the kernels as int64; no run has 2^31 evaluations.
        return min(self.hi, INT_MAX) if self.kind == "int" else self.hi

    def _in_range(self, v: float) -> bool:
        above = v > self.lo if self.lo_open else v >= self.lo
        below = v < self._hi() if self.hi_open else v <= self._hi()
        return above and below

    def text(self, value: Any) -> str:
        """The canonical spec text of ``value``."""
        if self.kind == "floats":
            return "/".join(f"{x:g}" for x in value)
        if self.kind == "float":
            return f"{value:g}"
        return str(value).lower() if self.kind == "bool" else str(value)


def fits_floats(value: Any) -> bool:
    """Whether ``value``, if it has a length, holds at most ``MAX_FLOATS`` items."""
    try:
        return len(value) <= MAX_FLOATS
    except TypeError:  # no length: the check that follows names what it is
        return True


def check_returns(decl: Any, what: str) -> None:
    """A user function compiled to return the wrong kind of value is refused naming the
    type.  A stop policy's trigger returns an integer: a bool's True was read as
    evaluation 1 (every job stopped there), and a float was taken wherever it happened to
    equal the prefix's length.  A scheduler key returns a number: an array failed in
    numba's typing of the engine's key array, a message that named neither.  Checked
    after the drivers were compiled, when numba has typed it for their arguments."""
    from numba.core import types  # here: numba is imported by then, the registry need not

    if what == "stop policy":
        kinds, allowed = (types.Integer,), ("an integer, the 1-based evaluation at which it "
                                            "stops the job, or 0")
    else:  # not a complex number: the engine orders real keys
        kinds = (types.Integer, types.Float, types.Boolean)
        allowed = "a real number, the job's key (smaller first)"
    for sig in decl.user.nopython_signatures:
        if not isinstance(sig.return_type, kinds):
            raise ConfigError(f"{what} {decl.name} returns {sig.return_type}"
                              f"{def_line(decl.user.py_func)}; allowed: {allowed}")


def def_line(fn: Callable) -> str:
    """`` (FILE, line N: def f(...):)``, where a user function is defined: a refusal of
    what the whole function does (the type it returns, from whichever return) points
    there, as one of a line it runs points at that line; empty where the source is not
    to be had (a function made by exec)."""
    try:
        lines, start = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return ""
    for i, line in enumerate(lines):  # past the decorators
        if line.lstrip().startswith("def "):
            return (f" ({os.path.basename(fn.__code__.co_filename)}, line {start + i}: "
                    f"{line.strip()})")
    return ""


@contextlib.contextmanager
def calling(decl: Any, what: str):
    """``user_code`` around a driver's calls of a user function: one that failed because
    it returns the wrong kind of value (a tuple, a complex key, None on some path) is said
    so (``check_returns``), not as the operator of the driver's that numba could not type
    for it (``ne(Tuple(...), Literal[int](0))``) or the conversion that failed
    (``expected int64, got None``)."""
    try:
        with user_code(what, decl.name, where=lambda: def_line(decl.user.py_func)):
            yield
    except ConfigError as exc:
        if re.search(r" failed: (TypingError|TypeError): ", str(exc)):
            check_returns(decl, what)
        raise


def trigger_error(name: str, values: dict, broke: str = "") -> str:
    """What a user stop policy that broke its contract is told
    (``kernels.stops.causal_trigger_nb``); ``broke`` says where (``broken_at``)."""
    given = ",".join(f"{k}={v}" for k, v in values.items())  # as a spec writes them
    return (f"stop policy {name} answered a prefix of a job's series with neither 0 nor the "
            "evaluation the prefix ends at, or stopped a job at or before its lookback "
            f"(run as {name}:{given}){'; ' + broke if broke else ''}; allowed: 0, or the "
            "prefix's last evaluation (it decides online, on what it has seen: "
            "docs/extending.md)")


def broken_at(decl: Any, params: tuple, job: str, trig: int, series: tuple) -> str:
    """Where a user policy broke its contract on ``job`` (its name in the refusal), whose
    trigger came out as ``trig``: the answer it gave and to which prefix, asked again as
    ``causal_trigger_nb`` asks (NaN past the prefix); or its stop at ``trig`` that its
    lookback puts before the first evaluation.  A refusal that named neither left the
    user to find the job and the answer by hand.  ``series``: the job's scores, losses,
    attained services and duration estimate."""
    import numpy as np

    if trig > 0:
        back = decl.lookback_of(dict(zip(decl.param_names, params)))
        return f"it stopped {job} at evaluation {trig}, at or before its lookback of {back}"
    score, loss, attained, t_est = series
    n = score.shape[0]
    seen = np.full((3, n + 1), np.nan)
    for e in range(1, n + 1):
        seen[:, e - 1] = score[e - 1], loss[e - 1], attained[e - 1]
        answer = decl.user(seen[0, :e], seen[1, :e], seen[2, :e], float(t_est), *params)
        if answer != 0:
            first = "first evaluation" if e == 1 else f"first {e} evaluations"
            return f"it answered {answer} to the {first} of {job}"
    return ""




class _Exact(float):
    """A float whose ``:g`` keeps every digit the value needs (``0.6500001``, not
    ``0.65``), so that two parameter values never print as one label."""

    def __format__(self, spec: str) -> str:
        short = format(float(self), spec)
        if spec == "g" and math.isfinite(self) and float(short) != float(self):
            return repr(float(self))
        return short


def exact_text(x: float) -> str:
    """``x`` as ``:g`` writes it, with every digit it needs (``_Exact``)."""
    return format(_Exact(x), "g")


def _exact(values: dict[str, Any]) -> dict[str, Any]:
    return {k: _Exact(v) if isinstance(v, float) else
            tuple(_Exact(x) for x in v) if isinstance(v, tuple) else v for k, v in values.items()}


def _fmt(x: float) -> str:
    if isinstance(x, int):
        return str(x)
    return "inf" if math.isinf(x) and x > 0 else "-inf" if math.isinf(x) else f"{x:g}"


# --------------------------------------------------------------------------- the grammar

_SPEC_FORM = "NAME or NAME:key=value,... with no white space"
_BLANK_NAMES = {" ": "a space", "\t": "a tab", "\n": "a line break", "\r": "a carriage return"}


def _blank_name(c: str) -> str:
    """What the white-space character ``c`` is, in words: a spec's line break was called
    'a space' beside its echo ``x\\ny``."""
    if c in _BLANK_NAMES:
        return _BLANK_NAMES[c]
    name = unicodedata.name(c, "white-space character").lower()
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name} (U+{ord(c):04X})"


def parse_spec(spec: Any, what: str) -> tuple[str, dict[str, str]]:
    """``(name, {key: text})`` of a spec; ``name`` is a registered name or ``MODULE:ATTR``.

    Refuses an empty spec, white space (a space, a tab, a line break, ...), an empty part
    (``evalstop:``, ``k=2,``, ``=2``) and a key given twice; which keys are allowed is the
    declaration's business (``Declaration.values``).  One spelling per spec: a sweep cell's
    canonical form, the CLI, TOML and the API then agree on what was asked for.
    """
    if not isinstance(spec, str):
        raise ConfigError(f"{what}={spec!r} is invalid; allowed: a string, {_SPEC_FORM}")
    if not spec.strip():
        raise ConfigError(f"{what}={spec!r} is empty; allowed: {_SPEC_FORM}")
    blank = next((c for c in spec if c.isspace()), None)
    if blank is not None:
        raise ConfigError(f"{what}={spec!r} has {_blank_name(blank)}; allowed: {_SPEC_FORM}")
    name, rest = split_name(spec, what)
    params: dict[str, str] = {}
    for part in rest.split(",") if rest is not None else ():
        key, eq, val = part.partition("=")
        if not key:
            raise ConfigError(f"{what}={spec!r} has a parameter with no key (a stray ':' or "
                              f"',', or '=VALUE' alone); allowed: {_SPEC_FORM}")
        if key in params:
            raise ConfigError(f"{what} parameter {key!r} is given twice in {spec!r}; allowed: "
                              "each parameter once")
        if eq and not val:  # "backfill=" is not the bare flag "backfill"
            raise ConfigError(f"{what} parameter {key!r} has no value in {spec!r}; allowed: "
                              f"{_value_form(what, name, key)}")
        params[key] = val
    return name, params


def split_name(spec: str, what: str) -> tuple[str, str | None]:
    """``(name, parameter text or None)`` of a spec without spaces."""
    parts = spec.split(":")
    name, rest = parts[0], parts[1:]
    if rest and "=" not in rest[0] and rest[0] and _module_part(what, name, rest[0]):
        # MODULE:ATTR, unless the second part reads as parameters of a registered name
        name, rest = f"{name}:{rest[0]}", rest[1:]
    elif (rest and name in _REGISTRY[what] and rest[0] in _REGISTRY[what][name].param_names
          and _module_exists(name)):
        # ``fifo:backfill`` with a fifo.py of the user's: the built-in's flag, or the
        # module's function?  The built-in's name wins elsewhere; here it would be silent.
        # ``patience:patience`` names a parameter that is no flag: the built-in's value
        # form is its own (``=true`` was offered, and refused)
        flag = _REGISTRY[what][name].param(rest[0]).kind == "bool"
        raise ConfigError(f"{what}={spec!r} is ambiguous: {name} is a built-in {what} with a "
                          f"{'flag' if flag else 'parameter'} {rest[0]}, and a module of yours "
                          f"is named {name}; allowed: "
                          + (f"{name}:{rest[0]}=true" if flag
                             else f"{name}:{_value_form(what, name, rest[0])}")
                          + " for the built-in, or rename the module")
    if len(rest) > 1:
        raise ConfigError(f"{what}={spec!r} has too many ':'; allowed: NAME:key=value,... or "
                          "MODULE:ATTR:key=value,...")
    if not name:  # ":evalstop" is MODULE:ATTR with an empty module: import_ref says so
        raise ConfigError(f"{what}={spec!r} has no name before ':'; allowed: {_SPEC_FORM}")
    return name, rest[0] if rest else None


def _module_part(what: str, name: str, second: str) -> bool:
    """Whether ``name`` in ``name:second`` is a module: not a registered name, or the short
    name a user declaration registered (``name="below_best"`` in below_best.py) when
    ``second`` is none of its parameters.  Once that module was imported, its own
    ``below_best:below_best:k=2`` read as the short name with two parameter parts, and
    was refused, though the same spec had been taken before the import."""
    decl = _REGISTRY[what].get(name)
    return decl is None or (decl.user is not None and second not in decl.param_names)


def _value_form(what: str, name: str, key: str) -> str:
    """What ``key=`` of ``name`` takes, for a key given with no value."""
    decl = _REGISTRY[what].get(name)
    if decl is None or key not in decl.param_names:
        return f"{key}=VALUE (a true/false flag may be given bare, as in fifo:backfill)"
    param = decl.param(key)
    if param.kind == "bool":
        return f"{key}=true, {key}=false or the bare flag {key}"
    return f"{key}=VALUE, {param.allowed()}"


def _module_exists(name: str) -> bool:
    """An importable module of this name (a user's, shadowed by the built-in's name)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


# --------------------------------------------------------------------------- declarations

@dataclass(frozen=True)
class Declaration:
    """What schedulers and stop policies share: a name, parameters and labels."""

    name: str
    params: tuple[Param, ...] = ()
    label: str = ""            # table label template over the parameters, e.g. "evalstop(k={k})"
    figure_label: str = ""     # the name figures show
    help: str = ""
    kernel: str = ""           # "module:function" of the kernel that runs it
    user: Any = None           # the user's @njit function (None for built-ins)
    ref: str = ""              # "module:attr" a process imports to find a user declaration
    # reads a relative drop of the training loss, so a loss <= 0 that a log, a caller or
    # a hand-built workload supplies is refused (``loss_rule`` says why)
    positive_losses: bool = False

    def loss_rule(self, label: str) -> str:
        """What a ``positive_losses`` declaration allows, for the messages that refuse a loss."""
        return (f"a positive loss for {label} (a relative drop; its rule is undefined at 0 "
                "and reversed below)")

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def values(self, raw: dict[str, Any], what: str, typed: bool = False) -> dict[str, Any]:
        """Parsed values of the given spec parameters (unknown keys refused): read from
        their spec text, or with ``typed`` checked as the values they are."""
        out = {}
        for key, text in raw.items():
            if key not in self.param_names:
                allowed = ", ".join(self.param_names) or "none (it takes no parameters)"
                raise ConfigError(f"{what} parameter {key!r} is not a parameter of {self.name}; "
                                  f"allowed: {allowed}{self._shadow_hint()}")
            p = self.param(key)
            out[key] = p.check(text, f"{what}.") if typed else p.from_text(text, f"{what}.")
        return out

    def _shadow_hint(self) -> str:
        """A built-in's name is the built-in's: a user module of that name cannot be
        addressed as ``NAME:attr`` (say so where that is the likely mistake)."""
        if self.user is not None or ":" in self.name or not _module_exists(self.name):
            return ""
        return (f" (a module of yours named {self.name} cannot be addressed as "
                f"{self.name}:ATTR, the built-in has that name: rename the module)")

    def defaults(self) -> dict[str, Any]:
        return {p.name: p.default for p in self.params}

    def __repr__(self) -> str:
        """``<stop policy mydetectors:below_best>``, what an error shows of a declaration
        given where its spec goes (the generated repr was 1.5 kB of parameters, labels and
        addresses, in one line)."""
        kind = getattr(type(self), "DECLARED_AS", "a declaration")
        return f"<{kind.partition(' ')[2]} {self.name}>"

    def format_label(self, values: dict[str, Any]) -> str:
        return (self.label or self.name).format(**_exact(values))

    @property
    def impl(self) -> str:
        """Hash of a user declaration's source and parameters ("" for built-ins)."""
        if self.user is None:
            return ""
        return _source_hash(self.user, self.params)

    def usage(self) -> str:
        """``name:key=DEFAULT,...`` for help texts."""
        shown = [p for p in self.params if p.name != "scope"]
        if not shown:
            return self.name
        return self.name + ":" + ",".join(f"{p.name}={p.text(p.default)}" for p in shown)


def _user_file(obj: Any) -> str | None:
    """The source file of a user's function or module (None for library code)."""
    try:
        path = inspect.getsourcefile(getattr(obj, "py_func", obj))
    except TypeError:  # a builtin
        return None
    if path is None or os.path.realpath(path).startswith(library_dirs()):
        return None
    return path


def _value_text(value: Any, found: list | None = None,
                within: frozenset = frozenset()) -> str | None:
    """A global value's text for the hash (numba compiles globals in as constants), or
    None for what is not a plain value (modules and functions are followed instead; those
    inside a tuple, list, set or dict are added to ``found``).  The same in every
    process: a set's items sorted (a set of strings iterates in an order salted per
    process), anything else in a container named by its type (its repr held its address:
    the hash changed from run to run, and a resume was refused as edited)."""
    if hasattr(value, "dtype") and hasattr(value, "tobytes"):  # a NumPy array or scalar
        data = hashlib.sha256(value.tobytes()).hexdigest()
        return f"{value.dtype}{getattr(value, 'shape', ())}{data}"
    if isinstance(value, (bool, int, float, complex, str, bytes, type(None))) or \
            _plain_data(value):
        return repr(value)  # the same in every process, and as hashed before sets were
    if not isinstance(value, (tuple, list, set, frozenset, dict)) or id(value) in within:
        return None  # not plain, or a container holding itself

    def text(item: Any) -> str:
        if (t := _value_text(item, found, within | {id(value)})) is not None:
            return t
        if found is not None and (inspect.ismodule(item)
                                  or callable(getattr(item, "py_func", item))):
            found.append(item)
        return f"<{getattr(item, '__qualname__', type(item).__qualname__)}>"

    pairs = value.items() if isinstance(value, dict) else ((item,) for item in value)
    items = [":".join(map(text, pair)) for pair in pairs]
    if isinstance(value, (set, frozenset)):
        items.sort()
    return f"{type(value).__name__}[{', '.join(items)}]"


def _plain_data(value: Any, depth: int = 0) -> bool:
    """A tuple, list or dict of numbers, strings, bytes and None (nested too): its repr is
    the same in every process (no set, whose order of strings is salted per process, and
    no object, whose repr holds its address)."""
    if isinstance(value, (bool, int, float, complex, str, bytes, type(None))):
        return depth > 0
    if depth > 20 or not isinstance(value, (tuple, list, dict)):
        return False
    items = [*value.keys(), *value.values()] if isinstance(value, dict) else value
    return all(_plain_data(item, depth + 1) for item in items)


def _user_sources(fn: Any) -> list[str]:
    """The texts a user function's results depend on: the whole file that defines it (its
    helpers and constants there included), the values of the plain globals it names (a
    constant imported by name from another file: ``from consts import THRESH``) and, in
    turn, the files of the user functions and modules it names as globals (helpers
    imported from another file of the user's); of a ``functools.partial``, its function's
    and the values it binds; of an object called as a function, its class's ``__call__``
    and its attributes (hashed as nothing, their edits went unnoticed); of a method of a
    user's object (``SCALER.apply(v)``), its function and that object's attributes
    (passed over, an edit of a function the method called reused a sweep's cells)."""
    texts, seen, done, todo = [], set(), set(), [fn]
    owners: set[int] = set()  # objects whose attributes are followed: each once (``_reached``)

    def follow(name: Any, dep: Any) -> None:  # a value the code uses: its files, or its text
        if inspect.ismodule(dep) or callable(getattr(dep, "py_func", dep)):
            todo.append(dep)
        elif (value := _value_text(dep, todo)) is not None:
            texts.append(f"{name}={value}")

    while todo:
        item = todo.pop()
        obj = getattr(item, "py_func", item)
        owner = getattr(obj, "__self__", None)
        if _user_object(owner) and id(owner) not in owners:  # a method: what its object holds
            owners.add(id(owner))
            for name, dep in getattr(owner, "__dict__", {}).items():
                follow(name, dep)
        obj = getattr(obj, "__func__", obj)  # a method: its function
        if id(obj) in done:
            continue
        done.add(id(obj))
        if (wrapped := _wrapped_call(obj)) is not None:  # a partial, or a callable object
            func, held = wrapped
            todo.append(func)
            for name, dep in held:
                follow(name, dep)
            continue
        path = _user_file(obj)
        if path is None:
            continue
        if path not in seen:
            seen.add(path)
            texts.append(_file_text(path, obj))
        for name, dep in _names_reached(obj):
            follow(name, dep)
    return texts


def _wrapped_call(obj: Any) -> tuple[Any, Iterable[tuple[Any, Any]]] | None:
    """What runs when ``obj`` is called and the values it holds, if it wraps a function:
    of a ``functools.partial``, its function and the values it binds; of an object called
    as a function, its class's ``__call__`` and its attributes.  ``None`` for a function,
    a class or a module, whose own code and file are followed."""
    if isinstance(obj, partial):  # its function, and the values it binds
        return obj.func, [*enumerate(obj.args), *obj.keywords.items()]
    if callable(obj) and not (inspect.isroutine(obj) or inspect.isclass(obj)):
        # an object called as a function: its class's method, and its attributes
        return type(obj).__call__, getattr(obj, "__dict__", {}).items()
    return None


def _file_text(path: str, obj: Any) -> str:
    """The text of the user's file ``path`` that defines ``obj``, read from disk."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:  # closed now
            return fh.read()
    except OSError:  # in a zip: its loader reads it; gone since import: its
        return _loaded_text(obj) or path  # compiled code stands for it


def _names_reached(obj: Any) -> Iterator[tuple[str, Any]]:
    """The names ``obj``'s code uses, each with its value, for ``_user_sources`` to follow."""
    # each function's names, also of a file already read (a function it calls in the
    # same file, naming a constant imported from another file)
    for name in getattr(getattr(obj, "__code__", None), "co_names", ()):
        yield name, getattr(obj, "__globals__", {}).get(name)
    # and what it reaches through a module of the user's (``helpers.f(x)``,
    # ``consts.THRESH``): the module's file was read, but not the names its functions
    # import from other files, nor a value it imported (an edit of ``THRESH`` in a third
    # file reused a sweep's cells)
    if isinstance(obj, types.FunctionType):
        for name, dep in loaded_names(obj):
            head = obj.__globals__.get(name.partition(".")[0])
            if "." in name and (_user_module(head) or _user_object(head)):
                yield name, dep


def _user_module(obj: Any) -> bool:
    return inspect.ismodule(obj) and _user_file(obj) is not None


def _user_object(obj: Any) -> bool:
    """An instance of a class of the user's files (its methods are the user's code)."""
    return (obj is not None and not (inspect.ismodule(obj) or inspect.isclass(obj)
                                     or inspect.isroutine(obj))
            and _user_file(type(obj)) is not None)


def _loaded_text(obj: Any) -> str | None:
    """The source of the module defining ``obj`` as its loader reads it (a module in a zip
    on the path: only the function's own compiled code was hashed, edits of the functions
    it calls went unnoticed), else ``obj``'s compiled code (a file deleted since import), else None."""
    module = inspect.getmodule(obj)
    try:
        text = module.__loader__.get_source(module.__name__)
    except (AttributeError, ImportError, OSError):
        text = None
    code = getattr(obj, "__code__", None)
    return text or (repr(code.co_code) + repr(code.co_consts) if code else None)


def source_sha256(fn: Any) -> str:
    """SHA-256 of the texts a user function's results depend on (``_user_sources``): the
    code a sweep records beside its results (``fastsim.sweep.grid.Grid.code``).

    Whole files, not ``inspect.getsource`` of the function: its results also depend on
    the other functions and constants of its file and of the user files it names, which
    numba compiles in; and read from disk, as a resumed run or a Dask worker imports
    them.  Not cached: a sweep reads it once per run, and a file edited since is what it
    must see."""
    return hashlib.sha256("\0".join(_user_sources(fn)).encode()).hexdigest()


@lru_cache(maxsize=None)
def _source_hash(fn: Any, params: tuple[Param, ...]) -> str:
    py = getattr(fn, "py_func", fn)
    try:
        src = inspect.getsource(py)
    except (OSError, TypeError):
        src = repr(py.__code__.co_code) + repr(py.__code__.co_consts)
    text = "\0".join([src, *_user_sources(fn)])
    return hashlib.sha256((text + repr(params)).encode()).hexdigest()[:16]


@dataclass(frozen=True, repr=False)
class StopPolicy(Declaration):
    """A stop policy.  ``code``: the built-in's integer code (kernels branch on it);
    ``action``: ``stop`` or ``demote``; ``lookback``: the parameter (or 0) giving how many
    evaluations before the trigger the delivered checkpoint is; ``keep``: ``lookback``, or
    ``best`` (the evaluation with the highest observed score up to the trigger, first on
    ties); ``min_evals``: evaluations needed before it can trigger at all; ``reads``: the
    observed series it decides on; ``vector``: its parameters reach the kernel as one
    float64 array in declared order and live in ``PolicyConfig.params`` (the online
    detectors), not in named config fields."""

    DECLARED_AS: ClassVar[str] = "a stop policy"  # named when a user's module lacks a name
    code: int = -1
    action: str = "stop"
    lookback: str | int = 0
    keep: str = "lookback"
    min_evals: Callable[[dict], int] = lambda v: 1
    min_evals_text: str = ""   # the rule in words, for messages ("k+1")
    reads: tuple[str, ...] = ("scores",)
    uses_hidden_truth: bool = False
    streaming: bool = True     # has a one-update-per-evaluation form (live monitor, callback)
    scoped: bool = True        # whether ``scope`` matters (not for ``none``)
    vector: bool = False

    @property
    def stores_params(self) -> bool:
        """Whether a config keeps its parameter values in ``PolicyConfig.params``."""
        return self.user is not None or self.vector

    def delivered(self, trigger: int, values: dict[str, Any], n: int, scores=None) -> int:
        """The 1-based evaluation whose checkpoint a stop at ``trigger`` hands back
        (``scores``: the job's observed scores, for ``keep="best"``)."""
        if self.action == "demote":
            return n
        if self.keep == "best":  # the first highest score; an unscored evaluation never
            best = -1            # (replay keeps them in the series, the monitor does not)
            for e in range(trigger):
                if scores[e] == scores[e] and (best < 0 or scores[e] > scores[best]):
                    best = e
            return max(best, 0) + 1
        return trigger - self.lookback_of(values)

    def lookback_of(self, values: dict) -> int:
        """How many evaluations before its trigger the delivered checkpoint is, under the
        parameter ``values`` (a parameter's name, or a number)."""
        return values[self.lookback] if isinstance(self.lookback, str) else self.lookback


@dataclass(frozen=True, repr=False)
class Scheduler(Declaration):
    """A base scheduler: ``code`` is the engine's integer code; a user scheduler is a
    static key (computed once per job from what is observed at its arrival) run through
    the engine's static-key path, non-preemptive.  ``reads``: the observed series its
    order depends on (names of ``SERIES``; a user key is handed ``t_est_h``)."""

    DECLARED_AS: ClassVar[str] = "a scheduler key"
    code: int = -1
    preemptive: bool = False
    reads: tuple[str, ...] = ()
    label_fn: Callable[[dict], str] | None = None

    def format_label(self, values: dict[str, Any]) -> str:
        return self.label_fn(_exact(values)) if self.label_fn else super().format_label(values)


# --------------------------------------------------------------------------- built-ins

SCOPE = Param("scope", "choice", D.SCOPE, choices=("rlhf", "all"),
              help="job types the policy acts on: rlhf, or all")
K_DECLINES = Param("k", "int", D.K, lo=1, unit="evaluations", help="consecutive declines")
STOP_AT_F = Param("f", "float", D.STOP_AT_F, lo=0, hi=10, lo_open=True, unit="of T_est",
                  help="estimated-progress fraction attained / T_est")
PLATEAU_W = Param("w", "int", D.PLATEAU_W, lo=1, unit="evaluations", help="look-back window")
PLATEAU_TOL = Param("tol", "float", D.PLATEAU_TOL, lo=-1, hi=1, lo_open=True, hi_open=True,
                    help="relative loss improvement over w evaluations below which to stop")

BUILTIN_POLICIES = (
    StopPolicy("none", (SCOPE,), "none", "no stop policy", "never stop", code=K.NONE,
               scoped=False, reads=()),
    StopPolicy("evalstop", (K_DECLINES, SCOPE), "evalstop(k={k})", "EvalStop (k={k})",
               "stop after k consecutive declines of the evaluation score; deliver the "
               "checkpoint k evaluations back", "fastsim.kernels.detectors:evalstop_trigger_nb",
               code=K.EVALSTOP, lookback="k", min_evals=lambda v: v["k"] + 1, min_evals_text="k+1"),
    StopPolicy("stop_at", (STOP_AT_F, SCOPE), "stop_at(f={f:g})", "StopAt-{f:g}",
               "stop at estimated progress f", "fastsim.kernels.detectors:stop_at_trigger_nb",
               code=K.STOP_AT, reads=("attained_h", "t_est_h")),
    StopPolicy("loss_plateau", (PLATEAU_W, PLATEAU_TOL, SCOPE), "loss_plateau(w={w},tol={tol:g})",
               "Loss plateau", "stop when the training loss improves by less than tol over w "
               "evaluations", "fastsim.kernels.detectors:loss_plateau_trigger_nb", code=K.LOSS_PLATEAU,
               min_evals=lambda v: v["w"] + 1, min_evals_text="w+1", reads=("losses",),
               positive_losses=True),
    StopPolicy("deprioritize", (K_DECLINES, SCOPE), "deprioritize(k={k})", "Deprioritize (k={k})",
               "demote (not stop) after k consecutive declines",
               "fastsim.kernels.detectors:evalstop_trigger_nb", code=K.DEPRIORITIZE, action="demote",
               min_evals=lambda v: v["k"] + 1, min_evals_text="k+1", streaming=False),
    StopPolicy("oracle", (SCOPE,), "oracle (hidden truth)", "Oracle (hidden truth)",
               "stop each hacking job at its gold peak (uses hidden truth: an upper bound)",
               "fastsim.kernels.oracle:oracle_stops_nb", code=K.ORACLE, uses_hidden_truth=True,
               streaming=False, reads=()),
)

# The online detectors (kernels/detectors_online.py; docs/detectors.md): each a stop
# policy over any base scheduler that keeps the best observed checkpoint.  Parameters in
# the kernel's order; defaults in fastsim.defaults.DETECTORS.
SIGMA0 = Param("sigma0", "float", D.SIGMA, lo=0, hi=1e6, unit="score units",
               help="evaluation noise you expect (sd of one evaluation), refined from each "
               "job's residuals")


def _det(name: str, param: str, kind: str, lo: float, hi: float, help: str, **kw) -> Param:
    return Param(param, kind, D.DETECTORS[name][param], lo=lo, hi=hi, help=help, **kw)


def _detector(name: str, code: int, params: tuple, label: str, figure_label: str, help: str,
              min_evals: Callable[[dict], int], min_evals_text: str) -> StopPolicy:
    return StopPolicy(name, params + (SCOPE,), label, figure_label, help,
                      "fastsim.kernels.detectors_online:detector_trigger_nb", code=code, keep="best",
                      vector=True, min_evals=min_evals, min_evals_text=min_evals_text)


DETECTOR_POLICIES = (
    _detector("patience", K.PATIENCE, (
        _det("patience", "patience", "int", 1, 1000, "evaluations without an improvement",
             unit="evaluations"),
        _det("patience", "threshold", "float", 0, 1e6, "improvement over the best that resets "
             "the counter", unit="score units")),
        "patience(patience={patience},threshold={threshold:g})", "Patience ({patience})",
        "Hugging Face EarlyStoppingCallback: stop after patience evaluations that do not beat "
        "the best by more than threshold", lambda v: v["patience"] + 1, "patience+1"),
    _detector("margin", K.MARGIN, (
        _det("margin", "k", "int", 1, 1000, "consecutive declines", unit="evaluations"),
        _det("margin", "z", "float", 0, 100, "a decline counts beyond z noise sd of a difference"),
        SIGMA0),
        "margin(k={k},z={z:g},sigma0={sigma0:g})", "Margin (k={k}, z={z:g})",
        "k consecutive declines each larger than z noise sd (noise estimated online)",
        lambda v: v["k"] + 1, "k+1"),
    _detector("cusum", K.CUSUM, (
        _det("cusum", "drift", "float", 0, 100, "allowance per evaluation, in noise units"),
        _det("cusum", "h", "float", 0, 1000, "drawdown that stops, in noise units of a difference"),
        SIGMA0),
        "cusum(drift={drift:g},h={h:g},sigma0={sigma0:g})", "CUSUM (h={h:g})",
        "one-sided CUSUM of standardised declines (Page 1954)", lambda v: 2, "2"),
    _detector("peak", K.PEAK, (
        _det("peak", "z", "float", 0, 100, "fitted slope below -z standard errors stops"), SIGMA0,
        _det("peak", "min_evals", "int", 2, 1000, "first evaluation that may stop",
             unit="evaluations"),
        _det("peak", "origin", "int", 0, 1, "1: the curve starts at 0 (no offset)"),
        _det("peak", "window", "int", 0, 1000, "fit the last window evaluations (0: all)",
             unit="evaluations"),
        # from 0.05, as the workload's kl_gamma: below, d = t^gamma is nearly constant and
        # the fit's columns nearly collinear (gamma 1e-6 stopped 40% of healthy jobs)
        _det("peak", "gamma", "float", 0.05, 2, "sqrt(KL) grows like progress^gamma")),
        "peak(z={z:g},sigma0={sigma0:g},min_evals={min_evals},origin={origin},window={window},"
        "gamma={gamma:g})", "Peak test (z={z:g})",
        "sequential test that the peak has passed: slope of a Gao-form fit below -z se",
        lambda v: max(v["min_evals"], 2 if v["origin"] and not v["window"] else 3), "min_evals"),
    _detector("bocpd", K.BOCPD, (
        _det("bocpd", "hazard", "float", 0, 1, "change-point probability per evaluation",
             lo_open=True, hi_open=True),
        _det("bocpd", "z", "float", 0, 100, "segment slope below -z posterior sd stops"), SIGMA0,
        # from 1e-6: a smaller one's precision overflows to inf, and inf * 0 is NaN
        _det("bocpd", "prior_sd", "float", 1e-6, 1e6, "prior sd of a segment's slope",
             unit="score units per evaluation")),
        "bocpd(hazard={hazard:g},z={z:g},sigma0={sigma0:g},prior_sd={prior_sd:g})", "BOCPD (z={z:g})",
        "Bayesian online change-point detection on the slope (Adams & MacKay 2007)",
        lambda v: 2, "2"),
)
BUILTIN_POLICIES += DETECTOR_POLICIES

BACKFILL = Param("backfill", "bool", D.BACKFILL, help="start later jobs that fit when the head waits")
THRESHOLDS = Param("thresholds", "floats", D.TIRESIAS_THRESHOLDS_GPU_H, unit="GPU-hours",
                   field="thresholds_gpu_h", help="2D-LAS queue thresholds")


def _tiresias_label(thresholds: tuple[float, ...]) -> str:
    """``tiresias`` at the default thresholds, else with them: cells apart, labels apart."""
    if tuple(thresholds) == D.TIRESIAS_THRESHOLDS_GPU_H:
        return "tiresias"
    return "tiresias(thresholds=" + "/".join(f"{x:g}" for x in thresholds) + ")"


BUILTIN_SCHEDULERS = (
    Scheduler("fifo", (BACKFILL,), figure_label="FIFO", help="first come, first served",
              kernel="fastsim.kernels.schedulers:priority_key_nb", code=K.FIFO,
              label_fn=lambda v: "fifo+backfill" if v.get("backfill") else "fifo"),
    Scheduler("sjf_est", (), figure_label="SJF-Est", help="shortest estimated job first",
              kernel="fastsim.kernels.schedulers:priority_key_nb", code=K.SJF_EST,
              reads=("t_est_h",)),
    Scheduler("srtf_est", (), figure_label="SRTF-Est", help="shortest estimated remaining time "
              "first (preemptive)", kernel="fastsim.kernels.schedulers:priority_key_nb",
              code=K.SRTF_EST, preemptive=True, reads=("t_est_h", "attained_h")),
    Scheduler("loss_aware", (), figure_label="LossAware", help="largest loss drop per GPU-hour "
              "first (preemptive)", kernel="fastsim.kernels.schedulers:priority_key_nb",
              code=K.LOSS_AWARE, preemptive=True, reads=("losses",), positive_losses=True),
    Scheduler("tiresias", (THRESHOLDS,), figure_label="Tiresias", help="2D-LAS over attained "
              "GPU-hours (preemptive)", kernel="fastsim.kernels.schedulers:priority_key_nb",
              code=K.TIRESIAS, preemptive=True, reads=("attained_h",),
              label_fn=lambda v: _tiresias_label(v["thresholds"])),
)


def param_owners(decls: Iterable[tuple[str, Declaration]], by: str = "name"
                 ) -> dict[str, dict[str, list[str]]]:
    """parameter -> kind (``policy``, ``scheduler``) -> the names of the declarations of
    ``decls`` (``(kind, declaration)``, in order) that have it; a parameter by its ``name``
    (as a spec gives it: tiresias' ``thresholds``) or by its ``target`` (the config field
    it fills: ``thresholds_gpu_h``)."""
    out: dict[str, dict[str, list[str]]] = {}
    for kind, d in decls:
        for p in d.params:
            owners = out.setdefault(getattr(p, by), {}).setdefault(kind, [])
            owners += [d.name] if d.name not in owners else []
    return out


def spec_owners(name: str) -> list[tuple[str, list[str]]]:
    """``(spec, owners)``, for ``"policy"`` then ``"scheduler"``: the built-ins of which
    ``name`` is a parameter (``k``: evalstop, deprioritize, ...), where there are any; for
    the refusal of such a parameter given where a spec's parameters do not go."""
    builtins = [*(("policy", d) for d in BUILTIN_POLICIES),
                *(("scheduler", d) for d in BUILTIN_SCHEDULERS)]
    return list(param_owners(builtins).get(name, {}).items())


_REGISTRY: dict[str, dict[str, Declaration]] = {
    "policy": {d.name: d for d in BUILTIN_POLICIES},
    "scheduler": {d.name: d for d in BUILTIN_SCHEDULERS},
}
BUILTIN_POLICY_NAMES = tuple(d.name for d in BUILTIN_POLICIES)
BUILTIN_SCHEDULER_NAMES = tuple(d.name for d in BUILTIN_SCHEDULERS)
# Config fields a built-in policy or scheduler parameter fills.
POLICY_FIELDS = ("k", "f", "w", "tol", "scope")
SCHEDULER_FIELDS = ("backfill", "thresholds_gpu_h")


def lookup(what: str, name: str) -> Declaration:
    """The declaration of a registered name or of ``MODULE:ATTR`` (imported on demand)."""
    table = _REGISTRY[what]
    if name in table:
        return table[name]
    kind, made_by = ((StopPolicy, "@stop_policy") if what == "policy"
                     else (Scheduler, "@scheduler_key"))
    # as --help writes a user's declaration: MODULE:FUNCTION (a @stop_policy), MODULE:KEY
    users = f"{'MODULE:FUNCTION' if what == 'policy' else 'MODULE:KEY'} of a user's {made_by}"
    if ":" in name:
        obj = import_ref(what, name, f"{', '.join(table)} or {users}")
        if not isinstance(obj, kind):
            # a scheduler key or a metric named as the policy (and so on): say which it is
            raise ConfigError(f"{what}={name!r} is not a declared {what}; allowed: an object made "
                              f"by {made_by}{wrong_kind(name, obj, kind.DECLARED_AS, made_by)}")
        if obj.ref != name:  # imported under another name: its own must name it too
            _check_named_by_ref(what, name, obj, made_by)
        return obj
    # a bare word only: a label typed as a spec ('evalstop(k=3)', 'fifo+backfill') near
    # 'evalstop' would be offered it, which drops the parameters it names
    hint = (did_you_mean(name.lower(), table)
            if isinstance(name, str) and re.fullmatch(r"[\w-]+", name) else "")
    if not hint and isinstance(name, str):
        hint = user_ref_hint(name)
    raise ConfigError(f"{what}={name!r} is invalid; allowed: {', '.join(table)} or {users}{hint}")


def _check_named_by_ref(what: str, name: str, decl: Declaration, made_by: str) -> None:
    """A declaration is named, in its config, cells and hashes, by its function's
    ``MODULE:NAME`` (``decl.ref``), which must name it again: ``strict =
    stop_policy(...)(below)`` over an ``@njit def below`` is ``MODULE:below``, where
    ``below`` is the bare function, and ``--policy MODULE:strict`` was refused as
    "policy='MODULE:below' is not a declared policy", a name the user never gave.  Reached
    under another name (``from mydetectors import below_best`` in another module), it is
    taken when its own name does name it."""
    try:
        same = import_ref(what, decl.ref, "") is decl
    except ConfigError:  # its module or name gone (a function defined inside another)
        same = False
    if not same:
        module, _, attr = decl.ref.partition(":")
        raise ConfigError(f"{what}={name!r} is the declaration of {decl.ref}, its function's "
                          f"name, and {module}.{attr} is not that declaration; allowed: "
                          f"{made_by}(...) over the function's def, so that its name is the "
                          "declaration's")


def user_ref_hint(name: str) -> str:
    """A user's declaration named as Python would (``mydetectors.below_best``), or by its
    module alone (``mydetectors``): the spec that names it is ``MODULE:FUNCTION``."""
    dotted = re.fullmatch(r"([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\.([A-Za-z_]\w*)", name)
    if dotted:
        return f" (a module and its function are joined by a colon: {dotted[1]}:{dotted[2]})"
    if name.isidentifier() and name in user_module_names():
        return f" ({name} is a module of yours: name its declaration, {name}:FUNCTION)"
    return ""


def policies() -> tuple[StopPolicy, ...]:
    return tuple(_REGISTRY["policy"].values())  # type: ignore[return-value]


def schedulers() -> tuple[Scheduler, ...]:
    return tuple(_REGISTRY["scheduler"].values())  # type: ignore[return-value]


def _check_alias(what: str, alias: str, ref: str) -> None:
    """A short ``name=`` that no other declaration has: asked before the label, which
    defaults to it (a name of a built-in is said as such, not as a label)."""
    table = _REGISTRY[what]
    other = "scheduler" if what == "policy" else "policy"
    if not alias:
        return
    if alias in table and table[alias].ref != ref:
        raise ConfigError(f"{what} name {alias!r} is already registered; allowed: a new name")
    if alias in _REGISTRY[other] and _REGISTRY[other][alias].user is None:
        # a policy named fifo ran as "fifo over evalstop": its run's heading, a sweep's
        # tables and figures read as the built-in scheduler's
        raise ConfigError(f"{what} name {alias!r} is the built-in {other} {alias}'s; allowed: "
                          "a new name")


def _register(what: str, decl: Declaration, alias: str | None) -> None:
    """``alias`` (checked by ``_check_alias``) names ``decl`` in specs of this process."""
    if alias:
        _REGISTRY[what][alias] = decl


def _check_signature(fn: Any, fixed: tuple[str, ...], params: tuple[Param, ...],
                     what: str) -> None:
    """The function's arguments are the ``fixed`` ones (any names, but not each other's:
    ``(gpus, t_est_h, ...)`` read the demand as the estimate) then the declared
    parameters, by name and in order: they are passed by position, so a swapped pair
    would arrive swapped (``_check_param`` checked each parameter's kind)."""
    from fastsim.arrays import HIDDEN  # here: fastsim --help imports this module, not numpy

    got = tuple(inspect.signature(fn.py_func).parameters)
    want = fixed + tuple(p.name for p in params)
    # a key written (duration_h, gpus, ...) ordered by the estimate while its author read
    # an oracle's run time there, and exited 0: a name of hidden truth is nothing it gets
    hidden = [g for g in got if g in HIDDEN and g not in want[len(fixed):]]
    if hidden:
        i = got.index(hidden[0])
        # in a declared parameter's place it receives that parameter, not nothing
        gets = (f"that argument receives {want[i]}, whatever its name" if i < len(want)
                else "no such argument is passed")
        raise ConfigError(f"{what} {fn.__name__}{got}: {hidden[0]} is hidden truth, which no "
                          f"{what} is given ({gets}); allowed: ({', '.join(want)}), the "
                          "declared parameters in order")
    misplaced = any(g != w and g in want for g, w in zip(got[:len(fixed)], fixed))
    if len(got) != len(want) or got[len(fixed):] != want[len(fixed):] or misplaced:
        raise ConfigError(f"{what} {fn.__name__}{got}: arguments differ from the declaration; "
                          f"allowed: ({', '.join(want)}), the declared parameters in order")


def _check_jitted(fn: Any, what: str, decorator: str) -> None:
    """An ``@njit`` function, with ``@njit`` written below the declaration: written above
    it (it then compiles the declaration's result), the function was refused as "not an
    @njit function" beside the ``@njit`` its author could see."""
    if not hasattr(fn, "py_func"):
        raise ConfigError(f"{what} {getattr(fn, '__name__', fn)!r} is not an @njit function; "
                          f"allowed: a numba.njit-decorated function, with @njit below "
                          f"@{decorator}(...), next to its def")


def _is_users(obj: Any) -> bool:
    return _user_file(obj) is not None


def _check_pure(fn: Any, what: str) -> None:
    """Refuse object mode, random generators, numba's thread functions and its on-disk
    cache in a user's decision function (``fastsim.purity`` says why), when it is
    declared: before any workload exists.  ``check_pure`` asks again before it runs."""
    found = impurity(fn, _is_users)
    if found is not None:
        raise ConfigError(f"{what} {fn.__name__}: {found}; allowed: {NJIT_ALLOWED}, without "
                          "object mode (it could read hidden truth), a random generator or "
                          "a thread's id or count (they follow thread timing), and without "
                          "cache=True (its results could be an older version's)")


def check_cached(fn: Any, what: str, allowed: str) -> None:
    """Refuse numba's on-disk cache in a user's metric (plain Python: the rest of
    ``_check_pure`` is not its rule) and in the user functions it calls: the machine code
    of an ``@njit(cache=True)`` function whose constant another file holds was an older
    version's after an edit (``fastsim.purity``).  Asked when the metric is declared and
    again where it runs (``fastsim.metrics.check_code``), as ``_check_pure`` is."""
    found = disk_cached(fn, _is_users)
    if found is not None:
        raise ConfigError(f"{what} {fn.__name__}: {found}; allowed: {allowed}, calling no "
                          "function compiled with cache=True (its results could be an older "
                          "version's)")


def check_pure(decl: Declaration) -> None:
    """``_check_pure`` of a user declaration, again where it runs (``config.check_code``):
    at its declaration a helper defined further down its module is not there yet, and
    numba compiles it in at the first call (a ``coin()`` below the policy, drawing from
    ``np.random``, passed, and results changed from run to run)."""
    if decl.user is not None:
        _check_pure(decl.user, "stop policy" if isinstance(decl, StopPolicy) else "scheduler key")


_SHORT_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def _check_words(what: str, name: Any, **texts: Any) -> None:
    """A short ``name`` a spec can name, and labels and help that are text.  A name with a
    space, ':', ',' or '=' (which the spec grammar splits on) was registered, and no spec
    could name it; a label of 3 was an AttributeError."""
    for key, value in texts.items():
        if not isinstance(value, str):
            raise ConfigError(f"{what} {key}={value!r} is invalid; allowed: a string")
    if not isinstance(name, str) or (name and not _SHORT_NAME.fullmatch(name)):
        raise ConfigError(f"{what} name={name!r} is invalid; allowed: a word of ASCII letters, "
                          "digits and '_' that starts with a letter (as specs write names), "
                          "or '' for none")


def _check_label(label: str, params: tuple[Param, ...], what: str, ref: str) -> None:
    """A user's label formats over its parameters, and does not read as a built-in's.

    Every built-in's label starts with its name (``evalstop(k=2)``, ``fifo+backfill``,
    ``oracle (hidden truth)``), and ``fastsim run``'s heading, ``summary.txt`` and the
    figures name a policy and a scheduler by label alone: a key of the user's labelled
    ``fifo`` ran as "evalstop(k=2) over fifo", and a policy labelled ``evalstop(k={k})``
    as EvalStop.  Its first word is what its values cannot change (they are numbers and
    flags), so the defaults show it."""
    try:
        text = label.format(**_exact({p.name: p.default for p in params}))
    except (KeyError, IndexError, ValueError) as exc:
        raise ConfigError(f"{what} label {label!r} cannot be formatted ({exc!r}); allowed: "
                          "{name} or {name:g} of declared parameters") from None
    word = re.match(r"\w*", text.lstrip()).group().lower()  # " fifo" reads as fifo too
    for kind, decls in (("policy", BUILTIN_POLICIES), ("scheduler", BUILTIN_SCHEDULERS)):
        if any(d.name == word for d in decls):
            raise ConfigError(f"{what} {ref} is labelled {text!r}, which reads as the built-in "
                              f"{kind} {word} in headings, summaries and figures; allowed: a "
                              "label whose first word is no built-in policy's or scheduler's "
                              "name (label=\"...\" in its declaration)")


def _check_figure_label(label: str, params: tuple[Param, ...], what: str, ref: str) -> None:
    """A user's figure label does not read as a built-in's in a figure's legend: it may not
    start with a built-in's figure label up to its parameters (``EvalStop``, ``StopAt``,
    ``Loss plateau``, ``SRTF-Est``) and then no letter, digit or ``_`` (``EvalStop (k=2)``
    and ``FIFO-like`` are refused, ``EvalStopper`` and ``fifo_like`` are not, as labels)."""
    try:
        text = label.format(**_exact({p.name: p.default for p in params})).strip()
    except (KeyError, IndexError, ValueError):
        text = label.strip()
    for kind, decls in (("policy", BUILTIN_POLICIES), ("scheduler", BUILTIN_SCHEDULERS)):
        for d in decls:
            stem = re.split(r"[({]", d.figure_label)[0].rstrip(" -")
            if re.match(re.escape(stem) + r"(?!\w)", text, flags=re.IGNORECASE):
                raise ConfigError(f"{what} {ref} has figure label {text!r}, which reads as the "
                                  f"built-in {kind} {d.name} ({stem}) in figures; allowed: a "
                                  "figure label that does not start with a built-in's "
                                  "(figure_label=\"...\" in its declaration)")


def _user_params(params: Any) -> tuple[Param, ...]:
    if not isinstance(params, (list, tuple)):  # a lone Param, or None: a TypeError traceback
        raise ConfigError(f"params={params!r} is invalid; allowed: a list of "
                          "fastsim.registry.Param(...), as params=[Param(\"k\", \"int\", 2)]")
    out = []
    for p in params:
        if not isinstance(p, Param):
            raise ConfigError(f"parameter {p!r} is invalid; allowed: fastsim.registry.Param(...)")
        if p.name == "scope":
            raise ConfigError("parameter 'scope' is reserved (every policy has it)")
        _check_param(p)
        # kept as checked: np.int64(2) as 2, the default every label and cell id shows
        out.append(replace(p, default=p.check(p.default, "default of ")))
    return tuple(out)


def _check_param(p: Param) -> None:
    """A user's ``Param`` is one its function can take and its checks can read: a kind
    out of the list read every default as 'not a number in [-inf, inf)', text bounds and
    a name that is not text were a TypeError traceback, a NaN bound refused every value."""
    where = f"Param({p.name!r}, {p.kind!r}, ...)"
    if not isinstance(p.name, str) or not p.name.isidentifier():
        raise ConfigError(f"{where}: name {p.name!r} is invalid; allowed: a Python identifier, "
                          "the function's argument name")
    if p.kind not in ("int", "float", "bool"):  # what the compiled call takes
        raise ConfigError(f"{where}: kind {p.kind!r} is invalid; allowed: int, float or bool")
    for bound in ("lo", "hi"):
        v = getattr(p, bound)
        if not isinstance(v, numbers.Real) or isinstance(v, bool) or math.isnan(float_or_nan(v)):
            raise ConfigError(f"{where}: {bound}={v!r} is invalid; allowed: a number or "
                              "+-math.inf")
    if p.lo > p.hi:
        raise ConfigError(f"{where}: lo={p.lo!r} is above hi={p.hi!r}; allowed: lo <= hi")


def _check_lookback(lookback: str | int, ps: tuple[Param, ...]) -> str | int:
    """``lookback`` as declared: an int >= 0 (numpy's as Python's), or an int parameter
    that cannot go below 0: a negative lookback would deliver a checkpoint from after the
    stop (replay), the best one (the engine's sentinel) or fail (the monitor)."""
    lookback = plain_scalar(lookback)  # np.int64(1) was refused as 'allowed: an integer'
    ints = [p.name for p in ps if p.kind == "int" and p.lo >= 0]
    if (lookback not in ints if isinstance(lookback, str) else
            isinstance(lookback, bool) or not isinstance(lookback, int) or lookback < 0):
        raise ConfigError(f"lookback={lookback!r} is invalid; allowed: an integer >= 0 or the "
                          "name of an int parameter with lo >= 0 "
                          f"({', '.join(ints) or 'none declared'})")
    return lookback


SERIES = ("scores", "losses", "attained_h", "t_est_h")  # what a stop policy is given


def _check_reads(reads: Any) -> None:
    """``reads`` names series a stop policy is given: a string was taken letter by letter
    (``reads="losses"`` read no loss: replay asked for no ``loss`` column, and the monitor
    filled the series with NaN), and an unknown name (``"loss"``) was passed over."""
    if (not isinstance(reads, (tuple, list))
            or not all(isinstance(r, str) and r in SERIES for r in reads)):
        raise ConfigError(f"reads={reads!r} is invalid; allowed: a tuple of names from "
                          f"{', '.join(SERIES)} (as reads=(\"scores\", \"losses\"))")


def _min_evals_rule(min_evals: Callable[[dict], int] | int, ref: str,
                    ps: tuple[Param, ...]) -> Callable[[dict], int]:
    """A user's ``min_evals`` (an integer, or a function of the parameter values) as a rule
    that answers an integer >= 1 or refuses in one line naming the policy: it ran, unguarded,
    in every config of the policy (a traceback for a function that raised), and ``int()``
    made 2.7 into 2 and "3" into 3.  Asked once at the defaults here, when declared."""
    allowed = ("allowed: an integer >= 1, or a function of the parameter values (a dict) "
               "returning one")

    def rule(values: dict) -> int:
        try:
            n = min_evals(values) if callable(min_evals) else min_evals
        except Exception as exc:  # noqa: BLE001 - the user's function, named in the message
            raise ConfigError(f"stop policy {ref}: min_evals({values}) raised "
                              f"{type(exc).__name__}: {exc}; {allowed}") from None
        if not is_integer(n) or n < 1:
            shown = f"min_evals({values}) returned " if callable(min_evals) else "min_evals="
            raise ConfigError(f"stop policy {ref}: {shown}{n!r}; {allowed}")
        return int(n)

    rule({p.name: p.default for p in ps})
    return rule


def declaring(decorator: str, wrap: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``wrap`` (what ``@decorator(...)`` returns), whose refusal carries ``decorator`` as
    its ``declared_with``: imported where another kind is asked for
    (``fastsim.user_modules.import_ref``), it says which kind the line declared, however
    the decorator was spelt (``@R.stop_policy(...)``)."""
    def declare(fn: Any) -> Any:
        try:
            return wrap(fn)
        except ConfigError as exc:
            exc.declared_with = f"@{decorator}"
            raise
    return declare


def check_decorated(fn: Any, what: str, decorator: str) -> None:
    """What a declaring decorator (``@stop_policy(...)``, ``@scheduler_key(...)``,
    ``@cluster_metric(...)``) was put over, when it is a declaration already: stacked twice,
    or over another kind's, the message printed the first declaration whole (its repr, a
    thousand characters of parameters and addresses)."""
    kind = getattr(type(fn), "DECLARED_AS", None)
    if isinstance(kind, str):
        raise ConfigError(f"{what} {getattr(fn, 'ref', '') or fn.name} is declared already "
                          f"({kind}); allowed: one @{decorator}(...) over the function")


def spec_hint(value: Any) -> str:
    """`` (this declaration's spec is "mydetectors:below_best")`` for a declaration (what
    ``@stop_policy`` and the other decorators return) given where a spec string goes."""
    if not isinstance(getattr(type(value), "DECLARED_AS", None), str):
        return ""
    return f" (this declaration's spec is \"{getattr(value, 'ref', '') or value.name}\")"


def bare_decorator(decorator: str) -> ConfigError:
    """The refusal of ``@stop_policy`` written without its parentheses, as ``@njit`` may be:
    Python called it with the function, and said "stop_policy() takes 0 positional
    arguments but 1 was given"."""
    return ConfigError(f"@{decorator} is written with parentheses, @{decorator}(...), its "
                       f"arguments keywords; allowed: @{decorator}() (no arguments) or "
                       f"@{decorator}(label=..., ...) over the function")


def stop_policy(_bare: Any = None, /, *, params=(), label: str = "", lookback: str | int = 0,
                keep: str = "lookback", min_evals: Callable[[dict], int] | int = 1,
                reads=("scores",), name: str = "", figure_label: str = "",
                help: str = "") -> Callable:
    """Declare a user stop policy over an ``@njit`` trigger function.

    The function is ``trigger(scores, losses, attained_h, t_est_h, *params) -> int``: the
    1-based evaluation at which the policy stops the job, or 0.  It sees one job's
    observed series only and must be pure and causal (its answer on a series is the
    first evaluation at which it would answer on the prefix).  ``lookback``: how many
    evaluations before the trigger the delivered checkpoint is (an int or a parameter
    name); ``keep="best"`` delivers the evaluation with the highest score up to the
    trigger instead (as the online detectors do).  ``name`` also registers a short name
    for specs in this process (a word: ASCII letters, digits and '_', from a letter; not the
    name of a built-in policy or scheduler).  ``label`` (default: the name) must not start
    with a built-in's name as its first word, which would read as that built-in.

    Examples
    --------
    >>> from numba import njit
    >>> @stop_policy(params=[Param("drop", "float", 0.05, lo=0)], label="drop({drop:g})")
    ... @njit
    ... def drop_from_best(scores, losses, attained_h, t_est_h, drop):
    ...     best = -1e300
    ...     for e in range(scores.shape[0]):
    ...         best = max(best, scores[e])
    ...         if scores[e] < best - drop:
    ...             return e + 1
    ...     return 0
    """
    if _bare is not None:
        raise bare_decorator("stop_policy")

    def wrap(fn: Any) -> StopPolicy:
        check_decorated(fn, "stop policy", "stop_policy")
        _check_jitted(fn, "stop policy", "stop_policy")
        ps = _user_params(params) + (SCOPE,)
        _check_signature(fn, ("scores", "losses", "attained_h", "t_est_h"), ps[:-1],
                         "stop policy")
        _check_pure(fn, "stop policy")
        _check_words("stop policy", name, label=label, figure_label=figure_label, help=help)
        ref = f"{fn.__module__}:{fn.__name__}"
        _check_alias("policy", name, ref)
        _check_label(label or (name or fn.__name__), ps, "stop policy", ref)
        _check_figure_label(figure_label or (name or fn.__name__), ps, "stop policy", ref)
        need = _min_evals_rule(min_evals, ref, ps)
        back = _check_lookback(lookback, ps)
        _check_reads(reads)
        if keep not in ("lookback", "best"):
            raise ConfigError(f"keep={keep!r} is invalid; allowed: lookback or best")
        if keep == "best" and back != 0:  # it was dropped without a word
            raise ConfigError(f"lookback={back!r} with keep='best': keep='best' delivers the "
                              "best-scored evaluation up to the trigger, so no lookback applies; "
                              "allowed: one of them")
        decl = StopPolicy(ref, ps, label or (name or fn.__name__), figure_label or (name or fn.__name__),
                          help or (fn.__doc__ or "").strip().split("\n")[0], ref, user=fn,
                          ref=ref, lookback=back, keep=keep, min_evals=need, reads=tuple(reads))
        _register("policy", decl, name or None)
        return decl
    return declaring("stop_policy", wrap)


def scheduler_key(_bare: Any = None, /, *, params=(), label: str = "", name: str = "",
                  figure_label: str = "", help: str = "") -> Callable:
    """Declare a user scheduler: an ``@njit`` *static* priority key.

    ``key(t_est_h, gpus, job_type, arrival_h, *params) -> float``, smaller runs first,
    ties by arrival (times in hours; ``job_type`` an integer code, 0 LoRA, 1 DPO, 2 RLHF,
    as in ``fastsim.kernels.codes``).  It is computed once per job from what the platform
    observes at the job's arrival, and the engine schedules non-preemptively by it, exactly
    as it does ``sjf_est`` (docs/extending.md says why keys that move with service are not
    offered).
    """
    if _bare is not None:
        raise bare_decorator("scheduler_key")

    def wrap(fn: Any) -> Scheduler:
        check_decorated(fn, "scheduler key", "scheduler_key")
        _check_jitted(fn, "scheduler key", "scheduler_key")
        ps = _user_params(params)
        _check_signature(fn, ("t_est_h", "gpus", "job_type", "arrival_h"), ps, "scheduler key")
        _check_pure(fn, "scheduler key")
        _check_words("scheduler key", name, label=label, figure_label=figure_label, help=help)
        ref = f"{fn.__module__}:{fn.__name__}"
        _check_alias("scheduler", name, ref)
        _check_label(label or (name or fn.__name__), ps, "scheduler key", ref)
        _check_figure_label(figure_label or (name or fn.__name__), ps, "scheduler key", ref)
        decl = Scheduler(ref, ps, label or (name or fn.__name__),
                         figure_label or (name or fn.__name__),
                         help or (fn.__doc__ or "").strip().split("\n")[0], ref, user=fn, ref=ref,
                         code=K.SJF_EST, reads=("t_est_h",))
        _register("scheduler", decl, name or None)
        return decl
    return declaring("scheduler_key", wrap)


def help_text(what: str) -> str:
    """One line per registered declaration for ``--help``."""
    decls = policies() if what == "policy" else schedulers()
    seen, parts = set(), []
    for d in decls:
        if d.ref in seen and d.ref:
            continue
        seen.add(d.ref)
        params = "; ".join(f"{p.name}: {p.help}, {p.allowed()}" for p in d.params if p.name != "scope")
        parts.append(f"{d.usage()} ({d.help}{'; ' + params if params else ''})")
    return "; ".join(parts)
