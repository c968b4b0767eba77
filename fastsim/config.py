"""Validated, frozen configuration of one simulation cell.

Everything a user can set is checked here, before any kernel runs: a bad value raises
one ``ConfigError`` naming the field, the value and what is allowed.  Kernels trust
their inputs.  Defaults come from ``fastsim.defaults`` only.

Examples
--------
>>> cfg = SimConfig.from_specs(scheduler="srtf_est", policy="evalstop:k=2")
>>> cfg.policy.k, cfg.workload.gpus
(2, 64)
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from fastsim import defaults as D
from fastsim import registry as R
from fastsim.errors import (ConfigError, did_you_mean, known_keywords, named_twice,
                             unknown_keyword)
from fastsim.kernels.codes import MAX_EVALS  # noqa: F401 - the kernels' limit, checked here
from fastsim.purity import loaded_arguments
from fastsim.values import (FLOAT64_MIN, SUMS_TO_ONE, as_float, as_typed,  # noqa: F401
                            check_flags, check_path_text, float_or_nan, is_integer, is_number,
                            is_path, is_real, plain, plain_fields, plain_scalar, store_floats,
                            sums_to_one)

MAX_LOAD = 2.0  # beyond this the backlog, not the policy, decides every metric
MIN_LOAD = 0.01  # below this arrivals are so sparse that every metric is a single job's
# Median run times the engine can simulate in float64 hours with room for the log-normal
# tail (log_sd <= 3) and the arrival span of MAX_JOBS jobs: 3.6 s to about 14 months.
MEDIAN_H_RANGE = (1e-3, 1e4)
MAX_JOBS = 100_000
# the arrival span at most this many times a short run (see WorkloadConfig's checks)
MAX_SPAN_OVER_RUN = 1e10
# loss_sigma is at most loss_inf's lower end over this (see WorkloadConfig's checks)
LOSS_SIGMAS_ABOVE_ZERO = 8
MAX_GPUS = 1_000_000


def _check(cond: bool, field_name: str, value: Any, allowed: str) -> None:
    if not cond:
        raise ConfigError(f"{field_name}={value!r} is invalid; allowed: {allowed}")


def _check_range(name: str, pair: Any, lo: float, hi: float, strict_lo: bool = False) -> None:
    ok = (
        isinstance(pair, (tuple, list))
        and len(pair) == 2
        and all(is_number(v) for v in pair)
        and pair[0] <= pair[1]
        and (pair[0] > lo if strict_lo else pair[0] >= lo)
        and pair[1] <= hi
    )
    _check(ok, name, pair, _range_allowed(lo, hi, strict_lo))


# What each workload field means, with its unit (MODEL.md section 3-4): fastsim run --help
# and WorkloadConfig's docstring (help(), SimConfig.from_specs' keywords).
FIELD_HELP = {
    "gpus": "GPUs per cluster",
    "n_jobs": "jobs per cluster",
    "load": "offered load rho = lambda E[gpus T] / G",
    "mix": "workload mix: rlhf_heavy, mixed, or fractions LORA,DPO,RLHF",
    "demands_lora": "GPU demand choices of LoRA jobs (comma-separated)",
    "demands_dpo": "GPU demand choices of DPO jobs",
    "demands_rlhf": "GPU demand choices of RLHF jobs",
    "median_lora_h": "median LoRA run time at full allocation, hours",
    "median_dpo_h": "median DPO run time, hours",
    "median_rlhf_h": "median RLHF run time, hours",
    "log_sd": "log-normal sigma of run times",
    "n_evals": "evaluations per job, evenly spaced in progress",
    "base_rate": "probability an RLHF job is hacking",
    "dpo_base_rate": "probability a DPO job is hacking",
    "est_sigma": "log-normal sigma of the duration estimate T_est / T",
    "sigma": "evaluation-score noise (standard deviation)",
    "loss_sigma": "training-loss reading noise (standard deviation)",
    "preempt_overhead_h": "extra run time paid when a paused job resumes, hours",
    "ustar_hacking": "peak position u* of hacking jobs, progress range LO,HI",
    "ustar_healthy": "u* of healthy RLHF jobs, progress range LO,HI",
    "height": "peak gold score h, range LO,HI",
    "tau": "time constant of saturating gold curves (LoRA, healthy DPO), progress range",
    "loss0": "initial training loss L_0, range LO,HI",
    "loss_inf": "asymptotic training loss L_inf, range LO,HI",
    "loss_tau": "training-loss time constant tau_L, progress range",
    "kl_gamma": "KL curvature: sqrt(KL) grows like u^kl_gamma (1 = linear, the plain model)",
    "hack_sharpness": "hacking gold is Gao's form in (d/d*)^m, m = this (1 = plain)",
    "sigma_spread": "per-job noise spread s: sigma_j = sigma exp(s Z - s^2/2) (0 = plain)",
    "noise_rho": "AR(1) coefficient of each job's evaluation noise (0 = independent)",
}


def _range_allowed(lo: float | str, hi: float, strict_lo: bool = False) -> str:
    return f"a pair (lo, hi) with lo <= hi, lo {'>' if strict_lo else '>='} {lo}, hi <= {hi}"


@dataclass(frozen=True)
class Bound:
    """A scalar field's closed interval ``[lo, hi]``, declared once: ``WorkloadConfig``
    checks it (``admits``) and its refusal and ``fastsim run --help`` word it (``allowed``),
    so the check and the message can not drift apart."""

    lo: float
    hi: float
    integer: bool = False
    what: str = ""  # what a value of a real field is ("a probability")
    more: str = ""  # a further limit another field sets (checked apart, named here)

    def admits(self, v: Any) -> bool:
        return (is_integer(v) if self.integer else is_number(v)) and self.lo <= v <= self.hi

    @property
    def allowed(self) -> str:
        if self.integer:
            return f"an integer from {self.lo} to {self.hi}"
        return f"{self.what} in [{self.lo:g}, {self.hi:g}]{self.more}"


# The scalar fields' bounds.
BOUNDS = {
    "gpus": Bound(1, MAX_GPUS, integer=True),
    "n_jobs": Bound(1, MAX_JOBS, integer=True),
    "load": Bound(MIN_LOAD, MAX_LOAD, what="offered load"),
    **{f"median_{kind}_h": Bound(*MEDIAN_H_RANGE, what="hours")
       for kind in ("lora", "dpo", "rlhf")},
    "log_sd": Bound(0, 3, what="a log-normal sigma"),
    "n_evals": Bound(2, MAX_EVALS, integer=True),
    "base_rate": Bound(0, 1, what="a probability"),
    "dpo_base_rate": Bound(0, 1, what="a probability"),
    "est_sigma": Bound(0, 3, what="a log-normal sigma"),
    "sigma": Bound(0, 1, what="an evaluation-noise standard deviation"),
    "loss_sigma": Bound(0, 1, what="a loss-noise standard deviation",
                        more=f", at most loss_inf's lower end / {LOSS_SIGMAS_ABOVE_ZERO}"),
    "preempt_overhead_h": Bound(0, 100, what="hours"),
    "kl_gamma": Bound(0.05, 2, what="an exponent"),
    "hack_sharpness": Bound(0.25, 4, what="an exponent"),
    "sigma_spread": Bound(0, 2, what="a log-normal sigma"),
    "noise_rho": Bound(-0.99, 0.99, what="an AR(1) coefficient"),
}


# The range fields' bounds (lo, hi, whether lo itself is excluded).
RANGE_BOUNDS = {
    # A peak before a thousandth of the run lies before the first evaluation of the
    # finest grid (MAX_EVALS), and its gold overflows floats near u* = 1e-300.
    "ustar_hacking": (1.0 / MAX_EVALS, 1.0, False),
    # Healthy peaks may start where hacking ones end (peaks spread continuously,
    # MODEL.md section 4), never inside the hacking range: the label would be moot.  Its
    # lower end is ustar_hacking's upper end, the value validate checks it against.
    "ustar_healthy": ("ustar_hacking's hi", 1e6, False),
    "height": (0.0, 1e6, True),
    "tau": (0.0, 1e6, True),
    "loss0": (0.0, 1e6, True),
    "loss_inf": (0.0, 1e6, False),  # and below loss0's lower end (validate)
    "loss_tau": (0.0, 1e6, True),
}


# What each workload field accepts, as its refusal says it (WorkloadConfig.validate) and as
# fastsim run --help shows it beside the default; a bound set by another field is named
# here and given its value in the refusal.
FIELD_ALLOWED = {
    **{name: bound.allowed for name, bound in BOUNDS.items()},
    "mix": f"one of {', '.join(sorted(D.MIXES))} or three fractions (lora, dpo, rlhf)",
    **{f"demands_{kind}": "a non-empty list of integers from 1 to gpus"
       for kind in ("lora", "dpo", "rlhf")},
    **{name: _range_allowed(*bounds) for name, bounds in RANGE_BOUNDS.items()},
    "loss_inf": _range_allowed(*RANGE_BOUNDS["loss_inf"]) + ", hi below loss0's lo",
}


@dataclass(frozen=True)
class WorkloadConfig:
    """One cluster's workload (MODEL.md section 3); times in hours.

    ``mix`` is a named mix (``rlhf_heavy``, ``mixed``) or fractions of (LoRA, DPO, RLHF)
    summing to 1 within 1e-9, or within four float32 epsilons (4.8e-7) when they are float32
    values (``np.float32([.2, .3, .5])``, taken as the float64 values it widens to, as a
    numpy float32 is in every other field): ``fastsim.values.sums_to_one``, the rule
    sampling probabilities follow too.
    """

    gpus: int = D.GPUS
    n_jobs: int = D.N_JOBS
    load: float = D.LOAD
    mix: str | tuple[float, float, float] = D.MIX
    demands_lora: tuple[int, ...] = D.DEMANDS["lora"]
    demands_dpo: tuple[int, ...] = D.DEMANDS["dpo"]
    demands_rlhf: tuple[int, ...] = D.DEMANDS["rlhf"]
    median_lora_h: float = D.MEDIAN_H["lora"]
    median_dpo_h: float = D.MEDIAN_H["dpo"]
    median_rlhf_h: float = D.MEDIAN_H["rlhf"]
    log_sd: float = D.LOG_SD
    n_evals: int = D.N_EVALS
    base_rate: float = D.BASE_RATE
    dpo_base_rate: float = D.DPO_BASE_RATE
    est_sigma: float = D.EST_SIGMA
    sigma: float = D.SIGMA
    loss_sigma: float = D.LOSS_SIGMA
    preempt_overhead_h: float = D.PREEMPT_OVERHEAD_H
    ustar_hacking: tuple[float, float] = D.USTAR_HACKING
    ustar_healthy: tuple[float, float] = D.USTAR_HEALTHY
    height: tuple[float, float] = D.HEIGHT
    tau: tuple[float, float] = D.TAU
    loss0: tuple[float, float] = D.LOSS0
    loss_inf: tuple[float, float] = D.LOSS_INF
    loss_tau: tuple[float, float] = D.LOSS_TAU
    kl_gamma: float = D.KL_GAMMA
    hack_sharpness: float = D.HACK_SHARPNESS
    sigma_spread: float = D.SIGMA_SPREAD
    noise_rho: float = D.NOISE_RHO

    def __post_init__(self) -> None:
        # lists (from TOML/JSON) as tuples so configs stay hashable; numpy scalars as Python's
        plain_fields(self)
        self.validate()
        store_floats(self)

    @property
    def mix_fractions(self) -> tuple[float, float, float]:
        if isinstance(self.mix, str):
            return D.MIXES[self.mix]
        return tuple(float(x) for x in self.mix)  # type: ignore[return-value]

    @property
    def medians_h(self) -> tuple[float, float, float]:
        """Median run times of lora, dpo and rlhf jobs (hours)."""
        return (self.median_lora_h, self.median_dpo_h, self.median_rlhf_h)

    def arrival_rate(self) -> float:
        """Poisson rate (jobs/hour) giving offered load ``load`` (MODEL.md section 3):
        ``lambda = load * G / E[gpus * T]`` with the expectation over the distributions."""
        demands = (self.demands_lora, self.demands_dpo, self.demands_rlhf)
        mean_t = math.exp(self.log_sd ** 2 / 2.0)  # E[LogNormal(0, s)]
        work = sum(m * (sum(d) / len(d)) * med * mean_t  # the mean demand, as np.mean's
                   for m, d, med in zip(self.mix_fractions, demands, self.medians_h))
        return self.load * self.gpus / work

    def validate(self) -> None:
        # field by field in declared order, so that a later check may read an earlier field
        # (demands read gpus, ustar_healthy ustar_hacking) once it is known to be valid
        for f in fields(self):
            name, v = f.name, getattr(self, f.name)
            if name in BOUNDS:
                _check(BOUNDS[name].admits(v), name, v, BOUNDS[name].allowed)
            elif name in RANGE_BOUNDS:
                lo, hi, strict_lo = RANGE_BOUNDS[name]
                _check_range(name, v, self.ustar_hacking[1] if name == "ustar_healthy" else lo,
                             hi, strict_lo)
            elif name == "mix":
                self._check_mix()
            elif name.startswith("demands_"):
                ok = (isinstance(v, tuple) and len(v) >= 1
                      and all(isinstance(x, int) and not isinstance(x, bool)
                              and 1 <= x <= self.gpus for x in v))
                _check(ok, name, v, f"{FIELD_ALLOWED[name]}={self.gpus}")
            else:  # a field added without its bound would pass unchecked
                raise TypeError(f"WorkloadConfig.{name} has no bound declared in BOUNDS")
        _check(self.loss_inf[1] < self.loss0[0], "loss_inf", self.loss_inf,
               f"values below loss0's lower end {self.loss0[0]} (loss must decrease)")
        self._check_span_resolved()
        self._check_loss_readings_positive()

    def _check_mix(self) -> None:
        """Refuse a mix that is neither a named mix nor three fractions summing to one."""
        if isinstance(self.mix, str):
            if self.mix not in D.MIXES:
                # the command line's --mix 1,0,0 copied into a sweep file or a call is text
                listed = (f" (fractions go in a list, not text: "
                          f"[{', '.join(x.strip() for x in self.mix.split(','))}])"
                          if "," in self.mix else "")
                raise ConfigError(f"mix={self.mix!r} is invalid{did_you_mean(self.mix, D.MIXES)}; "
                                  f"allowed: one of {', '.join(sorted(D.MIXES))} or three "
                                  f"fractions (lora, dpo, rlhf){listed}")
        else:
            m = self.mix
            ok = (isinstance(m, (tuple, list)) and len(m) == 3
                  and all(is_number(x) and x >= 0 for x in m)
                  and sums_to_one(m))
            _check(ok, "mix", m, f"three non-negative fractions (lora, dpo, rlhf) {SUMS_TO_ONE}")

    def _check_span_resolved(self) -> None:
        """Refuse settings whose arrival span float64 hours cannot resolve a short run in."""
        # Times are float64 hours: over the jobs' arrival span a short run (the log-normal's
        # 5-sigma lower tail of the shortest median) must stay resolved to about 1e-6.
        span = self.n_jobs / self.arrival_rate()
        short = min(med for m, med in zip(self.mix_fractions, self.medians_h) if m > 0) \
            * math.exp(-5.0 * self.log_sd)
        _check(span <= MAX_SPAN_OVER_RUN * short, "load", self.load,
               f"settings whose arrival span (about {span:.3g} h for n_jobs={self.n_jobs}) is "
               f"at most {MAX_SPAN_OVER_RUN:.0e} times a short run ({short:.3g} h: the "
               "shortest median at 5 log_sd below), so float64 hours resolve every run; a "
               "higher load, fewer jobs, a longer shortest median or a smaller log_sd")

    def _check_loss_readings_positive(self) -> None:
        """Refuse loss settings under which a loss reading can reach zero or lose its digits."""
        # A loss reading is never below loss_inf's lower end by more than its noise; eight
        # standard deviations keep every reading positive (a chance of 6e-16 each), which
        # loss_aware's and loss_plateau's relative drops need: a reading <= 0 reverses them.
        _check(self.loss_sigma <= self.loss_inf[0] / LOSS_SIGMAS_ABOVE_ZERO, "loss_sigma",
               self.loss_sigma,
               f"at most loss_inf's lower end ({self.loss_inf[0]:g}) / {LOSS_SIGMAS_ABOVE_ZERO}"
               f" = {self.loss_inf[0] / LOSS_SIGMAS_ABOVE_ZERO:g}, so that loss readings stay "
               f"positive (loss_aware and loss_plateau read relative drops)")
        # The noise-free curve L_inf + (L_0 - L_inf) / (1 + u / tau_L) is least at u = 1 and
        # each range's lower end.  From loss_inf = 0 (so loss_sigma = 0) it can underflow:
        # loss0 1e-300 and loss_tau 1e-30 read 0 (loss_plateau's 0 / 0 raised
        # ZeroDivisionError), and subnormal readings lose the digits a relative drop needs
        # (loss_aware's schedule moved when loss0 was scaled, which leaves drops unchanged).
        lo_inf, lo0, lo_tau = self.loss_inf[0], self.loss0[0], self.loss_tau[0]
        least = lo_inf + (lo0 - lo_inf) / (1.0 + 1.0 / lo_tau)
        _check(least >= FLOAT64_MIN, "loss_inf", self.loss_inf,
               f"a lower end whose smallest noise-free loss reading (at progress 1, with "
               f"loss0's lower end {lo0:g} and loss_tau's {lo_tau:g}: {least:.3g}) is at least "
               f"{FLOAT64_MIN:.2g}, the smallest normal float64, so that readings stay positive "
               "and exact (loss_aware and loss_plateau read relative drops); a lower end above "
               "0, or a larger lower end of loss0 or loss_tau")


def _user_values(decl: R.Declaration, given: Any, what: str) -> tuple[tuple[str, Any], ...]:
    """A user declaration's parameters, every one in declared order, defaults filled in."""
    pairs = list(given.items()) if isinstance(given, dict) else given or ()
    ok = isinstance(pairs, (list, tuple)) and all(
        isinstance(kv, (list, tuple)) and len(kv) == 2 and isinstance(kv[0], str) for kv in pairs)
    if not ok:
        raise ConfigError(f"{what} params={given!r} are invalid; allowed: (name, value) pairs")
    names = [k for k, _ in pairs]
    if len(set(names)) < len(names):
        raise ConfigError(f"{what} params={given!r} name a parameter twice; allowed: each once")
    given = dict(pairs)
    for key in given:
        if key not in decl.param_names or key == "scope":
            raise ConfigError(f"{what} parameter {key!r} is not a parameter of {decl.name}; "
                              f"allowed: {', '.join(n for n in decl.param_names if n != 'scope')}")
    out = []
    for p in decl.params:
        if p.name != "scope":
            v = p.check(given.get(p.name, p.default), f"{what}.")
            out.append((p.name, float(v) if p.kind == "float" else v))  # 0 and 0.0: one cell
    return tuple(out)


def check_code(part: "SchedulerConfig | PolicyConfig", what: str) -> None:
    """The user declaration ``part`` names still has the source ``part`` was made with: a
    script or notebook that declares the function again ran the new code under the
    config (and cell id) of the old, without a word.  And it is still pure, now that the
    helpers it calls exist (``registry.check_pure``)."""
    if part.impl:
        _check_impl(part.decl, part.impl, what)
        R.check_pure(part.decl)


def _check_impl(decl: R.Declaration, impl: str, what: str) -> None:
    if impl and impl != decl.impl:
        raise ConfigError(f"{what}={decl.name!r}: its source here (hash {decl.impl}) differs from "
                          f"the one the config was made with ({impl}); allowed: the same code, "
                          f"or a config made again from its spec (\"{decl.name}:...\"), which "
                          "runs the code declared now")


@dataclass(frozen=True)
class SchedulerConfig:
    """Base scheduler (MODEL.md section 6): a declaration of ``fastsim.registry``.

    ``params`` and ``impl`` are used by user schedulers only (their parameter values and
    a hash of their source); built-ins keep their parameters in named fields.
    """

    name: str = D.SCHEDULER
    backfill: bool = D.BACKFILL
    thresholds_gpu_h: tuple[float, ...] = D.TIRESIAS_THRESHOLDS_GPU_H
    params: tuple[tuple[str, Any], ...] = ()
    impl: str = ""

    def __post_init__(self) -> None:
        plain_fields(self, ("name", "backfill", "impl"))
        _check(isinstance(self.name, str), "scheduler", self.name, "a scheduler name")
        decl = R.lookup("scheduler", self.name)
        _check(isinstance(self.backfill, bool), "backfill", self.backfill, "true or false")
        _check(not self.backfill or self.name == "fifo", "backfill", self.backfill,
               "backfill applies to fifo only")
        try:  # the thresholds as Python's numbers once they are checked: a million were
            # converted one by one, in each of a sweep's configs, before being refused
            object.__setattr__(self, "thresholds_gpu_h", R.THRESHOLDS.check(self.thresholds_gpu_h))
        except ConfigError:  # named as the field is (a spec's thresholds=A/B is checked by parse)
            given = self.thresholds_gpu_h
            shown = plain(given) if R.fits_floats(given) else given
            raise ConfigError(f"thresholds_gpu_h={shown!r} is invalid; allowed: "
                              f"increasing positive numbers, at most {R.MAX_FLOATS} "
                              "(GPU-hours)") from None
        store_floats(self)
        if decl.user is not None:
            object.__setattr__(self, "params", _user_values(decl, self.params, "scheduler"))
            _check_impl(decl, self.impl, "scheduler")
            object.__setattr__(self, "impl", decl.impl)
        else:
            _check(not self.params and not self.impl, "scheduler", self.name,
                   "params/impl only for user schedulers")

    @property
    def decl(self) -> R.Scheduler:
        return R.lookup("scheduler", self.name)  # type: ignore[return-value]

    @property
    def values(self) -> dict[str, Any]:
        """The declared parameters' values."""
        if self.params:
            return dict(self.params)
        return {p.name: getattr(self, p.target) for p in self.decl.params}

    @property
    def code(self) -> int:
        return self.decl.code

    @property
    def label(self) -> str:
        return self.decl.format_label(self.values)

    @classmethod
    def parse(cls, spec: str) -> "SchedulerConfig":
        """``fifo``, ``fifo:backfill``, ``tiresias:thresholds=16/64``, ``mymod:mykey:a=1``."""
        name, raw = R.parse_spec(spec, "scheduler")
        decl = R.lookup("scheduler", name)
        values = decl.values(raw, "scheduler")
        if decl.user is not None:
            return cls(name=decl.name, params=tuple(values.items()))
        return cls(name=decl.name, **{decl.param(k).target: v for k, v in values.items()})

    def to_dict(self) -> dict[str, Any]:
        return _as_dict(self)


@dataclass(frozen=True)
class PolicyConfig:
    """Stop policy overlay (MODEL.md section 7): a declaration of ``fastsim.registry``.

    The paper's built-ins keep their parameters in named fields (``k``, ``f``, ``w``,
    ``tol``); the online detectors and user policies in ``params`` (every declared
    parameter, defaults filled in), a user policy with ``impl`` the hash of its source.
    ``scope`` belongs to every policy.
    """

    name: str = D.POLICY
    k: int = D.K
    f: float = D.STOP_AT_F
    w: int = D.PLATEAU_W
    tol: float = D.PLATEAU_TOL
    scope: str = D.SCOPE
    params: tuple[tuple[str, Any], ...] = ()
    impl: str = ""

    def __post_init__(self) -> None:
        plain_fields(self, ("name", "k", "f", "w", "tol", "scope", "impl"))
        _check(isinstance(self.name, str), "policy", self.name, "a policy name")
        decl = R.lookup("policy", self.name)
        for p in (R.K_DECLINES, R.STOP_AT_F, R.PLATEAU_W, R.PLATEAU_TOL, R.SCOPE):
            v = getattr(self, p.name)
            if not (p.kind == "float" and isinstance(v, int) and not isinstance(v, bool)):
                p.check(v)
            else:
                p.check(float(v) if is_number(v) else v)  # an int beyond floats: refused
        store_floats(self)
        if decl.stores_params:
            object.__setattr__(self, "params", _user_values(decl, self.params, "policy"))
            _check_impl(decl, self.impl, "policy")
            object.__setattr__(self, "impl", decl.impl)
        else:
            _check(not self.params and not self.impl, "policy", self.name,
                   "params/impl only for online detectors and user policies")

    @property
    def decl(self) -> R.StopPolicy:
        return R.lookup("policy", self.name)  # type: ignore[return-value]

    @property
    def values(self) -> dict[str, Any]:
        """The declared parameters' values (``scope`` included)."""
        if self.decl.stores_params:
            return {**dict(self.params), "scope": self.scope}
        return {p.name: getattr(self, p.name) for p in self.decl.params}

    @property
    def code(self) -> int:
        return self.decl.code

    @property
    def vector(self) -> tuple[float, ...]:
        """An online detector's parameters as its kernel takes them (declared order,
        as floats); empty for the other policies."""
        if not self.decl.vector:
            return ()
        return tuple(float(v) for _, v in self.params)

    @property
    def uses_hidden_truth(self) -> bool:
        return self.decl.uses_hidden_truth

    @property
    def min_evals(self) -> int:
        """Evaluations the policy needs before it can trigger at all."""
        return int(self.decl.min_evals(self.values))

    @property
    def label(self) -> str:
        d = self.decl
        s = d.format_label(self.values)
        if self.scope != D.SCOPE and d.scoped:
            s += f"[scope={self.scope}]"
        return s

    @classmethod
    def parse(cls, spec: str) -> "PolicyConfig":
        """``none``, ``evalstop:k=2``, ``stop_at:f=0.65``, ``loss_plateau:w=2,tol=0.01``,
        ``deprioritize:k=2``, ``oracle``, ``peak:z=1.3,sigma0=0.05``, ``mymod:mypolicy:k=3``;
        any of them with ``scope=all``."""
        name, raw = R.parse_spec(spec, "policy")
        decl = R.lookup("policy", name)
        return cls._declared(decl, decl.values(raw, "policy"))

    @classmethod
    def of(cls, name: str, params: dict[str, Any]) -> "PolicyConfig":
        """Policy ``name`` (no parameters in it) with ``params`` as values, not spec text
        (a plan file's inline table), checked by its declaration as a spec's are.  Written
        into a spec, a text value or key added parameters the table does not show
        (``k = "2,scope=all"``), and ``k = "3"`` was read as the integer 3."""
        bare, raw = R.parse_spec(name, "policy")
        if raw:
            raise ConfigError(f"policy={name!r} is invalid; allowed: a policy name, its "
                              "parameters given apart")
        decl = R.lookup("policy", bare)
        return cls._declared(decl, decl.values(params, "policy", typed=True))

    @classmethod
    def _declared(cls, decl: R.StopPolicy, values: dict[str, Any]) -> "PolicyConfig":
        scope = values.pop("scope", D.SCOPE)
        if decl.stores_params:
            return cls(name=decl.name, scope=scope, params=tuple(values.items()))
        return cls(name=decl.name, scope=scope, **values)

    def to_dict(self) -> dict[str, Any]:
        return _as_dict(self)


def flag_message(msg: str, spec: str, flag: str, what: str) -> str | None:
    """A spec's error as the command line gave it, or None if it names neither the spec
    nor a parameter: ``"policy='bogus' is invalid; ..."`` -> ``"--policy=bogus is invalid;
    ..."``, ``"policy.k=0 is invalid; ..."`` -> ``"--policy evalstop: k=0 is invalid; ..."``,
    the value as typed (``thresholds=3/1``, not the tuple it was read as), and ``"policy
    parameter 'K' is not ..."`` -> ``"--policy evalstop: parameter 'K' is not ..."``."""
    typed = as_typed(msg, what, spec, flag, spec)
    if typed is not None:  # the spec's form, an unknown name alone, a MODULE:ATTR not found
        return typed
    name = R.split_name(spec, what)[0]
    # an unknown name with parameters, or a module that failed while imported
    if msg.startswith((f"{what}={name!r} ", f"{what}={name!r}:")):
        return f"{flag}={name}{msg[len(f'{what}={name!r}'):]}"
    if msg.startswith(f"{what} parameter "):  # a parameter, named as typed already
        return f"{flag} {name}: {msg[len(what) + 1:]}"
    if not msg.startswith(what + "."):
        return None
    name, params = R.parse_spec(spec, what)
    rest = msg[len(what) + 1:]
    key, _, tail = rest.partition("=")
    if key in params and " is invalid" in tail:
        rest = f"{key}={params[key]}{tail[tail.index(' is invalid'):]}"
    return f"{flag} {name}: {rest}"


def parse_flag(parse: Any, text: str, flag: str) -> Any:
    """``parse(text)`` of a spec the command line gave as ``flag`` (``--policy``,
    ``--scheduler``), its error worded as typed (``flag_message``)."""
    what = flag.lstrip("-")
    try:
        return parse(text)
    except ConfigError as exc:
        flagged = flag_message(str(exc), text, flag, what)
        if flagged is None:
            raise
        raise ConfigError(flagged) from None


def parse_baseline(value: Any, field_name: str = "baseline",
                   no_baseline: str = "") -> PolicyConfig | None:
    """The policy a paired comparison is against (``fastsim run --baseline`` and a sweep
    file's ``baseline``): any ``PolicyConfig.parse`` spec, or ``False``/``"off"`` for no
    baseline (None).  A bad value is one ``ConfigError`` naming ``field_name``; an unknown
    name's also says ``no_baseline``, how the caller's input writes "no baseline".

    Examples
    --------
    >>> parse_baseline("evalstop:k=3").label, parse_baseline(False)
    ('evalstop(k=3)', None)
    """
    if value is False or (isinstance(value, str) and value == "off"):
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{field_name}={value!r} is invalid; allowed: a stop policy spec "
                          "(\"none\", \"evalstop:k=3\", \"MODULE:FUNCTION\") or false for no "
                          f"baseline{R.spec_hint(value)}")
    try:
        return PolicyConfig.parse(value)
    except ConfigError as exc:  # "policy.k=-1 is invalid; ..." -> "baseline.k=-1 is invalid; ..."
        msg = str(exc)
        if no_baseline and msg.startswith(f"policy={value!r} is invalid; allowed: "):
            msg += f", or {no_baseline} for no baseline"  # an unknown name: "false", say
        flagged = flag_message(msg, value, field_name, "policy")
        if flagged is not None and field_name.startswith("--"):
            raise ConfigError(flagged) from None
        if msg.startswith("policy"):
            raise ConfigError(field_name + msg[len("policy"):]) from None
        raise ConfigError(f"{field_name}={value!r}: {msg}") from None


def _as_dict(cfg: Any) -> dict[str, Any]:
    """Fields as a dict; a built-in's empty ``params``/``impl`` are left out, so its
    canonical form (and every stored cell id) is what it was before user code existed."""
    d = asdict(cfg)
    if not d.get("params") and not d.get("impl"):
        d.pop("params", None)
        d.pop("impl", None)
    else:
        d["params"] = [list(kv) for kv in d["params"]]
    return d


def _check_spec_param(key: str, **specs: Any) -> None:
    """``from_specs(..., alpha=2)`` where the scheduler or policy given declares ``alpha``
    (a user's key): said as where it goes, as a built-in's ``k`` is (a spec that does not
    parse is refused later, as given)."""
    decls = []
    for part, spec in specs.items():
        kind = SchedulerConfig if part == "scheduler" else PolicyConfig
        try:
            decls.append((part, _spec_or_config(kind, spec).decl))
        except ConfigError:
            continue
    for part, [owner] in R.param_owners(decls).get(key, {}).items():
        raise ConfigError(f"SimConfig.from_specs() keyword {key!r} is unknown: {key} is a "
                          f"parameter of {owner}; it goes in the spec, "
                          f"{part}=\"{owner}:{key}=...\"")


@dataclass(frozen=True)
class SimConfig:
    """A simulation cell: workload x base scheduler x stop policy, and any user metrics
    (``MODULE:FUNCTION`` of a ``fastsim.metrics.cluster_metric``) to add per cluster."""

    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    metrics: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        from fastsim.metrics import lookup, metrics

        for name, kind in (("workload", WorkloadConfig), ("scheduler", SchedulerConfig),
                           ("policy", PolicyConfig)):
            value = getattr(self, name)
            _check(isinstance(value, kind), name, value, f"a {kind.__name__} (or use "
                   "SimConfig.from_specs(scheduler, policy, **workload) with specs)")
        if isinstance(self.metrics, (list, str)):
            object.__setattr__(self, "metrics", (self.metrics,) if isinstance(self.metrics, str)
                               else tuple(self.metrics))
        plain_fields(self, ("metrics",))
        given = self.metrics if isinstance(self.metrics, tuple) else ()
        _check(isinstance(self.metrics, tuple) and all(isinstance(m, str) for m in self.metrics),
               "metrics", self.metrics, "MODULE:FUNCTION names of @cluster_metric functions"
               + "".join(R.spec_hint(m) for m in given[:1] if not isinstance(m, str)))
        twice = named_twice(self.metrics, "metric")
        _check(twice is None, "metrics", self.metrics, twice)
        columns: dict[str, str] = {}
        for ref in self.metrics:
            names = [m.name for m in metrics()]
            if ":" not in ref and ref not in names:  # a misspelt name: lookup cannot say
                raise ConfigError(f"metrics={ref!r} is invalid{did_you_mean(ref, names)}; allowed: "
                                  "MODULE:FUNCTION of a @cluster_metric (the built-in metrics "
                                  f"are always computed){R.user_ref_hint(ref)}")
            if lookup(ref).fn is None:
                raise ConfigError(f"metrics={ref!r} is invalid; allowed: MODULE:FUNCTION of a "
                                  "@cluster_metric (the built-in metrics are always computed)")
            name = lookup(ref).name  # the column it fills: one metric per column
            _check(columns.setdefault(name, ref) == ref, "metrics", self.metrics,
                   f"metrics naming distinct columns ({columns[name]} and {ref} both fill "
                   f"{name!r})")
        p, w = self.policy, self.workload
        need, rule = p.min_evals, p.decl.min_evals_text
        _check(w.n_evals >= need, "n_evals", w.n_evals,
               f"at least {rule + '=' if rule else ''}{need} evaluations for {p.label}")

    @classmethod
    def from_specs(cls, scheduler: str | SchedulerConfig = D.SCHEDULER,
                   policy: str | PolicyConfig = D.POLICY, *,
                   metrics: tuple[str, ...] | list[str] | str = (),
                   **workload: Any) -> "SimConfig":
        """A cell from specs: ``from_specs("srtf_est", "evalstop:k=2", sigma=0.05,
        metrics=["mymetrics:waste_per_hacking_job"])``; every other keyword is a
        ``WorkloadConfig`` field (``help(fastsim.config.WorkloadConfig)`` lists each with
        its unit and default).  The scheduler and the policy may also be given as a
        ``SchedulerConfig`` and a ``PolicyConfig``, taken as they are (as ``with_policy``
        takes one)."""
        names = [f.name for f in fields(WorkloadConfig)]
        for key in workload:
            if key not in names:  # its keywords are the scheduler, the policy and the workload's
                _check_spec_param(key, scheduler=scheduler, policy=policy)
                for spec, owners in R.spec_owners(key)[:1]:  # k=3: evalstop's, in its spec
                    raise ConfigError(f"SimConfig.from_specs() keyword {key!r} is unknown: "
                                      f"{key} is a parameter of {', '.join(owners[:3])}; it goes "
                                      f"in the spec, {spec}=\"{owners[0]}:{key}=...\"")
                raise unknown_keyword("SimConfig.from_specs()", key,
                                      ["scheduler", "policy", "metrics", *names])
        return cls(WorkloadConfig(**workload), _spec_or_config(SchedulerConfig, scheduler),
                   _spec_or_config(PolicyConfig, policy), metrics)

    def with_policy(self, policy: PolicyConfig | str) -> "SimConfig":
        return replace(self, policy=_spec_or_config(PolicyConfig, policy))

    def to_dict(self) -> dict[str, Any]:
        d = {"workload": asdict(self.workload), "scheduler": self.scheduler.to_dict(),
             "policy": self.policy.to_dict()}
        if self.metrics:  # absent when unused, so every earlier cell id stays what it was
            d["metrics"] = list(self.metrics)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SimConfig":
        _check(isinstance(d, dict), "config", d, "a dict of workload, scheduler, policy, metrics")
        for key in ("workload", "scheduler", "policy"):
            _check(isinstance(d.get(key, {}), dict), key, d.get(key), "a dict of its fields")
        for part in d:
            if part not in ("workload", "scheduler", "policy", "metrics"):
                raise ConfigError(f"config section {part!r} is unknown; allowed: workload, "
                                  "scheduler, policy, metrics")
        return cls(WorkloadConfig(**_known(WorkloadConfig, d.get("workload", {}))),
                   SchedulerConfig(**_known(SchedulerConfig, d.get("scheduler", {}))),
                   PolicyConfig(**_known(PolicyConfig, d.get("policy", {}))),
                   tuple(d.get("metrics", ())))


def _spec_or_config(kind: type, value: Any) -> Any:
    """``value`` as a ``kind`` (``SchedulerConfig``, ``PolicyConfig``): a spec parsed, a
    config object taken as it is; anything else one error that names both forms."""
    if isinstance(value, kind):
        return value
    what = "scheduler" if kind is SchedulerConfig else "policy"
    _check(isinstance(value, str), what, value, f"a {what} spec (\"{getattr(D, what.upper())}\", "
           f"\"NAME:key=value,...\") or a {kind.__name__}{R.spec_hint(value)}")
    return kind.parse(value)


# What a draw feeds, when nothing else reads it (no result column holds a loss or a score).
LOSS_FIELDS = ("loss_sigma", "loss0", "loss_inf", "loss_tau")
SCORE_FIELDS = ("sigma", "sigma_spread", "noise_rho")
_TYPE_NAMES = {"lora": "LoRA", "dpo": "DPO", "rlhf": "RLHF"}


def reads(series: str, scheduler: SchedulerConfig, policy: PolicyConfig) -> bool:
    """Whether a run reads the observed ``series`` (``fastsim.registry.SERIES``), as the
    scheduler's and the policy's declarations say (``reads``): ``simulate`` draws the scores
    and the loss readings only then.  A user's stop policy counts as ``policy_reads`` says:
    a policy reading losses with the default ``reads`` had ``--loss-sigma``, which moved
    its results, noted as having no effect."""
    return series in scheduler.decl.reads or policy_reads(series, policy)


def policy_reads(series: str, policy: PolicyConfig) -> bool:
    """Whether ``policy`` reads the observed ``series``: declared (``reads``), or, for a
    user's, loaded by its function, declared or not (``purity.loaded_arguments``): a
    user's stop policy is handed every series (by the simulator, replay and the monitor)."""
    return series in policy.decl.reads or (
        policy.decl.user is not None and series in loaded_arguments(policy.decl.user.py_func))


def _and(names: Any) -> str:
    """``a, b and c``: names in a reason."""
    names = list(names)
    return ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else names[0]


def _readers(series: str) -> str:
    """The built-in schedulers and stop policies that read ``series``, for a reason."""
    return _and(d.name for d in (*R.schedulers(), *R.policies())
                if d.user is None and series in d.reads)


class Unread(str):
    """Why a workload field is inert when nothing here reads the series it feeds: the text
    a run says (``nothing reads training losses (fifo with evalstop(k=2) and none;
    loss_aware and loss_plateau do)``), a ``str``, which keeps apart what it concerns (the
    scheduler, the policies, those acting on no job) so that a sweep says the reason once
    for all its cells (``merged``): each cell's text joined repeated its clause."""

    def __new__(cls, head: str, schedulers: Any, policies: Any, idle: Any = (),
                tail: str = "") -> "Unread":
        schedulers, policies, idle = (tuple(dict.fromkeys(names))
                                      for names in (schedulers, policies, idle))
        concerns = (f"{_and(schedulers)} with " if schedulers else "") + _and(policies)
        parts = [concerns, *([_idle_text(idle)] if idle else []), *([tail] if tail else [])]
        self = super().__new__(cls, f"{head} ({'; '.join(parts)})")
        self.head, self.schedulers, self.policies, self.idle, self.tail = (
            head, schedulers, policies, idle, tail)
        return self

    def __reduce__(self):  # str's would call __new__ with the text alone
        return Unread, (self.head, self.schedulers, self.policies, self.idle, self.tail)

    @staticmethod
    def merged(reasons: Any) -> list[str]:
        """``reasons`` each once, in order, those of one clause (an ``Unread`` of the same
        head and tail) said once, naming every scheduler and policy they concern."""
        said: dict[Any, str] = {}
        for why in reasons:
            if not isinstance(why, Unread):
                said.setdefault(why, why)
                continue
            key = (Unread, why.head, why.tail)
            first = said.get(key, why)
            said[key] = Unread(why.head, first.schedulers + why.schedulers,
                               first.policies + why.policies, first.idle + why.idle, why.tail)
        return list(said.values())


def inert_settings(cfg: SimConfig, baseline: PolicyConfig | None = None,
                   given: Any = None, jobs: bool = False) -> dict[str, str]:
    """The workload fields of ``given`` (default: those differing from their default) that
    no result of ``cfg`` and of its ``baseline`` on the same clusters depends on, each with
    why: a user who set one believes they changed the run.  ``policy`` and ``baseline``
    (always given by default) when that policy acts on no job: every result is then the
    policy ``none``'s, as if it were not there.  ``jobs``: the run's per-job
    arrays are kept or read (``keep_jobs``, an ``extract``, ``--jobs-out``), which carry
    ``t_est_h``, as do ``cfg``'s user metrics.  ``tests/test_inert_settings.py`` checks
    that changing each changes no result."""
    w, s = cfg.workload, cfg.scheduler
    policies = [cfg.policy] + ([baseline] if baseline is not None else [])
    # a policy acting on no job reads nothing: every result is the policy none's
    acting = [p for p in policies if not _acts_on_no_job([p], w)] or [PolicyConfig(name="none")]
    labels, idle = [p.label for p in policies], _idle_labels(policies, w)
    why: dict[str, str] = {}
    if not s.decl.preemptive:
        why["preempt_overhead_h"] = f"{s.label} never preempts a job, so none resumes"
    if not any(reads("losses", s, p) for p in acting):
        why.update(dict.fromkeys(LOSS_FIELDS, Unread("nothing reads training losses", [s.label],
                                                     labels, idle, f"{_readers('losses')} do")))
    if not any(reads("scores", s, p) for p in acting):
        why.update(dict.fromkeys(SCORE_FIELDS, Unread(
            "no stop policy here reads evaluation scores", (), labels, idle)))
    elif w.sigma == 0:
        why.update(dict.fromkeys(("sigma_spread", "noise_rho"),
                                 "sigma=0: evaluation scores carry no noise"))
    if not (jobs or cfg.metrics or any(reads("t_est_h", s, p) for p in acting)):
        why["est_sigma"] = Unread("nothing reads the run-time estimate t_est_h", [s.label],
                                  labels, idle, f"{_readers('t_est_h')} do, and per-job "
                                  "records carry it")
    for (t, name), share in zip(_TYPE_NAMES.items(), w.mix_fractions):
        if share == 0:
            why.update(dict.fromkeys((f"demands_{t}", f"median_{t}_h"),
                                     f"the mix has no {name} jobs"))
    lora, dpo, rlhf = w.mix_fractions
    if rlhf == 0:
        why.update(dict.fromkeys(("base_rate", "ustar_healthy"), "the mix has no RLHF jobs"))
    elif w.base_rate == 1:
        why["ustar_healthy"] = "base_rate=1: every RLHF job is hacking"
    if dpo == 0:
        why["dpo_base_rate"] = "the mix has no DPO jobs"
    if (rlhf == 0 or w.base_rate == 0) and (dpo == 0 or w.dpo_base_rate == 0):
        why.update(dict.fromkeys(("ustar_hacking", "hack_sharpness"), "no job can be hacking "
                                 "(no RLHF job or base_rate=0, and no DPO job or dpo_base_rate=0)"))
    # gold curves (MODEL.md section 4): RLHF and hacking DPO jobs take the RL form (kl_gamma),
    # LoRA and healthy DPO jobs the saturating one (tau)
    if rlhf == 0 and (dpo == 0 or w.dpo_base_rate == 0):
        why["kl_gamma"] = ("no job has an RL-form gold curve (no RLHF job, and no DPO job or "
                           "dpo_base_rate=0)")
    if lora == 0 and (dpo == 0 or w.dpo_base_rate == 1):
        why["tau"] = ("no job has a saturating gold curve (no LoRA job, and no DPO job or "
                      "dpo_base_rate=1)")
    for name, p in (("policy", cfg.policy), ("baseline", baseline)):
        if p is not None and (idle := _acts_on_no_job([p], w)):
            why[name] = f"{idle}: every result is the policy none's"
    if given is None:
        given = [f.name for f in fields(WorkloadConfig) if getattr(w, f.name) != f.default]
        given += ["policy", "baseline"]
    return {name: why[name] for name in given if name in why}


def _acts_on_no_job(policies: list[PolicyConfig], w: WorkloadConfig) -> str:
    """Which of ``policies`` act on no job of workload ``w``, and why ("" if each acts on
    some): with scope=rlhf (the default) a policy decides on RLHF jobs alone, and the mix
    may have none."""
    return _idle_text(_idle_labels(policies, w))


def _idle_labels(policies: list[PolicyConfig], w: WorkloadConfig) -> list[str]:
    return list(dict.fromkeys(p.label for p in policies
                              if p.decl.scoped and p.scope == "rlhf" and w.mix_fractions[2] == 0))


def _idle_text(labels: Any) -> str:
    labels = list(labels)
    if not labels:
        return ""
    return (f"{_and(labels)} act{'s' if len(labels) == 1 else ''} on RLHF jobs only "
            "(scope=rlhf), and the mix has no RLHF jobs")


def self_baseline(policy: PolicyConfig, baseline: PolicyConfig | None) -> str | None:
    """Why every change of a run is 0 when its ``baseline`` is its ``policy`` itself (None
    when it is not): the changes print as 0.00%, and whoever wrote it meant another."""
    if baseline is None or baseline != policy:
        return None
    return (f"the baseline is the policy itself, {policy.label}, on the same clusters: "
            "every change is 0 by construction")


def _known(cls: type, kw: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    for k in kw:
        if k not in names:
            raise ConfigError(f"{cls.__name__} field {k!r} is unknown; allowed: "
                              f"{', '.join(sorted(names))}")
    return dict(kw)


def _fields_doc() -> str:
    """``Attributes``: each workload field with its meaning, unit, allowed values and
    default."""
    rows = [f"    {f.name} : {FIELD_HELP[f.name]}; allowed: {FIELD_ALLOWED[f.name]} "
            f"(default {f.default!r})"
            for f in fields(WorkloadConfig)]
    return "\n    Attributes\n    ----------\n" + "\n".join(rows) + "\n"


WorkloadConfig.__doc__ += _fields_doc()


# A misspelt field (WorkloadConfig(n_job=30)) is one ConfigError, as in from_specs and from_dict.
for _cls in (WorkloadConfig, SchedulerConfig, PolicyConfig, SimConfig):
    _cls.__init__ = known_keywords(f"{_cls.__name__}()")(_cls.__init__)
