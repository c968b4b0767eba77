"""The arrays each stage of a run fills, one ``[cluster, job]`` array a field: the stop
decisions (``Decisions``), the engine's outcome (``Outcome``) and the metrics'
accounting (``Accounting``); and empty ones of a shape for the stages to fill.  Also which
of a workload's fields a decision may read."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# A workload's fields by who may read them: decisions see OBSERVED only.  duration_h is
# hidden from decisions, but the engine's physics needs it to know when service ends; it
# never reaches a decision kernel.
OBSERVED = ("job_type", "gpus", "arrival_h", "t_est_h", "score", "loss")
HIDDEN = ("duration_h", "hacking", "ustar", "height", "tau", "loss0", "loss_inf", "loss_tau",
          "gold", "peak_eval")


@dataclass
class Decisions:
    """Per-job stop-policy outcome ``[C, J]`` (evaluations 1-based, 0 = none)."""

    in_scope: np.ndarray
    stopped: np.ndarray
    demoted: np.ndarray
    trigger_eval: np.ndarray
    delivered_eval: np.ndarray


@dataclass
class Outcome:
    """Engine outputs ``[C, J]`` plus the optional run segments ``[C, S]``."""

    start_h: np.ndarray
    end_h: np.ndarray
    held_h: np.ndarray
    held_after_h: np.ndarray
    n_preempt: np.ndarray
    seg_job: np.ndarray
    seg_start: np.ndarray
    seg_end: np.ndarray
    seg_count: np.ndarray
    n_points: np.ndarray  # [C] scheduling points visited; -1: bound reached


@dataclass
class Accounting:
    """What the metrics add to the engine's outputs, ``[C, J]``: gold of the delivered
    checkpoint and of the best evaluation, wasted GPU-hours, detection positives."""

    delivered_gold: np.ndarray
    best_gold: np.ndarray
    wasted_gpu_h: np.ndarray
    positive: np.ndarray


def empty_decisions(shape: tuple[int, int]) -> Decisions:
    """Decisions of ``shape`` ``[C, J]``, to be filled by the stop-decisions stage."""
    return Decisions(np.empty(shape, np.bool_), np.empty(shape, np.bool_),
                     np.empty(shape, np.bool_), np.empty(shape, np.int32),
                     np.empty(shape, np.int32))


def empty_outcome(shape: tuple[int, int], max_segments: int) -> Outcome:
    """An Outcome of ``shape`` ``[C, J]`` with room for ``max_segments`` run segments per
    cluster, to be filled by the engine."""
    seg_shape = (shape[0], max_segments)
    return Outcome(np.full(shape, np.nan), np.full(shape, np.nan), np.zeros(shape),
                   np.zeros(shape), np.zeros(shape, np.int32), np.zeros(seg_shape, np.int64),
                   np.zeros(seg_shape), np.zeros(seg_shape), np.zeros(shape[0], np.int64),
                   np.zeros(shape[0], np.int64))
