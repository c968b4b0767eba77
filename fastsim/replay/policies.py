"""Replay stop policies on evaluation logs with the engine's own decision kernels.

Each job's observed sequence goes through ``kernels.detectors.stop_decision_1j_nb``, the
function the cluster engine decides with (a user policy: its own trigger function, the
one the engine's user driver calls), so replay and engine cannot drift apart.
Only observed columns reach it (scores, losses, steps, planned steps); ``truth_*``
columns of a trace set are read afterwards, to score the decisions.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np
import polars as pl

from fastsim import registry as R
from fastsim.config import PolicyConfig, check_code, plain_scalar, policy_reads
from fastsim.errors import ConfigError
from fastsim.plain_python import PlainCheck
from fastsim.replay.logs import EvalLog, where
from fastsim.stats import (Estimate, bootstrap_ratio_ci, cluster_mean_ci, cluster_sums, mean_ci,
                           proportion_ci)
from fastsim.kernels.codes import ACT_CONTINUE, ACT_DEMOTE, ACT_STOP
from fastsim.kernels.detectors import stop_decision_1j_nb
from fastsim.kernels.stops import trigger_scratch, user_prefix_driver


def parse_policy(spec: str | PolicyConfig) -> PolicyConfig:
    """A stop policy from its spec (``evalstop:k=2``, ``stop_at:f=0.65``,
    ``loss_plateau:w=2,tol=0.01``, ``deprioritize:k=2``, ``none``, ``oracle``), the
    same grammar as ``fastsim run``.  Scope defaults to ``all`` here: a log's jobs are
    the ones you asked about, and a job without ``job_type`` is in scope anyway.

    Examples
    --------
    >>> parse_policy("evalstop:k=3").label
    'evalstop(k=3)[scope=all]'
    """
    if isinstance(spec, PolicyConfig):
        check_code(spec, "policy")
        return spec
    name, params = R.parse_spec(spec, "policy")  # ``module:function`` has a colon too
    if "scope" not in params:
        params["scope"] = "all"
    return PolicyConfig.parse(name + ":" + ",".join(f"{k}={v}" for k, v in params.items()))


def decide_series(p: PolicyConfig, score: np.ndarray, loss: np.ndarray, attained: np.ndarray,
                  t_est: float, plain: PlainCheck | None = None,
                  job_id=None) -> tuple[int, int, int]:
    """``(action, trigger_eval, delivered_eval)`` of one job's observed series (float64,
    contiguous), as the engine decides it: built-ins through ``stop_decision_1j_nb``, a
    user policy through its trigger function, and its plain-Python version beside it on
    the calls ``plain`` has left (``fastsim.plain_python``, job ``job_id`` of the log;
    without ``plain``, this series' first ``plain_python.MAX_CALLS`` calls, as the monitor
    checks its own)."""
    d = p.decl
    if d.user is None:
        return stop_decision_1j_nb(int(p.code), int(p.k), float(p.f), int(p.w), float(p.tol),
                                   np.array(p.vector, np.float64), score, loss, attained,
                                   float(t_est))
    if plain is None:  # called alone: its answers rested unchecked on what numba made up
        plain = PlainCheck(p)
    values = p.values
    params = tuple(v for k, v in values.items() if k != "scope")
    with R.calling(d, "stop policy"), prefix_call(p):
        trig = _asked_in_turn(d.user, score, loss, attained, float(t_est), params, plain,
                              job_id)
    R.check_returns(d, "stop policy")
    n = score.shape[0]
    if trig == 0:
        return ACT_CONTINUE, 0, n
    deliv = d.delivered(trig, values, n, score) if trig > 0 else -1
    if trig < 0 or deliv < 1:
        job = "the series" if job_id is None else f"job {job_id!r} of the log"
        raise ConfigError(R.trigger_error(d.name, values, R.broken_at(
            d, params, job, trig, (score, loss, attained, t_est))))
    return (ACT_DEMOTE if d.action == "demote" else ACT_STOP), trig, deliv


def prefix_call(p: PolicyConfig):
    """The notice around a call of ``p``'s user trigger through ``user_prefix_driver``
    (replay, the monitor): the first in a process compiles it, in silence before."""
    from fastsim.compile_notice import user_call

    return user_call(user_prefix_driver(p.decl.user), "stop policy", p.name)


def _asked_in_turn(trigger, score, loss, attained, t_est: float, params: tuple,
                   plain: PlainCheck | None = None, job_id=None) -> int:
    """``kernels.stops.causal_trigger_nb``'s answer (the first prefix the trigger answers
    with its own length; 0; -1 for any other answer), asked one prefix at a time in
    ``series_scratch``, as the monitor asks: scratch sized to the job told a trigger that
    reads past its prefix how many evaluations the log holds."""
    ask = user_prefix_driver(trigger)
    seen = shown = None
    for n in range(score.shape[0]):
        seen, shown = series_scratch(seen, shown, n)
        seen[:, n] = score[n], loss[n], attained[n]
        r = int(ask(shown, n + 1, t_est, params))
        if plain is not None and plain.ask():
            plain.check(shown[0, :n + 1], shown[1, :n + 1], shown[2, :n + 1], t_est, r,
                        f"on evaluation {n + 1} of the series" if job_id is None else
                        f"on job {job_id!r} of the log, evaluation {n + 1}")
        if r != 0:
            return r
    return 0


def series_scratch(seen, shown, n: int):
    """Scratch for a job's first ``n + 1`` evaluations (``[3, capacity]``, NaN past what
    was written, and ``shown``, its read-only alias): ``seen, shown`` themselves while a
    NaN column is left past them, else twice as wide with the first ``n`` columns copied
    (None: new).  Its width follows the prefix, never the job's length, which a trigger
    reading past its prefix (numba checks no bounds) finds where the NaN ends."""
    if seen is not None and n + 1 < seen.shape[1]:
        return seen, shown
    wider, alias = trigger_scratch(max(16, 2 * (n + 1)) - 1)  # [3, capacity]
    wider[:] = np.nan
    if seen is not None:
        wider[:, :n] = seen[:, :n]
    return wider, alias


AT_COMPLETION = "triggered_at_completion"
"""A trigger with no logged step after it: the run's completion (the simulator's
``pos_at_completion``).  A stop there saves no step and no GPU-hour and a demotion
leaves nothing to demote, so it is a detection but neither ``stopped`` nor ``demoted``."""


def at_completion(step: np.ndarray, trigger_row: int) -> bool:
    """Whether a trigger at ``trigger_row`` of a job's rows (sorted by step) is the run's
    completion: no logged step after it, so a stop there saves ``final_step - trigger_step
    = 0`` steps.  Loss-only rows or unscored steps after the last evaluation are logged
    training, so a trigger at the last evaluation before them is not at completion."""
    return trigger_row >= 0 and step[trigger_row] >= step[-1]


@dataclass(frozen=True)
class JobOutcome:
    """One job under one policy (1-based evaluation indices over the used rows; 0 = never)."""

    status: str
    trigger_row: int      # row index in the job's table, -1 = none
    delivered_row: int
    n_evals: int


def _check_losses(t: pl.DataFrame, pols: list[PolicyConfig]) -> None:
    """A ``positive_losses`` policy (``loss_plateau``: ``(L_{e-w} - L_e) / L_{e-w}``,
    MODEL.md) reads a relative drop: at a zero loss it is undefined and at a negative one
    it reverses (a falling loss reads as a rise), so such a reading is refused, by line,
    before any job is replayed."""
    readers = [p for p in pols if p.decl.positive_losses]
    if not readers or "loss" not in t.columns:
        return
    bad = t.filter(pl.col("loss") <= 0)
    if bad.height:
        r = bad.row(0, named=True)
        raise ConfigError(f"{where(r, 'loss')}: field 'loss': {r['loss']:g}; allowed: "
                          + readers[0].decl.loss_rule(readers[0].label))


def _no_loss_column(p: PolicyConfig) -> ConfigError:
    """The refusal of a log without a ``loss`` column under ``p``, a policy that reads
    losses (``config.policy_reads``): a user's that loads them without declaring it was
    handed none and never stopped on them, silently."""
    unsaid = "" if "losses" in p.decl.reads else " (its function reads losses, not declared)"
    return ConfigError(f"policy {p.label}{unsaid}: the log has no 'loss' column; allowed: a "
                       "policy that does not read losses (or add a loss column)")


def _check_loss_column(t: pl.DataFrame, pols: list[PolicyConfig]) -> None:
    """A policy that reads losses needs a ``loss`` column: refused before any job is
    replayed (``_no_loss_column``)."""
    if "loss" not in t.columns:
        for p in pols:
            if policy_reads("losses", p):
                raise _no_loss_column(p)


def _check_planned(t: pl.DataFrame, pols: list[PolicyConfig]) -> None:
    """A user policy that reads the planned length (``t_est_h``) needs it logged: without
    ``max_steps`` replay knows only the logged length, which is hindsight (built-in
    ``stop_at`` uses it, as docs/replay.md says; a user's code gets NaN when it does not
    declare reading ``t_est_h``)."""
    readers = [p for p in pols if p.decl.user is not None and "t_est_h" in p.decl.reads]
    if not readers:
        return
    ms = (t["max_steps"].cast(pl.Float64) if "max_steps" in t.columns
          else pl.Series([np.nan] * t.height))
    known = t.select("job_id").with_columns(ok=(ms.is_finite() & (ms > 0)).fill_null(False))
    missing = known.group_by("job_id", maintain_order=True).agg(pl.col("ok").any())
    missing = missing.filter(~pl.col("ok"))
    if missing.height:
        raise ConfigError(f"policy {readers[0].label} reads the planned length (t_est_h): job "
                          f"{missing['job_id'][0]!r} has no max_steps; allowed: a log with a "
                          "max_steps column for every job, or a policy that does not read t_est_h")


def decide_job(p: PolicyConfig, score: np.ndarray, loss: np.ndarray | None, step: np.ndarray,
               planned_steps: float, in_scope: bool, truth_hacking=None, truth_gold=None,
               plain: PlainCheck | None = None, job_id=None) -> JobOutcome:
    """Decide one job from its rows (sorted by step); NaN scores or losses are skipped.

    ``score`` is in the higher-is-better sense.  Returns row indices into the job's rows.
    A trigger with no logged step after it is ``AT_COMPLETION`` (``at_completion``), not
    ``stopped`` or ``demoted``.
    """
    eval_rows = np.flatnonzero(~np.isnan(score))
    last = int(eval_rows[-1]) if eval_rows.size else len(score) - 1
    if not in_scope:
        return JobOutcome("out_of_scope", -1, last, int(eval_rows.size))
    if loss is None and policy_reads("losses", p):
        raise _no_loss_column(p)
    if "losses" in p.decl.reads:
        rows = np.flatnonzero(~np.isnan(loss))
    else:
        rows = eval_rows
    if rows.size == 0:
        return JobOutcome("no_evaluations", -1, last, 0)
    if p.name == "none":
        return JobOutcome("continued", -1, last, int(rows.size))
    if p.uses_hidden_truth:  # the oracle, declared: stop hacking jobs at the gold peak
        if truth_hacking is None or truth_gold is None:
            real = [d.name for d in R.policies() if not d.uses_hidden_truth]
            raise ConfigError("policy oracle: needs hidden truth (truth_hacking, truth_gold "
                              f"columns, as in a trace set); allowed on real logs: "
                              f"{', '.join(real)} or a user policy")
        if bool(truth_hacking):
            peak = int(rows[np.argmax(truth_gold[rows])])
            status = AT_COMPLETION if at_completion(step, peak) else "stopped"
            return JobOutcome(status, peak, peak, int(rows.size))
        return JobOutcome("continued", -1, last, int(rows.size))
    s = np.ascontiguousarray(score[rows], dtype=np.float64)
    lo = np.ascontiguousarray(loss[rows], dtype=np.float64) if loss is not None else np.zeros(rows.size)
    attained = np.ascontiguousarray(step[rows], dtype=np.float64)
    action, trig, deliv = decide_series(p, s, lo, attained, planned_steps, plain, job_id)
    if action == ACT_STOP:
        t_row = int(rows[trig - 1])
        status = AT_COMPLETION if at_completion(step, t_row) else "stopped"
        return JobOutcome(status, t_row, int(rows[deliv - 1]), int(rows.size))
    if action == ACT_DEMOTE:
        t_row = int(rows[trig - 1])
        # the job runs to its end either way: the delivered checkpoint is the last one
        status = AT_COMPLETION if at_completion(step, t_row) else "demoted"
        return JobOutcome(status, t_row, last, int(rows.size))
    status = "too_short" if rows.size < p.min_evals else "continued"
    return JobOutcome(status, -1, last, int(rows.size))


def _gpu_h(time_h: np.ndarray, gpus: np.ndarray, after_row: int) -> tuple[float, float]:
    """(total, held after ``after_row``) GPU-hours; interval ``i-1 -> i`` at ``gpus[i]``,
    the first from the job's start: a log's time is hours since then (trainer_state's
    ``step * train_runtime / global_step`` is 0 at step 0), and a total from the first
    evaluation left out the training before it (a run evaluated every 100 of 600 steps
    read 5/6 of its GPU-hours)."""
    with np.errstate(over="ignore"):  # an overflow is refused by _check_gpu_h, in one line
        held = gpus * np.diff(time_h, prepend=0.0)
        if np.isnan(held).any():  # a missing GPU count or time: both unknown, not a part of one
            return np.nan, np.nan
        total = float(held.sum())
        saved = float(held[after_row + 1:].sum()) if after_row >= 0 else 0.0
    return total, saved


@dataclass(frozen=True)
class _Job:
    """One job's log as arrays, read once and replayed under every policy."""

    score: np.ndarray
    metric: np.ndarray
    step: np.ndarray
    loss: np.ndarray | None
    planned: float  # the planned length in steps, or the logged length in hindsight
    known: bool  # whether ``planned`` came from the log's max_steps
    job_type: str | None
    time_h: np.ndarray | None
    gpus: np.ndarray
    truth_hacking: bool | None
    truth_gold: np.ndarray | None
    truth_gold_peak_step: int | None
    seed: str | None  # the replication: jobs of one seed share their random draws

    @classmethod
    def of(cls, g: pl.DataFrame, gpus: float | None, has_truth: bool) -> "_Job":
        def floats(c):
            return g[c].to_numpy().astype(np.float64) if c in g.columns else None
        step = g["step"].to_numpy()
        planned = np.nan
        if "max_steps" in g.columns:
            ms = g["max_steps"].to_numpy()
            ms = ms[np.isfinite(ms)]
            planned = float(ms[0]) if ms.size else np.nan
        known = bool(np.isfinite(planned) and planned > 0)
        if not known:
            planned = float(max(step[-1], 1))  # hindsight: the logged length (docs/replay.md)
        g_gpus = floats("gpus") if "gpus" in g.columns else np.full(g.height, np.nan)
        if gpus is not None:
            g_gpus = np.where(np.isnan(g_gpus), float(gpus), g_gpus)
        peak = _one(g, "truth_gold_peak_step") if has_truth else None
        return cls(score=floats("score"), metric=floats("metric"), step=step, loss=floats("loss"),
                   planned=planned, known=known, job_type=_one(g, "job_type"),
                   time_h=floats("time_h"), gpus=g_gpus,
                   truth_hacking=bool(g["truth_hacking"][0]) if has_truth else None,
                   truth_gold=floats("truth_gold") if has_truth else None,
                   truth_gold_peak_step=_int_or_none(peak), seed=_one(g, "seed"))


def _replay_one(p: PolicyConfig, job: _Job, sign: float, plain: PlainCheck | None = None,
                job_id=None) -> dict:
    """One policy on one job: ``replay``'s row without its policy and job_id (``plain``:
    ``decide_series``'s)."""
    step, score, metric = job.step, job.score, job.metric
    scoped = p.scope == "all" or job.job_type is None or job.job_type == "rlhf"
    # a user's policy never gets the hindsight length (_check_planned)
    plan = job.planned if job.known or p.decl.user is None else np.nan
    o = decide_job(p, score, job.loss, step, plan, scoped, job.truth_hacking, job.truth_gold,
                   plain, job_id)
    final_step = int(step[-1])
    stopped = o.status == "stopped"  # frees something: final_step > trigger_step
    trig_step = int(step[o.trigger_row]) if o.trigger_row >= 0 else None
    saved = final_step - trig_step if stopped else 0
    total_gh = saved_gh = np.nan
    if job.time_h is not None:
        total_gh, saved_gh = _gpu_h(job.time_h, job.gpus, o.trigger_row if stopped else -1)
    d = o.delivered_row
    scored = ~np.isnan(score)
    final_row = int(np.flatnonzero(scored)[-1]) if scored.any() else d
    row = {
        "status": o.status,
        "stopped": stopped, "detected": o.status in ("stopped", "demoted", AT_COMPLETION),
        "in_scope": o.status != "out_of_scope", "n_evals": o.n_evals,
        "trigger_step": trig_step, "delivered_step": int(step[d]), "final_step": final_step,
        "delivered_metric": float(metric[d]), "final_metric": float(metric[final_row]),
        "delivered_gain": _gain(metric[d], metric[final_row], sign),
        "steps_saved": int(saved),
        "compute_saved_share": saved / final_step if final_step > 0 else np.nan,
        "gpu_h_total": total_gh, "gpu_h_saved": saved_gh,
    }
    if job.truth_gold is not None:
        tg = job.truth_gold
        best = float(np.max(tg[scored])) if scored.any() else np.nan
        row.update({
            "truth_hacking": job.truth_hacking,
            "truth_gold_peak_step": job.truth_gold_peak_step,
            "delivered_truth_gold": float(tg[d]), "best_truth_gold": best,
            "regret_truth_gold": best - float(tg[d]),
        })
    return row


def replay(log: EvalLog, policies, gpus: float | None = None, progress: bool = False) -> pl.DataFrame:
    """Replay each policy on each job of ``log``; one row per (policy, job).

    Parameters
    ----------
    log : EvalLog from ``read_logs``
    policies : specs or ``PolicyConfig``s (see ``parse_policy``); one given twice is
        replayed once
    gpus : GPU count for jobs whose log has none (GPU-hours need it and ``time``)

    Columns: ``policy, job_id, status, stopped, detected, in_scope, n_evals, trigger_step,
    delivered_step, final_step, delivered_metric, final_metric, delivered_gain`` (delivered
    minus final, > 0 means better in the metric's sense), ``steps_saved,
    compute_saved_share`` (``steps_saved / final_step``), ``gpu_h_total, gpu_h_saved``
    (NaN without time and GPU counts) and, for trace sets, ``truth_hacking,
    truth_gold_peak_step, delivered_truth_gold, best_truth_gold, regret_truth_gold``; a
    log with a ``seed`` column adds ``seed`` after ``job_id``.
    ``stopped`` is a stop that frees something (``steps_saved > 0``); a trigger at the
    job's last logged step is status ``triggered_at_completion``: ``detected``, but not
    ``stopped`` (``at_completion``).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from fastsim.replay.logs import read_logs
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "log.csv"
    >>> _ = p.write_text("job_id,step,score\\na,1,0.5\\na,2,0.6\\na,3,0.5\\na,4,0.4\\na,5,0.3\\n"
    ...                  "b,1,0.5\\nb,2,0.6\\nb,3,0.5\\nb,4,0.4\\n")
    >>> r = replay(read_logs([p]), ["evalstop:k=2"])
    >>> r.select("job_id", "status", "trigger_step", "delivered_step", "steps_saved").rows()
    [('a', 'stopped', 4, 2, 1), ('b', 'triggered_at_completion', 4, 2, 0)]
    """
    from fastsim.compile_notice import first_call
    from fastsim.progress import progress_bar

    gpus = plain_scalar(gpus)  # numpy's count is a count: np.int64(8)
    if gpus is not None and not (R.is_number(gpus) and gpus > 0):
        raise ConfigError(f"gpus={gpus!r} is invalid; allowed: a positive finite GPU count")
    # a policy given twice (or as two specs of one policy) is replayed once: its rows
    # twice over counted every job twice in its summary
    pols = list(dict.fromkeys(parse_policy(p) for p in policies))
    if not pols:
        raise ConfigError("no policy given; allowed: e.g. --policy evalstop:k=2")
    _check_labels(pols)
    _check_log(log)
    t = log.table
    _check_loss_column(t, pols)
    _check_losses(t, pols)
    _check_planned(t, pols)
    has_truth = "truth_hacking" in t.columns and "truth_gold" in t.columns
    sign = 1.0 if log.higher_is_better else -1.0
    rows = []
    jobs = [(job_id, _Job.of(g, gpus, has_truth))
            for (job_id,), g in t.group_by("job_id", maintain_order=True)]
    _check_gpu_h(jobs)  # before any job is replayed
    seeded = "seed" in t.columns
    # each user policy's plain-Python version beside its compiled one, on the log's first
    # jobs (fastsim.plain_python): where Python raises, the decisions rested on a value
    # numba made up (int() of a NaN, an index past the prefix), and replay said nothing
    plain = {p: PlainCheck(p) for p in pols if p.decl.user is not None}
    # the first replay on a machine compiled the decision kernel for 5-15 s in silence; a
    # replay of user policies alone never calls it (each says its own: ``prefix_call``),
    # and said it at every run, the cache warm
    built_in = any(p.decl.user is None for p in pols)
    with (first_call("detectors.stop_decision_1j_nb", what="the stop-policy kernels",
                     seconds="5-15") if built_in else contextlib.nullcontext()):
        for job_id, job in progress_bar(jobs, desc="replay", enabled=progress):
            for p in pols:
                row = {"policy": p.label, "job_id": job_id,
                       **({"seed": job.seed} if seeded else {}),
                       **_replay_one(p, job, sign, plain.get(p), job_id)}
                rows.append(row)
    # steps are integers, or null where there is none: typed so, not by the rows (a run
    # where no job triggers would write a column of Parquet type null); seeds are labels
    types = {c: pl.Int64 for c in ("trigger_step", "truth_gold_peak_step") if c in rows[0]}
    return pl.DataFrame(rows, schema_overrides=types | ({"seed": pl.String} if seeded else {}))


def _check_log(log) -> None:
    """``log`` as ``read_logs`` makes it, for one built by hand: replay reads each job's rows
    in order, so steps out of order decided on the series reversed, a repeated step on two
    evaluations at once, and text scores were read as numbers; a table that is not one was
    an AttributeError, and one without its columns a numpy TypeError."""
    made = "as fastsim.read_logs makes it"
    if not isinstance(log, EvalLog) or not isinstance(log.table, pl.DataFrame):
        raise ConfigError(f"log is {type(log).__name__}; allowed: an EvalLog of a polars "
                          f"DataFrame, {made}")
    # "no" is truthy; numpy's bool is a bool, as read_logs takes it
    if not isinstance(plain_scalar(log.higher_is_better), bool):
        raise ConfigError(f"log.higher_is_better={log.higher_is_better!r}; allowed: True or False")
    t = log.table
    for col, ok, what in (("job_id", lambda d: True, "job ids"),
                          ("step", lambda d: d.is_integer(), "integers"),
                          ("score", lambda d: d.is_numeric(), "numbers"),
                          ("metric", lambda d: d.is_numeric(), "numbers")):
        if col not in t.columns or not ok(t.schema[col]):
            got = f"of type {t.schema[col]}" if col in t.columns else "missing"
            raise ConfigError(f"log.table column {col!r} is {got}; allowed: a column of {what}, "
                              f"{made}")
    for col in ("job_id", "step"):  # an empty one passed the comparisons below
        if t[col].null_count():
            raise ConfigError(f"log.table row {int(t[col].is_null().arg_max())}: {col} is empty; "
                              f"allowed: a {col} on every row, {made}")
    bad = t.with_row_index("row").filter(
        (pl.col("step") < 0) | (pl.col("step").diff().over("job_id") <= 0))
    if bad.height:
        r = bad.row(0, named=True)
        raise ConfigError(f"log.table row {r['row']}: job {r['job_id']!r} step {r['step']} is "
                          "negative or not after the job's previous row; allowed: steps >= 0, "
                          f"increasing within each job, {made}")
    if "seed" in t.columns:
        _check_seed_column(t, made)


def _check_seed_column(t: pl.DataFrame, made: str) -> None:
    """A hand-built log's seeds: labels (text or integers), one per job.  1.5 or True were taken as
    the labels '1.5' and 'true' (read_logs refuses them), and a job's later seed was
    dropped for its first."""
    dtype = t.schema["seed"]
    if dtype not in (pl.String, pl.Null) and not dtype.is_integer():
        raise ConfigError(f"log.table column 'seed' is of type {dtype}; allowed: text labels "
                          f"or integers (None for no seed), {made}")
    twice = t.group_by("job_id", maintain_order=True).agg(
        pl.col("seed").drop_nulls().n_unique().alias("n")).filter(pl.col("n") > 1)
    if twice.height:
        raise ConfigError(f"log.table column 'seed': job {twice['job_id'][0]!r} has "
                          f"{twice['n'][0]} seeds; allowed: one seed per job, {made}")


def _check_labels(pols: list[PolicyConfig]) -> None:
    """Rows and summaries name a policy by its label: two policies of one label (two users'
    modules declaring ``drops(k={k})``) were summarised as one policy over twice the jobs,
    and their rows could not be told apart."""
    seen: dict[str, PolicyConfig] = {}
    for p in pols:
        other = seen.setdefault(p.label, p)
        if other is not p and other.name == p.name:
            # one declaration at two settings: its label leaves out what they differ in
            # (a user's label, or none: the name alone), which another module cannot mend
            param = p.decl.param  # a parameter's declaration, which prints its values
            differ = ", ".join(f"{k}={param(k).text(other.values[k])} and {k}={param(k).text(v)}"
                               for k, v in p.values.items() if other.values.get(k) != v)
            raise ConfigError(f"policy {p.name} at two settings ({differ}) is labelled "
                              f"{p.label!r} at both: its label leaves out what they differ "
                              "in; allowed: one setting, or a label naming every parameter "
                              "(label=\"name(k={k})\" in its declaration)")
        if other is not p:
            raise ConfigError(f"policies {other.name} and {p.name} are both labelled "
                              f"{p.label!r}; allowed: policies whose labels differ (declare "
                              "one with a label of its own)")


def _check_gpu_h(jobs: list) -> None:
    """Finite times and GPU counts can still hold infinite GPU-hours (1e308 h apart, or
    --gpus 1e308), in a job or in the summary's sum over jobs: they were reported as inf
    GPU-hours, with numpy's overflow warning."""
    total = 0.0
    for job_id, job in jobs:
        held = _gpu_h(job.time_h, job.gpus, -1)[0] if job.time_h is not None else np.nan
        total += 0.0 if np.isnan(held) else held
        if np.isinf(total):
            where = f"job {job_id!r}" if np.isinf(held) else f"the jobs up to {job_id!r}"
            raise ConfigError(f"{where}: GPU-hours held (gpus x hours since the job started) "
                              "beyond a float's range; allowed: times and GPU counts whose "
                              "products, and their sum, are finite")


def _gain(kept: float, final: float, sign: float) -> float:
    """Kept minus final metric in its better direction.  Equal values gain nothing, inf
    and inf too (a metric may be: docs/replay.md), where the subtraction would be NaN."""
    if kept == final:
        return 0.0
    return float((kept - final) * sign)


def _one(g: pl.DataFrame, field: str):
    """A per-job field's value: its rows agree where given (``read_logs`` refuses rows that
    disagree), and a row that leaves it empty says nothing."""
    if field not in g.columns:
        return None
    given = g[field].drop_nulls()
    return given[0] if given.len() else None


def _int_or_none(x) -> int | None:
    return None if x is None or x != x else int(x)


def _put(out: dict, name: str, e: Estimate) -> None:
    out[name], out[f"{name}_lo"], out[f"{name}_hi"] = e.mean, e.lo, e.hi


# What summarize_replay reads of replay's rows; the truth_* ones when the log has them.
SUMMARY_INPUTS = ("policy", "in_scope", "detected", "stopped", "status", "delivered_gain",
                  "steps_saved", "final_step", "gpu_h_total", "gpu_h_saved")
TRUTH_INPUTS = ("regret_truth_gold", "trigger_step", "truth_gold_peak_step")


def _check_results(results) -> None:
    """``results`` is replay's table: anything else was a Polars ColumnNotFoundError."""
    from fastsim.summary import check_table

    truth = isinstance(results, pl.DataFrame) and "truth_hacking" in results.columns
    check_table(results, "summarize_replay", "results",
                SUMMARY_INPUTS + (TRUTH_INPUTS if truth else ()),
                "allowed: the rows of fastsim.replay (or fastsim.replay.replay)")


def summarize_replay(results: pl.DataFrame) -> pl.DataFrame:
    """One row per policy: triggers, delivered-vs-final, compute saved and, when the
    log carries hidden truth, precision / recall / FPR / stop recall and stop FPR (stopped
    before completion: status ``stopped``) / share of triggers at completion (status
    ``triggered_at_completion``), with job-bootstrap intervals (seed-bootstrap on a log
    with seeds).

    Counts: ``n_stopped`` (stops that free something), ``n_demoted``,
    ``n_triggered_at_completion`` (triggers with no logged step after them), ``n_too_short``,
    ``n_no_evaluations``, ``n_detected`` (every trigger) and ``n_delivered_gain_known``
    (triggers whose kept step has a score: a loss-reading policy may keep a loss-only
    step; ``delivered_gain`` is the mean over these), ``n_delivered_gain_infinite`` (triggers
    kept at an infinite score against a finite final one, or the reverse: left out of the
    mean, which they would make infinite).  Positive = the policy stopped or
    demoted the job, at completion too; truth = ``truth_hacking``.

    Intervals resample jobs (``fastsim.stats.bootstrap_ratio_ci``; means ``mean_ci``), or,
    when ``results`` has a ``seed`` column (a log with one: a trace set), seeds: the jobs of
    one seed share their random draws, so the seed is the replication (rates and compute
    saved from the seeds' sums, means ``cluster_mean_ci``; a job without a seed is its own),
    and ``n_seeds`` says how many there are.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from fastsim.replay.logs import read_logs
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "log.csv"
    >>> _ = p.write_text("job_id,step,score\\na,1,0.5\\na,2,0.6\\na,3,0.5\\na,4,0.4\\na,5,0.3\\n"
    ...                  "b,1,0.5\\nb,2,0.6\\nb,3,0.5\\nb,4,0.4\\n")
    >>> s = summarize_replay(replay(read_logs([p]), ["evalstop:k=2"]))
    >>> s.select("n_stopped", "n_triggered_at_completion").row(0)
    (1, 1)
    """
    _check_results(results)
    out_rows = []
    seeded = "seed" in results.columns
    for (label,), g in results.group_by("policy", maintain_order=True):
        g = g.filter(pl.col("in_scope")).with_columns(_replication(seeded))
        sums, mean = _estimators(g["_rep"].to_numpy() if seeded else None)
        out = {"policy": label, "n_jobs": g.height, "n_stopped": int(g["stopped"].sum()),
               "n_demoted": int((g["status"] == "demoted").sum()),
               "n_triggered_at_completion": int((g["status"] == AT_COMPLETION).sum()),
               "n_too_short": int((g["status"] == "too_short").sum()),
               "n_no_evaluations": int((g["status"] == "no_evaluations").sum())}
        trig = g.filter(pl.col("detected"))
        gains = trig["delivered_gain"].to_numpy()
        # finite gains only: scored kept and final steps, finite apart
        _put(out, "delivered_gain", mean(gains, trig["_rep"]))
        out["n_detected"] = trig.height
        out["n_delivered_gain_known"] = int(np.isfinite(gains).sum())
        out["n_delivered_gain_infinite"] = int(np.isinf(gains).sum())
        _put(out, "compute_saved_share", bootstrap_ratio_ci(
            *sums(g["steps_saved"].to_numpy(), g["final_step"].to_numpy()), share=True))
        gh_t, gh_s = g["gpu_h_total"].to_numpy(), g["gpu_h_saved"].to_numpy()
        known = np.isfinite(gh_t) & np.isfinite(gh_s)
        out["gpu_h_saved"] = float(gh_s[known].sum()) if known.any() else np.nan
        out["gpu_h_total"] = float(gh_t[known].sum()) if known.any() else np.nan
        out["n_jobs_gpu_h_known"] = int(known.sum())
        if "truth_hacking" in g.columns:
            _put_truth_rates(out, g, sums, mean, seeded)
        if seeded:
            out["n_seeds"] = g["_rep"].n_unique()
        out_rows.append(out)
    return pl.DataFrame(out_rows)


def _put_truth_rates(out: dict, g: pl.DataFrame, sums, mean, seeded: bool) -> None:
    """Put one policy's counts and rates against hidden truth into ``out``."""
    det = g["detected"].to_numpy().astype(np.float64)
    hack = g["truth_hacking"].to_numpy().astype(np.float64)
    tp, fp = det * hack, det * (1 - hack)
    fn, tn = (1 - det) * hack, (1 - det) * (1 - hack)
    out.update({"tp": int(tp.sum()), "fp": int(fp.sum()), "fn": int(fn.sum()),
                "tn": int(tn.sum())})
    _put(out, "precision", _rate(sums, seeded, tp, det))
    _put(out, "recall", _rate(sums, seeded, tp, hack))
    _put(out, "fpr", _rate(sums, seeded, fp, 1 - hack))
    # one rule (at_completion) splits the detections: freed, or at completion
    freed = g["stopped"].to_numpy().astype(np.float64)
    at_end = (g["status"] == AT_COMPLETION).to_numpy().astype(np.float64)
    _put(out, "stop_recall", _rate(sums, seeded, tp * freed, hack))
    _put(out, "stop_fpr", _rate(sums, seeded, fp * freed, 1 - hack))
    _put(out, "completion_share", _rate(sums, seeded, at_end, det))
    # the best gold minus the kept one is >= 0: a t interval of a few jobs reached
    # below, and is cut there as fastsim run's are
    _put(out, "regret_truth_gold",
         mean(g["regret_truth_gold"].to_numpy(), g["_rep"]).within(0.0, np.inf))
    tps = g.filter(pl.col("detected") & pl.col("truth_hacking"))
    delay = (tps["trigger_step"] - tps["truth_gold_peak_step"]).cast(pl.Float64).to_numpy()
    _put(out, "delay_steps", mean(delay, tps["_rep"]))


def _rate(sums, seeded: bool, num, den) -> Estimate:
    """``proportion_ci`` of the replications' counts.  With seeds, a rate whose jobs all
    come from one seed gets no interval: they share their draws, so the Clopper-Pearson
    interval of their counts (jobs as independent trials) would be claimed of one
    replication (4 jobs of seed 7: precision 75% [19.4%, 99.4%])."""
    num, den = sums(num, den)
    e = proportion_ci(num, den)
    if seeded and np.count_nonzero(den) < 2:
        return Estimate(e.mean, np.nan, np.nan, e.n)
    return e


def _replication(seeded: bool) -> pl.Expr:
    """Each job's replication label ``_rep``: its seed, or (no seed) the job itself."""
    if not seeded:
        return pl.col("job_id").alias("_rep")
    # as text: a log built by hand may number its jobs (or seeds), and text + int is an error
    job, seed = pl.col("job_id").cast(pl.String), pl.col("seed").cast(pl.String)
    return (pl.when(seed.is_null()).then(pl.lit("job ") + job)
            .otherwise(pl.lit("seed ") + seed).alias("_rep"))


def _estimators(reps):
    """``(sums, mean)`` for the summary: with replication labels ``reps`` (seeds), rates
    are pooled from each replication's sums (``cluster_sums``) and means resample
    replications (``cluster_mean_ci``); without, every job is one (``mean_ci``)."""
    if reps is None:
        return (lambda *x: x), (lambda values, _: mean_ci(values))
    return ((lambda *x: cluster_sums(reps, *x)),
            (lambda values, labels: cluster_mean_ci(values, labels.to_numpy())))
