"""Progress bars for long work, one rule for every command.

On a terminal (or in a notebook) a bar redraws itself in place.  Into a file or a pipe
(``fastsim sweep ... > log 2>&1``, a batch job's output) a redrawn bar is a run of
carriage returns that grows by a copy every tenth of a second: a 26-minute sweep wrote
thousands of them into one "line" of its log.  There the bar writes a plain line instead,
at most every ``LOG_INTERVAL`` seconds, plus its first and last state.
"""
from __future__ import annotations

import functools
import sys

LOG_INTERVAL = 30.0  # seconds between a bar's lines in a log
LOG_WIDTH = 100  # a log has no width to fit: a fixed one, as a terminal's default


class _Lines:
    """A stream that writes each state tqdm draws as its own line (tqdm draws a state as
    ``"\\r" + text``, and clears a finished ``leave=False`` bar with blanks).  A state the
    line before holds is not written again: a resumed sweep's bar, its chunks all done,
    starts in its last state and wrote it twice."""

    def __init__(self, stream):
        self.stream = stream
        self.last = ""

    def write(self, text: str) -> None:
        text = text.replace("\r", "").strip()
        if text and text != self.last:
            self.stream.write(text + "\n")
            self.last = text

    def flush(self) -> None:
        self.stream.flush()


def interactive(stream) -> bool:
    """A terminal, or a Jupyter kernel's stream (whose bar is a widget)."""
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) or type(stream).__module__.startswith("ipykernel")


def progress_bar(iterable=None, *, enabled: bool = True, **kwargs):
    """A ``tqdm`` bar on stderr (``disable=not enabled``); in a log, lines (see above)."""
    import tqdm

    stream, bar = kwargs.pop("file", sys.stderr), tqdm.tqdm
    if enabled and not interactive(stream):
        # leave=True: a log has nothing to clear, and a finished leave=False bar (a sweep's
        # aggregation) left only its first state, "aggregate: 0% 0/24", as if it had stalled
        kwargs.update(file=_Lines(stream), mininterval=LOG_INTERVAL, dynamic_ncols=False,
                      ncols=LOG_WIDTH, ascii=True, leave=True)
    else:
        kwargs["file"] = stream
        if "ipykernel" in sys.modules:  # a notebook's widget (tqdm.auto imports IPython)
            import tqdm.auto

            bar = tqdm.auto.tqdm
    return _unmonitored(bar)(iterable, disable=not enabled, **kwargs)


@functools.cache
def _unmonitored(bar: type) -> type:
    """``bar`` without tqdm's monitor thread: the first bar started it and it ran until the
    process exited, so ``fastsim.sweep(...)`` returned leaving a thread behind it.  Every
    bar here is updated as its work advances, and redraws then (tqdm's
    ``monitor_interval = 0``)."""
    return type(bar.__name__, (bar,), {"monitor_interval": 0})
