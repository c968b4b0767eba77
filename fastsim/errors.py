"""The one exception type users see for bad input, the fences around user code, and the
one context that sets signal handlers for a block.

No numpy here: ``fastsim.cli`` imports this module before it sets its signal handlers."""
from __future__ import annotations

import contextlib
import contextvars
import difflib
import functools
import inspect
import os
import re
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only
    import numpy as np


# An echoed word longer than this is cut in its middle: a value of 5,000 characters was
# echoed whole.  Room for a file name the file system allows (255 bytes) and its option,
# whole.  A message of many long words is cut to MAX_MESSAGE.
MAX_WORD = 300
MAX_MESSAGE = 2000
_LAYOUT = re.compile(r"\n[ \t]+")  # a repr's line break and indent (numpy's 2-D arrays)
_LONG_WORD = re.compile(r"\S{%d,}" % (MAX_WORD + 1))


def one_line(message: str) -> str:
    """``message`` as the one line an error prints: a repr's own line breaks (a 2-D numpy
    array's, one line per row) read as spaces; any other control character escaped as
    Python writes it (``\\n``, ``\\x1b``), since a value's newline broke the line and its
    escape sequence reached the terminal; a word longer than ``MAX_WORD`` and a message
    longer than ``MAX_MESSAGE`` cut in the middle, saying how long they were."""
    # a message's backslashes are its reprs' own escapes: doubled they would read worse
    text = printable(_LAYOUT.sub(" ", message.strip()), backslash=False)
    text = _LONG_WORD.sub(lambda m: _cut(m.group(), MAX_WORD), text)
    return _cut(text, MAX_MESSAGE)


def printable(text: str, backslash: bool = True) -> str:
    """``text`` with each control character escaped as Python writes it (``\\n``,
    ``\\x1b``): a value printed in a line of output (a log's job id) broke the line, and
    its escape sequence reached the terminal.  A backslash is escaped too (``\\\\``), so
    that two texts never print alike (an id holding a newline, one holding ``\\`` and
    ``n``)."""
    if text.isprintable() and not (backslash and "\\" in text):
        return text
    return "".join(repr(c)[1:-1] if not c.isprintable() or (backslash and c == "\\") else c
                   for c in text)


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    keep = limit - 30
    return f"{text[:keep * 2 // 3]}...({len(text)} characters)...{text[-(keep // 3):]}"


# The API's own names of the command-line options whose checks it shares, and the texts
# its caller gave, inside ``api_words`` (None: the command line's words, the options as typed)
_API_WORDS: contextvars.ContextVar[tuple[dict[str, str], tuple[str, ...]] | None] = \
    contextvars.ContextVar("api_words", default=None)


@contextlib.contextmanager
def api_words(names: dict[str, str], values: Any = ()):
    """Inside the block, an error names each option of ``names`` as the API's argument it
    is (``{"--out": "out"}``: ``--out DIR: exists...`` -> ``out=DIR: exists...``, ``a new
    --out directory`` -> ``a new out directory``): ``fastsim.sweep(out=...)`` shares the
    checks of ``fastsim sweep --out``, whose messages name the option.  ``values``: the
    paths the caller gave, echoed as given: an option's name inside one of them, or inside
    any path (``x/--out/y``), is the user's text and stays as it is."""
    words, kept = _API_WORDS.get() or ({}, ())
    texts = {t for v in values for t in (os.fspath(v), str(Path(v))) if t}
    token = _API_WORDS.set(({**words, **names}, (*kept, *texts)))
    try:
        yield
    finally:
        _API_WORDS.reset(token)


def _in_api_words(message: str) -> str:
    words, kept = _API_WORDS.get() or ({}, ())

    def one_of(texts) -> str:  # longest first
        return "|".join(re.escape(t) for t in sorted(set(texts), key=len, reverse=True))
    for option, name in words.items():
        opt = rf"(?<![\w/\\.-]){re.escape(option)}"  # not inside a word or a path
        pattern = rf"(?P<word>{opt}(?![\w/\\-]|\.\w)(?P<eq>=| (?!directory\b))?)"
        if kept:  # the head "--out VALUE", then the caller's texts elsewhere, kept as given
            others = one_of(t for t in kept if t not in words)  # "--out" alone: the head's
            pattern = (rf"(?P<head>{opt}[= ])(?P<value>{one_of(kept)})(?![\w-])|"
                       + (rf"(?P<given>{others})|" if others else "") + pattern)

        def say(m: re.Match, name: str = name) -> str:
            if m.group("word") is not None:
                return name + ("=" if m.group("eq") else "")
            return name + "=" + m.group("value") if m.group("head") else m.group()
        message = re.sub(pattern, say, message)
    return message


class ConfigError(ValueError):
    """A value outside what fastsim accepts: the message names the field, the value
    and what is allowed.  The CLI prints it without a traceback and exits with 2; the
    message is ``one_line``, whatever value it echoes, and in the API's words inside
    ``api_words``."""

    def __init__(self, message: Any = "", *args: Any) -> None:
        if isinstance(message, str):
            message = one_line(_in_api_words(message))
        super().__init__(message, *args)


class InertSettingWarning(UserWarning):
    """A workload setting the API was given that no result of the run depends on (a
    hacking rate of a job type the mix leaves out, say): ``fastsim.config.inert_settings``
    says which; or a baseline that is the policy itself (``self_baseline``), whose changes
    are all 0.  The command line says its own ``note:`` lines instead."""


class PlainPythonWarning(UserWarning):
    """A user stop policy whose plain-Python version (``.py_func``) decided otherwise than
    its compiled self on cluster 0 (``fastsim.plain_python``), both returning: a rounding
    difference on a near tie, or code whose compiled meaning differs from Python's.  The
    command line says it as one ``warning:`` line."""


class SimulationError(RuntimeError):
    """The engine could not finish a cluster (it reached its bound on scheduling points,
    e.g. on non-finite times); the CLI prints the message without a traceback, exit 1."""


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, a job scheduler's stop), raised where the process stands as
    Ctrl-C's ``KeyboardInterrupt`` is (``fastsim.cli``): Python's default for SIGTERM ends
    the process on the spot, leaving the temporary file of a write in progress, and the
    lock line of a sweep directory naming a process that is gone."""


class ClusterLostError(SimulationError):
    """The Dask cluster running a sweep went away mid-run (no worker left, a chunk lost
    with every worker that ran it, or the scheduler gone): chunks already written are
    kept and the same command resumes (lost in the first-cluster trial of user functions,
    before any chunk, the run wrote nothing, and says so).  Printed as one line, exit 1,
    like its base."""


@contextlib.contextmanager
def signal_handlers(handlers: dict[int, Any]):
    """Set ``handlers`` (signal number to handler) for the block, and restore the previous
    ones after it.  Yields whether they were set: only the main thread may set a handler,
    and one set outside Python (``getsignal`` None) could not be restored, so neither
    case changes anything.  Here, not in ``fastsim.io``, because ``fastsim.cli`` sets its
    SIGTERM handler with it before importing anything heavy (``fastsim.io`` brings polars)."""
    if (threading.current_thread() is not threading.main_thread()
            or any(signal.getsignal(s) is None for s in handlers)):
        yield False
        return
    previous = {s: signal.signal(s, h) for s, h in handlers.items()}
    try:
        yield True
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)



NJIT_ALLOWED = "a pure @njit function of its declared arguments (docs/extending.md)"


@contextlib.contextmanager
def user_code(what: str, name: str, allowed: str = NJIT_ALLOWED, where=lambda: ""):
    """A user's function that fails (raises, or cannot be compiled for the arguments it
    is given: a write into a read-only observation, say) is one line naming it and what
    such a function is (``allowed``: a metric is plain Python, not @njit).  ``where()``
    (`` (FILE, line N: def f(...):)``, asked only on a failure) places a typing error
    that quotes no line of the user's (a name never defined)."""
    try:
        yield
    except ConfigError:
        raise
    except Exception as exc:  # numba's typing errors, the function's own exceptions
        # raised inside a parallel kernel, the function's own exception arrives as the
        # context of a SystemError ("returned a result with an exception set")
        while isinstance(exc, SystemError) and (exc.__cause__ or exc.__context__) is not None:
            exc = exc.__cause__ or exc.__context__
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()] or [repr(exc)]
        said = (_typing_cause(lines) if type(exc).__name__ == "TypingError"
                else lines[0] + _raised_at(exc))
        if type(exc).__name__ == "TypingError" and not re.search(r", line \d+", said):
            said += where()
        raise ConfigError(f"{what} {name} failed: {type(exc).__name__}: {said}; allowed: "
                          f"{allowed}") from None


def _raised_at(exc: BaseException) -> str:
    """`` (FILE, line N: CODE)`` of the innermost frame of ``exc`` in the user's files (not
    Python's, an installed package's or fastsim's): the line that raised, also in compiled
    code, whose frame numba adds.  Empty where there is none, or where the message already
    says it (a refusal of ``job_type == "rlhf"`` names the user's line itself)."""
    import traceback

    from fastsim.user_modules import user_line

    found = user_line([(f.filename, f.lineno) for f in traceback.extract_tb(exc.__traceback__)
                       if not f.filename.startswith("<")])
    if found is None or found[0] in str(exc):
        return ""
    where, code = found
    return f" ({where}: {code})" if code else f" ({where})"


_PIPELINE = "Failed in nopython mode pipeline"
_AT_LINE = re.compile(r'File "(.+)", line (\d+):')


def _typing_cause(lines: list[str]) -> str:
    """What a numba typing error says went wrong, and where in the user's code: its first
    line is only the compiler stage ("Failed in nopython mode pipeline (step: nopython
    frontend)").  The cause is its innermost rejection (``NumbaTypeError: ...``), else its
    first line past the stage; the place is the first source line it quotes outside
    fastsim, the line above the caret."""
    causes = [ln.split(":", 1)[1].strip() for ln in lines if re.match(r"Numba\w*Error:", ln)]
    rest = [ln for ln in lines if not ln.startswith(_PIPELINE)] or lines
    cause = causes[-1] if causes else rest[0]
    if not causes and cause.endswith(":") and len(rest) > 1:  # "... for signature:" ">>> f(...)"
        cause = f"{cause} {rest[1].lstrip('> ')}"
    import importlib.util  # here: only a failure pays for it

    ours = [os.path.dirname(os.path.abspath(__file__)),
            *importlib.util.find_spec("fastsim.kernels").submodule_search_locations]
    for i, ln in enumerate(lines):
        found = _AT_LINE.match(ln)
        if found and not any(os.path.abspath(found[1]).startswith(os.path.abspath(d) + os.sep)
                             for d in ours):
            code = next((lines[k - 1] for k in range(i + 1, len(lines)) if lines[k] == "^"), "")
            return f"{cause} ({os.path.basename(found[1])}, line {found[2]}: {code})"
    return cause


def readonly(a: np.ndarray) -> np.ndarray:
    """A view user code cannot write through (what it reads is shared by both arms of a
    run, and reused between chunks).  Made over a read-only buffer: a plain view's flag
    could be set back (``x.flags.writeable = True``, numpy allows it while the array it
    views is writable), and a metric that did so rewrote the per-job table."""
    import numpy as np  # here: the command line imports this module before numpy

    return np.asarray(memoryview(a).toreadonly())



def known_keywords(what: str, elsewhere: dict[str, str] | None = None):
    """Decorate a public function (or ``__init__``) so that a keyword argument it does not
    take is one ``ConfigError`` naming it, the nearest allowed one and all allowed ones,
    instead of Python's ``TypeError``; positional arguments pass through untouched.
    ``elsewhere`` maps a keyword another function takes to where it goes, said after.
    A required argument left out is one ``ConfigError`` too, naming it as the caller's
    call names it (``fastsim.sweep(): out is missing``), where Python's ``TypeError``
    named the function behind it (``run_sweep_file() missing 1 required ...``)."""
    def decorate(fn):
        params = inspect.signature(fn).parameters.values()
        allowed = tuple(p.name for p in params if p.name != "self" and p.kind in
                        (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
        required = [p for p in params if p.default is p.empty and p.kind in
                    (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        shape = [p.name for p in required if p.name != "self"]
        if len(shape) < len(allowed):
            shape.append("...")
        call = f"{what.removesuffix('()')}({', '.join(shape)})"

        @functools.wraps(fn)
        def checked(*args, **kwargs):
            for key in kwargs:
                if key not in allowed:
                    exc = unknown_keyword(what, key, allowed)
                    if elsewhere and key in elsewhere:
                        exc = ConfigError(f"{exc}; {key} is {elsewhere[key]}")
                    raise exc
            missing = [p.name for i, p in enumerate(required) if p.name not in kwargs and
                       (p.kind is p.KEYWORD_ONLY or i >= len(args))]
            if missing:
                raise ConfigError(f"{what}: {' and '.join(missing)} "
                                  f"{'is' if len(missing) == 1 else 'are'} missing; allowed: "
                                  f"{call}")
            return fn(*args, **kwargs)
        return checked
    return decorate


def nearest(word: str, allowed, cutoff: float = 0.6) -> str | None:
    """The allowed name nearest ``word`` (difflib's), or None when none is close."""
    near = difflib.get_close_matches(word, list(allowed), n=1, cutoff=cutoff)
    return near[0] if near else None


def did_you_mean(word: str, allowed, cutoff: float = 0.6) -> str:
    """`` (did you mean n_jobs?)``: the allowed name nearest ``word``, or "" when none is
    close; every refusal of an unknown name words its hint so."""
    near = nearest(word, allowed, cutoff)
    return f" (did you mean {near}?)" if near is not None else ""


def quoted(names) -> str:
    """``'run', 'global_step'``: names read from a user's file, each quoted as a refusal
    quotes the one it names, so a space or separator inside one shows (``'job_id;step'``
    is one column)."""
    return ", ".join(repr(str(n)) for n in names)


def counted(n: int, noun: str) -> str:
    """``1 cluster``, ``3 clusters``: a count and its noun, singular for one ("1 clusters"
    was said)."""
    return f"{n} {noun}{'s' * (n != 1)}"


def first_twice(names):
    """The first item of ``names`` (a list the user gave) that an earlier one equals, else
    None."""
    names = list(names)
    return next((m for i, m in enumerate(names) if m in names[:i]), None)


def named_twice(names, noun: str) -> str | None:
    """What is allowed where ``names`` (a list the user gave: metrics, figure formats) name
    one twice, else None; ``noun`` says what each is.  Named twice, a metric was computed
    (or a figure drawn) once and nothing said, where the second was likely meant as
    another."""
    twice = first_twice(names)
    return None if twice is None else f"each {noun} named once ({twice} is named twice)"


def did_you_mean_path(path, candidates) -> str:
    """``did_you_mean`` for a path: of ``candidates`` (paths in ``path``'s directory), the
    one whose name is nearest ``path``'s, written as ``path`` is (``results/reproduce``:
    ``results/reproduce-quick``).  Names are compared, not whole paths: a shared directory
    made every candidate look near."""
    from pathlib import Path

    path = Path(path)
    near = nearest(path.name, [Path(c).name for c in candidates])
    if near is None:
        return ""
    return f" (did you mean {path.parent / near if path.parent != Path('.') else near}?)"


def unknown_keyword(what: str, key: str, allowed) -> ConfigError:
    """The one-line error for a keyword ``what`` does not take: the nearest allowed name
    (left out when none is close) and every allowed one."""
    return ConfigError(f"{what} keyword {key!r} is unknown{did_you_mean(key, allowed)}; "
                       "allowed: " + ", ".join(allowed))
