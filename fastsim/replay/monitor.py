"""Stop policies for live training loops: feed each evaluation, get a decision back.

``StopMonitor`` accepts any registered stop policy with a streaming form
(``fastsim.registry``: ``streaming=True``): one update per evaluation.  The built-ins
keep O(1) state per job (EvalStop: the decline counter, advanced by
``kernels.detectors.evalstop_step_nb``, the step function the engine loops over, and the
last ``k + 1`` steps; loss plateau: the last ``w + 1`` losses; stop-at: nothing; an
online detector: its kernel state, advanced by ``kernels.detectors_online``'s step, of
which the engine's batch form is a loop, and the best score's step); a user
policy keeps the job's series and asks its trigger function about the newest prefix at
each evaluation (O(evaluations) memory, one call per evaluation).  The monitor, ``fastsim replay`` and the
simulator trigger at the same evaluation and keep the same checkpoint on the same sequence
(tested); the monitor cannot know which evaluation is a run's last, so a trigger there is
``Decision.stop`` here and replay's status ``triggered_at_completion`` (docs/replay.md).  Mess rules match
replay's (docs/replay.md): a missing (NaN) value is skipped, neither a decline nor a
reset; steps must increase, but for a reading of the step of a reading without a score
just before it, merged with it (a Trainer's logged loss, then its evaluation: one row);
a stopped job stays stopped.
"""
from __future__ import annotations

import copy
import math
from collections import deque
from dataclasses import dataclass, field, replace

import numpy as np

from fastsim import registry as R
from fastsim.config import MAX_EVALS, PolicyConfig, check_code, plain_scalar, policy_reads
from fastsim.errors import ConfigError, known_keywords
from fastsim.kernels.detectors import evalstop_step_nb
from fastsim.kernels.detectors_online import detector_init_nb, detector_step_nb
from fastsim.kernels.stops import user_prefix_driver
from fastsim.plain_python import PlainCheck
from fastsim.replay.logs import MAX_SCORE, MAX_STEP, SCORE_RANGE, job_key
from fastsim.replay.policies import prefix_call, series_scratch


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


class _Declines:
    """EvalStop's streaming form: the consecutive-decline count (O(1))."""

    def __init__(self, k: int, threshold: float):
        self.k, self.threshold = k, threshold
        self.prev, self.run = math.nan, 0

    def update(self, score: float, loss: float, step: int) -> bool:
        # A drop of at most ``threshold`` counts as no decline (as EarlyStoppingCallback's
        # threshold counts a small gain as none); threshold 0 is the kernel's rule exactly.
        seen = score + self.threshold if score < self.prev else score
        self.run = evalstop_step_nb(self.prev, seen, self.run)
        self.prev = score
        return self.run >= self.k


class _Never:
    """No stop policy: never triggers."""

    run = 0

    def update(self, score: float, loss: float, step: int) -> bool:
        return False


class _Progress:
    """Stop-at's streaming form: estimated progress ``step / planned_steps`` (O(1))."""

    def __init__(self, f: float, planned: float):
        self.f, self.planned, self.run = f, planned, 0

    def update(self, score: float, loss: float, step: int) -> bool:
        return step / self.planned >= self.f


def is_real_scalar(x) -> bool:
    """A real scalar (Python's, numpy's, a framework's: what has ``__float__``) that a
    float holds: not a bool, a string that would parse as one, a complex number, an
    array, nor a number beyond a float's range (an int raises; a long double or a
    Decimal of 1e4000 becomes inf, a value apart from the one given, as replay refuses
    1e400 in a log)."""
    if isinstance(x, (bool, np.bool_, str, bytes, complex, np.complexfloating, np.ndarray)):
        return False
    try:
        f = float(x)
        return not math.isinf(f) or bool(x == f)
    except (OverflowError, TypeError, ValueError, AttributeError, ArithmeticError):
        return False


class _Plateau:
    """Loss plateau's streaming form: the last ``w + 1`` losses (O(w))."""

    def __init__(self, w: int, tol: float):
        self.tol, self.losses, self.run = tol, deque(maxlen=w + 1), 0

    def update(self, score: float, loss: float, step: int) -> bool:
        self.losses.append(loss)
        if len(self.losses) < self.losses.maxlen:
            return False
        ref = self.losses[0]
        return (ref - loss) / ref < self.tol


class _Detector:
    """An online detector's streaming form: its kernel state, one step per evaluation.
    O(1) per job; BOCPD keeps up to MAX_EVALS run lengths (the longest a simulated job
    has, so it decides as the engine does) and merges longer ones."""

    def __init__(self, p: PolicyConfig):
        self.code, self.p = p.code, np.array(p.vector, np.float64)
        self.state = detector_init_nb(self.code, self.p, MAX_EVALS)
        self.prev, self.run = math.nan, 0  # the decline run, for Decision.decline_run only

    def update(self, score: float, loss: float, step: int) -> bool:
        self.run = evalstop_step_nb(self.prev, score, self.run)
        self.prev = score
        return bool(detector_step_nb(self.code, self.p, self.state, score))


class _Series:
    """A user policy's streaming form: the job's series so far, in scratch that doubles as
    it fills (NaN beyond the last evaluation, handed over read-only), and its trigger
    asked about the newest prefix only: every shorter one answered 0 before (else the job
    stopped, or the call was refused and undone), so this is the engine's
    ``causal_trigger_nb`` at one call per evaluation (O(evaluations) memory).  With
    ``plain`` (the monitor's), its plain-Python version is asked beside it on the calls
    ``plain`` has left (``fastsim.plain_python``), the job named ``job``."""

    def __init__(self, p: PolicyConfig, planned: float, plain: PlainCheck | None = None,
                 job=None):
        self.p, self.planned, self.run = p, planned, 0
        self.plain, self.job = plain, job
        self.params = tuple(v for k, v in p.values.items() if k != "scope")
        self.n = 0
        self.seen, self.shown = series_scratch(None, None, 0)

    def __getstate__(self):
        # ``shown`` is a view of ``seen``: copied (copy.deepcopy, pickle) it became an array
        # of its own, frozen at the copy, and the trigger never saw a later score
        return {k: v for k, v in vars(self).items() if k != "shown"}

    def __setstate__(self, state):
        vars(self).update({"plain": None, "job": None, **state})  # one pickled without them
        self.shown = self.seen.view()
        self.shown.flags.writeable = False

    def update(self, score: float, loss: float, step: int) -> bool:
        d, e = self.p.decl, self.n + 1
        self.seen, self.shown = series_scratch(self.seen, self.shown, self.n)
        # a missing loss stays NaN, as replay hands a log's empty loss cell: read as 0.0
        # it was a perfect loss, and a policy reading losses stopped on it
        self.seen[:, self.n] = score, loss, float(step)
        try:  # a call that fails leaves no trace: the same call may be retried
            with R.calling(d, "stop policy"), prefix_call(self.p):
                trig = int(user_prefix_driver(d.user)(self.shown, e, self.planned, self.params))
            R.check_returns(d, "stop policy")
            if trig < 0 or (trig > 0 and d.delivered(trig, self.p.values, e, self.seen[0]) < 1):
                raise ConfigError(R.trigger_error(d.name, self.p.values, R.broken_at(
                    d, self.params, f"job {self.job!r}", trig,
                    (self.seen[0, :e], self.seen[1, :e], self.seen[2, :e], self.planned))))
            if self.plain is not None and self.plain.ask():
                shown = self.shown
                self.plain.check(shown[0, :e], shown[1, :e], shown[2, :e], self.planned, trig,
                                 f"on job {self.job!r}, evaluation {e}")
        except Exception:
            self.seen[:, self.n] = np.nan
            raise
        self.n = e
        return trig > 0


def _stream(p: PolicyConfig, threshold: float, planned: float, plain: PlainCheck | None = None,
            job=None):
    d = p.decl
    if threshold and d.name not in ("evalstop",):
        raise ConfigError(f"threshold={threshold!r} applies to evalstop and patience only; "
                          f"allowed: 0 for {p.label}")
    if d.user is not None:
        return _Series(p, planned, plain, job)
    if d.vector:
        return _Detector(p)
    if d.name == "none":
        return _Never()
    if d.name == "evalstop":
        return _Declines(p.k, threshold)
    if d.name == "stop_at":
        return _Progress(p.f, planned)
    if d.name == "loss_plateau":
        return _Plateau(p.w, p.tol)
    raise ConfigError(f"policy {p.label} declares a streaming form the monitor does not have")


@dataclass
class _JobState:
    stream: object                                       # None once the job has stopped
    n_evals: int = 0
    last_step: int | None = None
    recent_steps: deque = field(default_factory=deque)   # steps of the last lookback+1 evaluations
    best: float = -math.inf                              # best score so far and its step,
    best_step: int | None = None                         # for policies that keep the best
    first_step: int | None = None                        # the first evaluation's step
    stopped: Decision | None = None
    # the latest reading, if it had no score: (step, loss, the state before it if it was
    # recorded), which a reading of the same step merges with, as replay merges a log's rows
    unscored: tuple | None = None
    # the latest reading, if it had a score: (step, score, loss, the state before it if its
    # loss was missing and losses are read, its decision), which a score-less reading of
    # the same step merges into: dropped, or giving its missing loss, as replay does
    scored: tuple | None = None


def with_threshold(p: PolicyConfig, threshold: float) -> PolicyConfig:
    """``patience`` with the Trainer's ``early_stopping_threshold`` given separately (as
    ``EarlyStoppingCallback(early_stopping_threshold=...)``): it fills the policy's own
    ``threshold``; a different one in the spec is refused."""
    if not threshold or p.name != "patience":
        return p
    values = dict(p.params)
    if values["threshold"] not in (0.0, threshold):
        raise ConfigError(f"threshold={threshold!r} differs from {p.label}'s threshold; "
                          "allowed: one of the two")
    return replace(p, params=tuple({**values, "threshold": float(threshold)}.items()))


class StopMonitor:
    """Streaming form of any registered stop policy that has one.

    Parameters
    ----------
    policy : a spec (``evalstop:k=2``, ``loss_plateau:w=2,tol=0.01``, ``stop_at:f=0.65``,
        ``patience:patience=3``, ``peak:sigma0=0.02``, ``mymod:mypolicy:k=3``) or a
        ``PolicyConfig``
    higher_is_better : sense of the score (False for a loss)
    threshold : EvalStop: a drop of at most this much is not a decline; patience: its
        ``threshold`` (a gain of at most this much is no improvement), as
        ``early_stopping_threshold``
    planned_steps : the run's planned length in steps, for policies that read progress
        (``stop_at``, or a user policy that reads ``t_est_h``)

    Examples
    --------
    >>> m = StopMonitor("evalstop:k=2")
    >>> [m.observe("run", s, x).stop for s, x in [(100, 0.5), (200, 0.6), (300, 0.55), (400, 0.5)]]
    [False, False, False, True]
    >>> m.observe("run", 500, 0.7).keep_step   # stays stopped; keep the step-200 checkpoint
    200
    """

    @known_keywords("StopMonitor()")
    def __init__(self, policy: str | PolicyConfig = "evalstop:k=2", higher_is_better: bool = True,
                 threshold: float = 0.0, planned_steps: float | None = None):
        if not isinstance(policy, (str, PolicyConfig)):
            raise ConfigError(f"StopMonitor policy = {policy!r}: allowed: a policy spec "
                              f"(\"evalstop:k=2\") or a PolicyConfig{R.spec_hint(policy)}")
        p = policy if isinstance(policy, PolicyConfig) else PolicyConfig.parse(policy)
        check_code(p, "policy")
        d = p.decl
        # numpy's numbers and bools are numbers and bools: np.float32(0.1), np.bool_(True)
        threshold, higher_is_better = plain_scalar(threshold), plain_scalar(higher_is_better)
        if R.is_number(threshold) and threshold > 0:
            p = with_threshold(p, float(threshold))
            threshold = 0.0 if d.name == "patience" else threshold
        if not d.streaming or d.uses_hidden_truth:
            live = [x.name for x in _streaming()]
            raise ConfigError(f"policy {p.label} has no streaming form; allowed: {', '.join(live)} "
                              "or a user policy")
        if not isinstance(higher_is_better, bool):
            raise ConfigError(f"StopMonitor higher_is_better = {higher_is_better!r}: allowed: True or False")
        if not R.is_number(threshold) or threshold < 0:
            raise ConfigError(f"StopMonitor threshold = {threshold!r}: allowed: a finite number >= 0")
        if planned_steps is not None and not (is_real_scalar(planned_steps)
                                              and 0 < planned_steps < math.inf):
            raise ConfigError(f"StopMonitor planned_steps = {planned_steps!r}: allowed: a "
                              "positive finite number of steps, or None")
        needs_plan = "t_est_h" in d.reads
        if needs_plan and (planned_steps is None or not planned_steps > 0):
            raise ConfigError(f"policy {p.label} reads progress: planned_steps = {planned_steps!r}; "
                              "allowed: the run's planned number of steps (> 0)")
        self.policy = p
        self.higher_is_better = higher_is_better
        self.threshold = float(threshold)
        self.planned_steps = float(planned_steps) if planned_steps else math.nan
        # a user's function that loads the losses reads them, declared or not, as replay reads it
        self.reads_loss = policy_reads("losses", p)
        # what makes a reading an evaluation, as replay counts its rows: the loss for a
        # policy declaring it reads losses, else the score (an undeclared reader's reading
        # with a loss and no score is no evaluation; one with a score and no loss is)
        self.counts_loss = "losses" in d.reads
        back = d.lookback
        self._lookback = p.values[back] if isinstance(back, str) else int(back)
        self._keep_best = d.keep == "best"
        _stream(p, self.threshold, self.planned_steps)  # refuse bad combinations now
        # a user policy's plain-Python version beside its compiled one on the monitor's
        # first calls (fastsim.plain_python): where Python raises, the decisions rested on
        # a value numba made up (int() of a NaN, an index past the prefix), in silence
        self._plain = PlainCheck(p) if d.user is not None else None
        self._jobs: dict[str, _JobState] = {}

    def _job(self, job_id) -> str:
        """``job_id`` as the key replay files a job under (``fastsim.replay.logs.job_key``):
        a string, or an integer (numpy's too) as its text, so ``1``, ``np.int64(1)`` and
        ``"1"`` are one job, as they are in a log (and ``" 1"``: a log's ids are read
        without the white space around them).  Refused: a bool (``True`` would be job
        ``1``), a float (``1.0`` would be job ``1``, and NaN, unequal to itself, a new job
        at every call), an empty or blank string (a log's is a missing id), None, anything
        else."""
        key = job_key(job_id)
        if not key:
            raise ConfigError(f"{type(self).__name__}: job_id = {job_id!r}; allowed: a "
                              "non-empty string or an integer")
        return key

    def reset(self, job_id: str) -> None:
        """Forget a job (e.g. before re-running it from scratch)."""
        self._jobs.pop(self._job(job_id), None)

    def decision(self, job_id: str) -> Decision | None:
        """The stop decision of a job, or None while it runs."""
        st = self._jobs.get(self._job(job_id))
        return st.stopped if st else None

    def best_step(self, job_id) -> int | None:
        """The step of the job's best score so far (None before any): the checkpoint a
        policy that keeps the best delivers if it stops now."""
        st = self._jobs.get(self._job(job_id))
        return st.best_step if st else None

    @known_keywords("StopMonitor.observe()")  # observe(..., los=x) was Python's TypeError
    def observe(self, job_id, step: int, score: float, loss: float | None = None) -> Decision:
        """Record the evaluation of ``job_id`` at ``step`` and decide.

        ``loss``: the training loss at ``step`` (policies that read losses decide on it,
        and refuse a call without it, as replay refuses a log without a ``loss`` column;
        NaN is a missing reading).
        Raises ``ConfigError`` if ``step`` is not a non-negative integer, or ``score`` is not
        a number (or is finite beyond +-1e150, as replay refuses it), or (while the job
        runs) ``step`` is not after the job's previous step, but for a reading of the
        step of the reading just before it, one of the two without a score: one reading,
        as replay merges a log's rows of one step (the score-less one's loss, if the scored
        one has none; a Trainer logs a step's loss, then evaluates at that step).
        Once the job has stopped, every valid call returns its stop decision and records
        nothing: a stopped job stays stopped, whatever step comes next.
        """
        name = type(self).__name__
        job_id = self._job(job_id)
        if loss is None:
            held = getattr(self._jobs.get(job_id), "unscored", None)
            if held is not None and held[0] == step:  # its step's loss, logged before it
                loss = math.nan
            elif self.reads_loss:
                raise ConfigError(f"{name}.observe({job_id!r}, step={step}): no loss given, and "
                                  f"{self.policy.label} decides on the training loss; allowed: "
                                  "observe(job_id, step, score, loss=...), NaN for a missing reading")
            else:  # a policy not reading losses is handed what replay hands it for a
                loss = 0.0  # log without a loss column: zeros
        step = _checked_step(name, job_id, step)
        _check_numbers(name, job_id, step, score, loss)
        value, loss = float(score), float(loss)
        self._check_bounds(name, job_id, step, value, loss)
        st = self._jobs.get(job_id)
        if st is None:
            st = self._jobs[job_id] = _JobState(_stream(self.policy, self.threshold,
                                                        self.planned_steps,
                                                        getattr(self, "_plain", None),
                                                        job_id))
        if st.stopped is not None:
            return st.stopped
        merged = st.unscored is not None and st.unscored[0] == step
        if st.scored is not None and st.scored[0] == step and math.isnan(value):
            _, value, _, before, decided = st.scored  # its step's loss, logged after it
            if before is None or math.isnan(loss):  # nothing to add: dropped, as replay drops it
                return decided
            st = self._jobs[job_id] = before  # the scored reading again, with this loss
            merged = st.unscored is not None and st.unscored[0] == step
        elif st.last_step is not None and step <= st.last_step and not merged:
            raise ConfigError(f"{name}.observe({job_id!r}): step {step} is not after the "
                              f"previous step {st.last_step}; allowed: increasing steps "
                              "(call reset() to start the job over)")
        if merged:  # a Trainer logs a step's loss, then evaluates at that step
            _, held_loss, before = st.unscored
            loss = held_loss if math.isnan(loss) else loss
            if before is not None:  # the loss alone was an evaluation: read again, merged
                st = self._jobs[job_id] = before
        st.unscored = st.scored = None
        # a loss-reading policy counts a reading without a score, and reads a scored
        # reading's missing loss: kept to be undone
        undo = (self.counts_loss and not math.isnan(loss) if math.isnan(value)
                else self.reads_loss and math.isnan(loss))
        before = copy.deepcopy(st) if undo else None
        d = self._decide(st, step, value, loss)
        if st.stopped is not None:  # a stopped job keeps no state to go back to
            before = None
        if math.isnan(value):
            st.unscored = (step, loss, before)
        else:
            st.scored = (step, value, loss, before, d)
        return d

    def _decide(self, st: _JobState, step: int, value: float, loss: float) -> Decision:
        """The decision on one reading: recorded, or skipped where it is missing."""
        keep = st.recent_steps[-1] if st.recent_steps else None
        counted = loss if self.counts_loss else value
        if math.isnan(counted):
            st.last_step = step
            return Decision(False, keep, f"step {step}: missing value skipped", st.n_evals,
                            st.stream.run)
        return self._record(st, step, value, loss)

    def _check_bounds(self, name: str, job_id: str, step: int, value: float,
                      loss: float) -> None:
        """Refuse a finite score beyond ``SCORE_RANGE``, or a loss the policy cannot take."""
        if math.isfinite(value) and abs(value) > MAX_SCORE:
            raise ConfigError(f"{name}.observe({job_id!r}, step={step}): score = {value:g}; "
                              f"allowed: {SCORE_RANGE}, as replay takes (NaN for a missing "
                              "evaluation)")
        if self.policy.decl.positive_losses and loss <= 0:
            raise ConfigError(f"{name}.observe({job_id!r}, step={step}): loss = {loss:g}; "
                              "allowed: " + self.policy.decl.loss_rule(self.policy.label))

    def _record(self, st: _JobState, step: int, value: float, loss: float) -> Decision:
        """Feed one evaluation (not missing) to the job's policy and decide: a trigger stops
        the job, keeping the checkpoint the engine would deliver."""
        s = value if self.higher_is_better else -value
        fired = st.stream.update(s, loss, step)  # a user policy that raises leaves no trace
        st.last_step = step
        st.n_evals += 1
        st.first_step = step if st.first_step is None else st.first_step
        st.recent_steps.append(step)
        if len(st.recent_steps) > self._lookback + 1:
            st.recent_steps.popleft()
        if s > st.best:  # strict: the first of equal scores, as the engine keeps it
            st.best, st.best_step = s, step
        if fired:
            # evaluation trigger - lookback, or the best score's, as the engine delivers;
            # with no score yet (a policy that reads losses), the first evaluation's, as
            # replay and the engine deliver it (None named checkpoint-None)
            best = st.best_step if st.best_step is not None else st.first_step
            keep = best if self._keep_best else st.recent_steps[0]
            st.stopped = Decision(True, keep, f"{self.policy.label} triggers at step {step} "
                                  f"(evaluation {st.n_evals}); keep the checkpoint of step {keep}",
                                  st.n_evals, st.stream.run)
            # a stopped job answers with its decision only: its policy state (BOCPD's run
            # lengths, 26 kB; a user policy's series) was kept for every finished job
            st.stream, st.recent_steps = None, deque()
            return st.stopped
        return Decision(False, step, f"step {step}: {self.policy.label} continues",
                        st.n_evals, st.stream.run)


def _checked_step(name: str, job_id: str, step) -> int:
    """``step`` as an int (an integral float, or an integer type with ``__index__``); one
    that is not an integer from 0 to 2^53-1 refused."""
    raw_step = step
    if isinstance(step, bool) or not isinstance(step, int):
        if isinstance(step, (float, np.floating)) and float(step).is_integer():
            step = int(step)
        else:
            try:  # a bool has __index__: True was step 1 (as a job id, it is refused)
                step = int(step.__index__()) if not isinstance(step, bool) else None
            except (AttributeError, TypeError):
                step = None
            if step is None:
                raise ConfigError(f"{name}.observe({job_id!r}): step = {raw_step!r}; "
                                  "allowed: a non-negative integer")
    if not 0 <= step < MAX_STEP:  # steps are compared as floats, exact below 2^53
        raise ConfigError(f"{name}.observe({job_id!r}): step = {step}; allowed: an "
                          "integer from 0 to 2^53-1, as replay takes")
    return step


def _check_numbers(name: str, job_id: str, step: int, score, loss) -> None:
    """Refuse a score or loss that is not a real number (NaN is one: a missing reading)."""
    for field, x in (("score", score), ("loss", loss)):
        if not is_real_scalar(x):
            raise ConfigError(f"{name}.observe({job_id!r}, step={step}): {field} = {x!r}; "
                              "allowed: a number (NaN for a missing evaluation)")


def _streaming():
    from fastsim import registry as R

    return [d for d in R.policies() if d.streaming and not d.uses_hidden_truth and d.user is None]


class EvalStopMonitor(StopMonitor):
    """Streaming EvalStop(k): stop a job after ``k`` consecutive declines of its score.

    Parameters
    ----------
    k : consecutive strict declines that trigger a stop (>= 1)
    higher_is_better : sense of the score (False for a loss)
    threshold : a drop of at most this much (in the score's units) is not a decline,
        as ``StopMonitor``'s

    Examples
    --------
    >>> m = EvalStopMonitor(k=2)
    >>> [m.observe("run", s, x).stop for s, x in [(100, 0.5), (200, 0.6), (300, 0.55), (400, 0.5)]]
    [False, False, False, True]
    """

    @known_keywords("EvalStopMonitor()")
    def __init__(self, k: int = 2, higher_is_better: bool = True, threshold: float = 0.0):
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ConfigError(f"EvalStopMonitor k = {k!r}: allowed: an integer >= 1 (consecutive declines)")
        k = int(k)  # numpy's too, as StopMonitor's job ids and steps are
        super().__init__(PolicyConfig(name="evalstop", k=k, scope="all"), higher_is_better,
                         threshold)
        self.k = k
