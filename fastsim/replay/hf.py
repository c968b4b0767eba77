"""EvalStop as a Hugging Face ``TrainerCallback`` (optional extra: ``pip install fastsim[hf]``).

``transformers`` is imported only when ``EvalStopCallback`` is first used, so ``fastsim``
imports without it.  The callback feeds every evaluation to an ``EvalStopMonitor``; on
a stop it sets ``control.should_training_stop`` and records the checkpoint to keep
(``keep_step``, ``keep_checkpoint``, and ``<output_dir>/evalstop.json``).

The checkpoint to keep is the one saved at the evaluation ``k`` before the trigger, so
save at every evaluation (``save_strategy`` = ``eval_strategy``, equal steps) and keep at
least ``k`` checkpoints (``save_total_limit`` None or >= k).  On a stop the callback marks
that checkpoint as ``state.best_model_checkpoint`` (unless ``load_best_model_at_end``
uses it), which Trainer's checkpoint rotation never deletes.

Examples
--------
>>> from fastsim.replay.hf import EvalStopCallback            # doctest: +SKIP
>>> trainer = Trainer(..., callbacks=[EvalStopCallback(k=2, metric="eval_loss")])  # doctest: +SKIP
>>> trainer.train(); trainer.callback_handler.callbacks[-1].keep_checkpoint        # doctest: +SKIP
"""
from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

from fastsim.errors import ConfigError
from fastsim.replay.logs import default_higher_is_better
from fastsim.replay.monitor import Decision, EvalStopMonitor

_CLASS = None


def _build():
    try:
        from transformers import TrainerCallback
    except ImportError as exc:  # the optional extra is missing
        raise ImportError("fastsim.replay.hf needs the optional Hugging Face extra: "
                          "pip install 'fastsim[hf]'") from exc

    class EvalStopCallback(TrainerCallback):
        """Stop a ``transformers.Trainer`` run after ``k`` consecutive declines of ``metric``.

        Parameters
        ----------
        k : consecutive strict declines that trigger a stop
        metric : evaluation metric name as Trainer reports it (``eval_`` prefix optional)
        higher_is_better : the metric's sense; None infers it from the name (``*loss``: lower)
        protect_checkpoint : on a stop, mark the kept checkpoint as the one rotation spares

        Attributes
        ----------
        decision : the last ``Decision`` (``stop``, ``keep_step``, ``reason``)
        keep_step : step of the checkpoint to keep (None while training continues)
        keep_checkpoint : its directory, or None when no such checkpoint was saved
        """

        def __init__(self, k: int = 2, metric: str = "eval_loss", higher_is_better: bool | None = None,
                     protect_checkpoint: bool = True, job_id: str = "trainer"):
            if not isinstance(metric, str) or not metric:
                raise ConfigError(f"EvalStopCallback metric = {metric!r}: allowed: a metric name")
            self.metric = metric if metric.startswith("eval_") else f"eval_{metric}"
            hib = default_higher_is_better(self.metric) if higher_is_better is None else higher_is_better
            self.monitor = EvalStopMonitor(k=k, higher_is_better=hib)
            self.k = k
            self.job_id = job_id
            self.protect_checkpoint = protect_checkpoint
            self.decision: Decision | None = None
            self.keep_step: int | None = None
            self.keep_checkpoint: str | None = None
            self._warned_missing = False

        def on_train_begin(self, args, state, control, **kwargs):
            self.monitor.reset(self.job_id)
            self.decision, self.keep_step, self.keep_checkpoint = None, None, None
            eval_s = str(getattr(args, "eval_strategy", "no")).split(".")[-1].lower()
            save_s = str(getattr(args, "save_strategy", "no")).split(".")[-1].lower()
            if eval_s != "no" and (save_s != eval_s or (eval_s == "steps"
                                                        and args.save_steps != args.eval_steps)):
                warnings.warn("EvalStopCallback: checkpoints are not saved at every evaluation "
                              f"(eval {eval_s}/{args.eval_steps}, save {save_s}/{args.save_steps}); "
                              "the checkpoint to keep may not exist", stacklevel=2)
            limit = getattr(args, "save_total_limit", None)
            if limit is not None and 0 < limit < self.k:
                warnings.warn(f"EvalStopCallback: save_total_limit={limit} < k={self.k} deletes the "
                              "checkpoint EvalStop keeps", stacklevel=2)

        def on_evaluate(self, args, state, control, metrics=None, **kwargs):
            value = (metrics or {}).get(self.metric, math.nan)
            if self.metric not in (metrics or {}) and not self._warned_missing:
                self._warned_missing = True
                warnings.warn(f"EvalStopCallback: metric {self.metric!r} not in the evaluation "
                              f"metrics {sorted(metrics or {})}; such evaluations are skipped",
                              stacklevel=2)
            d = self.monitor.observe(self.job_id, int(state.global_step), value)
            self.decision = d
            if d.stop:
                control.should_training_stop = True
                self.keep_step = d.keep_step
                ckpt = Path(args.output_dir) / f"checkpoint-{d.keep_step}"
                self.keep_checkpoint = str(ckpt)
                if self.protect_checkpoint and not getattr(args, "load_best_model_at_end", False):
                    state.best_model_checkpoint = str(ckpt)
            return control

        def on_train_end(self, args, state, control, **kwargs):
            if self.keep_checkpoint is not None and not Path(self.keep_checkpoint).is_dir():
                warnings.warn(f"EvalStopCallback: checkpoint {self.keep_checkpoint} was not saved",
                              stacklevel=2)
                self.keep_checkpoint = None
            if self.decision is not None and getattr(args, "should_save", True):
                record = {"stopped": self.decision.stop, "keep_step": self.decision.keep_step,
                          "keep_checkpoint": self.keep_checkpoint, "reason": self.decision.reason,
                          "k": self.k, "metric": self.metric, "global_step": int(state.global_step)}
                out = Path(args.output_dir)
                out.mkdir(parents=True, exist_ok=True)
                (out / "evalstop.json").write_text(json.dumps(record, indent=2) + "\n")

    return EvalStopCallback


def __getattr__(name: str):
    global _CLASS
    if name == "EvalStopCallback":
        if _CLASS is None:
            _CLASS = _build()
        return _CLASS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
