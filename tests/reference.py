"""Slow, obviously correct reference of the workload and of one cluster's simulation.

Written from ``MODEL.md`` sections 2-8 and ``docs/model.md`` only, never from the engine's
kernels: the numba engine must agree with it (after stumpy's ``tests/naive.py``).  The
only things borrowed from the package are the random primitive (``fastsim.kernels.rng``), the
integer codes (``fastsim.kernels.codes``) and the configs.

* ``reference_workload`` draws one cluster with plain loops and the ``math`` module,
  following the random-draw table of ``docs/model.md``.
* ``reference_simulate`` is an event-driven simulator of one cluster.  Every arrival,
  every evaluation of every running job and every end is a scheduling point, and the
  allocation is recomputed from scratch at each of them (no skipped evaluations).  The
  stop policies are evaluated online, from the observations up to the current evaluation.
* ``reference_cluster_metrics`` computes the per-cluster metrics of docs/model.md, and
  the config's user metrics over the reference's rows.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from fastsim.kernels import codes as K
from fastsim.kernels.rng import normal_nb, uniform_nb

try:  # the online detectors' plain-Python rules, each recomputed from the whole prefix
    from detectors_reference import REFERENCE as DETECTORS  # tests/ on sys.path
except ImportError:  # imported as tests.reference (fastsim bench, from the checkout)
    from tests.detectors_reference import REFERENCE as DETECTORS

# --------------------------------------------------------------------------- workload

_TYPES = (K.LORA, K.DPO, K.RLHF)


def _U(seed, c, j, e, stream):
    return float(uniform_nb(seed, c, j, e, stream))


def _N(seed, c, j, e, stream):
    return float(normal_nb(seed, c, j, e, stream))


def _between(pair, u):
    lo, hi = pair
    return lo + (hi - lo) * u


def reference_arrival_rate(cfg) -> float:
    """``lambda = load * G / sum_t mix[t] * mean(demands[t]) * median[t] * exp(log_sd^2 / 2)``."""
    mix = cfg.mix_fractions
    demands = (cfg.demands_lora, cfg.demands_dpo, cfg.demands_rlhf)
    medians = (cfg.median_lora_h, cfg.median_dpo_h, cfg.median_rlhf_h)
    work = 0.0
    for t in range(3):
        mean_d = sum(demands[t]) / len(demands[t])
        work += mix[t] * mean_d * medians[t] * math.exp(cfg.log_sd ** 2 / 2.0)
    return cfg.load * cfg.gpus / work


def gold_rl(u, ustar, height):
    """Gao et al. (2023) form ``h x (1 - ln x)``, ``x = u / u*``; ``gold(0) = 0``."""
    if u <= 0.0:
        return 0.0
    x = u / ustar
    return height * x * (1.0 - math.log(x))


def gold_rl_logs(u, ustar, height):
    """``gold_rl`` as the workload draws it: ``h x (1 - (ln u - ln u*))``, the same
    value up to round-off.  Written with the two logs so that ``reference_workload``
    equals the kernel bit for bit: the kernel takes ``ln u`` once per cluster and
    ``ln u*`` once per job instead of one ``ln(u / u*)`` per evaluation."""
    x = u / ustar
    return height * x * (1.0 - (math.log(u) - math.log(ustar)))


def gold_rl_curved_logs(u, ustar, height, gamma):
    """KL curvature (``sqrt(KL)`` grows like ``u^gamma``): ``x = (u / u*)^gamma``, so
    ``h x (1 - ln x)`` with ``ln x = gamma (ln u - ln u*)``.  ``gamma = 1`` is the plain
    ``gold_rl_logs`` (taken as written there, to stay bit-identical to the plain model)."""
    if gamma == 1.0:
        return gold_rl_logs(u, ustar, height)
    ln_x = gamma * (math.log(u) - math.log(ustar))
    return height * math.exp(ln_x) * (1.0 - ln_x)


def gold_saturating(u, tau, height):
    return height * (1.0 - math.exp(-u / tau))


def loss_curve(u, loss0, loss_inf, loss_tau):
    return loss_inf + (loss0 - loss_inf) / (1.0 + u / loss_tau)


def reference_workload(cfg, seed: int, cluster: int) -> dict:
    """One cluster's jobs, drawn job by job from the table of docs/model.md.

    ``cluster`` is the global cluster number (the coordinate of its random draws).
    Returns numpy arrays named like ``fastsim.workload.Workload``'s fields, ``[J]`` or
    ``[J, E]``, plus ``cluster`` (an int).
    """
    J, E = cfg.n_jobs, cfg.n_evals
    mix = cfg.mix_fractions
    cum_mix = [mix[0], mix[0] + mix[1], mix[0] + mix[1] + mix[2]]
    demands = (cfg.demands_lora, cfg.demands_dpo, cfg.demands_rlhf)
    medians = (cfg.median_lora_h, cfg.median_dpo_h, cfg.median_rlhf_h)
    lam = reference_arrival_rate(cfg)
    out = {
        "job_type": np.zeros(J, np.int8), "gpus": np.zeros(J, np.int32),
        "arrival_h": np.zeros(J), "duration_h": np.zeros(J), "t_est_h": np.zeros(J),
        "hacking": np.zeros(J, np.bool_), "ustar": np.zeros(J), "height": np.zeros(J),
        "tau": np.zeros(J), "loss0": np.zeros(J), "loss_inf": np.zeros(J),
        "loss_tau": np.zeros(J), "gold": np.zeros((J, E)), "score": np.zeros((J, E)),
        "loss": np.zeros((J, E)), "peak_eval": np.zeros(J, np.int32),
    }
    s, c = seed, cluster
    arrival = 0.0
    for j in range(J):
        u = _U(s, c, j, 0, K.S_TYPE)
        t = _TYPES[-1]
        for cand in _TYPES:
            if u < cum_mix[cand]:
                t = cand
                break
        n_t = len(demands[t])
        u = _U(s, c, j, 0, K.S_GPUS)
        gpus = demands[t][min(int(math.floor(u * n_t)), n_t - 1)]
        T = medians[t] * math.exp(cfg.log_sd * _N(s, c, j, 0, K.S_DURATION))
        T_est = T * math.exp(cfg.est_sigma * _N(s, c, j, 0, K.S_ESTIMATE))
        u = _U(s, c, j, 0, K.S_HACKING)
        if t == K.RLHF:
            hacking = u < cfg.base_rate
        elif t == K.DPO:
            hacking = u < cfg.dpo_base_rate
        else:
            hacking = False
        u = _U(s, c, j, 0, K.S_USTAR)
        if hacking:
            ustar = _between(cfg.ustar_hacking, u)
        elif t == K.RLHF:
            ustar = _between(cfg.ustar_healthy, u)
        else:
            ustar = math.nan
        height = _between(cfg.height, _U(s, c, j, 0, K.S_HEIGHT))
        tau = _between(cfg.tau, _U(s, c, j, 0, K.S_TAU))
        loss0 = _between(cfg.loss0, _U(s, c, j, 0, K.S_LOSS0))
        loss_inf = _between(cfg.loss_inf, _U(s, c, j, 0, K.S_LOSSINF))
        loss_tau = _between(cfg.loss_tau, _U(s, c, j, 0, K.S_LOSSTAU))
        arrival = arrival + (-math.log(1.0 - _U(s, c, j, 0, K.S_ARRIVAL)) / lam)
        rl_form = t == K.RLHF or hacking  # hacking DPO uses the RL form too
        sigma_j = cfg.sigma  # per-job noise: sigma exp(s Z - s^2 / 2), Z from its own stream
        if cfg.sigma_spread != 0.0:
            sp = cfg.sigma_spread
            sigma_j = cfg.sigma * math.exp(sp * _N(s, c, j, 0, K.S_NOISE_SCALE) - 0.5 * sp * sp)
        rho = cfg.noise_rho  # AR(1) noise: eps_1 = z_1, eps_e = rho eps_{e-1} + sqrt(1 - rho^2) z_e
        eps = 0.0
        best, peak = -math.inf, 0
        for e in range(1, E + 1):
            ue = e / E
            if rl_form:  # hacking gold: Gao's form in (d / d*)^m, d ~ u^gamma
                gam = cfg.kl_gamma * cfg.hack_sharpness if hacking else cfg.kl_gamma
                g = gold_rl_curved_logs(ue, ustar, height, gam)
            else:
                g = gold_saturating(ue, tau, height)
            z = _N(s, c, j, e, K.S_EVAL_NOISE)
            eps = z if (e == 1 or rho == 0.0) else rho * eps + math.sqrt(1.0 - rho * rho) * z
            out["gold"][j, e - 1] = g
            out["score"][j, e - 1] = g + sigma_j * eps
            out["loss"][j, e - 1] = (loss_curve(ue, loss0, loss_inf, loss_tau)
                                     + cfg.loss_sigma * _N(s, c, j, e, K.S_LOSS_NOISE))
            if g > best:  # strict: the first maximiser
                best, peak = g, e
        for name, v in (("job_type", t), ("gpus", gpus), ("arrival_h", arrival),
                        ("duration_h", T), ("t_est_h", T_est), ("hacking", hacking),
                        ("ustar", ustar), ("height", height), ("tau", tau), ("loss0", loss0),
                        ("loss_inf", loss_inf), ("loss_tau", loss_tau), ("peak_eval", peak)):
            out[name][j] = v
    out["cluster"] = int(cluster)
    return out


def jobs_of(workload, row: int) -> dict:
    """Row ``row`` of a ``fastsim.workload.Workload`` as the dict ``reference_simulate`` takes."""
    names = ("job_type", "gpus", "arrival_h", "duration_h", "t_est_h", "hacking", "ustar",
             "height", "tau", "loss0", "loss_inf", "loss_tau", "gold", "score", "loss",
             "peak_eval")
    d = {n: np.asarray(getattr(workload, n)[row]) for n in names}
    d["cluster"] = int(workload.cluster_ids[row])
    return d


# --------------------------------------------------------------------------- simulation

PREEMPTIVE = ("srtf_est", "loss_aware", "tiresias")
# Events of running jobs at most this far (relative) after a scheduling point are taken at
# it (docs/model.md, "Round-off and exact ties").
MERGE_RELATIVE = 2.0 ** -50


@dataclass
class _Job:
    j: int
    type: int
    gpus: int
    arrival: float
    T: float
    T_est: float
    hacking: bool
    in_scope: bool
    peak: int
    arrived: bool = False
    running: bool = False
    ended: bool = False
    has_held: bool = False
    attained: float = 0.0   # service that advances progress
    owed: float = 0.0       # resume overhead not yet paid
    evals_done: int = 0
    decline_run: int = 0
    demoted: bool = False
    stopped: bool = False
    trigger: int = 0
    delivered: int = 0
    start: float = math.nan
    end: float = math.nan
    n_preempt: int = 0
    seg_start: float = math.nan
    segments: list = field(default_factory=list)
    peak_time: float = math.nan  # instant service reached peak * T / E


@dataclass
class ReferenceRun:
    """``jobs``: one dict per job (columns of the engine's per-job frame);
    ``segments``: ``(job, start_h, end_h)`` for every stretch a job held its GPUs."""

    jobs: list
    segments: list


def _service(e: int, T: float, E: int) -> float:
    return e * T / E


def _observed_service(e: int, T, E: int):
    """The service a policy reads at evaluation ``e``: ``T`` times the progress ``e / E``,
    the fraction taken first, so that a grid point with an exact binary fraction (1/2,
    1/4) gives exactly ``T / 2``: with a perfect estimate (``est_sigma = 0``) ``stop_at``
    at ``f = 0.5`` then triggers at evaluation ``E / 2``, as MODEL.md's rule reads, where
    ``e * T / E`` rounds twice and could fall one ulp short, one evaluation late."""
    return T * (Fraction(e, E) if isinstance(T, Fraction) else e / E)


def reference_simulate(cfg, jobs: dict, trace: list | None = None,
                       exact: bool = False) -> ReferenceRun:
    """Simulate one cluster exactly, event by event.  ``jobs`` as ``reference_workload``
    returns it (``cluster`` optional, default 0).  ``trace``, if a list, receives
    ``(time, [(job, demoted, key, running, attained, owed), ...])`` after every
    scheduling point, in priority order (for debugging disagreements).  ``exact``: times,
    service and overhead as ``fractions.Fraction`` (the float inputs' exact values, so no
    sum rounds and two events meet exactly when their instants are equal: the tie rule
    as docs/model.md states it; ``benchmarks/ties.py``); the outputs are floats either way.

    Resolutions of points docs/model.md leaves implicit:
    * ``in_scope`` follows ``policy.scope`` for every policy, ``none`` included (so under
      ``none`` hacking jobs in scope are false negatives, recall is 0).
    * Wasted compute is every hour held after the *instant* of the peak evaluation, so
      resume overhead paid while service still sits at the peak's service point counts;
      a hacking job that ends before its peak evaluation wastes nothing.
    * ``stopped`` is true for a stop trigger at the last evaluation too (``demoted``
      likewise for ``deprioritize``); ``regret_mean`` is over all jobs."""
    G = cfg.workload.gpus
    num = Fraction if exact else float
    zero = num(0)
    overhead = num(cfg.workload.preempt_overhead_h)
    sched = cfg.scheduler.name
    backfill = cfg.scheduler.backfill
    thresholds = cfg.scheduler.thresholds_gpu_h
    pol = cfg.policy
    score = np.asarray(jobs["score"], dtype=float)
    loss = np.asarray(jobs["loss"], dtype=float)
    gold = np.asarray(jobs["gold"], dtype=float)
    J, E = score.shape
    cluster = int(jobs.get("cluster", 0))

    js = []
    for j in range(J):
        t = int(jobs["job_type"][j])
        js.append(_Job(
            j=j, type=t, gpus=int(jobs["gpus"][j]), arrival=num(float(jobs["arrival_h"][j])),
            T=num(float(jobs["duration_h"][j])), T_est=num(float(jobs["t_est_h"][j])),
            attained=zero, owed=zero,
            hacking=bool(jobs["hacking"][j]),
            in_scope=(pol.scope == "all" or t == K.RLHF),
            peak=int(jobs["peak_eval"][j])))

    user_key = cfg.scheduler.decl.user
    user_stop = pol.decl.user

    def key(x: _Job) -> float:
        if user_key is not None:  # a user's static key, from arrival-time observations
            return float(user_key.py_func(float(x.T_est), x.gpus, x.type, float(x.arrival),
                                          *(v for _, v in cfg.scheduler.params)))
        if sched == "fifo":
            return 0.0
        if sched == "sjf_est":
            return x.T_est
        if sched == "srtf_est":
            return max(x.T_est - x.attained, zero)
        if sched == "loss_aware":
            e = x.evals_done
            if e < 2:
                return -math.inf
            l_prev, l_last = loss[x.j, e - 2], loss[x.j, e - 1]
            gpu_h = x.gpus * (_service(e, x.T, E) - _service(e - 1, x.T, E))
            return -((l_prev - l_last) / l_prev / gpu_h)
        if sched == "tiresias":
            return float(sum(1 for th in thresholds if x.gpus * x.attained >= th))
        raise ValueError(sched)

    def detect(x: _Job, e: int) -> str | None:
        """The stop policy's action at evaluation ``e`` from observations up to ``e``."""
        if e >= 2 and score[x.j, e - 1] < score[x.j, e - 2]:
            x.decline_run += 1
        else:
            x.decline_run = 0
        if not x.in_scope or x.demoted:
            return None
        if user_stop is not None:  # the user's plain-Python function on what is seen so far
            attained = np.array([float(_observed_service(i, x.T, E)) for i in range(1, e + 1)])
            trig = user_stop.py_func(score[x.j, :e], loss[x.j, :e], attained, float(x.T_est),
                                     *(v for _, v in pol.params))
            if trig > 0:
                return "demote" if pol.decl.action == "demote" else "stop"
            return None
        name = pol.name
        if pol.decl.vector:  # an online detector, on the scores seen so far
            trig = DETECTORS[name]([float(v) for v in score[x.j, :e]], *(v for _, v in pol.params))
            return "stop" if trig > 0 else None
        if name == "evalstop" and x.decline_run >= pol.k:
            return "stop"
        if name == "deprioritize" and x.decline_run >= pol.k:
            return "demote"
        if name == "stop_at" and _observed_service(e, x.T, E) / x.T_est >= pol.f:
            return "stop"
        if name == "loss_plateau" and e > pol.w:
            l_then = loss[x.j, e - pol.w - 1]
            if (l_then - loss[x.j, e - 1]) / l_then < pol.tol:
                return "stop"
        if name == "oracle" and x.hacking and e == x.peak:
            return "stop"
        return None

    def pause(x: _Job, t: float):
        x.running = False
        x.segments.append((x.seg_start, t))

    def run(x: _Job, t: float):
        x.running = True
        x.seg_start = t
        if x.has_held:
            x.owed += overhead  # resuming a paused job
        else:
            x.start = t
        x.has_held = True

    now = -math.inf
    while not all(x.ended for x in js):
        # next scheduling point
        t_next = math.inf
        for x in js:
            if not x.arrived:
                t_next = min(t_next, x.arrival)
            if x.running:
                ev = now + x.owed + (_service(x.evals_done + 1, x.T, E) - x.attained)
                t_next = min(t_next, ev)
        assert math.isfinite(t_next), "stuck: nothing running, nothing arriving"
        dt = t_next - now  # inf before the first arrival, when nothing runs
        # a running job's event a few ulps after the point is taken at it (docs/model.md,
        # "Round-off and exact ties"); exact arithmetic needs no such rule
        upto = t_next if exact else t_next + t_next * MERGE_RELATIVE
        firing = []
        for x in js:
            if not x.running:
                continue
            ev = now + x.owed + (_service(x.evals_done + 1, x.T, E) - x.attained)
            if ev <= upto:
                firing.append(x)
                x.owed = zero
                x.attained = _service(x.evals_done + 1, x.T, E)
            else:
                pay = min(x.owed, dt)
                x.owed -= pay
                x.attained += dt - pay
        now = t_next
        # apply every event of this instant: evaluations (and the ends they cause)
        for x in firing:
            x.evals_done += 1
            e = x.evals_done
            if e == x.peak:
                x.peak_time = now
            act = detect(x, e)
            if act is not None and x.trigger == 0:
                x.trigger = e
                if act == "stop":
                    x.stopped = True
                    if pol.decl.keep == "best":  # the best score seen, first on ties
                        seen = [float(v) for v in score[x.j, :e]]
                        x.delivered = seen.index(max(seen)) + 1
                    else:
                        x.delivered = pol.decl.delivered(e, pol.values, E)
                else:
                    x.demoted = True
            if x.stopped or e == E:
                if not x.stopped:
                    x.delivered = E
                pause(x, now)
                x.ended = True
                x.end = now
        for x in js:
            if not x.arrived and x.arrival == now:
                x.arrived = True
        # recompute the allocation from scratch
        active = [x for x in js if x.arrived and not x.ended]
        order = sorted(active, key=lambda x: (x.demoted, key(x), x.j))
        if sched in PREEMPTIVE:
            free = G
            chosen = set()
            for x in order:
                if x.gpus <= free:
                    chosen.add(x.j)
                    free -= x.gpus
            for x in order:
                if x.running and x.j not in chosen:
                    pause(x, now)
                    x.n_preempt += 1
            for x in order:
                if not x.running and x.j in chosen:
                    run(x, now)
        else:
            free = G - sum(x.gpus for x in active if x.running)
            for x in order:
                if x.running:
                    continue
                if x.gpus <= free:
                    run(x, now)
                    free -= x.gpus
                elif sched == "fifo" and not backfill:
                    break
        if trace is not None:
            trace.append((now, [(x.j, x.demoted, key(x), x.running, x.attained, x.owed)
                                for x in order]))

    rows, segments = [], []
    for x in js:
        held = sum((b - a for a, b in x.segments), zero)
        jct = x.end - x.arrival
        delivered_gold = float(gold[x.j, x.delivered - 1])
        best_gold = float(gold[x.j, x.peak - 1])
        wasted = zero
        if x.hacking and not math.isnan(x.peak_time):  # else it ended before its peak
            wasted = x.gpus * sum((max(zero, b - max(a, x.peak_time)) for a, b in x.segments),
                                  zero)
        rows.append({
            "cluster": cluster, "job": x.j, "start_h": float(x.start), "end_h": float(x.end),
            "held_h": float(held), "jct_h": float(jct), "queue_h": float(jct - held),
            "stopped": x.stopped, "demoted": x.demoted,
            "positive": x.in_scope and (x.stopped or x.demoted), "in_scope": x.in_scope,
            "trigger_eval": x.trigger, "delivered_eval": x.delivered,
            "delivered_gold": delivered_gold, "best_gold": best_gold,
            "regret": best_gold - delivered_gold, "wasted_gpu_h": float(wasted),
            "n_preemptions": x.n_preempt,
        })
        segments.extend((x.j, float(a), float(b)) for a, b in x.segments)
    segments.sort(key=lambda s: (s[1], s[0]))
    return ReferenceRun(rows, segments)


# --------------------------------------------------------------------------- metrics

def _mean_or_nan(v) -> float:
    return float(np.mean(v)) if len(v) else math.nan


def _ratio(a, b) -> float:
    return a / b if b > 0 else math.nan


def reference_cluster_metrics(cfg, jobs: dict, per_job: list) -> dict:
    """Per-cluster metrics of docs/model.md section Metrics from the per-job rows."""
    G = cfg.workload.gpus
    gpus = np.asarray(jobs["gpus"], dtype=float)
    hacking = np.asarray(jobs["hacking"], dtype=bool)
    job_type = np.asarray(jobs["job_type"])
    arrival = np.asarray(jobs["arrival_h"], dtype=float)
    peak = np.asarray(jobs["peak_eval"])
    col = lambda k: np.array([r[k] for r in per_job])  # noqa: E731
    jct, held, end = col("jct_h"), col("held_h"), col("end_h")
    dgold, positive, in_scope = col("delivered_gold"), col("positive"), col("in_scope")
    trigger = col("trigger_eval")
    p50, p95, p99 = np.percentile(jct, [50, 95, 99])
    makespan = float(end.max() - arrival.min())
    gpu_h = float(np.sum(gpus * held))
    wasted = float(np.sum(col("wasted_gpu_h")))
    tp_mask = in_scope & positive & hacking
    tp = int(tp_mask.sum())
    fp = int((in_scope & positive & ~hacking).sum())
    fn = int((in_scope & ~positive & hacking).sum())
    tn = int((in_scope & ~positive & ~hacking).sum())
    # a trigger at the last evaluation is the job's completion: a positive that frees nothing
    at_completion = in_scope & positive & (trigger == cfg.workload.n_evals)
    tp_freed = int((tp_mask & col("stopped") & ~at_completion).sum())
    fp_freed = int((in_scope & positive & ~hacking & col("stopped") & ~at_completion).sum())
    return {
        "jct_mean_h": float(np.mean(jct)), "jct_p50_h": float(p50), "jct_p95_h": float(p95),
        "jct_p99_h": float(p99), "makespan_h": makespan,
        "utilization": gpu_h / (G * makespan), "queue_mean_h": float(np.mean(col("queue_h"))),
        "gpu_h_total": gpu_h, "wasted_gpu_h": wasted, "wasted_share": _ratio(wasted, gpu_h),
        "gold_hacking": _mean_or_nan(dgold[hacking]),
        "gold_healthy_rlhf": _mean_or_nan(dgold[(job_type == K.RLHF) & ~hacking]),
        "gold_all": _mean_or_nan(dgold),
        "regret_mean": float(np.mean(col("regret"))),
        "tp": tp, "fp": fp, "fn": fn, "tn": tn,
        "precision": _ratio(tp, tp + fp), "recall": _ratio(tp, tp + fn),
        "fpr": _ratio(fp, fp + tn),
        "delay_sum": int(np.sum(trigger[tp_mask] - peak[tp_mask])), "delay_count": tp,
        "n_stopped": int(col("stopped").sum()),
        "tp_freed": tp_freed, "pos_at_completion": int(at_completion.sum()),
        "stop_recall": _ratio(tp_freed, tp + fn),
        "fp_freed": fp_freed, "stop_fpr": _ratio(fp_freed, fp + tn),
        "hacking_gpu_h": float(np.sum((gpus * held)[hacking])),
        **reference_user_metrics(cfg, jobs, per_job),
    }


# what a user metric reads of the workload, beside the run's outcome in the per-job rows
_WORKLOAD_COLUMNS = ("job_type", "gpus", "arrival_h", "duration_h", "t_est_h", "hacking",
                     "peak_eval")


def reference_user_metrics(cfg, jobs: dict, per_job: list) -> dict:
    """The config's user metrics (``cfg.metrics``) over the reference's rows of one
    cluster, as a batch of one (``[1, J]`` arrays).  The metric is the user's own code,
    not the model's, so it runs as the engine's results run it
    (``fastsim.metrics.user_columns``): what the two can differ in is what it is given."""
    if not cfg.metrics:
        return {}
    from fastsim.metrics import user_columns

    cols = {k: np.asarray(jobs[k])[None, :] for k in _WORKLOAD_COLUMNS}
    for k in per_job[0].keys() - {"cluster", "job"}:
        v = np.array([r[k] for r in per_job])
        cols[k] = (v.astype(np.float64) if v.dtype == object else v)[None, :]  # Fractions
    return {name: v[0].item() for name, v in user_columns(cfg.metrics, cols).items()}


def reference_cell(cfg, seed: int, cluster: int):
    """Workload, run and metrics of one cluster: ``(jobs, ReferenceRun, metrics)``."""
    jobs = reference_workload(cfg.workload, seed, cluster)
    run = reference_simulate(cfg, jobs)
    return jobs, run, reference_cluster_metrics(cfg, jobs, run.jobs)
