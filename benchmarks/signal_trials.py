"""How a fastsim command ends when SIGINT or SIGTERM comes at a random moment of its run.

    python benchmarks/signal_trials.py run [--trials N] [--signal INT,TERM] [--window A B]
    python benchmarks/signal_trials.py sweep [options]
    python benchmarks/signal_trials.py [options] -- ARGS...    # any `fastsim ARGS...`

Targets: ``run`` is ``fastsim run --clusters 10 --no-progress``; ``sweep`` is ``fastsim
sweep s.toml --no-progress --out out`` of a 4-cluster sweep file (two cells) this script
writes.  Each trial starts the command (``python -m fastsim``: the interpreter running this
script) in a fresh temporary directory, removed after (so a file given after ``--`` needs
its absolute path), with an empty ``NUMBA_CACHE_DIR`` there, so it compiles as a first run
does (``--warm``: one cache for all trials, filled by one run of the command not
signalled).  At a moment drawn uniformly from the window (seconds from the start;
``--seed`` makes the moments repeatable, not the machine) it sends the trial's signal
(``--signal`` is cycled over the trials) and times how long the command takes to exit.

Prints per trial the moment, the seconds from signal to exit, the exit code, how many lines
the command wrote to stderr (besides a first compile's notice) and whether one was a
traceback; then a summary: the trials, the exit codes seen, the largest and median delay,
how many ended before their signal, how many wrote a traceback or more than one stderr
line, and the last stderr lines with their counts.  A cold trial takes its moment plus
about 2 s on 2 shared cores (longer if the signal waits for a compile another thread
holds): ``run --trials 40`` about 4 minutes.
"""
from __future__ import annotations

import argparse
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from fastsim.cli import OneLineParser

SWEEP_TOML = 'clusters = 4\nchunk = 1\n[axes]\npolicy = ["none", "evalstop:k=2"]\n'
TARGETS = {"run": ["run", "--clusters", "10", "--no-progress"],
           "sweep": ["sweep", "s.toml", "--no-progress", "--out", "out"]}
SIGNALS = {"INT": signal.SIGINT, "TERM": signal.SIGTERM}
COMPILE_NOTICE = re.compile(r"compiling .* by machine load")  # fastsim.compile_notice
GIVE_UP_S = 600.0  # a command still alive this long after its signal is killed


@dataclass(frozen=True)
class Trial:
    signal: str
    moment_s: float
    delay_s: float | None  # None: the command ended before the signal
    code: int
    stderr_lines: int  # besides the first-compile notice
    traceback: bool
    last_line: str = ""

    def row(self) -> str:
        delay = "ended before" if self.delay_s is None else f"{self.delay_s:6.2f} s"
        return (f"SIG{self.signal:<4} at {self.moment_s:6.2f} s  exit after {delay:>12}  "
                f"code {self.code:4d}  stderr lines {self.stderr_lines:2d}  "
                f"traceback {'yes' if self.traceback else 'no'}")


def summary(trials: list[Trial]) -> list[str]:
    """The summary lines of ``trials``; delays are those of the trials signalled."""
    delays = [t.delay_s for t in trials if t.delay_s is not None]
    codes = Counter(t.code for t in trials)
    noisy = sum(t.traceback or t.stderr_lines > 1 for t in trials)
    lasts = Counter(t.last_line for t in trials)
    lines = [f"trials: {len(trials)}",
             "exit codes: " + ", ".join(f"{c} x {n}" for c, n in sorted(codes.items()))]
    if delays:
        lines.append(f"exit after the signal: max {max(delays):.2f} s, "
                     f"median {statistics.median(delays):.2f} s (of {len(delays)} signalled)")
    lines += [f"ended before the signal: {len(trials) - len(delays)}",
              f"with a traceback or more than one stderr line: {noisy}",
              "last stderr lines:"]
    return lines + [f"  {n} x {line or '(none)'}" for line, n in lasts.most_common()]


def trial(argv: list[str], signame: str, moment_s: float, cache: str | None) -> Trial:
    """Run ``fastsim argv`` in a fresh directory and signal it ``moment_s`` seconds in."""
    with tempfile.TemporaryDirectory(prefix="signal_trial_") as tmp:
        (Path(tmp) / "s.toml").write_text(SWEEP_TOML)
        env = {**os.environ, "NUMBA_CACHE_DIR": cache or str(Path(tmp) / "numba_cache")}
        start = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "fastsim", *argv], cwd=tmp, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            proc.wait(timeout=max(0.0, start + moment_s - time.monotonic()))
            sent = None
        except subprocess.TimeoutExpired:
            proc.send_signal(SIGNALS[signame])
            sent = time.monotonic()
        try:
            _, err = proc.communicate(timeout=GIVE_UP_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        delay = None if sent is None else time.monotonic() - sent
    lines = [line for line in err.splitlines() if not COMPILE_NOTICE.match(line)]
    return Trial(signame, moment_s, delay, proc.returncode, len(lines),
                 any(line.startswith("Traceback (most recent call last)") for line in lines),
                 lines[-1] if lines else "")


def parser() -> OneLineParser:
    ap = OneLineParser(description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("target", nargs="?", choices=sorted(TARGETS),
                    help="a built-in command (or give `-- ARGS...` instead)")
    ap.add_argument("--trials", type=int, default=3, metavar="N", help="default 3")
    ap.add_argument("--signal", default="INT,TERM", metavar="INT,TERM",
                    help="signals cycled over the trials: INT, TERM or both (default both)")
    ap.add_argument("--window", type=float, nargs=2, default=(0.5, 8.0), metavar=("A", "B"),
                    help="the signal comes uniformly A to B seconds in (default 0.5 8)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the moments (default 0)")
    ap.add_argument("--warm", action="store_true",
                    help="one numba cache for all trials, filled first by an unsignalled run")
    return ap


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """The options and the fastsim argv; a bad option exits 2 before any trial."""
    ap = parser()
    own, command = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv \
        else (argv, [])
    args = ap.parse_args(own)
    if (args.target is None) == (not command):
        ap.error("give one of: run, sweep, or -- ARGS... (a fastsim command)")
    if args.trials < 1:
        ap.error(f"--trials={args.trials} is invalid; allowed: an integer >= 1")
    args.signals = args.signal.split(",")
    if not set(args.signals) <= set(SIGNALS) or "" in args.signals:
        ap.error(f"--signal={args.signal} is invalid; allowed: INT, TERM or INT,TERM")
    a, b = args.window
    if not 0 <= a <= b:
        ap.error(f"--window={a:g} {b:g} is invalid; allowed: 0 <= A <= B seconds")
    return args, command or TARGETS[args.target]


def main(argv: list[str] | None = None) -> int:
    args, command = parse(sys.argv[1:] if argv is None else argv)
    rng = random.Random(args.seed)
    print(f"fastsim {' '.join(command)}: {args.trials} trials, signal at "
          f"{args.window[0]:g}-{args.window[1]:g} s, numba cache "
          f"{'warm' if args.warm else 'empty'}", flush=True)
    with tempfile.TemporaryDirectory(prefix="signal_trials_cache_") as shared:
        cache = None
        if args.warm:
            cache = shared
            trial(command, "INT", GIVE_UP_S, cache)  # fills the cache; not counted
        trials = []
        for i in range(args.trials):
            moment = rng.uniform(*args.window)
            trials.append(trial(command, args.signals[i % len(args.signals)], moment, cache))
            print(f"{i + 1:3d}  {trials[-1].row()}", flush=True)
    print("\n".join(summary(trials)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
