"""``fastsim`` command line: one subcommand per workflow.

Each subcommand lives in its own module exposing ``register(subparsers)``; this file
only wires them, takes the lock of any sweep directory a command writes in, and turns
``ConfigError`` into a one-line message and exit code 2
(``SimulationError``: exit code 1).  A reader that stops reading (``fastsim ... | head``)
ends the command quietly, exit code 141 as for SIGPIPE.  Ctrl-C and SIGTERM end it in one
line, exit code 130 or 143, its temporary files removed.
"""
from __future__ import annotations

import _thread
import argparse
import importlib
import os
import re
import signal
import sys
import threading
import time
import warnings
from pathlib import Path

from fastsim import __version__
from fastsim.errors import (ConfigError, InertSettingWarning, SimulationError, Terminated,
                            did_you_mean, one_line, signal_handlers)
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


def _whole_words(base: type) -> type:
    """``base`` with option help wrapped between words only: argparse cut a word longer
    than the help column inside it, so a spec meant to be copied from ``--help``
    (``peak:z=1.65,sigma0=0.015,min_evals=4,...``) read ``sigma0=0.0`` / ``15``."""
    if base not in _WHOLE_WORDS:
        import textwrap

        class WholeWords(base):
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
        "fine-tuning jobs (EvalStop), and cost-aware learning.",
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


def _check_threads_variable() -> None:
    """numba reads ``NUMBA_NUM_THREADS`` when first imported and fails with a traceback
    on a bad value: refuse it here, in one line, before anything imports numba."""
    from fastsim.values import NumberTextError, number_text

    value = os.environ.get("NUMBA_NUM_THREADS")
    try:
        ok = value is None or number_text(value, integer=True) >= 1
    except NumberTextError:  # "²" passed isdigit(), and int() failed with a traceback
        ok = False
    if not ok:
        print("fastsim: error: " + one_line(f"NUMBA_NUM_THREADS={value!r} is invalid; allowed: "
              "a positive integer written in digits 0-9, or unset (one thread per core)"),
              file=sys.stderr)
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


def _terminate(signum, frame):
    raise Terminated()


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
    # a SIGTERM handler set by whoever runs fastsim (SIG_IGN, say) is theirs: kept
    default = signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    term = {signal.SIGTERM: _terminate} if default else {}
    with signal_handlers(term) as main_thread:  # only the main thread may set handlers
        if main_thread:
            sys.unraisablehook = _redeliver
        try:
            _RUNNING[0] = True
            try:
                return _main(argv)
            finally:
                with _DELIVERY:
                    _RUNNING[0] = False
        except KeyboardInterrupt as exc:
            name = "fastsim" + (f" {_COMMAND[0]}" if _COMMAND else "")
            how, code = ("terminated", 143) if isinstance(exc, Terminated) else ("interrupted", 130)
            kept = ("finished work is kept: the same command resumes it"
                    if _COMMAND and _COMMAND[0] in _RESUMES else "nothing half-written is left")
            print(f"{name}: {how}; {kept}", file=sys.stderr)
            return code
        finally:
            sys.unraisablehook = hook


_COMMAND: list[str] = []  # the subcommand being run, once parsed, for the message above
# the subcommands that keep each finished chunk and resume from them when run again; the
# others write their outputs whole or not at all, so an interrupted one kept nothing
_RESUMES = ("sweep", "reproduce", "docs-figures")


def _main(argv: list[str] | None) -> int:
    _COMMAND.clear()
    _check_threads_variable()
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
    _COMMAND.append(args.command)
    try:
        held = hold_outputs(args)  # noqa: F841 (released when the command returns)
        with warnings.catch_warnings():
            # the API's notes of inert settings: a command says its own, as note: lines
            warnings.simplefilter("ignore", InertSettingWarning)
            return int(args.func(args) or 0)
    except ConfigError as exc:
        print(f"fastsim {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except SimulationError as exc:  # a lost Dask cluster's may echo an address given
        print(f"fastsim {args.command}: error: {one_line(str(exc))}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # Python would report the closed pipe again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
