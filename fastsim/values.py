"""What kind of value a user gave: the type checks every layer shares.

A number, an integer, a path or a flag as the user may write it (Python's or numpy's, not a
bool where a number is meant), and numpy scalars turned into Python's.  The bottom of the
package: it imports nothing of fastsim but ``ConfigError``, so ``fastsim.config``,
``fastsim.registry`` and ``fastsim.metrics`` all use it without importing each other.
"""
from __future__ import annotations

import argparse
import math
import numbers
import os
import re
import struct
import sys
import unicodedata
from dataclasses import fields
from pathlib import Path
from typing import Any

from fastsim.errors import ConfigError

# The simulation's counters (kernels/rng.py): a seed is an unsigned 64-bit integer, a
# cluster id a signed one.
MAX_SEED = 2**64 - 1
MAX_CLUSTER = 2**63 - 1


def check_seed(seed) -> int:
    """``seed`` as a Python int, if it is an integer from 0 to ``MAX_SEED`` (no bool, no
    float: a seed of 1.5 was the seed 1), else one ``ConfigError``."""
    if not is_integer(seed) or not 0 <= int(seed) <= MAX_SEED:
        raise ConfigError(f"seed={seed!r} is invalid; allowed: an integer from 0 to 2^64-1")
    return int(seed)


def plain(v: Any) -> Any:
    """A numpy scalar as Python's (``np.int64(20)`` -> ``20``, ``np.float32`` -> float,
    ``np.bool_`` -> bool, ``np.str_`` -> str), a list as a tuple of such: values a user
    computed with numpy validate, hash into cell ids and serialise as the numbers they
    are.  A 1-D numpy
    array is a list too (``demands_rlhf=np.arange(1, 5)`` was refused as "not a list of
    integers"), and so is a polars or pandas Series (refused with its printout, several lines
    read as one)."""
    np = sys.modules.get("numpy")
    if isinstance(v, (list, tuple)) or (np is not None and isinstance(v, np.ndarray)
                                        and v.ndim == 1) or _is_series(v):
        return tuple(plain(x) for x in v)
    return plain_scalar(v)


def _is_series(v: Any) -> bool:
    """A polars or pandas Series (while neither is imported, no value is one)."""
    return any(lib is not None and isinstance(v, lib.Series)
               for lib in (sys.modules.get("polars"), sys.modules.get("pandas")))


def plain_scalar(v: Any) -> Any:
    """A numpy scalar as Python's (``np.bool_`` -> bool, ``np.int64`` -> int, ``np.float32``
    -> float, ``np.str_`` -> str: a str already, but kept as given it was stored in the
    config and named as ``np.str_('mixed')`` in every message); anything else as it is, for
    the check that follows to name."""
    # numpy not imported: v is no numpy scalar (the command line's parser imports this
    # module, and its --help needs no numpy)
    np = sys.modules.get("numpy")
    if np is None:
        return v
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, np.integer) and not _is_duration(v):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    if isinstance(v, np.str_):
        return str(v)
    return v


FLOAT32_EPS = 2.0 ** -23


def float32_exact(values: Any) -> bool:
    """Whether each of the numbers ``values`` is a float32 exactly, as numpy's float32
    values are once widened (``np.float32(0.2)`` is 0.20000000298023224): fractions given
    in float32 sum to 1 only to float32's precision.  Read from the values, not from their
    type, so that a config re-read from its dict passes the check it passed when given."""
    np = sys.modules.get("numpy")
    if np is not None and isinstance(values, np.ndarray) and values.dtype.kind == "f":
        with np.errstate(over="ignore", invalid="ignore"):  # a million values in 2 ms
            return bool((values.astype(np.float32) == values).all())
    try:
        return all(struct.unpack("f", struct.pack("f", x))[0] == x for x in values)
    except (OverflowError, struct.error, TypeError):
        return False


# How far from 1 a sum of fractions or probabilities may be: float64 values normalised
# miss 1 by about n 1e-16; float32 values by up to 1.6 float32 epsilons for 2 to 10^6
# values normalised in float32 (np.float32([.2, .3, .5]) widens to a sum of 1 + 1.5e-8).
SUM_TOLERANCE = 1e-9
SUM_TOLERANCE_FLOAT32 = 4 * FLOAT32_EPS
SUMS_TO_ONE = (f"summing to 1 within {SUM_TOLERANCE:g} ({SUM_TOLERANCE_FLOAT32:.2g} for "
               "float32 values)")


def exact_sum(values: Any) -> float:
    """``math.fsum`` of the numbers ``values`` (a sequence), +-inf where the sum is beyond
    a float's range: fsum raises OverflowError once a partial sum overflows (a mix of
    1e308,1e308,0 was a traceback, where it is a sum that is not 1).  Then the values are
    summed scaled by a power of two that keeps every partial sum in range, exact but for
    the bits of subnormal values.  NaN where fsum has no sum (a NaN, or inf beside -inf:
    a refusal that echoed the sum of [inf, -inf] raised fsum's ValueError)."""
    try:
        return math.fsum(values)
    except ValueError:  # NaN, or both infinities
        return math.nan
    except OverflowError:
        scale = 2.0 ** (len(values).bit_length() + 1)
        return math.fsum(x / scale for x in values) * scale  # inf if the sum overflows


def sums_to_one(values: Any) -> bool:
    """Whether the numbers ``values`` (a mix's fractions, sampling probabilities) sum to 1
    within ``SUM_TOLERANCE``, or ``SUM_TOLERANCE_FLOAT32`` when each is a float32 value."""
    tol = SUM_TOLERANCE_FLOAT32 if float32_exact(values) else SUM_TOLERANCE
    return abs(exact_sum(values) - 1.0) < tol


def plain_fields(obj: Any, names: tuple[str, ...] | None = None) -> None:
    """``plain`` on the fields ``names`` (default: all) of the frozen dataclass ``obj``,
    before its checks: products of numpy's fixed-width integers wrap (np.int32(524288) *
    np.int32(8192) is 0), which a size check then passed."""
    for name in names if names is not None else tuple(f.name for f in fields(obj)):
        object.__setattr__(obj, name, plain(getattr(obj, name)))


def store_floats(obj: Any) -> None:
    """The numbers of ``obj``'s float fields stored as floats, once they are checked: 1 and
    1.0 are one value, so one config, cell id and label (a sweep axis ``load = [1, 1.0]``
    ran one simulation as two cells under one heading, and ``load = 1`` never resumed a
    grid written with ``1.0``).  -0 is 0 the same way (``sigma = [0.0, -0.0]`` ran one
    simulation as two cells, headed ``sigma 0`` and ``sigma -0``).  Integer-only fields
    (``n_jobs``, ``demands_*``) keep ints."""
    for f in fields(obj):
        if "float" not in str(f.type):
            continue
        v = getattr(obj, f.name)
        if isinstance(v, tuple):
            v = tuple(as_float(x) if is_real(x) else x for x in v)
        elif is_real(v):
            v = as_float(v)
        object.__setattr__(obj, f.name, v)


def as_float(v: Any) -> float:
    """A checked number as the float that stands for it: ``-0.0 + 0.0`` is ``0.0``."""
    return float(v) + 0.0


def is_integer(v: Any) -> bool:
    """An int or a numpy integer, not a bool nor a duration: what a count or a seed may be
    (while numpy is not imported, no value is a numpy integer)."""
    np = sys.modules.get("numpy")
    return not isinstance(v, bool) and not _is_duration(v) and (
        isinstance(v, int) or (np is not None and isinstance(v, np.integer)))


def is_real(v: Any) -> bool:
    """An int or a float (numpy's too), not a bool nor text: float() read a file's true as
    1.0 and "300" as 300, which then reached the kernels as text."""
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and not _is_duration(v)


def _is_duration(v: Any) -> bool:
    """numpy's timedelta64, an ``np.integer`` and a ``numbers.Real`` to Python: taken as a
    count, np.timedelta64(2, "s") failed in int() (a TypeError) and np.timedelta64(2) was
    the number of its units."""
    np = sys.modules.get("numpy")
    return np is not None and isinstance(v, np.timedelta64)


def is_number(x: Any) -> bool:
    """A finite int or float (not a bool); an int beyond a float's range is not one."""
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return False
    try:
        return math.isfinite(x)
    except OverflowError:  # math.isfinite(10**400)
        return False


def check_flags(*, allowed: str = "True or False", **flags: Any) -> None:
    """``ConfigError`` naming the first of ``flags`` that is not a bool ("no" is truthy);
    numpy's bool is one.  ``allowed``: what the refusal says is allowed, where a caller
    also takes something else (``None``) before calling this."""
    for name, flag in flags.items():
        if not isinstance(plain_scalar(flag), bool):
            raise ConfigError(f"{name}={flag!r} is invalid; allowed: {allowed}")


def float_or_nan(x: Any) -> float:
    """``x`` as a float, NaN where no float holds it (a bound of 10**400: math.isnan and
    float() raise OverflowError on it)."""
    try:
        return float(x)
    except OverflowError:
        return math.nan


# How a number is written wherever fastsim reads one from text (an option, a spec's
# parameter, an item of a comma-separated list): ASCII digits, an optional leading '-', and
# for a real number '.' and an exponent.  Python's int() and float() also take '+2', '1_000',
# ' 2 ', 'inf', and digits of any script ('٢', '２'): spellings that error messages, canonical
# forms and TOML do not write, and that some readers took and others refused.
_INTEGER_TEXT = re.compile(r"-?[0-9]+")
# digits, then '.' and more digits only after a '.': "[0-9]+\.?[0-9]*" split a run of
# digits every way, quadratic in its length before a refusal
_REAL_TEXT = re.compile(r"-?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?")
_ZERO_TEXT = re.compile(r"0*\.?0*([eE].*)?")  # unsigned text that means 0: 0, 0.0, .0, 0e5
FLOAT64_MIN, FLOAT64_MAX = sys.float_info.min, sys.float_info.max
FLOAT64_RANGE = f"of magnitude 0 or from {FLOAT64_MIN!r} to {FLOAT64_MAX!r}"
INTEGER_WRITTEN = "written in digits 0-9 with an optional leading '-' (as 3)"
REAL_WRITTEN = "written in digits 0-9 with an optional '-', '.' and exponent (as 0.65 or 1e-3)"


class NumberTextError(ValueError):
    """Text that is not a number as ``number_text`` reads one: ``str()`` is the text and
    what is wrong with it (``'1_0' is invalid``); ``written`` how it would be right
    (``written in digits 0-9 ...``), ``allowed`` the same with what it is (``an integer
    written in ...``)."""

    def __init__(self, text: Any, why: str, integer: bool, written: str) -> None:
        super().__init__(f"{text!r} {why}")
        self.text = text
        self.written = written
        self.allowed = ("an integer " if integer else "a number ") + written


def number_text(text: str, integer: bool = False) -> int | float:
    """The number ``text`` writes, an int when ``integer``: the one reading of a number
    given as text (``_INTEGER_TEXT``, ``_REAL_TEXT``), else ``NumberTextError``."""
    form, written = (_INTEGER_TEXT, INTEGER_WRITTEN) if integer else (_REAL_TEXT, REAL_WRITTEN)
    if not isinstance(text, str) or not form.fullmatch(text):
        raise NumberTextError(text, "is invalid", integer, written)
    if integer:
        try:
            return int(text)
        except ValueError:  # beyond Python's limit on digits (4300)
            raise NumberTextError(text, "has too many digits", integer, "of at most "
                                  f"{sys.get_int_max_str_digits()} digits") from None
    return float64_text(text)


def float64_text(text: str) -> float:
    """``float(text)`` of a text ``float()`` reads (a number ``number_text`` let through, a
    TOML file's float: ``read_toml``), refused (``NumberTextError``) where a float64
    cannot hold it: ``float()`` rounds 1e-400 to 0 (``--sigma 1e-400`` ran with no noise
    without a word), 1e-310 to a subnormal and 1e400 to inf.  Text that is 0 (``0``,
    ``-0.0``, ``0e5``) or infinity (TOML's ``inf``) is read as it says."""
    value = float(text)
    digits = text.replace("_", "").lstrip("+-")  # TOML writes 1_000.5 and +0.5
    if math.isinf(value) and "inf" not in digits:
        raise NumberTextError(text, f"is beyond the largest float64 ({FLOAT64_MAX!r})",
                              False, FLOAT64_RANGE)
    if abs(value) < FLOAT64_MIN and not _ZERO_TEXT.fullmatch(digits):
        raise NumberTextError(text, f"is below the smallest float64 ({FLOAT64_MIN!r}, the "
                              "smallest normal one) and is not 0", False, FLOAT64_RANGE)
    return value


def read_number(text: str, name: str, integer: bool = False, allowed: str = "") -> int | float:
    """``number_text(text)``, else one ``ConfigError`` naming ``name`` (an option as typed,
    ``--sigma``), what is wrong and what is allowed (``allowed``, then how it is written)."""
    try:
        return number_text(text, integer)
    except NumberTextError as exc:
        raise ConfigError(f"{name}={exc}; allowed: {allowed + ', ' if allowed else ''}"
                          f"{exc.allowed}") from None


def read_numbers(text: str, name: str, integer: bool = False, allowed: str = "",
                 sep: str = ",") -> tuple:
    """The numbers of ``text``, ``sep``-separated, each read by ``number_text``; one
    ``ConfigError`` naming ``name``, the whole text and the item at fault otherwise."""
    try:
        return tuple(number_text(x, integer) for x in text.split(sep))
    except NumberTextError as exc:
        raise ConfigError(f"{name}={text!r}: {exc}; allowed: "
                          f"{allowed + ', ' if allowed else ''}each {exc.allowed}") from None


def as_typed(msg: str, name: str, value: Any, option: str, text: str) -> str | None:
    """``msg``, a refusal naming ``name={value!r}`` first, as the command line gave the
    value: ``option`` and ``text`` as typed (``"eps=0.0 is invalid; ..."`` -> ``"--eps=0 is
    invalid; ..."``, ``"metric='m:f' cannot ..."`` -> ``"--metric=m:f cannot ..."``): an option's
    refusal echoes what was typed, never Python's form of what it was read as; None if
    ``msg`` starts otherwise."""
    head = f"{name}={value!r}"
    if msg.startswith(head) and msg[len(head):len(head) + 1] in (" ", ":"):
        return f"{option}={text}{msg[len(head):]}"
    return None


def integer_option(text: str) -> int:
    """argparse's ``type`` for an integer option: ``number_text``'s reading, its refusal
    said as ``argument --seed: '1_0' is invalid; allowed: ...``."""
    try:
        return number_text(text, integer=True)
    except NumberTextError as exc:
        raise argparse.ArgumentTypeError(f"{exc}; allowed: {exc.allowed}") from None


def number_option(text: str) -> float:
    """argparse's ``type`` for a real-valued option, as ``integer_option``."""
    try:
        return number_text(text)
    except NumberTextError as exc:
        raise argparse.ArgumentTypeError(f"{exc}; allowed: {exc.allowed}") from None


def kept_as_typed(option_type):
    """argparse's ``type`` that refuses what ``option_type`` (``number_option``,
    ``integer_option``) refuses, as the option is parsed, and keeps the text as typed: an
    option whose range is checked later reads it then (``read_number``), and a refusal
    echoes it (``--sigma=1.50 is invalid``, not Python's ``1.5``: ``as_typed``)."""
    def check(text: str) -> str:
        option_type(text)
        return text
    return check


def _names_a_directory(text: str) -> bool:
    """Whether ``text`` ends in a path separator: on POSIX it then names a directory (open()
    of ``ok.toml/`` fails), but ``Path`` drops the separator (``Path('ok.toml/')`` is
    ``ok.toml``), so a file argument read through it took the file."""
    return text.endswith(tuple(sep for sep in (os.sep, os.altsep) if sep))


def _not_a_file(text: str, or_dir: bool) -> str | None:
    """What is wrong with ``text`` as a file's path (``or_dir``: or a directory's), None
    if nothing: the one rule of ``file_path``, ``file_or_dir_path`` and ``check_file_path``."""
    if not _names_a_directory(text):
        return None
    if not or_dir:
        return f"{text!r} ends in {text[-1]!r}: it names a directory; allowed: a file path"
    if not os.path.isdir(text):
        return (f"{text!r} ends in {text[-1]!r}: it names a directory, and is not one; "
                "allowed: a file path, or a directory's")
    return None


def file_path(text: str) -> Path:
    """argparse's ``type`` for an argument naming a file (read or written): its ``Path``,
    refused when the text ends in a separator, as any path that is not a file is
    (``--report='r.md/' ends in '/': it names a directory; allowed: a file path``)."""
    if (why := _not_a_file(text, or_dir=False)) is not None:
        raise argparse.ArgumentTypeError(why)
    return Path(text)


def file_or_dir_path(text: str) -> Path:
    """argparse's ``type`` for an argument naming a file or a directory (a log, a run's
    directory): a text ending in a separator must be a directory."""
    if (why := _not_a_file(text, or_dir=True)) is not None:
        raise argparse.ArgumentTypeError(why)
    return Path(text)


def check_file_path(path: Any, name: str, or_dir: bool = False) -> None:
    """The API's ``file_path`` (``or_dir``: ``file_or_dir_path``): a path given as text
    ending in a separator is one ``ConfigError`` naming the argument ``name``
    (``fastsim.read_logs('log.csv/')`` read log.csv, which ``fastsim replay log.csv/``
    refuses).  A path object has no trailing separator (``Path('a/')`` is ``a``)."""
    if isinstance(path, str) and (why := _not_a_file(path, or_dir)) is not None:
        raise ConfigError(f"{name}={why}")


def is_path(v: Any) -> bool:
    """A path a user gave: a path object, or text that is not blank (``Path('')`` is
    ``.``, so ``out=""`` wrote into the current directory and ``read_logs("")`` read it)."""
    return isinstance(v, os.PathLike) or (isinstance(v, str) and bool(v.strip()))


def check_path_text(path: Any, option: str) -> None:
    """Refuse an output path holding a control character (a newline, a tab, an escape):
    a file so named breaks every tool that reads names a line at a time (ls, xargs, a
    shell loop) and every log line that names it.  Named as ``option``, as typed."""
    text = os.fsdecode(os.fspath(path))
    bad = next((c for c in text if unicodedata.category(c) == "Cc"), None)
    if bad is not None:
        raise ConfigError(f"{option}={text!r} holds a control character ({bad!r}); allowed: "
                          "a path without control characters")
