"""``fastsim`` command line: one subcommand per workflow.

Each subcommand lives in its own module exposing ``register(subparsers)``; this file
only wires them, takes the lock of any sweep directory a command writes in, and turns
``ConfigError`` into a one-line message and exit code 2
(``SimulationError``: exit code 1).  A reader that stops reading (``fastsim ... | head``)
ends the command quietly, exit code 141 as for SIGPIPE.  Ctrl-C and SIGTERM end it in one
line, exit code 130 or 143, its temporary files removed; if the command is inside a
compiled call that has not returned ``SIGNAL_GRACE_S`` later, at once (``_watch``).
"""
from __future__ import annotations

import _thread
import argparse
import contextlib
import importlib
import os
import re
import signal
import sys
import threading
import time
import warnings
from functools import partial
from pathlib import Path

from fastsim import __version__
from fastsim.errors import (ConfigError, InertSettingWarning, PlainPythonWarning,
                            SimulationError, Terminated, did_you_mean, one_line,
                            signal_handlers)
from fastsim.kernels.threads import numba_variables_error
from fastsim.values import file_or_dir_path, file_path

# Every subcommand module; each module's register() adds its parsers.  Every one is
# imported for any command line, --help and usage errors included: a module imports its
# heavy dependencies (numba, polars, scipy, numpy) in the functions that run the command
# (tests/test_cli_help.py checks it).
SUBCOMMAND_MODULES = [
    "fastsim.cli_run",
    "fastsim.sweep.cli",
    "fastsim.costaware.cli",
    "fastsim.replay.cli",
    "fastsim.detectors_cli",
    "fastsim.docs_figures",
    "fastsim.bench",
]
# Options naming a file or directory a command writes (argparse destinations; ``figures``
# is fastsim detectors' --figures directory).
OUTPUT_OPTIONS = ("out", "jobs_out", "summary_out", "figures_dir", "figures", "report",
                  "results", "doc")
# argparse reads "--load -inf" or "--gpus -1e3" as an unknown option; every number is a value.
# digits, then '.' and more digits only after a '.': "\d+\.?\d*" split a run of digits
# every way, quadratic in its length before a refusal
NEGATIVE_NUMBER = re.compile(r"^-(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$|^-(inf|infinity|nan)$",
                             re.I)


# an argument of one of these types names a file or a directory
PATH_TYPES = (Path, file_path, file_or_dir_path)


def _every_parser(parser: argparse.ArgumentParser) -> None:
    """What every (sub)parser does alike: a negative number is a value, never an option,
    an option is written in full, and help wraps between words only (``_whole_words``).
    argparse took any unambiguous prefix, so a guess stood for what was typed: ``run --k
    1``, meant as EvalStop's k, ran ``--kl-gamma 1``; ``--noise 0.1`` set ``--noise-rho``."""
    parser._negative_number_matcher = NEGATIVE_NUMBER
    parser.allow_abbrev = False
    parser.formatter_class = _whole_words(parser.formatter_class)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _every_parser(sub)


_WHOLE_WORDS: dict = {}
EXAMPLES_HEAD = "examples:\n"


def examples(*rows: tuple[str, str]) -> str:
    """A help epilog of command lines, each with what it does under it, kept line by line
    (``_whole_words``); tests/test_cli_help.py runs or parses every one."""
    return EXAMPLES_HEAD + "\n".join(f"  {command}\n      {what}" for command, what in rows)


def _whole_words(base: type) -> type:
    """``base`` with option help wrapped between words only: argparse cut a word longer
    than the help column inside it, so a spec meant to be copied from ``--help``
    (``peak:z=1.65,sigma0=0.015,min_evals=4,...``) read ``sigma0=0.0`` / ``15``."""
    if base not in _WHOLE_WORDS:
        import textwrap

        class WholeWords(base):
            def _fill_text(self, text, width, indent):
                if text.startswith(EXAMPLES_HEAD):  # a command per line, as typed
                    return "\n".join(indent + line for line in text.splitlines())
                return super()._fill_text(text, width, indent)

            def _split_lines(self, text, width):
                if isinstance(self, argparse.RawTextHelpFormatter):
                    return super()._split_lines(text, width)
                text = self._whitespace_matcher.sub(" ", text).strip()
                return textwrap.wrap(text, width, break_long_words=False)

        _WHOLE_WORDS[base] = WholeWords
    return _WHOLE_WORDS[base]


class OneLineParser(argparse.ArgumentParser):
    """A usage error in one line, naming the option and what it allows, then exit 2
    (argparse prints the whole usage first, a dozen lines at a subcommand)."""

    def error(self, message: str):
        # a value an option's type refused (fastsim.values.integer_option), echoed quoted:
        # "argument --seed: '1_0' is invalid" said as every other refusal, "--seed='1_0' ..."
        message = _TYPE_REFUSAL.sub(r"\1=\2", message)
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")

    def _check_value(self, action: argparse.Action, value) -> None:
        # a value outside an option's choices said as every refusal of a value is,
        # "--backend=x is invalid; allowed: local, dask", where argparse said "argument
        # --backend: invalid choice: 'x' (choose from 'local', 'dask')"; a command or a
        # kind by its place, "command 'runn' is invalid (did you mean run?); allowed: ..."
        if action.choices is None or value in action.choices:
            return
        allowed = [str(c) for c in action.choices]
        if action.option_strings:
            said = f"{max(action.option_strings, key=len)}={value}"
        else:
            said = f"{(action.metavar or action.dest).lower()} {value!r}"
        raise argparse.ArgumentError(None, f"{said} is invalid{did_you_mean(str(value), allowed)}"
                                           f"; allowed: {', '.join(allowed)}")


_TYPE_REFUSAL = re.compile(r"^argument ([^\s:]+): (')")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="fastsim",
        description="Fast, exact simulation of GPU platforms scheduling and stopping LLM "
        "fine-tuning jobs (EvalStop), and cost-aware learning.  Each command's options: "
        "fastsim COMMAND --help; a walkthrough: docs/tutorial.md in the repository.",
        epilog=examples(
            ("fastsim reproduce --quick",
             "the paper's table (95% intervals) and figures: results/reproduce-quick"),
            ("fastsim run --policy evalstop:k=2 --sigma 0.05 --clusters 2000",
             "one cell against no stop policy, paired on the same clusters"),
            ("fastsim sweep noise --out results/noise --clusters 200",
             "a sweep shipped with fastsim, or your TOML file (docs/sweeps.md)"),
            ("fastsim figures results/reproduce-quick",
             "redraw the paper's figures from a reproduction's results"),
            ("fastsim replay --example --policy evalstop:k=2 --policy patience:patience=3",
             "stop policies on a small log shipped with fastsim (yours: PATH)")),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(name).register(sub)
    _every_parser(parser)
    return parser


def hold_outputs(args: argparse.Namespace) -> list:
    """A sweep directory belongs to one process: every command writing in or below one
    (``--out`` and the like) holds its lock while it runs, and is refused, before any work,
    while another process has it (``fastsim.sweep.store.hold_sweep_dirs``)."""
    targets = [getattr(args, name, None) for name in OUTPUT_OPTIONS]
    if not any(t is not None for t in targets):
        return []
    from fastsim.values import check_path_text
    from fastsim.sweep.store import check_not_owned, hold_sweep_dirs

    for name, target in zip(OUTPUT_OPTIONS, targets):
        if target is not None:  # every output option, before any command looks at it
            check_path_text(target, "--" + name.replace("_", "-"))
    for name, target in zip(OUTPUT_OPTIONS, targets):
        check_not_owned(target, "--" + name.replace("_", "-"))
    return hold_sweep_dirs(*targets)


def _check_numba_variables() -> None:
    """numba reads ``NUMBA_NUM_THREADS`` and ``NUMBA_DISABLE_JIT`` when first imported, and
    a value fastsim cannot run with failed with a traceback (``fastsim.kernels.threads``):
    refuse it here, in one line, before anything imports numba."""
    why = numba_variables_error()
    if why is not None:
        print("fastsim: error: " + one_line(why), file=sys.stderr)
        sys.exit(2)


# read as on only when exactly "1" (kernels/jit.py, cli_run.py): yes, true or " 1" was off
SWITCH_VARIABLES = ("FASTSIM_NO_CACHE", "FASTSIM_NO_PARALLEL", "FASTSIM_PROGRESS")


def _switch_variables_ok() -> bool:
    """False, having said which in one line, when a switch variable is neither 0 nor 1."""
    for name in SWITCH_VARIABLES:
        value = os.environ.get(name)
        if value not in (None, "", "0", "1"):  # empty is unset, as a shell's NAME= means
            print("fastsim: error: " + one_line(f"{name}={value!r} is invalid; allowed: 1 (on), "
                  "0 or unset (off)"), file=sys.stderr)
            return False
    return True


def _command_parser(parser: argparse.ArgumentParser, args: argparse.Namespace,
                    argv: list[str], unknown: list[str]) -> argparse.ArgumentParser:
    """The parser of the (sub)command ``args`` ran, ``fastsim sweep`` or ``fastsim traces
    toy-rlhf``, or of the command before whose subcommand an ``unknown`` option was given
    (``fastsim --bogus sweep``: fastsim's): an option it does not know is refused naming
    it, and its ``--help``."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            name = getattr(args, action.dest, None)
            if name in action.choices:
                # the subcommand is the first word that is not an option (argparse's rule)
                i = next((i for i, a in enumerate(argv) if not a.startswith("-")), len(argv))
                if any(a in unknown for a in argv[:i]):
                    return parser
                return _command_parser(action.choices[name], args, argv[i + 1:], unknown)
    return parser


def _nearest_option(parser: argparse.ArgumentParser, unknown: list[str]) -> str:
    """`` (did you mean --n-jobs?)`` for the first unknown option (``--njobs``, ``--n_jobs``)
    near one of the command's own, as a misspelt keyword or sweep field gets; for the
    start of some (``--pol``), those options, which are never abbreviated."""
    options = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
    for word in unknown:
        if word.startswith("--"):
            typed = word.partition("=")[0]
            if typed in ("--threads", "--num-threads", "--n-threads"):
                return (" (the thread count is numba's: NUMBA_NUM_THREADS=2 fastsim ..., one "
                        "thread per core when unset; results are the same bits for any count)")
            spec = _spec_parameter(parser, typed[2:])
            if spec:
                return spec
            longer = [o for o in options if o.startswith(typed)]
            if longer:
                return (f" (options are written in full: did you mean "
                        f"{' or '.join(longer[:4])}{' or ...' if len(longer) > 4 else ''}?)")
            wanted = typed.replace("_", "-").lower()
            # never the typed flag's opposite (--no-figures is not a misspelt --figures), and
            # only an option of the same first letter: short names are close by ratio alone
            # (--reps and --eps, --est-sigma and --cost-sigma), and a slip is rarely first
            return did_you_mean(wanted, [o for o in options if o[2:3] == wanted[2:3]
                                         and not _negation(o, wanted)], cutoff=0.8)
    return ""


def _spec_parameter(parser: argparse.ArgumentParser, name: str) -> str:
    """`` (k is a parameter of evalstop: ...)`` if ``name`` is a built-in policy's or
    scheduler's parameter and the command takes that spec (``run --k 3``)."""
    from fastsim import registry as R

    for spec, owners in R.spec_owners(name):
        option = f"--{spec}"
        if option in parser._option_string_actions:
            return (f" ({name} is a parameter of {', '.join(owners[:3])}: it goes in the spec, "
                    f"{option} {owners[0]}:{name}=...)")
    return ""


def _negation(a: str, b: str) -> bool:
    """Whether options ``a`` and ``b`` are one flag and its ``--no-`` form."""
    bare = lambda o: o[2:].removeprefix("no-")  # noqa: E731
    return a != b and bare(a) == bare(b)


def _check_option_order(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """Refuse a command's option typed before the command (``fastsim --out x sweep``):
    argparse took its value for the command and said "invalid choice: 'x'"; and the start
    of an option (``--ou``), which argparse took for the option before ``allow_abbrev``."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        j = next((j for j, a in enumerate(argv) if a in action.choices), None)
        if j is None:
            return
        command = action.choices[argv[j]]
        for a in argv[:j]:
            option = a.partition("=")[0]
            if (a.startswith("-") and option not in parser._option_string_actions
                    and option in command._option_string_actions):
                command.error(f"{option} is given before {argv[j]!r}; allowed: after it")
        _check_option_order(command, argv[j + 1:])
        return
    for a in argv:  # a command's own options, each written in full
        option = a.partition("=")[0]
        if a == "--":
            return
        if (option.startswith("--") and option not in parser._option_string_actions
                and any(o.startswith(option) for o in parser._option_string_actions)):
            # before parsing: a required option abbreviated was "required: --out"
            parser.error(f"unrecognized arguments: {a}{_nearest_option(parser, [a])}")


def _check_options(command: argparse.ArgumentParser, argv: list[str]) -> None:
    """Refuse an option that takes one value given twice (``fastsim run --policy A
    --policy B``: argparse kept the last without a word, where ``replay`` takes several),
    and a path given empty (``--out ''`` read as ``.``: written into the current
    directory; ``--like ''`` refused as "--like .: is a directory"), or a positional one
    (``fastsim figures "$DIR"`` with DIR unset drew the current directory's sweep,
    ``fastsim replay ''`` replayed its trainer_state.json)."""
    seen: set[str] = set()
    is_value = False  # the token is the value of the option before it
    for i, a in enumerate(argv):
        if is_value:
            is_value = False
            continue
        option, eq, value = a.partition("=")
        action = command._option_string_actions.get(option)
        if action is None and not a.strip():  # every command's positionals are paths
            names = [x.metavar or x.dest.upper() for x in command._positionals._group_actions]
            command.error(f"{'/'.join(names) or 'an argument'} is empty; allowed: a path")
        is_value = action is not None and not eq and action.nargs != 0
        if type(action) is not argparse._StoreAction:  # flags, counts, lists: may repeat
            continue
        if action.dest in seen:
            command.error(f"{action.option_strings[-1]} is given twice; allowed: once")
        seen.add(action.dest)
        value = value if eq else (argv[i + 1] if i + 1 < len(argv) else None)
        is_path = action.dest in OUTPUT_OPTIONS or action.type in PATH_TYPES  # inputs too
        if is_path and value is not None and not value.strip():
            command.error(f"{action.option_strings[-1]} is empty; allowed: a path")


# How long after Ctrl-C or SIGTERM the command has to take the signal before it is ended
# at once (``_watch``).  Python runs a signal's handler in the main thread between two
# steps of Python code, so not while a compiled call runs: a numba kernel, or a user's
# @njit stop policy or key, never checks for a signal (one looping for minutes held the
# command for minutes; one looping forever, until kill -9).
SIGNAL_GRACE_S = 2.0

# The signals the main thread has taken (its handlers below have run): how ``_watch``
# tells a command that took one, whose own ending then goes on however long it takes (a
# Dask cluster closed), from one stuck in a compiled call.
_TAKEN: list[int] = [0]


def _interrupt(signum, frame):
    _TAKEN[0] += 1
    raise KeyboardInterrupt


def _terminate(signum, frame):
    _TAKEN[0] += 1
    raise Terminated()


# This process's wakeup pipe while ``_stopped_if_stuck`` runs: (read end, write end, the
# wakeup fd set before)
_WAKEUP: list[int] = []


@contextlib.contextmanager
def _stopped_if_stuck(signums, taken: int):
    """For the block, Python's C-level handler of each of ``signums`` writes its number
    into a pipe (``signal.set_wakeup_fd``), which it does at once, whatever the main
    thread runs, and a thread (``_watch``) reads it: a command still in a compiled call
    ``SIGNAL_GRACE_S`` later is ended there (the kernels release the GIL, ``nogil``, so
    the thread runs meanwhile).  ``taken``: ``_TAKEN`` before the handlers were set.  A
    wakeup fd set before (an asyncio loop's in the main thread) is sent every byte too,
    and set back after.  Only the main thread may set it: the caller passes no signals
    elsewhere."""
    if not signums:
        yield
        return
    read_fd, write_fd = os.pipe()  # neither is inherited by a program a command starts
    os.set_blocking(write_fd, False)  # as set_wakeup_fd requires: a signal never waits
    previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    _WAKEUP[:] = [read_fd, write_fd, previous]
    done = threading.Event()
    watcher = threading.Thread(target=_watch, args=(read_fd, previous, frozenset(signums),
                                                    taken, done),
                               name="fastsim-signals", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        mine = signal.set_wakeup_fd(previous)
        if mine != write_fd:  # another's, set in the block: theirs to undo
            signal.set_wakeup_fd(mine)
        _WAKEUP.clear()
        os.close(write_fd)  # the watcher reads the pipe's end, closes it and returns
        watcher.join(timeout=1.0)


def _watch(read_fd: int, forward: int, signums: frozenset, taken: int,
           done: threading.Event) -> None:
    """Read the signal numbers the pipe brings; after one of ``signums``, wait
    ``SIGNAL_GRACE_S`` for the command to end (``done``) or to take a signal (``_TAKEN``
    changed since the batch read before this one: one can be taken before its number is
    read, and held by a write that raises it again after); if neither, the main thread
    is in a call that never returned to Python, and the process ends at once, as
    ``kill -9`` ends it: what that leaves, every command copes with (docs/sweeps.md)."""
    try:
        while True:
            try:
                data = os.read(read_fd, 512)
            except OSError:
                return
            if not data or done.is_set():
                return
            if forward >= 0:
                with contextlib.suppress(OSError):
                    os.write(forward, data)
            caught = [s for s in data if s in signums]
            if not caught:
                continue
            read_after = _TAKEN[0]
            if done.wait(SIGNAL_GRACE_S):
                return
            if _TAKEN[0] != taken:
                taken = read_after
                continue
            _end_now(caught[0])
    finally:
        os.close(read_fd)


def _end_now(signum: int) -> None:
    """Say the command's line and end the process, without waiting for the main thread:
    stdout is flushed first (a command's results printed so far), and neither waits more
    than a second (a reader that stopped reading)."""
    def say():
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        with contextlib.suppress(Exception):
            print(_stopped_line(signum == signal.SIGTERM, stuck=True), file=sys.stderr,
                  flush=True)
    if "fastsim.sweep.store" in sys.modules:  # blocks registered with unmade_if_ended
        with contextlib.suppress(Exception):
            sys.modules["fastsim.sweep.store"].unmake_trying()
    speaker = threading.Thread(target=say, daemon=True)
    speaker.start()
    speaker.join(timeout=1.0)
    os._exit(143 if signum == signal.SIGTERM else 130)


def _forget_wakeup() -> None:
    """In a child forked from a command (``os.fork``), whose signals are its own: the
    parent's pipe no longer hears them (``_stopped_if_stuck``)."""
    if _WAKEUP:
        read_fd, write_fd, previous = _WAKEUP
        with contextlib.suppress(ValueError, OSError):
            signal.set_wakeup_fd(previous)
        for fd in (read_fd, write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
        _WAKEUP.clear()


os.register_at_fork(after_in_child=_forget_wakeup)


def _redeliver(unraisable) -> None:
    """A signal's exception raised while a finaliser or a weak reference's callback ran
    (matplotlib and numba make many) is dropped by Python, which prints 'Exception
    ignored' and goes on: Ctrl-C was lost and the command ran to its end.  Deliver it
    again to the main thread, where the command's code takes it, from another thread a
    moment later: raised in this hook, it would be dropped as well.  Should it land in a
    finaliser again, it comes back here, and again, until it lands in the command."""
    exc = unraisable.exc_value
    if not isinstance(exc, KeyboardInterrupt):
        return sys.__unraisablehook__(unraisable)
    signum = signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT
    threading.Thread(target=_interrupt_soon, args=(signum,), daemon=True).start()


# Whether ``main`` is running a command, under a lock: a signal delivered again after
# it returned would be a traceback at exit (the command finished meanwhile: nothing lost)
_DELIVERY = threading.Lock()
_RUNNING: list[bool] = [False]


def _interrupt_soon(signum: int) -> None:
    time.sleep(0.02)  # the hook that started this thread has returned by then
    with _DELIVERY:
        if _RUNNING[0]:
            _thread.interrupt_main(signum)


def main(argv: list[str] | None = None) -> int:
    """Ctrl-C or SIGTERM at any moment, parsing and importing included, ends the command
    with one line (Python's traceback of ``KeyboardInterrupt`` otherwise), after every
    ``finally`` has removed its temporary files: exit 130, or 143 for SIGTERM."""
    hook = sys.unraisablehook
    # a handler set by whoever runs fastsim (SIG_IGN for SIGTERM, say, or a program's own
    # for Ctrl-C, fastsim's own in a command docs-figures runs) is theirs: kept
    ours = {s: h for s, h, default in ((signal.SIGINT, _interrupt, signal.default_int_handler),
                                       (signal.SIGTERM, _terminate, signal.SIG_DFL))
            if signal.getsignal(s) is default}
    taken = _TAKEN[0]
    # a command docs-figures runs is a step of that one, which stays the command its
    # stopped line names (it said "fastsim traces: ... nothing half-written is left"), and
    # still runs when the step returns
    depth, running = len(_COMMAND), _RUNNING[0]
    with signal_handlers(ours) as main_thread:  # only the main thread may set handlers
        if main_thread:
            sys.unraisablehook = _redeliver
        try:
            with _stopped_if_stuck(ours if main_thread else {}, taken):
                _RUNNING[0] = True
                try:
                    return _main(argv)
                finally:
                    with _DELIVERY:
                        _RUNNING[0] = running
        except KeyboardInterrupt as exc:
            terminated = isinstance(exc, Terminated)
            print(_stopped_line(terminated), file=sys.stderr)
            return 143 if terminated else 130
        finally:
            sys.unraisablehook = hook
            del _COMMAND[depth:]


def _stopped_line(terminated: bool, stuck: bool = False) -> str:
    """The one line of a command Ctrl-C or SIGTERM ended; ``stuck``: ended at once, in a
    compiled call, by ``_watch`` (a temporary file then stays, at worst, until the next
    write of its target or the sweep's next run removes it)."""
    name = "fastsim" + (f" {_COMMAND[0]}" if _COMMAND else "")
    how = "terminated" if terminated else "interrupted"
    if stuck:
        how += (f"; a compiled call was still running {SIGNAL_GRACE_S:g} s later, so it "
                "stopped there")
    if _COMMAND and _COMMAND[0].partition(" ")[0] in _RESUMES:
        kept = "finished work is kept: the same command resumes it"
    elif stuck and "fastsim.io" in sys.modules and sys.modules["fastsim.io"].writing():
        kept = "the file being written is left under a temporary name, which its next write removes"
    else:
        kept = "nothing half-written is left"
    return f"{name}: {how}; {kept}"


_COMMAND: list[str] = []  # the subcommands being run, outermost first, for the message above
# the subcommands that keep each finished chunk and resume from them when run again; the
# others write their outputs whole or not at all, so an interrupted one kept nothing
_RESUMES = ("sweep", "reproduce", "docs-figures")


def _show_warning(command: str, shown, message, category, *rest, **kw) -> None:
    """A ``PlainPythonWarning`` as one ``warning:`` line (Python's own format adds the
    line of fastsim that issued it); any other warning as before."""
    if issubclass(category, PlainPythonWarning):
        print(f"fastsim {command}: warning: {one_line(str(message))}", file=sys.stderr)
    else:
        shown(message, category, *rest, **kw)


def _main(argv: list[str] | None) -> int:
    _check_numba_variables()
    if not _switch_variables_ok():
        return 2
    parser = build_parser()
    # argparse leaves a subcommand's unknown options to the top parser, whose error named
    # "fastsim" and pointed to fastsim --help, which does not list the subcommand's options
    argv = sys.argv[1:] if argv is None else list(argv)
    _check_option_order(parser, argv)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        command = _command_parser(parser, args, argv, unknown)
        command.error(f"unrecognized arguments: {' '.join(unknown)}"
                      f"{_nearest_option(command, unknown)}")
    _check_options(_command_parser(parser, args, argv, []), argv)
    # with its action (costaware sgd, traces toy-rlhf): the command as typed
    action = getattr(args, f"{args.command}_command", None)
    _COMMAND.append(f"{args.command} {action}" if isinstance(action, str) else args.command)
    held: list = []
    try:
        held = hold_outputs(args)  # released when the command returns
        with warnings.catch_warnings():
            # the API's notes of inert settings: a command says its own, as note: lines
            warnings.simplefilter("ignore", InertSettingWarning)
            warnings.showwarning = partial(_show_warning, _COMMAND[-1], warnings.showwarning)
            return int(args.func(args) or 0)
    except ConfigError as exc:
        if held:  # refused: the lock files it made go too
            from fastsim.sweep.store import unmake_held

            unmake_held(held)
        print(f"fastsim {_COMMAND[-1]}: error: {exc}", file=sys.stderr)
        return 2
    except SimulationError as exc:  # a lost Dask cluster's may echo an address given
        print(f"fastsim {_COMMAND[-1]}: error: {one_line(str(exc))}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # Python would report the closed pipe again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
