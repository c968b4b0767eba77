"""Stop policies as a Hugging Face ``TrainerCallback`` (optional extra: ``pip install fastsim[hf]``).

``StopPolicyCallback`` feeds every evaluation to a ``StopMonitor`` running any registered
policy with a streaming form (``evalstop:k=2`` by default, a user's
``mymod:mypolicy:k=3`` too); on a stop it sets ``control.should_training_stop`` and
records the checkpoint to keep (``keep_step``, ``keep_checkpoint``, and
``<output_dir>/evalstop.json``; one per Trainer, a second is refused when training
begins).  Its arguments follow the Trainer's conventions:
``metric_for_best_model`` and ``greater_is_better`` (taken from ``TrainingArguments``
when not given, as ``EarlyStoppingCallback`` does) and ``threshold`` (a drop of at most
this much is not a decline, like ``early_stopping_threshold``).  ``EvalStopCallback`` is
the same class.  A run resumed from a checkpoint carries on from the evaluations in its
``log_history``.  The class is importable without ``transformers``; creating one needs it,
and checks its arguments first.

The checkpoint to keep is the one saved at the evaluation ``lookback`` (EvalStop: ``k``)
before the trigger, or, for the online detectors (``patience``, ``margin``, ``cusum``,
``peak``, ``bocpd``), the one with the best score so far; so save at every evaluation
(``save_strategy`` = ``eval_strategy``, equal steps) and keep enough checkpoints
(``save_total_limit`` None or >= lookback; >= lookback + 2 when ``metric_for_best_model``
is set in ``TrainingArguments``, since the Trainer then marks its own best at every
save).  The callback marks that checkpoint as
``state.best_model_checkpoint`` (unless ``load_best_model_at_end`` uses it), which
Trainer's checkpoint rotation never deletes: on a stop, and for a policy that keeps the
best, at every new best.  ``StopPolicyCallback("patience:patience=3", threshold=0.01)`` is
``EarlyStoppingCallback(early_stopping_patience=3, early_stopping_threshold=0.01)`` with
the best checkpoint recorded.

Examples
--------
>>> from fastsim.replay.hf import StopPolicyCallback                       # doctest: +SKIP
>>> cb = StopPolicyCallback("evalstop:k=2", metric_for_best_model="eval_loss")  # doctest: +SKIP
>>> trainer = Trainer(..., callbacks=[cb]); trainer.train(); cb.keep_checkpoint  # doctest: +SKIP
"""
from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

from fastsim.config import PolicyConfig, plain_scalar
from fastsim.errors import ConfigError, one_line, quoted
from fastsim.io import atomic_write_bytes
from fastsim.replay.logs import MAX_SCORE, default_higher_is_better
from fastsim.replay.monitor import Decision, StopMonitor, is_real_scalar

try:
    from transformers import TrainerCallback as _TrainerCallback
except ImportError:  # the optional extra is missing: the class exists, instances need it
    _TrainerCallback = object


def _warn(message: str, stacklevel: int) -> None:
    """``warnings.warn`` of ``message`` as the one bounded line a ``ConfigError`` is
    (``one_line``): a warning echoes what the Trainer gave (a metric's value, a step, a
    path), and a value of thousands of characters was echoed whole."""
    warnings.warn(one_line(message), stacklevel=stacklevel + 1)


DEFAULT_POLICY = "evalstop:k=2"  # the policy of a callback given neither policy nor k
# the TrainerState attribute naming the callback of its run (one per Trainer: the file it writes)
_WRITER = "_fastsim_stop_policy_callback"


def _step_of(entry) -> int | None:
    """The step of a ``log_history`` entry (numpy's integers are steps), None where it has
    none a Trainer writes: True is an int to Python, and a negative step, which the monitor
    refuses, ended training from inside it on a resumed run, where any other reading it
    cannot use is warned about and skipped."""
    step = plain_scalar(entry.get("step")) if isinstance(entry, dict) else None
    return step if isinstance(step, int) and not isinstance(step, bool) and step >= 0 else None


class StopPolicyCallback(_TrainerCallback):
    """Stop a ``transformers.Trainer`` run when a stop policy triggers on an evaluation metric.

    Parameters
    ----------
    policy : a stop-policy spec with a streaming form (``evalstop:k=2``, ``stop_at:f=0.8``,
        ``mymod:mypolicy:k=3``); ``stop_at`` and user policies reading progress use
        ``args.max_steps`` as the planned length; None: ``evalstop:k=2``
    metric_for_best_model : the metric as Trainer reports it (``eval_`` prefix optional);
        None: ``args.metric_for_best_model``, else ``eval_loss``
    greater_is_better : the metric's sense; None: ``args.greater_is_better`` when the metric
        is ``args.metric_for_best_model``, else inferred from the name (``*loss``: lower)
    threshold : EvalStop: a drop of at most this much does not count as a decline;
        patience: a gain of at most this much is no improvement (``early_stopping_threshold``)
    protect_checkpoint : on a stop, mark the kept checkpoint as the one rotation spares
    k, metric, higher_is_better : the earlier names (``evalstop:k=K``, the metric, its sense)

    Attributes
    ----------
    decision : the last ``Decision`` (``stop``, ``keep_step``, ``reason``)
    keep_step : step of the checkpoint to keep (None while training continues)
    keep_checkpoint : its directory, or None when no such checkpoint was saved
    """

    def __init__(self, policy: str | PolicyConfig | None = None,
                 metric_for_best_model: str | None = None, greater_is_better: bool | None = None,
                 threshold: float = 0.0, protect_checkpoint: bool = True, job_id: str = "trainer",
                 *, k: int | None = None, metric: str | None = None,
                 higher_is_better: bool | None = None):
        name = type(self).__name__
        # numpy's bool is a bool (np.bool_(True)), as read_logs and StopMonitor take it
        greater_is_better, higher_is_better, protect_checkpoint = (
            plain_scalar(v) for v in (greater_is_better, higher_is_better, protect_checkpoint))
        _refuse_both_names(name, policy, k, metric_for_best_model, metric, greater_is_better,
                           higher_is_better)
        _check_flags(name, greater_is_better, higher_is_better, protect_checkpoint)
        policy = _policy_spec(name, policy, k)
        self.policy = policy if isinstance(policy, PolicyConfig) else PolicyConfig.parse(policy)
        metric = metric_for_best_model if metric_for_best_model is not None else metric
        # blank text names no metric, as TrainingArguments' own is read (_trainer_settings)
        if metric is not None and (not isinstance(metric, str) or not metric.strip()):
            raise ConfigError(f"{type(self).__name__} metric_for_best_model = {metric!r}: "
                              "allowed: a metric name")
        self._metric_arg = metric
        self._sense_arg = greater_is_better if greater_is_better is not None else higher_is_better
        self.threshold = threshold
        # refuse bad input now; patience takes the threshold as its own parameter
        probe = StopMonitor(self.policy, threshold=threshold, planned_steps=1.0)
        self.policy = probe.policy
        job_id = probe._job(job_id)  # a bad id is refused here, not at the first evaluation
        self.k = int(self.policy.decl.lookback_of(self.policy.values))
        # after the arguments: they are checked without transformers, and a wrong one is
        # worth knowing before installing a few GB of extra
        if _TrainerCallback is object:
            raise ImportError(f"{name} needs transformers, which is not installed: pip install "
                              "'fastsim[hf]' (the optional Hugging Face extra)")
        self.metric = _eval_name(metric or "eval_loss")
        self.job_id = job_id
        self.protect_checkpoint = protect_checkpoint
        self.monitor: StopMonitor | None = None
        self.decision: Decision | None = None
        self.keep_step: int | None = None
        self.keep_checkpoint: str | None = None
        self._warned_missing = False
        self._observed_step: int | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        self._claim(args, state)
        best, args_sense = _trainer_settings(args, type(self).__name__)
        self._start_monitor(args, state, best, args_sense)
        self._resume(args, state, control)
        self._warn_unsaved_evaluations(args)
        self._warn_rotation(args, best, args_sense)

    def _claim(self, args, state) -> None:
        """Mark ``state`` as this callback's run, refusing a second callback in it."""
        # two in one Trainer (one TrainerState per train()) both wrote
        # <output_dir>/evalstop.json, the last one's silently standing for both
        first = getattr(state, _WRITER, None)
        if first is not None and first is not self:
            raise ConfigError(f"{type(self).__name__}: a second one in this Trainer (policy "
                              f"{self.policy.label}) would overwrite the first's (policy "
                              f"{first.policy.label}) {Path(args.output_dir) / 'evalstop.json'}; "
                              "allowed: one StopPolicyCallback per Trainer")
        setattr(state, _WRITER, self)

    def _start_monitor(self, args, state, best: str | None, args_sense: bool | None) -> None:
        """A fresh monitor of the metric, in its sense, over the run's planned steps."""
        self.metric = _eval_name(self._metric_arg or best or "eval_loss")
        hib = self._sense_arg
        if hib is None and best and _eval_name(best) == self.metric:
            hib = args_sense
        if hib is None:
            hib = default_higher_is_better(self.metric)
        planned = _planned_steps(args, state)
        if "t_est_h" not in self.policy.decl.reads:
            planned = planned or 1.0
        elif planned is None:
            raise ConfigError(f"{type(self).__name__}: policy {self.policy.label} reads progress "
                              "(step / planned steps), and the run has no planned length; "
                              "allowed: TrainingArguments max_steps > 0 or num_train_epochs "
                              "with a sized train dataset")
        self.monitor = StopMonitor(self.policy, bool(hib), self.threshold, planned)
        self.decision, self.keep_step, self.keep_checkpoint = None, None, None
        self._observed_step = None

    def _resume(self, args, state, control) -> None:
        """Feed the monitor the evaluations a resumed run already holds."""
        # a run resumed from a checkpoint: its trainer_state.json holds every evaluation up
        # to that step, so the monitor carries on from them instead of starting over
        history = getattr(state, "log_history", None) or []
        loss = math.nan
        for entry in history:
            step = _step_of(entry)
            if step is None:
                if isinstance(entry, dict) and "step" in entry:  # a reading: say it is skipped
                    _warn(f"{type(self).__name__}: log_history entry at step "
                                  f"{entry['step']!r} is skipped; allowed: steps that are "
                                  "integers >= 0", stacklevel=3)
                continue
            if step > state.global_step:
                break
            if "loss" in entry:
                loss = entry["loss"]
            if any(str(key).startswith("eval_") for key in entry):
                d = self._observe(step, entry, loss)
                self.decision = d or self.decision
        if self.decision is not None and self.decision.stop:
            # the resumed log already holds the stop: a stopped job stays stopped
            control.should_training_stop = True
            self.keep_step = self.decision.keep_step
            self.keep_checkpoint = str(Path(args.output_dir) / f"checkpoint-{self.keep_step}")

    def _warn_unsaved_evaluations(self, args) -> None:
        """Warn when checkpoints are not saved at every evaluation: the kept one may not exist."""
        eval_s = str(getattr(args, "eval_strategy", "no")).split(".")[-1].lower()
        save_s = str(getattr(args, "save_strategy", "no")).split(".")[-1].lower()
        if eval_s != "no" and (save_s != eval_s or (eval_s == "steps"
                                                    and args.save_steps != args.eval_steps)):
            _warn(f"{type(self).__name__}: checkpoints are not saved at every evaluation "
                          f"(eval {eval_s}/{args.eval_steps}, save {save_s}/{args.save_steps}); "
                          "the checkpoint to keep may not exist", stacklevel=3)

    def _warn_rotation(self, args, best: str | None, args_sense: bool | None) -> None:
        """Warn when checkpoint rotation (``save_total_limit``) can delete the checkpoint
        the policy keeps.  Rotation spares the newest checkpoint and
        ``state.best_model_checkpoint``; when the Trainer tracks a best of its own
        (``metric_for_best_model`` set, as ``load_best_model_at_end`` does) it resets that
        mark to its own best at every save, so the callback's mark does not hold and the
        kept checkpoint must survive among the newest: the trigger's, the ``k`` before it
        and the Trainer's best take ``k + 2``."""
        limit = plain_scalar(getattr(args, "save_total_limit", None))
        if limit is None or limit <= 0:
            return
        owned = bool(getattr(args, "load_best_model_at_end", False)) or best is not None
        marked = self.protect_checkpoint and not owned
        if self.policy.decl.keep == "best":
            # the Trainer's own best is this policy's only if it is the same metric and sense
            same = owned and best is not None and _eval_name(best) == self.metric and (
                bool(args_sense) == self.monitor.higher_is_better)
            if not (marked or same):
                _warn(f"{type(self).__name__}: save_total_limit={limit} can delete the "
                              f"best-{self.metric} checkpoint the policy keeps (rotation spares the "
                              "Trainer's metric_for_best_model best only); allowed: None",
                              stacklevel=3)
            return
        need = self.k + (0 if marked else 1) + (1 if owned else 0)
        if limit < need:
            why = (" (the Trainer keeps its own metric_for_best_model best from rotation, not this "
                   "one)" if owned else "")
            _warn(f"{type(self).__name__}: save_total_limit={limit} deletes the checkpoint "
                          f"the policy keeps{why}; allowed: None or >= {need}", stacklevel=3)

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if self.monitor is None:
            if "t_est_h" in self.policy.decl.reads and _planned_steps(args, state) is None:
                # trainer.evaluate() before train() (a baseline) in a run set by
                # num_train_epochs: no planned length yet, and train() starts the monitor
                # over; it was a ConfigError raised from inside evaluate()
                return control
            self.on_train_begin(args, state, control)
        metrics = metrics or {}
        if self.metric not in metrics and not self._warned_missing:
            self._warned_missing = True
            _warn(f"{type(self).__name__}: metric {self.metric!r} not in the evaluation "
                          f"metrics ({quoted(sorted(metrics))}); such evaluations are "
                          "skipped",
                          stacklevel=2)
        d = self._observe(int(state.global_step), metrics, _train_loss(getattr(state, "log_history", None)))
        if d is None:
            return control
        self.decision = d
        protect = self.protect_checkpoint and not getattr(args, "load_best_model_at_end", False)
        best = self.monitor.best_step(self.job_id)
        if protect and self.policy.decl.keep == "best" and best is not None:
            # the checkpoint a later stop keeps: spared by rotation from now on
            state.best_model_checkpoint = str(Path(args.output_dir) / f"checkpoint-{best}")
        if d.stop:
            control.should_training_stop = True
            self.keep_step = d.keep_step
            ckpt = Path(args.output_dir) / f"checkpoint-{d.keep_step}"
            self.keep_checkpoint = str(ckpt)
            if protect:
                state.best_model_checkpoint = str(ckpt)
        return control

    def _observe(self, step: int, metrics: dict, loss: float) -> Decision | None:
        """Feed one evaluation to the monitor; None when it is not one to decide on: a
        step already decided (``trainer.evaluate()`` after training, the second of several
        eval datasets) or, for a policy whose evaluations are its scores (every one but
        those declaring ``reads`` of losses, as replay counts them), one without the metric."""
        if self._observed_step is not None and step <= self._observed_step:
            return None
        if self.metric not in metrics and not self.monitor.counts_loss:
            return None
        # null (None), as in a trainer_state.json, is a missing reading, as replay reads it
        score = self._usable(self.metric, metrics.get(self.metric), step, _score_problem(
            metrics.get(self.metric)))
        if self.monitor.reads_loss:
            loss = self._usable("loss", loss, step, _loss_problem(loss, self.policy))
        elif not is_real_scalar(loss):  # read by no one: not worth a warning, nor a refusal
            loss = None
        d = self.monitor.observe(self.job_id, step, math.nan if score is None else score,
                                 math.nan if loss is None else loss)
        self._observed_step = step
        return d

    def _usable(self, name: str, value, step: int, problem: str | None):
        """``value``, or None (a missing reading) with a warning naming ``problem``: replay
        refuses such a log and StopMonitor such a reading, but a live run is not ended
        over it (a string metric, or a GRPO loss <= 0 under loss_plateau, raised inside
        the Trainer and killed the run)."""
        if problem is None:
            return value
        _warn(f"{type(self).__name__}: {name} = {value!r} at step {step} is "
                      f"{problem}; taken as a missing reading (neither a decline nor a reset)",
                      stacklevel=3)
        return None

    def on_train_end(self, args, state, control, **kwargs):
        if self.keep_checkpoint is not None and not Path(self.keep_checkpoint).is_dir():
            _warn(f"{type(self).__name__}: checkpoint {self.keep_checkpoint} was not saved",
                          stacklevel=2)
            self.keep_checkpoint = None
        if self.monitor is not None and getattr(args, "should_save", True):
            # a run that never evaluated its metric writes its record too, or an earlier
            # run's evalstop.json in the same output_dir would stand for this one
            d = self.decision or Decision(False, None, f"no evaluation reported {self.metric}",
                                          0, 0)
            record = {"stopped": d.stop, "keep_step": d.keep_step,
                      "keep_checkpoint": self.keep_checkpoint, "reason": d.reason,
                      "policy": self.policy.label, "k": self.k, "metric": self.metric,
                      "global_step": int(state.global_step)}
            # whole or not at all: a crash mid-write keeps the previous record
            atomic_write_bytes(Path(args.output_dir) / "evalstop.json",
                               (json.dumps(record, indent=2) + "\n").encode())


EvalStopCallback = StopPolicyCallback


def _refuse_both_names(name: str, policy, k, metric_for_best_model, metric, greater_is_better,
                       higher_is_better) -> None:
    """Refuse a setting given under both of its names: one would be dropped."""
    for new_name, new_value, old_name, old_value in (
            ("policy", policy, "k", k),
            ("metric_for_best_model", metric_for_best_model, "metric", metric),
            ("greater_is_better", greater_is_better, "higher_is_better", higher_is_better)):
        if new_value is not None and old_value is not None:
            raise ConfigError(f"{name}: {new_name}={new_value!r} and {old_name}={old_value!r}; "
                              f"allowed: one of the two ({old_name} is the earlier name)")


def _check_flags(name: str, greater_is_better, higher_is_better, protect_checkpoint) -> None:
    """Refuse a flag that is not True or False (the metric's sense may be None)."""
    for flag, value, none_ok in (("greater_is_better", greater_is_better, True),
                                 ("higher_is_better", higher_is_better, True),
                                 ("protect_checkpoint", protect_checkpoint, False)):
        if not (isinstance(value, bool) or (none_ok and value is None)):
            raise ConfigError(f"{name} {flag} = {value!r}: allowed: True or False"
                              + (" (or None: from TrainingArguments, else the metric's name)"
                                 if none_ok else ""))


def _policy_spec(name: str, policy: str | PolicyConfig | None, k) -> str | PolicyConfig:
    """The policy to run: ``evalstop:k=K`` for the earlier ``k`` (an integer >= 1, else
    refused), ``policy`` as given, or ``DEFAULT_POLICY`` for neither."""
    if k is not None:
        # an integer, not text: k="3,scope=all" set the scope through the spec, and
        # k=True was refused as policy.k='True'
        k = plain_scalar(k)
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigError(f"{name} k = {k!r}: allowed: an integer >= 1 (consecutive "
                              "declines; the earlier name of policy=\"evalstop:k=K\")")
        policy = f"evalstop:k={k}"
    elif policy is None:
        # None, not the text, is the default: StopPolicyCallback("evalstop:k=2", k=3)
        # read the text given as the default left out, and ran k=3 without a word
        policy = DEFAULT_POLICY
    return policy


def _trainer_settings(args, name: str) -> tuple[str | None, bool | None]:
    """``args.metric_for_best_model`` and ``args.greater_is_better``, after refusing, in
    one line, a value of the ``TrainingArguments`` fields the callback reads that it could
    only misread.  TrainingArguments keeps what it is given (``parse_dict``, a YAML or JSON
    config read as text, a field set after construction): ``greater_is_better="False"``
    was read as True, here and by the Trainer's own best-model tracking and
    ``EarlyStoppingCallback``, which take its truth value, so the callback stopped on the
    wrong direction of the metric; only HfArgumentParser's command line turns text into a
    bool.  A refusal, not a reading of the text, keeps the callback and the Trainer
    agreeing.  A numpy bool or integer is the bool or int it is."""
    def refuse(field: str, value, allowed: str) -> ConfigError:
        return ConfigError(f"{name}: TrainingArguments {field} = {value!r} "
                           f"({type(value).__name__}); allowed: {allowed}")

    best = plain_scalar(getattr(args, "metric_for_best_model", None))
    if best is not None and (not isinstance(best, str) or not best.strip()):
        raise refuse("metric_for_best_model", best, "a metric name, or None")
    for field, none_ok in (("greater_is_better", True), ("load_best_model_at_end", False)):
        value = plain_scalar(getattr(args, field, None if none_ok else False))
        if not (isinstance(value, bool) or (none_ok and value is None)):
            raise refuse(field, value, ("True, False or None" if none_ok else "True or False")
                         + (" (the Trainer takes any text as true, 'False' too)"
                            if isinstance(value, str) else ""))
    limit = plain_scalar(getattr(args, "save_total_limit", None))
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
        raise refuse("save_total_limit", limit, "None or an integer")
    return best, plain_scalar(getattr(args, "greater_is_better", None))


def _planned_steps(args, state) -> float | None:
    """The run's planned length: ``max_steps``, or, for a run set by ``num_train_epochs``,
    the steps the Trainer computed from it (``state.max_steps``, known before
    ``on_train_begin``); None before either is known.  A numpy integer is the int it is;
    a bool is no length."""
    lengths = (plain_scalar(getattr(x, "max_steps", 0)) for x in (args, state))
    return next((float(n) for n in lengths
                 if isinstance(n, int) and not isinstance(n, bool) and n > 0), None)


def _score_problem(score) -> str | None:
    """Why StopMonitor would refuse a reported score (None: it takes it, or it is None)."""
    if score is None:
        return None
    if not is_real_scalar(score):
        return "not a number"
    if math.isfinite(float(score)) and abs(float(score)) > MAX_SCORE:
        # the noise fits of margin, cusum, peak and bocpd overflow beyond
        return f"beyond +-{MAX_SCORE:g}, the range replay and StopMonitor take"
    return None


def _loss_problem(loss, policy: PolicyConfig) -> str | None:
    """Why StopMonitor would refuse the training loss for ``policy`` (None: it takes it)."""
    if loss is None:
        return None
    if not is_real_scalar(loss):
        return "not a number"
    if policy.decl.positive_losses and float(loss) <= 0:
        return "not allowed: " + policy.decl.loss_rule(policy.label)
    return None


def _train_loss(log_history) -> float:
    """The latest training loss the Trainer logged (``loss`` of a step's log entry), as
    replay reads a trainer_state.json: the loss that loss-reading policies decide on."""
    for entry in reversed(log_history or []):
        if isinstance(entry, dict) and "loss" in entry and "step" in entry:
            return entry["loss"]
    return math.nan


def _eval_name(metric: str) -> str:
    return metric if metric.startswith("eval_") else f"eval_{metric}"
