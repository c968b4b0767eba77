"""EvalStop for live training loops: feed each evaluation, get a decision back.

The decline counter is advanced by ``fastsim.kernels.detectors.evalstop_step_nb``, the same step
function the engine's ``evalstop_trigger_nb`` loops over, so the monitor, ``fastsim
replay`` and the simulator make the same decision on the same sequence (tested).
Mess rules match replay's (docs/replay.md): a missing (NaN) score is skipped, neither a
decline nor a reset; steps must increase; a stopped job stays stopped.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from fastsim.errors import ConfigError
from fastsim.kernels.detectors import evalstop_step_nb


@dataclass(frozen=True)
class Decision:
    """What to do after one evaluation.

    ``stop``: stop training now.  ``keep_step``: the step of the checkpoint to keep (the
    evaluation ``k`` before the trigger on a stop, else the latest evaluated step, or
    None before any score).  ``reason``: one line for logs.  ``eval_index``: 1-based count
    of scored evaluations so far; ``decline_run``: consecutive declines so far.
    """

    stop: bool
    keep_step: int | None
    reason: str
    eval_index: int
    decline_run: int


@dataclass
class _JobState:
    prev_score: float = math.nan
    run: int = 0
    n_evals: int = 0
    last_step: int | None = None
    recent_steps: deque = field(default_factory=deque)   # steps of the last k+1 evaluations
    stopped: Decision | None = None


class EvalStopMonitor:
    """Streaming EvalStop(k): stop a job after ``k`` consecutive declines of its score.

    Parameters
    ----------
    k : consecutive strict declines that trigger a stop (>= 1)
    higher_is_better : sense of the score (False for a loss)

    Examples
    --------
    >>> m = EvalStopMonitor(k=2)
    >>> [m.observe("run", s, x).stop for s, x in [(100, 0.5), (200, 0.6), (300, 0.55), (400, 0.5)]]
    [False, False, False, True]
    >>> m.observe("run", 500, 0.7).keep_step   # stays stopped; keep the step-200 checkpoint
    200
    """

    def __init__(self, k: int = 2, higher_is_better: bool = True):
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigError(f"EvalStopMonitor k = {k!r}: allowed: an integer >= 1 (consecutive declines)")
        if not isinstance(higher_is_better, bool):
            raise ConfigError(f"EvalStopMonitor higher_is_better = {higher_is_better!r}: allowed: True or False")
        self.k = k
        self.higher_is_better = higher_is_better
        self._jobs: dict[str, _JobState] = {}

    def reset(self, job_id: str) -> None:
        """Forget a job (e.g. before re-running it from scratch)."""
        self._jobs.pop(job_id, None)

    def decision(self, job_id: str) -> Decision | None:
        """The stop decision of a job, or None while it runs."""
        st = self._jobs.get(job_id)
        return st.stopped if st else None

    def observe(self, job_id, step: int, score: float) -> Decision:
        """Record the evaluation of ``job_id`` at ``step`` and decide.

        Raises ``ConfigError`` if ``step`` is not after the job's previous step, or is not
        a non-negative integer, or ``score`` is not a number.
        """
        if isinstance(step, bool) or not isinstance(step, int):
            if isinstance(step, float) and step.is_integer():
                step = int(step)
            else:
                try:
                    step = int(step.__index__())
                except (AttributeError, TypeError):
                    raise ConfigError(f"EvalStopMonitor.observe({job_id!r}): step = {step!r}; "
                                      "allowed: a non-negative integer") from None
        if step < 0:
            raise ConfigError(f"EvalStopMonitor.observe({job_id!r}): step = {step}; allowed: >= 0")
        try:
            value = float(score)
        except (TypeError, ValueError):
            raise ConfigError(f"EvalStopMonitor.observe({job_id!r}, step={step}): score = {score!r}; "
                              "allowed: a number (NaN for a missing evaluation)") from None
        st = self._jobs.setdefault(job_id, _JobState())
        if st.stopped is not None:
            return st.stopped
        if st.last_step is not None and step <= st.last_step:
            raise ConfigError(f"EvalStopMonitor.observe({job_id!r}): step {step} is not after the "
                              f"previous step {st.last_step}; allowed: increasing steps "
                              "(call reset() to start the job over)")
        st.last_step = step
        keep = st.recent_steps[-1] if st.recent_steps else None
        if math.isnan(value):
            return Decision(False, keep, f"step {step}: missing score skipped", st.n_evals, st.run)
        s = value if self.higher_is_better else -value
        st.run = evalstop_step_nb(st.prev_score, s, st.run)
        st.prev_score = s
        st.n_evals += 1
        st.recent_steps.append(step)
        if len(st.recent_steps) > self.k + 1:
            st.recent_steps.popleft()
        if st.run >= self.k:
            keep = st.recent_steps[0]  # evaluation trigger - k, as the engine delivers
            st.stopped = Decision(True, keep, f"{st.run} consecutive declines at step {step} "
                                  f"(evaluation {st.n_evals}); keep the checkpoint of step {keep}",
                                  st.n_evals, st.run)
            return st.stopped
        return Decision(False, step, f"step {step}: {st.run} consecutive declines (stop at {self.k})",
                        st.n_evals, st.run)
